"""ciln/pages/tv.py: the rate-matched table, the comparison rows and layouts, and the claims, on tiny TV tables."""
import numpy as np
import pandas as pd
import pytest

from ciln.pages.tv import (TotalVariation, closest_settings, figure6, matched_table, measured_tier, quoted_tiers,
                           settings_rows, table2_layout, table2_rows, tv_claims)

PANELS = {"Blur": ["defocus_blur"], "Noise and Geometric": ["gaussian_noise"], "Weather": ["fog"],
          "Digital": ["brightness"]}
FAMILY_TV = {"defocus_blur": 0.30, "gaussian_noise": 0.25, "fog": 0.10, "brightness": 0.12}


def tv_frame(family_tv=FAMILY_TV, *, baseline_gap=0.05, rising=True) -> pd.DataFrame:
    """Three severities per corruption; TV and noise rate grow with severity (or fall, ``rising=False``)."""
    rows = []
    for corruption, base in family_tv.items():
        for i, severity in enumerate((1, 3, 5)):
            step = i if rising else 2 - i
            tv = base + 0.05 * step
            rows.append({"corruption": corruption, "severity": severity, "noise_rate_test": tv / 2,
                         "tv": tv, "tv_ci95": 0.002, "tv_sym": tv + baseline_gap, "tv_ccn": tv + 2 * baseline_gap,
                         "noise_rate_test_C": tv / 3, "tv_C": tv - 0.01, "tv_ci95_C": 0.002, "tv_sym_C": tv,
                         "tv_ccn_C": tv})
    return pd.DataFrame(rows)


def tiers_frame(tvs=(0.5, 0.5, 0.9), rates=(0.06, 0.1, 0.2), source="measured") -> pd.DataFrame:
    return pd.DataFrame({"tier": ["PL-IDN-L", "PL-IDN-M", "PL-IDN-H"], "source": source,
                         "noise_rate_test": list(rates), "tv": list(tvs), "tv_ci95": 0.005})


def by_name(records):
    return {r["claim"].split(" (")[0]: r for r in records}


def test_closest_settings_are_nearest_in_noise_rate():
    tv = tv_frame()
    near = closest_settings(tv, 0.05, k=2)
    assert list(near["noise_rate_test"]) == [0.05, pytest.approx(0.06)]


def test_matched_table_lists_each_tier_then_its_three_settings():
    matched = matched_table(tv_frame(), tiers_frame())
    assert len(matched) == 12
    assert list(matched["benchmark"][::4]) == ["PL-IDN-L", "PL-IDN-M", "PL-IDN-H"]
    assert matched["benchmark"][1].startswith("CILN-S ")


def test_claims_hold_on_the_papers_pattern():
    records = by_name(tv_claims(tv_frame(), tiers_frame(), PANELS))
    assert len(records) == 5
    assert all(r["holds"] for r in records.values()), records
    plidn = records["CILN is closer to humans than PL-IDN at matched noise rates"]
    assert plidn["claim"].endswith("(PL-IDN: measured)")


def test_baseline_claim_flips_when_baselines_are_closer():
    records = by_name(tv_claims(tv_frame(baseline_gap=-0.01), tiers_frame(), PANELS))
    assert not records["CILN is closer to the human reference than symmetric and class-conditional noise at the same "
                       "rate"]["holds"]


def test_severity_claims_flip_when_tv_falls_with_severity():
    tv = tv_frame(rising=False)
    tv["noise_rate_test"] = tv["noise_rate_test"].to_numpy()[::-1]  # rate still rising, TV falling
    records = by_name(tv_claims(tv, tiers_frame(), PANELS))
    assert not records["Mild corruptions are more human-like than severe ones"]["holds"]
    assert not records["TV rises with the noise rate"]["holds"]


def test_family_claim_needs_weather_and_digital_lowest():
    name = "Weather and Digital corruptions have the lowest TV"
    assert by_name(tv_claims(tv_frame(), tiers_frame(), PANELS))[name]["holds"]
    blur_low = dict(FAMILY_TV, defocus_blur=0.05)
    assert not by_name(tv_claims(tv_frame(blur_low), tiers_frame(), PANELS))[name]["holds"]


def test_plidn_claim_flips_when_plidn_is_closer_and_is_not_run_without_tiers():
    name = "CILN is closer to humans than PL-IDN at matched noise rates"
    assert not by_name(tv_claims(tv_frame(), tiers_frame(tvs=(0.01, 0.01, 0.01)), PANELS))[name]["holds"]
    empty = pd.DataFrame(columns=["tier", "source", "noise_rate_test", "tv", "tv_ci95"])
    assert by_name(tv_claims(tv_frame(), empty, PANELS))[name]["verdict"] == "not run"


def test_settings_and_table2_rows_in_long_form():
    tv = tv_frame()
    long = settings_rows(tv, "stand-in")
    assert len(long) == len(tv) * 7 and set(long["dataset"]) == {"CIFAR10"}
    rows = table2_rows(tv, tiers_frame(), "stand-in")
    assert len(rows) == 3 * 2 + 2 * len(tv)
    assert set(rows.loc[rows["variant"] == "PL-IDN", "ours_on"]) == {"stand-in fallible raters"}
    quoted = table2_rows(tv, tiers_frame(source="paper"), "stand-in")  # quoted tiers are not ours
    assert "PL-IDN" not in set(quoted["variant"])


def test_quoted_tiers_from_table2():
    table2 = pd.DataFrame({"variant": "PL-IDN", "corruption": ["plidn_L"] * 3 + ["plidn_H"] * 3,
                           "metric": ["noise_rate", "tv", "tv_ci95"] * 2,
                           "value": [0.108, 0.18, 0.005, 0.478, 0.742, 0.019]})
    tiers = quoted_tiers(table2)
    assert list(tiers["tier"]) == ["PL-IDN-H", "PL-IDN-L"] and list(tiers["tv"]) == [0.742, 0.18]


def test_measured_tier_of_perfect_raters_has_no_noise():
    y = np.array([0, 1, 2, 0, 1, 2])
    votes = np.repeat(y[:, None], 5, axis=1)
    humans = np.eye(3)[y] * 10
    tier = measured_tier("L", votes, y, humans, n_votes=4, n_boot=3, num_classes=3)
    assert tier["tier"] == "PL-IDN-L" and tier["per-rater noise"] == 0 and tier["tv"] == pytest.approx(0)


def test_table2_layout_one_row_per_paper_row():
    comparison = pd.DataFrame([
        {"variant": "PL-IDN", "corruption": "plidn_L", "severity": "", "metric": "tv_ci95", "paper": 0.005,
         "ours": 0.004, "diff": -0.001, "ours_on": "x"},
        {"variant": "PL-IDN", "corruption": "plidn_L", "severity": "", "metric": "tv", "paper": 0.18, "ours": 0.1,
         "diff": -0.08, "ours_on": "x"},
        {"variant": "S", "corruption": "frost", "severity": "1", "metric": "tv", "paper": 0.133, "ours": 0.11,
         "diff": -0.023, "ours_on": "x"},
        {"variant": "C", "corruption": "frost", "severity": "1", "metric": "tv", "paper": 0.051, "ours": np.nan,
         "diff": np.nan, "ours_on": np.nan}])
    table = table2_layout(comparison)
    assert list(table["benchmark"]) == ["PL-IDN", "CILN-S", "CILN-C"]
    assert list(table["setting"]) == ["PL-IDN-L", "frost (1)", "frost (1)"]
    assert table.loc[0, "± ours"] == 0.004 and np.isnan(table.loc[1, "± paper"]) and np.isnan(table.loc[2, "TV ours"])


def test_figure6_has_a_panel_per_family_and_plidn_lines_for_low_and_medium():
    import matplotlib.pyplot as plt

    paper = pd.DataFrame({"corruption": ["fog"], "severity": [1], "value": [0.1]})
    fig = figure6(tv_frame(), tiers_frame(), PANELS, paper)
    assert len(fig.axes) == 4
    for ax in fig.axes:
        assert len(ax.containers) == 1  # one corruption per family here
        assert len(ax.get_lines()) == 2  # PL-IDN-L and -M, not -H
    plt.close(fig)


def test_the_page_returns_its_claims_as_the_report_records_them(tmp_path):
    """The page on an injected TV table and tiers (no data): the claims table is the one written to claims.json."""
    import json

    page = TotalVariation("smoke", out_dir=tmp_path)
    page.__dict__.update(tv=tv_frame(), tiers=tiers_frame(), comparisons={})
    claims = page.claims()
    assert isinstance(claims, pd.DataFrame) and list(claims.columns) == ["claim", "verdict", "detail"]
    written = json.loads((tmp_path / "claims.json").read_text())
    assert list(claims["claim"]) == [r["claim"] for r in written] and set(claims["verdict"]) == {"yes"}
