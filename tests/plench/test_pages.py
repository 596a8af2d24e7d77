"""Plench's page objects (plench.pages), the theory notebook's tables (plench.theory) and its claims: small inputs."""
import json

import numpy as np
import pandas as pd
import pytest

from plench import theory
from plench.claims import claim_records, theory_claims
from plench.pages import Datasets, ImageBenchmark, SelectionTheory, TabularBenchmark, ValidationUse


# ------------------------------------------------------------------------------------------------ 01: theory
@pytest.fixture(scope="module")
def small_theory():
    problems = theory.problems(4000, 6, [0.2], seed=0)
    eq8 = theory.eq8_table(problems, [0.0, 0.2, 0.4], seed=0)
    return problems, eq8


def test_theory_tables_have_a_row_per_generator_and_classifier(small_theory):
    problems, eq8 = small_theory
    assert list(problems) == ["USS", "FPS p=0.2"]
    assert len(eq8) == 6 and list(eq8["redirected"][:3]) == [0.0, 0.2, 0.4]
    assert eq8.groupby("generator")["ACC"].apply(lambda a: a.is_monotonic_decreasing).all()
    bound = theory.bound_table(eq8, problems, 4000)
    assert bound["holds"].dtype == bool and (bound["CR - ACC"] == bound["CR"] - bound["ACC"]).all()
    thm2 = theory.theorem2_table(problems, [0.5, 1, 2])
    assert len(thm2) == 6 and thm2.groupby("generator")["ACC"].nunique().eq(1).all()  # same predictions
    counter = theory.class_dependent_counterexample(4000, 6, seed=0)
    assert list(counter["classifier"].str[:2]) == ["A:", "B:"]


def _theory_inputs(z=0.5, over=0.05, calibrated_z=0.3, a_acc=0.3, b_acc=0.4):
    eq8 = pd.DataFrame({"generator": ["USS"] * 3, "ACC": [0.5, 0.4, 0.3], "CR": [0.7, 0.6, 0.5], "z": [z, 0.1, -0.2]})
    bound = eq8.assign(**{"CR - ACC": 0.2, "holds": True})
    thm2 = pd.DataFrame({"generator": ["USS"] * 3, "power": [0.5, 1, 2], "AA - ACC": [-0.05, 0.001, over],
                         "z": [-8, calibrated_z, 8]})
    counter = pd.DataFrame({"classifier": ["A", "B"], "ACC": [a_acc, b_acc], "CR": [0.8, 0.6]})
    return eq8, bound, thm2, counter


def test_theory_claims_hold_and_flip_with_their_inputs():
    held = theory_claims(*_theory_inputs())
    assert [c.holds for c in held] == [True] * 6
    assert held[1].detail == "1 generators x 3 classifiers"
    assert theory_claims(*_theory_inputs(z=3.5))[0].holds is False  # Eq. 8: |z| >= 3
    assert theory_claims(*_theory_inputs(calibrated_z=3.1))[3].holds is False
    assert theory_claims(*_theory_inputs(over=-0.01))[4].holds is False  # over-confident but below accuracy
    assert theory_claims(*_theory_inputs(a_acc=0.5))[5].holds is False  # A is the more accurate one
    eq8, bound, thm2, counter = _theory_inputs()
    eq8.loc[2, "CR"] = 0.9  # CR no longer ranks like accuracy
    assert theory_claims(eq8, bound, thm2, counter)[1].holds is False
    records = claim_records(held)
    assert records[0]["verdict"] == "yes" and set(records[0]) == {"claim", "holds", "verdict", "detail"}


def test_theory_page_writes_its_tables_figure_and_claims(tmp_path):
    page = SelectionTheory("smoke", settings={"n_samples": 3000, "fps_p": [0.3], "powers": [0.5, 1, 2]},
                           out_dir=tmp_path)
    assert len(page.eq8) == 2 * 5 and len(page.thm2) == 2 * 3
    fig = page.figure()
    assert [len(ax.get_lines()) for ax in fig.axes] == [3, 3]  # a line per generator (+ diagonal / zero line)
    shown = page.eq8_table()
    assert "generator" in shown.data.columns and shown.data.shape[0] == 10
    claims = page.claims()
    assert len(claims) == 6
    written = json.loads((tmp_path / "claims.json").read_text())
    assert [c["claim"] for c in written] == list(claims["claim"])
    assert {p.name for p in tmp_path.iterdir()} >= {"eq8.csv", "theorem2.csv", "class_dependent_counterexample.csv",
                                                    "theory.png", "claims.json", "comparison.csv"}


# ------------------------------------------------------------------------------------------------ 00: datasets
def test_datasets_page_compares_tables_5_6_and_8_and_reports_crowd_claims_not_run(tmp_path):
    page = Datasets("smoke", settings={"datasets": ["digits-USS"], "crowd": []}, out_dir=tmp_path)
    assert page.skipped().data.empty
    assert list(page.stats["Dataset"]) == ["digits-USS"]
    assert page.figure2() is None  # no crowd dataset: Figure 2 is skipped
    page.compare_table5()
    six, eight = page.compare_table6(), page.compare_table8()
    assert len(six.data) == 8 and "algorithm" not in six.data.columns
    assert {"parameter", "hparam", "metric", "paper", "ours", "diff"} <= set(eight.data.columns)
    assert page.table8_differences().data["differences"].str.contains("paper: 5000").any()
    claims = page.claims()
    assert (claims["verdict"] == "not run").all()
    comparison = pd.read_csv(tmp_path / "comparison.csv")
    assert set(comparison["item"]) == {"Table 5", "Table 6", "Table 8"}
    assert (comparison.loc[comparison["item"] == "Table 8", "ours"].notna()).all()


def test_table8_follows_the_compat_setting(tmp_path):
    code = Datasets("smoke", settings={"datasets": ["digits-USS"], "crowd": []}, out_dir=tmp_path / "code")
    paper = Datasets("smoke", settings={"datasets": ["digits-USS"], "crowd": [], "compat": False},
                     out_dir=tmp_path / "paper")
    valen = lambda p: p.hyperparameters.set_index(["condition", "hparam"]).loc[("VALEN", "warm_up")]  # noqa: E731
    assert valen(code)["default (ours)"] == "1000" and not valen(code)["agrees"]
    assert valen(paper)["default (ours)"] == "5000" and valen(paper)["agrees"]


# ------------------------------------------------------------------------------------------------ 02: a tiny sweep
TINY_TABULAR = {"datasets": ["digits-USS"], "algorithms": ["PRODEN", "CC"], "fixed_variants": [], "n_hparams": 1,
                "n_trials": 1, "steps": 10, "checkpoint_freq": 5, "hparams_overrides": {}, "batched": False,
                "speedup": {"dataset": "digits-USS", "algorithm": "PRODEN", "configs": 2, "steps": 6,
                            "batch_sizes": [32]}}


def test_tabular_page_selects_exactly_its_runs_and_reports_missing_algorithms_as_not_run(tmp_path):
    page = TabularBenchmark("smoke", settings=TINY_TABULAR, out_dir=tmp_path, device="cpu")
    counts = page.run().data
    assert counts.loc[0, "total"] == 2 and counts.loc[0, "ran"] == 2
    assert set(page.table["algorithm"]) == {"PRODEN", "CC"} and len(page.table) == 2 * 4
    wide = page.results().data
    assert len(wide) == 2 and ("digits-USS", "CR") in wide.columns
    comparison = page.compare_with_paper().data
    assert set(comparison["dataset"]) == {"Lost"} and set(comparison["algorithm"]) == {"PRODEN", "CC"}
    assert {"paper", "ours", "diff"} <= set(comparison.columns) and "item" not in comparison.columns
    claims = page.claims().set_index("claim")["verdict"]
    uss = "Under USS (Theorem 1) CR selects within 3 points of OA & ES for PRODEN, CC and Forward"
    assert claims[uss] == "not run"  # Forward was not run
    assert claims.str.fullmatch("yes|no|not run").all()
    again = TabularBenchmark("smoke", settings=TINY_TABULAR, out_dir=tmp_path, device="cpu")
    assert again.run().data.loc[0, "skipped"] == 2  # resumed: nothing trained twice
    assert np.allclose(again.table["mean"], page.table["mean"])


# ------------------------------------------------------------------------------------------------ 03, 04: tiny runs
def test_image_page_draws_figure4_for_the_algorithms_run_and_leaves_the_rest_not_run(tmp_path):
    settings = {"datasets": ["PLDigits-Vaguest"], "archs": ["digits_cnn"], "algorithms": ["PRODEN", "FREDIS"],
                "n_hparams": 1, "n_trials": 1, "steps": 6, "checkpoint_freq": 3, "batch_size": 32,
                "hparams_overrides": {"FREDIS": {"update_interval": 1}},
                "fig4": {"dataset": None, "arch": "digits_cnn"},
                "compat_check": {"dataset": "PLDigits-Vaguest", "algorithms": [], "steps": 2}}
    page = ImageBenchmark("smoke", settings=settings, out_dir=tmp_path, device="cpu")
    assert page.run().data.loc[0, "total"] == 2
    assert list(page.results().data[("algorithm", "")]) == ["PRODEN", "FREDIS"]
    fig = page.figure4()
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["PRODEN", "FREDIS"]
    assert set(page.compare_with_paper().data["dataset"]) == {"PLCIFAR10-Vaguest"}
    claims = page.claims().set_index("claim")["verdict"]
    assert claims.filter(like="PiCO, ABLE, CRDPLL").eq("not run").all()  # none of them was run
    assert claims.filter(like="FREDIS also takes").isin(["yes", "no"]).all()
    assert claims.filter(like="official update").eq("not run").all()  # the compat check trained nothing


def test_a_stacking_image_sweep_times_figure4_on_runs_of_its_own(tmp_path):
    """With ``batched`` the sweep's runs share their stack's step, so Figure 4 trains each algorithm's default
    configuration alone (``fig4.steps`` steps) and reads those; the cost plan lists them too."""
    from plench import cost

    settings = {"datasets": ["PLDigits-Vaguest"], "archs": ["digits_cnn"], "algorithms": ["PRODEN", "GA"],
                "n_hparams": 2, "n_trials": 1, "steps": 6, "checkpoint_freq": 3, "batch_size": 32, "batched": True,
                "fig4": {"dataset": None, "arch": "digits_cnn", "steps": 4},
                "compat_check": {"dataset": "PLDigits-Vaguest", "algorithms": [], "steps": 2}}
    page = ImageBenchmark("smoke", settings=settings, out_dir=tmp_path, device="cpu")
    assert page.run().data.loc[0, "total"] == 4
    stacked = page.records.groupby("algorithm")["group_size"].max()
    assert stacked["PRODEN"] == 2 and stacked["GA"] == 1  # GA (gradient ascent, its own step) trains alone
    timed = page.timed_records
    assert set(timed["group_size"]) == {1} and set(timed["steps"]) == {4} and set(timed["hparams_seed"]) == {0}
    assert [t.get_text() for t in page.figure4().axes[0].get_yticklabels()] == ["PRODEN", "GA"]
    planned = cost.plan("03_image", page.cfg, {"profile": "smoke", "data_dir": None})
    runs = {r.identity.rsplit("/", 1)[1] for r in planned if r.kind == "plench-run"}
    assert runs == set(page.records["run"]) | set(timed["run"])
    assert len(runs) == 4 + 2  # the timed runs are 4 steps long: none is one of the sweep's 6-step runs


def test_validation_use_page_runs_both_arms_and_sets_them_side_by_side(tmp_path):
    settings = {"datasets": ["PLDigits-Vaguest"], "algorithms": ["PRODEN"], "n_hparams": 2, "n_trials": 1,
                "steps": 10, "checkpoint_freq": 5, "batched": False}
    page = ValidationUse("smoke", settings=settings, out_dir=tmp_path, device="cpu")
    counts = page.run().data.set_index("arm")
    assert counts.loc["validation", "total"] == 2 and counts.loc["training", "total"] == 1
    differences = page.differences
    assert len(differences) == 1 and differences.loc[0, "training - validation"] == pytest.approx(
        differences.loc[0, "training"] - differences.loc[0, "validation"])
    comparison = page.compare_with_paper().data
    assert list(comparison["algorithm"]) == ["PRODEN"] and comparison["paper"].notna().all()
    claims = page.claims()
    assert len(claims) == 1 and claims.loc[0, "verdict"] in ("yes", "no")
    assert (tmp_path / "fig1_arms.csv").exists() and (tmp_path / "fig1_differences.csv").exists()
