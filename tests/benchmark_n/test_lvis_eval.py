"""LVIS's federated evaluation (``benchmark_n.lvis_eval``), checked against the official ``lvis`` API."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from benchmark_n.coco import rle_json
from benchmark_n.lvis_eval import LVIS_KEYS, federated_detections, lvis_ap
from benchmark_n.metrics import coco_ap
from shared.errors import ConfigError, DataFormatError

H = W = 96


def _square(y, x, size):
    mask = np.zeros((H, W), np.uint8)
    mask[y:y + size, x:x + size] = 1
    return mask


def _ann(ann_id, image_id, category_id, mask):
    rle = mask_utils.encode(np.asfortranarray(mask))
    return {"id": ann_id, "image_id": image_id, "category_id": category_id, "segmentation": rle_json(rle),
            "area": float(mask_utils.area(rle)), "bbox": mask_utils.toBbox(rle).tolist()}


def lvis_gt(neg=((2,), (), ()), not_exhaustive=((), (), ())):
    """Three images: 1 holds a cat (category 1, frequent), 2 a dog (2, common), 3 a cat and a yak (3, rare)."""
    images = [{"id": i, "height": H, "width": W, "neg_category_ids": list(n), "not_exhaustive_category_ids": list(e)}
              for i, n, e in zip((1, 2, 3), neg, not_exhaustive)]
    categories = [{"id": 1, "name": "cat", "frequency": "f"}, {"id": 2, "name": "dog", "frequency": "c"},
                  {"id": 3, "name": "yak", "frequency": "r"}]
    annotations = [_ann(1, 1, 1, _square(10, 10, 40)), _ann(2, 2, 2, _square(20, 30, 30)),
                   _ann(3, 3, 1, _square(5, 5, 20)), _ann(4, 3, 3, _square(50, 50, 30))]
    return {"images": images, "categories": categories, "annotations": annotations}


def as_detections(gt, score=0.9):
    return [{"image_id": a["image_id"], "category_id": a["category_id"], "segmentation": a["segmentation"],
             "bbox": a["bbox"], "score": score} for a in gt["annotations"]]


def _dog(image_id, score=0.95, at=(60, 5)):
    return {"image_id": image_id, "category_id": 2, "segmentation": rle_json(mask_utils.encode(np.asfortranarray(
        _square(*at, 25)))), "score": score}


def test_ground_truth_scores_one_and_rare_common_frequent_are_separate_means():
    gt = lvis_gt()
    scores = lvis_ap(gt, as_detections(gt))
    assert set(scores) == set(LVIS_KEYS)
    assert all(scores[k] == pytest.approx(1.0) for k in ("AP", "AP50", "AP_r", "AP_c", "AP_f"))
    assert lvis_ap(gt, as_detections(gt), boundary=True)["AP"] == pytest.approx(1.0)
    assert lvis_ap(gt, as_detections(gt), "bbox")["AP"] == pytest.approx(1.0)
    missed = [d for d in as_detections(gt) if d["category_id"] != 3]  # the rare yak never found
    scores = lvis_ap(gt, missed)
    assert scores["AP_r"] == 0 and scores["AP_f"] == pytest.approx(1.0) and scores["AP"] == pytest.approx(2 / 3)
    assert lvis_ap(gt, [])["AP"] == 0


def test_a_detection_of_an_unverified_category_is_dropped_one_verified_absent_is_a_false_positive():
    gt = lvis_gt()
    unverified = as_detections(gt) + [_dog(3)]  # nobody checked image 3 for dogs
    assert lvis_ap(gt, unverified)["AP"] == pytest.approx(1.0)
    assert coco_ap(gt, unverified)["AP"] < 1  # COCO's rules count it against the dog
    verified_absent = as_detections(gt) + [_dog(1)]  # image 1 lists dogs as absent
    assert lvis_ap(gt, verified_absent)["AP_c"] == pytest.approx(0.5)  # a false positive above the true dog
    assert [d["image_id"] for d in federated_detections(gt, unverified)] == [1, 2, 3, 3]


def test_an_unmatched_detection_of_a_category_not_exhaustively_annotated_is_ignored():
    extra = as_detections(lvis_gt()) + [_dog(2)]  # a second, unannotated dog on image 2
    assert lvis_ap(lvis_gt(), extra)["AP_c"] == pytest.approx(0.5)
    assert lvis_ap(lvis_gt(not_exhaustive=((), (2,), ())), extra)["AP_c"] == pytest.approx(1.0)


def test_at_most_300_detections_per_image_count_over_all_categories():
    gt = lvis_gt()
    noise = [{**_dog(2, score=0.99, at=(70, 70)), "category_id": 2} for _ in range(300)]  # 300 wrong dogs, higher
    assert lvis_ap(gt, as_detections(gt) + noise)["AP_c"] == 0  # the true dog is cut: 301st on its image
    assert lvis_ap(gt, as_detections(gt) + noise[:299])["AP_c"] > 0


def test_bad_input_names_the_problem():
    gt = lvis_gt()
    del gt["images"][1]["neg_category_ids"]
    with pytest.raises(DataFormatError, match="image 2 has no neg_category_ids"):
        lvis_ap(gt, [])
    gt = lvis_gt()
    gt["categories"][0]["frequency"] = "x"
    with pytest.raises(DataFormatError, match="category 1 has frequency 'x'"):
        lvis_ap(gt, [])
    with pytest.raises(ConfigError, match="segm"):
        lvis_ap(lvis_gt(), [], "bbox", boundary=True)
    with pytest.raises(DataFormatError, match="image 9, which the ground truth does not have"):
        lvis_ap(lvis_gt(), [{**_dog(2), "image_id": 9}])  # checked before the federated filter could drop it
    with pytest.raises(DataFormatError, match="category_id 7, which the ground truth does not have"):
        lvis_ap(lvis_gt(), [{**_dog(2), "category_id": 7}])
    with pytest.raises(DataFormatError, match="detection 0 has no score"):
        lvis_ap(lvis_gt(), [{k: v for k, v in _dog(2).items() if k != "score"}])
    with pytest.raises(DataFormatError, match="detection 0 has no score"):
        federated_detections(lvis_gt(), [{"image_id": 1, "category_id": 1}])


# ------------------------------------------------------------------------------------------------ the official API
def _perturbed(gt, seed):
    """Detections with shifted masks, random scores, a few false positives of every kind."""
    rng = np.random.default_rng(seed)
    dets = []
    for ann in gt["annotations"]:
        mask = mask_utils.decode(ann["segmentation"])
        for _ in range(int(rng.integers(1, 3))):
            moved = np.roll(mask, tuple(rng.integers(-6, 7, 2)), axis=(0, 1))
            dets.append({"image_id": ann["image_id"], "category_id": int(rng.choice([ann["category_id"], 1, 2, 3])),
                         "segmentation": rle_json(mask_utils.encode(np.asfortranarray(moved))),
                         "score": float(rng.uniform(0.05, 1))})
    return dets


@pytest.mark.filterwarnings("ignore:The 'warn' method is deprecated:DeprecationWarning")  # lvis 0.5.3's logging
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("iou_type", ["segm", "bbox"])
def test_every_number_equals_the_official_lvis_api(tmp_path, monkeypatch, seed, iou_type):
    lvis = pytest.importorskip("lvis")
    monkeypatch.setattr(np, "float", float, raising=False)  # lvis 0.5.3 still says np.float (gone in NumPy 1.24)
    gt = lvis_gt(neg=((2, 3), (1,), ()), not_exhaustive=((), (2,), (1,)))
    dets = _perturbed(lvis_gt(), seed)
    for det in dets:
        det["bbox"] = mask_utils.toBbox(det["segmentation"]).tolist()
    path = tmp_path / "gt.json"
    path.write_text(json.dumps(gt))
    # for masks, the box is left out as detectron2 and MMDetection do (the API would take its area for the mask's)
    given = [{k: v for k, v in d.items() if iou_type == "bbox" or k != "bbox"} for d in dets]
    official = lvis.LVISEval(str(path), copy.deepcopy(given), iou_type)
    official.run()
    ours = lvis_ap(gt, dets, iou_type)
    names = {"AP": "AP", "AP50": "AP50", "AP75": "AP75", "AP_S": "APs", "AP_M": "APm", "AP_L": "APl", "AP_r": "APr",
             "AP_c": "APc", "AP_f": "APf"}
    for key, name in names.items():
        theirs = official.results[name]
        assert (np.isnan(ours[key]) and theirs == -1) or ours[key] == pytest.approx(theirs, abs=1e-12), key
