import ast
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ciln.corruptions import corrupt
from ciln.throughput import IMAGENET_C, import_imagecorruptions, speed_summary, throughput
from shared.datasets import load_dataset

needs_imagecorruptions = pytest.mark.skipif(importlib.util.find_spec("imagecorruptions") is None,
                                            reason="the imagecorruptions wheel is not installed")


@pytest.fixture(scope="module")
def images():
    return load_dataset("mnist32rgb").train.X[:6]


@needs_imagecorruptions
def test_import_imagecorruptions_twice():
    # the second call used to fail: the pkg_resources stand-in had no __spec__, and find_spec raised
    first = import_imagecorruptions()
    assert import_imagecorruptions() is first is sys.modules["imagecorruptions"]
    assert callable(first.corrupt)
    module = sys.modules.get("pkg_resources")
    assert module is None or module.__spec__ is not None, "no spec-less stand-in is left for other code"
    importlib.util.find_spec("pkg_resources")  # does not raise


def _severity_lists(source: str) -> dict[str, list]:
    """``c = [...][severity - 1]`` of every function in imagecorruptions' ``corruptions.py``, as Python values
    (zoom blur's ``np.arange(1, end, step)`` entries as (end, step))."""
    out = {}
    for fn in ast.parse(source).body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "c"
                    and isinstance(node.value, ast.Subscript) and isinstance(node.value.value, ast.List)):
                entries = []
                for e in node.value.value.elts:
                    if isinstance(e, ast.Call):  # np.arange(1, end, step)
                        entries.append(tuple(ast.literal_eval(a) for a in e.args[1:]))
                    else:
                        entries.append(ast.literal_eval(e))
                out[fn.name] = entries
    return out


@needs_imagecorruptions
def test_imagenet_c_constants_are_imagecorruptions_own():
    path = Path(importlib.util.find_spec("imagecorruptions").submodule_search_locations[0]) / "corruptions.py"
    theirs = _severity_lists(path.read_text())
    for name, constants in IMAGENET_C.items():
        assert [tuple(c) if isinstance(c, (tuple, list)) else c for c in constants] == theirs[name], name


@needs_imagecorruptions
@pytest.mark.parametrize("name", ["contrast", "brightness", "jpeg_compression", "defocus_blur"])
def test_same_constants_same_images(images, name):
    # like with like: on the deterministic corruptions, ours with ImageNet-C constants give imagecorruptions' images
    theirs = import_imagecorruptions()
    for severity in (1, 3, 5):
        ours = corrupt("cifar10", images, name, severity, split="test", options={"params": IMAGENET_C[name]})
        reference = np.stack([theirs.corrupt(im, severity, corruption_name=name) for im in images])
        assert np.abs(ours.astype(int) - reference).max() <= 1, (name, severity)


def test_throughput_table_compares_like_with_like(images):
    table = throughput(images[:3], severity=2, repeats=1, corruptions=["contrast", "glass_blur", "elastic_transform"])
    rows = table.set_index("corruption")
    assert rows.loc["contrast", "constants"] == "ImageNet-C 0.3"
    assert rows.loc["glass_blur", "constants"] == "ImageNet-C (0.9, 2, 1)"
    assert (rows["ours, CIFAR-10-C constants (images/s)"] > 0).all()
    assert np.isnan(rows.loc["elastic_transform", "ours (images/s)"]) and not rows.loc["elastic_transform", "compared"]
    assert "another algorithm" in rows.loc["elastic_transform", "note"]
    if importlib.util.find_spec("imagecorruptions") is not None:
        assert rows.loc["contrast", "compared"] and rows.loc["contrast", "speed-up"] == pytest.approx(
            rows.loc["contrast", "ours (images/s)"] / rows.loc["contrast", "imagecorruptions (images/s)"])
        assert not rows.loc["glass_blur", "compared"] and "fails" in rows.loc["glass_blur", "note"]


def test_speed_summary_counts_what_was_measured():
    table = pd.DataFrame({
        "corruption": ["a", "b", "c", "d", "e"],
        "speed-up": [2.0, 0.5, 1.25, np.nan, np.nan],
        "compared": [True, True, True, False, False],
        "note": ["", "", "", "imagecorruptions fails: TypeError: x", "not compared: another algorithm"],
    })
    summary = speed_summary(table)
    assert (summary["faster"], summary["compared"], summary["holds"]) == (2, 3, True)
    assert summary["detail"].startswith("faster on 2/3 with the same (ImageNet-C) constants, median 1.25x: a 2.00x, b 0.50x, c 1.25x")
    assert "not compared: d (imagecorruptions fails), e (not compared)" in summary["detail"]
    assert not speed_summary(table.assign(**{"speed-up": [0.9, 0.5, 1.25, np.nan, np.nan]}))["holds"]
