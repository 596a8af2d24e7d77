"""Tables 6 and 8 beside the algorithm and hyperparameter registries (plench.catalogue)."""
import numpy as np
import pandas as pd
import pytest

from plench import catalogue as K
from plench.algorithms import ALGORITHMS, display_name
from plench.hparams import Choice, Fixed, LogUniform, Pow2Int, PowChoice, hparams_for, search_space
from shared.errors import DataFormatError
from shared.report import compare_with_paper, reported


@pytest.fixture(scope="module")
def paper6():
    return reported("plench", "table6")


@pytest.fixture(scope="module")
def paper8():
    return reported("plench", "table8")


# ------------------------------------------------------------------------------------------------ Table 6
def test_every_registered_algorithm_is_a_row_and_agrees_but_fredis_tabular(paper6):
    side = K.table6_side_by_side(paper6, K.table6_registry())
    assert set(side["algorithm"]) == {display_name(a) for a in ALGORITHMS} and len(side) == 27
    assert list(side["registry name"]) == list(ALGORITHMS)  # the paper's order is the registry's
    disagree = side[~side["agrees"]]
    assert list(disagree["algorithm"]) == ["FREDIS"]
    assert disagree["differences"].iloc[0] == "tabular: yes (paper: no)"
    assert (side["reference (ours)"] == side["reference (paper)"]).sum() == 27


def test_every_registered_class_cites_a_reference():
    assert all(K.registry_citation(cls) for cls in ALGORITHMS.values())
    assert K.registry_citation(ALGORITHMS["MCL_GCE"]) == "Feng et al., 2020a"  # from its base class MCL


class _Renamed:
    """A stand-in registry class: another group, no tabular support, no docstring citation."""

    display, group, tabular = "PRODEN", "noisy PLL", False


def test_a_registry_paper_mismatch_is_a_difference_not_hidden(paper6):
    registry = {name: cls for name, cls in ALGORITHMS.items() if name != "CAVL"}
    registry["PRODEN"] = _Renamed
    registry["NEW"] = type("NEW", (), {"display": "NEW", "group": "vanilla PLL", "tabular": True,
                                       "__doc__": "NEW (Doe et al., 2030): made up."})
    side = K.table6_side_by_side(paper6, K.table6_registry(registry)).set_index("algorithm")
    assert side.loc["CAVL", "differences"] == "not in the registry" and side.loc["CAVL", "registry name"] == "—"
    assert side.loc["NEW", "differences"] == "not in the paper's Table 6" and side.loc["NEW", "group (paper)"] == "—"
    proden = side.loc["PRODEN", "differences"]
    assert not side.loc["PRODEN", "agrees"]
    assert "group: Deep Noisy PLL Algorithms (paper: Vanilla Deep PLL Algorithms)" in proden
    assert "tabular: no (paper: yes)" in proden and "reference: —" in proden
    assert list(side.index[-1:]) == ["NEW"]  # the registry's extras after the paper's rows

    counts = compare_with_paper(K.table6_numbers(K.table6_registry(registry)), paper6, on=["group", "algorithm"])
    counts = counts.set_index(["group", "metric"])["diff"]
    assert counts[("Vanilla Deep PLL Algorithms", "algorithms")] == -1  # PRODEN moved, CAVL gone, NEW added
    assert counts[("Deep Noisy PLL Algorithms", "algorithms")] == 1


def test_table6_counts_match_the_paper_except_fredis(paper6):
    counts = compare_with_paper(K.table6_numbers(K.table6_registry()), paper6, on=["group", "algorithm"])
    assert len(counts) == 8 and counts["ours"].notna().all()
    nonzero = counts[counts["diff"] != 0]
    assert list(zip(nonzero["group"], nonzero["metric"], nonzero["diff"])) == [
        ("Deep Noisy PLL Algorithms", "tabular_algorithms", 1.0)]


# ------------------------------------------------------------------------------------------------ Table 8
def test_every_registry_hyperparameter_appears_with_its_distribution(paper8):
    side = K.table8_side_by_side(paper8, K.table8_registry()).set_index(["condition", "hparam"])
    for condition, arch in K.GLOBAL_CONDITIONS.items():
        for name, hp in search_space("PRODEN", arch).items():
            assert side.loc[(condition, name), "distribution (ours)"] == hp.distribution.text
    for algorithm in ALGORITHMS:
        for name, hp in search_space(algorithm, "mlp").items():
            if name in ("lr", "batch_size", "weight_decay"):
                continue
            row = side.loc[(display_name(algorithm), name)]
            assert row["distribution (ours)"] == hp.distribution.text and row["default (ours)"] != "—"
    paper = K.table8_paper(paper8)
    assert len(paper) == 56 and all((c, h) in side.index for c, h in zip(paper["condition"], paper["hparam"]))


def test_table8_differences_are_the_codes(paper8):
    side = K.table8_side_by_side(paper8, K.table8_registry(compat=True))
    differing = side[~side["agrees"]]
    both = differing[differing["parameter"] != "—"].set_index(["condition", "hparam"])["differences"]
    assert set(both.index) == {("ResNet", "batch_size"), ("MLP", "batch_size"), ("VALEN", "warm_up"),
                               ("PiCO+", "pure_ratio")}
    assert both[("VALEN", "warm_up")] == "default 1000 (paper: 5000)"
    assert "2^int(Uniform(6,9)) (paper: 2^Uniform(6,9))" in both[("ResNet", "batch_size")]
    extras = differing[differing["parameter"] == "—"]
    assert extras["differences"].str.startswith("only in the registry").all()
    extra_keys = set(zip(extras["condition"], extras["hparam"]))
    assert {("DIRK", "weight"), ("NN", "beta"), ("ALIM", "noise_rate")} <= extra_keys
    paper_side = K.table8_side_by_side(paper8, K.table8_registry(compat=False)).set_index(["condition", "hparam"])
    assert paper_side.loc[("VALEN", "warm_up"), "agrees"]  # compat=False is the paper's default


def test_a_paper_value_missing_from_the_registry_is_shown(paper8):
    registry = K.table8_registry()
    registry = registry[~((registry["condition"] == "LWS") & (registry["hparam"] == "lw_weight"))]
    side = K.table8_side_by_side(paper8, registry).set_index(["condition", "hparam"])
    assert side.loc[("LWS", "lw_weight"), "differences"] == "not in the registry"
    assert side.loc[("LWS", "lw_weight"), "default (ours)"] == "—"


def test_table8_numbers_through_the_comparison(paper8):
    ours = K.table8_numbers(K.table8_registry())
    table = compare_with_paper(ours, K.table8_paper_numbers(paper8), on=["condition", "hparam"])
    assert len(table) == 3 * 56 and table["ours"].notna().all()
    nonzero = table[~np.isclose(table["diff"], 0)].set_index(["condition", "hparam", "metric"])["diff"]
    assert dict(nonzero) == {("ResNet", "batch_size", "high"): -256, ("MLP", "batch_size", "high"): -128,
                             ("VALEN", "warm_up", "default"): -4000}
    lr = table[(table["condition"] == "MLP") & (table["hparam"] == "lr")].set_index("metric")
    assert lr.loc["low", "paper"] == pytest.approx(10 ** -4.5) and lr.loc["high", "ours"] == pytest.approx(10 ** -2.5)
    # a changed paper value is a difference in the comparison, not dropped
    edited = paper8.copy()
    edited.loc[(edited["hparam"] == "knn") & (edited["metric"] == "default"), "value"] = "4"
    table = compare_with_paper(ours, K.table8_paper_numbers(edited), on=["condition", "hparam"])
    knn = table[(table["hparam"] == "knn") & (table["metric"] == "default")]
    assert knn["diff"].iloc[0] == -1


# ------------------------------------------------------------------------------------------------ distributions
@pytest.mark.parametrize("text, expected", [
    ("10^Uniform(-4.5,-2.5)", LogUniform(-4.5, -2.5)),
    ("2^Uniform(6,9)", LogUniform(6, 9, 2)),
    ("RandomChoice([0.5,1,2])", Choice((0.5, 1.0, 2.0))),
    ("0.1^RandomChoice[6,5,4,3,2,1]", PowChoice(0.1, (6, 5, 4, 3, 2, 1))),
    ("0.000001", Fixed(1e-6)),
])
def test_parse_distribution(text, expected):
    assert K.same_distribution(K.parse_distribution(text), expected)
    with pytest.raises(DataFormatError, match="cannot read"):
        K.parse_distribution("Normal(0,1)")


def test_same_distribution_compares_kind_and_values():
    assert K.same_distribution(Choice((1.0, 10.0)), Choice((10, 1), int))  # a set; 1 and 1.0 alike
    assert not K.same_distribution(Choice((1.0, 10.0)), Choice((1.0, 5.0)))
    assert not K.same_distribution(LogUniform(6, 9, 2), Pow2Int(6, 9))  # the paper's 2^U(6,9) is not the code's
    assert not K.same_distribution(LogUniform(-4.5, -2.5), LogUniform(-4.5, -2.0))
    assert K.same_distribution(Fixed((0.95, 0.8)), Fixed((0.95, 0.8)))
    assert not K.same_distribution(Fixed(1), Choice((1,)))


def test_each_distributions_text_reads_back_and_describes_its_draws():
    for algorithm in ALGORITHMS:
        for arch in ("mlp", "resnet32"):
            space = search_space(algorithm, arch)
            draws = [hparams_for(algorithm, arch, hparams_seed=h, trial_seed=1) for h in range(1, 16)]
            for name, hp in space.items():
                dist, values = hp.distribution, [d[name] for d in draws]
                if not isinstance(dist, Pow2Int) and not isinstance(dist.values[0], tuple):
                    assert K.same_distribution(K.parse_distribution(dist.text), dist), dist.text
                if isinstance(dist, LogUniform):
                    assert all(dist.values[0] <= v <= dist.values[1] for v in values)
                else:
                    assert set(values) <= set(dist.values), (algorithm, name)
    assert Pow2Int(6, 9).values == (64, 128, 256)


def test_registry_rows_hold_numbers_where_they_are_numbers():
    registry = K.table8_registry().set_index(["condition", "hparam"])
    assert registry.loc[("ResNet", "batch_size"), ["low", "high"]].tolist() == [64, 256]
    assert np.isnan(registry.loc[("PiCO", "conf_ema_range"), "low"])
    numbers = K.table8_numbers(registry.reset_index())
    assert not ((numbers["condition"] == "PiCO") & (numbers["hparam"] == "conf_ema_range")).any()
    assert isinstance(numbers, pd.DataFrame) and set(numbers["metric"]) == {"default", "low", "high"}


def test_a_search_the_code_replaces_on_plcifar10_is_not_marked_as_agreeing():
    """PiCO+'s pure_ratio: Table 8 states a search; on PLCIFAR10 (the only data PiCO+ runs on) the code fixes it to
    1 - the noise rate, so the row names both values instead of reading "agrees"."""
    side = K.table8_side_by_side(reported("plench", "table8"), K.table8_registry()).set_index(["condition", "hparam"])
    row = side.loc[("PiCO+", "pure_ratio")]
    assert not row["agrees"]
    assert "0.99868 on PLCIFAR10_Aggregate" in row["differences"] and "0.82444 on PLCIFAR10_Vaguest" in row["differences"]
    assert side.loc[("POP", "warm_up"), "agrees"]  # a search that runs as stated still agrees


def test_every_draw_is_what_the_registry_drew_before_it_described_itself():
    """Golden digest of 1,944 runs' hyperparameters (every algorithm, both networks, no dataset and both PLCIFAR10
    sets, compat on and off, hparams seeds 0-5), computed with plench/hparams.py as it was before its
    distributions became objects (commit 4ca447f). A change here changes every sweep's runs: update the digest only
    on purpose."""
    import hashlib
    import json

    rows = [[algorithm, arch, dataset, compat, h,
             {k: repr(v) for k, v in sorted(hparams_for(algorithm, arch, hparams_seed=h, trial_seed=1,
                                                       dataset=dataset, compat=compat).items())}]
            for algorithm in ALGORITHMS for arch in ("mlp", "resnet32")
            for dataset in (None, "PLCIFAR10_Aggregate", "PLCIFAR10_Vaguest") for compat in (True, False)
            for h in range(6)]
    assert len(rows) == 1944
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()
    assert digest == "165742271e07f0e1b96f4b1fc5de9a41ede57188d11f61b86954be7d5a18fe0a"
