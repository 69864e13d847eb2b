"""What the commands share: the secrets, the store of ``--home``, the daemon serving it, progress, errors."""

from __future__ import annotations

import argparse
import contextlib
import getpass
import os
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from gaml.node.core.node import Node
from gaml.node.home import (
    check_home,
    open_node,
    read_config,
)
from gaml.node.shells.file_keychain import FileKeychain, Unlock
from gaml.policy import crypto
from gaml.policy.errors import (
    InvalidInput,
    KeychainError,
    NotFound,
    StoreError,
    StoreLocked,
)

LOCK_WAIT_S = float(os.environ.get("GAML_LOCK_WAIT_S", "10"))  # how long a command waits for another to finish


def now_us() -> int:
    return time.time_ns() // 1000


def fail(msg: str, code: int) -> NoReturn:
    print(f"gaml: error: {msg}", file=sys.stderr)
    raise SystemExit(code)


def unlock(*, confirm: bool = False) -> Unlock:
    """The keychain's unlock: from the environment, else asked for on a terminal."""
    given = Unlock.from_env()
    if given is not None:
        return given
    if not sys.stdin.isatty():
        raise KeychainError("the keychain is locked: set GAML_PASSPHRASE (or GAML_KEYCHAIN_KEY, 64 hex characters)")
    pw = getpass.getpass("GAML passphrase: ")
    if confirm and getpass.getpass("again: ") != pw:
        raise KeychainError("the passphrases differ")
    return Unlock(passphrase=pw)


def progress(total: int, desc: str, unit: str = "asset") -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=total < 2 or not sys.stderr.isatty())


# The commands a running daemon serves (the others need the store itself, which the daemon holds).
DAEMON_COMMANDS = (
    "add",
    "list",
    "export",
    "put",
    "get",
    "search",
    "hydrate",
    "ingest",
    "forget",
    "grant",
    "revoke",
    "grants",
    "access-log",
    "stats",
    "conflicts",
    "reputation",
    "principals",
    "principal add",
    "sources",
    "curate",
    "maintain",
    "mcp",
    "proxy",
)


@contextlib.contextmanager
def open_store(args: argparse.Namespace, *, checkpoint: bool = True) -> Iterator[Node]:
    """The node of ``--home``, closed afterwards (after a checkpoint of its indexes, unless ``checkpoint=False``)."""
    key = unlock()
    deadline = time.monotonic() + LOCK_WAIT_S
    said = False
    while True:
        try:
            node = open_node(args.home, key)
            break
        except StoreLocked:
            from gaml.node.serve.runfiles import pid_alive, read_info

            info = read_info(args.home)
            if info and pid_alive(int(info.get("pid", 0))):
                raise StoreLocked(
                    f"the daemon (pid {info['pid']}) holds the database of {args.home}; `gaml {args.command}` works on "
                    f"the store directly, so stop the daemon first (kill -TERM {info['pid']}), or use a command it "
                    f"serves ({', '.join(DAEMON_COMMANDS)})"
                ) from None
            # Another gaml command holds the home for a moment: wait for it, briefly, rather than fail at once.
            if time.monotonic() >= deadline:
                raise StoreLocked(
                    f"{args.home} is in use by another gaml command (still after {LOCK_WAIT_S:g} s); run one at a "
                    "time, or start the daemon (`gaml run`) so that commands share it"
                ) from None
            if not said:
                print(f"gaml: {args.home} is in use by another gaml command; waiting…", file=sys.stderr, flush=True)
                said = True
            time.sleep(0.1)
    try:
        yield node
    except BaseException:
        node.close(checkpoint=False)  # the journal has every acknowledged write; do not mask the error
        raise
    if checkpoint:
        try:
            node.store.checkpoint()
        except (OSError, StoreError) as e:
            # The command's writes are committed (the journal is the truth); only the index snapshots, a cache, are
            # missing: say so instead of failing a command that succeeded.
            print(
                f"gaml: warning: done and committed, but the index snapshots could not be saved "
                f"({getattr(e, 'strerror', None) or e}); they are rebuilt from the journal at the next open",
                file=sys.stderr,
            )
    node.close(checkpoint=False)


def regular_file(path: Path, what: str) -> None:
    """InvalidInput unless ``path`` is a regular file (after symlinks); NotFound if there is nothing there."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise NotFound(f"{path}: no such file or directory") from None
    if not stat.S_ISREG(mode):
        kind = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}
        raise InvalidInput(f"{path} is {kind.get(stat.S_IFMT(mode), 'not a regular file')}: {what}")


def keychain(args: argparse.Namespace) -> FileKeychain:
    check_home(args.home)
    read_config(args.home)  # a clear error when --home is not a node
    return FileKeychain.open(args.home / "keychain.json", unlock(), crypto.SystemEntropy())
