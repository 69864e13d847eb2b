"""Replication benchmark: two real daemons, paired as one owner's trusted devices, over libp2p on loopback.

::

    .venv/bin/python -m gaml.bench.replication_bench [--n 10000] [--seed 0] [--out bench/results] [--quick]
                                                [--changes 200] [--edits 100] [--unpolled 100] [--poll-ms 50]
                                                [--latency-poll-ms 2] [--rtt-rounds 500] [--timeout S] [--tmp /tmp]

Setup (untimed unless said): two fresh node homes A and B (``node.home.init_home``, the hash embedder, the rate limit
lifted), in a short temporary directory (a Unix socket's path is at most 107 bytes). They are paired as ``gaml pair``
pairs them, in process: A creates the ``devices`` boundary of ``alice`` and invites B (``Replica.create`` +
``Replica.invite``), B joins with that roster (``Replica.join``). Then **A's store is filled before any daemon runs**:
N seeded drafts of alice (``user_private``, ``replication_policy`` ``trusted_devices``; fact-like sentences, 200 to
400 characters of text, one to three entities and tags) through ``Node.put`` in batches of 256 (timed: the *local
write limit*), then ``Replica.pump`` (timed: A seals one snapshot object per asset, as its daemon would on its first
tick). A copy of B's home is kept for the in-process references below.

Measured:

1. **Initial sync.** A's daemon (a child process, ``python -m gaml.node.cli run --p2p /ip4/127.0.0.1/tcp/0``) is started
   and serving; then B's daemon is started with ``--peer`` = A's multiaddr rewritten to a TCP forwarding proxy of this
   process (127.0.0.1, its own port, A's ``/p2p/<peer id>``), so every byte between the two nodes passes through the
   proxy, which counts and timestamps each read. The sync time runs from the proxy's first byte (the connection) to
   the moment B holds all N; also given from B's process start. *Done* is polled with ``Client.get`` of the last
   asset of A's log over B's Unix socket, ``--poll-ms`` apart (the objects travel in log order, one Have batch at a
   time, so it arrives in the last batch; a Get waits on B's core behind the batch being accepted, so the successful
   one returns right after that batch's commit). The proxy gives the exact end as well: the last read of A's last Send,
   then B's next frame (written only after B committed that batch). Afterwards every asset is checked on B.
2. **Bytes on the wire vs ciphertext.** Ciphertext = the sum of the sizes of the N objects A sealed (what must cross).
   Wire = TCP payload bytes through the proxy, both directions, from the connection until the link was quiet for a
   second (noise, yamux, multistream, identify and the sync protocol together). The engines' counters and the libp2p
   hosts' statistics (each daemon's ``run/replication.json``) split it: sync-protocol frame bytes (Hello, Tags,
   Roster, Have, Need, Send, Ack), transport frame bytes (with their 4-byte length prefixes), and the rest (wire −
   transport frames): noise, yamux, multistream, identify.
3. **Change latency.** Both daemons connected and idle (a quiet link and a seeded pause of up to 250 ms before each
   change); one draft is put on A through A's daemon (``Client.unix`` on A's socket). Three series, interleaved in a
   seeded order: ``--changes`` new assets with B polled by ``Client.get`` (``--latency-poll-ms`` apart) until
   readable; ``--edits`` edits of synced assets (a new tag; readable = the tag is there), polled the same way;
   ``--unpolled`` new assets with B left alone until its Ack passes the proxy, then one Get (which must find it). The
   proxy's timestamps split every change into its four messages (Have A→B, Need B→A, Send A→B, Ack B→A), without
   polling error; B writes the Ack after it committed the asset.

References in the same run:

- *local write limit*: ``Node.put`` of the same N drafts in batches of 256 (A's fill);
- *in-process accept*: ``Replica.accept`` of A's N objects, in log order, in batches of 256, on the copy of B's home
  taken before its daemon ran (open, verify, merge, materialize: B's whole work, without network, engine or daemon),
  measured just before the daemons start (the machine may be shared: close in time is close in load);
- *raw TCP*: the same N objects, length-prefixed, over a plain loopback TCP socket between two threads of this process;
- round trips of 100 bytes: plain loopback TCP, the same through a :class:`Proxy` (its own cost), and libp2p frames
  between two ``crdt.p2p.P2PHost`` s in one plain trio run of this process (the transport's floor for a message);
- one change's work in process, after the run: ``Node.put`` + ``Replica.pump`` of one draft on A, and
  ``Replica.accept`` of each timed change's object, one per call, on the copy of B's home.

Per-thread CPU seconds of each daemon during the sync (``/proc/PID/task/*/stat``): the main thread runs the event loop
(uvloop with trio as a guest: libp2p, noise, yamux, the gRPC server), the core thread (the busiest of the others) the
sync engine, the replica and the store. Load averages are recorded at the start and the end.

Results: a Markdown table on stdout and in ``OUT/replication.md``, the raw numbers in ``OUT/replication.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gaml.bench.retrieve_bench import code_version
from gaml.bench.store_bench import TYPES, Corpus, bar, log, pct, rate, run_and_write
from gaml.node.core.replica import Replica
from gaml.node.home import init_home, open_node, read_config, write_config
from gaml.node.serve.client import Client
from gaml.node.serve.daemon import MAX_UNIX_PATH
from gaml.node.serve.replicator import read_status
from gaml.node.shells.file_keychain import FileKeychain, Unlock
from gaml.policy import crypto
from gaml.policy.errors import GamlError, NotFound

ROOT = Path(__file__).resolve().parents[1]
PRINCIPAL = "alice"
SCOPE = "user_private"
POLICY = "trusted_devices"
BATCH = 256  # the sync engine's Have batch (crdt.sync.Sync's default), used for the fill and the references too
NO_RATE_LIMIT = {"calls_per_second": 1_000_000.0, "burst": 1_000_000}
QUIET_S = 1.0  # the link counts as idle after this long without a byte
CHANGE_QUIET_S = 0.3  # before each change: this long without a byte (B's offer back of the last change is over)
A_TO_B, B_TO_A = 0, 1
WINDOW_UPDATE = 2 + 16 + 12  # a read of exactly this size is a bare yamux window update (noise length, tag, header)


def now_us() -> int:
    return time.time_ns() // 1000


def summary(xs: Sequence[float]) -> dict[str, float]:
    if not xs:
        return {}
    return {"p50": pct(xs, 50), "p90": pct(xs, 90), "p99": pct(xs, 99), "mean": statistics.fmean(xs), "max": max(xs)}


# -- data ------------------------------------------------------------------------------------------------------------


class Drafts:
    """Seeded drafts of alice's private, device-replicated memory: 200 to 400 characters of fact-like text."""

    def __init__(self, seed: int) -> None:
        self.corpus = Corpus(seed)
        self.rng = random.Random(f"replication-{seed}")
        self.texts: set[str] = set()

    def text(self) -> str:
        target = self.rng.randint(200, 400)
        while True:
            text = self.corpus.sentence()
            while len(text) < target:
                text += " " + self.corpus.sentence()
            if len(text) > 400:
                text = text[:400].rsplit(" ", 1)[0].rstrip(",.") + "."
            if text not in self.texts:  # a repeated text is the same asset (content id)
                self.texts.add(text)
                return text

    def draft(self, created_at: int) -> dict[str, Any]:
        r, c = self.rng, self.corpus
        return {
            "asset_type": r.choices([t for t, _ in TYPES], weights=[w for _, w in TYPES])[0],
            "payload": {"text": self.text()},
            "owner_id": PRINCIPAL,
            "privacy_scope": SCOPE,
            "replication_policy": POLICY,
            "entities": r.sample(c.entities, r.randint(1, 3)),
            "tags": r.sample(c.tags, r.randint(1, 3)),
            "confidence_score": round(r.uniform(0.5, 1.0), 3),
            "created_at": created_at,
        }


# -- homes -----------------------------------------------------------------------------------------------------------


@dataclass
class Home:
    name: str
    path: Path
    key: bytes
    node_id: str = ""

    @property
    def unlock(self) -> Unlock:
        return Unlock(key=self.key)

    @property
    def socket(self) -> Path:
        return self.path / "run" / "gaml.sock"

    @property
    def status_path(self) -> Path:
        return self.path / "run" / "replication.json"

    def status(self) -> dict[str, Any]:
        try:
            kc = FileKeychain.open(self.path / "keychain.json", self.unlock, crypto.SystemEntropy())
            return read_status(self.status_path, kc)
        except (OSError, GamlError):
            return {}


def make_home(base: Path, name: str) -> Home:
    home = Home(name, base / name, secrets.token_bytes(32))
    if len(os.fsencode(home.socket)) > MAX_UNIX_PATH:
        raise SystemExit(f"the socket path {home.socket} is over {MAX_UNIX_PATH} bytes: give a shorter --tmp")
    home.node_id = init_home(home.path, home.unlock, embedder="hash")
    cfg = read_config(home.path, overrides=False)
    cfg["limits"] = NO_RATE_LIMIT
    write_config(home.path, cfg)
    return home


def pair(a: Home, b: Home) -> bytes:
    """``gaml pair B --owner alice`` on A, then ``gaml pair --join`` on B, in process; the boundary id."""
    return pair_all(a, [b])


def pair_all(a: Home, others: Sequence[Home]) -> bytes:
    """A creates alice's devices boundary and invites every other home, which joins (``gaml pair``, in process)."""
    node = open_node(a.path, a.unlock)
    try:
        rep = Replica(node)
        bid = rep.create("devices", f"{PRINCIPAL}-devices", PRINCIPAL, now_us()).id
        rosters = [rep.invite(bid, o.node_id, "member", now_us()).encode() for o in others]
    finally:
        node.close(checkpoint=False)
    for o, roster in zip(others, rosters, strict=True):
        node = open_node(o.path, o.unlock)
        try:
            Replica(node).join(roster, now_us())
        finally:
            node.close(checkpoint=False)
    return bid


@dataclass
class Filled:
    ids: list[str]
    objects: list[bytes]  # A's current objects, in log order (what B must receive)
    stats: dict[str, Any]


def fill(a: Home, bid: bytes, drafts: Sequence[dict[str, Any]]) -> Filled:
    """The N drafts into A's store (Node.put, batches of 256), then A's replica seals them (Replica.pump)."""
    node = open_node(a.path, a.unlock)
    try:
        ids: list[str] = []
        with bar(len(drafts), f"fill A (Node.put, batches of {BATCH})") as pb:
            t0 = time.perf_counter()
            for i in range(0, len(drafts), BATCH):
                ids += node.put(drafts[i : i + BATCH], now_us())
                pb.update(len(drafts[i : i + BATCH]))
            t_put = time.perf_counter() - t0
        if len(set(ids)) != len(drafts):
            raise RuntimeError(f"the fill stored {len(set(ids))} distinct assets, not {len(drafts)}")
        rep = Replica(node)
        t0 = time.perf_counter()
        made = rep.pump(now_us())
        t_pump = time.perf_counter() - t0
        oids, _ = rep.log_after(bid, 0, 1 << 30)
        objects = rep.objects(bid, oids)
        if made != len(drafts) or len(objects) != len(drafts):
            raise RuntimeError(f"A sealed {made} objects ({len(objects)} in its log) for {len(drafts)} assets")
        docs = [len(d) for d in (node.store.read_meta(node.store.meta_name("repdoc", i)) for i in ids) if d is not None]
        t0 = time.perf_counter()
        node.checkpoint()
        t_ckpt = time.perf_counter() - t0
    finally:
        node.close(checkpoint=False)
    sizes = [len(o) for o in objects]
    log(
        f"A: put {len(ids):,} in {t_put:.1f} s, sealed {made:,} objects in {t_pump:.1f} s "
        f"({sum(sizes) / 1e6:.2f} MB, mean {statistics.fmean(sizes):.0f} B); checkpoint {t_ckpt:.1f} s"
    )
    return Filled(
        ids,
        objects,
        {
            "put_s": t_put,
            "put_per_s": rate(len(ids), t_put),
            "pump_s": t_pump,
            "pump_per_s": rate(made, t_pump),
            "checkpoint_s": t_ckpt,
            "objects": len(objects),
            "object_bytes": sum(sizes),
            "object_bytes_mean": statistics.fmean(sizes),
            "object_bytes_min": min(sizes),
            "object_bytes_max": max(sizes),
            "doc_bytes_mean": statistics.fmean(docs) if docs else 0.0,
        },
    )


# -- the proxy -------------------------------------------------------------------------------------------------------


class Proxy:
    """A TCP forwarder on 127.0.0.1 to A's libp2p port, counting the payload bytes and timing every read each way.

    One thread per direction per connection, ``recv`` then ``sendall`` (TCP_NODELAY on both sides, as libp2p sets).
    ``delay_s``: each read is held this long before it is written on (a link's one-way latency; reads queue behind).
    """

    def __init__(self, target_port: int, delay_s: float = 0.0) -> None:
        self.target = ("127.0.0.1", target_port)
        self.delay_s = delay_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.bytes = [0, 0]  # A→B, B→A
        self.chunks: list[tuple[float, int, int]] = []  # (perf_counter, direction, bytes) of each read
        self.connections = 0
        self.first: float | None = None
        self.last = 0.0
        self._socks: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(self.target)
            except OSError:
                down.close()
                continue
            for s in (down, up):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.connections += 1
                self._socks += [down, up]
            threading.Thread(target=self._pump, args=(down, up, B_TO_A), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down, A_TO_B), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, direction: int) -> None:
        try:
            while data := src.recv(1 << 18):
                t = time.perf_counter()
                with self.lock:
                    self.bytes[direction] += len(data)
                    self.chunks.append((t, direction, len(data)))
                    if self.first is None:
                        self.first = t
                    self.last = t
                if self.delay_s:
                    time.sleep(self.delay_s)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def counts(self) -> dict[str, int]:
        with self.lock:
            return {"a_to_b": self.bytes[A_TO_B], "b_to_a": self.bytes[B_TO_A], "reads": len(self.chunks)}

    def wait_quiet(self, quiet_s: float, timeout_s: float, since: float = 0.0) -> float:
        """Wait until no byte has passed for ``quiet_s`` (and none since ``since``); the time of the last byte."""
        end = time.perf_counter() + timeout_s
        while True:
            now = time.perf_counter()
            last = max(self.last, since)
            if now - last >= quiet_s:
                return self.last
            if now > end:
                raise RuntimeError(f"the link did not go quiet for {quiet_s} s within {timeout_s} s")
            time.sleep(min(0.02, quiet_s / 4))

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self.listener.close()
        for s in self._socks:
            with contextlib.suppress(OSError):
                s.close()


# -- the daemons -----------------------------------------------------------------------------------------------------


@dataclass
class Daemon:
    """``gaml --home H run`` in a child process; its JSON log lines read by a thread."""

    home: Home
    process: subprocess.Popen[str]
    started: float
    lines: list[dict[str, Any]] = field(default_factory=list)
    serving: threading.Event = field(default_factory=threading.Event)
    serving_at: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    def read(self, stream: IO[str]) -> None:
        for line in stream:
            try:
                entry = json.loads(line)
            except ValueError:
                entry = {"event": "text", "text": line.rstrip()}
            if not isinstance(entry, dict):
                continue
            self.lines.append(entry)
            if entry.get("event") == "serving" and not self.serving.is_set():
                self.serving_at = time.perf_counter()
                self.serving.set()

    def wait_serving(self, timeout_s: float) -> None:
        end = time.perf_counter() + timeout_s
        while not self.serving.wait(0.1):
            if self.process.poll() is not None or time.perf_counter() > end:
                tail = [e for e in self.lines if e.get("event") != "call"][-8:]
                raise RuntimeError(f"daemon {self.home.name} did not serve (exit {self.process.poll()}): {tail}")
        self.info = json.loads((self.home.path / "run" / "daemon.json").read_text())

    def cpu(self) -> dict[str, float]:
        return thread_cpu(self.process.pid)

    def stop(self) -> dict[str, Any]:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(120)
        time.sleep(0.2)  # the reader thread takes the last lines
        if self.process.returncode != 0:
            raise RuntimeError(f"daemon {self.home.name} exited with {self.process.returncode}: {self.lines[-5:]}")
        return next((e for e in reversed(self.lines) if e.get("event") == "stopped"), {})

    def errors(self) -> list[dict[str, Any]]:
        return [e for e in self.lines if e.get("level") in ("error", "critical") or e.get("event") == "refused"]


@contextlib.contextmanager
def daemon(home: Home, *extra: str) -> Iterator[Daemon]:
    env = {**os.environ, "GAML_KEYCHAIN_KEY": home.key.hex(), "PYTHONPATH": str(ROOT)}
    env.pop("GAML_PASSPHRASE", None)
    cmd = [sys.executable, "-m", "gaml.node.cli", "--home", str(home.path), "run", "--principal", PRINCIPAL, *extra]
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT
    )
    d = Daemon(home, proc, started)
    assert proc.stderr is not None
    threading.Thread(target=d.read, args=(proc.stderr,), name=f"log-{home.name}", daemon=True).start()
    try:
        yield d
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(60)


_TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of each thread of ``pid``, by thread id (the main thread's id is the pid)."""
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                out[task.name] = (int(fields[11]) + int(fields[12])) / _TICK
    return out


def cpu_delta(pid: int, before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds between two samples: the main thread (the loop), the busiest other (the core) and the rest."""
    d = {tid: after[tid] - before.get(tid, 0.0) for tid in after}
    main = d.pop(str(pid), 0.0)
    core_tid = max(d, key=lambda t: d[t], default="")
    core = d.pop(core_tid, 0.0)
    return {"total": main + core + sum(d.values()), "loop_thread": main, "core_thread": core, "other": sum(d.values())}


def call_ms(lines: Sequence[dict[str, Any]], method: str) -> list[float]:
    """The daemon's own milliseconds of each ``method`` call it logged (admission, the core lane, the call)."""
    return [float(e["ms"]) for e in lines if e.get("event") == "call" and e.get("method") == method and "ms" in e]


def connect(home: Home) -> Client:
    c = Client.unix(home.socket, timeout_s=60)
    c.wait_ready(60)
    return c


# -- 1-2. the initial sync -------------------------------------------------------------------------------------------


def peer_stats(status: dict[str, Any], peer: str) -> dict[str, Any]:
    out: dict[str, Any] = status.get("peers", {}).get(peer, {})
    return out


def wait_status_after(homes: Sequence[Home], wall: float, timeout_s: float) -> list[dict[str, Any]]:
    """Each daemon's replication.json once it was written after the wall-clock time ``wall``."""
    end = time.perf_counter() + timeout_s
    while True:
        ok = []
        for h in homes:
            with contextlib.suppress(OSError):
                if h.status_path.stat().st_mtime > wall:
                    ok.append(h)
        if len(ok) == len(homes):
            return [h.status() for h in homes]
        if time.perf_counter() > end:
            raise RuntimeError("a daemon did not rewrite its replication.json")
        time.sleep(0.05)


def initial_sync(
    a: Home, b: Home, da: Daemon, start_b: Callable[[str], Daemon], last_id: str, n: int, args: argparse.Namespace
) -> tuple[dict[str, Any], Proxy, Daemon]:
    addr = da.info["p2p"][0]  # /ip4/127.0.0.1/tcp/PORT/p2p/<peer id>
    parts = addr.split("/")
    port, peer_id = int(parts[4]), parts[6]
    proxy = Proxy(port)
    via = f"/ip4/127.0.0.1/tcp/{proxy.port}/p2p/{peer_id}"
    db = start_b(via)
    cpu0: dict[str, dict[str, float]] = {}  # both daemons' threads at the connection
    cpu_lag = [0.0]
    progress: list[tuple[float, int]] = []  # (s since the connection, B's materialized counter) as it changes
    watching = threading.Event()

    def watch() -> None:
        """CPU at the connection (looked for every 5 ms), then B's status file every 100 ms (written once a second)."""
        seen = 0
        while not watching.wait(0.1 if cpu0 else 0.005):
            first = proxy.first
            if first is None:
                continue
            if not cpu0:
                cpu0.update(a=da.cpu(), b=db.cpu())
                cpu_lag[0] = time.perf_counter() - first
            got = int(b.status().get("counters", {}).get("materialized", 0))
            if got > seen:
                progress.append((time.perf_counter() - first, got))
                seen = got

    threading.Thread(target=watch, name="progress", daemon=True).start()
    log(f"B starts, dialling A ({addr}) through the proxy at port {proxy.port}")
    timeout = args.timeout or 120 + n * 0.05
    end = time.perf_counter() + timeout
    poll_s = args.poll_ms / 1000
    polls = 0
    get_ms: list[float] = []
    prev_poll = 0.0
    t_done = 0.0
    cb: Client | None = None
    with bar(n, "B materializes") as pb:
        shown = 0
        while True:
            now = time.perf_counter()
            if now > end:
                raise RuntimeError(
                    f"B did not hold all {n} assets within {timeout:.0f} s: {b.status().get('counters')}"
                )
            if db.process.poll() is not None:
                raise RuntimeError(f"B's daemon exited: {db.lines[-5:]}")
            got = progress[-1][1] if progress else 0
            if got > shown:
                pb.update(min(got, n) - shown)
                shown = min(got, n)
            if cb is None and db.serving.is_set():
                db.info = json.loads((b.path / "run" / "daemon.json").read_text())
                cb = connect(b)
            if cb is not None:
                t0 = time.perf_counter()
                try:
                    cb.get(last_id)
                    t_done = time.perf_counter()
                    get_ms.append(1000 * (t_done - t0))
                    break
                except NotFound:
                    get_ms.append(1000 * (time.perf_counter() - t0))
                    prev_poll = t0
                    polls += 1
            time.sleep(poll_s)
    assert cb is not None
    cpu_a1, cpu_b1 = da.cpu(), db.cpu()
    watching.set()
    t_last = proxy.wait_quiet(QUIET_S, 120)
    wall_quiet = time.time()
    wire = proxy.counts()
    st_a, st_b = wait_status_after([a, b], wall_quiet, 30)
    status = cb.status()
    cb.close()
    first = proxy.first or 0.0
    with proxy.lock:
        chunks = list(proxy.chunks)
    t_sent, t_ack = last_batch(chunks)
    R: dict[str, Any] = {
        "n": n,
        "b_serving_s": db.serving_at - db.started,
        "b_connected_s": first - db.started,
        "sync_s": t_done - first,  # from the connection to B holding all N (Get of the last asset succeeded)
        "sync_from_b_start_s": t_done - db.started,
        "done_not_before_s": (prev_poll - first) if prev_poll else 0.0,  # the last Get that did not find it started
        "last_byte_s": t_last - first,  # the link's last byte before a quiet second
        "last_send_s": t_sent - first,  # the last read of A's last Send: every object has reached B
        "last_ack_s": t_ack - first,  # B's first frame after that: written once it committed the last batch
        "polls": polls,
        "poll_ms": args.poll_ms,
        "get_ms": summary(get_ms),
        "b_status": {k: status.get(k) for k in ("assets", "journal_seq", "indexed", "pending")},
        "wire": wire,
        "connections": proxy.connections,
        "a_status": {"peer": peer_stats(st_a, b.node_id), "transport": st_a.get("transport", {})},
        "b_status_repl": {
            "peer": peer_stats(st_b, a.node_id),
            "transport": st_b.get("transport", {}),
            "counters": st_b.get("counters", {}),
        },
        "progress": [(round(t, 3), m) for t, m in progress],
        "cpu": {
            "a": cpu_delta(da.process.pid, cpu0.get("a", {}), cpu_a1),
            "b": cpu_delta(db.process.pid, cpu0.get("b", {}), cpu_b1),
            "sampled_after_connection_s": cpu_lag[0],
        },
    }
    R["per_s"] = rate(n, R["sync_s"])
    log(
        f"B holds {n:,} after {R['sync_s']:.2f} s from the connection ({R['per_s']:,.0f} assets/s; "
        f"{R['sync_from_b_start_s']:.2f} s from B's start); last byte at {R['last_byte_s']:.2f} s; "
        f"wire {wire['a_to_b'] / 1e6:.2f} MB A→B + {wire['b_to_a'] / 1e6:.2f} MB B→A"
    )
    return R, proxy, db


def last_batch(chunks: Sequence[tuple[float, int, int]]) -> tuple[float, float]:
    """When the last object reached B (the last A→B read of more than 100 bytes: A's last Send; what A sends later
    are Acks of 53-54 bytes and window updates) and B's next frame (its Ack of that batch, or an offer back: either
    is written after B committed the batch, since B's replies to a frame leave only after its whole handling)."""
    t_sent = max((t for t, d, size in chunks if d == A_TO_B and size > 100), default=0.0)
    t_ack = min((t for t, d, size in chunks if d == B_TO_A and t > t_sent and size != WINDOW_UPDATE), default=0.0)
    return t_sent, t_ack


# -- 3. change latency -----------------------------------------------------------------------------------------------


@dataclass
class Trial:
    kind: str
    t0: float  # perf_counter when the Put was issued
    put_ms: float
    visible_ms: float
    polls: int
    poll_gap_ms: float  # the mean interval between the starts of successive Gets
    get_ms: float  # the successful Get's round trip
    messages: dict[str, float] | None = None  # the four messages at the proxy, ms after the put started


def split_messages(chunks: Sequence[tuple[float, int, int]], t0: float, t1: float) -> dict[str, float] | None:
    """Have (A→B), Need (B→A), Send (A→B), Ack (B→A): the first reads in that alternation in [t0, t1), bare yamux
    window updates (every data frame received is answered by one) skipped."""
    want = [("have", A_TO_B), ("need", B_TO_A), ("send", A_TO_B), ("ack", B_TO_A)]
    out: dict[str, float] = {}
    i = 0
    for t, d, size in chunks:
        if t < t0 or size == WINDOW_UPDATE:
            continue
        if t >= t1:
            break
        name, direction = want[i]
        if d == direction:
            out[name] = 1000 * (t - t0)
            out[f"{name}_bytes"] = float(size)
            i += 1
            if i == len(want):
                return out
    return None


KINDS = {
    "new": "a new asset, B polled with Get",
    "edit": "an edit (a new tag) of a synced asset, B polled with Get",
    "unpolled": "a new asset, B not polled: its Ack at the proxy, then one Get",
}


def change_latency(
    a: Home, b: Home, proxy: Proxy, drafts: Drafts, edit_of: Sequence[dict[str, Any]], args: argparse.Namespace
) -> dict[str, Any]:
    rng = random.Random(f"latency-{args.seed}")
    ca, cb = connect(a), connect(b)
    poll_s = args.latency_poll_ms / 1000
    trials: list[Trial] = []
    plan = [("new", i) for i in range(args.changes)] + [("edit", i) for i in range(args.edits)]
    plan += [("unpolled", i) for i in range(args.unpolled)]
    rng.shuffle(plan)  # the series interleaved: a drift of the machine touches each alike
    unreadable_at_ack = 0
    try:
        with bar(len(plan), "changes A → B") as pb:
            for kind, i in plan:
                time.sleep(rng.uniform(0, 0.25))
                proxy.wait_quiet(CHANGE_QUIET_S, 30)
                d = dict(edit_of[i]) if kind == "edit" else drafts.draft(now_us())
                tag = f"edit-{i}" if kind == "edit" else ""
                if tag:
                    d["tags"] = [*d["tags"], tag]
                with proxy.lock:
                    k0 = len(proxy.chunks)
                t0 = time.perf_counter()
                ids = ca.put([d])
                t1 = time.perf_counter()
                if kind == "unpolled":  # wait for B's Ack at the proxy (this process only), then one Get
                    while True:
                        with proxy.lock:
                            seen = proxy.chunks[k0:]
                        m = split_messages(seen, t0, float("inf"))
                        if m is not None:
                            break
                        if time.perf_counter() - t0 > 30:
                            raise RuntimeError(f"no Ack from B within 30 s of change {i}")
                        time.sleep(0.0005)
                polls, starts = 0, []
                while True:
                    tg = time.perf_counter()
                    starts.append(tg)
                    try:
                        got = cb.get(ids[0])
                        if not tag or tag in got.get("tags", []):
                            break
                    except NotFound:
                        pass
                    polls += 1
                    if kind == "unpolled" and polls == 1:
                        unreadable_at_ack += 1
                    if tg - t0 > 30:
                        raise RuntimeError(f"change {kind} {i} did not reach B within 30 s")
                    time.sleep(poll_s)
                t_vis = time.perf_counter()
                gaps = [y - x for x, y in itertools.pairwise(starts)]
                gap = 1000 * statistics.fmean(gaps) if gaps else 0.0
                trials.append(Trial(kind, t0, 1000 * (t1 - t0), 1000 * (t_vis - t0), polls, gap, 1000 * (t_vis - tg)))
                pb.update(1)
        proxy.wait_quiet(CHANGE_QUIET_S, 30)
    finally:
        ca.close()
        cb.close()
    with proxy.lock:
        chunks = list(proxy.chunks)
    ordered = sorted(trials, key=lambda t: t.t0)
    for t, nxt in zip(ordered, [*ordered[1:], None], strict=True):
        t.messages = split_messages(chunks, t.t0, nxt.t0 if nxt else float("inf"))
    out: dict[str, Any] = {
        "poll_ms": args.latency_poll_ms,
        "unreadable_at_ack": unreadable_at_ack,
        "order": [t.kind for t in ordered],
    }
    for kind, what in KINDS.items():
        ts = [t for t in trials if t.kind == kind]
        if not ts:
            continue
        msgs = [t.messages for t in ts if t.messages]
        out[kind] = {
            "what": what,
            "changes": len(ts),
            "visible_ms": summary([t.visible_ms for t in ts]),
            "put_ms": summary([t.put_ms for t in ts]),
            "polls_mean": statistics.fmean(t.polls for t in ts),
            "poll_gap_ms": summary([t.poll_gap_ms for t in ts if t.poll_gap_ms]),
            "get_ms": summary([t.get_ms for t in ts]),
            "split": len(msgs),
            "messages_ms": {k: summary([m[k] for m in msgs]) for k in ("have", "need", "send", "ack")},
            "message_bytes": {k: summary([m[f"{k}_bytes"] for m in msgs]) for k in ("have", "need", "send", "ack")},
            "steps_ms": {
                "a_put_to_have": summary([m["have"] - t.put_ms for t, m in _with_messages(ts)]),
                "b_have_to_need": summary([m["need"] - m["have"] for _, m in _with_messages(ts)]),
                "a_need_to_send": summary([m["send"] - m["need"] for _, m in _with_messages(ts)]),
                "b_send_to_ack": summary([m["ack"] - m["send"] for _, m in _with_messages(ts)]),
                "b_ack_to_visible": summary([t.visible_ms - m["ack"] for t, m in _with_messages(ts)]),
            },
            "trials": [
                {
                    "put_ms": round(t.put_ms, 3),
                    "visible_ms": round(t.visible_ms, 3),
                    "polls": t.polls,
                    **{k: round(v, 3) for k, v in (t.messages or {}).items()},
                }
                for t in ts
            ],
        }
        v, ack = out[kind]["visible_ms"], out[kind]["messages_ms"]["ack"]
        log(
            f"{kind}: {len(ts)} changes; B's Ack at the proxy p50 {ack.get('p50', 0):.1f} ms, p99 "
            f"{ack.get('p99', 0):.1f} ms; readable on B p50 {v['p50']:.1f} ms, p99 {v['p99']:.1f} ms"
        )
    return out


def _with_messages(ts: Sequence[Trial]) -> list[tuple[Trial, dict[str, float]]]:
    return [(t, t.messages) for t in ts if t.messages]


# -- references ------------------------------------------------------------------------------------------------------


def accept_in_process(copy: Home, bid: bytes, writer: str, objects: Sequence[bytes]) -> dict[str, Any]:
    """Replica.accept of A's objects on the copy of B's home: B's whole receive work without network or engine."""
    node = open_node(copy.path, copy.unlock)
    try:
        rep = Replica(node)
        accepted = rejected = 0
        with bar(len(objects), f"in-process Replica.accept, batches of {BATCH}") as pb:
            t0 = time.perf_counter()
            for i in range(0, len(objects), BATCH):
                ok, bad = rep.accept(bid, objects[i : i + BATCH], writer, now_us())
                accepted += ok
                rejected += bad
                pb.update(len(objects[i : i + BATCH]))
            t = time.perf_counter() - t0
        assets = node.store.stats().assets
    finally:
        node.close(checkpoint=False)
    if accepted != len(objects) or rejected or assets != len(objects):
        raise RuntimeError(f"in-process accept: {accepted} accepted, {rejected} rejected, {assets} assets")
    log(f"in-process accept of {len(objects):,} objects: {t:.2f} s ({rate(len(objects), t):,.0f}/s)")
    return {"s": t, "per_s": rate(len(objects), t), "accepted": accepted}


def _receive_frames(server: socket.socket, expected: int, got: list[int]) -> None:
    """Accept one connection and count the u32-length-prefixed frames on it until ``expected`` arrived."""
    conn, _ = server.accept()
    with conn:
        buf = bytearray()
        count = 0
        while count < expected:
            data = conn.recv(1 << 18)
            if not data:
                break
            buf += data
            pos = 0
            while len(buf) - pos >= 4:
                size = int.from_bytes(buf[pos : pos + 4], "big")
                if len(buf) - pos - 4 < size:
                    break
                pos += 4 + size
                count += 1
            del buf[:pos]
        got.append(count)


def raw_tcp(objects: Sequence[bytes], repeats: int = 3) -> dict[str, Any]:
    """The objects, each with a u32 length, over one loopback TCP connection (batches of 256 per write); the median
    of ``repeats`` runs, each from the first write until the receiving thread has parsed the last frame."""
    total = sum(4 + len(o) for o in objects)
    times: list[float] = []
    for _ in range(repeats):
        got: list[int] = []
        with socket.create_server(("127.0.0.1", 0)) as server:
            th = threading.Thread(target=_receive_frames, args=(server, len(objects), got))
            th.start()
            with socket.create_connection(server.getsockname()) as s:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                t0 = time.perf_counter()
                for i in range(0, len(objects), BATCH):
                    s.sendall(b"".join(len(o).to_bytes(4, "big") + o for o in objects[i : i + BATCH]))
                th.join()
                times.append(time.perf_counter() - t0)
        if got != [len(objects)]:
            raise RuntimeError(f"raw TCP: {got} of {len(objects)} objects arrived")
    t = statistics.median(times)
    return {"s": t, "per_s": rate(len(objects), t), "bytes": total, "mb_per_s": total / t / 1e6, "repeats": repeats}


def _echo_server(server: socket.socket) -> None:
    conn, _ = server.accept()
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := conn.recv(1 << 16):
            conn.sendall(data)


def tcp_rtt(rounds: int, *, via_proxy: bool, size: int = 100) -> dict[str, float]:
    """Round trips (ms) of ``size`` bytes to an echo thread over loopback TCP, directly or through a :class:`Proxy`."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        threading.Thread(target=_echo_server, args=(server,), daemon=True).start()
        proxy = Proxy(server.getsockname()[1]) if via_proxy else None
        port = proxy.port if proxy else server.getsockname()[1]
        rtt: list[float] = []
        try:
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                msg = b"x" * size
                for i in range(rounds + 20):
                    t0 = time.perf_counter()
                    s.sendall(msg)
                    got = 0
                    while got < size:
                        got += len(s.recv(size - got))
                    if i >= 20:
                        rtt.append(1000 * (time.perf_counter() - t0))
        finally:
            if proxy:
                proxy.close()
    return summary(rtt)


def p2p_rtt(rounds: int, size: int = 100) -> dict[str, float]:
    """Round trips (ms) of one ``size``-byte frame between two ``crdt.p2p.P2PHost`` s in this process (plain trio, no
    daemon): noise, yamux and the host's framing, without the sync engine, the core thread or trio's guest mode."""
    import trio

    from gaml.crdt.p2p import P2PHost

    rtt: list[float] = []

    async def main() -> None:
        send, recv = trio.open_memory_channel[bytes](16)
        hosts: list[P2PHost] = []
        a = P2PHost(secrets.token_bytes(32), on_frame=lambda node, frame: send.send_nowait(frame))
        b = P2PHost(secrets.token_bytes(32), on_frame=lambda node, frame: hosts[0].send_nowait(node, frame))
        hosts.append(b)
        async with a, b:
            node = await a.dial(b.addrs[0])
            msg = b"x" * size
            for i in range(rounds + 20):
                t0 = time.perf_counter()
                a.send_nowait(node, msg)
                await recv.receive()
                if i >= 20:
                    rtt.append(1000 * (time.perf_counter() - t0))

    trio.run(main)
    return summary(rtt)


def single_changes(
    a: Home, copy: Home, bid: bytes, n: int, kinds: Sequence[str], drafts: Drafts, rounds: int
) -> dict[str, Any]:
    """The work of one change without daemons, network or engine, in process, after the run (ms each):

    - B's side: ``Replica.accept`` of each object the timed changes made on A (A's log after its first N
      positions: one per change, in the order of the changes), one object per call, on the copy of B's home (which
      holds the N initial assets by then);
    - A's side: ``Node.put`` of one new draft and ``Replica.pump`` (seal its snapshot), ``rounds`` times on A.
    """
    node = open_node(a.path, a.unlock)
    try:
        rep = Replica(node)
        oids, _ = rep.log_after(bid, n, 1 << 30)
        objects = rep.objects(bid, oids)
        put_ms: list[float] = []
        pump_ms: list[float] = []
        for _ in range(rounds):
            d = drafts.draft(now_us())
            t0 = time.perf_counter()
            node.put([d], now_us())
            t1 = time.perf_counter()
            if rep.pump(now_us()) != 1:
                raise RuntimeError("one put on A sealed no object")
            put_ms.append(1000 * (t1 - t0))
            pump_ms.append(1000 * (time.perf_counter() - t1))
    finally:
        node.close(checkpoint=False)
    node = open_node(copy.path, copy.unlock)
    accept_ms: dict[str, list[float]] = {"new": [], "edit": []}
    try:
        rep = Replica(node)
        same = len(objects) == len(kinds)
        for i, obj in enumerate(objects):
            t0 = time.perf_counter()
            ok, _ = rep.accept(bid, [obj], a.node_id, now_us())
            ms = 1000 * (time.perf_counter() - t0)
            if ok != 1:
                raise RuntimeError("B's copy refused a change of A")
            accept_ms["edit" if same and kinds[i] == "edit" else "new"].append(ms)
    finally:
        node.close(checkpoint=False)
    return {
        "a_put_ms": summary(put_ms),
        "a_pump_ms": summary(pump_ms),
        "a_put_pump_ms": summary([x + y for x, y in zip(put_ms, pump_ms, strict=True)]),
        "b_accept_new_ms": summary(accept_ms["new"]),
        "b_accept_edit_ms": summary(accept_ms["edit"]),
        "objects": len(objects),
        "kinds_matched": len(objects) == len(kinds),
    }


# -- verification ----------------------------------------------------------------------------------------------------


def verify(a: Home, b: Home, ids: Sequence[str], drafts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """After both daemons stopped: every asset of the fill on B with A's payload, and equal replica states."""
    states = []
    missing = differ = 0
    for h in (a, b):
        node = open_node(h.path, h.unlock)
        try:
            states.append(Replica(node).state())
            if h is b:
                assets = node.store.stats().assets
                for id_, d in zip(ids, drafts, strict=True):
                    try:
                        got = node.store.get(id_)
                    except NotFound:
                        missing += 1
                        continue
                    if dict(got.payload) != d["payload"] or got.owner_id != PRINCIPAL:
                        differ += 1
        finally:
            node.close(checkpoint=False)
    out = {
        "assets_on_b": assets,
        "missing_on_b": missing,
        "differing_on_b": differ,
        "states_equal": states[0] == states[1],
        "current_objects": {k: len(v) for k, v in states[0].items()},
    }
    if missing or differ or not out["states_equal"]:
        raise RuntimeError(f"B does not hold what A holds: {out}")
    return out


# -- main ------------------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gaml.bench.replication_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=None, help="assets on A before B connects (default 10,000; --quick 500)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    p.add_argument("--changes", type=int, default=None, help="new assets timed A → B (default 200; --quick 40)")
    p.add_argument("--edits", type=int, default=None, help="edits timed A → B (default 100; --quick 20)")
    p.add_argument(
        "--unpolled", type=int, default=None, help="new assets timed by B's Ack alone (default 100; --quick 20)"
    )
    p.add_argument("--quick", action="store_true", help="a small run: N 500, 40 changes, 20 edits, 20 unpolled")
    p.add_argument("--poll-ms", type=float, default=50.0, help="Get polls of B during the sync, this far apart")
    p.add_argument("--latency-poll-ms", type=float, default=2.0, help="Get polls of B per change, this far apart")
    p.add_argument("--timeout", type=float, default=0.0, help="seconds the sync may take (default 120 + N/20)")
    p.add_argument("--rtt-rounds", type=int, default=500, help="round trips of the TCP and libp2p references")
    p.add_argument("--tmp", type=Path, default=Path("/tmp"), help="where the temporary homes go (short path)")
    args = p.parse_args(argv)
    args.n = args.n if args.n is not None else (500 if args.quick else 10_000)
    args.changes = args.changes if args.changes is not None else (40 if args.quick else 200)
    args.edits = args.edits if args.edits is not None else (20 if args.quick else 100)
    args.unpolled = args.unpolled if args.unpolled is not None else (20 if args.quick else 100)
    if args.n < 1 or args.changes < 0 or args.unpolled < 0 or not 0 <= args.edits <= args.n:
        p.error("need --n >= 1, --changes >= 0, --unpolled >= 0 and 0 <= --edits <= --n")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return run_and_write(args, "replication", run, render, code_version(("crdt", "node", "policy", "proto")))


def run(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    R: dict[str, Any] = {"loadavg_start": os.getloadavg()}
    a, b = make_home(base, "a"), make_home(base, "b")
    bid = pair(a, b)
    copy = Home("b2", base / "b2", b.key, b.node_id)
    shutil.copytree(b.path, copy.path)  # B before it ran: the in-process reference accepts into this

    drafts = Drafts(args.seed)
    t0 = time.perf_counter()
    start = now_us() - 3_600_000_000 - args.n * 1_000_000
    fill_drafts = [drafts.draft(start + i * 1_000_000) for i in range(args.n)]
    texts = [len(d["payload"]["text"]) for d in fill_drafts]
    R["data"] = {
        "n": args.n,
        "owner": PRINCIPAL,
        "scope": SCOPE,
        "replication_policy": POLICY,
        "generate_s": time.perf_counter() - t0,
        "text_chars_mean": statistics.fmean(texts),
        "text_chars_min": min(texts),
        "text_chars_max": max(texts),
        "embedder": "hash",
    }
    filled = fill(a, bid, fill_drafts)
    R["fill"] = filled.stats
    last_id = filled.ids[-1]
    # the limits of the sync, measured just before it (the machine may be shared: close in time, close in load)
    R["reference"] = {
        "local_put": {"s": R["fill"]["put_s"], "per_s": R["fill"]["put_per_s"]},
        "accept": accept_in_process(copy, bid, a.node_id, filled.objects),
        "raw_tcp": raw_tcp(filled.objects),
    }
    R["loadavg_sync"] = [os.getloadavg()]

    with daemon(a, "--p2p", "/ip4/127.0.0.1/tcp/0") as da:
        da.wait_serving(120)
        stack = contextlib.ExitStack()
        with stack:

            def start_b(via: str) -> Daemon:
                return stack.enter_context(daemon(b, "--peer", via))

            R["sync"], proxy, db = initial_sync(a, b, da, start_b, last_id, args.n, args)
            R["loadavg_sync"].append(os.getloadavg())
            stack.callback(proxy.close)
            db.wait_serving(60)
            ka, kb = len(da.lines), len(db.lines)
            R["latency"] = change_latency(a, b, proxy, drafts, fill_drafts[: args.edits], args)
            R["latency"]["server_ms"] = {
                "a_put": summary(call_ms(da.lines[ka:], "Put")),
                "b_get": summary(call_ms(db.lines[kb:], "Get")),
            }
            R["wire_total"] = proxy.counts()
            R["daemon_b"] = db.stop()
            R["errors_b"] = db.errors()
        R["daemon_a"] = da.stop()
        R["errors_a"] = da.errors()
    R["verify"] = verify(a, b, filled.ids, fill_drafts)
    R["reference"].update(
        tcp_rtt_ms=tcp_rtt(args.rtt_rounds, via_proxy=False),
        proxy_tcp_rtt_ms=tcp_rtt(args.rtt_rounds, via_proxy=True),
        p2p_rtt_ms=p2p_rtt(args.rtt_rounds),
    )
    R["reference"]["single"] = single_changes(
        a, copy, bid, args.n, R["latency"]["order"], drafts, max(20, min(200, args.changes))
    )
    log(
        "round trips of 100 B, p50: TCP {:.3f} ms, through the proxy {:.3f} ms, libp2p frames {:.3f} ms".format(
            *(R["reference"][k]["p50"] for k in ("tcp_rtt_ms", "proxy_tcp_rtt_ms", "p2p_rtt_ms"))
        )
    )
    R["loadavg_end"] = os.getloadavg()
    S = R["sync"]
    C = R["fill"]["object_bytes"]
    wire = S["wire"]["a_to_b"] + S["wire"]["b_to_a"]
    ap = S["a_status"]["peer"]
    proto = ap.get("bytes_out", 0) + ap.get("bytes_in", 0)
    at, bt = S["a_status"]["transport"], S["b_status_repl"]["transport"]
    transport = at.get("bytes_sent", 0) + at.get("bytes_received", 0)
    R["bytes"] = {
        "ciphertext": C,
        "wire": wire,
        "wire_a_to_b": S["wire"]["a_to_b"],
        "wire_b_to_a": S["wire"]["b_to_a"],
        "protocol_frames": proto,
        "protocol_a_to_b": ap.get("bytes_out", 0),
        "protocol_b_to_a": ap.get("bytes_in", 0),
        "transport_frames": transport,
        "transport_b_sent": bt.get("bytes_sent", 0),
        "ratio_wire": wire / C,
        "ratio_wire_a_to_b": S["wire"]["a_to_b"] / C,
        "ratio_protocol": proto / C,
        "ratio_transport": transport / C,
        "per_asset_wire": wire / args.n,
        "per_asset_protocol_overhead": (proto - C) / args.n,
        "per_asset_transport_overhead": (transport - proto) / args.n,
        "per_asset_security_mux_overhead": (wire - transport) / args.n,
    }
    ref = R["reference"]
    R["ratios"] = {
        "sync_vs_accept": S["sync_s"] / ref["accept"]["s"],
        "sync_vs_local_put": S["sync_s"] / ref["local_put"]["s"],
        "sync_vs_raw_tcp": S["sync_s"] / ref["raw_tcp"]["s"],
    }
    lat = R["latency"].get("unpolled") or R["latency"].get("new")
    if lat and lat["messages_ms"]["ack"]:  # a change takes two round trips: Have/Need and Send/Ack
        R["ratios"]["ack_vs_two_p2p_rtt"] = lat["messages_ms"]["ack"]["p50"] / (2 * ref["p2p_rtt_ms"]["p50"])
    return R


# -- report ----------------------------------------------------------------------------------------------------------


def _ms(x: dict[str, float], q: str = "p50") -> str:
    return f"{x[q]:.1f}" if x else "—"


def _p(x: dict[str, float]) -> str:
    return f"{x['p50']:.1f} / {x['p99']:.1f}" if x else "—"


def _p3(x: dict[str, float]) -> str:
    return f"{x['p50']:.3f} / {x['p99']:.3f}" if x else "—"


def _mb(n: float) -> str:
    return f"{n / 1e6:.3f}"


def render(R: dict[str, Any]) -> str:
    A, D, F, S, B, L, ref, m = (
        R["args"],
        R["data"],
        R["fill"],
        R["sync"],
        R["bytes"],
        R["latency"],
        R["reference"],
        R["machine"],
    )
    code, n = R["code"], D["n"]
    ratios, srv, one = R["ratios"], R["latency"]["server_ms"], R["reference"]["single"]
    ap, bp = S["a_status"]["peer"], S["b_status_repl"]["peer"]
    cpu_a, cpu_b = S["cpu"]["a"], S["cpu"]["b"]
    argline = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in A.items() if v not in (None, False))
    argline += " --quick" if A.get("quick") else ""
    lat_rows = []
    for kind in KINDS:
        x = L.get(kind)
        if not x:
            continue
        msg, steps = x["messages_ms"], x["steps_ms"]
        readable = _p(x["visible_ms"])
        lat_rows.append(
            f"| {x['what']} | {x['changes']} | {_p(x['put_ms'])} | {_ms(msg['have'])} | {_ms(msg['need'])} | "
            f"{_ms(msg['send'])} | **{_p(msg['ack'])}** | **{readable}** | {_ms(steps['b_ack_to_visible'])} |"
        )
    step_rows = []
    for kind in KINDS:
        x = L.get(kind)
        if not x:
            continue
        st = x["steps_ms"]
        step_rows.append(
            f"| {kind} | {_p(st['a_put_to_have'])} | {_p(st['b_have_to_need'])} | {_p(st['a_need_to_send'])} | "
            f"{_p(st['b_send_to_ack'])} | {_p(x['poll_gap_ms'])} |"
        )
    per = lambda v: f"{v / n:,.1f}"  # noqa: E731
    byte_rows = [
        f"| ciphertext: the {n:,} objects A sealed | {_mb(B['ciphertext'])} | — | {_mb(B['ciphertext'])} | "
        f"{per(B['ciphertext'])} | 1.000× |",
        f"| sync-protocol frames (engines' counters) | {_mb(B['protocol_a_to_b'])} | {_mb(B['protocol_b_to_a'])} | "
        f"{_mb(B['protocol_frames'])} | {per(B['protocol_frames'])} | {B['ratio_protocol']:.3f}× |",
        f"| transport frames (+ u32 length each; libp2p host counters) | — | — | {_mb(B['transport_frames'])} | "
        f"{per(B['transport_frames'])} | {B['ratio_transport']:.3f}× |",
        f"| **TCP payload (the proxy)** | {_mb(B['wire_a_to_b'])} | {_mb(B['wire_b_to_a'])} | **{_mb(B['wire'])}** | "
        f"{per(B['wire'])} | **{B['ratio_wire']:.3f}×** |",
    ]
    lines = [
        f"# Replication benchmark: two daemons over libp2p on loopback, N = {n:,}",
        "",
        f"{m['date']} · {m['nproc']} cores · Python {m['python']} · "
        + " · ".join(f"{k} {v}" for k, v in m["packages"].items())
        + f" · temp fs {m['tmp_fs']}",
        "",
        f"Args: `{argline}`. Code: commit {code['commit']}"
        + (
            f" + uncommitted changes to {', '.join(code['dirty'])} (digest {code['dirty_digest']})."
            if code["dirty"]
            else ", clean."
        ),
        "",
        f"Data: {n:,} seeded assets of {PRINCIPAL} on A ({SCOPE}, replication_policy {POLICY}; text "
        f"{D['text_chars_min']}–{D['text_chars_max']} characters, mean {D['text_chars_mean']:.0f}; one to three "
        f"entities and tags), embedder **hash** on both nodes. A and B are paired as {PRINCIPAL}'s devices (the "
        f"`devices` boundary; what `gaml pair` does). The assets were written into A's store in process before any "
        f"daemon ran (`Node.put`, batches of {BATCH}: {F['put_s']:.2f} s, {F['put_per_s']:,.0f}/s), and A's replica "
        f"sealed one snapshot object each (`Replica.pump`: {F['pump_s']:.2f} s, {F['pump_per_s']:,.0f}/s; objects "
        f"{F['object_bytes_min']}–{F['object_bytes_max']} B, mean {F['object_bytes_mean']:.0f} B, of which the "
        f"Automerge document {F['doc_bytes_mean']:.0f} B). Each daemon is a child process "
        "(`python -m gaml.node.cli run`); "
        f"B dials A through a TCP proxy of the benchmark that counts and timestamps every byte.",
        "",
        "| measure | value | reference (same run) | ratio |",
        "|---|---:|---:|---:|",
        f"| **initial sync of {n:,} assets**, from the connection until B holds all (s) | **{S['sync_s']:.2f}** "
        f"({S['per_s']:,.0f}/s) | in-process `Replica.accept` of the same objects on B's home: "
        f"{ref['accept']['s']:.2f} ({ref['accept']['per_s']:,.0f}/s) | {ratios['sync_vs_accept']:.2f}× |",
        f"| — against the local write limit | | `Node.put` of the same drafts: {ref['local_put']['s']:.2f} "
        f"({ref['local_put']['per_s']:,.0f}/s) | {ratios['sync_vs_local_put']:.2f}× |",
        f"| — against the transport limit | | the same objects over a plain loopback TCP socket: "
        f"{1000 * ref['raw_tcp']['s']:.1f} ms ({ref['raw_tcp']['mb_per_s']:,.0f} MB/s) | "
        f"{ratios['sync_vs_raw_tcp']:,.0f}× |",
        f"| — B's Ack of the last batch at the proxy (s after the connection) | {S['last_ack_s']:.2f} | | |",
        f"| — from B's process start (s; B connected after {S['b_connected_s']:.2f}) | "
        f"{S['sync_from_b_start_s']:.2f} | | |",
        f"| **bytes on the wire / ciphertext bytes** (target ≤ 1.5×) | **{B['ratio_wire']:.3f}×** | "
        f"{_mb(B['wire'])} MB / {_mb(B['ciphertext'])} MB | |",
    ]
    for kind in ("new", "edit", "unpolled"):
        x = L.get(kind)
        if x:
            ack = x["messages_ms"]["ack"]
            lines.append(
                f"| **change latency**, {x['what']}: B's Ack p50 / p99 (ms); readable through Get p50 / p99 (ms) | "
                f"**{_p(ack)}**; {_p(x['visible_ms'])} | {x['changes']} changes; Put round trip on A "
                f"{_ms(x['put_ms'])} ms | |"
            )
    lines += [
        "",
        "## 1. Initial sync",
        "",
        f"B's daemon started with A's multiaddr (rewritten to the proxy) as `--peer`; it connected "
        f"{S['b_connected_s']:.2f} s after its process started (imports, opening the node; it served gRPC after "
        f"{S['b_serving_s']:.2f} s). The clock runs from the proxy's first byte. *Done* is the return of the first "
        f"`Client.get` of the last asset of A's log that finds it on B (polled every {S['poll_ms']:.0f} ms over B's "
        f"Unix socket; {S['polls']} polls missed). A Get waits on B's core thread behind the batch being "
        f"accepted (Get round trips during the sync: p50 {_ms(S['get_ms'])} ms, max {_ms(S['get_ms'], 'max')} ms), "
        "so the "
        f"successful poll returns right after the commit that made the asset readable; the proxy agrees: A's last Send "
        f"finished arriving at {S['last_send_s']:.2f} s, B's next frame (written after it committed that batch) "
        f"passed at {S['last_ack_s']:.2f} s, the link's last byte (B's offer back, below) at "
        f"{S['last_byte_s']:.2f} s. Progress (s, assets on B, from B's status file, written once a second): "
        + (", ".join(f"{t:.1f}: {c:,}" for t, c in S["progress"]) or "none before the end")
        + ".",
        "",
        f"CPU seconds from the connection until done ({S['sync_s']:.2f} s), per thread (`/proc/PID/task`): B's core "
        f"thread (sync engine, replica, store) **{cpu_b['core_thread']:.2f}** "
        f"({100 * cpu_b['core_thread'] / S['sync_s']:.0f}% of the wall time), B's loop thread (libp2p, noise, yamux, "
        f"trio, gRPC) {cpu_b['loop_thread']:.2f}, other {cpu_b['other']:.2f}; A's core {cpu_a['core_thread']:.2f}, "
        f"loop {cpu_a['loop_thread']:.2f}.",
        "",
        f"After the sync every one of the {n:,} assets was on B with A's payload, and both replicas held the same "
        f"current objects ({R['verify']['states_equal']}); B's status counted {S['b_status']['assets']:,} assets. "
        f"B's engine: {bp.get('objects_accepted', 0):,} objects accepted, {bp.get('objects_rejected', 0)} rejected, "
        f"{bp.get('retries', 0)} retries, {bp.get('frames_in', 0)} frames in, {bp.get('frames_out', 0)} out.",
        "",
        "## 2. Bytes",
        "",
        "From the connection until the link had been quiet for a second (the whole initial sync, both directions):",
        "",
        "| layer | A→B (MB) | B→A (MB) | total (MB) | bytes per asset | × ciphertext |",
        "|---|---:|---:|---:|---:|---:|",
        *byte_rows,
        "",
        f"Sync-protocol overhead {B['per_asset_protocol_overhead']:.1f} B per asset: each id travels in A's Have "
        f"(32 B) and B's Need (32 B), each object costs a few bytes of Send framing, and B offers back what it "
        f"received: A heard {ap.get('ids_heard', 0):,} ids in B's Have frames (B's log holds each received object "
        f"as current, so its cursor for A walks over all of them; A needs none and acknowledges). Transport framing "
        f"{B['per_asset_transport_overhead']:.2f} B per asset (a 4-byte length per frame; frames are large). Noise, "
        f"yamux, multistream and identify {B['per_asset_security_mux_overhead']:.1f} B per asset (wire − transport "
        f"frames; yamux answers every data frame with a 30-byte window update).",
        "",
        "## 3. Change latency",
        "",
        f"Both daemons connected and idle (a quiet link for {1000 * CHANGE_QUIET_S:.0f} ms and a seeded pause of up to "
        f"250 ms before each change; the series interleaved). A change is one `Client.put` of one draft on A's socket; "
        "the clock starts when the Put is issued. The proxy timestamps the four messages that carry it (Have A→B, "
        "Need B→A, Send A→B, Ack B→A; yamux window updates skipped); B writes its Ack after it committed the asset, "
        f"so the Ack is the exact arrival. *Readable* is the first `Client.get` on B's socket that returns it (polled "
        f"{L['poll_ms']:.0f} ms apart; each poll occupies B's core for one Get, so polling delays B a little: compare "
        f"the unpolled series). Unpolled changes whose one Get after the Ack did not find them: "
        f"{L['unreadable_at_ack']}.",
        "",
        "| change | count | Put round trip p50 / p99 | Have leaves A p50 | Need p50 | Send p50 | **Ack (B committed) "
        "p50 / p99** | **readable on B p50 / p99** | Ack → readable p50 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *lat_rows,
        "",
        "References in the same run, round trips of 100 bytes (p50 / p99, ms): plain loopback TCP to an echo thread "
        f"{_p3(ref['tcp_rtt_ms'])}; the same through the proxy {_p3(ref['proxy_tcp_rtt_ms'])} (the proxy's share of "
        "the figures above: half the difference per message); libp2p frames between two `crdt.p2p.P2PHost`s in one "
        f"plain trio process (noise, yamux, framing; no engine, core thread or guest mode) {_p3(ref['p2p_rtt_ms'])}. "
        "A change needs two round trips (Have/Need, Send/Ack), so the transport floor of the Ack is about "
        f"{2 * ref['p2p_rtt_ms']['p50']:.1f} ms"
        + (
            f"; the {'unpolled' if L.get('unpolled') else 'new'} series' Ack p50 is "
            f"{ratios['ack_vs_two_p2p_rtt']:.1f}× that."
            if "ack_vs_two_p2p_rtt" in ratios
            else "."
        )
        + f" The daemons' own time per call (their `call` log lines, p50 / p99 ms): A's Put {_p(srv['a_put'])}, "
        f"B's Get {_p(srv['b_get'])}.",
        "",
        "Steps (ms, p50 / p99): A from the Put's return to its Have (pump, seal, tick), B from the Have to its Need, A "
        "from the Need to its Send (reads the object), B from the Send to its Ack (open, merge, materialize, commit); "
        "and the interval between successive Gets of the polled series:",
        "",
        "| change | A: Put returned → Have | B: Have → Need | A: Need → Send | B: Send → Ack | Get poll interval |",
        "|---|---:|---:|---:|---:|---:|",
        *step_rows,
        f"| the work alone, in process (no daemon) | `Replica.pump` {_p(one['a_pump_ms'])} | | | "
        f"`Replica.accept` of one object: new {_p(one['b_accept_new_ms'])}, edit {_p(one['b_accept_edit_ms'])} | |",
        "",
        f"In process, `Node.put` of one draft on A took {_p(one['a_put_ms'])} ms (the Put round trip above adds gRPC, "
        "the Unix-socket gate and the core lane).",
        "",
        f"Load average (1, 5, 15 min) {' / '.join(f'{x:.2f}' for x in R['loadavg_start'])} at the start, "
        f"{' / '.join(f'{x:.2f}' for x in R['loadavg_sync'][0])} before the sync (after the in-process references), "
        f"{' / '.join(f'{x:.2f}' for x in R['loadavg_sync'][1])} after it, "
        f"{' / '.join(f'{x:.2f}' for x in R['loadavg_end'])} at the end ({m['nproc']} cores). Daemons: A served "
        f"{R['daemon_a'].get('calls')} calls (core busy {R['daemon_a'].get('core_busy_s')} s), B "
        f"{R['daemon_b'].get('calls')} (core busy {R['daemon_b'].get('core_busy_s')} s; the core lane's wall time "
        "for gRPC calls and replication).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
