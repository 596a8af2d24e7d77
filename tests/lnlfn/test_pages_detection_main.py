"""lnlfn.pages.detection_main: Table 3's rows, Figs. 1 and 6, Tables 8-9, the comparison and the claims, on
synthetic sweeps of a few dozen items (no notebook, no encoder)."""
from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from lnlfn.experiments import detection_row
from lnlfn.pages import detection_main as D
from lnlfn.scoring import Detection, HeadConfig, SweepResult
from shared.report import compare_with_paper, reported


def toy_sweep(seed: int, n: int = 90, k: int = 3, m: int = 4, noise: float = 0.15):
    """A sweep of ``m`` heads over ``n`` items whose given labels are wrong for about ``noise`` of them; the
    heads lean towards the clean label. Returns (sweep, is_error)."""
    rng = np.random.default_rng(seed)
    clean = rng.integers(0, k, n)
    err = rng.random(n) < noise
    err[:3] = True  # at least a few errors
    labels = np.where(err, (clean + 1) % k, clean)
    probs = []
    for h in range(m):
        logits = rng.normal(0, 1, (n, k))
        logits[np.arange(n), clean] += 1.5 + 0.3 * h
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs.append(e / e.sum(axis=1, keepdims=True))
    configs = tuple(HeadConfig("logreg", C=1.0 + h) for h in range(m))
    sweep = SweepResult(configs, np.stack(probs), labels, rng.random(m), rng.random(m), None, np.arange(n))
    return sweep, err


def toy_detections(seed: int):
    sweep, err = toy_sweep(seed)
    base, _ = toy_sweep(seed + 100)  # a weaker, unrelated "baseline" over the same number of items
    base = SweepResult(base.configs[:2], base.probs[:2], sweep.labels, base.val_accuracy[:2], base.val_loss[:2],
                       None, np.arange(len(err)))
    dets = D.methods_of(sweep, base, top_k=3, filter_by="prune_by_noise_rate", rank_by="self_confidence")
    return dets, err, sweep


def flagged(name: str, order, n_flagged: int, n: int) -> Detection:
    """A flagged-set detection hypothesizing ``order[:n_flagged]`` in that order."""
    scores = np.zeros(n)
    scores[np.asarray(order)] = np.arange(len(order), 0, -1, dtype=float)
    mask = np.zeros(n, dtype=bool)
    mask[np.asarray(order)[:n_flagged]] = True
    return Detection(name, scores, np.zeros(n, dtype=int), np.full((n, 2), 0.5), mask)


def ranking(name: str, order, n: int) -> Detection:
    scores = np.zeros(n)
    scores[np.asarray(order)] = np.arange(len(order), 0, -1, dtype=float)
    return Detection(name, scores, np.zeros(n, dtype=int), np.full((n, 2), 0.5))


# ------------------------------------------------------------------------------------------ Table 3's rows
def test_methods_are_table3s_rows_and_fml_row_is_the_mean_of_the_top_runs():
    dets, err, sweep = toy_detections(0)
    assert tuple(dets) == D.METHODS
    assert dets["CL"].flagged is not None and dets["FME+CL"].flagged is not None
    runs = D.fml_ranks(sweep, 3)
    assert [r.heads[0] for r in runs] == list(sweep.order()[:3])
    rows = {r["method"]: r for r in D.method_rows(dets, err, runs)}
    assert set(rows) == set(D.METHODS)
    parts = [detection_row(r, err) for r in runs]
    assert rows["FML"]["aupr"] == pytest.approx(np.mean([p["aupr"] for p in parts]))
    assert rows["FML"]["aupr"] != pytest.approx(detection_row(dets["FML"], err)["aupr"])  # not the best run alone
    assert rows["FME"] == {"method": "FME", "errors": int(err.sum()), **detection_row(dets["FME"], err)}
    assert rows["CL"]["n_flagged"] == dets["CL"].n_flagged


def test_table3_means_over_seeds_and_wide_layout():
    rows = [{"benchmark": b, "seed": s, "method": m, "errors": 10, "aupr": 0.1 * i + s, "p_at_err": 0.5,
             "r_at_2err": 0.7, "n_flagged": 100 + s}
            for b in ("vader5", "vaderM") for s in (0, 1) for i, m in enumerate(D.METHODS)]
    means = D.table3_means(pd.DataFrame(rows))
    assert means.loc[("vader5", "FME"), "aupr"] == pytest.approx(0.3 + 0.5)
    assert means.loc[("vaderM", "CL"), "n_flagged"] == pytest.approx(100.5)
    wide = D.table3_wide(means)
    assert list(wide["method"]) == list(D.METHODS)
    assert "aupr vader5" in wide.columns and "r_at_2err vaderM" in wide.columns
    assert wide.set_index("method").loc["FML", "aupr vaderM"] == pytest.approx(0.2 + 0.5)


# ------------------------------------------------------------------------------------------ Figs. 1 and 6
def legend_labels(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_figure1_plots_and_labels_every_series_its_caption_names():
    dets, err, _ = toy_detections(1)
    fig = D.pr_figure(dets, err, "Fig. 1")
    # the LLM (FML, FME), the word-vector baseline (H&G), CL and the CL overlay, each with its AUPR
    assert [label.split(" (AUPR")[0] for label in legend_labels(fig)] == ["H&G", "CL", "FML", "FME", "FME+CL"]
    assert len(fig.axes[0].lines) == len(dets)
    styles = {line.get_label().split(" (")[0]: line.get_linestyle() for line in fig.axes[0].lines}
    assert styles["FME+CL"] == ":" and styles["FME"] == "-"


def test_figure6_plots_both_overlays_its_caption_names_and_stops_at_cls_count():
    dets, err, _ = toy_detections(2)
    with_both = D.with_fml_cl(dets, filter_by="prune_by_noise_rate")
    assert list(with_both) == ["H&G", "CL", "FML", "FML+CL", "FME", "FME+CL"]
    assert with_both["FML+CL"].flagged is not None
    k_max = with_both["CL"].n_flagged
    curves, table = D.truncated_curves(with_both, err, k_max, n_est=int(err.sum()) + 5)
    fig = D.truncated_figure(curves, "Fig. 6", "estimated recall")
    # the rankings and both overlays of the paper's caption ("FML+CL and FME+CL produce fewer items")
    assert legend_labels(fig) == ["H&G", "CL", "FML", "FML+CL", "FME", "FME+CL"]
    assert list(table["method"]) == list(with_both)
    for method, det in with_both.items():
        stop = min(k_max, len(det.ranked()))
        assert table.set_index("method").loc[method, "items checked"] == stop
        assert len(curves[method][0].recall) == stop
    assert (table["estimated recall at the end"] <= 1).all()


def test_truncated_recall_is_over_the_estimate_not_the_true_count():
    n = 20
    err = np.zeros(n, dtype=bool)
    err[[0, 1]] = True
    dets = {"FME": ranking("FME", range(n), n), "CL": flagged("CL", range(n), 4, n)}
    _, table = D.truncated_curves(dets, err, k_max=4, n_est=10)
    row = table.set_index("method").loc["FME"]
    assert row["items checked"] == 4
    assert row["estimated recall at the end"] == pytest.approx(2 / 10)
    assert row["precision at the end"] == pytest.approx(2 / 4)


# ------------------------------------------------------------------------------------------ Tables 8-9
def test_top_item_counts_at_cls_and_the_overlays_count():
    n = 12
    err = np.zeros(n, dtype=bool)
    err[[0, 1, 2, 5]] = True
    dets = {"CL": flagged("CL", [0, 3, 4, 5], 4, n), "FML": ranking("FML", [0, 1, 3, 2], n),
            "FME": ranking("FME", [0, 1, 2, 3, 4], n), "FME+CL": flagged("FME+CL", [0, 2, 7], 3, n)}
    table8, table9 = D.top_item_counts({0: (dets, err), 1: (dets, err)})
    assert list(table8.index) == ["CL", "FML", "FME"]
    assert table8.loc["CL", "k"] == 4
    assert table8.loc["CL", ["correctable", "non_error"]].tolist() == [2, 2]   # items 0, 5 | 3, 4
    assert table8.loc["FME", ["correctable", "non_error"]].tolist() == [3, 1]  # 0, 1, 2 | 3
    assert table9.loc["FME", "k"] == 3
    assert table9.loc["FME", "correctable"] == 3                                 # FME's top 3: 0, 1, 2
    assert table9.loc["FME+CL", ["correctable", "non_error"]].tolist() == [2, 1]  # 0, 2 | 7
    assert table9.loc["FME", "jaccard"] == pytest.approx(2 / 4)                   # {0,1,2} vs {0,2,7}


# ------------------------------------------------------------------------------------------ paper vs ours
def test_comparison_rows_meet_the_papers_tables():
    means = D.table3_means(pd.DataFrame(
        [{"benchmark": "vader5", "seed": 0, "method": m, "errors": 5, "aupr": 0.4, "p_at_err": 0.5, "r_at_2err": 0.6,
          "n_flagged": 10} for m in D.METHODS]))
    ours3 = D.table3_long(means, {"vader5": "TweetNLP-5"}, "smoke")
    table3 = compare_with_paper(ours3, reported("lnlfn", "table3"), on=["dataset", "method"])
    mine = table3[table3["dataset"] == "TweetNLP-5"]
    assert len(mine) and mine["ours"].notna().all()  # every paper number of TweetNLP-5 has ours beside it
    assert set(mine["ours_on"]) == {"vader5 (smoke)"}
    assert table3[table3["dataset"] == "SNLI-5"]["ours"].isna().all()  # not run: NaN, kept for the scorecard

    table8 = pd.DataFrame({"k": [4.0] * 3, "correctable": [1.0, 2.0, 3.0], "non_error": [3.0, 2.0, 1.0]},
                          index=pd.Index(["CL", "FML", "FME"], name="method"))
    table9 = pd.DataFrame({"k": [3.0] * 2, "correctable": [2.0, 1.0], "non_error": [1.0, 2.0], "jaccard": [0.6, 0.6]},
                          index=pd.Index(["FME", "FME+CL"], name="method"))
    ours89 = D.counts_long(table8, table9, "TweetNLP-M", "vaderM (smoke)")
    assert list(ours89["item"]).count("Table 8") == 6 and list(ours89["item"]).count("Table 9") == 5
    counts = compare_with_paper(ours89, reported("lnlfn", "detection_counts"), on=["item", "dataset", "method"])
    assert len(counts) == 11 and counts["ours"].notna().all()
    assert counts.set_index(["item", "method", "metric"]).loc[("Table 9", "FME vs FME+CL", "jaccard"), "ours"] == 0.6


# ------------------------------------------------------------------------------------------ claims
def claim_means(fme: float, fml: float, hg: float, benches=("vader5", "vaderM")) -> pd.DataFrame:
    rows = [{"benchmark": b, "method": m, "aupr": v, "p_at_err": 0.0, "r_at_2err": 0.0, "n_flagged": 1}
            for b in benches for m, v in (("H&G", hg), ("CL", 0.1), ("FML", fml), ("FME", fme), ("FME+CL", 0.1))]
    return pd.DataFrame(rows).set_index(["benchmark", "method"])


def claims_of(means, *, jaccard=0.7, above=(True,) * 10, skipped=None, benchmarks=("vader5", "vaderM", "vaderH5")):
    table9 = pd.DataFrame({"jaccard": [jaccard, jaccard]}, index=["FME", "FME+CL"])
    return D.detection_claims(means, table9, benchmarks=list(benchmarks), fm_beats_baseline=["vader5", "vaderH5"],
                              skipped=skipped or {}, n_seeds=2, counts_benchmark="vaderM",
                              fig1=("vader5", 0, np.array(above)))


def by_statement(records, text: str) -> list[dict]:
    return [r for r in records if text in r["claim"]]


def test_ensembling_claim_flips_at_fml_minus_002():
    holds = by_statement(claims_of(claim_means(fme=0.39, fml=0.40, hg=0.3)), "at least FML's - 0.02 on vader5")
    assert holds[0]["verdict"] == "yes"
    fails = by_statement(claims_of(claim_means(fme=0.37, fml=0.40, hg=0.3)), "at least FML's - 0.02 on vader5")
    assert fails[0]["verdict"] == "no" and fails[0]["detail"] == "FME 0.370, FML 0.400"


def test_baseline_claim_flips_and_a_skipped_benchmark_is_not_run():
    records = claims_of(claim_means(fme=0.4, fml=0.4, hg=0.39), skipped={"vaderH5": "absent: no VADER file\n  /x"})
    vader5 = by_statement(records, "above the non-pretrained baseline's on vader5")[0]
    assert vader5["verdict"] == "yes" and "mean of 2 seeds" in vader5["detail"]
    vaderh5 = by_statement(records, "above the non-pretrained baseline's on vaderH5")[0]
    assert vaderh5["holds"] is None and "absent" in vaderh5["detail"]
    assert by_statement(claims_of(claim_means(fme=0.4, fml=0.4, hg=0.41)),
                        "baseline's on vader5")[0]["verdict"] == "no"


def test_a_benchmark_neither_run_nor_skipped_and_missing_numbers_are_not_run():
    records = claims_of(claim_means(fme=0.4, fml=0.4, hg=0.3))  # vaderH5: no numbers, no reason
    assert by_statement(records, "FML's - 0.02 on vaderH5")[0]["verdict"] == "not run"
    nan = claims_of(claim_means(fme=float("nan"), fml=0.4, hg=0.3))
    assert by_statement(nan, "FML's - 0.02 on vader5")[0]["verdict"] == "not run"


def test_jaccard_and_fig1_claims():
    means = claim_means(fme=0.4, fml=0.4, hg=0.3)
    assert by_statement(claims_of(means, jaccard=0.5), "Jaccard >= 0.5")[0]["verdict"] == "yes"
    assert by_statement(claims_of(means, jaccard=0.49), "Jaccard >= 0.5")[0]["verdict"] == "no"
    one_below = (True,) * 9 + (False,)
    fig1 = by_statement(claims_of(means, above=one_below), "Fig. 1")[0]
    assert fig1["verdict"] == "no" and fig1["detail"] == "above at 9/10 recall levels"
    assert by_statement(claims_of(means), "Fig. 1")[0]["verdict"] == "yes"


def test_fig1_above_compares_precision_at_the_recall_grid():
    n = 40
    err = np.zeros(n, dtype=bool)
    err[:10] = True
    good = ranking("FME", range(n), n)                       # every error first
    bad = ranking("H&G", list(range(10, n)) + list(range(10)), n)  # every error last
    dets = {"FME": good, "H&G": bad}
    assert D.fig1_above(dets, err).all()
    assert not D.fig1_above({"FME": bad, "H&G": good}, err).any()
    assert D.precision_at_recall(good, err)[0] == 1.0


# ------------------------------------------------------------------------------------------ the page
def test_page_assembles_tables_comparison_and_claims_from_its_detections(tmp_path):
    page = D.DetectionMain("smoke", out_dir=tmp_path)
    page.__dict__["data"] = ({}, {"vaderH5": "absent: SNLI-5's stand-in is not here"})
    page.__dict__["detections"] = {(b, s): toy_detections(10 * i + s) for i, b in enumerate(("vader5", "vaderM"))
                                   for s in page.cfg.seeds}
    assert page.benchmarks_run == ["vader5", "vaderM"]
    assert set(page.results["benchmark"]) == {"vader5", "vaderM"} and len(page.results) == 2 * 2 * len(D.METHODS)
    assert page.counts_benchmark == "vaderM"
    page.table3(), page.table8(), page.table9(), page.truncated_table(), page.compare_with_paper()
    assert set(page.comparison["item"]) == {"Table 3", "Table 8", "Table 9"}
    assert page.comparison["ours"].notna().all()  # the displayed comparison: only what we ran
    shown = page.claims()
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert list(shown["verdict"]) == [c["verdict"] for c in claims]
    verdicts = {c["claim"]: c["verdict"] for c in claims}
    assert verdicts["FME's AUPR is at least FML's - 0.02 on vaderH5 (SNLI-5 analogue)"] == "not run"
    assert len(claims) == 3 + 2 + 2
    comparison = pd.read_csv(tmp_path / "comparison.csv")
    assert len(comparison) > len(page.comparison)  # the paper's columns we did not run, kept for the scorecard
    fig = page.figure6()
    assert {"FML+CL", "FME+CL"} <= set(legend_labels(fig))
    assert (tmp_path / "fig6_truncated.png").exists()
