"""shared.codedeps: the project files a module or notebook imports, on a small package tree and on the repository."""
import json

import pytest

from shared.codedeps import (
    PROJECT_PACKAGES, closure_fingerprint, imports_of_source, module_closure, notebook_imports,
)
from shared.paths import REPO_ROOT

TREE = {
    "shared/__init__.py": "",
    "shared/seeding.py": "import hashlib\n",
    "shared/models.py": "import torch\nfrom shared import seeding\n",
    "shared/lazy.py": "",
    "shared/book.py": "import yaml\n",
    "ciln/__init__.py": "",
    "ciln/helpers.py": "x = 1\n",
    "ciln/corruptions/__init__.py": "from .cifar import blur\n",
    "ciln/corruptions/cifar.py": "from ..helpers import x\n",
    "ciln/voters.py": "from . import helpers\nfrom shared.models import build\n\n\n"
                      "def fit():\n    import shared.lazy\n",
}


@pytest.fixture
def tree(tmp_path):
    for name, text in TREE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def names(paths, root):
    return {p.relative_to(root).as_posix() for p in paths}


def test_the_closure_follows_imports_transitively_with_parent_packages_and_nothing_else(tree):
    closure = module_closure(["ciln.voters", "numpy"], root=tree)
    assert closure == sorted(closure) and all(p.is_absolute() for p in closure)
    # shared.seeding two imports away, shared.lazy imported inside a function, every __init__ on the way;
    # not shared/book.py (imported by nobody) nor ciln/corruptions (a sibling package)
    assert names(closure, tree) == {"ciln/__init__.py", "ciln/voters.py", "ciln/helpers.py", "shared/__init__.py",
                                    "shared/models.py", "shared/seeding.py", "shared/lazy.py"}


def test_importing_a_submodule_runs_its_package_and_relative_imports_resolve(tree):
    assert names(module_closure(["ciln.corruptions.cifar"], root=tree), tree) == {
        "ciln/__init__.py", "ciln/corruptions/__init__.py", "ciln/corruptions/cifar.py", "ciln/helpers.py"}


def test_from_package_import_name_is_the_submodule_if_one_exists_else_the_package(tree):
    assert imports_of_source("from shared import seeding, version", root=tree) == {"shared.seeding", "shared"}
    assert imports_of_source("import shared.models as m\nfrom numpy import linalg", root=tree) == {
        "shared.models", "numpy"}


def test_relative_imports_resolve_against_the_module_or_package(tree):
    assert imports_of_source("from . import helpers\nfrom .corruptions import cifar", "ciln.voters", root=tree) == {
        "ciln.helpers", "ciln.corruptions.cifar"}
    # in a package's __init__, "." is the package itself
    assert imports_of_source("from . import cifar", "ciln.corruptions", root=tree) == {"ciln.corruptions.cifar"}
    assert imports_of_source("from ..helpers import x", "ciln.corruptions.cifar", root=tree) == {"ciln.helpers"}
    with pytest.raises(ImportError, match="pass module="):
        imports_of_source("from . import helpers", root=tree)
    with pytest.raises(ImportError, match="above its top-level package"):
        imports_of_source("from ... import x", "ciln.voters", root=tree)


def test_magic_and_shell_lines_are_dropped_and_an_unparsable_cell_is_named(tree):
    source = "%matplotlib inline\n!pip install foo\nimport shared.models\n    %time x = 1\n"
    assert imports_of_source(source, root=tree) == {"shared.models"}
    cells = [{"cell_type": "markdown", "source": "import shared.book"},
             {"cell_type": "code", "source": ["%load_ext autoreload\n", "from ciln import voters\n"]},
             {"cell_type": "code", "source": "!ls\nimport numpy as np"}]
    notebook = tree / "01_page.ipynb"
    notebook.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert notebook_imports(notebook, root=tree) == {"ciln.voters", "numpy"}
    cells.append({"cell_type": "code", "source": "def broken(:\n    pass"})
    notebook.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    with pytest.raises(SyntaxError, match=r"cell 3 of .*01_page\.ipynb"):
        notebook_imports(notebook, root=tree)


def test_the_fingerprint_changes_with_the_closure_only(tree):
    before = closure_fingerprint(["ciln.voters"], root=tree)
    (tree / "shared/book.py").write_text("import yaml  # edited\n")
    (tree / "ciln/corruptions/cifar.py").write_text("from ..helpers import x  # edited\n")
    assert closure_fingerprint(["ciln.voters"], root=tree) == before
    (tree / "shared/seeding.py").write_text("import hashlib  # edited\n")  # two imports away
    after = closure_fingerprint(["ciln.voters"], root=tree)
    assert after != before
    # a new import brings its module in (the cached parse of the edited file is not reused)
    (tree / "shared/seeding.py").write_text("import hashlib\nimport shared.book\n")
    assert "shared/book.py" in names(module_closure(["ciln.voters"], root=tree), tree)
    with_book = closure_fingerprint(["ciln.voters"], root=tree)
    (tree / "shared/book.py").write_text("import yaml  # edited again\n")
    assert closure_fingerprint(["ciln.voters"], root=tree) != with_book


def test_the_repository_closures_hold_what_the_cached_artifacts_depend_on():
    assert set(PROJECT_PACKAGES) == {"shared", "ciln", "lnlfn", "plench", "noisywikihow", "benchmark_n"}
    tabular = names(module_closure(["ciln.voters_tabular"]), REPO_ROOT)
    # CILN's voters: the training helpers are reached through an import inside a function (ciln.voters)
    assert {"ciln/__init__.py", "shared/models.py", "shared/training.py", "shared/seeding.py"} <= tabular
    assert "shared/book.py" not in names(module_closure(["ciln.voters"]), REPO_ROOT)
    assert "shared/seeding.py" in names(module_closure(["lnlfn.scoring"]), REPO_ROOT)
    assert not any(name.startswith(("plench/", "lnlfn/")) for name in tabular)
