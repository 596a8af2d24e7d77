"""The runner's notebook parameters: read from ``-f`` files and ``-p`` pairs, checked before any kernel starts.

A parameter file is YAML: top-level keys are parameters for every notebook, and an optional ``notebooks:``
mapping gives extra parameters per notebook stem::

    profile: full
    device: cuda
    notebooks:
      01_benchmark: {settings: {severities: [5]}}

Every name must be a parameter of the notebooks it goes to (the assignments in their ``parameters`` cell), every
stem under ``notebooks:`` a notebook of the chosen papers, and every ``settings`` key a setting of the notebook's
profile, so a misspelt name is an error instead of a run that silently ignores it. Relative paths (``data_dir``,
and settings whose names end in ``_dir``, ``_dirs``, ``_path`` or ``_file``) are made absolute against the folder
the command runs in, because the kernels run in the notebooks' folders.
"""
from __future__ import annotations

import ast
import difflib
import json
from pathlib import Path

import yaml

from shared.errors import ConfigError
from shared.profiles import notebook_settings

RUNNER_SET = {"out_dir": "--out"}  # parameters the runner sets itself -> the option to use instead
PATH_SUFFIXES = ("_dir", "_dirs", "_path", "_file")


def _layer(base: dict, top: dict) -> dict:
    """``top`` over ``base``; a ``settings`` mapping in both is merged key by key (a later file changes the settings
    it names and keeps the others, so a small file can shrink a larger one: ``-f rehearsal.yaml -f ci.yaml``)."""
    merged = {**base, **top}
    if isinstance(base.get("settings"), dict) and isinstance(top.get("settings"), dict):
        merged["settings"] = {**base["settings"], **top["settings"]}
    return merged


def load_parameter_files(files: list[str] | None) -> tuple[dict, dict]:
    """Global and per-notebook parameters from YAML files (later files win; ``settings`` merge key by key)."""
    common, per_notebook = {}, {}
    for name in files or []:
        path = Path(name)
        if not path.exists():
            raise ConfigError(f"parameter file {path} does not exist")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"parameter file {path} is not valid YAML: {e}") from e
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of parameter names to values, got {type(data).__name__}")
        notebooks = data.pop("notebooks", None) or {}
        if not isinstance(notebooks, dict):
            raise ConfigError(f"{path}: 'notebooks:' must map notebook stems to parameters, e.g. "
                              f"'notebooks: {{01_benchmark: {{device: cuda}}}}', got {notebooks!r}")
        for stem, params in notebooks.items():
            if not isinstance(params, dict | None):
                raise ConfigError(f"{path}: notebooks: {stem}: must map parameter names to values, got {params!r}")
            per_notebook[str(stem)] = _layer(per_notebook.get(str(stem), {}), params or {})
        common = _layer(common, data)
    return common, per_notebook


def parse_cli_values(pairs: list[tuple[str, str]] | None) -> dict:
    """``-p NAME VALUE`` pairs, each value read as YAML."""
    values = {}
    for key, value in pairs or []:
        try:
            values[key] = yaml.safe_load(value)
        except yaml.YAMLError as e:
            raise ConfigError(f"-p {key} {value!r}: the value is not valid YAML ({e.problem}); "
                              "quote dicts and lists, e.g. -p settings '{severities: [5]}'") from e
    return values


def parameter_names(notebook: Path) -> list[str]:
    """The names assigned in the notebook's cell tagged ``parameters``, in order."""
    cells = json.loads(notebook.read_text())["cells"]
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if not tagged:
        raise ConfigError(f"{notebook} has no cell tagged 'parameters'; papermill cannot pass it parameters")
    names = []
    for node in ast.parse("".join(tagged[0]["source"])).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def _unknown(name: str, where: str, valid: list[str]) -> ConfigError:
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    if name in RUNNER_SET:
        hint = f"; the runner sets it: use {RUNNER_SET[name]}"
    return ConfigError(f"unknown parameter {name!r} {where}{hint}; the notebooks take: {', '.join(valid)}")


def check_names(notebooks: list[Path], common: dict, cli: dict, per_notebook: dict, all_stems: list[str]) -> None:
    """Raise ConfigError for a name no planned notebook takes, or a ``notebooks:`` stem that is not a notebook."""
    names = {path: parameter_names(path) for path in notebooks}
    taken = sorted({n for ns in names.values() for n in ns} - set(RUNNER_SET))
    for source, values in (("given with -p", cli), ("in a -f file", common)):
        for name in values:
            if name in RUNNER_SET or not any(name in ns for ns in names.values()):
                raise _unknown(name, source, taken)
    for stem, values in per_notebook.items():
        if stem not in all_stems:
            close = difflib.get_close_matches(stem, all_stems, n=1)
            raise ConfigError(f"'notebooks: {stem}' in a -f file names no notebook"
                              + (f" (did you mean {close[0]!r}?)" if close else "")
                              + f"; the notebooks are: {', '.join(all_stems)}")
        for path in (p for p in notebooks if p.stem == stem):
            for name in values:
                if name in RUNNER_SET or name not in names[path]:
                    raise _unknown(name, f"under 'notebooks: {stem}'", [n for n in names[path] if n not in RUNNER_SET])


def check_settings(paper: str, stem: str, profile: str, params: dict) -> None:
    """Raise ConfigError (naming the valid settings) if ``settings`` has a key the notebook's profile lacks."""
    settings = params.get("settings")
    if settings is None:
        return
    if not isinstance(settings, dict):
        raise ConfigError(f"{paper}/{stem}: settings must be a mapping, e.g. -p settings '{{n_boot: 5}}', got {settings!r}")
    notebook_settings(paper, stem, profile, settings)


def absolute_paths(params: dict, cwd: Path) -> dict:
    """``params`` with relative ``data_dir`` and path-named settings made absolute against ``cwd``."""
    def resolve(name: str, value):
        if isinstance(value, str) and name.endswith(PATH_SUFFIXES):
            return str((cwd / Path(value).expanduser()).absolute())
        if isinstance(value, dict):
            return {k: resolve(k if name == "settings" else name, v) for k, v in value.items()}
        return value

    return {name: resolve(name, value) for name, value in params.items()}
