"""Benchmark-N's rehearsal files: COCO-shapes written as a COCO 2017 folder.

``python -m shared.rehearsal <root> benchmark_n`` writes ``<root>/coco/annotations/instances_{train,val}2017.json``
and the JPEG images under ``<root>/coco/{train,val}2017/`` (``benchmark_n.formats.write_coco2017``). The full
profile then reads them through the real loader (``benchmark_n.formats.load_split``); its numbers are not results.
"""
from __future__ import annotations

from pathlib import Path

from benchmark_n.formats import write_coco2017
from benchmark_n.shapes import generate_shapes, preset

N_TRAIN, N_VAL = 16, 12


def write_rehearsal_data(root: Path) -> list[str]:
    """Write the COCO 2017 stand-in under ``root/coco``; returns what was written (relative to ``root``)."""
    train = generate_shapes(N_TRAIN, seed=1, **preset("annotation"))
    val = generate_shapes(N_VAL, seed=2, **preset("annotation"))
    write_coco2017(Path(root) / "coco", train, val)
    return ["coco"]


__all__ = ["write_rehearsal_data"]
