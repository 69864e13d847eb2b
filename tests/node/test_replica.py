"""node.replica over the real core (in-memory fakes): objects from writes, merges, tombstones, boundaries, keys.

Objects move here by hand (``transfer``), so each rule is checked without the sync engine; the engine and the network
have their own tests, and tests/node/test_replication.py runs everything together over libp2p.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from gaml.crdt.errors import BadObject
from gaml.crdt.objects import open_object, seal_object
from gaml.node.core.memory.ingest import IngestOptions, Ingestor
from gaml.node.core.memory.ladder import Ladder
from gaml.node.core.replica import Replica, record_of
from gaml.node.core.store.store import Store
from gaml.node.core.text import parsers
from gaml.node.core.text.privacy import Rules
from gaml.policy import crypto
from gaml.policy.errors import Deleted, InvalidInput, NotFound
from gaml.policy.keychain import NODE_IDENTITY_REF
from gaml.policy.model import AssetType, ReplicationPolicy
from gaml.simulations.nodes import make_node
from tests.node.conftest import CountingKV

NOW = 1_700_000_000_000_000
WORD = "zanzibarquux"


def private(text: str, **kw: Any) -> dict[str, Any]:
    return {
        "asset_type": "fact",
        "payload": {"text": text},
        "owner_id": "alice",
        "privacy_scope": "user_private",
        "replication_policy": "trusted_devices",
        **kw,
    }


def transfer(src: Replica, dst: Replica, bid: bytes, now: int = NOW) -> tuple[int, int]:
    """What one sync round does: src's current objects dst lacks, accepted by dst from src."""
    src.pump(now)
    ids, _ = src.log_after(bid, 0, 1 << 20)
    return dst.accept(bid, src.objects(bid, [i for i in ids if not dst.has(i)]), src.node_id, now)


def settle(reps: list[Replica], bid: bytes, now: int = NOW) -> None:
    for _ in range(6):
        for a in reps:
            for b in reps:
                if a is not b:
                    transfer(a, b, bid, now)


def pair(seed: int = 1) -> tuple[Replica, Replica, bytes]:
    a, b = Replica(make_node(seed)), Replica(make_node(seed + 100))
    bid = a.create("devices", "alice-devices", "alice", NOW).id
    b.join(a.invite(bid, b.node_id, "member", NOW).encode(), NOW)
    return a, b, bid


def live(store: Store) -> dict[str, dict[str, Any]]:
    return {i: record_of(store.get(i)) for i in store.live_ids()}


def plaintexts(store: Store) -> Iterator[bytes]:
    for sid, blob in store.kv.load_range("assets"):
        yield store._open_record(sid, blob).canonical_bytes()
    for name, blob in store.kv.load_range("meta"):
        yield store.open_meta(name, blob) if name.startswith(b"u:") or name == b"canary" else blob


def test_a_private_asset_reaches_the_other_device_and_local_only_stays() -> None:
    a, b, bid = pair()
    (shared,) = a.node.put([private("alice likes green tea")], NOW)
    (kept,) = a.node.put([private("the door code is 4711", privacy_scope="local_only")], NOW)
    (nowhere,) = a.node.put([private("no replication asked", replication_policy="none")], NOW)
    assert transfer(a, b, bid) == (1, 0)
    assert set(b.node.store.live_ids()) == {shared}
    assert record_of(b.node.store.get(shared)) == record_of(a.node.store.get(shared))
    assert b.node.store.get(shared).source_node == b.node_id  # materialized through b's own write path, signed by b
    assert not any(b"4711" in p or b"no replication" in p for p in plaintexts(b.node.store))
    for i in (kept, nowhere):
        with pytest.raises(NotFound):
            b.node.store.get(i)


def test_assets_written_before_pairing_replicate_once_paired() -> None:
    a = Replica(make_node(1))
    (early,) = a.node.put([private("written before any device was paired")], NOW)
    assert a.pump(NOW) == 0  # no boundary yet: nothing to seal
    b = Replica(make_node(101))
    bid = a.create("devices", "alice-devices", "alice", NOW).id
    b.join(a.invite(bid, b.node_id, "member", NOW).encode(), NOW)
    transfer(a, b, bid)
    assert b.node.store.live_ids() == [early]


def test_concurrent_edits_merge_to_the_same_asset_in_either_order() -> None:
    a, b, bid = pair()
    (i,) = a.node.put([private("alice likes green tea", tags=["tea"])], NOW)
    transfer(a, b, bid)
    a.node.put([private("alice likes green tea", tags=["tea", "from-a"], confidence_score=0.7)], NOW + 1)
    b.node.put([private("alice likes green tea", tags=["tea", "from-b"], entities=["Alice"])], NOW + 2)
    settle([a, b], bid, NOW + 3)
    got_a, got_b = a.node.store.get(i), b.node.store.get(i)
    assert got_a.tags == got_b.tags == ("from-a", "from-b", "tea")
    assert got_a.confidence_score == got_b.confidence_score == 0.7
    assert got_a.entities == got_b.entities == ("Alice",)
    assert live(a.node.store) == live(b.node.store)
    assert a.state() == b.state()  # one current snapshot of the merged state on both
    # The same two edits merged the other way round give the same record.
    c, d, bid2 = pair(seed=7)
    (j,) = c.node.put([private("alice likes green tea", tags=["tea"])], NOW)
    transfer(c, d, bid2)
    c.node.put([private("alice likes green tea", tags=["tea", "from-a"], confidence_score=0.7)], NOW + 1)
    d.node.put([private("alice likes green tea", tags=["tea", "from-b"], entities=["Alice"])], NOW + 2)
    transfer(d, c, bid2, NOW + 3)
    transfer(c, d, bid2, NOW + 3)
    assert record_of(c.node.store.get(j)) == record_of(d.node.store.get(j))
    assert record_of(c.node.store.get(j))["tags"] == record_of(got_a)["tags"]


def test_accepting_opens_the_stored_record_once() -> None:
    """On accept, the record stored here is read (and decrypted) once per batch: the replica checks the merge against
    it, and the node's put and the store write against the same opened record instead of reading it again."""
    kv = CountingKV()
    a, b = Replica(make_node(1)), Replica(make_node(101, kv=kv))
    bid = a.create("devices", "alice-devices", "alice", NOW).id
    b.join(a.invite(bid, b.node_id, "member", NOW).encode(), NOW)
    (i,) = a.node.put([private("alice likes green tea", tags=["tea"])], NOW)
    sid = b.node.store.sid(i)
    assert transfer(a, b, bid) == (1, 0)
    assert kv.loaded("assets", sid) == 1  # new here: one look, which finds nothing
    a.node.put([private("alice likes green tea", tags=["tea", "from-a"])], NOW + 1)
    assert transfer(a, b, bid, NOW + 1) == (1, 0)
    assert b.node.store.get(i).tags == ("from-a", "tea")  # (this get is one more load)
    assert kv.loaded("assets", sid) == 1 + 1 + 1  # the edit: its stored record opened once, then the get above


def test_ids_handed_with_the_objects_are_not_computed_again() -> None:
    """The ids a caller hands with the objects (the sync engine hashed each to match it to a request) are the ones
    the replica keeps them under: an object's bytes are hashed once on the way in."""
    a, b, bid = pair()
    a.node.put([private("alice likes green tea")], NOW)
    a.pump(NOW)
    ids, _ = a.log_after(bid, 0, 10)
    (obj,) = a.objects(bid, ids)
    named = b"\x07" * 32  # not the object's hash: taken as given, so nobody hashed it again
    assert b.accept(bid, [obj], a.node_id, NOW, oids=[named]) == (1, 0)
    assert b.has(named) and not b.has(ids[0])
    with pytest.raises(InvalidInput, match="ids for"):
        b.accept(bid, [obj], a.node_id, NOW, oids=[])


def test_merged_records_are_stored_as_merged_whatever_the_times() -> None:
    for seed in range(1, 9):  # the winner of a time conflict depends on the actors: try both orders
        a, b, bid = pair(seed)
        (i,) = a.node.put([private("alice likes green tea", tags=["tea"])], NOW)
        assert b.node.put([private("alice likes green tea", tags=["tea"])], NOW + 5) == [i]  # written twice
        settle([a, b], bid, NOW + 6)
        assert live(a.node.store) == live(b.node.store), seed  # created_at agrees
        a.node.put([private("alice likes green tea", tags=["tea", "from-a"])], NOW + 7)
        b.node.put([private("alice likes green tea", tags=["tea", "from-b"])], NOW + 8)
        settle([a, b], bid, NOW + 9)
        assert live(a.node.store) == live(b.node.store), seed  # updated_at agrees
        assert a.node.store.get(i).tags == ("from-a", "from-b", "tea")


def test_an_outsider_is_not_authorized_and_its_objects_are_refused() -> None:
    a, b, bid = pair()
    outsider = Replica(make_node(55))
    a.node.put([private("alice likes green tea")], NOW)
    a.pump(NOW)
    assert not a.authorized(bid, outsider.node_id) and a.authorized(bid, b.node_id)
    assert outsider.boundary_ids() == []
    ids, _ = a.log_after(bid, 0, 100)
    assert b.accept(bid, a.objects(bid, ids), outsider.node_id, NOW) == (0, 1)
    assert b.counters["rejected_unauthorized"] == 1 and b.node.store.live_ids() == []


def test_tampered_forged_and_misplaced_objects_are_refused_and_counted() -> None:
    a, b, bid = pair()
    a.node.put([private("alice likes green tea")], NOW)
    a.pump(NOW)
    (oid,), _ = a.log_after(bid, 0, 10)
    (obj,) = a.objects(bid, [oid])
    flipped = bytearray(obj)
    flipped[len(obj) // 2] ^= 1
    assert b.accept(bid, [bytes(flipped), obj[:40], b"junk"], a.node_id, NOW) == (0, 3)
    assert b.counters["rejected_forged"] == 1 and b.counters["rejected_malformed"] == 2  # truncated: malformed
    # Sealed with the group key but signed by a node that is not a member (a stolen key, or a removed member).
    keys = a.bound(bid).keys
    thief = crypto.SigningKey(b"\x07" * 32)
    boundary = a.bound(bid).boundary
    snapshot = open_object(obj, keys).data
    _, forged = seal_object(
        boundary, 1, keys[1], thief, b"S", open_object(obj, keys).asset_id, snapshot, crypto.SeededEntropy(9)
    )
    assert b.accept(bid, [forged], a.node_id, NOW) == (0, 1) and b.counters["rejected_writer"] == 1
    # A member slipping bob's asset into alice's devices: it does not belong to this boundary.
    c = make_node(300)  # another node, where bob's asset is written, then sealed by member a
    (bobs,) = c.put([{**private("bob's secret"), "owner_id": "bob"}], NOW)
    from gaml.crdt.doc import AssetDoc

    doc = AssetDoc.new(b"\x01" * 16)
    doc.update(record_of(c.store.get(bobs)))
    _, misplaced = seal_object(boundary, 1, keys[1], a.identity, b"S", bobs, doc.save(), crypto.SeededEntropy(10))
    assert b.accept(bid, [misplaced], a.node_id, NOW) == (0, 1) and b.counters["rejected_boundary"] == 1
    assert b.node.store.live_ids() == []
    assert b.accept(bid, [obj], a.node_id, NOW) == (1, 0)  # the genuine object still goes in


def test_removing_a_member_rotates_the_key_and_it_gets_nothing_new() -> None:
    a, b, bid = pair()
    c = Replica(make_node(202))
    c.join(a.invite(bid, c.node_id, "member", NOW).encode(), NOW)
    a.node.put([private("before the removal")], NOW)
    settle([a, b, c], bid)
    # b learns of c through a's newer roster, as a peer would offer it.
    b.offer_roster(bid, a.roster(bid), a.node_id, NOW)
    assert b.authorized(bid, c.node_id)
    roster = a.remove(bid, c.node_id, NOW + 1)
    assert roster.epoch == 2 and roster.role(c.node_id) is None
    b.offer_roster(bid, a.roster(bid), a.node_id, NOW + 1)
    assert not a.authorized(bid, c.node_id) and not b.authorized(bid, c.node_id)
    (after,) = a.node.put([private("after the removal")], NOW + 2)
    a.pump(NOW + 2)
    ids, _ = a.log_after(bid, 0, 100)
    new = [o for o in a.objects(bid, ids) if open_object(o, a.bound(bid).keys).asset_id == after]
    assert len(new) == 1 and int.from_bytes(new[0][18:22], "big") == 2  # sealed under epoch 2
    with pytest.raises(BadObject):
        open_object(new[0], c.bound(bid).keys)  # c holds epoch 1 only
    assert c.accept(bid, new, a.node_id, NOW + 2) == (0, 1)  # even handed over, it does not open
    assert after not in c.node.store.live_ids()
    transfer(a, b, bid, NOW + 3)
    assert after in b.node.store.live_ids()
    # What c writes now is refused by the members that know of its removal.
    c.node.put([private("c writes after being removed")], NOW + 4)
    c.pump(NOW + 4)
    cids, _ = c.log_after(bid, 0, 100)
    assert b.accept(bid, c.objects(bid, cids), c.node_id, NOW + 4) == (0, len(cids))


def test_a_relay_carries_ciphertext_it_cannot_read() -> None:
    a, b, bid = pair()
    relay = Replica(make_node(400))
    relay.join(a.invite(bid, relay.node_id, "relay", NOW).encode(), NOW)
    b.offer_roster(bid, a.roster(bid), a.node_id, NOW)
    (i,) = a.node.put([private(f"alice's {WORD} plan")], NOW)
    assert transfer(a, relay, bid) == (1, 0)
    assert relay.node.store.live_ids() == [] and relay.bound(bid).keys == {}
    assert not any(WORD.encode() in p for p in plaintexts(relay.node.store))
    assert transfer(relay, b, bid) == (1, 0)  # b gets it from the relay alone
    assert b.node.store.live_ids() == [i]
    assert relay.counters["carried"] == 1


def restarted(rep: Replica) -> Replica:
    """The replica of the same store, reopened from what it wrote (its in-memory state rebuilt from disk)."""
    from gaml.node.core.node import Node

    store = rep.node.store
    again = Store.open(
        store.kv.reopened(),  # type: ignore[attr-defined]
        store.blobs,
        store.keychain,
        crypto.SigningKey(store.keychain.get(NODE_IDENTITY_REF)),
        store.index_factory,
        store.entropy,
    )
    return Replica(Node(again, rep.node.embedder))


def test_state_survives_a_restart() -> None:
    a, b, bid = pair()
    a.node.put([private("alice likes green tea")], NOW)
    transfer(a, b, bid)
    b.set_cursor(bid, a.node_id, 7)
    before = (b.state(), b.describe(), b.boundary_ids())
    b2 = restarted(b)
    assert (b2.state(), b2.describe(), b2.boundary_ids()) == before
    assert b2.cursor(bid, a.node_id) == 7 and b2.pump(NOW) == 0


def ingest_session(node_reps: Replica) -> Ladder:
    node = node_reps.node
    ing = Ingestor(node, Rules.load_default())
    lad = Ladder(node, ing)
    turns = [
        ("user", "Please set up the database for the billing service."),
        ("assistant", f"We decided to use Postgres 16 with {WORD} replication on port 8080."),
        ("assistant", "All tests pass now and the billing database is ready."),
    ]
    lines = [
        {"sessionId": "s1", "role": r, "content": t, "timestamp": (NOW + k * 60_000_000) // 10**6}
        for k, (r, t) in enumerate(turns)
    ]
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    sources = parsers.parse(data, "s1.jsonl", "transcript")
    opts = IngestOptions(owner="alice", replication=ReplicationPolicy.TRUSTED_DEVICES)
    ing.ingest(sources, opts, NOW)
    lad.curate(NOW)
    return lad


def test_a_tombstone_erases_the_item_and_its_derivatives_on_every_member() -> None:
    a, b, bid = pair()
    lad_a = ingest_session(a)
    ing_b = Ingestor(b.node, Rules.load_default())
    lad_b = Ladder(b.node, ing_b)
    b._erase = lambda id_, now: lad_b.forget(id_, now, reason="replicated tombstone")
    settle([a, b], bid)
    assert live(a.node.store) == live(b.node.store)
    holding = [i for i, r in live(b.node.store).items() if WORD in json.dumps(r)]
    assert len(holding) >= 2  # the item and what curation derived from it (rungs, facts)
    target = next(
        i
        for i in holding
        if b.node.store.get(i).asset_type is not AssetType.FACT and b.node.store.get(i).level.value == "l0"
    )
    lad_a.forget(target, NOW + 10, by="alice")
    settle([a, b], bid, NOW + 11)
    for rep in (a, b):
        assert not [i for i, r in live(rep.node.store).items() if WORD in json.dumps(r)], rep.node_id[:8]
        with pytest.raises(Deleted):
            rep.node.store.get(target)
    assert live(a.node.store) == live(b.node.store)
    # A late snapshot of the erased item (from a member that lagged) does not bring it back.
    assert b.counters["erased"] >= 1


def test_a_late_snapshot_does_not_resurrect_an_erased_asset() -> None:
    a, b, bid = pair()
    (i,) = a.node.put([private("short-lived")], NOW)
    a.pump(NOW)
    ids, _ = a.log_after(bid, 0, 10)
    old = a.objects(bid, ids)
    a.node.delete(i, NOW + 1)
    transfer(a, b, bid, NOW + 1)  # b learns the tombstone first
    assert b.accept(bid, old, a.node_id, NOW + 2) == (1, 0)  # taken (known now), not materialized
    assert b.node.store.live_ids() == []


# -- a member of one boundary has no say over another's assets, or this node's own ------------------------------------


def tenant_pair() -> tuple[Replica, Replica, bytes]:
    v, w = Replica(make_node(11)), Replica(make_node(12))
    t = v.create("tenant", "acme-tenant", "acme", NOW).id
    w.join(v.invite(t, w.node_id, "member", NOW).encode(), NOW)
    return v, w, t


def sealed_by(rep: Replica, bid: bytes, kind: bytes, asset_id: str, data: bytes, seed: int) -> bytes:
    b = rep.bound(bid)
    return seal_object(
        b.boundary,
        b.roster.epoch,
        b.keys[b.roster.epoch],
        rep.identity,
        kind,
        asset_id,
        data,
        crypto.SeededEntropy(seed),
    )[1]


def test_a_member_cannot_erase_or_overwrite_what_belongs_elsewhere() -> None:
    """A tenant member's tombstone of a local-only asset, and its snapshot rewriting a private asset (same id, owner,
    tenant, type; wider policy, other text), are refused: neither asset belongs to the tenant boundary here."""
    from gaml.crdt.doc import AssetDoc

    v, w, t = tenant_pair()
    (diary,) = v.node.put([{**private("my diary"), "privacy_scope": "local_only"}], NOW)
    (pin,) = v.node.put([{**private("pin 1234"), "tenant_scope": "acme"}], NOW)
    v.pump(NOW)
    forged = {**record_of(v.node.store.get(pin)), "privacy_scope": "tenant_private"}
    forged.update(replication_policy="tenant_nodes", payload={"text": "attacker"})
    doc = AssetDoc.new(b"\x02" * 16)
    doc.update(forged)
    objs = [sealed_by(w, t, b"T", diary, b"", 1), sealed_by(w, t, b"S", pin, doc.save(), 2)]
    assert v.accept(t, objs, w.node_id, NOW + 1) == (0, 2)
    assert v.counters["rejected_boundary"] == 1 and v.counters["rejected_merge"] == 1
    assert v.node.store.get(diary).payload["text"] == "my diary"
    got = v.node.store.get(pin)
    assert got.payload["text"] == "pin 1234" and got.privacy_scope.value == "user_private"


def test_a_narrowed_asset_is_not_sealed_back_into_its_old_boundary() -> None:
    """V narrows an asset from its tenant to its own devices and writes a secret into it while W edits it in the
    tenant: V refuses W's snapshot (the merge would not belong to the tenant) and never seals the secret there."""
    from gaml.crdt.doc import AssetDoc
    from gaml.policy.model import PrivacyScope, ReplicationPolicy

    v, w, t = tenant_pair()
    v.create("devices", "alice-devices", "alice", NOW)
    shared = {**private("public v1"), "tenant_scope": "acme", "privacy_scope": "tenant_private"}
    (x,) = v.node.put([{**shared, "replication_policy": "tenant_nodes"}], NOW)
    transfer(v, w, t)
    narrowed = v.node.store.get(x).replace(
        privacy_scope=PrivacyScope.USER_PRIVATE, replication_policy=ReplicationPolicy.TRUSTED_DEVICES, tags=("SECRET",)
    )
    v.node.put([narrowed], NOW + 2)
    v.pump(NOW + 2)
    w.node.put([w.node.store.get(x).replace(tags=("w-edit",), updated_at=NOW + 3)], NOW + 3)
    assert transfer(w, v, t, NOW + 4) == (0, 1) and v.counters["rejected_merge"] == 1
    ids, _ = v.log_after(t, 0, 100)
    for obj in v.objects(t, ids):
        opened = open_object(obj, w.bound(t).keys)
        assert b"SECRET" not in opened.data
        assert "SECRET" not in AssetDoc.load(opened.data, b"\x03" * 16).record()["tags"]


def test_an_erasure_a_crash_interrupted_is_finished_by_the_next_pump() -> None:
    from gaml.policy.errors import StoreError

    a, b, bid = pair()
    (i,) = a.node.put([private("short-lived")], NOW)
    transfer(a, b, bid)
    a.node.delete(i, NOW + 1)
    calls = []

    def erase(id_: str, now: int) -> None:
        calls.append(id_)
        if len(calls) == 1:
            raise StoreError("the disk went away mid-erasure")
        b.node.delete(id_, now)

    b._erase = erase
    with pytest.raises(StoreError):
        transfer(a, b, bid, NOW + 2)
    assert b.node.store.live_ids() == [i]  # the tombstone is recorded, the erasure not done yet
    again = Replica(b.node, erase=erase)  # as after a restart: the state comes from the store
    again.pump(NOW + 3)
    assert calls == [i, i] and again.node.store.live_ids() == []


def test_a_failed_removal_leaves_the_admin_able_to_remove_again() -> None:
    a, b, bid = pair()
    c = Replica(make_node(203))
    c.join(a.invite(bid, c.node_id, "member", NOW).encode(), NOW)
    save = a._save_bound

    def crash(_: object) -> None:
        raise OSError("crash between the keychain and the roster")

    a._save_bound = crash  # type: ignore[method-assign]
    with pytest.raises(OSError):
        a.remove(bid, c.node_id, NOW + 1)
    a._save_bound = save  # type: ignore[method-assign]
    fresh = Replica(a.node)  # a new process: what is on disk
    roster = fresh.remove(bid, c.node_id, NOW + 2)
    assert roster.epoch == 2 and fresh.bound(bid).keys[2] == roster.keys_for(fresh.identity)[2]
    b.offer_roster(bid, fresh.roster(bid), fresh.node_id, NOW + 2)
    fresh.node.put([private("after the removal")], NOW + 3)
    assert transfer(fresh, b, bid, NOW + 3) == (1, 0)


def test_relaying_for_a_second_boundary_of_the_same_label_keeps_the_first() -> None:
    v, w, s1 = Replica(make_node(21)), Replica(make_node(22)), b""
    s1 = v.create("subnet", "acme-1", "acme", NOW).id
    s2 = w.create("subnet", "acme-2", "acme", NOW).id
    v.join(w.invite(s2, v.node_id, "relay", NOW).encode(), NOW)
    assert v.boundary_for("subnet", "acme") == s1
    v.node.put(
        [
            {
                **private("subnet note"),
                "tenant_scope": "acme",
                "privacy_scope": "enterprise_private",
                "replication_policy": "private_subnet",
            }
        ],
        NOW,
    )
    assert v.pump(NOW) == 1 and Replica(v.node).boundary_for("subnet", "acme") == s1


def test_an_assets_sources_are_the_members_whose_verified_snapshots_changed_it() -> None:
    """Consensus weighs a claim by its sources (Replica.writers): the writer of each snapshot that changed the asset
    here, checked on arrival; this node for what it wrote. They survive a restart and go with an erasure."""
    a, b, bid = pair()
    (i,) = a.node.put([private("alice likes green tea", tags=["tea"])], NOW)
    assert a.writers(bid, i) == () and a.pump(NOW) == 1
    assert a.writers(bid, i) == (a.node_id,)
    transfer(a, b, bid)
    assert b.writers(bid, i) == (a.node_id,)
    transfer(a, b, bid)  # the same snapshot again changes nothing
    assert b.writers(bid, i) == (a.node_id,)
    b.node.put([private("alice likes green tea", tags=["tea", "from-b"])], NOW + 1)
    transfer(b, a, bid, NOW + 2)
    assert a.writers(bid, i) == b.writers(bid, i) == tuple(sorted((a.node_id, b.node_id)))
    assert a.boundary_of(a.node.store.get(i)) == bid and a.asset_ids(bid) == [i]
    roster = a.roster_of(bid)
    assert roster is not None and {m.node for m in roster.members} == {a.node_id, b.node_id}
    a2 = restarted(a)
    assert a2.writers(bid, i) == a.writers(bid, i)
    a2.node.delete(i, NOW + 3)
    a2.pump(NOW + 3)
    assert a2.writers(bid, i) == () and a2.asset_ids(bid) == []
    local = a2.node.put([private("only here", privacy_scope="local_only")], NOW + 4)
    assert a2.boundary_of(a2.node.store.get(local[0])) is None  # private memory on one node is no one's claim


def test_a_peer_read_answers_with_the_boundarys_best_matches_and_nothing_else() -> None:
    """``answer`` ranks only the boundary's current snapshots: never a local-only asset, one of another boundary, or
    an erased one; what it returns opens and verifies on another member like any synced object. A relay, which
    cannot rank ciphertext, answers nothing."""
    a, b, bid = pair()
    tenant = a.create("tenant", "acme-tenant", "acme", NOW).id
    (tea,) = a.node.put([private(f"alice drinks {WORD} tea every morning")], NOW)
    (coffee,) = a.node.put([private("alice avoids coffee after noon")], NOW)
    (gone,) = a.node.put([private(f"alice once liked {WORD} cocoa")], NOW)
    a.node.put([private(f"the {WORD} door code is 4711", privacy_scope="local_only")], NOW)
    a.node.put(
        [
            private(
                f"acme's {WORD} roadmap",
                tenant_scope="acme",
                privacy_scope="tenant_private",
                replication_policy="tenant_nodes",
            )
        ],
        NOW,
    )
    a.pump(NOW)
    a.node.delete(gone, NOW + 1)
    a.pump(NOW + 1)

    best = a.answer(bid, f"{WORD} tea", 1, NOW + 2)
    assert b.accept(bid, best, a.node_id, NOW + 2) == (1, 0)
    assert b.node.store.live_ids() == [tea]
    everything = a.answer(bid, f"{WORD} tea coffee cocoa roadmap door", 8, NOW + 2)
    assert b.accept(bid, everything, a.node_id, NOW + 2)[1] == 0
    assert set(b.node.store.live_ids()) <= {tea, coffee}
    assert not any(b"4711" in p or b"roadmap" in p or b"cocoa" in p for p in plaintexts(b.node.store))
    assert a.answer(bid, "   ", 8, NOW + 2) == [] and a.answer(b"?" * 16, WORD, 8, NOW + 2) == []
    assert len(a.answer(tenant, WORD, 8, NOW + 2)) == 1  # the tenant's own boundary answers with its asset
    (fresh,) = a.node.put([private(f"alice wrote {WORD} just now")], NOW + 3)  # not sealed yet: answer seals it
    assert b.accept(bid, a.answer(bid, f"{WORD} just now", 1, NOW + 4), a.node_id, NOW + 4) == (1, 0)
    assert fresh in b.node.store.live_ids()

    relay = Replica(make_node(400))
    relay.join(a.invite(bid, relay.node_id, "relay", NOW).encode(), NOW)
    transfer(a, relay, bid)
    assert relay.answer(bid, WORD, 8, NOW + 2) == []
