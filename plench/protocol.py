"""Plench's protocol: single runs (``train.py``), the random-search sweep (``sweep.py``) and record collection.

A run is (dataset, algorithm, hparams_seed, trial_seed): seed ``seed_hash(dataset, algorithm, hparams_seed,
trial_seed)``, hyperparameters from ``plench.hparams.hparams_for`` (hparams seed 0 = the defaults), the data
split of ``plench.data.plench_split(dataset, trial_seed)``, shuffled mini-batches (drop_last) iterated
cyclically, and a checkpoint record at every ``step % checkpoint_freq == 0`` and at the last step
(``steps - 1``), in PLENCH's schema:

    step, epoch (= step / (n_train / batch_size)), loss (and any other value ``update`` returns, each the mean
    since the previous checkpoint), step_time (mean seconds per update, batch fetch included, as in the
    official code), mem_gb + mem_source ("cuda_max_allocated" or, on CPU, the process's "cpu_max_rss"),
    val_accuracy (OA), val_covering_rate (CR), val_approximated_acc (AA), test_acc, hparams, args,
    group_size (1, or the number of runs trained together by ``train_runs_batched``).

The step-0 record is written, as the official code does, and dropped by ``plench.selection``. Metrics are
computed in eval mode on the "original" view with batches of ``eval_batch_size`` rows (512; the official
loaders use 64, which changes nothing but speed since no network here mixes rows in eval mode).

Small tabular configurations can be trained together: ``train_runs_batched`` (see its docstring) gives the
records of separate runs for the algorithms whose step is the plain ``LossAlgorithm`` step.

Precision (``PRECISIONS``, every function that trains or lists runs takes ``precision``): "auto" (the default)
trains the image networks in bfloat16 mixed precision on CUDA and everything else in fp32 (the CPU, and the
tabular MLP, whose small steps gain nothing from tensor cores); "bf16" asks for mixed precision on any device
(the CPU too, for tests); "fp32" is the official PLENCH behaviour, no autocast anywhere: the flag that reproduces
the official code's numerics on a GPU. Mixed precision (``plench.algorithms.base``): the forward passes and
losses run under ``torch.autocast(device, dtype=torch.bfloat16)``; weights, gradients, Adam's state and the
algorithms' tables (confidences, prototypes, queues) stay float32 (or float64), the maths that updates them starts
from float32 logits, and the evaluation logits are float32. The convolutional networks of a bf16 run are kept
channels_last (NHWC), the layout in which cuDNN's bf16 convolutions run fastest; the MLP is left as is. The
setting is resolved against the device before a run is named (``resolve_precision``): a bf16 run has
``"precision": "bf16"`` in its ``run_args`` (so its folder differs from the fp32 run's), and a run that resolves
to fp32 (every CPU run under "auto") keeps exactly the arguments, and folder name, it had before the setting existed.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import resource
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from plench.algorithms import ALGORITHMS, Algorithm, Batch, make_algorithm
from plench.algorithms.base import AUTOCAST_DTYPES, LossAlgorithm, view_input
from plench.data import PLLDataset, load_pll_dataset, plench_split, pll_dataset_spec
from plench.hparams import hparam_for, hparams_for
from plench.selection import approximated_accuracy, covering_rate, oracle_accuracy
from plench.stacked import StackedAdam, StackedMLP, StackedNetwork
from shared import sweep as runs
from shared.device import device_type, select_device
from shared.errors import ConfigError, unknown_choice
from shared.executor import executor_spec
from shared.runlog import log_run
from shared.seeding import seed_everything, seed_hash

VIEWS = ("x", "weak", "strong", "distill")  # Batch fields holding inputs; "x" is the original view
EVAL_BATCH_SIZE = 512
# ``shared.runlog`` kinds: a sweep's run (key: its folder name, ``shared.sweep.args_hash`` of its ``run_args``),
# and one ``measure_batched_speedup`` call (key: ``args_hash(speedup_args(...))``); both feed ``plench.cost``.
RUN_KIND = "plench-run"
SPEEDUP_KIND = "plench-speedup"
# The precision setting: "auto" (bf16 on CUDA, fp32 elsewhere), "bf16" (any device) or "fp32" (the official code's)
PRECISIONS = ("auto", "bf16", "fp32")
DEFAULT_PRECISION = "auto"


# ------------------------------------------------------------------------------------------------ precision
def resolve_precision(precision: str, device, arch: str | None = None) -> str:
    """The precision a run with the setting ``precision`` trains in on ``device``: "bf16" or "fp32" ("auto": bf16
    for the image networks on CUDA, fp32 elsewhere and for the tabular MLP (``arch="mlp"``), whose steps are too
    small for tensor cores to pay, so mixed precision would change its numbers for no time). Raises ConfigError
    naming the valid settings for any other value."""
    if precision not in PRECISIONS:
        raise unknown_choice("precision", precision, PRECISIONS)
    if precision == "auto":
        return "bf16" if device_type(device) == "cuda" and arch != "mlp" else "fp32"
    return precision


def _resolved(precision: str) -> str:
    if precision not in AUTOCAST_DTYPES:
        raise ConfigError(f"a run's precision is 'fp32' or 'bf16', got {precision!r}; resolve the setting against "
                          f"the device first (resolve_precision)")
    return precision


def autocast(device, precision: str):
    """bfloat16 autocast on ``device`` for a resolved ``precision`` of "bf16"; no context at all for "fp32"."""
    dtype = AUTOCAST_DTYPES[_resolved(precision)]
    return contextlib.nullcontext() if dtype is None else torch.autocast(device_type(device), dtype=dtype)


# ------------------------------------------------------------------------------------------------ run data
@dataclass
class RunData:
    """One run's split: training inputs (tabular (n, d) float, images (n, H, W, C) uint8), candidate sets
    (n, q) float, labels (n,), and the validation and test rows."""

    train_x: torch.Tensor
    train_S: torch.Tensor
    train_y: torch.Tensor
    val_x: torch.Tensor
    val_S: torch.Tensor
    val_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    views: Mapping[str, Callable]  # views["original" | "weak" | "strong" | "distill"](rows, generator=None) -> inputs

    @property
    def input_shape(self) -> tuple[int, ...]:
        shape = tuple(self.train_x.shape[1:])
        return shape if len(shape) == 1 else (shape[2], shape[0], shape[1])  # images: (C, H, W)


def _identity(x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    return x


def run_data(dataset: PLLDataset, trial_seed: int, device="cpu") -> RunData:
    """The split of ``dataset`` for ``trial_seed`` (``plench_split``) as tensors on ``device``.

    Tabular views are the features themselves; image views are ``plench.augment.views_for("image", H)``'s
    (the recipe follows the image size: 8 -> digits, else CIFAR), applied on ``device`` batch by batch.
    """
    split = {k: None if v is None else torch.as_tensor(np.asarray(v), dtype=torch.long)
             for k, v in plench_split(dataset, trial_seed).items()}
    X = torch.as_tensor(np.asarray(dataset.X))
    S = torch.as_tensor(np.asarray(dataset.S)).float()
    y = torch.as_tensor(np.asarray(dataset.y)).long()
    if split["test"] is not None:
        test_x, test_y = X[split["test"]], y[split["test"]]
    elif dataset.test is not None:
        test_x = torch.as_tensor(np.asarray(dataset.test[0]))
        test_y = torch.as_tensor(np.asarray(dataset.test[1])).long()
    else:
        raise ConfigError(f"dataset {dataset.name!r} has neither test rows in its split nor a test set")
    if dataset.modality == "image":
        from plench.augment import views_for  # image-only dependency (torchvision)

        views = views_for("image", int(X.shape[1]))
    else:
        views = {name: _identity for name in ("original", "weak", "strong", "distill")}
    tr, va = split["train"], split["val"]
    tensors = (X[tr], S[tr], y[tr], X[va], S[va], y[va], test_x, test_y)
    return RunData(*(t.to(device) for t in tensors), views)


class CyclicLoader:
    """Positions in the training split, ``batch_size`` at a time, reshuffled every pass, the last partial batch
    dropped: ``DataLoader(shuffle=True, drop_last=True)`` iterated cyclically, with its own generator."""

    def __init__(self, n: int, batch_size: int, seed: int):
        if n < batch_size:
            raise ConfigError(f"the training split has {n} rows, fewer than the batch size {batch_size}; "
                              "use a larger dataset or a smaller batch_size (hparams_overrides)")
        self.n, self.batch_size = n, batch_size
        self.generator = torch.Generator().manual_seed(seed)
        self._order, self._pos = torch.empty(0, dtype=torch.long), n

    def __iter__(self):
        return self

    def __next__(self) -> torch.Tensor:
        if self._pos + self.batch_size > len(self._order):
            self._order, self._pos = torch.randperm(self.n, generator=self.generator), 0
        idx = self._order[self._pos:self._pos + self.batch_size]
        self._pos += self.batch_size
        return idx


def make_batch(data: RunData, idx: torch.Tensor, views: Sequence[str], device,
               generator: torch.Generator | None = None) -> Batch:
    """The Batch of training positions ``idx`` (B,), with only the ``views`` an algorithm reads computed
    (tabular data: every view is x; image views not read are empty tensors, so a read fails loudly).
    Random augmentations draw from ``generator`` (a CPU generator)."""
    idx = idx.to(data.train_S.device)
    inputs = _view_inputs(data.views, data.train_x[idx], views, generator)
    return Batch(**inputs, s=data.train_S[idx], y=data.train_y[idx], idx=idx).to(device)


def _view_inputs(recipe, raw, views: Sequence[str], generator) -> dict[str, torch.Tensor]:
    """Batch's view fields for the raw rows: the ``views`` read (and the identity ones), the others empty."""
    wanted = {"x" if v == "original" else v for v in views}
    inputs = {}
    for field in VIEWS:
        view = recipe["original" if field == "x" else field]
        needed = field in wanted or view is _identity
        inputs[field] = view(raw, generator=generator) if needed else raw.new_empty(0)
    return inputs


def make_member_batches(data: Sequence[RunData], idx: Sequence[torch.Tensor], views: Sequence[str], device,
                        generators: Sequence[torch.Generator]) -> list[Batch]:
    """``[make_batch(d, i, views, device, g) for d, i, g in zip(data, idx, generators)]`` for G runs of one dataset
    and batch size, with each view built once for the G batches concatenated (``augment.MemberGenerators``: each
    run's draws from its own generator, so every Batch is its run's, bit for bit). Why: the stacked trainer's
    members would otherwise each dispatch a view's kernels (RandAugment: a few hundred a batch) on their own."""
    from plench.augment import MemberGenerators  # image-only dependency (torchvision)

    rows = len(idx[0])
    if any(len(i) != rows for i in idx) or len({type(d.views) for d in data}) != 1:
        raise ConfigError("make_member_batches needs runs of one view recipe and one batch size")
    idx = [i.to(d.train_S.device) for d, i in zip(data, idx)]
    raw = torch.cat([torch.as_tensor(d.train_x[i]) for d, i in zip(data, idx)])
    inputs = _view_inputs(data[0].views, raw, views, MemberGenerators(generators, rows))
    return [Batch(**{name: t[g * rows:(g + 1) * rows] for name, t in inputs.items()}, s=d.train_S[i],
                  y=d.train_y[i], idx=i).to(device)
            for g, (d, i) in enumerate(zip(data, idx))]


# ------------------------------------------------------------------------------------------------ checkpoints
def as_device(device) -> torch.device:
    """``device`` as a torch.device (strings through ``shared.device.select_device``)."""
    return device if isinstance(device, torch.device) else select_device(device)


def memory_gb(device: torch.device) -> tuple[float, str]:
    """Peak memory: CUDA max allocated (the official ``mem_gb``) or, on CPU, the process's peak RSS."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30, "cuda_max_allocated"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (2**30 if sys.platform == "darwin" else 2**20), "cpu_max_rss"


@torch.no_grad()
def predict_logits(predict: Callable, x: torch.Tensor, view: Callable, device, batch_size: int) -> torch.Tensor:
    """Logits (n, q) of ``predict`` on the rows of ``x``, ``batch_size`` rows at a time."""
    return torch.cat([predict(view(x[i:i + batch_size]).to(device)) for i in range(0, len(x), batch_size)])


def checkpoint_metrics(predict: Callable, data: RunData, device, *, compat: bool,
                       batch_size: int = EVAL_BATCH_SIZE) -> dict[str, float]:
    """OA, CR and AA on the validation rows and accuracy on the test rows, with PLENCH's record names."""
    view = data.views["original"]
    val = predict_logits(predict, data.val_x, view, device, batch_size)
    val_S = data.val_S.to(device)
    test = predict_logits(predict, data.test_x, view, device, batch_size)
    return {"val_accuracy": oracle_accuracy(val, data.val_y), "val_covering_rate": covering_rate(val, val_S),
            "val_approximated_acc": approximated_accuracy(val, val_S, compat=compat),
            "test_acc": oracle_accuracy(test, data.test_y)}


def is_checkpoint(step: int, steps: int, checkpoint_freq: int) -> bool:
    return step % checkpoint_freq == 0 or step == steps - 1


def checkpoint_record(step: int, steps_per_epoch: float, values: dict[str, list[float]], metrics: dict,
                      device, hparams: dict, args: dict, group_size: int = 1) -> dict:
    mem, source = memory_gb(device)
    return {"step": step, "epoch": step / steps_per_epoch, **{k: float(np.mean(v)) for k, v in values.items()},
            **metrics, "mem_gb": mem, "mem_source": source, "hparams": hparams, "args": args,
            "group_size": group_size}


# ------------------------------------------------------------------------------------------------ one run
def run_args(dataset: str, algorithm: str, *, arch: str, hparams_seed: int, trial_seed: int, steps: int,
             checkpoint_freq: int, compat: bool = True, hparams_overrides: dict | None = None,
             precision: str = "fp32", stack: str | None = None) -> dict:
    """The run's identity: its ``args`` record field and (hashed) its folder name under a sweep.

    ``precision`` is the resolved one ("fp32" or "bf16", ``resolve_precision``); only a bf16 run carries it, so
    fp32 runs keep the identities they had before mixed precision existed. ``stack``: the ``stack_id`` of the
    runs it is trained with (``train_runs_batched``); a run trained alone has none."""
    precision = _resolved(precision)
    args = {"dataset": dataset, "algorithm": algorithm, "arch": arch, "hparams_seed": int(hparams_seed),
            "trial_seed": int(trial_seed), "steps": int(steps), "checkpoint_freq": int(checkpoint_freq),
            "compat": bool(compat), "seed": seed_hash(dataset, algorithm, int(hparams_seed), int(trial_seed))}
    if hparams_overrides:
        args["hparams_overrides"] = dict(hparams_overrides)
    if precision == "bf16":
        args["precision"] = precision
    if stack is not None:
        args["stack"] = stack
    return args


def _check_schedule(steps: int, checkpoint_freq: int) -> None:
    if steps < 1 or checkpoint_freq < 1:
        raise ConfigError(f"steps and checkpoint_freq must be >= 1, got steps={steps}, "
                          f"checkpoint_freq={checkpoint_freq}")


def setup_run(dataset: PLLDataset, algorithm: str, args: dict, device) -> tuple[dict, RunData, Algorithm]:
    """hparams, data and the seeded algorithm of one run with ``run_args`` ``args`` (the same for separate and
    batched training and ``plench.reports.train_model``); a bf16 run's conv net is made channels_last."""
    hparams = hparams_for(algorithm, args["arch"], hparams_seed=args["hparams_seed"], trial_seed=args["trial_seed"],
                          dataset=dataset.name, compat=args["compat"])
    hparams.update(args.get("hparams_overrides") or {})
    data = run_data(dataset, args["trial_seed"], device)
    seed_everything(args["seed"])
    precision = args.get("precision", "fp32")
    model = make_algorithm(algorithm, data.input_shape, data.train_S.shape[1], data.train_S, hparams,
                           arch=args["arch"], steps=args["steps"], compat=args["compat"], precision=precision).to(device)
    if precision == "bf16" and args["arch"] != "mlp":
        model = model.to(memory_format=torch.channels_last)  # convolutions' weights NHWC (the inputs follow)
    return hparams, data, model


def train_run(dataset: PLLDataset, algorithm: str, *, arch: str, hparams_seed: int, trial_seed: int, steps: int,
              checkpoint_freq: int, out_dir, device="cpu", compat: bool = True, hparams_overrides: dict | None = None,
              eval_batch_size: int = EVAL_BATCH_SIZE, precision: str = DEFAULT_PRECISION) -> list[dict]:
    """One run (PLENCH's ``train.py``): writes ``<out_dir>/results.jsonl`` afresh, then ``done``; returns the records.

    ``compat`` goes to the algorithm and also picks the official code's form of AA (``approximated_accuracy``).
    ``precision`` (``PRECISIONS``): "auto" trains in bf16 mixed precision on CUDA, fp32 elsewhere; "fp32" is the
    official behaviour (see the module docstring).
    """
    _check_schedule(steps, checkpoint_freq)
    device = as_device(device)
    args = run_args(dataset.name, algorithm, arch=arch, hparams_seed=hparams_seed, trial_seed=trial_seed,
                    steps=steps, checkpoint_freq=checkpoint_freq, compat=compat, hparams_overrides=hparams_overrides,
                    precision=resolve_precision(precision, device, arch))
    if device.type == "cuda":  # mem_gb is this run's peak, not the process's
        torch.cuda.reset_peak_memory_stats(device)
    hparams, data, model = setup_run(dataset, algorithm, args, device)
    loader = CyclicLoader(len(data.train_x), int(hparams["batch_size"]), args["seed"])
    augment = torch.Generator().manual_seed(args["seed"] + 1)  # image views' randomness, apart from the model's
    steps_per_epoch = len(data.train_x) / int(hparams["batch_size"])
    values: dict[str, list[float]] = defaultdict(list)
    records = []
    with runs.RecordWriter(out_dir) as writer:
        for step in range(steps):
            model.train()
            start = time.perf_counter()
            losses = model.update(make_batch(data, next(loader), model.views, device, augment))
            values["step_time"].append(time.perf_counter() - start)
            for key, value in losses.items():
                values[key].append(value)
            if is_checkpoint(step, steps, checkpoint_freq):
                model.eval()
                metrics = checkpoint_metrics(model.predict, data, device, compat=compat, batch_size=eval_batch_size)
                records.append(checkpoint_record(step, steps_per_epoch, values, metrics, device, hparams, args))
                writer.write(records[-1])
                values = defaultdict(list)
    runs.mark_done(out_dir)
    return records


# ------------------------------------------------------------------------------------------------ batched runs
def batching_obstacle(model: Algorithm, arch: str | None = None) -> str | None:
    """Why ``model`` cannot be trained by ``train_runs_batched`` (None if it can), on ``arch`` (default its own)."""
    cls = type(model)
    own = cls.stacked_step.__func__ is not Algorithm.stacked_step.__func__  # the class stacks its own step
    if not own and not isinstance(model, LossAlgorithm):
        return f"{cls.__name__} is not a LossAlgorithm"
    if own:  # a stacked step is written for one train_step: a subclass with its own step does not inherit it
        step_owner = next(c for c in cls.__mro__ if "train_step" in vars(c))
        stack_owner = next(c for c in cls.__mro__ if "stacked_step" in vars(c))
        if step_owner is not stack_owner:
            return f"{cls.__name__}'s train_step is not the one {stack_owner.__name__}'s stacked step reproduces"
    if own and (arch or model.arch) == "mlp":  # the tabular sweeps stack StackedMLP's loss step only (CPU speed)
        return f"{cls.__name__}'s own stacked step is for image networks; its MLP runs train alone"
    for method, base in (("train_step", None if own else LossAlgorithm), ("update", Algorithm),
                         ("predict", Algorithm)):
        if base is not None and getattr(cls, method) is not getattr(base, method):
            return f"{cls.__name__} overrides {method}()"
    network = {id(p) for p in model.network.parameters()}
    if not own and {id(p) for p in model.parameters()} != network:
        return f"{cls.__name__} has parameters outside its network"
    # StackedAdam is torch.optim.Adam's plain update of one parameter group: every optimizer must be that, and (a
    # LossAlgorithm) over exactly the network, or (an own stacked step) the network among what they train
    optimizers = [v for v in vars(model).values() if isinstance(v, torch.optim.Optimizer)]
    trained = {id(p) for opt in optimizers for group in opt.param_groups for p in group["params"]}
    if not optimizers or any(type(opt) is not torch.optim.Adam or len(opt.param_groups) != 1 or any(
            opt.param_groups[0].get(flag) for flag in ("amsgrad", "maximize", "decoupled_weight_decay"))
                             for opt in optimizers) \
            or (trained != network if not own else not network <= trained):
        return f"{cls.__name__}'s optimizer is not one plain Adam over its network"
    return None


def stack_shape(algorithm: str, hparams: Mapping[str, Any]) -> tuple:
    """What runs of ``algorithm`` must share to train as one stack: its ``stack_hparams`` (batch size; DIRK's
    ``feat_dim`` too), from a run's hyperparameters."""
    return tuple(hparams[name] for name in ALGORITHMS[algorithm].stack_hparams)


@functools.cache
def algorithm_stacks(algorithm: str, arch: str = "mlp") -> bool:
    """Whether ``train_runs_batched`` stacks ``algorithm``'s runs on ``arch`` (``batching_obstacle`` of a tiny MLP
    instance, asked for ``arch``: the obstacles are the class's and the kind of network's, not the data's)."""
    hp = hparams_for(algorithm, "mlp")
    S = torch.tensor([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]])  # every class has complementary labels
    model = make_algorithm(algorithm, (2,), 3, S, {**hp, "batch_size": 2}, arch="mlp", steps=10)
    return batching_obstacle(model, arch) is None


def stack_id(members: Sequence[dict]) -> str:
    """12 hex digits naming a stack: SHA-256 of its members' identities (``run_args`` without a stack), in order."""
    names = [runs.args_hash({k: v for k, v in args.items() if k != "stack"}) for args in members]
    return hashlib.sha256(json.dumps(names).encode()).hexdigest()[:12]


def _batched_group(members: list[dict], models: list[Algorithm], hparams: list[dict], data: list[RunData],
                   out_dirs: list, device, eval_batch_size: int) -> list[list[dict]]:
    """Train one group of runs with the same batch size together; see ``train_runs_batched``. A member whose
    ``out_dirs`` entry is None is trained (its stack is part of every member's numbers) but not written."""
    G, steps, freq = len(members), members[0]["steps"], members[0]["checkpoint_freq"]
    batch_size = int(hparams[0]["batch_size"])
    tabular = models[0].arch == "mlp"
    if not tabular and models[0].precision == "bf16" and device.type != "cuda":
        raise ConfigError(f"stacked {models[0].arch} runs in bf16 need CUDA: the CPU's autocast does not reach the "
                          "convolutions inside torch.func.vmap (they would run in fp32 while the records say bf16); "
                          "use precision fp32 (or auto) on the CPU, or batched false")
    if device.type == "cuda":  # mem_gb is this stack's peak, not the process's
        torch.cuda.reset_peak_memory_stats(device)
    own = type(models[0]).stacked_step(models)  # an algorithm's own stacked step (DIRK), else LossAlgorithm's
    if own is not None:
        stack = own
    else:
        stack = StackedMLP([m.network for m in models]) if tabular else StackedNetwork([m.network for m in models])
        adam = StackedAdam(stack.params, [m.optimizer for m in models])
    precision, views = models[0].precision, models[0].views
    refresh = getattr(models[0], "uses_confidence", False)
    loaders = [CyclicLoader(len(d.train_x), batch_size, a["seed"]) for d, a in zip(data, members)]
    if tabular:  # the features are the inputs: one gather for every member
        train_x = torch.stack([d.train_x for d in data]).to(device)  # (G, n_train, d): same dataset, same split sizes
        train_S = torch.stack([d.train_S for d in data]).to(device)
        members_column = torch.arange(G, device=device)[:, None]
    else:  # each member's weak view from its own generator, as train_run draws it
        augments = [torch.Generator().manual_seed(a["seed"] + 1) for a in members]
    steps_per_epoch = len(data[0].train_x) / batch_size
    values = [defaultdict(list) for _ in members]
    records: list[list[dict]] = [[] for _ in members]
    writers = [None if out is None else runs.RecordWriter(out) for out in out_dirs]

    def member_predict(g: int) -> Callable[[torch.Tensor], torch.Tensor]:
        if own is not None:
            return own.predictor(g)
        network = stack.member(g)

        def predict(x: torch.Tensor) -> torch.Tensor:  # Algorithm.predict's: float32 logits
            with autocast(x.device, precision):
                return network(x).float()

        return predict

    try:
        for step in range(steps):
            start = time.perf_counter()
            if tabular:
                idx = torch.stack([next(loader) for loader in loaders]).to(device)  # (G, B)
                x, s = train_x[members_column, idx], train_S[members_column, idx]  # (G, B, d), (G, B, q)
            else:
                batches = make_member_batches(data, [next(loader) for loader in loaders], views, device, augments)
                s, idx = torch.stack([b.s for b in batches]), torch.stack([b.idx for b in batches])
            if own is not None:
                loss_values = own(batches)
            else:
                # one (G, B, ...) input per view the algorithm reads, forwarded in its order (tabular: each is x)
                inputs = [x] * len(views) if tabular else \
                    [torch.stack([view_input(b, view) for b in batches]) for view in views]
                w = [m.confidence[i] if m.uses_confidence else None for m, i in zip(models, idx)]
                skips = [m.skipped(s[g]) for g, m in enumerate(models)]
                active = None if skips[0] is None else [not skip for skip in torch.stack(skips).tolist()]
                # a member that skips this step is left as its run would be: no update, and (the stack still forwards
                # its batch) its BatchNorm statistics put back
                kept = None if active is None or all(active) or tabular else \
                    {name: b.clone() for name, b in stack.buffers.items()}
                loss_values = [0.0] * G
                if active is None or any(active):
                    with autocast(device, precision):  # as LossAlgorithm: losses and refreshes on float32 logits
                        logits = [stack.forward(x).float() for x in inputs]
                        losses = torch.stack([m.loss(*(z[g] for z in logits), s[g], w[g]).float()
                                              if active is None or active[g] else logits[0].new_zeros(())
                                              for g, m in enumerate(models)])
                    adam.step(torch.autograd.grad(losses.sum(), stack.params), active)
                    with torch.no_grad():
                        if refresh:  # LossAlgorithm's re-forward, in train mode (BatchNorm statistics move as a run's)
                            with autocast(device, precision):
                                fresh = [stack.forward(x).float() for x in inputs]
                        for g, m in enumerate(models):
                            if active is None or active[g]:
                                if m.uses_confidence:
                                    m.confidence[idx[g]] = m.refresh(*(z[g] for z in fresh), s[g], w[g]).to(
                                        m.confidence.dtype)
                                m.after_step()
                    loss_values = losses.detach().tolist()
                if kept is not None:
                    for name, before in kept.items():
                        for g in range(G):
                            if not active[g]:
                                stack.buffers[name][g].copy_(before[g])
            for m in models:
                m.curr_iter += 1
            elapsed = (time.perf_counter() - start) / G
            for g in range(G):
                values[g]["step_time"].append(elapsed)
                values[g]["loss"].append(loss_values[g])
            if is_checkpoint(step, steps, freq):
                if not tabular:
                    stack.eval()
                for g in range(G):
                    metrics = checkpoint_metrics(member_predict(g), data[g], device, compat=members[g]["compat"],
                                                 batch_size=eval_batch_size)
                    records[g].append(checkpoint_record(step, steps_per_epoch, values[g], metrics, device, hparams[g],
                                                        members[g], group_size=G))
                    if writers[g] is not None:
                        writers[g].write(records[g][-1])
                if not tabular:
                    stack.train()
                values = [defaultdict(list) for _ in members]
    finally:
        for writer in writers:
            if writer is not None:
                writer.close()
    for out in out_dirs:
        if out is not None:
            runs.mark_done(out)
    return records


def train_runs_batched(dataset: PLLDataset, algorithm: str, configs: Sequence[tuple[int, int]], *, steps: int,
                       checkpoint_freq: int, out_dirs: Sequence, arch: str = "mlp", device="cpu", compat: bool = True,
                       hparams_overrides: dict | None = None, eval_batch_size: int = EVAL_BATCH_SIZE,
                       precision: str = DEFAULT_PRECISION, stack: str | None = None) -> list[list[dict]]:
    """Train the runs ``configs`` = [(hparams_seed, trial_seed), ...] of one algorithm on one dataset together.

    Each run keeps its own seed, initial weights, split, shuffling, augmentations, confidences, hyperparameters
    and Adam state, and writes the same records to ``out_dirs[i]`` as ``train_run`` would (plus ``group_size``;
    ``step_time`` is the group's step time divided by its size; an ``out_dirs`` entry None: trained, not written).
    Runs with the same ``stack_shape`` form one group: their networks are stacked (``plench.stacked``: the MLP as
    ``baddbmm`` products, a convolutional network with ``torch.func.vmap``), each view is built once for the group
    (``make_member_batches``), every step is one batched forward per view the algorithm reads (CRDPLL: weak, then
    strong), the members' own ``loss`` on their slices of the logits, one backward of the summed losses (members
    share no parameter, so each gets its own gradient) and one batched Adam update; algorithms that keep
    confidences refresh them from a second batched forward of the same views. ``stack`` (``stack_id``) goes into
    every member's ``args``: a stacked run's identity names its stack, since its last bits depend on it.

    Algorithms whose step is exactly ``LossAlgorithm``'s are batched so, and those that give their own stacked step
    (``Algorithm.stacked_step``: DIRK, PiCO) with it; runs form groups by the algorithm's ``stack_hparams`` (batch
    size; DIRK's and PiCO's ``feat_dim`` too). Others (``batching_obstacle``) are trained one by one, with a
    warning saying why. Records match separate runs up to float rounding, not
    bit for bit: ``baddbmm`` and ``nn.Linear``'s ``addmm`` sum in different orders, and the tiny differences
    can grow over training. Measured on the 1,797 digits (FPS 0.3), 3 runs x 1,000 steps: PRODEN, CC and CAVL
    losses within 3e-4 relative and every accuracy identical; one LWS configuration drifted by up to 2 of 161
    validation rows. After 40 steps losses agree to ~2e-8 (tests/plench/test_protocol.py). ``precision`` as
    ``train_run``'s: under bf16 the stacked forwards and the losses run under autocast, the stacked weights and
    the batched Adam stay float32.
    """
    if len(configs) != len(out_dirs):
        raise ConfigError(f"{len(configs)} configs but {len(out_dirs)} out_dirs; give one folder per run")
    _check_schedule(steps, checkpoint_freq)
    device = as_device(device)
    precision = resolve_precision(precision, device, arch)
    members = [run_args(dataset.name, algorithm, arch=arch, hparams_seed=h, trial_seed=t, steps=steps,
                        checkpoint_freq=checkpoint_freq, compat=compat, hparams_overrides=hparams_overrides,
                        precision=precision, stack=stack)
               for h, t in configs]
    setups = [setup_run(dataset, algorithm, args, device) for args in members]
    obstacle = batching_obstacle(setups[0][2])
    shapes = [stack_shape(algorithm, h) for h, _, _ in setups]
    if stack is not None and (obstacle is not None or len(set(shapes)) > 1):
        names = " and ".join(ALGORITHMS[algorithm].stack_hparams)
        raise ConfigError(f"stack {stack}: {algorithm}'s runs cannot be trained as one stack "
                          f"({obstacle or f'their {names} differ'}); list them with sweep_args")
    if obstacle is not None:
        warnings.warn(f"train_runs_batched: {algorithm} cannot be batched ({obstacle}); training "
                      f"{len(configs)} runs one by one", stacklevel=2)
        return [train_run(dataset, algorithm, arch=arch, hparams_seed=h, trial_seed=t, steps=steps,
                          checkpoint_freq=checkpoint_freq, out_dir=out, device=device, compat=compat,
                          hparams_overrides=hparams_overrides, eval_batch_size=eval_batch_size, precision=precision)
                for (h, t), out in zip(configs, out_dirs)]
    results: list[list[dict] | None] = [None] * len(configs)
    by_shape: dict[tuple, list[int]] = defaultdict(list)
    for i, shape in enumerate(shapes):
        by_shape[shape].append(i)
    for group in by_shape.values():
        hparams, data, models = zip(*(setups[i] for i in group))
        for i, recs in zip(group, _batched_group([members[i] for i in group], list(models), list(hparams), list(data),
                                                 [out_dirs[i] for i in group], device, eval_batch_size)):
            results[i] = recs
    return results


def speedup_args(dataset: str, algorithm: str, configs: Sequence[tuple[int, int]], *, steps: int,
                 checkpoint_freq: int, compat: bool = True, hparams_overrides: dict | None = None,
                 precision: str = "fp32") -> dict:
    """What one ``measure_batched_speedup`` call trains (its identity in the run log, hashed); ``precision``
    resolved, named only when bf16 (as in ``run_args``)."""
    args = {"dataset": dataset, "algorithm": algorithm, "configs": [[int(h), int(t)] for h, t in configs],
            "steps": int(steps), "checkpoint_freq": int(checkpoint_freq), "compat": bool(compat),
            "hparams_overrides": dict(hparams_overrides) if hparams_overrides else None}
    if _resolved(precision) == "bf16":
        args["precision"] = precision
    return args


def measure_batched_speedup(dataset: PLLDataset, algorithm: str, configs: Sequence[tuple[int, int]], *, steps: int,
                            checkpoint_freq: int, device="cpu", compat: bool = True,
                            hparams_overrides: dict | None = None,
                            precision: str = DEFAULT_PRECISION) -> dict[str, float]:
    """Wall-clock seconds of ``configs`` trained one by one (``train_run``) and batched (``train_runs_batched``),
    in this process, one after the other, with the same MLP runs; ``speedup`` = one_by_one_s / batched_s.
    Both paths first run two steps untimed, so one-time start-up costs count for neither. The call is logged as
    one built ``SPEEDUP_KIND`` run (nothing is kept: it trains every time)."""
    began = time.perf_counter()
    precision = resolve_precision(precision, as_device(device), "mlp")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (h, t), warm = configs[0], {"steps": 2, "checkpoint_freq": 1, "device": device, "compat": compat,
                                    "hparams_overrides": hparams_overrides, "precision": precision}
        train_run(dataset, algorithm, arch="mlp", hparams_seed=h, trial_seed=t, out_dir=tmp / "warm", **warm)
        pair = configs[:2]
        train_runs_batched(dataset, algorithm, pair, out_dirs=[tmp / f"warm{i}" for i in range(len(pair))], **warm)
        start = time.perf_counter()
        for i, (h, t) in enumerate(configs):
            train_run(dataset, algorithm, arch="mlp", hparams_seed=h, trial_seed=t, steps=steps,
                      checkpoint_freq=checkpoint_freq, out_dir=tmp / f"single{i}", device=device, compat=compat,
                      hparams_overrides=hparams_overrides, precision=precision)
        one_by_one = time.perf_counter() - start
        start = time.perf_counter()
        train_runs_batched(dataset, algorithm, configs, steps=steps, checkpoint_freq=checkpoint_freq,
                           out_dirs=[tmp / f"batched{i}" for i in range(len(configs))], device=device, compat=compat,
                           hparams_overrides=hparams_overrides, precision=precision)
        batched = time.perf_counter() - start
    key = runs.args_hash(speedup_args(dataset.name, algorithm, configs, steps=steps, checkpoint_freq=checkpoint_freq,
                                      compat=compat, hparams_overrides=hparams_overrides, precision=precision))
    log_run(SPEEDUP_KIND, key, built=True, seconds=time.perf_counter() - began)
    return {"runs": len(configs), "steps": steps, "one_by_one_s": one_by_one, "batched_s": batched,
            "speedup": one_by_one / batched, "threads": torch.get_num_threads(), "device": str(as_device(device))}


# ------------------------------------------------------------------------------------------------ sweeps
class _SweepWorker:
    """Picklable: trains one task (a list of (args, run_dir) of one dataset and algorithm), batched if it has several.

    It carries the algorithm classes (pickled by module and name), so a spawned worker has them registered
    even when ``plench.algorithms`` alone does not import them.
    """

    def __init__(self, datasets: dict[str, PLLDataset], algorithms: Sequence[str], device: str, eval_batch_size: int):
        unknown = [a for a in algorithms if a not in ALGORITHMS]
        if unknown:
            raise unknown_choice("algorithm", unknown[0], ALGORITHMS)
        self.classes = {a: ALGORITHMS[a] for a in algorithms}
        self.datasets, self.device, self.eval_batch_size = datasets, device, eval_batch_size

    def __call__(self, task: list[tuple[dict, str]]) -> None:
        # Under the runs' locks: another process sharing the folder (a notebook with common runs, a preempted Slurm
        # array task run again) may have trained some while this task was queued; those are read, not retrained.
        with runs.run_locks([run_dir for _, run_dir in task]):
            done = [(args, run_dir) for args, run_dir in task if runs.is_done(run_dir)]
            todo = [(args, run_dir) for args, run_dir in task if not runs.is_done(run_dir)]
            start = time.perf_counter()
            if todo:
                self._train(task, {str(run_dir) for _, run_dir in done})
        for _, run_dir in done:
            log_run(RUN_KIND, Path(run_dir).name, built=False)
        seconds = (time.perf_counter() - start) / len(task)  # a stack's time, shared by all its members
        for _, run_dir in todo:
            log_run(RUN_KIND, Path(run_dir).name, built=True, seconds=seconds)

    def _train(self, task: list[tuple[dict, str]], done: set[str]) -> None:
        """Train ``task``'s runs but those in ``done``; a stack trains whole (its runs' numbers depend on every
        member) and writes only the runs not done."""
        first = task[0][0]
        for name, cls in self.classes.items():
            ALGORITHMS.setdefault(name, cls)
        common = {"arch": first["arch"], "steps": first["steps"], "checkpoint_freq": first["checkpoint_freq"],
                  "device": self.device, "compat": first["compat"], "hparams_overrides": first.get("hparams_overrides"),
                  "eval_batch_size": self.eval_batch_size, "precision": first.get("precision", "fp32")}
        dataset = self.datasets[first["dataset"]]
        if "stack" not in first:
            for args, run_dir in task:
                if str(run_dir) not in done:
                    train_run(dataset, args["algorithm"], hparams_seed=args["hparams_seed"],
                              trial_seed=args["trial_seed"], out_dir=runs.reset_run_dir(run_dir), **common)
            return
        members = [args for args, _ in task]
        if {args.get("stack") for args in members} != {first["stack"]} or stack_id(members) != first["stack"]:
            raise ConfigError(f"a task holds runs of other stacks than {first['stack']}; list them with sweep_args")
        dirs = [None if str(run_dir) in done else runs.reset_run_dir(run_dir) for _, run_dir in task]
        train_runs_batched(dataset, first["algorithm"], [(a["hparams_seed"], a["trial_seed"]) for a, _ in task],
                           out_dirs=dirs, stack=first["stack"], **common)


# Where ``sweep(batched="auto")`` trains configurations together (see ``batching_pays``).
BATCHED_AUTO_MAX_WORK = 10_000  # batch size x (input features + classes) of one member's step
BATCHED_CHOICES = (False, True, "auto")


def batching_pays(batch_size: int, batched: bool | str, width: int | None = None) -> bool:
    """Whether ``sweep`` trains MLP runs with this batch size on data of this ``width`` (input features +
    classes, ``data_width``) in stacked groups: never with ``batched=False``, always with ``True``, and with
    ``"auto"`` only when a member's step is small, ``batch_size * width <= BATCHED_AUTO_MAX_WORK`` (10,000).

    Stacking saves each member's per-step overhead (Python, op dispatch, its own Adam call) but none of its
    arithmetic, and the stacked products and Adam update run slower per element than separate ones once the
    step is large: wide tables lose at every batch size. Speed-up (one by one / batched) measured with
    ``measure_batched_speedup`` on this project's 2-core CPU machines (one torch thread, 8 configurations x 200
    steps, one by one then batched in one process; PRODEN, CC and, on the first two, LWS; ranges over 4-14
    measurements, some while other jobs loaded the machine; tables of 2,000 rows shaped like the PALM files):

    ======================  =====  =========  =========  =========  =========
    data                    width  batch 32   batch 64   batch 128  batch 256
    ======================  =====  =========  =========  =========  =========
    PLDigits (G = 2 to 16)     74  1.13-2.09  1.18-1.86  1.18-1.53  0.93-1.55
    Birdsong-shaped            51  1.93-2.06  1.72-1.89  1.15-1.62
    MSRCv2-shaped              71  1.77-1.89  1.56-1.77  1.25-1.56
    Lost-shaped               124  0.92-1.63  1.16-1.55  0.97-1.79  0.70-1.18
    synthetic-manyclass       140  1.23-1.54  0.74-1.50  0.88-1.72  0.51-1.10
    English-shaped            345  0.80-1.04  0.93-1.07  0.85-1.03
    Malagasy-shaped           428  0.87-1.00  0.83-0.97  0.78-0.95
    Soccer Player-shaped      450  0.71-0.83  0.49-0.83  0.58-1.02  0.39-0.83
    Mirflickr-shaped         1550  0.24-0.54  0.37-0.49  0.38-0.82  0.54-1.21
    ======================  =====  =========  =========  =========  =========

    The rule batches the cells that paid in every clean measurement (the narrow tables up to batch size 128,
    Lost and synthetic-manyclass up to 64) and none of the wide ones; of the nine PALM tables, Lost, MSRCv2 and
    Birdsong are batched, Mirflickr, Malagasy, Soccer Player, Italian, Yahoo! News and English are not. On a
    GPU nothing has been measured: pass ``batched=True`` there to batch every group.
    """
    if batched not in BATCHED_CHOICES:
        raise unknown_choice("batched", batched, BATCHED_CHOICES)
    if batched is True or batched is False:
        return bool(batched)
    if width is None:
        raise ConfigError("batched='auto' needs the data's width (input features + classes) to decide")
    return int(batch_size) * int(width) <= BATCHED_AUTO_MAX_WORK


def data_width(dataset: PLLDataset) -> int:
    """Input features plus classes: with the batch size, how much arithmetic one MLP step of ``dataset`` takes."""
    return int(np.prod(np.asarray(dataset.X).shape[1:])) + dataset.num_classes


def sweep_tasks(todo: Sequence[tuple[dict, object]], *, batched: bool | str = False, max_group: int = 16,
                widths: Mapping[str, int] | None = None) -> list[list[tuple[dict, str]]]:
    """The runs ``todo`` = [(run_args, run_dir), ...] as tasks: a task of several runs is trained together
    (``train_runs_batched``), a task of one run alone. Runs share a task when ``batching_pays`` for their batch
    size and dataset width (``widths``: dataset name -> ``data_width``, needed with "auto", which batches MLPs
    only) and they have the same dataset, algorithm, steps, batch size and the algorithm's other ``stack_hparams``
    (at most ``max_group`` per task)."""
    if batched not in BATCHED_CHOICES:
        raise unknown_choice("batched", batched, BATCHED_CHOICES)
    groups: dict[tuple, list[tuple[dict, str]]] = defaultdict(list)
    for args, run_dir in todo:
        key: tuple = (str(run_dir),)  # one run per task unless batched
        if batched is True or (batched == "auto" and args["arch"] == "mlp"):
            overrides = args.get("hparams_overrides") or {}
            batch_size = int(overrides["batch_size"] if "batch_size" in overrides else
                             hparam_for("batch_size", args["algorithm"], args["arch"], hparams_seed=args["hparams_seed"],
                                        trial_seed=args["trial_seed"], dataset=args["dataset"], compat=args["compat"]))
            if batching_pays(batch_size, batched, (widths or {}).get(args["dataset"])):
                others = tuple(overrides[name] if name in overrides else
                               hparam_for(name, args["algorithm"], args["arch"], hparams_seed=args["hparams_seed"],
                                          trial_seed=args["trial_seed"], dataset=args["dataset"],
                                          compat=args["compat"])
                               for name in ALGORITHMS[args["algorithm"]].stack_hparams if name != "batch_size")
                key = (args["dataset"], args["algorithm"], args["steps"], batch_size, *others, args.get("precision"))
        groups[key].append((args, str(run_dir)))
    return [group[i:i + max_group] for group in groups.values() for i in range(0, len(group), max_group)]


def sweep_args(datasets: Sequence[PLLDataset | str], algorithms: Sequence[str], *, n_hparams: int, n_trials: int,
               arch: str, checkpoint_freq: int, steps: int | None = None, compat: bool = True,
               hparams_overrides: dict | None = None, precision: str = DEFAULT_PRECISION,
               device="cpu", batched: bool | str = False, max_group: int = 16,
               widths: Mapping[str, int] | None = None) -> list[dict]:
    """The ``run_args`` of every run ``sweep`` defines with these settings, in its order: trial seeds
    0..n_trials-1 x datasets x algorithms x hparams seeds 0..n_hparams-1. A dataset given by name takes its
    registry ``steps`` when ``steps`` is None (no data is loaded). ``precision`` is resolved against ``device``
    (the sweep's: "cpu", "cuda", "cuda:N" or "auto"; ``resolve_precision``), as ``sweep`` does.

    With ``batched`` (``sweep_tasks``, at most ``max_group`` runs a stack), the runs that will be trained as one
    stack carry its ``stack_id``: their identity names their stack, so two notebooks that form the same stack
    share its runs and a run stacked otherwise is never read as this one. "auto" decides by the datasets' widths
    (``data_width``; ``widths`` gives them where the datasets are names or data-less stubs).
    """
    def own_steps(d):
        return d.steps if isinstance(d, PLLDataset) else pll_dataset_spec(d).steps

    names = [d.name if isinstance(d, PLLDataset) else d for d in datasets]
    if len(set(names)) != len(names):
        raise ConfigError(f"dataset names must be unique (they name the runs): {names}")
    precision = resolve_precision(precision, device, arch)
    args_list = [run_args(name, a, arch=arch, hparams_seed=h, trial_seed=t, steps=steps or own_steps(d),
                          checkpoint_freq=checkpoint_freq, compat=compat, hparams_overrides=hparams_overrides,
                          precision=precision)
                 for t in range(n_trials) for name, d in zip(names, datasets) for a in algorithms
                 for h in range(n_hparams)]
    if batched is False:
        return args_list
    widths = {**{d.name: data_width(d) for d in datasets if isinstance(d, PLLDataset)}, **(widths or {})}
    if batched == "auto" and set(names) - set(widths):
        raise ConfigError("batched='auto' decides by the data's width: pass the datasets, not their names, or widths")
    for task in sweep_tasks([(args, str(i)) for i, args in enumerate(args_list)], batched=batched,
                            max_group=max_group, widths=widths):
        if len(task) > 1 and algorithm_stacks(task[0][0]["algorithm"], arch):
            if arch != "mlp" and precision == "bf16" and device_type(device) != "cuda":
                raise ConfigError(f"stacked {arch} runs in bf16 need CUDA (the CPU's autocast does not reach the "
                                  "convolutions inside torch.func.vmap); use precision fp32 or auto on the CPU, or "
                                  "batched false")
            sid = stack_id([args for args, _ in task])
            for _, i in task:
                args_list[int(i)] = {**args_list[int(i)], "stack": sid}
    return args_list


def stacked_tasks(args_list: Sequence[dict], out_dir) -> list[list[tuple[dict, Path]]]:
    """The tasks that train the runs of ``args_list`` not done under ``out_dir``: a stack (``sweep_args``) with
    any run not done is one task of all its runs, in order (its finished runs are retrained with it, not
    rewritten: ``_SweepWorker``); a run without a stack is a task of its own."""
    stacks: dict[str, list[tuple[dict, Path]]] = defaultdict(list)
    tasks: list[list[tuple[dict, Path]]] = []
    for args in args_list:
        item = (args, runs.run_dir_for(args, out_dir))
        if "stack" in args:
            if not stacks[args["stack"]]:
                tasks.append(stacks[args["stack"]])  # filled in place, in the order the stack first appears
            stacks[args["stack"]].append(item)
        else:
            tasks.append([item])
    return [task for task in tasks if not all(runs.is_done(run_dir) for _, run_dir in task)]


def _run_names(task: list[tuple[dict, str]]) -> list[str]:
    return [Path(run_dir).name for _, run_dir in task]


def sweep(datasets: Sequence[PLLDataset | str], algorithms: Sequence[str], *, n_hparams: int, n_trials: int, arch: str,
          checkpoint_freq: int, out_dir, steps: int | None = None, jobs: int = 1, device: str = "cpu",
          compat: bool = True, hparams_overrides: dict | None = None, batched: bool | str = False,
          max_group: int = 16, data_dir=None, eval_batch_size: int = EVAL_BATCH_SIZE, executor=None,
          precision: str = DEFAULT_PRECISION) -> dict[str, int]:
    """PLENCH's sweep: every (trial_seed < n_trials, dataset, algorithm, hparams_seed < n_hparams) run, resumably.

    ``datasets`` are PLLDatasets or names for ``load_pll_dataset(name, data_dir)``; ``steps=None`` uses each
    dataset's own ``steps``. Runs already ``done`` under ``out_dir`` are skipped and incomplete ones re-run.
    ``jobs`` processes (one torch thread each) share the work, or ``executor`` runs it (``shared.sweep.map_jobs``:
    an ExecutorSpec or a setting such as ``{kind: slurm, partition: gpu, wait: false}``; on Slurm the tasks go
    out as job arrays, submitit's logs and the ledger of jobs in flight go to ``<out_dir>/.submitit``, and with
    ``wait: false`` the call raises ``shared.sweep.SweepPending`` once submitted; the next call collects). Several
    processes may share ``out_dir`` (notebooks whose settings define common runs): each run is trained once, under
    its lock (``shared.sweep.run_locks``), the others read it, and a run one launch has in flight on Slurm is not
    submitted by another (the ledger is the folder's). ``batched`` (see ``sweep_tasks``):
    False trains run by run; True trains the MLP runs of one dataset, algorithm and batch size together
    (``train_runs_batched``), at most ``max_group`` at a time; "auto" does so only where it was measured to pay
    on a CPU (``batching_pays``: small batches of narrow tables). ``precision``: "auto" (bf16 mixed precision on
    CUDA, fp32 elsewhere), "bf16" or "fp32" (the official behaviour), resolved against ``device`` (bf16 runs are
    named apart: ``run_args``). ``sweep_args`` lists the runs and ``select_runs`` picks their records. Returns
    counts ``{"total", "skipped", "restarted", "ran"}``.
    """
    if batched not in BATCHED_CHOICES:
        raise unknown_choice("batched", batched, BATCHED_CHOICES)
    loaded = [load_pll_dataset(d, data_dir) if isinstance(d, str) else d for d in datasets]
    by_name = {d.name: d for d in loaded}
    worker = _SweepWorker(by_name, algorithms, device, eval_batch_size)
    args_list = sweep_args(loaded, algorithms, n_hparams=n_hparams, n_trials=n_trials, arch=arch,
                           checkpoint_freq=checkpoint_freq, steps=steps, compat=compat,
                           hparams_overrides=hparams_overrides, precision=precision, device=device,
                           batched=batched, max_group=max_group)
    _, counts = runs.pending(args_list, out_dir)
    for args in args_list:  # the runs found done are logged here; the worker logs those it trains
        run_dir = runs.run_dir_for(args, out_dir)
        if runs.is_done(run_dir):
            log_run(RUN_KIND, run_dir.name, built=False)
    spec = executor_spec(executor, jobs=jobs, threads=1)
    folder = Path(out_dir) / runs.SUBMITIT_FOLDER
    tasks = stacked_tasks(args_list, out_dir)
    if spec is not None and spec.kind == "slurm":  # runs that jobs of an earlier launch still hold stay with them
        flying = runs.in_flight(folder)
        tasks = [task for task in tasks if not any(run_dir.name in flying for _, run_dir in task)]
    runs.map_jobs(worker, tasks, jobs=jobs, desc="plench sweep", executor=spec, folder=folder, units=_run_names)
    return counts


def select_runs(records: pd.DataFrame, expected: Sequence[dict]) -> pd.DataFrame:
    """The records of exactly the runs ``expected`` (``run_args`` dicts, e.g. from ``sweep_args``), nothing else.

    A sweep folder keeps every run it ever held: a larger earlier sweep, other steps, other overrides. Tables
    must show the runs the current settings define, each trial seed with the same configurations, so runs are
    matched by identity: a run's folder name is the hash of its arguments (``shared.sweep.run_dir_for``).
    Raises ConfigError naming the runs the settings define that have no finished records (run the sweep).
    """
    wanted = {runs.args_hash(args): args for args in expected}
    if "run" not in records.columns:
        raise ConfigError("select_runs needs the records' 'run' column (the run folder names); use collect()")
    chosen = records[records["run"].isin(list(wanted))]
    found = set(chosen["run"])
    missing = [args for key, args in wanted.items() if key not in found]
    if missing:
        shown = "; ".join(", ".join(f"{k}={args[k]}" for k in ("dataset", "algorithm", "hparams_seed", "trial_seed",
                                                                "steps", "compat") if k in args) for args in missing[:3])
        raise ConfigError(f"{len(missing)} of the {len(wanted)} runs these settings define have no finished records "
                          f"(e.g. {shown}); run the sweep with the same settings first")
    return chosen.reset_index(drop=True)


@dataclass(frozen=True)
class Grid:
    """The settings of one ``sweep`` call: the runs it defines (``run_args``) and how they are trained."""

    algorithms: tuple[str, ...]
    n_hparams: int
    n_trials: int
    arch: str
    checkpoint_freq: int
    steps: int | None = None  # None: each dataset's own
    compat: bool = True
    hparams_overrides: dict | None = None
    batched: bool | str = False
    executor: Any = None  # where the runs train: None (this process) or a setting for shared.executor.executor_spec
    precision: str = DEFAULT_PRECISION  # "auto" (bf16 on CUDA), "bf16" or "fp32" (the official behaviour)

    def run_args(self, datasets: Sequence[PLLDataset | str], device="cpu",
                 widths: Mapping[str, int] | None = None) -> list[dict]:
        """The runs' ``run_args`` when the sweep trains on ``device`` (which resolves ``precision``); ``widths`` as
        ``sweep_args``'."""
        return sweep_args(datasets, self.algorithms, n_hparams=self.n_hparams, n_trials=self.n_trials, arch=self.arch,
                          checkpoint_freq=self.checkpoint_freq, steps=self.steps, compat=self.compat,
                          hparams_overrides=self.hparams_overrides, precision=self.precision, device=device,
                          batched=self.batched, widths=widths)


def sweep_grids(grids: Sequence[Grid], datasets: Sequence[PLLDataset], *, out_dir, device: str = "cpu", jobs: int = 1,
                data_dir=None) -> tuple[pd.DataFrame, dict[str, int]]:
    """Run every grid's ``sweep`` under ``out_dir`` (resumably), then return the records of exactly the runs the
    grids define (``select_runs``: not the other runs the folder may hold) and the summed sweep counts.
    Several grids share one progress bar. On Slurm every grid is submitted before any is waited for, so their
    arrays run side by side; with ``wait: false`` one ``shared.sweep.SweepPending`` names every job in flight."""
    import dataclasses
    import os
    from unittest import mock

    from shared.progress import progress

    def run(grid: Grid, executor) -> dict[str, int]:
        return sweep(datasets, list(grid.algorithms), n_hparams=grid.n_hparams, n_trials=grid.n_trials,
                     arch=grid.arch, checkpoint_freq=grid.checkpoint_freq, out_dir=out_dir, steps=grid.steps,
                     jobs=jobs, device=device, compat=grid.compat, hparams_overrides=grid.hparams_overrides,
                     batched=grid.batched, data_dir=data_dir, executor=executor, precision=grid.precision)

    grids = [g for g in grids if g.algorithms]
    submitted_first: dict[int, dict[str, int]] = {}  # grid -> its counts before anything was submitted
    for i, grid in enumerate(grids):
        spec = executor_spec(grid.executor)
        if spec is not None and spec.kind == "slurm" and spec.wait:
            submitted_first[i] = runs.pending(grid.run_args(datasets, device), out_dir)[1]
            try:
                run(grid, dataclasses.replace(spec, wait=False))
            except runs.SweepPending:
                pass
    counts = {"total": 0, "skipped": 0, "restarted": 0, "ran": 0}
    pending: runs.SweepPending | None = None
    bar = progress(total=len(grids), desc="plench sweeps") if len(grids) > 1 else None
    with mock.patch.dict(os.environ, {"NOISY_PROGRESS": "0"} if bar is not None else {}):
        for i, grid in enumerate(grids):
            try:
                done = run(grid, grid.executor)  # for a grid submitted above: waits for its jobs
                done = submitted_first.get(i, done)
                counts = {k: counts[k] + done[k] for k in counts}
            except runs.SweepPending as error:
                pending = error  # the grids share one ledger: the last report names every job in flight
            if bar is not None:
                bar.update()
    if bar is not None:
        bar.close()
    if pending is not None:
        raise pending
    expected = [args for grid in grids for args in grid.run_args(datasets, device)]
    return select_runs(collect(out_dir, names=[runs.args_hash(args) for args in expected]), expected), counts


def collect(out_dir, *, done_only: bool = True, names: Sequence[str] | None = None) -> pd.DataFrame:
    """All checkpoint records under a sweep folder, one row each: ``run`` (folder name), the metrics, the ``args``
    fields as columns (dataset, algorithm, arch, hparams_seed, trial_seed, steps, ...) and ``hparams`` (a dict).
    ``names``: only these run folders (``shared.sweep.load_records``), e.g. those ``select_runs`` will pick."""
    records = runs.load_records(out_dir, done_only=done_only, names=names)
    if not records:
        raise ConfigError(f"no finished run under {out_dir}; run plench.protocol.sweep first")
    rows = [{**{k: v for k, v in r.items() if k != "args"}, **r["args"]} for r in records]
    frame = pd.DataFrame(rows)
    # overrides as text, so that runs with different overrides are different experiments (plench.selection)
    overrides = frame["hparams_overrides"] if "hparams_overrides" in frame else pd.Series([None] * len(frame))
    frame["hparams_overrides"] = [json.dumps(o, sort_keys=True) if isinstance(o, dict) else "" for o in overrides]
    return frame
