"""Noisy-label methods: schedules, selection, and the behaviour the literature reports on a toy task."""
import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.datasets import make_classification

from shared.errors import ConfigError
from shared.methods import FitResult, TrainSetup, make_method
from shared.methods.coteaching import CoTeaching
from shared.methods.dividemix import clean_probability
from shared.models import build_model
from shared.noise import make_noisy_labels


@pytest.fixture(scope="module")
def task():
    X, y = make_classification(4000, 30, n_informative=15, n_classes=5, n_clusters_per_class=2, class_sep=1.0,
                               random_state=0)
    X = torch.as_tensor(X, dtype=torch.float32)
    noisy = make_noisy_labels("symmetric", y[:3000], 5, 0.4, seed=0)
    return X[:3000], y[:3000], noisy, X[3000:], y[3000:]


def mlp():
    return build_model("mlp", (30,), 5, hidden=(256, 256))


def fit(name, task, epochs=50, **hp):
    X, y, noisy, Xt, yt = task
    method = make_method(name, mlp, 5, TrainSetup(epochs=epochs, batch_size=64, lr=0.02, device="cpu"), **hp)
    return method, method.fit(X, noisy, eval_sets={"test": (Xt, yt), "val": (Xt[:300], yt[:300])})


@pytest.fixture(scope="module")
def erm(task):
    return fit("erm", task)[1]


def test_erm_memorises_noise_and_the_selection_rules_see_it(erm):
    assert erm.history["train_loss"].iloc[-1] < erm.history["train_loss"].iloc[0]
    assert erm.accuracy("best_test") > erm.accuracy("last") + 0.05  # best-epoch selection hides memorisation
    assert erm.accuracy("last") <= erm.accuracy("val") <= erm.accuracy("best_test")


def test_coteaching_keeps_clean_samples_and_resists_memorisation(task, erm):
    _, y, noisy, _, _ = task
    _, result = fit("coteaching", task, forget_rate=0.4, ramp_epochs=10, clean_labels=y)
    assert result.history["selected_precision"].iloc[-1] > 0.8  # vs 0.6 clean among all labels
    assert result.accuracy("last") > erm.accuracy("last") + 0.05


def test_coteaching_schedules():
    linear = CoTeaching(mlp, 5, TrainSetup(), forget_rate=0.4, ramp_epochs=10)
    assert [linear.forget_at(t) for t in (0, 9, 10, 50)] == pytest.approx([0.0, 0.4, 0.4, 0.4])
    assert linear.forget_at(3) == pytest.approx(0.4 * 3 / 9)
    assert linear.n_keep(128, 20) == int(0.6 * 128)
    sqrt = CoTeaching(mlp, 5, TrainSetup(), forget_rate=0.4, ramp_epochs=16, ramp="sqrt", rounding="round")
    assert sqrt.forget_at(4) == pytest.approx(0.4 * 0.5) and sqrt.n_keep(128, 16) == round(0.6 * 128)
    with pytest.raises(ConfigError, match="forget_rate must be in"):
        CoTeaching(mlp, 5, TrainSetup(), forget_rate=1.2)
    with pytest.raises(ConfigError, match="unknown Co-Teaching ramp 'cubic'"):
        CoTeaching(mlp, 5, TrainSetup(), forget_rate=0.2, ramp="cubic")


def test_gmm_clean_probability_finds_the_low_loss_mode(rng):
    losses = np.concatenate([rng.normal(0.2, 0.05, 700), rng.normal(2.0, 0.3, 300)])
    w = clean_probability(losses, max_iter=10, seed=0)
    assert w[:700].mean() > 0.95 and w[700:].mean() < 0.05


def test_dividemix_divides_and_beats_erm_at_the_end(task, erm):
    _, y, noisy, _, _ = task
    method, result = fit("dividemix", task, warmup=10, clean_labels=y)
    assert result.history["separation"].iloc[-1] > 0.3  # clean rows get higher clean probability
    assert result.extras["clean_probability"].shape == (2, 3000)
    assert result.accuracy("last") > erm.accuracy("last") + 0.05
    with pytest.raises(ConfigError, match="unknown DivideMix variant"):
        make_method("dividemix", mlp, 5, TrainSetup(), variant="fast")


def test_compact_dividemix_falls_back_to_cross_entropy_on_small_splits(task):
    X, y, noisy, Xt, yt = task
    method = make_method("dividemix", mlp, 5, TrainSetup(epochs=3, batch_size=2048, lr=0.02, device="cpu",
                                                         log_losses_at=(0, 2)), warmup=1, variant="ciln_compact")
    result = method.fit(X, noisy)  # with 3000 rows, one side of the split is always under a 2048-row batch
    assert len(result.history) == 3 and np.isfinite(result.history["train_loss"]).all()
    assert set(result.losses) == {0, 2} and result.losses[2].shape == (3000,)


def test_selection_rule_errors():
    result = FitResult(pd.DataFrame({"test_acc": [0.5, 0.7, 0.6]}))
    assert result.accuracy("last") == 0.6 and result.accuracy("best_test") == 0.7
    with pytest.raises(ConfigError, match="needs an evaluation set named 'val'"):
        result.accuracy("val")
    with pytest.raises(ConfigError, match="unknown selection rule"):
        result.accuracy("oracle")
    with pytest.raises(ConfigError, match="unknown method 'mixmatch'"):
        make_method("mixmatch", mlp, 5, TrainSetup())
