"""The layering rules of DESIGN.md §1 hold, and `make lint` (import-linter) would catch a break of them."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("policy", "crdt", "node", "proto", "simulations", "bench", "deploy")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def core_modules(root: Path = ROOT) -> list[Path]:
    """The pure core, by where a file stands: policy/, crdt/ but its libp2p shell, and node/core/ (STYLE.md)."""
    return [
        *sorted((root / "policy").rglob("*.py")),
        *sorted(p for p in (root / "crdt").rglob("*.py") if p.name != "p2p.py"),
        *sorted((root / "node" / "core").rglob("*.py")),
    ]


def namespace_tree(dst: Path, copy: bool) -> Path:
    """`dst/gaml/<folder>` for each top-level folder (a copy, or links to the checkout), beside pyproject.toml."""
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    (dst / "gaml").mkdir()
    for pkg in PACKAGES:
        if copy:
            shutil.copytree(ROOT / pkg, dst / "gaml" / pkg, ignore=shutil.ignore_patterns("__pycache__", "results"))
        else:
            (dst / "gaml" / pkg).symlink_to(ROOT / pkg, target_is_directory=True)
    (dst / "gaml" / "v1").symlink_to(dst / "gaml" / "proto" / "gaml" / "v1", target_is_directory=True)  # the wire
    return dst / "gaml"


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
    )


def test_contracts_hold(tmp_path: Path) -> None:
    """The import contracts in pyproject.toml are kept by the code as it is."""
    namespace_tree(tmp_path, copy=False)
    out = lint_imports(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "broken" in out.stdout and " 0 broken" in out.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("node/core/store/store.py", "import rocksdict", "only gaml.node.shells.rocks_kv imports RocksDB"),
        ("node/core/node.py", "import hnswlib", "only gaml.node.shells.hnsw_index imports hnswlib"),
        ("policy/model.py", "import gaml.node.core.store.store", "the layers"),
        ("node/core/store/vectors.py", "import trio", "the pure core imports no binding"),
        ("node/core/store/store.py", "import nacl.secret", "only gaml.policy.crypto imports the crypto libraries"),
        ("node/core/node.py", "from gaml.node.shells import rocks_kv", "the layers"),
        ("node/core/service.py", "import grpc", "the pure core imports no binding"),
        ("node/core/hydrate.py", "from gaml.node.serve import daemon", "the layers"),
        ("proto/convert.py", "from gaml.node.core import service", "proto is the wire only"),
        ("node/shells/files.py", "from gaml.node import home", "the layers"),
        ("node/serve/client.py", "from gaml.node import cli", "the layers"),
        ("simulations/nodes.py", "from gaml.node.shells import files", "the simulator drives the core only"),
        ("node/core/hydrate.py", "import gaml.simulations.net", "the product imports none of its tools"),
        ("policy/model.py", "import gaml.bench", "the product imports none of its tools"),
    ],
)
def test_a_forbidden_import_fails_lint(tmp_path: Path, module: str, line: str, contract: str) -> None:
    """Adding a forbidden import to a copy of the tree makes lint-imports fail and name the broken contract."""
    target = namespace_tree(tmp_path, copy=True) / module
    target.write_text(target.read_text() + f"\n{line}  # injected by the test\n")
    out = lint_imports(tmp_path)
    assert out.returncode != 0
    assert contract in out.stdout and "BROKEN" in out.stdout


AMBIENT_MODULES = ("time", "random", "secrets", "uuid", "datetime")


def _ambient_calls(path: Path, root: Path = ROOT) -> list[str]:
    """Calls that read the clock or draw randomness from ambient state, under whatever name the module is imported
    (``import time as t; t.time()``, ``datetime.datetime.now()``, ``secrets.token_hex``)."""
    tree = ast.parse(path.read_text(), str(path))
    aliases = {}  # local name -> module
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                aliases[a.asname or top] = a.name if a.asname else top
        if isinstance(node, ast.ImportFrom) and node.module:
            top = node.module.split(".")[0]
            if top in ("time", "random", "secrets", "uuid"):
                bad.append(f"{path.relative_to(root)}:{node.lineno}: from {node.module} import …")
            for a in node.names:
                if top == "datetime" and a.name in ("datetime", "date"):
                    aliases[a.asname or a.name] = f"datetime.{a.name}"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        base = node.value
        chain = []
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in aliases:
            continue
        module = ".".join([aliases[base.id], *reversed(chain)])
        name = f"{module}.{node.attr}"
        top = module.split(".")[0]
        if (
            top == "time"
            or (top == "random" and node.attr != "Random")
            or top == "secrets"
            or name in ("uuid.uuid1", "uuid.uuid4")
            or (name == "os.urandom" and path.name != "crypto.py")
            or (top == "datetime" and node.attr in ("now", "utcnow", "today"))
        ):
            bad.append(f"{path.relative_to(root)}:{node.lineno}: {name}")
    return bad


def test_core_reads_no_clock_and_no_ambient_randomness() -> None:
    """The pure core takes time and randomness as parameters: no time.*, module-level random or os.urandom in it."""
    core = core_modules()
    assert ROOT / "node" / "core" / "hydrate.py" in core and ROOT / "policy" / "crypto.py" in core
    assert ROOT / "crdt" / "p2p.py" not in core and ROOT / "node" / "shells" / "rocks_kv.py" not in core
    bad = [b for p in core for b in _ambient_calls(p)]
    assert bad == []


def test_the_purity_check_catches_a_clock_read(tmp_path: Path) -> None:
    """The purity check itself flags a time.time() call (so an empty result above means something)."""
    fake = tmp_path / "probe.py"
    fake.write_text("import time\nimport os\n\ndef f() -> float:\n    return time.time() + len(os.urandom(2))\n")
    assert _ambient_calls(fake, tmp_path) == ["probe.py:5: time.time", "probe.py:5: os.urandom"]
    hidden = tmp_path / "hidden.py"
    hidden.write_text(
        "import datetime\nimport secrets\nimport time as t\nfrom datetime import datetime as D\n\n"
        "def f() -> object:\n    return t.monotonic(), datetime.datetime.now(), D.utcnow(), secrets.token_hex(4)\n"
    )
    assert _ambient_calls(hidden, tmp_path) == [
        "hidden.py:7: time.monotonic",
        "hidden.py:7: datetime.datetime.now",
        "hidden.py:7: datetime.datetime.utcnow",
        "hidden.py:7: secrets.token_hex",
    ]


def test_a_new_core_module_is_bound_by_its_folder(tmp_path: Path) -> None:
    """A module added to node/core/ is under the contracts and the purity check by where it stands: no list names it."""
    gaml = namespace_tree(tmp_path, copy=True)
    probe = gaml / "node" / "core" / "memory" / "probe.py"
    probe.write_text("import time\n\nimport rocksdict\n\n\ndef now() -> float:\n    return time.time()\n")
    out = lint_imports(tmp_path)
    assert out.returncode != 0
    assert "gaml.node.core.memory.probe -> rocksdict" in out.stdout and "BROKEN" in out.stdout
    assert probe in core_modules(gaml)
    assert _ambient_calls(probe, gaml) == ["node/core/memory/probe.py:7: time.time"]


def test_node_keeps_its_layers_in_folders() -> None:
    """node/ holds at most six modules at its top level; the rest stands in its layer's folder."""
    top = sorted(p.name for p in (ROOT / "node").glob("*.py"))
    assert len(top) <= 6, top
    assert {"core", "shells", "serve", "cli"} <= {p.name for p in (ROOT / "node").iterdir() if p.is_dir()}


def test_every_folder_is_installed_under_the_namespace() -> None:
    """Each package folder of the checkout is one of pyproject.toml's packages, mapped under `gaml.` (the wire's
    proto/gaml/v1 as gaml.v1, the protobuf package it holds)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = config["package-dir"]
    assert dirs == {**{f"gaml.{pkg}": pkg for pkg in PACKAGES}, "gaml.v1": "proto/gaml/v1"}

    def installed_as(folder: Path) -> str:
        rel = folder.relative_to(ROOT).as_posix()
        name, where = max(
            ((n, d) for n, d in dirs.items() if rel == d or rel.startswith(d + "/")), key=lambda x: len(x[1])
        )
        return ".".join([name, *Path(rel).relative_to(where).parts])

    folders = {
        installed_as(init.parent)
        for pkg in PACKAGES
        for init in (ROOT / pkg).rglob("__init__.py")
        if "results" not in init.parts
    }
    assert folders == set(config["packages"])
    assert "gaml.v1" in folders and not any(f.startswith("gaml.proto.gaml") for f in folders)


def test_the_wire_imports_nothing_of_the_node() -> None:
    """proto/ is the wire: no module of it imports gaml.node (the servicer is a transport, in node/serve/)."""
    bad = []
    for path in sorted((ROOT / "proto").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            bad += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.startswith("gaml.node")]
    assert bad == []


def test_every_module_of_node_stands_in_a_layer() -> None:
    """Each folder and top-level module of node/ is a layer (or part of one) of the layers contract, so nothing
    added there escapes it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in config if c["type"] == "layers"]
    named = {m.strip() for layer in layers for m in layer.replace(":", "|").split("|")}
    parts = {p.stem for p in (ROOT / "node").glob("*.py") if p.stem != "__init__"}
    parts |= {p.name for p in (ROOT / "node").iterdir() if (p / "__init__.py").is_file()}
    assert {f"gaml.node.{p}" for p in parts} <= named
