"""The full profile's instance segmenter: torchvision's Mask R-CNN (ResNet-50-FPN) on MMDetection's 1x schedule.

"All experiments use the default configs from MMDetection" (App. D.3): ``mask-rcnn_r50_fpn_1x_coco`` translated to
torchvision. SGD, momentum 0.9, weight decay 1e-4 on every parameter, lr 0.02 for a total batch of 16 scaled by the
linear rule (``lr = 0.02 * batch_size / 16`` unless ``lr`` is given; mmdet's ``auto_scale_lr``); linear warm-up over
500 iterations from 0.001 x lr; lr x 0.1 after epochs 8 and 11; 12 epochs; shorter side resized to 800, longer side
at most 1333 (torchvision's ``min_size`` / ``max_size``), padded to a multiple of 32; horizontal flip with p = 0.5;
batches grouped by orientation (landscape / portrait, mmdet's ``AspectRatioBatchSampler``); an ImageNet-pretrained
backbone (``ResNet50_Weights.IMAGENET1K_V1``, the file mmdet's ``torchvision://resnet50`` is) with the stem and
stage 1 frozen (``trainable_layers=3``) and BatchNorm frozen (``FrozenBatchNorm2d``); at test time at most 100
detections per image above score 0.05, masks thresholded at 0.5. Trained on the (noisy) train annotations,
evaluated on the clean val images.

    result = fit_predict(train, val, {"batch_size": 8}, seed=0, device="cuda")
    result["detections"]        # COCO results on val: image_id, category_id, score, segmentation (RLE), bbox
    result["history"]           # a row per log_interval iterations: epoch, iteration, mean loss (and parts), lr
    result["instance_losses"]   # with log_losses: per training annotation and logged epoch, class and mask loss

``train`` and ``val`` have ``.dataset`` (a COCO dict) and ``.image(image_id, required=True)`` -> (h, w, 3) uint8 RGB
(``benchmark_n.sources.Annotations``). A training target has one box per annotation, by default the box of its
mask (``boxes="mask"``; ``boxes="annotation"`` uses the JSON ``bbox``, as mmdet does, so stale boxes stay stale),
its label (1..K in the order of ``train.dataset["categories"]``) and its mask; crowd annotations, empty masks and
boxes less than 1 px wide or high (mmdet's rule) are skipped and counted in the first history row. ``loss="sce"``
puts the Symmetric Cross-Entropy (alpha CE + beta RCE, RCE = 4 (1 - p_y); ``benchmark_n.tiny_seg.pixel_loss``) on
the RoI box head's classification over K + 1 classes (Table 13): torchvision's ``RoIHeads.forward`` calls the
module-level ``roi_heads.fastrcnn_loss``, which ``box_classification_loss`` replaces for the duration of each
training forward only (so not thread-safe: do not train two models in threads of one process).

Deviations from MMDetection's config. torchvision's model: the RoI box regression and RPN losses are smooth L1
(beta 1/9) instead of L1; RoIAlign is ``sampling_ratio=2, aligned=False`` instead of ``0, True``; resizing happens
in the model (bilinear on the tensor, after normalising) instead of in the data pipeline (cv2). RPN proposals are
mmdet's (before NMS 2000 per level in training, 1000 at test; 1000 per image kept after NMS). Training images
without annotations (e.g. all deleted by the noise) are kept as background-only images, where mmdet's
``filter_empty_gt`` drops them. One device only: no multi-GPU, so the paper's 4 x 2 or 8 x 2 batch is one
``batch_size`` and the lr follows the linear rule. A non-finite loss stops training with FloatingPointError (mmdet
would go on).

Precision (``precision``, ``PRECISIONS``). ``"fp32"`` is the official behaviour: mmdet's config trains in fp32 (no
``fp16`` / AmpOptimWrapper section). ``"auto"``, the default, trains and predicts with bfloat16 autocast on CUDA (an
H100 does ~15x the fp32 FLOP rate in bf16 on its tensor cores) and in fp32 elsewhere, so every CPU run (the
rehearsal's, the tests') is the fp32 run it was; ``"bf16"`` autocasts on any device (on a CPU slowly: the tests' way
to reach that code). Autocast covers the networks only (``NETWORKS``: backbone + FPN, RPN head, RoI box and mask
heads), whose outputs are cast back to fp32: anchors, box decoding, NMS, RoIAlign, the losses and the postprocessing
stay fp32 (as MMDetection 2's fp16 training kept its heads' losses and box decoding, ``force_fp32``). Autocasting the
whole forward would decode boxes in bf16 (torchvision's ``BoxCoder.decode`` casts the anchors to the deltas' dtype;
bf16 has 8 significant bits, so a coordinate of 512-1024 px moves in steps of 4 px). Weights, gradients and SGD's
state stay fp32; bf16 has fp32's exponent range, so no GradScaler. The detections are float32 as in fp32 runs. A bf16
run is keyed apart from the fp32 one (``key_hparams``).

Reproducibility. Training is seeded (``seed_everything``: deterministic algorithms where they exist), and on the CPU
the same seed gives the same bytes. On CUDA each step (forward and backward) runs with deterministic mode lifted
(``shared.seeding.nondeterministic_kernels``): under it torchvision's ``roi_align`` falls back to a pure-Python
implementation that needed a 44 GiB tensor for one COCO image's mask targets on an H200. Its CUDA kernel, the one
MMDetection trains with, accumulates its gradient with atomics, so two CUDA runs agree up to float rounding.
"""
from __future__ import annotations

import contextlib
import math
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from pycocotools import mask as mask_utils
from torch.utils.data import DataLoader, Dataset
from torchvision.models.detection import MaskRCNN, roi_heads
from torchvision.models.detection.backbone_utils import resnet_fpn_backbone

from benchmark_n.coco import ann_to_mask, ann_to_rle, mask_to_rle
from benchmark_n.tiny_seg import LOSSES, pixel_loss
from shared.device import device_type, select_device
from shared.errors import ConfigError, DataFormatError, DataNotFoundError
from shared.progress import progress
from shared.seeding import nondeterministic_kernels, seed_everything
from shared.training import as_float32, autocast_forward

#: hyperparameters of ``fit_predict``: mmdet's ``mask-rcnn_r50_fpn_1x_coco`` (lr None: 0.02 * batch_size / 16)
DEFAULTS = {"epochs": 12, "batch_size": 16, "lr": None, "momentum": 0.9, "weight_decay": 1e-4, "warmup_iters": 500,
            "warmup_ratio": 0.001, "lr_steps": [8, 11], "min_size": 800, "max_size": 1333, "hflip": 0.5,
            "backbone": "resnet50", "backbone_weights": "imagenet", "trainable_layers": 3, "max_iters": None,
            "score_threshold": 0.05, "detections_per_image": 100, "loss": "ce", "sce_alpha": 0.1, "sce_beta": 1.0,
            "loss_epochs": [], "num_workers": 0, "boxes": "mask", "log_interval": 50, "precision": "auto"}
BACKBONES = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d",
             "wide_resnet50_2", "wide_resnet101_2")  # torchvision's resnet_fpn_backbone
BOXES = {"mask": "the box of the annotation's mask", "annotation": "the annotation's bbox field (mmdet's choice)"}
PRECISIONS = {"auto": "bf16 autocast on CUDA, fp32 elsewhere", "bf16": "bf16 autocast on any device",
              "fp32": "no autocast (MMDetection's config, the official behaviour)"}
#: the submodules whose forward runs under autocast (their outputs cast back to fp32): the convolutions and linear
#: layers, nearly all of the FLOPs; the box geometry between them stays fp32 (module docstring)
NETWORKS = ("backbone", "rpn.head", "roi_heads.box_head", "roi_heads.box_predictor", "roi_heads.mask_head",
            "roi_heads.mask_predictor")
LR_GAMMA = 0.1  # MultiStepLR's factor at each of lr_steps
BASE_LR, BASE_BATCH = 0.02, 16  # mmdet's lr for its total batch (8 GPUs x 2 images)


def _is_int(v, low: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def _is_number(v, low: float = 0.0, high: float = math.inf) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and low <= v <= high


_CHECKS = {
    "epochs": (lambda v: _is_int(v, 1), "an int >= 1"),
    "batch_size": (lambda v: _is_int(v, 1), "an int >= 1"),
    "lr": (lambda v: v is None or _is_number(v) and v > 0, "None (0.02 * batch_size / 16) or a number > 0"),
    "momentum": (lambda v: _is_number(v, 0, 1), "a number in [0, 1]"),
    "weight_decay": (lambda v: _is_number(v), "a number >= 0"),
    "warmup_iters": (lambda v: _is_int(v), "an int >= 0"),
    "warmup_ratio": (lambda v: _is_number(v, 0, 1) and v > 0, "a number in (0, 1]"),
    "lr_steps": (lambda v: isinstance(v, (list, tuple)) and all(_is_int(s, 1) for s in v), "a list of epochs >= 1"),
    "min_size": (lambda v: _is_int(v, 1), "an int >= 1"),
    "max_size": (lambda v: _is_int(v, 1), "an int >= 1"),
    "hflip": (lambda v: _is_number(v, 0, 1), "a probability in [0, 1]"),
    "backbone": (lambda v: v in BACKBONES, f"one of {', '.join(BACKBONES)}"),
    "backbone_weights": (lambda v: v is None or isinstance(v, (str, Path)),
                         "'imagenet', None (random init) or the path of a state dict file"),
    "trainable_layers": (lambda v: _is_int(v) and v <= 5, "an int in 0..5"),
    "max_iters": (lambda v: v is None or _is_int(v, 1), "None or an int >= 1"),
    "score_threshold": (lambda v: _is_number(v, 0, 1), "a number in [0, 1]"),
    "detections_per_image": (lambda v: _is_int(v, 1), "an int >= 1"),
    "loss": (lambda v: v in LOSSES, f"one of {', '.join(LOSSES)}"),
    "sce_alpha": (lambda v: _is_number(v), "a number >= 0"),
    "sce_beta": (lambda v: _is_number(v), "a number >= 0"),
    "loss_epochs": (lambda v: isinstance(v, (list, tuple)) and all(_is_int(e, 1) for e in v),
                    "a list of epochs >= 1 (empty: every epoch)"),
    "num_workers": (lambda v: _is_int(v), "an int >= 0"),
    "boxes": (lambda v: v in BOXES, f"one of {', '.join(BOXES)}"),
    "log_interval": (lambda v: _is_int(v, 1), "an int >= 1 (iterations per history row)"),
    "precision": (lambda v: v in PRECISIONS, f"one of {', '.join(PRECISIONS)}"),
}


def check_hparams(hp: dict) -> dict:
    """``DEFAULTS`` updated with ``hp``; an unknown key or a bad value raises ConfigError naming the valid ones."""
    unknown = set(hp) - set(DEFAULTS)
    if unknown:
        raise ConfigError(f"unknown Mask R-CNN hyperparameter(s) {sorted(unknown)}; valid: {', '.join(DEFAULTS)}")
    hp = {**DEFAULTS, **hp}
    for key, (valid, description) in _CHECKS.items():
        if not valid(hp[key]):
            raise ConfigError(f"Mask R-CNN hyperparameter {key}={hp[key]!r} is invalid; it must be {description}")
    return hp


def on_cuda(device) -> bool:
    """Whether ``device`` (a torch.device, or "auto", "cpu", "cuda", "cuda:N" as ``select_device`` takes it) is a
    CUDA device; "auto" (or None) is, where this machine has one (``shared.device.device_type``: a name alone
    decides, so a planner may ask about "cuda" on a machine without it)."""
    return device_type(device) == "cuda"


def resolved_precision(hp: dict, device) -> str:
    """The precision ``hp`` (its ``precision``, default "auto") trains in on ``device``: "fp32" or "bf16"; "auto" is
    bf16 on CUDA (``on_cuda``) and fp32 elsewhere."""
    precision = {**DEFAULTS, **hp}["precision"]
    if precision not in PRECISIONS:
        raise ConfigError(f"Mask R-CNN hyperparameter precision={precision!r} is invalid; it must be one of "
                          f"{', '.join(PRECISIONS)}")
    if precision == "auto":
        return "bf16" if on_cuda(device) else "fp32"
    return precision


def key_hparams(hp: dict, device) -> dict:
    """``check_hparams(hp)`` as a run's cache key names them (``runs.Training.key``): ``precision`` resolved against
    ``device``, and left out when that is fp32, so an fp32 run keeps the key it had before the setting existed and a
    bf16 run gets another."""
    hp = check_hparams(hp)
    precision = resolved_precision(hp, device)
    del hp["precision"]
    return hp if precision == "fp32" else {**hp, "precision": precision}


def pin_hparams(hp: dict, device) -> dict:
    """``hp`` with ``precision`` resolved against ``device`` ("fp32" or "bf16"), for a run trained on another machine
    than the one that keys it (``runs.run_grid``'s jobs): the same key (``key_hparams``), the same precision there."""
    return {**hp, "precision": resolved_precision(hp, device)}


@contextmanager
def mixed_precision(model: MaskRCNN, precision: str, device):
    """Within the block, the forward of each of ``model``'s ``NETWORKS`` runs under bf16 autocast and returns float32
    tensors (``shared.training.autocast_forward``), when ``precision`` is "bf16"; "fp32" leaves the model alone.
    The state dict is unchanged. Not thread-safe, like ``box_classification_loss``."""
    if precision == "fp32":
        yield
        return
    with contextlib.ExitStack() as stack:
        for name in NETWORKS:
            stack.enter_context(autocast_forward(model.get_submodule(name), torch.device(device).type))
        yield


# ------------------------------------------------------------------------------------------------ schedule and loss
def base_lr(hp: dict) -> float:
    """``hp["lr"]``, or the linear scaling rule: 0.02 * batch_size / 16."""
    return hp["lr"] if hp["lr"] is not None else BASE_LR * hp["batch_size"] / BASE_BATCH


def learning_rate(iteration: int, epoch: int, hp: dict) -> float:
    """The lr of the step after ``iteration`` completed steps, in ``epoch`` (1-based): mmengine's LinearLR by
    iteration (factor warmup_ratio + (1 - warmup_ratio) * iteration / warmup_iters up to warmup_iters) times
    MultiStepLR by epoch (x 0.1 once ``epoch`` is past each of lr_steps)."""
    warm = hp["warmup_ratio"] + (1 - hp["warmup_ratio"]) * iteration / hp["warmup_iters"] \
        if iteration < hp["warmup_iters"] else 1.0
    return base_lr(hp) * warm * LR_GAMMA ** sum(epoch > step for step in hp["lr_steps"])


@contextmanager
def box_classification_loss(loss: str = "ce", alpha: float = 0.1, beta: float = 1.0):
    """Within the block, torchvision's RoI box head classification loss is ``loss`` (``tiny_seg.LOSSES``) over the
    sampled RoIs (mean), the box regression loss unchanged: "ce" leaves torchvision alone, "sce" swaps
    ``roi_heads.fastrcnn_loss`` (which ``RoIHeads.forward`` looks up at each call) and restores it on exit."""
    if loss == "ce":
        yield
        return
    original = roi_heads.fastrcnn_loss

    def fastrcnn_loss(class_logits, box_regression, labels, regression_targets):
        _, box_loss = original(class_logits, box_regression, labels, regression_targets)
        return pixel_loss(class_logits, torch.cat(labels), loss, alpha, beta).mean(), box_loss

    roi_heads.fastrcnn_loss = fastrcnn_loss
    try:
        yield
    finally:
        roi_heads.fastrcnn_loss = original


# ------------------------------------------------------------------------------------------------ model
def backbone_weights_path(backbone: str, weights) -> Path:
    """The file of ``backbone``'s ImageNet classification weights: torchvision's IMAGENET1K_V1 file in the torch hub
    cache for ``"imagenet"`` (never downloaded here), or the file ``weights``; DataNotFoundError naming the fix when
    it is not there."""
    if weights == "imagenet":
        url = torchvision.models.get_model_weights(backbone).IMAGENET1K_V1.url
        path = Path(torch.hub.get_dir()) / "checkpoints" / Path(url).name
        if not path.is_file():
            raise DataNotFoundError(f"the ImageNet weights of {backbone} are not at {path}; download {url} there "
                                    "(e.g. wget -P <that folder> <url>) or set backbone_weights to a file or None")
        return path
    path = Path(weights)
    if not path.is_file():
        raise DataNotFoundError(f"backbone_weights file {path} does not exist; give the path of a {backbone} "
                                "state dict, 'imagenet' or None")
    return path


def backbone_state(backbone: str, weights) -> dict:
    """The ImageNet classification state dict of ``backbone`` from ``backbone_weights_path``."""
    return torch.load(backbone_weights_path(backbone, weights), map_location="cpu", weights_only=True)


def build_model(num_classes: int, hp: dict) -> MaskRCNN:
    """torchvision's Mask R-CNN for ``num_classes`` categories (+ background) with ``hp``'s backbone (FrozenBN,
    ``trainable_layers``), sizes and test-time limits, and mmdet's 1000 RPN proposals per image in training."""
    fpn = resnet_fpn_backbone(backbone_name=hp["backbone"], weights=None, trainable_layers=hp["trainable_layers"])
    if hp["backbone_weights"] is not None:
        missing, unexpected = fpn.body.load_state_dict(backbone_state(hp["backbone"], hp["backbone_weights"]),
                                                       strict=False)
        if missing or set(unexpected) - {"fc.weight", "fc.bias"}:
            raise DataFormatError(f"backbone_weights {hp['backbone_weights']} is not a {hp['backbone']} state dict "
                                  f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    return MaskRCNN(fpn, num_classes=num_classes + 1, min_size=hp["min_size"], max_size=hp["max_size"],
                    rpn_post_nms_top_n_train=1000, box_score_thresh=hp["score_threshold"],
                    box_detections_per_img=hp["detections_per_image"])


# ------------------------------------------------------------------------------------------------ data
def _tensor(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).float().div(255.0)


class TrainImages(Dataset):
    """Training images with their targets; an item is ``(index, flip)`` -> (image (3, h, w) float in [0, 1],
    target {boxes (n, 4) xyxy float, labels (n,) int64, masks (n, h, w) uint8}), flipped horizontally if ``flip``.
    ``annotations[index]``: the (annotation, label, xyxy box) of the index-th image trained on; ``skipped``: the
    count of annotations left out per reason (crowd, empty mask, degenerate box)."""

    def __init__(self, data, labels: dict[int, int], boxes: str = "mask"):
        self.data, self.entries = data, data.dataset["images"]
        position = {im["id"]: i for i, im in enumerate(self.entries)}
        self.annotations = [[] for _ in self.entries]
        self.skipped = Counter()
        for ann in data.dataset["annotations"]:
            entry = self.entries[position[ann["image_id"]]]
            rle = ann_to_rle(ann, entry["height"], entry["width"])
            x, y, w, h = ann["bbox"] if boxes == "annotation" else mask_utils.toBbox(rle).tolist()
            reason = ("crowd" if ann.get("iscrowd", 0) else "empty_mask" if not mask_utils.area(rle)
                      else "degenerate_box" if w < 1 or h < 1 else None)
            if reason:
                self.skipped[reason] += 1
            else:
                self.annotations[position[ann["image_id"]]].append((ann, labels[ann["category_id"]],
                                                                    (x, y, x + w, y + h)))

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, item: tuple[int, bool]):
        index, flip = item
        entry, anns = self.entries[index], self.annotations[index]
        h, w = entry["height"], entry["width"]
        image = self.data.image(entry["id"], required=True)
        masks = np.stack([ann_to_mask(a, h, w) for a, _, _ in anns]) if anns else np.zeros((0, h, w), np.uint8)
        boxes = torch.tensor([box for _, _, box in anns], dtype=torch.float32).reshape(-1, 4)
        if flip:
            image, masks = image[:, ::-1], masks[:, :, ::-1]
            boxes = torch.stack([w - boxes[:, 2], boxes[:, 1], w - boxes[:, 0], boxes[:, 3]], 1)
        return _tensor(image), {"boxes": boxes, "labels": torch.tensor([c for _, c, _ in anns], dtype=torch.int64),
                                "masks": torch.from_numpy(np.ascontiguousarray(masks))}


def _collate(batch: list) -> tuple:
    return tuple(zip(*batch))


def epoch_batches(dataset: TrainImages, batch_size: int, hflip: float, generator: torch.Generator) -> list[list]:
    """One epoch's batches of ``(index, flip)``: a shuffled order, flips drawn with probability ``hflip``, grouped
    by orientation as mmdet's AspectRatioBatchSampler does (a batch is emitted when its group is full; the rest
    are mixed into the last batches)."""
    order = torch.randperm(len(dataset), generator=generator).tolist()
    flips = (torch.rand(len(dataset), generator=generator) < hflip).tolist()
    groups, batches = ([], []), []
    for i in order:
        group = groups[dataset.entries[i]["width"] < dataset.entries[i]["height"]]
        group.append((i, flips[i]))
        if len(group) == batch_size:
            batches.append(group[:])
            group.clear()
    rest = groups[0] + groups[1]
    return batches + [rest[k:k + batch_size] for k in range(0, len(rest), batch_size)]


# ------------------------------------------------------------------------------------------------ losses and results
@torch.no_grad()
def instance_losses(model: MaskRCNN, dataset: TrainImages, epoch: int, device, batch_size: int = 8,
                    precision: str = "fp32") -> list[dict]:
    """Per training annotation (noisy, as trained on; unflipped), with its own box as the proposal: ``class_loss``,
    the cross-entropy of the RoI box head's class logits against its label, and ``mask_loss``, the mean BCE of the
    mask head's logits of its label against its mask projected onto the 28 x 28 grid (``project_masks_on_boxes``):
    the losses of the proposal matched to an instance (Figs. 8 and 13). With ``class_flipped`` / ``spatially_noised``
    from the annotation's ``noise`` record. The networks run in ``precision`` ("fp32" or "bf16", ``mixed_precision``;
    the losses are computed in fp32 either way)."""
    model.eval()
    heads, rows = model.roi_heads, []
    with mixed_precision(model, precision, device), nondeterministic_kernels(device):
        for start in range(0, len(dataset), batch_size):
            indices = range(start, min(start + batch_size, len(dataset)))
            images, targets = _collate([dataset[(i, False)] for i in indices])
            images, targets = model.transform([im.to(device) for im in images],
                                              [{k: v.to(device) for k, v in t.items()} for t in targets])
            features = model.backbone(images.tensors)
            boxes = [t["boxes"] for t in targets]
            labels = torch.cat([t["labels"] for t in targets])
            class_logits, _ = heads.box_predictor(heads.box_head(heads.box_roi_pool(features, boxes,
                                                                                    images.image_sizes)))
            mask_logits = heads.mask_predictor(heads.mask_head(heads.mask_roi_pool(features, boxes,
                                                                                   images.image_sizes)))
            size = mask_logits.shape[-1]
            mask_targets = torch.cat([roi_heads.project_masks_on_boxes(t["masks"], t["boxes"], torch.arange(
                len(t["boxes"]), device=device), size) for t in targets])
            own = mask_logits[torch.arange(len(labels), device=device), labels]
            class_loss = F.cross_entropy(class_logits, labels, reduction="none").tolist()
            mask_loss = F.binary_cross_entropy_with_logits(own, mask_targets, reduction="none").mean((1, 2)).tolist()
            anns = [ann for i in indices for ann, _, _ in dataset.annotations[i]]
            for ann, c, m in zip(anns, class_loss, mask_loss):
                noise = ann.get("noise", {})
                rows.append({"epoch": epoch, "ann_id": ann["id"], "class_loss": c, "mask_loss": m,
                             "class_flipped": bool(noise.get("class_flipped", False)),
                             "spatially_noised": bool(noise.get("spatial"))})
    return rows


@torch.no_grad()
def predict(model: MaskRCNN, data, category_ids: list[int], device, batch_size: int = 8,
            precision: str = "fp32") -> list[dict]:
    """COCO results of ``model`` on ``data``'s images: torchvision's boxes (as xywh), scores, labels (as ``data``'s
    category ids) and soft masks thresholded at 0.5 (as compressed RLE). The networks run in ``precision`` ("fp32"
    or "bf16", ``mixed_precision``); boxes, scores and masks are float32 either way."""
    model.eval()
    entries, found = data.dataset["images"], []
    for start in range(0, len(entries), batch_size):
        chunk = entries[start:start + batch_size]
        with mixed_precision(model, precision, device), nondeterministic_kernels(device):
            outs = model([_tensor(data.image(e["id"], required=True)).to(device) for e in chunk])
        for entry, out in zip(chunk, outs):
            out = as_float32(out)  # already float32 (the postprocessing runs outside autocast); a cheap guarantee
            masks = (out["masks"][:, 0] > 0.5).cpu().numpy()
            for (x1, y1, x2, y2), label, score, mask in zip(out["boxes"].tolist(), out["labels"].tolist(),
                                                            out["scores"].tolist(), masks):
                found.append({"image_id": entry["id"], "category_id": category_ids[label - 1], "score": score,
                              "segmentation": mask_to_rle(mask), "bbox": [x1, y1, x2 - x1, y2 - y1]})
    return found


def fit_predict(train, val, hp: dict, seed: int = 0, device: str = "cpu", log_losses: bool = False) -> dict:
    """Train Mask R-CNN on ``train``'s annotations (module docstring; seeded by ``seed``) and return its detections
    on ``val``'s images, the training history and, with ``log_losses``, the ``instance_losses`` after each epoch of
    ``hp["loss_epochs"]`` (1-based; all epochs when empty; an epoch cut short by ``max_iters`` counts). The history
    has a row every ``log_interval`` iterations and at the last one, as MMDetection's logger (interval 50): the
    epoch, iteration and lr of that iteration, the mean loss and loss parts over the ``iterations`` since the last
    row; the first row also holds ``base_lr``, the annotations trained on and the skipped ones per reason. The
    networks run in ``resolved_precision(hp, device)`` (module docstring: bf16 autocast on CUDA by default); on CUDA
    the training batches are copied from pinned memory without blocking."""
    hp = check_hparams(hp)
    category_ids = [c["id"] for c in train.dataset["categories"]]
    if [c["id"] for c in val.dataset["categories"]] != category_ids:
        raise DataFormatError("train and val have different categories; the model predicts train's")
    if not train.dataset["images"]:
        raise DataFormatError("train has no images; Mask R-CNN needs at least one")
    device = select_device(device)
    precision, cuda = resolved_precision(hp, device), device.type == "cuda"
    seed_everything(seed)
    dataset = TrainImages(train, {cat: i + 1 for i, cat in enumerate(category_ids)}, hp["boxes"])
    model = build_model(len(category_ids), hp).to(device)
    optimiser = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=base_lr(hp),
                                momentum=hp["momentum"], weight_decay=hp["weight_decay"])
    generator = torch.Generator().manual_seed(seed)
    per_epoch = len(epoch_batches(dataset, hp["batch_size"], 0.0, torch.Generator()))
    total = min(hp["epochs"] * per_epoch, hp["max_iters"] or math.inf)
    logged = set(hp["loss_epochs"]) or set(range(1, hp["epochs"] + 1))
    history, losses, iteration, window = [], [], 0, []
    with progress(total=total, desc=f"Mask R-CNN, seed {seed}") as bar:
        for epoch in range(1, hp["epochs"] + 1):
            model.train()
            batches = epoch_batches(dataset, hp["batch_size"], hp["hflip"], generator)
            for images, targets in DataLoader(dataset, batch_sampler=batches, num_workers=hp["num_workers"],
                                              collate_fn=_collate, pin_memory=cuda):
                lr = learning_rate(iteration, epoch, hp)
                for group in optimiser.param_groups:
                    group["lr"] = lr
                # bf16 needs no GradScaler: it has fp32's exponent range, so small gradients do not underflow (fp16
                # would need one); the weights, their gradients and SGD's momentum stay fp32
                # on CUDA torchvision's roi_align kernel, forward and backward, not its deterministic pure-Python
                # stand-in, which needs tens of GiB per COCO image (shared.seeding.nondeterministic_kernels)
                with nondeterministic_kernels(device):
                    with mixed_precision(model, precision, device), \
                            box_classification_loss(hp["loss"], hp["sce_alpha"], hp["sce_beta"]):
                        parts = model([im.to(device, non_blocking=cuda) for im in images],
                                      [{k: v.to(device, non_blocking=cuda) for k, v in t.items()} for t in targets])
                    loss = sum(parts.values())
                    if not torch.isfinite(loss):
                        raise FloatingPointError(f"Mask R-CNN loss is {loss.item()} at iteration {iteration + 1} "
                                                 f"(lr {lr:g}); lower lr or raise warmup_iters")
                    optimiser.zero_grad()
                    loss.backward()
                    optimiser.step()
                iteration += 1
                window.append({"loss": loss.item(), **{k: v.item() for k, v in parts.items()}})
                if iteration % hp["log_interval"] == 0 or iteration == total:
                    history.append({"epoch": epoch, "iteration": iteration, "lr": lr, "iterations": len(window),
                                    **{k: float(np.mean([row[k] for row in window])) for k in window[0]}})
                    window = []
                bar.update()
                if iteration == total:
                    break
            if log_losses and epoch in logged:
                losses += instance_losses(model, dataset, epoch, device, hp["batch_size"], precision)
            if iteration == total:
                break
    history[0].update({"base_lr": base_lr(hp), "train_annotations": sum(map(len, dataset.annotations)),
                       **{f"skipped_{reason}": dataset.skipped[reason]
                          for reason in ("crowd", "empty_mask", "degenerate_box")}})
    return {"detections": predict(model, val, category_ids, device, hp["batch_size"], precision), "history": history,
            "instance_losses": losses}


__all__ = ["DEFAULTS", "BACKBONES", "BOXES", "PRECISIONS", "NETWORKS", "LR_GAMMA", "check_hparams", "on_cuda",
           "resolved_precision", "key_hparams", "pin_hparams", "mixed_precision", "base_lr", "learning_rate",
           "box_classification_loss", "backbone_weights_path", "backbone_state", "build_model", "TrainImages",
           "epoch_batches",
           "instance_losses", "predict", "fit_predict"]
