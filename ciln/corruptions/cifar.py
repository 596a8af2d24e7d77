"""The 15 CIFAR-10-C corruptions with CIFAR-10-C severity constants, as CILN's code applies them.

Every function maps a batch of uint8 RGB images (n, 32, 32, 3) and one Generator per image to floats in
[0, 255]; the caller clips and casts. ``PARAMS[name]`` lists the constants of severities 1..5; the
keyword ``params`` replaces that list (e.g. ImageNet-C's constants, to time the same work as the
``imagecorruptions`` package).

The operators follow CILN's released code (sh-islam/ciln-bench, ``code/corrupt/canonical/cifar_funcs.py``),
which produced the paper's benchmark. Two of its operators depart from the CIFAR-10-C code it cites
(hendrycks/robustness, ``ImageNet-C/create_c/make_cifar_c.py``); CIFAR-10-C's behaviour is one option away
(CILN's setting ``corruption_options`` passes it to every call, see ciln/profiles.yaml):

* ``glass_blur(..., swap="true")`` (default): the two pixels are exchanged, as CILN's code does with explicit
  ``.copy()``. ``swap="copy"``: CIFAR-10-C's pixel "swap" is a tuple assignment of numpy views on an RGB
  array, so it copies one pixel onto the other (see ``primitives.glass_swaps``), a weaker corruption (mean
  |change| about 0.7x at severity 1).
* ``frost(..., texture_scale=1)`` (default): a 32x32 crop of the full-size photographs, as CILN's code.
  ``texture_scale=0.2``: the photographs shrunk to 0.2x before the crop, as CIFAR-10-C (a 5x finer texture).
"""
from __future__ import annotations

import io

import cv2
import numpy as np
from PIL import Image
from scipy.ndimage import map_coordinates
from skimage.color import hsv2rgb, rgb2hsv
from skimage.filters import gaussian

from ciln.corruptions.frost import frost_textures
from ciln.corruptions.primitives import (
    clipped_zoom, clipped_zoom_batch, disk_kernel, glass_swaps, motion_blur, plasma_fractal,
)
from shared.errors import ConfigError, unknown_choice

SIZE = 32
PARAMS = {
    "gaussian_noise": [0.04, 0.06, 0.08, 0.09, 0.10],
    "shot_noise": [500, 250, 100, 75, 50],
    "impulse_noise": [0.01, 0.02, 0.03, 0.05, 0.07],
    "defocus_blur": [(0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1)],
    "glass_blur": [(0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2)],
    "motion_blur": [(6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5)],
    "zoom_blur": [1.06, 1.11, 1.16, 1.21, 1.26],
    "snow": [
        (0.1, 0.2, 1, 0.6, 8, 3, 0.95), (0.1, 0.2, 1, 0.5, 10, 4, 0.9), (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
        (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85), (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8),
    ],
    "frost": [(1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45)],
    "fog": [(0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75)],
    "brightness": [0.05, 0.1, 0.15, 0.2, 0.3],
    "contrast": [0.75, 0.5, 0.4, 0.3, 0.15],
    "elastic_transform": [
        (SIZE * a, SIZE * s, SIZE * f)
        for a, s, f in [(0, 0, 0.08), (0.05, 0.2, 0.07), (0.08, 0.06, 0.06), (0.1, 0.04, 0.05), (0.1, 0.03, 0.03)]
    ],
    "pixelate": [0.95, 0.9, 0.85, 0.75, 0.65],
    "jpeg_compression": [80, 65, 58, 50, 40],
}
FAMILIES = {
    "Noise": ("gaussian_noise", "shot_noise", "impulse_noise"),
    "Blur": ("defocus_blur", "glass_blur", "motion_blur", "zoom_blur"),
    "Weather": ("snow", "frost", "fog"),
    "Geometric": ("elastic_transform",),
    "Digital": ("brightness", "contrast", "jpeg_compression", "pixelate"),
}


def _unit(images: np.ndarray) -> np.ndarray:
    return images.astype(np.float64) / 255.0


def _constant(name: str, severity: int, params=None):
    """The constant of ``severity`` from ``params`` (one entry per severity), by default ``PARAMS[name]``."""
    return (PARAMS[name] if params is None else params)[severity - 1]


def gaussian_noise(images, severity, rngs, *, params=None):
    sigma = _constant("gaussian_noise", severity, params)
    x = _unit(images)
    noise = np.stack([rng.normal(0.0, sigma, x.shape[1:]) for rng in rngs])
    return np.clip(x + noise, 0, 1) * 255


def shot_noise(images, severity, rngs, *, params=None):
    c = _constant("shot_noise", severity, params)
    x = _unit(images)
    return np.clip(np.stack([rng.poisson(xi * c) / c for xi, rng in zip(x, rngs)]), 0, 1) * 255


def impulse_noise(images, severity, rngs, *, params=None):
    amount = _constant("impulse_noise", severity, params)
    x = _unit(images)
    u = np.stack([rng.random(x.shape[1:]) for rng in rngs])
    x = np.where(u < amount / 2, 1.0, x)
    x = np.where((u >= amount / 2) & (u < amount), 0.0, x)
    return x * 255


def defocus_blur(images, severity, rngs=None, *, params=None):
    kernel = disk_kernel(*_constant("defocus_blur", severity, params))
    x = _unit(images).astype(np.float32)
    out = np.stack([cv2.filter2D(xi, -1, kernel) for xi in x])
    return np.clip(out, 0, 1) * 255


GLASS_SWAPS = {"copy": "copy", "true": "swap"}  # option value -> primitives.glass_swaps mode


def glass_blur(images, severity, rngs, *, params=None, swap="true"):
    """Blur, shuffle pixels locally, blur again. ``swap="true"`` (default): the two pixels are exchanged, as
    CILN's code does; ``swap="copy"``: each visited pixel takes its neighbour's value, as CIFAR-10-C's code."""
    if swap not in GLASS_SWAPS:
        raise unknown_choice("glass blur swap", swap, GLASS_SWAPS)
    sigma, delta, passes = _constant("glass_blur", severity, params)
    blurred = np.stack([(gaussian(xi / 255.0, sigma=sigma, channel_axis=-1) * 255).astype(np.uint8)
                        for xi in images])
    positions = (SIZE - 2 * delta) ** 2
    offsets = np.stack([rng.integers(-delta, delta, size=(passes * positions, 2)) for rng in rngs])
    swapped = glass_swaps(blurred, delta, offsets, mode=GLASS_SWAPS[swap])
    out = np.stack([gaussian(xi / 255.0, sigma=sigma, channel_axis=-1) for xi in swapped])
    return np.clip(out, 0, 1) * 255


def motion_blur_(images, severity, rngs, *, params=None):
    radius, sigma = _constant("motion_blur", severity, params)
    out = [motion_blur(xi.astype(np.float64), radius, sigma, rng.uniform(-45, 45)) for xi, rng in zip(images, rngs)]
    return np.clip(np.stack(out), 0, 255)


def zoom_blur(images, severity, rngs=None, *, params=None):
    """Average of zooms ``arange(1, end, step)``; a constant is ``end`` (step 0.01) or ``(end, step)``."""
    end = _constant("zoom_blur", severity, params)
    end, step = (end, 0.01) if np.isscalar(end) else end
    zooms = np.arange(1, end, step)
    x = _unit(images)
    total = np.zeros_like(x)
    for z in zooms:
        total += clipped_zoom_batch(x, z)
    return np.clip((x + total) / (len(zooms) + 1), 0, 1) * 255


def snow(images, severity, rngs, *, params=None):
    mu, sd, zoom, threshold, radius, sigma, blend = _constant("snow", severity, params)
    x = _unit(images)
    out = np.empty_like(x)
    for i, (xi, rng) in enumerate(zip(x, rngs)):
        layer = clipped_zoom(rng.normal(mu, sd, (SIZE, SIZE))[..., None], zoom)[..., 0]
        layer[layer < threshold] = 0
        layer = np.round(np.clip(layer, 0, 1) * 255)  # the official code blurs an 8-bit image
        layer = np.clip(motion_blur(layer, radius, sigma, rng.uniform(-135, -45)), 0, 255).round() / 255.0
        grey = cv2.cvtColor(xi.astype(np.float32), cv2.COLOR_RGB2GRAY)[..., None]
        xi = blend * xi + (1 - blend) * np.maximum(xi, grey * 1.5 + 0.5)
        out[i] = np.clip(xi + layer[..., None] + np.rot90(layer, k=2)[..., None], 0, 1)
    return out * 255


def frost(images, severity, rngs, *, params=None, texture_scale=1.0):
    """a * image + b * a random 32x32 crop of one of five frost photographs, resized by ``texture_scale``
    (1: full size, as CILN's code; 0.2: shrunk, as CIFAR-10-C's)."""
    a, b = _constant("frost", severity, params)
    textures = frost_textures(float(texture_scale))
    if min(min(t.shape[:2]) for t in textures[:5]) <= SIZE:
        raise ConfigError(f"texture_scale {texture_scale} leaves frost textures of {SIZE} px or less to crop from")
    out = np.empty(images.shape, dtype=np.float64)
    for i, (xi, rng) in enumerate(zip(images, rngs)):
        tex = textures[rng.integers(0, 5)]  # frost6 is never drawn, as in the official code
        top = rng.integers(0, tex.shape[0] - SIZE)
        left = rng.integers(0, tex.shape[1] - SIZE)
        out[i] = a * xi.astype(np.float64) + b * tex[top : top + SIZE, left : left + SIZE]
    return np.clip(out, 0, 255)


def fog(images, severity, rngs, *, params=None):
    strength, decay = _constant("fog", severity, params)
    x = _unit(images)
    out = np.empty_like(x)
    for i, (xi, rng) in enumerate(zip(x, rngs)):
        peak = xi.max()
        xi = xi + strength * plasma_fractal(rng, 32, decay)[:SIZE, :SIZE, None]
        out[i] = np.clip(xi * peak / (peak + strength), 0, 1)
    return out * 255


def brightness(images, severity, rngs=None, *, params=None):
    hsv = rgb2hsv(_unit(images))
    hsv[..., 2] = np.clip(hsv[..., 2] + _constant("brightness", severity, params), 0, 1)
    return np.clip(hsv2rgb(hsv), 0, 1) * 255


def contrast(images, severity, rngs=None, *, params=None):
    x = _unit(images)
    means = x.mean(axis=(1, 2), keepdims=True)
    return np.clip((x - means) * _constant("contrast", severity, params) + means, 0, 1) * 255


def elastic_transform(images, severity, rngs, *, params=None):
    alpha, sigma, affine = _constant("elastic_transform", severity, params)
    x = _unit(images).astype(np.float32)
    centre = np.float32([SIZE, SIZE]) // 2
    square = SIZE // 3
    src = np.float32([centre + square, [centre[0] + square, centre[1] - square], centre - square])
    yy, xx, zz = np.meshgrid(np.arange(SIZE), np.arange(SIZE), np.arange(3), indexing="ij")
    out = np.empty_like(x)
    for i, (xi, rng) in enumerate(zip(x, rngs)):
        dst = src + rng.uniform(-affine, affine, size=src.shape).astype(np.float32)
        warped = cv2.warpAffine(xi, cv2.getAffineTransform(src, dst), (SIZE, SIZE), borderMode=cv2.BORDER_REFLECT_101)
        dx = gaussian(rng.uniform(-1, 1, (SIZE, SIZE)), sigma, mode="reflect", truncate=3) * alpha
        dy = gaussian(rng.uniform(-1, 1, (SIZE, SIZE)), sigma, mode="reflect", truncate=3) * alpha
        coords = [(yy + dy[..., None]).ravel(), (xx + dx[..., None]).ravel(), zz.ravel()]
        out[i] = map_coordinates(warped, coords, order=1, mode="reflect").reshape(xi.shape)
    return np.clip(out, 0, 1) * 255


def pixelate(images, severity, rngs=None, *, params=None):
    side = int(SIZE * _constant("pixelate", severity, params))
    out = [np.asarray(Image.fromarray(xi).resize((side, side), Image.BOX).resize((SIZE, SIZE), Image.BOX))
           for xi in images]
    return np.stack(out).astype(np.float64)


def jpeg_compression(images, severity, rngs=None, *, params=None):
    quality = _constant("jpeg_compression", severity, params)
    out = []
    for xi in images:
        buffer = io.BytesIO()
        Image.fromarray(xi).save(buffer, "JPEG", quality=quality)
        out.append(np.asarray(Image.open(buffer)))
    return np.stack(out).astype(np.float64)


FUNCTIONS = {
    "gaussian_noise": gaussian_noise, "shot_noise": shot_noise, "impulse_noise": impulse_noise,
    "defocus_blur": defocus_blur, "glass_blur": glass_blur, "motion_blur": motion_blur_, "zoom_blur": zoom_blur,
    "snow": snow, "frost": frost, "fog": fog, "brightness": brightness, "contrast": contrast,
    "elastic_transform": elastic_transform, "pixelate": pixelate, "jpeg_compression": jpeg_compression,
}
DETERMINISTIC = {"defocus_blur", "zoom_blur", "brightness", "contrast", "pixelate", "jpeg_compression"}
