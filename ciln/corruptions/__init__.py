"""CILN's corruption operators, by domain: ``cifar10`` (32x32 RGB), ``mnist`` (28x28 grey), ``adult`` (table).

    from ciln.corruptions import corrupt, list_corruptions
    noisy = corrupt("cifar10", images, "fog", 3, split="noisy_label_train")     # uint8, same shape
    list_corruptions("mnist")                                                  # names, families, constants

Each item's randomness comes from its own Generator, seeded with SHA-256 of
``"{master_seed}|{domain}|{corruption}|{severity}|{split}|{index}"`` (the split is left out for the test
split, as in the official code), so an item's corruption does not depend on which other items are
processed. Images are returned as ``np.uint8(np.clip(out, 0, 255))``, like the official release.
Severities are integers 1..5 (Adult: 1, 3, 5); splits are ``SPLITS``.

``options`` pass an operator's documented keywords, e.g. ``options={"swap": "true"}`` for CIFAR glass
blur's true swap, ``{"texture_scale": 1}`` for full-size frost textures, ``{"params": [...]}`` for other
per-severity constants (one per severity).
"""
from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ciln.corruptions import cifar, mnist, tabular
from shared.errors import ConfigError, unknown_choice
from shared.progress import progress
from shared.seeding import item_rng

IMAGE_SHAPES = {"cifar10": (32, 32, 3), "mnist": (28, 28)}
SPLITS = ("test", "noisy_label_train", "noisy_label_valid")  # the split names of the seeding key
DATASET_DOMAIN = {
    "cifar10": "cifar10", "mnist32rgb": "cifar10",
    "mnist": "mnist", "mnist5k": "mnist",
    "adult": "adult", "adult_like": "adult",
}


@dataclass(frozen=True)
class Corruption:
    name: str
    domain: str
    family: str
    severities: tuple[int, ...]
    deterministic: bool
    params: object  # per-severity constants


def _build_registry() -> dict[str, dict[str, Corruption]]:
    registry: dict[str, dict[str, Corruption]] = {"cifar10": {}, "mnist": {}, "adult": {}}
    for domain, module in (("cifar10", cifar), ("mnist", mnist)):
        for family, names in module.FAMILIES.items():
            for name in names:
                registry[domain][name] = Corruption(
                    name, domain, family, (1, 2, 3, 4, 5), name in module.DETERMINISTIC, module.PARAMS[name]
                )
    for family, names in tabular.FAMILIES.items():
        for name in names:
            registry["adult"][name] = Corruption(name, "adult", family, tabular.SEVERITIES, False, tabular.PARAMS[name])
    return registry


CORRUPTIONS = _build_registry()


def domain_of(dataset: str) -> str:
    """The corruption domain of a dataset name (real or stand-in)."""
    if dataset in CORRUPTIONS:
        return dataset
    if dataset not in DATASET_DOMAIN:
        raise unknown_choice("dataset for CILN corruptions", dataset, DATASET_DOMAIN)
    return DATASET_DOMAIN[dataset]


def get_corruption(domain: str, name: str, severity: int | None = None) -> Corruption:
    if domain not in CORRUPTIONS:
        raise unknown_choice("corruption domain", domain, CORRUPTIONS)
    if name not in CORRUPTIONS[domain]:
        raise unknown_choice(f"{domain} corruption", name, CORRUPTIONS[domain])
    spec = CORRUPTIONS[domain][name]
    if severity is None:
        return spec
    if isinstance(severity, (bool, np.bool_)) or not isinstance(severity, (int, np.integer)):
        raise ConfigError(f"severity must be an integer ({', '.join(map(str, spec.severities))}), "
                          f"got {severity!r} of type {type(severity).__name__}")
    if severity not in spec.severities:
        raise ConfigError(f"severity {severity!r} is not defined for {domain}/{name}; valid severities: "
                          f"{', '.join(map(str, spec.severities))}")
    return spec


def list_corruptions(domain: str) -> pd.DataFrame:
    """The domain's corruptions: name, family, whether random, and the constant of each severity."""
    rows = []
    for spec in CORRUPTIONS[domain_of(domain)].values():
        constants = spec.params if spec.params is not None else "ignores severity"
        if isinstance(constants, dict):
            constants = [constants[s] for s in spec.severities]
        rows.append({"corruption": spec.name, "family": spec.family, "random": not spec.deterministic,
                     "severity constants": constants})
    return pd.DataFrame(rows)


def check_split(split: str) -> str:
    """``split`` if it is one of ``SPLITS`` (it enters every item's seed, so a typo would silently reseed)."""
    if not isinstance(split, str) or split not in SPLITS:
        raise unknown_choice("split", split, SPLITS)
    return split


def item_rngs(domain: str, corruption: str, severity: int, split: str, indices, master_seed: int = 0):
    """One Generator per item index (the test split's key omits the split name)."""
    check_split(split)
    parts = (master_seed, domain, corruption, severity) if split == "test" else (master_seed, domain, corruption, severity, split)
    return [item_rng(*parts, int(i)) for i in indices]


def corrupt(
    domain: str,
    X,
    corruption: str,
    severity: int,
    *,
    split: str,
    master_seed: int = 0,
    indices=None,
    reference: pd.DataFrame | None = None,
    chunk: int = 512,
    show_progress: bool = False,
    options: Mapping | None = None,
):
    """Corrupt images (n, H, W[, C]) uint8 or a table (n rows) with ``corruption`` at ``severity``.

    ``indices`` are the items' positions within ``split`` (one of ``SPLITS``; default 0..n-1), used for
    seeding. Tabular MNAR needs ``reference``, the clean training table. ``options``: keywords of the
    image operator (see the module docstring); unknown ones are an error.
    """
    domain = domain_of(domain)
    spec = get_corruption(domain, corruption, severity)
    check_split(split)
    options = check_options(spec, options)
    n = len(X)
    indices = np.arange(n) if indices is None else np.asarray(indices)
    if len(indices) != n:
        raise ConfigError(f"got {n} items but {len(indices)} indices")
    rngs = item_rngs(domain, corruption, severity, split, indices, master_seed)
    if domain == "adult":
        if not isinstance(X, pd.DataFrame):
            raise ConfigError("adult corruptions need a pandas DataFrame with Adult's columns")
        if corruption == "missing_mnar" and reference is None:
            raise ConfigError("missing_mnar needs reference=<clean training table> for its quantiles and frequencies")
        return tabular.corrupt_table(X, corruption, severity, rngs, reference if reference is not None else X)
    X = np.asarray(X)
    if X.dtype != np.uint8 or X.shape[1:] != IMAGE_SHAPES[domain]:
        raise ConfigError(f"{domain} corruptions need uint8 images of shape (n, {', '.join(map(str, IMAGE_SHAPES[domain]))}), "
                          f"got {X.dtype} {X.shape}")
    fn = (cifar if domain == "cifar10" else mnist).FUNCTIONS[corruption]
    out = np.empty_like(X)
    starts = range(0, n, chunk)
    for start in (progress(starts, desc=f"{corruption} {severity}") if show_progress else starts):
        block = slice(start, start + chunk)
        out[block] = np.uint8(np.clip(fn(X[block], severity, rngs[block], **options), 0, 255))
    return out


def operator_options(domain: str, corruption: str) -> tuple[str, ...]:
    """The keywords an image operator accepts through ``corrupt(..., options=...)``."""
    domain = domain_of(domain)
    spec = get_corruption(domain, corruption)
    if domain == "adult":
        return ()
    fn = (cifar if domain == "cifar10" else mnist).FUNCTIONS[spec.name]
    return tuple(name for name, p in inspect.signature(fn).parameters.items() if p.kind is p.KEYWORD_ONLY)


def check_options(spec: Corruption, options: Mapping | None) -> dict:
    """``options`` as a dict, checked against the operator's keywords and its number of severities."""
    options = dict(options or {})
    valid = operator_options(spec.domain, spec.name)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ConfigError(f"{spec.domain}/{spec.name} takes no option {', '.join(map(repr, unknown))}; "
                          f"valid options: {', '.join(valid) or 'none'}")
    if "params" in options and len(options["params"]) != len(spec.severities):
        raise ConfigError(f"params for {spec.domain}/{spec.name} need one constant per severity "
                          f"({len(spec.severities)}), got {len(options['params'])}")
    return options
