"""What CILN's notebooks read in the full profile, checked by ``shared.preflight`` before a batch starts.

Every notebook builds (or reads) the benchmarks, so it needs each real dataset of ``cfg.datasets`` and, unless
``cfg.release_dirs`` names a release for it, the weight files of its voter pool (DeiT III, CLIP, TabPFN).
Notebooks 06-08 compare with CIFAR-10H when ``cfg.reference`` is "cifar10h"; 06-09 read Gu et al.'s PL-IDN
shards when ``cfg.plidn`` is "release".
"""
from __future__ import annotations

from pathlib import Path

from ciln.plidn import locate_release
from ciln.references import locate_cifar10h
from ciln.voters_pretrained import WEIGHT_FILES, weights_path
from ciln.voters_tabular import tabpfn_checkpoint_path
from shared.datasets.real import locate_adult, locate_cifar10, locate_mnist
from shared.errors import DataNotFoundError
from shared.preflight import Need, package

REAL_DATASETS = {"cifar10": locate_cifar10, "mnist": locate_mnist, "adult": locate_adult}
USES_REFERENCE = ("06_tv", "07_pca", "08_downstream")
USES_PLIDN = ("06_tv", "07_pca", "08_downstream", "09_attractors")


def _release(folder: str) -> Need:
    def locate(_root):
        if not (Path(folder).expanduser() / "settings").is_dir():
            raise DataNotFoundError(f"the CILN release named in release_dirs is not there: {Path(folder) / 'settings'} "
                                    "is missing (download the release, or remove it from release_dirs)")

    return Need(f"release {folder}", locate)


def _voter_needs(entry) -> list[Need]:
    """The weight file a pool entry (a voter name or {voter: name, <recipe key>: value}) loads, if any."""
    recipe = dict(entry) if isinstance(entry, dict) else {"voter": entry}
    name, weights = recipe["voter"], recipe.get("weights", "default")
    if name in WEIGHT_FILES and weights != "none":
        return [Need(f"{name} weights ({weights})", lambda root: weights_path(name, weights, root))]
    if name == "tabpfn":
        return [Need("TabPFN v1 checkpoint", lambda root: tabpfn_checkpoint_path(recipe, root))]
    return []


def _plidn_tier(tier: str) -> Need:
    return Need(f"PL-IDN tier {tier}", lambda root: locate_release(tier, root))


def full_profile_needs(notebook: str, cfg) -> list[Need]:
    """The datasets, weight files and packages ``notebook`` reads under ``cfg`` (its merged settings)."""
    needs = []
    releases = cfg.get("release_dirs") or {}
    for paper_name, dataset in cfg.datasets.items():
        if dataset in REAL_DATASETS:
            needs.append(Need(paper_name, REAL_DATASETS[dataset]))
        if paper_name in releases:
            needs.append(_release(releases[paper_name]))
        else:
            needs += [n for entry in cfg.pools.get(paper_name, []) for n in _voter_needs(entry)]
    if notebook in USES_REFERENCE and cfg.reference == "cifar10h":
        needs.append(Need("CIFAR-10H", locate_cifar10h))
    if notebook in USES_PLIDN and cfg.plidn == "release":
        needs.append(package("crc32c", "pip install crc32c (a regular dependency: run make setup)"))
        needs += [_plidn_tier(tier) for tier in cfg.raters["tiers"]]
    return needs
