"""02_examples' page: Figure 1's panels from a synthetic benchmark, the examples table, the reproducibility checks
and the claims (no voter is trained, no throughput is measured)."""
import numpy as np
import pandas as pd

from ciln.benchmark import Benchmark
from ciln.pages.examples import examples_claims, examples_frame, figure1, panel_example, reproducibility_checks

STATEMENTS = ("Increasing severity turns correctly labelled inputs into confidently mislabelled ones (every panel has "
              "an example)", "Corruption is reproducible: same seed, same bytes, for any subset of rows",
              "(Engineering) with the same constants, our operators are at least as fast as imagecorruptions on most "
              "corruptions both implement")


def flipping_bench(n: int = 12, k: int = 10, voters: int = 4) -> Benchmark:
    """MNIST-like: every voter right at rotate severity 1; at 3 half of them and at 5 all of them say y + 1,
    except on row 0 where three of four voters stay right (no majority flip there)."""
    y = np.arange(n) % k

    def onehot(labels):
        probs = np.zeros((voters, n, k), np.float32)
        probs[np.arange(voters)[:, None], np.arange(n)[None], labels] = 1
        return probs

    right, wrong = np.tile(y, (voters, 1)), np.tile((y + 1) % k, (voters, 1))
    half = np.where(np.arange(voters)[:, None] < voters // 2, wrong, right)
    five = wrong.copy()
    five[1:, 0] = y[0]
    probs = {("rotate", 1): onehot(right), ("rotate", 3): onehot(half), ("rotate", 5): onehot(five)}
    return Benchmark("mnist5k", "mnist", tuple(map(str, range(k))), "nlt", [f"v{i}" for i in range(voters)], y,
                     onehot(right), probs)


def test_panel_example_takes_a_flipped_row_and_labels_each_severity():
    bench = flipping_bench()
    X = np.random.default_rng(0).integers(0, 256, (12, 28, 28), dtype=np.uint8)
    panel = panel_example(bench, X, "mnist5k", "rotate")
    assert panel["row"] != 0  # row 0 keeps its majority at severity 5
    levels = panel["levels"]
    assert [lv["severity"] for lv in levels] == [1, 3, 5] and levels[0]["right"] and not levels[-1]["right"]
    assert levels[-1]["label"] == str((bench.y[panel["row"]] + 1) % 10) and levels[-1]["agree"] == 4
    assert levels[0]["image"].shape == (28, 28) and not np.array_equal(levels[2]["image"], X[panel["row"]])
    panels = [{"panel": "c", "dataset": "MNIST", **panel}, {"panel": "d", "dataset": "MNIST", **panel}]
    fig = figure1(panels)
    assert len(fig.axes) == 3 * 2
    assert fig.axes[0].get_xaxis().get_label().get_text().endswith("(4/4)")  # severity 1: all voters agree
    table = examples_frame(panels)
    assert table["paper"].tolist() == ["5 → 8", "4 → 9"]
    assert table.loc[0, "ours"] == f"{panel['true']} → {levels[-1]['label']}"


def test_reproducibility_checks_on_tiny_inputs():
    rng = np.random.default_rng(1)
    inputs = {"MNIST": rng.integers(0, 256, (24, 28, 28), dtype=np.uint8)}
    table = reproducibility_checks({"MNIST": "mnist5k"}, inputs, rows=24)
    assert table["corruption"].tolist() == ["spatter", "zigzag", "rotate"]
    assert table["identical on re-run"].all() and table["subset identical"].all()
    assert table["sha256 (first 12)"].str.len().eq(12).all()


def speed_table(ratios):
    return pd.DataFrame({"corruption": [f"c{i}" for i in range(len(ratios))], "speed-up": ratios,
                         "compared": [True] * len(ratios), "note": [""] * len(ratios)})


def test_claims_flip_with_their_inputs():
    examples = pd.DataFrame({"panel": ["a", "b"], "true": ["dog", "bird"], "label at severity 5": ["cat", "frog"],
                             "ours": ["dog → cat", "bird → frog"]})
    checks = pd.DataFrame({"identical on re-run": [True, True], "subset identical": [True, True]})
    found = {r["claim"]: r for r in examples_claims(examples, checks, speed_table([1.5, 2.0, 0.5]))}
    assert [found[s]["verdict"] for s in STATEMENTS] == ["yes", "yes", "yes"]
    assert found[STATEMENTS[0]]["detail"] == "(a) dog → cat; (b) bird → frog"
    assert found[STATEMENTS[1]]["detail"] == "2 checks"

    unflipped = examples.assign(**{"label at severity 5": ["cat", "bird"]})
    broken = checks.assign(**{"subset identical": [True, False]})
    found = {r["claim"]: r for r in examples_claims(unflipped, broken, speed_table([0.9, 2.0, 0.5]))}
    assert [found[s]["verdict"] for s in STATEMENTS] == ["no", "no", "no"]  # 1 of 3 faster: not most


def test_claims_not_run_without_inputs():
    empty = pd.DataFrame(columns=["panel", "true", "label at severity 5", "ours"])
    checks = pd.DataFrame(columns=["identical on re-run", "subset identical"])
    found = {r["claim"]: r for r in examples_claims(empty, checks, None)}
    assert [found[s]["verdict"] for s in STATEMENTS] == ["not run"] * 3
