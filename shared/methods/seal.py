"""SEAL, self-evolution average labels (Chen et al., AAAI 2021), as the official NoisywikiHow code runs it
(``trainer.train_soft`` and ``get_softmax_out``, the SEAL branch of ``tm_main.py``).

Training runs in ``rounds`` rounds of ``setup.epochs`` epochs each: the run has ``rounds * setup.epochs`` epochs
(the official 4 rounds x 10 epochs = 40 with the paper's 10-epoch set-up) and one history row per epoch, with
its 1-based ``round``. Round 1 minimises cross-entropy on the given labels. After every epoch the network's
softmax on the whole training set (eval mode) is taken; the soft label of round r + 1 is the mean of round r's
per-epoch softmax outputs, and rounds 2+ minimise -sum_k yhat_ik log p_k(x_i). ``extras["soft_targets"]``
(n, K) holds the soft labels of the last round (none with one round).

The official NoisywikiHow code keeps training the same network with the same optimizer across rounds (the
default). ``reinit=True`` follows the original SEAL (chenpf1025/IDN), which trains every round from scratch:
each round starts from the run's initial weights (the same seed) with a fresh optimizer and, with
``setup.cosine``, a cosine schedule over the round. The official code clips the gradient norm at 3 in every
round (``TrainSetup.grad_clip=3``).
"""
from __future__ import annotations

import copy
from dataclasses import replace

import torch
import torch.nn.functional as F

from shared.errors import ConfigError
from shared.methods.base import Method


class SEAL(Method):
    name = "seal"

    def __init__(self, make_model, num_classes, setup, *, rounds: int = 4, reinit: bool = False):
        if rounds < 1:
            raise ConfigError(f"SEAL needs at least one round, got {rounds}")
        super().__init__(make_model, num_classes, replace(setup, epochs=rounds * setup.epochs))
        self.rounds, self.epochs_per_round, self.reinit = rounds, setup.epochs, reinit

    def _prepare(self, X, y) -> None:
        super()._prepare(X, y)
        self.targets = None  # the current round's soft labels (n, K); None in round 1: the given labels
        self.softmax_sum = torch.zeros(len(X), self.num_classes)
        self.initial_state = copy.deepcopy(self.nets[0].state_dict()) if self.reinit else None
        self.extras = {}

    def train_softmax(self) -> torch.Tensor:
        """Softmax outputs (n, K) of the network on the whole training set, in eval mode."""
        return torch.softmax(self.logits(self.X, 0), dim=1)

    def start_round(self, r: int) -> None:
        """Before the 0-based round ``r``: the soft labels from round r - 1 and, with ``reinit``, a fresh start."""
        if r > 0:
            self.targets = self.softmax_sum / self.epochs_per_round
            self.softmax_sum = torch.zeros_like(self.softmax_sum)
            self.extras["soft_targets"] = self.targets.numpy()
        if self.reinit:
            self.nets[0].load_state_dict(self.initial_state)
            self.optimizers[0], self.schedulers[0] = self.new_optimizer(self.nets[0], self.epochs_per_round)

    def train_epoch(self, epoch: int) -> dict:
        r, position = divmod(epoch, self.epochs_per_round)
        if position == 0:
            self.start_round(r)
        net = self.nets[0]
        if self.targets is None:
            loss = self.run_batches(lambda idx, x, y: F.cross_entropy(net(x), y))
        else:
            loss = self.run_batches(lambda idx, x, y: -(self.targets[idx].to(self.device)
                                                        * F.log_softmax(net(x), dim=1)).sum(dim=1).mean())
        self.softmax_sum += self.train_softmax()
        return {"round": r + 1, "train_loss": loss}
