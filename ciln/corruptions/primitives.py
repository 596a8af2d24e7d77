"""Building blocks of the image corruptions (CIFAR-10-C / MNIST-C style), written for numpy + OpenCV.

All randomness comes from the per-item ``numpy.random.Generator`` passed in; nothing touches global state.
ImageMagick's motion blur (used by the official code through Wand) is re-implemented with numpy as a
one-sided Gaussian line kernel, so pixels differ slightly from the authors' release.
"""
from __future__ import annotations

import math

import cv2
import numpy as np
from scipy.ndimage import zoom as nd_zoom


def disk_kernel(radius: float, alias_blur: float) -> np.ndarray:
    """Normalised disk of ``radius`` on a 17x17 grid (larger radius: its own grid), Gaussian-smoothed."""
    if radius <= 8:
        grid, ksize = np.arange(-8, 9), (3, 3)
    else:
        grid, ksize = np.arange(-radius, radius + 1), (5, 5)
    xx, yy = np.meshgrid(grid, grid)
    disk = ((xx**2 + yy**2) <= radius**2).astype(np.float32)
    disk /= disk.sum()
    return cv2.GaussianBlur(disk, ksize=ksize, sigmaX=alias_blur)


def clipped_zoom(img: np.ndarray, factor: float) -> np.ndarray:
    """Zoom into the centre of ``img`` (H, W[, C]) by ``factor`` >= 1 and crop back to (H, W)."""
    h = img.shape[0]
    ch = int(np.ceil(h / factor))
    top = (h - ch) // 2
    crop = img[top : top + ch, top : top + ch]
    zoomed = nd_zoom(crop, (factor, factor) + (1,) * (img.ndim - 2), order=1)
    trim = (zoomed.shape[0] - h) // 2
    return zoomed[trim : trim + h, trim : trim + h]


def linear_zoom_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) matrix of 1-D linear interpolation with end points aligned (``scipy.ndimage.zoom``, order 1)."""
    coords = np.arange(n_out) * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(1)
    low = np.clip(np.floor(coords).astype(int), 0, n_in - 1)
    high = np.minimum(low + 1, n_in - 1)
    frac = coords - low
    matrix = np.zeros((n_out, n_in))
    matrix[np.arange(n_out), low] += 1 - frac
    matrix[np.arange(n_out), high] += frac
    return matrix


def clipped_zoom_batch(images: np.ndarray, factor: float) -> np.ndarray:
    """``clipped_zoom`` of every image in a batch (n, H, W[, C]), as two matrix products (same values)."""
    h = images.shape[1]
    ch = int(np.ceil(h / factor))
    top = (h - ch) // 2
    crop = images[:, top : top + ch, top : top + ch]
    size = int(round(ch * factor))
    interp = linear_zoom_matrix(ch, size)
    trim = (size - h) // 2
    interp = interp[trim : trim + h]
    planes = np.moveaxis(crop, (1, 2), (-2, -1))  # (n, [C,] ch, ch)
    return np.moveaxis(interp @ planes @ interp.T, (-2, -1), (1, 2))


def plasma_fractal(rng: np.random.Generator, mapsize: int = 32, wibble_decay: float = 3.0) -> np.ndarray:
    """A (mapsize, mapsize) diamond-square height map scaled to [0, 1] (the fog texture).

    Each level fills square centres, then diamond (edge) points, with the mean of their four neighbours
    plus uniform noise of amplitude ``wibble``; ``wibble`` starts at 100 and is divided by ``wibble_decay``
    at every level, so lower decay gives rougher fog.
    """
    if mapsize & (mapsize - 1):
        raise ValueError(f"mapsize must be a power of two, got {mapsize}")
    grid = np.zeros((mapsize, mapsize))
    step, wibble = mapsize, 100.0

    def noisy_mean(total: np.ndarray) -> np.ndarray:
        return total / 4 + wibble * rng.uniform(-wibble, wibble, total.shape)

    while step >= 2:
        half = step // 2
        corners = grid[0:mapsize:step, 0:mapsize:step]
        square = corners + np.roll(corners, -1, axis=0)
        square = square + np.roll(square, -1, axis=1)
        grid[half:mapsize:step, half:mapsize:step] = noisy_mean(square)
        centres = grid[half:mapsize:step, half:mapsize:step]
        corners = grid[0:mapsize:step, 0:mapsize:step]
        left = centres + np.roll(centres, 1, axis=0) + corners + np.roll(corners, -1, axis=1)
        grid[0:mapsize:step, half:mapsize:step] = noisy_mean(left)
        top = centres + np.roll(centres, 1, axis=1) + corners + np.roll(corners, -1, axis=0)
        grid[half:mapsize:step, 0:mapsize:step] = noisy_mean(top)
        step //= 2
        wibble /= wibble_decay
    grid -= grid.min()
    return grid / grid.max()


def _shift_clamped(img: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """``img`` moved by (dy, dx) pixels, edges repeated (ImageMagick's default virtual pixels)."""
    h, w = img.shape[:2]
    rows = np.clip(np.arange(h) - dy, 0, h - 1)
    cols = np.clip(np.arange(w) - dx, 0, w - 1)
    return img[rows][:, cols]


def motion_blur(img: np.ndarray, radius: int, sigma: float, angle: float) -> np.ndarray:
    """Motion blur of a float image (H, W[, C]) along ``angle`` degrees.

    Like ImageMagick's MotionBlurImage: a one-sided line kernel of width ``2 * radius + 1`` with Gaussian
    weights ``exp(-i^2 / (2 sigma^2))``, so each pixel averages the pixels trailing it along the angle.
    """
    width = 2 * radius + 1
    weights = np.exp(-(np.arange(width) ** 2) / (2 * sigma**2))
    weights /= weights.sum()
    direction = (width * math.sin(math.radians(angle)), width * math.cos(math.radians(angle)))
    norm = math.hypot(*direction)
    out = np.zeros_like(img, dtype=np.float64)
    for i, weight in enumerate(weights):
        dy = -math.ceil(i * direction[0] / norm - 0.5)
        dx = -math.ceil(i * direction[1] / norm - 0.5)
        if abs(dy) >= img.shape[0] or abs(dx) >= img.shape[1]:
            break
        out += weight * _shift_clamped(img, dy, dx)
    return out


def glass_swaps(images: np.ndarray, delta: int, offsets: np.ndarray, keep: np.ndarray | None = None,
                mode: str = "swap") -> np.ndarray:
    """The local pixel shuffling of glass blur, for a batch (n, H, W[, C]) with per-image random draws.

    For each of ``iterations`` passes, positions (h, w) run from ``H - delta`` down to ``delta + 1``
    (rows outer, columns inner) and pixel (h, w) is exchanged with the one at (h + dy, w + dx).
    ``offsets`` (n, passes * positions, 2) holds each image's (dx, dy); ``keep`` (same leading shape,
    bool) optionally skips positions (MNIST's coin flip).

    ``mode="swap"``: the two pixels are swapped. ``mode="copy"``: pixel (h, w) takes the value of
    (h + dy, w + dx) and that pixel is left as it was. The official CIFAR-10-C code
    (hendrycks/robustness, ``make_cifar_c.py``) writes the swap as a tuple assignment on an (H, W, 3)
    array, ``x[h, w], x[h', w'] = x[h', w'], x[h, w]``: both right-hand values are *views*, so after the
    first assignment the second view already holds the copied pixel and writes it back unchanged: colour
    images get "copy". On a grey (H, W) image the values are scalars and the swap is real (MNIST-C).
    Copies whose offsets are all <= 0 (CIFAR-10-C's delta = 1) read only positions not yet written in
    their pass, so each pass is one gather; otherwise positions are processed in order, vectorised
    across images.
    """
    if mode not in ("swap", "copy"):
        raise ValueError(f"mode must be 'swap' or 'copy', got {mode!r}")
    out = images.copy()
    n, h, w = images.shape[:3]
    positions = [(r, c) for r in range(h - delta, delta, -1) for c in range(w - delta, delta, -1)]
    passes = offsets.shape[1] // len(positions)
    rows = np.arange(n)
    if mode == "copy" and keep is None and offsets.max(initial=0) <= 0:
        r_idx = np.array([r for r, _ in positions])
        c_idx = np.array([c for _, c in positions])
        for p in range(passes):
            block = slice(p * len(positions), (p + 1) * len(positions))
            dx, dy = offsets[:, block, 0], offsets[:, block, 1]
            out[:, r_idx, c_idx] = out[rows[:, None], r_idx + dy, c_idx + dx]  # the right side is a copy
        return out
    k = 0
    for _ in range(passes):
        for r, c in positions:
            dx, dy = offsets[:, k, 0], offsets[:, k, 1]
            sel = rows if keep is None else rows[keep[:, k]]
            if len(sel):
                r2, c2 = r + dy[sel], c + dx[sel]
                first = out[sel, r, c].copy() if mode == "swap" else None
                out[sel, r, c] = out[sel, r2, c2]
                if mode == "swap":
                    out[sel, r2, c2] = first
            k += 1
    return out
