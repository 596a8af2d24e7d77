"""04_sorted_profiles' page: label profiles and entropies of a synthetic benchmark, the comparison rows and the
claims' thresholds."""
import numpy as np
import pandas as pd
import pytest

from ciln.benchmark import Benchmark
from ciln.pages.sorted_profiles import entropy_rows, level_profile, profile_claims, top_label
from shared.report import compare_with_paper, reported


def collapsing_bench(n: int = 100, k: int = 10, voters: int = 4) -> Benchmark:
    """Balanced true labels; at severity 1 the voters are right, at 3 and 5 every voter says class 2 on half and
    on all rows."""
    y = np.arange(n) % k

    def onehot(labels):
        probs = np.zeros((voters, n, k), np.float32)
        probs[np.arange(voters)[:, None], np.arange(n)[None], labels] = 1
        return probs

    half = np.where(np.arange(n) < n // 2, 2, y)
    probs = {("rotate", 1): onehot(np.tile(y, (voters, 1))), ("rotate", 3): onehot(np.tile(half, (voters, 1))),
             ("rotate", 5): onehot(np.full((voters, n), 2))}
    return Benchmark("mnist5k", "mnist", tuple(map(str, range(k))), "nlt", [f"v{i}" for i in range(voters)], y,
                     onehot(np.tile(y, (voters, 1))), probs)


def test_level_profile_keeps_figure_4s_levels_and_their_entropies():
    shares, entropy = level_profile(collapsing_bench(), "rotate")
    assert list(shares) == ["clean", "1", "5"] == list(entropy)  # level 3 is not drawn
    assert entropy["clean"] == pytest.approx(np.log2(10)) and entropy["1"] == pytest.approx(np.log2(10))
    assert entropy["5"] == pytest.approx(0.0) and shares["5"][2] == pytest.approx(1.0)
    assert top_label(collapsing_bench(), "rotate") == {"most frequent label at level 5": "2", "share": 1.0}


def test_entropy_rows_compare_with_the_papers_figure4():
    rows = [r for name, c in (("CIFAR10", "pixelate"), ("MNIST", "rotate"))
            for r in entropy_rows(name, c, {"clean": 3.3, "1": 3.2, "5": 2.0}, "stand-in")]
    compared = compare_with_paper(pd.DataFrame(rows), reported("ciln", "fig4"), on=["dataset", "corruption", "level"])
    assert len(compared) == 12 and compared["ours"].notna().sum() == 6  # the other two panels: not run here
    row = compared.set_index(["dataset", "corruption", "level"]).loc[("CIFAR10", "pixelate", "5")]
    assert row["paper"] == pytest.approx(2.678319) and row["diff"] == pytest.approx(2.0 - 2.678319)


def entropies(values: dict) -> pd.DataFrame:
    return pd.DataFrame([r for (name, c), levels in values.items()
                         for r in entropy_rows(name, c, levels, "x")])


def tops(label: str = "2") -> pd.DataFrame:
    return pd.DataFrame([{"dataset": "MNIST", "corruption": "rotate", "most frequent label at level 5": label,
                          "share": 0.2}])


def test_entropy_claim_needs_a_drop_of_005_bits_and_level_1_not_above_clean():
    frame = entropies({("MNIST", "rotate"): {"clean": 3.3, "1": 3.2, "5": 3.14},
                       ("MNIST", "brightness"): {"clean": 3.3, "1": 3.2, "5": 3.16},
                       ("CIFAR10", "pixelate"): {"clean": 3.3, "1": 3.31, "5": 2.0}})
    found = {r["claim"]: r for r in profile_claims(frame, tops())}
    rotate = found["Entropy falls with severity for MNIST rotate (H1 - H5 >= 0.05 bits)"]
    assert rotate["verdict"] == "yes" and rotate["detail"] == "3.300 / 3.200 / 3.140 bits"
    assert found["Entropy falls with severity for MNIST brightness (H1 - H5 >= 0.05 bits)"]["verdict"] == "no"
    assert found["Entropy falls with severity for CIFAR10 pixelate (H1 - H5 >= 0.05 bits)"]["verdict"] == "no"
    assert list(found)[:3] == [f"Entropy falls with severity for {d} (H1 - H5 >= 0.05 bits)"
                               for d in ("CIFAR10 pixelate", "MNIST brightness", "MNIST rotate")]
    attract = found["Rotation pulls MNIST labels towards the digit 2"]
    assert attract["verdict"] == "yes" and attract["detail"] == "most frequent at level 5: 2 (20.0%)"
    assert profile_claims(frame, tops("4"))[-1]["verdict"] == "no"


def test_claims_not_run_without_their_levels_or_panel():
    frame = entropies({("CIFAR10", "pixelate"): {"clean": 3.3, "1": 3.2}})
    found = {r["claim"]: r for r in profile_claims(frame, tops().iloc[:0])}
    assert found["Entropy falls with severity for CIFAR10 pixelate (H1 - H5 >= 0.05 bits)"]["verdict"] == "not run"
    assert found["Rotation pulls MNIST labels towards the digit 2"]["verdict"] == "not run"
