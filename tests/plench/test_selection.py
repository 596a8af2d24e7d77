"""Plench's criteria: CR / AA / OA on hand-made logits, the four selection rules and the results table."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from plench import selection
from shared.errors import ConfigError

NAN = float("nan")


# -------------------------------------------------------------------------------------------- metrics
def hand_made():
    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 0.0, 0.5]])  # predictions 0, 1, 0
    s = torch.tensor([[1, 1, 0], [1, 0, 1], [0, 1, 1]])
    y = torch.tensor([0, 2, 2])
    return logits, s, y


def test_metrics_on_hand_made_logits():
    logits, s, y = hand_made()
    assert selection.covering_rate(logits, s) == pytest.approx(1 / 3)  # only row 0 predicts inside S
    assert selection.oracle_accuracy(logits, y) == pytest.approx(1 / 3)
    # Row 0: p renormalised within S = {0, 1} gives e^2 / (e^2 + e) = e / (1 + e) for the prediction; rows 1-2
    # predict outside S and score 0.
    expected = (math.e / (1 + math.e)) / 3
    assert selection.approximated_accuracy(logits, s, compat=False) == pytest.approx(expected, abs=1e-7)
    assert selection.approximated_accuracy(logits, s, compat=True) == pytest.approx(expected, abs=1e-7)


def test_aa_is_zero_when_every_prediction_is_outside_s():
    logits = torch.tensor([[5.0, 0.0, 1.0], [0.0, 2.0, -1.0]])
    s = torch.tensor([[0, 1, 1], [1, 0, 1]])
    for compat in (True, False):
        assert selection.approximated_accuracy(logits, s, compat=compat) == pytest.approx(0.0, abs=1e-9)


def test_aa_code_form_scores_an_underflowed_row_one():
    """The official ``1 - sum_{j != pred} c_j`` differs from Eq. 6 only when p underflows to 0 on all of S."""
    logits = torch.tensor([[0.0, 0.0, 200.0]])  # float32 softmax: p = (0, 0, 1) exactly
    s = torch.tensor([[1, 1, 0]])
    assert selection.approximated_accuracy(logits, s, compat=False) == 0.0
    assert selection.approximated_accuracy(logits, s, compat=True) == 1.0


def test_covering_rate_bounds_oracle_accuracy_when_s_contains_y():
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        n, q = 50, 6
        y = torch.randint(q, (n,), generator=g)
        s = (torch.rand(n, q, generator=g) < 0.3).long()
        s[torch.arange(n), y] = 1
        logits = torch.randn(n, q, generator=g)
        cr, oa = selection.covering_rate(logits, s), selection.oracle_accuracy(logits, y)
        assert cr >= oa
        assert cr - oa == pytest.approx(float(((s[torch.arange(n), logits.argmax(1)] == 1)
                                               & (logits.argmax(1) != y)).double().mean()))


def test_nan_logits_predict_the_first_nan_index_and_only_aa_is_nan():
    logits = torch.tensor([[NAN, NAN, NAN], [1.0, NAN, 5.0], [1.0, 2.0, 0.0]])
    assert logits.argmax(1).tolist() == [0, 1, 1]  # torch: the first NaN, class 0 for an all-NaN row
    s = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    y = torch.tensor([0, 2, 1])
    assert selection.covering_rate(logits, s) == pytest.approx(2 / 3)
    assert selection.oracle_accuracy(logits, y) == pytest.approx(2 / 3)
    assert math.isnan(selection.approximated_accuracy(logits, s))


# -------------------------------------------------------------------------------------------- selection
def records(rows) -> pd.DataFrame:
    """Rows (hparams_seed, step, OA, CR, AA, test) of one experiment and trial seed."""
    frame = pd.DataFrame(rows, columns=["hparams_seed", "step", "val_accuracy", "val_covering_rate",
                                        "val_approximated_acc", "test_acc"])
    return frame.assign(dataset="d", algorithm="PRODEN", arch="mlp", steps=3, compat=True, trial_seed=0)


RUNS = [
    (0, 0, 1.00, 1.00, 1.00, 0.99),  # step 0: never selectable
    (0, 1, 0.60, 0.70, 0.50, 0.61), (0, 2, 0.80, 0.75, 0.65, 0.81), (0, 3, 0.70, 0.90, 0.60, 0.71),
    (1, 1, 0.50, 0.72, 0.70, 0.52), (1, 2, 0.65, 0.80, 0.55, 0.66), (1, 3, 0.75, 0.85, 0.52, 0.76),
]


def test_each_criterion_picks_its_checkpoint():
    table = records(RUNS).sample(frac=1.0, random_state=1)
    expected = {
        "OA": 0.76,  # last checkpoints: 0.70 (seed 0) vs 0.75 (seed 1)
        "OA&ES": 0.81,  # best OA anywhere after step 0: seed 0, step 2
        "CR": 0.71,  # best CR: 0.90 at seed 0, step 3
        "AA": 0.52,  # best AA: 0.70 at seed 1, step 1
    }
    for name, test_acc in expected.items():
        assert selection.select(table, name)["test_acc"] == test_acc, name
    assert selection.CRITERIA["OA"].rule == "last"
    assert {selection.CRITERIA[c].rule for c in ("CR", "AA", "OA&ES")} == {"early_stopping"}


def test_ties_go_to_the_default_configuration_or_to_plenchs_last_run():
    tied = records([(0, 1, 0.8, 0.9, 0.5, 0.10), (1, 1, 0.8, 0.9, 0.5, 0.20), (2, 1, 0.8, 0.3, 0.5, 0.30)])
    assert selection.select(tied, "CR", "neg_inf")["hparams_seed"] == 0
    assert selection.select(tied, "CR", "plench")["hparams_seed"] == 1  # sorted(...)[::-1]: last maximal


def test_nan_first_checkpoint_under_both_policies():
    rows = [(0, 1, 0.5, 0.5, NAN, 0.10), (0, 2, 0.5, 0.5, 0.99, 0.20),
            (1, 1, 0.5, 0.5, 0.60, 0.30), (1, 2, 0.5, 0.5, 0.70, 0.40)]
    table = records(rows)
    # neg_inf: NaN is -inf, seed 0's 0.99 wins.
    assert selection.select(table, "AA", "neg_inf")["test_acc"] == 0.20
    # plench: seed 0's run keeps its leading NaN (Python max), which then loses across runs.
    assert selection.select(table, "AA", "plench")["test_acc"] == 0.40
    all_nan = records([(0, 1, 0.5, 0.5, NAN, 0.10), (0, 2, 0.5, 0.5, 0.9, 0.20),
                       (1, 1, 0.5, 0.5, NAN, 0.30), (1, 2, 0.5, 0.5, 0.8, 0.40)])
    chosen = selection.select(all_nan, "AA", "plench")  # every run NaN-first: the last run's NaN checkpoint
    assert (chosen["hparams_seed"], chosen["step"]) == (1, 1)
    assert selection.select(all_nan, "AA", "neg_inf")["test_acc"] == 0.20


def test_select_refuses_mixed_experiments():
    table = pd.concat([records(RUNS), records(RUNS).assign(trial_seed=1)])
    with pytest.raises(ConfigError, match="trial_seed"):
        selection.select(table, "CR")
    with pytest.raises(ConfigError, match="criterion"):
        selection.select(records(RUNS), "ACC")


def test_results_table_averages_selected_scores_over_trials():
    trials = []
    for trial, shift in ((0, 0.0), (1, 0.04), (2, -0.02)):
        frame = records(RUNS).assign(trial_seed=trial)
        trials.append(frame.assign(test_acc=frame["test_acc"] + shift))
    table = selection.results_table(pd.concat(trials), how="se")
    cr = table[table["criterion"] == "CR"].iloc[0]
    values = 100 * (0.71 + np.array([0.0, 0.04, -0.02]))
    assert cr["per_trial"] == pytest.approx(tuple(values))
    assert cr["mean"] == pytest.approx(values.mean()) and cr["n_trials"] == 3
    assert cr["err"] == pytest.approx(np.std(values) / np.sqrt(3))
    std_table = selection.results_table(pd.concat(trials), how="std")
    assert std_table[std_table["criterion"] == "CR"].iloc[0]["err"] == pytest.approx(np.std(values))
    assert table["criterion"].tolist() == list(selection.CRITERIA)


def test_runs_with_different_hparams_overrides_are_different_experiments():
    plain = records(RUNS).assign(hparams_overrides="")
    warm = records(RUNS).assign(hparams_overrides='{"warm_up": 60}', test_acc=lambda f: f["test_acc"] - 0.5)
    table = selection.results_table(pd.concat([plain, warm]))
    cr = table[table["criterion"] == "CR"].set_index("hparams_overrides")["mean"]
    assert cr[""] == pytest.approx(71.0) and cr['{"warm_up": 60}'] == pytest.approx(21.0)
    with pytest.raises(ConfigError, match="hparams_overrides"):
        selection.select(pd.concat([plain, warm]), "CR")


def test_criterion_summary_reproduces_the_specs_derived_anchors_from_the_papers_tables():
    from shared.report import reported

    paper = reported("plench", "results").query("metric == 'test_acc'")
    anchors = {  # derived from the paper's Tables 1-4: mean gaps, rho(CR, OA&ES), rows with CR > AA
        "Table 1": (0.85, 5.50, 2.43, 0.990, "21/26"), "Table 2": (1.58, 8.34, 1.89, 0.982, "24/26"),
        "Table 7": (1.73, 3.58, 1.39, 0.917, "16/20"), "Table 14": (2.92, 7.74, 1.36, 0.600, "12/20"),
    }
    for item, (cr, aa, oa, rho, wins) in anchors.items():
        s = selection.criterion_summary(paper[paper["item"] == item])
        assert s["mean(OA&ES - CR)"] == pytest.approx(cr, abs=0.006) and s["mean(OA&ES - AA)"] == pytest.approx(aa, abs=0.006)
        assert s["mean(OA&ES - OA)"] == pytest.approx(oa, abs=0.006) and s["rho(CR, OA&ES)"] == pytest.approx(rho, abs=0.0006)
        assert s["CR > AA"] == wins
    with pytest.raises(ConfigError, match="missing"):
        selection.criterion_summary(paper[(paper["item"] == "Table 1") & (paper["criterion"] != "AA")])
