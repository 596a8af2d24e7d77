"""The contract every Plench algorithm follows (the official code's ``Algorithm``, device-agnostic).

A run builds ``make_algorithm(name, input_shape, num_classes, train_S, hparams, arch=..., steps=...)`` and
then calls ``update(batch)`` once per training step and ``predict(x)`` to evaluate. Per-example state
(confidences ``w``) is an (n_train, q) tensor indexed by ``batch.idx``, the rows' positions in the
training split. Algorithms never read ``batch.y``: it travels with the batch for metrics only.

Precision. ``precision="fp32"`` (the default) is the official code's: no autocast anywhere. With ``"bf16"``
``update`` runs ``train_step`` (forward passes and losses) under ``torch.autocast(device, dtype=torch.bfloat16)``
and ``predict`` its forward likewise (logits returned as float32), on any device (CUDA in the runs, the CPU in the
tests). Weights, gradients, optimizer state and every stored table (confidences, prototypes, queues, ...) stay
in their own dtype, float32 or float64; ``step`` leaves autocast for the backward pass and the optimizer step.
Algorithm maths that feeds stored state or is sensitive to rounding starts from float32 logits (``logits.float()``)
or runs under ``float32_math`` (autocast suspended): a bf16 tensor must never reach an index_put into a float32
table (it raises) nor round the confidences. No GradScaler: bfloat16 has float32's exponent range, so gradients
do not underflow the way float16's do, and loss scaling buys nothing.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from plench import networks
from shared.errors import unknown_choice

GROUPS = ("vanilla PLL", "vanilla CLL", "holistic PLL", "noisy PLL")
# An algorithm's resolved precision -> the autocast dtype of its forward passes (None: no autocast)
AUTOCAST_DTYPES = {"fp32": None, "bf16": torch.bfloat16}


def full_precision(device_type: str):
    """A context that suspends autocast on ``device_type`` if it is on (float32 maths inside a bf16 step); a no-op
    otherwise, so fp32 runs execute exactly the code they always did."""
    if torch.is_autocast_enabled(device_type):
        return torch.autocast(device_type, enabled=False)
    return contextlib.nullcontext()


def float32_math(fn):
    """Run ``fn`` in float32 under autocast: autocast suspended and its floating tensor arguments cast to float32
    (float64 ones kept). Outside autocast ``fn`` runs untouched. For small, rounding-sensitive maths inside a
    bf16 step: similarities divided by a temperature, prototype updates."""
    def as_float(value):
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64:
            return value.float()
        return value

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        tensor = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
        if tensor is None or not torch.is_autocast_enabled(tensor.device.type):
            return fn(*args, **kwargs)
        with torch.autocast(tensor.device.type, enabled=False):
            return fn(*(as_float(a) for a in args), **{k: as_float(v) for k, v in kwargs.items()})

    return wrapper


@dataclass
class Batch:
    """One mini-batch. Image views are normalised float tensors (B, C, H, W); tabular views are all ``x`` (B, d)."""

    x: torch.Tensor  # (B, ...) the original view (no augmentation)
    weak: torch.Tensor  # (B, ...) crop + flip (tabular: x)
    strong: torch.Tensor  # (B, ...) RandAugment + Cutout (tabular: x)
    distill: torch.Tensor  # (B, ...) crop + flip + Cutout (tabular: x)
    s: torch.Tensor  # (B, q) float 0/1 candidate sets
    y: torch.Tensor  # (B,) true labels: metrics only, never read by an algorithm
    idx: torch.Tensor  # (B,) long, positions of the rows in the training split

    def to(self, device) -> "Batch":
        return Batch(*(t.to(device, non_blocking=True) for t in
                       (self.x, self.weak, self.strong, self.distill, self.s, self.y, self.idx)))


def view_input(batch: Batch, view: str) -> torch.Tensor:
    """The batch's tensor of ``view`` (an algorithm's ``views`` entry; "original" is ``x``)."""
    return batch.x if view == "original" else getattr(batch, view)


class Algorithm(nn.Module):
    """Base class: a featurizer + linear classifier trained with Adam(lr, weight_decay), as in the official code.

    Subclasses set ``name`` (the official registry name, e.g. ``"ABS_MAE"``), ``display`` (the paper's,
    "ABS-MAE"), ``group`` (one of GROUPS), ``views`` (the batch views they read, so a loader can skip the
    others) and implement ``train_step(batch) -> dict`` (one optimisation step, returning float losses).

    Arguments: ``input_shape`` (d,) or (C, H, W); ``train_S`` (n_train, q) candidate sets of the training
    split; ``hparams`` from ``plench.hparams.hparams_for``; ``arch`` a ``plench.networks`` featurizer;
    ``steps`` the run's total number of steps (schedules that depend on it); ``compat`` reproduces the
    official code's behaviour where it departs from the published method (documented per algorithm);
    ``precision`` "fp32" (official) or "bf16" (autocast, see the module docstring).
    """

    name: ClassVar[str]
    display: ClassVar[str]
    group: ClassVar[str]
    views: ClassVar[tuple[str, ...]] = ("weak",)
    tabular: ClassVar[bool] = True  # usable without image augmentations (Tables 7, 9-16)
    #: hyperparameters that shape a step (tensor sizes): only runs that agree on them train as one stack
    stack_hparams: ClassVar[tuple[str, ...]] = ("batch_size",)

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, train_S: torch.Tensor, hparams: dict, *,
                 arch: str, steps: int, compat: bool = True, precision: str = "fp32"):
        super().__init__()
        if precision not in AUTOCAST_DTYPES:
            raise unknown_choice("algorithm precision", precision, AUTOCAST_DTYPES)
        self.precision = precision
        self.input_shape, self.num_classes, self.hparams = tuple(input_shape), num_classes, dict(hparams)
        self.arch, self.max_steps, self.compat = arch, int(steps), compat
        self.featurizer = networks.featurizer(arch, self.input_shape)
        self.classifier = nn.Linear(self.featurizer.n_outputs, num_classes)
        self.network = nn.Sequential(self.featurizer, self.classifier)
        self.register_buffer("train_S", torch.as_tensor(train_S, dtype=torch.float32).clone())
        self.num_train = len(self.train_S)
        self.steps_per_epoch = max(1, self.num_train // int(hparams["batch_size"]))
        self.curr_iter = 0

    # -- the contract ------------------------------------------------------------------------------------
    def update(self, batch: Batch) -> dict[str, float]:
        """One optimisation step on ``batch``; returns its losses as floats."""
        with self.autocast(batch.s.device.type):
            losses = self.train_step(batch)
        self.curr_iter += 1
        return losses

    def train_step(self, batch: Batch) -> dict[str, float]:
        raise NotImplementedError

    @classmethod
    def stacked_step(cls, models: list[Algorithm]):
        """The step of G runs of this algorithm trained as one (``plench.protocol.train_runs_batched``), for an
        algorithm that is not a ``LossAlgorithm``; None (the default) where it has none. It takes a list of the
        members' Batches and returns their losses (G floats), and ``predictor(g)`` gives member g's logits (n, q)
        for inputs (n, ...); ``train()`` / ``eval()`` set the mode. See ``holistic.StackedDIRK``."""
        return None

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (n, q) for inputs x (float32; the forward under autocast when the precision is bf16)."""
        with self.autocast(x.device.type):
            return self.network(x).float()

    def autocast(self, device_type: str):
        """The autocast context of this algorithm's forward passes on ``device_type``: bfloat16 autocast when its
        precision is "bf16", a no-op (no context at all) in fp32."""
        dtype = AUTOCAST_DTYPES[self.precision]
        return contextlib.nullcontext() if dtype is None else torch.autocast(device_type, dtype=dtype)

    # -- helpers for subclasses ----------------------------------------------------------------------------
    def make_optimizer(self, params=None) -> torch.optim.Optimizer:
        """Adam with the run's learning rate and weight decay (every algorithm's optimizer in the official code)."""
        return torch.optim.Adam(self.network.parameters() if params is None else params,
                                lr=self.hparams["lr"], weight_decay=self.hparams["weight_decay"])

    def uniform_confidence(self) -> torch.Tensor:
        """``s / |S|`` for every training row (n_train, q): the usual initial confidences."""
        return self.train_S / self.train_S.sum(1, keepdim=True).clamp_min(1)

    @staticmethod
    def step(optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> float:
        """Backward of ``loss`` and one optimizer step, outside autocast (autocast covers forwards and losses only;
        the gradients and the Adam update are float32 like the weights)."""
        optimizer.zero_grad(set_to_none=True)
        with full_precision(loss.device.type):
            loss.backward()
            optimizer.step()
        return float(loss.detach())


class LossAlgorithm(Algorithm):
    """An algorithm whose step is a loss on its views' logits, optionally with per-row confidences.

    ``train_step``: one forward of each view in ``views``, in that order (weak; or weak then strong), then
    ``loss(*logits, s, w)`` (w: the rows' confidences (B, q) or None) -> Adam step; then, for algorithms that keep
    confidences, the same views are re-forwarded without gradients (train mode, as in the official code) and
    ``refresh(*logits, s, w)`` gives the rows' new confidences; then ``after_step()``. A batch ``skipped(s)`` says
    is skipped whole. These hooks are all a subclass changes, so stacked training
    (``plench.protocol.train_runs_batched``) can run the step for many configurations at once. Keeping the loss and the
    refresh as functions of tensors keeps them testable on hand-made logits. Both receive float32 logits (the
    network's bf16 output cast under mixed precision), so losses and confidences are computed in float32.
    """

    uses_confidence: ClassVar[bool] = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.uses_confidence:
            self.register_buffer("confidence", self.initial_confidence())
        self.optimizer = self.make_optimizer()

    def initial_confidence(self) -> torch.Tensor:
        return self.uniform_confidence()

    def loss(self, logits: torch.Tensor, s: torch.Tensor, w: torch.Tensor | None) -> torch.Tensor:
        """Scalar training loss for logits (B, q) (one argument per view in ``views``: ``loss(weak, strong, s, w)``
        for two), candidate sets s (B, q) and confidences w (B, q) or None."""
        raise NotImplementedError

    def refresh(self, logits: torch.Tensor, s: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """New confidences (B, q) of the batch rows after the step (logits: one argument per view, as ``loss``)."""
        raise NotImplementedError

    def skipped(self, s: torch.Tensor) -> torch.Tensor | None:
        """Whether the step on a batch with candidate sets s (B, q) is skipped (no forward, no update): a 0-d bool
        tensor, or None for algorithms that never skip (no device sync)."""
        return None

    def after_step(self) -> None:
        """Bookkeeping after each step's update and refresh, before ``curr_iter`` advances (POP's epoch ends)."""

    def train_step(self, batch: Batch) -> dict[str, float]:
        skip = self.skipped(batch.s)
        if skip is not None and bool(skip):
            return {"loss": 0.0}
        w = self.confidence[batch.idx] if self.uses_confidence else None
        inputs = [view_input(batch, view) for view in self.views]
        value = self.step(self.optimizer, self.loss(*(self.network(x).float() for x in inputs), batch.s, w))
        if self.uses_confidence:
            with torch.no_grad():
                fresh = [self.network(x).float() for x in inputs]
                self.confidence[batch.idx] = self.refresh(*fresh, batch.s, w).to(self.confidence.dtype)
        self.after_step()
        return {"loss": value}
