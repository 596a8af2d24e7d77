"""The MMDetection backend's configs (benchmark_n.mmdet_backend), checked without mmdet installed."""
import ast
import json
import os
import sys

import cv2
import numpy as np
import pytest

from benchmark_n import mmdet_backend as mb
from benchmark_n.shapes import generate_shapes
from benchmark_n.sources import Annotations
from shared.errors import ConfigError, DataNotFoundError

CLASSES = ["circle", "square", "triangle"]
PATHS = ("noisy/train.json", "images/train", "clean/val.json", "images/val")


def _overrides(model="mask_rcnn_r50", **options):
    options.setdefault("epochs", None if mb.MODELS[model].by_iterations else 2)
    return mb.config_overrides(model, *PATHS, CLASSES, "work", **options)


def _leaves(tree, path=()):
    """(dotted key, value) of every leaf of a nested dict."""
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _leaves(value, (*path, key))
        else:
            yield ".".join((*path, key)), value


@pytest.fixture()
def configs(tmp_path):
    """A stand-in for mmdet's configs/ folder holding (empty) files at every registry path."""
    root = tmp_path / "configs"
    for entry in mb.MODELS.values():
        (root / entry.config).parent.mkdir(parents=True, exist_ok=True)
        (root / entry.config).write_text("# stand-in\n")
    return root


@pytest.fixture()
def no_mmdet(monkeypatch):
    monkeypatch.setitem(sys.modules, "mmdet", None)  # import mmdet raises ImportError, installed or not


def test_training_reads_the_noisy_json_and_evaluation_the_clean_one():
    out = _overrides(evaluate_noisy_val_json="noisy/val.json")
    noisy, clean = os.path.abspath("noisy/train.json"), os.path.abspath("clean/val.json")
    assert out["train_dataloader"]["dataset"]["ann_file"] == noisy
    assert out["train_dataloader"]["dataset"]["data_prefix"]["img"].startswith(os.path.abspath("images/train"))
    for loader in ("val_dataloader", "test_dataloader"):
        assert out[loader]["dataset"]["ann_file"] == clean
    for evaluator in ("val_evaluator", "test_evaluator"):
        primary, secondary = out[evaluator]
        assert primary["ann_file"] == clean and "prefix" not in primary  # the clean val is the primary score
        assert secondary["ann_file"] == os.path.abspath("noisy/val.json") and secondary["prefix"] == "noisy_val"
        assert primary["metric"] == ["bbox", "segm"]
    assert out["test_evaluator"][0]["outfile_prefix"] == os.path.abspath("work/results/val")
    single = _overrides()["val_evaluator"]
    assert single["ann_file"] == clean and single["_delete_"] is True  # replaces Cityscapes' list of metrics
    assert noisy not in [v for k, v in _leaves(_overrides()) if k.startswith(("val_", "test_"))]


def test_wrapped_training_sets_get_the_noisy_json_inside_the_wrapper():
    for model in ("mask_rcnn_r50_cityscapes", "mask_rcnn_r50_lvis"):
        dataset = _overrides(model)["train_dataloader"]["dataset"]
        assert set(dataset) == {"dataset"} and dataset["dataset"]["ann_file"] == os.path.abspath("noisy/train.json")


@pytest.mark.parametrize("model", sorted(mb.MODELS))
def test_every_model_predicts_the_datasets_classes(model):
    out = _overrides(model)
    counts = {k: v for k, v in _leaves(out) if k.endswith(("num_classes", "num_things_classes"))}
    assert counts and set(counts.values()) == {len(CLASSES)}
    assert set(counts) == set(mb.MODELS[model].class_keys)
    for key in ("train_dataloader.dataset", "val_dataloader.dataset", "test_dataloader.dataset"):
        node = dict(_leaves(out))
        prefix = key + (".dataset" if key.startswith("train") and mb.MODELS[model].wrapped else "")
        assert node[f"{prefix}.metainfo.classes"] == tuple(CLASSES)
    if model.startswith("mask2former"):
        weights = out["model"]["panoptic_head"]["loss_cls"]["class_weight"]
        assert weights == [1.0] * len(CLASSES) + [0.1]


def test_multi_stage_heads_update_every_stage_of_the_base_list(configs):
    """The rendered file, run as mmengine runs it (``_base_`` bound to the base config), keeps each stage's own
    settings and gives every stage K classes."""
    for model, mask_stages in (("cascade_mask_rcnn_r50", None), ("htc_r50", 3)):
        text = mb.config_text(model, _overrides(model), configs)
        tree = ast.parse(text)
        tree.body = [s for s in tree.body if not (isinstance(s, ast.Assign) and s.targets[0].id == "_base_")]
        stage = {"type": "Shared2FCBBoxHead", "num_classes": 80}
        mask = {"type": "HTCMaskHead", "num_classes": 80}
        base = {"model": {"roi_head": {"bbox_head": [dict(stage, target_stds=[0.1 * s]) for s in (1, 2, 3)],
                                       "mask_head": [dict(mask) for _ in range(3)] if mask_stages else mask}}}
        scope = {"_base_": base}
        exec(compile(tree, model, "exec"), scope)
        heads = scope["model"]["roi_head"]["bbox_head"]
        assert [h["num_classes"] for h in heads] == [3, 3, 3]
        assert [h["target_stds"] for h in heads] == [[0.1], [0.2], [0.30000000000000004]]
        assert all(h["type"] == "Shared2FCBBoxHead" for h in heads)
        masks = scope["model"]["roi_head"]["mask_head"]
        assert [m["num_classes"] for m in masks] == [3] * 3 if mask_stages else masks == {"num_classes": 3}


def test_load_from_is_refused_and_always_none():
    with pytest.raises(ConfigError, match="leaks the clean"):
        _overrides(load_from="mask_rcnn_r50_fpn_1x_coco.pth")
    for model in mb.MODELS:  # mmdet's Cityscapes config starts from a COCO checkpoint: not here
        out = _overrides(model)
        assert "load_from" in out and out["load_from"] is None
    backbone = _overrides("mask_rcnn_r50_cityscapes")["model"]["backbone"]["init_cfg"]
    assert backbone["checkpoint"] == "torchvision://resnet50"


def test_auto_scale_lr_uses_each_configs_base_batch():
    expected = (("mask_rcnn_r50", 16, 0.5), ("yolact_r50", 8, 1.0), ("mask_rcnn_r50_cityscapes", 8, 1.0))
    for model, base, factor in expected:
        out = _overrides(model, gpus=4, images_per_gpu=2)
        assert out["auto_scale_lr"] == {"enable": True, "base_batch_size": base}
        assert out["train_dataloader"]["batch_size"] == 2
        assert out["benchmark_n"]["lr_factor"] == factor and out["benchmark_n"]["total_batch_size"] == 8
    assert _overrides(seed=7)["randomness"]["seed"] == 7
    assert _overrides(epochs=3)["train_cfg"]["max_epochs"] == 3 and "train_cfg" not in _overrides(epochs=None)


def test_epochs_are_refused_for_iteration_based_configs():
    with pytest.raises(ConfigError, match="iterations"):
        _overrides("mask2former_r50", epochs=12)
    with pytest.raises(ConfigError, match="iterations"):
        mb.check_hparams({"model": "mask2former_swin_s", "epochs": 12})


@pytest.mark.parametrize("model", sorted(mb.MODELS))
def test_written_config_parses_and_inherits_from_the_registry_config(model, configs, tmp_path):
    path = mb.write_config(model, *PATHS, CLASSES, "work", path=tmp_path / "out" / "config.py", mmdet_configs=configs)
    text = path.read_text()
    tree = ast.parse(text)
    assigned = {s.targets[0].id: s.value for s in tree.body if isinstance(s, ast.Assign)}
    assert ast.literal_eval(assigned["_base_"]) == str(configs / mb.MODELS[model].config)
    assert ast.literal_eval(assigned["load_from"]) is None
    assert {"model", "train_dataloader", "val_dataloader", "test_dataloader", "val_evaluator"} <= set(assigned)
    assert repr(os.path.abspath("clean/val.json")) in ast.unparse(assigned["val_evaluator"])
    assert repr(os.path.abspath("noisy/train.json")) in ast.unparse(assigned["train_dataloader"])
    assert os.listdir(path.parent) == ["config.py"]  # atomic: no temporary file left


def test_a_failed_write_leaves_neither_the_config_nor_a_temporary_file(configs, tmp_path, monkeypatch):
    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(mb.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        mb.write_config("mask_rcnn_r50", *PATHS, CLASSES, "work", path=tmp_path / "config.py", mmdet_configs=configs)
    assert list(tmp_path.glob("*config.py*")) == []


def test_a_configs_folder_without_the_models_config_is_reported(tmp_path):
    (tmp_path / "configs").mkdir()
    with pytest.raises(DataNotFoundError, match="mask-rcnn_r50_fpn_1x_coco.py"):
        mb.write_config("mask_rcnn_r50", *PATHS, CLASSES, "work", path=tmp_path / "c.py",
                        mmdet_configs=tmp_path / "configs")


def test_missing_mmdet_names_the_install_before_any_work(no_mmdet, tmp_path):
    with pytest.raises(ConfigError, match="pip install mmdet==3.3.0") as caught:
        mb.write_config("mask_rcnn_r50", *PATHS, CLASSES, "work", path=tmp_path / "config.py")
    assert "--no-build-isolation" in str(caught.value) and "torchvision backend" in str(caught.value)
    assert not (tmp_path / "config.py").exists()
    data = generate_shapes(2, seed=0, height=64, width=64)
    train = Annotations("shapes", "train", data.dataset, data.images, split="train")
    with pytest.raises(ConfigError, match="pip install mmdet"):
        mb.fit_predict(train, train, {"work_dir": str(tmp_path / "work")})
    assert not (tmp_path / "work").exists()


def test_unknown_models_are_refused_listing_the_valid_ones():
    with pytest.raises(ConfigError, match="mask_rcnn_r50_lvis") as caught:
        mb.config_overrides("mask_rcnn_x101", *PATHS, CLASSES, "work")
    assert all(name in str(caught.value) for name in mb.MODELS)
    with pytest.raises(ConfigError, match="yolact_r50"):
        mb.check_hparams({"model": "yolo"})


def test_check_hparams_rejects_unknown_keys_sce_and_log_losses():
    assert mb.check_hparams({}) == mb.DEFAULTS
    with pytest.raises(ConfigError, match="lr"):
        mb.check_hparams({"lr": 0.02})
    with pytest.raises(ConfigError, match="torchvision backend"):
        mb.check_hparams({"loss": "sce"})
    with pytest.raises(ConfigError, match="images_per_gpu"):
        mb.check_hparams({"images_per_gpu": 0})
    with pytest.raises(ConfigError, match="torchvision backend"):
        mb.fit_predict(None, None, {}, log_losses=True)


def test_stand_in_images_are_written_losslessly_with_their_json(tmp_path):
    data = generate_shapes(3, seed=1, height=64, width=80)
    split = Annotations("shapes", "val", data.dataset, data.images, split="val")
    json_path, images = mb._write_split(split, "val", tmp_path)
    written = json.loads(json_path.read_text())
    assert [a["id"] for a in written["annotations"]] == [a["id"] for a in data.dataset["annotations"]]
    for entry, picture in zip(written["images"], data.images):
        back = cv2.cvtColor(cv2.imread(str(images / entry["file_name"])), cv2.COLOR_BGR2RGB)
        assert np.array_equal(back, picture)


def test_history_keeps_the_training_rows_of_mmengines_scalars(tmp_path):
    lines = [{"lr": 0.01, "loss": 2.5, "loss_cls": 1.0, "epoch": 1, "iter": 50, "step": 50},
             {"coco/segm_mAP": 0.1, "step": 1},
             {"lr": 0.01, "loss": 1.5, "loss_cls": 0.5, "epoch": 2, "iter": 50, "step": 100}]
    scalars = tmp_path / "scalars.json"
    scalars.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert mb._history(scalars) == [{"epoch": 1, "iteration": 50, "lr": 0.01, "loss": 2.5, "loss_cls": 1.0},
                                    {"epoch": 2, "iteration": 100, "lr": 0.01, "loss": 1.5, "loss_cls": 0.5}]
    assert mb._history(tmp_path / "missing.json") == []
