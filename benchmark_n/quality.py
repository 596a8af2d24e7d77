"""Annotation quality (the paper's Fig. 11): noisy annotations scored as detections against the clean ones.

Every noisy variant of a dataset — an engine at a tier, or one operation of the ablation at a level — is drawn
for each seed and scored with ``metrics.annotation_quality`` (mask AP and Boundary AP). A variant's scores are
cached (``shared.cache``), keyed by the clean annotations, the variant and the code, so a notebook run again
recomputes nothing and a changed engine recomputes everything it touches.

    variants = engine_variants(["paper", "legacy_v0"], ["low", "mid", "high"], seeds=[0, 1])
    frame = quality_table(dataset, variants)        # one row per variant: mask_AP, boundary_AP, ... and counts
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import partial

import pandas as pd

from benchmark_n.metrics import annotation_quality
from benchmark_n.noise import ABLATIONS, ENGINES, ablate, canonical_tier, noise_dataset
from shared.cache import ArtifactCache
from shared.errors import unknown_choice
from shared.progress import progress

CACHE_KIND = "benchmark-n-quality"
SCORES = ("mask_AP", "mask_AP50", "mask_AP75", "boundary_AP", "boundary_AP50", "boundary_AP75")
COUNTS = ("annotations_in", "kept", "deleted", "implicitly_deleted", "class_flipped", "spatially_noised")


@dataclass(frozen=True)
class Variant:
    """One noisy variant: ``kind`` "engine" (``name`` an engine of ``noise.ENGINES``) or "ablation" (``name`` an
    operation of ``noise.ABLATIONS``), at a tier and seed."""

    kind: str
    name: str
    tier: str
    seed: int

    def __post_init__(self):
        registry = {"engine": ENGINES, "ablation": ABLATIONS}
        if self.kind not in registry:
            raise unknown_choice("variant kind", self.kind, registry)
        if self.name not in registry[self.kind]:
            raise unknown_choice(f"{self.kind}", self.name, registry[self.kind])
        object.__setattr__(self, "tier", canonical_tier(self.tier))

    @property
    def random(self) -> bool:
        """Whether the seed changes the noisy annotations (not for dilation, erosion, opening, v0 approximation)."""
        return self.kind == "engine" or ABLATIONS[self.name].random

    def draw(self, dataset: dict):
        """The noisy ``NoisyDataset`` of this variant."""
        if self.kind == "engine":
            return noise_dataset(dataset, self.name, self.tier, self.seed)
        return ablate(dataset, self.name, self.tier, self.seed)


def engine_variants(engines, tiers, seeds) -> list[Variant]:
    return [Variant("engine", e, t, s) for e in engines for t in tiers for s in seeds]


def ablation_variants(operations, tiers, seeds) -> list[Variant]:
    return [Variant("ablation", o, t, s) for o in operations for t in tiers for s in seeds]


def fingerprint(dataset: dict) -> str:
    """16 hex digits of SHA-256 over the canonical JSON of a COCO dict, fed one annotation at a time (COCO's train
    annotations are half a gigabyte as one string)."""
    digest = hashlib.sha256(json.dumps({k: v for k, v in dataset.items() if k != "annotations"}, sort_keys=True).encode())
    for ann in dataset.get("annotations", []):
        digest.update(json.dumps(ann, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def score_variant(dataset: dict, variant: Variant, dilation_ratio: float = 0.02) -> dict:
    """Mask and Boundary AP of the variant's noisy annotations against ``dataset``, with the noise counts."""
    noisy = variant.draw(dataset)
    scores = annotation_quality(dataset, noisy.dataset, dilation_ratio=dilation_ratio)
    return {**{k: scores[k] for k in SCORES}, **{k: int(noisy.manifest[k]) for k in COUNTS}}


def _clean_scores(dataset: dict, dilation_ratio: float) -> dict:
    scores = annotation_quality(dataset, dataset, dilation_ratio=dilation_ratio)
    return {k: scores[k] for k in SCORES}


def clean_params(data, dilation_ratio: float = 0.02) -> dict:
    """The cache parameters of ``clean_scores``; ``data``: the dataset's ``fingerprint`` (or, for a planner without
    the data, a stand-in that names it)."""
    return {"data": data, "variant": "clean", "dilation_ratio": dilation_ratio}


def variant_params(data, variant: Variant, dilation_ratio: float = 0.02) -> dict:
    """The cache parameters of a variant's row of ``quality_table`` (``data`` as ``clean_params``): a variant the
    seed does not change is scored once for all seeds."""
    key = asdict(variant) if variant.random else {**asdict(variant), "seed": None}
    return {"data": data, "variant": key, "dilation_ratio": dilation_ratio}


CLEAN_CODE, VARIANT_CODE = (_clean_scores,), (score_variant,)


def clean_scores(dataset: dict, *, dilation_ratio: float = 0.02, cache: ArtifactCache | None = None) -> dict:
    """The clean annotations scored against themselves (every AP 1 unless the evaluation loses instances): the
    clean baseline of the comparison with Table 7; cached."""
    return (cache or ArtifactCache()).get_or_build(CACHE_KIND, clean_params(fingerprint(dataset), dilation_ratio),
                                                   partial(_clean_scores, dataset, dilation_ratio),
                                                   code=list(CLEAN_CODE), fmt="json")


def quality_table(dataset: dict, variants, *, dilation_ratio: float = 0.02,
                  cache: ArtifactCache | None = None) -> pd.DataFrame:
    """One row per variant: kind, name, tier, seed, the ``SCORES`` (fractions) and the ``COUNTS``; cached."""
    cache = cache or ArtifactCache()
    data = fingerprint(dataset)
    rows = []
    for variant in progress(list(variants), desc="noisy variants scored"):
        row = cache.get_or_build(CACHE_KIND, variant_params(data, variant, dilation_ratio),
                                 partial(score_variant, dataset, variant, dilation_ratio), code=list(VARIANT_CODE),
                                 fmt="json")
        rows.append({**asdict(variant), **row})
    return pd.DataFrame(rows, columns=["kind", "name", "tier", "seed", *SCORES, *COUNTS])


__all__ = ["SCORES", "COUNTS", "Variant", "engine_variants", "ablation_variants", "fingerprint", "score_variant",
           "clean_params", "variant_params", "CLEAN_CODE", "VARIANT_CODE", "clean_scores", "quality_table"]
