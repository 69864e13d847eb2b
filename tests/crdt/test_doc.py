"""crdt.doc: an asset's record as an Automerge document: exact round trips, field-by-field merges, typed failures."""

from __future__ import annotations

import random
from typing import Any

import pytest
from automerge.core import ROOT, Document, ObjType, ScalarType
from hypothesis import given, settings
from hypothesis import strategies as st

from gaml.crdt.doc import AssetDoc
from gaml.crdt.errors import CorruptDoc
from gaml.policy.errors import GamlError, InvalidAsset
from gaml.policy.model import Asset, AssetType, canonical_json, content_id

A, B, C = b"\x0a" * 16, b"\x0b" * 16, b"\x0c" * 16
NOW = 1_700_000_000_000_000
_rng = random.Random(0)
TEXT = "".join(_rng.choice("abcdefghij klmnopqrstuvwxyz") for _ in range(200))


def typical() -> dict[str, Any]:
    """A typical record: 11 fields, a 200-character text payload, two sets."""
    return {
        "id": "0f" * 16,
        "asset_type": "fact",
        "payload": {"text": TEXT},
        "owner_id": "alice",
        "created_at": NOW,
        "updated_at": NOW,
        "version": 1,
        "confidence_score": 0.9,
        "privacy_scope": "trusted_devices",
        "tags": ["health", "travel"],
        "entities": ["alice", "paris"],
    }


VARIED: list[dict[str, Any]] = [
    {},
    typical(),
    {
        "payload": {
            "text": "héllo wörld ✓ 日本語 🎉",
            "nested": {"a": [1, 2.5, {"b": None, "c": [True, False]}], "z": {}},
            "f": 0.1,
            "g": 1.0,
            "neg": -0.0,
            "big": 2**53,
            "small": -(2**63),
            "list": ["b", "a", "b"],
            "empty_list": [],
            "empty_dict": {},
            "nul\x00key": "nul\x00value",
            "": "empty key",
        },
        "float": 0.1,
        "whole_float": 3.0,
        "int": 7,
        "zero": 0,
        "yes": True,
        "no": False,
        "none": None,
        "text": "",
        "unicode": "ünïcödé — “quotes” \\ / \u2028",
        "tags": ["a", "b", "z"],
        "one_tag": ["only"],
        "no_tags": [],
        "empty": {},
        "unsorted": ["b", "a"],
        "dupes": ["a", "a"],
        "mixed": ["a", 1, None],
        "ints": [3, 1, 2],
        "matrix": [[1, 2], [3, 4]],
        "dicts": [{"x": 1}, {"y": 2}],
        "retention_policy": {"ttl_s": 0, "legal_hold": False, "delete_after": None},
        "source": None,
        "": "a field named by the empty string",
    },
]


def exact(value: Any) -> str:
    """A type-exact comparison key: canonical JSON tells 1 from 1.0 and True from 1."""
    return canonical_json(value)


def doc_of(record: dict[str, Any], actor: bytes = A) -> AssetDoc:
    d = AssetDoc.new(actor)
    d.update(record)
    return d


def fork(d: AssetDoc, actor: bytes) -> AssetDoc:
    return AssetDoc.load(d.save(), actor)


def merged_both_ways(a: AssetDoc, b: AssetDoc) -> tuple[AssetDoc, AssetDoc]:
    """a.merge(b) and b.merge(a), each on a copy."""
    ab, ba = fork(a, C), fork(b, C)
    ab.merge(fork(b, B))
    ba.merge(fork(a, A))
    return ab, ba


# -- round trips ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("record", VARIED, ids=["empty", "typical", "varied"])
def test_round_trip_is_exact(record: dict[str, Any]) -> None:
    """record() after update(r) is r, with every type kept (0.1, 1.0, -0.0, True, None, unicode, empty containers)."""
    d = AssetDoc.new(A)
    assert d.update(record) is bool(record)
    assert d.record() == record
    assert exact(d.record()) == exact(record)
    loaded = AssetDoc.load(d.save(), B)
    assert exact(loaded.record()) == exact(record)
    assert loaded.heads() == d.heads()


def test_round_trip_of_a_real_asset() -> None:
    """The signed fields of a real Asset (to_dict(signed_only=True)) round-trip and rebuild the same Asset."""
    payload = {"text": TEXT, "score": 0.25, "items": ["x", "y"]}
    asset = Asset(
        id=content_id("fact", "alice", "", payload),
        asset_type=AssetType.FACT,
        payload=payload,
        owner_id="alice",
        created_at=NOW,
        tags=("travel", "health"),
        entities=("paris",),
    )
    record = asset.to_dict(signed_only=True)
    d = doc_of(record)
    assert exact(d.record()) == exact(record)
    assert Asset.from_dict(d.record()) == asset


def test_sorted_string_lists_are_sets_others_are_values() -> None:
    """A sorted list of distinct strings reads back sorted; an unsorted or duplicated one reads back as written."""
    d = doc_of({"s": ["a", "b"], "u": ["b", "a"], "d": ["a", "a"]})
    assert d.record() == {"d": ["a", "a"], "s": ["a", "b"], "u": ["b", "a"]}
    assert d.update({"s": ["b", "a"], "u": ["a", "b"], "d": ["a", "a"]})
    assert d.record() == {"d": ["a", "a"], "s": ["b", "a"], "u": ["a", "b"]}


def test_tuples_read_back_as_lists() -> None:
    """Tuples are stored as JSON arrays (sets when sorted strings), and read back as lists."""
    d = doc_of({"t": ("a", "b"), "n": (1, 2), "p": {"x": (1, "y")}})
    assert d.record() == {"n": [1, 2], "p": {"x": [1, "y"]}, "t": ["a", "b"]}


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=8).filter(lambda s: "\x00" not in s),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers(-(2**63), 2**64 - 1)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(max_size=20),
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
            max_leaves=12,
        ),
        max_size=8,
    )
)
def test_round_trip_any_json_record(record: dict[str, Any]) -> None:
    """Any record of JSON values (finite floats, 64-bit ints, nested containers) round-trips exactly, saved or not."""
    d = AssetDoc.new(A)
    d.update(record)
    assert exact(d.record()) == exact(record)
    assert exact(AssetDoc.load(d.save(), B).record()) == exact(record)
    assert d.update(record) is False


# -- updates -------------------------------------------------------------------------------------------------------


def test_update_with_the_same_record_changes_nothing() -> None:
    """update(r) again returns False and leaves heads and saved bytes unchanged."""
    for record in VARIED[1:]:
        d = doc_of(record)
        heads, saved = d.heads(), d.save()
        assert d.update(dict(record)) is False
        assert d.heads() == heads and d.save() == saved


def test_update_writes_only_the_differences() -> None:
    """Changing one small field adds a change a few dozen bytes long, not a copy of the record's 2,000-char text."""
    record = dict(typical(), payload={"text": TEXT * 10})
    d = doc_of(record)
    before = len(d.save())
    assert d.update(dict(record, version=2))
    assert d.record()["version"] == 2
    assert len(d.save()) - before < 100
    assert len(d.heads()) == 1


def test_update_removes_fields_entries_and_elements() -> None:
    """Fields, dict entries and set elements missing from the new record are removed; emptied containers remain."""
    d = doc_of({"a": 1, "p": {"x": 1, "y": 2}, "t": ["a", "b"], "gone": "x"})
    assert d.update({"a": 1, "p": {"y": 2}, "t": ["b"]})
    assert d.record() == {"a": 1, "p": {"y": 2}, "t": ["b"]}
    assert d.update({"a": 1, "p": {}, "t": []})
    assert exact(d.record()) == exact({"a": 1, "p": {}, "t": []})
    assert d.update({})
    assert d.record() == {}


def test_update_changes_a_fields_kind() -> None:
    """A field may change kind (None -> dict -> set -> scalar) and reads back as the latest kind only."""
    d = AssetDoc.new(A)
    for value in (None, {"source_id": "s", "start": 0}, ["a", "b"], "x", [], {}, 0.5):
        d.update({"source": value})
        assert exact(d.record()) == exact({"source": value})


@pytest.mark.parametrize(
    "record",
    [
        {"x": float("nan")},
        {"x": float("inf")},
        {"p": {"x": -float("inf")}},
        {"x": b"bytes"},
        {"x": {1, 2}},
        {"x": {1: "non-string key"}},
        {"p": {"x": {2: 3}}},
        {"bad\x00field": 1},
        {"x": 2**64},
        {"x": object()},
    ],
)
def test_update_refuses_what_json_cannot_hold(record: dict[str, Any]) -> None:
    """NaN, infinities, bytes, sets, non-string keys, NUL in a field name, huge ints: InvalidAsset, and no change."""
    d = doc_of({"keep": 1})
    heads = d.heads()
    with pytest.raises(InvalidAsset):
        d.update(record)
    assert d.heads() == heads and d.record() == {"keep": 1}


def test_update_refuses_a_non_mapping() -> None:
    """A record is a mapping; a list is refused with InvalidAsset."""
    with pytest.raises(InvalidAsset):
        AssetDoc.new(A).update([("a", 1)])  # type: ignore[arg-type]


def test_actor_is_16_bytes() -> None:
    """new and load refuse an actor id that is not 16 bytes."""
    saved = doc_of({"a": 1}).save()
    for actor in (b"", b"\x01" * 15, b"\x01" * 17, "0" * 16):
        with pytest.raises(GamlError):
            AssetDoc.new(actor)  # type: ignore[arg-type]
        with pytest.raises(GamlError):
            AssetDoc.load(saved, actor)  # type: ignore[arg-type]


# -- concurrent edits ----------------------------------------------------------------------------------------------


def concurrent(edit_a: dict[str, Any], edit_b: dict[str, Any], base: dict[str, Any] | None = None) -> AssetDoc:
    """Two forks of one document edited concurrently, merged both ways: both orders give one record and heads."""
    origin = doc_of(base if base is not None else typical(), C)
    a, b = fork(origin, A), fork(origin, B)
    a.update(edit_a)
    b.update(edit_b)
    ab, ba = merged_both_ways(a, b)
    assert ab.record() == ba.record()
    assert exact(ab.record()) == exact(ba.record())
    assert ab.heads() == ba.heads() and len(ab.heads()) == 2
    return ab


def test_concurrent_edits_of_different_fields_both_survive() -> None:
    """One replica changes version, the other confidence_score: the merge has both."""
    base = typical()
    m = concurrent(dict(base, version=2), dict(base, confidence_score=0.5))
    assert m.record() == dict(base, version=2, confidence_score=0.5)


def test_concurrent_edits_of_different_payload_keys_both_survive() -> None:
    """Edits of two keys of the payload merge key by key."""
    base = dict(typical(), payload={"text": TEXT, "n": 1})
    m = concurrent(dict(base, payload={"text": "new", "n": 1}), dict(base, payload={"text": TEXT, "n": 2}), base)
    assert m.record()["payload"] == {"text": "new", "n": 2}


def test_concurrent_edits_of_the_same_payload_key_pick_one() -> None:
    """Both replicas set payload.text: one value wins, the same on every replica, and nothing else is lost."""
    base = typical()
    m = concurrent(dict(base, payload={"text": "from a"}), dict(base, payload={"text": "from b"}, version=9))
    assert m.record()["payload"]["text"] in ("from a", "from b")
    assert m.record()["version"] == 9


def test_concurrent_tag_additions_both_survive() -> None:
    """A tag added on each replica: both are in the merge, sorted."""
    base = typical()
    m = concurrent(dict(base, tags=["health", "sport", "travel"]), dict(base, tags=["art", "health", "travel"]))
    assert m.record()["tags"] == ["art", "health", "sport", "travel"]


def test_concurrent_tag_removal_and_addition() -> None:
    """A tag removed on one replica and another added on the other: the removal and the addition both apply."""
    base = typical()
    m = concurrent(dict(base, tags=["travel"]), dict(base, tags=["health", "travel", "zoo"]))
    assert m.record()["tags"] == ["travel", "zoo"]


def test_concurrent_removal_of_a_field_and_edit_of_another() -> None:
    """A field removed on one replica and another edited on the other: both apply."""
    base = typical()
    without = {k: v for k, v in base.items() if k != "entities"}
    m = concurrent(without, dict(base, version=3))
    assert m.record() == dict(without, version=3)


def test_concurrent_kind_changes_resolve_the_same_everywhere() -> None:
    """source set to a dict on one replica and to a string on the other: every replica reads the same value."""
    base = dict(typical(), source=None)
    m = concurrent(dict(base, source={"source_id": "s"}), dict(base, source="text"), base)
    assert m.record()["source"] == "text"  # a scalar outranks a dict when both are present
    assert m.update(m.record())  # the next update removes the other kind's keys
    assert m.update(m.record()) is False


def test_independent_documents_of_one_asset_merge_field_by_field() -> None:
    """Two nodes that create the same asset's document independently: their dict entries and tags all survive."""
    a = doc_of({"payload": {"x": 1}, "tags": ["a"]}, A)
    b = doc_of({"payload": {"y": 2}, "tags": ["b"]}, B)
    ab, ba = merged_both_ways(a, b)
    assert ab.record() == ba.record() == {"payload": {"x": 1, "y": 2}, "tags": ["a", "b"]}


def test_merge_is_idempotent_and_reports_change() -> None:
    """merge returns True when heads change, False when merged again, with self, or with an ancestor."""
    origin = doc_of(typical(), C)
    a, b = fork(origin, A), fork(origin, B)
    b.update(dict(typical(), version=5))
    assert a.merge(b) is True
    heads, record = a.heads(), a.record()
    assert a.merge(b) is False and a.merge(fork(b, C)) is False
    assert a.merge(a) is False
    assert a.merge(origin) is False
    assert a.heads() == heads and a.record() == record == dict(typical(), version=5)


def test_merge_of_three_replicas_in_any_order() -> None:
    """Three replicas' concurrent edits merged in every order give one record and one set of heads."""
    origin = doc_of(typical(), C)
    edits = [
        (A, dict(typical(), tags=["health", "travel", "x"])),
        (B, dict(typical(), payload={"text": "b"}, version=2)),
        (b"\x0d" * 16, dict(typical(), entities=["alice"])),
    ]
    replicas = []
    for actor, record in edits:
        r = fork(origin, actor)
        r.update(record)
        replicas.append(r)
    results = set()
    for order in ((0, 1, 2), (2, 1, 0), (1, 0, 2), (1, 2, 0)):
        m = fork(replicas[order[0]], C)
        for i in order[1:]:
            m.merge(replicas[i])
        results.add((exact(m.record()), m.heads()))
    assert len(results) == 1
    ((record_text, heads),) = results
    assert len(heads) == 3
    assert record_text == exact(
        dict(typical(), tags=["health", "travel", "x"], payload={"text": "b"}, version=2, entities=["alice"])
    )


def test_merge_continues_editing_as_own_actor() -> None:
    """After a merge, edits are this document's actor's: merging them back into the other replica works."""
    a, b = doc_of({"n": 1}, A), fork(doc_of({"n": 1}, A), B)
    b.update({"n": 2})
    a.merge(b)
    a.update({"n": 3})
    assert b.merge(a) and b.record() == {"n": 3} and b.heads() == a.heads()


def test_merge_refuses_two_histories_of_one_actor() -> None:
    """Two documents made with one actor (a lost document remade) cannot merge: CorruptDoc, and nothing changes."""
    a, again = doc_of({"n": 1}, A), doc_of({"n": 2}, A)
    heads = a.heads()
    with pytest.raises(CorruptDoc, match="merged"):
        a.merge(again)
    assert a.heads() == heads and a.record() == {"n": 1}


# -- heads and contains --------------------------------------------------------------------------------------------


def test_heads_are_sorted_and_contains_checks_history() -> None:
    """heads() is sorted; contains() is true for any past heads, false for unknown or concurrent ones."""
    origin = doc_of(typical(), C)
    a, b = fork(origin, A), fork(origin, B)
    old = a.heads()
    a.update(dict(typical(), version=2))
    b.update(dict(typical(), version=3))
    assert a.contains(old) and a.contains(a.heads()) and a.contains([])
    assert not a.contains(b.heads()) and not origin.contains(a.heads())
    assert not a.contains([b"\x00" * 32])
    a.merge(b)
    assert list(a.heads()) == sorted(a.heads()) and len(a.heads()) == 2
    assert a.contains(b.heads()) and a.contains(old) and AssetDoc.load(a.save(), C).contains(b.heads())
    assert AssetDoc.new(A).heads() == ()


# -- save and load -------------------------------------------------------------------------------------------------


def test_save_and_load_round_trip() -> None:
    """A loaded document has the same record and heads, saves the same bytes, and keeps its history."""
    d = doc_of(typical())
    first = d.heads()
    d.update(dict(typical(), version=2))
    loaded = AssetDoc.load(d.save(), B)
    assert loaded.record() == d.record() and loaded.heads() == d.heads()
    assert loaded.save() == d.save()
    assert loaded.contains(first)
    assert "AssetDoc(" in repr(loaded) and TEXT not in repr(loaded)


def test_saved_sizes() -> None:
    """A typical record saves to under 700 bytes; five edits (versions, tags, a new 200-char text) add under 1 KiB."""
    d = doc_of(typical())
    first = len(d.save())
    record = typical()
    rng = random.Random(1)
    for i in range(5):
        text = "".join(rng.choice("abcdefghij klmnopqrstuvwxyz") for _ in range(200))
        tags = [*record["tags"], f"t{i}"]
        record = dict(record, version=i + 2, updated_at=NOW + i, payload={"text": text}, tags=tags)
        d.update(record)
    assert first < 700
    assert len(d.save()) - first < 1024


def test_load_refuses_garbage() -> None:
    """Empty bytes, non-bytes, every prefix and every bit flip of a saved document: CorruptDoc, nothing else."""
    saved = doc_of(typical()).save()
    for data in (b"", b"\x00", b"garbage", b"\x85oJ\x83", saved + b"\x00", "text", None, bytearray(saved)):
        with pytest.raises(CorruptDoc):
            AssetDoc.load(data, A)  # type: ignore[arg-type]
    for n in range(len(saved)):
        with pytest.raises(CorruptDoc):
            AssetDoc.load(saved[:n], A)
    bit = random.Random(2)
    for i in range(len(saved)):
        flipped = bytearray(saved)
        flipped[i] ^= 1 << bit.randrange(8)
        with pytest.raises(CorruptDoc):
            AssetDoc.load(bytes(flipped), A)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_load_of_random_bytes_raises_only_corrupt_doc(data: bytes) -> None:
    """Random bytes never load, and never raise anything but CorruptDoc."""
    with pytest.raises(CorruptDoc):
        AssetDoc.load(data, A)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.data())
def test_load_of_mutated_documents_raises_only_corrupt_doc(data: st.DataObject) -> None:
    """A saved document with random bytes overwritten, inserted or cut either loads unchanged or raises CorruptDoc."""
    saved = doc_of(typical()).save()
    start = data.draw(st.integers(0, len(saved)))
    cut = data.draw(st.integers(0, 8))
    patch = data.draw(st.binary(max_size=8))
    mutated = saved[:start] + patch + saved[start + cut :]
    if mutated == saved:
        assert AssetDoc.load(mutated, A).record() == typical()
        return
    with pytest.raises(CorruptDoc):
        AssetDoc.load(mutated, A)


def foreign(build: Any) -> bytes:
    """A valid Automerge document that does not follow the record layout."""
    doc = Document(actor_id=b"\x0f" * 16)
    with doc.transaction() as tx:
        build(tx)
    return doc.save()


@pytest.mark.parametrize(
    "build",
    [
        lambda tx: tx.put_object(ROOT, "=x", ObjType.Map),
        lambda tx: tx.put(ROOT, "=x", ScalarType.Int, 1),
        lambda tx: tx.put(ROOT, "=x", ScalarType.Str, "not json"),
        lambda tx: tx.put(ROOT, "x", ScalarType.Str, "1"),
        lambda tx: tx.put(ROOT, "=x\x00y", ScalarType.Str, "1"),
        lambda tx: tx.put(ROOT, "[x\x00y", ScalarType.Boolean, False),
        lambda tx: tx.put(ROOT, "[x\x00y", ScalarType.Str, "true"),
        lambda tx: tx.put(ROOT, "{x", ScalarType.Str, "marker with text"),
        lambda tx: tx.put(ROOT, "{x\x00k", ScalarType.Bytes, b"\x00"),
    ],
)
def test_load_refuses_documents_that_hold_no_record(build: Any) -> None:
    """An Automerge document outside the layout (objects, other scalar types, unknown keys, bad JSON): CorruptDoc."""
    with pytest.raises(CorruptDoc):
        AssetDoc.load(foreign(build), A)


def test_merge_refuses_a_result_that_holds_no_record() -> None:
    """A merge whose result would not materialize (a key made an object) raises CorruptDoc and changes nothing."""
    base = doc_of({"x": 1}, A)
    other = Document.load(base.save())
    other.set_actor(b"\x0e" * 16)
    with other.transaction() as tx:
        tx.put_object(ROOT, "=x", ObjType.Map)
    hostile = AssetDoc.__new__(AssetDoc)
    AssetDoc.__init__(hostile, other, b"\x0e" * 16)  # bypasses load's check, as a hidden conflict could
    heads = base.heads()
    with pytest.raises(CorruptDoc):
        base.merge(hostile)
    assert base.heads() == heads and base.record() == {"x": 1}
