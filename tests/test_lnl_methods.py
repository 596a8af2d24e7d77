"""The learning-with-noisy-labels methods of NoisywikiHow (Mixup, Data Parameters, SR, CNLCU, SEAL), Co-teaching's
official NoisywikiHow schedule, and the evaluation options of ``shared.methods.base`` (top-k, eval_net,
grad_clip, the 'stable' rule)."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from shared.errors import ConfigError
from shared.methods import SEAL, CoTeaching, FitResult, Method, TrainSetup, make_method
from shared.methods.cnlcu import CNLCU, cnlcu_criterion, knn_outliers, small_criterion
from shared.methods.data_parameters import sparse_momentum_step
from shared.methods.sparse_reg import SparseRegularization, sr_loss
from shared.models import build_model
from shared.noise import make_noisy_labels

pytestmark = pytest.mark.usefixtures("one_torch_thread")

D, K = 10, 3


def mlp():
    return build_model("mlp", (D,), K, hidden=(32,))


def setup(**kw):
    return TrainSetup(**{"epochs": 4, "batch_size": 32, "lr": 1e-2, "optimizer": "adamw", "weight_decay": 0.01,
                         "cosine": False, "device": "cpu", **kw})


@pytest.fixture(scope="module")
def blobs():
    """Three Gaussian blobs in 10-D (train 600 with 20 % symmetric noise, clean test 300)."""
    rng = np.random.default_rng(0)
    centres = rng.normal(0, 3, (K, D))
    y = rng.integers(0, K, 900)
    X = torch.as_tensor(centres[y] + rng.normal(0, 1, (900, D)), dtype=torch.float32)
    noisy = make_noisy_labels("symmetric", y[:600], K, 0.2, seed=0)
    return X[:600], noisy, X[600:], y[600:]


# -- every method learns -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name,hp", [
    ("mixup", {}), ("data_parameters", {}), ("sr", {"tau": 0.5}), ("cnlcu", {"forget_rate": 0.2, "ramp_epochs": 2}),
    ("seal", {"rounds": 2}), ("coteaching", {"forget_rate": 0.2, "ramp_epochs": 2, "rounding": "round",
                                             "drop_last": False}),
])
def test_every_method_learns_separable_blobs_under_label_noise(blobs, name, hp):
    X, noisy, Xt, yt = blobs
    result = make_method(name, mlp, K, setup(epochs=3, eval_net=0), **hp).fit(X, noisy, eval_sets={"test": (Xt, yt)})
    assert result.accuracy("last") > 0.9
    assert np.isfinite(result.history["train_loss"]).all()


# -- Co-teaching: the official NoisywikiHow schedule ---------------------------------------------------------
def test_coteaching_gives_the_official_noisywikihow_forget_schedule_and_rounding():
    tau, t_k, epochs = 0.4, 8, 10
    official = np.ones(epochs) * tau  # tm_main.py: rate_schedule, indexed by the 1-based epoch - 1
    official[:t_k] = np.linspace(0, tau, t_k)
    ct = CoTeaching(mlp, K, setup(epochs=epochs), forget_rate=tau, ramp_epochs=t_k, ramp="linear", rounding="round")
    cnlcu = CNLCU(mlp, K, setup(epochs=epochs), forget_rate=tau, ramp_epochs=t_k)
    assert [ct.forget_at(t) for t in range(epochs)] == pytest.approx(official, abs=1e-12)
    assert [cnlcu.forget_at(t) for t in range(epochs)] == list(official)
    for t in range(epochs):
        for batch in (32, 64, 17, 5):  # train_ct: n_keep = round(p_keep * B)
            assert ct.n_keep(batch, t) == round((1 - official[t]) * batch)


def test_coteaching_drop_last_false_trains_on_every_row(blobs):
    X, noisy, _, _ = blobs
    seen = {}

    class Counting(CoTeaching):
        def inputs(self, idx, augment=True):
            seen[self.drop_last] = seen.get(self.drop_last, 0) + len(idx)
            return super().inputs(idx, augment)

    for drop_last in (True, False):
        Counting(mlp, K, setup(epochs=1, batch_size=64), forget_rate=0.2, drop_last=drop_last).fit(X, noisy)
    assert seen == {True: 600 - 600 % 64, False: 600}


# -- SR ------------------------------------------------------------------------------------------------------
def test_sr_without_regulariser_is_cross_entropy_on_normalised_logits(blobs):
    X, noisy, _, _ = blobs
    tau = 0.5
    method = SparseRegularization(mlp, K, setup(epochs=1, lr=0.0), tau=tau)  # lr 0: the network stays at its init
    result = method.fit(X, noisy)
    z = method.nets[0](X).detach().double().numpy()
    o = z / np.linalg.norm(z, axis=1, keepdims=True) / tau
    log_p = o - np.log(np.exp(o).sum(1, keepdims=True))
    expected = -log_p[np.arange(600), noisy].mean()
    assert result.history["train_loss"].iloc[0] == pytest.approx(expected, rel=1e-5)


def test_sr_regulariser_adds_lambda_times_the_p_norm_of_the_softmax(rng):
    logits, y = torch.as_tensor(rng.normal(0, 3, (16, 5))), torch.as_tensor(rng.integers(0, 5, 16))
    tau, lam, p = 0.05, 2.5, 0.1
    o = (logits / logits.norm(dim=1, keepdim=True) / tau).numpy()
    softmax = np.exp(o - o.max(1, keepdims=True))
    softmax /= softmax.sum(1, keepdims=True)
    penalty = (np.clip(softmax, 1e-7, 1) ** p).sum(1).mean()
    base = float(sr_loss(logits, y, tau=tau, lam=0.0, p=p))
    assert float(sr_loss(logits, y, tau=tau, lam=lam, p=p)) == pytest.approx(base + lam * penalty, rel=1e-9)


def test_sr_lambda_schedule_and_errors():
    sr = SparseRegularization(mlp, K, setup(), tau=0.5, lam=2.0, rho=1.02, freq=3)
    assert [sr.lam_at(t) for t in (0, 2, 3, 5, 6, 9)] == pytest.approx([2.0, 2.0, 2.04, 2.04, 2.0808, 2.0 * 1.02**3])
    assert SparseRegularization(mlp, K, setup(), tau=0.5, lam=2.0, freq=0).lam_at(50) == 2.0
    with pytest.raises(ConfigError, match="tau must be positive"):
        make_method("sr", mlp, K, setup(), tau=0.0)


# -- Mixup ---------------------------------------------------------------------------------------------------
class RecordingNet(nn.Module):
    """A linear classifier that mixes its own inputs and records lambda and both inputs."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(D, K)
        self.calls = []

    def forward(self, x):
        return self.linear(x)

    def mixup_forward(self, x_a, x_b, lam):
        self.calls.append((lam, x_a.detach().clone(), x_b.detach().clone()))
        return self.linear(lam * x_a + (1 - lam) * x_b)


def test_mixup_uses_mixup_forward_with_seeded_lambdas_and_a_batch_permutation(blobs):
    X, noisy, _, _ = blobs
    method = make_method("mixup", RecordingNet, K, setup(epochs=2, seed=7), alpha=1.0)
    method.fit(X, noisy)
    calls = method.nets[0].calls
    assert len(calls) == 2 * math.ceil(600 / 32)
    assert [lam for lam, _, _ in calls] == list(np.random.default_rng(7).beta(1.0, 1.0, len(calls)))
    for _, x_a, x_b in calls:  # x_b is x_a's rows in another order
        assert not torch.equal(x_a, x_b) and torch.equal(x_a.sort(0).values, x_b.sort(0).values)


def test_mixup_with_tiny_alpha_is_cross_entropy(blobs):
    X, noisy, _, _ = blobs
    method = make_method("mixup", mlp, K, setup(), alpha=1e-3)  # lambda ~ Beta(0.001, 0.001) is ~0 or ~1
    method._prepare(X, noisy)
    x, y = X[:32], method.y[:32]
    for _ in range(5):
        assert method.batch_loss(x, y).item() == pytest.approx(F.cross_entropy(method.nets[0](x), y).item(), rel=1e-3)
    with pytest.raises(ConfigError, match="alpha must be positive"):
        make_method("mixup", mlp, K, setup(), alpha=0.0)


# -- Data Parameters -----------------------------------------------------------------------------------------
def apple_sparse_sgd(steps, n, lr, momentum):
    """apple/ml-data-parameters' SparseSGD.step (skip_update_zero_grad=True) on a dense parameter: torch's SGD
    step, then the parameter and momentum entries with a zero gradient are restored."""
    param = torch.zeros(n, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.SGD([param], lr=lr, momentum=momentum)
    for rows, grad in steps:
        dense = torch.zeros(n, dtype=torch.float64)
        dense[rows] = grad
        state = optimizer.state[param]
        before, buf_before = param.detach().clone(), state["momentum_buffer"].clone() if state else None
        param.grad = dense
        optimizer.step()
        with torch.no_grad():
            param[dense == 0] = before[dense == 0]
            if buf_before is not None:
                state["momentum_buffer"][dense == 0] = buf_before[dense == 0]
    return param.detach(), optimizer.state[param]["momentum_buffer"]


def test_sparse_momentum_step_is_apples_sparse_sgd(rng):
    n, lr, momentum = 12, 0.2, 0.9
    steps = []
    for _ in range(8):
        rows = torch.as_tensor(rng.choice(n, 4, replace=False))
        grad = torch.as_tensor(rng.normal(size=4))
        grad[0] = 0.0  # a row of the batch with a zero gradient is skipped too
        steps.append((rows, grad))
    param, buf = torch.zeros(n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64)
    for rows, grad in steps:
        sparse_momentum_step(param, buf, rows, grad, lr=lr, momentum=momentum)
    ref_param, ref_buf = apple_sparse_sgd(steps, n, lr, momentum)
    assert torch.allclose(param, ref_param) and torch.allclose(buf, ref_buf)
    # by hand: a row's momentum only acts when the row is in a batch
    param, buf = torch.zeros(4), torch.zeros(4)
    sparse_momentum_step(param, buf, torch.tensor([0, 1, 2]), torch.tensor([1.0, 0.0, -2.0]), lr=0.1, momentum=0.9)
    sparse_momentum_step(param, buf, torch.tensor([2, 3]), torch.tensor([1.0, 1.0]), lr=0.1, momentum=0.9)
    assert torch.allclose(param, torch.tensor([-0.1, 0.0, 0.2 + 0.08, -0.1]))
    assert torch.allclose(buf, torch.tensor([1.0, 0.0, -0.8, 1.0]))


def test_data_parameters_start_as_cross_entropy_and_stay_within_the_clamp(blobs):
    X, noisy, _, _ = blobs
    method = make_method("data_parameters", mlp, K, setup(epochs=1, lr=0.0))
    result = method.fit(X, noisy)  # lr 0: the network stays at its init; each row is seen once, with sigma = 1
    expected = F.cross_entropy(method.nets[0](X), torch.as_tensor(noisy)).item()
    assert result.history["train_loss"].iloc[0] == pytest.approx(expected, rel=1e-5)
    assert result.extras["sigma"].shape == (600,) and not np.allclose(result.extras["sigma"], 1.0)
    big = make_method("data_parameters", mlp, K, setup(epochs=2), lr_inst_param=500.0).fit(X, noisy)
    sigma = big.extras["sigma"]
    assert sigma.min() >= 1 / 20 * (1 - 1e-6) and sigma.max() <= 20 * (1 + 1e-6)
    assert np.isclose(sigma, 20).any() or np.isclose(sigma, 1 / 20).any()
    assert big.history["sigma_mean"].iloc[-1] == pytest.approx(sigma.mean(), rel=1e-6)


# -- CNLCU ---------------------------------------------------------------------------------------------------
# pyod 3.6.7 (scikit-learn 1.9.1): KNN(n_neighbors=2).fit_predict(np.array(row).reshape(-1, 1)), run once outside
# this repository's environment (pyod is not a dependency); the score is the distance to the 2nd nearest other value.
# Exact float ties of scores (exact-decimal values such as 0.9, 1.6, 2.3) can break the other way, since scikit-learn
# rounds distances differently in the last bit; the integer-valued ties below are exact in both.
PYOD_LABELS = [
    ([0.0, 2.31, 2.07, 1.94, 2.12], [1, 0, 0, 0, 0]),
    ([0.0, 0.52, 0.41, 0.47, 3.86], [0, 0, 0, 0, 1]),
    ([0.0, 1.73, 1.21, 0.88, 0.69, 0.57], [0, 1, 0, 0, 0, 0]),
    ([0.0, 4.12, 3.95, 4.31, 4.02, 9.77], [0, 0, 0, 0, 0, 1]),
    ([1.5, 1.61, 1.38, 1.72, 1.45], [0, 0, 0, 1, 0]),
    ([0.0, 0.13, 0.27, 0.41, 0.55, 0.69], [0, 0, 0, 0, 0, 1]),
    ([3.3, 0.2, 0.25, 0.31, 0.18, 0.22, 0.27], [1, 0, 0, 0, 0, 0, 0]),
    ([0.0, 1.0, 2.0, 3.0, 4.0], [0, 0, 0, 0, 0]),  # the two top scores tie at the threshold: not "> threshold"
    ([0.0, 0.0, 2.0, 2.0, 2.0], [0, 0, 0, 0, 0]),  # duplicates are each other's neighbours
]


def test_knn_outliers_match_pyod_outputs():
    for row, labels in PYOD_LABELS:
        assert knn_outliers(np.array([row])).astype(int).tolist() == [labels]
    fives = [(r, lab) for r, lab in PYOD_LABELS if len(r) == 5]  # many rows at once, as a batch
    assert knn_outliers(np.array([r for r, _ in fives])).astype(int).tolist() == [lab for _, lab in fives]
    with pytest.raises(ConfigError, match="needs more than 2 values"):
        knn_outliers(np.zeros((1, 2)))


def test_knn_outliers_equal_pyod_on_random_losses(rng):
    knn = pytest.importorskip("pyod.models.knn")
    for _ in range(200):
        row = np.concatenate([[0.0], rng.gamma(2.0, 1.0, int(rng.integers(4, 10)))]).astype(np.float32)
        expected = knn.KNN(n_neighbors=2).fit_predict(row.reshape(-1, 1)).astype(bool)
        assert np.array_equal(knn_outliers(row[None, :])[0], expected)


def test_cnlcu_criterion_by_hand():
    # 5 entries: KNN flags the zero column (already 0, so mu keeps it); t_o = 1, s = 4, sn = 3, tau = 0.01, M = 2
    mu = (0 + 2.31 + 2.07 + 1.94 + 2.12) / 5
    bound = 2 * math.sqrt(2 * 0.01) * 2 * (4 + 1.414) * math.sqrt(math.log(16) / 3) / ((4 - 1) * math.sqrt(4))
    assert mu - bound == pytest.approx(1.1972909258)
    c = cnlcu_criterion(np.array([[0.0, 2.31, 2.07, 1.94]]), np.array([2.12]), np.array([3.0]), epoch=4, tau=0.01,
                        loss_bound=2.0)
    assert c == pytest.approx([1.1972909258])
    # 4 entries: no outlier removal; s = 3, sn = 2, tau = 0.1: mu = 1.5, b = 1.1512096015
    c = cnlcu_criterion(np.array([[0.0, 1.0, 2.0], [0.0, 0.2, 0.1]]), np.array([3.0, 0.3]), np.array([2.0, 2.0]),
                        epoch=3, tau=0.1, loss_bound=2.0)
    assert c == pytest.approx([0.3487903985, 0.0])  # ReLU: a mean below its bound gives 0
    # the zeroed outlier stays in the mean: a spike is replaced by 0, not dropped
    c = cnlcu_criterion(np.array([[0.0, 0.52, 0.41, 0.47]]), np.array([3.86]), np.array([1.0]), epoch=4, tau=0.0,
                        loss_bound=2.0)
    assert c == pytest.approx([(0.52 + 0.41 + 0.47) / 5])


def test_cnlcu_keeps_the_floor_of_the_remember_rate_smallest_criteria():
    c = np.array([0.5, 0.0, 0.2, 0.0, 0.9, 0.1, 0.7, 0.3, 0.0, 0.6])
    assert small_criterion(c, 0.25).tolist() == [1, 3, 8, 5, 2, 7, 0]  # floor(0.75 * 10) = 7, ties in batch order
    assert small_criterion(c, 0.0).tolist() == [1, 3, 8, 5, 2, 7, 0, 9, 6, 4]
    assert len(small_criterion(c[:1], 0.5)) == 1  # floor(0.5) = 0: the official code keeps the whole batch


def test_cnlcu_resets_its_loss_history_every_time_step(blobs):
    X, noisy, _, _ = blobs
    states = []

    class Recording(CNLCU):
        def train_epoch(self, epoch):
            row = super().train_epoch(epoch)
            states.append((self.history.shape[2], float(self.sn.max()), float(np.abs(self.history[:, :, 0]).max())))
            return row

    result = Recording(mlp, K, setup(epochs=7), forget_rate=0.2, ramp_epochs=3, tau_min=0.3).fit(X, noisy)
    assert [s[0] for s in states] == [2, 3, 4, 5, 6, 2, 3]  # the zero column + one column per epoch of the window
    assert [s[1] for s in states] == [2, 3, 4, 5, 6, 2, 3]  # sn = 1 + the epochs a sample was selected in
    assert all(s[2] == 0 for s in states)
    assert result.history["tau_min"].tolist() == pytest.approx(0.3 * np.linspace(1, 0, 7))
    with pytest.raises(ConfigError, match="forget_rate must be in"):
        make_method("cnlcu", mlp, K, setup(), forget_rate=1.0)


# -- SEAL ----------------------------------------------------------------------------------------------------
class RecordingSEAL(SEAL):
    def _prepare(self, X, y):
        super()._prepare(X, y)
        self.outputs, self.starts = [], []
        self.initial = self.nets[0].state_dict()["net.1.weight"].clone()

    def train_softmax(self):
        probs = super().train_softmax()
        self.outputs.append(probs.clone())
        return probs

    def start_round(self, r):
        before = self.nets[0].state_dict()["net.1.weight"].clone()
        super().start_round(r)
        self.starts.append((before, self.nets[0].state_dict()["net.1.weight"].clone(), len(self.optimizers[0].state)))


def test_seal_soft_labels_are_the_mean_of_the_rounds_softmax_outputs(blobs):
    X, noisy, _, _ = blobs
    method = RecordingSEAL(mlp, K, setup(epochs=3), rounds=3)
    result = method.fit(X, noisy)
    assert result.history["round"].tolist() == [1, 1, 1, 2, 2, 2, 3, 3, 3]  # rounds x setup.epochs epochs
    assert len(method.outputs) == 9
    round2 = torch.stack(method.outputs[3:6]).mean(0)  # the last round trains on round 2's mean softmax
    assert np.allclose(result.extras["soft_targets"], round2.numpy(), atol=1e-6)
    assert not np.allclose(result.extras["soft_targets"], torch.stack(method.outputs[0:3]).mean(0).numpy())
    with pytest.raises(ConfigError, match="at least one round"):
        make_method("seal", mlp, K, setup(), rounds=0)


@pytest.mark.parametrize("reinit", [False, True])
def test_seal_continues_or_restarts_each_round(blobs, reinit):
    X, noisy, _, _ = blobs
    method = RecordingSEAL(mlp, K, setup(epochs=2), rounds=2, reinit=reinit)
    method.fit(X, noisy)
    (_, start1, _), (end1, start2, optimizer_state) = method.starts
    assert torch.equal(start1, method.initial)
    if reinit:  # the run's initial weights and a fresh optimizer
        assert torch.equal(start2, method.initial) and optimizer_state == 0
    else:
        assert torch.equal(start2, end1) and not torch.equal(start2, method.initial) and optimizer_state > 0


# -- evaluation options --------------------------------------------------------------------------------------
def test_topk_columns_and_eval_net(blobs):
    X, noisy, Xt, yt = blobs
    many = torch.as_tensor(np.random.default_rng(1).integers(0, 10, 600))  # 10 classes: top-5 is not trivial
    ten = lambda: build_model("mlp", (D,), 10, hidden=(8,))  # noqa: E731
    method = make_method("erm", ten, 10, setup(epochs=2, topk=(1, 5)))
    result = method.fit(X, many.numpy(), eval_sets={"train": (X, many.numpy())})
    assert (result.history["train_top5"] >= result.history["train_acc"]).all()
    top5 = method.nets[0](X).detach().topk(5, dim=1).indices
    assert result.history["train_top5"].iloc[-1] == pytest.approx((top5 == many[:, None]).any(1).float().mean().item())
    assert result.accuracy("last", "train", metric="top5") == result.history["train_top5"].iloc[-1]
    ct = make_method("coteaching", mlp, K, setup(epochs=1, eval_net=0), forget_rate=0.2)
    history = ct.fit(X, noisy, eval_sets={"test": (Xt, yt)}).history
    assert history["test_acc"].iloc[0] == pytest.approx((ct.nets[0](Xt).argmax(1).numpy() == yt).mean())
    with pytest.raises(ConfigError, match="eval_net must be None or a network index below 1"):
        make_method("erm", mlp, K, setup(eval_net=1))


def test_new_options_left_at_their_defaults_change_nothing(blobs):
    X, noisy, Xt, yt = blobs
    eval_sets = {"test": (Xt, yt)}
    for name, hp in [("erm", {}), ("coteaching", {"forget_rate": 0.2})]:
        plain = make_method(name, mlp, K, setup(epochs=2), **hp).fit(X, noisy, eval_sets=eval_sets).history
        explicit = make_method(name, mlp, K, setup(epochs=2, topk=(1,), grad_clip=None, eval_net=None),
                               **hp).fit(X, noisy, eval_sets=eval_sets).history
        pd.testing.assert_frame_equal(plain, explicit)
    # an inactive clip, a top-5 column and network 1's accuracy leave the training itself unchanged
    plain = make_method("coteaching", mlp, K, setup(epochs=2), forget_rate=0.2).fit(X, noisy, eval_sets=eval_sets)
    other = make_method("coteaching", mlp, K, setup(epochs=2, grad_clip=1e9, topk=(1, 5), eval_net=0),
                        forget_rate=0.2).fit(X, noisy, eval_sets=eval_sets)
    pd.testing.assert_series_equal(plain.history["train_loss"], other.history["train_loss"])
    assert set(other.history.columns) - set(plain.history.columns) == {"test_top5"}


def test_grad_clip_bounds_the_gradient_norm():
    method = Method(mlp, K, setup(grad_clip=0.5))
    net = mlp()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.0)
    loss = 1e3 * F.cross_entropy(net(torch.randn(16, D)), torch.randint(0, K, (16,)))
    method.step(optimizer, loss)
    norm = torch.sqrt(sum((p.grad**2).sum() for p in net.parameters()))
    assert norm == pytest.approx(0.5, rel=1e-4)


def test_stable_rule_and_topk_selection():
    result = FitResult(pd.DataFrame({"test_acc": [0.1, 0.5, 0.4, 0.3, 0.6, 0.2, 0.35],
                                     "test_top5": [0.3, 0.9, 0.7, 0.95, 0.8, 0.6, 0.7],
                                     "val_acc": [0.1, 0.6, 0.5, 0.4, 0.5, 0.3, 0.3]}))
    assert result.accuracy("stable") == pytest.approx(np.mean([0.4, 0.3, 0.6, 0.2, 0.35]))
    assert result.accuracy("stable", metric="top5") == pytest.approx(np.mean([0.7, 0.95, 0.8, 0.6, 0.7]))
    # Top-1 and Top-5 peak at different epochs (the official test_best1 / test_best5)
    assert result.accuracy("best_test") == 0.6 and result.accuracy("best_test", metric="top5") == 0.95
    assert result.accuracy("val") == 0.5 and result.accuracy("val", metric="top5") == 0.9  # best val top-1: epoch 1
    with pytest.raises(ConfigError, match="no column 'test_top3'"):
        result.accuracy("last", metric="top3")


# -- mixed precision (TrainSetup.amp) ------------------------------------------------------------------------
def _jitter(batch, generator):
    return batch + 0.1 * torch.randn(batch.shape, generator=generator)


# train_loss of each epoch recorded on the CPU before the two-network learners got fp16 AMP on CUDA: off CUDA the
# autocast is disabled and the GradScaler unused, so these runs must not change
CPU_REFERENCE = {
    "coteaching": ({"forget_rate": 0.2, "ramp_epochs": 2}, {},
                   [0.7943026887045966, 0.23808794654905796, 0.14883841522451904]),
    "dividemix": ({"warmup": 1, "warmup_penalty": True}, {"augment": _jitter},
                  [-0.12012177348136902, 0.6917181983590126, 0.5907186791300774]),
    "cnlcu": ({"forget_rate": 0.2, "ramp_epochs": 2}, {"epochs": 6},
              [0.8010349273681641, 0.8699252605438232, 1.1270231008529663, 1.2123552560806274, 1.1040267944335938,
               1.0936172008514404]),
}


@pytest.mark.parametrize("name", sorted(CPU_REFERENCE))
def test_two_network_learners_on_the_cpu_are_unchanged_by_amp(blobs, name):
    X, noisy, Xt, yt = blobs
    hp, options, reference = CPU_REFERENCE[name]
    results = []
    for amp in (True, False):
        method = make_method(name, mlp, K, setup(**{"epochs": 3, "log_losses_at": (2,), **options, "amp": amp}), **hp)
        assert method.mixed_precision and not method.amp or method.amp is False
        results.append(method.fit(X, noisy, eval_sets={"test": (Xt, yt)}))
        assert not method.amp and not method.scaler.is_enabled()  # a no-op off CUDA
    pd.testing.assert_frame_equal(results[0].history, results[1].history)
    np.testing.assert_array_equal(results[0].losses[2], results[1].losses[2])
    assert results[0].history["train_loss"].tolist() == pytest.approx(reference, rel=1e-6, abs=1e-9)


class _CountingScaler(torch.amp.GradScaler):
    def __init__(self):
        super().__init__("cpu", enabled=True)
        self.steps, self.unscaled = 0, 0

    def step(self, optimizer, *args, **kwargs):
        self.steps += 1
        return super().step(optimizer, *args, **kwargs)

    def unscale_(self, optimizer):
        self.unscaled += 1
        return super().unscale_(optimizer)


@pytest.fixture
def cpu_amp(monkeypatch):
    """The AMP branch taken on the CPU: bfloat16 autocast and an enabled (counting) GradScaler."""
    import shared.methods.base as base
    import shared.training as training

    scalers = []

    def scaler(device, enabled=True):
        scalers.append(_CountingScaler())
        return scalers[-1]

    monkeypatch.setattr(training, "AMP_DTYPE", torch.bfloat16)
    monkeypatch.setattr(base, "amp_scaler", scaler)
    return scalers


def _record_output_dtypes(method):
    """Wrap make_model so every network records the dtype of its raw outputs."""
    seen, make = set(), method.make_model

    def recording():
        net = make()
        net.register_forward_hook(lambda module, inputs, output: seen.add(output.dtype))
        return net

    method.make_model = recording
    return seen


@pytest.mark.parametrize("name,hp", [("coteaching", {"forget_rate": 0.2, "ramp_epochs": 2}),
                                     ("cnlcu", {"forget_rate": 0.2, "ramp_epochs": 2})])
def test_amp_branch_selects_on_float32_losses_and_still_learns(blobs, cpu_amp, monkeypatch, name, hp):
    import shared.methods.cnlcu as cnlcu_module
    import shared.methods.coteaching as coteaching_module

    module = coteaching_module if name == "coteaching" else cnlcu_module
    per_sample = []

    class SpyF:  # the module's F, recording the dtype of the per-sample cross-entropies (the selection's input)
        def __getattr__(self, attr):
            return getattr(F, attr)

        def cross_entropy(self, logits, target, reduction="mean"):
            out = F.cross_entropy(logits, target, reduction=reduction)
            if reduction == "none":
                per_sample.append(out.dtype)
            return out

    monkeypatch.setattr(module, "F", SpyF())
    X, noisy, Xt, yt = blobs
    method = make_method(name, mlp, K, setup(epochs=3, grad_clip=5.0), **hp)
    raw = _record_output_dtypes(method)
    result = method.fit(X, noisy, eval_sets={"test": (Xt, yt)})
    assert method.amp and raw == {torch.bfloat16}  # training and evaluation forward passes under autocast
    assert per_sample and set(per_sample) == {torch.float32}
    scaler, = cpu_amp
    assert scaler.steps > 0 and scaler.unscaled == scaler.steps  # every step scaled, unscaled before clipping
    assert method.logits(Xt).dtype == torch.float32
    losses = result.history["train_loss"]  # CNLCU's is the mean over every row, noisy ones included: it rises
    assert (name != "coteaching" or losses.iloc[-1] < losses.iloc[0]) and result.accuracy("last") > 0.9


def test_amp_branch_of_dividemix_divides_and_guesses_in_float32(blobs, cpu_amp, monkeypatch):
    import shared.methods.dividemix as dividemix_module

    divided, sharpened = [], []
    real_clean_probability, real_sharpen = dividemix_module.clean_probability, dividemix_module.sharpen
    monkeypatch.setattr(dividemix_module, "clean_probability",
                        lambda losses, **kw: divided.append(losses.dtype) or real_clean_probability(losses, **kw))
    monkeypatch.setattr(dividemix_module, "sharpen",
                        lambda p, temperature: sharpened.append(p.dtype) or real_sharpen(p, temperature))
    X, noisy, Xt, yt = blobs
    method = make_method("dividemix", mlp, K, setup(epochs=3, augment=_jitter), warmup=1)
    raw = _record_output_dtypes(method)
    result = method.fit(X, noisy, eval_sets={"test": (Xt, yt)})
    assert method.amp and raw == {torch.bfloat16}
    assert divided and set(divided) == {np.dtype(np.float32)}  # the GMM's per-sample losses
    assert sharpened and set(sharpened) == {torch.float32}  # co-guessed and co-refined targets
    scaler, = cpu_amp
    assert scaler.steps > 0
    assert np.isfinite(result.history["train_loss"]).all() and result.accuracy("last") > 0.9


def test_predict_logits_under_amp_returns_float32(cpu_amp):
    from shared.training import predict_logits

    net = mlp()
    X = torch.randn(20, D)
    plain, amp = predict_logits(net, X, batch_size=8), predict_logits(net, X, batch_size=8, amp=True)
    assert plain.dtype == amp.dtype == torch.float32
    torch.testing.assert_close(plain, amp, atol=0.1, rtol=0.05)  # bfloat16 rounding only
