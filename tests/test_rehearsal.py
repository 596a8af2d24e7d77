import numpy as np
import pytest

from shared.datasets import load_dataset
from shared.errors import ConfigError
from shared.rehearsal import MARKER, _shuffled_rows, write_rehearsal_data, write_shared_datasets


def test_shared_rehearsal_datasets_load_through_the_real_loaders(tmp_path):
    assert sorted(write_shared_datasets(tmp_path, n_train=40, n_test=10)) == ["MNIST/raw", "adult", "cifar-10-batches-py"]
    cifar, mnist = load_dataset("cifar10", data_dir=tmp_path), load_dataset("mnist", data_dir=tmp_path)
    assert cifar.train.X.shape == (40, 32, 32, 3) and mnist.test.X.shape == (10, 28, 28)
    rgb = load_dataset("mnist32rgb")  # the stand-in rows, a fixed shuffled subset
    test_rows, train_rows = _shuffled_rows(len(rgb.test.y), 10), _shuffled_rows(len(rgb.train.y), 40)
    assert np.array_equal(cifar.test.X, rgb.test.X[test_rows]) and np.array_equal(cifar.train.y, rgb.train.y[train_rows])
    assert len(np.unique(cifar.train.y)) == 10 and len(np.unique(mnist.train.y)) == 10  # the stand-ins are class-sorted
    adult = load_dataset("adult", data_dir=tmp_path, drop_missing=False)
    assert adult.train.X.shape == (40, 13) and adult.train.X["age"].dtype == float
    assert set(np.unique(adult.train.y)) == {0, 1}


def test_rehearsal_folder_is_marked_and_papers_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="unknown paper with a rehearsal 'mnist_paper'"):
        write_rehearsal_data(tmp_path, papers=["mnist_paper"])
    assert not (tmp_path / MARKER).exists()
    write_rehearsal_data(tmp_path, papers=[], n_train=20, n_test=5)
    assert "not results" in (tmp_path / MARKER).read_text()


def test_rehearsal_refuses_a_folder_that_may_hold_real_data(tmp_path):
    (tmp_path / "cifar-10-batches-py").mkdir()
    with pytest.raises(ConfigError, match="not empty and is not a rehearsal folder.*overwrite real datasets"):
        write_rehearsal_data(tmp_path, papers=[], n_train=20, n_test=5)
    assert not (tmp_path / MARKER).exists()
