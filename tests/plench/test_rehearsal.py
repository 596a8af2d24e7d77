"""Plench's rehearsal data (plench/rehearsal.py) read back through the real loaders."""
import numpy as np
import pytest
import scipy.io
import scipy.sparse

from plench.data import PAPER_NAMES, find_palm_file, load_pll_dataset, table5_row
from plench.rehearsal import PALM_STAND_INS, palm_stand_in, write_rehearsal_data
from shared.datasets import load_dataset
from shared.datasets.writers import write_cifar10
from shared.noise.partial import aggregate_union, aggregate_vaguest
from shared.paths import REPO_ROOT
from shared.preflight import preflight
from shared.run import parse_args, plan_jobs

N_IMAGES = 200


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    """A rehearsal folder: 200 + 50 stand-in CIFAR-10 images (every class) and Plench's files."""
    root = tmp_path_factory.mktemp("rehearsal")
    rgb = load_dataset("mnist32rgb")
    rows = np.random.default_rng(0).permutation(len(rgb.train.y))[:N_IMAGES]
    write_cifar10(root / "cifar-10-batches-py", rgb.train.X[rows], rgb.train.y[rows], rgb.test.X[:50], rgb.test.y[:50])
    return root, write_rehearsal_data(root)


def test_every_written_path_exists_and_the_files_keep_the_public_names(rehearsal):
    root, written = rehearsal
    assert len(written) == 10 and all((root / p).exists() for p in written)
    assert "plench/Soccer Player.mat" in written and "plcifar10/plcifar10.pkl" in written
    assert find_palm_file("YahooNews", root).name == "Yahoo! News.mat"
    mat = scipy.io.loadmat(root / "plench" / "lost.mat")  # PALM layout: q x n label matrices, sparse (Lost)
    assert mat["data"].shape == (500, 108) and mat["target"].shape == (16, 500)
    assert scipy.sparse.issparse(mat["partial_target"])
    italian = scipy.io.loadmat(root / "plench" / "italian.mat")  # dense uint8 (Italian)
    assert italian["data"].dtype == np.uint8 and not scipy.sparse.issparse(italian["target"])


@pytest.mark.parametrize("name", list(PALM_STAND_INS))
def test_palm_stand_ins_load_with_their_table5_shapes(rehearsal, name):
    root = rehearsal[0]
    spec = PALM_STAND_INS[name]
    ds = load_pll_dataset(name, data_dir=root)
    X, S, y = palm_stand_in(spec)
    assert ds.X.shape == (500, spec.d) and ds.X.dtype == np.float32 and ds.num_classes == spec.q
    assert np.array_equal(ds.S, S) and np.array_equal(ds.y, y)
    row = table5_row(ds)
    assert row["Avg. # CLs"] == pytest.approx(spec.avg_size, abs=0.15)
    assert (row["Noise Rate (%)"] > 0) == (spec.noise_pct > 0) and row["Noise Rate (%)"] <= 1.2
    assert row["# S = Y"] == spec.n_full
    assert (ds.S.sum(axis=1) >= 1).all()
    assert len(np.unique(y)) == spec.q  # every class has rows, even Yahoo! News's 219
    assert ds.steps == {"SoccerPlayer": 20_000, "Italian": 20_000, "YahooNews": 20_000, "English": 20_000}.get(name, 10_000)


def test_plcifar10_annotations_give_a_plausible_crowd(rehearsal):
    root = rehearsal[0]
    agg = load_pll_dataset("PLCIFAR10_Aggregate", data_dir=root)
    vag = load_pll_dataset("PLCIFAR10_Vaguest", data_dir=root)
    sets = agg.meta["annotator_sets"]  # (n, A, q) read from the pickle
    assert agg.X.shape == (N_IMAGES, 32, 32, 3) and agg.test[0].shape == (50, 32, 32, 3)
    assert sets.shape == (N_IMAGES, 10, 10) and set(sets.any(axis=2).sum(axis=1)) == {9, 10}  # 9 or 10 annotators
    assert (sets.sum(axis=2) <= 6).all()  # PLCIFAR10's cap of six labels per annotator
    assert np.array_equal(agg.S, aggregate_union(sets)) and np.array_equal(vag.S, aggregate_vaguest(sets))
    a, v = table5_row(agg), table5_row(vag)
    assert a["Avg. # CLs"] > v["Avg. # CLs"] > 2 and a["Noise Rate (%)"] < 2 < v["Noise Rate (%)"] < 40
    assert PAPER_NAMES[agg.name] == "PLCIFAR10-Aggregate"


def test_preflight_finds_every_dataset_the_full_profile_reads_in_the_rehearsal_folder(rehearsal):
    root = rehearsal[0]
    args = parse_args(["plench", "--profile", "full", "-f", str(REPO_ROOT / "plench/params/rehearsal.yaml"),
                       "-p", "data_dir", str(root)])
    report = preflight(plan_jobs(args, "full", root / "runs"), "full", has_cuda=True)
    assert report.ok and not report.warnings, report.text()
    assert {"SoccerPlayer", "PLCIFAR10_Vaguest"} <= set(report.checked["plench/00_datasets.ipynb"])
    (root / "plcifar10" / "plcifar10.pkl").rename(root / "moved.pkl")
    try:  # PLCIFAR10 absent: 00 warns (it skips it, Table 5 still runs); 03 has nothing left and stops
        report = preflight(plan_jobs(args, "full", root / "runs"), "full", has_cuda=True)
    finally:
        (root / "moved.pkl").rename(root / "plcifar10" / "plcifar10.pkl")
    stopped = {key for keys in report.problems.values() for key in keys}
    assert stopped == {"plench/03_image.ipynb", "plench/04_validation_use.ipynb"}
    assert all("PLCIFAR10 annotations not found" in message for message in report.problems)
    assert any("plench/00_datasets.ipynb" in keys for keys in report.warnings.values())
