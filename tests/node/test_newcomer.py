"""A new user's first minutes, exactly as the README's quickstart has them: `gaml init`, `gaml add "…"`, `gaml search
"…"`, `gaml hydrate --goal … --budget …`, with no flag beyond these (the passphrase and the home come from the
environment, as a user's shell would have them), the default embedder (MiniLM), and the same output whether a daemon
serves the home or not."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.node.daemon_util import ROOT


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "GAML_HOME": str(home), "GAML_PASSPHRASE": "correct horse battery staple"}
    env["PYTHONPATH"] = str(ROOT)
    for k in ("GAML_KEYCHAIN_KEY", "GAML_AS"):
        env.pop(k, None)
    return env


def gaml(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        [sys.executable, "-m", "gaml.node.cli", *argv],
        capture_output=True,
        text=True,
        env=_env(home),
        cwd=tempfile.gettempdir(),  # not the repository: a user's shell is anywhere
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, (argv, r.stdout, r.stderr)
    return r


@contextlib.contextmanager
def daemon(home: Path) -> Iterator[None]:
    """`gaml run` in the background; returns once it logs that it serves (after its model is loaded)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gaml.node.cli", "run"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(home),
        cwd=tempfile.gettempdir(),
    )
    assert proc.stderr is not None
    events = []
    for line in proc.stderr:
        with contextlib.suppress(ValueError):
            events.append(json.loads(line)["event"])
        if events and events[-1] == "serving":
            break
    else:
        raise AssertionError(f"gaml run exited before serving: {events}")
    assert "embedder_ready" in events  # SERVING comes after the model is loaded
    try:
        yield
    finally:
        proc.terminate()
        assert proc.wait(60) == 0
        proc.stderr.read()


def _steady(text: str) -> str:
    """Output with the one thing that differs by design between two frames removed: the receipt's id."""
    return re.sub(r"r_[0-9a-f]{20}", "r_…", text)


@pytest.mark.slow  # tens of seconds: `make test-slow` (make test keeps under 15 minutes)
def test_the_quickstart_works_with_and_without_a_daemon_and_says_the_same(tmp_path: Path) -> None:
    home = tmp_path / "gaml"
    init = json.loads(gaml(home, "init").stdout)
    assert init["embedder"] == "minilm" and init["user"]

    added = gaml(home, "add", "Alice prefers green tea").stdout.split()
    assert len(added) == 1 and re.fullmatch(r"[0-9a-f]{32}", added[0])
    search = gaml(home, "search", "what does alice drink").stdout
    assert added[0] in search and "Alice prefers green tea" in search
    hydrate = gaml(home, "hydrate", "--goal", "tea", "--budget", "200")
    assert "Alice prefers green tea" in hydrate.stdout and hydrate.stdout.startswith("<gaml-memory receipt=")
    assert "receipt r_" in hydrate.stderr

    with daemon(home):
        assert gaml(home, "search", "what does alice drink").stdout == search
        through = gaml(home, "hydrate", "--goal", "tea", "--budget", "200").stdout
        assert _steady(through) == _steady(hydrate.stdout)
        more = gaml(home, "add", "Bob takes his coffee black").stdout.split()
        assert len(more) == 1 and re.fullmatch(r"[0-9a-f]{32}", more[0])
        search2 = gaml(home, "search", "coffee").stdout
        hydrate2 = gaml(home, "hydrate", "--goal", "coffee", "--budget", "200").stdout
    assert gaml(home, "search", "coffee").stdout == search2  # the store says what the daemon said
    assert _steady(gaml(home, "hydrate", "--goal", "coffee", "--budget", "200").stdout) == _steady(hydrate2)
    assert "Bob takes his coffee black" in search2 and "Bob takes his coffee black" in hydrate2
