import numpy as np
import pytest
from sklearn.datasets import make_classification

from shared.errors import ConfigError
from shared.noise import (
    oracle_rate_for_error, pool_error, rater_pool_for_error, train_rater_pool,
)


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(3000, 20, n_informative=10, n_classes=5, n_clusters_per_class=1, class_sep=1.2,
                               random_state=0)
    return X[:2000], y[:2000], X[2000:], y[2000:]


def test_smaller_subsets_make_worse_raters(data):
    X, y, Xv, yv = data
    weak = train_rater_pool(X, y, 3, subset_size=40, family="logreg", seed=0)
    strong = train_rater_pool(X, y, 3, subset_size=1500, family="logreg", seed=0)
    assert pool_error(weak, Xv, yv) > pool_error(strong, Xv, yv) + 0.05
    votes = strong.votes(Xv)
    assert votes.shape == (1000, 3) and votes.dtype == np.int64
    assert np.array_equal(votes, train_rater_pool(X, y, 3, subset_size=1500, family="logreg", seed=0).votes(Xv))


def test_calibrated_pool_hits_a_reachable_target(data):
    X, y, Xv, yv = data
    pool = rater_pool_for_error(X, y, Xv, yv, target_error=0.3, n_raters=6, family="logreg", seed=1)
    assert pool.info["validation_error"] == pytest.approx(0.3, abs=0.06)
    assert len(pool.models) == 6 and pool.subset_size < 2000


def test_oracle_rate_scales_the_error_down(data):
    X, y, Xv, yv = data
    base = train_rater_pool(X, y, 4, subset_size=60, family="logreg", seed=2)
    err = pool_error(base, Xv, yv)
    rate = oracle_rate_for_error(err, err / 2)
    knowing = train_rater_pool(X, y, 4, subset_size=60, family="logreg", seed=2, oracle_rate=rate)
    assert pool_error(knowing, Xv, yv) == pytest.approx(err / 2, abs=0.02)
    # the remaining errors are the model's own: wherever a knowing rater errs, the base rater said the same
    v0, v1 = base.votes(Xv), knowing.votes(Xv, yv)
    assert np.all(v1[v1 != yv[:, None]] == v0[v1 != yv[:, None]])
    with pytest.raises(ConfigError, match="pass y_true"):
        knowing.votes(Xv)
    assert oracle_rate_for_error(0.05, 0.1) == 0.0


def test_bad_arguments(data):
    X, y, _, _ = data
    with pytest.raises(ConfigError, match="subset_size must be between"):
        train_rater_pool(X, y, 2, subset_size=3)
    with pytest.raises(ConfigError, match="unknown rater family 'svm'"):
        train_rater_pool(X, y, 1, subset_size=100, family="svm")
