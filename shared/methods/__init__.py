"""Noisy-label learning methods behind one registry, DomainBed style.

    from shared.methods import METHODS, TrainSetup, make_method
    method = make_method("coteaching", make_model, num_classes=10, setup=TrainSetup(epochs=20, lr=0.05),
                         forget_rate=0.3, ramp="sqrt")
    result = method.fit(X, y_noisy, eval_sets={"test": (X_test, y_test)})
    result.accuracy("best_test"), result.accuracy("last")

Every method trains on a float tensor ``X`` (n, ...) and noisy labels ``y`` (n,), records each evaluation
set's accuracy per epoch, and can store per-sample training losses at chosen epochs (``TrainSetup.log_losses_at``).
"""
from __future__ import annotations

from shared.errors import unknown_choice
from shared.methods.base import SELECTION_RULES, FitResult, Method, TrainSetup
from shared.methods.coteaching import CoTeaching
from shared.methods.dividemix import DivideMix
from shared.methods.erm import ERM

METHODS: dict[str, type[Method]] = {"erm": ERM, "coteaching": CoTeaching, "dividemix": DivideMix}


def make_method(name: str, make_model, num_classes: int, setup: TrainSetup, **hparams) -> Method:
    """An instance of a registered method with its hyperparameters."""
    if name not in METHODS:
        raise unknown_choice("method", name, METHODS)
    return METHODS[name](make_model, num_classes, setup, **hparams)


__all__ = ["METHODS", "SELECTION_RULES", "FitResult", "Method", "TrainSetup", "make_method", "ERM", "CoTeaching",
           "DivideMix"]
