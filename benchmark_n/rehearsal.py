"""Benchmark-N's rehearsal files: COCO-shapes written as a COCO 2017 folder, synthetic echocardiograms as CAMUS.

``python -m shared.rehearsal <root> benchmark_n`` writes ``<root>/coco/annotations/instances_{train,val}2017.json``
and the JPEG images under ``<root>/coco/{train,val}2017/`` (``benchmark_n.formats.write_coco2017``), and
``<root>/camus/training/patientXXXX/`` in the older CAMUS release's MetaImage format
(``benchmark_n.camus.write_camus_mhd``). The full profile then reads them through the real loaders
(``benchmark_n.formats.load_split``, ``benchmark_n.camus.load_camus``); its numbers are not results.
"""
from __future__ import annotations

from pathlib import Path

from benchmark_n.camus import synthetic_camus, write_camus_mhd
from benchmark_n.formats import write_coco2017
from benchmark_n.shapes import generate_shapes, preset

N_TRAIN, N_VAL = 16, 12
N_PATIENTS = 8


def write_rehearsal_data(root: Path) -> list[str]:
    """Write the COCO 2017 stand-in under ``root/coco``; returns what was written (relative to ``root``)."""
    train = generate_shapes(N_TRAIN, seed=1, **preset("annotation"))
    val = generate_shapes(N_VAL, seed=2, **preset("annotation"))
    write_coco2017(Path(root) / "coco", train, val)
    write_camus_mhd(Path(root) / "camus", synthetic_camus(N_PATIENTS, seed=3, size=64))
    return ["coco", "camus"]


__all__ = ["write_rehearsal_data"]
