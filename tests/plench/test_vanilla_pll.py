"""The 11 vanilla PLL algorithms: training on digits, loss formulas on hand-made tensors, and the compat quirks."""
import math

import pytest
import torch
import torch.nn.functional as F

import plench.algorithms.vanilla_pll as vanilla
from plench.algorithms import ALGORITHMS, make_algorithm
from plench.hparams import hparams_for

NAMES = ["PRODEN", "CAVL", "POP", "ABS_MAE", "ABS_GCE", "CC", "EXP", "MCL_GCE", "MCL_MSE", "LWS", "IDGP"]
STEPS = 60


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def build(data, name, *, compat=True, steps=STEPS, **overrides):
    """``name`` on the digits problem with the default hparams, batch 64 and lr 3e-3 (decisive in a few dozen steps)."""
    hparams = {**hparams_for(name, "mlp"), "batch_size": 64, "lr": 3e-3, **overrides}
    torch.manual_seed(0)
    return make_algorithm(name, (64,), data.q, data.S, hparams, arch="mlp", steps=steps, compat=compat)


def tiny(name, q, *, compat=True, train_S=None, **overrides):
    """A small instance whose loss / refresh are applied to hand-made tensors."""
    hparams = {**hparams_for(name, "mlp"), **overrides}
    train_S = torch.ones(4, q) if train_S is None else train_S
    torch.manual_seed(0)
    return make_algorithm(name, (3,), q, train_S, hparams, arch="mlp", steps=10, compat=compat)


def train(algorithm, data, steps=STEPS):
    """Losses of ``steps`` updates and the boolean mask (n,) of the rows visited."""
    visited = torch.zeros(data.n, dtype=torch.bool)
    losses = []
    for batch in data.batches(steps, 64):
        losses.append(algorithm.update(batch)["loss"])
        visited[batch.idx] = True
    return losses, visited


def accuracy(algorithm, data):
    with torch.no_grad():
        return (algorithm.predict(data.x).argmax(1) == data.y).float().mean().item()


def mean(values):
    return sum(values) / len(values)


def test_registry_names_displays_and_group():
    displays = {name: ALGORITHMS[name].display for name in NAMES}
    assert displays == {"PRODEN": "PRODEN", "CAVL": "CAVL", "POP": "POP", "ABS_MAE": "ABS-MAE", "ABS_GCE": "ABS-GCE",
                        "CC": "CC", "EXP": "EXP", "MCL_GCE": "MCL-GCE", "MCL_MSE": "MCL-MSE", "LWS": "LWS",
                        "IDGP": "IDGP"}
    assert {ALGORITHMS[name].group for name in NAMES} == {"vanilla PLL"}


# -- training on digits ------------------------------------------------------------------------------------
@pytest.mark.parametrize("compat", [True, False], ids=["compat", "fixed"])
@pytest.mark.parametrize("name", NAMES)
def test_training_lowers_the_loss_learns_and_is_deterministic(digits_pll, name, compat):
    algorithm = build(digits_pll, name, compat=compat)
    losses, _ = train(algorithm, digits_pll)
    assert all(math.isfinite(v) for v in losses)
    assert mean(losses[-10:]) < mean(losses[:10])
    assert accuracy(algorithm, digits_pll) > 0.6  # chance is 0.1
    again, _ = train(build(digits_pll, name, compat=compat), digits_pll)
    assert again == losses


@pytest.mark.parametrize("name", ["PRODEN", "POP"])
def test_proden_confidences_are_distributions_on_the_candidates(digits_pll, name):
    algorithm = build(digits_pll, name)
    _, visited = train(algorithm, digits_pll)
    w, S = algorithm.confidence, digits_pll.S
    torch.testing.assert_close(w.sum(1), torch.ones(digits_pll.n))
    assert (w[S == 0] == 0).all()
    assert not torch.equal(w[visited], algorithm.uniform_confidence()[visited])


def test_cavl_targets_are_one_hot_float64_and_inside_s_only_when_fixed(digits_pll):
    outside = {}
    for compat in (True, False):
        algorithm = build(digits_pll, "CAVL", compat=compat)
        _, visited = train(algorithm, digits_pll, steps=10)
        w = algorithm.confidence[visited]
        assert w.dtype == torch.float64
        assert ((w == 0) | (w == 1)).all() and (w.sum(1) == 1).all()
        outside[compat] = int((w * (1 - digits_pll.S[visited])).sum())
    # early on some rows have only negative candidate logits; the code's argmax then picks a non-candidate
    assert outside[True] > 0 and outside[False] == 0


def test_lws_confidences_start_uniform_on_all_labels_and_renormalise_inside_and_outside_s(digits_pll):
    algorithm = build(digits_pll, "LWS")
    torch.testing.assert_close(algorithm.confidence, torch.full((digits_pll.n, 10), 0.1))
    _, visited = train(algorithm, digits_pll)
    w, S = algorithm.confidence[visited], digits_pll.S[visited]
    inside, outside = (w * S).sum(1), (w * (1 - S)).sum(1)
    # each half is p renormalised with 1e-8 added to every entry before the row sum (as in the code): a half
    # sums to ~1 unless its probability mass is down to ~q * 1e-8; trained rows lose their outside half that way
    assert ((inside > 0.99) & (inside <= 1 + 1e-6)).all()
    assert ((outside >= 0) & (outside <= 1 + 1e-6)).all() and outside.max() > 0.99 and outside.min() < 0.5


# -- formulas on hand-made tensors -------------------------------------------------------------------------
LOGITS = torch.tensor([[0.3, -1.2, 2.0, 0.1], [1.5, 0.2, -0.4, -2.0], [0.0, 0.7, 0.7, -0.3]])
S = torch.tensor([[1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])


def test_abs_mae_is_the_mean_candidate_average_of_2_minus_2p():
    p = F.softmax(LOGITS, 1)
    expected = mean([sum(2 - 2 * p[i, j] for j in range(4) if S[i, j]) / S[i].sum() for i in range(3)])
    torch.testing.assert_close(tiny("ABS_MAE", 4).loss(LOGITS, S, None), expected)


def test_abs_gce_is_the_mean_candidate_average_of_gce():
    p = F.softmax(LOGITS, 1)
    expected = mean([sum((1 - p[i, j] ** 0.7) / 0.7 for j in range(4) if S[i, j]) / S[i].sum() for i in range(3)])
    torch.testing.assert_close(tiny("ABS_GCE", 4).loss(LOGITS, S, None), expected)
    # uniform outputs, |S| = 2 of 4: (1 - 0.25^0.7) / 0.7
    value = tiny("ABS_GCE", 4).loss(torch.zeros(1, 4), torch.tensor([[1.0, 1.0, 0.0, 0.0]]), None)
    assert value.item() == pytest.approx((1 - 0.25 ** 0.7) / 0.7)


def test_cc_is_minus_log_candidate_mass():
    cc = tiny("CC", 4)
    assert cc.loss(torch.zeros(1, 4), torch.tensor([[1.0, 1.0, 0.0, 0.0]]), None).item() == pytest.approx(math.log(2))
    expected = (torch.logsumexp(LOGITS, 1) - torch.logsumexp(LOGITS.masked_fill(S == 0, -math.inf), 1)).mean()
    torch.testing.assert_close(cc.loss(LOGITS, S, None), expected)


@pytest.mark.parametrize("compat", [True, False])
def test_exp_weight_and_loss_on_uniform_outputs(compat):
    exp = tiny("EXP", 4, compat=compat)
    s = torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    torch.testing.assert_close(exp.row_weight(s), torch.tensor([3 / 2, 1.0, 3.0]))
    expected = mean([1.5 * math.exp(-0.5), math.exp(-0.25), 3.0 * math.exp(-0.75)])
    assert exp.loss(torch.zeros(3, 4), s, None).item() == pytest.approx(expected)


def test_exp_full_candidate_set_is_nan_in_compat_and_ignored_when_fixed():
    s = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    results = {}
    for compat in (True, False):
        logits = LOGITS[:2].clone().requires_grad_(True)
        loss = tiny("EXP", 4, compat=compat).loss(logits, s, None)
        loss.backward()
        results[compat] = loss, logits.grad
    loss, grad = results[True]
    assert not math.isfinite(loss.item()) and torch.isnan(grad).any()
    loss, grad = results[False]
    p = F.softmax(LOGITS[:2].detach(), 1)
    assert loss.item() == pytest.approx(1.5 * math.exp(-(p[0, 0] + p[0, 1]).item()) / 2)
    assert torch.isfinite(grad).all() and (grad[1] == 0).all()


def per_label(kind, p, k):
    """l(p, k) straight from its definition."""
    if kind == "MCL_GCE":
        return (1 - p[k] ** 0.7) / 0.7
    return sum((p[j] - (1.0 if j == k else 0.0)) ** 2 for j in range(len(p)))


@pytest.mark.parametrize("compat", [True, False], ids=["plench", "feng2020"])
@pytest.mark.parametrize("kind", ["MCL_GCE", "MCL_MSE"])
def test_mcl_matches_its_estimator(kind, compat):
    logits, s = LOGITS[:2], S[:2]  # d = 1 and d = 2 non-candidates
    p, q, rows = F.softmax(logits, 1), 4, []
    for i in range(2):
        d = q - s[i].sum().item()
        candidate = sum(per_label(kind, p[i], k) for k in range(q) if s[i, k])
        noncandidate = sum(per_label(kind, p[i], k) for k in range(q) if not s[i, k])
        rows.append(candidate - (q - d - 1) / (d * noncandidate + 1e-20) if compat
                    else candidate - (q - d - 1) / d * noncandidate)
    torch.testing.assert_close(tiny(kind, q, compat=compat).loss(logits, s, None), mean(rows))


@pytest.mark.parametrize("kind", ["MCL_GCE", "MCL_MSE"])
def test_mcl_plench_form_is_unbounded_below_for_one_noncandidate_and_feng_is_bounded(kind):
    s = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # d = 1: the single non-candidate is label 3
    max_loss = 1 / 0.7 if kind == "MCL_GCE" else 2.0
    plench, feng = tiny(kind, 4, compat=True), tiny(kind, 4, compat=False)
    pushes = [torch.tensor([[0.0, 0.0, 0.0, t]]) for t in (0.0, 4.0, 8.0, 20.0)]
    plench_values = [plench.loss(z, s, None).item() for z in pushes]
    feng_values = [feng.loss(z, s, None).item() for z in pushes]
    # driving the non-candidate's probability to 1 (its loss to 0) is rewarded without bound
    assert plench_values == sorted(plench_values, reverse=True) and plench_values[-1] < -1e6
    assert min(feng_values) >= -(4 - 1 - 1) * max_loss


@pytest.mark.parametrize("kind", ["MCL_GCE", "MCL_MSE"])
def test_mcl_fixed_form_drops_rows_without_noncandidates(kind):
    s = torch.tensor([[1.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    feng = tiny(kind, 4, compat=False)
    torch.testing.assert_close(feng.loss(LOGITS[:2], s, None), feng.loss(LOGITS[:1], s[:1], None) / 2)
    assert tiny(kind, 4, compat=True).loss(LOGITS[:2], s, None).item() < -1e19  # (q-1)/1e-20 in the code


def test_lws_loss_and_refresh_by_hand():
    lws = tiny("LWS", 4)
    s = torch.tensor([[1.0, 1.0, 0.0, 0.0]])
    w = torch.full((1, 4), 0.25)
    # sigmoid(0) = 1/2 everywhere: (1/2)(1/4)(|S| + lw_weight (q - |S|)) with lw_weight = 2
    assert lws.loss(torch.zeros(1, 4), s, w).item() == pytest.approx(0.125 * (2 + 2 * 2))
    z = torch.tensor([[1.0, -0.5, 0.2, 2.0]])
    expected = 0.25 * (torch.sigmoid(-z[0, :2]).sum() + 2 * torch.sigmoid(z[0, 2:]).sum())
    torch.testing.assert_close(lws.loss(z, s, w), expected)
    refreshed = lws.refresh(LOGITS, S, None)
    p = F.softmax(LOGITS, 1)
    inside, outside = p * S, p * (1 - S)
    torch.testing.assert_close(refreshed, inside / inside.sum(1, keepdim=True) + outside / outside.sum(1, keepdim=True))
    torch.testing.assert_close(refreshed.sum(1), torch.tensor([2.0, 2.0, 2.0]))
    torch.testing.assert_close(lws.refresh(LOGITS[:1], torch.ones(1, 4), None).sum(1), torch.tensor([1.0]))


@pytest.mark.parametrize("compat", [True, False])
def test_cavl_one_hot_at_the_largest_class_activation_value(compat):
    cavl = tiny("CAVL", 4, compat=compat)
    s = torch.tensor([[1.0, 0.0, 1.0, 1.0], [1.0, 0.0, 1.0, 1.0]])
    z = torch.tensor([[0.5, 3.0, -2.0, 1.5],    # cav = (0.25, -, -6, 0.75): label 3
                      [-1.0, 2.0, -0.5, -3.0]])  # cav = (-2, -, -0.75, -12): all candidates negative
    w = torch.zeros(2, 4, dtype=torch.float64)
    expected_second = 1 if compat else 2  # the code's argmax lands on the non-candidate's cav of 0
    expected = F.one_hot(torch.tensor([3, expected_second]), 4).double()
    assert torch.equal(cavl.refresh(z, s, w), expected)


# -- POP -------------------------------------------------------------------------------------------------
def test_pop_purifies_only_after_warm_up_and_keeps_a_candidate_per_row(digits_pll):
    pop = build(digits_pll, "POP", warm_up=2, rollWindow=2, theta=0.2)
    assert pop.steps_per_epoch == 600 // 64
    S = digits_pll.S
    batches = list(digits_pll.batches(2 * pop.steps_per_epoch + 1, 64))
    for batch in batches[:-1]:  # epoch ends at iterations 0 and 9: recorded, not purified
        pop.update(batch)
        assert torch.equal(pop.confidence > 0, S > 0)
    pop.update(batches[-1])  # iteration 18 = warm_up * steps_per_epoch
    support = pop.confidence > 0
    assert (support <= (S > 0)).all() and support.any(1).all()
    assert int((S > 0).sum() - support.sum()) > 100
    torch.testing.assert_close(pop.confidence.sum(1), torch.ones(digits_pll.n))
    # slot 0 = epoch 2 % rollWindow: overwritten at iteration 18 with the confidences before purification
    assert torch.equal(pop.snapshots[0] > 0, S > 0) and not torch.equal(pop.snapshots[0], pop.snapshots[1])


def test_pop_restarts_from_the_original_sets_and_raises_theta_when_nothing_changes():
    train_S = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    pop = tiny("POP", 4, train_S=train_S, warm_up=1, rollWindow=2, theta=0.2, inc=0.5, batch_size=64)
    assert pop.steps_per_epoch == 1

    def purify_with(table, iteration):
        pop.confidence = torch.tensor(table)
        pop.snapshots[:] = pop.confidence
        pop.curr_iter = iteration
        pop.record_and_purify()

    purify_with([[0.6, 0.35, 0.05, 0.0], [0.5, 0.5, 0.0, 0.0]], 1)  # label 2 of row 0: 0.05/0.6 < 0.2
    torch.testing.assert_close(pop.confidence[0], torch.tensor([0.6, 0.35, 0.0, 0.0]) / 0.95)
    assert pop.theta == 0.2  # one entry changed: above 1e-4 * n * q
    purify_with([[0.4, 0.3, 0.3, 0.0], [0.5, 0.5, 0.0, 0.0]], 2)  # label 2 is back above theta
    torch.testing.assert_close(pop.confidence[0], torch.tensor([0.4, 0.3, 0.3, 0.0]))
    assert pop.theta == pytest.approx(0.3)


# -- IDGP ------------------------------------------------------------------------------------------------
def test_idgp_trains_both_phases_with_valid_states(digits_pll, monkeypatch):
    algorithm = build(digits_pll, "IDGP", warm_up_epoch=1)
    assert algorithm.warm_up_steps == pytest.approx(600 / 64)  # not rounded: warm-up is iterations 0..9
    calls = []
    flip = vanilla.idgp_flip_weight
    monkeypatch.setattr(vanilla, "idgp_flip_weight", lambda *a: calls.append(algorithm.curr_iter) or flip(*a))
    losses, visited = train(algorithm, digits_pll)
    assert calls == list(range(10, STEPS))
    assert mean(losses[-10:]) < mean(losses[10:20])  # the post-warm-up loss L_F falls
    assert accuracy(algorithm, digits_pll) > 0.6
    d, b, S = algorithm.d[visited], algorithm.b[visited], digits_pll.S[visited].double()
    assert d.dtype == b.dtype == torch.float64
    torch.testing.assert_close(d.sum(1), torch.ones(len(d), dtype=torch.float64))
    assert (d[S == 0] == 0).all() and (b[S == 0] == 0).all() and ((b >= 0) & (b <= 1)).all()


def test_idgp_predicts_with_f():
    algorithm = tiny("IDGP", 4)
    x = torch.randn(5, 3)
    with torch.no_grad():
        torch.testing.assert_close(algorithm.predict(x), algorithm.network(x))
        assert not torch.allclose(algorithm.predict(x), algorithm.g(x))


def test_idgp_flip_weight_and_ramp_by_hand():
    g = torch.tensor([[0.2, 0.5, 0.9, 0.7]])
    s = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    d = torch.tensor([[0.1, 0.3, 0.6, 0.0]])  # top label 2: its flip probability 0.9 becomes 0.1
    # (1 - h)/h over the candidates = (4, 1, 9); the product over S is common to the row and cancels
    torch.testing.assert_close(vanilla.idgp_flip_weight(g, d, s), torch.tensor([[4.0, 1.0, 9.0, 0.0]]) / 14)
    algorithm = tiny("IDGP", 4)  # steps=10: the ramp is int(0.2 * 10) = 2 iterations
    algorithm.curr_iter = 1
    assert algorithm.consistency_weight() == 0.5
    algorithm.curr_iter = 7
    assert algorithm.consistency_weight() == 1.0
