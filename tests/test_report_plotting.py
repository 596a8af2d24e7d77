import base64
import io
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from shared.errors import ConfigError  # noqa: E402
from shared.plotting import save_figure, set_style  # noqa: E402
from shared.report import NotebookReport, compare_with_paper, reported, verdict  # noqa: E402

PAPER = pd.DataFrame({
    "item": ["T1"] * 4, "dataset": ["A", "A", "B", "B"], "metric": ["acc", "n", "acc", "n"],
    "value": [0.9, 100, 0.8, 200], "source": "paper",
})


def test_compare_puts_every_paper_number_beside_ours():
    ours = pd.DataFrame({"dataset": ["A", "B"], "metric": ["acc", "acc"], "value": [0.85, 0.8], "ours_on": "x"})
    table = compare_with_paper(ours, PAPER, on=["dataset"])
    assert list(table.columns[:6]) == ["item", "dataset", "metric", "paper", "ours", "diff"]
    assert len(table) == 2  # only the metrics we computed
    assert np.allclose(table["diff"], [-0.05, 0.0])
    partial = compare_with_paper(ours.iloc[:1], PAPER, on=["dataset"])
    assert partial["ours"].isna().tolist() == [False, True]  # a paper number we did not compute shows NaN
    with pytest.raises(ConfigError, match="need a 'dataset' column"):
        compare_with_paper(ours.drop(columns="dataset"), PAPER, on=["dataset"])



def test_compare_with_no_results_of_ours_is_empty_not_an_error():
    """A run whose datasets match no paper row (an empty frame: its columns are float) compares to nothing."""
    ours = pd.DataFrame(columns=["dataset", "metric", "value"]).astype(float)
    table = compare_with_paper(ours, PAPER, on=["dataset"])
    assert len(table) == 0 and "ours" in table.columns

def test_notebook_report_writes_comparison_claims_and_summary(tmp_path, monkeypatch):
    report = NotebookReport("ciln", "01_benchmark", tmp_path, "smoke")
    ours = pd.DataFrame({"dataset": ["CIFAR10"], "metric": ["voters"], "value": [4]})
    table = report.compare(ours, "table1", on=["dataset"])
    assert table["paper"].tolist() == [4, 4, 5]  # every dataset's voter count ...
    assert table["ours"].notna().tolist() == [True, False, False]  # ... ours only where we computed it
    assert table["diff"].iloc[0] == 0
    report.claim("a", True)
    report.claim("b", False, "why")
    report.claim("c", None, "its algorithm was not run")
    claims = report.finish()
    assert claims["verdict"].tolist() == ["yes", "no", "not run"]
    stored = json.loads((tmp_path / "claims.json").read_text())
    assert [c["holds"] for c in stored] == [True, False, None]
    summary = json.loads((tmp_path / "report.json").read_text())
    assert summary["claims_holding"] == 1 and summary["claims_not_run"] == 1
    assert summary["paper_numbers_with_ours"] == 1
    assert len(pd.read_csv(tmp_path / "comparison.csv")) == 3


def test_a_claim_on_a_missing_input_is_not_run(tmp_path):
    report = NotebookReport("ciln", "01_benchmark", tmp_path, "smoke")
    nan = float("nan")
    record = report.claim("DivideMix beats ERM", holds=verdict(nan > 0.5, 0.5, nan), detail="DM nan")
    assert record["holds"] is None and record["verdict"] == "not run"
    assert report.claim("ERM beats chance", holds=verdict(True, 0.9, 0.1))["verdict"] == "yes"
    assert verdict(np.bool_(False), 0.3) is False and verdict(False, None) is None


def test_claim_verdict_must_be_a_bool_or_none(tmp_path):
    report = NotebookReport("ciln", "01_benchmark", tmp_path, "smoke")
    report.claim("numpy bools are fine", np.bool_(True))
    with pytest.raises(ConfigError, match="True, False or None"):
        report.claim("a NaN comparison is not a verdict", float("nan"))


def test_reported_numbers_errors():
    with pytest.raises(ConfigError, match="no reported numbers"):
        reported("ciln", "table99")


def test_save_figure_writes_png_and_svg(tmp_path):
    set_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    paths = save_figure(fig, tmp_path / "sub" / "line")
    assert [p.suffix for p in paths] == [".png", ".svg"] and all(p.stat().st_size > 1000 for p in paths)
    assert paths[0].read_bytes()[:4] == b"\x89PNG"


def test_figures_are_sharp_files_and_sharp_in_a_notebook(tmp_path):
    """Saved PNGs are 200 dpi; in an IPython kernel figures display as 2x ("retina") PNG at their nominal size."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        set_style()
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.plot([0, 1], [0, 1])
        png = save_figure(fig, tmp_path / "line")[0]
        from PIL import Image

        assert Image.open(png).info["dpi"][0] == pytest.approx(200, abs=1)
        data, metadata = shell.display_formatter.format(fig)
        shown = metadata["image/png"]["width"]  # about 4 in at 100 dpi (cropped to the drawing)
        assert 300 < shown <= 400 and Image.open(io.BytesIO(base64.b64decode(data["image/png"]))).size[0] == 2 * shown
    finally:
        InteractiveShell.clear_instance()
        plt.close("all")


def test_each_compared_row_says_whether_it_is_within_the_items_tolerance(tmp_path):
    """ciln/items.yaml: Table I (01_benchmark) is close within 5 % of the paper's number."""
    report = NotebookReport("ciln", "01_benchmark", tmp_path)
    ours = pd.DataFrame({"dataset": ["CIFAR10", "MNIST", "Adult"], "metric": ["voters"] * 3, "value": [4.1, 5.0, None]})
    table = report.compare(ours, "table1", on=["dataset"]).set_index("dataset")
    assert table.loc["CIFAR10", "within tolerance"] == "yes"  # 4.1 vs 4: 2.5 % off
    assert table.loc["MNIST", "within tolerance"] == "no"  # 5 vs 4: 25 % off
    assert table.loc["Adult", "within tolerance"] == "—"  # not run
    other = NotebookReport("ciln", "02_examples", tmp_path).compare(ours, "table1", on=["dataset"])
    assert set(other["within tolerance"]) == {"—"}  # no item of 02 states a tolerance for Table I
