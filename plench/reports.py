"""Helpers of the tabular, image-table and Figure 1 notebooks: our tabular results in the paper's keys, per-algorithm
step costs (Fig. 4), the "validation data added to training" arm of Figure 1(a,b), and a protocol run that hands
back its trained model.

    beside = tabular_paper_rows(results)                           # Tables 7, 9-16: reported("plench", "results") keys
    beside = image_paper_rows(results)                             # Tables 1-4

    costs = step_costs(select_runs(collect(folder, names=wanted), expected))   # Fig. 4: time per step, memory
    moved = validation_as_training(ds, trial_seed=0)               # Fig. 1: validation rows trained on, |S| = 1
    counts = train_with_validation([ds], ["PRODEN"], n_trials=2, arch="mlp", steps=200, checkpoint_freq=25,
                                   out_dir=store.sweep_dir(store.TRAINING_ARM))
    model = train_model(ds, "ALIM", arch="digits_cnn", trial_seed=0, steps=30)   # e.g. to read its confidences
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from plench.algorithms import ALGORITHMS, TABLE6_ORDER, Algorithm, display_name
from plench.data import PALM_STEPS, PAPER_NAMES, PLLDataset, plench_split, pll_dataset_spec, table5_row
from plench.protocol import (
    DEFAULT_PRECISION, Grid, CyclicLoader, as_device, collect, make_batch, measure_batched_speedup, resolve_precision,
    run_args, select_runs, setup_run, speedup_args, sweep_grids, train_run, batching_pays, data_width,
)
from plench.selection import CRITERIA, results_table
from shared import sweep as runs
from shared.errors import ConfigError, unknown_choice
from shared.runlog import log_run

# ``shared.runlog`` kinds (``plench.cost`` plans them): a run of Figure 1's "training" arm (key: its folder name,
# logged by ``shared.sweep.launch``) and one model of the PiCO+/ALIM compat check (key: ``compat_check_key``).
TRAINING_ARM_KIND = "plench-training-arm"
COMPAT_CHECK_KIND = "plench-compat-check"
COST_KEYS = ("dataset", "arch", "algorithm", "compat")
# The paper table (dataset, network in reported/results.csv) each tabular notebook dataset is set beside: a PALM
# dataset beside its own (Tables 7, 9-16), a stand-in beside the one it imitates.
TABULAR_COUNTERPARTS = {"PLDigits-Aggregate": ("PLCIFAR10-Aggregate", "ResNet"),
                        "PLDigits-Vaguest": ("PLCIFAR10-Vaguest", "ResNet"),
                        "digits-USS": ("Lost", "MLP")} | {name: (PAPER_NAMES[name], "MLP") for name in PALM_STEPS}
# The paper's network for each of ours (the digits CNN stands in for the ResNet of Tables 1-2).
IMAGE_NETWORKS = {"resnet32": "ResNet", "densenet_bc": "DenseNet", "digits_cnn": "ResNet"}
ARCH_NAMES = {"mlp": "MLP", "digits_cnn": "digits CNN", "resnet32": "ResNet-32", "densenet_bc": "DenseNet-BC-22"}
PAPER_ROW_COLUMNS = ("dataset", "network", "algorithm", "criterion", "metric", "value", "ours_on")
# What the paper ran (Section 5, Appendix D): 20 configurations of the random search on every split.
PAPER_PROTOCOL = {"tabular": "MLP, 10,000 or 20,000 steps, 20 configs x 5 splits",
                  "image": "ResNet-32 / DenseNet, 60,000 steps, 20 configs x 3 splits"}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def run_tag(arch: str, steps: int, n_configs: int, n_trials: int) -> str:
    """What a result was run with, e.g. "MLP, 200 steps, 2 configs x 2 splits" (the paper: "MLP, 10,000 or
    20,000 steps, 20 configs x 5 splits", ``PAPER_PROTOCOL``)."""
    return (f"{ARCH_NAMES.get(arch, arch)}, {int(steps):,} steps, {_plural(int(n_configs), 'config')} x "
            f"{_plural(int(n_trials), 'split')}")


def paper_counterpart(name: str) -> str:
    """The paper's name of a dataset (``PAPER_NAMES``) or of the one a stand-in imitates (PLDigits -> PLCIFAR10)."""
    return PAPER_NAMES.get(name) or pll_dataset_spec(name).stands_in_for


def _paper_rows(results: pd.DataFrame, matched: pd.DataFrame, datasets: list[str], networks: list[str]) -> pd.DataFrame:
    needed = {"dataset", "algorithm", "criterion", "value", "steps", "n_configs", "n_trials"}
    missing = sorted(needed - set(results.columns))
    if missing:
        raise ConfigError(f"paper rows need results_table's columns (value = its mean); missing {missing}")
    archs = matched["arch"] if "arch" in matched.columns else pd.Series("mlp", index=matched.index)
    tags = [f"{d} ({run_tag(a, s, c, t)})" for d, a, s, c, t in
            zip(matched["dataset"], archs, matched["steps"], matched["n_configs"], matched["n_trials"])]
    return pd.DataFrame({"dataset": datasets, "network": networks,
                         "algorithm": [display_name(a) for a in matched["algorithm"]],
                         "criterion": matched["criterion"].to_numpy(), "metric": "test_acc",
                         "value": matched["value"].to_numpy(dtype=float), "ours_on": tags},
                        columns=list(PAPER_ROW_COLUMNS))


# ------------------------------------------------------------------------------------------------ Table 5, Figure 2
# Figure 2's two crowd-annotated datasets when the settings name fewer: the paper's.
PAPER_CROWD = ("PLCIFAR10_Aggregate", "PLCIFAR10_Vaguest")
TABLE5_METRICS = {"# Examples": "examples", "# Features": "features", "# Classes": "classes",
                  "Avg. # CLs": "avg_candidates", "Noise Rate (%)": "noise_rate_pct"}


def table5(datasets: Mapping[str, PLLDataset]) -> pd.DataFrame:
    """Table 5's statistics (``table5_row``) of each dataset, with the row a stand-in imitates ("stands in for")."""
    return pd.DataFrame([table5_row(ds) | {"stands in for": pll_dataset_spec(name).stands_in_for or ""}
                         for name, ds in datasets.items()])


def table5_paper_rows(table: pd.DataFrame) -> pd.DataFrame:
    """``table5``'s numbers in ``reported("plench", "table5")``'s keys: each dataset under its paper name, a
    stand-in under the dataset it imitates (PLDigits -> PLCIFAR10); ``ours_on`` names our dataset."""
    names = PAPER_NAMES | {"PLDigits-Aggregate": "PLCIFAR10-Aggregate", "PLDigits-Vaguest": "PLCIFAR10-Vaguest"}
    rows = [{"dataset": names.get(r["Dataset"], r["Dataset"]), "metric": metric, "value": r[column],
             "ours_on": r["Dataset"]} for r in table.to_dict("records") for column, metric in TABLE5_METRICS.items()]
    return pd.DataFrame(rows, columns=["dataset", "metric", "value", "ours_on"])


@dataclass
class CrowdStatistics:
    """Figure 2's data. ``roles``: the Aggregate and the Vaguest dataset (the settings' ``crowd``, padded with
    ``PAPER_CROWD``); ``present`` those loaded, ``missing`` the others with the reason. Panels (a, b) use the
    per-annotator sets of ``source``, the first present role; ``matrices`` holds p(j in S | y = i) per present role."""

    roles: tuple[str, str]
    present: dict[str, PLLDataset]
    missing: dict[str, str]
    source: str | None = None
    classes: tuple[str, ...] = ()
    histogram: np.ndarray | None = None  # partial labels proposed per class (every annotator's set)
    noise_by_annotators: np.ndarray | None = None  # noise rate of the union of the first k annotators, k = 1..A
    matrices: dict[str, np.ndarray] = field(default_factory=dict)

    def skip_reason(self) -> str | None:
        """Why Figure 2 cannot be drawn (no crowd-annotated dataset), or None."""
        if self.source is not None:
            return None
        return "; ".join(f"{name}: {why}" for name, why in self.missing.items())


def crowd_statistics(crowd: Sequence[str], datasets: Mapping[str, PLLDataset],
                     skipped: Mapping[str, str] | None = None) -> CrowdStatistics:
    """Figure 2's statistics for the crowd-annotated datasets ``crowd`` (names, Aggregate first; at most two),
    taken from ``datasets`` (the loaded ones); ``skipped`` gives the reasons for datasets that could not be loaded
    (``plench.data.load_available``). An empty ``crowd`` gives statistics with nothing present."""
    from shared.noise.partial import flipping_matrix, label_histogram, noise_rate_by_annotators

    crowd = list(crowd)
    if len(crowd) > 2:
        raise ConfigError(f"crowd names the Aggregate and the Vaguest version (at most 2 datasets), got {crowd}")
    roles = tuple(crowd + list(PAPER_CROWD[len(crowd):]))
    present, missing = {}, {}
    for name in roles:
        if name in datasets and name in crowd:
            if "annotator_sets" not in datasets[name].meta:
                raise ConfigError(f"{name} has no per-annotator candidate sets; crowd takes the crowd-annotated "
                                  f"datasets (PLCIFAR10_*, PLDigits-*)")
            present[name] = datasets[name]
        elif name in (skipped or {}):
            missing[name] = skipped[name]
        elif name not in crowd:
            missing[name] = "not in settings['crowd']"
        else:
            missing[name] = "not in settings['datasets']"
    stats = CrowdStatistics(roles, present, missing)
    if present:
        stats.source = next(iter(present))
        first = present[stats.source]
        sets = first.meta["annotator_sets"]  # (n, annotators, q) 0/1
        stats.classes = first.classes
        stats.histogram = label_histogram(sets)
        stats.noise_by_annotators = noise_rate_by_annotators(sets, first.y)
        stats.matrices = {name: flipping_matrix(ds.S, ds.y, ds.num_classes) for name, ds in present.items()}
    return stats


# ------------------------------------------------------------------------------------------------ tabular tables
def tabular_paper_rows(results: pd.DataFrame) -> pd.DataFrame:
    """Our tabular results in ``reported("plench", "results")``'s keys, for ``shared.report.compare_with_paper``.

    ``results`` is ``results_table``'s frame with its ``mean`` as ``value`` (columns dataset, algorithm, criterion,
    value, steps, n_configs, n_trials). Each dataset is renamed to its ``TABULAR_COUNTERPARTS`` table; datasets
    without one are left out (the frame may be empty, with its columns). Columns ``PAPER_ROW_COLUMNS``;
    ``ours_on`` names our data and what was run (``run_tag``: network, steps, configurations x splits).
    """
    matched = results[results["dataset"].isin(list(TABULAR_COUNTERPARTS))]
    pairs = [TABULAR_COUNTERPARTS[d] for d in matched["dataset"]]
    return _paper_rows(results, matched, [p[0] for p in pairs], [p[1] for p in pairs])


def image_paper_rows(results: pd.DataFrame, network: str | None = None) -> pd.DataFrame:
    """As ``tabular_paper_rows`` for the image tables (1-4): each dataset beside ``paper_counterpart``'s table
    for the network of its ``arch`` (``IMAGE_NETWORKS``), or ``network`` for every row (Fig. 1 sets tabular runs
    beside the ResNet tables)."""
    networks = [network or IMAGE_NETWORKS.get(a, a) for a in results["arch"]] if len(results) else []
    return _paper_rows(results, results, [paper_counterpart(d) for d in results["dataset"]], networks)


def ordered_results(table: pd.DataFrame, main_compat: bool = True) -> pd.DataFrame:
    """``results_table``'s frame in the paper's row order (Table 6; the main variant before its "(fixed)" one),
    with ``name``: the display name, "(fixed)" added to runs whose ``compat`` is not ``main_compat``."""
    order = {name: i for i, name in enumerate(TABLE6_ORDER)}
    table = table.assign(_order=table["algorithm"].map(order).fillna(len(order)),
                         _main=(table["compat"] == main_compat) if "compat" in table else True)
    keys = [k for k in ("dataset", "arch") if k in table.columns]
    table = table.sort_values([*keys, "_order", "_main"], ascending=[True] * len(keys) + [True, False], kind="stable")
    names = [display_name(a) + ("" if main else " (fixed)") for a, main in zip(table["algorithm"], table["_main"])]
    return table.drop(columns=["_order", "_main"]).assign(name=names).reset_index(drop=True)


def wide_results(table: pd.DataFrame, settings: Sequence[str], by: Sequence[str] = ("dataset",)) -> pd.DataFrame:
    """Tables 1-4, 7, 9-16 as printed: one row per algorithm (``name``), a column group per setting (the values of
    ``by`` joined by " / ", in the order ``settings``) and criterion, cells "mean±err" (2 decimals)."""
    cells = table.assign(cell=[f"{m:.2f}±{e:.2f}" for m, e in zip(table["mean"], table["err"])],
                         setting=table[list(by)].astype(str).agg(" / ".join, axis=1))
    wide = cells.pivot_table(index="name", columns=["setting", "criterion"], values="cell", aggfunc="first", sort=False)
    return wide.reindex(columns=pd.MultiIndex.from_product([list(settings), list(CRITERIA)]))


def tabular_grids(cfg: Mapping) -> list[Grid]:
    """The sweeps of the tabular notebook's settings: the algorithms with the main ``compat``, those with their own
    ``hparams_overrides`` separately, and the ``fixed_variants`` run (if ``compat``) with ``compat=False``; only
    algorithms listed in ``algorithms`` run."""
    common = dict(n_hparams=cfg["n_hparams"], n_trials=cfg["n_trials"], arch="mlp", steps=cfg["steps"],
                  checkpoint_freq=cfg["checkpoint_freq"], batched=cfg["batched"], executor=cfg.get("executor"),
                  precision=precision_setting(cfg))
    overrides = cfg.get("hparams_overrides") or {}
    algorithms = list(cfg["algorithms"])
    grids = [Grid(tuple(a for a in algorithms if a not in overrides), compat=cfg["compat"], **common)]
    grids += [Grid((a,), compat=cfg["compat"], hparams_overrides=dict(o), **common)
              for a, o in overrides.items() if a in algorithms]
    if cfg["compat"]:
        grids.append(Grid(tuple(a for a in cfg.get("fixed_variants") or () if a in algorithms), compat=False, **common))
    return [g for g in grids if g.algorithms]


def precision_setting(cfg: Mapping) -> str:
    """The notebook's ``precision`` setting ("auto" when the settings have none), checked: a ConfigError names the
    valid ones (``plench.protocol.PRECISIONS``). It is resolved against the device where the runs are named."""
    precision = cfg.get("precision", DEFAULT_PRECISION)
    resolve_precision(precision, "cpu")
    return precision


def image_overrides(cfg: Mapping, algorithm: str) -> dict | None:
    """The hyperparameter overrides of ``algorithm`` in the image notebook's settings: the shared ``batch_size``
    (if not None) and the algorithm's own ``hparams_overrides``; None if there are none."""
    shared = {} if cfg.get("batch_size") is None else {"batch_size": cfg["batch_size"]}
    return {**shared, **(cfg.get("hparams_overrides") or {}).get(algorithm, {})} or None


def image_grids(cfg: Mapping) -> list[Grid]:
    """The image notebook's sweeps: one per network and algorithm (its own overrides, ``image_overrides``).

    ``batched`` stacks configurations that share a batch size (``protocol.train_runs_batched``); Figure 4 then
    times runs of its own (``figure4_grids``)."""
    precision = precision_setting(cfg)
    return [Grid((a,), n_hparams=cfg["n_hparams"], n_trials=cfg["n_trials"], arch=arch, steps=cfg["steps"],
                 checkpoint_freq=cfg["checkpoint_freq"], compat=cfg["compat"],
                 hparams_overrides=image_overrides(cfg, a), batched=cfg.get("batched", False),
                 executor=cfg.get("executor"), precision=precision)
            for arch in cfg["archs"] for a in cfg["algorithms"]]


def figure4_grids(cfg: Mapping) -> list[Grid]:
    """The runs Figure 4 times when the image sweep stacks its runs (``batched``): a stack's step is shared, so its
    records say nothing of one algorithm's time per step or memory. Then every algorithm trains its default
    configuration (hparams seed 0) on the first split alone, for ``fig4["steps"]`` steps (None: the sweep's), on
    Figure 4's network (and dataset: ``figure4_datasets``). Empty when the sweep trains every run alone: Figure 4
    reads its records, as the paper's did (and with "auto", which never stacks an image network)."""
    fig4 = cfg["fig4"]
    if cfg.get("batched", False) is not True:  # "auto" stacks MLPs only (protocol.sweep_tasks)
        return []
    steps = fig4.get("steps") or cfg["steps"]
    return [Grid((a,), n_hparams=1, n_trials=1, arch=fig4["arch"], steps=steps,
                 checkpoint_freq=min(int(cfg["checkpoint_freq"]), steps), compat=cfg["compat"],
                 hparams_overrides=image_overrides(cfg, a), executor=cfg.get("executor"),
                 precision=precision_setting(cfg))
            for a in cfg["algorithms"]]


def figure4_datasets(cfg: Mapping, names: Sequence[str]) -> list[str]:
    """The datasets (of ``names``, the notebook's) Figure 4 reads: its ``fig4["dataset"]``, or all when None."""
    dataset = cfg["fig4"]["dataset"]
    return list(names) if dataset is None else [n for n in names if n == dataset]


# ------------------------------------------------------------------------------------------------ batched speed-up
def speedup_calls(dataset_names: Sequence[str], spec: Mapping, *, checkpoint_freq: int,
                  precision: str = DEFAULT_PRECISION, device="cpu") -> list[dict]:
    """The ``measure_batched_speedup`` calls of ``batched_speedup`` (its ``speedup_args``, one per batch size):
    ``spec["configs"]`` random configurations of ``spec["algorithm"]`` (hparams seeds 1.., trial seeds 0 and 1)
    with the batch size forced, ``spec["steps"]`` steps, on ``spec["dataset"]`` (the first of ``dataset_names``,
    the datasets loaded, if that one is absent); ``precision`` resolved against ``device``."""
    name = spec["dataset"] if spec["dataset"] in dataset_names else next(iter(dataset_names))
    pairs = [(h, h % 2) for h in range(1, int(spec["configs"]) + 1)]
    precision = resolve_precision(precision, device, "mlp")  # the speed-up trains stacked MLPs
    return [speedup_args(name, spec["algorithm"], pairs, steps=int(spec["steps"]), checkpoint_freq=checkpoint_freq,
                         hparams_overrides={"batch_size": int(size)}, precision=precision)
            for size in spec.get("batch_sizes") or (32, 64, 128)]


def batched_speedup(datasets: Mapping[str, PLLDataset], spec: Mapping, *, checkpoint_freq: int,
                    device="cpu", precision: str = DEFAULT_PRECISION) -> pd.DataFrame:
    """``measure_batched_speedup`` at each of ``spec["batch_sizes"]`` (default 32, 64 and 128, the MLP search grid),
    as ``speedup_calls`` lists them. One row per batch size, with ``batched_by_auto``: whether
    ``sweep(batched="auto")`` trains that batch size together."""
    rows = []
    for call in speedup_calls(list(datasets), spec, checkpoint_freq=checkpoint_freq, precision=precision,
                              device=device):
        dataset, size = datasets[call["dataset"]], call["hparams_overrides"]["batch_size"]
        speed = measure_batched_speedup(dataset, call["algorithm"], [tuple(c) for c in call["configs"]],
                                        steps=call["steps"], checkpoint_freq=call["checkpoint_freq"], device=device,
                                        hparams_overrides=call["hparams_overrides"],
                                        precision=call.get("precision", "fp32"))
        rows.append({"algorithm": call["algorithm"], "dataset": dataset.name, "batch_size": size,
                     "batched_by_auto": batching_pays(size, "auto", data_width(dataset)), **speed})
    return pd.DataFrame(rows)


def selection_summary(paper: pd.DataFrame, ours: pd.DataFrame) -> pd.DataFrame:
    """``criterion_summary`` of each paper table (``reported("plench", "results")``, test accuracies) and of each
    of our datasets (``results_table``'s rows of one variant, ``mean`` as the value), one row each."""
    from plench.selection import criterion_summary

    paper = paper[paper["metric"] == "test_acc"]
    rows = [{"source": "paper", "table": item, "dataset": part["dataset"].iloc[0], **criterion_summary(part)}
            for item, part in paper.groupby("item", sort=False)]
    ours = ours.rename(columns={"mean": "value"})
    rows += [{"source": "ours", "table": "", "dataset": name, **criterion_summary(part)}
             for name, part in ours.groupby("dataset", sort=False)]
    return pd.DataFrame(rows)


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


def figure4_costs(records: pd.DataFrame, arch: str, dataset: str | None = None) -> pd.DataFrame:
    """Figure 4's data: ``step_costs`` per algorithm of the runs with network ``arch`` on ``dataset`` (the paper:
    PLCIFAR10-Vaguest with DenseNet), or on every dataset pooled when ``dataset`` is None."""
    chosen = records[records["arch"] == arch]
    if dataset is not None:
        chosen = chosen[chosen["dataset"] == dataset]
    if chosen.empty:
        raise ConfigError(f"no run of arch {arch!r}" + (f" on {dataset}" if dataset else "") + " for Figure 4; "
                          "fig4 must name a network (and dataset) of this notebook's settings")
    return step_costs(chosen, by=["arch", "algorithm"])


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
    # The split of n rows with a fixed test set trains on n - int(n * holdout_fraction) <= n (1 - h) + 1 of them, so
    # no n below (wanted - 1) / (1 - h) has enough: start just under that bound, not at ``wanted`` (PLCIFAR10's
    # 50,000 rows would take ~5,500 splits to get there).
    n = max(wanted, int((wanted - 1) / (1 - holdout_fraction)) - 1)
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


def validation_training_args(datasets: Sequence[PLLDataset], algorithms: Sequence[str], *, n_trials: int, arch: str,
                             checkpoint_freq: int, steps: int | None = None, compat: bool = True,
                             hparams_overrides: dict | None = None, precision: str = DEFAULT_PRECISION,
                             device="cpu") -> list[dict]:
    """The runs of ``train_with_validation``: its ``run_args`` with ``"arm": "validation_in_training"`` (which
    names the run folders apart from the search's runs of the same configuration; records keep ``run_args``);
    ``precision`` resolved against ``device``."""
    precision = resolve_precision(precision, device, arch)
    return [{**run_args(ds.name, algorithm, arch=arch, hparams_seed=0, trial_seed=t, steps=steps or ds.steps,
                        checkpoint_freq=checkpoint_freq, compat=compat, hparams_overrides=hparams_overrides,
                        precision=precision),
             "arm": "validation_in_training"}
            for t in range(n_trials) for ds in datasets for algorithm in algorithms]


def validation_use_grid(cfg: Mapping) -> tuple[Grid, dict]:
    """The runs of ``validation_use_arms``' settings: the "validation" arm's search (a ``Grid``) and the arguments
    its "training" arm shares with it (n_trials, arch, steps, checkpoint_freq, compat, precision) for
    ``train_with_validation`` and ``validation_training_args``."""
    common = dict(n_trials=cfg["n_trials"], arch=cfg["arch"], steps=cfg["steps"], checkpoint_freq=cfg["checkpoint_freq"],
                  compat=cfg["compat"], precision=precision_setting(cfg))
    grid = Grid(tuple(cfg["algorithms"]), n_hparams=cfg["n_hparams"], batched=cfg["batched"],
                executor=cfg.get("executor"), **common)
    return grid, common


def validation_use_arms(datasets: Mapping[str, PLLDataset], cfg: Mapping, *, sweep_dir, training_dir, device="cpu",
                        data_dir=None) -> tuple[pd.DataFrame, dict]:
    """Both arms of Figure 1(a, b), run resumably, and their results.

    "validation": the random search (``n_hparams`` configurations, hparams seed 0 = the defaults) under
    ``sweep_dir``, selected with OA & ES; "training": ``train_with_validation``'s one run per split under
    ``training_dir``, read at its last checkpoint (OA's rule). ``sweep_dir`` may be shared with other sweeps (the
    image tables' ResNet-32 search holds the same runs: ``plench.store``), whose finished runs are read, not
    retrained. ``cfg`` holds algorithms, n_hparams, n_trials, arch, steps, checkpoint_freq, compat, batched,
    nan_policy, error and (optionally) executor, where both arms train. Returns ``results_table``'s rows with ``arm``
    (criterion "OA&ES" or "last checkpoint") and the sweep counts per arm. Only the runs these settings define are
    read (``select_runs``). With an executor that does not wait, both arms are submitted before ``SweepPending``.
    """
    data = list(datasets.values())
    grid, common = validation_use_grid(cfg)

    def training_arm():
        return train_with_validation(data, cfg["algorithms"], out_dir=training_dir, device=device,
                                     executor=cfg.get("executor"), **common)

    try:
        searched, counts = sweep_grids([grid], data, out_dir=sweep_dir, device=device, data_dir=data_dir)
    except runs.SweepPending as submitted:  # submit the other arm too before returning
        training_arm()
        raise submitted
    moved = training_arm()
    expected = validation_training_args(data, cfg["algorithms"], **common, device=device)
    trained = select_runs(collect(training_dir, names=[runs.args_hash(args) for args in expected]), expected)
    validation = results_table(searched, nan_policy=cfg["nan_policy"], how=cfg["error"])
    training = results_table(trained, nan_policy=cfg["nan_policy"], how=cfg["error"])
    arms = pd.concat([validation[validation["criterion"] == "OA&ES"].assign(arm="validation"),
                      training[training["criterion"] == "OA"].assign(arm="training", criterion="last checkpoint")],
                     ignore_index=True)
    return arms, {"validation": counts, "training": moved}


def clean_rows_alone(ds: PLLDataset, n_trials: int) -> float:
    """Test accuracy (%) of a logistic regression (standardised inputs) fitted to each split's validation rows with
    their true labels, averaged over trial seeds 0..n_trials-1: how much of the task the clean rows carry alone."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    def flat(x):
        return np.asarray(x, dtype=np.float32).reshape(len(x), -1)

    scores = []
    for trial in range(n_trials):
        split = plench_split(ds, trial)
        test_x, test_y = (ds.X[split["test"]], ds.y[split["test"]]) if split["test"] is not None else ds.test
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
        model.fit(flat(ds.X[split["val"]]), ds.y[split["val"]])
        scores.append(100 * model.score(flat(test_x), np.asarray(test_y)))
    return float(np.mean(scores))


def arm_differences(arms: pd.DataFrame, alone: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Per (dataset, algorithm): the two arms' means, "training - validation", the splits on which the training
    arm won (paired by trial seed, "k/n") and, if given, the clean rows alone (``clean_rows_alone``)."""
    rows = []
    for (name, algorithm), part in arms.groupby(["dataset", "algorithm"], sort=False):
        by_arm = part.set_index("arm")
        if not {"validation", "training"} <= set(by_arm.index):
            continue
        val, train = by_arm.loc["validation"], by_arm.loc["training"]
        won = sum(t > v for t, v in zip(train["per_trial"], val["per_trial"]))
        rows.append({"dataset": name, "algorithm": display_name(algorithm), "validation": float(val["mean"]),
                     "training": float(train["mean"]), "training - validation": float(train["mean"] - val["mean"]),
                     "splits won by training": f"{won}/{len(train['per_trial'])}"}
                    | ({"validation rows alone": alone[name]} if alone is not None else {}))
    return pd.DataFrame(rows)


class _TrainWithValidation:
    """Picklable launcher of ``train_with_validation``'s runs (``shared.sweep.launch``). It carries the algorithm
    classes, so a worker process has them registered even when ``plench.algorithms`` alone does not import them."""

    def __init__(self, datasets: Sequence[PLLDataset], algorithms: Sequence[str], device, hparams_overrides):
        self.datasets = {ds.name: ds for ds in datasets}
        self.classes = {a: ALGORITHMS[a] for a in algorithms}
        self.device, self.hparams_overrides = device, hparams_overrides
        self._moved: dict[tuple[str, int], PLLDataset] = {}

    def __call__(self, args: dict, run_dir) -> None:
        for name, cls in self.classes.items():
            ALGORITHMS.setdefault(name, cls)
        key = (args["dataset"], args["trial_seed"])
        if key not in self._moved:
            self._moved[key] = validation_as_training(self.datasets[key[0]], key[1])
        train_run(self._moved[key], args["algorithm"], arch=args["arch"], hparams_seed=0, trial_seed=args["trial_seed"],
                  steps=args["steps"], checkpoint_freq=args["checkpoint_freq"], out_dir=run_dir, device=self.device,
                  compat=args["compat"], hparams_overrides=self.hparams_overrides,
                  precision=args.get("precision", "fp32"))


def train_with_validation(datasets: Sequence[PLLDataset], algorithms: Sequence[str], *, n_trials: int, arch: str,
                          checkpoint_freq: int, out_dir, steps: int | None = None, device="cpu", compat: bool = True,
                          hparams_overrides: dict | None = None, executor=None,
                          precision: str = DEFAULT_PRECISION) -> dict[str, int]:
    """Figure 1's "training" arm: for every (trial seed, dataset, algorithm), one run with the default
    hyperparameters (hparams seed 0) on ``validation_as_training(dataset, trial_seed)``, resumably under
    ``out_dir`` (finished runs are skipped), where ``executor`` says (``shared.sweep.launch``; None: this
    process). Returns the counts of ``shared.sweep.pending``; the runs are ``validation_training_args``'s (for
    ``plench.protocol.select_runs``)."""
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        raise unknown_choice("algorithm", unknown[0], ALGORITHMS)
    args_list = validation_training_args(datasets, algorithms, n_trials=n_trials, arch=arch,
                                         checkpoint_freq=checkpoint_freq, steps=steps, compat=compat,
                                         hparams_overrides=hparams_overrides, precision=precision, device=device)
    return runs.launch(args_list, _TrainWithValidation(datasets, algorithms, device, hparams_overrides), out_dir,
                       desc="plench training arm", executor=executor, kind=TRAINING_ARM_KIND)


# ------------------------------------------------------------------------------------------------ a model to inspect
def train_model(dataset: PLLDataset, algorithm: str, *, arch: str, trial_seed: int, steps: int, hparams_seed: int = 0,
                hparams_overrides: dict | None = None, compat: bool = True, device="cpu",
                precision: str = DEFAULT_PRECISION) -> Algorithm:
    """The model of ``plench.protocol.train_run`` with the same arguments after ``steps`` steps (same hparams,
    split, seeds, batches, views and precision), without records or checkpoints; for reading an algorithm's state."""
    device = as_device(device)
    args = run_args(dataset.name, algorithm, arch=arch, hparams_seed=hparams_seed, trial_seed=trial_seed,
                    steps=steps, checkpoint_freq=steps, compat=compat, hparams_overrides=hparams_overrides,
                    precision=resolve_precision(precision, device, arch))
    hparams, data, model = setup_run(dataset, algorithm, args, device)
    loader = CyclicLoader(len(data.train_x), int(hparams["batch_size"]), args["seed"])
    augment = torch.Generator().manual_seed(args["seed"] + 1)
    model.train()
    for _ in range(steps):
        model.update(make_batch(data, next(loader), model.views, device, augment))
    return model.eval()


def compat_check_calls(algorithms: Sequence[str], *, arch: str, steps: int,
                       overrides: Mapping[str, dict | None] | None = None, precision: str = DEFAULT_PRECISION,
                       device="cpu") -> list[dict]:
    """``compat_confidences``' ``train_model`` arguments (less the dataset and device): each algorithm with the
    official ``update`` (compat) and the fixed one, ``prot_start`` (and PiCO+'s ``knn_start``) lowered to 5 (10);
    ``precision`` resolved against ``device``, named only when bf16 (as in ``run_args``)."""
    bf16 = {"precision": "bf16"} if resolve_precision(precision, device, arch) == "bf16" else {}
    calls = []
    for algorithm in algorithms:
        for compat in (True, False):
            lowered = {**((overrides or {}).get(algorithm) or {}), "prot_start": 5,
                       **({"knn_start": 10} if algorithm == "PiCO_plus" else {})}
            calls.append({"algorithm": algorithm, "arch": arch, "trial_seed": 0, "steps": steps,
                          "hparams_overrides": lowered, "compat": compat, **bf16})
    return calls


def compat_check_key(dataset: str, call: Mapping) -> str:
    """The run-log key of one ``compat_check_calls`` model on ``dataset`` (nothing is kept: it trains every time)."""
    return runs.args_hash({"dataset": dataset, **call})


def compat_confidences(dataset: PLLDataset, algorithms: Sequence[str], *, arch: str, steps: int,
                       overrides: Mapping[str, dict | None] | None = None, device="cpu",
                       precision: str = DEFAULT_PRECISION) -> pd.DataFrame:
    """PiCO+ and ALIM under the official ``update`` (compat) and the fixed one: each algorithm trained ``steps``
    steps (``train_model``, trial seed 0) both ways, its confidences read. ``prot_start`` (and PiCO+'s
    ``knn_start``) are lowered to 5 (10) so that the fixed versions leave warm-up within the run. Columns:
    algorithm (display name), compat, steps, curr_iter, "max |w - s/|S||" and uniform (confidences exactly s/|S|)."""
    rows = []
    for call in compat_check_calls(algorithms, arch=arch, steps=steps, overrides=overrides, precision=precision,
                                   device=as_device(device)):
        start = time.perf_counter()
        model = train_model(dataset, **{"precision": "fp32", **call}, device=device)
        log_run(COMPAT_CHECK_KIND, compat_check_key(dataset.name, call), built=True,
                seconds=time.perf_counter() - start)
        uniform = model.uniform_confidence()
        rows.append({"algorithm": display_name(call["algorithm"]), "compat": call["compat"], "steps": steps,
                     "curr_iter": int(model.curr_iter),
                     "max |w - s/|S||": float((model.confidence - uniform).abs().max()),
                     "uniform": bool(torch.equal(model.confidence, uniform))})
    return pd.DataFrame(rows, columns=["algorithm", "compat", "steps", "curr_iter", "max |w - s/|S||", "uniform"])


def image_compat_check(datasets: Mapping[str, PLLDataset], cfg: Mapping, device="cpu") -> pd.DataFrame:
    """``compat_confidences`` for the image notebook's ``compat_check`` settings (dataset, algorithms, steps) with
    Fig. 4's network and each algorithm's ``image_overrides``; an empty frame if that dataset was not loaded."""
    check = cfg["compat_check"]
    if check["dataset"] not in datasets:
        return compat_confidences(None, [], arch=cfg["fig4"]["arch"], steps=check["steps"])
    return compat_confidences(datasets[check["dataset"]], check["algorithms"], arch=cfg["fig4"]["arch"],
                              steps=check["steps"], overrides={a: image_overrides(cfg, a) for a in check["algorithms"]},
                              device=device, precision=precision_setting(cfg))


def split_sizes(datasets: Mapping[str, PLLDataset], trial_seed: int = 0) -> pd.DataFrame:
    """Per dataset: the training and validation rows of ``trial_seed``'s split and the average candidate-set size."""
    rows = []
    for name, ds in datasets.items():
        split = plench_split(ds, trial_seed)
        rows.append({"dataset": name, "training rows": len(split["train"]), "validation rows": len(split["val"]),
                     "avg |S|": float(np.asarray(ds.S).sum(1).mean())})
    return pd.DataFrame(rows)
