"""The VectorIndex contract (tests/contracts/vector_index.py) on ExactIndex, HnswIndex and AdaptiveIndex, the HNSW
ones also with their inserts on an :class:`Inserter`'s thread (as in the daemon)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from gaml.node.core.store.vectors import AdaptiveFactory, AdaptiveIndex, ExactFactory, IndexFactory
from gaml.node.shells.hnsw_index import INSERT_NICE, HnswFactory, HnswIndex, Inserter
from gaml.policy.errors import StoreError
from tests.contracts.vector_index import DIM, VECTOR_CHECKS, Check, clustered, ids_for

THRESHOLD = 50

INSERTERS = (Inserter(), Inserter())  # the subjects' threads, stopped once this module's tests are done
SUBJECTS: dict[str, tuple[IndexFactory, bool]] = {
    "exact": (ExactFactory(), True),
    "hnsw": (HnswFactory(), False),
    "adaptive": (AdaptiveFactory(HnswFactory(), threshold=THRESHOLD), False),
    "hnsw-inserter": (HnswFactory(inserter=INSERTERS[0]), False),
    "adaptive-inserter": (AdaptiveFactory(HnswFactory(inserter=INSERTERS[1]), threshold=THRESHOLD), False),
}


@pytest.fixture(scope="module", autouse=True)
def _stop_inserters() -> Iterator[None]:
    yield
    for inserter in INSERTERS:
        inserter.close()


@pytest.mark.parametrize("check", VECTOR_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
@pytest.mark.parametrize("subject", list(SUBJECTS))
def test_vector_index_contract(subject: str, check: Check) -> None:
    """Each index satisfies every behaviour of the shared contract (approximate ones by recall, not equality)."""
    factory, exact = SUBJECTS[subject]
    check(factory, exact)


# -- AdaptiveIndex only ------------------------------------------------------------------------------------------


def adaptive() -> AdaptiveIndex:
    index = AdaptiveFactory(HnswFactory(), threshold=THRESHOLD).new(DIM)
    assert isinstance(index, AdaptiveIndex)
    return index


def test_adaptive_migrates_once_past_threshold() -> None:
    """An adaptive index stays exact up to the threshold and moves to the large index once it is exceeded."""
    index = adaptive()
    ids, vecs = ids_for(200), clustered(200, seed=30)
    index.add(ids[:THRESHOLD], vecs[:THRESHOLD])
    assert (index.migrated, index.kind) == (False, "exact")
    index.add(ids[THRESHOLD : THRESHOLD + 1], vecs[THRESHOLD : THRESHOLD + 1])
    assert (index.migrated, index.kind) == (True, "large")
    index.add(ids[THRESHOLD + 1 :], vecs[THRESHOLD + 1 :])
    assert len(index) == 200
    items = dict(index.items())
    assert sorted(items) == ids
    for id_, v in zip(ids, vecs, strict=True):
        np.testing.assert_allclose(items[id_], v, atol=1e-5)
    # Shrinking below the threshold does not migrate back.
    for id_ in ids[10:]:
        index.remove(id_)
    assert (len(index), index.migrated) == (10, True)


def test_adaptive_snapshot_keeps_its_kind() -> None:
    """A snapshot taken before migration loads as exact and still migrates later; one taken after loads as large."""
    factory = AdaptiveFactory(HnswFactory(), threshold=THRESHOLD)
    ids, vecs = ids_for(120), clustered(120, seed=31)
    small = factory.new(DIM)
    small.add(ids[:40], vecs[:40])
    loaded_small = factory.load(small.dump())
    assert isinstance(loaded_small, AdaptiveIndex) and not loaded_small.migrated
    loaded_small.add(ids[40:], vecs[40:])
    assert loaded_small.migrated and len(loaded_small) == 120

    loaded_big = factory.load(loaded_small.dump())
    assert isinstance(loaded_big, AdaptiveIndex) and loaded_big.migrated and len(loaded_big) == 120
    for id_, v in zip(ids, vecs, strict=True):
        assert loaded_big.search(v, 1)[0][0] == id_


def test_hnsw_reuses_the_slots_of_replaced_vectors() -> None:
    """Editing the same ids over and over does not grow the HNSW graph (deleted slots are reused), before and
    after a snapshot round trip."""
    rng = np.random.default_rng(0)
    ids = [f"i{n}" for n in range(100)]
    index = HnswIndex(16)
    index.add(ids, rng.normal(size=(100, 16)).astype(np.float32))
    for _ in range(20):
        index.add(ids[:50], rng.normal(size=(50, 16)).astype(np.float32))
    assert len(index) == 100 and index._index.get_current_count() == 100
    again = HnswIndex.load(index.dump())
    again.add(ids[:50], rng.normal(size=(50, 16)).astype(np.float32))
    assert again._index.get_current_count() == 100


def test_a_loaded_hnsw_snapshot_searches_with_the_factorys_ef() -> None:
    """ef_search is a setting of queries: an index written with another one searches with the factory's once loaded
    (a node whose default changed applies it to the indexes it had), and the same vectors come back."""
    vecs = clustered(300, seed=3)
    ids = ids_for(300)
    old = HnswIndex(DIM, ef_search=16)
    old.add(ids, vecs)
    loaded = HnswFactory(ef_search=300).load(old.dump())
    assert loaded.ef_search == 300 and HnswIndex.load(old.dump()).ef_search == 16
    assert next(i for i, _ in loaded.search(vecs[7], 5)) == ids[7]


# -- HnswIndex with an Inserter ------------------------------------------------------------------------------------


def test_an_inserter_builds_the_same_graph_while_its_caller_goes_on() -> None:
    """``add`` returns while its insert waits on the inserter's thread; what reads the index then waits for it; and
    the graph is the one built on the caller's thread (the same snapshot, byte for byte)."""
    ids, vecs = ids_for(400), clustered(400, seed=5)
    plain = HnswIndex(DIM)
    inserter = Inserter()
    try:
        threaded = HnswIndex(DIM, inserter=inserter)
        for index in (plain, threaded):
            index.add(ids[:300], vecs[:300])
            index.remove(ids[3])
            index.add(ids[300:], vecs[300:])
        hold, held = threading.Event(), threading.Event()

        def busy() -> None:  # the inserter's thread is busy until the test says
            held.set()
            hold.wait(30)

        inserter.submit(busy)
        held.wait(30)
        more, more_vecs = ["late-1", "late-2"], clustered(2, seed=6)
        plain.add(more, more_vecs)
        threaded.add(more, more_vecs)  # queued behind the held job: returns without it having run
        assert inserter.busy and threaded._inflight is not None and "late-1" in threaded
        hold.set()
        assert threaded.search(more_vecs[0], 1)[0][0] == "late-1"  # the search waited for the insert
        assert threaded._inflight is None and not inserter.busy
        assert plain.search(more_vecs[0], 1)[0][0] == "late-1"  # (a search sets hnswlib's ef, which the dump keeps)
        assert [bytes(p) for p in threaded.dump()] == [bytes(p) for p in plain.dump()]
    finally:
        inserter.close()


class _FailingAdds:
    """hnswlib's index, whose next ``fail`` inserts raise (as a failed allocation would)."""

    def __init__(self, inner: Any, fail: int) -> None:
        self.inner, self.fail = inner, fail

    def add_items(self, *args: Any, **kw: Any) -> None:
        if self.fail:
            self.fail -= 1
            raise RuntimeError("insert failed")
        self.inner.add_items(*args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_failed_insert_runs_again_and_one_failing_twice_refuses_snapshots() -> None:
    """An insert that failed on the inserter's thread runs again on the caller's when the index is next read, and
    nothing is lost; one that fails again raises StoreError there and the index writes no snapshot (the store keeps
    its last good one, and its journal, to rebuild it from)."""
    ids, vecs = ids_for(100), clustered(100, seed=8)
    inserter = Inserter()
    try:
        index = HnswIndex(DIM, inserter=inserter)
        index.add(ids[:50], vecs[:50])
        index._index = _FailingAdds(index._index, fail=1)  # type: ignore[assignment]
        index.add(ids[50:], vecs[50:])
        assert index.search(vecs[70], 1)[0][0] == ids[70]  # failed once, inserted again: found
        assert len(index.dump()) > 1

        index._index = _FailingAdds(index._index.inner, fail=2)  # type: ignore[attr-defined]
        index.add(["x", "y"], clustered(2, seed=9))
        with pytest.raises(StoreError, match="failed twice"):
            index.search(vecs[0], 1)
        # Its ids left the index; the rest reads as before, filtered or not.
        assert "x" not in index and len(index) == 100 and index.vectors(["x", ids[0]]).keys() == {ids[0]}
        assert index.search(vecs[0], 1)[0][0] == ids[0]
        assert index.search(vecs[0], 1, allowed={ids[0], "x"})[0][0] == ids[0]
        assert sorted(i for i, _ in index.items()) == sorted(ids)
        with pytest.raises(StoreError, match="no snapshot"):
            index.dump()
    finally:
        inserter.close()


def test_an_add_waits_for_the_insert_before_it() -> None:
    """An add hands its insert over only after the one before it is done (and run again, had it failed): inserts
    never overlap, and none is dropped for the next."""
    ids, vecs = ids_for(60), clustered(60, seed=12)
    inserter = Inserter()
    try:
        index = HnswIndex(DIM, inserter=inserter)
        index._index = _FailingAdds(index._index, fail=1)  # type: ignore[assignment]
        index.add(ids[:30], vecs[:30])  # fails on the inserter's thread
        index.add(ids[30:], vecs[30:])  # runs the first again before it hands over its own
        for n in (0, 17, 29, 30, 59):
            assert index.search(vecs[n], 1)[0][0] == ids[n]
    finally:
        inserter.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own nice value is Linux's")
def test_the_inserters_thread_yields_the_cpu_to_calls() -> None:
    """The inserter's thread runs at INSERT_NICE more nice than the thread that made it (at most 19), so the calls'
    threads are served first; the caller's own priority is left as it was."""

    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    before = nice()
    inserter = Inserter()
    try:
        assert inserter.submit(nice).result(30) == min(19, before + INSERT_NICE)  # type: ignore[arg-type]
        assert nice() == before
    finally:
        inserter.close()
