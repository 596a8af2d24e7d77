"""What Benchmark-N's notebooks read in the full profile, checked by ``shared.preflight`` before a batch starts.

* 00-02 read the annotations of one split of the dataset (``split``) under ``data_dir/<dataset_dir>``, 00 its images
  too if they are there (its figures draw grey canvases otherwise); 03-08 read the train and val annotations and
  images (``formats.locate_split``: the annotation files and image folders; the image files themselves are checked
  when a model loads them);
* 03-08 with the torchvision backend: the backbone's ImageNet weights (torch's hub cache, or the ``backbone_weights``
  file; none with ``backbone_weights: null``); with the mmdet backend: MMDetection;
* 08: SAM's checkpoint and package when SAM annotates or is fine-tuned, Grounding-DINO's folder when it finds the
  text prompts' boxes;
* 09: the CAMUS release, unless the stand-in is asked for.
"""
from __future__ import annotations

from pathlib import Path

from benchmark_n import camus_files, formats, grounded, maskrcnn, wan
from benchmark_n.mmdet_backend import INSTALL as MMDET_INSTALL
from shared.preflight import Need, package

ONE_SPLIT = ("00_noise_engine", "01_annotation_quality", "02_benchmark_files")  # annotations of one split
MODEL_PAGES = ("03_train_eval", "04_noise_ablation", "05_class_noise", "06_lnl", "07_confidence", "08_coco_wan")


def _splits(notebook: str, cfg) -> list[Need]:
    dataset = cfg.dataset
    def root(data_dir):
        return Path(data_dir) / (cfg.get("dataset_dir") or dataset)

    if notebook not in ONE_SPLIT:
        return [Need(f"{dataset} {split} annotations and images",
                     lambda data_dir, split=split: formats.locate_split(root(data_dir), dataset, split))
                for split in ("train", "val")]
    needs = [Need(f"{dataset} {cfg.split} annotations",
                  lambda data_dir: formats.annotation_path(root(data_dir), dataset, cfg.split))]
    if notebook == "00_noise_engine":
        needs.append(Need(f"{dataset} {cfg.split} images (Fig. 3)", optional=True,
                          locate=lambda data_dir: formats.image_folders(root(data_dir), dataset, cfg.split)))
    return needs


def _model_needs(cfg) -> list[Need]:
    if cfg.backend == "mmdet":
        return [package("mmdet", MMDET_INSTALL)]
    if cfg.backend != "torchvision":
        return []
    hp = maskrcnn.check_hparams(dict(cfg.get("hparams") or {}))
    if hp["backbone_weights"] is None:
        return []
    return [Need(f"{hp['backbone']} ImageNet weights",
                 lambda root: maskrcnn.backbone_weights_path(hp["backbone"], hp["backbone_weights"]))]


def _coco_wan_needs(cfg) -> list[Need]:
    needs = []
    if "sam" in (cfg.annotator, dict(cfg.get("finetune") or {}).get("backend")):
        checkpoint = cfg.get("checkpoint")
        needs.append(Need("SAM checkpoint", lambda root: wan.locate_sam(
            checkpoint or Path(root) / "weights" / wan.SAM_CHECKPOINTS["vit_h"])))
    text = dict(cfg.get("text") or {})
    if text.get("detector") == "grounding_dino":
        needs.append(Need("Grounding-DINO", lambda root: grounded.locate_grounding_dino(
            text.get("model_dir") or Path(root) / "weights" / grounded.GROUNDING_DINO_DIR)))
    return needs


def full_profile_needs(notebook: str, cfg) -> list[Need]:
    """The annotation files, image folders, weights and packages ``notebook`` reads under ``cfg`` (its merged
    settings); nothing for a stand-in dataset (COCO-shapes, synthetic echocardiograms)."""
    if notebook == "09_camus_ef":
        if cfg.dataset == "synthetic":
            return []
        return [Need("the CAMUS release", lambda root: camus_files.locate_camus(Path(root) / cfg.dataset_dir))]
    needs = [] if cfg.dataset == "shapes" else _splits(notebook, cfg)
    if notebook in MODEL_PAGES:
        needs += _model_needs(cfg)
    if notebook == "08_coco_wan":
        needs += _coco_wan_needs(cfg)
    return needs
