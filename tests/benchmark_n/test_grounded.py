"""COCO-WAN text prompts (``benchmark_n.grounded``): weak labels from detections, the offline stand-in detector and
Grounding-DINO through transformers (a tiny randomly initialised model saved to a real model folder)."""
import copy
import re
from types import SimpleNamespace

import numpy as np
import pytest
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO

from benchmark_n.coco import ann_to_mask, mask_to_rle, segmentation_fields, write_coco
from benchmark_n.grounded import (
    DETECTORS, Detections, grounding_dino_detections, prompt_box, query_names, stand_in_detections, text_prompt,
    text_tier, text_weak_dataset,
)
from benchmark_n.metrics import annotation_quality, iou
from benchmark_n.rehearsal import write_tiny_grounding_dino
from benchmark_n.shapes import CATEGORIES, generate_shapes, preset
from benchmark_n.sources import Annotations
from benchmark_n.wan import make_prompt, weak_dataset
from shared.errors import ConfigError, DataFormatError, DataNotFoundError

NAMES = {c["id"]: c["name"] for c in CATEGORIES}


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("NOISY_PROGRESS", "0")


def gt_detections(data, score=0.9):
    """One detection per non-crowd ground truth: its own bbox and class."""
    return [{"image_id": a["image_id"], "category_id": a["category_id"], "bbox": list(a["bbox"]), "score": score}
            for a in data.dataset["annotations"]]


def isolated(data, ann):
    """No other instance of the same class on the image (a touching one of the same colour is ambiguous)."""
    return not any(b["image_id"] == ann["image_id"] and b["category_id"] == ann["category_id"] and b["id"] != ann["id"]
                   for b in data.dataset["annotations"])


# ------------------------------------------------------------------------------------------------ text_weak_dataset
def test_a_detection_on_a_ground_truth_box_gives_that_instance_with_its_class(shapes6):
    weak = text_weak_dataset(shapes6, gt_detections(shapes6))
    truths = {a["id"]: a for a in shapes6.dataset["annotations"]}
    m = weak.manifest
    assert m["kept"] == len(weak.dataset["annotations"]) == len(truths) - m["empty_masks"]  # GrabCut can empty one
    checked = 0
    for ann in weak.dataset["annotations"]:
        truth = truths[ann["noise"]["matched_id"]]
        mask = ann_to_mask(truth, 96, 96)
        # the COCO bbox [x, y, w, h] becomes exactly wan's tight box prompt (max inclusive): no off-by-one
        assert ann["noise"]["prompt"] == make_prompt("box", mask)["box"].tolist()
        assert (ann["image_id"], ann["category_id"]) == (truth["image_id"], truth["category_id"])
        assert ann["noise"]["iou"] == pytest.approx(iou(mask_utils.decode(ann["segmentation"]), mask), abs=1e-6)
        if isolated(shapes6, truth):
            assert ann["noise"]["iou"] > 0.8, truth["id"]
            checked += 1
    assert checked >= 8
    assert m["gt_matched_50"] >= checked and m["recall_50"] == pytest.approx(m["gt_matched_50"] / len(truths))


def test_low_scores_and_classes_absent_from_the_image_are_dropped_and_counted(shapes6):
    first = shapes6.dataset["images"][0]["id"]
    present = {a["category_id"] for a in shapes6.dataset["annotations"] if a["image_id"] == first}
    absent = min(set(NAMES) - present)
    dets = gt_detections(shapes6)
    box = dets[0]["bbox"]
    on_first = [d["bbox"] for d in dets if d["image_id"] == first]
    assert len(on_first) >= 2
    x0, y0 = np.min([b[:2] for b in on_first], axis=0)
    x1, y1 = np.max([np.add(b[:2], b[2:]) for b in on_first], axis=0)
    merged = [float(x0), float(y0), float(x1 - x0), float(y1 - y0)]  # one box around neighbours: merges them
    dets += [{"image_id": first, "category_id": absent, "bbox": box, "score": 0.99},  # not queried: wrong class
             {"image_id": first, "category_id": dets[0]["category_id"], "bbox": box, "score": 0.3},  # below 0.35
             {"image_id": first, "category_id": dets[0]["category_id"], "bbox": merged, "score": 0.35}]
    weak = text_weak_dataset(shapes6, dets)
    m, anns = weak.manifest, weak.dataset["annotations"]
    assert (m["detections_in"], m["wrong_class"], m["below_threshold"]) == (len(dets), 1, 1)
    assert m["detections_in"] == m["below_threshold"] + m["wrong_class"] + m["empty_masks"] + m["kept"]
    assert m["kept"] == len(anns) == len(dets) - 2 - m["empty_masks"]
    assert absent not in {a["category_id"] for a in anns if a["image_id"] == first}
    assert [a["id"] for a in anns] == list(range(1, len(anns) + 1))
    images = [im["id"] for im in shapes6.dataset["images"]]
    assert [images.index(a["image_id"]) for a in anns] == sorted(images.index(a["image_id"]) for a in anns)
    for image_id in images:  # within an image, by descending score: the threshold-equal box comes last
        scores = [a["noise"]["score"] for a in anns if a["image_id"] == image_id]
        assert scores == sorted(scores, reverse=True)
    assert anns[[a["image_id"] for a in anns].index(images[1]) - 1]["noise"]["score"] == 0.35
    assert m["precision_50"] < 1  # the merged box matches no ground truth at 0.5
    assert m["annotator"] == "grabcut" and m["prompt"] == "text" and m["score_threshold"] == 0.35
    assert text_weak_dataset(shapes6, dets, score_threshold=0.36).manifest["below_threshold"] == 2


def test_weak_dataset_round_trips_and_does_not_depend_on_detection_order(shapes6, tmp_path):
    before = copy.deepcopy(shapes6.dataset)
    rng = np.random.default_rng(0)
    dets = []
    for det in gt_detections(shapes6):  # jittered boxes and scores: not all equal, so the order matters
        dets.append({**det, "bbox": list(np.add(det["bbox"], rng.normal(0, 2, 4).clip(-3, 3))),
                     "score": float(rng.uniform(0.4, 1.0)), "segmentation": "ignored"})
    weak = text_weak_dataset(shapes6, dets, seed=3)
    assert shapes6.dataset == before  # input not mutated
    assert set(weak.dataset) == set(before) and weak.dataset["images"] == before["images"]
    coco = COCO(write_coco(tmp_path / "text.json", weak.dataset))
    for ann in weak.dataset["annotations"]:
        mask = coco.annToMask(coco.anns[ann["id"]])
        assert np.array_equal(mask, mask_utils.decode(ann["segmentation"])) and mask.any()
        assert ann["area"] == mask.sum() and ann["bbox"] == list(mask_utils.toBbox(ann["segmentation"]))
        assert ann["iscrowd"] == 0 and ann["noise"]["spatial"] == ["weak_text"]
    assert text_weak_dataset(shapes6, dets, seed=3).dataset == weak.dataset  # same call, same dataset
    shuffled = [dets[i] for i in rng.permutation(len(dets))]
    assert text_weak_dataset(shapes6, shuffled, seed=3).dataset == weak.dataset
    subset = text_weak_dataset(shapes6, dets[::2], seed=3).dataset["annotations"]
    full = {(a["image_id"], tuple(a["noise"]["prompt"])): a["segmentation"] for a in weak.dataset["annotations"]}
    assert all(full[(a["image_id"], tuple(a["noise"]["prompt"]))] == a["segmentation"] for a in subset)


class _Recording:
    """An annotator that fills the prompt box and records the prompts and generators it gets."""
    name = "recording"

    def settings(self):
        return {}

    def set_image(self, image):
        self.shape, self.images = image.shape[:2], getattr(self, "images", 0) + 1

    def segment(self, prompt, rng):
        self.boxes = getattr(self, "boxes", []) + [prompt["box"].tolist()]
        out = np.zeros(self.shape, bool)
        x0, y0, x1, y1 = np.round(prompt["box"]).astype(int)
        out[y0:y1 + 1, x0:x1 + 1] = rng.random() < 2  # draws from the generator
        return out


def test_crowds_are_copied_not_queried_and_boxes_are_clipped_to_the_image(shapes6):
    dataset = copy.deepcopy(shapes6.dataset)
    image_id = dataset["images"][0]["id"]
    absent = min(set(NAMES) - {a["category_id"] for a in dataset["annotations"] if a["image_id"] == image_id})
    crowd = np.zeros((96, 96), np.uint8)
    crowd[2:10, 2:30] = 1
    dataset["annotations"].append({"id": 999, "image_id": image_id, "category_id": absent, "iscrowd": 1,
                                   **segmentation_fields(mask_to_rle(crowd), 96, 96)})
    data = SimpleNamespace(dataset=dataset, images=shapes6.images)
    tool = _Recording()
    dets = [{"image_id": image_id, "category_id": absent, "bbox": [2, 2, 28, 8], "score": 0.9},
            {"image_id": image_id, "category_id": dataset["annotations"][0]["category_id"],
             "bbox": [-10.0, 80.5, 200.0, 40.0], "score": 0.8}]
    weak = text_weak_dataset(data, dets, annotator=tool)
    m, anns = weak.manifest, weak.dataset["annotations"]
    assert (m["crowd_copied"], m["wrong_class"], m["kept"], tool.images) == (1, 1, 1, 1)
    assert m["gt_instances"] == len(shapes6.dataset["annotations"])
    assert anns[0]["iscrowd"] == 1 and anns[0]["id"] == 1 and "noise" not in anns[0]
    assert anns[0]["segmentation"] == dataset["annotations"][-1]["segmentation"]
    assert tool.boxes == [[0.0, 80.5, 95.0, 95.0]] == [anns[1]["noise"]["prompt"]]
    assert prompt_box([10, 20, 5, 7], 96, 96).tolist() == [10, 20, 14, 26]


def test_bad_detections_and_settings_raise_clear_errors(shapes6):
    good = gt_detections(shapes6)[:1]
    with pytest.raises(DataFormatError, match="image 12345"):
        text_weak_dataset(shapes6, [{**good[0], "image_id": 12345}])
    for key in ("bbox", "score", "category_id"):
        with pytest.raises(DataFormatError, match=f"has no {key}"):
            text_weak_dataset(shapes6, [{k: v for k, v in good[0].items() if k != key}])
    with pytest.raises(DataFormatError, match="bbox must be 4 finite"):
        text_weak_dataset(shapes6, [{**good[0], "bbox": [1, 2, -3, 4]}])
    with pytest.raises(DataFormatError, match="score must be in"):
        text_weak_dataset(shapes6, [{**good[0], "score": 1.5}])
    for threshold in (-0.1, 1.5, "0.3"):
        with pytest.raises(ConfigError, match="score_threshold"):
            text_weak_dataset(shapes6, good, score_threshold=threshold)
    with pytest.raises(ConfigError, match="valid detectors"):
        text_tier(shapes6, "owl_vit")


# ------------------------------------------------------------------------------------------------ stand-in detector
@pytest.fixture
def one_thread():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: more threads only contend with the other tests' processes
    yield
    torch.set_num_threads(before)


def test_stand_in_text_labels_find_objects_but_are_noisier_than_box_labels(shapes40, one_thread):
    other = generate_shapes(64, 1000, **preset("model", height=96, width=96))  # the detector's own training data
    assert not any(np.array_equal(a, b) for a in other.images[:10] for b in shapes40.images)
    dets = stand_in_detections(shapes40, Annotations("shapes", "other", other.dataset, other.images),
                               {"epochs": 8}, seed=0)
    assert isinstance(dets, Detections) and dets.counts["detections"] == len(dets) > 0
    ids = {im["id"] for im in shapes40.dataset["images"]}
    assert all(d["image_id"] in ids and set(d) == {"image_id", "category_id", "bbox", "score"} for d in dets)
    text = text_weak_dataset(shapes40, dets)
    box = weak_dataset(shapes40, "box")
    text_ap = annotation_quality(shapes40.dataset, text.dataset, metrics=("mask",))["mask_AP"]
    box_ap = annotation_quality(shapes40.dataset, box.dataset, metrics=("mask",))["mask_AP"]
    assert 0.02 < text_ap < box_ap - 0.2, (text_ap, box_ap)  # measured: 0.22 vs 0.75
    m = text.manifest
    assert 0 < m["gt_matched_50"] < m["gt_instances"] and m["detector"]["detector"] == "stand_in"
    assert m["detector_counts"]["detections"] == m["detections_in"] == len(dets)


def test_the_stand_in_detector_is_trained_once_for_val_and_train_images(shapes6, one_thread, monkeypatch):
    from benchmark_n import grounded, tiny_seg

    monkeypatch.setattr(grounded, "_STAND_INS", type(grounded._STAND_INS)())
    other = generate_shapes(8, 1000, **preset("model", height=96, width=96))
    train = Annotations("shapes", "other", other.dataset, other.images)
    fits, fit = [], tiny_seg.fit
    monkeypatch.setattr(tiny_seg, "fit", lambda *a, **k: fits.append(1) or fit(*a, **k))
    first = stand_in_detections(shapes6, train, {"epochs": 2}, seed=0)
    kept = {im["id"] for im in shapes6.dataset["images"][:3]}
    half = Annotations("shapes", "half", {**shapes6.dataset, "images": shapes6.dataset["images"][:3], "annotations": [
        a for a in shapes6.dataset["annotations"] if a["image_id"] in kept]}, shapes6.images[:3])
    again = stand_in_detections(half, train, {"epochs": 2}, seed=0)
    assert len(fits) == 1  # one detector for both image sets
    val = Annotations("shapes", "val", shapes6.dataset, shapes6.images)
    direct = tiny_seg.fit_predict(train, val, {"epochs": 2}, seed=0)["detections"]  # trains (a second fit)
    assert list(first) == [{k: d[k] for k in ("image_id", "category_id", "bbox", "score")} for d in direct]
    assert list(again) == [d for d in first if d["image_id"] in {im["id"] for im in half.dataset["images"]}]
    stand_in_detections(shapes6, train, {"epochs": 2}, seed=1)
    assert len(fits) == 3  # another seed: another detector


# ------------------------------------------------------------------------------------------------ Grounding-DINO
@pytest.fixture(scope="module")
def tiny_grounding_dino(tmp_path_factory):
    """A real Grounding-DINO model folder (``rehearsal.write_tiny_grounding_dino``) over the shape names."""
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "GroundingDinoForObjectDetection"):
        pytest.skip("this transformers has no Grounding-DINO")
    folder = write_tiny_grounding_dino(tmp_path_factory.mktemp("grounding-dino-tiny"), NAMES.values())
    tokenizer = transformers.BertTokenizerFast.from_pretrained(str(folder))
    assert tokenizer.convert_ids_to_tokens(tokenizer("circle. star.")["input_ids"]) == \
        ["[CLS]", "circle", ".", "star", ".", "[SEP]"]
    return folder


def test_grounding_dino_detections_are_well_formed_and_respect_the_thresholds(shapes6, tiny_grounding_dino, one_thread,
                                                                              monkeypatch):
    from transformers import GroundingDinoProcessor

    prompts, call = [], GroundingDinoProcessor.__call__

    def recording(self, images=None, text=None, **kwargs):
        prompts.append(text)
        return call(self, images=images, text=text, **kwargs)

    monkeypatch.setattr(GroundingDinoProcessor, "__call__", recording)
    dets = grounding_dino_detections(shapes6, tiny_grounding_dino, box_threshold=0.3, text_threshold=0.25,
                                     device="cpu", progress=False)
    queried = {}
    for ann in shapes6.dataset["annotations"]:
        queried.setdefault(ann["image_id"], set()).add(ann["category_id"])
    assert prompts == [text_prompt(NAMES[c] for c in sorted(queried[im["id"]])) for im in shapes6.dataset["images"]]
    assert all(re.fullmatch(r"([a-z]+\. )*[a-z]+\.", p) for p in prompts)
    c = dets.counts
    assert (c["images"], c["queried_images"]) == (6, 6) and c["boxes"] == c["detections"] + c["unmatched_phrase"]
    assert c["detections"] == len(dets) > 0  # the random model's phrases often are a single queried name
    for d in dets:
        x, y, w, h = d["bbox"]
        assert d["category_id"] in queried[d["image_id"]] and d["phrase"] == NAMES[d["category_id"]]
        assert 0 <= x and 0 <= y and w >= 0 and h >= 0 and x + w <= 96 + 1e-4 and y + h <= 96 + 1e-4
        assert 0.3 < d["score"] <= 1
    strict = grounding_dino_detections(shapes6, tiny_grounding_dino, box_threshold=0.6, progress=False)
    assert all(d["score"] > 0.6 for d in strict) and len(strict) <= len(dets)
    assert {(d["image_id"], tuple(d["bbox"])) for d in strict} <= {(d["image_id"], tuple(d["bbox"])) for d in dets}
    none = grounding_dino_detections(shapes6, tiny_grounding_dino, box_threshold=0.3, text_threshold=1.0,
                                     progress=False)
    assert len(none) == 0 and none.counts["unmatched_phrase"] == none.counts["boxes"] == c["boxes"]
    assert none.unmatched_phrases == {"": c["boxes"]}  # no token above 1: an empty phrase, dropped
    weak = text_tier(shapes6, "grounding_dino", detector_options={"model_dir": tiny_grounding_dino,
                                                                   "progress": False})
    assert weak.manifest["detector"]["name"] == "grounding_dino"
    assert weak.manifest["detections_in"] == len(grounding_dino_detections(shapes6, tiny_grounding_dino,
                                                                           progress=False))


def test_grounding_dino_labels_are_a_training_noise(tiny_grounding_dino, one_thread):
    from benchmark_n.runs import DataRecipe, RunSpec, TrainNoise, load_pair

    train = load_pair(DataRecipe(n_train=6, n_val=2))[0]
    noise = TrainNoise("text", "grounding_dino", options={"score_threshold": 0.3, "detector_options": {
        "model_dir": str(tiny_grounding_dino), "box_threshold": 0.3, "progress": False}})
    drawn = noise.draw(train, 0)  # Grounding-DINO needs no recipe: it was trained elsewhere
    direct = text_tier(train, "grounding_dino", seed=0, score_threshold=0.3, detector_options={
        "model_dir": tiny_grounding_dino, "box_threshold": 0.3, "progress": False})
    assert drawn == direct.dataset and direct.manifest["detections_in"] > 0  # the random model's boxes are
    assert len({RunSpec(noise), RunSpec(noise)}) == 1                          # slivers: GrabCut empties them


def test_missing_grounding_dino_folder_names_the_path_and_the_download(shapes6, tmp_path, monkeypatch):
    with pytest.raises(DataNotFoundError, match=re.escape(str(tmp_path / "nowhere"))):
        grounding_dino_detections(shapes6, tmp_path / "nowhere")
    monkeypatch.setenv("NOISY_DATA_DIR", str(tmp_path))
    expected = tmp_path / "weights" / "grounding-dino-base"
    with pytest.raises(DataNotFoundError, match=re.escape(f"huggingface-cli download IDEA-Research/grounding-dino-base "
                                                          f"--local-dir {expected}")):
        grounding_dino_detections(shapes6)
    assert set(DETECTORS) == {"stand_in", "grounding_dino"}


def test_query_names_are_lower_case_one_per_category_and_never_hold_the_separator():
    dataset = {"categories": [{"id": 1, "name": "Traffic_Light"}, {"id": 2, "name": "dog"}]}
    assert query_names(dataset) == {1: "traffic light", 2: "dog"}
    assert text_prompt(query_names(dataset).values()) == "traffic light. dog."
    with pytest.raises(DataFormatError, match="both asked for as 'dog'"):
        query_names({"categories": [{"id": 1, "name": "Dog"}, {"id": 2, "name": "dog"}]})
    with pytest.raises(DataFormatError, match="without '.'"):
        query_names({"categories": [{"id": 1, "name": "st. bernard"}]})
