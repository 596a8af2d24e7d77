"""Benchmark-N's full-profile needs (``benchmark_n.requirements``), checked by ``shared.preflight`` before a batch."""
from __future__ import annotations

import pytest

from benchmark_n.rehearsal import write_rehearsal_data
from shared.paths import REPO_ROOT
from shared.preflight import preflight
from shared.run import parse_args, plan_jobs


def _report(tmp_path, *args):
    jobs = plan_jobs(parse_args(["benchmark_n", "--profile", "full", *args]), "full", tmp_path / "runs")
    return preflight(jobs, "full", has_cuda=True)


def test_the_rehearsal_folder_has_everything_its_parameters_read(tmp_path):
    write_rehearsal_data(tmp_path / "data")
    report = _report(tmp_path, "-f", str(REPO_ROOT / "benchmark_n/params/rehearsal.yaml"), "-p", "data_dir",
                     str(tmp_path / "data"))
    assert report.ok and not report.warnings, report.text()
    checked = report.checked
    assert checked["benchmark_n/03_train_eval.ipynb"] == ["coco2017 train annotations and images",
                                                          "coco2017 val annotations and images"]
    assert checked["benchmark_n/01_annotation_quality.ipynb"] == ["coco2017 val annotations"]
    assert checked["benchmark_n/09_camus_ef.ipynb"] == ["the CAMUS release"]


def test_an_empty_folder_names_every_file_the_full_profile_reads(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))  # no ImageNet weights in the hub cache
    (tmp_path / "data").mkdir()
    report = _report(tmp_path, "-f", str(REPO_ROOT / "benchmark_n/params/full.yaml"), "-p", "data_dir",
                     str(tmp_path / "data"))
    text = report.text()
    assert not report.ok
    for expected in ("coco/annotations/instances_val2017.json", "coco/annotations/instances_train2017.json",
                     "resnet50-0676ba61.pth", "weights/sam_vit_h_4b8939.pth", "weights/grounding-dino-base",
                     "no CAMUS patient folders"):
        assert expected in text, expected
    assert "SAM checkpoint" in report.checked["benchmark_n/08_coco_wan.ipynb"]
    assert "Grounding-DINO" in report.checked["benchmark_n/08_coco_wan.ipynb"]


def test_images_missing_stop_a_model_page_and_only_warn_the_engine_page(tmp_path):
    write_rehearsal_data(tmp_path / "data")
    for split in ("train2017", "val2017"):
        for image in (tmp_path / "data/coco" / split).iterdir():
            image.unlink()
        (tmp_path / "data/coco" / split).rmdir()
    report = _report(tmp_path, "-f", str(REPO_ROOT / "benchmark_n/params/rehearsal.yaml"), "-p", "data_dir",
                     str(tmp_path / "data"), "--only", "00_*", "--only", "03_*")
    problems, (warning,) = report.problems, report.warnings.items()
    assert [m.split("\n")[0].split("/coco/")[1] for m in problems] == ["train2017 is not a folder",
                                                                        "val2017 is not a folder"]
    assert all(keys == ["benchmark_n/03_train_eval.ipynb"] for keys in problems.values())
    assert "optional" in warning[0] and warning[1] == ["benchmark_n/00_noise_engine.ipynb"]


@pytest.mark.parametrize("backend, expected", [("mmdet", "package mmdet"), ("tiny", None)])
def test_the_backend_decides_what_a_model_page_needs(tmp_path, backend, expected):
    report = _report(tmp_path, "--only", "04_*", "-p", "settings", f"{{dataset: shapes, backend: {backend}}}")
    assert report.checked["benchmark_n/04_noise_ablation.ipynb"] == ([expected] if expected else [])
