"""COCO-WAN: weak annotations, every ground-truth instance re-annotated by a promptable segmenter (Sec. 4.3).

    from benchmark_n.wan import weak_dataset, weak_tier, prompt_quality, PROMPTS, WAN_TIERS
    weak = weak_dataset(data, "box")                       # GrabCut from each GT box (offline stand-in for SAM)
    weak.dataset, weak.manifest["mean_iou"]                # a new COCO dict (data never mutated), what it did
    weak_dataset(data, "box", annotator="sam")             # the paper: SAM ViT-H, checkpoint under data_dir/weights
    weak_dataset(data, "box", annotator="sam", precision="fp32")   # its image encoder in fp32 on a GPU too (official)
    weak_tier(data, "hard")                                # Table 3's COCO-WAN Hard: centre point + class noise 0.4
    prompt_quality(data, ["box", "box_noisy"], seeds=[0, 1])   # Table 4 / Table 14 analogue, one row per prompt/seed

``data`` is anything with a COCO dict ``.dataset`` and the images, either ``.image(image_id)`` -> (h, w, 3) uint8 RGB
(``benchmark_n.sources.Annotations``) or an ``.images`` array (n, h, w, 3) in the order of ``dataset["images"]``
(``benchmark_n.shapes.ShapesData``).

**Prompts** (``PROMPTS``), all derived from the ground-truth mask; boxes are ``[x_min, y_min, x_max, y_max]`` in
pixel indices (the max inclusive, as the official ``extract_bounding_box_and_area``), points ``(x, y)`` with label 1;
each is the keyword arguments of ``SamPredictor.predict`` (``box``, or ``point_coords`` + ``point_labels``):

* ``box``: the tight box from the mask's pixel extremes (Table 4 "Box" clean, COCO-WAN Easy). ``scale_bbox`` = the
  official ``--scale_bbox`` omega (default 1): each side moves out by ``int((omega - 1) / 2 * (max - min))``, clipped
  to [0, w] x [0, h] as the official code does.
* ``box_noisy``: that box with N(0, 2) px (sd 2) added to the x and y of one corner chosen uniformly of the four; the
  opposite corner stays; clipped to the image and re-ordered if the corner crossed (Table 4 "Box + N(0, 2)").
* ``point_center_bbox``: the centre of that box (the official ``get_center_point``, COCO-WAN Medium); it can lie
  outside a non-convex or occluded mask.
* ``point_center_mask``: the paper's text, "in the middle of the object mask": the mask pixel nearest (Euclidean) to
  the mask's centroid, so it lies inside (ties: the first in row-major order).
* ``point_random_in_mask``: a uniformly random mask pixel (Table 4's noisy point, "Point ~ U" noisy).
* ``text``: Grounded-SAM (each image's class names to Grounding-DINO, its boxes to SAM; Table 4 "Text {cls}",
  Table 5). Its labels are not one per ground-truth instance: ``benchmark_n.grounded`` makes them, and asking
  ``weak_dataset`` for it raises ConfigError saying so; it is in ``NOT_PER_INSTANCE``.

Randomness: annotation ``id`` draws from ``np.random.default_rng([seed, PROMPTS[prompt].code, id])``, first the
prompt, then the annotator (GrabCut's k-means initialisation is seeded from it with ``cv2.setRNGSeed``), so a result
does not depend on the order or subset of the annotations, and the same call gives the same dataset.

**Annotators** (``ANNOTATORS``):

* ``grabcut`` (default, offline, CPU): a box prompt runs ``cv2.grabCut`` with ``GC_INIT_WITH_RECT`` on the box
  grown by ``pad`` (1) px (why: ``grabcut_box``), ``iterations`` (5) iterations, on a window of the image around
  the box (grown by ``context`` (0.5) x its longer side, at least 10 px, each way: a local colour model, and on 40
  COCO-shapes images at 640x480 6.5 s instead of 74 s for the whole image, with the same mean IoU); the weak mask
  is GC_FGD | GC_PR_FGD. A box that covers the whole image (no pixel outside it to learn the background from,
  where grabCut fails) starts from a mask whose 1-px outer ring is probable background.
  A point prompt grows a region from the point: ``cv2.floodFill`` with ``FLOODFILL_FIXED_RANGE`` and 4-connectivity,
  i.e. the 4-connected pixels whose every channel is within ``tolerance`` (20) of the seed pixel's colour (the same
  region as ``skimage.segmentation.flood`` on the Chebyshev colour distance to the seed). A point outside the
  object grows whatever region it falls on (background, an occluder): the point prompt's ambiguity, as SAM shows it.
* ``sam``: the paper's SAM (``segment_anything.SamPredictor``): ``set_image`` once per image (RGB), each instance
  prompted with ``multimask_output=True``, the mask of the highest predicted score kept (``np.argmax(scores)``), as
  the official ``create_gt_plus_sam_noise.py``. Weights: ``checkpoint`` or ``data_dir()/weights/sam_vit_h_4b8939.pth``
  (``default_sam_checkpoint``); model type from the file name (vit_h / vit_l / vit_b), CUDA when available. A
  missing package or checkpoint raises DataNotFoundError naming the fix. ``SamAnnotator(predictor)`` wraps any
  predictor with SamPredictor's interface (``weak_dataset(..., annotator=SamAnnotator(p))``).

  Precision (``precision``, ``PRECISIONS``; a ``load_sam`` / ``SamAnnotator`` argument, a "sam" option of
  ``make_annotator`` / ``weak_dataset``). ``"fp32"`` is the official behaviour: segment_anything runs SAM in fp32.
  ``"auto"``, the default, runs the image encoder (``predictor.model.image_encoder``, ViT-H: nearly all of SAM's
  compute, one forward per image) under bfloat16 autocast when it is on CUDA (an H100 does ~15x the fp32 FLOP rate
  in bf16 on its tensor cores) and in fp32 elsewhere, so every CPU run (the rehearsal's, the tests') is the fp32 run
  it was; ``"bf16"`` autocasts on any device (on a CPU slowly: the tests' way to reach that code). Autocast covers the
  image encoder only, whose embedding is cast back to float32 (``encoder_autocast``): the prompt encoder, the mask
  decoder, the upscaling of the masks and the thresholding stay fp32. The encoder's forward is wrapped for the
  length of each ``set_image`` and restored after it, so the model itself is never changed (``sam_finetune``
  fine-tunes the model ``load_sam`` loads, in fp32). ``settings()`` (the manifest's ``annotator_settings``) names
  ``"precision": "bf16"`` when the encoder runs in bf16 and nothing otherwise, so an fp32 label set is described
  as it was before the setting existed. Page 08 passes its ``annotator_precision`` setting ("auto" by default) and
  its ``device`` parameter (``plans.annotator``); its keys name the precision that resolves to (on the page's
  device) only when it is bf16 (``plans.annotator_params``, ``runs.TrainNoise.key``), so fp32 label sets and runs
  keep the keys they had before the setting existed.

**Output** (``weak_dataset``): every top-level key of the input, annotations replaced. Images in ``images`` order,
their annotations in list order; each non-crowd annotation becomes ``{"id", "image_id", "category_id", "iscrowd",
"segmentation" (compressed RLE of the weak mask), "area", "bbox", "noise"}`` with ``area``/``bbox`` as pycocotools
computes them (``coco.segmentation_fields``), or with ``official_bbox=True`` the official ``[x_min, y_min,
x_max - x_min, y_max - y_min]`` (integers, one pixel short in w and h). Crowd annotations are copied unchanged but for
the id (the official script re-annotates them too). Ids are renumbered 1, 2, ... in output order (the official
script numbers from 0, which COCOeval reads as "unmatched"); ``noise`` is ``{"class_flipped", "original_category_id",
"spatial": ["weak_<prompt>"], "original_id", "prompt": box or point as floats, "iou": IoU of the weak mask with the
ground-truth mask}``. An empty weak mask is dropped (implicit deletion; the official script writes it, with area
0), as is an instance whose ground-truth mask covers no pixel (``empty_gt``).
"""
from __future__ import annotations

import copy
import inspect
import importlib.util
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence

import cv2
import numpy as np
import pandas as pd

from benchmark_n.coco import ann_to_mask, check_coco, image_sizes, mask_to_rle, segmentation_fields
from benchmark_n.metrics import annotation_quality
from benchmark_n.noise import NoisyDataset, canonical_tier, class_noise
from shared.cache import code_fingerprint
from shared.errors import ConfigError, DataFormatError, DataNotFoundError, unknown_choice
from shared.paths import data_dir
from shared.progress import progress

BOX_NOISE_SD = 2.0  # Table 4 "Box + N(0, 2)": sd in pixels of the corner displacement
COUNTS = ("annotations_in", "kept", "implicitly_deleted", "empty_gt", "no_prompt", "class_flipped", "crowd_skipped")
CLASS_NOISE_KIND = "uniform"  # the COCO-WAN Hard tier: v0's symmetric class mixing (noise.class_noise)


# ------------------------------------------------------------------------------------------------ prompts
def tight_box(mask: np.ndarray, scale_bbox: float = 1) -> np.ndarray:
    """``[x_min, y_min, x_max, y_max]`` (float) of the mask's pixel extremes (max inclusive), enlarged by the
    official ``--scale_bbox`` omega: each side by ``int((omega - 1) / 2 * (max - min))``, clipped to [0, w] x
    [0, h] (the official bounds). DataFormatError for an empty mask."""
    rows, cols = np.nonzero(mask)
    if rows.size == 0:
        raise DataFormatError("a prompt needs a non-empty mask")
    x_min, x_max, y_min, y_max = int(cols.min()), int(cols.max()), int(rows.min()), int(rows.max())
    if scale_bbox != 1:
        h, w = mask.shape
        dx, dy = int((scale_bbox - 1) / 2 * (x_max - x_min)), int((scale_bbox - 1) / 2 * (y_max - y_min))
        x_min, x_max = max(x_min - dx, 0), min(x_max + dx, w)
        y_min, y_max = max(y_min - dy, 0), min(y_max + dy, h)
    return np.array([x_min, y_min, x_max, y_max], dtype=np.float64)


def _point(x: float, y: float) -> dict:
    return {"point_coords": np.array([[float(x), float(y)]]), "point_labels": np.array([1])}


def _box_prompt(mask, rng, scale_bbox):
    return {"box": tight_box(mask, scale_bbox)}


def _box_noisy_prompt(mask, rng, scale_bbox):
    """One of the four corners (0 top-left, 1 top-right, 2 bottom-right, 3 bottom-left) + N(0, 2) in x and y."""
    x0, y0, x1, y1 = tight_box(mask, scale_bbox)
    corner = int(rng.integers(4))
    dx, dy = rng.normal(0.0, BOX_NOISE_SD, 2)
    if corner in (0, 3):
        x0 += dx
    else:
        x1 += dx
    if corner in (0, 1):
        y0 += dy
    else:
        y1 += dy
    h, w = mask.shape
    xs, ys = np.clip([x0, x1], 0, w - 1), np.clip([y0, y1], 0, h - 1)
    return {"box": np.array([xs.min(), ys.min(), xs.max(), ys.max()])}


def _point_center_bbox_prompt(mask, rng, scale_bbox):
    x0, y0, x1, y1 = tight_box(mask, scale_bbox)
    return _point((x0 + x1) / 2, (y0 + y1) / 2)


def _point_center_mask_prompt(mask, rng, scale_bbox):
    rows, cols = np.nonzero(mask)
    if rows.size == 0:
        raise DataFormatError("a prompt needs a non-empty mask")
    nearest = int(np.argmin((cols - cols.mean()) ** 2 + (rows - rows.mean()) ** 2))
    return _point(cols[nearest], rows[nearest])


def _point_random_prompt(mask, rng, scale_bbox):
    rows, cols = np.nonzero(mask)
    if rows.size == 0:
        raise DataFormatError("a prompt needs a non-empty mask")
    i = int(rng.integers(rows.size))
    return _point(cols[i], rows[i])


TEXT_PROMPT_HELP = (
    "the 'text' prompt is Grounded-SAM (Table 4 'Text {cls}', Table 5): each image's class names go to Grounding-DINO, "
    "whose boxes prompt SAM, so its labels are not one per ground-truth instance and weak_dataset does not make them; "
    "use benchmark_n.grounded.text_tier (Grounding-DINO from data_dir/weights/grounding-dino-base, or the offline "
    "stand-in detector)")


def _text_prompt(mask, rng, scale_bbox):
    raise ConfigError(TEXT_PROMPT_HELP)


@dataclass(frozen=True)
class Prompt:
    """A prompt type: ``code`` keys its random streams; ``kind`` is "box", "point" or "text"; ``make(mask, rng,
    scale_bbox)`` returns the ``SamPredictor.predict`` keyword arguments; ``random``: whether the seed changes it."""
    code: int
    kind: str
    description: str
    make: Callable[[np.ndarray, np.random.Generator, float], dict]
    random: bool = False


PROMPTS = {
    "box": Prompt(201, "box", "tight GT box (official create_gt_plus_sam_noise.py; Table 4 Box clean; WAN Easy)",
                  _box_prompt),
    "box_noisy": Prompt(202, "box", "tight GT box, N(0, 2) px on one random corner (Table 4 'Box + N(0, 2)' noisy)",
                        _box_noisy_prompt, random=True),
    "point_center_bbox": Prompt(203, "point", "centre of the GT box, label 1 (official "
                                "create_gt_plus_sam_point_noise.py; Table 4 Point clean; WAN Medium)",
                                _point_center_bbox_prompt),
    "point_center_mask": Prompt(204, "point", "mask pixel nearest to the mask centroid (the paper's text)",
                                _point_center_mask_prompt),
    "point_random_in_mask": Prompt(205, "point", "uniformly random mask pixel (Table 4 Point ~ U noisy)",
                                   _point_random_prompt, random=True),
    "text": Prompt(206, "text", "class name -> Grounding-DINO box -> SAM (Grounded-SAM; Table 4 Text, Table 5)",
                   _text_prompt),
}
INSTANCE_PROMPTS = tuple(name for name, p in PROMPTS.items() if p.kind != "text")
NOT_PER_INSTANCE = {"text": TEXT_PROMPT_HELP}  # prompt -> where its labels are made instead

#: Table 3's COCO-WAN columns, which are prompt types (README: easy = box, medium = centre point, hard = medium + class
#: noise with v0's flip 0.4 -- "with the proper arguments", presumably that).
WAN_TIERS = {
    "easy": {"prompt": "box", "class_noise_rate": None},
    "medium": {"prompt": "point_center_bbox", "class_noise_rate": None},
    "hard": {"prompt": "point_center_bbox", "class_noise_rate": 0.4},
}
_TIER_NAMES = {"low": "easy", "mid": "medium", "high": "hard"}


def _check_seed(seed) -> int:
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _ann_rng(seed: int, code: int, ann_id) -> np.random.Generator:
    if not isinstance(ann_id, (int, np.integer)) or isinstance(ann_id, bool) or ann_id < 0:
        raise DataFormatError(f"annotation {ann_id!r}: ids must be non-negative integers (they seed its prompt)")
    return np.random.default_rng([seed, code, int(ann_id)])


def _prompt_spec(name: str) -> Prompt:
    if name not in PROMPTS:
        raise unknown_choice("prompt", name, PROMPTS)
    if name in NOT_PER_INSTANCE:
        raise ConfigError(NOT_PER_INSTANCE[name])
    return PROMPTS[name]


def make_prompt(name: str, mask: np.ndarray, seed: int = 0, ann_id: int = 0, scale_bbox: float = 1) -> dict:
    """The prompt ``name`` of a (h, w) ground-truth mask, drawn as ``weak_dataset`` draws it for annotation
    ``ann_id`` with ``seed``: ``{"box": (4,)}`` or ``{"point_coords": (1, 2), "point_labels": (1,)}``."""
    spec = _prompt_spec(name)
    return spec.make(np.asarray(mask) != 0, _ann_rng(_check_seed(seed), spec.code, ann_id), scale_bbox)


# ------------------------------------------------------------------------------------------------ annotators
class Annotator(Protocol):
    """What ``weak_dataset`` needs of an annotator: ``name``, ``settings()`` (for the manifest), ``set_image(image)``
    ((h, w, 3) uint8 RGB, once per image) and ``segment(prompt, rng)`` -> (h, w) bool mask."""
    name: str

    def settings(self) -> dict: ...

    def set_image(self, image: np.ndarray) -> None: ...

    def segment(self, prompt: dict, rng: np.random.Generator) -> np.ndarray: ...


def grabcut_box(image: np.ndarray, box, iterations: int = 5, context: float = 0.5, pad: int = 1,
                rng: np.random.Generator | None = None) -> np.ndarray:
    """(h, w) bool GrabCut segmentation of the object in ``box`` = [x0, y0, x1, y1] (pixel indices, max inclusive)
    of an (h, w, 3) uint8 image: the box grown by ``pad`` px each side (floats rounded outwards, clipped to the
    image) is the GC_INIT_WITH_RECT rectangle; ``iterations`` iterations; result GC_FGD | GC_PR_FGD; run on a window
    of the box grown by max(10, ``context`` x its longer side) px each way. A box covering the whole image starts
    from a mask with a probable-background outer ring. ``rng`` seeds OpenCV's RNG (k-means initialisation of the
    colour models) for reproducible results.

    Why ``pad``: everything outside the rectangle is hard background, and on flat colours a handful of object
    pixels outside it (a ground-truth polygon rasterised by pycocotools misses the object's outermost pixels on
    some sides) gives the background model a near-zero-variance component of the object's colour that turns the
    whole object to background (15 of 84 COCO-shapes instances at 96 px came out empty without it, 7 with it, all
    7 next to an object of the same colour)."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    h, w = image.shape[:2]
    x0, y0, x1, y1 = np.asarray(box, dtype=np.float64) + np.array([-pad, -pad, pad, pad])
    x0, y0 = int(np.clip(np.floor(x0), 0, w - 1)), int(np.clip(np.floor(y0), 0, h - 1))
    x1, y1 = int(np.clip(np.ceil(x1), x0, w - 1)), int(np.clip(np.ceil(y1), y0, h - 1))
    margin = max(10, int(context * max(x1 - x0 + 1, y1 - y0 + 1)))
    cx0, cy0 = max(x0 - margin, 0), max(y0 - margin, 0)
    cx1, cy1 = min(x1 + margin + 1, w), min(y1 + margin + 1, h)
    window = np.ascontiguousarray(image[cy0:cy1, cx0:cx1])
    wh, ww = window.shape[:2]
    rect = (x0 - cx0, y0 - cy0, x1 - x0 + 1, y1 - y0 + 1)
    labels = np.zeros((wh, ww), np.uint8)
    background, foreground = np.zeros((1, 65)), np.zeros((1, 65))
    if rng is not None:
        cv2.setRNGSeed(int(rng.integers(2**31)))
    if rect == (0, 0, ww, wh):  # no pixel outside the box: start with a probable-background ring
        labels[:] = cv2.GC_PR_FGD
        labels[0, :] = labels[-1, :] = labels[:, 0] = labels[:, -1] = cv2.GC_PR_BGD
        if min(wh, ww) < 3:
            return np.ones((h, w), bool)
        cv2.grabCut(window, labels, None, background, foreground, int(iterations), cv2.GC_INIT_WITH_MASK)
    else:
        cv2.grabCut(window, labels, rect, background, foreground, int(iterations), cv2.GC_INIT_WITH_RECT)
    out = np.zeros((h, w), bool)
    out[cy0:cy1, cx0:cx1] = (labels == cv2.GC_FGD) | (labels == cv2.GC_PR_FGD)
    return out


def flood_point(image: np.ndarray, point, tolerance: float = 20) -> np.ndarray:
    """(h, w) bool region grown from ``point`` = (x, y) (rounded half up, clipped into the image): the 4-connected
    pixels whose every channel is within ``tolerance`` of the seed pixel's (``cv2.floodFill``, fixed range)."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    h, w = image.shape[:2]
    x, y = (int(np.clip(np.floor(float(v) + 0.5), 0, n - 1)) for v, n in zip(point, (w, h)))
    fill = np.zeros((h + 2, w + 2), np.uint8)
    diff = (float(tolerance),) * 3
    flags = 4 | cv2.FLOODFILL_FIXED_RANGE | cv2.FLOODFILL_MASK_ONLY | (1 << 8)
    cv2.floodFill(image, fill, (x, y), 0, diff, diff, flags)
    return fill[1:-1, 1:-1].astype(bool)


class GrabCutAnnotator:
    """Offline stand-in for SAM: GrabCut for box prompts (``grabcut_box``), a flood-filled region for point prompts
    (``flood_point``)."""
    name = "grabcut"

    def __init__(self, iterations: int = 5, context: float = 0.5, pad: int = 1, tolerance: float = 20):
        if int(iterations) < 1 or context < 0 or pad < 0 or tolerance < 0:
            raise ConfigError(f"grabcut needs iterations >= 1 and context, pad, tolerance >= 0, got {iterations}, "
                              f"{context}, {pad}, {tolerance}")
        self.iterations, self.context, self.pad = int(iterations), float(context), int(pad)
        self.tolerance = float(tolerance)
        self.image = None

    def settings(self) -> dict:
        return {"box": "cv2.grabCut GC_INIT_WITH_RECT", "point": "cv2.floodFill fixed range, 4-connected",
                "iterations": self.iterations, "context": self.context, "pad": self.pad,
                "tolerance": self.tolerance}

    def set_image(self, image: np.ndarray) -> None:
        self.image = np.ascontiguousarray(image, dtype=np.uint8)

    def segment(self, prompt: dict, rng: np.random.Generator) -> np.ndarray:
        if "box" in prompt:
            return grabcut_box(self.image, prompt["box"], self.iterations, self.context, self.pad, rng)
        return flood_point(self.image, prompt["point_coords"][0], self.tolerance)


PRECISIONS = {"auto": "bf16 autocast of SAM's image encoder on CUDA, fp32 elsewhere",
              "bf16": "bf16 autocast of SAM's image encoder on any device",
              "fp32": "no autocast (segment_anything's behaviour, the official one)"}


def _check_precision(precision) -> str:
    if precision not in PRECISIONS:
        raise ConfigError(f"SAM precision={precision!r} is invalid; it must be one of {', '.join(PRECISIONS)}")
    return precision


def resolved_precision(precision: str, device) -> str:
    """The precision SAM's image encoder runs in on ``device`` (as ``shared.device.device_type`` takes it: a
    torch.device, or "auto", "cpu", "cuda", "cuda:N"): "fp32" or "bf16"; ``precision`` "auto" is bf16 on CUDA and
    fp32 elsewhere."""
    if _check_precision(precision) == "auto":
        from shared.device import device_type  # torch: imported only where SAM's device is asked about

        return "bf16" if device_type(device) == "cuda" else "fp32"
    return precision


def _image_encoder(predictor):
    """``predictor.model.image_encoder`` (SamPredictor's), or None where the predictor has none."""
    return getattr(getattr(predictor, "model", None), "image_encoder", None)


def _module_device(module):
    """The device of ``module``'s first parameter (or buffer); the CPU where it has neither."""
    import torch

    tensor = next(iter(module.parameters()), None)
    if tensor is None:
        tensor = next(iter(module.buffers()), None)
    return torch.device("cpu") if tensor is None else tensor.device


@contextmanager
def encoder_autocast(encoder, precision: str):
    """Within the block, ``encoder``'s forward runs under bf16 autocast on its device and hands back float32
    (``shared.training.autocast_forward``), when ``precision`` is "bf16"; "fp32" leaves it alone. Not thread-safe."""
    if precision == "fp32":
        yield
        return
    if precision != "bf16":
        raise ConfigError(f"encoder_autocast takes a resolved precision, fp32 or bf16, got {precision!r}")
    from shared.training import autocast_forward  # torch: imported only where SAM runs

    with autocast_forward(encoder, _module_device(encoder).type):
        yield


class SamAnnotator:
    """A predictor with ``SamPredictor``'s interface as an annotator: ``set_image`` once per image, each prompt
    predicted with ``multimask_output=True`` and the mask of the highest score kept (the official scripts).
    ``precision`` (``PRECISIONS``, default "auto"): of the image encoder, ``predictor.model.image_encoder``, resolved
    against the device it is on when the annotator is made (module docstring), as ``precision``: "fp32" or "bf16"; a
    predictor without one runs as it is (fp32 for "auto", ConfigError for "bf16")."""
    name = "sam"

    def __init__(self, predictor, checkpoint: str | None = None, model_type: str | None = None,
                 precision: str = "auto"):
        self.predictor, self.checkpoint, self.model_type = predictor, checkpoint, model_type
        encoder = _image_encoder(predictor)
        if encoder is None:
            if _check_precision(precision) == "bf16":
                raise ConfigError("precision bf16 autocasts SAM's image encoder, predictor.model.image_encoder, "
                                  f"which this {type(predictor).__name__} does not have")
            self.precision = "fp32"
        else:
            self.precision = resolved_precision(precision, _module_device(encoder))

    def settings(self) -> dict:
        settings = {"checkpoint": None if self.checkpoint is None else Path(self.checkpoint).name,
                    "model_type": self.model_type, "multimask_output": True, "choice": "argmax(scores)"}
        return settings if self.precision == "fp32" else {**settings, "precision": self.precision}

    def set_image(self, image: np.ndarray) -> None:
        image = np.ascontiguousarray(image, dtype=np.uint8)
        if self.precision == "fp32":
            self.predictor.set_image(image)
            return
        with encoder_autocast(_image_encoder(self.predictor), self.precision):
            self.predictor.set_image(image)

    def segment(self, prompt: dict, rng: np.random.Generator) -> np.ndarray:
        masks, scores, _ = self.predictor.predict(**prompt, multimask_output=True)
        return np.asarray(masks[int(np.argmax(np.asarray(scores)))]).astype(bool)


SAM_CHECKPOINTS = {"vit_h": "sam_vit_h_4b8939.pth", "vit_l": "sam_vit_l_0b3195.pth", "vit_b": "sam_vit_b_01ec64.pth"}


def default_sam_checkpoint() -> Path:
    """``data_dir()/weights/sam_vit_h_4b8939.pth`` (``$NOISY_DATA_DIR`` or ``<repo>/data``): the paper's ViT-H."""
    return data_dir() / "weights" / SAM_CHECKPOINTS["vit_h"]


def locate_sam(checkpoint: str | os.PathLike | None = None) -> Path:
    """The SAM checkpoint file (default ``default_sam_checkpoint()``), once both it and the segment_anything package
    are here; DataNotFoundError naming what is missing and how to get it otherwise."""
    path = Path(checkpoint).expanduser() if checkpoint is not None else default_sam_checkpoint()
    missing = []
    if importlib.util.find_spec("segment_anything") is None:
        missing.append("the segment_anything package (Meta's Segment Anything 1.0): pip install segment-anything")
    if not path.is_file():
        missing.append(f"the SAM checkpoint {path}. The paper uses ViT-H, {SAM_CHECKPOINTS['vit_h']} (2.5 GB, linked "
                       f"from the segment-anything README); put it at {default_sam_checkpoint()} "
                       "($NOISY_DATA_DIR/weights/) or pass checkpoint=PATH (vit_l / vit_b checkpoints work too)")
    if missing:
        raise DataNotFoundError("SAM needs " + "; and ".join(missing))
    return path


def load_sam(checkpoint: str | os.PathLike | None = None, model_type: str | None = None,
             device: str | None = None, precision: str = "auto") -> SamAnnotator:
    """SAM from ``checkpoint`` (default ``default_sam_checkpoint()``) as a ``SamAnnotator``. ``model_type``: vit_h,
    vit_l or vit_b, else read from the file name (default vit_h); ``device`` (``shared.device.select_device``:
    "auto" or None, "cpu", "cuda", "cuda:N"): "auto" is CUDA when available, else the CPU;
    ``precision`` of the image encoder (``PRECISIONS``): "auto" is bf16 autocast on CUDA, fp32 elsewhere; "fp32" is
    segment_anything's own. DataNotFoundError naming the fix when segment_anything is not installed or the
    checkpoint is missing."""
    _check_precision(precision)  # before the 2.5 GB checkpoint is read
    path = locate_sam(checkpoint)
    from segment_anything import SamPredictor, sam_model_registry

    if model_type is None:
        model_type = next((kind for kind in SAM_CHECKPOINTS if kind in path.name), "vit_h")
    if model_type not in SAM_CHECKPOINTS:
        raise unknown_choice("SAM model type", model_type, SAM_CHECKPOINTS)
    import torch

    from shared.device import select_device

    if not isinstance(device, torch.device):
        device = select_device(device)  # before the checkpoint is read: "cuda" without CUDA is a ConfigError
    sam = sam_model_registry[model_type](checkpoint=str(path)).to(device).eval()
    return SamAnnotator(SamPredictor(sam), checkpoint=str(path), model_type=model_type, precision=precision)


@dataclass(frozen=True)
class AnnotatorSpec:
    description: str
    build: Callable[..., Annotator]  # build(checkpoint=None, **options)


def _build_grabcut(checkpoint=None, **options) -> GrabCutAnnotator:
    return GrabCutAnnotator(**options)


def _build_sam(checkpoint=None, **options) -> SamAnnotator:
    return load_sam(checkpoint, **options)


ANNOTATORS = {
    "grabcut": AnnotatorSpec("offline stand-in: cv2.grabCut from box prompts, cv2.floodFill from point prompts",
                             _build_grabcut),
    "sam": AnnotatorSpec("segment_anything SamPredictor, multimask_output=True, argmax score (the paper: ViT-H)",
                         _build_sam),
}


def make_annotator(annotator="grabcut", checkpoint=None, **options) -> Annotator:
    """An annotator: a name of ``ANNOTATORS`` built with ``options`` (grabcut: iterations, context, pad, tolerance;
    sam: model_type, device, precision), or an annotator object, returned as it is."""
    if not isinstance(annotator, str):
        if not all(hasattr(annotator, a) for a in ("set_image", "segment")):
            raise ConfigError(f"an annotator is a name ({', '.join(ANNOTATORS)}) or has set_image and segment, "
                              f"got {type(annotator).__name__}")
        if options:
            raise ConfigError(f"annotator options {sorted(options)} apply to a named annotator only")
        return annotator
    if annotator not in ANNOTATORS:
        raise unknown_choice("annotator", annotator, ANNOTATORS)
    return ANNOTATORS[annotator].build(checkpoint, **options)


# ------------------------------------------------------------------------------------------------ weak_dataset
def image_getter(data) -> Callable[[int], np.ndarray]:
    """image id -> (h, w, 3) uint8 RGB; ``data.image(image_id, required=True)`` where it takes ``required`` (a real
    dataset's missing image file is then an error, not a grey canvas that would be "annotated")."""
    if callable(getattr(data, "image", None)):
        if "required" in inspect.signature(data.image).parameters:
            return lambda image_id: data.image(image_id, required=True)
        return data.image
    images = getattr(data, "images", None)
    if images is None or not hasattr(data, "dataset"):
        raise ConfigError("data must have .dataset and either .image(image_id) or .images (n, h, w, 3) in the order "
                          "of dataset['images'] (benchmark_n.sources.Annotations or shapes.ShapesData)")
    position = {im["id"]: i for i, im in enumerate(data.dataset["images"])}
    return lambda image_id: images[position[image_id]]


def _official_bbox(mask: np.ndarray) -> list[int]:
    """The official ``[x_min, y_min, x_max - x_min, y_max - y_min]`` (max inclusive: w and h one pixel short)."""
    rows, cols = np.nonzero(mask)
    return [int(cols.min()), int(rows.min()), int(cols.max() - cols.min()), int(rows.max() - rows.min())]


def _prompt_masks(prompt_source: dict | None, dataset: dict) -> dict | None:
    """annotation id -> the ``prompt_source`` annotation to derive its prompt from (same image required)."""
    if prompt_source is None:
        return None
    check_coco(prompt_source, source="the prompt source")
    images = {ann["id"]: ann["image_id"] for ann in dataset["annotations"]}
    by_id = {}
    for ann in prompt_source["annotations"]:
        if ann["id"] in images and ann["image_id"] != images[ann["id"]]:
            raise DataFormatError(f"prompt source annotation {ann['id']} is on image {ann['image_id']}, the ground "
                                  f"truth's on image {images[ann['id']]}; prompts are matched by annotation id")
        by_id[ann["id"]] = ann
    return by_id


def _pair_iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.count_nonzero(a | b)
    return 1.0 if union == 0 else np.count_nonzero(a & b) / union


def weak_dataset(data, prompt: str, annotator="grabcut", seed: int = 0, class_noise_rate: float | None = None,
                 checkpoint: str | os.PathLike | None = None, official_bbox: bool = False, *, scale_bbox: float = 1,
                 prompt_source: dict | None = None, **annotator_options) -> NoisyDataset:
    """COCO-WAN: every non-crowd annotation of ``data.dataset`` re-annotated by ``annotator`` from ``prompt``
    (``PROMPTS``) of its ground-truth mask (module docstring: output format, ids, the ``noise`` record).

    ``annotator``: "grabcut" (offline), "sam" (``checkpoint``; ``load_sam``) or an annotator object; extra keyword
    options go to a named annotator. ``class_noise_rate``: then ``noise.class_noise(weak, rate, "uniform", seed)``
    (the COCO-WAN Hard tier: 0.4). ``official_bbox``: the official off-by-one box. ``scale_bbox``: the official
    omega. ``prompt_source``: a COCO dict with the same images whose annotation of the same id gives the prompt
    (e.g. a ``noise_dataset`` output: Table 14's "COCO-N Hard" prompts), the weak mask still scored against the
    ground truth; a ground-truth instance without one (deleted, or empty) gets no weak annotation (``no_prompt``).

    The manifest: prompt, annotator, annotator_settings, seed, scale_bbox, official_bbox, class_noise_rate and
    kind, prompt_source, code, the ``COUNTS``, and over the prompted instances (non-crowd, non-empty ground truth,
    a prompt) ``mean_iou`` / ``mean_dice`` of weak vs ground-truth mask (a dropped weak mask counts 0) and the
    detection scores at IoU 0.5 (``matched_50``: kept weak masks with IoU >= 0.5 with their own ground truth and its
    category; ``det_precision_50`` = matched / kept, ``det_recall_50`` = matched / non-crowd ground truths,
    ``det_f1_50``)."""
    spec = _prompt_spec(prompt)
    seed = _check_seed(seed)
    if class_noise_rate is not None and not 0.0 <= float(class_noise_rate) <= 1.0:
        raise ConfigError(f"class_noise_rate must be None or in [0, 1], got {class_noise_rate!r}")
    if not scale_bbox >= 1:
        raise ConfigError(f"scale_bbox (omega) must be >= 1, got {scale_bbox!r}")
    dataset = data.dataset
    check_coco(dataset)
    image_of = image_getter(data)
    sources = _prompt_masks(prompt_source, dataset)
    tool = make_annotator(annotator, checkpoint, **annotator_options)
    sizes = image_sizes(dataset)
    by_image: dict = {}
    for ann in dataset["annotations"]:
        by_image.setdefault(ann["image_id"], []).append(ann)
    counts = dict.fromkeys(COUNTS, 0)
    counts["annotations_in"] = len(dataset["annotations"])
    out_annotations, ious = [], []
    for entry in progress(dataset["images"], desc=f"COCO-WAN {prompt} ({getattr(tool, 'name', 'annotator')})"):
        anns = by_image.get(entry["id"], [])
        h, w = sizes[entry["id"]]
        image_set = False
        for ann in anns:
            if ann.get("iscrowd", 0):
                counts["crowd_skipped"] += 1
                out_annotations.append({**copy.deepcopy(ann), "id": len(out_annotations) + 1})
                continue
            rng = _ann_rng(seed, spec.code, ann["id"])
            truth = ann_to_mask(ann, h, w).astype(bool)
            if not truth.any():
                counts["empty_gt"] += 1
                continue
            if sources is None:
                prompt_mask = truth
            else:
                source = sources.get(ann["id"])
                prompt_mask = None if source is None else ann_to_mask(source, h, w).astype(bool)
                if prompt_mask is None or not prompt_mask.any():
                    counts["no_prompt"] += 1
                    continue
            if not image_set:
                image = np.asarray(image_of(entry["id"]))
                if image.shape != (h, w, 3) or image.dtype != np.uint8:
                    raise DataFormatError(f"image {entry['id']}: expected an ({h}, {w}, 3) uint8 RGB image, got "
                                          f"{image.shape} {image.dtype}")
                tool.set_image(image)
                image_set = True
            query = spec.make(prompt_mask, rng, scale_bbox)
            weak = np.asarray(tool.segment(query, rng)).astype(bool)
            if weak.shape != (h, w):
                raise DataFormatError(f"the annotator returned a {weak.shape} mask for a {(h, w)} image")
            overlap = _pair_iou(weak, truth)
            ious.append(overlap if weak.any() else 0.0)
            if not weak.any():
                counts["implicitly_deleted"] += 1
                continue
            fields = segmentation_fields(mask_to_rle(weak), h, w)
            if official_bbox:
                fields["bbox"] = _official_bbox(weak)
            value = query["box"] if "box" in query else query["point_coords"][0]
            out_annotations.append({
                "id": len(out_annotations) + 1, "image_id": ann["image_id"], "category_id": ann["category_id"],
                "iscrowd": ann.get("iscrowd", 0), **fields,
                "noise": {"class_flipped": False, "original_category_id": ann["category_id"],
                          "spatial": [f"weak_{prompt}"], "original_id": ann["id"],
                          "prompt": [round(float(v), 4) for v in value], "iou": round(float(overlap), 6)}})
    out = {key: out_annotations if key == "annotations" else copy.deepcopy(value) for key, value in dataset.items()}
    if class_noise_rate is not None:
        flipped = class_noise(out, float(class_noise_rate), CLASS_NOISE_KIND, seed).dataset
        for before, after in zip(out["annotations"], flipped["annotations"]):
            if "noise" in before:
                after["noise"] = {**before["noise"], "class_flipped": after["noise"]["class_flipped"]}
        out = flipped
    weak_anns = [a for a in out["annotations"] if "noise" in a]
    counts["kept"] = len(out["annotations"])
    counts["class_flipped"] = sum(a["noise"]["class_flipped"] for a in weak_anns)
    matched = sum(a["noise"]["iou"] >= 0.5 and not a["noise"]["class_flipped"] for a in weak_anns)
    n_truth = counts["annotations_in"] - counts["crowd_skipped"]
    manifest = {
        "prompt": prompt, "annotator": getattr(tool, "name", type(tool).__name__),
        "annotator_settings": tool.settings() if hasattr(tool, "settings") else {}, "seed": seed,
        "scale_bbox": scale_bbox, "official_bbox": bool(official_bbox),
        "class_noise_rate": None if class_noise_rate is None else float(class_noise_rate),
        "class_noise_kind": None if class_noise_rate is None else CLASS_NOISE_KIND,
        "prompt_source": "ground truth" if prompt_source is None else "given dataset",
        "code": code_fingerprint(weak_dataset), **counts,
        "mean_iou": float(np.mean(ious)) if ious else float("nan"),
        "mean_dice": float(np.mean([2 * j / (1 + j) for j in ious])) if ious else float("nan"),
        "matched_50": int(matched),
        "det_precision_50": matched / len(weak_anns) if weak_anns else float("nan"),
        "det_recall_50": matched / n_truth if n_truth else float("nan"),
        "det_f1_50": 2 * matched / (len(weak_anns) + n_truth) if weak_anns or n_truth else float("nan"),
    }
    return NoisyDataset(out, manifest)


def weak_tier(data, tier: str, annotator="grabcut", seed: int = 0, **kwargs) -> NoisyDataset:
    """``weak_dataset`` with the prompt and class noise of a COCO-WAN tier (``WAN_TIERS``: easy / medium / hard,
    or low / mid / high); the manifest gets ``tier``."""
    name = _TIER_NAMES[canonical_tier(tier)]
    result = weak_dataset(data, annotator=annotator, seed=seed, **WAN_TIERS[name], **kwargs)
    result.manifest["tier"] = name
    return result


# ------------------------------------------------------------------------------------------------ prompt quality
QUALITY_COLUMNS = ("prompt", "seed", "annotator", "n_gt", "kept", "implicitly_deleted", "mask_AP", "mask_AP50",
                   "mask_AP75", "boundary_AP", "boundary_AP50", "boundary_AP75", "mean_iou", "mean_dice",
                   "det_precision_50", "det_recall_50", "det_f1_50")


def prompt_quality(data, prompts: Sequence[str] = INSTANCE_PROMPTS, annotator="grabcut", seeds: Sequence[int] = (0,),
                   *, checkpoint=None, prompt_source: dict | None = None, dilation_ratio: float = 0.02,
                   on_label_set: Callable[[str, int, float], None] | None = None, **options) -> pd.DataFrame:
    """How good each prompt's weak annotations are (annotation level; Table 4's clean/noisy prompt columns, Table
    14's zero-shot row): one row per prompt and seed (``QUALITY_COLUMNS``) with ``annotation_quality(clean, weak)``
    mask and Boundary AP (AP, AP50, AP75; named explicitly, as the paper's "APb" and "APB" differ), mean per-mask
    IoU and Dice (Table 14's "IoU" and, as we read it, "F1"), and the detection precision / recall / F1 at IoU 0.5
    (Table 14's "F1" is below its IoU in 3 of 4 cells, impossible for a per-mask Dice). A named annotator is built
    once (SAM loads once). ``prompt_source``, ``options``: as ``weak_dataset``. ``on_label_set(prompt, seed,
    seconds)`` is called after each weak label set is made (the pages log it to ``shared.runlog``)."""
    tool = make_annotator(annotator, checkpoint, **options)
    rows = []
    for prompt in prompts:
        for seed in seeds:
            start = time.perf_counter()
            weak = weak_dataset(data, prompt, tool, seed, prompt_source=prompt_source)
            if on_label_set is not None:
                on_label_set(prompt, seed, time.perf_counter() - start)
            m = weak.manifest
            quality = annotation_quality(data.dataset, weak.dataset, dilation_ratio=dilation_ratio)
            rows.append({"prompt": prompt, "seed": seed, "annotator": m["annotator"],
                         "n_gt": m["annotations_in"] - m["crowd_skipped"], "kept": m["kept"] - m["crowd_skipped"],
                         "implicitly_deleted": m["implicitly_deleted"],
                         **{k: quality[k] for k in QUALITY_COLUMNS if k in quality},
                         **{k: m[k] for k in ("mean_iou", "mean_dice", "det_precision_50", "det_recall_50",
                                              "det_f1_50")}})
    return pd.DataFrame(rows, columns=list(QUALITY_COLUMNS))


__all__ = ["BOX_NOISE_SD", "COUNTS", "CLASS_NOISE_KIND", "tight_box", "Prompt", "PROMPTS", "INSTANCE_PROMPTS",
           "NOT_PER_INSTANCE", "TEXT_PROMPT_HELP", "WAN_TIERS", "make_prompt", "Annotator", "grabcut_box", "flood_point",
           "GrabCutAnnotator", "PRECISIONS", "resolved_precision", "encoder_autocast", "SamAnnotator",
           "SAM_CHECKPOINTS", "default_sam_checkpoint", "load_sam",
           "AnnotatorSpec", "ANNOTATORS", "make_annotator", "image_getter", "weak_dataset", "weak_tier",
           "QUALITY_COLUMNS",
           "prompt_quality"]
