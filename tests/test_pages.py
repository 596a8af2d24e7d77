"""shared.pages.NotebookPage: the settings a page runs with, and the claims it writes for the book."""
import json

import pytest

from shared.errors import ConfigError
from shared.pages import NotebookPage
from shared.report import claim_record


class Engine(NotebookPage):
    paper, notebook = "benchmark_n", "00_noise_engine"


def test_settings_overrides_and_claims_reach_the_report(tmp_path):
    page = Engine("smoke", settings={"example_images": 2}, out_dir=tmp_path)
    table = page.settings_table()
    assert page.overridden and page.cfg.example_images == 2 and "example_images" in set(table.iloc[:, 0])
    shown = page._finish([claim_record("a", True), claim_record("b", None, "input not run")])
    assert list(shown["verdict"]) == ["yes", "not run"]
    assert [c["claim"] for c in json.loads((tmp_path / "claims.json").read_text())] == ["a", "b"]
    assert not Engine("smoke", out_dir=tmp_path).overridden


def test_settings_and_claims_are_shown_whole(tmp_path):
    page = Engine("smoke", settings={"engines": ["paper", "legacy_v0"] * 4}, out_dir=tmp_path)
    html = page.settings_table().to_html()
    assert "[paper, legacy_v0, paper, legacy_v0, paper, legacy_v0, paper, legacy_v0]" in html and "..." not in html
    statement = "A claim whose statement is far longer than fifty characters, so pandas would cut it short"
    assert statement in page._finish([claim_record(statement, True)]).to_html()


def test_an_unknown_setting_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="example_image"):
        Engine("smoke", settings={"example_image": 2}, out_dir=tmp_path)


def test_claims_shown_twice_are_written_once(tmp_path):
    page = Engine("smoke", out_dir=tmp_path)
    page.report.claim("recorded by the page itself", True)
    for _ in range(2):  # the claims cell run twice
        page._finish([claim_record("a", True), claim_record("b", False)])
    written = [c["claim"] for c in json.loads((tmp_path / "claims.json").read_text())]
    assert written == ["recorded by the page itself", "a", "b"]
