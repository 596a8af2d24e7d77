"""Loaders for the real datasets, reading the files as their publishers distribute them.

Each loader looks under ``data_dir`` (default ``$NOISY_DATA_DIR`` or ``<repo>/data``) and, when the files
are absent, raises a DataNotFoundError naming the exact path it expected and where to get the data.
The readers are plain format parsers (no checksums), so tests can run them on tiny files they write.
"""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd

from shared.datasets import Dataset, Split, register
from shared.datasets.files import check_not_lfs_pointer, load_pickle, read_csv
from shared.errors import DataFormatError, DataNotFoundError
from shared.paths import data_dir as resolve_data_dir

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
MNIST_CLASSES = tuple(str(d) for d in range(10))
ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income",
)
ADULT_NUMERIC = ("age", "education-num", "capital-gain", "capital-loss", "hours-per-week")
ADULT_CATEGORICAL = (
    "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex", "native-country",
)


def missing_data_error(what: str, expected: list[Path], how: str, *, stand_ins: str = "") -> DataNotFoundError:
    """A DataNotFoundError listing the paths looked at, how to get the data and how to run without it
    (``stand_ins`` names the offline stand-ins, e.g. "vader, rt_snippets")."""
    paths = "\n  ".join(str(p) for p in expected)
    named = f" ({stand_ins})" if stand_ins else ""
    return DataNotFoundError(
        f"{what} not found. Looked for:\n  {paths}\n{how}\n"
        "Pass data_dir=... (or set NOISY_DATA_DIR) to point at another folder, "
        f"or run with profile='smoke' to use the offline stand-ins{named}."
    )


def _first_existing(candidates: list[Path], required: list[str]) -> Path | None:
    for folder in candidates:
        if all(_find(folder, name) is not None for name in required):
            return folder
    return None


def _find(folder: Path, name: str) -> Path | None:
    for path in (folder / name, folder / f"{name}.gz"):
        if path.exists():
            return path
    return None


# ---------------------------------------------------------------------------------------------- CIFAR-10
CIFAR10_FILES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar.html"


def read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One pickled CIFAR-10 batch: images (n, 32, 32, 3) uint8 and labels (n,) int64.

    The pickle is read with ``load_pickle`` (plain containers and numpy arrays only), so a crafted file cannot
    run code."""
    batch = load_pickle(path, "CIFAR-10 batch", encoding="bytes",
                        fix=f"extract {Path(path).name} again from cifar-10-python.tar.gz ({CIFAR10_URL})")
    try:
        data, labels = batch[b"data"], batch[b"labels"]
    except (KeyError, TypeError) as e:
        raise DataFormatError(f"{path} is not a CIFAR-10 python batch (dict with b'data' and b'labels'): {e}") from e
    data = np.asarray(data, dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3072 or len(labels) != len(data):
        raise DataFormatError(f"{path}: expected data of shape (n, 3072) and n labels, got {data.shape}, {len(labels)}")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy(), np.asarray(labels, dtype=np.int64)


def locate_cifar10(data_dir=None) -> Path:
    """The folder holding CIFAR-10's python batches; DataNotFoundError naming where it looked if absent."""
    root = resolve_data_dir(data_dir)
    candidates = [root / "cifar-10-batches-py", root / "cifar10" / "cifar-10-batches-py", root / "cifar10"]
    folder = _first_existing(candidates, CIFAR10_FILES)
    if folder is None:
        raise missing_data_error(
            "CIFAR-10",
            [c / "data_batch_1" for c in candidates],
            f"Download 'CIFAR-10 python version' (cifar-10-python.tar.gz) from {CIFAR10_URL} "
            f"and extract it into {root} (it creates cifar-10-batches-py/).",
        )
    return folder


@register("cifar10", kind="real", modality="image", description="CIFAR-10, 50,000 + 10,000 RGB 32x32, 10 classes")
def load_cifar10(data_dir=None) -> Dataset:
    folder = locate_cifar10(data_dir)
    parts = [read_cifar_batch(folder / f"data_batch_{i}") for i in range(1, 6)]
    train = Split(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
    test = Split(*read_cifar_batch(folder / "test_batch"))
    return Dataset("cifar10", train, test, CIFAR10_CLASSES, "image", "real", {"path": str(folder)})


# ---------------------------------------------------------------------------------------------- MNIST
MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


def read_idx(path: Path) -> np.ndarray:
    """An IDX file of unsigned bytes (MNIST's format), gzipped or not."""
    path = check_not_lfs_pointer(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (gzip.BadGzipFile, EOFError) as e:
        raise DataFormatError(f"{path} is not a readable gzip file ({e}); download it again") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DataFormatError(f"{path} is not an IDX file of unsigned bytes (magic 0x0000080N)")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise DataFormatError(f"{path}: header says shape {shape} but holds {data.size} values")
    return data.reshape(shape)


def locate_mnist(data_dir=None) -> Path:
    """The folder holding MNIST's four IDX files; DataNotFoundError naming where it looked if absent."""
    root = resolve_data_dir(data_dir)
    candidates = [root / "MNIST" / "raw", root / "mnist", root]
    folder = _first_existing(candidates, list(MNIST_FILES.values()))
    if folder is None:
        raise missing_data_error(
            "MNIST",
            [c / MNIST_FILES["train_images"] for c in candidates],
            "Put the four IDX files (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-...) there, "
            "e.g. with torchvision.datasets.MNIST(root, download=True) on a machine with internet access.",
        )
    return folder


@register("mnist", kind="real", modality="image", description="MNIST, 60,000 + 10,000 grey 28x28, 10 classes")
def load_mnist(data_dir=None) -> Dataset:
    folder = locate_mnist(data_dir)
    arr = {k: read_idx(_find(folder, v)) for k, v in MNIST_FILES.items()}
    for split in ("train", "test"):
        if arr[f"{split}_images"].ndim != 3 or len(arr[f"{split}_images"]) != len(arr[f"{split}_labels"]):
            raise DataFormatError(f"MNIST {split}: images {arr[f'{split}_images'].shape} do not match labels")
    train = Split(arr["train_images"].copy(), arr["train_labels"].astype(np.int64))
    test = Split(arr["test_images"].copy(), arr["test_labels"].astype(np.int64))
    return Dataset("mnist", train, test, MNIST_CLASSES, "image", "real", {"path": str(folder)})


# ---------------------------------------------------------------------------------------------- Adult
def read_adult_csv(path: Path) -> tuple[pd.DataFrame, np.ndarray]:
    """UCI ``adult.data``/``adult.test``: features (fnlwgt dropped) and labels (1 = >50K); '?' becomes NaN."""
    frame = read_csv(path, header=None, names=list(ADULT_COLUMNS), na_values="?", skipinitialspace=True, comment="|")
    if frame.shape[1] != len(ADULT_COLUMNS) or frame["income"].isna().all():
        raise DataFormatError(f"{path}: expected 15 comma-separated columns ending in the income label")
    income = frame.pop("income").astype(str).str.rstrip(".").str.strip()
    unknown = set(income) - {"<=50K", ">50K"}
    if unknown:
        raise DataFormatError(f"{path}: income labels must be <=50K or >50K, found {sorted(unknown)[:3]}")
    frame = frame.drop(columns="fnlwgt")
    for col in ADULT_NUMERIC:
        try:
            frame[col] = pd.to_numeric(frame[col], errors="raise").astype(float)
        except ValueError as e:
            raise DataFormatError(f"{path}: column {col!r} must be numeric ({e})") from None
    return frame, (income == ">50K").to_numpy().astype(np.int64)


def locate_adult(data_dir=None) -> Path:
    """The folder holding ``adult.data`` and ``adult.test``; DataNotFoundError naming where it looked if absent."""
    root = resolve_data_dir(data_dir)
    candidates = [root / "adult", root]
    folder = _first_existing(candidates, ["adult.data", "adult.test"])
    if folder is None:
        raise missing_data_error(
            "Adult",
            [c / "adult.data" for c in candidates],
            "Download adult.data and adult.test from https://archive.ics.uci.edu/dataset/2/adult.",
        )
    return folder


@register("adult", kind="real", modality="tabular", description="UCI Adult census income, 13 features, >50K vs <=50K")
def load_adult(data_dir=None, drop_missing: bool = True) -> Dataset:
    folder = locate_adult(data_dir)
    splits = []
    for name in ("adult.data", "adult.test"):
        X, y = read_adult_csv(_find(folder, name))
        if drop_missing:
            keep = ~X.isna().any(axis=1).to_numpy()
            X, y = X[keep].reset_index(drop=True), y[keep]
        splits.append(Split(X, y))
    return Dataset("adult", splits[0], splits[1], ("<=50K", ">50K"), "tabular", "real", {"path": str(folder)})
