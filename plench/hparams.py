"""Hyperparameters of every Plench algorithm: defaults and random-search distributions (Table 8).

One place for all of them, DomainBed-style. ``hparams_seed == 0`` gives the defaults; any other seed draws
every hyperparameter from its own ``RandomState(seed_hash(seed_hash(hparams_seed, trial_seed), name))``,
exactly as the official sweep does, so the same (hparams_seed, trial_seed) pair gives the same learning
rate, weight decay and batch size to every algorithm (paired configurations).

Each hyperparameter is a default and a distribution object (``Fixed``, ``LogUniform``, ``Pow2Int``, ``Choice``,
``PowChoice``): called with a ``RandomState`` it draws a value exactly as the official ``hparams_registry.py``
does, and it describes itself (``text``, and ``values``: what a search can draw), so Table 8 can be set beside the registry
(``plench.catalogue``). ``search_space(algorithm, arch)`` lists them.

Where the official code differs from the paper's Table 8, the code's value is used with ``compat=True``
(the default: it produced the published numbers) and the paper's with ``compat=False``:
VALEN's warm-up default (1,000 iterations in the code, 5,000 in the paper). The batch-size grids are the
code's (``2 ** int(U(6, 9))`` gives 64-256, never 512) in both modes, since the paper's own tables come
from them. Unused code hyperparameters (POP's ``pop_interval``, PiCO's ``momentum``) are left out; each
name has its own random stream, so leaving them out changes no other draw.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from shared.errors import unknown_choice
from shared.seeding import seed_hash

# Networks whose global hyperparameters follow the paper's "ResNet" rows; the others follow "MLP".
IMAGE_ARCHS = ("resnet32", "densenet_bc")
# True noise rates the official code hard-codes for ALIM and PiCO+ on PLCIFAR10 (Appendix E.2).
KNOWN_NOISE_RATES = {"PLCIFAR10_Aggregate": 0.00132, "PLCIFAR10_Vaguest": 0.17556}


def _num(value) -> str:
    """A number as Table 8 writes it: 0.001, 8192, -4.5 (``:g``)."""
    return f"{value:g}" if isinstance(value, (int, float, np.integer, np.floating)) else str(value)


# ------------------------------------------------------------------------------------------------ distributions
@dataclass(frozen=True)
class Fixed:
    """Not searched: every draw is ``value``."""

    value: object

    def __call__(self, r: np.random.RandomState):
        return self.value

    @property
    def text(self) -> str:
        return _num(self.value)

    @property
    def values(self) -> tuple:
        return (self.value,)


@dataclass(frozen=True)
class LogUniform:
    """``base ** Uniform(low, high)`` (Table 8: 10^Uniform(-4.5,-2.5))."""

    low: float
    high: float
    base: int = 10

    def __call__(self, r: np.random.RandomState):
        return self.base ** r.uniform(self.low, self.high)

    @property
    def text(self) -> str:
        return f"{self.base}^Uniform({_num(self.low)},{_num(self.high)})"

    @property
    def values(self) -> tuple:
        return (self.base ** self.low, self.base ** self.high)  # the range's ends


@dataclass(frozen=True)
class Pow2Int:
    """``2 ** int(Uniform(low, high))`` as the official code draws batch sizes: 2^low .. 2^(high-1), never 2^high."""

    low: int
    high: int

    def __call__(self, r: np.random.RandomState):
        return int(2 ** int(r.uniform(self.low, self.high)))

    @property
    def text(self) -> str:
        return f"2^int(Uniform({self.low},{self.high}))"

    @property
    def values(self) -> tuple:
        return tuple(2 ** k for k in range(self.low, self.high))


@dataclass(frozen=True)
class Choice:
    """``RandomChoice(values)``, each draw cast to ``cast`` (int or float)."""

    choices: tuple
    cast: type = float

    def __call__(self, r: np.random.RandomState):
        return self.cast(r.choice(list(self.choices)))

    @property
    def text(self) -> str:
        return "RandomChoice([" + ",".join(_num(v) for v in self.choices) + "])"

    @property
    def values(self) -> tuple:
        return tuple(self.choices)


@dataclass(frozen=True)
class PowChoice:
    """``base ** RandomChoice(exponents)`` (Table 8: 0.1^RandomChoice[6,5,4,3,2,1])."""

    base: float
    exponents: tuple

    def __call__(self, r: np.random.RandomState):
        return self.base ** int(r.choice(list(self.exponents)))

    @property
    def text(self) -> str:
        return f"{_num(self.base)}^RandomChoice([" + ",".join(_num(e) for e in self.exponents) + "])"

    @property
    def values(self) -> tuple:
        return tuple(self.base ** e for e in self.exponents)


Distribution = Fixed | LogUniform | Pow2Int | Choice | PowChoice


class Hparam(NamedTuple):
    """A hyperparameter of the registry: its default (hparams seed 0) and its random-search distribution."""

    default: object
    distribution: Distribution


def _fixed(value) -> Hparam:
    return Hparam(value, Fixed(value))


def _ints(*values) -> Choice:
    return Choice(values, int)


def _floats(*values) -> Choice:
    return Choice(values, float)


_PICO_FAMILY = {
    "feat_dim": Hparam(128, _ints(64, 128, 256)),
    "moco_queue": Hparam(8192, _ints(4096, 8192)),
    "moco_m": Hparam(0.999, _floats(0.9, 0.999)),
    "proto_m": Hparam(0.99, _floats(0.99, 0.9)),
    "loss_weight": Hparam(0.5, _floats(0.5, 1.0)),
}


def specific_space(algorithm: str, dataset: str | None = None, compat: bool = True) -> dict[str, Hparam]:
    """The algorithm's own hyperparameters (name -> ``Hparam``); empty for an algorithm that has none."""
    noise = KNOWN_NOISE_RATES.get(dataset or "")
    table = {
        "POP": {"rollWindow": Hparam(5, _ints(3, 4, 5, 6, 7)),
                "warm_up": Hparam(20, _ints(10, 15, 20)),
                "theta": Hparam(1e-3, LogUniform(-4.5, -2.5)),
                "inc": Hparam(1e-3, LogUniform(-4.5, -2.5))},
        "ABS_GCE": {"q": _fixed(0.7)},
        "MCL_GCE": {"q": _fixed(0.7)},
        "LWS": {"lw_weight": Hparam(2, _ints(1, 2))},
        "IDGP": {"warm_up_epoch": Hparam(10, _ints(5, 10, 15, 20))},
        "NN": {"beta": _fixed(0.0)},
        "VALEN": {"warm_up": Hparam(1000 if compat else 5000, _ints(1000, 2000, 3000, 4000, 5000)),
                  "knn": Hparam(3, _ints(3, 4))},
        "PiCO": {"prot_start": _fixed(178), **_PICO_FAMILY, "conf_ema_range": _fixed((0.95, 0.8))},
        "ABLE": {"feat_dim": Hparam(128, _ints(64, 128, 256)),
                 "loss_weight": Hparam(1.0, _floats(0.5, 1.0, 2.0)),
                 "temperature": Hparam(0.07, _floats(0.03, 0.05, 0.07, 0.09))},
        "CRDPLL": {"lam": _fixed(1.0)},
        "DIRK": {"momentum": Hparam(0.99, _floats(0.5, 0.9, 0.99)),
                 "moco_queue": Hparam(8192, _ints(4096, 8192)),
                 "feat_dim": Hparam(128, _ints(64, 128, 256)),
                 "prot_start": _fixed(178),
                 "weight": Hparam(1.0, _floats(0.1, 0.3, 0.5, 0.7, 0.9, 1.0)),
                 "dist_temperature": Hparam(0.4, _floats(0.2, 0.4, 0.6)),
                 "feat_temperature": Hparam(0.07, _floats(0.03, 0.05, 0.07, 0.09))},
        "FREDIS": {"theta": _fixed(1e-6), "delta": _fixed(1.0),
                   "inc": Hparam(1e-6, PowChoice(0.1, (6, 5, 4, 3, 2, 1))),
                   "dec": Hparam(1e-6, PowChoice(0.1, (6, 5, 4, 3, 2, 1))),
                   "change_size": Hparam(500, _ints(50, 100, 300, 500, 800, 1000)),
                   "times": Hparam(2, _ints(1, 2, 3, 4, 5)),
                   "update_interval": Hparam(20, _ints(10, 20)),
                   "lam": Hparam(10.0, _floats(1.0, 10.0)),
                   "alpha": Hparam(1.0, _floats(0.001, 0.01, 0.1, 1.0))},
        "ALIM": {"prot_start": _fixed(178), **_PICO_FAMILY, "conf_ema_range": _fixed((0.95, 0.8)),
                 "start_epoch": Hparam(40, _ints(20, 40, 80, 100, 140)),
                 "loss_weight_mixup": _fixed(1.0), "mixup_alpha": _fixed(4.0),
                 "noise_rate": _fixed(noise) if noise is not None else
                 Hparam(0.2, _floats(0.1, 0.2, 0.3, 0.4, 0.5, 0.7))},
        "PiCO_plus": {"prot_start": Hparam(250, _ints(1, 250)), **_PICO_FAMILY,
                      "conf_ema_range": _fixed((0.95, 0.8)),
                      "pure_ratio": _fixed(1 - noise) if noise is not None else
                      Hparam(1.0, _floats(0.6, 0.8, 0.95, 0.99, 1.0)),
                      "knn_start": Hparam(5000, _ints(2, 100, 5000)),
                      "n_knn": Hparam(16, _ints(8, 16)),
                      "temperature_guess": Hparam(0.07, _floats(0.1, 0.07)),
                      "ur_weight": Hparam(0.1, _floats(0.1, 0.5)),
                      "cls_weight": Hparam(2.0, _floats(2.0, 3.0, 5.0))},
    }
    return table.get(algorithm, {})


def global_space(arch: str) -> dict[str, Hparam]:
    """Learning rate, batch size and weight decay of every algorithm: Table 8's "ResNet" rows for ``IMAGE_ARCHS``,
    its "MLP" rows otherwise."""
    image = arch in IMAGE_ARCHS
    return {
        "lr": Hparam(1e-3, LogUniform(-4.5, -2.5)),
        "batch_size": Hparam(256, Pow2Int(6, 9)) if image else Hparam(128, Pow2Int(5, 8)),
        "weight_decay": Hparam(1e-5, LogUniform(-6, -3)),
    }


def search_space(algorithm: str, arch: str, *, dataset: str | None = None, compat: bool = True) -> dict[str, Hparam]:
    """Every hyperparameter of one run (name -> ``Hparam``): the global ones, then the algorithm's own."""
    from plench.algorithms import ALGORITHMS

    if algorithm not in ALGORITHMS:
        raise unknown_choice("algorithm", algorithm, ALGORITHMS)
    return {**global_space(arch), **specific_space(algorithm, dataset, compat)}


def _draw(name: str, hp: Hparam, hparams_seed: int, trial_seed: int):
    """``name``'s value in configuration ``hparams_seed`` of trial ``trial_seed``: its default for seed 0, else a
    draw from its own stream ``RandomState(seed_hash(seed_hash(hparams_seed, trial_seed), name))``."""
    if hparams_seed == 0:
        return hp.default
    return hp.distribution(np.random.RandomState(seed_hash(seed_hash(hparams_seed, trial_seed), name)))


def hparams_for(algorithm: str, arch: str, *, hparams_seed: int = 0, trial_seed: int = 0,
                dataset: str | None = None, compat: bool = True) -> dict:
    """The hyperparameters of one run: defaults for ``hparams_seed == 0``, random draws otherwise."""
    spaces = search_space(algorithm, arch, dataset=dataset, compat=compat)
    return {name: _draw(name, hp, hparams_seed, trial_seed) for name, hp in spaces.items()}


def hparam_for(name: str, algorithm: str, arch: str, *, hparams_seed: int = 0, trial_seed: int = 0,
               dataset: str | None = None, compat: bool = True):
    """``hparams_for(...)[name]`` alone, without drawing the others (each has its own stream, so the value is the
    same): what a sweep's plan reads of every run (its batch size) at a fraction of the cost."""
    from plench.algorithms import ALGORITHMS

    if algorithm not in ALGORITHMS:
        raise unknown_choice("algorithm", algorithm, ALGORITHMS)
    space = global_space(arch)
    if name not in space:
        space = specific_space(algorithm, dataset, compat)
    if name not in space:
        raise unknown_choice(f"hyperparameter of {algorithm}", name, {**global_space(arch), **space})
    return _draw(name, space[name], hparams_seed, trial_seed)
