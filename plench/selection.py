"""Plench's model-selection criteria (Section 3) and its results tables.

Metrics of a model on a partial-label split, from its logits ``z`` (n, q), candidate sets ``s`` (n, q, 0/1)
and, for the oracle only, true labels ``y`` (n,); predictions are ``argmax_j z_j``:

- ``covering_rate`` (CR, Eq. 3): the fraction of predictions inside the candidate set.
- ``approximated_accuracy`` (AA, Eq. 6): the posterior mass of the predicted label renormalised within S.
- ``oracle_accuracy`` (OA, Eq. 7): ordinary accuracy against the hidden true labels.

A row with NaN logits predicts torch's ``argmax``: the index of its first NaN (class 0 when the whole row
is NaN), so CR and OA stay finite and AA is NaN, as in the official code.

The four criteria (``CRITERIA``) map a metric column of the run records to a checkpoint rule: OA may only
look at a run's last checkpoint; CR, AA and "OA & ES" pick the best checkpoint. ``select`` applies one to
the runs of one (dataset, algorithm, trial seed); ``results_table`` gives mean ± error over trial seeds.
"""
from __future__ import annotations

from typing import NamedTuple

import pandas as pd
import torch
import torch.nn.functional as F

from shared import selection as generic
from shared.errors import ConfigError, unknown_choice


def _as_float(t) -> torch.Tensor:
    t = torch.as_tensor(t)
    return t if t.is_floating_point() else t.float()


def covering_rate(logits, s) -> float:
    """CR: ``mean_i s[i, argmax z_i]`` for logits (n, q) and candidate sets s (n, q)."""
    logits, s = _as_float(logits), _as_float(s)
    pred = logits.argmax(1)
    return float(s[torch.arange(len(s)), pred].double().mean())


def approximated_accuracy(logits, s, *, compat: bool = True) -> float:
    """AA with ``p = softmax(z)`` and ``c = p*s / (sum_j p_j s_j + 1e-12)`` (n, q), computed in the logits' dtype.

    ``compat=False``: Eq. 6, ``mean_i c[i, argmax z_i]`` (0 when the prediction is outside S).
    ``compat=True``: the official code's form ``mean_i (1 - sum_{j != argmax z_i} c_ij)``. The two agree up to
    ~1e-12 while ``sum_j p_j s_j`` is not tiny; they part when every candidate's probability underflows to 0
    (a confident prediction outside S, e.g. a logit gap above ~104 in float32): then ``c`` is all zero and
    the code scores the row 1 instead of 0.
    """
    logits, s = _as_float(logits), _as_float(s).to(_as_float(logits).dtype)
    masked = F.softmax(logits, dim=1) * s
    c = masked / (masked.sum(1, keepdim=True) + 1e-12)
    pred = logits.argmax(1)
    rows = torch.arange(len(c))
    if compat:
        others = torch.ones_like(c)
        others[rows, pred] = 0
        per_row = 1 - (others * c).sum(1)
    else:
        per_row = c[rows, pred]
    return float(per_row.double().mean())


def oracle_accuracy(logits, y) -> float:
    """OA: ``mean_i I(argmax z_i = y_i)``."""
    pred = _as_float(logits).argmax(1)
    return float((pred == torch.as_tensor(y).to(pred.device)).double().mean())


class Criterion(NamedTuple):
    metric: str  # record column
    rule: str  # "early_stopping" (best checkpoint) or "last"
    label: str  # the paper's column header


CRITERIA: dict[str, Criterion] = {
    "CR": Criterion("val_covering_rate", "early_stopping", "w/ CR"),
    "AA": Criterion("val_approximated_acc", "early_stopping", "w/ AA"),
    "OA": Criterion("val_accuracy", "last", "w/ OA"),
    "OA&ES": Criterion("val_accuracy", "early_stopping", "w/ OA & ES"),
}
# Record columns that tell one experiment (one table cell, before the trial seeds) from another.
EXPERIMENT_KEYS = ("dataset", "algorithm", "arch", "steps", "compat", "hparams_overrides")


def _criterion(name: str) -> Criterion:
    if name not in CRITERIA:
        raise unknown_choice("criterion", name, CRITERIA)
    return CRITERIA[name]


def _run_column(records: pd.DataFrame) -> str:
    return "run" if "run" in records.columns else "hparams_seed"


def select(records: pd.DataFrame, criterion: str, nan_policy: str = "neg_inf") -> pd.Series:
    """The checkpoint record ``criterion`` selects among the runs (hparams seeds) of one experiment and trial seed.

    As ``collect_results.py``: step-0 records are dropped; within a run the rule picks a checkpoint, then the
    run with the best value wins; the answer's ``test_acc`` is the selected score. Runs are ordered by
    ``hparams_seed`` and checkpoints by step. ``nan_policy="plench"`` reproduces the official semantics
    exactly (a NaN first checkpoint wins its run; across runs NaN is -inf and ties go to the *last* maximal
    hparams seed). ``nan_policy="neg_inf"`` counts NaN as -inf and breaks ties towards the first maximum,
    i.e. the lowest hparams seed (the default configuration is hparams seed 0).
    """
    crit = _criterion(name=criterion)
    if nan_policy not in generic.NAN_POLICIES:
        raise unknown_choice("nan_policy", nan_policy, generic.NAN_POLICIES)
    keys = [k for k in (*EXPERIMENT_KEYS, "trial_seed") if k in records.columns]
    mixed = [k for k in keys if records[k].nunique(dropna=False) > 1]
    if mixed:
        raise ConfigError(f"select() takes the records of one experiment and trial seed, but {mixed} vary; "
                          "use results_table() for many, or filter the records first")
    records = records[records["step"] != 0].sort_values(["hparams_seed", "step"], kind="stable")
    if records.empty:
        raise ConfigError("no checkpoint after step 0 to select from; train for more than one step")
    tie = "plench" if nan_policy == "plench" else "first"
    return generic.select_checkpoint(records, crit.metric, crit.rule, nan_policy=nan_policy, tie=tie,
                                     run=_run_column(records))


def selected_scores(records: pd.DataFrame, nan_policy: str = "neg_inf") -> pd.DataFrame:
    """One row per (experiment, trial seed, criterion): the selected checkpoint's test accuracy, validation value,
    hparams seed and step, and ``n_configs``, the number of hparams seeds it was selected from."""
    keys = [k for k in (*EXPERIMENT_KEYS, "trial_seed") if k in records.columns]
    rows = []
    for key, group in records.groupby(keys, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        for name, crit in CRITERIA.items():
            chosen = select(group, name, nan_policy)
            rows.append({**dict(zip(keys, key)), "criterion": name, "test_acc": float(chosen["test_acc"]),
                         "val_value": float(chosen[crit.metric]), "hparams_seed": int(chosen["hparams_seed"]),
                         "step": int(chosen["step"]), "n_configs": int(group["hparams_seed"].nunique())})
    return pd.DataFrame(rows)


def results_table(records: pd.DataFrame, nan_policy: str = "neg_inf", how: str = "se",
                  scale: float = 100.0) -> pd.DataFrame:
    """Per (experiment, criterion): ``mean`` and ``err`` (``shared.selection.aggregate``; "se" is the paper's
    "±") over trial seeds of the selected test accuracy, times ``scale``; ``n_trials``, ``n_configs`` (the
    hparams seeds searched) and the raw ``per_trial`` scores (in trial-seed order) are kept.
    """
    scores = selected_scores(records, nan_policy)
    keys = [k for k in EXPERIMENT_KEYS if k in scores.columns]
    rows = []
    for key, group in scores.groupby([*keys, "criterion"], sort=False, dropna=False):
        values = group.sort_values("trial_seed")["test_acc"].to_numpy() * scale
        mean, err = generic.aggregate(values, how)
        rows.append({**dict(zip([*keys, "criterion"], key)), "mean": mean, "err": err, "n_trials": len(values),
                     "n_configs": int(group["n_configs"].max()),
                     "per_trial": tuple(float(v) for v in values)})
    return pd.DataFrame(rows)


def criterion_summary(table: pd.DataFrame) -> dict:
    """How close CR, AA and OA come to OA & ES over the algorithms of one table (anchors derived from paper tables).

    ``table`` has one row per (algorithm, criterion) with the accuracy in ``value`` (a paper table or ours).
    Returns the mean gaps OA&ES - CR / AA / OA (points), Spearman's rho of CR and AA with OA&ES across
    algorithms, and in how many rows CR beats AA.
    """
    from scipy.stats import spearmanr

    w = table.pivot_table(index="algorithm", columns="criterion", values="value")
    missing = [c for c in CRITERIA if c not in w.columns]
    if missing:
        raise ConfigError(f"criterion_summary needs every criterion per algorithm; missing {missing}")
    return {"mean(OA&ES - CR)": float((w["OA&ES"] - w["CR"]).mean()), "mean(OA&ES - AA)": float((w["OA&ES"] - w["AA"]).mean()),
            "mean(OA&ES - OA)": float((w["OA&ES"] - w["OA"]).mean()),
            "rho(CR, OA&ES)": float(spearmanr(w["CR"], w["OA&ES"]).statistic),
            "rho(AA, OA&ES)": float(spearmanr(w["AA"], w["OA&ES"]).statistic),
            "CR > AA": f"{int((w['CR'] > w['AA']).sum())}/{len(w)}"}
