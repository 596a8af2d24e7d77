"""Where Plench's trained runs live: sweep folders in the artifact cache, shared by the notebooks where that is exact.

A run's folder is named by the hash of its arguments (``shared.sweep.run_dir_for``), so notebooks whose settings
define the same run train it once and read it after: in the full profile 04's "validation" arm is 3,120 of 03's
ResNet-32 runs. Each run is trained under its lock (``shared.sweep.run_locks``), so two notebooks running at once
never train one run twice; a run one notebook has in flight on Slurm is not submitted by the other (the folder's
ledger of jobs, ``shared.sweep``).

A folder is ``<cache>/plench-sweeps/shared/<kind>-<code>/<data>`` (``shared.paths.cache_dir``: ``$NOISY_CACHE_DIR``
or ``.cache/artifacts``), and a run is read only by what agrees on its code, its data and its own arguments:

* ``<code>``: the code that trains a run of that kind (``plench.protocol`` and what it imports, or
  ``plench.reports`` for the training arm), without the modules that only schedule, lock, log or show progress
  (``INFRASTRUCTURE``). Editing that code starts new folders, as the cache rebuilds its entries.
* ``<data>``: the contents of the datasets the sweep trains on (``data_key``), so runs on other files under the same
  names (the CI rehearsal's stand-ins and the larger ones of ``make rehearse``, a replaced download) are not read.
* the run's folder name, the hash of its ``run_args``. Runs trained as one stack (``batched``: several
  configurations trained as one model, ``protocol.train_runs_batched``) agree with runs trained alone only to float
  rounding and depend on which runs share their stack, so their identity names the stack (``protocol.sweep_args``):
  a notebook reads a stacked run only if it forms the same stack (03's and 04's full ResNet-32 stacks), never a run
  stacked otherwise.

A notebook's own output folder, which the batch runner replaces on every run, never holds the only copy of hours of
training, and a killed notebook keeps every run it finished. Compute nodes of a cluster need the cache on a shared
filesystem where ``flock`` works across nodes (NFSv4, Lustre, GPFS).

========================  ===================================================================================
kind                      runs
========================  ===================================================================================
``RUNS``                  ``protocol.sweep``'s runs (02, 03, 04's "validation" arm); code: ``plench.protocol``
``TRAINING_ARM``          04's "training" arm (``reports.train_with_validation``); code: ``plench.reports``
========================  ===================================================================================

    folder = sweep_dir(RUNS, datasets)                                 # protocol.sweep(out_dir=folder)
"""
from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import numpy as np

from shared.errors import unknown_choice
from shared.paths import REPO_ROOT, cache_dir

RUNS, TRAINING_ARM = "runs", "training-arm"
CODE = {RUNS: "plench.protocol", TRAINING_ARM: "plench.reports"}  # the module that trains a run of each kind
ROOT = "plench-sweeps"
# modules in that code's imports that decide where, when and how visibly a run trains, never its numbers
INFRASTRUCTURE = ("shared/executor.py", "shared/workers.py", "shared/progress.py", "shared/locks.py",
                  "shared/runlog.py", "shared/paths.py", "shared/errors.py")


@cache
def _code(module: str) -> str:
    from shared.codedeps import fingerprint_files, module_closure

    importlib.import_module(module)
    files = [f for f in module_closure([module]) if Path(f).relative_to(REPO_ROOT).as_posix() not in INFRASTRUCTURE]
    return fingerprint_files(files)[:12]


def data_key(datasets: Iterable) -> str:
    """12 hex digits of SHA-256 over the datasets (``plench.data.PLLDataset``), in name order: name, modality,
    steps, classes and every array (features, candidate sets, labels, the fixed test set)."""
    digest = hashlib.sha256()
    for ds in sorted(datasets, key=lambda d: d.name):
        digest.update(json.dumps([ds.name, ds.modality, ds.steps, list(ds.classes)]).encode())
        for array in (ds.X, ds.S, ds.y, *(ds.test or ())):
            array = np.ascontiguousarray(array)
            digest.update(f"{array.dtype.str}{array.shape}".encode())
            digest.update(memoryview(array).cast("B"))
    return digest.hexdigest()[:12]


def sweep_dir(kind: str = RUNS, datasets: Iterable = ()) -> Path:
    """The sweep folder of ``kind`` (``RUNS`` or ``TRAINING_ARM``) for the code checked out now and these
    ``datasets``, which every notebook shares."""
    if kind not in CODE:
        raise unknown_choice("Plench sweep kind", kind, CODE)
    return cache_dir() / ROOT / "shared" / f"{kind}-{_code(CODE[kind])}" / data_key(datasets)
