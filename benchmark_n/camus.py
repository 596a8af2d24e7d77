"""The CAMUS analogue of the paper's Appendix A: a U-Net trained on clean vs noisy left-ventricle (LV) masks
(Table 6: Dice at ES and ED, EF error, Hausdorff distance on the ED frame), the clean / noisy masks of Fig. 9, and
the introduction's "5 % boundary error swings the EF from 45 % to 39-50 %" checked on masks.

    data = synthetic_camus(48, seed=0)                       # offline stand-in; or load_camus("~/CAMUS_public")
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
* ``load_camus``: the public CAMUS release, both layouts, read without extra dependencies (plain NIfTI-1 and
  MetaImage parsers; checked against nibabel 5.4 and SimpleITK 2.5 when written): the current
  ``database_nifti/patientXXXX/patientXXXX_4CH_{ED,ES}[_gt].nii.gz`` and the older
  ``training/patientXXXX/patientXXXX_4CH_{ED,ES}[_gt].mhd`` + ``.raw``, with ``Info_4CH.cfg`` (``EF:`` in the current
  release, ``LVef:`` in the older one). Labels: 1 = LV cavity (kept), 2 = myocardium, 3 = left atrium. Images and
  label maps are resized to ``size`` x ``size`` (area / nearest-neighbour interpolation), the spacing rescaled per
  axis (CAMUS pixels are anisotropic, so the resized ones are too; the metrics take (row, column) spacing).

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
apply to whatever image it is given, and scaled down linearly the integer kernel truncates to a no-op (spec risk
28). At the stand-in's 64 px (2 mm pixels) this noise is physically several times the paper's if the paper noised
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

import gzip
import re
import struct
import time
import zlib
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
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
from shared.datasets.files import check_not_lfs_pointer, read_text
from shared.errors import ConfigError, DataFormatError, DataNotFoundError, unknown_choice
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
LV_LABEL = 1  # CAMUS: 1 = LV endocardium cavity, 2 = myocardium (epicardium minus cavity), 3 = left atrium
CAMUS_URL = "https://www.creatis.insa-lyon.fr/Challenge/camus/ (registration; research use only)"
FORMATS = {"nifti": ".nii.gz", "mhd": ".mhd"}
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


# ------------------------------------------------------------------------------------------------ real CAMUS files
_NIFTI_DTYPES = {2: "u1", 4: "i2", 8: "i4", 16: "f4", 64: "f8", 256: "i1", 512: "u2", 768: "u4", 1024: "i8",
                 1280: "u8"}
_NIFTI_UNITS_TO_MM = {0: 1.0, 1: 1000.0, 2: 1.0, 3: 0.001}  # unknown (taken as mm), metre, mm, micron
_MET_TYPES = {"MET_UCHAR": "u1", "MET_CHAR": "i1", "MET_USHORT": "u2", "MET_SHORT": "i2", "MET_UINT": "u4",
              "MET_INT": "i4", "MET_ULONG": "u8", "MET_LONG": "i8", "MET_ULONG_LONG": "u8", "MET_LONG_LONG": "i8",
              "MET_FLOAT": "f4", "MET_DOUBLE": "f8"}


def _as_2d(array: np.ndarray, path) -> np.ndarray:
    """Squeeze singleton axes; a 2-D image or DataFormatError (a sequence file, say)."""
    squeezed = np.squeeze(array)
    if squeezed.ndim != 2:
        raise DataFormatError(f"{path}: expected one 2-D frame, got an array of shape {array.shape} (a "
                              "*_half_sequence or *_sequence file? use the _ED / _ES files)")
    return squeezed


def read_nifti(path) -> tuple[np.ndarray, np.ndarray]:
    """A 2-D NIfTI-1 image (``.nii`` or ``.nii.gz``, single file, either byte order) as (array (H, W), spacing
    (row, column) in mm). The voxels are returned in storage order (x fastest, i.e. as SimpleITK's
    ``GetArrayFromImage`` gives them and as nibabel's ``get_fdata().T``); ``scl_slope`` / ``scl_inter`` applied
    when set. Refuses a git-LFS pointer, NIfTI-2 and the two-file .hdr/.img pair with a DataFormatError."""
    path = check_not_lfs_pointer(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise DataFormatError(f"{path}: a truncated or corrupt gzip file ({e})") from None
    if len(raw) < 348:
        raise DataFormatError(f"{path}: {len(raw)} bytes, too short for a NIfTI-1 header (348 bytes)")
    for order in "<>":
        size = struct.unpack(order + "i", raw[:4])[0]
        if size in (348, 540):
            break
    else:
        raise DataFormatError(f"{path}: not a NIfTI file (sizeof_hdr is neither 348 nor 540)")
    if size == 540:
        raise DataFormatError(f"{path}: a NIfTI-2 file; only NIfTI-1 (as CAMUS ships) is read here")
    magic = raw[344:348]
    if magic != b"n+1\x00":
        raise DataFormatError(f"{path}: NIfTI magic {magic!r}, expected b'n+1\\x00' (a single-file .nii); "
                              "a .hdr/.img pair is not supported")
    dims = struct.unpack(order + "8h", raw[40:56])
    datatype = struct.unpack(order + "h", raw[70:72])[0]
    pixdim = struct.unpack(order + "8f", raw[76:108])
    vox_offset = int(struct.unpack(order + "f", raw[108:112])[0])
    slope, inter = struct.unpack(order + "2f", raw[112:120])
    units = raw[123] & 0x07
    if datatype not in _NIFTI_DTYPES:
        raise DataFormatError(f"{path}: NIfTI datatype {datatype} is not supported "
                              f"(supported: {sorted(_NIFTI_DTYPES)})")
    ndim = dims[0]
    if not 1 <= ndim <= 7:
        raise DataFormatError(f"{path}: NIfTI dim[0] = {ndim}, expected 1..7")
    shape = tuple(int(d) for d in dims[1:ndim + 1])
    dtype = np.dtype(order + _NIFTI_DTYPES[datatype])
    count = int(np.prod(shape))
    if len(raw) < vox_offset + count * dtype.itemsize:
        raise DataFormatError(f"{path}: truncated: {len(raw) - vox_offset} bytes of voxel data, expected "
                              f"{count * dtype.itemsize} for shape {shape}")
    data = np.frombuffer(raw, dtype=dtype, count=count, offset=vox_offset).reshape(shape[::-1])
    if np.isfinite(slope) and slope != 0 and (slope != 1 or (np.isfinite(inter) and inter != 0)):
        data = data * slope + (inter if np.isfinite(inter) else 0.0)  # scl_slope 0 or NaN (nibabel's default): none
    mm = _NIFTI_UNITS_TO_MM.get(units, 1.0)
    spacing = np.array([pixdim[2] if ndim >= 2 else 1.0, pixdim[1]], dtype=np.float64) * mm
    return _as_2d(np.array(data), path), spacing


def write_camus_mhd(root, data: "EchoData", view: str = "4CH") -> Path:
    """Write ``data`` as the older CAMUS release (``root/training/patientXXXX/patientXXXX_<view>_{ED,ES}{,_gt}.mhd``
    + ``.raw``, 8-bit, the LV as label ``LV_LABEL``, and ``Info_<view>.cfg`` with ED, ES and LVef): the rehearsal's
    stand-in for the real files, read back by ``load_camus``. Returns the ``training`` folder."""
    folder = Path(root) / "training"
    for i, name in enumerate(data.ids):
        patient = folder / (name if re.fullmatch(r"patient\d{4}", name) else f"patient{i + 1:04d}")
        patient.mkdir(parents=True, exist_ok=True)
        row, col = (float(v) for v in data.spacing[i])
        for f, frame in enumerate(FRAMES):
            image = np.clip(np.asarray(data.images[i, f], float) * 255, 0, 255).round().astype(np.uint8)
            for suffix, array in (("", image), ("_gt", data.masks[i, f].astype(np.uint8) * LV_LABEL)):
                stem = patient / f"{patient.name}_{view}_{frame}{suffix}"
                h, w = array.shape
                stem.with_suffix(".raw").write_bytes(np.ascontiguousarray(array).tobytes())
                stem.with_suffix(".mhd").write_text(
                    "ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
                    f"ElementSpacing = {col} {row} 1\nDimSize = {w} {h} 1\nElementType = MET_UCHAR\n"
                    f"ElementDataFile = {stem.name}.raw\n")
        (patient / f"Info_{view}.cfg").write_text(f"ED: 1\nES: 2\nNbFrame: 2\nLVef: {data.ef[i]:.1f}\n")
    return folder


def _mhd_header(path: Path) -> dict[str, str]:
    header = {}
    for line in read_text(path).splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            header[key.strip()] = value.strip()
    return header


def read_mhd(path) -> tuple[np.ndarray, np.ndarray]:
    """A 2-D MetaImage (``.mhd`` header + data file, or ``.mha`` / ``ElementDataFile = LOCAL``) as (array (H, W),
    spacing (row, column) in mm); raw or zlib-compressed data, either byte order. A missing data file raises
    DataNotFoundError naming it; a git-LFS pointer (header or data) DataFormatError."""
    path = check_not_lfs_pointer(path)
    if path.suffix == ".mha":
        raise DataFormatError(f"{path}: single-file .mha images are not supported; use the .mhd + .raw pair")
    header = _mhd_header(path)
    missing = [k for k in ("DimSize", "ElementType", "ElementDataFile") if k not in header]
    if missing:
        raise DataFormatError(f"{path}: MetaImage header without {', '.join(missing)}")
    try:
        shape = tuple(int(v) for v in header["DimSize"].split())
        spacing_xyz = [float(v) for v in header.get("ElementSpacing", header.get("ElementSize", "1 1")).split()]
    except ValueError:
        raise DataFormatError(f"{path}: unreadable DimSize / ElementSpacing") from None
    if header["ElementType"] not in _MET_TYPES:
        raise DataFormatError(f"{path}: ElementType {header['ElementType']} is not supported "
                              f"({', '.join(_MET_TYPES)})")
    big = header.get("BinaryDataByteOrderMSB", header.get("ElementByteOrderMSB", "False")).lower() == "true"
    dtype = np.dtype((">" if big else "<") + _MET_TYPES[header["ElementType"]])
    if header["ElementDataFile"] == "LOCAL":
        raise DataFormatError(f"{path}: ElementDataFile = LOCAL (data inside the header) is not supported")
    data_path = path.parent / header["ElementDataFile"]
    if not data_path.is_file():
        raise DataNotFoundError(f"{data_path} does not exist; {path.name} names it as its data file")
    payload = check_not_lfs_pointer(data_path).read_bytes()
    if header.get("CompressedData", "False").lower() == "true":
        try:
            payload = zlib.decompress(payload)
        except zlib.error as e:
            raise DataFormatError(f"{data_path}: corrupt zlib data ({e})") from None
    count = int(np.prod(shape))
    if len(payload) != count * dtype.itemsize:
        raise DataFormatError(f"{data_path}: {len(payload)} bytes, expected {count * dtype.itemsize} for DimSize "
                              f"{header['DimSize']} of {header['ElementType']} (truncated or the wrong file?)")
    data = np.frombuffer(payload, dtype=dtype).reshape(shape[::-1])
    spacing = np.array([spacing_xyz[1] if len(spacing_xyz) > 1 else 1.0, spacing_xyz[0]], dtype=np.float64)
    return _as_2d(np.array(data), path), spacing


def read_info_cfg(path) -> dict[str, str]:
    """CAMUS's ``Info_2CH.cfg`` / ``Info_4CH.cfg``: ``Key: value`` lines (ED, ES, NbFrame, Sex, Age,
    ImageQuality and EF in the current release; LVedv, LVesv, LVef in the older one) as a dict of strings.
    BOM-tolerant; a git-LFS pointer raises DataFormatError."""
    info = {}
    for line in read_text(path).splitlines():
        match = re.match(r"\s*([A-Za-z_][\w ]*?)\s*:\s*(.*?)\s*$", line)
        if match:
            info[match.group(1)] = match.group(2)
    return info


def _reported_ef(info: dict[str, str], path) -> float:
    for key in ("EF", "LVef"):
        if key in info:
            try:
                return float(info[key])
            except ValueError:
                raise DataFormatError(f"{path}: {key}: {info[key]!r} is not a number") from None
    return float("nan")


def _patient_dirs(root: Path) -> tuple[Path, list[Path]]:
    """The folder holding the patientXXXX folders (root, root/database_nifti, root/training or root/testing)."""
    for folder in (root, root / "database_nifti", root / "training", root / "testing"):
        if folder.is_dir():
            found = sorted(p for p in folder.iterdir() if p.is_dir() and re.fullmatch(r"patient\d{4}", p.name))
            if found:
                return folder, found
    raise DataNotFoundError(
        f"no CAMUS patient folders under {root}. Expected {root / 'database_nifti' / 'patient0001'} with "
        f"patient0001_4CH_ED.nii.gz, patient0001_4CH_ED_gt.nii.gz, patient0001_4CH_ES.nii.gz, "
        f"patient0001_4CH_ES_gt.nii.gz and Info_4CH.cfg (current release), or "
        f"{root / 'training' / 'patient0001'} with the same names in .mhd + .raw (older release). "
        f"CAMUS: {CAMUS_URL}. Without it, use synthetic_camus().")


def locate_camus(root) -> Path:
    """The folder of CAMUS's patientXXXX folders under ``root`` (the release, ``database_nifti/``, ``training/`` or
    ``testing/``); DataNotFoundError naming the expected files and where to get them otherwise."""
    return _patient_dirs(Path(root))[0]


def _frame_files(folder: Path, view: str, fmt: str) -> dict[str, Path] | None:
    """{"ED", "ED_gt", "ES", "ES_gt"} paths in ``fmt`` ("nifti" / "mhd"); None when no file of that format is
    there at all."""
    ext = FORMATS[fmt]
    names = {f"{frame}{gt}": folder / f"{folder.name}_{view}_{frame}{gt}{ext}" for frame in FRAMES
             for gt in ("", "_gt")}
    if fmt == "nifti":  # an uncompressed .nii is as good
        names = {k: p if p.exists() or not p.with_suffix("").exists() else p.with_suffix("")
                 for k, p in names.items()}
    return names if any(p.exists() for p in names.values()) else None


def _resize(array: np.ndarray, size: int, label: bool) -> np.ndarray:
    interpolation = cv2.INTER_NEAREST if label else (
        cv2.INTER_AREA if min(array.shape) >= size else cv2.INTER_LINEAR)
    source = np.ascontiguousarray(array, dtype=np.uint8 if label else np.float32)
    return cv2.resize(source, (size, size), interpolation=interpolation)


def load_camus(root, *, view: str = "4CH", size: int = 256, fmt: str = "auto", patients=None,
               missing: str = "raise") -> EchoData:
    """The CAMUS ED/ES frames of one apical view with their LV masks, resized to ``size`` x ``size``.

    ``root``: the unpacked release (holding ``database_nifti/`` or ``training/``) or the folder of patient folders
    itself. ``fmt``: "nifti", "mhd" or "auto" (per patient, NIfTI when its files are there). ``patients``: names
    ("patient0001") or numbers to load (default: all, sorted). ``missing``: "raise" (DataNotFoundError naming the
    first missing file, e.g. a ``_gt`` of the unlabelled test patients of the older release) or "skip" (leave such
    patients out; ``ids`` says who is in). Images are scaled to [0, 1] by their dtype's range (uint8: / 255; other
    types by their own maximum); masks are label ``LV_LABEL`` of the ``_gt`` files. ``ef`` is ``mask_ef`` of the
    resized masks (single plane); ``ef_reference`` the cfg's ``EF`` / ``LVef`` (biplane Simpson, NaN if absent).
    """
    if view not in ("2CH", "4CH"):
        raise unknown_choice("CAMUS view", view, ("2CH", "4CH"))
    if fmt not in ("auto", *FORMATS):
        raise unknown_choice("CAMUS format", fmt, ("auto", *FORMATS))
    if missing not in ("raise", "skip"):
        raise unknown_choice("missing-file policy", missing, ("raise", "skip"))
    if size < 32 or size % 4:
        raise ConfigError(f"size must be >= 32 and divisible by 4 (the U-Net pools twice), got {size}")
    root = Path(root).expanduser()
    if not root.exists():
        raise DataNotFoundError(f"{root} does not exist; expected the unpacked CAMUS release "
                                f"({root / 'database_nifti' / 'patient0001'} ...). CAMUS: {CAMUS_URL}")
    folder, found = _patient_dirs(root)
    if patients is not None:
        wanted = [p if isinstance(p, str) else f"patient{int(p):04d}" for p in patients]
        by_name = {p.name: p for p in found}
        absent = [w for w in wanted if w not in by_name]
        if absent:
            raise DataNotFoundError(f"patient folder(s) {', '.join(str(folder / a) for a in absent[:5])} not found")
        found = [by_name[w] for w in wanted]
    images, masks, spacings, ids, reported, sources = [], [], [], [], [], set()
    for patient in progress(found, desc="CAMUS patients"):
        try:
            frames, spacing, ef_ref, used = _load_patient(patient, view, fmt, size)
        except DataNotFoundError:
            if missing == "skip":
                continue
            raise
        images.append(frames[0])
        masks.append(frames[1])
        spacings.append(spacing)
        ids.append(patient.name)
        reported.append(ef_ref)
        sources.add(used)
    if not ids:
        raise DataNotFoundError(f"no complete CAMUS {view} patient (images, _gt masks) under {folder}")
    masks = np.stack(masks)
    spacings = np.stack(spacings)
    ef = np.array([mask_ef(m[ED], m[ES], s) for m, s in zip(masks, spacings)])
    return EchoData(np.stack(images), masks, ef, spacings, ids, "camus-" + "+".join(sorted(sources)),
                    np.array(reported, dtype=np.float64))


def _unit_range(image: np.ndarray) -> np.ndarray:
    """Intensities in [0, 1]: 8-bit ranges (any dtype with values in 0..255, floats above 1) divided by 255, floats
    already in [0, 1] kept, wider ranges divided by their maximum."""
    values = image.astype(np.float64)
    low, high = float(values.min()), float(values.max())
    if image.dtype.kind == "f" and low >= 0 and high <= 1:
        return values
    top = 255.0 if low >= 0 and high <= 255 else max(high, 1e-12)
    return np.clip(values / top, 0, 1)


def _load_patient(folder: Path, view: str, fmt: str, size: int):
    """((images (2, S, S), masks (2, S, S)), spacing (2,) at size S, reported EF, format used)."""
    formats = list(FORMATS) if fmt == "auto" else [fmt]
    files, used = None, None
    for candidate in formats:
        files = _frame_files(folder, view, candidate)
        if files is not None:
            used = candidate
            break
    if files is None:
        expected = [folder / f"{folder.name}_{view}_ED{FORMATS[f]}" for f in formats]
        raise DataNotFoundError(f"no {view} ED/ES files in {folder}: expected {' or '.join(map(str, expected))} "
                                "(and _ES, _ED_gt, _ES_gt)")
    for key, path in files.items():
        if not path.exists():
            raise DataNotFoundError(f"{path} does not exist ({key.replace('_gt', ' ground truth')} frame of "
                                    f"{folder.name}, {view} view)")
    reader = read_nifti if used == "nifti" else read_mhd
    images, masks, spacing = [], [], None
    for frame in FRAMES:
        image, image_spacing = reader(files[frame])
        labels, label_spacing = reader(files[f"{frame}_gt"])
        if image.shape != labels.shape:
            raise DataFormatError(f"{files[frame]} is {image.shape} but {files[frame + '_gt']} is {labels.shape}")
        if not np.any(labels == LV_LABEL):
            raise DataFormatError(f"{files[frame + '_gt']} has no LV pixel (label {LV_LABEL})")
        images.append(_resize(_unit_range(image), size, label=False))
        masks.append(_resize(labels == LV_LABEL, size, label=True).astype(bool))
        frame_spacing = image_spacing * np.array(image.shape, dtype=np.float64) / size
        if spacing is not None and not np.allclose(frame_spacing, spacing, rtol=1e-3):
            raise DataFormatError(f"{folder.name}: the ED and ES frames cover different extents "
                                  f"({spacing * size} vs {frame_spacing * size} mm); cannot share one spacing")
        spacing = frame_spacing
    cfg = folder / f"Info_{view}.cfg"
    ef_ref = _reported_ef(read_info_cfg(cfg), cfg) if cfg.exists() else float("nan")
    return (np.stack(images), np.stack(masks)), spacing, ef_ref, used


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


__all__ = ["write_camus_mhd", "ED", "ES", "FRAMES", "TRAINING", "TABLE6_COLUMNS", "METRICS", "HIGHER_IS_BETTER",
           "DEFAULTS", "SMOKE", "LV_LABEL", "SWING_CLAIM", "SWING_MEASURES", "EchoData", "mask_ef", "synthetic_camus",
           "read_nifti", "read_mhd", "read_info_cfg", "locate_camus", "load_camus", "fill_contours", "jitter_mask",
           "noise_parameters", "noisy_lv_masks", "check_hparams", "soft_dice_loss", "train_unet", "largest_component",
           "predict", "evaluate_masks", "evaluate", "split_patients", "clean_vs_noisy", "table6", "claims", "lv_mask",
           "ellipse_lv_pair", "scale_mask", "move_boundary", "ef_swing", "figure9_data", "figure9"]
