"""Downstream learning on CILN labels (Table II, Table III, Fig. 8; official ``code/downstream/cifar10``).

A *scenario* is a training set: the benchmark rows (NLT) with hard labels drawn one voter per row, and
either the clean images (``clean-img``) or the corrupted ones (``noisy-img``); or PL-IDN's labels (one of
its raters per image; the release or its stand-in, see ``ciln.plidn``) on clean images. Every scenario is
evaluated on the clean test split.

    scenarios = cifar_scenarios(bench, inputs, [("frost", 1)], raters={"L": votes_L},
                                val=ValidationRows(nlv_bench, nlv_inputs, {"L": nlv_votes_L}))
    record = run(scenarios[0], "coteaching", cfg, seed=0)   # cached; accuracies by selection rule

Accuracies are reported under three selection rules: the best epoch on the test split (``best_test``, the
paper's), the last epoch (``last``) and the epoch with the best accuracy on the scenario's *noisy* NLV
labels (``val_selected``: what a practitioner can do; NLV rows get labels the same way as the training rows).

Label draws follow the official code: for CILN-S/-C one fixed draw per setting, seeded with
``int(sha256(f"v4__{corruption}_sev{severity}")[:8], 16) % 2**31`` (the same draw for both image sources;
CILN-C is its clean-start subset); PL-IDN draws one rater per image seeded by the tier's name.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ciln.benchmark import Benchmark
from ciln.corruptions import corrupt
from ciln.plidn import labelled_rows
from ciln.splits import SPLIT_NAMES
from ciln.voters import data_fingerprint
from shared.cache import ArtifactCache
from shared.errors import ConfigError
from shared.methods import TrainSetup, make_method
from shared.models import build_model
from shared.training import as_tensor, random_crop_flip


def label_draw_seed(corruption: str, severity: int) -> int:
    """The official per-setting seed of the hard-label draw."""
    return int(hashlib.sha256(f"v4__{corruption}_sev{severity}".encode()).hexdigest()[:8], 16) % 2**31


@dataclass
class Scenario:
    name: str  # e.g. "CILN-S contrast (5) noisy-img" or "PL-IDN-H"
    benchmark: str  # "CILN-S", "CILN-C" or "PL-IDN"
    setting: str  # "contrast (5)" or the tier, "H"
    image_source: str  # "clean" or "noisy"
    images: np.ndarray  # (n, H, W[, C]) uint8 training inputs
    labels: np.ndarray  # (n,) hard training labels
    clean_labels: np.ndarray  # (n,) true labels of the same rows
    rows: np.ndarray  # (n,) positions of these rows among the benchmark's rows
    val: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # NLV (images, noisy labels, clean labels)

    @property
    def noise_rate(self) -> float:
        return float(np.mean(self.labels != self.clean_labels))

    @property
    def table2_key(self) -> tuple[str, str, int | str]:
        """(variant, corruption, severity) as in ``ciln/reported/table2.csv``: ("S", "contrast", 5), ("PL-IDN", "plidn_H", "")."""
        if self.benchmark == "PL-IDN":
            return "PL-IDN", f"plidn_{self.setting}", ""
        corruption, severity = self.setting.rstrip(")").split(" (")
        return self.benchmark.split("-")[-1], corruption, int(severity)


@dataclass
class ValidationRows:
    """The NLV rows that give every scenario a noisy validation set: their benchmark (voter outputs on the
    ``nlv`` split), clean images (n_val, H, W, C) and PL-IDN votes per tier (n_val, R; -1 = not labelled)."""

    bench: Benchmark
    images: np.ndarray
    raters: dict[str, np.ndarray] = field(default_factory=dict)


def cifar_scenarios(bench: Benchmark, clean_images: np.ndarray, settings, *, image_sources=("clean", "noisy"),
                    clean_start=(), raters: dict[str, np.ndarray] | None = None, master_seed: int = 0,
                    max_rows: int | None = None, val: ValidationRows | None = None) -> list[Scenario]:
    """Scenarios for the CILN ``settings`` (list of (corruption, severity)), their clean-start versions for the
    settings in ``clean_start``, and PL-IDN's ``raters`` (tier -> votes (n_rows, R) on the same rows; a PL-IDN
    scenario trains on the rows without -1, i.e. the rows in the release: 19,987 of NLT's 22,500 in the paper).

    ``max_rows`` trains on a fixed random subset of the benchmark rows (seed 0; labels are drawn on all rows
    first, so a row's label does not depend on the subset). With ``val`` every scenario also gets the NLV rows
    labelled the same way (its own draw), on clean or corrupted images like its training rows.
    """
    if len(clean_images) != len(bench.y):
        raise ConfigError(f"{len(clean_images)} images for a benchmark of {len(bench.y)} rows")
    if val is not None and (val.bench.split != "nlv" or len(val.images) != len(val.bench.y)):
        raise ConfigError("val needs an 'nlv' benchmark and its clean images, one per row")
    scenarios = _all_scenarios(bench, clean_images, settings, image_sources, clean_start, raters or {}, master_seed)
    if val is not None:
        validation = _all_scenarios(val.bench, val.images, settings, image_sources, clean_start, val.raters, master_seed,
                                    draw="nlv")
        by_name = {v.name: v for v in validation}
        for s in scenarios:
            v = by_name[s.name]
            s.val = (v.images, v.labels, v.clean_labels)
    if max_rows is not None and max_rows < len(bench.y):
        keep = np.random.default_rng(0).choice(len(bench.y), max_rows, replace=False)
        scenarios = [Scenario(s.name, s.benchmark, s.setting, s.image_source, s.images[take], s.labels[take],
                              s.clean_labels[take], s.rows[take], s.val)
                     for s in scenarios for take in [np.flatnonzero(np.isin(s.rows, keep))]]
    empty = [s.name for s in scenarios if len(s.rows) == 0 or (s.val is not None and len(s.val[1]) == 0)]
    if empty:
        raise ConfigError(
            f"scenario(s) {', '.join(empty)} have no rows: a clean-start (CILN-C) scenario keeps only the rows every "
            "voter classifies correctly, and with these voters (or max_rows) none is left. Train the voters longer, "
            "use more rows, or drop the setting from clean_start_settings.")
    return scenarios


@dataclass(frozen=True)
class ScenarioSpec:
    """What a scenario is, before its data: its name and parts (``cifar_scenarios`` builds one ``Scenario`` per
    spec, in this order; ``ciln/cost.py`` plans the runs from the specs alone)."""

    name: str
    benchmark: str  # "CILN-S", "CILN-C" or "PL-IDN"
    setting: str  # "contrast (5)" or the tier
    image_source: str  # "clean" or "noisy"
    corruption: str | None = None
    severity: int | None = None
    tier: str | None = None


def scenario_specs(settings, image_sources=("clean", "noisy"), clean_start=(), tiers=()) -> list[ScenarioSpec]:
    """The scenarios of ``cifar_scenarios`` for these arguments (``tiers``: the PL-IDN tiers of ``raters``), in its
    order: per setting CILN-S on each image source, then CILN-C where the setting is in ``clean_start``; then PL-IDN
    (clean images) per tier."""
    clean_start = [list(s) for s in clean_start]
    out = []
    for corruption, severity in settings:
        setting = f"{corruption} ({severity})"
        for benchmark in ("CILN-S", "CILN-C"):
            if benchmark == "CILN-C" and [corruption, severity] not in clean_start:
                continue
            out += [ScenarioSpec(f"{benchmark} {setting} {source}-img", benchmark, setting, source, corruption, severity)
                    for source in image_sources]
    return out + [ScenarioSpec(f"PL-IDN-{tier}", "PL-IDN", tier, "clean", tier=tier) for tier in tiers]


def _draw(seed: int, draw: str, n_rows: int, n_votes: int) -> np.ndarray:
    """Which vote labels each row: the official draw for the training rows, an independent one for NLV."""
    rng = np.random.default_rng(seed if draw == "nlt" else [seed, 1])
    return rng.integers(0, n_votes, n_rows)


def _all_scenarios(bench, clean_images, settings, image_sources, clean_start, raters, master_seed,
                   draw: str = "nlt") -> list[Scenario]:
    mask = bench.clean_start_mask()
    for tier, votes in raters.items():
        if len(votes) != len(bench.y):
            raise ConfigError(f"rater votes for tier {tier} cover {len(votes)} rows, not {len(bench.y)}")
    labels, noisy = {}, {}  # per setting: the label draw, the corrupted images (made once, for the first noisy-img)
    out = []
    for spec in scenario_specs(settings, image_sources, clean_start, raters):
        if spec.benchmark == "PL-IDN":
            votes = raters[spec.tier]
            seed = int(hashlib.sha256(f"plidn__{spec.tier}".encode()).hexdigest()[:8], 16)
            pick = _draw(seed, draw, len(votes), votes.shape[1])
            rows = np.flatnonzero(labelled_rows(votes))  # -1 rows are absent from the release
            out.append(Scenario(spec.name, spec.benchmark, spec.setting, spec.image_source, clean_images[rows],
                                votes[rows, pick[rows]], bench.y[rows], rows))
            continue
        corruption, severity = spec.corruption, spec.severity
        if spec.setting not in labels:
            votes = bench.votes((corruption, severity))
            pick = _draw(label_draw_seed(corruption, severity), draw, len(votes), votes.shape[1])
            labels[spec.setting] = votes[np.arange(len(votes)), pick]
        if spec.image_source == "noisy" and spec.setting not in noisy:
            noisy[spec.setting] = corrupt(bench.dataset, clean_images, corruption, severity,
                                          split=SPLIT_NAMES[bench.split], master_seed=master_seed,
                                          options=bench.corruption_options.get(corruption))
        images = clean_images if spec.image_source == "clean" else noisy[spec.setting]
        rows = np.arange(len(bench.y)) if spec.benchmark == "CILN-S" else np.flatnonzero(mask)
        out.append(Scenario(spec.name, spec.benchmark, spec.setting, spec.image_source, images[rows],
                            labels[spec.setting][rows], bench.y[rows], rows))
    return out


def symmetric_control(scenario: Scenario, clean_images: np.ndarray, num_classes: int, seed: int = 0) -> Scenario:
    """The scenario's rows on clean images with symmetric noise at its noise rate (a rate-matched control; no NLV).

    ``clean_images`` are the benchmark's clean inputs (all rows); the scenario's rows are taken from them.
    """
    from shared.noise import make_noisy_labels

    labels = make_noisy_labels("symmetric", scenario.clean_labels, num_classes, scenario.noise_rate, seed=seed, exact=True)
    name = f"symmetric {scenario.noise_rate:.0%} (rate-matched to {scenario.setting})"
    return Scenario(name, "symmetric", scenario.setting, "clean", clean_images[scenario.rows], labels,
                    scenario.clean_labels, scenario.rows)


def _setup(cfg, seed: int, device) -> TrainSetup:
    pad = cfg.train.get("crop_pad", 4)
    flip = cfg.train.get("flip", True)
    return TrainSetup(
        epochs=cfg.train["epochs"], batch_size=cfg.train["batch_size"], lr=cfg.train["lr"], optimizer="sgd",
        weight_decay=cfg.train["weight_decay"], momentum=0.9, cosine=True, device=device, seed=seed,
        augment=(lambda batch, g: random_crop_flip(batch, g, pad=pad, flip=flip)) if pad else None,
        log_losses_at=tuple(cfg.train.get("log_losses_at", ())), amp=bool(cfg.train.get("amp", True)),
    )


def method_hparams(method: str, cfg, scenario: Scenario, variant: str | None = None) -> dict:
    """The method's hyperparameters for a scenario; Co-Teaching is told the true noise rate (CILN's oracle)."""
    hp = dict(cfg.methods.get(method, {}))
    lr = hp.pop("lr", cfg.train["lr"])
    if method == "coteaching":
        hp["forget_rate"] = scenario.noise_rate
    if method == "dividemix" and variant is not None:
        hp["variant"] = variant
    return {"lr": lr, **hp}


def run_params(scenario, method: str, cfg, *, seed: int, variant: str | None, data, test, val) -> dict:
    """The cache parameters of one ``ciln-downstream`` run: the scenario's name, the method, its hyperparameters
    (``method_hparams``; the learning rate goes into ``train``), ``cfg.train``, the seed and the fingerprints of the
    training rows (``data``), the test split and the noisy NLV rows (``val``, None without)."""
    hp = method_hparams(method, cfg, scenario, variant)
    lr = hp.pop("lr")
    return {"scenario": scenario.name, "method": method, "hparams": hp, "train": dict(cfg.train, lr=lr), "seed": seed,
            "data": data, "test": test, "val": val}


def run(scenario: Scenario, method: str, cfg, *, seed: int, test: tuple[np.ndarray, np.ndarray], variant: str | None = None,
        device="auto", cache: ArtifactCache | None = None) -> dict:
    """Train ``method`` on ``scenario`` (cached) and return its history, per-sample losses and extras.

    ``cfg.train`` holds arch, width, epochs, batch_size, lr, weight_decay, crop_pad, flip, log_losses_at, and
    optionally ``amp`` (default true: fp16 mixed precision on CUDA for every learner, ``TrainSetup.amp``; false: fp32
    throughout. The spec, Sec. 3.8, does not say which precision the official downstream code trains in; its voters
    use AMP fp16 on CUDA, Sec. 3.4. Set only when false, so the cache keys of the default runs are unchanged);
    ``cfg.methods`` per-method hyperparameters (may override lr).
    """
    params = run_params(scenario, method, cfg, seed=seed, variant=variant,
                        data=data_fingerprint(scenario.images, scenario.labels), test=data_fingerprint(*test),
                        val=data_fingerprint(*scenario.val[:2]) if scenario.val is not None else None)
    hp, lr = params["hparams"], params["train"]["lr"]

    def build():
        setup = _setup(cfg, seed, device)
        setup.lr = lr
        X = as_tensor(scenario.images)
        arch = cfg.train["arch"]
        kwargs = {"width": cfg.train["width"]} if arch == "tiny_cnn" else {}
        learner = make_method(method, lambda: build_model(arch, tuple(X.shape[1:]), 10, **kwargs), 10, setup,
                              **(dict(hp, clean_labels=scenario.clean_labels) if method != "erm" else hp))
        eval_sets = {"test": (as_tensor(test[0]), test[1])}
        if scenario.val is not None:
            eval_sets["val"] = (as_tensor(scenario.val[0]), scenario.val[1])
        result = learner.fit(X, scenario.labels, eval_sets=eval_sets, desc=f"{method} {scenario.name}")
        arrays = {f"history_{c}": result.history[c].to_numpy() for c in result.history.columns}
        arrays.update({f"loss_epoch_{e}": v for e, v in result.losses.items()})
        arrays.update({k: v for k, v in result.extras.items()})
        return arrays

    cache = cache or ArtifactCache()
    arrays = cache.get_or_build("ciln-downstream", params, build, code=[run])
    history = {k[len("history_"):]: v for k, v in arrays.items() if k.startswith("history_")}
    losses = {int(k[len("loss_epoch_"):]): v for k, v in arrays.items() if k.startswith("loss_epoch_")}
    test_acc = history["test_acc"]
    val_selected = float(test_acc[int(np.argmax(history["val_acc"]))]) if "val_acc" in history else float("nan")
    return {"scenario": scenario.name, "benchmark": scenario.benchmark, "setting": scenario.setting,
            "image_source": scenario.image_source, "method": method if variant is None else f"{method} ({variant})",
            "seed": seed, "noise_rate": scenario.noise_rate, "best_test": float(test_acc.max()),
            "last": float(test_acc[-1]), "val_selected": val_selected, "history": history, "losses": losses,
            "clean_probability": arrays.get("clean_probability")}


def validation_rows(cfg, dataset, *, data_dir=None, device="auto") -> ValidationRows:
    """The CIFAR benchmark's NLV rows for ``cifar_scenarios(val=...)``: voter outputs on the ``nlv`` split (every
    corruption setting of ``cfg``), their clean images, and PL-IDN's votes on them (``cfg.plidn``)."""
    from ciln.benchmark import load_benchmarks, split_rows
    from ciln.plidn import plidn_votes

    bench = load_benchmarks(cfg, names=["CIFAR10"], split="nlv", data_dir=data_dir, device=device)["CIFAR10"]
    images, _ = split_rows(dataset, "nlv")
    return ValidationRows(bench, images, plidn_votes(cfg, dataset, items="nlv", data_dir=data_dir))
