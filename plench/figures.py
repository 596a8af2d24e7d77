"""Plench's figures, drawn from the notebooks' tables: Figure 2 (PLCIFAR10's crowd), Figure 3 (tabular box plots),
Figure 4 (cost per step), Figure 1(a, b) (validation data for selection or for training) and the Monte-Carlo
check of Theorems 1 and 2 (``theory_figure``).

Each function returns the matplotlib Figure (closed, so that a notebook shows it once, as the cell's value) and,
given a ``shared.report.NotebookReport``, saves it as SVG + PNG; a figure whose data are absent is skipped with
the reason printed, and the function returns None.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from plench.algorithms import ALGORITHMS, GROUPS, TABLE6_ORDER, display_name
from plench.selection import CRITERIA
from shared.plotting import finish_figure

GROUP_COLORS = dict(zip(GROUPS, ["#4c72b0", "#55a868", "#c44e52", "#8172b2"]))


def figure2(stats, report=None):
    """Figure 2 from ``plench.reports.crowd_statistics``: (a) partial labels per class, (b) noise rate vs the number
    of annotators in the union, (c, d) the flipping matrices p(j in S | y = i) of the crowd datasets present."""
    reason = stats.skip_reason()
    if reason is not None:
        print(f"Figure 2 skipped: it needs a crowd-annotated dataset ({reason})")
        return None
    classes, by_k = stats.classes, stats.noise_by_annotators
    ticks = np.arange(len(classes))
    fig, axes = plt.subplots(1, 2 + len(stats.matrices), figsize=(4.3 * (2 + len(stats.matrices)), 4),
                             constrained_layout=True)
    axes[0].bar(ticks, stats.histogram, color="#4c72b0")
    axes[0].set(xticks=ticks, xticklabels=classes, title=f"(a) partial labels per class\n{stats.source}",
                ylabel="count")
    axes[1].plot(np.arange(1, len(by_k) + 1), 100 * by_k, marker="o")
    axes[1].set(xlabel="annotators in the union", ylabel="noise rate (%)", title="(b) noise rate vs annotators")
    for ax, (name, matrix), letter in zip(axes[2:], stats.matrices.items(), "cd"):
        image = ax.imshow(matrix, vmin=0, vmax=1, cmap="viridis")
        ax.grid(False)
        ax.set(title=f"({letter}) {name}: p(j in S | y = i)", xlabel="j", ylabel="i", xticks=ticks, yticks=ticks)
    if stats.matrices:
        fig.colorbar(image, ax=axes[2:], shrink=0.8)
    return finish_figure(fig, report, "fig2_statistics")


def figure3(scores: pd.DataFrame, datasets: Sequence[str], report=None):
    """Figure 3: per criterion (rows) and dataset (columns) one box per algorithm over the splits' selected test
    accuracies (``plench.selection.selected_scores``), coloured by the mean; NN and GA left out, as in the paper."""
    scores = scores[~scores["algorithm"].isin(["NN", "GA"])]
    algorithms = [a for a in TABLE6_ORDER if a in set(scores["algorithm"])]
    fig, axes = plt.subplots(len(CRITERIA), len(datasets), figsize=(4.2 * len(datasets), 2.6 * len(CRITERIA)),
                             sharex=True, squeeze=False, constrained_layout=True)
    cmap = plt.get_cmap("viridis")
    for i, criterion in enumerate(CRITERIA):
        for j, name in enumerate(datasets):
            ax = axes[i, j]
            part = scores[(scores["criterion"] == criterion) & (scores["dataset"] == name)]
            values = [100 * part.loc[part["algorithm"] == a, "test_acc"].to_numpy() for a in algorithms]
            boxes = ax.boxplot(values, patch_artist=True, widths=0.6, medianprops={"color": "black"})
            for patch, v in zip(boxes["boxes"], values):
                patch.set_facecolor(cmap(np.mean(v) / 100 if len(v) else 0))
            ax.set_xticks(np.arange(1, len(algorithms) + 1), [display_name(a) for a in algorithms], rotation=90,
                          fontsize="x-small")
            if j == 0:
                ax.set_ylabel(f"{CRITERIA[criterion].label}\ntest accuracy (%)", fontsize="small")
            if i == 0:
                ax.set_title(name)
    return finish_figure(fig, report, "fig3_boxplots")


def figure4(costs: pd.DataFrame, title: str, report=None):
    """Figure 4: milliseconds per training step per algorithm (bars: the weighted mean, ticks: the median over
    checkpoint intervals; ``plench.reports.step_costs``) and, when every record holds a CUDA peak, GPU memory."""
    order = {name: i for i, name in enumerate(TABLE6_ORDER)}
    costs = costs.assign(_order=costs["algorithm"].map(order)).sort_values("_order")
    on_gpu = set(costs["mem_source"]) == {"cuda_max_allocated"}
    bar_colors = [GROUP_COLORS[ALGORITHMS[a].group] for a in costs["algorithm"]]
    fig, axes = plt.subplots(1, 2 if on_gpu else 1, figsize=(13 if on_gpu else 8, 6.5), squeeze=False,
                             constrained_layout=True)
    positions = np.arange(len(costs))
    axes[0, 0].barh(positions, 1000 * costs["step_time_s"], color=bar_colors)
    axes[0, 0].plot(1000 * costs["step_time_median_s"], positions, "k|", markersize=9, label="median over intervals")
    axes[0, 0].set(yticks=positions, yticklabels=[display_name(a) for a in costs["algorithm"]],
                   xlabel="ms per training step", title="(a) running time per step")
    if on_gpu:
        axes[0, 1].barh(positions, costs["peak_mem_gb"], color=bar_colors)
        axes[0, 1].set(yticks=positions, yticklabels=[], xlabel="GB (max allocated)", title="(b) GPU memory")
    for ax in axes[0]:
        ax.invert_yaxis()
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in GROUP_COLORS.values()]
    axes[0, -1].legend(handles + [axes[0, 0].lines[0]], list(GROUP_COLORS) + ["median over intervals"],
                       loc="upper right", fontsize="small")
    fig.suptitle(title + ("" if on_gpu else "\n(CPU: the process's peak memory is not comparable per algorithm, "
                                            "not shown)"))
    return finish_figure(fig, report, "fig4_costs")


def figure1ab(arms: pd.DataFrame, datasets: Sequence[str], alone: Mapping[str, float] | None = None, report=None):
    """Figure 1(a, b): per dataset, the test accuracy of each algorithm's two arms (``validation_use_arms``), mean ±
    error over splits; a dashed line at ``alone[dataset]`` (the clean rows alone, ``clean_rows_alone``)."""
    order = {name: i for i, name in enumerate(TABLE6_ORDER)}
    algorithms = sorted(dict.fromkeys(arms["algorithm"]), key=lambda a: order.get(a, len(order)))
    fig, axes = plt.subplots(1, len(datasets), figsize=(1.1 * len(algorithms) * len(datasets) + 2, 4.2),
                             sharey=True, squeeze=False, constrained_layout=True)
    width = 0.38
    for ax, name, letter in zip(axes[0], datasets, "abcdefgh"):
        for offset, arm, color in ((-width / 2, "validation", "#9ecae1"), (width / 2, "training", "#2171b5")):
            part = arms[(arms["dataset"] == name) & (arms["arm"] == arm)].set_index("algorithm").reindex(algorithms)
            ax.bar(np.arange(len(algorithms)) + offset, part["mean"], width, yerr=part["err"], color=color, label=arm,
                   capsize=2)
        if alone is not None:
            ax.axhline(alone[name], color="0.3", linestyle="--", linewidth=1,
                       label="validation rows alone (linear model)")
        ax.set_xticks(np.arange(len(algorithms)), [display_name(a) for a in algorithms], rotation=45, ha="right")
        ax.set_title(f"({letter}) {name}")
    axes[0, 0].set_ylabel("test accuracy (%)")
    axes[0, 0].set_ylim(0, 100)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, title="validation data used for", loc="outside right center", fontsize="small")
    return finish_figure(fig, report, "fig1ab")


def theory_figure(eq8: pd.DataFrame, thm2: pd.DataFrame, report=None):
    """Theorem 1 / Eq. 8 and Theorem 2 (``plench.theory``'s ``eq8_table`` and ``theorem2_table``): (left) the accuracy
    estimated from CR against the true accuracy, one line per generator, with the diagonal; (right) AA - ACC against
    the power applied to the Bayes posterior (log scale; 1 = calibrated)."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    for name, part in eq8.groupby("generator", sort=False):
        axes[0].plot(part["ACC"], part["(CR - c)/(1 - c)"], marker="o", label=name)
    lims = [eq8["ACC"].min() - 0.02, eq8["ACC"].max() + 0.02]
    axes[0].plot(lims, lims, color="grey", ls="--", lw=1)
    axes[0].set(xlabel="true accuracy", ylabel="(CR - c) / (1 - c)", title="Theorem 1 / Eq. 8: CR recovers accuracy")
    axes[0].legend(fontsize="small")
    for name, part in thm2.groupby("generator", sort=False):
        axes[1].plot(part["power"], part["AA - ACC"], marker="o", label=name)
    axes[1].axhline(0, color="grey", lw=1)
    axes[1].set(xscale="log", xlabel="posterior ** power (1 = calibrated)", ylabel="AA - ACC",
                title="Theorem 2: AA is unbiased only when calibrated")
    axes[1].legend(fontsize="small")
    return finish_figure(fig, report, "theory")
