"""Helpers of the tabular, image-table and Figure 1 notebooks: our tabular results in the paper's keys, per-algorithm
step costs (Fig. 4), the "validation data added to training" arm of Figure 1(a,b), and a protocol run that hands
back its trained model.

    beside = tabular_paper_rows(results, "full")                   # Tables 7, 9-16: reported("plench", "results") keys

    costs = step_costs(collect(records_dir))                       # Fig. 4: time per step, peak memory
    moved = validation_as_training(ds, trial_seed=0)               # Fig. 1: validation rows trained on, |S| = 1
    counts = train_with_validation([ds], ["PRODEN"], n_trials=2, arch="mlp", steps=200, checkpoint_freq=25,
                                   out_dir=records_dir / "training")
    model = train_model(ds, "ALIM", arch="digits_cnn", trial_seed=0, steps=30)   # e.g. to read its confidences
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from plench.algorithms import Algorithm, make_algorithm
from plench.data import PALM_STEPS, PAPER_NAMES, PLLDataset, plench_split
from plench.hparams import hparams_for
from plench.protocol import CyclicLoader, as_device, make_batch, run_args, run_data, train_run
from shared import sweep as runs
from shared.errors import ConfigError
from shared.seeding import seed_everything

COST_KEYS = ("dataset", "arch", "algorithm", "compat")
# The paper table (dataset, network in reported/results.csv) each tabular notebook dataset is set beside: a PALM
# dataset beside its own (Tables 7, 9-16), a stand-in beside the one it imitates.
TABULAR_COUNTERPARTS = {"PLDigits-Aggregate": ("PLCIFAR10-Aggregate", "ResNet"),
                        "PLDigits-Vaguest": ("PLCIFAR10-Vaguest", "ResNet"),
                        "digits-USS": ("Lost", "MLP")} | {name: (PAPER_NAMES[name], "MLP") for name in PALM_STEPS}
PAPER_ROW_COLUMNS = ("dataset", "network", "algorithm", "criterion", "metric", "value", "ours_on")


# ------------------------------------------------------------------------------------------------ tabular tables
def tabular_paper_rows(results: pd.DataFrame, profile: str) -> pd.DataFrame:
    """Our tabular results in ``reported("plench", "results")``'s keys, for ``shared.report.compare_with_paper``.

    ``results`` has columns dataset, algorithm (registry name), criterion and value (``results_table``'s mean).
    Each dataset is renamed to its ``TABULAR_COUNTERPARTS`` table; datasets without one are left out (the frame
    may be empty, with its columns). Columns ``PAPER_ROW_COLUMNS``; ``ours_on`` names our data, the MLP and
    ``profile``.
    """
    from plench.algorithms import display_name

    matched = results[results["dataset"].isin(list(TABULAR_COUNTERPARTS))]
    pairs = [TABULAR_COUNTERPARTS[d] for d in matched["dataset"]]
    return pd.DataFrame({"dataset": [p[0] for p in pairs], "network": [p[1] for p in pairs],
                         "algorithm": [display_name(a) for a in matched["algorithm"]],
                         "criterion": matched["criterion"].to_numpy(), "metric": "test_acc",
                         "value": matched["value"].to_numpy(dtype=float),
                         "ours_on": [f"{d} (MLP, {profile})" for d in matched["dataset"]]},
                        columns=list(PAPER_ROW_COLUMNS))


# ------------------------------------------------------------------------------------------------ Figure 4
def step_costs(records: pd.DataFrame, by: Sequence[str] = COST_KEYS) -> pd.DataFrame:
    """Per group of ``by``: the mean seconds per training step and the peak memory, from checkpoint records.

    A record's ``step_time`` is the mean over the steps since the previous checkpoint of its run, so the mean
    here weights each record by the steps it covers (``step - previous step``); ``step_time_median_s`` is the
    median of the records' values, which a burst of load on a shared machine moves less. Step-0 records (one
    step, with the run's start-up costs) are left out. Columns: the ``by`` keys present, ``step_time_s``,
    ``step_time_median_s``, ``steps_timed``, ``runs``, ``peak_mem_gb`` (the largest ``mem_gb``) and ``mem_source`` (the sources seen,
    joined by "+"). ``mem_gb`` means what the protocol recorded: on CUDA the allocator's peak since it was
    last reset, on CPU the whole process's peak RSS (see ``plench.protocol.memory_gb``).
    """
    needed = {"run", "step", "step_time", "mem_gb", "mem_source"}
    missing = sorted(needed - set(records.columns))
    if missing:
        raise ConfigError(f"step_costs needs the run records' columns {sorted(needed)}; missing {missing} "
                          "(use plench.protocol.collect)")
    keys = [k for k in by if k in records.columns]
    frame = records.sort_values(["run", "step"], kind="stable").copy()
    frame["covered"] = frame.groupby("run")["step"].diff()
    frame = frame[frame["step"] != 0].dropna(subset=["covered"])
    if frame.empty:
        raise ConfigError("no checkpoint after step 0 to time; train for more than one step")
    frame["weighted"] = frame["step_time"] * frame["covered"]
    rows = []
    for key, group in frame.groupby(keys, sort=False, dropna=False) if keys else [((), frame)]:
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(keys, key)), "step_time_s": group["weighted"].sum() / group["covered"].sum(),
                     "step_time_median_s": float(group["step_time"].median()),
                     "steps_timed": int(group["covered"].sum()), "runs": int(group["run"].nunique()),
                     "peak_mem_gb": float(group["mem_gb"].max()),
                     "mem_source": "+".join(sorted(set(group["mem_source"].astype(str))))})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------ Figure 1(a, b)
def _split_size(n: int, test, trial_seed: int, holdout_fraction: float) -> dict[str, np.ndarray]:
    stub = PLLDataset("stub", np.empty((n, 0)), np.empty((n, 0)), np.zeros(n, dtype=np.int64), ("0",), "tabular",
                      test, 0)
    return plench_split(stub, trial_seed, holdout_fraction)


def validation_as_training(ds: PLLDataset, trial_seed: int, *, holdout_fraction: float = 0.1,
                           test_fraction: float = 0.1) -> PLLDataset:
    """``ds`` rearranged so that the protocol's split of ``trial_seed`` trains on the original split's training
    rows *and* its validation rows, the latter with the singleton candidate set {y} (Figure 1(a, b), "training").

    The result has a fixed test set: the original split's test rows (or ``ds.test``). Its rows are placed so that
    ``plench_split(result, trial_seed)`` gives, in order, the original training rows followed by the moved
    validation rows as ``train``; its ``val`` rows are the original validation rows with their candidate sets
    (repeated to the split's validation size; nothing is selected with them in this arm). The name is kept, so
    a run's seed (``seed_hash(dataset, algorithm, hparams_seed, trial_seed)``) is the one of the same
    configuration on ``ds``. Other trial seeds of the result do not have this layout.
    """
    split = plench_split(ds, trial_seed, holdout_fraction, test_fraction)
    train, val = split["train"], split["val"]
    if split["test"] is not None:
        test = (np.asarray(ds.X)[split["test"]], np.asarray(ds.y)[split["test"]])
    else:
        test = ds.test
    wanted = len(train) + len(val)
    n = wanted
    while len(_split_size(n, test, trial_seed, holdout_fraction)["train"]) < wanted:
        n += 1  # n - int(n * holdout_fraction) grows by 0 or 1 per row: it meets ``wanted`` exactly
    layout = _split_size(n, test, trial_seed, holdout_fraction)
    X, S, y = np.asarray(ds.X), np.asarray(ds.S), np.asarray(ds.y)
    rows = np.empty(n, dtype=np.int64)
    rows[layout["train"]] = np.concatenate([train, val])
    rows[layout["val"]] = np.resize(val, len(layout["val"]))
    new_S = S[rows].copy()
    moved = layout["train"][len(train):]
    new_S[moved] = 0
    new_S[moved, y[rows[moved]]] = 1
    meta = {k: v for k, v in ds.meta.items() if k != "annotator_sets"}  # per-row annotations no longer line up
    meta["validation_in_training"] = {"source": ds.name, "trial_seed": int(trial_seed), "moved_rows": int(len(val))}
    return PLLDataset(ds.name, X[rows], new_S.astype(S.dtype), y[rows], ds.classes, ds.modality, test, ds.steps, meta)


def train_with_validation(datasets: Sequence[PLLDataset], algorithms: Sequence[str], *, n_trials: int, arch: str,
                          checkpoint_freq: int, out_dir, steps: int | None = None, device="cpu", compat: bool = True,
                          hparams_overrides: dict | None = None) -> dict[str, int]:
    """Figure 1's "training" arm: for every (trial seed, dataset, algorithm), one run with the default
    hyperparameters (hparams seed 0) on ``validation_as_training(dataset, trial_seed)``, resumably under
    ``out_dir`` (finished runs are skipped). Returns the counts of ``shared.sweep.pending``."""
    args_list = []
    for t in range(n_trials):
        for ds in datasets:
            for algorithm in algorithms:
                args = run_args(ds.name, algorithm, arch=arch, hparams_seed=0, trial_seed=t, steps=steps or ds.steps,
                                checkpoint_freq=checkpoint_freq, compat=compat, hparams_overrides=hparams_overrides)
                args_list.append({**args, "arm": "validation_in_training"})  # names the run folder only
    todo, counts = runs.pending(args_list, out_dir)
    by_name = {ds.name: ds for ds in datasets}
    moved: dict[tuple[str, int], PLLDataset] = {}
    for args, run_dir in todo:
        key = (args["dataset"], args["trial_seed"])
        if key not in moved:
            moved[key] = validation_as_training(by_name[key[0]], key[1])
        train_run(moved[key], args["algorithm"], arch=arch, hparams_seed=0, trial_seed=args["trial_seed"],
                  steps=args["steps"], checkpoint_freq=checkpoint_freq, out_dir=runs.reset_run_dir(run_dir),
                  device=device, compat=compat, hparams_overrides=hparams_overrides)
    return counts


# ------------------------------------------------------------------------------------------------ a model to inspect
def train_model(dataset: PLLDataset, algorithm: str, *, arch: str, trial_seed: int, steps: int, hparams_seed: int = 0,
                hparams_overrides: dict | None = None, compat: bool = True, device="cpu") -> Algorithm:
    """The model of ``plench.protocol.train_run`` with the same arguments after ``steps`` steps (same hparams,
    split, seeds, batches and views), without records or checkpoints; for reading an algorithm's state."""
    device = as_device(device)
    args = run_args(dataset.name, algorithm, arch=arch, hparams_seed=hparams_seed, trial_seed=trial_seed,
                    steps=steps, checkpoint_freq=steps, compat=compat, hparams_overrides=hparams_overrides)
    hparams = hparams_for(algorithm, arch, hparams_seed=hparams_seed, trial_seed=trial_seed, dataset=dataset.name,
                          compat=compat)
    hparams.update(hparams_overrides or {})
    data = run_data(dataset, trial_seed, device)
    seed_everything(args["seed"])
    model = make_algorithm(algorithm, data.input_shape, data.train_S.shape[1], data.train_S, hparams, arch=arch,
                           steps=steps, compat=compat).to(device)
    loader = CyclicLoader(len(data.train_x), int(hparams["batch_size"]), args["seed"])
    augment = torch.Generator().manual_seed(args["seed"] + 1)
    model.train()
    for _ in range(steps):
        model.update(make_batch(data, next(loader), model.views, device, augment))
    return model.eval()
