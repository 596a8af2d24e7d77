"""CILN's rehearsal files (ciln/rehearsal.py) are read back by the full profile's real loaders."""
import numpy as np
import pytest

from ciln import rehearsal
from ciln.plidn import labelled_rows, plidn_votes, read_release
from ciln.references import reference_counts
from ciln.splits import gu_five_way_split
from ciln.voters import train_voter
from shared.cache import ArtifactCache
from shared.datasets import load_dataset
from shared.paths import REPO_ROOT
from shared.preflight import preflight
from shared.profiles import Settings
from shared.rehearsal import write_shared_datasets
from shared.run import parse_args, plan_jobs

pytest.importorskip("tfrecord")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def fake_rater_votes(ds, *, tiers, n_raters, items, cache=None):
    """Stand-in for the calibrated fallible raters (a minute of training): rater r errs on the rows where
    (row + r) % 4 == 0 (tier L) or (row + r) % 2 == 0 (other tiers), voting the next class."""
    y = ds.train.y[gu_five_way_split(ds.train.y)[items]]
    rows = np.arange(len(y))[:, None] + np.arange(n_raters)[None, :]
    return {t: np.where(rows % (4 if t == "L" else 2) == 0, (y[:, None] + 1) % 10, y[:, None]) for t in tiers}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("rehearsal")
    write_shared_datasets(root, n_train=300, n_test=40)
    real_annotators = rehearsal.pseudo_human_counts
    with pytest.MonkeyPatch.context() as mp:  # the stand-ins, cheaper
        mp.setattr(rehearsal, "fallible_rater_votes", fake_rater_votes)
        mp.setattr(rehearsal, "pseudo_human_counts", lambda ds, **kw: real_annotators(ds, **{**kw, "annotators": 10}))
        written = rehearsal.write_rehearsal_data(root, cache=ArtifactCache(root / "cache", verbose=False))
    assert all((root / p).exists() for p in written)
    return root


@pytest.fixture(scope="module")
def cifar(root):
    return load_dataset("cifar10", data_dir=root)


def test_cifar10h_counts_align_with_the_test_split(root, cifar):
    counts = reference_counts(Settings(reference="cifar10h"), cifar, root)
    assert counts.shape == (40, 10) and (counts.sum(axis=1) == 10).all()  # 10 simulated annotators per image
    assert (counts.argmax(axis=1) == cifar.test.y).mean() > 0.8  # a human-like reference: mostly right


def test_plidn_release_labels_the_nlt_and_nlv_rows(root, cifar):
    release = read_release("H", root, cache=ArtifactCache(root / "cache", verbose=False))
    splits = gu_five_way_split(cifar.train.y)
    kept = rehearsal.plidn_release_mask(len(splits["nlt"]))
    assert release.images.shape == (kept.sum() + len(splits["nlv"]), 32, 32, 3)
    assert (release.split == "train").sum() == kept.sum() and release.noisy_labels.shape[1] == rehearsal.PLIDN_RATERS
    cfg = Settings(plidn="release", raters={"tiers": {"L": 0.108, "H": 0.478}, "n_raters": 10})
    votes = plidn_votes(cfg, cifar, items="nlt", data_dir=root, cache=ArtifactCache(root / "cache", verbose=False))
    expected = fake_rater_votes(cifar, tiers=["L", "H"], n_raters=10, items="nlt")
    for tier in ("L", "H"):
        assert np.array_equal(labelled_rows(votes[tier]), kept)  # one NLT row in ten is absent, as designed
        assert np.array_equal(votes[tier][kept], expected[tier][kept])
    nlv = plidn_votes(cfg, cifar, items="nlv", data_dir=root, cache=ArtifactCache(root / "cache", verbose=False))
    assert np.array_equal(nlv["L"], fake_rater_votes(cifar, tiers=["L"], n_raters=10, items="nlv")["L"])


def test_tabpfn_voter_reads_the_checkpoint_under_data_dir(root):
    adult = load_dataset("adult", data_dir=root)
    X, y = adult.train.X.iloc[:200].reset_index(drop=True), adult.train.y[:200]
    voter = train_voter("tabpfn", X, y, X, y, num_classes=2, recipe_overrides={"members": 1}, data_dir=root)
    probs = voter.predict_proba(adult.test.X.iloc[:20])
    assert probs.shape == (20, 2) and np.allclose(probs.sum(axis=1), 1.0)


def test_preflight_finds_everything_the_full_profile_reads_in_the_rehearsal_folder(root):
    args = parse_args(["ciln", "--profile", "full", "-f", str(REPO_ROOT / "ciln/params/rehearsal.yaml"),
                       "-p", "data_dir", str(root)])
    report = preflight(plan_jobs(args, "full", root / "runs"), "full", has_cuda=False)
    assert report.ok, report.text()
    assert {"CIFAR10", "MNIST", "Adult", "TabPFN v1 checkpoint", "CIFAR-10H", "PL-IDN tier H"} <= set(
        report.checked["ciln/06_tv.ipynb"])
    assert "CIFAR-10H" not in report.checked["ciln/01_benchmark.ipynb"]  # only 06-08 compare with humans
    assert report.warnings  # device auto without a GPU: said, not fatal
