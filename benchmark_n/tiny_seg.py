"""The smoke profile's instance segmenter: a tiny U-Net with a mask head and a class head, plus connected components.

A 3-level U-Net (``TinyUNet``, width 8, BatchNorm, pure PyTorch) has two heads, as Mask R-CNN separates its mask
head from its classification head:

* the **mask head** labels every pixel background, object interior or border (an object's pixels next to another
  object it touches), trained on the rasterised annotations' masks alone (annotations painted in order, a later one
  over an earlier one), so it sees the spatial noise and never the class noise;
* the **class head** gives the category of every object pixel (cross-entropy over the K categories on the pixels
  of the annotations, with their — possibly noisy — category).

Instances are the 4-connected components of the predicted interior, grown by one pixel into the predicted
object (the border keeps touching objects apart), each labelled with the category of highest mean class
probability over it and scored by that mean probability times its mean object probability. A CPU Mask R-CNN needs hours to learn anything here;
this model learns COCO-shapes in seconds, and its instances are COCO detections evaluated with the same COCOeval
as the paper's models.

    result = fit_predict(train, val, {"epochs": 8, "lr": 1e-3}, seed=0)
    result["detections"]        # COCO results on val: image_id, category_id, score, segmentation (RLE), bbox
    result["history"]           # one row per epoch: epoch, loss
    result["instance_losses"]   # with log_losses: per training annotation and logged epoch, class and mask loss

``train`` and ``val`` have ``.dataset`` (a COCO dict) and ``.image(image_id, required=True)`` -> (h, w, 3) uint8
RGB (``benchmark_n.sources.Annotations``). The class loss is the cross-entropy, or with ``loss="sce"`` the
Symmetric Cross-Entropy of Wang et al. (2019), alpha CE + beta RCE with RCE = -A (1 - p_y), A = -4 (log 0
clamped to A), which Table 13 puts on Mask R-CNN's classification head; the mask head keeps its cross-entropy.
"""
from __future__ import annotations

from functools import partial

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from pycocotools import mask as mask_utils
from torch import nn

from benchmark_n.coco import ann_to_mask, image_sizes, rle_json
from shared.device import select_device
from shared.errors import ConfigError, DataFormatError
from shared.progress import progress
from shared.seeding import seed_everything
from shared.training import train_epoch

#: hyperparameters of ``fit_predict`` (the smoke profile's: 8 epochs of Adam, lr 3e-3, batch 8, width 8)
DEFAULTS = {"epochs": 8, "lr": 3e-3, "batch_size": 8, "width": 8, "loss": "ce", "sce_alpha": 0.1,
            "sce_beta": 1.0, "min_area": 16, "loss_epochs": []}
LOSSES = {"ce": "pixel cross-entropy", "sce": "Symmetric Cross-Entropy, alpha CE + beta RCE (Wang et al. 2019)"}
RCE_LOG_ZERO = -4.0  # A: log 0 clamped, as in the SCE paper


def _block(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True),
                         nn.Conv2d(c_out, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))


class TinyUNet(nn.Module):
    """(B, 3, H, W) float in [0, 1] -> (B, n_classes, H, W) logits; H and W divisible by 4. Widths w, 2w, 4w."""

    def __init__(self, n_classes: int, width: int = 8, in_channels: int = 3):
        super().__init__()
        w = width
        self.down1, self.down2, self.bottom = _block(in_channels, w), _block(w, 2 * w), _block(2 * w, 4 * w)
        self.up2, self.dec2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, stride=2), _block(4 * w, 2 * w)
        self.up1, self.dec1 = nn.ConvTranspose2d(2 * w, w, 2, stride=2), _block(2 * w, w)
        self.head = nn.Conv2d(w, n_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        b = self.bottom(F.max_pool2d(d2, 2))
        u2 = self.dec2(torch.cat([self.up2(b), d2], 1))
        return self.head(self.dec1(torch.cat([self.up1(u2), d1], 1)))


def pixel_loss(logits: torch.Tensor, target: torch.Tensor, loss: str = "ce", alpha: float = 0.1,
               beta: float = 1.0) -> torch.Tensor:
    """Per-pixel loss (B, H, W) of logits (B, C, H, W) against labels (B, H, W): CE, or SCE = alpha CE + beta RCE
    with RCE = -sum_k p_k log q_k = -A (1 - p_y) for the one-hot q with log 0 := A = -4."""
    ce = F.cross_entropy(logits, target, reduction="none")
    if loss == "ce":
        return ce
    if loss != "sce":
        raise ConfigError(f"unknown loss {loss!r}; valid: {', '.join(LOSSES)}")
    p_y = logits.softmax(1).gather(1, target[:, None]).squeeze(1)
    return alpha * ce + beta * (-RCE_LOG_ZERO) * (1.0 - p_y)


BACKGROUND, INTERIOR, BORDER = 0, 1, 2  # the mask head's classes
_RING = np.ones((3, 3), np.uint8)


def targets(dataset: dict) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Per image of ``dataset``: the mask head's target (n, H, W) int64 (``BACKGROUND``; ``BORDER`` where an
    instance touches another one, its pixels next to the other's; ``INTERIOR`` elsewhere on an instance), the class
    head's target (n, H, W) int64 (the category index 0..K-1, -1 off the objects), and the category ids in index
    order. Annotations are painted in order (a later one over an earlier one); crowds are not painted."""
    sizes = image_sizes(dataset)
    shapes = {sizes[im["id"]] for im in dataset["images"]}
    if len(shapes) != 1:
        raise DataFormatError(f"the tiny U-Net needs images of one size; this dataset has {sorted(shapes)} "
                              "(resize them or use the torchvision backend)")
    h, w = shapes.pop()
    ids = [c["id"] for c in dataset["categories"]]
    index = {cat: i for i, cat in enumerate(ids)}
    position = {im["id"]: i for i, im in enumerate(dataset["images"])}
    owner = np.zeros((len(position), h, w), np.int64)  # 1 + the index of the annotation painted last
    classes = np.full((len(position), h, w), -1, np.int64)
    for k, ann in enumerate(dataset["annotations"]):
        if not ann.get("iscrowd", 0):
            i, mask = position[ann["image_id"]], ann_to_mask(ann, h, w).astype(bool)
            owner[i][mask], classes[i][mask] = k + 1, index[ann["category_id"]]
    structure = np.where(owner > 0, INTERIOR, BACKGROUND)
    for i in range(len(owner)):
        for k in np.unique(owner[i])[1:]:
            others = ((owner[i] > 0) & (owner[i] != k)).astype(np.uint8)
            structure[i][(owner[i] == k) & cv2.dilate(others, _RING).astype(bool)] = BORDER
    return structure, classes, ids


def _images(data) -> torch.Tensor:
    pictures = np.stack([data.image(im["id"], required=True) for im in data.dataset["images"]])
    return torch.from_numpy(pictures).permute(0, 3, 1, 2).float().div(255.0)


def components(structure: np.ndarray, classes: np.ndarray, min_area: int = 16) -> list[tuple[int, np.ndarray, float]]:
    """Instances of one image from the mask head's probabilities (3, H, W) and the class head's (K, H, W): the
    4-connected components of the pixels whose argmax is ``INTERIOR``, each grown by one pixel (3 x 3) into the
    pixels predicted object (interior or border), with at least ``min_area`` pixels, as ``(c, mask (H, W) bool,
    score)``: c the category index of highest mean class probability over the mask, score that mean times the
    mean object probability (1 - p_background) over the mask, as Mask R-CNN's score is its class probability
    of a box its RPN found to be an object."""
    labels = structure.argmax(0)
    objects = labels != BACKGROUND
    count, parts = cv2.connectedComponents((labels == INTERIOR).astype(np.uint8), connectivity=4)
    found = []
    for k in range(1, count):
        mask = cv2.dilate((parts == k).astype(np.uint8), _RING).astype(bool) & objects
        if mask.sum() >= min_area:
            means = classes[:, mask].mean(1)
            objectness = 1.0 - structure[BACKGROUND][mask].mean()
            found.append((int(means.argmax()), mask, float(means.max() * objectness)))
    return found


def detections(structure: np.ndarray, classes: np.ndarray, image_id: int, category_ids: list[int],
               min_area: int = 16) -> list[dict]:
    """COCO results (RLE segmentation, bbox, score) of the ``components`` of one image."""
    out = []
    for c, mask, score in components(structure, classes, min_area):
        rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
        out.append({"image_id": image_id, "category_id": category_ids[c], "score": score,
                    "segmentation": rle_json(rle), "bbox": [float(v) for v in mask_utils.toBbox(rle)]})
    return out


def _two_head_loss(logits: torch.Tensor, targets: torch.Tensor, loss: str, alpha: float, beta: float
                   ) -> torch.Tensor:
    """The mask head's cross-entropy plus the class head's ``loss`` over the object pixels (averaged over all
    pixels, so the class head does not outweigh the mask head); ``targets`` (B, 2, H, W): mask and class targets."""
    mask_target, class_target = targets[:, 0], targets[:, 1]
    on_object = class_target >= 0
    class_loss = pixel_loss(logits[:, 3:], class_target.clamp(min=0), loss, alpha, beta)
    return F.cross_entropy(logits[:, :3], mask_target) + (class_loss * on_object).mean()


def _heads(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The mask head's and the class head's logits: channels 0-2 and 3.. of the U-Net's output."""
    out = model(x)
    return out[:, :3], out[:, 3:]


def _probabilities(model: nn.Module, images: torch.Tensor, device) -> tuple[np.ndarray, np.ndarray]:
    model.eval()
    with torch.no_grad():
        parts = [_heads(model, images[i:i + 16].to(device)) for i in range(0, len(images), 16)]
    return (torch.cat([p[0] for p in parts]).softmax(1).cpu().numpy(),
            torch.cat([p[1] for p in parts]).softmax(1).cpu().numpy())


def instance_losses(structure: np.ndarray, classes: np.ndarray, dataset: dict, category_ids: list[int],
                    epoch: int) -> list[dict]:
    """Per training annotation (noisy, as trained on), from the heads' probabilities (n, 3, H, W) and (n, K, H, W):
    ``class_loss``, the mean over its mask of the class head's cross-entropy against its category, and
    ``mask_loss``, the mean binary cross-entropy of the object probability (interior or border) against its mask
    over its box: the analogues of Mask R-CNN's classification and mask losses of the proposal matched to an
    instance (Figs. 8 and 13). With ``class_flipped`` / ``spatially_noised`` from its ``noise`` record."""
    h, w = structure.shape[2:]
    position = {im["id"]: i for i, im in enumerate(dataset["images"])}
    index = {cat: i for i, cat in enumerate(category_ids)}
    rows = []
    for ann in dataset["annotations"]:
        mask = ann_to_mask(ann, h, w).astype(bool)
        if ann.get("iscrowd", 0) or not mask.any():
            continue
        i = position[ann["image_id"]]
        p_class = np.clip(classes[i, index[ann["category_id"]]], 1e-6, 1.0)
        p_object = np.clip(1.0 - structure[i, BACKGROUND], 1e-6, 1 - 1e-6)
        x, y, bw, bh = (int(round(v)) for v in mask_utils.toBbox(mask_utils.encode(np.asfortranarray(
            mask.astype(np.uint8)))))
        box = (slice(y, max(y + bh, y + 1)), slice(x, max(x + bw, x + 1)))
        target, fg = mask[box], p_object[box]
        bce = -(target * np.log(fg) + (~target) * np.log(1 - fg)).mean()
        noise = ann.get("noise", {})
        rows.append({"epoch": epoch, "ann_id": ann["id"], "class_loss": float(-np.log(p_class[mask]).mean()),
                     "mask_loss": float(bce), "class_flipped": bool(noise.get("class_flipped", False)),
                     "spatially_noised": bool(noise.get("spatial"))})
    return rows


def check_hparams(hp: dict) -> dict:
    """``DEFAULTS`` updated with ``hp``; unknown keys or a bad loss raise ConfigError."""
    unknown = set(hp) - set(DEFAULTS)
    if unknown:
        raise ConfigError(f"unknown tiny U-Net hyperparameter(s) {sorted(unknown)}; valid: {', '.join(DEFAULTS)}")
    hp = {**DEFAULTS, **hp}
    if hp["loss"] not in LOSSES:
        raise ConfigError(f"unknown loss {hp['loss']!r}; valid: {', '.join(LOSSES)}")
    return hp


def fit(train, hp: dict, seed: int = 0, device: str = "cpu", log_losses: bool = False) -> dict:
    """Train a ``TinyUNet`` on ``train``'s annotations (Adam, shuffled batches, ``hp["epochs"]`` epochs, the loss
    the mask head's cross-entropy plus the class head's loss on object pixels; seeded by ``seed``): ``{"model",
    "category_ids", "hparams", "device", "history"}`` (one row per epoch) and, with ``log_losses``,
    ``"instance_losses"`` after each epoch of ``hp["loss_epochs"]`` (1-based; all epochs when empty)."""
    hp = check_hparams(hp)
    device = select_device(device)
    seed_everything(seed)
    structure, classes, category_ids = targets(train.dataset)
    x, y = _images(train), torch.from_numpy(np.stack([structure, classes], axis=1))  # (n, 2, H, W)
    model = TinyUNet(3 + len(category_ids), hp["width"]).to(device)
    optimiser = torch.optim.Adam(model.parameters(), lr=hp["lr"])
    generator = torch.Generator().manual_seed(seed)
    loss_fn = partial(_two_head_loss, loss=hp["loss"], alpha=hp["sce_alpha"], beta=hp["sce_beta"])
    history, losses = [], []
    logged = set(hp["loss_epochs"]) or set(range(1, hp["epochs"] + 1))
    for epoch in progress(range(1, hp["epochs"] + 1), desc=f"tiny U-Net, seed {seed}", leave=False):
        loss = train_epoch(model, x, y, optimiser, batch_size=hp["batch_size"], generator=generator, loss_fn=loss_fn)
        history.append({"epoch": epoch, "loss": loss})
        if log_losses and epoch in logged:
            losses += instance_losses(*_probabilities(model, x, device), train.dataset, category_ids, epoch)
    return {"model": model, "category_ids": category_ids, "hparams": hp, "device": device, "history": history,
            "instance_losses": losses}


def predict(fitted: dict, data) -> list[dict]:
    """A ``fit`` result's detections (COCO results) on ``data``'s images; DataFormatError when ``data`` has other
    categories than the model was trained on."""
    if [c["id"] for c in data.dataset["categories"]] != fitted["category_ids"]:
        raise DataFormatError("train and val have different categories; the model predicts train's")
    structure_p, classes_p = _probabilities(fitted["model"], _images(data), fitted["device"])
    dets = []
    for i, image in enumerate(data.dataset["images"]):
        dets += detections(structure_p[i], classes_p[i], image["id"], fitted["category_ids"],
                           fitted["hparams"]["min_area"])
    return dets


def fit_predict(train, val, hp: dict, seed: int = 0, device: str = "cpu", log_losses: bool = False) -> dict:
    """``fit`` on ``train``, then ``predict`` on ``val``: ``{"detections", "history", "instance_losses"}``."""
    if [c["id"] for c in val.dataset["categories"]] != [c["id"] for c in train.dataset["categories"]]:
        raise DataFormatError("train and val have different categories; the model predicts train's")
    fitted = fit(train, hp, seed, device, log_losses)
    return {"detections": predict(fitted, val), "history": fitted["history"],
            "instance_losses": fitted["instance_losses"]}


__all__ = ["DEFAULTS", "LOSSES", "BACKGROUND", "INTERIOR", "BORDER", "TinyUNet", "pixel_loss", "targets", "components",
           "detections", "instance_losses", "check_hparams", "fit", "predict", "fit_predict"]
