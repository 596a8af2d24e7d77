"""Frost textures for the frost corruption.

The six photographs of CIFAR-10-C ship inside the ``imagecorruptions`` wheel (Apache-2.0), which
``make setup`` installs without dependencies only for these files (its code is not imported here). If the
files are absent, a procedural texture is used instead and ``frost_source()`` says so: it is *not* the
photographs, so frost results then differ from the paper's protocol.

CILN's code crops 32x32 from the full-size photographs (``frost_textures(1)``). CIFAR-10-C
(hendrycks/robustness, ``make_cifar_c.py``) shrinks each photograph to 0.2x with
``cv2.resize(frost, (0, 0), fx=0.2, fy=0.2)`` (bilinear, ``INTER_LINEAR``) before taking a random 32x32
crop, so the crystals are on the scale of a 32x32 image; ``frost_textures(CIFAR10C_TEXTURE_SCALE)`` does the
same with the same OpenCV call. (At exactly 0.2x, OpenCV's bilinear rule samples source pixel ``5i + 2``
with weight 1, so the result is that decimation, without anti-aliasing.) The procedural fallback is
drawn at a photograph-like size (256 px, correlation length comparable to the photographs') and goes
through the same shrink.
"""
from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np

from ciln.corruptions.primitives import plasma_fractal

FROST_FILES = ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg", "frost6.jpg")
CIFAR10C_TEXTURE_SCALE = 0.2  # CIFAR-10-C's shrink of the photographs before cropping (CILN's code: none)


def frost_dir() -> Path | None:
    spec = importlib.util.find_spec("imagecorruptions")  # finds the folder without importing the package
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(spec.submodule_search_locations[0]) / "frost"
    return folder if all((folder / f).exists() for f in FROST_FILES) else None


def frost_source() -> str:
    folder = frost_dir()
    if folder:
        return f"photographs from {folder}"
    return "procedural fallback (imagecorruptions wheel not installed)"


@lru_cache(maxsize=4)
def frost_textures(scale: float = 1.0) -> tuple[np.ndarray, ...]:
    """The six frost textures as read-only RGB uint8 arrays (H, W, 3), resized by ``scale`` (1: original size).

    Resizing uses ``cv2.resize(..., fx=scale, fy=scale)`` with OpenCV's default bilinear interpolation,
    as the official CIFAR-10-C code; per-channel, so RGB and BGR order give the same pixels.
    """
    from PIL import Image

    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    folder = frost_dir()
    if folder is None:
        textures = [procedural_frost(np.random.default_rng(1000 + i)) for i in range(len(FROST_FILES))]
    else:
        textures = [np.asarray(Image.open(folder / name).convert("RGB")) for name in FROST_FILES]
    if scale != 1:
        textures = [cv2.resize(np.ascontiguousarray(t), (0, 0), fx=scale, fy=scale) for t in textures]
    out = []
    for t in textures:
        t = np.array(t, dtype=np.uint8)
        t.flags.writeable = False
        out.append(t)
    return tuple(out)


def procedural_frost(rng: np.random.Generator, size: int = 256) -> np.ndarray:
    """A pale, crystalline texture: sharpened fractal ridges tinted white-blue (uint8, size x size x 3)."""
    ridges = 1 - np.abs(2 * plasma_fractal(rng, size, 1.6) - 1)
    ridges = np.clip((ridges - 0.55) / 0.45, 0, 1) ** 1.5
    tint = np.array([0.85, 0.92, 1.0])
    return np.clip(ridges[..., None] * tint * 255, 0, 255).astype(np.uint8)
