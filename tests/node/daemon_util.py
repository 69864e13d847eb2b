"""Shared helpers for the daemon's tests: a home with a CA and client certificates, a daemon in a thread, a daemon in
a child process, and a digest of everything a node stores. Every wait is on an event (the daemon's readiness, a log
line, gRPC's connection), never on a sleep."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import uvloop

from gaml.node.core.store.kv import SPACES
from gaml.node.home import init_home
from gaml.node.serve.client import Client
from gaml.node.serve.daemon import Daemon, Options
from gaml.node.shells import certs
from gaml.node.shells.file_keychain import FileKeychain, Unlock
from gaml.node.shells.rocks_kv import RocksKV
from gaml.policy import crypto

ROOT = Path(__file__).resolve().parents[2]
KEY_HEX = "5a" * 32
UNLOCK = Unlock(key=bytes.fromhex(KEY_HEX))
LOCAL = "alice"  # the local principal of the socket


@dataclass
class Home:
    path: Path
    client_certs: Path
    principals: dict[str, tuple[bytes, bytes, bytes]] = field(default_factory=dict)  # principal -> key, cert, ca

    @property
    def socket(self) -> Path:
        return self.path / "run" / "gaml.sock"


def make_home(principals: tuple[str, ...] = ("alice", "bob"), *, tls: bool = True) -> Home:
    """A fresh node home (hash embedder) in a short directory under /tmp (Unix-socket paths are limited to 107
    bytes), with a CA and a client certificate per principal. Remove it with :func:`remove_home`."""
    base = Path(tempfile.mkdtemp(prefix="gd", dir="/tmp"))
    home = Home(base / "h", base / "certs")
    init_home(home.path, UNLOCK, embedder="hash")
    if tls:
        kc = FileKeychain.open(home.path / "keychain.json", UNLOCK, crypto.SystemEntropy())
        now = int(time.time())  # TLS checks certificate dates against the real clock
        certs.init_ca(home.path, kc, now)
        home.client_certs.mkdir()
        for p in principals:
            certs.issue_client(home.path, kc, p, home.client_certs, now)
            home.principals[p] = certs.load_client(*certs.client_paths(home.client_certs, p))
    return home


def remove_home(home: Home) -> None:
    shutil.rmtree(home.path.parent, ignore_errors=True)


@contextlib.contextmanager
def thread_daemon(home: Home, *, listen: bool = True, **options: Any) -> Iterator[Daemon]:
    """A daemon serving ``home`` on a thread of this process (its own uvloop), stopped gracefully afterwards."""
    opts = Options(local_principal=LOCAL, listen="127.0.0.1:0" if listen else None, grace_s=5, **options)
    daemon = Daemon(home.path, UNLOCK, opts)
    errors: list[BaseException] = []

    def main() -> None:
        try:
            uvloop.run(daemon.serve(install_signals=False))
        except BaseException as e:
            errors.append(e)
            daemon._ready.set()

    t = threading.Thread(target=main, name="gaml-daemon", daemon=True)
    t.start()
    assert daemon.wait_ready(120), "the daemon did not start"
    if errors:
        raise errors[0]
    try:
        yield daemon
    finally:
        daemon.request_stop()
        t.join(60)
        assert not t.is_alive(), "the daemon did not stop"
        if errors:
            raise errors[0]


def unix_client(home: Home, **kw: Any) -> Client:
    c = Client.unix(home.socket, **kw)
    c.wait_ready(30)
    return c


def mtls_client(home: Home, daemon: Daemon, principal: str, **kw: Any) -> Client:
    key, cert, ca = home.principals[principal]
    return Client.mtls(f"127.0.0.1:{daemon.tcp_port}", key, cert, ca, **kw)


@dataclass
class Proc:
    process: subprocess.Popen[str]
    log: list[dict[str, Any]]

    def pid(self) -> int:
        return self.process.pid


@contextlib.contextmanager
def process_daemon(home: Home, *extra: str) -> Iterator[Proc]:
    """``gaml --home H run`` in a child process; returns once its log says it serves. Killed if still alive after."""
    env = {**os.environ, "GAML_KEYCHAIN_KEY": KEY_HEX, "PYTHONPATH": str(ROOT)}
    env.pop("GAML_PASSPHRASE", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gaml.node.cli", "--home", str(home.path), "run", "--principal", LOCAL, *extra],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=ROOT,
    )
    log: list[dict[str, Any]] = []
    assert proc.stderr is not None
    _read_until(proc.stderr, log, "serving")
    reader = threading.Thread(target=_read_rest, args=(proc.stderr, log), daemon=True)
    reader.start()
    try:
        yield Proc(proc, log)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(60)
        reader.join(10)


def _read_until(stream: IO[str], log: list[dict[str, Any]], event: str) -> None:
    for line in stream:
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            log.append(entry)
            if entry.get("event") == event:
                return
    raise AssertionError(f"the daemon exited before logging {event!r}: {log[-5:]}")


def _read_rest(stream: IO[str], log: list[dict[str, Any]]) -> None:
    for line in stream:
        with contextlib.suppress(ValueError):
            log.append(json.loads(line))


def store_digest(home: Path) -> str:
    """A digest of every key and value in every column family of a stopped node's database."""
    kv = RocksKV(home / "db", create=False)
    try:
        h = hashlib.blake2b(digest_size=16)
        for cf in SPACES:
            for k, v in kv.load_range(cf):
                h.update(cf.encode() + b"\0" + len(k).to_bytes(4, "big") + k + len(v).to_bytes(4, "big") + v)
        return h.hexdigest()
    finally:
        kv.close()


def gaml_process(
    home: Path, *argv: str, stdin: str | None = None, timeout_s: float = 300
) -> subprocess.CompletedProcess[str]:
    """``gaml --home HOME ARGV`` in a child process (the unattended key in its environment), its result whatever the
    exit code."""
    env = {**os.environ, "GAML_KEYCHAIN_KEY": KEY_HEX, "PYTHONPATH": str(ROOT)}
    env.pop("GAML_PASSPHRASE", None)
    return subprocess.run(
        [sys.executable, "-m", "gaml.node.cli", "--home", str(home), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout_s,
        check=False,
    )
