"""What Plench's notebooks read in the full profile, checked by ``shared.preflight`` before a batch starts.

Every notebook loads the datasets of ``cfg.datasets`` that are present and skips the others with the reason
(``plench.data.load_available``), so each dataset is optional, but a notebook needs at least one of them. A
PLCIFAR10 dataset reads the annotation file and CIFAR-10's images.
"""
from __future__ import annotations

from plench.data import PLL_DATASETS, locate_palm, locate_plcifar10
from shared.datasets.real import locate_cifar10
from shared.preflight import Need, any_of


def dataset_need(name: str) -> Need | None:
    """The files of one registered dataset (None for the offline stand-ins)."""
    if PLL_DATASETS[name].kind != "real":
        return None
    if name.startswith("PLCIFAR10"):
        return Need(name, lambda root: (locate_plcifar10(root), locate_cifar10(root)), optional=True)
    return Need(name, lambda root: locate_palm(name, root), optional=True)


def full_profile_needs(notebook: str, cfg) -> list[Need]:
    """Each real dataset ``notebook`` reads under ``cfg`` (optional), and at least one of them (required)."""
    needs = [n for n in map(dataset_need, cfg.get("datasets", [])) if n is not None]
    return needs + [any_of(f"the datasets of {notebook}", needs)] if needs else []
