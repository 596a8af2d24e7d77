"""LNLFN's MTurk re-analysis: Tables 2, 6, 8 and 9 (IMDB/Amazon rows) and Fig. 5's loss data.

Everything here works on plain DataFrames as ``lnlfn.data`` reads them, so the same code runs on the real
release and on the offline VADER fixture (``vader_panel_release``):

* ``main`` (``MTurkRelease.main``, ``read_lnlfm_main``): one row per item with the new protocol's votes and,
  per method column ``m``, ``<m>_sent`` (the item was sent to MTurk for this method) and ``<m>_result_mt``
  (the released verdict: "Correctable", "Non-Error" or "NA: ...").
* ``cl_rerun`` (``MTurkRelease.cl_rerun``, ``read_lnlfm_cl_rerun``): the new protocol's votes on Confident
  Learning's hypothesized items.
* ``cleanlab`` (``read_cleanlab_mturk``; cleanlab/label-errors ``mturk/<dataset>_mturk.json``): the *old*
  protocol's (Northcutt et al. 2021) votes on the same items, with CL's guessed label.

Verdict rules (the paper's Sec. 5, ``shared.metrics.agreement``): 5 votes per item; "Non-Error" if >= 3 choose the
original label; "Correctable" if >= 3 choose CL's *guessed* label (the only rule that reproduces Amazon's
357/148/495; on binary IMDB the guessed label is the other label, so it is the paper's "same replacement
label" rule); otherwise "Non-Agreement". A label error is anything but a Non-Error, so the precision of k
hypothesized items is ``1 - NE / k`` (Table 3's P,R@Err% for IMDB and Amazon).

Vote layouts (``LAYOUTS``): the task labels in class-id order, then the answers that are not task labels.
IMDB: negative, positive, neutral, off_topic (cleanlab's and the rerun's ``given``/``guessed`` counts are
re-keyed by the item's original label, which is what reproduces Table 6's kappa). Amazon (and the 3-class
VADER fixture): negative, neutral, positive, off_topic.

    old = old_protocol(cleanlab_table, "imdb")            # id, given, guessed, votes_*, category
    new = new_protocol(release.cl_rerun, "imdb")          # Amazon: new_protocol(rerun, "amazon", cleanlab_table)
    table2(old, new)                                      # 4 x 4 grid with totals
    fleiss_kappa(vote_counts(old)), fleiss_kappa(vote_counts(new))     # Table 6
    counts_at_k(release.main, TABLE8_METHODS["imdb"])     # Table 8 row: C / NA / NE per method, precision
    r = reanalyse(release.main, release.cl_rerun, cleanlab_table, "amazon")   # all of the above at once

Offline, ``vader_panel_release`` writes the same three files for the VADER analogue (real detections on VADER's
test split; two disjoint panels of 5 of its 10 raters standing for the old and new protocol), so the notebook
reads them back through the release's own readers. Fig. 5's data: ``verdicts_by_item`` and ``loss_groups``.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from shared.errors import ConfigError, DataFormatError, unknown_choice
from shared.metrics.agreement import (CORRECTABLE, MTURK_CATEGORIES, NON_AGREEMENT, NON_ERROR, fleiss_kappa,
                                      mturk_categories)

SHORT = {CORRECTABLE: "C", NON_AGREEMENT: "NA", NON_ERROR: "NE"}
TOTAL = "Total"


# ---------------------------------------------------------------------------------------------- layouts
@dataclass(frozen=True)
class Layout:
    """Answer options of one dataset's MTurk task: ``labels`` (class id order), then the other ``options``."""

    labels: tuple[str, ...]
    options: tuple[str, ...]

    @property
    def vote_columns(self) -> list[str]:
        return [f"votes_{o}" for o in self.options]


LAYOUTS = {
    "imdb": Layout(("negative", "positive"), ("negative", "positive", "neutral", "off_topic")),
    "amazon": Layout(("negative", "neutral", "positive"), ("negative", "neutral", "positive", "off_topic")),
}

#: Table 8's methods -> the release's method column (None: not in ``main``; Amazon's CL items are only in the
#: rerun, so their categories come from ``new_protocol``).
TABLE8_METHODS = {"imdb": {"CL": "BL_CL", "FML": "FML_3", "FME": "FME"},
                  "amazon": {"CL": None, "FML": "FML_1", "FME": "FME"}}
#: Table 9's methods. IMDB's release has no column for FME's own top-316 items (only FME+CL's), so its FME
#: column cannot be recomputed; Amazon's FME_TOP is FME's top 381 items.
TABLE9_METHODS = {"imdb": {"FME": None, "FME+CL": "FME_CL"},
                  "amazon": {"FME": "FME_TOP", "FME+CL": "FME_CL"}}
#: Released verdict strings (``<m>_result_mt``) -> category; every "NA: ..." is a Non-Agreement.
RESULT_CATEGORIES = {"Correctable": CORRECTABLE, "Non-Error": NON_ERROR}
#: The verdict strings the VADER fixture writes (the Amazon release's vocabulary).
FIXTURE_RESULTS = {CORRECTABLE: "Correctable", NON_ERROR: "Non-Error", NON_AGREEMENT: "NA: General"}


def layout(dataset: str) -> Layout:
    if dataset not in LAYOUTS:
        raise unknown_choice("MTurk layout", dataset, LAYOUTS)
    return LAYOUTS[dataset]


def label_index(values, dataset: str, name: str = "label") -> np.ndarray:
    """Class ids (n,) from label names ("Positive", "negative", ...) or ids, in ``dataset``'s label order."""
    labels = layout(dataset).labels
    out = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(list(values)):
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 <= v < len(labels):
            out[i] = v
        elif isinstance(v, str) and v.strip().lower() in labels:
            out[i] = labels.index(v.strip().lower())
        elif isinstance(v, str) and v.strip().isdigit() and int(v) < len(labels):
            out[i] = int(v)
        else:
            raise DataFormatError(f"{name} {v!r} (row {i}) is not a {dataset} label; valid: "
                                  f"{', '.join(labels)} or 0..{len(labels) - 1}")
    return out


def _require(frame: pd.DataFrame, columns, what: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise ConfigError(f"{what} must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ConfigError(f"{what} lacks column(s) {missing}; it has {list(frame.columns)}")


def vote_counts(frame: pd.DataFrame) -> np.ndarray:
    """The ``votes_*`` columns of a verdict frame as an int count matrix (n_items, n_options)."""
    columns = [c for c in frame.columns if c.startswith("votes_")]
    if not columns:
        raise ConfigError(f"no votes_* columns in {list(frame.columns)}")
    return frame[columns].to_numpy(dtype=np.int64)


def _categorize(frame: pd.DataFrame, dataset: str) -> pd.DataFrame:
    lay = layout(dataset)
    guessed = frame["guessed"].to_numpy(dtype=np.int64)
    frame["category"] = mturk_categories(vote_counts(frame), frame["given"].to_numpy(dtype=np.int64),
                                         label_options=tuple(range(len(lay.labels))), guessed=guessed)
    return frame


def _vote_frame(ids, given, guessed, votes: dict, dataset: str) -> pd.DataFrame:
    lay = layout(dataset)
    frame = pd.DataFrame({"id": [str(i) for i in ids], "given": np.asarray(given, dtype=np.int64),
                          "guessed": np.asarray(guessed, dtype=np.int64)})
    for option in lay.options:
        frame[f"votes_{option}"] = np.asarray(votes[option], dtype=np.int64)
    if frame["id"].duplicated().any():
        raise DataFormatError(f"duplicate item ids, e.g. {frame['id'][frame['id'].duplicated()].iloc[0]!r}")
    return _categorize(frame, dataset)


def _rekey_given_guessed(given_votes, guessed_votes, given, guessed, n_labels: int) -> dict:
    """Binary given/guessed counts re-keyed by label (IMDB), as {label name index: votes}."""
    votes = {j: np.zeros(len(given), dtype=np.int64) for j in range(n_labels)}
    for j in range(n_labels):
        votes[j] = np.where(given == j, given_votes, 0) + np.where(guessed == j, guessed_votes, 0)
    return votes


# ---------------------------------------------------------------------------------------------- protocols
def old_protocol(cleanlab: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """Verdict frame of cleanlab's MTurk table (the old protocol): id, given, guessed, votes_*, category."""
    lay = layout(dataset)
    votes_in = ["mturk_given", "mturk_guessed", "mturk_neutral", "mturk_off_topic"] if dataset == "imdb" else \
        [f"mturk_{o}" for o in lay.options]
    _require(cleanlab, ["id", "given_original_label", "our_guessed_label", *votes_in], "the cleanlab MTurk table")
    given = label_index(cleanlab["given_original_label"], dataset, "given_original_label")
    guessed = label_index(cleanlab["our_guessed_label"], dataset, "our_guessed_label")
    if dataset == "imdb":
        by_label = _rekey_given_guessed(cleanlab["mturk_given"].to_numpy(), cleanlab["mturk_guessed"].to_numpy(),
                                        given, guessed, 2)
        votes = {"negative": by_label[0], "positive": by_label[1], "neutral": cleanlab["mturk_neutral"],
                 "off_topic": cleanlab["mturk_off_topic"]}
    else:
        votes = {o: cleanlab[f"mturk_{o}"] for o in lay.options}
    return _vote_frame(cleanlab["id"], given, guessed, votes, dataset)


def new_protocol(cl_rerun: pd.DataFrame, dataset: str, cleanlab: pd.DataFrame | None = None) -> pd.DataFrame:
    """Verdict frame of a ``<dataset>_mturk_cl_rerun.csv`` (the new protocol on CL's items).

    ``id`` is the cleanlab id (``id_cl``), so the frame joins ``old_protocol``'s; ``lnlfm_id`` keeps the CSV's
    own ``id``. IMDB's guessed label is the other label. Amazon's rerun has no guessed label, so ``cleanlab``
    (its MTurk table) is required: "Correctable" means >= 3 votes for CL's guessed label.
    """
    lay = layout(dataset)
    if dataset == "imdb":
        _require(cl_rerun, ["id", "id_cl", "label", "mturk_given", "mturk_guessed", "mturk_neutral",
                            "mturk_off_topic"], "the IMDB cl_rerun table")
        given = label_index(cl_rerun["label"], dataset, "label")
        if "given_original_label" in cl_rerun.columns:
            named = label_index(cl_rerun["given_original_label"], dataset, "given_original_label")
            if (named != given).any():
                bad = int(np.flatnonzero(named != given)[0])
                raise DataFormatError(f"cl_rerun row {bad}: label {given[bad]} disagrees with given_original_label "
                                      f"{cl_rerun['given_original_label'].iloc[bad]!r}")
        guessed = 1 - given
        by_label = _rekey_given_guessed(cl_rerun["mturk_given"].to_numpy(), cl_rerun["mturk_guessed"].to_numpy(),
                                        given, guessed, 2)
        votes = {"negative": by_label[0], "positive": by_label[1], "neutral": cl_rerun["mturk_neutral"],
                 "off_topic": cl_rerun["mturk_off_topic"]}
    else:
        _require(cl_rerun, ["id", "id_cl", "given_original_label", *[f"mturk_{o}" for o in lay.options]],
                 f"the {dataset} cl_rerun table")
        if cleanlab is None:
            raise ConfigError(f"{dataset}: the rerun CSV has no guessed label; pass cleanlab= (cleanlab's "
                              f"{dataset}_mturk.json, read_cleanlab_mturk): 'Correctable' needs >= 3 votes for "
                              "CL's guessed label")
        _require(cleanlab, ["id", "given_original_label", "our_guessed_label"], "the cleanlab MTurk table")
        given = label_index(cl_rerun["given_original_label"], dataset, "given_original_label")
        ref = cleanlab.assign(key=cleanlab["id"].map(str)).drop_duplicates("key").set_index("key")
        keys = cl_rerun["id_cl"].map(str)
        missing = ~keys.isin(ref.index)
        if missing.any():
            raise DataFormatError(f"{int(missing.sum())} rerun items are not in the cleanlab table "
                                  f"(e.g. id_cl {keys[missing].iloc[0]!r})")
        guessed = label_index(ref.loc[keys, "our_guessed_label"].tolist(), dataset, "our_guessed_label")
        ref_given = label_index(ref.loc[keys, "given_original_label"].tolist(), dataset, "given_original_label")
        if (ref_given != given).any():
            bad = int(np.flatnonzero(ref_given != given)[0])
            raise DataFormatError(f"id_cl {keys.iloc[bad]!r}: the rerun's given label differs from cleanlab's")
        votes = {o: cl_rerun[f"mturk_{o}"] for o in lay.options}
    frame = _vote_frame(cl_rerun["id_cl"], given, guessed, votes, dataset)
    frame.insert(1, "lnlfm_id", cl_rerun["id"].to_numpy())
    return frame


# ---------------------------------------------------------------------------------------------- Tables 2 and 6
def _check_categories(values, what: str) -> np.ndarray:
    cat = np.asarray(values, dtype=object)
    unknown = ~np.isin(cat, MTURK_CATEGORIES)
    if unknown.any():
        raise ConfigError(f"{what}: unknown categories {sorted(set(map(str, cat[unknown])))[:5]}; "
                          f"valid: {', '.join(MTURK_CATEGORIES)}")
    return cat


def table2(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Table 2: items by old-protocol category (rows) and new-protocol category (columns), with totals.

    ``old`` and ``new`` need ``id`` and ``category``; they must hold the same items.
    """
    _require(old, ["id", "category"], "old")
    _require(new, ["id", "category"], "new")
    a, b = old.assign(id=old["id"].map(str)), new.assign(id=new["id"].map(str))
    for frame, what in ((a, "old"), (b, "new")):
        _check_categories(frame["category"], what)
        if frame["id"].duplicated().any():
            raise ConfigError(f"{what} has duplicate ids, e.g. {frame['id'][frame['id'].duplicated()].iloc[0]!r}")
    only_old, only_new = set(a["id"]) - set(b["id"]), set(b["id"]) - set(a["id"])
    if only_old or only_new:
        raise ConfigError(f"old and new must cover the same items: {len(only_old)} only in old, {len(only_new)} "
                          f"only in new (e.g. {sorted(only_old or only_new)[:3]})")
    joined = a[["id", "category"]].merge(b[["id", "category"]], on="id", suffixes=("_old", "_new"))
    grid = pd.crosstab(pd.Categorical(joined["category_old"], MTURK_CATEGORIES),
                       pd.Categorical(joined["category_new"], MTURK_CATEGORIES), dropna=False)
    grid = grid.reindex(index=list(MTURK_CATEGORIES), columns=list(MTURK_CATEGORIES), fill_value=0).astype(int)
    grid[TOTAL] = grid.sum(axis=1)
    grid.loc[TOTAL] = grid.sum(axis=0)
    grid.index.name, grid.columns.name = "old protocol", "new protocol"
    return grid


def protocol_kappa(old: pd.DataFrame, new: pd.DataFrame) -> dict:
    """Table 6: Fleiss' kappa of each protocol's votes over its answer options ({"old": k, "new": k})."""
    return {"old": fleiss_kappa(vote_counts(old)), "new": fleiss_kappa(vote_counts(new))}


def kappa_difference_interval(old: pd.DataFrame, new: pd.DataFrame, n_boot: int, seed: int = 0) -> np.ndarray:
    """95 % percentile-bootstrap interval (2,) of kappa(new) - kappa(old) over the items.

    ``old`` and ``new`` hold the same items (``reanalyse``'s frames); with ``id`` columns ``new`` is aligned to
    ``old``'s order by id (the cleanlab JSON and the rerun CSV list the items in different orders), else they are
    taken row by row. Each resample draws items with replacement and keeps an item's old and new votes together;
    resamples where a kappa is undefined (every vote in one answer, only in tiny samples) are left out.
    """
    if "id" in old.columns and "id" in new.columns:
        ids_old, ids_new = old["id"].map(str), new["id"].map(str)
        if len(old) != len(new) or set(ids_old) != set(ids_new) or ids_new.duplicated().any():
            raise ConfigError("old and new must hold the same items (ids), once each")
        new = new.set_index(ids_new).loc[ids_old.to_numpy()].reset_index(drop=True)
    a, b = vote_counts(old), vote_counts(new)
    if len(a) != len(b) or not len(a):
        raise ConfigError(f"old and new must hold the same items, got {len(a)} and {len(b)}")
    if n_boot < 1:
        raise ConfigError(f"n_boot must be at least 1, got {n_boot}")
    rng = np.random.default_rng(seed)

    def difference(s):
        try:
            return fleiss_kappa(b[s]) - fleiss_kappa(a[s])
        except ConfigError:  # a resample whose votes all fall in one answer: kappa is undefined (tiny samples)
            return np.nan

    draws = np.array([difference(rng.integers(0, len(a), len(a))) for _ in range(n_boot)])
    if np.isnan(draws).all():
        return np.array([np.nan, np.nan])
    return np.nanpercentile(draws, [2.5, 97.5])


# ---------------------------------------------------------------------------------------------- Tables 8 and 9
def released_categories(main: pd.DataFrame, method: str, *, select: str = "sent") -> pd.Series:
    """The released verdicts of the items ``method`` sent (``select="sent"``) or flagged: a Series of
    categories indexed by the item ``idx``."""
    sel, res = f"{method}_{select}", f"{method}_result_mt"
    methods = sorted(c[:-len("_result_mt")] for c in main.columns if c.endswith("_result_mt"))
    if sel not in main.columns or res not in main.columns:
        raise ConfigError(f"no method {method!r} with columns {sel}/{res}; methods: {', '.join(methods)}")
    _require(main, ["idx"], "main")
    rows = main[main[sel].astype(bool)]
    results = rows[res].fillna("").astype(str).str.strip()
    if (results == "").any():
        raise DataFormatError(f"{method}: {int((results == '').sum())} {select} items have no MTurk result "
                              f"(e.g. idx {rows['idx'][results == ''].iloc[0]})")
    mapped = results.map(lambda r: RESULT_CATEGORIES.get(r, NON_AGREEMENT if r.startswith("NA:") else None))
    if mapped.isna().any():
        raise DataFormatError(f"{method}: unknown MTurk results {sorted(set(results[mapped.isna()]))[:3]}")
    return pd.Series(mapped.to_numpy(dtype=object), index=rows["idx"].to_numpy(), name=method)


def category_counts(categories) -> dict:
    """``{"k", "Correctable", "Non-Agreement", "Non-Error", "errors", "precision"}`` of one hypothesized set.

    ``errors`` = C + NA (a label error is anything but a Non-Error); ``precision`` = errors / k = 1 - NE / k.
    """
    cat = _check_categories(categories, "categories")
    k = len(cat)
    out = {"k": k, **{c: int((cat == c).sum()) for c in MTURK_CATEGORIES}}
    out["errors"] = out[CORRECTABLE] + out[NON_AGREEMENT]
    out["precision"] = out["errors"] / k if k else float("nan")
    return out


def counts_at_k(main: pd.DataFrame, methods: Mapping[str, str | None], *, extra: Mapping | None = None,
                select: str = "sent") -> pd.DataFrame:
    """Tables 8/9: one row per method (k, C, NA, NE, errors, precision) from the released verdicts.

    ``methods`` maps the paper's method name to its column in ``main``; a method mapped to None takes its
    categories from ``extra[name]`` (e.g. Amazon's CL: ``new_protocol(...)["category"]``) or, when absent
    there, gets a row of NaN (not released).
    """
    if not methods:
        raise ConfigError("methods is empty")
    extra = dict(extra or {})
    rows = []
    for name, column in methods.items():
        if column is not None:
            rows.append({"method": name, "column": column, **category_counts(released_categories(main, column,
                                                                                               select=select))})
        elif name in extra:
            rows.append({"method": name, "column": "(rerun)", **category_counts(extra[name])})
        else:
            rows.append({"method": name, "column": "(not released)"})
    table = pd.DataFrame(rows, columns=["method", "column", "k", *MTURK_CATEGORIES, "errors", "precision"])
    for c in ["k", *MTURK_CATEGORIES, "errors"]:
        table[c] = table[c].astype("Int64")
    table["precision"] = table["precision"].astype(float)
    return table


def sent_jaccard(main: pd.DataFrame, a: str, b: str, *, select: str = "sent") -> float:
    """Jaccard index of the item sets two methods sent (``|A & B| / |A | B|``)."""
    for m in (a, b):
        if f"{m}_{select}" not in main.columns:
            raise ConfigError(f"no column {m}_{select} in main")
    A = set(main.loc[main[f"{a}_{select}"].astype(bool), "idx"])
    B = set(main.loc[main[f"{b}_{select}"].astype(bool), "idx"])
    if not A | B:
        raise ConfigError(f"{a} and {b} sent no items")
    return len(A & B) / len(A | B)


# ---------------------------------------------------------------------------------------------- everything
@dataclass(frozen=True)
class Reanalysis:
    """The MTurk tables of one dataset (see ``reanalyse``)."""

    dataset: str
    old: pd.DataFrame
    new: pd.DataFrame
    grid: pd.DataFrame
    kappa: dict
    table8: pd.DataFrame
    table9: pd.DataFrame
    jaccard9: float

    def long(self, dataset: str | None = None, ours_on: str | None = None) -> pd.DataFrame:
        """Our numbers in the long form of ``lnlfn/reported/mturk.csv`` (keys: dataset, method, threshold,
        protocol, category, new_category; metrics count, fleiss_kappa, n_hypothesized, precision, jaccard)."""
        name = dataset or self.dataset
        rows = []

        def add(item, method, threshold, protocol, category, new_category, metric, value):
            rows.append({"item": item, "dataset": name, "method": method, "threshold": threshold,
                         "protocol": protocol, "category": category, "new_category": new_category,
                         "metric": metric, "value": value})

        for old_cat in self.grid.index:
            for new_cat in self.grid.columns:
                add("Table 2", "CL", "", "old x new", old_cat, new_cat, "count", int(self.grid.loc[old_cat, new_cat]))
        for protocol, value in self.kappa.items():
            add("Table 6", "CL", "", protocol, "", "", "fleiss_kappa", float(value))
        for item, table, threshold in (("Table 8", self.table8, "CL"), ("Table 9", self.table9, "FME+CL")):
            for r in table.to_dict("records"):
                if pd.isna(r["k"]):
                    continue
                for cat in MTURK_CATEGORIES:
                    add(item, r["method"], threshold, "new", cat, "", "count", int(r[cat]))
                if r["method"] == threshold:
                    add(item, r["method"], threshold, "new", "", "", "n_hypothesized", int(r["k"]))
                if item == "Table 8":
                    add("Table 3", r["method"], threshold, "new", "", "", "precision", float(r["precision"]))
        if not np.isnan(self.jaccard9):
            add("Table 9", "FME vs FME+CL", "FME+CL", "new", "", "", "jaccard", float(self.jaccard9))
        out = pd.DataFrame(rows)
        if ours_on is not None:
            out["ours_on"] = ours_on
        return out


def reanalyse(main: pd.DataFrame, cl_rerun: pd.DataFrame, cleanlab: pd.DataFrame, dataset: str, *,
              table8_methods: Mapping | None = None, table9_methods: Mapping | None = None) -> Reanalysis:
    """Tables 2, 6, 8 and 9 of one dataset from its release (``main``, ``cl_rerun``) and cleanlab's table.

    ``dataset`` picks the vote layout and the default method columns (``TABLE8_METHODS``/``TABLE9_METHODS``).
    Table 9's Jaccard index is computed from the two sent sets when both methods have a column, else NaN.
    """
    old = old_protocol(cleanlab, dataset)
    new = new_protocol(cl_rerun, dataset, cleanlab if dataset != "imdb" else None)
    m8 = dict(table8_methods or TABLE8_METHODS[dataset])
    m9 = dict(table9_methods or TABLE9_METHODS[dataset])
    table8 = counts_at_k(main, m8, extra={"CL": new["category"].to_numpy()})
    table9 = counts_at_k(main, m9)
    columns = list(m9.values())
    jac = sent_jaccard(main, *columns) if len(columns) == 2 and None not in columns else float("nan")
    return Reanalysis(dataset, old, new, table2(old, new), protocol_kappa(old, new), table8, table9, jac)


# ---------------------------------------------------------------------------------------------- Fig. 5
def flipped_labels(labels, n_classes: int, *, seed: int = 0) -> np.ndarray:
    """Each label replaced by a uniformly random *other* class (uniform noise)."""
    y = np.asarray(labels, dtype=np.int64)
    if n_classes < 2 or (len(y) and (y.min() < 0 or y.max() >= n_classes)):
        raise ConfigError(f"labels must lie in 0..{n_classes - 1} with n_classes >= 2")
    rng = np.random.default_rng(seed)
    return (y + rng.integers(1, n_classes, size=len(y))) % n_classes


def loss_groups(probs, labels, groups: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """Fig. 5's data: the loss -log p(label | x) of the items of each group, long form (group, item, loss).

    ``groups`` maps a name to a boolean mask (n,) or to ``(mask, labels)`` to score other labels (e.g. the
    flipped labels of clean items).
    """
    from lnlfn.scoring import loss_scores

    P = np.asarray(probs, dtype=np.float64)
    if P.ndim != 2:
        raise ConfigError(f"probs must be (n_items, n_classes), got shape {P.shape}")
    y = np.asarray(labels, dtype=np.int64)
    if len(y) != len(P):
        raise ConfigError(f"labels has {len(y)} items but probs has {len(P)}")
    parts = []
    for name, spec in groups.items():
        mask, lab = spec if isinstance(spec, tuple) else (spec, y)
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (len(P),) or len(np.asarray(lab)) != len(P):
            raise ConfigError(f"group {name!r}: mask and labels must have shape ({len(P)},)")
        idx = np.flatnonzero(mask)
        loss = loss_scores(P[idx], np.asarray(lab, dtype=np.int64)[idx])
        parts.append(pd.DataFrame({"group": name, "item": idx, "loss": loss}))
    return pd.concat(parts, ignore_index=True)


def verdicts_by_item(main: pd.DataFrame, methods: Sequence[str], *, select: str = "sent") -> pd.Series:
    """One released verdict per item that any of ``methods`` sent (the first method's, in order), by ``idx``."""
    out = pd.Series(dtype=object)
    for m in methods:
        cats = released_categories(main, m, select=select)
        out = pd.concat([out, cats[~cats.index.isin(out.index)]])
    return out


# ---------------------------------------------------------------------------------------------- VADER fixture
#: The two disjoint panels of 5 of VADER's 10 rating columns: the "old" and the "new" protocol stand-ins.
PANELS = ((0, 1, 2, 3, 4), (5, 6, 7, 8, 9))
_OPTION_NAMES = ("negative", "neutral", "positive")  # VADER classes = Amazon's labels


def panel_counts(annotations, panel: Sequence[int], n_labels: int = 3) -> np.ndarray:
    """Votes (n, n_labels + 1) of one panel of rater columns: the labels' counts, then off-topic (always 0)."""
    A = np.asarray(annotations)
    if A.ndim != 2:
        raise ConfigError(f"annotations must be (n_items, n_raters), got shape {A.shape}")
    panel = list(panel)
    if not panel or min(panel) < 0 or max(panel) >= A.shape[1] or len(set(panel)) != len(panel):
        raise ConfigError(f"panel {panel} must be distinct rater columns in 0..{A.shape[1] - 1}")
    sub = A[:, panel]
    if (sub < 0).any() or (sub >= n_labels).any():
        raise ConfigError(f"panel votes must be class ids 0..{n_labels - 1} (every rater of the panel rated "
                          "every item)")
    counts = np.stack([(sub == j).sum(axis=1) for j in range(n_labels)], axis=1)
    return np.concatenate([counts, np.zeros((len(A), 1), dtype=np.int64)], axis=1).astype(np.int64)


def panel_verdicts(annotations, labels, panel: Sequence[int], *, guessed=None) -> np.ndarray:
    """MTurk categories of one panel's votes: Correctable needs >= 3 votes for ``guessed`` when given (CL's
    items), else for any other label (the paper's rule)."""
    if len(panel) != 5:
        raise ConfigError(f"the MTurk rules assume 5 workers per item; panel has {len(panel)}")
    counts = panel_counts(annotations, panel)
    return mturk_categories(counts, np.asarray(labels, dtype=np.int64), label_options=(0, 1, 2),
                            guessed=None if guessed is None else np.asarray(guessed, dtype=np.int64))


def vader_panel_release(out_dir, *, idx, ids, labels, annotations, flagged: Mapping[str, np.ndarray],
                        pred: Mapping[str, np.ndarray], cl_method: str = "BL_CL", panels=PANELS,
                        name: str = "vader", bom: bool = True) -> dict:
    """Write an lnlfm-format MTurk release of the VADER analogue (Amazon's 3-class layout) into ``out_dir``.

    Args:
        idx: (n,) int item ids (main ``idx``, cleanlab ``id`` and rerun ``id_cl``); ids: (n,) str (rerun ``id``).
        labels: (n,) given labels 0 negative / 1 neutral / 2 positive.
        annotations: (n, >= 10) rater classes (``TextDataset.annotations``).
        flagged: method -> bool (n,), the items each method hypothesizes; every item flagged is "sent".
            ``cl_method``'s items go to the rerun CSV and the cleanlab-style JSON, the others to main.
        pred: method -> (n,) predicted labels (``<m>_pred``); for ``cl_method``, CL's guessed label, which
            must differ from the given label on its flagged items.
        panels: (old, new) rater columns: the first panel's votes stand for the old protocol (JSON), the
            second's for the new (main and rerun).

    Files: ``<name>_mturk_main.csv`` (one row per item; votes only where some method sent it; verdict per
    sent method, any replacement label counting as Correctable), ``<name>_mturk_cl_rerun.csv`` (starting with a
    UTF-8 byte-order mark when ``bom``, as the released ``*_cl_rerun.csv`` files do) and ``mturk.json``. Returns
    their paths as {"main", "cl_rerun", "cleanlab"}.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    idx = np.asarray(idx, dtype=np.int64)
    n = len(idx)
    y = np.asarray(labels, dtype=np.int64)
    ids = np.asarray(ids).astype(str)
    A = np.asarray(annotations)
    if len(y) != n or len(ids) != n or A.shape[0] != n:
        raise ConfigError(f"idx, ids, labels and annotations must have {n} rows")
    if len(np.unique(idx)) != n:
        raise ConfigError("idx must be unique item ids")
    if len(panels) != 2:
        raise ConfigError("panels must be (old panel, new panel)")
    if cl_method not in flagged or cl_method not in pred:
        raise ConfigError(f"flagged and pred need the CL method {cl_method!r}")
    masks = {}
    for m, mask in flagged.items():
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (n,):
            raise ConfigError(f"flagged[{m!r}] must have shape ({n},), got {mask.shape}")
        if m not in pred or np.asarray(pred[m]).shape != (n,):
            raise ConfigError(f"pred[{m!r}] must be given with shape ({n},)")
        if not m.replace("_", "").isalnum():
            raise ConfigError(f"method names must be letters, digits and '_', got {m!r}")
        masks[m] = mask
    cl_items = np.flatnonzero(masks[cl_method])
    guessed = np.asarray(pred[cl_method], dtype=np.int64)
    if (guessed[cl_items] == y[cl_items]).any():
        raise ConfigError(f"pred[{cl_method!r}] (CL's guessed label) equals the given label on flagged items")
    old_votes, new_votes = panel_counts(A, panels[0]), panel_counts(A, panels[1])
    main_methods = [m for m in masks if m != cl_method]
    verdict = panel_verdicts(A, y, panels[1])  # the same rule (any replacement label) for every main method
    sent_any = np.zeros(n, dtype=bool)
    for m in main_methods:
        sent_any |= masks[m]

    header = ["idx", "label", "votes_negative", "votes_neither", "votes_neutral", "votes_positive"]
    for m in main_methods:
        header += [f"{m}_pred", f"{m}_flagged", f"{m}_sent", f"{m}_result_mt"]
    main_path = out / f"{name}_mturk_main.csv"
    with open(main_path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for i in range(n):
            neg, neu, pos, off = new_votes[i]
            row = [int(idx[i]), int(y[i])] + ([int(neg), int(off), int(neu), int(pos)] if sent_any[i] else [""] * 4)
            for m in main_methods:
                flag = bool(masks[m][i])
                row += [int(pred[m][i]), "TRUE" if flag else "FALSE", "TRUE" if flag else "FALSE",
                        FIXTURE_RESULTS[verdict[i]] if flag else ""]
            w.writerow(row)

    title = [s.capitalize() for s in _OPTION_NAMES]
    rerun_path = out / f"{name}_mturk_cl_rerun.csv"
    with open(rerun_path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "id_cl", "given_original_label", "mturk_positive", "mturk_negative", "mturk_neutral",
                    "mturk_off_topic"])
        for i in cl_items:
            neg, neu, pos, off = new_votes[i]
            w.writerow([ids[i], int(idx[i]), title[y[i]], int(pos), int(neg), int(neu), int(off)])
    items = []
    for i in cl_items:
        neg, neu, pos, off = old_votes[i]
        items.append({"id": int(idx[i]), "url": "", "given_original_label": title[y[i]],
                      "our_guessed_label": title[guessed[i]],
                      "mturk": {"positive": int(pos), "negative": int(neg), "neutral": int(neu),
                                "off-topic": int(off)}})
    json_path = out / "mturk.json"
    json_path.write_text(json.dumps(items, indent=1), encoding="utf-8")
    return {"main": main_path, "cl_rerun": rerun_path, "cleanlab": json_path}


# ---------------------------------------------------------------------------------------------- real files
def locate_cleanlab_mturk(dataset: str, data_dir=None, label_errors_dir=None) -> Path:
    """cleanlab/label-errors ``mturk/<dataset>_mturk.json`` in ``label_errors_dir`` or ``<data_dir>/label-errors``
    (``<data_dir>/cleanlab-label-errors``); a DataNotFoundError naming the paths and the fix when absent."""
    from lnlfn.data import LABEL_ERRORS_FILES, LABEL_ERRORS_URL, missing_data_error
    from shared.paths import data_dir as resolve_data_dir

    layout(dataset)
    root = resolve_data_dir(data_dir)
    relative = LABEL_ERRORS_FILES[f"{dataset}_mturk"]
    folders = [Path(label_errors_dir).expanduser()] if label_errors_dir is not None else \
        [root / "label-errors", root / "cleanlab-label-errors"]
    for folder in folders:
        if (folder / relative).is_file():
            return folder / relative
    raise missing_data_error(f"cleanlab's MTurk results ({dataset}, the old protocol)",
                             [f / relative for f in folders], f"Clone {LABEL_ERRORS_URL} into {folders[0]}.")


def load_cleanlab_mturk(dataset: str, data_dir=None, label_errors_dir=None) -> pd.DataFrame:
    """cleanlab/label-errors ``mturk/<dataset>_mturk.json`` (the old protocol's votes) under ``data_dir``."""
    from lnlfn.data import read_cleanlab_mturk

    return read_cleanlab_mturk(locate_cleanlab_mturk(dataset, data_dir, label_errors_dir))




@dataclass(frozen=True)
class CleanlabProbs:
    """IMDB test reviews with cleanlab's cross-validated probabilities (see ``imdb_cl_probs``).

    ``idx`` (n,) the dcx/lnlfm CSV index, ``labels`` (n,) the original labels, ``probs`` (n, 2); ``n_reviews``
    the aclImdb test reviews, ``n_left_out`` those without probabilities, and ``note`` why (from the loader's meta).
    """

    idx: np.ndarray
    labels: np.ndarray
    probs: np.ndarray
    n_reviews: int
    n_left_out: int
    note: str


def imdb_cl_probs(data_dir=None) -> CleanlabProbs:
    """IMDB's test reviews with cleanlab's cross-validated probabilities (Fig. 5 in the full profile).

    The probabilities are cleanlab's ``imdb_test_set_pyx.npy`` (a FastText model cross-validated by Northcutt et
    al., *not* the paper's DeBERTa), joined to aclImdb by cleanlab's index. That index names 24,799 distinct
    files in its 25,000 rows, so about 201 test reviews have no probabilities: they are left out, and
    ``n_left_out``/``note`` say how many and why (``lnlfn.data.CL_INDEX_NOTE``). Needs ``aclImdb`` and a
    cleanlab/label-errors clone under ``data_dir``; raises a DataNotFoundError naming what is missing.
    """
    from lnlfn.data import LABEL_ERRORS_FILES, LABEL_ERRORS_URL, load_imdb, missing_data_error
    from shared.paths import data_dir as resolve_data_dir

    ds = load_imdb(data_dir, splits=("test",))
    if "cl_pred_probs" not in ds.columns:
        root = resolve_data_dir(data_dir)
        raise missing_data_error("cleanlab's cross-validated IMDB probabilities",
                                 [root / "label-errors" / LABEL_ERRORS_FILES["imdb_pred_probs"]],
                                 f"Clone {LABEL_ERRORS_URL} into {root / 'label-errors'}.")
    probs = ds.columns["cl_pred_probs"]
    keep = ~np.isnan(probs).any(axis=1)
    if not keep.any():
        raise DataFormatError(f"none of the {len(ds)} aclImdb test reviews is named by cleanlab's "
                              "imdb_test_set_index_to_filename.json: is it the index of another aclImdb copy?")
    left_out = int((~keep).sum())
    meta = ds.meta
    note = (f"{left_out} of {len(ds)} aclImdb test reviews have no cleanlab probabilities and are left out: cleanlab's "
            f"index has {meta.get('cl_index_entries')} entries but names {meta.get('cl_distinct_names')} distinct "
            f"files ({meta.get('cl_repeated_names')} names repeated), so its README's recipe reads some reviews twice "
            f"and never reads these ({meta.get('cl_unnamed_same_text')} of them have exactly the text of a review "
            "named more than once)." if left_out else
            f"all {len(ds)} aclImdb test reviews have cleanlab probabilities")
    return CleanlabProbs(ds.columns["lnlfm_idx"][keep].astype(np.int64), ds.labels[keep], probs[keep], len(ds),
                         left_out, note)


__all__ = [
    "SHORT", "TOTAL", "Layout", "LAYOUTS", "TABLE8_METHODS", "TABLE9_METHODS", "RESULT_CATEGORIES",
    "FIXTURE_RESULTS", "layout", "label_index", "vote_counts", "old_protocol", "new_protocol", "table2",
    "protocol_kappa", "kappa_difference_interval", "released_categories", "category_counts", "counts_at_k",
    "sent_jaccard", "Reanalysis",
    "reanalyse", "flipped_labels", "loss_groups", "verdicts_by_item", "PANELS", "panel_counts", "panel_verdicts",
    "vader_panel_release", "load_cleanlab_mturk", "CleanlabProbs", "imdb_cl_probs",
]
