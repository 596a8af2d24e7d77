"""What each Benchmark-N notebook runs, as pure functions of its settings: the pages execute these and
``benchmark_n.cost`` plans them, so the two cannot disagree.

* **Model runs** (03-08; ``benchmark_n.runs``): ``model_specs(notebook, cfg, data_dir)`` is the list of ``RunSpec``
  a model page trains (or reads from the cache), ``recipe`` and ``training`` its data and backend.
* **Runs logged outside the artifact cache** (``shared.runlog``): work that is redone at every execution but is
  still one unit with an identity: 02's benchmark files (``FILE_KIND``: written, or kept when an identical one is
  there), 08's weak labels of the val images (``WEAK_KIND``: a prompt and seed through the annotator, SAM or
  GrabCut) and its text-prompted labels (``TEXT_KIND``: the text detector, then the annotator), and 09's CAMUS U-Nets
  (``CAMUS_KIND``: one per seed and training, clean or noisy). Their keys are ``shared.cache.params_key`` of the
  parameters built here (``*_params``), from the settings alone (and, for 08's SAM, the ``device`` parameter its
  ``annotator_precision`` resolves against: ``sam_precision``), so a planner computes the same key without the data.

    specs = model_specs("03_train_eval", cfg)                 # what TrainEval.run trains
    key = logged_key(CAMUS_KIND, camus_params(cfg, seed=0, training="noisy"))
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from benchmark_n import grounded, wan
from benchmark_n.runs import (
    FEDERATED,
    DataRecipe,
    RunSpec,
    Training,
    TrainNoise,
    file_identity,
)
from shared.cache import params_key
from shared.errors import ConfigError, unknown_choice
from shared.paths import data_dir as default_data_dir
from shared.runlog import log_run

FILE_KIND = "benchmark-n-benchmark-file"
WEAK_KIND = "benchmark-n-weak-labels"
TEXT_KIND = "benchmark-n-text-labels"
CAMUS_KIND = "benchmark-n-camus"

#: LVIS's test protocol (MMDetection's and detectron2's LVIS configs): up to 300 detections per image, kept from a
#: score of 1e-4, so that rare classes, which score low, are found at all (the settings' hparams override them)
LVIS_DETECTIONS = {"detections_per_image": 300, "score_threshold": 1e-4}
#: the ``text`` setting's keys per detector, besides ``detector`` and ``score_threshold``
TEXT_SETTINGS = {"stand_in": ("hparams",), "grounding_dino": ("model_dir", "box_threshold", "text_threshold",
                                                              "device")}


# ------------------------------------------------------------------------------------------------ model runs (03-08)
def recipe(cfg, data_dir=None) -> DataRecipe:
    return DataRecipe.from_settings(cfg, data_dir)


def training(cfg, data_recipe: DataRecipe, device: str = "cpu") -> Training:
    """The page's backend and hyperparameters (LVIS: ``LVIS_DETECTIONS`` under the settings' hparams)."""
    hparams = dict(cfg.get("hparams") or {})
    if data_recipe.dataset in FEDERATED and cfg.backend == "torchvision":
        hparams = {**LVIS_DETECTIONS, **hparams}
    return Training(cfg.backend, hparams, device, float(cfg.get("dilation_ratio", 0.02)))


def noise(cfg, tier: str) -> TrainNoise:
    """The training noise of a tier of the page's engine (``engine``, with ``engine_options``); clean for "clean"."""
    if tier == "clean":
        return TrainNoise()
    return TrainNoise("engine", cfg.engine, tier, options=dict(cfg.get("engine_options") or {}))


def spec(cfg, train_noise: TrainNoise, seed: int, loss: str = "ce") -> RunSpec:
    """A run of a model page. With the ``log_losses`` setting, a run on an engine tier keeps its per-instance losses
    (Figs. 8 and 13 show them); clean, ablation, class-noise and weak-label runs do not need them and skip the passes
    over the training set that logging takes. Pages share runs, so the flag is part of a run's key."""
    return RunSpec(train_noise, seed, loss, log_losses=bool(cfg.get("log_losses")) and train_noise.kind == "engine")


def clean_specs(cfg) -> list[RunSpec]:
    """The clean runs, every table's baseline. Pages other than 03 list them last: when notebooks run side by side,
    a page then trains its own runs while 03 trains the clean ones, instead of waiting for them."""
    return [spec(cfg, TrainNoise(), seed) for seed in cfg.seeds]


def train_eval_specs(cfg, data_dir=None) -> list[RunSpec]:
    """03 (and 07, which shows 03's runs): every tier x seed."""
    noisy = [spec(cfg, noise(cfg, tier), seed) for tier in cfg.tiers if tier != "clean" for seed in cfg.seeds]
    return (clean_specs(cfg) if "clean" in cfg.tiers else []) + noisy


def ablation_specs(cfg, data_dir=None) -> list[RunSpec]:
    """04 (Table 7): one operation x level x seed, then the clean runs."""
    return [spec(cfg, TrainNoise("ablation", op, level), seed) for op in cfg.ablations
            for level in cfg.levels for seed in cfg.seeds] + clean_specs(cfg)


def class_noise_specs(cfg, data_dir=None) -> list[RunSpec]:
    """05 (Tables 9, 10): class noise alone, the README engine's combined tiers, then the clean runs."""
    class_runs = [spec(cfg, TrainNoise("class_noise", kind, rate=float(rate)), seed)
                  for kind, rate in cfg.class_noise for seed in cfg.seeds]
    legacy = partial(noise, cfg) if cfg.engine == "legacy_v0" else partial(TrainNoise, "engine", "legacy_v0")
    combined = [spec(cfg, legacy(tier), seed) for tier in cfg.combined_tiers for seed in cfg.seeds]
    return class_runs + combined + clean_specs(cfg)


def lnl_specs(cfg, data_dir=None) -> list[RunSpec]:
    """06 (Table 13): CE and SCE at every loss tier, then the clean CE runs (what the noise costs)."""
    runs = [spec(cfg, noise(cfg, t), seed, loss) for t in cfg.loss_tiers for loss in ("ce", "sce")
            for seed in cfg.seeds]
    return runs + clean_specs(cfg)


def sam_checkpoint(cfg, data_dir=None) -> str | None:
    """SAM's weights when SAM annotates or is fine-tuned: the ``checkpoint`` setting, else ViT-H under
    ``data_dir/weights``."""
    if "sam" not in (cfg.annotator, dict(cfg.finetune).get("backend")):
        return None
    return str(cfg.get("checkpoint") or default_data_dir(data_dir) / "weights" / wan.SAM_CHECKPOINTS["vit_h"])


def annotator_precision(cfg) -> str:
    """The ``annotator_precision`` setting ("auto" when absent), checked whichever the annotator: the precision of
    SAM's image encoder (``wan.PRECISIONS``: auto, bf16 on CUDA and fp32 elsewhere; bf16; fp32, segment_anything's
    own). GrabCut has none."""
    precision = cfg.get("annotator_precision", "auto")
    if precision not in wan.PRECISIONS:
        raise ConfigError(f"setting annotator_precision={precision!r} is invalid; it must be one of "
                          f"{', '.join(wan.PRECISIONS)}")
    return precision


def sam_precision(cfg, device) -> str | None:
    """What SAM's image encoder runs in on page 08 when it runs on ``device`` (the page's ``device`` parameter;
    "auto": this machine's CUDA if it has one): the ``annotator_precision`` setting resolved by
    ``wan.resolved_precision``, "fp32" or "bf16"; None when SAM does not annotate. ``runs.TrainNoise.key``
    resolves the weak-label runs' the same way (their ``precision`` option is this setting)."""
    precision = annotator_precision(cfg)
    return wan.resolved_precision(precision, device) if cfg.annotator == "sam" else None


def annotator(cfg, data_dir=None) -> dict:
    """The weak annotator and, for SAM, its checkpoint and precision (the ``annotator_precision`` setting, not
    resolved: "auto" resolves where SAM runs): ``wan.weak_dataset``'s arguments, and the options of a weak-label
    run's noise (``runs.TrainNoise``). The device SAM runs on is not among them (the page's, ``device``)."""
    precision = annotator_precision(cfg)
    if cfg.annotator != "sam":
        return {"annotator": cfg.annotator}
    return {"annotator": "sam", "checkpoint": sam_checkpoint(cfg, data_dir), "precision": precision}


def text_setting(cfg, data_dir=None) -> tuple[str, dict, float]:
    """The ``text`` setting (Grounded-SAM's text prompt) checked: (detector, its options, score threshold).
    "stand_in" trains the smoke profile's tiny U-Net on other COCO-shapes images (option ``hparams``);
    "grounding_dino" reads the model under ``data_dir/weights`` unless ``model_dir`` says where."""
    text = dict(cfg.text)
    detector, threshold = text.pop("detector", None), text.pop("score_threshold", 0.35)
    if detector not in TEXT_SETTINGS:
        raise unknown_choice("text-prompt detector", detector, TEXT_SETTINGS)
    unknown = set(text) - set(TEXT_SETTINGS[detector])
    if unknown:
        raise ConfigError(f"unknown text setting(s) {sorted(unknown)} for detector {detector}; valid: detector, "
                          f"score_threshold, {', '.join(TEXT_SETTINGS[detector])}")
    if detector == "grounding_dino":
        weights = default_data_dir(data_dir) / "weights" / grounded.GROUNDING_DINO_DIR
        text["model_dir"] = str(text.get("model_dir") or weights)
    elif cfg.dataset != "shapes":
        raise ConfigError(f"the stand-in text detector trains on COCO-shapes; dataset {cfg.dataset!r} needs "
                          "text: {detector: grounding_dino}")
    return detector, text, threshold


def text_noise(cfg, data_dir=None) -> TrainNoise:
    """The training noise of Tables 4's text row and 5: the ``text`` setting's labels of the train images."""
    detector, options, threshold = text_setting(cfg, data_dir)
    return TrainNoise("text", detector, options={**annotator(cfg, data_dir), "score_threshold": threshold,
                                                 "detector_options": options})


def wan_specs(cfg, data_dir=None) -> list[RunSpec]:
    """08: a run per COCO-WAN tier x seed, one per seed on the text-prompted labels, then the clean runs."""
    weak = [spec(cfg, TrainNoise("weak", tier=tier, options=annotator(cfg, data_dir)), seed)
            for tier in cfg.wan_tiers for seed in cfg.seeds]
    text = [spec(cfg, text_noise(cfg, data_dir), seed) for seed in cfg.seeds] if cfg.get("text") else []
    return weak + text + clean_specs(cfg)


def tuning(cfg, data_dir=None, device: str = "cpu"):
    """08's Table 14 fine-tuning (``runs.FineTuning``): the ``finetune`` setting over the profile's, key by key."""
    from benchmark_n.runs import FineTuning
    from shared.profiles import notebook_settings

    defaults = notebook_settings("benchmark_n", "08_coco_wan", cfg.profile).finetune
    return FineTuning.from_settings(cfg.finetune, defaults, device=device, checkpoint=sam_checkpoint(cfg, data_dir))


def finetune_noises(cfg) -> dict:
    """08's Table 14 fine-tuning data: the clean and the ``table14_tier`` train annotations (each seed)."""
    return {"clean": TrainNoise(), cfg.table14_tier: noise(cfg, cfg.table14_tier)}


MODEL_SPECS = {"03_train_eval": train_eval_specs, "04_noise_ablation": ablation_specs,
               "05_class_noise": class_noise_specs, "06_lnl": lnl_specs, "07_confidence": train_eval_specs,
               "08_coco_wan": wan_specs}


def model_specs(notebook: str, cfg, data_dir=None) -> list[RunSpec]:
    """The runs a model page (03-08) trains, in its order (duplicates possible; ``run_grid`` trains each once)."""
    if notebook not in MODEL_SPECS:
        raise unknown_choice("model notebook", notebook, MODEL_SPECS)
    return MODEL_SPECS[notebook](cfg, data_dir)


# ------------------------------------------------------------------------------------------------ 01
def quality_variants(cfg) -> list:
    """01: the noisy variants scored (``quality.quality_table``): every engine and every ablation operation at
    every tier and seed (a variant the seed does not change is scored once, ``quality.variant_params``)."""
    from benchmark_n.quality import ablation_variants, engine_variants

    return engine_variants(cfg.engines, cfg.tiers, cfg.seeds) + ablation_variants(cfg.ablations, cfg.tiers, cfg.seeds)


# ------------------------------------------------------------------------------------------------ logged runs
def logged_key(kind: str, params: dict) -> str:
    """The run-log key of a run that the artifact cache does not hold: ``params_key`` of its parameters."""
    return params_key(kind, params)


@contextmanager
def logged(kind: str, params: dict):
    """Time the block and log it to ``shared.runlog`` as one run built now (it is redone at every execution)."""
    start = time.perf_counter()
    yield
    log_run(kind, logged_key(kind, params), built=True, seconds=time.perf_counter() - start)


def data_params(cfg, data_dir=None, split: str | None = None) -> dict:
    """Which annotations a notebook of 00-02 reads (``sources.load_annotations``'s inputs): the stand-in's generator
    settings, or the dataset, its folder and split."""
    if cfg.dataset == "shapes":
        return {"dataset": "shapes", "n_images": int(cfg.n_images), "shapes_seed": int(cfg.shapes_seed),
                "shapes_preset": cfg.shapes_preset}
    return {"dataset": cfg.dataset, "root": str(default_data_dir(data_dir) / cfg.dataset_dir),
            "split": split or cfg.split}


def benchmark_files(cfg) -> list[tuple[str, str, int]]:
    """02: (engine, tier, seed) of every benchmark file, in the order the page writes them."""
    return [(engine, tier, seed) for engine in cfg.engines for tier in cfg.tiers for seed in cfg.benchmark_seeds]


def file_params(cfg, data_dir, engine: str, tier: str, seed: int) -> dict:
    return {"data": data_params(cfg, data_dir, cfg.get("split", "val")), "engine": engine, "tier": tier,
            "seed": seed}


def val_params(data_recipe: DataRecipe, n_images: int | None = None) -> dict:
    """The val images a COCO-WAN label set is made for: the recipe's val split, or its first ``n_images``."""
    fields = {k: v for k, v in data_recipe.__dict__.items() if k != "data_dir"}
    return {"recipe": fields, "data_dir": data_recipe.data_dir, "split": "val", "images": n_images}


def annotator_params(cfg, data_dir=None, *, device) -> dict:
    """The annotator as a key: its name and, for SAM, the checkpoint's file name and size, and ``"precision":
    "bf16"`` when SAM's image encoder runs in bf16 on ``device`` (``sam_precision``): an fp32 label set keeps the
    key it had before the setting existed."""
    checkpoint = sam_checkpoint(cfg, data_dir) if cfg.annotator == "sam" else None
    params = {"annotator": cfg.annotator, "checkpoint": None if checkpoint is None else file_identity(checkpoint)}
    return {**params, "precision": "bf16"} if sam_precision(cfg, device) == "bf16" else params


def weak_params(cfg, data_dir, data_recipe: DataRecipe, prompt: str, seed: int, *, source=None,
                n_images: int | None = None, device) -> dict:
    """A weak label set of 08 (``wan.weak_dataset`` on the val images) made on ``device``: the images, prompt,
    seed, annotator (``annotator_params``) and where the prompts come from (None: the ground truth; else the noise
    that made the prompt source)."""
    return {"data": val_params(data_recipe, n_images), "prompt": prompt, "seed": seed,
            "annotator": annotator_params(cfg, data_dir, device=device), "prompt_source": source}


def weak_label_sets(cfg) -> list[dict]:
    """08's weak label sets of the val images, in the page's order, as keyword arguments of ``weak_params``: Table 4's
    prompt x seed (``prompt_quality``), Fig. 14's prompts on the first ``example_images`` images (``figure``) and
    Table 14's zero-shot rows from the clean and from the ``table14_tier`` boxes (``table14``, first seed; the clean
    one is Table 4's box prompt again)."""
    sets = [{"prompt": p, "seed": s} for p in cfg.prompts for s in cfg.seeds]
    sets += [{"prompt": p, "seed": cfg.seeds[0], "n_images": int(cfg.example_images)} for p in cfg.prompts]
    sets += [{"prompt": "box", "seed": cfg.seeds[0], "source": table14_source(cfg, name)}
             for name in ("clean", cfg.table14_tier)]
    return sets


def table14_source(cfg, name: str) -> dict | None:
    """Table 14's zero-shot prompt source as a key: None for the clean boxes, else the engine tier and seed."""
    if name == "clean":
        return None
    return {**noise(cfg, name).key(), "seed": cfg.seeds[0]}


def text_params(cfg, data_dir, data_recipe: DataRecipe, seed: int, *, device) -> dict:
    """A text-prompted label set of 08 (``grounded.text_tier`` on the val images) made on ``device``: detector, its
    settings, the annotator (SAM's precision as ``runs.TrainNoise.key`` names it on ``device``) and the seed."""
    return {"data": val_params(data_recipe), "noise": text_noise(cfg, data_dir).key(device), "seed": seed}


def camus_params(cfg, data_dir, seed: int, training_name: str) -> dict:
    """A CAMUS U-Net of 09 (``camus.clean_vs_noisy``: trained on the clean or the noisy training masks)."""
    from benchmark_n import camus

    data = ({"dataset": "synthetic", "n_patients": int(cfg.n_patients), "data_seed": int(cfg.data_seed)}
            if cfg.dataset == "synthetic" else {"dataset": cfg.dataset,
                                                "root": str(Path(default_data_dir(data_dir)) / cfg.dataset_dir)})
    return {"data": {**data, "size": int(cfg.size)}, "seed": seed, "tier": cfg.tier,
            "noise_pixel_mm": cfg.get("noise_pixel_mm"), "hparams": camus.check_hparams(dict(cfg.get("hparams") or {})),
            "training": training_name}


__all__ = [
    "CAMUS_KIND",
    "FILE_KIND",
    "LVIS_DETECTIONS",
    "MODEL_SPECS",
    "TEXT_KIND",
    "TEXT_SETTINGS",
    "WEAK_KIND",
    "ablation_specs",
    "annotator",
    "annotator_params",
    "annotator_precision",
    "benchmark_files",
    "camus_params",
    "class_noise_specs",
    "clean_specs",
    "data_params",
    "file_params",
    "finetune_noises",
    "lnl_specs",
    "logged",
    "logged_key",
    "model_specs",
    "noise",
    "quality_variants",
    "recipe",
    "sam_checkpoint",
    "sam_precision",
    "spec",
    "table14_source",
    "text_noise",
    "text_params",
    "text_setting",
    "train_eval_specs",
    "training",
    "tuning",
    "val_params",
    "wan_specs",
    "weak_label_sets",
    "weak_params",
]
