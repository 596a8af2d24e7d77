"""Data Parameters (Saxena, Tuzel and DeCoste, 2019) with instance-level temperatures only, as the official
NoisywikiHow code runs them (``trainer.train_for_one_epoch``, ``common/utils.py``).

Every training row i has a learnable log-temperature theta_i, initialised to log(init_inst_param) = log(1) = 0;
sigma_i = exp(theta_i) and the loss is CE(z_i / sigma_i, y_i), the mean over the batch (+ 0.5 * wd_inst_param *
sum theta_i^2 over the batch when wd_inst_param > 0). After the model's optimizer step theta takes a step of
Apple's SparseSGD (``optimizer/sparse_sgd.py`` of apple/ml-data-parameters, momentum 0.9,
``skip_update_zero_grad=True``): only the batch's rows with a non-zero gradient change, and only their momentum
buffers do,

    buf_i <- momentum * buf_i + g_i,    theta_i <- theta_i - lr_inst_param * buf_i,

then theta is clamped to [log(1/20), log(20)] (``sigma_range``; None skips the clamp). Prediction uses the raw
logits, without temperature, as the official ``validate``. The history records the mean sigma per epoch;
``extras["sigma"]`` is the final sigma (n,). Official values (``tm_train_hy_nruns.py``): lr_inst_param 0.2
(0.1 for 40 % ``idn``/``neighbor`` noise), momentum 0.9, wd_inst_param 0; the model's optimizer is the
set-up's, without gradient clipping.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from shared.errors import ConfigError
from shared.methods.base import Method


def sparse_momentum_step(param: torch.Tensor, buf: torch.Tensor, rows: torch.Tensor, grad: torch.Tensor, *,
                         lr: float, momentum: float) -> None:
    """SparseSGD (no dampening, no Nesterov) in place on ``param[rows]``, ``buf[rows]`` given their gradient."""
    nonzero = grad != 0
    rows, grad = rows[nonzero], grad[nonzero]
    buf[rows] = momentum * buf[rows] + grad
    param[rows] -= lr * buf[rows]


class DataParameters(Method):
    name = "data_parameters"

    def __init__(self, make_model, num_classes, setup, *, lr_inst_param: float = 0.2, momentum: float = 0.9,
                 wd_inst_param: float = 0.0, init_inst_param: float = 1.0,
                 sigma_range: tuple[float, float] | None = (1 / 20, 20)):
        super().__init__(make_model, num_classes, setup)
        if lr_inst_param <= 0 or not 0 <= momentum < 1 or wd_inst_param < 0 or init_inst_param <= 0:
            raise ConfigError("Data Parameters need lr_inst_param > 0, momentum in [0, 1), wd_inst_param >= 0 and "
                              f"init_inst_param > 0; got {lr_inst_param}, {momentum}, {wd_inst_param}, {init_inst_param}")
        if sigma_range is not None and not 0 < sigma_range[0] < sigma_range[1]:
            raise ConfigError(f"sigma_range must be None or (low, high) with 0 < low < high, got {sigma_range}")
        self.lr_inst_param, self.momentum, self.wd_inst_param = lr_inst_param, momentum, wd_inst_param
        self.init_inst_param = init_inst_param
        self.theta_range = None if sigma_range is None else (math.log(sigma_range[0]), math.log(sigma_range[1]))

    def _prepare(self, X, y) -> None:
        super()._prepare(X, y)
        self.theta = torch.full((len(X),), math.log(self.init_inst_param), device=self.device)
        self.buf = torch.zeros_like(self.theta)
        self.extras = {}

    def train_epoch(self, epoch: int) -> dict:
        net, optimizer = self.nets[0], self.optimizers[0]
        total, count = 0.0, 0
        for idx in self.batches():
            rows = idx.to(self.device)
            theta = self.theta[rows].clone().requires_grad_(True)
            loss = F.cross_entropy(net(self.inputs(idx)) / theta.exp()[:, None], self.y[idx].to(self.device))
            if self.wd_inst_param > 0:
                loss = loss + 0.5 * self.wd_inst_param * (theta**2).sum()
            self.step(optimizer, loss)
            with torch.no_grad():
                sparse_momentum_step(self.theta, self.buf, rows, theta.grad, lr=self.lr_inst_param,
                                     momentum=self.momentum)
                if self.theta_range is not None:
                    self.theta.clamp_(*self.theta_range)
            total, count = total + float(loss.detach()) * len(idx), count + len(idx)
        sigma = self.theta.exp().cpu()
        self.extras["sigma"] = sigma.numpy()
        return {"train_loss": total / max(count, 1), "sigma_mean": float(sigma.mean())}
