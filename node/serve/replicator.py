"""Replication in the daemon: the libp2p host, the sync engine and the node's replica, wired across two threads.

- The **libp2p host** (:class:`crdt.p2p.P2PHost`) runs in the daemon's trio guest (the loop thread). Its callbacks only
  queue events (connected, frame, disconnected) on one trio channel, in arrival order.
- One trio task drains that channel in batches and hands each batch to the **core thread** (the daemon's
  :class:`node.daemon.CoreLane`), where the sync engine (:class:`crdt.sync.Sync`) and the replica
  (:class:`node.replica.Replica`) live beside the store. The frames they return go back to the host's send queues.
  Every touch of the core happens on the core thread, one at a time, as for gRPC calls.
- A **tick** (every ``tick_s``, and right after a local write: :meth:`Replicator.poke`) runs ``settle`` (the node's
  consensus records whose decision changed are written), ``replica.pump`` (the journal's new writes become objects)
  and ``sync.tick`` (announcements, retries).
- A **status file**, ``HOME/run/replication.json`` (0600), says what ``gaml peers`` shows while the daemon runs: this
  node's addresses, the boundaries and members (no key, no object id), the peers connected now and per-peer counters.

Time for the engine and the replica is wall-clock microseconds (the unit of asset times); the engine's retry delay is
in the same unit.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import trio

from gaml.crdt.errors import NotConnected, P2PError, SendQueueFull
from gaml.crdt.p2p import P2PHost
from gaml.crdt.sync import Sync
from gaml.node.core.replica import Replica
from gaml.node.shells.files import read_sealed_json, write_sealed_json
from gaml.policy import crypto
from gaml.policy.keychain import NODE_MASTER_REF, Keychain

T = TypeVar("T")
RETRY_US: Final = 2_000_000
STATUS_EVERY_S: Final = 1.0
SETTLE_EVERY_S: Final = 2.0  # consensus records are written at most this often (a changed boundary refolds its ledger)
BATCH: Final = 256  # events handed to the core thread at once …
# … and frame bytes: objects are accepted (decrypted, merged, embedded, written) in jobs of about this size, so a
# gRPC call waiting behind an initial sync waits for one job (~0.3 s), not for the whole Send queue.
BATCH_BYTES: Final = 128 << 10

log = logging.getLogger("gaml.daemon")


def now_us() -> int:
    return time.time_ns() // 1000


STATUS_KEY_TAG: Final = b"gaml_run_status_key_v1"
STATUS_DOMAIN: Final = b"gaml-run"  # what the sealed status file is bound to (with its name)


class Replicator:
    """Replication for one daemon. Build it on the core thread (:meth:`build`), then :meth:`start` it in trio."""

    def __init__(
        self,
        replica: Replica,
        seed: bytes,
        submit: Callable[[Callable[[], Any]], concurrent.futures.Future[Any]],
        status_path: Path,
        status_key: bytes,
        *,
        listen: Sequence[str],
        peers: Sequence[str],
        tick_s: float = 0.25,
        settle: Callable[[int], object] | None = None,
    ) -> None:
        """``settle(now)``: run on the core thread before the pump of a tick that comes with no frame from a peer
        (not while a sync is bringing objects in), at most every :data:`SETTLE_EVERY_S` (the node's consensus
        records: what it writes leaves in the same tick). A failure of it is logged and replication goes on."""
        self.replica = replica
        self._settle = settle
        self._settled_at = -math.inf
        self.sync = Sync(replica, crypto.SystemEntropy(), retry_after=RETRY_US, max_send_bytes=BATCH_BYTES)
        self._seed = seed
        self._submit = submit
        self.status_path = status_path
        self._status_key = status_key
        self.listen = list(listen)
        self.peers = list(peers)
        self.tick_s = tick_s
        self.host: P2PHost | None = None
        self._send, self._recv = trio.open_memory_channel[tuple[str, str, bytes]](65536)
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._poked = False
        self._status_at = 0.0
        self._done = trio.Event()
        self.events = 0
        self.errors = 0

    # -- trio side -------------------------------------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> list[str]:
        """Listen, dial the bootstrap peers, and run the event loop in ``nursery``; returns the listen addresses."""
        self._token = trio.lowlevel.current_trio_token()
        self._nursery = nursery
        self.host = P2PHost(
            self._seed,
            listen=self.listen,
            on_connected=lambda node: self._queue("connected", node, b""),
            on_frame=lambda node, frame: self._queue("frame", node, frame),
            on_disconnected=lambda node: self._queue("disconnected", node, b""),
        )
        await nursery.start(self.host.run)
        if self.peers:
            await self.host.connect_bootstrap(self.peers)
        nursery.start_soon(self._ticker)
        nursery.start_soon(self._loop)
        log.info("p2p", extra={"fields": {"addresses": self.host.addrs, "bootstrap": len(self.peers)}})
        return self.host.addrs

    async def stop(self) -> None:
        if self.host is not None:
            await self.host.close()
        self._send.close()
        await self._done.wait()

    def poke(self) -> None:
        """Ask for a tick now (after a local write); safe from the asyncio side of the loop thread."""
        token = self._token
        if token is None or self._poked:
            return
        self._poked = True
        try:
            token.run_sync_soon(self._queue, "tick", "", b"")
        except trio.RunFinishedError:
            pass

    def _queue(self, kind: str, node: str, frame: bytes) -> None:
        try:
            self._send.send_nowait((kind, node, frame))
        except trio.ClosedResourceError:
            pass  # stopping
        except trio.WouldBlock:
            if kind == "frame":  # dropped: the engine resends what was not acknowledged
                log.warning("p2p_inbox_full", extra={"fields": {"peer": node[:16]}})
            elif kind != "tick" and self._nursery is not None:
                # A session's start or end must not be lost (frames of a session the engine never started would be
                # ignored for good): it waits for room, in order behind what is queued.
                self._nursery.start_soon(self._send.send, (kind, node, frame))

    async def _ticker(self) -> None:
        while True:
            await trio.sleep(self.tick_s)
            self._queue("tick", "", b"")

    async def _loop(self) -> None:
        try:
            async with self._recv:
                async for first in self._recv:
                    batch = [first]
                    size = len(first[2])
                    while len(batch) < BATCH and size < BATCH_BYTES:
                        try:
                            batch.append(self._recv.receive_nowait())
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                        size += len(batch[-1][2])
                    if any(kind == "tick" for kind, _, _ in batch):
                        self._poked = False
                    want_status = time.monotonic() - self._status_at >= STATUS_EVERY_S
                    try:
                        outs, status = await self._core(functools.partial(self._handle, batch, want_status))
                    except Exception:
                        # A failure of one batch (a store error, a bug) must not end replication: the engine's state
                        # is as before the failing call, and what went unacknowledged is sent again by the peers.
                        self.errors += 1
                        log.error("replication_error", exc_info=True, extra={"fields": {"events": len(batch)}})
                        continue
                    self.events += len(batch)
                    await self._deliver(outs)
                    if status is not None:
                        self._status_at = time.monotonic()
                        self._write_status(status)
        finally:
            self._done.set()

    async def _core(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the core thread and wait for it in trio (no thread of trio's own is used)."""
        fut = self._submit(fn)
        done = trio.Event()
        token = trio.lowlevel.current_trio_token()
        fut.add_done_callback(lambda _: token.run_sync_soon(done.set))
        await done.wait()
        return fut.result()

    async def _deliver(self, outs: Sequence[tuple[str, bytes]]) -> None:
        host = self.host
        assert host is not None
        for peer, frame in outs:
            try:
                host.send_nowait(peer, frame)
            except SendQueueFull:
                try:
                    await host.send(peer, frame)
                except P2PError:
                    pass
            except NotConnected:
                pass  # it left; the engine starts over when it is back

    def _write_status(self, status: dict[str, Any]) -> None:
        host = self.host
        status["addresses"] = host.addrs if host else []
        status["connected"] = {n: True for n in (host.peers() if host else [])}
        status["transport"] = dataclasses.asdict(host.statistics()) if host else {}
        try:
            write_sealed_json(self.status_path, self._status_key, status, STATUS_DOMAIN)
        except OSError as e:
            log.warning("status_unwritten", extra={"fields": {"error": str(e)}})

    # -- core side -------------------------------------------------------------------------------------------------

    def _handle(
        self, batch: Sequence[tuple[str, str, bytes]], want_status: bool
    ) -> tuple[list[tuple[str, bytes]], dict[str, Any] | None]:
        now = now_us()
        outs: list[tuple[str, bytes]] = []
        ticked = False
        syncing = any(kind == "frame" for kind, _, _ in batch)  # records wait until what peers send is in
        for kind, node, frame in batch:
            if kind == "frame":
                outs += self.sync.received(node, frame, now)
            elif kind == "connected":
                outs += self.sync.connected(node, now)
            elif kind == "disconnected":
                self.sync.disconnected(node)
            elif kind == "tick" and not ticked:
                ticked = True
                if self._settle is not None and not syncing and time.monotonic() - self._settled_at >= SETTLE_EVERY_S:
                    self._settled_at = time.monotonic()
                    try:
                        self._settle(now)
                    except Exception:  # consensus bookkeeping must never stop replication
                        self.errors += 1
                        log.error("consensus_settle_error", exc_info=True)
                self.replica.pump(now)
                outs += self.sync.tick(now)
        return outs, (self.status() if want_status else None)

    def status(self) -> dict[str, Any]:
        """What ``gaml peers`` prints (core thread)."""
        return {
            "node_id": self.replica.node_id,
            "running": True,
            "boundaries": self.replica.describe(),
            "peers": {p: dataclasses.asdict(s) for p, s in self.sync.stats().items()},
            "counters": dict(sorted(self.replica.counters.items())),
        }


def status_key(keychain: Keychain) -> bytes:
    """The key that seals the status file (boundary names and labels name owners and tenants): a subkey of the node's
    master key, so that `gaml peers` reads it with the keychain while the daemon holds the store."""
    return crypto.derive_key(keychain.get(NODE_MASTER_REF), STATUS_KEY_TAG)


def read_status(path: Path, keychain: Keychain) -> dict[str, Any]:
    """What a running daemon's replicator last wrote to ``path`` (``FileNotFoundError`` before it has)."""
    return dict(read_sealed_json(path, status_key(keychain), STATUS_DOMAIN))


__all__ = ["Replicator", "read_status", "status_key"]
