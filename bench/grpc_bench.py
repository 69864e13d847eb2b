"""gRPC benchmark: ``Hydrate`` latency and ``Put`` throughput over the daemon's transports against the same calls
in-process, on one node home of N assets.

::

    .venv/bin/python -m gaml.bench.grpc_bench [--n 100000] [--seed 0] [--out bench/results] [--embedder hash|minilm]
                                         [--transport unix|mtls|both] [--puts 500] [--batches 10] [--batch-size 100]
                                         [--clients 4] [--goals 200] [--warmup 20] [--budget 2000]

Data: a fresh node home (``node.home.init_home``, the hash embedder by default) in a short temporary directory under
/tmp (a Unix socket's path is at most 107 bytes), filled with ``--n`` seeded synthetic assets owned by the local
principal ``alice`` (``user_private``: one partition): fact-like sentences from a seeded Zipf vocabulary (as in
``bench.store_bench``) with one to three entities and tags. The fill goes through the in-process core
(``Node.put_stream`` in batches of ``--fill-batch``, then ``Node.checkpoint()`` for the index); it is timed apart from
every measure. The home's rate limit is lifted (``config.toml`` ``limits``) so that the limiter, which would refuse a
burst of more than 400 calls, does not become the measure.

Measured, in this order, so that every ``Hydrate`` sees the same N assets:

1. in-process: the node opened and ``node.service.MemoryService`` built exactly as ``Daemon._open`` builds it
   (``open_node`` + ``memory_layers`` + ``MemoryService``); ``service.hydrate(alice, goal, budget, now)`` for
   ``--goals`` seeded goals after ``--warmup`` untimed ones. The node is then closed (checkpoint).
2. the daemon as a child process (``python -m gaml.node.cli --home H run``, unlocked by ``GAML_KEYCHAIN_KEY``; with mTLS
   also ``--listen 127.0.0.1:0`` after ``node.certs.init_ca`` + ``issue_client`` for alice), per transport
   (``Client.unix``, ``Client.mtls``): the gRPC round-trip floor (standard health ``Check``: gate, TLS and gRPC, no
   core call), then ``Client.hydrate`` for the same goals (same warm-up).
3. per transport: ``Client.put`` of one draft per call (``--puts`` calls, sequential, one client), of
   ``--batch-size`` drafts per call (``--batches`` calls), and of one draft per call from ``--clients`` concurrent
   clients (threads of this process, each its own connection) splitting ``--puts`` calls between them. The daemon
   is stopped (SIGTERM, graceful: it checkpoints).
4. in-process again: ``service.put(alice, [draft], now)`` (``--puts`` calls) and ``--batches`` puts of
   ``--batch-size`` drafts. Every put anywhere stores new drafts (none repeats a stored one).

Ratios are gRPC / in-process: above 1 for a latency means slower, below 1 for a throughput means fewer per second.
The overhead per call is the difference of the medians (gRPC − in-process). The daemon logs each call with its
server-side milliseconds (admission, the wait for and the work on the core thread, not the gate's splice nor the
client's encoding); their medians split the overhead between the wire and the daemon.

Results: a Markdown table on stdout and in ``OUT/grpc.md``, the raw numbers in ``OUT/grpc.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gaml.bench.retrieve_bench import code_version
from gaml.bench.store_bench import TYPES, Corpus, bar, log, pct, rate, run_and_write
from gaml.node.core.service import MemoryService
from gaml.node.home import init_home, make_counter, memory_layers, open_node, read_config, write_config
from gaml.node.serve.client import Client, _struct_json
from gaml.node.serve.daemon import MAX_UNIX_PATH
from gaml.node.serve.servicer import _struct, draft_from_pb
from gaml.node.shells import certs
from gaml.node.shells.file_keychain import FileKeychain, Unlock
from gaml.policy import crypto
from gaml.proto.convert import draft_pb_from_json
from gaml.v1 import memory_pb2

ROOT = Path(__file__).resolve().parents[1]
PRINCIPAL = "alice"
SCOPE = "user_private"
SERVICE = "gaml.v1.Memory"
FILL_SPACING_US = 60_000_000  # one minute between the fill's assets, ending just before the run
CODEC_SAMPLES = 50  # hydrations whose response is encoded and decoded again, alone, for the codec's share
NO_RATE_LIMIT = {"calls_per_second": 1_000_000.0, "burst": 1_000_000}


def now_us() -> int:
    return time.time_ns() // 1000


def summary(xs: Sequence[float]) -> dict[str, float]:
    return {"p50": pct(xs, 50), "p99": pct(xs, 99), "mean": statistics.fmean(xs)} if xs else {}


def measure(lat_ms: list[float], items_per_call: int, wall_s: float, **extra: Any) -> dict[str, Any]:
    """One measurement: calls, items, wall time, items per second, and the per-call latency summary and samples."""
    return {
        "calls": len(lat_ms),
        "items": len(lat_ms) * items_per_call,
        "wall_s": wall_s,
        "per_s": rate(len(lat_ms) * items_per_call, wall_s),
        "calls_per_s": rate(len(lat_ms), wall_s),
        "ms": summary(lat_ms),
        **extra,
        "lat_ms": [round(x, 4) for x in lat_ms],
    }


# -- data ------------------------------------------------------------------------------------------------------------


class Drafts:
    """Seeded drafts owned by alice (user_private) and seeded hydration goals near them."""

    def __init__(self, seed: int) -> None:
        self.corpus = Corpus(seed)
        self.rng = random.Random(f"grpc-{seed}")
        self.texts: set[str] = set()

    def draft(self, created_at: int | None = None) -> dict[str, Any]:
        r, c = self.rng, self.corpus
        text = c.sentence()
        while text in self.texts:  # a repeated text is the same asset: its put would be a no-op
            text = c.sentence()
        self.texts.add(text)
        d: dict[str, Any] = {
            "asset_type": r.choices([t for t, _ in TYPES], weights=[w for _, w in TYPES])[0],
            "payload": {"text": text},
            "owner_id": PRINCIPAL,
            "privacy_scope": SCOPE,
            "entities": r.sample(c.entities, r.randint(1, 3)),
            "tags": r.sample(c.tags, r.randint(1, 3)),
            "confidence_score": round(r.uniform(0.5, 1.0), 3),
        }
        if created_at is not None:
            d["created_at"] = created_at
        return d

    def goal(self, near: dict[str, Any]) -> str:
        """A goal near a stored asset: most of its words, a word or two more, and one of its entities half the time."""
        g = self.corpus.query(near["payload"]["text"])
        if self.rng.random() < 0.5:
            g = f"what do we know about {self.rng.choice(near['entities'])}: {g}"
        return g


# -- the home --------------------------------------------------------------------------------------------------------


@dataclass
class Home:
    path: Path
    unlock: Unlock
    key_hex: str
    client: tuple[bytes, bytes, bytes] | None = None  # alice's key, certificate and CA (mTLS)

    @property
    def socket(self) -> Path:
        return self.path / "run" / "gaml.sock"


def make_home(base: Path, embedder: str, tls: bool) -> Home:
    key = secrets.token_bytes(32)
    home = Home(base / "h", Unlock(key=key), key.hex())
    if len(os.fsencode(home.socket)) > MAX_UNIX_PATH:
        raise SystemExit(f"the socket path {home.socket} is over {MAX_UNIX_PATH} bytes: give a shorter --tmp")
    init_home(home.path, home.unlock, embedder=embedder)
    cfg = read_config(home.path, overrides=False)
    cfg["limits"] = NO_RATE_LIMIT
    write_config(home.path, cfg)
    if tls:
        kc = FileKeychain.open(home.path / "keychain.json", home.unlock, crypto.SystemEntropy())
        now_s = int(time.time())  # TLS checks certificate dates against the real clock
        certs.init_ca(home.path, kc, now_s)
        out = base / "c"
        out.mkdir(mode=0o700)
        certs.issue_client(home.path, kc, PRINCIPAL, out, now_s)
        home.client = certs.load_client(*certs.client_paths(out, PRINCIPAL))
    return home


def fill(home: Home, drafts: Sequence[dict[str, Any]], batch: int) -> dict[str, Any]:
    """The N assets through the in-process core (``Node.put_stream``), then the index (``Node.checkpoint``)."""
    t0 = time.perf_counter()
    node = open_node(home.path, home.unlock)
    t_open = time.perf_counter() - t0
    try:
        with bar(len(drafts), f"fill (put_stream, batches of {batch})") as pb:
            t0 = time.perf_counter()
            ids = node.put_stream(drafts, now_us(), batch=batch, progress=pb.update)
            t_put = time.perf_counter() - t0
        if len(set(ids)) != len(drafts):
            raise RuntimeError(f"the fill stored {len(set(ids))} distinct assets, not {len(drafts)}")
        log(f"filled {len(drafts):,} in {t_put:.1f} s ({1000 * t_put / len(drafts):.2f} s per 1,000); checkpoint …")
        t0 = time.perf_counter()
        snaps = node.checkpoint()
        t_ckpt = time.perf_counter() - t0
        emb = {"embedder": node.embedder.id, "dim": node.embedder.dim}
    finally:
        node.close(checkpoint=False)
    log(f"checkpoint (index build + {snaps} snapshots) {t_ckpt:.1f} s")
    return {
        "open_s": t_open,
        "put_stream_s": t_put,
        "put_per_s": rate(len(drafts), t_put),
        "s_per_1000": 1000 * t_put / len(drafts),
        "checkpoint_s": t_ckpt,
        "checkpoint_s_per_1000": 1000 * t_ckpt / len(drafts),
        "snapshots": snaps,
        "batch": batch,
        **emb,
    }


@contextlib.contextmanager
def in_process(home: Home) -> Iterator[tuple[MemoryService, Any]]:
    """The node and its service, built as ``Daemon._open`` builds them; closed (with a checkpoint) afterwards."""
    node = open_node(home.path, home.unlock)
    try:
        ingestor, ladder = memory_layers(home.path, node)
        svc = MemoryService(node, ingestor, ladder, make_counter)
        yield svc, svc.ensure_user(PRINCIPAL)
    finally:
        node.close(checkpoint=True)


# -- the daemon ------------------------------------------------------------------------------------------------------


@dataclass
class Daemon:
    """``gaml --home H run`` in a child process, its log lines (JSON) read by a thread."""

    process: subprocess.Popen[str]
    serving: dict[str, Any]
    startup_s: float
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def entries(self) -> list[dict[str, Any]]:
        out = []
        for line in self.lines:
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out


@contextlib.contextmanager
def daemon(home: Home, listen: bool) -> Iterator[Daemon]:
    # ROOT first, then what the caller had (a tree of links to another checkout, to measure that code)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "GAML_KEYCHAIN_KEY": home.key_hex, "PYTHONPATH": path}
    env.pop("GAML_PASSPHRASE", None)
    cmd = [sys.executable, "-m", "gaml.node.cli", "--home", str(home.path), "run", "--principal", PRINCIPAL]
    if listen:
        cmd += ["--listen", "127.0.0.1:0"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT
    )
    try:
        assert proc.stderr is not None
        seen: list[str] = []
        serving = _read_until(proc.stderr, seen, "serving")
        d = Daemon(proc, serving, time.perf_counter() - t0)
        d.reader = threading.Thread(target=_read_rest, args=(proc.stderr, d.lines), daemon=True)
        d.reader.start()
        log(f"daemon pid {proc.pid} serves after {d.startup_s:.1f} s: {serving.get('socket')} {serving.get('listen')}")
        yield d
        proc.send_signal(signal.SIGTERM)
        proc.wait(600)
        d.reader.join(30)
        if proc.returncode != 0:
            raise RuntimeError(f"the daemon exited with {proc.returncode}: {d.lines[-5:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(60)


def _read_until(stream: IO[str], seen: list[str], event: str) -> dict[str, Any]:
    for line in stream:
        seen.append(line)
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("event") == event:
                return entry
    raise RuntimeError(f"the daemon exited before logging {event!r}: {''.join(seen[-10:])}")


def _read_rest(stream: IO[str], lines: list[str]) -> None:
    for line in stream:
        lines.append(line)


def connect(home: Home, transport: str, listen: str | None, *, own_connection: bool = False) -> Client:
    """``Client.unix`` / ``Client.mtls`` as an agent makes them; ``own_connection`` keeps gRPC from sharing one
    connection between clients of this process (each concurrent client is its own agent)."""
    if not own_connection:
        if transport == "unix":
            c = Client.unix(home.socket)
        else:
            assert home.client is not None and listen
            c = Client.mtls(listen, *home.client)
    else:
        opts = [
            ("grpc.max_receive_message_length", 64 << 20),
            ("grpc.max_send_message_length", 64 << 20),
            ("grpc.use_local_subchannel_pool", 1),
        ]
        if transport == "unix":
            creds = grpc.local_channel_credentials(grpc.LocalConnectionType.UDS)
            c = Client(grpc.secure_channel(f"unix:{home.socket}", creds, options=opts))
        else:
            assert home.client is not None and listen
            key, cert, ca = home.client
            creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
            c = Client(grpc.secure_channel(listen, creds, options=opts))
    c.wait_ready(60)
    return c


# -- measures --------------------------------------------------------------------------------------------------------


def time_calls(
    items: Sequence[Any], call: Callable[[Any], Any], desc: str, on_result: Callable[[Any], None] | None = None
) -> tuple[list[float], float]:
    """Call ``call(item)`` for each item in turn: per-call milliseconds and the wall time of the whole run."""
    lat: list[float] = []
    pc = time.perf_counter
    with bar(len(items), desc) as pb:
        start = pc()
        for it in items:
            t0 = pc()
            out = call(it)
            lat.append(1000 * (pc() - t0))
            if on_result is not None:
                on_result(out)
            pb.update(1)
        wall = pc() - start
    return lat, wall


class HydrationStats:
    """What the frames held (a check that each path did the same work): tokens spent, facts, paths."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.facts: list[int] = []
        self.paths: dict[str, int] = {}

    def add(self, receipt: dict[str, Any]) -> None:
        self.tokens.append(int(receipt["budget"]["spent"]))
        self.facts.append(len(receipt.get("facts", [])))
        self.paths[receipt["path"]] = self.paths.get(receipt["path"], 0) + 1

    def to_json(self) -> dict[str, Any]:
        return {
            "tokens_mean": statistics.fmean(self.tokens) if self.tokens else 0.0,
            "facts_mean": statistics.fmean(self.facts) if self.facts else 0.0,
            "empty_frames": sum(1 for f in self.facts if f == 0),
            "paths": self.paths,
        }


def hydrate_in_process(
    svc: MemoryService, alice: Any, goals: Sequence[str], warmup: Sequence[str], budget: int, samples: list[Any]
) -> dict[str, Any]:
    for g in warmup:
        svc.hydrate(alice, g, budget, now_us())
    st = HydrationStats()

    def keep(h: Any) -> None:
        st.add(h.receipt)
        if len(samples) < CODEC_SAMPLES:
            samples.append(h)

    lat, wall = time_calls(goals, lambda g: svc.hydrate(alice, g, budget, now_us()), "in-process hydrate", keep)
    return measure(lat, 1, wall, frames=st.to_json())


def codec(hydrations: Sequence[Any], drafts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The protobuf share of the overhead, timed alone in this process (no I/O): a HydrateResponse built as the
    servicer builds it and serialized, then parsed and read back as ``Client.hydrate`` does; drafts encoded as
    ``Client.put`` encodes them and decoded as the servicer decodes them."""
    pc = time.perf_counter
    enc: list[float] = []
    dec: list[float] = []
    size: list[int] = []
    for h in hydrations:
        r = h.receipt
        t0 = pc()
        wire = memory_pb2.HydrateResponse(
            frame=h.frame,
            receipt_id=r["receipt"],
            tokens=r["budget"]["spent"],
            path=r["path"],
            fallback=r["fallback"] or "",
            receipt=_struct(r),
        ).SerializeToString()
        t1 = pc()
        got = memory_pb2.HydrateResponse.FromString(wire)
        _struct_json(got.receipt)
        t2 = pc()
        enc.append(1000 * (t1 - t0))
        dec.append(1000 * (t2 - t1))
        size.append(len(wire))
    t0 = pc()
    wire = memory_pb2.PutRequest(assets=[draft_pb_from_json(d) for d in drafts]).SerializeToString()
    t1 = pc()
    for a in memory_pb2.PutRequest.FromString(wire).assets:
        draft_from_pb(a)
    t2 = pc()
    return {
        "hydrate_samples": len(hydrations),
        "hydrate_response_bytes": statistics.fmean(size) if size else 0.0,
        "hydrate_server_encode_ms": summary(enc),
        "hydrate_client_decode_ms": summary(dec),
        "put_drafts": len(drafts),
        "put_request_bytes_per_draft": len(wire) / len(drafts),
        "put_client_encode_us_per_draft": 1e6 * (t1 - t0) / len(drafts),
        "put_server_decode_us_per_draft": 1e6 * (t2 - t1) / len(drafts),
    }


def hydrate_grpc(c: Client, transport: str, goals: Sequence[str], warmup: Sequence[str], budget: int) -> dict[str, Any]:
    for g in warmup:
        c.hydrate(g, budget)
    st = HydrationStats()
    lat, wall = time_calls(
        goals, lambda g: c.hydrate(g, budget), f"{transport} Hydrate", lambda h: st.add(h["receipt"])
    )
    return measure(lat, 1, wall, frames=st.to_json())


def floor_grpc(c: Client, transport: str, calls: int, warmup: int) -> dict[str, Any]:
    """The gRPC round trip with no core call: the standard health ``Check`` on the same connection."""
    stub = health_pb2_grpc.HealthStub(c.channel)
    req = health_pb2.HealthCheckRequest(service=SERVICE)
    for _ in range(warmup):
        stub.Check(req, timeout=60)
    lat, wall = time_calls(range(calls), lambda _: stub.Check(req, timeout=60), f"{transport} health Check")
    return measure(lat, 1, wall)


def put_check(expected: int) -> Callable[[Sequence[str]], None]:
    def check(ids: Sequence[str]) -> None:
        if len(ids) != expected:
            raise RuntimeError(f"a put returned {len(ids)} ids for {expected} drafts")

    return check


def puts(call: Callable[[list[dict[str, Any]]], Sequence[str]], chunks: list[list[dict[str, Any]]], desc: str) -> Any:
    lat, wall = time_calls(chunks, call, desc, put_check(len(chunks[0])))
    return measure(lat, len(chunks[0]), wall)


def concurrent_puts(
    home: Home, transport: str, listen: str | None, per_client: list[list[dict[str, Any]]]
) -> dict[str, Any]:
    """Each client (a thread, its own connection) puts its drafts one per call; all start together."""
    clients = [connect(home, transport, listen, own_connection=True) for _ in per_client]
    n = len(per_client)
    barrier = threading.Barrier(n + 1)
    lat: list[list[float]] = [[] for _ in range(n)]
    ends: list[float] = [0.0] * n
    errors: list[BaseException] = []
    pb = bar(sum(len(d) for d in per_client), f"{transport} Put x{n} clients")
    lock = threading.Lock()

    def work(i: int) -> None:
        try:
            c, mine = clients[i], per_client[i]
            barrier.wait()
            for d in mine:
                t0 = time.perf_counter()
                ids = c.put([d])
                lat[i].append(1000 * (time.perf_counter() - t0))
                if len(ids) != 1:
                    raise RuntimeError(f"a put returned {len(ids)} ids for 1 draft")
                with lock:
                    pb.update(1)
            ends[i] = time.perf_counter()
        except BaseException as e:
            errors.append(e)
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.abort()

    threads = [threading.Thread(target=work, args=(i,), name=f"bench-client-{i}") for i in range(n)]
    for t in threads:
        t.start()
    try:
        barrier.wait()
        start = time.perf_counter()
    except threading.BrokenBarrierError:
        start = time.perf_counter()
    for t in threads:
        t.join()
    pb.close()
    for c in clients:
        c.close()
    if errors:
        raise errors[0]
    wall = max(ends) - start
    out = measure([x for xs in lat for x in xs], 1, wall, clients=n)
    out["per_client_ms_p50"] = [pct(xs, 50) for xs in lat]
    return out


# -- the daemon's log ------------------------------------------------------------------------------------------------


class CallPlan:
    """The calls issued to the daemon, in order per (method, transport), so its per-call log lines can be attributed
    to the measurements they belong to."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, str, str, int]] = []  # (method, transport, label, calls)

    def add(self, method: str, transport: str, label: str, calls: int) -> None:
        self.steps.append((method, transport, label, calls))

    def attribute(self, entries: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """{"transport/label": {"calls", "ms": p50/p99/mean, "outcomes"}} from the daemon's ``call`` lines."""
        by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for e in entries:
            if e.get("event") == "call":
                by_key.setdefault((e.get("method", "?"), e.get("transport", "?")), []).append(e)
        out: dict[str, dict[str, Any]] = {}
        taken: dict[tuple[str, str], int] = {}
        for method, transport, label, calls in self.steps:
            key = (method, transport)
            start = taken.get(key, 0)
            mine = by_key.get(key, [])[start : start + calls]
            taken[key] = start + calls
            if label:
                outcomes: dict[str, int] = {}
                for e in mine:
                    outcomes[e.get("outcome", "?")] = outcomes.get(e.get("outcome", "?"), 0) + 1
                out[f"{transport}/{label}"] = {
                    "calls": len(mine),
                    "expected": calls,
                    "ms": summary([float(e["ms"]) for e in mine if "ms" in e]),
                    "outcomes": outcomes,
                }
        return out


# -- main ------------------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gaml.bench.grpc_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=100_000, help="assets in the home")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    p.add_argument("--embedder", choices=("hash", "minilm"), default="hash")
    p.add_argument("--transport", choices=("unix", "mtls", "both"), default="both")
    p.add_argument("--puts", type=int, default=500, help="single-asset puts per path (and split between the clients)")
    p.add_argument("--batches", type=int, default=10, help="batched puts per path")
    p.add_argument("--batch-size", type=int, default=100, help="assets per batched put")
    p.add_argument("--clients", type=int, default=4, help="concurrent clients of the concurrent Put measure")
    p.add_argument("--goals", type=int, default=200, help="timed hydration goals per path")
    p.add_argument("--warmup", type=int, default=20, help="untimed hydrations (and health checks) first, per path")
    p.add_argument("--budget", type=int, default=2000, help="hydration budget in tokens")
    p.add_argument("--floor-calls", type=int, default=500, help="health checks timed per transport")
    p.add_argument("--fill-batch", type=int, default=1000, help="assets per batch of the untimed fill")
    p.add_argument("--tmp", type=Path, default=Path("/tmp"), help="where the node home goes (keep it short)")
    args = p.parse_args(argv)
    if args.n < 10 or min(args.puts, args.batches, args.batch_size, args.clients, args.goals, args.budget) <= 0:
        p.error("--n must be at least 10; --puts, --batches, --batch-size, --clients, --goals, --budget positive")
    if args.puts < args.clients:
        p.error("--puts must be at least --clients (they split the concurrent puts)")
    if args.warmup < 0 or args.floor_calls <= 0 or args.fill_batch <= 0:
        p.error("--warmup must be >= 0; --floor-calls and --fill-batch positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return run_and_write(args, "grpc", run, render, code_version())


def run(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    transports = ("unix", "mtls") if args.transport == "both" else (args.transport,)
    R: dict[str, Any] = {"transports": list(transports), "loadavg_start": os.getloadavg()}
    home = make_home(base, args.embedder, "mtls" in transports)

    # ---- data: the fill, the goals, then the drafts each measured put stores ---------------------------------------
    data = Drafts(args.seed)
    t0 = time.perf_counter()
    end = now_us() - 3_600_000_000  # an hour ago
    fill_drafts = [data.draft(end - (args.n - i) * FILL_SPACING_US) for i in range(args.n)]
    goal_rng = random.Random(f"goals-{args.seed}")
    goals = [data.goal(fill_drafts[goal_rng.randrange(args.n)]) for _ in range(args.warmup + args.goals)]
    warmup, goals = goals[: args.warmup], goals[args.warmup :]
    per_client = args.puts // args.clients
    per_path = args.puts + args.batches * args.batch_size
    pool = [data.draft() for _ in range(per_path * (1 + len(transports)) + per_client * args.clients * len(transports))]
    t_gen = time.perf_counter() - t0
    log(f"generated {args.n:,} fill drafts, {len(goals) + len(warmup)} goals, {len(pool):,} measured drafts")

    def take(n: int) -> list[dict[str, Any]]:
        out = pool[:n]
        del pool[:n]
        return out

    def singles() -> list[list[dict[str, Any]]]:
        return [[d] for d in take(args.puts)]

    def batches() -> list[list[dict[str, Any]]]:
        return [take(args.batch_size) for _ in range(args.batches)]

    R["data"] = {
        "n": args.n,
        "owner": PRINCIPAL,
        "scope": SCOPE,
        "generate_s": t_gen,
        "mean_text_chars": statistics.fmean(len(d["payload"]["text"]) for d in fill_drafts),
        "rate_limit": NO_RATE_LIMIT,
    }
    R["fill"] = fill(home, fill_drafts, args.fill_batch)
    R["data"].update(embedder=R["fill"]["embedder"], dim=R["fill"]["dim"])
    del fill_drafts

    # ---- 1. in-process Hydrate -------------------------------------------------------------------------------------
    inproc: dict[str, Any] = {}
    samples: list[Any] = []
    with in_process(home) as (svc, alice):
        inproc["hydrate"] = hydrate_in_process(svc, alice, goals, warmup, args.budget, samples)
    log(_line("in-process hydrate", inproc["hydrate"]))

    # ---- 2-3. the daemon: per transport the floor and Hydrate, then the puts ---------------------------------------
    plan = CallPlan()
    grpc_out: dict[str, dict[str, Any]] = {t: {} for t in transports}
    with daemon(home, "mtls" in transports) as d:
        listen = d.serving.get("listen")
        R["daemon"] = {"startup_s": d.startup_s, "pid": d.process.pid, "listen": listen}
        clients = {t: connect(home, t, listen) for t in transports}
        try:
            st = clients[transports[0]].status()
            plan.add("Status", transports[0], "", 1)
            R["daemon"]["status"] = {k: st.get(k) for k in ("assets", "indexed", "pending", "embedder", "principal")}
            if st.get("assets", 0) < args.n or st.get("principal") != PRINCIPAL:
                raise RuntimeError(f"the daemon serves {st}, not {args.n} assets of {PRINCIPAL}")
            for t in transports:
                grpc_out[t]["floor"] = floor_grpc(clients[t], t, args.floor_calls, args.warmup)
                log(_line(f"{t} health Check", grpc_out[t]["floor"]))
                grpc_out[t]["hydrate"] = hydrate_grpc(clients[t], t, goals, warmup, args.budget)
                plan.add("Hydrate", t, "", len(warmup))
                plan.add("Hydrate", t, "hydrate", len(goals))
                log(_line(f"{t} Hydrate", grpc_out[t]["hydrate"]))
            for t in transports:
                c = clients[t]
                grpc_out[t]["put_single"] = puts(c.put, singles(), f"{t} Put x1")
                plan.add("Put", t, "put_single", args.puts)
                log(_line(f"{t} Put x1", grpc_out[t]["put_single"]))
                grpc_out[t]["put_batch"] = puts(c.put, batches(), f"{t} Put x{args.batch_size}")
                plan.add("Put", t, "put_batch", args.batches)
                log(_line(f"{t} Put x{args.batch_size}", grpc_out[t]["put_batch"]))
                split = take(per_client * args.clients)
                parts = [split[i * per_client : (i + 1) * per_client] for i in range(args.clients)]
                grpc_out[t]["put_concurrent"] = concurrent_puts(home, t, listen, parts)
                plan.add("Put", t, "put_concurrent", per_client * args.clients)
                log(_line(f"{t} Put x1, {args.clients} clients", grpc_out[t]["put_concurrent"]))
        finally:
            for c in clients.values():
                c.close()
    entries = d.entries()
    stopped = next((e for e in reversed(entries) if e.get("event") == "stopped"), {})
    R["daemon"].update(calls=stopped.get("calls"), core_busy_s=stopped.get("core_busy_s"))
    R["server_ms"] = plan.attribute(entries)
    refused = [e for e in entries if e.get("event") in ("refused",) or e.get("level") == "error"]
    if refused:
        raise RuntimeError(f"the daemon refused or failed calls: {refused[:3]}")

    # ---- 4. in-process Put -------------------------------------------------------------------------------------------
    last_batches = batches()
    with in_process(home) as (svc, alice):
        inproc["put_single"] = puts(lambda ds: svc.put(alice, ds, now_us()), singles(), "in-process put x1")
        log(_line("in-process put x1", inproc["put_single"]))
        inproc["put_batch"] = puts(
            lambda ds: svc.put(alice, ds, now_us()), last_batches, f"in-process put x{args.batch_size}"
        )
        log(_line(f"in-process put x{args.batch_size}", inproc["put_batch"]))
    assert not pool, "every measured draft is stored once"
    R["codec"] = codec(samples, [d for b in last_batches for d in b])
    R["loadavg_end"] = os.getloadavg()

    R["in_process"] = inproc
    R["grpc"] = grpc_out
    R["ratios"], R["overhead_ms"] = {}, {}
    for t in transports:
        g = grpc_out[t]
        R["ratios"][t] = {
            "hydrate_p50": g["hydrate"]["ms"]["p50"] / inproc["hydrate"]["ms"]["p50"],
            "hydrate_p99": g["hydrate"]["ms"]["p99"] / inproc["hydrate"]["ms"]["p99"],
            "put_single_per_s": g["put_single"]["per_s"] / inproc["put_single"]["per_s"],
            "put_batch_per_s": g["put_batch"]["per_s"] / inproc["put_batch"]["per_s"],
            "put_concurrent_per_s": g["put_concurrent"]["per_s"] / inproc["put_single"]["per_s"],
        }
        R["overhead_ms"][t] = {
            m: g[m]["ms"]["p50"] - inproc[m]["ms"]["p50"] for m in ("hydrate", "put_single", "put_batch")
        }
    return R


def _line(label: str, m: dict[str, Any]) -> str:
    return (
        f"{label}: {m['calls']} calls, p50 {m['ms']['p50']:.2f} ms, p99 {m['ms']['p99']:.2f} ms, "
        f"{m['per_s']:,.0f} items/s"
    )


# -- report ----------------------------------------------------------------------------------------------------------


def render(R: dict[str, Any]) -> str:
    A, D, F, m, ip, g = R["args"], R["data"], R["fill"], R["machine"], R["in_process"], R["grpc"]
    ts, code, bs = R["transports"], R["code"], A["batch_size"]

    def row(label: str, base: str, cells: Sequence[str], ratios: Sequence[str] = ()) -> str:
        return "| " + " | ".join([label, base, *cells, *(ratios or [""] * len(ts))]) + " |"

    def ratio(key: str) -> list[str]:
        return [f"{R['ratios'][t][key]:.2f}×" for t in ts]

    def lat(x: dict[str, Any], q: str, f: str = ".2f") -> str:
        return format(x["ms"][q], f)

    def p50_99(x: dict[str, Any], f: str = ".2f") -> str:
        return f"{lat(x, 'p50', f)} / {lat(x, 'p99', f)}"

    def thr(x: dict[str, Any]) -> str:
        return f"{x['per_s']:,.0f}"

    def server(t: str, k: str) -> str:
        s = R["server_ms"].get(f"{t}/{k}", {}).get("ms", {})
        return f"{s['p50']:.2f}" if s else "?"

    cc = A["clients"]
    rows = [
        row(
            f"Hydrate p50 (ms), budget {A['budget']}",
            lat(ip["hydrate"], "p50"),
            [lat(g[t]["hydrate"], "p50") for t in ts],
            ratio("hydrate_p50"),
        ),
        row(
            "Hydrate p99 (ms)",
            lat(ip["hydrate"], "p99"),
            [lat(g[t]["hydrate"], "p99") for t in ts],
            ratio("hydrate_p99"),
        ),
        row(
            "Put, 1 asset per call, sequential (assets/s)",
            thr(ip["put_single"]),
            [thr(g[t]["put_single"]) for t in ts],
            ratio("put_single_per_s"),
        ),
        row("— per call p50 / p99 (ms)", p50_99(ip["put_single"]), [p50_99(g[t]["put_single"]) for t in ts]),
        row(
            f"Put, {bs} assets per call (assets/s)",
            thr(ip["put_batch"]),
            [thr(g[t]["put_batch"]) for t in ts],
            ratio("put_batch_per_s"),
        ),
        row(
            "— per call p50 / p99 (ms)", p50_99(ip["put_batch"], ".1f"), [p50_99(g[t]["put_batch"], ".1f") for t in ts]
        ),
        row(
            f"Put, 1 asset per call, {cc} concurrent clients (assets/s; ratio vs in-process sequential)",
            thr(ip["put_single"]),
            [thr(g[t]["put_concurrent"]) for t in ts],
            ratio("put_concurrent_per_s"),
        ),
        row("— per call p50 / p99 (ms)", "—", [p50_99(g[t]["put_concurrent"]) for t in ts]),
        row(
            "round-trip floor: health Check, no core call, p50 / p99 (ms)",
            "—",
            [p50_99(g[t]["floor"], ".3f") for t in ts],
        ),
    ]
    over = [
        "| "
        + " | ".join(
            [label, *(f"{R['overhead_ms'][t][k]:+.2f}" if k in R["overhead_ms"][t] else "" for t in ts)]
            + [server(t, k) for t in ts]
        )
        + " |"
        for label, k in (
            ("Hydrate", "hydrate"),
            ("Put x1", "put_single"),
            (f"Put x{bs}", "put_batch"),
            (f"Put x1, {cc} clients", "put_concurrent"),
        )
    ]
    hyd = [
        f"{name} {x['frames']['tokens_mean']:.0f} tokens and {x['frames']['facts_mean']:.1f} facts per frame "
        f"({x['frames']['empty_frames']} empty; paths {x['frames']['paths']})"
        for name, x in [("in-process", ip["hydrate"]), *((t, g[t]["hydrate"]) for t in ts)]
    ]
    dm, C = R["daemon"], R["codec"]
    enc_ms = C["hydrate_server_encode_ms"].get("p50", 0.0)
    dec_ms = C["hydrate_client_decode_ms"].get("p50", 0.0)
    argline = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in A.items() if v not in (None, False))
    lines = [
        f"# gRPC benchmark: Hydrate and Put over the daemon vs in-process, N = {D['n']:,}",
        "",
        f"{m['date']} · {m['nproc']} cores · Python {m['python']} · "
        + " · ".join(f"{k} {v}" for k, v in m["packages"].items())
        + f" · temp fs {m['tmp_fs']}",
        "",
        f"Args: `{argline}`. "
        f"Code: commit {code['commit']}"
        + (
            f" + uncommitted changes to {', '.join(code['dirty'])} (digest {code['dirty_digest']})."
            if code["dirty"]
            else ", clean."
        ),
        "",
        f"Data: {D['n']:,} synthetic assets of {PRINCIPAL} ({SCOPE}, one partition; mean text "
        f"{D['mean_text_chars']:.0f} characters), embedder **{D['embedder']}** ({D['dim']} dims). Fill through the "
        f"in-process core, untimed in the measures: `Node.put_stream` in batches of {F['batch']:,} "
        f"{F['put_stream_s']:.1f} s "
        f"({F['s_per_1000']:.2f} s per 1,000 assets), then `Node.checkpoint()` (index build + {F['snapshots']} "
        f"snapshots) {F['checkpoint_s']:.1f} s ({F['checkpoint_s_per_1000']:.2f} s per 1,000). Rate limit lifted "
        f"for the run ({D['rate_limit']['calls_per_second']:,.0f} calls/s). The daemon (a child process, "
        f"`python -m gaml.node.cli run`) served after {dm['startup_s']:.1f} s and saw "
        f"{dm['status']['assets']:,} assets.",
        "",
        f"Hydrate: {A['goals']} seeded goals (+{A['warmup']} warm-up) per path, budget {A['budget']} tokens, the same "
        f"goals on every path, before any measured put. Put: {A['puts']} single-draft calls, {A['batches']} calls of "
        f"{bs} drafts, and {A['puts'] // A['clients'] * A['clients']} single-draft calls split between "
        f"{A['clients']} concurrent clients (threads of the benchmark, one connection each; the node's core thread "
        "runs one call at a time). Every put stores new drafts; in-process puts run last, after the daemon stopped.",
        "",
        "| measure | in-process | " + " | ".join([*ts, *(f"{t} / in-process" for t in ts)]) + " |",
        "|---|---:|" + "---:|" * (2 * len(ts)),
        *rows,
        "",
        "Overhead per call (gRPC p50 − in-process p50, ms) and the daemon's own time per call (p50 of the `ms` of "
        "its `call` log lines: admission, the wait for and the work on the core thread):",
        "",
        "| call | "
        + " | ".join(f"overhead {t}" for t in ts)
        + " | "
        + " | ".join(f"server-side {t}" for t in ts)
        + " |",
        "|---|" + "---:|" * (2 * len(ts)),
        *over,
        "",
        "Protobuf alone, timed in one process without I/O: a Hydrate response "
        f"({C['hydrate_response_bytes'] / 1000:.1f} kB mean over {C['hydrate_samples']} in-process frames) "
        f"takes {enc_ms:.2f} ms to build and serialize as the servicer does and {dec_ms:.2f} ms to parse and read "
        f"as `Client.hydrate` does (p50); a draft ({C['put_request_bytes_per_draft']:.0f} B on the wire) "
        f"{C['put_client_encode_us_per_draft']:.0f} µs to encode as `Client.put` does and "
        f"{C['put_server_decode_us_per_draft']:.0f} µs to decode as the servicer does "
        "(the daemon decodes on its loop thread, outside its `ms`).",
        "",
        "Frames: " + "; ".join(hyd) + ".",
        "",
        f"Daemon: {dm['calls']} calls served, core thread busy {dm['core_busy_s']} s in all. Load average (1, 5, 15 "
        f"min) {' / '.join(f'{x:.2f}' for x in R['loadavg_start'])} at the start, "
        f"{' / '.join(f'{x:.2f}' for x in R['loadavg_end'])} at the end ({m['nproc']} cores).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
