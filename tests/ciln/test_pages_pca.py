"""ciln/pages/pca.py: class marginals, the PCA table's selections, the comparison rows and layout, and the claims."""
import numpy as np
import pandas as pd

from ciln.pages.pca import (REFERENCE, MarginalPCA, class_marginals, closest, comparison_rows, figure7, pca_claims,
                            rank_layout, settings_only, top_lists, with_names)

PANELS = {"Blur": ["defocus_blur"], "Noise and Geometric": ["gaussian_noise"], "Weather": ["fog", "frost"],
          "Digital": ["brightness"]}


def pca_table(distances: dict[str, float]) -> pd.DataFrame:
    """A ``marginal_pca``-like table: points on the PC1 axis at ``distance`` from the reference at the origin."""
    names = list(distances) + [REFERENCE]
    dist = [distances[n] for n in distances] + [0.0]
    table = pd.DataFrame({"PC1": dist, "PC2": 0.0, "distance": dist}, index=names)
    table["rank"] = table.drop(index=REFERENCE)["distance"].rank(method="first").reindex(table.index)
    return table


GOOD = {"fog (1)": 0.1, "frost (1)": 0.2, "brightness (1)": 0.3, "brightness (3)": 0.4, "defocus_blur (5)": 0.9,
        "gaussian_noise (5)": 1.0, "PL-IDN-L": 0.5, "PL-IDN-H": 0.8}


def by_name(records):
    return {r["claim"]: r for r in records}


def test_class_marginals_average_shares_votes_and_the_reference():
    shares = {"fog (1)": np.array([[1.0, 0.0], [0.5, 0.5]])}
    raters = {"H": np.array([[0, 1, 1], [1, 1, 1]])}
    humans = np.array([[3, 1], [0, 4]])
    marginals = class_marginals(shares, raters, humans, 2)
    assert list(marginals) == ["fog (1)", "PL-IDN-H", REFERENCE]
    np.testing.assert_allclose(marginals["fog (1)"], [0.75, 0.25])
    np.testing.assert_allclose(marginals["PL-IDN-H"], [1 / 6, 5 / 6])
    np.testing.assert_allclose(marginals[REFERENCE], [0.375, 0.625])


def test_settings_only_and_closest_leave_out_plidn_and_the_reference():
    table = pca_table(GOOD)
    assert set(settings_only(table).index) == set(GOOD) - {"PL-IDN-L", "PL-IDN-H"}
    assert list(closest(table, 3).index) == ["fog (1)", "frost (1)", "brightness (1)"]


def test_claims_hold_when_the_closest_are_mild_weather_or_digital():
    records = by_name(pca_claims(pca_table(GOOD), [0.7, 0.2], 4, PANELS))
    assert all(r["holds"] for r in records.values()), records
    assert records["No PL-IDN tier is among the closest points to the reference"]["detail"] == \
        "PL-IDN-L: rank 5, PL-IDN-H: rank 6"


def test_claims_flip_at_their_thresholds():
    severe = dict(GOOD, **{"fog (5)": 0.11, "frost (5)": 0.12, "brightness (5)": 0.13})
    records = by_name(pca_claims(pca_table(severe), [0.4, 0.3], 4, PANELS))
    low = "The 4 settings closest to the human reference are low-severity (at most two at severity 5)"
    assert not records[low]["holds"]
    assert not records["PC1 explains most of the variance of the class marginals"]["holds"]
    blur = dict(GOOD, **{"defocus_blur (1)": 0.05})
    assert not by_name(pca_claims(pca_table(blur), [0.7], 4, PANELS))[
        "All 4 closest settings are Weather or Digital corruptions"]["holds"]
    plidn_close = dict(GOOD, **{"PL-IDN-L": 0.01})
    assert not by_name(pca_claims(pca_table(plidn_close), [0.7], 4, PANELS))[
        "No PL-IDN tier is among the closest points to the reference"]["holds"]


def test_plidn_claim_is_not_run_without_tiers():
    no_plidn = {k: v for k, v in GOOD.items() if not k.startswith("PL-IDN")}
    record = by_name(pca_claims(pca_table(no_plidn), [0.7], 4, PANELS))[
        "No PL-IDN tier is among the closest points to the reference"]
    assert record["verdict"] == "not run"


def tv_frame():
    return with_names(pd.DataFrame({"corruption": ["fog", "frost", "brightness"], "severity": [1, 1, 3],
                                    "tv": [0.3, 0.1, 0.2]}))


def test_top_lists_by_distance_and_by_tv():
    lists = top_lists(pca_table(GOOD), tv_frame(), 2)
    assert list(lists["rank"]) == [1, 2]
    assert list(lists["by PCA distance"]) == ["fog (1)", "frost (1)"]
    assert list(lists["by TV"]) == ["frost (1)", "brightness (3)"]


def test_comparison_rows_and_rank_layout_rank_every_setting():
    table = pca_table(GOOD)
    marginals = {REFERENCE: np.array([0.5, 0.5]), "PL-IDN-H": np.array([0.4, 0.6])}
    ours = comparison_rows(table, [0.7, 0.2], tv_frame(), marginals, "stand-in")
    assert set(ours["ours_on"]) == {"stand-in"}
    assert len(ours[ours["metric"] == "rank_by_pca_distance"]) == 6  # every setting, no tier
    assert list(ours.loc[ours["metric"] == "class_marginal", "name"]) == ["CIFAR-10H"] * 2 + ["PL-IDN-H"] * 2
    # the paper ranks brightness (3) by TV and snow (1) by distance only; ours ranks every setting it ran
    comparison = pd.DataFrame({"name": ["frost (1)", "snow (1)", "brightness (3)"],
                               "metric": ["rank_by_pca_distance", "rank_by_pca_distance", "rank_by_tv"],
                               "paper": [1.0, 2.0, 1.0]})
    layout = rank_layout(comparison, ours)
    assert list(layout["setting"]) == ["frost (1)", "snow (1)", "brightness (3)"]
    assert list(layout.columns) == ["setting", "PCA distance: paper", "PCA distance: ours", "TV: paper", "TV: ours"]
    assert layout.loc[0, "PCA distance: ours"] == 2 and layout.loc[0, "TV: ours"] == 1  # frost (1): lowest TV
    assert np.isnan(layout.loc[1, "PCA distance: ours"])  # snow (1) was not run here
    assert layout.loc[2, "PCA distance: ours"] == 4 and np.isnan(layout.loc[2, "PCA distance: paper"])


def test_figure7_plots_every_group_and_labels_the_neighbourhood():
    import matplotlib.pyplot as plt

    fig = figure7(pca_table(GOOD), [0.7, 0.2], 3)
    left, right = fig.axes
    assert len(left.collections) == 4  # settings, closest, PL-IDN tiers, reference
    labels = {t.get_text() for t in right.texts}
    assert {"fog (1)", "frost (1)", "brightness (1)", "PL-IDN-L", "PL-IDN-H"} <= labels
    plt.close(fig)


def test_the_page_returns_its_claims_as_the_report_records_them(tmp_path):
    """The page on an injected PCA table (no data): the claims table is the one written to claims.json."""
    import json

    page = MarginalPCA("smoke", out_dir=tmp_path, settings={"top": 4})
    page.__dict__.update(pca=(pca_table(GOOD), np.array([0.7, 0.2])), comparison=pd.DataFrame())
    claims = page.claims()
    assert isinstance(claims, pd.DataFrame) and list(claims.columns) == ["claim", "verdict", "detail"]
    written = json.loads((tmp_path / "claims.json").read_text())
    assert list(claims["claim"]) == [r["claim"] for r in written] and set(claims["verdict"]) == {"yes"}
