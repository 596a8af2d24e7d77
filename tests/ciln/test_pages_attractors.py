"""09_attractors' page: Table III's attractor table, Co-Teaching columns, the origins figure and the claims."""
import json

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from ciln.pages import attractors as A  # noqa: E402
from shared.paths import paper_dir  # noqa: E402
from shared.report import reported  # noqa: E402

CLASSES = ("a", "b", "c")


def attracted(n_per_class=10, voters=3, pulled=1.0):
    """Votes (n, M) where class 0 absorbs a share ``pulled`` of class 1's rows (every voter); class 2 is untouched."""
    y = np.repeat([0, 1, 2], n_per_class)
    votes = np.repeat(y[:, None], voters, axis=1)
    moved = np.flatnonzero(y == 1)[: int(round(pulled * n_per_class))]
    votes[moved] = 0
    return votes, y


def sources(pulled=(1.0, 0.2), plidn_pulled=0.4):
    out = {}
    for (name, corruption, severity), share in zip((("contrast (5)", "contrast", 5), ("fog (5)", "fog", 5)), pulled):
        votes, y = attracted(pulled=share)
        out[name] = (votes, y, corruption, severity)
    votes, y = attracted(pulled=plidn_pulled, voters=10)
    out["PL-IDN-H"] = (votes, y, "plidn_H", "")
    return out


def test_attractor_table_reads_gain_and_purity():
    table = A.attractor_table(sources(), CLASSES)
    assert list(table["setting"]) == ["contrast (5)", "fog (5)", "PL-IDN-H"]
    row = table.iloc[0]
    # class 0 labels 20 of 30 rows (10 its own): +33 pp over its true share, purity 50 %; a third of the votes wrong
    assert row["attractor"] == "a" and row["attractor_gain_pp"] == pytest.approx(100 / 3)
    assert row["purity"] == pytest.approx(0.5) and row["noise_rate"] == pytest.approx(1 / 3)
    assert table.iloc[1]["attractor_gain_pp"] == pytest.approx(100 * 2 / 30)


def test_cot_columns_come_from_the_runs_and_are_empty_without_them():
    table = A.attractor_table(sources(), CLASSES)
    cot = pd.DataFrame([{"name": "contrast (5)", "source": "clean", "best_test": 0.3},
                        {"name": "contrast (5)", "source": "clean", "best_test": 0.5},
                        {"name": "contrast (5)", "source": "noisy", "best_test": 0.2},
                        {"name": "H", "source": "clean", "best_test": 0.6}])
    out = A.with_cot(table, cot).set_index("setting")
    assert out.loc["contrast (5)", "cot_clean_img"] == pytest.approx(0.4)  # mean over seeds
    assert out.loc["contrast (5)", "cot_noisy_img"] == pytest.approx(0.2)
    assert out.loc["PL-IDN-H", "cot_clean_img"] == pytest.approx(0.6) and np.isnan(out.loc["PL-IDN-H", "cot_noisy_img"])
    assert out.loc["fog (5)", ["cot_clean_img", "cot_noisy_img"]].isna().all()
    assert A.with_cot(table, pd.DataFrame())[["cot_clean_img", "cot_noisy_img"]].isna().all().all()
    long = A.table3_long(out.reset_index(), "toy")
    assert not long["value"].isna().any() and set(long["ours_on"]) == {"toy"}
    assert len(long[long["corruption"] == "contrast"]) == 5 and len(long[long["corruption"] == "fog"]) == 3


def test_paper_purity_matches_severity_by_number():
    paper = reported("ciln", "table3")
    assert A.paper_purity(paper, "contrast", 5) == (pytest.approx(0.262), "cat")
    assert A.paper_purity(paper, "plidn_H", "") == (pytest.approx(0.388), "truck")
    assert A.paper_purity(paper, "contrast", 3) is None and A.paper_purity(paper, "fog", 5) is None


def test_origins_figure_draws_the_papers_purity_for_every_setting_table3_reports():
    src = sources()
    table = A.attractor_table(src, CLASSES)
    fig = A.origins_figure(src, table, CLASSES, reported("ciln", "table3"))
    contrast, fog, plidn = fig.axes
    for ax, row, (value, name) in ((contrast, table.iloc[0], (0.262, "cat")), (plidn, table.iloc[2], (0.388, "truck"))):
        (point,) = [c.get_offsets() for c in ax.collections]
        cls = CLASSES.index(row["attractor"])
        assert point[0][0] == cls and point[0][1] == pytest.approx(100 * value)
        assert ax.patches[cls].get_height() == pytest.approx(100 * row["purity"])  # the red bar is our purity
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"{A.PAPER_LABEL}, {name})"]
    assert not fog.collections and fog.get_legend() is None  # Table III has no fog (5)
    assert all(len(ax.patches) == len(CLASSES) for ax in fig.axes)
    assert not A.origins_figure(src, table, CLASSES).axes[0].collections  # no paper table, no diamonds


def test_the_notebooks_caption_names_the_papers_purity():
    cells = ["".join(c["source"]) for c in json.loads((paper_dir("ciln") / "09_attractors.ipynb").read_text())["cells"]]
    at = next(i for i, s in enumerate(cells) if "page.figure_origins()" in s)
    assert "grey diamond" in cells[at - 1] and "purity" in cells[at - 1] and "Table III" in cells[at - 1]


def claims_of(table):
    return {r["claim"]: r for r in A.attractor_claims(table)}


STRONG = "High-noise CILN settings have a strong attractor (>= 10 pp)"
IMPURE = "Their purity is well below 1 - noise rate (most attractor rows are wrong)"
WEAKER = "PL-IDN at high noise has a weaker attractor than the CILN settings"
COT = "Co-Teaching does better on PL-IDN's high tier than on the high-noise CILN settings (clean-img)"


def table_with(gains=(30, 20), purities=(0.25, 0.3), plidn_gain=8, cot=(0.2, 0.3, 0.6)):
    rows = [{"setting": s, "attractor": "a", "attractor_gain_pp": g, "purity": p, "noise_rate": 0.5, "cot_clean_img": c}
            for s, g, p, c in zip(("contrast (5)", "fog (5)"), gains, purities, cot[:2])]
    rows.append({"setting": "PL-IDN-H", "attractor": "b", "attractor_gain_pp": plidn_gain, "purity": 0.4,
                 "noise_rate": 0.45, "cot_clean_img": cot[2]})
    return pd.DataFrame(rows)


def test_claims_flip_at_their_thresholds():
    base = claims_of(table_with())
    assert [base[c]["verdict"] for c in (STRONG, IMPURE, WEAKER, COT)] == ["yes"] * 4
    assert base[STRONG]["detail"] == "contrast (5): a +30 pp, fog (5): a +20 pp"
    assert claims_of(table_with(gains=(30, 9)))[STRONG]["verdict"] == "no"
    assert claims_of(table_with(purities=(0.25, 0.5)))[IMPURE]["verdict"] == "no"  # 1 - noise rate = 0.5
    assert claims_of(table_with(plidn_gain=20))[WEAKER]["verdict"] == "no"
    assert claims_of(table_with(cot=(0.2, 0.7, 0.6)))[COT]["verdict"] == "no"
    assert base[COT]["detail"] == "PL-IDN 60.0%, CILN best 30.0%"


def test_claims_without_their_inputs_are_not_run():
    assert claims_of(table_with(cot=(np.nan, np.nan, 0.6)))[COT]["verdict"] == "not run"
    assert claims_of(table_with(cot=(0.2, 0.3, np.nan)))[COT]["verdict"] == "not run"
    no_plidn = claims_of(table_with().iloc[:2])
    assert no_plidn[WEAKER]["verdict"] == no_plidn[COT]["verdict"] == "not run"


def test_the_page_wires_table_figure_cot_comparison_and_claims(tmp_path):
    """The page on injected sources and Co-Teaching runs (no data, no training)."""
    from types import SimpleNamespace

    page = A.Attractors("smoke", out_dir=tmp_path)
    cot = pd.DataFrame([{"name": "contrast (5)", "source": s, "best_test": 0.2} for s in ("clean", "noisy")]
                       + [{"name": "H", "source": "clean", "best_test": 0.6}])
    page.__dict__.update(sources=sources(plidn_pulled=0.1), bench=SimpleNamespace(classes=CLASSES, dataset="toy"), cot_runs=cot)
    assert len(page.attractors().data) == 3
    fig = page.figure_origins()
    assert [len(ax.collections) for ax in fig.axes] == [1, 0, 1] and (tmp_path / "attractor_origins.svg").exists()
    assert page.run().data["cot_clean_img"].tolist()[::2] == [0.2, 0.6]
    shown = page.compare_with_paper().data
    assert shown[shown["corruption"] == "contrast"]["ours"].notna().sum() == 5
    assert list(page.claims()["verdict"]) == ["no", "yes", "yes", "yes"]  # fog (5) gains 7 pp, PL-IDN 3 pp
    assert (tmp_path / "table3.csv").exists() and len(json.loads((tmp_path / "claims.json").read_text())) == 4
