"""``HnswIndex``: the :class:`node.vectors.VectorIndex` contract over hnswlib. The only module that imports hnswlib.

One index per partition, cosine space. Labels are integers assigned in insertion order; the id<->label map travels in
the snapshot. The build is single-threaded with a fixed seed by default, so the same inserts give the same graph
(hnswlib#28: threaded inserts do not). ``threads`` > 1 inserts from several threads at once (hnswlib lets go of the
GIL: 60,000 vectors in steps of 512 at 2,456-2,494 vectors/s on one thread, 4,594-4,773 on two), but no node uses it:
a graph built so loses, now and then, a vector later put in a deleted one's slot (``replace_deleted``). Built on two
threads from 60 vectors, all deleted, then one added: a search for it found it 297 times in 300 (300 of 300 built on
one thread, or added without reusing a slot); the vector index contract's emptied-index check failed the same way.
``knn_query`` raises when it finds fewer than k results (DEPENDENCIES.md P7): ``search`` asks for at most the live
count and retries with a smaller k.

An :class:`Inserter` (the daemon's) runs inserts on a thread of its own, at a lower priority (:data:`INSERT_NICE`):
``add`` does its bookkeeping, hands hnswlib's part to that thread and returns, and the caller goes on with other work
(the daemon's next call) while the graph grows on the other core. Anything else that touches the graph (search,
remove, the next add, reading vectors, a snapshot) first waits for the insert in flight, so a caller sees the index as
if every add had finished before it returned, and the inserts run one at a time in the order given: the same graph
as inserting on the caller's thread. hnswlib allows an insert beside other inserts but not beside a query, which is
why nothing overlaps it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
import pickle
import struct
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Final

import hnswlib
import numpy as np

from gaml.node.core.store.vectors import as_matrix, top_k
from gaml.policy.errors import IndexMismatch, StoreCorrupt, StoreError

if TYPE_CHECKING:
    from typing_extensions import Buffer

HNSW_MAGIC: Final = b"GHI2"  # parts: the magic and a pickle (protocol 5) of settings and labels, then hnswlib's arrays
LEGACY_HNSW_MAGIC: Final = b"GHI1"  # the format before: one buffer (magic, length, a pickle holding the arrays)
# The candidate list of a query (hnswlib's ef; k when k is larger). 128 found 0.921 of the exact top 10 among 100k
# MiniLM vectors (bench/results/scale-minilm.md); on 30k of the scale bench's texts embedded with MiniLM raw hnswlib
# finds 0.981 at 128, 0.992 at 256 and 0.998 at 512, for 0.48 / 0.90 / 1.61 ms a query, and on 100k 0.975 at 256,
# 0.989 at 512 (docs/benchmarks.md). 512: through the daemon at 100k (hash vectors) it costs a dense search 0.4 ms
# (p50 3.04 -> 3.42 ms) and lifts recall@10 0.762 -> 0.868 (0.968 -> 0.994 at 10k). A setting of queries only: an
# index loaded from a snapshot takes the factory's.
EF_SEARCH: Final = 512
# The inserter's thread runs at this much more nice than the process (Linux, where a thread has a nice value of its
# own): calls are served first and the inserts take what CPU they leave. A bulk put on a 1M home while the backlog
# was indexed, two runs each: 4,054 / 4,327 -> 4,314 / 4,465 assets/s, with about as many vectors indexed meanwhile.
INSERT_NICE: Final = 10
EXACT_BELOW: Final = 2048  # an allowed set this small is scored exactly (cheaper and exact; see DESIGN.md §3)


def _yield_to_calls() -> None:
    """Raise the calling thread's nice value by :data:`INSERT_NICE` (at most 19), on Linux only: elsewhere a thread id
    is not something ``setpriority`` takes."""
    if sys.platform.startswith("linux"):
        tid = threading.get_native_id()
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + INSERT_NICE))


class Inserter:
    """One thread for the inserts of the indexes given it (see the module docstring), one insert at a time.
    :attr:`last` is the insert handed over last: a caller that must not wait on the indexes' owner (the daemon's
    background indexer) waits on it instead before it hands over the next one."""

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="gaml-hnsw-insert", initializer=_yield_to_calls
        )
        self.last: concurrent.futures.Future[None] | None = None

    def submit(self, insert: Callable[[], None]) -> concurrent.futures.Future[None]:
        self.last = self._pool.submit(insert)
        return self.last

    @property
    def busy(self) -> bool:
        return self.last is not None and not self.last.done()

    def close(self) -> None:
        """Wait for the insert in flight, then stop the thread (after the indexes' owner has closed them)."""
        self._pool.shutdown(wait=True)


class HnswIndex:
    def __init__(
        self,
        dim: int,
        *,
        m: int = 16,
        ef_construction: int = 200,
        ef_search: int = EF_SEARCH,
        seed: int = 100,
        threads: int = 1,
        inserter: Inserter | None = None,
    ) -> None:
        if dim <= 0:
            raise IndexMismatch("dimension must be positive")
        self.dim = dim
        self.ef_search = ef_search
        self.threads = threads
        self._params = {"m": m, "ef_construction": ef_construction, "seed": seed}
        self._index = hnswlib.Index(space="cosine", dim=dim)
        # Deleted elements' slots are reused by later inserts, so edits do not grow the index without bound.
        self._index.init_index(
            max_elements=1024, ef_construction=ef_construction, M=m, random_seed=seed, allow_replace_deleted=True
        )
        self._label: dict[str, int] = {}
        self._id: dict[int, str] = {}
        self._next = 0
        self.inserter = inserter
        # The insert handed to the inserter and not yet waited for: its future, the insert itself (to run again if it
        # failed) and its labels.
        self._inflight: tuple[concurrent.futures.Future[None], Callable[[], None], list[int]] | None = None
        self._failed: BaseException | None = None  # an insert that failed twice (the index then writes no snapshot)

    def _settle(self) -> None:
        """Wait for the insert in flight. One that failed runs again here, on the caller's thread (inserting the same
        labels again only updates what went in). Failing again, its ids leave the index (what of them went in is
        marked deleted), :class:`StoreError` is raised, and the index refuses snapshots from then on, so the store's
        last good snapshot and its journal rebuild it at the next open.

        Called by whatever reads the index, on its thread: the core thread, or the helper thread of a hybrid search's
        dense path while the core thread waits for it (never two at once)."""
        if self._inflight is None:
            return
        done, insert, labels = self._inflight
        try:
            done.result()
        except Exception:
            try:
                insert()
            except Exception as e:
                self._failed = e
                for label in labels:
                    id_ = self._id.pop(label, None)
                    if id_ is not None and self._label.get(id_) == label:
                        del self._label[id_]
                    with contextlib.suppress(RuntimeError):  # not in the graph at all
                        self._index.mark_deleted(label)
                raise StoreError(f"an HNSW insert failed twice: {type(e).__name__}: {e}") from e
        finally:
            self._inflight = None

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        self._settle()
        mat = as_matrix(vectors, self.dim, len(ids))
        if len(set(ids)) != len(ids):  # the same id twice in one call: the last vector wins, as in ExactIndex
            last = {id_: row for row, id_ in enumerate(ids)}
            ids, mat = list(last), mat[list(last.values())]
        for id_ in ids:
            self.remove(id_)
        labels = np.arange(self._next, self._next + len(ids), dtype=np.uint64)
        reusable = self._index.get_current_count() - len(self._label)  # deleted slots
        need = self._index.get_current_count() + max(0, len(ids) - reusable)
        cap = self._index.get_max_elements()
        if need > cap:
            while cap < need:
                cap *= 2
            self._index.resize_index(cap)
        listed = labels.tolist()
        if self.inserter is None:
            self._index.add_items(mat, labels, num_threads=self.threads, replace_deleted=True)
        else:  # a copy of the rows: the caller may reuse its array while they are inserted
            rows = np.array(mat, dtype=np.float32, order="C", copy=True)
            insert = functools.partial(
                self._index.add_items, rows, labels, num_threads=self.threads, replace_deleted=True
            )
            self._inflight = (self.inserter.submit(insert), insert, listed)
        for id_, label in zip(ids, listed, strict=True):
            self._label[id_] = label
            self._id[label] = id_
        self._next += len(ids)

    def remove(self, id_: str) -> None:
        if id_ not in self._label:
            return
        self._settle()
        label = self._label.pop(id_)
        del self._id[label]
        self._index.mark_deleted(label)

    def search(self, vector: np.ndarray, k: int, allowed: AbstractSet[str] | None = None) -> list[tuple[str, float]]:
        self._settle()
        q = as_matrix(vector, self.dim, 1)
        labels_ok: set[int] | None = None
        if allowed is not None:
            labels_ok = {self._label[i] for i in allowed if i in self._label}
            if len(labels_ok) <= EXACT_BELOW:  # few allowed: score exactly those, never the rest
                return self._exact(q[0], sorted(labels_ok), k)
        k = min(k, len(self._label) if labels_ok is None else len(labels_ok))
        if k <= 0:
            return []
        self._index.set_ef(max(self.ef_search, k))
        # With a filter, hnswlib still walks other nodes of the graph, but scores and returns only allowed labels.
        filt = None if labels_ok is None else labels_ok.__contains__
        while k > 0:
            try:
                labels, dists = self._index.knn_query(q, k=k, num_threads=1, filter=filt)
                break
            except RuntimeError:  # fewer than k reachable (P7)
                k -= max(1, k // 4)
        else:
            return []
        pairs = [(self._id[int(lb)], 1.0 - float(d)) for lb, d in zip(labels[0], dists[0], strict=True)]
        pairs.sort(key=lambda p: (-p[1], p[0]))
        return pairs

    def _exact(self, q: np.ndarray, labels: list[int], k: int) -> list[tuple[str, float]]:
        if not labels:
            return []
        vecs = np.asarray(self._index.get_items(labels), dtype=np.float32)
        return top_k([self._id[lb] for lb in labels], np.dot(vecs, q), k)

    def items(self) -> Iterator[tuple[str, np.ndarray]]:
        for id_, label in list(self._label.items()):
            self._settle()  # each time: the caller may add or remove between two items
            if self._label.get(id_) != label:  # removed or replaced since: not what the index holds now
                continue
            yield id_, np.asarray(self._index.get_items([label])[0], dtype=np.float32)

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        found = [i for i in dict.fromkeys(ids) if isinstance(i, str) and i in self._label]
        if not found:
            return {}
        self._settle()
        labels = np.fromiter((self._label[i] for i in found), dtype=np.uint64, count=len(found))  # ~25 % faster
        rows = np.asarray(self._index.get_items(labels), dtype=np.float32)  # than a list of labels
        return dict(zip(found, rows, strict=True))

    def __len__(self) -> int:
        return len(self._label)

    def __contains__(self, id_: object) -> bool:
        return id_ in self._label

    def dump(self) -> list[memoryview]:
        """Snapshot in parts: the magic and a pickle of the settings and labels, then hnswlib's arrays out of band
        (pickle protocol 5), as hnswlib copied them out of the index. The caller seals the parts; pickle is read back
        only from an authenticated snapshot."""
        self._settle()
        if self._failed is not None:
            raise StoreError(f"no snapshot of an HNSW index whose insert failed: {self._failed}")
        arrays: list[pickle.PickleBuffer] = []
        head = pickle.dumps(
            {
                "dim": self.dim,
                "ef_search": self.ef_search,
                "params": self._params,
                "next": self._next,
                "labels": self._label,
                "index": self._index,
            },
            protocol=5,
            buffer_callback=arrays.append,
        )
        return [memoryview(HNSW_MAGIC + head), *(a.raw() for a in arrays)]

    @classmethod
    def load(
        cls,
        parts: Sequence[Buffer],
        *,
        threads: int = 1,
        ef_search: int | None = None,
        inserter: Inserter | None = None,
    ) -> HnswIndex:
        """A snapshot read back (hnswlib copies its arrays out of ``parts``, which may be views of larger buffers);
        ``ef_search`` (a query-time setting: None keeps the snapshot's) applies to it."""
        try:
            first = memoryview(parts[0]).cast("B")
            if first[:4] == LEGACY_HNSW_MAGIC and len(parts) == 1:  # the format before: one pickle, arrays within
                (n,) = struct.unpack(">Q", first[4:12])
                if len(first) != 12 + n:
                    raise ValueError("truncated")
                state = pickle.loads(first[12:])
            elif first[:4] == HNSW_MAGIC:
                state = pickle.loads(first[4:], buffers=parts[1:])
            else:
                raise ValueError("bad magic")
            p = state["params"]
            index = cls(
                state["dim"],
                m=p["m"],
                ef_construction=p["ef_construction"],
                ef_search=state["ef_search"] if ef_search is None else ef_search,
                seed=p["seed"],
                threads=threads,
                inserter=inserter,
            )
            index._index = state["index"]
            index._label = dict(state["labels"])
            index._id = {v: k for k, v in index._label.items()}
            index._next = state["next"]
            return index
        except Exception as e:  # any failure to read a snapshot means: rebuild from RocksDB
            raise StoreCorrupt(f"HNSW snapshot is unreadable: {e}") from e


class HnswFactory:
    def __init__(
        self,
        *,
        ef_construction: int = 200,
        ef_search: int = EF_SEARCH,
        m: int = 16,
        threads: int = 1,
        inserter: Inserter | None = None,
    ) -> None:
        self.kw = {"ef_construction": ef_construction, "ef_search": ef_search, "m": m, "threads": threads}
        self.inserter = inserter

    def new(self, dim: int) -> HnswIndex:
        return HnswIndex(dim, **self.kw, inserter=self.inserter)

    def load(self, parts: Sequence[Buffer]) -> HnswIndex:
        return HnswIndex.load(parts, threads=self.kw["threads"], ef_search=self.kw["ef_search"], inserter=self.inserter)
