"""environment.yml, pyproject.toml and constraints.txt describe the same environment."""
import tomllib

import yaml

from shared.paths import REPO_ROOT


def test_environment_yml_lists_the_pyproject_dependencies():
    deps = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "python=3.11" in env["dependencies"]
    assert [p for p in pip if not p.startswith("-")] == deps


def test_constraints_pin_every_dependency_and_the_torch_pair():
    pins = {}
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1"
    deps = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        name = dep.split("==")[0].split(">")[0].split("<")[0].lower().replace("_", "-")
        assert name in pins, f"{name} is not pinned in constraints.txt"
