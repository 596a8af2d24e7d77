"""Figure style shared by every notebook; every saved figure is written as PNG and SVG."""
from __future__ import annotations

from pathlib import Path

import matplotlib

PAPER_COLOR = "#7f7f7f"  # the paper's numbers, wherever they are drawn beside ours
OURS_COLOR = "#0173b2"


def set_style() -> None:
    """Seaborn's whitegrid theme with the colour-blind palette and sizes that read well in the book."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook", palette="colorblind")
    matplotlib.rcParams.update({
        "figure.dpi": 100, "savefig.dpi": 200, "savefig.bbox": "tight", "svg.fonttype": "none",
        "axes.titlesize": "medium", "figure.autolayout": False,
    })
    _inline_retina()


def _inline_retina() -> None:
    """In a notebook, show figures as PNG at twice ``figure.dpi`` (200 dpi) at their nominal size, so they stay
    sharp in the book and on high-density screens; the saved SVG and 200-dpi PNG are the files to reuse."""
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return
    if get_ipython() is not None:
        set_matplotlib_formats("retina")


def save_figure(fig, path_stem: str | Path) -> list[Path]:
    """Write ``<path_stem>.png`` and ``<path_stem>.svg``; returns both paths."""
    stem = Path(path_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    for path in paths:
        fig.savefig(path)
    return paths


def finish_figure(fig, report=None, name: str = ""):
    """Save ``fig`` through a ``shared.report.NotebookReport`` (PNG + SVG as ``name``) when one is given, close it
    (so a notebook shows it once, as the cell's value) and return it."""
    import matplotlib.pyplot as plt

    if report is not None:
        report.figure(fig, name)
    plt.close(fig)
    return fig
