"""Before a batch starts: does this machine have what the chosen profile and parameters need?

A full-profile run that stops after an hour because a weight file is missing wastes the hour. The runner
calls ``preflight`` on the planned notebooks before any kernel starts (``python -m shared.run --check-env``
prints the same report and exits):

* **device**: a notebook asked to run on ``cuda`` needs a visible GPU; ``auto`` in the full profile without
  one is a warning (it will run, slowly, on the CPU);
* **data**: in the full profile, every file the notebook's settings will read, located under its
  ``data_dir`` by the same functions the loaders use (so the check and the loader cannot disagree); data a
  notebook can do without (it skips what needs it, with the reason) is a warning;
* **packages**: Python packages that only some settings import.

Each paper declares its needs in ``<paper>/requirements.py``: ``full_profile_needs(notebook, cfg)``
returns a list of ``Need`` for one notebook stem and its merged settings. A paper without that module
needs nothing beyond the smoke profile's environment.
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from shared.errors import ConfigError, ReplicationError
from shared.paths import data_dir as resolve_data_dir
from shared.profiles import notebook_settings


@dataclass(frozen=True)
class Need:
    """Something a notebook needs: ``locate(data_dir)`` returns quietly when present and raises a
    ReplicationError (or ImportError) whose message says what is missing and how to get it. An ``optional``
    need is one the notebook can do without (it skips the items that need it and says so): its absence is a
    warning, not a reason to stop."""

    what: str
    locate: Callable[[Path], object]
    optional: bool = False


def any_of(what: str, needs: list[Need]) -> Need:
    """A need met when at least one of ``needs`` is (a notebook that skips what is absent still needs something);
    when none is, its message is the first one's."""

    def locate(root):
        errors = []
        for need in needs:
            try:
                need.locate(root)
                return
            except (ReplicationError, ImportError) as e:
                errors.append(e)
        if errors:
            raise type(errors[0])(f"none of {what} is here; the first: {errors[0]}")

    return Need(what, locate)


def package(module: str, install: str) -> Need:
    """A Python package that must be importable (``install``: the command that provides it)."""

    def locate(_root):
        if importlib.util.find_spec(module) is None:
            raise ImportError(f"the Python package {module!r} is not installed: {install}")

    return Need(f"package {module}", locate)


@dataclass
class Report:
    """What ``preflight`` found: each problem (stop) and warning (go on) with the notebooks it concerns."""

    problems: dict[str, list[str]] = field(default_factory=dict)  # message -> notebook keys
    warnings: dict[str, list[str]] = field(default_factory=dict)
    checked: dict[str, list[str]] = field(default_factory=dict)  # notebook key -> what was checked

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, kind: str, message: str, key: str) -> None:
        keys = getattr(self, kind).setdefault(message, [])
        if key not in keys:
            keys.append(key)

    def text(self) -> str:
        lines = [f"  checked {len(self.checked)} notebook(s): "
                 + (f"{len(self.problems)} problem(s)" if self.problems else "everything needed is here")]
        for kind, messages in (("error", self.problems), ("warning", self.warnings)):
            for message, keys in messages.items():
                shown = ", ".join(keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
                lines.append(f"  {kind}: " + message.replace("\n", "\n      ") + f"\n      (needed by {shown})")
        return "\n".join(lines)


def paper_needs(paper: str) -> Callable | None:
    """``<paper>.requirements.full_profile_needs``, or None for a paper without that module."""
    if importlib.util.find_spec(f"{paper}.requirements") is None:
        return None
    return importlib.import_module(f"{paper}.requirements").full_profile_needs


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def device_messages(device, profile: str, has_cuda: bool) -> tuple[list[str], list[str]]:
    """(problems, warnings) for the ``device`` parameter on this machine."""
    device = str(device or "auto")
    if device.startswith("cuda") and not has_cuda:
        import torch

        return [f"device {device!r} was asked for, but no CUDA GPU is visible (torch {torch.__version__}, "
                f"built for CUDA {torch.version.cuda}). Run on a GPU machine, or pass -p device cpu "
                "(the full profile on a CPU takes days)"], []
    if device == "auto" and profile == "full" and not has_cuda:
        return [], ["no CUDA GPU is visible: device 'auto' will train on the CPU, far slower than the full "
                    "profile is sized for"]
    return [], []


def preflight(jobs: list[dict], profile: str, *, has_cuda: bool | None = None) -> Report:
    """Check every planned notebook (``jobs``: dicts with ``key``, ``paper``, ``notebook`` and ``parameters``)."""
    has_cuda = cuda_available() if has_cuda is None else has_cuda
    report = Report()
    for job in jobs:
        key, params = job["key"], job["parameters"]
        problems, warnings = device_messages(params.get("device"), profile, has_cuda)
        for message in problems:
            report.add("problems", message, key)
        for message in warnings:
            report.add("warnings", message, key)
        needs_of = paper_needs(job["paper"]) if profile == "full" else None
        needs = {}
        if needs_of is not None:
            settings = params.get("settings") or {}
            if not isinstance(settings, dict):
                raise ConfigError(f"{key}: the settings parameter must be a mapping, got {settings!r}")
            cfg = notebook_settings(job["paper"], job["notebook"], profile, settings)
            needs = {need.what: need for need in needs_of(Path(job["notebook"]).stem, cfg)}
        root = resolve_data_dir(params.get("data_dir"))
        for need in needs.values():
            try:
                need.locate(root)
            except (ReplicationError, ImportError) as e:
                if need.optional:
                    report.add("warnings", f"{need.what} (optional: the items that need it are skipped): "
                                           f"{str(e).strip()}", key)
                else:
                    report.add("problems", str(e).strip(), key)
        report.checked[key] = list(needs)
    return report
