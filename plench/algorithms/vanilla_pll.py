"""The 11 vanilla deep PLL algorithms of Plench (Table 6), as PLENCH's ``core/algorithms.py`` computes them.

Identification-based: PRODEN, CAVL, POP, ABS-MAE, ABS-GCE. Data-generation-based: CC, EXP, MCL-GCE, MCL-MSE,
LWS, IDGP. Every one trains on the weak view (the raw ``x`` for tabular data) with Adam.

Where the official code departs from the published method, ``compat=True`` (the default) reproduces the code
and ``compat=False`` the method:

- EXP: the weight ``(q-1)/(q-|S|)`` is infinite for rows with ``|S| = q`` (loss inf, gradients NaN). Fixed:
  such rows carry no information about the label and get weight 0 (they still count in the batch mean).
- MCL-GCE / MCL-MSE: the code's estimator ``sum_S l - (q-d-1)/(d * sum_notS l + 1e-20)`` (d = q - |S|) is
  unbounded below for d = 1. Fixed: Feng et al. (2020)'s ``sum_S l - (q-d-1)/d * sum_notS l``; rows with
  d = 0 are dropped (contribute 0), as for EXP, since their candidate term alone pulls p towards uniform.
- CAVL: the code takes ``argmax_j cav_j * s_j`` over *all* labels, so when every candidate's cav is negative
  (all candidate logits < 0) the target is the first non-candidate (cav 0). Fixed: the argmax runs over S,
  as in the CAVL paper.

Both settings share the code's other details: POP purifies from the original candidate sets every time (the
official code's GPU semantics) and its per-step refresh uses the original sets; IDGP's epoch length is
``n_train / batch_size`` without rounding and its states are updated from the outputs before the step.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from plench import networks
from plench.algorithms import register
from plench.algorithms.base import Algorithm, Batch, LossAlgorithm, full_precision
from plench.stacked import StackedAdam, StackedNetwork, StackedStep

IDGP_EPS = 1e-12  # the official IDGP's epsilon inside logs and normalisers
ONE_PLUS = 1.0000001  # the official IDGP's "1" inside log(1 - g)


def weighted_ce(logits: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``mean_B -sum_j w_j log softmax(z)_j`` for logits (B, q) and targets w (B, q), in float32 (bf16 logits are
    cast up, so the targets are never rounded to bf16)."""
    logits = logits.float()
    return -(w.to(logits.dtype) * F.log_softmax(logits, 1)).sum(1).mean()


def candidate_average(per_label: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """``mean_B (1/|S|) sum_{j in S} per_label_j``: the averaging-based loss for per-label losses (B, q)."""
    return (per_label * s / s.sum(1, keepdim=True)).sum(1).mean()


def renormalise_within(p: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """``p * s`` renormalised per row (B, q): the PRODEN confidence."""
    masked = p * s
    return masked / masked.sum(1, keepdim=True)


# -- identification-based --------------------------------------------------------------------------------
@register
class PRODEN(LossAlgorithm):
    """PRODEN (Lv et al., 2020): CE against confidences w (init s/|S|), re-estimated as p within S after each step."""

    name, display, group = "PRODEN", "PRODEN", "vanilla PLL"
    uses_confidence = True

    def loss(self, logits, s, w):
        return weighted_ce(logits, w)

    def refresh(self, logits, s, w):
        return renormalise_within(F.softmax(logits, 1), s)


@register
class CAVL(PRODEN):
    """CAVL (Zhang et al., 2022): PRODEN's loss with one-hot targets at the largest class activation value.

    ``cav_j = z_j |1 - z_j| s_j`` on the logits; the target is ``onehot(argmax_j cav_j)``, stored in float64 as
    in the code. With ``compat=True`` the argmax runs over all labels (non-candidates have cav 0), with
    ``compat=False`` over the candidates only.
    """

    name, display = "CAVL", "CAVL"

    def initial_confidence(self) -> torch.Tensor:
        return self.uniform_confidence().double()

    def refresh(self, logits, s, w):
        cav = logits * (1 - logits).abs() * s
        if not self.compat:
            cav = cav.masked_fill(s == 0, float("-inf"))
        return F.one_hot(cav.argmax(1), s.shape[1]).to(w.dtype)


@register
class POP(PRODEN):
    """POP (Xu et al., 2023b): PRODEN plus progressive purification of the candidate sets at epoch ends.

    At every ``curr_iter % steps_per_epoch == 0`` the whole confidence matrix goes into slot
    ``epoch % rollWindow`` of a ring buffer (rollWindow, n_train, q). From ``warm_up`` epochs on, its row-normalised
    mean A prunes the **original** sets: ``S' = S`` without the labels where ``A_ij / max_j A_ij < theta``, and
    ``w <- normalise(A * S')``. When ``theta < 0.4`` and fewer than ``1e-4 * n * q`` entries of S' differ from S,
    ``theta <- theta * (1 + inc)``. The per-step refresh keeps using the original sets, as in the code.
    """

    name, display = "POP", "POP"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        window = int(self.hparams["rollWindow"])
        self.register_buffer("snapshots", torch.zeros(window, self.num_train, self.num_classes))
        self.theta = float(self.hparams["theta"])

    def after_step(self) -> None:
        if self.curr_iter % self.steps_per_epoch == 0:
            self.record_and_purify()

    @torch.no_grad()
    def record_and_purify(self) -> None:
        """The epoch-end bookkeeping at ``self.curr_iter`` (a multiple of ``steps_per_epoch``)."""
        epoch = self.curr_iter // self.steps_per_epoch
        self.snapshots[epoch % len(self.snapshots)] = self.confidence
        if self.curr_iter < int(self.hparams["warm_up"]) * self.steps_per_epoch:
            return
        mean = self.snapshots.mean(0)
        mean = mean / mean.sum(1, keepdim=True)
        kept = self.train_S.clone()
        kept[mean / mean.max(1, keepdim=True).values < self.theta] = 0
        purified = mean * kept
        self.confidence = purified / purified.sum(1, keepdim=True)
        changed = int((kept != self.train_S).sum())
        if self.theta < 0.4 and changed < 1e-4 * self.num_train * self.num_classes:
            self.theta *= 1 + float(self.hparams["inc"])


@register
class ABS_MAE(LossAlgorithm):
    """ABS-MAE (Lv et al., 2024a): ``mean_B sum_j (s_j/|S|) ||p - e_j||_1`` = ``(1/|S|) sum_{j in S} (2 - 2 p_j)``."""

    name, display, group = "ABS_MAE", "ABS-MAE", "vanilla PLL"

    def loss(self, logits, s, w):
        p = F.softmax(logits, 1)
        eye = torch.eye(s.shape[1], dtype=p.dtype, device=p.device)
        return candidate_average((p.unsqueeze(1) - eye).abs().sum(-1), s)  # (B, q): ||p - e_j||_1 per label j


@register
class ABS_GCE(LossAlgorithm):
    """ABS-GCE (Lv et al., 2024a): ``mean_B (1/|S|) sum_{j in S} (1 - p_j^q) / q`` with q = ``hparams["q"]`` (0.7)."""

    name, display, group = "ABS_GCE", "ABS-GCE", "vanilla PLL"

    def loss(self, logits, s, w):
        q = float(self.hparams["q"])
        return candidate_average((1 - F.softmax(logits, 1).pow(q)) / q, s)


# -- data-generation-based -------------------------------------------------------------------------------
@register
class CC(LossAlgorithm):
    """CC (Feng et al., 2020b): ``mean_B -log sum_{j in S} p_j`` (no epsilon, as in the code)."""

    name, display, group = "CC", "CC", "vanilla PLL"

    def loss(self, logits, s, w):
        return -torch.log((F.softmax(logits, 1) * s).sum(1)).mean()


@register
class EXP(LossAlgorithm):
    """EXP (Feng et al., 2020a): ``mean_B (q-1)/(q-|S|) exp(-sum_{j in S} p_j)``.

    ``compat=True``: rows with ``|S| = q`` get an infinite weight (inf loss, NaN gradients), as in the code.
    ``compat=False``: they get weight 0.
    """

    name, display, group = "EXP", "EXP", "vanilla PLL"

    def row_weight(self, s: torch.Tensor) -> torch.Tensor:
        """(B,) the weight ``(q-1)/(q-|S|)`` of each row of s (B, q)."""
        q, size = s.shape[1], s.sum(1)
        if self.compat:
            return (q - 1) / (q - size)
        return torch.where(size < q, (q - 1) / (q - size).clamp_min(1), torch.zeros_like(size))

    def loss(self, logits, s, w):
        return (self.row_weight(s) * torch.exp(-(F.softmax(logits, 1) * s).sum(1))).mean()


class MCL(LossAlgorithm):
    """MCL (Feng et al., 2020a): the unbiased estimator for multiple complementary labels with a bounded loss l.

    With d = q - |S| non-candidates: ``compat=True`` uses the PLENCH code's
    ``sum_S l - (q-d-1)/(d * sum_notS l + 1e-20)``; ``compat=False`` uses Feng et al.'s
    ``sum_S l - (q-d-1)/d * sum_notS l`` and drops rows with d = 0.
    """

    group = "vanilla PLL"

    def per_label_loss(self, p: torch.Tensor) -> torch.Tensor:
        """(B, q): ``l(p, k)`` for every label k, from probabilities p (B, q)."""
        raise NotImplementedError

    def loss(self, logits, s, w):
        per_label = self.per_label_loss(F.softmax(logits, 1))
        q = s.shape[1]
        d = q - s.sum(1)
        candidate, noncandidate = (per_label * s).sum(1), (per_label * (1 - s)).sum(1)
        if self.compat:
            return (candidate - (q - d - 1) / (d * noncandidate + 1e-20)).mean()
        unbiased = candidate - (q - d - 1) / d.clamp_min(1) * noncandidate
        return torch.where(d >= 1, unbiased, torch.zeros_like(unbiased)).mean()


@register
class MCL_GCE(MCL):
    """MCL with the GCE loss ``l(p, k) = (1 - p_k^q) / q``, q = ``hparams["q"]`` (0.7)."""

    name, display = "MCL_GCE", "MCL-GCE"

    def per_label_loss(self, p):
        q = float(self.hparams["q"])
        return (1 - p.pow(q)) / q


@register
class MCL_MSE(MCL):
    """MCL with the squared error ``l(p, k) = ||p - e_k||^2 = sum_j p_j^2 - 2 p_k + 1``."""

    name, display = "MCL_MSE", "MCL-MSE"

    def per_label_loss(self, p):
        return p.pow(2).sum(1, keepdim=True) - 2 * p + 1


@register
class LWS(LossAlgorithm):
    """LWS (Wen et al., 2021): leveraged weighted sigmoid losses on the logits.

    Loss ``(1/B) sum_i [sum_{j in S} w_ij sigmoid(-z_ij) + lw_weight * sum_{j notin S} w_ij sigmoid(z_ij)]`` with
    w initialised to 1/q on all labels; after each step ``w <- p s / sum(p s + 1e-8) + p (1-s) / sum(p (1-s) + 1e-8)``
    (the 1e-8 is added to every entry before the row sum, as in the code), so rows sum to about 2.
    """

    name, display, group = "LWS", "LWS", "vanilla PLL"
    uses_confidence = True

    def initial_confidence(self) -> torch.Tensor:
        return torch.full_like(self.train_S, 1.0 / self.num_classes)

    def loss(self, logits, s, w):
        inside = (w * s * torch.sigmoid(-logits)).sum() / len(logits)
        outside = (w * (1 - s) * torch.sigmoid(logits)).sum() / len(logits)
        return inside + float(self.hparams["lw_weight"]) * outside

    def refresh(self, logits, s, w):
        p = F.softmax(logits, 1)
        inside, outside = p * s, p * (1 - s)
        return inside / (inside + 1e-8).sum(1, keepdim=True) + outside / (outside + 1e-8).sum(1, keepdim=True)


# -- IDGP ------------------------------------------------------------------------------------------------
def soft_ce(prob: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``(1/B) sum -target * log(prob + 1e-12)`` for probabilities and targets (B, q)."""
    return -(target * torch.log(prob + IDGP_EPS)).sum() / len(prob)


def binary_ce(prob: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``(1/B) sum -[t log(g + 1e-12) + (1-t) log(1.0000001 - g)]`` for sigmoid outputs g and targets t (B, q)."""
    return -(target * torch.log(prob + IDGP_EPS) + (1 - target) * torch.log(ONE_PLUS - prob)).sum() / len(prob)


def idgp_flip_weight(g_prob: torch.Tensor, d: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """IDGP's target for f from g (B, q): ``w_j ∝ s_j (1 - h_j)/h_j prod_{k in S} h_k``, detached.

    h is g's flip probabilities with the current top label ``argmax_j d_j s_j`` flipped to ``1 - g``.
    """
    top = F.one_hot((d * s).argmax(1), s.shape[1]).to(g_prob.dtype)
    h = (top * (1 - g_prob) + (1 - top) * g_prob).detach() * s
    h = torch.where(h == 0, torch.ones_like(h), h)
    weight = (1 - h) / (h + IDGP_EPS) * h.prod(1, keepdim=True) * s
    return weight / (weight.sum(1, keepdim=True) + IDGP_EPS)


def idgp_g_with_f(g_prob: torch.Tensor, f_prob: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """IDGP's loss for g given f (B, q): ``-sum w^f log(1.0000001 - g)/B + BCE(g; s)``, w^f = f normalised within S."""
    w = (f_prob * s).detach()
    w = w / (w.sum(1, keepdim=True) + IDGP_EPS)
    return -(w * torch.log(ONE_PLUS - g_prob)).sum() / len(g_prob) + binary_ce(g_prob, s)


@register
class IDGP(Algorithm):
    """IDGP (Qiao et al., 2023a): f (softmax, the label posterior) and g (per-label sigmoid, the flip probabilities).

    Each network has its own Adam. States (float64, n_train x q): ``d = s/|S|`` and ``b = s``. While
    ``curr_iter <= warm_up_epoch * n_train / batch_size`` f minimises CE(d) and g BCE(b); afterwards
    ``L_F = CE(f; d) + CE(f; idgp_flip_weight) + lam KL(d || f)`` and
    ``L_G = BCE(g; b) + idgp_g_with_f + lam KL(b || sigmoid(g))`` with ``lam = min(t / int(0.2 max_steps), 1)``
    (the ramp is at least 1 iteration: the code divides by zero for runs under 5 steps).
    After the step, ``d <- normalise(f s)`` and ``b <- g s`` from the outputs computed before it (as in the code).
    ``self.network`` is f: predictions come from f. The reported ``loss`` is f's.
    """

    name, display, group = "IDGP", "IDGP", "vanilla PLL"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        g_featurizer = networks.featurizer(self.arch, self.input_shape)
        self.g = nn.Sequential(g_featurizer, nn.Linear(g_featurizer.n_outputs, self.num_classes))
        self.f_optimizer = self.make_optimizer()
        self.g_optimizer = self.make_optimizer(self.g.parameters())
        self.register_buffer("d", self.uniform_confidence().double())
        self.register_buffer("b", self.train_S.double())
        self.warm_up_steps = float(self.hparams["warm_up_epoch"]) * self.num_train / int(self.hparams["batch_size"])
        self.ramp_steps = max(1, int(0.2 * self.max_steps))

    def consistency_weight(self) -> float:
        """``lam_t = min(t / int(0.2 max_steps), 1)`` at the current iteration t."""
        return min(self.curr_iter / self.ramp_steps, 1.0)

    def train_step(self, batch: Batch) -> dict[str, float]:
        # f's and g's losses reach only their own network (the cross terms are detached), so both forwards can come
        # first: the same numbers as the code's forward f, step f, forward g, step g
        loss_f, loss_g, f_prob, g_prob = self.step_losses(self.network(batch.weak), self.g(batch.weak), batch)
        value = self.step(self.f_optimizer, loss_f)
        self.step(self.g_optimizer, loss_g)
        self.refresh(f_prob, g_prob, batch)
        return {"loss": value}

    def step_losses(self, f_logits: torch.Tensor, g_logits: torch.Tensor,
                    batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(loss_f, loss_g, f_prob, g_prob) for f's and g's logits (B, q): the warm-up's CE and BCE, or the full
        losses afterwards; the probabilities in float32 (the states d, b are float64)."""
        s, idx = batch.s, batch.idx
        d, b = self.d[idx].to(s.dtype), self.b[idx].to(s.dtype)
        f_logits, g_logits = f_logits.float(), g_logits.float()
        f_prob, g_prob = F.softmax(f_logits, 1), torch.sigmoid(g_logits)
        if self.curr_iter <= self.warm_up_steps:
            return soft_ce(f_prob, d), binary_ce(g_prob, b), f_prob, g_prob
        lam = self.consistency_weight()
        loss_f = (soft_ce(f_prob, d) + soft_ce(f_prob, idgp_flip_weight(g_prob, d, s))
                  + lam * F.kl_div(F.log_softmax(f_logits, 1), d, reduction="batchmean"))
        loss_g = (binary_ce(g_prob, b) + idgp_g_with_f(g_prob, f_prob, s)
                  + lam * F.kl_div(F.logsigmoid(g_logits), b, reduction="batchmean"))
        return loss_f, loss_g, f_prob, g_prob

    @torch.no_grad()
    def refresh(self, f_prob: torch.Tensor, g_prob: torch.Tensor, batch: Batch) -> None:
        """``d <- normalise(f s)`` and ``b <- g s`` for the batch rows, from the outputs before the step."""
        s, idx = batch.s, batch.idx
        new_d = f_prob.detach() * s
        self.d[idx] = (new_d / (new_d.sum(1, keepdim=True) + IDGP_EPS)).double()
        self.b[idx] = (g_prob.detach() * s).double()

    @classmethod
    def stacked_step(cls, models: list[IDGP]) -> StackedIDGP:
        return StackedIDGP(models)


class StackedIDGP(StackedStep):
    """G IDGP runs' steps as one (``plench.protocol.train_runs_batched``): the f networks and the g networks are
    stacked (``plench.stacked.StackedNetwork``), so each forward, one backward of every member's two losses and the
    two batched Adam updates run once for all members; each member's phase, losses and states d, b stay its own,
    computed by its own ``IDGP``."""

    def __init__(self, models: list[IDGP]):
        self.f, self.g = StackedNetwork([m.network for m in models]), StackedNetwork([m.g for m in models])
        super().__init__(models, self.f, [m.f_optimizer for m in models])
        self.g_adam = StackedAdam(self.g.params, [m.g_optimizer for m in models])

    def __call__(self, batches: list[Batch]) -> list[float]:
        models = self.models
        x = torch.stack([b.weak for b in batches])
        with models[0].autocast(x.device.type):
            f_logits, g_logits = self.f.forward(x), self.g.forward(x)
            steps = [m.step_losses(f_logits[g], g_logits[g], b) for g, (m, b) in enumerate(zip(models, batches))]
            loss_f = torch.stack([step[0].float() for step in steps])
            loss_g = torch.stack([step[1].float() for step in steps])
        with full_precision(x.device.type):  # as Algorithm.step: gradients and Adam in float32
            grads = torch.autograd.grad(loss_f.sum() + loss_g.sum(), [*self.f.params, *self.g.params])
            self.adam.step(grads[:len(self.f.params)])
            self.g_adam.step(grads[len(self.f.params):])
        for m, b, step in zip(models, batches, steps):
            m.refresh(step[2], step[3], b)
        return loss_f.detach().tolist()
