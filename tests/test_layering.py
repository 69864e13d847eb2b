"""The layering rules of DESIGN.md §1 hold, and `make lint` (import-linter) would catch a break of them."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("policy", "crdt", "node", "proto", "simulations", "bench")
CORE = [
    *sorted((ROOT / "policy").glob("*.py")),
    *sorted(p for p in (ROOT / "crdt").glob("*.py") if p.stem != "p2p"),
] + [
    ROOT / "node" / f"{m}.py"
    for m in (
        *("kv", "blobs", "vectors", "embed", "store", "core", "lexical", "views", "governance", "retrieve"),
        *("records", "envelope", "parsers", "extract", "privacy", "curate", "ingest", "ladder", "tiers"),
        *("tokens", "hydrate", "service", "replica"),
    )
]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
    )


def copy_tree(dst: Path) -> None:
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, dst / pkg, ignore=shutil.ignore_patterns("__pycache__", "results"))


def test_contracts_hold() -> None:
    """The import contracts in pyproject.toml are kept by the code as it is."""
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "broken" in out.stdout and " 0 broken" in out.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("node/store.py", "import rocksdict", "only node.rocks_kv imports RocksDB"),
        ("node/core.py", "import hnswlib", "only node.hnsw_index imports hnswlib"),
        ("policy/model.py", "import node.store", "policy is the bottom layer"),
        ("node/vectors.py", "import trio", "the pure core does no I/O"),
        ("node/store.py", "import nacl.secret", "only policy.crypto imports the crypto libraries"),
        ("node/core.py", "from node import rocks_kv", "the pure core does no I/O"),
        ("node/service.py", "import grpc", "the pure core does no I/O"),
        ("node/hydrate.py", "from node import daemon", "the pure core does no I/O"),
    ],
)
def test_a_forbidden_import_fails_lint(tmp_path: Path, module: str, line: str, contract: str) -> None:
    """Adding a forbidden import to a copy of the tree makes lint-imports fail and name the broken contract."""
    copy_tree(tmp_path)
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n{line}  # injected by the test\n")
    out = lint_imports(tmp_path)
    assert out.returncode != 0
    assert contract in out.stdout and "BROKEN" in out.stdout


def _ambient_calls(path: Path, root: Path = ROOT) -> list[str]:
    """Calls that read the clock or draw randomness from ambient state."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            name = f"{node.value.id}.{node.attr}"
            if (
                node.value.id == "time"
                or (node.value.id == "random" and node.attr not in ("Random",))
                or (name == "os.urandom" and path.name != "crypto.py")
                or name in ("datetime.now", "datetime.utcnow", "uuid.uuid4", "secrets.token_bytes")
            ):
                bad.append(f"{path.relative_to(root)}:{node.lineno}: {name}")
        if isinstance(node, ast.ImportFrom) and node.module in ("time", "random", "secrets", "uuid"):
            bad.append(f"{path.relative_to(root)}:{node.lineno}: from {node.module} import …")
    return bad


def test_core_reads_no_clock_and_no_ambient_randomness() -> None:
    """The pure core takes time and randomness as parameters: no time.*, module-level random or os.urandom in it."""
    assert [p for p in CORE if not p.exists()] == []
    bad = [b for p in CORE for b in _ambient_calls(p)]
    assert bad == []


def test_the_purity_check_catches_a_clock_read(tmp_path: Path) -> None:
    """The purity check itself flags a time.time() call (so an empty result above means something)."""
    fake = tmp_path / "probe.py"
    fake.write_text("import time\nimport os\n\ndef f() -> float:\n    return time.time() + len(os.urandom(2))\n")
    assert _ambient_calls(fake, tmp_path) == ["probe.py:5: time.time", "probe.py:5: os.urandom"]
