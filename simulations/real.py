"""The real mode of the scenario harness: the same scenario file drives real daemons (`gaml run`, real RocksDB, real
libp2p) in Linux network namespaces, every link through a userspace proxy that injects the scenario's delay and loss
(simulations/proxy.py; this kernel has no ``netem``), with the same safety checks as the simulated mode.

``python -m simulations run --scenario FILE --seed N --real [--max-nodes 8]`` (needs root: ``ip netns``).

**Scaled to a machine.** A scenario describes up to thousands of nodes; the real mode keeps its shapes and rates and
scales its counts: at most ``max_nodes`` daemons (4 to 8), one boundary per shape with at least two members (and one
relay where the shape has relays), one stranger if the scenario has strangers, then the remaining nodes round-robin to
the shapes up to their sizes; the public swarm's members are those of the shapes it includes (plus its own). The
workload keeps its mix, scaled to ``assets_per_node`` puts per node; events fall at the same seeded times over the
scenario's seconds, which are wall seconds here. Faults: ``partition`` and ``heal`` take the proxy links between the
groups down and up, ``flap`` takes links down for a while, ``crash`` kills daemons (SIGKILL: no shutdown, storage kept)
and starts them again after ``for_seconds``. Not run here, and listed in the report's ``skipped``: ``skew`` (a real
daemon's clock is the machine's), member removals, hydrates and adversaries (their checks need the simulator's view of
every node's state), and the network's ``duplicate`` and ``reorder`` (a TCP stream has neither).

**Who writes what.** A devices shape's assets are owned by a user named after the shape; a subnet or tenant shape's by
``u-<shape>``, with the shape's name as tenant; the public swarm's are ``public`` and ask for the swarm. Each daemon's
local principal is the owner of its shape's assets, so its own reads through its socket answer for what it holds.

**Checks.** After every step (``checks.step_seconds``): every daemon is alive unless a crash fault stopped it, and
every acknowledged write is readable on its writer (``Get`` over the writer's socket; a crashed writer is checked when
it is back). After the workload: every link up, every daemon running, then **liveness**: every member of each
boundary holds every live asset of it and none of its deleted ones, within ``converge_within_seconds``. Then every
daemon stops and every store is opened: **leaks** count assets a node holds outside what it wrote and the boundaries it
is a member of (a stranger holds nothing; a relay holds no asset, and a raw scan of its files finds none of the words
of its boundary's assets); **lost acknowledged writes** count live acknowledged assets missing from a member or their
writer. A failure raises :class:`~simulations.errors.InvariantBroken` naming the seed and the step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from gaml.crdt.p2p import peer_id_of
from gaml.node.core.replica import Replica
from gaml.node.home import init_home, open_node, read_config, write_config
from gaml.node.serve.client import Client
from gaml.node.shells.file_keychain import Unlock
from gaml.policy.access import Principal
from gaml.policy.errors import GamlError, NotFound
from gaml.simulations.errors import InvariantBroken
from gaml.simulations.lan import Lan
from gaml.simulations.scenario import Scenario

ROOT: Final = Path(__file__).resolve().parents[1]
PORT: Final = 4001
PROXY_BASE: Final = 20000
START_S: Final = 120.0
POLL_S: Final = 0.2
KEY: Final = bytes(range(32))  # the homes' keychain key (throwaway homes in a temporary directory)


@dataclasses.dataclass
class RealNode:
    index: int
    name: str
    role: str  # member, relay or stranger
    shapes: list[str]  # the shapes (boundaries) it is a member or relay of
    principal: str
    home: Path = Path()
    node_id: str = ""
    process: subprocess.Popen[bytes] | None = None
    crashed_until: float = 0.0


@dataclasses.dataclass
class Written:
    id: str
    shape: str  # "" for local-only
    writer: int
    word: str
    deleted: bool = False


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(12))


def plan_nodes(sc: Scenario, max_nodes: int) -> tuple[list[RealNode], dict[str, dict[str, Any]]]:
    """The scaled-down topology: nodes with roles, and per shape its kind, members and relays (node indexes)."""
    strangers = 1 if sc.strangers else 0
    shapes = [b for b in sc.boundaries if b.kind != "public"]
    public = next((b for b in sc.boundaries if b.kind == "public"), None)
    need = sum(2 + (1 if s.relays else 0) for s in shapes) + strangers + (2 if public and not public.include else 0)
    if need > max_nodes:
        raise InvariantBroken(
            f"the real mode needs {need} nodes for this scenario's shapes; --max-nodes is {max_nodes}"
        )
    size = {s.name: 2 for s in shapes}
    left = max_nodes - need
    while left > 0 and any(size[s.name] < s.members for s in shapes):
        for s in shapes:
            if left and size[s.name] < s.members:
                size[s.name] += 1
                left -= 1
    nodes: list[RealNode] = []
    layout: dict[str, dict[str, Any]] = {}

    def add(role: str, shape: str, principal: str) -> int:
        nodes.append(RealNode(len(nodes), f"n{len(nodes)}", role, [shape] if shape else [], principal))
        return len(nodes) - 1

    for s in shapes:
        owner = s.name if s.kind == "devices" else f"u-{s.name}"
        members = [add("member", s.name, owner) for _ in range(size[s.name])]
        relays = [add("relay", s.name, "relay") for _ in range(1 if s.relays else 0)]
        layout[s.name] = {"kind": s.kind, "owner": owner, "members": members, "relays": relays}
    if public is not None:
        own = [] if public.include else [add("member", public.name, "public") for _ in range(2)]
        members = own + [i for inc in public.include for i in layout[inc]["members"]]
        for i in members:
            if public.name not in nodes[i].shapes:
                nodes[i].shapes.append(public.name)
        layout[public.name] = {"kind": "public", "owner": "", "members": sorted(members), "relays": []}
    for _ in range(strangers):
        add("stranger", "", "stranger")
    return nodes, layout


def links_of(nodes: list[RealNode], layout: dict[str, dict[str, Any]], rng: random.Random) -> list[tuple[int, int]]:
    """Every pair that shares a boundary (members and relays), and each stranger to two nodes."""
    pairs: set[tuple[int, int]] = set()
    for shape in layout.values():
        group = sorted(set(shape["members"]) | set(shape["relays"]))
        pairs |= {(a, b) for a in group for b in group if a < b}
    for n in nodes:
        if n.role == "stranger":
            others = [m.index for m in nodes if m.index != n.index]
            for o in rng.sample(others, min(2, len(others))):
                pairs.add((min(n.index, o), max(n.index, o)))
    return sorted(pairs)


def _client(node: RealNode) -> Client:
    return Client.unix(node.home / "run" / "gaml.sock", timeout_s=30)


class World:
    """The running real world: the LAN, the proxy, the daemons."""

    def __init__(self, sc: Scenario, seed: int, base: Path, max_nodes: int) -> None:
        self.sc, self.seed, self.base = sc, seed, base
        self.rng = random.Random(f"real/{sc.name}/{seed}")
        self.nodes, self.layout = plan_nodes(sc, max_nodes)
        self.links = links_of(self.nodes, self.layout, self.rng)
        self.lan = Lan(len(self.nodes))
        self.proxy: subprocess.Popen[bytes] | None = None
        self.control = base / "proxy.sock"
        self.unlock = Unlock(key=KEY)
        self.step = 0
        self.flaps: list[tuple[float, list[int]]] = []  # (when, links) a flap brings back up

    # -- setup ---------------------------------------------------------------------------------------------------

    def make_homes(self) -> None:
        for n in self.nodes:
            n.home = self.base / n.name
            n.node_id = init_home(n.home, self.unlock, embedder="hash")
            # Every link goes through its proxy: no swarm node may dial another directly at an address it heard of.
            cfg = read_config(n.home, overrides=False)
            cfg["p2p"] = {**(cfg.get("p2p") or {}), "rendezvous": False}
            write_config(n.home, cfg)
            if n.principal not in ("relay", "stranger"):
                tenants = {s for s in n.shapes if self.layout[s]["kind"] in ("subnet", "tenant")}
                node = open_node(n.home, self.unlock)
                try:
                    node.governance.add_principal(Principal(n.principal, tenants=frozenset(tenants)))
                finally:
                    node.close(checkpoint=False)
        for name, shape in self.layout.items():
            if shape["kind"] == "public":
                for i in shape["members"]:
                    with self._replica(i) as rep:
                        rep.join_swarm(name, 0)
            else:
                self._boundary(name, shape)

    def _boundary(self, name: str, shape: dict[str, Any]) -> None:
        """What `gaml pair` / `gaml subnet create, invite, join` do, in process: the first member administers it."""
        label = shape["owner"] if shape["kind"] == "devices" else name
        now = time.time_ns() // 1000
        invites: list[tuple[int, bytes]] = []
        with self._replica(shape["members"][0]) as rep:
            bid = rep.create(shape["kind"], f"{name}-{shape['kind']}", label, now).id
            for role, key in (("member", "members"), ("relay", "relays")):
                for i in shape[key][1 if role == "member" else 0 :]:
                    invites.append((i, rep.invite(bid, self.nodes[i].node_id, role, now).encode()))
        for i, roster in invites:
            with self._replica(i) as rep:
                rep.join(roster, now)

    @contextlib.contextmanager
    def _replica(self, i: int) -> Iterator[Replica]:
        node = open_node(self.nodes[i].home, self.unlock)
        try:
            yield Replica(node)
        finally:
            node.close(checkpoint=False)

    def start_proxy(self) -> None:
        specs = [
            {"id": k, "listen": [self.lan.bridge_ip, PROXY_BASE + k], "target": [self.lan.ip(b), PORT]}
            for k, (_, b) in enumerate(self.links)
        ]
        cfg = {"links": specs, "delay_ms": list(self.sc.network.delay_ms), "drop": self.sc.network.drop}
        cfg["seed"] = self.seed
        path = self.base / "proxy.json"
        path.write_text(json.dumps(cfg))
        cmd = [*self.lan.exec(self.lan.bridge), sys.executable, "-m", "gaml.simulations.proxy"]
        self.proxy = subprocess.Popen(
            [*cmd, "--config", str(path), "--control", str(self.control)],
            stdout=subprocess.PIPE,
            env=_env(),
            cwd=ROOT,
        )
        assert self.proxy.stdout is not None
        if self.proxy.stdout.readline().strip() != b"ready":
            raise InvariantBroken(f"seed {self.seed}: the link proxy did not start")

    def command(self, cmd: dict[str, Any]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(self.control))
            s.sendall((json.dumps(cmd) + "\n").encode())
            out: dict[str, Any] = json.loads(s.makefile().readline())
            return out

    def start(self, n: RealNode) -> None:
        args = ["--home", str(n.home), "run", "--principal", n.principal, "--grace", "5"]
        args += ["--p2p", f"/ip4/{self.lan.ip(n.index)}/tcp/{PORT}"]
        for k, (a, b) in enumerate(self.links):
            if a == n.index:  # the lower end dials, through the link's proxy
                peer = peer_id_of(self.nodes[b].node_id)
                args += ["--peer", f"/ip4/{self.lan.bridge_ip}/tcp/{PROXY_BASE + k}/p2p/{peer}"]
        log = open(self.base / f"{n.name}.log", "ab")  # noqa: SIM115 (the child holds it)
        n.process = subprocess.Popen(
            [*self.lan.exec(self.lan.hosts[n.index]), sys.executable, "-m", "gaml.node.cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=_env(),
            cwd=ROOT,
        )
        log.close()

    def wait_serving(self, n: RealNode) -> None:
        end = time.monotonic() + START_S
        while True:
            try:
                with contextlib.closing(_client(n)) as c:
                    c.status(timeout_s=2)
                return
            except GamlError:
                pass
            if n.process is not None and n.process.poll() is not None:
                raise InvariantBroken(f"seed {self.seed}: {n.name}'s daemon exited ({self._tail(n)})")
            if time.monotonic() > end:
                raise InvariantBroken(f"seed {self.seed}: {n.name}'s daemon did not serve in {START_S:.0f} s")
            time.sleep(POLL_S)

    def _tail(self, n: RealNode) -> str:
        with contextlib.suppress(OSError):
            return (self.base / f"{n.name}.log").read_text(errors="replace")[-600:]
        return ""

    def kill(self, n: RealNode) -> None:
        if n.process is not None and n.process.poll() is None:
            n.process.send_signal(signal.SIGKILL)
            n.process.wait(60)

    def stop(self, n: RealNode) -> None:
        if n.process is not None and n.process.poll() is None:
            n.process.send_signal(signal.SIGTERM)
            try:
                n.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill(n)

    def close(self) -> None:
        for n in self.nodes:
            self.kill(n)
        if self.proxy is not None:
            self.proxy.kill()
            self.proxy.wait(30)
        self.lan.close()


def _env() -> dict[str, str]:
    env = {**os.environ, "GAML_KEYCHAIN_KEY": KEY.hex(), "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT))}
    env.pop("GAML_PASSPHRASE", None)
    env.pop("GAML_HOME", None)
    return env


def _readable(c: Client, id_: str) -> bool | None:
    """Whether ``id_`` reads through a node's socket client (None: the daemon did not answer)."""
    try:
        c.get(id_, timeout_s=10)
        return True
    except NotFound:
        return False
    except GamlError:
        return None


@contextlib.contextmanager
def _world(sc: Scenario, seed: int, base: Path, max_nodes: int) -> Iterator[World]:
    w = World(sc, seed, base, max_nodes)
    try:
        yield w
    finally:
        w.close()


def run(sc: Scenario, seed: int, base: Path, *, max_nodes: int = 8, assets_per_node: int = 15) -> dict[str, Any]:
    """Run ``sc`` for ``seed`` on real daemons under ``base`` (a fresh directory); the report."""
    if not 4 <= max_nodes <= 8:
        raise InvariantBroken(f"the real mode runs 4 to 8 daemons, not {max_nodes}")
    t_start = time.perf_counter()
    with _world(sc, seed, base, max_nodes) as w:
        rng = w.rng
        w.make_homes()
        w.start_proxy()
        for n in w.nodes:
            w.start(n)
        for n in w.nodes:
            w.wait_serving(n)
        writers = [n for n in w.nodes if n.role == "member"]
        scale = min(1.0, assets_per_node * len(w.nodes) / max(1, sc.workload.assets))
        counts = {k: round(getattr(sc.workload, k) * scale) for k in ("assets", "local_only", "edits", "deletes")}
        counts["assets"] = max(counts["assets"], 2 * len(w.layout))
        events: list[tuple[float, str, Any]] = []
        for kind in ("assets", "local_only", "edits", "deletes"):
            events += [(rng.uniform(0, sc.seconds), kind, None) for _ in range(counts[kind])]
        skipped = sorted(
            {f"fault {f.kind}" for f in sc.faults if f.kind == "skew"}
            | ({"removals"} if sc.workload.removals else set())
            | ({"hydrates"} if sc.workload.hydrates else set())
            | ({"adversaries"} if sc.adversaries.share or sc.adversaries.sybils else set())
            | ({"replayers and forgers"} if sc.adversaries.replayers or sc.adversaries.forgers else set())
            | ({"duplicate and reorder (TCP has neither)"} if sc.network.duplicate or sc.network.reorder else set())
        )
        for f in sc.faults:
            if f.kind != "skew":
                events.append((f.at, "fault", f))
        events.sort(key=lambda e: (e[0], e[1]))
        digest = hashlib.sha256(
            json.dumps(
                [[round(t, 6), k, f.model_dump() if f is not None else None] for t, k, f in events]
                + [[n.role, n.shapes] for n in w.nodes]
                + [list(link) for link in w.links]
            ).encode()
        ).hexdigest()
        written: list[Written] = []
        down: set[int] = set()
        t0 = time.monotonic()
        next_check = sc.checks.step_seconds
        timeline: list[dict[str, Any]] = []

        def restart_due() -> None:
            for when, ks in [f for f in w.flaps if time.monotonic() - t0 >= f[0]]:
                w.flaps.remove((when, ks))
                w.command({"up": [k for k in ks if k not in down]})  # a partition since keeps its own
            for n in w.nodes:
                if n.crashed_until and time.monotonic() - t0 >= n.crashed_until:
                    n.crashed_until = 0.0
                    w.start(n)
                    w.wait_serving(n)

        def check(phase: str) -> None:
            w.step += 1
            for n in w.nodes:
                if not n.crashed_until and n.process is not None and n.process.poll() is not None:
                    raise InvariantBroken(f"seed {seed} step {w.step}: {n.name}'s daemon died ({w._tail(n)})")
            lost = 0
            clients = {n.index: _client(n) for n in w.nodes if n.role == "member" and not n.crashed_until}
            try:
                for x in written:
                    c = clients.get(x.writer)
                    if c is not None and not x.deleted and _readable(c, x.id) is False:
                        lost += 1
            finally:
                for c in clients.values():
                    c.close()
            timeline.append({"t": round(time.monotonic() - t0, 3), "phase": phase, "lost": lost, "leaks": 0})
            if lost:
                raise InvariantBroken(
                    f"seed {seed} step {w.step}: {lost} acknowledged writes unreadable on their writer"
                )

        for at, kind, fault in events:
            while time.monotonic() - t0 < at:
                restart_due()
                if time.monotonic() - t0 >= next_check:
                    check("workload")
                    next_check += sc.checks.step_seconds
                time.sleep(min(POLL_S, max(0.0, at - (time.monotonic() - t0))))
            live = [n for n in writers if not n.crashed_until]
            if kind in ("assets", "local_only") and live:
                n = rng.choice(live)
                shapes = [s for s in n.shapes if s in w.layout]
                shape = rng.choice(shapes) if kind == "assets" and shapes else ""
                word = _word(rng)
                d = _draft(w, n, shape, word)
                with contextlib.suppress(GamlError), contextlib.closing(_client(n)) as c:
                    (id_,) = c.put([d])
                    written.append(Written(id_, shape, n.index, word))
            elif kind == "edits":
                mine = [x for x in written if x.shape and not x.deleted and not w.nodes[x.writer].crashed_until]
                if mine:
                    x = rng.choice(mine)
                    n = w.nodes[x.writer]
                    d = _draft(w, n, x.shape, x.word) | {"tags": [f"edit-{rng.randrange(1000)}"]}
                    with contextlib.suppress(GamlError), contextlib.closing(_client(n)) as c:
                        c.put([d])
            elif kind == "deletes":
                mine = [x for x in written if not x.deleted and not w.nodes[x.writer].crashed_until]
                if mine:
                    x = rng.choice(mine)
                    with contextlib.suppress(GamlError), contextlib.closing(_client(w.nodes[x.writer])) as c:
                        c.forget(x.id)
                        x.deleted = True
            elif kind == "fault":
                _fault(w, fault, rng, down, t0)
        workload_s = time.monotonic() - t0
        # Liveness: every link up, every daemon back, then members converge.
        flapped = {k for _, ks in w.flaps for k in ks}
        w.flaps.clear()
        if down or flapped:
            w.command({"up": sorted(down | flapped)})
            down.clear()
        for n in w.nodes:
            if n.crashed_until:
                n.crashed_until = 0.0
                w.start(n)
                w.wait_serving(n)
        check("heal")
        t_heal = time.monotonic()
        converged, missing = False, -1
        while time.monotonic() - t_heal < sc.checks.converge_within_seconds:
            missing = _unconverged(w, written)
            if missing == 0:
                converged = True
                break
            time.sleep(1.0)
        convergence_s = round(time.monotonic() - t_heal, 3)
        check("liveness")
        stats = w.command({"stats": True})
        for n in w.nodes:
            w.stop(n)
        leaks, lost, detail = _final(w, written)
    wall = time.perf_counter() - t_start
    result = {
        "mode": "real",
        "scenario": sc.name,
        "seed": seed,
        "nodes": len(w.nodes),
        "steps": w.step,
        "sim_seconds": round(workload_s, 3),
        "wall_seconds": round(wall, 3),
        "sim_rate": round(workload_s / wall, 4),
        "leaks": leaks,
        "lost_acknowledged_writes": lost,
        "converged": converged,
        "convergence_sim_seconds": convergence_s if converged else None,
        "unconverged_at_deadline": 0 if converged else missing,
        "poisoned_frame_share": None,
        "adversary_share": 0.0,
        "trace_digest": digest,
        "written": len(written),
        "deleted": sum(x.deleted for x in written),
        "links": len(w.links),
        "proxy": stats.get("links", {}),
        "topology": {
            k: {"kind": v["kind"], "members": len(v["members"]), "relays": len(v["relays"])}
            for k, v in w.layout.items()
        },
        "skipped": skipped,
        "detail": detail,
        "timeline": timeline,
    }
    if leaks or lost or not converged:
        why = f"{leaks} leaks, {lost} lost acknowledged writes, converged {converged}"
        err = InvariantBroken(f"seed {seed}, after the run: {why}; {json.dumps(detail)[:800]}")
        err.report = result  # type: ignore[attr-defined]
        raise err
    return result


def _draft(w: World, n: RealNode, shape: str, word: str) -> dict[str, Any]:
    text = f"note {word} from {n.name}"
    if not shape:
        return {"asset_type": "fact", "payload": {"text": text}, "owner_id": n.principal, "privacy_scope": "local_only"}
    kind = w.layout[shape]["kind"]
    if kind == "public":
        scope, policy, tenant = "public", "public_swarm", ""
    elif kind == "devices":
        scope, policy, tenant = "user_private", "trusted_devices", ""
    elif kind == "subnet":
        scope, policy, tenant = "enterprise_private", "private_subnet", shape
    else:
        scope, policy, tenant = "tenant_private", "tenant_nodes", shape
    d = {"asset_type": "fact", "payload": {"text": text}, "owner_id": n.principal, "privacy_scope": scope}
    d["replication_policy"] = policy
    if tenant:
        d["tenant_scope"] = tenant
    return d


def _fault(w: World, f: Any, rng: random.Random, down: set[int], t0: float) -> None:
    if f.kind == "partition":
        order = list(range(len(w.nodes)))
        rng.shuffle(order)
        group = {i: k % f.groups for k, i in enumerate(order)}
        cut = {k for k, (a, b) in enumerate(w.links) if group[a] != group[b]}
        w.command({"down": sorted(cut)})
        down |= cut
    elif f.kind == "heal":
        if down:
            w.command({"up": sorted(down)})
            down.clear()
    elif f.kind == "flap":
        ks = [k for k in rng.sample(range(len(w.links)), min(f.links, len(w.links))) if k not in down]
        w.command({"down": ks})
        w.flaps.append(((time.monotonic() - t0) + f.for_seconds, ks))
    elif f.kind == "crash":
        alive = [n for n in w.nodes if not n.crashed_until]
        for n in rng.sample(alive, min(f.nodes, len(alive))):
            w.kill(n)
            n.crashed_until = (time.monotonic() - t0) + f.for_seconds


def _unconverged(w: World, written: list[Written]) -> int:
    """(member, asset) pairs still wrong: a live asset a member cannot read, or a deleted one it still can."""
    wrong = 0
    clients = {n.index: _client(n) for n in w.nodes if n.role == "member"}
    try:
        for x in written:
            for i in w.layout[x.shape]["members"] if x.shape else ():
                got = _readable(clients[i], x.id)
                if got is None or got == x.deleted:
                    wrong += 1
    finally:
        for c in clients.values():
            c.close()
    return wrong


def _final(w: World, written: list[Written]) -> tuple[int, int, dict[str, Any]]:
    """Open every store (daemons stopped): leaks, lost acknowledged writes, and what they were."""
    by_id = {x.id: x for x in written}
    leaks: list[str] = []
    lost: list[str] = []
    for n in w.nodes:
        node = open_node(n.home, w.unlock)
        try:
            live = set(node.store.live_ids())
        finally:
            node.close(checkpoint=False)
        member_of = {s for s in n.shapes if n.index in w.layout[s]["members"]}
        for id_ in live:
            x = by_id.get(id_)
            if x is None:
                continue  # the node's own derived records (consensus, curation): not a workload asset
            if x.writer != n.index and x.shape not in member_of:
                leaks.append(f"{n.name} ({n.role}) holds {id_[:12]} of {x.shape or 'local-only'}")
        for x in written:
            should = not x.deleted and (x.writer == n.index or (x.shape and x.shape in member_of))
            if should and x.id not in live:
                lost.append(f"{n.name} lacks {x.id[:12]} of {x.shape or 'local-only'}")
        if n.role in ("relay", "stranger"):
            words = {x.word.encode() for x in written if x.writer != n.index}
            for path in n.home.rglob("*"):
                if path.is_file() and not path.is_symlink():
                    data = path.read_bytes()
                    leaks += [f"{n.name} ({n.role}) file {path.name} holds a word" for wd in words if wd in data]
    return len(leaks), len(lost), {"leaks": leaks[:20], "lost": lost[:20]}


__all__ = ["plan_nodes", "run"]
