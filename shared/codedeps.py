"""Which of the project's source files a notebook, a module or a cached artifact depends on.

The batch runner and the artifact cache key on the code that is actually imported, so editing an unrelated
module rebuilds nothing and editing a module two imports away rebuilds what uses it. Imports are read from the
source (``ast``), never executed: ``import a.b``, ``from a import b`` (``a.b`` when ``a/b.py`` or
``a/b/__init__.py`` exists, else ``a``), relative imports, and imports inside functions. Only the project's
own packages are followed; the standard library and third-party packages are not part of a closure.

    from shared.codedeps import closure_fingerprint, module_closure, notebook_imports
    files = module_closure(notebook_imports("ciln/01_benchmark.ipynb"))   # sorted absolute paths
    key = closure_fingerprint(["ciln.voters"])                              # 16 hex digits

Every function takes ``root`` (default: the repository) so tests can point it at a small package tree.
Dynamic imports (``importlib.import_module(name)``) are not seen.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
from pathlib import Path
from typing import Iterable

from shared.paths import PAPERS, REPO_ROOT

PROJECT_PACKAGES = ("shared", *PAPERS)

#: One import statement: the absolute module it names and, for ``from ... import``, the imported names.
_Record = tuple[str, tuple[str, ...]]
#: (path, module) -> ((mtime_ns, size), records): the parse of each file, reused while the file is unchanged.
_PARSED: dict[tuple[Path, str], tuple[tuple[int, int], list[_Record]]] = {}


def imports_of_source(source: str, module: str | None = None, *, root: str | os.PathLike | None = None) -> set[str]:
    """Absolute names of the modules that Python ``source`` imports.

    ``module`` is the source's own dotted name, needed to resolve relative imports (``from . import x``).
    ``from a import b`` gives ``a.b`` when that is a module under ``root``, else ``a`` (``b`` is an attribute).
    Lines starting with ``%`` or ``!`` (IPython magics and shell commands of notebook cells) are dropped
    before parsing; source that is still not Python raises SyntaxError.
    """
    root = _root(root)
    is_package = module is not None and _module_file(root, module) == _package_init(root, module)
    return _resolve(_records(source, module, is_package), root)


def notebook_imports(path: str | os.PathLike, *, root: str | os.PathLike | None = None) -> set[str]:
    """Absolute names of the modules imported by the code cells of the notebook at ``path``.

    A cell that is not Python once its magic and shell lines are dropped raises SyntaxError naming the
    notebook and the cell (0-based index among all cells).
    """
    path = Path(path)
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    names: set[str] = set()
    for index, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        try:
            names |= imports_of_source(source, root=root)
        except SyntaxError as e:
            raise SyntaxError(f"cell {index} of {path} is not Python even without its % and ! lines ({e.msg}); "
                              "fix the cell", (str(path), e.lineno, e.offset, e.text)) from None
    return names


def module_closure(modules: Iterable[str], *, root: str | os.PathLike | None = None) -> list[Path]:
    """Sorted absolute paths of every project source file reachable through imports from ``modules``.

    A module brings its parent packages' ``__init__.py`` (importing ``ciln.voters`` runs ``ciln/__init__.py``)
    and, transitively, everything they import within ``PROJECT_PACKAGES``. Names outside those packages are
    ignored; a name that is not a file under ``root`` contributes the packages above it that are.
    """
    root = _root(root)
    files: set[Path] = set()
    todo, seen = [m for m in modules if _in_project(m)], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            prefix = ".".join(parts[:depth])
            path = _module_file(root, prefix)
            if path is None or path in files:
                continue
            files.add(path)
            todo.extend(m for m in _resolve(_file_records(path, prefix), root) if _in_project(m))
    return sorted(files)


def fingerprint_files(files: Iterable[str | os.PathLike], *, root: str | os.PathLike | None = None) -> str:
    """16 hex digits of SHA-256 over each file's path (relative to ``root`` when inside it) and bytes."""
    root = _root(root)
    digest = hashlib.sha256()
    for path in sorted({Path(f).resolve() for f in files}):
        label = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
        data = path.read_bytes()
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


def closure_fingerprint(modules: Iterable[str], *, root: str | os.PathLike | None = None) -> str:
    """16 hex digits of SHA-256 over (repo-relative path, bytes) of ``module_closure(modules)``."""
    return fingerprint_files(module_closure(modules, root=root), root=root)


def module_file(module: str, *, root: str | os.PathLike | None = None) -> Path | None:
    """The file that defines ``module`` under ``root`` (a package's ``__init__.py`` first, as Python does), or None."""
    return _module_file(_root(root), module)


def _root(root) -> Path:
    return Path(root if root is not None else REPO_ROOT).resolve()


def _in_project(module: str) -> bool:
    return module.partition(".")[0] in PROJECT_PACKAGES


def _package_init(root: Path, module: str) -> Path:
    return root.joinpath(*module.split("."), "__init__.py")


def _module_file(root: Path, module: str) -> Path | None:
    init = _package_init(root, module)
    if init.is_file():
        return init
    *parents, last = module.split(".")
    path = root.joinpath(*parents, f"{last}.py")
    return path if path.is_file() else None


def _strip_magics(source: str) -> str:
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def _records(source: str, module: str | None, is_package: bool) -> list[_Record]:
    records: list[_Record] = []
    for node in ast.walk(ast.parse(_strip_magics(source))):
        if isinstance(node, ast.Import):
            records.extend((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, module, is_package)
            records.append((base, tuple(alias.name for alias in node.names if alias.name != "*")))
    return records


def _absolute(name: str | None, level: int, module: str | None, is_package: bool) -> str:
    """The absolute module of ``from <level dots><name> import ...`` written in ``module``."""
    if level == 0:
        return name
    if module is None:
        raise ImportError(f"relative import 'from {'.' * level}{name or ''} import ...' needs the importing "
                          "module's name: pass module=...")
    package = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 >= len(package):
        raise ImportError(f"relative import 'from {'.' * level}{name or ''} import ...' in {module} goes above "
                          "its top-level package")
    base = package[:len(package) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _resolve(records: list[_Record], root: Path) -> set[str]:
    names: set[str] = set()
    for base, imported in records:
        if not imported:
            names.add(base)
        for name in imported:
            names.add(f"{base}.{name}" if _module_file(root, f"{base}.{name}") else base)
    return names


def _file_records(path: Path, module: str) -> list[_Record]:
    """The import records of a source file, parsed once per (path, mtime, size)."""
    stat = path.stat()
    stamp = (stat.st_mtime_ns, stat.st_size)
    cached = _PARSED.get((path, module))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        records = _records(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
    except SyntaxError as e:
        raise SyntaxError(f"{path} is not valid Python ({e.msg}); fix it",
                          (str(path), e.lineno, e.offset, e.text)) from None
    _PARSED[path, module] = (stamp, records)
    return records
