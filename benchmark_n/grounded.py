"""COCO-WAN's text prompts (Grounded-SAM; Table 4 "Text {cls}", Table 5): class names -> detector boxes -> masks.

    from benchmark_n.grounded import text_weak_dataset, stand_in_detections, stand_in_train, grounding_dino_detections
    dets = stand_in_detections(data, stand_in_train(recipe))     # offline: a detector trained on other COCO-shapes
    dets = grounding_dino_detections(data)                       # the paper's: data_dir/weights/grounding-dino-base
    weak = text_weak_dataset(data, dets)                         # GrabCut from each kept box (annotator="sam": SAM)
    weak.dataset, weak.manifest["recall_50"], dets.counts        # a new COCO dict, what it did, what the detector did
    text_tier(data, "stand_in", seed=0)                          # both steps (DETECTORS), detector options apart

``data`` is what ``wan.weak_dataset`` takes: a COCO dict ``.dataset`` and the images, ``.image(image_id)`` or an
``.images`` array (n, h, w, 3) uint8 RGB in the order of ``dataset["images"]``.

**What a text prompt is.** Unlike the box and point prompts of ``benchmark_n.wan``, text-prompted weak labels are
not one per ground-truth instance. For each image the names of the classes of its non-crowd ground-truth
annotations are given to an open-vocabulary detector (the paper: "fed the class label from the annotations into
Grounded-DINO, and used the boxes output as a box query, similar to Grounded-SAM"); every detected box, with the
class it was found for, prompts the box annotator (``wan.make_annotator``: SAM, or the offline GrabCut), and each
mask becomes a weak annotation of that class. Missed objects, spurious boxes, boxes that merge neighbours and
boxes given to the wrong queried class are the noise.

**Detections** (``text_weak_dataset``'s input; ``DETECTORS`` make them) are COCO result dicts: ``image_id``,
``category_id``, ``bbox`` [x, y, w, h] and ``score`` in [0, 1] (other keys ignored). Kept: score >=
``score_threshold`` (0.35, Grounding-DINO's usual box threshold) and a category among the image's non-crowd
ground-truth categories (the classes the paper queries); the rest is counted as ``below_threshold`` /
``wrong_class``. A detector returns a ``Detections`` list, a plain list with ``.counts`` and ``.settings``, which
``text_weak_dataset`` copies into its manifest.

**Box convention.** A COCO ``bbox`` [x, y, w, h] covers the pixels x .. x + w - 1 (pycocotools' ``toBbox`` of a
mask: x the first column, w the number of columns), so the box prompt is ``[x, y, x + w - 1, y + h - 1]`` in
pixel indices with the max inclusive, ``wan.tight_box``'s convention: a detection equal to a ground truth's
``bbox`` prompts exactly that instance's ``box`` prompt. Grounding-DINO's continuous corners (x0, y0, x1, y1) in
[0, w] x [0, h] become ``[x0, y0, x1 - x0, y1 - y0]`` (pixel i spans [i, i + 1)). Prompts are clipped to the
image ([0, w - 1] x [0, h - 1], max >= min).

**Randomness.** The annotator's generator of a detection is ``np.random.default_rng([seed, 206, image_id,
category_id, round(100 x box), round(1e6 x score)])`` (206 = ``wan.PROMPTS["text"].code``; box = the clipped
prompt), from what the detection is, not where it is in the list: the output does not depend on the order or
subset of the detections, and the same call gives the same dataset.

**Output** (``text_weak_dataset``): every top-level key of the input, annotations replaced. Per image in
``images`` order: its crowd annotations copied unchanged but for the id (as ``wan.weak_dataset``), then its weak
annotations by descending score (ties: category id, then box); ids 1, 2, ... in that order. A weak annotation is
``{"id", "image_id", "category_id" (the class it was detected for), "iscrowd": 0, "segmentation" (compressed
RLE), "area", "bbox" (``coco.segmentation_fields``), "noise": {"class_flipped": False, "spatial":
["weak_text"], "prompt": the box, "score", "matched_id": the non-crowd ground truth of its image (any class) of
highest mask IoU, None where none overlaps, "iou": that IoU}}``. An empty mask is dropped (``empty_masks``).

**Manifest**: prompt "text", annotator, annotator_settings, seed, score_threshold, prompt_box (the convention),
code, the ``COUNTS`` (``detections_in`` = ``below_threshold`` + ``wrong_class`` + ``empty_masks`` + ``kept``;
``kept`` counts weak annotations only, ``crowd_copied`` the crowds), and the detection scores at IoU 0.5:
``gt_matched_50`` (non-crowd ground truths with a weak mask of their class at IoU >= 0.5), ``recall_50`` (over
``gt_instances``), ``precision_50`` (weak masks with a ground truth of their class at IoU >= 0.5, over ``kept``),
``mean_matched_iou`` (over the matched ground truths, each its best IoU); ``detector`` / ``detector_counts`` when
the detections came as a ``Detections``.

**Detectors** (``DETECTORS``):

* ``grounding_dino``: the paper's (``grounding_dino_detections``): transformers' ``GroundingDinoProcessor`` +
  ``GroundingDinoForObjectDetection`` from a local folder (default ``data_dir()/weights/grounding-dino-base``, a
  copy of IDEA-Research/grounding-dino-base; -tiny works too). Per image with ground truth, the prompt is its
  classes' names, lower-cased, "_" read as a space, each ending with "." ("circle. star.", ``text_prompt``);
  ``post_process_grounded_object_detection`` with ``threshold=box_threshold`` (a box's score is its highest
  token probability, kept when > it) and ``text_threshold`` (the tokens above it make the box's phrase). A phrase
  (special tokens removed, "." and spaces stripped at the ends) that is exactly one queried name gives that
  class; any other phrase (several classes, part of a name, nothing) is dropped and counted
  (``unmatched_phrase``; ``Detections.unmatched_phrases`` counts the texts). Prompts longer than the model's
  ``max_text_len`` (256 tokens) are cut by the model: classes past it are never found (COCO images have < 20).
* ``stand_in`` (offline): ``tiny_seg.fit`` trained on a *different* clean COCO-shapes set (``train``;
  ``stand_in_train``: the recipe's generator at another seed, as Grounding-DINO was trained on other data than
  the images it labels) and run on ``data``'s images; its per-class detections are what it answers to each
  queried class, its errors the text prompt's errors. Only its boxes and scores are used (the U-Net's own masks
  are dropped: the annotator draws the masks, as SAM does from Grounding-DINO's boxes).
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from pycocotools import mask as mask_utils

from benchmark_n.coco import ann_to_rle, check_coco, image_sizes, mask_to_rle, segmentation_fields
from benchmark_n.metrics import annotation_quality
from benchmark_n.noise import NoisyDataset
from benchmark_n.wan import PROMPTS, QUALITY_COLUMNS, _check_seed, image_getter, make_annotator
from shared.cache import code_fingerprint
from shared.errors import ConfigError, DataFormatError, DataNotFoundError, unknown_choice
from shared.paths import data_dir
from shared.progress import progress as progress_bar

TEXT_CODE = PROMPTS["text"].code  # keys the per-detection random streams, as wan's prompt codes do
COUNTS = ("gt_instances", "crowd_copied", "detections_in", "below_threshold", "wrong_class", "empty_masks", "kept")
DETECTION_KEYS = ("image_id", "category_id", "bbox", "score")
PROMPT_BOX = "COCO bbox [x, y, w, h] -> [x, y, x + w - 1, y + h - 1] (pixel indices, max inclusive), clipped"
GROUNDING_DINO_DIR = "grounding-dino-base"  # under data_dir()/weights
STAND_IN_SEED_OFFSET = 1000  # stand_in_train: shapes_seed + this (runs.load_pair uses shapes_seed and + 1)


class Detections(list):
    """COCO result dicts (a plain list) with what the detector did: ``counts`` (ints) and ``settings``."""

    def __init__(self, items=(), counts: dict | None = None, settings: dict | None = None):
        super().__init__(items)
        self.counts = dict(counts or {})
        self.settings = dict(settings or {})


# ------------------------------------------------------------------------------------------------ queries
def image_classes(dataset: dict) -> dict[int, list[int]]:
    """image id -> the sorted category ids of its non-crowd annotations (the classes a text prompt queries); every
    image of ``dataset["images"]`` is a key (an image without annotations queries nothing)."""
    classes = {im["id"]: set() for im in dataset["images"]}
    for ann in dataset["annotations"]:
        if not ann.get("iscrowd", 0):
            classes[ann["image_id"]].add(ann["category_id"])
    return {image_id: sorted(ids) for image_id, ids in classes.items()}


def query_names(dataset: dict) -> dict[int, str]:
    """category id -> the name Grounding-DINO is asked for: lower-cased, "_" as a space, spaces collapsed.
    DataFormatError for a name with "." (the prompt's separator) or two categories with the same query name."""
    names, seen = {}, {}
    for category in dataset["categories"]:
        name = " ".join(str(category["name"]).lower().replace("_", " ").split())
        if not name or "." in name:
            raise DataFormatError(f"category {category['id']} is named {category['name']!r}; a text prompt needs a "
                                  "non-empty name without '.', which separates Grounding-DINO's classes")
        if name in seen:
            raise DataFormatError(f"categories {seen[name]} and {category['id']} are both asked for as {name!r}; a "
                                  "detected phrase could not tell them apart")
        names[category["id"]], seen[name] = name, category["id"]
    return names


def text_prompt(names) -> str:
    """Grounding-DINO's prompt for class names: "cat. dog." (lower-case, each ending with ".")."""
    return " ".join(f"{' '.join(str(n).lower().replace('_', ' ').split())}." for n in names)


# ------------------------------------------------------------------------------------------------ weak labels
def _check_threshold(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
            or not 0.0 <= float(value) <= 1.0:
        raise ConfigError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def _check_detections(detections, image_ids: set) -> list[dict]:
    if isinstance(detections, dict) or not hasattr(detections, "__iter__"):
        raise DataFormatError("detections must be a list of COCO result dicts (image_id, category_id, bbox, score)")
    checked = []
    for k, det in enumerate(detections):
        if not isinstance(det, dict):
            raise DataFormatError(f"detection {k} is a {type(det).__name__}, not a COCO result dict")
        missing = [key for key in DETECTION_KEYS if key not in det]
        if missing:
            raise DataFormatError(f"detection {k} has no {', '.join(missing)}; a detection is a COCO result dict "
                                  "with image_id, category_id, bbox [x, y, w, h] and score")
        if det["image_id"] not in image_ids:
            raise DataFormatError(f"detection {k} is on image {det['image_id']!r}, which is not in the dataset's "
                                  "images")
        try:
            bbox = np.asarray(det["bbox"], dtype=np.float64)
            score = float(det["score"])
        except (TypeError, ValueError):
            raise DataFormatError(f"detection {k}: bbox must be 4 numbers and score a number, got "
                                  f"{det['bbox']!r}, {det['score']!r}") from None
        if bbox.shape != (4,) or not np.isfinite(bbox).all() or bbox[2] < 0 or bbox[3] < 0:
            raise DataFormatError(f"detection {k} (image {det['image_id']}): bbox must be 4 finite numbers [x, y, w, "
                                  f"h] with w, h >= 0, got {det['bbox']!r}")
        if not 0.0 <= score <= 1.0:
            raise DataFormatError(f"detection {k} (image {det['image_id']}): score must be in [0, 1], got "
                                  f"{det['score']!r}")
        checked.append({"image_id": det["image_id"], "category_id": det["category_id"], "bbox": bbox,
                        "score": score})
    return checked


def prompt_box(bbox, h: int, w: int) -> np.ndarray:
    """The box prompt [x0, y0, x1, y1] (float, max inclusive) of a COCO bbox [x, y, w, h] on an (h, w) image:
    ``[x, y, x + w - 1, y + h - 1]`` clipped to [0, w - 1] x [0, h - 1] with x1 >= x0, y1 >= y0."""
    x, y, bw, bh = (float(v) for v in bbox)
    x0, y0 = float(np.clip(x, 0, w - 1)), float(np.clip(y, 0, h - 1))
    return np.array([x0, y0, float(np.clip(x + bw - 1, x0, w - 1)), float(np.clip(y + bh - 1, y0, h - 1))])


def _detection_rng(seed: int, image_id, category_id, box: np.ndarray, score: float) -> np.random.Generator:
    try:
        entropy = [seed, TEXT_CODE, int(image_id), int(category_id), *(int(round(v * 100)) for v in box),
                   int(round(score * 1e6))]
    except (TypeError, ValueError):
        raise DataFormatError(f"image {image_id!r}, category {category_id!r}: ids must be integers (they seed the "
                              "annotator)") from None
    if min(entropy) < 0:
        raise DataFormatError(f"image {image_id!r}, category {category_id!r}: ids must be non-negative (they seed "
                              "the annotator)")
    return np.random.default_rng(entropy)


def _order(det: dict) -> tuple:
    return -det["score"], det["category_id"], tuple(det["bbox"].tolist())


def _rle(mask: np.ndarray) -> dict:
    return mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))


def text_weak_dataset(data, detections, annotator="grabcut", seed: int = 0, *, score_threshold: float = 0.35,
                      checkpoint: str | os.PathLike | None = None, **annotator_options) -> NoisyDataset:
    """Text-prompted weak annotations (Grounded-SAM): a weak mask of the detected class from every detection with
    score >= ``score_threshold`` whose category is among its image's non-crowd ground-truth categories, drawn by
    ``annotator`` (``wan.make_annotator``: "grabcut", "sam" with ``checkpoint``, or an annotator object; options
    to a named one) from the box prompt ``prompt_box(bbox)``. Output, manifest, randomness: module docstring.
    DataFormatError for a detection on an unknown image, without image_id / category_id / bbox / score, or with a
    bad bbox or score; ConfigError for a threshold outside [0, 1] or a bad seed."""
    seed = _check_seed(seed)
    score_threshold = _check_threshold("score_threshold", score_threshold)
    dataset = data.dataset
    check_coco(dataset)
    sizes = image_sizes(dataset)
    dets = _check_detections(detections, set(sizes))
    image_of = image_getter(data)
    tool = make_annotator(annotator, checkpoint, **annotator_options)
    queried = image_classes(dataset)
    counts = dict.fromkeys(COUNTS, 0)
    counts["detections_in"] = len(dets)
    by_image: dict = {}
    for det in dets:
        if det["score"] < score_threshold:
            counts["below_threshold"] += 1
        elif det["category_id"] not in queried[det["image_id"]]:
            counts["wrong_class"] += 1
        else:
            by_image.setdefault(det["image_id"], []).append(det)
    truths_of: dict = {}
    for ann in dataset["annotations"]:
        truths_of.setdefault(ann["image_id"], []).append(ann)
    out_annotations = []
    matched_gt, true_positives = {}, 0  # ground-truth id -> best same-class IoU >= 0.5
    for entry in progress_bar(dataset["images"], desc=f"COCO-WAN text ({getattr(tool, 'name', 'annotator')})"):
        image_id = entry["id"]
        h, w = sizes[image_id]
        anns = truths_of.get(image_id, [])
        for ann in anns:
            if ann.get("iscrowd", 0):
                counts["crowd_copied"] += 1
                out_annotations.append({**copy.deepcopy(ann), "id": len(out_annotations) + 1})
        truths = [a for a in anns if not a.get("iscrowd", 0)]
        counts["gt_instances"] += len(truths)
        todo = sorted(by_image.get(image_id, []), key=_order)
        if not todo:
            continue
        image = np.asarray(image_of(image_id))
        if image.shape != (h, w, 3) or image.dtype != np.uint8:
            raise DataFormatError(f"image {image_id}: expected an ({h}, {w}, 3) uint8 RGB image, got {image.shape} "
                                  f"{image.dtype}")
        tool.set_image(image)
        truth_rles = [ann_to_rle(a, h, w) for a in truths]
        for det in todo:
            box = prompt_box(det["bbox"], h, w)
            rng = _detection_rng(seed, image_id, det["category_id"], box, det["score"])
            weak = np.asarray(tool.segment({"box": box}, rng)).astype(bool)
            if weak.shape != (h, w):
                raise DataFormatError(f"the annotator returned a {weak.shape} mask for a {(h, w)} image")
            if not weak.any():
                counts["empty_masks"] += 1
                continue
            ious = (np.asarray(mask_utils.iou([_rle(weak)], truth_rles, [0] * len(truths))).reshape(-1)
                    if truths else np.zeros(0))
            best = int(np.argmax(ious)) if ious.size else -1
            hit = False
            for k, ann in enumerate(truths):
                if ann["category_id"] == det["category_id"] and ious[k] >= 0.5:
                    hit = True
                    matched_gt[ann["id"]] = max(matched_gt.get(ann["id"], 0.0), float(ious[k]))
            true_positives += hit
            overlap = float(ious[best]) if best >= 0 else 0.0
            out_annotations.append({
                "id": len(out_annotations) + 1, "image_id": image_id, "category_id": det["category_id"],
                "iscrowd": 0, **segmentation_fields(mask_to_rle(weak), h, w),
                "noise": {"class_flipped": False, "spatial": ["weak_text"],
                          "prompt": [round(float(v), 4) for v in box], "score": round(det["score"], 6),
                          "matched_id": truths[best]["id"] if overlap > 0 else None, "iou": round(overlap, 6)}})
            counts["kept"] += 1
    out = {key: out_annotations if key == "annotations" else copy.deepcopy(value) for key, value in dataset.items()}
    n_gt, kept = counts["gt_instances"], counts["kept"]
    manifest = {
        "prompt": "text", "annotator": getattr(tool, "name", type(tool).__name__),
        "annotator_settings": tool.settings() if hasattr(tool, "settings") else {}, "seed": seed,
        "score_threshold": score_threshold, "prompt_box": PROMPT_BOX, "code": code_fingerprint(text_weak_dataset),
        **counts, "gt_matched_50": len(matched_gt),
        "recall_50": len(matched_gt) / n_gt if n_gt else float("nan"),
        "precision_50": true_positives / kept if kept else float("nan"),
        "mean_matched_iou": float(np.mean(list(matched_gt.values()))) if matched_gt else float("nan"),
    }
    if isinstance(detections, Detections):
        manifest["detector"], manifest["detector_counts"] = dict(detections.settings), dict(detections.counts)
    return NoisyDataset(out, manifest)


# ------------------------------------------------------------------------------------------------ stand-in detector
@dataclass(frozen=True)
class _Images:
    """``.dataset`` and ``.image(image_id, required=True)`` over anything ``wan.image_getter`` reads (fit_predict's
    interface)."""
    dataset: dict
    getter: Callable

    def image(self, image_id: int, required: bool = True) -> np.ndarray:
        return self.getter(image_id)


def stand_in_train(recipe=None, seed_offset: int = STAND_IN_SEED_OFFSET):
    """The stand-in detector's training set: the clean train split of ``recipe`` (default ``runs.DataRecipe()``)
    generated with ``shapes_seed + seed_offset``, i.e. other images than the recipe's train and val sets."""
    from benchmark_n.runs import DataRecipe, load_pair

    recipe = recipe or DataRecipe()
    if recipe.dataset != "shapes":
        raise ConfigError(f"the stand-in detector trains on COCO-shapes; recipe.dataset is {recipe.dataset!r} (use "
                          "grounding_dino_detections on a real dataset)")
    return load_pair(replace(recipe, shapes_seed=recipe.shapes_seed + int(seed_offset)))[0]


#: the stand-in detectors trained in this process, by what they were trained on (``_fitted_stand_in``): a page scores
#: the val images' text labels and trains a model on the train images' with the same detector
_STAND_INS: OrderedDict = OrderedDict()
STAND_IN_CACHE = 2


def _fitted_stand_in(trainer, hp: dict, seed: int) -> dict:
    """``tiny_seg.fit(trainer, hp, seed)``, trained once per training set (annotations and image pixels), hp and seed in
    this process."""
    from benchmark_n import tiny_seg
    from benchmark_n.quality import fingerprint

    pixels = hashlib.sha256()
    for entry in trainer.dataset["images"]:
        pixels.update(np.ascontiguousarray(trainer.image(entry["id"], required=True)).tobytes())
    key = (fingerprint(trainer.dataset), pixels.hexdigest(), json.dumps(hp, sort_keys=True), seed)
    if key not in _STAND_INS:
        _STAND_INS[key] = tiny_seg.fit(trainer, hp, seed=seed)
        if len(_STAND_INS) > STAND_IN_CACHE:
            _STAND_INS.popitem(last=False)
    return _STAND_INS[key]


def stand_in_detections(data, train, hparams: dict | None = None, seed: int = 0) -> Detections:
    """The offline stand-in for Grounding-DINO: ``tiny_seg.fit(train, hparams, seed)`` (a detector trained on the clean
    annotations of ``train``, other images than ``data``'s; ``stand_in_train``; trained once per process for the same
    training set, hparams and seed) and its ``tiny_seg.predict`` detections on ``data``'s images, as ``Detections`` of
    image_id, category_id, bbox, score (its masks dropped). ``train`` and ``data`` need the same categories
    (DataFormatError otherwise)."""
    from benchmark_n import tiny_seg

    seed = _check_seed(seed)
    hp = tiny_seg.check_hparams(dict(hparams or {}))
    check_coco(data.dataset)
    val = _Images(data.dataset, image_getter(data))
    trainer = train if callable(getattr(train, "image", None)) else _Images(train.dataset, image_getter(train))
    if [c["id"] for c in data.dataset["categories"]] != [c["id"] for c in train.dataset["categories"]]:
        raise DataFormatError("train and data have different categories; the stand-in detector predicts train's")
    fitted = _fitted_stand_in(trainer, hp, seed)
    found = [{k: d[k] for k in DETECTION_KEYS} for d in tiny_seg.predict(fitted, val)]
    counts = {"images": len(data.dataset["images"]), "detections": len(found),
              "train_images": len(train.dataset["images"])}
    settings = {"detector": "stand_in", "model": "tiny_seg.fit", "hparams": hp, "seed": seed,
                "train": getattr(train, "name", f"{counts['train_images']} images"),
                "final_loss": fitted["history"][-1]["loss"] if fitted["history"] else None}
    return Detections(found, counts, settings)


# ------------------------------------------------------------------------------------------------ Grounding-DINO
def default_grounding_dino_dir() -> Path:
    """``data_dir()/weights/grounding-dino-base`` (``$NOISY_DATA_DIR`` or ``<repo>/data``)."""
    return data_dir() / "weights" / GROUNDING_DINO_DIR


def locate_grounding_dino(model_dir: str | os.PathLike | None = None) -> Path:
    """The Grounding-DINO folder (default ``default_grounding_dino_dir()``), once it holds config.json and
    transformers has GroundingDinoForObjectDetection; DataNotFoundError naming the download command otherwise."""
    path = Path(model_dir).expanduser() if model_dir is not None else default_grounding_dino_dir()
    try:
        from transformers import GroundingDinoForObjectDetection  # noqa: F401 (only its presence is checked)
    except ImportError as error:
        raise DataNotFoundError(f"Grounding-DINO needs torch and transformers 4.51 or newer (its post-processing "
                                f"takes threshold= and returns text_labels): pip install 'transformers>=4.51' "
                                f"({error})") from None
    if not (path / "config.json").is_file():
        raise DataNotFoundError(
            f"no Grounding-DINO model at {path} (a folder with config.json, the weights and the processor "
            f"files); get it with `huggingface-cli download IDEA-Research/grounding-dino-base --local-dir "
            f"{path}` (or -tiny), or pass model_dir=FOLDER")
    return path


def _load_grounding_dino(model_dir: Path, device):
    import torch
    from transformers import GroundingDinoForObjectDetection, GroundingDinoProcessor

    from shared.device import select_device

    model_dir = locate_grounding_dino(model_dir)
    device = select_device(device or "auto")
    processor = GroundingDinoProcessor.from_pretrained(str(model_dir))
    model = GroundingDinoForObjectDetection.from_pretrained(str(model_dir)).to(device).eval()
    return torch, processor, model, device


def _phrase(text: str, special: set) -> str:
    words = [word for word in str(text).split() if word not in special]
    return " ".join(words).strip(" .")


def grounding_dino_detections(data, model_dir: str | os.PathLike | None = None, *, box_threshold: float = 0.35,
                              text_threshold: float = 0.25, device: str | None = None,
                              progress: bool = True) -> Detections:
    """The paper's detector: Grounding-DINO (transformers) from ``model_dir`` (default
    ``default_grounding_dino_dir()``) asked, per image, for its non-crowd ground-truth classes (``text_prompt`` of
    ``query_names``); boxes with score > ``box_threshold``, phrases from the tokens > ``text_threshold``, each
    mapped to the queried class of exactly that name or dropped (module docstring). ``Detections`` of image_id,
    category_id, bbox [x, y, w, h] (clipped to the image), score, phrase; ``counts``: images, queried_images,
    boxes, unmatched_phrase, detections; ``unmatched_phrases``: Counter of the dropped texts. DataNotFoundError
    naming the download command when the folder or transformers' Grounding-DINO is missing."""
    box_threshold = _check_threshold("box_threshold", box_threshold)
    text_threshold = _check_threshold("text_threshold", text_threshold)
    dataset = data.dataset
    check_coco(dataset)
    path = Path(model_dir).expanduser() if model_dir is not None else default_grounding_dino_dir()
    names = query_names(dataset)
    queried = image_classes(dataset)
    image_of = image_getter(data)
    torch, processor, model, device = _load_grounding_dino(path, device)
    special = set(getattr(processor.tokenizer, "all_special_tokens", []))
    counts = dict.fromkeys(("images", "queried_images", "boxes", "unmatched_phrase", "detections"), 0)
    counts["images"] = len(dataset["images"])
    unmatched, found = Counter(), []
    images = dataset["images"]
    for entry in (progress_bar(images, desc="Grounding-DINO") if progress else images):
        classes = queried[entry["id"]]
        if not classes:
            continue
        counts["queried_images"] += 1
        h, w = int(entry["height"]), int(entry["width"])
        image = np.asarray(image_of(entry["id"]))
        if image.shape != (h, w, 3) or image.dtype != np.uint8:
            raise DataFormatError(f"image {entry['id']}: expected an ({h}, {w}, 3) uint8 RGB image, got "
                                  f"{image.shape} {image.dtype}")
        by_name = {names[c]: c for c in classes}
        inputs = processor(images=image, text=text_prompt(names[c] for c in classes), return_tensors="pt").to(device)
        with torch.no_grad():
            outputs = model(**inputs)
        result = processor.post_process_grounded_object_detection(
            outputs, inputs["input_ids"], threshold=box_threshold, text_threshold=text_threshold,
            target_sizes=[(h, w)])[0]
        boxes, scores = result["boxes"].detach().cpu().numpy(), result["scores"].detach().cpu().numpy()
        counts["boxes"] += len(scores)
        for box, score, text in zip(boxes, scores, result["text_labels"]):
            phrase = _phrase(text, special)
            if phrase not in by_name:
                counts["unmatched_phrase"] += 1
                unmatched[phrase] += 1
                continue
            x0, x1 = np.clip([box[0], box[2]], 0, w)
            y0, y1 = np.clip([box[1], box[3]], 0, h)
            found.append({"image_id": entry["id"], "category_id": by_name[phrase],
                          "bbox": [float(x0), float(y0), float(max(x1 - x0, 0)), float(max(y1 - y0, 0))],
                          "score": float(np.clip(score, 0.0, 1.0)), "phrase": phrase})
    counts["detections"] = len(found)
    settings = {"detector": "grounding_dino", "model_dir": str(path), "box_threshold": box_threshold,
                "text_threshold": text_threshold, "device": str(device)}
    detections = Detections(found, counts, settings)
    detections.unmatched_phrases = unmatched
    return detections


# ------------------------------------------------------------------------------------------------ registry
@dataclass(frozen=True)
class DetectorSpec:
    description: str
    detect: Callable[..., Detections]  # detect(data, seed, **options)


DETECTORS = {
    "stand_in": DetectorSpec(
        "offline: tiny_seg U-Net trained on other clean COCO-shapes (stand_in_train), its per-class detections; "
        "options train (default stand_in_train()), hparams",
        lambda data, seed=0, train=None, hparams=None: stand_in_detections(
            data, train if train is not None else stand_in_train(), hparams, seed)),
    "grounding_dino": DetectorSpec(
        "the paper's Grounding-DINO (transformers, local IDEA-Research/grounding-dino-base), GT class names as "
        "the prompt; options model_dir, box_threshold, text_threshold, device",
        lambda data, seed=0, **options: grounding_dino_detections(data, **options)),
}


def text_tier(data, detector: str = "stand_in", annotator="grabcut", seed: int = 0, *,
              detector_options: dict | None = None, **options) -> NoisyDataset:
    """``text_weak_dataset(data, DETECTORS[detector].detect(data, seed, **detector_options), annotator, seed,
    **options)``; the manifest's ``detector`` gets ``name``."""
    if detector not in DETECTORS:
        raise unknown_choice("detector", detector, DETECTORS)
    detections = DETECTORS[detector].detect(data, seed, **(detector_options or {}))
    result = text_weak_dataset(data, detections, annotator, seed, **options)
    result.manifest.setdefault("detector", {})["name"] = detector
    return result


def text_prompt_quality(data, detector: str = "stand_in", annotator="grabcut", seeds=(0,), *,
                        detector_options: dict | None = None, dilation_ratio: float = 0.02,
                        on_label_set: Callable[[int, float], None] | None = None, **options) -> pd.DataFrame:
    """``wan.prompt_quality``'s table for the text prompt: per seed, ``text_tier``'s weak labels of ``data`` scored
    against its clean annotations (``metrics.annotation_quality``), in ``wan.QUALITY_COLUMNS`` with prompt "text";
    ``mean_iou`` is the mean best IoU of the matched ground truths, ``mean_dice`` NaN (text labels are not one per
    ground truth), the detection precision / recall / F1 at IoU 0.5 from the manifest. ``on_label_set(seed,
    seconds)`` is called after each seed's labels are made (the pages log it to ``shared.runlog``)."""
    rows = []
    for seed in seeds:
        start = time.perf_counter()
        weak = text_tier(data, detector, annotator, seed, detector_options=detector_options, **options)
        if on_label_set is not None:
            on_label_set(seed, time.perf_counter() - start)
        m = weak.manifest
        quality = annotation_quality(data.dataset, weak.dataset, dilation_ratio=dilation_ratio)
        p, r = m["precision_50"], m["recall_50"]
        rows.append({"prompt": "text", "seed": seed, "annotator": m["annotator"], "n_gt": m["gt_instances"],
                     "kept": m["kept"], "implicitly_deleted": m["empty_masks"],
                     **{k: quality[k] for k in QUALITY_COLUMNS if k in quality},
                     "mean_iou": m["mean_matched_iou"], "mean_dice": float("nan"), "det_precision_50": p,
                     "det_recall_50": r, "det_f1_50": 2 * p * r / (p + r) if p + r > 0 else 0.0})
    return pd.DataFrame(rows, columns=list(QUALITY_COLUMNS))


__all__ = ["TEXT_CODE", "COUNTS", "DETECTION_KEYS", "PROMPT_BOX", "GROUNDING_DINO_DIR", "STAND_IN_SEED_OFFSET",
           "Detections", "image_classes", "query_names", "text_prompt", "prompt_box", "text_weak_dataset",
           "stand_in_train", "stand_in_detections", "default_grounding_dino_dir", "locate_grounding_dino",
           "grounding_dino_detections",
           "DetectorSpec", "DETECTORS", "text_tier", "text_prompt_quality"]
