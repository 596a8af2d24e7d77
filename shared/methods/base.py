"""The common part of every noisy-label learning method: set-up, the epoch loop, evaluation and selection.

A method trains one or more networks built by ``make_model()`` on inputs ``X`` (a float tensor, n x ...)
and noisy labels ``y`` (n,). After each epoch it records the clean-test accuracy of its prediction (and of
any other evaluation set; top-1 as ``<set>_acc``, and ``<set>_top5`` with ``TrainSetup(topk=(1, 5))``), so the
model-selection rules can be compared afterwards:

- ``best_test``: the best epoch on the test set (optimistic; what CILN and NoisywikiHow report),
- ``last``: the last epoch,
- ``val``: the epoch with the best top-1 accuracy on the validation set (noisy in CILN, clean in NoisywikiHow),
- ``stable``: the mean over the last 5 epochs (NoisywikiHow's ``stable_acc``).

Mixed precision: with ``TrainSetup(amp=True)`` (the default) on CUDA, ERM's epochs (``shared.training.train_epoch``)
and the methods that set ``mixed_precision`` (Co-Teaching, DivideMix, CNLCU) run their forward passes under fp16
autocast (``forward_logits``, and ``predict_logits`` for their evaluation and per-sample losses) and step through a
GradScaler (``step``: scale, unscale before clipping, step, update); the logits come back in float32, so losses,
selections and targets are computed in float32. Off CUDA, or with ``amp=False``, everything runs in fp32 exactly as
without it.

Two-network methods report the mean accuracy of their networks (CILN's convention) or, with
``TrainSetup(eval_net=0)``, network 1's only (the official NoisywikiHow code, ``tm_main.py``).

A ``GenerativeNetwork`` (e.g. T5 writing the category's name, as NoisywikiHow's paper trains it) has no logits: it
brings its own training loss and ranks the classes itself; methods that set ``supports_generative`` (``erm``)
train it, the others refuse it.
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
from shared.training import amp_autocast, amp_scaler, make_optimizer, predict_logits

SELECTION_RULES = ("best_test", "last", "val", "stable")
STABLE_EPOCHS = 5  # the last epochs the 'stable' rule averages
GENERATIVE_BATCH = 100  # rows per call of a generative network's evaluation (the official T5 evaluation batch)


class GenerativeNetwork(torch.nn.Module):
    """A network that writes its label (a sequence) instead of scoring the K classes.

    Subclasses implement:

    * ``loss(x, y, reduction="mean")``: the training loss of inputs ``x`` (b, ...) with labels ``y`` (b,) int64 in
      [0, K): a scalar ("mean", the one the network is trained on) or the (b,) loss of each row ("none");
    * ``ranked(x, k)``: (b, k) int64, each row's k best guesses as class indices, best first, -1 where a guess
      is no class (a generated text that names no category, or one already named by a better guess).

    Top-k accuracy is then whether the label is among the first k guesses. Calling the network is an error:
    there are no logits to train on with cross-entropy.
    """

    def loss(self, x: torch.Tensor, y: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        raise NotImplementedError

    def ranked(self, x: torch.Tensor, k: int) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise ConfigError(f"{type(self).__name__} writes its labels and has no logits; train it with a method that "
                          "supports generative networks (erm) and evaluate it with Method.evaluate")


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
    topk: tuple[int, ...] = (1,)  # top-1 is recorded as <set>_acc; every other k adds a <set>_top<k> column
    grad_clip: float | None = None  # clip_grad_norm_ of each network's gradient to this L2 norm in Method.step
    eval_net: int | None = None  # the network whose accuracy is recorded; None: the mean over networks
    amp: bool = True  # fp16 mixed precision on CUDA (ERM and the ``mixed_precision`` methods); False: fp32. No-op off CUDA


@dataclass
class FitResult:
    history: pd.DataFrame  # one row per epoch: train_loss, <eval>_acc, method-specific columns
    losses: dict[int, np.ndarray] = field(default_factory=dict)  # epoch -> per-sample CE of network 1
    extras: dict = field(default_factory=dict)  # method-specific arrays, e.g. DivideMix's clean probabilities

    def accuracy(self, rule: str = "best_test", eval_set: str = "test", metric: str = "acc") -> float:
        """Accuracy (``metric`` "acc" = top-1, or "top5", ...) on ``eval_set`` under a selection rule.

        Each metric is maximised on its own by ``best_test`` (the official NoisywikiHow ``test_best1`` and
        ``test_best5``); ``val`` takes the epoch of the best validation top-1 for every metric.
        """
        if rule not in SELECTION_RULES:
            raise unknown_choice("selection rule", rule, SELECTION_RULES)
        column = f"{eval_set}_{metric}"
        if column not in self.history:
            raise ConfigError(f"the history has no column {column!r}; top-k accuracies need TrainSetup(topk=(1, k))")
        if rule == "best_test":
            return float(self.history[column].max())
        if rule == "last":
            return float(self.history[column].iloc[-1])
        if rule == "stable":
            return float(self.history[column].tail(STABLE_EPOCHS).mean())
        if "val_acc" not in self.history:
            raise ConfigError("the 'val' rule needs an evaluation set named 'val' (validation data)")
        return float(self.history[column].iloc[int(self.history["val_acc"].to_numpy().argmax())])


class Method:
    """Base class: subclasses set ``n_networks`` and implement ``train_epoch(epoch) -> dict``."""

    name = "method"
    n_networks = 1
    supports_generative = False  # whether it trains a GenerativeNetwork (through its loss, not logits)
    mixed_precision = False  # whether forward_logits, step and evaluation use fp16 AMP (on CUDA with setup.amp)

    def __init__(self, make_model: Callable[[], torch.nn.Module], num_classes: int, setup: TrainSetup):
        self.make_model, self.num_classes, self.setup = make_model, num_classes, setup
        if setup.eval_net is not None and not 0 <= setup.eval_net < self.n_networks:
            raise ConfigError(f"eval_net must be None or a network index below {self.n_networks}, got {setup.eval_net}")
        if setup.grad_clip is not None and setup.grad_clip <= 0:
            raise ConfigError(f"grad_clip must be None or positive, got {setup.grad_clip}")
        if any(k < 1 for k in setup.topk):
            raise ConfigError(f"topk must hold positive integers, got {setup.topk}")

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
        if self.generative and not self.supports_generative:
            raise ConfigError(f"{type(self.nets[0]).__name__} generates its labels (a GenerativeNetwork) and the "
                              f"{self.name!r} method needs a network's logits; train it with 'erm'")
        pairs = [self.new_optimizer(net, self.setup.epochs) for net in self.nets]
        self.optimizers, self.schedulers = [o for o, _ in pairs], [s for _, s in pairs]
        self.scaler = amp_scaler(self.device, enabled=self.setup.amp)

    def new_optimizer(self, net: torch.nn.Module, epochs: int):
        """The set-up's optimizer for ``net`` and its cosine schedule over ``epochs`` (None without ``cosine``)."""
        s = self.setup
        optimizer = make_optimizer(net, s.optimizer, s.lr, s.weight_decay, s.momentum)
        return optimizer, torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs) if s.cosine else None

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

    @property
    def amp(self) -> bool:
        """Whether this method runs in fp16 mixed precision: it sets ``mixed_precision`` and its scaler is on (CUDA
        with ``setup.amp``)."""
        scaler = getattr(self, "scaler", None)
        return self.mixed_precision and scaler is not None and scaler.is_enabled()

    def forward_logits(self, net: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        """``net(x)`` under fp16 autocast when ``amp``, returned in float32 (unchanged when already float32)."""
        with amp_autocast(self.device, enabled=self.amp):
            logits = net(x)
        return logits.float()

    def step(self, optimizer, loss: torch.Tensor) -> None:
        """One optimizer step on ``loss``, its gradient clipped to ``setup.grad_clip`` (L2 norm) when set; with
        ``amp`` through the GradScaler (one for all networks, updated after every step: its overflow checks are
        per step), the gradient unscaled before clipping."""
        scaler = self.scaler if self.amp else None
        optimizer.zero_grad(set_to_none=True)
        (loss if scaler is None else scaler.scale(loss)).backward()
        if self.setup.grad_clip is not None:
            if scaler is not None:
                scaler.unscale_(optimizer)
            params = [p for group in optimizer.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(params, self.setup.grad_clip)
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()

    def run_batches(self, batch_loss: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
                    net: int = 0) -> float:
        """One pass over shuffled mini-batches training network ``net``: ``batch_loss(idx, x, y)`` gives the
        batch's mean loss from its row indices, (augmented) inputs and labels on the device; returns the mean
        loss over rows."""
        total, count = 0.0, 0
        for idx in self.batches():
            loss = batch_loss(idx, self.inputs(idx), self.y[idx].to(self.device))
            self.step(self.optimizers[net], loss)
            total, count = total + float(loss.detach()) * len(idx), count + len(idx)
        return total / max(count, 1)

    # -- evaluation ----------------------------------------------------------------------------------------
    @property
    def generative(self) -> bool:
        """Whether the networks write their labels (``GenerativeNetwork``) instead of returning logits."""
        return isinstance(self.nets[0], GenerativeNetwork)

    def logits(self, X: torch.Tensor, net: int | None = None) -> torch.Tensor:
        """Logits of one network, or the sum over networks (``net=None``)."""
        nets = self.nets if net is None else [self.nets[net]]
        return sum(predict_logits(n, X, amp=self.amp) for n in nets)

    def _in_batches(self, net: int, n: int, call: Callable) -> torch.Tensor:
        """``call(network, rows)`` for consecutive slices ``rows`` of ``range(n)``, network ``net`` in eval mode
        without gradients; the results concatenated on the CPU."""
        network = self.nets[net]
        network.eval()
        with torch.no_grad():
            parts = [call(network, slice(i, i + GENERATIVE_BATCH)).cpu() for i in range(0, n, GENERATIVE_BATCH)]
        if not parts:
            raise ConfigError("nothing to evaluate: the evaluation set has no rows")
        return torch.cat(parts)

    def predict_proba(self, X: torch.Tensor) -> np.ndarray:
        return torch.softmax(self.logits(X), dim=1).numpy()

    def evaluate(self, X: torch.Tensor, y) -> dict[str, float]:
        """Top-1 accuracy ("acc") and every other top-k of ``setup.topk`` ("top5", ...) of network
        ``setup.eval_net``, or the mean over the networks (CILN's convention) when it is None."""
        y = np.asarray(y)
        nets = range(len(self.nets)) if self.setup.eval_net is None else [self.setup.eval_net]
        ks = sorted({k for k in self.setup.topk if k > 1})
        scores: dict[str, list] = {"acc": [], **{f"top{k}": [] for k in ks}}
        for i in nets:
            if self.generative:
                kmax = max(ks, default=1)
                guesses = self._in_batches(i, len(X), lambda net, rows: net.ranked(X[rows].to(self.device), kmax))
                guesses = guesses.numpy()
                scores["acc"].append((guesses[:, 0] == y).mean())
                for k in ks:
                    scores[f"top{k}"].append((guesses[:, :k] == y[:, None]).any(1).mean())
                continue
            logits = self.logits(X, i)
            scores["acc"].append((logits.argmax(1).numpy() == y).mean())
            if ks:
                top = logits.topk(min(ks[-1], logits.shape[1]), dim=1).indices.numpy()
                for k in ks:
                    scores[f"top{k}"].append((top[:, :k] == y[:, None]).any(1).mean())
        return {name: float(np.mean(values)) for name, values in scores.items()}

    def per_sample_loss(self, net: int = 0) -> np.ndarray:
        """Cross-entropy of every training row under its (noisy) label, one network in eval mode (a generative
        network: its own loss of each row)."""
        if self.generative:
            return self._in_batches(net, len(self.X), lambda network, rows: network.loss(
                self.X[rows].to(self.device), self.y[rows].to(self.device), reduction="none").float()).numpy()
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
                row.update({f"{name}_{metric}": value for metric, value in self.evaluate(Xe, ye).items()})
            if epoch in self.setup.log_losses_at:
                losses[epoch] = self.per_sample_loss(0)
            rows.append(row)
            bar.set_postfix({k: round(v, 3) for k, v in row.items() if k.endswith("acc")}, refresh=False)
        extras.update(getattr(self, "extras", {}))
        return FitResult(pd.DataFrame(rows), losses, extras)
