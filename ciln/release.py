"""CILN benchmark releases: write a generated benchmark to disk, and read one back (ours or the authors').

The layout follows the authors' Hugging Face release (``sh-islam/ciln-bench-{cifar10,mnist,adult}``)::

    <root>/manifest.json                                   (ours: dataset, voters, version, settings ...)
    <root>/settings/<corruption>_sev<severity>/<split>/labels.npy          true labels (n,)
    <root>/settings/<corruption>_sev<severity>/<split>/softmax_<voter>.npy  voter outputs (n, K)
    <root>/settings/<corruption>_sev<severity>/<split>/sampled_labels.npy   hard labels, one voter per row (ours)
    <root>/settings/clean/<split>/softmax_<voter>.npy                        outputs on clean inputs (ours)

``<split>`` is ``noisy_label_train`` (the NLT rows), ``noisy_label_valid`` (NLV) or ``test``. Writes go to a temporary folder renamed into
place. ``read_release`` accepts the authors' files (no manifest, no clean outputs: CILN-C then needs them).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from ciln.benchmark import Benchmark
from ciln.corruptions import domain_of
from ciln.splits import SPLIT_NAMES
from shared.errors import DataFormatError, unknown_choice
from shared.datasets.files import load_npy, read_json
from shared.datasets.real import missing_data_error

FORMAT_VERSION = 1
SETTING_DIR = re.compile(r"^(?P<corruption>[a-z_]+)_sev(?P<severity>\d)$")


def write_release(bench: Benchmark, root: str | os.PathLike, *, label_seed: int = 0, extra: dict | None = None) -> Path:
    """Write ``bench`` (one split) under ``root``; returns ``root``. Existing files of other splits are kept."""
    root = Path(root)
    split = SPLIT_NAMES[bench.split]
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".release-", dir=root))
    try:
        folders = {("clean",): bench.clean_probs, **{(f"{c}_sev{s}",): p for (c, s), p in bench.probs.items()}}
        for (name,), probs in folders.items():
            folder = tmp / "settings" / name / split
            folder.mkdir(parents=True)
            np.save(folder / "labels.npy", bench.y)
            for voter, p in zip(bench.voters, probs):
                np.save(folder / f"softmax_{voter}.npy", p.astype(np.float32))
            if name != "clean":
                c, s = SETTING_DIR.match(name).group("corruption", "severity")
                np.save(folder / "sampled_labels.npy", bench.sampled_labels((c, int(s)), label_seed))
        manifest_path = root / "manifest.json"
        manifest = read_json(manifest_path) if manifest_path.exists() else {}
        manifest.update({
            "format_version": FORMAT_VERSION, "dataset": bench.dataset, "domain": bench.domain,
            "classes": list(bench.classes), "voters": bench.voters, "source": bench.source,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "label_seed": label_seed,
            "corruption_options": bench.corruption_options, **(extra or {}),
        })
        manifest.setdefault("splits", {})[split] = {
            "rows": int(len(bench.y)), "settings": [f"{c}_sev{s}" for c, s in bench.settings],
            "voter_accuracy": bench.voter_accuracy, "split_sizes": bench.split_sizes,
        }
        for path in sorted((tmp / "settings").rglob("*.npy")):
            target = root / path.relative_to(tmp)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
        fd, name = tempfile.mkstemp(dir=root, prefix=".manifest-")
        with os.fdopen(fd, "w") as f:
            json.dump(manifest, f, indent=1)
        os.replace(name, manifest_path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def _read_folder(folder: Path, voters: list[str] | None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    files = sorted(folder.glob("softmax_*.npy"))
    names = [f.stem[len("softmax_"):] for f in files]
    if voters is not None:
        if sorted(voters) != sorted(names):
            raise DataFormatError(f"{folder}: voters {names} differ from the release's {voters}")
        names, files = voters, [folder / f"softmax_{v}.npy" for v in voters]
    if not files:
        raise DataFormatError(f"{folder} has no softmax_<voter>.npy files")
    labels = load_npy(folder / "labels.npy", "true labels").astype(np.int64)
    probs = np.stack([load_npy(f, "voter softmax outputs") for f in files]).astype(np.float32)
    if probs.shape[:2] != (len(names), len(labels)) or probs.ndim != 3:
        raise DataFormatError(f"{folder}: softmax arrays must be (rows, classes) for {len(labels)} rows, got {probs.shape}")
    return labels, probs, names


def read_release(root: str | os.PathLike, split: str = "nlt", dataset: str | None = None) -> Benchmark:
    """A Benchmark from a release folder (``split``: "nlt", "nlv" or "test"). ``dataset`` names it when there is no manifest."""
    if split not in SPLIT_NAMES:
        raise unknown_choice("split", split, SPLIT_NAMES)
    root = Path(root).expanduser()
    settings_dir = root / "settings"
    if not settings_dir.is_dir():
        raise missing_data_error("a CILN release", [settings_dir],
                                 "Download a release (e.g. the Hugging Face dataset sh-islam/ciln-bench-cifar10) there, "
                                 "or write one with ciln.release.write_release.")
    manifest = read_json(root / "manifest.json") if (root / "manifest.json").exists() else {}
    split_name = SPLIT_NAMES[split]
    voters = manifest.get("voters")
    probs, y, clean = {}, None, None
    for folder in sorted(p for p in settings_dir.iterdir() if (p / split_name).is_dir()):
        labels, p, names = _read_folder(folder / split_name, voters)
        voters = voters or names
        if y is None:
            y = labels
        elif not np.array_equal(y, labels):
            raise DataFormatError(f"{folder / split_name}: labels differ from the other settings'")
        if folder.name == "clean":
            clean = p
            continue
        match = SETTING_DIR.match(folder.name)
        if match is None:
            raise DataFormatError(f"{folder}: setting folders are named <corruption>_sev<severity>")
        probs[(match["corruption"], int(match["severity"]))] = p
    if not probs:
        raise DataFormatError(f"{settings_dir} holds no settings for split {split_name}")
    name = manifest.get("dataset", dataset)
    if name is None:
        raise DataFormatError(f"{root} has no manifest.json: pass dataset= (e.g. 'cifar10')")
    classes = tuple(manifest.get("classes", [str(k) for k in range(next(iter(probs.values())).shape[2])]))
    info = manifest.get("splits", {}).get(split_name, {})
    return Benchmark(name, manifest.get("domain", domain_of(name)), classes, split, list(voters), y, clean, probs,
                     info.get("voter_accuracy", {}), info.get("split_sizes", {}), manifest.get("source", f"release {root}"),
                     manifest.get("corruption_options", {}))
