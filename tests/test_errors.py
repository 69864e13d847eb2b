"""Error classes live in one ``errors.py`` per layer: found by walking the package folders, not from a list of names.

An exception class is one whose bases name a builtin exception, a class ending in ``Error`` or ``Exception``, or
(transitively) another exception class of the package; the packages and the layers come from pyproject.toml.
"""

from __future__ import annotations

import ast
import builtins
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]

# Private exceptions that never leave their module may stay beside the code that raises and catches them.
PRIVATE: dict[tuple[str, str], str] = {
    ("crdt/p2p.py", "_OpenFailed"): "raised by P2PHost._open, and suppressed by both of its callers",
}


def package_files(root: Path = ROOT) -> list[Path]:
    """Every module of the installed packages (pyproject.toml's package-dir), by walking their folders."""
    folders = sorted(set(CONFIG["setuptools"]["package-dir"].values()))
    return [p for folder in folders for p in sorted((root / folder).rglob("*.py")) if "results" not in p.parts]


def _base_name(base: ast.expr) -> str:
    if isinstance(base, ast.Subscript):
        base = base.value
    if isinstance(base, ast.Attribute):
        return base.attr
    return base.id if isinstance(base, ast.Name) else ""


def exception_classes(files: Iterable[Path], root: Path = ROOT) -> dict[tuple[str, str], int]:
    """``(path, class name) -> line`` of every exception class defined in ``files`` (at any depth)."""
    classes = [
        (path.relative_to(root).as_posix(), node)
        for path in files
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.ClassDef)
    ]
    known = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
    found: dict[tuple[str, str], int] = {}
    while True:  # to a fixed point: a class deriving from an exception class of the package is one too
        for where, node in classes:
            names = {_base_name(b) for b in node.bases}
            if names & known or any(n.endswith(("Error", "Exception")) for n in names):
                found[(where, node.name)] = node.lineno
        new = {name for _, name in found} - known
        if not new:
            return found
        known |= new


def _module(path: str) -> str:
    return "gaml." + path.removesuffix(".py").replace("/", ".")


def layers() -> list[str]:
    """The modules of the layers contract (pyproject.toml), each a folder of the package."""
    contract = next(c for c in CONFIG["importlinter"]["contracts"] if c["type"] == "layers")
    return [m.strip() for entry in contract["layers"] for m in re.split(r"[|:]", entry)]


def layer_of(module: str) -> str | None:
    within = [layer for layer in layers() if module == layer or module.startswith(layer + ".")]
    return max(within, key=len, default=None)


def test_every_exception_class_is_defined_in_an_errors_module() -> None:
    """Each exception class of the package is defined in a module named errors.py, but the justified private ones."""
    found = exception_classes(package_files())
    misplaced = [f"{p}:{line}: {name}" for (p, name), line in sorted(found.items()) if not p.endswith("/errors.py")]
    assert misplaced == [f"{p}:{found[(p, name)]}: {name}" for p, name in sorted(PRIVATE)]
    assert all(name.startswith("_") for _, name in PRIVATE)
    assert {"policy/errors.py", "crdt/errors.py", "node/core/errors.py"} <= {p for p, _ in found}
    assert ("node/core/errors.py", "RateLimited") in found and ("crdt/errors.py", "SendQueueFull") in found


def test_errors_modules_hold_only_exceptions() -> None:
    """An errors.py defines exception classes and nothing else that is a class."""
    errors = [p for p in package_files() if p.name == "errors.py"]
    found = exception_classes(package_files())
    for path in errors:
        where = path.relative_to(ROOT).as_posix()
        classes = [n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]
        assert classes and all((where, c) in found for c in classes), where


def test_one_errors_module_per_layer() -> None:
    """Each errors.py stands in a layer of the layers contract, and no layer has two."""
    by_layer: dict[str | None, list[str]] = {}
    for path in package_files():
        if path.name == "errors.py":
            module = _module(path.relative_to(ROOT).as_posix())
            by_layer.setdefault(layer_of(module), []).append(module)
    assert None not in by_layer, by_layer[None]
    assert all(len(modules) == 1 for modules in by_layer.values()), by_layer
    assert {"gaml.policy", "gaml.crdt", "gaml.node.core", "gaml.node.shells"} <= set(by_layer)


def test_the_check_finds_an_error_defined_elsewhere(tmp_path: Path) -> None:
    """A GamlError subclass outside errors.py, a subclass of that one, and one deriving from a builtin exception are
    all found (so an empty result above means something); plain classes are not."""
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "errors.py").write_text("class GamlError(Exception):\n    pass\n")
    probe = tmp_path / "policy" / "probe.py"
    probe.write_text(
        "from gaml.policy import errors\n\n\n"
        "class Refused(errors.GamlError, ValueError):\n    pass\n\n\n"
        "class Worse(Refused):\n    pass\n\n\n"
        "class Lookup(KeyError):\n    pass\n\n\n"
        "class Plain:\n    pass\n\n\n"
        "def f() -> None:\n    class Inner(Worse):\n        pass\n"
    )
    found = exception_classes([tmp_path / "policy" / "errors.py", probe], tmp_path)
    assert sorted(name for p, name in found if p == "policy/probe.py") == ["Inner", "Lookup", "Refused", "Worse"]
    assert ("policy/errors.py", "GamlError") in found
