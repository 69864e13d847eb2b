"""Helpers for the replication tests: node homes, `gaml` commands, and `gaml run` daemons in child processes that
replicate over real libp2p on 127.0.0.1.

Every wait polls a condition with a deadline (:meth:`Fleet.wait`) and fails with what it waited for and what it saw
last; a daemon that dies while a test waits fails the wait at once, with the tail of its log. A :class:`Fleet` owns a
temporary directory with the homes and every process started on them: :meth:`Fleet.close` kills what still runs and
removes the directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, TypeVar

from gaml.node.core.node import Node
from gaml.node.core.replica import record_of
from gaml.node.core.store.store import Store
from gaml.node.home import init_home, open_node
from gaml.node.serve.client import Client
from gaml.node.serve.replicator import read_status
from gaml.node.serve.runfiles import read_info, replication_path
from gaml.node.shells.file_keychain import FileKeychain
from gaml.policy import crypto
from gaml.policy.errors import GamlError, NotFound
from tests.node.daemon_util import KEY_HEX, ROOT, UNLOCK

T = TypeVar("T")

LOOPBACK: Final = "/ip4/127.0.0.1/tcp/0"  # listen on loopback, any free port
WAIT_S: Final = 60.0  # the deadline of every wait
POLL_S: Final = 0.1  # between two looks at a condition
# The replication records a node keeps in its meta space (node/core/replica.py); ``repstate`` is its own state only.
REPLICATION_KINDS: Final = ("repbound", "repobj", "repdoc", "repcur", "repgone", "repstate")


def _env() -> dict[str, str]:
    env = {**os.environ, "GAML_KEYCHAIN_KEY": KEY_HEX, "PYTHONPATH": str(ROOT)}
    env.pop("GAML_PASSPHRASE", None)
    env.pop("GAML_HOME", None)
    return env


@dataclass
class Peer:
    """A node home."""

    name: str
    home: Path
    node_id: str

    @property
    def socket(self) -> Path:
        return self.home / "run" / "gaml.sock"

    def gaml(self, *args: str, stdin: str | None = None) -> str:
        """``gaml --home HOME ARGS`` in a child process; its standard output (AssertionError if it fails)."""
        cmd = [sys.executable, "-m", "gaml.node.cli", "--home", str(self.home), *args]
        r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=WAIT_S * 2)
        if r.returncode != 0:
            raise AssertionError(f"{self.name}: gaml {' '.join(args)} exited with {r.returncode}: {r.stderr[-2000:]}")
        return r.stdout

    def gaml_json(self, *args: str, stdin: str | None = None) -> Any:
        """The JSON a ``gaml`` command prints on its last line."""
        return json.loads(self.gaml(*args, stdin=stdin).strip().splitlines()[-1])

    def status(self) -> dict[str, Any] | None:
        """What the running daemon reports of replication (``HOME/run/replication.json``), or None before it has."""
        try:
            return read_status(replication_path(self.home), self.keychain())
        except FileNotFoundError:
            return None

    def keychain(self) -> FileKeychain:
        return FileKeychain.open(self.home / "keychain.json", UNLOCK, crypto.SystemEntropy())

    @contextlib.contextmanager
    def opened(self) -> Iterator[Node]:
        """The node's store, opened in this process (its daemon must be stopped), closed without a checkpoint."""
        node = open_node(self.home, UNLOCK)
        try:
            yield node
        finally:
            node.close(checkpoint=False)


@dataclass
class Daemon:
    """``gaml --home HOME run`` in a child process, with its JSON log lines collected by a thread."""

    peer: Peer
    process: subprocess.Popen[str]
    log: list[dict[str, Any]] = field(default_factory=list)
    reader: threading.Thread | None = None

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, n: int = 8) -> str:
        return "\n".join(json.dumps(e) for e in self.log[-n:])

    def serving(self) -> bool:
        return any(e.get("event") == "serving" for e in self.log)

    @property
    def address(self) -> str:
        """The daemon's libp2p address (``…/p2p/<peer id>``), as its ``run/daemon.json`` says."""
        info = read_info(self.peer.home)
        assert info and info.get("pid") == self.process.pid, f"{self.peer.name}: no daemon.json of this process"
        addrs = info["p2p"]
        assert addrs, f"{self.peer.name}: the daemon does not replicate (no p2p address)"
        return str(addrs[0])

    def client(self) -> Client:
        c = Client.unix(self.peer.socket, timeout_s=30)
        c.wait_ready(WAIT_S)
        return c

    def stop(self) -> None:
        """SIGTERM, then wait for a graceful exit (status 0)."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
        try:
            rc = self.process.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{self.peer.name}: the daemon did not stop within {WAIT_S:g} s:\n{self.tail()}"
            ) from None
        if self.reader is not None:
            self.reader.join(10)
        assert rc == 0, f"{self.peer.name}: the daemon exited with {rc}:\n{self.tail()}"
        assert any(e.get("event") == "stopped" for e in self.log), f"{self.peer.name}: no 'stopped':\n{self.tail()}"
        bad = [e for e in self.log if "raw" in e or e.get("level") in ("error", "critical")]
        assert not bad, f"{self.peer.name}: the daemon logged errors (or lines that are not JSON): {bad[:5]}"

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(WAIT_S)


def _collect(stream: IO[str], log: list[dict[str, Any]]) -> None:
    for line in stream:
        try:
            entry = json.loads(line)
        except ValueError:
            entry = {"raw": line.rstrip()}
        log.append(entry if isinstance(entry, dict) else {"raw": entry})


class Fleet:
    """Node homes under one short temporary directory (Unix-socket paths are limited to 107 bytes), and the daemons
    started on them."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="gr", dir="/tmp"))
        self.daemons: list[Daemon] = []

    def close(self) -> None:
        for d in self.daemons:
            d.kill()
        for d in self.daemons:
            if d.reader is not None:
                d.reader.join(10)
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def peer(self, name: str) -> Peer:
        """A new node (hash embedder)."""
        home = self.base / name
        return Peer(name, home, init_home(home, UNLOCK, embedder="hash"))

    def copy(self, peer: Peer) -> Peer:
        """A copy of a stopped node's home in this fleet (same identity and store)."""
        home = self.base / peer.name
        shutil.copytree(peer.home, home, symlinks=True)
        return Peer(peer.name, home, peer.node_id)

    def start(
        self,
        peer: Peer,
        *,
        principal: str,
        dial: Iterable[str] = (),
        listen: str | None = LOOPBACK,
        netns: str = "",
        extra: Iterable[str] = (),
    ) -> Daemon:
        """Start ``gaml run`` listening for libp2p on ``listen`` (loopback; None: where the home's config says) and
        dialling ``dial``, in network namespace
        ``netns`` if given (``ip netns exec``: the same process, so its pid is the daemon's); does not wait (see
        :meth:`up`). A replication status left by an earlier run is removed first: what a test reads is this run's."""
        replication_path(peer.home).unlink(missing_ok=True)
        args = ["--home", str(peer.home), "run", "--principal", principal, "--grace", "5", *extra]
        if listen is not None:
            args += ["--p2p", listen]
        for a in dial:
            args += ["--peer", a]
        prefix = ["ip", "netns", "exec", netns] if netns else []
        proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "gaml.node.cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            cwd=ROOT,
        )
        d = Daemon(peer, proc)
        assert proc.stderr is not None
        d.reader = threading.Thread(target=_collect, args=(proc.stderr, d.log), daemon=True)
        d.reader.start()
        self.daemons.append(d)
        return d

    def up(self, *daemons: Daemon) -> None:
        """Wait until every one of ``daemons`` serves and has written its first replication status."""
        for d in daemons:
            self.wait(f"{d.peer.name}'s daemon to serve", d.serving)
            self.wait(f"{d.peer.name}'s first replication status", d.peer.status)

    def running(self) -> list[Daemon]:
        return [d for d in self.daemons if d.alive()]

    def wait(
        self,
        what: str,
        probe: Callable[[], T],
        ok: Callable[[T], bool] = bool,
        *,
        timeout: float = WAIT_S,
        watch: Iterable[Daemon] | None = None,
    ) -> T:
        """Poll ``probe`` until ``ok`` holds of what it returns (errors count as not yet); returns that value.

        Fails after ``timeout`` seconds with ``what`` and the last value or error seen, and at once if a daemon of
        ``watch`` (default: every daemon running when the wait begins) exits."""
        watched = list(self.running() if watch is None else watch)
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            try:
                value = probe()
                if ok(value):
                    return value
                last = value
            except (GamlError, OSError, ValueError, KeyError, AssertionError) as e:
                last = e
            for d in watched:
                if not d.alive():
                    raise AssertionError(
                        f"{d.peer.name}'s daemon exited ({d.process.returncode}) while waiting for {what}:\n{d.tail()}"
                    )
            if time.monotonic() >= deadline:
                seen = repr(last)
                seen = seen if len(seen) <= 3000 else seen[:3000] + "…"
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; last seen: {seen}")
            time.sleep(POLL_S)


# -- reading a running node --------------------------------------------------------------------------------------------


def get_or_none(client: Client, id_: str) -> dict[str, Any] | None:
    """The asset as the daemon returns it to its local principal, or None if it has none (or it was deleted)."""
    try:
        return client.get(id_)
    except NotFound:
        return None


def peer_stats(status: Mapping[str, Any] | None, peer: Peer) -> dict[str, Any]:
    """The sync engine's counters of one peer in a replication status ({} if it never connected)."""
    if not status:
        return {}
    return dict(status.get("peers", {}).get(peer.node_id, {}))


def boundary_status(status: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    """One boundary as a replication status describes it ({} if the node is in no boundary of that name)."""
    for b in (status or {}).get("boundaries", []):
        if b["name"] == name:
            return dict(b)
    return {}


# -- reading a stopped node --------------------------------------------------------------------------------------------


def live_records(store: Store) -> dict[str, dict[str, Any]]:
    """Every live asset's replicated record (its signed content without the node-local fields), by id."""
    return {i: record_of(store.get(i)) for i in store.live_ids()}


def replication_records(store: Store) -> dict[str, int]:
    """How many replication records of each kind the store's meta space holds."""
    return {kind: sum(1 for _ in store.scan_meta(kind)) for kind in REPLICATION_KINDS}


def files_containing(root: Path, needles: Mapping[str, bytes]) -> list[str]:
    """Every (file, needle name) where a needle occurs in the raw bytes of a regular file under ``root``."""
    hits = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        hits += [f"{label} in {path.relative_to(root)}" for label, n in needles.items() if n and n in data]
    return hits


__all__ = [
    "LOOPBACK",
    "WAIT_S",
    "Daemon",
    "Fleet",
    "Peer",
    "boundary_status",
    "files_containing",
    "get_or_none",
    "live_records",
    "peer_stats",
    "replication_records",
]


def fresh_status(fleet: Fleet, peer: Peer, since_ns: int) -> dict[str, Any]:
    """A replication status the daemon wrote after ``since_ns`` (time.time_ns()), so it reflects what came before."""
    path = peer.home / "run" / "replication.json"
    fleet.wait(f"{peer.name} to write its replication status again", lambda: path.stat().st_mtime_ns > since_ns)
    status = peer.status()
    assert status is not None
    return status
