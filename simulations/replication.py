"""The replication simulation: real nodes (core over fakes), real sync engines, a seeded faulty network.

``python -m gaml.simulations --seed N`` runs it and prints a summary; a failed check names the seed that reproduces it.

The world: 20 nodes in three boundaries (a user's six devices, an enterprise subnet of seven members and a relay,
a tenant's six nodes), one device that is also on the subnet, and one node in none. Every node is connected to every
other, so each meets nodes it must give nothing. Writers put assets whose policies reach their boundary (and some
that are local only), edit assets other members wrote (concurrent edits of one asset on two nodes), and delete some;
meanwhile frames are dropped, duplicated, reordered and delayed, the network splits in two and heals, and some
connections go down and come back. Then the network is left to settle, and :func:`check` demands:

- every member of a boundary holds the same live assets with the same records, and the same erased ones;
- those are exactly what was written there, less what was deleted (nothing lost, nothing invented);
- no node outside a boundary holds any of its assets, documents or objects; a relay holds objects only;
- no local-only asset exists anywhere but on its writer.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

from gaml.crdt.sync import BACKOFF_MAX, Sync
from gaml.node.core.replica import Replica, record_of
from gaml.policy import crypto
from gaml.policy.errors import NotFound
from gaml.simulations.net import US_PER_MS, US_PER_S, SimNetwork
from gaml.simulations.nodes import SyncEndpoint, draft, make_node

# Times are microseconds, the unit of ``now`` in the core (asset times) and in the daemon.
RETRY_US: Final = 1 * US_PER_S
QUIET_US: Final = (2**BACKOFF_MAX + 2) * RETRY_US
TICK_US: Final = 100 * US_PER_MS
SETTLE_US_MAX: Final = 600 * US_PER_S


@dataclasses.dataclass(frozen=True)
class Spec:
    nodes: int = 20
    assets: int = 1_000
    edits: int = 150
    deletes: int = 60
    local_only: int = 40
    seconds: int = 40  # simulated seconds of writing
    drop: float = 0.03
    duplicate: float = 0.03
    reorder: float = 0.1
    delay_us: tuple[int, int] = (1 * US_PER_MS, 60 * US_PER_MS)


@dataclasses.dataclass(frozen=True)
class Group:
    name: str
    kind: str
    label: str
    members: tuple[str, ...]
    relays: tuple[str, ...] = ()

    def draft(self, rng: random.Random, n: int) -> dict[str, Any]:
        text = f"{self.name} note {n}: " + " ".join(rng.choice(WORDS) for _ in range(12))
        owner = "" if self.kind == "devices" else rng.choice(("bob", "carol")) if self.kind == "subnet" else "dave"
        return draft(self.kind, self.label, {"text": text, "n": n}, owner)


WORDS: Final = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo")


def world(n: int) -> list[Group]:
    names = [f"n{i:02d}" for i in range(n)]
    return [
        Group("alice-devices", "devices", "alice", tuple(names[0:6])),
        Group("acme-subnet", "subnet", "acme", (*names[6:13], names[5]), relays=(names[13],)),
        Group("globex-tenant", "tenant", "globex", tuple(names[14:19])),
    ]  # names[19] belongs to none


class Cluster:
    """Nodes addressed by name on the network; the engines speak of node ids, the network of names."""

    def __init__(self, seed: int, spec: Spec) -> None:
        self.seed, self.spec = seed, spec
        self.rng = random.Random(seed)
        self.net = SimNetwork(
            seed,
            drop=spec.drop,
            duplicate=spec.duplicate,
            reorder=spec.reorder,
            delay_us=spec.delay_us,
            tick_us=TICK_US,
        )
        self.names = [f"n{i:02d}" for i in range(spec.nodes)]
        self.replicas: dict[str, Replica] = {}
        self.by_id: dict[str, str] = {}
        for i, name in enumerate(self.names):
            rep = Replica(make_node(seed * 1000 + i))
            self.replicas[name] = rep
            self.by_id[rep.node_id] = name
        for i, name in enumerate(self.names):
            rep = self.replicas[name]
            sync = Sync(rep, crypto.SeededEntropy(seed * 1000 + 500 + i), retry_after=RETRY_US)
            self.net.add(name, SyncEndpoint(self.by_id, self.replicas, rep, sync))
        self.groups = world(spec.nodes)
        self.bids: dict[str, bytes] = {}
        for g in self.groups:
            admin = self.replicas[g.members[0]]
            bid = admin.create(g.kind, g.name, g.label, 0).id
            for m in g.members[1:]:
                admin.invite(bid, self.replicas[m].node_id, "member", 0)
            for r in g.relays:
                admin.invite(bid, self.replicas[r].node_id, "relay", 0)
            for m in (*g.members[1:], *g.relays):
                self.replicas[m].join(admin.roster(bid), 0)
            self.bids[g.name] = bid
        self.written: dict[str, set[str]] = {g.name: set() for g in self.groups}
        self.deleted: dict[str, set[str]] = {g.name: set() for g in self.groups}
        self.local: dict[str, set[str]] = {}
        self.drafts: dict[str, dict[str, Any]] = {}

    def now(self) -> int:
        """The simulated time in microseconds: the ``now`` the nodes are given."""
        return self.net.clock.now()


def run(seed: int, spec: Spec = Spec()) -> Cluster:
    """Build the world, write under faults, heal, settle; returns the cluster for :func:`check`."""
    c = Cluster(seed, spec)
    rng, net = c.rng, c.net
    for i, a in enumerate(c.names):
        for b in c.names[i + 1 :]:
            net.connect(a, b)
    per_second = (spec.assets - spec.local_only) // spec.seconds  # the local-only ones count among the assets
    counter = 0
    half = spec.seconds // 2
    for second in range(spec.seconds):
        if second == spec.seconds // 4:
            net.partition([c.names[0::2], c.names[1::2]])
        if second == half:
            net.heal()
        if second == spec.seconds // 3:
            for a, b in _some_links(rng, c.names, 12):
                net.disconnect(a, b)
        if second == half + 2:
            for a, b in _some_links(random.Random(seed), c.names, 12):
                if not net.is_connected(a, b):
                    net.connect(a, b)
        for _ in range(per_second):
            counter += 1
            g = rng.choice(c.groups)
            writer = rng.choice(g.members)
            draft = g.draft(rng, counter)
            (id_,) = c.replicas[writer].node.put([draft], c.now())
            c.written[g.name].add(id_)
            c.drafts[id_] = draft
        for _ in range(spec.local_only // spec.seconds):
            writer = rng.choice(c.names)
            draft = {**c.groups[0].draft(rng, -counter), "privacy_scope": "local_only", "owner_id": "erin"}
            counter += 1
            (id_,) = c.replicas[writer].node.put([draft], c.now())
            c.local.setdefault(writer, set()).add(id_)
        for _ in range(spec.edits // spec.seconds):
            _edit(c, rng)
        for _ in range(spec.deletes // spec.seconds):
            _delete(c, rng)
        net.run_for(US_PER_S)
    net.heal()
    for i, a in enumerate(c.names):
        for b in c.names[i + 1 :]:
            if not net.is_connected(a, b):
                net.connect(a, b)
    if not net.run_until_quiet(net.clock.now() + SETTLE_US_MAX, QUIET_US):
        raise AssertionError(f"seed={seed}: the network did not settle: {net.stats()}")
    return c


def _some_links(rng: random.Random, names: Sequence[str], k: int) -> list[tuple[str, str]]:
    links = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    return rng.sample(links, k)


def _holders(c: Cluster, g: Group, id_: str) -> list[str]:
    out = []
    for m in g.members:
        try:
            c.replicas[m].node.store.get(id_)
        except NotFound:
            continue
        out.append(m)
    return out


def _pick(c: Cluster, rng: random.Random) -> tuple[Group, str, list[str]] | None:
    """A boundary, one of its live assets, and the members that hold it now (None if it has none live)."""
    g = rng.choice(c.groups)
    live = sorted(c.written[g.name] - c.deleted[g.name])
    if not live:
        return None
    id_ = rng.choice(live)
    return g, id_, _holders(c, g, id_)


def _edit(c: Cluster, rng: random.Random) -> None:
    """An edit of an asset on one or two members that hold it (two: concurrent edits of one asset)."""
    picked = _pick(c, rng)
    if picked is None:
        return
    _, id_, holders = picked
    for m in rng.sample(holders, k=min(2, len(holders))):
        tag = f"{m}-{rng.randrange(1000)}"
        old = c.replicas[m].node.store.get(id_)
        draft = {**c.drafts[id_], "tags": sorted({*old.tags, tag}), "confidence_score": rng.choice((0.5, 0.7, 0.9))}
        c.replicas[m].node.put([draft], c.now())


def _delete(c: Cluster, rng: random.Random) -> None:
    picked = _pick(c, rng)
    if picked is None:
        return
    g, id_, holders = picked
    if holders:
        c.replicas[rng.choice(holders)].node.delete(id_, c.now())
        c.deleted[g.name].add(id_)


def check(c: Cluster) -> dict[str, Any]:
    """The convergence and confinement checks (module docstring); raises AssertionError naming the seed."""
    seed = c.seed
    summary: dict[str, Any] = {"seed": seed, "net": dataclasses.asdict(c.net.stats())}
    every_written = set().union(*c.written.values())
    for g in c.groups:
        bid = c.bids[g.name]
        expected = c.written[g.name] - c.deleted[g.name]
        first = None
        for m in g.members:
            store = c.replicas[m].node.store
            mine = {i: record_of(store.get(i)) for i in store.live_ids() if i in c.written[g.name]}
            assert set(mine) == expected, (
                f"seed={seed}: {m} in {g.name} holds {len(mine)} live assets, expected {len(expected)} "
                f"(missing {len(expected - set(mine))}, extra {len(set(mine) - expected)})"
            )
            for i in c.deleted[g.name]:
                try:
                    store.get(i)
                except NotFound:
                    continue
                raise AssertionError(f"seed={seed}: {m} still holds {i}, deleted in {g.name}")
            if first is None:
                first = (m, mine)
            else:
                diff = [i for i in mine if mine[i] != first[1][i]]
                assert not diff, f"seed={seed}: {m} and {first[0]} differ on {len(diff)} assets of {g.name}"
        outside = [n for n in c.names if n not in g.members and n not in g.relays]
        for n in outside:
            rep = c.replicas[n]
            held = set(rep.node.store.live_ids()) & c.written[g.name]
            assert not held, f"seed={seed}: {n} outside {g.name} holds {len(held)} of its assets"
            assert bid not in rep.boundary_ids(), f"seed={seed}: {n} knows {g.name}"
            assert not rep.objects_of(bid), f"seed={seed}: {n} outside {g.name} holds its objects"
        for r in g.relays:
            rep = c.replicas[r]
            assert not set(rep.node.store.live_ids()) & every_written, f"seed={seed}: relay {r} materialized assets"
            assert rep.objects_of(bid), f"seed={seed}: relay {r} carries nothing"
        summary[g.name] = {"members": len(g.members), "live": len(expected), "deleted": len(c.deleted[g.name])}
    for writer, ids in c.local.items():
        for n in c.names:
            if n != writer:
                assert not set(c.replicas[n].node.store.live_ids()) & ids, (
                    f"seed={seed}: {writer}'s local-only asset at {n}"
                )
    totals: Counter[str] = Counter()
    for rep in c.replicas.values():
        totals.update(rep.counters)
    summary["replicas"] = dict(sorted(totals.items()))
    summary["simulated_s"] = round(c.now() / US_PER_S, 1)
    return summary


__all__ = ["Cluster", "Spec", "check", "run"]
