"""The common part of every noisy-label learning method: set-up, the epoch loop, evaluation and selection.

A method trains one or more networks built by ``make_model()`` on inputs ``X`` (a float tensor, n x ...)
and noisy labels ``y`` (n,). After each epoch it records the clean-test accuracy of its prediction (and of
any other evaluation set), so the three model-selection rules can be compared afterwards:

- ``best_test``: the best epoch on the test set (optimistic; what CILN reports),
- ``last``: the last epoch,
- ``val``: the epoch with the best accuracy on a *noisy* validation set (what a practitioner can do).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from shared.device import select_device
from shared.errors import ConfigError, unknown_choice
from shared.progress import progress
from shared.seeding import seed_everything
from shared.training import amp_scaler, make_optimizer, predict_logits

SELECTION_RULES = ("best_test", "last", "val")


@dataclass
class TrainSetup:
    """Optimisation settings shared by all methods (per-method hyperparameters live on the method)."""

    epochs: int = 100
    batch_size: int = 128
    lr: float = 0.1
    optimizer: str = "sgd"
    weight_decay: float = 5e-4
    momentum: float = 0.9
    cosine: bool = True
    augment: Callable | None = None  # (batch, generator) -> batch, applied to training batches only
    device: str = "auto"
    seed: int = 0
    log_losses_at: tuple[int, ...] = ()  # epochs after which per-sample training losses are stored


@dataclass
class FitResult:
    history: pd.DataFrame  # one row per epoch: train_loss, <eval>_acc, method-specific columns
    losses: dict[int, np.ndarray] = field(default_factory=dict)  # epoch -> per-sample CE of network 1
    extras: dict = field(default_factory=dict)  # method-specific arrays, e.g. DivideMix's clean probabilities

    def accuracy(self, rule: str = "best_test", eval_set: str = "test") -> float:
        """Test accuracy of the epoch each selection rule picks."""
        if rule not in SELECTION_RULES:
            raise unknown_choice("selection rule", rule, SELECTION_RULES)
        column = f"{eval_set}_acc"
        if rule == "best_test":
            return float(self.history[column].max())
        if rule == "last":
            return float(self.history[column].iloc[-1])
        if "val_acc" not in self.history:
            raise ConfigError("the 'val' rule needs an evaluation set named 'val' (noisy validation data)")
        return float(self.history[column].iloc[int(self.history["val_acc"].to_numpy().argmax())])


class Method:
    """Base class: subclasses set ``n_networks`` and implement ``train_epoch(epoch) -> dict``."""

    name = "method"
    n_networks = 1

    def __init__(self, make_model: Callable[[], torch.nn.Module], num_classes: int, setup: TrainSetup):
        self.make_model, self.num_classes, self.setup = make_model, num_classes, setup

    # -- set-up --------------------------------------------------------------------------------------------
    def _prepare(self, X: torch.Tensor, y) -> None:
        seed_everything(self.setup.seed)
        self.device = select_device(self.setup.device)
        self.generator = torch.Generator().manual_seed(self.setup.seed)
        self.X = X
        self.y = torch.as_tensor(np.asarray(y)).long()
        if len(self.y) != len(X):
            raise ConfigError(f"{len(X)} inputs but {len(self.y)} labels")
        self.nets = [self.make_model().to(self.device) for _ in range(self.n_networks)]
        self.optimizers = [make_optimizer(n, self.setup.optimizer, self.setup.lr, self.setup.weight_decay,
                                          self.setup.momentum) for n in self.nets]
        self.schedulers = [torch.optim.lr_scheduler.CosineAnnealingLR(o, self.setup.epochs) if self.setup.cosine else None
                           for o in self.optimizers]
        self.scaler = amp_scaler(self.device)

    def batches(self, indices: torch.Tensor | None = None, drop_last: bool = False):
        """Shuffled mini-batches of row indices (of ``indices``, default all rows)."""
        indices = torch.arange(len(self.X)) if indices is None else indices
        order = indices[torch.randperm(len(indices), generator=self.generator)]
        bs = self.setup.batch_size
        stop = len(order) - len(order) % bs if drop_last and len(order) >= bs else len(order)
        for start in range(0, stop, bs):
            yield order[start : start + bs]

    def inputs(self, idx: torch.Tensor, augment: bool = True) -> torch.Tensor:
        xb = self.X[idx].to(self.device, non_blocking=True)
        if augment and self.setup.augment is not None:
            xb = self.setup.augment(xb, self.generator)
        return xb

    @staticmethod
    def step(optimizer, loss: torch.Tensor) -> None:
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    # -- evaluation ----------------------------------------------------------------------------------------
    def logits(self, X: torch.Tensor, net: int | None = None) -> torch.Tensor:
        """Logits of one network, or the sum over networks (``net=None``)."""
        nets = self.nets if net is None else [self.nets[net]]
        return sum(predict_logits(n, X) for n in nets)

    def predict_proba(self, X: torch.Tensor) -> np.ndarray:
        return torch.softmax(self.logits(X), dim=1).numpy()

    def accuracy(self, X: torch.Tensor, y) -> float:
        """Mean of the networks' accuracies (CILN's convention for two-network methods)."""
        y = np.asarray(y)
        return float(np.mean([(self.logits(X, i).argmax(1).numpy() == y).mean() for i in range(len(self.nets))]))

    def per_sample_loss(self, net: int = 0) -> np.ndarray:
        """Cross-entropy of every training row under its (noisy) label, one network in eval mode."""
        return F.cross_entropy(self.logits(self.X, net), self.y, reduction="none").numpy()

    # -- the loop ------------------------------------------------------------------------------------------
    def train_epoch(self, epoch: int) -> dict:
        raise NotImplementedError

    def fit(self, X: torch.Tensor, y, eval_sets: dict[str, tuple[torch.Tensor, np.ndarray]] | None = None,
            desc: str | None = None) -> FitResult:
        self._prepare(X, y)
        rows, losses, extras = [], {}, {}
        bar = progress(range(self.setup.epochs), desc=desc or self.name)
        for epoch in bar:
            for net in self.nets:
                net.train()
            row = {"epoch": epoch, **self.train_epoch(epoch)}
            for sched in self.schedulers:
                if sched is not None:
                    sched.step()
            for name, (Xe, ye) in (eval_sets or {}).items():
                row[f"{name}_acc"] = self.accuracy(Xe, ye)
            if epoch in self.setup.log_losses_at:
                losses[epoch] = self.per_sample_loss(0)
            rows.append(row)
            bar.set_postfix({k: round(v, 3) for k, v in row.items() if k.endswith("acc")})
        extras.update(getattr(self, "extras", {}))
        return FitResult(pd.DataFrame(rows), losses, extras)
