"""The 15 CIFAR-10-C corruptions with CIFAR-10-C severity constants (CILN's ``cifar_funcs``; spec §3.3).

Every function maps a batch of uint8 RGB images (n, 32, 32, 3) and one Generator per image to floats in
[0, 255]; the caller clips and casts. ``PARAMS[name]`` lists the constants of severities 1..5.
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


def gaussian_noise(images, severity, rngs):
    sigma = PARAMS["gaussian_noise"][severity - 1]
    x = _unit(images)
    noise = np.stack([rng.normal(0.0, sigma, x.shape[1:]) for rng in rngs])
    return np.clip(x + noise, 0, 1) * 255


def shot_noise(images, severity, rngs):
    c = PARAMS["shot_noise"][severity - 1]
    x = _unit(images)
    return np.clip(np.stack([rng.poisson(xi * c) / c for xi, rng in zip(x, rngs)]), 0, 1) * 255


def impulse_noise(images, severity, rngs, amounts=None):
    amount = (amounts or PARAMS["impulse_noise"])[severity - 1]
    x = _unit(images)
    u = np.stack([rng.random(x.shape[1:]) for rng in rngs])
    x = np.where(u < amount / 2, 1.0, x)
    x = np.where((u >= amount / 2) & (u < amount), 0.0, x)
    return x * 255


def defocus_blur(images, severity, rngs=None):
    kernel = disk_kernel(*PARAMS["defocus_blur"][severity - 1])
    x = _unit(images).astype(np.float32)
    out = np.stack([cv2.filter2D(xi, -1, kernel) for xi in x])
    return np.clip(out, 0, 1) * 255


def glass_blur(images, severity, rngs):
    sigma, delta, passes = PARAMS["glass_blur"][severity - 1]
    blurred = np.stack([(gaussian(xi / 255.0, sigma=sigma, channel_axis=-1) * 255).astype(np.uint8)
                        for xi in images])
    positions = (SIZE - 2 * delta) ** 2
    offsets = np.stack([rng.integers(-delta, delta, size=(passes * positions, 2)) for rng in rngs])
    swapped = glass_swaps(blurred, delta, offsets)
    out = np.stack([gaussian(xi / 255.0, sigma=sigma, channel_axis=-1) for xi in swapped])
    return np.clip(out, 0, 1) * 255


def motion_blur_(images, severity, rngs):
    radius, sigma = PARAMS["motion_blur"][severity - 1]
    out = [motion_blur(xi.astype(np.float64), radius, sigma, rng.uniform(-45, 45)) for xi, rng in zip(images, rngs)]
    return np.clip(np.stack(out), 0, 255)


def zoom_blur(images, severity, rngs=None):
    zooms = np.arange(1, PARAMS["zoom_blur"][severity - 1], 0.01)
    x = _unit(images)
    total = np.zeros_like(x)
    for z in zooms:
        total += clipped_zoom_batch(x, z)
    return np.clip((x + total) / (len(zooms) + 1), 0, 1) * 255


def snow(images, severity, rngs):
    mu, sd, zoom, threshold, radius, sigma, blend = PARAMS["snow"][severity - 1]
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


def frost(images, severity, rngs):
    a, b = PARAMS["frost"][severity - 1]
    textures = frost_textures()
    out = np.empty(images.shape, dtype=np.float64)
    for i, (xi, rng) in enumerate(zip(images, rngs)):
        tex = textures[rng.integers(0, 5)]  # frost6 is never drawn, as in the official code
        top = rng.integers(0, tex.shape[0] - SIZE)
        left = rng.integers(0, tex.shape[1] - SIZE)
        out[i] = a * xi.astype(np.float64) + b * tex[top : top + SIZE, left : left + SIZE]
    return np.clip(out, 0, 255)


def fog(images, severity, rngs):
    strength, decay = PARAMS["fog"][severity - 1]
    x = _unit(images)
    out = np.empty_like(x)
    for i, (xi, rng) in enumerate(zip(x, rngs)):
        peak = xi.max()
        xi = xi + strength * plasma_fractal(rng, 32, decay)[:SIZE, :SIZE, None]
        out[i] = np.clip(xi * peak / (peak + strength), 0, 1)
    return out * 255


def brightness(images, severity, rngs=None):
    hsv = rgb2hsv(_unit(images))
    hsv[..., 2] = np.clip(hsv[..., 2] + PARAMS["brightness"][severity - 1], 0, 1)
    return np.clip(hsv2rgb(hsv), 0, 1) * 255


def contrast(images, severity, rngs=None):
    x = _unit(images)
    means = x.mean(axis=(1, 2), keepdims=True)
    return np.clip((x - means) * PARAMS["contrast"][severity - 1] + means, 0, 1) * 255


def elastic_transform(images, severity, rngs):
    alpha, sigma, affine = PARAMS["elastic_transform"][severity - 1]
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


def pixelate(images, severity, rngs=None):
    side = int(SIZE * PARAMS["pixelate"][severity - 1])
    out = [np.asarray(Image.fromarray(xi).resize((side, side), Image.BOX).resize((SIZE, SIZE), Image.BOX))
           for xi in images]
    return np.stack(out).astype(np.float64)


def jpeg_compression(images, severity, rngs=None):
    quality = PARAMS["jpeg_compression"][severity - 1]
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
