"""ciln/pages/label_distributions.py: the shift tables, the comparison by rank and the claims, on tiny shares."""
import numpy as np
import pandas as pd
import pytest

from ciln.pages.label_distributions import (LabelDistributions, label_distribution_claims, panel_table, ranked_layout,
                                            ranked_shares, scan_table, share_figure, shift)

K = 4
CLASSES = {"CIFAR10": ("a", "b", "c", "d"), "MNIST": ("0", "1", "2", "3"), "Adult": ("<=50K", ">50K")}
FLAT = np.full(K, 0.25)


def levels(gain5: float, dev1: float = 0.0, cls: int = 2) -> dict[str, np.ndarray]:
    """Clean shares uniform; level 5 moves ``gain5`` onto class ``cls``, level 1 ``dev1``."""
    def moved(amount):
        s = FLAT.copy()
        s[cls] += amount
        s[(cls + 1) % K] -= amount
        return s
    return {"clean": FLAT.copy(), "1": moved(dev1), "3": moved((dev1 + gain5) / 2), "5": moved(gain5)}


def adult(push: float) -> dict[str, np.ndarray]:
    clean = np.array([0.75, 0.25])
    return {"clean": clean, "1": clean, "5": clean + [push, -push]}


def test_shift_reports_the_attractor_gain_and_level1_deviation():
    cls, gain, dev1 = shift(levels(0.2, dev1=-0.03, cls=1))
    assert cls == 1 and gain == pytest.approx(20) and dev1 == pytest.approx(3)


def test_panel_table_has_a_row_per_panel_in_order_and_scan_sorts_by_gain():
    shares = {("CIFAR10", "fog"): levels(0.01), ("MNIST", "brightness"): levels(0.3, cls=3)}
    panels = panel_table(shares, CLASSES)
    assert list(panels["corruption"]) == ["fog", "brightness"]
    assert panels.loc[1, "top class at level 5"] == "3"
    scan = scan_table({("CIFAR10", "fog"): levels(0.01), ("MNIST", "rotate"): levels(0.15),
                       ("MNIST", "brightness"): levels(0.3)}, CLASSES)
    assert list(scan["corruption"]) == ["brightness", "rotate", "fog"]
    assert "attractor" in scan.columns


def test_ranked_shares_sort_each_level_and_skip_clean():
    shares = {("CIFAR10", "pixelate"): {"clean": FLAT, "1": np.array([0.1, 0.4, 0.3, 0.2])}}
    ranked = ranked_shares(shares, {"CIFAR10": "stand-in"})
    assert list(ranked["rank"]) == [1, 2, 3, 4]
    assert list(ranked["value"]) == [0.4, 0.3, 0.2, 0.1]
    assert set(ranked["severity"]) == {1} and set(ranked["ours_on"]) == {"stand-in"}


def test_ranked_layout_puts_paper_above_ours_with_a_column_per_rank():
    comparison = pd.DataFrame({"dataset": "MNIST", "corruption": "brightness", "severity": ["5", "5", "1"],
                               "rank": ["1", "2", "1"], "paper": [0.3, 0.2, 0.12], "ours": [0.25, 0.2, 0.11]})
    layout = ranked_layout(comparison)
    assert list(layout["from"]) == ["paper", "ours", "paper", "ours"]
    assert list(layout.columns[-2:]) == ["1", "2"]
    assert layout.loc[1, "1"] == 0.25 and np.isnan(layout.loc[2, "2"])  # level 1: only rank 1 reported


def _claims(cifar_bright=0.02, mnist_bright=0.3, pixelate=0.15, gaussian=0.15, adult_push=0.1, flat_dev=0.01):
    fig2 = {("CIFAR10", "brightness"): levels(cifar_bright, dev1=0.005), ("CIFAR10", "pixelate"): levels(pixelate),
            ("MNIST", "brightness"): levels(mnist_bright), ("CIFAR10", "gaussian_noise"): levels(gaussian)}
    adult_shares = {"missing_mcar": adult(adult_push), "missing_mnar": adult(2 * adult_push)}
    panels = panel_table({**fig2, **{("Adult", c): s for c, s in adult_shares.items()}}, CLASSES)
    scan = scan_table({**fig2, ("MNIST", "fog"): levels(0.0, dev1=flat_dev)}, CLASSES)
    return {r["claim"].split(" (")[0]: r for r in label_distribution_claims(panels, scan, fig2, adult_shares, 0)}


def test_claims_hold_on_the_papers_pattern():
    records = _claims()
    assert all(r["verdict"] == "yes" for r in records.values()), records
    assert len(records) == 7


def test_brightness_claims_flip_at_their_thresholds():
    assert _claims(cifar_bright=0.049)["Brightness barely changes the CIFAR-10 label distribution"]["holds"]
    assert not _claims(cifar_bright=0.051)["Brightness barely changes the CIFAR-10 label distribution"]["holds"]
    assert _claims(mnist_bright=0.101)["Brightness concentrates MNIST labels on an attractor"]["holds"]
    assert not _claims(mnist_bright=0.099)["Brightness concentrates MNIST labels on an attractor"]["holds"]
    assert not _claims(pixelate=0.05)["CIFAR-10 pixelate shifts labels towards a few classes"]["holds"]


def test_adult_claim_fails_when_a_missingness_moves_labels_away_from_the_majority():
    assert not _claims(adult_push=-0.05)["On Adult, missing values push labels towards the majority class"]["holds"]


@pytest.mark.parametrize("gain, dev1, holds", [(0.12, 0.02, True), (0.12, 0.04, False), (0.08, 0.02, False)])
def test_attractor_and_flat_claim_needs_both(gain, dev1, holds):
    scan = scan_table({("MNIST", "a"): levels(gain, dev1=0.05), ("MNIST", "b"): levels(0.01, dev1=dev1)}, CLASSES)
    record = label_distribution_claims(panel_table({}, CLASSES), scan, {}, {}, None)[-1]
    assert record["claim"].startswith("Some image setting has an attractor") and record["holds"] is holds
    assert record["detail"] == f"strongest: MNIST a +{100 * gain:.1f} pp"


def test_missing_panels_and_adult_are_not_run():
    fig2 = {("CIFAR10", "pixelate"): levels(0.2)}
    panels = panel_table(fig2, CLASSES)
    records = label_distribution_claims(panels, scan_table({}, CLASSES), fig2, {}, None)
    verdicts = {r["claim"].split(" (")[0]: r["verdict"] for r in records}
    assert verdicts["Brightness barely changes the CIFAR-10 label distribution"] == "not run"
    assert verdicts["Brightness concentrates MNIST labels on an attractor"] == "not run"
    assert verdicts["CIFAR-10 pixelate shifts labels towards a few classes"] == "yes"
    assert verdicts["On Adult, missing values push labels towards the majority class"] == "not run"
    assert verdicts["Some image setting has an attractor"] == "not run"


def test_share_figure_draws_a_panel_per_setting_with_a_bar_series_per_level():
    import matplotlib.pyplot as plt

    panels = [("CIFAR10", "fog"), ("MNIST", "brightness")]
    fig = share_figure(panels, {p: levels(0.1) for p in panels}, CLASSES, nrows=1, ncols=2, figsize=(6, 3))
    for ax in fig.axes:
        assert len(ax.containers) == 4  # clean, 1, 3, 5
    assert fig.axes[1].get_title(loc="left") == "(b) MNIST brightness"
    plt.close(fig)


def test_the_page_returns_its_claims_as_the_report_records_them(tmp_path):
    """The page on injected shares without Adult (no data): the claims table is the one written to claims.json."""
    import json

    page = LabelDistributions("smoke", out_dir=tmp_path)
    fig2 = {tuple(p): levels(0.3) for p in page.cfg.fig2_panels}
    page.__dict__.update(benchmarks={}, _shares=dict(fig2), panels=panel_table(fig2, CLASSES),
                         scan=scan_table(fig2, CLASSES), comparison=pd.DataFrame())
    claims = page.claims()
    assert isinstance(claims, pd.DataFrame) and list(claims.columns) == ["claim", "verdict", "detail"]
    written = json.loads((tmp_path / "claims.json").read_text())
    assert list(claims["claim"]) == [r["claim"] for r in written]
    adult = claims.set_index("claim").loc["On Adult, missing values push labels towards the majority class"]
    assert adult["verdict"] == "not run" and adult["detail"] == "Adult was not run"
