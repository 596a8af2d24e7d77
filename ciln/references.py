"""The references CILN is compared with: human labels (CIFAR-10H) and the PL-IDN benchmark.

- ``cifar10h_counts``: the real CIFAR-10H annotation counts (10,000 x 10, aligned with the CIFAR-10 test
  split), read from ``<data_dir>/cifar10h/cifar10h-counts.npy`` (CC BY-NC-SA 4.0; never vendored here).
- ``pseudo_human_counts``: the offline stand-in. Each of ``annotators`` linear classifiers is trained on a
  random 60 % of the clean training rows (CLT and CLV) and recognises an item outright with the
  probability that brings its error (measured on NLV and NLT, which no annotator trains on) down to
  ``target_error``; counts are the votes per class.
- ``fallible_rater_votes``: the offline PL-IDN stand-in (Gu et al.'s construction): for each tier, 10 MLP
  raters trained on random subsets of the clean training rows, the subset size calibrated on NLV and NLT so that
  the mean per-rater error is the tier's (PL-IDN: 10.8 / 19.4 / 47.8 %).

Rater features are 64 principal components of the pixels (fitted on CLT). Votes and counts are cached.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA

from ciln.measures import vote_shares
from ciln.splits import gu_five_way_split
from ciln.voters import data_fingerprint
from shared.cache import ArtifactCache
from shared.datasets import Dataset
from shared.datasets.files import load_npy
from shared.datasets.real import missing_data_error
from shared.errors import DataFormatError, unknown_choice
from shared.noise.raters import oracle_rate_for_error, pool_error, rater_pools_for_errors, train_rater_pool
from shared.paths import data_dir as resolve_data_dir

PLIDN_TIERS = {"L": 0.108, "M": 0.194, "H": 0.478}


def locate_cifar10h(data_dir=None) -> Path:
    """``<data_dir>/cifar10h/cifar10h-counts.npy`` (or directly under ``data_dir``); DataNotFoundError if absent."""
    root = resolve_data_dir(data_dir)
    candidates = [root / "cifar10h" / "cifar10h-counts.npy", root / "cifar10h-counts.npy"]
    path = next((p for p in candidates if p.exists()), None)
    if path is None:
        raise missing_data_error("CIFAR-10H", candidates,
                                 "Download data/cifar10h-counts.npy from https://github.com/jcpeterson/cifar-10h.")
    return path


def cifar10h_counts(data_dir=None) -> np.ndarray:
    """CIFAR-10H counts (10000, 10) int64, from ``<data_dir>/cifar10h/cifar10h-counts.npy``."""
    path = locate_cifar10h(data_dir)
    counts = load_npy(path, "CIFAR-10H annotation counts")
    if counts.ndim != 2 or counts.shape[1] != 10 or not np.isfinite(counts).all() or (counts < 0).any():
        raise DataFormatError(f"{path}: expected non-negative counts of shape (10000, 10), got {counts.dtype} {counts.shape}")
    if not np.array_equal(counts, np.round(counts)) or (counts.sum(axis=1) < 1).any():
        sums = counts.sum(axis=1)
        looks_like = (" The rows sum to 1: this is cifar10h-probs.npy (the label distributions), not the counts."
                      if np.allclose(sums, 1.0, atol=1e-4) else "")
        raise DataFormatError(f"{path}: expected whole annotation counts (about 50 per image), found fractional values "
                              f"(row sums {sums.min():.3g} to {sums.max():.3g}).{looks_like} Use data/cifar10h-counts.npy "
                              "from https://github.com/jcpeterson/cifar-10h.")
    return counts.astype(np.int64)


def _features(ds: Dataset, splits: dict) -> tuple[np.ndarray, np.ndarray]:
    """PCA-64 features of the training pool and of the test split (PCA fitted on CLT)."""
    flat = lambda X: np.asarray(X).reshape(len(X), -1).astype(np.float32) / 255.0  # noqa: E731
    pca = PCA(64, random_state=0).fit(flat(ds.train.X[splits["clt"]]))
    return pca.transform(flat(ds.train.X)), pca.transform(flat(ds.test.X))


def _cached(kind: str, ds: Dataset, params: dict, build, cache: ArtifactCache | None):
    cache = cache or ArtifactCache()
    params = dict(params, dataset=ds.name, data=data_fingerprint(ds.train.X, ds.train.y),
                  test=data_fingerprint(ds.test.X, ds.test.y))
    return cache.get_or_build(kind, params, build, code=[_cached])


def pseudo_human_counts(ds: Dataset, *, annotators: int = 50, target_error: float = 0.075, seed: int = 0,
                        cache: ArtifactCache | None = None) -> np.ndarray:
    """Simulated human annotation counts (n_test, K) for the clean test images."""

    def build():
        splits = gu_five_way_split(ds.train.y)
        train_f, test_f = _features(ds, splits)
        pool_rows = np.concatenate([splits["clt"], splits["clv"]])
        size = int(0.6 * len(pool_rows))
        base = train_rater_pool(train_f[pool_rows], ds.train.y[pool_rows], annotators, subset_size=size,
                                family="logreg", seed=seed)
        held_out = np.concatenate([splits["nlv"], splits["nlt"]])  # rows the annotators never train on
        model_error = pool_error(base, train_f[held_out], ds.train.y[held_out])
        base.oracle_rate = oracle_rate_for_error(model_error, target_error)
        votes = base.votes(test_f, ds.test.y)
        counts = np.stack([np.bincount(v, minlength=len(ds.classes)) for v in votes])
        return {"counts": counts, "model_error": np.array(model_error), "oracle_rate": np.array(base.oracle_rate)}

    return _cached("ciln-pseudo-human", ds, {"annotators": annotators, "target_error": target_error, "seed": seed},
                   build, cache)["counts"]


RATER_ITEMS = ("test", "nlt", "nlv")


def fallible_rater_votes(ds: Dataset, *, tiers: dict[str, float] = PLIDN_TIERS, n_raters: int = 10,
                         items: str = "test", seed: int = 0, cache: ArtifactCache | None = None) -> dict[str, np.ndarray]:
    """PL-IDN stand-in: votes (n_items, n_raters) per tier on the clean ``items`` ("test", "nlt" or "nlv").

    The pools are calibrated once and vote on all three item sets in the same cached artifact.
    """
    if items not in RATER_ITEMS:
        raise unknown_choice("rater items", items, RATER_ITEMS)

    def build():
        splits = gu_five_way_split(ds.train.y)
        train_f, test_f = _features(ds, splits)
        pool_rows = np.concatenate([splits["clt"], splits["clv"]])
        held_out = np.concatenate([splits["nlv"], splits["nlt"]])  # rows the raters never train on
        pools = rater_pools_for_errors(train_f[pool_rows], ds.train.y[pool_rows], train_f[held_out],
                                       ds.train.y[held_out], tiers, n_raters, family="mlp", seed=seed)
        targets = {"test": test_f, "nlt": train_f[splits["nlt"]], "nlv": train_f[splits["nlv"]]}
        return {f"{tier}__{name}": pool.votes(target) for tier, pool in pools.items() for name, target in targets.items()}

    votes = _cached("ciln-fallible-raters", ds, {"tiers": tiers, "n_raters": n_raters, "seed": seed}, build, cache)
    return {tier: votes[f"{tier}__{items}"] for tier in tiers}


def reference_counts(cfg, ds: Dataset, data_dir=None) -> np.ndarray:
    """Human annotation counts for the test split: real CIFAR-10H or the pseudo-human stand-in (``cfg.reference``)."""
    if cfg.reference == "cifar10h":
        counts = cifar10h_counts(data_dir)
        if len(counts) != len(ds.test.y):
            raise DataFormatError(f"CIFAR-10H has {len(counts)} rows but the test split has {len(ds.test.y)}")
        return counts
    if cfg.reference == "pseudo_human":
        return pseudo_human_counts(ds, **cfg.pseudo_human)
    raise unknown_choice("human reference", cfg.reference, ["cifar10h", "pseudo_human"])


def subsample_raters(votes: np.ndarray, n_votes: int, num_classes: int, seed: int = 0) -> np.ndarray:
    """Vote shares from ``n_votes`` raters drawn without replacement for each item (to match a pool's size)."""
    rng = np.random.default_rng(seed)
    pick = np.argsort(rng.random(votes.shape), axis=1)[:, :n_votes]
    return vote_shares(np.take_along_axis(votes, pick, axis=1), num_classes)
