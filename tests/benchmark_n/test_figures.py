"""Benchmark-N's figures draw every series their captions name, each with a legend entry."""
import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchmark_n.model_figures import bars  # noqa: E402
from shared.plotting import PAPER_COLOR  # noqa: E402


def test_bars_mark_the_paper_value_of_every_setting_and_metric_and_name_it_in_the_legend():
    ours = pd.DataFrame({"mask_AP_retained": [60.0, 100.0], "boundary_AP_retained": [5.0, 45.0]},
                        index=["dilation low", "erosion low"])
    paper = pd.DataFrame({"mask_AP_retained": [95.0, 84.0], "boundary_AP_retained": [90.0, np.nan]}, index=ours.index)
    fig = bars(ours, list(ours.columns), "Table 7", paper=paper)
    ax = fig.axes[0]
    grey = [c for c in ax.collections if np.allclose(c.get_facecolor()[0][:3], matplotlib.colors.to_rgb(PAPER_COLOR))]
    marked = [y for c in grey for _, y in c.get_offsets() if not np.ma.is_masked(y) and np.isfinite(y)]
    assert sorted(marked) == [84.0, 90.0, 95.0]  # every paper value, none invented for the missing one
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sorted(labels) == ["boundary AP retained", "mask AP retained", "paper"]  # "paper" once
    assert [round(p.get_height()) for p in ax.patches] == [60, 100, 5, 45]


def test_figure7a_draws_the_papers_curve_of_every_dataset_beside_ours():
    from benchmark_n.model_figures import figure7a

    paper = pd.DataFrame({"dataset": ["COCO-N"] * 3 + ["LVIS-N"] * 2, "tier": ["clean", "low", "high", "clean", "high"],
                          "value": [34.0, 30.0, 20.0, 20.0, 12.0]})
    records = pd.DataFrame({"tier": ["clean", "clean", "high"], "mask_AP": [30.0, 32.0, 20.0],
                            "boundary_AP": [20.0, 21.0, 5.0], "box_AP": [35.0, 36.0, 30.0]})
    left, right = figure7a(paper, records, "ours").axes
    drawn = {line.get_label(): [y for y in line.get_ydata() if np.isfinite(y)] for line in left.get_lines()}
    assert drawn == {"COCO-N": [34.0, 30.0, 20.0], "LVIS-N": [20.0, 12.0]}  # every paper value, on its own tier
    assert sorted(t.get_text() for t in left.get_legend().get_texts()) == ["COCO-N", "LVIS-N"]
    assert [t.get_text() for t in right.get_legend().get_texts()] == ["mask AP", "boundary AP", "box AP"]
