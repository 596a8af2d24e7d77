"""05_end_to_end: Table 4 (noisy, corrected and clean evaluation) and Table 1's organic-error candidates.

Per benchmark and seed the page noises the dataset, runs the sweep on the noisy training split, ranks the
validation and test items by FME loss, lets a perfect verifier correct the top Err% of each split
(``lnlfn.experiments.corrected_labels``), and selects and measures the model three ways.

    page = EndToEnd("smoke", settings={"seeds": [0, 1]})
    page.run()                    # one row per benchmark, seed and evaluation (sweeps cached)
    page.table4()                 # measurable and true accuracy, rank, mean over seeds
    page.figure()                 # Table 4 as bars
    page.compare_with_paper()     # paper | ours | diff, with what ours was run on
    page.claims()                 # statement | yes / no / not run | detail

The functions below the page hold the computations; the tests call them on small synthetic sweeps.
"""
from __future__ import annotations

from functools import cached_property

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from lnlfn.benchmarks import BENCHMARKS
from lnlfn.experiments import (benchmark_cases, benchmark_labels, claim_each, corrected_labels, load_benchmark_data,
                               make_configs, model_sweep, scored_items, selected_accuracy, sweep_configs, true_rank,
                               with_validation)
from lnlfn.pages import ClaimRecords, Page, benchmark_table, comparison_table, item_text, sweep_frame
from lnlfn.scoring import fme
from shared.plotting import finish_figure
from shared.report import verdict
from shared.tables import show_table

EVALUATIONS = ("noisy", "corrected", "clean")  # Table 4's rows: which labels select the run and measure it
TABLE4_COLUMNS = ("measurable", "true", "rank", "test errors left")
GAP = "gap (true - measurable)"


# ------------------------------------------------------------------------------------------------ the page
class EndToEnd(Page):
    """05: Table 4 and the organic-error candidates (Table 1's analogue)."""

    notebook = "05_end_to_end"

    # ---------------------------------------------------------------- what runs
    @cached_property
    def data(self) -> tuple[dict, dict]:
        """``({dataset: TextDataset with a validation split}, {benchmark: why it is skipped})``."""
        datasets, skipped = load_benchmark_data(self.cfg.benchmarks, self.data_dir, options=self.cfg.dataset_options)
        return {name: with_validation(ds) for name, ds in datasets.items()}, skipped

    @property
    def benchmarks_run(self) -> list[str]:
        return [b for b in self.cfg.benchmarks if b not in self.data[1]]

    @cached_property
    def configs(self) -> list:
        return grid_configs(self.cfg.model, self.cfg.sweep_grid, self.cfg.n_sweep)

    def benchmarks(self):
        """The benchmarks of the settings: what each stands in for, its noise, its splits, and whether it runs."""
        return show_table(benchmark_table(self.cfg.benchmarks, self.data[0], self.data[1]))

    def sweep_table(self):
        return show_table(sweep_frame({f"sweep ({self.cfg.model})": self.configs}))

    @cached_property
    def _computed(self) -> tuple[pd.DataFrame, dict]:
        """The per-run table and ``{(benchmark, seed): (dataset, noised labels, FME detection)}``."""
        cfg, rows, kept = self.cfg, [], {}
        for bench, seed in benchmark_cases(self.benchmarks_run, cfg.seeds):
            ds = self.data[0][BENCHMARKS[bench].dataset]
            out = benchmark_labels(bench, ds, cfg, seed)
            sweep = model_sweep(ds, out.noisy, model=cfg.model, configs=self.configs, device=self.compute_device,
                                data_dir=self.data_dir, desc=f"{bench} seed {seed}", executor=cfg.executor)
            ens = fme(sweep, k=cfg.top_k)
            corrected = corrected_labels(ds, out.noisy, out.clean, ens.scores, BENCHMARKS[bench].rate)
            rows += [{"benchmark": bench, "seed": seed, **row}
                     for row in evaluation_rows(sweep, ds, out.noisy, out.clean, corrected)]
            kept[bench, seed] = (ds, out, ens)
        runs = pd.DataFrame(rows, columns=["benchmark", "seed", "eval_split", *TABLE4_COLUMNS])
        self.report.table(runs, "table4_runs")
        return runs, kept

    @property
    def runs(self) -> pd.DataFrame:
        return self._computed[0]

    def run(self):
        return show_table(self.runs, {"measurable": "{:.2f}", "true": "{:.2f}"})

    # ---------------------------------------------------------------- Table 4
    @cached_property
    def means(self) -> pd.DataFrame:
        means = table4_means(self.runs)
        self.report.table(means.reset_index(), "table4")
        return means

    def table4(self):
        return show_table(self.means.reset_index(), {c: "{:.2f}" for c in (*TABLE4_COLUMNS, GAP)})

    def figure(self):
        return finish_figure(table4_figure(self.means), self.report, "table4_bars")

    # ---------------------------------------------------------------- Table 1's analogue
    @cached_property
    def candidates(self) -> pd.DataFrame:
        frames = []
        for bench in [b for b in self.cfg.organic_benchmarks if b in self.benchmarks_run]:
            ds, out, ens = self._computed[1][bench, self.cfg.seeds[0]]
            frames.append(organic_candidates(ds, out.noisy, out.noised, ens.scores, ens.probs, self.cfg.n_examples))
        table = pd.concat(frames, ignore_index=True) if frames else organic_candidates(None, [], [], [], [], 0)
        self.report.table(table, "table1_candidates")
        return table

    def organic_errors(self):
        return show_table(self.candidates, {"p(label)": "{:.3f}"})

    # ---------------------------------------------------------------- paper vs ours, claims
    @cached_property
    def comparison(self) -> pd.DataFrame:
        paper_name = {b: BENCHMARKS[b].stands_in_for for b in self.benchmarks_run}
        return self.report.compare(table4_long(self.means, paper_name, self.report.profile), "table4",
                                   on=["dataset", "eval_split"])

    def compare_with_paper(self):
        return comparison_table(self.comparison, decimals=1)

    def claims(self) -> pd.DataFrame:
        """claim | verdict (yes / no / not run) | detail; the report files are written here."""
        self.comparison  # noqa: B018 -- recorded for comparison.csv before the report is written
        return self._finish(end_to_end_claims(self.means, benchmarks=self.cfg.benchmarks, skipped=self.data[1]))


# --------------------------------------------------------------------------------------- the computations
def grid_configs(model: str, grid, n_sweep) -> list:
    """The sweep's runs: the product of ``grid`` ({"C": [...], "train_fraction": [...]}, logistic-regression
    heads, C varying slowest) or, when ``grid`` is None, ``sweep_configs(model, n_sweep)``."""
    if grid is None:
        return sweep_configs(model, n_sweep)
    specs = [{"kind": "logreg", "C": c, "train_fraction": f} for c in grid["C"] for f in grid["train_fraction"]]
    return make_configs(model, specs)


def evaluation_rows(sweep, ds, noisy, clean, corrected) -> list[dict]:
    """Table 4's three evaluations of one sweep: select on the validation split's noisy, corrected or clean labels
    and measure on the test split's same labels (measurable, %), beside the chosen run's accuracy on the clean
    test labels (true, %), its rank by true accuracy (1 = best) and the wrong test labels left."""
    noisy, clean, corrected = (np.asarray(x) for x in (noisy, clean, corrected))
    true_accs = selected_accuracy(sweep, ds, eval_labels=clean)["accuracies"]
    scored = scored_items(ds)
    test = np.asarray(ds.split)[scored] == "test"
    rows = []
    for evaluation, labels in zip(EVALUATIONS, (noisy, corrected, clean)):
        chosen = selected_accuracy(sweep, ds, eval_labels=labels, select_labels=labels)
        run = chosen["run"]
        rows.append({"eval_split": evaluation, "measurable": 100 * chosen["accuracy"], "true": 100 * true_accs[run],
                     "rank": true_rank(run, true_accs),
                     "test errors left": int((labels[scored][test] != clean[scored][test]).sum())})
    return rows


def table4_means(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per (benchmark, evaluation), with the gap between true and measurable accuracy."""
    means = runs.groupby(["benchmark", "eval_split"], sort=False)[list(TABLE4_COLUMNS)].mean()
    means[GAP] = means["true"] - means["measurable"]
    return means


def table4_figure(means: pd.DataFrame):
    """Table 4 as bars: per benchmark, measurable and true accuracy under each evaluation; the tick labels carry
    the selected run's mean rank."""
    benchmarks = list(dict.fromkeys(means.index.get_level_values("benchmark")))
    fig, axes = plt.subplots(1, len(benchmarks), figsize=(4.2 * len(benchmarks), 3.6), squeeze=False,
                             constrained_layout=True)
    for ax, bench in zip(axes[0], benchmarks):
        part = means.loc[bench]
        x = np.arange(len(part))
        ax.bar(x - 0.18, part["measurable"], 0.36, label="measurable", color="tab:orange")
        ax.bar(x + 0.18, part["true"], 0.36, label="true", color="tab:blue")
        ax.set_xticks(x, [f"{split}\nrank {rank:g}" for split, rank in zip(part.index, part["rank"])])
        low = min(part["measurable"].min(), part["true"].min())
        ax.set_ylim(low - 5, 100 if low > 90 else max(part["true"].max() + 3, low + 10))
        paper = BENCHMARKS[bench].stands_in_for if bench in BENCHMARKS else bench
        ax.set_title(f"{bench} ({paper} analogue)", fontsize=10)
    axes[0, 0].set_ylabel("test accuracy (%)")
    axes[0, 0].legend(fontsize=8)
    return fig


def organic_candidates(ds, noisy, noised, scores, probs, n: int) -> pd.DataFrame:
    """The ``n`` test items with the highest FME loss among those the benchmark did not noise: where the dataset's
    own label is what the model doubts. ``noisy``, ``noised``: (n_items,) over the dataset; ``scores`` (FME loss)
    and ``probs``: over ``scored_items(ds)``."""
    columns = ["dataset", "text", "label", "model says", "p(label)"]
    if ds is None or n == 0:
        return pd.DataFrame(columns=columns)
    scored = scored_items(ds)
    scores, noised = np.asarray(scores, dtype=np.float64), np.asarray(noised, dtype=bool)
    names = np.asarray(ds.split)[scored]
    organic = np.flatnonzero((names == "test") & ~noised[scored])
    rows = []
    for j in organic[np.argsort(-scores[organic], kind="stable")[:n]]:
        i = scored[j]
        rows.append({"dataset": ds.name, "text": item_text(ds.texts[i]), "label": ds.classes[noisy[i]],
                     "model says": ds.classes[int(np.asarray(probs)[j].argmax())],
                     "p(label)": float(np.exp(-scores[j]))})
    return pd.DataFrame(rows, columns=columns)


def table4_long(means: pd.DataFrame, paper_name: dict, profile: str) -> pd.DataFrame:
    """Table 4 in the comparison's long form: dataset (the paper's), eval_split, metric, value, ours_on. The clean
    evaluation keeps only true accuracy, as the paper's Table 4."""
    t4 = means.reset_index()
    ours = pd.concat([pd.DataFrame({"dataset": t4["benchmark"].map(paper_name), "eval_split": t4["eval_split"],
                                    "metric": metric, "value": t4[metric],
                                    "ours_on": t4["benchmark"] + f" ({profile})"})
                      for metric in ("measurable", "true", "rank")])
    return ours[~((ours["eval_split"] == "clean") & (ours["metric"] != "true"))]


def end_to_end_claims(means: pd.DataFrame, *, benchmarks, skipped: dict) -> list[dict]:
    """Per benchmark: correcting the top Err% closes at least half of the |true - measurable| gap; selection on
    the corrected split picks a run ranked at least as well as on the noisy split. ``means``: ``table4_means``."""
    records = ClaimRecords()
    run = list(dict.fromkeys(means.index.get_level_values("benchmark")))
    gap = means[GAP].abs()
    claim_each(records, "Correcting the top Err% items by FME loss closes at least half of the measurable-vs-true gap "
               "({bench})", benchmarks, skipped=skipped,
               results={b: (verdict(gap[b, "corrected"] <= gap[b, "noisy"] / 2, gap[b, "noisy"], gap[b, "corrected"]),
                            f"|gap| {gap[b, 'noisy']:.2f} -> {gap[b, 'corrected']:.2f} points") for b in run})
    rank = means["rank"]
    claim_each(records, "Selection on the corrected split picks a run at least as good (rank) as on the noisy split "
               "({bench})", benchmarks, skipped=skipped,
               results={b: (verdict(rank[b, "corrected"] <= rank[b, "noisy"], rank[b, "noisy"], rank[b, "corrected"]),
                            f"mean rank noisy {rank[b, 'noisy']:.1f}, corrected {rank[b, 'corrected']:.1f}, "
                            f"clean {rank[b, 'clean']:.1f}") for b in run})
    return list(records)


__all__ = ["EndToEnd", "EVALUATIONS", "grid_configs", "evaluation_rows", "table4_means", "table4_figure",
           "organic_candidates", "table4_long", "end_to_end_claims"]
