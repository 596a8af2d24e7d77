"""Classic synthetic label-noise models.

Conventions: ``y`` is an int array (n,) of class indices in ``0..K-1``; a transition matrix ``T`` is (K, K)
with ``T[i, j] = P(noisy = j | clean = i)`` and rows summing to 1; ``rate`` is the probability that a label
is changed. Every sampler takes a ``numpy.random.Generator`` so results are reproducible per seed.
"""
from __future__ import annotations

import numpy as np

from shared.errors import ConfigError, DataFormatError


def _check_rate(rate: float, upper: float = 1.0) -> None:
    if not 0.0 <= rate <= upper:
        raise ConfigError(f"noise rate must be in [0, {upper:g}], got {rate}")


def check_num_classes(num_classes) -> int:
    """``num_classes`` as an int >= 2; label noise needs another class to flip to, so anything else raises."""
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)):
        raise ConfigError(f"num_classes must be an integer, got {num_classes!r}")
    if num_classes < 2:
        raise ConfigError(f"label noise needs at least 2 classes (a label must have another class to flip to); "
                          f"got num_classes={num_classes}")
    return int(num_classes)


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
    K = check_num_classes(num_classes)
    if include_true:
        return (1 - rate) * np.eye(K) + rate / K
    return (1 - rate) * np.eye(K) + rate / (K - 1) * (1 - np.eye(K))


def pairflip_transition(num_classes: int, rate: float) -> np.ndarray:
    """Pair-flip noise (Han et al., 2018): class i becomes class (i + 1) mod K with probability ``rate``."""
    _check_rate(rate)
    K = check_num_classes(num_classes)
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


def check_features(features, n_items: int) -> np.ndarray:
    """``features`` as float64 (n_items, d), one row per item (images are flattened); raises a clear error when
    the number of rows differs from the number of labels or when any value is NaN or infinite."""
    try:
        X = np.asarray(features, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"features must be a numeric array (n_items, d): {err}") from None
    if X.ndim == 0 or X.shape[0] != n_items:
        rows = "a scalar" if X.ndim == 0 else f"{X.shape[0]} rows (shape {X.shape})"
        raise ConfigError(f"features must have one row per label: got {rows} for {n_items} labels")
    X = X.reshape(n_items, -1)
    if X.shape[1] == 0:
        raise ConfigError(f"features must have at least one column, got shape {np.shape(features)}")
    finite = np.isfinite(X)
    if not finite.all():
        bad_rows = int((~finite).any(axis=1).sum())
        bad_cols = int((~finite).any(axis=0).sum())
        kinds = ", ".join(k for k, m in (("NaN", np.isnan(X)), ("inf", np.isinf(X))) if m.any())
        raise DataFormatError(f"features hold non-finite values ({kinds}) in {bad_rows} of {n_items} rows and "
                              f"{bad_cols} of {X.shape[1]} columns; instance-dependent noise needs finite features: "
                              "impute those values or drop those rows or columns first")
    return X


def instance_dependent_flip_probabilities(
    features: np.ndarray, y: np.ndarray, num_classes: int, rate: float, rng: np.random.Generator,
    *, rate_std: float = 0.1, standardize: bool = False, normalize_rows: bool = False,
) -> np.ndarray:
    """Per-item noisy-label distributions (n, K) of the instance-dependent model of Xia et al. (2020).

    Part-dependent label noise (NeurIPS 2020), as in its public generator (``get_instance_noisy_label`` in
    ``tools.py`` of github.com/xiaoboxia/Part-dependent-label-noise): each item gets a flip rate ``q_i`` from a
    normal(rate, rate_std) truncated to [0, 1]; a random projection ``W`` (K, d, K) with N(0, 1) entries maps the
    item's features to scores over the classes, the true class is set to -inf, and a softmax turns the scores
    into where it flips to: ``p_i = (1 - q_i) e_{y_i} + q_i softmax(x_i W[y_i] with y_i masked)``.

    ``features`` (n, d), or (n, ...) images that are flattened, must be finite and have one row per label.
    By default they are projected as given, as in Xia's code (which passes raw pixel values): a row's scores
    spread with its length ``|x_i|``, so for long rows the softmax is sharp and most of an item's flip mass
    goes to one class (which differs between items). Two options change the features first:

    * ``standardize=True`` centres and scales each column to unit variance (rows then have length about
      sqrt(d)), so the result does not depend on the features' units;
    * ``normalize_rows=True`` divides each row by its Euclidean length, so every score is N(0, 1) and the
      softmax is soft: flips spread far more evenly over the other classes. Neither is in Xia's code; both
      together were this function's behaviour before these options existed.

    On scikit-learn's digits (raw pixel values 0-16) at rate 0.3, the largest flip-target share per item (the
    biggest off-diagonal probability over the flip rate, averaged over items) is about 0.99 by default, 0.85
    with ``standardize`` and 0.34 with both options.
    """
    from scipy.stats import truncnorm

    _check_rate(rate)
    K = check_num_classes(num_classes)
    y = check_labels(y, K)
    if not (np.isfinite(rate_std) and rate_std >= 0):
        raise ConfigError(f"rate_std must be a finite number >= 0, got {rate_std}")
    X = check_features(features, len(y))
    if standardize:
        X = (X - X.mean(axis=0)) / (X.std(axis=0) + 1e-12)
    if normalize_rows:
        X = X / (np.linalg.norm(X, axis=1, keepdims=True) + 1e-12)
    if rate_std > 0:
        a, b = (0 - rate) / rate_std, (1 - rate) / rate_std
        q = truncnorm(a, b, loc=rate, scale=rate_std).rvs(len(y), random_state=rng)
    else:
        q = np.full(len(y), rate)
    W = rng.standard_normal((K, X.shape[1], K))
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
    standardize: bool = False, normalize_rows: bool = False,
) -> np.ndarray:
    """Labels with instance-dependent (part-dependent) noise, Xia et al. (2020); see the function above."""
    probs = instance_dependent_flip_probabilities(features, y, num_classes, rate, rng, rate_std=rate_std,
                                                  standardize=standardize, normalize_rows=normalize_rows)
    return sample_from_rows(probs, rng).astype(np.asarray(y).dtype)


def sample_from_rows(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One class index per row of a (n, K) matrix of probabilities."""
    cumulative = np.cumsum(probs, axis=1)
    u = rng.random(len(probs)) * cumulative[:, -1]
    return np.minimum((u[:, None] > cumulative).sum(axis=1), probs.shape[1] - 1)
