"""COCO-shapes and the scikit-image instance sets (benchmark_n.shapes)."""
import json

import cv2
import numpy as np
import pytest
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from benchmark_n.coco import ann_to_mask, ann_to_rle, check_coco, rle_json, write_coco
from benchmark_n.shapes import (CATEGORIES, CLASS_COLOURS, PRESETS, coins, generate_shapes, horse, preset,
                                real_instances)
from shared.errors import ConfigError

KERNEL = np.ones((3, 3), np.uint8)


@pytest.fixture(scope="module")
def ann40():
    return generate_shapes(40, seed=0, **PRESETS["annotation"])


@pytest.fixture(scope="module")
def model40():
    return generate_shapes(40, seed=0, **PRESETS["model"])


def _pairs(data):
    """(annotation, visible mask) of every annotation."""
    for i in range(len(data.images)):
        masks = data.visible_masks(i)
        for ann in data.annotations_of(i):
            yield i, ann, masks[ann["id"]]


def test_same_seed_gives_identical_data_and_other_seeds_differ(ann40):
    again = generate_shapes(40, seed=0, **PRESETS["annotation"])
    assert np.array_equal(again.images, ann40.images)
    assert np.array_equal(again.instance_maps, ann40.instance_maps)
    assert json.dumps(again.dataset) == json.dumps(ann40.dataset)
    other = generate_shapes(40, seed=1, **PRESETS["annotation"])
    assert not np.array_equal(other.images, ann40.images)
    assert json.dumps(other.dataset["annotations"]) != json.dumps(ann40.dataset["annotations"])
    # image i depends on (seed, i) only: a shorter run is a prefix of a longer one
    head = generate_shapes(5, seed=0, **PRESETS["annotation"])
    assert np.array_equal(head.images, ann40.images[:5])
    n_head = len(head.dataset["annotations"])
    assert head.dataset["annotations"] == ann40.dataset["annotations"][:n_head]


def test_coco_structure_categories_and_presets(ann40, model40):
    for data in (ann40, model40):
        check_coco(data.dataset)
        assert [c["id"] for c in data.dataset["categories"]] == [1, 2, 3, 4, 5, 6]
        assert all(a["iscrowd"] == 0 for a in data.dataset["annotations"])
        assert len({im["file_name"] for im in data.dataset["images"]}) == len(data.images)
    groups = {}
    for c in CATEGORIES:
        groups.setdefault(c["supercategory"], set()).add(c["name"])
    assert groups == {"round": {"circle", "ellipse"}, "polygon": {"triangle", "square", "pentagon"},
                      "spiky": {"star"}}
    # all six classes occur in 40 images
    assert {a["category_id"] for a in ann40.dataset["annotations"]} == set(range(1, 7))
    # sizes per preset
    assert ann40.images.shape == (40, 480, 640, 3) and ann40.images.dtype == np.uint8
    assert model40.images.shape == (40, 128, 128, 3)
    assert all((im["height"], im["width"]) == (128, 128) for im in model40.dataset["images"])
    for data, name in ((ann40, "annotation"), (model40, "model")):
        lo, hi = PRESETS[name]["radius"]
        side = min(data.images.shape[1:3])
        radii = np.array([o["radius"] for o in data.objects])
        assert radii.min() >= lo * side and radii.max() <= hi * side
        per_image = np.bincount([a["image_id"] for a in data.dataset["annotations"]])
        assert per_image.max() <= PRESETS[name]["max_objects"]
    assert preset("model", max_objects=2)["max_objects"] == 2 and PRESETS["model"]["max_objects"] == 3


def test_polygons_rasterise_to_the_visible_masks(ann40, model40):
    """The polygon is the mask's outer contour through boundary-pixel centres, so rasterised by pycocotools it
    loses about half of the boundary pixels and may gain a few just outside: every difference lies within one
    pixel of the visible mask's boundary (the image's edge counts as boundary). Measured over seeds 0-4: mean IoU
    0.954-0.962 at 640x480 (0.915-0.926 at 128x128), min IoU 0.914 for visible masks >= 2,000 px at 640x480."""
    for data in (ann40, model40):
        h, w = data.images.shape[1:3]
        ious = []
        for _, ann, visible in _pairs(data):
            raster = ann_to_mask(ann, h, w).astype(bool)
            v8 = visible.astype(np.uint8)
            band = cv2.dilate(v8, KERNEL) > cv2.erode(v8, KERNEL, borderType=cv2.BORDER_CONSTANT, borderValue=0)
            assert not (raster ^ visible)[~band].any(), f"annotation {ann['id']} differs beyond the boundary"
            iou = (raster & visible).sum() / (raster | visible).sum()
            ious.append(iou)
            if data is ann40 and visible.sum() >= 2000:
                assert iou > 0.9, (ann["id"], iou)
            # area and bbox are pycocotools' own for the polygons
            rle = mask_utils.merge(mask_utils.frPyObjects(ann["segmentation"], h, w))
            assert ann["area"] == float(mask_utils.area(rle)) == raster.sum()
            assert ann["bbox"] == [float(v) for v in mask_utils.toBbox(rle)]
        assert np.mean(ious) > (0.95 if data is ann40 else 0.9)


def test_images_show_the_annotated_objects_in_their_class_colours(ann40):
    for i, ann, visible in _pairs(ann40):
        assert visible.any()
        assert (ann40.images[i][visible] == CLASS_COLOURS[ann["category_id"]]).all(), ann["id"]


def test_later_objects_occlude_earlier_ones(ann40, model40):
    for data in (ann40, model40):
        objects = data.objects
        assert len(objects) == len(data.dataset["annotations"])
        cut = [o for o in objects if o["visible_area"] < 0.8 * o["full_area"]]
        multi_part = [a for a in data.dataset["annotations"] if len(a["segmentation"]) > 1]
        assert cut and multi_part
        # occlusion never punches a hole (COCO polygons cannot hold one)
        for _, ann, visible in _pairs(data):
            _, hierarchy = cv2.findContours(visible.astype(np.uint8), cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE)
            assert (hierarchy[0][:, 3] < 0).all(), f"annotation {ann['id']} has a hole"


def test_random_colours_decouple_colour_from_class():
    data = generate_shapes(20, seed=3, **preset("model", random_colours=True))
    colours = {}
    for o in data.objects:
        colours.setdefault(o["category_id"], set()).add(o["colour"])
    counts = {c: sum(o["category_id"] == c for o in data.objects) for c in colours}
    assert all(len(colours[c]) > 1 for c in colours if counts[c] >= 3)
    for i, ann, visible in _pairs(data):   # the image still shows each object in its own colour
        obj = next(o for o in data.objects if o["ann_id"] == ann["id"])
        assert (data.images[i][visible] == obj["colour"]).all()


def test_photo_background_is_textured():
    plain = generate_shapes(4, seed=0, **preset("model"))
    photo = generate_shapes(4, seed=0, **preset("model", background="photo"))
    for data, textured in ((plain, False), (photo, True)):
        # a plain image has one grey level (dropped fragments of objects aside); a photo crop varies
        spread = np.mean([data.images[i][data.instance_maps[i] == 0].std(axis=0).max() for i in range(4)])
        assert (spread > 10) == textured, spread


def test_bad_arguments_raise_config_errors():
    for kwargs in (dict(radius=(0.3, 0.1)), dict(radius=(0.1, 1.5)), dict(min_objects=4, max_objects=2),
                   dict(background="noise"), dict(height=4)):
        with pytest.raises(ConfigError):
            generate_shapes(1, **kwargs)
    with pytest.raises(ConfigError, match="annotation, model"):
        preset("tiny")


def test_coins_and_horse():
    sets = real_instances()
    data = sets["coins"]
    anns = data.dataset["annotations"]
    assert 20 <= len(anns) <= 30 and len(anns) == 24          # the gallery recipe gives 24 coins
    assert all(a["area"] >= 50 for a in anns)
    assert [c["name"] for c in data.dataset["categories"]] == ["coin"]
    assert data.images.shape == (1, 303, 384, 3)
    check_coco(data.dataset)
    # coins do not touch each other: their masks are disjoint and each is one blob
    assert len(np.unique(data.instance_maps)) == len(anns) + 1
    assert all(len(a["segmentation"]) == 1 for a in anns)

    data = horse()
    (ann,) = data.dataset["annotations"]
    assert data.dataset["categories"][0]["name"] == "horse"
    assert data.instance_maps.sum() == 43412                    # the inverted silhouette
    assert abs(ann["area"] - 43412) <= 0.05 * 43412
    x, y, w, h = ann["bbox"]
    assert 0 <= x and 0 <= y and x + w <= 400 and y + h <= 328 and w * h > ann["area"]
    assert coins().dataset == sets["coins"].dataset


def test_json_round_trip_through_pycocotools(ann40, tmp_path):
    path = write_coco(tmp_path / "shapes.json", ann40.dataset)
    gt = COCO(str(path))
    assert len(gt.getAnnIds()) == len(ann40.dataset["annotations"])
    assert sorted(gt.getCatIds()) == [1, 2, 3, 4, 5, 6]
    ann = ann40.dataset["annotations"][7]
    image = gt.loadImgs(ann["image_id"])[0]
    assert np.array_equal(gt.annToMask(gt.loadAnns(ann["id"])[0]),
                          ann_to_mask(ann, image["height"], image["width"]))
    # the annotations scored as predictions (RLE, as loadRes wants) against themselves: segm AP 1
    sizes = {im["id"]: (im["height"], im["width"]) for im in ann40.dataset["images"]}
    results = [dict(image_id=a["image_id"], category_id=a["category_id"], score=1.0,
                    segmentation=rle_json(ann_to_rle(a, *sizes[a["image_id"]])))
               for a in ann40.dataset["annotations"]]
    evaluator = COCOeval(gt, gt.loadRes(results), "segm")
    evaluator.evaluate(), evaluator.accumulate()
    evaluator.summarize()
    assert evaluator.stats[0] == pytest.approx(1.0)
