"""Co-Teaching (Han et al., 2018): two networks teach each other with their small-loss samples.

In every mini-batch each network ranks the samples by its cross-entropy and keeps the ``R(t)`` fraction
with the smallest loss; each network is then updated on the samples its *peer* kept. The kept fraction
R(t) = 1 - forget(t) ramps down from 1 over the first ``ramp_epochs`` epochs:

- ``ramp="linear"`` (Han et al.'s code): forget(t) = forget_rate**exponent * t / (ramp_epochs - 1) for
  t < ramp_epochs, then forget_rate; ``rounding="floor"``: keep int(R * batch) samples;
- ``ramp="sqrt"`` (CILN's code): forget(t) = forget_rate * min(1, (t / ramp_epochs) ** 0.5);
  ``rounding="round"``: keep max(1, round(R * batch)).

``forget_rate`` is the noise rate the method is told; CILN gives it the true rate of the training labels
(an oracle), which the caller computes. The last, smaller mini-batch of an epoch is dropped as in Han et al.'s
code; ``drop_last=False`` trains on it too (the official NoisywikiHow code, ``trainer.train_ct``, which with
``ramp="linear", rounding="round"`` uses R(t) = 1 - linspace(0, forget_rate, ramp_epochs)[t], then 1 - forget_rate).

On CUDA with ``TrainSetup.amp`` the forward passes run under fp16 autocast (``Method.forward_logits``) and the steps
through the GradScaler; the logits are cast to float32, so the small-loss ranking is on float32 cross-entropies.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from shared.errors import ConfigError, unknown_choice
from shared.methods.base import Method


class CoTeaching(Method):
    name = "coteaching"
    n_networks = 2
    mixed_precision = True

    def __init__(self, make_model, num_classes, setup, *, forget_rate: float, ramp_epochs: int = 10,
                 ramp: str = "linear", exponent: float = 1.0, rounding: str = "floor", clean_labels=None,
                 drop_last: bool = True):
        super().__init__(make_model, num_classes, setup)
        if not 0.0 <= forget_rate < 1.0:
            raise ConfigError(f"forget_rate must be in [0, 1), got {forget_rate}")
        if ramp not in ("linear", "sqrt"):
            raise unknown_choice("Co-Teaching ramp", ramp, ["linear", "sqrt"])
        if rounding not in ("floor", "round"):
            raise unknown_choice("Co-Teaching rounding", rounding, ["floor", "round"])
        self.forget_rate, self.ramp_epochs, self.ramp = forget_rate, ramp_epochs, ramp
        self.exponent, self.rounding, self.drop_last = exponent, rounding, drop_last
        self.clean_labels = None if clean_labels is None else torch.as_tensor(clean_labels).long()

    def forget_at(self, epoch: int) -> float:
        if self.ramp == "sqrt":
            return self.forget_rate * min(1.0, (epoch / self.ramp_epochs) ** 0.5)
        if epoch >= self.ramp_epochs:
            return self.forget_rate
        return self.forget_rate**self.exponent * epoch / max(1, self.ramp_epochs - 1)

    def n_keep(self, batch: int, epoch: int) -> int:
        remember = 1.0 - self.forget_at(epoch)
        return int(remember * batch) if self.rounding == "floor" else max(1, round(remember * batch))

    def train_epoch(self, epoch: int) -> dict:
        (net1, net2), (opt1, opt2) = self.nets, self.optimizers
        total, count, kept_clean, kept = 0.0, 0, 0, 0
        for idx in self.batches(drop_last=self.drop_last):
            x, t = self.inputs(idx), self.y[idx].to(self.device)
            logits1, logits2 = self.forward_logits(net1, x), self.forward_logits(net2, x)  # float32
            keep = self.n_keep(len(idx), epoch)
            small1 = torch.argsort(F.cross_entropy(logits1, t, reduction="none").detach())[:keep]
            small2 = torch.argsort(F.cross_entropy(logits2, t, reduction="none").detach())[:keep]
            loss1 = F.cross_entropy(logits1[small2], t[small2])  # each network learns from its peer's choice
            loss2 = F.cross_entropy(logits2[small1], t[small1])
            self.step(opt1, loss1)
            self.step(opt2, loss2)
            total, count = total + float((loss1 + loss2).detach()) / 2 * len(idx), count + len(idx)
            if self.clean_labels is not None:
                chosen = idx[small1.cpu()]
                kept_clean += int((self.clean_labels[chosen] == self.y[chosen]).sum())
                kept += len(chosen)
        row = {"train_loss": total / max(count, 1), "forget_rate": self.forget_at(epoch)}
        if kept:
            row["selected_precision"] = kept_clean / kept  # share of kept samples whose label is right
        return row
