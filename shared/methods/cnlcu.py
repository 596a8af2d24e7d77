"""CNLCU (Xia et al., ICLR 2022), the "hard" variant, as the official NoisywikiHow code runs it
(``trainer.train_cnlcu``, ``common/cnlcu_loss.loss_ours_hard`` and ``hard_process``, the loop in ``tm_main.py``).

Two networks select samples for each other as in Co-teaching, but by a robust mean of each sample's recent
losses minus an uncertainty bound instead of the current loss:

- *History*: every ``time_step`` epochs (the 1-based epochs 1, 6, 11, ...) each network's per-sample loss
  history is reset to one zero column and the selection counts to sn_i = 1; after each epoch the per-sample
  cross-entropies computed during it (training mode, before the update) are appended.
- *Outliers*: in a mini-batch the history plus the current loss of sample i, once it has >= 5 entries, goes
  through pyod's ``KNN(n_neighbors=2)`` outlier detector fitted on that sample's 1-D losses
  (:func:`knn_outliers`); outlier entries are set to 0 and t_o,i is their number.
- *Criterion*: mu_i = the mean of those entries (including the zero column and the zeroed outliers),
  b_i = 2 sqrt(2 tau_e) M (s + 1.414 t_o,i) sqrt(ln(4 s) / sn_i) / ((s - t_o,i) sqrt(s)) with M = ``loss_bound``
  = 2 and s the 1-based epoch, c_i = ReLU(mu_i - b_i); tau_e = tau_min * linspace(1, 0, D)[e] for the first
  D = min(decay_epochs, epochs) epochs, then 0 (so tau decays to 0 at the last epoch when epochs <= 80).
- *Selection*: each network keeps the floor((1 - R(e)) B) samples of smallest c (all of them if that is 0),
  R(e) = linspace(0, forget_rate**exponent, ramp_epochs)[e] then forget_rate as in Co-teaching; network 1 is
  updated on network 2's selection with CE_mean / num_remember and vice versa, and sn_i grows by one for the
  samples a network selected during the epoch (its own count).

Ties of c (frequent, since the ReLU sets every criterion below its bound to 0) are broken by position in the
shuffled batch, i.e. at random; the official numpy ``argsort`` leaves their order to the sort implementation.
The last, smaller batch is used as in the official data loader. Official values (``tm_train_hy_nruns.py``):
forget_rate = the noise rate, ramp_epochs 8 (real noise) / 3 (synthetic), tau_min 0.3 / 0.1, no clipping.
On CUDA with ``TrainSetup.amp`` the forward passes run under fp16 autocast and the steps through the GradScaler
(``Method.forward_logits``, ``Method.step``); the per-sample losses behind the criterion are float32.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from shared.errors import ConfigError
from shared.methods.base import Method

MIN_ENTRIES = 5  # outlier removal starts when a sample's history incl. the current loss has this many entries


def knn_outliers(rows: np.ndarray, n_neighbors: int = 2, contamination: float = 0.1) -> np.ndarray:
    """pyod's ``KNN(n_neighbors, method="largest", contamination).fit(row[:, None]).labels_`` for every row
    of ``rows`` (m, c) at once, as a boolean array (m, c).

    A value's score is its distance to its ``n_neighbors``-th nearest other value of the row; the values scoring
    strictly above the row's ``100 * (1 - contamination)`` percentile (linear interpolation) are outliers.
    pyod, which the official code imports, is not a dependency of this project.
    """
    rows = np.asarray(rows, dtype=np.float64)
    if rows.shape[1] <= n_neighbors:
        raise ConfigError(f"KNN with n_neighbors={n_neighbors} needs more than {n_neighbors} values, "
                          f"got {rows.shape[1]}")
    dist = np.abs(rows[:, :, None] - rows[:, None, :])
    dist[:, np.arange(rows.shape[1]), np.arange(rows.shape[1])] = np.inf  # a value is not its own neighbour
    scores = np.partition(dist, n_neighbors - 1, axis=2)[:, :, n_neighbors - 1]
    threshold = np.percentile(scores, 100 * (1 - contamination), axis=1, keepdims=True)
    return scores > threshold


def cnlcu_criterion(history: np.ndarray, current: np.ndarray, sn: np.ndarray, *, epoch: int, tau: float,
                    loss_bound: float) -> np.ndarray:
    """c_i = ReLU(mu_i - b_i) of a batch: ``history`` (B, c) past losses incl. the zero column, ``current`` (B,)
    losses, ``sn`` (B,) selection counts, ``epoch`` the 1-based epoch s, ``tau`` = tau_e."""
    losses = np.concatenate([history, current[:, None]], axis=1).astype(np.float64)
    n_out = np.zeros(len(losses))
    if losses.shape[1] >= MIN_ENTRIES:
        outliers = knn_outliers(losses)
        losses[outliers] = 0.0
        n_out = outliers.sum(axis=1)
    s = float(epoch)
    bound = (2 * math.sqrt(2 * tau) * loss_bound * (s + 1.414 * n_out) * np.sqrt(math.log(4 * s) / sn)
             / ((s - n_out) * math.sqrt(s)))
    return np.maximum(losses.mean(axis=1) - bound, 0.0)


def small_criterion(criterion: np.ndarray, forget_rate: float) -> np.ndarray:
    """Positions of the floor((1 - forget_rate) B) smallest of a batch's criteria (all B if that is 0); ties in
    batch order."""
    num = int((1 - forget_rate) * len(criterion)) or len(criterion)
    return np.argsort(criterion, kind="stable")[:num]


class CNLCU(Method):
    name = "cnlcu"
    n_networks = 2
    mixed_precision = True

    def __init__(self, make_model, num_classes, setup, *, forget_rate: float, ramp_epochs: int = 5,
                 exponent: float = 1.0, tau_min: float = 0.1, decay_epochs: int = 80, time_step: int = 5,
                 loss_bound: float = 2.0):
        super().__init__(make_model, num_classes, setup)
        if not 0.0 <= forget_rate < 1.0:
            raise ConfigError(f"forget_rate must be in [0, 1), got {forget_rate}")
        if ramp_epochs < 1 or decay_epochs < 1 or time_step < 1:
            raise ConfigError(f"ramp_epochs, decay_epochs and time_step must be >= 1, got {ramp_epochs}, "
                              f"{decay_epochs}, {time_step}")
        if tau_min < 0 or loss_bound <= 0:
            raise ConfigError(f"CNLCU needs tau_min >= 0 and loss_bound > 0, got {tau_min}, {loss_bound}")
        self.forget_rate, self.ramp_epochs, self.exponent = forget_rate, ramp_epochs, exponent
        self.time_step, self.loss_bound = time_step, loss_bound
        decay = min(decay_epochs, setup.epochs)
        self.tau_plan = np.zeros(setup.epochs)
        self.tau_plan[:decay] = tau_min * np.linspace(1, 0, decay)

    def forget_at(self, epoch: int) -> float:
        """R of the 0-based epoch: ``rate_schedule`` of ``tm_main.py``."""
        if epoch >= self.ramp_epochs:
            return self.forget_rate
        return float(np.linspace(0, self.forget_rate**self.exponent, self.ramp_epochs)[epoch])

    def train_epoch(self, epoch: int) -> dict:
        n = len(self.X)
        if epoch % self.time_step == 0:
            self.history = np.zeros((2, n, 1), dtype=np.float32)
            self.sn = np.ones((2, n))
        forget, tau = self.forget_at(epoch), float(self.tau_plan[epoch])
        new = np.zeros((2, n), dtype=np.float32)
        selected = np.zeros((2, n), dtype=bool)
        for idx in self.batches():
            x, t = self.inputs(idx), self.y[idx].to(self.device)
            logits = [self.forward_logits(net, x) for net in self.nets]  # float32
            ce = [F.cross_entropy(z, t, reduction="none") for z in logits]
            rows = idx.numpy()
            keep = []
            for k in range(2):
                new[k, rows] = ce[k].detach().cpu().numpy()
                c = cnlcu_criterion(self.history[k, rows], new[k, rows], self.sn[k, rows], epoch=epoch + 1, tau=tau,
                                    loss_bound=self.loss_bound)
                keep.append(small_criterion(c, forget))
                selected[k, rows[keep[k]]] = True
            for k in range(2):  # each network learns from its peer's selection, CE_mean / num_remember
                peer = torch.as_tensor(keep[1 - k], device=self.device)
                self.step(self.optimizers[k], F.cross_entropy(logits[k][peer], t[peer]) / len(peer))
        self.history = np.concatenate([self.history, new[:, :, None]], axis=2)
        self.sn += selected
        return {"train_loss": float(new[0].mean()), "forget_rate": forget, "tau_min": tau}
