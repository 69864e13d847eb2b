"""What the public swarm gossips (crdt/swarm.py): bundles, strictly parsed; the judgement of a message before
gossipsub delivers or forwards it; the gossip score a peer's reputation gives it; and the replica's outbox."""

from __future__ import annotations

import random

import pytest

from gaml.crdt import objects, p2p
from gaml.crdt.errors import BadMessage, BadObject
from gaml.crdt.swarm import (
    GOSSIP_BANNED,
    GOSSIP_MAX_BYTES,
    GOSSIP_MAX_OBJECTS,
    GOSSIP_REPUTATION,
    MAX_ANNOUNCED,
    announcement,
    bundles,
    check_announcement,
    check_gossip,
    gossip_score,
    gossip_topic,
    join,
    peers_topic,
    swarm_boundary,
    swarm_key,
    unbundle,
)
from gaml.node.core.replica import Replica
from gaml.policy import crypto
from gaml.simulations.nodes import make_node

SWARM = "gossip-swarm"


def signer(n: int) -> crypto.SigningKey:
    return crypto.SigningKey(random.Random(n).randbytes(32))


def obj(writer: crypto.SigningKey, data: bytes = b"x", name: str = SWARM, epoch: int = 1) -> bytes:
    asset = random.Random(len(data)).randbytes(16).hex()
    _, o = objects.seal_object(
        swarm_boundary(name), epoch, swarm_key(name), writer, objects.SNAPSHOT, asset, data, crypto.SeededEntropy(3)
    )
    return o


def test_bundles_round_trip_within_their_limits_and_leave_out_what_cannot_fit() -> None:
    w = signer(1)
    small = [obj(w, bytes([i]) * 10) for i in range(GOSSIP_MAX_OBJECTS + 5)]
    big = obj(w, b"b" * (GOSSIP_MAX_BYTES // 3))
    huge = obj(w, b"h" * GOSSIP_MAX_BYTES)  # larger than any bundle: left to sync
    out = bundles([*small, big, big, huge, big])
    assert all(len(b) <= GOSSIP_MAX_BYTES for b in out)
    assert [o for b in out for o in unbundle(b)] == [*small, big, big, big]
    assert len(unbundle(out[0])) == GOSSIP_MAX_OBJECTS
    assert bundles([]) == [] and bundles([huge]) == []
    assert GOSSIP_MAX_BYTES == p2p.GOSSIP_MAX_BYTES  # what the swarm bundles, the host carries


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"GS1\n",
        b"GS1\n\x00\x00",  # no objects
        b"GS1\n\x00\x01",  # one announced, none there
        b"GS1\n\x00\x01\x00\x00\x00\x05hello",  # shorter than any object
        b"XX1\n\x00\x01",  # bad magic
    ],
)
def test_a_malformed_bundle_is_refused(data: bytes) -> None:
    with pytest.raises(BadObject):
        unbundle(data)


def test_trailing_bytes_and_oversize_bundles_are_refused() -> None:
    (good,) = bundles([obj(signer(1))])
    with pytest.raises(BadObject, match="after"):
        unbundle(good + b"\x00")
    with pytest.raises(BadObject):
        unbundle(b"GS1\n" + b"\x00" * GOSSIP_MAX_BYTES)


def test_a_message_is_judged_by_its_objects_signatures_and_publisher() -> None:
    me, other = signer(1), signer(2)
    publisher = me.public_key.hex()
    (good,) = bundles([obj(me, b"a"), obj(me, b"bb")])
    assert [o.writer for o in check_gossip(SWARM, publisher, good)] == [publisher] * 2

    (foreign,) = bundles([obj(me), obj(other)])  # another writer's object in my message
    with pytest.raises(BadObject, match="publisher"):
        check_gossip(SWARM, publisher, foreign)
    tampered = bytearray(obj(me))
    tampered[-1] ^= 1
    (altered,) = bundles([bytes(tampered)])
    with pytest.raises(BadObject, match="does not open"):
        check_gossip(SWARM, publisher, altered)
    (elsewhere,) = bundles([obj(me, name="another-swarm")])  # sealed under another swarm's key
    with pytest.raises(BadObject):
        check_gossip(SWARM, publisher, elsewhere)
    (later,) = bundles([obj(me, epoch=2)])  # a swarm has one epoch
    with pytest.raises(BadObject, match="epoch"):
        check_gossip(SWARM, publisher, later)
    assert gossip_topic(SWARM) != gossip_topic("another-swarm") and SWARM not in gossip_topic(SWARM)


def test_a_peers_gossip_score_is_its_reputation_and_a_ban_shuts_it_out() -> None:
    me, met, banned, stranger = (signer(i).public_key.hex() for i in range(4))
    view = join(SWARM, me).meet(met, 5).meet(banned, 6).ban(banned)
    rep = {met: 0.05, me: 1.0}.get
    assert gossip_score(view, met, lambda n: rep(n) or 0.0) == pytest.approx(0.05 * GOSSIP_REPUTATION)
    assert gossip_score(view, met, lambda n: 7.0) == GOSSIP_REPUTATION  # clamped to full reputation
    assert gossip_score(view, banned, lambda n: 1.0) == GOSSIP_BANNED
    assert gossip_score(view, stranger, lambda n: 1.0) == 0.0
    assert p2p.GossipParams().graylist_threshold > GOSSIP_BANNED


def test_the_replica_gossips_its_own_swarm_writes_once_and_skips_superseded_ones() -> None:
    rep = Replica(make_node(41))
    assert rep.swarm() is None and rep.gossip_out(10, 1 << 20) == []
    rep.join_swarm(SWARM, 1)
    rep.gossiping = True
    draft = {
        "owner_id": "alice",
        "privacy_scope": "public",
        "replication_policy": "public_swarm",
        "asset_type": "fact",
        "payload": {"text": "the bridge opens at nine"},
    }
    (a,) = rep.node.put([draft], 10)
    rep.node.put([{**draft, "payload": {"text": "a private note"}, "privacy_scope": "user_private"}], 11)
    rep.pump(12)
    (first,) = rep.gossip_out(10, 1 << 20)
    assert [o.asset_id for o in check_gossip(SWARM, rep.node_id, bundles([first])[0])] == [a]
    assert rep.gossip_out(10, 1 << 20) == []  # handed out once
    rep.node.put([{**draft, "tags": ["first"]}], 20)  # same content, same id: an edit
    rep.pump(21)
    rep.node.put([{**draft, "tags": ["second"]}], 30)
    rep.pump(31)
    (latest,) = rep.gossip_out(10, 1 << 20)  # the superseded snapshot is skipped: its successor follows
    assert rep.state()[SWARM] == [objects.object_id(latest).hex()]
    rep.node.delete(a, 40)
    rep.pump(41)
    (tomb,) = rep.gossip_out(10, 1 << 20)
    assert check_gossip(SWARM, rep.node_id, bundles([tomb])[0])[0].kind == objects.TOMBSTONE
    rep.gossiping = False  # a daemon told not to gossip (config p2p.gossip): sync alone carries its writing
    rep.node.put([{**draft, "payload": {"text": "the ferry leaves at seven"}}], 50)
    rep.pump(51)
    assert rep.gossip_out(10, 1 << 20) == []


def test_gossip_out_takes_the_oldest_objects_within_its_limits_and_keeps_the_rest() -> None:
    rep = Replica(make_node(42))
    rep.join_swarm(SWARM, 1)
    rep.gossiping = True
    drafts = [
        {
            "owner_id": "alice",
            "privacy_scope": "public",
            "replication_policy": "public_swarm",
            "asset_type": "fact",
            "payload": {"text": f"fact number {i} " + "x" * 400},
        }
        for i in range(5)
    ]
    ids = rep.node.put(drafts, 10)
    rep.pump(11)

    def assets(objs: list[bytes]) -> list[str]:
        return [o.asset_id for o in check_gossip(SWARM, rep.node_id, bundles(objs)[0])] if objs else []

    first = rep.gossip_out(2, 1 << 20)  # by count
    one = rep.gossip_out(5, 10)  # by bytes: always at least one
    rest = rep.gossip_out(5, 1 << 20)
    assert len(first) == 2 and len(one) == 1 and len(rest) == 2
    assert sorted(assets(first) + assets(one) + assets(rest)) == sorted(ids)
    assert rep.gossip_out(5, 1 << 20) == []


def test_an_announcement_names_only_its_publishers_own_addresses() -> None:
    me = p2p.peer_id_of(signer(1).public_key.hex())
    other = p2p.peer_id_of(signer(2).public_key.hex())
    mine = [f"/ip4/10.0.0.{i}/tcp/4001/p2p/{me}" for i in (2, 1, 2)]
    data = announcement(mine)
    assert check_announcement(data, me) == sorted(set(mine))  # sorted, each once
    assert peers_topic(SWARM) != gossip_topic(SWARM) and SWARM not in peers_topic(SWARM)
    bad = [
        announcement([f"/ip4/10.0.0.1/tcp/4001/p2p/{other}"]),  # someone else's address
        announcement([f"/ip4/10.0.0.1/tcp/4001/p2p/{me}", f"/ip4/10.0.0.2/tcp/4001/p2p/{other}"]),
        b'{"format":"gaml/swarm-peers/1","addrs":[]}',
        b'{"addrs": ["/ip4/10.0.0.1/tcp/1/p2p/' + me.encode() + b'"], "format": "gaml/swarm-peers/1"}',  # spaces
        b'{"format":"gaml/swarm-peers/1","addrs":["/ip4/1/p2p/' + me.encode() + b'"],"more":1}',
        b"not json",
        b"[]",
        announcement([f"/ip4/10.0.0.1/tcp/4001/{'x' * 300}/p2p/{me}"]),  # too long
    ]
    for data in bad:
        with pytest.raises(BadMessage):
            check_announcement(data, me)
    many = [f"/ip4/10.0.0.{i}/tcp/4001/p2p/{me}" for i in range(20)]
    assert len(check_announcement(announcement(many), me)) == MAX_ANNOUNCED  # a long list is cut, not refused
