"""LVIS v1's federated evaluation (Table 12, LVIS-N): mask, box and Boundary AP as the official LVIS API scores them.

LVIS is not exhaustively annotated, so its evaluation (Gupta et al. 2019, the ``lvis`` package's ``LVISEval``) is
COCO's AP with three changes, made here on pycocotools' COCOeval:

* **federated detections**: a detection of a category that its image neither holds (no ground truth of it) nor
  lists in ``neg_category_ids`` (verified absent) is dropped: nobody checked whether that object is there;
* **not exhaustive**: a detection of a category in its image's ``not_exhaustive_category_ids`` that matches no ground
  truth is ignored, not a false positive;
* **300 detections per image** over all categories (the highest scores), not 100 per image and category.

AP is then COCO's (101 recall points, IoU 0.50:0.95, areas small / medium / large, the mean over the categories
with ground truth), with ``AP_r`` / ``AP_c`` / ``AP_f`` the means over the rare, common and frequent categories
(``categories[i]["frequency"]``). The tests check every number against the official API (``lvis`` 0.5.3). Boundary
AP takes the same rules with ``metrics.boundary_ap``'s IoU (min of mask and boundary IoU), as the Boundary IoU API
does for LVIS.

    lvis_ap(gt, detections)                   # mask AP: {"AP", "AP50", "AP75", "AP_S", "AP_M", "AP_L", "AP_r", ...}
    lvis_ap(gt, detections, "bbox")           # box AP
    lvis_ap(gt, detections, boundary=True)    # Boundary AP

``gt`` is an LVIS v1 dict (``formats.load_split(root, "lvis_v1", split)``): images with ``neg_category_ids`` and
``not_exhaustive_category_ids``, categories with ``frequency``; detections as ``metrics.coco_ap`` takes them.
"""
from __future__ import annotations

import contextlib
import io

import numpy as np
from pycocotools.cocoeval import COCOeval

from benchmark_n.metrics import (AP_KEYS, IOU_TYPES, _BoundaryCOCOeval, _detection_dataset, _ground_truth, _pycoco,
                                 _summary)
from shared.errors import ConfigError, DataFormatError, unknown_choice

LVIS_MAX_DETS = 300
FREQUENCIES = ("r", "c", "f")  # rare (1-10 training images), common (11-100), frequent (> 100)
LVIS_KEYS = (*AP_KEYS, "AP_r", "AP_c", "AP_f")


def check_lvis(gt: dict) -> None:
    """DataFormatError naming the first image or category without the fields federated evaluation reads."""
    for image in gt["images"]:
        missing = [k for k in ("neg_category_ids", "not_exhaustive_category_ids") if k not in image]
        if missing:
            raise DataFormatError(f"image {image.get('id')!r} has no {', '.join(missing)}: LVIS's federated evaluation "
                                  "needs them (an LVIS v1 annotation file has them; for COCO-style data use coco_ap)")
    for category in gt["categories"]:
        if category.get("frequency") not in FREQUENCIES:
            raise DataFormatError(f"category {category.get('id')!r} has frequency {category.get('frequency')!r}; LVIS "
                                  f"categories are 'r', 'c' or 'f'")


def federated_detections(gt: dict, detections: list[dict], max_dets: int = LVIS_MAX_DETS) -> list[dict]:
    """The detections LVIS scores: per image, the ``max_dets`` highest scores (ties: list order), then only those of
    a category the image holds or lists in ``neg_category_ids``."""
    present = {}
    for ann in gt["annotations"]:
        present.setdefault(ann["image_id"], set()).add(ann["category_id"])
    verified = {im["id"]: present.get(im["id"], set()) | set(im["neg_category_ids"]) for im in gt["images"]}
    per_image = {}
    for k, det in enumerate(detections):
        missing = [key for key in ("image_id", "category_id", "score") if key not in det]
        if missing:
            raise DataFormatError(f"detection {k} has no {', '.join(missing)}; a detection needs image_id, "
                                  "category_id and score")
        per_image.setdefault(det["image_id"], []).append(det)
    kept = []
    for dets in per_image.values():
        ranked = sorted(dets, key=lambda d: -d["score"])[:max_dets]  # sorted is stable: ties keep list order
        kept += [d for d in ranked if d["category_id"] in verified.get(d["image_id"], ())]
    return kept


class _Federated:
    """COCOeval's per-image evaluation with LVIS's rule for categories not exhaustively annotated in an image."""

    def evaluateImg(self, imgId, catId, aRng, maxDet):  # noqa: N802, N803 (pycocotools' names)
        result = super().evaluateImg(imgId, catId, aRng, maxDet)
        if result is not None and catId in self.not_exhaustive.get(imgId, ()):
            result["dtIgnore"] = np.logical_or(result["dtIgnore"], result["dtMatches"] == 0)
        return result


class _FederatedCOCOeval(_Federated, COCOeval):
    pass


class _FederatedBoundaryCOCOeval(_Federated, _BoundaryCOCOeval):
    pass


def lvis_ap(gt: dict, detections: list[dict], iou_type: str = "segm", *, boundary: bool = False,
            dilation_ratio: float = 0.02, max_dets: int = LVIS_MAX_DETS) -> dict[str, float]:
    """LVIS's federated AP of ``detections`` against ``gt`` (module docstring), ``{key: fraction}`` over
    ``LVIS_KEYS`` (NaN where no category of a group or no instance of an area range has ground truth).
    ``iou_type`` "segm" (mask IoU) or "bbox"; ``boundary``: Boundary AP (segm, IoU := min(mask IoU, boundary IoU) with
    bands of ``dilation_ratio``). No detections gives AP 0."""
    if iou_type not in IOU_TYPES:
        raise unknown_choice("iou_type", iou_type, IOU_TYPES)
    if boundary and iou_type != "segm":
        raise ConfigError("Boundary AP compares masks: use iou_type 'segm' with boundary=True")
    if not max_dets >= 1:
        raise ConfigError(f"max_dets must be at least 1 (LVIS uses {LVIS_MAX_DETS}), got {max_dets}")
    gt_dataset = _ground_truth(gt)
    check_lvis(gt)
    dt_dataset = _detection_dataset(gt_dataset, detections, "segm" if boundary else iou_type)  # checked first
    dt_dataset["annotations"] = federated_detections(gt_dataset, dt_dataset["annotations"], max_dets)
    with contextlib.redirect_stdout(io.StringIO()):
        if boundary:
            evaluator = _FederatedBoundaryCOCOeval(_pycoco(gt_dataset), _pycoco(dt_dataset), dilation_ratio)
        else:
            evaluator = _FederatedCOCOeval(_pycoco(gt_dataset), _pycoco(dt_dataset), iou_type)
        evaluator.not_exhaustive = {im["id"]: set(im["not_exhaustive_category_ids"]) for im in gt["images"]}
        evaluator.params.maxDets = [1, 10, max(int(max_dets), 100)]  # per image and category; LVIS's cap came first
        evaluator.evaluate()
        evaluator.accumulate()
    scores = _summary(evaluator)
    frequency = {c["id"]: c["frequency"] for c in gt["categories"]}
    precision = np.asarray(evaluator.eval["precision"])[:, :, :, 0, -1]  # (IoU, recall, category) at area "all"
    for group in FREQUENCIES:
        columns = [k for k, c in enumerate(evaluator.params.catIds) if frequency[c] == group]
        values = precision[:, :, columns]
        values = values[values > -1]
        scores[f"AP_{group}"] = float(np.mean(values)) if values.size else float("nan")
    return scores


__all__ = ["LVIS_MAX_DETS", "FREQUENCIES", "LVIS_KEYS", "check_lvis", "federated_detections", "lvis_ap"]
