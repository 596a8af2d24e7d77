"""Benchmark files: noisy copies of a COCO instances file, written with their manifests (how COCO-N, Cityscapes-N
and LVIS-N are made from COCO, Cityscapes and LVIS).

    entry = write_benchmark(dataset, folder, "coco-n_val2017", engine="paper", tier="high", seed=0)
    entry.path        # <folder>/coco-n_val2017_paper_high_seed0.json
    entry.manifest    # source digest, engine, tier, seed, options, preset, code, counts, sha256 of the JSON
    dataset, manifest = read_benchmark(entry.path)       # checked against the manifest's checksum

A file is kept when its manifest says it was made from the same clean annotations with the same engine, tier,
seed, options and code, and its bytes still match the manifest's checksum; otherwise (missing, damaged, stale) it
is written again, atomically: the JSON first, then the manifest, each to a temporary name renamed into place, so
an interrupted write leaves either the old pair or a JSON whose checksum no manifest vouches for.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from benchmark_n.coco import check_coco, write_coco
from benchmark_n.noise import canonical_tier, engine_settings, noise_dataset
from benchmark_n.quality import fingerprint
from shared.datasets.files import read_json
from shared.errors import DataFormatError, DataNotFoundError


@dataclass(frozen=True)
class BenchmarkFile:
    path: Path
    manifest: dict
    written: bool  # False: an identical file was already there and kept


def benchmark_name(prefix: str, engine: str, tier: str, seed: int) -> str:
    """``<prefix>_<engine>_<tier>_seed<seed>.json``."""
    return f"{prefix}_{engine}_{canonical_tier(tier)}_seed{seed}.json"


def manifest_path(path: Path) -> Path:
    return Path(path).with_suffix(".manifest.json")


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _up_to_date(path: Path, wanted: dict) -> dict | None:
    """The manifest of ``path`` when it was made as ``wanted`` says and its bytes match; None otherwise."""
    try:
        manifest = read_json(manifest_path(path))
    except (FileNotFoundError, DataFormatError):
        return None
    same = all(manifest.get(k) == v for k, v in wanted.items())
    return manifest if same and path.is_file() and manifest.get("sha256") == _sha256(path) else None


def write_benchmark(dataset: dict, folder, prefix: str, engine: str = "paper", tier: str = "low", seed: int = 0,
                    **options) -> BenchmarkFile:
    """The noisy copy of ``dataset`` (``noise.noise_dataset`` with ``engine``, ``tier``, ``seed`` and ``options``)
    written to ``folder`` with its manifest, unless an identical one is there (module docstring)."""
    path = Path(folder) / benchmark_name(prefix, engine, tier, seed)
    wanted = {"source": fingerprint(dataset), **engine_settings(engine, tier, seed, **options)}
    kept = _up_to_date(path, wanted)
    if kept is not None:
        return BenchmarkFile(path, kept, written=False)
    noisy = noise_dataset(dataset, engine, tier, seed, **options)
    write_coco(path, noisy.dataset)
    manifest = json.loads(json.dumps({**noisy.manifest, **wanted, "file": path.name, "sha256": _sha256(path)}))
    _write_json_atomic(manifest_path(path), manifest)
    return BenchmarkFile(path, manifest, written=True)


def read_benchmark(path) -> tuple[dict, dict]:
    """(dataset, manifest) of a benchmark file; DataFormatError when the bytes do not match the manifest (a damaged
    or partly written file: write it again with ``write_benchmark``)."""
    path = Path(path)
    if not path.is_file() or not manifest_path(path).is_file():
        raise DataNotFoundError(f"{path} or its manifest {manifest_path(path).name} is missing; write it with "
                                "benchmark_n.benchmarks.write_benchmark")
    manifest = read_json(manifest_path(path))
    if manifest.get("sha256") != _sha256(path):
        raise DataFormatError(f"{path} does not match the checksum of its manifest (damaged or partly written); "
                              "write it again with benchmark_n.benchmarks.write_benchmark")
    dataset = read_json(path)
    check_coco(dataset, source=str(path))
    return dataset, manifest


__all__ = ["BenchmarkFile", "benchmark_name", "manifest_path", "write_benchmark", "read_benchmark"]
