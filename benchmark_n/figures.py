"""Benchmark-N's figures: the noise on single instances (Figs. 2 and 12), clean vs noisy annotations per tier
(Fig. 3) and the annotation-quality curves (Fig. 11).

Each function returns the matplotlib Figure (closed, so a notebook shows it once, as the cell's value) and, given
a ``shared.report.NotebookReport``, saves it as PNG + SVG.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from benchmark_n.coco import ann_to_mask, ann_to_polygons, mask_to_polygons
from benchmark_n.noise import PRESETS, TIER_ORDER, approximate, jitter, morph
from shared.plotting import PAPER_COLOR, finish_figure

CLEAN_COLOR, NOISY_COLOR = "#ffffff", "#d55e00"
#: Fig. 2's rows: one operation of the paper's engine at each tier's mean parameter (Table 1)
OPERATIONS = {
    "approximation": ("Douglas-Peucker, tolerance", lambda polys, mask, v, rng: [approximate(p, v) for p in polys]),
    "localization": ("vertex jitter, sd", lambda polys, mask, v, rng: [jitter(p, v, rng) for p in polys]),
    "dilation": ("dilation, kernel", lambda polys, mask, v, rng: mask_to_polygons(morph(mask, int(v), "dilate"))),
    "erosion": ("erosion, kernel", lambda polys, mask, v, rng: mask_to_polygons(morph(mask, int(v), "erode"))),
}
_MEAN = {"approximation": "approximation", "localization": "localization", "dilation": "scale", "erosion": "scale"}


def _outline(ax, polygons, color, width=1.2):
    for p in polygons:
        ring = np.vstack([p, p[:1]])
        ax.plot(ring[:, 0], ring[:, 1], color=color, lw=width)


def _crop(ax, polygons, h, w, margin=12):
    points = np.vstack(polygons)
    x0, y0 = np.maximum(points.min(0) - margin, 0)
    x1, y1 = np.minimum(points.max(0) + margin, [w, h])
    ax.set(xlim=(x0, x1), ylim=(y1, y0), xticks=[], yticks=[])


def figure2(instance, report=None, seed: int = 0):
    """Fig. 2: one real instance (``shapes.horse()``) under each spatial operation at the low / mid / high tier's
    mean parameter (Table 1); the clean outline in white, the noisy one in orange."""
    image, ann = instance.images[0], instance.dataset["annotations"][0]
    h, w = image.shape[:2]
    polygons, mask = ann_to_polygons(ann, h, w), ann_to_mask(ann, h, w)
    fig, axes = plt.subplots(len(OPERATIONS), 3, figsize=(9.6, 2.7 * len(OPERATIONS)))
    for row, (name, (label, apply)) in enumerate(OPERATIONS.items()):
        for col, tier in enumerate(TIER_ORDER):
            value = getattr(PRESETS[tier], _MEAN[name])[0]
            noisy = apply(polygons, mask, value, np.random.default_rng([seed, row, col]))
            ax = axes[row, col]
            ax.imshow(image)
            _outline(ax, polygons, CLEAN_COLOR)
            _outline(ax, noisy, NOISY_COLOR)
            _crop(ax, polygons, h, w)
            ax.set_title(f"{name}, {tier}: {label.split(', ')[1]} {value:g}")
    fig.suptitle("Spatial noise of the paper's engine at each tier's mean parameter (white: clean, orange: noisy)")
    fig.tight_layout()
    return finish_figure(fig, report, "figure2")


def _overlay(image: np.ndarray, masks: list[np.ndarray], alpha: float = 0.5) -> np.ndarray:
    """``image`` with each mask tinted in its own colour of the colour-blind palette."""
    import seaborn as sns

    out = image.astype(np.float64).copy()
    palette = np.array(sns.color_palette("colorblind", 10)) * 255
    for i, mask in enumerate(masks):
        on = mask.astype(bool)
        out[on] = (1 - alpha) * out[on] + alpha * palette[i % len(palette)]
    return out.astype(np.uint8)


def annotation_grid(images: list[np.ndarray], rows: dict[str, list[list[dict]]], title: str, name: str,
                    report=None):
    """A grid of images (columns) under several annotation sets (rows, e.g. clean / low / mid / high): each
    instance's mask tinted and outlined. ``rows[label][j]`` holds the annotations of image j."""
    n_rows, n_cols = len(rows), len(images)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(2.8 * n_cols, 2.2 * n_rows), squeeze=False)
    for r, (label, per_image) in enumerate(rows.items()):
        for c, (image, anns) in enumerate(zip(images, per_image)):
            h, w = image.shape[:2]
            masks = [ann_to_mask(a, h, w) for a in anns]
            ax = axes[r, c]
            ax.imshow(_overlay(image, masks))
            for mask in masks:
                _outline(ax, mask_to_polygons(mask), "black", 0.6)
            ax.set(xticks=[], yticks=[])
            if c == 0:
                ax.set_ylabel(label)
    fig.suptitle(title)
    fig.tight_layout()
    return finish_figure(fig, report, name)


#: Fig. 11's panels: the morphological operations (top row) and the benchmark's noise types (bottom row)
FIG11_ROWS = {
    "morphology (k = 3 / 5 / 7)": [("ablation", op) for op in ("dilation", "erosion", "opening", "random_scale",
                                                                 "shift")],
    "noise types and engines": [("ablation", op) for op in ("paper_approximation", "paper_localization",
                                                              "paper_scale", "class_flip", "deletion")]
                               + [("engine", "paper"), ("engine", "legacy_v0")],
}


def figure11(summary: pd.DataFrame, report=None):
    """Fig. 11: mask AP and Boundary AP of the noisy annotations against the clean ones per tier (mean over seeds,
    bars: min-max), morphological operations on top, the benchmark's noise types and both engines below.
    ``summary``: ``tables.quality_summary``."""
    fig, axes = plt.subplots(len(FIG11_ROWS), 2, figsize=(11, 4.2 * len(FIG11_ROWS)), sharey=True)
    for r, (title, lines) in enumerate(FIG11_ROWS.items()):
        for c, metric in enumerate(("mask_AP", "boundary_AP")):
            ax = axes[r, c]
            for kind, name in lines:
                part = summary[(summary["kind"] == kind) & (summary["name"] == name)].set_index("tier")
                part = part.reindex([t for t in TIER_ORDER if t in part.index])
                if part.empty:
                    continue
                mean = part[f"{metric}_mean"]
                err = np.vstack([mean - part[f"{metric}_min"], part[f"{metric}_max"] - mean])
                style = "--" if kind == "engine" else "-"
                ax.errorbar(part.index, mean, yerr=err, marker="o", ls=style, capsize=3,
                            label=name if kind == "ablation" else f"{name} engine")
            ax.set(title=f"{title}: {metric.replace('_', ' ')}", xlabel="tier", ylim=(0, 1.02),
                   ylabel="AP of noisy vs clean annotations")
            ax.legend(fontsize="small")
    fig.tight_layout()
    return finish_figure(fig, report, "figure11")


def paper_vs_ours_table7(comparison: pd.DataFrame, report=None):
    """Table 7 at the high tier: the share of the clean score the paper's Mask R-CNN keeps (grey) beside the share
    our noisy annotations keep against the clean ones (blue), per operation. ``comparison``: the page's
    paper-vs-ours table (metrics ``<metric>_retained``, %)."""
    high = comparison[(comparison["level"] == "high") & (comparison["operation"] != "clean")]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    for ax, metric in zip(axes, ("mask_AP", "boundary_AP")):
        rows = high[high["metric"] == f"{metric}_retained"].set_index("operation")
        x = np.arange(len(rows))
        ax.bar(x - 0.2, rows["paper"], width=0.4, color=PAPER_COLOR, label="paper: Mask R-CNN trained on it")
        ax.bar(x + 0.2, rows["ours"].astype(float), width=0.4, label="ours: the annotations themselves")
        ax.set_xticks(x, rows.index, rotation=30)
        ax.set(title=f"high tier, {metric.replace('_', ' ')}", ylabel="% of the clean score kept", ylim=(0, 105))
        ax.legend(fontsize="small")
    fig.tight_layout()
    return finish_figure(fig, report, "table7_ordering")


def benchmark_counts(files: pd.DataFrame, report=None):
    """What the noise did in each benchmark file (``tables.benchmark_files``): the share of the instances deleted,
    implicitly deleted, class-flipped and spatially noised, per engine and tier (mean over seeds)."""
    counts = ["deleted %", "implicitly_deleted %", "class_flipped %", "spatially_noised %"]
    means = files.groupby(["engine", "tier"], sort=False)[counts].mean()
    engines = list(dict.fromkeys(files["engine"]))
    fig, axes = plt.subplots(1, len(engines), figsize=(5.5 * len(engines), 3.4), sharey=True, squeeze=False)
    for ax, engine in zip(axes[0], engines):
        part = means.loc[engine].reindex([t for t in TIER_ORDER if t in means.loc[engine].index])
        x = np.arange(len(part))
        for i, column in enumerate(counts):
            ax.bar(x + (i - 1.5) * 0.2, part[column], width=0.2, label=column.replace("_", " ").replace(" %", ""))
        ax.set_xticks(x, part.index)
        ax.set(title=f"{engine} engine", xlabel="tier", ylabel="% of the instances")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="lower center", ncol=len(counts), fontsize="small")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return finish_figure(fig, report, "benchmark_counts")


__all__ = ["OPERATIONS", "FIG11_ROWS", "benchmark_counts", "figure2", "annotation_grid", "figure11", "paper_vs_ours_table7"]
