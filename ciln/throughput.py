"""Per-image throughput of CILN's corruptions against the ``imagecorruptions`` package, like with like.

``imagecorruptions`` (bethgelab, PyPI) implements 15 ImageNet-C corruptions one image at a time with
ImageNet-C severity constants; ours are batched and use CIFAR-10-C constants. Constants change the work
(glass blur at ImageNet-C severity 3 makes 2,352 pixel moves per 32x32 image, at CIFAR-10-C severity 3
900; motion blur's kernel is 31 px wide instead of 13), so the speed-up is measured with *our operators
run on imagecorruptions' own constants* (``IMAGENET_C``, copied from its ``corruptions.py``), on the same
images at the same size and severity. Our speed with CIFAR-10-C constants, what the benchmark runs, is a
separate column. ``elastic_transform`` is not compared: imagecorruptions' version is another algorithm
(no random affine step, other constants). Two of its functions do not run on current libraries
(``fog`` uses ``np.float_``, removed in NumPy 2; ``glass_blur`` passes ``multichannel``, removed from
scikit-image): they are reported as failing.

Its module imports ``pkg_resources`` only to locate its frost files; setuptools >= 81 no longer ships
it, so a one-function stand-in is registered while it is imported, and removed afterwards.
"""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import time
import types
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ciln.corruptions import CORRUPTIONS, corrupt

# imagecorruptions 1.1.2, ``corruptions.py``: the ImageNet-C constants of severities 1..5, in the format of
# ``ciln.corruptions.cifar.PARAMS`` (zoom blur as (end, step) of ``arange(1, end, step)``).
IMAGENET_C = {
    "gaussian_noise": [0.08, 0.12, 0.18, 0.26, 0.38],
    "shot_noise": [60, 25, 12, 5, 3],
    "impulse_noise": [0.03, 0.06, 0.09, 0.17, 0.27],
    "defocus_blur": [(3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)],
    "glass_blur": [(0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2)],
    "motion_blur": [(10, 3), (15, 5), (15, 8), (15, 12), (20, 15)],
    "zoom_blur": [(1.11, 0.01), (1.16, 0.01), (1.21, 0.02), (1.26, 0.02), (1.31, 0.03)],
    "snow": [
        (0.1, 0.3, 3, 0.5, 10, 4, 0.8), (0.2, 0.3, 2, 0.5, 12, 4, 0.7), (0.55, 0.3, 4, 0.9, 12, 8, 0.7),
        (0.55, 0.3, 4.5, 0.85, 12, 8, 0.65), (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55),
    ],
    "frost": [(1, 0.4), (0.8, 0.6), (0.7, 0.7), (0.65, 0.7), (0.6, 0.75)],
    "fog": [(1.5, 2), (2.0, 2), (2.5, 1.7), (2.5, 1.5), (3.0, 1.4)],
    "brightness": [0.1, 0.2, 0.3, 0.4, 0.5],
    "contrast": [0.4, 0.3, 0.2, 0.1, 0.05],
    "pixelate": [0.6, 0.5, 0.4, 0.3, 0.25],
    "jpeg_compression": [25, 18, 15, 10, 7],
}
# Where the two implementations still differ in what they do, besides speed.
DIFFERENCES = {
    "elastic_transform": "not compared: imagecorruptions' elastic transform is another algorithm (no random affine)",
    "frost": "imagecorruptions reads and rescales a photograph for every image; ours reuse cached textures",
    "pixelate": "imagecorruptions upsamples with NEAREST, ours (CIFAR-10-C) with BOX",
    "zoom_blur": "imagecorruptions crops its zooms at the corner, ours (CIFAR-10-C) at the centre",
}
SPEED_UP = "speed-up"

_MODULE = None


def import_imagecorruptions():
    """The ``imagecorruptions`` package, or None if it is not installed; the same module on every call."""
    global _MODULE
    if _MODULE is not None:
        return _MODULE
    if "imagecorruptions" in sys.modules:
        _MODULE = sys.modules["imagecorruptions"]
        return _MODULE
    if importlib.util.find_spec("imagecorruptions") is None:
        return None
    shim = None
    if "pkg_resources" not in sys.modules and importlib.util.find_spec("pkg_resources") is None:
        shim = types.ModuleType("pkg_resources")
        shim.__spec__ = importlib.machinery.ModuleSpec("pkg_resources", None)
        shim.resource_filename = lambda package, name: str(Path(importlib.util.find_spec(package).origin).parent / name)
        sys.modules["pkg_resources"] = shim
    try:
        with warnings.catch_warnings():  # it imports from scipy.ndimage.interpolation (deprecated)
            warnings.simplefilter("ignore", DeprecationWarning)
            _MODULE = importlib.import_module("imagecorruptions")
    finally:
        if shim is not None and sys.modules.get("pkg_resources") is shim:
            del sys.modules["pkg_resources"]  # its functions keep their own reference to resource_filename
    return _MODULE


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

    ``ours (images/s)`` runs our operators with imagecorruptions' ImageNet-C constants (``IMAGENET_C``), so
    ``speed-up`` = ours / imagecorruptions compares the same work; ``ours, CIFAR-10-C constants (images/s)``
    is what the benchmark runs. ``compared`` is False where the algorithms differ or theirs fails.
    """
    theirs = import_imagecorruptions()
    names = corruptions or list(CORRUPTIONS["cifar10"])
    rows = []
    for name in names:
        n = len(images)
        row = {"corruption": name, "images": n, "severity": severity}
        row["ours, CIFAR-10-C constants (images/s)"] = _images_per_second(
            lambda: corrupt("cifar10", images, name, severity, split="noisy_label_train"), n, repeats)
        if name in IMAGENET_C:
            options = {"params": IMAGENET_C[name]}
            row["constants"] = f"ImageNet-C {IMAGENET_C[name][severity - 1]}"
            row["ours (images/s)"] = _images_per_second(
                lambda: corrupt("cifar10", images, name, severity, split="noisy_label_train", options=options), n, repeats)
        else:
            row["constants"] = "—"
            row["ours (images/s)"] = np.nan
        note = DIFFERENCES.get(name, "")
        if theirs is None or name not in theirs.get_corruption_names("common"):
            row["imagecorruptions (images/s)"] = np.nan
            note = "imagecorruptions not installed" if theirs is None else "not in imagecorruptions"
        else:
            np.random.seed(0)
            try:
                row["imagecorruptions (images/s)"] = _images_per_second(
                    lambda: [theirs.corrupt(im, severity, corruption_name=name) for im in images], n, repeats)
            except Exception as e:  # report, do not hide, what no longer runs
                row["imagecorruptions (images/s)"] = np.nan
                note = f"imagecorruptions fails: {type(e).__name__}: {str(e)[:60]}"
        row["note"] = note
        rows.append(row)
    table = pd.DataFrame(rows)
    table[SPEED_UP] = table["ours (images/s)"] / table["imagecorruptions (images/s)"]
    table["compared"] = table[SPEED_UP].notna() & table["corruption"].isin(IMAGENET_C)
    columns = ["corruption", "severity", "images", "constants", "ours (images/s)", "imagecorruptions (images/s)",
               SPEED_UP, "compared", "ours, CIFAR-10-C constants (images/s)", "note"]
    return table[columns]


def speed_summary(table: pd.DataFrame) -> dict:
    """What the throughput table shows, for a claim: faster on k of the n corruptions compared like with like,
    each measured ratio, and what was not compared (and why)."""
    compared = table[table["compared"]]
    faster = compared[SPEED_UP] >= 1
    ratios = ", ".join(f"{c} {r:.2f}x" for c, r in zip(compared["corruption"], compared[SPEED_UP]))
    skipped = ", ".join(f"{c} ({note.split(':')[0] if note else 'not measured'})"
                        for c, note in zip(table.loc[~table["compared"], "corruption"], table.loc[~table["compared"], "note"]))
    detail = f"faster on {int(faster.sum())}/{len(compared)} with the same (ImageNet-C) constants"
    if len(compared):
        detail += f", median {compared[SPEED_UP].median():.2f}x: {ratios}"
    if skipped:
        detail += f"; not compared: {skipped}"
    return {"faster": int(faster.sum()), "compared": len(compared), "holds": bool(len(compared)) and bool(faster.mean() > 0.5),
            "detail": detail}
