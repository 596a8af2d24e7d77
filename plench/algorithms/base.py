"""The contract every Plench algorithm follows (the official code's ``Algorithm``, device-agnostic).

A run builds ``make_algorithm(name, input_shape, num_classes, train_S, hparams, arch=..., steps=...)`` and
then calls ``update(batch)`` once per training step and ``predict(x)`` to evaluate. Per-example state
(confidences ``w``) is an (n_train, q) tensor indexed by ``batch.idx``, the rows' positions in the
training split. Algorithms never read ``batch.y``: it travels with the batch for metrics only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from plench import networks

GROUPS = ("vanilla PLL", "vanilla CLL", "holistic PLL", "noisy PLL")


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


class Algorithm(nn.Module):
    """Base class: a featurizer + linear classifier trained with Adam(lr, weight_decay), as in the official code.

    Subclasses set ``name`` (the official registry name, e.g. ``"ABS_MAE"``), ``display`` (the paper's,
    "ABS-MAE"), ``group`` (one of GROUPS), ``views`` (the batch views they read, so a loader can skip the
    others) and implement ``train_step(batch) -> dict`` (one optimisation step, returning float losses).

    Arguments: ``input_shape`` (d,) or (C, H, W); ``train_S`` (n_train, q) candidate sets of the training
    split; ``hparams`` from ``plench.hparams.hparams_for``; ``arch`` a ``plench.networks`` featurizer;
    ``steps`` the run's total number of steps (schedules that depend on it); ``compat`` reproduces the
    official code's behaviour where it departs from the published method (documented per algorithm).
    """

    name: ClassVar[str]
    display: ClassVar[str]
    group: ClassVar[str]
    views: ClassVar[tuple[str, ...]] = ("weak",)
    tabular: ClassVar[bool] = True  # usable without image augmentations (Tables 7, 9-16)

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, train_S: torch.Tensor, hparams: dict, *,
                 arch: str, steps: int, compat: bool = True):
        super().__init__()
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
        losses = self.train_step(batch)
        self.curr_iter += 1
        return losses

    def train_step(self, batch: Batch) -> dict[str, float]:
        raise NotImplementedError

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (n, q) for inputs x."""
        return self.network(x)

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
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return float(loss.detach())


class LossAlgorithm(Algorithm):
    """An algorithm whose step is a loss on the weak view's logits, optionally with per-row confidences.

    ``train_step``: ``loss(logits, s, w)`` (w: the rows' confidences (B, q) or None) -> Adam step; then, for
    algorithms that keep confidences, the same batch is re-forwarded without gradients (train mode, as in the
    official code) and ``refresh(logits, s, w)`` gives the rows' new confidences. Keeping the loss and the
    refresh as functions of tensors keeps them testable on hand-made logits.
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
        """Scalar training loss for logits (B, q), candidate sets s (B, q) and confidences w (B, q) or None."""
        raise NotImplementedError

    def refresh(self, logits: torch.Tensor, s: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """New confidences (B, q) of the batch rows after the step."""
        raise NotImplementedError

    def train_step(self, batch: Batch) -> dict[str, float]:
        w = self.confidence[batch.idx] if self.uses_confidence else None
        value = self.step(self.optimizer, self.loss(self.network(batch.weak), batch.s, w))
        if self.uses_confidence:
            with torch.no_grad():
                self.confidence[batch.idx] = self.refresh(self.network(batch.weak), batch.s, w).to(self.confidence.dtype)
        return {"loss": value}
