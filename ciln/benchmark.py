"""Algorithm 1: CILN benchmark generation.

For a dataset, a voter pool and corruption settings tau = (c, l): split the training pool (Gu-style),
train the voters on CLT, corrupt the NLT rows with each setting and record every voter's softmax on
every corrupted row. The result keeps the per-voter outputs, so every aggregate the paper uses can be
derived: vote shares (the official code's metrics), mean softmax (the paper's Eq. 1), clean-start masks
and hard labels sampled one voter per row (the PL-IDN protocol).

    bench = generate_benchmark("digits32rgb", pool=["tiny_cnn", "logreg_pca", "mlp_pca", "rf_pca"],
                               corruptions="all", severities=(1, 3, 5))
    bench.noise_rate(("fog", 3))           # mean per-voter error on the NLT rows
    bench.vote_shares(("fog", 3))          # (n, K)

Each setting's voter outputs are cached by dataset, split, pool, setting and seed (``votes_params``); so are the
voters' outputs on the clean test split, from which every benchmark reports its voters' accuracy. The settings of a
benchmark come from ``benchmark_settings``, which ``ciln/cost.py`` also calls to plan the runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ciln import measures
from ciln.corruptions import CORRUPTIONS, check_options, corrupt, domain_of, get_corruption
from ciln.splits import SPLIT_NAMES, gu_five_way_split
from ciln.voters import Voter, data_fingerprint, parse_pool, train_voter
from shared.cache import ArtifactCache
from shared.datasets import Dataset, load_dataset
from shared.errors import ConfigError
from shared.progress import progress

Setting = tuple[str, int]

#: (rows of the train pool, rows of the test split, shape of one input: (H, W) or (H, W, C) uint8 images, None for
#: Adult's 13-column tables) of every dataset the profiles name (``ciln.corruptions.DATASET_DOMAIN``): the official
#: releases (CIFAR-10 50,000 + 10,000; MNIST 60,000 + 10,000; Adult's complete-case rows of adult.data and adult.test,
#: as ``shared.datasets.real.load_adult`` keeps them) and the offline stand-ins (80/20 holdouts of 5,000 MNIST
#: digits, 6,000 Adult-like rows). ``ciln/cost.py`` plans the runs from these sizes when the data is absent.
DATASET_SIZES = {
    "cifar10": (50_000, 10_000, (32, 32, 3)), "mnist": (60_000, 10_000, (28, 28)), "adult": (30_162, 15_060, None),
    "mnist32rgb": (4_000, 1_000, (32, 32, 3)), "mnist5k": (4_000, 1_000, (28, 28)), "adult_like": (4_800, 1_200, None),
}


@dataclass
class Benchmark:
    """Voter outputs (M voters x n rows x K classes) on clean and corrupted rows of one split."""

    dataset: str
    domain: str
    classes: tuple[str, ...]
    split: str  # "nlt", "nlv" or "test"
    voters: list[str]
    y: np.ndarray  # (n,) true labels
    clean_probs: np.ndarray | None  # (M, n, K); None when read from a release without clean outputs
    probs: dict[Setting, np.ndarray] = field(default_factory=dict)  # setting -> (M, n, K)
    voter_accuracy: dict[str, float] = field(default_factory=dict)  # clean accuracy on the official test split
    split_sizes: dict[str, int] = field(default_factory=dict)
    source: str = ""
    corruption_options: dict = field(default_factory=dict)  # corruption -> operator options used (see corrupt)

    @property
    def settings(self) -> list[Setting]:
        return list(self.probs)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def votes(self, setting: Setting | None = None) -> np.ndarray:
        """Each voter's argmax (n, M); ``None`` is the clean input."""
        if setting is None and self.clean_probs is None:
            raise ConfigError("this benchmark has no voter outputs on clean inputs (the authors' release does not ship "
                              "them), so clean-start (CILN-C) and clean noise rates are unavailable")
        probs = self.clean_probs if setting is None else self.probs[setting]
        return probs.argmax(axis=2).T

    def vote_shares(self, setting: Setting | None = None, mask=None) -> np.ndarray:
        """Share of voters choosing each class (n, K): the soft label all of the paper's metrics use."""
        shares = measures.vote_shares(self.votes(setting), self.num_classes)
        return shares if mask is None else shares[mask]

    def mean_softmax(self, setting: Setting | None = None) -> np.ndarray:
        """The paper's Eq. (1): the average of the voters' softmax vectors (n, K)."""
        return (self.clean_probs if setting is None else self.probs[setting]).mean(axis=0)

    def clean_start_mask(self) -> np.ndarray:
        """Rows every voter classifies correctly before corruption (CILN-C)."""
        return (self.votes(None) == self.y[:, None]).all(axis=1)

    def noise_rate(self, setting: Setting | None = None, clean_start: bool = False) -> float:
        """delta = mean over rows of (1 - vote share of the true class) = mean per-voter error."""
        mask = self.clean_start_mask() if clean_start else np.ones(len(self.y), bool)
        return measures.noise_rate(self.vote_shares(setting)[mask], self.y[mask])

    def sampled_labels(self, setting: Setting | None, seed: int = 0) -> np.ndarray:
        """Hard labels by the PL-IDN protocol: one voter per row, uniformly (``default_rng(seed).integers``)."""
        votes = self.votes(setting)
        pick = np.random.default_rng(seed).integers(0, votes.shape[1], len(votes))
        return votes[np.arange(len(votes)), pick]

    def label_shares(self, setting: Setting | None, seed: int = 0) -> np.ndarray:
        """Share of rows per class (K,): true labels for ``None`` (clean), else sampled labels."""
        labels = self.y if setting is None else self.sampled_labels(setting, seed)
        return measures.class_shares(labels, self.num_classes)

    def level_shares(self, corruption: str, seed: int = 0) -> dict[str, np.ndarray]:
        """Label shares of the clean rows and of each severity of ``corruption`` ({"clean": (K,), "1": ...})."""
        levels = sorted(s for c, s in self.settings if c == corruption)
        if not levels:
            raise ConfigError(f"{corruption!r} is not among this benchmark's settings")
        return {"clean": self.label_shares(None), **{str(s): self.label_shares((corruption, s), seed) for s in levels}}

    def flip_examples(self, corruption: str, n: int = 1, low: int = 1, high: int = 5) -> np.ndarray:
        """Rows whose majority vote is right at severity ``low`` and wrong at ``high`` (Fig. 1's examples).

        Rows voted into the setting's attractor class come first, then by the share of that wrong vote.
        """
        from ciln.measures import attractor, majority_vote

        right = majority_vote(self.votes((corruption, low)), self.num_classes) == self.y
        wrong_votes = majority_vote(self.votes((corruption, high)), self.num_classes)
        candidates = np.flatnonzero(right & (wrong_votes != self.y))
        if len(candidates) == 0:
            return np.argsort(self.vote_shares((corruption, high))[np.arange(len(self.y)), self.y])[:n]
        attract = attractor(self.votes((corruption, high)), self.y, self.num_classes).cls
        shares = self.vote_shares((corruption, high))[candidates, wrong_votes[candidates]]
        order = np.lexsort((-shares, wrong_votes[candidates] != attract))
        return candidates[order[:n]]

    def summary(self) -> pd.DataFrame:
        """One row per setting: corruption, family, severity, noise rate (CILN-S and CILN-C)."""
        family = {name: spec.family for name, spec in CORRUPTIONS[self.domain].items()}
        rows = [{"corruption": c, "family": family[c], "severity": s,
                 "noise_rate": self.noise_rate((c, s)), "noise_rate_C": self.noise_rate((c, s), clean_start=True)}
                for c, s in self.settings]
        return pd.DataFrame(rows)


def nth_table(bench: Benchmark, sims: int = 5) -> pd.DataFrame:
    """Per setting: noise rate, nth, its analytic and simulated CCN floors, the gap and the repository's flip-rate
    variance (FRV), for CILN-S and -C.

    Vote shares are used throughout, as for the paper's numbers; ``nth_mean_softmax`` is nth of the
    paper's Eq. (1) soft label instead, for comparison.
    """
    mask = bench.clean_start_mask()
    M = len(bench.voters)
    rows = []
    for setting in progress(bench.settings, desc="nth"):
        row = {"corruption": setting[0], "severity": setting[1]}
        for suffix, keep in (("", slice(None)), ("_C", mask)):
            shares, y = bench.vote_shares(setting)[keep], bench.y[keep]
            row[f"noise_rate{suffix}"] = measures.noise_rate(shares, y)
            row[f"nth{suffix}"] = measures.nth(shares, y)
            row[f"floor_analytic{suffix}"] = measures.ccn_floor_analytic(shares, y, M)
            row[f"floor_simulated{suffix}"] = measures.ccn_floor_simulated(shares, y, M, sims)
            row[f"gap{suffix}"] = row[f"nth{suffix}"] - row[f"floor_simulated{suffix}"]
            row[f"frv{suffix}"] = measures.flip_rate_variance(shares, y)
        row["nth_mean_softmax"] = measures.nth(bench.mean_softmax(setting), bench.y)
        rows.append(row)
    table = pd.DataFrame(rows)
    family = {name: spec.family for name, spec in CORRUPTIONS[bench.domain].items()}
    table.insert(1, "family", table["corruption"].map(family))
    return table


def tv_table(bench: Benchmark, reference_counts: np.ndarray, *, n_votes: int = 4, n_boot: int = 50) -> pd.DataFrame:
    """Per setting: TV to the human reference with its symmetric and CCN baselines, CILN-S and CILN-C.

    ``bench`` must be on the test split, aligned with ``reference_counts`` (n, K); CILN-C restricts both
    to the test rows every voter gets right before corruption.
    """
    if bench.split != "test" or len(reference_counts) != len(bench.y):
        raise ConfigError("TV needs a test-split benchmark aligned with the reference counts")
    mask = bench.clean_start_mask()
    rows = []
    for setting in progress(bench.settings, desc="TV"):
        row = {"corruption": setting[0], "severity": setting[1]}
        for suffix, keep in (("", slice(None)), ("_C", mask)):
            result = measures.tv_to_reference(bench.vote_shares(setting)[keep], bench.y[keep], reference_counts[keep],
                                              n_votes=n_votes, n_boot=n_boot)
            row.update({f"noise_rate_test{suffix}": result.noise_rate, f"tv{suffix}": result.tv,
                        f"tv_ci95{suffix}": result.tv_ci95, f"tv_sym{suffix}": result.tv_symmetric,
                        f"tv_ccn{suffix}": result.tv_ccn})
        rows.append(row)
    table = pd.DataFrame(rows)
    family = {name: spec.family for name, spec in CORRUPTIONS[bench.domain].items()}
    table.insert(1, "family", table["corruption"].map(family))
    return table


def benchmark_settings(domain: str, corruptions="all", severities=(1, 3, 5)) -> list[Setting]:
    """The (corruption, severity) settings of a benchmark, in the order they are generated; ConfigError for an
    unknown corruption or severity."""
    settings = [(c, s) for c in resolve_corruptions(domain, corruptions) for s in severities]
    for c, s in settings:
        get_corruption(domain, c, s)
    return settings


def checked_options(domain: str, corruption_options: dict | None) -> dict:
    """``corruption_options`` (corruption -> operator options) checked against the operators of ``domain``."""
    return {c: check_options(get_corruption(domain, c), o) for c, o in (corruption_options or {}).items()}


def votes_params(base: dict, setting: Setting | None = None, options: dict | None = None) -> dict:
    """The cache parameters of one ``ciln-votes`` entry: ``base`` (dataset, split, data, pool, voter_seed,
    master_seed) with the setting ("clean" for None) and the corruption's operator options when any are set."""
    if setting is None:
        return dict(base, setting="clean")
    c, s = setting
    return dict(base, setting=[c, s]) | ({"options": options} if options else {})


def resolve_corruptions(domain: str, corruptions) -> list[str]:
    if corruptions in (None, "all"):
        return list(CORRUPTIONS[domain])
    if isinstance(corruptions, str):
        corruptions = [corruptions]
    for name in corruptions:
        get_corruption(domain, name)
    return list(corruptions)


def train_pool(dataset: Dataset, pool, splits: dict, *, seed: int, device, cache, data_dir=None) -> list[Voter]:
    """Train (or load) every voter of the pool on CLT, selected on CLV (pretrained weights under ``data_dir``)."""
    X, y = dataset.train.X, dataset.train.y
    take = (lambda idx: X.iloc[idx].reset_index(drop=True)) if isinstance(X, pd.DataFrame) else (lambda idx: X[idx])
    return [
        train_voter(name, take(splits["clt"]), y[splits["clt"]], take(splits["clv"]), y[splits["clv"]],
                    num_classes=dataset.num_classes, seed=seed, device=device, cache=cache, recipe_overrides=overrides,
                    classes=dataset.classes, data_dir=data_dir)
        for name, overrides in progress(parse_pool(pool), desc="voters")
    ]


def generate_benchmark(
    dataset: str | Dataset,
    *,
    pool: list,
    corruptions="all",
    severities=(1, 3, 5),
    split: str = "nlt",
    master_seed: int = 0,
    voter_seed: int = 42,
    data_dir=None,
    device="cpu",
    cache: ArtifactCache | None = None,
    corruption_options: dict | None = None,
) -> Benchmark:
    """Algorithm 1 for every (corruption, severity) on the ``split`` rows ("nlt", "nlv" or "test").

    ``corruption_options`` maps a corruption to its operator's options (``ciln.corruptions.corrupt``), e.g.
    ``{"frost": {"texture_scale": 0.2}}`` for CIFAR-10-C's frost instead of CILN's."""
    if split not in SPLIT_NAMES:
        raise ConfigError(f"split must be one of {', '.join(SPLIT_NAMES)}, got {split!r}")
    cache = cache or ArtifactCache(verbose=False)
    ds = load_dataset(dataset, data_dir=data_dir) if isinstance(dataset, str) else dataset
    domain = domain_of(ds.name)
    settings = benchmark_settings(domain, corruptions, severities)
    options = checked_options(domain, corruption_options)
    splits = gu_five_way_split(ds.train.y)
    voters = train_pool(ds, pool, splits, seed=voter_seed, device=device, cache=cache, data_dir=data_dir)
    X, y = split_rows(ds, split)
    reference = ds.train.X.iloc[splits["clt"]] if isinstance(ds.train.X, pd.DataFrame) else None

    def predict(inputs) -> np.ndarray:
        return np.stack([v.predict_proba(inputs) for v in voters]).astype(np.float32)

    def base(split, X, y) -> dict:
        return {"dataset": ds.name, "split": split, "data": data_fingerprint(X, y), "pool": pool,
                "voter_seed": voter_seed, "master_seed": master_seed}

    code = [generate_benchmark]  # this module's imports, followed: the corruptions, the voters, their helpers
    clean = cache.get_or_build("ciln-votes", votes_params(base(split, X, y)), lambda: {"probs": predict(X)},
                               code=code)["probs"]
    probs = {}
    for c, s in progress(settings, desc=f"{ds.name} settings"):
        def build(c=c, s=s):
            corrupted = corrupt(domain, X, c, s, split=SPLIT_NAMES[split], master_seed=master_seed, reference=reference,
                                options=options.get(c))
            return {"probs": predict(corrupted)}

        entry = cache.get_or_build("ciln-votes", votes_params(base(split, X, y), (c, s), options.get(c)), build, code=code)
        probs[(c, s)] = entry["probs"]
    # the voters' accuracy on the clean test split: the clean entry of this dataset's test-split benchmark
    test = clean if split == "test" else cache.get_or_build(
        "ciln-votes", votes_params(base("test", ds.test.X, ds.test.y)), lambda: {"probs": predict(ds.test.X)},
        code=code)["probs"]
    accuracy = {v.name: float((p.argmax(1) == ds.test.y).mean()) for v, p in zip(voters, test)}
    sizes = {k: len(v) for k, v in splits.items()} | {"test": len(ds.test.y)}
    names = [v.name for v in voters]
    return Benchmark(ds.name, domain, ds.classes, split, names, y, clean, probs, accuracy, sizes, ds.source,
                     {c: o for c, o in options.items() if o})


def split_rows(ds: Dataset, split: str):
    """Inputs and labels of a benchmark split: the NLT or NLV rows of the Gu split, or the official test split."""
    if split == "test":
        return ds.test.X, ds.test.y
    rows = gu_five_way_split(ds.train.y)[split]
    X = ds.train.X.iloc[rows].reset_index(drop=True) if isinstance(ds.train.X, pd.DataFrame) else ds.train.X[rows]
    return X, ds.train.y[rows]


def load_benchmarks(cfg, names=None, *, corruptions="all", split: str = "nlt", data_dir=None,
                    device="auto") -> dict[str, Benchmark]:
    """Benchmarks of the paper datasets ``names`` (default: all of ``cfg.datasets``) with a notebook's settings.

    ``cfg`` holds ``datasets`` (paper name -> dataset), ``pools``, ``severities``, ``master_seed``,
    ``voter_seed`` and ``corruption_options`` (per paper name; see ciln/profiles.yaml); ``corruptions`` is "all",
    a list, or a dict per paper name.
    With ``cfg.release_dirs[name]`` set, that benchmark is read from a release folder instead (an analysis
    of the authors' released voter outputs needs no GPU).
    """
    names = list(cfg.datasets) if names is None else list(names)
    unknown = [n for n in names if n not in cfg.datasets]
    if unknown:
        raise ConfigError(f"unknown paper dataset(s) {unknown}; configured: {', '.join(cfg.datasets)}")
    releases = cfg.get("release_dirs") or {}
    unknown = sorted(set(cfg.get("corruption_options") or {}) - set(cfg.datasets))
    if unknown:
        raise ConfigError(f"corruption_options names unknown paper dataset(s) {unknown}; configured: "
                          f"{', '.join(cfg.datasets)} (e.g. {{CIFAR10: {{frost: {{texture_scale: 0.2}}}}}})")
    if any(releases.get(n) for n in names):
        from ciln.release import read_release

        return {name: read_release(releases[name], split, dataset=cfg.datasets[name]) if releases.get(name) else
                load_benchmarks(cfg, [name], corruptions=corruptions, split=split, data_dir=data_dir, device=device)[name]
                for name in names}
    return {
        name: generate_benchmark(
            cfg.datasets[name], pool=cfg.pools[name], severities=cfg.severities, master_seed=cfg.master_seed,
            voter_seed=cfg.voter_seed, corruptions=corruptions.get(name, "all") if isinstance(corruptions, dict) else corruptions,
            split=split, data_dir=data_dir, device=device,
            corruption_options=(cfg.get("corruption_options") or {}).get(name),
        )
        for name in names
    }


def release_filter(bench: Benchmark, min_noise: float = 0.05, relative_to_clean: bool = False,
                   apply: bool = True) -> pd.DataFrame:
    """The benchmark's settings with a ``released`` flag: noise rate >= ``min_noise`` (the official MNIST rule).

    With ``relative_to_clean`` the rule applies to the increase over the clean-input noise rate instead,
    for voter pools whose clean error is far above the paper's (the smoke profile's stand-ins). With
    ``apply=False`` every setting is released (the paper filters MNIST only).
    """
    table = bench.summary()
    table["excess_over_clean"] = table["noise_rate"] - bench.noise_rate(None)
    measure = table["excess_over_clean"] if relative_to_clean else table["noise_rate"]
    table["released"] = (measure >= min_noise) if apply else True
    return table


def instantiation_summary(bench: Benchmark, released: pd.DataFrame) -> dict:
    """One row of Table I: voters, rows per setting, released settings and their noise-rate range."""
    kept = released[released["released"]]
    lo, hi = kept.loc[kept["noise_rate"].idxmin()], kept.loc[kept["noise_rate"].idxmax()]
    return {
        "voters": len(bench.voters),
        "rows_per_setting": len(bench.y),
        "released_settings": int(len(kept)),
        "noise_rate_min": float(lo["noise_rate"]),
        "noise_rate_max": float(hi["noise_rate"]),
        "min_setting": f"{lo['corruption']} ({lo['severity']})",
        "max_setting": f"{hi['corruption']} ({hi['severity']})",
    }
