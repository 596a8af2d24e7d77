"""The smoke profile's segmenter (``benchmark_n.tiny_seg``): the U-Net, its losses, targets and instances."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pycocotools import mask as mask_utils

from benchmark_n.coco import annotation_from_mask
from benchmark_n.shapes import generate_shapes, preset
from benchmark_n.sources import Annotations
from benchmark_n.tiny_seg import (BACKGROUND, BORDER, INTERIOR, TinyUNet, check_hparams, components, detections,
                                  fit_predict, pixel_loss, targets)
from shared.errors import ConfigError, DataFormatError


def test_unet_maps_images_to_class_logits_of_the_same_size():
    out = TinyUNet(7, width=4)(torch.rand(2, 3, 32, 48))
    assert out.shape == (2, 7, 32, 48)


def test_ce_is_torch_cross_entropy_and_sce_adds_the_reverse_term():
    torch.manual_seed(0)
    logits, target = torch.randn(2, 4, 5, 5), torch.randint(0, 4, (2, 5, 5))
    ce = F.cross_entropy(logits, target, reduction="none")
    assert torch.allclose(pixel_loss(logits, target), ce)
    p_y = logits.softmax(1).gather(1, target[:, None])[:, 0]
    assert torch.allclose(pixel_loss(logits, target, "sce", 0.1, 1.0), 0.1 * ce + 4 * (1 - p_y))
    with pytest.raises(ConfigError, match="loss"):
        pixel_loss(logits, target, "focal")


def _dataset(masks_and_classes, h=20, w=20, crowd=()):
    anns = [annotation_from_mask(m, i + 1, 1, c) for i, (m, c) in enumerate(masks_and_classes)]
    for i in crowd:
        anns[i]["iscrowd"] = 1
    return {"images": [{"id": 1, "height": h, "width": w, "file_name": "a.png"}], "annotations": anns,
            "categories": [{"id": 5, "name": "a"}, {"id": 9, "name": "b"}]}


def test_targets_paint_in_order_mark_touching_pixels_and_skip_crowds():
    a, b, c = (np.zeros((20, 20), bool) for _ in range(3))
    a[2:10, 2:10], b[6:14, 6:14], c[15:19, 15:19] = True, True, True
    structure, classes, ids = targets(_dataset([(a, 5), (b, 9), (c, 5)], crowd=[2]))
    assert ids == [5, 9]
    assert classes[0][7, 7] == 1 and classes[0][3, 3] == 0 and classes[0][16, 16] == -1 and classes[0][0, 0] == -1
    assert structure[0][3, 3] == INTERIOR and structure[0][12, 12] == INTERIOR and structure[0][0, 0] == BACKGROUND
    # a's visible pixels next to b, and b's next to a, are border; nothing else is
    assert structure[0][5, 7] == BORDER and structure[0][6, 7] == BORDER and structure[0][5, 3] == INTERIOR
    assert set(np.unique(structure[0][structure[0] == BORDER])) == {BORDER} and (structure[0] == BORDER).sum() == 14


def test_targets_refuse_images_of_different_sizes():
    data = _dataset([])
    data["images"].append({"id": 2, "height": 30, "width": 20, "file_name": "b.png"})
    with pytest.raises(DataFormatError, match="one size"):
        targets(data)


def _heads():
    """Two interior blobs separated by a border column, a third blob; class 0 on the first two, class 1 on the
    third (which has a column of class 0)."""
    structure = np.zeros((3, 20, 20))
    structure[BACKGROUND] = 0.9
    structure[1:] = 0.05
    classes = np.full((2, 20, 20), 0.5)
    for (r, c), k in (((slice(1, 6), slice(1, 6)), INTERIOR), ((slice(1, 6), slice(6, 7)), BORDER),
                      ((slice(1, 6), slice(7, 12)), INTERIOR), ((slice(12, 18), slice(10, 16)), INTERIOR)):
        structure[:, r, c] = 0.05
        structure[k, r, c] = 0.9
    classes[0, 1:6, 1:12], classes[1, 1:6, 1:12] = 0.8, 0.2
    classes[0, 12:18, 10:16], classes[1, 12:18, 10:16] = 0.3, 0.7
    classes[0, 12:18, 15], classes[1, 12:18, 15] = 0.9, 0.1
    return structure, classes


def test_components_split_at_borders_and_take_the_majority_class():
    found = components(*_heads(), min_area=4)
    sizes = sorted((c, int(m.sum())) for c, m, _ in found)
    assert sizes == [(0, 30), (0, 30), (1, 36)]  # each interior grown by one pixel into the object
    third = next(f for f in found if f[0] == 1)
    assert abs(third[2] - (30 * 0.7 + 6 * 0.1) / 36 * 0.95) < 1e-9  # mean class probability x mean object probability
    assert len(components(*_heads(), min_area=31)) == 1


def test_detections_are_coco_results_of_the_components():
    dets = detections(*_heads(), 7, [5, 9], min_area=4)
    assert sorted(d["category_id"] for d in dets) == [5, 5, 9] and all(d["image_id"] == 7 for d in dets)
    for d in dets:
        mask = mask_utils.decode({**d["segmentation"], "counts": d["segmentation"]["counts"].encode()})
        assert mask.shape == (20, 20)
        assert d["bbox"] == [float(v) for v in mask_utils.toBbox(mask_utils.encode(np.asfortranarray(mask)))]


@pytest.fixture(scope="module")
def pair():
    torch.set_num_threads(1)
    train, val = (generate_shapes(n, s, **preset("model", height=64, width=64)) for n, s in ((24, 0), (6, 1)))
    return Annotations("shapes", "train", train.dataset, train.images), Annotations("shapes", "val", val.dataset,
                                                                                      val.images)


def test_training_lowers_the_loss_is_seeded_and_logs_instance_losses(pair):
    train, val = pair
    ann = train.dataset["annotations"][0]
    ann["noise"] = {"class_flipped": True, "original_category_id": ann["category_id"], "spatial": []}
    hp = {"epochs": 3, "loss_epochs": [1, 3]}
    first = fit_predict(train, val, hp, seed=3, log_losses=True)
    again = fit_predict(train, val, hp, seed=3, log_losses=True)
    assert first == again
    losses = [h["loss"] for h in first["history"]]
    assert losses[-1] < losses[0]
    rows = first["instance_losses"]
    assert len(rows) == 2 * len(train.dataset["annotations"]) and {r["epoch"] for r in rows} == {1, 3}
    assert all(np.isfinite(r["class_loss"]) and np.isfinite(r["mask_loss"]) for r in rows)
    assert [r["class_flipped"] for r in rows if r["ann_id"] == ann["id"]] == [True, True]
    assert sum(r["class_flipped"] for r in rows) == 2
    del ann["noise"]


def test_bad_hyperparameters_are_refused():
    with pytest.raises(ConfigError, match="lerning_rate"):
        check_hparams({"lerning_rate": 1})
    with pytest.raises(ConfigError, match="loss"):
        check_hparams({"loss": "gce"})
    assert check_hparams({"epochs": 2})["epochs"] == 2
