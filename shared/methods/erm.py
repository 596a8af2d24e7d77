"""Empirical risk minimisation: cross-entropy on the noisy labels (mixed precision on CUDA)."""
from __future__ import annotations

from shared.methods.base import Method
from shared.training import train_epoch


class ERM(Method):
    name = "erm"

    def train_epoch(self, epoch: int) -> dict:
        loss = train_epoch(self.nets[0], self.X, self.y, self.optimizers[0], batch_size=self.setup.batch_size,
                           generator=self.generator, augment=self.setup.augment, scaler=self.scaler)
        return {"train_loss": loss}
