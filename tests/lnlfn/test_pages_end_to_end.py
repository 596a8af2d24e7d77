"""lnlfn.pages.end_to_end: Table 4's three evaluations, its figure, the organic-error candidates, the comparison
and the claims, on a twelve-item toy dataset and hand-built sweeps (no notebook, no encoder)."""
from __future__ import annotations

import json
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from lnlfn.pages import end_to_end as E
from lnlfn.scoring import HeadConfig, SweepResult
from shared.report import compare_with_paper, reported


@dataclass
class Toy:
    """What the page reads of a TextDataset: split, texts, classes, name, len."""

    split: np.ndarray
    texts: list
    classes: tuple = ("neg", "pos")
    name: str = "toy"

    def __len__(self):
        return len(self.split)


SPLIT = np.array(["train"] * 4 + ["val"] * 4 + ["test"] * 4)
CLEAN = np.array([0, 1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 1])
NOISY = CLEAN.copy()
NOISY[[4, 8]] = 1  # one wrong label in the validation split (item 4), one in the test split (item 8)
# predictions over the scored items (val 4..7, test 8..11) of three runs:
PREDICTIONS = np.array([[1, 0, 1, 1, 1, 1, 0, 1],    # A: fits the noisy labels (noisy val 4/4; clean test 3/4)
                        [0, 0, 1, 1, 0, 1, 0, 1],    # B: the clean labels (clean val 4/4, clean test 4/4)
                        [0, 0, 0, 0, 0, 0, 0, 0]])   # C: always "neg" (clean test 2/4)


def toy_sweep(predictions=PREDICTIONS) -> SweepResult:
    probs = np.where(np.eye(2, dtype=bool)[predictions], 0.9, 0.1)
    m = len(predictions)
    return SweepResult(tuple(HeadConfig("logreg", C=1.0 + h) for h in range(m)), probs, NOISY[4:],
                       np.zeros(m), np.arange(m, dtype=float), None, np.arange(8))


def toy_ds() -> Toy:
    return Toy(SPLIT, [f"text {i}" for i in range(len(SPLIT))])


# ------------------------------------------------------------------------------------------ the evaluations
def test_noisy_selection_picks_the_run_that_fits_the_noise_and_correction_fixes_it():
    corrected = NOISY.copy()
    corrected[[4, 8]] = CLEAN[[4, 8]]  # a perfect verifier that checked both wrong labels
    rows = {r["eval_split"]: r for r in E.evaluation_rows(toy_sweep(), toy_ds(), NOISY, CLEAN, corrected)}
    assert list(rows) == list(E.EVALUATIONS)
    assert rows["noisy"] == {"eval_split": "noisy", "measurable": 100.0, "true": 75.0, "rank": 2, "test errors left": 1}
    assert rows["corrected"] == {"eval_split": "corrected", "measurable": 100.0, "true": 100.0, "rank": 1,
                                 "test errors left": 0}
    assert rows["clean"]["measurable"] == rows["clean"]["true"] == 100.0


def test_a_correction_that_misses_the_errors_changes_nothing():
    rows = {r["eval_split"]: r for r in E.evaluation_rows(toy_sweep(), toy_ds(), NOISY, CLEAN, NOISY.copy())}
    assert rows["corrected"] == {**rows["noisy"], "eval_split": "corrected"}


def test_grid_configs_is_the_product_with_c_slowest():
    configs = E.grid_configs("all-minilm-l6-v2", {"C": [0.1, 1.0], "train_fraction": [0.5, 1.0]}, None)
    assert [(c.C, c.train_fraction) for c in configs] == [(0.1, 0.5), (0.1, 1.0), (1.0, 0.5), (1.0, 1.0)]
    assert len(E.grid_configs("all-minilm-l6-v2", None, None)) == 5  # the smoke heads


# ------------------------------------------------------------------------------------------ Table 4
def runs_frame(noisy_gap=(3.0, 3.0), corrected_gap=(1.0, 2.0), ranks=((2, 3), (1, 5), (1, 1))) -> pd.DataFrame:
    rows = []
    for seed in (0, 1):
        for split, gap, rank in zip(E.EVALUATIONS, (noisy_gap, corrected_gap, (0.0, 0.0)), ranks):
            rows.append({"benchmark": "vader5", "seed": seed, "eval_split": split, "measurable": 80.0 - gap[seed],
                         "true": 80.0, "rank": rank[seed], "test errors left": 10 * (split == "noisy")})
    return pd.DataFrame(rows)


def test_table4_means_and_gap():
    means = E.table4_means(runs_frame())
    assert list(means.loc["vader5"].index) == list(E.EVALUATIONS)
    assert means.loc[("vader5", "noisy"), E.GAP] == pytest.approx(3.0)
    assert means.loc[("vader5", "corrected"), E.GAP] == pytest.approx(1.5)
    assert means.loc[("vader5", "corrected"), "rank"] == pytest.approx(3.0)


def test_table4_figure_shows_measurable_true_and_rank_for_each_evaluation():
    runs = pd.concat([runs_frame(), runs_frame().assign(benchmark="rt_u5")], ignore_index=True)
    fig = E.table4_figure(E.table4_means(runs))
    assert len(fig.axes) == 2
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["measurable", "true"]  # Table 4's caption: measurable vs true accuracy
    for ax in fig.axes:
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        assert [t.split("\n")[0] for t in ticks] == list(E.EVALUATIONS)  # noisy, corrected, clean
        assert all("rank" in t for t in ticks)                           # and the selected run's rank
        assert len(ax.patches) == 2 * len(E.EVALUATIONS)
    assert "TweetNLP-5" in fig.axes[0].get_title() and "IMDB-5" in fig.axes[1].get_title()


def test_table4_long_keeps_only_true_accuracy_for_clean_and_meets_the_paper():
    ours = E.table4_long(E.table4_means(runs_frame()), {"vader5": "TweetNLP-5"}, "smoke")
    clean = ours[ours["eval_split"] == "clean"]
    assert list(clean["metric"]) == ["true"]
    assert len(ours) == 7
    table = compare_with_paper(ours, reported("lnlfn", "table4"), on=["dataset", "eval_split"])
    mine = table[table["dataset"] == "TweetNLP-5"]
    assert len(mine) == 7 and mine["ours"].notna().all()
    assert table[table["dataset"] == "Amazon-5"]["ours"].isna().all()


# ------------------------------------------------------------------------------------------ claims
def test_gap_claim_flips_at_half_the_noisy_gap():
    holds = E.end_to_end_claims(E.table4_means(runs_frame(corrected_gap=(1.0, 2.0))), benchmarks=["vader5"], skipped={})
    assert holds[0]["verdict"] == "yes" and holds[0]["detail"] == "|gap| 3.00 -> 1.50 points"
    fails = E.end_to_end_claims(E.table4_means(runs_frame(corrected_gap=(1.0, 2.2))), benchmarks=["vader5"], skipped={})
    assert fails[0]["verdict"] == "no"


def test_rank_claim_and_skipped_benchmarks():
    worse = E.table4_means(runs_frame(ranks=((2, 3), (4, 5), (1, 1))))
    records = E.end_to_end_claims(worse, benchmarks=["vader5", "amazon5"], skipped={"amazon5": "absent: no Amazon"})
    assert len(records) == 4
    rank = [r for r in records if "rank" in r["claim"] and "vader5" in r["claim"]][0]
    assert rank["verdict"] == "no" and rank["detail"] == "mean rank noisy 2.5, corrected 4.5, clean 1.0"
    assert all(r["verdict"] == "not run" and "absent" in r["detail"] for r in records if "amazon5" in r["claim"])
    worse_on_average = E.end_to_end_claims(E.table4_means(runs_frame()), benchmarks=["vader5"], skipped={})
    assert [r for r in worse_on_average if "rank" in r["claim"]][0]["verdict"] == "no"  # 3.0 > 2.5
    equal = E.table4_means(runs_frame(ranks=((2, 3), (3, 2), (1, 1))))
    assert [r for r in E.end_to_end_claims(equal, benchmarks=["vader5"], skipped={})
            if "rank" in r["claim"]][0]["verdict"] == "yes"


# ------------------------------------------------------------------------------------------ Table 1's analogue
def test_organic_candidates_are_unnoised_test_items_by_loss():
    ds = toy_ds()
    noised = NOISY != CLEAN
    scores = np.array([9.0, 9.0, 9.0, 9.0, 5.0, 0.1, 3.0, 0.2])  # over the scored items 4..11; item 8 is noised
    probs = np.tile([0.3, 0.7], (8, 1))
    table = E.organic_candidates(ds, NOISY, noised, scores, probs, 2)
    assert list(table["text"]) == ["text 10", "text 11"]  # test only, the noised item 8 left out, highest loss first
    assert list(table["label"]) == ["neg", "pos"] and list(table["model says"]) == ["pos", "pos"]
    assert table["p(label)"].tolist() == pytest.approx([np.exp(-3.0), np.exp(-0.2)])
    assert list(E.organic_candidates(None, [], [], [], [], 0).columns) == list(table.columns)


# ------------------------------------------------------------------------------------------ the page
def test_page_writes_comparison_and_claims_with_a_skipped_benchmark(tmp_path):
    page = E.EndToEnd("smoke", out_dir=tmp_path, settings={"benchmarks": ["vader5", "rt_u5"]})
    page.__dict__["data"] = ({}, {"rt_u5": "absent: no Rotten Tomatoes snippets"})
    page.__dict__["_computed"] = (runs_frame(), {})
    assert page.benchmarks_run == ["vader5"]
    page.table4(), page.compare_with_paper(), page.organic_errors()
    assert page.candidates.empty
    shown = page.claims()
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert [c["verdict"] for c in claims] == list(shown["verdict"]) == ["yes", "not run", "no", "not run"]
    comparison = pd.read_csv(tmp_path / "comparison.csv")
    assert comparison[comparison["dataset"] == "TweetNLP-5"]["ours"].notna().all()
    assert set(comparison["ours_on"].dropna()) == {"vader5 (smoke)"}
    page.figure()
    assert (tmp_path / "table4_bars.png").exists()
