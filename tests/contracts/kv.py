"""The :class:`node.kv.KV` contract, shared by ``MemoryKV`` (the fake) and ``RocksKV`` (the real adapter).

Each ``check_*`` function takes ``make_kv``, a zero-argument factory that returns a new, empty, open store, and asserts
one behaviour (its docstring). ``KV_CHECKS`` lists them all; ``check_kv(make_kv)`` runs them in order. The caller owns
cleanup: a factory that opens files should close what it opened when the test ends.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest

from gaml.node.core.store.kv import KV, SPACES, Delete, Op, Put, prefix_end
from gaml.policy.errors import StoreClosed, StoreError

MakeKV = Callable[[], KV]
Model = dict[str, dict[bytes, bytes]]

# Keys that sort at the edges of byte order: the empty key, NUL bytes and 0xff bytes.
EDGE_KEYS = (
    b"",
    b"\x00",
    b"\x00\x00",
    b"\x00\xff",
    b"\x01",
    b"a",
    b"a\x00",
    b"a\xff",
    b"a\xff\x00",
    b"a\xff\xff",
    b"b",
    b"\xfe\xff",
    b"\xff",
    b"\xff\x00",
    b"\xff\xff",
    b"\xff\xff\xff",
)


# -- helpers -----------------------------------------------------------------------------------------------------


def snapshot(kv: KV, spaces: Iterable[str] = SPACES) -> Model:
    """Every pair of every space, read through ``load_range``."""
    return {s: dict(kv.load_range(s)) for s in spaces}


def model_range(
    d: dict[bytes, bytes], start: bytes = b"", end: bytes | None = None, reverse: bool = False, limit: int | None = None
) -> list[tuple[bytes, bytes]]:
    """What ``load_range`` must return, computed from a plain dict."""
    keys = sorted(k for k in d if k >= start and (end is None or k < end))
    if reverse:
        keys.reverse()
    if limit is not None:
        keys = keys[:limit]
    return [(k, d[k]) for k in keys]


def apply_model(model: Model, ops: Sequence[Op]) -> None:
    for op in ops:
        if isinstance(op, Put):
            model[op.space][op.key] = op.value
        else:
            model[op.space].pop(op.key, None)


def fill(kv: KV, pairs: dict[str, dict[bytes, bytes]]) -> None:
    kv.commit([Put(s, k, v) for s, d in pairs.items() for k, v in d.items()])


# -- checks ------------------------------------------------------------------------------------------------------


def check_load_missing(make_kv: MakeKV) -> None:
    """Loading a key that was never written gives None in every space, and an empty range scan gives nothing."""
    kv = make_kv()
    for space in SPACES:
        assert kv.load(space, b"absent") is None
        assert kv.load(space, b"") is None
        assert kv.load_many(space, [b"absent", b"\x00"]) == [None, None]
        assert list(kv.load_range(space)) == []


def check_unknown_space(make_kv: MakeKV) -> None:
    """Reads from a space that does not exist raise StoreError (not KeyError)."""
    kv = make_kv()
    with pytest.raises(StoreError):
        kv.load("nope", b"k")
    with pytest.raises(StoreError):
        kv.load_many("nope", [b"k"])
    with pytest.raises(StoreError):
        list(kv.load_range("nope"))


def check_commit_across_spaces(make_kv: MakeKV) -> None:
    """One commit applies puts and deletes in several spaces; other spaces and keys are untouched."""
    kv = make_kv()
    fill(kv, {"assets": {b"a1": b"x", b"a2": b"y"}, "index": {b"i1": b"z"}, "meta": {b"m": b"0"}})
    kv.commit(
        [
            Put("assets", b"a3", b"new"),
            Delete("assets", b"a1"),
            Put("edges", b"e1", b"edge"),
            Delete("index", b"i1"),
            Put("journal", b"\x00" * 8, b"entry"),
            Put("meta", b"m", b"1"),
        ]
    )
    assert snapshot(kv) == {
        "assets": {b"a2": b"y", b"a3": b"new"},
        "index": {},
        "edges": {b"e1": b"edge"},
        "journal": {b"\x00" * 8: b"entry"},
        "vectors": {},
        "access": {},
        "meta": {b"m": b"1"},
    }
    # The same key in different spaces holds different values.
    kv.commit([Put(s, b"same", s.encode()) for s in SPACES])
    assert [kv.load(s, b"same") for s in SPACES] == [s.encode() for s in SPACES]


def check_empty_commit(make_kv: MakeKV) -> None:
    """An empty commit is accepted and changes nothing."""
    kv = make_kv()
    fill(kv, {"assets": {b"k": b"v"}})
    kv.commit([])
    kv.commit([], sync=False)
    assert snapshot(kv) == {**{s: {} for s in SPACES}, "assets": {b"k": b"v"}}


def check_ops_apply_in_order(make_kv: MakeKV) -> None:
    """Ops on the same key within one commit apply in order: the last one wins (whatever other keys and spaces the
    ops on it are interleaved with, and in whatever key order the commit lists them)."""
    kv = make_kv()
    fill(kv, {"assets": {b"d-then-p": b"old", b"p-then-d": b"old"}})
    kv.commit(
        [
            Put("index", b"z", b"1"),
            Put("assets", b"twice", b"first"),
            Put("index", b"a", b"1"),
            Delete("index", b"z"),
            Put("index", b"z", b"2"),
            Delete("index", b"a"),
            Put("assets", b"twice", b"second"),
            Delete("assets", b"d-then-p"),
            Put("assets", b"d-then-p", b"back"),
            Put("assets", b"p-then-d", b"gone"),
            Delete("assets", b"p-then-d"),
            Put("assets", b"fresh-then-d", b"x"),
            Delete("assets", b"fresh-then-d"),
        ]
    )
    assert dict(kv.load_range("assets")) == {b"twice": b"second", b"d-then-p": b"back"}
    assert dict(kv.load_range("index")) == {b"z": b"2"}


BAD_OPS: tuple[tuple[str, Any], ...] = (
    ("unknown space put", Put("nope", b"k", b"v")),
    ("unknown space delete", Delete("nope", b"k")),
    ("str key", Put("assets", "k", b"v")),  # type: ignore[arg-type]
    ("bytearray key", Put("assets", bytearray(b"k"), b"v")),  # type: ignore[arg-type]
    ("int key", Put("assets", 1, b"v")),  # type: ignore[arg-type]
    ("str value", Put("assets", b"k", "v")),  # type: ignore[arg-type]
    ("None value", Put("assets", b"k", None)),  # type: ignore[arg-type]
    ("str key delete", Delete("assets", "k")),  # type: ignore[arg-type]
    ("not an op", ("assets", b"k", b"v")),
)


def check_invalid_batch_applies_nothing(make_kv: MakeKV) -> None:
    """An invalid op anywhere in a batch raises StoreError and applies none of the batch, in any space."""
    kv = make_kv()
    fill(kv, {"assets": {b"a": b"1", b"b": b"2"}, "index": {b"i": b"3"}, "meta": {b"m": b"4"}})
    before = snapshot(kv)
    good: list[Any] = [
        Put("assets", b"a", b"overwritten"),
        Put("assets", b"c", b"new"),
        Delete("assets", b"b"),
        Put("edges", b"e", b"new"),
        Delete("index", b"i"),
        Put("meta", b"m", b"changed"),
    ]
    for name, bad in BAD_OPS:
        for pos in (0, len(good) // 2, len(good)):
            batch = [*good[:pos], bad, *good[pos:]]
            with pytest.raises(StoreError):
                kv.commit(batch)
            assert snapshot(kv) == before, f"{name} at position {pos} left a partial write"
    # The store is still usable afterwards.
    kv.commit(good)
    assert kv.load("assets", b"c") == b"new"


def check_load_many(make_kv: MakeKV) -> None:
    """load_many returns values in the order asked, None for missing keys, repeats included."""
    kv = make_kv()
    fill(kv, {"assets": {b"a": b"1", b"b": b"2", b"\x00": b"nul", b"\xff": b"ff"}})
    assert kv.load_many("assets", []) == []
    assert kv.load_many("assets", [b"b", b"missing", b"a", b"\xff", b"b", b"\x00", b""]) == [
        b"2",
        None,
        b"1",
        b"ff",
        b"2",
        b"nul",
        None,
    ]
    assert kv.load_many("index", [b"a", b"b"]) == [None, None]


def check_overwrite_and_empty_value(make_kv: MakeKV) -> None:
    """A put overwrites the previous value; an empty value is stored and read back as b'', not None."""
    kv = make_kv()
    kv.commit([Put("assets", b"k", b"one")])
    kv.commit([Put("assets", b"k", b"two")])
    assert kv.load("assets", b"k") == b"two"
    kv.commit([Put("assets", b"k", b"")])
    assert kv.load("assets", b"k") == b""
    assert kv.load_many("assets", [b"k"]) == [b""]
    assert list(kv.load_range("assets")) == [(b"k", b"")]


def check_delete_absent_key(make_kv: MakeKV) -> None:
    """Deleting a key that does not exist is accepted and changes nothing; deleting twice is fine."""
    kv = make_kv()
    fill(kv, {"assets": {b"keep": b"v"}})
    kv.commit([Delete("assets", b"never"), Delete("index", b"never")])
    kv.commit([Delete("assets", b"keep")])
    kv.commit([Delete("assets", b"keep")])
    assert kv.load("assets", b"keep") is None
    assert snapshot(kv) == {s: {} for s in SPACES}


def check_range_bounds(make_kv: MakeKV) -> None:
    """load_range yields start <= key < end in key order; start is inclusive, end exclusive, both optional."""
    kv = make_kv()
    d = {bytes([c]): bytes([c]) * 2 for c in b"bdfhj"}
    fill(kv, {"assets": d})

    def r(**kw: Any) -> list[tuple[bytes, bytes]]:
        return list(kv.load_range("assets", **kw))

    assert r() == model_range(d)
    assert [k for k, _ in r()] == [b"b", b"d", b"f", b"h", b"j"]
    assert [k for k, _ in r(start=b"d")] == [b"d", b"f", b"h", b"j"]  # inclusive start on a key
    assert [k for k, _ in r(start=b"c")] == [b"d", b"f", b"h", b"j"]  # start between keys
    assert [k for k, _ in r(end=b"f")] == [b"b", b"d"]  # exclusive end on a key
    assert [k for k, _ in r(end=b"g")] == [b"b", b"d", b"f"]  # end between keys
    assert [k for k, _ in r(start=b"d", end=b"h")] == [b"d", b"f"]
    assert [k for k, _ in r(start=b"d", end=b"d\x00")] == [b"d"]
    assert [k for k, _ in r(start=b"a", end=b"z")] == [b"b", b"d", b"f", b"h", b"j"]
    assert [k for k, _ in r(start=b"k")] == []
    assert [k for k, _ in r(end=b"b")] == []


def check_range_reverse(make_kv: MakeKV) -> None:
    """With reverse=True, load_range yields the same bounded set in descending key order."""
    kv = make_kv()
    d = {bytes([c]): bytes([c]) for c in b"bdfhj"}
    fill(kv, {"assets": d, "index": {b"a": b"other space"}, "edges": {b"z": b"other space"}})
    cases = [
        {},
        {"start": b"d"},
        {"start": b"c"},
        {"end": b"f"},
        {"end": b"g"},
        {"start": b"d", "end": b"h"},
        {"start": b"c", "end": b"i"},
        {"end": b"a"},
        {"start": b"k"},
        {"end": b"\xff"},
    ]
    for kw in cases:
        got = list(kv.load_range("assets", reverse=True, **kw))
        assert got == model_range(d, reverse=True, **kw), kw
        assert got == list(kv.load_range("assets", **kw))[::-1], kw


def check_range_limit(make_kv: MakeKV) -> None:
    """limit caps the number of pairs, counted from the first key in the scan's direction; 0 yields nothing."""
    kv = make_kv()
    d = {bytes([c]): b"v" for c in b"abcdefgh"}
    fill(kv, {"assets": d})
    for reverse in (False, True):
        for limit in (0, 1, 3, 8, 100):
            for start, end in ((b"", None), (b"c", b"g"), (b"b\x00", b"h")):
                got = list(kv.load_range("assets", start, end, reverse=reverse, limit=limit))
                assert got == model_range(d, start, end, reverse, limit), (start, end, reverse, limit)
    assert [k for k, _ in kv.load_range("assets", limit=2)] == [b"a", b"b"]
    assert [k for k, _ in kv.load_range("assets", reverse=True, limit=2)] == [b"h", b"g"]


def check_negative_limit_yields_nothing(make_kv: MakeKV) -> None:
    """A negative limit is never a Python slice: the scan yields nothing (or the call is refused)."""
    kv = make_kv()
    fill(kv, {"assets": {bytes([c]): b"v" for c in b"abc"}})
    for reverse in (False, True):
        try:
            got = list(kv.load_range("assets", reverse=reverse, limit=-1))
        except (StoreError, ValueError):
            continue
        assert got == [], f"limit=-1 (reverse={reverse}) yielded {got}"


def check_empty_ranges(make_kv: MakeKV) -> None:
    """A range with start == end, start > end, or no keys inside yields nothing, in both directions."""
    kv = make_kv()
    fill(kv, {"assets": {b"a": b"1", b"m": b"2", b"z": b"3"}})
    for reverse in (False, True):
        assert list(kv.load_range("assets", b"m", b"m", reverse=reverse)) == []
        assert list(kv.load_range("assets", b"z", b"a", reverse=reverse)) == []
        assert list(kv.load_range("assets", b"b", b"l", reverse=reverse)) == []
        assert list(kv.load_range("assets", b"z\x00", reverse=reverse)) == []
        assert list(kv.load_range("index", reverse=reverse)) == []


def check_edge_byte_keys(make_kv: MakeKV) -> None:
    """Keys with 0x00 and 0xff bytes (and the empty key) round-trip and sort bytewise."""
    kv = make_kv()
    d = {k: b"v" + k for k in EDGE_KEYS}
    fill(kv, {"assets": d})
    assert [k for k, _ in kv.load_range("assets")] == sorted(EDGE_KEYS)
    assert [k for k, _ in kv.load_range("assets", reverse=True)] == sorted(EDGE_KEYS, reverse=True)
    for k in EDGE_KEYS:
        assert kv.load("assets", k) == b"v" + k
    assert kv.load_many("assets", list(EDGE_KEYS)) == [b"v" + k for k in EDGE_KEYS]
    for start in EDGE_KEYS:
        for end in (*EDGE_KEYS, None):
            for reverse in (False, True):
                got = list(kv.load_range("assets", start, end, reverse=reverse))
                assert got == model_range(d, start, end, reverse), (start, end, reverse)


def check_prefix_scans(make_kv: MakeKV) -> None:
    """A scan over [prefix, prefix_end(prefix)) yields exactly the keys with that prefix, even ending in 0xff."""
    kv = make_kv()
    d = {k: k for k in EDGE_KEYS}
    fill(kv, {"assets": d})
    prefixes = [b"", b"\x00", b"a", b"a\xff", b"a\xff\xff", b"\xfe", b"\xff", b"\xff\xff", b"\xff\xff\xff", b"q"]
    for prefix in prefixes:
        want = sorted(k for k in EDGE_KEYS if k.startswith(prefix))
        end = prefix_end(prefix)
        for reverse in (False, True):
            got = [k for k, _ in kv.load_range("assets", prefix, end, reverse=reverse)]
            assert got == (want[::-1] if reverse else want), (prefix, reverse)


def check_scan_is_a_snapshot(make_kv: MakeKV) -> None:
    """A scan in progress is not disturbed by a commit: it yields the pairs as they were when it started."""
    kv = make_kv()
    d = {bytes([i]): b"old" for i in range(6)}
    fill(kv, {"assets": d})
    scan = kv.load_range("assets")
    first = next(scan)
    kv.commit([Delete("assets", b"\x03"), Put("assets", b"\x02", b"new"), Put("assets", b"\x01\x00", b"ins")])
    assert [first, *scan] == model_range(d)


def check_reads_refuse_non_bytes_keys(make_kv: MakeKV) -> None:
    """Reads with a key or bound that is not bytes raise StoreError, as commits do (the fake as strict as RocksDB)."""
    kv = make_kv()
    fill(kv, {"assets": {b"k": b"v"}})
    for bad in ("k", None, bytearray(b"k"), 7):
        with pytest.raises(StoreError):
            kv.load("assets", bad)  # type: ignore[arg-type]
        with pytest.raises(StoreError):
            kv.load_many("assets", [b"k", bad])  # type: ignore[list-item]
        with pytest.raises(StoreError):
            list(kv.load_range("assets", bad))  # type: ignore[arg-type]
        if bad is not None:  # end=None means "no upper bound"
            with pytest.raises(StoreError):
                list(kv.load_range("assets", b"", bad))  # type: ignore[arg-type]


def check_closed(make_kv: MakeKV) -> None:
    """After close(), every operation raises StoreClosed; close() again is harmless."""
    kv = make_kv()
    fill(kv, {"assets": {b"k": b"v"}})
    kv.close()
    with pytest.raises(StoreClosed):
        kv.load("assets", b"k")
    with pytest.raises(StoreClosed):
        kv.load_many("assets", [b"k"])
    with pytest.raises(StoreClosed):
        list(kv.load_range("assets"))
    with pytest.raises(StoreClosed):
        kv.commit([Put("assets", b"k2", b"v")])
    with pytest.raises(StoreClosed):
        kv.commit([])
    kv.close()


def check_scan_resumed_after_close(make_kv: MakeKV) -> None:
    """A scan suspended when close() is called raises StoreClosed when resumed; it yields no more pairs."""
    kv = make_kv()
    fill(kv, {"assets": {bytes([i]): b"v" for i in range(5)}})
    scan = kv.load_range("assets")
    assert next(scan) == (b"\x00", b"v")
    kv.close()
    with pytest.raises(StoreClosed):
        next(scan)


def check_random_against_model(make_kv: MakeKV) -> None:
    """500 seeded random commits leave the store equal to a dict model, and every range scan agrees with it."""
    rng = random.Random(0)
    kv = make_kv()
    spaces = ("assets", "index", "meta")
    model: Model = {s: {} for s in SPACES}
    alphabet = (0x00, 0x01, 0x7F, 0xFE, 0xFF)

    def key() -> bytes:
        return bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))

    def random_scan() -> None:
        space = rng.choice(spaces)
        start = key()
        end = None if rng.random() < 0.3 else key()
        reverse = rng.random() < 0.5
        limit = None if rng.random() < 0.5 else rng.randint(0, 10)
        got = list(kv.load_range(space, start, end, reverse=reverse, limit=limit))
        assert got == model_range(model[space], start, end, reverse, limit), (space, start, end, reverse, limit)

    for i in range(500):
        ops: list[Op] = []
        for _ in range(rng.randint(1, 8)):
            space = rng.choice(spaces)
            if rng.random() < 0.65:
                ops.append(Put(space, key(), rng.randbytes(rng.randint(0, 12))))
            else:
                ops.append(Delete(space, key()))
        kv.commit(ops, sync=rng.random() < 0.5)
        apply_model(model, ops)
        if i % 25 == 0:
            random_scan()
            space = rng.choice(spaces)
            probe = [key() for _ in range(5)]
            assert kv.load_many(space, probe) == [model[space].get(k) for k in probe]
    assert snapshot(kv) == model
    for space in spaces:
        for k in model[space]:
            assert kv.load(space, k) == model[space][k]
    for _ in range(300):
        random_scan()


def check_purge_keeps_live_data(make_kv: MakeKV) -> None:
    """purge() changes no visible value: live keys keep their latest value, deleted keys stay deleted; an unknown
    space is refused and a closed store raises StoreClosed."""
    kv = make_kv()
    kv.commit([Put("assets", b"a", b"1"), Put("assets", b"b", b"2"), Put("vectors", b"v", b"3")])
    kv.commit([Put("assets", b"a", b"1b"), Delete("assets", b"b")])
    before = snapshot(kv)
    kv.purge({"assets": [b"a", b"b", b"missing"], "vectors": [], "meta": None})
    assert snapshot(kv) == before
    assert kv.load("assets", b"a") == b"1b" and kv.load("assets", b"b") is None
    with pytest.raises(StoreError):
        kv.purge({"nope": [b"a"]})
    kv.close()
    with pytest.raises(StoreClosed):
        kv.purge({"assets": [b"a"]})


KV_CHECKS: tuple[Callable[[MakeKV], None], ...] = (
    check_purge_keeps_live_data,
    check_load_missing,
    check_unknown_space,
    check_commit_across_spaces,
    check_empty_commit,
    check_ops_apply_in_order,
    check_invalid_batch_applies_nothing,
    check_load_many,
    check_overwrite_and_empty_value,
    check_delete_absent_key,
    check_range_bounds,
    check_range_reverse,
    check_range_limit,
    check_negative_limit_yields_nothing,
    check_empty_ranges,
    check_edge_byte_keys,
    check_prefix_scans,
    check_scan_is_a_snapshot,
    check_reads_refuse_non_bytes_keys,
    check_closed,
    check_scan_resumed_after_close,
    check_random_against_model,
)


def check_kv(make_kv: MakeKV) -> None:
    """Run every check of the KV contract against stores made by ``make_kv``."""
    for check in KV_CHECKS:
        check(make_kv)
