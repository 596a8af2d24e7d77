"""Agreement among crowd workers, and the MTurk verdict rules of LNLFN (paper section 5).

**Fleiss' kappa** (Fleiss, 1971) from a count matrix ``counts`` (n_items, n_categories), where
``counts[i, j]`` is how many of the n raters put item i in category j (every row sums to the same n):

    P_i  = (sum_j counts[i, j]^2 - n) / (n (n - 1))        agreement on item i
    p_j  = sum_i counts[i, j] / (N n)                        share of all ratings in category j
    kappa = (mean_i P_i - sum_j p_j^2) / (1 - sum_j p_j^2)

LNLFN Table 6 uses the 4 answer options {positive, negative, neutral, off-topic} with n = 5. For IMDB the
released counts are (given, guessed, neutral, off-topic); map (given, guessed) to (positive, negative)
by each item's original label first (:func:`given_guessed_to_label_counts`), since the raw columns give
a different kappa (0.397/0.105 instead of 0.1314/0.4643).

**MTurk verdicts** (5 workers per item; "at least three" = a strict majority):

- "Non-Error" if >= 3 workers choose the item's original (given) label;
- otherwise "Correctable" if >= 3 workers agree on the same replacement label, which must be a task
  label (a neutral or off-topic majority on binary IMDB is *not* correctable), and, when the method's
  ``guessed`` label is given (CL's Amazon items), must be that guessed label;
- otherwise "Non-Agreement".

A **label error** is anything that is not a Non-Error (Correctable or Non-Agreement), as in the paper's
Tables 3 and 8.

    counts = given_guessed_to_label_counts(df.mturk_given, df.mturk_guessed, df.label, 1 - df.label,
                                           n_labels=2, extra=df[["mturk_neutral", "mturk_off_topic"]])
    fleiss_kappa(counts)                                                    # IMDB new protocol: 0.4643
    verdicts = mturk_categories(counts, given=df.label, label_options=(0, 1))
    is_label_error(verdicts)
"""
from __future__ import annotations

import numpy as np

from shared.errors import ConfigError

CORRECTABLE = "Correctable"
NON_AGREEMENT = "Non-Agreement"
NON_ERROR = "Non-Error"
MTURK_CATEGORIES = (CORRECTABLE, NON_AGREEMENT, NON_ERROR)


def _as_counts(counts) -> np.ndarray:
    c = np.asarray(counts)
    if c.ndim != 2:
        raise ConfigError(f"counts must be a 2-D array (n_items, n_categories), got shape {c.shape}")
    if c.shape[0] == 0 or c.shape[1] == 0:
        raise ConfigError(f"counts is empty (shape {c.shape})")
    if not np.issubdtype(c.dtype, np.number) or np.isnan(c.astype(np.float64)).any():
        raise ConfigError("counts must be numeric vote counts without NaN")
    if (c < 0).any() or (c != np.round(c)).any():
        raise ConfigError("counts must be non-negative whole numbers of votes")
    return c.astype(np.int64)


def category_counts(ratings, n_categories: int) -> np.ndarray:
    """Count matrix (n_items, n_categories) from a rating matrix (n_items, n_raters) of category indices."""
    r = np.asarray(ratings)
    if r.ndim != 2 or r.size == 0:
        raise ConfigError(f"ratings must be a non-empty 2-D array (n_items, n_raters), got shape {r.shape}")
    if not np.issubdtype(r.dtype, np.integer):
        raise ConfigError(f"ratings must be integer category indices, got dtype {r.dtype}")
    if r.min() < 0 or r.max() >= n_categories:
        raise ConfigError(f"ratings must lie in 0..{n_categories - 1}, found {r.min()}..{r.max()}")
    out = np.zeros((r.shape[0], n_categories), dtype=np.int64)
    np.add.at(out, (np.repeat(np.arange(r.shape[0]), r.shape[1]), r.ravel()), 1)
    return out


def fleiss_kappa(counts) -> float:
    """Fleiss' kappa of n raters per item from ``counts`` (n_items, n_categories).

    Every row must sum to the same number of raters n >= 2. Raises ConfigError for unequal rows,
    fewer than 2 raters, or when every rating falls in one category (chance agreement 1: kappa undefined).
    """
    c = _as_counts(counts)
    n_per_item = c.sum(axis=1)
    n = int(n_per_item[0])
    if (n_per_item != n).any():
        bad = np.flatnonzero(n_per_item != n)[:5]
        raise ConfigError(f"Fleiss' kappa needs the same number of ratings per item; row 0 has {n}, rows "
                          f"{bad.tolist()} have {n_per_item[bad].tolist()}")
    if n < 2:
        raise ConfigError(f"Fleiss' kappa needs at least 2 ratings per item, got {n}")
    p_items = (np.sum(c * c, axis=1) - n) / (n * (n - 1))
    p_cat = c.sum(axis=0) / c.sum()
    p_bar, p_e = float(p_items.mean()), float(np.sum(p_cat ** 2))
    if np.isclose(p_e, 1.0):
        raise ConfigError("Fleiss' kappa is undefined: every rating falls in a single category")
    return (p_bar - p_e) / (1.0 - p_e)


def given_guessed_to_label_counts(given_votes, guessed_votes, given_label, guessed_label, *, n_labels: int,
                                  extra=None) -> np.ndarray:
    """Re-key per-item (given, guessed) vote counts by label, for kappa over sentiments (LNLFN Table 6).

    Args:
        given_votes, guessed_votes: int (n_items,), votes for the item's original label and for the
            method's guessed label.
        given_label, guessed_label: int (n_items,), the label indices 0..n_labels-1 those votes are for
            (binary IMDB: ``guessed_label = 1 - given_label``); they must differ per item.
        n_labels: the number of task labels (2 for IMDB, 3 for Amazon).
        extra: optional int (n_items,) or (n_items, m) counts of non-label answer options (neutral,
            off-topic), appended as the last columns.

    Returns: int (n_items, n_labels + m); column j < n_labels counts votes for label j.
    """
    gv, qv = np.asarray(given_votes), np.asarray(guessed_votes)
    gl, ql = np.asarray(given_label), np.asarray(guessed_label)
    arrays = {"given_votes": gv, "guessed_votes": qv, "given_label": gl, "guessed_label": ql}
    for name, x in arrays.items():
        if x.ndim != 1:
            raise ConfigError(f"{name} must be 1-D (n_items,), got shape {x.shape}")
        if len(x) != len(gv):
            raise ConfigError(f"length mismatch: given_votes has {len(gv)} items but {name} has {len(x)}")
    for name, x in (("given_label", gl), ("guessed_label", ql)):
        if len(x) and (x.min() < 0 or x.max() >= n_labels):
            raise ConfigError(f"{name} must lie in 0..{n_labels - 1}, found {x.min()}..{x.max()}")
    if (gl == ql).any():
        raise ConfigError(f"given_label equals guessed_label at positions {np.flatnonzero(gl == ql)[:5].tolist()}")
    out = np.zeros((len(gv), n_labels), dtype=np.int64)
    rows = np.arange(len(gv))
    out[rows, gl.astype(np.int64)] = gv
    out[rows, ql.astype(np.int64)] = qv
    if extra is not None:
        ex = np.asarray(extra)
        ex = ex[:, None] if ex.ndim == 1 else ex
        if ex.ndim != 2 or ex.shape[0] != len(gv):
            raise ConfigError(f"extra must be (n_items,) or (n_items, m) with n_items={len(gv)}, got shape {ex.shape}")
        out = np.concatenate([out, ex.astype(np.int64)], axis=1)
    return _as_counts(out)


def mturk_categories(counts, given, *, label_options=None, guessed=None, min_votes: int = 3) -> np.ndarray:
    """MTurk verdict per item: "Correctable", "Non-Agreement" or "Non-Error" (LNLFN section 5).

    Args:
        counts: int (n_items, n_options) votes per answer option (e.g. [negative, neutral, positive,
            off-topic] for Amazon), or (n_options,) for one item.
        given: int (n_items,) (or a scalar for one item), the column of each item's original label.
        label_options: columns that are task labels and may serve as a replacement label. Default: all
            columns. Binary IMDB with columns [positive, negative, neutral, off-topic]: ``(0, 1)``, so a
            neutral or off-topic majority is a Non-Agreement.
        guessed: optional int (n_items,), the column of the method's guessed label; when given,
            "Correctable" requires >= ``min_votes`` for exactly this label (the rule that reproduces the
            CL Amazon counts 357/148/495).
        min_votes: votes needed for a verdict (3 of 5). Every row must have fewer than 2 x min_votes votes,
            so that the majority is unique.

    Returns: str array (n_items,) (or a str for a single item) with values from ``MTURK_CATEGORIES``.
    """
    single = np.ndim(counts) == 1
    c = _as_counts(np.atleast_2d(counts) if single else counts)
    n_items, n_opt = c.shape
    if isinstance(min_votes, (bool, np.bool_)) or not isinstance(min_votes, (int, np.integer)) or min_votes < 1:
        raise ConfigError(f"min_votes must be a positive integer, got {min_votes!r}")
    totals = c.sum(axis=1)
    if (totals >= 2 * min_votes).any():
        bad = np.flatnonzero(totals >= 2 * min_votes)[:5]
        raise ConfigError(f"rows {bad.tolist()} have {totals[bad].tolist()} votes; with min_votes={min_votes} "
                          f"at most {2 * min_votes - 1} votes per item keep the majority unique")

    def _index(x, name):
        a = np.atleast_1d(np.asarray(x))
        if a.ndim != 1 or len(a) != n_items:
            raise ConfigError(f"{name} must have one entry per item ({n_items}), got shape {np.shape(x)}")
        if not np.issubdtype(a.dtype, np.integer):
            raise ConfigError(f"{name} must be integer column indices, got dtype {a.dtype}")
        if a.min() < 0 or a.max() >= n_opt:
            raise ConfigError(f"{name} must lie in 0..{n_opt - 1} (columns of counts), found {a.min()}..{a.max()}")
        return a.astype(np.int64)

    g = _index(given, "given")
    labels = np.arange(n_opt) if label_options is None else np.unique(np.asarray(label_options, dtype=np.int64))
    if labels.size == 0 or labels.min() < 0 or labels.max() >= n_opt:
        raise ConfigError(f"label_options must be non-empty column indices in 0..{n_opt - 1}, got {label_options!r}")
    is_label = np.zeros(n_opt, dtype=bool)
    is_label[labels] = True
    if not is_label[g].all():
        raise ConfigError(f"given labels {np.unique(g[~is_label[g]]).tolist()} are not in label_options "
                          f"{labels.tolist()}")
    rows = np.arange(n_items)
    non_error = c[rows, g] >= min_votes
    if guessed is not None:
        q = _index(guessed, "guessed")
        if not is_label[q].all():
            raise ConfigError(f"guessed labels {np.unique(q[~is_label[q]]).tolist()} are not in label_options "
                              f"{labels.tolist()}")
        if (q == g).any():
            raise ConfigError(f"guessed equals given at positions {np.flatnonzero(q == g)[:5].tolist()}")
        correctable = c[rows, q] >= min_votes
    else:
        replacement = np.where(is_label[None, :], c, 0)
        replacement[rows, g] = 0
        correctable = (replacement >= min_votes).any(axis=1)
    out = np.where(non_error, NON_ERROR, np.where(correctable, CORRECTABLE, NON_AGREEMENT)).astype(object)
    return str(out[0]) if single else out


def is_label_error(categories) -> np.ndarray:
    """Bool (n_items,): True where the verdict is Correctable or Non-Agreement (anything but Non-Error)."""
    cat = np.asarray(categories, dtype=object)
    if cat.ndim != 1:
        cat = cat.reshape(-1)
    unknown = ~np.isin(cat, MTURK_CATEGORIES)
    if unknown.any():
        raise ConfigError(f"unknown MTurk categories {sorted(set(map(str, cat[unknown])))[:5]}; "
                          f"valid: {', '.join(MTURK_CATEGORIES)}")
    return cat != NON_ERROR


__all__ = [
    "CORRECTABLE", "NON_AGREEMENT", "NON_ERROR", "MTURK_CATEGORIES", "category_counts", "fleiss_kappa",
    "given_guessed_to_label_counts", "mturk_categories", "is_label_error",
]
