"""The CAMUS analogue of Table 6 / Fig. 9 (benchmark_n.camus): stand-in data, the real-format loader, the noise, the
U-Net evaluation, the table and the claims."""
import gzip
import struct

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import ndimage

from benchmark_n.camus import (ED, ES, METRICS, TABLE6_COLUMNS, EchoData, claims, clean_vs_noisy, ef_swing,
                               ellipse_lv_pair, evaluate, evaluate_masks, figure9, figure9_data, jitter_mask,
                               largest_component, lv_mask, mask_ef, move_boundary, noise_parameters, noisy_lv_masks,
                               predict, split_patients, synthetic_camus, table6, train_unet)
from benchmark_n.camus_files import load_camus, read_info_cfg, read_mhd, read_nifti
from benchmark_n.metrics import area_length_volume, dice, ejection_fraction
from shared.errors import ConfigError, DataFormatError, DataNotFoundError

LFS_POINTER = ("version https://git-lfs.github.com/spec/v1\n"
               "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 91876\n")


@pytest.fixture(scope="module")
def data():
    return synthetic_camus(12, seed=0)


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ------------------------------------------------------------------------------------------------ synthetic data
def test_synthetic_is_deterministic_per_seed_and_per_patient(data):
    again = synthetic_camus(12, seed=0)
    assert np.array_equal(again.images, data.images) and np.array_equal(again.masks, data.masks)
    assert np.array_equal(again.ef, data.ef)
    head = synthetic_camus(3, seed=0)  # patient i depends on (seed, i) only
    assert np.array_equal(head.images, data.images[:3]) and np.array_equal(head.masks, data.masks[:3])
    other = synthetic_camus(3, seed=1)
    assert not np.array_equal(other.masks, data.masks[:3])
    assert data.images.shape == (12, 2, 64, 64) and data.images.dtype == np.float32
    assert data.masks.shape == (12, 2, 64, 64) and data.masks.dtype == bool
    assert 0 <= data.images.min() and data.images.max() <= 1
    assert data.spacing.shape == (12, 2) and np.allclose(data.spacing, 130 / 64)


def test_synthetic_es_is_smaller_and_ef_in_range(data):
    areas = data.masks.sum(axis=(2, 3))
    assert np.all(areas[:, ES] < areas[:, ED])
    assert np.all(areas[:, ES] > 100)  # a real cavity, not a speck
    assert np.all((data.ef > 34) & (data.ef < 71))
    assert np.ptp(data.ef) > 10  # patient-specific EFs, not one value
    assert np.allclose(data.ef, data.ef_reference, atol=1.0)  # the raster hits the drawn target
    # the LV is one blob fully inside the image, darker than the 3-pixel band around it (its wall, mostly)
    for image, m in zip(data.images.reshape(-1, 64, 64), data.masks.reshape(-1, 64, 64)):
        assert np.array_equal(largest_component(m), m)
        assert not (m[0].any() or m[-1].any() or m[:, 0].any() or m[:, -1].any())
        band = ndimage.binary_dilation(m, iterations=3) & ~m
        assert image[m].mean() < 0.8 * image[band].mean()


def test_true_ef_is_area_length_of_the_masks(data):
    for i in (0, 5, 11):
        s = data.spacing[i]
        expected = ejection_fraction(area_length_volume(data.masks[i, ED], s), area_length_volume(data.masks[i, ES], s))
        assert data.ef[i] == pytest.approx(expected, abs=1e-9)
    # an empty ES has volume 0 (EF 100); an empty ED leaves EF undefined
    m = data.masks[0]
    assert mask_ef(m[ED], np.zeros_like(m[ES])) == 100.0
    assert np.isnan(mask_ef(np.zeros_like(m[ED]), m[ES]))


# ------------------------------------------------------------------------------------------------ noise
def test_noise_dilates_es_jitters_both_and_reproduces(data):
    assert noise_parameters("low") == {"sd": 2.0, "kernel": 3}
    noisy = noisy_lv_masks(data.masks, seed=0)
    assert noisy.shape == data.masks.shape and noisy.dtype == bool
    ratio = noisy.sum(axis=(2, 3)) / data.masks.sum(axis=(2, 3))
    assert np.all(ratio[:, ES] > 1.1)  # ES dilated: every ES mask grows
    assert np.all(np.abs(ratio[:, ED] - 1) < 0.2)  # ED only jittered: the area stays close
    assert np.mean(ratio[:, ES]) > np.mean(ratio[:, ED]) + 0.2
    for i in range(len(data)):  # the boundary moved on every frame
        assert not np.array_equal(noisy[i, ED], data.masks[i, ED])
        assert 0.75 < dice(noisy[i, ED], data.masks[i, ED]) < 0.99
    assert np.array_equal(noisy_lv_masks(data.masks, seed=0), noisy)
    assert not np.array_equal(noisy_lv_masks(data.masks, seed=1), noisy)
    # patient i's noise does not depend on the others
    assert np.array_equal(noisy_lv_masks(data.masks[:4], seed=0), noisy[:4])
    # sampled parameters also dilate ES on average
    sampled = noisy_lv_masks(data.masks, seed=0, sample=True)
    assert np.mean(sampled[:, ES].sum(axis=(1, 2)) / data.masks[:, ES].sum(axis=(1, 2))) > 1.05


def test_jitter_alone_keeps_the_area_within_a_bound():
    mask = lv_mask(64, 20, 10)
    rng = np.random.default_rng(0)
    areas = np.array([jitter_mask(mask, 2.0, rng).sum() for _ in range(20)]) / mask.sum()
    assert np.all(np.abs(areas - 1) < 0.2) and abs(areas.mean() - 1) < 0.1
    assert np.array_equal(jitter_mask(mask, 0.0, rng), mask)  # no jitter: the contour refills to the mask


def test_supersampled_noise_is_milder_and_zero_noise_roundtrips(data):
    fine = noisy_lv_masks(data.masks, seed=0, noise_pixel_mm=0.5, spacing=data.spacing)
    coarse = noisy_lv_masks(data.masks, seed=0)
    grow_fine = fine[:, ES].sum(axis=(1, 2)) / data.masks[:, ES].sum(axis=(1, 2))
    grow_coarse = coarse[:, ES].sum(axis=(1, 2)) / data.masks[:, ES].sum(axis=(1, 2))
    assert np.all(grow_fine > 1.0) and np.all(grow_fine < grow_coarse)
    with pytest.raises(ConfigError, match="spacing"):
        noisy_lv_masks(data.masks, seed=0, noise_pixel_mm=0.5)
    with pytest.raises(ConfigError, match="tier"):
        noisy_lv_masks(data.masks, seed=0, tier="extreme")


# ------------------------------------------------------------------------------------------------ real-format files
def write_nifti(path, array: np.ndarray, spacing=(1.0, 1.0), *, big_endian: bool = False, units: int = 2,
                slope: float = float("nan")) -> None:
    """A minimal single-file NIfTI-1 (.nii or .nii.gz) of a 2-D (H, W) array, stored x fastest as (W, H, 1) with
    pixdim (x, y) = (spacing[1], spacing[0]), as CAMUS ships (checked against nibabel 5.4 and SimpleITK 2.5)."""
    codes = {np.dtype("uint8"): 2, np.dtype("int16"): 4, np.dtype("float32"): 16, np.dtype("uint16"): 512}
    array = np.asarray(array)
    o = ">" if big_endian else "<"
    h, w = array.shape
    header = bytearray(348)
    struct.pack_into(o + "i", header, 0, 348)
    struct.pack_into(o + "8h", header, 40, 3, w, h, 1, 1, 1, 1, 1)
    struct.pack_into(o + "hh", header, 70, codes[array.dtype], array.dtype.itemsize * 8)
    struct.pack_into(o + "8f", header, 76, 1.0, spacing[1], spacing[0], 1.0, 0, 0, 0, 0)
    struct.pack_into(o + "f", header, 108, 352.0)
    struct.pack_into(o + "2f", header, 112, slope, 0.0)
    header[123] = units
    struct.pack_into(o + "h", header, 252, 1)  # qform_code: scanner
    header[344:348] = b"n+1\x00"
    payload = bytes(header) + b"\x00" * 4 + array.astype(array.dtype.newbyteorder(o)).tobytes(order="C")
    path.write_bytes(gzip.compress(payload) if str(path).endswith(".gz") else payload)


def write_mhd(path, array: np.ndarray, spacing=(1.0, 1.0)) -> None:
    """A MetaImage header + raw pair as the older CAMUS release has them (3-D with one slice, MET_UCHAR)."""
    h, w = array.shape
    raw = path.with_suffix(".raw")
    path.write_text("ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
                    "CompressedData = False\nTransformMatrix = 1 0 0 0 1 0 0 0 1\nOffset = 0 0 0\n"
                    f"ElementSpacing = {spacing[1]} {spacing[0]} 1.54\nDimSize = {w} {h} 1\n"
                    f"ElementType = MET_UCHAR\nElementDataFile = {raw.name}\n")
    raw.write_bytes(np.asarray(array, np.uint8).tobytes())


def _camus_frame(rng, h: int = 48, w: int = 40, shrink: float = 1.0):
    """(image uint8, label map uint8) with a vertical LV ellipse (label 1), its wall (2) and an atrium (3)."""
    rows, cols = np.mgrid[:h, :w]
    lv = ((rows - 20) / (14 * shrink)) ** 2 + ((cols - 20) / (7 * shrink)) ** 2 <= 1
    wall = (((rows - 20) / (14 * shrink + 3)) ** 2 + ((cols - 20) / (7 * shrink + 3)) ** 2 <= 1) & ~lv
    atrium = ((rows - 40) / 5) ** 2 + ((cols - 20) / 6) ** 2 <= 1
    labels = np.zeros((h, w), np.uint8)
    labels[wall], labels[atrium], labels[lv] = 2, 3, 1
    image = rng.integers(0, 256, (h, w)).astype(np.uint8)
    return image, labels


def make_camus_tree(root, *, fmt="nifti", patients=(1, 2), spacing=(0.3, 0.6), bom=False, info=True):
    """A tiny CAMUS release: the current database_nifti/ layout or the older training/ one with .mhd + .raw."""
    rng = np.random.default_rng(0)
    folder = root / ("database_nifti" if fmt == "nifti" else "training")
    for p in patients:
        patient = folder / f"patient{p:04d}"
        patient.mkdir(parents=True)
        for frame, shrink in (("ED", 1.0), ("ES", 0.8)):
            image, labels = _camus_frame(rng, shrink=shrink)
            for suffix, array in (("", image), ("_gt", labels)):
                stem = patient / f"{patient.name}_4CH_{frame}{suffix}"
                if fmt == "nifti":
                    write_nifti(stem.with_name(stem.name + ".nii.gz"), array, spacing)
                else:
                    write_mhd(stem.with_name(stem.name + ".mhd"), array, spacing)
        if info:
            key = "EF" if fmt == "nifti" else "LVef"
            text = f"ED: 1\nES: 13\nNbFrame: 13\nSex: F\nAge: 61\nImageQuality: Good\n{key}: {50 + p}.5\n"
            (patient / "Info_4CH.cfg").write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return root


def test_nifti_and_mhd_readers_give_the_stored_array_and_spacing(tmp_path):
    array = (np.arange(12 * 7).reshape(12, 7) % 251).astype(np.uint8)
    for name, kwargs in (("a.nii.gz", {}), ("b.nii", {"big_endian": True}), ("c.nii.gz", {"units": 3})):
        write_nifti(tmp_path / name, array, (0.25, 0.5), **kwargs)
        got, spacing = read_nifti(tmp_path / name)
        assert np.array_equal(got, array) and got.shape == (12, 7)
        assert np.allclose(spacing, (0.25, 0.5) if name != "c.nii.gz" else (0.25e-3, 0.5e-3))
    write_nifti(tmp_path / "s.nii", array.astype(np.int16), slope=2.0)
    assert np.array_equal(read_nifti(tmp_path / "s.nii")[0], 2.0 * array)
    write_mhd(tmp_path / "d.mhd", array, (0.154, 0.308))
    got, spacing = read_mhd(tmp_path / "d.mhd")
    assert np.array_equal(got, array) and np.allclose(spacing, (0.154, 0.308))
    (tmp_path / "e.nii.gz").write_bytes(gzip.compress(b"\x00" * 400))
    with pytest.raises(DataFormatError, match="not a NIfTI"):
        read_nifti(tmp_path / "e.nii.gz")
    (tmp_path / "d.raw").write_bytes(b"\x00" * 10)
    with pytest.raises(DataFormatError, match="truncated"):
        read_mhd(tmp_path / "d.mhd")
    (tmp_path / "d.raw").unlink()
    with pytest.raises(DataNotFoundError, match="d.raw"):
        read_mhd(tmp_path / "d.mhd")


@pytest.mark.parametrize("fmt", ["nifti", "mhd"])
def test_load_camus_reads_both_release_layouts(tmp_path, fmt):
    root = make_camus_tree(tmp_path, fmt=fmt, spacing=(0.3, 0.6), bom=True)
    data = load_camus(root, size=32)
    assert data.ids == ["patient0001", "patient0002"] and data.source == f"camus-{fmt}"
    assert data.images.shape == (2, 2, 32, 32) and data.masks.dtype == bool
    assert 0 <= data.images.min() and data.images.max() <= 1
    assert np.allclose(data.spacing, [[48 * 0.3 / 32, 40 * 0.6 / 32]] * 2)  # per-axis rescaled to the working size
    assert np.allclose(data.ef_reference, [51.5, 52.5])  # from Info_4CH.cfg despite the byte-order mark
    areas = data.masks.sum(axis=(2, 3))
    assert np.all(areas[:, ES] < areas[:, ED])  # LV label 1 only: the wall and atrium are not in the mask
    expected = [mask_ef(m[ED], m[ES], s) for m, s in zip(data.masks, data.spacing)]
    assert np.allclose(data.ef, expected) and np.all((data.ef > 20) & (data.ef < 60))
    # the LV mask is label 1 resized: its physical area matches the original ellipse's within a few %
    physical = data.masks[0, ED].sum() * np.prod(data.spacing[0])
    assert physical == pytest.approx(np.pi * 14 * 7 * 0.3 * 0.6, rel=0.08)
    assert load_camus(root / ("database_nifti" if fmt == "nifti" else "training"), size=32,
                      patients=[2]).ids == ["patient0002"]


def test_load_camus_errors_name_the_file(tmp_path):
    with pytest.raises(DataNotFoundError, match="does not exist"):
        load_camus(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataNotFoundError, match="patient0001_4CH_ED.nii.gz"):
        load_camus(tmp_path / "empty")
    root = make_camus_tree(tmp_path / "release", patients=(1, 2, 3))
    gt = root / "database_nifti" / "patient0002" / "patient0002_4CH_ES_gt.nii.gz"
    gt.unlink()
    with pytest.raises(DataNotFoundError, match="patient0002_4CH_ES_gt.nii.gz"):
        load_camus(root, size=32)
    assert load_camus(root, size=32, missing="skip").ids == ["patient0001", "patient0003"]
    with pytest.raises(DataNotFoundError, match="patient0009"):
        load_camus(root, size=32, patients=[9])
    with pytest.raises(DataNotFoundError, match=r"patient0001_4CH_ED\.mhd"):  # the other format was asked for
        load_camus(root, size=32, fmt="mhd", patients=[1])
    image = root / "database_nifti" / "patient0003" / "patient0003_4CH_ED.nii.gz"
    image.write_text(LFS_POINTER)
    with pytest.raises(DataFormatError, match=r"patient0003_4CH_ED\.nii\.gz is a git-LFS pointer"):
        load_camus(root, size=32, patients=[3])
    cfg = root / "database_nifti" / "patient0001" / "Info_4CH.cfg"
    cfg.write_text(LFS_POINTER)
    with pytest.raises(DataFormatError, match="Info_4CH.cfg is a git-LFS pointer"):
        load_camus(root, size=32, patients=[1])
    with pytest.raises(ConfigError, match="view"):
        load_camus(root, view="3CH")


def test_read_info_cfg_handles_bom_and_both_releases(tmp_path):
    path = tmp_path / "Info_4CH.cfg"
    path.write_bytes(b"\xef\xbb\xbfED: 1\r\nES: 15\r\nLVedv: 118.5\r\nLVesv: 57.2\r\nLVef: 51.7\r\n")
    info = read_info_cfg(path)
    assert info["ED"] == "1" and info["LVef"] == "51.7" and info["ES"] == "15"


# ------------------------------------------------------------------------------------------------ model and metrics
class _Oracle(torch.nn.Module):
    """A "model" whose LV logit is the input itself: fed the masks as images, it predicts them perfectly."""

    def forward(self, x):
        return torch.cat([1 - 2 * x, 2 * x - 1], dim=1)


def test_evaluate_on_perfect_predictions(data):
    frame = evaluate(_Oracle(), data.masks.astype(np.float32), data.masks, data.spacing, data.ids)
    assert list(frame.patient) == data.ids
    assert np.allclose(frame.dice_es, 100) and np.allclose(frame.dice_ed, 100)
    assert np.allclose(frame.ef_error, 0) and np.allclose(frame.ef_pred, data.ef)
    assert np.allclose(frame.hd_ed, 0) and not frame.pred_empty.any()
    # a one-pixel dilation of ED: Dice drops, HD = one pixel in mm, EF moves
    grown = data.masks.copy()
    grown[:, ED] = np.stack([m | np.roll(m, 1, axis=0) for m in data.masks[:, ED]])
    worse = evaluate_masks(grown, data.masks, 2.0)
    assert np.all(worse.dice_ed < 100) and np.allclose(worse.dice_es, 100)
    assert np.allclose(worse.hd_ed, 2.0) and np.all(worse.ef_error > 0)


def test_predict_keeps_the_largest_component():
    images = np.zeros((1, 2, 16, 16), np.float32)
    images[0, :, 2:8, 2:8] = 1  # 36 px
    images[0, :, 12:14, 12:14] = 1  # 4 px
    pred = predict(_Oracle(), images)
    assert pred.shape == images.shape and pred[0, ED].sum() == 36 and not pred[0, ES, 12:14, 12:14].any()


def test_training_learns_and_is_reproducible(data, one_thread):
    hp = {"epochs": 4, "width": 4}
    model = train_unet(data.images[:6], data.masks[:6], hp, seed=0)
    again = train_unet(data.images[:6], data.masks[:6], hp, seed=0)
    assert [h["loss"] for h in model.history] == [h["loss"] for h in again.history]
    assert model.history[-1]["loss"] < model.history[0]["loss"]
    frame = evaluate(model, data.images[6:], data.masks[6:], data.spacing[6:])
    assert set(METRICS) <= set(frame.columns) and len(frame) == 6
    with pytest.raises(ConfigError, match="hyperparameter"):
        train_unet(data.images[:2], data.masks[:2], {"epoch": 1})


def test_clean_vs_noisy_smoke(one_thread):
    small = synthetic_camus(16, seed=3)
    run = clean_vs_noisy(small, seed=0, hp={"epochs": 2, "width": 4}, test_fraction=0.25)
    assert len(run["test"]) == 4 and len(run["train"]) == 12
    assert set(run["train"]).isdisjoint(run["test"])
    assert run["noisy_masks"].shape == (12, 2, 64, 64)
    table = table6(run["clean"], run["noisy"])
    assert list(table.training) == ["clean", "noisy"] and table.n_patients.tolist() == [4, 4]
    train, test = split_patients(16, 0.25, seed=0)
    assert np.array_equal(train, run["train"]) and np.array_equal(test, run["test"])


# ------------------------------------------------------------------------------------------------ table and claims
def _per_patient(dice_es, dice_ed, ef_error, hd_ed, n=3):
    return pd.DataFrame({"patient": [str(i) for i in range(n)], "dice_es": dice_es, "dice_ed": dice_ed,
                         "ef_error": ef_error, "hd_ed": hd_ed, "pred_empty": False})


def test_table6_columns_and_seed_aggregation():
    clean = [_per_patient([90, 92, 94], 93, 2.0, 5.0), _per_patient([88, 90, 92], 95, 3.0, 6.0)]
    noisy = [_per_patient(80, 88, 5.0, 9.0), _per_patient(84, 86, 4.0, 11.0)]
    table = table6(clean, noisy)
    assert tuple(table.columns[:5]) == TABLE6_COLUMNS
    assert list(table.training) == ["clean", "noisy"]
    row = table.set_index("training").loc["clean"]
    assert row.dice_es == pytest.approx(91) and row.dice_es_sd == pytest.approx(np.std([92, 90], ddof=1))
    assert row.dice_ed == pytest.approx(94) and row.n_seeds == 2 and row.n_patients == 3
    single = table6(clean[0], noisy[0])
    assert single.n_seeds.tolist() == [1, 1] and single.dice_es_sd.isna().all()
    with pytest.raises(DataFormatError, match="dice_ed"):
        table6(clean[0].drop(columns="dice_ed"), noisy[0])


def _table(clean, noisy):
    return pd.DataFrame([{"training": "clean", **dict(zip(METRICS, clean))},
                         {"training": "noisy", **dict(zip(METRICS, noisy))}])


def test_claims_verdicts_on_hand_made_tables():
    paper = claims(_table((86.9, 91.1, 2.1, 6.3), (82.1, 87.5, 4.5, 11.25)))
    assert [c["verdict"] for c in paper] == ["yes"] * 4 + ["not run"]  # no swing given
    assert all({"claim", "verdict", "detail"} <= set(c) for c in paper)
    reversed_ = claims(_table((80.0, 91.1, 5.0, 12.0), (82.1, 87.5, 4.5, 11.25)))
    assert [c["verdict"] for c in reversed_[:4]] == ["no", "yes", "no", "no"]
    missing = claims(_table((86.9, np.nan, 2.1, 6.3), (82.1, 87.5, np.nan, 11.25)))
    assert [c["verdict"] for c in missing[:4]] == ["yes", "not run", "not run", "yes"]
    assert [c["verdict"] for c in claims(None)] == ["not run"] * 5
    only_clean = claims(_table((86.9, 91.1, 2.1, 6.3), (82.1, 87.5, 4.5, 11.25)).iloc[:1])
    assert [c["verdict"] for c in only_clean] == ["not run"] * 5


def test_ef_swing_brackets_the_unperturbed_ef_and_feeds_the_claim():
    ed, es, ef = ellipse_lv_pair(45.0, size=128)
    assert ef == pytest.approx(45.0, abs=0.5)
    swing = ef_swing(ed, es)
    assert swing["ef"] == pytest.approx(ef)
    assert swing["ef_min"] < swing["es_only"][0] < swing["ef"] < swing["es_only"][1] < swing["ef_max"]
    assert swing["ed_only"][0] < swing["ef"] < swing["ed_only"][1]
    changes = swing["table"]
    assert len(changes) == 9 and np.allclose(changes.ed_area_change.abs().max(), 0.05, atol=0.01)
    # moving ES out (bigger ESV) lowers the EF; moving ED out raises it
    lookup = changes.set_index(["ed_change", "es_change"]).ef
    assert lookup[(0.0, 0.05)] < ef < lookup[(0.0, -0.05)] and lookup[(-0.05, 0.0)] < ef < lookup[(0.05, 0.0)]
    linear = ef_swing(ed, es, measure="linear")
    assert linear["ef_max"] - linear["ef_min"] > swing["ef_max"] - swing["ef_min"]  # 5 % of length > 5 % of area
    record = claims(None, swing)[-1]
    assert record["verdict"] == "yes"  # the +-5 % changes reach 39 % and 50 %
    tiny = ef_swing(ed, es, relative=0.01)
    assert claims(None, tiny)[-1]["verdict"] == "no"
    off = ef_swing(*ellipse_lv_pair(60.0, size=96)[:2])
    assert claims(None, off)[-1]["verdict"] == "not run"
    assert move_boundary(ed, 0.0).sum() == ed.sum()


def test_figure9(data):
    noisy = noisy_lv_masks(data.masks, seed=0)
    panels = figure9_data(data.images, data.masks, noisy, patients=(0, 1), spacing=data.spacing)
    assert [p["frame"] for p in panels] == ["ES", "ED", "ES", "ED"]
    assert panels[0]["ef_clean"] == pytest.approx(data.ef[0]) and panels[0]["dice"] < 100
    fig = figure9(data.images, data.masks, noisy, patients=(0, 1), spacing=data.spacing)
    assert len(fig.axes) == 8


def test_echo_data_subset_and_checks(data):
    part = data.subset([3, 1])
    assert part.ids == [data.ids[3], data.ids[1]] and np.array_equal(part.masks[0], data.masks[3])
    with pytest.raises(DataFormatError):
        EchoData(data.images[:, :1], data.masks[:, :1], data.ef, data.spacing, data.ids, "x")
    with pytest.raises(ConfigError):
        synthetic_camus(2, size=30)


def test_written_release_reads_back_through_the_real_loader(tmp_path):
    from benchmark_n.camus import synthetic_camus
    from benchmark_n.camus_files import write_camus_mhd
    data = synthetic_camus(3, seed=0, size=64)
    write_camus_mhd(tmp_path, data)
    back = load_camus(tmp_path, size=64)
    assert back.ids == ["patient0001", "patient0002", "patient0003"]
    assert np.array_equal(back.masks, data.masks) and np.allclose(back.images, data.images, atol=1 / 255)
    assert np.allclose(back.spacing, data.spacing) and np.allclose(back.ef_reference, np.round(data.ef, 1))
