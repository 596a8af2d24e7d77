"""Model-level runs of Benchmark-N: a segmenter trained on noisy train annotations, evaluated on the clean val set.

A run is a ``RunSpec``: what noise the training annotations get (``TrainNoise``: clean, an engine at a tier, one
ablation operation, class noise alone, COCO-WAN weak labels or Grounded-SAM's text-prompted labels), the seed (it
seeds the noise and the training, as in the paper's single-seed runs), the classification loss and whether the
per-instance losses are kept. The ``Training`` names the backend
(``BACKENDS``: the tiny U-Net of the smoke profile, torchvision's Mask R-CNN, MMDetection) and its
hyperparameters. A finished run holds its val detections, its training history, its per-instance losses when
asked, and its scores on the clean val annotations (mask, box and Boundary AP, each also class-agnostic, and the
mean confidence of the detections above 0.5); it is stored in the artifact cache keyed by the data, the run, the
training and the code, so notebooks that share runs (the clean model is every table's baseline) train it once.

    pair = load_pair(recipe)                              # clean train and val Annotations
    specs = [RunSpec(TrainNoise("engine", "legacy_v0", "high"), seed) for seed in (0, 1)]
    runs = run_grid(recipe, specs, Training("tiny", {"epochs": 12}))
    runs[0].scores["mask_AP"], runs[0].detections, runs[0].history

``run_grid(..., executor="slurm")`` trains the runs not cached yet as jobs (``shared.sweep.map_jobs``: local
processes or a Slurm job array); every job reads the data from the recipe itself, so the cache folder and
``data_dir`` must be ones the jobs can reach.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache, partial
from pathlib import Path

from benchmark_n import formats
from benchmark_n.grounded import DETECTORS
from benchmark_n.metrics import boundary_ap, coco_ap
from benchmark_n.noise import ABLATIONS, CLASS_MATRICES, ENGINES, ablate, canonical_tier, class_noise, noise_dataset
from benchmark_n.quality import fingerprint
from benchmark_n.shapes import generate_shapes, preset
from benchmark_n.sources import Annotations
from shared.cache import ArtifactCache, code_fingerprint, params_key
from shared.errors import ConfigError, unknown_choice
from shared.paths import data_dir as default_data_dir
from shared.progress import progress
from shared.sweep import map_jobs

CACHE_KIND = "benchmark-n-runs"
BACKENDS = {
    "tiny": ("benchmark_n.tiny_seg", "a 3-level U-Net (width 8) + connected components: the smoke profile's model"),
    "torchvision": ("benchmark_n.maskrcnn", "torchvision's Mask R-CNN R50-FPN with MMDetection's 1x schedule"),
    "mmdet": ("benchmark_n.mmdet_backend", "MMDetection's own configs (needs mmdet and mmcv installed)"),
}
NOISE_KINDS = {
    "clean": "the clean annotations",
    "engine": "a noise engine (benchmark_n.noise.ENGINES) at a tier",
    "ablation": "one operation of the ablation (benchmark_n.noise.ABLATIONS) at a tier",
    "class_noise": "class noise alone: name uniform (the paper's Sym) or superclass (Asym), at rate",
    "weak": "COCO-WAN weak labels at a tier of benchmark_n.wan.WAN_TIERS (easy / medium / hard = low / mid / high)",
    "text": "Grounded-SAM's text-prompted labels (benchmark_n.grounded): name the detector (stand_in, grounding_dino)",
}
TEXT_OPTIONS = ("annotator", "checkpoint", "precision", "score_threshold", "detector_options")
SCORE_KEYS = ("mask_AP", "mask_AP50", "mask_AP75", "mask_AP_S", "mask_AP_M", "mask_AP_L", "box_AP",
              "boundary_AP", "mask_AP_agnostic", "box_AP_agnostic", "boundary_AP_agnostic", "mean_confidence",
              "confident_share", "mean_score", "detections")


@dataclass(frozen=True)
class TrainNoise:
    """The noise of a run's training annotations (``NOISE_KINDS``); ``options`` go to the engine
    (``noise_dataset``, e.g. ``stale_box_area``), the weak annotator (``wan.weak_tier``: annotator, checkpoint and,
    for SAM, precision: ``wan.PRECISIONS``, "auto" when absent) or, for "text", to ``grounded.text_tier``
    (``TEXT_OPTIONS``; ``detector_options`` a dict, kept as sorted JSON so that the noise stays hashable). A "text"
    noise's tier is "text". The device SAM runs on is not an option (``draw``'s ``device``): the same noise on any
    device, keyed by what its precision resolves to there (``key``)."""

    kind: str = "clean"
    name: str = ""
    tier: str = ""
    rate: float = 0.0
    options: tuple = ()  # (name, value) pairs for the engine (e.g. stale_box_area) or the weak annotator

    def __post_init__(self):
        object.__setattr__(self, "options", tuple(sorted(dict(self.options).items())))
        valid = {"clean": None, "engine": ENGINES, "ablation": ABLATIONS, "class_noise": CLASS_MATRICES,
                 "weak": None, "text": DETECTORS}
        if self.kind not in valid:
            raise unknown_choice("training noise kind", self.kind, NOISE_KINDS)
        if valid[self.kind] is not None and self.name not in valid[self.kind]:
            raise unknown_choice(f"{self.kind} name", self.name, valid[self.kind])
        if self.kind in ("engine", "ablation", "weak"):
            object.__setattr__(self, "tier", canonical_tier(self.tier))
        if self.kind == "class_noise" and not 0.0 <= self.rate <= 1.0:
            raise ConfigError(f"class-noise rate must be in [0, 1], got {self.rate!r}")
        if self.kind == "text":
            options = dict(self.options)
            if set(options) - set(TEXT_OPTIONS):
                raise ConfigError(f"unknown text-prompt option(s) {sorted(set(options) - set(TEXT_OPTIONS))}; valid: "
                                  f"{', '.join(TEXT_OPTIONS)}")
            if not isinstance(options.get("detector_options", ""), str):
                options["detector_options"] = json.dumps(options["detector_options"], sort_keys=True)
            object.__setattr__(self, "options", tuple(sorted(options.items())))
            object.__setattr__(self, "tier", "text")

    @property
    def label(self) -> str:
        """How tables name it: "clean", "legacy_v0 high", "erosion high", "uniform 50 %", "weak easy", "text"."""
        if self.kind in ("clean", "text"):
            return self.kind
        if self.kind == "class_noise":
            return f"{self.name} {100 * self.rate:g} %"
        return f"{self.kind if self.kind == 'weak' else self.name} {self.tier}".strip()

    @property
    def sam(self) -> bool:
        """Whether SAM annotates this noise's training images (a "weak" or "text" noise with annotator "sam")."""
        return self.kind in ("weak", "text") and dict(self.options).get("annotator") == "sam"

    def sam_precision(self, device=None) -> str | None:
        """The precision SAM's image encoder runs in when ``draw`` runs on ``device`` (None: "auto", this machine's
        CUDA if it has one): its ``precision`` option ("auto" when absent) resolved by ``wan.resolved_precision``,
        "fp32" or "bf16"; None when SAM does not annotate."""
        if not self.sam:
            return None
        from benchmark_n.wan import resolved_precision

        return resolved_precision(dict(self.options).get("precision", "auto"), device)

    def pinned(self, device=None) -> "TrainNoise":
        """This noise with SAM's precision resolved against ``device`` ("fp32" or "bf16", ``sam_precision``), for a
        run drawn on another machine than the one that keys it (``runs.jobs_specs``): the same key, the same
        precision there. Itself when SAM does not annotate."""
        if not self.sam:
            return self
        return replace(self, options={**dict(self.options), "precision": self.sam_precision(device)})

    def key(self, device=None) -> dict:
        """What a run's result depends on: the noise's fields, with a SAM checkpoint and a Grounding-DINO folder
        named by what they hold (file name and size; folder name, config.json's digest and the weights' size), not by
        where they lie, and without the device and progress options (the same run anywhere). SAM's ``precision`` is
        what it resolves to on ``device`` (``sam_precision``; None: "auto"), named only when that is bf16, so that an
        fp32 SAM noise (and every GrabCut one) keeps the key it had before the option existed, as Mask R-CNN's
        precision does (``maskrcnn.key_hparams``)."""
        key = asdict(self)
        options = dict(self.options)
        if self.sam:
            precision = self.sam_precision(device)
            options.pop("precision", None)
            if precision != "fp32":
                options["precision"] = precision
        if options.get("checkpoint"):
            options["checkpoint"] = file_identity(options["checkpoint"])
        if "detector_options" in options:
            detector = {k: v for k, v in json.loads(options["detector_options"]).items()
                        if k not in ("device", "progress")}
            if detector.get("model_dir"):
                detector["model_dir"] = folder_identity(detector["model_dir"])
            options["detector_options"] = detector
        key["options"] = options
        return key

    def draw(self, train: Annotations, seed: int, recipe: "DataRecipe | None" = None, device=None) -> dict:
        """The training annotations (a COCO dict) of this noise for ``seed``; a "text" noise with the stand-in
        detector needs the ``recipe`` of ``train`` (the detector trains on other images of it). SAM runs on
        ``device`` (``wan.load_sam``'s: None or "auto" is CUDA where this machine has one; the run's
        ``Training.device`` in ``train_run``)."""
        if self.kind == "clean":
            return train.dataset
        if self.kind == "engine":
            return noise_dataset(train.dataset, self.name, self.tier, seed, **dict(self.options)).dataset
        if self.kind == "ablation":
            return ablate(train.dataset, self.name, self.tier, seed).dataset
        if self.kind == "class_noise":
            return class_noise(train.dataset, self.rate, self.name, seed).dataset
        if self.kind == "text":
            return self._text(train, seed, recipe, device)
        from benchmark_n.wan import weak_tier
        return weak_tier(train, self.tier, seed=seed, **self._annotator_options(device)).dataset

    def _annotator_options(self, device) -> dict:
        """The options, and for SAM the ``device`` it runs on (GrabCut has none)."""
        options = dict(self.options)
        return {**options, "device": device} if self.sam and device is not None else options

    def _text(self, train: Annotations, seed: int, recipe: "DataRecipe | None", device=None) -> dict:
        from benchmark_n.grounded import stand_in_train, text_tier

        options = self._annotator_options(device)
        detector_options = json.loads(options.pop("detector_options", "{}"))
        if self.name == "stand_in":
            if recipe is None:
                raise ConfigError("the stand-in text detector trains on other images of the run's data recipe: pass "
                                  "recipe to TrainNoise.draw")
            detector_options["train"] = stand_in_train(recipe)
        return text_tier(train, self.name, seed=seed, detector_options=detector_options, **options).dataset


def file_identity(path) -> dict:
    """A weights file as a cache key: its name and size in bytes (None when it is not there)."""
    path = Path(path).expanduser()
    return {"name": path.name, "bytes": path.stat().st_size if path.is_file() else None}


def folder_identity(path) -> dict:
    """A model folder as a cache key: its name, the SHA-256 of its config.json and the total size of its weight
    files (``*.safetensors``, ``*.bin``, ``*.pth``)."""
    path = Path(path).expanduser()
    config = path / "config.json"
    weights = [p for pattern in ("*.safetensors", "*.bin", "*.pth") for p in path.glob(pattern)]
    digest = hashlib.sha256(config.read_bytes()).hexdigest()[:16] if config.is_file() else None
    return {"name": path.name, "config": digest, "weights_bytes": sum(p.stat().st_size for p in weights)}


@dataclass(frozen=True)
class RunSpec:
    noise: TrainNoise
    seed: int = 0
    loss: str = "ce"  # the classification loss: "ce", or "sce" (Table 13)
    log_losses: bool = False  # keep the per-instance training losses (Figs. 8 and 13); only the runs shown need them


@dataclass(frozen=True)
class Training:
    """A backend and its hyperparameters (checked by the backend's ``check_hparams``)."""

    backend: str = "tiny"
    hparams: dict = field(default_factory=dict)
    device: str = "cpu"  # not in the key: a run is the same run on any device (up to CUDA's non-determinism); only
    # what it resolves a setting to is (Mask R-CNN's precision "auto": bf16 on CUDA, ``maskrcnn.key_hparams``)
    dilation_ratio: float = 0.02  # Boundary AP's band (Cheng et al.'s default)

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise unknown_choice("backend", self.backend, BACKENDS)
        if "loss" in self.hparams:
            raise ConfigError("the classification loss is set per run (RunSpec.loss: ce or sce), not in hparams")

    def module(self):
        return importlib.import_module(BACKENDS[self.backend][0])

    def key(self) -> dict:
        """What a run's result depends on: the backend, its checked hyperparameters (the backend's ``key_hparams``
        where it has one: settings resolved against ``device``), the weights file by what it holds, the Boundary AP
        band."""
        module = self.module()
        hparams = module.check_hparams(dict(self.hparams))
        if hasattr(module, "key_hparams"):
            hparams = module.key_hparams(hparams, self.device)
        if hparams.get("backbone_weights") not in (None, "imagenet"):
            hparams["backbone_weights"] = file_identity(hparams["backbone_weights"])
        return {"backend": self.backend, "hparams": hparams, "dilation_ratio": self.dilation_ratio}


@dataclass(frozen=True)
class DataRecipe:
    """Where a run's clean train and val annotations come from: ``dataset`` "shapes" (COCO-shapes generated from
    ``shapes_preset`` with ``n_train`` / ``n_val`` images, seeds ``shapes_seed`` / ``shapes_seed + 1``,
    ``image_size`` px square) or a layout of ``benchmark_n.formats`` read under ``data_dir/dataset_dir``."""

    dataset: str = "shapes"
    n_train: int = 128
    n_val: int = 40
    image_size: int = 96
    shapes_preset: str = "model"
    shapes_seed: int = 0
    dataset_dir: str = ""
    data_dir: str | None = None

    @classmethod
    def from_settings(cls, cfg, data_dir=None) -> "DataRecipe":
        names = {f for f in cls.__dataclass_fields__ if f != "data_dir"}
        values = {k: cfg[k] for k in names if k in cfg}
        return cls(**values, data_dir=None if data_dir is None else str(data_dir))


@lru_cache(maxsize=2)
def load_pair(recipe: DataRecipe) -> tuple[Annotations, Annotations]:
    """The clean (train, val) annotations of a recipe."""
    if recipe.dataset == "shapes":
        size = {"height": recipe.image_size, "width": recipe.image_size}
        parts = [generate_shapes(n, recipe.shapes_seed + k, **preset(recipe.shapes_preset, **size))
                 for k, n in enumerate((recipe.n_train, recipe.n_val))]
        return tuple(Annotations("shapes", f"COCO-shapes {split} ({len(p.dataset['images'])} images, "
                                 f"{recipe.image_size} px)", p.dataset, p.images, split=split)
                     for p, split in zip(parts, ("train", "val")))
    if recipe.dataset not in formats.LAYOUTS:
        raise unknown_choice("dataset", recipe.dataset, ["shapes", *formats.LAYOUTS])
    root = default_data_dir(recipe.data_dir) / (recipe.dataset_dir or recipe.dataset)
    return tuple(Annotations(recipe.dataset, f"{recipe.dataset} {split}", formats.load_split(root, recipe.dataset, split),
                             root=root, split=split) for split in ("train", "val"))


#: datasets scored by LVIS's federated rules (``benchmark_n.lvis_eval``) instead of COCO's
FEDERATED = ("lvis_v1",)


def evaluate(val: dict, detections: list[dict], dilation_ratio: float = 0.02, federated: bool = False) -> dict:
    """The ``SCORE_KEYS`` of detections against the clean val annotations: APs as fractions (AP_S/M/L NaN where val
    has no instance of that size; ``_agnostic``: class-agnostic, ``useCats = 0``), ``mean_confidence`` the mean
    score of the detections above 0.5 (Fig. 7b; NaN when none is), ``confident_share`` their share (%),
    ``mean_score`` the mean score of all, ``detections`` their number. ``federated`` (LVIS): mask, box and Boundary AP
    by LVIS's rules (``lvis_eval.lvis_ap``, 300 detections per image), the class-agnostic ones by COCO's (the
    official LVIS API has no class-agnostic mode)."""
    if federated:
        from benchmark_n.lvis_eval import lvis_ap

        mask = lvis_ap(val, detections, "segm")
        box, boundary = lvis_ap(val, detections, "bbox"), lvis_ap(val, detections, boundary=True,
                                                                   dilation_ratio=dilation_ratio)
    else:
        mask, box = coco_ap(val, detections, "segm"), coco_ap(val, detections, "bbox")
        boundary = boundary_ap(val, detections, dilation_ratio)
    scores = {f"mask_{k}": mask[k] for k in ("AP", "AP50", "AP75", "AP_S", "AP_M", "AP_L")}
    scores["box_AP"], scores["boundary_AP"] = box["AP"], boundary["AP"]
    scores["mask_AP_agnostic"] = coco_ap(val, detections, "segm", use_cats=False)["AP"]
    scores["box_AP_agnostic"] = coco_ap(val, detections, "bbox", use_cats=False)["AP"]
    scores["boundary_AP_agnostic"] = boundary_ap(val, detections, dilation_ratio, use_cats=False)["AP"]
    every = [d["score"] for d in detections]
    confident = [score for score in every if score > 0.5]
    scores["mean_confidence"] = sum(confident) / len(confident) if confident else float("nan")
    scores["confident_share"] = 100 * len(confident) / len(every) if every else float("nan")
    scores["mean_score"] = sum(every) / len(every) if every else float("nan")
    scores["detections"] = len(detections)
    return scores


def train_run(recipe: DataRecipe, spec: RunSpec, training: Training) -> dict:
    """Train one run and evaluate it on the clean val set; ``{"scores", "history", "detections",
    "instance_losses", "train_annotations"}``."""
    train, val = load_pair(recipe)
    noisy = replace(train, dataset=spec.noise.draw(train, spec.seed, recipe, training.device))
    hparams = {**training.hparams, **({"loss": spec.loss} if spec.loss != "ce" else {})}
    result = training.module().fit_predict(noisy, val, hparams, seed=spec.seed, device=training.device,
                                           log_losses=spec.log_losses)
    scores = evaluate(val.dataset, result["detections"], training.dilation_ratio, recipe.dataset in FEDERATED)
    return {"scores": scores, "history": result["history"],
            "detections": result["detections"], "instance_losses": result.get("instance_losses", []),
            "train_annotations": len(noisy.dataset["annotations"])}


@dataclass
class RunResult:
    spec: RunSpec
    scores: dict
    history: list
    detections: list
    instance_losses: list


#: the libraries a run's numbers depend on besides this project's code: their versions are part of its cache key, so
#: an upgrade (a new torch, a new pycocotools) trains and scores the runs again instead of reading older numbers. Every
#: run uses the first group; a backend, a SAM annotator or Grounding-DINO add theirs.
LIBRARIES = ("torch", "numpy", "pycocotools", "opencv-python-headless")
BACKEND_LIBRARIES = {"tiny": (), "torchvision": ("torchvision",), "mmdet": ("mmdet", "mmcv", "mmengine")}


def libraries(spec: "RunSpec", training: "Training") -> tuple[str, ...]:
    """The libraries ``spec`` trained by ``training`` depends on: ``LIBRARIES``, the backend's, segment-anything for
    a SAM annotator, transformers for Grounding-DINO."""
    options = dict(spec.noise.options)
    extra = (("segment-anything",) if options.get("annotator") == "sam" else ()) + \
        (("transformers",) if spec.noise.kind == "text" and spec.noise.name == "grounding_dino" else ())
    return LIBRARIES + BACKEND_LIBRARIES[training.backend] + extra


@lru_cache(maxsize=None)
def library_versions(names: tuple[str, ...] = LIBRARIES) -> dict[str, str | None]:
    """The installed version of each of ``names`` (None where one is not installed)."""
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


@lru_cache(maxsize=2)
def _fingerprints(recipe: DataRecipe) -> tuple[str, str]:
    """The train and val annotations' fingerprints (computed once per recipe: COCO's train JSON is large)."""
    return tuple(fingerprint(part.dataset) for part in load_pair(recipe))


def _params(recipe: DataRecipe, spec: RunSpec, training: Training, fingerprints: tuple | None = None) -> dict:
    """A run's cache parameters; ``fingerprints``: the (train, val) annotations' (default: computed from the data,
    ``_fingerprints``; a planner without the data passes stand-ins that name it, ``data_names``)."""
    train, val = fingerprints or _fingerprints(recipe)
    return {"train": train, "val": val,
            "recipe": {k: v for k, v in asdict(recipe).items() if k != "data_dir"},
            "spec": {**asdict(spec), "noise": spec.noise.key(training.device)}, "training": training.key(),
            "libraries": library_versions(libraries(spec, training))}


def _code(training: Training) -> list:
    return [train_run, training.module()]


def data_names(recipe: DataRecipe) -> tuple[dict, dict]:
    """Stand-ins for the (train, val) fingerprints that name the data instead of hashing it (the dataset, its
    folder and split), for planning runs on data that is not here: equal exactly when the recipe and data folder
    are."""
    root = None if recipe.dataset == "shapes" else str(default_data_dir(recipe.data_dir) /
                                                         (recipe.dataset_dir or recipe.dataset))
    return tuple({"dataset": recipe.dataset, "root": root, "split": split} for split in ("train", "val"))


@lru_cache(maxsize=None)
def _code_key(backend: str) -> str:
    """``code_fingerprint(*_code(training))`` of a backend, once per process (planning keys hundreds of runs)."""
    return code_fingerprint(*_code(Training(backend)))


def run_key(recipe: DataRecipe, spec: RunSpec, training: Training, fingerprints: tuple | None = None) -> str:
    """The cache key ``run_grid`` stores the run under (and ``shared.runlog`` logs it as); with ``fingerprints`` from
    ``data_names``, the planner's stand-in for it."""
    return params_key(CACHE_KIND, _params(recipe, spec, training, fingerprints), _code_key(training.backend))


def jobs_training(training: Training, executor=None) -> Training:
    """``training`` as ``run_grid``'s jobs run it: its settings that depend on the device (the backend's
    ``pin_hparams``: Mask R-CNN's precision "auto") resolved here, where the keys are looked up, so that a job on
    another machine (a GPU node under a CPU login node) trains and stores the run under the key looked up here (the
    key is unchanged). Warns when the jobs go to Slurm (``executor`` kind "slurm") and device "auto" resolves
    differently here than on a GPU node; local jobs run on this machine, where "auto" means the same."""
    pin = getattr(training.module(), "pin_hparams", None)
    if pin is None:
        return training
    if _remote(executor) and training.device in (None, "auto") and \
            training.key() != replace(training, device="cuda").key():
        # the key changes with the device only where "auto" is not CUDA here
        warnings.warn(f"device {training.device!r} is the CPU here: the jobs train the {training.backend} runs as "
                      "keyed here, in fp32 (precision auto) even on GPU nodes; set device cuda (or precision bf16) "
                      "to train them in bf16 there", stacklevel=3)
    return replace(training, hparams=pin(dict(training.hparams), training.device))


def jobs_specs(specs, device, executor=None) -> list[RunSpec]:
    """``specs`` as ``run_grid``'s jobs draw them on ``device`` (the training's): a SAM annotator's precision ("auto"
    by default; ``TrainNoise.pinned``) resolved here, where the keys are looked up, as ``jobs_training`` pins the
    backend's, so that a job on a GPU node submitted from a CPU login node labels the training images in the
    precision of the key looked up here (each key is unchanged). Warns as ``jobs_training`` does when the jobs go to
    Slurm and device "auto" resolves to fp32 here."""
    specs = list(specs)
    if _remote(executor) and device in (None, "auto") and any(
            s.noise.key(device) != s.noise.key("cuda") for s in specs):
        warnings.warn(f"device {device!r} is the CPU here: the jobs label the training images with SAM as keyed "
                      "here, in fp32 (annotator_precision auto) even on GPU nodes; set device cuda (or "
                      "annotator_precision bf16) to run SAM in bf16 there", stacklevel=3)
    return [replace(s, noise=s.noise.pinned(device)) for s in specs]


def _remote(executor) -> bool:
    """Whether ``executor`` (a kind, a mapping with ``kind``, or an object with ``.kind``: ``shared.sweep.map_jobs``'s
    setting) sends the jobs to Slurm, to machines other than this one."""
    if isinstance(executor, str):
        kind = executor
    elif isinstance(executor, Mapping):
        kind = executor.get("kind")
    else:
        kind = getattr(executor, "kind", None)
    return kind == "slurm"


def _cached_run(task: tuple, cache_root: str) -> None:
    """What a job of ``run_grid`` does: train the run unless cached."""
    recipe, spec, training = task
    ArtifactCache(cache_root).get_or_build(CACHE_KIND, _params(recipe, spec, training),
                                           partial(train_run, recipe, spec, training), code=_code(training), fmt="json")


def run_grid(recipe: DataRecipe, specs, training: Training, *, executor=None,
             cache: ArtifactCache | None = None) -> list[RunResult]:
    """Every run of ``specs`` (duplicates once), trained unless cached; ``executor`` as in ``shared.sweep.map_jobs``
    (None: here, one after the other)."""
    specs = list(dict.fromkeys(specs))
    cache = cache or ArtifactCache()
    if executor is not None:
        todo = [s for s in specs
                if cache.lookup(CACHE_KIND, _params(recipe, s, training), code=_code(training), fmt="json") is None]
        if todo:
            def key(task):
                return [run_key(*task)]

            pinned = jobs_training(training, executor)
            tasks = [(recipe, s, pinned) for s in jobs_specs(todo, training.device, executor)]
            map_jobs(partial(_cached_run, cache_root=str(cache.root)), tasks,
                     executor=executor, desc="Benchmark-N runs", folder=cache.root / CACHE_KIND / ".submitit",
                     units=key)
    results = []
    for spec in progress(specs, desc="Benchmark-N runs"):
        stored = cache.get_or_build(CACHE_KIND, _params(recipe, spec, training),
                                    partial(train_run, recipe, spec, training), code=_code(training), fmt="json")
        results.append(RunResult(spec, stored["scores"], stored["history"], stored["detections"],
                                 stored["instance_losses"]))
    return results


# ------------------------------------------------------------------------------------------------ Table 14: fine-tuning
FINETUNE_KIND = "benchmark-n-finetune"
FINETUNE_SETTINGS = ("backend", "hparams", "max_images")


@dataclass(frozen=True)
class FineTuning:
    """Table 14's fine-tuning (``benchmark_n.sam_finetune``): the backend (``FINETUNERS``: "tiny" offline, "sam"),
    its hyperparameters, the first ``max_images`` training images (None: all), the SAM ``checkpoint`` (None: the
    default ViT-H path) and the device (not in the key)."""

    backend: str = "tiny"
    hparams: tuple = ()
    max_images: int | None = None
    checkpoint: str | None = None
    device: str = "cpu"

    def __post_init__(self):
        from benchmark_n.sam_finetune import FINETUNERS

        object.__setattr__(self, "hparams", tuple(sorted(dict(self.hparams).items())))
        if self.backend not in FINETUNERS:
            raise unknown_choice("fine-tuning backend", self.backend, FINETUNERS)
        if self.max_images is not None and (not isinstance(self.max_images, int) or isinstance(self.max_images, bool)
                                            or self.max_images < 1):
            raise ConfigError(f"max_images must be a positive integer or None, got {self.max_images!r}")

    @classmethod
    def from_settings(cls, settings: dict | None, defaults: dict | None = None, *, checkpoint=None,
                      device: str = "cpu") -> "FineTuning":
        """A page's ``finetune`` setting ({backend, hparams, max_images}) over the profile's ``defaults``, key by key
        (an override of ``hparams`` alone keeps the profile's backend); the SAM ``checkpoint`` only for backend
        "sam"."""
        merged = {**(defaults or {}), **(settings or {})}
        unknown = set(merged) - set(FINETUNE_SETTINGS)
        if unknown:
            raise ConfigError(f"unknown finetune setting(s) {sorted(unknown)}; valid: {', '.join(FINETUNE_SETTINGS)} "
                              "(SAM's weights are the page's checkpoint setting)")
        backend = merged.get("backend", "tiny")
        return cls(backend, dict(merged.get("hparams") or {}), merged.get("max_images"),
                   checkpoint if backend == "sam" else None, device)

    def key(self) -> dict:
        """What the result depends on; the checkpoint as its file name and size (a replaced file is another key)."""
        from benchmark_n.sam_finetune import FINETUNERS

        weights = None
        if self.checkpoint is not None:
            path = Path(self.checkpoint).expanduser()
            weights = {"name": path.name, "bytes": path.stat().st_size if path.is_file() else None}
        return {"backend": self.backend, "hparams": {**FINETUNERS[self.backend].defaults, **dict(self.hparams)},
                "max_images": self.max_images, "checkpoint": weights}


def first_images(dataset: dict, n: int) -> dict:
    """``dataset`` cut to its first ``n`` images (in ``images`` order) and their annotations."""
    images = dataset["images"][:n]
    kept = {im["id"] for im in images}
    return {**dataset, "images": images, "annotations": [a for a in dataset["annotations"] if a["image_id"] in kept]}


def finetune_quality(recipe: DataRecipe, noise: TrainNoise, seed: int, tuning: FineTuning) -> dict:
    """Fine-tune a box-prompted segmenter on the train split with ``noise`` and score the masks it draws from the
    clean val boxes against the clean val masks (``wan.prompt_quality``'s columns)."""
    from benchmark_n.sam_finetune import finetune
    from benchmark_n.wan import prompt_quality

    train, val = load_pair(recipe)
    if tuning.max_images is not None:  # cut first: the engines draw each annotation's noise from its own stream
        train = replace(train, dataset=first_images(train.dataset, tuning.max_images))
    tool = finetune(replace(train, dataset=noise.draw(train, seed)), tuning.backend, dict(tuning.hparams), seed,
                    checkpoint=tuning.checkpoint, device=tuning.device)
    return json.loads(prompt_quality(val, ["box"], tool, [seed]).iloc[0].to_json())


def finetune_params(recipe: DataRecipe, noise: TrainNoise, seed: int, tuning: FineTuning,
                    fingerprints: tuple | None = None) -> dict:
    """A fine-tuning run's cache parameters (``fingerprints``: as ``_params``)."""
    train, val = fingerprints or _fingerprints(recipe)
    return {"train": train, "val": val, "recipe": {k: v for k, v in asdict(recipe).items() if k != "data_dir"},
            "noise": noise.key(), "seed": seed, "tuning": tuning.key(),
            "libraries": library_versions(LIBRARIES + (("segment-anything",) if tuning.backend == "sam" else ()))}


def finetune_code() -> list:
    from benchmark_n import sam_finetune, wan

    return [finetune_quality, sam_finetune, wan]


def finetune_key(recipe: DataRecipe, noise: TrainNoise, seed: int, tuning: FineTuning,
                 fingerprints: tuple | None = None) -> str:
    """The cache key of a fine-tuning run (``finetune_grid``'s); ``fingerprints`` as ``run_key``."""
    return params_key(FINETUNE_KIND, finetune_params(recipe, noise, seed, tuning, fingerprints), _finetune_code_key())


@lru_cache(maxsize=1)
def _finetune_code_key() -> str:
    return code_fingerprint(*finetune_code())


def finetune_grid(recipe: DataRecipe, noises: dict, seeds, tuning: FineTuning,
                  cache: ArtifactCache | None = None) -> list[dict]:
    """``finetune_quality`` for every (name, ``TrainNoise``) of ``noises`` and seed, each cached; one record per
    run: ``annotations`` (the name), seed and the quality columns."""
    cache = cache or ArtifactCache()
    records = []
    for (name, noise), seed in progress([(item, s) for item in noises.items() for s in seeds], desc="fine-tuning"):
        stored = cache.get_or_build(FINETUNE_KIND, finetune_params(recipe, noise, seed, tuning),
                                    partial(finetune_quality, recipe, noise, seed, tuning), code=finetune_code(),
                                    fmt="json")
        records.append({"annotations": name, **stored})
    return records


__all__ = ["CACHE_KIND", "BACKENDS", "NOISE_KINDS", "TEXT_OPTIONS", "SCORE_KEYS", "FEDERATED", "LIBRARIES",
           "BACKEND_LIBRARIES", "libraries", "library_versions", "file_identity", "folder_identity", "TrainNoise",
           "RunSpec", "Training", "DataRecipe", "load_pair", "evaluate", "train_run", "RunResult", "run_grid",
           "data_names", "run_key", "jobs_training", "jobs_specs", "FINETUNE_KIND", "FINETUNE_SETTINGS", "FineTuning",
           "first_images",
           "finetune_quality", "finetune_params", "finetune_key", "finetune_grid"]
