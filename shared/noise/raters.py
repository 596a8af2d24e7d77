"""Simulated annotators: pools of fallible model "raters" whose labels carry instance-dependent noise.

A rater is a classifier trained on a random subset of clean data; the smaller the subset, the more it
errs, and its errors fall on the items it finds hard (the PL-IDN idea of Gu et al., 2022). Two knobs set
a pool's per-rater error rate:

- ``subset_size``: examples each rater is trained on (``error_curve`` and ``size_for_error`` pick it for a target);
- ``oracle_rate``: the chance a rater simply recognises an item and gives its true label; it lowers the
  error rate without moving where the errors fall (used for human-like reference annotators).

    pool = rater_pool_for_error(F_train, y_train, F_val, y_val, target_error=0.19, n_raters=10, seed=0)
    votes = pool.votes(F_items)                  # (n_items, n_raters) class indices
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from shared.errors import ConfigError, unknown_choice
from shared.progress import progress

FAMILIES = ("mlp", "logreg")


def _make(family: str, seed: int):
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    if family == "mlp":
        return MLPClassifier((128,), max_iter=200, random_state=seed)
    if family == "logreg":
        return LogisticRegression(C=0.05, max_iter=2000)
    raise unknown_choice("rater family", family, FAMILIES)


def _subset(rng: np.random.Generator, labels: np.ndarray, size: int) -> np.ndarray:
    """A random subset of ``size`` items that contains every class at least once."""
    classes = np.unique(labels)
    first = np.array([rng.choice(np.flatnonzero(labels == c)) for c in classes])
    rest = rng.choice(np.setdiff1d(np.arange(len(labels)), first), max(0, size - len(first)), replace=False)
    return np.concatenate([first, rest])


@dataclass
class RaterPool:
    models: list
    oracle_rate: float = 0.0
    seed: int = 0
    subset_size: int = 0
    info: dict = field(default_factory=dict)

    def votes(self, features: np.ndarray, y_true: np.ndarray | None = None) -> np.ndarray:
        """Each rater's label for each item (n, R); ``y_true`` is needed when ``oracle_rate`` > 0."""
        votes = np.stack([m.predict(features) for m in self.models], axis=1).astype(np.int64)
        if self.oracle_rate > 0:
            if y_true is None:
                raise ConfigError("this rater pool knows some answers (oracle_rate > 0): pass y_true")
            knows = np.random.default_rng(self.seed + 1).random(votes.shape) < self.oracle_rate
            votes = np.where(knows, np.asarray(y_true)[:, None], votes)
        return votes


def train_rater_pool(features, labels, n_raters: int, *, subset_size: int, family: str = "mlp",
                     oracle_rate: float = 0.0, seed: int = 0) -> RaterPool:
    """``n_raters`` classifiers, each trained on its own random subset of ``subset_size`` examples."""
    features, labels = np.asarray(features), np.asarray(labels)
    if not 0.0 <= oracle_rate < 1.0:
        raise ConfigError(f"oracle_rate must be in [0, 1), got {oracle_rate}")
    if subset_size < len(np.unique(labels)) or subset_size > len(labels):
        raise ConfigError(f"subset_size must be between the number of classes and {len(labels)}, got {subset_size}")
    rng = np.random.default_rng(seed)
    models = []
    with warnings.catch_warnings():  # raters on small subsets are meant to be imperfect; do not warn about it
        warnings.simplefilter("ignore", ConvergenceWarning)
        for r in range(n_raters):
            idx = _subset(rng, labels, subset_size)
            models.append(_make(family, seed + r).fit(features[idx], labels[idx]))
    return RaterPool(models, oracle_rate, seed, subset_size)


def pool_error(pool: RaterPool, features, labels) -> float:
    """Mean per-rater error rate on labelled items."""
    votes = pool.votes(features, labels)
    return float(np.mean(votes != np.asarray(labels)[:, None]))


def error_curve(features, labels, val_features, val_labels, *, family: str = "mlp", seed: int = 0,
                grid: int = 6) -> dict[int, float]:
    """Validation error of raters trained on ``grid`` subset sizes spaced on a log scale (two raters each)."""
    n_classes = len(np.unique(labels))
    sizes = np.unique(np.geomspace(max(3 * n_classes, 10), len(labels), grid).astype(int))
    return {int(s): pool_error(train_rater_pool(features, labels, 2, subset_size=int(s), family=family, seed=seed + i),
                               val_features, val_labels) for i, s in enumerate(sizes)}


def size_for_error(curve: dict[int, float], target_error: float) -> int:
    """Subset size with ``target_error`` on an ``error_curve``: linear in log(size), clipped to its ends."""
    sizes = np.array(list(curve))
    errs = np.array([curve[s] for s in sizes])
    order = np.argsort(errs)  # error falls as the size grows
    return int(round(np.exp(np.interp(target_error, errs[order], np.log(sizes[order])))))


def rater_pools_for_errors(features, labels, val_features, val_labels, targets: dict[str, float], n_raters: int, *,
                           family: str = "mlp", seed: int = 0) -> dict[str, RaterPool]:
    """One pool per named target error (raters err at about the target, or as little as their family can)."""
    curve = error_curve(features, labels, val_features, val_labels, family=family, seed=seed)
    pools = {}
    for i, (name, target) in enumerate(progress(list(targets.items()), desc="rater pools")):
        pool = train_rater_pool(features, labels, n_raters, subset_size=size_for_error(curve, target), family=family,
                                seed=seed + 100 * (i + 1))
        pool.info = {"target_error": target, "calibration": curve,
                     "validation_error": pool_error(pool, val_features, val_labels)}
        pools[name] = pool
    return pools


def rater_pool_for_error(features, labels, val_features, val_labels, target_error: float, n_raters: int, *,
                         family: str = "mlp", seed: int = 0) -> RaterPool:
    """A pool whose raters err at about ``target_error``."""
    return rater_pools_for_errors(features, labels, val_features, val_labels, {"pool": target_error}, n_raters,
                                  family=family, seed=seed)["pool"]


def oracle_rate_for_error(model_error: float, target_error: float) -> float:
    """The oracle rate that brings raters of ``model_error`` down to ``target_error`` (0 if already below)."""
    if model_error <= target_error:
        return 0.0
    return 1.0 - target_error / model_error
