import json

import numpy as np
import pytest

from ciln.benchmark import Benchmark
from ciln.release import read_release, write_release
from shared.datasets.writers import write_lfs_pointer
from shared.errors import ConfigError, DataFormatError, DataNotFoundError


def toy(split="nlt"):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 20)
    clean = rng.dirichlet(np.ones(3), size=(2, 20)).astype(np.float32)
    probs = {("fog", 1): rng.dirichlet(np.ones(3), size=(2, 20)).astype(np.float32),
             ("fog", 5): rng.dirichlet(np.ones(3), size=(2, 20)).astype(np.float32)}
    return Benchmark("mnist32rgb", "cifar10", ("a", "b", "c"), split, ["v1", "v0"], y, clean, probs,
                     {"v1": 0.9, "v0": 0.8}, {"nlt": 20}, "test data")


def test_round_trip_keeps_everything(tmp_path):
    bench, test = toy(), toy("test")
    for split in (bench, test):
        split.corruption_options["frost"] = {"texture_scale": 0.2}
    write_release(bench, tmp_path, label_seed=3)
    write_release(test, tmp_path)  # a second split joins the same release
    back = read_release(tmp_path)
    assert back.voters == ["v1", "v0"] and back.classes == ("a", "b", "c") and back.dataset == "mnist32rgb"
    assert np.array_equal(back.y, bench.y) and np.allclose(back.clean_probs, bench.clean_probs)
    assert all(np.allclose(back.probs[k], bench.probs[k]) for k in bench.probs)
    assert back.noise_rate(("fog", 5)) == bench.noise_rate(("fog", 5))
    saved = np.load(tmp_path / "settings" / "fog_sev5" / "noisy_label_train" / "sampled_labels.npy")
    assert np.array_equal(saved, bench.sampled_labels(("fog", 5), 3))
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert set(manifest["splits"]) == {"noisy_label_train", "test"} and manifest["format_version"] == 1
    assert read_release(tmp_path, "test").split == "test"
    assert back.corruption_options == {"frost": {"texture_scale": 0.2}}  # how the release was corrupted


def test_reads_the_authors_layout_without_manifest_or_clean_outputs(tmp_path):
    folder = tmp_path / "settings" / "contrast_sev5" / "noisy_label_train"
    folder.mkdir(parents=True)
    np.save(folder / "labels.npy", np.array([0, 1, 1]))
    for voter in ("resnet20", "clip"):
        np.save(folder / f"softmax_{voter}.npy", np.eye(10)[[0, 1, 2]])
    with pytest.raises(DataFormatError, match="pass dataset="):
        read_release(tmp_path)
    bench = read_release(tmp_path, dataset="cifar10")
    assert bench.voters == ["clip", "resnet20"] and bench.noise_rate(("contrast", 5)) == pytest.approx(1 / 3)
    with pytest.raises(ConfigError, match="no voter outputs on clean inputs"):
        bench.clean_start_mask()


def test_bad_releases_are_clear(tmp_path):
    with pytest.raises(DataNotFoundError, match="(?s)a CILN release not found.*settings"):
        read_release(tmp_path)
    folder = tmp_path / "settings" / "fog_sev1" / "noisy_label_train"
    folder.mkdir(parents=True)
    np.save(folder / "labels.npy", np.array([0, 1]))
    np.save(folder / "softmax_a.npy", np.ones((3, 10)))
    with pytest.raises(DataFormatError, match="must be \\(rows, classes\\) for 2 rows"):
        read_release(tmp_path, dataset="cifar10")
    write_lfs_pointer(folder / "softmax_a.npy", np.ones((2, 10)).tobytes())  # cloned from the Hub without git-lfs
    with pytest.raises(DataFormatError, match=r"softmax_a\.npy is a git-LFS pointer"):
        read_release(tmp_path, dataset="cifar10")
    np.save(folder / "softmax_a.npy", np.array([None, {}], dtype=object), allow_pickle=True)
    with pytest.raises(DataFormatError, match="pickles are refused"):
        read_release(tmp_path, dataset="cifar10")
