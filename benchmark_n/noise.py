"""Annotation noise for COCO instance segmentation: the Benchmark-N noise engines and the single-noise ablation.

    from benchmark_n.noise import noise_dataset, ablate
    noisy = noise_dataset(coco, engine="paper", tier="high", seed=0)       # Table 1 (official v2 semantics)
    noisy.dataset                      # a new COCO dict; ``coco`` is never mutated
    noisy.manifest["deleted"], noisy.manifest["class_flipped"]            # what the noise did
    noise_dataset(coco, engine="legacy_v0", tier="hard", seed=0)          # the README's noise_annotations.py
    ablate(coco, "erosion", "mid")                                         # Table 7: one operation, every instance

Engines (``ENGINES``):

* ``"paper"`` -- Table 1 as implemented in the official ``noise_annotations_v2.py`` (mkimhi/noisy_labels):
  deletion, sibling class flip, then polygon approximation, vertex jitter and random dilate/erode, all applied
  to every instance with parameters drawn from N(mu, sigma) clipped at 0. Output segmentations are polygons.
* ``"legacy_v0"`` -- the public ``noise_annotations.py --benchmark easy|medium|hard`` (the official README's entry
  point, eden500/Noisy-Labels-Instance-Segmentation): class mixing over all categories, then at most one of
  approximation / localization / dilate-or-erode with fixed parameters. Noised segmentations are compressed RLE.
  Probably the engine behind Tables 3, 8, 11, 13.

Tiers: ``"low"``, ``"mid"``, ``"high"``, also spelled ``"easy"``, ``"medium"``, ``"hard"`` (``TIERS``), for
both engines; the manifest stores the canonical low/mid/high name.

Randomness: annotation ``id`` gets its own generator ``np.random.default_rng([seed, code, id])``, ``code``
being the engine's (``ENGINES[...].code``) or the ablation's, so a variant does not depend on the order of the
annotations or on which other annotations are noised with it, and the same seed and options give byte-identical
JSON (``benchmark_n.coco.write_coco``). The tier is not part of the key: with one seed, the tiers of an engine
share their random numbers (the same instances are deleted or flipped; only the spatial parameters differ).

Every processed annotation gets an extra key (pycocotools ignores it)::

    "noise": {"class_flipped": bool, "original_category_id": int, "spatial": ["approximation", ...]}

``spatial`` names the spatial operations that changed it: ``approximation``, ``localization``, ``dilation``,
``erosion`` (and ``opening`` / ``shift`` in the ablation). Crowd annotations skipped by ``skip_crowd`` are
copied unchanged, without that key. Polygons are (N, 2) float arrays of (x, y) pixels, open rings (the first
vertex is not repeated at the end).
"""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from functools import cached_property, partial
from typing import Callable, Mapping, Sequence

import cv2
import numpy as np
import shapely
from shapely.geometry import Polygon
from shapely.ops import unary_union

from benchmark_n.coco import (
    ann_to_mask,
    ann_to_polygons,
    check_coco,
    image_sizes,
    mask_to_polygons,
    mask_to_rle,
    segmentation_fields,
)
from shared.cache import code_fingerprint
from shared.errors import ConfigError, DataFormatError, unknown_choice
from shared.progress import progress

TIERS = {"low": "low", "mid": "mid", "high": "high", "easy": "low", "medium": "mid", "hard": "high"}
TIER_ORDER = ("low", "mid", "high")  # the canonical tiers, mildest first
COUNTS = ("annotations_in", "kept", "deleted", "implicitly_deleted", "class_flipped", "spatially_noised",
          "crowd_skipped")
DELETED, IMPLICITLY_DELETED = "deleted", "implicitly_deleted"  # the per-annotation outcomes that drop it
PROGRESS_MIN = 1000  # show a progress bar from this many annotations on
_EMPTY = np.zeros((0, 2))


# ------------------------------------------------------------------------------------------------ presets
@dataclass(frozen=True)
class PaperPreset:
    """One tier of Table 1: (mean, std) in pixels of the Douglas-Peucker tolerance (approximation), of the vertex
    jitter std (localization) and of the square kernel side (scale); class-flip and deletion probabilities."""
    approximation: tuple[float, float]
    localization: tuple[float, float]
    scale: tuple[float, float]
    p_cls: float = 0.05
    p_del: float = 0.05


@dataclass(frozen=True)
class LegacyV0Preset:
    """One ``Benchmarks`` entry of the official ``noise_annotations.py``: ``(share of instances, parameter)`` of
    each spatial noise (Douglas-Peucker tolerance px, vertex jitter std px, dilate/erode kernel side px; the
    shares are the weights of a single choice, "none" taking the rest) and the class mixing ratio p."""
    approximation: tuple[float, float]
    localization: tuple[float, float]
    rand: tuple[float, int]
    flip_class: float


PRESETS = {  # Table 1 (= noise_bases / std_coeffidients of noise_annotations_v2_wrapper)
    "low": PaperPreset(approximation=(5, 2.5), localization=(2, 0.5), scale=(3, 1)),
    "mid": PaperPreset(approximation=(10, 2.5), localization=(3, 0.5), scale=(5, 1)),
    "high": PaperPreset(approximation=(15, 10), localization=(4, 2), scale=(7, 4)),
}
LEGACY_V0_PRESETS = {  # official names easy / medium / hard
    "low": LegacyV0Preset(approximation=(0.2, 5), localization=(0.2, 2), rand=(0.2, 3), flip_class=0.2),
    "mid": LegacyV0Preset(approximation=(0.25, 10), localization=(0.25, 3), rand=(0.25, 5), flip_class=0.3),
    "high": LegacyV0Preset(approximation=(0.3, 15), localization=(0.3, 4), rand=(0.3, 7), flip_class=0.4),
}


def canonical_tier(tier: str) -> str:
    """``"low"``/``"mid"``/``"high"`` for a tier name or its alias easy/medium/hard."""
    if tier not in TIERS:
        raise unknown_choice("tier", tier, TIERS)
    return TIERS[tier]


@dataclass
class NoisyDataset:
    """``dataset``: the noisy COCO dict (every top-level key of the input, annotations replaced, input order
    kept); ``manifest``: engine (or ablation operation), tier, seed, options, parameters, ``code`` (fingerprint
    of this module's code) and the counts ``COUNTS``."""
    dataset: dict
    manifest: dict


# ------------------------------------------------------------------------------------------------ single operations
JITTER_MODES = {
    "v2": "+ N(0, sd) per coordinate (official v2)",
    "v0": "+ round(N(0, sd)) per coordinate (official v0; integer vertices stay integer)",
    "paper_literal": "+ s * |N(mu, sd)|, s = -1 or +1 at random per coordinate (the paper's text)",
}
MORPH_OPS = ("dilate", "erode", "open")


def approximate(polygon, tol: float) -> np.ndarray:
    """Douglas-Peucker simplification of one ring, shapely ``simplify(tol, preserve_topology=True)``.

    ``polygon``: (N, 2) vertices, open or closed; ``tol`` >= 0 px. Returns the simplified exterior (M, 2), open;
    (0, 2) when the ring has 3 or fewer vertices (both official engines drop such parts) or collapses."""
    ring = _open_ring(polygon)
    if len(ring) <= 3:
        return _EMPTY
    simple = Polygon(ring).simplify(float(tol), preserve_topology=True)
    return _EMPTY if simple.is_empty else np.asarray(simple.exterior.coords)[:-1]


def jitter(polygon, sd: float, rng: np.random.Generator, mode: str = "v2", mu: float = 0.0) -> np.ndarray:
    """Vertex jitter of one ring: (N, 2) -> (N, 2), x and y displaced independently (``JITTER_MODES``); ``mu`` is
    used by ``"paper_literal"`` only. A closed ring (first vertex repeated last) stays closed, as in v2."""
    points = np.asarray(polygon, dtype=np.float64).reshape(-1, 2)
    if mode == "v2":
        delta = rng.normal(0.0, sd, points.shape)
    elif mode == "v0":
        delta = np.round(rng.normal(0.0, sd, points.shape))
    elif mode == "paper_literal":
        delta = np.abs(rng.normal(mu, sd, points.shape)) * rng.choice((-1.0, 1.0), points.shape)
    else:
        raise unknown_choice("jitter mode", mode, JITTER_MODES)
    out = points + delta
    if len(points) > 1 and np.array_equal(points[0], points[-1]):
        out[-1] = out[0]
    return out


def morph(mask: np.ndarray, k: int, op: str) -> np.ndarray:
    """(h, w) binary mask -> (h, w) uint8: OpenCV ``dilate``, ``erode`` or ``open`` (erode then dilate) with an
    ``np.ones((k, k))`` kernel (k may be even); k <= 1 returns a copy."""
    if op not in MORPH_OPS:
        raise unknown_choice("morphological operation", op, MORPH_OPS)
    mask = np.ascontiguousarray(mask, dtype=np.uint8)
    if k <= 1:
        return mask.copy()
    kernel = np.ones((int(k), int(k)), np.uint8)
    if op == "open":
        return cv2.morphologyEx(mask, cv2.MORPH_OPEN, kernel)
    return cv2.dilate(mask, kernel) if op == "dilate" else cv2.erode(mask, kernel)


def shift(mask: np.ndarray, dx: int, dy: int) -> np.ndarray:
    """(h, w) mask translated by (dx, dy) whole pixels (x right, y down); what leaves the image is lost, what
    enters is 0."""
    h, w = mask.shape
    dx, dy = int(dx), int(dy)
    out = np.zeros_like(mask)
    if abs(dx) < w and abs(dy) < h:
        out[max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
            mask[max(-dy, 0):h - max(dy, 0), max(-dx, 0):w - max(dx, 0)]
    return out


def sibling_map(categories: Sequence[dict]) -> dict[int, list[int]]:
    """category id -> the other category ids of its ``supercategory`` (a category without that key belongs to
    the group ``"object"``, as in the official v2, so Cityscapes and LVIS have one group)."""
    groups: dict = {}
    for cat in categories:
        groups.setdefault(cat.get("supercategory", "object"), []).append(cat["id"])
    return {cat["id"]: [c for c in groups[cat.get("supercategory", "object")] if c != cat["id"]]
            for cat in categories}


def sibling_flip(category_id: int, siblings: Mapping[int, Sequence[int]], rng: np.random.Generator) -> int:
    """A category drawn uniformly from ``siblings[category_id]`` (``sibling_map``); ``category_id`` itself when
    it has no sibling."""
    others = siblings.get(category_id, ())
    return others[int(rng.integers(len(others)))] if others else category_id


CLASS_MATRICES = {
    "uniform": "C = p/K 11^T + (1-p) I over all K categories (official uniform_mix_C)",
    "superclass": "mass p spread uniformly over the super-category, c included (uniform_assymetric_mix_C)",
}


def class_matrix(categories: Sequence[dict], p: float, kind: str = "uniform") -> np.ndarray:
    """(K, K) row-stochastic class-noise matrix of the v0 engine, rows and columns in the order of
    ``categories``; the effective flip rate of class c is p (1 - 1/K) ("uniform") or p (1 - 1/|group of c|)
    ("superclass"; a category without ``supercategory`` is in group "object", where v0 raised KeyError)."""
    if kind not in CLASS_MATRICES:
        raise unknown_choice("class matrix", kind, CLASS_MATRICES)
    k = len(categories)
    if kind == "uniform":
        return np.full((k, k), p / k) + (1 - p) * np.eye(k)
    group = [cat.get("supercategory", "object") for cat in categories]
    same = np.equal.outer(group, group)
    return same * (p / same.sum(axis=1, keepdims=True)) + (1 - p) * np.eye(k)


# ------------------------------------------------------------------------------------------------ geometry helpers
def _open_ring(polygon) -> np.ndarray:
    ring = np.asarray(polygon, dtype=np.float64).reshape(-1, 2)
    return ring[:-1] if len(ring) > 1 and np.array_equal(ring[0], ring[-1]) else ring


def _fill(polygons, h: int, w: int) -> np.ndarray:
    """(h, w) uint8 union of the parts with >= 3 vertices, cv2.fillPoly with vertices truncated to int32 as in
    the official code; parts filled one by one, so overlapping parts do not cancel."""
    mask = np.zeros((h, w), np.uint8)
    for part in polygons:
        if len(part) >= 3:
            cv2.fillPoly(mask, [np.asarray(part).astype(np.int32)], 1)
    return mask


def _union_exteriors(polygons) -> list[np.ndarray]:
    """The official clean-up: parts with >= 3 vertices, invalid ones ``buffer(0)``, ``unary_union``, exteriors of
    the non-empty polygons (holes dropped), as open rings."""
    shapes = [Polygon(p) for p in polygons if len(p) >= 3]
    union = unary_union([s if s.is_valid else s.buffer(0) for s in shapes])
    return [np.asarray(g.exterior.coords)[:-1] for g in shapely.get_parts(union)
            if isinstance(g, Polygon) and not g.is_empty]


def _draw(rng: np.random.Generator, mean_std: tuple[float, float]) -> float:
    return max(float(rng.normal(*mean_std)), 0.0)


def _draws(rng: np.random.Generator, mean_std: tuple[float, float], n: int, per: str) -> np.ndarray:
    """n parameters max(N(mu, sigma), 0): one per part, or one shared by the annotation (``per="instance"``)."""
    if per == "instance":
        return np.full(n, _draw(rng, mean_std))
    return np.maximum(rng.normal(*mean_std, size=n), 0.0)


def _mark(ann: dict, original_category: int, spatial: list[str]) -> dict:
    ann["noise"] = {"class_flipped": ann["category_id"] != original_category,
                    "original_category_id": original_category, "spatial": spatial}
    return ann


# ------------------------------------------------------------------------------------------------ engine "paper"
PAPER_STEPS = ("deletion", "class_flip", "approximation", "localization", "scale")
_SPATIAL_STEPS = ("approximation", "localization", "scale")
_OP_NAMES = {"dilate": "dilation", "erode": "erosion", "open": "opening"}


@dataclass(frozen=True)
class _PaperConfig:
    preset: PaperPreset
    siblings: dict
    steps: tuple[str, ...] = PAPER_STEPS
    class_flip: str = "sibling"
    loc_mode: str = "v2"
    sample_per: str = "part"
    clip_to_image: bool = True


def _noise_paper(ann: dict, h: int, w: int, rng: np.random.Generator, cfg: _PaperConfig) -> dict | str:
    """One annotation, v2 order: deletion, class flip, then the spatial steps; the annotation or an outcome."""
    if "deletion" in cfg.steps and rng.random() < cfg.preset.p_del:
        return DELETED
    original = ann["category_id"]
    if "class_flip" in cfg.steps and rng.random() < cfg.preset.p_cls:
        if cfg.class_flip == "sibling":
            ann["category_id"] = sibling_flip(original, cfg.siblings, rng)
        elif cfg.siblings.get(original):  # the released v2, as written (the same draw, so the geometry is the same):
            index = int(rng.integers(len(cfg.siblings[original])))  # np.random.choice(n): an index, not an id
            if index == original:  # bool_class_noise = orig == updated; written only when "unchanged"
                ann["category_id"] = index
    spatial = []
    if any(step in cfg.steps for step in _SPATIAL_STEPS):
        polygons, spatial = _paper_geometry(ann_to_polygons(ann, h, w), h, w, rng, cfg)
        fields = segmentation_fields(polygons, h, w) if polygons else None
        if fields is None or fields["area"] == 0:
            return IMPLICITLY_DELETED
        ann.update(fields)
    return _mark(ann, original, spatial)


def _paper_geometry(polygons: list, h: int, w: int, rng: np.random.Generator,
                    cfg: _PaperConfig) -> tuple[list[np.ndarray], list[str]]:
    """Approximation and localization per part, clipping, dilate/erode of the rasterised parts, clean-up."""
    spatial = []
    if "approximation" in cfg.steps:
        tols = _draws(rng, cfg.preset.approximation, len(polygons), cfg.sample_per)
        polygons = [approximate(p, t) for p, t in zip(polygons, tols)]
        spatial += ["approximation"] if np.any(tols > 0) else []
    if "localization" in cfg.steps:
        polygons, moved = _localize(polygons, rng, cfg)
        spatial += ["localization"] if moved else []
    if cfg.clip_to_image:
        polygons = [np.clip(p, 0, (w, h)) for p in polygons]
    if "scale" in cfg.steps:
        k = int(_draw(rng, cfg.preset.scale))
        if k > 1:
            op = "dilate" if rng.random() < 0.5 else "erode"
            polygons = mask_to_polygons(morph(_fill(polygons, h, w), k, op))
            spatial.append(_OP_NAMES[op])
    return [np.round(p, 2) for p in _union_exteriors(polygons)], spatial


def _localize(polygons: list, rng: np.random.Generator, cfg: _PaperConfig) -> tuple[list[np.ndarray], bool]:
    mu, sigma = cfg.preset.localization
    if cfg.loc_mode == "paper_literal":
        return [jitter(p, sigma, rng, "paper_literal", mu=mu) for p in polygons], mu > 0 or sigma > 0
    sds = _draws(rng, cfg.preset.localization, len(polygons), cfg.sample_per)
    return [jitter(p, sd, rng) for p, sd in zip(polygons, sds)], bool(np.any(sds > 0))


def _build_paper(dataset: dict, preset: PaperPreset, options: dict) -> Callable:
    cfg = _PaperConfig(preset, sibling_map(dataset["categories"]), PAPER_STEPS, options["class_flip"],
                       options["loc_mode"], options["sample_per"], options["clip_to_image"])
    return partial(_noise_paper, cfg=cfg)


# ------------------------------------------------------------------------------------------------ engine "legacy_v0"
def _random_scale(mask: np.ndarray, k: int, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    op = "dilate" if rng.random() < 0.5 else "erode"
    return morph(mask, k, op), _OP_NAMES[op]


def _contour_localization(mask: np.ndarray, sd: float, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """v0: every external contour jittered by round(N(0, sd)), filled, OR-ed (contours of fewer than 3 vertices,
    1-px specks and lines, are dropped)."""
    return _fill([jitter(p, sd, rng, "v0") for p in mask_to_polygons(mask)], *mask.shape), "localization"


def _contour_approximation(mask: np.ndarray, tol: float, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """v0: every external contour of >= 4 vertices simplified, filled, OR-ed (smaller ones dropped)."""
    return _fill([approximate(p, tol) for p in mask_to_polygons(mask)], *mask.shape), "approximation"


_LEGACY_KINDS = ("approximation", "localization", "rand", "none")
_LEGACY_OPS = {"approximation": _contour_approximation, "localization": _contour_localization, "rand": _random_scale}


@dataclass(frozen=True)
class _LegacyConfig:
    preset: LegacyV0Preset
    category_ids: tuple[int, ...]  # rows and columns of the matrix
    matrix: np.ndarray = field(repr=False)
    stale_box_area: bool = False

    @cached_property
    def row(self) -> dict[int, int]:
        return {cat: i for i, cat in enumerate(self.category_ids)}

    @cached_property
    def weights(self) -> list[float]:
        shares = [self.preset.approximation[0], self.preset.localization[0], self.preset.rand[0]]
        return [*shares, 1.0 - sum(shares)]


def _mask_noise(ann: dict, h: int, w: int, rng: np.random.Generator, op: Callable, parameter,
                stale_box_area: bool = False) -> str | None:
    """Apply a mask operation to ``ann`` in place (compressed RLE out); its spatial name, or None when the noisy
    mask is empty (the annotation is then an implicit deletion)."""
    mask, name = op(ann_to_mask(ann, h, w), parameter, rng)
    if not mask.any():
        return None
    rle = mask_to_rle(mask)
    ann.update({"segmentation": rle} if stale_box_area else segmentation_fields(rle, h, w))
    return name


def _noise_legacy(ann: dict, h: int, w: int, rng: np.random.Generator, cfg: _LegacyConfig) -> dict | str:
    """One annotation of v0: class from row c of the class matrix, then one spatial noise kind (or none)."""
    original = ann["category_id"]
    row = cfg.matrix[cfg.row[original]]
    ann["category_id"] = cfg.category_ids[int(rng.choice(len(row), p=row))]
    kind = _LEGACY_KINDS[int(rng.choice(len(_LEGACY_KINDS), p=cfg.weights))]
    if kind == "none":
        return _mark(ann, original, [])
    name = _mask_noise(ann, h, w, rng, _LEGACY_OPS[kind], getattr(cfg.preset, kind)[1], cfg.stale_box_area)
    return IMPLICITLY_DELETED if name is None else _mark(ann, original, [name])


def _build_legacy(dataset: dict, preset: LegacyV0Preset, options: dict) -> Callable:
    categories = dataset["categories"]
    cfg = _LegacyConfig(preset, tuple(c["id"] for c in categories),
                        class_matrix(categories, preset.flip_class, options["class_matrix"]),
                        options["stale_box_area"])
    return partial(_noise_legacy, cfg=cfg)


# ------------------------------------------------------------------------------------------------ engines
@dataclass(frozen=True)
class Engine:
    """A noise engine: ``code`` keys its random streams; ``options`` maps each keyword option to its valid
    values, the first being the default; ``build(dataset, preset, options)`` returns the per-annotation noise
    ``(ann, h, w, rng) -> ann | "deleted" | "implicitly_deleted"``."""
    code: int
    description: str
    presets: dict
    options: dict[str, tuple]
    build: Callable


ENGINES = {
    "paper": Engine(1, "Table 1, official noise_annotations_v2.py semantics (class flip fixed by default)", PRESETS,
                    {"class_flip": ("sibling", "v2_asis"), "skip_crowd": (True, False),
                     "loc_mode": ("v2", "paper_literal"), "sample_per": ("part", "instance"),
                     "clip_to_image": (True, False)}, _build_paper),
    "legacy_v0": Engine(2, "the README's noise_annotations.py --benchmark easy|medium|hard", LEGACY_V0_PRESETS,
                        {"class_matrix": ("uniform", "superclass"), "skip_crowd": (True, False),
                         "stale_box_area": (False, True)}, _build_legacy),
}


def noise_dataset(dataset: dict, engine: str = "paper", tier: str = "low", seed: int = 0,
                  **options) -> NoisyDataset:
    """A noisy copy of a COCO instances dict (checked first with ``check_coco``; never mutated).

    Engine ``"paper"`` (``PRESETS``), per annotation in the v2 order: deletion with p_del; class flip with p_cls
    to a uniformly chosen other category of the same super-category; per polygon part, approximation
    (tol = max(N(mu_a, s_a), 0); parts of <= 3 vertices vanish, as in v2) and localization (sd = max(N(mu_l,
    s_l), 0), each x and y + N(0, sd)); per annotation, k = int(max(N(mu_s, s_s), 0)) and, for k > 1, the parts
    are rasterised and dilated or eroded (50/50) with a k x k kernel and re-vectorised (external contours);
    clean-up (``buffer(0)``, union, exteriors only); nothing left -> implicit deletion. RLE inputs are
    polygonised (external contours; holes lost), as in v2. Options (first = default):

    * ``class_flip``: ``"sibling"``, or ``"v2_asis"``: the official net effect, no category ever changes (v2 draws
      an *index* 0..n-1 instead of a category id, then writes it only when it equals the original, an inverted
      test). The same random numbers are drawn, so the geometry equals that of ``"sibling"``.
    * ``skip_crowd``: True (iscrowd=1 copied unchanged) or False (noised like the others, as v2 does).
    * ``loc_mode``: ``"v2"``, or ``"paper_literal"``: each coordinate moves by s |N(mu_l, s_l)|, random sign s.
    * ``sample_per``: ``"part"`` (v2: tolerance and jitter sd drawn per polygon part) or ``"instance"`` (the
      paper's text: one draw per annotation; no effect on ``paper_literal`` jitter, which is per vertex).
    * ``clip_to_image``: True (vertices clipped into [0, w] x [0, h] after the jitter) or False (v2: not clipped).

    Other deviations from v2 (on purpose): annotation order kept (v2 shuffles with a global seed);
    per-annotation random streams; ``area``/``bbox`` are pycocotools' of the written polygons, so that they
    agree with what COCOeval rasterises (v2: cv2.fillPoly pixel count and vertex extent), and an annotation
    whose polygons cover no pixel is an implicit deletion; k = 1 changes nothing (v2 re-rasterises, turning the
    polygon into its pixel outline); parts are rasterised one by one (v2's single fillPoly call makes
    overlapping parts cancel); coordinates are rounded to 0.01 px.

    Engine ``"legacy_v0"`` (``LEGACY_V0_PRESETS``), mask-based: new class drawn from row c of the class matrix
    (``class_matrix``; option ``class_matrix`` = ``"uniform"`` or ``"superclass"``); exactly one of
    approximation (contours of >= 4 vertices simplified), localization (contour vertices + round(N(0, std))),
    rand (dilate or erode 50/50, fixed k x k kernel) or none, with weights (p_a, p_l, p_r, 1 - sum); no
    deletion. A noised segmentation is written as compressed RLE, an un-noised one is left as it was (as v0
    does); an empty noisy mask is an implicit deletion (v0 writes the empty mask). Options ``skip_crowd`` (as
    above; v0 noises crowds) and ``stale_box_area``: False recomputes ``area``/``bbox`` from the noisy mask;
    True reproduces the official script, which leaves the clean ones, so that detectors train their box head on
    clean boxes while the masks are noisy (plausibly why box AP drops less than mask AP, Table 11 vs 3). v0's
    Python ``random`` was never seeded; here every draw comes from the annotation's stream.

    ``seed``: a non-negative int. Returns a ``NoisyDataset``; the manifest has engine, tier, seed, options,
    preset, code and the ``COUNTS`` (implicit deletions: spatial noise left nothing, e.g. erosion of a thin
    object or approximation of a tiny part). Raises ConfigError for an unknown engine, tier or option, and
    DataFormatError (naming the annotation) for a malformed dataset.
    """
    if engine not in ENGINES:
        raise unknown_choice("engine", engine, ENGINES)
    spec, tier = ENGINES[engine], canonical_tier(tier)
    options = _resolve_options(engine, spec.options, options)
    check_coco(dataset)
    preset = spec.presets[tier]
    noisy, counts = _run(dataset, spec.build(dataset, preset, options), spec.code, seed, options["skip_crowd"],
                         f"{engine} noise, {tier}")
    manifest = {"engine": engine, "tier": tier, "seed": seed, "options": options, "preset": asdict(preset),
                "code": code_fingerprint(noise_dataset), **counts}
    return NoisyDataset(noisy, manifest)


def engine_settings(engine: str, tier: str, seed: int, **options) -> dict:
    """What a ``noise_dataset`` call is made of, checked, with every option resolved: engine, tier (canonical), seed,
    options and the code fingerprint (the keys its manifest records for them)."""
    if engine not in ENGINES:
        raise unknown_choice("engine", engine, ENGINES)
    return {"engine": engine, "tier": canonical_tier(tier), "seed": seed,
            "options": _resolve_options(engine, ENGINES[engine].options, options),
            "code": code_fingerprint(noise_dataset)}


def _resolve_options(engine: str, declared: dict[str, tuple], given: dict) -> dict:
    for name, value in given.items():
        if name not in declared:
            raise ConfigError(f"unknown option {name!r} for engine {engine!r}; valid options: {', '.join(declared)}")
        if not any(type(value) is type(choice) and value == choice for choice in declared[name]):
            raise ConfigError(f"option {name}={value!r} of engine {engine!r} is not valid; valid values: "
                              f"{', '.join(map(repr, declared[name]))}")
    return {name: given.get(name, choices[0]) for name, choices in declared.items()}


def _rng(seed: int, code: int, ann_id) -> np.random.Generator:
    if not isinstance(ann_id, (int, np.integer)) or isinstance(ann_id, bool) or ann_id < 0:
        raise DataFormatError(f"annotation {ann_id!r}: ids must be non-negative integers (they seed its noise)")
    return np.random.default_rng([seed, code, int(ann_id)])


def _copy_annotations(annotations: list[dict]) -> list[dict]:
    """Deep copies, polygon lists copied with ``list`` (``copy.deepcopy`` of long polygons costs as much as the
    noise)."""
    def copied(key, value):
        if key == "segmentation" and isinstance(value, list):
            return [list(part) for part in value]
        return copy.deepcopy(value)
    return [{key: copied(key, value) for key, value in ann.items()} for ann in annotations]


def _run(dataset: dict, noise: Callable, code: int, seed: int, skip_crowd: bool,
         desc: str) -> tuple[dict, dict]:
    """Apply ``noise`` to every annotation of a deep copy of ``dataset``; the copy and the counts."""
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    out = {key: _copy_annotations(value) if key == "annotations" else copy.deepcopy(value)
           for key, value in dataset.items()}
    sizes = image_sizes(out)
    counts = dict.fromkeys(COUNTS, 0)
    counts["annotations_in"] = len(out["annotations"])
    annotations = out["annotations"]
    if len(annotations) >= PROGRESS_MIN:
        annotations = progress(annotations, desc=desc, total=len(annotations))
    kept = []
    for ann in annotations:
        if skip_crowd and ann.get("iscrowd", 0):
            counts["crowd_skipped"] += 1
            kept.append(ann)
            continue
        result = noise(ann, *sizes[ann["image_id"]], _rng(seed, code, ann["id"]))
        if isinstance(result, str):
            counts[result] += 1
            continue
        kept.append(result)
        counts["class_flipped"] += result["noise"]["class_flipped"]
        counts["spatially_noised"] += bool(result["noise"]["spatial"])
    counts["kept"] = len(kept)
    out["annotations"] = kept
    return out, counts


# ------------------------------------------------------------------------------------------------ ablation
@dataclass(frozen=True)
class Ablation:
    """A single-noise operation: ``code`` keys its random streams; ``build(dataset, tier)`` returns the
    per-annotation noise and its parameters; ``random``: whether the seed changes the result (dilation, erosion,
    opening and the v0 approximation draw nothing)."""
    code: int
    description: str
    build: Callable[[dict, str], tuple[Callable, dict]]
    random: bool = True


def _dilation(mask, k, rng):
    return morph(mask, k, "dilate"), "dilation"


def _erosion(mask, k, rng):
    return morph(mask, k, "erode"), "erosion"


def _opening(mask, k, rng):
    return morph(mask, k, "open"), "opening"


def _random_shift(mask, k, rng):
    sx, sy = rng.choice((-1, 1), size=2)
    return shift(mask, sx * k, sy * k), "shift"


def _one_mask_op(ann: dict, h: int, w: int, rng: np.random.Generator, op: Callable, parameter) -> dict | str:
    name = _mask_noise(ann, h, w, rng, op, parameter)
    return IMPLICITLY_DELETED if name is None else _mark(ann, ann["category_id"], [name])


def _mask_ablation(op: Callable, preset_field: str, parameter_name: str) -> Callable:
    """Build an ablation applying ``op`` to every mask with the v0 tier parameter (k 3/5/7, sd 2/3/4, tol
    5/10/15)."""
    def build(dataset: dict, tier: str) -> tuple[Callable, dict]:
        value = getattr(LEGACY_V0_PRESETS[tier], preset_field)[1]
        return partial(_one_mask_op, op=op, parameter=value), {parameter_name: value}
    return build


_PRESET_FIELDS = {"deletion": "p_del", "class_flip": "p_cls", "approximation": "approximation",
                  "localization": "localization", "scale": "scale"}


def _paper_ablation(step: str) -> Callable:
    """Build an ablation running one step of the paper engine with its sampled Table 1 parameters."""
    def build(dataset: dict, tier: str) -> tuple[Callable, dict]:
        preset = PRESETS[tier]
        cfg = _PaperConfig(preset, sibling_map(dataset["categories"]), steps=(step,))
        return partial(_noise_paper, cfg=cfg), {_PRESET_FIELDS[step]: getattr(preset, _PRESET_FIELDS[step])}
    return build


ABLATIONS = {
    # Table 7 (Sec. 4.4): one operation on every non-crowd mask, fixed parameter per level (the paper gives none;
    # Table 1's tier values k = 3/5/7, tol = 5/10/15, sd = 2/3/4)
    "dilation": Ablation(101, "cv2.dilate, k x k ones kernel, k = 3/5/7", _mask_ablation(_dilation, "rand", "k"),
                         random=False),
    "erosion": Ablation(102, "cv2.erode, k = 3/5/7", _mask_ablation(_erosion, "rand", "k"), random=False),
    "opening": Ablation(103, "erode then dilate, k = 3/5/7", _mask_ablation(_opening, "rand", "k"),
                        random=False),
    "random_scale": Ablation(104, "dilate or erode (50/50), k = 3/5/7", _mask_ablation(_random_scale, "rand", "k")),
    "shift": Ablation(105, "rigid translation by (sx k, sy k), random signs sx, sy (an assumption: the paper "
                           "gives no magnitude), k = 3/5/7", _mask_ablation(_random_shift, "rand", "k")),
    "localization": Ablation(106, "v0 contour jitter round(N(0, sd)), sd = 2/3/4",
                             _mask_ablation(_contour_localization, "localization", "sd")),
    "approximation": Ablation(107, "v0 contour simplification, tol = 5/10/15",
                              _mask_ablation(_contour_approximation, "approximation", "tol"), random=False),
    # Fig. 11: one step of the paper engine with the sampled Table 1 parameters
    "paper_approximation": Ablation(111, "paper-engine approximation, Table 1", _paper_ablation("approximation")),
    "paper_localization": Ablation(112, "paper-engine localization, Table 1", _paper_ablation("localization")),
    "paper_scale": Ablation(113, "paper-engine dilate/erode, Table 1", _paper_ablation("scale")),
    "class_flip": Ablation(114, "sibling class flip with p_cls = 0.05", _paper_ablation("class_flip")),
    "deletion": Ablation(115, "deletion with p_del = 0.05", _paper_ablation("deletion")),
}


def ablate(dataset: dict, operation: str, level: str, seed: int = 0) -> NoisyDataset:
    """The single-noise ablation (Table 7, Fig. 11): ``ABLATIONS[operation]`` applied to every
    non-crowd annotation, with no other noise; crowds are copied unchanged.

    ``level``: a tier name (``TIERS``). The Table 7 operations (dilation, erosion, opening, random_scale, shift,
    localization, approximation) use the fixed tier values k = 3/5/7, sd = 2/3/4, tol = 5/10/15 and write
    compressed RLE with recomputed area/bbox; the ``paper_*`` operations, ``class_flip`` and ``deletion`` run
    that step of the paper engine alone (Table 1 parameters and the default options of ``noise_dataset``,
    polygons out; class flip and deletion leave the geometry as it was). Returns a ``NoisyDataset`` whose
    manifest has engine "ablation", operation, tier, seed, parameters, code and the ``COUNTS``."""
    if operation not in ABLATIONS:
        raise unknown_choice("ablation operation", operation, ABLATIONS)
    spec, tier = ABLATIONS[operation], canonical_tier(level)
    check_coco(dataset)
    noise, parameters = spec.build(dataset, tier)
    noisy, counts = _run(dataset, noise, spec.code, seed, True, f"ablation {operation}, {tier}")
    manifest = {"engine": "ablation", "operation": operation, "tier": tier, "seed": seed,
                "parameters": parameters, "code": code_fingerprint(noise_dataset), **counts}
    return NoisyDataset(noisy, manifest)


# ------------------------------------------------------------------------------------------------ class noise alone
CLASS_NOISE_CODE = 116  # keys the random streams of ``class_noise``


def _class_only(ann: dict, h: int, w: int, rng: np.random.Generator, category_ids: tuple, row: dict,
                matrix: np.ndarray) -> dict:
    original = ann["category_id"]
    probabilities = matrix[row[original]]
    ann["category_id"] = category_ids[int(rng.choice(len(probabilities), p=probabilities))]
    return _mark(ann, original, [])


def class_noise(dataset: dict, rate: float, kind: str = "uniform", seed: int = 0) -> NoisyDataset:
    """Class noise alone (Tables 9 and 10): every non-crowd annotation's category drawn from its row of
    ``class_matrix(categories, rate, kind)``, the geometry untouched (crowds copied unchanged).

    ``kind="uniform"`` is the paper's "Sym p %" (the official ``uniform_mix_C``: with K categories a label changes
    with probability p (1 - 1/K)); ``"superclass"`` its "Asym p %" (mixing within the super-category). ``rate`` in
    [0, 1]. The manifest has engine "class_noise", rate, kind, seed, code and the ``COUNTS``."""
    if not 0.0 <= float(rate) <= 1.0:
        raise ConfigError(f"class-noise rate must be in [0, 1], got {rate!r}")
    check_coco(dataset)
    categories = dataset["categories"]
    ids = tuple(c["id"] for c in categories)
    noise = partial(_class_only, category_ids=ids, row={c: i for i, c in enumerate(ids)},
                    matrix=class_matrix(categories, float(rate), kind))
    noisy, counts = _run(dataset, noise, CLASS_NOISE_CODE, seed, True, f"class noise {kind} {rate}")
    manifest = {"engine": "class_noise", "rate": float(rate), "kind": kind, "seed": seed,
                "code": code_fingerprint(noise_dataset), **counts}
    return NoisyDataset(noisy, manifest)


__all__ = ["TIERS", "TIER_ORDER", "COUNTS", "engine_settings", "PaperPreset", "LegacyV0Preset", "PRESETS", "LEGACY_V0_PRESETS", "canonical_tier",
           "NoisyDataset", "JITTER_MODES", "MORPH_OPS", "CLASS_MATRICES", "approximate", "jitter", "morph",
           "shift", "sibling_map", "sibling_flip", "class_matrix", "PAPER_STEPS", "Engine", "ENGINES",
           "noise_dataset", "Ablation", "ABLATIONS", "ablate", "class_noise"]
