"""The Benchmark-N noise engines (``benchmark_n.noise``) on small COCO dicts of cv2-drawn shapes."""
import copy
import json

import cv2
import numpy as np
import pytest
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO

from benchmark_n.coco import ann_to_mask, annotation_from_mask, check_coco, mask_to_rle, segmentation_fields, write_coco
from benchmark_n.noise import (
    ABLATIONS, COUNTS, ENGINES, LEGACY_V0_PRESETS, PRESETS, ablate, approximate, class_matrix, jitter, morph,
    noise_dataset, shift, sibling_flip, sibling_map,
)
from shared.errors import ConfigError, DataFormatError

H, W = 120, 160
CATEGORIES = [{"id": 1, "name": "square", "supercategory": "polygon"},
              {"id": 2, "name": "triangle", "supercategory": "polygon"},
              {"id": 3, "name": "circle", "supercategory": "round"}]  # circle: no sibling
TIERS = ("low", "mid", "high")


def draw(category: int, cx: int, cy: int, r: int, angle: float = 0.0, h: int = H, w: int = W) -> np.ndarray:
    mask = np.zeros((h, w), np.uint8)
    if category == 3:
        cv2.circle(mask, (cx, cy), r, 1, -1)
    else:
        t = angle + 2 * np.pi * np.arange(4 if category == 1 else 3) / (4 if category == 1 else 3)
        cv2.fillPoly(mask, [np.stack([cx + r * np.cos(t), cy + r * np.sin(t)], 1).round().astype(np.int32)], 1)
    return mask


def uncompressed_rle(mask: np.ndarray) -> dict:
    """COCO crowd-style RLE: run lengths in column-major order, starting with a run of 0s."""
    flat = mask.flatten(order="F")
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(flat)) + 1, [flat.size]])
    counts = np.diff(bounds).tolist()
    return {"size": list(mask.shape), "counts": ([0] if flat[0] else []) + counts}


def shapes_dataset(n_images: int = 15, seed: int = 0) -> dict:
    """2-4 squares / triangles / circles per 160x120 image (polygons), plus one compressed-RLE annotation and
    one crowd annotation (uncompressed RLE)."""
    rng = np.random.default_rng(seed)
    images = [{"id": i, "width": W, "height": H, "file_name": f"{i}.png"} for i in range(1, n_images + 1)]
    anns = []
    for image in images:
        for _ in range(rng.integers(2, 5)):
            cat, r = int(rng.integers(1, 4)), int(rng.integers(14, 30))
            mask = draw(cat, int(rng.integers(r, W - r)), int(rng.integers(r, H - r)), r, rng.uniform(0, np.pi))
            anns.append(annotation_from_mask(mask, len(anns) + 1, image["id"], cat))
    blob = draw(3, 40, 40, 20)
    anns.append({"id": len(anns) + 1, "image_id": 1, "category_id": 3, "iscrowd": 0,
                 **segmentation_fields(mask_to_rle(blob), H, W)})
    crowd = draw(1, 110, 80, 25)
    anns.append({"id": len(anns) + 1, "image_id": 2, "category_id": 1, "iscrowd": 1,
                 "segmentation": uncompressed_rle(crowd), "area": float(crowd.sum()),
                 "bbox": [float(v) for v in cv2.boundingRect(crowd)]})
    return {"info": {"description": "shapes"}, "images": images, "annotations": anns, "categories": CATEGORIES}


def squares_dataset(n: int = 2000, side: int = 24, size: int = 64) -> dict:
    """n polygon squares, one per size x size image, categories 1, 2, 3 in turn."""
    images = [{"id": i, "width": size, "height": size} for i in range(n)]
    lo, hi = (size - side) // 2, (size + side) // 2
    anns = [{"id": i, "image_id": i, "category_id": i % 3 + 1, "iscrowd": 0,
             "segmentation": [[lo, lo, hi, lo, hi, hi, lo, hi]]} for i in range(n)]
    return {"images": images, "annotations": anns, "categories": CATEGORIES}


@pytest.fixture(scope="module")
def shapes():
    return shapes_dataset()


def masks(dataset: dict) -> dict[int, np.ndarray]:
    sizes = {im["id"]: (im["height"], im["width"]) for im in dataset["images"]}
    return {a["id"]: ann_to_mask(a, *sizes[a["image_id"]]) for a in dataset["annotations"]}


def iou(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.logical_and(a, b).sum() / max(np.logical_or(a, b).sum(), 1))


def mean_iou(clean: dict, noisy: dict) -> float:
    clean_masks, crowd = masks(clean), {a["id"] for a in clean["annotations"] if a.get("iscrowd")}
    return float(np.mean([iou(m, clean_masks[i]) for i, m in masks(noisy).items() if i not in crowd]))


def by_id(dataset: dict) -> dict[int, dict]:
    return {a["id"]: a for a in dataset["annotations"]}


# ------------------------------------------------------------------------------------------------ file format
@pytest.mark.parametrize("engine, tier", [("paper", "high"), ("paper", "low"), ("legacy_v0", "hard")])
def test_json_round_trip_through_pycocotools(shapes, tmp_path, engine, tier):
    noisy = noise_dataset(shapes, engine, tier, seed=3).dataset
    path = write_coco(tmp_path / "noisy.json", noisy)
    coco = COCO(str(path))
    check_coco(json.loads(path.read_text()))
    assert set(noisy) == set(shapes) and noisy["info"] == shapes["info"]
    for ann in coco.dataset["annotations"]:
        mask = coco.annToMask(ann)
        assert mask.shape == (H, W) and mask.any()
        rle = coco.annToRLE(ann)
        assert ann["area"] == pytest.approx(float(mask_utils.area(rle)))
        assert ann["bbox"] == pytest.approx(mask_utils.toBbox(rle).tolist())
        if isinstance(ann["segmentation"], list):
            assert all(len(p) >= 6 and len(p) % 2 == 0 for p in ann["segmentation"])


def test_input_is_not_mutated_and_keys_are_kept(shapes):
    before = copy.deepcopy(shapes)
    for engine in ENGINES:
        noisy = noise_dataset(shapes, engine, "high", seed=0)
        assert noisy.dataset["images"] == shapes["images"] and noisy.dataset["images"] is not shapes["images"]
    assert shapes == before


def test_paper_polygons_are_clipped_to_the_image_unless_asked_not_to():
    corner = {"images": [{"id": i, "width": W, "height": H} for i in range(40)],
              "annotations": [{"id": i, "image_id": i, "category_id": 1, "iscrowd": 0,
                               "segmentation": [[0, 0, 30, 0, 30, 30, 0, 30]]} for i in range(40)],
              "categories": CATEGORIES}

    def vertices(dataset):
        return np.concatenate([np.reshape(p, (-1, 2)) for a in dataset["annotations"] for p in a["segmentation"]])

    clipped = vertices(noise_dataset(corner, "paper", "high", seed=0).dataset)
    assert clipped.min() >= 0 and clipped[:, 0].max() <= W and clipped[:, 1].max() <= H
    assert vertices(noise_dataset(corner, "paper", "high", seed=0, clip_to_image=False).dataset).min() < 0


# ------------------------------------------------------------------------------------------------ counts and rates
@pytest.mark.parametrize("engine", ENGINES)
def test_manifest_counts_match_the_output(shapes, engine):
    noisy = noise_dataset(shapes, engine, "high", seed=1)
    m, out, clean = noisy.manifest, by_id(noisy.dataset), by_id(shapes)
    assert m["engine"] == engine and m["tier"] == "high" and m["seed"] == 1 and set(COUNTS) <= set(m)
    assert m["annotations_in"] == len(clean) and m["kept"] == len(out)
    assert m["deleted"] + m["implicitly_deleted"] == len(set(clean) - set(out))
    changed = [i for i, a in out.items() if a["category_id"] != clean[i]["category_id"]]
    assert m["class_flipped"] == len(changed) == sum(a.get("noise", {}).get("class_flipped", 0) for a in out.values())
    assert all(out[i]["noise"]["original_category_id"] == clean[i]["category_id"] for i in changed)
    assert m["spatially_noised"] == sum(bool(a.get("noise", {}).get("spatial")) for a in out.values()) > 0
    assert m["crowd_skipped"] == 1


def test_paper_deletion_is_the_first_draw_of_the_annotation_stream(shapes):
    noisy = noise_dataset(shapes, "paper", "mid", seed=5)
    expected = {a["id"] for a in shapes["annotations"] if not a.get("iscrowd")
                and np.random.default_rng([5, ENGINES["paper"].code, a["id"]]).random() < PRESETS["mid"].p_del}
    missing = {a["id"] for a in shapes["annotations"]} - set(by_id(noisy.dataset))
    assert noisy.manifest["deleted"] == len(expected) and expected <= missing


def binomial_ok(successes: int, n: int, p: float, z: float = 4.0) -> bool:
    return abs(successes / n - p) <= z * np.sqrt(p * (1 - p) / n)


def test_paper_deletion_and_sibling_flip_rates():
    clean = squares_dataset()
    noisy = noise_dataset(clean, "paper", "low", seed=0)
    m, out = noisy.manifest, noisy.dataset["annotations"]
    assert m["implicitly_deleted"] == 0 and binomial_ok(m["deleted"], m["annotations_in"], 0.05)
    flippable = [a for a in out if a["noise"]["original_category_id"] != 3]
    assert binomial_ok(sum(a["noise"]["class_flipped"] for a in flippable), len(flippable), 0.05)
    siblings = {1: 2, 2: 1}
    assert all(a["category_id"] == siblings[a["noise"]["original_category_id"]] for a in out
               if a["noise"]["class_flipped"])
    assert all(a["category_id"] == 3 for a in out if a["noise"]["original_category_id"] == 3)


def test_v2_asis_never_changes_a_category_and_keeps_the_sibling_geometry():
    clean = squares_dataset(600)
    asis = noise_dataset(clean, "paper", "mid", seed=0, class_flip="v2_asis").dataset["annotations"]
    fixed = noise_dataset(clean, "paper", "mid", seed=0).dataset["annotations"]
    assert all(a["category_id"] == a["noise"]["original_category_id"] for a in asis)
    assert any(a["noise"]["class_flipped"] for a in fixed)
    assert [a["segmentation"] for a in asis] == [a["segmentation"] for a in fixed]


@pytest.mark.parametrize("kind, group_size", [("uniform", 3), ("superclass", None)])
def test_legacy_v0_flip_rate(kind, group_size):
    clean = squares_dataset()
    out = noise_dataset(clean, "legacy_v0", "low", seed=0, class_matrix=kind).dataset["annotations"]
    p = LEGACY_V0_PRESETS["low"].flip_class
    assert len(out) == len(clean["annotations"])
    if kind == "uniform":  # over all K = 3 categories: p (1 - 1/K)
        assert binomial_ok(sum(a["noise"]["class_flipped"] for a in out), len(out), p * (1 - 1 / group_size))
    else:  # within the super-category: p (1 - 1/2) for squares and triangles; the circle never flips
        pair = [a for a in out if a["noise"]["original_category_id"] != 3]
        assert binomial_ok(sum(a["noise"]["class_flipped"] for a in pair), len(pair), p / 2)
        assert all(a["category_id"] in (1, 2) for a in pair)
        assert all(a["category_id"] == 3 for a in out if a["noise"]["original_category_id"] == 3)


def test_legacy_v0_applies_at_most_one_spatial_noise_with_the_preset_shares():
    out = noise_dataset(squares_dataset(), "legacy_v0", "mid", seed=0).dataset["annotations"]
    kinds = [a["noise"]["spatial"] for a in out]
    assert all(len(k) <= 1 for k in kinds)
    assert binomial_ok(sum(not k for k in kinds), len(kinds), 0.25)
    assert binomial_ok(sum(k == ["approximation"] for k in kinds), len(kinds), 0.25)


def test_class_matrix_rows():
    uniform, superclass = class_matrix(CATEGORIES, 0.3), class_matrix(CATEGORIES, 0.3, "superclass")
    np.testing.assert_allclose(uniform.sum(1), 1)
    np.testing.assert_allclose(np.diag(uniform), 0.7 + 0.1)
    np.testing.assert_allclose(superclass, [[0.85, 0.15, 0], [0.15, 0.85, 0], [0, 0, 1]])


# ------------------------------------------------------------------------------------------------ determinism
@pytest.mark.parametrize("engine", ENGINES)
def test_same_seed_same_bytes_other_seed_other_bytes(shapes, tmp_path, engine):
    a = write_coco(tmp_path / "a.json", noise_dataset(shapes, engine, "mid", seed=7).dataset).read_bytes()
    b = write_coco(tmp_path / "b.json", noise_dataset(shapes, engine, "mid", seed=7).dataset).read_bytes()
    c = write_coco(tmp_path / "c.json", noise_dataset(shapes, engine, "mid", seed=8).dataset).read_bytes()
    assert a == b and a != c


@pytest.mark.parametrize("engine", ENGINES)
def test_a_subset_noised_alone_gets_the_same_noise(shapes, engine):
    full = by_id(noise_dataset(shapes, engine, "high", seed=2).dataset)
    subset = dict(shapes, annotations=shapes["annotations"][::-3])  # every third, reversed
    part = by_id(noise_dataset(subset, engine, "high", seed=2).dataset)
    assert part and all(full[i] == ann for i, ann in part.items())
    assert {a["id"] for a in subset["annotations"]} - set(part) <= {a["id"] for a in shapes["annotations"]} - set(full)


def test_annotation_order_is_kept(shapes):
    ids = [a["id"] for a in noise_dataset(shapes, "paper", "high", seed=0).dataset["annotations"]]
    assert ids == sorted(ids)


# ------------------------------------------------------------------------------------------------ severity
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("seed", [0, 1])
def test_mask_iou_decreases_with_the_tier(shapes, engine, seed):
    ious = [mean_iou(shapes, noise_dataset(shapes, engine, tier, seed=seed).dataset) for tier in TIERS]
    assert 1 > ious[0] > ious[1] > ious[2] > 0.3


@pytest.mark.parametrize("engine, option, value", [
    (engine, name, value) for engine, spec in ENGINES.items() for name, values in spec.options.items()
    for value in values[1:] if name not in ("skip_crowd", "stale_box_area")])
def test_every_non_default_option_changes_the_noise(engine, option, value):
    two_parts = squares_dataset(200)
    for ann in two_parts["annotations"]:  # a second part, so that per-part and per-instance draws differ
        ann["segmentation"].append([2, 2, 12, 2, 12, 12, 2, 12])
    default = noise_dataset(two_parts, engine, "high", seed=0).dataset
    assert noise_dataset(two_parts, engine, "high", seed=0, **{option: value}).dataset != default


# ------------------------------------------------------------------------------------------------ crowds, boxes
def test_crowds_untouched_by_default_and_noised_on_request(shapes):
    crowd = next(a for a in shapes["annotations"] if a["iscrowd"])
    for engine in ENGINES:
        assert by_id(noise_dataset(shapes, engine, "high", seed=0).dataset)[crowd["id"]] == crowd
    noised = by_id(noise_dataset(shapes, "paper", "high", seed=0, skip_crowd=False).dataset).get(crowd["id"])
    assert noised is None or isinstance(noised["segmentation"], list)  # polygonised (or deleted), as v2 does


def test_stale_box_area_keeps_the_clean_box_and_area(shapes):
    clean = by_id(shapes)
    stale = noise_dataset(shapes, "legacy_v0", "hard", seed=0, stale_box_area=True).dataset["annotations"]
    fresh = by_id(noise_dataset(shapes, "legacy_v0", "hard", seed=0).dataset)
    noised = [a for a in stale if a.get("noise", {}).get("spatial")]
    assert noised and all(a["bbox"] == clean[a["id"]]["bbox"] and a["area"] == clean[a["id"]]["area"] for a in stale)
    assert all(a["segmentation"] == fresh[a["id"]]["segmentation"] for a in noised)
    assert any(fresh[a["id"]]["area"] != a["area"] for a in noised)


# ------------------------------------------------------------------------------------------------ ablation
@pytest.mark.parametrize("level", TIERS)
def test_erosion_shrinks_and_dilation_grows_every_mask(shapes, level):
    clean = {i: m.sum() for i, m in masks(shapes).items()}
    for operation, sign in (("erosion", -1), ("dilation", 1)):
        out = ablate(shapes, operation, level)
        grown = [np.sign(a["area"] - clean[a["id"]]) for a in out.dataset["annotations"] if not a.get("iscrowd")]
        assert len(grown) == len(clean) - 1 - out.manifest["implicitly_deleted"] and set(grown) == {sign}
        assert out.manifest["deleted"] == out.manifest["class_flipped"] == 0


def test_spatial_noise_that_leaves_nothing_is_an_implicit_deletion():
    data = {"images": [{"id": 1, "width": W, "height": H}], "categories": CATEGORIES, "annotations": [
        {"id": 1, "image_id": 1, "category_id": 2, "iscrowd": 0, "segmentation": [[10, 10, 60, 10, 30, 50]]},
        {"id": 2, "image_id": 1, "category_id": 1, "iscrowd": 0, "segmentation": [[70, 10, 140, 10, 140, 11, 70, 11]]},
        {"id": 3, "image_id": 1, "category_id": 3, "iscrowd": 0, "segmentation": [[20, 60, 80, 60, 80, 110, 20, 110]]}]}
    approximated = ablate(data, "paper_approximation", "low")  # a 3-vertex part vanishes, as in v2
    assert approximated.manifest["implicitly_deleted"] == 1 and 1 not in by_id(approximated.dataset)
    eroded = ablate(data, "erosion", "low")  # the 2-px line disappears under a 3x3 erosion
    assert eroded.manifest["implicitly_deleted"] == 1 and set(by_id(eroded.dataset)) == {1, 3}
    assert eroded.manifest["kept"] + eroded.manifest["implicitly_deleted"] == eroded.manifest["annotations_in"]


def squares_in_the_middle(n: int = 12, side: int = 30) -> dict:
    images = [{"id": i, "width": W, "height": H} for i in range(n)]
    anns = []
    for i in range(n):
        x, y = 40 + 5 * i, 35 + 3 * i
        anns.append({"id": i, "image_id": i, "category_id": 1, "iscrowd": 0,
                     "segmentation": [[x, y, x + side, y, x + side, y + side, x, y + side]]})
    return {"images": images, "annotations": anns, "categories": CATEGORIES}


@pytest.mark.parametrize("level", TIERS)
def test_opening_of_a_large_square_is_the_identity(level):
    clean = squares_in_the_middle()
    assert mean_iou(clean, ablate(clean, "opening", level).dataset) == 1.0


@pytest.mark.parametrize("level, k", [("low", 3), ("mid", 5), ("high", 7)])
def test_shift_moves_the_centroid_by_k_per_axis(level, k):
    clean = squares_in_the_middle()
    out = ablate(clean, "shift", level, seed=4)
    before, after = masks(clean), masks(out.dataset)
    moves = []
    for i, m in after.items():
        (y0, x0), (y1, x1) = (np.argwhere(before[i]).mean(0), np.argwhere(m).mean(0))
        moves.append((x1 - x0, y1 - y0))
    np.testing.assert_allclose(np.abs(moves), k)
    assert len({tuple(np.sign(d)) for d in moves}) > 1 and out.manifest["parameters"] == {"k": k}


@pytest.mark.parametrize("operation", ["class_flip", "deletion"])
def test_label_only_ablations_leave_the_geometry(shapes, operation):
    clean, out = by_id(shapes), ablate(squares_dataset(600), operation, "low")
    assert all("noise" in a for a in out.dataset["annotations"])
    if operation == "deletion":
        assert out.manifest["deleted"] > 0 and out.manifest["class_flipped"] == 0
    else:
        assert out.manifest["deleted"] == 0 and out.manifest["class_flipped"] > 0
    ablated = by_id(ablate(shapes, operation, "low").dataset)
    assert all(a["segmentation"] == clean[i]["segmentation"] for i, a in ablated.items())


@pytest.mark.parametrize("operation", sorted(set(ABLATIONS) - {"class_flip", "deletion"}))
def test_every_spatial_ablation_changes_masks_and_nothing_else(shapes, operation):
    out = ablate(shapes, operation, "mid", seed=0)
    clean = by_id(shapes)
    noisy = [a for a in out.dataset["annotations"] if not a.get("iscrowd")]
    assert out.manifest["deleted"] == out.manifest["class_flipped"] == 0
    assert all(a["category_id"] == clean[a["id"]]["category_id"] for a in noisy)
    assert 0.3 < mean_iou(shapes, out.dataset) < 1


@pytest.mark.parametrize("operation", sorted(ABLATIONS))
def test_the_seed_matters_exactly_for_the_random_ablations(shapes, operation):
    """``Ablation.random`` is what lets the annotation-quality runs score a seed-free operation once."""
    a, b = (ablate(shapes, operation, "high", seed=s).dataset["annotations"] for s in (0, 1))
    assert (a != b) == ABLATIONS[operation].random


# ------------------------------------------------------------------------------------------------ single operations
def test_approximate():
    circle = np.stack([50 + 30 * np.cos(t := np.linspace(0, 2 * np.pi, 100, endpoint=False)), 50 + 30 * np.sin(t)], 1)
    assert len(approximate(circle, 0.01)) > len(approximate(circle, 5)) >= 3
    assert len(approximate(circle[:3], 0)) == 0  # parts of <= 3 vertices vanish (official v2 and v0)
    assert not np.array_equal(approximate(circle, 1)[0], approximate(circle, 1)[-1])  # open ring out


def test_jitter_modes(rng):
    square = np.array([[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]], float)
    np.testing.assert_array_equal(jitter(square, 0.0, rng), square)
    moved = jitter(square, 2.0, rng)
    assert np.array_equal(moved[0], moved[-1]) and not np.array_equal(moved, square)
    assert np.all(np.mod(jitter(square, 2.0, rng, "v0"), 1) == 0)
    many = np.zeros((20000, 2))
    literal = np.abs(jitter(many, 0.5, rng, "paper_literal", mu=2.0))
    assert literal.min() > 0 and abs(literal.mean() - 2.0) < 0.05
    assert abs(np.abs(jitter(many, 2.0, rng)).mean() - 2.0 * np.sqrt(2 / np.pi)) < 0.05
    with pytest.raises(ConfigError, match="paper_literal"):
        jitter(square, 1.0, rng, "gaussian")


def test_morph_and_shift():
    mask = draw(1, 80, 60, 20)
    assert morph(mask, 5, "erode").sum() < mask.sum() < morph(mask, 5, "dilate").sum()
    np.testing.assert_array_equal(morph(mask, 1, "dilate"), mask)
    moved = shift(mask, 3, -2)
    np.testing.assert_array_equal(moved[:-2, 3:], mask[2:, :-3])
    assert moved[:, :3].sum() == moved[-2:, :].sum() == 0
    assert shift(mask, W, 0).sum() == 0
    with pytest.raises(ConfigError, match="dilate"):
        morph(mask, 3, "close")


def test_sibling_flip(rng):
    siblings = sibling_map(CATEGORIES + [{"id": 7, "name": "thing"}, {"id": 8, "name": "stuff"}])
    assert siblings == {1: [2], 2: [1], 3: [], 7: [8], 8: [7]}  # no supercategory key: group "object"
    assert {sibling_flip(1, siblings, rng) for _ in range(20)} == {2}
    assert sibling_flip(3, siblings, rng) == 3


# ------------------------------------------------------------------------------------------------ errors
def test_malformed_input_names_the_annotation(shapes):
    bad = copy.deepcopy(shapes)
    bad["annotations"][4]["category_id"] = 99
    with pytest.raises(DataFormatError, match=f"annotation {bad['annotations'][4]['id']} "):
        noise_dataset(bad)
    bad = copy.deepcopy(shapes)
    bad["annotations"][2]["segmentation"] = [[1, 2, 3, 4]]
    with pytest.raises(DataFormatError, match=f"annotation {bad['annotations'][2]['id']}"):
        ablate(bad, "erosion", "low")


def test_unknown_engine_tier_option_or_value():
    data = squares_dataset(3)
    with pytest.raises(ConfigError, match="legacy_v0, paper"):
        noise_dataset(data, engine="v3")
    with pytest.raises(ConfigError, match="easy.*high"):
        noise_dataset(data, tier="extreme")
    with pytest.raises(ConfigError, match="class_flip, skip_crowd, loc_mode, sample_per, clip_to_image"):
        noise_dataset(data, stale_box_area=True)
    with pytest.raises(ConfigError, match="'sibling', 'v2_asis'"):
        noise_dataset(data, class_flip="uniform")
    with pytest.raises(ConfigError, match="True, False"):
        noise_dataset(data, skip_crowd=1)
    with pytest.raises(ConfigError, match="dilation"):
        ablate(data, "blur", "low")
    with pytest.raises(ConfigError, match="seed"):
        noise_dataset(data, seed=-1)


def test_tier_aliases_give_the_same_noise():
    data = squares_dataset(30)
    for alias, tier in (("easy", "low"), ("medium", "mid"), ("hard", "high")):
        for engine in ENGINES:
            a, b = noise_dataset(data, engine, alias), noise_dataset(data, engine, tier)
            assert a.dataset == b.dataset and a.manifest["tier"] == tier


@pytest.mark.parametrize("rate", [0.2, 0.5, 0.8])
def test_class_noise_alone_flips_at_the_symmetric_rate_and_keeps_the_geometry(rate):
    from benchmark_n.noise import class_noise
    clean = squares_dataset()
    noisy = class_noise(clean, rate, seed=0)
    out = noisy.dataset["annotations"]
    assert [a["segmentation"] for a in out] == [a["segmentation"] for a in clean["annotations"]]
    flipped = [a["category_id"] != a["noise"]["original_category_id"] for a in out]
    assert noisy.manifest["class_flipped"] == sum(flipped)
    assert binomial_ok(sum(flipped), len(out), rate * (1 - 1 / 3))  # uniform_mix_C over K = 3
    assert class_noise(clean, rate, seed=0).dataset == noisy.dataset


def test_asymmetric_class_noise_stays_within_the_super_category():
    from benchmark_n.noise import class_noise
    out = class_noise(squares_dataset(), 0.4, "superclass", seed=1).dataset["annotations"]
    assert all(a["category_id"] == 3 for a in out if a["noise"]["original_category_id"] == 3)
    pair = [a for a in out if a["noise"]["original_category_id"] != 3]
    assert all(a["category_id"] in (1, 2) for a in pair)
    assert binomial_ok(sum(a["noise"]["class_flipped"] for a in pair), len(pair), 0.4 / 2)
    with pytest.raises(ConfigError, match="rate"):
        class_noise(squares_dataset(), 1.5)
