"""The 8 vanilla deep complementary-label-learning (CLL) algorithms, applied to PLL through complementary labels.

PC, Forward, NN, GA, SCL-EXP, SCL-NL, L-W and OP-W, as the official PLENCH code (``core/algorithms.py``) computes them.
Every non-candidate ``ȳ ∉ S_i`` of a batch row becomes one complementary-labelled pair ``(x_i, ȳ)``, as the
official ``torch.where(partial_y == 0)`` does: a row with ``|S_i| = k`` gives ``q - k`` pairs, a row with
``S_i = Y`` none. The network sees each row once (weak view) and the pairs index its logits, so every loss is a
function of the pairs' logits (P, q) and complementary labels (P,) and can be checked on hand-made values.

A batch without any pair (every row has ``S = Y``) is skipped: loss 0, no forward pass, no optimizer step. The
official code would average over zero pairs and step on NaN.

The official CLL code follows the published methods, so ``compat`` changes nothing here. One official crash is
avoided rather than reproduced: NN and GA's prior ``np.bincount`` has no ``minlength``, so it is shorter than q
(and the run fails) when the last class is never a complementary label.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from plench.algorithms import register
from plench.algorithms.base import Batch, LossAlgorithm, float32_math, full_precision
from shared.errors import ConfigError, DataFormatError


# -- complementary pairs ----------------------------------------------------------------------------------
def complementary_pairs(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The complementary pairs of candidate sets s (B, q): (rows, labels), two (P,) long tensors.

    ``P = sum_i (q - |S_i|)``; pairs come row by row, labels ascending within a row.
    """
    rows, labels = torch.nonzero(s == 0, as_tuple=True)
    return rows, labels


def complementary_prior(train_S: torch.Tensor) -> torch.Tensor:
    """Complementary class prior π̄ (q,): the frequency of each class among all complementary labels of train_S."""
    _, labels = complementary_pairs(train_S)
    if labels.numel() == 0:
        raise DataFormatError("every training candidate set is the whole label set, so there are no complementary "
                              "labels to estimate NN/GA's complementary prior from; use a PLL algorithm instead")
    counts = torch.bincount(labels, minlength=train_S.shape[1]).to(torch.float32)
    return counts / counts.sum()


# -- pair losses: logits (P, q) of the pairs, labels (P,) their complementary labels -> scalar ---------------
def pc_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """PC (Ishida et al., 2017): ``(K-1)/P · Σ_pairs Σ_k σ(z_ȳ - z_k) - K(K-1)/2 + (K-1)`` (k = ȳ included)."""
    K = logits.shape[1]
    z_bar = logits.gather(1, labels[:, None])
    return torch.sigmoid(z_bar - logits).sum() * (K - 1) / len(labels) - K * (K - 1) / 2 + (K - 1)


def uniform_transition(K: int, *, dtype=torch.float32, device=None) -> torch.Tensor:
    """Forward's transition matrix (K, K): ``Q[i, j] = p(ȳ = j | y = i) = 1/(K-1)`` off the diagonal, 0 on it."""
    return (1 - torch.eye(K, dtype=dtype, device=device)) / (K - 1)


@float32_math  # the product with Q in float32 under autocast (the log of a bf16-rounded sum otherwise)
def forward_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Forward (Yu et al., 2018) with the uniform Q: ``mean_pairs -log (p Q)_ȳ``; no epsilon, as in the code."""
    Q = uniform_transition(logits.shape[1], dtype=logits.dtype, device=logits.device)
    return F.nll_loss(torch.log(F.softmax(logits, 1) @ Q), labels)


def scl_exp_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """SCL-EXP (Chou et al., 2020): ``mean_pairs exp(p_ȳ)``."""
    return torch.exp(F.softmax(logits, 1).gather(1, labels[:, None])).mean()


def scl_nl_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """SCL-NL (Chou et al., 2020): ``mean_pairs -log(1 - p_ȳ + 1e-6)``."""
    return -torch.log(1 - F.softmax(logits, 1).gather(1, labels[:, None]) + 1e-6).mean()


def lw_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """L-W (Gao & Zhang, 2021): ``u = 1 - p``, ``Q = softmax(u)``, ``w = u/Σu``; ``mean_pairs -(1 + w_ȳ) log Q_ȳ``.

    w is not detached, as in the official code.
    """
    u = 1 - F.softmax(logits, 1)
    log_Q = F.log_softmax(u, 1)
    w = u / u.sum(1, keepdim=True)
    return -((1 + w) * log_Q).gather(1, labels[:, None]).mean()


def opw_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """OP-W (Liu et al., 2023): ``Q1 = p + 1e-18``, ``Q2 = softmax(-z) + 1e-18``, ``w = Q1 ⊙ softmax(1/Q2) + 1e-6``;
    ``mean_pairs -w_ȳ log Q2_ȳ``.

    The official code writes ``softmax(1/Q2 + 1)``; softmax is shift-invariant, so the ``+ 1`` is left out.
    w is not detached, as in the official code.
    """
    q1 = F.softmax(logits, 1) + 1e-18
    q2 = F.softmax(-logits, 1) + 1e-18
    w = q1 * F.softmax(1 / q2, 1) + 1e-6
    return -(w * torch.log(q2)).gather(1, labels[:, None]).mean()


def class_risks(logits: torch.Tensor, labels: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
    """NN/GA's per-class partial risks R (K,) (Ishida et al., 2019, as in their public code):

    ``R_k = π̄_k [Σ_{j present} mean_{ȳ=j}(-log p_k) - (K-1) · mean_{ȳ=k}(-log p_k)]``, where j runs over the
    complementary classes present among the pairs and the second term is 0 when k is absent.
    """
    K = logits.shape[1]
    neglog = -F.log_softmax(logits, 1)
    counts = torch.bincount(labels, minlength=K).to(neglog.dtype)
    class_means = neglog.new_zeros(K, K).index_add(0, labels, neglog) / counts.clamp_min(1)[:, None]  # row j: ȳ = j
    return prior.to(neglog.dtype) * (class_means.sum(0) - (K - 1) * class_means.diagonal())


# -- algorithms ---------------------------------------------------------------------------------------------
class ComplementaryLossAlgorithm(LossAlgorithm):
    """A CLL algorithm whose loss is ``pair_loss(logits[rows], labels)`` over the batch's complementary pairs."""

    group = "vanilla CLL"

    def pair_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Scalar loss of the pairs' logits (P, q) and complementary labels (P,)."""
        raise NotImplementedError

    def loss(self, logits: torch.Tensor, s: torch.Tensor, w: torch.Tensor | None) -> torch.Tensor:
        """The pair loss of the rows' logits (B, q) and candidate sets s (B, q); 0 when there is no pair."""
        rows, labels = complementary_pairs(s)
        if len(rows) == 0:
            return logits.new_zeros(())
        return self.pair_loss(logits[rows], labels)

    def skipped(self, s: torch.Tensor) -> torch.Tensor:
        return ~(s == 0).any()  # no complementary pair: skip the step


@register
class PC(ComplementaryLossAlgorithm):
    """PC (Ishida et al., 2017): pairwise-comparison sigmoid loss on the logits."""

    name, display = "PC", "PC"
    pair_loss = staticmethod(pc_loss)


@register
class Forward(ComplementaryLossAlgorithm):
    """Forward (Yu et al., 2018): forward correction with the uniform transition ``(1 - I)/(K-1)``."""

    name, display = "Forward", "Forward"
    pair_loss = staticmethod(forward_loss)


@register
class SCL_EXP(ComplementaryLossAlgorithm):
    """SCL-EXP (Chou et al., 2020): surrogate complementary loss ``exp(p_ȳ)``."""

    name, display = "SCL_EXP", "SCL-EXP"
    pair_loss = staticmethod(scl_exp_loss)


@register
class SCL_NL(ComplementaryLossAlgorithm):
    """SCL-NL (Chou et al., 2020): surrogate complementary loss ``-log(1 - p_ȳ)``."""

    name, display = "SCL_NL", "SCL-NL"
    pair_loss = staticmethod(scl_nl_loss)


@register
class L_W(ComplementaryLossAlgorithm):
    """L-W (Gao & Zhang, 2021): weighted loss on ``softmax(1 - p)``."""

    name, display = "L_W", "L-W"
    pair_loss = staticmethod(lw_loss)


@register
class OP_W(ComplementaryLossAlgorithm):
    """OP-W (Liu et al., 2023): weighted order-preserving loss on ``softmax(-z)``."""

    name, display = "OP_W", "OP-W"
    pair_loss = staticmethod(opw_loss)


class UnbiasedRiskAlgorithm(ComplementaryLossAlgorithm):
    """NN and GA: the unbiased estimator's per-class risks R_k, with the training split's prior π̄ (``prior``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register_buffer("prior", complementary_prior(self.train_S))

    def risks(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return class_risks(logits, labels, self.prior)


@register
class NN(UnbiasedRiskAlgorithm):
    """NN (Ishida et al., 2019): non-negative correction ``Σ_k max(R_k, -β)``, β = ``hparams['beta']`` (0)."""

    name, display = "NN", "NN"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "beta" not in self.hparams:
            raise ConfigError("NN needs hparams['beta'] (the non-negative correction threshold); "
                              "build its hparams with plench.hparams.hparams_for('NN', arch)")
        self.beta = float(self.hparams["beta"])

    def pair_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.risks(logits, labels).clamp(min=-self.beta).sum()


@register
class GA(UnbiasedRiskAlgorithm):
    """GA (Ishida et al., 2019): gradient ascent on the negative class risks.

    With ``c_k`` the number of pairs with ȳ = k: if ``min_k c_k R_k < 0`` the step back-propagates
    ``Σ_k min(c_k R_k, 0)`` and negates every gradient before Adam's step (ascent: the negative risks are pushed
    back towards 0); otherwise it minimises ``Σ_k R_k`` (``pair_loss``). The reported loss is the one back-propagated.
    """

    name, display = "GA", "GA"

    def pair_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.risks(logits, labels).sum()

    def train_step(self, batch: Batch) -> dict[str, float]:
        rows, labels = complementary_pairs(batch.s)
        if len(rows) == 0:  # no complementary pair: skip the step
            return {"loss": 0.0}
        risks = self.risks(self.network(batch.weak).float()[rows], labels)
        weighted = torch.bincount(labels, minlength=self.num_classes).to(risks.dtype) * risks
        ascend = bool(weighted.min() < 0)
        loss = weighted.clamp(max=0).sum() if ascend else risks.sum()
        self.optimizer.zero_grad(set_to_none=True)
        with full_precision(loss.device.type):  # as Algorithm.step: backward and update outside autocast
            loss.backward()
            if ascend:
                for group in self.optimizer.param_groups:
                    for param in group["params"]:
                        if param.grad is not None:
                            param.grad.neg_()
            self.optimizer.step()
        return {"loss": float(loss.detach())}
