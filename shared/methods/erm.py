"""Empirical risk minimisation: cross-entropy on the noisy labels."""
from __future__ import annotations

import torch.nn.functional as F

from shared.methods.base import Method


class ERM(Method):
    name = "erm"

    def train_epoch(self, epoch: int) -> dict:
        net, optimizer = self.nets[0], self.optimizers[0]
        total, count = 0.0, 0
        for idx in self.batches():
            loss = F.cross_entropy(net(self.inputs(idx)), self.y[idx].to(self.device))
            self.step(optimizer, loss)
            total, count = total + float(loss.detach()) * len(idx), count + len(idx)
        return {"train_loss": total / count}
