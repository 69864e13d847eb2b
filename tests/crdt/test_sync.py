"""The sync engine over in-memory replicas: convergence, authorization, resumption, bad input, a faulty network."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gaml.crdt import wire
from gaml.crdt.errors import SyncError
from gaml.crdt.sync import ASKS_PER_WINDOW, BACKOFF_MAX, PeerStats, Sync, object_id
from gaml.policy.crypto import SeededEntropy
from gaml.policy.errors import GamlError
from gaml.simulations.net import US_PER_MS, US_PER_S, SimNetwork

RETRY = US_PER_S  # the engines' retry interval, in the unit of now (microseconds)
QUIET = (2**BACKOFF_MAX + 2) * RETRY  # longer than the longest pause between retries
X = b"X" * 16  # boundary ids
Y = b"Y" * 16


# -- an in-memory replica ------------------------------------------------------------------------------------------


class FakeBadRoster(GamlError):
    """A roster the authority never issued."""


class Authority:
    """A boundary's admin: issues versioned rosters; only the bytes it issued verify (a stand-in for signatures)."""

    def __init__(self, bid: bytes) -> None:
        self.bid = bid
        self.version = 0
        self.issued: set[bytes] = set()

    def issue(self, members: Iterable[str]) -> bytes:
        self.version += 1
        data = json.dumps({"bid": self.bid.hex(), "version": self.version, "members": sorted(members)}).encode()
        self.issued.add(data)
        return data


def oid(obj: bytes) -> bytes:
    return hashlib.sha256(obj).digest()


class MemoryObjectStore:
    """The ObjectStore protocol over dicts: objects are ``bid | payload``, rosters JSON member sets with a version."""

    def __init__(self, node_id: str, authorities: dict[bytes, Authority]) -> None:
        self.node_id = node_id
        self.lineage = hashlib.sha256(node_id.encode()).digest()[:8]
        self.lineages: dict[str, bytes] = {}
        self.authorities = authorities
        self.rosters: dict[bytes, tuple[int, frozenset[str], bytes]] = {}
        self.store: dict[bytes, bytes] = {}
        self.logs: dict[bytes, list[bytes]] = {}
        self.cursors: dict[tuple[bytes, str], int] = {}
        self.accepted_from: list[tuple[str, bytes]] = []
        self.duplicates = 0
        self.handed_ids: list[bytes] = []  # the ids the engine handed with the objects (it hashed them already)
        self.defer: set[bytes] = set()  # objects this node cannot open yet (their key is on its way)
        self._deferred: set[bytes] = set()

    def adopt(self, data: bytes) -> None:
        doc = json.loads(data)
        bid = bytes.fromhex(doc["bid"])
        current = self.rosters.get(bid)
        if current is None or doc["version"] > current[0]:
            self.rosters[bid] = (doc["version"], frozenset(doc["members"]), data)
            self.logs.setdefault(bid, [])

    def write(self, bid: bytes, payload: bytes) -> bytes:
        obj = bid + payload
        self.store[oid(obj)] = obj
        self.logs[bid].append(oid(obj))
        return oid(obj)

    def held(self, bid: bytes) -> set[bytes]:
        return {k for k, v in self.store.items() if v[:16] == bid}

    # the protocol
    def boundary_ids(self) -> list[bytes]:
        return sorted(self.rosters)

    def authorized(self, bid: bytes, peer: str) -> bool:
        return bid in self.rosters and peer in self.rosters[bid][1]

    def roster(self, bid: bytes) -> bytes:
        return self.rosters[bid][2]

    def offer_roster(self, bid: bytes, data: bytes, peer: str, now: int) -> None:
        authority = self.authorities.get(bid)
        if authority is None or data not in authority.issued:
            raise FakeBadRoster("not issued by the boundary's authority")
        self.adopt(data)

    def log_after(self, bid: bytes, cursor: int, limit: int) -> tuple[list[bytes], int]:
        ids = self.logs[bid][cursor : cursor + limit]
        return ids, cursor + len(ids)

    def has(self, oid: bytes) -> bool:
        return oid in self.store

    def objects(self, bid: bytes, oids: Sequence[bytes]) -> list[bytes]:
        return [self.store[i] for i in oids if i in self.store and self.store[i][:16] == bid]

    def accept(
        self, bid: bytes, objs: Sequence[bytes], peer: str, now: int, oids: Sequence[bytes] | None = None
    ) -> tuple[int, int]:
        if oids is not None:
            assert len(oids) == len(objs)
            self.handed_ids += oids
        accepted = rejected = 0
        for obj in objs:
            if oid(obj) in self.defer:
                self._deferred.add(oid(obj))
                rejected += 1
                continue
            if obj[:16] != bid or not self.authorized(bid, peer):
                rejected += 1
                continue
            accepted += 1
            self.accepted_from.append((peer, oid(obj)))
            if oid(obj) in self.store:
                self.duplicates += 1
            else:
                self.store[oid(obj)] = obj
                self.logs[bid].append(oid(obj))
        return accepted, rejected

    def deferred(self, oids: Sequence[bytes]) -> set[bytes]:
        out = self._deferred.intersection(oids)
        self._deferred.clear()
        return out

    def cursor(self, bid: bytes, peer: str) -> int:
        return self.cursors.get((bid, peer), 0)

    def answer(self, bid: bytes, text: str, k: int, now: int) -> list[bytes]:
        """The objects of ``bid`` whose payload holds ``text``, newest first (a stand-in for ranking)."""
        hits = [self.store[i] for i in reversed(self.logs.get(bid, [])) if text.encode() in self.store[i][16:]]
        return hits[:k]

    def set_cursor(self, bid: bytes, peer: str, upto: int) -> None:
        self.cursors[(bid, peer)] = upto

    def met(self, peer: str, lineage: bytes) -> bool:
        known, self.lineages[peer] = self.lineages.get(peer), lineage
        if known is None or known == lineage:
            return False
        for key in [k for k in self.cursors if k[1] == peer]:
            self.cursors[key] = 0
        return True

    def snapshot(self) -> tuple[object, ...]:
        return (dict(self.store), {k: list(v) for k, v in self.logs.items()}, dict(self.cursors), dict(self.rosters))


class Recorder:
    """Wraps an engine for the network and keeps every frame it got and sent, with the time."""

    def __init__(self, sync: Sync) -> None:
        self.sync = sync
        self.got: list[tuple[int, str, bytes]] = []
        self.sent: list[tuple[int, str, bytes]] = []

    def _keep(self, now: int, effects: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
        self.sent += [(now, peer, frame) for peer, frame in effects]
        return effects

    def connected(self, peer: str, now: int) -> list[tuple[str, bytes]]:
        return self._keep(now, self.sync.connected(peer, now))

    def received(self, peer: str, frame: bytes, now: int) -> list[tuple[str, bytes]]:
        self.got.append((now, peer, frame))
        return self._keep(now, self.sync.received(peer, frame, now))

    def disconnected(self, peer: str) -> None:
        self.sync.disconnected(peer)

    def tick(self, now: int) -> list[tuple[str, bytes]]:
        return self._keep(now, self.sync.tick(now))


class Cluster:
    """Nodes (replica + engine + recorder) on one SimNetwork."""

    def __init__(self, net: SimNetwork, *, batch: int = 256, max_send_bytes: int = 1 << 20) -> None:
        self.net = net
        self.authorities = {X: Authority(X), Y: Authority(Y)}
        self.replicas: dict[str, MemoryObjectStore] = {}
        self.nodes: dict[str, Recorder] = {}
        self.batch, self.max_send_bytes = batch, max_send_bytes

    def add(self, *names: str) -> None:
        for name in names:
            replica = MemoryObjectStore(name, self.authorities)
            seed = int.from_bytes(hashlib.sha256(f"{self.net.seed}/{name}".encode()).digest()[:8], "big")
            sync = Sync(
                replica, SeededEntropy(seed), batch=self.batch, max_send_bytes=self.max_send_bytes, retry_after=RETRY
            )
            self.replicas[name] = replica
            self.nodes[name] = Recorder(sync)
            self.net.add(name, self.nodes[name])

    def roster(self, bid: bytes, members: Iterable[str], holders: Iterable[str]) -> bytes:
        data = self.authorities[bid].issue(members)
        for name in holders:
            self.replicas[name].adopt(data)
        return data

    def stats(self, name: str, peer: str) -> PeerStats:
        return self.nodes[name].sync.stats()[peer]


def quiet_net(seed: int = 0, **faults: object) -> SimNetwork:
    return SimNetwork(seed, delay_us=(US_PER_MS, US_PER_MS), record=True, **faults)  # type: ignore[arg-type]


def kinds(frames: Iterable[bytes]) -> set[str]:
    return {wire.decode(f).type for f in frames}


def payloads(n: int, tag: str, rng: random.Random) -> list[bytes]:
    return [f"{tag}/{i}/".encode() + rng.randbytes(rng.randint(600, 1500)) for i in range(n)]


# -- convergence ---------------------------------------------------------------------------------------------------


def test_two_nodes_converge_and_send_each_object_once() -> None:
    """Two members with different objects end with the union; no object travels twice on a lossless link."""
    c = Cluster(quiet_net(), batch=64)
    c.add("a", "b")
    c.roster(X, ["a", "b"], ["a", "b"])
    rng = random.Random(0)
    for p in payloads(300, "a", rng):
        c.replicas["a"].write(X, p)
    for p in payloads(200, "b", rng):
        c.replicas["b"].write(X, p)
    c.net.connect("a", "b")
    assert c.net.run_until_quiet(60 * US_PER_S, QUIET)
    a, b = c.replicas["a"], c.replicas["b"]
    assert a.held(X) == b.held(X) and len(a.held(X)) == 500
    assert a.duplicates == b.duplicates == 0
    sa, sb = c.stats("a", "b"), c.stats("b", "a")
    assert (sa.objects_sent, sb.objects_accepted, sb.objects_sent, sa.objects_accepted) == (300, 300, 200, 200)
    assert sa.open_boundaries == sb.open_boundaries == 1
    assert sa.bad_frames == sa.refused_frames == sa.bad_rosters == sa.retries == sa.restarts == 0
    assert a.cursor(X, "b") == 500 and b.cursor(X, "a") == 500  # each acked the other's whole log (echoes included)
    outstanding = 0  # Haves from a to b not yet acked: never more than one (one batch per peer and boundary)
    assert c.net.trace is not None
    for d in c.net.trace:
        msg = wire.decode(d.frame)
        if isinstance(msg, wire.Have) and d.src == "a":
            assert len(msg.ids) <= 64
            outstanding += 1
        elif isinstance(msg, wire.Ack) and d.src == "b":
            outstanding -= 1
        assert outstanding in (0, 1)


def test_an_object_the_replica_cannot_open_yet_is_not_acknowledged_and_comes_again() -> None:
    """An object sealed under a key still on its way (its roster arrives after it) is deferred: the batch is not
    acknowledged, so the sender's cursor does not pass it, and its Have retry brings it once the key is there."""
    c = Cluster(quiet_net(), batch=64)
    c.add("a", "b")
    c.roster(X, ["a", "b"], ["a", "b"])
    rng = random.Random(3)
    objs = payloads(5, "a", rng)
    for p in objs:
        c.replicas["a"].write(X, p)
    late = oid(X + objs[2])
    c.replicas["b"].defer.add(late)
    c.net.connect("a", "b")
    c.net.run_for(2 * RETRY)
    a, b = c.replicas["a"], c.replicas["b"]
    assert late not in b.store and len(b.held(X)) == 4
    assert a.cursor(X, "b") == 0  # the batch stays unacknowledged: nothing is passed over for good
    assert c.stats("b", "a").objects_deferred >= 1
    b.defer.clear()  # the key arrived
    assert c.net.run_until_quiet(c.net.clock.now() + 60 * US_PER_S, QUIET)
    assert late in b.store and a.cursor(X, "b") == 5


def test_the_engine_hands_the_replica_the_ids_it_matched_the_objects_by() -> None:
    """Each accepted object comes with its id, the one the engine hashed to match it to a request: the replica need
    not hash it again."""
    c = Cluster(quiet_net(), batch=16)
    c.add("a", "b")
    c.roster(X, ["a", "b"], ["a", "b"])
    for p in payloads(40, "a", random.Random(3)):
        c.replicas["a"].write(X, p)
    c.net.connect("a", "b")
    assert c.net.run_until_quiet(60 * US_PER_S, QUIET)
    b = c.replicas["b"]
    assert len(b.held(X)) == 40
    assert b.handed_ids == [i for _, i in b.accepted_from] and set(b.handed_ids) == b.held(X)


def test_initial_sync_wire_bytes_are_close_to_the_object_bytes() -> None:
    """An initial sync of 1,000 objects of 600-1,500 bytes costs under 1.2x their bytes on the wire (all frames)."""
    c = Cluster(quiet_net())
    c.add("a", "b")
    c.roster(X, ["a", "b"], ["a", "b"])
    objects = payloads(1000, "a", random.Random(1))
    for p in objects:
        c.replicas["a"].write(X, p)
    c.net.connect("a", "b")
    assert c.net.run_until_quiet(60 * US_PER_S, QUIET)
    assert len(c.replicas["b"].held(X)) == 1000
    wire_bytes = c.net.stats().bytes_delivered
    object_bytes = sum(16 + len(p) for p in objects)
    assert wire_bytes / object_bytes < 1.2, wire_bytes / object_bytes


def test_send_frames_respect_max_send_bytes() -> None:
    """Objects go in Send frames of at most max_send_bytes; an object larger than that goes alone."""
    c = Cluster(quiet_net(), max_send_bytes=4_000)
    c.add("a", "b")
    c.roster(X, ["a", "b"], ["a", "b"])
    rng = random.Random(2)
    for p in [*payloads(40, "a", rng), b"big" + rng.randbytes(9_000)]:
        c.replicas["a"].write(X, p)
    c.net.connect("a", "b")
    assert c.net.run_until_quiet(60 * US_PER_S, QUIET)
    assert len(c.replicas["b"].held(X)) == 41
    sends = [wire.decode(f) for _, _, f in c.nodes["b"].got if wire.decode(f).type == "send"]
    frames = [(len(wire.encode(m)), m) for m in sends]
    assert len(frames) > 10
    assert all(size <= 4_000 or len(m.objects) == 1 for size, m in frames)  # type: ignore[union-attr]


def test_three_nodes_in_a_line_forward_through_the_middle() -> None:
    """A-B-C with no A-C connection: every object reaches every node, passing through B."""
    c = Cluster(quiet_net(), batch=32)
    c.add("a", "b", "c")
    c.roster(X, ["a", "b", "c"], ["a", "b", "c"])
    rng = random.Random(3)
    for p in payloads(100, "a", rng):
        c.replicas["a"].write(X, p)
    for p in payloads(50, "c", rng):
        c.replicas["c"].write(X, p)
    c.net.connect("a", "b")
    c.net.connect("b", "c")
    assert c.net.run_until_quiet(60 * US_PER_S, QUIET)
    held = {n: r.held(X) for n, r in c.replicas.items()}
    assert held["a"] == held["b"] == held["c"] and len(held["a"]) == 150
    # live changes are announced too: a new object at A reaches C
    new = c.replicas["a"].write(X, b"late")
    assert c.net.run_until_quiet(c.net.clock.now() + 60 * US_PER_S, QUIET)
    assert new in c.replicas["c"].store


def test_a_new_member_is_admitted_by_the_roster_it_carries() -> None:
    """A holds roster v1 without B; B holds v2 with both. A adopts v2 from B's Roster, then they sync."""
    c = Cluster(quiet_net())
    c.add("a", "b")
    c.roster(X, ["a"], ["a"])
    c.roster(X, ["a", "b"], ["b"])
    c.replicas["a"].write(X, b"from a")
    c.replicas["b"].write(X, b"from b")
    c.net.connect("a", "b")
    assert c.net.run_until_quiet(60 * US_PER_S, QUIET)
    assert c.replicas["a"].rosters[X][0] == 2
    assert len(c.replicas["a"].held(X)) == len(c.replicas["b"].held(X)) == 2


# -- authorization and privacy -------------------------------------------------------------------------------------


def test_a_removed_node_hears_no_object_id_and_gets_no_object() -> None:
    """N still holds an old roster naming it, the others the current one without it: N receives only Hello and Tags
    frames (no roster, no id, no object), and nothing N writes is taken from it."""
    c = Cluster(quiet_net())
    c.add("a", "b", "n")
    c.roster(X, ["a", "b", "n"], ["n"])
    c.roster(X, ["a", "b"], ["a", "b"])
    rng = random.Random(4)
    for p in payloads(30, "a", rng):
        c.replicas["a"].write(X, p)
    c.replicas["b"].write(X, b"b's")
    c.replicas["n"].write(X, b"n's")
    for pair in (("a", "b"), ("a", "n"), ("b", "n")):
        c.net.connect(*pair)
    c.net.run_until(30 * US_PER_S)
    assert len(c.replicas["b"].held(X)) == 31
    assert c.replicas["n"].held(X) == {oid(X + b"n's")}
    got = [f for _, _, f in c.nodes["n"].got]
    assert got and kinds(got) == {"hello", "tags"}
    assert all(oid(X + b"n's") not in r.store for r in (c.replicas["a"], c.replicas["b"]))
    assert c.stats("a", "n").open_boundaries == 0 and c.stats("n", "a").open_boundaries == 0


def test_an_outsider_gets_only_hello_and_tags_that_change_every_session() -> None:
    """A node sharing no boundary sees Hello and Tags only; the tags for the same boundary differ per session and
    equal neither the boundary id nor anything a fixed function of it would give."""
    c = Cluster(quiet_net())
    c.add("a", "o")
    c.roster(X, ["a"], ["a"])
    c.roster(Y, ["o"], ["o"])
    c.replicas["a"].write(X, b"secret")
    sessions = []
    for _ in range(3):
        c.net.connect("a", "o")
        c.net.run_for(5 * US_PER_S)
        got = [wire.decode(f) for _, _, f in c.nodes["o"].got]
        c.nodes["o"].got.clear()
        assert {m.type for m in got} == {"hello", "tags"}
        sessions.append({t for m in got if isinstance(m, wire.Tags) for t in m.tags})
        c.net.disconnect("a", "o")
    assert all(len(s) == 1 for s in sessions)
    assert len(set.union(*sessions)) == 3
    assert not any(X in t or t in X for s in sessions for t in s)
    assert c.replicas["o"].held(X) == set() and c.stats("a", "o").open_boundaries == 0


def test_removal_mid_sync_stops_delivery_at_once() -> None:
    """C is removed from the roster while objects flow to it: from then on A and B send C no Have, Send, Need, Ack
    or Roster, refuse what C sends, and C gets nothing beyond what was already on the wire."""
    c = Cluster(quiet_net(), batch=10)
    c.add("a", "b", "c")
    c.roster(X, ["a", "b", "c"], ["a", "b", "c"])
    rng = random.Random(5)
    for p in payloads(200, "a", rng):
        c.replicas["a"].write(X, p)
    for pair in (("a", "b"), ("a", "c"), ("b", "c")):
        c.net.connect(*pair)
    while len(c.replicas["c"].held(X)) < 40:
        c.net.step()
    removed_at = c.net.clock.now()
    held_before = c.replicas["c"].held(X)
    sent_before = {name: len(c.nodes[name].sent) for name in ("a", "b", "c")}
    in_flight = {
        oid(o)
        for name in ("a", "b")
        for _, peer, f in c.nodes[name].sent
        if peer == "c" and isinstance(m := wire.decode(f), wire.Send)
        for o in m.objects
    }
    c.roster(X, ["a", "b"], ["a", "b"])
    c.replicas["c"].write(X, b"c after removal")
    c.net.run_until(removed_at + 30 * US_PER_S)
    for name in ("a", "b"):
        late = [f for _, peer, f in c.nodes[name].sent[sent_before[name] :] if peer == "c"]
        assert kinds(late) <= {"hello", "tags"}, name
    assert c.replicas["c"].held(X) - held_before - {oid(X + b"c after removal")} <= in_flight
    assert {o for p, o in c.replicas["c"].accepted_from} <= in_flight
    assert len(c.replicas["c"].held(X)) < 201
    assert oid(X + b"c after removal") not in c.replicas["a"].store
    assert c.stats("a", "c").refused_frames > 0 and c.stats("a", "c").open_boundaries == 0
    # C, which does not know it was removed, keeps offering its log to A; refused, its retries back off
    haves = [f for _, peer, f in c.nodes["c"].sent[sent_before["c"] :] if peer == "a" and f[1] == wire.HAVE]
    assert 3 <= len(haves) <= 8, len(haves)
    assert len(c.replicas["b"].held(X)) == 200


def test_resumes_from_the_cursor_after_a_disconnect() -> None:
    """A connection lost mid-sync resumes from the acknowledged cursor: the first Have of the new session starts
    there, nothing acknowledged before is sent again, and no object is accepted twice."""
    c = Cluster(quiet_net(), batch=25)
    c.add("a", "b")
    c.roster(X, ["a", "b"], ["a", "b"])
    for p in payloads(400, "a", random.Random(6)):
        c.replicas["a"].write(X, p)
    c.net.connect("a", "b")
    while len(c.replicas["b"].held(X)) < 130:
        c.net.step()
    c.net.disconnect("a", "b")
    cursor = c.replicas["a"].cursor(X, "b")
    assert 100 <= cursor < 400
    acked = set(c.replicas["a"].logs[X][:cursor])
    reconnected_at = c.net.clock.now()
    c.net.connect("a", "b")
    assert c.net.run_until_quiet(120 * US_PER_S, QUIET)
    assert c.replicas["b"].held(X) == c.replicas["a"].held(X) and len(c.replicas["b"].held(X)) == 400
    assert c.replicas["b"].duplicates == 0
    later = [wire.decode(f) for t, peer, f in c.nodes["a"].sent if peer == "b" and t >= reconnected_at]
    haves = [m for m in later if isinstance(m, wire.Have)]
    assert haves[0].ids[0] == c.replicas["a"].logs[X][cursor]
    assert not {oid(o) for m in later if isinstance(m, wire.Send) for o in m.objects} & acked


def test_a_peer_restored_from_an_older_backup_gets_what_it_lacks_again_and_nothing_twice() -> None:
    """b syncs a's log, is disconnected, and comes back with its store restored from a backup made halfway (half
    the objects, a new lineage): a forgets b's cursor at b's Hello, offers its whole log again, and b asks for (and
    accepts) exactly the half it lacks. A peer whose lineage did not change resumes from its cursor as before."""
    c = Cluster(quiet_net(), batch=50)
    c.add("a", "b")
    c.roster(X, ["a", "b"], ["a", "b"])
    for p in payloads(200, "a", random.Random(8)):
        c.replicas["a"].write(X, p)
    c.net.connect("a", "b")
    assert c.net.run_until_quiet(60 * US_PER_S, QUIET)
    a, b = c.replicas["a"], c.replicas["b"]
    assert len(b.held(X)) == 200 and a.cursor(X, "b") == 200
    c.net.disconnect("a", "b")
    # The restore: b's objects of the second half are gone, and its store has a new lineage.
    lost = set(a.logs[X][100:])
    for o in lost:
        del b.store[o]
    b.logs[X] = [o for o in b.logs[X] if o not in lost]
    b.lineage = b"restored"
    accepted_before = c.stats("b", "a").objects_accepted
    c.net.connect("a", "b")
    assert c.net.run_until_quiet(60 * US_PER_S, QUIET)
    assert b.held(X) == a.held(X) and len(b.held(X)) == 200
    assert b.duplicates == 0
    assert c.stats("b", "a").objects_accepted - accepted_before == 100  # the lost half, once
    assert c.stats("a", "b").cursor_resets == 1 and c.stats("b", "a").cursor_resets == 0
    # Reconnecting with the same lineage: nothing is offered again.
    heard = c.stats("b", "a").ids_heard
    c.net.disconnect("a", "b")
    c.net.connect("a", "b")
    assert c.net.run_until_quiet(60 * US_PER_S, QUIET)
    assert c.stats("a", "b").cursor_resets == 1 and c.stats("b", "a").ids_heard == heard


# -- bad input -----------------------------------------------------------------------------------------------------


def mid_sync(seed: int = 0) -> Cluster:
    c = Cluster(quiet_net(seed), batch=8)
    c.add("a", "b")
    c.roster(X, ["a", "b"], ["a", "b"])
    for p in payloads(40, "a", random.Random(7)):
        c.replicas["a"].write(X, p)
    c.net.connect("a", "b")
    for _ in range(12):
        c.net.step()
    return c


@given(st.lists(st.binary(max_size=120), min_size=1, max_size=5))
@settings(derandomize=True, max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_frames_never_raise_and_change_nothing(junk: list[bytes]) -> None:
    """Random frames fed mid-sync never raise and leave both replicas untouched; the sync still completes."""
    c = mid_sync()
    before = {n: r.snapshot() for n, r in c.replicas.items()}
    now = c.net.clock.now()
    for frame in junk:
        for name, peer in (("a", "b"), ("b", "a")):
            c.nodes[name].sync.received(peer, frame, now)
            c.nodes[name].sync.received("stranger", frame, now)
    assert {n: r.snapshot() for n, r in c.replicas.items()} == before
    assert c.net.run_until_quiet(120 * US_PER_S, QUIET)
    assert c.replicas["b"].held(X) == c.replicas["a"].held(X)


def test_truncated_and_replayed_frames_are_harmless() -> None:
    """Every prefix of every frame of a real sync, and a replay of a finished session's frames into a new one, never
    raise; prefixes are counted as bad frames or refused rosters; the replica never takes an object it did not ask
    for, and a new session still completes."""
    c = mid_sync(1)
    assert c.net.run_until_quiet(120 * US_PER_S, QUIET)
    frames = [(peer, f) for _, peer, f in c.nodes["b"].got]
    b = c.nodes["b"].sync
    before = c.stats("b", "a")
    snapshot = c.replicas["b"].snapshot()
    for peer, frame in frames:
        for cut in range(min(len(frame), 120)):
            assert b.received(peer, frame[:cut], c.net.clock.now()) == []
    after = c.stats("b", "a")
    assert after.bad_frames > before.bad_frames and after.bad_rosters > before.bad_rosters
    assert c.replicas["b"].snapshot() == snapshot
    c.net.disconnect("a", "b")
    c.replicas["a"].write(X, b"new")
    c.net.connect("a", "b")
    for peer, frame in frames:  # the old session's frames, replayed into the new one
        for effect_peer, effect in b.received(peer, frame, c.net.clock.now()):
            c.net.send("b", effect_peer, effect)
    assert c.replicas["b"].duplicates == 0
    assert c.net.run_until_quiet(c.net.clock.now() + 120 * US_PER_S, QUIET)
    assert oid(X + b"new") in c.replicas["b"].store
    assert c.replicas["b"].duplicates == 0


def test_objects_nobody_asked_for_are_dropped() -> None:
    """A Send on an open boundary carrying objects that were not needed is not passed to the replica."""
    c = mid_sync(2)
    assert c.net.run_until_quiet(120 * US_PER_S, QUIET)
    b = c.nodes["b"].sync
    link_tag = next(
        m.tag for _, _, f in c.nodes["b"].got if isinstance(m := wire.decode(f), wire.Have | wire.Send | wire.Roster)
    )
    frame = wire.encode(wire.Send(link_tag, (X + b"pushed",)))
    assert b.received("a", frame, c.net.clock.now()) == []
    assert oid(X + b"pushed") not in c.replicas["b"].store
    assert c.stats("b", "a").objects_unrequested >= 1


def test_misconfiguration_and_a_broken_replica_are_typed_errors() -> None:
    """Bad batch, max_send_bytes or retry_after, and a log that does not advance, raise SyncError."""
    replica = MemoryObjectStore("a", {})
    for kwargs in ({"batch": 0}, {"batch": wire.MAX_IDS + 1}, {"max_send_bytes": 100}, {"retry_after": 0}):
        with pytest.raises(SyncError):
            Sync(replica, SeededEntropy(0), **kwargs)

    class Stuck(MemoryObjectStore):
        def log_after(self, bid: bytes, cursor: int, limit: int) -> tuple[list[bytes], int]:
            return [b"\x00" * 32], cursor

    c = Cluster(quiet_net())
    c.add("a")
    c.replicas["b"] = stuck = Stuck("b", c.authorities)
    c.nodes["b"] = Recorder(Sync(stuck, SeededEntropy(1), retry_after=RETRY))
    c.net.add("b", c.nodes["b"])
    c.roster(X, ["a", "b"], ["a", "b"])
    c.net.connect("a", "b")
    with pytest.raises(SyncError, match="contract"):
        c.net.run_until(10 * US_PER_S)


# -- a faulty network ----------------------------------------------------------------------------------------------


def simulate(seed: int) -> tuple[Cluster, dict[bytes, set[bytes]], dict[bytes, set[str]]]:
    """10 nodes, X = n0..n5, Y = n4..n9, full mesh; writes over 20 s with drops, duplicates, reordering, delays, a
    partition from 5 s to 12 s and three connections down from 8 s to 10 s; then a liveness phase."""
    rng = random.Random(seed)
    net = SimNetwork(
        seed, drop=0.05, duplicate=0.05, reorder=0.1, delay_us=(1 * US_PER_MS, 40 * US_PER_MS), tick_us=100 * US_PER_MS
    )
    c = Cluster(net, batch=16, max_send_bytes=8_000)
    names = [f"n{i}" for i in range(10)]
    c.add(*names)
    members = {X: set(names[:6]), Y: set(names[4:])}
    for bid, group in members.items():
        c.roster(bid, group, group)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            net.connect(a, b)
    written: dict[bytes, set[bytes]] = {X: set(), Y: set()}
    for second in range(20):
        if second == 5:
            net.partition([names[0::2], names[1::2]])
        if second == 12:
            net.heal()
        if second == 8:  # connection churn inside the partition's groups and across them
            for a, b in (("n0", "n2"), ("n1", "n4"), ("n5", "n7")):
                net.disconnect(a, b)
        if second == 10:
            for a, b in (("n0", "n2"), ("n1", "n4"), ("n5", "n7")):
                net.connect(a, b)
        for _ in range(15):
            bid = rng.choice((X, Y))
            writer = rng.choice(sorted(members[bid]))
            written[bid].add(c.replicas[writer].write(bid, f"{writer}@{second}/".encode() + rng.randbytes(40)))
        net.run_for(US_PER_S)
    quiet = net.run_until_quiet(net.clock.now() + 120 * US_PER_S, QUIET)
    assert quiet, f"seed={seed}: still busy at {net.clock.now()} µs: {net.stats()}"
    return c, written, members


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_members_converge_and_non_members_get_nothing_on_a_faulty_network(seed: int) -> None:
    """With seeded faults and a partition that heals, every member of each boundary ends with exactly the objects
    written in it, and no non-member holds any of them."""
    c, written, members = simulate(seed)
    assert sum(len(w) for w in written.values()) == 300
    stats = c.net.stats()
    assert stats.dropped and stats.duplicated and stats.partitioned, f"seed={seed}: faults did not happen: {stats}"
    for bid, group in members.items():
        for name, replica in c.replicas.items():
            held = replica.held(bid)
            if name in group:
                assert held == written[bid], f"seed={seed}: {name} holds {len(held)}/{len(written[bid])} of {bid!r}"
            else:
                assert held == set(), f"seed={seed}: non-member {name} holds {len(held)} objects of {bid!r}"
    for name in c.replicas:
        for peer, s in c.nodes[name].sync.stats().items():
            assert s.bad_frames == 0 and s.bad_rosters == 0, f"seed={seed}: {name}<-{peer}: {s}"


def test_the_same_seed_gives_the_same_run() -> None:
    """Two runs of the faulty simulation with one seed deliver the same frames at the same times."""
    first, _, _ = simulate(7)
    second, _, _ = simulate(7)
    assert first.net.digest() == second.net.digest()
    assert first.net.stats() == second.net.stats()


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_a_harsh_network_with_a_member_removed_midway(seed: int) -> None:
    """8 nodes on a random mesh, 20% drops, 20% duplicates, 30% reordering, delays up to 200 ms, tiny batches and
    frames, a partition, and n0 removed from X midway: members converge to one set holding everything the remaining
    members wrote, non-members hold nothing, and n0 gets nothing written after its removal."""
    rng = random.Random(seed)
    net = SimNetwork(seed, drop=0.2, duplicate=0.2, reorder=0.3, delay_us=(1 * US_PER_MS, 200 * US_PER_MS))
    c = Cluster(net, batch=rng.choice([1, 4, 16]), max_send_bytes=rng.choice([1_100, 3_000, 100_000]))
    names = [f"n{i}" for i in range(8)]
    c.add(*names)
    members = {X: set(names[:5]), Y: set(names[3:])}
    for bid, group in members.items():
        c.roster(bid, group, group)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if rng.random() < 0.6:
                net.connect(a, b)
    for group in members.values():  # each boundary's members are connected among themselves
        chain = sorted(group)
        for a, b in itertools.pairwise(chain):
            if not net.is_connected(a, b):
                net.connect(a, b)
    written: dict[bytes, set[bytes]] = {X: set(), Y: set()}
    late: set[bytes] = set()
    by_n0: set[bytes] = set()
    for second in range(15):
        if second == 4:
            net.partition([names[:4], names[4:]])
        if second == 9:
            net.heal()
        if second == 6:
            members[X] -= {"n0"}
            c.roster(X, members[X], members[X])
        for _ in range(10):
            bid = rng.choice((X, Y))
            writer = rng.choice(sorted(members[bid]))
            new = c.replicas[writer].write(bid, rng.randbytes(rng.randint(10, 2_000)))
            written[bid].add(new)
            if writer == "n0":
                by_n0.add(new)
            if bid == X and second >= 8:
                late.add(new)
        net.run_for(US_PER_S)
    expected = {bid: written[bid] - by_n0 for bid in written}  # what n0 wrote may not have left it before removal

    def converged() -> bool:
        return all(
            len({frozenset(c.replicas[n].held(bid)) for n in group}) == 1 and expected[bid] <= c.replicas[n].held(bid)
            for bid, group in members.items()
            for n in group
        )

    deadline = (
        net.clock.now() + 300 * US_PER_S
    )  # n0 keeps offering to peers that refuse it: the network never goes quiet
    while not converged() and net.clock.now() < deadline:
        net.run_for(5 * US_PER_S)
    sizes = {bid: {n: len(c.replicas[n].held(bid)) for n in sorted(g)} for bid, g in members.items()}
    assert converged(), f"seed={seed}: members have not converged by {net.clock.now()} µs: {sizes}"
    for bid, group in members.items():
        for name in set(names) - group - {"n0"}:
            assert not c.replicas[name].held(bid), f"seed={seed}: non-member {name} holds objects of {bid!r}"
    assert not late & set(c.replicas["n0"].store), f"seed={seed}: the removed n0 got objects written after removal"


def test_the_engine_agrees_with_crdt_objects() -> None:
    """The engine names objects as crdt.objects does (sha256) and the wire carries any object it allows."""
    objects = pytest.importorskip("gaml.crdt.objects")
    for sample in (b"", b"G1" + bytes(100), random.Random(8).randbytes(5000)):
        assert object_id(sample) == objects.object_id(sample)
    assert wire.MAX_OBJECT_BYTES == objects.MAX_OBJECT_BYTES


# -- peer reads ------------------------------------------------------------------------------------------------------


def read_cluster() -> Cluster:
    """a, b, c members of X; d a member of Y only, connected to a; all synced, nothing written yet."""
    c = Cluster(quiet_net())
    c.add("a", "b", "c", "d")
    c.roster(X, ["a", "b", "c"], ["a", "b", "c"])
    c.roster(Y, ["a", "d"], ["a", "d"])
    for other in ("b", "c", "d"):
        c.net.connect("a", other)
    assert c.net.run_until_quiet(30 * US_PER_S, QUIET)
    return c


def start_read(c: Cluster, qid: bytes, text: str, bids: Sequence[bytes], fan_out: int = 8, k: int = 8) -> list[str]:
    effects, asked = c.nodes["a"].sync.ask(qid, text, k, bids, fan_out, c.net.clock.now())
    for peer, frame in effects:
        c.net.send("a", peer, frame)
    return [p for p, _ in asked]


def test_a_peer_read_asks_only_open_members_and_takes_what_they_answer() -> None:
    """Asked on X, only X's members hear the text; the objects they answer with are verified and stored here before
    sync would have brought them, and the report says who returned what."""
    c = read_cluster()
    new_b = c.replicas["b"].write(X, b"apple pie from b")
    new_c = c.replicas["c"].write(X, b"apple tart from c")
    c.replicas["c"].write(X, b"pear from c")  # does not match
    qid = b"q" * 8
    assert sorted(start_read(c, qid, "apple", [X])) == ["b", "c"]  # d shares no X with a
    a = c.nodes["a"].sync
    assert a.pending(qid) == 2
    c.net.run_until(c.net.clock.now() + 50 * US_PER_MS)  # frames take 1 ms; no tick has announced the writes yet
    assert a.pending(qid) == 0
    report = a.finish(qid)
    got = {x.peer: x for x in report.answers}
    assert (got["b"].oids, got["b"].new, got["b"].accepted) == ((new_b,), 1, 1)
    assert (got["c"].oids, got["c"].new, got["c"].accepted) == ((new_c,), 1, 1)
    assert report.unanswered == ()
    assert c.replicas["a"].has(new_b) and c.replicas["a"].has(new_c)
    assert "ask" not in kinds(f for _, _, f in c.nodes["d"].got)
    assert c.stats("a", "b").asks_sent == 1 and c.stats("b", "a").asks_answered == 1
    with pytest.raises(SyncError):
        a.finish(qid)


def test_fan_out_caps_the_peers_asked_and_the_order_spreads_reads() -> None:
    """At most fan_out peers are asked (on every boundary open with them); which go first depends on the read."""
    c = read_cluster()
    firsts = {start_read(c, bytes([i]) * 8, "x", [X, Y], fan_out=1)[0] for i in range(16)}
    assert firsts == {"b", "c", "d"}  # each of them is asked first by some read
    assert sorted(start_read(c, b"z" * 8, "x", [X, Y], fan_out=3)) == ["b", "c", "d"]
    assert start_read(c, b"w" * 8, "x", [], fan_out=3) == []  # no boundary, no one asked
    _, asked = c.nodes["a"].sync.ask(b"v" * 8, "x", 4, [X, Y], 3, c.net.clock.now(), who=lambda p, b: p != "c")
    assert sorted(p for p, _ in asked) == ["b", "d"]  # c is left out (as a relay would be)


def test_answers_nobody_asked_for_late_or_twice_are_dropped() -> None:
    """An Answer for an unknown read, a second one from the same peer, one after finish, and one on a boundary the
    read did not ask are dropped and counted; their objects are not stored."""
    c = read_cluster()
    a = c.nodes["a"].sync
    tag_b = next(m.tag for _, p, f in c.nodes["a"].got if p == "b" and isinstance(m := wire.decode(f), wire.Roster))
    tag_d = next(m.tag for _, p, f in c.nodes["a"].got if p == "d" and isinstance(m := wire.decode(f), wire.Roster))
    now = c.net.clock.now()
    pushed = X + b"pushed"
    assert a.received("b", wire.encode(wire.Answer(tag_b, b"?" * 8, (pushed,))), now) == []
    qid = b"q" * 8
    start_read(c, qid, "nothing matches", [X])
    c.net.run_until(now + 50 * US_PER_MS)
    assert a.pending(qid) == 0
    stale = c.stats("a", "b").stale_frames
    a.received("b", wire.encode(wire.Answer(tag_b, qid, (pushed,))), now)  # b answered already
    assert len(a.finish(qid).answers) == 2
    a.received("b", wire.encode(wire.Answer(tag_b, qid, (pushed,))), now)  # after the finish
    assert c.stats("a", "b").stale_frames == stale + 2
    effects, _ = a.ask(b"r" * 8, "x", 4, [X], 8, now)  # asks b and c on X, not d
    assert {p for p, _ in effects} == {"b", "c"}
    a.received("d", wire.encode(wire.Answer(tag_d, b"r" * 8, (pushed,))), now)  # d was not asked
    assert c.stats("a", "d").stale_frames >= 1 and c.stats("a", "d").objects_unrequested >= 1
    assert a.pending(b"r" * 8) == 2
    assert not c.replicas["a"].has(object_id(pushed))


def test_a_forged_object_in_an_answer_counts_for_nothing() -> None:
    """The answer's objects go through the replica's checks: one that does not verify is rejected and not stored."""
    c = read_cluster()
    a = c.nodes["a"].sync
    qid = b"f" * 8
    effects, asked = a.ask(qid, "x", 4, [X], 1, c.net.clock.now())
    ((peer, _),) = asked
    tag = wire.decode(effects[0][1]).tag  # type: ignore[union-attr]
    forged = Y + b"an object of another boundary"
    a.received(peer, wire.encode(wire.Answer(tag, qid, (forged,))), c.net.clock.now())
    (answer,) = a.finish(qid).answers
    assert (answer.new, answer.accepted, answer.rejected) == (1, 0, 1)
    assert not c.replicas["a"].has(object_id(forged))


def test_a_peer_that_does_not_answer_is_reported_and_a_flood_of_asks_is_refused() -> None:
    """A peer cut off before it answers is listed unanswered at the finish; a peer asking more than ASKS_PER_WINDOW
    times in one window gets empty answers."""
    c = read_cluster()
    c.net.disconnect("a", "c")
    qid = b"u" * 8
    asked = start_read(c, qid, "x", [X])
    c.net.run_until(c.net.clock.now() + 50 * US_PER_MS)
    report = c.nodes["a"].sync.finish(qid)
    assert [x.peer for x in report.answers] == ["b"] and asked == ["b"]  # c has no session: not asked
    c.net.connect("a", "c")
    assert c.net.run_until_quiet(30 * US_PER_S, QUIET)
    c.net.partition([["a", "b", "d"], ["c"]])
    qid = b"v" * 8
    assert sorted(start_read(c, qid, "x", [X])) == ["b", "c"]
    c.net.run_until(c.net.clock.now() + 50 * US_PER_MS)
    report = c.nodes["a"].sync.finish(qid)
    assert [x.peer for x in report.answers] == ["b"] and report.unanswered == (("c", X),)
    c.net.heal()
    c.net.run_for(2 * RETRY)  # b's window of a's asks starts afresh
    before = c.stats("b", "a").asks_answered
    for i in range(ASKS_PER_WINDOW + 3):
        start_read(c, i.to_bytes(8, "big"), "x", [X], fan_out=3)
    c.net.run_until(c.net.clock.now() + 50 * US_PER_MS)
    assert c.stats("b", "a").asks_refused == 3
    assert c.stats("b", "a").asks_answered - before == ASKS_PER_WINDOW


def test_bad_peer_reads_are_typed_errors() -> None:
    """A reused or malformed read id, a k out of range or no peer to ask: SyncError."""
    c = read_cluster()
    a = c.nodes["a"].sync
    now = c.net.clock.now()
    a.ask(b"q" * 8, "x", 4, [X], 1, now)
    for qid, k, fan_out in ((b"q" * 8, 4, 1), (b"q" * 7, 4, 1), (b"n" * 8, 0, 1), (b"n" * 8, 65, 1), (b"n" * 8, 4, 0)):
        with pytest.raises(SyncError):
            a.ask(qid, "x", k, [X], fan_out, now)
