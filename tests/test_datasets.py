import gzip
import pickle

import numpy as np
import pandas as pd
import pytest

from shared.datasets import list_datasets, load_dataset
from shared.datasets.offline import adult_like_frame
from shared.datasets.writers import write_adult, write_cifar10, write_idx, write_lfs_pointer
from shared.errors import ConfigError, DataFormatError, DataNotFoundError
from test_files import WritesAFile  # a crafted pickle whose payload creates a marker file


def test_registry_lists_real_and_offline_datasets():
    table = list_datasets()
    assert {"cifar10", "mnist", "adult"} <= set(table.loc[table["kind"] == "real", "name"])
    assert table.loc[table["name"] == "mnist32rgb", "stands_in_for"].item() == "cifar10"
    with pytest.raises(ConfigError, match="unknown dataset 'cifar11'.*valid datasets: adult"):
        load_dataset("cifar11")


@pytest.mark.parametrize("name,shape,real", [("mnist5k", (28, 28), "mnist"), ("mnist32rgb", (32, 32, 3), "cifar10")])
def test_image_stand_ins(name, shape, real):
    ds = load_dataset(name)
    assert ds.train.X.shape[1:] == shape and ds.train.X.dtype == np.uint8
    assert len(ds.train) + len(ds.test) == 5000
    # stratified 80/20 hold-out: every class keeps its 500 * 0.2 = 100 test items
    assert np.bincount(ds.test.y).tolist() == [100] * 10
    assert ds.source == f"offline stand-in for {real}"


def test_colourised_stand_in_keeps_the_digits():
    grey, rgb = load_dataset("mnist5k"), load_dataset("mnist32rgb")
    assert np.array_equal(grey.train.y, rgb.train.y)
    assert rgb.train.X.std(axis=(1, 2)).mean() > 5  # colour varies within images


def test_adult_like_matches_adult_statistics():
    X, y, p = adult_like_frame(50_000, seed=1)
    assert list(X.columns) == ["age", "workclass", "education", "education-num", "marital-status", "occupation",
                               "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
                               "native-country"]
    assert 0.21 < y.mean() < 0.27
    assert 0.13 < np.minimum(p, 1 - p).mean() < 0.16  # Bayes error of the generated labels
    assert (X["sex"] == "Male").mean() == pytest.approx(0.67, abs=0.01)


def write_cifar(folder, n=6):
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), b"labels": list(range(n))}
        with open(folder / name, "wb") as f:
            pickle.dump(batch, f)
    return batch


def test_cifar10_reader_on_tiny_batches(tmp_path):
    last = write_cifar(tmp_path / "cifar-10-batches-py")
    ds = load_dataset("cifar10", data_dir=tmp_path)
    assert ds.train.X.shape == (30, 32, 32, 3) and ds.test.X.shape == (6, 32, 32, 3)
    # channel-major rows become HWC images: pixel (0, 0) of channel 1 is the row's element 1024
    assert ds.test.X[2, 0, 0, 1] == last[b"data"][2, 1024]
    assert ds.test.y.tolist() == list(range(6))


def test_missing_and_malformed_cifar_are_clear(tmp_path):
    with pytest.raises(DataNotFoundError, match=r"(?s)CIFAR-10 not found.*cifar-10-batches-py/data_batch_1.*profile=.smoke."):
        load_dataset("cifar10", data_dir=tmp_path)
    write_cifar(tmp_path / "cifar-10-batches-py")
    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(pickle.dumps({b"pixels": []}))
    with pytest.raises(DataFormatError, match="not a CIFAR-10 python batch"):
        load_dataset("cifar10", data_dir=tmp_path)


def test_a_crafted_cifar_batch_is_refused_without_running_its_code(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    write_cifar(folder)
    batch = {b"data": WritesAFile(tmp_path / "marker"), b"labels": [0]}
    (folder / "data_batch_3").write_bytes(pickle.dumps(batch))
    refused = r"data_batch_3: the CIFAR-10 batch refers to builtins\.exec.*refusing.*cifar\.html"
    with pytest.raises(DataFormatError, match=refused):
        load_dataset("cifar10", data_dir=tmp_path)
    assert not (tmp_path / "marker").exists()


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_reader_on_tiny_idx_files(tmp_path, gz):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    images = np.arange(4 * 28 * 28).reshape(4, 28, 28) % 256
    write_idx(raw / "train-images-idx3-ubyte", images, gz)
    write_idx(raw / "train-labels-idx1-ubyte", np.array([3, 1, 4, 1]), gz)
    write_idx(raw / "t10k-images-idx3-ubyte", images[:2], gz)
    write_idx(raw / "t10k-labels-idx1-ubyte", np.array([5, 9]), gz)
    ds = load_dataset("mnist", data_dir=tmp_path)
    assert np.array_equal(ds.train.X, images.astype(np.uint8)) and ds.test.y.tolist() == [5, 9]


def test_mnist_bad_magic_is_a_format_error(tmp_path):
    raw = tmp_path / "mnist"
    raw.mkdir()
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (raw / name).write_bytes(b"\x12\x34\x56\x78")
    with pytest.raises(DataFormatError, match="not an IDX file"):
        load_dataset("mnist", data_dir=tmp_path)


ADULT_ROWS = [
    "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K",
    "50, ?, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, White, Male, 0, 0, 13, United-States, >50K",
    "38, Private, 215646, HS-grad, 9, Divorced, Handlers-cleaners, Not-in-family, White, Female, 0, 0, 40, Cuba, <=50K",
]


def test_adult_reader_handles_missing_values_and_test_suffix(tmp_path):
    folder = tmp_path / "adult"
    folder.mkdir()
    (folder / "adult.data").write_text("\n".join(ADULT_ROWS) + "\n")
    (folder / "adult.test").write_text("|1x3 Cross validator\n" + "\n".join(r + "." for r in ADULT_ROWS) + "\n")
    ds = load_dataset("adult", data_dir=tmp_path)
    assert len(ds.train) == 2 and "fnlwgt" not in ds.train.X.columns  # the row with '?' is dropped
    assert ds.test.y.tolist() == [0, 0] and ds.train.X["age"].dtype == float
    keep_all = load_dataset("adult", data_dir=tmp_path, drop_missing=False)
    assert keep_all.train.X["workclass"].isna().sum() == 1 and keep_all.train.y.tolist() == [0, 1, 0]


def test_adult_bad_labels_are_a_format_error(tmp_path):
    folder = tmp_path / "adult"
    folder.mkdir()
    bad = ADULT_ROWS[0].replace("<=50K", "maybe")
    (folder / "adult.data").write_text(bad + "\n")
    (folder / "adult.test").write_text(bad + "\n")
    with pytest.raises(DataFormatError, match="income labels must be"):
        load_dataset("adult", data_dir=tmp_path)


def test_adult_with_a_byte_order_mark_reads_like_without(tmp_path):
    folder = tmp_path / "adult"
    folder.mkdir()
    (folder / "adult.data").write_bytes(b"\xef\xbb\xbf" + ("\n".join(ADULT_ROWS) + "\n").encode())
    (folder / "adult.test").write_text("\n".join(ADULT_ROWS) + "\n")
    ds = load_dataset("adult", data_dir=tmp_path)
    assert ds.train.X["age"].tolist() == ds.test.X["age"].tolist() == [39.0, 38.0]


def test_adult_random_bytes_and_non_numeric_columns_name_the_file(tmp_path):
    folder = tmp_path / "adult"
    folder.mkdir()
    (folder / "adult.test").write_text("\n".join(ADULT_ROWS) + "\n")
    (folder / "adult.data").write_bytes(np.random.default_rng(0).integers(0, 256, 3000, dtype=np.uint8).tobytes())
    with pytest.raises(DataFormatError, match=r"adult\.data is not UTF-8 text"):
        load_dataset("adult", data_dir=tmp_path)
    (folder / "adult.data").write_text(ADULT_ROWS[0].replace("39,", "old,", 1) + "\n")
    with pytest.raises(DataFormatError, match=r"adult\.data: column 'age' must be numeric"):
        load_dataset("adult", data_dir=tmp_path)


def test_git_lfs_pointers_in_place_of_cifar_mnist_and_adult_files(tmp_path):
    write_cifar(tmp_path / "cifar-10-batches-py")
    write_lfs_pointer(tmp_path / "cifar-10-batches-py" / "data_batch_3", b"x" * 30_000_000)
    with pytest.raises(DataFormatError, match=r"data_batch_3 is a git-LFS pointer.*git lfs pull"):
        load_dataset("cifar10", data_dir=tmp_path)
    images = np.zeros((3, 28, 28), dtype=np.uint8)
    for name, array in [("train-images-idx3-ubyte", images), ("train-labels-idx1-ubyte", np.arange(3)),
                        ("t10k-images-idx3-ubyte", images), ("t10k-labels-idx1-ubyte", np.arange(3))]:
        write_idx(tmp_path / "mnist" / name, array)
    write_lfs_pointer(tmp_path / "mnist" / "t10k-images-idx3-ubyte", b"x" * 100)
    with pytest.raises(DataFormatError, match=r"t10k-images-idx3-ubyte is a git-LFS pointer"):
        load_dataset("mnist", data_dir=tmp_path)
    (tmp_path / "mnist" / "t10k-images-idx3-ubyte").unlink()
    (tmp_path / "mnist" / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(b"\x00" * 50)[:20])
    with pytest.raises(DataFormatError, match=r"idx3-ubyte\.gz is not a readable gzip file"):
        load_dataset("mnist", data_dir=tmp_path)
    write_lfs_pointer(tmp_path / "adult" / "adult.data", b"x" * 100)
    write_lfs_pointer(tmp_path / "adult" / "adult.test", b"x" * 100)
    with pytest.raises(DataFormatError, match=r"adult\.data is a git-LFS pointer"):
        load_dataset("adult", data_dir=tmp_path)


def test_idx_writer_uses_mnist_header():
    # train-images-idx3-ubyte starts 00 00 08 03, then the sizes as big-endian int32
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = write_idx(Path(tmp) / "images", np.zeros((2, 28, 28)), gz=True)
        raw = gzip.open(path).read()
    assert raw[:16] == bytes.fromhex("00000803" "00000002" "0000001c" "0000001c") and len(raw) == 16 + 2 * 784


def test_cifar10_writer_round_trips_and_matches_the_row_layout(tmp_path):
    rng = np.random.default_rng(1)
    images, labels = rng.integers(0, 256, (13, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, 13)
    folder = write_cifar10(tmp_path / "cifar-10-batches-py", images[:11], labels[:11], images[11:], labels[11:])
    with open(folder / "data_batch_5", "rb") as f:
        rows = pickle.load(f)[b"data"]  # 11 rows over 5 batches: 3, 2, 2, 2, 2
    assert rows.shape == (2, 3072) and rows[0, 1024] == images[9, 0, 0, 1]  # channel-major rows
    ds = load_dataset("cifar10", data_dir=tmp_path)
    assert np.array_equal(ds.train.X, images[:11]) and ds.test.y.tolist() == labels[11:].tolist()
    with pytest.raises(ConfigError, match=r"must be \(n, 32, 32, 3\)"):
        write_cifar10(tmp_path / "bad", images[:, :28], labels, images, labels)


def test_adult_writer_round_trips_with_missing_values(tmp_path):
    X, y, _ = adult_like_frame(60, seed=3)
    X.loc[[2, 5], "occupation"] = np.nan
    write_adult(tmp_path / "adult", X[:50], y[:50], X[50:], y[50:])
    assert (tmp_path / "adult" / "adult.test").read_text().splitlines()[1].endswith("K.")  # '.'-terminated labels
    kept = load_dataset("adult", data_dir=tmp_path)
    assert len(kept.train) == 48 and kept.test.y.tolist() == y[50:].tolist()
    full = load_dataset("adult", data_dir=tmp_path, drop_missing=False)
    pd.testing.assert_frame_equal(full.train.X, X[:50].reset_index(drop=True))
