"""The paper's tables computed from a benchmark and from run scores (``experiments.scores``).

Accuracies are in %, averaged over seeds; a cell reads like the paper's "Top-1(Top-5)". ``paper_rows`` turns
scores into the long form ``shared.report.compare_with_paper`` sets beside the paper's numbers.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from noisywikihow.benchmark import SOURCES, Benchmark
from shared.errors import ConfigError
from shared.seeding import item_rng


def dataset_overview(bench: Benchmark) -> pd.DataFrame:
    """Table 3: classes and events per noise source and split (rows SC, BCC, TC, Total)."""
    rows = []
    for source in SOURCES:
        classes = bench.classes_of(source)
        counts = {s: int(np.isin(getattr(bench, s).labels, classes).sum()) for s in ("train", "val", "test")}
        rows.append({"noise_source": source, "classes": len(classes), **counts, "total": sum(counts.values())})
    table = pd.DataFrame(rows)
    total = table.drop(columns="noise_source").sum().to_dict()
    return pd.concat([table, pd.DataFrame([{"noise_source": "Total", **total}])], ignore_index=True)


def long_form(table: pd.DataFrame, keys: list[str], ours_on: str) -> pd.DataFrame:
    """A wide table as rows of keys, metric, value (and ``ours_on``), for ``compare_with_paper``."""
    out = table.melt(id_vars=keys, var_name="metric", value_name="value")
    out["ours_on"] = ours_on
    return out


def noise_audit(bench: Benchmark) -> pd.DataFrame:
    """The realised share (%) of noisy training events of every noisy training set, overall and per source."""
    sources = bench.source[bench.train.labels]
    rows = []
    for name, noisy in bench.noise.items():
        row = {"training set": name, "kind": noisy.kind, "noisy events": int(noisy.is_noisy.sum()),
               "all": 100 * noisy.noise_rate}
        row.update({s: 100 * float(noisy.is_noisy[sources == s].mean()) for s in SOURCES})
        rows.append(row)
    return pd.DataFrame(rows)


def case_study(bench: Benchmark, per_source: int = 2, level: float = 0.4, seed: int = 0) -> pd.DataFrame:
    """Table 6: corrupted training events of each source at ``level`` real noise, drawn at random (seeded): the
    observed (swapped-in) event, its observed label and the category it truly comes from."""
    name = f"mix_{level:g}"
    noisy = bench.training_set(name)
    sources = bench.source[bench.train.labels]
    rows = []
    for source in SOURCES:
        candidates = np.flatnonzero(noisy.is_noisy & (sources == source))
        if not len(candidates):
            continue
        picked = item_rng("noisywikihow-case-study", seed, source).choice(
            candidates, min(per_source, len(candidates)), replace=False)
        for i in np.sort(picked):
            rows.append({"noise_source": source, "incorrect sample": noisy.texts[i],
                         "noisy label": bench.classes[noisy.labels[i]], "true category": noisy.true_category[i],
                         "replaced event": bench.train.texts[i]})
    return pd.DataFrame(rows)


def literature(table: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    """A reported table of facts (Tables 2 and 7) back in the paper's wide layout."""
    return table.pivot_table(index=index, columns="metric", values="value", aggfunc="first", sort=False).reset_index()


def mean_scores(scores: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Top-1 and Top-5 averaged over seeds per ``keys`` (and selection), with the number of seeds."""
    if scores.empty:
        raise ConfigError("no runs to tabulate")
    grouped = scores.groupby([*keys, "selection"], sort=False)
    out = grouped[["top1", "top5"]].mean()
    out["seeds"] = grouped["seed"].nunique()
    return out.reset_index()


def accuracy_table(scores: pd.DataFrame, row: str, column: str = "level", selection: str = "peak") -> pd.DataFrame:
    """The paper's layout: one row per ``row`` value, one column per ``column`` value, cells "Top-1(Top-5)"."""
    means = mean_scores(scores, [row, column])
    means = means[means["selection"] == selection]
    means["cell"] = [f"{a:.2f}({b:.2f})" for a, b in zip(means["top1"], means["top5"])]
    wide = means.pivot(index=row, columns=column, values="cell")
    wide = wide.loc[list(dict.fromkeys(means[row]))]
    if column == "level":
        wide.columns = [f"{c:.0%}" for c in wide.columns]
    return wide


def deltas(scores: pd.DataFrame, row: str = "method", base: str = "base", selection: str = "peak") -> pd.DataFrame:
    """Top-1 of each ``row`` minus the base's at the same level (points)."""
    means = mean_scores(scores, [row, "level"])
    means = means[means["selection"] == selection].pivot(index=row, columns="level", values="top1")
    if base not in means.index:
        raise ConfigError(f"no {base!r} runs to compute differences from")
    out = means.drop(index=base).sub(means.loc[base], axis=1)
    out.columns = [f"{c:.0%}" for c in out.columns]
    return out.round(2)


def paper_rows(scores: pd.DataFrame, keys: list[str], ours_on: str, selection: str = "peak",
               rename: dict | None = None) -> pd.DataFrame:
    """Mean scores in the reported CSVs' long form: ``keys``, metric (top1/top5), value, ours_on."""
    means = mean_scores(scores, keys)
    means = means[means["selection"] == selection]
    out = means.melt(id_vars=keys, value_vars=["top1", "top5"], var_name="metric", value_name="value")
    if rename:
        for col, mapping in rename.items():
            out[col] = out[col].map(lambda v, m=mapping: m.get(v, v))
    out["ours_on"] = ours_on
    return out


def selection_gap(scores: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Peak (the paper's) minus validation-selected test Top-1, per ``keys``: how optimistic the peak is."""
    means = mean_scores(scores, keys).pivot_table(index=keys, columns="selection", values="top1")
    means["peak - val"] = means["peak"] - means["val"]
    return means.round(2).reset_index()


__all__ = ["dataset_overview", "long_form", "noise_audit", "case_study", "literature", "mean_scores",
           "accuracy_table", "deltas", "paper_rows", "selection_gap"]
