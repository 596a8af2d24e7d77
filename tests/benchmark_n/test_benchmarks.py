"""Benchmark files and their manifests: written once, kept when identical, rebuilt when damaged or stale."""
import json

import pytest

from benchmark_n.benchmarks import manifest_path, read_benchmark, write_benchmark
from benchmark_n.shapes import generate_shapes, preset
from shared.errors import ConfigError, DataFormatError, DataNotFoundError


@pytest.fixture(scope="module")
def shapes():
    return generate_shapes(6, seed=5, **preset("annotation")).dataset


def test_a_file_is_written_with_its_manifest_and_kept_when_identical(shapes, tmp_path):
    first = write_benchmark(shapes, tmp_path, "shapes-n_val", "paper", "hard", 1)
    assert first.written and first.path.name == "shapes-n_val_paper_high_seed1.json"
    dataset, manifest = read_benchmark(first.path)
    assert manifest == first.manifest and len(dataset["annotations"]) == manifest["kept"]
    assert manifest["engine"] == "paper" and manifest["tier"] == "high" and manifest["preset"]["p_del"] == 0.05
    assert manifest["annotations_in"] == len(shapes["annotations"])
    before = first.path.read_bytes()
    again = write_benchmark(shapes, tmp_path, "shapes-n_val", "paper", "high", 1)
    assert not again.written and again.path.read_bytes() == before


def test_damaged_or_stale_files_are_written_again(shapes, tmp_path):
    entry = write_benchmark(shapes, tmp_path, "x", "legacy_v0", "mid", 0)
    good = entry.path.read_bytes()
    entry.path.write_bytes(good[:-10])  # an interrupted copy
    with pytest.raises(DataFormatError, match="checksum of its manifest"):
        read_benchmark(entry.path)
    assert write_benchmark(shapes, tmp_path, "x", "legacy_v0", "mid", 0).written and entry.path.read_bytes() == good
    stale = write_benchmark(shapes, tmp_path, "x", "legacy_v0", "mid", 0, stale_box_area=True)  # other options
    assert stale.written and stale.manifest["options"]["stale_box_area"] is True
    other_source = {**shapes, "annotations": shapes["annotations"][:-1]}
    assert write_benchmark(other_source, tmp_path, "x", "legacy_v0", "mid", 0).written
    manifest = json.loads(manifest_path(entry.path).read_text())
    manifest["code"] = "older"
    manifest_path(entry.path).write_text(json.dumps(manifest))
    assert write_benchmark(other_source, tmp_path, "x", "legacy_v0", "mid", 0).written


def test_missing_pieces_and_bad_options_are_clear_errors(shapes, tmp_path):
    entry = write_benchmark(shapes, tmp_path, "x", "paper", "low", 0)
    manifest_path(entry.path).unlink()
    with pytest.raises(DataNotFoundError, match="manifest"):
        read_benchmark(entry.path)
    with pytest.raises(ConfigError, match="unknown option 'k' for engine 'paper'"):
        write_benchmark(shapes, tmp_path, "x", "paper", "low", 0, k=3)
