"""Installed, GAML is one import namespace, `gaml.*`, that works from any directory (no generic top-level packages)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("node", "proto", "crdt", "policy", "simulations", "bench", "deploy")


@pytest.fixture(scope="module")
def wheel_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built from a copy of the checkout (the build writes beside its sources) and unpacked as pip
    would install it."""
    out = tmp_path_factory.mktemp("wheel")
    src = out / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "results"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        cwd=out,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = out.glob("*.whl")
    assert wheel.name.startswith("gaml_memory_node-")
    site = out / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    return site


def run_from(cwd: Path, site: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=cwd, env=env)


def test_the_wheel_holds_one_top_level_package(wheel_tree: Path) -> None:
    """The wheel installs `gaml/` and its metadata, nothing else at the top of site-packages."""
    top = {p.name for p in wheel_tree.iterdir()}
    assert top == {"gaml", *(n for n in top if n.endswith(".dist-info"))}
    assert len(top) == 2
    assert (wheel_tree / "gaml" / "node" / "core" / "text" / "privacy_rules.json").is_file()
    assert (wheel_tree / "gaml" / "deploy" / "examples" / "assets.jsonl").is_file()
    assert {p.name for p in (wheel_tree / "gaml" / "v1").iterdir()} >= {"asset.proto", "memory.proto", "memory_pb2.pyi"}


def test_installed_namespace_imports_from_outside_the_checkout(wheel_tree: Path, tmp_path: Path) -> None:
    """From a directory outside the checkout the wheel's modules import as gaml.*, and the generic names do not."""
    code = (
        "import importlib.util, gaml.node.core.node, gaml.node.serve.servicer, gaml.node.cli, gaml.simulations\n"
        "import gaml.v1.memory_pb2\n"
        "from gaml.node.core.text import privacy\n"
        "print(gaml.node.core.node.__file__)\n"
        "print(privacy.Rules.load_default().classify('key AKIAIOSFODNN7EXAMPLE').findings != [])\n"
        "print([n for n in ('node', 'proto', 'policy', 'crdt', 'bench', 'simulations', 'deploy')"
        " if importlib.util.find_spec(n)])\n"
    )
    out = run_from(tmp_path, wheel_tree, "-c", code)
    assert out.returncode == 0, out.stderr
    where, rules, generic = out.stdout.splitlines()
    assert Path(where).is_relative_to(wheel_tree)
    assert rules == "True"
    assert generic == "[]"


def test_the_demo_module_starts_from_outside_the_checkout(wheel_tree: Path, tmp_path: Path) -> None:
    """`python -m gaml.deploy.demo` resolves from the installed wheel anywhere (its full run is `make demo`)."""
    out = run_from(tmp_path, wheel_tree, "-m", "gaml.deploy.demo", "--help")
    assert out.returncode == 0, out.stderr
    assert "--embedder" in out.stdout


@pytest.mark.slow
def test_the_demo_runs_from_the_installed_wheel(wheel_tree: Path, tmp_path: Path) -> None:
    """The whole demo (hash embedder) runs from the installed wheel in a directory outside the checkout."""
    out = run_from(tmp_path, wheel_tree, "-m", "gaml.deploy.demo", "--embedder", "hash")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "demo finished" in out.stdout


def test_the_node_reports_the_version_it_is_installed_as() -> None:
    """The version a daemon reports (gaml.node.core.api.VERSION) is pyproject.toml's."""
    from gaml.node.core.api import VERSION

    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"] == VERSION
