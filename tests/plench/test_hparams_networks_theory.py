"""Table 8's registry, the networks, and the Monte-Carlo theory helpers."""
import numpy as np
import pytest
import torch

from plench.algorithms import ALGORITHMS, TABLE6_ORDER, display_name
from plench.hparams import KNOWN_NOISE_RATES, hparams_for
from plench.networks import featurizer, projection_head
from plench.theory import classifier, coverage_constant, scores, synthetic_problem
from shared.errors import ConfigError
from shared.seeding import seed_hash


def test_registry_holds_the_27_algorithms_of_table6_in_order():
    assert tuple(ALGORITHMS) == TABLE6_ORDER and len(ALGORITHMS) == 27
    assert display_name("PiCO_plus") == "PiCO+" and display_name("ABS_MAE") == "ABS-MAE"
    groups = [ALGORITHMS[a].group for a in TABLE6_ORDER]
    assert groups.count("vanilla PLL") == 11 and groups.count("vanilla CLL") == 8
    assert groups.count("holistic PLL") == 5 and groups.count("noisy PLL") == 3


def test_seed_hash_is_domainbeds_md5_of_the_argument_tuple():
    import hashlib
    assert seed_hash(0, 1) == int(hashlib.md5(b"(0, 1)").hexdigest(), 16) % 2**31
    assert seed_hash("lr") != seed_hash("lr", 0)


def test_defaults_are_table8s():
    assert hparams_for("PRODEN", "resnet32") == {"lr": 1e-3, "batch_size": 256, "weight_decay": 1e-5}
    assert hparams_for("PRODEN", "mlp")["batch_size"] == 128
    assert hparams_for("POP", "mlp")["rollWindow"] == 5 and hparams_for("LWS", "mlp")["lw_weight"] == 2
    assert hparams_for("VALEN", "mlp")["warm_up"] == 1000  # the code's default; the paper's is 5000
    assert hparams_for("VALEN", "mlp", compat=False)["warm_up"] == 5000
    assert hparams_for("ALIM", "resnet32", dataset="PLCIFAR10_Vaguest")["noise_rate"] == KNOWN_NOISE_RATES["PLCIFAR10_Vaguest"]
    assert hparams_for("PiCO_plus", "resnet32", dataset="PLCIFAR10_Aggregate", hparams_seed=3)["pure_ratio"] == pytest.approx(1 - 0.00132)


def test_random_draws_are_seeded_per_name_and_follow_the_codes_grids():
    draws = [hparams_for("POP", "resnet32", hparams_seed=h, trial_seed=0) for h in range(1, 200)]
    assert {d["batch_size"] for d in draws} == {64, 128, 256}  # 2 ** int(U(6, 9)): never 512
    assert all(10 ** -4.5 <= d["lr"] <= 10 ** -2.5 and 1e-6 <= d["weight_decay"] <= 1e-3 for d in draws)
    assert {d["rollWindow"] for d in draws} == {3, 4, 5, 6, 7}
    # paired configurations: the same (hparams_seed, trial_seed) gives every algorithm the same lr / wd / batch size
    a, b = hparams_for("PRODEN", "mlp", hparams_seed=5, trial_seed=2), hparams_for("CC", "mlp", hparams_seed=5, trial_seed=2)
    assert a == b and a != hparams_for("PRODEN", "mlp", hparams_seed=5, trial_seed=3)
    expected = 10 ** np.random.RandomState(seed_hash(seed_hash(5, 2), "lr")).uniform(-4.5, -2.5)
    assert a["lr"] == expected
    with pytest.raises(ConfigError, match="unknown algorithm 'PRODEM'"):
        hparams_for("PRODEM", "mlp")


@pytest.mark.parametrize("arch, shape, width, params", [("mlp", (64,), 500, 32_500), ("resnet32", (3, 32, 32), 64, None),
                                                        ("densenet_bc", (3, 32, 32), None, None), ("digits_cnn", (1, 8, 8), 64, None)])
def test_featurizers(arch, shape, width, params):
    f = featurizer(arch, shape)
    out = f(torch.zeros(3, *shape))
    assert out.shape == (3, f.n_outputs) and (width is None or f.n_outputs == width)
    if params:
        assert sum(p.numel() for p in f.parameters()) == params
    if arch == "resnet32":  # ~0.46M parameters with the linear head (the official code's ResNet-32, as in the paper's Appendix)
        assert 0.45e6 < sum(p.numel() for p in f.parameters()) + 64 * 10 + 10 < 0.47e6
    with pytest.raises(ConfigError, match="unknown network"):
        featurizer("lenet", shape)
    assert projection_head(f.n_outputs, 32)(out).shape == (3, 32)


def test_eq8_recovers_accuracy_and_aa_is_unbiased_only_when_calibrated():
    problem = synthetic_problem(20_000, 10, generator="uss", seed=0)
    assert problem.c == pytest.approx(coverage_constant("uss", 10)) == pytest.approx(255 / 511)
    bayes = scores(problem, classifier(problem))
    assert abs(bayes["acc_from_cr"] - bayes["acc"]) < 3 * np.hypot(bayes["cr_se"] / (1 - problem.c), bayes["acc_se"])
    assert abs(bayes["aa"] - bayes["acc"]) < 3 * bayes["acc_se"]
    sharp = scores(problem, classifier(problem, power=3))
    assert sharp["acc"] == bayes["acc"] and sharp["aa"] > bayes["acc"] + 0.05  # same predictions, over-confident
    worse = scores(problem, classifier(problem, redirect=0.3))
    assert worse["acc"] < bayes["acc"] and worse["cr"] < bayes["cr"]  # Theorem 1: CR orders like accuracy


def test_fps_problem_has_the_flip_rate_as_coverage_constant():
    problem = synthetic_problem(5_000, 10, generator="fps", p=0.3, seed=1)
    wrong = problem.S.astype(bool) & ~np.eye(10, dtype=bool)[problem.y]
    assert problem.c == 0.3 and wrong.sum() / (9 * len(problem.y)) == pytest.approx(0.3, abs=0.01)
    with pytest.raises(ConfigError, match="unknown candidate generator"):
        synthetic_problem(10, generator="ccn")
