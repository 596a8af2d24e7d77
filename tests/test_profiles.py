import pytest

from shared.errors import ConfigError
from shared.profiles import Settings, notebook_settings

PROFILES = """
common:
  smoke: {n: 10, seed: 0}
  full: {n: 1000, seed: 0}
01_demo:
  smoke: {epochs: 2}
  full: {epochs: 100, n: 5000}
02_only_smoke:
  smoke: {epochs: 1}
"""


@pytest.fixture
def profiles(tmp_path):
    path = tmp_path / "profiles.yaml"
    path.write_text(PROFILES)
    return path


def test_merges_common_and_notebook_entries(profiles):
    smoke = notebook_settings("ciln", "01_demo", "smoke", path=profiles)
    full = notebook_settings("ciln", "01_demo.ipynb", "full", path=profiles)
    assert dict(smoke) == {"profile": "smoke", "n": 10, "seed": 0, "epochs": 2}
    assert full.n == 5000 and full.epochs == 100  # the notebook's entry wins over common


def test_overrides_apply_and_must_name_known_settings(profiles):
    assert notebook_settings("ciln", "01_demo", "smoke", {"epochs": 7}, path=profiles).epochs == 7
    with pytest.raises(ConfigError, match="unknown setting.*epoch.*valid settings: epochs, n, seed"):
        notebook_settings("ciln", "01_demo", "smoke", {"epoch": 7}, path=profiles)


def test_bad_profile_notebook_and_missing_entry_are_clear(profiles):
    with pytest.raises(ConfigError, match="unknown profile 'medium'.*full, smoke"):
        notebook_settings("ciln", "01_demo", "medium", path=profiles)
    with pytest.raises(ConfigError, match="unknown notebook.*'03_x'.*01_demo, 02_only_smoke"):
        notebook_settings("ciln", "03_x", "smoke", path=profiles)
    with pytest.raises(ConfigError, match="no 'full' entry"):
        notebook_settings("ciln", "02_only_smoke", "full", path=profiles)


def test_attribute_access_names_valid_settings(profiles):
    cfg = notebook_settings("ciln", "01_demo", "smoke", path=profiles)
    with pytest.raises(AttributeError, match="settings are: epochs, n, profile, seed"):
        cfg.epoch
    assert list(cfg.to_frame()["setting"]) == ["profile", "n", "seed", "epochs"]
    nested = Settings(hparams={"epochs": 10, "loss_epochs": [1, 4]}, tiers=["clean", "high"], checkpoint=None)
    assert nested.to_frame().values.tolist() == [["hparams.epochs", "10"], ["hparams.loss_epochs", "[1, 4]"],
                                                 ["tiers", "[clean, high]"], ["checkpoint", "null"]]
    odd = Settings(n=__import__("numpy").int64(3), path=__import__("pathlib").Path("/d")).to_frame()
    assert odd["value"].tolist() == ["np.int64(3)", "PosixPath('/d')"]  # what YAML cannot write: its repr
