"""Tables and claims of the NoisywikiHow pages, on small hand-made score tables."""
import numpy as np
import pandas as pd
import pytest

from noisywikihow import claims as C
from noisywikihow import hparams, tables
from noisywikihow.experiments import RunResult, RunSpec, Training


def score_frame(values: dict, selection="peak", seeds=(0,)) -> pd.DataFrame:
    """{(method, level): top1} -> a scores frame like experiments.scores."""
    rows = [{"method": m, "level": t, "seed": s, "selection": selection, "top1": v + s, "top5": v + 10 + s,
             "train_set": f"mix_{t:g}" if t else "clean"} for (m, t), v in values.items() for s in seeds]
    return pd.DataFrame(rows)


def test_accuracy_table_means_over_seeds_and_formats_cells():
    frame = score_frame({("base", 0.0): 60.0, ("base", 0.4): 50.0, ("seal", 0.0): 61.0, ("seal", 0.4): 52.0}, seeds=(0, 2))
    table = tables.accuracy_table(frame, "method")
    assert list(table.columns) == ["0%", "40%"] and list(table.index) == ["base", "seal"]
    assert table.loc["base", "40%"] == "51.00(61.00)"  # mean of seeds 0 and 2 (+0, +2)


def test_deltas_against_the_base_and_a_reference():
    frame = score_frame({("base", 0.1): 60.0, ("mixup", 0.1): 61.5, ("coteaching", 0.1): 59.0})
    d = tables.deltas(frame)
    assert d.loc["mixup", "10%"] == 1.5 and d.loc["coteaching", "10%"] == -1.0 and "base" not in d.index
    lt = score_frame({("ldam", 0.1): 62.0})
    assert tables.deltas(pd.concat([lt, frame[frame["method"] == "base"]])).loc["ldam", "10%"] == 2.0


def test_paper_rows_match_the_reported_tables_keys():
    from shared.report import compare_with_paper, reported

    frame = score_frame({("base", 0.0): 60.0, ("seal", 0.6): 50.0})
    ours = tables.paper_rows(frame, ["method", "level"], "toy")
    table = compare_with_paper(ours, reported("noisywikihow", "table8"), on=["method", "level"])
    row = table[(table["method"] == "seal") & (table["level"] == "0.6") & (table["metric"] == "top1")]
    assert float(row["paper"].iloc[0]) == 52.73 and float(row["ours"].iloc[0]) == 50.0
    assert table["ours"].notna().sum() == 4  # two runs x Top-1 / Top-5; the rest "not run"


def test_monotone_in_noise_tolerates_small_blips():
    assert C.monotone_in_noise(pd.Series({0.0: 60, 0.1: 60.8, 0.2: 58}))[0]
    holds, rise = C.monotone_in_noise(pd.Series({0.0: 60, 0.1: 61.5, 0.2: 58}))
    assert not holds and rise == pytest.approx(1.5)


def test_real_noise_claims_verdicts_and_not_run():
    values = {(m, t): v for m, base in [("base", 60), ("coteaching", 59), ("seal", 62)]
              for t, v in zip([0.0, 0.1, 0.2, 0.4, 0.6], [base, base - 1, base - 2, base - 5, base - 9])}
    verdicts = {c["claim"]: c["holds"] for c in C.lnl_claims(score_frame(values), "real")}
    assert verdicts["Every method degrades as real-world noise increases (1-point tolerance)"] is True
    assert verdicts["Co-teaching is no better than the base model at 40-60 % real noise (peak Top-1)"] is True
    assert verdicts["SEAL beats the base model at every level (the only method that helps consistently)"] is True
    without = score_frame({k: v for k, v in values.items() if k[0] != "coteaching"})
    verdicts = {c["claim"]: c["holds"] for c in C.lnl_claims(without, "real")}
    assert verdicts["Co-teaching is no better than the base model at 40-60 % real noise (peak Top-1)"] is None


def test_loss_separation_auroc_and_overlap():
    rng = np.random.default_rng(0)
    noisy = np.r_[np.zeros(500, bool), np.ones(500, bool)]
    apart = np.r_[rng.normal(0, 0.1, 500), rng.normal(3, 0.1, 500)]
    same = rng.normal(0, 1, 1000)
    assert C.loss_separation(apart, noisy)["auroc"] == 1.0 and C.loss_separation(apart, noisy)["overlap"] < 0.05
    mixed = C.loss_separation(same, noisy)
    assert 0.4 < mixed["auroc"] < 0.6 and mixed["overlap"] > 0.7
    assert np.isnan(C.loss_separation(same, np.zeros(1000, bool))["auroc"])


def test_curve_drop_and_synthetic_claims():
    epochs = np.arange(20)
    curves = pd.concat([
        pd.DataFrame({"kind": "real", "level": 0.6, "epoch": epochs, "test_acc": 0.60 + 0 * epochs}),
        pd.DataFrame({"kind": "symmetric", "level": 0.6, "epoch": epochs,
                      "test_acc": np.where(epochs < 5, 0.4 + 0.04 * epochs, 0.56 - 0.01 * (epochs - 4))}),
        pd.DataFrame({"kind": "symmetric", "level": 0.4, "epoch": epochs, "test_acc": 0.5 + 0 * epochs})])
    assert C.curve_drop(curves, "real", 0.6) == pytest.approx(0.0)
    assert C.curve_drop(curves, "symmetric", 0.6) == pytest.approx(100 * (0.56 - np.mean(0.56 - 0.01 * np.arange(11, 16))))
    stable = pd.concat([score_frame({("base", 0.4): 50, ("base", 0.6): 40, ("coteaching", 0.4): 55, ("coteaching", 0.6): 50},
                                    selection="stable")])
    separation = pd.DataFrame({"kind": ["real", "symmetric"], "auroc": [0.55, 0.95]})
    verdicts = {c["claim"][:30]: c["holds"] for c in C.synthetic_claims(stable, separation, curves)}
    assert all(verdicts.values()), verdicts


def test_run_result_selection_rules():
    history = pd.DataFrame({"epoch": range(6), "val_acc": [.1, .5, .4, .3, .2, .2], "test_acc": [.2, .4, .6, .3, .3, .3],
                            "test_top5": [.5, .9, .6, .6, .7, .7], "test_TC_acc": [.0, .1, .2, .3, .4, .5]})
    run = RunResult(RunSpec("mix_0.4"), history, np.zeros(3))
    assert run.score("peak") == pytest.approx({"top1": 60, "top5": 90})  # Top-1 and Top-5 peak independently
    assert run.score("val") == pytest.approx({"top1": 40, "top5": 90})  # the epoch of the best validation Top-1
    assert run.score("stable")["top1"] == pytest.approx(100 * np.mean([.4, .6, .3, .3, .3]))
    assert run.score("peak", "test_TC")["top1"] == pytest.approx(20)  # a source at the overall peak epoch


def test_published_hyperparameters_reach_the_methods():
    training = Training(epochs=10, sr_epochs=20, seal_rounds=4, seal_epochs=10)
    assert hparams.method_config("coteaching", "real", 0.4, training)[1]["ramp_epochs"] == 8
    name, kw, _ = hparams.method_config("coteaching", "symmetric", 0.6, training)
    assert name == "coteaching" and kw["ramp_epochs"] == 3 and kw["forget_rate"] == 0.6
    assert hparams.method_config("sr", "real", 0.2, training) == ("sr", {"tau": 0.05, "lam": 0.0}, 20)
    assert hparams.method_config("sr", "symmetric", 0.2, training)[1]["tau"] == 0.5
    assert hparams.method_config("cnlcu", "real", 0.2, training)[1]["tau_min"] == 0.3
    assert hparams.method_config("ldam", "real", 0.2, training)[1] == {"max_margin": 0.7, "scale": 7.0, "drw": False}
    assert hparams.method_config("seal", "real", 0.2, training) == ("seal", {"rounds": 4}, 10)
    assert hparams.grad_clip("base") == 3.0 and hparams.grad_clip("coteaching") is None
    assert hparams.eval_net("coteaching") == 0 and hparams.eval_net("base") is None


def test_claims_whose_runs_are_missing_are_not_run():
    only_base = score_frame({("base", 0.1): 60.0, ("base", 0.4): 55.0})
    verdicts = {c["claim"]: c["holds"] for c in C.lnl_claims(only_base, "symmetric")}
    assert verdicts["Under symmetric noise every method beats the base model at every level (Table 10)"] is None
    partial = score_frame({("base", 0.0): 60.0, ("base", 0.6): 50.0, ("mixup", 0.0): 61.0})  # mixup at 60 % not run
    verdicts = {c["claim"]: c["holds"] for c in C.lnl_claims(partial, "real")}
    assert verdicts["Widely used LNL methods often fail to beat the base model under real-world noise"] is None
    assert verdicts["Every method degrades as real-world noise increases (1-point tolerance)"] is None
    sets = pd.DataFrame([{"method": m, "train_set": t, "seed": 0, "selection": "peak", "top1": 70.0, "top5": 90.0}
                         for m in ("base", "mixup") for t in ("neighbor_0.1", "uncommon_0.1", "tail_0.1")
                         if (m, t) != ("mixup", "tail_0.1")])
    per_source = sets.assign(prefix="test_TC")
    verdicts = {c["claim"]: c["holds"] for c in C.source_claims(sets, per_source)}
    assert verdicts["Every method is least effective under TC noise (Fig. 5)"] is None


def test_table4_claims_need_the_language_models():
    frame = score_frame({("minilm-mlp", t): 70 - 10 * t for t in (0.0, 0.4)}).rename(columns={"method": "architecture"})
    verdicts = {c["claim"]: c["holds"] for c in C.architecture_claims(frame)}
    assert verdicts["RoBERTa and XLNet beat ALBERT at every noise level (Table 4)"] is None
    assert verdicts["BART is the most accurate model at 0-40 % noise (Table 4)"] is None
    plms = score_frame({(m, t): v - 10 * t for m, v in [("BART", 62), ("RoBERTa", 61), ("XLNet", 60), ("ALBERT", 55)]
                        for t in (0.0, 0.4)}).rename(columns={"method": "architecture"})
    verdicts = {c["claim"]: c["holds"] for c in C.architecture_claims(plms)}
    assert verdicts["RoBERTa and XLNet beat ALBERT at every noise level (Table 4)"] is True
    assert verdicts["BART is the most accurate model at 0-40 % noise (Table 4)"] is True


def test_figures_draw_ours_beside_the_papers(tmp_path):
    from noisywikihow import figures
    from shared.report import NotebookReport, reported

    report = NotebookReport("noisywikihow", "03_lnl_realworld", tmp_path / "out")
    frame = score_frame({(m, t): 60 - 10 * t for m in ("base", "seal") for t in (0.0, 0.4)})
    fig = figures.figure2(frame, reported("noisywikihow", "table8"), "real", report)
    assert [len(ax.lines) for ax in fig.axes] == [2, 7]  # ours: 2 methods; the paper: 7
    arch = frame.rename(columns={"method": "architecture"})
    assert len(figures.table4_figure(arch, reported("noisywikihow", "table4"), report).axes[1].lines) == 7
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {"figure2a.png", "figure2a.svg", "table4.png"}
