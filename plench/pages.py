"""One class per notebook: each loads the datasets its settings name, trains (or resumes) exactly the runs those
settings define, and returns the tables, figures, paper comparison and claims the page shows.

    page = TabularBenchmark("smoke", settings={"n_trials": 3})
    page.run()                    # the sweep, resumable: finished runs are skipped; returns the counts
    page.results()                # Tables 7, 9-16 as printed: mean ± error per criterion
    page.compare_with_paper()     # paper | ours | diff, with what ours was run on
    page.claims()                 # statement | yes / no / not run | detail (also written for the book)

Every table a page shows goes through ``shared.tables.show_table``; the raw frames stay available as attributes
(``page.table``, ``page.arms``, ...) and are written to the report folder as the notebooks always did.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from functools import cached_property

import pandas as pd

from plench import catalogue, figures, reports, store, theory
from plench import claims as C
from plench.data import load_available
from plench.protocol import sweep_grids
from plench.selection import results_table, selected_scores
from shared.pages import NotebookPage
from shared.report import compare_with_paper, reported
from shared.tables import show_table

PAPER = "plench"
ACCURACY = "{:.2f}"
COMPARISON_FORMATS = {"paper": ACCURACY, "ours": ACCURACY, "diff": "{:+.2f}"}
HIDDEN = ("item", "source", "note")  # bookkeeping columns of a comparison, not shown


def _yes_no(value) -> str:
    return "yes" if value else "no"


def _shown_comparison(table: pd.DataFrame, hidden=HIDDEN + ("metric",)) -> pd.DataFrame:
    """A comparison's rows that have a number of ours, without the bookkeeping columns (and by default without
    ``metric``, where it is always the test accuracy)."""
    return table[table["ours"].notna()].drop(columns=[c for c in hidden if c in table.columns])


def _by_algorithm(wide: pd.DataFrame) -> pd.DataFrame:
    """``reports.wide_results``' table with its index (the algorithms' names) as the first column."""
    return wide.rename_axis("algorithm").reset_index()


@contextmanager
def _run_by_run_quietly():
    """Leave out ``train_runs_batched``'s warning for algorithms with their own ``train_step`` (GA, IDGP, the holistic
    and contrastive methods): they are trained run by run, which is what ``batched`` means for them."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="train_runs_batched: .* cannot be batched")
        yield


def _counts(counts: dict):
    """A sweep's counts (total, skipped, restarted, ran) as a one-row table."""
    return show_table(pd.DataFrame([counts]))


class Page(NotebookPage):
    """A Plench page: the settings, the datasets they name (absent files skipped, with the reason) and the device."""

    paper = PAPER
    modality: str | None = None  # "image" for the image tables; None: each dataset's own

    def __init__(self, profile: str = "smoke", *, data_dir=None, device="auto", settings=None, out_dir=None):
        super().__init__(profile, settings=settings, out_dir=out_dir)
        self.data_dir, self.device_name = data_dir, device

    @cached_property
    def device(self) -> str:
        from shared.device import select_device

        return str(select_device(self.device_name))

    @cached_property
    def loaded(self) -> tuple[dict, dict]:
        return load_available(self.cfg.datasets, data_dir=self.data_dir, modality=self.modality)

    @property
    def datasets(self) -> dict:
        return self.loaded[0]

    @cached_property
    def records_dir(self):
        """The sweep folder, one folder per run, in the cache (``plench.store``), for the code checked out and the
        datasets loaded: a re-run, or another notebook whose settings define the same run on the same data, reads a
        finished run instead of training it (a stacked run only by a notebook that forms the same stack)."""
        return store.sweep_dir(store.RUNS, self.datasets.values())

    def settings_table(self):
        return show_table(super().settings_table())

    def skipped(self):
        """The datasets of the settings whose files are absent, with the reason (an empty table when none is)."""
        rows = [{"dataset": name, "skipped because": why} for name, why in self.loaded[1].items()]
        return show_table(pd.DataFrame(rows, columns=["dataset", "skipped because"]))

    def _claims(self, claims):
        return self._finish(C.claim_records(claims))


class TrainingPage(Page):
    """A page that trains: small networks on a shared CPU run fastest with one thread."""

    def __init__(self, *args, **kwargs):
        import torch

        super().__init__(*args, **kwargs)
        torch.set_num_threads(1)


class SweepPage(TrainingPage):
    """A page whose results are a sweep (``grids()``) under the four selection criteria: 02 and 03."""

    table_name = ""  # the report CSV its results table is written to

    def grids(self) -> list:
        raise NotImplementedError

    @cached_property
    def sweep(self) -> tuple[pd.DataFrame, dict]:
        """The sweep the settings define, resumably: the records of exactly its runs, and the counts."""
        with _run_by_run_quietly():
            return sweep_grids(self.grids(), list(self.datasets.values()), out_dir=self.records_dir,
                               device=self.device)

    @property
    def records(self) -> pd.DataFrame:
        return self.sweep[0]

    def run(self):
        """Train what is not trained yet; the counts (total, skipped, restarted, ran)."""
        return _counts(self.sweep[1])

    @cached_property
    def table(self) -> pd.DataFrame:
        """``results_table`` of the sweep's records in the paper's order (the fixed variants as "(fixed)")."""
        cfg = self.cfg
        table = reports.ordered_results(results_table(self.records, nan_policy=cfg.nan_policy, how=cfg.error),
                                        main_compat=cfg.compat)
        self.report.table(table.drop(columns=["per_trial"]), self.table_name)
        return table

    def paper_rows(self) -> pd.DataFrame:
        """Our results in the long form of ``reported/results.csv`` (value = mean accuracy)."""
        raise NotImplementedError

    def compare_with_paper(self):
        comparison = self.report.compare(self.paper_rows(), "results",
                                         on=["dataset", "network", "algorithm", "criterion"])
        return show_table(_shown_comparison(comparison), COMPARISON_FORMATS)


# ------------------------------------------------------------------------------------------------ 00
class Datasets(Page):
    """00: Table 5 and Figure 2 (the datasets), Tables 6 and 8 (the algorithm and hyperparameter registries)."""

    notebook = "00_datasets"

    @cached_property
    def stats(self) -> pd.DataFrame:
        stats = reports.table5(self.datasets)
        self.report.table(stats, "table5")
        return stats

    @cached_property
    def crowd(self):
        return reports.crowd_statistics(self.cfg.crowd, self.datasets, self.loaded[1])

    def table5(self):
        return show_table(self.stats, {"Avg. # CLs": "{:.2f}", "Noise Rate (%)": "{:.2f}"})

    def figure2(self):
        return figures.figure2(self.crowd, self.report)

    def compare_table5(self):
        comparison = self.report.compare(reports.table5_paper_rows(self.stats), "table5", on=["dataset"])
        return show_table(_shown_comparison(comparison, HIDDEN), {"paper": "{:g}", "ours": "{:.4g}", "diff": "{:+.3g}"})

    # -- Tables 6 and 8 -----------------------------------------------------------------------------------
    @cached_property
    def algorithms(self) -> pd.DataFrame:
        """Table 6 beside the algorithm registry (``catalogue.table6_side_by_side``)."""
        return catalogue.table6_side_by_side(reported(PAPER, "table6"), catalogue.table6_registry())

    @cached_property
    def hyperparameters(self) -> pd.DataFrame:
        """Table 8 beside the hyperparameter registry with the settings' ``compat`` (VALEN's default)."""
        registry = catalogue.table8_registry(compat=self.cfg.compat)
        return catalogue.table8_side_by_side(reported(PAPER, "table8"), registry)

    def table6(self):
        return show_table(self.algorithms, {"agrees": _yes_no})

    def table8(self):
        return show_table(self.hyperparameters, {"agrees": _yes_no})

    def table8_differences(self):
        """Table 8's rows where the registry and the paper differ."""
        return show_table(self.hyperparameters[~self.hyperparameters["agrees"]].drop(columns="agrees"))

    def compare_table6(self):
        """Table 6's counts (algorithms per group, those that run on tabular data): paper | ours | diff."""
        ours = catalogue.table6_numbers(catalogue.table6_registry())
        comparison = self.report.compare(ours, "table6", on=["group", "algorithm"])
        comparison["paper"] = pd.to_numeric(comparison["paper"])  # the file holds text too (references)
        return show_table(_shown_comparison(comparison, HIDDEN + ("algorithm",)),
                          {"paper": "{:g}", "ours": "{:g}", "diff": "{:+g}"})

    def compare_table8(self):
        """Table 8's numbers (each default, the smallest and largest value of each search): paper | ours | diff."""
        ours = catalogue.table8_numbers(catalogue.table8_registry(compat=self.cfg.compat))
        comparison = compare_with_paper(ours, catalogue.table8_paper_numbers(reported(PAPER, "table8")),
                                        on=["condition", "hparam"])
        self.report.comparisons.append(comparison)
        shown = _shown_comparison(comparison, HIDDEN)
        return show_table(shown[["condition", "parameter", "hparam", "metric", "paper", "ours", "diff", "ours_on"]],
                          {"paper": "{:g}", "ours": "{:g}", "diff": "{:+g}"})

    def claims(self):
        return self._claims(C.dataset_claims(self.crowd))


# ------------------------------------------------------------------------------------------------ 01
class SelectionTheory(Page):
    """01: Proposition 1 and Theorems 1-2 checked by Monte Carlo on synthetic problems (no data, no training)."""

    notebook = "01_selection_theory"

    @cached_property
    def problems(self) -> dict:
        cfg = self.cfg
        return theory.problems(cfg.n_samples, cfg.q, cfg.fps_p, seed=cfg.seed)

    @cached_property
    def eq8(self) -> pd.DataFrame:
        eq8 = theory.eq8_table(self.problems, self.cfg.redirects, seed=self.cfg.seed)
        self.report.table(eq8, "eq8")
        return eq8

    @cached_property
    def bound(self) -> pd.DataFrame:
        return theory.bound_table(self.eq8, self.problems, self.cfg.n_samples)

    @cached_property
    def thm2(self) -> pd.DataFrame:
        thm2 = theory.theorem2_table(self.problems, self.cfg.powers)
        self.report.table(thm2, "theorem2")
        return thm2

    @cached_property
    def counter(self) -> pd.DataFrame:
        counter = theory.class_dependent_counterexample(self.cfg.n_samples, self.cfg.q, seed=self.cfg.seed)
        self.report.table(counter, "class_dependent_counterexample")
        return counter

    def eq8_table(self):
        formats = {c: "{:.4f}" for c in ("c", "ACC", "CR", "(CR - c)/(1 - c)")}
        return show_table(self.eq8, formats | {"z": "{:+.2f}", "redirected": "{:.0%}"})

    def proposition1(self):
        shown = self.bound[["generator", "redirected", "gamma", "CR - ACC", "(1 - ACC) gamma", "holds"]]
        return show_table(shown, {"gamma": "{:.3f}", "CR - ACC": "{:.4f}", "(1 - ACC) gamma": "{:.4f}",
                                  "redirected": "{:.0%}", "holds": _yes_no})

    def theorem2(self):
        return show_table(self.thm2, {"ACC": "{:.4f}", "AA": "{:.4f}", "AA - ACC": "{:+.4f}", "z": "{:+.1f}"})

    def figure(self):
        return figures.theory_figure(self.eq8, self.thm2, self.report)

    def counterexample(self):
        return show_table(self.counter, {"ACC": "{:.4f}", "CR": "{:.4f}"})

    def claims(self):
        return self._claims(C.theory_claims(self.eq8, self.bound, self.thm2, self.counter))


# ------------------------------------------------------------------------------------------------ 02
class TabularBenchmark(SweepPage):
    """02: Tables 7, 9-16 and Figure 3 (the tabular sweep under four selection criteria) and the batching speed-up."""

    notebook = "02_tabular"

    table_name = "tables_tabular"

    def grids(self):
        return reports.tabular_grids(self.cfg)

    @property
    def main(self) -> pd.DataFrame:
        """The rows of the main variant (``compat`` as the settings say)."""
        return self.table[self.table["compat"] == self.cfg.compat]

    def results(self):
        return show_table(_by_algorithm(reports.wide_results(self.table, list(self.datasets))))

    def figure3(self):
        scores = selected_scores(self.records, nan_policy=self.cfg.nan_policy)
        return figures.figure3(scores[scores["compat"] == self.cfg.compat], list(self.datasets), self.report)

    def selection_summary(self):
        summary = reports.selection_summary(reported(PAPER, "results"), self.main)
        self.report.table(summary, "selection_summary")
        return show_table(summary, {c: "{:.2f}" for c in summary.columns if c.startswith(("mean", "rho"))})

    @cached_property
    def speed(self) -> pd.DataFrame:
        cfg = self.cfg
        speed = reports.batched_speedup(self.datasets, cfg.speedup, checkpoint_freq=cfg.checkpoint_freq,
                                        device=self.device, precision=reports.precision_setting(cfg))
        self.report.table(speed, "batched_speedup")
        return speed

    def speedup(self):
        return show_table(self.speed, {"speedup": "{:.2f}x", "one_by_one_s": "{:.2f}", "batched_s": "{:.2f}",
                                       "batched_by_auto": _yes_no})

    def paper_rows(self) -> pd.DataFrame:
        return reports.tabular_paper_rows(self.main.rename(columns={"mean": "value"}))

    def claims(self):
        cfg = self.cfg
        return self._claims(C.tabular_claims(self.table, self.datasets, compat=cfg.compat, n_trials=cfg.n_trials)
                            + [C.batching_claim(self.speed)])


# ------------------------------------------------------------------------------------------------ 03
class ImageBenchmark(SweepPage):
    """03: Tables 1-4 (the image sweep under four selection criteria), Figure 4 (cost per step) and the official
    code's PiCO+/ALIM warm-up."""

    notebook = "03_image"
    modality = "image"

    table_name = "tables_image"

    def grids(self):
        """One sweep per network and algorithm."""
        return reports.image_grids(self.cfg)

    def results(self):
        settings = [f"{d} / {a}" for a in self.cfg.archs for d in self.datasets]
        return show_table(_by_algorithm(reports.wide_results(self.table, settings, by=["dataset", "arch"])))

    @cached_property
    def timed_records(self) -> pd.DataFrame:
        """The records Figure 4 reads: the sweep's, or, where the sweep stacks its runs, the runs it trains alone
        for the figure (``reports.figure4_grids``; trained here if not yet)."""
        grids = reports.figure4_grids(self.cfg)
        if not grids:
            return self.records
        chosen = reports.figure4_datasets(self.cfg, list(self.datasets))
        with _run_by_run_quietly():
            return sweep_grids(grids, [self.datasets[name] for name in chosen], out_dir=self.records_dir,
                               device=self.device)[0]

    @cached_property
    def costs(self) -> pd.DataFrame:
        """Figure 4's data: ``figure4_costs`` for the settings' ``fig4`` network and dataset (None: pooled)."""
        self.report.table(reports.step_costs(self.timed_records), "fig4_step_costs")
        return reports.figure4_costs(self.timed_records, self.cfg.fig4["arch"], self.cfg.fig4["dataset"])

    def figure4(self):
        fig4 = self.cfg.fig4
        # the runs may have been trained earlier, elsewhere (the cache, plench.store): their records say where
        records = self.timed_records
        sources = set(records["mem_source"]) if "mem_source" in records else set()
        where = "GPU" if sources == {"cuda_max_allocated"} else "CPU" if sources == {"cpu_max_rss"} else "CPU and GPU"
        title = f"Figure 4 analogue: {fig4['dataset'] or ' + '.join(self.datasets)}, {fig4['arch']} ({where})"
        return figures.figure4(self.costs, title, self.report)

    @cached_property
    def compat_confidences(self) -> pd.DataFrame:
        check = reports.image_compat_check(self.datasets, self.cfg, device=self.device)
        self.report.table(check, "compat_confidences")
        return check

    def compat_check(self):
        return show_table(self.compat_confidences, {"max |w - s/|S||": "{:.4f}", "compat": _yes_no,
                                                    "uniform": _yes_no})

    def paper_rows(self) -> pd.DataFrame:
        return reports.image_paper_rows(self.table.rename(columns={"mean": "value"}))

    def claims(self):
        cfg = self.cfg
        return self._claims(C.image_claims(self.table, self.costs, self.compat_confidences, self.datasets,
                                           archs=cfg.archs, n_trials=cfg.n_trials))


# ------------------------------------------------------------------------------------------------ 04
class ValidationUse(TrainingPage):
    """04: Figure 1(a, b): the clean validation data used for selection, or added to training with |S| = 1."""

    notebook = "04_validation_use"

    @property
    def modality(self) -> str:
        return self.cfg.modality

    def split_sizes(self):
        """Training and validation rows per dataset (the validation rows move into training in the second arm)."""
        return show_table(reports.split_sizes(self.datasets), {"avg |S|": "{:.2f}"})

    @cached_property
    def sweep(self) -> tuple[pd.DataFrame, dict]:
        """Both arms, resumably (``validation_use_arms``): their results, and the sweep counts per arm."""
        with _run_by_run_quietly():
            arms, counts = reports.validation_use_arms(
                self.datasets, self.cfg, sweep_dir=self.records_dir,
                training_dir=store.sweep_dir(store.TRAINING_ARM, self.datasets.values()), device=self.device,
                data_dir=self.data_dir)
        self.report.table(arms.drop(columns=["per_trial"]), "fig1_arms")
        return arms, counts

    @property
    def arms(self) -> pd.DataFrame:
        return self.sweep[0]

    def run(self):
        """Train what is not trained yet; the counts per arm (total, skipped, restarted, ran)."""
        return show_table(pd.DataFrame(self.sweep[1]).T.rename_axis("arm").reset_index())

    @cached_property
    def alone(self) -> dict[str, float]:
        """Per dataset: a linear model trained on the validation rows alone (``clean_rows_alone``)."""
        return {name: reports.clean_rows_alone(ds, self.cfg.n_trials) for name, ds in self.datasets.items()}

    def figure1ab(self):
        return figures.figure1ab(self.arms, list(self.datasets), self.alone, self.report)

    @cached_property
    def differences(self) -> pd.DataFrame:
        """Per algorithm: both arms, their difference, the splits won by "training" and the clean rows alone."""
        differences = reports.arm_differences(self.arms, self.alone)
        self.report.table(differences, "fig1_differences")
        return differences

    def arm_differences(self):
        return show_table(self.differences, {"validation": "{:.2f}", "training": "{:.2f}",
                                             "training - validation": "{:+.2f}", "validation rows alone": "{:.2f}"})

    def compare_with_paper(self):
        validation = self.arms[self.arms["arm"] == "validation"].rename(columns={"mean": "value"})
        comparison = self.report.compare(reports.image_paper_rows(validation, network="ResNet"), "results",
                                         on=["dataset", "network", "algorithm", "criterion"])
        return show_table(_shown_comparison(comparison), COMPARISON_FORMATS)

    def claims(self):
        return self._claims(C.validation_use_claims(self.differences, self.cfg.datasets))


__all__ = ["Datasets", "ImageBenchmark", "Page", "SelectionTheory", "TabularBenchmark", "ValidationUse"]
