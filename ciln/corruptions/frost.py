"""Frost textures for the frost corruption.

The six photographs of CIFAR-10-C ship inside the ``imagecorruptions`` wheel (Apache-2.0), which
``make setup`` installs without dependencies only for these files (its code is never imported). If the
files are absent, a procedural texture is used instead and ``frost_source()`` says so: it is *not* the
photographs, so frost results then differ from the paper's protocol.
"""
from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import numpy as np

from ciln.corruptions.primitives import plasma_fractal

FROST_FILES = ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg", "frost6.jpg")


def frost_dir() -> Path | None:
    spec = importlib.util.find_spec("imagecorruptions")  # finds the folder without importing the package
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(spec.submodule_search_locations[0]) / "frost"
    return folder if all((folder / f).exists() for f in FROST_FILES) else None


def frost_source() -> str:
    folder = frost_dir()
    return f"photographs from {folder}" if folder else "procedural fallback (imagecorruptions wheel not installed)"


@lru_cache(maxsize=1)
def frost_textures() -> tuple[np.ndarray, ...]:
    """The six frost textures as RGB uint8 arrays (H, W, 3), at their original size."""
    from PIL import Image

    folder = frost_dir()
    if folder is None:
        return tuple(procedural_frost(np.random.default_rng(1000 + i)) for i in range(len(FROST_FILES)))
    return tuple(np.asarray(Image.open(folder / name).convert("RGB")) for name in FROST_FILES)


def procedural_frost(rng: np.random.Generator, size: int = 256) -> np.ndarray:
    """A pale, crystalline texture: sharpened fractal ridges tinted white-blue (uint8, size x size x 3)."""
    ridges = 1 - np.abs(2 * plasma_fractal(rng, size, 1.6) - 1)
    ridges = np.clip((ridges - 0.55) / 0.45, 0, 1) ** 1.5
    tint = np.array([0.85, 0.92, 1.0])
    return np.clip(ridges[..., None] * tint * 255, 0, 255).astype(np.uint8)
