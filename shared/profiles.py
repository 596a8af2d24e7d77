"""What the smoke and full profiles mean, in one place per paper.

Every notebook has the papermill parameters ``profile`` ("smoke" or "full") and ``settings`` (a dict of
overrides). Each paper folder holds ``profiles.yaml``::

    common:                 # optional: applies to every notebook of the paper
      smoke: {...}
      full: {...}
    01_benchmark:           # notebook stem
      smoke: {n_boot: 20, ...}
      full:  {n_boot: 50, ...}

``notebook_settings(paper, notebook, profile, overrides)`` merges common, the notebook's profile entry and
the overrides. An override must name a known key, so a typo fails loudly instead of being ignored.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import yaml

from shared.errors import ConfigError, unknown_choice
from shared.paths import paper_dir

PROFILES = {
    "smoke": "offline stand-in data, CPU, a minute or two per notebook; the same code path as full",
    "full": "the paper's datasets and scale, on a GPU; needs the real data under data_dir",
}


class Settings(dict):
    """A dict whose keys are also attributes: ``cfg.n_boot`` is ``cfg["n_boot"]``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no setting {name!r}; settings are: {', '.join(sorted(self))}") from None

    def to_frame(self):
        """The settings as a two-column table for a notebook: nested mappings flattened into dotted names
        (``hparams.epochs``), every value written out in full as ``-p settings`` and ``profiles.yaml`` write it
        (YAML flow style: ``[erosion, dilation]``, ``null``), never cut short."""
        import pandas as pd

        rows = []

        def walk(name: str, value) -> None:
            if isinstance(value, Mapping) and value:
                for key, item in value.items():
                    walk(f"{name}.{key}", item)
            else:
                rows.append((name, yaml_text(value)))

        for key, value in self.items():
            walk(str(key), value)
        return pd.DataFrame(rows, columns=["setting", "value"])


def yaml_text(value) -> str:
    """``value`` on one line in YAML flow style (what ``-p settings`` and ``profiles.yaml`` take); ``repr`` for what
    YAML cannot write (a numpy scalar, a path)."""
    try:
        text = yaml.safe_dump(value, default_flow_style=True, width=1_000_000, sort_keys=False).strip()
    except yaml.YAMLError:
        return repr(value)
    return text[:-3].strip() if text.endswith("\n...") or text.endswith("...") else text


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise unknown_choice("profile", profile, PROFILES)
    return profile


def load_profiles(paper: str, path: Path | None = None) -> dict:
    path = path or paper_dir(paper) / "profiles.yaml"
    if not path.exists():
        raise ConfigError(f"{path} is missing: each paper folder needs a profiles.yaml (see shared/profiles.py)")
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must map notebook names to {{smoke: ..., full: ...}}")
    return data


def notebook_settings(
    paper: str,
    notebook: str,
    profile: str = "smoke",
    overrides: Mapping[str, Any] | None = None,
    *,
    path: Path | None = None,
) -> Settings:
    """Settings of ``notebook`` (its stem, e.g. ``"01_benchmark"``) for ``profile``, with ``overrides``."""
    check_profile(profile)
    table = load_profiles(paper, path)
    stem = Path(notebook).stem
    if stem not in table:
        notebooks = [k for k in table if k != "common"]
        raise unknown_choice(f"notebook of {paper}/profiles.yaml", stem, notebooks)
    merged: dict[str, Any] = {}
    for section in (table.get("common") or {}, table[stem]):
        entry = section.get(profile)
        if entry is None and section is table[stem]:
            raise ConfigError(f"{paper}/profiles.yaml: notebook {stem!r} has no {profile!r} entry")
        merged.update(entry or {})
    unknown = set(overrides or {}) - set(merged)
    if unknown:
        raise ConfigError(
            f"unknown setting(s) {', '.join(sorted(unknown))} for {paper}/{stem}; "
            f"valid settings: {', '.join(sorted(merged))}"
        )
    merged.update(overrides or {})
    return Settings(profile=profile, **merged)
