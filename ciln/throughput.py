"""Per-image throughput of CILN's corruptions against the ``imagecorruptions`` package, in one run.

``imagecorruptions`` (bethgelab, PyPI) implements 15 ImageNet-C corruptions one image at a time with
ImageNet-C severity constants; ours are batched with CIFAR-10-C constants. The comparison is of speed
only, on the same images at the same size and severity. Two of its functions do not run on current
libraries (``fog`` uses ``np.float_``, removed in NumPy 2; ``glass_blur`` passes ``multichannel``, removed
from scikit-image): they are reported as failing. Its module imports ``pkg_resources`` only to locate its
frost files; setuptools >= 81 no longer ships it, so a one-function stand-in is registered first.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd

from ciln.corruptions import CORRUPTIONS, corrupt


def import_imagecorruptions():
    """The ``imagecorruptions`` package, or None if it is not installed."""
    if importlib.util.find_spec("imagecorruptions") is None:
        return None
    if importlib.util.find_spec("pkg_resources") is None and "pkg_resources" not in sys.modules:
        shim = types.ModuleType("pkg_resources")
        shim.resource_filename = lambda package, name: str(Path(importlib.util.find_spec(package).origin).parent / name)
        sys.modules["pkg_resources"] = shim
    return importlib.import_module("imagecorruptions")


def _images_per_second(fn, n: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return n / best


def throughput(images: np.ndarray, severity: int = 3, repeats: int = 2, corruptions=None) -> pd.DataFrame:
    """Images per second of ours (batched) and of ``imagecorruptions.corrupt`` (a loop over images), best of
    ``repeats``; both include the conversion to uint8. ``images``: uint8 (n, 32, 32, 3).
    """
    theirs = import_imagecorruptions()
    names = corruptions or list(CORRUPTIONS["cifar10"])
    rows = []
    for name in names:
        row = {"corruption": name, "images": len(images), "severity": severity,
               "ours (images/s)": _images_per_second(
                   lambda: corrupt("cifar10", images, name, severity, split="benchmark"), len(images), repeats)}
        if theirs is None or name not in theirs.get_corruption_names("common"):
            row.update({"imagecorruptions (images/s)": np.nan, "note": "not installed" if theirs is None else "not implemented"})
        else:
            np.random.seed(0)
            try:
                rate = _images_per_second(
                    lambda: [theirs.corrupt(im, severity, corruption_name=name) for im in images], len(images), repeats)
                row.update({"imagecorruptions (images/s)": rate, "note": ""})
            except Exception as e:  # report, do not hide, what no longer runs
                row.update({"imagecorruptions (images/s)": np.nan, "note": f"fails: {type(e).__name__}: {str(e)[:60]}"})
        rows.append(row)
    table = pd.DataFrame(rows)
    table["speed-up"] = table["ours (images/s)"] / table["imagecorruptions (images/s)"]
    return table
