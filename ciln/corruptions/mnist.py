"""The 15 MNIST-style corruptions with CILN's own severity tables (``mnist_funcs``).

These differ from MNIST-C, which defines one severity per corruption; CILN's five-level constants are
used as the official code has them (rotation in degrees, scale per axis, dotted line and zigzag as its
simplified emulations). Functions map uint8 images (n, 28, 28) and one Generator per image to floats in
[0, 255]. The structural corruptions (canny_edges, dotted_line, stripe, zigzag) ignore severity.
"""
from __future__ import annotations

import cv2
import numpy as np
from skimage import feature, transform
from skimage.filters import gaussian

from ciln.corruptions import cifar
from ciln.corruptions.primitives import glass_swaps, motion_blur, plasma_fractal

SIZE = 28
CENTRE = 13.5
PARAMS = {
    "shot_noise": [60, 25, 12, 5, 3],
    "impulse_noise": [0.03, 0.06, 0.09, 0.17, 0.27],
    "spatter": [
        (0.62, 0.1, 0.7, 0.7, 0.5, 0), (0.65, 0.1, 0.8, 0.7, 0.5, 0), (0.65, 0.3, 1, 0.69, 0.5, 0),
        (0.65, 0.1, 0.7, 0.69, 0.6, 1), (0.65, 0.1, 0.5, 0.68, 0.6, 1),
    ],
    "glass_blur": [(0.5, 1, 1), (0.7, 1, 1), (1.0, 1, 1), (1.5, 2, 2), (2.0, 2, 2)],
    "motion_blur": [(2, 1), (3, 1.5), (4, 2), (5, 2), (6, 2.5)],
    "shear": [0.2, 0.4, 0.6, 0.8, 1.0],
    "scale": [0.7, 0.8, 0.9, 1.1, 1.2],
    "rotate": [3, 8, 18, 38, 57],
    "translate": [1, 2, 3, 4, 5],
    "brightness": [0.1, 0.2, 0.3, 0.4, 0.5],
    "fog": cifar.PARAMS["fog"],
    "canny_edges": None, "dotted_line": None, "stripe": None, "zigzag": None,
}
FAMILIES = {
    "Noise": ("shot_noise", "impulse_noise", "spatter"),
    "Blur": ("glass_blur", "motion_blur"),
    "Geometric": ("rotate", "shear", "translate", "scale"),
    "Weather/Digital": ("fog", "brightness"),
    "Structural": ("canny_edges", "dotted_line", "stripe", "zigzag"),
}
STRUCTURAL = set(FAMILIES["Structural"])


def _unit(images):
    return images.astype(np.float64) / 255.0


def _warp(x: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Warp a [0, 1] image with ``matrix`` as the inverse map (output -> input coordinates), zero fill."""
    return transform.warp(x, inverse_map=transform.AffineTransform(matrix=matrix), mode="constant", cval=0.0)


def _centred(linear: np.ndarray) -> np.ndarray:
    """A 3x3 affine matrix with the 2x2 ``linear`` part that keeps the image centre fixed."""
    matrix = np.eye(3)
    matrix[:2, :2] = linear
    matrix[:2, 2] = CENTRE * (1 - linear.sum(axis=1))
    return matrix


def shot_noise(images, severity, rngs):
    c = PARAMS["shot_noise"][severity - 1]
    x = _unit(images)
    return np.clip(np.stack([rng.poisson(xi * c) / c for xi, rng in zip(x, rngs)]), 0, 1) * 255


def impulse_noise(images, severity, rngs):
    return cifar.impulse_noise(images, severity, rngs, params=PARAMS["impulse_noise"])


def glass_blur(images, severity, rngs):
    sigma, delta, passes = PARAMS["glass_blur"][severity - 1]
    blurred = np.stack([(gaussian(xi / 255.0, sigma=sigma) * 255).astype(np.uint8) for xi in images])
    positions = (SIZE - 2 * delta) ** 2
    draws = [(rng.integers(-delta, delta, size=(passes * positions, 2)), rng.random(passes * positions) < 0.5)
             for rng in rngs]
    # A true swap: on grey (H, W) images the official tuple assignment exchanges scalars (MNIST-C's
    # corruptions.py), unlike CIFAR-10-C's colour pixels, which are views and get copied (cifar.glass_blur).
    swapped = glass_swaps(blurred, delta, np.stack([d[0] for d in draws]), np.stack([d[1] for d in draws]), mode="swap")
    return np.clip(np.stack([gaussian(xi / 255.0, sigma=sigma) for xi in swapped]), 0, 1) * 255


def motion_blur_(images, severity, rngs):
    radius, sigma = PARAMS["motion_blur"][severity - 1]
    out = [motion_blur(xi.astype(np.float64), radius, sigma, rng.uniform(-45, 45)) for xi, rng in zip(images, rngs)]
    return np.clip(np.stack(out), 0, 255)


def shear(images, severity, rngs):
    base = PARAMS["shear"][severity - 1]
    out = []
    for xi, rng in zip(_unit(images), rngs):
        angle = base * rng.choice([-1, 1])
        out.append(_warp(xi, _centred(np.array([[1.0, -np.sin(angle)], [0.0, np.cos(angle)]]))))
    return np.clip(np.stack(out), 0, 1) * 255


def scale(images, severity, rngs):
    c = PARAMS["scale"][severity - 1]
    out = []
    for xi, rng in zip(_unit(images), rngs):
        bits = rng.choice([-1, 1], 2)
        sx, sy = (c if b == 1 else 1 / c for b in bits)
        out.append(_warp(xi, _centred(np.diag([sx, sy]))))
    return np.clip(np.stack(out), 0, 1) * 255


def rotate(images, severity, rngs):
    degrees = PARAMS["rotate"][severity - 1]
    out = [transform.rotate(xi, degrees * rng.choice([-1, 1]), mode="constant", cval=0) for xi, rng in zip(_unit(images), rngs)]
    return np.clip(np.stack(out), 0, 1) * 255


def translate(images, severity, rngs):
    c = PARAMS["translate"][severity - 1]
    out = []
    for xi, rng in zip(_unit(images), rngs):
        dx, dy = c * rng.choice([-1, 1], 2)
        matrix = np.eye(3)
        matrix[:2, 2] = [dx, dy]
        out.append(_warp(xi, matrix))
    return np.clip(np.stack(out), 0, 1) * 255


def brightness(images, severity, rngs=None):
    return np.clip(_unit(images) + PARAMS["brightness"][severity - 1], 0, 1) * 255


def fog(images, severity, rngs):
    strength, decay = PARAMS["fog"][severity - 1]
    out = [(xi + strength * plasma_fractal(rng, 32, decay)[:SIZE, :SIZE]) / (1 + strength)
           for xi, rng in zip(_unit(images), rngs)]
    return np.clip(np.stack(out), 0, 1) * 255


def spatter(images, severity, rngs):
    """Liquid spatter: mode 0 'rain' (edges of blobs embossed and added), mode 1 'mud' (soft blobs added)."""
    mu, sd, blur, threshold, intensity, mode = PARAMS["spatter"][severity - 1]
    out = []
    for xi, rng in zip(_unit(images), rngs):
        liquid = gaussian(rng.normal(mu, sd, (SIZE, SIZE)), sigma=blur)
        liquid[liquid < threshold] = 0
        if mode == 0:
            layer = (liquid * 255).astype(np.uint8)
            dist = cv2.distanceTransform(255 - cv2.Canny(layer, 50, 150), cv2.DIST_L2, 5)
            _, dist = cv2.threshold(dist, 20, 20, cv2.THRESH_TRUNC)
            dist = cv2.equalizeHist(cv2.blur(dist, (3, 3)).astype(np.uint8))
            emboss = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]])
            dist = cv2.blur(cv2.filter2D(dist, cv2.CV_8U, emboss), (3, 3)).astype(np.float64) / 255.0
            out.append(xi + intensity * (liquid > 0) * dist)
        else:
            mud = gaussian((liquid > threshold).astype(np.float64), sigma=intensity)
            mud[mud < 0.8] = 0
            out.append(xi + mud)
    return np.clip(np.stack(out), 0, 1) * 255


def stripe(images, severity=None, rngs=None):
    out = images.astype(np.float64).copy()
    out[:, :, 13:15] = 255
    return out


def dotted_line(images, severity, rngs):
    out = images.astype(np.float64).copy()
    for xi, rng in zip(out, rngs):
        sign = rng.choice([-1, 1])
        r0, r1 = rng.integers(0, 27, 2)
        for i in range(10):
            xi[int(round(r0 + i * (r1 - r0) / 9)), (sign * i) % SIZE] = 255
    return out


def zigzag(images, severity, rngs):
    out = images.astype(np.float64).copy()
    for xi, rng in zip(out, rngs):
        r0 = rng.integers(0, 27)
        r1 = r0 + rng.integers(-5, 5)
        for i in range(SIZE):
            xi[(r0 + i) % SIZE, (r1 + (i if (i // 4) % 2 == 0 else -i)) % SIZE] = 255
    return out


def canny_edges(images, severity=None, rngs=None):
    return np.stack([feature.canny(xi, sigma=1.0) for xi in _unit(images)]).astype(np.float64) * 255


FUNCTIONS = {
    "shot_noise": shot_noise, "impulse_noise": impulse_noise, "spatter": spatter, "glass_blur": glass_blur,
    "motion_blur": motion_blur_, "shear": shear, "scale": scale, "rotate": rotate, "translate": translate,
    "brightness": brightness, "fog": fog, "canny_edges": canny_edges, "dotted_line": dotted_line,
    "stripe": stripe, "zigzag": zigzag,
}
DETERMINISTIC = {"brightness", "canny_edges", "stripe"}
