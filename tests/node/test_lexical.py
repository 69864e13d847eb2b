"""The BM25 lexical index (node/core/store/lexical.py), on MemoryKV and on RocksKV (the ``backend`` fixture runs
both)."""

from __future__ import annotations

import hashlib
import math
import random
import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gaml.node.core.store import lexical as lexical_mod
from gaml.node.core.store.kv import KV, SPACES, MemoryKV, Op, Put
from gaml.node.core.store.lexical import ANALYZER, STOPWORDS, LexicalIndex, tokenize
from gaml.node.shells.rocks_kv import RocksKV
from gaml.policy import crypto
from gaml.policy.errors import StoreCorrupt

BLIND_KEY = bytes(range(32))
PID_A = b"A" * 16
PID_B = b"B" * 16


def blind(term: str) -> bytes:
    """The test's keyed term hash (the store supplies its own)."""
    return crypto.keyed_hash(BLIND_KEY, b"lexical\x00" + term.encode())


def sid(i: int) -> bytes:
    """A 16-byte sid for document ``i``, in an order unrelated to ``i``."""
    return hashlib.blake2b(i.to_bytes(4, "big"), digest_size=16).digest()


class Backend:
    """One KV of a kind, reopenable over the same data (as after a restart)."""

    def __init__(self, kind: str, path: Path) -> None:
        self.kind, self.path = kind, path
        self.kv: KV = MemoryKV() if kind == "memory" else RocksKV(path)

    def reopen(self) -> KV:
        old = self.kv
        old.close()
        self.kv = old.reopened() if isinstance(old, MemoryKV) else RocksKV(self.path)
        return self.kv

    def fresh(self, name: str) -> KV:
        """Another, empty KV of the same kind."""
        return MemoryKV() if self.kind == "memory" else RocksKV(self.path.parent / name)


@pytest.fixture(params=["memory", "rocks"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b = Backend(request.param, tmp_path / "db")
    yield b
    b.kv.close()


def apply(index: LexicalIndex, kv: KV, changes: list[tuple[bytes, bytes, str | None, str | None]]) -> list[Op]:
    """Commit the ops of several document changes as one batch, then commit the staged statistics."""
    ops: list[Op] = []
    for pid, s, new, old in changes:
        ops += index.doc_ops(pid, s, new, old)
    kv.commit(ops)
    index.commit_staged()
    return ops


def add_all(index: LexicalIndex, kv: KV, pid: bytes, docs: dict[bytes, str]) -> None:
    apply(index, kv, [(pid, s, text, None) for s, text in docs.items()])


def disk_stats(kv: KV) -> dict[bytes, tuple[int, int]]:
    return {key[1:]: struct.unpack(">QQ", value) for key, value in kv.load_range("index", b"l", b"m")}


def recount(kv: KV) -> dict[bytes, tuple[int, int]]:
    """Per-partition (document count, total length) recounted from the postings alone."""
    lengths: dict[bytes, dict[bytes, int]] = {}
    for key, value in kv.load_range("index", b"L", b"M"):
        assert len(key) == 49 and len(value) == 8
        _, dl = struct.unpack(">II", value)
        assert lengths.setdefault(key[1:17], {}).setdefault(key[33:], dl) == dl  # one length per document
    return {pid: (len(d), sum(d.values())) for pid, d in lengths.items()}


def postings(kv: KV) -> dict[bytes, tuple[int, int]]:
    return {key: struct.unpack(">II", value) for key, value in kv.load_range("index", b"L", b"M")}


def expected_postings(docs: dict[tuple[bytes, bytes], str]) -> dict[bytes, tuple[int, int]]:
    out = {}
    for (pid, s), text in docs.items():
        counts = Counter(tokenize(text))
        for term, tf in counts.items():
            out[b"L" + pid + blind(term) + s] = (tf, sum(counts.values()))
    return out


def reference_bm25(docs: dict[bytes, str], query: str) -> list[tuple[bytes, float]]:
    """Textbook BM25 (k1=1.2, b=0.75, idf = ln(1 + (N - df + 0.5)/(df + 0.5))), ranked best first, ties by sid."""
    tokens = {s: tokenize(text) for s, text in docs.items()}
    tokens = {s: t for s, t in tokens.items() if t}
    if not tokens:
        return []
    n = len(tokens)
    avgdl = sum(len(t) for t in tokens.values()) / n
    scores: dict[bytes, float] = {}
    for term in dict.fromkeys(tokenize(query)):
        df = sum(1 for t in tokens.values() if term in t)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for s, t in tokens.items():
            tf = t.count(term)
            if tf:
                scores[s] = scores.get(s, 0.0) + idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(t) / avgdl))
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def assert_ranking(got: list[tuple[str, float]], want: list[tuple[bytes, float]]) -> None:
    """A search's (id, score), ids being the sids in hex (the index's default ``id_of``), against a reference's."""
    assert [i for i, _ in got] == [s.hex() for s, _ in want]
    for (_, g), (_, w) in zip(got, want, strict=True):
        assert abs(g - w) <= 1e-9


CORPUS = {
    sid(0): "Alice prefers green tea in the morning.",
    sid(1): "Bob drinks green tea and black tea, every day; tea is his thing.",
    sid(2): "The dragon guards a hoard of gold under the mountain.",
    sid(3): "Green hills, green fields and a green house.",
    sid(4): "Meeting notes: the quarterly budget for 2025 was approved.",
    sid(5): "Carol's cats prefer fish to tea.",
}


# -- tokenize --------------------------------------------------------------------------------------------------------


def test_tokenize_examples() -> None:
    """Tokens are case-folded word runs, without stopwords, surrounding apostrophes or possessives; numbers stay;
    words of ASCII letters are stemmed (Snowball English)."""
    assert tokenize("The QUICK brown fox, and the lazy dog!") == ["quick", "brown", "fox", "lazi", "dog"]
    assert tokenize("Alice's 'quoted' o'clock it\u2019s") == ["alic", "quot", "o'clock"]
    assert tokenize("budget 2025: 3.14 v2") == ["budget", "2025", "3", "14", "v2"]
    assert tokenize("Straße ÉCOLE ﬁle foo_bar") == ["strass", "école", "file", "foo_bar"]
    assert tokenize("") == [] and tokenize("the of and to ... !!") == []
    assert tokenize("x" * 64 + " " + "y" * 65) == ["x" * 64]
    assert {"the", "a", "and", "of", "is"} <= STOPWORDS and len(STOPWORDS) == 33


def test_tokenize_stems_words_with_snowball_and_other_tokens_minimally() -> None:
    """A word of ASCII letters goes through Snowball English, so a goal finds another form of a word it names; any
    other token only loses a plural s (the minimal stemmer: -ies to -y, keeping -ss, -us, -ees/-oes, short ones)."""
    assert tokenize("painting painted paints paint") == ["paint"] * 4
    assert tokenize("hiking hike hikes connection connected") == ["hike"] * 3 + ["connect"] * 2
    assert tokenize("queries cats horses") == tokenize("query cat horse")
    assert tokenize("2000s x86s o'clocks écoles cafés b2bs") == ["2000", "x86", "o'clock", "école", "café", "b2b"]
    assert tokenize("v2s 3ds") == ["v2s", "3ds"]  # three characters: kept
    assert tokenize("réussies açaís naïves") == ["réussy", "açaí", "naïve"]
    assert ANALYZER == "gaml-lexical-2"


# -- ranking ---------------------------------------------------------------------------------------------------------


def test_bm25_ranks_rare_term_first_and_matches_reference(backend: Backend) -> None:
    """The document with the rare query term ranks first, and every score equals a plain BM25 to 1e-9."""
    index = LexicalIndex(backend.kv, blind)
    add_all(index, backend.kv, PID_A, CORPUS)
    got = index.search(PID_A, "green tea dragon", 10)
    assert got[0][0] == sid(2).hex()
    assert_ranking(got, reference_bm25(CORPUS, "green tea dragon"))
    for query in ("tea", "green", "cat preferring fish", "2025 budget", "Alice's tea", "nothing here"):
        assert_ranking(index.search(PID_A, query, 10), reference_bm25(CORPUS, query))
    assert_ranking(index.search(PID_A, "tea", 2), reference_bm25(CORPUS, "tea")[:2])


@pytest.mark.parametrize(("floor_among", "whole_ratio"), [(lexical_mod.FLOOR_AMONG, lexical_mod.WHOLE_RATIO), (7, 1)])
def test_pruned_search_ranks_as_textbook_bm25_over_skewed_corpora(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, floor_among: int, whole_ratio: int
) -> None:
    """Search prunes (MaxScore: frequent terms are only looked up for the documents rarer ones met); over seeded
    corpora with a Zipf vocabulary, through edits and deletes (retired ordinals), for small and large k and with and
    without an allowed set, it returns exactly the k best of textbook BM25, with the same scores. Also with the floor
    looked for among only the first 7 candidates met, and terms looked up past pruning wherever they can be."""
    monkeypatch.setattr(lexical_mod, "FLOOR_AMONG", floor_among)
    monkeypatch.setattr(lexical_mod, "WHOLE_RATIO", whole_ratio)
    rng = random.Random(11)
    vocabulary = [f"t{i}" for i in range(60)]
    weights = [1.0 / (i + 1) for i in range(60)]
    kv = backend.kv
    index = LexicalIndex(kv, blind)
    docs: dict[bytes, str] = {}
    for round_ in range(6):
        changes: list[tuple[bytes, bytes, str | None, str | None]] = []
        for i in rng.sample(range(400), 150):
            s = sid(i)
            old = docs.get(s)
            if old is not None and rng.random() < 0.2:
                new = None
            elif docs and rng.random() < 0.2:  # the text of another document: equal scores, ties broken by sid
                new = rng.choice(sorted(docs.values()))
            else:
                new = " ".join(rng.choices(vocabulary, weights, k=rng.randint(1, 14)))
            changes.append((PID_A, s, new, old))
            if new is None:
                docs.pop(s, None)
            else:
                docs[s] = new
        apply(index, kv, changes)
        for _ in range(25):
            query = " ".join(rng.choices(vocabulary, weights, k=rng.randint(1, 7)))
            k = rng.choice((1, 2, 5, 10, 40))
            want = reference_bm25(docs, query)
            assert_ranking(index.search(PID_A, query, k), want[:k])
            allowed = {s.hex() for s in docs if rng.random() < 0.3}
            if allowed:
                assert_ranking(index.search(PID_A, query, k, allowed), [w for w in want if w[0].hex() in allowed][:k])
        if round_ == 2:
            kv = backend.reopen()  # postings read back from disk (ordinals in sid order, sorted per term)
            index = LexicalIndex(kv, blind)
    assert index.looked_up > 0  # the pruned path ran (since the reopen)
    assert index.scored_whole > 0  # and past pruning, a term with fewer postings than candidates scored whole


def test_a_frequent_term_is_only_looked_up_once_rarer_ones_decide() -> None:
    """With one rare and one frequent query term and k = 1, the rare term's documents decide the best one: the
    frequent term is only looked up for them, and the answer is still textbook BM25's."""
    kv = MemoryKV()
    index = LexicalIndex(kv, blind)
    docs = {sid(i): f"common filler{i % 7}" for i in range(300)}
    docs[sid(300)] = "rare common"
    docs[sid(301)] = "rare alone here"
    add_all(index, kv, PID_A, docs)
    before = index.looked_up
    assert_ranking(index.search(PID_A, "rare common", 1), reference_bm25(docs, "rare common")[:1])
    assert index.looked_up == before + 1
    assert_ranking(index.search(PID_A, "rare common", 400), reference_bm25(docs, "rare common"))
    assert index.looked_up == before + 1  # k past every match: nothing to prune


def test_factors_kept_from_an_older_average_length_never_change_the_answer() -> None:
    """A search keeps each term's BM25 factors between calls, made at the average document length of the time, and
    prunes with them. After a change of the average length small enough that they are kept (within FACTOR_DRIFT),
    two documents whose order that change flipped are ranked as textbook BM25 ranks them now, with k = 1."""
    kv = MemoryKV()
    index = LexicalIndex(kv, blind)
    docs = {sid(i): "filler " * 5 for i in range(100)}
    docs[sid(100)] = "q " + "filler " * 35  # tf 1, 36 tokens
    docs[sid(101)] = "q q " + "filler " * 72  # tf 2, 74 tokens: closer to the first as the average length grows
    add_all(index, kv, PID_A, docs)
    before = reference_bm25(docs, "q")
    assert before[0][0] == sid(100)
    assert_ranking(index.search(PID_A, "q", 1), before[:1])
    n, total = index.stats(PID_A)
    docs[sid(102)] = "filler " * 10  # the average length grows by 0.65 %
    add_all(index, kv, PID_A, {sid(102): docs[sid(102)]})
    after = reference_bm25(docs, "q")
    assert after[0][0] == sid(101)  # the order flipped
    assert_ranking(index.search(PID_A, "q", 1), after[:1])
    assert_ranking(index.search(PID_A, "q", 2), after)
    now, total_now = index.stats(PID_A)
    assert 1 < (total_now / now) / (total / n) < 1 + lexical_mod.FACTOR_DRIFT
    _, _, made_lowest, made_highest = index._memory[PID_A].terms[blind("q")]._fac
    assert made_lowest == made_highest == total / n  # the factors the first search made were kept, not made again


def test_a_snapshot_with_postings_out_of_order_is_sorted_when_parsed(backend: Backend) -> None:
    """A snapshot whose terms list their documents out of ordinal order (as one dumped from postings read off disk,
    in sid order, could) ranks as the index it was dumped from; one listing a document twice in a term is corrupt."""
    index = LexicalIndex(backend.kv, blind)
    add_all(index, backend.kv, PID_A, {sid(i): " ".join(f"w{(i * j) % 7}" for j in range(1, 6)) for i in range(40)})
    blob = index.dump(PID_A)
    n, m = struct.unpack_from("<QQ", blob, 3)
    head = 3 + 16 + 16 * n + 32 * n + 4 * n + 16 * m
    counts = struct.unpack_from(f"<{m}Q", blob, head)
    at = head + 8 * m
    total = sum(counts)
    docs = list(struct.unpack_from(f"<{total}I", blob, at))
    tfs = list(struct.unpack_from(f"<{total}I", blob, at + 4 * total))
    lo = 0
    for c in counts:  # every term's postings reversed
        docs[lo : lo + c], tfs[lo : lo + c] = docs[lo : lo + c][::-1], tfs[lo : lo + c][::-1]
        lo += c
    shuffled = blob[:at] + struct.pack(f"<{total}I", *docs) + struct.pack(f"<{total}I", *tfs)
    other = LexicalIndex(backend.kv, blind)
    other.load(PID_A, shuffled)
    for query in ("w1", "w2 w3", "w0 w5 w6", "w4 w4 w1"):
        assert other.search(PID_A, query, 7) == index.search(PID_A, query, 7)
    twice = blob[:at] + struct.pack(f"<{total}I", docs[1], *docs[1:]) + blob[at + 4 * total :]
    broken = LexicalIndex(backend.kv, blind)
    broken.load(PID_A, twice)
    with pytest.raises(StoreCorrupt, match="twice"):
        broken.search(PID_A, "w1", 3)


def test_ties_are_broken_by_sid_and_k_bounds_results(backend: Backend) -> None:
    """Documents with equal scores come in sid order; k caps the result; k=0 or an empty query gives nothing."""
    index = LexicalIndex(backend.kv, blind)
    docs = {sid(i): "identical words here" for i in range(6)}
    add_all(index, backend.kv, PID_A, docs)
    got = index.search(PID_A, "identical", 4)
    assert [i for i, _ in got] == [s.hex() for s in sorted(docs)[:4]]
    assert len({score for _, score in got}) == 1
    assert index.search(PID_A, "identical", 0) == []
    assert index.search(PID_A, "the of", 5) == []
    assert index.search(PID_B, "identical", 5) == []
    with pytest.raises(ValueError):
        index.search(PID_A, "identical", -1)


# -- updates ---------------------------------------------------------------------------------------------------------


def test_update_replaces_old_postings_with_new(backend: Backend) -> None:
    """Changing a document's text deletes the postings of terms it lost, adds new ones and rewrites changed ones."""
    kv = backend.kv
    index = LexicalIndex(kv, blind)
    add_all(index, kv, PID_A, {sid(0): "alpha beta beta", sid(1): "beta delta"})
    assert index.stats(PID_A) == (2, 5)
    apply(index, kv, [(PID_A, sid(0), "beta gamma", "alpha beta beta")])
    assert postings(kv) == expected_postings({(PID_A, sid(0)): "beta gamma", (PID_A, sid(1)): "beta delta"})
    assert index.search(PID_A, "alpha", 5) == []
    assert [i for i, _ in index.search(PID_A, "gamma", 5)] == [sid(0).hex()]
    assert index.stats(PID_A) == disk_stats(kv)[PID_A] == (2, 4)
    assert index.doc_ops(PID_A, sid(0), "gamma beta", "beta gamma") == []  # the same terms: nothing to write


def test_delete_removes_every_posting_and_decrements_stats(backend: Backend) -> None:
    """Deleting a document (new_text=None) removes all its postings and takes it out of the statistics."""
    kv = backend.kv
    index = LexicalIndex(kv, blind)
    add_all(index, kv, PID_A, {sid(0): "alpha beta", sid(1): "beta gamma delta"})
    apply(index, kv, [(PID_A, sid(1), None, "beta gamma delta")])
    assert postings(kv) == expected_postings({(PID_A, sid(0)): "alpha beta"})
    assert index.stats(PID_A) == disk_stats(kv)[PID_A] == (1, 2)
    apply(index, kv, [(PID_A, sid(0), None, "alpha beta")])
    assert postings(kv) == {}
    assert index.stats(PID_A) == disk_stats(kv)[PID_A] == (0, 0)
    assert index.search(PID_A, "beta", 5) == []


def test_tokenless_document_is_not_counted(backend: Backend) -> None:
    """A text with no tokens is the same as no text: no postings, no ops, not counted."""
    index = LexicalIndex(backend.kv, blind)
    assert index.doc_ops(PID_A, sid(0), "the of and", None) == []
    assert index.doc_ops(PID_A, sid(0), None, "") == []
    assert index.stats(PID_A) == (0, 0)


def test_ops_are_sorted_and_deterministic(backend: Backend) -> None:
    """doc_ops returns its ops sorted by key, statistics last, and two indexes produce identical ops."""
    other = backend.fresh("other")
    try:
        first = LexicalIndex(backend.kv, blind).doc_ops(PID_A, sid(0), CORPUS[sid(1)], None)
        second = LexicalIndex(other, blind).doc_ops(PID_A, sid(0), CORPUS[sid(1)], None)
    finally:
        other.close()
    assert first == second
    assert [op.key for op in first] == sorted(op.key for op in first)
    assert first[-1] == Put("index", b"l" + PID_A, struct.pack(">QQ", 1, len(tokenize(CORPUS[sid(1)]))))
    assert all(op.space == "index" and op.key[:1] in (b"L", b"l") for op in first)


@pytest.mark.parametrize("terms_kept", [None, 4])
def test_random_batches_keep_stats_equal_to_a_recount(
    backend: Backend, terms_kept: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After 300 seeded adds, edits and deletes in batches of several documents per commit (some abandoned),
    postings match the documents, statistics equal a recount from a full scan, and so after reopening; also when
    the index remembers only 4 blinded terms (its memory of them emptied again and again)."""
    if terms_kept is not None:
        monkeypatch.setattr(lexical_mod, "TERM_KEYS_MAX", terms_kept)
    rng = random.Random(0)
    vocabulary = [f"word{i}" for i in range(25)] + ["the", "and", "cats", "queries"]
    kv = backend.kv
    index = LexicalIndex(kv, blind)
    docs: dict[tuple[bytes, bytes], str] = {}
    done = 0
    while done < 300:
        size = rng.randint(1, 8)
        before = dict(docs)
        ops: list[Op] = []
        for _ in range(size):
            key = (rng.choice((PID_A, PID_B)), sid(rng.randrange(40)))
            old = docs.get(key)
            if old is not None and rng.random() < 0.3:
                new = None
            else:
                new = " ".join(rng.choices(vocabulary, k=rng.randint(0, 12)))
            ops += index.doc_ops(*key, new, old)
            if new is None:
                del docs[key]
            else:
                docs[key] = new
        done += size
        if rng.random() < 0.15:  # the commit fails: nothing is written
            index.discard_staged()
            docs = before
        else:
            kv.commit(ops)
            index.commit_staged()
        for pid in (PID_A, PID_B):
            assert index.stats(pid) == disk_stats(kv).get(pid, (0, 0))

    def check(idx: LexicalIndex, store: KV) -> None:
        assert postings(store) == expected_postings(docs)
        counted = recount(store)
        for pid in (PID_A, PID_B):
            assert idx.stats(pid) == disk_stats(store)[pid] == counted.get(pid, (0, 0))
            texts = {s: text for (p, s), text in docs.items() if p == pid}
            for query in ("word1 word2", "word7", "cat query word3 word3"):
                assert_ranking(idx.search(pid, query, 50), reference_bm25(texts, query))

    check(index, kv)
    kv = backend.reopen()
    check(LexicalIndex(kv, blind), kv)


def test_postings_in_memory_follow_every_commit_and_discard(backend: Backend) -> None:
    """Searched after every batch (so the postings in memory are built early and then kept in step), the index ranks
    exactly as textbook BM25 over the documents, through adds, edits, deletes, abandoned commits, a commit reported as
    failed that in fact landed, and edits enough to retire most ordinals (the partition is then compacted in memory)."""
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(12)]
    kv = backend.kv
    index = LexicalIndex(kv, blind)
    docs: dict[bytes, str] = {}
    queries = ("w1", "w2 w3", "w0 w5 w5 w11")

    def check() -> None:
        for query in queries:
            assert_ranking(index.search(PID_A, query, 20), reference_bm25(docs, query))

    check()
    for step in range(400):
        before = dict(docs)
        ops: list[Op] = []
        for _ in range(rng.randint(1, 6)):
            s = sid(rng.randrange(25))
            old = docs.get(s)
            new = (
                None
                if old is not None and rng.random() < 0.25
                else " ".join(rng.choices(vocabulary, k=rng.randint(1, 8)))
            )
            ops += index.doc_ops(PID_A, s, new, old)
            if new is None:
                del docs[s]
            else:
                docs[s] = new
        roll = rng.random()
        if roll < 0.1:  # abandoned: nothing written
            index.discard_staged()
            docs = before
        elif roll < 0.15:  # reported as failed, but written: disk is the truth
            kv.commit(ops)
            index.discard_staged()
        else:
            kv.commit(ops)
            index.commit_staged()
        if step % 3 == 0:
            check()
    # Thousands of edits of a few documents: most ordinals retired, so the partition is read again from disk.
    for n in range(5000):
        s = sid(n % 5)
        old = docs.get(s)
        new = f"w{n % 12} w{(n * 7) % 12}"
        kv.commit(index.doc_ops(PID_A, s, new, old))
        index.commit_staged()
        docs[s] = new
    check()
    assert index._memory[PID_A].count <= 4097  # compacted in memory: without it, 5,000 ordinals and more


def test_a_search_between_a_commit_and_its_report_sees_the_disk(backend: Backend) -> None:
    """Postings first needed while ops are staged whose commit has landed but not reported back are read from disk
    for that search and not kept; the report then brings the postings in memory up to date."""
    kv = backend.kv
    index = LexicalIndex(kv, blind)
    add_all(index, kv, PID_A, {sid(0): "alpha beta", sid(1): "gamma"})
    fresh = LexicalIndex(kv, blind)  # nothing in memory yet
    assert fresh.stats(PID_A) == (2, 3)
    ops = fresh.doc_ops(PID_A, sid(2), "alpha delta", None)
    kv.commit(ops)
    assert [i for i, _ in fresh.search(PID_A, "delta", 5)] == [sid(2).hex()]  # the postings on disk …
    assert PID_A not in fresh._memory  # … read for this search and not kept
    fresh.commit_staged()
    assert [i for i, _ in fresh.search(PID_A, "delta alpha", 5)] == [sid(2).hex(), sid(0).hex()]


class ScanCountingKV:
    """A KV that counts the range scans of the lexical postings (``L`` keys of the ``index`` space)."""

    def __init__(self, kv: KV) -> None:
        self.kv = kv
        self.posting_scans = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.kv, name)

    def load_range(self, space: str, start: bytes = b"", *args: Any, **options: Any) -> Iterator[tuple[bytes, bytes]]:
        if space == "index" and start.startswith(b"L"):
            self.posting_scans += 1
        return self.kv.load_range(space, start, *args, **options)


def test_a_partition_made_in_this_process_is_searched_without_a_scan(backend: Backend) -> None:
    """A partition with no postings before a commit starts in memory and follows every commit (adds, edits, deletes,
    a discarded batch): its searches read no posting from disk and rank as textbook BM25. A partition that had
    postings on disk before this index saw it is still read from disk once, never taken for empty."""
    counting = ScanCountingKV(backend.kv)
    index = LexicalIndex(counting, blind)  # type: ignore[arg-type]
    docs = dict(CORPUS)
    add_all(index, counting, PID_A, docs)  # type: ignore[arg-type]
    apply(index, counting, [(PID_A, sid(1), "green tea again", docs[sid(1)]), (PID_A, sid(2), None, docs[sid(2)])])  # type: ignore[arg-type]
    docs[sid(1)] = "green tea again"
    del docs[sid(2)]
    index.doc_ops(PID_A, sid(9), "tea tea tea", None)
    index.discard_staged()  # abandoned: nothing written, and the partition is read again from disk
    apply(index, counting, [(PID_A, sid(9), "dragon tea", None)])  # type: ignore[arg-type]
    docs[sid(9)] = "dragon tea"
    counting.posting_scans = 0
    fresh = {sid(20): "a new partition of tea", sid(21): "and of green dragons"}
    add_all(index, counting, PID_B, fresh)  # type: ignore[arg-type]
    for query in ("green tea", "dragon", "tea hoard gold"):
        assert_ranking(index.search(PID_B, query, 10), reference_bm25(fresh, query))
    assert counting.posting_scans == 0  # PID_B: all in memory since its first commit
    for query in ("green tea", "dragon", "tea hoard gold"):
        assert_ranking(index.search(PID_A, query, 10), reference_bm25(docs, query))
    assert counting.posting_scans == 1  # PID_A: dropped by the discard, so read from disk once
    reopened = LexicalIndex(counting, blind)  # type: ignore[arg-type]
    add_all(reopened, counting, PID_B, {sid(22): "tea at last"})  # type: ignore[arg-type]
    fresh[sid(22)] = "tea at last"
    assert_ranking(reopened.search(PID_B, "tea", 10), reference_bm25(fresh, "tea"))
    assert counting.posting_scans == 2  # postings on disk before: read, not taken for empty


def test_discarded_ops_leave_the_cache_equal_to_disk(backend: Backend) -> None:
    """Ops produced and then discarded (the commit failed) leave the statistics equal to disk, and the next
    commit builds on disk; if a commit reported as failed had in fact landed, the index rereads it."""
    kv = backend.kv
    index = LexicalIndex(kv, blind)
    add_all(index, kv, PID_A, {sid(0): "alpha beta", sid(1): "gamma"})
    assert index.stats(PID_A) == (2, 3)
    for i in range(2, 6):
        index.doc_ops(PID_A, sid(i), "delta epsilon", None)
    index.doc_ops(PID_A, sid(0), None, "alpha beta")
    index.doc_ops(PID_B, sid(0), "zeta", None)
    assert index.has_staged()
    index.discard_staged()
    assert not index.has_staged()
    assert index.stats(PID_A) == disk_stats(kv)[PID_A] == (2, 3)
    assert index.stats(PID_B) == (0, 0) and PID_B not in disk_stats(kv)
    apply(index, kv, [(PID_A, sid(1), None, "gamma")])
    assert index.stats(PID_A) == disk_stats(kv)[PID_A] == recount(kv)[PID_A] == (1, 2)
    ops = index.doc_ops(PID_A, sid(1), "gamma gamma", None)
    kv.commit(ops)
    index.discard_staged()  # the store saw an error, but the batch was written
    assert index.stats(PID_A) == disk_stats(kv)[PID_A] == recount(kv)[PID_A] == (2, 4)


def test_wrong_old_text_is_refused() -> None:
    """An old text the index never held, driving a statistic below zero, raises StoreCorrupt."""
    index = LexicalIndex(MemoryKV(), blind)
    with pytest.raises(StoreCorrupt):
        index.doc_ops(PID_A, sid(0), None, "never indexed")


def test_bad_ids_and_blinds_are_refused() -> None:
    """pid and sid must be 16 bytes, and blind must return 16 bytes."""
    index = LexicalIndex(MemoryKV(), blind)
    with pytest.raises(ValueError):
        index.doc_ops(b"short", sid(0), "text", None)
    with pytest.raises(ValueError):
        index.doc_ops(PID_A, b"x" * 17, "text", None)
    with pytest.raises(ValueError):
        index.search(b"", "text", 3)
    with pytest.raises(ValueError):
        LexicalIndex(MemoryKV(), lambda term: term.encode()).doc_ops(PID_A, sid(0), "text", None)


# -- privacy ---------------------------------------------------------------------------------------------------------


def test_allowed_filter_excludes_before_ranking_and_keeps_scores(backend: Backend) -> None:
    """A rejected document is never returned, even when it would rank first, and every allowed document keeps
    the score it has without the filter (idf counts the whole partition); the k best are the k best allowed ones,
    whether the allowed set is larger or smaller than the documents that match."""
    index = LexicalIndex(backend.kv, blind)
    add_all(index, backend.kv, PID_A, CORPUS)
    rejected = {sid(1).hex(), sid(2).hex()}
    allowed = {s.hex() for s in CORPUS} - rejected
    query = "green tea dragon"
    unfiltered = dict(index.search(PID_A, query, 10))
    got = index.search(PID_A, query, 10, allowed)
    assert not rejected & {i for i, _ in got}
    assert got == [(i, score) for i, score in index.search(PID_A, query, 10) if i not in rejected]
    assert all(score == unfiltered[i] for i, score in got)
    assert index.search(PID_A, "dragon", 1, allowed) == []  # only the rejected document has the term
    assert index.search(PID_A, "tea", 1, allowed) == [index.search(PID_A, "tea", 10, allowed)[0]]
    # A small allowed set (fewer ids than matching documents) and a large one (ids of no document, too) agree.
    small = {sid(3).hex()}
    assert index.search(PID_A, query, 10, small) == [(sid(3).hex(), unfiltered[sid(3).hex()])]
    large = allowed | {sid(i).hex() for i in range(100, 200)}
    assert index.search(PID_A, query, 10, large) == got
    assert index.search(PID_A, query, 10, set()) == []


def test_partitions_are_independent(backend: Backend) -> None:
    """Postings in partition A change neither the results nor the statistics of partition B."""
    kv = backend.kv
    index = LexicalIndex(kv, blind)
    docs_b = {sid(100): "zebra stripes", sid(101): "a horse in a field", sid(102): "zebra zebra crossing"}
    add_all(index, kv, PID_A, {sid(i): "zebra " * (i % 4 + 1) + "savanna" for i in range(30)})
    add_all(index, kv, PID_B, docs_b)
    alone = backend.fresh("alone")
    try:
        only_b = LexicalIndex(alone, blind)
        add_all(only_b, alone, PID_B, docs_b)
        for query in ("zebra", "savanna", "horse zebra"):
            assert index.search(PID_B, query, 10) == only_b.search(PID_B, query, 10)
            assert_ranking(index.search(PID_B, query, 10), reference_bm25(docs_b, query))
        assert index.stats(PID_B) == only_b.stats(PID_B)
    finally:
        alone.close()
    assert index.search(PID_B, "savanna", 10) == []
    assert all(bytes.fromhex(i) not in docs_b for i, _ in index.search(PID_A, "zebra", 100))


def test_no_term_is_stored_in_the_clear(backend: Backend) -> None:
    """No indexed term (nor the raw text) appears in any key or value of any space."""
    kv = backend.kv
    index = LexicalIndex(kv, blind)
    docs = {sid(0): "Confidential diagnosis: hypertension", sid(1): "Zanzibar password hunter2 budget"}
    add_all(index, kv, PID_A, docs)
    apply(index, kv, [(PID_A, sid(1), "Zanzibar password rotated", docs[sid(1)])])
    secrets = {t for text in docs.values() for t in tokenize(text)} | {"rotated", "Confidential", "Zanzibar"}
    assert min(len(t) for t in secrets) >= 6
    blobs = [part for space in SPACES for item in kv.load_range(space) for part in item]
    assert blobs
    for term in secrets:
        assert not any(term.encode() in blob for blob in blobs), term


@pytest.mark.parametrize("n", [0, 1, 1023, 1024, 1025, 3000])
def test_postings_made_at_once_are_those_made_one_document_at_a_time(n: int) -> None:
    """A snapshot's documents are taken in at once (``_Postings.of``): the same ordinals, ids, lengths and live marks
    as adding them one by one, a sid given twice included (the later ordinal is its own), and room to add more."""
    rng = random.Random(n)
    sids = [rng.randbytes(16) for _ in range(n)]
    ids = [s.hex() for s in sids]
    if n > 1:  # the last document has the first one's sid (its id another)
        sids[-1], ids[-1] = sids[0], rng.randbytes(16).hex()
    lengths = np.array([rng.randrange(1, 50) for _ in range(n)], np.uint32)
    one = lexical_mod._Postings()
    for s, i, ln in zip(sids, ids, lengths.tolist(), strict=True):
        one._new(s, i, ln)
    bulk = lexical_mod._Postings.of(list(sids), list(ids), lengths)
    assert (bulk.count, bulk.sids, bulk.ids, bulk.ordinal, bulk.by_id) == (
        one.count,
        one.sids,
        one.ids,
        one.ordinal,
        one.by_id,
    )
    assert np.array_equal(bulk.length[:n], one.length[:n]) and bulk.alive[:n].all() and not bulk.alive[n:].any()
    assert len(bulk.length) == len(bulk.alive) >= max(n, 1024)
    assert bulk._new(b"\xff" * 16, "ff" * 16, 7) == n and bulk.length[n] == 7
