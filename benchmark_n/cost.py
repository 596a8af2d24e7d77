"""Benchmark-N's cost plans (``shared.cost``): every run its notebooks execute, and the steps each one takes.

``plan(notebook, cfg, params)`` enumerates a notebook's runs through the functions its page calls
(``benchmark_n.plans``: the model pages' ``RunSpec`` lists, 01's noisy variants, 02's files, 08's label sets and
fine-tunings, 09's U-Nets), with the identities ``shared.runlog`` records for them: the artifact cache's keys
(``runs.run_key``, ``runs.finetune_key``, ``quality.variant_params``) and the keys of the runs logged outside it
(``plans.logged_key``). Where the data is generated here (COCO-shapes, the synthetic echocardiograms of the smoke
profile) the identities are the real keys and the sizes the real ones; a real dataset, absent where plans are made,
is named instead of fingerprinted (``runs.data_names``: equal exactly when the recipe and the data folder are) and
sized from ``formats.SIZES`` / ``camus_files.CAMUS_PATIENTS``.

**Kinds** (``PlannedRun.kind``): ``benchmark-n-quality`` (01: a noisy variant's annotation-level scores, and the
clean baseline), ``benchmark-n-benchmark-file`` (02), ``benchmark-n-runs`` (03-08: a segmenter trained on noisy
train annotations, evaluated on clean val), ``benchmark-n-finetune`` (08: Table 14's fine-tuned box-prompted
segmenter), ``benchmark-n-weak-labels`` and ``benchmark-n-text-labels`` (08: COCO-WAN labels of the val images from
SAM / GrabCut, from the text prompts' detector), ``benchmark-n-camus`` (09). 00 runs nothing that has an identity:
it draws the engines' tiers over the val annotations (minutes of CPU on COCO val) for its tables, figures and claims.

**Steps** are counted as the code takes them: the tiny U-Net (``tiny_seg.fit``) ``epochs x ceil(n / batch)`` train
steps (``shared.training.train_epoch``, no drop_last), a forward over the training images in batches of 16 after every
logged-loss epoch and over the val images to predict; Mask R-CNN (``maskrcnn.fit_predict``) ``min(epochs x
per_epoch, max_iters)`` steps, ``per_epoch`` = ``ceil(images / batch)`` (exact for one orientation; the
orientation-grouped batches of a real dataset can add one per epoch), one no-grad pass over the training images
after each logged epoch reached (priced as the inference step: the RoI heads on the annotations' boxes) and one over
the val images; SAM ViT-H one image embedding per image (``set_image``; the prompt decoder per instance is
negligible and not counted); the CAMUS U-Net ``epochs x ceil(2 n_train / batch)`` (both frames of a patient). Step
kinds that ``shared.workloads`` has no family for yet are ``ProposedWorkload`` (same key format; priced once the
family is added there): ``tiny_unet`` (``tiny_seg.TinyUNet`` / the CAMUS U-Net), ``box_mask_net``
(``sam_finetune.BoxMaskNet``), ``grounding_dino`` (transformers' Grounding-DINO) and ``mmdet`` (MMDetection configs).

**Precision**: Mask R-CNN's workloads are bf16 where the run trains in bf16 (``maskrcnn.resolved_precision``: its
``precision`` hyperparameter, "auto" by default, against the notebook's ``device`` parameter, ``params["device"]``;
"auto" there means this machine's: CUDA if it has one), fp32 otherwise. The keys of the model runs are resolved the
same way (``runs.Training.key``), so a plan for a GPU names the bf16 runs the GPU will train. SAM's image embeddings
(the COCO-WAN labels of 08's val images and of the weak-label runs' train images) are bf16 where SAM's precision
(08's ``annotator_precision`` setting, "auto" by default: ``plans.sam_precision`` for the val images' label sets,
``runs.TrainNoise.sam_precision`` for the runs, both ``wan.resolved_precision``) resolves to bf16 on that
``device``, where page 08 runs SAM, fp32 otherwise; Table 14's fine-tuning embeds in fp32 (``sam_finetune`` does
not autocast). The keys are resolved the same way (``plans.annotator_params``, ``runs.TrainNoise.key``: bf16 named,
fp32 as before the setting existed), so a plan for a GPU names the bf16 label sets and runs the GPU will make.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from benchmark_n import camus, camus_files, formats, maskrcnn, plans, quality, tiny_seg
from benchmark_n.runs import (
    CACHE_KIND,
    FINETUNE_KIND,
    DataRecipe,
    FineTuning,
    RunSpec,
    Training,
    TrainNoise,
    data_names,
    finetune_key,
    first_images,
    load_pair,
    run_key,
)
from shared.cache import code_fingerprint, params_key
from shared.cost import PlannedRun, Work, batched
from shared.errors import ConfigError, DataFormatError, DataNotFoundError, unknown_choice
from shared.paths import data_dir as default_data_dir
from shared.workloads import ProposedWorkload, planned_workload

PROBABILITY_BATCH = 16  # tiny_seg._probabilities: val predictions and logged losses in batches of 16
CAMUS_PREDICT_BATCH = 32  # camus.predict
SAM_INPUT = (3, 1024, 1024)  # SAM's image encoder input (the longest side resized to 1024, padded)
GROUNDING_DINO_INPUT = (3, 800, 1333)  # transformers' GroundingDinoProcessor: shortest side 800, longest <= 1333


# ------------------------------------------------------------------------------------------------ workloads
def workload(family: str, arch: str, phase: str, batch: int, shape: tuple, precision: str = "fp32", **options):
    """``shared.workloads.planned_workload``: a ``Workload``, or a ``ProposedWorkload`` for a kind not registered there
    (e.g. the rehearsal's Mask R-CNN with a ResNet-18 backbone)."""
    return planned_workload(family, arch, phase, batch, shape, precision, **options)


def sam_embeddings(images: int, what: str, precision: str = "fp32") -> Work:
    """SAM ViT-H image embeddings, one per image, in ``precision`` (fp32: segment_anything's own; bf16: the
    annotator's autocast of the image encoder, ``wan.encoder_autocast``)."""
    return Work(workload("vit_infer", "sam_vit_h", "infer", 1, SAM_INPUT, precision), steps=images, examples=images,
                what=what)



# ------------------------------------------------------------------------------------------------ data sizes
@dataclass(frozen=True)
class Sizes:
    """A recipe's train and val images and annotations, its categories, and the image shape (None: varies)."""

    train: int
    val: int
    train_annotations: int | None
    val_annotations: int | None
    categories: int
    image: tuple | None


def sizes(recipe: DataRecipe) -> Sizes:
    """COCO-shapes: the generated pair's real sizes (``runs.load_pair``, cached). A real dataset: the counts of the
    annotation files the runs would read (``runs.load_pair``'s folder under ``data_dir``) where both are there (a
    rehearsal's or a subset's sizes, not the release's), else the release's (``formats.SIZES``)."""
    if recipe.dataset == "shapes":
        train, val = load_pair(recipe)
        return Sizes(len(train.dataset["images"]), len(val.dataset["images"]), len(train.dataset["annotations"]),
                     len(val.dataset["annotations"]), len(train.dataset["categories"]),
                     (recipe.image_size, recipe.image_size))
    root = default_data_dir(recipe.data_dir) / (recipe.dataset_dir or recipe.dataset)
    try:
        paths = [formats.annotation_path(root, recipe.dataset, split) for split in ("train", "val")]
    except DataNotFoundError:
        train, val = (formats.split_size(recipe.dataset, split) for split in ("train", "val"))
        return Sizes(train.images, val.images, train.annotations, val.annotations, train.categories, None)
    (train_images, train_annotations, categories), (val_images, val_annotations, _) = (
        _counted(str(path), path.stat().st_mtime_ns, path.stat().st_size) for path in paths)
    return Sizes(train_images, val_images, train_annotations, val_annotations, categories, None)


@lru_cache(maxsize=32)
def _counted(path: str, mtime_ns: int, size: int) -> tuple[int, int, int]:
    """(images, annotations, categories) of a COCO-format annotation file (keyed by its path, time and size)."""
    try:
        data = json.loads(Path(path).read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise DataFormatError(f"{path} is not a COCO annotation file ({type(e).__name__}: {e}); replace it with the "
                              "release's file, or move it away to plan the release's sizes") from None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), list) for k in ("images", "annotations")):
        raise DataFormatError(f"{path} is not a COCO annotation file: it needs 'images' and 'annotations' lists")
    return len(data["images"]), len(data["annotations"]), len(data.get("categories") or [])


def fingerprints(recipe: DataRecipe) -> tuple | None:
    """None (``run_key`` fingerprints the data: the real key) for generated data; stand-ins naming a real dataset."""
    return None if recipe.dataset == "shapes" else data_names(recipe)


# ------------------------------------------------------------------------------------------------ model runs
def noise_work(train_noise: TrainNoise, cfg, recipe: DataRecipe, n: Sizes, device: str = "auto") -> list[Work]:
    """Drawing a run's training annotations (``TrainNoise.draw``) on the train split; SAM's embeddings in the
    precision it resolves to on ``device`` (``TrainNoise.sam_precision``, as the run's key names it)."""
    kind = train_noise.kind
    if kind == "clean":
        return []
    if kind in ("engine", "ablation", "class_noise"):
        return [Work(None, 0, examples=n.train, what=f"{train_noise.label} noise on the train annotations")]
    options = dict(train_noise.options)
    precision = train_noise.sam_precision(device) or "fp32"
    if kind == "weak":
        return annotator_work(options.get("annotator", "grabcut"), n.train, "train images", precision)
    # "text": the detector on the train images, then the annotator on its boxes
    detector_options = json.loads(options["detector_options"]) if "detector_options" in options else {}
    work = detector_work(train_noise.name, detector_options, recipe, n, images=n.train, split="train", fit=False)
    return work + annotator_work(options.get("annotator", "grabcut"), n.train, "train images, from its boxes",
                                 precision)


def annotator_work(annotator: str, images: int, what: str, precision: str = "fp32") -> list[Work]:
    """The weak annotator on ``images`` images: SAM's embedding per image in ``precision`` (resolved: fp32 or
    bf16), or GrabCut's CPU work."""
    if annotator == "sam":
        return [sam_embeddings(images, f"SAM ViT-H weak labels of the {what}", precision)]
    if annotator == "grabcut":
        return [Work(None, 0, examples=images, what=f"GrabCut / flood-fill weak labels of the {what}")]
    raise unknown_choice("annotator", annotator, ("grabcut", "sam"))


def detector_work(detector: str, options: dict, recipe: DataRecipe, n: Sizes, *, images: int, split: str,
                  fit: bool) -> list[Work]:
    """The text prompts' detector on ``images`` images: Grounding-DINO's forward per image, or the stand-in (the
    tiny U-Net; ``fit``: trained here on ``stand_in_train``, as many images as the recipe's train split; otherwise
    reused from the process, ``grounded._fitted_stand_in``)."""
    if detector == "grounding_dino":
        return [Work(workload("grounding_dino", "grounding-dino-base", "infer", 1, GROUNDING_DINO_INPUT),
                     steps=images, examples=images, what=f"Grounding-DINO boxes of the {split} images")]
    if detector != "stand_in":
        raise unknown_choice("text-prompt detector", detector, plans.TEXT_SETTINGS)
    hp = tiny_seg.check_hparams(dict(options.get("hparams") or {}))
    work = tiny_fit_work(hp, n.train, n, "stand-in text detector (tiny U-Net) trained on other COCO-shapes") \
        if fit else []
    return work + [tiny_infer_work(hp, images, n, f"stand-in detector on the {split} images")]


def tiny_shape(n: Sizes, channels: int = 3) -> tuple:
    if n.image is None:
        raise ConfigError("the tiny U-Net needs images of one size (COCO-shapes); a real dataset needs the "
                          "torchvision backend")
    return (channels, *n.image)


def tiny_workload(hp: dict, n: Sizes, phase: str, batch: int):
    return workload("tiny_unet", f"unet3_w{hp['width']}", phase, batch, tiny_shape(n), classes=3 + n.categories)


def tiny_fit_work(hp: dict, images: int, n: Sizes, what: str) -> list[Work]:
    """``tiny_seg.fit``: ``epochs`` passes of ``train_epoch`` over the images (ceil: no drop_last)."""
    steps = hp["epochs"] * math.ceil(images / hp["batch_size"])
    return [Work(tiny_workload(hp, n, "train", hp["batch_size"]), steps, examples=hp["epochs"] * images, what=what)]


def tiny_infer_work(hp: dict, images: int, n: Sizes, what: str, passes: int = 1) -> Work:
    """``passes`` no-grad passes over ``images`` in batches of at most ``PROBABILITY_BATCH``, priced by the images
    they hold (``shared.cost.Work.rows``: the last batch of a pass is partial)."""
    return batched(tiny_workload(hp, n, "infer", PROBABILITY_BATCH), images, times=passes, what=what)


def logged_epochs(hp: dict, last_epoch: int) -> int:
    """How many epochs log the per-instance losses: ``loss_epochs`` (empty: every epoch) up to the last epoch run."""
    logged = set(hp["loss_epochs"]) or set(range(1, hp["epochs"] + 1))
    return len({e for e in logged if 1 <= e <= min(last_epoch, hp["epochs"])})


def maskrcnn_iterations(hp: dict, train_images: int) -> tuple[int, int, int]:
    """(iterations, batches per epoch, last epoch reached) of ``maskrcnn.fit_predict``: ``min(epochs x per_epoch,
    max_iters)``; ``per_epoch`` = ``ceil(images / batch)`` (``epoch_batches`` for images of one orientation)."""
    per_epoch = math.ceil(train_images / hp["batch_size"])
    total = min(hp["epochs"] * per_epoch, hp["max_iters"] or math.inf)
    return int(total), per_epoch, math.ceil(total / per_epoch) if per_epoch else 0


def train_work(spec: RunSpec, training: Training, n: Sizes) -> list[Work]:
    """The backend's training, loss logging and val predictions (``Training.module().fit_predict``); Mask R-CNN's
    steps in the precision it resolves to on ``training.device``."""
    hparams = {**training.hparams, **({"loss": spec.loss} if spec.loss != "ce" else {})}
    if training.backend == "tiny":
        hp = tiny_seg.check_hparams(hparams)
        work = tiny_fit_work(hp, n.train, n, f"tiny U-Net, {hp['epochs']} epochs")
        if spec.log_losses:
            work.append(tiny_infer_work(hp, n.train, n, "per-instance losses of the training set",
                                        logged_epochs(hp, hp["epochs"])))
        return work + [tiny_infer_work(hp, n.val, n, "val predictions")]
    if training.backend == "torchvision":
        hp = maskrcnn.check_hparams(hparams)
        total, _, last = maskrcnn_iterations(hp, n.train)
        shape = (3, min(hp["min_size"], hp["max_size"]), max(hp["min_size"], hp["max_size"]))
        arch = {"resnet50": "maskrcnn_r50_fpn"}.get(hp["backbone"], f"maskrcnn_{hp['backbone']}_fpn")
        precision = maskrcnn.resolved_precision(hp, training.device)  # bf16 autocast on CUDA by default
        train = workload("maskrcnn", arch, "train", hp["batch_size"], shape, precision, num_classes=n.categories)
        infer = workload("maskrcnn", arch, "infer", hp["batch_size"], shape, precision, num_classes=n.categories,
                         detections=hp["detections_per_image"])
        work = [Work(train, total, examples=total * hp["batch_size"],
                     what=f"Mask R-CNN {hp['backbone']}-FPN, {total} iterations of batch {hp['batch_size']}")]
        if spec.log_losses:
            passes = logged_epochs(hp, last)
            losses = workload("maskrcnn", arch, "infer", hp["batch_size"], shape, precision, num_classes=n.categories,
                              own_boxes=1)
            work.append(Work(losses, passes * math.ceil(n.train / hp["batch_size"]), examples=passes * n.train,
                             what=f"per-instance losses of the training set after {passes} epoch(s)"))
        return work + [Work(infer, math.ceil(n.val / hp["batch_size"]), examples=n.val, what="val predictions")]
    if training.backend == "mmdet":
        hp = {**training.module().DEFAULTS, **hparams}
        epochs = hp["epochs"]
        steps = epochs * math.ceil(n.train / hp["images_per_gpu"]) if epochs else 0
        return [Work(workload("mmdet", hp["model"], "train", hp["images_per_gpu"], (3, 800, 1333)), steps,
                     examples=steps * hp["images_per_gpu"],
                     what="MMDetection" + ("" if epochs else ": the config's schedule (not counted)"))]
    raise unknown_choice("backend", training.backend, ("tiny", "torchvision", "mmdet"))


def model_runs(notebook: str, cfg, data_dir=None, device: str = "auto") -> list[PlannedRun]:
    """03-08: the page's runs (``plans.model_specs``), each once, keyed as ``run_grid`` caches it when the notebook
    runs with ``device``."""
    recipe = plans.recipe(cfg, data_dir)
    training = plans.training(cfg, recipe, device)
    n, prints = sizes(recipe), fingerprints(recipe)
    runs = []
    for spec in dict.fromkeys(plans.model_specs(notebook, cfg, data_dir)):
        work = noise_work(spec.noise, cfg, recipe, n, training.device) + train_work(spec, training, n)
        work.append(Work(None, 0, examples=n.val, what="mask, box and Boundary AP on the clean val annotations"))
        label = f"{spec.noise.label}, seed {spec.seed}" + (f", {spec.loss}" if spec.loss != "ce" else "")
        runs.append(PlannedRun(CACHE_KIND, run_key(recipe, spec, training, prints), label, tuple(work)))
    return runs


# ------------------------------------------------------------------------------------------------ 08's extras
def finetune_runs(cfg, data_dir, recipe: DataRecipe, n: Sizes) -> list[PlannedRun]:
    """Table 14's fine-tunings (``runs.finetune_grid``): clean and ``table14_tier`` train annotations x seed."""
    tuning = plans.tuning(cfg, data_dir)
    runs = []
    for name, train_noise in plans.finetune_noises(cfg).items():
        for seed in cfg.seeds:
            key = finetune_key(recipe, train_noise, seed, tuning, fingerprints(recipe))
            runs.append(PlannedRun(FINETUNE_KIND, key, f"fine-tune ({tuning.backend}) on {name}, seed {seed}",
                                   tuple(finetune_work(tuning, train_noise, seed, recipe, n))))
    return runs


def finetune_work(tuning: FineTuning, train_noise: TrainNoise, seed: int, recipe: DataRecipe, n: Sizes) -> list[Work]:
    """``runs.finetune_quality``: the noise on the first ``max_images`` train images, the fine-tuning, then the
    fine-tuned segmenter prompted with every clean val box."""
    from benchmark_n.sam_finetune import DEFAULTS, SAM_DEFAULTS

    images = n.train if tuning.max_images is None else min(tuning.max_images, n.train)
    work = [] if train_noise.kind == "clean" else [
        Work(None, 0, examples=images, what=f"{train_noise.label} noise on the fine-tuning images")]
    if tuning.backend == "sam":
        hp = {**SAM_DEFAULTS, **dict(tuning.hparams)}
        # one step per image with an instance (at most max_instances prompts): the frozen encoder's embedding, then
        # the mask decoder's forward and backward (small next to the ViT-H encoder; not counted apart); fp32, as
        # sam_finetune runs the encoder (it does not autocast), when fine-tuning and when predicting
        work.append(sam_embeddings(hp["epochs"] * images, f"SAM mask-decoder fine-tuning, {hp['epochs']} epoch(s)"))
        return work + [sam_embeddings(n.val, "the fine-tuned SAM on the clean val boxes")]
    hp = {**DEFAULTS, **dict(tuning.hparams)}
    instances, val_instances = tiny_instances(train_noise, seed, recipe, tuning, n)
    net = f"boxmask_w{hp['width']}"
    shape = (4, hp["size"], hp["size"])
    steps = hp["epochs"] * math.ceil(instances / hp["batch_size"])
    work.append(Work(workload("box_mask_net", net, "train", hp["batch_size"], shape), steps,
                     examples=hp["epochs"] * instances, what=f"box-prompted U-Net, {hp['epochs']} epochs"))
    return work + [Work(workload("box_mask_net", net, "infer", 1, shape), val_instances, examples=val_instances,
                        what="the fine-tuned model on every clean val box (one window per instance)")]


def tiny_instances(train_noise: TrainNoise, seed: int, recipe: DataRecipe, tuning: FineTuning,
                   n: Sizes) -> tuple[int, int]:
    """The tiny fine-tuning's examples (``sam_finetune.training_index``: non-crowd annotations with a mask, of the
    noisy first ``max_images`` train images) and the val instances it is prompted with; drawn for generated data,
    from the registry's annotation counts otherwise."""
    from benchmark_n.sam_finetune import training_index

    if recipe.dataset == "shapes":
        train, val = load_pair(recipe)
        if tuning.max_images is not None:
            train = replace(train, dataset=first_images(train.dataset, tuning.max_images))
        noisy = replace(train, dataset=train_noise.draw(train, seed))
        return tuple(sum(len(anns) for _, _, anns in training_index(data)) for data in (noisy, val))
    if n.train_annotations is None or n.val_annotations is None:
        raise ConfigError(f"the annotation counts of {recipe.dataset} are not recorded in benchmark_n.formats.SIZES")
    share = 1.0 if tuning.max_images is None else min(tuning.max_images, n.train) / n.train
    return round(n.train_annotations * share), n.val_annotations


def label_set_runs(cfg, data_dir, recipe: DataRecipe, n: Sizes, device: str = "auto") -> list[PlannedRun]:
    """08's label sets of the val images made at every execution: Table 4's prompts x seeds, Fig. 14's prompts on a
    few images, Table 14's zero-shot rows (``plans.weak_label_sets``) and the text prompts' labels per seed, keyed as
    the page logs them on ``device``; SAM's embeddings in the precision its ``annotator_precision`` setting resolves
    to on ``device`` (``plans.sam_precision``, as the keys name it; the page runs SAM on its device)."""
    precision = plans.sam_precision(cfg, device) or "fp32"
    runs = []
    for label_set in plans.weak_label_sets(cfg):
        images = min(label_set.get("n_images") or n.val, n.val)
        key = plans.logged_key(plans.WEAK_KIND, plans.weak_params(cfg, data_dir, recipe, **label_set, device=device))
        work = [] if label_set.get("source") is None else [
            Work(None, 0, examples=images, what=f"{cfg.table14_tier} noise on the val annotations (the prompts)")]
        work += annotator_work(cfg.annotator, images, "val images", precision)
        if "n_images" not in label_set:  # scored against the clean val annotations (Table 4, Table 14)
            work.append(Work(None, 0, examples=images, what="mask and Boundary AP of the weak labels"))
        source = "" if label_set.get("source") is None else ", prompts from the noisy boxes"
        runs.append(PlannedRun(plans.WEAK_KIND, key, f"{label_set['prompt']} labels of {images} val images, seed "
                                                     f"{label_set['seed']}{source}", tuple(work)))
    if cfg.get("text"):
        detector, options, _ = plans.text_setting(cfg, data_dir)
        for i, seed in enumerate(cfg.seeds):
            # the stand-in detector is trained once per process (grounded._fitted_stand_in): for the first seed
            work = detector_work(detector, options, recipe, n, images=n.val, split="val", fit=i == 0)
            work += annotator_work(cfg.annotator, n.val, "val images, from the detector's boxes", precision)
            work.append(Work(None, 0, examples=n.val, what="mask and Boundary AP of the text-prompted labels"))
            key = plans.logged_key(plans.TEXT_KIND, plans.text_params(cfg, data_dir, recipe, seed, device=device))
            runs.append(PlannedRun(plans.TEXT_KIND, key, f"text-prompted labels ({detector}), seed {seed}",
                                   tuple(work)))
    return runs


def coco_wan(cfg, data_dir=None, device: str = "auto") -> list[PlannedRun]:
    """08, in the page's order: the label sets (prompt_quality, figure), Table 14's fine-tunings, the model runs."""
    recipe = plans.recipe(cfg, data_dir)
    n = sizes(recipe)
    return (label_set_runs(cfg, data_dir, recipe, n, device) + finetune_runs(cfg, data_dir, recipe, n)
            + model_runs("08_coco_wan", cfg, data_dir, device))


# ------------------------------------------------------------------------------------------------ 01, 02, 09
def split_images(cfg, split: str | None = None) -> int:
    """The images of the split a notebook of 00-02 reads: the stand-in's ``n_images``, else ``formats.SIZES``."""
    if cfg.dataset == "shapes":
        return int(cfg.n_images)
    return formats.split_size(cfg.dataset, split or cfg.split).images


def data_token(cfg, data_dir=None):
    """What 01's cache keys name the annotations by: the generated dataset's ``quality.fingerprint`` (the real key),
    or the settings that name a real one (``plans.data_params``)."""
    if cfg.dataset == "shapes":
        from benchmark_n.sources import load_annotations

        return quality.fingerprint(load_annotations(cfg, data_dir).dataset)
    return plans.data_params(cfg, data_dir)


def annotation_quality(cfg, data_dir=None) -> list[PlannedRun]:
    """01: the clean baseline, then every variant (``plans.quality_variants``), as ``quality_table`` caches them."""
    data, images = data_token(cfg, data_dir), split_images(cfg)
    ratio = cfg.dilation_ratio
    clean = params_key(quality.CACHE_KIND, quality.clean_params(data, ratio), code_fingerprint(*quality.CLEAN_CODE))
    runs = [PlannedRun(quality.CACHE_KIND, clean, "clean annotations vs themselves",
                       (Work(None, 0, examples=images, what="mask and Boundary AP of the clean annotations"),))]
    code = code_fingerprint(*quality.VARIANT_CODE)
    for variant in plans.quality_variants(cfg):
        key = params_key(quality.CACHE_KIND, quality.variant_params(data, variant, ratio), code)
        label = f"{variant.name} {variant.tier}, seed {variant.seed if variant.random else '(any)'}"
        runs.append(PlannedRun(quality.CACHE_KIND, key, label, (
            Work(None, 0, examples=images, what="noise, then mask and Boundary AP against the clean annotations"),)))
    return runs


def benchmark_files(cfg, data_dir=None) -> list[PlannedRun]:
    """02: a file per engine x tier x seed (``plans.benchmark_files``)."""
    images = split_images(cfg, cfg.get("split", "val"))
    return [PlannedRun(plans.FILE_KIND, plans.logged_key(plans.FILE_KIND, plans.file_params(cfg, data_dir, *item)),
                       f"{item[0]} {item[1]}, seed {item[2]}",
                       (Work(None, 0, examples=images, what="the engine over the split, written as COCO JSON"),))
            for item in plans.benchmark_files(cfg)]


def camus_ef(cfg, data_dir=None) -> list[PlannedRun]:
    """09: per seed, a U-Net on the clean and one on the noisy training masks (``camus.clean_vs_noisy``: the
    patients split 3:1 by ``split_patients`` with the default split seed; every ED and ES frame a sample)."""
    patients = int(cfg.n_patients) if cfg.dataset == "synthetic" else camus_files.CAMUS_PATIENTS
    train, test = camus.split_patients(patients, camus.SMOKE["test_fraction"], 0)
    hp = camus.check_hparams(dict(cfg.get("hparams") or {}))
    size = int(cfg.size)
    frames, test_frames = 2 * len(train), 2 * len(test)
    net = f"unet3_w{hp['width']}"
    runs = []
    for seed in cfg.seeds:
        for name in camus.TRAINING:
            work = ([Work(None, 0, examples=len(train), what="contour noise on the training masks")]
                    if name == "noisy" else [])
            steps = hp["epochs"] * math.ceil(frames / hp["batch_size"])
            work += [Work(workload("tiny_unet", net, "train", hp["batch_size"], (1, size, size), classes=2), steps,
                          examples=hp["epochs"] * frames, what=f"CAMUS U-Net, {hp['epochs']} epochs"),
                     batched(workload("tiny_unet", net, "infer", CAMUS_PREDICT_BATCH, (1, size, size), classes=2),
                             test_frames, what="test predictions"),
                     Work(None, 0, examples=len(test), what="Dice, Hausdorff distance and EF of the test patients")]
            key = plans.logged_key(plans.CAMUS_KIND, plans.camus_params(cfg, data_dir, seed, name))
            runs.append(PlannedRun(plans.CAMUS_KIND, key, f"{name} masks, seed {seed}", tuple(work)))
    return runs


PLANNERS = {
    "00_noise_engine": lambda cfg, data_dir=None: [],  # no run with an identity (module docstring)
    "01_annotation_quality": annotation_quality,
    "02_benchmark_files": benchmark_files,
    **{nb: (lambda cfg, data_dir=None, device="auto", nb=nb: model_runs(nb, cfg, data_dir, device))
       for nb in ("03_train_eval", "04_noise_ablation", "05_class_noise", "06_lnl", "07_confidence")},
    "08_coco_wan": coco_wan,
    "09_camus_ef": camus_ef,
}


def plan(notebook: str, cfg, params: dict) -> list[PlannedRun]:
    """Every run ``notebook`` executes under its merged settings ``cfg`` and papermill ``params`` (data_dir; device,
    "auto" when absent, as the notebooks default: the model pages' Mask R-CNN precision and 08's SAM precision
    depend on it)."""
    if notebook not in PLANNERS:
        raise unknown_choice("Benchmark-N notebook", notebook, PLANNERS)
    if notebook in plans.MODEL_SPECS:
        return PLANNERS[notebook](cfg, params.get("data_dir"), device=params.get("device") or "auto")
    return PLANNERS[notebook](cfg, params.get("data_dir"))


__all__ = [
    "PLANNERS",
    "ProposedWorkload",
    "Sizes",
    "annotation_quality",
    "benchmark_files",
    "camus_ef",
    "finetune_runs",
    "label_set_runs",
    "logged_epochs",
    "maskrcnn_iterations",
    "model_runs",
    "plan",
    "sizes",
    "workload",
]
