"""The MMDetection backend run for real: a few iterations of mmdet's own Mask R-CNN R-50 config on the CPU, through
``benchmark_n.mmdet_backend.fit_predict`` (the function the model notebooks call).

Skipped where mmdet or mmcv's compiled ops (``mmcv._ext``) are missing: mmcv 2.1.0 has no CPU wheel on PyPI and is
built from source (book/running.md). The model is ``mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py`` seen through a
``configs/`` folder whose file of that name inherits it and changes only what makes it small: 128 px images instead
of 1333 x 800 and data loaders without worker processes. The backbone starts from its random initialisation
(``backbone_weights=None``: no ImageNet weights offline). 4 training images in batches of 2 for 2 epochs: 4
iterations, logged at the end of each epoch (mmengine's LoggerHook logs the last iteration of an epoch shorter than
its interval of 50). mmengine's CPU training is deterministic for a seed, so the same seed gives the same loss
history, and another seed another one.
"""
import math

import numpy as np
import pytest

pytest.importorskip("mmdet")  # mmdet itself asserts on import that the installed mmcv is in its range
try:
    import mmcv._ext  # noqa: F401  (mmcv-lite, or an mmcv built without ops, lacks them; mmdet's RoIAlign needs them)
except ImportError as error:
    pytest.skip(f"mmcv's compiled ops cannot be imported ({error})", allow_module_level=True)

from pycocotools import mask as mask_utils  # noqa: E402

from benchmark_n import mmdet_backend as mb  # noqa: E402
from benchmark_n.metrics import coco_ap  # noqa: E402
from benchmark_n.shapes import generate_shapes, preset  # noqa: E402
from benchmark_n.sources import Annotations  # noqa: E402

SIZE = 128  # px: the shapes' side and the Resize scale of the small config
N_TRAIN, N_VAL, BATCH, EPOCHS = 4, 2, 2, 2
LOSSES = ("loss", "loss_rpn_cls", "loss_rpn_bbox", "loss_cls", "loss_bbox", "loss_mask")
SMALL_CONFIG = """_base_ = {base!r}
# mmdet's Mask R-CNN R-50 at {size} px and without loader worker processes (a test on the CPU)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='Resize', scale=({size}, {size}), keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=({size}, {size}), keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
"""


def _shapes(n: int, seed: int, split: str) -> Annotations:
    data = generate_shapes(n, seed, **preset("model", height=SIZE, width=SIZE))
    return Annotations("shapes", split, data.dataset, data.images, split=split)


@pytest.fixture(scope="module")
def small_configs(tmp_path_factory):
    """A configs/ folder holding the small Mask R-CNN R-50 config at the registry's path."""
    root = tmp_path_factory.mktemp("configs")
    name = mb.MODELS["mask_rcnn_r50"].config
    (root / name).parent.mkdir(parents=True)
    (root / name).write_text(SMALL_CONFIG.format(base=str(mb.mmdet_configs_dir() / name), size=SIZE))
    return root


@pytest.fixture(scope="module")
def pair():
    return _shapes(N_TRAIN, 0, "train"), _shapes(N_VAL, 1, "val")


@pytest.fixture(scope="module")
def fit(pair, small_configs):
    """``fit(seed, copy=0)``: the result of the small run with that seed, trained once per (seed, copy) in this
    module; a second copy trains the same run again."""
    results = {}

    def run(seed: int, copy: int = 0) -> dict:
        if (seed, copy) not in results:
            hp = {"model": "mask_rcnn_r50", "images_per_gpu": BATCH, "epochs": EPOCHS,
                  "mmdet_configs": str(small_configs), "backbone_weights": None}
            results[seed, copy] = mb.fit_predict(*pair, hp, seed=seed, device="cpu")
        return results[seed, copy]

    return run


def test_detections_are_coco_results_on_the_val_images_and_categories(fit, pair):
    _, val = pair
    detections = fit(0)["detections"]
    assert detections  # an untrained box head scores every class about 1 / (K + 1), above the 0.05 threshold
    images = {entry["id"]: entry for entry in val.dataset["images"]}
    categories = {c["id"] for c in val.dataset["categories"]}
    assert {d["image_id"] for d in detections} <= set(images)
    assert {d["category_id"] for d in detections} <= categories
    for d in detections:
        image = images[d["image_id"]]
        assert 0.0 <= d["score"] <= 1.0
        x, y, w, h = d["bbox"]
        assert all(map(math.isfinite, d["bbox"])) and w >= 0 and h >= 0
        assert x >= -1 and y >= -1 and x + w <= image["width"] + 1 and y + h <= image["height"] + 1
        assert d["segmentation"]["size"] == [image["height"], image["width"]]
        mask = mask_utils.decode(d["segmentation"])
        assert mask.shape == (image["height"], image["width"]) and set(np.unique(mask)) <= {0, 1}
    scores = coco_ap(val.dataset, detections, "segm")  # pycocotools takes them as results of the clean val set
    assert 0.0 <= scores["AP"] <= 1.0


def test_history_has_one_row_per_logged_iteration_with_finite_losses(fit):
    history = fit(0)["history"]
    per_epoch = math.ceil(N_TRAIN / BATCH)
    assert [row["iteration"] for row in history] == [per_epoch * e for e in range(1, EPOCHS + 1)]
    assert [row["epoch"] for row in history] == list(range(1, EPOCHS + 1))
    for row in history:
        assert set(LOSSES) <= set(row) and all(math.isfinite(row[k]) for k in LOSSES)
        assert row["loss"] > 0 and row["lr"] > 0
        assert math.isclose(row["loss"], sum(row[k] for k in LOSSES[1:]), rel_tol=1e-3)


def test_the_same_seed_gives_the_same_losses_and_another_seed_others(fit):
    first, again, other = fit(0), fit(0, copy=1), fit(1)
    assert first["history"] == again["history"]  # every loss and lr equal, not only close
    assert first["detections"] == again["detections"]
    assert [row["loss"] for row in other["history"]] != [row["loss"] for row in first["history"]]
