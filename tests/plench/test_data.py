"""Plench datasets (real loaders on tiny synthetic files, offline stand-ins), PLENCH's splits and image views."""
import pickle
from collections import OrderedDict

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from plench.augment import (
    BATCHED_OPS, CIFAR_MEAN, CIFAR_STD, DIGITS_MEAN, DIGITS_STD, RANDAUGMENT_OPS, VIEW_NAMES, CifarViews, DigitsViews,
    MemberGenerators, TabularViews, cutout, rand_augment, rand_augment_per_image, random_resized_crop, views_for,
    _resized_crop_box,
)
from torchvision.transforms.v2 import functional as TF
from plench.data import (
    PAPER_NAMES, PLL_DATASETS, PLLDataset, load_pll_dataset, plench_split, read_plcifar10_annotations, table5_row,
)
from plench.rehearsal import write_palm, write_plcifar10
from shared.datasets.writers import write_cifar10, write_lfs_pointer
from shared.errors import ConfigError, DataFormatError, DataNotFoundError
from shared.noise.partial import aggregate_union
from shared.seeding import seed_hash

torch.set_num_threads(1)


# ------------------------------------------------------------------------------------------ PALM .mat files
def palm_arrays(n=40, d=7, q=5, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, q, n)
    S = (rng.random((n, q)) < 0.3).astype(np.uint8)
    S[np.arange(n), y] = 1
    return rng.normal(3.0, 2.0, (n, d)), S, y


@pytest.mark.parametrize("name, file_name, sparse", [
    ("Lost", "lost.mat", True),
    ("SoccerPlayer", "Soccer Player.mat", True),
    ("YahooNews", "Yahoo! News.MAT", False),
    ("Italian", "plench/italian.mat", False),
])
def test_palm_loader_transposes_densifies_and_matches_names(tmp_path, name, file_name, sparse):
    X, S, y = palm_arrays()
    write_palm(tmp_path / file_name, X, S, y, sparse=sparse)
    ds = load_pll_dataset(name, data_dir=tmp_path)
    assert ds.name == name and ds.modality == "tabular" and ds.test is None
    assert ds.X.shape == (40, 7) and ds.X.dtype == np.float32
    assert ds.S.shape == (40, 5) and ds.S.dtype == np.uint8 and np.array_equal(ds.S, S)  # rows = examples
    assert np.array_equal(ds.y, y) and ds.y.dtype == np.int64
    # z-scored over the whole set, PLENCH's (X - mean) / (std + 1e-6)
    assert np.allclose(ds.X, (X - X.mean(0)) / (X.std(0) + 1e-6), atol=1e-5)
    assert ds.steps == {"Lost": 10_000}.get(name, 20_000)
    assert ds.meta["source"].endswith(file_name.split("/")[-1])


@pytest.mark.parametrize("override, message", [
    ({"partial_target": None}, r"no variable 'partial_target'.*found \['data', 'target'\]"),
    ({"target": np.ones((5, 40), dtype=np.uint8)}, "'target' is not one-hot"),
    ({"target": np.eye(5, dtype=np.uint8)[np.zeros(40, int)]}, "must both be q x n"),  # n x q, not transposed
    ({"partial_target": np.full((5, 40), 2, dtype=np.uint8)}, "only 0 and 1"),
])
def test_malformed_palm_files_name_the_file_and_the_problem(tmp_path, override, message):
    X, S, y = palm_arrays()
    write_palm(tmp_path / "MSRCv2.mat", X, S, y, **override)
    with pytest.raises(DataFormatError, match=rf"(?s)MSRCv2\.mat.*{message}"):
        load_pll_dataset("MSRCv2", data_dir=tmp_path)


def test_unreadable_and_missing_palm_files_are_clear(tmp_path):
    (tmp_path / "Birdsong.mat").write_bytes(b"not a matlab file at all" * 10)
    with pytest.raises(DataFormatError, match=r"Birdsong\.mat is not a MATLAB \.mat file"):
        load_pll_dataset("Birdsong", data_dir=tmp_path)
    with pytest.raises(DataNotFoundError, match=r"(?s)Lost not found.*" + str(tmp_path / "Lost.mat") +
                       r".*palm\.seu\.edu\.cn.*academic use only.*not redistributed"):
        load_pll_dataset("Lost", data_dir=tmp_path)


def test_a_git_lfs_pointer_instead_of_a_mat_file_says_so(tmp_path):
    X, S, y = palm_arrays()
    real = write_palm(tmp_path / "real.mat", X, S, y).read_bytes()
    write_lfs_pointer(tmp_path / "lost.mat", real)
    with pytest.raises(DataFormatError, match=r"lost\.mat is a git-LFS pointer.*git lfs pull"):
        load_pll_dataset("Lost", data_dir=tmp_path)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "header_only_text", "bad_zlib"])
def test_a_damaged_mat_file_with_a_matlab_header_names_the_path(tmp_path, damage):
    """scipy raises TypeError, IndexError or zlib.error on these; the loader turns each into a DataFormatError."""
    X, S, y = palm_arrays()
    real = write_palm(tmp_path / "real.mat", X, S, y).read_bytes()
    assert real.startswith(b"MATLAB 5.0 MAT-file")
    rng = np.random.default_rng(0)
    damaged = {"garbage": real[:128] + rng.integers(0, 256, 300, dtype=np.uint8).tobytes(),
               "truncated": real[:len(real) // 2],
               "header_only_text": b"MATLAB 5.0 MAT-file, Platform: GLNXA64, and nothing else",
               "bad_zlib": real[:140] + bytes(len(real) - 140)}[damage]
    (tmp_path / "Birdsong.mat").write_bytes(damaged)
    with pytest.raises(DataFormatError, match=r"Birdsong\.mat is not a MATLAB \.mat file.*truncated or damaged"):
        load_pll_dataset("Birdsong", data_dir=tmp_path)


# ------------------------------------------------------------------------------------------ PLCIFAR10
N_CIFAR = 30  # 5 batches of 6


def fake_annotations(seed=0):
    rng = np.random.default_rng(seed)
    annotations = {
        i: [sorted(rng.choice(10, rng.integers(1, 5), replace=False).tolist()) for _ in range(rng.integers(2, 5))]
        for i in range(N_CIFAR)
    }
    annotations[0] = [[1], [2, 3], [4, 5], [6]]  # two largest sets: the first one wins
    annotations[1] = [[7, 7, 8]]  # a repeated label counts once
    return annotations


def vaguest_reference(value):
    """PLENCH's loop: the first list of strictly largest length."""
    best, largest = [], 0
    for labels in value:
        if len(set(labels)) > largest:
            best, largest = labels, len(set(labels))
    return set(best)


@pytest.mark.parametrize("nested", [True, False])
def test_plcifar10_aggregate_is_the_union_and_vaguest_the_first_largest(tmp_path, nested):
    rng = np.random.default_rng(0)  # 5 batches of 6 images (labels 0..5 in each) and 6 test images
    write_cifar10(tmp_path / "cifar-10-batches-py", rng.integers(0, 256, (N_CIFAR, 32, 32, 3), dtype=np.uint8),
                  np.tile(np.arange(6), 5), rng.integers(0, 256, (6, 32, 32, 3), dtype=np.uint8), np.arange(6))
    annotations = fake_annotations()
    write_plcifar10(tmp_path, annotations, nested)
    agg = load_pll_dataset("PLCIFAR10_Aggregate", data_dir=tmp_path)
    vag = load_pll_dataset("PLCIFAR10_Vaguest", data_dir=tmp_path)
    for i, value in annotations.items():
        assert set(np.flatnonzero(agg.S[i])) == set().union(*map(set, value))
        assert set(np.flatnonzero(vag.S[i])) == vaguest_reference(value)
    assert set(np.flatnonzero(vag.S[0])) == {2, 3}
    assert agg.X.shape == (N_CIFAR, 32, 32, 3) and agg.X.dtype == np.uint8 and agg.modality == "image"
    assert agg.test[0].shape == (6, 32, 32, 3) and agg.test[1].tolist() == list(range(6))
    assert agg.y.tolist() == [i % 10 for i in range(6)] * 5 and agg.steps == 60_000
    sets = agg.meta["annotator_sets"]
    assert sets.shape == (N_CIFAR, 4, 10) and np.array_equal(aggregate_union(sets), agg.S)
    assert table5_row(agg)["# Features"] == 3072


def test_plcifar10_missing_and_malformed_files_are_clear(tmp_path):
    with pytest.raises(DataNotFoundError, match=r"(?s)PLCIFAR10 annotations not found.*plcifar10/plcifar10\.pkl"
                                                r".*plcifar10\.pkl.*github\.com/wwangwitsel/PLCIFAR10"):
        load_pll_dataset("PLCIFAR10_Aggregate", data_dir=tmp_path)
    path = write_plcifar10(tmp_path, fake_annotations())
    with pytest.raises(DataNotFoundError, match="CIFAR-10 not found"):
        load_pll_dataset("PLCIFAR10_Aggregate", data_dir=tmp_path)
    broken = fake_annotations()
    del broken[7]
    path.write_bytes(pickle.dumps(broken))
    with pytest.raises(DataFormatError, match=r"missing \[7\]"):
        read_plcifar10_annotations(path, N_CIFAR)
    broken = fake_annotations()
    broken[3] = [[10]]
    path.write_bytes(pickle.dumps(broken))
    with pytest.raises(DataFormatError, match=r"labels must lie in 0\.\.9"):
        read_plcifar10_annotations(path, N_CIFAR)
    path.write_bytes(pickle.dumps(OrderedDict(fake_annotations())))  # a pickle naming a class is refused
    with pytest.raises(DataFormatError, match=r"plcifar10\.pkl: .*collections.OrderedDict.*refusing"):
        read_plcifar10_annotations(path, N_CIFAR)


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_damaged_plcifar10_pickle_names_the_path(tmp_path, damage):
    path = write_plcifar10(tmp_path, fake_annotations())
    real = path.read_bytes()
    path.write_bytes(real[:len(real) // 2] if damage == "truncated" else b"\x80\x04garbage" + real[40:])
    with pytest.raises(DataFormatError, match=r"plcifar10\.pkl is not a readable pickle"):
        read_plcifar10_annotations(path, N_CIFAR)


def test_a_git_lfs_pointer_instead_of_the_plcifar10_pickle_says_so(tmp_path):
    path = write_plcifar10(tmp_path, fake_annotations())
    write_lfs_pointer(path, path.read_bytes())
    with pytest.raises(DataFormatError, match=r"plcifar10\.pkl is a git-LFS pointer.*git lfs pull"):
        read_plcifar10_annotations(path, N_CIFAR)
    # reported before the CIFAR-10 images are looked for (there are none here)
    with pytest.raises(DataFormatError, match="git-LFS pointer"):
        load_pll_dataset("PLCIFAR10_Vaguest", data_dir=tmp_path)


# ------------------------------------------------------------------------------------------ stand-ins
def test_digits_stand_ins_have_their_generators_statistics():
    uss = load_pll_dataset("digits-USS")
    assert uss.X.shape == (1797, 64) and uss.X.dtype == np.float32 and uss.S.shape == (1797, 10)
    row = table5_row(uss)
    assert row["Avg. # CLs"] == pytest.approx(5.49, abs=0.15) and row["Noise Rate (%)"] == 0 and row["# S = Y"] == 0
    for name, p in (("digits-FPS0.3", 0.3), ("digits-FPS0.2", 0.2)):  # 0.2 is parsed, not registered
        ds = load_pll_dataset(name)
        assert ds.name == name and table5_row(ds)["Avg. # CLs"] == pytest.approx(1 + 9 * p, abs=0.12)
        assert ds.S[np.arange(len(ds)), ds.y].all()
    with pytest.raises(ConfigError, match=r"in \[0, 1\]"):
        load_pll_dataset("digits-FPS1.5")
    with pytest.raises(ConfigError, match=r"unknown PLL dataset 'digits-SSU'.*PLDigits-Vaguest"):
        load_pll_dataset("digits-SSU")


def test_pldigits_image_form_and_annotator_sets():
    digits = load_digits()
    tab = load_pll_dataset("PLDigits-Aggregate")
    img = load_pll_dataset("PLDigits-Aggregate", modality="image")
    assert img.X.shape == (1797, 8, 8, 1) and img.X.dtype == np.uint8 and img.X.max() == 255
    assert np.array_equal(img.X[..., 0], np.round(digits.images * 255 / 16).astype(np.uint8))
    assert np.array_equal(img.S, tab.S) and np.allclose(tab.X.std(0)[digits.data.std(0) > 0], 1, atol=1e-4)
    assert np.array_equal(aggregate_union(tab.meta["annotator_sets"]), tab.S)
    vaguest = table5_row(load_pll_dataset("PLDigits-Vaguest"))
    assert vaguest["Avg. # CLs"] < table5_row(tab)["Avg. # CLs"] and 7 < vaguest["Noise Rate (%)"] < 13


def test_synthetic_manyclass_has_full_sets_and_modalities_are_checked():
    ds = load_pll_dataset("synthetic-manyclass")
    row = table5_row(ds)
    assert (row["# Examples"], row["# Features"], row["# Classes"], row["# S = Y"]) == (3000, 100, 40, 9)
    assert row["Noise Rate (%)"] == 0 and row["Avg. # CLs"] == pytest.approx(1 + 0.05 * 39 + 9 * 36 / 3000, abs=0.1)
    with pytest.raises(ConfigError, match="synthetic-manyclass has no image form"):
        load_pll_dataset("synthetic-manyclass", modality="image")
    with pytest.raises(ConfigError, match="PLCIFAR10_Vaguest has no tabular form"):
        load_pll_dataset("PLCIFAR10_Vaguest", modality="tabular")
    with pytest.raises(ConfigError, match="unknown modality"):
        load_pll_dataset("digits-USS", modality="text")


def test_registry_covers_table5():
    real = {name for name, spec in PLL_DATASETS.items() if spec.kind == "real"}
    assert real == set(PAPER_NAMES) and len(real) == 11
    from shared.report import reported
    assert set(PAPER_NAMES.values()) == set(reported("plench", "table5")["dataset"])  # the paper's names
    assert {PLL_DATASETS[n].steps for n in ("Lost", "Malagasy")} == {10_000}
    assert {PLL_DATASETS[n].steps for n in ("SoccerPlayer", "English")} == {20_000}
    assert all(spec.stands_in_for for spec in PLL_DATASETS.values() if spec.kind == "offline")


def test_table5_row_on_a_hand_made_dataset():
    S = np.array([[1, 1, 1], [0, 1, 0], [1, 0, 1], [1, 1, 1]], dtype=np.uint8)
    ds = PLLDataset("toy", np.zeros((4, 6), np.float32), S, np.array([0, 0, 1, 2]), ("a", "b", "c"), "tabular",
                    None, 10)
    assert table5_row(ds) == {"Dataset": "toy", "# Examples": 4, "# Features": 6, "# Classes": 3,
                              "Avg. # CLs": 2.25, "Noise Rate (%)": 50.0, "# S = Y": 2}


# ------------------------------------------------------------------------------------------ splits
def toy(n, test=None):
    return PLLDataset("toy", np.zeros((n, 2), np.float32), np.ones((n, 3), np.uint8), np.zeros(n, np.int64),
                      ("a", "b", "c"), "tabular", test, 10)


def plench_reference_split(n, trial_seed):
    """PLENCH's train.py + datasets.py + misc.split_dataset, on Python lists."""
    seed = seed_hash(trial_seed)
    keys = list(range(n))
    np.random.RandomState(seed).shuffle(keys)
    pool, test = keys[:int(n * (1 - 0.1))], keys[int(n * (1 - 0.1)):]
    order = list(range(len(pool)))
    np.random.RandomState(seed).shuffle(order)
    n_val = int(len(pool) * 0.1)
    return [pool[k] for k in order[n_val:]], [pool[k] for k in order[:n_val]], test


@pytest.mark.parametrize("trial_seed", [0, 3])
def test_tabular_split_is_plench_exactly(trial_seed):
    split = plench_split(toy(1122), trial_seed)
    assert (len(split["train"]), len(split["val"]), len(split["test"])) == (909, 100, 113)  # Lost
    train, val, test = plench_reference_split(1122, trial_seed)
    assert split["train"].tolist() == train and split["val"].tolist() == val and split["test"].tolist() == test
    together = np.concatenate([split["train"], split["val"], split["test"]])
    assert np.array_equal(np.sort(together), np.arange(1122))  # disjoint and complete


def test_splits_are_fixed_per_trial_and_differ_across_trials():
    ds = toy(500)
    assert all(np.array_equal(plench_split(ds, 1)[k], plench_split(ds, 1)[k]) for k in ("train", "val", "test"))
    assert not np.array_equal(np.sort(plench_split(ds, 0)["test"]), np.sort(plench_split(ds, 1)["test"]))


def test_image_split_keeps_the_fixed_test_set():
    ds = toy(1000, test=(np.zeros((10, 2)), np.zeros(10, np.int64)))
    split = plench_split(ds, 0)
    assert split["test"] is None and len(split["val"]) == 100 and len(split["train"]) == 900
    order = np.arange(1000)
    np.random.RandomState(seed_hash(0)).shuffle(order)
    assert split["val"].tolist() == order[:100].tolist()
    with pytest.raises(ConfigError, match="holdout_fraction"):
        plench_split(ds, 0, holdout_fraction=1.0)


# ------------------------------------------------------------------------------------------ image views
@pytest.fixture(scope="module")
def cifar_like():
    return np.random.default_rng(0).integers(0, 256, (16, 32, 32, 3), dtype=np.uint8)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_views_have_shapes_dtypes_and_are_deterministic(cifar_like):
    digits = load_pll_dataset("PLDigits-Vaguest", modality="image").X[:16]
    for views, images, shape in ((CifarViews(), cifar_like, (16, 3, 32, 32)), (DigitsViews(), digits, (16, 1, 8, 8))):
        for name in VIEW_NAMES:
            out = views[name](images, gen(1))
            assert out.shape == shape and out.dtype == torch.float32
            assert torch.equal(out, views[name](images, gen(1)))
            if name != "original":
                assert not torch.equal(out, views[name](images, gen(2)))
                assert not torch.equal(out, views.original(images))


def test_normalisation_constants():
    constant = np.full((2, 32, 32, 3), 128, dtype=np.uint8)
    out = CifarViews().original(constant)
    expected = (128 / 255 - np.array(CIFAR_MEAN)) / np.array(CIFAR_STD)
    assert np.allclose(out[0, :, 5, 5].numpy(), expected, atol=1e-6)
    assert CIFAR_MEAN == (0.4922, 0.4832, 0.4486) and CIFAR_STD == (0.2456, 0.2419, 0.2605)
    pixels = np.round(load_digits().images * 255 / 16) / 255  # the digits constants are their own statistics
    assert pixels.mean() == pytest.approx(DIGITS_MEAN[0], abs=1e-3)
    assert pixels.std() == pytest.approx(DIGITS_STD[0], abs=1e-3)


def shifted(image, dy, dx):
    """image (C, H, W) moved by (dy, dx) with zero fill."""
    out = torch.zeros_like(image)
    H, W = image.shape[1:]
    out[:, max(dy, 0):H + min(dy, 0), max(dx, 0):W + min(dx, 0)] = \
        image[:, max(-dy, 0):H + min(-dy, 0), max(-dx, 0):W + min(-dx, 0)]
    return out


@pytest.mark.parametrize("views, pad, flips", [(CifarViews(), 4, (False, True)), (DigitsViews(), 1, (False,))])
def test_weak_view_is_a_shift_of_the_image(cifar_like, views, pad, flips):
    images = cifar_like if pad == 4 else load_pll_dataset("digits-USS", modality="image").X[:16]
    raw = torch.as_tensor(images).permute(0, 3, 1, 2).float() / 255
    weak = views.weak(images, gen(0)) * torch.tensor(views.std).view(1, -1, 1, 1) + \
        torch.tensor(views.mean).view(1, -1, 1, 1)
    moved = 0
    for image, out in zip(raw, weak):
        matches = [(dy, dx) for flip in flips for dy in range(-pad, pad + 1) for dx in range(-pad, pad + 1)
                   if torch.allclose(shifted(image.flip(-1) if flip else image, dy, dx), out, atol=1e-5)]
        assert matches, "the weak view must be the image shifted (and, for CIFAR, maybe mirrored)"
        moved += matches[0] != (0, 0)
    assert moved >= 8


def test_cutout_fills_a_square_of_the_right_size():
    ones = torch.ones(200, 3, 32, 32)
    holes = cutout(ones, 16, gen(0), fill=0.0)[:, 0] == 0  # (B, H, W)
    for hole in holes:
        rows, cols = hole.any(1).nonzero().flatten(), hole.any(0).nonzero().flatten()
        assert hole.sum() == len(rows) * len(cols)  # one solid rectangle
        assert len(rows) <= 16 and len(cols) <= 16 and len(rows) >= 8 and len(cols) >= 8  # clipped at the border
    interior = [h for h in holes if not (h[0].any() or h[-1].any() or h[:, 0].any() or h[:, -1].any())]
    assert len(interior) > 20 and all(h.sum() == 16 * 16 for h in interior)  # unclipped: exactly 16 x 16
    odd = cutout(torch.ones(50, 1, 8, 8), 3, gen(1), fill=-1.0)
    assert ((odd == -1).sum((1, 2, 3)) <= 9).all() and ((odd == -1).sum((1, 2, 3)) == 9).any()


def test_randaugment_ends_with_a_grey_cutout_square():
    out = rand_augment(torch.zeros(100, 3, 32, 32, dtype=torch.uint8), 3, gen(0))
    fill = (out == torch.tensor([125, 123, 114], dtype=torch.uint8).view(1, 3, 1, 1)).all(1)  # (B, H, W)
    sides = []
    for hole in fill:
        rows, cols = hole.any(1).nonzero().flatten(), hole.any(0).nonzero().flatten()
        assert hole.sum() == len(rows) * len(cols)  # one solid rectangle (or nothing)
        sides += [max(len(rows), len(cols))]
    assert max(sides) <= 17 and np.mean(np.array(sides) > 0) > 0.9  # side U(0, 16) px, PIL's inclusive corners


def noise_images(n=128, seed=0, shape=(3, 32, 32)):
    """uint8 noise, each image in its own range (so autocontrast and equalize change it, image by image)."""
    g = gen(seed)
    low = torch.randint(0, 100, (n, 1, 1, 1), generator=g)
    span = torch.randint(20, 156, (n, 1, 1, 1), generator=g)
    return (low + torch.rand((n, *shape), generator=g) * span).to(torch.uint8)


@pytest.mark.parametrize("shape", [(3, 32, 32), (1, 24, 40)])
@pytest.mark.parametrize("k", range(len(RANDAUGMENT_OPS)))
def test_each_batched_randaugment_op_is_torchvisions_op_image_by_image(k, shape):
    """Each op on a whole batch with per-image magnitudes gives each image what torchvision's op gives it alone
    (one grey level at most, where a float blend lands on a whole number differently; almost never), for RGB and
    for grey, non-square images."""
    images = noise_images(shape=shape)
    op, low, high = RANDAUGMENT_OPS[k]
    v = low + (high - low) * torch.rand(len(images), generator=gen(k)).double()
    alone = torch.stack([op(img, m) for img, m in zip(images, v.tolist())])
    batched = BATCHED_OPS[k](images, v)
    diff = (alone.int() - batched.int()).abs()
    assert batched.dtype == torch.uint8 and batched.shape == images.shape
    assert diff.max() <= 1 and (diff > 0).float().mean() < 1e-3
    if k in (0, 4):  # autocontrast and equalize take no magnitude, but each image's own range
        assert not torch.equal(batched, images)
    elif k != 5 and not (k == 2 and shape[0] == 1):  # the magnitude matters (not for identity, or grey saturation)
        assert not torch.equal(batched, BATCHED_OPS[k](images, v.flip(0)))


def test_batched_randaugment_draws_what_the_per_image_one_draws():
    images = noise_images(256, 1)
    for seed in range(3):
        batched, alone = rand_augment(images, 3, gen(seed)), rand_augment_per_image(images, 3, gen(seed))
        diff = (batched.int() - alone.int()).abs()
        assert (diff > 0).float().mean() < 1e-3  # the same ops, magnitudes and Cutout squares
        assert not torch.equal(batched, rand_augment(images, 3, gen(seed + 10)))


@pytest.mark.parametrize("size, channels", [(32, 3), (8, 1)])
def test_members_views_built_together_are_each_members_own_bit_for_bit(size, channels):
    """Stacked runs build a view once for their concatenated batches (``MemberGenerators``): member g's rows are
    exactly the view its run alone draws from its own generator, for every view of both recipes."""
    views, members, rows = views_for("image", size), 3, 24
    raws = [torch.randint(0, 256, (rows, size, size, channels), dtype=torch.uint8, generator=gen(10 + g))
            for g in range(members)]
    for name in VIEW_NAMES:
        together = views[name](torch.cat(raws), generator=MemberGenerators([gen(g) for g in range(members)], rows))
        for g, raw in enumerate(raws):
            assert torch.equal(together[g * rows:(g + 1) * rows], views[name](raw, generator=gen(g))), (name, g)
    other = views.strong(torch.cat(raws), generator=MemberGenerators([gen(g + 1) for g in range(members)], rows))
    assert not torch.equal(other[:rows], views.strong(raws[0], generator=gen(0)))  # the draws are the members'
    with pytest.raises(ConfigError, match="concatenated batches"):
        views.weak(torch.cat(raws[:2]), generator=MemberGenerators([gen(g) for g in range(members)], rows))


def test_batched_resized_crop_is_torchvisions_float_resize_exactly_and_its_uint8_one_within_a_level():
    images = noise_images(64, 2)
    out = random_resized_crop(images, 32, gen(5))
    u = torch.rand(64, 10, 4, generator=gen(5))  # the same draws
    boxes = [_resized_crop_box(32, 32, u[b]) for b in range(64)]
    as_float = torch.stack([TF.resized_crop(img.float(), *box, size=[32, 32], antialias=True) for img, box in
                            zip(images, boxes)]).round().clamp(0, 255).to(torch.uint8)
    assert torch.equal(out, as_float)  # torchvision's float path (its CUDA path for uint8)
    as_uint8 = torch.stack([TF.resized_crop(img, *box, size=[32, 32], antialias=True) for img, box in
                            zip(images, boxes)])  # the CPU's fixed-point uint8 kernel
    assert (out.int() - as_uint8.int()).abs().max() <= 1
    smaller = random_resized_crop(images, 16, gen(5))  # downsampling needs the antialiasing filter: image by image
    assert torch.equal(smaller, torch.stack([TF.resized_crop(img, *box, size=[16, 16], antialias=True)
                                             for img, box in zip(images, boxes)]))


def test_views_for_picks_the_recipe():
    x = np.random.default_rng(0).normal(size=(4, 5))
    tab = views_for("tabular")
    assert all(torch.equal(tab[name](x), torch.as_tensor(x, dtype=torch.float32)) for name in VIEW_NAMES)
    assert isinstance(views_for("Lost"), TabularViews) and isinstance(views_for("digits-USS"), TabularViews)
    assert isinstance(views_for("PLDigits-Aggregate", 8), DigitsViews)
    assert isinstance(views_for("PLCIFAR10_Vaguest"), CifarViews) and views_for("image", 32).size == 32
    with pytest.raises(ConfigError, match="Lost has no 32-pixel image form"):
        views_for("Lost", 32)
    with pytest.raises(ConfigError, match="needs image_size"):
        views_for("image")
    with pytest.raises(ConfigError, match="unknown view"):
        tab["medium"]
    with pytest.raises(ConfigError, match=r"uint8 batch \(B, H, W, C\)"):
        CifarViews().weak(np.zeros((2, 32, 32)))


def test_resized_crop_box_hand_computed():
    # area 60 % of 32 x 32 at aspect 1: a 25 x 25 box; offsets are fractions of the 8 free pixels
    u = torch.tensor([[0.5, 0.5, 0.0, 0.999]] * 10)
    assert _resized_crop_box(32, 32, u) == (0, 7, 25, 25)
    # full area at aspect 4/3 never fits in 10 tries: the fallback is the whole square image
    assert _resized_crop_box(32, 32, torch.full((10, 4), 0.9999)) == (0, 0, 32, 32)
    assert _resized_crop_box(10, 40, torch.full((10, 4), 0.9999)) == (0, 13, 10, 13)  # too wide: 4/3 centred


def test_class_share_in_test_is_the_constant_predictors_accuracy():
    from plench.data import class_share_in_test

    ds = load_pll_dataset("digits-USS")
    shares = [100 * np.mean(ds.y[plench_split(ds, t)["test"]] == 0) for t in range(3)]
    assert class_share_in_test(ds, 0, 3) == pytest.approx(np.mean(shares))
    assert sum(class_share_in_test(ds, c, 1) for c in range(10)) == pytest.approx(100.0)


def test_load_available_skips_absent_datasets_with_the_reason_and_keeps_the_rest(tmp_path):
    """The PALM files only: Table 5's PALM rows are loaded, PLCIFAR10 skipped with why (not a crash)."""
    from plench.data import load_available

    X, S, y = palm_arrays()
    write_palm(tmp_path / "lost.mat", X, S, y)
    loaded, skipped = load_available(["Lost", "PLCIFAR10_Aggregate", "digits-USS"], data_dir=tmp_path)
    assert list(loaded) == ["Lost", "digits-USS"]
    assert list(skipped) == ["PLCIFAR10_Aggregate"]
    assert skipped["PLCIFAR10_Aggregate"] == "data not found: The PLCIFAR10 annotations not found."
    (tmp_path / "Birdsong.mat").write_bytes(b"MATLAB 5.0 MAT-file, then nothing")  # present but damaged: raises
    with pytest.raises(DataFormatError, match="Birdsong"):
        load_available(["Lost", "Birdsong"], data_dir=tmp_path)
    with pytest.raises(DataNotFoundError, match="MSRCv2 not found"):  # nothing at all to show
        load_available(["MSRCv2", "English"], data_dir=tmp_path)
