"""The NoisywikiHow release loader and writer (noisywikihow.data, noisywikihow.formats) on tiny files in the
release's format: 6 classes (2 per source), 10 training and 2 validation and test events per class."""
import numpy as np
import pandas as pd
import pytest

from noisywikihow.benchmark import Benchmark, NoisyTrain, Split
from noisywikihow.data import (TC_MAX_TOTAL, check_release, infer_sources, load_noisywikihow, locate_noisywikihow,
                               tail_classes)
from noisywikihow.formats import NOISY_ID_BASE, write_release
from shared.datasets.writers import write_lfs_pointer
from shared.errors import ConfigError, DataFormatError, DataNotFoundError

CLASSES = np.array(["Lawn Care", "Growing Roses", "Filing Taxes", "Budgeting", "Kite Flying", "Origami"], dtype=object)
SOURCE = np.array(["SC", "SC", "BCC", "BCC", "TC", "TC"], dtype=object)
PER_CLASS, EVAL = 10, 2


def _split(start: int, per_class: int, tag: str) -> Split:
    labels = np.repeat(np.arange(len(CLASSES)), per_class)
    texts = np.array([f"{tag} the {CLASSES[y].lower()} , step {i} ." for i, y in enumerate(labels)], dtype=object)
    if tag == "do":  # texts a CSV reader may misread: quotes, a comma, pandas' NA markers
        texts[:3] = ['say " yes " to fun , often .', "nan", "NA"]
    return Split(texts, labels, np.arange(start, start + len(labels), dtype=np.int64))


def _real(name: str, train: Split, noisy_per_class: dict) -> NoisyTrain:
    """Open-set noise: in class c the first noisy_per_class[c] events get an outside event's text."""
    noisy = np.zeros(len(train), bool)
    for c, k in noisy_per_class.items():
        noisy[np.flatnonzero(train.labels == c)[:k]] = True
    texts, category = train.texts.copy(), CLASSES[train.labels].copy()
    texts[noisy] = [f"open-set event {i} of {name} ." for i in np.flatnonzero(noisy)]
    category[noisy] = [f"Outside Category {i % 3}" for i in np.flatnonzero(noisy)]
    return NoisyTrain(name, "real", texts, train.labels.copy(), noisy, category)


def _symmetric(name: str, train: Split, n_flipped: int) -> NoisyTrain:
    labels = train.labels.copy()
    rows = np.arange(0, len(train), len(train) // n_flipped)[:n_flipped]
    labels[rows] = (labels[rows] + 1) % len(CLASSES)
    return NoisyTrain(name, "symmetric", train.texts.copy(), labels, labels != train.labels, CLASSES[train.labels])


def tiny_bench() -> Benchmark:
    train, val = _split(0, PER_CLASS, "do"), _split(60, EVAL, "check")
    test = _split(72, EVAL, "try")
    sets = [_real("mix_0.2", train, dict.fromkeys(range(6), 2)),  # round(0.2 * 20) = 4 per source
            _real("mix_0.4", train, dict.fromkeys(range(6), 4)),
            _real("neighbor_0.1", train, {0: 3, 1: 3}),  # round(0.1 * 60) = 6 from one source
            _real("uncommon_0.1", train, {2: 3, 3: 3}),
            _real("tail_0.1", train, {4: 3, 5: 3}),
            _symmetric("sym_0.2", train, 12)]
    return Benchmark("tiny", CLASSES, SOURCE, np.full(6, "", dtype=object), train, val, test, {s.name: s for s in sets})


@pytest.fixture
def release(tmp_path):
    """(the clone's root, its noisy/ folder) of the tiny benchmark."""
    root = write_release(tmp_path / "NoisywikiHow-dataset", tiny_bench())
    return root, root / "noisy"


def _edit(path, edit) -> None:
    """Rewrites a CSV file with ``edit(frame)`` applied (it changes the frame in place or returns a new one)."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    edited = edit(frame)
    (frame if edited is None else edited).to_csv(path, index=False)


def test_round_trip(release):
    bench, root = tiny_bench(), release[0]
    again = load_noisywikihow(root, official=False)
    assert again.classes.tolist() == bench.classes.tolist()
    assert again.source.tolist() == bench.source.tolist()  # TC from tail_0.1, BCC from uncommon_0.1
    assert set(again.parent) == {""}
    for s in ("train", "val", "test"):
        a, b = getattr(again, s), getattr(bench, s)
        assert a.texts.tolist() == b.texts.tolist()
        assert np.array_equal(a.labels, b.labels) and np.array_equal(a.ids, b.ids)
    assert sorted(again.noise) == sorted(bench.noise)
    for name, nt in bench.noise.items():
        got = again.noise[name]
        assert got.kind == nt.kind and got.texts.tolist() == nt.texts.tolist()
        assert np.array_equal(got.labels, nt.labels) and np.array_equal(got.is_noisy, nt.is_noisy)
        assert got.true_category.tolist() == nt.true_category.tolist()
    mix = pd.read_csv(release[1] / "mix_0.2.csv")
    noisy = mix["step_id"] != mix["noisy_id"]
    assert (mix["noisy_id"][noisy] >= NOISY_ID_BASE).all() and (mix["noisy_label"][noisy] == -1).all()
    assert (mix["noisy_label"][~noisy] == mix["cat_id"][~noisy]).all()
    report = check_release(release[1], official=False).set_index("file")
    assert (report.loc[["train.csv", "cat158.csv", "mix_0.2.csv", "tail_0.1.csv"], "status"] == "ok").all()
    assert report.loc["mix_0.6.csv", "status"] == "missing"
    assert report.loc["mix_0.4.csv", "noisy_TC"] == pytest.approx(0.4)


def test_noise_files_and_locations(release, tmp_path):
    root, noisy = release
    assert locate_noisywikihow(root) == noisy == locate_noisywikihow(noisy) == locate_noisywikihow(root.parent)
    bench = load_noisywikihow(noisy, noise_files=["mix_0.4", "sym_0.2.csv"], official=False)
    assert sorted(bench.noise) == ["mix_0.4", "sym_0.2"] and bench.meta["cat158"] == str(root / "cat158.csv")
    with pytest.raises(DataNotFoundError, match=r"mix_0\.6\.csv is not in .*noisy"):
        load_noisywikihow(root, noise_files=["mix_0.6"], official=False)
    with pytest.raises(ConfigError, match="not a noisy training set"):
        load_noisywikihow(root, noise_files=["idn_0.2"], official=False)
    with pytest.raises(DataNotFoundError, match="git clone https://github.com/tangminji/NoisywikiHow-dataset"):
        locate_noisywikihow(tmp_path / "elsewhere")
    (noisy / "test.csv").unlink()
    with pytest.raises(DataNotFoundError, match=r"noisy holds train\.csv, val\.csv but not test\.csv"):
        locate_noisywikihow(root)


def test_sources_need_uncommon(release):
    (release[1] / "uncommon_0.1.csv").unlink()
    with pytest.raises(DataNotFoundError, match=r"uncommon_0\.1\.csv missing .* which classes are BCC"):
        load_noisywikihow(release[0], noise_files=["mix_0.2"], official=False)
    report = check_release(release[1], official=False).set_index("file")
    assert "sources unknown" in report.loc["train.csv", "status"] and np.isnan(report.loc["mix_0.2.csv", "noisy_SC"])


def test_source_rules():
    totals = np.array([401, 400, 301, 2685, 356])  # cat158.csv's steps of Surfing, a made-up 400, Bathing, ...
    assert tail_classes(totals).tolist() == [1, 2, 4] and TC_MAX_TOTAL == 400
    assert infer_sources(5, tc=[1, 2, 4], bcc=[0, 2]).tolist() == ["BCC", "TC", "TC", "SC", "TC"]


def test_without_cat158(release):
    (release[0] / "cat158.csv").unlink()
    bench = load_noisywikihow(release[0], official=False)
    assert bench.classes.tolist() == CLASSES.tolist() and bench.meta["cat158"] is None


def test_bom_tolerated(release):
    path = release[1] / "train.csv"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert len(load_noisywikihow(release[0], noise_files=[], official=False).train) == 60


@pytest.mark.parametrize("file", ["train.csv", "mix_0.2.csv"])
def test_lfs_pointer(release, file):
    path = release[1] / file
    write_lfs_pointer(path, path.read_bytes())
    with pytest.raises(DataFormatError, match=rf"{file}.*git-LFS pointer.*git lfs pull"):
        load_noisywikihow(release[0], official=False)
    assert "git-LFS pointer" in check_release(release[1], official=False).set_index("file").loc[file, "status"]


def test_not_utf8(release):
    path = release[1] / "val.csv"
    path.write_bytes(path.read_bytes().replace(b"check the", "chéck the".encode("latin-1"), 1))
    with pytest.raises(DataFormatError, match=r"val\.csv is not UTF-8"):
        load_noisywikihow(release[0], official=False)


def test_missing_column(release):
    _edit(release[1] / "mix_0.2.csv", lambda f: f.drop(columns="noisy_id"))
    with pytest.raises(DataFormatError, match=r"mix_0\.2\.csv lacks column\(s\) \['noisy_id'\].*'noisy_label'\]"):
        load_noisywikihow(release[0], official=False)


@pytest.mark.parametrize("file", ["train.csv", "sym_0.2.csv"])
def test_duplicate_id(release, file):
    _edit(release[1] / file, lambda f: f.loc.__setitem__((5, "choosen_id"), f.loc[4, "choosen_id"]))
    with pytest.raises(DataFormatError, match=rf"{file}: choosen_id \[4\] occur"):
        load_noisywikihow(release[0], official=False)


def test_noisy_file_ids_must_be_train_ids(release):
    _edit(release[1] / "mix_0.4.csv", lambda f: f.loc.__setitem__((0, "choosen_id"), "999"))
    with pytest.raises(DataFormatError, match=r"mix_0\.4\.csv: its choosen_id must be train.csv's .*\[0\].*\[999\]"):
        load_noisywikihow(release[0], official=False)


def test_cat_id_out_of_range(release):
    _edit(release[1] / "val.csv", lambda f: f.loc.__setitem__((0, "cat_id"), "6"))
    with pytest.raises(DataFormatError, match=r"val\.csv: cat_id must lie in \[0, 6\) .* found \[6\]"):
        load_noisywikihow(release[0], official=False)


def test_unbalanced_and_steps(release):
    _edit(release[1] / "test.csv", lambda f: f.drop(index=0))
    with pytest.raises(DataFormatError) as error:
        load_noisywikihow(release[0], official=False)
    assert "test.csv: unbalanced: 1 to 2 events per class" in str(error.value)
    assert "cat158.csv: steps differs" in str(error.value)


def test_official_counts(release):
    with pytest.raises(DataFormatError, match="official=False") as error:
        load_noisywikihow(release[0])
    assert "train.csv: 6 classes; the release has 158" in str(error.value)
    assert "60 rows; the release has 73,343 (Table 3)" in str(error.value)
    assert ("val.csv: 12 rows; the release has 7,900 (Table 3); 2 events per class; the release has 50"
            in str(error.value))


def test_wrong_mix_fraction(release):
    rows = [0, 1, 10]  # noisy rows of classes 0 and 1 (SC) made clean: 9 of 60 noisy
    _edit(release[1] / "mix_0.2.csv", lambda f: f.loc.__setitem__((rows, "noisy_id"), f.loc[rows, "step_id"]))
    with pytest.raises(DataFormatError, match=r"mix_0\.2\.csv: overall: 15\.0% noisy \(9 of 60\), expected 0\.2 "
                                              r"\+- 0\.02 \(12 events\); SC classes' events: 5\.0% noisy"):
        load_noisywikihow(release[0], official=False)


def test_wrong_sym_and_single_source(release):
    _edit(release[1] / "sym_0.2.csv", lambda f: f.__setitem__("noisy_label", f["cat_id"]))
    _edit(release[1] / "tail_0.1.csv", lambda f: f.loc.__setitem__((0, "noisy_id"), "12345678"))
    with pytest.raises(DataFormatError) as error:
        load_noisywikihow(release[0], official=False)
    assert r"sym_0.2.csv: overall: 0.0% noisy (0 of 60), expected 0.2 +- 0.01" in str(error.value)
    # row 0 (class 0) becomes a tail noise row: class 0 is then taken for TC, and SC's own noise lies outside SC
    assert "neighbor_0.1.csv: 3 noisy events are outside the SC classes" in str(error.value)


def test_writer_refuses_what_the_format_cannot_hold(tmp_path):
    bench = tiny_bench()
    mix = bench.noise["mix_0.4"]
    bench.noise["sym_0.4"] = NoisyTrain("sym_0.4", "real", mix.texts, mix.labels, mix.is_noisy, mix.true_category)
    with pytest.raises(ConfigError, match="kind 'real'"):
        write_release(tmp_path, bench)
