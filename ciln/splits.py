"""The "Gu-style" five-way split of the training pool (official ``code/splits/build_splits_image_tabular.py``).

train pool --10%--> validation, then each half-split 50/50 (stratified, seed 0):
CLT (clean-label train: voters train here), NLT (noisy-label train: the benchmark rows),
CLV (clean-label validation: voter model selection), NLV (noisy-label validation).
The official test split is untouched. Index arrays are sorted, as the official code saves them.
"""
from __future__ import annotations

import numpy as np
from sklearn.model_selection import train_test_split

SPLITS = ("clt", "nlt", "clv", "nlv")
SPLIT_NAMES = {"nlt": "noisy_label_train", "nlv": "noisy_label_valid", "test": "test"}


def gu_five_way_split(labels, val_fraction: float = 0.10, seed: int = 0) -> dict[str, np.ndarray]:
    """Sorted index arrays ``{"clt", "nlt", "clv", "nlv"}`` into the training pool (stratified by label)."""
    labels = np.asarray(labels)
    idx = np.arange(len(labels))
    remain, val = train_test_split(idx, test_size=val_fraction, random_state=seed, stratify=labels)
    clt, nlt = train_test_split(remain, test_size=0.5, random_state=seed, stratify=labels[remain])
    clv, nlv = train_test_split(val, test_size=0.5, random_state=seed, stratify=labels[val])
    return {name: np.sort(part) for name, part in zip(SPLITS, (clt, nlt, clv, nlv))}
