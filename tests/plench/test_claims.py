"""plench.claims on tiny synthetic tables: each claim holds, fails, or is "not run" when its inputs were not run."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from plench import claims
from plench.data import PLLDataset, class_share_in_test
from plench.reports import crowd_statistics
from plench.selection import CRITERIA
from shared.report import NotebookReport


def dataset(name, *, full_sets=False, n=60, q=4, seed=0, crowd=False):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % q
    S = np.zeros((n, q), np.uint8)
    S[np.arange(n), y] = S[np.arange(n), (y + 1) % q] = 1  # two labels each, no set equal to the label set
    if full_sets:
        S[:3] = 1
    meta = {}
    if crowd:
        sets = (rng.random((n, 3, q)) < 0.3).astype(np.uint8)
        sets[np.arange(n), :, y] = 1
        meta["annotator_sets"] = sets
    return PLLDataset(name, np.zeros((n, 2), np.float32), S, y.astype(np.int64), tuple(map(str, range(q))), "tabular",
                      None, 100, meta)


def table(values, compat=True, arch="mlp"):
    """results_table-like rows: values = {(dataset, algorithm): mean or {criterion: mean}}."""
    rows = []
    for (name, algorithm), v in values.items():
        per = v if isinstance(v, dict) else {c: v for c in CRITERIA}
        rows += [{"dataset": name, "algorithm": algorithm, "criterion": c, "mean": m, "compat": compat, "arch": arch}
                 for c, m in per.items()]
    return pd.DataFrame(rows)


def verdicts(found):
    return [None if c.holds is None else bool(c.holds) for c in found]


# ------------------------------------------------------------------------------------------------ 02
def test_tabular_claims_hold_fail_and_are_not_run_when_an_algorithm_is_missing():
    agg, vag = dataset("X-Aggregate", full_sets=True), dataset("X-Vaguest", seed=1)
    share = class_share_in_test(agg, 0, 2)
    main = {("X-Aggregate", a): share for a in claims.COLLAPSING} | {
        ("X-Aggregate", "Forward"): 80.0, ("X-Aggregate", "SCL_NL"): 85.0, ("X-Aggregate", "NN"): 50.0,
        ("X-Vaguest", "PRODEN"): 70.0, ("X-Vaguest", "EXP"): 65.0,  # MCL_GCE not run on Vaguest
        ("X-Vaguest", "CC"): {"CR": 60.0, "AA": 50.0, "OA": 60.0, "OA&ES": 61.0}}  # GA not run at all
    fixed = {("X-Aggregate", a): 70.0 for a in claims.COLLAPSING}
    found = claims.tabular_claims(pd.concat([table(main), table(fixed, compat=False)]), {"X-Aggregate": agg,
                                                                                         "X-Vaguest": vag},
                                  compat=True, n_trials=2)
    by = {c.statement.split(" (")[0].split(":")[0]: c for c in found}
    assert by["On X-Aggregate"].holds is True
    assert by["With the fixed formulas they train on X-Aggregate"].holds is True
    assert by["On X-Vaguest"].holds is None and "MCL-GCE not among the algorithms run" in by["On X-Vaguest"].detail
    noisy = by["On the noisy X-Vaguest, AA selects worse than CR for most algorithms"]
    assert noisy.holds is False and noisy.detail == "1/3"  # PRODEN and EXP: AA = CR; only CC: AA < CR
    gap = by["NN and GA are far below Forward and SCL-NL on X-Aggregate"]
    assert gap.holds is None and gap.detail.startswith("not run: GA")


def test_tabular_claims_fail_on_a_non_collapse_and_the_fixed_variants_are_not_run_without_them():
    agg = dataset("X-Aggregate", full_sets=True)
    main = {("X-Aggregate", a): 55.0 for a in claims.COLLAPSING}
    found = claims.tabular_claims(table(main), {"X-Aggregate": agg}, compat=True, n_trials=1)
    assert verdicts(found)[:2] == [False, None]
    assert "the fixed EXP, MCL-GCE, MCL-MSE were not run" in found[1].detail
    uss = claims.tabular_claims(table({("digits-USS", a): {"CR": 80.0, "OA&ES": 85.0} for a in ("PRODEN", "CC", "Forward")}),
                                {"digits-USS": dataset("digits-USS")}, compat=True, n_trials=1)
    statements = [c.statement for c in uss]
    assert verdicts(uss)[statements.index("Under USS (Theorem 1) CR selects within 3 points of OA & ES for PRODEN, CC "
                                          "and Forward")] is False


def test_batching_claim_judges_only_the_batch_sizes_the_rule_batches():
    speed = pd.DataFrame({"batch_size": [32, 64, 128], "batched_by_auto": [True, True, False],
                          "speedup": [1.6, 1.3, 0.8], "runs": 8, "steps": 200, "algorithm": "PRODEN",
                          "dataset": "PLDigits-Vaguest", "device": "cpu", "threads": 1})
    claim = claims.batching_claim(speed)
    assert claim.holds is True and "batch size 128: 0.80x (run one by one)" in claim.detail
    assert claims.batching_claim(speed.assign(speedup=[1.6, 0.9, 2.0])).holds is False
    assert claims.batching_claim(speed.assign(batched_by_auto=False)).holds is None


# ------------------------------------------------------------------------------------------------ 00
def test_dataset_claims_with_both_crowd_versions():
    agg, vag = dataset("C-Aggregate", crowd=True), dataset("C-Vaguest", crowd=True, seed=1)
    rows = np.arange(len(vag.y))
    vag.S[rows, vag.y] = 0  # every Vaguest set misses the true label
    vag.S[rows, (vag.y + 2) % 4] = 1
    stats = crowd_statistics(["C-Aggregate", "C-Vaguest"], {"C-Aggregate": agg, "C-Vaguest": vag})
    found = claims.dataset_claims(stats)
    assert [c.statement for c in found][2:4] == [f"{n}'s flipping matrix is far from uniform (off-diagonal max/min > 2)"
                                                 for n in ("C-Aggregate", "C-Vaguest")]
    assert all(c.holds is not None for c in found)
    assert found[4].holds is True  # Vaguest's diagonal is 0


def test_dataset_claims_without_crowd_data_are_not_run_with_the_reason():
    palm = {"Lost": dataset("Lost")}
    stats = crowd_statistics([], palm)  # settings {"crowd": []}: the PALM files only
    found = claims.dataset_claims(stats)
    assert verdicts(found) == [None] * 5 and len(found) == 5
    assert "PLCIFAR10_Aggregate not in settings['crowd']" in found[0].detail
    assert stats.skip_reason() is not None
    # the crowd named, but its data absent: the reason is the loader's
    stats = crowd_statistics(["PLCIFAR10_Aggregate", "PLCIFAR10_Vaguest"], palm,
                             {"PLCIFAR10_Aggregate": "data not found: x", "PLCIFAR10_Vaguest": "data not found: y"})
    found = claims.dataset_claims(stats)
    assert verdicts(found) == [None] * 5 and "PLCIFAR10_Vaguest data not found: y" in found[4].detail
    # one version only: the statements about the other are not run, the rest are checked
    agg = dataset("C-Aggregate", crowd=True)
    found = claims.dataset_claims(crowd_statistics(["C-Aggregate"], {"C-Aggregate": agg}))
    assert verdicts(found)[0] is not None and verdicts(found)[1] is None and verdicts(found)[3:] == [None, None]


def test_crowd_statistics_needs_annotator_sets_and_at_most_two_versions():
    from shared.errors import ConfigError

    with pytest.raises(ConfigError, match="no per-annotator candidate sets"):
        crowd_statistics(["Lost"], {"Lost": dataset("Lost")})
    with pytest.raises(ConfigError, match="at most 2"):
        crowd_statistics(["a", "b", "c"], {})


# ------------------------------------------------------------------------------------------------ 03
def costs(algorithms, seconds, source="cpu_max_rss"):
    return pd.DataFrame({"algorithm": algorithms, "step_time_median_s": seconds, "peak_mem_gb": 1.0,
                         "mem_source": source})


def compat_check(uniform_compat=True, uniform_fixed=False):
    return pd.DataFrame({"algorithm": ["ALIM", "ALIM"], "compat": [True, False], "steps": 20,
                         "curr_iter": [0, 20], "max |w - s/|S||": [0.0, 0.2],
                         "uniform": [uniform_compat, uniform_fixed]})


def test_image_claims_not_run_for_missing_algorithms_and_memory_on_a_cpu():
    agg, vag = dataset("PLDigits-Aggregate", full_sets=True), dataset("PLDigits-Vaguest", seed=1)
    share = class_share_in_test(agg, 0, 1)
    values = {("PLDigits-Aggregate", a): share for a in ("EXP", "MCL_GCE")} | {  # MCL_MSE not run
        ("PLDigits-Vaguest", "EXP"): 60.0, ("PLDigits-Vaguest", "MCL_GCE"): 60.0, ("PLDigits-Vaguest", "MCL_MSE"): 60.0,
        ("PLDigits-Vaguest", "PRODEN"): 58.0, ("PLDigits-Aggregate", "CC"): 40.0}  # PRODEN not run on Aggregate
    found = claims.image_claims(table(values, arch="digits_cnn"), costs(["PRODEN", "PiCO", "DIRK"], [0.01, 0.03, 0.02]),
                                compat_check(), {"PLDigits-Aggregate": agg, "PLDigits-Vaguest": vag},
                                archs=["digits_cnn"], n_trials=1)
    by = {c.statement: c for c in found}
    collapse = next(c for s, c in by.items() if s.startswith("On PLDigits-Aggregate"))
    assert collapse.holds is None and "MCL-MSE" in collapse.detail
    assert next(c for s, c in by.items() if s.startswith("On PLDigits-Vaguest")).holds is True
    competitive = {s.split(" with")[0]: c for s, c in by.items() if s.startswith("PRODEN is competitive")}
    assert competitive["PRODEN is competitive on PLDigits-Aggregate"].holds is None
    assert competitive["PRODEN is competitive on PLDigits-Vaguest"].holds is True
    time = by["PiCO, ABLE, CRDPLL, DIRK, ALIM and PiCO+ each take more time per step than PRODEN (Fig. 4)"]
    assert time.holds is True and "not run: ABLE, CRDPLL, ALIM, PiCO+" in time.detail
    assert by["FREDIS also takes more time per step than PRODEN (Fig. 4 groups it with the costly methods)"].holds is None
    assert by["PiCO, ABLE, CRDPLL, DIRK, ALIM and PiCO+ each need more GPU memory than PRODEN (Fig. 4b)"].holds is None
    assert verdicts(found)[-2:] == [True, True]
    gpu = claims.image_claims(table(values, arch="digits_cnn"), costs(["PRODEN", "PiCO"], [0.01, 0.03], "cuda_max_allocated"),
                              compat_check(True, True), {"PLDigits-Vaguest": vag}, archs=["digits_cnn"], n_trials=1)
    assert verdicts(gpu)[-3:] == [False, True, False]  # equal memory; the fixed update did not move


# ------------------------------------------------------------------------------------------------ 04
def test_validation_use_claims_are_not_run_for_a_dataset_without_results():
    differences = pd.DataFrame({"dataset": ["A", "A", "A"], "algorithm": ["PRODEN", "CC", "PC"],
                                "training - validation": [3.0, -1.0, 2.0]})
    found = claims.validation_use_claims(differences, ["A", "B"])
    assert verdicts(found) == [True, None] and found[0].detail.startswith("2/3")
    assert "no algorithm was run on B" in found[1].detail


def test_record_claims_writes_not_run_as_such(tmp_path):
    report = NotebookReport("plench", "test_claims", tmp_path)
    claims.record_claims(report, [claims.Claim("a", np.bool_(True), ""), claims.Claim("b", None, "not run: x")])
    frame = report.finish()
    assert frame["verdict"].tolist() == ["yes", "not run"]
