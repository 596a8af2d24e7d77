"""Classic synthetic label-noise models.

Conventions: ``y`` is an int array (n,) of class indices in ``0..K-1``; a transition matrix ``T`` is (K, K)
with ``T[i, j] = P(noisy = j | clean = i)`` and rows summing to 1; ``rate`` is the probability that a label
is changed. Every sampler takes a ``numpy.random.Generator`` so results are reproducible per seed.
"""
from __future__ import annotations

import numpy as np

from shared.errors import ConfigError


def _check_rate(rate: float, upper: float = 1.0) -> None:
    if not 0.0 <= rate <= upper:
        raise ConfigError(f"noise rate must be in [0, {upper:g}], got {rate}")


def check_labels(y, num_classes: int) -> np.ndarray:
    """``y`` as a 1-D int64 array of class indices in [0, num_classes); anything else raises ConfigError."""
    y = np.asarray(y)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise ConfigError(f"labels must be a 1-D integer array, got shape {y.shape} and dtype {y.dtype}")
    if len(y) and (y.min() < 0 or y.max() >= num_classes):
        raise ConfigError(f"labels must lie in 0..{num_classes - 1}, found {y.min()}..{y.max()}")
    return y.astype(np.int64, copy=False)


def check_transition_matrix(T: np.ndarray, atol: float = 1e-8) -> np.ndarray:
    """Validate a row-stochastic (K, K) matrix and return it as float64."""
    T = np.asarray(T, dtype=np.float64)
    if T.ndim != 2 or T.shape[0] != T.shape[1]:
        raise ConfigError(f"a transition matrix must be square (K, K), got shape {T.shape}")
    if (T < -atol).any() or not np.allclose(T.sum(axis=1), 1.0, atol=1e-6):
        raise ConfigError("a transition matrix needs non-negative rows that sum to 1")
    return np.clip(T, 0.0, None)


def symmetric_transition(num_classes: int, rate: float, *, include_true: bool = False) -> np.ndarray:
    """Symmetric noise: with probability ``rate`` the label becomes another class chosen uniformly.

    With ``include_true=True`` the new label is drawn uniformly from all K classes (so it may stay the
    same, and the realised flip rate is ``rate * (K - 1) / K``), the other convention in the literature.
    """
    _check_rate(rate)
    K = num_classes
    if include_true:
        return (1 - rate) * np.eye(K) + rate / K
    return (1 - rate) * np.eye(K) + rate / (K - 1) * (1 - np.eye(K))


def pairflip_transition(num_classes: int, rate: float) -> np.ndarray:
    """Pair-flip noise (Han et al., 2018): class i becomes class (i + 1) mod K with probability ``rate``."""
    _check_rate(rate)
    K = num_classes
    return (1 - rate) * np.eye(K) + rate * np.roll(np.eye(K), 1, axis=1)


def apply_transition(y: np.ndarray, T: np.ndarray, rng: np.random.Generator, *, exact: bool = False) -> np.ndarray:
    """Class-conditional noise: each label ``y[i]`` is replaced by a draw from ``T[y[i]]``.

    With ``exact=True`` the number of changed labels in each class is fixed to ``round(n_k * (1 - T[k, k]))``
    (those items chosen uniformly); their new labels are drawn from the off-diagonal part of ``T[k]``.
    """
    T = check_transition_matrix(T)
    y = check_labels(y, len(T))
    noisy = y.copy()
    if not exact:
        cumulative = np.cumsum(T, axis=1)
        u = rng.random(len(y))
        noisy = (u[:, None] > cumulative[y]).sum(axis=1)
        return np.minimum(noisy, len(T) - 1).astype(y.dtype)
    for k in range(len(T)):
        members = np.flatnonzero(y == k)
        n_flip = int(round(len(members) * (1 - T[k, k])))
        if n_flip == 0:
            continue
        off = T[k].copy()
        off[k] = 0.0
        flip = rng.choice(members, size=n_flip, replace=False)
        noisy[flip] = rng.choice(len(T), size=n_flip, p=off / off.sum())
    return noisy


def symmetric_noise(y, num_classes: int, rate: float, rng: np.random.Generator, *, exact: bool = False):
    """Labels with symmetric noise (see ``symmetric_transition``)."""
    return apply_transition(y, symmetric_transition(num_classes, rate), rng, exact=exact)


def pairflip_noise(y, num_classes: int, rate: float, rng: np.random.Generator, *, exact: bool = False):
    """Labels with pair-flip noise (see ``pairflip_transition``)."""
    return apply_transition(y, pairflip_transition(num_classes, rate), rng, exact=exact)


def instance_dependent_flip_probabilities(
    features: np.ndarray, y: np.ndarray, num_classes: int, rate: float, rng: np.random.Generator,
    *, rate_std: float = 0.1,
) -> np.ndarray:
    """Per-item noisy-label distributions (n, K) of the instance-dependent model of Xia et al. (2020).

    Part-dependent label noise (NeurIPS 2020), as in its public generator: each item gets a flip rate
    ``q_i`` from a normal(rate, rate_std) truncated to [0, 1]; a random projection ``W`` (K, d, K) maps the
    item's features to scores over the *other* classes, which a softmax turns into where it flips to:
    ``p_i = (1 - q_i) e_{y_i} + q_i softmax(x_i W[y_i] with y_i masked)``.
    ``features`` (n, d) are standardised per column before projection.
    """
    from scipy.stats import truncnorm

    _check_rate(rate)
    y = check_labels(y, num_classes)
    X = np.asarray(features, dtype=np.float64).reshape(len(y), -1)
    X = (X - X.mean(axis=0)) / (X.std(axis=0) + 1e-12)
    X /= np.linalg.norm(X, axis=1, keepdims=True) + 1e-12
    if rate_std > 0:
        a, b = (0 - rate) / rate_std, (1 - rate) / rate_std
        q = truncnorm(a, b, loc=rate, scale=rate_std).rvs(len(y), random_state=rng)
    else:
        q = np.full(len(y), rate)
    W = rng.standard_normal((num_classes, X.shape[1], num_classes))
    scores = np.einsum("nd,ndk->nk", X, W[y])
    scores[np.arange(len(y)), y] = -np.inf
    scores -= scores.max(axis=1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=1, keepdims=True)
    probs *= q[:, None]
    probs[np.arange(len(y)), y] = 1 - q
    return probs


def instance_dependent_noise(
    features, y, num_classes: int, rate: float, rng: np.random.Generator, *, rate_std: float = 0.1,
) -> np.ndarray:
    """Labels with instance-dependent (part-dependent) noise, Xia et al. (2020); see the function above."""
    probs = instance_dependent_flip_probabilities(features, y, num_classes, rate, rng, rate_std=rate_std)
    return sample_from_rows(probs, rng).astype(np.asarray(y).dtype)


def sample_from_rows(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One class index per row of a (n, K) matrix of probabilities."""
    cumulative = np.cumsum(probs, axis=1)
    u = rng.random(len(probs)) * cumulative[:, -1]
    return np.minimum((u[:, None] > cumulative).sum(axis=1), probs.shape[1] - 1)
