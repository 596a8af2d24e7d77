"""Model selection from checkpoint records, and the mean ± error of the selected scores over repeats.

``records`` is a DataFrame with one row per checkpoint: a run column (one training run = one
configuration), a step column, validation-metric columns and a test column. A selection rule picks one
checkpoint per run ("last", or "early_stopping" = the best validation value), then the run whose chosen
checkpoint has the best validation value; the result is that checkpoint's row.

Order matters for ties and NaN: checkpoints are taken in step order (stable, so file order breaks equal
steps) and runs in their order of first appearance in ``records`` (sort the table first to fix it).

- ``tie="first"`` / ``"last"``: the first / last maximal checkpoint within a run, and the first / last
  maximal run. ``tie="plench"`` is DomainBed's (and PLENCH's): Python's ``max`` within a run (the first
  maximum) but ``sorted(...)[::-1][0]`` across runs (the *last* maximal run).
- ``nan_policy="neg_inf"``: NaN counts as -inf everywhere. ``nan_policy="plench"`` is DomainBed's: within a
  run Python's ``max`` keeps a NaN that comes first (nothing compares greater than NaN) and never picks a
  later one; across runs ``Q.sorted`` maps NaN to -inf.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from shared.errors import ConfigError, unknown_choice

RULES = ("early_stopping", "last")
NAN_POLICIES = ("neg_inf", "plench")
TIES = ("first", "last", "plench")
AGGREGATIONS = ("se", "std")


def _check(rule: str, nan_policy: str, tie: str) -> None:
    for kind, value, valid in (("rule", rule, RULES), ("nan_policy", nan_policy, NAN_POLICIES), ("tie", tie, TIES)):
        if value not in valid:
            raise unknown_choice(kind, value, valid)


def pick(values, *, python_max: bool = False, last: bool = False) -> int:
    """Position of the chosen value in ``values`` (1-D).

    ``python_max``: ``max(range(n), key=values.__getitem__)`` semantics: the first element stays chosen until
    one compares strictly greater (``>=`` with ``last``), so a leading NaN is kept and later NaNs are never
    chosen. Otherwise NaN counts as -inf and the first (``last``: the last) maximal value is chosen.
    """
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        raise ConfigError("cannot select from an empty list of values")
    if python_max:
        best = 0
        for i in range(1, len(values)):
            if values[i] > values[best] or (last and values[i] >= values[best]):
                best = i
        return best
    clean = np.where(np.isnan(values), -np.inf, values)
    maximal = np.flatnonzero(clean == clean.max())
    return int(maximal[-1] if last else maximal[0])


def best_per_run(records: pd.DataFrame, metric: str, rule: str = "early_stopping", *, nan_policy: str = "neg_inf",
                 tie: str = "first", run: str = "run", step: str = "step") -> pd.DataFrame:
    """One row per run (in order of first appearance): the checkpoint ``rule`` picks within that run."""
    _check(rule, nan_policy, tie)
    missing = [c for c in (run, step, metric) if c not in records.columns]
    if missing:
        raise ConfigError(f"records lack column(s) {missing}; columns present: {sorted(map(str, records.columns))}")
    if records.empty:
        raise ConfigError("no records to select from (did the runs write any checkpoint?)")
    records = records.reset_index(drop=True)
    chosen = []
    for _, group in records.groupby(run, sort=False):
        group = group.sort_values(step, kind="stable")
        if rule == "last":
            chosen.append(group.index[-1])
        else:
            chosen.append(group.index[pick(group[metric].to_numpy(), python_max=nan_policy == "plench",
                                           last=tie == "last")])
    return records.loc[chosen]


def select_checkpoint(records: pd.DataFrame, metric: str, rule: str = "early_stopping", *,
                      nan_policy: str = "neg_inf", tie: str = "first", run: str = "run",
                      step: str = "step") -> pd.Series:
    """The checkpoint record chosen by ``rule`` within each run, then the run with the best ``metric``."""
    per_run = best_per_run(records, metric, rule, nan_policy=nan_policy, tie=tie, run=run, step=step)
    return per_run.iloc[pick(per_run[metric].to_numpy(), last=tie in ("last", "plench"))]


def aggregate(values, how: str = "se") -> tuple[float, float]:
    """``(mean, error)`` of repeated scores (e.g. one selected test accuracy per data split).

    ``how="se"``: the standard error ``np.std(x / sqrt(n))`` with the population std (ddof=0). This is what
    PLENCH's (and DomainBed's) tables print after "±" and what the Plench paper calls "std".
    ``how="std"``: the plain population standard deviation ``np.std(x)`` (ddof=0).
    """
    if how not in AGGREGATIONS:
        raise unknown_choice("aggregation", how, AGGREGATIONS)
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ConfigError("cannot aggregate an empty list of scores")
    err = np.std(x / np.sqrt(x.size)) if how == "se" else np.std(x)
    return float(np.mean(x)), float(err)
