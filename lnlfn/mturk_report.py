"""The page behind ``lnlfn/04_mturk_reanalysis.ipynb``: Tables 2, 6, 8, 9 and Fig. 5 from the MTurk votes.

    from lnlfn.mturk_report import MTurkPage
    page = MTurkPage("full", data_dir="~/data")     # or "smoke": the VADER panel analogue
    page.run()              # reads the releases (smoke: makes the detections and writes one first); what is skipped
    page.table2(); page.table6(); page.table8(); page.table9()
    page.compare_with_paper()
    page.claims()           # every claim: yes / no / not run (with the reason); writes the report
    page.figure5()

**What needs which data** (full profile). Tables 2, 6, 8 and 9 of a dataset need its dcx/lnlfm CSVs
(``lnlfm/mturk/``) and cleanlab's MTurk JSON (``label-errors/mturk/``); Fig. 5 needs in addition ``aclImdb/`` and
cleanlab's IMDB probabilities. An item whose data is absent (DataNotFoundError) or unreadable (DataFormatError: a
git-LFS pointer, a malformed row) is *skipped*, with the loader's message as the reason, and its claims are recorded
as "not run"; everything else is still compared with the paper and claimed, so a missing ``aclImdb`` (which Tables
2-9 do not need) costs only Fig. 5. A full run with none of its inputs raises a DataNotFoundError listing why.

The pieces are plain functions on DataFrames (``load_releases``, ``vader_analogue``, ``release_claims``,
``analogue_claims``, ``fig5_losses``, ...), tested on tiny inputs in ``tests/lnlfn/test_mturk_report.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from lnlfn import mturk
from lnlfn.experiments import brief, skip_reason
from shared.errors import ConfigError, DataFormatError, DataNotFoundError
from shared.metrics.agreement import CORRECTABLE, MTURK_CATEGORIES, NON_AGREEMENT, NON_ERROR, fleiss_kappa
from shared.tables import show_table

NOTEBOOK = "04_mturk_reanalysis"
#: our datasets -> the dataset of the paper's numbers they are set beside
PAPER_DATASET = {"vader": "amazon", "imdb": "imdb", "amazon": "amazon"}
OURS_ON = {"vader": "VADER panel analogue (smoke): VADER test tokens, rater panels 0-4 vs 5-9",
           "imdb": "lnlfm + cleanlab release", "amazon": "lnlfm + cleanlab release"}
COMPARISON_KEYS = ["dataset", "method", "threshold", "protocol", "category", "new_category"]
RELEASE_SOURCE = "lnlfm release (github.com/dcx/lnlfm mturk/)"  # the ``source`` of lnlfn/reported/mturk.csv's release-grid rows
FIG5_GROUPS = ("uniform flip of clean items (same model)", "Correctable (verified)", "Non-Error (verified)",
               "clean (never hypothesized)")


# ---------------------------------------------------------------------------------------------- data
@dataclass
class Release:
    """One dataset's MTurk files as read: ``layout`` ("imdb"/"amazon"), ``main``, ``methods``, ``cl_rerun``,
    ``cleanlab`` (the old protocol's table)."""

    layout: str
    main: pd.DataFrame
    methods: tuple
    cl_rerun: pd.DataFrame
    cleanlab: pd.DataFrame


def load_releases(datasets, data_dir=None) -> tuple[dict, dict]:
    """The real releases of ``datasets`` ({name: Release}) and the skipped ones ({name: reason}).

    A dataset whose files are absent (DataNotFoundError) or unreadable (DataFormatError) is skipped with the
    loader's message.
    """
    from lnlfn.data import load_lnlfm_mturk

    releases, skipped = {}, {}
    for name in datasets:
        mturk.layout(name)
        try:
            release = load_lnlfm_mturk(name, data_dir)
            cleanlab = mturk.load_cleanlab_mturk(name, data_dir)
        except (DataNotFoundError, DataFormatError) as e:
            skipped[name] = skip_reason(e)
            continue
        releases[name] = Release(name, release.main, release.methods, release.cl_rerun, cleanlab)
    return releases, skipped


def read_written_release(paths: Mapping[str, Path], layout: str = "amazon") -> Release:
    """A release written by ``mturk.vader_panel_release``, read back with the release's own readers."""
    from lnlfn.data import read_cleanlab_mturk, read_lnlfm_cl_rerun, read_lnlfm_main

    main, methods = read_lnlfm_main(paths["main"], layout)
    return Release(layout, main, methods, read_lnlfm_cl_rerun(paths["cl_rerun"], layout),
                   read_cleanlab_mturk(paths["cleanlab"]))


@dataclass
class VaderAnalogue:
    """The smoke profile's detections on VADER's test split and the release written from them."""

    y: np.ndarray  # (n,) given labels of the test tokens
    idx: np.ndarray  # (n,) the tokens' rows in the lexicon (the release's item ids)
    annotations: np.ndarray  # (n, 10) rater classes
    flagged: dict  # release method column -> bool (n,)
    guessed: np.ndarray  # (n,) CL's guessed label (never the given one)
    fme_probs: np.ndarray  # (n, 3) FME's probabilities (Fig. 5)
    panels: tuple  # (old panel, new panel) rater columns
    k_cl: int
    k_fmecl: int
    heads: pd.DataFrame  # the smoke sweep's heads
    summary: str
    paths: dict = field(default_factory=dict)


def top_mask(ranked, k: int, n: int) -> np.ndarray:
    """Boolean mask (n,) of the first ``k`` items of a ranking."""
    mask = np.zeros(n, dtype=bool)
    mask[np.asarray(ranked)[:k]] = True
    return mask


def guessed_labels(probs, labels) -> np.ndarray:
    """CL's guessed label: the most probable class other than the given one."""
    others = np.array(probs, dtype=np.float64)
    others[np.arange(len(others)), np.asarray(labels)] = -np.inf
    return others.argmax(axis=1)


def analogue_heads(cfg) -> tuple[list, object]:
    """The VADER analogue's runs: the smoke heads on frozen MiniLM embeddings (FML, FME) and CL's non-pretrained
    model (char n-gram logistic regression with ``cfg.baseline_C``); ``lnlfn.cost`` plans the same."""
    from lnlfn.scoring import HeadConfig, smoke_heads

    return smoke_heads(), HeadConfig("logreg", C=cfg.baseline_C)


def vader_analogue(cfg, out_dir, device: str = "auto") -> VaderAnalogue:
    """Detections on VADER's test split (CL on char n-grams; FML, FME, FME+CL, FML+CL from heads on frozen MiniLM
    embeddings), "sent" to two panels of raters and written as an lnlfm-format release under ``out_dir``."""
    from lnlfn.data import load_vader
    from shared.text.encoders import embed, ngram_features
    from lnlfn.scoring import cl, fme, fml, holdout_probs, run_sweep, with_cl
    from shared.device import select_device

    ds = load_vader()
    test = ds.indices("test")
    train = ds.split == "train"
    scored = ~train  # validation + test: the heads train on the train split, are selected on val, score test
    heads, baseline_head = analogue_heads(cfg)
    E = embed(ds.texts, device=str(select_device(device)))
    sweep = run_sweep(E[scored], ds.labels[scored], heads, train=(E[train], ds.labels[train]),
                      val=ds.split[scored] == "val").restrict(ds.split[scored] == "test")
    X_train, X_test = ngram_features([ds.texts[i] for i in np.flatnonzero(train)], [ds.texts[i] for i in test],
                                     kind="char")
    baseline = holdout_probs(X_train, ds.labels[train], X_test, baseline_head, n_classes=3)
    y = ds.labels[test]
    det = {"CL": cl(baseline, y, filter_by=cfg.cl_filter_by), "FML": fml(sweep), "FME": fme(sweep, k=cfg.fme_k)}
    det["FME+CL"] = with_cl(det["FME"], filter_by=cfg.cl_filter_by)
    det["FML+CL"] = with_cl(det["FML"], filter_by=cfg.cl_filter_by)
    n, k_cl, k_fmecl = len(y), det["CL"].n_flagged, det["FME+CL"].n_flagged
    guessed = guessed_labels(baseline, y)
    flagged = {"BL_CL": det["CL"].flagged, "FML_1": top_mask(det["FML"].ranked(), k_cl, n),
               "FME": top_mask(det["FME"].ranked(), k_cl, n), "FME_CL": det["FME+CL"].flagged,
               "FML_CL_1": det["FML+CL"].flagged, "FME_TOP": top_mask(det["FME"].ranked(), k_fmecl, n)}
    fme_pred, fml_pred = det["FME"].probs.argmax(1), det["FML"].probs.argmax(1)
    pred = {"BL_CL": guessed, "FML_1": fml_pred, "FME": fme_pred, "FME_CL": fme_pred, "FML_CL_1": fml_pred,
            "FME_TOP": fme_pred}
    idx = np.array([int(s.split(":")[1]) for s in ds.ids[test]])  # the token's row in the lexicon
    panels = tuple(tuple(p) for p in cfg.panels)
    paths = mturk.vader_panel_release(Path(out_dir) / "vader_release", idx=idx, ids=ds.ids[test], labels=y,
                                      annotations=ds.annotations[test], flagged=flagged, pred=pred, panels=panels)
    summary = (f"VADER test split: {n} tokens; CL (char n-grams) flags {k_cl}, FME+CL {k_fmecl}, FML+CL "
               f"{det['FML+CL'].n_flagged}; FME = heads {list(det['FME'].heads)}, FML = head {det['FML'].heads[0]}")
    heads = pd.DataFrame(sweep.table())[["head", "val_accuracy", "val_loss", "rank"]]
    return VaderAnalogue(y, idx, ds.annotations[test], flagged, guessed, det["FME"].probs, panels, k_cl, k_fmecl,
                         heads, summary, paths)


# ---------------------------------------------------------------------------------------------- tables
def overview(releases: Mapping[str, Release]) -> pd.DataFrame:
    """One row per release read: rows in main, CL items in the rerun and in cleanlab's table, items sent per method."""
    return pd.DataFrame([{"dataset": name, "rows in main": len(r.main), "CL items (rerun)": len(r.cl_rerun),
                          "CL items (old protocol)": len(r.cleanlab),
                          **{f"sent: {m}": int(r.main[f"{m}_sent"].sum()) for m in r.methods}}
                         for name, r in releases.items()])


def table2_changes(results: Mapping[str, mturk.Reanalysis]) -> pd.DataFrame:
    """Per dataset: CL's items, Non-Agreement under each protocol, its change, and the items keeping their verdict."""
    rows = []
    for name, r in results.items():
        na_old, na_new = int(r.grid.loc[NON_AGREEMENT, "Total"]), int(r.grid.loc["Total", NON_AGREEMENT])
        kept = int(np.trace(r.grid.loc[list(MTURK_CATEGORIES), list(MTURK_CATEGORIES)].to_numpy()))
        rows.append({"dataset": name, "items": int(r.grid.loc["Total", "Total"]), "Non-Agreement (old)": na_old,
                     "Non-Agreement (new)": na_new,
                     "change": (na_new - na_old) / na_old if na_old else float("nan"), "same verdict": kept})
    return pd.DataFrame(rows, columns=["dataset", "items", "Non-Agreement (old)", "Non-Agreement (new)", "change",
                                       "same verdict"])


def kappa_table(results: Mapping[str, mturk.Reanalysis], n_boot: int, seed: int = 0) -> pd.DataFrame:
    """Table 6: Fleiss' kappa per protocol and dataset, with a bootstrap interval of the difference."""
    rows = []
    for name, r in results.items():
        lo, hi = mturk.kappa_difference_interval(r.old, r.new, n_boot, seed=seed)
        rows.append({"dataset": name, "old protocol": r.kappa["old"], "new protocol": r.kappa["new"],
                     "new - old": r.kappa["new"] - r.kappa["old"],
                     "95% interval of new - old": f"[{lo:+.3f}, {hi:+.3f}]"})
    return pd.DataFrame(rows, columns=["dataset", "old protocol", "new protocol", "new - old",
                                       "95% interval of new - old"])


def stacked(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per-dataset tables one below the other, with a leading ``dataset`` column."""
    if not tables:
        return pd.DataFrame()
    return pd.concat([t.assign(dataset=name)[["dataset", *t.columns]] for name, t in tables.items()],
                     ignore_index=True)


def ours_long(results: Mapping[str, mturk.Reanalysis]) -> pd.DataFrame:
    """Our numbers of every release in the long form of ``lnlfn/reported/mturk.csv``."""
    parts = [r.long(PAPER_DATASET[name], OURS_ON[name]) for name, r in results.items()]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[*COMPARISON_KEYS, "metric",
                                                                                   "value", "ours_on"])


# ---------------------------------------------------------------------------------------------- claims
@dataclass(frozen=True)
class Claim:
    """A claim as ``NotebookReport.claim`` takes it: ``holds`` None means not run."""

    statement: str
    holds: bool | None
    detail: str = ""


def _rows(comparison, item, dataset, source="paper", method=None) -> pd.DataFrame:
    part = comparison[(comparison["item"] == item) & (comparison["dataset"] == dataset)
                      & (comparison["source"] == source)]
    return part if method is None else part[part["method"].isin(method)]


def _matches(part, tol) -> bool | None:
    """Every paper number of ``part`` matched within ``tol``; None when there are none or ours are missing."""
    if not len(part) or part["ours"].isna().any():
        return None
    return bool((part["diff"].abs() <= tol).all())


def _mismatches(part, tol, show: int = 5) -> str:
    if not len(part):
        return "no paper numbers to compare"
    if part["ours"].isna().any():
        return f"{int(part['ours'].isna().sum())} of {len(part)} paper numbers have no counterpart of ours"
    bad = part[~(part["diff"].abs() <= tol)]
    listed = "; ".join(f"{r.method} {r.category}/{r.new_category} {r.metric}: paper {r.paper:g}, ours {r.ours:g}"
                       for r in bad.head(show).itertuples())
    return f"all {len(part)} match" if bad.empty else f"{len(bad)} of {len(part)} differ: {listed}"


def _not_run(statement: str, dataset: str, skipped: Mapping[str, str]) -> Claim:
    reason = skipped.get(dataset, f"{dataset} is not among settings['datasets']")
    return Claim(statement, None, f"not run: the {dataset} release was not read (data {brief(reason)})")


#: per dataset: (Table 6's kappas, §5's drop of Non-Agreement, E.2's errors found by FME and CL at CL's count)
PAPER_FACTS = {"imdb": {"label": "IMDB", "kappa": (0.1314, 0.4643), "na_drop": 0.35, "errors": (909, 541)},
               "amazon": {"label": "Amazon", "kappa": (0.0141, 0.5561), "na_drop": 0.65, "errors": (660, 505)}}


def release_claims(comparison: pd.DataFrame, results: Mapping[str, mturk.Reanalysis],
                   skipped: Mapping[str, str]) -> list[Claim]:
    """The full profile's claims, one set per dataset; a dataset whose release was not read gets "not run"."""
    claims = []
    for d, facts in PAPER_FACTS.items():
        label = facts["label"]
        statements = {
            "t2": (f"Table 2 ({label}) is reproduced exactly from the released votes" if d == "imdb" else
                   f"Table 2 ({label}): the released votes give the grid within 5 items per cell of the print, and "
                   "their new-protocol totals are Table 8's CL column (357/148/495), not Table 2's (357/153/490)"),
            "t6": (f"Table 6 ({label}): Fleiss' kappa of both protocols is reproduced to 4 decimals "
                   f"({facts['kappa'][0]:.4f} old, {facts['kappa'][1]:.4f} new)"),
            "t8": f"Table 8 ({label} rows) is reproduced exactly",
            "t9": (f"Table 9 ({label}): " + ("the FME+CL column is reproduced exactly (FME's own column is not "
                                             "released)" if d == "imdb" else "both columns are reproduced exactly")),
            "t3": f"Table 3's P,R@Err% for {label} is the precision 1 - NE/k at CL's count (2 decimals)",
            "na": (f"Non-Agreement on CL's {label} items falls by {facts['na_drop']:.0%} under the new protocol "
                   "(section 5)"),
            "e2": (f"At CL's count FME identifies {facts['errors'][0]} {label} label errors, against CL's "
                   f"{facts['errors'][1]} (App. E.2)"),
        }
        if d not in results:
            claims += [_not_run(s, d, skipped) for s in statements.values()]
            continue
        r = results[d]
        if d == "imdb":
            part = _rows(comparison, "Table 2", d)
            claims.append(Claim(statements["t2"], _matches(part, 0), _mismatches(part, 0)))
        else:
            printed, released = _rows(comparison, "Table 2", d), _rows(comparison, "Table 2", d, RELEASE_SOURCE)
            a, b = _matches(printed, 5), _matches(released, 0)
            holds = None if a is None or b is None else a and b
            largest = printed["diff"].abs().max() if len(printed) else float("nan")
            claims.append(Claim(statements["t2"], holds, f"largest |diff| to the print {largest:.0f}; release: "
                                + _mismatches(released, 0)))
        part = _rows(comparison, "Table 6", d)
        claims.append(Claim(statements["t6"], _matches(part, 5e-5 + 1e-12), _mismatches(part, 5e-5)))
        part = _rows(comparison, "Table 8", d)
        claims.append(Claim(statements["t8"], _matches(part, 0), _mismatches(part, 0)))
        part = _rows(comparison, "Table 9", d, method=["FME+CL"] if d == "imdb" else ["FME", "FME+CL"])
        part = part[part["metric"] != "jaccard"]
        claims.append(Claim(statements["t9"], _matches(part, 0), _mismatches(part, 0)))
        part = _rows(comparison, "Table 3", d)
        claims.append(Claim(statements["t3"], _matches(part, 0.005 + 1e-9), _mismatches(part, 0.005 + 1e-9)))
        na_old, na_new = r.grid.loc[NON_AGREEMENT, "Total"], r.grid.loc["Total", NON_AGREEMENT]
        if na_old:
            drop = 1 - na_new / na_old
            claims.append(Claim(statements["na"], bool(abs(drop - facts["na_drop"]) <= 0.01), f"{drop:.1%}"))
        else:
            claims.append(Claim(statements["na"], None, "not run: no Non-Agreement under the old protocol"))
        t8 = r.table8.set_index("method")
        fme_errors, cl_errors = t8.loc["FME", "errors"], t8.loc["CL", "errors"]
        if pd.isna(fme_errors) or pd.isna(cl_errors):
            claims.append(Claim(statements["e2"], None, "not run: FME's or CL's verdicts are not in the release"))
        else:
            claims.append(Claim(statements["e2"], (int(fme_errors), int(cl_errors)) == facts["errors"],
                                f"FME {int(fme_errors)}, CL {int(cl_errors)}"))
    return claims


def analogue_consistency(a: VaderAnalogue, r: mturk.Reanalysis) -> dict:
    """Whether the tables read back from the written files equal those computed from the panel votes in memory."""
    first, second = a.panels
    cl_items = a.flagged["BL_CL"]
    A, y = a.annotations, a.y
    in_memory_old = pd.DataFrame({"id": a.idx[cl_items].astype(str), "category": mturk.panel_verdicts(
        A[cl_items], y[cl_items], first, guessed=a.guessed[cl_items])})
    in_memory_new = in_memory_old.assign(category=mturk.panel_verdicts(A[cl_items], y[cl_items], second,
                                                                       guessed=a.guessed[cl_items]))
    any_label = mturk.panel_verdicts(A, y, second)  # FML/FME items: any replacement label is Correctable
    counts8 = {"CL": in_memory_new["category"], "FML": any_label[a.flagged["FML_1"]],
               "FME": any_label[a.flagged["FME"]]}
    counts9 = {"FME": any_label[a.flagged["FME_TOP"]], "FME+CL": any_label[a.flagged["FME_CL"]]}
    keys = ("k", "errors", "precision", *MTURK_CATEGORIES)

    def same_counts(table, counts):
        rows = table.set_index("method").to_dict("index")
        return all(mturk.category_counts(counts[m]) == {k: v for k, v in row.items() if k in keys}
                   for m, row in rows.items())

    return {
        "Table 2 grid": mturk.table2(in_memory_old, in_memory_new).equals(r.grid),
        "Table 6 kappa": np.allclose([fleiss_kappa(mturk.panel_counts(A[cl_items], p)) for p in a.panels],
                                     [r.kappa["old"], r.kappa["new"]], rtol=0, atol=1e-12),
        "Table 8 counts": same_counts(r.table8, counts8),
        "Table 9 counts": same_counts(r.table9, counts9),
    }


def analogue_claims(a: VaderAnalogue, r: mturk.Reanalysis) -> list[Claim]:
    """The smoke profile's claims: the written files read back give the in-memory tables, and the direction of
    Tables 8 and 9 on the analogue."""
    same = analogue_consistency(a, r)
    t8 = r.table8.set_index("method")
    claims = [
        Claim("The verdicts read back from the written lnlfm-format files (main, cl_rerun, cleanlab JSON) give the "
              "same Tables 2, 6, 8 and 9 as the panel votes computed in memory", all(same.values()),
              ", ".join(f"{k}: {'same' if v else 'DIFFERENT'}" for k, v in same.items())),
        Claim("At CL's count, FME's top-ranked items hold fewer Non-Errors than CL's (Table 8's direction)",
              bool(t8.loc["FME", NON_ERROR] < t8.loc["CL", NON_ERROR]),
              f"k = {a.k_cl}: NE " + ", ".join(f"{m} {t8.loc[m, NON_ERROR]} (precision {t8.loc[m, 'precision']:.3f})"
                                               for m in t8.index) + "; paper: IMDB 769 vs 401, Amazon 495 vs 340"),
        Claim("CL run on FME's probabilities (FME+CL) flags fewer items than CL on the non-pretrained baseline "
              "(Table 9 vs Table 8: 316 vs 1,310 on IMDB, 381 vs 1,000 on Amazon)", bool(a.k_fmecl < a.k_cl),
              f"FME+CL {a.k_fmecl}, CL {a.k_cl}"),
    ]
    statement = ("Overlaying CL changes FME's hypothesized items little: Jaccard(FME top-k, FME+CL) >= 0.5 at "
                 "FME+CL's count (paper 0.59-0.99; the 0.5 threshold is ours)")
    if np.isnan(r.jaccard9):
        claims.append(Claim(statement, None, "not run: FME+CL flagged no items, so there is no set to compare"))
    else:
        claims.append(Claim(statement, bool(r.jaccard9 >= 0.5), f"Jaccard {r.jaccard9:.2f} at k = {a.k_fmecl}"))
    return claims


# ---------------------------------------------------------------------------------------------- Fig. 5
@dataclass
class Fig5Data:
    """Fig. 5's losses (long form: group, item, loss), its summary, what it was computed on and a note."""

    losses: pd.DataFrame
    summary: pd.DataFrame
    on: str
    note: str = ""


def all_verdicts(main: pd.DataFrame, methods, extra: pd.Series | None = None) -> pd.Series:
    """One released verdict per item any method sent (``mturk.verdicts_by_item``), plus ``extra`` verdicts (by item
    id) for the items no method of ``main`` sent (the smoke analogue's CL items, which live in the rerun)."""
    verdicts = mturk.verdicts_by_item(main, methods)
    if extra is not None:
        verdicts = pd.concat([verdicts, extra[~extra.index.isin(verdicts.index)]])
    return verdicts


def fig5_losses(probs, labels, item_ids, verdicts: pd.Series, seed: int = 0) -> pd.DataFrame:
    """Fig. 5's data: the loss of the given label per group (``FIG5_GROUPS``), long form (group, item, loss).

    ``verdicts`` maps item ids to categories; items without a verdict are "clean" (never hypothesized), and a
    uniformly random other label of each clean item, scored by the same probabilities, is the comparison curve.
    """
    probs = np.asarray(probs, dtype=np.float64)
    category = pd.Series(np.asarray(item_ids)).map(verdicts)
    clean = category.isna().to_numpy()
    flips = mturk.flipped_labels(labels, probs.shape[1], seed=seed)
    groups = {FIG5_GROUPS[0]: (clean, flips), FIG5_GROUPS[1]: (category == CORRECTABLE).to_numpy(),
              FIG5_GROUPS[2]: (category == NON_ERROR).to_numpy(), FIG5_GROUPS[3]: clean}
    return mturk.loss_groups(probs, labels, groups)


def fig5_summary(losses: pd.DataFrame) -> pd.DataFrame:
    """Per group: count, quartiles, mean and the Wasserstein distance to the clean items' losses (Table 5)."""
    from shared.metrics.detection import wasserstein

    summary = losses.groupby("group", sort=False)["loss"].describe()[["count", "25%", "50%", "75%", "mean"]]
    clean = losses.loc[losses["group"] == FIG5_GROUPS[3], "loss"]
    summary["Wasserstein to clean"] = [
        wasserstein(losses.loc[losses["group"] == g, "loss"], clean) if len(clean) and n else float("nan")
        for g, n in summary["count"].items()]
    return summary


def fig5_claim(fig5: Fig5Data | None, reason: str = "") -> Claim:
    """Fig. 5 / Table 5's point: real (verified) errors' losses lie closer to the clean items' than uniform noise's."""
    statement = ("Fig. 5 / Table 5: the losses of verified errors (Correctable) are closer to the clean items' "
                 "losses than those of uniformly flipped labels (Wasserstein; IMDB in the paper: 2.67 vs 5.04)")
    if fig5 is None:
        return Claim(statement, None, f"not run, data {brief(reason)}")
    w = fig5.summary["Wasserstein to clean"]
    correctable, uniform = w.get(FIG5_GROUPS[1], float("nan")), w.get(FIG5_GROUPS[0], float("nan"))
    if np.isnan(correctable) or np.isnan(uniform):
        return Claim(statement, None, "not run: no verified Correctable item (or no clean item) has a loss")
    return Claim(statement, bool(correctable < uniform),
                 f"{fig5.on}: Correctable {correctable:.2f}, uniform flip {uniform:.2f}")


def fig5_figure(fig5: Fig5Data):
    """The densities of Fig. 5's groups (a closed matplotlib Figure, shown where it is returned)."""
    import matplotlib.pyplot as plt
    from scipy.stats import gaussian_kde

    losses = fig5.losses
    fig, ax = plt.subplots(figsize=(8, 4.2), constrained_layout=True)
    upper = min(10.0, float(losses["loss"].quantile(0.995))) if len(losses) else 1.0
    grid = np.linspace(0, upper, 400)
    for (name, part), style in zip(losses.groupby("group", sort=False), ("--", "-", "-", "-")):
        values = part["loss"].to_numpy()
        if len(values) > 1 and values.std() > 0:
            ax.plot(grid, gaussian_kde(values)(grid), style, label=f"{name} (n={len(values)})")
    ax.set_xlabel("loss of the given label, $-\\log p(y \\mid x)$")
    ax.set_ylabel("density")
    ax.set_xlim(0, upper)
    ax.set_title(f"Fig. 5 analogue: {fig5.on}", fontsize="small")
    ax.legend(fontsize="small")
    plt.close(fig)
    return fig


# ---------------------------------------------------------------------------------------------- the page
def _wide(frame: pd.DataFrame):
    """A table whose text columns are shown whole (a skip reason names paths and the fix), left-aligned."""
    text = [c for c in frame.columns if frame[c].dtype == object]
    return frame.style.hide(axis="index").set_properties(subset=text, **{"white-space": "pre-wrap",
                                                                         "text-align": "left"})


class MTurkPage:
    """Notebook 04: reads (or, in smoke, makes) the MTurk releases and shows Tables 2, 6, 8, 9 and Fig. 5.

    ``skipped`` maps each item left out to the reason (data the user lacks); the claims of skipped items are
    "not run". Call ``run()`` first; ``claims()`` writes the report (comparison.csv, claims.json).
    """

    def __init__(self, profile: str = "smoke", *, data_dir=None, device: str = "auto", settings=None, out_dir=None):
        from shared.plotting import set_style
        from shared.profiles import notebook_settings
        from shared.report import NotebookReport

        self.cfg = notebook_settings("lnlfn", NOTEBOOK, profile, settings or {})
        if self.cfg.mturk not in ("vader_panels", "release"):
            raise ConfigError(f"settings['mturk'] must be 'vader_panels' or 'release', got {self.cfg.mturk!r}")
        self.profile, self.data_dir, self.device = profile, data_dir, device
        self.smoke = self.cfg.mturk == "vader_panels"
        self.report = NotebookReport("lnlfn", NOTEBOOK, out_dir, profile)
        set_style()
        self.releases: dict[str, Release] = {}
        self.results: dict[str, mturk.Reanalysis] = {}
        self.skipped: dict[str, str] = {}
        self.analogue: VaderAnalogue | None = None
        self.fig5: Fig5Data | None = None
        self.comparison: pd.DataFrame | None = None

    # ------------------------------------------------------------------ running
    def settings(self):
        return self.cfg.to_frame().style.hide(axis="index")

    def run(self):
        """Read the releases and compute every table and Fig. 5's data; returns what was read and what was skipped
        (``status()``), with the reasons."""
        if self.smoke:
            self.analogue = vader_analogue(self.cfg, self.report.out_dir, self.device)
            self.releases = {"vader": read_written_release(self.analogue.paths)}
        else:
            self.releases, skipped = load_releases(self.cfg.datasets, self.data_dir)
            self.skipped.update({f"Tables 2, 6, 8, 9 ({d})": reason for d, reason in skipped.items()})
        self.results = {name: mturk.reanalyse(r.main, r.cl_rerun, r.cleanlab, r.layout)
                        for name, r in self.releases.items()}
        self.fig5 = self._fig5()
        if not self.results and self.fig5 is None:
            raise DataNotFoundError("none of the MTurk re-analysis inputs were found:\n\n"
                                    + "\n\n".join(f"{item}: {reason}" for item, reason in self.skipped.items()))
        return _wide(self.status())

    def _fig5(self) -> Fig5Data | None:
        if self.smoke:
            a, r = self.analogue, self.results["vader"]
            rerun = r.new.assign(idx=r.new["id"].astype(int)).set_index("idx")["category"]
            verdicts = all_verdicts(self.releases["vader"].main, self.releases["vader"].methods, rerun)
            losses = fig5_losses(a.fme_probs, a.y, a.idx, verdicts, seed=self.cfg.fig5_seed)
            return Fig5Data(losses, fig5_summary(losses), "VADER test split, FME of frozen-MiniLM heads")
        if "imdb" not in self.releases:
            why = ("see Tables 2, 6, 8, 9 (imdb)" if "imdb" in self.cfg.datasets else
                   "imdb is not among settings['datasets']")
            self.skipped["Fig. 5"] = ("absent: needs IMDB's MTurk verdicts (lnlfm/mturk/imdb_mturk_main.csv), which "
                                      f"were not read ({why})")
            return None
        try:
            cl = mturk.imdb_cl_probs(self.data_dir)
        except (DataNotFoundError, DataFormatError) as e:
            self.skipped["Fig. 5"] = skip_reason(e)
            return None
        release = self.releases["imdb"]
        verdicts = mturk.verdicts_by_item(release.main, release.methods)
        unscored = int((~verdicts.index.isin(cl.idx)).sum())
        note = cl.note + (f" {unscored} of the {len(verdicts)} items with an MTurk verdict are among the reviews left "
                          "out." if cl.n_left_out else "")
        losses = fig5_losses(cl.probs, cl.labels, cl.idx, verdicts, seed=self.cfg.fig5_seed)
        return Fig5Data(losses, fig5_summary(losses), "IMDB test split, cleanlab's cross-validated FastText "
                        "probabilities", note)

    def status(self) -> pd.DataFrame:
        """What was read (rows per release) and what was skipped, with the reason (``run()`` shows it)."""
        rows = [{"item": f"Tables 2, 6, 8, 9 ({name})", "status": "read",
                 "detail": f"{len(r.main)} rows in main, {len(r.cl_rerun)} CL items"}
                for name, r in self.releases.items()]
        if self.fig5 is not None:
            rows.append({"item": "Fig. 5", "status": "read", "detail": self.fig5.note or self.fig5.on})
        rows += [{"item": item, "status": "skipped", "detail": reason} for item, reason in self.skipped.items()]
        return pd.DataFrame(rows, columns=["item", "status", "detail"])

    def _need_run(self):
        if not self.results and self.fig5 is None:
            raise ConfigError("call page.run() first")

    # ------------------------------------------------------------------ tables
    def detections(self):
        """Smoke: the heads of the sweep and the detections' sizes; full: nothing to detect (the release is read)."""
        self._need_run()
        if self.analogue is None:
            return pd.DataFrame({"note": ["full profile: the methods' hypothesized items come from the release"]})
        return (self.analogue.heads.style.format({"val_accuracy": "{:.3f}", "val_loss": "{:.3f}"})
                .hide(axis="index").set_caption(self.analogue.summary))

    def overview(self) -> pd.DataFrame:
        self._need_run()
        return overview(self.releases)

    def table2(self) -> pd.DataFrame:
        """Table 2 of every release read: old-protocol category (rows) by new-protocol category (columns)."""
        self._need_run()
        for name, r in self.results.items():
            self.report.table(r.grid.reset_index(), f"table2_{name}")
        if not self.results:
            return _wide(self.status())
        return pd.concat({name: r.grid for name, r in self.results.items()}, names=["dataset"])

    def table2_changes(self):
        self._need_run()
        return table2_changes(self.results).style.format({"change": "{:+.0%}"}).hide(axis="index")

    def table6(self):
        self._need_run()
        kappas = kappa_table(self.results, self.cfg.kappa_boot)
        self.report.table(kappas, "table6")
        return kappas.style.format({"old protocol": "{:.4f}", "new protocol": "{:.4f}", "new - old": "{:+.4f}"}
                                   ).hide(axis="index")

    def table8(self):
        self._need_run()
        for name, r in self.results.items():
            self.report.table(r.table8, f"table8_{name}")
        return stacked({n: r.table8 for n, r in self.results.items()}).style.format(
            {"precision": "{:.3f}"}, na_rep="–").hide(axis="index")

    def table9(self):
        self._need_run()
        for name, r in self.results.items():
            self.report.table(r.table9, f"table9_{name}")
        caption = "; ".join(f"{n}: Jaccard(FME top-k, FME+CL) = {r.jaccard9:.2f}" if not np.isnan(r.jaccard9) else
                            f"{n}: Jaccard not computable from the release" for n, r in self.results.items())
        return stacked({n: r.table9 for n, r in self.results.items()}).style.format(
            {"precision": "{:.3f}"}, na_rep="–").hide(axis="index").set_caption(caption)

    # ------------------------------------------------------------------ verdict
    def compare_with_paper(self):
        """Every number of ``lnlfn/reported/mturk.csv`` beside ours (the paper numbers we computed)."""
        self._need_run()
        self.comparison = self.report.compare(ours_long(self.results), "mturk", on=COMPARISON_KEYS)
        shown = self.comparison[self.comparison["ours"].notna()].drop(columns=["note"])
        return show_table(shown, {"paper": "{:.4g}", "ours": "{:.4g}", "diff": "{:+.4g}"})

    def claim_list(self) -> list[Claim]:
        if self.comparison is None:
            self.compare_with_paper()
        if self.smoke:
            claims = analogue_claims(self.analogue, self.results["vader"])
        else:
            skipped = {d: self.skipped.get(f"Tables 2, 6, 8, 9 ({d})", f"{d} is not among settings['datasets']")
                       for d in PAPER_FACTS}
            claims = release_claims(self.comparison, self.results, skipped)
        return claims + [fig5_claim(self.fig5, self.skipped.get("Fig. 5", ""))]

    def claims(self) -> pd.DataFrame:
        """Record every claim (yes / no / not run) and write the report; returns the claims table."""
        self._need_run()
        for c in self.claim_list():
            self.report.claim(c.statement, holds=c.holds, detail=c.detail)
        return self.report.finish()

    # ------------------------------------------------------------------ Fig. 5
    def figure5(self):
        """Fig. 5's densities (saved as fig5_losses.png/.svg), or the reason it was skipped."""
        self._need_run()
        if self.fig5 is None:
            return _wide(pd.DataFrame({"Fig. 5 skipped": [self.skipped.get("Fig. 5", "")]}))
        self.report.table(self.fig5.losses, "fig5_losses")
        fig = fig5_figure(self.fig5)
        self.report.figure(fig, "fig5_losses")
        return fig

    def figure5_summary(self):
        self._need_run()
        if self.fig5 is None:
            return _wide(pd.DataFrame({"Fig. 5 skipped": [self.skipped.get("Fig. 5", "")]}))
        self.report.table(self.fig5.summary.reset_index(), "fig5_summary")
        styled = self.fig5.summary.style.format("{:.3f}", na_rep="–").format({"count": "{:.0f}"})
        return styled.set_caption(self.fig5.note) if self.fig5.note else styled


__all__ = ["skip_reason", "brief", "NOTEBOOK", "PAPER_DATASET", "OURS_ON", "COMPARISON_KEYS", "FIG5_GROUPS",
           "PAPER_FACTS", "Release",
           "load_releases", "read_written_release", "VaderAnalogue", "top_mask", "guessed_labels", "analogue_heads",
           "vader_analogue",
           "overview", "table2_changes", "kappa_table", "stacked", "ours_long", "Claim", "release_claims",
           "analogue_consistency", "analogue_claims", "Fig5Data", "all_verdicts", "fig5_losses", "fig5_summary",
           "fig5_claim", "fig5_figure", "MTurkPage"]
