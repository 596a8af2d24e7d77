"""Writers for the real datasets' file formats, the inverse of ``shared.datasets.real``'s readers.

Tests use them to write tiny files in the publishers' formats, and ``shared.rehearsal`` uses them to write a
rehearsal data folder (stand-in data in the real formats) that the full profile can run on.
"""
from __future__ import annotations

import gzip
import hashlib
import pickle
from pathlib import Path

import numpy as np
import pandas as pd

from shared.datasets.real import ADULT_COLUMNS, CIFAR10_FILES, MNIST_FILES
from shared.errors import ConfigError


def write_cifar10(folder, train_images, train_labels, test_images, test_labels) -> Path:
    """CIFAR-10's python version: ``folder/data_batch_{1..5}`` and ``folder/test_batch``.

    Images are (n, 32, 32, 3) uint8; the training images are divided over the five batches in order.
    """
    folder = Path(folder)
    for name, images in (("train", train_images), ("test", test_images)):
        if np.asarray(images).shape[1:] != (32, 32, 3):
            raise ConfigError(f"CIFAR-10 {name} images must be (n, 32, 32, 3), got {np.asarray(images).shape}")
    folder.mkdir(parents=True, exist_ok=True)
    parts = list(zip(np.array_split(np.asarray(train_images), 5), np.array_split(np.asarray(train_labels), 5)))
    parts.append((np.asarray(test_images), np.asarray(test_labels)))
    for name, (images, labels) in zip(CIFAR10_FILES, parts):
        rows = images.astype(np.uint8).transpose(0, 3, 1, 2).reshape(len(images), 3072)
        with open(folder / name, "wb") as f:
            pickle.dump({b"data": rows, b"labels": [int(v) for v in labels]}, f)
    return folder


def write_idx(path, array, gz: bool = False) -> Path:
    """One IDX file of unsigned bytes (MNIST's format); ``gz`` appends .gz and compresses."""
    array = np.asarray(array)
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in array.shape)
    path = Path(str(path) + (".gz" if gz else ""))
    path.parent.mkdir(parents=True, exist_ok=True)
    with (gzip.open if gz else open)(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())
    return path


def write_mnist(folder, train_images, train_labels, test_images, test_labels, gz: bool = False) -> Path:
    """MNIST's four IDX files in ``folder`` (images (n, 28, 28) uint8)."""
    folder = Path(folder)
    arrays = {"train_images": train_images, "train_labels": train_labels,
              "test_images": test_images, "test_labels": test_labels}
    for key, name in MNIST_FILES.items():
        write_idx(folder / name, arrays[key], gz)
    return folder


def write_adult(folder, train: pd.DataFrame, train_income, test: pd.DataFrame, test_income) -> Path:
    """UCI Adult's ``adult.data`` and ``adult.test`` (test labels end in '.', its first line is the '|1x3' note).

    ``train``/``test`` hold the 13 feature columns of ``ADULT_COLUMNS`` (fnlwgt is filled with a constant when
    absent); NaN becomes '?'. Incomes are 0/1 (1 = >50K).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, frame, income, suffix in (("adult.data", train, train_income, ""), ("adult.test", test, test_income, ".")):
        table = frame.copy()
        if "fnlwgt" not in table:
            table.insert(2, "fnlwgt", 100000)
        table["income"] = np.where(np.asarray(income) == 1, ">50K", "<=50K")
        table["income"] = table["income"] + suffix
        table = table[list(ADULT_COLUMNS)].astype(object).where(table[list(ADULT_COLUMNS)].notna(), "?")
        text = table.to_csv(header=False, index=False, sep=",", lineterminator="\n").replace(",", ", ")
        head = "|1x3 Cross validator\n" if name == "adult.test" else ""
        (folder / name).write_text(head + text)
    return folder


def write_lfs_pointer(path, content: bytes) -> Path:
    """The git-LFS pointer file git leaves at ``path`` for ``content`` when a clone skipped git-lfs."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("version https://git-lfs.github.com/spec/v1\n"
                    f"oid sha256:{hashlib.sha256(content).hexdigest()}\nsize {len(content)}\n")
    return path
