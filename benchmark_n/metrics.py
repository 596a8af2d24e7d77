"""Evaluation metrics of Benchmark-N: COCO mask / box AP, Boundary AP, the annotation-quality AP of Fig. 11, and the
pixel metrics of the CAMUS analogue (Table 6).

Instance metrics take a ground-truth COCO dataset dict (``images``, ``annotations``, ``categories``; never mutated)
and a list of detections, each ``{"image_id", "category_id", "score", "segmentation" and/or "bbox"}`` with the
segmentation as polygons or an RLE (``counts`` str, bytes or, uncompressed, a list). They return fractions in [0, 1]
under the keys of ``AP_KEYS``:

* ``AP``   mean over the IoU thresholds 0.50:0.05:0.95, the categories and COCO's 101 recall points of the
  interpolated precision (at most 100 detections per image);
* ``AP50`` / ``AP75`` the same at one IoU threshold;
* ``AP_S`` / ``AP_M`` / ``AP_L`` the same over ground truths of area < 32², 32²..96², > 96² pixels
  (ground-truth area from ``ann["area"]``, detection area from its mask, or its box for ``iou_type="bbox"``);
  NaN where the ground truth has no instance in that range (COCO's -1).

    coco_ap(gt, detections)                          # mask AP, {"AP": 0.41, "AP50": ..., "AP_L": ...}
    coco_ap(gt, detections, "bbox", use_cats=False)  # class-agnostic box AP (Table 10)
    boundary_ap(gt, detections)                      # Boundary AP, IoU := min(mask IoU, boundary IoU)
    annotation_quality(clean, noisy)                 # Fig. 11: {"mask_AP": ..., "boundary_AP": ...}

**Boundary AP** (Cheng et al. 2021, "Boundary IoU"): COCO AP in which the IoU of a detection with a non-crowd ground
truth is min(mask IoU, boundary IoU), crowd ground truths keeping mask IoU. A mask's boundary is its inner band of
width d = max(1, round(dilation_ratio * image diagonal)) pixels (``mask_to_boundary``); at 640x480 and the default
ratio 0.02, d = 16. Two backends compute it, with the same numbers on every case tested:

* ``"reference"`` (default): pycocotools' COCOeval with ``computeIoU`` replaced by that minimum, the boundaries
  from ``mask_to_boundary`` (the official ``boundary-iou-api`` definition) cached per annotation.
* ``"faster_coco_eval"``: faster-coco-eval's ``COCOeval_faster(iouType="boundary", boundary_dilation_ratio=...)``.
  Its ``computeIoU`` (``core/cocoeval.py``) takes the same minimum for non-crowd ground truths, and its band (C++
  ``toBoundary``; ``rleToBoundaryCV`` is the same padded 3x3 erosion in Python) equals ``mask_to_boundary`` pixel
  for pixel, except on images at most 2d high, where a mask filling whole columns of the image gets a wrong band
  (no erosion from the top and bottom borders), so this backend refuses such images. It is not the default
  because of that deviation, and because it was no faster than the reference here (2 CPU cores).

**Pixel metrics** take binary masks (H, W) of the same shape: ``dice``, ``iou``, ``hausdorff`` (in the units of
``spacing``), and the left-ventricle volume by the single-plane area-length method with ``ejection_fraction``.
"""
from __future__ import annotations

import contextlib
import io
from collections import Counter, OrderedDict

import cv2
import numpy as np
from faster_coco_eval import COCO as FasterCOCO
from faster_coco_eval import COCOeval_faster
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
from scipy.spatial.distance import directed_hausdorff, pdist

from benchmark_n.coco import ann_to_rle, check_coco, image_sizes, rle_json
from shared.errors import ConfigError, DataFormatError, unknown_choice

AP_KEYS = ("AP", "AP50", "AP75", "AP_S", "AP_M", "AP_L")
IOU_TYPES = ("segm", "bbox")
BOUNDARY_BACKENDS = ("reference", "faster_coco_eval")
QUALITY_METRICS = {"mask": "mask_", "boundary": "boundary_", "box": "box_"}


# ------------------------------------------------------------------------------------------------ COCO AP
def coco_ap(gt: dict, detections: list[dict], iou_type: str = "segm", *, use_cats: bool = True,
            max_dets: int = 100) -> dict[str, float]:
    """COCO AP of ``detections`` against ``gt`` with pycocotools' COCOeval (``iou_type`` "segm" = mask IoU, "bbox" =
    box IoU), as ``{key: fraction}`` over ``AP_KEYS``. ``use_cats=False`` matches detections to ground truths of any
    category (class-agnostic, ``params.useCats = 0``). ``max_dets``: the detections kept per image (COCO's 100). No
    detections gives AP 0; a detection on an image or category that ``gt`` lacks raises DataFormatError."""
    if iou_type not in IOU_TYPES:
        raise unknown_choice("iou_type", iou_type, IOU_TYPES)
    gt_dataset = _ground_truth(gt)
    dt_dataset = _detection_dataset(gt_dataset, detections, iou_type)
    with contextlib.redirect_stdout(io.StringIO()):
        evaluator = COCOeval(_pycoco(gt_dataset), _pycoco(dt_dataset), iou_type)
        return _run(evaluator, use_cats, max_dets)


def boundary_ap(gt: dict, detections: list[dict], dilation_ratio: float = 0.02, backend: str = "reference",
                *, use_cats: bool = True, max_dets: int = 100) -> dict[str, float]:
    """Boundary AP (Cheng et al. 2021) of ``detections`` against ``gt``, as ``{key: fraction}`` over ``AP_KEYS``:
    COCO mask AP with IoU := min(mask IoU, boundary IoU) for non-crowd ground truths (module docstring), boundary
    bands of width max(1, round(dilation_ratio * image diagonal)). ``backend`` is "reference" or
    "faster_coco_eval" (same numbers; the latter refuses images at most 2d high, see the module docstring)."""
    if backend not in BOUNDARY_BACKENDS:
        raise unknown_choice("boundary AP backend", backend, BOUNDARY_BACKENDS)
    if not dilation_ratio > 0:
        raise ConfigError(f"dilation_ratio must be > 0 (Cheng et al. use 0.02), got {dilation_ratio}")
    gt_dataset = _ground_truth(gt)
    dt_dataset = _detection_dataset(gt_dataset, detections, "segm")
    if backend == "reference":
        with contextlib.redirect_stdout(io.StringIO()):
            evaluator = _BoundaryCOCOeval(_pycoco(gt_dataset), _pycoco(dt_dataset), dilation_ratio)
            return _run(evaluator, use_cats, max_dets)
    _check_faster_boundary_sizes(gt_dataset, dilation_ratio)
    evaluator = COCOeval_faster(FasterCOCO(gt_dataset), FasterCOCO(dt_dataset), "boundary",
                                print_function=_silent, boundary_dilation_ratio=dilation_ratio)
    return _run(evaluator, use_cats, max_dets)


def _silent(*_args, **_kwargs) -> None:
    """A print function that prints nothing (faster-coco-eval's progress messages)."""


def _run(evaluator, use_cats: bool, max_dets: int = 100) -> dict[str, float]:
    """Evaluate and accumulate; the ``AP_KEYS`` at ``max_dets`` detections per image, as COCOeval's ``summarize``
    computes them (mean precision over IoU thresholds, recall points and categories; NaN where an area range has no
    ground truth). ``summarize`` itself is not used: it reads AP at 100 detections whatever ``params.maxDets``
    says."""
    if max_dets < 100:
        raise ConfigError(f"max_dets must be at least COCO's 100, got {max_dets}")
    evaluator.params.useCats = int(use_cats)
    evaluator.params.maxDets = [1, 10, int(max_dets)]
    evaluator.evaluate()
    evaluator.accumulate()
    return _summary(evaluator)


def _summary(evaluator) -> dict[str, float]:
    p = evaluator.params
    precision = np.asarray(evaluator.eval["precision"])  # (IoU thresholds, recall points, categories, areas, maxDets)
    areas = list(p.areaRngLbl)

    def ap(area: str = "all", iou: float | None = None) -> float:
        s = precision[:, :, :, areas.index(area), -1]
        if iou is not None:
            s = s[np.isclose(p.iouThrs, iou)]
        s = s[s > -1]
        return float(np.mean(s)) if s.size else float("nan")

    values = (ap(), ap(iou=0.5), ap(iou=0.75), ap("small"), ap("medium"), ap("large"))
    return dict(zip(AP_KEYS, values))


def _pycoco(dataset: dict) -> COCO:
    """A pycocotools COCO index over ``dataset`` (call with stdout redirected: createIndex prints)."""
    coco = COCO()
    coco.dataset = dataset
    coco.createIndex()
    return coco


def _ground_truth(gt: dict) -> dict:
    """``gt`` checked, with each annotation copied (COCOeval writes into them), numbered 1..N (COCOeval records a
    match by the ground truth's id and reads id 0 as "unmatched"; Cityscapes' converter numbers from 0), and
    ``iscrowd`` (default 0), ``area`` and ``bbox`` (from the mask) filled in where missing."""
    check_coco(gt, source="the ground truth")
    sizes = image_sizes(gt)
    annotations = []
    for number, ann in enumerate(gt["annotations"], start=1):
        ann = {"iscrowd": 0, **ann, "id": number}
        if "area" not in ann or "bbox" not in ann:
            rle = ann_to_rle(ann, *sizes[ann["image_id"]])
            ann.setdefault("area", float(mask_utils.area(rle)))
            ann.setdefault("bbox", mask_utils.toBbox(rle).tolist())
        annotations.append(ann)
    return {"images": gt["images"], "categories": gt["categories"], "annotations": annotations}


def _detection_dataset(gt_dataset: dict, detections: list[dict], iou_type: str) -> dict:
    """The detections as a COCO result dataset: ids 1..N in list order, ``iscrowd`` 0, the segmentation as a
    JSON-style RLE and ``area`` from the mask ("segm"; a box is ignored, as detectron2 does, so that the area ranges
    use mask areas), or the box with its area w * h ("bbox"; from the segmentation if no box is given)."""
    sizes = image_sizes(gt_dataset)
    categories = {c["id"] for c in gt_dataset["categories"]}
    annotations = []
    for index, det in enumerate(detections):
        where = f"detection {index}"
        missing = [k for k in ("image_id", "category_id", "score") if k not in det]
        if missing:
            raise DataFormatError(f"{where} has no {', '.join(missing)}; a detection needs image_id, category_id, "
                                  "score and a segmentation or bbox")
        if det["image_id"] not in sizes:
            raise DataFormatError(f"{where} is on image {det['image_id']!r}, which the ground truth does not have")
        if det["category_id"] not in categories:
            raise DataFormatError(f"{where} has category_id {det['category_id']!r}, which the ground truth does not "
                                  f"have (categories {sorted(categories)})")
        if not np.isfinite(det["score"]):
            raise DataFormatError(f"{where} has a non-finite score {det['score']}")
        ann = {"id": index + 1, "image_id": det["image_id"], "category_id": det["category_id"],
               "score": float(det["score"]), "iscrowd": 0}
        if iou_type == "segm" or "bbox" not in det:
            rle = _detection_rle(det, sizes[det["image_id"]], where)
        if iou_type == "segm":
            ann.update(segmentation=rle_json(rle), area=float(mask_utils.area(rle)))
        else:
            box = [float(v) for v in (det["bbox"] if "bbox" in det else mask_utils.toBbox(rle))]
            ann.update(bbox=box, area=box[2] * box[3])
        annotations.append(ann)
    return {"images": gt_dataset["images"], "categories": gt_dataset["categories"], "annotations": annotations}


def _detection_rle(det: dict, size: tuple[int, int], where: str) -> dict:
    """The detection's segmentation as one compressed RLE of its image's size."""
    seg = det.get("segmentation")
    if isinstance(seg, dict):
        if list(seg.get("size", [])) != list(size) or "counts" not in seg:
            raise DataFormatError(f"{where}: an RLE segmentation needs counts and size {list(size)} (its image's), "
                                  f"got size {seg.get('size')}")
    elif not (isinstance(seg, list) and seg and all(isinstance(p, list) and len(p) >= 6 for p in seg)):
        raise DataFormatError(f"{where}: needs a segmentation (an RLE dict or a list of flat polygons with >= 3 "
                              "vertices each), or for box AP a bbox")
    return ann_to_rle({"segmentation": seg}, *size)


# ------------------------------------------------------------------------------------------------ Boundary IoU
def band_width(h: int, w: int, dilation_ratio: float = 0.02) -> int:
    """d = max(1, round(dilation_ratio * image diagonal)) pixels: the width of the boundary bands (Cheng et al.)."""
    return max(1, int(round(dilation_ratio * np.sqrt(h * h + w * w))))


def mask_to_boundary(mask: np.ndarray, dilation_ratio: float = 0.02) -> np.ndarray:
    """The inner boundary band of a binary mask (H, W): the mask minus its erosion by a 3x3 square applied
    d = max(1, round(dilation_ratio * sqrt(H² + W²))) times, the image border counting as background (the mask is
    zero-padded by 1 px first). Returns a uint8 (H, W) 0/1 array; every mask pixel within Chebyshev distance d of
    the background (or the border) is in the band."""
    mask = (np.asarray(mask) != 0).astype(np.uint8)
    h, w = mask.shape
    d = band_width(h, w, dilation_ratio)
    padded = cv2.copyMakeBorder(mask, 1, 1, 1, 1, cv2.BORDER_CONSTANT, value=0)
    eroded = cv2.erode(padded, np.ones((3, 3), np.uint8), iterations=d)[1:h + 1, 1:w + 1]
    return mask - eroded


def boundary_iou(a: np.ndarray, b: np.ndarray, dilation_ratio: float = 0.02) -> float:
    """Boundary IoU of two binary masks (H, W): |B(a) ∩ B(b)| / |B(a) ∪ B(b)| on their ``mask_to_boundary``
    bands; 1.0 when both masks are empty."""
    a, b = _binary_pair(a, b)
    ba = mask_to_boundary(a, dilation_ratio).astype(bool)
    bb = mask_to_boundary(b, dilation_ratio).astype(bool)
    union = np.count_nonzero(ba | bb)
    return 1.0 if union == 0 else np.count_nonzero(ba & bb) / union


#: boundary bands already computed, by mask content, in two least-recently-used caches: the ground truths' (every
#: evaluation against the same clean annotations reuses them: each tier, seed and operation of an annotation-quality
#: table, every run of a model page) and the detections' (noisy annotations that an operation left unchanged recur
#: across evaluations), so that a flood of detections never evicts the ground truths
BAND_CACHE_SIZES = {"ground_truth": 100_000, "detection": 20_000}
_BANDS = {side: OrderedDict() for side in BAND_CACHE_SIZES}


def boundary_rle(rle: dict, dilation_ratio: float = 0.02, side: str = "ground_truth") -> dict:
    """The RLE of a mask's ``mask_to_boundary`` band, from the mask's RLE (compressed or not); cached by the RLE's
    content, size and ``dilation_ratio`` in the ``side`` cache ("ground_truth" or "detection", ``BAND_CACHE_SIZES``
    bands each)."""
    cache = _BANDS[side]
    counts = rle["counts"]
    key = (counts if isinstance(counts, (bytes, str)) else tuple(counts), tuple(rle["size"]), float(dilation_ratio))
    band = cache.get(key)
    if band is None:
        if not isinstance(counts, (bytes, str)):
            rle = mask_utils.frPyObjects(rle, *rle["size"])
        # decode gives a Fortran-ordered (H, W) mask whose transpose is C-ordered; the band commutes with
        # transposition, so working on the transpose spares two copies
        band_t = mask_to_boundary(mask_utils.decode(rle).T, dilation_ratio)
        band = cache[key] = mask_utils.encode(band_t.T)
        if len(cache) > BAND_CACHE_SIZES[side]:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return band


class _BoundaryCOCOeval(COCOeval):
    """pycocotools' segm COCOeval with IoU := min(mask IoU, boundary IoU) for non-crowd ground truths."""

    def __init__(self, coco_gt: COCO, coco_dt: COCO, dilation_ratio: float):
        super().__init__(coco_gt, coco_dt, iouType="segm")
        self.dilation_ratio = dilation_ratio

    def computeIoU(self, imgId, catId):  # noqa: N802, N803 (pycocotools' names)
        p = self.params
        cat_ids = [catId] if p.useCats else p.catIds
        gt = [g for c in cat_ids for g in self._gts[imgId, c]]
        dt = [d for c in cat_ids for d in self._dts[imgId, c]]
        if not gt or not dt:
            return []
        dt = [dt[i] for i in np.argsort([-d["score"] for d in dt], kind="mergesort")][:p.maxDets[-1]]
        crowd = [int(g["iscrowd"]) for g in gt]
        ious = np.asarray(mask_utils.iou([d["segmentation"] for d in dt], [g["segmentation"] for g in gt], crowd))
        regular = np.flatnonzero(np.asarray(crowd) == 0)
        if regular.size:
            bious = mask_utils.iou([boundary_rle(d["segmentation"], self.dilation_ratio, "detection") for d in dt],
                                   [boundary_rle(gt[j]["segmentation"], self.dilation_ratio) for j in regular],
                                   [0] * regular.size)
            ious[:, regular] = np.minimum(ious[:, regular], bious)
        return ious


def _check_faster_boundary_sizes(gt_dataset: dict, dilation_ratio: float) -> None:
    """Refuse images whose height is at most 2d: faster-coco-eval's C++ boundary band is wrong there."""
    for image_id, (h, w) in image_sizes(gt_dataset).items():
        d = band_width(h, w, dilation_ratio)
        if h <= 2 * d:
            raise ConfigError(f"image {image_id} ({h}x{w}) is at most 2 * {d} px high; faster-coco-eval's boundary "
                              "band is wrong for such images, use boundary_ap(..., backend='reference')")


# ------------------------------------------------------------------------------------------------ annotation quality
def annotation_quality(clean: dict, noisy: dict, *, dilation_ratio: float = 0.02,
                       metrics=("mask", "boundary")) -> dict[str, float]:
    """How well ``noisy`` annotations match ``clean`` ones (the paper's Fig. 11): every non-crowd noisy annotation
    becomes a detection with score 1.0 scored against ``clean``; COCOeval's stable sorts rank these ties by image
    (ascending id) and, within an image, in list order. A deleted instance is a miss; a class-flipped one a false
    positive in its new class plus a miss in its old one. Crowd annotations of ``noisy`` are not scored (they are
    ignore regions of ``clean``). Every noisy annotation of an image counts (COCO's limit of 100 detections per
    image is raised to the most annotations an image has: LVIS images hold more).

    ``metrics`` is any of "mask" (``coco_ap`` segm), "boundary" (``boundary_ap``) and "box" (``coco_ap`` bbox, with
    the noisy annotations' own ``bbox``, stale or not); the result has ``{prefix}{key}`` for each, e.g.
    ``mask_AP``, ``boundary_AP75``, ``box_AP_S``. The two datasets must have the same images (ids and sizes) and
    category ids, else ConfigError."""
    unknown = [m for m in metrics if m not in QUALITY_METRICS]
    if unknown:
        raise unknown_choice("annotation-quality metric", unknown[0], QUALITY_METRICS)
    check_coco(clean, source="the clean annotations")
    check_coco(noisy, source="the noisy annotations")
    _check_same_frame(clean, noisy)
    detections = [{**{k: ann[k] for k in ("image_id", "category_id", "segmentation", "bbox") if k in ann},
                   "score": 1.0}
                  for ann in noisy["annotations"] if not ann.get("iscrowd", 0)]
    per_image = Counter(a["image_id"] for dataset in (clean, noisy) for a in dataset["annotations"])
    most = max(100, *per_image.values()) if per_image else 100
    compute = {"mask": lambda: coco_ap(clean, detections, "segm", max_dets=most),
               "boundary": lambda: boundary_ap(clean, detections, dilation_ratio, max_dets=most),
               "box": lambda: coco_ap(clean, detections, "bbox", max_dets=most)}
    return {f"{QUALITY_METRICS[m]}{key}": value for m in metrics for key, value in compute[m]().items()}


def _check_same_frame(clean: dict, noisy: dict) -> None:
    """ConfigError naming the first difference in image ids, image sizes or category ids."""
    clean_sizes, noisy_sizes = image_sizes(clean), image_sizes(noisy)
    for kind, a, b in (("images", set(clean_sizes), set(noisy_sizes)),
                       ("categories", {c["id"] for c in clean["categories"]}, {c["id"] for c in noisy["categories"]})):
        if a != b:
            raise ConfigError(f"the clean and noisy annotations must share {kind}: ids only in clean "
                              f"{sorted(a - b)[:10]}, only in noisy {sorted(b - a)[:10]}")
    for image_id, size in clean_sizes.items():
        if noisy_sizes[image_id] != size:
            raise ConfigError(f"image {image_id} is {size[0]}x{size[1]} (h x w) in clean but "
                              f"{noisy_sizes[image_id][0]}x{noisy_sizes[image_id][1]} in noisy")


# ------------------------------------------------------------------------------------------------ pixel metrics
def _binary_pair(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two masks as uint8 0/1 arrays of one 2-D shape (nonzero = foreground)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.ndim != 2:
        raise DataFormatError(f"expected two binary masks (H, W) of the same shape, got {a.shape} and {b.shape}")
    return (a != 0).astype(np.uint8), (b != 0).astype(np.uint8)


def dice(a: np.ndarray, b: np.ndarray) -> float:
    """Dice coefficient 2|a ∩ b| / (|a| + |b|) of two binary masks (H, W), in [0, 1]; 1.0 when both are empty."""
    a, b = _binary_pair(a, b)
    total = int(a.sum()) + int(b.sum())
    return 1.0 if total == 0 else 2 * np.count_nonzero(a & b) / total


def iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union |a ∩ b| / |a ∪ b| of two binary masks (H, W), in [0, 1]; 1.0 when both are empty."""
    a, b = _binary_pair(a, b)
    union = np.count_nonzero(a | b)
    return 1.0 if union == 0 else np.count_nonzero(a & b) / union


def _spacing(spacing) -> np.ndarray:
    """(row, column) pixel size from a scalar or a pair."""
    s = np.asarray(spacing, dtype=np.float64).reshape(-1)
    if s.size not in (1, 2) or not np.all(s > 0):
        raise ConfigError(f"spacing must be positive (a scalar or (row, column) sizes), got {spacing}")
    return np.broadcast_to(s, (2,))


def _boundary_points(mask: np.ndarray) -> np.ndarray:
    """(N, 2) (row, column) indices of the mask pixels with a 4-neighbour outside the mask or the image."""
    padded = cv2.copyMakeBorder(mask, 1, 1, 1, 1, cv2.BORDER_CONSTANT, value=0)
    eroded = cv2.erode(padded, cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3)))[1:-1, 1:-1]
    return np.argwhere(mask > eroded)


def hausdorff(a: np.ndarray, b: np.ndarray, spacing=1.0) -> float:
    """Symmetric Hausdorff distance between the boundaries of two binary masks (H, W): the largest distance from a
    boundary pixel of one mask to the nearest boundary pixel of the other, in the units of ``spacing`` (a scalar or
    the (row, column) pixel size, e.g. mm). A boundary pixel is a mask pixel with a 4-neighbour outside the mask or
    the image; distances are between pixel centres. 0.0 when both masks are empty, inf when exactly one is."""
    a, b = _binary_pair(a, b)
    s = _spacing(spacing)
    pa, pb = _boundary_points(a) * s, _boundary_points(b) * s
    if len(pa) == 0 or len(pb) == 0:
        return 0.0 if len(pa) == len(pb) else float("inf")
    return float(max(directed_hausdorff(pa, pb)[0], directed_hausdorff(pb, pa)[0]))


def long_axis_length(mask: np.ndarray, spacing=1.0) -> float:
    """The mask's maximum Feret diameter in the units of ``spacing``: the largest distance between two points of
    the union of its pixels as squares (pixel corners, so one pixel has length sqrt(2) px). 0.0 for an empty mask."""
    mask = np.asarray(mask) != 0
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return 0.0
    left = mask[rows].argmax(axis=1)
    right = mask.shape[1] - mask[rows, ::-1].argmax(axis=1)  # one past the last pixel: its right edge
    corners = np.concatenate([np.stack([r, c], axis=1) for r in (rows, rows + 1) for c in (left, right)])
    hull = cv2.convexHull((corners * _spacing(spacing)).astype(np.float32)).reshape(-1, 2).astype(np.float64)
    return float(pdist(hull).max())


def area_length_volume(mask: np.ndarray, spacing=1.0) -> float:
    """Left-ventricle volume from one apical view by the single-plane area-length method, V = 8 A² / (3 π L), with
    A the mask area and L its long axis (``long_axis_length``, the maximum Feret diameter), in the cube of the
    units of ``spacing`` (mm -> mm³; divide by 1000 for mL). Exact for an ellipse of semi-axes a >= b, which gives
    the prolate spheroid volume 4/3 π a b²."""
    s = _spacing(spacing)
    area = np.count_nonzero(mask) * s[0] * s[1]
    if area == 0:
        raise DataFormatError("area_length_volume needs a non-empty mask")
    return float(8 * area ** 2 / (3 * np.pi * long_axis_length(mask, spacing)))


def ejection_fraction(edv, esv):
    """Ejection fraction in percent, (EDV - ESV) / EDV * 100, from the end-diastolic and end-systolic volumes (any
    one unit; scalars or arrays)."""
    edv, esv = np.asarray(edv, dtype=np.float64), np.asarray(esv, dtype=np.float64)
    if not np.all(edv > 0):
        raise DataFormatError(f"the end-diastolic volume must be positive, got {edv}")
    ef = (edv - esv) / edv * 100
    return float(ef) if ef.ndim == 0 else ef


__all__ = ["AP_KEYS", "IOU_TYPES", "BOUNDARY_BACKENDS", "QUALITY_METRICS", "coco_ap", "boundary_ap",
           "mask_to_boundary", "boundary_rle", "BAND_CACHE_SIZES", "boundary_iou", "annotation_quality", "dice", "iou",
           "hausdorff", "long_axis_length", "area_length_volume", "ejection_fraction"]
