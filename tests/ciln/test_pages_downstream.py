"""08_downstream's page: Table II's tables, the accuracy figure's paper markers, the comparison and the claims."""
import json

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from ciln.benchmark import Benchmark  # noqa: E402
from ciln.downstream import Scenario  # noqa: E402
from ciln.pages import downstream as D  # noqa: E402
from shared.paths import paper_dir  # noqa: E402
from shared.report import compare_with_paper, reported  # noqa: E402

METHODS = ["erm", "coteaching", "dividemix (official)"]


def scenario(name: str, benchmark: str, setting: str, source: str) -> Scenario:
    empty = np.zeros(0, int)
    return Scenario(name, benchmark, setting, source, np.zeros((0, 2, 2, 3), np.uint8), empty, empty, empty)


SCENARIOS = [scenario("CILN-S frost (1) clean-img", "CILN-S", "frost (1)", "clean"),
             scenario("CILN-S frost (1) noisy-img", "CILN-S", "frost (1)", "noisy"),
             scenario("CILN-S contrast (5) noisy-img", "CILN-S", "contrast (5)", "noisy"),
             scenario("CILN-S fog (5) clean-img", "CILN-S", "fog (5)", "clean"),  # not in Table II
             scenario("PL-IDN-H", "PL-IDN", "H", "clean")]


def runs_of(acc: dict[tuple[str, str], float], seeds=(0, 1), val_gap: float = 0.0) -> pd.DataFrame:
    """A runs table: best_test per (scenario, method) (seed 1 at +0.02, seed 0 at -0.02: the mean is the value)."""
    rows = []
    for (name, method), value in acc.items():
        for seed in seeds:
            best = value + (0.02 if seed else -0.02) * (len(seeds) > 1)
            rows.append({"scenario": name, "method": method, "seed": seed, "noise_rate": 0.1, "best_test": best,
                         "val_selected": best - val_gap, "last": best - 0.01,
                         "image_source": "noisy" if "noisy-img" in name else "clean"})
    return pd.DataFrame(rows)


@pytest.fixture
def runs():
    return runs_of({(s.name, m): 0.5 + 0.01 * i for i, (s, m) in enumerate(
        (s, m) for s in SCENARIOS for m in METHODS)})


def test_table2_metric_names_table2s_columns():
    assert D.table2_metric("dividemix (official)", "noisy") == "dm_noisy_img"
    assert D.table2_metric("dividemix (ciln_compact)", "clean") == "dm_clean_img"
    assert D.table2_metric("coteaching", "clean") == "cot_clean_img" and D.table2_metric("erm", "noisy") == "erm_noisy_img"


def test_accuracy_rows_are_keyed_like_table2(runs):
    acc = D.accuracy_rows(runs, D.scenario_keys(SCENARIOS))
    assert len(acc) == len(SCENARIOS) * len(METHODS)
    row = acc[(acc["scenario"] == "CILN-S contrast (5) noisy-img") & (acc["method"] == "coteaching")].iloc[0]
    assert (row["variant"], row["corruption"], row["severity"], row["metric"]) == ("S", "contrast", 5, "cot_noisy_img")
    assert row["value"] == pytest.approx(runs[(runs["scenario"] == row["scenario"])
                                              & (runs["method"] == "coteaching")]["best_test"].mean())
    plidn = acc[acc["scenario"] == "PL-IDN-H"]
    assert set(plidn["corruption"]) == {"plidn_H"} and set(plidn["severity"]) == {""}
    summary = D.selection_table(runs)
    assert list(summary.columns) == ["scenario", "noise_rate", "method", "best_test", "val_selected", "last"]
    assert len(summary) == len(acc) and list(dict.fromkeys(summary["scenario"])) == [s.name for s in SCENARIOS]


def test_table2_compares_the_papers_dividemix_when_both_variants_ran(runs):
    """The full profile runs DivideMix twice (CILN's compact variant and the official one); Table II has one "dm"
    column, CILN's compact variant. Both variants in the rows used to give two values per Table II cell, and the
    summary's pivot failed with "Index contains duplicate entries" (found by the full-profile rehearsal)."""
    compact = runs[runs["method"] == "dividemix (official)"].assign(method="dividemix (ciln_compact)",
                                                                    best_test=0.123)
    both = pd.concat([runs, compact], ignore_index=True)
    acc = D.accuracy_rows(both, D.scenario_keys(SCENARIOS))
    dm = acc[acc["metric"].str.startswith("dm_")]
    assert len(dm) == len(SCENARIOS) and set(dm["method"]) == {"dividemix (ciln_compact)"}
    assert dm["value"].tolist() == pytest.approx([0.123] * len(SCENARIOS))
    assert not acc.duplicated([*D.KEYS, "metric"]).any()
    comparison = compare_with_paper(D.ours_long(pd.DataFrame(columns=[*D.KEYS, "noise_rate", "nth", "tv", "tv_ci95"]),
                                                acc, "toy"), reported("ciln", "table2"), on=D.KEYS)
    assert len(D.comparison_pivot(comparison)) == 3  # frost (1), contrast (5), PL-IDN-H: one row each, no error
    # a single variant (the smoke profile's official one) stands in for the paper's
    assert set(D.accuracy_rows(runs, D.scenario_keys(SCENARIOS))["method"]) == set(METHODS)
    other = both[both["method"] != "dividemix (ciln_compact)"]
    other = pd.concat([other, other[other["method"] == "dividemix (official)"].assign(method="dividemix (v2)")])
    with pytest.raises(D.ConfigError, match="ciln_compact"):
        D.accuracy_rows(other, D.scenario_keys(SCENARIOS))


def test_paper_markers_match_severities_numerically(runs):
    """The bug this fixes: the CSV reads severity 5 as 5.0 (its PL-IDN rows have none), so matching the text "5"
    found no paper accuracy at all."""
    paper = reported("ciln", "table2")
    assert not (paper["severity"].astype(str) == "5").any()  # the old match: no marker
    markers = D.paper_markers(D.accuracy_rows(runs, D.scenario_keys(SCENARIOS)), paper)
    # every (scenario, learner) Table II reports: frost (1) both sources, contrast (5) noisy, PL-IDN-H; fog (5) none
    assert len(markers) == 4 * len(METHODS) and "CILN-S fog (5) clean-img" not in set(markers["scenario"])
    found = markers.set_index(["scenario", "method"])["paper"]
    assert found[("CILN-S contrast (5) noisy-img", "coteaching")] == pytest.approx(0.221)
    assert found[("CILN-S frost (1) clean-img", "dividemix (official)")] == pytest.approx(0.719)
    assert found[("PL-IDN-H", "erm")] == pytest.approx(0.633)


def diamonds(ax) -> np.ndarray:
    """(x, y) of every marker drawn on ``ax`` (scatter collections)."""
    offsets = [c.get_offsets() for c in ax.collections if len(c.get_offsets())]
    return np.concatenate(offsets) if offsets else np.zeros((0, 2))


def test_accuracy_figure_draws_a_paper_marker_for_every_reported_row(runs):
    acc = D.accuracy_rows(runs, D.scenario_keys(SCENARIOS))
    markers = D.paper_markers(acc, reported("ciln", "table2"))
    fig = D.accuracy_figure(runs, markers)
    top, *others = fig.axes
    points = diamonds(top)
    assert len(points) == len(markers) == 12
    assert sorted(points[:, 1]) == pytest.approx(sorted(100 * markers["paper"]))
    names = list(dict.fromkeys(runs["scenario"]))
    in_drawing_order = markers.sort_values("method", key=lambda m: m.map(METHODS.index), kind="stable")
    for (x, _), name in zip(points, in_drawing_order["scenario"]):
        assert abs(x - names.index(name)) < 0.4  # over its scenario's group of bars
    legend = [t.get_text() for t in top.get_legend().get_texts()]
    assert D.PAPER_LABEL in legend and set(METHODS) <= set(legend)
    assert all(len(diamonds(ax)) == 0 for ax in others)  # the paper's accuracy is a best-epoch-on-test number
    assert all(len(ax.patches) == len(names) * len(METHODS) for ax in fig.axes)


def test_accuracy_figure_without_paper_rows_has_no_paper_entry(runs):
    fig = D.accuracy_figure(runs, D.paper_markers(D.accuracy_rows(runs, D.scenario_keys(SCENARIOS)).iloc[:0],
                                                  reported("ciln", "table2")))
    assert D.PAPER_LABEL not in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_the_notebooks_caption_names_the_series_the_figure_draws():
    cells = json.loads((paper_dir("ciln") / "08_downstream.ipynb").read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells]
    at = next(i for i, s in enumerate(sources) if "page.figure_accuracy()" in s)
    caption = sources[at - 1]
    assert "grey diamonds" in caption and D.PAPER_LABEL in caption
    assert all(rule in caption for rule in ("best epoch on test", "noisy validation", "last epoch"))


@pytest.fixture
def benches(rng):
    n, K, M = 120, 3, 4
    y = rng.integers(0, K, n)
    clean = np.eye(K)[None, y].repeat(M, axis=0)
    clean[0, :20] = np.eye(K)[(y[:20] + 1) % K]  # voter 0 errs on 20 clean rows: they are not clean-start
    noisy = clean.copy()
    noisy[1:3, :60] = np.eye(K)[(y[:60] + 1) % K]
    bench = Benchmark("toy", "cifar10", ("a", "b", "c"), "nlt", list("wxyz"), y, clean, {("contrast", 5): noisy})
    test = Benchmark("toy", "cifar10", ("a", "b", "c"), "test", list("wxyz"), y.copy(), clean.copy(),
                     {("contrast", 5): noisy.copy()})
    humans = np.eye(K)[y] * 40 + 5
    return bench, test, humans


def test_characteristics_table_has_a_row_per_tier_and_variant(benches, rng):
    bench, test, humans = benches
    raters = rng.integers(0, 3, (len(bench.y), 10))
    raters[:30] = -1  # rows absent from the release
    table = D.characteristics_table(bench, test, {"H": raters}, None, humans, [("contrast", 5)], n_boot=3)
    assert list(zip(table["variant"], table["corruption"])) == [("PL-IDN", "plidn_H"), ("S", "contrast"), ("C", "contrast")]
    keep = slice(30, None)
    expected = np.mean(raters[keep] != bench.y[keep, None])
    assert table.loc[0, "noise_rate"] == pytest.approx(expected)
    assert np.isnan(table.loc[0, "tv"])  # no PL-IDN test labels: no TV
    s, c = table.iloc[1], table.iloc[2]
    # rows 0-19: 3 of 4 voters wrong, rows 20-59: 2 of 4; CILN-C drops rows 0-19 (voter 0 is wrong on them clean)
    assert s["noise_rate"] == pytest.approx((20 * 0.75 + 40 * 0.5) / 120) and c["noise_rate"] == pytest.approx(0.2)
    assert np.isfinite(s["tv"]) and np.isfinite(s["tv_ci95"])
    with_test = D.characteristics_table(bench, test, {"H": raters}, {"H": rng.integers(0, 3, (len(test.y), 10))},
                                        humans, [("contrast", 5)], n_boot=3)
    assert np.isfinite(with_test.loc[0, "tv"])


def test_comparison_pivot_keeps_the_rows_we_ran():
    paper = reported("ciln", "table2")
    ours = pd.DataFrame([{"variant": "S", "corruption": "frost", "severity": 1, "metric": "noise_rate", "value": 0.11},
                         {"variant": "S", "corruption": "frost", "severity": 1, "metric": "erm_clean_img", "value": 0.8},
                         {"variant": "PL-IDN", "corruption": "plidn_H", "severity": "", "metric": "nth", "value": 0.2}])
    comparison = compare_with_paper(ours.assign(ours_on="toy"), paper, on=D.KEYS)
    assert len(comparison) > 20  # every paper number of those metrics, most without ours
    wide = D.comparison_pivot(comparison)
    assert len(wide) == 2 and list(wide.columns[:3]) == D.KEYS
    frost = wide[wide["corruption"] == "frost"].iloc[0]
    assert frost["noise_rate"] == "0.110 (0.101)" and frost["erm_clean_img"] == "0.800 (0.850)"
    assert pd.isna(frost["nth"])  # not computed for that row
    assert list(wide["corruption"]) == ["frost", "plidn_H"]  # in the paper's order, PL-IDN's row kept
    read_back = comparison.assign(severity=comparison["severity"].replace("", np.nan))  # as a CSV reads it
    assert list(D.comparison_pivot(read_back)["corruption"]) == ["frost", "plidn_H"]


def claims_of(runs, **kw):
    records = D.downstream_claims(runs, "CILN-S frost (1)", "CILN-S contrast (5)", kw.get("sources", ["clean", "noisy"]),
                                  "PL-IDN-H")
    return {r["claim"]: r for r in records}


def grid(low_cot=0.78, high_dm=0.40, tier_cot=0.6, drop_erm=0.3, val_gap=0.01, skip=()):
    acc = {}
    for source in ("clean", "noisy"):
        acc[(f"CILN-S frost (1) {source}-img", "erm")] = 0.80
        acc[(f"CILN-S frost (1) {source}-img", "coteaching")] = low_cot
        acc[(f"CILN-S frost (1) {source}-img", "dividemix (official)")] = 0.7
        acc[(f"CILN-S contrast (5) {source}-img", "erm")] = 0.80 - drop_erm
        acc[(f"CILN-S contrast (5) {source}-img", "coteaching")] = 0.40
        acc[(f"CILN-S contrast (5) {source}-img", "dividemix (official)")] = high_dm
    acc[("PL-IDN-H", "erm")] = 0.6
    acc[("PL-IDN-H", "coteaching")] = tier_cot
    acc[("PL-IDN-H", "dividemix (official)")] = 0.5
    return runs_of({k: v for k, v in acc.items() if k[1] not in skip and k[0] not in skip}, val_gap=val_gap)


def test_claims_hold_and_flip_at_their_thresholds():
    low = "At low noise Co-Teaching matches ERM (CILN-S frost (1), clean-img; within 3 points)"
    high = ("At high noise Co-Teaching and DivideMix do not beat ERM on CILN (CILN-S contrast (5), noisy-img; "
            "by more than 3 points)")
    tier = "Co-Teaching holds up on the rate-matched fallible-rater tier (PL-IDN-H: Co-T >= ERM - 1 point)"
    drop = "ERM degrades less than Co-Teaching from low to high CILN noise (clean-img)"
    val = ("Selecting the epoch on noisy validation labels instead of the test set costs little accuracy "
           "(mean gap below 3 points)")
    base = claims_of(grid())
    assert [base[c]["verdict"] for c in (low, high, tier, drop, val)] == ["yes"] * 5
    assert len(base) == 7 and base[low]["detail"] == "Co-T 78.0% vs ERM 80.0%"
    assert claims_of(grid(low_cot=0.76))[low]["verdict"] == "no"
    assert claims_of(grid(high_dm=0.54))[high]["verdict"] == "no"  # DivideMix beats ERM (0.50) by 4 points
    assert claims_of(grid(high_dm=0.52))[high]["verdict"] == "yes"  # by 2: within the tolerance
    assert claims_of(grid(tier_cot=0.58))[tier]["verdict"] == "no"
    assert claims_of(grid(drop_erm=0.45))[drop]["verdict"] == "no"  # ERM falls 45 points, Co-T 38
    assert claims_of(grid(val_gap=0.05))[val]["verdict"] == "no"


def test_claims_whose_runs_are_missing_are_not_run():
    no_dm = claims_of(grid(skip=("dividemix (official)",)))
    assert {r["verdict"] for c, r in no_dm.items() if c.startswith("At high noise")} == {"not run"}
    assert no_dm["At low noise Co-Teaching matches ERM (CILN-S frost (1), clean-img; within 3 points)"]["verdict"] == "yes"
    no_tier = claims_of(grid(skip=("PL-IDN-H",)))
    assert no_tier["Co-Teaching holds up on the rate-matched fallible-rater tier (PL-IDN-H: Co-T >= ERM - 1 point)"][
        "verdict"] == "not run"
    no_val = grid().assign(val_selected=np.nan)
    assert claims_of(no_val)["Selecting the epoch on noisy validation labels instead of the test set costs little "
                             "accuracy (mean gap below 3 points)"]["verdict"] == "not run"
    noisy_only = claims_of(grid().query("image_source == 'noisy'"), sources=["noisy"])
    assert noisy_only["ERM degrades less than Co-Teaching from low to high CILN noise (clean-img)"]["verdict"] == "not run"


def test_the_page_wires_runs_figure_comparison_and_claims(runs, tmp_path):
    """The page on injected runs (no data, no training): the figure has the paper's markers, the report files exist."""
    from types import SimpleNamespace

    page = D.Downstream("smoke", out_dir=tmp_path)
    characteristics = pd.DataFrame([{"variant": "S", "corruption": "frost", "severity": 1, "noise_rate": 0.11,
                                     "nth": 0.1, "tv": 0.1, "tv_ci95": 0.005}])
    page.__dict__.update(runs=runs, scenarios=SCENARIOS, characteristics_frame=characteristics,
                         bench=SimpleNamespace(dataset="toy"))
    assert len(diamonds(page.figure_accuracy().axes[0])) == 12
    assert (tmp_path / "table2_accuracy.png").exists()
    assert len(page.run().data) == len(SCENARIOS) * len(METHODS)
    assert list(page.comparison_summary().data["corruption"]) == ["frost", "plidn_H", "contrast"]  # Table II order
    claims = page.claims()
    assert len(claims) == 7 and len(json.loads((tmp_path / "claims.json").read_text())) == 7
    written = pd.read_csv(tmp_path / "comparison.csv")
    assert set(written["ours_on"].dropna()) == {"toy"} and written["ours"].notna().sum() == 4 + 12  # frost (1)'s 4 measures, 12 accuracies
