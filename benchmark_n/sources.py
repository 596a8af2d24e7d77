"""Where a notebook's annotations come from: the user's copy of a real dataset (full profile) or COCO-shapes
(smoke profile).

    data = load_annotations(cfg, data_dir)      # cfg: the notebook's settings (benchmark_n/profiles.yaml)
    data.dataset                                # a checked COCO dict
    data.images                                 # (n, h, w, 3) uint8 for the stand-in; None for a real dataset

``dataset: shapes`` generates COCO-shapes (``benchmark_n.shapes``, preset ``shapes_preset``, ``n_images`` images,
seed ``shapes_seed``); ``coco2017``, ``cityscapes`` or ``lvis_v1`` read ``split`` of the dataset under
``data_dir/<dataset_dir>`` (``benchmark_n.formats``: a clear error names the file that is missing).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import cv2
import numpy as np

from benchmark_n import formats
from benchmark_n.shapes import generate_shapes, preset
from shared.errors import DataNotFoundError, unknown_choice
from shared.paths import data_dir as default_data_dir

DATASETS = {"shapes": "COCO-shapes, generated here (benchmark_n.shapes)", **{
    name: f"{name} under data_dir (benchmark_n.formats)" for name in formats.LAYOUTS}}


@dataclass(frozen=True)
class Annotations:
    source: str  # a key of DATASETS
    name: str  # what the annotations are, for tables and the comparison with the paper
    dataset: dict
    images: np.ndarray | None = None  # the stand-in's images (n, h, w, 3) uint8; a real dataset's stay on disk
    root: Path | None = None  # a real dataset's folder
    split: str = ""

    @cached_property
    def _positions(self) -> dict[int, int]:
        return {im["id"]: i for i, im in enumerate(self.dataset["images"])}

    def image(self, image_id: int, required: bool = False) -> np.ndarray:
        """(h, w, 3) uint8 RGB image of ``image_id``: the stand-in's array, or the real file. A file that is missing
        or unreadable gives a plain grey canvas of the image's size (the annotations alone are enough for the
        annotation-level notebooks), or, with ``required`` (a model trains or predicts on it), DataNotFoundError."""
        position = self._positions[image_id]
        if self.images is not None:
            return self.images[position]
        entry = self.dataset["images"][position]
        path = formats.image_path(self.root, self.source, self.split, entry)
        picture = cv2.imread(str(path), cv2.IMREAD_COLOR) if path.is_file() else None
        if picture is None:
            if required:
                raise DataNotFoundError(f"image {image_id} of {self.name}: {path} is missing or not an image; a model "
                                        "needs the images (download them next to the annotations)")
            return np.full((entry["height"], entry["width"], 3), 200, np.uint8)
        return cv2.cvtColor(picture, cv2.COLOR_BGR2RGB)


def load_annotations(cfg, data_dir=None) -> Annotations:
    """The annotations the settings ``dataset`` (and ``split``, ``n_images``, ``shapes_seed``, ...) name."""
    if cfg.dataset == "shapes":
        data = generate_shapes(int(cfg.n_images), int(cfg.shapes_seed), **preset(cfg.shapes_preset))
        return Annotations("shapes", f"COCO-shapes ({cfg.n_images} images, {cfg.shapes_preset} preset)", data.dataset,
                           data.images)
    if cfg.dataset not in formats.LAYOUTS:
        raise unknown_choice("dataset", cfg.dataset, DATASETS)
    root = default_data_dir(data_dir) / cfg.dataset_dir
    dataset = formats.load_split(root, cfg.dataset, cfg.split)
    return Annotations(cfg.dataset, f"{cfg.dataset} {cfg.split}", dataset, root=root, split=cfg.split)


__all__ = ["DATASETS", "Annotations", "load_annotations"]
