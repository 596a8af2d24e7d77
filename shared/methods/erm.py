"""Empirical risk minimisation: cross-entropy on the noisy labels (mixed precision on CUDA).

With ``TrainSetup.grad_clip`` the steps go through ``Method.step``, which clips the gradient norm, in fp32
(the official NoisywikiHow base model, ``trainer.train_others``, clips at 3). A ``GenerativeNetwork`` is trained on
its own loss (NoisywikiHow's T5 on the tokens of the category's name, ``trainer.train_t5``).
"""
from __future__ import annotations

import torch.nn.functional as F

from shared.methods.base import Method
from shared.training import train_epoch


class ERM(Method):
    name = "erm"
    supports_generative = True

    def train_epoch(self, epoch: int) -> dict:
        net = self.nets[0]
        if self.generative:
            return {"train_loss": self.run_batches(lambda idx, x, y: net.loss(x, y))}
        if self.setup.grad_clip is not None:
            return {"train_loss": self.run_batches(lambda idx, x, y: F.cross_entropy(net(x), y))}
        loss = train_epoch(net, self.X, self.y, self.optimizers[0], batch_size=self.setup.batch_size,
                           generator=self.generator, augment=self.setup.augment, scaler=self.scaler)
        return {"train_loss": loss}
