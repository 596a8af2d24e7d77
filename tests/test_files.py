"""shared.datasets.files: BOM-tolerant text, git-LFS pointers and binary bytes, on files in the real forms."""
import bz2
import csv
import pickle

import numpy as np
import pytest

from shared.datasets.files import is_lfs_pointer, load_npy, load_pickle, open_text, read_csv, read_json, read_text
from shared.datasets.writers import write_lfs_pointer
from shared.errors import DataFormatError

BOM = b"\xef\xbb\xbf"


def test_a_byte_order_mark_is_dropped_from_csv_json_and_text(tmp_path):
    (tmp_path / "a.csv").write_bytes(BOM + b"id,label\r\n1,0\r\n")
    assert list(read_csv(tmp_path / "a.csv").columns) == ["id", "label"]
    with open_text(tmp_path / "a.csv", newline="") as f:
        assert next(csv.reader(f)) == ["id", "label"]
    (tmp_path / "a.json").write_bytes(BOM + b'{"k": [1, 2]}')
    assert read_json(tmp_path / "a.json") == {"k": [1, 2]}
    (tmp_path / "plain.txt").write_bytes("caf\u00e9\n".encode())
    assert read_text(tmp_path / "plain.txt") == "caf\u00e9\n"  # files without a mark read unchanged


def test_git_lfs_pointers_are_named_with_the_fix(tmp_path):
    pointer = write_lfs_pointer(tmp_path / "x.npy", b"\x00" * 4096)
    assert is_lfs_pointer(pointer) and pointer.stat().st_size < 200
    assert not is_lfs_pointer(tmp_path / "missing.npy")
    for reader in (load_npy, read_csv, read_json, read_text, load_pickle):
        with pytest.raises(DataFormatError, match=r"x\.npy is a git-LFS pointer.*git lfs pull"):
            reader(pointer)


def test_binary_bytes_in_a_text_file_name_the_path(tmp_path):
    path = tmp_path / "random.csv"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 2000, dtype=np.uint8).tobytes())
    with pytest.raises(DataFormatError, match=r"random\.csv is not UTF-8 text"):
        read_csv(path)
    with pytest.raises(DataFormatError, match=r"random\.csv is not UTF-8 text"):
        with open_text(path) as f:
            f.read()
    (tmp_path / "bad.json").write_text('{"a": 1,\n oops}')
    with pytest.raises(DataFormatError, match=r"bad\.json, line 2: not valid JSON"):
        read_json(tmp_path / "bad.json")
    (tmp_path / "cut.csv.bz2").write_bytes(bz2.compress(b"a,b\n" * 1000)[:40])
    with pytest.raises(DataFormatError, match=r"cut\.csv\.bz2 cannot be decompressed"):
        read_csv(tmp_path / "cut.csv.bz2")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DataFormatError, match="empty"):
        read_csv(tmp_path / "empty.csv")


def test_load_npy_refuses_pickles_archives_and_foreign_bytes(tmp_path):
    np.save(tmp_path / "ok.npy", np.arange(6).reshape(2, 3))
    assert load_npy(tmp_path / "ok.npy").shape == (2, 3)
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataFormatError, match="pickles are refused"):
        load_npy(tmp_path / "objects.npy")
    np.savez(tmp_path / "arch.npz", a=np.ones(2))
    (tmp_path / "arch.npz").rename(tmp_path / "arch.npy")
    with pytest.raises(DataFormatError, match="npz archive"):
        load_npy(tmp_path / "arch.npy", "counts")
    (tmp_path / "text.npy").write_text("0,1,2\n")
    with pytest.raises(DataFormatError, match="no NUMPY header"):
        load_npy(tmp_path / "text.npy")
    (tmp_path / "cut.npy").write_bytes((tmp_path / "ok.npy").read_bytes()[:-8])
    with pytest.raises(DataFormatError, match="truncated"):
        load_npy(tmp_path / "cut.npy")


class WritesAFile:
    """What a crafted pickle holds: unpickling it calls ``exec``, which here creates the file ``marker``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').close()",)


def test_a_pickle_that_would_run_code_is_refused_before_running_it(tmp_path):
    pickle.loads(pickle.dumps(WritesAFile(tmp_path / "proof")))  # a plain unpickler runs it
    assert (tmp_path / "proof").exists()
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({b"data": WritesAFile(tmp_path / "marker"), b"labels": [0]}))
    with pytest.raises(DataFormatError, match=r"data_batch_1: the CIFAR-10 batch refers to builtins\.exec.*refusing"):
        load_pickle(path, "CIFAR-10 batch", encoding="bytes")
    assert not (tmp_path / "marker").exists()


CIFAR_LIKE = {b"batch_label": b"training batch 1 of 5", b"data": np.arange(24, dtype=np.uint8).reshape(2, 12),
              b"labels": [3, 7], b"filenames": [b"a.png", b"b.png"], b"mean": np.float32(0.5), b"shape": (2, 12)}


def assert_same_batch(back):
    assert back.keys() == CIFAR_LIKE.keys() and back[b"data"].dtype == np.uint8
    assert np.array_equal(back[b"data"], CIFAR_LIKE[b"data"]) and back[b"mean"] == np.float32(0.5)
    assert [back[k] for k in (b"batch_label", b"labels", b"filenames", b"shape")] == [
        CIFAR_LIKE[k] for k in (b"batch_label", b"labels", b"filenames", b"shape")]


@pytest.mark.parametrize("protocol", [3, 4, 5])
def test_plain_data_with_numpy_arrays_and_scalars_loads(tmp_path, protocol):
    (tmp_path / "batch").write_bytes(pickle.dumps(CIFAR_LIKE, protocol=protocol))
    assert_same_batch(load_pickle(tmp_path / "batch", encoding="bytes"))


def test_a_pickle_written_by_numpy_1_loads(tmp_path):
    # CIFAR-10's batches were pickled with numpy 1.x, whose arrays name numpy.core rather than numpy._core
    data = pickle.dumps(CIFAR_LIKE, protocol=3)
    old = data.replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")
    assert old != data
    (tmp_path / "batch").write_bytes(old)
    assert_same_batch(load_pickle(tmp_path / "batch", encoding="bytes"))


@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_a_damaged_pickle_names_the_path_and_the_fix(tmp_path, damage):
    data = pickle.dumps(CIFAR_LIKE)
    (tmp_path / "batch").write_bytes(data[:len(data) // 2] if damage == "truncated" else b"")
    with pytest.raises(DataFormatError, match=r"batch is not a readable pickle .*truncated.*download it again"):
        load_pickle(tmp_path / "batch", fix="download it again")
