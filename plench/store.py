"""Where Plench's trained runs live: sweep folders in the artifact cache, shared by the notebooks where that is exact.

A run's folder is named by the hash of its arguments (``shared.sweep.run_dir_for``), so notebooks whose settings
define the same run train it once and read it after: in the full profile 04's "validation" arm is 3,120 of 03's
ResNet-32 runs (13 of Plench's 31.6 projected H100-hours before they were shared). Each run is trained under its
lock (``shared.sweep.run_locks``), so two notebooks running at once never train one run twice.

Runs trained stacked (``batched``: several MLP configurations as one model, ``protocol.train_runs_batched``) agree
with a run trained alone only to about 1e-4, and differ by which runs share the stack; so a sweep that stacks keeps a
folder of its own notebook, or one notebook's records would depend on which notebook reached a run first (the
same settings must give the same bytes). Runs trained alone (the image networks: every full-profile run 04 shares
with 03) are the same bytes whoever trains them, and share.

The folders sit under ``<cache>/plench-sweeps/`` (``shared.paths.cache_dir``: ``$NOISY_CACHE_DIR`` or
``.cache/artifacts``): ``shared/<kind>-<code>`` or ``<notebook>/<kind>-<code>``, where ``<code>`` fingerprints the
code that trains a run of that kind (``shared.cache.code_fingerprint``: the module and every project module it
imports). Editing that code starts new folders, as the cache rebuilds its entries; a notebook's own output folder,
which the batch runner replaces on every run, never holds the only copy of hours of training, and a killed
notebook keeps every run it finished.

========================  ===================================================================================
kind                      runs
========================  ===================================================================================
``RUNS``                  ``protocol.sweep``'s runs (02, 03, 04's "validation" arm); code: ``plench.protocol``
``TRAINING_ARM``          04's "training" arm (``reports.train_with_validation``); code: ``plench.reports``
========================  ===================================================================================

    folder = sweep_dir(RUNS)                          # shared: pass as protocol.sweep(out_dir=...)
    folder = sweep_dir(RUNS, own="02_tabular")        # a stacking sweep's own
    jobs = jobs_dir("03_image")                        # its Slurm ledger and logs (one per notebook)
"""
from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

from shared.errors import unknown_choice
from shared.paths import cache_dir

RUNS, TRAINING_ARM = "runs", "training-arm"
CODE = {RUNS: "plench.protocol", TRAINING_ARM: "plench.reports"}  # the module that trains a run of each kind
ROOT = "plench-sweeps"


@cache
def _code(module: str) -> str:
    from shared.cache import code_fingerprint

    return code_fingerprint(importlib.import_module(module))[:12]


def sweep_dir(kind: str = RUNS, *, own: str | None = None) -> Path:
    """The sweep folder of ``kind`` (``RUNS`` or ``TRAINING_ARM``) for the code checked out now: the one every
    notebook shares, or with ``own`` (a notebook stem) that notebook's own (for sweeps that stack runs)."""
    if kind not in CODE:
        raise unknown_choice("Plench sweep kind", kind, CODE)
    return cache_dir() / ROOT / (own or "shared") / f"{kind}-{_code(CODE[kind])}"


def stacks(batched) -> bool:
    """Whether a sweep with this ``batched`` setting may stack runs (``protocol.sweep_tasks``): then it needs a
    folder of its own (``sweep_dir(own=...)``)."""
    return batched is not False


def jobs_dir(notebook: str) -> Path:
    """Submitit's logs and the ledger of Slurm jobs in flight for ``notebook``'s sweeps (``protocol.sweep``'s
    ``jobs_dir``): one per notebook, since notebooks share the run folders but each collects its own jobs."""
    return cache_dir() / ROOT / notebook / ".submitit"
