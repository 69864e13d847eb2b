"""Policy views (node.core.store.views): the cheap paths give what the general ones give."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import orjson
import pytest

from gaml.node.core.store.views import PartitionViews, View
from gaml.policy.model import (
    AssetType,
    ExportPolicy,
    Heat,
    InferencePolicy,
    Level,
    PrivacyScope,
    ReplicationPolicy,
    Retention,
    TrainingPolicy,
    TrustClass,
)

NOW = 1_700_000_000_000_000


def random_view(rng: random.Random, i: int) -> View:
    words = ["remember", "pinned", "gated:noise", "kind:goal", "kind:message", "tea", "x"]
    return View(
        id=f"{i:032x}",
        asset_type=rng.choice([AssetType.FACT, *AssetType]),
        owner_id=rng.choice(["alice", "bob"]),
        tenant_scope=rng.choice(["", "acme"]),
        privacy_scope=rng.choice(list(PrivacyScope)),
        allowed_principals=tuple(rng.sample(["carol", "dan"], rng.randrange(3))),
        allowed_roles=tuple(rng.sample(["ops", "dev"], rng.randrange(3))),
        inference_policy=rng.choice(list(InferencePolicy)),
        training_policy=rng.choice(list(TrainingPolicy)),
        export_policy=rng.choice(list(ExportPolicy)),
        replication_policy=rng.choice(list(ReplicationPolicy)),
        retention_policy=rng.choice([Retention(), Retention(delete_at=NOW + 5), Retention(ttl_seconds=60)]),
        level=rng.choice([Level.L0, Level.L0, *Level]),
        segment=rng.choice(["", "work"]),
        tags=tuple(rng.sample(words, rng.randrange(3))),
        entities=tuple(rng.sample(["Lisbon", "lisbon", "Tea"], rng.randrange(3))),
        created_at=NOW - rng.randrange(10**12),
        valid_from=rng.choice([0, NOW]),
        valid_to=0,
        supersedes=(),
        trust_class=rng.choice(list(TrustClass)),
        provenance_score=0.5,
        confidence_score=0.5,
        goal=rng.choice(["", "plan the trip"]),
        source_id=rng.choice(["", "src-1", "src-2"]),
        source_start=rng.randrange(100),
        derived_from=tuple(f"{rng.randrange(40):032x}" for _ in range(rng.choice([0, 0, 0, 1]))),
        contradicts=(),
    )


def random_heat(rng: random.Random) -> Heat:
    return rng.choice([Heat(), Heat(rng.randrange(5), NOW - rng.randrange(10**9), rng.random() * 3)])


def state(pv: PartitionViews) -> dict[str, Any]:
    out = {k: v for k, v in vars(pv).items() if k != "touched"}
    out["touched"] = list(pv.touched)
    return out


def test_a_new_heat_is_what_putting_the_view_again_gives() -> None:
    """reheat (what the store calls when only an asset's local state changed) leaves the views as a put of the view
    with that heat does: the heat class in the same order, the same peak, every grouping and digest, the epoch."""
    rng = random.Random(0)
    moved = 0
    for _ in range(20):
        fast, slow = PartitionViews(b"k" * 32), PartitionViews(b"k" * 32)
        views = [random_view(rng, i) for i in range(40)]
        for v in views:
            heat = random_heat(rng)
            fast.put(v, heat)
            slow.put(v, heat)
        for _ in range(60):
            v = fast.views[rng.choice(views).id]
            was = fast.heat_of(v.id)
            later = Heat(was.visits + 1, NOW + rng.randrange(10**9), rng.random() * 4)
            heat = rng.choice([was, Heat(), later, later])
            before = list(fast.touched)
            fast.reheat(v.id, heat)
            slow.put(v, heat)
            assert fast.views[v.id] is v  # a new heat makes no new view
            assert fast.heat_of(v.id) == heat
            assert state(fast) == state(slow)
            moved += list(fast.touched) != before
    assert moved >= 10  # the heat class's order did move, in some of the worlds


def rows_of(dump: bytes) -> list[Any]:
    """The rows of a dump: the lines after its header."""
    head, *lines = dump.split(b"\n")
    assert orjson.loads(head) == {"rows": len(lines)}
    return [orjson.loads(line) for line in lines]


def dump_of(rows: list[Any], count: int | None = None) -> bytes:
    """A dump of these rows, as :meth:`PartitionViews.dump` writes one (``count``: what its header says)."""
    head = orjson.dumps({"rows": len(rows) if count is None else count})
    return b"\n".join([head, *map(orjson.dumps, rows)])


def test_views_loaded_from_a_snapshot_are_the_views_put_one_by_one() -> None:
    """load (a snapshot's views, read in one pass) gives what putting each view gives: every grouping, the heat class
    in order, the digest and the epoch, whether the dump is bytes of its own or a part of a larger buffer (as the store
    reads it, in place); a row of another shape, an unknown enum value, an id given twice, a field of another type, a
    count that is not the rows' or no header is a ValueError or TypeError (the store rebuilds such a snapshot)."""
    rng = random.Random(1)
    for _ in range(10):
        put = PartitionViews(b"k" * 32)
        for v in (random_view(rng, i) for i in range(rng.randrange(1, 80))):
            put.put(v, random_heat(rng))
        dump = put.dump()
        for data in (dump, memoryview(b"before" + dump + b"after")[6:-5]):
            loaded = PartitionViews.load(data, b"k" * 32)
            assert state(loaded) == state(put)
            assert [v for v in loaded] == sorted(put, key=lambda v: v.id)
            assert all(loaded.heat_of(v.id) == put.heat_of(v.id) for v in put)
    assert state(PartitionViews.load(PartitionViews(b"k" * 32).dump(), b"k" * 32)) == state(PartitionViews(b"k" * 32))
    rows = rows_of(put.dump())
    bad_rows = [
        [*rows, rows[0]],
        [rows[0][:-1]],
        [[*rows[0][:1], "no-such-type", *rows[0][2:]]],
        [[*rows[0][:2], 7, *rows[0][3:]]],  # an owner that is not a string
        [[*rows[0][:14], [1], *rows[0][15:]]],  # a tag that is not a string
        [[]],
    ]
    for bad in [dump_of(r) for r in bad_rows] + [dump_of(rows, len(rows) + 1), dump_of(rows, len(rows) - 1)]:
        with pytest.raises((ValueError, TypeError)):
            PartitionViews.load(bad, b"k" * 32)
    for bad in (b"", b"\n".join(map(orjson.dumps, rows)), orjson.dumps({"rows": rows}), orjson.dumps({"rows": "1"})):
        with pytest.raises(ValueError):
            PartitionViews.load(bad, b"k" * 32)


def test_views_of_the_format_before_load_as_they_were() -> None:
    """A snapshot written before the views were one row per line (one JSON list of the rows) loads as it is: a store's
    existing snapshots are not rebuilt for the change; a list that is not one of rows is still a ValueError."""
    rng = random.Random(3)
    put = PartitionViews(b"k" * 32)
    for i in range(60):
        put.put(random_view(rng, i), random_heat(rng))
    rows = rows_of(put.dump())
    assert state(PartitionViews.load(orjson.dumps(rows), b"k" * 32)) == state(put)
    assert len(PartitionViews.load(orjson.dumps([]), b"k" * 32)) == 0
    for bad in ([*rows, rows[0]], [[]], [7]):
        with pytest.raises(ValueError):
            PartitionViews.load(orjson.dumps(bad), b"k" * 32)


def test_views_share_the_strings_many_of_them_repeat() -> None:
    """Views put or loaded hold one string per distinct owner, tenant, segment, goal, source, reader, tag and entity,
    not a copy each (a million views repeat a few of them)."""
    rng = random.Random(4)
    made = [random_view(rng, i) for i in range(40)]
    copies = [
        dataclasses.replace(
            v,
            owner_id="".join(v.owner_id),
            tags=tuple("".join(t) for t in v.tags),
            entities=tuple("".join(e) for e in v.entities),
        )
        for v in made
    ]
    put = PartitionViews(b"k" * 32)
    for v in copies:
        put.put(View.from_json(v.to_json()))
    for pv in (put, PartitionViews.load(put.dump(), b"k" * 32)):
        for field in ("owner_id", "tenant_scope", "segment", "goal", "source_id"):
            assert len({id(getattr(v, field)) for v in pv}) == len({getattr(v, field) for v in pv})
        for field in ("allowed_principals", "allowed_roles", "tags", "entities"):
            strings = [s for v in pv for s in getattr(v, field)]
            assert len({id(s) for s in strings}) == len(set(strings))


def test_a_snapshot_row_ends_with_the_heat_as_before_the_heat_moved_out_of_the_view() -> None:
    """A row is the view's fields, then its heat ``[visits, last access, score]``: the layout snapshots had while the
    heat was a field of the view (its last one written), so a store's existing snapshots load as they are."""
    rng = random.Random(2)
    pv = PartitionViews(b"k" * 32)
    heats = {}
    for i in range(30):
        v = random_view(rng, i)
        heats[v.id] = random_heat(rng)
        pv.put(v, heats[v.id])
    for row in rows_of(pv.dump()):
        h = heats[row[0]]
        assert len(row) == len(View.__slots__)  # every field but the tombstone flag, then the heat
        assert row[-1] == [h.visits, h.last_access, h.score]
        assert View.from_json(row[:-1]) == pv.views[row[0]]
