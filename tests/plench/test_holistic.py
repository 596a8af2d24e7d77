"""ABLE, CRDPLL, DIRK, VALEN and FREDIS: formulas on hand-made tensors, short runs on digits, compat switches."""
from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

import plench.algorithms.holistic as H
from plench.algorithms import make_algorithm
from plench.hparams import hparams_for
from shared.errors import ConfigError

torch.set_num_threads(1)
IMAGE = dict(arch="digits_cnn", input_shape=(1, 8, 8))
TABULAR = dict(arch="mlp", input_shape=(64,))


def build(name, data, *, arch, input_shape, steps=100, compat=True, seed=0, **overrides):
    torch.manual_seed(seed)
    hparams = {**hparams_for(name, arch), "batch_size": 64, **overrides}
    return make_algorithm(name, input_shape, 10, data.S, hparams, arch=arch, steps=steps, compat=compat)


def train(algorithm, data, steps, *, image, seed=0, batch_size=64):
    return [algorithm.update(b)["loss"] for b in data.batches(steps, batch_size, image=image, seed=seed)]


def assert_distributions_on(w, support):
    """Rows of w sum to 1 and put no mass outside support (both (n, q))."""
    assert torch.allclose(w.sum(1).double(), torch.ones(len(w), dtype=torch.float64), atol=1e-5)
    assert float((w * (1 - support)).abs().max()) == 0.0
    assert float(w.min()) >= 0.0


# -- shared pieces ------------------------------------------------------------------------------------------
def test_non_candidate_and_kl_terms_match_their_formulas():
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0]])
    s = torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    w = torch.tensor([[0.75, 0.25, 0.0], [0.0, 1.0, 0.0]])
    p = F.softmax(logits, 1)
    expected_nc = -(math.log(1.0000001 - p[0, 2]) + math.log(1.0000001 - p[1, 0]) + math.log(1.0000001 - p[1, 2])) / 2
    assert float(H.non_candidate_loss(logits, s)) == pytest.approx(float(expected_nc), rel=1e-5)
    expected_kl = (0.75 * math.log(0.75 / p[0, 0]) + 0.25 * math.log(0.25 / p[0, 1]) + math.log(1 / p[1, 1])) / 2
    assert float(H.kl_to_targets(logits, w)) == pytest.approx(float(expected_kl), rel=1e-5)


# -- CRDPLL -------------------------------------------------------------------------------------------------
def test_crdpll_lambda_ramps_linearly_to_lam_at_half_the_run():
    assert [H.consistency_weight(t, 100) for t in (0, 10, 25, 50, 80)] == pytest.approx([0, 0.2, 0.5, 1, 1])
    assert H.consistency_weight(25, 100, lam=2.0) == pytest.approx(1.0)
    assert H.consistency_weight(75, 100, lam=2.0) == pytest.approx(2.0)


def test_crdpll_loss_and_refresh_on_hand_made_logits(digits_pll):
    algorithm = build("CRDPLL", digits_pll, **TABULAR, steps=100)
    algorithm.curr_iter = 10  # lambda = 0.2
    weak = torch.tensor([[1.0, 2.0, 0.0, -1.0] + [0.0] * 6])
    strong = torch.tensor([[0.0, 3.0, 1.0, 0.0] + [0.0] * 6])
    s = torch.tensor([[1.0, 1.0, 0.0, 0.0] + [0.0] * 6])
    w = torch.tensor([[0.4, 0.6] + [0.0] * 8])
    pw, ps = F.softmax(weak, 1)[0], F.softmax(strong, 1)[0]
    kl = sum(w[0, j] * (math.log(w[0, j]) - math.log(pw[j])) + w[0, j] * (math.log(w[0, j]) - math.log(ps[j]))
             for j in (0, 1))
    nc = -sum(math.log(1.0000001 - pw[j]) for j in range(2, 10))
    assert float(algorithm.loss(weak, strong, s, w)) == pytest.approx(float(0.2 * kl + nc), rel=1e-5)
    refreshed = H.crdpll_confidence(pw[None], ps[None], s)[0]
    geometric = (pw[:2] * ps[:2]).sqrt()
    assert torch.allclose(refreshed[:2], geometric / geometric.sum()) and float(refreshed[2:].sum()) == 0


def test_crdpll_trains_with_confidences_on_candidates(digits_pll):
    algorithm = build("CRDPLL", digits_pll, **IMAGE, steps=40, lr=3e-3)
    losses = train(algorithm, digits_pll, 20, image=True)
    assert all(math.isfinite(v) for v in losses)
    assert_distributions_on(algorithm.confidence, digits_pll.S)
    assert float((algorithm.confidence != algorithm.uniform_confidence()).any(1).float().mean()) > 0.5


def test_crdpll_step_is_the_official_step(digits_pll):
    """The official step written out (forward weak, forward strong, loss, Adam, re-forward both, refresh), against
    CRDPLL's ``LossAlgorithm`` step: same weights, BatchNorm statistics and confidences after 5 steps. The order of
    the forwards matters: each moves the running statistics."""
    algorithm = build("CRDPLL", digits_pll, **IMAGE, steps=40, lr=3e-3)
    official = copy.deepcopy(algorithm)
    for b in digits_pll.batches(5, 64, image=True, seed=3):
        algorithm.update(b)
        net, w = official.network, official.confidence[b.idx]
        lam = H.consistency_weight(official.curr_iter, official.max_steps, 1.0)
        weak, strong = net(b.weak), net(b.strong)
        loss = lam * (H.kl_to_targets(weak, w) + H.kl_to_targets(strong, w)) + H.non_candidate_loss(weak, b.s)
        official.optimizer.zero_grad()
        loss.backward()
        official.optimizer.step()
        with torch.no_grad():
            official.confidence[b.idx] = H.crdpll_confidence(F.softmax(net(b.weak), 1), F.softmax(net(b.strong), 1),
                                                             b.s)
        official.curr_iter += 1
    assert algorithm.curr_iter == 5 and official.curr_iter == 5
    for (name, mine), theirs in zip(algorithm.state_dict().items(), official.state_dict().values()):
        assert torch.equal(mine, theirs), name
    assert not torch.equal(algorithm.confidence, algorithm.uniform_confidence())


# -- ABLE ---------------------------------------------------------------------------------------------------
def direct_ambiguity_loss(features, probs, s, w, temperature):
    """The official ConLoss written out with loops over (row, candidate) pairs and anchors (base temperature 0.07)."""
    size = len(s)
    pred = [int(torch.argmax(probs[j] * s[j])) for j in range(size)]
    weights = torch.zeros(size, size, dtype=torch.float64)
    for i in range(size):
        for c in range(s.shape[1]):
            if s[i, c] == 1:
                members = [j for j in range(size) if pred[j] == c]
                for j in members:
                    weights[i, j] += float(w[i, c]) / len(members)
    total = 0.0
    f = features.double()
    for a in range(2 * size):
        sims = [float(f[a] @ f[b]) / temperature for b in range(2 * size)]
        top = max(sims)
        log_norm = math.log(sum(math.exp(v - top) for b, v in enumerate(sims) if b != a))
        total += -sum(float(weights[a % size, b % size]) * (sims[b] - top - log_norm)
                      for b in range(2 * size) if b != a)
    return (temperature / 0.07) * total / (2 * size)


def test_able_contrastive_loss_equals_a_direct_computation():
    g = torch.Generator().manual_seed(3)
    features = F.normalize(torch.randn(8, 5, generator=g), dim=1)
    probs = F.softmax(torch.randn(4, 3, generator=g), 1)
    s = torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    w = torch.tensor([[0.3, 0.7, 0.0], [0.0, 0.4, 0.6], [0.5, 0.0, 0.5], [0.2, 0.3, 0.5]])
    for temperature in (0.07, 0.5):
        got = H.ambiguity_contrastive_loss(features, probs, s, w, temperature)
        assert float(got) == pytest.approx(direct_ambiguity_loss(features, probs, s, w, temperature), rel=1e-4)


def test_able_trains_with_confidences_on_candidates(digits_pll):
    algorithm = build("ABLE", digits_pll, **IMAGE, feat_dim=32, lr=3e-3)
    losses = train(algorithm, digits_pll, 20, image=True)
    assert all(math.isfinite(v) for v in losses)
    assert_distributions_on(algorithm.confidence, digits_pll.S)
    assert float(torch.tensor(losses[-5:]).mean()) < float(torch.tensor(losses[:5]).mean())


def test_able_compat_weights_positives_by_batch_position(digits_pll):
    """compat: anchor i uses training row i's confidences (the code's slip); fixed: the batch row's own."""
    g = torch.Generator().manual_seed(0)
    confidence = torch.rand(digits_pll.n, 10, generator=g) * digits_pll.S
    confidence = confidence / confidence.sum(1, keepdim=True)
    first_rows, other_rows = torch.arange(64), torch.arange(300, 364)
    losses = {}
    for compat in (True, False):
        algorithm = build("ABLE", digits_pll, **IMAGE, feat_dim=32, compat=compat)
        algorithm.confidence.copy_(confidence)
        assert torch.equal(algorithm.anchor_confidence(other_rows), confidence[first_rows if compat else other_rows])
        for name, rows in (("first", first_rows), ("other", other_rows)):
            model = copy.deepcopy(algorithm)
            losses[compat, name] = model.update(digits_pll.batch(rows, image=True, generator=torch.Generator()))["loss"]
    assert losses[True, "first"] == pytest.approx(losses[False, "first"], rel=1e-6)
    assert abs(losses[True, "other"] - losses[False, "other"]) > 1e-3


# -- DIRK ---------------------------------------------------------------------------------------------------
def test_dirk_rectified_distribution_on_hand_made_probabilities():
    p = torch.tensor([[0.5, 0.2, 0.1, 0.15, 0.05], [0.5, 0.2, 0.1, 0.15, 0.05], [0.5, 0.2, 0.1, 0.15, 0.05]])
    s = torch.tensor([[1.0, 1.0, 0, 0, 0], [1.0, 1, 1, 1, 1], [0, 0, 1.0, 0, 0]])
    # row 0: M = 1/0.7, max p_notS = 0.15/0.3, min p_S = 0.2/0.7 -> a = (0.5/0.7) / (0.5/0.7 + 0.2/0.7) = 5/7
    # row 1: |S| = q -> no non-candidate mass, formula 0 -> a = 1
    # row 2: M = 1/0.1, max p_notS = 0.5/0.9, min p_S = 1 -> a = (5/0.9) / (5/0.9 + 1)
    expected_a = torch.tensor([5 / 7, 1.0, (5 / 0.9) / (5 / 0.9 + 1)])
    assert torch.allclose(H.rectification_weight(p, s), expected_a)
    r = H.rectified_distribution(p, s)
    assert torch.allclose(r.sum(1), torch.ones(3))
    assert torch.allclose((r * s).sum(1), expected_a)
    assert torch.allclose((r * (1 - s)).sum(1), 1 - expected_a, atol=1e-6)
    assert torch.allclose(r[0], torch.tensor([5 / 7 * 5 / 7, 5 / 7 * 2 / 7, 2 / 7 / 3, 2 / 7 / 2, 2 / 7 / 6]))
    assert torch.allclose(r[1], p[1])


def test_dirk_positive_weights_are_a_softmax_over_positives():
    g = torch.Generator().manual_seed(1)
    dists = F.softmax(torch.randn(7, 4, generator=g), 1)
    positives = torch.rand(3, 7, generator=g) > 0.4
    positives[torch.arange(3), torch.arange(3) + 3] = True
    weights = H.distribution_weights(dists, positives, 3, dist_temperature=0.4)
    assert torch.allclose(weights.sum(1), torch.ones(3))
    assert float(weights[torch.arange(3), torch.arange(3)].abs().max()) == 0
    assert float(weights[~positives].abs().max()) == 0
    unit = F.normalize(dists, dim=1)
    i, j, k = 0, 3, int(torch.where(positives[0] & (torch.arange(7) != 0) & (torch.arange(7) != 3))[0][0])
    ratio = math.exp((float(unit[i] @ unit[j]) - float(unit[i] @ unit[k])) / 0.4)
    assert float(weights[i, j] / weights[i, k]) == pytest.approx(ratio, rel=1e-4)


def test_dirk_trains_student_against_an_ema_teacher(digits_pll):
    algorithm = build("DIRK", digits_pll, **IMAGE, feat_dim=32, moco_queue=256, prot_start=6, momentum=0.9,
                      lr=3e-3, batch_size=32)
    pairs = zip(algorithm.pair.key.parameters(), algorithm.pair.query.parameters())
    assert not all(torch.equal(t, s) for t, s in pairs)  # the teacher is initialised on its own, as in the code
    losses = train(algorithm, digits_pll, 11, image=True, batch_size=32)
    assert all(math.isfinite(v) for v in losses)
    filled = algorithm.queue.labels >= 0
    assert int(filled.sum()) == 256  # 11 batches of 32 wrapped around the queue
    assert torch.allclose(algorithm.queue.dists.sum(1), torch.ones(256), atol=1e-5)
    teacher_before = [p.clone() for p in algorithm.pair.key.parameters()]
    batch = digits_pll.batch(torch.arange(32), image=True, generator=torch.Generator().manual_seed(5))
    assert math.isfinite(algorithm.update(batch)["loss"])  # a post-prot_start step
    for before, teacher, student in zip(teacher_before, algorithm.pair.key.parameters(),
                                        algorithm.pair.query.parameters()):
        assert torch.allclose(teacher, 0.9 * before + 0.1 * student, atol=1e-6)
    algorithm.eval()
    with torch.no_grad():
        x = digits_pll.images[:16]
        assert torch.equal(algorithm.predict(x), algorithm.pair.query(x)[0])
        assert not torch.allclose(algorithm.predict(x), algorithm.pair.key(x)[0])


# -- VALEN --------------------------------------------------------------------------------------------------
def test_valen_knn_adjacency_is_row_stochastic_with_self_loops():
    g = torch.Generator().manual_seed(2)
    features = torch.randn(40, 6, generator=g)
    neighbours = H.knn_indices(features, 3, block=7)
    distance = torch.cdist(features.double(), features.double())
    distance.fill_diagonal_(float("inf"))
    assert torch.equal(neighbours, distance.argsort(dim=1, stable=True)[:, :3])
    rows = torch.arange(40)
    adjacency = H.knn_adjacency(neighbours, rows, rows)
    assert torch.allclose(adjacency.sum(1), torch.ones(40))
    assert torch.equal((adjacency > 0).sum(1), torch.full((40,), 4))
    assert torch.allclose(adjacency.diagonal(), torch.full((40,), 0.25))
    assert torch.allclose(adjacency[rows[:, None], neighbours], torch.full((40, 3), 0.25))
    block = torch.tensor([5, 17, 30])
    assert torch.equal(H.knn_adjacency(neighbours, block, block), adjacency[block][:, block])
    with pytest.raises(ConfigError, match="knn"):
        H.knn_indices(features[:3], 3)


@pytest.mark.parametrize("batch_size, collect, graph", [(64, range(10, 21), 21), (50, range(10, 23), 23)])
def test_valen_phases_switch_at_the_documented_iterations(digits_pll, batch_size, collect, graph):
    """n/bs = 9.375 (the code's case) and 12 (an integer: the code skips its graph branch; we build it at 23)."""
    algorithm = build("VALEN", digits_pll, **TABULAR, warm_up=10, batch_size=batch_size)
    phases = [algorithm.phase(t) for t in range(graph + 3)]
    assert phases == (["warm-up"] * 10 + ["collect"] * len(collect) + ["graph"] + ["variational"] * 2)


def test_valen_runs_every_phase_and_the_compat_encoder_stays_frozen(digits_pll):
    results = {}
    for compat in (True, False):
        algorithm = build("VALEN", digits_pll, **TABULAR, warm_up=40, lr=1e-2, compat=compat)
        losses = train(algorithm, digits_pll, 40, image=False)
        algorithm.eval()
        with torch.no_grad():
            accuracy = float((algorithm.predict(digits_pll.x).argmax(1) == digits_pll.y).float().mean())
        algorithm.train()
        assert accuracy > 0.3  # chance is 0.1
        losses += train(algorithm, digits_pll, algorithm.graph_step + 1 - 40, image=False, seed=1)
        assert algorithm.curr_iter == algorithm.graph_step + 1
        encoder = [p.clone() for p in algorithm.encoder.parameters()]
        assert all(torch.equal(e, n) for e, n in zip(encoder, algorithm.network.parameters()))
        losses += train(algorithm, digits_pll, 15, image=False, seed=2)
        assert all(math.isfinite(v) for v in losses)
        assert_distributions_on(algorithm.o_array, digits_pll.S)
        visited = algorithm.d_array.sum(1) > 0
        assert_distributions_on(algorithm.d_array[visited], digits_pll.S[visited])
        assert bool((algorithm.neighbours != torch.arange(digits_pll.n)[:, None]).all())
        results[compat] = any(not torch.equal(e, p) for e, p in zip(encoder, algorithm.encoder.parameters()))
    assert results == {True: False, False: True}


# -- FREDIS -------------------------------------------------------------------------------------------------
def loop_delta(delta, dec, gaps, needed):
    while int((gaps > delta).sum()) < needed:
        delta = delta - dec
    return delta


def test_fredis_lowered_delta_repeats_the_codes_float_subtractions():
    g = torch.Generator().manual_seed(4)
    gaps = torch.rand(50, generator=g, dtype=torch.float64)
    for delta, dec, needed in ((1.0, 0.01, 5), (1.0, 0.003, 30), (0.9, 1e-4, 50), (0.2, 0.05, 1)):
        assert H.lowered_delta(delta, dec, gaps, needed) == loop_delta(delta, dec, gaps, needed)
    lowered = H.lowered_delta(1.0, 0.01, gaps, 80)  # more than the 50 candidates: the code would never stop
    assert lowered < float(gaps.min()) and lowered >= float(gaps.min()) - 0.01


def random_problem(seed, n=200, q=10):
    g = torch.Generator().manual_seed(seed)
    posterior = F.softmax(3 * torch.randn(n, q, generator=g), 1).double()
    candidates = (torch.rand(n, q, generator=g) < 0.4).float()
    return posterior, candidates


def test_fredis_refinement_adds_below_theta_and_removes_above_delta_within_caps():
    posterior, candidates = random_problem(0)
    gap = posterior.max(1, keepdim=True).values - posterior
    torch.manual_seed(0)
    refined, delta = H.refine_candidates(candidates, posterior, theta=0.05, delta=0.6, dec=0.01, change_size=10,
                                         times=2, keep_nonempty=False)
    added, removed = (refined > candidates), (refined < candidates)
    assert bool((gap[added] < 0.05).all()) and 0 < int(added.sum()) <= 10
    assert bool((gap[removed] > delta).all()) and 0 < int(removed.sum()) <= 20
    assert delta <= 0.6
    # uncapped: every entry below theta is added, every candidate above the lowered delta removed
    refined, delta = H.refine_candidates(candidates, posterior, theta=0.05, delta=0.6, dec=0.01, change_size=10_000,
                                         times=2, keep_nonempty=False)
    needed = 2 * int(((gap < 0.05) & (candidates == 0)).sum())
    assert delta == H.lowered_delta(0.6, 0.01, gap[candidates == 1], needed)
    assert torch.equal(refined > candidates, (gap < 0.05) & (candidates == 0))
    assert torch.equal(refined < candidates, (gap > delta) & (candidates == 1))


def test_fredis_refinement_keeps_rows_nonempty_only_when_fixed():
    posterior = torch.tensor([[0.9, 0.05, 0.05], [0.4, 0.35, 0.25]], dtype=torch.float64)
    candidates = torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    kwargs = dict(theta=0.0, delta=0.5, dec=0.01, change_size=100, times=1)  # theta 0: nothing is added
    broken, _ = H.refine_candidates(candidates, posterior, keep_nonempty=False, **kwargs)
    fixed, _ = H.refine_candidates(candidates, posterior, keep_nonempty=True, **kwargs)
    # row 0's candidates both have gap 0.85 > delta: the code's no-op check leaves the row empty
    assert torch.equal(broken, torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]))
    assert torch.equal(fixed, candidates)


@pytest.mark.parametrize("compat", [True, False])
def test_fredis_loss_matches_its_formula(digits_pll, compat):
    """``lam KL(w || p) + alpha (non-candidate loss)``; the non-candidates are the original sets' with compat and
    the refined sets' otherwise (the step-0 refinement has already changed some rows)."""
    algorithm = build("FREDIS", digits_pll, **TABULAR, lam=10.0, alpha=0.5, change_size=50, compat=compat)
    algorithm.update(digits_pll.batch(torch.arange(64)))
    changed = torch.where((algorithm.candidates != digits_pll.S).any(1))[0][:64]
    batch = digits_pll.batch(changed)
    with torch.no_grad():
        logits = algorithm.network(batch.weak)
        w = algorithm.confidence[changed].float()
        s = batch.s if compat else algorithm.candidates[changed]
        expected = 10.0 * H.kl_to_targets(logits, w) + 0.5 * H.non_candidate_loss(logits, s)
        other = 10.0 * H.kl_to_targets(logits, w) + 0.5 * H.non_candidate_loss(
            logits, algorithm.candidates[changed] if compat else batch.s)
    assert len(changed) > 0 and abs(float(expected) - float(other)) > 1e-4
    assert algorithm.update(batch)["loss"] == pytest.approx(float(expected), rel=1e-5)


@pytest.mark.parametrize("compat", [True, False])
def test_fredis_refined_targets_survive_the_per_step_refresh_only_when_fixed(digits_pll, compat):
    algorithm = build("FREDIS", digits_pll, **TABULAR, update_interval=0.5, change_size=50, compat=compat)
    assert algorithm.interval == 4  # int(0.5 * 600 / 64)
    losses = train(algorithm, digits_pll, 9, image=False)  # refinements after steps 0, 4 and 8
    assert all(math.isfinite(v) for v in losses)
    assert torch.allclose(algorithm.confidence.sum(1), torch.ones(digits_pll.n, dtype=torch.float64))
    grown = torch.where(((algorithm.candidates - digits_pll.S) > 0).any(1))[0][:64]
    assert len(grown) > 0
    added = (algorithm.candidates[grown] - digits_pll.S[grown]) > 0
    assert bool((algorithm.confidence[grown][added] > 0).all())  # the refinement's targets include added labels
    algorithm.update(digits_pll.batch(grown))
    confidence = algorithm.confidence[grown].float()
    if compat:  # the refresh uses the original sets: the added labels are gone again
        assert_distributions_on(confidence, digits_pll.S[grown])
    else:
        assert_distributions_on(confidence, algorithm.candidates[grown])
        assert bool((confidence[added] > 0).all())


def test_fredis_is_deterministic_for_a_fixed_seed(digits_pll):
    states = []
    for _ in range(2):
        algorithm = build("FREDIS", digits_pll, **TABULAR, update_interval=0.5, change_size=50, seed=7)
        train(algorithm, digits_pll, 9, image=False)
        states.append((algorithm.candidates.clone(), algorithm.confidence.clone(), algorithm.delta))
    assert torch.equal(states[0][0], states[1][0]) and torch.equal(states[0][1], states[1][1])
    assert states[0][2] == states[1][2]


def test_fredis_rejects_an_update_interval_shorter_than_a_step(digits_pll):
    with pytest.raises(ConfigError, match="update_interval"):
        build("FREDIS", digits_pll, **TABULAR, update_interval=0.05)


def test_missing_hyperparameters_name_the_fix(digits_pll):
    with pytest.raises(ConfigError, match="hparams_for"):
        make_algorithm("DIRK", (1, 8, 8), 10, digits_pll.S, {"lr": 1e-3, "weight_decay": 0, "batch_size": 64},
                       arch="digits_cnn", steps=10)
