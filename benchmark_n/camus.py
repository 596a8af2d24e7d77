"""The CAMUS analogue of the paper's Appendix A: a U-Net trained on clean vs noisy left-ventricle (LV) masks
(Table 6: Dice at ES and ED, EF error, Hausdorff distance on the ED frame), the clean / noisy masks of Fig. 9, and
the introduction's "5 % boundary error swings the EF from 45 % to 39-50 %" checked on masks.

    data = synthetic_camus(48, seed=0)                       # offline stand-in; or camus_files.load_camus(root)
    run = clean_vs_noisy(data, seed=0)                       # train on clean and on noisy masks, test on clean
    table = table6(run["clean"], run["noisy"])               # training, dice_es, dice_ed, ef_error, hd_ed
    records = claims(table, ef_swing(*ellipse_lv_pair(45.0)))
    figure9(data.images, data.masks, run["noisy_masks"], spacing=data.spacing)

**Data** (``EchoData``): ``images`` (n, 2, H, W) float32 in [0, 1] and ``masks`` (n, 2, H, W) bool LV cavity, frame
0 = ED (end-diastole) and frame 1 = ES (end-systole) (``ED``, ``ES``); ``spacing`` (n, 2) mm per pixel (row,
column) at the working size; ``ef`` the EF from the masks (below); ``ef_reference`` the EF the source states.

* ``synthetic_camus``: apical-4-chamber-like image pairs drawn per patient from
  ``item_rng(seed, "camus-synthetic", i)`` (patient i does not depend on ``n_patients``): an ultrasound sector on
  black; a bullet-shaped LV cavity (an ellipse cut flat at the mitral plane, long axis along a ray of the sector,
  apex fixed between frames) inside a bright myocardium that thickens at ES, with an optional drop-out arc; the right
  ventricle beside it, both atria below, the mitral valve closed at ES and open at ED (so the LV and LA blood pools
  touch at ED); Gaussian blur (the PSF) and multiplicative speckle (the magnitude of a smoothed complex Gaussian
  field: Rayleigh-distributed, grain about one pixel, mean 1). The ES cavity is the ED one with the long axis
  shortened by 5-14 % and the short axis solved (bisection on the raster) so that the *mask* EF hits a target drawn
  uniformly in ``ef_range`` (35-70 %). Pixel spacing = ``fov_mm / size`` (130 mm over the image: an ED LV of
  75-95 mm, as in adults).
* ``benchmark_n.camus_files.load_camus``: the public CAMUS release (its readers and the rehearsal's writer).

**EF** (``mask_ef``): single-plane area-length volumes from one apical view, V = 8 A^2 / (3 pi L) with L the maximum
Feret diameter (``benchmark_n.metrics.area_length_volume``), EF = (EDV - ESV) / EDV * 100. The paper computes EF "2D"
from the masks without a formula; CAMUS's own reference (``ef_reference`` of the real data) is Simpson's biplane
from the 2CH and 4CH contours, which this module does not implement (one view is loaded), so the two differ.

**Noise** (``noisy_lv_masks``): the paper's "morphological dilation of the ESV boundary, along with moderate
localization noise in both EDV and ESV, using the 'low' noise setup". Per patient (``item_rng(seed,
"camus-lv-noise", i)``), on ED and ES: the external contour (``cv2.findContours``, CHAIN_APPROX_SIMPLE, as the
engine's) gets vertex jitter N(0, sd) per coordinate (``benchmark_n.noise.jitter``, sd = the low tier's
localization mean, 2 px), is refilled (vertices rounded, not truncated as the official code does, which would
shift every mask by half a pixel up-left; holes of a self-crossing outline filled); then ES only is dilated with a
k x k square (k = the low tier's scale mean, 3: one pixel on every side) (``benchmark_n.noise.morph``); the
engine's order (localization before scale). ``sample=True`` draws sd ~ max(N(2, 0.5), 0) and k ~ max(1,
floor(N(3, 1))) per frame instead, as the engine does per instance.

*Which pixels.* By default the magnitudes are pixels of the working grid, not rescaled: the engine's Table 1 pixels
apply to whatever image it is given, and scaled down linearly the integer kernel truncates to a no-op.
At the stand-in's 64 px (2 mm pixels) this noise is physically several times the paper's if the paper noised
CAMUS at its native resolution (a few tenths of a mm per pixel): the noisy ES masks are ~40 % larger than the clean
ones and their own EF is ~36 p.p. lower (48 patients, seed 0). ``noise_pixel_mm`` applies the same pixel numbers on
a supersampled grid of about that pixel size instead (jitter and dilation there, area-averaged back): 0.6 (CAMUS
at U-Net 1's 256 px) gives ES masks ~10 % larger and an EF bias of ~ -8 p.p.; 0.3 (native-like) ~3 % and ~ -2.5
p.p., close to the paper's EF-error increase (2.1 -> 4.5 p.p.), but a Dice change the tiny model barely resolves.

**U-Net** (``train_unet``): ``benchmark_n.tiny_seg.TinyUNet`` (one input channel, classes background / LV) trained
on single frames (ED and ES alike, as CAMUS's U-Net 1) with Adam and the pixel cross-entropy (``pixel_loss``) plus
a soft Dice loss on the LV (``dice_weight``), the CAMUS "U-Net 1" recipe at toy scale. ``predict`` keeps the
largest 8-connected component of the LV prediction. The models are always evaluated on the *clean* test masks.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Sequence

import cv2
import numpy as np
import pandas as pd
import torch
from scipy import ndimage

from benchmark_n.coco import mask_to_polygons
from benchmark_n.metrics import area_length_volume, dice, ejection_fraction, hausdorff
from benchmark_n.noise import PRESETS, canonical_tier, jitter, morph
from benchmark_n.tiny_seg import TinyUNet, pixel_loss
from shared.errors import ConfigError, DataFormatError, unknown_choice
from shared.progress import progress
from shared.report import claim_record, verdict
from shared.seeding import item_rng, seed_everything
from shared.training import train_epoch

ED, ES = 0, 1
FRAMES = ("ED", "ES")
TRAINING = ("clean", "noisy")
#: Table 6's columns (Dice in %, EF error in percentage points, HD in mm on the ED frame)
TABLE6_COLUMNS = ("training", "dice_es", "dice_ed", "ef_error", "hd_ed")
METRICS = TABLE6_COLUMNS[1:]
#: what "better" means per metric (clean should be better than noisy)
HIGHER_IS_BETTER = {"dice_es": True, "dice_ed": True, "ef_error": False, "hd_ed": False}
#: hyperparameters of ``train_unet``: CAMUS U-Net 1 (Adam, CE + Dice) at smoke scale
DEFAULTS = {"epochs": 15, "lr": 1e-3, "batch_size": 8, "width": 8, "dice_weight": 1.0}
#: the smoke run: 48 synthetic patients at 64 x 64, 36 train / 12 test, 15 epochs (both trainings of one seed:
#: 8.5-10 s on one idle CPU thread, up to 16 s on a busy machine)
SMOKE = {"n_patients": 48, "size": 64, "test_fraction": 0.25}
SWING_MEASURES = {"area": "each frame's mask scaled about its centroid so that its area changes by the fraction",
                  "linear": "each frame's mask scaled about its centroid by 1 +- the fraction (the contour moves)"}
#: the introduction's claim: "a modest 5% boundary error ... can swing the ejection-fraction estimate from 45% to
#: 39-50%"
SWING_CLAIM = {"relative": 0.05, "ef": 45.0, "low": 39.0, "high": 50.0}


# ------------------------------------------------------------------------------------------------ data container
@dataclass
class EchoData:
    """LV image pairs. ``images`` (n, 2, H, W) float32 in [0, 1], ``masks`` (n, 2, H, W) bool, frame 0 = ED and
    1 = ES; ``spacing`` (n, 2) mm per pixel (row, column); ``ef`` (n,) the EF (%) of the masks by ``mask_ef``;
    ``ef_reference`` (n,) the EF the source states (CAMUS's ``Info_*.cfg``, biplane Simpson; the synthetic
    generator's target), NaN where absent; ``ids`` the patient names; ``source`` where the data came from."""
    images: np.ndarray
    masks: np.ndarray
    ef: np.ndarray
    spacing: np.ndarray
    ids: list[str]
    source: str
    ef_reference: np.ndarray = field(default=None)

    def __post_init__(self):
        n = len(self.images)
        if self.ef_reference is None:
            self.ef_reference = np.full(n, np.nan)
        if self.images.ndim != 4 or self.images.shape[1] != 2 or self.masks.shape != self.images.shape:
            raise DataFormatError(f"expected images and masks of shape (n, 2, H, W), got {self.images.shape} and "
                                  f"{self.masks.shape}")
        if not (len(self.ef) == len(self.spacing) == len(self.ids) == len(self.ef_reference) == n):
            raise DataFormatError("ef, spacing, ids and ef_reference need one entry per patient")

    def __len__(self) -> int:
        return len(self.images)

    def subset(self, index) -> "EchoData":
        """The patients at ``index`` (indices or a boolean mask), in that order."""
        index = np.arange(len(self))[index]
        return EchoData(self.images[index], self.masks[index], self.ef[index], self.spacing[index],
                        [self.ids[i] for i in index], self.source, self.ef_reference[index])


def mask_ef(ed_mask: np.ndarray, es_mask: np.ndarray, spacing=1.0) -> float:
    """EF (%) of an LV mask pair: single-plane area-length volumes (``area_length_volume``) into
    ``ejection_fraction``. An empty ES mask has volume 0 (EF 100 %); an empty ED mask gives NaN."""
    if not np.any(ed_mask):
        return float("nan")
    edv = area_length_volume(ed_mask, spacing)
    esv = area_length_volume(es_mask, spacing) if np.any(es_mask) else 0.0
    return ejection_fraction(edv, esv)


def _spacings(spacing, n: int) -> np.ndarray:
    """(n, 2) (row, column) spacing from a scalar, a (row, column) pair or one pair per patient."""
    s = np.asarray(spacing, dtype=np.float64)
    if s.ndim == 0 or s.shape == (1,):
        s = np.full((n, 2), float(s.reshape(-1)[0]))
    elif s.shape == (2,):
        s = np.broadcast_to(s, (n, 2)).copy()
    elif s.shape != (n, 2):
        raise ConfigError(f"spacing must be a scalar, a (row, column) pair or (n_patients, 2), got shape {s.shape} "
                          f"for {n} patients")
    if not np.all(s > 0):
        raise ConfigError(f"pixel spacing must be positive, got {s.min()}")
    return s


# ------------------------------------------------------------------------------------------------ synthetic stand-in
def _ellipse(shape: tuple[int, int], apex: np.ndarray, direction: np.ndarray, a: float, b: float,
             cut: float | None = None, offset: float = 0.0) -> np.ndarray:
    """Pixels (centres) inside an ellipse of semi-axes a (along ``direction``, (row, col) unit vector) and b, whose
    long-axis end nearest ``apex`` lies at ``apex - offset * direction``; with ``cut``, only the part up to
    ``cut`` along the axis from ``apex`` (a flat base perpendicular to the axis: the mitral plane)."""
    rows, cols = np.mgrid[:shape[0], :shape[1]].astype(np.float64)
    dr, dc = rows - apex[0], cols - apex[1]
    u = dr * direction[0] + dc * direction[1] + offset  # distance along the axis from the ellipse's end
    v = -dr * direction[1] + dc * direction[0]
    inside = ((u - a) / a) ** 2 + (v / b) ** 2 <= 1.0
    if cut is not None:
        inside &= u - offset <= cut
    return inside


def _bisect(f, lo: float, hi: float, target: float, iterations: int = 30) -> float:
    """x in [lo, hi] with f(x) closest to ``target``, f decreasing (as far as the raster allows)."""
    best = (np.inf, lo)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        value = f(mid)
        best = min(best, (abs(value - target), mid))
        if value > target:
            lo = mid
        else:
            hi = mid
    return best[1]


def _speckle(rng: np.random.Generator, shape: tuple[int, int], grain: float) -> np.ndarray:
    """Fully developed speckle: |smoothed complex Gaussian|, Rayleigh-distributed, mean 1."""
    field_ = rng.normal(size=(2, *shape))
    if grain > 0:
        field_ = np.stack([ndimage.gaussian_filter(f, grain) for f in field_])
    magnitude = np.hypot(field_[0], field_[1])
    return magnitude / magnitude.mean()


def _patient(rng: np.random.Generator, size: int, ef_range: tuple[float, float], spacing: float,
             speckle: float) -> tuple[np.ndarray, np.ndarray, float]:
    """One synthetic patient: images (2, S, S) float32, LV masks (2, S, S) bool and the target EF."""
    shape = (size, size)
    target = float(rng.uniform(*ef_range))
    sector_apex = np.array([-0.02 * size, 0.5 * size])
    half_angle = np.deg2rad(rng.uniform(34, 40))
    # the LV apex lies just below the sector apex, slightly right of centre; its long axis within 10 degrees of
    # the vertical
    lv_apex = np.array([rng.uniform(0.07, 0.12) * size, rng.uniform(0.50, 0.58) * size])
    angle = np.deg2rad(rng.uniform(-10, 10))
    direction = np.array([np.cos(angle), np.sin(angle)])
    normal = np.array([-direction[1], direction[0]])  # towards the image's right
    cut_fraction = 0.93  # the mitral plane cuts the ellipse at 93 % of its long axis
    a_ed = rng.uniform(0.55, 0.68) * size / (2 * cut_fraction)  # semi long axis: an LV of 55-68 % of the height
    b_ed = a_ed * rng.uniform(0.46, 0.58)
    wall_ed = rng.uniform(0.045, 0.06) * size
    wall_es = wall_ed * rng.uniform(1.25, 1.45)
    shorten = rng.uniform(0.86, 0.95)  # long-axis shortening at ES

    def lv(a: float, b: float) -> np.ndarray:
        return _ellipse(shape, lv_apex, direction, a, b, cut=cut_fraction * 2 * a)

    ed_mask = lv(a_ed, b_ed)
    a_es = a_ed * shorten
    b_es = _bisect(lambda b: mask_ef(ed_mask, lv(a_es, b), spacing), 0.3 * b_ed, b_ed, target)
    masks = np.stack([ed_mask, lv(a_es, b_es)])

    rows, cols = np.mgrid[:size, :size].astype(np.float64)
    radius = np.hypot(rows - sector_apex[0], cols - sector_apex[1])
    theta = np.arctan2(cols - sector_apex[1], rows - sector_apex[0])
    sector = (radius <= rng.uniform(0.98, 1.05) * size) & (np.abs(theta) <= half_angle)
    gain = rng.uniform(0.8, 1.15)
    tissue, muscle, blood = rng.uniform(0.3, 0.45), rng.uniform(0.55, 0.85), rng.uniform(0.06, 0.14)
    clutter = rng.uniform(0.1, 0.35)  # near-field haze at the apex
    drops = [(rng.uniform(-np.pi, np.pi), rng.uniform(0.3, 0.8)) for _ in range(int(rng.integers(0, 3)))]
    rv_shift, rv_scale = rng.uniform(0.9, 1.2), rng.uniform(0.75, 0.9)
    la_scale = rng.uniform(0.8, 1.0)
    papillary = rng.uniform(0.45, 0.75)  # position of a papillary muscle along the lateral wall (inside the LV mask)
    images = []
    for frame, (a, b, wall) in enumerate(((a_ed, b_ed, wall_ed), (a_es, b_es, wall_es))):
        cavity = masks[frame]
        base = cut_fraction * 2 * a
        u = (rows - lv_apex[0]) * direction[0] + (cols - lv_apex[1]) * direction[1]  # along the long axis
        v = -(rows - lv_apex[0]) * direction[1] + (cols - lv_apex[1]) * direction[0]  # across it
        outer = _ellipse(shape, lv_apex, direction, a + wall, b + wall, cut=base + 0.5 * wall, offset=wall)
        orifice = (u > base) & (u <= base + 0.5 * wall + 0.6) & (np.abs(v) < 0.85 * b)  # mitral orifice
        myocardium = outer & ~cavity & ~orifice
        # right ventricle: left of the septum, shorter, with a thin free wall
        rv_apex = lv_apex - normal * (b + wall + rv_shift * b) + direction * 0.35 * a
        rv_a, rv_b = 0.8 * a, rv_scale * b
        rv = _ellipse(shape, rv_apex, direction, rv_a, rv_b, cut=1.75 * rv_a)
        rv_wall = _ellipse(shape, rv_apex, direction, rv_a + 0.5 * wall, rv_b + 0.5 * wall, cut=1.75 * rv_a,
                           offset=0.5 * wall) & ~rv
        # atria below the valve planes; larger at ES (they fill during systole)
        la_b = la_scale * b_ed * (1.1 if frame == ES else 1.0)
        la_apex = lv_apex + direction * (base + 0.5 * wall)
        la = _ellipse(shape, la_apex, direction, 0.9 * la_b, la_b)
        ra = _ellipse(shape, rv_apex + direction * (1.75 * rv_a + 0.5 * wall), direction, 0.8 * la_b, 0.85 * la_b)
        intensity = np.full(shape, tissue)
        intensity[rv_wall] = 0.8 * muscle
        intensity[myocardium] = muscle
        angle_in_lv = np.arctan2(v, u - a)
        for centre, width in drops:  # echo drop-out: part of the wall barely reflects
            arc = np.abs(np.angle(np.exp(1j * (angle_in_lv - centre)))) < width
            intensity[myocardium & arc] = tissue * 0.8
        for pool in (rv, la, ra, cavity, orifice):
            intensity[pool] = blood
        # a papillary muscle against the lateral wall, inside the annotated cavity
        muscle_spot = ((u - papillary * base) / (0.12 * a)) ** 2 + ((v - 0.8 * b) / (0.25 * b)) ** 2 <= 1
        intensity[muscle_spot & cavity] = 0.7 * muscle
        # the mitral valve: closed at ES (a bright line across the orifice), open at ED (two leaflets in the LV)
        if frame == ES:
            intensity[orifice & (np.abs(u - base - 0.25 * wall) <= 0.6)] = 0.8 * muscle
        else:
            leaflets = (np.abs(u - base + 0.15 * a) <= 0.15 * a + 0.6) & (np.abs(np.abs(v) - 0.8 * b) <= 0.6)
            intensity[leaflets & ~myocardium] = 0.7 * muscle
        intensity = intensity + clutter * np.exp(-((radius / size) / 0.22) ** 2)
        intensity = ndimage.gaussian_filter(intensity, (0.7, 1.2))  # the PSF: lateral blur wider than axial
        depth = 1.0 - 0.35 * np.clip(radius / size, 0, 1)  # attenuation with depth, partly compensated
        image = gain * depth * intensity * _speckle(rng, shape, 0.7) ** speckle
        image += rng.normal(0.0, 0.04, shape)
        image[~sector] = 0.0
        images.append(np.clip(image, 0.0, 1.0))
    return np.stack(images).astype(np.float32), masks, target


def synthetic_camus(n_patients: int, seed: int = 0, size: int = 64, ef_range: tuple[float, float] = (35.0, 70.0),
                    fov_mm: float = 130.0, speckle: float = 1.0) -> EchoData:
    """``n_patients`` synthetic apical-4-chamber ED/ES pairs (module docstring) at ``size`` x ``size`` pixels of
    ``fov_mm / size`` mm. ``speckle`` is the exponent of the speckle field (0: none, 1: fully developed). Patient i
    is drawn from ``item_rng(seed, "camus-synthetic", i)``: the same seed gives identical arrays, and the first k
    patients do not depend on ``n_patients``."""
    if n_patients < 1 or size < 32 or size % 4:
        raise ConfigError(f"need n_patients >= 1 and a size >= 32 divisible by 4 (the U-Net pools twice), got "
                          f"{n_patients} and {size}")
    if not 0 < ef_range[0] < ef_range[1] < 90:
        raise ConfigError(f"ef_range must be (low, high) percentages with 0 < low < high < 90, got {ef_range}")
    spacing = fov_mm / size
    images, masks, targets = [], [], []
    for i in range(n_patients):
        image, mask, target = _patient(item_rng(seed, "camus-synthetic", i), size, ef_range, spacing, speckle)
        images.append(image)
        masks.append(mask)
        targets.append(target)
    masks = np.stack(masks)
    ef = np.array([mask_ef(m[ED], m[ES], spacing) for m in masks])
    return EchoData(np.stack(images), masks, ef, np.full((n_patients, 2), spacing),
                    [f"synthetic{i:04d}" for i in range(n_patients)], "synthetic", np.array(targets))


# ------------------------------------------------------------------------------------------------ noise
def fill_contours(polygons, shape: tuple[int, int]) -> np.ndarray:
    """(H, W) bool: the polygons filled (vertices rounded to the nearest pixel, ``cv2.fillPoly``), holes that a
    self-crossing outline leaves filled."""
    out = np.zeros(shape, np.uint8)
    for polygon in polygons:
        if len(polygon) >= 3:
            cv2.fillPoly(out, [np.round(np.asarray(polygon)).astype(np.int32)], 1)
    return ndimage.binary_fill_holes(out)


def jitter_mask(mask: np.ndarray, sd: float, rng: np.random.Generator) -> np.ndarray:
    """The mask's external contours (``mask_to_polygons``) with every vertex moved by N(0, sd) px per coordinate
    (``benchmark_n.noise.jitter``), refilled (``fill_contours``)."""
    polygons = mask_to_polygons(mask)
    return fill_contours([jitter(p, sd, rng) for p in polygons], mask.shape)


def noise_parameters(tier: str = "low") -> dict[str, float]:
    """The Table 6 noise of a tier: ``sd`` (vertex jitter, px) and ``kernel`` (ES dilation, px) = the tier's
    localization and scale means (Table 1)."""
    preset = PRESETS[canonical_tier(tier)]
    return {"sd": float(preset.localization[0]), "kernel": int(preset.scale[0])}


def _supersampling(spacing, n: int, noise_pixel_mm: float | None) -> np.ndarray:
    """(n, 2) integer (row, column) factors that bring the working pixels to about ``noise_pixel_mm``."""
    if noise_pixel_mm is None:
        return np.ones((n, 2), int)
    if spacing is None:
        raise ConfigError("noise_pixel_mm needs the masks' spacing (mm per working pixel)")
    if not noise_pixel_mm > 0:
        raise ConfigError(f"noise_pixel_mm must be positive, got {noise_pixel_mm}")
    return np.maximum(1, np.round(_spacings(spacing, n) / noise_pixel_mm)).astype(int)


def _noise_frame(mask: np.ndarray, sd: float, kernel: int, factor: np.ndarray, rng: np.random.Generator
                 ) -> np.ndarray:
    """Jitter (sd > 0) then dilation (kernel > 1) of one mask, on a grid ``factor`` times finer when factor > 1
    (bilinear upsampling of the 0/1 mask thresholded at 0.5, noise, area averaging back, threshold 0.5)."""
    h, w = mask.shape
    fine = mask
    if np.any(factor > 1):
        up = cv2.resize(mask.astype(np.float32), (w * int(factor[1]), h * int(factor[0])),
                        interpolation=cv2.INTER_LINEAR)
        fine = up >= 0.5
    if sd > 0:
        fine = jitter_mask(fine, sd, rng)
    if kernel > 1:
        fine = morph(fine, kernel, "dilate").astype(bool)
    if fine.shape == mask.shape:
        return np.asarray(fine, dtype=bool)
    return cv2.resize(fine.astype(np.float32), (w, h), interpolation=cv2.INTER_AREA) >= 0.5


def noisy_lv_masks(masks: np.ndarray, seed: int, tier: str = "low", *, sample: bool = False,
                   noise_pixel_mm: float | None = None, spacing=None) -> np.ndarray:
    """Table 6's noisy training masks (module docstring): ``masks`` (n, 2, H, W) -> (n, 2, H, W) bool; vertex jitter
    on ED and ES, then ES dilated. Patient i draws from ``item_rng(seed, "camus-lv-noise", i)``, so its noise does
    not depend on the other patients. ``sample``: draw sd and kernel per frame from the tier's N(mean, sd) as the
    engine does (else the means). ``noise_pixel_mm``: the pixel size (mm) at which Table 1's pixel magnitudes
    apply; None (default) = the working pixels; else each mask is noised on a grid about that fine (integer
    supersampling per axis of the working ``spacing``, scalar / (row, column) / (n, 2) mm) and averaged back, e.g.
    0.3 for CAMUS's native pixels. ``masks`` is not modified."""
    masks = np.asarray(masks, dtype=bool)
    if masks.ndim != 4 or masks.shape[1] != 2:
        raise DataFormatError(f"expected LV masks of shape (n, 2, H, W) (ED, ES), got {masks.shape}")
    preset = PRESETS[canonical_tier(tier)]
    fixed = noise_parameters(tier)
    factors = _supersampling(spacing, len(masks), noise_pixel_mm)
    out = np.empty_like(masks)
    for i in range(len(masks)):
        rng = item_rng(seed, "camus-lv-noise", i)
        for frame in (ED, ES):
            sd = max(float(rng.normal(*preset.localization)), 0.0) if sample else fixed["sd"]
            kernel = 1
            if frame == ES:
                kernel = max(1, int(np.floor(rng.normal(*preset.scale)))) if sample else fixed["kernel"]
            out[i, frame] = _noise_frame(masks[i, frame], sd, kernel, factors[i], rng)
    return out


# ------------------------------------------------------------------------------------------------ U-Net
def check_hparams(hp: dict | None) -> dict:
    """``DEFAULTS`` updated with ``hp``; unknown keys raise ConfigError."""
    hp = dict(hp or {})
    unknown = set(hp) - set(DEFAULTS)
    if unknown:
        raise ConfigError(f"unknown CAMUS U-Net hyperparameter(s) {sorted(unknown)}; valid: {', '.join(DEFAULTS)}")
    return {**DEFAULTS, **hp}


def _frames(images: np.ndarray) -> torch.Tensor:
    """(n, 2, H, W) -> (2n, 1, H, W) float tensor: every frame a sample."""
    images = np.asarray(images, dtype=np.float32)
    if images.ndim != 4 or images.shape[1] != 2 or images.shape[2] % 4 or images.shape[3] % 4:
        raise DataFormatError(f"expected images (n, 2, H, W) with H and W divisible by 4, got {images.shape}")
    return torch.from_numpy(images.reshape(-1, 1, *images.shape[2:]).copy())


def soft_dice_loss(logits: torch.Tensor, target: torch.Tensor, eps: float = 1.0) -> torch.Tensor:
    """1 - soft Dice of the LV probability against the LV mask, per image, averaged."""
    p = logits.softmax(1)[:, 1]
    t = (target == 1).float()
    inter = (p * t).sum((1, 2))
    return (1 - (2 * inter + eps) / (p.sum((1, 2)) + t.sum((1, 2)) + eps)).mean()


def _ce_dice_loss(logits: torch.Tensor, target: torch.Tensor, dice_weight: float) -> torch.Tensor:
    loss = pixel_loss(logits, target).mean()
    return loss + dice_weight * soft_dice_loss(logits, target) if dice_weight else loss


def train_unet(images: np.ndarray, masks: np.ndarray, hp: dict | None = None, seed: int = 0,
               device: str = "cpu") -> TinyUNet:
    """A ``TinyUNet`` (1 input channel, 2 classes) trained on every ED and ES frame of ``images`` / ``masks``
    ((n, 2, H, W)) with Adam on CE + ``dice_weight`` soft Dice, shuffled batches, ``seed_everything(seed)``.
    Returns the model in eval mode on the CPU, with ``model.history`` (per epoch: epoch, loss)."""
    hp = check_hparams(hp)
    seed_everything(seed)
    x = _frames(images)
    y = torch.from_numpy(np.asarray(masks, dtype=bool).reshape(-1, *x.shape[2:]).astype(np.int64))
    if len(y) != len(x):
        raise DataFormatError(f"images {np.shape(images)} and masks {np.shape(masks)} do not match")
    model = TinyUNet(2, hp["width"], in_channels=1).to(device)
    optimiser = torch.optim.Adam(model.parameters(), lr=hp["lr"])
    generator = torch.Generator().manual_seed(seed)
    loss_fn = partial(_ce_dice_loss, dice_weight=hp["dice_weight"])
    history = []
    for epoch in progress(range(1, hp["epochs"] + 1), desc=f"CAMUS U-Net, seed {seed}"):
        loss = train_epoch(model, x, y, optimiser, batch_size=hp["batch_size"], generator=generator, loss_fn=loss_fn)
        history.append({"epoch": epoch, "loss": loss})
    model = model.cpu().eval()
    model.history = history
    return model


def largest_component(mask: np.ndarray) -> np.ndarray:
    """The largest 8-connected component of a binary mask (H, W) as bool; an empty mask stays empty."""
    count, labels, stats, _ = cv2.connectedComponentsWithStats(np.ascontiguousarray(mask, dtype=np.uint8), 8)
    if count <= 1:
        return np.zeros(mask.shape, bool)
    return labels == 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))


def predict(model: torch.nn.Module, images: np.ndarray, batch_size: int = 32) -> np.ndarray:
    """LV masks (n, 2, H, W) bool: the argmax of the model's two classes on every frame, largest component kept."""
    x = _frames(images)
    model.eval()
    with torch.no_grad():
        labels = torch.cat([model(x[i:i + batch_size]).argmax(1) for i in range(0, len(x), batch_size)]).numpy()
    out = np.stack([largest_component(m == 1) for m in labels])
    return out.reshape(np.shape(images))


def evaluate_masks(predicted: np.ndarray, masks: np.ndarray, spacing, ids: Sequence[str] | None = None
                   ) -> pd.DataFrame:
    """Per patient: ``dice_es`` / ``dice_ed`` (%), ``ef_true`` (``mask_ef`` of ``masks``), ``ef_pred`` (of
    ``predicted``), ``ef_error`` = |ef_pred - ef_true| (p.p.), ``hd_ed`` / ``hd_es`` (symmetric Hausdorff
    distance of the boundaries in the units of ``spacing``, mm; inf when the prediction is empty), ``pred_empty``
    (a predicted frame is empty). ``spacing``: a scalar, a (row, column) pair or (n, 2)."""
    predicted, masks = np.asarray(predicted, dtype=bool), np.asarray(masks, dtype=bool)
    if predicted.shape != masks.shape or masks.ndim != 4 or masks.shape[1] != 2:
        raise DataFormatError(f"expected predicted and true masks of one shape (n, 2, H, W), got {predicted.shape} "
                              f"and {masks.shape}")
    spacings = _spacings(spacing, len(masks))
    ids = list(ids) if ids is not None else [str(i) for i in range(len(masks))]
    rows = []
    for name, p, t, s in zip(ids, predicted, masks, spacings):
        ef_true, ef_pred = mask_ef(t[ED], t[ES], s), mask_ef(p[ED], p[ES], s)
        rows.append({"patient": name, "dice_es": 100 * dice(p[ES], t[ES]), "dice_ed": 100 * dice(p[ED], t[ED]),
                     "ef_true": ef_true, "ef_pred": ef_pred, "ef_error": abs(ef_pred - ef_true),
                     "hd_ed": hausdorff(p[ED], t[ED], s), "hd_es": hausdorff(p[ES], t[ES], s),
                     "pred_empty": not (p[ED].any() and p[ES].any())})
    return pd.DataFrame(rows)


def evaluate(model: torch.nn.Module, images: np.ndarray, masks: np.ndarray, spacing,
             ids: Sequence[str] | None = None) -> pd.DataFrame:
    """``evaluate_masks`` of the model's ``predict``-ions on ``images`` against the (clean) ``masks``."""
    return evaluate_masks(predict(model, images), masks, spacing, ids)


def split_patients(n: int, test_fraction: float = 0.25, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, test indices), sorted, a random ``test_fraction`` of ``n`` patients (at least one) held
    out; ``item_rng(seed, "camus-split")``."""
    if not 0 < test_fraction < 1 or n < 2:
        raise ConfigError(f"need 0 < test_fraction < 1 and n >= 2, got {test_fraction} and {n}")
    order = item_rng(seed, "camus-split").permutation(n)
    n_test = min(n - 1, max(1, int(round(test_fraction * n))))
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def clean_vs_noisy(data: EchoData, seed: int = 0, hp: dict | None = None, *, tier: str = "low",
                   test_fraction: float = SMOKE["test_fraction"], split_seed: int = 0, sample: bool = False,
                   noise_pixel_mm: float | None = None) -> dict:
    """Table 6 for one seed: split the patients (``split_seed``: the same split for every seed, as the paper's
    "same data splits"), noise the training masks (``noisy_lv_masks(..., seed, tier)``), train one U-Net on the
    clean and one on the noisy training masks (both ``seed``), evaluate both on the clean test masks
    (``noise_pixel_mm``: see ``noisy_lv_masks``). Returns
    ``{"clean": per-patient frame, "noisy": ..., "train": indices, "test": indices, "noisy_masks": the training
    set's noisy masks (n_train, 2, H, W), "seconds": {"clean": s, "noisy": s}}``."""
    train, test = split_patients(len(data), test_fraction, split_seed)
    noisy = noisy_lv_masks(data.masks[train], seed, tier, sample=sample, noise_pixel_mm=noise_pixel_mm,
                           spacing=data.spacing[train])
    out = {"train": train, "test": test, "noisy_masks": noisy, "seconds": {}}
    for name, labels in (("clean", data.masks[train]), ("noisy", noisy)):
        start = time.perf_counter()
        model = train_unet(data.images[train], labels, hp, seed)
        frame = evaluate(model, data.images[test], data.masks[test], data.spacing[test],
                         [data.ids[i] for i in test])
        out["seconds"][name] = time.perf_counter() - start
        out[name] = frame.assign(training=name, seed=seed)
    return out


# ------------------------------------------------------------------------------------------------ Table 6
def _per_seed(results) -> list[pd.DataFrame]:
    if isinstance(results, pd.DataFrame):
        return [results]
    results = list(results)
    if not results or not all(isinstance(r, pd.DataFrame) for r in results):
        raise ConfigError("table6 takes a per-patient frame (evaluate's) or a list of them, one per seed")
    return results


def table6(clean_results, noisy_results) -> pd.DataFrame:
    """Table 6: rows ``training`` = clean / noisy; ``dice_es``, ``dice_ed`` (%), ``ef_error`` (p.p.), ``hd_ed``
    (mm) = the mean over test patients (NaN / inf propagate: an empty prediction is not hidden), then the mean over
    seeds when a list of per-seed frames is given, with ``{metric}_sd`` the sd over seeds (ddof 1; NaN for one
    seed); ``n_seeds``, ``n_patients`` (per seed) and ``n_empty`` (empty predicted frames, summed over seeds)."""
    rows = []
    for name, results in (("clean", clean_results), ("noisy", noisy_results)):
        frames = _per_seed(results)
        missing = [m for m in METRICS if not all(m in f.columns for f in frames)]
        if missing:
            raise DataFormatError(f"the {name} results lack column(s) {missing}; pass evaluate()'s frames")
        means = pd.DataFrame([{m: float(np.mean(f[m].to_numpy(dtype=float))) for m in METRICS} for f in frames])
        row = {"training": name, **{m: float(means[m].mean()) for m in METRICS}}
        row.update({f"{m}_sd": float(means[m].std(ddof=1)) if len(frames) > 1 else float("nan") for m in METRICS})
        row.update(n_seeds=len(frames), n_patients=int(len(frames[0])),
                   n_empty=int(sum(int(f["pred_empty"].sum()) if "pred_empty" in f else 0 for f in frames)))
        rows.append(row)
    return pd.DataFrame(rows)


_LABELS = {"dice_es": ("Dice at ES", "%"), "dice_ed": ("Dice at ED", "%"), "ef_error": ("EF error", "p.p."),
           "hd_ed": ("Hausdorff distance on the ED frame", "mm")}


def _value(row: pd.Series, metric: str) -> str:
    sd = row.get(f"{metric}_sd", float("nan"))
    unit = _LABELS[metric][1]
    seeds = row.get("n_seeds", float("nan"))
    over = f" over {int(seeds)} seeds" if pd.notna(seeds) else " over seeds"
    return f"{row[metric]:.2f} {unit}" + (f" (sd {sd:.2f}{over})" if pd.notna(sd) else "")


def claims(table: pd.DataFrame | None, swing: dict | None = None) -> list[dict]:
    """The paper's CAMUS findings as claim records (``shared.report.claim_record``: claim, holds, verdict
    "yes" / "no" / "not run", detail): clean training beats noisy training in Dice at ES and ED, in EF error and in
    HD (Table 6; "not run" where the table or a cell is missing / NaN); and the introduction's EF swing, from
    ``ef_swing``'s result (``swing``; "not run" without one or when its pair's EF is not 45 +- 2.5 %): "yes" when
    the +-5 % boundary changes reach down to 39 % and up to 50 % (1 p.p. tolerance), the claim being that such an
    error *can* swing the EF that far."""
    records = []
    rows = {}
    if table is not None and "training" in table:
        rows = {str(r["training"]).lower(): r for _, r in table.iterrows()}
    for metric in METRICS:
        name, _unit = _LABELS[metric]
        higher = HIGHER_IS_BETTER[metric]
        statement = (f"Training on clean masks gives a {'higher' if higher else 'lower'} {name} than training on "
                     "noisy masks (Table 6)")
        clean, noisy = rows.get("clean"), rows.get("noisy")
        if clean is None or noisy is None or metric not in clean or metric not in noisy:
            records.append(claim_record(statement, None, "no clean and noisy rows with this column"))
            continue
        c, n = float(clean[metric]), float(noisy[metric])
        holds = c > n if higher else c < n
        detail = f"clean {_value(clean, metric)} vs noisy {_value(noisy, metric)}"
        sds = [float(r.get(f"{metric}_sd", np.nan)) for r in (clean, noisy)]
        if all(np.isfinite(sds)) and np.isfinite(c - n) and abs(c - n) < max(sds):
            detail += "; the difference is within the seeds' sd"
        records.append(claim_record(statement, verdict(holds, c, n), detail))
    records.append(_swing_claim(swing))
    return records


def _swing_claim(swing: dict | None) -> dict:
    c = SWING_CLAIM
    statement = (f"A {c['relative']:.0%} boundary error around the LV cavity can swing the EF estimate from "
                 f"{c['ef']:g} % to {c['low']:g}-{c['high']:g} % (introduction)")
    if swing is None:
        return claim_record(statement, None, "ef_swing was not run")
    base = swing["ef"]
    if not np.isfinite(base) or abs(base - c["ef"]) > 2.5:
        return claim_record(statement, None, f"the pair's EF is {base:.1f} %, not about {c['ef']:g} %")
    low, high = swing["ef_min"], swing["ef_max"]
    holds = low <= c["low"] + 1.0 and high >= c["high"] - 1.0
    detail = (f"EF {base:.1f} % moves to {low:.1f}-{high:.1f} % over ED and ES boundaries changed by "
              f"{swing['relative']:.0%} ({swing['measure']} measure: {SWING_MEASURES[swing['measure']]}); "
              f"ES alone {swing['es_only'][0]:.1f}-{swing['es_only'][1]:.1f} %, ED alone "
              f"{swing['ed_only'][0]:.1f}-{swing['ed_only'][1]:.1f} %")
    return claim_record(statement, verdict(holds, low, high), detail)


# ------------------------------------------------------------------------------------------------ the EF swing
def lv_mask(size: int, a: float, b: float, *, centre=None, angle_deg: float = 0.0, cut: float | None = None
            ) -> np.ndarray:
    """(size, size) bool ellipse of semi-axes a (long, vertical at ``angle_deg`` 0) and b (pixels) centred at
    ``centre`` (row, column; default the image centre); with ``cut`` (fraction of the long axis, e.g. 0.93), cut
    flat at the base like the synthetic LV."""
    centre = np.array([size / 2 - 0.5, size / 2 - 0.5] if centre is None else centre, dtype=np.float64)
    angle = np.deg2rad(angle_deg)
    direction = np.array([np.cos(angle), np.sin(angle)])
    apex = centre - a * direction
    return _ellipse((size, size), apex, direction, a, b, cut=None if cut is None else cut * 2 * a)


def ellipse_lv_pair(ef: float = 45.0, size: int = 256, spacing=1.0, shortening: float = 0.9
                    ) -> tuple[np.ndarray, np.ndarray, float]:
    """A hand-made LV pair (ED, ES masks (size, size) bool) whose mask EF (``mask_ef``) is ``ef`` within the
    raster's resolution: ED an upright ellipse of semi-axes 0.35 and 0.17 x size, ES with the long axis times
    ``shortening`` and the short axis solved by bisection. Returns (ed, es, achieved EF)."""
    a, b = 0.35 * size, 0.17 * size
    ed = lv_mask(size, a, b)
    b_es = _bisect(lambda x: mask_ef(ed, lv_mask(size, shortening * a, x), spacing), 0.2 * b, b, ef)
    es = lv_mask(size, shortening * a, b_es)
    return ed, es, mask_ef(ed, es, spacing)


def scale_mask(mask: np.ndarray, factor: float) -> np.ndarray:
    """The mask scaled by ``factor`` about its centroid (bilinear warp of the 0/1 image, threshold 0.5)."""
    mask = np.asarray(mask, dtype=bool)
    rows, cols = np.nonzero(mask)
    if rows.size == 0:
        return mask.copy()
    cy, cx = rows.mean(), cols.mean()
    matrix = np.array([[factor, 0, (1 - factor) * cx], [0, factor, (1 - factor) * cy]], dtype=np.float64)
    warped = cv2.warpAffine(mask.astype(np.float32), matrix, mask.shape[::-1], flags=cv2.INTER_LINEAR)
    return warped >= 0.5


def move_boundary(mask: np.ndarray, change: float, measure: str = "area") -> np.ndarray:
    """The mask with its boundary moved out (``change`` > 0) or in: ``measure="area"`` scales it about its centroid
    so that its area changes by ``change`` (bisection on the raster), ``"linear"`` scales it by 1 + ``change``."""
    if measure not in SWING_MEASURES:
        raise unknown_choice("boundary measure", measure, SWING_MEASURES)
    if change == 0:
        return np.asarray(mask, dtype=bool).copy()
    if measure == "linear":
        return scale_mask(mask, 1 + change)
    area = np.count_nonzero(mask)
    target = area * (1 + change)
    factor = _bisect(lambda f: -np.count_nonzero(scale_mask(mask, f)), 0.5, 1.5, -target, iterations=25)
    return scale_mask(mask, factor)


def ef_swing(ed_mask: np.ndarray, es_mask: np.ndarray, spacing=1.0, relative: float = SWING_CLAIM["relative"],
             measure: str = "area") -> dict:
    """The EF of an LV pair when each frame's boundary is moved by -``relative``, 0 or +``relative``
    (``move_boundary``; 9 combinations). Returns ``{"ef": unperturbed, "ef_min", "ef_max" (all combinations),
    "es_only": (min, max) with ED untouched, "ed_only": (min, max), "table": frame (ed_change, es_change,
    ed_area_change, es_area_change, ef), "relative", "measure"}``."""
    changes = (-relative, 0.0, relative)
    moved = {(frame, c): move_boundary(mask, c, measure) for frame, mask in ((ED, ed_mask), (ES, es_mask))
             for c in changes}
    areas = {frame: np.count_nonzero(mask) for frame, mask in ((ED, ed_mask), (ES, es_mask))}
    rows = [{"ed_change": ce, "es_change": cs,
             "ed_area_change": np.count_nonzero(moved[ED, ce]) / areas[ED] - 1,
             "es_area_change": np.count_nonzero(moved[ES, cs]) / areas[ES] - 1,
             "ef": mask_ef(moved[ED, ce], moved[ES, cs], spacing)} for ce in changes for cs in changes]
    table = pd.DataFrame(rows)
    es_only, ed_only = table[table.ed_change == 0], table[table.es_change == 0]
    return {"ef": mask_ef(ed_mask, es_mask, spacing), "ef_min": float(table.ef.min()), "ef_max": float(table.ef.max()),
            "es_only": (float(es_only.ef.min()), float(es_only.ef.max())),
            "ed_only": (float(ed_only.ef.min()), float(ed_only.ef.max())),
            "table": table, "relative": relative, "measure": measure}


# ------------------------------------------------------------------------------------------------ Figure 9
def figure9_data(images: np.ndarray, clean_masks: np.ndarray, noisy_masks: np.ndarray, patients=(0, 1, 2),
                 spacing=1.0, ids: Sequence[str] | None = None) -> list[dict]:
    """Per chosen patient (indices into the arrays) and frame (ES first, as Fig. 9's top row): the image, the clean
    and noisy masks, their Dice (%) and the EF of the clean and noisy pairs (``mask_ef``); ``name`` from ``ids``."""
    spacings = _spacings(spacing, len(images))
    out = []
    for i in patients:
        name = str(ids[i]) if ids is not None else f"patient {int(i)}"
        ef_clean = mask_ef(clean_masks[i, ED], clean_masks[i, ES], spacings[i])
        ef_noisy = mask_ef(noisy_masks[i, ED], noisy_masks[i, ES], spacings[i])
        for frame in (ES, ED):
            out.append({"patient": int(i), "name": name, "frame": FRAMES[frame], "image": images[i, frame],
                        "clean": np.asarray(clean_masks[i, frame], bool),
                        "noisy": np.asarray(noisy_masks[i, frame], bool),
                        "dice": 100 * dice(clean_masks[i, frame], noisy_masks[i, frame]),
                        "ef_clean": ef_clean, "ef_noisy": ef_noisy})
    return out


def figure9(images: np.ndarray, clean_masks: np.ndarray, noisy_masks: np.ndarray, patients=(0, 1, 2),
            spacing=1.0, ids: Sequence[str] | None = None, report=None):
    """Fig. 9: ES (top) and ED (bottom) of a few patients, the clean LV mask (left of each pair) and its noisy
    version (right), outlined on the image, with the pair's EF and the noisy mask's Dice with the clean one.
    Returns the (closed) Figure; saved through ``report`` (a ``shared.report.NotebookReport``) if given."""
    import matplotlib.pyplot as plt

    from shared.plotting import finish_figure, set_style

    set_style()
    panels = figure9_data(images, clean_masks, noisy_masks, patients, spacing, ids)
    n = len(patients)
    fig, axes = plt.subplots(2, 2 * n, figsize=(2.4 * 2 * n, 5.2), squeeze=False)
    for k, panel in enumerate(panels):
        row, pair = (0 if panel["frame"] == "ES" else 1), k // 2
        for side, (kind, color) in enumerate((("clean", "#ffffff"), ("noisy", "#d55e00"))):
            ax = axes[row, 2 * pair + side]
            ax.imshow(panel["image"], cmap="gray", vmin=0, vmax=1)
            ax.contour(panel[kind].astype(float), levels=[0.5], colors=[color], linewidths=1.2)
            ef = panel[f"ef_{kind}"]
            title = f"{panel['name']} {panel['frame']}, {kind}\nEF {ef:.1f} %"
            ax.set_title(title + (f", Dice {panel['dice']:.1f}" if kind == "noisy" else ""), fontsize="small")
            ax.set(xticks=[], yticks=[])
            ax.grid(False)
    fig.suptitle("LV masks at ES (top) and ED (bottom): clean (white) vs noisy (orange; ES dilated, both jittered)")
    fig.tight_layout()
    return finish_figure(fig, report, "figure9")


__all__ = ["ED", "ES", "FRAMES", "TRAINING", "TABLE6_COLUMNS", "METRICS", "HIGHER_IS_BETTER", "DEFAULTS", "SMOKE",
           "SWING_CLAIM", "SWING_MEASURES", "EchoData", "mask_ef", "synthetic_camus", "fill_contours", "jitter_mask",
           "noise_parameters", "noisy_lv_masks", "check_hparams", "soft_dice_loss", "train_unet", "largest_component",
           "predict", "evaluate_masks", "evaluate", "split_patients", "clean_vs_noisy", "table6", "claims", "lv_mask",
           "ellipse_lv_pair", "scale_mask", "move_boundary", "ef_swing", "figure9_data", "figure9"]
