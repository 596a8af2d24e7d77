"""ciln/pages/__init__.py: what the pages share — the benchmarks a page reads, Figures 5 and 6 as a table, the
agreement of compared numbers and the severity key of Tables II and III."""
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from ciln.pages import CifarPage, Page, agreement_summary, by_severity, family_of, severity_key

PANELS = {"Blur": ["defocus_blur"], "Weather": ["fog", "frost", "snow"], "Digital": ["brightness", "contrast"]}


def _comparison(metric_values):
    return pd.DataFrame([{"corruption": c, "severity": str(s), "metric": m, "paper": p, "ours": o}
                         for (c, s, m), (p, o) in metric_values.items()])


def test_by_severity_orders_rows_by_family_with_paper_and_ours_per_level():
    comparison = _comparison({("fog", 1, "tv"): (0.1, 0.11), ("fog", 5, "tv"): (0.3, 0.2),
                              ("defocus_blur", 1, "tv"): (0.2, 0.25), ("fog", 1, "tv_ci95"): (0.002, 0.003)})
    table = by_severity(comparison, "tv", PANELS)
    assert list(table["corruption"]) == ["defocus_blur", "fog"]
    assert list(table["family"]) == ["Blur", "Weather"]
    assert list(table.columns) == ["family", "corruption", "paper 1", "ours 1", "paper 5", "ours 5"]
    assert table.loc[1, "ours 5"] == 0.2 and np.isnan(table.loc[0, "paper 5"])
    with pytest.raises(KeyError, match="no 'nth' in the comparison"):
        by_severity(comparison, "nth", PANELS)


def test_by_severity_puts_corruptions_in_no_family_last_and_keeps_missing_numbers_missing():
    comparison = _comparison({("zigzag", 1, "nth"): (0.1, np.nan), ("contrast", 1, "nth"): (0.2, 0.3),
                              ("brightness", 1, "nth"): (0.05, 0.04)})
    table = by_severity(comparison, "nth", PANELS)
    assert list(table["corruption"]) == ["brightness", "contrast", "zigzag"]  # the figures' order, then the rest
    assert table.loc[2, "family"] == "other" and np.isnan(table.loc[2, "ours 1"])
    assert family_of(PANELS)["snow"] == "Weather"


def test_agreement_summary_per_group():
    comparison = pd.DataFrame({"dataset": ["A"] * 4 + ["B"], "paper": [0.1, 0.2, 0.3, 0.4, 0.5],
                               "ours": [0.2, 0.3, 0.5, np.nan, 0.1]})
    agreement = agreement_summary(comparison, ["dataset"]).set_index("dataset")
    assert agreement.loc["A", "compared"] == 3 and agreement.loc["A", "of"] == 4
    assert agreement.loc["A", "mean |diff|"] == pytest.approx((0.1 + 0.1 + 0.2) / 3)
    assert agreement.loc["A", "rank correlation"] == pytest.approx(1.0)
    assert np.isnan(agreement.loc["B", "rank correlation"])  # one number: no correlation


def test_severity_key_matches_numbers_and_text():
    assert severity_key(5.0) == severity_key("5") == severity_key(5) == "5"
    assert severity_key(np.nan) == severity_key("") == severity_key(None) == ""
    assert severity_key(2.5) == "2.5"


def test_a_page_reads_the_benchmarks_its_settings_name(tmp_path, monkeypatch):
    """``benchmarks`` loads ``benchmark_names`` (all datasets by default, CIFAR-10 alone on a CifarPage) on the NLT
    rows; ``test_bench`` the test split."""
    calls = []

    def fake(cfg, names=None, *, split="nlt", data_dir=None, device="auto"):
        calls.append((None if names is None else list(names), split, data_dir, device))
        return {name: SimpleNamespace(dataset=f"{name.lower()}-stand-in") for name in names or ["CIFAR10", "MNIST"]}

    monkeypatch.setattr("ciln.pages.load_benchmarks", fake)

    class Everything(Page):
        notebook = "01_benchmark"

    class Cifar(CifarPage):
        notebook = "08_downstream"

    page = Everything("smoke", data_dir="d", device="cpu", out_dir=tmp_path)
    assert page.ours_on == {"CIFAR10": "cifar10-stand-in", "MNIST": "mnist-stand-in"}
    cifar = Cifar("smoke", out_dir=tmp_path)
    assert cifar.bench.dataset == "cifar10-stand-in" and cifar.test_bench.dataset == "cifar10-stand-in"
    assert calls == [(None, "nlt", "d", "cpu"), (["CIFAR10"], "nlt", None, "auto"), (["CIFAR10"], "test", None, "auto")]


@pytest.mark.parametrize("page, missing", [("examples:Examples", "[3]"), ("label_distributions:LabelDistributions", "[1]"),
                                           ("sorted_profiles:SortedProfiles", "[1]")])
def test_a_page_drawn_at_severities_the_setting_lacks_names_them_before_any_work(page, missing, tmp_path):
    """A figure's rows are the paper's severities: leaving one out is a ConfigError naming it and the fix, raised
    when the page is made (not a KeyError deep in a figure after the benchmarks were built)."""
    import importlib

    from shared.errors import ConfigError

    module, name = page.split(":")
    cls = getattr(importlib.import_module(f"ciln.pages.{module}"), name)
    with pytest.raises(ConfigError, match=rf"without {re.escape(missing)}.*severities: \["):
        cls("smoke", settings={"severities": [3, 5] if missing == "[1]" else [1, 5]}, out_dir=tmp_path)
    assert cls("smoke", settings={"severities": [1, 3, 5]}, out_dir=tmp_path).cfg.severities == [1, 3, 5]
