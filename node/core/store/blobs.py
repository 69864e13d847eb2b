"""``BlobStore``: named, atomically replaced byte blobs (index snapshots), and its in-memory implementation.

Index snapshots are large and rewritten whole, so they live beside RocksDB rather than in it. The core sees only this
interface; ``node/shells/files.py`` implements it on disk with write-to-temporary, fsync and rename.
"""

from __future__ import annotations

from typing import Protocol


class BlobStore(Protocol):
    def read(self, name: str) -> bytes | None: ...

    def write(self, name: str, data: bytes) -> None:
        """Replace ``name`` atomically: a reader sees the old blob or the new one, never a mix."""
        ...

    def remove(self, name: str) -> None: ...

    def names(self) -> list[str]: ...


class MemoryBlobs:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def read(self, name: str) -> bytes | None:
        return self.data.get(name)

    def write(self, name: str, data: bytes) -> None:
        self.data[name] = bytes(data)

    def remove(self, name: str) -> None:
        self.data.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self.data)
