"""The :class:`node.vectors.VectorIndex` contract, shared by ``ExactIndex``, ``HnswIndex`` and ``AdaptiveIndex``.

Each ``check_*`` function takes an :class:`node.vectors.IndexFactory` and ``exact``: whether the index must return
exactly what brute force returns. Approximate indexes (HNSW) are held to self-matches and to recall@10 against
``ExactIndex`` on seeded clustered data instead. ``VECTOR_CHECKS`` lists the checks; ``check_vector_index`` runs all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from gaml.node.core.store.vectors import ExactIndex, IndexFactory, VectorIndex
from gaml.policy.errors import IndexMismatch

DIM = 32
N = 300
BATCH = 30  # added in batches, so an adaptive index migrates part-way through
K = 10
MIN_RECALL = 0.95
SIM_TOL = 1e-4

Check = Callable[..., None]


# -- data --------------------------------------------------------------------------------------------------------


def unit(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    return (m / np.linalg.norm(m, axis=-1, keepdims=True)).astype(np.float32)


def clustered(n: int, seed: int, dim: int = DIM, clusters: int = 12, spread: float = 0.35) -> np.ndarray:
    """``n`` unit vectors around ``clusters`` fixed centres (the centres depend on ``dim`` only, not on ``seed``)."""
    centres = np.random.default_rng(12345).normal(size=(clusters, dim))
    rng = np.random.default_rng(seed)
    which = rng.integers(0, clusters, size=n)
    return unit(centres[which] / np.sqrt(dim) + spread * rng.normal(size=(n, dim)) / np.sqrt(dim))


def ids_for(n: int, prefix: str = "v") -> list[str]:
    return [f"{prefix}{i:04d}" for i in range(n)]


def build(factory: IndexFactory, ids: Sequence[str], vectors: np.ndarray) -> VectorIndex:
    index = factory.new(vectors.shape[1])
    for i in range(0, len(ids), BATCH):
        index.add(ids[i : i + BATCH], vectors[i : i + BATCH])
    return index


def reference(ids: Sequence[str], vectors: np.ndarray) -> ExactIndex:
    ref = ExactIndex(vectors.shape[1])
    if len(ids):
        ref.add(ids, vectors)
    return ref


def assert_well_formed(results: list[tuple[str, float]], stored: dict[str, np.ndarray], query: np.ndarray) -> None:
    """Pairs of (known id, float), similarities non-increasing and equal to the cosine with the stored vector."""
    sims = [s for _, s in results]
    assert sims == sorted(sims, reverse=True), "results are not best first"
    assert len({i for i, _ in results}) == len(results), "an id appears twice"
    for id_, sim in results:
        assert isinstance(id_, str) and isinstance(sim, float)
        assert id_ in stored
        assert sim == pytest.approx(float(stored[id_] @ query), abs=SIM_TOL)


def recall(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> float:
    return len({i for i, _ in got} & {i for i, _ in want}) / max(1, len(want))


def assert_matches_reference(index: VectorIndex, ref: ExactIndex, queries: np.ndarray, exact: bool, k: int = K) -> None:
    """Exact indexes give brute force's answer; approximate ones reach MIN_RECALL on average."""
    stored = dict(ref.items())
    recalls = []
    for q in queries:
        got, want = index.search(q, k), ref.search(q, k)
        assert_well_formed(got, stored, q)
        if exact:
            assert [i for i, _ in got] == [i for i, _ in want]
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=SIM_TOL)
        recalls.append(recall(got, want))
    assert float(np.mean(recalls)) >= (1.0 if exact else MIN_RECALL), f"recall@{k} {np.mean(recalls):.3f}"


# -- checks ------------------------------------------------------------------------------------------------------


def check_search_best_first(factory: IndexFactory, exact: bool) -> None:
    """search returns up to k (id, cosine similarity) pairs, best first, agreeing with brute force."""
    ids, vecs = ids_for(N), clustered(N, seed=0)
    index = build(factory, ids, vecs)
    assert len(index) == N
    assert_matches_reference(index, reference(ids, vecs), clustered(60, seed=1), exact)


def check_self_match_ranks_first(factory: IndexFactory, exact: bool) -> None:
    """Searching with a stored vector ranks that vector's id first, with similarity ~1."""
    ids, vecs = ids_for(N), clustered(N, seed=2)
    index = build(factory, ids, vecs)
    misses = []
    for id_, v in zip(ids, vecs, strict=True):
        top = index.search(v, 3)
        if top[0][0] != id_:
            misses.append(id_)
        else:
            assert top[0][1] == pytest.approx(1.0, abs=SIM_TOL)
    assert not misses, f"{len(misses)} stored vectors do not find themselves first: {misses[:5]}"


def check_readd_replaces(factory: IndexFactory, exact: bool) -> None:
    """Adding an existing id replaces its vector: the length is unchanged and search sees only the new vector."""
    ids, vecs = ids_for(N), clustered(N, seed=3)
    index = build(factory, ids, vecs)
    changed = ids[::15]
    new = clustered(len(changed), seed=4)
    index.add(changed, new)
    assert len(index) == N
    stored = dict(zip(ids, vecs, strict=True)) | dict(zip(changed, new, strict=True))
    items = dict(index.items())
    assert sorted(items) == sorted(ids)
    for id_, old_v, new_v in zip(changed, vecs[::15], new, strict=True):
        np.testing.assert_allclose(items[id_], new_v, atol=1e-5)
        assert index.search(new_v, 1)[0] == (id_, pytest.approx(1.0, abs=SIM_TOL))
        everything = dict(index.search(old_v, N))
        assert everything.get(id_, float(old_v @ new_v)) == pytest.approx(float(old_v @ new_v), abs=SIM_TOL)
    assert_matches_reference(index, reference(list(stored), np.stack(list(stored.values()))), clustered(40, 5), exact)


def check_duplicate_ids_in_one_add(factory: IndexFactory, exact: bool) -> None:
    """An add that names the same id twice keeps one entry, with the last vector, and forgets it on remove."""
    ids, vecs = ids_for(100), clustered(100, seed=6)
    index = build(factory, ids, vecs)  # large enough that an adaptive index has migrated
    a, b, c = clustered(3, seed=21)
    index.add(["x", "x", "y"], np.stack([a, b, c]))
    assert len(index) == 102
    assert sorted(i for i, _ in index.items()) == sorted([*ids, "x", "y"])
    np.testing.assert_allclose(dict(index.items())["x"], b, atol=1e-5)
    got = index.search(a, len(index))
    assert [i for i, _ in got].count("x") == 1, f"'x' listed {[i for i, _ in got].count('x')} times"
    assert dict(got)["x"] == pytest.approx(float(a @ b), abs=SIM_TOL), "search still sees the first vector"
    assert factory.load(index.dump()).search(a, 5) == index.search(a, 5)
    index.remove("x")
    assert "x" not in index
    assert "x" not in {i for i, _ in index.search(a, len(index))}, "'x' is still found after remove"


def check_remove(factory: IndexFactory, exact: bool) -> None:
    """remove makes an id unfindable and shrinks the index; removing an absent id (or twice) is a no-op."""
    ids, vecs = ids_for(N), clustered(N, seed=7)
    index = build(factory, ids, vecs)
    gone = set(ids[1::10])
    for id_ in sorted(gone):
        index.remove(id_)
    assert len(index) == N - len(gone)
    for id_ in sorted(gone):
        index.remove(id_)  # again
    index.remove("never-added")
    assert len(index) == N - len(gone)
    assert sorted(i for i, _ in index.items()) == sorted(set(ids) - gone)
    for id_, v in zip(ids, vecs, strict=True):
        if id_ in gone:
            assert id_ not in index
            assert id_ not in {i for i, _ in index.search(v, K)}
    kept = [i for i in ids if i not in gone]
    kept_vecs = np.stack([v for i, v in zip(ids, vecs, strict=True) if i not in gone])
    assert_matches_reference(index, reference(kept, kept_vecs), clustered(40, seed=8), exact)


def check_k_larger_than_count(factory: IndexFactory, exact: bool) -> None:
    """Asking for more results than there are vectors returns every vector, best first; k=0 returns nothing."""
    small = factory.new(DIM)
    vecs = clustered(7, seed=9)
    small.add(ids_for(7), vecs)
    q = clustered(1, seed=10)[0]
    got = small.search(q, 50)
    assert sorted(i for i, _ in got) == ids_for(7)
    assert [i for i, _ in got] == [i for i, _ in reference(ids_for(7), vecs).search(q, 50)]
    small.remove("v0003")
    small.remove("v0005")
    assert sorted(i for i, _ in small.search(q, 50)) == ["v0000", "v0001", "v0002", "v0004", "v0006"]
    assert small.search(q, 0) == []

    ids, big_vecs = ids_for(N), clustered(N, seed=11)
    big = build(factory, ids, big_vecs)
    everything = big.search(q, N + 10)
    assert sorted(i for i, _ in everything) == ids
    assert_well_formed(everything, dict(zip(ids, big_vecs, strict=True)), q)


def check_empty(factory: IndexFactory, exact: bool) -> None:
    """An empty index (new, or emptied by removes) has length 0, no items, and searches return []."""
    q = clustered(1, seed=12)[0]
    index = factory.new(DIM)
    assert len(index) == 0
    assert list(index.items()) == []
    assert index.search(q, 5) == []
    restored = factory.load(index.dump())
    assert len(restored) == 0 and restored.search(q, 5) == []
    ids, vecs = ids_for(60), clustered(60, seed=13)
    index = build(factory, ids, vecs)
    for id_ in ids:
        index.remove(id_)
    assert len(index) == 0
    assert list(index.items()) == []
    assert index.search(q, 5) == []
    index.add(["again"], q)  # a single 1-D vector is one row
    assert index.search(q, 5) == [("again", pytest.approx(1.0, abs=SIM_TOL))]


def check_wrong_dimension(factory: IndexFactory, exact: bool) -> None:
    """Vectors of the wrong shape, or not finite, raise IndexMismatch and change nothing."""
    ids, vecs = ids_for(N), clustered(N, seed=14)
    index = build(factory, ids, vecs)
    q = vecs[0]
    before = index.search(q, K)
    bad_adds = [
        (["new"], np.ones((1, DIM - 1), dtype=np.float32)),
        (["new"], np.ones((1, DIM + 1), dtype=np.float32)),
        (["new", "other"], np.ones((1, DIM), dtype=np.float32)),  # fewer rows than ids
        (["new"], np.ones((2, DIM), dtype=np.float32)),  # more rows than ids
        ([ids[0]], np.ones((1, DIM - 1), dtype=np.float32)),  # a replacement of the wrong size
        (["new"], np.full((1, DIM), np.nan, dtype=np.float32)),
        ([ids[1]], np.full((1, DIM), np.inf, dtype=np.float32)),
    ]
    for bad_ids, bad in bad_adds:
        with pytest.raises(IndexMismatch):
            index.add(bad_ids, bad)
        assert len(index) == N
        assert "new" not in index
        assert ids[0] in index and ids[1] in index
    for bad_q in (np.ones(DIM - 1), np.ones(DIM + 1), np.ones((2, DIM)), np.full(DIM, np.nan)):
        with pytest.raises(IndexMismatch):
            index.search(bad_q, K)
    assert index.search(q, K) == before


def check_dump_load_round_trip(factory: IndexFactory, exact: bool) -> None:
    """factory.load(index.dump()) gives an independent index with the same ids, vectors and search results, whether the
    snapshot is bytes of its own or a part of a larger buffer."""
    ids, vecs = ids_for(N), clustered(N, seed=15)
    index = build(factory, ids, vecs)
    for id_ in ids[::7]:
        index.remove(id_)
    index.add(ids[1::11], clustered(len(ids[1::11]), seed=16))
    restored = factory.load(index.dump())
    assert restored.dim == index.dim == DIM
    assert len(restored) == len(index)
    original_items, restored_items = dict(index.items()), dict(restored.items())
    assert sorted(restored_items) == sorted(original_items)
    for id_, v in original_items.items():
        np.testing.assert_allclose(restored_items[id_], v, atol=1e-6)
        assert id_ in restored
    for q in clustered(30, seed=17):
        got, want = restored.search(q, K), index.search(q, K)
        assert [i for i, _ in got] == [i for i, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
    # A snapshot whose parts are read in place, each a part of a larger buffer, loads the same.
    in_place = factory.load([memoryview(b"head" + bytes(part) + b"tail")[4:-4] for part in index.dump()])
    assert [in_place.search(q, K) for q in clustered(5, seed=17)] == [
        restored.search(q, K) for q in clustered(5, seed=17)
    ]
    # The copy is independent: changing it leaves the original alone, and it keeps working.
    restored.remove(ids[1])
    restored.add(["fresh"], clustered(1, seed=18))
    assert ids[1] in index and "fresh" not in index
    assert "fresh" in restored and ids[1] not in restored
    now = dict(restored.items())
    assert_matches_reference(restored, reference(list(now), np.stack(list(now.values()))), clustered(30, 19), exact)


def check_contains_and_items(factory: IndexFactory, exact: bool) -> None:
    """`in` is true exactly for stored ids; items() yields each stored id once with its (unit) vector."""
    ids, vecs = ids_for(N), clustered(N, seed=20)
    index = build(factory, ids, vecs)
    for id_ in ids:
        assert id_ in index
    for other in ("absent", "", 3, None, b"v0000"):
        assert other not in index
    pairs = list(index.items())
    assert len(pairs) == N
    assert sorted(i for i, _ in pairs) == ids
    got = dict(pairs)
    for id_, v in zip(ids, vecs, strict=True):
        assert got[id_].shape == (DIM,)
        np.testing.assert_allclose(got[id_], v, atol=1e-5)


def check_vectors(factory: IndexFactory, exact: bool) -> None:
    """vectors(ids) gives the stored vector of each present id (once, however often asked) and leaves absent, removed
    and non-string ids out; a re-added id gives its new vector; what it returns is a copy."""
    ids, vecs = ids_for(N), clustered(N, seed=21)
    index = build(factory, ids, vecs)
    asked = [ids[5], "absent", ids[7], ids[5], ids[N - 1]]
    got = index.vectors(asked)
    assert sorted(got) == sorted({ids[5], ids[7], ids[N - 1]})
    for id_ in got:
        assert got[id_].shape == (DIM,)
        np.testing.assert_allclose(got[id_], vecs[ids.index(id_)], atol=1e-5)
    assert index.vectors([]) == {}
    assert index.vectors(["absent", 3, None]) == {}  # type: ignore[list-item]
    index.remove(ids[7])
    replacement = clustered(1, seed=22)
    index.add([ids[5]], replacement)
    got = index.vectors([ids[5], ids[7]])
    assert list(got) == [ids[5]]
    np.testing.assert_allclose(got[ids[5]], replacement[0], atol=1e-5)
    got[ids[5]][:] = 0.0  # a copy: the index still holds its vector
    np.testing.assert_allclose(index.vectors([ids[5]])[ids[5]], replacement[0], atol=1e-5)


VECTOR_CHECKS: tuple[Check, ...] = (
    check_search_best_first,
    check_self_match_ranks_first,
    check_readd_replaces,
    check_duplicate_ids_in_one_add,
    check_remove,
    check_k_larger_than_count,
    check_empty,
    check_wrong_dimension,
    check_dump_load_round_trip,
    check_contains_and_items,
    check_vectors,
)


def check_vector_index(factory: IndexFactory, *, exact: bool) -> None:
    """Run every check of the VectorIndex contract against indexes made by ``factory``."""
    for check in VECTOR_CHECKS:
        check(factory, exact)
