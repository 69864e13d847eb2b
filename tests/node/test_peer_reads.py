"""Peer reads end to end: three `gaml run` daemons (alice's devices) with real RocksDB stores and libp2p on 127.0.0.1.

A hydration that asks peers sends the goal only to the members of the boundaries that hold the caller's memory, waits
for their answers until its deadline, takes their objects through the replication checks, and declares in its receipt
who was asked, who answered (with which assets, and which facts they brought), and who did not answer in time (here a
member whose daemon is stopped with SIGSTOP: connected, silent). Nothing waits by sleeping; nothing asserts a
duration (the deadline's cost is measured by ``bench/replication_bench.py``).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator

import pytest

from gaml.policy.errors import InvalidInput, PolicyError
from gaml.v1 import memory_pb2
from tests.node.p2p_util import Fleet, peer_stats
from tests.node.test_replication import words


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    with Fleet() as f:
        yield f


@pytest.mark.slow  # tens of seconds: `make test-slow` (make test keeps under 15 minutes)
def test_a_hydration_that_asks_peers_declares_who_answered_and_who_did_not(fleet: Fleet) -> None:
    (word,) = words(3, 1)
    a, b, c = fleet.peer("a"), fleet.peer("b"), fleet.peer("c")
    for p in (b, c):
        invitation = fleet.base / f"pair-{p.name}.json"
        a.gaml_json("pair", p.node_id, "--owner", "alice", "--out", str(invitation))
        assert p.gaml_json("pair", "--join", str(invitation))["joined"] == "alice-devices"
    assert a.gaml_json("subnet", "create", "acme", "--tenant", "acme")["created"] == "acme"  # none of alice's memory
    draft = {
        "asset_type": "fact",
        "payload": {"text": f"alice's locker code word is {word}"},
        "owner_id": "alice",
        "privacy_scope": "user_private",
        "replication_policy": "trusted_devices",
    }
    (fact,) = c.gaml("put", stdin=json.dumps(draft)).split()  # on C's store before C's daemon runs

    da = fleet.start(a, principal="alice")
    fleet.up(da)
    db = fleet.start(b, principal="alice", dial=[da.address])
    dc = fleet.start(c, principal="alice", dial=[da.address])
    fleet.up(db, dc)
    fleet.wait(
        "A's devices boundary to be open with B and C",
        a.status,
        lambda s: all(peer_stats(s, p).get("open_boundaries") == 1 for p in (b, c)),
    )
    goal = f"what is alice's locker code word {word}"
    with da.client() as ca:
        out = ca.hydrate(goal, 400, peers=memory_pb2.PeerRead(deadline_ms=10_000, k=8))
        peers = out["receipt"]["peers"]
        assert peers["boundaries"] == ["alice-devices"]  # not acme: it holds none of alice's memory
        assert sorted(x["node"] for x in peers["asked"]) == sorted((b.node_id, c.node_id))
        answered = {x["node"]: x for x in peers["answered"]}
        assert set(answered) == {b.node_id, c.node_id} and peers["timed_out"] == []
        assert fact in answered[c.node_id]["assets"] and answered[c.node_id]["rejected"] == 0
        (shown,) = [f for f in out["receipt"]["facts"] if f["id"] == fact]
        assert c.node_id in shown["peers"]
        assert word in out["frame"]

        hits = ca.search(word, k=3, peers=memory_pb2.PeerRead(deadline_ms=10_000))
        assert hits[0]["id"] == fact and c.node_id in hits[0]["explain"]["peers"]

        with pytest.raises(PolicyError, match="acme"):
            ca.hydrate(goal, 400, peers=memory_pb2.PeerRead(boundaries=["acme"]))
        with pytest.raises(InvalidInput, match="no boundary"):
            ca.hydrate(goal, 400, peers=memory_pb2.PeerRead(boundaries=["nowhere"]))

        assert dc.process.pid is not None
        os.kill(dc.process.pid, signal.SIGSTOP)  # C stays connected and says nothing
        try:
            out = ca.hydrate(goal, 400, peers=memory_pb2.PeerRead(deadline_ms=3_000))
        finally:
            os.kill(dc.process.pid, signal.SIGCONT)
        peers = out["receipt"]["peers"]
        assert [x["node"] for x in peers["answered"]] == [b.node_id]
        assert peers["timed_out"] == [{"node": c.node_id, "boundary": "alice-devices", "connected": True}]
        assert word in out["frame"]  # C's fact reached A by the first read (and by sync)

    # The same through the CLI, with the daemon and without one.
    via_daemon = json.loads(a.gaml("hydrate", "--goal", goal, "--budget", "400", "--peers", "--json"))
    assert {x["node"] for x in via_daemon["receipt"]["peers"]["asked"]} == {b.node_id, c.node_id}
    rows = json.loads(a.gaml("search", word, "--peers", "--peer-deadline-ms", "10000", "--json"))
    assert rows[0]["id"] == fact and c.node_id in rows[0]["peers"]
    for d in (db, dc, da):
        d.stop()
    alone = json.loads(a.gaml("hydrate", "--goal", goal, "--budget", "400", "--peers", "--json"))
    assert alone["receipt"]["peers"]["asked"] == [] and "gaml run" in alone["receipt"]["peers"]["why"]
