"""The public swarm between real daemons: four `gaml run` processes in network namespaces joined by a bridge (a LAN
made by the test: ``simulations/lan.py``), real RocksDB stores, real libp2p.

A, B and C start with ``--mdns`` and no address of anyone: they find each other on the LAN. D does not announce itself
and knows only A's address (bootstrap). All four joined the swarm ``lan-swarm``. A holds public memory that asks for
the swarm, private memory, and shared memory meant for the public only as a redacted packet (and that packet). The
public asset reaches B, C and D; nothing else does: their stores hold it alone, and a raw scan of every file of their
homes finds none of the other assets' words or ids. B's hydration that asks its swarm peers gets the public asset in
their answers. Every wait polls with a deadline; nothing sleeps.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from gaml.node.core.replica import Replica
from gaml.simulations.lan import Lan, lan_unavailable
from gaml.v1 import memory_pb2
from tests.node.p2p_util import Fleet, files_containing, get_or_none
from tests.node.test_replication import words

WHY = lan_unavailable()
# Slow (half a minute, four daemons in namespaces): `make test-slow`, beside the real mode of the simulation.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(WHY), reason=f"no LAN of namespaces here: {WHY}")]

SWARM = "lan-swarm"


@pytest.fixture
def lan_fleet() -> Iterator[tuple[Lan, Fleet]]:
    with Lan(3) as lan, Fleet() as fleet:  # the fleet's processes end before the namespaces go
        yield lan, fleet


def draft(text: str, **kw: str) -> str:
    return json.dumps({"asset_type": "fact", "payload": {"text": text}, "owner_id": "alice", **kw})


def test_public_memory_travels_a_swarm_found_by_mdns_and_bootstrap_and_nothing_else_does(
    lan_fleet: tuple[Lan, Fleet],
) -> None:
    lan, fleet = lan_fleet
    public_w, private_w, shared_w = words(19, 3)
    a, b, c, d = (fleet.peer(n) for n in "abcd")
    for p in (a, b, c, d):
        assert p.gaml_json("swarm", "join", SWARM)["joined"] == SWARM
    (public,) = a.gaml(
        "put",
        stdin=draft(f"the {public_w} bridge opens at nine", privacy_scope="public", replication_policy="public_swarm"),
    ).split()
    (private,) = a.gaml(
        "put",
        stdin=draft(f"alice's {private_w} diary", privacy_scope="user_private", replication_policy="public_swarm"),
    ).split()
    shared_text = f"call Bob Smith about {shared_w} at 555-0100"
    (shared,) = a.gaml(
        "put",
        stdin=draft(
            shared_text,
            privacy_scope="shared",
            replication_policy="public_swarm",
            inference_policy="public_with_redaction",
        ),
    ).split()
    packet = a.gaml("redact", shared, "--as", "alice").split()[-1]

    mdns = ["--mdns"]
    da = fleet.start(a, principal="alice", listen=f"/ip4/{lan.ip(0)}/tcp/4001", netns=lan.hosts[0], extra=mdns)
    db = fleet.start(b, principal="alice", listen=f"/ip4/{lan.ip(1)}/tcp/4001", netns=lan.hosts[1], extra=mdns)
    dc = fleet.start(c, principal="alice", listen=f"/ip4/{lan.ip(2)}/tcp/4001", netns=lan.hosts[2], extra=mdns)
    fleet.up(da)
    dd = fleet.start(d, principal="alice", listen=f"/ip4/{lan.ip(2)}/tcp/4002", netns=lan.hosts[2], dial=[da.address])
    fleet.up(db, dc, dd)

    def connected(status: dict | None) -> set[str]:
        return set((status or {}).get("connected", {}))

    # B and C were told no address: they found A and each other by mDNS.
    fleet.wait("B to find A and C on the LAN", b.status, lambda s: {a.node_id, c.node_id} <= connected(s))
    fleet.wait("C to find A and B on the LAN", c.status, lambda s: {a.node_id, b.node_id} <= connected(s))
    assert (b.status() or {}).get("discovered", 0) >= 2
    for p, dp in ((b, db), (c, dc), (d, dd)):
        with dp.client() as cl:
            got = fleet.wait(f"{p.name} to receive the public asset", lambda cl=cl: get_or_none(cl, public))
            assert got is not None and public_w in got["payload"]["text"]
            for other in (private, shared, packet):
                assert get_or_none(cl, other) is None
    # A swarm read: B asks its swarm peers (named: the swarm holds no memory of alice's own) for the public fact.
    with db.client() as cl:
        out = cl.hydrate(
            f"when does the {public_w} bridge open",
            300,
            peers=memory_pb2.PeerRead(deadline_ms=10_000, boundaries=[SWARM]),
        )
        peers = out["receipt"]["peers"]
        assert peers["boundaries"] == [SWARM] and peers["asked"], peers
        assert any(public in x["assets"] for x in peers["answered"]), peers
    for dp in (dd, dc, db, da):
        dp.stop()

    needles = {}
    for name, id_ in (("private", private), ("shared", shared), ("packet", packet)):
        needles[f"the {name} asset id (hex)"] = id_.encode()
        needles[f"the {name} asset id (raw)"] = bytes.fromhex(id_)
    needles |= {"the private word": private_w.encode(), "the shared word": shared_w.encode(), "555-0100": b"555-0100"}
    for p in (b, c, d):
        assert files_containing(p.home, needles) == [], p.name
        with p.opened() as node:
            assert node.store.live_ids() == [public], p.name
            rep = Replica(node)
            bid = rep.boundary_for("public", "*")
            assert bid is not None and rep.asset_ids(bid) == [public]
