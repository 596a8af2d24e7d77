"""ABLE, CRDPLL, DIRK and VALEN (holistic PLL) and FREDIS (noisy PLL), as PLENCH's ``core/algorithms.py`` computes them.

ABLE, CRDPLL and DIRK need image augmentations (``tabular = False``); VALEN and FREDIS read only the weak view,
which for tabular data is the raw ``x`` (the paper runs VALEN on tabular data only and FREDIS on images only).

Where the official code departs from the published method, ``compat=True`` (the default) reproduces the code
and ``compat=False`` the method:

- ABLE: the contrastive loss weights anchor i's candidate c by ``w[i, c]`` with i the row's position *in the
  batch*, i.e. the confidences of training rows 0..B-1, whoever is in the batch (the original ABLE code has the
  same slip). Fixed: the batch rows' own confidences ``w[idx]``.
- VALEN: the encoder is re-created as a copy of the classifier network when the graph is built, after the Adam
  optimizer was given the old encoder's parameters, so the new encoder is never trained (L_d and L_alpha move
  nothing; the Dirichlet samples come from a frozen copy of the warmed-up network). Fixed: the encoder is trained.
- FREDIS: PLENCH feeds the *original* candidate sets to every step (the original FREDIS replaces the loader's
  sets by the refined ones). With compat the per-step refresh ``w <- normalise(p * s)`` and the non-candidate loss
  use the original S, so a refined row's target is used once, at its first visit after a refinement, and is then
  overwritten. Its safety check ``row.sum == 0`` compares the method object and never fires, so refinement can
  empty a row. Fixed: the refined candidate matrix drives the loss and the refresh, and rows a refinement would
  empty keep their previous candidates.

Shared by both settings (each is the official code's behaviour unless said otherwise):

- CRDPLL: ``lambda_t = min(t / (0.5 max_steps), 1) * lam`` with t the steps already taken; the refresh re-forwards
  both views after the step.
- ABLE: one forward of the weak and strong views concatenated; the new confidences come from the weak view's
  probabilities *before* the step.
- DIRK: the teacher is a separately initialised network (not a copy of the student) that follows the student's
  parameters by EMA (its BatchNorm statistics are its own). Departure: the queue starts as random unit rows with
  uniform distributions, no candidates and label -1, so its unfilled slots are never positives (the code fills
  them with ``randn``, which makes every unfilled slot overlap every candidate set); they are all overwritten after
  ``moco_queue / batch_size`` steps, before ``prot_start`` in every configuration of the search.
- VALEN: phases at iterations t (steps already taken), with ``e = n_train / batch_size`` as a float:
  warm-up ``t < warm_up`` (PRODEN with SGD, momentum 0.9, targets refreshed from the pre-step outputs);
  feature collection ``warm_up <= t < warm_up + e + 1``; the graph at ``t = ceil(warm_up + e + 1)``; the
  variational phase afterwards. Departure: when e is an integer the code's graph branch
  (``warm_up + e + 1 < t < warm_up + e + 2``) matches no iteration and the next step reads an undefined
  adjacency; here the graph is built at ``warm_up + e + 1`` in that case (the same rule, ceil of an integer), so
  no run crashes. Departure: the k nearest neighbours come from exact squared Euclidean distances computed in
  row blocks (ties to the lower index, as the code's repeated argmin), and the graph is kept as an (n, k) index
  table from which ``D^-1 (A + I)`` blocks are built on demand. The code's dense n x n distance and adjacency
  matrices (2.3 GB each in float32 for English's 24k rows, 10 GB for 50k images) are never formed, so memory
  is O(block x n + n x k) and no size limit is needed; the graph is not cached on disk.
- FREDIS: one view (the weak one) in the loss and the refresh, as in PLENCH (the original FREDIS averages its
  consistency loss over three augmentations). The refinement runs at every ``t % int(update_interval * n_train / batch_size) == 0``, t = 0
  included (posteriors of unvisited rows are then still uniform); its random picks use torch's generator.
  The code lowers delta by ``dec`` in a loop until enough candidates can be removed; the same sequence of float
  subtractions is computed in closed batches here. Where the code's loop would never end (fewer candidate entries
  than ``change_size x times`` need), it stops once every candidate is removable.
"""
from __future__ import annotations

import copy
import math
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from plench import networks
from plench.algorithms import register
from plench.algorithms.base import Algorithm, Batch, LossAlgorithm, float32_math, full_precision
from plench.algorithms.contrastive import (TEMPERATURE, FeatureQueue, MoCoPair, ProjectedEncoder, infonce_loss,
                                           supcon_loss)
from plench.algorithms.vanilla_pll import renormalise_within, weighted_ce
from plench.stacked import StackedNetwork, StackedStep, ema_, momentum_tensors
from shared.errors import ConfigError

NON_CANDIDATE_ONE = 1.0000001  # the "1" of the code's log(1 - p_j) on non-candidates (CRDPLL, FREDIS)
VALEN_EPS = 1e-12  # VALEN's epsilon inside log(p) and in its target refresh
VALEN_DIRICHLET_FLOOR = 1e-2  # added to the Dirichlet concentrations, and the hardtanh bounds (0.01, 30)
VALEN_RECONSTRUCTION_WEIGHT = 1e-2  # of the x and candidate-set reconstruction losses
FREDIS_EPS = 1e-12  # added to the refined candidate matrix before renormalising the posterior


def _require(algorithm: Algorithm, names: tuple[str, ...]) -> None:
    missing = [name for name in names if name not in algorithm.hparams]
    if missing:
        raise ConfigError(f"{algorithm.name} needs hyperparameters {missing}; build them with "
                          f"plench.hparams.hparams_for({algorithm.name!r}, arch)")


def non_candidate_loss(logits: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """``-mean_B sum_{j not in S} log(1.0000001 - p_j)`` for logits (B, q) and candidate sets s (B, q), in float32
    (in bf16 the 1.0000001 is 1 and a saturated p_j gives log 0)."""
    return -(torch.log(NON_CANDIDATE_ONE - F.softmax(logits.float(), 1)) * (1 - s)).sum(1).mean()


def kl_to_targets(logits: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``mean_B KL(w || softmax(z))`` (``nn.KLDivLoss(reduction="batchmean")``; 0 log 0 = 0): (B, q), (B, q) -> ();
    in float32 (bf16 logits are cast up)."""
    logits = logits.float()
    return F.kl_div(F.log_softmax(logits, 1), w.to(logits.dtype), reduction="batchmean")


# -- ABLE -------------------------------------------------------------------------------------------------------
@float32_math
def ambiguity_contrastive_loss(features: torch.Tensor, probs: torch.Tensor, s: torch.Tensor, w: torch.Tensor,
                               temperature: float, base_temperature: float = TEMPERATURE) -> torch.Tensor:
    """ABLE's ambiguity-induced contrastive loss over the 2B features of a batch's two views.

    features (2B, d) L2-normalised, weak views first then strong; probs (B, q) the weak view's probabilities;
    s (B, q) candidate sets; w (B, q) the confidences that weight each anchor's candidates. With
    ``pred_j = argmax_{c in S_j} probs_jc`` and ``n_c`` the batch rows predicted c, both views of row j are
    positives of both views of anchor i with weight ``M_ij = s_i[pred_j] w_i[pred_j] / n_{pred_j}`` (the anchor
    itself excluded, its other view kept). Loss of anchor a: ``-(T/T_b) sum_b M_ab log(exp(f_a.f_b/T) /
    sum_{b' != a} exp(f_a.f_b'/T))``, unnormalised; the result is the mean over the 2B anchors.
    """
    size, dtype = len(s), features.dtype
    pred = (probs.detach() * s).argmax(1)
    count = torch.bincount(pred, minlength=s.shape[1]).to(dtype)
    weights = ((s * w).to(dtype)[:, pred] / count[pred]).repeat(2, 2)  # (2B, 2B)
    others = 1 - torch.eye(2 * size, dtype=dtype, device=features.device)
    sims = features @ features.T / temperature
    logits = sims - sims.max(1, keepdim=True).values.detach()
    log_prob = logits - torch.log((logits.exp() * others).sum(1, keepdim=True))
    return -(temperature / base_temperature) * (weights * others * log_prob).sum(1).mean()


@register
class ABLE(Algorithm):
    """ABLE (Xia et al., 2022): ``CE(w; z_weak) + loss_weight x`` the ambiguity-induced contrastive loss.

    The weak and strong views go through the network together; the contrastive loss (``temperature``, base
    temperature 0.07) runs over their 2B projections. After the step ``w <- normalise(p_weak * s)`` with the
    weak-view probabilities of the forward before the step. Predicts with the classifier.
    """

    name, display, group = "ABLE", "ABLE", "holistic PLL"
    views = ("weak", "strong")
    tabular = False
    required_hparams: ClassVar[tuple[str, ...]] = ("feat_dim", "loss_weight", "temperature")
    stack_hparams: ClassVar[tuple[str, ...]] = ("batch_size", "feat_dim")  # the projection head's width

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _require(self, self.required_hparams)
        head = networks.projection_head(self.featurizer.n_outputs, int(self.hparams["feat_dim"]))
        self.encoder = ProjectedEncoder(self.featurizer, self.classifier, head)
        self.register_buffer("confidence", self.uniform_confidence())
        self.optimizer = self.make_optimizer(self.encoder.parameters())

    def anchor_confidence(self, idx: torch.Tensor) -> torch.Tensor:
        """(B, q) the confidences weighting the contrastive positives: training rows 0..B-1 with compat (the
        code indexes by batch position), the batch's own rows ``idx`` otherwise."""
        rows = torch.arange(len(idx), device=idx.device) if self.compat else idx
        return self.confidence[rows]

    def train_step(self, batch: Batch) -> dict[str, float]:
        logits, features = self.encoder(torch.cat([batch.weak, batch.strong]))
        loss, probs = self.step_loss(logits, features, batch)
        value = self.step(self.optimizer, loss)
        self.refresh(probs, batch)
        return {"loss": value}

    def step_loss(self, logits: torch.Tensor, features: torch.Tensor,
                  batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(loss, the weak view's probabilities (B, q), float32, detached) from the encoder's outputs for the weak
        and strong views concatenated: logits (2B, q), features (2B, feat_dim)."""
        size = len(batch.idx)
        probs = F.softmax(logits[:size].float(), 1).detach()  # float32: the confidences' refresh
        contrastive = ambiguity_contrastive_loss(features, probs, batch.s, self.anchor_confidence(batch.idx),
                                                 float(self.hparams["temperature"]))
        return weighted_ce(logits[:size], self.confidence[batch.idx]) + self.hparams["loss_weight"] * contrastive, probs

    def refresh(self, probs: torch.Tensor, batch: Batch) -> None:
        """After the step: the batch rows' confidences from the probabilities of the forward before it."""
        self.confidence[batch.idx] = renormalise_within(probs, batch.s).to(self.confidence.dtype)

    @classmethod
    def stacked_step(cls, models: list[ABLE]) -> StackedABLE:
        return StackedABLE(models)


class StackedABLE(StackedStep):
    """G ABLE runs' steps as one (``plench.protocol.train_runs_batched``): the encoders (network + projection head)
    are stacked (``plench.stacked.StackedNetwork``), so the forward of each member's weak and strong views
    concatenated, the backward and the Adam update run once for every member; each member's loss and confidences
    are its own, computed by its own ``ABLE``. Members share ``feat_dim`` and the batch size."""

    def __init__(self, models: list[ABLE]):
        self.encoder = StackedNetwork([m.encoder for m in models])
        super().__init__(models, self.encoder, [m.optimizer for m in models])

    def __call__(self, batches: list[Batch]) -> list[float]:
        models = self.models
        x = torch.stack([torch.cat([b.weak, b.strong]) for b in batches])  # (G, 2B, ...)
        with models[0].autocast(x.device.type):
            logits, features = self.encoder.forward(x)
            steps = [m.step_loss(logits[g], features[g], b) for g, (m, b) in enumerate(zip(models, batches))]
            losses = torch.stack([loss.float() for loss, _ in steps])
        with full_precision(x.device.type):  # as Algorithm.step: gradients and Adam in float32
            self.adam.step(torch.autograd.grad(losses.sum(), self.encoder.params))
        with torch.no_grad():
            for m, b, (_, probs) in zip(models, batches, steps):
                m.refresh(probs, b)
        return losses.detach().tolist()


# -- CRDPLL -----------------------------------------------------------------------------------------------------
def consistency_weight(t: int, max_steps: int, lam: float = 1.0) -> float:
    """CRDPLL's ramp ``min(t / (0.5 max_steps) * lam, lam)`` after t steps of a ``max_steps`` run."""
    return min(t / (0.5 * max_steps) * lam, lam)


def crdpll_confidence(p_weak: torch.Tensor, p_strong: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """``normalise(sqrt(p_weak) sqrt(p_strong) s)`` per row: (B, q) x3 -> (B, q)."""
    return renormalise_within(p_weak.sqrt() * p_strong.sqrt(), s)


@register
class CRDPLL(LossAlgorithm):
    """CRDPLL (Wu et al., 2022): ``lambda_t [KL(w||p_weak) + KL(w||p_strong)] + non_candidate_loss(z_weak, s)``.

    ``lambda_t = consistency_weight(t, max_steps, lam)``. After the step both views are re-forwarded and
    ``w <- crdpll_confidence(p_weak, p_strong, s)``. A ``LossAlgorithm`` of two views (the weak view's forward,
    then the strong one's, as the official step), so its configurations train as one stack.
    """

    name, display, group = "CRDPLL", "CRDPLL", "holistic PLL"
    views = ("weak", "strong")
    tabular = False
    uses_confidence = True
    required_hparams: ClassVar[tuple[str, ...]] = ("lam",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _require(self, self.required_hparams)

    def loss(self, logits_weak: torch.Tensor, logits_strong: torch.Tensor, s: torch.Tensor,
             w: torch.Tensor) -> torch.Tensor:
        """The step's loss for the two views' logits (B, q), candidate sets s and confidences w (B, q)."""
        lam = consistency_weight(self.curr_iter, self.max_steps, float(self.hparams["lam"]))
        consistency = kl_to_targets(logits_weak, w) + kl_to_targets(logits_strong, w)
        return lam * consistency + non_candidate_loss(logits_weak, s)

    def refresh(self, logits_weak: torch.Tensor, logits_strong: torch.Tensor, s: torch.Tensor,
                w: torch.Tensor) -> torch.Tensor:
        """``crdpll_confidence`` of the re-forwarded views' probabilities (B, q)."""
        return crdpll_confidence(F.softmax(logits_weak, 1), F.softmax(logits_strong, 1), s)


# -- DIRK -------------------------------------------------------------------------------------------------------
def _within_and_outside(p: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(p_S, p_notS): p (B, q) renormalised within the candidate sets s (B, q) and outside them (0 where |S| = q)."""
    p_in, p_out = p * s, p * (1 - s)
    return p_in / p_in.sum(1, keepdim=True), p_out / (p_out.sum(1, keepdim=True) + 1e-20)


def rectification_weight(p: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """DIRK's candidate mass a (B,) for probabilities p (B, q) and candidate sets s (B, q).

    ``a = M max(p_notS) / (M max(p_notS) + min_{j in S} p_S,j)`` with ``M = 1 / sum_{j in S} p_j``, p_S (p_notS)
    p renormalised within (outside) S; ``a = 1`` where the formula gives 0 (e.g. |S| = q).
    """
    p_in, p_out = _within_and_outside(p, s)
    scaled_max = p_out.max(1).values / (p * s).sum(1)
    a = scaled_max / (scaled_max + ((1 - s) + p_in).min(1).values)
    return torch.where(a == 0, torch.ones_like(a), a)


def rectified_distribution(p: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """DIRK's reliable label distribution ``r = a p_S + (1 - a) p_notS`` (B, q); ``a = rectification_weight(p, s)``."""
    a = rectification_weight(p, s)[:, None]
    p_in, p_out = _within_and_outside(p, s)
    return a * p_in + (1 - a) * p_out


@float32_math
def distribution_weights(dists: torch.Tensor, positives: torch.Tensor, batch_size: int,
                         dist_temperature: float) -> torch.Tensor:
    """DIRK's positive weights (B, N): softmax over each anchor's positives of ``cos(d_i, d_j) / dist_temperature``.

    dists (N, q) label distributions of the N contrast rows (anchors first); positives (B, N) bool, the anchor
    itself excluded here. Every row of the result sums to 1 (each anchor has its own key as a positive).
    """
    unit = dists / dists.norm(dim=1, keepdim=True)
    sims = unit[:batch_size] @ unit.T / dist_temperature
    mask = positives.to(sims.dtype)
    anchors = torch.arange(batch_size, device=mask.device)
    mask[anchors, anchors] = 0
    exp = torch.exp(sims - sims.max(1, keepdim=True).values) * mask
    return exp / exp.sum(1, keepdim=True)


class DistillQueue(FeatureQueue):
    """DIRK's teacher queue: key features (size, dim), their label distributions (size, q) and candidate sets.

    ``labels`` holds each slot's pseudo-label ``argmax`` of its distribution. Unfilled slots: random unit
    features, uniform distributions, empty candidate sets, label -1 (never a positive).
    """

    def __init__(self, size: int, dim: int, num_classes: int):
        super().__init__(size, dim)
        self.register_buffer("dists", torch.full((self.size, num_classes), 1.0 / num_classes))
        self.register_buffer("candidates", torch.zeros(self.size, num_classes))

    def distill_snapshot(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Copies of (features, labels, dists, candidates)."""
        return self.features.clone(), self.labels.clone(), self.dists.clone(), self.candidates.clone()

    @torch.no_grad()
    def push_distill(self, features: torch.Tensor, dists: torch.Tensor, candidates: torch.Tensor) -> None:
        """Enqueue features (B, dim) with distributions (B, q) and candidate sets (B, q)."""
        slots = (int(self.ptr) + torch.arange(len(features), device=features.device)) % self.size
        self.push(features, dists.argmax(1))
        self.dists[slots] = dists.to(self.dists.dtype)
        self.candidates[slots] = candidates.to(self.candidates.dtype)


@register
class DIRK(Algorithm):
    """DIRK (Wu et al., 2024): a student distils the teacher's rectified label distributions.

    Teacher (EMA of the student with ``momentum``): features of the weak view, distribution
    ``r = rectified_distribution(softmax(z_teacher(distill)), s)``. Student loss ``CE(r; z_student(distill)) +
    weight x L``; L runs over [student strong-view features, teacher features, queue] with ``feat_temperature``:
    InfoNCE before ``prot_start`` iterations, afterwards a contrastive loss whose positives share a candidate and
    the pseudo-label ``argmax r``, weighted by ``distribution_weights`` (``dist_temperature``). Predicts with
    the student.
    """

    name, display, group = "DIRK", "DIRK", "holistic PLL"
    views = ("weak", "strong", "distill")
    tabular = False
    stack_hparams: ClassVar[tuple[str, ...]] = ("batch_size", "feat_dim")  # the projection head's width
    required_hparams: ClassVar[tuple[str, ...]] = (
        "momentum", "moco_queue", "feat_dim", "prot_start", "weight", "dist_temperature", "feat_temperature")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _require(self, self.required_hparams)
        feat_dim, width = int(self.hparams["feat_dim"]), self.featurizer.n_outputs
        student = ProjectedEncoder(self.featurizer, self.classifier, networks.projection_head(width, feat_dim))
        teacher = ProjectedEncoder(networks.featurizer(self.arch, self.input_shape),
                                   nn.Linear(width, self.num_classes), networks.projection_head(width, feat_dim))
        self.pair = MoCoPair(student)
        self.pair.key = teacher.requires_grad_(False)  # initialised on its own, as in the code
        self.queue = DistillQueue(int(self.hparams["moco_queue"]), feat_dim, self.num_classes)
        self.optimizer = self.make_optimizer(student.parameters())

    def train_step(self, batch: Batch) -> dict[str, float]:
        student, teacher, h = self.pair.query, self.pair.key, self.hparams
        with torch.no_grad():
            _, feat_t = teacher(batch.weak)
            r = rectified_distribution(F.softmax(teacher(batch.distill)[0].float(), 1), batch.s)
        queue = self.queue.distill_snapshot()
        self.queue.push_distill(feat_t, r, batch.s)
        logits, _ = student(batch.distill)
        _, feat_s = student(batch.strong)
        loss = weighted_ce(logits, r)
        if h["weight"] != 0:
            loss = loss + h["weight"] * self.contrastive_loss(feat_s, feat_t, r, batch.s, queue)
        value = self.step(self.optimizer, loss)
        self.pair.momentum_update(float(h["momentum"]))
        return {"loss": value}

    @classmethod
    def stacked_step(cls, models: list[DIRK]) -> StackedDIRK:
        return StackedDIRK(models)

    def contrastive_loss(self, feat_s: torch.Tensor, feat_t: torch.Tensor, r: torch.Tensor, s: torch.Tensor,
                         queue: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """InfoNCE before ``prot_start``; afterwards the distribution-weighted contrastive loss.

        feat_s, feat_t (B, d) student and teacher features; r (B, q) rectified distributions; s (B, q);
        queue (features (K, d), labels (K,), dists (K, q), candidates (K, q)) as before this step's push.
        """
        h, size = self.hparams, len(s)
        queue_features, queue_labels, queue_dists, queue_candidates = queue
        temperature = float(h["feat_temperature"])
        if self.curr_iter < h["prot_start"]:
            return infonce_loss(feat_s, feat_t, queue_features, temperature)
        pseudo = r.argmax(1)
        labels = torch.cat([pseudo, pseudo, queue_labels])
        candidates = torch.cat([s, s, queue_candidates.to(s.dtype)])
        positives = ((s @ candidates.T) != 0) & (labels[:size, None] == labels[None, :])
        weights = distribution_weights(torch.cat([r, r, queue_dists.to(r.dtype)]), positives, size,
                                       float(h["dist_temperature"]))
        return supcon_loss(torch.cat([feat_s, feat_t, queue_features]), weights, size,
                           temperature=temperature, base_temperature=TEMPERATURE)


class StackedDIRK(StackedStep):
    """G DIRK runs' steps as one (``plench.protocol.train_runs_batched``): the students and the teachers are stacked
    (``plench.stacked.StackedNetwork``), so each of the step's four forwards (teacher on weak and distill, student on
    distill and strong, in ``DIRK.train_step``'s order) and the backward run once for every member, the Adam update
    is batched (``StackedAdam``) and the teachers' EMA is one update per tensor with each member's momentum. Each
    member's queue, rectified distributions, contrastive loss and schedule (``prot_start``) stay its own, computed by
    its own ``DIRK``. Members share ``feat_dim`` and the batch size (``DIRK.stack_hparams``). Why: a DIRK step on a
    CIFAR ResNet is four small forwards, bound by their operators' dispatch on a GPU."""

    def __init__(self, models: list[DIRK]):
        self.student = StackedNetwork([m.pair.query for m in models])
        super().__init__(models, self.student, [m.optimizer for m in models])
        self.teacher = StackedNetwork([m.pair.key for m in models])
        self.momentum, self.rest = momentum_tensors([m.hparams["momentum"] for m in models],
                                                    self.student.params[0].device)

    def __call__(self, batches: list[Batch]) -> list[float]:
        models = self.models
        weak, strong, distill = (torch.stack([getattr(b, view) for b in batches]) for view in
                                 ("weak", "strong", "distill"))
        device = weak.device
        with models[0].autocast(device.type):
            with torch.no_grad():
                _, feat_t = self.teacher.forward(weak)
                teacher_logits = self.teacher.forward(distill)[0]
                r = [rectified_distribution(F.softmax(teacher_logits[g].float(), 1), b.s)
                     for g, b in enumerate(batches)]
            queues = []
            for g, (m, b) in enumerate(zip(models, batches)):
                queues.append(m.queue.distill_snapshot())
                m.queue.push_distill(feat_t[g], r[g], b.s)
            logits, _ = self.student.forward(distill)
            _, feat_s = self.student.forward(strong)
            losses = []
            for g, (m, b) in enumerate(zip(models, batches)):
                loss = weighted_ce(logits[g], r[g])
                if m.hparams["weight"] != 0:
                    loss = loss + m.hparams["weight"] * m.contrastive_loss(feat_s[g], feat_t[g], r[g], b.s, queues[g])
                losses.append(loss.float())
            total = torch.stack(losses)
        with full_precision(device.type):  # as Algorithm.step: gradients and Adam in float32
            # allow_unused: with weight 0 everywhere no loss reaches the projection heads, which Adam then skips
            self.adam.step(torch.autograd.grad(total.sum(), self.student.params, allow_unused=True))
        ema_(self.teacher, self.student, self.momentum, self.rest)
        return total.detach().tolist()


# -- VALEN ------------------------------------------------------------------------------------------------------
def knn_indices(features: torch.Tensor, k: int, block: int = 1024) -> torch.Tensor:
    """(n, k) long: each row's k nearest other rows of features (n, m) by Euclidean distance, nearest first.

    Exact squared distances in float64, ``block`` rows at a time (memory O(block x n)); ties go to the lower
    index, as the code's repeated ``argmin``.
    """
    n = len(features)
    if n <= k:
        raise ConfigError(f"VALEN's kNN graph needs more training rows than knn={k}, got {n}; lower knn")
    f = features.double()
    sq = (f * f).sum(1)
    out = torch.empty(n, k, dtype=torch.long, device=features.device)
    for start in range(0, n, block):
        rows = torch.arange(start, min(start + block, n), device=features.device)
        dist = (sq[rows, None] - 2 * f[rows] @ f.T + sq[None, :]).clamp_min(0)
        dist[torch.arange(len(rows), device=features.device), rows] = float("inf")
        out[rows] = torch.sort(dist, dim=1, stable=True).indices[:, :k]
    return out


def knn_adjacency(neighbours: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """The (rows, cols) block of ``D^-1 (A + I)`` for the kNN graph ``neighbours`` (n, k): (len(rows), len(cols)).

    A_ij = 1 when j is among i's k neighbours; every row of A + I has k + 1 ones, so D^-1 is ``1 / (k + 1)``.
    """
    linked = (neighbours[rows][:, :, None] == cols[None, None, :]).any(1) | (rows[:, None] == cols[None, :])
    return linked.float() / (neighbours.shape[1] + 1)


def dirichlet_kl(alpha: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
    """``mean_B KL(Dir(alpha) || Dir(prior))`` for concentrations alpha (B, q) and prior (1, q)."""
    a0 = alpha.sum(1)
    kl = (torch.lgamma(a0) - torch.lgamma(alpha).sum(1) - torch.lgamma(prior.sum(1)) + torch.lgamma(prior).sum(1)
          + ((alpha - prior) * (torch.digamma(alpha) - torch.digamma(a0)[:, None])).sum(1))
    return kl.mean()


def valen_partial_loss(logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(-sum(target log(p + eps)) / B, normalise(1[target > 0] (p + eps)))`` with p = softmax(logits) (B, q),
    in float32 (the second is the stored target o)."""
    p = F.softmax(logits.float(), 1)
    loss = -(target * torch.log(p + VALEN_EPS)).sum() / len(logits)
    return loss, renormalise_within(p.detach() + VALEN_EPS, (target > 0).to(p.dtype))


class BernoulliDecoder(nn.Module):
    """VALEN's decoder ``Linear(q, m) -> ReLU -> Linear(m, m)``, Xavier-normal weights, biases 0.01: (B, q) -> (B, m)"""

    def __init__(self, n_in: int, n_hidden: int, n_out: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_out))
        for layer in (self.net[0], self.net[2]):
            nn.init.xavier_normal_(layer.weight)
            nn.init.constant_(layer.bias, 0.01)

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        return self.net(d)


@register
class VALEN(Algorithm):
    """VALEN (Xu et al., 2021): PRODEN warm-up, a kNN graph of its features, then variational label enhancement.

    Phases (``phase(t)``): warm-up (CE against o, SGD with momentum 0.9); feature collection (penultimate
    features of the visited rows, no training); the graph (kNN with k = ``knn``, the encoder set to the
    network, d <- o); variational, with Adam over the network, the decoder (and the encoder, compat=False):
    ``L = L_recx + L_recy + L_recA + L_alpha + L_d + L_o`` (the code's weights alpha = beta = gamma = theta = 1)
    where, with ``d ~ Dir(normalise(softmax(enc(x)) 1[o > 0]) + 0.01)`` reparameterised,
    ``L_recx = 0.01 MSE(dec(d), x)``, ``L_recy = 0.01 BCE-with-logits(d, s)``,
    ``L_recA = MSE(softmax(sigmoid(d d^T)), adj[B, B])``, ``L_alpha = KL(Dir(hardtanh(exp(enc(x)/4), 0.01, 30))
    || Dir(1))``, ``L_d = CE(o; enc(x))``, ``L_o = CE(d_array; net(x))``; then
    ``d_array <- normalise(d 1[o > 0])`` and ``o <- normalise(1[d_array > 0] (p_net + eps))`` from the pre-step
    outputs. Predicts with the network.
    """

    name, display, group = "VALEN", "VALEN", "holistic PLL"
    required_hparams: ClassVar[tuple[str, ...]] = ("warm_up", "knn")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _require(self, self.required_hparams)
        self.encoder = copy.deepcopy(self.network)
        n_features = math.prod(self.input_shape)
        self.decoder = BernoulliDecoder(self.num_classes, n_features, n_features)
        self.register_buffer("o_array", self.uniform_confidence())
        self.register_buffer("d_array", torch.zeros_like(self.o_array))
        self.register_buffer("features", torch.zeros(self.num_train, self.featurizer.n_outputs))
        self.register_buffer("neighbours", torch.zeros(self.num_train, int(self.hparams["knn"]), dtype=torch.long))
        self.warm_up = int(self.hparams["warm_up"])
        self.collect_end = self.warm_up + self.num_train / self.hparams["batch_size"] + 1
        self.graph_step = math.ceil(self.collect_end)
        self.warmup_optimizer = torch.optim.SGD(self.network.parameters(), lr=self.hparams["lr"],
                                                weight_decay=self.hparams["weight_decay"], momentum=0.9)
        trained = [self.network, self.decoder] + ([] if self.compat else [self.encoder])
        if self.compat:
            self.encoder.requires_grad_(False)
        self.optimizer = self.make_optimizer([p for module in trained for p in module.parameters()])

    def phase(self, t: int) -> str:
        """The phase of iteration t: "warm-up", "collect", "graph" or "variational"."""
        if t < self.warm_up:
            return "warm-up"
        if t < self.collect_end:
            return "collect"
        return "graph" if t == self.graph_step else "variational"

    def train_step(self, batch: Batch) -> dict[str, float]:
        phase = self.phase(self.curr_iter)
        if phase == "warm-up":
            loss, self.o_array[batch.idx] = valen_partial_loss(self.network(batch.weak), self.o_array[batch.idx])
            return {"loss": self.step(self.warmup_optimizer, loss)}
        if phase == "collect":
            with torch.no_grad():
                self.features[batch.idx] = self.featurizer(batch.weak).to(self.features.dtype)
            return {"loss": 0.0}
        if phase == "graph":
            self.build_graph()
            return {"loss": 0.0}
        return self.variational_step(batch)

    @torch.no_grad()
    def build_graph(self) -> None:
        self.neighbours.copy_(knn_indices(self.features, int(self.hparams["knn"])))
        self.encoder.load_state_dict(self.network.state_dict())
        self.d_array.copy_(self.o_array)

    def variational_step(self, batch: Batch) -> dict[str, float]:
        x, s, idx = batch.weak, batch.s, batch.idx
        o, d_target = self.o_array[idx], self.d_array[idx]
        logits, enc_logits = self.network(x).float(), self.encoder(x).float()
        support = (o > 0).to(logits.dtype)
        concentration = F.softmax(enc_logits, 1) * support
        concentration = concentration / concentration.detach().sum(1, keepdim=True) + VALEN_DIRICHLET_FLOOR
        loss_d, new_d = valen_partial_loss(enc_logits, o)
        alpha = F.hardtanh(torch.exp(enc_logits / 4), VALEN_DIRICHLET_FLOOR, 30)
        loss_alpha = dirichlet_kl(alpha, torch.ones(1, self.num_classes, device=x.device))
        d = torch.distributions.Dirichlet(concentration).rsample()
        loss_recx = VALEN_RECONSTRUCTION_WEIGHT * F.mse_loss(self.decoder(d).view(x.shape), x)
        loss_recy = VALEN_RECONSTRUCTION_WEIGHT * F.binary_cross_entropy_with_logits(d, s)
        adjacency = knn_adjacency(self.neighbours, idx, idx)
        with full_precision(d.device.type):
            loss_reca = F.mse_loss(F.softmax(torch.sigmoid(d @ d.T), 1), adjacency)
        loss_o, new_o = valen_partial_loss(logits, d_target)
        loss = loss_recx + loss_recy + loss_reca + loss_alpha + loss_d + loss_o
        value = self.step(self.optimizer, loss)
        with torch.no_grad():
            self.d_array[idx] = renormalise_within(d.detach(), (new_d > 0).to(d.dtype)).to(self.d_array.dtype)
            self.o_array[idx] = new_o.to(self.o_array.dtype)
        return {"loss": value}


# -- FREDIS -----------------------------------------------------------------------------------------------------
def lowered_delta(delta: float, dec: float, candidate_gaps: torch.Tensor, needed: int) -> float:
    """FREDIS's ``while #(gap > delta) < needed: delta -= dec`` over the candidate entries' gaps (m,).

    The float sequence ``delta - dec - dec - ...`` is accumulated exactly as the loop does (``np.cumsum`` adds
    sequentially). Where fewer than ``needed`` candidates exist, the code's loop never ends; this one stops at
    the first delta below every gap.
    """
    gaps = candidate_gaps.double()
    if int((gaps > delta).sum()) >= needed or len(gaps) == 0:
        return delta
    if dec <= 0:
        raise ConfigError(f"FREDIS needs dec > 0 to lower its disambiguation threshold, got {dec}")
    ordered = torch.sort(gaps, descending=True).values
    target = float(ordered[min(needed, len(ordered)) - 1])  # count(gap > d) >= needed  <=>  d < target
    current = delta
    while True:
        steps = int(min(max((current - target) / dec, 0.0) + 2, 1e7))
        sequence = np.cumsum(np.concatenate([[current], np.full(steps, -dec)]))[1:]
        below = np.flatnonzero(sequence < target)
        if len(below):
            return float(sequence[below[0]])
        current = float(sequence[-1])


def _pick(mask: torch.Tensor, limit: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, cols) of ``limit`` entries of mask drawn uniformly without replacement."""
    rows, cols = torch.where(mask)
    chosen = torch.randperm(len(rows), device=mask.device)[:limit]
    return rows[chosen], cols[chosen]


def refine_candidates(candidates: torch.Tensor, posterior: torch.Tensor, *, theta: float, delta: float, dec: float,
                      change_size: int, times: int, keep_nonempty: bool) -> tuple[torch.Tensor, float]:
    """One FREDIS refinement of the candidate matrix (n, q) 0/1 from posteriors (n, q); returns (new, new delta).

    With ``gap = max_j posterior_j - posterior``: entries with gap < theta become candidates (a random
    ``change_size`` of them when more than ``change_size`` would change); delta is lowered by ``dec`` until at least
    ``added x times`` candidates have gap > delta (``added`` = change_size when capped); then entries with
    gap > delta stop being candidates (a random ``change_size x times`` of all such entries when more than that
    many candidates would change). ``keep_nonempty`` gives rows left empty their previous candidates back.
    """
    gap = posterior.max(1, keepdim=True).values - posterior
    refined = candidates.clone()
    add = gap < theta
    added = int((add & (candidates == 0)).sum())
    if added > change_size:
        refined[_pick(add, change_size)] = 1
        added = change_size
    else:
        refined[add] = 1
    delta = lowered_delta(delta, dec, gap[candidates == 1], added * times)
    remove = gap > delta
    if int((remove & (candidates == 1)).sum()) > change_size * times:
        refined[_pick(remove, change_size * times)] = 0
    else:
        refined[remove] = 0
    if keep_nonempty:
        empty = refined.sum(1) == 0
        refined[empty] = candidates[empty]
    return refined, delta


@register
class FREDIS(Algorithm):
    """FREDIS (Qiao et al., 2023b): ``lam KL(w || p) + alpha (-mean sum_{j notin S} log(1 - p_j))`` on the weak view.

    After each step ``w <- normalise(p * S)`` and ``posterior <- p`` for the batch rows (S: the original sets
    with compat, the refined ones otherwise). Every ``int(update_interval x n_train / batch_size)`` steps
    (``t = 0`` included) ``refine_candidates`` updates the refined matrix, ``w <- normalise(posterior * (S' +
    1e-12))`` for every row, and, while theta < 0.9 and delta > 0.1, fewer than ``change_size`` changed entries
    give ``theta += inc, delta -= dec``.
    """

    name, display, group = "FREDIS", "FREDIS", "noisy PLL"
    required_hparams: ClassVar[tuple[str, ...]] = (
        "theta", "delta", "inc", "dec", "change_size", "times", "update_interval", "lam", "alpha")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _require(self, self.required_hparams)
        self.interval = int(self.hparams["update_interval"] * self.num_train / self.hparams["batch_size"])
        if self.interval < 1:
            raise ConfigError(f"FREDIS: update_interval={self.hparams['update_interval']} epochs is less than one "
                              f"step at n_train={self.num_train}, batch_size={self.hparams['batch_size']}; raise it")
        self.register_buffer("confidence", self.uniform_confidence().double())
        self.register_buffer("posterior", torch.full_like(self.confidence, 1.0 / self.num_classes))
        self.register_buffer("candidates", self.train_S.clone())
        self.theta, self.delta = float(self.hparams["theta"]), float(self.hparams["delta"])
        self.optimizer = self.make_optimizer()

    def train_step(self, batch: Batch) -> dict[str, float]:
        h = self.hparams
        s = batch.s if self.compat else self.candidates[batch.idx]
        logits = self.network(batch.weak)
        loss = (float(h["lam"]) * kl_to_targets(logits, self.confidence[batch.idx].float())
                + float(h["alpha"]) * non_candidate_loss(logits, s))
        value = self.step(self.optimizer, loss)
        with torch.no_grad():
            p = F.softmax(self.network(batch.weak).float(), 1)
            self.confidence[batch.idx] = renormalise_within(p, s).double()
            self.posterior[batch.idx] = p.double()
        if self.curr_iter % self.interval == 0:
            self.refine()
        return {"loss": value}

    @torch.no_grad()
    def refine(self) -> None:
        h = self.hparams
        change_size = int(h["change_size"])
        previous = self.candidates.clone()
        refined, self.delta = refine_candidates(previous, self.posterior, theta=self.theta, delta=self.delta,
                                                dec=float(h["dec"]), change_size=change_size, times=int(h["times"]),
                                                keep_nonempty=not self.compat)
        self.candidates.copy_(refined)
        target = self.posterior * (refined.double() + FREDIS_EPS)
        self.confidence.copy_(target / target.sum(1, keepdim=True))
        if self.theta < 0.9 and self.delta > 0.1 and int((previous != refined).sum()) < change_size:
            self.theta += float(h["inc"])
            self.delta -= float(h["dec"])
