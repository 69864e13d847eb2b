"""The scenario harness: many real nodes (the core over in-memory fakes) on a simulated network, driven by a
scenario file (simulations/scenario.py) and one seed, with faults, adversaries and checks after every step.

``python -m simulations run --scenario FILE --seed N [--seeds K] [--json OUT] [--plot OUT]`` runs it.

A run has three phases, in simulated time (microseconds, the unit of ``now`` in the core; nothing reads a clock):

1. **History** (``workload.history_days``, optional): the boundaries are created, members admitted two hours apart
   (admissions within an hour count as one source to consensus), and honest members assert the contested slots'
   true values, each in their own words, so reputations exist before anyone attacks. Farming adversaries take part.
2. **Workload** (``seconds``), in steps of ``checks.step_seconds``: puts, local-only puts, edits (one or two members
   at once), deletes, member removals, hydrations by honest members, the poisoners' claims, and the scenario's
   faults, each at its scheduled time; frames are dropped, duplicated, reordered and delayed by the network.
   Replayers re-send old frames; forgers offer objects signed in another member's name.
3. **Liveness**: every fault is healed (partitions, links, crashed nodes restarted), and the network runs in steps
   until every remaining member of every boundary holds exactly the assets it must, with equal records, or until
   ``checks.converge_within_seconds`` have passed (a failure).

**Safety**, checked after every step of phases 2 and 3 (a failure raises :class:`InvariantBroken` naming the seed
and the step):

- *nothing outside its boundary*: no node holds a live asset of a boundary it never belonged to, or another node's
  local-only asset; relays and strangers materialize nothing, and a raw scan of every byte they store finds no
  plaintext marker (relays are curious: they keep everything they are sent);
- *revocation*: a removed member holds nothing written by a member that had already adopted its removal, and no
  member that had adopted it before the removed node wrote holds what it wrote after;
- *no acknowledged write lost*: every write a node acknowledged (a put that returned) is held by its writer (after
  a crash-restart too) until it is deleted; after liveness, by every member of its boundary;
- *no forgery accepted*: no node holds an asset a forger made up;
- *poisoning*: the share of honest frames holding a poison claim stays within ``checks.max_poisoned_frame_share``
  (checked at the end, over every frame of the run).

Determinism: every choice comes from ``random.Random`` seeded from the seed, in a fixed order; the report's
``trace_digest`` covers every delivered frame (time, ends, bytes) and every workload event, so the same seed gives
the same digest (a test runs one seed twice).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any, Final

from gaml.crdt import wire
from gaml.crdt.errors import BadMessage
from gaml.crdt.objects import HEADER_BYTES, SIGN_TAG, SNAPSHOT, object_id, open_object
from gaml.crdt.swarm import swarm_boundary
from gaml.crdt.sync import BACKOFF_MAX, Sync
from gaml.node.core.consensus import DAY_US, Consensus, Weights
from gaml.node.core.hydrate import HydrationRequest, Hydrator
from gaml.node.core.replica import Replica, record_of
from gaml.node.core.store.kv import MemoryKV
from gaml.policy import crypto
from gaml.policy.access import Principal
from gaml.policy.errors import GamlError, NotFound
from gaml.policy.keychain import MemoryKeychain
from gaml.simulations.errors import InvariantBroken
from gaml.simulations.net import US_PER_MS, US_PER_S, SimNetwork
from gaml.simulations.nodes import draft, make_node
from gaml.simulations.scenario import BoundaryShape, Scenario

HOUR_US: Final = 3_600 * US_PER_S
TICK_US: Final = 100 * US_PER_MS
RETRY_US: Final = 1 * US_PER_S
QUIET_US: Final = (2**BACKOFF_MAX + 2) * RETRY_US
READER: Final = "reader"
ATTRIBUTES: Final = ("status", "owner", "location", "version", "region", "budget")
WORDS: Final = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo")
REPLAY_KEEP: Final = 64  # frames a replayer remembers
REPLAY_P: Final = 0.2  # chance per tick that a replayer re-sends one
FORGE_P: Final = 0.05  # chance per tick that a forger makes a forged object
BUDGET: Final = 300  # tokens per frame
LOCAL_SHAPES: Final = (
    {"privacy_scope": "local_only"},
    {"privacy_scope": "public", "replication_policy": "trusted_devices"},
    {
        "privacy_scope": "user_private",
        "inference_policy": "public_with_redaction",
        "replication_policy": "public_swarm",
    },
)


@dataclasses.dataclass
class Instance:
    """One boundary of the world."""

    name: str
    shape: BoundaryShape
    members: list[str]  # the first is the admin
    relays: list[str]
    bid: bytes = b""
    removed: dict[str, int] = dataclasses.field(default_factory=dict)  # node -> the epoch that dropped it

    @property
    def kind(self) -> str:
        return self.shape.kind

    @property
    def label(self) -> str:
        return self.name

    @property
    def contested(self) -> bool:
        return self.kind != "devices"

    def draft(self, text: str, **payload: Any) -> dict[str, Any]:
        owner = f"{self.label}-kb" if self.kind in ("subnet", "tenant") else ""
        return draft(self.kind, self.label, {"text": text, **payload}, owner)


@dataclasses.dataclass
class Write:
    """An acknowledged write: a put that returned."""

    id: str
    writer: str
    inst: str  # the boundary instance's name ("" for local-only)
    at: int
    epoch: int  # the writer's epoch of that boundary when it wrote
    adopted: frozenset[str] = frozenset()  # (removed writers only) members that had adopted its removal by then


class Host:
    """One node on the simulated network: its storage and keychain (kept across a crash), and while it is up, its
    replica and sync engine. Adversaries misbehave here, on the wire."""

    def __init__(self, world: World, name: str, seed: int, role: str) -> None:
        self.world, self.name, self.seed, self.role = world, name, seed, role
        self.kv = MemoryKV()
        self.keychain = MemoryKeychain()
        self.incarnation = 0
        self.skew_us = 0
        self.up = True
        self.bytes_in = self.bytes_out = 0
        self.heard: list[bytes] = []
        self.rng = random.Random(seed)
        self.forged: dict[str, dict[bytes, bytes]] = {}  # peer -> forged oid -> object (to offer it)
        self.replica = self._boot(keychain=None)
        self.node_id = self.replica.node_id
        self.sync = self._sync()
        self.consensus: Consensus | None = None

    def _boot(self, keychain: MemoryKeychain | None) -> Replica:
        node = make_node(self.seed, kv=self.kv, keychain=keychain, incarnation=self.incarnation)
        self.keychain = node.store.keychain  # type: ignore[assignment]
        return Replica(node)

    def _sync(self) -> Sync:
        entropy = crypto.SeededEntropy(self.seed * 7_919 + self.incarnation)
        return Sync(self.replica, entropy, retry_after=RETRY_US)

    def now(self) -> int:
        return self.world.net.clock.now() + self.skew_us

    def crash(self) -> None:
        self.up = False
        self.consensus = None
        self.kv.close()

    def restart(self) -> None:
        self.incarnation += 1
        self.kv = self.kv.reopened()
        self.replica = self._boot(self.keychain)
        self.sync = self._sync()
        self.up = True

    # -- the network's Endpoint ----------------------------------------------------------------------------------

    def _out(self, effects: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
        out = []
        for peer, frame in effects:
            if self.role == "forger":
                frame = self._announce_forged(peer, frame)
            self.bytes_out += len(frame)
            out.append((self.world.name_of[peer], frame))
        return out

    def connected(self, peer: str, now: int) -> list[tuple[str, bytes]]:
        if not self.up:
            return []
        return self._out(self.sync.connected(self.world.hosts[peer].node_id, now + self.skew_us))

    def received(self, peer: str, frame: bytes, now: int) -> list[tuple[str, bytes]]:
        if not self.up:
            return []
        self.bytes_in += len(frame)
        pid = self.world.hosts[peer].node_id
        extra: list[tuple[str, bytes]] = []
        if self.role == "replayer":
            self.heard.append(frame)
            del self.heard[:-REPLAY_KEEP]
        elif self.role == "forger":
            frame, extra = self._serve_forged(pid, frame)
        return self._out(self.sync.received(pid, frame, now + self.skew_us) + extra)

    def disconnected(self, peer: str) -> None:
        if self.up:
            self.sync.disconnected(self.world.hosts[peer].node_id)

    def tick(self, now: int) -> list[tuple[str, bytes]]:
        if not self.up:
            return []
        now += self.skew_us
        self.replica.pump(now)
        out = self.sync.tick(now)
        if self.role == "replayer" and self.world.attacking and self.heard and self.rng.random() < REPLAY_P:
            peers = sorted(self.world.links_of(self.name))
            if peers:
                target = self.world.hosts[self.rng.choice(peers)].node_id
                out.append((target, self.rng.choice(self.heard)))
                self.world.counters["replayed_frames"] += 1
        if self.role == "forger" and self.world.attacking and self.rng.random() < FORGE_P:
            self._forge()
        return self._out(out)

    # -- forging -----------------------------------------------------------------------------------------------------

    def _forge(self) -> None:
        """Make an object for one of my boundaries that names another member as its writer, signed by me."""
        rep = self.replica
        for bid in rep.boundary_ids():
            b = rep.bound(bid)
            others = [m.node for m in b.roster.members if m.node != self.node_id and m.role == "member"]
            oids = rep.objects_of(bid)
            if not others or not oids or not b.keys:
                continue
            obj = rep.objects(bid, [self.rng.choice(oids)])
            if not obj:
                continue
            try:
                opened = open_object(obj[0], b.keys)
            except GamlError:
                continue
            if opened.kind != SNAPSHOT:
                continue
            fake_id = self.rng.randbytes(16).hex()
            header = obj[0][:HEADER_BYTES]
            body = SNAPSHOT + bytes.fromhex(fake_id) + opened.data
            victim = bytes.fromhex(self.rng.choice(others))
            signature = rep.identity.sign(SIGN_TAG + header + body)  # mine, under another member's name
            forged = header + crypto.seal(b.keys[opened.epoch], victim + signature + body, header, rep.entropy)
            for peer in self.world.links_of(self.name):
                self.forged.setdefault(self.world.hosts[peer].node_id, {})[object_id(forged)] = forged
            self.world.forged_ids.add(fake_id)
            self.world.counters["forged_objects"] += 1
            return

    def _announce_forged(self, peer: str, frame: bytes) -> bytes:
        offers = self.forged.get(peer)
        if not offers:
            return frame
        try:
            msg = wire.decode(frame)
        except BadMessage:
            return frame
        if not isinstance(msg, wire.Have) or len(msg.ids) >= 2:
            return frame
        ids = tuple(sorted(offers))[:4]
        return wire.encode(wire.Have(msg.tag, (*msg.ids, *ids), msg.upto))

    def _serve_forged(self, peer: str, frame: bytes) -> tuple[bytes, list[tuple[str, bytes]]]:
        offers = self.forged.get(peer)
        if not offers:
            return frame, []
        try:
            msg = wire.decode(frame)
        except BadMessage:
            return frame, []
        if not isinstance(msg, wire.Need):
            return frame, []
        mine = [i for i in msg.ids if i in offers]
        if not mine:
            return frame, []
        rest = tuple(i for i in msg.ids if i not in offers)
        send = wire.encode(wire.Send(msg.tag, tuple(offers.pop(i) for i in mine)))
        return wire.encode(wire.Need(msg.tag, rest)), [(peer, send)]


class World:
    """The nodes, boundaries and bookkeeping of one run (see the module docstring)."""

    def __init__(self, scenario: Scenario, seed: int) -> None:
        self.sc, self.seed = scenario, seed
        self.rng = random.Random(seed)
        net = scenario.network
        self.net = SimNetwork(
            seed,
            drop=net.drop,
            duplicate=net.duplicate,
            reorder=net.reorder,
            delay_us=(net.delay_ms[0] * US_PER_MS, net.delay_ms[1] * US_PER_MS),
            tick_us=TICK_US,
        )
        self.hosts: dict[str, Host] = {}
        self.name_of: dict[str, str] = {}
        self.instances: list[Instance] = []
        self.counters: Counter[str] = Counter()
        self.events = hashlib.sha256(f"seed={seed} scenario={scenario.name}".encode())
        self.writes: dict[str, Write] = {}
        self.local: dict[str, str] = {}  # local-only asset id -> its writer
        self.drafts: dict[str, dict[str, Any]] = {}
        self.deleted: dict[str, str] = {}  # asset id -> the member that deleted it
        self.forged_ids: set[str] = set()
        self.poison: dict[str, tuple[str, str]] = {}  # asset id -> (instance, slot subject)
        self.honest_claims: dict[str, tuple[str, str]] = {}
        self.slots: dict[str, list[tuple[str, str, str]]] = {}  # instance -> (subject, attribute, true value)
        self.frames: list[tuple[bool, bool]] = []  # (poisoned, honest claim shown) per hydrated frame
        self.baseline: list[bool] = []  # poisoned, the same final frames without consensus
        self.timeline: list[dict[str, Any]] = []
        self.attacking = False  # replayers and forgers act during the workload and the liveness phase
        self.pending: list[tuple[int, str, list[Any]]] = []  # recoveries due: (time, restart | relink, what)
        self.step = 0
        self.start = 0  # the workload's start (microseconds)
        self.marker = f"zq{seed}x"
        self._links: dict[str, set[str]] = {}
        self._build()

    # -- building ----------------------------------------------------------------------------------------------------

    def _host(self, role: str) -> str:
        name = f"n{len(self.hosts):03d}"
        h = Host(self, name, self.seed * 100_003 + len(self.hosts), role)
        self.hosts[name] = h
        self.name_of[h.node_id] = name
        self.net.add(name, h)
        self._links[name] = set()
        return name

    def _build(self) -> None:
        sc, rng = self.sc, self.rng
        for shape in sc.boundaries:
            for k in range(shape.count):
                label = shape.name if shape.count == 1 else f"{shape.name}{k}"
                members = [self._host("honest") for _ in range(shape.members)]
                relays = [self._host("relay") for _ in range(shape.relays)]
                self.instances.append(Instance(label, shape, members, relays))
        for inst in self.instances:
            for name in inst.shape.include:
                for other in self.instances:
                    if other.shape.name == name:
                        inst.members.extend(m for m in other.members if m not in inst.members)
        for _ in range(sc.strangers):
            self._host("stranger")
        contested = [i for i in self.instances if i.contested]
        pool = sorted({m for i in contested for m in i.members if not self._is_admin(m)})
        rng.shuffle(pool)
        n_poison = round(len(pool) * sc.adversaries.share)
        for m in pool[:n_poison]:
            self.hosts[m].role = "poisoner"
        spare = [m for m in sorted(self.hosts) if self.hosts[m].role == "honest" and not self._is_admin(m)]
        rng.shuffle(spare)
        for role, n in (("replayer", sc.adversaries.replayers), ("forger", sc.adversaries.forgers)):
            for m in spare[:n]:
                self.hosts[m].role = role
            spare = spare[n:]
        if sc.adversaries.sybils:
            target = contested[0]
            target.members.extend(self._host("sybil") for _ in range(sc.adversaries.sybils))
        for inst in contested:
            self.slots[inst.name] = [
                (f"{inst.name}-asset-{j}", rng.choice(ATTRIBUTES), f"v{rng.randrange(100)}")
                for j in range(max(1, sc.workload.slots // max(1, len(contested))))
            ]
        self._wire()

    def _is_admin(self, name: str) -> bool:
        return any(i.members[0] == name for i in self.instances if i.kind != "public")

    def _wire(self) -> None:
        """Links: a ring through each boundary's members and relays plus random chords up to ``degree``, and
        ``stranger_links`` per node to nodes it shares no boundary with."""
        rng, degree = self.rng, self.sc.network.degree
        for inst in self.instances:
            ring = inst.members + inst.relays
            for i, a in enumerate(ring):
                self._link(a, ring[(i + 1) % len(ring)])
            for a in ring:
                others = [b for b in ring if b != a and b not in self._links[a]]
                want = max(0, min(degree, len(ring) - 1) - len(self._links[a] & set(ring)))
                for b in rng.sample(others, min(want, len(others))):
                    self._link(a, b)
        names = sorted(self.hosts)
        mates: dict[str, set[str]] = {n: set() for n in names}
        for inst in self.instances:
            group = set(inst.members + inst.relays)
            for n in group:
                mates[n] |= group
        for a in names:
            strangers = [b for b in names if b != a and b not in mates[a] and b not in self._links[a]]
            for b in rng.sample(strangers, min(self.sc.network.stranger_links, len(strangers))):
                self._link(a, b)

    def _link(self, a: str, b: str) -> None:
        if a != b and b not in self._links[a]:
            self._links[a].add(b)
            self._links[b].add(a)

    def links_of(self, name: str) -> set[str]:
        return {b for b in self._links[name] if self.net.is_connected(name, b)}

    def connect_all(self) -> None:
        for a in sorted(self._links):
            for b in sorted(self._links[a]):
                if a < b and not self.net.is_connected(a, b) and self.hosts[a].up and self.hosts[b].up:
                    self.net.connect(a, b)

    def _log(self, *event: object) -> None:
        self.events.update(repr(event).encode())

    def at(self, t: int) -> int:
        if t > self.net.clock.now():
            self.net.skip_to(t)
        return self.net.clock.now()

    def deliver(self) -> None:
        if not self.net.run_until_quiet(self.net.clock.now() + 600 * US_PER_S, QUIET_US):
            raise InvariantBroken(f"seed={self.seed}: the network did not settle in the history: {self.net.stats()}")

    # -- phase 1: boundaries and history -------------------------------------------------------------------------------

    def history(self) -> int:
        """Create the boundaries, admit members two hours apart, write the history; returns the workload's start.

        Fresh poisoners are admitted in the last two hours before the workload, minutes apart; sybils within one
        hour of each other. Farming poisoners are admitted as honest members are, and corroborate the history."""
        sc, rng = self.sc, self.rng
        for inst in self.instances:
            if inst.kind == "public":
                inst.bid = swarm_boundary(inst.name).id
                continue
            admin = self.hosts[inst.members[0]].replica
            inst.bid = admin.create(inst.kind, inst.name, inst.label, 1).id
        self.connect_all()
        self.deliver()
        late = {"sybil"} | ({"poisoner"} if sc.adversaries.mode == "fresh" else set())
        admissions: list[tuple[int, Instance, str, str]] = []
        last = self.net.clock.now()
        for inst in self.instances:
            t = self.net.clock.now()
            for m in (inst.members if inst.kind == "public" else inst.members[1:]) + inst.relays:
                if self.hosts[m].role not in late:
                    t += 2 * HOUR_US
                    admissions.append((t, inst, m, "relay" if m in inst.relays else "member"))
            last = max(last, t)
        days = sc.workload.history_days
        end = max(last + 3 * HOUR_US, days * DAY_US)
        for inst in self.instances:
            t = end - 2 * HOUR_US
            for m in inst.members if inst.kind == "public" else inst.members[1:]:
                role = self.hosts[m].role
                if role == "sybil":
                    admissions.append((end - HOUR_US + rng.randrange(HOUR_US // 2), inst, m, "member"))
                elif role in late:
                    t += rng.randrange(HOUR_US // 60, HOUR_US // 30)
                    admissions.append((t, inst, m, "member"))
        for t, inst, m, role in sorted(admissions, key=lambda a: (a[0], a[2])):
            if inst.kind == "public":  # a swarm member is met when it joins: the network must carry it then
                self.at(t)
                self._admit(inst, m, role, t)
                self.deliver()
            else:
                self._admit(inst, m, role, t)
        writes: list[tuple[int, str, Instance, dict[str, Any]]] = []
        if days:
            lo, hi = last + HOUR_US, end - 3 * HOUR_US
            for inst in self.instances:
                honest = [m for m in inst.members if self.hosts[m].role in ("honest", "replayer", "forger")]
                farmers = [m for m in inst.members if self.hosts[m].role == "poisoner" and "poisoner" not in late]
                for subject, attribute, value in self.slots.get(inst.name, []):
                    t0 = rng.randrange(lo, max(lo + 1, hi - 2 * DAY_US))
                    who = rng.sample(honest, min(len(honest), rng.randint(3, 5)))
                    who += rng.sample(farmers, min(len(farmers), 1))
                    for m in who:
                        text = f"{m} checked {subject}: its {attribute} is {value} (ticket {rng.randrange(10**6)})"
                        draft = inst.draft(text, subject=subject, attribute=attribute, value=value)
                        writes.append((min(hi, t0 + rng.randrange(0, 2 * DAY_US)), m, inst, draft))
        for t, m, inst, draft in sorted(writes, key=lambda w: (w[0], w[1])):
            self.at(t)
            self._put(m, inst, draft, honest_slot=self.hosts[m].role != "poisoner")
        self.at(end)
        self.deliver()
        for h in self.hosts.values():
            labels = frozenset(i.label for i in self.instances if i.contested and h.name in i.members)
            if labels:
                h.replica.node.governance.add_principal(Principal(READER, tenants=labels))
        return self.net.clock.now()

    def _admit(self, inst: Instance, m: str, role: str, t: int) -> None:
        if inst.kind == "public":
            self.hosts[m].replica.join_swarm(inst.name, t)
            self._log("join", inst.name, m, t)
            return
        admin = self.hosts[inst.members[0]].replica
        admin.invite(inst.bid, self.hosts[m].node_id, role, t)
        self.hosts[m].replica.join(admin.roster(inst.bid), t)
        self._log("admit", inst.name, m, t)

    def _put(self, m: str, inst: Instance | None, draft: dict[str, Any], *, honest_slot: bool = False) -> str:
        h = self.hosts[m]
        now = h.now()
        (id_,) = h.replica.node.put([draft], now)
        self._log("put", m, id_, now)
        self.drafts[id_] = draft
        if inst is None:
            self.local[id_] = m
            return id_
        roster = h.replica.roster_of(inst.bid)
        epoch = roster.epoch if roster is not None else 0
        adopted: frozenset[str] = frozenset()
        if m in inst.removed:
            adopted = frozenset(x for x in inst.members if self._epoch(x, inst) >= inst.removed[m])
        self.writes[id_] = Write(id_, m, inst.name, now, epoch, adopted)
        if honest_slot:
            self.honest_claims[id_] = (inst.name, draft["payload"].get("subject", ""))
        return id_

    def _epoch(self, m: str, inst: Instance) -> int:
        roster = self.hosts[m].replica.roster_of(inst.bid) if self.hosts[m].up else None
        return roster.epoch if roster is not None else 0

    # -- phase 2: the workload -----------------------------------------------------------------------------------------

    def schedule(self, start: int) -> list[tuple[int, int, str, Any]]:
        """Every workload event and fault: (time, order, kind, detail), sorted."""
        sc, rng = self.sc, self.rng
        span = int(sc.seconds * US_PER_S)
        out: list[tuple[int, int, str, Any]] = []
        w = sc.workload
        for kind, n in (
            ("put", w.assets),
            ("local", w.local_only),
            ("edit", w.edits),
            ("delete", w.deletes),
            ("remove", w.removals),
            ("hydrate", w.hydrates),
        ):
            for _ in range(n):
                out.append((start + rng.randrange(span), len(out), kind, None))
        if any(self.hosts[m].role in ("poisoner", "sybil") for i in self.instances for m in i.members):
            lo = start + (span // 2 if sc.adversaries.mode == "farming" else 0)
            for inst in self.instances:
                for slot in self.slots.get(inst.name, []):
                    for _ in range(2):
                        out.append((rng.randrange(lo, start + span), len(out), "poison", (inst.name, slot)))
        if not w.history_days:
            for inst in self.instances:
                for slot in self.slots.get(inst.name, []):
                    for _ in range(3):
                        out.append((start + rng.randrange(span // 2), len(out), "claim", (inst.name, slot)))
        for f in sc.faults:
            out.append((start + int(f.at * US_PER_S), len(out), "fault", f))
        return sorted(out, key=lambda e: (e[0], e[1]))

    def apply(self, kind: str, detail: Any) -> None:
        rng = self.rng
        if kind == "put":
            shapes = self.sc.boundaries
            shape = rng.choices(shapes, weights=[s.weight for s in shapes])[0]
            inst = rng.choice([i for i in self.instances if i.shape is shape])
            writers = [m for m in inst.members if self.hosts[m].up and self.hosts[m].role != "sybil"]
            if writers:
                m = rng.choice(writers)
                n = len(self.writes)
                text = f"{inst.name} {self.marker} note {n}: " + " ".join(rng.choice(WORDS) for _ in range(10))
                self._put(m, inst, inst.draft(text, n=n))
        elif kind == "local":
            up = [n for n in sorted(self.hosts) if self.hosts[n].up]
            m = rng.choice(up)
            # Three ways of staying on the node: local only; public but not asking for the swarm (and erin has no
            # devices or tenant anywhere); private with inference allowed in public only as a redacted packet.
            stays = LOCAL_SHAPES[len(self.local) % len(LOCAL_SHAPES)]
            draft = {
                "owner_id": "erin",
                **stays,
                "asset_type": "fact",
                "payload": {"text": f"erin {self.marker} local note {len(self.local)} on {m}"},
            }
            self._put(m, None, draft)
        elif kind in ("edit", "delete"):
            self._edit_or_delete(kind)
        elif kind == "remove":
            self._remove()
        elif kind == "hydrate":
            self._hydrate()
        elif kind in ("poison", "claim"):
            self._claim(kind, *detail)
        elif kind == "fault":
            self._fault(detail)

    def _holders(self, id_: str, names: Iterable[str]) -> list[str]:
        out = []
        for m in names:
            h = self.hosts[m]
            if not h.up:
                continue
            try:
                h.replica.node.store.get(id_)
            except NotFound:
                continue
            out.append(m)
        return out

    def _edit_or_delete(self, kind: str) -> None:
        rng = self.rng
        live = sorted(
            i
            for i, w in self.writes.items()
            if i not in self.deleted and w.id not in self.poison and w.id not in self.honest_claims
        )
        if not live:
            return
        id_ = rng.choice(live)
        inst = self._inst(self.writes[id_].inst)
        # In the public swarm only an asset's author may change or erase it (crdt/swarm.py); elsewhere any member.
        editors = [self.writes[id_].writer] if inst.kind == "public" else inst.members
        holders = self._holders(id_, [m for m in editors if m not in inst.removed and self.hosts[m].role != "sybil"])
        if not holders:
            return
        if kind == "delete":
            m = rng.choice(holders)
            self.hosts[m].replica.node.delete(id_, self.hosts[m].now())
            self.deleted[id_] = m
            self._log("delete", m, id_)
            return
        for m in rng.sample(holders, k=min(2, len(holders))):
            h = self.hosts[m]
            old = h.replica.node.store.get(id_)
            tags = sorted({*old.tags, f"{m}-{rng.randrange(1000)}"})
            draft = {**self.drafts[id_], "tags": tags, "confidence_score": rng.choice((0.5, 0.7, 0.9))}
            h.replica.node.put([draft], h.now())
            self._log("edit", m, id_)

    def _inst(self, name: str) -> Instance:
        return next(i for i in self.instances if i.name == name)

    def _remove(self) -> None:
        rng = self.rng
        cands = [
            (i, m)
            for i in self.instances
            if i.kind != "public"
            for m in i.members[1:]
            if len(i.members) - len(i.removed) > 3
            and m not in i.removed
            and self.hosts[m].role == "honest"
            and self.hosts[i.members[0]].up
        ]
        if not cands:
            return
        inst, m = rng.choice(cands)
        admin = self.hosts[inst.members[0]]
        roster = admin.replica.remove(inst.bid, self.hosts[m].node_id, admin.now())
        inst.removed[m] = roster.epoch
        self._log("remove", inst.name, m, roster.epoch)
        self.counters["removals"] += 1

    def _claim(self, kind: str, inst_name: str, slot: tuple[str, str, str]) -> None:
        rng, inst = self.rng, self._inst(inst_name)
        subject, attribute, value = slot
        roles = ("poisoner", "sybil") if kind == "poison" else ("honest",)
        who = [m for m in inst.members if self.hosts[m].role in roles and self.hosts[m].up and m not in inst.removed]
        if not who:
            return
        m = rng.choice(who)
        if kind == "poison":
            value = f"v{int(value[1:]) + 1 + rng.randrange(50)}"
        text = f"{m} checked {subject}: its {attribute} is {value} (ticket {rng.randrange(10**6)})"
        id_ = self._put(
            m,
            inst,
            inst.draft(text, subject=subject, attribute=attribute, value=value),
            honest_slot=kind == "claim",
        )
        if kind == "poison":
            self.poison[id_] = (inst.name, subject)

    def _frame(self, m: str, question: str, consensus: bool) -> list[str]:
        h = self.hosts[m]
        rep = h.replica
        c = None
        if consensus:
            if h.consensus is None:
                h.consensus = Consensus(rep.store, rep, rep.node_id, Weights())
            c = h.consensus
        hyd = Hydrator(rep.node, consensus=c).hydrate(HydrationRequest(question, READER, h.now(), BUDGET))
        return [f["unit"] for f in hyd.receipt["facts"]]

    def _hydrate(self, final: bool = False) -> None:
        rng = self.rng
        cands = [
            (i, m)
            for i in self.instances
            if i.contested
            for m in i.members
            if self.hosts[m].role == "honest" and self.hosts[m].up and m not in i.removed
        ]
        if not cands:
            return
        inst, m = rng.choice(cands)
        subject, attribute, _ = rng.choice(self.slots[inst.name])
        question = f"What is the {attribute} of {subject}?"
        units = self._frame(m, question, True)
        poisoned = any(u in self.poison for u in units)
        self.frames.append((poisoned, any(u in self.honest_claims for u in units)))
        if final:
            self.baseline.append(any(u in self.poison for u in self._frame(m, question, False)))
        self._log("hydrate", m, question, tuple(units))

    def _fault(self, f: Any) -> None:
        rng, net = self.rng, self.net
        names = sorted(self.hosts)
        self._log("fault", f.kind, self.net.clock.now())
        self.counters[f"fault_{f.kind}"] += 1
        if f.kind == "partition":
            order = names[:]
            rng.shuffle(order)
            net.partition([order[g :: f.groups] for g in range(f.groups)])
        elif f.kind == "heal":
            net.heal()
        elif f.kind == "flap":
            links = sorted({(a, b) for a in names for b in self.links_of(a) if a < b})
            cut = rng.sample(links, min(f.links, len(links)))
            for a, b in cut:
                net.disconnect(a, b)
            self.pending.append((net.clock.now() + int(f.for_seconds * US_PER_S), "relink", cut))
        elif f.kind == "crash":
            up = [n for n in names if self.hosts[n].up]
            down = rng.sample(up, min(f.nodes, len(up)))
            for n in down:
                for b in sorted(self.links_of(n)):
                    net.disconnect(n, b)
                self.hosts[n].crash()
            self.pending.append((net.clock.now() + int(f.for_seconds * US_PER_S), "restart", down))
        elif f.kind == "skew":
            for n in rng.sample(names, min(f.nodes, len(names))):
                self.hosts[n].skew_us = rng.randint(-int(f.skew_seconds * US_PER_S), int(f.skew_seconds * US_PER_S))

    def _recover(self, what: str, items: list[Any]) -> None:
        if what == "restart":
            for n in items:
                if not self.hosts[n].up:
                    self.hosts[n].restart()
                    self.counters["restarts"] += 1
            self.connect_all()
        else:
            for a, b in items:
                if not self.net.is_connected(a, b) and self.hosts[a].up and self.hosts[b].up:
                    self.net.connect(a, b)

    # -- checks --------------------------------------------------------------------------------------------------------

    def check(self, where: str) -> dict[str, int]:
        """The safety checks (module docstring). Returns the counts; raises InvariantBroken if any is not zero."""
        bad: Counter[str] = Counter()
        notes: list[str] = []
        owner: dict[str, Instance] = {}
        by_inst = {i.name: i for i in self.instances}
        for id_, w in self.writes.items():
            owner[id_] = by_inst[w.inst]
        marker = self.marker.encode()
        relays = {r for i in self.instances for r in i.relays}
        held: dict[str, set[str]] = {}  # node (up) -> its live assets
        for n in sorted(self.hosts):
            h = self.hosts[n]
            if not h.up:
                continue
            held[n] = live = set(h.replica.node.store.live_ids())
            for id_ in sorted(live):
                inst = owner.get(id_)
                if inst is not None and (n not in inst.members or n in relays):
                    bad["leaks"] += 1
                    notes.append(f"{n} holds {id_} of {inst.name}")
                elif id_ in self.local and self.local[id_] != n:
                    bad["leaks"] += 1
                    notes.append(f"{n} holds {self.local[id_]}'s local-only {id_}")
                elif id_ in self.forged_ids:
                    bad["forgeries_accepted"] += 1
                    notes.append(f"{n} holds a forged asset {id_}")
                else:
                    wr = self.writes.get(id_)
                    if wr is None or inst is None:
                        continue
                    if n in inst.removed and wr.writer != n and wr.epoch >= inst.removed[n]:
                        bad["revocation"] += 1
                        notes.append(f"removed {n} holds {id_}, written at epoch {wr.epoch}")
                    if (
                        wr.writer in inst.removed
                        and n in wr.adopted
                        and self.hosts[wr.writer].node_id in h.replica.writers(inst.bid, id_)
                    ):
                        bad["revocation"] += 1
                        notes.append(f"{n} took {wr.writer}'s {id_} from it after adopting its removal")
            if h.role in ("relay", "stranger"):
                raw = sum(marker in v for space in h.kv.dump().values() for v in space.values())
                if raw:
                    bad["leaks"] += raw
                    notes.append(f"{h.role} {n} stores {raw} values holding plaintext")
        acked = [(id_, w.writer) for id_, w in self.writes.items() if id_ not in self.deleted]
        for id_, writer in acked + list(self.local.items()):
            if writer in held and id_ not in held[writer]:
                bad["lost_acknowledged_writes"] += 1
                notes.append(f"{writer} lost its acknowledged write {id_}")
        for k, v in bad.items():
            self.counters[k] += v
        if bad:
            raise InvariantBroken(
                f"seed={self.seed} step={self.step} ({where}, t={self.net.clock.now() / US_PER_S:.1f} s): "
                f"{dict(bad)}: {'; '.join(notes[:5])}"
            )
        return dict(bad)

    def required(self, inst: Instance) -> set[str]:
        """What every remaining member must hold in the end: acknowledged writes to the boundary, not deleted, by
        nodes that are not :meth:`outcast` there."""
        unsure = self.unsure(inst)
        return {id_ for id_, w in self.writes.items() if w.inst == inst.name and id_ not in self.deleted} - unsure

    def unsure(self, inst: Instance) -> set[str]:
        """Assets of the boundary nothing guarantees either way: written, or deleted, by an :meth:`outcast` (a
        member removed before its write or its tombstone reached anyone else took them with it)."""
        out = self.outcast(inst)
        return {
            id_
            for id_, w in self.writes.items()
            if w.inst == inst.name and (w.writer in out or self.deleted.get(id_) in out)
        }

    def outcast(self, inst: Instance) -> set[str]:
        """Members whose part in a boundary nothing guarantees: removed ones (members that adopted the removal
        refuse their writes), and in the public swarm the forgers (peers that caught them ban them, so their own
        writes reach only part of the swarm, and they stop receiving from those peers)."""
        out = set(inst.removed)
        if inst.kind == "public":
            out |= {m for m in inst.members if self.hosts[m].role == "forger"}
        return out

    def convergence(self) -> tuple[float, bool]:
        """The share of (remaining member, required asset) pairs held, and whether every member holds exactly the
        required live set."""
        have = total = 0
        exact = True
        for inst in self.instances:
            need = self.required(inst)
            out, unsure = self.outcast(inst), self.unsure(inst)
            for m in inst.members:
                if m in out:
                    continue
                h = self.hosts[m]
                live = set(h.replica.node.store.live_ids()) if h.up else set()
                mine = {i for i in live if i in self.writes and self.writes[i].inst == inst.name} - unsure
                have += len(mine & need)
                total += len(need)
                if mine != need or not h.up:
                    exact = False
        return (have / total if total else 1.0), exact

    def records_equal(self) -> str:
        """'' if every remaining member of every boundary holds the same records; else what differs."""
        for inst in self.instances:
            need = sorted(self.required(inst))
            out = self.outcast(inst)
            first: dict[str, Any] | None = None
            for m in inst.members:
                if m in out:
                    continue
                store = self.hosts[m].replica.node.store
                try:
                    mine = {i: record_of(store.get(i)) for i in need}
                except NotFound as e:
                    return f"{m} lacks an asset of {inst.name}: {e}"
                if first is None:
                    first = mine
                elif mine != first:
                    diff = sum(mine[i] != first[i] for i in need)
                    return f"{m} differs from {inst.members[0]} on {diff} records of {inst.name}"
        return ""

    def sample(self, phase: str) -> bool:
        """Record this step in the timeline; returns whether every member holds exactly what it must."""
        share, exact = self.convergence()
        self.timeline.append(
            {
                "t": round((self.net.clock.now() - self.start) / US_PER_S, 3),
                "phase": phase,
                "convergence": round(share, 5),
                "leaks": self.counters["leaks"],
                "lost": self.counters["lost_acknowledged_writes"],
                "bytes": sum(h.bytes_in for h in self.hosts.values()),
            }
        )
        return exact


def run(scenario: Scenario, seed: int) -> dict[str, Any]:
    """One seed of a scenario: the report (module docstring); raises :class:`InvariantBroken` on a failed check."""
    t0 = time.perf_counter()
    w = World(scenario, seed)
    start = w.start = w.history()
    step_us = int(scenario.checks.step_seconds * US_PER_S)
    events = w.schedule(start)
    w.attacking = True
    end = start + int(scenario.seconds * US_PER_S)
    steps = math.ceil((end - start) / step_us)
    k = 0
    for s in range(steps):
        w.step = s
        upto = min(end, start + (s + 1) * step_us)
        while True:
            due = [p for p in w.pending if p[0] <= upto]
            last = upto == end  # the last step takes what falls on the end too (a fault at ``seconds``)
            nxt_event = events[k][0] if k < len(events) and (events[k][0] < upto or last) else None
            nxt_pending = min((p[0] for p in due), default=None)
            if nxt_event is None and nxt_pending is None:
                break
            if nxt_pending is not None and (nxt_event is None or nxt_pending <= nxt_event):
                p = min(due, key=lambda p: (p[0], p[1]))
                w.pending.remove(p)
                w.net.run_until(p[0])
                w._recover(p[1], p[2])
                continue
            at, _, kind, detail = events[k]
            k += 1
            w.net.run_until(at)
            w.apply(kind, detail)
        w.net.run_until(upto)
        w.check("workload")
        w.sample("workload")
    # Liveness: heal everything, then step until converged.
    w.net.heal()
    for p in sorted(w.pending, key=lambda p: p[0]):
        w._recover(p[1], p[2])
    w.pending = []
    w.connect_all()
    healed = w.net.clock.now()
    limit = healed + int(scenario.checks.converge_within_seconds * US_PER_S)
    converged_at: int | None = None
    while w.net.clock.now() < limit:
        w.step += 1
        w.net.run_for(step_us)
        w.check("liveness")
        if w.sample("liveness") and not w.records_equal():
            converged_at = w.net.clock.now()
            break
    if converged_at is None:
        share, _ = w.convergence()
        raise InvariantBroken(
            f"seed={seed} step={w.step} (liveness): members did not converge within "
            f"{scenario.checks.converge_within_seconds} s of the heal (held share {share:.4f}; "
            f"{w.records_equal() or 'ids differ'})"
        )
    if scenario.workload.hydrates:
        for _ in range(max(10, scenario.workload.hydrates // 4)):
            w._hydrate(final=True)
    poisoned = sum(p for p, _ in w.frames) / len(w.frames) if w.frames else 0.0
    if poisoned > scenario.checks.max_poisoned_frame_share:
        raise InvariantBroken(
            f"seed={seed} step={w.step} (poisoning): {poisoned:.3f} of honest frames held a poison claim, over the "
            f"bound {scenario.checks.max_poisoned_frame_share}"
        )
    wall = time.perf_counter() - t0
    sim = (w.net.clock.now() - start) / US_PER_S
    traffic = sorted(h.bytes_in + h.bytes_out for h in w.hosts.values())
    stored = sorted(
        sum(len(k) + len(v) for sp in h.kv.dump().values() for k, v in sp.items()) for h in w.hosts.values()
    )
    digest = hashlib.sha256((w.net.digest() + w.events.hexdigest()).encode()).hexdigest()
    totals: Counter[str] = Counter()
    for h in w.hosts.values():
        totals.update(h.replica.counters)
    roles = Counter(h.role for h in w.hosts.values())
    adversaries = sum(v for r, v in roles.items() if r in ("poisoner", "sybil", "replayer", "forger"))
    return {
        "scenario": scenario.name,
        "seed": seed,
        "nodes": len(w.hosts),
        "roles": dict(sorted(roles.items())),
        "adversary_share": round(adversaries / len(w.hosts), 4),
        "poisoner_share": scenario.adversaries.share,
        "assets": len(w.writes) + len(w.local),
        "steps": w.step + 1,
        "sim_seconds": round(sim, 3),
        "wall_seconds": round(wall, 2),
        "sim_rate": round(sim / wall, 3),
        "leaks": w.counters["leaks"],
        "lost_acknowledged_writes": w.counters["lost_acknowledged_writes"],
        "revocation_violations": w.counters["revocation"],
        "forgeries_accepted": w.counters["forgeries_accepted"],
        "converged": True,
        "convergence_sim_seconds": round((converged_at - healed) / US_PER_S, 3),
        "poisoned_frame_share": round(poisoned, 4),
        "baseline_poisoned_frame_share": round(sum(w.baseline) / len(w.baseline), 4) if w.baseline else None,
        "honest_frame_share": round(sum(h for _, h in w.frames) / len(w.frames), 4) if w.frames else None,
        "frames": len(w.frames),
        "bytes_per_node": {"p50": int(statistics.median(traffic)), "max": traffic[-1]},
        "stored_bytes_per_node": {"p50": int(statistics.median(stored)), "max": stored[-1]},
        "net": dataclasses.asdict(w.net.stats()),
        "replicas": dict(sorted(totals.items())),
        "harness": dict(sorted(w.counters.items())),
        "timeline": w.timeline,
        "trace_digest": digest,
    }


__all__ = ["Host", "InvariantBroken", "World", "run"]
