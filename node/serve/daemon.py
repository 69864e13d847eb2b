"""``gaml run``: the node as a long-running, authenticated gRPC service.

One process, three lanes, no shared Python state:

- **the loop thread** runs uvloop. It hosts ``grpc.aio`` (the ``gaml.v1.Memory`` service, standard health checking and
  reflection), the Unix-socket gate, and trio in *guest mode* (``trio.lowlevel.start_guest_run``), where the libp2p
  shell of the replication layer will live. The asyncio↔trio bridge is :class:`TrioGuest`: trio's scheduler runs
  inside asyncio's loop on the same thread, so neither side needs a lock (DEPENDENCIES.md §7, pattern B).
- **the core thread** (:class:`CoreLane`, one worker) owns the node: store, indexes, embedder, journal, hydrator. Every
  call of the core runs there, one at a time, so the core stays single-threaded and synchronous as it is written,
  while its blocking work (embedding, index builds, synced RocksDB writes) never blocks the loop. A call whose deadline
  passes while it waits in the lane is dropped before it starts; one that started finishes atomically.
  Between calls the lane also **indexes in the background**: vectors written since the last checkpoint move into
  their HNSW index in steps of ``INDEX_CHUNK`` once no call has run for ``INDEX_IDLE_S`` (or, while more than
  ``INDEX_BACKLOG`` wait, between calls: the backlog is counted after calls ran), so search stops paying the exact
  scan over unindexed vectors without a restart. A step on the lane only hands its vectors to the HNSW inserter's
  thread (:class:`node.shells.hnsw_index.Inserter`, one insert at a time: its module says why) and returns, so the next
  call runs on the lane while they go into the graph on the other core; the next step waits for them off the lane,
  and a call that reads the graph meanwhile waits at most for that one step's insert. The lane also keeps the
  heap out of the collector's way (``settle_heap``): what the node holds is frozen once open, and what calls leave
  every ``FREEZE_CALLS`` calls, so a full collection never walks the caches that frames grow; after ``HEAP_IDLE_S``
  without a call the whole heap is collected once, frozen objects included.
- gRPC's own C threads, which hold no GAML state.
- the HNSW inserter's thread, which runs the graph inserts the core thread hands it (hnswlib's C++, without the GIL)
  and touches nothing else; whatever reads or changes that graph next (the core thread, or a hybrid search's dense
  helper while the core thread waits for it) waits for the insert first.

**Authentication.** By default the node listens on a Unix socket, ``HOME/run/gaml.sock`` (directory 0700, socket
0600). A *gate* accepts each connection, reads the peer's credentials from the kernel (``SO_PEERCRED``: pid, uid,
gid), refuses any uid but the daemon's own, and splices the accepted connection to the gRPC server's private socket
(a fresh 0700 directory). Such a caller is the node's *local principal* (``config.toml`` ``local_principal``, default
the node's only user, else the login name). With ``--listen HOST:PORT`` the node also serves TCP, with mutual TLS
only: a client certificate issued by the node's CA (``gaml certs``) names the principal; revoked certificates and
principals are refused on each ``gaml.v1.Memory`` call (health checking and reflection, which reveal no memory,
answer any client the TLS handshake admitted). Anything else gets no service.

**Limits.** Per principal: a token bucket of calls and the largest request and ingest stream
(:class:`node.service.Limits`, ``config.toml`` ``limits``). The transport refuses messages over the largest limit.

**Shutdown.** SIGTERM or SIGINT: stop accepting, let in-flight calls finish (``grace_s``), then on the core thread
flush and snapshot the indexes and close the store, stop trio, and remove the socket and ``HOME/run/daemon.json``.

**Logs** are JSON lines on stderr: one per start, stop, refused connection and call (method, principal, transport,
outcome, milliseconds), never a payload, a key or a frame.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import datetime
import functools
import gc
import getpass
import json
import logging
import os
import re
import shutil
import signal
import socket
import stat
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import grpc
import trio
import uvloop
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from gaml.crdt.p2p import peer_id_of
from gaml.node.core.api import VERSION
from gaml.node.core.consensus import Consensus
from gaml.node.core.errors import DeadlineExceeded, TooLarge, Unauthenticated, Unavailable
from gaml.node.core.replica import Replica
from gaml.node.core.service import (
    Limits,
    MemoryService,
    PeerRead,
    RateLimiter,
    not_asked,
)
from gaml.node.core.store.views import collector_paused
from gaml.node.core.tokens import TokenCounter
from gaml.node.home import (
    bearer_token,
    check_home,
    consensus_weights,
    local_principal,
    make_counter,
    memory_layers,
    open_node,
    read_config,
    token_principal,
)
from gaml.node.pairing import gossip_enabled, mdns_enabled, p2p_config, rendezvous_enabled
from gaml.node.serve.metrics import Gauges, Metrics
from gaml.node.serve.replicator import Replicator, status_key
from gaml.node.serve.runfiles import (
    SOCKET_NAME,
    info_path,
    pid_alive,
    read_info,
    replication_path,
    run_dir,
    socket_listens,
)
from gaml.node.serve.servicer import SERVICE, MemoryServicer, handlers
from gaml.node.serve.web import url_host
from gaml.node.shells import certs
from gaml.node.shells.file_keychain import FileKeychain, Unlock
from gaml.node.shells.files import check_private_dir, write_atomic
from gaml.node.shells.hnsw_index import Inserter
from gaml.node.shells.mdns import Discovery
from gaml.policy import crypto
from gaml.policy.access import Principal
from gaml.policy.errors import GamlError, InvalidInput, PolicyError, StoreError
from gaml.policy.keychain import NODE_IDENTITY_REF

T = TypeVar("T")
# Calls after which replication ticks at once.
WRITES: Final = frozenset({"Put", "Ingest", "Remember", "Forget", "Override", "AddPrincipal", "Curate", "Maintain"})
# The node's administration: its own user only, on the socket (not a token's principal, not a certificate's).
ADMIN: Final = frozenset({"Principals", "AddPrincipal", "Sources", "Curate", "Maintain", "Backup"})
MAX_UNIX_PATH: Final = 107  # sun_path is 108 bytes with its NUL
_CRED: Final = struct.Struct("3i")  # struct ucred: pid, uid, gid
PRIVATE_PREFIX: Final = "gaml-"  # the gRPC server's private directory: TMPDIR/gaml-<pid>-<random>
_PRIVATE_NAME: Final = re.compile(r"gaml-([0-9]+)-[A-Za-z0-9_]+")
_INTERNAL_SOCKET: Final = "grpc.sock"
INDEX_CHUNK: Final = 512  # vectors per background indexing step (a fraction of a second of hnswlib inserts)
INDEX_IDLE_S: Final = 0.2  # a step runs once the lane has had no call for this long, …
INDEX_BACKLOG: Final = 65_536  # … or, while this many vectors wait, between calls
INDEX_POLL_S: Final = 0.1  # how often the indexer looks whether it may step
# After this long without a call, the heap is collected whole, frozen objects included (settle_heap's "all"): what was
# frozen alive and has since died in a cycle is freed then, not never. Long, because that walk holds the interpreter
# (0.3 s at 100k assets, seconds at a million) and a call arriving meanwhile waits; what it frees is little (~1 object
# in 40 calls, measured).
HEAP_IDLE_S: Final = 300.0
FREEZE_CALLS: Final = 16  # what calls left is frozen after this many (settle_heap's "young")
PEER_SHARE_OF_DEADLINE: Final = 0.5  # a peer read waits at most this share of the call's remaining time

log = logging.getLogger("gaml.daemon")


class _JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (ISO 8601, UTC, milliseconds), ``level``, ``event``, then the event's own
    fields (docs/operations.md lists them)."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds")
        out = {"time": when.replace("+00:00", "Z"), "level": record.levelname.lower(), "event": record.getMessage()}
        out.update(getattr(record, "fields", {}))
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(stream: Any = None, level: int = logging.INFO) -> None:
    """JSON lines on ``stream`` (default stderr) for the ``gaml.daemon`` logger."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_JsonFormatter())
    log.handlers[:] = [handler]
    log.setLevel(level)
    log.propagate = False


def _event(event: str, level: int = logging.INFO, **fields: Any) -> None:
    log.log(level, event, extra={"fields": fields})


def _bearer(ctx: grpc.aio.ServicerContext) -> str | None:
    """The access token of a call's ``authorization: Bearer …`` metadata, if it carries one."""
    for key, value in ctx.invocation_metadata() or ():
        if key == "authorization":
            token = bearer_token(value.decode() if isinstance(value, bytes) else value)
            if token is None:
                raise Unauthenticated("the authorization metadata is not 'Bearer <token>'")
            return token
    return None


# -- the core thread ---------------------------------------------------------------------------------------------------


class CoreLane:
    """One worker thread that owns the core; :meth:`run` awaits a function run there, honouring a deadline."""

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="gaml-core")
        self.busy_s = 0.0
        self.queued = 0  # calls queued or running (not replication's housekeeping, not background indexing)
        self.last_active = 0.0  # time.monotonic() when a call last started or ended
        self.touched = 0.0  # time.monotonic() when any work but background indexing last ended (it may have written)
        self.calls = 0  # calls run
        self.freezes = 0  # freezes of what calls left since the heap was last collected whole
        self._count = threading.Lock()

    def _foreground(self, started: bool) -> None:
        with self._count:
            self.queued += 1 if started else -1
            self.last_active = self.touched = time.monotonic()

    async def run(self, fn: Callable[[], T], *, deadline: float | None = None, background: bool = False) -> T:
        def job() -> T:
            if deadline is not None and time.monotonic() >= deadline:
                raise DeadlineExceeded("the deadline passed while the call waited for the node; nothing was done")
            t0 = time.perf_counter()
            if not background:
                # What calls cached stays out of later full collections (settle_heap), every FREEZE_CALLS calls: a
                # freeze also takes the loop's objects of the RPCs in flight, ~6 an RPC that die in cycles later
                # (measured), kept until the heap is next collected whole; a full collection walks at most the
                # survivors of these calls.
                self.calls += 1
                if self.calls % FREEZE_CALLS == 0:
                    settle_heap("young")
                    self.freezes += 1
            try:
                return fn()
            finally:
                self.busy_s += time.perf_counter() - t0

        if background:
            return await asyncio.get_running_loop().run_in_executor(self._pool, job)
        self._foreground(True)
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, job)
        finally:
            self._foreground(False)

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Queue ``fn`` on the core thread from anywhere (the trio side waits on the future its own way). Replication
        submits its ticks here: they do not keep the lane from counting as idle (a tick every 0.25 s would starve
        the background indexer), but what they write is indexed after them (:attr:`touched`)."""

        def job() -> T:
            t0 = time.perf_counter()
            try:
                return fn()
            finally:
                self.busy_s += time.perf_counter() - t0
                self.touched = time.monotonic()

        return self._pool.submit(job)

    def idle(self, for_s: float) -> bool:
        """No foreground work queued, and none for ``for_s`` seconds."""
        return self.queued == 0 and time.monotonic() - self.last_active >= for_s

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


# -- trio in guest mode ------------------------------------------------------------------------------------------------


class TrioGuest:
    """trio running as a guest inside the asyncio loop (same thread). :meth:`call` runs a trio function from asyncio."""

    def __init__(self) -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self._done: asyncio.Future[Any] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        started: asyncio.Future[None] = loop.create_future()
        self._done = loop.create_future()

        async def main() -> None:
            self._stop = trio.Event()
            async with trio.open_nursery() as nursery:
                self._nursery, self._token = nursery, trio.lowlevel.current_trio_token()
                loop.call_soon(_settle, started, None, None)
                await self._stop.wait()
                nursery.cancel_scope.cancel()

        def done(outcome: Any) -> None:
            if self._done is not None and not self._done.done():
                self._done.set_result(outcome)

        trio.lowlevel.start_guest_run(
            main,
            run_sync_soon_threadsafe=lambda fn: _soon(loop, fn),
            done_callback=done,
            host_uses_signal_set_wakeup_fd=True,
        )
        await asyncio.wait_for(started, 30)

    async def call(self, afn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``await afn(*args)`` in trio and return its result (or raise its error) in asyncio."""
        if self._token is None or self._nursery is None:
            raise Unavailable("trio is not running")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()

        async def runner() -> None:
            try:
                r = await afn(*args)
            except BaseException as e:  # handed to the asyncio side
                loop.call_soon_threadsafe(_settle, fut, None, e)
            else:
                loop.call_soon_threadsafe(_settle, fut, r, None)

        nursery = self._nursery
        self._token.run_sync_soon(lambda: nursery.start_soon(runner))
        return await fut

    @property
    def running(self) -> bool:
        return self._token is not None and self._done is not None and not self._done.done()

    @property
    def nursery(self) -> trio.Nursery:
        """The guest run's nursery, for tasks that live as long as the daemon (call it from a trio task)."""
        if self._nursery is None:
            raise Unavailable("trio is not running")
        return self._nursery

    async def stop(self) -> None:
        if self._token is None or self._stop is None or self._done is None:
            return
        stop = self._stop
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(stop.set)
        outcome = await asyncio.wait_for(self._done, 30)
        outcome.unwrap()


# -- the daemon --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Options:
    socket_path: Path | None = None  # default HOME/run/gaml.sock
    listen: str | None = None  # HOST:PORT for TCP with mutual TLS
    local_principal: str | None = None  # default: config.toml local_principal, the only user, or the login name
    grace_s: float = 10.0
    embedder: Any = None  # an Embedder to use instead of the configured one (tests)
    counter: Callable[[str], TokenCounter] | None = None
    p2p: list[str] | None = None  # libp2p listen multiaddrs (default: config.toml p2p.listen, loopback)
    peers: list[str] = dataclasses.field(default_factory=list)  # bootstrap peers besides config.toml p2p.peers
    mdns: bool | None = None  # announce and discover peers on the LAN (node/shells/mdns.py); None: config p2p.mdns
    metrics: tuple[str, int] | None = None  # serve Prometheus /metrics here (node/serve/metrics.py); None: not at all


class Daemon:
    """The service of one home. ``await serve()`` runs until :meth:`request_stop` (or SIGTERM/SIGINT)."""

    def __init__(self, home: Path, unlock: Unlock, options: Options | None = None) -> None:
        self.home = home
        self.unlock = unlock
        self.opts = options or Options()
        check_home(home)
        cfg = read_config(home)
        self.limits = Limits.from_json(cfg.get("limits") or {})
        self.limiter = RateLimiter(self.limits)
        self.socket_path = self.opts.socket_path or run_dir(home) / SOCKET_NAME
        if len(os.fsencode(self.socket_path)) > MAX_UNIX_PATH:
            raise InvalidInput(
                f"the socket path {self.socket_path} is over {MAX_UNIX_PATH} bytes (a Unix-socket limit): "
                "give a shorter one with --socket"
            )
        self.uid = os.getuid()
        self.lane = CoreLane()
        # HNSW inserts run on a thread of their own while the lane serves the next call (node.shells.hnsw_index).
        self.inserter = Inserter()
        self.trio = TrioGuest()
        self.revocations: certs.Revocations | None = None  # once the keychain is open (it seals the names)
        self.service: MemoryService | None = None
        self.replicator: Replicator | None = None
        self.p2p_addrs: list[str] = []
        self.mdns: Discovery | None = None
        self.local_principal = ""
        self.tcp_port: int | None = None
        self.started = time.monotonic()
        self.calls = 0
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._gate: asyncio.AbstractServer | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self._private: Path | None = None
        self._socket_ino: int | None = None
        self._stopping = False
        self._indexer: asyncio.Task[None] | None = None
        self._settler: asyncio.Task[None] | None = None
        self.indexed_in_background = 0  # vectors the background indexer moved into their indexes
        self.metrics: Metrics | None = None
        self.metrics_url: str | None = None

    # -- lifecycle ------------------------------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Begin a graceful shutdown (safe from any thread)."""
        stop = self._stop
        if stop is None:
            return
        try:
            loop = self._loop
        except AttributeError:
            return
        with contextlib.suppress(RuntimeError):  # the loop already closed
            loop.call_soon_threadsafe(stop.set)

    @property
    def address(self) -> str | None:
        """The TCP address served (``--listen`` with the port actually bound), or ``None``."""
        return self.opts.listen and f"{self.opts.listen.rsplit(':', 1)[0]}:{self.tcp_port}"

    def wait_ready(self, timeout: float) -> bool:
        """Block until the daemon serves (for a thread that started it); False on timeout."""
        return self._ready.wait(timeout)

    def _open(self) -> MemoryService:
        # The collector waits until what the open loaded is frozen (settle_heap): a young collection in between would
        # walk all of it (a million views and their tables: ~0.7 s, and a second walk when they were promoted).
        with collector_paused():
            svc = self._open_node()
            settle_heap()
        return svc

    def _open_node(self) -> MemoryService:
        node = open_node(self.home, self.unlock, embedder=self.opts.embedder, inserter=self.inserter)
        try:
            # The model is loaded before the node says it serves: the first call does not pay seconds for it.
            t0 = time.perf_counter()
            node.embedder.embed(["warm-up"])
            _event("embedder_ready", embedder=node.embedder.id, seconds=round(time.perf_counter() - t0, 3))
            ingestor, ladder = memory_layers(self.home, node)
            svc = MemoryService(node, ingestor, ladder, self.opts.counter or make_counter)
            name = self.opts.local_principal or local_principal(self.home, node) or getpass.getuser()
            self.local_principal = svc.ensure_user(name).id
            self.replicator = self._replicator(svc, ladder)
            self.revocations = certs.Revocations(self.home, node.store.keychain)
        except BaseException:
            node.close(checkpoint=False)
            raise
        return svc

    def _replicator(self, svc: MemoryService, ladder: Any) -> Replicator | None:
        """Replication, when this node is in a boundary or was told where to listen (core thread)."""
        replica = Replica(svc.node, erase=lambda id_, now: ladder.forget(id_, now, reason="replicated tombstone"))
        cfg = p2p_config(self.home)
        if not replica.boundary_ids() and self.opts.p2p is None:
            return None
        # Before the first frame is made; its records and overrides are sealed into their boundaries as written.
        svc.consensus = Consensus(
            svc.node.store, replica, replica.node_id, consensus_weights(self.home), pump=replica.pump
        )
        seed = svc.node.store.keychain.get(NODE_IDENTITY_REF)
        return Replicator(
            replica,
            seed,
            self.lane.submit,
            replication_path(self.home),
            status_key(svc.node.store.keychain),
            listen=self.opts.p2p or cfg["listen"],
            peers=[*cfg["peers"], *self.opts.peers],
            settle=svc.settle_consensus,
            reputation=svc.consensus.weigher,
            gossip=gossip_enabled(self.home),
            rendezvous=rendezvous_enabled(self.home),
        )

    def _close(self) -> None:
        if self.service is not None:
            self.service.node.close(checkpoint=True)

    async def serve(self, *, install_signals: bool = True) -> None:
        """Open the node, serve until asked to stop, then shut down gracefully."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._loop.add_signal_handler(sig, self._stop.set)
        _event("starting", home=str(self.home), pid=os.getpid(), version=VERSION)
        self.service = await self.lane.run(self._open)  # the heap settled (frozen) once open
        server: grpc.aio.Server | None = None
        health = HealthServicer()
        try:
            await self.trio.start()
            if self.replicator is not None:
                self.p2p_addrs = await self.trio.call(self._start_p2p)
                if self.opts.mdns if self.opts.mdns is not None else mdns_enabled(self.home):
                    self.mdns = Discovery(peer_id_of(self.service.node.node_id), self.p2p_addrs, self._found)
                    await self.mdns.start()
            server = await self._start_grpc(health)
            await self._start_gate()
            if self.opts.metrics is not None:
                self._start_metrics(*self.opts.metrics)
            self._write_info()
            _event(
                "serving",
                socket=str(self.socket_path),
                listen=self.address,
                principal=self.local_principal,
                node_id=self.service.node.node_id[:16],
            )
            self._indexer = asyncio.create_task(self._index_in_background(), name="gaml-indexer")
            self._settler = asyncio.create_task(self._settle_when_idle(), name="gaml-heap")
            self._ready.set()
            await self._stop.wait()
            _event("stopping", grace_s=self.opts.grace_s)
        finally:
            self._stopping = True
            await self._shutdown(server, health)

    def _start_metrics(self, host: str, port: int) -> None:
        self.metrics = Metrics(self.home, VERSION, lambda: self.lane.submit(self._gauges))
        try:
            bound = self.metrics.start(host, port)
        except OSError as e:
            self.metrics = None
            raise InvalidInput(f"--metrics {host}:{port}: cannot serve there ({e.strerror or e})") from None
        self.metrics_url = f"http://{url_host(host)}:{bound}/metrics"
        _event("metrics", url=self.metrics_url)

    def _gauges(self) -> Gauges:
        """What the metrics' gauges read, on the core thread."""
        svc = self.service
        assert svc is not None
        out: Gauges = {"store": svc.node.store.gauges(), "replication": None}
        rep = self.replicator
        if rep is not None:
            now = time.time_ns() // 1000
            live = rep.sync.boundary_stats()
            boundaries = []
            for b in rep.replica.describe():
                bid = bytes.fromhex(b["id"])
                ledger = svc.consensus.ledger(bid, now) if svc.consensus is not None else None
                s = live.get(bid, {})
                boundaries.append(
                    {
                        "name": b["name"],
                        "objects": b["objects"],
                        "peers": s.get("peers", 0),
                        "unacked": s.get("unacked", 0),
                        "awaited": s.get("awaited", 0),
                        "disputed": ledger.disputed_slots if ledger is not None else 0,
                    }
                )
            out["replication"] = {"peers": len(rep.sync.peers()), "boundaries": boundaries}
        return out

    def backup(self, directory: str, now: int) -> dict[str, Any]:
        from gaml.node.backup import backup

        svc = self.service
        assert svc is not None
        return backup(self.home, svc.node, Path(directory), now)

    def observe_frame(self, spent: int, budget: int) -> None:
        if self.metrics is not None:
            self.metrics.hydrated(spent, budget)

    async def _index_in_background(self) -> None:
        """Move unindexed vectors into their partition indexes, ``INDEX_CHUNK`` at a time, while the lane is idle
        (or between calls while the backlog is over ``INDEX_BACKLOG``). Logs ``indexed`` when a backlog is gone."""
        svc = self.service
        assert svc is not None
        store = svc.node.store

        def step(only_over: bool) -> tuple[int, int]:
            """A step of INDEX_CHUNK vectors (``only_over``: only if INDEX_BACKLOG or more wait): how many moved, and
            how many wait after."""
            left = store.pending()
            if only_over and left < INDEX_BACKLOG:
                return 0, left
            return store.catch_up(INDEX_CHUNK), store.pending()

        # left: the vectors waiting when last counted (-1: not known yet), counted: the lane's ``touched`` then
        left, seen, counted, run_moved, run_t0 = -1, -1.0, -1.0, 0, 0.0
        while True:
            mark = self.lane.touched
            nothing_new = left == 0 and mark == seen
            may_step = self.lane.idle(INDEX_IDLE_S) or left >= INDEX_BACKLOG
            # A step runs when the lane is idle or the backlog is over its bound. Once calls ran since the backlog was
            # last counted, it is counted again (a short call of its own between two calls, a step only if over the
            # bound), so that a bulk write with no pause is indexed between its calls once INDEX_BACKLOG vectors
            # wait, as one with pauses is.
            if nothing_new or not (may_step or mark != counted):
                await asyncio.sleep(INDEX_POLL_S)
                continue
            last = self.inserter.last
            if last is not None and not last.done():
                # The last step's vectors are still going in, on the inserter's thread: a step now would wait for
                # them on the lane, where calls are served. Wait here instead (a failed insert is run again, and
                # reported, by its index on the lane).
                with contextlib.suppress(Exception):  # shielded: cancelling the indexer must not cancel an insert
                    await asyncio.shield(asyncio.wrap_future(last))
                continue
            try:
                moved, left = await self.lane.run(functools.partial(step, not may_step), background=True)
                counted = mark
            except Exception as e:  # a failing step must not take the service down; the next checkpoint retries
                _event("index failed", logging.ERROR, error=f"{type(e).__name__}: {e}")
                left, seen = 0, mark
                continue
            if moved and not run_moved:
                run_t0 = time.monotonic()
            run_moved += moved
            self.indexed_in_background += moved
            if left == 0:
                seen = mark
                if run_moved:
                    _event("indexed", vectors=run_moved, s=round(time.monotonic() - run_t0, 3))
                    settle_heap("unfrozen")
                run_moved = 0
            elif not moved:  # counted under the bound: a step waits for an idle moment or a larger backlog
                await asyncio.sleep(INDEX_POLL_S)

    async def _settle_when_idle(self) -> None:
        """Once no call has run for :data:`HEAP_IDLE_S` since what calls left was frozen, the whole heap is collected,
        frozen objects included, and frozen again (``settle_heap("all")``), on the lane; logs ``heap_settled``."""
        while True:
            await asyncio.sleep(HEAP_IDLE_S / 4)
            if not self.lane.freezes or not self.lane.idle(HEAP_IDLE_S):
                continue
            t0 = time.perf_counter()
            freezes = self.lane.freezes

            def settle() -> tuple[int, int]:
                self.lane.freezes = 0
                return settle_heap("all"), gc.get_freeze_count()

            found, kept = await self.lane.run(settle, background=True)
            ms = round((time.perf_counter() - t0) * 1000, 1)
            _event("heap_settled", freezes=freezes, collected=found, objects=kept, ms=ms)

    def _found(self, addrs: list[str]) -> None:
        """A node found on the LAN (mDNS): dial it and keep dialling, as a bootstrap peer."""
        replicator = self.replicator
        if replicator is None or self._stopping or not self.trio.running:
            return
        task = asyncio.ensure_future(self.trio.call(functools.partial(replicator.discovered, addrs)))
        self._pumps.add(task)
        task.add_done_callback(self._pumps.discard)

    async def _start_p2p(self) -> list[str]:
        assert self.replicator is not None
        return await self.replicator.start(self.trio.nursery)

    async def _start_grpc(self, health: HealthServicer) -> grpc.aio.Server:
        limit = self.limits.largest_request_bytes
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", limit + 64 * 1024),
                ("grpc.max_send_message_length", 64 << 20),
                ("grpc.so_reuseport", 0),
            ],
            maximum_concurrent_rpcs=256,
        )
        assert self.service is not None
        server.add_generic_rpc_handlers((handlers(MemoryServicer(self.service, self)),))
        health_pb2_grpc.add_HealthServicer_to_server(health, server)
        reflection.enable_server_reflection(
            (SERVICE, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME), server
        )
        remove_stale_private_dirs()
        self._private = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-"))  # 0700
        self._internal = self._private / _INTERNAL_SOCKET
        server.add_secure_port(f"unix:{self._internal}", grpc.local_server_credentials(grpc.LocalConnectionType.UDS))
        if self.opts.listen:
            kc = FileKeychain.open(self.home / "keychain.json", self.unlock, crypto.SystemEntropy())
            key, cert, ca = certs.server_material(self.home, kc)
            creds = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)
            try:
                self.tcp_port = server.add_secure_port(self.opts.listen, creds)
            except RuntimeError as e:  # grpc: "Failed to bind to address …"
                raise InvalidInput(
                    f"cannot listen on {self.opts.listen}: the address is in use or not available here ({e}); "
                    "choose another --listen"
                ) from None
            if not self.tcp_port:
                raise InvalidInput(f"cannot listen on {self.opts.listen}; choose another --listen")
        await server.start()
        await health.set("", health_pb2.HealthCheckResponse.SERVING)
        await health.set(SERVICE, health_pb2.HealthCheckResponse.SERVING)
        return server

    async def _start_gate(self) -> None:
        d = self.socket_path.parent
        if d == run_dir(self.home):
            check_private_dir(d, "the home's run/", create=True)
        else:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._remove_stale_socket()
        old = os.umask(0o177)  # the socket is created 0600: no window in which others could connect
        try:
            self._gate = await asyncio.start_unix_server(self._admit, path=str(self.socket_path))
        finally:
            os.umask(old)
        os.chmod(self.socket_path, 0o600)
        self._socket_ino = os.lstat(self.socket_path).st_ino

    def _remove_stale_socket(self) -> None:
        """Whatever is at the socket path is replaced only if it is a stale socket of ours: a socket of this user
        that no process listens on, at the home's default path or where this home's last daemon said it served
        (``run/daemon.json``, left by a daemon that was killed). Anything else is refused (:class:`InvalidInput`),
        untouched."""
        path = self.socket_path
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != self.uid:
            kind = (
                "a symlink"
                if stat.S_ISLNK(st.st_mode)
                else "a directory"
                if stat.S_ISDIR(st.st_mode)
                else ("a socket of another user" if stat.S_ISSOCK(st.st_mode) else "a file")
            )
            raise InvalidInput(
                f"{path} exists and is {kind}, not a stale socket of this node; refusing to replace it: choose "
                "another --socket (or move it away)"
            )
        if socket_listens(path):
            raise StoreError(f"{path} is served by another process; choose another --socket")
        info = read_info(self.home) or {}
        if path != run_dir(self.home) / SOCKET_NAME and info.get("socket") != str(path):
            raise InvalidInput(
                f"{path} is a socket this node's daemon did not leave (run/daemon.json does not name it); refusing to "
                "remove it: choose another --socket, or remove it yourself"
            )
        path.unlink()

    def _write_info(self) -> None:
        info = {
            "pid": os.getpid(),
            "socket": str(self.socket_path),
            "listen": self.address,
            "version": VERSION,
            "p2p": self.p2p_addrs,
            "metrics": self.metrics_url,
        }
        p = info_path(self.home)
        check_private_dir(p.parent, "the home's run/", create=True)
        write_atomic(p, json.dumps(info).encode(), mode=0o600)

    async def _shutdown(self, server: grpc.aio.Server | None, health: HealthServicer) -> None:
        for task in (self._indexer, self._settler):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):  # shutting down: the checkpoint must run
                    await task
        if self._gate is not None:
            self._gate.close()  # no new connections
            with contextlib.suppress(FileNotFoundError):
                if os.lstat(self.socket_path).st_ino == self._socket_ino:  # ours still, not a file put there since
                    self.socket_path.unlink()
        if server is not None:
            with contextlib.suppress(Exception):
                await health.enter_graceful_shutdown()
            await server.stop(self.opts.grace_s)  # drains in-flight calls, then cancels what is left
        for t in list(self._pumps):
            t.cancel()
        if self.metrics is not None:
            self.metrics.stop()
        if self.mdns is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.mdns.close(), 10)
        if self.replicator is not None and self.trio.running:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.trio.call(self.replicator.stop), 30)
        try:
            await self.lane.run(self._close)  # flush and snapshot the indexes, on the core thread
        finally:
            self.lane.shutdown()
            self.inserter.close()
            with contextlib.suppress(Exception):
                await self.trio.stop()
            if self._private is not None:
                shutil.rmtree(self._private, ignore_errors=True)
            info = read_info(self.home)
            if info and info.get("pid") == os.getpid():
                for path in (info_path(self.home), replication_path(self.home)):
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
            _event(
                "stopped",
                calls=self.calls,
                core_busy_s=round(self.lane.busy_s, 3),
                indexed_in_background=self.indexed_in_background,
            )

    # -- the Unix-socket gate ---------------------------------------------------------------------------------------

    async def _admit(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        try:
            pid, uid, _gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
        except OSError:
            pid = uid = -1
        if uid != self.uid or self._stopping:
            _event(
                "refused",
                logging.WARNING,
                transport="unix",
                pid=pid,
                uid=uid,
                reason="uid" if uid != self.uid else "stopping",
            )
            writer.close()
            return
        try:
            r2, w2 = await asyncio.open_unix_connection(str(self._internal))
        except OSError:
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._pumps.add(task)
        try:
            await asyncio.gather(_pump(reader, w2), _pump(r2, writer))
        except asyncio.CancelledError:
            pass
        finally:
            self._pumps.discard(task)
            for w in (writer, w2):
                w.close()

    # -- the runtime the servicer calls (proto.servicer.Runtime) ----------------------------------------------------

    def _identity(self, ctx: grpc.aio.ServicerContext) -> tuple[str, str]:
        auth = ctx.auth_context()
        kind = (auth.get("transport_security_type") or [b""])[0]
        if kind == b"local":
            bearer = _bearer(ctx)
            if bearer is None:
                return self.local_principal, "unix"
            svc = self.service
            if svc is None:
                raise Unavailable("the node is starting")
            # A token the node issued (`gaml token`): the caller on the socket acts as its principal (the MCP and
            # proxy doors serve several principals through one socket this way).
            return token_principal(svc.node.store.keychain, bearer), "unix+token"
        if kind == b"ssl":
            pem = (auth.get("x509_pem_cert") or [b""])[0]
            if not pem:
                raise Unauthenticated("a client certificate is required")
            info = crypto.cert_info(pem)
            if self.revocations is None:
                raise Unavailable("the node is starting")
            if self.revocations.is_revoked(info.serial_hex, info.principal):
                raise Unauthenticated(f"the certificate {info.serial_hex} of {info.principal} is revoked")
            return info.principal, "mtls"
        raise Unauthenticated("unauthenticated transport")

    def _admit_call(self, ctx: grpc.aio.ServicerContext, method: str, size: int) -> tuple[str, str]:
        if self._stopping:
            raise Unavailable("the node is shutting down")
        pid, transport = self._identity(ctx)
        self.limiter.take(pid, time.monotonic())
        lim = self.limits.of(pid)
        if size > lim.max_request_bytes:
            raise TooLarge(f"the request is {size} bytes, over {pid}'s limit of {lim.max_request_bytes}")
        return pid, transport

    def _deadline(self, ctx: grpc.aio.ServicerContext) -> float | None:
        remaining = ctx.time_remaining()
        if remaining is None:
            return None
        if remaining <= 0:
            raise DeadlineExceeded("the deadline passed before the call reached the node")
        return time.monotonic() + remaining

    async def authenticate(self, ctx: grpc.aio.ServicerContext, method: str, size: int = 0) -> Principal:
        pid, _ = self._admit_call(ctx, method, size)
        svc = self.service
        assert svc is not None
        return await self.lane.run(lambda: svc.ensure_user(pid), deadline=self._deadline(ctx))

    async def ask_peers(
        self, ctx: grpc.aio.ServicerContext, caller: Principal, text: str, read: PeerRead
    ) -> dict[str, Any]:
        replicator = self.replicator
        if replicator is None or not self.trio.running:
            return not_asked("this node replicates nothing: it is in no boundary")
        deadline_s = read.deadline_ms / 1000
        remaining = ctx.time_remaining()
        if remaining is not None:  # leave the call room for its own work after the answers
            deadline_s = max(0.0, min(deadline_s, remaining * PEER_SHARE_OF_DEADLINE))
        ask = functools.partial(
            replicator.ask,
            caller,
            text,
            k=read.k,
            boundaries=read.boundaries,
            fan_out=read.fan_out,
            deadline_s=deadline_s,
        )
        return await self.trio.call(ask)

    def ingest_limit(self, principal: Principal) -> int:
        return self.limits.of(principal.id).max_ingest_bytes

    async def call(
        self,
        ctx: grpc.aio.ServicerContext,
        method: str,
        fn: Callable[[Principal, int], T],
        *,
        size: int,
        caller: Principal | None = None,
    ) -> T:
        t0 = time.perf_counter()
        pid, transport, outcome = (caller.id if caller else "?"), "?", "ok"
        try:
            if caller is None:
                pid, transport = self._admit_call(ctx, method, size)
            if method in ADMIN and transport != "unix":
                raise PolicyError(
                    f"{method} is the node's administration: only its own user may call it, on its Unix socket "
                    f"(not {pid} over {transport})"
                )
            svc = self.service
            assert svc is not None
            deadline = self._deadline(ctx)
            who = pid

            def job() -> T:
                c = caller if caller is not None else svc.ensure_user(who)
                return fn(c, time.time_ns() // 1000)

            result = await self.lane.run(job, deadline=deadline)
            if method in WRITES and self.replicator is not None:
                self.replicator.poke()  # the write travels now, not at the next tick
            return result
        except GamlError as e:
            outcome = type(e).__name__
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except Exception:
            outcome = "internal"  # the servicer logs it with its traceback, and answers INTERNAL
            raise
        finally:
            self.calls += 1
            if self.metrics is not None:
                self.metrics.call(method, outcome, time.perf_counter() - t0)
            _event(
                "call",
                method=method,
                principal=pid,
                transport=transport,
                outcome=outcome,
                ms=round((time.perf_counter() - t0) * 1000, 2),
            )

    def describe(self, ctx: grpc.aio.ServicerContext) -> dict[str, Any]:
        try:
            _, transport = self._identity(ctx)
        except GamlError:
            transport = "?"
        return {
            "version": VERSION,
            "transport": transport,
            "uptime_seconds": round(time.monotonic() - self.started, 3),
            "calls": self.calls,
        }


def settle_heap(collect: Literal["", "young", "unfrozen", "all"] = "") -> int:
    """What the node holds for as long as it runs (the views, postings, indexes just loaded or caught up, the records
    and texts its caches keep) leaves the collector's view (``gc.freeze``): a full collection otherwise walks all of
    it again and again, and one took 108-121 ms in a frame at 10k assets (26-37 ms after a freeze). It is still freed
    by reference counting; only a cycle that was garbage when frozen, or became garbage since, would stay until a
    collection of ``all``. What is collected first: nothing (a store just opened has made no garbage worth a full
    walk of it); ``young``, the young generations (every :data:`FREEZE_CALLS` calls: what they left; ~0.1 ms);
    ``unfrozen``, the whole heap but what is frozen (after a catch-up); ``all``, the frozen objects too
    (``gc.unfreeze`` first: a walk of the whole heap, 0.3 s at 100k assets, so only when the node has been idle a
    while, :data:`HEAP_IDLE_S`). Returns how many unreachable objects the collection found."""
    if collect == "all":
        gc.unfreeze()
    found = 0 if not collect else gc.collect(1) if collect == "young" else gc.collect()
    gc.freeze()
    return found


def _soon(loop: asyncio.AbstractEventLoop, fn: Callable[[], None]) -> None:
    loop.call_soon_threadsafe(fn)


def _settle(fut: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            if writer.is_closing():
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError, RuntimeError):  # uvloop: RuntimeError on a transport closed under us
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


def remove_stale_private_dirs(tmp: Path | None = None) -> list[Path]:
    """Remove the private directories (``TMPDIR/gaml-<pid>-*``) that killed daemons left behind: only directories of
    this user, whose process is gone, holding nothing but their gRPC socket. Returns those removed."""
    root = Path(tmp or tempfile.gettempdir())
    removed: list[Path] = []
    uid = os.getuid()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        m = _PRIVATE_NAME.fullmatch(entry.name)
        if m is None or int(m.group(1)) == os.getpid() or pid_alive(int(m.group(1))):
            continue
        try:
            st = os.lstat(entry.path)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
                continue
            inside = os.listdir(entry.path)
            sock = os.path.join(entry.path, _INTERNAL_SOCKET)
            if inside and (inside != [_INTERNAL_SOCKET] or not stat.S_ISSOCK(os.lstat(sock).st_mode)):
                continue  # not what a daemon leaves: not ours to remove
            if inside:
                os.unlink(sock)
            os.rmdir(entry.path)
        except OSError:
            continue
        removed.append(Path(entry.path))
    if removed:
        _event("removed stale private directories", count=len(removed))
    return removed


def run(home: Path, unlock: Unlock, options: Options | None = None, *, log_level: str = "info") -> None:
    """``gaml run``: serve ``home`` until SIGTERM or SIGINT (uvloop; trio as a guest)."""
    configure_logging(level=logging.getLevelNamesMapping()[log_level.upper()])
    daemon = Daemon(home, unlock, options)
    uvloop.run(daemon.serve())


__all__ = ["CoreLane", "Daemon", "Options", "TrioGuest", "configure_logging", "run"]
