"""The real datasets' folder layouts (benchmark_n.formats): writing stand-ins, finding and checking a user's copy."""
import json

import numpy as np
import pytest
from PIL import Image

from benchmark_n.coco import ann_to_mask, mask_to_rle, write_coco
from benchmark_n.formats import (LAYOUTS, annotation_path, image_path, load_split, write_coco2017, write_layout)
from benchmark_n.shapes import CLASS_COLOURS, generate_shapes
from shared.datasets.writers import write_lfs_pointer
from shared.errors import ConfigError, DataFormatError, DataNotFoundError

CITYSCAPES_CLASSES = [(24, "person"), (25, "rider"), (26, "car"), (27, "truck"), (28, "bus"), (31, "train"),
                      (32, "motorcycle"), (33, "bicycle")]


@pytest.fixture(scope="module")
def small():
    kwargs = dict(height=64, width=96, radius=(0.2, 0.4), max_objects=3)
    return generate_shapes(4, seed=0, **kwargs), generate_shapes(3, seed=1, **kwargs)


@pytest.fixture
def coco_root(tmp_path, small):
    return write_coco2017(tmp_path / "coco", *small)


def _masks(dataset):
    sizes = {im["id"]: (im["height"], im["width"]) for im in dataset["images"]}
    return [ann_to_mask(a, *sizes[a["image_id"]]) for a in dataset["annotations"]]


def test_write_coco2017_then_load_split_reads_it_back(coco_root, small):
    train, val = small
    assert (coco_root / "annotations" / "instances_train2017.json").is_file()
    for split, data in (("train", train), ("val", val)):
        loaded = load_split(coco_root, "coco2017", split, check_images=True)
        assert loaded["annotations"] == data.dataset["annotations"]
        assert loaded["images"] == data.dataset["images"] and loaded["categories"] == data.dataset["categories"]
        for index, (entry, original) in enumerate(zip(loaded["images"], data.images)):
            path = coco_root / f"{split}2017" / entry["file_name"]
            assert path == image_path(coco_root, "coco2017", split, entry)
            with Image.open(path) as im:
                assert im.format == "JPEG"
                pixels = np.asarray(im.convert("RGB"))
            assert pixels.shape == (entry["height"], entry["width"], 3)
            assert np.median(np.abs(pixels.astype(int) - original)) <= 1          # quality 95
            for ann_id, visible in data.visible_masks(index).items():             # RGB stays RGB
                ann = next(a for a in loaded["annotations"] if a["id"] == ann_id)
                colour = np.median(pixels[visible], axis=0)                      # (edges blur in JPEG)
                assert np.abs(colour - CLASS_COLOURS[ann["category_id"]]).max() <= 8, (ann_id, colour)


def test_missing_annotation_file_names_the_expected_path(tmp_path):
    expected = tmp_path / "annotations" / "instances_val2017.json"
    with pytest.raises(DataNotFoundError) as error:
        annotation_path(tmp_path, "coco2017", "val")
    assert str(expected) in str(error.value) and "annotations_trainval2017.zip" in str(error.value)
    with pytest.raises(DataNotFoundError, match="instancesonly_filtered_gtFine_train.json"):
        load_split(tmp_path, "cityscapes", "train")
    with pytest.raises(DataNotFoundError, match="lvisdataset.org"):
        load_split(tmp_path, "lvis_v1", "val")
    with pytest.raises(DataNotFoundError, match="(?s)annotations/instances_train.json.*VIPER curated as COCO"):
        load_split(tmp_path, "viper", "train")


def test_viper_in_coco_format_round_trips_and_takes_either_annotation_path(tmp_path, small):
    root = write_layout(tmp_path / "viper", "viper", {"train": small[0], "val": small[1]})
    loaded = load_split(root, "viper", "val", check_images=True)
    assert loaded == small[1].dataset
    entry = loaded["images"][0]
    assert image_path(root, "viper", "val", entry) == root / "val" / entry["file_name"]
    (root / "annotations" / "instances_val.json").rename(root / "instances_val.json")
    assert annotation_path(root, "viper", "val") == root / "instances_val.json"
    (root / "val" / entry["file_name"]).unlink()
    with pytest.raises(DataNotFoundError, match=f"1 of the {len(loaded['images'])} VIPER .* val images"):
        load_split(root, "viper", "val", check_images=True)


def test_git_lfs_pointer_is_refused_with_the_fix(coco_root):
    path = coco_root / "annotations" / "instances_val2017.json"
    write_lfs_pointer(path, path.read_bytes())
    with pytest.raises(DataFormatError, match="(?i)git.lfs"):
        load_split(coco_root, "coco2017", "val")


def test_utf8_bom_is_read(coco_root, small):
    path = coco_root / "annotations" / "instances_val2017.json"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_split(coco_root, "coco2017", "val")["annotations"] == small[1].dataset["annotations"]


def test_unknown_category_and_duplicate_ids_are_named(coco_root, small):
    path = coco_root / "annotations" / "instances_val2017.json"
    dataset = json.loads(json.dumps(small[1].dataset))
    bad = dataset["annotations"][1]
    bad["category_id"] = 99
    write_coco(path, dataset)
    with pytest.raises(DataFormatError, match=f"annotation {bad['id']} has category_id 99"):
        load_split(coco_root, "coco2017", "val")
    dataset = json.loads(json.dumps(small[1].dataset))
    dataset["annotations"][2]["id"] = dataset["annotations"][0]["id"]
    write_coco(path, dataset)
    with pytest.raises(DataFormatError, match="appears more than once"):
        load_split(coco_root, "coco2017", "val")


def test_check_images_names_the_missing_file(coco_root, small):
    missing = coco_root / "val2017" / small[1].dataset["images"][1]["file_name"]
    missing.unlink()
    assert load_split(coco_root, "coco2017", "val")        # the JSON alone is fine
    with pytest.raises(DataNotFoundError) as error:
        load_split(coco_root, "coco2017", "val", check_images=True)
    assert str(missing) in str(error.value) and "1 of the 3" in str(error.value)


def test_cityscapes_layout_as_the_mmdet_converter_writes_it(tmp_path, small):
    root = write_layout(tmp_path / "cityscapes", "cityscapes", {"train": small[0], "val": small[1]})
    loaded = load_split(root, "cityscapes", "val", check_images=True)
    assert all("supercategory" not in c for c in loaded["categories"])
    assert loaded["images"][0]["id"] == 0 and loaded["annotations"][0]["id"] == 0       # the converter's ids
    assert all(isinstance(a["segmentation"], dict) for a in loaded["annotations"])     # RLE
    assert [m.tolist() for m in _masks(loaded)] == [m.tolist() for m in _masks(small[1].dataset)]
    entry = loaded["images"][0]
    path = root / "leftImg8bit" / "val" / entry["file_name"]
    assert path.name.endswith("_leftImg8bit.png")
    with Image.open(path) as im:
        assert np.array_equal(np.asarray(im), small[1].images[0])                      # PNG: lossless

    # a tiny file exactly as the converter writes one (8 classes, label ids, no supercategory, RLE, ids from 0)
    mask = np.zeros((32, 64), np.uint8)
    mask[4:12, 10:30] = 1
    rle = mask_to_rle(mask)
    tiny = {"images": [{"file_name": "aachen/aachen_000000_000019_leftImg8bit.png", "height": 32, "width": 64,
                        "segm_file": "aachen/aachen_000000_000019_gtFine_labelIds.png", "id": 0}],
            "categories": [{"id": i, "name": n} for i, n in CITYSCAPES_CLASSES],
            "annotations": [{"iscrowd": 0, "category_id": 26, "bbox": [10.0, 4.0, 20.0, 8.0], "area": 160,
                             "segmentation": rle, "image_id": 0, "id": 0}]}
    write_coco(tmp_path / "cs" / "annotations" / "instancesonly_filtered_gtFine_train.json", tiny)
    loaded = load_split(tmp_path / "cs", "cityscapes", "train")
    assert len(loaded["categories"]) == 8 and ann_to_mask(loaded["annotations"][0], 32, 64).sum() == 160
    with pytest.raises(DataNotFoundError, match="aachen_000000_000019_leftImg8bit.png"):
        load_split(tmp_path / "cs", "cityscapes", "train", check_images=True)


def test_lvis_layout_finds_images_through_coco_url(tmp_path, small):
    root = write_layout(tmp_path / "lvis", "lvis_v1", {"train": small[0], "val": small[1]})
    assert (root / "lvis_v1_val.json").is_file()
    loaded = load_split(root, "lvis_v1", "val", check_images=True)
    assert all("supercategory" not in c and c["synset"] for c in loaded["categories"])
    assert all("file_name" not in im for im in loaded["images"])
    assert all("iscrowd" not in a for a in loaded["annotations"])
    entry = loaded["images"][0]
    assert entry["coco_url"].startswith("http://images.cocodataset.org/val2017/")
    assert image_path(root, "lvis_v1", "val", entry) == root / "val2017" / small[1].dataset["images"][0]["file_name"]
    assert [m.tolist() for m in _masks(loaded)] == [m.tolist() for m in _masks(small[1].dataset)]
    # MMDetection keeps the JSONs under annotations/: found there too
    (root / "annotations").mkdir()
    (root / "lvis_v1_val.json").rename(root / "annotations" / "lvis_v1_val.json")
    assert annotation_path(root, "lvis_v1", "val") == root / "annotations" / "lvis_v1_val.json"
    # a train-split image listed in val (LVIS val uses COCO train2017 images too) is looked for in train2017/
    entry = dict(entry, coco_url="http://images.cocodataset.org/train2017/000000000001.jpg")
    assert image_path(root, "lvis_v1", "val", entry) == root / "train2017" / "000000000001.jpg"


def test_registry_and_bad_names(tmp_path, small):
    assert set(LAYOUTS) == {"coco2017", "cityscapes", "lvis_v1", "viper"}
    assert all(set(spec.annotations) == {"train", "val"} for spec in LAYOUTS.values())
    with pytest.raises(ConfigError, match="cityscapes, coco2017, lvis_v1, viper"):
        annotation_path(tmp_path, "coco2014", "val")
    with pytest.raises(ConfigError, match="train, val"):
        annotation_path(tmp_path, "coco2017", "test")
    train, _ = small
    wrong = type(train)(train.dataset, train.images[:, :32], train.instance_maps)
    with pytest.raises(ConfigError, match="image 1"):
        write_layout(tmp_path, "coco2017", {"train": wrong})
