"""The full profile's optional MMDetection backend: the paper's models from MMDetection 3.x's own configs.

"All experiments use the default configs from MMDetection" (App. D.3). ``MODELS`` names each model of the paper
by its config under mmdet's ``configs/`` folder. ``config_overrides`` is what changes in that config for a
Benchmark-N run, as a plain nested dict in mmengine's config terms: training reads the noisy train JSON, validation
and test score the *clean* val JSON (the paper noises the training set; a noisy val JSON can be scored as well,
under the prefix ``noisy_val``), the heads predict the dataset's K classes, the seed is set, and ``load_from`` is
always None: no run starts from a COCO-trained checkpoint, which would leak the clean labels (mmdet's Cityscapes
config does start from one, so here its backbone gets the ImageNet weights back instead). ``write_config`` writes
that dict as a config file that ``_base_``-inherits from the mmdet config; the text is made without mmdet.

    text = config_text("mask_rcnn_r50", config_overrides("mask_rcnn_r50", "train.json", "train_images/",
                       "val.json", "val_images/", ["circle", "square"], "work/"), "/path/to/mmdet/configs")
    write_config("mask_rcnn_r50", ..., path="work/config.py")   # then: tools/dist_train.sh work/config.py 4
    result = fit_predict(train, val, {"model": "mask_rcnn_r50"}, seed=0, device="cuda")
    result["detections"]        # COCO results on val: image_id, category_id, score, segmentation (RLE), bbox
    result["history"]           # one row per logged iteration: epoch, iteration, loss (and its parts), lr

Learning rate: ``auto_scale_lr`` is enabled, so mmengine multiplies the config's lr by the real total batch
(processes x ``images_per_gpu``) over the config's ``base_batch_size`` (16 for most; 8 for YOLACT and Cityscapes).
The paper's 4 GPUs x 2 images make 8: Mask R-CNN's lr 0.02 becomes 0.01, YOLACT's 1e-3 and Cityscapes' 0.01 stay.
``fit_predict`` trains in this process on one device, so its batch is ``images_per_gpu`` (default 8, the paper's
total); for several GPUs write the config and launch mmdet's ``tools/dist_train.sh``. ``epochs`` replaces
``train_cfg.max_epochs`` only: the LR milestones stay at the config's epochs (a shorter run never decays;
YOLACT at the paper's 50 epochs passes 3 of its 4 milestones, [20, 42, 49, 52]). Mask2Former's schedule is in
iterations (368,750 at batch 16, about 50 COCO epochs), so ``epochs`` is refused for it.

Not written yet: the Symmetric Cross-Entropy of Table 13 and the per-instance loss logging of Figs. 8 and 13
need an mmdet loss module and hook that are not written; ``loss="sce"`` and ``log_losses=True`` raise ConfigError
and point to the torchvision backend (``benchmark_n.maskrcnn``), which has both. mmdet and mmcv are not installed
in this project (mmcv has no CPU wheel on PyPI): ``fit_predict`` and a ``write_config`` without
``mmdet_configs`` raise ConfigError with the install recipe before doing any work.
"""
from __future__ import annotations

import copy
import itertools
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import cv2

from benchmark_n import formats
from benchmark_n.coco import write_coco
from shared.device import select_device
from shared.errors import ConfigError, DataFormatError, DataNotFoundError, unknown_choice

INSTALL = ("the mmdet backend needs MMDetection 3.x: pip install mmdet==3.3.0 mmengine==0.10.7 and mmcv 2.1.0 "
           "(mmdet 3.3.0 rejects mmcv 2.2.0). mmcv 2.1.0 has no CPU wheel on PyPI; build it with "
           "pip install 'setuptools<70' wheel ninja && pip install --no-build-isolation mmcv==2.1.0 (about 1 h on 2 "
           "cores), or install a CUDA build that matches your torch. Without it, use the torchvision "
           "backend (benchmark_n.maskrcnn).")
HEAD = "model.roi_head"


@dataclass(frozen=True)
class MMDetModel:
    config: str  # relative to mmdet's configs/ folder (MMDetection 3.x names)
    note: str
    class_keys: tuple  # dotted keys set to the number of classes; a number indexes a list of the base config
    base_batch_size: int = 16  # the total batch the config's lr is for (its auto_scale_lr)
    evaluator: str = "CocoMetric"
    wrapped: bool = False  # the train set is a RepeatDataset / ClassBalancedDataset around the real one
    by_iterations: bool = False  # IterBasedTrainLoop: no max_epochs
    fixed: tuple = ()  # (dotted key, value) pairs that every run of the model gets


_RCNN = (f"{HEAD}.bbox_head.num_classes", f"{HEAD}.mask_head.num_classes")
_STAGES = tuple(f"{HEAD}.bbox_head.{i}.num_classes" for i in range(3))  # three cascade stages
_HTC_MASKS = tuple(f"{HEAD}.mask_head.{i}.num_classes" for i in range(3))
_M2F = ("model.panoptic_head.num_things_classes", "model.panoptic_fusion_head.num_things_classes")
MODELS = {
    "mask_rcnn_r50": MMDetModel("mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py", "12 epochs (1x); the anchor model",
                                _RCNN),
    "mask_rcnn_r101": MMDetModel("mask_rcnn/mask-rcnn_r101_fpn_1x_coco.py", "12 epochs (1x)", _RCNN),
    "yolact_r50": MMDetModel("yolact/yolact_r50_1xb8-55e_coco.py",
                             "55 epochs as configured; the paper says 50 (App. D.3)",
                             ("model.bbox_head.num_classes", "model.mask_head.num_classes"), base_batch_size=8),
    "solo_r50": MMDetModel("solo/solo_r50_fpn_1x_coco.py", "12 epochs (1x); the paper's clean 35.9 is the zoo's "
                           "3x multi-scale number", ("model.mask_head.num_classes",)),
    "htc_r50": MMDetModel("htc/htc-without-semantic_r50_fpn_1x_coco.py",
                          "12 epochs; without the semantic branch: htc_r50_fpn_1x_coco.py needs the COCO-stuff "
                          "maps (stuffthingmaps), whose thing pixels are the clean labels; the paper's clean 34.1 "
                          "is not the zoo's 37.4", _STAGES + _HTC_MASKS),
    "cascade_mask_rcnn_r50": MMDetModel("cascade_rcnn/cascade-mask-rcnn_r50_fpn_1x_coco.py",
                                        "12 epochs (1x); COCO-WAN only in the paper",
                                        _STAGES + (f"{HEAD}.mask_head.num_classes",)),
    "mask2former_r50": MMDetModel("mask2former/mask2former_r50_8xb2-lsj-50e_coco.py",
                                  "368,750 iterations (about 50 epochs); the paper's clean numbers are the zoo's "
                                  "50-epoch checkpoints, App. D says 12 epochs", _M2F,
                                  by_iterations=True),
    "mask2former_swin_s": MMDetModel("mask2former/mask2former_swin-s-p4-w7-224_8xb2-lsj-50e_coco.py",
                                     "as mask2former_r50, Swin-S backbone (ImageNet weights downloaded)", _M2F,
                                     by_iterations=True),
    "mask_rcnn_r50_cityscapes": MMDetModel(
        "cityscapes/mask-rcnn_r50_fpn_1x_cityscapes.py", "8 epochs of the train set repeated 8 times; the config "
        "starts from a COCO checkpoint, here from ImageNet weights instead, so expect less than the paper's 36.1",
        _RCNN, base_batch_size=8, wrapped=True,
        fixed=(("model.backbone.init_cfg",  # None in the base: _delete_ lets a dict replace it
                {"_delete_": True, "type": "Pretrained", "checkpoint": "torchvision://resnet50"}),)),
    "mask_rcnn_r50_lvis": MMDetModel("lvis/mask-rcnn_r50_fpn_sample1e-3_ms-1x_lvis-v1.py",
                                     "12 epochs, class-balanced sampling (1e-3), LVIS metric (needs pip install "
                                     "lvis); LVIS-format JSON only", _RCNN, evaluator="LVISMetric", wrapped=True),
}
#: hyperparameters of ``fit_predict`` (epochs None: the config's schedule; work_dir None: a temporary folder;
#: mmdet_configs None: the installed mmdet's configs/; images_per_gpu 8 on one device: the paper's total batch;
#: backbone_weights "imagenet": the config's own init_cfg, None: no pre-trained backbone, or a checkpoint file)
DEFAULTS = {"model": "mask_rcnn_r50", "images_per_gpu": 8, "epochs": None, "work_dir": None, "mmdet_configs": None,
            "loss": "ce", "backbone_weights": "imagenet"}


# ------------------------------------------------------------------------------------------------ the config
def model_entry(model: str) -> MMDetModel:
    """The registry entry of ``model`` (ConfigError listing the valid names otherwise)."""
    if model not in MODELS:
        raise unknown_choice("mmdet model", model, MODELS)
    return MODELS[model]


def _check_count(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be an int >= 1, got {value!r}")


def _check_epochs(model: str, epochs) -> None:
    if epochs is None:
        return
    _check_count("epochs (None: the config's schedule)", epochs)
    if model_entry(model).by_iterations:
        raise ConfigError(f"{model}'s config trains by iterations (IterBasedTrainLoop, LR milestones in "
                          "iterations); leave epochs=None for its schedule, or edit train_cfg.max_iters and "
                          "param_scheduler in the written config")


def _nest(flat: dict) -> dict:
    """``{"a.b.c": v}`` -> ``{"a": {"b": {"c": v}}}`` (list indices stay string keys, as in mmengine's options)."""
    nested: dict = {}
    for key, value in flat.items():
        *parents, last = key.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return nested


def _evaluators(entry: MMDetModel, clean_json: str, noisy_json, outfile_prefix=None):
    clean = {"type": entry.evaluator, "ann_file": clean_json, "metric": ["bbox", "segm"]}
    if outfile_prefix is not None:
        clean["outfile_prefix"] = outfile_prefix
    if noisy_json is None:
        return {"_delete_": True, **clean}  # replaces the base's evaluator (a list for Cityscapes)
    return [clean, {"type": entry.evaluator, "ann_file": os.path.abspath(noisy_json), "metric": ["bbox", "segm"],
                    "prefix": "noisy_val"}]


def config_overrides(model: str, train_json, train_images, val_json, val_images, classes, work_dir, *, gpus: int = 4,
                     images_per_gpu: int = 2, seed: int = 0, epochs: int | None = None,
                     evaluate_noisy_val_json=None, load_from=None, backbone_weights="imagenet") -> dict:
    """What a Benchmark-N run changes in ``model``'s mmdet config, as a nested dict of mmengine config keys (a
    key that is a number indexes a list of the base config, as in mmengine's ``--cfg-options``). Paths become
    absolute; ``classes`` are the category names in the order of the JSON's ``categories``. ``gpus`` only enters
    the record ``benchmark_n`` (total batch and the lr factor ``auto_scale_lr`` will apply when run on that many
    GPUs). ``load_from`` other than None raises ConfigError: initialising from a COCO checkpoint leaks clean
    labels. ``backbone_weights``: "imagenet" keeps the config's backbone ``init_cfg`` (mmengine fetches
    ``torchvision://resnet50`` into the torch hub cache unless the file is there), None trains the backbone from
    its random initialisation, a path loads that checkpoint file instead."""
    entry = model_entry(model)
    if load_from is not None:
        raise ConfigError(f"load_from={load_from!r} refused: a checkpoint trained on clean COCO leaks the clean "
                          "labels into a noisy-label run; the backbone's ImageNet weights are kept")
    _check_epochs(model, epochs)
    classes = tuple(str(c) for c in classes)
    if not classes or len(set(classes)) != len(classes):
        raise ConfigError(f"classes must be distinct category names, at least one; got {list(classes)[:10]}")
    _check_count("gpus", gpus)
    _check_count("images_per_gpu", images_per_gpu)
    train_json, train_images, val_json, val_images, work_dir = (
        os.path.abspath(p) for p in (train_json, train_images, val_json, val_images, work_dir))
    k = len(classes)
    metainfo = {"classes": classes}
    train_set = {"ann_file": train_json, "data_prefix": {"_delete_": True, "img": train_images + os.sep},
                 "metainfo": metainfo}
    val_set = {"ann_file": val_json, "data_prefix": {"_delete_": True, "img": val_images + os.sep},
               "metainfo": metainfo}
    flat = {key: k for key in entry.class_keys}
    if entry.class_keys == _M2F:  # one weight per class and 0.1 for "no object", as the config has
        flat["model.panoptic_head.loss_cls.class_weight"] = [1.0] * k + [0.1]
    flat.update(dict(entry.fixed))
    if backbone_weights is None:  # None replaces the base's Pretrained dict: the backbone keeps its random init
        flat["model.backbone.init_cfg"] = None
    elif backbone_weights != "imagenet":
        flat["model.backbone.init_cfg"] = {"_delete_": True, "type": "Pretrained",
                                           "checkpoint": os.path.abspath(backbone_weights)}
    total = gpus * images_per_gpu
    flat.update({
        "train_dataloader.batch_size": images_per_gpu,
        "train_dataloader.dataset" + (".dataset" if entry.wrapped else ""): train_set,
        "val_dataloader.dataset": val_set,
        "test_dataloader.dataset": val_set,
        "val_evaluator": _evaluators(entry, val_json, evaluate_noisy_val_json),
        "test_evaluator": _evaluators(entry, val_json, evaluate_noisy_val_json,
                                      os.path.join(work_dir, "results", "val")),
        "auto_scale_lr": {"enable": True, "base_batch_size": entry.base_batch_size},
        "randomness.seed": seed,
        "load_from": None,
        "resume": False,
        "work_dir": work_dir,
        "default_hooks.checkpoint.max_keep_ckpts": 1,  # disk only: the run tests its final weights in memory
        "benchmark_n": {"model": model, "config": entry.config, "train_json": train_json, "clean_val_json": val_json,
                        "gpus": gpus, "total_batch_size": total, "lr_factor": total / entry.base_batch_size},
    })
    if epochs is not None:
        flat["train_cfg.max_epochs"] = epochs
    return copy.deepcopy(_nest(flat))  # no dict shared between keys (val and test loaders)


def _render(value, path: tuple = (), depth: int = 0) -> str:
    """Python source of ``value`` for an mmengine config file: dicts as ``dict(...)``; a dict keyed by list
    indices as the base config's list with those items updated (a shallow ``dict(item, **update)``)."""
    if isinstance(value, dict) and value and all(isinstance(k, str) and k.isdigit() for k in value):
        updates = _render({int(k): v for k, v in value.items()}, path, depth)
        base = "_base_" + "".join(f"[{k!r}]" for k in path)
        return f"[dict(item, **{updates}.get(i, {{}})) for i, item in enumerate({base})]"
    if isinstance(value, dict):
        named = all(isinstance(k, str) and k.isidentifier() for k in value)
        items = [f"{k}={_render(v, (*path, k), depth + 1)}" if named else
                 f"{k!r}: {_render(v, (*path, k), depth + 1)}" for k, v in value.items()]
        opening, closing = ("dict(", ")") if named else ("{", "}")
    elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
        items, opening, closing = [_render(v, path, depth + 1) for v in value], "[", "]"
    else:
        return repr(value)
    inline = opening + ", ".join(items) + closing
    if len(inline) + 4 * depth <= 100 and "\n" not in inline:
        return inline
    pad = "\n" + "    " * (depth + 1)
    return opening + ",".join(pad + item for item in items) + "\n" + "    " * depth + closing


def config_text(model: str, overrides: dict, configs_dir) -> str:
    """The config file of ``overrides`` (from ``config_overrides``): ``_base_`` is ``model``'s config under
    ``configs_dir`` (mmdet's ``configs/`` folder; not read here), then one assignment per top-level key."""
    entry = model_entry(model)
    record = overrides.get("benchmark_n", {})
    lines = [f"# Benchmark-N run of {model}, written by benchmark_n.mmdet_backend. {entry.note}.",
             f"# Trains on {record.get('train_json', '?')}; validates and tests on the clean val "
             f"{record.get('clean_val_json', '?')}.",
             f"# auto_scale_lr: lr x (processes x images per GPU) / {entry.base_batch_size}; on "
             f"{record.get('gpus', '?')} GPU(s) x factor {record.get('lr_factor', '?')}.",
             f"_base_ = {str(Path(configs_dir) / entry.config)!r}", ""]
    lines += [f"{key} = {_render(value, (key,))}" for key, value in overrides.items()]
    return "\n".join(lines) + "\n"


def _import_mmdet():
    """The mmdet module; ConfigError with ``INSTALL`` when it cannot be imported."""
    try:
        import mmdet
    except (ImportError, AssertionError) as error:  # mmdet asserts its mmcv version range on import
        raise ConfigError(f"{INSTALL} ({type(error).__name__}: {error})") from error
    return mmdet


def mmdet_configs_dir(configs=None) -> Path:
    """MMDetection's ``configs/`` folder: ``configs`` when given, else the installed mmdet's (``mmdet/.mim/configs``
    of a wheel, ``<checkout>/configs`` of an editable install); ConfigError with the install recipe when mmdet
    cannot be imported, DataNotFoundError when the folder is missing."""
    if configs is None:
        package = Path(_import_mmdet().__file__).parent
        candidates = [package / ".mim" / "configs", package.parent / "configs"]
        configs = next((c for c in candidates if c.is_dir()), candidates[0])
    configs = Path(configs)
    if not configs.is_dir():
        raise DataNotFoundError(f"{configs} is not a folder; expected MMDetection 3.x's configs/ folder "
                                "(mmdet/.mim/configs in an installed wheel)")
    return configs


def write_config(model: str, train_json, train_images, val_json, val_images, classes, work_dir, *, path,
                 mmdet_configs=None, **options) -> Path:
    """Write ``config_text`` of ``config_overrides(model, ..., **options)`` to ``path`` atomically (a temporary
    file renamed into place). The base config must exist under ``mmdet_configs`` (None: the installed mmdet's;
    see ``mmdet_configs_dir``), else DataNotFoundError naming it."""
    configs = mmdet_configs_dir(mmdet_configs)
    base = configs / model_entry(model).config
    if not base.is_file():
        raise DataNotFoundError(f"{base} does not exist; {model} needs MMDetection 3.x's config "
                                f"{model_entry(model).config} (the names changed in 3.0)")
    text = config_text(model, config_overrides(model, train_json, train_images, val_json, val_images, classes,
                                               work_dir, **options), configs)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


# ------------------------------------------------------------------------------------------------ training
def check_hparams(hp: dict) -> dict:
    """``DEFAULTS`` updated with ``hp``; unknown keys, an unknown model, bad epochs or ``loss="sce"`` raise
    ConfigError. Needs no mmdet."""
    unknown = set(hp) - set(DEFAULTS)
    if unknown:
        raise ConfigError(f"unknown mmdet hyperparameter(s) {sorted(unknown)}; valid: {', '.join(DEFAULTS)}")
    hp = {**DEFAULTS, **hp}
    model_entry(hp["model"])
    _check_epochs(hp["model"], hp["epochs"])
    _check_count("images_per_gpu", hp["images_per_gpu"])
    if hp["backbone_weights"] is not None and not isinstance(hp["backbone_weights"], (str, Path)):
        raise ConfigError(f"backbone_weights={hp['backbone_weights']!r}: it must be 'imagenet', None (random "
                          "init) or the path of a checkpoint file")
    if hp["loss"] != "ce":
        raise ConfigError(f"loss={hp['loss']!r}: the mmdet backend trains with its configs' losses only (no SCE "
                          "loss module is written for mmdet); the torchvision backend (benchmark_n.maskrcnn) has "
                          "loss='sce'")
    return hp


def _write_split(data, split: str, folder: Path) -> tuple[Path, Path]:
    """The COCO JSON of ``data`` written under ``folder``, and its images' folder: the stand-in's images written
    as PNG (file_name renamed), a real dataset's folder checked for every image."""
    dataset = data.dataset
    if data.images is not None:
        images = folder / "images" / split
        images.mkdir(parents=True, exist_ok=True)
        entries = []
        for entry, picture in zip(dataset["images"], data.images):  # the stand-in's arrays are in that order
            name = f"{entry['id']}.png"
            cv2.imwrite(str(images / name), cv2.cvtColor(picture, cv2.COLOR_RGB2BGR))
            entries.append({**entry, "file_name": name})
        dataset = {**dataset, "images": entries}
    else:
        formats.check_image_files(data.root, data.source, data.split, dataset)
        images = Path(data.root) / formats.layout(data.source).images[data.split]
    return write_coco(folder / f"{split}.json", dataset), images


def _history(scalars: Path) -> list[dict]:
    """The training rows of mmengine's ``vis_data/scalars.json``: epoch, iteration, loss and its parts, lr."""
    if not scalars.is_file():
        return []
    rows = [json.loads(line) for line in scalars.read_text().splitlines() if line.strip()]
    return [{"epoch": r.get("epoch"), "iteration": r["step"], "lr": r.get("lr"),
             **{k: v for k, v in r.items() if k.startswith("loss")}} for r in rows if "loss" in r]


_RUNS = itertools.count()  # numbers the Runners of this process (their Visualizer names)


def fit_predict(train, val, hp: dict, seed: int = 0, device: str = "cuda", log_losses: bool = False) -> dict:
    """Train ``hp["model"]`` with mmengine's Runner on ``train``'s (noisy) annotations, validating on ``val``'s
    (clean) each epoch as the config does, then test the final weights on ``val`` and return their detections
    (read from CocoMetric's ``results/val.segm.json``), the training history, and no instance losses. ``train``
    and ``val``: ``benchmark_n.sources.Annotations``. ``device``: mmengine trains on the visible GPU ("cuda:N"
    selects it); "cpu" only where no GPU is visible (a plumbing test: a CPU run took 6.5 s per iteration)."""
    hp = check_hparams(hp)
    if log_losses:
        raise ConfigError("log_losses: per-instance losses need an mmdet hook that is not written; the torchvision "
                          "backend (benchmark_n.maskrcnn) logs them")
    _import_mmdet()
    configs = mmdet_configs_dir(hp["mmdet_configs"])
    weights = hp["backbone_weights"]
    if weights not in (None, "imagenet") and not Path(weights).is_file():
        raise DataNotFoundError(f"backbone_weights file {weights} does not exist; give a checkpoint of the config's "
                                "backbone, 'imagenet' or None")
    from mmengine.config import Config
    from mmengine.runner import Runner
    import torch

    chosen = select_device(device)
    if chosen.type == "cpu" and torch.cuda.is_available():
        raise ConfigError("device='cpu' but a GPU is visible and mmengine would use it; hide it "
                          "(CUDA_VISIBLE_DEVICES='') or pass device='cuda'")
    if chosen.type == "cuda" and chosen.index is not None:
        torch.cuda.set_device(chosen)
    names = [c["name"] for c in train.dataset["categories"]]
    if [c["id"] for c in val.dataset["categories"]] != [c["id"] for c in train.dataset["categories"]]:
        raise DataFormatError("train and val have different categories; the model predicts train's")
    with tempfile.TemporaryDirectory(prefix="benchmark_n_mmdet_") as scratch:
        work = Path(hp["work_dir"] or scratch)
        train_json, train_images = _write_split(train, "train", work / "data")
        val_json, val_images = _write_split(val, "val", work / "data")
        path = write_config(hp["model"], train_json, train_images, val_json, val_images, names, work,
                            path=work / "config.py", mmdet_configs=configs, gpus=1,
                            images_per_gpu=hp["images_per_gpu"], seed=seed, epochs=hp["epochs"],
                            backbone_weights=weights)
        cfg = Config.fromfile(str(path))
        # the configs name their Visualizer "visualizer", and mmengine hands a later Runner of this process the
        # instance of that name, still writing scalars.json into the first run's (deleted) folder: one name per run
        cfg.visualizer["name"] = f"benchmark_n_{os.getpid()}_{next(_RUNS)}"
        runner = Runner.from_cfg(cfg)
        runner.train()
        runner.test()
        results = work / "results" / "val.segm.json"
        if not results.is_file():
            raise DataNotFoundError(f"{results} was not written; the test evaluator's outfile_prefix is "
                                    f"{work / 'results' / 'val'}")
        detections = [{"image_id": int(d["image_id"]), "category_id": int(d["category_id"]),
                       "score": float(d["score"]), "segmentation": d["segmentation"],
                       "bbox": [float(v) for v in d["bbox"]]} for d in json.loads(results.read_text())]
        history = _history(Path(runner.log_dir) / "vis_data" / "scalars.json")
    return {"detections": detections, "history": history, "instance_losses": []}


__all__ = ["INSTALL", "MMDetModel", "MODELS", "DEFAULTS", "model_entry", "config_overrides", "config_text",
           "mmdet_configs_dir", "write_config", "check_hparams", "fit_predict"]
