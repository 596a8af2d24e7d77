"""Mixup (Zhang et al., 2018): train on convex combinations of pairs of examples and of their labels.

Per mini-batch one lambda ~ Beta(alpha, alpha) and one random permutation pi of the batch; the network sees
lambda * x + (1 - lambda) * x[pi] and the loss is lambda * CE(f, y) + (1 - lambda) * CE(f, y[pi]), as in
``trainer.train_mixup`` of the official NoisywikiHow code (alpha = 1). A network that defines
``mixup_forward(x_a, x_b, lam)`` mixes its own inputs: the official code mixes BART's encoder and decoder input
*embeddings* (``BartCLSWithEmbeds`` in ``data/wiki_dataset.py``), since token ids cannot be mixed. Evaluation
uses unmixed inputs. lambda comes from a numpy generator seeded with ``TrainSetup.seed``, pi from the method's
torch generator, so a run is deterministic.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from shared.errors import ConfigError
from shared.methods.base import Method


class Mixup(Method):
    name = "mixup"

    def __init__(self, make_model, num_classes, setup, *, alpha: float = 1.0):
        super().__init__(make_model, num_classes, setup)
        if alpha <= 0:
            raise ConfigError(f"Mixup's alpha must be positive, got {alpha}")
        self.alpha = alpha

    def _prepare(self, X, y) -> None:
        super()._prepare(X, y)
        self.rng = np.random.default_rng(self.setup.seed)

    def batch_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The mixed loss of one batch with a fresh lambda and permutation."""
        lam = float(self.rng.beta(self.alpha, self.alpha))
        perm = torch.randperm(len(y), generator=self.generator).to(y.device)
        net = self.nets[0]
        if hasattr(net, "mixup_forward"):
            logits = net.mixup_forward(x, x[perm], lam)
        else:
            logits = net(lam * x + (1 - lam) * x[perm])
        return lam * F.cross_entropy(logits, y) + (1 - lam) * F.cross_entropy(logits, y[perm])

    def train_epoch(self, epoch: int) -> dict:
        return {"train_loss": self.run_batches(lambda idx, x, y: self.batch_loss(x, y))}
