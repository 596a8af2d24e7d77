"""COCO-format instance annotations: reading and checking them, and converting between masks, polygons and RLE.

A dataset is the plain dict of a COCO JSON file (``images``, ``annotations``, ``categories``, any other keys kept),
as pycocotools reads it. Polygons are float arrays (N, 2) of (x, y) vertices in pixels; a segmentation is either a
list of flat ``[x0, y0, x1, y1, ...]`` polygons or an RLE dict (``{"size": [h, w], "counts": str | list}``).

    dataset = read_coco("annotations/instances_val2017.json")      # checked: a clear error names the annotation
    polygons = ann_to_polygons(dataset["annotations"][0], h, w)      # list of (N, 2) float arrays
    ann.update(segmentation_fields(polygons, h, w))                  # segmentation, area and bbox from the polygons

Pitfalls of pycocotools handled here: ``frPyObjects`` reads a polygon of exactly 4 numbers as a box and fails on
fewer than 6, so parts with fewer than 3 vertices are dropped and never written; ``mask.decode`` returns
Fortran-ordered arrays, which OpenCV refuses as outputs, so masks are made C-contiguous before OpenCV sees them.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import cv2
import numpy as np
from pycocotools import mask as mask_utils

from shared.datasets.files import check_not_lfs_pointer, read_json
from shared.errors import DataFormatError, DataNotFoundError

REQUIRED = {"images": ("id", "width", "height"), "annotations": ("id", "image_id", "category_id", "segmentation"),
            "categories": ("id", "name")}


# ------------------------------------------------------------------------------------------------ reading
def read_coco(path: str | os.PathLike) -> dict:
    """A COCO instances JSON file, checked (``check_coco``); BOM-tolerant, git-LFS pointers refused with the fix."""
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"{path} does not exist; expected a COCO-format instances JSON file")
    check_not_lfs_pointer(path)
    dataset = read_json(path)
    check_coco(dataset, source=str(path))
    return dataset


def check_coco(dataset: dict, source: str = "the dataset") -> None:
    """Raise DataFormatError naming the first problem: a missing section or key, a duplicate id, an annotation of
    an unknown image or category, or a segmentation that is neither polygons (>= 3 vertices each) nor an RLE of
    its image's size."""
    if not isinstance(dataset, dict):
        raise DataFormatError(f"{source}: a COCO file is a JSON object with images, annotations and categories")
    for section, keys in REQUIRED.items():
        if not isinstance(dataset.get(section), list):
            raise DataFormatError(f"{source}: no '{section}' list; a COCO instances file has images, annotations "
                                  "and categories")
        seen = set()
        for entry in dataset[section]:
            missing = [k for k in keys if k not in entry]
            if missing:
                raise DataFormatError(f"{source}: {section[:-1]} {entry.get('id', '?')} has no {', '.join(missing)}")
            if entry["id"] in seen:
                raise DataFormatError(f"{source}: {section[:-1]} id {entry['id']} appears more than once")
            seen.add(entry["id"])
    images = {im["id"]: im for im in dataset["images"]}
    categories = {c["id"] for c in dataset["categories"]}
    for ann in dataset["annotations"]:
        where = f"{source}: annotation {ann['id']}"
        if ann["image_id"] not in images:
            raise DataFormatError(f"{where} belongs to image {ann['image_id']}, which is not in images")
        if ann["category_id"] not in categories:
            raise DataFormatError(f"{where} has category_id {ann['category_id']}, which is not in categories "
                                  f"({sorted(categories)[:10]}...)")
        image = images[ann["image_id"]]
        _check_segmentation(ann["segmentation"], image["height"], image["width"], where)


def _check_segmentation(seg, h: int, w: int, where: str) -> None:
    if isinstance(seg, dict):
        if "counts" not in seg or list(seg.get("size", [])) != [h, w]:
            raise DataFormatError(f"{where}: an RLE segmentation needs counts and size [{h}, {w}] (its image's), "
                                  f"got size {seg.get('size')}")
        return
    if not isinstance(seg, list) or not seg:
        raise DataFormatError(f"{where}: segmentation must be a non-empty list of polygons or an RLE dict")
    for part in seg:
        if not isinstance(part, list) or len(part) < 6 or len(part) % 2 or not _finite_numbers(part):
            raise DataFormatError(f"{where}: each polygon must be a flat list of an even number (>= 6) of finite "
                                  f"x, y coordinates; got {str(part)[:60]}")


def _finite_numbers(values: list) -> bool:
    """Whether ``values`` is a flat list of finite ints and floats (not bools, strings or None)."""
    try:
        array = np.asarray(values)
    except (TypeError, ValueError):  # ragged nesting
        return False
    return array.ndim == 1 and array.dtype.kind in "iuf" and bool(np.isfinite(array).all())


def image_sizes(dataset: dict) -> dict[int, tuple[int, int]]:
    """image id -> (height, width)."""
    return {im["id"]: (int(im["height"]), int(im["width"])) for im in dataset["images"]}


def write_coco(path: str | os.PathLike, dataset: dict) -> Path:
    """Write ``dataset`` as JSON atomically (a temporary file renamed into place); keys in their order, compact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(dataset, separators=(",", ":")))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


# ------------------------------------------------------------------------------------------------ conversions
def ann_to_rle(ann: dict, h: int, w: int) -> dict:
    """The annotation's segmentation as one compressed RLE (polygon parts merged)."""
    seg = ann["segmentation"]
    if isinstance(seg, list):
        return mask_utils.merge(mask_utils.frPyObjects(seg, h, w))
    if isinstance(seg["counts"], list):  # uncompressed RLE (iscrowd annotations)
        return mask_utils.frPyObjects(seg, h, w)
    return {"size": seg["size"], "counts": seg["counts"].encode() if isinstance(seg["counts"], str) else seg["counts"]}


def ann_to_mask(ann: dict, h: int, w: int) -> np.ndarray:
    """(h, w) uint8 mask of the annotation, C-contiguous."""
    return np.ascontiguousarray(mask_utils.decode(ann_to_rle(ann, h, w)))


def mask_to_polygons(mask: np.ndarray) -> list[np.ndarray]:
    """External contours of a binary mask (``RETR_EXTERNAL``, ``CHAIN_APPROX_SIMPLE``) as (N, 2) float arrays with
    at least 3 vertices each; holes are not kept."""
    contours, _ = cv2.findContours(np.ascontiguousarray(mask, dtype=np.uint8), cv2.RETR_EXTERNAL,
                                   cv2.CHAIN_APPROX_SIMPLE)
    return [c.reshape(-1, 2).astype(np.float64) for c in contours if len(c) >= 3]


def ann_to_polygons(ann: dict, h: int, w: int) -> list[np.ndarray]:
    """The annotation's parts as (N, 2) float arrays: its polygons as given, or the external contours of its RLE."""
    seg = ann["segmentation"]
    if isinstance(seg, list):
        return [np.asarray(part, dtype=np.float64).reshape(-1, 2) for part in seg if len(part) >= 6]
    return mask_to_polygons(ann_to_mask(ann, h, w))


def polygons_to_segmentation(polygons) -> list[list[float]]:
    """Flat ``[x0, y0, ...]`` lists of the parts with at least 3 vertices (never a 4-number "polygon", which
    pycocotools reads as a box)."""
    return [np.asarray(p, dtype=np.float64).reshape(-1).tolist() for p in polygons if len(p) >= 3]


def polygons_to_mask(polygons, h: int, w: int) -> np.ndarray:
    """(h, w) uint8 mask of the union of the parts (pycocotools rasterisation, as COCOeval sees them)."""
    seg = polygons_to_segmentation(polygons)
    if not seg:
        return np.zeros((h, w), np.uint8)
    return np.ascontiguousarray(mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects(seg, h, w))))


def rle_json(rle: dict) -> dict:
    """An RLE with its ``counts`` bytes decoded to str, as JSON can hold it."""
    counts = rle["counts"]
    return {"size": [int(v) for v in rle["size"]], "counts": counts.decode() if isinstance(counts, bytes) else counts}


def mask_to_rle(mask: np.ndarray) -> dict:
    """A binary mask as a JSON-ready compressed RLE."""
    return rle_json(mask_utils.encode(np.asfortranarray(mask.astype(np.uint8))))


def segmentation_fields(segmentation, h: int, w: int) -> dict:
    """``segmentation``, ``area`` and ``bbox`` of a segmentation: an RLE dict, or polygon parts given as (N, 2)
    arrays or flat ``[x0, y0, ...]`` lists (parts with fewer than 3 vertices dropped); area and box as pycocotools
    computes them from the rasterised mask."""
    if isinstance(segmentation, dict):
        seg = rle_json(segmentation)
        rle = ann_to_rle({"segmentation": seg}, h, w)
    else:
        seg = polygons_to_segmentation(np.asarray(p, dtype=np.float64).reshape(-1, 2) for p in segmentation)
        if not seg:
            raise DataFormatError("a segmentation needs at least one polygon with 3 or more vertices")
        rle = mask_utils.merge(mask_utils.frPyObjects(seg, h, w))
    return {"segmentation": seg, "area": float(mask_utils.area(rle)),
            "bbox": [float(v) for v in mask_utils.toBbox(rle)]}


def annotation_from_mask(mask: np.ndarray, ann_id: int, image_id: int, category_id: int) -> dict | None:
    """A polygon annotation (external contours) of a binary mask, or None when no part has 3 vertices."""
    polygons = mask_to_polygons(mask)
    if not polygons:
        return None
    h, w = mask.shape
    return {"id": int(ann_id), "image_id": int(image_id), "category_id": int(category_id), "iscrowd": 0,
            **segmentation_fields(polygons, h, w)}


__all__ = ["REQUIRED", "read_coco", "check_coco", "image_sizes", "write_coco", "ann_to_rle", "ann_to_mask",
           "mask_to_polygons", "ann_to_polygons", "polygons_to_segmentation", "polygons_to_mask", "rle_json",
           "mask_to_rle", "segmentation_fields", "annotation_from_mask"]
