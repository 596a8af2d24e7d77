import numpy as np
import pytest
from scipy.ndimage import zoom

from ciln.corruptions.frost import FROST_FILES, frost_textures, procedural_frost
from ciln.corruptions.primitives import (
    clipped_zoom, clipped_zoom_batch, disk_kernel, glass_swaps, motion_blur, plasma_fractal,
)


@pytest.mark.parametrize("factor", [1.01, 1.1, 1.25])
def test_batched_zoom_equals_scipy(factor, rng):
    x = rng.random((4, 32, 32, 3))
    expected = np.stack([clipped_zoom(xi, factor) for xi in x])
    assert np.allclose(clipped_zoom_batch(x, factor), expected)
    # and clipped_zoom is scipy's order-1 zoom of the centre crop
    ch = int(np.ceil(32 / factor))
    top = (32 - ch) // 2
    big = zoom(x[0, top:top + ch, top:top + ch], (factor, factor, 1), order=1)
    trim = (big.shape[0] - 32) // 2
    assert np.allclose(expected[0], big[trim:trim + 32, trim:trim + 32])


def test_plasma_fractal_range_and_determinism():
    a = plasma_fractal(np.random.default_rng(3), 32, 2.0)
    assert a.shape == (32, 32) and a.min() == 0 and a.max() == 1
    assert np.array_equal(a, plasma_fractal(np.random.default_rng(3), 32, 2.0))
    rough, smooth = plasma_fractal(np.random.default_rng(3), 32, 1.5), plasma_fractal(np.random.default_rng(3), 32, 3.0)
    assert np.abs(np.diff(rough, axis=0)).mean() > np.abs(np.diff(smooth, axis=0)).mean()


def test_disk_kernel_is_a_normalised_disk():
    k = disk_kernel(1.5, 0.1)
    assert k.shape == (17, 17) and k.sum() == pytest.approx(1.0, abs=1e-5)
    assert k[8, 8] == k.max()


def test_motion_blur_keeps_constants_and_smears_along_the_angle():
    flat = np.full((16, 16), 7.0)
    assert np.allclose(motion_blur(flat, 4, 2.0, 30), 7.0)
    dot = np.zeros((21, 21))
    dot[10, 10] = 1.0
    horizontal = motion_blur(dot, 4, 2.0, 0.0)
    assert horizontal.sum() == pytest.approx(1.0) and np.count_nonzero(horizontal[10]) > 1
    assert np.count_nonzero(horizontal[:, 10]) == 1  # angle 0: only along the row


def test_glass_swaps_only_permute_pixels(rng):
    images = rng.integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)
    offsets = rng.integers(-1, 1, (3, 30 * 30, 2))
    out = glass_swaps(images, 1, offsets)
    for a, b in zip(images, out):
        assert sorted(map(tuple, a.reshape(-1, 3))) == sorted(map(tuple, b.reshape(-1, 3)))
    assert not np.array_equal(images, out)
    assert np.array_equal(glass_swaps(images, 1, offsets, keep=np.zeros((3, 900), bool)), images)


def test_frost_textures():
    textures = frost_textures()
    assert len(textures) == len(FROST_FILES)
    assert all(t.ndim == 3 and t.shape[2] == 3 and min(t.shape[:2]) > 32 for t in textures)
    fallback = procedural_frost(np.random.default_rng(0), 64)
    assert fallback.shape == (64, 64, 3) and fallback.dtype == np.uint8
