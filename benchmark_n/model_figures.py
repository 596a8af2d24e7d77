"""Figures of the model-level notebooks: scores across the tiers (Fig. 7a), confidence (Fig. 7b), per-instance
training losses (Figs. 8 and 13) and predictions beside the ground truth (Figs. 10 and 15).

Each function returns the closed matplotlib Figure and, given a ``shared.report.NotebookReport``, saves it.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from benchmark_n.coco import ann_to_mask
from benchmark_n.figures import _overlay
from benchmark_n.model_results import TIERS
from shared.plotting import PAPER_COLOR, finish_figure


def _tiers(frame: pd.DataFrame) -> list[str]:
    return [t for t in TIERS if t in set(frame["tier"])]


def figure7a(paper: pd.DataFrame, records: pd.DataFrame, title: str, report=None):
    """Fig. 7a: the paper's Mask R-CNN mask AP across the tiers on COCO-N, CityScapes-N and LVIS-N (left; Tables 3
    and 12) beside ours (right: mask, Boundary and box AP, mean over seeds with each seed as a dot)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    for dataset, part in paper.groupby("dataset", sort=False):
        part = part.set_index("tier").reindex(list(TIERS))
        left.plot(list(TIERS), part["value"], marker="o", label=dataset)
    left.set(title="paper: Mask R-CNN R-50 (Tables 3, 12)", xlabel="tier", ylabel="mask AP (%)", ylim=(0, None))
    left.legend(fontsize="small")
    tiers = _tiers(records)
    x = records["tier"].map({t: i for i, t in enumerate(tiers)})
    for metric in ("mask_AP", "boundary_AP", "box_AP"):
        means = records.groupby("tier")[metric].mean().reindex(tiers)
        line, = right.plot(range(len(tiers)), means, marker="o", label=metric.replace("_", " "))
        right.scatter(x, records[metric], color=line.get_color(), s=12, alpha=0.6)
    right.set_xticks(range(len(tiers)), tiers)
    right.set(title=title, xlabel="tier", ylabel="AP on the clean val set (%)", ylim=(0, None))
    right.legend(fontsize="small")
    fig.tight_layout()
    return finish_figure(fig, report, "figure7a")


def figure7b(records: pd.DataFrame, report=None):
    """Fig. 7b: the mean score of the val detections scoring above 0.5, and the share of detections above 0.5,
    per tier (each seed a dot, the line their mean)."""
    tiers = _tiers(records)
    x = records["tier"].map({t: i for i, t in enumerate(tiers)})
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, column, label in zip(axes, ("mean_confidence", "confident_share"),
                                 ("mean score of detections > 0.5", "share of detections > 0.5 (%)")):
        ax.plot(range(len(tiers)), records.groupby("tier")[column].mean().reindex(tiers), marker="o")
        ax.scatter(x, records[column], s=14, alpha=0.6)
        ax.set_xticks(range(len(tiers)), tiers)
        ax.set(xlabel="training tier", ylabel=label)
    fig.suptitle("Fig. 7b, ours: confidence of the model trained at each tier")
    fig.tight_layout()
    return finish_figure(fig, report, "figure7b")


def loss_distributions(losses: pd.DataFrame, report=None, name: str = "figure8"):
    """Fig. 8: histograms of the per-instance class loss (top: class-flipped vs other instances) and mask loss
    (bottom: spatially noised vs other instances) at the logged epochs. ``losses``: the run's ``instance_losses``."""
    epochs = sorted(losses["epoch"].unique())
    fig, axes = plt.subplots(2, len(epochs), figsize=(3 * len(epochs), 5.5), squeeze=False)
    for j, epoch in enumerate(epochs):
        part = losses[losses["epoch"] == epoch]
        for i, (loss, flag, noisy) in enumerate((("class_loss", "class_flipped", "class flipped"),
                                                 ("mask_loss", "spatially_noised", "spatially noised"))):
            ax = axes[i, j]
            bins = np.linspace(0, max(part[loss].quantile(0.99), 1e-3), 30)
            ax.hist(part.loc[~part[flag], loss], bins=bins, alpha=0.6, density=True, label="other instances")
            ax.hist(part.loc[part[flag], loss], bins=bins, alpha=0.6, density=True, label=noisy)
            ax.set(title=f"epoch {epoch}", xlabel=loss.replace("_", " "))
            if j == 0:
                ax.legend(fontsize="x-small")
    fig.tight_layout()
    return finish_figure(fig, report, name)


def loss_bands(losses: pd.DataFrame, report=None):
    """Fig. 13: per epoch, the mean class loss (a) and mask loss (b) of the noisy and the other instances, with
    their 25-75 % quantiles as a band."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, (loss, flag, noisy) in zip(axes, (("class_loss", "class_flipped", "class flipped"),
                                              ("mask_loss", "spatially_noised", "spatially noised"))):
        for value, label in ((False, "other instances"), (True, noisy)):
            grouped = losses[losses[flag] == value].groupby("epoch")[loss]
            mean, q25, q75 = grouped.mean(), grouped.quantile(0.25), grouped.quantile(0.75)
            ax.plot(mean.index, mean, marker="o", label=label)
            ax.fill_between(mean.index, q25, q75, alpha=0.25)
        ax.set(xlabel="epoch", ylabel=loss.replace("_", " "), title=f"{loss.replace('_', ' ')} per instance")
        ax.legend(fontsize="small")
    fig.tight_layout()
    return finish_figure(fig, report, "figure13")


def predictions_grid(images: list[np.ndarray], truth: list[list[dict]], predictions: dict[str, list[list[dict]]],
                     names: dict[int, str], report=None, name: str = "figure10", threshold: float = 0.5):
    """Figs. 10 / 15: each image's ground truth (top row) and each model's detections scoring above ``threshold``
    (one row per model), coloured per instance and labelled with class and score."""
    rows = {"ground truth": truth, **predictions}
    fig, axes = plt.subplots(len(rows), len(images), figsize=(2.6 * len(images), 2.6 * len(rows)), squeeze=False)
    for r, (label, per_image) in enumerate(rows.items()):
        for c, (image, anns) in enumerate(zip(images, per_image)):
            ax = axes[r, c]
            shown = [a for a in anns if a.get("score", 1.0) > threshold]
            ax.imshow(_overlay(image, [ann_to_mask(a, *image.shape[:2]) for a in shown]))
            for a in shown:
                x, y = a["bbox"][:2]
                text = names[a["category_id"]] + (f" {a['score']:.2f}" if "score" in a else "")
                ax.text(x, y, text, fontsize=6, color="black", backgroundcolor="white")
            ax.set_xticks([]), ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(label, fontsize="small")
    fig.tight_layout()
    return finish_figure(fig, report, name)


def bars(frame: pd.DataFrame, metrics, title: str, report=None, name: str = "figure", paper: pd.DataFrame | None = None):
    """One bar group per row of ``frame`` (index = setting), one bar per metric (%); the paper's values of the same
    settings and metrics as grey markers when given (``paper``: same index and columns)."""
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 + 1.3 * len(frame)), 3.6))
    x = np.arange(len(frame))
    width = 0.8 / len(metrics)
    paper_labelled = False
    for i, metric in enumerate(metrics):
        ax.bar(x + (i - (len(metrics) - 1) / 2) * width, frame[metric], width=width, label=metric.replace("_", " "))
        if paper is not None and metric in paper:
            ax.scatter(x + (i - (len(metrics) - 1) / 2) * width, paper.reindex(frame.index)[metric],
                       color=PAPER_COLOR, marker="_", s=200, zorder=3, label=None if paper_labelled else "paper")
            paper_labelled = True
    ax.set_xticks(x, frame.index, rotation=20)
    ax.set_ylabel("%")
    ax.set_title(title, fontsize="small", wrap=True)
    ax.legend(fontsize="small", loc="best")
    fig.tight_layout()
    return finish_figure(fig, report, name)


__all__ = ["figure7a", "figure7b", "loss_distributions", "loss_bands", "predictions_grid", "bars"]
