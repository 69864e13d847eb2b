"""Backups of a home, and restoring one into a new home (``gaml backup DIR``, ``gaml restore DIR --home H``).

A backup is a directory that holds what the home holds, sealed as it is there: a RocksDB checkpoint of ``db/`` (its
files are the database's own, hard-linked when the backup is on the same file system), the sealed index snapshots of
``index/`` (written just before), the sealed ``keychain.json``, ``config.toml``, ``tls/`` and any other file of the
home except ``run/`` (sockets, the daemon's pid and status, which belong to a running process). Nothing is decrypted
to make it: a raw scan of a backup finds no private text, and restoring it needs the home's passphrase (or key).

**Consistent while the daemon runs.** The daemon makes the backup on its core thread (the ``Backup`` RPC, which
``gaml backup`` calls when a daemon serves the home), between two calls: every write acknowledged before it is in
the backup, none after it is, and the index snapshots cover the database's journal up to the same point. Without a
daemon, the CLI opens the store and does the same.

``backup.json`` (the manifest) says what was backed up: its format, the node id, the time, the journal position and
the number of live assets. A backup is made in a hidden sibling directory and renamed into place when complete, so
an interrupted backup leaves no directory that looks like one.

**Restore** copies a backup into a new home (refusing a home that exists and is not empty), the same way, then opens
it with the caller's key (a wrong passphrase or a damaged backup is refused, and the new home removed) and gives the
restored store a new Automerge actor (node/core/replica.py): the old one may have numbered changes after the backup
that peers hold, and one number must never name two changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from gaml.node.core.node import Node
from gaml.node.home import check_home, is_home, open_node, read_config
from gaml.node.shells.file_keychain import Unlock
from gaml.node.shells.files import write_atomic
from gaml.node.shells.rocks_kv import RocksKV
from gaml.policy.errors import GamlError, InvalidInput

BACKUP_FORMAT: Final = "gaml-backup-1"
MANIFEST: Final = "backup.json"
SKIPPED: Final = frozenset({"run", "db"})  # run/: the running process's own; db/: the checkpoint instead


def _fresh_dir(path: Path, what: str) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise InvalidInput(f"{what} {path} exists and is not empty; choose a new directory")


def _copy_entry(src: Path, dst: Path) -> None:
    if src.is_symlink():
        raise InvalidInput(f"{src} is a symlink; a home holds none (see `gaml doctor`)")
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns("LOCK"))
    elif src.is_file():
        shutil.copy2(src, dst)


def _private(root: Path) -> None:
    """Directories 0700 and files 0600 under ``root`` (a backup or a home is its user's alone)."""
    for dirpath, _, files in os.walk(root):
        os.chmod(dirpath, 0o700)
        for name in files:
            os.chmod(os.path.join(dirpath, name), 0o600)


def _fsync_tree(root: Path) -> None:
    for dirpath, _, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(dirpath, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def backup(home: Path, node: Node, dest: Path, now_us: int) -> dict[str, Any]:
    """Write a backup of ``home`` (whose store ``node`` is, open in this process) to the new directory ``dest``.

    Call it where no write runs meanwhile (the daemon's core thread, or a process holding the store). Returns the
    manifest."""
    if any(ord(c) < 32 or c == "\x7f" for c in str(dest)):
        raise InvalidInput(f"the backup directory {str(dest)!r} has control characters in its name")
    dest = dest.absolute()
    if not dest.parent.is_dir():
        raise InvalidInput(f"the backup directory's parent {dest.parent} is not a directory: make it first")
    _fresh_dir(dest, "the backup directory")
    if dest.resolve().is_relative_to(home.resolve()):
        raise InvalidInput(f"the backup directory {dest} is inside the home {home}: choose one outside it")
    kv = node.store.kv
    if not isinstance(kv, RocksKV):
        raise InvalidInput("only a store on disk (RocksDB) can be backed up")
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.backup-", dir=dest.parent))
    try:
        node.store.checkpoint()  # the sealed index snapshots, up to the journal's position now
        kv.checkpoint_to(work / "db")
        for entry in sorted(home.iterdir()):
            if entry.name not in SKIPPED and not entry.name.startswith("."):
                _copy_entry(entry, work / entry.name)
        gauges = node.store.gauges()
        manifest = {
            "format": BACKUP_FORMAT,
            "node_id": node.node_id,
            "made_us": now_us,
            "journal_seq": gauges["journal_seq"],
            "assets": gauges["assets"],
            "embedder": read_config(home)["embedder"],
        }
        write_atomic(work / MANIFEST, json.dumps(manifest, indent=1).encode(), mode=0o600)
        _private(work)
        _fsync_tree(work)
        if dest.exists():
            dest.rmdir()  # empty (checked above)
        os.rename(work, dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return {**manifest, "backup": str(dest)}


def read_manifest(src: Path) -> dict[str, Any]:
    """The manifest of the backup in ``src`` (InvalidInput if it is not a complete GAML backup)."""
    try:
        manifest = json.loads((src / MANIFEST).read_text())
    except FileNotFoundError:
        raise InvalidInput(f"{src} is not a GAML backup (no {MANIFEST}; an interrupted backup has none)") from None
    except (OSError, ValueError) as e:
        raise InvalidInput(f"{src}/{MANIFEST} is unreadable: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BACKUP_FORMAT:
        raise InvalidInput(f"{src}/{MANIFEST}: not a backup this GAML reads (format {manifest.get('format')!r})")
    for name in ("db", "keychain.json"):
        if not (src / name).exists():
            raise InvalidInput(f"{src} is an incomplete backup: {name} is missing")
    if not is_home(src):
        raise InvalidInput(f"{src} is an incomplete backup: its settings (config.toml) are missing")
    return manifest


def restore(src: Path, home: Path, unlock: Unlock, now_us: int) -> dict[str, Any]:
    """Copy the backup in ``src`` into the new home ``home`` and check that it opens with ``unlock``."""
    from gaml.node.core.replica import Replica

    src, home = src.absolute(), home.absolute()
    manifest = read_manifest(src)
    _fresh_dir(home, "the home")
    home.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{home.name}.restore-", dir=home.parent))
    try:
        for entry in sorted(src.iterdir()):
            if entry.name != MANIFEST:
                _copy_entry(entry, work / entry.name)
        _private(work)
        check_home(work)
        node = open_node(work, unlock)  # a wrong key, or a damaged database, stops here
        try:
            if node.node_id != manifest["node_id"]:
                raise InvalidInput(f"{src}: the backup's store is node {node.node_id}, its manifest names another")
            Replica(node).renew_actor()
            assets = node.store.gauges()["assets"]
        finally:
            node.close(checkpoint=True)
        _fsync_tree(work)
        if home.exists():
            home.rmdir()
        os.rename(work, home)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return {"restored": str(home), "node_id": manifest["node_id"], "assets": assets, "made_us": manifest["made_us"]}


def backup_home(home: Path, unlock: Unlock, dest: Path) -> dict[str, Any]:
    """``gaml backup`` without a daemon: open the store, back it up, close it."""
    node = open_node(home, unlock)
    try:
        return backup(home, node, dest, time.time_ns() // 1000)
    finally:
        with contextlib.suppress(GamlError):
            node.close(checkpoint=False)


__all__ = ["BACKUP_FORMAT", "MANIFEST", "backup", "backup_home", "read_manifest", "restore"]
