"""The storage interface of the core, and its in-memory implementation.

The core reaches storage only through :class:`KV`: point reads, multi-reads, ordered range scans and one atomic
``commit`` of puts and deletes across spaces (RocksDB column families). A commit is all-or-nothing and, with
``sync=True``, durable when it returns. Keys are bytes; :func:`pack` builds ordered composite keys.

``MemoryKV`` is the fake behind the same contract (``tests/contracts/kv.py`` runs against both it and ``RocksKV``).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Final, Protocol

from sortedcontainers import SortedList

from gaml.policy.errors import StoreClosed, StoreError

SPACES: Final = ("assets", "index", "edges", "journal", "vectors", "access", "meta")


@dataclasses.dataclass(frozen=True, slots=True)
class Put:
    space: str
    key: bytes
    value: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class Delete:
    space: str
    key: bytes


Op = Put | Delete


class KV(Protocol):
    def load(self, space: str, key: bytes) -> bytes | None: ...

    def load_many(self, space: str, keys: Sequence[bytes]) -> list[bytes | None]: ...

    def load_range(
        self,
        space: str,
        start: bytes = b"",
        end: bytes | None = None,
        *,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        """Pairs with ``start <= key < end`` in key order (descending with ``reverse``)."""
        ...

    def commit(self, ops: Sequence[Op], *, sync: bool = True) -> None:
        """Apply every op atomically; durable on return when ``sync``."""
        ...

    def purge(self, keys: Mapping[str, Sequence[bytes] | None]) -> None:
        """Make sure no earlier value of these keys (None: of any key of the space), overwritten or deleted, survives
        anywhere in storage.

        Erasure calls it: an old version lingering in a log or a file until some later compaction would otherwise
        keep what was forgotten.
        """
        ...

    def close(self) -> None: ...


def pack(*parts: bytes | int | str) -> bytes:
    """An order-preserving composite key: ints as 8-byte big-endian, strings UTF-8 and bytes length-free.

    Only the last part may have variable length without a separator; callers use fixed-width parts (ids, hashes,
    integers) before it. ``prefix_end`` gives the exclusive upper bound of a prefix scan.
    """
    out = bytearray()
    for p in parts:
        if isinstance(p, bool):
            raise TypeError("bool is not a key part")
        if isinstance(p, int):
            out += struct.pack(">Q", p)
        elif isinstance(p, str):
            out += p.encode()
        else:
            out += p
    return bytes(out)


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key that starts with ``prefix`` (None if there is none)."""
    b = bytearray(prefix)
    while b and b[-1] == 0xFF:
        b.pop()
    if not b:
        return None
    b[-1] += 1
    return bytes(b)


def check_ops(ops: Sequence[Op]) -> None:
    for op in ops:
        if not isinstance(op, (Put, Delete)):
            raise StoreError(f"not a KV op: {op!r}")
        if op.space not in SPACES:
            raise StoreError(f"unknown space {op.space!r}; spaces are {', '.join(SPACES)}")
        if type(op.key) is not bytes or (isinstance(op, Put) and type(op.value) is not bytes):
            raise StoreError("KV keys and values are bytes")


def check_key(key: object, what: str = "key") -> None:
    if type(key) is not bytes:
        raise StoreError(f"KV {what}s are bytes, got {type(key).__name__}")


class MemoryKV:
    """An in-memory KV with sorted keys. ``commit`` validates everything before applying anything.

    Like RocksDB, a range scan sees the data as it was when the scan began, and a scan resumed after ``close`` raises
    :class:`StoreClosed`.
    """

    def __init__(self) -> None:
        self._data: dict[str, dict[bytes, bytes]] = {s: {} for s in SPACES}
        self._keys: dict[str, SortedList] = {s: SortedList() for s in SPACES}
        self._closed = False
        self.commits = 0

    def _space(self, space: str) -> dict[bytes, bytes]:
        if self._closed:
            raise StoreClosed("the store is closed")
        try:
            return self._data[space]
        except (KeyError, TypeError):
            raise StoreError(f"unknown space {space!r}") from None

    def load(self, space: str, key: bytes) -> bytes | None:
        d = self._space(space)
        check_key(key)
        return d.get(key)

    def load_many(self, space: str, keys: Sequence[bytes]) -> list[bytes | None]:
        d = self._space(space)
        for k in keys:
            check_key(k)
        return [d.get(k) for k in keys]

    def load_range(
        self,
        space: str,
        start: bytes = b"",
        end: bytes | None = None,
        *,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        d = self._space(space)
        check_key(start, "range bound")
        if end is not None:
            check_key(end, "range bound")
        if limit is not None and limit <= 0:
            return iter(())
        keys = self._keys[space]
        selected = list(keys.irange(start, end, inclusive=(True, False), reverse=reverse))
        if limit is not None:
            selected = selected[:limit]
        return self._scan([(k, d[k]) for k in selected])  # a snapshot, taken now

    def _scan(self, items: list[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
        for item in items:
            if self._closed:
                raise StoreClosed("the store was closed during a range scan")
            yield item

    def commit(self, ops: Sequence[Op], *, sync: bool = True) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")
        check_ops(ops)
        for op in ops:
            d, keys = self._data[op.space], self._keys[op.space]
            if isinstance(op, Put):
                if op.key not in d:
                    keys.add(op.key)
                d[op.key] = op.value
            elif op.key in d:
                del d[op.key]
                keys.remove(op.key)
        self.commits += 1

    def purge(self, keys: Mapping[str, Sequence[bytes] | None]) -> None:
        """Nothing to do: a dict keeps no earlier values."""
        if self._closed:
            raise StoreClosed("the store is closed")
        for space in keys:
            if space not in SPACES:
                raise StoreError(f"unknown space {space!r}")

    def close(self) -> None:
        self._closed = True

    def reopened(self) -> MemoryKV:
        """A new handle over the same data, as after a process restart (the simulator restarts nodes this way)."""
        kv = MemoryKV()
        kv._data, kv._keys = self._data, self._keys
        return kv

    def dump(self) -> dict[str, dict[bytes, bytes]]:
        """A copy of every space (tests compare states before and after a refused operation)."""
        return {s: dict(d) for s, d in self._data.items()}
