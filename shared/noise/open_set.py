"""Open-set, instance-dependent label noise of NoisywikiHow (Wu et al., 2023, Section 3.3, Eq. 1-2).

A training item (x, y) is made noisy by replacing its input x with the most similar event x~ from outside the
benchmark's classes (the open-set pool), keeping the label y. The difficulty of an item is
``s_x = cos(v_x, v_x~)``; at level t the top ``round(t * |S|)`` items by ``s_x`` within each noise source S are
corrupted, so a fixed ranking makes the levels nested.

    noise = open_set_noise(item_vecs, sources, pool_vecs, 0.4, item_parents=parent_of_item, pool_parents=parent_of_pool)
    texts[noise.replaced] = pool_texts[noise.neighbour[noise.replaced]]      # labels unchanged

Conventions the paper does not state: ``round`` is half-up on the level as written in decimal
(``round(0.1 * 25) == 3``); ties in the nearest-neighbour argmax go to the lowest pool index; ties in ``s_x``
go to the lower item index (a stable sort on ``(-s_x, i)``).
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

import numpy as np

from shared.errors import ConfigError, DataFormatError, unknown_choice


@dataclass(frozen=True)
class OpenSetNoise:
    """Which items get an open-set text, and from where.

    Attributes:
        replaced: (n,) bool, True where item i's text is replaced by its neighbour's (its label is kept).
        neighbour: (n,) int64, index into the pool of item i's nearest allowed open-set event (filled for all i).
        score: (n,) float64, ``s_x``: the cosine between item i and that neighbour.
    """

    replaced: np.ndarray
    neighbour: np.ndarray
    score: np.ndarray

    def rate_by_source(self, sources) -> dict:
        """The realised fraction of replaced items of each source: ``{source: fraction}`` for ``sources`` (n,)."""
        sources = _labels("sources", sources, len(self.replaced))
        return {s: float(self.replaced[sources == s].mean()) for s in np.unique(sources).tolist()}


def round_half_up(level: float, n: int) -> int:
    """``round(level * n)`` with halves rounded up, exact for levels written in decimal (0.58 * 25 -> 15)."""
    return int((Decimal(repr(float(level))) * int(n)).to_integral_value(ROUND_HALF_UP))


def _labels(name: str, values, n: int) -> np.ndarray:
    values = np.asarray(values)
    if values.shape != (n,):
        raise ConfigError(f"{name} must hold one entry per item: expected shape ({n},), got {values.shape}")
    return values


def _unit_rows(name: str, vectors) -> np.ndarray:
    """``vectors`` (n, d) as float64 rows of length 1; non-finite or zero rows raise DataFormatError."""
    try:
        V = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise DataFormatError(f"{name} must be a numeric array (n, d): {err}") from None
    if V.ndim != 2 or V.shape[1] == 0:
        raise DataFormatError(f"{name} must be a 2-D array (n, d) with d >= 1, got shape {V.shape}")
    bad = np.flatnonzero(~np.isfinite(V).all(axis=1))
    if bad.size:
        raise DataFormatError(f"{name} holds NaN or inf in {bad.size} rows (first: row {bad[0]}); "
                              "re-embed those events or drop them")
    norms = np.linalg.norm(V, axis=1, keepdims=True)
    zero = np.flatnonzero(norms[:, 0] == 0)
    if zero.size:
        raise DataFormatError(f"{name} has {zero.size} all-zero rows (first: row {zero[0]}), which have no cosine "
                              "similarity; give those events a non-zero embedding (e.g. one with a verb) or drop them")
    return V / norms


def _argmax_cosine(A: np.ndarray, B: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """For unit rows A (a, d) and B (b, d): per row of A the first index of B with the largest dot product, and
    that product; blocks of at most chunk x chunk, so memory does not grow with a * b."""
    best = np.full(len(A), -np.inf)
    arg = np.zeros(len(A), dtype=np.int64)
    for i in range(0, len(A), chunk):
        rows = slice(i, i + chunk)
        for j in range(0, len(B), chunk):
            sims = A[rows] @ B[j:j + chunk].T
            k = sims.argmax(axis=1)
            top = sims[np.arange(len(k)), k]
            better = top > best[rows]  # strictly: an equal value in a later block keeps the lower index
            best[rows][better], arg[rows][better] = top[better], j + k[better]
    return arg, best


def nearest_open_set(item_vectors, pool_vectors, *, item_groups=None, pool_groups=None,
                     chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Each item's most similar pool row by cosine similarity (Eq. 1-2 of the paper).

    Args:
        item_vectors: (n, d) item embeddings; pool_vectors: (m, d) open-set event embeddings, m >= 1. Rows must
            be finite and non-zero (they are L2-normalised here).
        item_groups, pool_groups: optional (n,) and (m,) hashable labels. An item whose group is None may match
            any pool row; an item with group g only pool rows whose group equals g.
        chunk: block size; at most a chunk x chunk similarity block is held at a time.

    Returns:
        ``(index, score)``: (n,) int64 pool indices (ties: the lowest index) and (n,) float64 cosines.
    """
    X, P = _unit_rows("item_vectors", item_vectors), _unit_rows("pool_vectors", pool_vectors)
    if X.shape[1] != P.shape[1]:
        raise DataFormatError(f"item_vectors have dimension {X.shape[1]} but pool_vectors {P.shape[1]}; "
                              "embed both with the same encoder")
    if not len(P):
        raise ConfigError("the open-set pool is empty: pass the embeddings of events outside the benchmark's classes")
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ConfigError(f"chunk must be a positive integer, got {chunk!r}")
    if item_groups is None:
        return _argmax_cosine(X, P, int(chunk))
    if pool_groups is None:
        raise ConfigError("item_groups restrict items to pool rows of their group: pass pool_groups (m,) as well")
    members: dict = {}
    for i, g in enumerate(_labels("item_groups", item_groups, len(X)).tolist()):
        members.setdefault(g, []).append(i)
    pool_members: dict = {}
    for j, g in enumerate(_labels("pool_groups", pool_groups, len(P)).tolist()):
        pool_members.setdefault(g, []).append(j)
    index, score = np.zeros(len(X), dtype=np.int64), np.zeros(len(X))
    for g, rows in members.items():
        cols = np.arange(len(P)) if g is None else np.asarray(pool_members.get(g, []), dtype=np.int64)
        if not cols.size:
            raise ConfigError(f"no pool row has group {g!r}, needed by {len(rows)} items (first: item {rows[0]}); "
                              "add pool rows of that group or give those items the group None (any pool row)")
        arg, score[rows] = _argmax_cosine(X[rows], P if g is None else P[cols], int(chunk))
        index[rows] = cols[arg]
    return index, score


def select_hard(score, sources, level: float, *, single_source=None) -> np.ndarray:
    """The hard cases to corrupt at noise level ``level``: (n,) bool.

    By default, within each source S of ``sources`` (n,), the ``round(level * |S|)`` items with the highest
    ``score`` (n,). With ``single_source=S``, all ``round(level * n)`` noisy items come from S (Table 5 of the
    paper), which raises ConfigError when S has fewer items. Rounding is half-up; ties go to the lower index.
    """
    score = np.asarray(score, dtype=np.float64)
    if score.ndim != 1 or not np.isfinite(score).all():
        raise DataFormatError(f"score must be a finite 1-D array, got shape {score.shape}")
    sources = _labels("sources", sources, len(score))
    if not 0.0 <= level < 1.0:
        raise ConfigError(f"noise level must be in [0, 1), got {level}")
    present = np.unique(sources).tolist()
    if single_source is None:
        counts = {s: round_half_up(level, np.sum(sources == s)) for s in present}
    elif single_source not in present:
        raise unknown_choice("noise source", single_source, present)
    else:
        n, available = len(score), int(np.sum(sources == single_source))
        counts = {single_source: round_half_up(level, n)}
        if counts[single_source] > available:
            raise ConfigError(
                f"single-source noise at level {level:g} needs round({level:g} * {n}) = {counts[single_source]} noisy "
                f"items, all from source {single_source!r}, which has only {available}; use a level of at most "
                f"{available}/{n} (about {np.floor(available / n * 1e4) / 1e4:g})")
    hard = np.zeros(len(score), dtype=bool)
    for s, k in counts.items():
        idx = np.flatnonzero(sources == s)
        hard[idx[np.lexsort((idx, -score[idx]))[:k]]] = True
    return hard


def open_set_noise(item_vectors, sources, pool_vectors, level: float, *, item_parents=None, pool_parents=None,
                   sc_source="SC", single_source=None, chunk: int = 4096) -> OpenSetNoise:
    """NoisywikiHow's real-world noise: nearest open-set neighbours (``nearest_open_set``), then ``select_hard``.

    Args:
        item_vectors: (n, d) embeddings of the training events; sources: (n,) the noise source of each item's class.
        pool_vectors: (m, d) embeddings of the open-set events (categories outside the benchmark).
        level: noise level t in [0, 1); single_source: see ``select_hard``; chunk: see ``nearest_open_set``.
        item_parents, pool_parents: (n,) and (m,) parent categories, needed when some item is of ``sc_source``:
            those items search only the pool rows of their own parent (sibling sub-categories), the others
            search the whole pool.
    """
    sources = _labels("sources", sources, len(np.asarray(item_vectors)))
    is_sc = sources == sc_source
    groups = None
    if is_sc.any():
        if item_parents is None or pool_parents is None:
            raise ConfigError(f"items of source {sc_source!r} search only open-set events of their parent category: "
                              "pass item_parents (n,) and pool_parents (m,)")
        item_parents = _labels("item_parents", item_parents, len(sources)).tolist()
        pool_parents = _labels("pool_parents", pool_parents, len(np.asarray(pool_vectors))).tolist()
        missing = sorted({item_parents[i] for i in np.flatnonzero(is_sc)} - set(pool_parents), key=str)
        if missing:
            raise ConfigError(f"the open-set pool ({len(pool_parents)} events) has no event under parent categories "
                              f"{missing}, which {sc_source} items need (sibling sub-categories); the pool is too "
                              "small: add open-set events of those parents")
        groups = np.array([p if sc else None for p, sc in zip(item_parents, is_sc)], dtype=object)
    neighbour, score = nearest_open_set(item_vectors, pool_vectors, item_groups=groups, pool_groups=pool_parents,
                                        chunk=chunk)
    return OpenSetNoise(select_hard(score, sources, level, single_source=single_source), neighbour, score)
