"""Gossip benchmark: how fast a public asset written on one daemon reaches the far end of a line of swarm daemons,
with gossip (gossipsub beside sync) and with sync alone (config ``p2p.gossip: false``), in the same run.

::

    .venv/bin/python -m gaml.bench.gossip_bench [--nodes 4] [--changes 60] [--delays-ms 0,20] [--seed 0]
                                                [--out bench/results] [--quick]

Setup (untimed), per link delay and series: ``--nodes`` fresh homes (the hash embedder, the rate limit lifted) that
joined the swarm ``bench-swarm`` (rendezvous off, so that the line stays a line); their daemons start in a line, each
dialling the one before through a TCP proxy that holds every read for the link's one-way delay (0: loopback as is;
20 ms: a WAN-like link), so the first and the last are ``nodes - 1`` hops apart and never connected. The benchmark
waits until every link's swarm boundary is open and, with gossip, every daemon's gossip mesh holds its neighbours.

Measured: ``--changes`` public assets (seeded 200–400-character texts), one at a time: a ``Put`` through the first
daemon's Unix socket, then ``Get`` of its id on the last daemon's socket every 2 ms until it is there. The latency
is from just before the Put to the first Get that finds it (so it includes the Put's own time: reported beside it).
Both series write the same texts; the series alternate in blocks of ten changes so machine noise falls on both.

Why a delay matters: a sync hop takes three one-way trips (``Have``, ``Need``, ``Send``) before the next node can
offer the object on, a gossip hop one (the forwarder validates and sends before its own node stores it).

References in the same run: libp2p frame round trips between two hosts in one process
(``replication_bench.p2p_rtt``: the transport's floor for one hop), and the daemons' Put and Get times.

Results: a Markdown table on stdout and in ``OUT/gossip.md``, the raw numbers in ``OUT/gossip.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from gaml.bench.replication_bench import (
    Daemon,
    Drafts,
    Home,
    Proxy,
    connect,
    daemon,
    make_home,
    now_us,
    p2p_rtt,
    summary,
)
from gaml.bench.retrieve_bench import code_version
from gaml.bench.store_bench import log, run_and_write
from gaml.node.core.replica import Replica
from gaml.node.home import open_node, read_config, write_config
from gaml.policy.errors import NotFound

SWARM = "bench-swarm"
POLL_S = 0.002
BLOCK = 10  # changes per series before the other series takes its turn


def swarm_home(base: Path, name: str, *, gossip: bool) -> Home:
    home = make_home(base, name)
    cfg = read_config(home.path, overrides=False)
    # rendezvous off: the line must stay a line (with it the ends would hear of each other and connect directly)
    cfg["p2p"] = {**(cfg.get("p2p") or {}), "gossip": gossip, "rendezvous": False}
    write_config(home.path, cfg)
    node = open_node(home.path, home.unlock)
    try:
        Replica(node).join_swarm(SWARM, now_us())
    finally:
        node.close(checkpoint=False)
    return home


def wait_until(what: str, cond: Any, timeout_s: float = 120.0) -> None:
    end = time.perf_counter() + timeout_s
    while not cond():
        if time.perf_counter() > end:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def line(homes: Sequence[Home], gossip: bool, delay_s: float) -> Iterator[list[Daemon]]:
    """The daemons of ``homes`` in a line, each dialling the one before through a proxy holding reads ``delay_s``;
    yields once links (and meshes) are up."""
    with contextlib.ExitStack() as stack:
        ds: list[Daemon] = []
        for i, h in enumerate(homes):
            extra = ["--p2p", "/ip4/127.0.0.1/tcp/0"]
            if i:
                addr = ds[-1].info["p2p"][0]  # /ip4/127.0.0.1/tcp/PORT/p2p/ID
                parts = addr.split("/")
                proxy = Proxy(int(parts[4]), delay_s)
                stack.callback(proxy.close)
                parts[4] = str(proxy.port)
                extra += ["--peer", "/".join(parts)]
            d = stack.enter_context(daemon(h, *extra))
            d.wait_serving(120)
            ds.append(d)

        def linked(i: int) -> bool:
            st = homes[i].status()
            peers = st.get("peers", {})
            want = [homes[j].node_id for j in (i - 1, i + 1) if 0 <= j < len(homes)]
            if not all(peers.get(n, {}).get("open_boundaries", 0) >= 1 for n in want):
                return False
            return not gossip or set(want) <= set(st.get("gossip", {}).get("mesh", []))

        for i in range(len(homes)):
            wait_until(f"{homes[i].name}'s links{' and mesh' if gossip else ''}", lambda i=i: linked(i))
        yield ds
        for d in reversed(ds):
            d.stop()


def change(first: Any, last: Any, draft: dict[str, Any]) -> dict[str, float]:
    t0 = time.perf_counter()
    (id_,) = first.put([draft])
    put_ms = (time.perf_counter() - t0) * 1000
    gets = 0
    while True:
        gets += 1
        try:
            last.get(id_)
            break
        except NotFound:
            time.sleep(POLL_S)
    return {"ms": (time.perf_counter() - t0) * 1000, "put_ms": put_ms, "gets": gets}


def series_of(name: str, delay_ms: int) -> str:
    return f"{name}@{delay_ms}"


def run(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    drafts = Drafts(args.seed)
    texts = [drafts.text() for _ in range(args.changes)]
    log("libp2p frame round trips (the transport's floor for one hop)")
    rtt = p2p_rtt(200)
    out: dict[str, Any] = {
        "nodes": args.nodes,
        "hops": args.nodes - 1,
        "changes": args.changes,
        "delays_ms": args.delays_ms,
        "p2p_rtt_ms": rtt,
    }
    for delay in args.delays_ms:
        series: dict[str, list[dict[str, float]]] = {"gossip": [], "sync": []}
        homes = {
            name: [swarm_home(base, f"{name[0]}{delay}-{i}", gossip=name == "gossip") for i in range(args.nodes)]
            for name in series
        }
        statuses: dict[str, list[dict[str, Any]]] = {}
        with contextlib.ExitStack() as stack:
            clients = {}
            for name in series:
                log(f"starting the {name} line of {args.nodes} daemons, links delayed {delay} ms")
                stack.enter_context(line(homes[name], name == "gossip", delay / 1000))
                clients[name] = (connect(homes[name][0]), connect(homes[name][-1]))
            for start in range(0, args.changes, BLOCK):
                for name in series if (start // BLOCK) % 2 == 0 else reversed(list(series)):
                    first, last = clients[name]
                    for i in range(start, min(start + BLOCK, args.changes)):
                        draft = {
                            "asset_type": "fact",
                            "payload": {"text": f"{texts[i]} ({name})"},
                            "owner_id": "alice",
                            "privacy_scope": "public",
                            "replication_policy": "public_swarm",
                        }
                        series[name].append(change(first, last, draft))
                log(f"{min(start + BLOCK, args.changes)}/{args.changes} changes per series")
            for name in series:
                statuses[name] = [h.status() for h in homes[name]]
            if any(st.get("gossip") for st in statuses["sync"]):
                raise RuntimeError("the sync-alone line gossips: config p2p.gossip false was not honoured")
            if not all(st.get("gossip") for st in statuses["gossip"]):
                raise RuntimeError("a daemon of the gossip line does not gossip")
        for name, xs in series.items():
            out[series_of(name, delay)] = {
                "latency_ms": summary([x["ms"] for x in xs]),
                "put_ms": summary([x["put_ms"] for x in xs]),
                "gets": summary([x["gets"] for x in xs]),
                "gossip": [{k: v for k, v in s.get("gossip", {}).items() if k != "scores"} for s in statuses[name]],
            }
        g, s = out[series_of("gossip", delay)]["latency_ms"], out[series_of("sync", delay)]["latency_ms"]
        out[f"ratio@{delay}"] = {"p50": s["p50"] / g["p50"], "p99": s["p99"] / g["p99"]}
    return out


def _ms(x: dict[str, float], q: str) -> str:
    return f"{x[q]:.1f}"


def render(R: dict[str, Any]) -> str:
    rows = [
        f"# Gossip: a public asset across {R['hops']} hops of swarm daemons ({R['changes']} changes per series)",
        "",
        "| link delay (one way) | series | latency p50 (ms) | p99 | max | Put p50 (ms) | sync / gossip (p50, p99) |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for delay in R["delays_ms"]:
        ratio = R[f"ratio@{delay}"]
        for name in ("gossip", "sync"):
            x = R[series_of(name, delay)]
            lat, put = x["latency_ms"], x["put_ms"]
            label = "gossip + sync" if name == "gossip" else "sync alone (p2p.gossip false)"
            vs = f"{ratio['p50']:.2f}x, {ratio['p99']:.2f}x" if name == "sync" else ""
            rows.append(
                f"| {delay} ms | {label} | {_ms(lat, 'p50')} | {_ms(lat, 'p99')} | {_ms(lat, 'max')} "
                f"| {_ms(put, 'p50')} | {vs} |"
            )
    rtt = R["p2p_rtt_ms"]
    last = R[series_of("gossip", R["delays_ms"][-1])]["gossip"][-1]
    rows += [
        "",
        f"libp2p frame round trip (one hop's floor, in process, no delay): p50 {rtt['p50']:.3f} ms, "
        f"p99 {rtt['p99']:.3f} ms. Gossip counters on the last daemon of the last gossip line: "
        + json.dumps({k: v for k, v in last.items() if k in ("received", "accepted", "known", "invalid")}),
    ]
    return "\n".join(rows) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gossip_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=4, help="daemons in the line (hops + 1)")
    p.add_argument("--changes", type=int, default=60, help="public assets written per series")
    p.add_argument(
        "--delays-ms",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[0, 20],
        help="one-way link delays to run, comma-separated",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    p.add_argument("--tmp", type=Path, default=None, help="where the temporary homes go")
    p.add_argument("--quick", action="store_true", help="3 daemons, 20 changes, links not delayed")
    a = p.parse_args(argv)
    if a.quick:
        a.nodes, a.changes, a.delays_ms = 3, 20, [0]
    if a.nodes < 2 or a.changes < 2:
        p.error("a line has at least 2 daemons and a series at least 2 changes")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return run_and_write(args, "gossip", run, render, code_version(("crdt", "node", "policy", "proto")))


if __name__ == "__main__":
    raise SystemExit(main())
