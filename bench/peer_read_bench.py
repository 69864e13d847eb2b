"""Peer-read benchmark: hydrations that ask peers, across three real daemons on loopback (issue 19's swarm-read target).

::

    .venv/bin/python -m gaml.bench.peer_read_bench [--n 10000] [--goals 200] [--deadline-ms 500] [--fan-out 2]
                                                   [--k 16] [--budget 1000] [--seed 0] [--out bench/results] [--quick]

Setup (untimed): three fresh homes A, B and C (the hash embedder, the rate limit lifted), paired as alice's devices
(A creates the ``devices`` boundary and invites B and C, as ``gaml pair`` does). N seeded drafts of alice
(bench/replication_bench.py's, ``user_private``, ``trusted_devices``) are written into A's store and sealed before any
daemon runs; then the three daemons start (child processes, ``gaml run``; B and C dial A over libp2p) and the
benchmark waits until B and C hold all N (the initial sync) and every link is open.

Measured through A's Unix socket (``Client.hydrate``, budget ``--budget``), the same ``--goals`` seeded goals (a
sentence of a stored asset, so that every peer has real candidates) in each series, interleaved goal by goal in a
seeded order:

1. **local**: a hydration without peers (the reference: what the peer read adds to);
2. **peers**: the same with a peer read (``--deadline-ms``, ``--fan-out`` peers, ``--k`` candidates each): B and C
   answer; per read, the wall time, how many answered, each answer's arrival (ms after the ask) from the receipt;
3. **one peer stopped**: C's daemon gets SIGSTOP (connected, silent); the same peer reads: each must return at its
   deadline with C declared timed out, and B answered.

References in the same run: libp2p frame round trips between two hosts in one process (``replication_bench.p2p_rtt``:
the transport's floor for an ask and its answer); the daemon's own milliseconds per Hydrate call (its log).

Results: a Markdown table on stdout and in ``OUT/peer_reads.md``, the raw numbers in ``OUT/peer_reads.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from gaml.bench.replication_bench import (
    Daemon,
    Drafts,
    Home,
    call_ms,
    connect,
    daemon,
    fill,
    make_home,
    now_us,
    p2p_rtt,
    pair_all,
    peer_stats,
    summary,
)
from gaml.bench.retrieve_bench import code_version
from gaml.bench.store_bench import log, run_and_write
from gaml.v1 import memory_pb2

WAIT_S = 600.0


def wait(what: str, ok: Any, timeout_s: float = WAIT_S, poll_s: float = 0.25) -> None:
    end = time.monotonic() + timeout_s
    while not ok():
        if time.monotonic() > end:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(poll_s)


def held(home: Home, bid: bytes) -> int:
    b = next((x for x in home.status().get("boundaries", []) if x["id"] == bid.hex()), None)
    return int(b["objects"]) if b else 0


@contextlib.contextmanager
def stopped(d: Daemon) -> Iterator[None]:
    os.kill(d.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(d.process.pid, signal.SIGCONT)


def run(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    R: dict[str, Any] = {"loadavg_start": os.getloadavg()}
    a, b, c = (make_home(base, n) for n in "abc")
    bid = pair_all(a, [b, c])
    drafts = Drafts(args.seed)
    t0 = now_us() - args.n
    rows = [drafts.draft(t0 + i) for i in range(args.n)]
    filled = fill(a, bid, rows)
    rng = random.Random(f"peer-reads-{args.seed}")
    goals = [rng.choice(rows)["payload"]["text"].split(". ")[0][:200] for _ in range(args.goals)]
    R["data"] = {"n": args.n, "goals": len(goals), "budget": args.budget, "embedder": "hash"}
    R["fill"] = filled.stats
    R["reference"] = {"p2p_rtt_ms": p2p_rtt(args.rtt_rounds)}
    read = memory_pb2.PeerRead(deadline_ms=args.deadline_ms, fan_out=args.fan_out, k=args.k)
    with contextlib.ExitStack() as stack:
        da = stack.enter_context(daemon(a, "--p2p", "/ip4/127.0.0.1/tcp/0"))
        da.wait_serving(120)
        addr = da.info.get("p2p", [])
        if not addr:
            raise RuntimeError(f"A's daemon.json names no libp2p address: {da.info}")
        db = stack.enter_context(daemon(b, "--peer", addr[0]))
        dc = stack.enter_context(daemon(c, "--peer", addr[0]))
        db.wait_serving(120)
        dc.wait_serving(120)
        t_sync = time.perf_counter()
        wait("B and C to hold all N", lambda: held(b, bid) >= args.n and held(c, bid) >= args.n)
        R["sync_s"] = time.perf_counter() - t_sync
        wait(
            "A's links to B and C to be open",
            lambda: all(peer_stats(a.status(), h.node_id).get("open_boundaries") == 1 for h in (b, c)),
        )
        log(f"B and C hold {args.n:,} assets ({R['sync_s']:.1f} s); timing {len(goals)} goals")
        client = stack.enter_context(contextlib.closing(connect(a)))
        for g in goals[:10]:  # warm the caches of every path once
            client.hydrate(g, args.budget)
            client.hydrate(g, args.budget, peers=read)
        local: list[float] = []
        asked: list[float] = []
        answered: list[int] = []
        arrivals: list[float] = []
        for g in goals:
            order = ["local", "peers"]
            rng.shuffle(order)
            for kind in order:
                t = time.perf_counter()
                out = client.hydrate(g, args.budget, **({"peers": read} if kind == "peers" else {}))
                ms = 1000 * (time.perf_counter() - t)
                if kind == "local":
                    local.append(ms)
                    continue
                asked.append(ms)
                p = out["receipt"]["peers"]
                answered.append(len(p["answered"]))
                arrivals += [float(x["ms"]) for x in p["answered"]]
        silent: list[float] = []
        c_timed_out = b_answered = 0
        with stopped(dc):
            for g in goals[: max(1, len(goals) // 4)]:
                t = time.perf_counter()
                out = client.hydrate(g, args.budget, peers=read)
                silent.append(1000 * (time.perf_counter() - t))
                p = out["receipt"]["peers"]
                c_timed_out += [x["node"] for x in p["timed_out"]] == [c.node_id]
                b_answered += [x["node"] for x in p["answered"]] == [b.node_id]
        hydrate_ms = call_ms(da.lines, "Hydrate")
        for d in (db, dc, da):
            d.stop()
    R["local_ms"] = summary(local)
    R["peers_ms"] = summary(asked)
    R["answer_arrival_ms"] = summary(arrivals)
    R["all_answered_share"] = sum(1 for n in answered if n == 2) / len(answered)
    R["silent_peer_ms"] = summary(silent)
    R["silent_reads"] = len(silent)
    R["silent_c_timed_out"] = c_timed_out
    R["silent_b_answered"] = b_answered
    R["daemon_hydrate_ms"] = summary(hydrate_ms)
    R["within_deadline_share"] = sum(1 for x in asked if x <= args.deadline_ms) / len(asked)
    R["loadavg_end"] = os.getloadavg()
    return R


def _f(x: dict[str, float], q: str) -> str:
    return f"{x[q]:.1f}" if x else "–"


def render(R: dict[str, Any]) -> str:
    a, m, d = R["args"], R["machine"], R["data"]
    L, P, S, ref = R["local_ms"], R["peers_ms"], R["silent_peer_ms"], R["reference"]["p2p_rtt_ms"]
    arr = R["answer_arrival_ms"]
    lines = [
        f"# Peer reads: three daemons over libp2p on loopback, N = {d['n']:,}",
        "",
        f"{m['date']} · {m['nproc']} cores · Python {m['python']} · temp fs {m['tmp_fs']}",
        "",
        f"Args: `--n {a['n']} --goals {a['goals']} --deadline-ms {a['deadline_ms']} --fan-out {a['fan_out']} "
        f"--k {a['k']} --budget {a['budget']} --seed {a['seed']}`. Code: commit {R['code'].get('commit', '?')}"
        f"{'' if R['code'].get('clean') else ' (with uncommitted changes)'}.",
        "",
        f"A, B and C are alice's devices; A's store was filled with {d['n']:,} assets before the daemons ran, and B "
        f"and C synced them ({R['sync_s']:.1f} s) before anything was timed. Every hydration goes to A's daemon over "
        f"its Unix socket (budget {d['budget']}, hash embedder), {d['goals']} seeded goals, the local and the peer "
        "read interleaved in a seeded order. Load average at start / end: "
        f"{', '.join(f'{x:.2f}' for x in R['loadavg_start'])} / {', '.join(f'{x:.2f}' for x in R['loadavg_end'])}.",
        "",
        "| measure | p50 (ms) | p99 (ms) | max (ms) | note |",
        "|---|---:|---:|---:|---|",
        f"| hydration, local only | {_f(L, 'p50')} | {_f(L, 'p99')} | {_f(L, 'max')} | the reference |",
        f"| **hydration asking B and C** (deadline {a['deadline_ms']} ms) | **{_f(P, 'p50')}** | **{_f(P, 'p99')}** | "
        f"{_f(P, 'max')} | both answered in {R['all_answered_share']:.1%} of reads; "
        f"{R['within_deadline_share']:.1%} returned within the deadline |",
        f"| — an answer's arrival after the ask (receipt) | {_f(arr, 'p50')} | {_f(arr, 'p99')} | {_f(arr, 'max')} | "
        "ask out, the peer ranks its boundary, the answer verified and stored on A |",
        f"| hydration asking B and C, **C stopped** (SIGSTOP) | {_f(S, 'p50')} | {_f(S, 'p99')} | {_f(S, 'max')} | "
        f"{R['silent_c_timed_out']}/{R['silent_reads']} receipts named C (alone) timed out; "
        f"{R['silent_b_answered']}/{R['silent_reads']} had B's answer |",
        f"| libp2p frame round trip, two hosts in one process | {_f(ref, 'p50')} | {_f(ref, 'p99')} | "
        f"{_f(ref, 'max')} | the transport's floor for an ask and its answer |",
        "",
        f"Ratios (p50): the peer read costs {P['p50'] / L['p50']:.2f}× the local hydration "
        f"(+{P['p50'] - L['p50']:.1f} ms); an answer arrives {arr['p50'] / ref['p50']:.1f}× the bare libp2p round "
        f"trip after the ask. With a silent peer a read waits for its deadline ({a['deadline_ms']} ms): "
        f"p50 {S['p50']:.0f} ms.",
        "",
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gaml.bench.peer_read_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=None, help="assets on every device (default 10,000; --quick 300)")
    p.add_argument("--goals", type=int, default=None, help="timed goals per series (default 200; --quick 20)")
    p.add_argument("--deadline-ms", type=int, default=500)
    p.add_argument("--fan-out", type=int, default=2)
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--budget", type=int, default=1000)
    p.add_argument("--rtt-rounds", type=int, default=500, help="round trips of the libp2p reference")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    p.add_argument("--tmp", type=Path, default=Path("/tmp"), help="where the temporary homes go (short path)")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    args.n = args.n if args.n is not None else (300 if args.quick else 10_000)
    args.goals = args.goals if args.goals is not None else (20 if args.quick else 200)
    if args.n < 1 or args.goals < 1:
        p.error("need --n >= 1 and --goals >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return run_and_write(args, "peer_reads", run, render, code_version(("crdt", "node", "policy", "proto")))


if __name__ == "__main__":
    raise SystemExit(main())
