"""The "Gu-style" five-way split of the training pool (official ``code/splits/build_splits_image_tabular.py``).

train pool --10%--> validation, then each half-split 50/50 (stratified, seed 0):
CLT (clean-label train: voters train here), NLT (noisy-label train: the benchmark rows),
CLV (clean-label validation: voter model selection), NLV (noisy-label validation).
The official test split is untouched. Index arrays are sorted, as the official code saves them.
"""
from __future__ import annotations

import numpy as np
from sklearn.model_selection import train_test_split

from shared.errors import DataFormatError

SPLITS = ("clt", "nlt", "clv", "nlv")
SPLIT_NAMES = {"nlt": "noisy_label_train", "nlv": "noisy_label_valid", "test": "test"}


def gu_five_way_split(labels, val_fraction: float = 0.10, seed: int = 0) -> dict[str, np.ndarray]:
    """Sorted index arrays ``{"clt", "nlt", "clv", "nlv"}`` into the training pool (stratified by label)."""
    labels = np.asarray(labels)
    idx = np.arange(len(labels))
    try:
        remain, val = train_test_split(idx, test_size=val_fraction, random_state=seed, stratify=labels)
        clt, nlt = train_test_split(remain, test_size=0.5, random_state=seed, stratify=labels[remain])
        clv, nlv = train_test_split(val, test_size=0.5, random_state=seed, stratify=labels[val])
    except ValueError as exc:  # sklearn: a class too small to stratify one of the three splits
        classes, counts = np.unique(labels, return_counts=True)
        smallest = ", ".join(f"class {c}: {n}" for c, n in sorted(zip(classes, counts), key=lambda t: t[1])[:3])
        raise DataFormatError(
            f"the five-way split of {len(labels)} training rows needs every class in each of its stratified parts "
            f"(the {val_fraction:.0%} validation part is halved again, so about {int(4 / val_fraction)} rows per "
            f"class or more); the smallest classes have {smallest}: use more training rows ({exc})") from exc
    return {name: np.sort(part) for name, part in zip(SPLITS, (clt, nlt, clv, nlv))}
