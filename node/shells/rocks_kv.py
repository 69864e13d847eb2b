"""``RocksKV``: the :class:`node.kv.KV` contract over RocksDB (rocksdict). The only module that imports rocksdict.

Each space is a column family. ``commit`` is one ``WriteBatch`` (atomic across column families) written with
``sync=True`` by default, so an acknowledged write survives a crash of the process or the machine.

Pitfalls handled here (see DEPENDENCIES.md): a ``WriteBatch`` is single-use (P6); ``close`` releases the lock only once
every column-family view, handle and iterator is gone (P5).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any, Final, cast

from rocksdict import (
    AccessType,
    BlockBasedOptions,
    BottommostLevelCompaction,
    Checkpoint,
    CompactOptions,
    DBRecoveryMode,
    Options,
    Rdict,
    WriteBatch,
    WriteOptions,
)

from gaml.node.core.store.kv import SPACES, Delete, Op, Put, check_key, check_ops
from gaml.policy.errors import StoreClosed, StoreCorrupt, StoreError, StoreLocked

INFO_LOGS_KEPT: Final = 2
INFO_LOG_BYTES_MAX: Final = 1 << 20
# The spaces read one key at a time (an asset's record, a vector): their tables carry a bloom filter, so a lookup skips
# every file that cannot hold its key — most of them while fresh files overlap, all of them for a key never written
# (each put asks for its ids first). 10 bits a key: ~1 % false positives, ~1.2 MB a million keys. The other spaces are
# read by ranges, which a whole-key filter does not help.
POINT_READ_SPACES: Final = frozenset({"assets", "vectors", "meta"})
BLOOM_BITS_PER_KEY: Final = 10


def _space_options(space: str) -> Options:
    opts = Options(raw_mode=True)
    if space in POINT_READ_SPACES:
        table = BlockBasedOptions()
        table.set_bloom_filter(BLOOM_BITS_PER_KEY, False)  # a full filter per file, not one per block
        opts.set_block_based_table_factory(table)
    return opts


def _classify(e: Exception, path: Path) -> StoreError:
    msg = str(e)
    low = msg.lower()
    if "corrupt" in low or "checksum" in low or "bad magic" in low or "truncated" in low:
        return StoreCorrupt(f"the database at {path} is corrupt ({msg}); it was left as it is — restore a copy")
    if "no such file" in low and (path / "CURRENT").exists():
        return StoreCorrupt(f"the database at {path} is missing a file it needs ({msg}); it was left as it is")
    if "lock file" in low or "lock hold" in low or "temporarily unavailable" in low:
        return StoreLocked(f"the database at {path} is in use by another process or handle ({msg}); stop it first")
    return StoreError(f"the database at {path} could not be used: {msg}")


_key: Final = attrgetter("key")
_OPS: Final = (Put, Delete)


class RocksKV:
    """RocksDB behind the KV contract. Open one per process; a second open raises :class:`StoreLocked`."""

    def __init__(self, path: str | Path, *, create: bool = True, read_only: bool = False) -> None:
        self.path = Path(path)
        if not create and not (self.path / "CURRENT").exists():
            raise StoreError(f"no database at {self.path}; run `gaml init` first")
        opts = Options(raw_mode=True)
        opts.create_if_missing(create)
        opts.create_missing_column_families(create)
        opts.set_paranoid_checks(True)
        # A torn tail (a write cut off by power loss) was never acknowledged and may go; corruption anywhere else is
        # reported instead of silently truncating the log (the default, point-in-time, would drop later writes).
        opts.set_wal_recovery_mode(DBRecoveryMode.tolerate_corrupted_tail_records())
        # RocksDB starts a new info log (LOG, ~125 KB of settings) at every open and keeps the old ones forever by
        # default: one per CLI call. Keep the current and the previous one, each rolled at 1 MiB.
        opts.set_keep_log_file_num(INFO_LOGS_KEPT)
        opts.set_max_log_file_size(INFO_LOG_BYTES_MAX)
        cfs = {name: _space_options(name) for name in SPACES}
        try:
            if read_only:
                self._db = Rdict(
                    str(self.path), options=opts, column_families=cfs, access_type=AccessType.read_only(False)
                )
            else:
                self._db = Rdict(str(self.path), options=opts, column_families=cfs)
        except Exception as e:
            raise _classify(e, self.path) from e
        self._cf = {name: self._db.get_column_family(name) for name in SPACES}
        self._handles = {name: self._db.get_column_family_handle(name) for name in SPACES}
        self._closed = False
        self._slots: dict[int, list[Any]] = {}

    def _view(self, space: str) -> Rdict:
        if self._closed:
            raise StoreClosed(f"the store at {self.path} is closed")
        try:
            return self._cf[space]
        except KeyError:
            raise StoreError(f"unknown space {space!r}") from None

    def load(self, space: str, key: bytes) -> bytes | None:
        cf = self._view(space)
        check_key(key)
        try:
            v = cf.get(key)
        except Exception as e:
            raise _classify(e, self.path) from e
        return v if v is None else bytes(v)

    def load_many(self, space: str, keys: Sequence[bytes]) -> list[bytes | None]:
        cf = self._view(space)
        for k in keys:
            check_key(k)
        if not keys:
            return []
        try:
            return cast(list[bytes | None], cf[list(keys)])
        except Exception as e:
            raise _classify(e, self.path) from e

    def load_range(
        self,
        space: str,
        start: bytes = b"",
        end: bytes | None = None,
        *,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        cf = self._view(space)
        check_key(start, "range bound")
        if end is not None:
            check_key(end, "range bound")
        # The iterator is made now, so the scan sees the data as of this call (a RocksDB iterator is a snapshot).
        # It is held in a slot that ``close`` empties: a paused scan must not keep the database (and its lock) open.
        slot: list[Any] = [cf.iter()]
        self._slots[id(slot)] = slot
        return self._scan(slot, start, end, reverse, limit)

    def _scan(
        self, slot: list[Any], start: bytes, end: bytes | None, reverse: bool, limit: int | None
    ) -> Iterator[tuple[bytes, bytes]]:
        try:
            it = slot[0]
            if reverse:
                if end is None:
                    it.seek_to_last()
                else:
                    it.seek_for_prev(end)
                    if it.valid() and bytes(it.key()) >= end:
                        it.prev()
            else:
                it.seek(start)
            n = 0
            while limit is None or n < limit:
                it = slot[0]
                if it is None:
                    raise StoreClosed(f"the store at {self.path} was closed during a range scan")
                if not it.valid():
                    # A damaged block also ends iteration; only the status tells that from the end of the data.
                    try:
                        it.status()
                    except Exception as e:
                        raise _classify(e, self.path) from e
                    break
                key = bytes(it.key())
                if (reverse and key < start) or (not reverse and end is not None and key >= end):
                    break
                value = bytes(it.value())
                if reverse:
                    it.prev()
                else:
                    it.next()
                n += 1
                it = None  # hold no reference across the yield: only the slot keeps the iterator alive
                yield key, value
        finally:
            slot.clear()
            self._slots.pop(id(slot), None)

    def commit(self, ops: Sequence[Op], *, sync: bool = True) -> None:
        if self._closed:
            raise StoreClosed(f"the store at {self.path} is closed")
        # Validated while the batch is built: nothing reaches the database unless every op is valid.
        wb = WriteBatch(raw_mode=True)
        handles = self._handles
        by_space: dict[str, list[Op]] = {}
        for op in ops:
            group = by_space.get(op.space) if op.__class__ in _OPS else None
            if group is None:
                if not isinstance(op, _OPS) or op.space not in handles:
                    check_ops([op])  # raises the precise error
                    raise StoreError(f"not a KV op: {op!r}")  # pragma: no cover - check_ops raised already
                group = by_space.setdefault(op.space, [])
            if type(op.key) is not bytes:
                raise StoreError("KV keys and values are bytes")
            group.append(op)
        # Each space's ops in key order: the memtable takes keys in order about twice as fast as scattered ones (a
        # bulk put's batch, ~33 ops an asset, measured: 60-70 -> 30 ms a thousand assets). The sort is stable, so ops
        # on one key keep their order and the batch means what it meant (the last op on a key wins).
        for space, group in by_space.items():
            group.sort(key=_key)
            h = handles[space]
            put, delete = wb.put, wb.delete
            for op in group:
                if isinstance(op, Put):
                    if type(op.value) is not bytes:
                        raise StoreError("KV keys and values are bytes")
                    put(op.key, op.value, h)
                else:
                    delete(op.key, h)
        wo = WriteOptions()
        wo.sync = sync
        try:
            self._db.write(wb, wo)
        except Exception as e:
            raise _classify(e, self.path) from e

    def purge(self, keys: Mapping[str, Sequence[bytes] | None]) -> None:
        """Flush every column family (so the write-ahead log holding old values is retired), then compact, per space,
        the key span of ``keys`` (the whole space for None) down to the bottommost level, which drops overwritten
        and deleted versions there. One compaction per space: its cost grows with the span, not the key count."""
        if self._closed:
            raise StoreClosed(f"the store at {self.path} is closed")
        for space in keys:
            self._view(space)
        try:
            for space in SPACES:
                self._cf[space].flush(True)
            self._db.flush_wal(True)
            opts = CompactOptions()
            opts.set_bottommost_level_compaction(BottommostLevelCompaction.force())
            opts.set_exclusive_manual_compaction(True)
            for space, ks in keys.items():
                if ks is None:
                    self._cf[space].compact_range(None, None, opts)
                elif ks:
                    self._cf[space].compact_range(min(ks), max(ks) + b"\x00", opts)
        except Exception as e:
            raise _classify(e, self.path) from e

    def checkpoint_to(self, path: Path) -> None:
        """A consistent copy of the database in the new directory ``path`` (RocksDB's checkpoint: its files
        hard-linked where the file system allows, else copied; the write-ahead log flushed first)."""
        if self._closed:
            raise StoreClosed(f"the store at {self.path} is closed")
        try:
            self._db.flush_wal(True)
            Checkpoint(self._db).create_checkpoint(str(path))
        except Exception as e:
            raise _classify(e, Path(path)) from e

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for slot in list(self._slots.values()):  # paused scans drop their iterators (P5: they hold the lock)
            slot[:] = [None]
        self._slots.clear()
        self._cf.clear()
        self._handles.clear()
        try:
            self._db.flush_wal(True)
        finally:
            self._db.close()
            del self._db
