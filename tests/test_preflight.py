"""shared.preflight: what a planned batch needs, checked before any notebook starts."""
import pytest

import shared.preflight as pf
from shared.errors import ConfigError, DataNotFoundError
from shared.preflight import Need, device_messages, package, preflight


def job(notebook="01_benchmark", **params):
    return {"key": f"ciln/{notebook}.ipynb", "paper": "ciln", "notebook": f"{notebook}.ipynb",
            "parameters": {"profile": "full", **params}}


def test_device_cuda_without_a_gpu_stops_auto_warns_in_full_only():
    problems, warnings = device_messages("cuda", "full", has_cuda=False)
    assert "no CUDA GPU is visible" in problems[0] and "-p device cpu" in problems[0] and not warnings
    assert device_messages("cuda:1", "smoke", has_cuda=False)[0]
    assert device_messages("auto", "full", has_cuda=False) == ([], [device_messages("auto", "full", False)[1][0]])
    assert device_messages(None, "smoke", has_cuda=False) == ([], [])
    assert device_messages("cuda", "full", has_cuda=True) == ([], [])


def test_required_needs_stop_optional_ones_warn_and_each_message_lists_its_notebooks(tmp_path, monkeypatch):
    (tmp_path / "present.txt").write_text("x")

    def missing(name):
        def locate(root):
            if not (root / name).exists():
                raise DataNotFoundError(f"{name} not found under {root}")
        return locate

    def needs(notebook, cfg):
        assert cfg.profile == "full" and "datasets" in cfg  # the notebook's merged settings
        out = [Need("present", missing("present.txt")), Need("absent", missing("absent.txt")),
               package("json", "always there"), package("no_such_module_xyz", "pip install it")]
        return out + ([Need("extra", missing("extra.txt"), optional=True)] if notebook == "06_tv" else [])

    monkeypatch.setattr(pf, "paper_needs", lambda paper: needs)
    report = preflight([job(data_dir=str(tmp_path)), job("06_tv", data_dir=str(tmp_path))], "full", has_cuda=True)
    assert not report.ok
    assert report.problems == {f"absent.txt not found under {tmp_path}": ["ciln/01_benchmark.ipynb", "ciln/06_tv.ipynb"],
                               "the Python package 'no_such_module_xyz' is not installed: pip install it":
                                   ["ciln/01_benchmark.ipynb", "ciln/06_tv.ipynb"]}
    (warning, keys), = report.warnings.items()
    assert warning.startswith("extra (optional: the items that need it are skipped)") and keys == ["ciln/06_tv.ipynb"]
    assert report.checked["ciln/06_tv.ipynb"] == ["present", "absent", "package json", "package no_such_module_xyz", "extra"]
    text = report.text()
    assert "2 problem(s)" in text and "(needed by ciln/01_benchmark.ipynb, ciln/06_tv.ipynb)" in text

    assert preflight([job(data_dir=str(tmp_path))], "smoke", has_cuda=False).ok  # smoke reads no real data
    with pytest.raises(ConfigError, match="unknown setting"):  # a misspelt setting is caught before any kernel
        preflight([job(settings={"severitys": [5]})], "full", has_cuda=True)


def test_any_of_is_met_by_one_need_and_otherwise_reports_the_first(tmp_path):
    def file_need(name):
        def locate(root):
            if not (root / name).exists():
                raise DataNotFoundError(f"{name} missing")
        return Need(name, locate, optional=True)

    either = pf.any_of("the datasets", [file_need("a"), file_need("b")])
    with pytest.raises(DataNotFoundError, match="none of the datasets is here; the first: a missing"):
        either.locate(tmp_path)
    (tmp_path / "b").write_text("")
    either.locate(tmp_path)
    assert not either.optional
