"""Notebook 01: robustness to each noising method (Fig. 3), where the noised items' losses lie (Figs. 4, 8, 9) and
the Wasserstein distance between the noised and clean items' losses (Table 5).

    page = NoiseRealism("smoke")
    page.run()                  # every dataset x method x level x seed: noise, train, select, measure (cached)
    page.figure3()              # measurable and true accuracy by level, ours beside the paper's curves
    page.figure_losses()        # Figs. 4/8 (noised vs clean items) and 9 (pooled) at the kde level
    page.table5()               # Wasserstein distance and median losses per method
    page.compare_with_paper()   # Table 5 and Fig. 3: paper | ours | diff, with what ours was run on
    page.claims()               # statement | yes / no / not run | detail

The tables, figures and claims come from the module-level functions (``fig3_curves``, ``fig3_figure``,
``loss_figure``, ``wasserstein_table``, ``table5_long``, ``fig3_long``, ``realism_claims``), which take plain
DataFrames and arrays, so the tests build tiny ones.
"""
from __future__ import annotations

from functools import cached_property
from typing import Mapping

import numpy as np
import pandas as pd

from lnlfn.benchmarks import METHOD_LABELS, noise_dataset
from lnlfn.data import load_text_dataset
from lnlfn.experiments import make_configs, model_sweep, scored_items, selected_accuracy, test_items
from lnlfn.pages import Page, comparison_table
from lnlfn.scoring import loss_scores
from shared.metrics.detection import wasserstein
from shared.plotting import finish_figure
from shared.report import claim_record, reported, verdict
from shared.tables import show_table

SYNTHETIC = ("uniform", "class_dependent")
#: the paper's curves are drawn on a right-hand axis with this range (its TweetNLP accuracies, %), for the shape
PAPER_AXIS = (75, 97)
OURS_MEASURABLE, OURS_TRUE = "ours: measurable (noisy test)", "ours: true (clean test)"
PAPER_TRUE, PAPER_MEASURABLE = "paper: true ({}, right axis)", "paper: measurable ({}, right axis)"


def realism_runs(datasets: Mapping, cfg, *, configs, kde_configs=None, device: str = "cpu", data_dir=None):
    """Fig. 3's runs and the losses behind Figs. 4, 8, 9 and Table 5.

    For every dataset, method (``cfg.datasets[name]``), level and seed: noise each split to the level (noise seed
    ``cfg.noise_seed + seed``), train the ``configs`` sweep on the noisy train split, select on the noisy
    validation split and measure accuracy on the noisy ("measurable") and clean ("true") test split. At
    ``cfg.kde_level`` the test items' losses are kept, from the best run of the ``kde_configs`` sweep when given
    (else of the same sweep). Returns ``(runs, losses)``: a DataFrame with one row per run (``realized`` = the
    share of the train split noised; accuracies in %) and a list of ``{dataset, method, seed, loss, noised}``.
    """
    runs, losses = [], []
    for name, method, level, seed in realism_cases(cfg, datasets):
        ds = datasets[name]
        te, scored = test_items(ds), scored_items(ds)
        out = realism_noise(ds, cfg, method, level, seed)
        sweep = model_sweep(ds, out.noisy, model=cfg.model, configs=configs, device=device,
                            data_dir=data_dir, desc=f"{name} {method} {level:.1%} seed {seed}",
                            executor=cfg.executor)
        measurable = selected_accuracy(sweep, ds, eval_labels=out.noisy)
        true = selected_accuracy(sweep, ds, eval_labels=out.clean)
        runs.append({"dataset": name, "method": method, "level": level, "seed": seed,
                     "realized": float(out.noised[ds.split == "train"].mean()),
                     "measurable": 100 * measurable["accuracy"], "true": 100 * true["accuracy"]})
        if not is_kde_level(cfg, level):
            continue
        if kde_configs is not None:  # Table 5's model: the best run of a sweep (FML), not the single run
            sweep = model_sweep(ds, out.noisy, model=cfg.model, configs=kde_configs, device=device,
                                data_dir=data_dir, desc=f"{name} {method} sweep seed {seed}",
                                executor=cfg.executor)
            measurable = selected_accuracy(sweep, ds, eval_labels=out.noisy)
        probs = sweep.probs[measurable["run"]][te]
        losses.append({"dataset": name, "method": method, "seed": seed,
                       "loss": loss_scores(probs, out.noisy[scored][te]), "noised": out.noised[scored][te]})
    return pd.DataFrame(runs), losses


def realism_cases(cfg, datasets) -> list[tuple[str, str, float, int]]:
    """Fig. 3's settings in the order they run: (dataset, method, level, seed) for every dataset of ``datasets``
    (names, or a mapping of loaded ones), its methods (``cfg.datasets[name]``), ``cfg.levels`` and ``cfg.seeds``.
    The page runs them; ``lnlfn.cost`` plans them."""
    return [(name, method, level, seed) for name in datasets for method in cfg.datasets[name]
            for level in cfg.levels for seed in cfg.seeds]


def realism_noise(ds, cfg, method: str, level: float, seed: int):
    """The noisy labels of one setting: ``method`` at ``level`` with the noise seed ``cfg.noise_seed + seed`` (a
    split short of eligible items is noised as far as it goes, as Fig. 3's crowd-majority curve)."""
    return noise_dataset(ds, method, level, seed=cfg.noise_seed + seed, majority_k=cfg.majority_k,
                         die_on_insufficient=False)


def is_kde_level(cfg, level: float) -> bool:
    """Whether the losses of Figs. 4, 8, 9 and Table 5 are taken at ``level`` (``cfg.kde_level``)."""
    return bool(np.isclose(level, cfg.kde_level))


def realism_configs(cfg) -> tuple[list, list | None]:
    """(the sweep of every setting, the sweep of Table 5's model at the kde level or None: the setting's own)."""
    configs = make_configs(cfg.model, cfg.configs)
    return configs, None if cfg.kde_configs is None else make_configs(cfg.model, cfg.kde_configs)


def fig3_curves(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds of the realized noise share and the two accuracies, per dataset, method and level."""
    return (runs.groupby(["dataset", "method", "level"], sort=False)[["realized", "measurable", "true"]]
            .mean().reset_index())


PANELS_PER_ROW = 3  # Fig. 3's five methods wrap onto two rows, so its text stays legible at the page's width


def fig3_figure(curves: pd.DataFrame, paper: pd.DataFrame, methods: Mapping, *, paper_dataset: Mapping,
                overlay=(), report=None, name: str = "fig3"):
    """Fig. 3: a panel per dataset and method (``methods[dataset]``, three to a row): our measurable (solid
    orange) and true (dashed blue) accuracy against the share of the training split noised. On the datasets of
    ``overlay``, the paper's curves for ``paper_dataset[dataset]`` (grey, on a right-hand axis, for the shape):
    true accuracy dotted; measurable accuracy dash-dotted, or end points only where the paper gives no more than
    two. One legend for the figure names every series."""
    import matplotlib.pyplot as plt

    n_cols = min(PANELS_PER_ROW, max(len(m) for m in methods.values()))
    rows_of = {dataset: -(-len(m) // n_cols) for dataset, m in methods.items()}  # a dataset's methods, wrapped
    fig, axes = plt.subplots(sum(rows_of.values()), n_cols, figsize=(3.3 * n_cols, 3.3 * sum(rows_of.values()) + 0.6),
                             squeeze=False, constrained_layout=True)
    first_row = 0
    for dataset, dataset_methods in methods.items():
        ref = paper[paper["dataset"] == paper_dataset.get(dataset)] if dataset in overlay else paper.iloc[:0]
        panels = axes[first_row:first_row + rows_of[dataset]].ravel()
        for i, (ax, method) in enumerate(zip(panels, dataset_methods)):
            part = curves[(curves["dataset"] == dataset) & (curves["method"] == method)]
            ax.plot(100 * part["realized"], part["measurable"], "-o", color="tab:orange", ms=3, label=OURS_MEASURABLE)
            ax.plot(100 * part["realized"], part["true"], "--o", color="tab:blue", ms=3, label=OURS_TRUE)
            _paper_curves(ax, ref[ref["noise"] == method], paper_dataset.get(dataset),
                          last=i % n_cols == n_cols - 1 or i == len(dataset_methods) - 1)
            ax.set_title(METHOD_LABELS.get(method, method), fontsize=10)
            ax.set_xlabel("% of split noised")
            if i % n_cols == 0:
                ax.set_ylabel(f"{dataset} test accuracy (%)")
            else:
                ax.sharey(panels[i - i % n_cols])
        for ax in panels[len(dataset_methods):]:
            ax.set_visible(False)
        first_row += rows_of[dataset]
    handles = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=min(len(handles), 4),
               fontsize=8)
    return finish_figure(fig, report, name)


def _paper_curves(ax, ref: pd.DataFrame, paper_name, *, last: bool) -> None:
    """The paper's true and measurable curves of one method on a twin axis of ``ax`` (nothing if none)."""
    true = ref[ref["metric"] == "true_accuracy"].sort_values("level")
    measurable = ref[ref["metric"] == "measurable_accuracy"].sort_values("level")
    if not len(true) and not len(measurable):
        return
    ax2 = ax.twinx()
    if len(true):
        ax2.plot(true["level"], true["value"], ":", color="0.55", label=PAPER_TRUE.format(paper_name))
    if len(measurable):  # a curve where the paper gives one, else its end points only
        ax2.plot(measurable["level"], measurable["value"], linestyle="-." if len(measurable) > 2 else "none",
                 marker="x", ms=4, color="0.45", label=PAPER_MEASURABLE.format(paper_name))
    ax2.set_ylim(*PAPER_AXIS)
    ax2.grid(False)
    if last:
        ax2.set_ylabel(f"paper: {paper_name} accuracy (%)", color="0.45")
    else:
        ax2.tick_params(right=False, labelright=False)


def density(values, grid) -> np.ndarray:
    """Gaussian kernel density of ``values`` on ``grid``; zeros when there are fewer than 3 values or no spread."""
    values = np.asarray(values)
    if len(values) > 2 and values.std() > 0:
        from scipy.stats import gaussian_kde

        return gaussian_kde(values)(grid)
    return np.zeros_like(grid)


def loss_figure(loss_frame: pd.DataFrame, *, loss_max: float, report=None, name: str = "fig4_losses"):
    """Figs. 4/8 (left: the noised items' losses per method and the clean items', in black) and Fig. 9 (right:
    noised and clean items pooled, per method); one row per dataset, seeds pooled."""
    import matplotlib.pyplot as plt

    grid = np.linspace(0, loss_max, 300)
    datasets = list(dict.fromkeys(loss_frame["dataset"]))
    fig, axes = plt.subplots(len(datasets), 2, figsize=(10, 3.4 * len(datasets)), squeeze=False,
                             constrained_layout=True)
    for (ax, ax9), dataset in zip(axes, datasets):
        part = loss_frame[loss_frame["dataset"] == dataset]
        for method, rows in part.groupby("method", sort=False):
            noised_losses = np.concatenate([loss[m] for loss, m in zip(rows["loss"], rows["noised"])])
            ax.plot(grid, density(noised_losses, grid),
                    label=f"{METHOD_LABELS.get(method, method)} (n={len(noised_losses)})")
            ax9.plot(grid, density(np.concatenate(list(rows["loss"])), grid), label=METHOD_LABELS.get(method, method))
        first = part[part["method"] == part.iloc[0]["method"]]
        clean_losses = np.concatenate([loss[~m] for loss, m in zip(first["loss"], first["noised"])])
        ax.plot(grid, density(clean_losses, grid), color="black", lw=1.5, label="clean items")
        ax.set(xlabel="loss of the given label", ylabel="density", title=f"Fig. 4/8 analogue: noised items ({dataset})")
        ax9.set(xlabel="loss of the given label", title=f"Fig. 9 analogue: noised and clean pooled ({dataset})")
        ax.legend(fontsize=7)
        ax9.legend(fontsize=7)
    return finish_figure(fig, report, name)


def wasserstein_table(loss_frame: pd.DataFrame) -> pd.DataFrame:
    """Table 5: per dataset and method, the mean over seeds of the Wasserstein distance between the noised and
    the clean items' losses, and of their median losses."""
    rows = [{"dataset": r["dataset"], "method": r["method"], "seed": r["seed"],
             "wasserstein": wasserstein(r["loss"][r["noised"]], r["loss"][~r["noised"]]),
             "median loss (noised)": float(np.median(r["loss"][r["noised"]])),
             "median loss (clean)": float(np.median(r["loss"][~r["noised"]]))} for _, r in loss_frame.iterrows()]
    return (pd.DataFrame(rows).groupby(["dataset", "method"], sort=False).mean(numeric_only=True)
            .drop(columns="seed").reset_index())


def table5_long(wd: pd.DataFrame, paper_dataset: Mapping, profile: str) -> pd.DataFrame:
    """Our Wasserstein distances keyed as the paper's Table 5 (its dataset column, the noise)."""
    return pd.DataFrame({"dataset": wd["dataset"].map(paper_dataset), "noise": wd["method"], "metric": "wasserstein",
                         "value": wd["wasserstein"], "ours_on": wd["dataset"] + f" ({profile})"})


def fig3_long(curves: pd.DataFrame, paper_dataset: Mapping, profile: str) -> pd.DataFrame:
    """Our Fig. 3 accuracies keyed as the paper's (dataset, noise, level in %, true / measurable)."""
    return pd.concat([
        pd.DataFrame({"dataset": curves["dataset"].map(paper_dataset), "noise": curves["method"],
                      "level": (100 * curves["level"]).round(1), "metric": metric, "value": curves[column],
                      "ours_on": curves["dataset"] + f" ({profile})"})
        for metric, column in (("true_accuracy", "true"), ("measurable_accuracy", "measurable"))])


def realism_claims(wd: pd.DataFrame, curves: pd.DataFrame, methods: Mapping, levels) -> list[dict]:
    """Per dataset: Table 5's ordering (uniform farthest from the clean losses; crowd majority closest), Fig. 4's
    median losses, Fig. 3's slope under uniform noise, the measurable accuracy under dissenting-label vs uniform
    noise at the highest level, and (reported) whether the true accuracy falls more under human noise. A claim
    whose numbers are missing (NaN) is "not run" (``verdict``)."""
    records = []
    top = max(levels)
    for name in methods:
        w = wd[wd["dataset"] == name].set_index("method")["wasserstein"]
        med = wd[wd["dataset"] == name].set_index("method")["median loss (noised)"]
        human = [m for m in w.index if m not in SYNTHETIC]
        detail = ", ".join(f"{METHOD_LABELS[m]} {v:.2f}" for m, v in w.items())
        records.append(claim_record(
            f"Table 5 ({name}): uniform noise is farther from the clean losses than every human-originated noise",
            verdict(all(w["uniform"] > w[m] for m in human), *w), detail))
        if "crowd_majority" in w.index:
            records.append(claim_record(f"Table 5 ({name}): crowd-majority noise is the closest to the clean losses",
                                        verdict(w.idxmin() == "crowd_majority", *w), detail))
            mids = [m for m in ("dissenting_label", "dissenting_worker") if m in med.index]
            records.append(claim_record(
                f"Fig. 4 ({name}): median loss of noised items: uniform > dissenting label/worker > crowd majority",
                verdict(all(med["uniform"] > med[m] > med["crowd_majority"] for m in mids), *med),
                ", ".join(f"{METHOD_LABELS[m]} {v:.2f}" for m, v in med.items())))
        uni = curves[(curves["dataset"] == name) & (curves["method"] == "uniform")]
        slope = np.polyfit(100 * uni["realized"], uni["measurable"], 1)[0]
        records.append(claim_record(
            f"Fig. 3 ({name}): measurable accuracy falls about one point per point of uniform noise "
            "(slope between -1.2 and -0.6)", verdict(-1.2 - 1e-9 <= slope <= -0.6 + 1e-9, slope), f"slope {slope:.2f} pt/pt"))
        at_top = curves[(curves["dataset"] == name) & np.isclose(curves["level"], top)].set_index("method")
        if "dissenting_label" in at_top.index:
            label, uniform = at_top.loc["dissenting_label", "measurable"], at_top.loc["uniform", "measurable"]
            records.append(claim_record(
                f"Fig. 3 ({name}): at {top:.0%} noise, measurable accuracy is higher under dissenting-label noise "
                "than under uniform noise (the model partly learns human noise)",
                verdict(label > uniform, label, uniform), f"dissenting label {label:.1f}, uniform {uniform:.1f}"))
        drops = {}
        for method in methods[name]:
            part = curves[(curves["dataset"] == name) & (curves["method"] == method)]
            drops[method] = float(part["true"].iloc[-1] - part["true"].iloc[0])
        records.append(claim_record(
            f"(Reported, not expected of a frozen encoder) Fig. 3 ({name}): true accuracy falls more under "
            "human-originated noise than under uniform noise",
            verdict(min(drops[m] for m in drops if m not in SYNTHETIC) < drops["uniform"] - 1, *drops.values()),
            ", ".join(f"{METHOD_LABELS[m]} {v:+.1f} pt" for m, v in drops.items())))
    return records


class NoiseRealism(Page):
    """01: Fig. 3, Figs. 4, 8, 9 and Table 5 from one set of runs."""

    notebook = "01_noise_realism"

    @cached_property
    def datasets(self) -> dict:
        return {name: load_text_dataset(name, data_dir=self.data_dir) for name in self.cfg.datasets}

    @property
    def methods(self) -> dict:
        """``{dataset: [noising methods]}`` in Fig. 3's order."""
        return {name: list(self.cfg.datasets[name]) for name in self.datasets}

    def run(self):
        """Train (or read from the cache) every run; the mean curves per dataset, method and level."""
        cfg = self.cfg
        configs, kde_configs = realism_configs(cfg)
        self.runs, losses = realism_runs(self.datasets, cfg, configs=configs, kde_configs=kde_configs,
                                         device=self.compute_device, data_dir=self.data_dir)
        self.report.table(self.runs, "fig3_runs")
        self.losses = pd.DataFrame(losses)
        self.curves = fig3_curves(self.runs)
        shown = self.curves.rename(columns={"realized": "train split noised", "measurable": "measurable (%)",
                                            "true": "true (%)"})
        return show_table(shown, {"level": "{:.1%}", "train split noised": "{:.2%}", "measurable (%)": "{:.1f}",
                                  "true (%)": "{:.1f}"})

    def _figure_name(self, stem: str) -> str:
        return "_".join([stem, *self.datasets])

    def figure3(self):
        return fig3_figure(self.curves, reported(self.paper, "fig3"), self.methods,
                           paper_dataset=self.cfg.paper_dataset, overlay=self.cfg.paper_overlay, report=self.report,
                           name=self._figure_name("fig3"))

    def figure_losses(self):
        return loss_figure(self.losses, loss_max=self.cfg.loss_max, report=self.report,
                           name=self._figure_name("fig4_losses"))

    @cached_property
    def distances(self) -> pd.DataFrame:
        """Table 5, ours (``wasserstein_table``)."""
        wd = wasserstein_table(self.losses)
        self.report.table(wd, "table5")
        return wd

    def table5(self):
        return show_table(self.distances, {c: "{:.3f}" for c in self.distances.columns[2:]})

    @cached_property
    def comparison(self) -> pd.DataFrame:
        """Table 5 and Fig. 3 beside ours (every paper number; ours empty where we ran no such setting)."""
        paper_dataset = {name: self.cfg.paper_dataset[name] for name in self.datasets}
        profile = self.report.profile
        table5 = self.report.compare(table5_long(self.distances, paper_dataset, profile), "table5",
                                     on=["dataset", "noise"])
        fig3 = self.report.compare(fig3_long(self.curves, paper_dataset, profile), "fig3",
                                   on=["dataset", "noise", "level"])
        return pd.concat([table5, fig3[fig3["ours"].notna()]], ignore_index=True)

    def compare_with_paper(self):
        """Table 5 (every value) and Fig. 3 at the levels we ran."""
        return comparison_table(self.comparison)

    def claims(self) -> pd.DataFrame:
        self.comparison  # noqa: B018 -- recorded for the scorecard even when the comparison is not displayed
        return self._finish(realism_claims(self.distances, self.curves, self.methods, self.cfg.levels))


__all__ = ["NoiseRealism", "realism_runs", "realism_cases", "realism_noise", "is_kde_level", "realism_configs",
           "fig3_curves", "fig3_figure", "density", "loss_figure", "wasserstein_table", "table5_long", "fig3_long",
           "realism_claims"]
