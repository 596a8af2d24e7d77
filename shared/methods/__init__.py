"""Noisy-label learning methods behind one registry, DomainBed style.

    from shared.methods import METHODS, TrainSetup, make_method
    method = make_method("coteaching", make_model, num_classes=10, setup=TrainSetup(epochs=20, lr=0.05),
                         forget_rate=0.3, ramp="sqrt")
    result = method.fit(X, y_noisy, eval_sets={"test": (X_test, y_test)})
    result.accuracy("best_test"), result.accuracy("last")

Every method trains on a float tensor ``X`` (n, ...) and noisy labels ``y`` (n,), records each evaluation
set's accuracy per epoch, and can store per-sample training losses at chosen epochs (``TrainSetup.log_losses_at``).

Registered methods: ``erm`` (cross-entropy), ``coteaching`` (Han et al., 2018), ``dividemix`` (Li et al., 2020),
``mixup`` (Zhang et al., 2018), ``data_parameters`` (instance temperatures, Saxena et al., 2019), ``sr`` (sparse
regularization, Zhou et al., 2021), ``cnlcu`` (Xia et al., 2022) and ``seal`` (Chen et al., 2021), the last five
as the official NoisywikiHow code runs them; for long-tailed data ``ldam`` (Cao et al., 2019, optionally with
DRW), ``bbn`` (Zhou et al., 2020) and the decoupled classifiers ``ncm``, ``crt`` and ``lws`` (Kang et al., 2020).
``erm`` also trains a ``GenerativeNetwork``, one that writes its labels (NoisywikiHow's T5).
"""
from __future__ import annotations

from shared.errors import unknown_choice
from shared.methods.base import SELECTION_RULES, FitResult, GenerativeNetwork, Method, TrainSetup
from shared.methods.cnlcu import CNLCU
from shared.methods.coteaching import CoTeaching
from shared.methods.data_parameters import DataParameters
from shared.methods.decoupling import CRT, LWS, NCM
from shared.methods.dividemix import DivideMix
from shared.methods.erm import ERM
from shared.methods.longtail import BBN, LDAM
from shared.methods.mixup import Mixup
from shared.methods.seal import SEAL
from shared.methods.sparse_reg import SparseRegularization

METHODS: dict[str, type[Method]] = {"erm": ERM, "coteaching": CoTeaching, "dividemix": DivideMix, "mixup": Mixup,
                                    "data_parameters": DataParameters, "sr": SparseRegularization, "cnlcu": CNLCU,
                                    "seal": SEAL, "ldam": LDAM, "bbn": BBN, "ncm": NCM, "crt": CRT, "lws": LWS}


def make_method(name: str, make_model, num_classes: int, setup: TrainSetup, **hparams) -> Method:
    """An instance of a registered method with its hyperparameters."""
    if name not in METHODS:
        raise unknown_choice("method", name, METHODS)
    return METHODS[name](make_model, num_classes, setup, **hparams)


__all__ = ["METHODS", "SELECTION_RULES", "FitResult", "GenerativeNetwork", "Method", "TrainSetup", "make_method", "ERM", "CoTeaching",
           "DivideMix", "Mixup", "DataParameters", "SparseRegularization", "CNLCU", "SEAL", "LDAM", "BBN", "NCM", "CRT",
           "LWS"]
