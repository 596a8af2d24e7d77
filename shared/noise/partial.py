"""Candidate-label sets for partial-label learning (PLL): synthetic generators, a simulated crowd, statistics.

A candidate set is a 0/1 row ``s`` of length q (``s[j] = 1`` iff label j is a candidate); a dataset's sets
are an (n, q) uint8 array ``S``. Per-annotator sets are (n, A, q); a missing annotator is an all-zero row.
Labels ``y`` are int class indices (n,) in ``0..q-1``. Every generator takes ``seed``, an int or a
``numpy.random.Generator``, and returns the same sets for the same seed.

* ``uss_candidates`` — uniform sampling strategy (Feng et al., 2020b; Plench Eq. 1): S uniform over the
  subsets that contain y, except the full label set. ``variant="feng2020_code"`` is the widely copied
  reference sampler instead (|S| = k with probability C(q, k)/(2^q - 2), then k - 1 random false labels).
* ``fps_candidates`` — flipping probability strategy (Plench Eq. 2): each j != y joins S independently with
  probability p, or ``P[y, j]`` for a (q, q) inclusion matrix, whose diagonal may be below 1 (noisy PLL).
* ``crowd_candidates`` — the simulated annotators of the PLDigits stand-in for PLCIFAR10:
  instance-dependent confusions from an out-of-fold kNN on a 2-D PCA; ``aggregate_union`` and
  ``aggregate_vaguest`` build the Aggregate and Vaguest versions.
"""
from __future__ import annotations

import math

import numpy as np

from shared.errors import ConfigError, unknown_choice
from shared.noise.classic import check_labels
from shared.seeding import as_generator

USS_VARIANTS = ("exact", "feng2020_code")






def _sets(S) -> np.ndarray:
    S = np.asarray(S)
    if S.ndim < 2:
        raise ConfigError(f"candidate sets must be (n, q) or (n, A, q) 0/1 arrays, got shape {S.shape}")
    return S


# ------------------------------------------------------------------------------------------ generators
def uss_candidates(y, q: int, seed=0, variant: str = "exact") -> np.ndarray:
    """USS candidate sets (n, q) uint8; y is always a candidate.

    ``exact``: every j != y joins with probability 1/2 and a row equal to the full set is redrawn, so
    P(|S| = k) = C(q-1, k-1)/(2^{q-1} - 1) for k = 1..q-1 and E|S| = (2^{q-1}(q+1)/2 - q)/(2^{q-1} - 1)
    (5.49 for q = 10). ``feng2020_code``: |S| = k with probability C(q, k)/(2^q - 2), then k - 1 false labels
    drawn uniformly, as in the RC/CC reference code; E|S| = q/2.
    """
    if q < 2:
        raise ConfigError(f"USS needs at least 2 classes (q = {q} leaves no set but the full one)")
    y, rng = check_labels(y, q), as_generator(seed)
    rows = np.arange(len(y))
    if variant == "exact":
        S = np.zeros((len(y), q), dtype=np.uint8)
        todo = rows
        while len(todo):
            draw = (rng.random((len(todo), q)) < 0.5).astype(np.uint8)
            draw[np.arange(len(todo)), y[todo]] = 1
            S[todo] = draw
            todo = todo[draw.all(axis=1)]
        return S
    if variant == "feng2020_code":
        sizes = np.arange(1, q)
        probs = np.array([math.comb(q, int(k)) / (2**q - 2) for k in sizes])
        k = rng.choice(sizes, size=len(y), p=probs / probs.sum())
        keys = rng.random((len(y), q))
        keys[rows, y] = np.inf  # the true label ranks last among the draws for false labels
        rank = np.argsort(np.argsort(keys, axis=1), axis=1)
        S = (rank < (k - 1)[:, None]).astype(np.uint8)
        S[rows, y] = 1
        return S
    raise unknown_choice("USS variant", variant, USS_VARIANTS)


def fps_matrix(q: int, p: float) -> np.ndarray:
    """The (q, q) inclusion matrix of constant-rate FPS: p off the diagonal, 1 on it."""
    if not 0.0 <= p <= 1.0:
        raise ConfigError(f"the FPS flipping probability must be in [0, 1], got {p}")
    return np.full((q, q), float(p)) + (1.0 - p) * np.eye(q)


def fps_candidates(y, q: int, p, seed=0) -> np.ndarray:
    """FPS candidate sets (n, q) uint8: label j joins row i independently with probability ``P[y_i, j]``.

    ``p`` is a float (constant rate: every j != y with probability p, y always in S, E|S| = 1 + p(q-1)) or a
    (q, q) inclusion matrix ``P[i, j] = p(j in S | y = i)``. A diagonal below 1 gives noisy PLL (y may be
    missing from S); rows that come out empty are redrawn, so a set is never empty.
    """
    y, rng = check_labels(y, q), as_generator(seed)
    P = fps_matrix(q, p) if np.isscalar(p) else np.asarray(p, dtype=np.float64)
    if P.shape != (q, q) or not np.all((P >= 0) & (P <= 1)):
        raise ConfigError(f"the FPS inclusion matrix must be (q, q) = ({q}, {q}) with entries in [0, 1], "
                          f"got shape {P.shape}")
    dead = np.flatnonzero(P.max(axis=1) == 0)
    if len(dead):
        raise ConfigError(f"rows {dead.tolist()} of the FPS inclusion matrix are all zero: every set of those "
                          "classes would be empty; give each class at least one positive inclusion probability")
    S = np.zeros((len(y), q), dtype=np.uint8)
    todo = np.arange(len(y))
    while len(todo):
        draw = (rng.random((len(todo), q)) < P[y[todo]]).astype(np.uint8)
        S[todo] = draw
        todo = todo[draw.sum(axis=1) == 0]
    return S


# ------------------------------------------------------------------------------------------ simulated crowd
def perception_probabilities(X, y, q: int, *, n_components: int = 2, n_neighbors: int = 50,
                             n_folds: int = 5) -> np.ndarray:
    """Out-of-fold kNN class probabilities (n, q) on a PCA of ``X`` (n, d): what a hurried annotator confuses.

    PCA is fitted on all rows (unsupervised); the kNN probabilities of each row come from the model fitted on
    the other folds (stratified, unshuffled), so a row's own label never leaks into its confusions.
    """
    from sklearn.decomposition import PCA
    from sklearn.model_selection import cross_val_predict
    from sklearn.neighbors import KNeighborsClassifier

    y = check_labels(y, q)
    Z = PCA(n_components=n_components).fit_transform(np.asarray(X, dtype=np.float64))
    proba = cross_val_predict(KNeighborsClassifier(n_neighbors=n_neighbors), Z, y, cv=n_folds,
                              method="predict_proba")
    P = np.zeros((len(y), q))
    P[:, np.unique(y)] = proba
    return P


def simulate_annotators(P, y, n_annotators: int = 10, seed=0, *, carefulness=(0.3, 1.0), base_rate: float = 0.04,
                        miss: float = 0.15, miss_hard: float = 0.9, miss_cap: float = 0.55,
                        max_labels: int = 6) -> np.ndarray:
    """Per-annotator candidate sets (n, A, q) uint8 from perception probabilities ``P`` (n, q).

    With ``r_ij = P_ij / max_j P_ij``, each (image, annotator) pair draws a carefulness ``c ~ U(carefulness)``,
    includes each wrong label j with probability ``clip(c r_ij + base_rate, 0, 1)`` and misses the true label
    with probability ``min(miss + miss_hard (1 - r_iy), miss_cap)``. An empty set gets the most probable wrong
    label; a set larger than ``max_labels`` keeps its ``max_labels`` most probable labels (PLCIFAR10's cap of 6).
    """
    P = np.asarray(P, dtype=np.float64)
    n, q = P.shape
    y, rng = check_labels(y, q), as_generator(seed)
    if len(y) != n:
        raise ConfigError(f"P has {n} rows but there are {len(y)} labels")
    rows = np.arange(n)
    r = P / P.max(axis=1, keepdims=True)
    c = rng.uniform(*carefulness, size=(n, n_annotators))
    include = np.clip(c[:, :, None] * r[:, None, :] + base_rate, 0.0, 1.0)
    include[rows, :, y] = 1.0 - np.minimum(miss + miss_hard * (1.0 - r[rows, y]), miss_cap)[:, None]
    sets = rng.random((n, n_annotators, q)) < include

    wrong = np.where(np.arange(q) == y[:, None], -np.inf, P)
    empty_i, empty_a = np.nonzero(~sets.any(axis=2))
    sets[empty_i, empty_a, wrong.argmax(axis=1)[empty_i]] = True

    big_i, big_a = np.nonzero(sets.sum(axis=2) > max_labels)
    if len(big_i):
        scores = np.where(sets[big_i, big_a], P[big_i], -np.inf)
        keep = np.argsort(-scores, axis=1, kind="stable")[:, :max_labels]
        capped = np.zeros((len(big_i), q), dtype=bool)
        np.put_along_axis(capped, keep, True, axis=1)
        sets[big_i, big_a] = capped
    return sets.astype(np.uint8)


def crowd_candidates(X, y, q: int, n_annotators: int = 10, seed=0, **annotator_options) -> np.ndarray:
    """The PLDigits crowd: ``simulate_annotators(perception_probabilities(X, y, q), y, ...)``, (n, A, q) uint8.

    With ``seed=0`` (fixed once, like a real dataset) and the defaults this is the PLDigits datasets' generator.
    """
    return simulate_annotators(perception_probabilities(X, y, q), y, n_annotators, seed, **annotator_options)


def aggregate_union(sets) -> np.ndarray:
    """Aggregate: the union of the annotators' sets, (n, A, q) -> (n, q) uint8."""
    return _sets(sets).max(axis=1).astype(np.uint8)


def aggregate_vaguest(sets) -> np.ndarray:
    """Vaguest: each row's largest annotator set, the first one on ties, (n, A, q) -> (n, q) uint8."""
    sets = _sets(sets)
    largest = sets.sum(axis=2).argmax(axis=1)  # argmax keeps the first maximum
    return sets[np.arange(len(sets)), largest].astype(np.uint8)


# ------------------------------------------------------------------------------------------ statistics
def average_size(S) -> float:
    """Mean number of candidate labels per row."""
    return float(_sets(S).sum(axis=-1).mean())


def pll_noise_rate(S, y) -> float:
    """Fraction of rows whose candidate set lacks the true label."""
    S = _sets(S)
    y = check_labels(y, S.shape[1])
    return float(np.mean(S[np.arange(len(y)), y] == 0)) if len(y) else 0.0


def flipping_matrix(S, y, q: int | None = None) -> np.ndarray:
    """Empirical inclusion probabilities (q, q): ``F[i, j] = p(j in S | y = i)``; a class with no rows is NaN.

    The diagonal is 1 minus the class-wise noise rate (Plench Fig. 2(c, d)).
    """
    S = _sets(S).astype(np.float64)
    q = S.shape[1] if q is None else q
    y = check_labels(y, q)
    counts = np.bincount(y, minlength=q).astype(np.float64)
    sums = np.zeros((q, S.shape[1]))
    np.add.at(sums, y, S)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / counts[:, None]


def ambiguity_degree(S, y) -> float:
    """Empirical ambiguity degree (Plench Eq. 4 at class level): ``max_{i != j} p(j in S | y = i)``."""
    F = flipping_matrix(S, y)
    return float(np.nanmax(np.where(np.eye(len(F), dtype=bool), np.nan, F)))


def noise_rate_by_annotators(sets, y) -> np.ndarray:
    """Noise rate of the union of the first k annotators, k = 1..A, (A,) (Plench Fig. 2(b))."""
    sets = _sets(sets)
    y = check_labels(y, sets.shape[2])
    has_true = sets[np.arange(len(y)), :, y] > 0  # (n, A)
    return 1.0 - np.logical_or.accumulate(has_true, axis=1).mean(axis=0)


def label_histogram(sets) -> np.ndarray:
    """Number of partial labels given to each class (q,) int64, over rows (and annotators) (Plench Fig. 2(a))."""
    sets = _sets(sets)
    return sets.reshape(-1, sets.shape[-1]).sum(axis=0, dtype=np.int64)
