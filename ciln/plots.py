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
