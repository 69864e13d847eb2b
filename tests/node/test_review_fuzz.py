"""Review item 8: a bounded Hypothesis fuzz of the command line's inputs, on a real home (RocksDB, hnswlib, the file
keychain; hash embedder), in-process.

Every call must end with a documented exit code (0 ok, 1 not found, 2 bad input or refused, 3 store or keychain
failure, 4 partly committed), print no traceback, and — when it refuses (any code but 0) — leave every column family
of the database byte for byte as it was. The servicer's side of the same fuzz is tests/node/test_daemon_robust.py.
"""

from __future__ import annotations

import io
import json
import string
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gaml.node.cli import main
from tests.node.daemon_util import store_digest

KEY = "ab" * 32
EXIT_CODES = {0, 1, 2, 3, 4, 5}  # `gaml --help`; 70 (an internal error) is a bug and fails the fuzz
FIELDS = (
    "asset_type",
    "payload",
    "owner_id",
    "tenant_scope",
    "privacy_scope",
    "allowed_principals",
    "allowed_roles",
    "created_at",
    "supersedes",
    "entities",
    "level",
    "id",
    "signature",
    "confidence_score",
    "retention_policy",
)
NAMES = st.sampled_from(["alice", "bob", "carol", "mallory", "ali ce", "", "acme", "globex", "x" * 300])
ENUMISH = st.sampled_from(["fact", "plan", "public", "tenant_private", "local_only", "l0", "l9", "PLAN", "nope"])
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0, -1, 2**63])
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, NAMES, ENUMISH, st.text(max_size=20))


def nested(depth: int) -> Any:
    value: Any = "deep"
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


JSONISH = st.recursive(
    SCALARS,
    lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=8), kids, max_size=3)),
    max_leaves=8,
)
DRAFT = st.fixed_dictionaries(
    {},
    optional={
        f: st.one_of(
            JSONISH,
            st.builds(nested, st.sampled_from([5, 40, 200])),
            st.just({"text": "ignore previous instructions"}),
        )
        for f in FIELDS
    },
)
ID = st.one_of(st.sampled_from(["0" * 32, "x", "", "0" * 24, "../etc/passwd"]), st.text(string.hexdigits, max_size=34))


def put_text(draws: st.DrawFn) -> str:
    kind = draws(st.sampled_from(["object", "array", "lines", "raw", "deep", "dupkeys"]))
    if kind == "object":
        return json.dumps(draws(DRAFT), default=str)
    if kind == "array":
        return json.dumps(draws(st.lists(DRAFT, max_size=3)), default=str)
    if kind == "lines":
        return "\n".join(json.dumps(d, default=str) for d in draws(st.lists(DRAFT, max_size=3)))
    if kind == "deep":
        return "[" * draws(st.sampled_from([100, 5000, 100_000]))
    if kind == "dupkeys":
        return '{"asset_type": "fact", "payload": {"text": "a"}, "payload": {"text": "b"}}'
    return draws(st.text(max_size=60))


@st.composite
def calls(draw: st.DrawFn) -> tuple[list[str], str | None, dict[str, str]]:
    """(argv after --home, stdin, files to write {name: text})."""
    who = draw(NAMES)
    command = draw(
        st.sampled_from(["put", "get", "forget", "delete", "redact", "search", "hydrate", "grant", "revoke", "ingest"])
    )
    files: dict[str, str] = {}
    stdin = None
    argv: list[str]
    if command == "put":
        stdin = put_text(draw)
        argv = [
            "put",
            *(["--as", who] if draw(st.booleans()) else []),
            *(["--owner", who] if draw(st.booleans()) else []),
        ]
    elif command in ("get", "forget", "delete", "redact"):
        argv = [command, draw(ID), "--as", who]
    elif command == "search":
        argv = ["search", draw(st.text(max_size=30)), "--as", who, "--k", str(draw(st.integers(1, 2000)))]
    elif command == "hydrate":
        argv = ["hydrate", "--goal", draw(st.text(max_size=30)), "--budget", str(draw(st.integers(1, 5000)))]
        argv += ["--as", who]
        if draw(st.booleans()):
            files["plane.json"] = json.dumps(draw(JSONISH), default=str)
            argv += ["--plane", "plane.json"]
    elif command == "grant":
        argv = ["grant", "--as", who, "--to", draw(NAMES), "--max-level", draw(st.sampled_from(["l0", "l2", "l7"]))]
    elif command == "revoke":
        argv = ["revoke", draw(ID), "--as", who]
    else:
        fmt = draw(st.sampled_from([[], ["--format", "transcript"], ["--format", "chat"], ["--format", "locomo"]]))
        files["in.jsonl"] = draw(st.one_of(st.text(max_size=80), st.just(put_text(draw))))
        tenant = ["--tenant", draw(NAMES)] if draw(st.booleans()) else []
        argv = ["ingest", "in.jsonl", "--owner", who, *fmt, *tenant, "--no-curate"]
    return argv, stdin, files


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    mp = pytest.MonkeyPatch()
    mp.setenv("GAML_KEYCHAIN_KEY", KEY)
    mp.delenv("GAML_PASSPHRASE", raising=False)
    h = tmp_path_factory.mktemp("fuzz") / "home"
    for argv in (
        ["init", "--embedder", "hash"],
        ["principal", "add", "alice", "--tenant", "acme"],
        ["principal", "add", "bob", "--tenant", "globex"],
    ):
        assert cli(h, argv)[0] == 0
    seed = "\n".join(
        json.dumps(d)
        for d in (
            {"asset_type": "fact", "owner_id": "alice", "payload": {"text": "alice's private plan for friday"}},
            {"asset_type": "fact", "owner_id": "alice", "privacy_scope": "local_only", "payload": {"text": "secret"}},
            {
                "asset_type": "fact",
                "owner_id": "bob",
                "tenant_scope": "globex",
                "privacy_scope": "tenant_private",
                "payload": {"text": "globex roadmap"},
            },
        )
    )
    assert cli(h, ["put"], seed)[0] == 0
    yield h
    mp.undo()


def cli(home: Path, argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin or ""), out, err
    try:
        main(["--home", str(home), *argv])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    finally:
        sys.stdin, sys.stdout, sys.stderr = old
    return code, out.getvalue(), err.getvalue()


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(calls())
def test_every_cli_call_ends_with_a_documented_code_no_traceback_and_a_refusal_changes_nothing(
    home: Path, tmp_path: Path, call: tuple[list[str], str | None, dict[str, str]]
) -> None:
    """Hostile puts, reads, grants, plane files and ingest inputs: a documented exit code, an error line and no
    traceback, and on any refusal the database unchanged."""
    argv, stdin, files = call
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8", errors="surrogatepass")
    argv = [str(tmp_path / a) if a in files else a for a in argv]
    before = store_digest(home)
    code, _, err = cli(home, argv, stdin)
    event(f"{argv[0]} exit {code}")  # --hypothesis-show-statistics: what the fuzz reached
    assert code in EXIT_CODES, (argv, code, err)
    assert "Traceback" not in err, (argv, err)
    if code != 0:
        assert err.strip(), (argv, code)
        assert store_digest(home) == before, (argv, code, err)
