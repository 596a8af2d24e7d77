"""Empirical risk minimisation: cross-entropy on the noisy labels (mixed precision on CUDA).

With ``TrainSetup.grad_clip`` the steps go through ``Method.step``, which clips the gradient norm, in fp32
(the official NoisywikiHow base model, ``trainer.train_others``, clips at 3).
"""
from __future__ import annotations

import torch.nn.functional as F

from shared.methods.base import Method
from shared.training import train_epoch


class ERM(Method):
    name = "erm"

    def train_epoch(self, epoch: int) -> dict:
        if self.setup.grad_clip is not None:
            net = self.nets[0]
            return {"train_loss": self.run_batches(lambda idx, x, y: F.cross_entropy(net(x), y))}
        loss = train_epoch(self.nets[0], self.X, self.y, self.optimizers[0], batch_size=self.setup.batch_size,
                           generator=self.generator, augment=self.setup.augment, scaler=self.scaler)
        return {"train_loss": loss}
