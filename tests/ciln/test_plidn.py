import numpy as np
import pytest

from ciln import plidn
from ciln.plidn import NoPlidnLabels, labelled_rows, match_rows, plidn_votes, read_release, release_dir
from ciln.rehearsal import plidn_example as example
from ciln.rehearsal import write_plidn_shard as write_shard
from ciln.rehearsal import write_plidn_tier as write_tier
from ciln.splits import gu_five_way_split
from shared.cache import ArtifactCache
from shared.datasets import Dataset, Split
from shared.datasets.writers import write_lfs_pointer
from shared.errors import ConfigError, DataFormatError, DataNotFoundError
from shared.profiles import Settings

pytest.importorskip("tfrecord")  # the real format, written by a third party (ciln.rehearsal's writers use it)
R = 10


@pytest.fixture
def release_data(rng):
    n = 12
    images = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    return images, rng.integers(0, 10, n), rng.integers(0, 10, (n, R))


def test_round_trip_and_cache(tmp_path, release_data):
    images, labels, noisy = release_data
    write_tier(tmp_path / "plidn" / "cifar10" / "low", images, labels, noisy, n_train=9)
    cache = ArtifactCache(tmp_path / "cache")
    release = read_release("L", tmp_path, cache=cache)
    assert release.images.dtype == np.uint8 and np.array_equal(release.images, images)
    assert np.array_equal(release.labels, labels) and np.array_equal(release.noisy_labels, noisy)
    assert release.rater_ids.shape == (12, R) and release.rater_ids[3, 7] == "rater_7"
    assert list(release.split) == ["train"] * 9 + ["valid"] * 3
    read_release("L", tmp_path, cache=cache)
    assert len(list(cache.root.glob("ciln-plidn-release/*/meta.json"))) == 1  # parsed once


def test_match_rows_by_image_bytes(release_data, rng):
    images = release_data[0]
    targets = np.concatenate([images[[5, 0, 9]], rng.integers(0, 256, (2, 32, 32, 3), dtype=np.uint8), images[[5]]])
    assert match_rows(images, targets).tolist() == [5, 0, 9, -1, -1, 5]
    with pytest.raises(ConfigError, match=r"uint8 of shape \(m, 32, 32, 3\)"):
        match_rows(images, targets.astype(np.float32))


def test_missing_release_names_the_folder_and_the_download(tmp_path, release_data):
    with pytest.raises(DataNotFoundError, match="(?s)plidn/cifar10/medium/train-.*"
                                                "gsutil -m cp -r gs://noisy_label_synthetic_datasets/public/cifar10/medium"):
        read_release("M", tmp_path)
    folder = release_dir("L", tmp_path)
    write_tier(folder, *release_data, n_train=9)
    (folder / "train-00001-of-00002").unlink()
    with pytest.raises(DataNotFoundError, match="1 of the 2 train shards"):
        read_release("L", tmp_path, cache=ArtifactCache(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="unknown PL-IDN tier 'low'"):
        release_dir("low")
    write_lfs_pointer(folder / "train-00001-of-00002", b"x" * 5000)
    with pytest.raises(DataFormatError, match=r"train-00001-of-00002 is a git-LFS pointer"):
        read_release("L", tmp_path, cache=ArtifactCache(tmp_path / "cache"))


@pytest.mark.parametrize("damage, message", [
    (lambda raw, at: raw[:at + 3] + bytes([raw[at + 3] ^ 1]) + raw[at + 4:], "record 1 .*length checksum"),
    (lambda raw, at: raw[:at + 40] + bytes([raw[at + 40] ^ 1]) + raw[at + 41:], "record 1 .*data checksum"),
    (lambda raw, at: raw[:at + 100], "record 1 .*truncated record"),
])
def test_corrupt_records_are_named(tmp_path, release_data, damage, message):
    folder = release_dir("H", tmp_path)
    write_tier(folder, *release_data, n_train=9)
    shard = folder / "train-00000-of-00002"
    raw = shard.read_bytes()
    record_1 = int.from_bytes(raw[:8], "little") + 16  # the second record starts after the first
    shard.write_bytes(damage(raw, record_1))
    with pytest.raises(DataFormatError, match=f"train-00000-of-00002, {message}"):
        read_release("H", tmp_path, cache=ArtifactCache(tmp_path / "cache"))


@pytest.mark.parametrize("change, message", [
    ({"drop": ("noisy_labels",)}, "record 0: missing feature 'noisy_labels'"),
    ({"replace": {"image/raw": (bytes(100), "byte")}}, r"record 0: image/raw must be one string of 3072 bytes .* got \[100\]"),
    ({"replace": {"image/class/label": (b"cat", "byte")}}, "record 0: feature 'image/class/label' must be of type int64_list"),
    ({"replace": {"noisy_labels": ([1, 2], "int")}}, "record 0: expected one clean label and one noisy label per rater id"),
])
def test_bad_examples_are_named(tmp_path, release_data, change, message):
    write_tier(release_dir("L", tmp_path), *release_data, n_train=9)
    image, label, noisy = (a[0] for a in release_data)
    write_shard(release_dir("L", tmp_path) / "valid-00000-of-00001", [example(image, label, noisy, **change)])
    with pytest.raises(DataFormatError, match=f"valid-00000-of-00001, {message}"):
        read_release("L", tmp_path, cache=ArtifactCache(tmp_path / "cache"))


@pytest.fixture
def cifar_like(rng):
    y = np.repeat(np.arange(10), 20)
    X = rng.integers(0, 256, (200, 32, 32, 3), dtype=np.uint8)
    return Dataset("cifar_like", Split(X, y), Split(X[:20], y[:20]), tuple("0123456789"), "image", "test")


def test_votes_from_the_release_align_with_the_nlt_rows(tmp_path, cifar_like, rng):
    nlt = gu_five_way_split(cifar_like.train.y)["nlt"]
    in_train = rng.permutation(len(nlt))[:60]  # NLT positions the release's train split holds
    other = np.setdiff1d(np.arange(200), nlt)[:5]  # non-NLT images in the release
    rows = np.concatenate([nlt[in_train], other, nlt[np.setdiff1d(np.arange(len(nlt)), in_train)[:4]]])
    noisy = rng.integers(0, 10, (len(rows), R))
    for tier in ("L", "H"):
        write_tier(release_dir(tier, tmp_path), cifar_like.train.X[rows], cifar_like.train.y[rows], noisy, n_train=65)
    cfg = Settings(plidn="release", raters={"tiers": {"L": 0.1, "H": 0.5}, "n_raters": 4})
    votes = plidn_votes(cfg, cifar_like, items="nlt", data_dir=tmp_path, cache=ArtifactCache(tmp_path / "cache"))
    assert set(votes) == {"L", "H"} and votes["H"].shape == (len(nlt), R)
    keep = labelled_rows(votes["H"])
    assert np.array_equal(np.flatnonzero(keep), np.sort(in_train))  # valid-split rows are not used, as in the paper
    assert np.array_equal(votes["H"][in_train], noisy[:60]) and (votes["H"][~keep] == -1).all()
    with pytest.raises(NoPlidnLabels, match="test split has no PL-IDN votes"):
        plidn_votes(cfg, cifar_like, items="test", data_dir=tmp_path)


def test_release_labels_must_agree_with_the_dataset(tmp_path, cifar_like, rng):
    nlt = gu_five_way_split(cifar_like.train.y)["nlt"][:10]
    wrong = (cifar_like.train.y[nlt] + 1) % 10
    write_tier(release_dir("L", tmp_path), cifar_like.train.X[nlt], wrong, rng.integers(0, 10, (10, R)), n_train=8)
    cfg = Settings(plidn="release", raters={"tiers": {"L": 0.1}, "n_raters": 10})
    with pytest.raises(DataFormatError, match="8 of the 8 images matched .* another clean label"):
        plidn_votes(cfg, cifar_like, items="nlt", data_dir=tmp_path, cache=ArtifactCache(tmp_path / "cache"))
    elsewhere = np.setdiff1d(np.arange(200), gu_five_way_split(cifar_like.train.y)["nlt"])[:10]
    write_tier(release_dir("L", tmp_path), cifar_like.train.X[elsewhere], wrong, rng.integers(0, 10, (10, R)), n_train=8)
    with pytest.raises(DataFormatError, match="none of the 90 NLT images of 'cifar_like' is in the PL-IDN release"):
        plidn_votes(cfg, cifar_like, items="nlt", data_dir=tmp_path, cache=ArtifactCache(tmp_path / "cache"))


def test_source_dispatch(monkeypatch, cifar_like):
    calls = []
    monkeypatch.setattr(plidn, "fallible_rater_votes", lambda ds, **kw: calls.append(kw) or {"L": np.zeros((3, 4))})
    cfg = Settings(plidn="fallible_raters", raters={"tiers": {"L": 0.1}, "n_raters": 4})
    assert plidn_votes(cfg, cifar_like, items="test")["L"].shape == (3, 4)
    assert calls[0]["items"] == "test" and calls[0]["n_raters"] == 4 and calls[0]["tiers"] == {"L": 0.1}
    with pytest.raises(ConfigError, match="unknown plidn source 'gu'; valid plidn sources: fallible_raters, release"):
        plidn_votes(Settings(cfg, plidn="gu"), cifar_like, items="nlt")
    with pytest.raises(ConfigError, match="unknown PL-IDN items 'train'"):
        plidn_votes(cfg, cifar_like, items="train")
