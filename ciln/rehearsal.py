"""CILN's rehearsal files (``python -m shared.rehearsal ROOT ciln``; see ``shared/rehearsal.py``).

The full profile reads three CILN-specific inputs besides CIFAR-10, MNIST and Adult (written by
``shared.rehearsal``). This module writes each in its publisher's format, filled with the smoke profile's
offline stand-ins computed on the rehearsal CIFAR-10 (colourised MNIST digits):

- ``cifar10h/cifar10h-counts.npy``: (n_test, 10) int64 annotation counts, aligned with the CIFAR-10 test split,
  from 50 simulated annotators (``ciln.references.pseudo_human_counts``) instead of CIFAR-10H's humans;
- ``plidn/cifar10/{low,medium,high}/{train,valid}-*-of-*``: PL-IDN's TFRecord shards (``tf.train.Example`` with
  ``image/raw``, ``image/class/label``, ``noisy_labels``, ``rater_ids``), the votes of 10 fallible raters per tier
  (``ciln.references.fallible_rater_votes``) on the NLT rows (train shards; one in ten left out, as the real
  release misses some NLT rows) and the NLV rows (valid shard);
- ``tabpfn/<TABPFN_FILE>``: a TabPFN v1 checkpoint file ``(state_dict, None, config)`` of a *tiny untrained*
  network (the real one is 100 MB of trained weights), so the checkpoint path and TabPFN's inference code run.

The pretrained DeiT3-Small and CLIP weight files are not written (88 MB and 605 MB even untrained);
``ciln/params/rehearsal.yaml`` runs those voters with ``weights: none``.

The writers of these formats (``write_plidn_tier`` and friends, ``write_tabpfn_checkpoint``) are also the unit
tests' fixture writers.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ciln.references import PLIDN_TIERS, fallible_rater_votes, pseudo_human_counts
from ciln.splits import gu_five_way_split
from shared.cache import ArtifactCache
from shared.datasets import load_dataset

PLIDN_RATERS = 10
TINY_TABPFN = {"emsize": 32, "nlayers": 1, "nhead": 2, "nhid_factor": 2, "num_features": 100, "max_num_classes": 10,
               "dropout": 0.0, "efficient_eval_masking": True, "normalize_by_used_features": True,
               "normalize_to_ranking": False, "differentiable_hps_as_style": False}


# ---------------------------------------------------------------------------------------------- PL-IDN shards
def plidn_example(image: np.ndarray, label: int, noisy: np.ndarray, replace: dict | None = None, drop=()) -> dict:
    """One PL-IDN record as ``tfrecord``'s writer takes it, {feature: (value, kind)}: image (32, 32, 3) uint8,
    the clean label and the raters' labels (R,); ``replace`` / ``drop`` change or remove features (to damage it)."""
    ids = [f"rater_{r}".encode() for r in range(len(noisy))]
    features = {"image/raw": (np.ascontiguousarray(image).tobytes(), "byte"), "image/class/label": (int(label), "int"),
                "noisy_labels": (np.asarray(noisy).tolist(), "int"), "rater_ids": (ids, "byte")}
    return {k: v for k, v in {**features, **(replace or {})}.items() if k not in drop}


def write_plidn_shard(path: Path, examples) -> None:
    """A TFRecord file of ``examples`` (``plidn_example`` dicts), written by the ``tfrecord`` package."""
    from tfrecord.writer import TFRecordWriter

    writer = TFRecordWriter(str(path))
    for example in examples:
        writer.write(example)
    writer.close()


def write_plidn_tier(folder: Path, images: np.ndarray, labels: np.ndarray, noisy: np.ndarray, n_train: int) -> list[Path]:
    """One tier as Gu et al. lay it out: the first ``n_train`` rows in two train shards, the rest in one valid shard.

    images (n, 32, 32, 3) uint8, labels (n,) clean, noisy (n, R) rater labels. Returns the shard paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows = [plidn_example(*r) for r in zip(images, labels, noisy)]
    half = n_train // 2
    parts = {"train-00000-of-00002": rows[:half], "train-00001-of-00002": rows[half:n_train],
             "valid-00000-of-00001": rows[n_train:]}
    for name, examples in parts.items():
        write_plidn_shard(folder / name, examples)
    return [folder / name for name in parts]


def plidn_release_mask(n_nlt: int) -> np.ndarray:
    """(n_nlt,) bool: the NLT rows the rehearsal release labels (all but every tenth; the real one misses ~11 %)."""
    return np.arange(n_nlt) % 10 != 9


def write_plidn_release(root: Path, ds, cache: ArtifactCache | None = None) -> list[str]:
    """``root/plidn/cifar10/<low|medium|high>``: the fallible-rater stand-in's votes (R = 10) on ``ds``'s NLT
    images (train shards, ``plidn_release_mask`` rows) and NLV images (valid shard)."""
    from ciln.plidn import LEVELS

    splits = gu_five_way_split(ds.train.y)
    kept = plidn_release_mask(len(splits["nlt"]))
    rows = np.concatenate([splits["nlt"][kept], splits["nlv"]])
    votes = {items: fallible_rater_votes(ds, tiers=PLIDN_TIERS, n_raters=PLIDN_RATERS, items=items, cache=cache)
             for items in ("nlt", "nlv")}
    written = []
    for tier, level in LEVELS.items():
        noisy = np.concatenate([votes["nlt"][tier][kept], votes["nlv"][tier]])
        write_plidn_tier(root / "plidn" / "cifar10" / level, ds.train.X[rows], ds.train.y[rows], noisy, int(kept.sum()))
        written.append(f"plidn/cifar10/{level}")
    return written


# ---------------------------------------------------------------------------------------------- CIFAR-10H, TabPFN
def write_cifar10h(root: Path, counts: np.ndarray) -> Path:
    """``root/cifar10h/cifar10h-counts.npy``: counts (n_test, 10) int64, as jcpeterson/cifar-10h distributes them."""
    path = Path(root) / "cifar10h" / "cifar10h-counts.npy"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.asarray(counts, dtype=np.int64))
    return path


def write_tabpfn_checkpoint(path: Path, **config) -> str:
    """A TabPFN v1 ``.cpkt`` (``torch.save((state_dict, None, config))``, keys prefixed ``module.``) of an untrained
    network of ``TINY_TABPFN`` updated by ``config`` (numpy scalars in the config, as numpy 1.x saved them)."""
    import torch

    from ciln.voters_tabular import tabpfn_network

    torch.manual_seed(0)
    config = {**TINY_TABPFN, "dropout": np.float64(0.0), **config}
    state = {f"module.{k}": v for k, v in tabpfn_network(config).state_dict().items()}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    torch.save((state, None, config), path)
    return str(path)


# ---------------------------------------------------------------------------------------------- entry point
def write_rehearsal_data(root: Path, cache: ArtifactCache | None = None) -> list[str]:
    """Write CILN's files under ``root`` (which already holds the rehearsal CIFAR-10); returns their relative paths."""
    from ciln.voters_tabular import TABPFN_FILE

    root = Path(root)
    ds = load_dataset("cifar10", data_dir=root)  # the real loader: the stand-ins align with what notebooks read
    write_cifar10h(root, pseudo_human_counts(ds, annotators=50, target_error=0.075, cache=cache))
    written = ["cifar10h/cifar10h-counts.npy", *write_plidn_release(root, ds, cache)]
    write_tabpfn_checkpoint(root / "tabpfn" / TABPFN_FILE)
    return written + [f"tabpfn/{TABPFN_FILE}"]
