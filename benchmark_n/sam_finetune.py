"""Fine-tuning a box-prompted segmenter on (clean or noisy) training masks: Table 14's "Fine-tune" row (App. F).

    from benchmark_n.sam_finetune import finetune, FINETUNERS, DEFAULTS, SAM_DEFAULTS
    from benchmark_n.wan import prompt_quality
    tool = finetune(train, "tiny", seed=0)                 # offline stand-in: a small box-prompted U-Net, CPU, seconds
    tool = finetune(noisy_train, "sam", checkpoint=PATH)   # the paper: SAM's mask decoder fine-tuned (CUDA if there)
    tool.history, tool.settings()                          # per-epoch mean training loss; backend, hparams, seed, ...
    prompt_quality(val, ["box"], annotator=tool, seeds=[0])   # Table 14: clean val boxes -> mean IoU, mean Dice ("F1")

``data`` (the training set) is what ``benchmark_n.wan`` accepts: a COCO dict ``.dataset`` and the images, either
``.image(image_id)`` -> (h, w, 3) uint8 RGB (``benchmark_n.sources.Annotations``; ``required=True`` where it takes
it) or ``.images`` (n, h, w, 3) in the order of ``dataset["images"]`` (``benchmark_n.shapes.ShapesData``). Noisy
training annotations are a dataset with the same images and noisy annotations (e.g. ``noise_dataset``'s COCO dict
in an ``Annotations`` of the clean images). The returned object is a ``wan.Annotator`` (``name``, ``settings()``,
``set_image(image)``, ``segment(prompt, rng)`` -> (h, w) bool), so the fine-tune row is scored by
``wan.prompt_quality`` exactly as the zero-shot row is.

**Protocol** (the paper gives none; these are our decisions):

* Training examples: every non-crowd annotation with a non-empty mask, each prompted with the tight box
  (``wan.tight_box``, ``[x_min, y_min, x_max, y_max]``, max inclusive) of its *own* mask, i.e. of the noisy mask
  when training on noisy annotations: the model learns the annotations' relation between box, image and mask.
* Box prompts only: the returned annotator raises ConfigError for a point prompt.
* One mask per prompt (``multimask_output=False`` for SAM); loss = soft Dice + BCE (on logits, mean over pixels),
  summed, per instance and averaged over the batch.
* Randomness: ``seed`` seeds torch (``shared.seeding.seed_everything``: initialisation, deterministic algorithms)
  and the shuffling generator; on CPU the same seed and inputs give identical weights and masks (bytes) for a given
  torch build and thread count; CUDA kernels may differ in the last bits.

**Backends** (``FINETUNERS``):

* ``tiny`` (offline, CPU, the stand-in where SAM weights are absent): ``BoxMaskNet``, a 2-level U-Net (one 3x3 conv
  + BatchNorm + ReLU per block, widths w, 2w, 2w; ``width`` 16) on a window per instance: the box grown by
  ``context`` (0.25) x its longer side (at least ``MIN_MARGIN`` px) each way, clipped to the image (the same margin
  in x and y, as ``wan.grabcut_box``), warped to ``size`` x ``size`` (24; ``cv2.resize``, INTER_AREA when shrinking,
  else INTER_LINEAR; like Mask R-CNN's RoIAlign the aspect ratio is not kept). Input (4, size, size): RGB in [0, 1]
  and a box channel (1 inside the box, 0 outside, drawn at window resolution, resized the same way); target: the
  mask window resized the same way (soft values). Adam, ``DEFAULTS``, batches through ``shared.training.train_epoch``.
  Prediction: the (size, size) logits resized back to the window (INTER_LINEAR, i.e. bilinear), > 0, pasted into an
  (h, w) bool mask (nothing outside the window). ``device``: CPU unless asked. On the 96-px COCO-shapes pair of
  ``runs.DataRecipe()`` (128 train / 40 val images, 264 / 85 instances) training takes 3.5-5.5 s on one CPU thread
  (a busy 2-core machine); from clean val boxes the mean IoU is 0.82-0.835, mean Dice 0.88-0.89 (seeds 0-2; GrabCut
  0.78, untrained 0-0.29), the errors mostly heavily occluded objects whose box holds the occluder; trained on
  masks dilated with k = 7 (``noise.ablate(..., "dilation", "high")``) its val masks are 1.25-1.30 x larger than
  the clean-trained model's (k = 3: 1.09-1.15): it learns the label noise.
* ``sam`` (the paper's model): ``finetune_sam`` on a ``segment_anything`` Sam, **mask decoder only** (image encoder
  and prompt encoder frozen: run under ``no_grad``, their tensors untouched). Per image and epoch the embedding is
  computed once (SamPredictor's preprocessing: ``ResizeLongestSide(img_size)``, ``sam.preprocess``); up to
  ``max_instances`` of its instances (a seeded random subset when it has more) form one step: boxes through
  ``transform.apply_boxes_torch``, the frozen prompt encoder, ``mask_decoder(..., multimask_output=False)``,
  ``postprocess_masks`` to the original (h, w), Dice + BCE against the masks. AdamW on the mask-decoder parameters
  (``SAM_DEFAULTS``: 1 epoch, lr 1e-5, weight decay 0.01, at most 16 instances per step: our choice, not the
  paper's). ``checkpoint``: a path (default ``wan.default_sam_checkpoint()``, ViT-H; model type from the file
  name; a missing package or file raises ``wan.load_sam``'s DataNotFoundError) or a ``Sam`` object. The input model
  is never modified: the fine-tuned model shares its (frozen) image and prompt encoders and has a copy of its mask
  decoder (on another ``device``, a copy of the whole model). ``device``: CUDA when available (a Sam object: its
  own device). The encoder runs again every epoch (embeddings are not cached: ViT-H's are 4 MB an image). The
  returned annotator predicts with a ``SamPredictor`` around it, ``multimask_output=False``.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from pycocotools import mask as mask_utils
from torch import nn

from benchmark_n.coco import ann_to_mask, ann_to_rle, check_coco, image_sizes
from benchmark_n.wan import Annotator, image_getter, load_sam, tight_box
from shared.device import select_device
from shared.errors import ConfigError, DataFormatError, unknown_choice
from shared.progress import progress as progress_bar
from shared.seeding import seed_everything
from shared.training import train_epoch

#: ``tiny`` hyperparameters (our choice: 3.5-5.5 s on one CPU thread for the 96-px COCO-shapes train set, 264
#: instances; ``epochs`` 0 gives the untrained model)
DEFAULTS = {"epochs": 15, "lr": 3e-3, "batch_size": 8, "width": 16, "size": 24, "context": 0.25}
#: ``sam`` hyperparameters (our choice; the paper gives none): AdamW on the mask decoder
SAM_DEFAULTS = {"epochs": 1, "lr": 1e-5, "weight_decay": 0.01, "max_instances": 16}
MIN_MARGIN = 4  # px: the smallest context around a box in the tiny model's window
POINT_PROMPT_HELP = ("was fine-tuned with box prompts only (Table 14's fine-tune row); give it a box prompt "
                     "({'box': [x0, y0, x1, y1]}), e.g. wan.prompt_quality(val, ['box'], annotator=...)")


# ------------------------------------------------------------------------------------------------ shared pieces
def _checked_image(image, h: int | None = None, w: int | None = None, where: str = "the image") -> np.ndarray:
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8 or (
            h is not None and image.shape[:2] != (h, w)):
        size = "(h, w, 3)" if h is None else f"({h}, {w}, 3)"
        raise DataFormatError(f"{where}: expected an {size} uint8 RGB image, got {image.shape} {image.dtype}")
    return np.ascontiguousarray(image)


def training_index(data) -> list[tuple[int, tuple[int, int], list[dict]]]:
    """[(image_id, (h, w), [annotation, ...]), ...]: the images with at least one non-crowd annotation whose mask
    is non-empty, in ``dataset["images"]`` order, with those annotations in list order (nothing decoded but the
    areas). ConfigError when there is none."""
    dataset = data.dataset
    check_coco(dataset)
    sizes = image_sizes(dataset)
    by_image: dict = {}
    for ann in dataset["annotations"]:
        if not ann.get("iscrowd", 0):
            by_image.setdefault(ann["image_id"], []).append(ann)
    index = []
    for entry in dataset["images"]:
        h, w = sizes[entry["id"]]
        anns = [a for a in by_image.get(entry["id"], []) if mask_utils.area(ann_to_rle(a, h, w)) > 0]
        if anns:
            index.append((entry["id"], (h, w), anns))
    if not index:
        raise ConfigError("nothing to fine-tune on: the dataset has no non-crowd annotation with a non-empty mask")
    return index


def _load(image_of, item) -> tuple[np.ndarray, list[np.ndarray]]:
    """The (h, w, 3) uint8 image and (h, w) bool masks of a ``training_index`` item (DataFormatError for an image
    that is not (h, w, 3) uint8)."""
    image_id, (h, w), anns = item
    image = _checked_image(image_of(image_id), h, w, f"image {image_id}")
    return image, [ann_to_mask(a, h, w).astype(bool) for a in anns]


def dice_bce_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Soft Dice loss + BCE of logits (B, 1, H, W) against targets in [0, 1] of the same shape: per instance
    ``1 - (2 sum(p t) + 1) / (sum(p) + sum(t) + 1)`` plus the mean pixel BCE, averaged over the batch."""
    logits, target = logits.float().flatten(1), target.float().flatten(1)
    p = torch.sigmoid(logits)
    dice = 1 - (2 * (p * target).sum(1) + 1) / (p.sum(1) + target.sum(1) + 1)
    bce = F.binary_cross_entropy_with_logits(logits, target, reduction="none").mean(1)
    return (dice + bce).mean()


def _check_hparams(hparams: dict | None, defaults: dict, backend: str) -> dict:
    hparams = dict(hparams or {})
    unknown = set(hparams) - set(defaults)
    if unknown:
        raise ConfigError(f"unknown {backend} fine-tuning hyperparameter(s) {sorted(unknown)}; valid: "
                          f"{', '.join(defaults)}")
    hp = {**defaults, **hparams}
    for key in ("epochs", "batch_size", "width", "size", "max_instances"):
        if key in hp and (not isinstance(hp[key], (int, np.integer)) or isinstance(hp[key], bool)
                          or hp[key] < (0 if key == "epochs" else 1)):
            raise ConfigError(f"{key} must be an integer >= {0 if key == 'epochs' else 1}, got {hp[key]!r}")
    for key in ("lr", "weight_decay", "context"):
        if key in hp and (not isinstance(hp[key], (int, float, np.integer, np.floating)) or isinstance(hp[key], bool)):
            raise ConfigError(f"{key} must be a number, got {hp[key]!r} (in YAML write 1.0e-5, not 1e-5)")
    if not hp["lr"] > 0 or hp.get("weight_decay", 0) < 0 or hp.get("context", 0) < 0:
        raise ConfigError(f"lr must be > 0 and weight_decay, context >= 0, got {hparams}")
    if "size" in hp and hp["size"] % 4:
        raise ConfigError(f"size must be a multiple of 4 (two 2x poolings), got {hp['size']}")
    return hp


def _check_seed(seed) -> int:
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _box_only(prompt: dict, name: str) -> np.ndarray:
    if "box" not in prompt or prompt["box"] is None:
        raise ConfigError(f"the {name} annotator {POINT_PROMPT_HELP}; got a prompt with {sorted(prompt)}")
    if any(prompt.get(k) is not None for k in ("point_coords", "point_labels", "mask_input")):
        raise ConfigError(f"the {name} annotator {POINT_PROMPT_HELP}; got extra prompts {sorted(prompt)}")
    return np.asarray(prompt["box"], dtype=np.float64).reshape(4)


# ------------------------------------------------------------------------------------------------ tiny backend
def box_window(box, h: int, w: int, context: float) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
    """The integer box ``(bx0, by0, bx1, by1)`` (max inclusive; ``box`` rounded outwards, clipped into the image)
    and the window ``(cx0, cy0, cx1, cy1)`` (max exclusive): the box grown by max(``MIN_MARGIN``, int(``context``
    x its longer side)) px each way, clipped to the (h, w) image."""
    x0, y0, x1, y1 = np.asarray(box, dtype=np.float64).reshape(4)
    bx0, by0 = int(np.clip(np.floor(x0), 0, w - 1)), int(np.clip(np.floor(y0), 0, h - 1))
    bx1, by1 = int(np.clip(np.ceil(x1), bx0, w - 1)), int(np.clip(np.ceil(y1), by0, h - 1))
    margin = max(MIN_MARGIN, int(context * max(bx1 - bx0 + 1, by1 - by0 + 1)))
    window = (max(bx0 - margin, 0), max(by0 - margin, 0), min(bx1 + margin + 1, w), min(by1 + margin + 1, h))
    return (bx0, by0, bx1, by1), window


def _resize(array: np.ndarray, width: int, height: int) -> np.ndarray:
    shrink = width * height < array.shape[0] * array.shape[1]
    return cv2.resize(array, (width, height), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def window_input(image: np.ndarray, box, size: int, context: float, mask: np.ndarray | None = None):
    """The tiny model's input (4, size, size) float32 (RGB in [0, 1], box channel) of ``box`` on an (h, w, 3) uint8
    image, the window (cx0, cy0, cx1, cy1), and with ``mask`` ((h, w) bool) the target (1, size, size) float32."""
    h, w = image.shape[:2]
    (bx0, by0, bx1, by1), (cx0, cy0, cx1, cy1) = box_window(box, h, w, context)
    planes = np.zeros((cy1 - cy0, cx1 - cx0, 4), np.float32)
    planes[..., :3] = image[cy0:cy1, cx0:cx1] / np.float32(255)
    planes[by0 - cy0:by1 - cy0 + 1, bx0 - cx0:bx1 - cx0 + 1, 3] = 1
    x = _resize(planes, size, size).transpose(2, 0, 1)
    target = None
    if mask is not None:
        target = _resize(mask[cy0:cy1, cx0:cx1].astype(np.float32), size, size)[None]
    return np.ascontiguousarray(x), (cx0, cy0, cx1, cy1), target


def _conv(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))


class BoxMaskNet(nn.Module):
    """(B, 4, S, S) (RGB + box channel) -> (B, 1, S, S) mask logits, S divisible by 4: a 2-level U-Net, one 3x3
    conv + BatchNorm + ReLU per block (widths w, 2w, bottleneck 2w), nearest upsampling, skip concatenations."""

    def __init__(self, width: int = 16, in_channels: int = 4):
        super().__init__()
        w = width
        self.enc1, self.enc2, self.bottom = _conv(in_channels, w), _conv(w, 2 * w), _conv(2 * w, 2 * w)
        self.dec2, self.dec1 = _conv(4 * w, w), _conv(2 * w, w)
        self.head = nn.Conv2d(w, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        b = self.bottom(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([F.interpolate(b, scale_factor=2), e2], 1))
        return self.head(self.dec1(torch.cat([F.interpolate(d2, scale_factor=2), e1], 1)))


class TinyBoxAnnotator:
    """A trained ``BoxMaskNet`` as a ``wan.Annotator``: ``segment({"box": [x0, y0, x1, y1]}, rng)`` -> (h, w) bool
    (rng unused: prediction is deterministic)."""
    name = "tiny-box-finetuned"

    def __init__(self, model: BoxMaskNet, hparams: dict, seed: int, examples: int, history: list[float],
                 device=None):
        self.model, self.hparams, self.seed, self.examples = model.eval(), dict(hparams), seed, examples
        self.history = list(history)
        self.device = next(model.parameters()).device if device is None else device
        self.image = None

    def settings(self) -> dict:
        return {"backend": "tiny", "hparams": dict(self.hparams), "seed": self.seed, "prompt": "box",
                "training_examples": self.examples,
                "final_loss": self.history[-1] if self.history else float("nan")}

    def set_image(self, image: np.ndarray) -> None:
        self.image = _checked_image(image)

    @torch.no_grad()
    def segment(self, prompt: dict, rng: np.random.Generator | None = None) -> np.ndarray:
        box = _box_only(prompt, self.name)
        if self.image is None:
            raise ConfigError("set_image(image) before segment(prompt)")
        size, context = self.hparams["size"], self.hparams["context"]
        x, (cx0, cy0, cx1, cy1), _ = window_input(self.image, box, size, context)
        logits = self.model(torch.from_numpy(x)[None].to(self.device))[0, 0].float().cpu().numpy()
        out = np.zeros(self.image.shape[:2], bool)
        out[cy0:cy1, cx0:cx1] = cv2.resize(logits, (cx1 - cx0, cy1 - cy0), interpolation=cv2.INTER_LINEAR) > 0
        return out


def finetune_tiny(data, hparams: dict | None = None, seed: int = 0, *, device=None,
                  progress: bool = True) -> TinyBoxAnnotator:
    """Train a ``BoxMaskNet`` on every non-crowd non-empty annotation of ``data`` prompted with its tight box
    (module docstring; ``DEFAULTS``) and return it as a ``TinyBoxAnnotator``. ``device``: "cpu" (default), "auto",
    "cuda"."""
    hp = _check_hparams(hparams, DEFAULTS, "tiny")
    seed = _check_seed(seed)
    device = select_device(device or "cpu")
    index, image_of = training_index(data), image_getter(data)
    xs, ys = [], []
    for item in index:
        image, masks = _load(image_of, item)
        for mask in masks:
            x, _, y = window_input(image, tight_box(mask), hp["size"], hp["context"], mask)
            xs.append(x)
            ys.append(y)
    X, Y = torch.from_numpy(np.stack(xs)).to(device), torch.from_numpy(np.stack(ys)).to(device)
    seed_everything(seed)
    model = BoxMaskNet(hp["width"]).to(device)
    optimiser = torch.optim.Adam(model.parameters(), lr=hp["lr"])
    generator = torch.Generator().manual_seed(seed)
    epochs = range(hp["epochs"])
    if progress:
        epochs = progress_bar(epochs, desc=f"fine-tune tiny box model, seed {seed}")
    history = [train_epoch(model, X, Y, optimiser, batch_size=hp["batch_size"], generator=generator,
                           loss_fn=dice_bce_loss) for _ in epochs]
    return TinyBoxAnnotator(model.eval(), hp, seed, len(xs), history, device)


# ------------------------------------------------------------------------------------------------ sam backend
def _sam_classes():
    try:
        from segment_anything import SamPredictor
        from segment_anything.modeling import Sam
    except ImportError:  # the same message as wan.load_sam
        load_sam(None)
        raise
    return Sam, SamPredictor


def _trainable_copy(sam, device=None):
    """A Sam sharing ``sam``'s image and prompt encoders (frozen, never written) with a deep copy of its mask
    decoder, on ``sam``'s device; on another ``device``, a deep copy of the whole model there (``sam`` stays)."""
    Sam, _ = _sam_classes()
    here = sam.pixel_mean.device
    if device is not None:
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device != here:
            return copy.deepcopy(sam).to(device)
    copied = Sam(sam.image_encoder, sam.prompt_encoder, copy.deepcopy(sam.mask_decoder),
                 pixel_mean=sam.pixel_mean.flatten().tolist(), pixel_std=sam.pixel_std.flatten().tolist())
    copied.image_format = sam.image_format
    return copied.to(here)


class FinetunedSamAnnotator:
    """A fine-tuned Sam as a ``wan.Annotator``: a ``SamPredictor`` around it, ``set_image`` once per image, each box
    prompt predicted with ``multimask_output=False``."""
    name = "sam-finetuned"

    def __init__(self, model, hparams: dict, seed: int, examples: int, history: list[float],
                 checkpoint: str | None = None):
        _, SamPredictor = _sam_classes()
        model.mask_decoder.eval()  # the encoders are the input model's, left as they are
        self.model, self.predictor = model, SamPredictor(model)
        self.hparams, self.seed, self.examples, self.history = dict(hparams), seed, examples, list(history)
        self.checkpoint = checkpoint

    def settings(self) -> dict:
        return {"backend": "sam", "hparams": dict(self.hparams), "seed": self.seed, "prompt": "box",
                "trained": "mask decoder", "multimask_output": False,
                "checkpoint": None if self.checkpoint is None else Path(self.checkpoint).name,
                "training_examples": self.examples,
                "final_loss": self.history[-1] if self.history else float("nan")}

    def set_image(self, image: np.ndarray) -> None:
        self.predictor.set_image(_checked_image(image))

    def segment(self, prompt: dict, rng: np.random.Generator | None = None) -> np.ndarray:
        box = _box_only(prompt, self.name)
        masks, _, _ = self.predictor.predict(box=box, multimask_output=False)
        return np.asarray(masks[0]).astype(bool)


def _resolve_sam(checkpoint, device):
    """(the Sam to start from, its checkpoint path or None): a Sam object as it is, else ``wan.load_sam``."""
    Sam, _ = _sam_classes()
    if isinstance(checkpoint, Sam):
        return checkpoint, None
    if checkpoint is not None and not isinstance(checkpoint, (str, os.PathLike)):
        raise ConfigError(f"checkpoint must be a path or a segment_anything Sam, got {type(checkpoint).__name__}")
    loaded = load_sam(checkpoint, device=None if device is None else str(device))
    return loaded.predictor.model, loaded.checkpoint


def finetune_sam(data, hparams: dict | None = None, seed: int = 0, *, checkpoint=None, device=None,
                 progress: bool = True) -> FinetunedSamAnnotator:
    """Fine-tune SAM's mask decoder on ``data``'s masks prompted with their tight boxes (module docstring;
    ``SAM_DEFAULTS``) and return a ``FinetunedSamAnnotator``. ``checkpoint``: a path (``wan.load_sam``) or a Sam
    object (left unchanged). ``device``: where to train (default: the model's device for a Sam object, else CUDA
    when available; a Sam object on another device is copied there whole)."""
    hp = _check_hparams(hparams, SAM_DEFAULTS, "sam")
    seed = _check_seed(seed)
    index, image_of = training_index(data), image_getter(data)
    target = None if device is None else select_device(device)
    base, path = _resolve_sam(checkpoint, target)
    sam = _trainable_copy(base, target)
    device = sam.pixel_mean.device
    _, SamPredictor = _sam_classes()
    transform = SamPredictor(sam).transform  # ResizeLongestSide(sam.image_encoder.img_size)
    seed_everything(seed)
    optimiser = torch.optim.AdamW(sam.mask_decoder.parameters(), lr=hp["lr"], weight_decay=hp["weight_decay"])
    generator = torch.Generator().manual_seed(seed)
    epochs = range(hp["epochs"])
    if progress:
        epochs = progress_bar(epochs, desc=f"fine-tune SAM mask decoder, seed {seed}")
    history = []
    for _ in epochs:
        sam.mask_decoder.train()
        total, count = 0.0, 0
        for i in torch.randperm(len(index), generator=generator).tolist():
            image, masks = _load(image_of, index[i])
            if sam.image_format != "RGB":  # as SamPredictor.set_image turns an RGB image into the model's format
                image = np.ascontiguousarray(image[..., ::-1])
            if len(masks) > hp["max_instances"]:
                chosen = torch.randperm(len(masks), generator=generator)[:hp["max_instances"]].sort().values
                masks = [masks[j] for j in chosen.tolist()]
            original_size = image.shape[:2]
            with torch.no_grad():
                resized = torch.as_tensor(transform.apply_image(image), device=device).permute(2, 0, 1)[None]
                input_size = tuple(resized.shape[-2:])
                embedding = sam.image_encoder(sam.preprocess(resized.float()))
                boxes = torch.as_tensor(np.stack([tight_box(m) for m in masks]), dtype=torch.float, device=device)
                sparse, dense = sam.prompt_encoder(points=None, boxes=transform.apply_boxes_torch(boxes,
                                                                                                 original_size),
                                                   masks=None)
            low_res, _ = sam.mask_decoder(image_embeddings=embedding, image_pe=sam.prompt_encoder.get_dense_pe(),
                                          sparse_prompt_embeddings=sparse, dense_prompt_embeddings=dense,
                                          multimask_output=False)
            logits = sam.postprocess_masks(low_res, input_size, original_size)  # (n, 1, h, w)
            target = torch.as_tensor(np.stack(masks)[:, None], dtype=torch.float, device=device)
            loss = dice_bce_loss(logits, target)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(masks)
            count += len(masks)
        history.append(total / count)
    sam.mask_decoder.eval()
    examples = sum(min(len(anns), hp["max_instances"]) for _, _, anns in index)
    return FinetunedSamAnnotator(sam, hp, seed, examples, history, path)


# ------------------------------------------------------------------------------------------------ registry
@dataclass(frozen=True)
class Finetuner:
    """A fine-tuning backend: ``run(data, hparams, seed, checkpoint=, device=, progress=)`` -> an Annotator;
    ``defaults``: its hyperparameters."""
    description: str
    defaults: dict
    run: Callable[..., Annotator]


def _run_tiny(data, hparams, seed, *, checkpoint=None, device=None, progress=True):
    if checkpoint is not None:
        raise ConfigError("the tiny backend trains from scratch and takes no checkpoint")
    return finetune_tiny(data, hparams, seed, device=device, progress=progress)


FINETUNERS = {
    "tiny": Finetuner("offline stand-in: a small box-prompted U-Net (RGB + box channel on a window around the box), "
                      "trained from scratch with Dice + BCE, Adam; CPU, seconds", DEFAULTS, _run_tiny),
    "sam": Finetuner("segment_anything SAM, mask decoder fine-tuned (encoders frozen), box prompts, "
                     "multimask_output=False, Dice + BCE, AdamW (the paper: ViT-H)", SAM_DEFAULTS, finetune_sam),
}


def finetune(data, backend: str = "tiny", hparams: dict | None = None, seed: int = 0, *, checkpoint=None,
             device=None, progress: bool = True) -> Annotator:
    """A box-prompted annotator fine-tuned on ``data``'s annotations (module docstring) with backend ``backend``
    (``FINETUNERS``) and ``hparams`` (updating ``DEFAULTS`` / ``SAM_DEFAULTS``; unknown keys raise ConfigError).
    ``checkpoint`` (sam only): a path or a Sam object. ``progress``: a tqdm bar over epochs. The result has
    ``name``, ``settings()``, ``history`` (per-epoch mean training loss), ``set_image`` and ``segment``."""
    if backend not in FINETUNERS:
        raise unknown_choice("fine-tuning backend", backend, FINETUNERS)
    return FINETUNERS[backend].run(data, hparams, seed, checkpoint=checkpoint, device=device, progress=progress)


__all__ = ["DEFAULTS", "SAM_DEFAULTS", "MIN_MARGIN", "training_index", "dice_bce_loss",
           "box_window", "window_input", "BoxMaskNet", "TinyBoxAnnotator", "finetune_tiny", "FinetunedSamAnnotator",
           "finetune_sam", "Finetuner", "FINETUNERS", "finetune"]
