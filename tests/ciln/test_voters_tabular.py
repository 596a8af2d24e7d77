"""The paper's Adult voters (ciln/voters_tabular.py) on a small adult_like table, with shrunken recipes."""
import numpy as np
import pandas as pd
import pytest
import torch

from ciln.corruptions.tabular import corrupt_table
from ciln.rehearsal import write_tabpfn_checkpoint
from ciln.voters_tabular import (
    NAN_CATEGORY, TABPFN_FILE, TABULAR_FULL_VOTERS, RtdlMLP, _catboost_frame, _dummy_na_frame, fit_tabular_voter,
)
from shared.cache import ArtifactCache
from shared.datasets.offline import adult_like_frame
from shared.datasets.writers import write_lfs_pointer
from shared.errors import ConfigError, DataFormatError, DataNotFoundError

# few trees / epochs, small networks (the default architectures cost seconds per epoch on 2 CPU cores)
FAST = {
    "xgboost": {"n_estimators": 100},
    "catboost": {"iterations": 200},
    "rtdl_mlp": {"d_embedding": 16, "layers": [64, 64], "lr": 3e-3, "max_epochs": 5},
    "ft_transformer": {"n_blocks": 1, "lr": 1e-3, "max_epochs": 4},
}


class CountingCache(ArtifactCache):
    """An ArtifactCache that counts how often it had to build."""

    builds = 0

    def get_or_build(self, kind, params, build, **kwargs):
        def counted(*args):
            self.builds += 1
            return build(*args)

        return super().get_or_build(kind, params, counted, **kwargs)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One OpenMP thread (torch, XGBoost, sklearn): fits this small are as fast, and much faster on a busy machine."""
    from threadpoolctl import threadpool_limits

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def data():
    X, y, _ = adult_like_frame(3000, seed=1)
    parts = [(X.iloc[a:b].reset_index(drop=True), y[a:b]) for a, b in [(0, 1500), (1500, 2000), (2000, 3000)]]
    return dict(zip(["train", "val", "test"], parts))


def fit(name, data, cache, recipe=None, seed=0):
    (X, y), (Xv, yv) = data["train"], data["val"]
    return fit_tabular_voter(name, recipe if recipe is not None else FAST[name], X, y, Xv, yv, num_classes=2,
                             seed=seed, device="cpu", cache=cache)


@pytest.fixture(scope="module")
def fitted(data, tmp_path_factory):
    cache = CountingCache(tmp_path_factory.mktemp("cache"))
    return {name: fit(name, data, cache) for name in FAST}, cache


def corrupted(X: pd.DataFrame) -> pd.DataFrame:
    """Severity 5 of MCAR (whole rows NaN), MNAR (single numeric and categorical cells NaN), then x1000 scaling."""
    for salt, corruption in enumerate(["missing_mcar", "missing_mnar", "scaling"]):
        X = corrupt_table(X, corruption, 5, [np.random.default_rng([salt, i]) for i in range(len(X))], X)
    return X


def assert_distributions(probs, n):
    assert probs.shape == (n, 2) and np.isfinite(probs).all() and (probs >= 0).all()
    assert np.allclose(probs.sum(1), 1.0)


@pytest.mark.parametrize("name", list(FAST))
def test_accuracy_and_corrupted_inputs(name, fitted, data):
    X, y = data["test"]
    probs = fitted[0][name].predict_proba(X)
    assert_distributions(probs, len(X))
    majority = max(y.mean(), 1 - y.mean())  # 0.735; the Bayes rate of adult_like is 0.85
    assert (probs.argmax(1) == y).mean() > majority + 0.04
    bad = corrupted(X)
    assert bad.isna().any().all() and bad["age"].max() > 1000  # NaN in every column, scaled numerics
    assert_distributions(fitted[0][name].predict_proba(bad), len(X))


@pytest.mark.parametrize("name", list(FAST))
def test_cache_hit_and_same_seed_reproduces(name, fitted, data, tmp_path):
    models, cache = fitted
    X = data["test"][0]
    before = cache.builds
    assert np.array_equal(fit(name, data, cache).predict_proba(X), models[name].predict_proba(X))
    assert cache.builds == before  # loaded, not rebuilt
    fresh = CountingCache(tmp_path)
    assert np.array_equal(fit(name, data, fresh).predict_proba(X), models[name].predict_proba(X))
    assert fresh.builds == 1


@pytest.mark.parametrize("name", ["rtdl_mlp", "ft_transformer"])
def test_network_nan_handling(name, fitted, data):
    model = fitted[0][name]
    X = data["test"][0].iloc[:20].reset_index(drop=True)
    medians = data["train"][0][["age", "capital-gain"]].median()
    holes = X.assign(age=np.nan, **{"capital-gain": np.nan})
    filled = X.assign(age=medians["age"], **{"capital-gain": medians["capital-gain"]})
    assert np.array_equal(model.predict_proba(holes), model.predict_proba(filled))
    # categorical NaN and an unseen level both map to index 0, whose embedding is zero after training
    nan_cat, unseen = X.assign(occupation=np.nan), X.assign(occupation="Astronaut")
    assert (model.encoder.codes(nan_cat)[:, 3] == 0).all()
    assert np.array_equal(model.predict_proba(nan_cat), model.predict_proba(unseen))
    assert not np.allclose(model.predict_proba(nan_cat), model.predict_proba(X))
    for table in model.net.cat_embeddings.embeddings:
        assert torch.count_nonzero(table.weight[0]) == 0 and torch.count_nonzero(table.weight[1:]) > 0


def test_booster_nan_encodings(fitted, data):
    X = data["test"][0].iloc[:20].reset_index(drop=True)
    holes = X.assign(workclass=np.nan, age=np.nan)
    dummies = _dummy_na_frame(holes, fitted[0]["xgboost"].columns)
    assert (dummies["workclass_nan"] == 1).all() and (dummies.filter(like="workclass_").sum(axis=1) == 1).all()
    assert dummies["age"].isna().all()  # numeric NaN goes to XGBoost's native missing-value branch
    catboost = fitted[0]["catboost"]
    assert (_catboost_frame(holes)["workclass"] == NAN_CATEGORY).all()
    assert np.array_equal(catboost.predict_proba(holes), catboost.predict_proba(holes.assign(workclass=NAN_CATEGORY)))


def test_recipes_and_default_mlp_architecture(data, tmp_path):
    with pytest.raises(ConfigError, match="max_epoch"):
        fit("rtdl_mlp", data, ArtifactCache(tmp_path), {"max_epoch": 3})
    with pytest.raises(ConfigError, match="tabular voter"):
        fit_tabular_voter("hgb", {}, *data["train"], *data["val"], num_classes=2, seed=0, device="cpu", cache=None)
    recipe = TABULAR_FULL_VOTERS["rtdl_mlp"][1]
    net = RtdlMLP(5, [7, 16, 7, 14, 6, 5, 2, 41], recipe["d_embedding"], recipe["layers"], recipe["dropout"], 2)
    shapes = [tuple(m.weight.shape) for m in net.modules() if isinstance(m, torch.nn.Linear)]
    assert shapes == [(42, 5 + 8 * 421), (503, 42), (503, 503), (503, 503), (111, 503), (2, 111)]


# ---------------------------------------------------------------------------------------------- TabPFN
def test_tabpfn_missing_or_unreadable_checkpoint(data, tmp_path, monkeypatch):
    monkeypatch.setenv("NOISY_DATA_DIR", str(tmp_path))
    with pytest.raises(DataNotFoundError) as err:
        fit("tabpfn", data, None, {})
    assert str(tmp_path / "tabpfn" / TABPFN_FILE) in str(err.value) and "github.com/PriorLabs" in str(err.value)
    with pytest.raises(DataNotFoundError, match="nope.cpkt"):
        fit("tabpfn", data, None, {"checkpoint": str(tmp_path / "nope.cpkt")})
    write_lfs_pointer(tmp_path / "pointer.cpkt", b"x" * 1000)
    with pytest.raises(DataFormatError, match=r"pointer\.cpkt is a git-LFS pointer"):
        fit("tabpfn", data, None, {"checkpoint": str(tmp_path / "pointer.cpkt")})
    (tmp_path / "junk.cpkt").write_bytes(b"not a checkpoint")
    with pytest.raises(DataFormatError, match="junk.cpkt"):
        fit("tabpfn", data, None, {"checkpoint": str(tmp_path / "junk.cpkt")})
    # a config holding a Python class is refused by the weights_only load unless the file is trusted
    code = write_tabpfn_checkpoint(tmp_path / "code.cpkt", activation=torch.nn.GELU)
    with pytest.raises(DataFormatError, match="trust_checkpoint"):
        fit("tabpfn", data, None, {"checkpoint": code})
    assert fit("tabpfn", data, None, {"checkpoint": code, "trust_checkpoint": True, "members": 1}).config["activation"]


def test_tabpfn_with_a_random_weight_checkpoint(data, tmp_path):
    """Plumbing only (a tiny untrained TabPFN): subsamples, features, NaN -> median, corrupted rows, determinism."""
    recipe = {"checkpoint": write_tabpfn_checkpoint(tmp_path / "tiny.cpkt"), "members": 2, "subsample": 300}
    model = fit("tabpfn", data, None, recipe, seed=42)
    y = data["train"][1]
    for train, labels in model.members:
        assert train.shape[0] == 300 and abs(labels.mean() - y.mean()) < 0.01  # stratified
    # test rows attend to the training rows only, so one call can score clean, corrupted and NaN rows together
    X = data["test"][0].iloc[:100].reset_index(drop=True)
    median = data["train"][0]["hours-per-week"].median()
    rows = pd.concat([X, corrupted(X), X.assign(**{"hours-per-week": np.nan}), X.assign(**{"hours-per-week": median})])
    probs = model.predict_proba(rows)
    assert_distributions(probs, len(rows))
    assert np.allclose(probs[200:300], probs[300:], atol=1e-6)  # numeric NaN -> clean-train median
    # same seed, test rows split into chunks: the same probabilities
    again = fit("tabpfn", data, None, {**recipe, "predict_batch": 200}, seed=42).predict_proba(rows)
    assert np.allclose(again, probs, atol=1e-6)
