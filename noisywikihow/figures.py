"""NoisywikiHow's figures drawn from our runs: Figs. 1, 2, 3, 4, 5 and 7, and Table 4 as curves (Fig. 6 is
literature; see 05).

Each function returns the matplotlib Figure (closed, so a notebook shows it once, as the cell's value) and, given
a ``shared.report.NotebookReport``, saves it as PNG + SVG. Paper values, where the paper gives them, are drawn in
grey beside ours.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from noisywikihow.hparams import METHODS
from noisywikihow.tables import mean_scores
from shared.plotting import PAPER_COLOR, finish_figure

SOURCE_COLORS = {"SC": "#0173b2", "BCC": "#de8f05", "TC": "#029e73"}


def figure1(bench, report=None):
    """Fig. 1: training events per category, sorted, coloured by noise source."""
    counts = bench.counts
    order = np.argsort(-counts, kind="stable")
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar(np.arange(len(order)), counts[order], width=1.0,
           color=[SOURCE_COLORS[s] for s in bench.source[order]])
    for s, c in SOURCE_COLORS.items():
        ax.bar([0], [0], color=c, label=s)
    ax.set(xlabel="category (sorted by size)", ylabel="training events", title=f"{bench.name}: events per category")
    ax.legend(title="noise source")
    return finish_figure(fig, report, "figure1")


def noise_curves(scores: pd.DataFrame, paper: pd.DataFrame, row: str, paper_row: str, paper_title: str,
                 selection: str = "peak"):
    """Top-1 test accuracy against the noise level, one line per ``row`` value: ours (left) beside the paper's
    (right; its ``paper_row`` lines)."""
    means = mean_scores(scores, [row, "level"])
    means = means[means["selection"] == selection]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), constrained_layout=True)
    paper = paper[paper["metric"] == "top1"].assign(level=lambda d: d["level"].astype(float),
                                                      value=lambda d: d["value"].astype(float))
    for key in dict.fromkeys(means[row]):
        ours = means[means[row] == key]
        axes[0].plot(100 * ours["level"], ours["top1"], marker="o", label=METHODS.get(key, key))
    for key in dict.fromkeys(paper[paper_row]):
        theirs = paper[paper[paper_row] == key]
        axes[1].plot(100 * theirs["level"], theirs["value"], marker="o", label=METHODS.get(key, key))
    axes[0].set(title=f"ours ({selection} Top-1)", xlabel="noise level (%)", ylabel="test accuracy (%)")
    axes[1].set(title=paper_title, xlabel="noise level (%)")
    for ax in axes:
        ax.legend(fontsize="small")
    return fig


def figure2(scores: pd.DataFrame, paper: pd.DataFrame, kind: str, report=None, selection: str = "peak"):
    """Fig. 2(a) (real noise) or 2(b) (synthetic): Top-1 against the noise level per method, beside Table 8 or 10."""
    fig = noise_curves(scores, paper, "method", "method", "paper (Table 8)" if kind == "real" else "paper (Table 10)",
                       selection)
    return finish_figure(fig, report, "figure2a" if kind == "real" else "figure2b")


def table4_figure(scores: pd.DataFrame, paper: pd.DataFrame, report=None, selection: str = "peak"):
    """Table 4 drawn: Top-1 against the noise level per architecture (ours) and per language model (the paper)."""
    return finish_figure(noise_curves(scores, paper, "architecture", "model", "paper (Table 4)", selection), report, "table4")


def figure3(losses: dict, report=None):
    """Fig. 3: per-sample training loss of correct and incorrect samples after the 4th epoch; ``losses`` maps a
    panel title to (losses (n,), is_noisy (n,))."""
    fig, axes = plt.subplots(1, len(losses), figsize=(5 * len(losses), 3.4), constrained_layout=True)
    for ax, (title, (loss, noisy)) in zip(np.atleast_1d(axes), losses.items()):
        bins = np.linspace(0, np.nanpercentile(loss, 99.5), 40)
        ax.hist(loss[~noisy], bins=bins, alpha=0.6, density=True, label="correct", color="#0173b2")
        ax.hist(loss[noisy], bins=bins, alpha=0.6, density=True, label="incorrect", color="#d55e00")
        ax.set(title=title, xlabel="training loss", ylabel="density")
        ax.legend()
    return finish_figure(fig, report, "figure3")


def figure4(curves: pd.DataFrame, report=None):
    """Fig. 4: test Top-1 of the base model per epoch at each level; ``curves``: kind, level, epoch, test_acc."""
    kinds = list(dict.fromkeys(curves["kind"]))
    fig, axes = plt.subplots(1, len(kinds), figsize=(5.2 * len(kinds), 3.6), sharey=True, constrained_layout=True)
    for ax, kind in zip(np.atleast_1d(axes), kinds):
        for level, curve in curves[curves["kind"] == kind].groupby("level"):
            ax.plot(curve["epoch"] + 1, 100 * curve["test_acc"], label=f"{level:.0%}")
        ax.set(title=f"{kind} noise", xlabel="epoch", ylabel="test accuracy (%)")
        ax.legend(title="noise", fontsize="small")
    return finish_figure(fig, report, "figure4")


def figure5(scores: pd.DataFrame, report=None, selection: str = "peak"):
    """Fig. 5: Top-1 test accuracy of each method under 10 % noise from one source (SC, BCC or TC)."""
    means = mean_scores(scores, ["method", "train_set"])
    means = means[(means["selection"] == selection) & (means["train_set"] != "mix_0.1")]
    wide = means.pivot(index="method", columns="train_set", values="top1")
    wide = wide.loc[list(dict.fromkeys(means["method"]))]
    wide = wide.rename(columns={"neighbor_0.1": "SC", "uncommon_0.1": "BCC", "tail_0.1": "TC"})[["SC", "BCC", "TC"]]
    fig, ax = plt.subplots(figsize=(8, 3.4))
    wide.rename(index=METHODS).plot.bar(ax=ax, color=[SOURCE_COLORS[c] for c in wide.columns], rot=0)
    ax.set(ylabel="test accuracy (%)", xlabel="", title="10 % noise from a single source",
           ylim=(max(0, wide.min().min() - 5), wide.max().max() + 2))
    return finish_figure(fig, report, "figure5")


def figure7(ours: pd.DataFrame, report=None, paper: pd.DataFrame | None = None):
    """Fig. 7: per long-tailed method and level, the Top-1 gain over the base model (the paper stacks it on the
    base's bar); ``ours`` and ``paper``: method x level differences in points (``tables.deltas``)."""
    fig, axes = plt.subplots(1, 2 if paper is not None else 1, figsize=(11, 3.6), constrained_layout=True, squeeze=False)
    for ax, (title, table) in zip(axes[0], [("ours", ours), ("paper (Table 12 - Table 8)", paper)]):
        if table is None:
            continue
        x = np.arange(len(table.columns))
        width = 0.8 / len(table.index)
        for k, method in enumerate(table.index):
            ax.bar(x + k * width, table.loc[method].to_numpy(float), width, label=METHODS.get(method, method))
        ax.axhline(0, color=PAPER_COLOR, lw=0.8)
        ax.set_xticks(x + 0.4 - width / 2, table.columns)
        ax.set(title=title, xlabel="noise level", ylabel="Top-1 gain over base (points)")
    axes[0][-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return finish_figure(fig, report, "figure7")


__all__ = ["figure1", "noise_curves", "figure2", "table4_figure", "figure3", "figure4", "figure5", "figure7"]
