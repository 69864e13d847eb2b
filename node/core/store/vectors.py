"""The vector-index interface of the core, the exact index, and the size-adaptive index.

A :class:`VectorIndex` holds unit vectors under asset ids and answers top-k by cosine similarity. One index exists per
partition (privacy scope x boundary), so a search never touches vectors the caller may not read.

- :class:`ExactIndex`: brute force in numpy; exact, deterministic (ties broken by id). The simulator's index, and the
  right choice for small partitions (DESIGN.md §3: 0.15 ms and recall 1.0 at 2,000 vectors, where HNSW reached 0.915).
- :class:`AdaptiveIndex`: exact below ``threshold`` vectors, then migrates once into a larger index made by a factory
  (``node.hnsw_index.HnswIndex`` in the node), behind the same interface.

Snapshots (``dump``/``IndexFactory.load``) are plain buffers in parts: a small first part, then the index's large
arrays as they lie in memory, so a snapshot of gigabytes is written and read back without being joined or split (the
store seals them, in turn, like their partition). A snapshot of one part in the format before loads too.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Final, Protocol

import numpy as np

from gaml.policy.errors import IndexMismatch, StoreCorrupt

if TYPE_CHECKING:
    from typing_extensions import Buffer

EXACT_MAGIC: Final = b"GXI2"  # parts: the magic and a JSON head, then the matrix
ADAPTIVE_MAGIC: Final = b"GAI2"  # parts: the magic, kind and threshold, then the inner index's parts
LEGACY_EXACT_MAGIC: Final = b"GXI1"  # the format before: one buffer (magic, head, the matrix as .npy)
LEGACY_ADAPTIVE_MAGIC: Final = b"GAI1"
DEFAULT_EXACT_THRESHOLD: Final = 2048


class VectorIndex(Protocol):
    dim: int

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Insert or replace the vectors of ``ids`` (one row each, ``dim`` columns)."""
        ...

    def remove(self, id_: str) -> None:
        """Forget ``id_``; a no-op when it is absent."""
        ...

    def search(self, vector: np.ndarray, k: int, allowed: AbstractSet[str] | None = None) -> list[tuple[str, float]]:
        """Up to ``k`` (id, cosine similarity) pairs, best first; with ``allowed``, only those ids are ever scored."""
        ...

    def items(self) -> Iterator[tuple[str, np.ndarray]]: ...

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those of ``ids`` that are present (copies), by id; absent ids are left out."""
        ...

    def __len__(self) -> int: ...

    def __contains__(self, id_: object) -> bool: ...

    def dump(self) -> list[memoryview]:
        """A snapshot in parts (read back by the factory's ``load``), independent of later changes to the index."""
        ...


class IndexFactory(Protocol):
    def new(self, dim: int) -> VectorIndex: ...

    def load(self, parts: Sequence[Buffer]) -> VectorIndex:
        """The index of a snapshot's parts (each may be a view of a larger buffer); :class:`StoreCorrupt` if they are
        not one."""
        ...


def as_matrix(vectors: np.ndarray | Sequence[Sequence[float]], dim: int, n: int) -> np.ndarray:
    m = np.asarray(vectors, dtype=np.float32)
    if m.ndim == 1:
        m = m.reshape(1, -1)
    if m.shape != (n, dim):
        raise IndexMismatch(f"expected {n} vector(s) of dimension {dim}, got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise IndexMismatch("vectors must be finite")
    return m


def top_k(ids: Sequence[str], scores: np.ndarray, k: int) -> list[tuple[str, float]]:
    """The best ``k`` by score, ties broken by id, deterministically."""
    n = len(ids)
    if n == 0 or k <= 0:
        return []
    if k < n:
        # Take a margin past k so ties at the boundary are resolved by id, not by argpartition's order.
        cut = np.partition(scores, n - k)[n - k]
        idx = np.nonzero(scores >= cut)[0]
    else:
        idx = np.arange(n)
    ranked = sorted((-float(scores[i]), ids[int(i)]) for i in idx)[:k]
    return [(i, -s) for s, i in ranked]


class ExactIndex:
    """Brute-force cosine search over a growing float32 matrix."""

    def __init__(self, dim: int) -> None:
        if dim <= 0:
            raise IndexMismatch("dimension must be positive")
        self.dim = dim
        self._m = np.zeros((16, dim), dtype=np.float32)
        self._ids: list[str] = []
        self._row: dict[str, int] = {}

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        m = as_matrix(vectors, self.dim, len(ids))
        for id_, v in zip(ids, m, strict=True):
            row = self._row.get(id_)
            if row is None:
                row = len(self._ids)
                if row == len(self._m):
                    self._m = np.concatenate([self._m, np.zeros_like(self._m)])
                self._ids.append(id_)
                self._row[id_] = row
            self._m[row] = v

    def remove(self, id_: str) -> None:
        row = self._row.pop(id_, None)
        if row is None:
            return
        last = len(self._ids) - 1
        if row != last:
            moved = self._ids[last]
            self._ids[row] = moved
            self._m[row] = self._m[last]
            self._row[moved] = row
        self._ids.pop()

    def search(self, vector: np.ndarray, k: int, allowed: AbstractSet[str] | None = None) -> list[tuple[str, float]]:
        q = as_matrix(vector, self.dim, 1)[0]
        n = len(self._ids)
        if n == 0:
            return []
        if allowed is None:
            return top_k(self._ids, np.dot(self._m[:n], q), k)
        ids = sorted(i for i in allowed if i in self._row)
        if not ids:
            return []
        return top_k(ids, np.dot(self._m[[self._row[i] for i in ids]], q), k)

    def items(self) -> Iterator[tuple[str, np.ndarray]]:
        for i, id_ in enumerate(self._ids):
            yield id_, self._m[i].copy()

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        found = [i for i in dict.fromkeys(ids) if isinstance(i, str) and i in self._row]
        if not found:
            return {}
        return dict(zip(found, self._m[[self._row[i] for i in found]], strict=True))  # fancy indexing copies

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, id_: object) -> bool:
        return id_ in self._row

    def dump(self) -> list[memoryview]:
        head = json.dumps({"dim": self.dim, "ids": self._ids}).encode()
        return [memoryview(EXACT_MAGIC + head), memoryview(self._m[: len(self._ids)].tobytes())]

    @classmethod
    def load(cls, parts: Sequence[Buffer]) -> ExactIndex:
        try:
            first = memoryview(parts[0]).cast("B")
            if first[:4] == LEGACY_EXACT_MAGIC and len(parts) == 1:
                (hl,) = struct.unpack(">I", first[4:8])
                head = json.loads(bytes(first[8 : 8 + hl]))
                m = np.load(io.BytesIO(first[8 + hl :]), allow_pickle=False)
            elif first[:4] == EXACT_MAGIC and len(parts) == 2:
                head = json.loads(bytes(first[4:]))
                m = np.frombuffer(memoryview(parts[1]), dtype=np.float32).reshape(len(head["ids"]), int(head["dim"]))
            else:
                raise ValueError("bad magic or parts")
            index = cls(int(head["dim"]))
            if len(head["ids"]):
                index.add(head["ids"], m)
            return index
        except (ValueError, KeyError, struct.error, TypeError, IndexError) as e:
            raise StoreCorrupt(f"exact index snapshot is unreadable: {e}") from e


class ExactFactory:
    def new(self, dim: int) -> VectorIndex:
        return ExactIndex(dim)

    def load(self, parts: Sequence[Buffer]) -> VectorIndex:
        return ExactIndex.load(parts)


class AdaptiveIndex:
    """Exact search while small; past ``threshold`` vectors, moves once into ``large.new(dim)``."""

    def __init__(self, dim: int, large: IndexFactory, threshold: int = DEFAULT_EXACT_THRESHOLD) -> None:
        self.dim = dim
        self._large_factory = large
        self.threshold = threshold
        self._inner: VectorIndex = ExactIndex(dim)
        self.migrated = False

    @property
    def kind(self) -> str:
        return "large" if self.migrated else "exact"

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        self._inner.add(ids, vectors)
        if not self.migrated and len(self._inner) > self.threshold:
            big = self._large_factory.new(self.dim)
            pairs = list(self._inner.items())
            big.add([i for i, _ in pairs], np.stack([v for _, v in pairs]))
            self._inner = big
            self.migrated = True

    def remove(self, id_: str) -> None:
        self._inner.remove(id_)

    def search(self, vector: np.ndarray, k: int, allowed: AbstractSet[str] | None = None) -> list[tuple[str, float]]:
        return self._inner.search(vector, k, allowed)

    def items(self) -> Iterator[tuple[str, np.ndarray]]:
        return self._inner.items()

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return self._inner.vectors(ids)

    def __len__(self) -> int:
        return len(self._inner)

    def __contains__(self, id_: object) -> bool:
        return id_ in self._inner

    def dump(self) -> list[memoryview]:
        head = ADAPTIVE_MAGIC + (b"L" if self.migrated else b"E") + struct.pack(">I", self.threshold)
        return [memoryview(head), *self._inner.dump()]


class AdaptiveFactory:
    def __init__(self, large: IndexFactory, threshold: int = DEFAULT_EXACT_THRESHOLD) -> None:
        self.large = large
        self.threshold = threshold

    def new(self, dim: int) -> VectorIndex:
        return AdaptiveIndex(dim, self.large, self.threshold)

    def load(self, parts: Sequence[Buffer]) -> VectorIndex:
        first = memoryview(parts[0]).cast("B") if parts else memoryview(b"")
        if first[:4] == LEGACY_ADAPTIVE_MAGIC and len(first) >= 9 and len(parts) == 1:
            kind, inner_parts = first[4:5], [first[9:]]
        elif first[:4] == ADAPTIVE_MAGIC and len(first) == 9:
            kind, inner_parts = first[4:5], [memoryview(p) for p in parts[1:]]
        else:
            raise StoreCorrupt("adaptive index snapshot is unreadable: bad magic")
        inner = self.large.load(inner_parts) if kind == b"L" else ExactIndex.load(inner_parts)
        index = AdaptiveIndex(inner.dim, self.large, self.threshold)
        index._inner = inner
        index.migrated = kind == b"L"
        return index
