"""Metrics of label-error detection: ranked lists of items scored by how likely each is a label error.

Conventions (LNLFN's metrics, App. E.1):

- ``scores`` is a float array (n,); **higher = more likely an error** (e.g. the per-item loss
  ``-log p(y_given | x)``). Items are inspected in descending score.
- ``is_error`` is a boolean (or 0/1) array (n,) aligned with ``scores``: whether the item really is a
  label error.
- Ties in ``scores`` are broken by input order (a stable sort), so every function here sees the same
  ranking; ``aupr_trapezoid(..., ties="group")`` instead takes one curve point per distinct score.
- With the items sorted, e_k is the error indicator of the k-th item, N_err the total number of errors,
  TP(k) = sum_{j<=k} e_j, P(k) = TP(k)/k and R(k) = TP(k)/N_err.

The paper's AUPR is the **trapezoid** area under these (R, P) points,
AUPR = sum_k 1/2 (P(k) + P(k-1)) (R(k) - R(k-1)) with R(0) = 0 and P(0) := P(1). It is *not*
scikit-learn's ``average_precision_score`` (a step sum, sum_k (R(k) - R(k-1)) P(k)), which is a different
number. Without ties it equals ``sklearn.metrics.auc(recall, precision)`` over
``sklearn.metrics.precision_recall_curve``.

**Truncated AUPR** (IMDB/Amazon): only the first ``truncate_at`` items were verified (CL's count: 1,310
for IMDB, 1,000 for Amazon); the same sum stops there, and recall is divided by an *estimated* N_err
(the paper: 5 % of the data, 1,250 of 25,000), passed as ``n_errors``. A method that flags fewer items
(FME+CL: 316 on IMDB) is scored on just its flagged items, so its curve, and its area, stop earlier.

    from shared.metrics import aupr_trapezoid, pr_at_err
    aupr_trapezoid(loss, is_error)                                   # full AUPR (synthetic noise)
    aupr_trapezoid(loss, is_error, truncate_at=1310, n_errors=1250)  # truncated AUPR (IMDB)
    pr_at_err(loss, is_error).precision                              # P,R@Err%
    pr_at_err(loss, is_error, multiple=2).recall                     # R@2*Err%
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from shared.errors import ConfigError

TIE_MODES = ("stable", "group")


# --------------------------------------------------------------------------- input checks


def _as_scores(scores, name: str = "scores") -> np.ndarray:
    s = np.asarray(scores)
    if s.ndim != 1:
        raise ConfigError(f"{name} must be a 1-D array (n_items,), got shape {s.shape}")
    if s.size == 0:
        raise ConfigError(f"{name} is empty; there are no items to rank")
    if not (np.issubdtype(s.dtype, np.number) or s.dtype == bool):
        raise ConfigError(f"{name} must be numeric, got dtype {s.dtype}")
    s = s.astype(np.float64)
    if np.isnan(s).any():
        raise ConfigError(f"{name} contains NaN at positions {np.flatnonzero(np.isnan(s))[:5].tolist()}...; "
                          "a NaN cannot be ranked (±inf is allowed)")
    return s


def _as_is_error(is_error, n: int) -> np.ndarray:
    e = np.asarray(is_error)
    if e.ndim != 1:
        raise ConfigError(f"is_error must be a 1-D array (n_items,), got shape {e.shape}")
    if len(e) != n:
        raise ConfigError(f"length mismatch: scores has {n} items but is_error has {len(e)}")
    if e.dtype == bool:
        return e
    if not np.issubdtype(e.dtype, np.number):
        raise ConfigError(f"is_error must be boolean or 0/1, got dtype {e.dtype}")
    bad = ~np.isin(e, (0, 1))
    if bad.any():
        raise ConfigError(f"is_error must be boolean or 0/1; found {e[bad][:5].tolist()} "
                          f"at positions {np.flatnonzero(bad)[:5].tolist()}")
    return e.astype(bool)


def _check_k(k, n: int, what: str = "k") -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise ConfigError(f"{what} must be an integer, got {k!r}")
    k = int(k)
    if not 1 <= k <= n:
        raise ConfigError(f"{what}={k} is out of range: it must be between 1 and the number of items ({n})")
    return k


def _resolve_n_errors(n_errors, errors_seen: int, total_in_input: int) -> int:
    """N_err: the given estimate, else the number of errors in the whole input."""
    if n_errors is None:
        if total_in_input == 0:
            raise ConfigError("is_error has no positives, so recall (TP / N_err) is undefined; "
                              "pass n_errors=<estimated number of errors> if the errors lie outside these items")
        return total_in_input
    if isinstance(n_errors, (bool, np.bool_)) or not isinstance(n_errors, (int, np.integer)):
        raise ConfigError(f"n_errors must be a positive integer, got {n_errors!r}")
    n_errors = int(n_errors)
    if n_errors < 1:
        raise ConfigError(f"n_errors must be a positive integer, got {n_errors}")
    if n_errors < errors_seen:
        raise ConfigError(f"n_errors={n_errors} is smaller than the {errors_seen} errors among the evaluated items; "
                          "recall would exceed 1")
    return n_errors


def ranking(scores) -> np.ndarray:
    """Item indices (n,) in inspection order: descending score, ties in input order (stable)."""
    s = _as_scores(scores)
    return np.argsort(-s, kind="stable")


def top_k_indices(scores, k: int) -> np.ndarray:
    """Indices (k,) of the ``k`` highest-scoring items, best first (ties: earlier input position first)."""
    s = _as_scores(scores)
    k = _check_k(k, len(s))
    return ranking(s)[:k]


# --------------------------------------------------------------------------- precision-recall curve


@dataclass(frozen=True)
class PRCurve:
    """Precision and recall after each inspected item (or each distinct score, ``ties="group"``).

    Attributes (all arrays have the same length m, one entry per curve point, in inspection order):
        k:         int (m,), the number of items inspected at the point (1..truncate_at)
        tp:        int (m,), the errors among them, TP(k)
        precision: float (m,), TP(k) / k
        recall:    float (m,), TP(k) / n_errors
        n_errors:  the recall denominator N_err (exact count or estimate)
    """

    k: np.ndarray
    tp: np.ndarray
    precision: np.ndarray
    recall: np.ndarray
    n_errors: int

    def aupr(self) -> float:
        """Trapezoid area: sum 1/2 (P(k) + P(k-1)) (R(k) - R(k-1)), with R(0) = 0 and P(0) := P(first point)."""
        p = np.concatenate([self.precision[:1], self.precision])
        r = np.concatenate([[0.0], self.recall])
        return float(np.sum(0.5 * (p[1:] + p[:-1]) * np.diff(r)))


def pr_curve(scores, is_error, *, n_errors: int | None = None, truncate_at: int | None = None,
             ties: str = "stable") -> PRCurve:
    """The precision-recall points of a ranking (the points Fig. 1/6 plot and AUPR integrates).

    Args:
        scores: float (n,), higher = more likely an error.
        is_error: bool or 0/1 (n,), aligned with ``scores``.
        n_errors: recall denominator N_err. Default: ``is_error.sum()`` over all n items (exact, e.g.
            synthetic noise). Pass an estimate (IMDB/Amazon: ``round(0.05 * 25_000) = 1250``) when the
            errors are not all known; it must be at least the errors among the evaluated items.
        truncate_at: stop after this many items (1..n). Labels of later items are ignored.
        ties: "stable" = one point per item, ties in input order (the per-item sum above);
            "group" = one point per distinct score (scikit-learn's convention; order-invariant).
            With "group", ``truncate_at`` must fall on a boundary between distinct scores.
    """
    if ties not in TIE_MODES:
        raise ConfigError(f"unknown ties mode {ties!r}; valid: {', '.join(TIE_MODES)}")
    s = _as_scores(scores)
    e = _as_is_error(is_error, len(s))
    order = np.argsort(-s, kind="stable")
    s_sorted, e_sorted = s[order], e[order]
    k_max = len(s) if truncate_at is None else _check_k(truncate_at, len(s), "truncate_at")
    if ties == "group" and k_max < len(s) and s_sorted[k_max - 1] == s_sorted[k_max]:
        raise ConfigError(f"truncate_at={k_max} falls inside a group of tied scores ({s_sorted[k_max]!r}); "
                          "with ties='group' truncate at a boundary between distinct scores, or use ties='stable'")
    tp_all = np.cumsum(e_sorted[:k_max], dtype=np.int64)
    n_err = _resolve_n_errors(n_errors, int(tp_all[-1]), int(e.sum()))
    k = np.arange(1, k_max + 1, dtype=np.int64)
    if ties == "group":
        # keep the last item of each run of equal scores
        last = np.ones(k_max, dtype=bool)
        last[:-1] = s_sorted[:k_max - 1] != s_sorted[1:k_max]
        k, tp_all = k[last], tp_all[last]
    return PRCurve(k=k, tp=tp_all, precision=tp_all / k, recall=tp_all / n_err, n_errors=n_err)


def aupr_trapezoid(scores, is_error, *, truncate_at: int | None = None, n_errors: int | None = None,
                   ties: str = "stable") -> float:
    """Area under the precision-recall curve by the trapezoid rule (LNLFN App. E.1), full or truncated.

    AUPR = sum_{k=1..K} 1/2 (P(k) + P(k-1)) (R(k) - R(k-1)), R(0) = 0, P(0) := P(1), K = ``truncate_at``
    (default: all n items). Equivalently ``numpy.trapezoid(concat([P1], P), concat([0], R))``.

    Args:
        scores: float (n,), higher = more likely an error (e.g. per-item loss).
        is_error: bool or 0/1 (n,), aligned with ``scores``.
        truncate_at: integrate only over the first ``truncate_at`` inspected items (the truncated AUPR of
            IMDB/Amazon, where ``truncate_at`` = CL's count). The area is *not* rescaled.
        n_errors: recall denominator N_err; default ``is_error.sum()`` over all n items. For the
            truncated AUPR of IMDB/Amazon pass the paper's estimate, 5 % of the split (1,250).
        ties: see :func:`pr_curve`.

    Returns: float in [0, 1]. Dividing by a larger ``n_errors`` scales the area by the same ratio.

    Raises ConfigError (a ValueError) for mismatched lengths, non-0/1 labels, NaN scores, no positives
    (with ``n_errors`` unset), ``truncate_at`` outside 1..n, or ``n_errors`` below the errors found.
    """
    return pr_curve(scores, is_error, n_errors=n_errors, truncate_at=truncate_at, ties=ties).aupr()


# --------------------------------------------------------------------------- precision / recall at k


class AtK(NamedTuple):
    """Detection quality after inspecting the top ``k`` items."""

    k: int
    tp: int
    precision: float
    recall: float
    f1: float


def at_k(scores, is_error, k: int, *, n_errors: int | None = None) -> AtK:
    """Precision, recall and F1 of flagging the top ``k`` items (ties broken by input order).

    Args:
        scores: float (n,), higher = more likely an error.
        is_error: bool or 0/1 (n,).
        k: number of items flagged, 1..n (e.g. CL's count, for Tables 8 and 10).
        n_errors: recall denominator; default ``is_error.sum()``.
    """
    s = _as_scores(scores)
    e = _as_is_error(is_error, len(s))
    k = _check_k(k, len(s))
    tp = int(e[np.argsort(-s, kind="stable")[:k]].sum())
    n_err = _resolve_n_errors(n_errors, tp, int(e.sum()))
    p, r = tp / k, tp / n_err
    f1 = 0.0 if tp == 0 else 2 * p * r / (p + r)
    return AtK(k=k, tp=tp, precision=p, recall=r, f1=f1)


def precision_at_k(scores, is_error, k: int) -> float:
    """TP(k) / k: the share of errors among the top ``k`` items. Shapes as :func:`at_k`."""
    s = _as_scores(scores)
    e = _as_is_error(is_error, len(s))
    k = _check_k(k, len(s))
    return float(e[np.argsort(-s, kind="stable")[:k]].sum() / k)


def recall_at_k(scores, is_error, k: int, *, n_errors: int | None = None) -> float:
    """TP(k) / N_err: the share of all errors found in the top ``k`` items. Shapes as :func:`at_k`."""
    return at_k(scores, is_error, k, n_errors=n_errors).recall


def pr_at_err(scores, is_error, *, n_errors: int | None = None, multiple: int = 1) -> AtK:
    """P, R at k = ``multiple`` x N_err: Table 3's "P,R@Err%" (multiple=1) and "R@2*Err%" (multiple=2).

    With N_err exact (default ``is_error.sum()``) precision equals recall at multiple=1 (the paper's
    footnote 3). For IMDB/Amazon the released numbers use k = CL's count instead: call
    ``at_k(scores, is_error, k=1310)`` there.

    Raises ConfigError if ``multiple * N_err`` exceeds the number of items.
    """
    s = _as_scores(scores)
    e = _as_is_error(is_error, len(s))
    if isinstance(multiple, (bool, np.bool_)) or not isinstance(multiple, (int, np.integer)) or multiple < 1:
        raise ConfigError(f"multiple must be a positive integer, got {multiple!r}")
    n_err = _resolve_n_errors(n_errors, 0, int(e.sum()))
    k = int(multiple) * n_err
    if k > len(s):
        raise ConfigError(f"k = {multiple} x N_err = {k} is out of range: only {len(s)} items are ranked")
    return at_k(s, e, k, n_errors=n_err)


def recall_at_2err(scores, is_error, *, n_errors: int | None = None) -> float:
    """Recall after inspecting 2 x N_err items (Table 3's R@2*Err%)."""
    return pr_at_err(scores, is_error, n_errors=n_errors, multiple=2).recall


# --------------------------------------------------------------------------- overlap and distribution shift


def jaccard_index(a, b) -> float:
    """|A ∩ B| / |A ∪ B| of two collections of item ids (1-D array-likes; duplicates ignored).

    Table 9: ``jaccard_index(top_k_indices(fme_loss, len(cl_set)), cl_set)``.
    """
    a, b = np.asarray(a), np.asarray(b)
    for name, x in (("a", a), ("b", b)):
        if x.ndim != 1:
            raise ConfigError(f"{name} must be a 1-D collection of item ids, got shape {x.shape}")
    a, b = np.unique(a), np.unique(b)
    union = np.union1d(a, b)
    if union.size == 0:
        raise ConfigError("the Jaccard index of two empty sets is undefined")
    return float(np.intersect1d(a, b).size / union.size)


def jaccard_top_k(scores_a, scores_b, k: int) -> float:
    """Jaccard index of the top-``k`` items of two scorings of the same n items.

    Args:
        scores_a, scores_b: float (n,) each, higher = more likely an error, aligned item by item.
        k: 1..n. Ties at the k-th place are broken by input order.
    """
    a, b = _as_scores(scores_a, "scores_a"), _as_scores(scores_b, "scores_b")
    if len(a) != len(b):
        raise ConfigError(f"length mismatch: scores_a has {len(a)} items but scores_b has {len(b)}")
    k = _check_k(k, len(a))
    return jaccard_index(top_k_indices(a, k), top_k_indices(b, k))


def wasserstein(losses_a, losses_b) -> float:
    """1-D Wasserstein-1 (earth mover's) distance between two samples of per-item losses (Table 5).

    W1 = integral |F_a(x) - F_b(x)| dx between the empirical CDFs; equal weights per item, sizes may differ.
    This is ``scipy.stats.wasserstein_distance(losses_a, losses_b)``.

    Args:
        losses_a: float (n_a,), e.g. the losses of noised items.
        losses_b: float (n_b,), e.g. the losses of clean items.
    """
    from scipy.stats import wasserstein_distance

    a, b = _as_scores(losses_a, "losses_a"), _as_scores(losses_b, "losses_b")
    for name, x in (("losses_a", a), ("losses_b", b)):
        if not np.isfinite(x).all():
            raise ConfigError(f"{name} contains ±inf; the Wasserstein distance needs finite losses "
                              "(clip the probabilities before taking -log)")
    return float(wasserstein_distance(a, b))


__all__ = [
    "TIE_MODES", "ranking", "top_k_indices", "PRCurve", "pr_curve", "aupr_trapezoid",
    "AtK", "at_k", "precision_at_k", "recall_at_k", "pr_at_err", "recall_at_2err",
    "jaccard_index", "jaccard_top_k", "wasserstein",
]
