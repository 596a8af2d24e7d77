"""Decoupling representation and classifier (Kang et al., ICLR 2020; github.com/facebookresearch/classifier-balancing).

Stage 1 trains the network with plain cross-entropy on instance-balanced (uniform) batches for
``setup.epochs`` epochs, exactly as ``ERM`` does. Stage 2 re-balances the classifier only:

- ``NCM``: nearest class mean on the penultimate features, centred by the training mean and L2-normalised (the
  official ``KNNClassifier`` with ``feat_type='cl2n'``); ``distance="euclidean"`` (official default, squared
  distance) or ``"cosine"``. No training.
- ``CRT`` (classifier re-training): the features are frozen, the linear classifier is re-initialised and
  trained for ``retrain_epochs`` with class-aware sampling.
- ``LWS`` (learnable weight scaling): the whole network is frozen; per-class scales f_j on its logits,
  (W f + b)_j * f_j, start at 1 and are trained for ``retrain_epochs`` with class-aware sampling
  (the official ``DotProduct_Classifier`` with ``scales``).

Class-aware sampling is the official ``ClassAwareSampler``: classes are visited in a random order (reshuffled
after each pass over the classes); each visit takes ``num_samples_cls`` consecutive rows from that class's own
random cycle over its rows. An epoch has K * max_c N_c draws (K classes with rows). Class counts use the
observed (noisy) labels. Stage 2 uses the setup's optimizer, learning rate, weight decay, batch size and (cosine
over ``retrain_epochs``) schedule, as the official configurations reuse stage 1's; the frozen parts are in eval
mode.

Reusing one stage-1 network: ``fit`` returns ``extras["stage1_state"]`` (the stage-1 ``state_dict``); pass it
(or ``erm.nets[0].state_dict()`` of an ``ERM`` run with the same setup) as ``stage1=`` to skip stage 1. Stage 2
is re-seeded from ``setup.seed``, so the result equals training both stages in one ``fit``.

History: ``FitResult.history`` holds the stage-2 rows only (``stage`` = 2; ``epoch`` 0 .. retrain_epochs - 1,
one row for NCM), so every selection rule picks among decoupled classifiers. ``extras["stage1_history"]`` holds
the stage-1 rows (``stage`` = 1; empty when ``stage1`` was given); ``losses`` are stage 1's.
"""
from __future__ import annotations

from typing import Callable

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from shared.errors import ConfigError, unknown_choice
from shared.methods.base import FitResult
from shared.methods.erm import ERM
from shared.methods.longtail import class_counts, require_features
from shared.progress import progress
from shared.seeding import seed_everything

DISTANCES = ("euclidean", "cosine")


class _RandomCycle:
    """The items in a random order, reshuffled after every full pass (the official ``RandomCycleIter``)."""

    def __init__(self, items: list[int], generator: torch.Generator):
        self.items, self.generator, self.i = items, generator, len(items)

    def take(self, k: int) -> list[int]:
        out = []
        for _ in range(k):
            if self.i == len(self.items):
                order = torch.randperm(len(self.items), generator=self.generator).tolist()
                self.items = [self.items[j] for j in order]
                self.i = 0
            out.append(self.items[self.i])
            self.i += 1
        return out


class ClassAwareSampler:
    """Class-aware sampling of Kang et al. (see the module docstring); ``epoch()`` gives one epoch's rows."""

    def __init__(self, labels: torch.Tensor, num_samples_cls: int, generator: torch.Generator):
        classes = torch.unique(labels).tolist()
        self.class_cycle = _RandomCycle(classes, generator)
        self.row_cycles = {c: _RandomCycle(torch.nonzero(labels == c).flatten().tolist(), generator) for c in classes}
        self.num_samples_cls = num_samples_cls
        self.num_samples = len(classes) * max(len(cycle.items) for cycle in self.row_cycles.values())

    def epoch(self) -> torch.Tensor:
        """Row indices (K * max_c N_c,)."""
        rows: list[int] = []
        while len(rows) < self.num_samples:
            rows += self.row_cycles[self.class_cycle.take(1)[0]].take(self.num_samples_cls)
        return torch.tensor(rows[: self.num_samples])


@torch.no_grad()
def penultimate_features(net: nn.Module, X: torch.Tensor, batch_size: int = 512) -> torch.Tensor:
    """``net.features`` of every row (n, d) in eval mode, on the CPU."""
    device = next(net.parameters()).device
    net.eval()
    return torch.cat([net.features(X[i : i + batch_size].to(device)).float().cpu()
                      for i in range(0, len(X), batch_size)])


class NearestClassMean(nn.Module):
    """Scores (n, K) of the nearest-class-mean classifier over a trained network's features.

    g(x) = normalise(features(x) - mean of the training features); centroid mu_c = mean of g over class c's
    training rows; score -||g - mu_c||^2 (``euclidean``) or cos(g, mu_c); -inf for classes without rows.
    """

    def __init__(self, net: nn.Module, train_features: torch.Tensor, labels: torch.Tensor, num_classes: int,
                 distance: str):
        super().__init__()
        self.net, self.distance = net, distance
        mean = train_features.mean(0)
        g = F.normalize(train_features - mean, dim=1)
        counts = class_counts(labels, num_classes)
        sums = torch.zeros(num_classes, g.shape[1]).index_add_(0, labels, g)
        device = next(net.parameters()).device
        self.register_buffer("feature_mean", mean.to(device))
        self.register_buffer("centroids", (sums / counts.clamp(min=1).unsqueeze(1)).to(device))
        self.register_buffer("present", (counts > 0).to(device))

    def forward(self, x):
        g = F.normalize(self.net.features(x) - self.feature_mean, dim=1)
        if self.distance == "cosine":
            scores = g @ F.normalize(self.centroids, dim=1).T
        else:
            scores = 2 * g @ self.centroids.T - (g * g).sum(1, keepdim=True) - (self.centroids**2).sum(1)
        return scores.masked_fill(~self.present, float("-inf"))


class ScaledLogits(nn.Module):
    """LWS: the frozen network's logits times learnable per-class scales f (K,), initialised to 1."""

    def __init__(self, net: nn.Module, num_classes: int):
        super().__init__()
        self.net = net
        self.scales = nn.Parameter(torch.ones(num_classes, device=next(net.parameters()).device))

    def forward(self, x):
        return self.net(x) * self.scales


class Decoupling(ERM):
    """Stage 1 (``ERM``) then ``decouple`` (stage 2); see the module docstring."""

    needs_features, needs_classifier = True, True  # what stage 2 uses of the network: features(x), a Linear classifier

    def __init__(self, make_model, num_classes, setup, *, stage1: dict | None = None):
        super().__init__(make_model, num_classes, setup)
        self.stage1 = stage1

    def _prepare(self, X, y) -> None:
        super()._prepare(X, y)
        if self.needs_features:
            require_features(self.nets[0], type(self).__name__, classifier=self.needs_classifier)

    def train_epoch(self, epoch: int) -> dict:
        return {"stage": 1, **super().train_epoch(epoch)}

    def fit(self, X: torch.Tensor, y, eval_sets: dict | None = None, desc: str | None = None) -> FitResult:
        if self.stage1 is None:
            first = super().fit(X, y, eval_sets, desc)
        else:
            self._prepare(X, y)
            try:
                self.nets[0].load_state_dict(self.stage1)
            except RuntimeError as err:
                raise ConfigError(f"stage1 is not a state_dict of make_model()'s network: {err}") from None
            first = FitResult(pd.DataFrame())
        state = {k: v.detach().cpu().clone() for k, v in self.nets[0].state_dict().items()}
        seed_everything(self.setup.seed)
        self.generator = torch.Generator().manual_seed(self.setup.seed)
        rows = self.decouple(eval_sets or {}, desc or self.name)
        return FitResult(pd.DataFrame(rows), first.losses, {"stage1_history": first.history, "stage1_state": state})

    def decouple(self, eval_sets: dict, desc: str) -> list[dict]:
        """Replace ``self.nets[0]`` by the decoupled classifier; the stage-2 history rows."""
        raise NotImplementedError

    def _row(self, epoch: int, eval_sets: dict, **values) -> dict:
        row = {"epoch": epoch, "stage": 2, **values}
        for name, (Xe, ye) in eval_sets.items():
            row.update({f"{name}_{metric}": value for metric, value in self.evaluate(Xe, ye).items()})
        return row


class NCM(Decoupling):
    name = "ncm"
    needs_classifier = False

    def __init__(self, make_model, num_classes, setup, *, stage1: dict | None = None, distance: str = "euclidean"):
        if distance not in DISTANCES:
            raise unknown_choice("NCM distance", distance, DISTANCES)
        super().__init__(make_model, num_classes, setup, stage1=stage1)
        self.distance = distance

    def decouple(self, eval_sets: dict, desc: str) -> list[dict]:
        net = self.nets[0]
        features = penultimate_features(net, self.X)
        self.nets = [NearestClassMean(net, features, self.y, self.num_classes, self.distance)]
        return [self._row(0, eval_sets)]


class _Retrain(Decoupling):
    """Stage 2 trains the head of ``stage2_network`` with class-aware sampling. The rest of the network is frozen
    and in eval mode, so what it feeds the head is computed once for every training row (exactly what a pass
    through the whole network would give, for a fraction of the cost; inputs are not augmented in stage 2)."""

    def __init__(self, make_model, num_classes, setup, *, stage1: dict | None = None, retrain_epochs: int = 5,
                 num_samples_cls: int = 4):
        if retrain_epochs < 1 or num_samples_cls < 1:
            raise ConfigError(f"{type(self).__name__} needs retrain_epochs >= 1 and num_samples_cls >= 1, "
                              f"got {retrain_epochs} and {num_samples_cls}")
        super().__init__(make_model, num_classes, setup, stage1=stage1)
        self.retrain_epochs, self.num_samples_cls = retrain_epochs, num_samples_cls

    def stage2_network(self, net: nn.Module) -> tuple[nn.Module, list[nn.Parameter], Callable, Callable]:
        """(the stage-2 network built from the stage-1 ``net``, its trainable parameters, the frozen part
        ``x -> h`` and the head ``h -> logits``, with ``network(x) == head(frozen(x))``)."""
        raise NotImplementedError

    @torch.no_grad()
    def _frozen_outputs(self, frozen: Callable, batch_size: int = 512) -> torch.Tensor:
        return torch.cat([frozen(self.X[i : i + batch_size].to(self.device)).float()
                          for i in range(0, len(self.X), batch_size)])

    def decouple(self, eval_sets: dict, desc: str) -> list[dict]:
        network, trainable, frozen, head = self.stage2_network(self.nets[0])
        keep = {id(p) for p in trainable}
        for p in network.parameters():
            p.requires_grad_(id(p) in keep)
        self.nets = [network]
        network.eval()  # frozen parts deterministic; the trained heads behave alike in both modes
        inputs = self._frozen_outputs(frozen)
        optimizer, scheduler = self.new_optimizer(nn.ParameterList(trainable), self.retrain_epochs)
        sampler = ClassAwareSampler(self.y, self.num_samples_cls, self.generator)
        rows = []
        for epoch in progress(range(self.retrain_epochs), desc=f"{desc} stage 2"):
            order, total = sampler.epoch(), 0.0
            for start in range(0, len(order), self.setup.batch_size):
                idx = order[start : start + self.setup.batch_size]
                loss = F.cross_entropy(head(inputs[idx.to(inputs.device)]), self.y[idx].to(self.device))
                self.step(optimizer, loss)
                total += float(loss.detach()) * len(idx)
            if scheduler is not None:
                scheduler.step()
            rows.append(self._row(epoch, eval_sets, train_loss=total / len(order)))
        return rows


class CRT(_Retrain):
    name = "crt"

    def stage2_network(self, net):
        net.classifier.reset_parameters()
        return net, list(net.classifier.parameters()), net.features, net.classifier


class LWS(_Retrain):
    name = "lws"
    needs_features, needs_classifier = False, False

    def stage2_network(self, net):
        scaled = ScaledLogits(net, self.num_classes)
        return scaled, [scaled.scales], net, lambda logits: logits * scaled.scales
