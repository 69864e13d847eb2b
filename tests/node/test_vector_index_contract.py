"""The VectorIndex contract (tests/contracts/vector_index.py) on ExactIndex, HnswIndex and AdaptiveIndex."""

from __future__ import annotations

import numpy as np
import pytest

from gaml.node.core.store.vectors import AdaptiveFactory, AdaptiveIndex, ExactFactory, IndexFactory
from gaml.node.shells.hnsw_index import HnswFactory, HnswIndex
from tests.contracts.vector_index import DIM, VECTOR_CHECKS, Check, clustered, ids_for

THRESHOLD = 50

SUBJECTS: dict[str, tuple[IndexFactory, bool]] = {
    "exact": (ExactFactory(), True),
    "hnsw": (HnswFactory(), False),
    "adaptive": (AdaptiveFactory(HnswFactory(), threshold=THRESHOLD), False),
}


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
