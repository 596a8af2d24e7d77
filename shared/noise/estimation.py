"""Measuring label noise: realised noise rate and transition matrices.

``empirical_transition`` counts, when clean labels are known. ``anchor_transition`` estimates T from a
model's noisy-class posteriors alone, with the anchor-point method of Patrini et al. (2017): for each
class i, the item most confidently predicted as i is taken as an anchor of class i, and its posterior
over noisy classes is T's row i.
"""
from __future__ import annotations

import numpy as np

from shared.errors import ConfigError
from shared.noise.classic import check_labels


def noise_rate(y_clean, y_noisy) -> float:
    """Fraction of items whose noisy label differs from the clean one."""
    y_clean, y_noisy = np.asarray(y_clean), np.asarray(y_noisy)
    if y_clean.shape != y_noisy.shape:
        raise ConfigError(f"clean and noisy labels differ in shape: {y_clean.shape} vs {y_noisy.shape}")
    return float(np.mean(y_clean != y_noisy)) if len(y_clean) else 0.0


def empirical_transition(y_clean, y_noisy, num_classes: int) -> np.ndarray:
    """Row-normalised confusion counts (K, K): ``T[i, j]`` = share of clean-i items labelled j.

    A class with no items gets the identity row. Labels must be integers in ``0..num_classes-1``.
    """
    y_clean, y_noisy = np.asarray(y_clean), np.asarray(y_noisy)
    if y_clean.shape != y_noisy.shape:
        raise ConfigError(f"clean and noisy labels differ in shape: {y_clean.shape} vs {y_noisy.shape}")
    if int(num_classes) < 1:
        raise ConfigError(f"num_classes must be >= 1, got {num_classes}")
    checked = []
    for name, labels in (("clean", y_clean), ("noisy", y_noisy)):
        try:
            checked.append(check_labels(labels, num_classes))
        except ConfigError as err:
            raise ConfigError(f"{name} labels: {err}") from None
    y_clean, y_noisy = checked
    counts = np.zeros((num_classes, num_classes))
    np.add.at(counts, (y_clean, y_noisy), 1)
    totals = counts.sum(axis=1, keepdims=True)
    return np.where(totals > 0, counts / np.maximum(totals, 1), np.eye(num_classes))


def anchor_transition(noisy_posteriors: np.ndarray, *, quantile: float = 0.97) -> np.ndarray:
    """Anchor-point estimate of T from noisy-class posteriors (n, K) (Patrini et al., 2017).

    For class i the anchor is the item at the ``quantile`` of ``P(noisy = i | x)`` (0.97 as in the
    authors' code, which discards the most extreme, often overconfident items; 1.0 is the plain argmax).
    """
    probs = np.asarray(noisy_posteriors, dtype=np.float64)
    if probs.ndim != 2 or not probs.size:
        raise ConfigError(f"posteriors must be a non-empty (n, K) array, got shape {probs.shape}")
    finite = np.isfinite(probs)
    if not finite.all():
        bad = int((~finite).any(axis=1).sum())
        raise ConfigError(f"posteriors hold NaN or infinite values in {bad} of {len(probs)} rows; the anchor "
                          "points (and so T) would be undefined: fix the model's outputs or drop those rows")
    if not 0.0 < quantile <= 1.0:
        raise ConfigError(f"quantile must be in (0, 1], got {quantile}")
    K = probs.shape[1]
    T = np.empty((K, K))
    for i in range(K):
        column = probs[:, i]
        if quantile < 1.0:
            threshold = np.quantile(column, quantile, method="higher")
            column = np.where(column >= threshold, -np.inf, column)
        T[i] = probs[np.argmax(column)]
    return T / T.sum(axis=1, keepdims=True)
