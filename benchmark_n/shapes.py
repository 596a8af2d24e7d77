"""Offline stand-ins for instance segmentation: procedural COCO-shapes and two real masks from scikit-image.

**COCO-shapes**: 6 categories in 3 super-categories, so class flips to a sibling exist and one class
(``star``) has none::

    round   {circle, ellipse}      polygon {triangle, square, pentagon}      spiky {star}

Each image holds ``min_objects..max_objects`` objects with a random class, position, size and rotation, drawn in
order on a plain or photographic background; a later object occludes the earlier ones, whose *visible* masks are
cut, so visible masks can be non-convex or split into several parts. Annotations are the external
``findContours`` polygons of the visible masks (``coco.annotation_from_mask``), with ``area`` and ``bbox`` as
pycocotools computes them from the polygons, ``iscrowd`` 0. An instance whose visible mask has no contour with
3 vertices is dropped. An object whose placement would punch a hole into an earlier visible mask (COCO polygons
cannot hold holes, so its annotation would cover the occluder) is placed again, up to 20 times, else left out.

    data = generate_shapes(40, seed=0, **PRESETS["annotation"])   # 640x480, COCO-like object sizes
    data.dataset       # COCO dict: info, images, annotations, categories (with supercategory)
    data.images        # (40, 480, 640, 3) uint8 RGB
    data.visible_masks(0)   # {annotation id: (480, 640) bool visible mask} of image 0

Classes have fixed colours (``CLASS_COLOURS``), so colour alone separates them; ``random_colours=True`` draws
every object's colour at random, so the class is defined by shape only. Everything is drawn from
``np.random.default_rng(item_seed(seed, "shapes", i))`` per image ``i``: the same seed and arguments give
identical arrays and JSON, and image ``i`` does not depend on ``n_images``.

**Real instance masks** bundled with scikit-image (offline), for the noise-engine figures: ``coins()`` (the
scikit-image gallery's watershed segmentation of ``skimage.data.coins()``, 24 coins of category ``coin``) and
``horse()`` (``skimage.data.horse()`` inverted: one ``horse`` of 43,412 px on a plain image).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import cv2
import numpy as np

from benchmark_n.coco import annotation_from_mask, check_coco
from shared.errors import ConfigError, unknown_choice
from shared.seeding import item_seed

CATEGORIES = [
    {"id": 1, "name": "circle", "supercategory": "round"},
    {"id": 2, "name": "ellipse", "supercategory": "round"},
    {"id": 3, "name": "triangle", "supercategory": "polygon"},
    {"id": 4, "name": "square", "supercategory": "polygon"},
    {"id": 5, "name": "pentagon", "supercategory": "polygon"},
    {"id": 6, "name": "star", "supercategory": "spiky"},
]
#: Fixed RGB colour of each category id (used unless ``random_colours=True``).
CLASS_COLOURS = {1: (230, 25, 75), 2: (245, 130, 48), 3: (60, 180, 75), 4: (0, 130, 200), 5: (145, 30, 180),
                 6: (255, 225, 25)}
BACKGROUNDS = ("plain", "photo")

#: Named settings of ``generate_shapes`` (keyword arguments):
#:
#: * ``annotation`` — annotation-level experiments (noisy vs clean annotations scored with COCOeval, as in Fig. 11):
#:   COCO's 640x480 canvas, 1-6 objects, radius 5-20 % of the short side (24-96 px), so most objects are COCO
#:   "medium"/"large" and Table 1's pixel parameters apply unscaled (scaled down with the resolution, the integer
#:   kernel would truncate to 0 at Low).
#: * ``model`` — the TinyUNet model-level check: 128x128 images, 1-3 large objects (radius 15-35 % of
#:   the side, 19-45 px).
PRESETS = {
    "annotation": dict(height=480, width=640, min_objects=1, max_objects=6, radius=(0.05, 0.20),
                       random_colours=False, background="plain"),
    "model": dict(height=128, width=128, min_objects=1, max_objects=3, radius=(0.15, 0.35),
                  random_colours=False, background="plain"),
}

_ELLIPSE_ASPECT = (0.45, 0.75)   # minor / major axis
_STAR_INNER = 0.45               # inner / outer radius of the 5-pointed star
_PLACEMENT_TRIES = 20
_MIN_COLOUR_DISTANCE = 60        # random colours differ from a plain background by this much (max over channels)


@dataclass
class ShapesData:
    """A COCO dataset with its images.

    ``dataset``: the COCO dict. ``images``: (n, h, w, 3) uint8 RGB, in the order of ``dataset["images"]``.
    ``instance_maps``: (n, h, w) uint8; pixel value ``k >= 1`` is the visible part of the image's k-th annotation
    (in ``dataset["annotations"]`` order), 0 background or the visible pixels of a dropped instance.
    ``objects``: one dict per annotation (same order) with how it was drawn: ``ann_id``, ``category_id``,
    ``center`` (x, y), ``radius``, ``angle`` (degrees), ``colour``, ``full_area`` (pixels of the whole shape
    before occlusion) and ``visible_area`` (pixels of its visible mask); empty for the real-image sets.
    """

    dataset: dict
    images: np.ndarray
    instance_maps: np.ndarray
    objects: list = field(default_factory=list)

    def annotations_of(self, index: int) -> list[dict]:
        """The annotations of the ``index``-th image, in dataset order."""
        image_id = self.dataset["images"][index]["id"]
        return [a for a in self.dataset["annotations"] if a["image_id"] == image_id]

    def visible_masks(self, index: int) -> dict[int, np.ndarray]:
        """{annotation id: (h, w) bool visible mask} of the ``index``-th image."""
        return {a["id"]: self.instance_maps[index] == k for k, a in enumerate(self.annotations_of(index), 1)}


def preset(name: str, **overrides) -> dict:
    """The keyword arguments of preset ``name`` (``PRESETS``) updated with ``overrides``."""
    if name not in PRESETS:
        raise unknown_choice("shapes preset", name, PRESETS)
    return {**PRESETS[name], **overrides}


# ------------------------------------------------------------------------------------------------ drawing
def _shape_vertices(category_id: int, cx: float, cy: float, r: float, angle: float, aspect: float) -> np.ndarray:
    """(N, 2) float vertices of a shape of outer radius ``r`` rotated by ``angle`` radians."""
    if category_id in (1, 2):  # circle / ellipse: a fine polygon (<= 1 px between vertices)
        n = max(24, int(np.ceil(2 * np.pi * r)))
        t = np.linspace(0, 2 * np.pi, n, endpoint=False)
        x, y = r * np.cos(t), r * np.sin(t) * (aspect if category_id == 2 else 1.0)
    elif category_id in (3, 4, 5):
        t = angle + np.arange(category_id) * 2 * np.pi / category_id
        x, y = r * np.cos(t), r * np.sin(t)
    elif category_id == 6:
        t = angle + np.arange(10) * np.pi / 5
        radii = np.where(np.arange(10) % 2 == 0, r, _STAR_INNER * r)
        x, y = radii * np.cos(t), radii * np.sin(t)
    else:
        raise ConfigError(f"unknown shapes category id {category_id}; valid: 1-6")
    if category_id == 2:  # rotate the ellipse (the polygons are rotated through t)
        x, y = x * np.cos(angle) - y * np.sin(angle), x * np.sin(angle) + y * np.cos(angle)
    return np.stack([cx + x, cy + y], axis=1)


def _fill(vertices: np.ndarray, h: int, w: int) -> np.ndarray:
    """(h, w) bool raster of a polygon (1/16-pixel vertex precision)."""
    mask = np.zeros((h, w), np.uint8)
    cv2.fillPoly(mask, [np.round(vertices * 16).astype(np.int32)], 1, lineType=cv2.LINE_8, shift=4)
    return mask.astype(bool)


def _has_hole(mask: np.ndarray) -> bool:
    _, hierarchy = cv2.findContours(mask.astype(np.uint8), cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE)
    return hierarchy is not None and bool((hierarchy[0][:, 3] >= 0).any())


@lru_cache(maxsize=1)
def _photos() -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_sample_images

    return tuple(np.ascontiguousarray(im) for im in load_sample_images().images)  # china, flower (427x640 RGB)


def _background(kind: str, h: int, w: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    """The background image and, for a plain one, its colour."""
    if kind == "plain":
        colour = np.full(3, rng.integers(90, 171), np.uint8)
        return np.broadcast_to(colour, (h, w, 3)).copy(), colour
    photo = _photos()[rng.integers(len(_photos()))]
    ph, pw = photo.shape[:2]
    # a random window of the photo with the image's aspect ratio, 2/3 to all of the largest such window
    scale = max(h / ph, w / pw) * rng.uniform(1.0, 1.5)
    ch, cw = min(ph, int(round(h / scale))), min(pw, int(round(w / scale)))
    y0, x0 = rng.integers(ph - ch + 1), rng.integers(pw - cw + 1)
    crop = photo[y0:y0 + ch, x0:x0 + cw]
    interpolation = cv2.INTER_AREA if ch > h else cv2.INTER_LINEAR
    return np.ascontiguousarray(cv2.resize(crop, (w, h), interpolation=interpolation)), None


def _random_colour(rng: np.random.Generator, background: np.ndarray | None) -> np.ndarray:
    while True:
        colour = rng.integers(0, 256, 3)
        if background is None or np.abs(colour - background.astype(int)).max() >= _MIN_COLOUR_DISTANCE:
            return colour.astype(np.uint8)


def _check_arguments(n_images, height, width, min_objects, max_objects, radius, background) -> None:
    if int(n_images) < 0:
        raise ConfigError(f"n_images must be >= 0, got {n_images}")
    if height < 8 or width < 8:
        raise ConfigError(f"images must be at least 8x8 pixels, got height={height}, width={width}")
    if not 0 <= min_objects <= max_objects <= 255:
        raise ConfigError(f"need 0 <= min_objects <= max_objects <= 255, got {min_objects}, {max_objects}")
    lo, hi = radius
    if not 0 < lo <= hi <= 1:
        raise ConfigError(f"radius must be (lo, hi) fractions of min(height, width) with 0 < lo <= hi <= 1, "
                          f"got {radius}")
    if background not in BACKGROUNDS:
        raise unknown_choice("background", background, BACKGROUNDS)


def generate_shapes(n_images: int, seed: int = 0, *, height: int = 480, width: int = 640, max_objects: int = 6,
                    min_objects: int = 1, radius: tuple[float, float] = (0.05, 0.20), random_colours: bool = False,
                    background: str = "plain") -> ShapesData:
    """``n_images`` COCO-shapes images with their annotations (see the module docstring; defaults = the
    ``annotation`` preset). ``radius`` is the (lo, hi) range of the objects' outer radius as fractions of
    ``min(height, width)``; ``background`` is ``"plain"`` (one grey level per image) or ``"photo"`` (random crops
    of scikit-learn's china.jpg / flower.jpg)."""
    _check_arguments(n_images, height, width, min_objects, max_objects, radius, background)
    h, w = int(height), int(width)
    side = min(h, w)
    images = np.empty((n_images, h, w, 3), np.uint8)
    instance_maps = np.zeros((n_images, h, w), np.uint8)
    image_entries, annotations, objects = [], [], []
    for i in range(n_images):
        rng = np.random.default_rng(item_seed(seed, "shapes", i))
        image, plain_colour = _background(background, h, w, rng)
        owner = np.full((h, w), -1, np.int16)   # index of the topmost object at each pixel
        drawn = []                              # (category_id, params, colour, full_area)
        for _ in range(int(rng.integers(min_objects, max_objects + 1))):
            category_id = int(rng.integers(1, len(CATEGORIES) + 1))
            colour = (_random_colour(rng, plain_colour) if random_colours
                      else np.array(CLASS_COLOURS[category_id], np.uint8))
            for _try in range(_PLACEMENT_TRIES):
                r = rng.uniform(*radius) * side
                cx, cy = rng.uniform(r / 2, w - r / 2), rng.uniform(r / 2, h - r / 2)
                angle, aspect = rng.uniform(0, 2 * np.pi), rng.uniform(*_ELLIPSE_ASPECT)
                full = _fill(_shape_vertices(category_id, cx, cy, r, angle, aspect), h, w)
                below = np.unique(owner[full])
                if not any(_has_hole((owner == j) & ~full) for j in below[below >= 0]):
                    break
            else:
                continue  # every placement would hole an earlier object
            owner[full] = len(drawn)
            image[full] = colour
            drawn.append((category_id, (cx, cy, r, angle), colour, int(full.sum())))
        image_id = i + 1
        slot = 0
        for k, (category_id, (cx, cy, r, angle), colour, full_area) in enumerate(drawn):
            visible = owner == k
            ann = annotation_from_mask(visible, len(annotations) + 1, image_id, category_id)
            if ann is None:
                continue
            slot += 1
            instance_maps[i][visible] = slot
            annotations.append(ann)
            objects.append({"ann_id": ann["id"], "image_id": image_id, "category_id": category_id,
                            "center": (float(cx), float(cy)), "radius": float(r),
                            "angle": float(np.degrees(angle)), "colour": tuple(int(c) for c in colour),
                            "full_area": full_area, "visible_area": int(visible.sum())})
        images[i] = image
        image_entries.append({"id": image_id, "file_name": f"{image_id:012d}.jpg", "width": w, "height": h})
    info = {"description": "COCO-shapes: procedural offline stand-in for COCO instance segmentation (Benchmark-N)",
            "version": "1.0", "contributor": "benchmark_n.shapes",
            "generator": {"n_images": int(n_images), "seed": int(seed), "height": h, "width": w,
                          "min_objects": int(min_objects), "max_objects": int(max_objects),
                          "radius": [float(v) for v in radius], "random_colours": bool(random_colours),
                          "background": background}}
    dataset = {"info": info, "images": image_entries, "annotations": annotations,
               "categories": [dict(c) for c in CATEGORIES]}
    check_coco(dataset, source="generate_shapes")
    return ShapesData(dataset, images, instance_maps, objects)


# ------------------------------------------------------------------------------------------------ real masks
def _single_image_set(name: str, image: np.ndarray, labels: np.ndarray, category: dict, description: str
                      ) -> ShapesData:
    """A one-image COCO set from an RGB image and a label image (0 background, 1..k instances)."""
    h, w = labels.shape
    annotations, instance_map = [], np.zeros((h, w), np.uint8)
    for label in range(1, int(labels.max()) + 1):
        mask = labels == label
        ann = annotation_from_mask(mask, len(annotations) + 1, 1, category["id"])
        if ann is not None:
            annotations.append(ann)
            instance_map[mask] = len(annotations)
    dataset = {"info": {"description": description, "contributor": "benchmark_n.shapes"},
               "images": [{"id": 1, "file_name": f"{name}.png", "width": w, "height": h}],
               "annotations": annotations, "categories": [dict(category)]}
    check_coco(dataset, source=name)
    return ShapesData(dataset, image[None], instance_map[None])


def coins(min_size: int = 50) -> ShapesData:
    """``skimage.data.coins()`` (303x384) segmented with the scikit-image gallery's watershed recipe: Sobel
    elevation map, markers < 30 background / > 150 coin, ``watershed``, ``binary_fill_holes``, ``label``,
    components < ``min_size`` px dropped. 24 instances of the one category ``coin``; the image is the grey photo
    as RGB."""
    from scipy import ndimage as ndi
    from skimage import data
    from skimage.filters import sobel
    from skimage.segmentation import watershed

    grey = data.coins()
    markers = np.zeros_like(grey, dtype=np.int32)
    markers[grey < 30] = 1
    markers[grey > 150] = 2
    segmentation = ndi.binary_fill_holes(watershed(sobel(grey), markers) == 2)
    labels, n = ndi.label(segmentation)
    sizes = ndi.sum(np.ones_like(labels), labels, index=np.arange(1, n + 1))
    keep = np.zeros(n + 1, np.int32)
    keep[1:][sizes >= min_size] = np.arange(1, int((sizes >= min_size).sum()) + 1)
    return _single_image_set("coins", np.repeat(grey[..., None], 3, axis=2), keep[labels],
                             {"id": 1, "name": "coin", "supercategory": "coin"},
                             "skimage.data.coins() segmented by the scikit-image gallery's watershed recipe")


HORSE_COLOUR = (120, 72, 40)
HORSE_BACKGROUND = (235, 235, 235)


def horse() -> ShapesData:
    """``skimage.data.horse()`` (328x400; the horse is the False pixels, 43,412 px) as one ``horse`` instance,
    drawn brown on a plain light-grey image."""
    from skimage import data

    mask = ~data.horse()
    image = np.empty(mask.shape + (3,), np.uint8)
    image[:] = HORSE_BACKGROUND
    image[mask] = HORSE_COLOUR
    return _single_image_set("horse", image, mask.astype(np.int32), {"id": 1, "name": "horse",
                                                                     "supercategory": "animal"},
                             "skimage.data.horse() silhouette (inverted) as one instance")


def real_instances() -> dict[str, ShapesData]:
    """``{"coins": coins(), "horse": horse()}``."""
    return {"coins": coins(), "horse": horse()}


__all__ = ["CATEGORIES", "CLASS_COLOURS", "BACKGROUNDS", "PRESETS", "ShapesData", "preset",
           "generate_shapes", "coins", "horse", "real_instances", "HORSE_COLOUR", "HORSE_BACKGROUND"]
