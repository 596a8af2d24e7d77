"""Registry of the 27 Plench algorithms (Table 6), by their official names (``PRODEN``, ``ABS_MAE``, ``PiCO_plus``, ...).

    algorithm = make_algorithm("PRODEN", (64,), 10, train_S, hparams, arch="mlp", steps=1000)
    algorithm.update(batch); logits = algorithm.predict(x)
"""
from __future__ import annotations

import torch

from plench.algorithms.base import GROUPS, Algorithm, Batch
from shared.errors import unknown_choice

ALGORITHMS: dict[str, type[Algorithm]] = {}


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Class decorator adding an algorithm to ``ALGORITHMS`` under ``cls.name``."""
    if cls.group not in GROUPS:
        raise ValueError(f"{cls.__name__}: group must be one of {GROUPS}, got {cls.group!r}")
    ALGORITHMS[cls.name] = cls
    return cls


def make_algorithm(name: str, input_shape, num_classes: int, train_S, hparams: dict, *, arch: str, steps: int,
                   compat: bool = True, precision: str = "fp32") -> Algorithm:
    """Build algorithm ``name`` for a training split with candidate sets ``train_S`` (n_train, q); ``precision``
    "fp32" (the official code's) or "bf16" (forward passes and losses under bfloat16 autocast)."""
    if name not in ALGORITHMS:
        raise unknown_choice("algorithm", name, ALGORITHMS)
    return ALGORITHMS[name](tuple(input_shape), num_classes, torch.as_tensor(train_S), hparams, arch=arch,
                            steps=steps, compat=compat, precision=precision)


def display_name(name: str) -> str:
    return ALGORITHMS[name].display if name in ALGORITHMS else name


__all__ = ["ALGORITHMS", "Algorithm", "Batch", "GROUPS", "TABLE6_ORDER", "display_name", "make_algorithm", "register"]

# The algorithm modules register their classes on import (they import ``register`` from here).
from plench.algorithms import vanilla_pll  # noqa: E402,F401  (Table 6 order: vanilla PLL, vanilla CLL, holistic, noisy)
from plench.algorithms import vanilla_cll  # noqa: E402,F401
from plench.algorithms import holistic  # noqa: E402,F401
from plench.algorithms import contrastive  # noqa: E402,F401

# The paper's order (Table 6; the rows of Tables 1-4 and 7, 9-16).
TABLE6_ORDER = ("PRODEN", "CAVL", "POP", "ABS_MAE", "ABS_GCE", "EXP", "MCL_GCE", "MCL_MSE", "CC", "LWS", "IDGP",
                "PC", "Forward", "NN", "GA", "SCL_EXP", "SCL_NL", "L_W", "OP_W",
                "VALEN", "PiCO", "ABLE", "CRDPLL", "DIRK", "FREDIS", "ALIM", "PiCO_plus")
_registered = dict(ALGORITHMS)
ALGORITHMS.clear()
ALGORITHMS.update({name: _registered[name] for name in TABLE6_ORDER})
