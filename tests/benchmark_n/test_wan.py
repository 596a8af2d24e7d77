"""COCO-WAN weak annotations (``benchmark_n.wan``): prompts, the offline annotators, the SAM plumbing, weak_dataset and
prompt_quality, on cv2-drawn masks and COCO-shapes."""
import copy
import re
import sys
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import torch
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from skimage.segmentation import flood

from benchmark_n.coco import ann_to_mask, annotation_from_mask, mask_to_rle, segmentation_fields, write_coco
from benchmark_n.metrics import iou
from benchmark_n.noise import noise_dataset
from benchmark_n.shapes import generate_shapes, preset
from benchmark_n.sources import Annotations
from benchmark_n import wan
from benchmark_n.wan import (
    NOT_PER_INSTANCE, INSTANCE_PROMPTS, PROMPTS, QUALITY_COLUMNS, WAN_TIERS, SamAnnotator, flood_point, grabcut_box, load_sam,
    make_prompt, prompt_quality, tight_box, weak_dataset, weak_tier,
)
from shared.errors import ConfigError, DataNotFoundError

H, W = 96, 128
RED, GREY = (230, 25, 75), (120, 120, 120)


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("NOISY_PROGRESS", "0")


def c_shape() -> np.ndarray:
    """A thick 'C' (an annulus with a gap on the right): its centroid and box centre lie outside it."""
    mask = np.zeros((H, W), np.uint8)
    cv2.circle(mask, (60, 48), 30, 1, -1)
    cv2.circle(mask, (60, 48), 18, 0, -1)
    mask[38:59, 60:] = 0
    return mask.astype(bool)


def disc_image(cx=64, cy=48, r=25):
    image = np.empty((H, W, 3), np.uint8)
    image[:] = GREY
    cv2.circle(image, (cx, cy), r, RED, -1)
    mask = np.zeros((H, W), np.uint8)
    cv2.circle(mask, (cx, cy), r, 1, -1)
    return image, mask.astype(bool)


def no_same_class_neighbour(data, index, ann):
    return not any(b["category_id"] == ann["category_id"] and b["id"] != ann["id"] for b in data.annotations_of(index))


# ------------------------------------------------------------------------------------------------ prompts
def test_box_prompt_is_the_tight_box_of_the_mask_and_scale_bbox_is_the_official_omega():
    mask = c_shape()
    rows, cols = np.nonzero(mask)
    box = make_prompt("box", mask)["box"]
    assert box.tolist() == [cols.min(), rows.min(), cols.max(), rows.max()]
    # official extract_bounding_box_and_area with omega = 2: each side out by int(0.5 * (max - min)), clipped to w/h
    dx, dy = int(0.5 * (cols.max() - cols.min())), int(0.5 * (rows.max() - rows.min()))
    assert tight_box(mask, 2).tolist() == [max(cols.min() - dx, 0), max(rows.min() - dy, 0),
                                           min(cols.max() + dx, W), min(rows.max() + dy, H)]


def test_point_prompts_lie_inside_the_mask_or_its_box_as_each_must():
    mask = c_shape()
    x0, y0, x1, y1 = tight_box(mask)
    centre = make_prompt("point_center_bbox", mask)
    assert centre["point_coords"].tolist() == [[(x0 + x1) / 2, (y0 + y1) / 2]]
    assert centre["point_labels"].tolist() == [1]
    cx, cy = centre["point_coords"][0]
    assert not mask[int(cy), int(cx)]  # the official box centre misses a C; the paper's "middle of the mask" does not
    inside = make_prompt("point_center_mask", mask)["point_coords"][0]
    assert mask[int(inside[1]), int(inside[0])] and inside == pytest.approx(inside.round())
    rows, cols = np.nonzero(mask)
    distance = np.hypot(cols - cols.mean(), rows - rows.mean()).min()
    assert np.hypot(inside[0] - cols.mean(), inside[1] - rows.mean()) == pytest.approx(distance)
    for seed in range(30):
        x, y = make_prompt("point_random_in_mask", mask, seed=seed, ann_id=7)["point_coords"][0]
        assert mask[int(y), int(x)]


def test_box_noisy_moves_exactly_one_corner_by_about_two_pixels():
    mask = np.zeros((H, W), bool)
    mask[30:60, 40:90] = True
    x0, y0, x1, y1 = tight_box(mask)
    corners = {0: (x0, y0), 1: (x1, y0), 2: (x1, y1), 3: (x0, y1)}
    seen, moves = set(), []
    for ann_id in range(600):
        nx0, ny0, nx1, ny1 = make_prompt("box_noisy", mask, seed=3, ann_id=ann_id)["box"]
        new = {0: (nx0, ny0), 1: (nx1, ny0), 2: (nx1, ny1), 3: (nx0, ny1)}
        moved = [k for k in corners if new[k] != corners[k] and new[(k + 2) % 4] == corners[(k + 2) % 4]]
        assert len(moved) == 1, (ann_id, new)  # one corner moved, the opposite one fixed
        k = moved[0]
        assert new[(k + 1) % 4] != corners[(k + 1) % 4] and new[(k + 3) % 4] != corners[(k + 3) % 4]
        seen.add(k)
        moves.extend(np.subtract(new[k], corners[k]))
    assert seen == {0, 1, 2, 3}
    assert np.std(moves) == pytest.approx(2.0, rel=0.1) and abs(np.mean(moves)) < 0.2


def test_prompts_reproduce_and_random_prompts_differ_between_seeds():
    mask = c_shape()
    for name in INSTANCE_PROMPTS:
        first = make_prompt(name, mask, seed=1, ann_id=5)
        again = make_prompt(name, mask, seed=1, ann_id=5)
        assert all(np.array_equal(first[k], again[k]) for k in first)
        others = [make_prompt(name, mask, seed=s, ann_id=5) for s in range(2, 7)]
        differ = any(not np.array_equal(o[k], first[k]) for o in others for k in first)
        assert differ == PROMPTS[name].random, name


# ------------------------------------------------------------------------------------------------ offline annotators
def test_grabcut_recovers_a_disc_also_at_the_border_and_survives_degenerate_boxes():
    image, mask = disc_image()
    assert iou(grabcut_box(image, tight_box(mask), rng=np.random.default_rng(0)), mask) > 0.95
    image, mask = disc_image(cx=10, cy=90, r=25)  # cut by the left and bottom borders
    assert iou(grabcut_box(image, tight_box(mask), rng=np.random.default_rng(0)), mask) > 0.8
    whole = grabcut_box(image, [0, 0, W - 1, H - 1], rng=np.random.default_rng(0))  # nothing outside the box
    assert whole.shape == (H, W)
    assert grabcut_box(image, [60, 40, 60, 40], pad=0).shape == (H, W)  # a 1-pixel box


def test_grabcut_and_flood_recover_plain_background_shapes(shapes6):
    checked = 0
    for index in range(6):
        for ann in shapes6.annotations_of(index):
            if not no_same_class_neighbour(shapes6, index, ann):
                continue  # a touching object of the same colour: genuinely ambiguous for both
            truth = ann_to_mask(ann, 96, 96).astype(bool)
            image = shapes6.images[index]
            box = grabcut_box(image, make_prompt("box", truth)["box"], rng=np.random.default_rng(0))
            point = flood_point(image, make_prompt("point_center_mask", truth)["point_coords"][0])
            assert iou(box, truth) > 0.8 and iou(point, truth) > 0.8, ann["id"]
            checked += 1
    assert checked >= 10


def test_flood_point_is_skimage_flood_on_the_chebyshev_colour_distance(shapes6):
    image = shapes6.images[1].astype(int)
    rng = np.random.default_rng(0)
    noisy = np.clip(image + rng.integers(-15, 16, image.shape), 0, 255).astype(np.uint8)
    for x, y in [(10, 10), (50, 40), (70, 60)]:
        distance = np.abs(noisy.astype(int) - noisy[y, x].astype(int)).max(axis=2)
        expected = flood(distance, (y, x), connectivity=1, tolerance=20)
        assert np.array_equal(flood_point(noisy, (x, y), tolerance=20), expected)


# ------------------------------------------------------------------------------------------------ weak_dataset
def test_weak_dataset_round_trips_through_pycocotools(shapes6, tmp_path):
    before = copy.deepcopy(shapes6.dataset)
    weak = weak_dataset(shapes6, "box", seed=0)
    assert shapes6.dataset == before  # input not mutated
    anns, m = weak.dataset["annotations"], weak.manifest
    assert [a["id"] for a in anns] == list(range(1, len(anns) + 1))
    assert m["kept"] == len(anns) and m["annotations_in"] == len(before["annotations"])
    assert m["annotations_in"] == m["kept"] + m["implicitly_deleted"] + m["empty_gt"] + m["no_prompt"]
    assert (m["prompt"], m["annotator"], m["seed"]) == ("box", "grabcut", 0)
    originals = {a["id"]: a for a in before["annotations"]}
    coco = COCO(write_coco(tmp_path / "weak.json", weak.dataset))
    ious = []
    for ann in anns:
        source = originals[ann["noise"]["original_id"]]
        assert (ann["image_id"], ann["category_id"], ann["iscrowd"]) == (source["image_id"], source["category_id"], 0)
        assert ann["noise"]["spatial"] == ["weak_box"] and ann["noise"]["class_flipped"] is False
        mask = coco.annToMask(coco.anns[ann["id"]])
        assert np.array_equal(mask, mask_utils.decode(ann["segmentation"]))
        assert ann["area"] == mask.sum() and ann["bbox"] == list(mask_utils.toBbox(ann["segmentation"]))
        truth = ann_to_mask(source, 96, 96)
        assert ann["noise"]["iou"] == pytest.approx(iou(mask, truth), abs=1e-6)
        ious.append(ann["noise"]["iou"])
    assert m["mean_iou"] == pytest.approx(sum(ious) / (len(ious) + m["implicitly_deleted"]))
    assert weak_dataset(shapes6, "box", seed=0).dataset == weak.dataset  # same call, same dataset


def test_weak_masks_do_not_depend_on_annotation_order(shapes6):
    shuffled = copy.deepcopy(shapes6.dataset)
    shuffled["annotations"].reverse()
    data = SimpleNamespace(dataset=shuffled, images=shapes6.images)
    for prompt in ("box_noisy", "point_random_in_mask"):
        a = {x["noise"]["original_id"]: x for x in weak_dataset(shapes6, prompt, seed=2).dataset["annotations"]}
        b = {x["noise"]["original_id"]: x for x in weak_dataset(data, prompt, seed=2).dataset["annotations"]}
        assert a.keys() == b.keys()
        for key in a:
            assert a[key]["noise"]["prompt"] == b[key]["noise"]["prompt"]
            assert a[key]["segmentation"] == b[key]["segmentation"]


def test_annotations_source_gives_the_same_weak_dataset(shapes6):
    data = Annotations("shapes", "COCO-shapes", shapes6.dataset, shapes6.images)
    assert weak_dataset(data, "box").dataset == weak_dataset(shapes6, "box").dataset


class _EmptyForOddIds:
    """An annotator that returns the prompt box filled, or nothing for odd annotation draws (to test drops)."""
    name = "test"

    def settings(self):
        return {}

    def set_image(self, image):
        self.shape = image.shape[:2]

    def segment(self, prompt, rng):
        out = np.zeros(self.shape, bool)
        if rng.integers(2):
            x0, y0, x1, y1 = prompt["box"].astype(int)
            out[y0:y1 + 1, x0:x1 + 1] = True
        return out


def test_empty_weak_masks_are_dropped_and_counted_crowds_copied():
    rng = np.random.default_rng(0)
    images = np.full((3, H, W, 3), 100, np.uint8)
    anns = []
    for image_id in (1, 2, 3):
        for _ in range(5):
            mask = np.zeros((H, W), np.uint8)
            cv2.circle(mask, (int(rng.integers(20, 100)), int(rng.integers(20, 70))), 12, 1, -1)
            anns.append(annotation_from_mask(mask, 10 * len(anns) + 3, image_id, 1))
    crowd = np.zeros((H, W), np.uint8)
    crowd[5:15, 5:25] = 1
    anns.append({"id": 999, "image_id": 2, "category_id": 1, "iscrowd": 1,
                 **segmentation_fields(mask_to_rle(crowd), H, W)})
    dataset = {"images": [{"id": i, "width": W, "height": H} for i in (1, 2, 3)], "annotations": anns,
               "categories": [{"id": 1, "name": "disc"}]}
    weak = weak_dataset(SimpleNamespace(dataset=dataset, images=images), "box", annotator=_EmptyForOddIds())
    m, out = weak.manifest, weak.dataset["annotations"]
    assert 0 < m["implicitly_deleted"] < 15 and m["crowd_skipped"] == 1
    assert m["kept"] == len(out) == 16 - m["implicitly_deleted"]
    crowds = [a for a in out if a.get("iscrowd")]
    assert len(crowds) == 1 and "noise" not in crowds[0] and crowds[0]["segmentation"] == anns[-1]["segmentation"]
    assert [a["id"] for a in out] == list(range(1, len(out) + 1))
    assert m["det_recall_50"] == pytest.approx(m["matched_50"] / 15)


def test_official_bbox_is_one_pixel_short():
    data = generate_shapes(3, 1, **preset("model", height=96, width=96))
    ours = weak_dataset(data, "point_center_mask")
    official = weak_dataset(data, "point_center_mask", official_bbox=True)
    for a, b in zip(ours.dataset["annotations"], official.dataset["annotations"]):
        rows, cols = np.nonzero(mask_utils.decode(a["segmentation"]))
        assert b["bbox"] == [cols.min(), rows.min(), cols.max() - cols.min(), rows.max() - rows.min()]
        assert all(isinstance(v, int) for v in b["bbox"])
        assert np.allclose(a["bbox"], np.add(b["bbox"], [0, 0, 1, 1]))
        assert a["segmentation"] == b["segmentation"] and a["area"] == b["area"]


def test_class_noise_flips_at_the_uniform_rate_and_keeps_the_weak_record():
    data = generate_shapes(300, 0, **preset("model", height=64, width=64))
    weak = weak_dataset(data, "point_center_mask", class_noise_rate=0.4, seed=0)
    plain = weak_dataset(data, "point_center_mask", seed=0)
    anns, n = weak.dataset["annotations"], len(weak.dataset["annotations"])
    assert n > 500
    flips = sum(a["noise"]["class_flipped"] for a in anns)
    expected = 0.4 * (1 - 1 / 6)  # uniform_mix_C over K = 6 categories (self-transitions included)
    assert abs(flips - n * expected) < 4 * np.sqrt(n * expected * (1 - expected))
    assert weak.manifest["class_flipped"] == flips and weak.manifest["class_noise_rate"] == 0.4
    truth = {a["id"]: a["category_id"] for a in data.dataset["annotations"]}
    for a, b in zip(anns, plain.dataset["annotations"]):
        assert a["noise"]["original_category_id"] == truth[a["noise"]["original_id"]] == b["category_id"]
        assert a["noise"]["class_flipped"] == (a["category_id"] != b["category_id"])
        assert a["segmentation"] == b["segmentation"] and a["noise"]["spatial"] == ["weak_point_center_mask"]
    assert weak.manifest["matched_50"] == sum(a["noise"]["iou"] >= 0.5 and not a["noise"]["class_flipped"]
                                              for a in anns) < plain.manifest["matched_50"]


def test_wan_tiers_are_box_centre_point_and_centre_point_with_class_noise(shapes6):
    assert WAN_TIERS["easy"]["prompt"] == "box" and WAN_TIERS["hard"]["class_noise_rate"] == 0.4
    medium, hard = weak_tier(shapes6, "medium"), weak_tier(shapes6, "high")
    assert (medium.manifest["tier"], hard.manifest["tier"]) == ("medium", "hard")
    assert medium.manifest["prompt"] == hard.manifest["prompt"] == "point_center_bbox"
    assert [a["segmentation"] for a in medium.dataset["annotations"]] == \
           [a["segmentation"] for a in hard.dataset["annotations"]]


def test_prompts_from_another_dataset_table14_style(shapes6):
    noisy = noise_dataset(shapes6.dataset, "paper", "high", seed=0).dataset
    weak = weak_dataset(shapes6, "box", prompt_source=noisy)
    kept = {a["id"]: a for a in noisy["annotations"]}
    assert weak.manifest["no_prompt"] == len(shapes6.dataset["annotations"]) - len(kept)
    for ann in weak.dataset["annotations"]:
        source = kept[ann["noise"]["original_id"]]
        assert ann["noise"]["prompt"] == tight_box(ann_to_mask(source, 96, 96)).tolist()


# ------------------------------------------------------------------------------------------------ errors
def test_missing_sam_checkpoint_package_and_text_prompt_name_the_fix(tmp_path, monkeypatch, shapes6):
    with pytest.raises(DataNotFoundError, match="sam_vit_h_4b8939.pth"):
        load_sam(tmp_path / "nowhere.pth")
    monkeypatch.setenv("NOISY_DATA_DIR", str(tmp_path))
    with pytest.raises(DataNotFoundError, match=re.escape(str(tmp_path / "weights" / "sam_vit_h_4b8939.pth"))):
        weak_dataset(shapes6, "box", annotator="sam")
    monkeypatch.setitem(sys.modules, "segment_anything", None)  # import fails
    checkpoint = tmp_path / "sam_vit_h_4b8939.pth"
    checkpoint.write_bytes(b"")
    with pytest.raises(DataNotFoundError, match="pip install segment-anything") as error:
        load_sam(checkpoint)
    assert "checkpoint" not in str(error.value)
    with pytest.raises(ConfigError, match="benchmark_n.grounded.text_tier"):
        weak_dataset(shapes6, "text")
    assert "text" in NOT_PER_INSTANCE and "text" not in INSTANCE_PROMPTS
    with pytest.raises(ConfigError, match="valid prompts"):
        weak_dataset(shapes6, "scribble")
    with pytest.raises(ConfigError, match="valid annotators"):
        weak_dataset(shapes6, "box", annotator="sam2")


# ------------------------------------------------------------------------------------------------ SAM plumbing
@pytest.mark.parametrize("prompt", ["box", "point_center_bbox"])
def test_sam_annotator_prompts_once_per_image_and_keeps_the_best_scored_mask(shapes6, prompt, tiny_sam_predictor):
    predictor = tiny_sam_predictor()
    weak = weak_dataset(shapes6, prompt, annotator=SamAnnotator(predictor))
    assert len(predictor.images) == 6 and all(np.array_equal(a, b) for a, b in zip(predictor.images, shapes6.images))
    assert len(predictor.calls) == len(shapes6.dataset["annotations"])
    kept = iter(weak.dataset["annotations"])
    for (kwargs, masks, scores), ann in zip(predictor.calls, shapes6.dataset["annotations"]):
        assert kwargs["multimask_output"] is True and masks.shape == (3, 96, 96)
        truth = ann_to_mask(ann, 96, 96)
        expected = make_prompt(prompt, truth, ann_id=ann["id"])
        assert kwargs.keys() - {"multimask_output"} == expected.keys()
        assert all(np.array_equal(kwargs[k], expected[k]) for k in expected)
        best = masks[np.argmax(scores)]
        if best.any():
            out = next(kept)
            assert out["noise"]["original_id"] == ann["id"]
            assert np.array_equal(mask_utils.decode(out["segmentation"]), best)
    assert next(kept, None) is None and weak.manifest["annotator"] == "sam" and weak.manifest["kept"] > 0


def test_load_sam_reads_the_model_type_from_the_checkpoint_name(tmp_path, monkeypatch, tiny_sam):
    pytest.importorskip("segment_anything")
    import segment_anything

    loaded = []

    def build(checkpoint=None):
        loaded.append(checkpoint)
        return tiny_sam()

    monkeypatch.setitem(segment_anything.sam_model_registry, "vit_b", build)
    path = tmp_path / "sam_vit_b_01ec64.pth"
    path.write_bytes(b"")
    annotator = load_sam(path, device="cpu")
    assert loaded == [str(path)] and annotator.settings()["model_type"] == "vit_b"
    assert isinstance(annotator.predictor, segment_anything.SamPredictor)
    with pytest.raises(ConfigError, match="valid SAM model types"):
        load_sam(path, model_type="vit_x")


# ------------------------------------------------------------------------------------------------ SAM precision
class _Encoder(torch.nn.Module):
    """A stand-in for SAM's image encoder: one linear layer; records the dtype it computed in."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 8)
        self.dtypes = []

    def forward(self, x):
        out = self.proj(x)
        self.dtypes.append(out.dtype)
        return out


class _Predictor:
    """SamPredictor's interface without segment_anything: ``set_image`` calls ``model.image_encoder`` and keeps its
    output as ``features``, as ``set_torch_image`` does; ``predict`` returns the box (or the point) as the best mask."""

    def __init__(self):
        self.model = SimpleNamespace(image_encoder=_Encoder())
        self.features, self.shape = None, None

    def set_image(self, image):
        self.shape = image.shape[:2]
        self.features = self.model.image_encoder(torch.as_tensor(image, dtype=torch.float32).reshape(-1, 3) / 255)

    def predict(self, box=None, point_coords=None, point_labels=None, multimask_output=True):
        masks = np.zeros((2, *self.shape), bool)
        if box is not None:
            x0, y0, x1, y1 = np.asarray(box).astype(int)
            masks[0, y0:y1 + 1, x0:x1 + 1] = True
        else:
            x, y = np.asarray(point_coords[0]).astype(int)
            masks[0, y, x] = True
        return masks, np.array([0.9, 0.1]), None


FP32_SETTINGS = {"checkpoint": None, "model_type": None, "multimask_output": True, "choice": "argmax(scores)"}


def test_sam_precision_auto_is_bf16_on_cuda_only_as_mask_rcnns(monkeypatch):
    from benchmark_n import maskrcnn

    assert list(wan.PRECISIONS) == list(maskrcnn.PRECISIONS) == ["auto", "bf16", "fp32"]
    resolve = wan.resolved_precision
    assert [resolve("auto", d) for d in ("cpu", torch.device("cpu"), "cuda", "cuda:1", torch.device("cuda", 0))] == \
        ["fp32", "fp32", "bf16", "bf16", "bf16"]  # a name decides: a planner may ask about "cuda" on a CPU machine
    assert resolve("bf16", "cpu") == "bf16" and resolve("fp32", "cuda") == "fp32"
    for available in (False, True):
        monkeypatch.setattr(torch.cuda, "is_available", lambda available=available: available)
        assert resolve("auto", "auto") == resolve("auto", None) == ("bf16" if available else "fp32")
    for bad in ("fp16", "half", None):
        with pytest.raises(ConfigError, match="must be one of auto, bf16, fp32"):
            resolve(bad, "cuda")
    with pytest.raises(ConfigError, match="unknown device"):
        resolve("auto", "tpu")


def test_bf16_autocasts_only_the_image_encoder_and_hands_on_float32_features(shapes6):
    predictor = _Predictor()
    encoder = predictor.model.image_encoder
    annotator = SamAnnotator(predictor, precision="bf16")  # on any device, the CPU included
    assert annotator.precision == "bf16"
    weak = weak_dataset(shapes6, "box", annotator=annotator)
    assert encoder.dtypes == [torch.bfloat16] * 6  # one forward per image, under bf16 autocast
    assert predictor.features.dtype == torch.float32  # what the prompt encoder and mask decoder receive
    assert "forward" not in encoder.__dict__ and type(encoder).forward is _Encoder.forward  # restored each time
    assert weak.manifest["annotator_settings"] == {**FP32_SETTINGS, "precision": "bf16"}
    # the decoder's side (here: the predictor's predict) ran as in fp32: the same labels
    fp32 = weak_dataset(shapes6, "box", annotator=SamAnnotator(_Predictor(), precision="fp32"))
    assert weak.dataset == fp32.dataset


def test_fp32_and_auto_on_the_cpu_leave_sam_and_its_manifest_as_they_were(shapes6):
    manifests = []
    for options in ({}, {"precision": "auto"}, {"precision": "fp32"}):
        predictor = _Predictor()
        annotator = SamAnnotator(predictor, **options)
        assert annotator.precision == "fp32" and annotator.settings() == FP32_SETTINGS  # the settings of before
        weak = weak_dataset(shapes6, "point_center_bbox", annotator=annotator)
        assert predictor.model.image_encoder.dtypes == [torch.float32] * 6
        manifests.append(weak.manifest)
    assert manifests[0] == manifests[1] == manifests[2]
    assert manifests[0]["annotator_settings"] == FP32_SETTINGS


def test_auto_resolves_against_the_device_the_image_encoder_is_on(monkeypatch):
    monkeypatch.setattr(wan, "_module_device", lambda module: torch.device("cuda", 0))  # an encoder on a GPU
    on_gpu = SamAnnotator(_Predictor())
    assert on_gpu.precision == "bf16" and on_gpu.settings() == {**FP32_SETTINGS, "precision": "bf16"}
    official = SamAnnotator(_Predictor(), precision="fp32")
    assert official.precision == "fp32" and official.settings() == FP32_SETTINGS


def test_encoder_autocast_restores_the_forward_after_an_error_and_inside_an_outer_wrapper():
    encoder, x = _Encoder(), torch.ones(2, 3)
    state = {k: v.clone() for k, v in encoder.state_dict().items()}
    with wan.encoder_autocast(encoder, "fp32"):  # fp32: nothing is wrapped
        assert "forward" not in encoder.__dict__ and encoder(x).dtype == torch.float32
    with pytest.raises(RuntimeError, match="inside"):
        with wan.encoder_autocast(encoder, "bf16"):
            assert "forward" in encoder.__dict__
            raise RuntimeError("inside")
    assert "forward" not in encoder.__dict__
    outer = lambda inputs: 2 * encoder.proj(inputs)  # noqa: E731  an instance forward set by someone else
    encoder.forward = outer
    with wan.encoder_autocast(encoder, "bf16"):
        out = encoder(x)
    assert encoder.__dict__["forward"] is outer and out.dtype == torch.float32
    assert torch.allclose(out, 2 * encoder.proj(x), rtol=0.02, atol=0.02)  # bf16: 8 significant bits
    assert encoder.state_dict().keys() == state.keys()
    assert all(torch.equal(v, state[k]) for k, v in encoder.state_dict().items())  # weights stay fp32, untouched
    with pytest.raises(ConfigError, match="resolved precision"):
        with wan.encoder_autocast(encoder, "auto"):
            pass


def test_precision_errors_name_the_choices(tmp_path, shapes6):
    bare = SimpleNamespace(set_image=lambda image: None, predict=lambda **kwargs: None)  # no model.image_encoder
    assert SamAnnotator(bare).precision == "fp32" and SamAnnotator(bare).settings() == FP32_SETTINGS
    with pytest.raises(ConfigError, match="image_encoder"):
        SamAnnotator(bare, precision="bf16")
    with pytest.raises(ConfigError, match="must be one of"):
        SamAnnotator(_Predictor(), precision="fp16")
    with pytest.raises(ConfigError, match="must be one of"):  # before the (absent) checkpoint is looked for
        load_sam(tmp_path / "nowhere.pth", precision="fp16")
    with pytest.raises(ConfigError, match="must be one of"):
        weak_dataset(shapes6, "box", annotator="sam", checkpoint=tmp_path / "nowhere.pth", precision="half")


def test_load_sam_and_make_annotator_pass_the_precision_on(tmp_path, monkeypatch, tiny_sam):
    pytest.importorskip("segment_anything")
    import segment_anything

    monkeypatch.setitem(segment_anything.sam_model_registry, "vit_b", lambda checkpoint=None: tiny_sam())
    path = tmp_path / "sam_vit_b_01ec64.pth"
    path.write_bytes(b"")
    assert load_sam(path, device="cpu").precision == "fp32"  # auto on the CPU
    assert load_sam(path, device="cpu", precision="bf16").settings()["precision"] == "bf16"
    made = wan.make_annotator("sam", path, device="cpu", precision="bf16")
    assert made.precision == "bf16" and "forward" not in made.predictor.model.image_encoder.__dict__


def test_load_sam_takes_the_pages_device_names(tmp_path, monkeypatch, tiny_sam):
    """Page 08 passes its device parameter ("auto", "cpu", "cuda"): "auto" is this machine's CUDA if it has one, and
    CUDA asked for where there is none is a ConfigError, not SAM moved to the CPU or a failure in a kernel."""
    pytest.importorskip("segment_anything")
    import segment_anything

    monkeypatch.setitem(segment_anything.sam_model_registry, "vit_b", lambda checkpoint=None: tiny_sam())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    path = tmp_path / "sam_vit_b_01ec64.pth"
    path.write_bytes(b"")
    for device in ("auto", None, "cpu", torch.device("cpu")):
        sam = load_sam(path, device=device)
        assert sam.precision == "fp32" and sam.predictor.model.device.type == "cpu"
    assert wan.make_annotator("sam", path, device="auto", precision="auto").precision == "fp32"
    for device in ("cuda", "cuda:1"):
        with pytest.raises(ConfigError, match="CUDA is not available"):
            load_sam(path, device=device)
    with pytest.raises(ConfigError, match="unknown device"):
        load_sam(path, device="tpu")


def test_a_real_sam_predictor_in_bf16_gives_float32_features_close_to_fp32(shapes6, tiny_sam_predictor):
    features = {}
    for precision in ("fp32", "bf16"):
        predictor = tiny_sam_predictor()  # segment_anything's SamPredictor around a tiny Sam (skips without it)
        weak = weak_dataset(shapes6, "box", annotator=SamAnnotator(predictor, precision=precision))
        features[precision] = predictor.features
        assert predictor.features.dtype == torch.float32 and len(predictor.calls) == len(shapes6.dataset["annotations"])
        assert "forward" not in predictor.model.image_encoder.__dict__
        assert weak.manifest["annotator_settings"].get("precision") == (None if precision == "fp32" else "bf16")
    error = (features["bf16"] - features["fp32"]).abs().max() / features["fp32"].abs().max()
    assert 0 < error < 0.05  # bf16 ran (not bitwise fp32), with bf16's rounding only


# ------------------------------------------------------------------------------------------------ prompt quality
def test_prompt_quality_ranks_the_box_above_noisy_prompts(shapes40):
    table = prompt_quality(shapes40, ["box", "box_noisy", "point_random_in_mask"], seeds=[0, 1, 2])
    assert list(table.columns) == list(QUALITY_COLUMNS) and len(table) == 9
    assert (table["mean_dice"] >= table["mean_iou"]).all()
    assert table[["mask_AP", "boundary_AP", "det_f1_50"]].apply(lambda c: c.between(0, 1)).all().all()
    means = table.groupby("prompt")["mask_AP"].mean()
    assert means["box"] > means["point_random_in_mask"] and means["box"] > means["box_noisy"]
    box = table[table["prompt"] == "box"]
    assert box["mask_AP"].nunique() == 1  # a deterministic prompt (GrabCut's k-means seeded per annotation)
