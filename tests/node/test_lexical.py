"""The BM25 lexical index (node/core/store/lexical.py): postings in memory, staged until the store's commit, written
only into snapshots (``dump``, ``load``) and made from documents (``build``) where none can be loaded."""

from __future__ import annotations

import hashlib
import math
import random
import struct
from collections import Counter

import numpy as np
import pytest

from gaml.node.core.store import lexical as lexical_mod
from gaml.node.core.store.lexical import ANALYZER, STOPWORDS, LexicalIndex, tokenize
from gaml.policy import crypto
from gaml.policy.errors import StoreCorrupt
from tests.node.conftest import live_postings

BLIND_KEY = bytes(range(32))
PID_A = b"A" * 16
PID_B = b"B" * 16

Docs = dict[tuple[bytes, bytes], str]


def blind(term: str) -> bytes:
    """The test's keyed term hash (the store supplies its own)."""
    return crypto.keyed_hash(BLIND_KEY, b"lexical\x00" + term.encode())


def sid(i: int) -> bytes:
    """A 16-byte sid for document ``i``, in an order unrelated to ``i``."""
    return hashlib.blake2b(i.to_bytes(4, "big"), digest_size=16).digest()


def apply(index: LexicalIndex, changes: list[tuple[bytes, bytes, str | None]]) -> None:
    """Stage several document changes, as one commit, and report the commit as done."""
    for pid, s, new in changes:
        index.stage(pid, s, new)
    index.commit_staged()


def add_all(index: LexicalIndex, pid: bytes, docs: dict[bytes, str]) -> None:
    apply(index, [(pid, s, text) for s, text in docs.items()])


def reloaded(index: LexicalIndex, pids: tuple[bytes, ...] = (PID_A, PID_B)) -> LexicalIndex:
    """Another index holding what ``index`` dumps for ``pids``: as a store reopened from its snapshots."""
    other = LexicalIndex(blind)
    for pid in pids:
        other.load(pid, index.dump(pid))
    return other


def postings(index: LexicalIndex, pids: tuple[bytes, ...] = (PID_A, PID_B)) -> dict[bytes, tuple[int, int]]:
    """Every live posting in memory: pid + blind(term) + sid -> (term frequency, document length)."""
    return {pid + b + bytes.fromhex(i): v for pid in pids for (b, i), v in live_postings(index, pid).items()}


def expected_postings(docs: Docs) -> dict[bytes, tuple[int, int]]:
    out = {}
    for (pid, s), text in docs.items():
        counts = Counter(tokenize(text))
        for term, tf in counts.items():
            out[pid + blind(term) + s] = (tf, sum(counts.values()))
    return out


def recount(docs: Docs, pid: bytes) -> tuple[int, int]:
    """(document count, total length) of a partition, counted from its documents' texts."""
    lengths = [len(tokenize(text)) for (p, _), text in docs.items() if p == pid]
    return sum(1 for n in lengths if n), sum(lengths)


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


def test_bm25_ranks_rare_term_first_and_matches_reference() -> None:
    """The document with the rare query term ranks first, and every score equals a plain BM25 to 1e-9."""
    index = LexicalIndex(blind)
    add_all(index, PID_A, CORPUS)
    got = index.search(PID_A, "green tea dragon", 10)
    assert got[0][0] == sid(2).hex()
    assert_ranking(got, reference_bm25(CORPUS, "green tea dragon"))
    for query in ("tea", "green", "cat preferring fish", "2025 budget", "Alice's tea", "nothing here"):
        assert_ranking(index.search(PID_A, query, 10), reference_bm25(CORPUS, query))
    assert_ranking(index.search(PID_A, "tea", 2), reference_bm25(CORPUS, "tea")[:2])


@pytest.mark.parametrize(("floor_among", "whole_ratio"), [(lexical_mod.FLOOR_AMONG, lexical_mod.WHOLE_RATIO), (7, 1)])
def test_pruned_search_ranks_as_textbook_bm25_over_skewed_corpora(
    monkeypatch: pytest.MonkeyPatch, floor_among: int, whole_ratio: int
) -> None:
    """Search prunes (MaxScore: frequent terms are only looked up for the documents rarer ones met); over seeded
    corpora with a Zipf vocabulary, through edits and deletes (retired ordinals) and a reload from a snapshot, for
    small and large k and with and without an allowed set, it returns exactly the k best of textbook BM25, with the
    same scores. Also with the floor looked for among only the first 7 candidates met, and terms looked up past
    pruning wherever they can be."""
    monkeypatch.setattr(lexical_mod, "FLOOR_AMONG", floor_among)
    monkeypatch.setattr(lexical_mod, "WHOLE_RATIO", whole_ratio)
    rng = random.Random(11)
    vocabulary = [f"t{i}" for i in range(60)]
    weights = [1.0 / (i + 1) for i in range(60)]
    index = LexicalIndex(blind)
    docs: dict[bytes, str] = {}
    for round_ in range(6):
        changes: list[tuple[bytes, bytes, str | None]] = []
        for i in rng.sample(range(400), 150):
            s = sid(i)
            old = docs.get(s)
            if old is not None and rng.random() < 0.2:
                new = None
            elif docs and rng.random() < 0.2:  # the text of another document: equal scores, ties broken by sid
                new = rng.choice(sorted(docs.values()))
            else:
                new = " ".join(rng.choices(vocabulary, weights, k=rng.randint(1, 14)))
            changes.append((PID_A, s, new))
            if new is None:
                docs.pop(s, None)
            else:
                docs[s] = new
        apply(index, changes)
        for _ in range(25):
            query = " ".join(rng.choices(vocabulary, weights, k=rng.randint(1, 7)))
            k = rng.choice((1, 2, 5, 10, 40))
            want = reference_bm25(docs, query)
            assert_ranking(index.search(PID_A, query, k), want[:k])
            allowed = {s.hex() for s in docs if rng.random() < 0.3}
            if allowed:
                assert_ranking(index.search(PID_A, query, k, allowed), [w for w in want if w[0].hex() in allowed][:k])
        if round_ == 2:
            index = reloaded(index, (PID_A,))  # compacted ordinals, searched from a snapshot's arrays
    assert index.looked_up > 0  # the pruned path ran (since the reload)
    assert index.scored_whole > 0  # and past pruning, a term with fewer postings than candidates scored whole


def test_a_frequent_term_is_only_looked_up_once_rarer_ones_decide() -> None:
    """With one rare and one frequent query term and k = 1, the rare term's documents decide the best one: the
    frequent term is only looked up for them, and the answer is still textbook BM25's."""
    index = LexicalIndex(blind)
    docs = {sid(i): f"common filler{i % 7}" for i in range(300)}
    docs[sid(300)] = "rare common"
    docs[sid(301)] = "rare alone here"
    add_all(index, PID_A, docs)
    before = index.looked_up
    assert_ranking(index.search(PID_A, "rare common", 1), reference_bm25(docs, "rare common")[:1])
    assert index.looked_up == before + 1
    assert_ranking(index.search(PID_A, "rare common", 400), reference_bm25(docs, "rare common"))
    assert index.looked_up == before + 1  # k past every match: nothing to prune


def test_factors_kept_from_an_older_average_length_never_change_the_answer() -> None:
    """A search keeps each term's BM25 factors between calls, made at the average document length of the time, and
    prunes with them. After a change of the average length small enough that they are kept (within FACTOR_DRIFT),
    two documents whose order that change flipped are ranked as textbook BM25 ranks them now, with k = 1."""
    index = LexicalIndex(blind)
    docs = {sid(i): "filler " * 5 for i in range(100)}
    docs[sid(100)] = "q " + "filler " * 35  # tf 1, 36 tokens
    docs[sid(101)] = "q q " + "filler " * 72  # tf 2, 74 tokens: closer to the first as the average length grows
    add_all(index, PID_A, docs)
    before = reference_bm25(docs, "q")
    assert before[0][0] == sid(100)
    assert_ranking(index.search(PID_A, "q", 1), before[:1])
    n, total = index.stats(PID_A)
    docs[sid(102)] = "filler " * 10  # the average length grows by 0.65 %
    add_all(index, PID_A, {sid(102): docs[sid(102)]})
    after = reference_bm25(docs, "q")
    assert after[0][0] == sid(101)  # the order flipped
    assert_ranking(index.search(PID_A, "q", 1), after[:1])
    assert_ranking(index.search(PID_A, "q", 2), after)
    now, total_now = index.stats(PID_A)
    assert 1 < (total_now / now) / (total / n) < 1 + lexical_mod.FACTOR_DRIFT
    _, _, made_lowest, made_highest = index._memory[PID_A].terms[blind("q")]._fac
    assert made_lowest == made_highest == total / n  # the factors the first search made were kept, not made again


def test_a_snapshot_with_postings_out_of_order_is_sorted_when_parsed() -> None:
    """A snapshot whose terms list their documents out of ordinal order (as one an earlier GAML dumped from postings
    read off disk, in sid order, could) ranks as the index it was dumped from; one listing a document twice in a term
    is corrupt, and the partition is made from its documents instead (never taken for empty)."""
    index = LexicalIndex(blind)
    texts = {sid(i): " ".join(f"w{(i * j) % 7}" for j in range(1, 6)) for i in range(40)}
    add_all(index, PID_A, texts)
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
    other = LexicalIndex(blind)
    other.load(PID_A, shuffled)
    for query in ("w1", "w2 w3", "w0 w5 w6", "w4 w4 w1"):
        assert other.search(PID_A, query, 7) == index.search(PID_A, query, 7)
    twice = blob[:at] + struct.pack(f"<{total}I", docs[1], *docs[1:]) + blob[at + 4 * total :]
    with pytest.raises(StoreCorrupt, match="twice"):
        LexicalIndex._parse(twice)
    broken = LexicalIndex(blind, documents=lambda pid: texts.items() if pid == PID_A else ())
    broken.load(PID_A, twice)
    assert broken.search(PID_A, "w1 w2", 7) == index.search(PID_A, "w1 w2", 7)
    assert broken.remade == 1 and broken.stats(PID_A) == index.stats(PID_A)


def test_a_snapshot_of_another_analyzer_or_none_is_not_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Postings dumped under another analyzer's name (or bytes that are not a dump) are refused with ValueError, and
    what the index held of the partition stays: the store then makes them from its records."""
    index = LexicalIndex(blind)
    add_all(index, PID_A, CORPUS)
    monkeypatch.setattr(lexical_mod, "SNAPSHOT_MAGIC", b"LX1")
    earlier = index.dump(PID_A)
    monkeypatch.undo()
    other = LexicalIndex(blind)
    add_all(other, PID_A, {sid(9): "dragon tea"})
    for blob in (earlier, b"", b"LX2", b"not postings at all, but long enough"):
        with pytest.raises(ValueError):
            other.load(PID_A, blob)
    assert [i for i, _ in other.search(PID_A, "dragon", 5)] == [sid(9).hex()]


def test_ties_are_broken_by_sid_and_k_bounds_results() -> None:
    """Documents with equal scores come in sid order; k caps the result; k=0 or an empty query gives nothing."""
    index = LexicalIndex(blind)
    docs = {sid(i): "identical words here" for i in range(6)}
    add_all(index, PID_A, docs)
    got = index.search(PID_A, "identical", 4)
    assert [i for i, _ in got] == [s.hex() for s in sorted(docs)[:4]]
    assert len({score for _, score in got}) == 1
    assert index.search(PID_A, "identical", 0) == []
    assert index.search(PID_A, "the of", 5) == []
    assert index.search(PID_B, "identical", 5) == []
    with pytest.raises(ValueError):
        index.search(PID_A, "identical", -1)


# -- updates ---------------------------------------------------------------------------------------------------------


def test_update_replaces_old_postings_with_new() -> None:
    """Changing a document's text drops the postings of terms it lost, adds new ones and changes the rest."""
    index = LexicalIndex(blind)
    add_all(index, PID_A, {sid(0): "alpha beta beta", sid(1): "beta delta"})
    assert index.stats(PID_A) == (2, 5)
    apply(index, [(PID_A, sid(0), "beta gamma")])
    assert postings(index) == expected_postings({(PID_A, sid(0)): "beta gamma", (PID_A, sid(1)): "beta delta"})
    assert index.search(PID_A, "alpha", 5) == []
    assert [i for i, _ in index.search(PID_A, "gamma", 5)] == [sid(0).hex()]
    assert index.stats(PID_A) == (2, 4)


def test_delete_removes_every_posting_and_decrements_stats() -> None:
    """Deleting a document (text None) removes all its postings and takes it out of the statistics."""
    index = LexicalIndex(blind)
    add_all(index, PID_A, {sid(0): "alpha beta", sid(1): "beta gamma delta"})
    apply(index, [(PID_A, sid(1), None)])
    assert postings(index) == expected_postings({(PID_A, sid(0)): "alpha beta"})
    assert index.stats(PID_A) == (1, 2)
    apply(index, [(PID_A, sid(0), None)])
    assert postings(index) == {}
    assert index.stats(PID_A) == (0, 0)
    assert index.search(PID_A, "beta", 5) == []
    apply(index, [(PID_A, sid(7), None)])  # a document the index never held: nothing to take out
    assert index.stats(PID_A) == (0, 0)


def test_tokenless_document_is_not_counted() -> None:
    """A text with no tokens is the same as no text: no postings, not counted; one that loses its tokens leaves."""
    index = LexicalIndex(blind)
    apply(index, [(PID_A, sid(0), "the of and"), (PID_A, sid(1), "")])
    assert index.stats(PID_A) == (0, 0) and postings(index) == {}
    apply(index, [(PID_A, sid(0), "tea"), (PID_A, sid(0), "and the")])
    assert index.stats(PID_A) == (0, 0) and postings(index) == {}


def test_staged_changes_take_effect_only_when_their_commit_is_reported() -> None:
    """A staged change is invisible (search, statistics) until ``commit_staged``; ``discard_staged`` drops it, and the
    next commit builds on what was there before; changes staged for one commit apply in call order."""
    index = LexicalIndex(blind)
    add_all(index, PID_A, {sid(0): "alpha beta", sid(1): "gamma"})
    for i in range(2, 6):
        index.stage(PID_A, sid(i), "delta epsilon")
    index.stage(PID_A, sid(0), None)
    index.stage(PID_B, sid(0), "zeta")
    assert index.has_staged()
    assert index.stats(PID_A) == (2, 3) and index.search(PID_A, "delta", 5) == []
    index.discard_staged()
    assert not index.has_staged()
    assert index.stats(PID_A) == (2, 3) and index.stats(PID_B) == (0, 0)
    assert postings(index) == expected_postings({(PID_A, sid(0)): "alpha beta", (PID_A, sid(1)): "gamma"})
    index.stage(PID_A, sid(1), "gamma gamma")
    index.stage(PID_A, sid(1), "gamma delta delta")  # the later change of one commit wins
    assert index.stats(PID_A) == (2, 3)
    index.commit_staged()
    assert not index.has_staged()
    assert index.stats(PID_A) == (2, 5)
    assert [i for i, _ in index.search(PID_A, "delta", 5)] == [sid(1).hex()]


def test_dumps_are_deterministic_and_hold_the_partition() -> None:
    """Two indexes given the same documents dump the same bytes; a reload answers as the index it came from, and a
    partition the index holds nothing of dumps (and reloads) as empty."""
    first, second = LexicalIndex(blind), LexicalIndex(blind)
    add_all(first, PID_A, CORPUS)
    add_all(second, PID_A, CORPUS)
    assert first.dump(PID_A) == second.dump(PID_A)
    again = reloaded(first)
    for query in ("green tea", "dragon", "2025"):
        assert again.search(PID_A, query, 10) == first.search(PID_A, query, 10)
    assert again.stats(PID_A) == first.stats(PID_A) and again.stats(PID_B) == (0, 0)
    assert again.dump(PID_A) == first.dump(PID_A)  # as loaded, not parsed and made again


@pytest.mark.parametrize("terms_kept", [None, 4])
def test_random_batches_keep_stats_equal_to_a_recount(terms_kept: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """After 300 seeded adds, edits and deletes in batches of several documents per commit (some abandoned), the
    postings match the documents and the statistics equal a recount of them, and so after a reload from a snapshot
    and after a build from the documents; also when the index remembers only 4 blinded terms (its memory of them
    emptied again and again)."""
    if terms_kept is not None:
        monkeypatch.setattr(lexical_mod, "TERM_KEYS_MAX", terms_kept)
    rng = random.Random(0)
    vocabulary = [f"word{i}" for i in range(25)] + ["the", "and", "cats", "queries"]
    index = LexicalIndex(blind)
    docs: Docs = {}
    done = 0
    while done < 300:
        size = rng.randint(1, 8)
        before = dict(docs)
        for _ in range(size):
            key = (rng.choice((PID_A, PID_B)), sid(rng.randrange(40)))
            new = (
                None if key in docs and rng.random() < 0.3 else " ".join(rng.choices(vocabulary, k=rng.randint(0, 12)))
            )
            index.stage(*key, new)
            if new is None:
                del docs[key]
            else:
                docs[key] = new
        done += size
        if rng.random() < 0.15:  # the commit fails: nothing changes
            index.discard_staged()
            docs = before
        else:
            index.commit_staged()
        for pid in (PID_A, PID_B):
            assert index.stats(pid) == recount(docs, pid)

    def check(idx: LexicalIndex) -> None:
        assert postings(idx) == expected_postings(docs)
        for pid in (PID_A, PID_B):
            assert idx.stats(pid) == recount(docs, pid)
            texts = {s: text for (p, s), text in docs.items() if p == pid}
            for query in ("word1 word2", "word7", "cat query word3 word3"):
                assert_ranking(idx.search(pid, query, 50), reference_bm25(texts, query))

    check(index)
    check(reloaded(index))
    built = LexicalIndex(blind)
    for pid in (PID_A, PID_B):
        assert built.build(pid, [(s, text) for (p, s), text in docs.items() if p == pid]) == recount(docs, pid)[0]
    check(built)


def test_postings_in_memory_follow_every_commit_and_discard() -> None:
    """Searched after every batch, the index ranks exactly as textbook BM25 over the documents, through adds, edits,
    deletes, abandoned commits, and edits enough to retire most ordinals (the partition is then compacted in
    memory)."""
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(12)]
    index = LexicalIndex(blind)
    docs: dict[bytes, str] = {}
    queries = ("w1", "w2 w3", "w0 w5 w5 w11")

    def check() -> None:
        for query in queries:
            assert_ranking(index.search(PID_A, query, 20), reference_bm25(docs, query))

    check()
    for step in range(400):
        before = dict(docs)
        for _ in range(rng.randint(1, 6)):
            s = sid(rng.randrange(25))
            new = None if s in docs and rng.random() < 0.25 else " ".join(rng.choices(vocabulary, k=rng.randint(1, 8)))
            index.stage(PID_A, s, new)
            if new is None:
                del docs[s]
            else:
                docs[s] = new
        if rng.random() < 0.1:  # abandoned: nothing written
            index.discard_staged()
            docs = before
        else:
            index.commit_staged()
        if step % 3 == 0:
            check()
    # Thousands of edits of a few documents: most ordinals retired, so the partition is compacted.
    for n in range(5000):
        s = sid(n % 5)
        new = f"w{n % 12} w{(n * 7) % 12}"
        apply(index, [(PID_A, s, new)])
        docs[s] = new
    check()
    assert index._memory[PID_A].count <= 4097  # compacted in memory: without it, 5,000 ordinals and more


def test_replay_and_build_give_the_postings_the_commits_gave() -> None:
    """``replace`` (the store's replay of its journal after a snapshot) takes a change at once, on a snapshot's
    postings too; ``build`` (a partition without a usable snapshot) makes them from the documents, dropping what was
    held. Either way the index answers as the one the commits made; a build is refused while the partition has
    changes staged."""
    index = LexicalIndex(blind)
    add_all(index, PID_A, CORPUS)
    snapshot = index.dump(PID_A)
    apply(index, [(PID_A, sid(1), "green dragon tea"), (PID_A, sid(2), None), (PID_A, sid(9), "a tea hoard")])
    replayed = LexicalIndex(blind)
    replayed.load(PID_A, snapshot)
    replayed.replace(PID_A, sid(1), "green dragon tea")
    replayed.replace(PID_A, sid(2), None)
    replayed.replace(PID_A, sid(9), "a tea hoard")
    docs = {**CORPUS, sid(1): "green dragon tea", sid(9): "a tea hoard"}
    del docs[sid(2)]
    built = LexicalIndex(blind)
    add_all(built, PID_A, {sid(50): "something else entirely"})  # dropped by the build
    assert built.build(PID_A, [*docs.items(), (sid(60), None), (sid(61), "the and")]) == len(docs)
    for query in ("green tea", "dragon", "hoard gold", "something"):
        want = index.search(PID_A, query, 10)
        assert_ranking(want, reference_bm25(docs, query))
        assert replayed.search(PID_A, query, 10) == built.search(PID_A, query, 10) == want
    assert replayed.stats(PID_A) == built.stats(PID_A) == index.stats(PID_A)
    built.stage(PID_A, sid(70), "staged")
    with pytest.raises(RuntimeError, match="staged"):
        built.build(PID_A, docs.items())


def test_a_partition_never_loaded_is_made_from_its_documents_not_taken_for_empty() -> None:
    """Where the index holds nothing of a partition (neither loaded nor built), its postings are made from its
    documents on first use, by a search or by a commit (whose document they may already hold: taking it again
    changes nothing); a snapshot that lists a document twice does not parse."""
    docs = dict(CORPUS)
    index = LexicalIndex(blind, documents=lambda pid: list(docs.items()) if pid == PID_A else [])
    assert_ranking(index.search(PID_A, "green tea", 10), reference_bm25(docs, "green tea"))
    assert index.stats(PID_B) == (0, 0) and index.remade == 0
    docs[sid(9)] = "dragon tea"  # on disk already when the commit is reported
    later = LexicalIndex(blind, documents=lambda pid: list(docs.items()) if pid == PID_A else [])
    apply(later, [(PID_A, sid(9), "dragon tea")])
    for query in ("dragon tea", "green", "hoard"):
        assert_ranking(later.search(PID_A, query, 10), reference_bm25(docs, query))
    assert later.stats(PID_A) == recount({(PID_A, s): t for s, t in docs.items()}, PID_A)
    blob = index.dump(PID_A)
    n = struct.unpack_from("<Q", blob, 3)[0]
    sids_at, ids_at = 19, 19 + 16 * n
    twice = bytearray(blob)
    twice[sids_at + 16 : sids_at + 32] = blob[sids_at : sids_at + 16]
    twice[ids_at + 32 : ids_at + 64] = blob[ids_at : ids_at + 32]
    with pytest.raises(StoreCorrupt, match="twice"):
        LexicalIndex._parse(bytes(twice))


def test_bad_ids_and_blinds_are_refused() -> None:
    """pid and sid must be 16 bytes, and blind must return 16 bytes; nothing is staged by a refused change."""
    index = LexicalIndex(blind)
    with pytest.raises(ValueError):
        index.stage(b"short", sid(0), "text")
    with pytest.raises(ValueError):
        index.stage(PID_A, b"x" * 17, "text")
    with pytest.raises(ValueError):
        index.search(b"", "text", 3)
    with pytest.raises(ValueError):
        index.build(PID_A, [(b"x", "text")])
    with pytest.raises(ValueError):
        LexicalIndex(lambda term: term.encode()).stage(PID_A, sid(0), "text")
    assert not index.has_staged()


# -- privacy ---------------------------------------------------------------------------------------------------------


def test_allowed_filter_excludes_before_ranking_and_keeps_scores() -> None:
    """A rejected document is never returned, even when it would rank first, and every allowed document keeps
    the score it has without the filter (idf counts the whole partition); the k best are the k best allowed ones,
    whether the allowed set is larger or smaller than the documents that match."""
    index = LexicalIndex(blind)
    add_all(index, PID_A, CORPUS)
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


def test_partitions_are_independent() -> None:
    """Postings in partition A change neither the results nor the statistics of partition B."""
    index = LexicalIndex(blind)
    docs_b = {sid(100): "zebra stripes", sid(101): "a horse in a field", sid(102): "zebra zebra crossing"}
    add_all(index, PID_A, {sid(i): "zebra " * (i % 4 + 1) + "savanna" for i in range(30)})
    add_all(index, PID_B, docs_b)
    only_b = LexicalIndex(blind)
    add_all(only_b, PID_B, docs_b)
    for query in ("zebra", "savanna", "horse zebra"):
        assert index.search(PID_B, query, 10) == only_b.search(PID_B, query, 10)
        assert_ranking(index.search(PID_B, query, 10), reference_bm25(docs_b, query))
    assert index.stats(PID_B) == only_b.stats(PID_B)
    assert index.search(PID_B, "savanna", 10) == []
    assert all(bytes.fromhex(i) not in docs_b for i, _ in index.search(PID_A, "zebra", 100))


def test_no_term_is_in_the_clear_in_a_snapshot() -> None:
    """No indexed term (nor the raw text) appears in the postings a snapshot holds, even before it is sealed."""
    index = LexicalIndex(blind)
    docs = {sid(0): "Confidential diagnosis: hypertension", sid(1): "Zanzibar password hunter2 budget"}
    add_all(index, PID_A, docs)
    apply(index, [(PID_A, sid(1), "Zanzibar password rotated")])
    secrets = {t for text in docs.values() for t in tokenize(text)} | {"rotated", "Confidential", "Zanzibar"}
    assert min(len(t) for t in secrets) >= 6
    blob = index.dump(PID_A)
    assert blind(tokenize("rotated")[0]) in blob  # the terms are there, by their keyed hashes
    for term in secrets:
        assert term.encode() not in blob and term.lower().encode() not in blob, term


@pytest.mark.parametrize("n", [0, 1, 1023, 1024, 1025, 3000])
def test_postings_made_at_once_are_those_made_one_document_at_a_time(n: int) -> None:
    """A snapshot's documents are taken in at once (``_Postings.of``): the same ordinals, ids, lengths, total and live
    marks as adding them one by one, a sid given twice included (the later ordinal is its own), and room to add more."""
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
    assert (bulk.count, bulk.sids, bulk.ids, bulk.ordinal, bulk.by_id, bulk.total) == (
        one.count,
        one.sids,
        one.ids,
        one.ordinal,
        one.by_id,
        one.total,
    )
    assert np.array_equal(bulk.length[:n], one.length[:n]) and bulk.alive[:n].all() and not bulk.alive[n:].any()
    assert len(bulk.length) == len(bulk.alive) >= max(n, 1024)
    assert bulk._new(b"\xff" * 16, "ff" * 16, 7) == n and bulk.length[n] == 7
