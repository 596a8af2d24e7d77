"""01_benchmark's page: split/voter/floor tables, release summary, Table I vs the paper, per-setting agreement and
the claims, on tiny synthetic benchmarks (no voter is trained)."""
import numpy as np
import pandas as pd
import pytest

from ciln.benchmark import Benchmark
from ciln.pages.benchmark import (Instantiations, benchmark_claims, floor_table, per_setting_long, release_table,
                                  split_table, table1_long, voter_table)
from shared.report import compare_with_paper, reported


def make_bench(domain: str, error: dict, n: int = 40, k: int = 4, voters: int = 3, clean_error: float = 0.05,
               seed: int = 0, dataset: str = "toy") -> Benchmark:
    """One-hot voter outputs: each voter errs on a row with probability ``error[setting]`` (``clean_error`` on
    clean inputs), always to the next class."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % k

    def outputs(p):
        labels = np.where(rng.random((voters, n)) < p, (y + 1) % k, y)
        probs = np.zeros((voters, n, k), np.float32)
        probs[np.arange(voters)[:, None], np.arange(n)[None], labels] = 1
        return probs

    return Benchmark(dataset, domain, tuple(map(str, range(k))), "nlt", [f"v{i}" for i in range(voters)], y,
                     outputs(clean_error), {s: outputs(p) for s, p in error.items()},
                     {f"v{i}": 0.9 for i in range(voters)}, {"clt": n, "nlt": n, "clv": 5, "nlv": 5, "test": 10},
                     "offline stand-in")


@pytest.fixture
def benches():
    return {
        "CIFAR10": make_bench("cifar10", {("fog", 1): 0.1, ("fog", 5): 0.6, ("contrast", 1): 0.2,
                                          ("contrast", 5): 0.7}),
        "MNIST": make_bench("mnist", {("rotate", 1): 0.3, ("rotate", 5): 0.5, ("shot_noise", 1): 0.05,
                                      ("shot_noise", 5): 0.05}, seed=1),
        "Adult": make_bench("adult", {("scaling", 1): 0.2, ("scaling", 5): 0.25}, k=2, voters=5, seed=2),
    }


def summary(rows):
    return pd.DataFrame(rows, columns=["corruption", "severity", "noise_rate", "noise_rate_C"])


def test_small_tables(benches):
    splits = split_table(benches)
    assert list(splits["paper dataset"]) == ["CIFAR10", "MNIST", "Adult"] and splits.loc[0, "NLT"] == 40
    assert splits.loc[0, "ours"] == "toy (offline stand-in)"
    assert len(voter_table(benches)) == 3 + 3 + 5
    floors = floor_table(benches).set_index("paper dataset")
    assert floors.loc["Adult", "voters"] == 5 and 0 <= floors.loc["CIFAR10", "clean-start share"] <= 1


def test_release_table_lists_what_was_dropped():
    released = {"MNIST": pd.DataFrame({"corruption": ["rotate", "shot_noise", "shot_noise"], "severity": [5, 1, 3],
                                       "released": [True, False, False]}),
                "Adult": pd.DataFrame({"corruption": ["scaling"], "severity": [1], "released": [True]})}
    table = release_table(released).set_index("dataset")
    assert table.loc["MNIST", "released"] == 1 and table.loc["MNIST", "settings"] == 3
    assert table.loc["MNIST", "dropped"] == "shot_noise (1), shot_noise (3)" and table.loc["Adult", "dropped"] == "none"


def test_table1_long_matches_the_papers_rows():
    table1 = pd.DataFrame([{"benchmark": n, "voters": 4, "rows_per_setting": 10, "released_settings": 3,
                            "noise_rate_min": 0.1, "noise_rate_max": 0.5} for n in ("CIFAR10", "MNIST", "Adult")])
    long = table1_long(table1, {"CIFAR10": "a", "MNIST": "b", "Adult": "c"})
    compared = compare_with_paper(long, reported("ciln", "table1"), on=["dataset"])
    assert len(compared) == 15 and compared["ours"].notna().all()
    row = compared.set_index(["dataset", "metric"]).loc[("CIFAR10", "noise_rate_max")]
    assert row["paper"] == pytest.approx(0.75) and row["diff"] == pytest.approx(0.5 - 0.75) and row["ours_on"] == "a"


def test_per_setting_long():
    summaries = {"CIFAR10": summary([("fog", 1, 0.1, 0.05), ("fog", 5, 0.5, 0.4)])}
    long = per_setting_long(summaries, {"CIFAR10": "mnist32rgb"})
    assert list(long.columns) == ["dataset", "corruption", "severity", "metric", "value", "ours_on"]
    assert set(long["metric"]) == {"noise_rate"} and long["value"].tolist() == [0.1, 0.5]


def claims_of(summaries, released, table1):
    return {r["claim"]: r for r in benchmark_claims(summaries, released, table1)}


def test_claims_flip_at_their_thresholds():
    table1 = pd.DataFrame({"benchmark": ["CIFAR10", "MNIST", "Adult"], "noise_rate_min": [0.1, 0.1, 0.2],
                           "noise_rate_max": [0.6, 0.7, 0.3]})
    released = {"MNIST": pd.DataFrame({"released": [True, False]})}
    rising4 = summary([(c, s, v, v / 2) for c, lo, hi in (("a", .1, .5), ("b", .1, .5), ("c", .1, .5), ("d", .5, .1))
                       for s, v in ((1, lo), (5, hi))])
    found = claims_of({"CIFAR10": rising4}, released, table1)
    rise = found["Noise rate grows with severity (severity 5 above severity 1) for most corruptions"]
    assert rise["verdict"] == "yes" and rise["detail"] == "3/4 corruptions"  # 75 %: the threshold
    assert found["Clean-start (CILN-C) noise rates are below the standard (CILN-S) ones"]["verdict"] == "yes"
    falling = rising4.copy()
    falling.loc[falling["corruption"] == "c", "noise_rate"] = [0.5, 0.1]  # c now falls: 2 of 4 rise
    found = claims_of({"CIFAR10": falling}, released, table1)
    assert found["Noise rate grows with severity (severity 5 above severity 1) for most corruptions"]["verdict"] == "no"
    equal_c = rising4.copy()
    equal_c.loc[0, "noise_rate_C"] = equal_c.loc[0, "noise_rate"]
    found = claims_of({"CIFAR10": equal_c}, released, table1)
    clean = found["Clean-start (CILN-C) noise rates are below the standard (CILN-S) ones"]
    assert clean["verdict"] == "no" and clean["detail"] == "88% of 8 settings"
    assert found["Some MNIST settings are too mild to release"]["detail"] == "1 of 2 dropped"
    adult = found["Adult's noise-rate range is narrower than both image benchmarks'"]
    assert adult["verdict"] == "yes" and adult["detail"] == "CIFAR10 50.0%, MNIST 60.0%, Adult 10.0%"
    wide_adult = table1.assign(noise_rate_max=[0.6, 0.7, 0.75])
    assert claims_of({"CIFAR10": rising4}, released, wide_adult)[
        "Adult's noise-rate range is narrower than both image benchmarks'"]["verdict"] == "no"


def test_claims_not_run_when_inputs_are_missing():
    table1 = pd.DataFrame({"benchmark": ["CIFAR10"], "noise_rate_min": [0.1], "noise_rate_max": [0.6]})
    only5 = summary([("fog", 5, 0.5, 0.4)])
    found = claims_of({"CIFAR10": only5}, {}, table1)
    rise = "Noise rate grows with severity (severity 5 above severity 1) for most corruptions"
    assert found[rise]["verdict"] == "not run"
    assert found["Some MNIST settings are too mild to release"]["verdict"] == "not run"
    assert found["Adult's noise-rate range is narrower than both image benchmarks'"]["verdict"] == "not run"
    assert found["Clean-start (CILN-C) noise rates are below the standard (CILN-S) ones"]["verdict"] == "yes"


def test_page_on_synthetic_benchmarks(benches, tmp_path):
    page = Instantiations("smoke", out_dir=tmp_path, settings={"write_release": False})
    page.__dict__["benchmarks"] = benches  # instead of training voters
    released = page.released
    assert released["CIFAR10"]["released"].all() and released["Adult"]["released"].all()
    # MNIST: the 5-point rule on the increase over the clean noise rate drops the mild shot noise
    assert not released["MNIST"].set_index(["corruption", "severity"]).loc[("shot_noise", 5), "released"]
    assert page.table1_frame.set_index("benchmark").loc["MNIST", "released_settings"] == 2
    fig = page.figure_noise_rates()
    assert len(fig.axes) == 3
    assert [len(ax.patches) for ax in fig.axes] == [len(b.settings) for b in benches.values()]  # a bar per setting
    assert (tmp_path / "noise_rates.png").exists()
    assert len(page.table1_comparison) == 15
    assert page.per_setting_comparison().data.shape[0] == 45 + 30 + 15  # the repository's settings: interactive
    assert "item" not in page.per_setting_comparison().data.columns
    assert "no release written" in page.write_release()
    page.voters()
    claims = page.claims()
    assert list(claims.columns) == ["claim", "verdict", "detail"] and len(claims) == 4
    assert list(claims["verdict"]) == [r["verdict"] for r in benchmark_claims(page.summaries, released,
                                                                              page.table1_frame)]
    written = pd.read_csv(tmp_path / "comparison.csv")
    assert len(written) == 15 + 90  # Table I and every setting, each once
    assert {"voters.csv", "table1.csv", "settings_mnist.csv", "claims.json"} <= {p.name for p in tmp_path.iterdir()}


def test_table1_numbers_are_formatted_by_kind():
    from ciln.pages.benchmark import _number

    assert _number(22500) == "22,500" and _number(0.0831) == "0.083" and _number(-20700, "+") == "-20,700"
    assert _number(0.0112, "+") == "+0.011" and _number(0.0, "+") == "0"
