"""Sparse regularization, SR (Zhou et al., 2021), as ``SRLoss`` in ``common/losses.py`` of the official
NoisywikiHow code.

The logits z are L2-normalised and sharpened, o = (z / ||z||_2) / tau, and the loss is

    CE(o, y) + lambda_t * sum_k softmax(o)_k ** p,    lambda_t = lambda0 * rho ** floor(t / freq)

(t the 0-based epoch; ``freq=0`` never updates lambda; softmax clamped to [1e-7, 1] before the power, as the
official ``pNorm``). The published NoisywikiHow values (``tm_train_hy_nruns.py``) are tau = 0.05 for real
noise (the default) and 0.5 for synthetic noise, lambda0 = 0 and freq = 0: with lambda0 = 0 the sparse
regulariser vanishes and SR is cross-entropy on L2-normalised logits with temperature tau (LogitNorm), which is
what the paper evaluated. The official code trains SR through ``trainer.train_others``, which clips the gradient
norm at 3 (``TrainSetup.grad_clip=3``).

Prediction uses the raw logits: the normalisation divides each row by a positive number, so the ranking of the
classes, hence top-k accuracy, is the same; the per-sample losses of ``TrainSetup.log_losses_at`` are the
raw-logit cross-entropy of every method.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from shared.errors import ConfigError
from shared.methods.base import Method


def sr_loss(logits: torch.Tensor, y: torch.Tensor, *, tau: float, lam: float, p: float) -> torch.Tensor:
    """Mean SR loss of a batch."""
    out = F.normalize(logits, dim=1) / tau
    loss = F.cross_entropy(out, y)
    if lam == 0:
        return loss
    norm = torch.clamp(torch.softmax(out, dim=1), min=1e-7, max=1.0).pow(p).sum(dim=1)
    return loss + lam * norm.mean()


class SparseRegularization(Method):
    name = "sr"

    def __init__(self, make_model, num_classes, setup, *, tau: float = 0.05, lam: float = 0.0, p: float = 0.1,
                 rho: float = 1.02, freq: int = 0):
        super().__init__(make_model, num_classes, setup)
        if tau <= 0:
            raise ConfigError(f"SR's temperature tau must be positive, got {tau}")
        if lam < 0 or p <= 0 or rho <= 0 or freq < 0:
            raise ConfigError(f"SR needs lam >= 0, p > 0, rho > 0 and freq >= 0, got {lam}, {p}, {rho}, {freq}")
        self.tau, self.lam, self.p, self.rho, self.freq = tau, lam, p, rho, freq

    def lam_at(self, epoch: int) -> float:
        """lambda_t of the 0-based epoch (``criterion.update_lamb`` after every ``freq``-th epoch in ``tm_main.py``)."""
        return self.lam * self.rho ** (epoch // self.freq) if self.freq > 0 else self.lam

    def train_epoch(self, epoch: int) -> dict:
        lam = self.lam_at(epoch)
        net = self.nets[0]
        loss = self.run_batches(lambda idx, x, y: sr_loss(net(x), y, tau=self.tau, lam=lam, p=self.p))
        return {"train_loss": loss, "lam": lam}
