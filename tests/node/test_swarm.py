"""The public swarm in the core (crdt/swarm.py, node/core/replica.py): open membership, only public memory that asks
for it, authors alone may change their assets, forgers banned, and each node's view aging its peers. Real replicas
and sync engines over the seeded simulated network."""

from __future__ import annotations

from typing import Any

import pytest

from gaml.crdt import objects
from gaml.crdt.errors import BadRoster, RosterRefused
from gaml.crdt.swarm import STRIKES_TO_BAN, Swarm, descriptor, swarm_boundary, swarm_key
from gaml.crdt.sync import Sync
from gaml.node.core.consensus import Consensus, Weights
from gaml.node.core.replica import Replica
from gaml.policy import crypto
from gaml.policy.errors import InvalidInput, NotFound
from gaml.simulations.net import US_PER_S, SimNetwork
from gaml.simulations.nodes import SyncEndpoint, make_node

SWARM = "test-swarm"


def _draft(text: str, **over: Any) -> dict[str, Any]:
    return {
        "owner_id": "alice",
        "privacy_scope": "public",
        "replication_policy": "public_swarm",
        "asset_type": "fact",
        "payload": {"text": text},
        **over,
    }


class World:
    def __init__(self, n: int, seed: int = 7) -> None:
        self.net = SimNetwork(seed, tick_us=100_000)
        self.names = [f"s{i}" for i in range(n)]
        self.reps: dict[str, Replica] = {}
        self.by_id: dict[str, str] = {}
        for i, name in enumerate(self.names):
            rep = Replica(make_node(seed * 100 + i))
            self.reps[name] = rep
            self.by_id[rep.node_id] = name
        for i, name in enumerate(self.names):
            rep = self.reps[name]
            sync = Sync(rep, crypto.SeededEntropy(seed * 100 + 50 + i), retry_after=US_PER_S)
            self.net.add(name, SyncEndpoint(self.by_id, self.reps, rep, sync))

    def now(self) -> int:
        return self.net.clock.now()

    def join(self, *names: str) -> None:
        for name in names:
            self.reps[name].join_swarm(SWARM, self.now())

    def settle(self) -> None:
        assert self.net.run_until_quiet(self.now() + 300 * US_PER_S, 12 * US_PER_S)

    def holds(self, name: str, id_: str) -> bool:
        try:
            self.reps[name].node.store.get(id_)
        except NotFound:
            return False
        return True


def test_public_memory_travels_the_swarm_and_nothing_else_does() -> None:
    w = World(4)
    a, b, c, d = w.names
    w.join(a, b, c)
    for i, x in enumerate(w.names):
        for y in w.names[i + 1 :]:
            w.net.connect(x, y)
    node = w.reps[a].node
    (pub,) = node.put([_draft("the bridge opens at nine")], w.now())
    (private,) = node.put([_draft("my door code is 4471", privacy_scope="user_private")], w.now())
    (tenant,) = node.put([_draft("acme's roadmap", privacy_scope="tenant_private", tenant_scope="acme")], w.now())
    (shared_only,) = node.put([_draft("public, but asks for no swarm", replication_policy="tenant_nodes")], w.now())
    w.settle()
    assert w.holds(b, pub) and w.holds(c, pub)
    assert not w.holds(d, pub)  # not in the swarm: it never opened the boundary
    for other in (b, c, d):
        for id_ in (private, tenant, shared_only):
            assert not w.holds(other, id_)
    # Each view lists the peers met, with when; the swarm is open, so its role answers for anyone well-formed.
    view = w.reps[b].roster_of(swarm_boundary(SWARM).id)
    assert isinstance(view, Swarm) and view.met(w.reps[a].node_id) and view.met(w.reps[c].node_id)
    assert not view.met(w.reps[d].node_id) and view.role(w.reps[d].node_id) == "member"
    # A tombstone from the author erases it everywhere in the swarm.
    node.delete(pub, w.now())
    w.settle()
    assert not w.holds(b, pub) and not w.holds(c, pub)


def test_only_an_assets_authors_change_it_and_a_restart_keeps_the_view() -> None:
    w = World(3)
    a, b, c = w.names
    w.join(*w.names)
    w.net.connect(a, b)
    w.net.connect(b, c)
    (id_,) = w.reps[a].node.put([_draft("the library closes at six")], w.now())
    w.settle()
    assert w.holds(c, id_)  # two hops: b holds the object and offers it on
    # b edits a's public asset: its own copy changes, but no member that knows a as the author accepts it.
    w.reps[b].node.put([{**_draft("the library closes at six"), "tags": ["vandalised"]}], w.now())
    w.settle()
    assert w.reps[a].node.store.get(id_).tags == () and w.reps[c].node.store.get(id_).tags == ()
    assert w.reps[a].counters["rejected_not_author"] + w.reps[c].counters["rejected_not_author"] >= 1
    # The view is stored with the node: a restart keeps whom it met and when.
    bid = swarm_boundary(SWARM).id
    before = w.reps[c].roster_of(bid)
    again = Replica(w.reps[c].node)
    assert again.roster_of(bid) == before


def test_a_forger_is_banned_after_its_strikes() -> None:
    w = World(2)
    a, b = w.names
    w.join(*w.names)
    bid = swarm_boundary(SWARM).id
    rep_b = w.reps[b]
    forger = w.reps[a].node_id
    # Objects on the swarm's route, sealed under its key, each naming b as its writer with a signature that is not b's.
    # The last claims an epoch the swarm never has: in a swarm that is a forgery too, not an object to wait for.
    victim = bytes.fromhex(rep_b.node_id)
    junk = []
    for i in range(STRIKES_TO_BAN):
        epoch = 2 if i == STRIKES_TO_BAN - 1 else 1
        header = objects.MAGIC + swarm_boundary(SWARM).route + epoch.to_bytes(4, "big")
        body = objects.SNAPSHOT + bytes([i]) * 16 + b"not automerge"
        sealed = crypto.seal(swarm_key(SWARM), victim + bytes(64) + body, header, crypto.SeededEntropy(i))
        junk.append(header + sealed)
    accepted, rejected = rep_b.accept(bid, junk, forger, w.now())
    assert accepted == 0 and rejected == STRIKES_TO_BAN
    assert rep_b.counters["swarm_banned"] == 1 and not rep_b.authorized(bid, forger)
    view = rep_b.roster_of(bid)
    assert isinstance(view, Swarm) and forger in view.banned


def test_swarm_consensus_weighs_each_peer_by_its_age_in_this_view() -> None:
    w = World(3)
    a, b, c = w.names
    w.join(*w.names)
    w.net.connect(a, b)
    w.net.connect(a, c)
    w.settle()
    rep = w.reps[a]
    bid = swarm_boundary(SWARM).id
    ledger = Consensus(rep.store, rep, rep.node_id, Weights()).ledger(bid, w.now())
    assert ledger is not None and ledger.founder == rep.node_id  # this node is the root of its own view
    assert ledger.weight(w.reps[b].node_id) < ledger.w.admit  # a peer just met cannot carry a frame alone


def test_the_swarm_refuses_what_does_not_belong() -> None:
    w = World(2)
    rep = w.reps[w.names[0]]
    with pytest.raises(RosterRefused, match="signed boundary's kind"):
        rep.create("public", "p", "*", 0)  # a swarm is joined, never created with an admin
    rep.join_swarm(SWARM, 0)
    assert rep.join_swarm(SWARM, 0).name == SWARM  # joining again is a no-op
    with pytest.raises(InvalidInput, match="already in the public swarm"):
        rep.join_swarm("another", 0)
    bid = swarm_boundary(SWARM).id
    with pytest.raises(BadRoster, match="swarm 'another'"):
        rep.offer_roster(bid, descriptor("another"), "ab" * 32, 0)


def _three_devices(w: World) -> tuple[Replica, Replica, Replica, bytes]:
    """A user's three devices in one boundary, administered by the first."""
    ra, rb, rc = (w.reps[n] for n in w.names)
    bid = ra.create("devices", "alice-devices", "alice", 1).id
    for r in (rb, rc):
        ra.invite(bid, r.node_id, "member", 1)
        r.join(ra.roster(bid), 1)
    return ra, rb, rc, bid


def _device_draft(text: str) -> dict[str, Any]:
    return _draft(text, privacy_scope="user_private", replication_policy="trusted_devices")


def test_a_removed_writers_last_state_held_by_a_lagging_member_still_converges() -> None:
    """(A signed boundary, found by the scenario harness.) A member that had not yet adopted a removal takes what the
    removed node wrote; the members that adopted it refuse that node's objects. On adopting the removal, the lagging
    member seals those states again as its own, so every member converges on them."""
    w = World(3)
    a, b, c = w.names
    ra, rb, rc, bid = _three_devices(w)
    draft = _device_draft("the spare key is under the mat")
    ra.remove(bid, rc.node_id, w.now())  # a knows; b and c do not yet
    (late,) = rc.node.put([draft], w.now())  # c, removed, writes
    w.net.connect(b, c)
    w.settle()
    assert w.holds(b, late)  # b still counts c as a member
    w.net.connect(a, c)
    w.net.connect(a, b)
    w.net.run_for(120 * US_PER_S)  # c keeps knocking (backing off), so the network is never quiet
    assert rb.roster_of(bid).epoch == 2 and rb.counters["resealed"] >= 1
    assert w.holds(a, late)  # through b's own snapshot: a took nothing signed by c
    assert ra.writers(bid, late) == (rb.node_id,)
    assert ra.node.store.get(late).payload == rb.node.store.get(late).payload


def test_an_erasure_by_a_removed_member_reaches_those_that_refused_it() -> None:
    """The same for a tombstone: the removed node's erasure, taken by a lagging member, is sealed again by it on
    adopting the removal, so the members that refused the removed node's tombstone erase the asset too."""
    w = World(3, seed=9)
    a, b, c = w.names
    ra, rb, rc, bid = _three_devices(w)
    draft = _device_draft("the old wifi password")
    (id_,) = ra.node.put([draft], w.now())
    w.net.connect(a, b)
    w.net.connect(b, c)
    w.settle()
    assert all(w.holds(n, id_) for n in w.names)
    w.net.disconnect(a, b)
    ra.remove(bid, rc.node_id, w.now())  # a knows; b and c do not yet
    rc.node.delete(id_, w.now())  # c, removed, erases it
    w.settle()
    assert not w.holds(b, id_) and w.holds(a, id_)
    w.net.connect(a, b)
    w.net.run_for(120 * US_PER_S)
    assert rb.roster_of(bid).epoch == 2 and rb.counters["resealed"] >= 1
    assert not w.holds(a, id_)


def test_the_admin_that_removes_a_member_seals_again_what_only_it_took_from_it() -> None:
    w = World(3, seed=11)
    a, b, c = w.names
    ra, rb, rc, bid = _three_devices(w)
    (late,) = rc.node.put([_device_draft("the boiler was serviced in march")], w.now())
    w.net.connect(a, c)
    w.settle()
    assert w.holds(a, late) and not w.holds(b, late)
    ra.remove(bid, rc.node_id, w.now())  # b learns of the removal with the roster, then refuses c's objects
    w.net.disconnect(a, c)
    w.net.connect(a, b)
    w.settle()
    assert ra.counters["resealed"] >= 1 and w.holds(b, late)
    assert rb.writers(bid, late) == (ra.node_id,)
