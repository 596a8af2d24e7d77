"""CILN's recurring figure: one bar per (corruption, severity), grouped by corruption, with the paper's values."""
from __future__ import annotations

import numpy as np
import pandas as pd

from shared.plotting import PAPER_COLOR

SEVERITY_COLORS = {1: "#9ecae1", 3: "#4292c6", 5: "#08519c"}


def severity_bars(ax, table: pd.DataFrame, value: str, *, paper: pd.DataFrame | None = None,
                  marker_value: str | None = None, ylabel: str = "", title: str = "") -> None:
    """Grouped bars of ``table[value]`` (columns corruption, severity) on ``ax``.

    ``marker_value`` adds a black tick per bar (e.g. the clean-start value); ``paper`` (corruption, severity,
    value) adds the paper's number as a grey diamond over the matching bar.
    """
    corruptions = list(dict.fromkeys(table["corruption"]))
    severities = sorted(table["severity"].unique())
    width = 0.8 / len(severities)
    for j, sev in enumerate(severities):
        part = table[table["severity"] == sev].set_index("corruption").reindex(corruptions)
        x = np.arange(len(corruptions)) + (j - (len(severities) - 1) / 2) * width
        ax.bar(x, part[value], width, color=SEVERITY_COLORS.get(sev, None), label=f"severity {sev}")
        if marker_value is not None:
            ax.scatter(x, part[marker_value], marker="_", color="black", s=60, zorder=3,
                       label="clean-start (CILN-C)" if j == 0 else None)
        if paper is not None:
            ref = paper[paper["severity"] == sev].set_index("corruption").reindex(corruptions)["value"]
            ax.scatter(x, ref, marker="D", s=14, color=PAPER_COLOR, zorder=4, label="paper" if j == 0 else None)
    ax.set_xticks(np.arange(len(corruptions)), [c.replace("_", " ") for c in corruptions], rotation=35, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left")


LEVEL_COLORS = {"clean": "#bdbdbd", "1": SEVERITY_COLORS[1], "3": SEVERITY_COLORS[3], "5": SEVERITY_COLORS[5]}


def class_share_bars(ax, shares: dict[str, np.ndarray], classes, *, title: str = "") -> None:
    """Grouped bars of label shares (%) per class; ``shares`` maps a level ("clean", "1", ...) to (K,)."""
    width = 0.8 / len(shares)
    for j, (level, values) in enumerate(shares.items()):
        x = np.arange(len(classes)) + (j - (len(shares) - 1) / 2) * width
        ax.bar(x, 100 * np.asarray(values), width, color=LEVEL_COLORS.get(level), label=level if level == "clean" else f"level {level}")
    ax.set_xticks(np.arange(len(classes)), classes, rotation=30 if max(map(len, classes)) > 3 else 0)
    ax.set_ylabel("share of rows (%)")
    ax.set_title(title, loc="left")


def sorted_profiles(ax, shares: dict[str, np.ndarray], entropies: dict[str, float], *, title: str = "",
                    paper: dict[str, np.ndarray] | None = None) -> None:
    """Class shares sorted by rank, one filled PCHIP curve per level; legend with the label entropy (bits)."""
    from scipy.interpolate import PchipInterpolator

    for level, values in shares.items():
        ranked = 100 * np.sort(np.asarray(values))[::-1]
        ranks = np.arange(1, len(ranked) + 1)
        fine = np.linspace(1, len(ranked), 200)
        curve = PchipInterpolator(ranks, ranked)(fine)
        name = "clean" if level == "clean" else f"level {level}"
        ax.plot(fine, curve, color=LEVEL_COLORS.get(level), label=f"{name} (H = {entropies[level]:.3f})")
        ax.fill_between(fine, curve, color=LEVEL_COLORS.get(level), alpha=0.25)
        ax.scatter(ranks, ranked, s=10, color=LEVEL_COLORS.get(level))
    for level, values in (paper or {}).items():
        ranked = 100 * np.asarray(values)
        ax.scatter(np.arange(1, len(ranked) + 1), ranked, marker="D", s=14, color=PAPER_COLOR,
                   label=f"paper, level {level}", zorder=4)
    ax.set_xlabel("class frequency rank")
    ax.set_ylabel("share (%)")
    ax.set_title(title, loc="left")


def family_bars(ax, table: pd.DataFrame, value: str, corruptions, *, floor: str | None = None,
                floor_label: str = "CCN floor", paper: pd.DataFrame | None = None, ylabel: str = "",
                title: str = "") -> None:
    """Bars grouped by severity level (x), one bar per corruption; optional floor ticks and paper diamonds.

    ``table`` has columns corruption, severity and ``value`` (and ``floor``); ``paper`` has corruption,
    severity and value.
    """
    levels = sorted(table["severity"].unique())
    width = 0.8 / len(corruptions)
    palette = ["#0173b2", "#de8f05", "#029e73", "#cc78bc", "#ca9161"]
    for j, corruption in enumerate(corruptions):
        part = table[table["corruption"] == corruption].set_index("severity").reindex(levels)
        x = np.arange(len(levels)) + (j - (len(corruptions) - 1) / 2) * width
        ax.bar(x, part[value], width, color=palette[j % len(palette)], label=corruption.replace("_", " "))
        if floor is not None:
            ax.scatter(x, part[floor], marker="_", s=80, color="black", zorder=3,
                       label=floor_label if j == 0 else None)
        if paper is not None:
            ref = paper[paper["corruption"] == corruption].set_index("severity").reindex(levels)["value"]
            ax.scatter(x, ref, marker="D", s=14, color=PAPER_COLOR, zorder=4, label="paper" if j == 0 else None)
    ax.set_xticks(np.arange(len(levels)), [f"level {s}" for s in levels])
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left")
