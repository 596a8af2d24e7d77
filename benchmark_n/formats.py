"""The real datasets' folder layouts: finding and checking a user's copy, and writing stand-ins in the same layout.

One registry, ``LAYOUTS`` (dataset name -> ``Layout``), holds where each dataset keeps its annotation files and
images relative to its root folder:

* ``coco2017`` — ``<root>/annotations/instances_{train,val}2017.json``; images ``<root>/{train,val}2017/<file_name>``.
* ``cityscapes`` — in COCO format as MMDetection's ``tools/dataset_converters/cityscapes.py`` writes it:
  ``<root>/annotations/instancesonly_filtered_gtFine_{train,val}.json``, images
  ``<root>/leftImg8bit/{train,val}/<file_name>`` (file_name ``<city>/<city>_..._leftImg8bit.png``). The converter
  writes RLE segmentations, image and annotation ids from 0, ``iscrowd = 1`` for group regions, and the 8
  instance classes as categories ``{id, name}`` with Cityscapes label ids (24-33) and **no supercategory**
  (so a sibling class flip may pick any of the 8 classes).
* ``lvis_v1`` — ``<root>/lvis_v1_{train,val}.json`` (as the lvisdataset.org zips unpack; MMDetection's
  ``<root>/annotations/lvis_v1_{train,val}.json`` is accepted too). Images have no ``file_name``: they are COCO
  2017's, found through ``coco_url`` (``http://images.cocodataset.org/train2017/x.jpg`` ->
  ``<root>/train2017/x.jpg``; LVIS val uses images of both COCO splits). Categories have ``synset``,
  ``frequency`` etc. but **no supercategory** (sibling flips range over all classes, as in the official v2);
  annotations have no ``iscrowd``.
* ``viper`` — VIPER (Richter et al. 2017, GTA-V frames) converted to COCO instances, as the authors' "VIPER curated
  as COCO" release on Hugging Face (``Kimhi/noisy-labels-for-instance-segmentation-coco-format``) ships it:
  ``<root>/annotations/instances_{train,val}.json`` (``<root>/instances_{train,val}.json`` is accepted too),
  images ``<root>/{train,val}/<file_name>``. That release's exact file names were not available to us: another
  COCO-format VIPER works when its files are renamed or linked to these paths.

    path = annotation_path(root, "coco2017", "val")            # DataNotFoundError naming the path and the download
    dataset = load_split(root, "coco2017", "val", check_images=True)
    write_coco2017(root, generate_shapes(160, 0), generate_shapes(40, 1))   # a rehearsal folder
    write_layout(root, "lvis_v1", {"train": train, "val": val})

The stand-ins written by ``write_layout`` keep the COCO-shapes categories (ids 1-6), only in the dataset's
conventions (COCO's for VIPER; no supercategory for Cityscapes and LVIS; RLE and ids from 0 for Cityscapes;
``coco_url`` and no ``iscrowd`` for LVIS). Images are written as JPEG (quality 95) for COCO, VIPER and LVIS and PNG
for Cityscapes.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
from PIL import Image

from benchmark_n.coco import ann_to_mask, mask_to_rle, read_coco, segmentation_fields, write_coco
from shared.datasets.real import missing_data_error
from shared.errors import ConfigError, DataFormatError, DataNotFoundError, unknown_choice

COCO_URL = "https://cocodataset.org/#download"
CITYSCAPES_URL = "https://www.cityscapes-dataset.com/downloads/"
LVIS_URL = "https://www.lvisdataset.org/dataset"
VIPER_URL = "https://huggingface.co/collections/Kimhi/noisy-labels-for-instance-segmentation-coco-format"
COCO_IMAGES_HOST = "http://images.cocodataset.org/"
JPEG_QUALITY = 95
STAND_INS = "COCO-shapes, benchmark_n.shapes"


@dataclass(frozen=True)
class Layout:
    """Where one dataset keeps its files, relative to its root folder.

    ``annotations``: split -> candidate annotation paths (the first is the canonical one, which ``write_layout``
    writes). ``images``: split -> image folder that ``file_name`` is relative to (unused when ``image_key`` is
    ``"coco_url"``: the URL's path, e.g. ``train2017/x.jpg``, is relative to the root). ``get_annotations`` /
    ``get_images``: how to obtain them (``{root}`` is filled in).
    """

    title: str
    annotations: dict
    images: dict
    image_key: str
    get_annotations: str
    get_images: str
    supercategory: bool


LAYOUTS: dict[str, Layout] = {
    "coco2017": Layout(
        "COCO 2017 instances",
        {s: (f"annotations/instances_{s}2017.json",) for s in ("train", "val")},
        {s: f"{s}2017" for s in ("train", "val")},
        "file_name",
        f"Download annotations_trainval2017.zip from {COCO_URL} and unzip it under {{root}} "
        "(it creates annotations/instances_train2017.json and annotations/instances_val2017.json).",
        f"Download train2017.zip and val2017.zip from {COCO_URL} and unzip them under {{root}} "
        "(they create train2017/ and val2017/).",
        True,
    ),
    "cityscapes": Layout(
        "Cityscapes instances (COCO format, MMDetection converter)",
        {s: (f"annotations/instancesonly_filtered_gtFine_{s}.json",) for s in ("train", "val")},
        {s: f"leftImg8bit/{s}" for s in ("train", "val")},
        "file_name",
        f"Register at {CITYSCAPES_URL}, download gtFine_trainvaltest.zip and leftImg8bit_trainvaltest.zip, unzip "
        "both under {root}, then convert them with MMDetection (pip install cityscapesscripts): "
        "python tools/dataset_converters/cityscapes.py {root} --nproc 8 --out-dir {root}/annotations",
        f"Download leftImg8bit_trainvaltest.zip from {CITYSCAPES_URL} and unzip it under {{root}} "
        "(it creates leftImg8bit/train/<city>/ and leftImg8bit/val/<city>/).",
        False,
    ),
    "viper": Layout(
        "VIPER instances (COCO format)",
        {s: (f"annotations/instances_{s}.json", f"instances_{s}.json") for s in ("train", "val")},
        {s: s for s in ("train", "val")},
        "file_name",
        f"Download VIPER in COCO format (the authors' 'VIPER curated as COCO', {VIPER_URL}) and put its annotation "
        "files at {root}/annotations/instances_train.json and instances_val.json (rename or link them).",
        f"Put VIPER's frames under {{root}}/train/ and {{root}}/val/ as the annotations' file_name says ({VIPER_URL}).",
        True,
    ),
    "lvis_v1": Layout(
        "LVIS v1",
        {s: (f"lvis_v1_{s}.json", f"annotations/lvis_v1_{s}.json") for s in ("train", "val")},
        {s: "" for s in ("train", "val")},
        "coco_url",
        f"Download lvis_v1_train.json.zip and lvis_v1_val.json.zip from {LVIS_URL} and unzip them under {{root}}.",
        f"LVIS v1 uses COCO 2017's images (each image's coco_url names its folder): download train2017.zip and "
        f"val2017.zip from {COCO_URL} and unzip them under {{root}} (or link existing train2017/ and val2017/ "
        "folders there).",
        False,
    ),
}


@dataclass(frozen=True)
class SplitSize:
    """A released split's size: images, instance annotations (None: not recorded here) and categories."""

    images: int
    annotations: int | None
    categories: int


#: the released splits' sizes, for planning runs without the data (``benchmark_n.cost``): COCO 2017 instances
#: (cocodataset.org: 118,287 / 5,000 images, 860,001 / 36,781 annotations, 80 categories); Cityscapes fine in COCO
#: format (2,975 / 500 images, the 8 instance classes); LVIS v1 (lvisdataset.org: 100,170 / 19,809 images,
#: 1,270,141 / 244,707 annotations, 1,203 categories). VIPER's COCO release is not recorded: its sizes were not
#: available to us.
SIZES: dict[tuple[str, str], SplitSize] = {
    ("coco2017", "train"): SplitSize(118_287, 860_001, 80),
    ("coco2017", "val"): SplitSize(5_000, 36_781, 80),
    ("cityscapes", "train"): SplitSize(2_975, None, 8),
    ("cityscapes", "val"): SplitSize(500, None, 8),
    ("lvis_v1", "train"): SplitSize(100_170, 1_270_141, 1_203),
    ("lvis_v1", "val"): SplitSize(19_809, 244_707, 1_203),
}


def split_size(dataset: str, split: str) -> SplitSize:
    """The registered size of a split (``SIZES``); ConfigError naming the registry when it is not there."""
    layout(dataset)
    if (dataset, split) not in SIZES:
        raise ConfigError(f"the size of {dataset} {split} is not recorded; add it to benchmark_n.formats.SIZES "
                          "(images, annotations, categories) to plan runs on it")
    return SIZES[(dataset, split)]


def layout(dataset: str) -> Layout:
    """The registered layout of ``dataset`` (ConfigError listing the valid names otherwise)."""
    if dataset not in LAYOUTS:
        raise unknown_choice("dataset layout", dataset, LAYOUTS)
    return LAYOUTS[dataset]


def _check_split(dataset: str, split: str) -> Layout:
    spec = layout(dataset)
    if split not in spec.annotations:
        raise unknown_choice(f"{dataset} split", split, spec.annotations)
    return spec


def annotation_path(root, dataset: str, split: str) -> Path:
    """The annotation JSON of ``dataset``'s ``split`` under ``root``: the first candidate path that exists;
    DataNotFoundError naming the expected path(s) and how to get the file otherwise."""
    spec = _check_split(dataset, split)
    root = Path(root)
    candidates = [root / rel for rel in spec.annotations[split]]
    for path in candidates:
        if path.is_file():
            return path
    raise missing_data_error(f"The {spec.title} {split} annotations", candidates,
                             spec.get_annotations.format(root=root), stand_ins=STAND_INS)


def image_path(root, dataset: str, split: str, image: dict) -> Path:
    """Where the image of entry ``image`` (of ``dataset["images"]``) lies under ``root``."""
    spec = _check_split(dataset, split)
    root = Path(root)
    if spec.image_key == "coco_url" and image.get("coco_url"):
        url = urlparse(str(image["coco_url"]))
        return root / url.path.lstrip("/")
    if "file_name" not in image:
        raise DataFormatError(f"{dataset} {split}: image {image.get('id', '?')} has no "
                              f"{'coco_url or ' if spec.image_key == 'coco_url' else ''}file_name")
    return root / spec.images[split] / image["file_name"]


def check_image_files(root, dataset: str, split: str, coco: dict, *, source: str = "") -> None:
    """DataNotFoundError naming the first image file of ``coco`` that is missing (and how many are)."""
    spec = _check_split(dataset, split)
    missing = [p for p in (image_path(root, dataset, split, im) for im in coco["images"]) if not p.is_file()]
    if missing:
        listed = f" listed in {source}" if source else ""
        raise DataNotFoundError(
            f"{len(missing)} of the {len(coco['images'])} {spec.title} {split} images{listed} are missing; "
            f"the first: {missing[0]}\n{spec.get_images.format(root=Path(root))}")


def image_folders(root, dataset: str, split: str) -> list[Path]:
    """The folders ``split``'s images lie in under ``root`` (COCO 2017's ``train2017/``; for LVIS, whose ``coco_url``
    names COCO's folders, both ``train2017/`` and ``val2017/``: each LVIS split takes images from both);
    DataNotFoundError naming the first missing one and how to get the images."""
    spec = _check_split(dataset, split)
    folders = ([Path(root) / "train2017", Path(root) / "val2017"] if spec.image_key == "coco_url"
               else [Path(root) / spec.images[split]])
    for folder in folders:
        if not folder.is_dir():
            raise DataNotFoundError(f"the {spec.title} {split} images are not here: {folder} is not a folder\n"
                                    f"{spec.get_images.format(root=Path(root))}")
    return folders


def locate_split(root, dataset: str, split: str) -> Path:
    """``annotation_path`` once ``image_folders`` are there too (the image files themselves are checked when a model
    loads them, ``sources.Annotations.image``)."""
    path = annotation_path(root, dataset, split)
    image_folders(root, dataset, split)
    return path


def load_split(root, dataset: str, split: str, *, check_images: bool = False) -> dict:
    """The checked COCO dict of ``dataset``'s ``split`` (``coco.read_coco``: BOM-tolerant; git-LFS pointers,
    duplicate ids, unknown images or categories and malformed segmentations raise DataFormatError). With
    ``check_images``, a missing image file raises DataNotFoundError naming it."""
    path = annotation_path(root, dataset, split)
    coco = read_coco(path)
    if check_images:
        check_image_files(root, dataset, split, coco, source=str(path))
    return coco


# ------------------------------------------------------------------------------------------------ writers
def _save_image(path: Path, image: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        if path.suffix.lower() in (".jpg", ".jpeg"):
            Image.fromarray(np.asarray(image, np.uint8)).save(tmp, format="JPEG", quality=JPEG_QUALITY)
        else:
            Image.fromarray(np.asarray(image, np.uint8)).save(tmp, format="PNG")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _convert(dataset: str, split: str, coco: dict) -> dict:
    """A COCO-shapes dict in ``dataset``'s conventions (see the module docstring)."""
    coco = copy.deepcopy(coco)
    if dataset in ("coco2017", "viper"):
        return coco
    sizes = {im["id"]: (im["height"], im["width"]) for im in coco["images"]}
    if dataset == "cityscapes":
        image_ids = {im["id"]: k for k, im in enumerate(coco["images"])}
        for k, im in enumerate(coco["images"]):
            im["id"] = k
            im["file_name"] = f"shapes/shapes_{k:06d}_000019_leftImg8bit.png"
        for k, ann in enumerate(coco["annotations"]):
            h, w = sizes[ann["image_id"]]
            fields = segmentation_fields(mask_to_rle(ann_to_mask(ann, h, w)), h, w)
            coco["annotations"][k] = {"iscrowd": int(ann.get("iscrowd", 0)), "category_id": ann["category_id"],
                                      "bbox": fields["bbox"], "area": int(fields["area"]),
                                      "segmentation": fields["segmentation"], "image_id": image_ids[ann["image_id"]],
                                      "id": k}
        coco["categories"] = [{"id": c["id"], "name": c["name"]} for c in coco["categories"]]
        return {key: coco[key] for key in ("images", "categories", "annotations")}
    if dataset == "lvis_v1":
        folder = f"{split}2017"
        coco["images"] = [{"date_captured": "", "neg_category_ids": [], "id": im["id"], "license": 1,
                           "height": im["height"], "width": im["width"],
                           "flickr_url": f"{COCO_IMAGES_HOST}{folder}/{im['file_name']}",
                           "coco_url": f"{COCO_IMAGES_HOST}{folder}/{im['file_name']}",
                           "not_exhaustive_category_ids": []} for im in coco["images"]]
        coco["annotations"] = [{k: v for k, v in ann.items() if k != "iscrowd"} for ann in coco["annotations"]]
        per_image: dict[int, set] = {}
        counts: dict[int, int] = {}
        for ann in coco["annotations"]:
            counts[ann["category_id"]] = counts.get(ann["category_id"], 0) + 1
            per_image.setdefault(ann["category_id"], set()).add(ann["image_id"])
        coco["categories"] = [{"frequency": "f", "synset": f"{c['name']}.n.01", "synonyms": [c["name"]],
                               "def": f"a {c['name']} (COCO-shapes stand-in)", "id": c["id"], "name": c["name"],
                               "image_count": len(per_image.get(c["id"], ())),
                               "instance_count": counts.get(c["id"], 0)} for c in coco["categories"]]
        return {"info": coco.get("info", {}), "licenses": [{"id": 1, "name": "stand-in", "url": ""}],
                "images": coco["images"], "annotations": coco["annotations"], "categories": coco["categories"]}
    raise unknown_choice("dataset layout", dataset, LAYOUTS)


def write_layout(root, dataset: str, splits: dict) -> Path:
    """Write ``splits`` (split name -> ``shapes.ShapesData``, or anything with ``.dataset`` (a COCO dict with
    ``file_name`` per image) and ``.images`` ((n, h, w, 3) uint8 RGB in image order)) under ``root`` in
    ``dataset``'s layout: the annotation JSONs at their canonical paths (atomically, ``coco.write_coco``) and the
    images as files. Returns ``root``."""
    root = Path(root)
    for split, data in splits.items():
        spec = _check_split(dataset, split)
        entries, images = data.dataset["images"], np.asarray(data.images)
        if images.ndim != 4 or images.shape[-1] != 3 or len(images) != len(entries):
            raise ConfigError(f"{dataset} {split}: need (n, h, w, 3) images, one per dataset image "
                              f"({len(entries)}), got {images.shape}")
        for entry, image in zip(entries, images):
            if image.shape[:2] != (entry["height"], entry["width"]):
                raise ConfigError(f"{dataset} {split}: image {entry['id']} is {image.shape[:2]} but the dataset "
                                  f"says {entry['height']}x{entry['width']}")
        coco = _convert(dataset, split, data.dataset)
        for entry, image in zip(coco["images"], images):
            path = image_path(root, dataset, split, entry)
            if dataset == "cityscapes" and path.suffix.lower() != ".png":
                raise ConfigError(f"Cityscapes images are PNG files; got {path.name}")
            _save_image(path, image)
        write_coco(root / spec.annotations[split][0], coco)
    return root


def write_coco2017(root, train, val) -> Path:
    """COCO 2017's layout under ``root`` with ``train`` and ``val`` (``shapes.ShapesData``): the two
    ``annotations/instances_*2017.json`` and the JPEGs (quality 95) under ``train2017/`` and ``val2017/``."""
    return write_layout(root, "coco2017", {"train": train, "val": val})


__all__ = ["Layout", "LAYOUTS", "SplitSize", "SIZES", "split_size", "layout", "annotation_path", "image_path", "check_image_files", "image_folders",
           "locate_split", "load_split", "write_layout", "write_coco2017", "JPEG_QUALITY"]
