"""Monte-Carlo checks of the paper's model-selection theory (Section 3: Proposition 1, Theorems 1 and 2).

A synthetic problem with a known class posterior: ``x`` is a posterior vector ``p(y|x)`` (n, q) drawn from a
Dirichlet around a random class, ``y ~ p(y|x)``, and candidate sets ``S`` come from USS or FPS. A classifier
is a posterior estimate ``f(x)`` (n, q): the Bayes posterior itself (calibrated), a sharpened or flattened
one (``posterior ** power``, miscalibrated but with the same predictions), or the Bayes posterior with a
fraction of predictions redirected (less accurate).

- Theorem 1 / Eq. 8: under USS or constant-p FPS, ``E[CR] - ACC = c (1 - ACC)`` with ``c = p(ybar in S | ybar != y)``,
  so ``(CR - c) / (1 - c)`` estimates ACC and CR orders classifiers like ACC.
- Proposition 1: ``E[CR] - ACC <= (1 - eps) gamma`` for ``ACC >= eps`` (gamma: ambiguity degree).
- Theorem 2: ``E[AA] = ACC`` when ``p(S|x, y) = C(x, S) I(y in S)`` and f is the true posterior.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from plench.selection import approximated_accuracy, covering_rate
from shared.errors import unknown_choice
from shared.noise.partial import fps_candidates, fps_matrix, uss_candidates


@dataclass
class SyntheticPLL:
    posterior: np.ndarray  # (n, q) true p(y|x)
    y: np.ndarray  # (n,) labels drawn from it
    S: np.ndarray  # (n, q) uint8 candidate sets
    c: float  # p(ybar in S | ybar != y) of the generator (NaN for a class-dependent FPS matrix)
    generator: str


def coverage_constant(generator: str, q: int, p: float | None = None) -> float:
    """``c`` of Theorem 1: ``(2^(q-2) - 1) / (2^(q-1) - 1)`` for exact USS, ``p`` for constant FPS."""
    if generator == "uss":
        return (2 ** (q - 2) - 1) / (2 ** (q - 1) - 1)
    if generator == "fps":
        return float(p)
    raise unknown_choice("candidate generator", generator, ["uss", "fps"])


def synthetic_problem(n: int, q: int = 10, *, generator: str = "uss", p: float | np.ndarray = 0.3,
                      concentration: float = 0.6, seed: int = 0) -> SyntheticPLL:
    """``n`` draws of (posterior, y, S); ``p`` is FPS's flip probability or a (q, q) inclusion matrix."""
    rng = np.random.default_rng(seed)
    centre = rng.integers(0, q, n)
    alpha = np.full((n, q), concentration)
    alpha[np.arange(n), centre] += 2.0 * concentration
    posterior = rng.gamma(alpha)
    posterior /= posterior.sum(1, keepdims=True)
    y = (rng.random((n, 1)) > np.cumsum(posterior, 1)).sum(1).clip(max=q - 1)
    if generator == "uss":
        S, c = uss_candidates(y, q, rng), coverage_constant("uss", q)
    elif generator == "fps":
        S = fps_candidates(y, q, p, rng)
        c = coverage_constant("fps", q, p) if np.isscalar(p) else float("nan")
    else:
        raise unknown_choice("candidate generator", generator, ["uss", "fps"])
    return SyntheticPLL(posterior, y, S, c, generator)


def classifier(problem: SyntheticPLL, *, power: float = 1.0, redirect: float = 0.0, target: np.ndarray | None = None,
               seed: int = 1) -> np.ndarray:
    """A posterior estimate (n, q): ``posterior ** power`` renormalised; a ``redirect`` fraction of rows then
    predicts ``target[row]`` (default: a uniformly random other class) with the row's top probability."""
    f = problem.posterior ** power
    f /= f.sum(1, keepdims=True)
    if redirect:
        rng = np.random.default_rng(seed)
        n, q = f.shape
        rows = np.flatnonzero(rng.random(n) < redirect)
        top = f.argmax(1)
        new = target[rows] if target is not None else (top[rows] + rng.integers(1, q, len(rows))) % q
        f[rows, new], f[rows, top[rows]] = f[rows, top[rows]], f[rows, new]
    return f


def scores(problem: SyntheticPLL, f: np.ndarray) -> dict[str, float]:
    """ACC, CR, AA of the posterior estimate ``f`` (n, q), with the SE of ACC and CR and the Eq. 8 estimate."""
    logits = torch.as_tensor(np.log(np.clip(f, 1e-300, None)))
    n = len(f)
    acc = float((f.argmax(1) == problem.y).mean())
    cr = covering_rate(logits, problem.S)
    return {"acc": acc, "cr": cr, "aa": approximated_accuracy(logits, problem.S, compat=False),
            "acc_se": np.sqrt(acc * (1 - acc) / n), "cr_se": np.sqrt(cr * (1 - cr) / n),
            "acc_from_cr": (cr - problem.c) / (1 - problem.c)}
