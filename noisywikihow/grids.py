"""The runs each NoisywikiHow notebook trains, as data: one ``Grid`` per ``run_grid`` call, in the order the page
makes them.

The pages (``noisywikihow.pages``) train exactly these grids and the cost plan (``noisywikihow.cost``) prices
exactly these grids, so the two cannot disagree. Pure functions of a notebook's merged settings ``cfg`` and its
``Training``: nothing is loaded or trained here.

    grids = notebook_grids("03_lnl_realworld", cfg, Training.from_settings(cfg))
    grids[0].specs[0]      # RunSpec("clean", "base", 0, "minilm", "mlp")
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from noisywikihow.benchmark import noise_name
from noisywikihow.experiments import RunSpec, Training
from shared.errors import ConfigError, unknown_choice

#: Table 5: 10 % noise from all sources (mix) or from one (neighbor = SC, uncommon = BCC, tail = TC)
SOURCE_SETS = ("mix_0.1", "neighbor_0.1", "uncommon_0.1", "tail_0.1")


@dataclass(frozen=True)
class Grid:
    """One ``run_grid`` call: ``specs`` trained with ``training`` on the features ``(encoder, model)`` reads."""

    encoder: str
    model: str
    training: Training
    specs: tuple[RunSpec, ...]


def _spec(cfg, train_set: str, method: str = "base", seed: int = 0) -> RunSpec:
    """A run on the notebook's own encoder and model (``Page.spec``)."""
    return RunSpec(train_set, method, seed, cfg.encoder, cfg.model)


def _grid(cfg, training: Training, specs, encoder: str | None = None, model: str | None = None) -> Grid:
    return Grid(encoder or cfg.encoder, model or cfg.model, training, tuple(specs))


def architecture_grids(cfg, training: Training) -> list[Grid]:
    """01 (Table 4): per architecture (encoder, model) the base model at every level and seed."""
    return [_grid(cfg, training, [RunSpec(noise_name("real", t), "base", s, enc, model) for t in cfg.levels
                                  for s in cfg.seeds], enc, model) for enc, model in cfg.architectures]


def source_grids(cfg, training: Training) -> list[Grid]:
    """02 (Table 5, Fig. 5): every method on the four 10 % training sets; the base model on ``base_seeds``."""
    return [_grid(cfg, training, [_spec(cfg, t, m, s) for m in cfg.methods for t in SOURCE_SETS
                                  for s in (cfg.base_seeds if m == "base" else cfg.seeds)])]


def lnl_grids(cfg, training: Training, kind: str) -> list[Grid]:
    """03 (Table 8, real noise) and 04 (Table 10, symmetric): every method at every level and seed."""
    return [_grid(cfg, training, [_spec(cfg, noise_name(kind, t), m, s) for m in cfg.methods for t in cfg.levels
                                  for s in cfg.seeds])]


def loss_grids(cfg, training: Training) -> list[Grid]:
    """04 (Fig. 3): the base model at ``loss_level`` of real and of symmetric noise, first seed."""
    return [_grid(cfg, training, [_spec(cfg, noise_name(kind, cfg.loss_level), "base", cfg.seeds[0])
                                  for kind in ("real", "symmetric")])]


def curve_grids(cfg, training: Training) -> list[Grid]:
    """04 (Fig. 4): the base model trained ``curve_epochs`` at 0 % and every level of both kinds, first seed."""
    specs = [_spec(cfg, noise_name(kind, t), "base", cfg.seeds[0]) for kind in ("real", "symmetric")
             for t in [0.0, *cfg.levels] if kind == "real" or t > 0]
    return [_grid(cfg, replace(training, epochs=cfg.curve_epochs), specs)]


def longtail_grids(cfg, training: Training) -> list[Grid]:
    """05 (Table 12): the base model and every long-tailed method at every level and seed."""
    return [_grid(cfg, training, [_spec(cfg, noise_name("real", t), m, s) for m in ["base", *cfg.methods]
                                  for t in cfg.levels for s in cfg.seeds])]


def notebook_grids(notebook: str, cfg, training: Training) -> list[Grid]:
    """Every grid ``notebook`` (a stem) trains under ``cfg``, in the page's order."""
    if not cfg.get("seeds"):
        raise ConfigError(f"{notebook}: seeds must list at least one seed, got {cfg.get('seeds')!r}")
    grids = {"00_dataset_and_noise": list,
             "01_plm_architectures": lambda: architecture_grids(cfg, training),
             "02_noise_sources": lambda: source_grids(cfg, training),
             "03_lnl_realworld": lambda: lnl_grids(cfg, training, "real"),
             "04_real_vs_synthetic": lambda: [*lnl_grids(cfg, training, "symmetric"), *loss_grids(cfg, training),
                                              *curve_grids(cfg, training)],
             "05_long_tailed": lambda: longtail_grids(cfg, training)}
    if notebook not in grids:
        raise unknown_choice("NoisywikiHow notebook", notebook, grids)
    return grids[notebook]()


__all__ = ["SOURCE_SETS", "Grid", "architecture_grids", "curve_grids", "lnl_grids", "longtail_grids", "loss_grids",
           "notebook_grids", "source_grids"]
