"""PiCO, ALIM and PiCO+ (plench.algorithms.contrastive): shared pieces against direct formulas, and training runs
on the digits image path checking confidences, the queue, the key encoder and the official ``curr_iter`` bug."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plench.algorithms import contrastive as C
from plench.hparams import hparams_for
from shared.errors import ConfigError

torch.set_num_threads(1)

BATCH = 64
# Small model state, and warm-ups short enough for the post-warm-up branches to run within a few dozen steps.
SMALL = {"moco_queue": 256, "feat_dim": 32, "batch_size": BATCH}
OVERRIDES = {"PiCO": {"prot_start": 6},
             "ALIM": {"prot_start": 4, "start_epoch": 1, "noise_rate": 0.2},
             "PiCO_plus": {"prot_start": 4, "knn_start": 8, "pure_ratio": 0.8}}


def build(name, data, *, compat=True, steps=30, **extra):
    torch.manual_seed(0)
    hparams = {**hparams_for(name, "digits_cnn"), **SMALL, **OVERRIDES[name], **extra}
    return C.__dict__[name]((1, 8, 8), data.q, data.S, hparams, arch="digits_cnn", steps=steps, compat=compat)


def train(algorithm, data, steps, seed=0):
    torch.manual_seed(seed + 1)
    return [algorithm.update(b)["loss"] for b in data.batches(steps, BATCH, image=True, seed=seed)]


def assert_valid_confidences(algorithm, data, *, on_candidates=True):
    w = algorithm.confidence
    assert torch.all(w >= 0)
    assert torch.allclose(w.sum(1), torch.ones(data.n), atol=1e-5)
    if on_candidates:
        assert torch.all(w[data.S == 0] == 0)


# -- shared pieces against direct computations ---------------------------------------------------------------------
def test_supcon_matches_a_direct_computation_on_four_samples():
    torch.manual_seed(1)
    f = F.normalize(torch.randn(4, 3, dtype=torch.float64), dim=1)
    positives = torch.tensor([[0, 1, 0, 1], [1, 0, 1, 0]], dtype=torch.bool)  # two anchors, all four rows
    expected = []
    for i in range(2):
        denominator = sum(np.exp(float(f[i] @ f[a]) / 0.07) for a in range(4) if a != i)
        terms = [-np.log(np.exp(float(f[i] @ f[p]) / 0.07) / denominator) for p in range(4) if positives[i, p]]
        expected.append(np.mean(terms))
    assert C.supcon_loss(f, positives, 2).item() == pytest.approx(np.mean(expected), rel=1e-9)
    weights = torch.tensor([2.0, 0.5], dtype=torch.float64)
    assert C.supcon_loss(f, positives, 2, weights=weights).item() == pytest.approx(
        (2.0 * expected[0] + 0.5 * expected[1]) / 2, rel=1e-9)
    # the anchor's own column never counts, even when flagged positive
    with_self = positives.clone()
    with_self[0, 0] = with_self[1, 1] = True
    assert C.supcon_loss(f, with_self, 2).item() == pytest.approx(np.mean(expected), rel=1e-9)


def test_infonce_is_cross_entropy_with_the_key_as_class_zero():
    torch.manual_seed(2)
    q, k, queue = (F.normalize(torch.randn(n, 5, dtype=torch.float64), dim=1) for n in (3, 3, 7))
    expected = np.mean([-(float(q[i] @ k[i]) / 0.07)
                        + np.log(np.exp(float(q[i] @ k[i]) / 0.07) + np.exp((queue @ q[i]).numpy() / 0.07).sum())
                        for i in range(3)])
    assert C.infonce_loss(q, k, queue).item() == pytest.approx(expected, rel=1e-9)


def test_prototype_ema_equals_the_official_per_example_loop():
    torch.manual_seed(3)
    prototypes = F.normalize(torch.randn(4, 6, dtype=torch.float64), dim=1)
    features = F.normalize(torch.randn(9, 6, dtype=torch.float64), dim=1)
    labels = torch.tensor([2, 0, 2, 2, 1, 0, 2, 1, 2])
    looped = prototypes.clone()
    for z, y in zip(features, labels):
        looped[y] = 0.9 * looped[y] + 0.1 * z
    got = C.ema_prototypes(prototypes, features, labels, 0.9)
    assert torch.allclose(got, F.normalize(looped, dim=1), atol=1e-12)
    assert torch.allclose(got[3], prototypes[3])  # class 3 unseen: only renormalised
    assert torch.allclose(C.ema_prototypes(torch.zeros(4, 6, dtype=torch.float64), features[:1], labels[:1], 0.9)[2],
                          features[0], atol=1e-12)  # a zero prototype becomes the first feature's direction


def test_alim_margins_target_and_quantile_on_hand_made_scores():
    score = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3]])
    s = torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    assert torch.allclose(C.candidate_margins(score, s), torch.tensor([0.3 / 0.5, 0.6 / 0.3]))
    margins = torch.tensor([3.0, 0.5, 2.0, 9.0, 1.0, 4.0, 0.1])
    for rate in (0.1, 0.2, 0.5, 0.7):
        assert C.margin_quantile(margins, rate) == np.sort(margins.numpy())[int(7 * rate)]
        assert C.margin_quantile(margins, rate) == np.quantile(margins.numpy(), rate, method="inverted_cdf")


def test_pico_plus_selection_and_positive_mask_by_hand():
    distance = torch.tensor([0.3, -0.9, 0.0, -0.2, 0.0, 0.5, -0.4, 0.1, 0.2, -1.0])
    reliable = C.select_reliable(distance, 0.6)
    assert reliable.tolist() == [False, True, True, True, True, False, True, False, False, True]
    # B = 2 anchors, keys, and a queue of 2: anchor 0 reliable (label 1), anchor 1 unreliable (label 0)
    labels = torch.tensor([1, 0, 1, 0, 1, 1])
    flags = torch.tensor([True, False, True, False, True, False])
    plain = C.robust_positives(labels, flags, 2)
    assert plain.int().tolist() == [[1, 0, 1, 0, 1, 0],  # same label and reliable (queue slot 5 is not)
                                    [0, 0, 0, 1, 0, 0]]  # unreliable: only its own key
    knn = C.robust_positives(labels, flags, 2, knn_index=torch.tensor([[5, 4], [5, 0]]))
    assert knn[0].tolist() == plain[0].tolist()  # kNN only replaces unreliable anchors' rows
    assert knn[1].int().tolist() == [1, 0, 0, 1, 0, 1]


# -- training on the digits image path -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["PiCO", "ALIM", "PiCO_plus"])
@pytest.mark.parametrize("compat", [True, False])
def test_training_runs_with_finite_losses_and_valid_confidences(digits_pll, name, compat):
    algorithm = build(name, digits_pll, compat=compat)
    losses = train(algorithm, digits_pll, 24)
    assert all(np.isfinite(losses))
    uniform = algorithm.uniform_confidence()
    stuck = compat and name != "PiCO"
    assert algorithm.curr_iter == (0 if stuck else 24)
    if stuck:  # the official code's bug: never leaves warm-up
        assert torch.equal(algorithm.confidence, uniform)
    else:
        assert not torch.equal(algorithm.confidence, uniform)
    assert_valid_confidences(algorithm, digits_pll, on_candidates=getattr(algorithm, "prior", 0.0) == 0.0)
    if name == "ALIM":
        assert (algorithm.prior == 0.0) == compat
    if name == "PiCO_plus":
        assert int(algorithm.reliable.sum()) == (digits_pll.n if compat else int(0.8 * digits_pll.n))
    logits = algorithm.predict(digits_pll.images[:5])
    assert logits.shape == (5, digits_pll.q) and torch.isfinite(logits).all()


def test_pico_confidences_stay_uniform_until_prot_start_then_follow_the_ema(digits_pll):
    algorithm = build("PiCO", digits_pll, steps=40)
    batches = list(digits_pll.batches(8, BATCH, image=True, seed=5))
    for batch in batches[:6]:
        algorithm.update(batch)
    assert torch.equal(algorithm.confidence, algorithm.uniform_confidence())
    # step 6 = prot_start: w <- m w + (1 - m) onehot(argmax_S softmax(q . prototypes)), m = 0.95 + 5/40 (0.8 - 0.95)
    batch = batches[6]
    with torch.no_grad():
        _, q = copy.deepcopy(algorithm.moco.query)(batch.weak)
        target = ((q @ algorithm.prototypes.T).softmax(1) * batch.s).argmax(1)
    before = algorithm.confidence[batch.idx].clone()
    algorithm.update(batch)
    m = 0.95 + 5 / 40 * (0.8 - 0.95)
    assert algorithm.conf_ema_m() == pytest.approx(0.95 + 6 / 40 * (0.8 - 0.95))
    expected = m * before + (1 - m) * F.one_hot(target, digits_pll.q)
    assert torch.allclose(algorithm.confidence[batch.idx], expected, atol=1e-6)
    assert_valid_confidences(algorithm, digits_pll)


def test_key_encoder_is_an_ema_of_the_query_and_the_queue_holds_unit_keys(digits_pll):
    algorithm = build("PiCO", digits_pll)
    m = algorithm.hparams["moco_m"]
    batches = list(digits_pll.batches(5, BATCH, image=True, seed=7))
    train(algorithm, digits_pll, 4, seed=7)  # 4 x 64 = 256 keys: the queue is full of real keys
    key_before = [p.clone() for p in algorithm.moco.key.parameters()]
    query_before = [p.clone() for p in algorithm.moco.query.parameters()]
    assert any(not torch.equal(k, q) for k, q in zip(key_before, query_before))
    algorithm.update(batches[4])
    for k_new, k_old, q_old in zip(algorithm.moco.key.parameters(), key_before, query_before):
        assert torch.allclose(k_new, m * k_old + (1 - m) * q_old, atol=1e-7)
    assert all(not p.requires_grad for p in algorithm.moco.key.parameters())
    queue = algorithm.queue
    assert torch.allclose(queue.features.norm(dim=1), torch.ones(queue.size), atol=1e-5)
    assert queue.labels.min() >= 0 and queue.labels.max() < digits_pll.q and bool(queue.reliable.all())
    assert int(queue.ptr) == BATCH  # 5 pushes of 64 into 256 slots wrap around to 64
    with torch.no_grad():  # the last push holds this step's keys (train-mode BatchNorm: same batch, same output)
        _, keys = algorithm.moco.key(batches[4].strong)
    assert torch.allclose(queue.features[:BATCH], keys, atol=1e-6)


def test_alim_lambda_is_the_noise_rate_quantile_of_the_margins(digits_pll):
    algorithm = build("ALIM", digits_pll, compat=False)
    epoch = algorithm.steps_per_epoch  # 600 // 64 = 9
    margins = []
    for batch in digits_pll.batches(epoch, BATCH, image=True, seed=3):
        with torch.no_grad():  # q of this batch as the step will compute it, and the prototypes before the step
            _, q = copy.deepcopy(algorithm.moco.query)(batch.weak)
            score = (q @ algorithm.prototypes.T).softmax(1)
        margins.append(((score * batch.s).max(1).values / (1e-9 + (score * (1 - batch.s)).max(1).values)).numpy())
        algorithm.update(batch)
        assert algorithm.prior == 0.0  # before start_epoch = 1
    margins = np.concatenate(margins)
    algorithm.update(next(digits_pll.batches(1, BATCH, image=True, seed=4)))
    assert len(margins) == epoch * BATCH and (len(margins) * 0.2) % 1 != 0
    assert algorithm.prior == pytest.approx(np.quantile(margins, 0.2, method="inverted_cdf"), rel=1e-5)
    assert algorithm.prior > 0 and len(algorithm.margins) == 1  # the list restarted with the new epoch


def test_runs_are_deterministic_for_a_fixed_seed(digits_pll):
    runs = []
    for _ in range(2):
        algorithm = build("PiCO_plus", digits_pll, compat=False)
        runs.append((train(algorithm, digits_pll, 12), algorithm.confidence.clone()))
    assert runs[0][0] == runs[1][0] and torch.equal(runs[0][1], runs[1][1])


def test_bad_hyperparameters_get_clear_errors(digits_pll):
    with pytest.raises(ConfigError, match="moco_queue"):
        build("PiCO", digits_pll, moco_queue=32)
    hparams = {**hparams_for("ALIM", "digits_cnn"), **SMALL}
    del hparams["noise_rate"]
    with pytest.raises(ConfigError, match="noise_rate"):
        C.ALIM((1, 8, 8), 10, digits_pll.S, hparams, arch="digits_cnn", steps=10)
