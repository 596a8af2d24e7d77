"""Several runs' networks trained as one model: G members that share an architecture and a batch size.

Why: a small network's step on a GPU costs its operators' dispatch (~10 us each on the host), not its arithmetic.
ResNet-32 on a CIFAR batch dispatches about 470 operators a step, so PLENCH's 6,240-run image grid spends most of
its hours launching kernels. Stacked, every operator runs once for all G members, and a member pays 1/G of the
dispatch; the arithmetic is the same.

* ``StackedMLP``: the tabular MLP as stacked ``baddbmm`` products (faster than ``vmap`` on the CPU, where the
  tabular sweeps train).
* ``StackedNetwork``: any network, with ``torch.func``: the members' parameters and buffers are stacked
  (``stack_module_state``) and one ``vmap`` of ``functional_call`` runs every member on its own batch. BatchNorm's
  running statistics are stacked buffers, updated member by member in train mode exactly as each network's own.
* ``StackedAdam``: ``torch.optim.Adam``'s (non-decoupled) update on the stacked tensors, each member with its own
  learning rate and weight decay.

``plench.protocol.train_runs_batched`` runs a ``LossAlgorithm``'s step on them; DIRK and PiCO build their own stacked
steps from the same pieces (``holistic.StackedDIRK``, ``contrastive.StackedPiCO``: two stacked encoders, one of them
an EMA of the other).

Each member keeps its own initial weights, inputs and optimizer state; only the order of floating-point sums
differs from training it alone (a grouped convolution, a batched product), so records agree up to float
rounding, not bit for bit.

    stack = StackedNetwork([model.network for model in models])
    logits = stack.forward(x)            # x (G, B, ...) -> (G, B, q)
    adam = StackedAdam(stack.params, [m.optimizer for m in models])
    adam.step(torch.autograd.grad(loss, stack.params))
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
from torch import nn

from shared.errors import ConfigError


class StackedAdam:
    """Adam over stacked leaf tensors (G, ...): member g follows ``torch.optim.Adam`` with its own optimizer's
    lr and weight decay (``optimizers[g]``: one param group each; betas and eps must agree)."""

    def __init__(self, params: Sequence[torch.Tensor], optimizers: Sequence[torch.optim.Optimizer]):
        groups = [opt.param_groups[0] for opt in optimizers]
        device = params[0].device
        self.params = list(params)
        self.lr = torch.tensor([g["lr"] for g in groups], device=device)
        self.weight_decay = torch.tensor([g["weight_decay"] for g in groups], device=device)
        self.betas, self.eps = groups[0]["betas"], groups[0]["eps"]
        if any(g["betas"] != self.betas or g["eps"] != self.eps for g in groups):
            raise ConfigError("the stacked runs' Adam betas/eps differ; train them separately")
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.t = [0] * len(groups)  # each member's own step count: a skipped step does not advance it

    @torch.no_grad()
    def step(self, grads: Sequence[torch.Tensor], active: Sequence[bool] | None = None) -> None:
        """One Adam update of every member, or of the ``active`` ones (the others' weights and state untouched, as
        a run that skips a step leaves them); in place, ``grads`` are consumed (None: that tensor is left alone)."""
        beta1, beta2 = self.betas
        self.t = [t + 1 if active is None or a else t for t, a in zip(self.t, active or self.t)]
        device = self.params[0].device
        # bias corrections in Python floats (as torch.optim.Adam's single-tensor path), then one tensor per member
        step_size = self.lr / torch.tensor([1 - beta1 ** max(t, 1) for t in self.t], device=device,
                                           dtype=self.lr.dtype)
        bias_correction2_sqrt = torch.tensor([(1 - beta2 ** max(t, 1)) ** 0.5 for t in self.t], device=device)
        mask = None if active is None or all(active) else torch.tensor(list(active), device=device)
        for p, grad, m, v in zip(self.params, grads, self.exp_avg, self.exp_avg_sq):
            if grad is None:  # a tensor no member's loss reached (torch.optim.Adam skips a parameter without grad)
                continue
            shape = (-1,) + (1,) * (p.dim() - 1)
            keep = None if mask is None else (p.clone(), m.clone(), v.clone())
            grad.addcmul_(self.weight_decay.view(shape), p)
            m.lerp_(grad, 1 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            update = v.sqrt().div_(bias_correction2_sqrt.view(shape)).add_(self.eps).reciprocal_().mul_(m)
            p.sub_(update.mul_(step_size.view(shape)))
            if keep is not None:
                for now, before in zip((p, m, v), keep):
                    now.copy_(torch.where(mask.view(shape), now, before))


class StackedMLP:
    """G copies of ``Linear(d, h) -> ReLU -> Linear(h, q)`` as stacked leaf tensors.

    Parameters: ``w1`` (G, h, d), ``b1`` (G, h), ``w2`` (G, q, h), ``b2`` (G, q).
    """

    def __init__(self, networks: Sequence[nn.Module]):
        layers = [[m for m in network.modules() if isinstance(m, nn.Linear)] for network in networks]
        if any(len(pair) != 2 for pair in layers):
            raise ConfigError("StackedMLP needs networks made of exactly two Linear layers (arch 'mlp')")
        self.params = [torch.stack([getattr(pair[i], name).detach() for pair in layers]).clone().requires_grad_()
                       for i in (0, 1) for name in ("weight", "bias")]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (G, B, q) for per-member inputs x (G, B, d)."""
        w1, b1, w2, b2 = self.params
        hidden = torch.relu(torch.baddbmm(b1.unsqueeze(1), x.flatten(2), w1.transpose(1, 2)))
        return torch.baddbmm(b2.unsqueeze(1), hidden, w2.transpose(1, 2))

    def member(self, g: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """Member g's network: logits (n, q) for inputs (n, d), with nn.Linear's kernels."""
        w1, b1, w2, b2 = (p[g].detach() for p in self.params)
        return lambda x: nn.functional.linear(torch.relu(nn.functional.linear(x.flatten(1), w1, b1)), w2, b2)


def _normalise_in_statistics_dtype(module: nn.Module, args: tuple) -> tuple | None:
    """A BatchNorm's input cast to its running statistics' dtype (fp32) when they differ (bf16 convolutions under
    autocast). Why: alone, cuDNN's batch norm takes a bf16 input with fp32 statistics; under ``vmap`` the batched
    rule does not, and CUDA stops with "Expected running_mean to have type BFloat16 but got Float" (an H200,
    2026-11-30; the CPU kernel accepts the mix, so CPU tests cannot see it). The normalisation then runs in fp32, as
    cuDNN's does inside; its output stays fp32 until the next layer's autocast rounds it to bf16."""
    x = args[0]
    stats = module.running_mean if module.running_mean is not None else module.weight
    if stats is None or x.dtype == stats.dtype or not x.is_floating_point():
        return None
    return (x.to(stats.dtype), *args[1:])


class StackedNetwork:
    """G networks of one architecture as one ``torch.func`` model: ``params`` (stacked leaf tensors, (G, ...) each,
    in ``named_parameters`` order) and stacked buffers (BatchNorm's running statistics and counters).

    ``forward`` runs in the mode of ``train()`` / ``eval()`` (train by default), as the networks themselves would.
    """

    def __init__(self, networks: Sequence[nn.Module]):
        from torch.func import stack_module_state

        networks = list(networks)
        if not networks:
            raise ConfigError("StackedNetwork needs at least one network")
        shapes = [(type(net), repr(net), [(n, tuple(t.shape), t.dtype)
                                          for n, t in (*net.named_parameters(), *net.named_buffers())])
                  for net in networks]
        odd = next((g for g, s in enumerate(shapes) if s != shapes[0]), None)
        if odd is not None:
            raise ConfigError(f"StackedNetwork stacks networks of one architecture; member {odd} has other parameters "
                              "or shapes than member 0 (train it alone, or stack it with its own architecture)")
        params, self.buffers = stack_module_state(networks)
        self.names = list(params)
        self.params = [params[name].detach().clone().requires_grad_() for name in self.names]
        # the members' common structure, holding no tensors of its own (functional_call supplies them)
        self.base = copy.deepcopy(networks[0]).to("meta")
        self.base.train()
        for module in self.base.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.register_forward_pre_hook(_normalise_in_statistics_dtype)

    def train(self) -> StackedNetwork:
        self.base.train()
        return self

    def eval(self) -> StackedNetwork:
        self.base.eval()
        return self

    def _call(self, params: dict, buffers: dict, x: torch.Tensor) -> torch.Tensor:
        return self._call_with(self.base, params, buffers, x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (G, B, q) for per-member inputs x (G, B, ...); train mode updates each member's running stats."""
        from torch.func import vmap

        return vmap(self._call)(dict(zip(self.names, self.params)), self.buffers, x)

    def member(self, g: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """Member g's network in eval mode (running statistics): logits (n, q) for inputs (n, ...)."""
        params = {name: p[g].detach() for name, p in zip(self.names, self.params)}
        buffers = {name: b[g] for name, b in self.buffers.items()}
        base = copy.deepcopy(self.base).eval()
        return lambda x: self._call_with(base, params, buffers, x)

    @staticmethod
    def _call_with(base: nn.Module, params: dict, buffers: dict, x: torch.Tensor) -> torch.Tensor:
        from torch.func import functional_call

        return functional_call(base, (params, buffers), (x,))


class StackedStep:
    """Base of an algorithm's own stacked step (``Algorithm.stacked_step``; ``plench.protocol.train_runs_batched``):
    G members' ``models``, the stacked ``network`` they predict with, its ``StackedAdam`` over ``optimizers``
    (one per member), the mode switches and each member's predictor. A subclass adds its other stacked networks and
    ``__call__(batches) -> G losses``."""

    def __init__(self, models: Sequence[nn.Module], network: StackedNetwork,
                 optimizers: Sequence[torch.optim.Optimizer]):
        self.models, self.network = list(models), network
        self.adam = StackedAdam(network.params, optimizers)

    def train(self) -> None:
        self.network.train()

    def eval(self) -> None:
        self.network.eval()

    def predictor(self, g: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """Member g's network in eval mode: float32 logits (n, q) for inputs (n, ...), under the member's autocast
        as ``Algorithm.predict`` (an encoder's (logits, features) output gives its logits)."""
        network, model = self.network.member(g), self.models[g]

        def predict(x: torch.Tensor) -> torch.Tensor:
            with model.autocast(x.device.type):
                out = network(x)
                return (out[0] if isinstance(out, tuple) else out).float()

        return predict


def momentum_tensors(momenta: Sequence[float], device) -> tuple[torch.Tensor, torch.Tensor]:
    """(m, 1 - m) per member (G,), the 1 - m taken in Python floats as ``MoCoPair.momentum_update`` takes it."""
    return (torch.tensor([float(m) for m in momenta], device=device),
            torch.tensor([1 - float(m) for m in momenta], device=device))


@torch.no_grad()
def ema_(keys: StackedNetwork, queries: StackedNetwork, momentum: torch.Tensor, rest: torch.Tensor) -> None:
    """``key <- m key + (1 - m) query`` for every stacked parameter, each member with its own m (``MoCoPair``'s EMA;
    buffers stay the keys' own)."""
    for key, query in zip(keys.params, queries.params):
        shape = (-1,) + (1,) * (key.dim() - 1)
        key.mul_(momentum.view(shape)).addcmul_(query, rest.view(shape))
