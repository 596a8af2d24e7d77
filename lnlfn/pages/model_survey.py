"""Notebook 02: the model survey (App. D): does a run's loss predict its detection performance (Fig. 2), do better
representations detect better (Figs. 7 and 10), and does ensembling beat averaging the top runs (Table 10)?

    page = ModelSurvey("smoke")
    page.models_table()         # the models of the settings: used, or skipped and why
    page.run()                  # per seed: the benchmark, the n-gram baseline and every model's sweep (cached)
    page.figure2()              # validation loss vs AUPR and precision at CL's threshold, one point per run
    page.figure7_10()           # ROC curves (Fig. 7) and AUPR against pretrained parameters (Fig. 10)
    page.families_table()       # AUROC and AUPR per model family, mean over seeds
    page.table10()              # averaged vs ensembled top runs, at CL's threshold and with CL
    page.compare_with_paper()   # Fig. 2's r^2 and Table 10: paper | ours | diff, with what ours was run on
    page.claims()               # statement | yes / no / not run | detail

The tables, figures and claims come from the module-level functions (``sweep_rows``, ``run_summary``,
``loss_fits``, ``fig2_figure``, ``family_summary``, ``fig7_10_figure``, ``table10_rows``, ``table10_summary``,
``table10_long``, ``survey_claims``), which take plain records, DataFrames and ``SweepResult``/``Detection``
objects, so the tests build tiny ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Mapping

import numpy as np
import pandas as pd

from lnlfn.benchmarks import BENCHMARKS
from lnlfn.data import load_text_dataset
from lnlfn.experiments import (available_models, baseline_sweep, benchmark_labels, brief, make_configs, model_sweep,
                               precision_recall_f1, scored_items, sweep_configs, test_items)
from lnlfn.pages import Page, comparison_table
from lnlfn.scoring import Detection, SweepResult, cl, fme, fml, loss_detection, with_cl
from shared.plotting import finish_figure
from shared.report import claim_record, verdict
from shared.tables import show_table

BASELINE = "char n-gram (no pretraining)"
FIG2_METRICS = {"precision_at_cl_k": "precision at CL's threshold", "aupr": "AUPR"}
RUN_METRICS = ["val_loss", "val_accuracy", "aupr", "precision_at_cl_k"]
TABLE10_METRICS = ["task_acc_noisy", "task_acc_clean", "precision", "recall", "f1", "cl_precision", "cl_recall",
                   "cl_f1"]


@dataclass(frozen=True)
class Family:
    """One model family on one noise seed: its detection (FME for a pretrained model, the best run for the
    baseline) on the test items, which of them are errors, and for a pretrained model its sweep, CL's count k
    and the clean labels (Table 10)."""

    detection: Detection
    is_error: np.ndarray
    sweep: SweepResult | None = None
    k: int | None = None
    clean: np.ndarray | None = None


def survey_cases(cfg, models) -> list[tuple[int, list[tuple[str, list]]]]:
    """The survey in the order it runs: per noise seed of ``cfg.seeds``, every model of ``models`` (names) with
    its sweep (``sweep_configs(model, cfg.n_sweep, seed=seed)``: the random draws follow the seed). The page runs
    them after the seed's n-gram baseline; ``lnlfn.cost`` plans them."""
    return [(seed, [(model, sweep_configs(model, cfg.n_sweep, seed=seed)) for model in models]) for seed in cfg.seeds]


def sweep_rows(sweep: SweepResult, configs, is_error, clean, k: int, *, model: str, seed: int) -> list[dict]:
    """One record per run of a sweep (restricted to the test items): its validation loss and accuracy, the AUPR of
    its loss ranking, its precision among the top ``k`` (CL's count) and its noisy and clean test accuracy."""
    rows = []
    for h, config in enumerate(configs):
        det = loss_detection(sweep.probs[h], sweep.labels)
        top = det.ranked()[:k]
        pred = sweep.probs[h].argmax(1)
        rows.append({"model": model, "seed": seed, "run": config.name, "val_loss": float(sweep.val_loss[h]),
                     "val_accuracy": float(sweep.val_accuracy[h]), "aupr": det.aupr(is_error),
                     "precision_at_cl_k": float(is_error[top].mean()), "k": k,
                     "noisy_test_acc": float((pred == sweep.labels).mean()),
                     "clean_test_acc": float((pred == clean).mean())})
    return rows


def run_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Per model and metric (validation loss and accuracy, AUPR, precision at CL's threshold): the number of runs
    and the mean, sd, min, median and max over runs and seeds."""
    long = runs.melt(id_vars=["model"], value_vars=RUN_METRICS, var_name="metric")
    stats = long.groupby(["model", "metric"], sort=False)["value"].agg(["count", "mean", "std", "min", "median", "max"])
    return stats.reset_index().rename(columns={"count": "runs", "std": "sd"})


def loss_fits(runs: pd.DataFrame) -> dict:
    """Fig. 2's fits: for AUPR and precision at CL's threshold, Pearson's r with the log validation loss and the
    least-squares line in log loss (``{metric: {"r", "slope", "intercept"}}``)."""
    from scipy.stats import pearsonr

    fits = {}
    x = np.log(runs["val_loss"])
    for metric in FIG2_METRICS:
        r, _ = pearsonr(x, runs[metric])
        slope, intercept = np.polyfit(x, runs[metric], 1)
        fits[metric] = {"r": float(r), "slope": float(slope), "intercept": float(intercept)}
    return fits


def fig2_figure(runs: pd.DataFrame, fits: Mapping, report=None):
    """Fig. 2: one point per run (colour: noise seed) of detection performance against validation loss (log
    scale), with the least-squares line in log loss and r in the title."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    x = np.log(runs["val_loss"])
    grid = np.linspace(x.min(), x.max(), 50)
    for ax, (metric, title) in zip(axes, FIG2_METRICS.items()):
        fit = fits[metric]
        for seed, part in runs.groupby("seed"):
            ax.scatter(part["val_loss"], part[metric], s=18, label=f"noise seed {seed}")
        ax.plot(np.exp(grid), fit["intercept"] + fit["slope"] * grid, color="black", lw=1,
                label="least-squares fit in log loss")
        ax.set_xscale("log")
        r = fit["r"]
        ax.set(xlabel="validation loss (noisy labels, log scale)", ylabel=title,
               title=f"{title}: r = {r:.2f}, r² = {r * r:.2f}")
    axes[0].legend(fontsize=8)
    return finish_figure(fig, report, "fig2_loss_vs_detection")


def family_summary(families: Mapping) -> pd.DataFrame:
    """AUROC and AUPR of each family's detection, mean over seeds (index: family, in first-seen order)."""
    from sklearn.metrics import roc_auc_score

    rows = [{"family": label, "seed": seed, "auroc": roc_auc_score(f.is_error, f.detection.scores),
             "aupr": f.detection.aupr(f.is_error)} for (label, seed), f in families.items()]
    return pd.DataFrame(rows).groupby("family", sort=False)[["auroc", "aupr"]].mean()


def fig7_10_figure(families: Mapping, summary: pd.DataFrame, sizes: Mapping, *, seed, benchmark: str, report=None):
    """Fig. 7 (ROC curves of each family's detection on noise seed ``seed``) and Fig. 10 (mean AUPR against the
    number of pretrained parameters, ``sizes[family]``; 0, drawn at 1, for none)."""
    import matplotlib.pyplot as plt
    from sklearn.metrics import roc_curve

    fig, (ax7, ax10) = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    for (label, s), f in families.items():
        if s == seed:
            fpr, tpr, _ = roc_curve(f.is_error, f.detection.scores)
            ax7.plot(fpr, tpr, label=label)
    ax7.plot([0, 1], [0, 1], ":", color="0.6", label="chance")
    ax7.set(xlabel="false positive rate", ylabel="true positive rate", title=f"Fig. 7 analogue ({benchmark})")
    ax7.legend(fontsize=8)
    for family, row in summary.iterrows():
        x = max(sizes[family], 1)
        ax10.scatter(x, row["aupr"], s=40, label=family)
        ax10.annotate(family, (x, row["aupr"]), fontsize=8, xytext=(4, 4), textcoords="offset points")
    ax10.set_xscale("log")
    ax10.set(xlabel="pretrained parameters (log; 1 = none)", ylabel="AUPR (mean over seeds)", title="Fig. 10 analogue")
    return finish_figure(fig, report, "fig7_fig10")


def table10_rows(families: Mapping, label: str, seeds, top_k: int) -> pd.DataFrame:
    """Table 10 for the family ``label``, one row per seed and detection: "averaged" = each of the top ``top_k``
    runs alone, "ensembled" = FME over them; task accuracy (noisy, clean test labels) and precision, recall, F1
    at CL's threshold k, alone and with CL on the detection's own probabilities."""
    rows = []
    for seed in seeds:
        f = families[label, seed]
        for method, dets in (("averaged", [fml(f.sweep, rank=r) for r in range(top_k)]), ("ensembled", [f.detection])):
            for det in dets:
                p, r, f1 = precision_recall_f1(det.ranked()[:f.k], f.is_error)
                cp, cr, cf = precision_recall_f1(with_cl(det).ranked(), f.is_error)
                rows.append({"method": method, "seed": seed,
                             "task_acc_noisy": float((det.probs.argmax(1) == det.labels).mean()),
                             "task_acc_clean": float((det.probs.argmax(1) == f.clean).mean()),
                             "precision": p, "recall": r, "f1": f1, "cl_precision": cp, "cl_recall": cr, "cl_f1": cf})
    return pd.DataFrame(rows, columns=["method", "seed", *TABLE10_METRICS])


def table10_means(table10_runs: pd.DataFrame) -> pd.DataFrame:
    """The mean of every Table 10 metric per method (index: method)."""
    return table10_runs.drop(columns="seed").groupby("method").mean()


def table10_summary(table10_runs: pd.DataFrame) -> pd.DataFrame:
    """Table 10 as shown: per method and metric, the mean and sd over the rows (runs x seeds)."""
    long = table10_runs.melt(id_vars=["method"], value_vars=TABLE10_METRICS, var_name="metric")
    stats = long.groupby(["method", "metric"], sort=False)["value"].agg(["mean", "std"])
    return stats.reset_index().rename(columns={"std": "sd"})


def table10_long(t10: pd.DataFrame, dataset: str, ours_on: str) -> pd.DataFrame:
    """``table10_means`` keyed as the paper's Table 10 (dataset, method, metric)."""
    return pd.DataFrame([{"dataset": dataset, "method": m, "metric": c, "value": t10.loc[m, c], "ours_on": ours_on}
                         for m in t10.index for c in t10.columns])


def survey_claims(fits: Mapping, n_runs: int, summary: pd.DataFrame, label: str, t10: pd.DataFrame,
                  benchmark: str) -> list[dict]:
    """Fig. 2 (log validation loss against AUPR and against precision at CL's threshold: r < -0.5), Fig. 7 (the
    pretrained family ``label`` has a higher AUROC than the n-gram baseline) and Table 10 (the ensemble's F1 at
    least the averaged runs' F1 - 0.02). A claim whose numbers are undefined (NaN: r of a constant series, say) is
    "not run" (``verdict``)."""
    r_aupr, r_prec = fits["aupr"]["r"], fits["precision_at_cl_k"]["r"]
    ens, avg = t10.loc["ensembled", "f1"], t10.loc["averaged", "f1"]
    pretrained, baseline = summary.loc[label, "auroc"], summary.loc[BASELINE, "auroc"]
    return [
        claim_record("Fig. 2: across the sweep, log validation loss correlates negatively with AUPR (r < -0.5)",
                     verdict(r_aupr < -0.5, r_aupr), f"r = {r_aupr:.2f} over {n_runs} runs"),
        claim_record("Fig. 2: log validation loss correlates negatively with precision at CL's threshold (r < -0.5)",
                     verdict(r_prec < -0.5, r_prec), f"r = {r_prec:.2f}"),
        claim_record(f"Fig. 7: the pretrained encoder detects errors better than the non-pretrained baseline (AUROC, "
                     f"{benchmark})", verdict(pretrained > baseline, pretrained, baseline),
                     ", ".join(f"{f} {v:.3f}" for f, v in summary["auroc"].items())),
        claim_record("Table 10: the ensemble's F1 at CL's threshold is at least the averaged runs' F1 - 0.02",
                     verdict(ens >= avg - 0.02, ens, avg), f"ensembled {ens:.3f}, averaged {avg:.3f}"),
    ]


class ModelSurvey(Page):
    """02: Figs. 2, 7, 10 and Table 10 over sweeps of every available model and the n-gram baseline."""

    notebook = "02_model_survey"

    @cached_property
    def dataset(self):
        return load_text_dataset(BENCHMARKS[self.cfg.benchmark].dataset, data_dir=self.data_dir)

    @cached_property
    def _available(self) -> tuple[dict, dict]:
        return available_models(self.cfg.models, self.data_dir)  # a missing model folder is skipped, with the reason

    @property
    def models(self) -> dict:
        return self._available[0]

    @property
    def main_label(self) -> str:
        """The first available model: Fig. 7's claim and Table 10 are about it."""
        return next(iter(self.models.values()))["label"]

    @property
    def ours_on(self) -> str:
        return f"{self.cfg.benchmark} ({self.report.profile})"

    def models_table(self):
        """Every model of the settings, its pretrained parameters and whether it is used (or why not)."""
        skipped = self._available[1]
        rows = [{"model": name, "label": info["label"], "pretrained parameters": info["params"],
                 "used": "no: " + brief(skipped[name]) if name in skipped else "yes"}
                for name, info in dict(self.cfg.models).items()]
        return show_table(pd.DataFrame(rows), {"pretrained parameters": "{:,}"})

    def run(self):
        """Per seed: noise the benchmark, run the baseline and every model's sweep (cached), score every run."""
        cfg, ds = self.cfg, self.dataset
        te, scored = test_items(ds), scored_items(ds)
        baseline_configs = make_configs("all-minilm-l6-v2", cfg.baseline_configs)
        runs, self.families = [], {}
        for seed, models in survey_cases(cfg, self.models):
            noised = benchmark_labels(cfg.benchmark, ds, cfg, seed)
            err, clean = noised.noised[scored][te], noised.clean[scored][te]
            base = fml(baseline_sweep(ds, noised.noisy, configs=baseline_configs).restrict(te))
            k = cl(base.probs, base.labels).n_flagged  # the paper's "CL threshold"
            self.families[BASELINE, seed] = Family(base, err)
            for model, configs in models:
                info = self.models[model]
                sweep = model_sweep(ds, noised.noisy, model=model, configs=configs, device=self.compute_device,
                                    data_dir=self.data_dir, desc=f"{model} seed {seed}",
                                    executor=cfg.executor).restrict(te)
                self.families[info["label"], seed] = Family(fme(sweep, k=cfg.top_k), err, sweep, k, clean)
                runs += sweep_rows(sweep, configs, err, clean, k, model=info["label"], seed=seed)
        self.runs = pd.DataFrame(runs)
        self.report.table(self.runs, "sweep_runs")
        return show_table(run_summary(self.runs), {c: "{:.3f}" for c in ("mean", "sd", "min", "median", "max")})

    @cached_property
    def fits(self) -> dict:
        return loss_fits(self.runs)

    def figure2(self):
        return fig2_figure(self.runs, self.fits, self.report)

    @cached_property
    def summary(self) -> pd.DataFrame:
        """AUROC and AUPR per family (``family_summary``)."""
        summary = family_summary(self.families)
        self.report.table(summary.reset_index(), "families")
        return summary

    def figure7_10(self):
        sizes = {BASELINE: 0, **{info["label"]: info["params"] for info in self.models.values()}}
        return fig7_10_figure(self.families, self.summary, sizes, seed=self.cfg.seeds[0], benchmark=self.cfg.benchmark,
                              report=self.report)

    def families_table(self):
        return show_table(self.summary.reset_index(), {"auroc": "{:.3f}", "aupr": "{:.3f}"})

    @cached_property
    def table10_runs(self) -> pd.DataFrame:
        rows = table10_rows(self.families, self.main_label, self.cfg.seeds, self.cfg.top_k)
        self.report.table(rows, "table10_runs")
        return rows

    def table10(self):
        return show_table(table10_summary(self.table10_runs), {"mean": "{:.3f}", "sd": "{:.3f}"})

    @cached_property
    def comparison(self) -> pd.DataFrame:
        dataset = BENCHMARKS[self.cfg.benchmark].stands_in_for
        ours = pd.DataFrame([{"dataset": dataset, "metric": "r2_log_loss_vs_precision",
                              "value": self.fits["precision_at_cl_k"]["r"] ** 2, "ours_on": self.ours_on}])
        survey = self.report.compare(ours, "survey", on=["dataset"])
        table10 = self.report.compare(table10_long(table10_means(self.table10_runs), dataset, self.ours_on),
                                      "table10", on=["dataset", "method"])
        return pd.concat([survey, table10], ignore_index=True)

    def compare_with_paper(self):
        return comparison_table(self.comparison)

    def claims(self) -> pd.DataFrame:
        self.comparison  # noqa: B018 -- recorded for the scorecard even when the comparison is not displayed
        return self._finish(survey_claims(self.fits, len(self.runs), self.summary, self.main_label,
                                          table10_means(self.table10_runs), self.cfg.benchmark))


__all__ = ["ModelSurvey", "Family", "BASELINE", "survey_cases", "sweep_rows", "run_summary", "loss_fits", "fig2_figure",
           "family_summary", "fig7_10_figure", "table10_rows", "table10_means", "table10_summary", "table10_long",
           "survey_claims"]
