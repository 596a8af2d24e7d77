import numpy as np
import pytest
import torch
import torch.nn.functional as F

from shared.errors import ConfigError
from shared.models import build_model
from shared.methods import TrainSetup, make_method
from shared.training import amp_scaler, as_tensor, predict_proba, random_crop_flip


def test_as_tensor_layouts():
    rgb = np.full((2, 4, 4, 3), 255, np.uint8)
    t = as_tensor(rgb, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
    assert t.shape == (2, 3, 4, 4) and torch.allclose(t, torch.ones_like(t))
    assert as_tensor(np.zeros((2, 5, 5), np.uint8)).shape == (2, 1, 5, 5)
    assert as_tensor(np.zeros((3, 7))).shape == (3, 7)
    with pytest.raises(ConfigError, match="images must be"):
        as_tensor(np.zeros((2, 2, 2, 2, 2)))


def test_random_crop_flip_is_a_seeded_shift_or_mirror():
    x = torch.arange(2 * 1 * 6 * 6, dtype=torch.float32).view(2, 1, 6, 6)
    a = random_crop_flip(x, torch.Generator().manual_seed(0), pad=2)
    b = random_crop_flip(x, torch.Generator().manual_seed(0), pad=2)
    assert a.shape == x.shape and torch.equal(a, b)
    # every output value is 0 (padding) or a value of the same image
    for i in range(2):
        assert set(a[i].unique().tolist()) <= set(x[i].unique().tolist()) | {0.0}


@pytest.mark.parametrize("name,shape,params", [
    ("resnet20", (3, 32, 32), 269_722), ("resnet32", (3, 32, 32), 464_154), ("lenet5", (1, 28, 28), 61_706),
    ("tiny_cnn", (3, 32, 32), None), ("mlp", (20,), None), ("wrn28_10", (3, 32, 32), 36_479_194),
])
def test_models_build_with_known_sizes(name, shape, params):
    model = build_model(name, shape, 10)
    assert model(torch.zeros(4, *shape)).shape == (4, 10)
    if params is not None:  # ResNet-20: 0.27M (He et al., 2016, Table 6); WRN-28-10: 36.5M (Zagoruyko & Komodakis)
        assert sum(p.numel() for p in model.parameters()) == params


def test_unknown_model():
    with pytest.raises(ConfigError, match="unknown model 'vgg'"):
        build_model("vgg", (3, 32, 32), 10)


def test_erm_learns_a_separable_problem_and_per_sample_losses_are_cross_entropy():
    rng = np.random.default_rng(0)
    X = torch.as_tensor(rng.normal(size=(400, 2)).astype(np.float32))
    y = (X[:, 0] + X[:, 1] > 0).long().numpy()
    method = make_method("erm", lambda: build_model("mlp", (2,), 2, hidden=(16,)), 2,
                         TrainSetup(epochs=15, lr=0.1, batch_size=32, device="cpu"))
    result = method.fit(X, y, eval_sets={"train": (X, y)})
    assert result.history["train_loss"].iloc[-1] < 0.5 * result.history["train_loss"].iloc[0]
    assert result.accuracy("last", "train") > 0.95
    probs = predict_proba(method.nets[0], X)
    assert probs.shape == (400, 2) and np.allclose(probs.sum(1), 1, atol=1e-5)
    expected = F.cross_entropy(method.nets[0].eval()(X), torch.as_tensor(y), reduction="none").detach().numpy()
    assert np.allclose(method.per_sample_loss(0), expected, atol=1e-5)
    assert not amp_scaler("cpu").is_enabled()
