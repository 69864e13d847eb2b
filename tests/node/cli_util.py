"""The `gaml` command line run in-process, as the tests of the command line call it."""

from __future__ import annotations

import io
import sys

import pytest

from node.cli import main


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
