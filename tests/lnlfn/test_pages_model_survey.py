"""Notebook 02's page (lnlfn.pages.model_survey): the per-run records, Fig. 2's fits and figure, the families'
summary and Figs. 7/10, Table 10 and the claims, on tiny synthetic sweeps."""
from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from lnlfn.pages import model_survey as P
from lnlfn.scoring import HeadConfig, SweepResult, fme, loss_detection

N, K = 60, 2


def labels_and_errors(seed=0):
    rng = np.random.default_rng(seed)
    clean = rng.integers(0, K, N)
    err = np.zeros(N, bool)
    err[:6] = True
    noisy = np.where(err, 1 - clean, clean)
    return noisy, clean, err


def probs_for(clean, sharpness):
    """(N, K) probabilities that put ``sharpness`` on the clean class (so noisy labels get a high loss)."""
    P_ = np.full((len(clean), K), (1 - sharpness) / (K - 1))
    P_[np.arange(len(clean)), clean] = sharpness
    return P_


def sweep(n_runs=4, seed=0):
    """A sweep whose runs get sharper and make fewer mistakes (separate the errors better) as their validation
    loss falls with h; the last run ranks the 6 errors first."""
    noisy, clean, err = labels_and_errors(seed)
    rng = np.random.default_rng(seed + 1)
    probs = []
    for h in range(n_runs):
        p = probs_for(clean, 0.6 + 0.1 * h)
        wrong = rng.choice(np.arange(6, N), max(0, 6 - 2 * h), replace=False)
        p[wrong] = probs_for(1 - clean[wrong], 0.9)  # the weaker runs are confidently wrong on more clean items
        probs.append(p)
    configs = tuple(HeadConfig("logreg", C=float(10 ** h)) for h in range(n_runs))
    val_acc = np.array([0.7 + 0.05 * h for h in range(n_runs)])
    val_loss = np.array([0.9 - 0.1 * h for h in range(n_runs)])
    return SweepResult(configs, np.stack(probs), noisy, val_acc, val_loss), configs, err, clean


def families(seeds=(0, 1), k=8, label="MiniLM"):
    out = {}
    for seed in seeds:
        s, _, err, clean = sweep(seed=seed)
        base_probs = probs_for(clean, 0.55)
        base_probs[6:16] = base_probs[6:16, ::-1]  # the baseline is wrong on ten clean items: a worse ranking
        base = loss_detection(base_probs, s.labels)
        out[P.BASELINE, seed] = P.Family(base, err)
        out[label, seed] = P.Family(fme(s, k=3), err, s, k, clean)
    return out


def runs_frame(slope=-0.3, seeds=(0, 1), n=10):
    """Runs whose AUPR and precision fall linearly in log validation loss (plus a small wiggle)."""
    rows = []
    for seed in seeds:
        for i in range(n):
            loss = 0.5 + 0.05 * i
            value = 0.5 + slope * np.log(loss) + 0.001 * ((i + seed) % 3)
            rows.append({"model": "MiniLM", "seed": seed, "run": f"r{i}", "val_loss": loss, "val_accuracy": 0.8,
                         "aupr": value, "precision_at_cl_k": value, "k": 8, "noisy_test_acc": 0.7,
                         "clean_test_acc": 0.75})
    return pd.DataFrame(rows)


def test_sweep_rows_score_each_run_on_the_test_errors():
    s, configs, err, clean = sweep()
    rows = P.sweep_rows(s, configs, err, clean, 6, model="MiniLM", seed=3)
    assert [r["run"] for r in rows] == [c.name for c in configs]
    best = rows[-1]  # sharpest run, nobody unsure: the 6 errors have the highest loss
    assert best["precision_at_cl_k"] == 1.0 and best["aupr"] == pytest.approx(1.0)
    assert best["clean_test_acc"] == 1.0 and best["noisy_test_acc"] == pytest.approx(1 - 6 / N)
    assert rows[0]["precision_at_cl_k"] < 1.0
    assert {r["seed"] for r in rows} == {3} and {r["k"] for r in rows} == {6}


def test_run_summary_has_a_row_per_model_and_metric():
    summary = P.run_summary(runs_frame())
    assert list(summary["metric"]) == P.RUN_METRICS and set(summary["model"]) == {"MiniLM"}
    assert (summary["runs"] == 20).all()
    assert summary.set_index("metric").loc["val_accuracy", "mean"] == pytest.approx(0.8)


def test_loss_fits_recover_the_log_linear_relation():
    fits = P.loss_fits(runs_frame(slope=-0.3))
    assert fits["aupr"]["r"] < -0.99 and fits["aupr"]["slope"] == pytest.approx(-0.3, abs=0.01)
    assert P.loss_fits(runs_frame(slope=0.3))["precision_at_cl_k"]["r"] > 0.99


def test_fig2_draws_each_seed_and_the_labelled_fit():
    runs = runs_frame()
    fig = P.fig2_figure(runs, P.loss_fits(runs))
    left, right = fig.axes
    assert len(left.collections) == 2 and len(right.collections) == 2  # one scatter per noise seed
    assert [line.get_label() for line in left.get_lines()] == ["least-squares fit in log loss"]
    assert [t.get_text() for t in left.get_legend().get_texts()] == ["noise seed 0", "noise seed 1",
                                                                     "least-squares fit in log loss"]
    assert left.get_title().startswith("precision at CL's threshold: r = -1.00") and right.get_xscale() == "log"


def test_family_summary_averages_seeds_and_the_figure_draws_each_family():
    fam = families()
    summary = P.family_summary(fam)
    assert list(summary.index) == [P.BASELINE, "MiniLM"]
    assert summary.loc["MiniLM", "auroc"] > summary.loc[P.BASELINE, "auroc"]
    fig = P.fig7_10_figure(fam, summary, {P.BASELINE: 0, "MiniLM": 22_000_000}, seed=0, benchmark="vader5")
    ax7, ax10 = fig.axes
    assert [t.get_text() for t in ax7.get_legend().get_texts()] == [P.BASELINE, "MiniLM", "chance"]
    assert len(ax10.collections) == 2 and [t.get_text() for t in ax10.texts] == [P.BASELINE, "MiniLM"]
    assert ax10.collections[0].get_offsets()[0][0] == 1  # no pretraining is drawn at 1 on the log axis


def test_table10_rows_average_the_top_runs_and_ensemble_them():
    fam = families(seeds=(0, 1))
    rows = P.table10_rows(fam, "MiniLM", [0, 1], 3)
    assert list(rows["method"].value_counts().sort_index()) == [6, 2]  # 3 runs x 2 seeds; 1 ensemble x 2 seeds
    assert list(rows.columns) == ["method", "seed", *P.TABLE10_METRICS]
    assert rows[["precision", "recall", "f1", "cl_precision"]].apply(lambda c: c.between(0, 1)).all().all()
    means = P.table10_means(rows)
    assert list(means.index) == ["averaged", "ensembled"] and "seed" not in means.columns
    summary = P.table10_summary(rows)
    assert len(summary) == 2 * len(P.TABLE10_METRICS) and list(summary.columns) == ["method", "metric", "mean", "sd"]
    long = P.table10_long(means, "TweetNLP-5", "vader5 (smoke)")
    assert len(long) == 16 and set(long["method"]) == {"averaged", "ensembled"}


def _claims(r_aupr=-0.8, r_prec=-0.6, auroc=(0.90, 0.92), f1=(0.37, 0.38)):
    fits = {"aupr": {"r": r_aupr}, "precision_at_cl_k": {"r": r_prec}}
    summary = pd.DataFrame({"auroc": [auroc[0], auroc[1]]}, index=[P.BASELINE, "MiniLM"])
    t10 = pd.DataFrame({"f1": [f1[0], f1[1]]}, index=["averaged", "ensembled"])
    return [r["holds"] for r in P.survey_claims(fits, 40, summary, "MiniLM", t10, "vader5")]


def test_claims_flip_at_their_thresholds():
    assert _claims() == [True, True, True, True]
    assert _claims(r_aupr=-0.5, r_prec=-0.49) == [False, False, True, True]  # r < -0.5 is strict
    assert _claims(auroc=(0.92, 0.92)) == [True, True, False, True]
    assert _claims(f1=(0.40, 0.38)) == [True, True, True, True]  # within 0.02 of the averaged F1
    assert _claims(f1=(0.40, 0.379)) == [True, True, True, False]
    assert _claims(r_aupr=float("nan")) == [None, True, True, True]  # r of a constant series: not run


def test_page_compares_and_claims_from_its_runs(tmp_path):
    page = P.ModelSurvey("smoke", out_dir=tmp_path)
    page.__dict__["_available"] = ({"minilm": {"label": "MiniLM", "params": 22_000_000}}, {})
    page.runs, page.families = runs_frame(), families()
    claims = page.claims()
    assert list(claims["verdict"][:2]) == ["yes", "yes"] and len(claims) == 4
    assert json.loads((tmp_path / "claims.json").read_text())[0]["detail"] == "r = -1.00 over 20 runs"
    comparison = pd.read_csv(tmp_path / "comparison.csv")
    assert list(comparison["item"].unique()) == ["Fig. 2", "Table 10"] and comparison["ours"].notna().all()
    assert comparison.loc[0, "ours"] == pytest.approx(page.fits["precision_at_cl_k"]["r"] ** 2)
    assert (tmp_path / "families.csv").exists() and (tmp_path / "table10_runs.csv").exists()
    shown = page.compare_with_paper()
    assert {"paper", "ours", "diff"} <= set(shown.data.columns) and "source" not in shown.data.columns
    # what ours was run on: a column, or said once in the caption when every row has the same
    assert "ours_on" in shown.data.columns or "vader5 (smoke)" in shown.caption


def test_models_table_says_which_models_are_skipped_and_why(tmp_path):
    page = P.ModelSurvey("smoke", out_dir=tmp_path, settings={"models": {
        "a": {"label": "A", "params": 10}, "b": {"label": "B", "params": 20}}})
    page.__dict__["_available"] = ({"a": {"label": "A", "params": 10}},
                                   {"b": "absent: model folder not found.\n  Looked for: /x/models/b"})
    table = page.models_table().data
    assert list(table["used"]) == ["yes", "no: absent: model folder not found. Looked for: /x/models/b"]
    assert page.main_label == "A"
