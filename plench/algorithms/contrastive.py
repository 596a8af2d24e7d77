"""PiCO, ALIM and PiCO+: the MoCo/prototype family of Plench, and the contrastive pieces DIRK reuses.

Shared pieces: ``ProjectedEncoder`` (featurizer -> logits + L2-normalised projection), ``MoCoPair`` (a query
encoder and its EMA key copy), ``FeatureQueue`` (ring buffer of key features with pseudo-labels),
``ema_prototypes`` (class prototypes), ``infonce_loss`` and ``supcon_loss`` (temperature 0.07, as in the code).

As in the official code: query = weak view, key = strong view; every step updates the prototypes with the
query features (indexed by the classifier's pseudo-label ``argmax_{j in S} p_j``), moves the key encoder
(``moco_m``) and only then computes the keys; losses see the queue as it was before this step's keys are
pushed; the confidence EMA ``m`` decays linearly from ``conf_ema_range[0]`` to ``[1]`` over ``max_steps``
(set after each step from the step just taken, so step t uses ``m(t - 1)``).

``compat=True`` reproduces the official ``ALIM.update`` and ``PiCO_plus.update``, which never increment
``curr_iter``: those runs never leave warm-up. ``compat=False`` counts steps (the published methods).

Departures, none of which changes a step's maths: the queue starts as random *unit rows* with label -1 (the
code normalises its random init along the wrong axis and labels it with random floats; both only make the
initial slots match nothing) and wraps around for any batch size up to its length (the code asserts
``moco_queue % batch_size == 0``); the per-example prototype loop is computed in closed form; PiCO+'s label
guess ``score^(1/T)`` renormalised is written as the identical ``softmax(logits_prot / T)``; PiCO+'s class
losses over an empty reliable (or unreliable) subset are 0 (the code's mean of nothing is NaN). ALIM draws
one mini-batch per step in our contract, so its mixup pairs the batch with a permutation of itself (the code
mixes two independent batches), and its epochs are ``n_train // batch_size`` steps (the code tests
``curr_iter % (n_train / batch_size) == 0`` with a float, which a fixed run would rarely meet).

Under bf16 mixed precision (``Algorithm.precision``) the encoders run under autocast but the pseudo-labels, the
prototype similarities and EMA, PiCO+'s distances and kNN, and the InfoNCE/SupCon similarities (divided by a
temperature of 0.07) are computed in float32; the queue and the prototypes are float32 tables.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from plench import networks
from plench.algorithms import register
from plench.algorithms.base import Algorithm, Batch, float32_math, full_precision
from plench.stacked import StackedNetwork, StackedStep, ema_, momentum_tensors
from shared.errors import ConfigError

TEMPERATURE = 0.07  # SupCon/InfoNCE temperature and base temperature, hard-coded in the official code
MARGIN_EPS = 1e-9  # ALIM's epsilon in max_S / max_notS
PICO_PLUS_MIXUP_ALPHA = 4.0  # PiCO+'s Beta(4, 4), hard-coded in the official code


# -- shared pieces ----------------------------------------------------------------------------------------------
def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``-sum_j t_j log softmax(z)_j`` per row: logits (B, q), targets (B, q), treated as constants -> (B,);
    in float32 (bf16 logits are cast up)."""
    logits = logits.float()
    return -(targets.detach().to(logits.dtype) * F.log_softmax(logits, 1)).sum(1)


@float32_math
def infonce_loss(q: torch.Tensor, k: torch.Tensor, queue: torch.Tensor,
                 temperature: float = TEMPERATURE) -> torch.Tensor:
    """MoCo's InfoNCE: each query (B, d) against its key (B, d) as positive and the queue (K, d) as negatives."""
    logits = torch.cat([(q * k).sum(1, keepdim=True), q @ queue.T], 1) / temperature
    return F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long, device=q.device))


@float32_math
def supcon_loss(features: torch.Tensor, positives: torch.Tensor, batch_size: int, *,
                temperature: float = TEMPERATURE, base_temperature: float = TEMPERATURE,
                weights: torch.Tensor | None = None) -> torch.Tensor:
    """Supervised contrastive loss of the first ``batch_size`` rows of ``features`` against all of them.

    features (N, d) L2-normalised, anchors first; positives (B, N) bool or 0/1, anchor i's positives (column i,
    the anchor itself, is never a positive nor in the denominator); weights (B,) optional per-anchor weights.
    For anchor i: ``-(T/T_b) mean_{p in P(i)} log(exp(f_i.f_p/T) / sum_{a != i} exp(f_i.f_a/T))``, then the
    (weighted) mean over anchors. Every anchor needs a positive besides itself (in PiCO, its own key).
    """
    anchors = torch.arange(batch_size, device=features.device)
    sims = features[:batch_size] @ features.T / temperature
    logits = sims - sims.max(1, keepdim=True).values.detach()
    others = torch.ones_like(logits)
    others[anchors, anchors] = 0
    pos = positives.to(logits.dtype) * others
    log_prob = logits - torch.log((logits.exp() * others).sum(1, keepdim=True) + 1e-12)
    loss = -(temperature / base_temperature) * (pos * log_prob).sum(1) / pos.sum(1)
    return loss.mean() if weights is None else (loss * weights.detach()).mean()


@float32_math
def ema_prototypes(prototypes: torch.Tensor, features: torch.Tensor, labels: torch.Tensor, m: float) -> torch.Tensor:
    """Prototypes (q, d) after the code's per-example EMA over features (n, d) with labels (n,), L2-normalised.

    The code loops over the rows in order, ``P[y_i] <- m P[y_i] + (1 - m) z_i``. With ``k_c`` rows of class c
    and ``r_i`` the rank of row i among them, that is ``m^k_c P[c] + (1 - m) sum_i m^(k_c - 1 - r_i) z_i``.
    """
    onehot = F.one_hot(labels, len(prototypes)).to(features.dtype)  # (n, q)
    rank = ((onehot.cumsum(0) - 1) * onehot).sum(1)  # (n,)
    count = onehot.sum(0)  # (q,)
    weight = (1 - m) * m ** (count[labels] - 1 - rank)  # (n,)
    return F.normalize(prototypes * m ** count[:, None] + onehot.T @ (weight[:, None] * features), dim=1)


class ProjectedEncoder(nn.Module):
    """featurizer -> (classifier logits (B, q), L2-normalised projection head output (B, feat_dim))."""

    def __init__(self, featurizer: nn.Module, classifier: nn.Module, head: nn.Module):
        super().__init__()
        self.featurizer, self.classifier, self.head = featurizer, classifier, head

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.featurizer(x)
        return self.classifier(h), F.normalize(self.head(h), dim=1)


class MoCoPair(nn.Module):
    """A query encoder and its key encoder: a copy without gradients kept as an EMA of the query's parameters.

    ``momentum_update(m)``: ``key <- m * key + (1 - m) * query`` for every parameter (buffers such as BatchNorm
    statistics are the key's own, as in MoCo and the official code).
    """

    def __init__(self, query: nn.Module):
        super().__init__()
        self.query = query
        self.key = copy.deepcopy(query)
        self.key.requires_grad_(False)

    @torch.no_grad()
    def momentum_update(self, m: float) -> None:
        for p_key, p_query in zip(self.key.parameters(), self.query.parameters()):
            p_key.mul_(m).add_(p_query.detach(), alpha=1 - m)


class FeatureQueue(nn.Module):
    """Ring buffer of the last ``size`` key features (size, dim) with pseudo-labels (size,) and reliability flags.

    Starts as random unit rows labelled -1 (no class) and flagged unreliable; ``push`` writes a batch at the
    pointer, wrapping around. Only PiCO+ reads the flags; ``push`` without flags marks the rows reliable.
    """

    def __init__(self, size: int, dim: int):
        super().__init__()
        self.size = int(size)
        self.register_buffer("features", F.normalize(torch.randn(self.size, dim), dim=1))
        self.register_buffer("labels", torch.full((self.size,), -1, dtype=torch.long))
        self.register_buffer("reliable", torch.zeros(self.size, dtype=torch.bool))
        self.register_buffer("ptr", torch.zeros((), dtype=torch.long))

    def snapshot(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Copies of (features, labels, reliable), e.g. before a push."""
        return self.features.clone(), self.labels.clone(), self.reliable.clone()

    @torch.no_grad()
    def push(self, features: torch.Tensor, labels: torch.Tensor, reliable: torch.Tensor | None = None) -> None:
        """Enqueue features (B, dim) with labels (B,) and flags (B,) bool (None: all reliable)."""
        if len(features) > self.size:
            raise ConfigError(f"a batch of {len(features)} does not fit a queue of {self.size}; "
                              f"raise moco_queue or lower batch_size")
        start = int(self.ptr)
        slots = (start + torch.arange(len(features), device=features.device)) % self.size
        self.features[slots] = features.detach().to(self.features.dtype)
        self.labels[slots] = labels
        self.reliable[slots] = True if reliable is None else reliable
        self.ptr.fill_((start + len(features)) % self.size)


@dataclass
class MoCoOutput:
    """One query/key forward of the PiCO model: B rows, K queue slots, d = feat_dim, q classes."""

    logits: torch.Tensor  # (B, q) query classifier logits (with grad)
    q: torch.Tensor  # (B, d) query projections (with grad)
    k: torch.Tensor  # (B, d) key projections of the strong view
    within: torch.Tensor  # (B,) argmax_{j in S} softmax(logits)_j
    pseudo: torch.Tensor  # (B,) pseudo-labels of the prototypes, the queue and SupCon
    prot_sim: torch.Tensor  # (B, q) q . prototypes before this step's prototype update
    queue_features: torch.Tensor  # (K, d) the queue before this step's push
    queue_labels: torch.Tensor  # (K,)
    queue_reliable: torch.Tensor  # (K,)

    def contrast_features(self) -> torch.Tensor:
        """(2B + K, d): queries, keys, queue."""
        return torch.cat([self.q, self.k, self.queue_features])

    def contrast_labels(self) -> torch.Tensor:
        """(2B + K,): the pseudo-labels of ``contrast_features``."""
        return torch.cat([self.pseudo, self.pseudo, self.queue_labels])


# -- PiCO -------------------------------------------------------------------------------------------------------
@register
class PiCO(Algorithm):
    """PiCO (Wang et al., 2022b): CE against EMA confidences + ``loss_weight`` x a contrastive loss (MoCo + prototypes).

    Before ``prot_start`` iterations the contrastive term is InfoNCE and the confidences stay s/|S|. From then
    on it is SupCon with the same-pseudo-label positives, and each visited row moves as
    ``w <- m w + (1 - m) onehot(confidence_target)`` *before* the CE uses it; PiCO's target is
    ``argmax_{j in S} softmax(q . prototypes)_j``.
    """

    name, display, group = "PiCO", "PiCO", "holistic PLL"
    views = ("weak", "strong")
    tabular = False
    required_hparams: ClassVar[tuple[str, ...]] = (
        "prot_start", "feat_dim", "moco_queue", "moco_m", "proto_m", "loss_weight", "conf_ema_range")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        missing = [name for name in self.required_hparams if name not in self.hparams]
        if missing:
            raise ConfigError(f"{self.name} needs hyperparameters {missing}; build them with "
                              f"plench.hparams.hparams_for({self.name!r}, arch)")
        if int(self.hparams["moco_queue"]) < int(self.hparams["batch_size"]):
            raise ConfigError(f"{self.name}: moco_queue ({self.hparams['moco_queue']}) must be at least batch_size "
                              f"({self.hparams['batch_size']}); raise moco_queue or lower batch_size")
        feat_dim = int(self.hparams["feat_dim"])
        head = networks.projection_head(self.featurizer.n_outputs, feat_dim)
        self.moco = MoCoPair(ProjectedEncoder(self.featurizer, self.classifier, head))
        self.queue = FeatureQueue(int(self.hparams["moco_queue"]), feat_dim)
        self.register_buffer("prototypes", torch.zeros(self.num_classes, feat_dim))
        self.register_buffer("confidence", self.uniform_confidence())
        self.optimizer = self.make_optimizer(self.moco.query.parameters())

    stack_hparams: ClassVar[tuple[str, ...]] = ("batch_size", "feat_dim")  # the projection head's width

    def train_step(self, batch: Batch) -> dict[str, float]:
        return {"loss": self.step(self.optimizer, self.step_loss(self.moco_forward(batch), batch))}

    def step_loss(self, out: MoCoOutput, batch: Batch) -> torch.Tensor:
        """The step's loss from its MoCo forward; from ``prot_start`` on, the batch rows' confidences move first."""
        started = self.curr_iter >= self.hparams["prot_start"]
        if started:
            self.update_confidence(batch.idx, self.confidence_target(F.softmax(out.prot_sim, 1), batch.s))
        return (soft_cross_entropy(out.logits, self.confidence[batch.idx]).mean()
                + self.hparams["loss_weight"] * self.contrastive_loss(out, started))

    def moco_forward(self, batch: Batch, reliable: torch.Tensor | None = None) -> MoCoOutput:
        """Query forward, prototype update, key-encoder EMA, key forward and queue push, in the code's order.

        ``reliable`` (B,) bool (PiCO+): unreliable rows take the unrestricted argmax as pseudo-label and do not
        move the prototypes. None: every row is reliable.
        """
        logits, q = self.moco.query(batch.weak)
        within, pseudo, prot_sim = self.pseudo_labels(logits, q, batch.s, reliable)
        with torch.no_grad():
            self.moco.momentum_update(self.hparams["moco_m"])
            _, k = self.moco.key(batch.strong)
        return self.enqueue(logits, q, k, within, pseudo, prot_sim, reliable)

    @torch.no_grad()
    def pseudo_labels(self, logits: torch.Tensor, q: torch.Tensor, s: torch.Tensor,
                      reliable: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(within (B,), pseudo (B,), prot_sim (B, q)) of the query's logits and features, then the prototypes'
        EMA over the (reliable) rows; in float32 under mixed precision."""
        with full_precision(q.device.type):
            probs = F.softmax(logits.float(), 1)
            within = (probs * s).argmax(1)
            pseudo = within if reliable is None else torch.where(reliable, within, probs.argmax(1))
            prot_sim = q.float() @ self.prototypes.T
            rows = slice(None) if reliable is None else reliable
            self.prototypes.copy_(ema_prototypes(self.prototypes, q.float()[rows], pseudo[rows],
                                                 self.hparams["proto_m"]))
        return within, pseudo, prot_sim

    def enqueue(self, logits, q, k, within, pseudo, prot_sim, reliable=None) -> MoCoOutput:
        """The step's MoCoOutput, with the queue as it was, then the keys pushed."""
        queue = self.queue.snapshot()
        self.queue.push(k, pseudo, reliable)
        return MoCoOutput(logits, q, k, within, pseudo, prot_sim, *queue)

    @classmethod
    def stacked_step(cls, models: list[PiCO]):
        """PiCO's own stacked step (``StackedPiCO``). PiCO+ and ALIM, with steps of their own, train alone
        (``plench.protocol.batching_obstacle``)."""
        return StackedPiCO(models)

    def contrastive_loss(self, out: MoCoOutput, started: bool) -> torch.Tensor:
        """InfoNCE before ``prot_start``; SupCon with same-pseudo-label positives from then on."""
        if not started:
            return infonce_loss(out.q, out.k, out.queue_features)
        labels = out.contrast_labels()
        return supcon_loss(out.contrast_features(), labels[: len(out.q), None] == labels[None, :], len(out.q))

    def confidence_target(self, score_prot: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """One-hot (B, q) of ``argmax_{j in S} score_prot_j``; score_prot = softmax(q . prototypes) (B, q)."""
        return F.one_hot((score_prot * s).argmax(1), self.num_classes).to(self.confidence.dtype)

    def conf_ema_m(self) -> float:
        """The confidence EMA of step ``curr_iter``: the code sets it after each step, so it lags by one step."""
        start, end = self.hparams["conf_ema_range"]
        return start + max(self.curr_iter - 1, 0) / self.max_steps * (end - start)

    @torch.no_grad()
    def update_confidence(self, idx: torch.Tensor, target: torch.Tensor) -> None:
        m = self.conf_ema_m()
        self.confidence[idx] = m * self.confidence[idx] + (1 - m) * target


class StackedPiCO(StackedStep):
    """G PiCO runs' steps as one (``plench.protocol.train_runs_batched``): the query encoders and their momentum key
    encoders are stacked (``plench.stacked.StackedNetwork``), so the query forward (weak view), the key forward
    (strong view), the backward, the Adam update and the keys' EMA run once for every member, in
    ``PiCO.moco_forward``'s order. Each member's pseudo-labels, prototypes, queue, confidences and loss stay its own,
    computed by its own ``PiCO``. Why: PiCO's step is two small forwards, bound by operator dispatch on a GPU."""

    def __init__(self, models: list[PiCO]):
        self.query = StackedNetwork([m.moco.query for m in models])
        super().__init__(models, self.query, [m.optimizer for m in models])
        self.key = StackedNetwork([m.moco.key for m in models])
        self.momentum, self.rest = momentum_tensors([m.hparams["moco_m"] for m in models],
                                                    self.query.params[0].device)

    def __call__(self, batches: list[Batch]) -> list[float]:
        models = self.models
        weak, strong = (torch.stack([getattr(b, view) for b in batches]) for view in ("weak", "strong"))
        device = weak.device
        with models[0].autocast(device.type):
            logits, q = self.query.forward(weak)
            labels = [m.pseudo_labels(logits[g], q[g], b.s) for g, (m, b) in enumerate(zip(models, batches))]
            ema_(self.key, self.query, self.momentum, self.rest)
            with torch.no_grad():
                _, k = self.key.forward(strong)
            losses = torch.stack([m.step_loss(m.enqueue(logits[g], q[g], k[g], *labels[g]), b).float()
                                  for g, (m, b) in enumerate(zip(models, batches))])
        with full_precision(device.type):  # as Algorithm.step: gradients and Adam in float32
            self.adam.step(torch.autograd.grad(losses.sum(), self.query.params))
        return losses.detach().tolist()


class _CurrIterNeverAdvances:
    """The official ``update`` of ALIM and PiCO+ never increments ``curr_iter``; reproduced with ``compat=True``."""

    def update(self, batch: Batch) -> dict[str, float]:
        """One step. With ``compat=True`` ``curr_iter`` stays 0, as in the official code, so the run never leaves
        warm-up: confidences stay s/|S|, ALIM's lambda stays 0, the contrastive term stays InfoNCE and PiCO+'s
        selection, kNN and mixup never run. ``compat=False`` counts steps, giving the published methods."""
        with self.autocast(batch.s.device.type):  # as Algorithm.update
            losses = self.train_step(batch)
        if not self.compat:
            self.curr_iter += 1
        return losses


# -- ALIM -------------------------------------------------------------------------------------------------------
def candidate_margins(score_prot: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """ALIM's margins ``max_{j in S} score_j / (1e-9 + max_{j not in S} score_j)``: (B, q), (B, q) -> (B,)."""
    return (score_prot * s).max(1).values / (MARGIN_EPS + (score_prot * (1 - s)).max(1).values)


def margin_quantile(margins: torch.Tensor, rate: float) -> float:
    """The code's ``sorted(margins)[int(len(margins) * rate)]`` (the last margin for rate 1)."""
    return float(torch.sort(margins).values[min(int(len(margins) * rate), len(margins) - 1)])


@register
class ALIM(_CurrIterNeverAdvances, PiCO):
    """ALIM (Xu et al., 2023a): PiCO + mixup + a target that lets non-candidates in with weight lambda.

    Target: ``argmax_j softmax(q . prototypes)_j (s_j + lambda (1 - s_j))``. lambda (``self.prior``) is the
    ``noise_rate`` quantile of the margins ``max_S / max_notS`` of the rows visited in the previous epoch,
    re-estimated at every epoch start from ``start_epoch`` on (0 before). Mixup: ``l ~ Beta(mixup_alpha)``,
    ``lam = max(l, 1 - l)``, the weak batch mixed with a permutation of itself and their confidences;
    loss = CE + loss_weight x contrastive + loss_weight_mixup x mixup CE.
    """

    name, display, group = "ALIM", "ALIM", "noisy PLL"
    required_hparams = PiCO.required_hparams + ("start_epoch", "loss_weight_mixup", "mixup_alpha", "noise_rate")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.prior = 0.0
        self.margins: list[torch.Tensor] = []  # (B,) per step of the current epoch

    def train_step(self, batch: Batch) -> dict[str, float]:
        h = self.hparams
        if self.curr_iter % self.steps_per_epoch == 0:
            if self.curr_iter >= h["start_epoch"] * self.steps_per_epoch and self.margins:
                self.prior = margin_quantile(torch.cat(self.margins), h["noise_rate"])
            self.margins = []
        out = self.moco_forward(batch)
        score_prot = F.softmax(out.prot_sim, 1)
        started = self.curr_iter >= h["prot_start"]
        if started:
            self.update_confidence(batch.idx, self.confidence_target(score_prot, batch.s))
        w = self.confidence[batch.idx]
        lam = torch.distributions.Beta(float(h["mixup_alpha"]), float(h["mixup_alpha"])).sample().item()
        lam = max(lam, 1 - lam)
        perm = torch.randperm(len(w), device=w.device)
        mixed_logits, _ = self.moco.query(lam * batch.weak + (1 - lam) * batch.weak[perm])
        loss = (soft_cross_entropy(out.logits, w).mean()
                + h["loss_weight"] * self.contrastive_loss(out, started)
                + h["loss_weight_mixup"] * soft_cross_entropy(mixed_logits, lam * w + (1 - lam) * w[perm]).mean())
        value = self.step(self.optimizer, loss)
        self.margins.append(candidate_margins(score_prot, batch.s))
        return {"loss": value}

    def confidence_target(self, score_prot: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """One-hot (B, q) of ``argmax_j score_prot_j (s_j + lambda (1 - s_j))``."""
        return F.one_hot((score_prot * (s + self.prior * (1 - s))).argmax(1),
                         self.num_classes).to(self.confidence.dtype)


# -- PiCO+ ------------------------------------------------------------------------------------------------------
def select_reliable(distance: torch.Tensor, pure_ratio: float) -> torch.Tensor:
    """(n,) bool: the ``int(n * pure_ratio)`` rows with the smallest distance to their prototype (stable order)."""
    reliable = torch.zeros(len(distance), dtype=torch.bool, device=distance.device)
    reliable[torch.argsort(distance, stable=True)[: int(len(distance) * pure_ratio)]] = True
    return reliable


def robust_positives(labels: torch.Tensor, reliable: torch.Tensor, batch_size: int,
                     knn_index: torch.Tensor | None = None) -> torch.Tensor:
    """PiCO+'s SupCon positives (B, N) over N = 2B + K contrast rows (queries, keys, queue).

    labels (N,) pseudo-labels; reliable (N,) bool flags of the same rows (anchors first). A reliable anchor's
    positives are the reliable rows sharing its label; an unreliable anchor has none, or with ``knn_index``
    (B, k) its k most similar rows. Every anchor's own key (column B + i) is a positive.
    """
    anchors = torch.arange(batch_size, device=labels.device)
    positives = (labels[:batch_size, None] == labels[None, :]) & reliable[:batch_size, None] & reliable[None, :]
    if knn_index is not None:
        neighbours = torch.zeros_like(positives).scatter_(1, knn_index, True)
        positives = torch.where(reliable[:batch_size, None], positives, neighbours)
    positives[anchors, batch_size + anchors] = True
    return positives


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return values[mask].mean() if bool(mask.any()) else values.sum() * 0


@register
class PiCO_plus(_CurrIterNeverAdvances, PiCO):
    """PiCO+ (Wang et al., 2024a): PiCO made robust to candidate sets that miss the true label.

    Each step from ``prot_start`` on, the ``pure_ratio`` fraction of training rows closest to their prototype
    (distance ``-q . prototype[argmax_{j in S} p_j]``, stored at each visit) is the reliable set. Unreliable rows
    take the unrestricted argmax as pseudo-label and do not move the prototypes. The loss is then
    ``mixup CE + cls_weight x CE(w) on reliable rows + ur_weight x CE(guess) on unreliable rows
    + SupCon(reliable positives, kNN for unreliable anchors from knn_start, weighted loss_weight / ur_weight)
    + ur_weight x SupCon(all same-label positives)``, with the label guess ``softmax(q . prototypes /
    temperature_guess)`` and mixup ``Beta(4, 4)`` of the weak batch with a permutation of itself, its targets
    being w (reliable rows) or the guess. Before ``prot_start`` it is PiCO's warm-up: CE(s/|S|) + InfoNCE.
    """

    name, display, group = "PiCO_plus", "PiCO+", "noisy PLL"
    required_hparams = PiCO.required_hparams + (
        "pure_ratio", "knn_start", "n_knn", "temperature_guess", "ur_weight", "cls_weight")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register_buffer("distance", torch.zeros(self.num_train))
        self.register_buffer("reliable", torch.ones(self.num_train, dtype=torch.bool))

    def train_step(self, batch: Batch) -> dict[str, float]:
        h = self.hparams
        started = self.curr_iter >= h["prot_start"]
        if started:
            self.reliable.copy_(select_reliable(self.distance, h["pure_ratio"]))
        reliable = self.reliable[batch.idx]
        out = self.moco_forward(batch, reliable)
        if started:
            self.update_confidence(batch.idx, self.confidence_target(F.softmax(out.prot_sim, 1), batch.s))
            loss = self.robust_loss(batch, out, reliable)
        else:
            loss = (soft_cross_entropy(out.logits, self.confidence[batch.idx]).mean()
                    + h["loss_weight"] * self.contrastive_loss(out, started=False))
        self.distance[batch.idx] = -out.prot_sim.gather(1, out.within[:, None]).squeeze(1)
        return {"loss": self.step(self.optimizer, loss)}

    def robust_loss(self, batch: Batch, out: MoCoOutput, reliable: torch.Tensor) -> torch.Tensor:
        """The post-warm-up loss for a batch whose rows are flagged ``reliable`` (B,) bool."""
        h, size = self.hparams, len(reliable)
        features, labels = out.contrast_features(), out.contrast_labels()
        same_label = labels[:size, None] == labels[None, :]
        knn = self.curr_iter >= h["knn_start"]
        knn_index = None
        if knn:
            with torch.no_grad(), full_precision(features.device.type):
                unit = features.detach().float()
                knn_index = (unit[:size] @ unit.T).topk(int(h["n_knn"]), dim=1).indices
        positives = robust_positives(labels, torch.cat([reliable, reliable, out.queue_reliable]), size, knn_index)
        weights = (h["loss_weight"] * reliable + h["ur_weight"] * ~reliable).to(features.dtype) if knn else None
        contrastive = (supcon_loss(features, positives, size, weights=weights)
                       + h["ur_weight"] * supcon_loss(features, same_label, size))

        w = self.confidence[batch.idx]
        guess = F.softmax(out.prot_sim / h["temperature_guess"], 1)
        targets = torch.where(reliable[:, None], w, guess)
        lam = torch.distributions.Beta(PICO_PLUS_MIXUP_ALPHA, PICO_PLUS_MIXUP_ALPHA).sample().item()
        lam = max(lam, 1 - lam)
        perm = torch.randperm(size, device=w.device)
        mixed_logits, _ = self.moco.query(lam * batch.weak + (1 - lam) * batch.weak[perm])
        mixup = soft_cross_entropy(mixed_logits, lam * targets + (1 - lam) * targets[perm]).mean()
        classification = (mixup + h["cls_weight"] * _masked_mean(soft_cross_entropy(out.logits, w), reliable)
                          + h["ur_weight"] * _masked_mean(soft_cross_entropy(out.logits, guess), ~reliable))
        return classification + contrastive
