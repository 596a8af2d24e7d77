"""benchmark_n.metrics: COCO AP, Boundary AP (two backends), annotation quality and the CAMUS pixel metrics."""
import contextlib
import copy
import io
import math
import time

import cv2
import numpy as np
import pytest
from faster_coco_eval.core.mask import rleToBoundary
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from benchmark_n.coco import annotation_from_mask, mask_to_rle
from benchmark_n import metrics
from benchmark_n.metrics import (AP_KEYS, annotation_quality, area_length_volume, boundary_ap, boundary_iou, boundary_rle,
                                 coco_ap, dice, ejection_fraction, hausdorff, iou, long_axis_length, mask_to_boundary)
from shared.errors import ConfigError, DataFormatError

H, W = 480, 640  # boundary band d = round(0.02 * 800) = 16 px


# ------------------------------------------------------------------------------------------------ helpers
def rect(y, x, h, w, shape=(H, W)):
    mask = np.zeros(shape, np.uint8)
    mask[y:y + h, x:x + w] = 1
    return mask


def ellipse(cy, cx, ay, ax, angle=0.0, shape=(H, W)):
    mask = np.zeros(shape, np.uint8)
    cv2.ellipse(mask, (int(cx), int(cy)), (int(ax), int(ay)), angle, 0, 360, 1, -1)
    return mask


def dataset(instances, shape=(H, W), n_categories=2):
    """COCO dict from (image_id, category_id, mask[, iscrowd]) tuples; RLE segmentations, area and bbox filled."""
    images = sorted({inst[0] for inst in instances})
    anns = []
    for i, (image_id, category_id, mask, *crowd) in enumerate(instances):
        rle = mask_utils.encode(np.asfortranarray(mask))
        anns.append({"id": i + 1, "image_id": image_id, "category_id": category_id, "segmentation": mask_to_rle(mask),
                     "area": float(mask_utils.area(rle)), "bbox": mask_utils.toBbox(rle).tolist(),
                     "iscrowd": crowd[0] if crowd else 0})
    return {"images": [{"id": i, "height": shape[0], "width": shape[1]} for i in images],
            "categories": [{"id": c, "name": f"c{c}"} for c in range(1, n_categories + 1)], "annotations": anns}


def detections(instances, scores=None):
    scores = [1.0] * len(instances) if scores is None else scores
    return [{"image_id": im, "category_id": cat, "score": float(s), "segmentation": mask_to_rle(m)}
            for (im, cat, m, *_), s in zip(instances, scores)]


def grid_objects(rng, n_images, shape=(H, W), per_image=4, n_categories=2):
    """Non-overlapping random ellipses and rectangles, one per cell of a 2x2 grid."""
    out = []
    for image_id in range(1, n_images + 1):
        for k in range(per_image):
            cy, cx = (k // 2 + 0.5) * shape[0] / 2, (k % 2 + 0.5) * shape[1] / 2
            ay, ax = rng.uniform(0.15, 0.4) * shape[0] / 2, rng.uniform(0.15, 0.4) * shape[1] / 2
            mask = (ellipse(cy, cx, ay, ax, rng.uniform(0, 180), shape) if rng.random() < 0.7
                    else rect(int(cy - ay), int(cx - ax), int(2 * ay), int(2 * ax), shape))
            out.append((image_id, int(rng.integers(1, n_categories + 1)), mask))
    return out


def perturb(mask, rng):
    """One random spatial corruption: dilation, erosion or a shift of a few pixels."""
    k = int(rng.integers(2, 8))
    op = rng.integers(3)
    if op == 0:
        return cv2.dilate(mask, np.ones((k, k), np.uint8))
    if op == 1:
        return cv2.erode(mask, np.ones((k, k), np.uint8))
    return np.roll(mask, (int(rng.integers(-k, k + 1)), int(rng.integers(-k, k + 1))), axis=(0, 1))


def same(a: dict, b: dict, tol=1e-6):
    return a.keys() == b.keys() and all((math.isnan(a[k]) and math.isnan(b[k])) or abs(a[k] - b[k]) <= tol for k in a)


# ------------------------------------------------------------------------------------------------ COCO AP
def test_identical_annotations_score_one_on_every_metric():
    clean = dataset(grid_objects(np.random.default_rng(0), 3))
    quality = annotation_quality(clean, clean, metrics=("mask", "boundary", "box"))
    for prefix in ("mask_", "boundary_", "box_"):
        assert quality[f"{prefix}AP"] == pytest.approx(1.0) and quality[f"{prefix}AP50"] == pytest.approx(1.0)
    fast = boundary_ap(clean, detections([(a["image_id"], a["category_id"], mask_utils.decode(
        {**a["segmentation"], "counts": a["segmentation"]["counts"].encode()})) for a in clean["annotations"]]),
        backend="faster_coco_eval")
    assert fast["AP"] == pytest.approx(1.0)


def test_coco_ap_equals_pycocotools_called_directly():
    rng = np.random.default_rng(1)
    objects = grid_objects(rng, 4, n_categories=3)
    gt = dataset(objects, n_categories=3)
    preds = [(im, cat if rng.random() < 0.8 else int(rng.integers(1, 4)), perturb(m, rng)) for im, cat, m in objects]
    preds += [(int(rng.integers(1, 5)), int(rng.integers(1, 4)), ellipse(240, 320, 60, 90)) for _ in range(3)]
    dets = detections(preds, rng.random(len(preds)))
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = copy.deepcopy(gt)
        coco_gt.createIndex()
        evaluator = COCOeval(coco_gt, coco_gt.loadRes(copy.deepcopy(dets)), "segm")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    expected = dict(zip(AP_KEYS, evaluator.stats[:6]))
    ours = coco_ap(gt, dets)
    assert 0.1 < ours["AP"] < 0.9  # a non-trivial case
    assert same(ours, {k: (math.nan if v == -1 else v) for k, v in expected.items()}, tol=1e-12)


def test_dropping_half_the_instances_gives_51_of_101_recall_points():
    objects = [(image_id, 1, m) for image_id, _, m in grid_objects(np.random.default_rng(2), 3, per_image=4)][:10]
    gt = dataset(objects, n_categories=1)
    dets = detections(objects[:5])
    # recall reaches 5/10 at precision 1: recall points 0.00..0.50 (51 of 101) score 1, the rest 0
    assert coco_ap(gt, dets)["AP"] == pytest.approx(51 / 101, abs=1e-12)
    assert boundary_ap(gt, dets)["AP"] == pytest.approx(51 / 101, abs=1e-12)


def test_class_flip_costs_a_miss_and_a_false_positive_and_class_agnostic_eval_recovers():
    objects = [(1, 1, rect(20, 20, 100, 100)), (1, 1, rect(20, 300, 100, 100)),
               (1, 2, rect(200, 20, 100, 100)), (1, 2, rect(200, 300, 100, 100))]
    gt = dataset(objects)
    flipped = (1, 2, objects[1][2])
    # category 1: recall 1/2 -> 51/101; category 2: the false positive ranked after both true positives -> 1
    last = detections([objects[0], objects[2], objects[3], flipped])
    assert coco_ap(gt, last)["AP"] == pytest.approx((51 / 101 + 1) / 2, abs=1e-12)
    # ranked first (equal scores on one image keep list order): precision 1/2 at recall 1/2, 2/3 at recall 1
    first = detections([flipped, objects[0], objects[2], objects[3]])
    assert coco_ap(gt, first)["AP"] == pytest.approx((51 / 101 + 2 / 3) / 2, abs=1e-12)
    for dets in (last, first):
        assert coco_ap(gt, dets, use_cats=False)["AP"] == pytest.approx(1.0)
        assert coco_ap(gt, dets, "bbox", use_cats=False)["AP"] == pytest.approx(1.0)
        assert boundary_ap(gt, dets, use_cats=False)["AP"] == pytest.approx(1.0)


def test_box_ap_uses_the_detection_box_when_given():
    objects = [(1, 1, rect(20, 20, 100, 100))]
    gt = dataset(objects)
    dets = detections(objects)
    assert coco_ap(gt, dets, "bbox")["AP"] == pytest.approx(1.0)  # box from the segmentation
    dets[0]["bbox"] = [60.0, 60.0, 100.0, 100.0]  # a stale box: IoU 60² / (2 * 100² - 60²) = 0.22
    assert coco_ap(gt, dets, "bbox")["AP"] == 0.0
    assert coco_ap(gt, dets, "segm")["AP"] == pytest.approx(1.0)


def test_polygon_and_rle_detections_score_the_same():
    objects = grid_objects(np.random.default_rng(3), 2)
    gt = dataset(objects)
    rng = np.random.default_rng(4)
    noisy = [(im, cat, perturb(m, rng)) for im, cat, m in objects]
    as_rle = detections(noisy)
    as_polygons = [{**d, "segmentation": annotation_from_mask(m, 1, im, cat)["segmentation"]}
                   for d, (im, cat, m) in zip(as_rle, noisy)]
    # polygons are re-rasterised by pycocotools, so compare against the RLE of that rasterisation
    rasterised = [{**d, "segmentation": mask_to_rle(mask_utils.decode(mask_utils.merge(
        mask_utils.frPyObjects(d["segmentation"], H, W))))} for d in as_polygons]
    assert same(coco_ap(gt, as_polygons), coco_ap(gt, rasterised), tol=1e-12)
    assert same(boundary_ap(gt, as_polygons), boundary_ap(gt, rasterised), tol=1e-12)
    assert coco_ap(gt, as_polygons)["AP"] == pytest.approx(coco_ap(gt, as_rle)["AP"], abs=0.1)


def test_bad_inputs():
    objects = [(1, 1, rect(20, 20, 100, 100)), (1, 2, rect(200, 20, 30, 30))]
    gt = dataset(objects)
    before = copy.deepcopy(gt)
    empty = coco_ap(gt, [])
    assert empty["AP"] == 0.0 and empty["AP_S"] == 0.0 and math.isnan(empty["AP_M"])  # no medium GT: NaN
    assert boundary_ap(gt, [])["AP"] == 0.0 and boundary_ap(gt, [], backend="faster_coco_eval")["AP"] == 0.0
    with pytest.raises(DataFormatError, match="category_id 7"):
        coco_ap(gt, [{**detections(objects)[0], "category_id": 7}])
    with pytest.raises(DataFormatError, match="image 9"):
        boundary_ap(gt, [{**detections(objects)[0], "image_id": 9}])
    with pytest.raises(DataFormatError, match="score"):
        coco_ap(gt, [{k: v for k, v in detections(objects)[0].items() if k != "score"}])
    with pytest.raises(DataFormatError, match="size"):
        coco_ap(gt, [{**detections(objects)[0], "segmentation": mask_to_rle(np.ones((10, 10), np.uint8))}])
    with pytest.raises(ConfigError, match="iou_type"):
        coco_ap(gt, [], "keypoints")
    with pytest.raises(ConfigError, match="backend"):
        boundary_ap(gt, [], backend="cuda")
    for backend in ("faster_coco_eval", "reference"):
        boundary_ap(gt, detections(objects), backend=backend)
    coco_ap(gt, detections(objects), "bbox")
    assert gt == before  # the ground truth is never mutated


def test_annotation_quality_requires_the_same_images_and_categories():
    clean = dataset([(1, 1, rect(20, 20, 100, 100)), (2, 2, rect(20, 20, 50, 50))])
    other_image = copy.deepcopy(clean)
    other_image["images"][1]["id"] = 3
    other_image["annotations"][1]["image_id"] = 3
    with pytest.raises(ConfigError, match=r"images: ids only in clean \[2\], only in noisy \[3\]"):
        annotation_quality(clean, other_image)
    other_size = copy.deepcopy(clean)
    other_size["images"][0]["height"] = 400
    other_size["annotations"] = other_size["annotations"][1:]
    with pytest.raises(ConfigError, match="image 1 is 480x640"):
        annotation_quality(clean, other_size)
    fewer_categories = copy.deepcopy(clean)
    fewer_categories["categories"].append({"id": 5, "name": "new"})
    with pytest.raises(ConfigError, match="categories"):
        annotation_quality(clean, fewer_categories)
    with pytest.raises(ConfigError, match="metric"):
        annotation_quality(clean, clean, metrics=("mask", "dice"))


def test_annotation_quality_counts_deletions_and_ignores_noisy_crowds():
    objects = [(1, 1, rect(20, 20, 100, 100)), (1, 1, rect(20, 300, 100, 100))]
    clean = dataset(objects, n_categories=1)
    noisy = dataset([objects[0], (1, 1, rect(300, 300, 100, 100), 1)], n_categories=1)  # one deleted, one crowd
    quality = annotation_quality(clean, noisy)
    assert quality["mask_AP"] == pytest.approx(51 / 101) and quality["boundary_AP"] == pytest.approx(51 / 101)


def test_ground_truth_id_0_is_matched_like_any_other():
    """COCOeval records a match by the ground truth's id and reads 0 as "unmatched"; Cityscapes' converter numbers
    annotations from 0."""
    clean = dataset([(1, 1, rect(20, 20, 100, 100)), (1, 2, rect(20, 300, 100, 100))])
    for ann in clean["annotations"]:
        ann["id"] -= 1
    quality = annotation_quality(clean, clean)
    assert quality["mask_AP"] == pytest.approx(1.0) and quality["boundary_AP"] == pytest.approx(1.0)
    assert [a["id"] for a in clean["annotations"]] == [0, 1]  # the caller's dict is not renumbered


def test_every_instance_of_a_crowded_image_counts():
    """COCO keeps 100 detections per image; annotation quality raises it to the most an image holds (LVIS)."""
    objects = [(1, 1, rect(40 * (k // 15) + 5, 40 * (k % 15) + 5, 25, 25)) for k in range(150)]
    clean = dataset(objects, n_categories=1)
    assert coco_ap(clean, detections(objects))["AP"] == pytest.approx(101 * 100 / 150 / 101, abs=0.01)  # COCO's cap
    quality = annotation_quality(clean, clean)
    assert quality["mask_AP"] == pytest.approx(1.0) and quality["boundary_AP"] == pytest.approx(1.0)
    faster = boundary_ap(clean, detections(objects), backend="faster_coco_eval", max_dets=150)
    assert faster["AP"] == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="at least COCO's 100"):
        coco_ap(clean, detections(objects), max_dets=50)


# ------------------------------------------------------------------------------------------------ Boundary IoU / AP
def test_mask_to_boundary_is_the_inner_band_of_width_d():
    d = 16
    for y, x, h, w in [(100, 150, 120, 200), (0, 0, 120, 200), (H - 90, W - 300, 90, 300)]:  # inside / on the border
        band = mask_to_boundary(rect(y, x, h, w))
        assert band.sum() == h * w - (h - 2 * d) * (w - 2 * d)
        assert band[y + d - 1, x + w // 2] == 1 and band[y + d, x + w // 2] == 0  # exactly d rows deep
    assert mask_to_boundary(rect(100, 100, 2 * d, 100)).sum() == 2 * d * 100  # thinner than 2d: all boundary
    assert mask_to_boundary(rect(10, 10, 50, 50, shape=(100, 100)), dilation_ratio=0.001).sum() == 50 * 50 - 48 * 48


def test_boundary_bands_are_cached_by_content_and_equal_the_direct_band(monkeypatch):
    monkeypatch.setattr(metrics, "_BANDS", {side: type(cache)() for side, cache in metrics._BANDS.items()})
    monkeypatch.setattr(metrics, "BAND_CACHE_SIZES", {"ground_truth": 2, "detection": 1})
    masks = [rect(100, 150, 120, 200), rect(10, 10, 50, 60), rect(200, 300, 80, 90)]
    rles = [mask_utils.encode(np.asfortranarray(m)) for m in masks]
    for mask, rle, ratio in zip(masks, rles, (0.02, 0.02, 0.005)):
        assert (mask_utils.decode(boundary_rle(rle, ratio)) == mask_to_boundary(mask, ratio)).all()
    assert len(metrics._BANDS["ground_truth"]) == 2  # the oldest band was dropped
    boundary_rle(rles[0], side="detection")
    boundary_rle(rles[1], side="detection")  # detections churn their own cache, never the ground truths'
    assert len(metrics._BANDS["detection"]) == 1 and len(metrics._BANDS["ground_truth"]) == 2
    again = boundary_rle(dict(rles[2]), 0.005)
    assert again is boundary_rle(rles[2], 0.005)  # a copy of the same RLE is the same key
    assert boundary_rle(rles[2], 0.02) is not again  # another band width is another band
    uncompressed = {"size": [H, W], "counts": _runs(masks[1])}  # a list of run lengths, as crowds have them
    assert (mask_utils.decode(boundary_rle(uncompressed)) == mask_to_boundary(masks[1])).all()


def _runs(mask):
    """Uncompressed COCO RLE counts (column-major run lengths, starting with zeros) of a binary mask."""
    flat = mask.T.ravel()
    edges = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate([[0], edges, [flat.size]])
    counts = np.diff(bounds).tolist()
    return counts if flat[0] == 0 else [0, *counts]


def test_boundary_iou_extremes_and_shift():
    a = rect(100, 100, 200, 200)
    assert boundary_iou(a, a) == 1.0
    assert boundary_iou(a, rect(100, 400, 50, 50)) == 0.0
    assert boundary_iou(np.zeros_like(a), np.zeros_like(a)) == 1.0
    shifted = np.roll(a, 1, axis=1)
    assert boundary_iou(a, shifted) < iou(a, shifted) < 1.0


def test_boundary_ap_takes_the_minimum_with_mask_iou():
    """A hollow detection (the ground truth's own band) has boundary IoU 1 but mask IoU < 1: the minimum is the
    mask IoU, so Boundary AP equals mask AP there."""
    objects = [(1, 1, rect(50, 50, 300, 400))]
    gt = dataset(objects, n_categories=1)
    ring = mask_to_boundary(objects[0][2])
    assert boundary_iou(ring, objects[0][2]) == 1.0 and iou(ring, objects[0][2]) < 0.3
    dets = detections([(1, 1, ring)])
    assert coco_ap(gt, dets)["AP"] == 0.0
    for backend in ("reference", "faster_coco_eval"):
        assert boundary_ap(gt, dets, backend=backend)["AP"] == 0.0


def test_one_pixel_shift_lowers_boundary_ap_more_than_mask_ap():
    objects = grid_objects(np.random.default_rng(5), 3)
    gt = dataset(objects)
    dets = detections([(im, cat, np.roll(m, (1, 1), axis=(0, 1))) for im, cat, m in objects])
    mask_ap, b_ap = coco_ap(gt, dets)["AP"], boundary_ap(gt, dets)["AP"]
    assert b_ap < mask_ap - 0.05 and mask_ap > 0.8


def test_boundary_ap_at_most_mask_ap_under_random_perturbations():
    for seed in range(4):
        rng = np.random.default_rng(10 + seed)
        objects = grid_objects(rng, 3)
        dets = detections([(im, cat, perturb(m, rng)) for im, cat, m in objects], rng.random(len(objects)))
        gt = dataset(objects)
        mask_ap, b_ap = coco_ap(gt, dets), boundary_ap(gt, dets)
        assert all(b_ap[k] <= mask_ap[k] + 1e-12 for k in ("AP", "AP50", "AP75"))
        assert b_ap["AP"] < mask_ap["AP"]


@pytest.mark.parametrize("case", ["identical", "shifted", "eroded", "mixed", "crowd", "agnostic", "polygons"])
def test_boundary_ap_backends_agree(case):
    rng = np.random.default_rng(["identical", "shifted", "eroded", "mixed", "crowd", "agnostic", "polygons"]
                                .index(case))
    objects = grid_objects(rng, 3, n_categories=3)
    gt = dataset(objects, n_categories=3)
    preds, use_cats = objects, True
    if case == "shifted":
        preds = [(im, c, np.roll(m, (2, -3), axis=(0, 1))) for im, c, m in objects]
    elif case == "eroded":
        preds = [(im, c, cv2.erode(m, np.ones((5, 5), np.uint8))) for im, c, m in objects]
    elif case in ("mixed", "agnostic", "polygons"):
        preds = [(im, int(rng.integers(1, 4)), perturb(m, rng)) for im, c, m in objects if rng.random() < 0.85]
        preds += [(int(rng.integers(1, 4)), int(rng.integers(1, 4)), perturb(m, rng)) for _, _, m in objects[:4]]
        use_cats = case != "agnostic"
    elif case == "crowd":  # a crowd region over two images' objects, detections falling inside it
        gt = dataset(objects + [(1, 1, rect(300, 0, 180, 640), 1), (2, 2, rect(0, 0, 480, 200), 1)], n_categories=3)
        preds = [(im, c, perturb(m, rng)) for im, c, m in objects] + [(1, 1, rect(400, 100, 40, 40)),
                                                                       (2, 2, rect(10, 10, 60, 60))]
    dets = detections(preds, rng.random(len(preds)))
    if case == "polygons":
        gt["annotations"] = [{**a, "segmentation": annotation_from_mask(m, 0, 0, 0)["segmentation"]}
                             for a, (_, _, m) in zip(gt["annotations"], objects)]
    fast = boundary_ap(gt, dets, backend="faster_coco_eval", use_cats=use_cats)
    ref = boundary_ap(gt, dets, backend="reference", use_cats=use_cats)
    assert same(fast, ref)
    if case == "identical":
        assert fast["AP"] == pytest.approx(1.0)
    else:
        assert fast["AP"] < 0.999


def test_backends_agree_at_other_dilation_ratios_and_small_images():
    rng = np.random.default_rng(7)
    for shape, ratio in [((120, 160), 0.02), ((120, 160), 0.05), ((64, 300), 0.01), ((480, 640), 0.005)]:
        objects = grid_objects(rng, 2, shape=shape)
        gt = dataset(objects, shape=shape)
        dets = detections([(im, c, perturb(m, rng)) for im, c, m in objects], rng.random(len(objects)))
        assert same(boundary_ap(gt, dets, ratio, "faster_coco_eval"), boundary_ap(gt, dets, ratio, "reference"))


def test_faster_coco_eval_band_is_wrong_only_on_images_at_most_2d_high():
    """The documented deviation: faster-coco-eval's C++ band equals mask_to_boundary except where the image height
    is <= 2d and a mask fills whole columns; boundary_ap refuses such images on that backend, and the reference
    backend handles them."""
    def fce_band(mask, ratio):
        rle = mask_utils.encode(np.asfortranarray(mask))
        return mask_utils.decode(rleToBoundary({"size": rle["size"], "counts": rle["counts"].decode()}, ratio))

    rng = np.random.default_rng(8)
    for h in (40, 50, 51, 60):  # 500 px wide at ratio 0.05: d = 25
        strip = rect(0, 100, h, 200, shape=(h, 500))  # columns filled from the top to the bottom of the image
        assert np.array_equal(fce_band(strip, 0.05), mask_to_boundary(strip, 0.05)) == (h > 50)
        not_touching = rect(1, 100, h - 1, 200, shape=(h, 500))
        noisy = (rng.random((h, 500)) < 0.9).astype(np.uint8)
        for mask in (not_touching, noisy):
            assert np.array_equal(fce_band(mask, 0.05), mask_to_boundary(mask, 0.05))
    for w in (20, 50, 51):  # narrow images are fine
        mask = np.ones((500, w), np.uint8)
        assert np.array_equal(fce_band(mask, 0.05), mask_to_boundary(mask, 0.05))
    wide = dataset([(1, 1, rect(5, 10, 30, 400, shape=(40, 500)))], shape=(40, 500))
    dets = detections([(1, 1, rect(6, 10, 30, 400, shape=(40, 500)))])
    with pytest.raises(ConfigError, match="reference"):
        boundary_ap(wide, dets, 0.05, backend="faster_coco_eval")
    assert boundary_ap(wide, dets, 0.05, backend="reference")["AP50"] == pytest.approx(1.0)


def test_annotation_quality_is_fast_at_the_default_scale():
    rng = np.random.default_rng(9)
    objects = [(im, cat, m) for im, cat, m in grid_objects(rng, 40, per_image=4, n_categories=6)][:140]
    clean = dataset(objects, n_categories=6)
    noisy = copy.deepcopy(clean)
    noisy["annotations"] = [annotation_from_mask(perturb(m, rng), i + 1, im, cat)
                            for i, (im, cat, m) in enumerate(objects)]  # polygons
    start = time.perf_counter()
    quality = annotation_quality(clean, noisy)
    elapsed = time.perf_counter() - start
    assert 0.1 < quality["boundary_AP"] < quality["mask_AP"] < 1.0
    assert elapsed < 10.0, f"annotation_quality took {elapsed:.1f} s on 40 images / 140 instances"


# ------------------------------------------------------------------------------------------------ pixel metrics
def test_dice_iou_hausdorff_on_two_squares():
    a, b = rect(10, 10, 10, 10, (40, 40)), rect(10, 13, 10, 10, (40, 40))  # overlap 10 x 7 = 70
    assert dice(a, b) == pytest.approx(140 / 200) and iou(a, b) == pytest.approx(70 / 130)
    assert dice(a, a) == iou(a, a) == 1.0 and dice(a, rect(30, 30, 5, 5, (40, 40))) == 0.0
    empty = np.zeros_like(a)
    assert dice(empty, empty) == iou(empty, empty) == 1.0
    assert hausdorff(a, b) == pytest.approx(3.0)
    assert hausdorff(a, b, spacing=(2.0, 0.5)) == pytest.approx(1.5)  # the shift is along columns
    nested = rect(5, 5, 20, 20, (40, 40))  # corner (5, 5) is 5√2 from a's corner (10, 10)
    assert hausdorff(a, nested) == pytest.approx(5 * math.sqrt(2))
    holed = nested.copy()
    holed[14:16, 14:16] = 0  # the hole's rim (4-neighbours of the hole) is a boundary 8 px from the outer one
    assert hausdorff(nested, holed) == pytest.approx(8.0)
    assert hausdorff(a, empty) == math.inf and hausdorff(empty, empty) == 0.0
    with pytest.raises(DataFormatError, match="same shape"):
        dice(a, np.zeros((10, 10)))


def test_area_length_volume_of_an_ellipse_is_the_prolate_spheroid_volume():
    a, b = 120, 50  # semi-axes in px
    mask = ellipse(240, 320, b, a, angle=30)
    assert long_axis_length(mask) == pytest.approx(2 * a, rel=0.01)
    assert area_length_volume(mask) == pytest.approx(4 / 3 * math.pi * a * b * b, rel=0.02)
    # anisotropic pixels: 40 mm along rows (80 px of 0.5 mm), 15 mm along columns (150 px of 0.1 mm); the long axis
    # is along the rows in mm although it is along the columns in pixels
    mask = ellipse(240, 320, 80, 150)
    assert long_axis_length(mask, spacing=(0.5, 0.1)) == pytest.approx(80, rel=0.01)
    assert area_length_volume(mask, spacing=(0.5, 0.1)) == pytest.approx(4 / 3 * math.pi * 40 * 15 * 15, rel=0.02)
    assert long_axis_length(rect(3, 3, 1, 1, (8, 8))) == pytest.approx(math.sqrt(2))
    with pytest.raises(DataFormatError, match="non-empty"):
        area_length_volume(np.zeros((8, 8), np.uint8))


def test_ejection_fraction():
    assert ejection_fraction(120.0, 48.0) == pytest.approx(60.0)
    np.testing.assert_allclose(ejection_fraction(np.array([100.0, 80.0]), np.array([50.0, 60.0])), [50.0, 25.0])
    edv, esv = area_length_volume(ellipse(240, 320, 60, 140)), area_length_volume(ellipse(240, 320, 45, 120))
    assert 0 < ejection_fraction(edv, esv) < 100
    with pytest.raises(DataFormatError, match="positive"):
        ejection_fraction(0.0, 10.0)
