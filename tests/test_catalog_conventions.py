"""The project's conventions: catalogs, reported numbers, profiles and notebook hygiene."""
import json

import pytest

from shared.catalog import all_catalogs
from shared.paths import PAPERS, REPO_ROOT
from shared.profiles import load_profiles, notebook_settings
from shared.report import reported
from shared.run import KERNEL_NAME

CATALOGS = all_catalogs()
NOTEBOOKS = [nb for c in CATALOGS for nb in c.notebooks()]


def test_every_paper_has_a_catalog_and_index():
    assert [c.paper for c in CATALOGS] == list(PAPERS)
    for c in CATALOGS:
        assert (c.folder / "index.md").exists() and c.items
        assert len({i.id for i in c.items}) == len(c.items), f"{c.paper}: duplicate item ids"


def test_every_notebook_is_in_its_catalog_and_reported_files_exist():
    for c in CATALOGS:
        listed = {i.notebook for i in c.items}
        for nb in c.notebooks():
            assert nb.name in listed, f"{nb} is not listed in {c.paper}/items.yaml"
        for item in c.items:
            if item.reported and item.notebook and (c.folder / item.notebook).exists():
                table = reported(c.paper, item.reported)
                assert not table.empty


@pytest.mark.parametrize("path", sorted(REPO_ROOT.glob("*/reported/*.csv")), ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_reported_csv_reads_with_the_required_columns(path):
    # every file, not only those items.yaml names: a notebook may read any of them
    table = reported(path.parent.parent.name, path.stem)
    assert not table.empty and table["value"].notna().all(), f"{path}: empty, or rows without a value"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebook_has_parameters_cell_and_no_outputs(path):
    nb = json.loads(path.read_text())
    tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "exactly one cell must be tagged 'parameters'"
    source = "".join(tagged[0]["source"])
    for name in ("profile", "data_dir", "device", "settings", "out_dir"):
        assert f"\n{name} =" in "\n" + source, f"parameters cell lacks {name}"
    assert 'profile = "smoke"' in source, "the default profile must be smoke"
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None, "commit notebooks without outputs"
    assert nb["metadata"]["kernelspec"]["name"] == KERNEL_NAME, "JupyterLab must open it in the project's kernel"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebook_has_both_profiles(path):
    table = load_profiles(path.parent.name)
    assert path.stem in table, f"{path.parent.name}/profiles.yaml has no entry for {path.stem}"
    for profile in ("smoke", "full"):
        notebook_settings(path.parent.name, path.stem, profile)


def test_full_profile_parameter_files_exist_for_papers_with_notebooks():
    for c in CATALOGS:
        if c.notebooks():
            assert (c.folder / "params" / "full.yaml").exists()


def test_ci_runs_the_readme_test_command():
    assert "make test" in (REPO_ROOT / ".ci" / "run").read_text()
    readme = (REPO_ROOT / "README.md").read_text()
    assert "make test" in readme and "make book" in readme
