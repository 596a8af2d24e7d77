"""Notebook 00's page (lnlfn.pages.data_and_noising): tables, the confusion figure and the claims on tiny inputs."""
from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from lnlfn.data import TextDataset
from lnlfn.pages import data_and_noising as P
from shared.noise.annotations import NoisedLabels

CLASSES = ("negative", "neutral", "positive")


def crowd(n_per_split=(40, 20, 20), n_annotators=5, dissenters=1, seed=0, name="vader"):
    """A dataset whose first ``dissenters`` annotators give a wrong label on every item, the others the gold."""
    rng = np.random.default_rng(seed)
    split = np.repeat(["train", "val", "test"], n_per_split)
    n = len(split)
    labels = rng.integers(0, 3, n)
    A = np.repeat(labels[:, None], n_annotators, axis=1)
    A[:, :dissenters] = (labels[:, None] + 1) % 3
    return TextDataset(name, [f"word{i}" for i in range(n)], labels, CLASSES, A, split,
                       np.array([str(i) for i in range(n)]), "synthetic")


def single_label(name="rt_snippets"):
    split = np.array(["train"] * 6 + ["test"] * 4)
    return TextDataset(name, [f"s{i}" for i in range(10)], np.arange(10) % 2, ("rotten", "fresh"), None, split,
                       np.array([str(i) for i in range(10)]), "synthetic")


def noised_labels(kinds_by_split, targets=None, order=("dissenting_worker", "dissenting_label")):
    """NoisedLabels with 10 items per split; ``kinds_by_split[s]`` lists the kinds of its first noised items."""
    split, kind = [], []
    for s, kinds in kinds_by_split.items():
        split += [s] * 10
        kind += list(kinds) + [""] * (10 - len(kinds))
    clean = np.zeros(len(split), dtype=np.int64)
    kind = np.array(kind)
    noisy = np.where(kind != "", 1, 0)
    targets = targets or {s: {k: list(kinds).count(k) for k in order} for s, kinds in kinds_by_split.items()}
    return NoisedLabels(noisy, clean, kind, np.array(split), {"order": list(order), "targets": targets})


def test_dataset_for_matches_the_name_or_a_variant_and_names_what_is_missing():
    ds, variant = crowd(), crowd(name="vader_small")
    assert P.dataset_for("vader5", {"vader": ds}) is ds
    assert P.dataset_for("vaderM", {"rt_snippets": single_label(), "vader_small": variant}) is variant
    with pytest.raises(KeyError, match="vader"):
        P.dataset_for("vader5", {"rt_snippets": single_label()})


def test_dataset_overview_has_a_row_per_dataset_with_splits_classes_and_annotators():
    table = P.dataset_overview({"vader": crowd(), "rt_snippets": single_label()})
    assert list(table["dataset"]) == ["vader", "rt_snippets"]
    assert list(table["annotators"]) == [5, 0]
    assert table.loc[0, "train"] == 40 and table.loc[1, "test"] == 4
    assert table.loc[1, "classes"] == "rotten 5, fresh 5"


def test_crowd_agreement_skips_single_label_data_and_counts_dissent():
    agree = P.crowd_agreement({"vader": crowd(dissenters=0), "rt_snippets": single_label()})
    assert list(agree["dataset"]) == ["vader"]
    row = agree.iloc[0]
    assert row["Fleiss kappa (complete items)"] == pytest.approx(1.0)
    assert row["items with a dissenting annotator"] == 0 and row["dissenting annotations per item"] == 0
    row = P.crowd_agreement({"vader": crowd(dissenters=2)}).iloc[0]
    assert row["Fleiss kappa (complete items)"] < 1
    assert row["items with a dissenting annotator"] == 1.0 and row["dissenting annotations per item"] == 2.0


def test_capacity_table_gives_a_share_per_split_and_kind():
    table = P.capacity_table({"vader": crowd(), "rt_snippets": single_label()}, ["vader5", "vaderM"], seed=0,
                             kinds=["dissenting_label", "crowd_majority"])
    assert set(table["split"]) == {"train", "val", "test"} and set(table["dataset"]) == {"vader"}
    # every item has one dissenting annotation, and a majority of 3 of 5 annotators (1 dissenting) is never wrong
    assert (table["Dissenting label"] == 1.0).all()
    assert (table["Crowd majority"] == 0.0).all()


def test_benchmark_counts_meet_the_official_targets_on_a_tiny_crowd():
    ds = crowd(n_per_split=(100, 40, 40))
    noised = P.make_benchmarks(["vader5"], {"vader": ds}, seed=0)
    counts = P.benchmark_counts(noised).set_index("split")
    assert list(counts.index) == ["train", "val", "test"] and set(counts["benchmark"]) == {"vader5"}
    # 5 % of 100: round(100 x 0.05 x 0.8) = 4 dissenting worker + round(1.0) = 1 dissenting label;
    # 5 % of 40: round(1.6) = 2 + round(0.4) = 0 (each kind rounded on its own, as the official noiser does)
    assert tuple(counts.loc["train", ["noised", "dissenting_worker", "dissenting_label"]]) == (5, 4, 1)
    assert tuple(counts.loc["val", ["noised", "dissenting_worker", "dissenting_label"]]) == (2, 2, 0)
    assert counts["dissenting_label"].dtype.kind == "i"
    assert P.benchmark_claims(noised)[0]["holds"] is True


def test_benchmark_counts_fill_the_kinds_a_benchmark_does_not_use_with_zero():
    noised = {"vader5": noised_labels({"train": ["dissenting_worker"]}),
              "vaderM": noised_labels({"train": ["crowd_majority"] * 2}, order=("crowd_majority",))}
    counts = P.benchmark_counts(noised).set_index("benchmark")
    assert counts.loc["vader5", "crowd_majority"] == 0 and counts.loc["vaderM", "crowd_majority"] == 2
    assert counts.loc["vaderM", "dissenting_worker"] == 0


def test_benchmark_claims_flip_when_a_split_falls_short_or_a_kind_is_synthetic():
    met = noised_labels({"train": ["dissenting_worker"] * 2, "test": ["dissenting_label"]})
    records = P.benchmark_claims({"vader5": met})
    assert [r["holds"] for r in records] == [True, True]
    assert "vader5: train 20.00%, test 10.00%" in records[0]["detail"]

    short = noised_labels({"train": ["dissenting_worker"]}, targets={"train": {"dissenting_worker": 2}})
    records = P.benchmark_claims({"vader5": short})
    assert records[0]["holds"] is False and "vader5 short: {'train': {'dissenting_worker': 1}}" in records[0]["detail"]

    # a benchmark noising every disagreement has no count to meet; a synthetic kind breaks the second claim
    synthetic = noised_labels({"train": ["uniform"]}, targets={"train": {"uniform": 5}}, order=("uniform",))
    records = P.benchmark_claims({"vaderM": synthetic})
    assert records[0]["holds"] is True and records[1]["holds"] is False and "uniform" in records[1]["detail"]


def test_noise_rates_are_percentages_keyed_by_the_paper_benchmark():
    rates = P.noise_rates({"vader5": noised_labels({"train": ["dissenting_worker"] * 3})}, "smoke")
    assert rates.to_dict("records") == [{"benchmark": "TweetNLP-5", "metric": "noise_rate", "value": 30.0,
                                         "ours_on": "vader5 (smoke)"}]


def test_noised_examples_show_gold_and_noisy_labels_and_the_votes():
    ds = crowd()
    noised = P.make_benchmarks(["vader5"], {"vader": ds}, seed=0)
    examples = P.noised_examples(noised, {"vader": ds}, per_benchmark=3)
    assert len(examples) == 3 and (examples["gold"] != examples["given (noisy)"]).all()
    assert all(v.count(" ") >= 1 for v in examples["annotator votes"])
    assert len(P.noised_examples(noised, {"vader": ds}, per_benchmark=50)) == int(noised["vader5"].noised.sum())


def test_confusion_shares_sum_to_one_on_the_noised_pairs_and_the_figure_has_a_panel_per_benchmark():
    out = noised_labels({"train": ["dissenting_worker"] * 4})
    M = P.confusion_shares(out, 3)
    assert M.sum() == pytest.approx(1.0) and M[0, 1] == pytest.approx(1.0)
    assert P.confusion_shares(noised_labels({"train": []}), 3).sum() == 0
    ds = crowd()
    fig = P.confusions_figure({"vader5": out, "vaderH5": out}, {"vader": ds})
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["vader5 (TweetNLP-5)", "vaderH5 (SNLI-5)"]


def test_page_writes_the_comparison_and_claims(tmp_path):
    page = P.DataAndNoising("smoke", settings={"benchmarks": ["vader5"]}, out_dir=tmp_path)
    page.__dict__["datasets"] = {"vader": crowd()}
    claims = page.claims()
    assert list(claims["verdict"]) == ["yes", "yes"]
    written = json.loads((tmp_path / "claims.json").read_text())
    assert [c["holds"] for c in written] == [True, True]
    comparison = pd.read_csv(tmp_path / "comparison.csv")
    # every paper benchmark is listed; ours only where a benchmark standing in for it was run
    assert list(comparison["benchmark"]) == ["TweetNLP-5", "TweetNLP-M", "SNLI-5"]
    assert list(comparison["ours"].notna()) == [True, False, False]
    shown = page.compare_with_paper()
    assert {"paper", "ours", "diff"} <= set(shown.data.columns) and "source" not in shown.data.columns
    # what ours was run on: a column, or said once in the caption when every row has the same
    assert "ours_on" in shown.data.columns or "vader5 (smoke)" in shown.caption
