"""NoisywikiHow's methods and their published hyperparameters (Tables 9, 11 and 13), in one registry.

Each method of the paper maps to a method of ``shared.methods`` and its hyperparameters for a kind of noise and
a level, as the official code sets them (``tm_train_hy_nruns.configure()`` of github.com/tangminji/NoisywikiHow):

- Tables 9 (real noise) and 11 (synthetic): Mixup α = 1; Data Parameter lr_inst_param 0.2, wd_inst_param 0;
  SR τ = 0.05 (real) / 0.5 (synthetic), λ₀ = 0, 20 epochs — with λ₀ = 0 the sparse regulariser is zero and SR is
  cross-entropy on L2-normalised logits at temperature τ (LogitNorm); Co-teaching T_k = 8 / 3, forget rate τ =
  the noise level ε; CNLCU T_k = 8 / 3, τ_min = 0.3 / 0.1, intervals of 5 epochs; SEAL 4 iterations.
- Table 13 (long-tailed methods, real noise; garbled in the paper's text, read as): LDAM's maximal margin C and
  scale s per level; cRT and LWS retrain 5 epochs with 4 samples per class in a row; BBN and NCM have none.
- Gradient clipping at 3 for base, Mixup, SR and SEAL, none for the others (the official trainer); two-network
  methods report network 1 and keep the last, partial batch of an epoch (the official data loader). NCM, cRT
  and LWS train their stage 1 exactly as the base model (same seed, clipping at 3) and re-balance its classifier
  (their stage 2 is clipped too); BBN and LDAM, whose code was not released, are not clipped.

    name, kwargs, epochs = method_config("coteaching", "real", 0.4, training)
"""
from __future__ import annotations

import pandas as pd

from shared.errors import unknown_choice

# paper name -> label in the paper's tables
LNL_METHODS = {"base": "Base model", "mixup": "Mixup", "data_parameter": "Data Parameter", "sr": "SR",
               "coteaching": "Co-teaching", "cnlcu": "CNLCU", "seal": "SEAL"}
LT_METHODS = {"bbn": "BBN", "ldam": "LDAM", "ncm": "Decoupling-NCM", "crt": "Decoupling-cRT", "lws": "Decoupling-LWS"}
METHODS = {**LNL_METHODS, **LT_METHODS}

TABLE9 = {"mixup": {"alpha": 1.0}, "data_parameter": {"lr_inst_param": 0.2, "wd_inst_param": 0.0},
          "sr": {"tau": 0.05, "lam0": 0.0, "epochs": 20}, "coteaching": {"T_k": 8, "tau": "noise level"},
          "cnlcu": {"T_k": 8, "tau_min": 0.3, "interval": 5}, "seal": {"iterations": 4}}
TABLE11 = {"mixup": {"alpha": 1.0}, "data_parameter": {"lr_inst_param": 0.2, "wd_inst_param": 0.0},
           "sr": {"tau": 0.5, "lam0": 0.0, "epochs": 20}, "coteaching": {"T_k": 3, "tau": "noise level"},
           "cnlcu": {"T_k": 3, "tau_min": 0.1, "interval": 5}, "seal": {"iterations": 4}}
TABLE13_LDAM = {0.0: (0.2, 10.0), 0.1: (0.5, 10.0), 0.2: (0.7, 7.0), 0.4: (0.8, 7.0), 0.6: (0.8, 10.0)}  # level -> (C, s)
TABLE13_DECOUPLING = {"retrain_epochs": 5, "num_samples_cls": 4}
GRAD_CLIP = {"base": 3.0, "mixup": 3.0, "sr": 3.0, "seal": 3.0,
             "ncm": 3.0, "crt": 3.0, "lws": 3.0}  # the decoupled methods' stage 1 is the base model
EVAL_NET = {"coteaching": 0, "cnlcu": 0}  # two-network methods: the official tm_main.py evaluates network 1


def published(kind: str) -> dict:
    """Table 9 (real noise, also used at 0 %) or Table 11 (symmetric noise)."""
    return TABLE11 if kind == "symmetric" else TABLE9


def method_config(method: str, kind: str, level: float, training) -> tuple[str, dict, int | None]:
    """(``shared.methods`` name, its keyword arguments, epochs or None for ``training.epochs``) of a paper method
    for noise of ``kind`` ("clean", "real", "symmetric") at ``level``; ``training``: ``experiments.Training``.
    SEAL's epochs are per round (it trains ``rounds`` times as many)."""
    if method not in METHODS:
        raise unknown_choice("method", method, METHODS)
    table = published(kind)
    if method == "base":
        return "erm", {}, None
    if method == "mixup":
        return "mixup", {"alpha": table["mixup"]["alpha"]}, None
    if method == "data_parameter":
        return "data_parameters", dict(table["data_parameter"]), None
    if method == "sr":
        return "sr", {"tau": table["sr"]["tau"], "lam": table["sr"]["lam0"]}, training.sr_epochs
    if method in ("coteaching", "cnlcu"):
        schedule = {"forget_rate": level, "ramp_epochs": table[method]["T_k"]}
        if method == "coteaching":
            return "coteaching", {**schedule, "ramp": "linear", "rounding": "round", "drop_last": False}, None
        return "cnlcu", {**schedule, "tau_min": table["cnlcu"]["tau_min"], "time_step": table["cnlcu"]["interval"]}, None
    if method == "seal":
        return "seal", {"rounds": training.seal_rounds}, training.seal_epochs  # epochs per round
    if method == "ldam":
        C, s = TABLE13_LDAM[_nearest_level(level)]
        return "ldam", {"max_margin": C, "scale": s, "drw": training.ldam_drw}, None
    if method == "bbn":
        return "bbn", {}, None
    return method, dict(TABLE13_DECOUPLING) if method != "ncm" else {}, None


def _nearest_level(level: float) -> float:
    return min(TABLE13_LDAM, key=lambda t: abs(t - level))


def hyperparameter_table(kind: str, training=None) -> pd.DataFrame:
    """Table 9 (real noise) or 11 (symmetric): method, hyperparameter, the published value and, given
    ``training``, the value these runs use (epochs and SEAL's iterations can be set per profile)."""
    rows = []
    for method, values in published(kind).items():
        for name, value in values.items():
            row = {"method": LNL_METHODS[method], "hyperparameter": name, "published": value}
            if training is not None:
                row["ours"] = _ours(method, name, value, training)
            rows.append(row)
    return pd.DataFrame(rows)


def _ours(method: str, name: str, value, training):
    if (method, name) == ("sr", "epochs"):
        return training.sr_epochs
    if (method, name) == ("seal", "iterations"):
        return f"{training.seal_rounds} (x {training.seal_epochs} epochs)"
    return value


def table13(training=None) -> pd.DataFrame:
    """Table 13: LDAM's (C, s) per level and the decoupling methods' stage-2 settings (the same in every profile;
    LDAM's deferred re-weighting as ``training.ldam_drw`` says)."""
    drw = {} if training is None else {"DRW": training.ldam_drw}
    rows = [{"method": "LDAM", "level": f"{t:.0%}", "C": C, "s": s, **drw} for t, (C, s) in TABLE13_LDAM.items()]
    rows += [{"method": m, "level": "all", **TABLE13_DECOUPLING} for m in ("Decoupling-cRT", "Decoupling-LWS")]
    return pd.DataFrame(rows)


def grad_clip(method: str) -> float | None:
    return GRAD_CLIP.get(method)


def eval_net(method: str) -> int | None:
    return EVAL_NET.get(method)


__all__ = ["LNL_METHODS", "LT_METHODS", "METHODS", "TABLE9", "TABLE11", "TABLE13_LDAM", "TABLE13_DECOUPLING",
           "method_config", "hyperparameter_table", "table13", "grad_clip", "eval_net", "published"]
