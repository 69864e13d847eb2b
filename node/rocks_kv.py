"""``RocksKV``: the :class:`node.kv.KV` contract over RocksDB (rocksdict). The only module that imports rocksdict.

Each space is a column family. ``commit`` is one ``WriteBatch`` (atomic across column families) written with
``sync=True`` by default, so an acknowledged write survives a crash of the process or the machine.

Pitfalls handled here (see DEPENDENCIES.md): a ``WriteBatch`` is single-use (P6); ``close`` releases the lock only once
every column-family view, handle and iterator is gone (P5).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import cast

from rocksdict import AccessType, DBRecoveryMode, Options, Rdict, WriteBatch, WriteOptions

from node.kv import SPACES, Op, Put, check_ops
from policy.errors import StoreClosed, StoreCorrupt, StoreError, StoreLocked


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
        cfs = {name: Options(raw_mode=True) for name in SPACES}
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

    def _view(self, space: str) -> Rdict:
        if self._closed:
            raise StoreClosed(f"the store at {self.path} is closed")
        try:
            return self._cf[space]
        except KeyError:
            raise StoreError(f"unknown space {space!r}") from None

    def load(self, space: str, key: bytes) -> bytes | None:
        cf = self._view(space)
        try:
            v = cf.get(key)
        except Exception as e:
            raise _classify(e, self.path) from e
        return v if v is None else bytes(v)

    def load_many(self, space: str, keys: Sequence[bytes]) -> list[bytes | None]:
        cf = self._view(space)
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
        # Bounds are checked here: rocksdict 0.3.29's ReadOptions has no raw mode, so its bounds would be encoded
        # as Python objects and never match raw keys.
        it = cf.iter()
        try:
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
            while it.valid() and (limit is None or n < limit):
                key = bytes(it.key())
                if (reverse and key < start) or (not reverse and end is not None and key >= end):
                    break
                yield key, bytes(it.value())
                n += 1
                if reverse:
                    it.prev()
                else:
                    it.next()
            # An iterator also stops at a damaged block; only its status tells that from the end of the data.
            try:
                it.status()
            except Exception as e:
                raise _classify(e, self.path) from e
        finally:
            del it

    def commit(self, ops: Sequence[Op], *, sync: bool = True) -> None:
        if self._closed:
            raise StoreClosed(f"the store at {self.path} is closed")
        check_ops(ops)
        wb = WriteBatch(raw_mode=True)
        for op in ops:
            h = self._handles[op.space]
            if isinstance(op, Put):
                wb.put(op.key, op.value, h)
            else:
                wb.delete(op.key, h)
        wo = WriteOptions()
        wo.sync = sync
        try:
            self._db.write(wb, wo)
        except Exception as e:
            raise _classify(e, self.path) from e

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._cf.clear()
        self._handles.clear()
        try:
            self._db.flush_wal(True)
        finally:
            self._db.close()
            del self._db
