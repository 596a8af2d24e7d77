import numpy as np
import pytest
from sklearn.datasets import load_digits

from ciln.benchmark import Benchmark, tv_table
from ciln.measures import vote_shares
from ciln.references import (
    cifar10h_counts, fallible_rater_votes, pseudo_human_counts, reference_counts, subsample_raters,
)
from shared.cache import ArtifactCache
from shared.datasets import Dataset, Split
from shared.datasets.writers import write_lfs_pointer
from shared.errors import ConfigError, DataFormatError, DataNotFoundError
from shared.profiles import Settings


@pytest.fixture(scope="module")
def digits():
    data = load_digits()
    order = np.random.default_rng(0).permutation(len(data.target))  # the file is ordered by writer: shuffle
    X = (data.images[order] * 16).clip(0, 255).astype(np.uint8)
    y = data.target[order].astype(np.int64)
    return Dataset("digits8", Split(X[:1500], y[:1500]), Split(X[1500:], y[1500:]), tuple("0123456789"), "image", "test")


def test_cifar10h_loader(tmp_path):
    with pytest.raises(DataNotFoundError, match="(?s)CIFAR-10H not found.*cifar10h-counts.npy"):
        cifar10h_counts(tmp_path)
    (tmp_path / "cifar10h").mkdir()
    np.save(tmp_path / "cifar10h" / "cifar10h-counts.npy", np.ones((5, 10), int))
    assert cifar10h_counts(tmp_path).shape == (5, 10)
    np.save(tmp_path / "cifar10h" / "cifar10h-counts.npy", np.ones((5, 3), int))
    with pytest.raises(DataFormatError, match=r"shape \(10000, 10\)"):
        cifar10h_counts(tmp_path)


def test_cifar10h_counts_refuse_the_probabilities_file_and_lfs_pointers(tmp_path):
    counts = np.random.default_rng(0).multinomial(51, np.full(10, 0.1), size=5).astype(np.float64)  # as released
    path = tmp_path / "cifar10h" / "cifar10h-counts.npy"
    path.parent.mkdir()
    np.save(path, counts)
    loaded = cifar10h_counts(tmp_path)
    assert loaded.dtype == np.int64 and (loaded.sum(1) == 51).all()
    np.save(path, counts / counts.sum(1, keepdims=True))  # cifar10h-probs.npy under the counts' name
    with pytest.raises(DataFormatError, match="this is cifar10h-probs.npy"):
        cifar10h_counts(tmp_path)
    write_lfs_pointer(path, counts.tobytes())
    with pytest.raises(DataFormatError, match=r"cifar10h-counts\.npy is a git-LFS pointer.*git lfs pull"):
        cifar10h_counts(tmp_path)


def test_pseudo_humans_err_at_about_the_target(digits, tmp_path):
    counts = pseudo_human_counts(digits, annotators=20, target_error=0.05, cache=ArtifactCache(tmp_path))
    assert counts.shape == (297, 10) and (counts.sum(1) == 20).all()
    error = np.mean(1 - counts[np.arange(297), digits.test.y] / 20)
    assert 0.02 < error < 0.09
    with pytest.raises(ConfigError, match="unknown human reference 'crowd'"):
        reference_counts(Settings(reference="crowd"), digits)
    cfg = Settings(reference="pseudo_human", pseudo_human={"annotators": 20, "target_error": 0.05})
    assert np.array_equal(reference_counts(cfg, digits), pseudo_human_counts(digits, annotators=20, target_error=0.05))


def test_fallible_raters_have_ordered_tiers(digits, tmp_path):
    votes = fallible_rater_votes(digits, tiers={"L": 0.1, "H": 0.45}, n_raters=4, cache=ArtifactCache(tmp_path))
    errors = {t: np.mean(v != digits.test.y[:, None]) for t, v in votes.items()}
    assert votes["L"].shape == (297, 4) and errors["L"] < errors["H"] - 0.15


def test_subsampled_rater_shares():
    votes = np.array([[0, 0, 1, 1, 2], [3, 3, 3, 3, 3]])
    shares = subsample_raters(votes, 4, 4, seed=0)
    assert np.allclose(shares.sum(1), 1) and np.allclose(shares[1], [0, 0, 0, 1])
    assert np.allclose(vote_shares(votes, 4)[0], [0.4, 0.4, 0.2, 0])


def test_tv_table_needs_an_aligned_test_benchmark():
    y = np.array([0, 1, 1, 0])
    probs = np.zeros((2, 4, 2))
    probs[:, np.arange(4), y] = 1
    corrupted = probs.copy()
    corrupted[0] = probs[0, :, ::-1]  # voter 0 is always wrong, voter 1 always right
    bench = Benchmark("toy", "cifar10", ("a", "b"), "test", ["v0", "v1"], y, probs, {("fog", 1): corrupted})
    humans = 9 * np.eye(2)[y] + 1
    table = tv_table(bench, humans, n_votes=2, n_boot=3)
    assert table.loc[0, "noise_rate_test"] == 0.5 and 0 < table.loc[0, "tv"] < table.loc[0, "tv_sym"] + 0.5
    with pytest.raises(ConfigError, match="aligned with the reference"):
        tv_table(bench, humans[:3], n_votes=2, n_boot=3)
