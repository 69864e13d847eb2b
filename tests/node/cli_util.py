"""The `gaml` command line run in-process, as the tests of the command line call it."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from gaml.node.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str, stdin: str | None = None) -> tuple[int, str, str]:
    """``gaml ARGV`` (with ``stdin`` as its standard input, if given): its exit code, stdout and stderr."""
    old = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        main(list(argv))
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    finally:
        sys.stdin = old
    out, err = capsys.readouterr()
    return code, out, err


def cli_home(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    path: Path,
    principals: Sequence[Sequence[str]] = (),
    key_hex: str = "ab" * 32,
) -> Path:
    """A new home at ``path`` (hash embedder, the unattended key in the environment) with ``principals`` registered,
    each as the arguments of `gaml principal add`."""
    monkeypatch.setenv("GAML_KEYCHAIN_KEY", key_hex)
    monkeypatch.delenv("GAML_PASSPHRASE", raising=False)
    assert run_cli(capsys, "--home", str(path), "init", "--embedder", "hash")[0] == 0
    for argv in principals:
        code, _, err = run_cli(capsys, "--home", str(path), "principal", "add", *argv)
        assert code == 0, err
    return path


def raw_config(home: Path, cfg: dict[str, Any]) -> None:
    """Write ``cfg`` as the home's config.toml as it is, unchecked (a test of what GAML makes of a bad one)."""
    import tomli_w

    (home / "config.toml").write_text(tomli_w.dumps(cfg))


def edit_config(home: Path, change: Callable[[dict[str, Any]], object]) -> None:
    """Apply ``change`` to the home's settings (as in its file, without environment overrides) and write them back
    unchecked."""
    from gaml.node.home import read_config

    cfg = read_config(home, overrides=False)
    change(cfg)
    raw_config(home, cfg)
