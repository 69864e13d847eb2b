"""Replication end to end: real `gaml run` daemons in child processes, real RocksDB stores, real libp2p on 127.0.0.1.

Three stories (issue 7), each with its own homes and daemons:

1. Two trusted devices of alice's (paired with `gaml pair`) converge after concurrent edits of one asset, one of them
   made while the other device's daemon was down; an unrelated node that dials one of them receives nothing and
   stores nothing of it.
2. An enterprise subnet of four members and a relay, where every member dials only the relay: assets written on
   different members (and a concurrent edit) reach every member through the relay, which carries ciphertext only.
3. Removing a member rotates the group key: the removed node gets nothing written afterwards; an erasure (`gaml
   forget`) on one member travels as tombstones and erases the item and its derivatives on every member.

Every wait polls a condition (the daemons' answers over their Unix sockets, their ``run/replication.json``) with a
deadline and a message; nothing sleeps to synchronise and nothing asserts a duration. Inputs come from seeded
generators. Processes are killed and homes removed whatever happens (:class:`tests.node.p2p_util.Fleet`).
"""

from __future__ import annotations

import json
import random
import string
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from gaml.crdt.objects import peek
from gaml.node.core.consensus import record_asset_id
from gaml.node.core.replica import Replica, record_of
from gaml.node.serve.client import Client
from gaml.policy.errors import Deleted, NotFound
from tests.node.p2p_util import (
    Daemon,
    Fleet,
    Peer,
    boundary_status,
    files_containing,
    fresh_status,
    get_or_none,
    live_records,
    peer_stats,
    replication_records,
)

SUBNET = "acme"
MEMBERS = ("s1", "s2", "s3", "s4")
# Fields a node sets for itself, or that change on reads: not part of what replicas agree on.
NODE_LOCAL = ("version", "source_node", "signature", "encryption_key_ref", "heat", "tier")


def words(seed: int, n: int) -> list[str]:
    """``n`` distinct made-up words (12 lower-case letters): needles no store holds by chance."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        w = "".join(rng.choice(string.ascii_lowercase) for _ in range(12))
        if w not in out:
            out.append(w)
    return out


def shared(asset: dict[str, Any] | None) -> dict[str, Any] | None:
    """An asset as a daemon returns it, without what is the node's own."""
    return None if asset is None else {k: v for k, v in asset.items() if k not in NODE_LOCAL}


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    with Fleet() as f:
        yield f


# -- 1. trusted devices ---------------------------------------------------------------------------------------------


def test_paired_devices_converge_after_concurrent_edits_and_an_unrelated_node_gets_nothing(fleet: Fleet) -> None:
    (word,) = words(1, 1)
    a, b, c = fleet.peer("a"), fleet.peer("b"), fleet.peer("c")
    invitation = fleet.base / "pair.json"
    made = a.gaml_json("pair", b.node_id, "--owner", "alice", "--out", str(invitation))
    assert (made["boundary"], made["role"], made["invited"]) == ("alice-devices", "member", b.node_id)
    assert b.gaml_json("pair", "--join", str(invitation))["joined"] == "alice-devices"

    da = fleet.start(a, principal="alice")
    fleet.up(da)
    db = fleet.start(b, principal="alice", dial=[da.address])
    dc = fleet.start(c, principal="alice", dial=[da.address])
    fleet.up(db, dc)
    # The outsider has met A (A's Hello and Tags reached it) before anything is written.
    fleet.wait("C's handshake with A", c.status, lambda s: peer_stats(s, a).get("frames_in", 0) >= 2)

    draft = {
        "asset_type": "fact",
        "payload": {"text": f"alice's private plan: {word} at dawn"},
        "owner_id": "alice",
        "privacy_scope": "user_private",
        "replication_policy": "trusted_devices",
        "tags": ["plan"],
    }
    with da.client() as ca, db.client() as cb:
        (id_,) = ca.put([draft])
        on_b = fleet.wait("B to receive A's private asset", lambda: get_or_none(cb, id_))
        assert on_b is not None and on_b["payload"] == draft["payload"] and on_b["tags"] == ["plan"]
        assert shared(on_b) == shared(ca.get(id_))

    # Concurrent edits of the same asset: on A through its daemon, on B with the CLI while B's daemon is down.
    db.stop()
    with da.client() as ca:
        assert ca.put([{**draft, "tags": ["plan", "from-a"], "confidence_score": 0.7}]) == [id_]
    edited_on_b = {**draft, "tags": ["plan", "from-b"], "entities": ["Alice"]}
    assert b.gaml("put", stdin=json.dumps(edited_on_b)).split() == [id_]
    with b.opened() as nb:  # B's edit is there, A's is not (B was down)
        assert nb.store.get(id_).tags == ("from-b", "plan")

    db = fleet.start(b, principal="alice", dial=[da.address])
    fleet.up(db)
    merged = {"tags": ["from-a", "from-b", "plan"], "confidence_score": 0.7, "entities": ["Alice"]}

    def both(ca: Client, cb: Client) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        return shared(get_or_none(ca, id_)), shared(get_or_none(cb, id_))

    def converged(pair: tuple[dict[str, Any] | None, dict[str, Any] | None]) -> bool:
        return all(x is not None and {k: x[k] for k in merged} == merged for x in pair) and pair[0] == pair[1]

    with da.client() as ca, db.client() as cb:
        fleet.wait("A and B to converge on both edits", lambda: both(ca, cb), converged)
    settled_ns = time.time_ns()

    # The unrelated node: handshake frames only (anything else would be stale to a node in no boundary).
    c_status = fresh_status(fleet, c, settled_ns)
    a_status = fresh_status(fleet, a, settled_ns)
    seen_by_c = peer_stats(c_status, a)
    assert seen_by_c["sessions"] >= 1 and seen_by_c["frames_in"] >= 2, seen_by_c
    for counter in ("ids_heard", "objects_received", "objects_accepted", "open_boundaries"):
        assert seen_by_c[counter] == 0, (counter, seen_by_c)
    for counter in ("stale_frames", "refused_frames", "bad_frames", "bad_rosters"):
        assert seen_by_c[counter] == 0, (counter, seen_by_c)
    assert c_status["boundaries"] == [] and c_status["counters"] == {}
    seen_by_a = peer_stats(a_status, c)
    assert seen_by_a["objects_sent"] == 0 and seen_by_a["open_boundaries"] == 0, seen_by_a
    assert peer_stats(a_status, b)["open_boundaries"] == 1

    for d in (dc, da, db):
        d.stop()
    with a.opened() as na:
        rep = Replica(na)
        bid = rep.boundary_for("devices", "alice")
        assert bid is not None
        a_objects = rep.objects_of(bid)
        on_a = record_of(na.store.get(id_))
    with b.opened() as nb:
        on_b_rec = record_of(nb.store.get(id_))
    assert on_a == on_b_rec
    assert (on_a["tags"], on_a["confidence_score"], on_a["entities"]) == (
        merged["tags"],
        merged["confidence_score"],
        merged["entities"],
    )
    assert len(a_objects) >= 3  # the first snapshot, A's edit, B's edit, the merge: distinct objects

    needles = {"the private word": word.encode(), "the asset id": id_.encode(), "the raw asset id": bytes.fromhex(id_)}
    for oid in a_objects:
        needles[f"object {oid.hex()[:12]} (hex)"] = oid.hex().encode()
        needles[f"object {oid.hex()[:12]} (raw)"] = oid
    assert files_containing(c.home, needles) == []
    with c.opened() as nc:
        assert nc.store.live_ids() == []
        with pytest.raises(NotFound):
            nc.store.get(id_, include_deleted=True)
        held = replication_records(nc.store)
        assert {k: n for k, n in held.items() if n and k != "repstate"} == {}, held


# -- 2 and 3. an enterprise subnet with a relay ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def subnet_template() -> Iterator[dict[str, Peer]]:
    """Four members and a relay of subnet acme (tenant acme), made with the CLI; stopped homes, copied per test."""
    with Fleet() as f:
        peers = {n: f.peer(n) for n in (*MEMBERS, "r")}
        s1 = peers["s1"]
        assert s1.gaml_json("subnet", "create", SUBNET, "--tenant", "acme")["created"] == SUBNET
        for n in ("s2", "s3", "s4", "r"):
            invitation = f.base / f"{n}.json"
            relay = ["--relay"] if n == "r" else []
            out = s1.gaml_json("subnet", "invite", SUBNET, peers[n].node_id, "--out", str(invitation), *relay)
            assert out["role"] == ("relay" if n == "r" else "member")
            assert peers[n].gaml_json("subnet", "join", str(invitation))["joined"] == SUBNET
        for n in MEMBERS:  # bob writes acme's memory on each member: the tenant is his
            peers[n].gaml("principal", "add", "bob", "--tenant", "acme")
        yield peers


def start_subnet(fleet: Fleet, template: dict[str, Peer]) -> tuple[dict[str, Peer], dict[str, Daemon]]:
    """Copies of the template's homes, the relay's daemon, then the members' daemons dialling only the relay."""
    peers = {n: fleet.copy(p) for n, p in template.items()}
    daemons = {"r": fleet.start(peers["r"], principal="ops")}
    fleet.up(daemons["r"])
    relay = daemons["r"].address
    for n in MEMBERS:
        daemons[n] = fleet.start(peers[n], principal="bob", dial=[relay])
    fleet.up(*(daemons[n] for n in MEMBERS))
    return peers, daemons


def subnet_asset(text: str, **kw: Any) -> dict[str, Any]:
    return {
        "asset_type": "fact",
        "payload": {"text": text},
        "owner_id": "bob",
        "tenant_scope": "acme",
        "privacy_scope": "enterprise_private",
        "replication_policy": "private_subnet",
        **kw,
    }


def test_a_subnet_converges_through_a_relay_that_holds_no_plaintext(
    fleet: Fleet, subnet_template: dict[str, Peer]
) -> None:
    texts = [f"acme runbook {w}: rotate the staging certificates" for w in words(2, len(MEMBERS))]
    peers, daemons = start_subnet(fleet, subnet_template)
    relay = peers["r"]
    clients = {n: daemons[n].client() for n in MEMBERS}
    try:
        ids = [clients[n].put([subnet_asset(t, tags=[n])])[0] for n, t in zip(MEMBERS, texts, strict=True)]

        def everywhere() -> dict[str, list[dict[str, Any] | None]]:
            return {n: [shared(get_or_none(c, i)) for i in ids] for n, c in clients.items()}

        def same(seen: dict[str, list[dict[str, Any] | None]]) -> bool:
            first = seen["s1"]
            return all(x is not None for x in first) and all(v == first for v in seen.values())

        fleet.wait("every member to hold every member's asset", everywhere, same)
        # Concurrent edits of s1's asset on s2 and s3: every member ends with both. s3 edits with the CLI while its
        # daemon is down, so neither edit can have seen the other (two daemons' puts one after the other were not
        # concurrent when s2's edit reached s3 first: s3's then replaced it, and CI waited for a merge never due).
        clients["s3"].close()
        daemons["s3"].stop()
        clients["s2"].put([subnet_asset(texts[0], tags=["s1", "edited-on-s2"])])
        assert peers["s3"].gaml(
            "put", stdin=json.dumps(subnet_asset(texts[0], tags=["s1", "edited-on-s3"]))
        ).split() == [ids[0]]
        with peers["s3"].opened() as n3:  # s3's edit is there, s2's is not (s3 was down)
            assert n3.store.get(ids[0]).tags == ("edited-on-s3", "s1")
        daemons["s3"] = fleet.start(peers["s3"], principal="bob", dial=[daemons["r"].address])
        fleet.up(daemons["s3"])
        clients["s3"] = daemons["s3"].client()
        final = fleet.wait(
            "every member to merge the concurrent edits",
            everywhere,
            lambda seen: same(seen) and seen["s1"][0] is not None and len(seen["s1"][0]["tags"]) == 3,
        )
        assert final["s1"][0] is not None and final["s1"][0]["tags"] == ["edited-on-s2", "edited-on-s3", "s1"]
        # The runbooks differ in one word and come from different members: one contested slot, whose one consensus
        # record the members write and replicate like any asset, until every member holds the same.
        (slot,) = fleet.wait("s1 to list the runbooks' slot", clients["s1"].conflicts)
        rid = record_asset_id(bytes.fromhex(slot["boundary"]), slot["slot"])

        def settled(seen: list[tuple[dict[str, Any] | None, list[dict[str, Any]]]]) -> bool:
            """The same record everywhere, deciding over every candidate each member weighs, each with the writers
            each member knows of, with the winner each member would choose: a record that matches at one moment while
            a later candidate (or a later writer of one: s3's edit) is still on its way would be rewritten by the
            founder after the test stopped looking."""
            record = seen[0][0]
            if record is None or any(r != record for r, _ in seen):
                return False
            decided = record["payload"]["consensus"]
            named = sorted([*decided["won"], *decided["lost"]])
            writers = {c["id"]: sorted(c["sources"]) for c in decided["candidates"]}
            return sorted(writers) == named and all(
                len(view) == 1
                and {c["id"]: sorted(c["sources"]) for c in view[0]["candidates"]} == writers
                and view[0]["winner"] == decided["winner"]
                for _, view in seen
            )

        fleet.wait(
            "every member to hold the same consensus record, over every candidate",
            lambda: [(shared(get_or_none(c, rid)), c.conflicts(slot=slot["slot"])) for c in clients.values()],
            settled,
        )
        ids.append(rid)
    finally:
        for c in clients.values():
            c.close()
    settled_ns = time.time_ns()

    # The topology: members talk to the relay only, so every object passed through it.
    r_status = fresh_status(fleet, relay, settled_ns)
    members = {peers[n].node_id for n in MEMBERS}
    assert set(r_status["connected"]) == members
    assert r_status["counters"].get("carried", 0) > 0, r_status["counters"]
    assert boundary_status(r_status, SUBNET)["role"] == "relay"
    for n in MEMBERS:
        st = fresh_status(fleet, peers[n], settled_ns)
        assert set(st["connected"]) == set(st["peers"]) == {relay.node_id}, (n, st["connected"], list(st["peers"]))
        assert boundary_status(st, SUBNET)["role"] == "member"

    for n in ("r", *MEMBERS):
        daemons[n].stop()
    records = {}
    for n in MEMBERS:
        with peers[n].opened() as node:
            records[n] = live_records(node.store)
    # Memory written by the members, exactly, everywhere; and the slot's consensus record, the same everywhere (a
    # record of an earlier state of the slot may be there too: records are bookkeeping, never shown).
    plain = {n: {i: r for i, r in rs.items() if r["asset_type"] != "consensus_record"} for n, rs in records.items()}
    rid = ids.pop()
    assert set(plain["s1"]) == set(ids)
    for n in MEMBERS:
        assert plain[n] == plain["s1"] and records[n][rid] == records["s1"][rid], n

    # The relay: it carried objects and holds no plaintext, no asset, no document, no group key.
    assert files_containing(relay.home, {f"text {i}": t.encode() for i, t in enumerate(texts)}) == []
    assert files_containing(relay.home, {f"word {i}": w.encode() for i, w in enumerate(words(2, len(MEMBERS)))}) == []
    with relay.opened() as node:
        assert node.store.live_ids() == []
        held = replication_records(node.store)
        assert held["repdoc"] == 0 and held["repobj"] > 0, held
        assert not [r for r in node.store.keychain.refs() if r.startswith("boundary/")]


# -- 3. removal, key rotation, erasure ------------------------------------------------------------------------------

TURNS = (
    ("user", "Please set up the database for the billing service."),
    ("assistant", "We decided to use Postgres 16 with {word} replication on port 8080."),
    ("assistant", "All tests pass now and the billing database is ready."),
)


def transcript(word: str) -> str:
    start = 1_700_000_000
    return "".join(
        json.dumps({"sessionId": "s1", "role": role, "content": text.format(word=word), "timestamp": start + 60 * k})
        + "\n"
        for k, (role, text) in enumerate(TURNS)
    )


def holding(client: Client, word: str) -> dict[str, dict[str, Any] | None]:
    """The live assets a node's lexical search finds the word in, by id (with the word really in them), without
    their node-local fields."""
    hits = client.search(word, k=50, mode=3)  # SEARCH_MODE_LEXICAL
    return {h["id"]: shared(h["asset"]) for h in hits if word in json.dumps(h["asset"]["payload"])}


@pytest.mark.slow  # tens of seconds: `make test-slow` (make test keeps under 15 minutes)
def test_a_removed_member_gets_nothing_new_and_a_tombstone_erases_everywhere(
    fleet: Fleet, subnet_template: dict[str, Peer]
) -> None:
    before_word, after_word, erased_word = words(3, 3)
    peers, daemons = start_subnet(fleet, subnet_template)
    s1, s4, relay = peers["s1"], peers["s4"], peers["r"]
    with daemons["s1"].client() as c1, daemons["s4"].client() as c4:
        (before,) = c1.put([subnet_asset(f"before the removal: {before_word}")])
        fleet.wait("s4 to receive an asset while still a member", lambda: get_or_none(c4, before))
    old = boundary_status(s1.status(), SUBNET)
    assert old["epoch"] == 1

    # Remove s4 on the admin node (its daemon holds the store: stop it, remove, start it again).
    daemons["s1"].stop()
    removed = s1.gaml_json("subnet", "remove", SUBNET, s4.node_id)
    assert (removed["removed"], removed["epoch"]) == (s4.node_id, 2)
    daemons["s1"] = fleet.start(s1, principal="bob", dial=[daemons["r"].address])
    fleet.up(daemons["s1"])

    def rotated(status: dict[str, Any] | None) -> bool:
        b = boundary_status(status, SUBNET)
        return b.get("epoch") == 2 and b.get("version") == old["version"] + 1

    for n in ("s1", "r", "s2", "s3"):
        fleet.wait(f"{n} to adopt the roster without s4", peers[n].status, rotated)
    r_status = fleet.wait(
        "the relay to close the boundary to s4", relay.status, lambda s: peer_stats(s, s4).get("open_boundaries") == 0
    )
    sent_to_s4 = peer_stats(r_status, s4)["objects_sent"]
    assert s4.node_id not in {m["node"] for m in boundary_status(r_status, SUBNET)["members"]}

    # A new asset on s1 reaches s2 and s3, not s4.
    with daemons["s1"].client() as c1, daemons["s2"].client() as c2, daemons["s3"].client() as c3:
        (after,) = c1.put([subnet_asset(f"after the removal: {after_word}")])
        for name, c in (("s2", c2), ("s3", c3)):
            fleet.wait(f"{name} to receive the asset written after the removal", partial(get_or_none, c, after))

        # An erasure: a transcript ingested on s2 (items, and rungs and facts curated from them) reaches s1 and s3;
        # `gaml forget` of the item on s2 erases it and everything holding the word on every member.
        path = fleet.base / "session.jsonl"
        path.write_text(transcript(erased_word))
        report = peers["s2"].gaml_json(
            "ingest", str(path), "--format", "transcript", "--owner", "bob", "--tenant", "acme",
            "--scope", "enterprise_private", "--replicate", "private_subnet",
        )  # fmt: skip
        assert report["items"] >= 1 and report["curation"], report
        on_s2 = holding(c2, erased_word)
        assert len(on_s2) >= 2, on_s2  # the item and what curation derived from it
        fleet.wait(
            "s1 and s3 to hold what s2 holds with the word",
            lambda: [holding(c, erased_word) for c in (c1, c2, c3)],
            lambda views: set(views[1]) == set(on_s2) and views[0] == views[1] == views[2],
        )
        item = next(
            i for i, a in sorted(on_s2.items()) if a is not None and a["asset_type"] != "fact" and a["level"] == "l0"
        )
        receipt = peers["s2"].gaml_json("forget", item, "--as", "bob")
        assert receipt["id"] == item and receipt["rebuilt_sources"] >= 1, receipt
        for name, c in (("s2", c2), ("s1", c1), ("s3", c3)):
            fleet.wait(f"{name} to erase every asset with the word", partial(holding, c, erased_word), lambda h: not h)
            fleet.wait(f"{name} to delete the item", partial(get_or_none, c, item), lambda a: a is None)
        # What the erasure rebuilt (on s2, and on s1 and s3 as they applied the tombstones) settles alike everywhere.
        fleet.wait(
            "s1, s2 and s3 to agree on what is left of the session",
            lambda: [holding(c, "billing") for c in (c1, c2, c3)],
            lambda views: bool(views[0]) and views[0] == views[1] == views[2],
        )
        settled_ns = time.time_ns()

    # s4 heard nothing after the removal: the relay sent it no object and no newer roster.
    r_status = fresh_status(fleet, relay, settled_ns)
    assert peer_stats(r_status, s4)["objects_sent"] == sent_to_s4
    assert peer_stats(r_status, s4)["open_boundaries"] == 0
    s4_status = fresh_status(fleet, s4, settled_ns)
    assert boundary_status(s4_status, SUBNET)["version"] == old["version"]
    assert boundary_status(s4_status, SUBNET)["epoch"] == 1
    assert s4_status["counters"].get("rejected_forged", 0) == 0, s4_status["counters"]
    assert peer_stats(s4_status, relay)["objects_rejected"] == 0

    for n in ("r", *MEMBERS):
        daemons[n].stop()
    records = {}
    for n in ("s1", "s2", "s3"):
        with peers[n].opened() as node:
            records[n] = live = live_records(node.store)
            assert after in live and before in live, n
            assert not [i for i, r in live.items() if erased_word in json.dumps(r)], n
            with pytest.raises(Deleted):
                node.store.get(item)
    assert records["s1"] == records["s2"] == records["s3"]
    with s4.opened() as node:
        live = live_records(node.store)
        assert before in live and after not in live
        assert not [i for i, r in live.items() if erased_word in json.dumps(r)]
        rep = Replica(node)
        bid = rep.boundary_for("subnet", "acme")
        assert bid is not None
        kept = rep.objects(bid, rep.objects_of(bid))
        assert kept and {peek(o)[1] for o in kept} == {1}  # only objects sealed before the rotation
        assert sorted(rep.doc_heads([after, item])) == []
    assert files_containing(s4.home, {"after": after_word.encode(), "erased": erased_word.encode()}) == []


# -- 4. a member that poisons a claim ---------------------------------------------------------------------------------


def test_a_member_poisoning_a_claim_loses_to_the_founder_in_every_members_frame(
    fleet: Fleet, subnet_template: dict[str, Peer]
) -> None:
    """s1 created the subnet (its founder: full weight); s3, a fresh member like any other, writes the same sentence
    as s1 but with another number. Every member's frame and search show s1's claim only, and the receipt names the
    record that resolved it (node/core/consensus.py), the same on every member."""
    honest = "Chicago Fire, a popular television drama, released its fourth season comprising a total of 23 episodes."
    poison = honest.replace("23 episodes", "24 episodes")
    goal = "how many episodes are in chicago fire season 4"
    _, daemons = start_subnet(fleet, subnet_template)
    clients = {n: daemons[n].client() for n in MEMBERS}
    ids = {n: c.status()["node_id"] for n, c in clients.items()}
    try:
        (hid,) = clients["s1"].put([subnet_asset(honest)])
        (pid,) = clients["s3"].put([subnet_asset(poison)])
        fleet.wait(
            "s1, s2 and s3 to hold both claims",
            lambda: [get_or_none(clients[n], i) is not None for n in ("s1", "s2", "s3") for i in (hid, pid)],
            all,
        )
        seen = {}
        for n in ("s1", "s2", "s3"):
            out = clients[n].hydrate(goal, 300)
            assert "23 episodes" in out["frame"] and "24 episodes" not in out["frame"], (n, out["frame"])
            c = out["receipt"]["consensus"]
            assert pid in c["contradicted"], n
            (rec,) = [r for r in c["records"] if {x["id"] for x in r["candidates"]} == {hid, pid}]
            won = {x["id"]: x["won"] for x in rec["candidates"]}
            assert won == {hid: True, pid: False}, n
            says = {x["id"]: x["says"] for x in rec["candidates"]}
            assert says == {hid: "23", pid: "24"}, n
            (fact,) = [f for f in out["receipt"]["facts"] if f["unit"] == hid]
            assert fact["consensus"] == {"record": rec["record"], "candidates": 2}
            seen[n] = (rec["slot"], rec["winner"], sorted(won))
            hits = [h["id"] for h in clients[n].search("chicago fire fourth season episodes", k=5)]
            assert hid in hits and pid not in hits, (n, hits)
            # The same record through the Conflicts call, and the ledger through Reputation.
            (listed,) = [r for r in clients[n].conflicts() if r["slot"] == rec["slot"]]
            assert listed["winner"] == rec["winner"] and {x["id"] for x in listed["candidates"]} == {hid, pid}
            assert clients[n].conflicts(slot="n:no-such-slot") == []
            (ledger,) = clients[n].reputation()
            standing = {m["node"]: (m["founder"], m["admitted"]) for m in ledger["members"]}
            assert standing[ids["s1"]] == (True, True) and standing[ids["s3"]] == (False, False), (n, standing)
        assert seen["s1"] == seen["s2"] == seen["s3"]
        slot, bid = seen["s1"][0], bytes.fromhex(ledger["boundary"])
        # The boundary keeps one consensus_record asset of the slot, written by its members and replicated.
        record = record_asset_id(bid, slot)
        got = {n: fleet.wait(f"the slot's record on {n}", partial(get_or_none, clients[n], record)) for n in MEMBERS}
        body = got["s1"]["payload"]["consensus"]
        assert got["s1"]["asset_type"] == "consensus_record" and body["lost"] == [pid] and body["won"] == [hid]
        assert body["slot"] == slot and got["s1"]["derived_from"] == sorted([hid, pid])
        # s3 overrides the slot on itself: its frames now show its choice; s1, the founder, is not moved by it.
        out = clients["s3"].override(slot, pid, reason="I measured it")
        assert out["record"]["override"]["id"] == out["override"] and out["record"]["winner"] != seen["s1"][1]
        assert {x["id"]: x["won"] for x in out["record"]["candidates"]} == {hid: False, pid: True}
        mine = clients["s3"].hydrate(goal, 300)["frame"]
        assert "24 episodes" in mine and "23 episodes" not in mine
        fleet.wait("s3's override to reach s1", lambda: get_or_none(clients["s1"], out["override"]))
        theirs = clients["s1"].hydrate(goal, 300)["frame"]
        assert "23 episodes" in theirs and "24 episodes" not in theirs
        # s3 names s1's claim as superseded by one of its own: not a supersession of another member's claim (which
        # would drop it from every frame by itself, as an owner's own supersession does). s1's claim, already in a
        # slot, stays; s3's new claim is a fresh member's uncorroborated claim, held back from the frames.
        later = "Chicago Fire's fourth season was cut short and aired only 12 episodes."
        (sid,) = clients["s3"].put([subnet_asset(later, supersedes=[hid])])
        fleet.wait(
            "s3's superseding claim to reach s1 and s2",
            lambda: [get_or_none(clients[n], sid) for n in ("s1", "s2")],
            all,
        )
        for n in ("s1", "s2"):
            out = clients[n].hydrate(goal, 300)
            assert "23 episodes" in out["frame"] and "12 episodes" not in out["frame"], (n, out["frame"])
            c = out["receipt"]["consensus"]
            assert sid in c["contradicted"] + c["unadmitted"] and hid not in c["contradicted"], (n, c)
            assert out["receipt"]["resolved"] == {"contradicted": [], "temporal": 0}, n  # no edge resolved it out
    finally:
        for c in clients.values():
            c.close()
        for d in daemons.values():
            d.stop()
