"""The asset store, on the pure core with fakes and on RocksDB + hnswlib (the ``world`` fixture runs both)."""

from __future__ import annotations

import copy
import gc
import io
import os
import pickle
import random
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from gaml.node.core.node import Node
from gaml.node.core.store import lexical
from gaml.node.core.store import store as store_mod
from gaml.node.core.store import views as views_mod
from gaml.node.core.store.kv import Delete, MemoryKV, Put
from gaml.node.core.store.store import TOMBSTONES_KEY, Records, Store
from gaml.node.core.store.views import PartitionViews, View
from gaml.policy import crypto
from gaml.policy.access import Principal as GovPrincipal
from gaml.policy.errors import (
    BadSignature,
    Deleted,
    IndexMismatch,
    InvalidAsset,
    NotFound,
    PayloadTooLarge,
    StoreCorrupt,
    WrongKey,
)
from gaml.policy.model import Asset, Heat, Tier
from gaml.policy.partitions import PartitionRef
from tests.node.conftest import NOW, World, fact, live_postings, memory_world, new_keychain

ROOT = Path(__file__).resolve().parents[2]
LATER = NOW + 1_000_000


def signed(node: Node, draft: dict[str, Any]) -> Asset:
    """A draft made into a signed asset, as the node would write it, without writing it."""
    return node.store.sign(node.prepare(node.build(draft, NOW)))


def snapshot(world: World) -> dict[str, list[tuple[bytes, bytes]]]:
    assert world.kv is not None
    return {s: list(world.kv.load_range(s)) for s in ("assets", "index", "edges", "journal", "vectors", "meta")}


def test_put_get_round_trip(world: World) -> None:
    """A stored asset comes back equal, signed by the node, with its payload decrypted."""
    node = world.open_node()
    (id_,) = node.put([fact("Alice prefers green tea", entities=["Alice"], tags=["pref"], goal="onboard")], NOW)
    got = node.store.get(id_)
    assert got.payload == {"text": "Alice prefers green tea"}
    assert got.entities == ("Alice",) and got.goal == "onboard" and got.created_at == NOW
    assert got.source_node == node.node_id and got.signature
    node.store.verify(got)
    assert got.encryption_key_ref.startswith("partition/")


def test_repeated_put_is_an_upsert(world: World) -> None:
    """Putting the same content twice yields the same id, one version and one journal entry."""
    node = world.open_node()
    a = node.put([fact("the sky is blue")], NOW)
    seq = node.store.seq
    b = node.put([fact("the sky is blue")], NOW + 5)
    assert a == b
    assert node.store.seq == seq
    assert node.store.get(a[0]).version == 1


def test_edit_keeps_id_and_advances_version(world: World) -> None:
    """Changing an asset's metadata keeps its content id, advances its version and reindexes it."""
    node = world.open_node()
    (id_,) = node.put([fact("the sky is blue", entities=["sky"])], NOW)
    node.put([fact("the sky is blue", entities=["sky", "colour"])], NOW + 10)
    got = node.store.get(id_)
    assert got.version == 2 and got.created_at == NOW and got.updated_at == NOW + 10
    assert node.store.list_ids("entity", "colour") == [id_]


def test_an_edit_of_a_stored_signed_asset_is_written(world: World) -> None:
    """Putting a stored asset changed with ``replace`` (it still carries the old signature) writes the edit, signed
    anew: the stale signature neither hides the change nor survives it."""
    node = world.open_node()
    (id_,) = node.put([fact("the sky is blue")], NOW)
    stored = node.store.get(id_)
    assert node.put([stored.replace(policy_tags=("no-training",))], NOW + 1) == [id_]
    got = node.store.get(id_)
    assert got.version == 2 and got.policy_tags == ("no-training",) and got.signature != stored.signature
    node.store.verify(got)


def test_stale_version_is_refused(world: World) -> None:
    """A different asset under a stored id must advance the version; otherwise nothing is written."""
    node = world.open_node()
    (id_,) = node.put([fact("x")], NOW)
    stored = node.store.get(id_)
    other = node.store.sign(stored.replace(tags=("t",)))
    before = snapshot(world)
    with pytest.raises(InvalidAsset, match="advance the version"):
        node.store.put_many([other], [None], node.embedder.id, node.embedder.dim)
    assert snapshot(world) == before


def test_list_by_every_index_field(world: World) -> None:
    """Assets are listed by type, scope, owner, tenant, entity, goal, segment, tag and time range."""
    node = world.open_node()
    a, b, c = node.put(
        [
            fact("a", entities=["E1"], goal="g1", segment="s1", tags=["t1"]),
            {
                "asset_type": "plan",
                "payload": {"text": "b"},
                "owner_id": "bob",
                "privacy_scope": "tenant_private",
                "tenant_scope": "acme",
                "created_at": NOW + 100,
            },
            {"asset_type": "fact", "payload": {"text": "c"}, "privacy_scope": "public", "created_at": NOW + 200},
        ],
        NOW,
    )
    s = node.store
    assert sorted(s.list_ids("type", "fact")) == sorted([a, c])
    assert s.list_ids("type", "plan") == [b]
    assert s.list_ids("scope", "public") == [c]
    assert s.list_ids("owner", "bob") == [b]
    assert s.list_ids("tenant", "acme") == [b]
    assert s.list_ids("entity", "E1") == [a]
    assert s.list_ids("goal", "g1") == [a]
    assert s.list_ids("segment", "s1") == [a]
    assert s.list_ids("tag", "t1") == [a]
    assert s.list_ids("entity", "nobody") == []
    assert s.list_time(NOW, NOW + 150) == [a, b]
    assert s.list_time(NOW + 150, NOW + 1000) == [c]
    with pytest.raises(InvalidAsset):
        s.list_ids("colour", "red")


def test_edges_in_both_directions(world: World) -> None:
    """Graph edges are stored forward and reverse, and follow edits."""
    node = world.open_node()
    (a,) = node.put([fact("claim A")], NOW)
    (b,) = node.put([fact("claim B", supports=[a], references=[a])], NOW)
    (c,) = node.put([fact("claim C", contradicts=[a])], NOW)
    s = node.store
    assert sorted(s.edges(b)) == [("references", a), ("supports", a)]
    assert sorted(s.edges(a, reverse=True)) == sorted([("references", b), ("supports", b), ("contradicts", c)])
    node.put([fact("claim B", supports=[a])], NOW + 1)  # edit: drop the reference
    assert s.edges(b) == [("supports", a)]


def test_delete_leaves_a_signed_tombstone(world: World) -> None:
    """Deleting removes payload, vector, index entries and edges; a signed tombstone stays and the id is not reused."""
    node = world.open_node()
    (a,) = node.put([fact("secret plan", entities=["X"])], NOW)
    (b,) = node.put([fact("depends", derived_from=[a])], NOW)
    tomb = node.delete(a, NOW + 1)
    assert tomb.tombstone and tomb.payload == {} and tomb.version == 2
    node.store.verify(tomb)
    with pytest.raises(Deleted):
        node.store.get(a)
    assert node.store.get(a, include_deleted=True).tombstone
    assert node.store.list_ids("entity", "X") == []
    assert all(h.asset.id != a for h in node.search("secret plan", "alice", LATER))
    assert world.kv is not None and not [k for k, _ in world.kv.load_range("vectors") if k.endswith(node.store.sid(a))]
    assert node.store.edges(b) == [("derived_from", a)]  # the survivor still names its source
    with pytest.raises(Deleted):
        node.put([fact("secret plan", entities=["X"])], NOW + 2)
    with pytest.raises(NotFound):
        node.delete("0" * 32, NOW)


def test_bad_signature_is_rejected_and_nothing_written(world: World) -> None:
    """An asset whose signature does not verify is refused at the store's entry; the store is unchanged."""
    node = world.open_node()
    node.put([fact("existing")], NOW)
    good = signed(node, fact("forged"))
    forged = good.replace(payload={"text": "tampered"})
    valid = signed(node, fact("valid neighbour"))
    before = snapshot(world)
    with pytest.raises(BadSignature):
        node.store.put_many([valid, forged], [None, None], node.embedder.id, node.embedder.dim)
    unsigned = good.replace(signature=b"")
    with pytest.raises(BadSignature):
        node.store.put_many([unsigned], [None], node.embedder.id, node.embedder.dim)
    other = crypto.SigningKey(b"\x07" * 32)
    foreign = good.replace(signature=other.sign(good.signing_bytes()))
    with pytest.raises(BadSignature):
        node.store.put_many([foreign], [None], node.embedder.id, node.embedder.dim)
    assert snapshot(world) == before


def test_payload_over_limit_is_refused(world: World) -> None:
    """A payload over the configured limit raises PayloadTooLarge and writes nothing."""
    node = world.open_node()
    before = snapshot(world)
    with pytest.raises(PayloadTooLarge):
        node.put([fact("ok"), fact("x" * 5000)], NOW)
    assert snapshot(world) == before


def test_wrong_vector_dimension_is_refused(world: World) -> None:
    """A partition built with one embedder refuses vectors of another dimension, and nothing is written."""
    node = world.open_node()
    node.put([fact("first")], NOW)
    asset = signed(node, fact("second"))
    before = snapshot(world)
    with pytest.raises(IndexMismatch):
        node.store.put_many([asset], [np.ones(8, dtype=np.float32)], node.embedder.id, 8)
    with pytest.raises(IndexMismatch):
        node.store.put_many([asset], [np.ones(8, dtype=np.float32)], node.embedder.id, node.embedder.dim)
    assert snapshot(world) == before


def test_search_reads_only_allowed_partitions(world: World) -> None:
    """A principal's search reaches its own, its tenants' and public partitions, and nothing else."""
    node = world.open_node()
    node.put(
        [
            fact("alice likes green tea"),
            fact("bob likes green tea", owner="bob"),
            {
                "asset_type": "fact",
                "payload": {"text": "acme likes green tea"},
                "owner_id": "carol",
                "privacy_scope": "tenant_private",
                "tenant_scope": "acme",
            },
            {"asset_type": "fact", "payload": {"text": "everyone likes green tea"}, "privacy_scope": "public"},
        ],
        NOW,
    )

    node.governance.add_principal(GovPrincipal("dave", tenants=frozenset({"acme"})))
    node.governance.add_principal(GovPrincipal("mallory"))

    def owners(principal: str) -> set[str]:
        return {h.asset.payload["text"].split()[0] for h in node.search("green tea", principal, LATER, k=10)}

    assert owners("alice") == {"alice", "everyone"}
    assert owners("bob") == {"bob", "everyone"}
    assert owners("carol") == {"acme", "everyone"}  # her own tenant asset, through ownership
    assert owners("dave") == {"acme", "everyone"}
    assert owners("mallory") == {"everyone"}


def test_search_reads_its_own_writes_then_the_index(world: World) -> None:
    """A fresh write is found through the exact tail; after a checkpoint the partition index answers."""
    node = world.open_node()
    ids = node.put([fact(f"note number {i} about topic {i % 7}") for i in range(60)], NOW)
    (q,) = node.embedder.embed(["note number 17 about topic 3"])
    alice = node.store.pid_of(PartitionRef.parse("user_private|owner:alice"))
    hits = node.store.dense_search(alice, q, 3)
    assert hits[0].id == ids[17] and hits[0].path == "tail"
    assert node.search("note number 17 about topic 3", "alice", LATER, k=3)[0].asset.id == ids[17]
    node.checkpoint()
    assert node.store.pending() == 0
    hits = node.store.dense_search(alice, q, 3)
    assert hits[0].id == ids[17] and hits[0].path == "index"
    assert node.search("note number 17 about topic 3", "alice", LATER, k=3)[0].asset.id == ids[17]


def test_vectors_are_read_from_the_tail_then_the_index_and_never_for_what_is_gone(world: World) -> None:
    """``vectors_of`` gives each live asset's vector whether it is still pending or indexed, and leaves out what the
    partition does not hold: another partition's asset, a deleted one, an unknown id."""
    node = world.open_node()
    ids = node.put([fact(f"note number {i} about topic {i % 7}") for i in range(40)], NOW)
    (bobs,) = node.put([fact("bob's own note", owner="bob")], NOW)
    alice = node.store.pid_of(PartitionRef.parse("user_private|owner:alice"))
    want = node.embedder.embed([f"note number {i} about topic {i % 7}" for i in range(40)])
    got = node.store.vectors_of(alice, [ids[3], bobs, "f" * 32, ids[5]])
    assert list(got) == [ids[3], ids[5]]
    np.testing.assert_allclose(got[ids[3]], want[3], atol=1e-6)
    node.checkpoint()
    assert node.store.pending() == 0
    (later,) = node.put([fact("a later note, still pending")], NOW + 1)
    node.delete(ids[3], NOW + 2)
    got = node.store.vectors_of(alice, [ids[3], later, ids[7]])
    assert list(got) == [later, ids[7]]
    np.testing.assert_allclose(got[later], node.embedder.embed(["a later note, still pending"])[0], atol=1e-6)
    np.testing.assert_allclose(got[ids[7]], want[7], atol=1e-6)


def test_an_index_catch_up_leaves_no_room_behind_in_the_pending_tail(world: World) -> None:
    """Once the background indexer has moved every pending vector into the index (in steps, as the daemon does), the
    partition's pending tail is a new empty dict, not one that kept the room of every vector it held (a dense search
    walks the tail: at a million emptied entries that walk took ~1 ms a search); a search finds the index's hits."""
    node = world.open_node()
    ids = node.put([fact(f"note number {i} about topic {i % 7}") for i in range(300)], NOW)
    alice = node.store.pid_of(PartitionRef.parse("user_private|owner:alice"))
    assert node.store.pending() == 300
    moved = 0
    while node.store.pending():
        moved += node.store.catch_up(64)
    assert moved == 300
    tail = node.store._live[alice].pending
    assert tail == {} and sys.getsizeof(tail) == sys.getsizeof({})
    (q,) = node.embedder.embed(["note number 17 about topic 3"])
    hits = node.store.dense_search(alice, q, 3)
    assert hits[0].id == ids[17] and hits[0].path == "index"


def test_opened_records_serve_only_while_the_store_is_unchanged(world: World) -> None:
    """Records read through a ``Records`` are served from it while the store's state is the same, and read again after
    any write (an edit, a delete, a local-state write): nothing stale is ever returned."""
    node = world.open_node()
    a, b = node.put([fact("first note"), fact("second note")], NOW)
    records = Records()
    assert [x.id for x in node.store.get_many([a, b], records=records) if x] == [a, b]
    assert set(records.assets) == {a, b} and records.state == node.store.state
    node.put([fact("first note", tags=["edited"])], NOW + 1)  # an edit: a new journal position
    assert node.store.get(a, records=records).tags == ("edited",)
    node.store.delete(b, NOW + 2)
    assert node.store.get_many([b], records=records) == [None]
    assert node.store.get(b, include_deleted=True, records=records).tombstone
    seq = node.store.seq
    node.store.update_local([(a, Tier.COLD, Heat(1, NOW + 3, 1.0))])  # local state: no journal entry, yet a change
    assert node.store.seq == seq and node.store.get(a, records=records).tier is Tier.COLD
    assert node.store.get(a, records=records).heat == Heat(1, NOW + 3, 1.0)
    # A local-state write made through the records leaves them current: they hold what a fresh read returns.
    state = node.store.state
    node.store.update_local([(a, Tier.WARM, Heat(2, NOW + 4, 2.0))], records=records)
    assert node.store.state != state and records.state == node.store.state
    assert records.assets[a] == node.store.get(a) and records.assets[a].tier is Tier.WARM


def test_replay_after_unclean_stop(world: World) -> None:
    """Writes after the last snapshot are replayed from the journal on reopen and found by search."""
    node = world.open_node()
    first = node.put([fact(f"early fact {i}") for i in range(40)], NOW)
    node.checkpoint()
    late = node.put([fact(f"late fact {i} zebra") for i in range(10)], NOW)
    node.delete(first[0], NOW + 1)
    assert world.kv is not None
    world.kv.close()  # no checkpoint: an unclean stop
    node = world.open_node()
    assert node.store.replayed_events == 11
    hits = node.search("late fact 3 zebra", "alice", LATER, k=1)
    assert hits[0].asset.id == late[3]
    assert all(h.asset.id != first[0] for h in node.search("early fact 0", "alice", LATER, k=40))


def test_the_postings_in_a_snapshot_and_the_journal_after_it_are_the_store(world: World) -> None:
    """The BM25 postings travel in the sealed snapshot, and nowhere else on disk: a reopened store holds them before any
    search, and the writes after the snapshot (puts, edits, a delete, a move, replayed from the journal) leave them
    equal to postings made afresh from every record of the partition."""
    node = world.open_node()
    ids = node.put([fact(f"early fact {i} walnut {'amber' if i % 3 else 'cedar'}") for i in range(40)], NOW)
    node.put([fact("a walnut cedar box")], NOW)
    node.checkpoint()
    node.put([fact(f"late fact {i} walnut amber") for i in range(10)], NOW)
    assert node.put([fact("early fact 5 walnut amber", entities=["birch"])], NOW + 1) == [ids[5]]  # an edit
    node.delete(ids[7], NOW + 2)
    moved = node.put([fact("early fact 2 walnut amber", privacy_scope="trusted_devices")], NOW + 3)  # another partition
    assert moved == [ids[2]]
    assert world.kv is not None
    world.kv.close()  # no checkpoint: the snapshot is older than the journal
    node = world.open_node()
    assert node.store.replayed_events >= 12
    pid = node.store.pid_of(PartitionRef.parse("user_private|owner:alice"))
    queries = ("walnut", "amber cedar", "birch", "late fact 3", "early fact 7")
    after = {q: node.store.lexical.search(pid, q, 100) for q in queries}
    assert ids[7] not in {i for i, _ in after["early fact 7"]}
    assert ids[5] in {i for i, _ in after["birch"]}
    assert ids[2] not in {i for i, _ in node.store.lexical.search(pid, "early fact 2", 100)}
    devices = node.store.pid_of(PartitionRef.parse("trusted_devices|owner:alice"))
    assert ids[2] in {i for i, _ in node.store.lexical.search(devices, "early fact 2", 100)}
    replayed = {p: live_postings(node.store.lexical, p) for p in (pid, devices)}
    for p in (pid, devices):
        node.store._build_postings(p, node.store._members(p))  # made again from the records
    assert {p: live_postings(node.store.lexical, p) for p in (pid, devices)} == replayed
    assert {q: node.store.lexical.search(pid, q, 100) for q in queries} == after
    assert next(world.kv.load_range("index", b"L", b"M"), None) is None  # no posting written per commit
    assert next(world.kv.load_range("index", b"l", b"m"), None) is None
    node.close()
    node = world.open_node()  # from a snapshot that holds them all
    assert node.store.rebuilt_indexes == 0 and node.store.replayed_events == 0
    assert pid in node.store.lexical._sealed  # loaded with the snapshot (parsed on first use), not read from disk
    assert {q: node.store.lexical.search(pid, q, 100) for q in queries} == after
    assert pid in node.store.lexical._memory
    node.close(checkpoint=False)


def test_a_snapshot_loads_with_the_collector_paused_and_leaves_it_as_it_was(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a snapshot holds (views, postings, the vector index) lives as long as its partition: no cyclic collection
    walks it while it is made, and the collector is running again after the store opened (or still off, if it was)."""
    node = world.open_node()
    node.put([fact(f"collector fact {i} walnut") for i in range(30)], NOW)
    node.close()
    seen: list[bool] = []
    factory = world.factory
    real_load, real_parse = factory.load, lexical.LexicalIndex._parse_blob

    def load(data: bytes) -> Any:
        seen.append(gc.isenabled())
        return real_load(data)

    def parse(data: bytes) -> Any:
        seen.append(gc.isenabled())
        return real_parse(data)

    monkeypatch.setattr(factory, "load", load)
    monkeypatch.setattr(lexical.LexicalIndex, "_parse_blob", staticmethod(parse))
    assert gc.isenabled()
    node = world.open_node()
    assert node.store.rebuilt_indexes == 0 and seen == [False]
    assert gc.isenabled()
    pid = node.store.pid_of(PartitionRef.parse("user_private|owner:alice"))
    assert len(node.store.lexical.search(pid, "walnut", 50)) == 30  # the postings parsed on first use …
    assert seen == [False, False] and gc.isenabled()  # … with the collector paused too
    node.close()
    gc.disable()
    try:
        with views_mod.collector_paused():
            pass
        assert not gc.isenabled()  # nested in a pause: left paused
    finally:
        gc.enable()


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_missing_or_corrupt_snapshot_is_rebuilt(world: World, damage: str) -> None:
    """An index snapshot that is gone or altered is rebuilt from the store, and search still answers."""
    node = world.open_node()
    ids = node.put([fact(f"fact {i} quartz") for i in range(50)], NOW)
    node.close()
    for name in world.blobs.names():
        blob = world.blobs.read(name)
        assert blob is not None
        if damage == "missing":
            world.blobs.remove(name)
        else:
            world.blobs.write(name, blob[:-10] + bytes(10))
    node = world.open_node()
    assert node.store.rebuilt_indexes == 1
    assert node.search("fact 12 quartz", "alice", LATER, k=1)[0].asset.id == ids[12]


def test_wrong_keychain_is_refused() -> None:
    """A store opened with another node's keychain fails with WrongKey, before anything is read or written."""
    w = memory_world()
    w.open_node().put([fact("mine")], NOW)
    w.keychain = new_keychain(seed=99)
    with pytest.raises(WrongKey):
        w.open_store()


def test_altered_record_is_reported_not_returned() -> None:
    """A flipped byte in a stored record is detected on read (StoreCorrupt), never returned as data."""
    w = memory_world()
    node = w.open_node()
    (id_,) = node.put([fact("precious")], NOW)
    kv = w.kv
    assert isinstance(kv, MemoryKV)
    key = node.store.sid(id_)
    blob = bytearray(kv._data["assets"][key])
    blob[-1] ^= 1
    kv._data["assets"][key] = bytes(blob)
    with pytest.raises(StoreCorrupt):
        node.store.get(id_)


def test_core_is_deterministic() -> None:
    """The same operations with the same seeds give byte-identical storage."""

    def run() -> dict[str, dict[bytes, bytes]]:
        w = memory_world()
        node = w.open_node()
        node.put([fact(f"fact {i}", entities=[f"e{i % 3}"]) for i in range(20)], NOW)
        node.delete(node.store.list_ids("entity", "e1")[0], NOW + 1)
        node.checkpoint()
        assert isinstance(w.kv, MemoryKV)
        return w.kv.dump()

    assert run() == run()


def test_partition_ids_and_index_keys_reveal_nothing() -> None:
    """Partition ids and index keys are keyed hashes: owner, tenant and entity names are not in any key."""
    w = memory_world()
    node = w.open_node()
    node.put([fact("x", owner="alice-the-owner", entities=["Zanzibar-entity"], tenant_scope="acme-tenant")], NOW)
    assert isinstance(w.kv, MemoryKV)
    for space, rows in w.kv.dump().items():
        for k, v in rows.items():
            for needle in (b"alice-the-owner", b"Zanzibar-entity", b"acme-tenant"):
                assert needle not in k, (space, k)
                assert needle not in v, (space, k)


def test_put_requires_asset_objects_and_unique_ids(world: World) -> None:
    """A batch with a duplicate id or a non-asset is refused whole."""
    node = world.open_node()
    a = signed(node, fact("dup"))
    with pytest.raises(InvalidAsset, match="twice"):
        node.store.put_many([a, a], [None, None], node.embedder.id, node.embedder.dim)
    with pytest.raises(InvalidAsset):
        node.store.put_many([{"id": a.id}], [None], node.embedder.id, node.embedder.dim)  # type: ignore[list-item]
    with pytest.raises(InvalidAsset, match="set"):
        node.put([{**fact("y"), "signature": "00"}], NOW)


def test_partition_refs_round_trip() -> None:
    """Partition names parse back to the same reference."""
    ref = PartitionRef.parse("tenant_private|tenant:acme")
    assert ref.name == "tenant_private|tenant:acme"
    assert ref.scope.value == "tenant_private" and ref.boundary == "tenant:acme"


def test_an_edit_that_moves_partitions_leaves_the_old_one_even_after_a_crash(world: World) -> None:
    """Narrowing an asset's scope removes it from the old partition's search, also when replayed after a crash."""
    node = world.open_node()
    shared = {
        "asset_type": "fact",
        "payload": {"text": "alice salary is 200k"},
        "owner_id": "alice",
        "privacy_scope": "shared",
        "tenant_scope": "acme",
    }
    (id_,) = node.put([shared], NOW)
    node.checkpoint()  # the shared partition's snapshot now holds the id
    node.governance.add_principal(GovPrincipal("bob", tenants=frozenset({"acme"})))
    assert [h.asset.id for h in node.search("alice salary", "bob", LATER)] == [id_]
    node.put([{**shared, "privacy_scope": "user_private"}], NOW + 1)
    assert world.kv is not None
    world.kv.close()  # crash: no checkpoint
    node = world.open_node()
    for _ in range(2):
        assert [h.asset.id for h in node.search("alice salary", "bob", LATER, k=5)] == []
        assert [h.asset.id for h in node.search("alice salary", "alice", LATER, k=5)] == [id_]
        node.close()  # and after a clean close and reopen too
        node = world.open_node()


def test_a_failed_partition_creation_can_be_retried() -> None:
    """If the commit that records a new partition fails after its key was stored, a later write reuses the key."""
    w = memory_world()
    node = w.open_node()
    assert isinstance(w.kv, MemoryKV)
    real_commit = w.kv.commit
    failures = [1]

    def flaky(ops: Any, *, sync: bool = True) -> None:
        if failures and any(op.space == "meta" for op in ops):
            failures.pop()
            raise StoreCorrupt("simulated I/O failure")
        real_commit(ops, sync=sync)

    w.kv.commit = flaky  # type: ignore[method-assign]
    with pytest.raises(StoreCorrupt):
        node.put([fact("first")], NOW)
    (id_,) = node.put([fact("first")], NOW)
    w.kv.close()
    assert w.open_node().store.get(id_).payload == {"text": "first"}


def test_refused_batches_create_no_partition_and_no_key(world: World) -> None:
    """A batch refused for any reason leaves keychain and store untouched, even when it needed a new partition."""
    node = world.open_node()
    refs, before = world.keychain.refs(), snapshot(world)
    for bad in ([fact("dup"), fact("dup")], [fact("x"), {**fact("y"), "payload": {"t": "z" * 5000}}]):
        with pytest.raises(InvalidAsset):
            node.put(bad, NOW)
    with pytest.raises(IndexMismatch):
        node.store.put_many([node.prepare(node.build(fact("a"), NOW))], [None], "e", 0, sign=True)
    assert world.keychain.refs() == refs and snapshot(world) == before
    assert world.kv is not None
    world.kv.close()
    world.open_node()  # still opens


def test_vectors_must_be_finite_and_are_stored_as_unit_vectors(world: World) -> None:
    """A vector with inf or nan is refused; a scaled one is normalized, so it cannot outrank others by its length."""
    node = world.open_node()
    dim = node.embedder.dim
    a = node.prepare(node.build(fact("a"), NOW))
    bad = np.ones(dim, dtype=np.float32)
    bad[3] = np.inf
    with pytest.raises(IndexMismatch, match="non-finite"):
        node.store.put_many([a], [bad], node.embedder.id, dim, sign=True)
    big = np.zeros(dim, dtype=np.float32)
    big[0] = 1000.0
    node.store.put_many([a], [big], node.embedder.id, dim, sign=True)
    q = np.zeros(dim, dtype=np.float32)
    q[0] = 1.0
    (hit,) = node.store.dense_search(node.store.pid_of(PartitionRef.parse("user_private|owner:alice")), q, 1)
    assert hit.score == pytest.approx(1.0, abs=1e-5)


def test_a_chosen_id_or_an_owner_change_is_refused(world: World) -> None:
    """A draft cannot name another asset's id, and an edit cannot take an asset from its owner or tenant."""
    node = world.open_node()
    (bobs,) = node.put([fact("bob's note", owner="bob")], NOW)
    with pytest.raises(InvalidAsset, match="content id"):
        node.put([{**fact("mallory text", owner="mallory", privacy_scope="public"), "id": bobs}], NOW)
    stolen = node.store.sign(node.store.get(bobs).replace(owner_id="mallory", version=5))
    with pytest.raises(InvalidAsset, match="cannot change its owner"):
        node.store.put_many([stolen], [None], node.embedder.id, node.embedder.dim)
    assert node.store.get(bobs).owner_id == "bob"


def test_a_snapshot_newer_than_the_journal_is_rebuilt() -> None:
    """After the database is restored from an older copy, stale snapshots are rebuilt and new writes are found."""
    w = memory_world()
    node = w.open_node()
    node.put([fact("one"), fact("two")], NOW)
    node.checkpoint()
    assert isinstance(w.kv, MemoryKV)
    backup = copy.deepcopy(w.kv.dump())
    node.put([fact(f"later {i}") for i in range(5)], NOW)
    node.close()  # snapshots now cover the later writes
    restored = MemoryKV()
    for space, rows in backup.items():
        restored.commit([Put(space, k, v) for k, v in rows.items()])
    w.make_kv = lambda: restored  # the database comes back from the copy; the snapshots do not
    node = w.open_node()
    (new,) = node.put([fact("three new")], NOW)
    restored.close()  # crash
    w.make_kv = lambda: restored.reopened()
    node = w.open_node()
    assert node.search("three new", "alice", LATER, k=1)[0].asset.id == new


def test_storage_holds_no_asset_id_in_the_clear() -> None:
    """Ids are content hashes; no key or value on disk holds one, so the files cannot confirm a guessed asset."""
    w = memory_world()
    node = w.open_node()
    ids = node.put([fact("alice has a secret", entities=["E"]), fact("linked", references=[])], NOW)
    (linked,) = node.put([fact("points at the first", references=[ids[0]])], NOW)
    assert isinstance(w.kv, MemoryKV)
    for rows in w.kv.dump().values():
        for k, v in rows.items():
            for id_ in (*ids, linked):
                assert bytes.fromhex(id_) not in k and bytes.fromhex(id_) not in v
                assert id_.encode() not in v
    assert node.store.edges(linked) == [("references", ids[0])]
    assert node.store.list_ids("entity", "E") == [ids[0]]


def test_commit_order_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    """The core writes the same ops in the same order whatever PYTHONHASHSEED is (the simulator relies on it)."""
    script = tmp_path / "run.py"
    script.write_text(
        "import hashlib, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.node.conftest import memory_world, fact, NOW\n"
        "w = memory_world(); node = w.open_node(); log = []\n"
        "real = w.kv.commit\n"
        "def rec(ops, *, sync=True):\n"
        "    log.extend((op.space, op.key) for op in ops); real(ops, sync=sync)\n"
        "w.kv.commit = rec\n"
        "node.put([fact(f'f{i}', entities=[f'e{j}' for j in range(i % 5)], tags=['a', 'b']) for i in range(30)], NOW)\n"
        "print(hashlib.sha256(repr(log).encode()).hexdigest())\n"
    )
    digests = {
        subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("0", "1", "12345")
    }
    assert len(digests) == 1, digests


def _views(node: Node) -> dict[str, dict[str, Any]]:
    return {p.ref.name: {v.id: v for v in node.store.views(p.pid)} for p in node.store.partitions()}


def _rows_before(pv: PartitionViews) -> list[list[Any]]:
    """``pv``'s views as the versions before shapes wrote them: a row of all of a view's fields, then its heat."""
    rows = []
    for i in sorted(pv.views):
        h = pv.heat_of(i)
        rows.append([*pv.views[i].to_json(), [h.visits, h.last_access, h.score]])
    return rows


# The views as each format before wrote them: rows of all of a view's fields in one JSON list, then one row per line
# after a header.
_DUMPS_BEFORE = {
    "one list": lambda pv: orjson.dumps(_rows_before(pv)),
    "a row per line": lambda pv: b"\n".join(
        [orjson.dumps({"rows": len(pv.views)}), *map(orjson.dumps, _rows_before(pv))]
    ),
}


@pytest.mark.parametrize("before", list(_DUMPS_BEFORE))
def test_a_snapshot_of_views_in_a_format_before_opens_without_a_rebuild(
    world: World, monkeypatch: pytest.MonkeyPatch, before: str
) -> None:
    """A snapshot whose views are in a format before (one JSON list of rows, as snapshots were written before a row
    per line; or a row of all of a view's fields per line, as before shapes) is read as it is: the store opens from
    it (no rebuild, no replay) with the views the records give, and the next checkpoint writes the format of now (a
    header that counts the shapes)."""
    node = world.open_node()
    node.put([fact(f"note {i}", entities=[f"e{i % 3}"], tags=["t"]) for i in range(20)], NOW)
    expected = _views(node)
    with monkeypatch.context() as m:  # as a store of the version before wrote its snapshots
        m.setattr(PartitionViews, "dump", _DUMPS_BEFORE[before])
        node.close()
    snapshot = _sealed_views(world, node)
    assert snapshot[:2] == b"[[" if before == "one list" else snapshot.startswith(b'{"rows":20}\n["')
    node = world.open_node()
    assert node.store.rebuilt_indexes == 0 and node.store.replayed_events == 0
    assert _views(node) == expected
    node.put([fact("one more")], NOW + 1)
    node.close()
    assert _sealed_views(world, node).startswith(b'{"rows":21,"shapes":')
    node = world.open_node()
    assert node.store.rebuilt_indexes == 0 and len(next(iter(_views(node).values()))) == 21
    assert all(_views(node)[name].items() >= views.items() for name, views in expected.items())


def test_a_snapshot_sealed_as_one_blob_opens_without_a_rebuild(world: World) -> None:
    """A snapshot of the format before sealed streams (one sealed blob, read whole; lengths between its parts; the
    vector index one buffer, hnswlib's arrays inside its pickle) is read as it is: no rebuild, no replay, the same
    search results; the next checkpoint writes a sealed stream, which opens the same way."""
    node = world.open_node()
    node.put([fact(f"fact {i} quartz") for i in range(50)], NOW)
    goals = ["fact 12 quartz", "fact 3", "quartz 40"]

    def answers(n: Node) -> list[list[tuple[str, float]]]:
        return [[(r.asset.id, round(r.score, 9)) for r in n.search(g, "alice", LATER, k=5)] for g in goals]

    want = answers(node)
    node.close()
    store = node.store
    (part,) = store.partitions()
    name, key = store._snapshot_name(part.pid), store._live[part.pid].key
    aad = b"index:" + part.pid + part.epoch.to_bytes(4, "big")
    blob = world.blobs.read(name)
    assert blob is not None and blob[:4] == crypto.STREAM_MAGIC
    raw = crypto.open_stream(key, blob, aad)
    (hl,) = struct.unpack(">I", raw[:4])
    head = orjson.loads(raw[4 : 4 + hl])
    at = 4 + hl
    views, lexical_part = raw[at : at + head["views"]], raw[at + head["views"] : at + head["views"] + head["lexical"]]
    at += head["views"] + head["lexical"]
    parts = []
    for n in head["index"]:
        parts.append(raw[at : at + n])
        at += n
    assert at == len(raw)
    old_head = orjson.dumps({k: v for k, v in head.items() if k not in ("format", "views", "index")})
    old = b"".join(
        [
            struct.pack(">I", len(old_head)),
            old_head,
            struct.pack(">Q", len(views)),
            views,
            struct.pack(">Q", len(lexical_part)),
            lexical_part,
            _index_as_before(parts),
        ]
    )
    world.blobs.write(name, crypto.seal(key, old, aad, crypto.SeededEntropy(3)))
    node = world.open_node()
    assert node.store.rebuilt_indexes == 0 and node.store.replayed_events == 0
    assert answers(node) == want
    node.put([fact("one more")], NOW + 1)
    node.close()
    blob = world.blobs.read(name)
    assert blob is not None and blob[:4] == crypto.STREAM_MAGIC
    node = world.open_node()
    assert node.store.rebuilt_indexes == 0 and node.store.replayed_events == 0
    assert answers(node) == want


def _index_as_before(parts: list[bytes]) -> bytes:
    """A vector index snapshot in parts, in the one-buffer format it was written in before."""
    first = parts[0]
    if first[:4] == b"GAI2":  # adaptive: kind and threshold, then the inner index
        return b"GAI1" + first[4:9] + _index_as_before(parts[1:])
    if first[:4] == b"GXI2":  # exact: a JSON head, then the matrix as .npy
        head = orjson.loads(first[4:])
        m = np.frombuffer(parts[1], dtype=np.float32).reshape(len(head["ids"]), head["dim"])
        buf = io.BytesIO()
        np.save(buf, m, allow_pickle=False)
        return b"GXI1" + struct.pack(">I", len(first) - 4) + first[4:] + buf.getvalue()
    assert first[:4] == b"GHI2"  # HNSW: one pickle, hnswlib's arrays within it
    body = pickle.dumps(pickle.loads(first[4:], buffers=parts[1:]), protocol=pickle.HIGHEST_PROTOCOL)
    return b"GHI1" + struct.pack(">Q", len(body)) + body


def _sealed_views(world: World, node: Node) -> bytes:
    """The views part of the (one) partition's sealed snapshot, opened."""
    store = node.store
    (part,) = store.partitions()
    blob = world.blobs.read(store._snapshot_name(part.pid))
    assert blob is not None
    raw = crypto.open_stream(store._live[part.pid].key, blob, b"index:" + part.pid + part.epoch.to_bytes(4, "big"))
    (hl,) = struct.unpack(">I", raw[:4])
    head = orjson.loads(raw[4 : 4 + hl])
    return raw[4 + hl : 4 + hl + head["views"]]


@pytest.mark.parametrize("stop", ["written", "clean"])
def test_views_share_the_strings_their_records_repeat(world: World, stop: str) -> None:
    """The views of records put (and of a snapshot read back after a restart) hold one string per distinct owner, tag
    and entity, not one per record: a million views repeat a few of them."""
    node = world.open_node()
    node.put([fact(f"note {i}", entities=[f"e{i % 3}"], tags=[f"t{i % 2}"]) for i in range(30)], NOW)
    if stop == "clean":
        node.close()
        node = world.open_node()
    (views,) = [list(node.store.views(p.pid)) for p in node.store.partitions()]
    assert len(views) == 30
    for strings in (
        [v.owner_id for v in views],
        [e for v in views for e in v.entities],
        [t for v in views for t in v.tags],
    ):
        assert len({id(x) for x in strings}) == len(set(strings)) < len(strings)


@pytest.mark.parametrize("stop", ["clean", "crash", "lost-snapshots"])
def test_policy_views_and_lexical_index_follow_the_records(world: World, stop: str) -> None:
    """Views (the pre-ranking policy data) and BM25 postings match the records after edits, moves, deletes and a
    restart of any kind; supersession is tracked."""
    node = world.open_node()
    rng = random.Random(0)
    ids = node.put(
        [fact(f"note {i} about {rng.choice(['tea', 'coffee', 'juice'])}", entities=[f"e{i % 3}"]) for i in range(30)],
        NOW,
    )
    node.checkpoint()
    (newer,) = node.put([fact("note 0 revised", supersedes=[ids[0]])], NOW + 1)
    moved = node.store.get(ids[1])
    node.put([fact(moved.payload["text"], entities=list(moved.entities), privacy_scope="trusted_devices")], NOW + 2)
    node.delete(ids[2], NOW + 3)
    assert world.kv is not None
    if stop == "clean":
        node.close()
    else:
        world.kv.close()
        if stop == "lost-snapshots":
            for name in world.blobs.names():
                world.blobs.remove(name)
    node = world.open_node()
    expected: dict[str, dict[str, Any]] = {}
    for name, views in _views(node).items():
        for id_ in views:
            expected.setdefault(name, {})[id_] = View.of(node.store.get(id_))
    assert _views(node) == expected
    assert sum(len(v) for v in expected.values()) == 30  # 30 + 1 new - 1 deleted
    assert ids[1] in expected["trusted_devices|owner:alice"]
    assert node.store.superseded == {ids[0]: {newer}}
    pid = node.store.pid_of(PartitionRef.parse("user_private|owner:alice"))
    found = {i for i, _ in node.store.lexical.search(pid, "tea", 50)}
    tea = {i for i in expected["user_private|owner:alice"] if "tea" in node.store.get(i).payload["text"]}
    assert found == tea and tea and ids[1] not in found and ids[2] not in found


def test_stats_count_live_assets_and_tombstones_without_opening_records(world: World) -> None:
    """stats() counts from the partitions' views and the record keys; the counts equal those of every record opened,
    after puts, an edit that moves an asset to another partition, and deletes — and again after a reopen."""
    node = world.open_node()
    ids = node.put([fact(f"fact number {i}", owner="alice" if i % 2 else "bob") for i in range(12)], NOW)
    (moved,) = node.put([fact("fact number 1", privacy_scope="trusted_devices")], LATER)  # an edit, another partition
    assert moved == ids[1] and node.store.get(moved).version == 2
    for id_ in ids[:4]:
        node.store.delete(id_, LATER)

    def opened() -> tuple[int, int]:
        records = [node.store.get(i, include_deleted=True) for i in ids]
        return sum(not r.tombstone for r in records), sum(r.tombstone for r in records)

    s = node.store.stats()
    assert (s.assets, s.tombstones) == opened() == (8, 4)
    node.close()
    node = world.open_node()
    s = node.store.stats()
    assert (s.assets, s.tombstones) == opened()


class FailingCommitKV(MemoryKV):
    """A MemoryKV whose commits fail after ``allowed`` more of them (a crash in the middle of a long open)."""

    def __init__(self, base: MemoryKV, allowed: int) -> None:
        super().__init__()
        self._data, self._keys = base._data, base._keys  # the same data through another handle (MemoryKV.reopened)
        self.allowed = allowed

    def commit(self, ops: Any, *, sync: bool = True) -> None:
        if self.allowed == 0:
            raise OSError("injected: the disk went away")
        self.allowed -= 1
        super().commit(ops, sync=sync)


def test_failed_commits_leave_the_postings_as_the_records_say(world: World) -> None:
    """A put and a delete whose commits fail change nothing of the postings; the writes after them (a put, an edit, a
    delete) leave the postings of both partitions equal to those made afresh from the records, and the journal goes
    on from where it was."""
    node = world.open_node()
    ids = node.put([fact(f"fact {i} walnut {'amber' if i % 2 else 'cedar'}") for i in range(12)], NOW)
    node.put([fact("a device note walnut", privacy_scope="trusted_devices")], NOW)
    pids = [node.store.pid_of(PartitionRef.parse(f"{s}|owner:alice")) for s in ("user_private", "trusted_devices")]
    before = {pid: live_postings(node.store.lexical, pid) for pid in pids}
    seq = node.store.seq
    real = node.store.kv.commit

    def failing(ops: Any, *, sync: bool = True) -> None:
        raise OSError("injected: the disk went away")

    node.store.kv.commit = failing  # type: ignore[method-assign]
    with pytest.raises(OSError, match="injected"):
        node.put([fact("a failed fact zebra walnut"), fact("fact 3 walnut amber", entities=["oak"])], NOW + 1)
    with pytest.raises(OSError, match="injected"):
        node.delete(ids[4], NOW + 1)
    node.store.kv.commit = real  # type: ignore[method-assign]
    assert not node.store.lexical.has_staged() and node.store.seq == seq
    assert {pid: live_postings(node.store.lexical, pid) for pid in pids} == before
    assert node.store.lexical.search(pids[0], "zebra", 5) == []
    node.put([fact("a later fact zebra walnut")], NOW + 2)
    node.put([fact("fact 5 walnut amber", entities=["oak"], privacy_scope="trusted_devices")], NOW + 2)  # a move
    node.delete(ids[4], NOW + 3)
    assert node.store.seq == seq + 4  # the put, the move (out of one partition, into the other), the delete
    fresh = lexical.LexicalIndex(lambda term: node.store.mac(b"L", term.encode()), node.store.id_of)
    for pid in pids:
        fresh.build(pid, node.store._texts(pid, node.store._members(pid)))  # made afresh from the records
        assert live_postings(node.store.lexical, pid) == live_postings(fresh, pid)
        assert node.store.lexical.stats(pid) == fresh.stats(pid)
    assert {i for i, _ in node.store.lexical.search(pids[1], "oak", 5)} == {ids[5]}
    node.close()


def test_postings_of_another_analyzer_are_made_again_on_open_and_postings_on_disk_are_deleted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store whose postings an earlier analyzer made (the plural stemmer only, no analyzer named in the store) has
    them made again from its records when it opens, not loaded from its snapshot: every live asset's, the statistics a
    recount of them, another form of a word found; sealed in a snapshot at once, so not made again. A store of schema
    2 (its postings on disk, a key per posting and one per partition) has them deleted as it opens, a batch per commit,
    and then names schema 3: a run that fails half-way leaves the rest, and schema 2, to the next open."""
    w = memory_world()
    monkeypatch.setattr(lexical, "_stem", lexical._plural)
    node = w.open_node()
    ids = node.put(
        [fact(f"note {i}: alice was painting walls {'and hiking' if i % 3 == 0 else ''}") for i in range(9)], NOW
    )
    node.delete(ids[3], NOW + 1)
    pid = node.store.pid_of(PartitionRef.parse("user_private|owner:alice"))
    node.close()
    assert isinstance(w.kv, MemoryKV)
    base = w.kv.reopened()
    # As a store of an earlier GAML: no analyzer named, schema 2, its postings on disk
    base.commit([store_mod.Delete("meta", store_mod.ANALYZER_KEY), store_mod.Put("meta", b"schema", b"2")])
    on_disk = [store_mod.Put("index", b"L" + pid + bytes([n]) * 16 + bytes(16), bytes(8)) for n in range(25)]
    base.commit([*on_disk, store_mod.Put("index", b"l" + pid, bytes(16))])
    monkeypatch.undo()
    monkeypatch.setattr(store_mod, "DISK_POSTINGS_DELETES", 10)
    w.make_kv = lambda: FailingCommitKV(base, allowed=1)  # one batch of deletes: then the disk fails
    with pytest.raises(OSError, match="injected"):
        w.open_node()
    assert sum(1 for _ in base.reopened().load_range("index", b"L", b"M")) == 15
    assert base.reopened().load("meta", b"schema") == b"2"
    assert base.reopened().load("meta", store_mod.ANALYZER_KEY) is None
    w.make_kv = lambda: base.reopened()
    node = w.open_node()
    assert node.store.reanalyzed_assets == 8 and node.store.rebuilt_indexes == 0  # re-analysed, not damaged
    assert base.reopened().load("meta", store_mod.ANALYZER_KEY) == lexical.ANALYZER.encode()
    assert [k for k, _ in base.reopened().load_range("index") if k[:1] in b"Ll"] == []
    assert base.reopened().load("meta", b"schema") == b"3"
    live = [i for n, i in enumerate(ids) if n != 3]
    assert {i for i, _ in node.store.lexical.search(pid, "painted", 100)} == set(live)
    assert {i for i, _ in node.store.lexical.search(pid, "hikes", 100)} == {ids[0], ids[6]}
    count, total = node.store.lexical.stats(pid)
    assert count == len(live) and total == sum(len(lexical.tokenize(node.store.get(i).text())) for i in live)
    node.close(checkpoint=False)  # as a command that only read: the open sealed them already
    node = w.open_node()
    assert node.store.reanalyzed_assets == 0 and node.store.rebuilt_indexes == 0
    assert pid in node.store.lexical._sealed  # loaded from the snapshot, not made again
    assert {i for i, _ in node.store.lexical.search(pid, "painted", 100)} == set(live)
    node.close()


def test_a_store_of_a_schema_this_node_does_not_read_is_refused() -> None:
    """A store that names a schema this GAML does not read (a newer one) is refused before anything is changed."""
    w = memory_world()
    w.open_node().close()
    assert isinstance(w.kv, MemoryKV)
    base = w.kv.reopened()
    base.commit([store_mod.Put("meta", b"schema", b"4")])
    before = base.dump()
    w.make_kv = lambda: base.reopened()
    with pytest.raises(StoreCorrupt, match="unsupported store schema b'4'; this node reads schemas 2, 3"):
        w.open_node()
    assert base.reopened().dump() == before


def test_a_snapshot_whose_postings_another_analyzer_made_is_not_loaded_even_when_the_store_names_this_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The snapshot names its postings' analyzer too: one whose postings another analyzer made (as a crash between
    writing this analyzer's name and the next checkpoint could leave) is loaded for its views and vectors, its
    postings are made from the records, and sealed at once."""
    w = memory_world()
    monkeypatch.setattr(lexical, "_stem", lexical._plural)
    monkeypatch.setattr(lexical, "SNAPSHOT_MAGIC", b"LX1")
    node = w.open_node()
    ids = node.put([fact(f"note {i}: bob was painting fences") for i in range(6)], NOW)
    pid = node.store.pid_of(PartitionRef.parse("user_private|owner:alice"))
    node.close()
    monkeypatch.undo()
    node = w.open_node()
    assert node.store.rebuilt_indexes == 0 and node.store.reanalyzed_assets == 6
    assert {i for i, _ in node.store.lexical.search(pid, "painted", 10)} == set(ids)  # stemmed as this one stems
    node.close(checkpoint=False)
    node = w.open_node()
    assert node.store.reanalyzed_assets == 0 and pid in node.store.lexical._sealed  # loaded from the snapshot
    assert {i for i, _ in node.store.lexical.search(pid, "paints", 10)} == set(ids)
    node.close()


def test_the_tombstones_are_counted_as_they_are_written(world: World) -> None:
    """stats() reads the tombstones from a count kept with each delete (not a scan of every record): it equals every
    record less the live assets through edits, a move to another partition, deletes (one twice) and a reopen without
    a checkpoint; a store made before the count existed counts its records once when it opens and keeps the count."""

    def by_scan(store: Store) -> int:
        return sum(1 for _ in store.kv.load_range("assets")) - store.stats().assets

    node = world.open_node()
    ids = node.put([fact(f"a fact about the walnut box, number {i}") for i in range(12)], NOW)
    assert node.store.stats().tombstones == 0 == by_scan(node.store)
    node.put([fact("a fact about the walnut box, number 3", privacy_scope="trusted_devices")], NOW + 1)  # moved
    for n, i in enumerate([ids[0], ids[5], ids[5], ids[9]]):
        node.delete(i, NOW + 2 + n)
    assert node.store.stats().tombstones == 3 == by_scan(node.store)
    assert world.kv is not None
    world.kv.close()
    node = world.open_node()
    assert node.store.stats().tombstones == 3 == by_scan(node.store)
    node.store.kv.commit([Delete("meta", TOMBSTONES_KEY)])  # as a store of the release before
    world.kv.close()
    node = world.open_node()
    assert node.store.kv.load("meta", TOMBSTONES_KEY) is not None
    assert node.store.stats().tombstones == 3 == by_scan(node.store)
    node.delete(ids[1], NOW + 9)
    assert node.store.stats().tombstones == 4 == by_scan(node.store)
