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

The notebook's tables: ``problems`` (USS and constant FPS), ``eq8_table``, ``bound_table``, ``theorem2_table`` and
``class_dependent_counterexample`` (what Theorem 1 excludes); their claims are ``plench.claims.theory_claims``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from plench.selection import approximated_accuracy, covering_rate
from shared.errors import unknown_choice
from shared.noise.partial import ambiguity_degree, fps_candidates, uss_candidates


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


# ------------------------------------------------------------------------------------------------ the notebook's tables
def problems(n: int, q: int, fps_p, *, seed: int = 0) -> dict[str, SyntheticPLL]:
    """The generators the theorems cover, each drawn once: exact USS ("USS") and constant FPS ("FPS p=0.1", ...)."""
    generators = {"USS": ("uss", None)} | {f"FPS p={p}": ("fps", p) for p in fps_p}
    return {name: synthetic_problem(n, q, generator=g, p=p if p is not None else 0.0, seed=seed)
            for name, (g, p) in generators.items()}


def eq8_table(problems: dict[str, SyntheticPLL], redirects, *, seed: int = 0) -> pd.DataFrame:
    """Theorem 1 / Eq. 8: per generator and classifier (the Bayes posterior with a ``redirect`` share of its
    predictions moved, seed ``seed + 1``), ACC, CR, the estimate ``(CR - c)/(1 - c)`` and ``z``, their difference in
    standard errors (CR's binomial SE divided by ``1 - c``, combined with ACC's)."""
    rows = []
    for name, problem in problems.items():
        for redirect in redirects:
            s = scores(problem, classifier(problem, redirect=redirect, seed=seed + 1))
            z = (s["acc_from_cr"] - s["acc"]) / np.hypot(s["cr_se"] / (1 - problem.c), s["acc_se"])
            rows.append({"generator": name, "c": problem.c, "redirected": redirect, "ACC": s["acc"], "CR": s["cr"],
                         "(CR - c)/(1 - c)": s["acc_from_cr"], "z": z})
    return pd.DataFrame(rows)


def bound_table(eq8: pd.DataFrame, problems: dict[str, SyntheticPLL], n: int) -> pd.DataFrame:
    """Proposition 1 on ``eq8_table``'s rows: gamma (the empirical ambiguity degree of the generator's sets),
    CR - ACC, the bound (1 - ACC) gamma and ``holds`` (CR - ACC at most the bound plus 3 binomial SEs of ACC over
    ``n`` draws)."""
    bound = eq8.assign(gamma=[ambiguity_degree(problems[g].S, problems[g].y) for g in eq8["generator"]])
    bound["CR - ACC"] = bound["CR"] - bound["ACC"]
    bound["(1 - ACC) gamma"] = (1 - bound["ACC"]) * bound["gamma"]
    bound["holds"] = bound["CR - ACC"] <= bound["(1 - ACC) gamma"] + 3 * np.sqrt(eq8["ACC"] * (1 - eq8["ACC"]) / n)
    return bound


def theorem2_table(problems: dict[str, SyntheticPLL], powers) -> pd.DataFrame:
    """Theorem 2: per generator and ``power`` (the Bayes posterior ** power, renormalised: same predictions, 1 =
    calibrated), ACC, AA, AA - ACC and ``z`` (AA - ACC in standard errors of ACC)."""
    rows = []
    for name, problem in problems.items():
        for power in powers:
            s = scores(problem, classifier(problem, power=power))
            rows.append({"generator": name, "power": power, "ACC": s["acc"], "AA": s["aa"],
                         "AA - ACC": s["aa"] - s["acc"], "z": (s["aa"] - s["acc"]) / s["acc_se"]})
    return pd.DataFrame(rows)


def class_dependent_counterexample(n: int, q: int, *, seed: int = 0) -> pd.DataFrame:
    """Outside Theorem 1: FPS with a class-dependent matrix (each class's successor enters S with probability 0.9,
    other labels 0.05). Classifier A moves 30 % of its predictions to the successor class (seed ``seed + 2``), B 15 %
    at random (seed ``seed + 3``); one row each with ACC and CR."""
    matrix = np.full((q, q), 0.05)
    matrix[np.arange(q), (np.arange(q) + 1) % q] = 0.9
    np.fill_diagonal(matrix, 1.0)
    skewed = synthetic_problem(n, q, generator="fps", p=matrix, seed=seed)
    successor = (classifier(skewed).argmax(1) + 1) % q
    a = scores(skewed, classifier(skewed, redirect=0.3, target=successor, seed=seed + 2))
    b = scores(skewed, classifier(skewed, redirect=0.15, seed=seed + 3))
    return pd.DataFrame([
        {"classifier": "A: 30 % of predictions moved to the successor class", "ACC": a["acc"], "CR": a["cr"]},
        {"classifier": "B: 15 % of predictions moved at random", "ACC": b["acc"], "CR": b["cr"]}])
