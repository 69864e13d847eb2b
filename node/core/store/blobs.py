"""``BlobStore``: named, atomically replaced byte blobs (index snapshots), and its in-memory implementation.

Index snapshots are large and rewritten whole, so they live beside RocksDB rather than in it. The core sees only this
interface; ``node/shells/files.py`` implements it on disk with write-to-temporary, fsync and rename. A blob of
gigabytes is written from parts and read through a file, so neither side holds it whole in memory.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from typing_extensions import Buffer


class BlobStore(Protocol):
    def read(self, name: str) -> bytes | None: ...

    def open(self, name: str) -> io.BufferedIOBase | None:
        """The blob as a binary file to read (the caller closes it), or None when there is none."""
        ...

    def write(self, name: str, data: bytes | Iterable[Buffer]) -> None:
        """Replace ``name`` atomically with ``data`` (bytes, or parts written in turn, each consumed before the next
        is asked for): a reader sees the old blob or the new one, never a mix."""
        ...

    def remove(self, name: str) -> None: ...

    def names(self) -> list[str]: ...


class MemoryBlobs:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def read(self, name: str) -> bytes | None:
        return self.data.get(name)

    def open(self, name: str) -> io.BufferedIOBase | None:
        data = self.data.get(name)
        return None if data is None else io.BytesIO(data)

    def write(self, name: str, data: bytes | Iterable[Buffer]) -> None:
        self.data[name] = bytes(data) if isinstance(data, bytes) else b"".join(bytes(part) for part in data)

    def remove(self, name: str) -> None:
        self.data.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self.data)
