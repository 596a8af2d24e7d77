"""Label-noise models used by several papers, and their measurement.

    from shared.noise import make_noisy_labels
    y_noisy = make_noisy_labels("symmetric", y, num_classes=10, rate=0.4, seed=0)

Registry ``NOISE_MODELS``: ``symmetric``, ``pairflip``, ``instance`` (Xia et al., 2020; needs ``features``).
Class-conditional noise from any transition matrix: ``apply_transition(y, T, rng)``.
Open-set noise of NoisywikiHow (text replaced by its nearest out-of-set event, label kept): ``open_set_noise``.
"""
from __future__ import annotations

import numpy as np

from shared.errors import ConfigError, unknown_choice
from shared.noise.classic import (
    apply_transition,
    check_transition_matrix,
    instance_dependent_flip_probabilities,
    instance_dependent_noise,
    pairflip_noise,
    pairflip_transition,
    sample_from_rows,
    symmetric_noise,
    symmetric_transition,
)
from shared.noise.estimation import anchor_transition, empirical_transition, noise_rate
from shared.noise.open_set import OpenSetNoise, nearest_open_set, open_set_noise, round_half_up, select_hard
from shared.noise.raters import (
    RaterPool, error_curve, oracle_rate_for_error, pool_error, rater_pool_for_error,
    rater_pools_for_errors, size_for_error, train_rater_pool,
)

NOISE_MODELS = {
    "symmetric": "with probability rate, another class chosen uniformly",
    "pairflip": "with probability rate, class i becomes (i + 1) mod K",
    "instance": "instance-dependent (part-dependent) noise of Xia et al. (2020); needs features",
}


def make_noisy_labels(
    model: str, y, num_classes: int, rate: float, seed: int = 0, *, features=None, exact: bool = False
) -> np.ndarray:
    """Noisy labels from a registered model, seeded with ``seed``."""
    rng = np.random.default_rng(seed)
    if model == "symmetric":
        return symmetric_noise(y, num_classes, rate, rng, exact=exact)
    if model == "pairflip":
        return pairflip_noise(y, num_classes, rate, rng, exact=exact)
    if model == "instance":
        if features is None:
            raise ConfigError("the instance-dependent noise model needs features=(n, d) of the items")
        return instance_dependent_noise(features, y, num_classes, rate, rng)
    raise unknown_choice("noise model", model, NOISE_MODELS)


__all__ = [
    "NOISE_MODELS", "make_noisy_labels", "apply_transition", "check_transition_matrix",
    "symmetric_transition", "pairflip_transition", "symmetric_noise", "pairflip_noise",
    "instance_dependent_noise", "instance_dependent_flip_probabilities", "sample_from_rows",
    "noise_rate", "empirical_transition", "anchor_transition",
    "RaterPool", "train_rater_pool", "rater_pool_for_error", "rater_pools_for_errors",
    "error_curve", "size_for_error", "pool_error", "oracle_rate_for_error",
    "OpenSetNoise", "open_set_noise", "nearest_open_set", "select_hard", "round_half_up",
]

from shared.noise.partial import aggregate_union, aggregate_vaguest, crowd_candidates, fps_candidates, uss_candidates  # noqa: E402

__all__ += ["uss_candidates", "fps_candidates", "crowd_candidates", "aggregate_union", "aggregate_vaguest"]
