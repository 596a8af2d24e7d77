"""Notebook 00: the datasets with per-annotator labels, what the human-originated noisers can reach, the noised
benchmarks (App. A) and their noise rates beside the paper's.

    page = DataAndNoising("smoke")
    page.datasets_table()          # items, splits, classes, annotators per dataset
    page.crowd_table()             # Fleiss' kappa and dissent per dataset
    page.capacity_table()          # the most items each noiser could reach, per split
    page.benchmarks_table()        # the benchmarks' counts per split and kind
    page.examples()                # a few noised items with the annotators' votes
    page.figure_confusions()       # (gold, noisy) shares of the noised items
    page.compare_with_paper()      # paper | ours | diff, with what ours was run on
    page.claims()                  # statement | yes / no / not run | detail

The tables are built by the module-level functions (``dataset_overview``, ``crowd_agreement``, ``capacity_table``,
``benchmark_counts``, ``noised_examples``, ``confusion_shares``, ``noise_rates``) and the checks by
``benchmark_claims``; each takes plain datasets and ``NoisedLabels``, so the tests build tiny ones.
"""
from __future__ import annotations

from functools import cached_property
from typing import Mapping

import numpy as np
import pandas as pd

from lnlfn.benchmarks import BENCHMARKS, METHOD_LABELS, make_benchmark, noise_summary, shortfalls
from lnlfn.data import load_text_dataset
from lnlfn.pages import Page, comparison_table, item_text
from shared.metrics.agreement import category_counts, fleiss_kappa
from shared.noise.annotations import HUMAN_KINDS, noise_capacity
from shared.plotting import finish_figure
from shared.report import claim_record
from shared.tables import show_table


def dataset_for(benchmark: str, datasets: Mapping) -> object:
    """The loaded dataset a benchmark is built on (``vader`` for ``vader5``; a name ``<dataset>_<variant>`` also
    matches)."""
    spec = BENCHMARKS[benchmark]
    for name, ds in datasets.items():
        if name == spec.dataset or name.startswith(spec.dataset + "_"):
            return ds
    raise KeyError(f"benchmark {benchmark} needs dataset {spec.dataset!r}, which is not among {list(datasets)}")


def dataset_overview(datasets: Mapping) -> pd.DataFrame:
    """One row per dataset: where it comes from, items per split, items per class, annotation columns."""
    return pd.DataFrame([{"dataset": ds.name, "source": ds.source, "items": len(ds), **ds.split_counts(),
                          "classes": ", ".join(f"{c} {k}" for c, k in ds.class_counts().items()),
                          "annotators": 0 if ds.annotations is None else ds.annotations.shape[1]}
                         for ds in datasets.values()])


def crowd_agreement(datasets: Mapping) -> pd.DataFrame:
    """Per dataset with annotations: annotators per item, Fleiss' kappa over the items every annotator labelled,
    and how often an annotator disagrees with the gold label."""
    rows = []
    for name, ds in datasets.items():
        if ds.annotations is None:
            continue
        A = ds.annotations
        complete = (A >= 0).all(axis=1)
        dissent = ((A >= 0) & (A != ds.labels[:, None])).sum(axis=1)
        rows.append({"dataset": name, "items": len(ds), "annotators per item": float((A >= 0).sum(1).mean()),
                     "Fleiss kappa (complete items)": fleiss_kappa(category_counts(A[complete], ds.num_classes)),
                     "items with a dissenting annotator": float((dissent > 0).mean()),
                     "dissenting annotations per item": float(dissent.mean())})
    return pd.DataFrame(rows, columns=["dataset", "items", "annotators per item", "Fleiss kappa (complete items)",
                                       "items with a dissenting annotator", "dissenting annotations per item"])


def capacity_table(datasets: Mapping, benchmarks, *, seed: int, kinds) -> pd.DataFrame:
    """``noise_capacity`` per dataset with annotations and split: the share of the split each kind could noise
    alone (columns named as in ``METHOD_LABELS``); crowd majority uses the ``majority_k`` of the dataset's
    benchmarks."""
    rows = []
    for name, ds in datasets.items():
        if ds.annotations is None:
            continue
        options = [BENCHMARKS[b].options for b in benchmarks if BENCHMARKS[b].dataset == name.split("_")[0]]
        majority_k = next((o["majority_k"] for o in options if "majority_k" in o), None)
        cap = noise_capacity(ds.annotations, ds.labels, ds.num_classes, split=ds.split, majority_k=majority_k,
                             seed=seed, kinds=kinds)
        for s, counts in cap.items():
            n = int((ds.split == s).sum())
            rows.append({"dataset": name, "split": s, "items": n,
                         **{METHOD_LABELS.get(k, k): v / n for k, v in counts.items()}})
    return pd.DataFrame(rows)


def make_benchmarks(benchmarks, datasets: Mapping, *, seed: int) -> dict:
    """``{benchmark: NoisedLabels}``: each benchmark applied to its dataset with the noise seed ``seed``."""
    return {b: make_benchmark(b, dataset_for(b, datasets), seed=seed) for b in benchmarks}


def benchmark_counts(noised: Mapping) -> pd.DataFrame:
    """One row per benchmark and split: items, noised items, rate and the number noised by each kind (0 where a
    kind is not part of the benchmark)."""
    rows = [{"benchmark": b, "stands in for": BENCHMARKS[b].stands_in_for, "recipe": BENCHMARKS[b].description, **row}
            for b, out in noised.items() for row in noise_summary(out)]
    table = pd.DataFrame(rows).fillna(0)
    fixed = ["benchmark", "stands in for", "recipe", "split", "items", "noised", "rate"]
    kinds = [c for c in table.columns if c not in fixed]
    return table.astype({c: int for c in kinds})


def noised_examples(noised: Mapping, datasets: Mapping, *, per_benchmark: int = 3, seed: int = 0) -> pd.DataFrame:
    """A few random noised items of each benchmark (one generator over the benchmarks in order): the text, the
    gold label, the label the noiser gave, the kind of noise and the annotators' votes per class."""
    rng = np.random.default_rng(seed)
    rows = []
    for b, out in noised.items():
        ds = dataset_for(b, datasets)
        for i in rng.choice(np.flatnonzero(out.noised), size=min(per_benchmark, int(out.noised.sum())), replace=False):
            votes = np.bincount(ds.annotations[i][ds.annotations[i] >= 0], minlength=ds.num_classes)
            rows.append({"benchmark": b, "text": item_text(ds.texts[i]), "gold": ds.classes[out.clean[i]],
                         "given (noisy)": ds.classes[out.noisy[i]], "kind": out.kind[i],
                         "annotator votes": ", ".join(f"{c} {v}" for c, v in zip(ds.classes, votes) if v)})
    return pd.DataFrame(rows, columns=["benchmark", "text", "gold", "given (noisy)", "kind", "annotator votes"])


def confusion_shares(noised_labels, num_classes: int) -> np.ndarray:
    """(K, K): the share of the noised items with gold class r and noisy class c (all splits; sums to 1, or 0
    when nothing is noised)."""
    M = np.zeros((num_classes, num_classes))
    mask = noised_labels.noised
    np.add.at(M, (noised_labels.clean[mask], noised_labels.noisy[mask]), 1)
    return M / max(M.sum(), 1)


def confusions_figure(noised: Mapping, datasets: Mapping, report=None):
    """One heatmap per benchmark of ``confusion_shares`` (rows: gold, columns: noisy), the shares written in the
    cells when there are at most 6 classes."""
    import matplotlib.pyplot as plt

    n = len(noised)
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n, 3.4), squeeze=False, constrained_layout=True)
    for ax, (b, out) in zip(axes[0], noised.items()):
        ds = dataset_for(b, datasets)
        K = ds.num_classes
        M = confusion_shares(out, K)
        ax.imshow(M, cmap="Blues", vmin=0)
        ticks = [c[:4] for c in ds.classes] if K <= 6 else range(K)
        ax.set_xticks(range(K), ticks, rotation=90 if K > 6 else 0)
        ax.set_yticks(range(K), ticks)
        if K <= 6:
            for (r, c), v in np.ndenumerate(M):
                if v > 0:
                    ax.text(c, r, f"{v:.0%}", ha="center", va="center", fontsize=8,
                            color="white" if v > 0.3 else "black")
        ax.set_title(f"{b} ({BENCHMARKS[b].stands_in_for})", fontsize=10)
        ax.set_xlabel("noisy label")
    axes[0, 0].set_ylabel("gold label")
    return finish_figure(fig, report, "confusions")


def noise_rates(noised: Mapping, profile: str) -> pd.DataFrame:
    """Our noise rate (% of all items noised) per benchmark, keyed by the paper's benchmark it stands in for."""
    return pd.DataFrame([{"benchmark": BENCHMARKS[b].stands_in_for, "metric": "noise_rate",
                          "value": 100 * float(out.noised.mean()), "ours_on": f"{b} ({profile})"}
                         for b, out in noised.items()], columns=["benchmark", "metric", "value", "ours_on"])


def benchmark_claims(noised: Mapping) -> list[dict]:
    """Every fixed-rate benchmark meets the official noiser's per-split, per-kind counts exactly
    (``shortfalls``); every noised item's kind is a human-originated one."""
    short = {b: shortfalls(noised[b]) for b in noised if BENCHMARKS[b].rate != "all"}
    rates = "; ".join(f"{b}: " + ", ".join(f"{s} {r:.2%}" for s, r in noised[b].rates().items()) for b in noised)
    kinds = {b: set(noised[b].kind[noised[b].noised]) for b in noised}
    return [
        claim_record("Every fixed-rate benchmark noises exactly the official noiser's count in each split (per noise "
                     "type, round(n x rate x share))", not any(short.values()),
                     rates + "".join(f"; {b} short: {v}" for b, v in short.items() if v)),
        claim_record("The benchmarks' noise is entirely human-originated (every noisy label is some annotator's "
                     "label)", all(k <= HUMAN_KINDS for k in kinds.values()),
                     ", ".join(f"{b}: {sorted(map(str, k))}" for b, k in kinds.items())),
    ]


class DataAndNoising(Page):
    """00: the datasets, the crowd behind them, the noisers' reach, the benchmarks (App. A) and their rates."""

    notebook = "00_data_and_noising"

    @cached_property
    def datasets(self) -> dict:
        return {name: load_text_dataset(name, data_dir=self.data_dir) for name in self.cfg.datasets}

    def datasets_table(self):
        return show_table(dataset_overview(self.datasets))

    @cached_property
    def crowd(self) -> pd.DataFrame:
        crowd = crowd_agreement(self.datasets)
        self.report.table(crowd, "crowd_agreement")
        return crowd

    def crowd_table(self):
        return show_table(self.crowd, {"annotators per item": "{:.1f}", "Fleiss kappa (complete items)": "{:.3f}",
                                       "items with a dissenting annotator": "{:.1%}",
                                       "dissenting annotations per item": "{:.2f}"})

    @cached_property
    def capacity(self) -> pd.DataFrame:
        capacity = capacity_table(self.datasets, self.cfg.benchmarks, seed=self.cfg.noise_seed,
                                  kinds=self.cfg.capacity_kinds)
        self.report.table(capacity, "capacity")
        return capacity

    def capacity_table(self):
        return show_table(self.capacity, {c: "{:.1%}" for c in self.capacity.columns[3:]})

    @cached_property
    def noised(self) -> dict:
        return make_benchmarks(self.cfg.benchmarks, self.datasets, seed=self.cfg.noise_seed)

    @cached_property
    def counts(self) -> pd.DataFrame:
        counts = benchmark_counts(self.noised)
        self.report.table(counts, "benchmark_counts")
        return counts

    def benchmarks_table(self):
        return show_table(self.counts, {"rate": "{:.2%}"})

    def examples(self, per_benchmark: int = 3):
        return show_table(noised_examples(self.noised, self.datasets, per_benchmark=per_benchmark))

    def figure_confusions(self):
        return confusions_figure(self.noised, self.datasets, self.report)

    @cached_property
    def comparison(self) -> pd.DataFrame:
        return self.report.compare(noise_rates(self.noised, self.report.profile), "benchmarks", on=["benchmark"])

    def compare_with_paper(self):
        return comparison_table(self.comparison)

    def claims(self) -> pd.DataFrame:
        self.comparison  # noqa: B018 -- recorded for the scorecard even when the comparison is not displayed
        return self._finish(benchmark_claims(self.noised))


__all__ = ["DataAndNoising", "dataset_for", "dataset_overview", "crowd_agreement", "capacity_table",
           "make_benchmarks", "benchmark_counts", "noised_examples", "confusion_shares", "confusions_figure",
           "noise_rates", "benchmark_claims"]
