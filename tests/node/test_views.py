"""Policy views (node.core.store.views): the cheap paths give what the general ones give."""

from __future__ import annotations

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


def lines_of(dump: bytes) -> tuple[dict[str, Any], list[Any], list[Any]]:
    """The header, shapes and rows of a dump (:meth:`PartitionViews.dump`)."""
    head, *lines = map(orjson.loads, dump.split(b"\n"))
    assert head == {"rows": len(lines) - head["shapes"], "shapes": head["shapes"]}
    return head, lines[: head["shapes"]], lines[head["shapes"] :]


def dump_of(shapes: list[Any], rows: list[Any], count: int | None = None, shape_count: int | None = None) -> bytes:
    """A dump of these shapes and rows, as :meth:`PartitionViews.dump` writes one (``count``, ``shape_count``: what
    its header says)."""
    head = {
        "rows": len(rows) if count is None else count,
        "shapes": len(shapes) if shape_count is None else shape_count,
    }
    return b"\n".join([orjson.dumps(head), *map(orjson.dumps, shapes), *map(orjson.dumps, rows)])


def rows_before(pv: PartitionViews) -> list[Any]:
    """The rows of ``pv``'s views in the format before shapes: all of a view's fields (:meth:`View.to_json`), then
    its heat; in the order a dump writes them."""
    _, _, rows = lines_of(pv.dump())
    return [[*pv.views[r[0]].to_json(), r[-1]] for r in rows]


def dump_before(rows: list[Any], count: int | None = None) -> bytes:
    """A dump of the format before shapes: a header ``{"rows": n}``, then a row of all of a view's fields per line."""
    head = orjson.dumps({"rows": len(rows) if count is None else count})
    return b"\n".join([head, *map(orjson.dumps, rows)])


def random_views(rng: random.Random, n: int) -> PartitionViews:
    pv = PartitionViews(b"k" * 32)
    for v in (random_view(rng, i) for i in range(n)):
        pv.put(v, random_heat(rng))
    return pv


def test_views_loaded_from_a_snapshot_are_the_views_put_one_by_one() -> None:
    """load (a snapshot's views, read in one pass) gives what putting each view gives: every grouping, the heat class
    in order, the digest and the epoch, whether the dump is bytes of its own or a part of a larger buffer (as the store
    reads it, in place); a row of another shape, an unknown enum value, an id given twice, a field of another type, a
    shape the snapshot does not have, a count that is not the rows' or the shapes', or no header is a ValueError or
    TypeError (the store rebuilds such a snapshot)."""
    rng = random.Random(1)
    for _ in range(10):
        put = random_views(rng, rng.randrange(1, 80))
        dump = put.dump()
        for data in (dump, memoryview(b"before" + dump + b"after")[6:-5]):
            loaded = PartitionViews.load(data, b"k" * 32)
            assert state(loaded) == state(put)
            # In the dump's order: the heat class in its order (so a load need not sort it), then the rest by id.
            hot = [i for _, i in put.hot_candidates()]
            assert [v.id for v in loaded] == hot + sorted(v.id for v in put if v.id not in set(hot))
            assert all(loaded.heat_of(v.id) == put.heat_of(v.id) for v in put)
    assert state(PartitionViews.load(PartitionViews(b"k" * 32).dump(), b"k" * 32)) == state(PartitionViews(b"k" * 32))
    _, shapes, rows = lines_of(put.dump())
    bad_dumps = [
        dump_of(shapes, [*rows, rows[0]]),
        dump_of(shapes, [rows[0][:-1]]),
        dump_of(shapes, [[]]),
        dump_of(shapes, [[7, *rows[0][1:]]]),  # an id that is not a string
        *(dump_of(shapes, [[rows[0][0], n, *rows[0][2:]]]) for n in (len(shapes), -1, "0", 0.0, True)),
        dump_of(shapes, [[*rows[0][:2], [1], *rows[0][3:]]]),  # a tag that is not a string
        dump_of([["no-such-type", *shapes[0][1:]], *shapes[1:]], rows),
        dump_of([[shapes[0][0], 7, *shapes[0][2:]], *shapes[1:]], rows),  # an owner that is not a string
        dump_of([shapes[0][:-1], *shapes[1:]], rows),
        dump_of(shapes, rows, len(rows) + 1),
        dump_of(shapes, rows, len(rows) - 1),
        dump_of(shapes, rows, shape_count=len(shapes) + 1),
        dump_of(shapes, rows, shape_count=-1),
        dump_of(shapes, rows, shape_count="1"),  # type: ignore[arg-type]
    ]
    for bad in bad_dumps:
        with pytest.raises((ValueError, TypeError)):
            PartitionViews.load(bad, b"k" * 32)
    for bad in (b"", b"\n".join(map(orjson.dumps, rows)), orjson.dumps({"rows": rows}), orjson.dumps({"rows": "1"})):
        with pytest.raises(ValueError):
            PartitionViews.load(bad, b"k" * 32)


def test_views_of_the_formats_before_load_as_they_were() -> None:
    """Snapshots written before the views had shapes (a row of all of a view's fields per line, its heat last), and
    before they were one row per line (one JSON list of such rows), load as they are: a store's existing snapshots
    are not rebuilt for either change. Their damaged rows are still a ValueError or TypeError."""
    rng = random.Random(3)
    for _ in range(5):
        put = random_views(rng, 60)
        rows = rows_before(put)
        assert state(PartitionViews.load(dump_before(rows), b"k" * 32)) == state(put)
        assert state(PartitionViews.load(orjson.dumps(rows), b"k" * 32)) == state(put)
    assert len(PartitionViews.load(orjson.dumps([]), b"k" * 32)) == 0
    assert len(PartitionViews.load(dump_before([]), b"k" * 32)) == 0
    bad_rows = [
        [*rows, rows[0]],
        [rows[0][:-1]],
        [[*rows[0][:1], "no-such-type", *rows[0][2:]]],
        [[*rows[0][:2], 7, *rows[0][3:]]],  # an owner that is not a string
        [[*rows[0][:14], [1], *rows[0][15:]]],  # a tag that is not a string
        [[7, *rows[0][1:]]],  # an id that is not a string
        [[]],
    ]
    for bad in [dump_before(r) for r in bad_rows] + [
        dump_before(rows, len(rows) + 1),
        dump_before(rows, len(rows) - 1),
    ]:
        with pytest.raises((ValueError, TypeError)):
            PartitionViews.load(bad, b"k" * 32)
    for bad_list in ([*rows, rows[0]], [[]], [7]):
        with pytest.raises(ValueError):
            PartitionViews.load(orjson.dumps(bad_list), b"k" * 32)


def test_views_share_the_strings_many_of_them_repeat() -> None:
    """Views put or loaded hold one string per distinct owner, tenant, segment, goal, source, reader, tag and entity,
    not a copy each (a million views repeat a few of them)."""
    rng = random.Random(4)
    made = [random_view(rng, i) for i in range(40)]
    copies = [
        v._replace(
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
    """A row of the format before shapes is the view's fields, then its heat ``[visits, last access, score]``: the
    layout snapshots had while the heat was a field of the view (its last one written), so a store's existing
    snapshots load as they are. A row of a dump now ends with the heat too, and a shape is written once per dump."""
    rng = random.Random(2)
    pv = PartitionViews(b"k" * 32)
    heats = {}
    for i in range(30):
        v = random_view(rng, i)
        for same in (v, v._replace(id=f"{i + 100:032x}")):  # another view of the same shape
            heats[same.id] = random_heat(rng)
            pv.put(same, heats[same.id])
    for row in rows_before(pv):
        h = heats[row[0]]
        assert len(row) == len(View._fields)  # every field but the tombstone flag, then the heat
        assert row[-1] == [h.visits, h.last_access, h.score]
        assert View.from_json(row[:-1]) == pv.views[row[0]]
    _, shapes, rows = lines_of(pv.dump())
    assert len(shapes) == len({tuple(map(repr, s)) for s in shapes}) <= len(rows) // 2
    for row in rows:
        h = heats[row[0]]
        assert row[-1] == [h.visits, h.last_access, h.score]


# A row as the versions before shapes wrote it (taken from a snapshot of the 1M bench memory): pinned here, apart
# from View.to_json, so that a change to the row of now cannot quietly stop existing snapshots from loading.
ROW_BEFORE = (
    b'["000007c8a9571bd37475b4ccd8deaaa5","event","alice","","user_private",[],[],"local_only","prohibited",'
    b'"approval_required","none",[0,0],"l0","",["tag-purfen","tag-ridorfenan","tag-sipur"],'
    b'["fendorkajo-25","halelpur-155"],1795602431311880,0,0,[],"unverified",0.5,0.858,"","",0,[],[],[2,1795602431311999,1.5]]'
)


def test_a_row_written_by_the_version_before_loads_as_the_view_it_was() -> None:
    """A dump of the format before shapes, byte for byte as it was written, loads (one row per line after
    ``{"rows": n}``, and one JSON list of rows) into the view and heat it held; the same view dumped now and loaded
    again is the same."""
    want = View(
        id="000007c8a9571bd37475b4ccd8deaaa5",
        asset_type=AssetType.EVENT,
        owner_id="alice",
        tenant_scope="",
        privacy_scope=PrivacyScope.USER_PRIVATE,
        allowed_principals=(),
        allowed_roles=(),
        inference_policy=InferencePolicy.LOCAL_ONLY,
        training_policy=TrainingPolicy.PROHIBITED,
        export_policy=ExportPolicy.APPROVAL_REQUIRED,
        replication_policy=ReplicationPolicy.NONE,
        retention_policy=Retention(),
        level=Level.L0,
        segment="",
        tags=("tag-purfen", "tag-ridorfenan", "tag-sipur"),
        entities=("fendorkajo-25", "halelpur-155"),
        created_at=1795602431311880,
        valid_from=0,
        valid_to=0,
        supersedes=(),
        trust_class=TrustClass.UNVERIFIED,
        provenance_score=0.5,
        confidence_score=0.858,
    )
    heat = Heat(2, 1795602431311999, 1.5)
    for data in (b'{"rows":1}\n' + ROW_BEFORE, b"[" + ROW_BEFORE + b"]"):
        pv = PartitionViews.load(data, b"k" * 32)
        assert list(pv) == [want] and pv.heat_of(want.id) == heat
        again = PartitionViews.load(pv.dump(), b"k" * 32)
        assert list(again) == [want] and again.heat_of(want.id) == heat
        assert state(again) == state(pv)
