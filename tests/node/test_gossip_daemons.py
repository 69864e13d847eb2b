"""Gossip in the public swarm between real daemons: three `gaml run` processes on 127.0.0.1 (real RocksDB, libp2p
gossipsub beside the sync protocol), and a forger: a libp2p host in the test process that speaks gossip.

A, B and C joined the swarm; B dials A and C dials B, and (rendezvous off) A and C never connect. A public asset
written on A through its daemon reaches C in a gossip message that B forwarded (C counts it received, published by
A). The forger sends B three verifiably bad messages (an object written by another key, an altered object, garbage):
B refuses each before it would forward it, strikes the forger, bans it at the third strike, and shuts it out of
gossip (its score falls to the ban's); nothing of the forger's reaches any store. With rendezvous on, A and C hear of
each other through B and connect. Every wait polls with a deadline; nothing sleeps.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from gaml.crdt import objects
from gaml.crdt.p2p import GossipParams, P2PHost
from gaml.crdt.swarm import GOSSIP_BANNED, bundles, gossip_topic, swarm_boundary, swarm_key
from gaml.node.home import init_home
from gaml.node.pairing import gossip_enabled, rendezvous_enabled
from gaml.node.shells.file_keychain import Unlock
from gaml.policy import crypto
from gaml.policy.errors import InvalidInput
from tests.node.cli_util import edit_config
from tests.node.p2p_util import Daemon, Fleet, Peer, fresh_status, get_or_none
from tests.node.test_replication import words

SWARM = "gossip-swarm"


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    with Fleet() as f:
        yield f


def swarm_line(fleet: Fleet, *, rendezvous: bool) -> tuple[tuple[Peer, ...], tuple[Daemon, ...]]:
    """A, B and C in the swarm, their daemons started in a line: B dials A, C dials B."""
    peers = a, b, c = fleet.peer("a"), fleet.peer("b"), fleet.peer("c")
    for p in peers:
        assert p.gaml_json("swarm", "join", SWARM)["joined"] == SWARM
        update_config(p.home, {"rendezvous": rendezvous})
    da = fleet.start(a, principal="alice")
    fleet.up(da)
    db = fleet.start(b, principal="alice", dial=[da.address])
    fleet.up(db)
    dc = fleet.start(c, principal="alice", dial=[db.address])
    fleet.up(dc)
    return peers, (da, db, dc)


def gossip(p: Peer) -> dict[str, Any]:
    return ((p.status() or {}).get("gossip")) or {}


def forged_messages() -> list[bytes]:
    """Three verifiably bad gossip messages, as a forger would publish them under its own identity."""
    someone = crypto.SigningKey(random.Random(5).randbytes(32))
    forger = crypto.SigningKey(random.Random(6).randbytes(32))

    def sealed(writer: crypto.SigningKey) -> bytes:
        asset = random.Random(7).randbytes(16).hex()
        _, o = objects.seal_object(
            swarm_boundary(SWARM), 1, swarm_key(SWARM), writer, objects.SNAPSHOT, asset, b"{}", crypto.SeededEntropy(1)
        )
        return o

    altered = bytearray(sealed(forger))
    altered[-3] ^= 0x40
    (not_its_own,) = bundles([sealed(someone)])  # someone else's object passed off in the forger's message
    (tampered,) = bundles([bytes(altered)])
    return [not_its_own, tampered, b"GS1\n\x00\x01garbage"]


@pytest.mark.slow  # tens of seconds: `make test-slow` (make test keeps under 15 minutes)
def test_public_memory_is_gossiped_through_a_relay_and_a_forger_is_shut_out(fleet: Fleet) -> None:
    (word,) = words(23, 1)
    (a, b, c), (da, db, dc) = swarm_line(fleet, rendezvous=False)  # a line: A and C must not hear of each other
    topic = gossip_topic(SWARM)
    fleet.wait("A's gossip mesh to hold B", lambda: gossip(a), lambda g: b.node_id in g.get("mesh", []))
    fleet.wait("C's gossip mesh to hold B", lambda: gossip(c), lambda g: b.node_id in g.get("mesh", []))
    assert gossip(a)["topic"] == topic and a.node_id not in (c.status() or {}).get("connected", {})

    draft = {
        "asset_type": "fact",
        "payload": {"text": f"the {word} ferry leaves at seven"},
        "owner_id": "alice",
        "privacy_scope": "public",
        "replication_policy": "public_swarm",
    }
    with da.client() as ca:
        (public,) = ca.put([draft])
    with dc.client() as cc:
        got = fleet.wait("C to hold A's public asset", lambda: get_or_none(cc, public))
        assert got is not None and word in got["payload"]["text"]
    fleet.wait("A to publish it", lambda: gossip(a), lambda g: g.get("published", 0) >= 1)
    # C heard A's message through B (A and C are not connected): it was received, or its object was known already
    fleet.wait("C to receive A's message", lambda: gossip(c), lambda g: g.get("received", 0) >= 1)
    assert gossip(c)["invalid"] == 0 and gossip(b)["invalid"] == 0

    async def forge() -> None:
        with trio.fail_after(90):
            async with P2PHost(random.Random(6).randbytes(32), gossip=GossipParams()) as rogue:
                await rogue.subscribe(topic, lambda fwd, pub, data: True, lambda pub, data: None)
                assert await rogue.dial(db.address) == b.node_id
                while b.node_id not in rogue.gossip_peers(topic):
                    await trio.sleep(0.1)
                for data in forged_messages():
                    await rogue.publish(topic, data)
                seen = await trio.to_thread.run_sync(
                    lambda: fleet.wait(
                        "B to ban the forger and shut it out of gossip",
                        lambda: gossip(b),
                        lambda g: rogue.node_id in g.get("shunned", []),
                    )
                )
                assert seen["invalid"] >= 3 and seen["scores"][rogue.node_id] <= GOSSIP_BANNED
                counters = (b.status() or {})["counters"]
                assert counters["gossip_invalid"] >= 3 and counters["swarm_banned"] >= 1

    trio.run(forge)
    assert gossip(c)["invalid"] == 0  # B forwarded none of it
    for d in (dc, db, da):
        d.stop()
    for p in (a, b, c):
        with p.opened() as node:
            assert node.store.live_ids() == [public], p.name  # nothing of the forger's was stored anywhere


def test_swarm_nodes_find_each_other_by_rendezvous_beyond_their_bootstrap_peers(fleet: Fleet) -> None:
    """B dials A and C dials B; A and C hear of each other's addresses through B and connect."""
    (a, _, c), _ = swarm_line(fleet, rendezvous=True)
    fleet.wait("A and C to connect", c.status, lambda s: a.node_id in (s or {}).get("connected", {}))
    # Each daemon writes its status now and then: read ones written after C reported the connection, since the
    # dialler's last one may predate its dial.
    connected_ns = time.time_ns()
    dialled = sum((fresh_status(fleet, p, connected_ns).get("rendezvous") or {}).get("dialled", 0) for p in (a, c))
    assert dialled >= 1  # one of them dialled the other, found by rendezvous: neither had the other's address
    fleet.wait("A's gossip mesh to hold C", lambda: gossip(a), lambda g: c.node_id in g.get("mesh", []))


def test_config_turns_gossip_and_rendezvous_off_and_refuses_a_value_that_is_not_a_boolean(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home, Unlock(key=bytes(32)), embedder="hash")
    assert gossip_enabled(home)  # on by default: it only ever carries public memory
    assert rendezvous_enabled(home)
    for value, ok in ((False, False), (True, True)):
        update_config(home, {"gossip": value, "rendezvous": value})
        assert gossip_enabled(home) is ok and rendezvous_enabled(home) is ok
    update_config(home, {"gossip": "no", "rendezvous": True})
    with pytest.raises(InvalidInput, match=r"p2p\.gossip"):
        gossip_enabled(home)


def update_config(home: Path, p2p: dict[str, Any]) -> None:
    edit_config(home, lambda c: c.update(p2p={**(c.get("p2p") or {}), **p2p}))
