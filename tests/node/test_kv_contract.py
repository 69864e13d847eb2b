"""The KV contract (tests/contracts/kv.py) on MemoryKV and RocksKV, plus what only RocksDB does: files and locks."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rocksdict import AccessType, Options, Rdict

from gaml.node.core.store.kv import KV, SPACES, Delete, MemoryKV, Put, pack, prefix_end
from gaml.node.shells.rocks_kv import RocksKV
from gaml.policy.errors import StoreError, StoreLocked
from tests.contracts.kv import KV_CHECKS, MakeKV, snapshot


@pytest.fixture(params=["memory", "rocks"])
def make_kv(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeKV]:
    """A factory of new, empty stores of one kind; every store it made is closed at teardown."""
    opened: list[KV] = []

    def make() -> KV:
        kv: KV = MemoryKV() if request.param == "memory" else RocksKV(tmp_path / f"db{len(opened)}")
        opened.append(kv)
        return kv

    yield make
    for kv in opened:
        kv.close()


@pytest.mark.parametrize("check", KV_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_kv_contract(make_kv: MakeKV, check: Callable[[MakeKV], None]) -> None:
    """Each KV implementation satisfies every behaviour of the shared contract (one check per test)."""
    check(make_kv)


# -- key encoding ------------------------------------------------------------------------------------------------


def test_prefix_end_values() -> None:
    """prefix_end increments the last byte below 0xff, drops trailing 0xff bytes, and is None when all are 0xff."""
    assert prefix_end(b"a") == b"b"
    assert prefix_end(b"a\x00") == b"a\x01"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"a\xfe\xff\xff") == b"a\xff"
    assert prefix_end(b"\xff") is None
    assert prefix_end(b"\xff\xff") is None
    assert prefix_end(b"") is None


def test_pack_preserves_order() -> None:
    """pack encodes ints as 8-byte big-endian, so packed keys sort like the tuples they encode."""
    rng = random.Random(0)
    tuples = [(rng.randrange(2**64), rng.randrange(2**16), rng.choice(["a", "b", "ab"])) for _ in range(500)]
    assert sorted(tuples, key=lambda t: pack(*t)) == sorted(tuples)
    assert pack(1, "x", b"\x00") == b"\x00" * 7 + b"\x01x\x00"
    with pytest.raises(TypeError):
        pack(True)


# -- RocksKV only ------------------------------------------------------------------------------------------------


def test_rocks_data_survives_reopen(tmp_path: Path) -> None:
    """Everything committed (with or without sync) is there after close() and a reopen without create."""
    path = tmp_path / "db"
    kv = RocksKV(path)
    rng = random.Random(0)
    model: dict[str, dict[bytes, bytes]] = {s: {} for s in SPACES}
    for i in range(50):
        ops = [Put(rng.choice(SPACES), rng.randbytes(rng.randint(0, 4)), rng.randbytes(8)) for _ in range(5)]
        kv.commit(ops, sync=i % 2 == 0)
        for op in ops:
            model[op.space][op.key] = op.value
    gone = next(iter(model["assets"]))
    kv.commit([Delete("assets", gone)])
    del model["assets"][gone]
    kv.close()

    again = RocksKV(path, create=False)
    try:
        assert snapshot(again) == model
    finally:
        again.close()


def _table_filters(path: Path) -> dict[str, int]:
    """Per space, how many keys its table files' bloom filters hold (RocksDB's aggregated table properties)."""
    held = {}
    opened = Rdict(
        str(path),
        options=Options(raw_mode=True),
        column_families={s: Options(raw_mode=True) for s in SPACES},
        access_type=AccessType.read_only(False),
    )
    try:
        for space in SPACES:
            cf = opened.get_column_family(space)
            text = cf.property_value("rocksdb.aggregated-table-properties")
            assert text is not None
            props = dict(p.strip().split("=", 1) for p in text.split(";") if "=" in p)
            held[space] = int(props["# entries for filter"])
            del cf
    finally:
        opened.close()
    return held


def test_rocks_opens_a_database_whose_tables_have_no_bloom_filter(tmp_path: Path) -> None:
    """A home's database written before the point-read spaces had bloom filters (table files without one) opens and
    answers every key, present or absent, beside tables written since; compaction rewrites the point-read spaces'
    tables with a filter and leaves the range-read spaces without one."""
    path = tmp_path / "db"
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    old = Rdict(str(path), options=opts, column_families={s: Options(raw_mode=True) for s in SPACES})
    for space in ("assets", "index"):
        cf = old.get_column_family(space)
        for i in range(0, 400, 2):
            cf[pack(i)] = b"old-%d" % i
        cf.flush(True)
        del cf
    old.close()
    del old
    assert _table_filters(path) == dict.fromkeys(SPACES, 0)

    kv = RocksKV(path, create=False)
    try:
        kv.commit([Put(s, pack(i), b"new-%d" % i) for s in ("assets", "index") for i in range(1, 400, 4)])
        kv.purge({})  # flushes: a filtered table beside the old one
        keys = [pack(i) for i in range(400)]
        want = [b"old-%d" % i if i % 2 == 0 else b"new-%d" % i if i % 4 == 1 else None for i in range(400)]
        for space in ("assets", "index"):
            assert kv.load_many(space, keys) == want
            assert [kv.load(space, k) for k in keys] == want
        kv.purge({"assets": None, "index": None})  # compacts each space into one table
        for space in ("assets", "index"):
            assert kv.load_many(space, keys) == want
    finally:
        kv.close()
    filters = _table_filters(path)
    assert filters["assets"] == sum(w is not None for w in want)
    assert filters["index"] == 0


def test_rocks_second_open_is_locked(tmp_path: Path) -> None:
    """A second RocksKV on an open path raises StoreLocked and disturbs nothing; after close() the path opens again."""
    path = tmp_path / "db"
    first = RocksKV(path)
    first.commit([Put("meta", b"k", b"v")])
    with pytest.raises(StoreLocked, match="in use"):
        RocksKV(path)
    with pytest.raises(StoreLocked):
        RocksKV(path, create=False)
    assert first.load("meta", b"k") == b"v"
    first.commit([Put("meta", b"k2", b"v2")])
    first.close()
    second = RocksKV(path)
    try:
        assert second.load_many("meta", [b"k", b"k2"]) == [b"v", b"v2"]
    finally:
        second.close()


def test_rocks_missing_path_without_create(tmp_path: Path) -> None:
    """Opening a path with no database and create=False raises StoreError naming the path and `gaml init`."""
    path = tmp_path / "nowhere" / "db"
    with pytest.raises(StoreError) as info:
        RocksKV(path, create=False)
    assert not isinstance(info.value, StoreLocked)
    assert str(path) in str(info.value)
    assert "gaml init" in str(info.value)
    assert not path.exists()


def test_rocks_close_releases_lock_during_suspended_scan(tmp_path: Path) -> None:
    """close() releases the database lock even when a range scan is suspended, so the path can be reopened."""
    path = tmp_path / "db"
    kv = RocksKV(path)
    kv.commit([Put("assets", bytes([i]), b"v") for i in range(5)])
    scan = kv.load_range("assets")
    next(scan)
    kv.close()
    again = RocksKV(path)  # raises StoreLocked while `scan` is alive
    again.close()
    del scan


def test_purge_removes_old_versions_from_the_files(tmp_path: Path) -> None:
    """An overwritten value that reached a table file, and a deleted one still in the write-ahead log, are gone from
    every file after purge() (what erasure relies on); the scan finds the marker before, so it can find it."""
    kv = RocksKV(tmp_path / "db")
    marker, logged = b"PLAINTEXT-old-version-zanzibar", b"PLAINTEXT-only-in-the-log-quux"

    def files_with(needle: bytes) -> list[str]:
        return [p.name for p in (tmp_path / "db").rglob("*") if p.is_file() and needle in p.read_bytes()]

    kv.commit([Put("assets", b"k1", marker), Put("assets", b"k2", b"x" * 64)])
    kv.purge({"assets": [b"k2"]})  # flushes k1's first version into a table file
    kv.commit([Put("assets", b"k1", b"replacement"), Put("meta", b"m", logged)])
    kv.commit([Delete("meta", b"m")])
    assert files_with(marker) and files_with(logged)
    kv.purge({"assets": [b"k1"], "meta": [b"m"]})
    assert files_with(marker) == [] and files_with(logged) == []
    assert kv.load("assets", b"k1") == b"replacement" and kv.load("meta", b"m") is None
    kv.close()
