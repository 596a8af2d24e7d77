"""DivideMix (Li, Socher and Hoi, 2020): divide the data with a loss mixture model, then semi-supervised MixMatch.

After ``warmup`` epochs of cross-entropy, each epoch does, for each network A with its peer B:

1. *Divide*: B's per-sample cross-entropy (eval mode, no augmentation), min-max normalised, is fitted with a
   two-component Gaussian mixture; w = posterior of the low-loss component. Rows with w > p_threshold form
   A's labelled set, the rest its unlabelled set (each network is trained on its peer's division).
2. *Co-refine* the labels: t_x = sharpen(w y + (1 - w) p_A(x)); *co-guess* the unlabelled targets:
   t_u = sharpen(mean of A's and B's predictions); temperature T.
3. *MixMatch*: mix inputs and targets with lambda ~ Beta(alpha, alpha), lambda = max(lambda, 1 - lambda);
   loss = soft cross-entropy on the labelled half + lambda_u * mean squared error on the unlabelled half
   (+ a uniform-prior penalty).

``variant="official"`` follows the authors' code: two augmentations per image (K = 2) for co-refinement and
co-guessing, lambda_u ramped linearly over 16 epochs after warm-up, the prior penalty, GMM max_iter 10.
``variant="ciln_compact"`` is the re-implementation the CILN paper ran: one augmentation, the refined target
uses A's own prediction, no ramp-up and no penalty, lambda_u on the *sum* over classes of the squared error,
GMM max_iter 50, and a plain cross-entropy epoch when a set has fewer rows than a batch.

On CUDA with ``TrainSetup.amp`` every forward pass runs under fp16 autocast (``Method.forward_logits``, and
``predict_logits`` for the division's per-sample losses) and the steps through the GradScaler; the logits are cast
to float32, so the losses the GMM divides, the co-guessed and co-refined targets and the MixMatch losses are float32.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.mixture import GaussianMixture

from shared.errors import unknown_choice
from shared.methods.base import Method

VARIANTS = ("official", "ciln_compact")


def sharpen(p: torch.Tensor, temperature: float) -> torch.Tensor:
    p = p ** (1.0 / temperature)
    return p / p.sum(dim=1, keepdim=True)


def clean_probability(losses: np.ndarray, *, max_iter: int, seed: int) -> np.ndarray:
    """Posterior of the low-mean component of a 2-GMM fitted to min-max normalised losses (n,)."""
    span = losses.max() - losses.min()
    x = ((losses - losses.min()) / (span if span > 0 else 1.0)).reshape(-1, 1)
    gmm = GaussianMixture(2, max_iter=max_iter, tol=1e-2, reg_covar=5e-4, random_state=seed).fit(x)
    return gmm.predict_proba(x)[:, int(np.argmin(gmm.means_.ravel()))]


class DivideMix(Method):
    name = "dividemix"
    n_networks = 2
    mixed_precision = True

    def __init__(self, make_model, num_classes, setup, *, warmup: int = 10, p_threshold: float = 0.5,
                 temperature: float = 0.5, alpha: float = 4.0, lambda_u: float = 25.0, rampup_epochs: int = 16,
                 variant: str = "official", warmup_penalty: bool = False, clean_labels=None):
        super().__init__(make_model, num_classes, setup)
        if variant not in VARIANTS:
            raise unknown_choice("DivideMix variant", variant, VARIANTS)
        self.warmup, self.p_threshold, self.temperature, self.alpha = warmup, p_threshold, temperature, alpha
        self.lambda_u, self.rampup_epochs, self.variant = lambda_u, rampup_epochs, variant
        self.warmup_penalty = warmup_penalty
        self.clean_labels = None if clean_labels is None else np.asarray(clean_labels)
        self.extras: dict = {}

    # -- pieces --------------------------------------------------------------------------------------------
    def _ce_epoch(self, net: int) -> float:
        model, optimizer = self.nets[net], self.optimizers[net]
        model.train()
        total, count = 0.0, 0
        for idx in self.batches():
            logits = self.forward_logits(model, self.inputs(idx))
            loss = F.cross_entropy(logits, self.y[idx].to(self.device))
            if self.warmup_penalty:  # confidence penalty the authors use for asymmetric noise
                probs = torch.softmax(logits, dim=1)
                loss = loss + torch.mean(torch.sum(probs * torch.log(probs + 1e-12), dim=1))
            self.step(optimizer, loss)
            total, count = total + float(loss.detach()) * len(idx), count + len(idx)
        return total / count

    def _divide(self) -> np.ndarray:
        """Clean probability of every row under each network (2, n)."""
        max_iter = 10 if self.variant == "official" else 50
        return np.stack([clean_probability(self.per_sample_loss(k), max_iter=max_iter, seed=self.setup.seed)
                         for k in range(2)])

    def _lambda_u(self, progress_epochs: float) -> float:
        if self.variant == "ciln_compact":
            return self.lambda_u
        return self.lambda_u * float(np.clip((progress_epochs - self.warmup) / self.rampup_epochs, 0.0, 1.0))

    def _mixmatch_epoch(self, a: int, w: np.ndarray, epoch: int) -> float:
        """Train network ``a`` on its peer's division ``w`` (n,) for one pass over the labelled set."""
        b = 1 - a
        net, peer, optimizer = self.nets[a], self.nets[b], self.optimizers[a]
        labelled = torch.as_tensor(np.flatnonzero(w > self.p_threshold))
        unlabelled = torch.as_tensor(np.flatnonzero(w <= self.p_threshold))
        bs = self.setup.batch_size
        if len(labelled) < bs or len(unlabelled) < bs:
            return self._ce_epoch(a)  # one side is too small for MixMatch: a plain epoch (both variants)
        weights = torch.as_tensor(w, dtype=torch.float32)
        net.train()
        peer.eval()
        u_pool = iter(())
        total, steps = 0.0, len(labelled) // bs
        # two augmented views per image (official); without augmentation the views would be identical
        k_views = 2 if self.variant == "official" and self.setup.augment is not None else 1
        for step, lab in enumerate(self.batches(labelled, drop_last=True)):
            u_idx = next(u_pool, None)
            if u_idx is None or len(u_idx) < bs:
                u_pool = self.batches(unlabelled, drop_last=True)
                u_idx = next(u_pool)
            y_onehot = F.one_hot(self.y[lab], self.num_classes).float().to(self.device)
            wx = weights[lab].to(self.device)[:, None]
            xs = [self.inputs(lab) for _ in range(k_views)]
            us = [self.inputs(u_idx) for _ in range(k_views)]
            with torch.no_grad():
                guesses = [torch.softmax(self.forward_logits(m, u), 1) for u in us for m in (net, peer)]
                targets_u = sharpen(torch.stack(guesses).mean(0), self.temperature)
                px = torch.stack([torch.softmax(self.forward_logits(net, x), 1) for x in xs]).mean(0)
                targets_x = sharpen(wx * y_onehot + (1 - wx) * px, self.temperature)
            inputs = torch.cat(xs + us)
            targets = torch.cat([targets_x] * k_views + [targets_u] * k_views)
            lam = np.random.default_rng(self.setup.seed * 100003 + epoch * 1009 + step).beta(self.alpha, self.alpha)
            lam = max(lam, 1 - lam)
            perm = torch.randperm(len(inputs), generator=self.generator).to(self.device)
            mixed_inputs = lam * inputs + (1 - lam) * inputs[perm]
            mixed_targets = lam * targets + (1 - lam) * targets[perm]
            logits = self.forward_logits(net, mixed_inputs)
            n_x = bs * k_views
            loss_x = -torch.mean(torch.sum(F.log_softmax(logits[:n_x], 1) * mixed_targets[:n_x], 1))
            squared = (torch.softmax(logits[n_x:], 1) - mixed_targets[n_x:]) ** 2
            loss_u = squared.mean() if self.variant == "official" else squared.sum(1).mean()
            loss = loss_x + self._lambda_u(epoch + step / steps) * loss_u
            if self.variant == "official":  # pull the mean prediction towards the uniform prior
                prior = torch.full((self.num_classes,), 1.0 / self.num_classes, device=self.device)
                mean_pred = torch.softmax(logits, 1).mean(0)
                loss = loss + torch.sum(prior * torch.log(prior / mean_pred))
            self.step(optimizer, loss)
            total += float(loss.detach())
        return total / max(steps, 1)

    # -- the epoch -----------------------------------------------------------------------------------------
    def train_epoch(self, epoch: int) -> dict:
        if epoch < self.warmup:
            return {"train_loss": float(np.mean([self._ce_epoch(k) for k in range(2)]))}
        probs = self._divide()
        self.extras["clean_probability"] = probs
        row = {"train_loss": float(np.mean([self._mixmatch_epoch(a, probs[1 - a], epoch) for a in range(2)])),
               "labelled_share": float((probs > self.p_threshold).mean())}
        if self.clean_labels is not None:
            noisy = self.clean_labels != self.y.numpy()
            row["separation"] = float(probs[0][~noisy].mean() - probs[0][noisy].mean()) if noisy.any() else float("nan")
        return row
