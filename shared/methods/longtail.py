"""Long-tailed learning methods of the NoisywikiHow comparison (Wu et al., Findings of ACL 2023, Appendix B.2):
LDAM (optionally with DRW) and BBN. Decoupling (NCM, cRT, LWS) is in ``shared.methods.decoupling``.

Both re-balance by the class counts of the *observed* (noisy) training labels, the only ones a user sees.

- **LDAM** (Cao et al., NeurIPS 2019; github.com/kaidic/LDAM-DRW, ``losses.py``): the label-distribution-aware
  margin loss CE(s * (z - Delta_y e_y), y) with Delta_j proportional to n_j^(-1/4), rescaled so that
  max_j Delta_j = ``max_margin`` (C). As in the official code (``use_norm`` for LDAM), ``normed=True`` makes the
  logits z cosines between the L2-normalised features and class weights (``CosineClassifier``), so that the
  margins and the scale s are on a fixed scale. *DRW* (deferred re-weighting) switches on, from the epoch
  ``drw_start * epochs`` on, the class weights (1 - beta) / (1 - beta^n_j) of Cui et al. (CVPR 2019), normalised
  to sum to K (``cifar_train.py``: beta = 0.9999 from epoch 160 of 200, i.e. ``drw_start=0.8``).
- **BBN** (Zhou et al., CVPR 2020; github.com/Megvii-Nanjing/BBN): a conventional branch fed by the uniform
  sampler and a re-balancing branch fed by the reversed sampler (a class with probability proportional to
  1/N_c, then one of its rows uniformly), with a shared trunk. Cumulative learning mixes the branches with
  alpha = 1 - (T / T_max)^2 (T = 0-based epoch, the official ``(epoch - 1) / div_epoch``):
  z = 2 (alpha W_c f_c + (1 - alpha) W_r f_r), loss alpha CE(z, y_c) + (1 - alpha) CE(z, y_r). The factor 2 is
  the official combiner's; inference uses alpha = 1/2, i.e. z = W_c f + W_r f on the same input.
  BBN duplicates the last residual block of a ResNet; on an MLP (``shared.models.MLP``, the head over frozen
  sentence features here) the trunk is every hidden layer but the last, and each branch has its own copy of
  the last hidden block and of the classifier (the re-balancing copies freshly initialised).
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from shared.errors import ConfigError
from shared.methods.base import Method
from shared.models import MLP


# -- shared helpers ----------------------------------------------------------------------------------------
def class_counts(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Rows per class (K,) of the labels (n,)."""
    return torch.bincount(labels, minlength=num_classes)[:num_classes]


def require_features(net: nn.Module, method: str, classifier: bool = True) -> None:
    """A ConfigError unless ``net`` has ``features(x)`` (penultimate activations) and, if asked, a Linear
    ``classifier`` with ``classifier(features(x)) == net(x)`` (as ``shared.models.MLP`` has)."""
    ok = callable(getattr(net, "features", None)) and (not classifier or isinstance(getattr(net, "classifier", None),
                                                                                      nn.Linear))
    if not ok:
        wanted = "features(x) and a Linear `classifier`" if classifier else "features(x)"
        raise ConfigError(f"{method} needs a network with {wanted} (e.g. shared.models.MLP, model 'mlp'); "
                          f"{type(net).__name__} has not")


# -- LDAM --------------------------------------------------------------------------------------------------
def ldam_margins(counts: torch.Tensor, max_margin: float) -> torch.Tensor:
    """Delta_j = n_j^(-1/4) rescaled so that the largest is ``max_margin`` (K,); 0 for classes without rows."""
    present = counts > 0
    margins = torch.zeros(len(counts), dtype=torch.float64)
    margins[present] = counts[present].double() ** -0.25
    return (margins * (max_margin / margins.max())).float()


def drw_weights(counts: torch.Tensor, beta: float) -> torch.Tensor:
    """Class-balanced weights (1 - beta) / (1 - beta^n_j), normalised to sum to K (K,); 0 for empty classes."""
    present = counts > 0
    weights = torch.zeros(len(counts), dtype=torch.float64)
    weights[present] = (1.0 - beta) / (1.0 - beta ** counts[present].double())
    return (weights / weights.sum() * len(counts)).float()


def ldam_loss(logits: torch.Tensor, target: torch.Tensor, margins: torch.Tensor, scale: float,
              weight: torch.Tensor | None = None) -> torch.Tensor:
    """CE(s * (z - Delta_y e_y), y): logits (n, K), target (n,), margins (K,), optional class weights (K,)."""
    shifted = logits - F.one_hot(target, logits.shape[1]) * margins[target].unsqueeze(1)
    return F.cross_entropy(scale * shifted, target, weight=weight)


class CosineClassifier(nn.Module):
    """z = cos(features(x), w_c) (n, K): the official ``NormedLinear`` over the wrapped network's class weights
    (``net.classifier.weight``; its bias is unused)."""

    def __init__(self, net: nn.Module):
        super().__init__()
        require_features(net, "LDAM with normed=True")
        self.net = net

    def forward(self, x):
        return F.normalize(self.net.features(x), dim=1) @ F.normalize(self.net.classifier.weight, dim=1).T


class LDAM(Method):
    """LDAM loss, optionally with deferred re-weighting (DRW); see the module docstring.

    History columns: ``train_loss``, ``drw`` (whether the DRW weights were on). ``logits`` are s * z.
    """

    name = "ldam"

    def __init__(self, make_model, num_classes, setup, *, max_margin: float = 0.5, scale: float = 30.0,
                 drw: bool = False, drw_start: float = 0.8, beta: float = 0.9999, normed: bool = True):
        if max_margin <= 0 or scale <= 0:
            raise ConfigError(f"LDAM needs max_margin > 0 and scale > 0, got {max_margin} and {scale}")
        if not 0.0 <= beta < 1.0 or not 0.0 <= drw_start <= 1.0:
            raise ConfigError(f"DRW needs 0 <= beta < 1 and 0 <= drw_start <= 1 (a fraction of the epochs), "
                              f"got beta={beta}, drw_start={drw_start}")
        super().__init__((lambda: CosineClassifier(make_model())) if normed else make_model, num_classes, setup)
        self.max_margin, self.scale, self.drw, self.drw_start, self.beta = max_margin, scale, drw, drw_start, beta

    def _prepare(self, X, y) -> None:
        super()._prepare(X, y)
        counts = class_counts(self.y, self.num_classes)
        self.margins = ldam_margins(counts, self.max_margin).to(self.device)
        self.drw_class_weights = drw_weights(counts, self.beta).to(self.device)

    @property
    def drw_epoch(self) -> int:
        """The first (0-based) epoch with DRW weights."""
        return int(self.drw_start * self.setup.epochs)

    def class_weights(self, epoch: int) -> torch.Tensor | None:
        return self.drw_class_weights if self.drw and epoch >= self.drw_epoch else None

    def train_epoch(self, epoch: int) -> dict:
        net, weight = self.nets[0], self.class_weights(epoch)
        loss = self.run_batches(lambda idx, x, y: ldam_loss(net(x), y, self.margins, self.scale, weight))
        return {"train_loss": loss, "drw": weight is not None}

    def logits(self, X: torch.Tensor, net: int | None = None) -> torch.Tensor:
        return self.scale * super().logits(X, net)


# -- BBN ---------------------------------------------------------------------------------------------------
def _fresh_copy(module: nn.Module) -> nn.Module:
    """A deep copy with every layer re-initialised."""
    clone = copy.deepcopy(module)
    for layer in clone.modules():
        if hasattr(layer, "reset_parameters"):
            layer.reset_parameters()
    return clone


class BBNNet(nn.Module):
    """Bilateral-branch network: a shared trunk and, per branch, a last block and a classifier.

    From an MLP with a hidden layer, each branch gets its own last hidden block (BBN duplicates the backbone's last
    residual block); from any other network with ``features(x)`` and ``classifier`` (a language model,
    ``noisywikihow.plm.TextClassifier``) the branches share the whole representation and differ in their
    classifier (two classification heads). ``forward(x)`` (n, K) is the inference output W_c f_c(x) + W_r f_r(x)
    (alpha = 1/2).
    """

    def __init__(self, net: nn.Module):
        super().__init__()
        if isinstance(net, MLP) and len(net.net) >= 5:
            layers = net.net  # Flatten, (Linear, ReLU, Dropout) per hidden layer, Linear
            self.trunk, self.block_c, self.head_c = layers[:-4], layers[-4:-1], layers[-1]
            self.block_r = _fresh_copy(self.block_c)
        elif not isinstance(net, MLP) and hasattr(net, "features") and hasattr(net, "classifier"):
            self.backbone = net
            self.trunk, self.head_c = net.features, net.classifier
            self.block_c = self.block_r = nn.Identity()
        else:
            raise ConfigError("BBN needs a shared.models.MLP with at least one hidden layer (model 'mlp') or a network "
                              f"with features(x) and classifier; got {type(net).__name__}")
        self.head_r = _fresh_copy(self.head_c)

    def branches(self, x_c: torch.Tensor, x_r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits of the conventional branch on x_c and of the re-balancing branch on x_r, each (n, K)."""
        return self.head_c(self.block_c(self.trunk(x_c))), self.head_r(self.block_r(self.trunk(x_r)))

    def mix(self, x_c: torch.Tensor, x_r: torch.Tensor, alpha: float) -> torch.Tensor:
        """Cumulative-learning logits 2 (alpha z_c + (1 - alpha) z_r) (n, K)."""
        z_c, z_r = self.branches(x_c, x_r)
        return 2 * (alpha * z_c + (1 - alpha) * z_r)

    def forward(self, x):
        return self.mix(x, x, 0.5)


class ReversedSampler:
    """BBN's reversed sampler: a class c with probability (1/N_c) / sum_j (1/N_j), then one of its rows uniformly
    (with replacement; classes without rows are never drawn)."""

    def __init__(self, labels: torch.Tensor, num_classes: int, generator: torch.Generator):
        counts = class_counts(labels, num_classes)
        inverse = torch.where(counts > 0, 1.0 / counts.clamp(min=1).double(), torch.zeros((), dtype=torch.float64))
        self.probabilities = inverse / inverse.sum()  # (K,)
        self.counts, self.generator = counts, generator
        self.order = torch.argsort(labels, stable=True)  # rows grouped by class
        self.start = torch.cumsum(counts, 0) - counts

    def sample(self, m: int) -> torch.Tensor:
        """Row indices (m,)."""
        classes = torch.multinomial(self.probabilities, m, replacement=True, generator=self.generator)
        offset = (torch.rand(m, generator=self.generator, dtype=torch.float64) * self.counts[classes]).long()
        return self.order[self.start[classes] + offset]


class BBN(Method):
    """BBN with cumulative learning; see the module docstring. History columns: ``train_loss``, ``alpha``."""

    name = "bbn"

    def __init__(self, make_model, num_classes, setup):
        super().__init__(lambda: BBNNet(make_model()), num_classes, setup)

    def _prepare(self, X, y) -> None:
        super()._prepare(X, y)
        self.reversed_sampler = ReversedSampler(self.y, self.num_classes, self.generator)

    def alpha_at(self, epoch: int) -> float:
        return 1.0 - (epoch / self.setup.epochs) ** 2

    def train_epoch(self, epoch: int) -> dict:
        net, alpha = self.nets[0], self.alpha_at(epoch)

        def batch_loss(idx, x, y):
            reversed_idx = self.reversed_sampler.sample(len(idx))
            logits = net.mix(x, self.inputs(reversed_idx), alpha)
            return alpha * F.cross_entropy(logits, y) + (1 - alpha) * F.cross_entropy(
                logits, self.y[reversed_idx].to(self.device))

        return {"train_loss": self.run_batches(batch_loss), "alpha": alpha}
