"""Long-tailed methods (LDAM-DRW, BBN, Decoupling NCM/cRT/LWS): their formulas, samplers and frozen parts, and
their behaviour on small long-tailed Gaussian-blob problems (200/50/10 training rows, balanced test sets)."""
from dataclasses import replace

import numpy as np
import pytest
import torch

from shared.errors import ConfigError
from shared.methods import ERM, TrainSetup
from shared.methods.decoupling import CRT, LWS, NCM, ClassAwareSampler
from shared.methods.longtail import BBN, LDAM, BBNNet, ReversedSampler, drw_weights, ldam_loss, ldam_margins
from shared.models import build_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

COUNTS = [200, 50, 10]
SETUP = TrainSetup(epochs=30, batch_size=32, lr=1e-3, optimizer="adamw", weight_decay=1e-2, device="cpu")


def blobs(sep: float, seed: int = 0, d: int = 8, n_test: int = 200):
    """Unit-variance Gaussian blobs whose means lie ``sep`` from the origin: train (COUNTS), test (balanced)."""
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(len(COUNTS), d))
    means *= sep / np.linalg.norm(means, axis=1, keepdims=True)

    def draw(sizes):
        X = np.concatenate([means[c] + rng.normal(size=(n, d)) for c, n in enumerate(sizes)])
        return torch.tensor(X, dtype=torch.float32), np.repeat(np.arange(len(sizes)), sizes)

    return (*draw(COUNTS), *draw([n_test] * len(COUNTS)))


def mlp():
    return build_model("mlp", (8,), 3, hidden=(64, 64))


def recall(method, X, y, c: int) -> float:
    pred = method.logits(X).argmax(1).numpy()
    return float((pred[y == c] == c).mean())


@pytest.fixture(scope="module")
def separable():
    return blobs(sep=6.0)


@pytest.fixture(scope="module")
def overlapping():
    return blobs(sep=2.0)


@pytest.fixture(scope="module")
def erm(overlapping):
    X, y, _, _ = overlapping
    method = ERM(mlp, 3, SETUP)
    method.fit(X, y)
    return method


# -- the network interface ---------------------------------------------------------------------------------
def test_mlp_features_and_classifier_compose_to_forward():
    net = build_model("mlp", (6,), 4, hidden=(16, 8), dropout=0.3).eval()
    keys = list(net.state_dict())
    x = torch.randn(5, 6)
    assert net.features(x).shape == (5, 8) and net.classifier is net.net[-1]
    assert torch.equal(net.classifier(net.features(x)), net(x))
    assert list(net.state_dict()) == keys  # no new parameters
    linear = build_model("mlp", (6,), 4, hidden=())
    assert torch.equal(linear.features(x), x) and torch.equal(linear.classifier(x), linear(x))


# -- LDAM-DRW ----------------------------------------------------------------------------------------------
def test_ldam_margins_follow_the_quarter_power_with_the_largest_equal_to_max_margin():
    counts = torch.tensor([200, 50, 10, 0])
    margins = ldam_margins(counts, 0.7)
    assert margins[2] == pytest.approx(0.7) and margins[3] == 0  # the rarest class; a class without rows
    products = margins[:3] * counts[:3].float() ** 0.25  # Delta_j * n_j^(1/4) is the same for every class
    assert torch.allclose(products, products[0].expand(3))


def test_ldam_loss_is_cross_entropy_of_scaled_logits_with_the_true_class_margin_subtracted():
    generator = torch.Generator().manual_seed(0)
    logits, target = torch.randn(6, 3, generator=generator), torch.tensor([0, 1, 2, 2, 1, 0])
    margins, scale = torch.tensor([0.1, 0.3, 0.5]), 7.0
    by_hand = []
    for z, t in zip(logits, target):
        shifted = z.clone()
        shifted[t] -= margins[t]
        by_hand.append(-torch.log_softmax(scale * shifted, 0)[t])
    by_hand = torch.stack(by_hand)
    assert ldam_loss(logits, target, margins, scale) == pytest.approx(float(by_hand.mean()), rel=1e-6)
    weight = torch.tensor([0.5, 1.0, 2.0])
    weighted = float((weight[target] * by_hand).sum() / weight[target].sum())
    assert ldam_loss(logits, target, margins, scale, weight) == pytest.approx(weighted, rel=1e-6)


def test_drw_weights_are_inverse_effective_numbers_switched_on_at_drw_start(overlapping):
    beta, counts = 0.9999, torch.tensor(COUNTS)
    weights = drw_weights(counts, beta)
    effective = 1 - beta ** counts.double()
    expected = (1 - beta) / effective
    assert torch.allclose(weights.double(), expected / expected.sum() * 3, rtol=1e-6)
    assert float(weights.sum()) == pytest.approx(3.0)
    X, y, _, _ = overlapping
    method = LDAM(mlp, 3, replace(SETUP, epochs=5), max_margin=0.5, scale=10, drw=True, drw_start=0.6)
    result = method.fit(X, y)
    assert result.history["drw"].tolist() == [False, False, False, True, True]
    assert method.class_weights(2) is None and torch.equal(method.class_weights(3), weights)
    plain = LDAM(mlp, 3, replace(SETUP, epochs=2), max_margin=0.5, scale=10)
    assert not plain.fit(X, y).history["drw"].any()


# -- BBN ---------------------------------------------------------------------------------------------------
def test_bbn_cumulative_learning_weight_and_equal_weight_inference():
    bbn = BBN(mlp, 3, replace(SETUP, epochs=10))
    assert [bbn.alpha_at(t) for t in range(10)] == pytest.approx([1 - (t / 10) ** 2 for t in range(10)])
    torch.manual_seed(0)
    net = BBNNet(mlp()).eval()
    extra = 64 * 64 + 64 + 64 * 3 + 3  # the re-balancing branch's last hidden block and classifier
    assert sum(p.numel() for p in net.parameters()) == sum(p.numel() for p in mlp().parameters()) + extra
    assert not torch.equal(net.block_c[0].weight, net.block_r[0].weight)  # the re-balancing copy is re-initialised
    x, x_r = torch.randn(4, 8), torch.randn(4, 8)
    z_c, z_r = net.branches(x, x)
    assert torch.equal(net(x), z_c + z_r)  # alpha = 1/2: both branches weighted equally
    assert torch.equal(net.mix(x, x_r, 1.0), 2 * net.branches(x, x_r)[0])  # alpha = 1: conventional branch only


def test_reversed_sampler_draws_classes_in_proportion_to_inverse_counts():
    labels = torch.tensor(np.repeat([0, 1, 2], COUNTS))
    sampler = ReversedSampler(labels, 4, torch.Generator().manual_seed(0))  # class 3 has no rows
    rows = sampler.sample(200_000)
    frequencies = torch.bincount(labels[rows], minlength=4).double() / len(rows)
    inverse = 1 / torch.tensor(COUNTS, dtype=torch.float64)
    assert torch.allclose(frequencies[:3], inverse / inverse.sum(), atol=0.005) and frequencies[3] == 0
    tail = torch.bincount(rows[labels[rows] == 2] - 250, minlength=10)  # class 2's rows are 250..259, uniformly
    assert len(tail) == 10 and tail.min() > 0.9 * tail.float().mean()


# -- Decoupling --------------------------------------------------------------------------------------------
def test_class_aware_sampler_visits_every_class_num_samples_cls_times_per_cycle():
    labels = torch.tensor(np.repeat([0, 1, 2], [20, 5, 2]))
    order = ClassAwareSampler(labels, 4, torch.Generator().manual_seed(0)).epoch()
    assert len(order) == 3 * 20  # K * max_c N_c draws
    drawn = labels[order].view(-1, 3 * 4)  # 5 passes over the classes, 4 consecutive draws per visit
    for block in drawn:
        assert torch.equal(torch.bincount(block, minlength=3), torch.tensor([4, 4, 4]))
        assert all(len(set(block[i : i + 4].tolist())) == 1 for i in range(0, 12, 4))
    class1 = order[labels[order] == 1].view(-1, 5)  # each pass over a class's rows is a permutation of them
    assert all(sorted(cycle.tolist()) == list(range(20, 25)) for cycle in class1)
    again = ClassAwareSampler(labels, 4, torch.Generator().manual_seed(0)).epoch()
    other = ClassAwareSampler(labels, 4, torch.Generator().manual_seed(1)).epoch()
    assert torch.equal(order, again) and not torch.equal(order, other)


def test_ncm_predicts_the_nearest_centred_normalised_class_mean(overlapping, erm):
    X, y, Xt, yt = overlapping
    state = erm.nets[0].state_dict()
    net = erm.nets[0].eval()
    with torch.no_grad():
        train, test = net.features(X).numpy(), net.features(Xt).numpy()
    mean = train.mean(0)
    g = (train - mean) / np.linalg.norm(train - mean, axis=1, keepdims=True)
    gt = (test - mean) / np.linalg.norm(test - mean, axis=1, keepdims=True)
    centroids = np.stack([g[y == c].mean(0) for c in range(3)])
    euclidean = ((gt[:, None, :] - centroids[None]) ** 2).sum(-1).argmin(1)
    cosine = (gt @ (centroids / np.linalg.norm(centroids, axis=1, keepdims=True)).T).argmax(1)
    for distance, by_hand in (("euclidean", euclidean), ("cosine", cosine)):
        method = NCM(mlp, 3, SETUP, stage1=state, distance=distance)
        result = method.fit(X, y, eval_sets={"test": (Xt, yt)})
        assert np.array_equal(method.logits(Xt).argmax(1).numpy(), by_hand)
        assert len(result.history) == 1 and result.history["stage"].tolist() == [2]
        assert result.accuracy("best_test") == pytest.approx((by_hand == yt).mean())


def test_crt_retrains_only_the_reinitialised_classifier(overlapping, erm):
    X, y, _, _ = overlapping
    state = {k: v.clone() for k, v in erm.nets[0].state_dict().items()}
    method = CRT(mlp, 3, SETUP, stage1=state, retrain_epochs=2)
    result = method.fit(X, y)
    net = method.nets[0]
    classifier = {f"net.{len(net.net) - 1}.weight", f"net.{len(net.net) - 1}.bias"}
    after = net.state_dict()
    assert all(torch.equal(after[k], state[k]) for k in state if k not in classifier)  # the backbone, bit for bit
    assert all(not torch.equal(after[k], state[k]) for k in classifier)
    assert result.history["epoch"].tolist() == [0, 1] and (result.history["stage"] == 2).all()


def test_lws_learns_only_per_class_scales(overlapping, erm):
    X, y, _, _ = overlapping
    state = {k: v.clone() for k, v in erm.nets[0].state_dict().items()}
    method = LWS(mlp, 3, SETUP, stage1=state)
    method.fit(X, y)
    scaled = method.nets[0]
    after = scaled.net.state_dict()
    assert all(torch.equal(after[k], state[k]) for k in state)
    assert not torch.equal(scaled.scales.detach(), torch.ones(3))
    x = X[:5]
    assert torch.allclose(method.logits(x), erm.logits(x) * scaled.scales.detach())


def test_reusing_a_stage1_network_equals_training_both_stages(overlapping, erm):
    X, y, Xt, yt = overlapping
    whole = CRT(mlp, 3, SETUP).fit(X, y, eval_sets={"test": (Xt, yt)})
    reused = CRT(mlp, 3, SETUP, stage1=erm.nets[0].state_dict()).fit(X, y, eval_sets={"test": (Xt, yt)})
    assert whole.history.equals(reused.history)
    stage1 = whole.extras["stage1_history"]
    assert len(stage1) == SETUP.epochs and (stage1["stage"] == 1).all() and reused.extras["stage1_history"].empty
    assert all(torch.equal(whole.extras["stage1_state"][k], v) for k, v in erm.nets[0].state_dict().items())


# -- behaviour ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: LDAM(mlp, 3, SETUP, max_margin=0.5, scale=10),
    lambda: LDAM(mlp, 3, SETUP, max_margin=0.8, scale=7, drw=True),
    lambda: BBN(mlp, 3, SETUP),
    lambda: NCM(mlp, 3, SETUP),
    lambda: CRT(mlp, 3, SETUP),
    lambda: LWS(mlp, 3, SETUP),
], ids=["ldam", "ldam_drw", "bbn", "ncm", "crt", "lws"])
def test_every_method_learns_a_separable_long_tailed_problem(make, separable):
    X, y, Xt, yt = separable
    assert make().fit(X, y, eval_sets={"test": (Xt, yt)}).accuracy("last") > 0.85


def test_rebalancing_raises_the_minority_recall_over_erm(overlapping, erm):
    X, y, Xt, yt = overlapping
    base = recall(erm, Xt, yt, 2)  # about 0.27: plain cross-entropy favours the 200-row class
    state = erm.nets[0].state_dict()
    for method in (LDAM(mlp, 3, SETUP, max_margin=0.5, scale=10, drw=True), BBN(mlp, 3, SETUP),
                   CRT(mlp, 3, replace(SETUP, lr=1e-2), stage1=state), NCM(mlp, 3, SETUP, stage1=state)):
        method.fit(X, y)
        assert recall(method, Xt, yt, 2) > base + 0.15, method.name


# -- errors ------------------------------------------------------------------------------------------------
def test_bad_hyperparameters_and_networks_are_config_errors():
    for kwargs in ({"max_margin": 0}, {"scale": -1}, {"beta": 1.0}, {"drw_start": 1.5}):
        with pytest.raises(ConfigError):
            LDAM(mlp, 3, SETUP, **kwargs)
    for kwargs in ({"retrain_epochs": 0}, {"num_samples_cls": 0}):
        with pytest.raises(ConfigError, match="needs retrain_epochs >= 1"):
            CRT(mlp, 3, SETUP, **kwargs)
    with pytest.raises(ConfigError, match="unknown NCM distance 'manhattan'"):
        NCM(mlp, 3, SETUP, distance="manhattan")
    images, labels = torch.zeros(4, 3, 8, 8), [0, 1, 2, 0]
    cnn = lambda: build_model("tiny_cnn", (3, 8, 8), 3)  # noqa: E731 - has features, but no `classifier`
    with pytest.raises(ConfigError, match="CRT needs a network with features"):
        CRT(cnn, 3, SETUP).fit(images, labels)
    with pytest.raises(ConfigError, match="LDAM with normed=True needs"):
        LDAM(cnn, 3, SETUP).fit(images, labels)
    with pytest.raises(ConfigError, match="NCM needs a network with features"):
        NCM(lambda: torch.nn.Linear(8, 3), 3, SETUP).fit(torch.zeros(4, 8), labels)
    with pytest.raises(ConfigError, match="BBN needs a shared.models.MLP with at least one hidden layer"):
        BBN(lambda: build_model("mlp", (8,), 3, hidden=()), 3, SETUP).fit(torch.zeros(4, 8), labels)
    with pytest.raises(ConfigError, match="stage1 is not a state_dict"):
        CRT(mlp, 3, SETUP, stage1={"w": torch.zeros(1)}).fit(torch.zeros(4, 8), labels)


class _HeadNet(torch.nn.Module):
    """A network with ``features`` and ``classifier`` but not an MLP (like a language model's classifier)."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())
        self.classifier = torch.nn.Linear(16, 3)

    def features(self, x):
        return self.body(x)

    def forward(self, x):
        return self.classifier(self.features(x))


def test_bbn_on_a_network_with_features_has_two_heads_on_one_representation():
    net = BBNNet(_HeadNet())
    x = torch.randn(5, 8)
    z_c, z_r = net.branches(x, x)
    assert torch.allclose(z_c, net.backbone(x)) and not torch.allclose(z_c, z_r)
    assert torch.allclose(net(x), z_c + z_r)
    shared = {id(p) for p in net.backbone.body.parameters()}
    assert shared <= {id(p) for p in net.parameters()} and len(list(net.parameters())) == 6  # body 2, two heads 2 + 2
