"""A BM25 inverted index per partition, held in memory; the store makes it durable with its sealed snapshots and its
journal.

The index is pure core: it reads and writes nothing, and uses no clock or randomness. Its postings are never written
per commit: a write stages what a document's text now is (:meth:`LexicalIndex.stage`), and once the store's commit of
the asset (and its journal entry) succeeded, :meth:`LexicalIndex.commit_staged` brings the postings in memory to it
(``discard_staged`` drops what a failed commit staged). The store's checkpoint writes the postings (:meth:`dump`) into
the partition's sealed index snapshot, which records the journal sequence it covers; on open the store loads them
(:meth:`load`) and replays the journal after it (:meth:`replace`), or, without a usable snapshot, makes them from the
partition's records (:meth:`build`; the index does the same through its ``documents`` when a snapshot's postings do
not parse on first use, and for a partition it holds nothing of: postings are never taken for empty). So the records
are the truth, as they are for the views and the vectors: a bulk write pays for its records and its journal, not for
~20 keys a document (a put through the daemon: 3,246 → 4,067 assets/s at 100k, docs/benchmarks.md), and nothing of
the postings is on disk but inside a sealed snapshot.

Tokens (:func:`tokenize`)
    NFKC-normalised, case-folded text; the typographic apostrophe (U+2019) becomes ``'``. Tokens are runs of
    ``[\\w']`` (Unicode letters, digits and ``_``, with inner apostrophes: ``o'clock``), with surrounding apostrophes
    and a possessive ``'s`` stripped. Dropped: tokens longer than :data:`TOKEN_CHARS_MAX` (64) characters and the
    :data:`STOPWORDS` (Lucene's classic 33-word English stop set). Numbers are kept. A token of ASCII letters only
    then goes through the Snowball English (Porter 2) stemmer (PyStemmer): ``painting``, ``painted`` and ``paints``
    are ``paint``, ``hiking`` and ``hike`` are ``hike``, so a goal finds a turn that says the word in another form
    (on LoCoMo dev: evidence held 0.692 → 0.702 at 500 tokens, 0.858 → 0.873 at 2,000, against the plural stemmer
    alone). Any other token of four or more characters goes through a minimal plural stemmer (Harman's "S" stemmer,
    as Lucene's ``EnglishMinimalStemmer`` applies it): ``-ies`` becomes ``-y`` unless preceded by ``a`` or ``e``;
    ``-es`` after ``a``, ``e``, ``i`` or ``o`` is kept; a final ``s`` is otherwise removed unless the word ends in
    ``ss`` or ``us``. The analyzer is named (:data:`ANALYZER`), and so are the postings it makes in a snapshot
    (:data:`SNAPSHOT_MAGIC`): postings of another analyzer are not loaded, and the store makes them again from the
    records (``Store.open``).

Terms are held by ``blind(term)``, the caller's keyed hash (16 bytes), so a snapshot holds no term in the clear even
before it is sealed. A document is *in* the index when its text has at least one token: a document whose text is
absent (``None``) or has no tokens has no postings and is not counted, so the statistics (document count, total
length) always equal a recount from the postings.

Scoring (:meth:`LexicalIndex.search`): for the query's distinct tokens ``t`` (at most :data:`QUERY_TERMS_MAX`, the
first ones in query order), over the one partition,

    score(d) = Σ_t idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·dl/avgdl)),   k1 = 1.2, b = 0.75,
    idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5)),   avgdl = total length / N,

with ``N`` and the total length from the partition's statistics and ``df`` the number of postings of ``t`` in the
partition. ``allowed`` (the ids a caller may use) is applied before anything is selected: an excluded document never
enters a candidate set, and its score is never kept or compared. ``df`` (hence ``idf``) still counts every posting,
excluded ones included: it is a statistic of the partition, identical for every caller, so a score reveals nothing
about which documents the filter excluded (a ``df`` counted after filtering would). Results are the best ``k``, by
score descending then ``sid`` ascending.

Postings in memory: per term, arrays of document ordinals (ascending) and term frequencies (``uint32``). A snapshot's
are parsed on the partition's first use. A changed or removed document's ordinal is retired (a live mask; a term's
``df`` counts its live postings), a new version gets a new ordinal; when retired ordinals outnumber live ones the
partition is compacted in memory. Scoring is vectorised (numpy) and pruned as MaxScore prunes
(:meth:`LexicalIndex.search`): a query's frequent terms are only looked up for the documents its rarer terms met, once
no other document can reach the ``k`` best. Pruning sums each posting's BM25 factor kept from earlier searches
(float32, made at the average length of their time, within a known ratio of today's; a search's bounds widen by it), so
a posting costs a multiply-add, not the formula; the few documents kept are then scored exactly (float64, in the
formula's order of operations, summed in the query's term order): the result is the exhaustive one whatever was
pruned. A term's live count (``df``) is kept between searches and counted again after a retirement in the partition.
The kept factors are never written.
"""

from __future__ import annotations

import functools
import math
import re
import struct
import threading
import unicodedata
from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from typing import Final

import numpy as np
import Stemmer

from gaml.node.core.store.views import collector_paused
from gaml.policy.errors import StoreCorrupt

ID_BYTES: Final = 16  # pid, sid and blind(term) are 16 bytes each
UINT32_MAX: Final = 2**32 - 1
# The analyzer (tokens, stopwords, stemmer) the postings are made with; a store made with another is re-analysed.
ANALYZER: Final = "gaml-lexical-2"  # 1: the plural stemmer only; 2: Snowball English for ASCII words
# The postings of a snapshot name their analyzer (LX2: ANALYZER 2). Postings of another are not loaded: the store makes
# them again from its records.
SNAPSHOT_MAGIC: Final = b"LX" + ANALYZER.rsplit("-", 1)[1].encode()

K1: Final = 1.2
B: Final = 0.75
TOKEN_CHARS_MAX: Final = 64
QUERY_TERMS_MAX: Final = 64

# Lucene's classic English stop set (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET).
STOPWORDS: Final = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such "  # noqa: SIM905 (a list, read as prose)
    "that the their then there these they this to was will with".split()
)

_TOKEN_RE: Final = re.compile(r"[\w']+")
TERM_KEYS_MAX: Final = 1 << 16  # the blinded terms an index remembers (emptied when full)


_SNOWBALL: Final = Stemmer.Stemmer("english", 0)  # no cache of its own: _stem's is bounded
_SNOWBALL_LOCK: Final = threading.Lock()  # a Stemmer is not thread-safe (the daemon searches from several threads)
_ASCII_WORD_RE: Final = re.compile(r"[a-z]+")


@functools.lru_cache(maxsize=1 << 16)
def _stem(token: str) -> str:
    """Snowball English for a token of ASCII letters (:data:`ANALYZER`), else the plural stemmer (:func:`_plural`)."""
    if _ASCII_WORD_RE.fullmatch(token) is not None:
        with _SNOWBALL_LOCK:
            return str(_SNOWBALL.stemWord(token))
    return _plural(token)


def _plural(token: str) -> str:
    """Harman's S stemmer (Lucene's ``EnglishMinimalStemmer``), for tokens of four or more characters."""
    n = len(token)
    if n <= 3 or token[-1] != "s":
        return token
    before = token[-2]
    if before in "us":
        return token
    if before == "e":
        if token[-3] == "i" and token[-4] not in "ae":
            return token[:-3] + "y"
        if token[-3] in "iaoe":
            return token
    return token[:-1]


def tokenize(text: str) -> list[str]:
    """The index terms of ``text``, in order, with repeats (see the module docstring for every rule)."""
    text = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    out: list[str] = []
    for raw in _TOKEN_RE.findall(text):
        token = raw.strip("'")
        if token.endswith("'s"):
            token = token[:-2].rstrip("'")
        if not token or len(token) > TOKEN_CHARS_MAX or token in STOPWORDS:
            continue
        out.append(_stem(token))
    return out


def bm25_idf(n_docs: int, df: int) -> float:
    """``ln(1 + (N − df + 0.5) / (df + 0.5))``: always positive, larger for rarer terms."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def _check_id(value: bytes, what: str) -> None:
    if type(value) is not bytes or len(value) != ID_BYTES:
        raise ValueError(f"a {what} is {ID_BYTES} bytes, got {value!r}")


_NONE: Final = np.empty(0, np.uint32)  # a term's arrays before it has any (shared: arrays are replaced, never changed)
_NONE.flags.writeable = False
_NO_FACTORS: Final = np.empty(0, np.float32)
_NO_FACTORS.flags.writeable = False
# A term's kept BM25 factors are made again once the average lengths they were made at differ by more than this ratio
# (a search's bounds widen by it: its exact rescoring then takes the few more documents within it of the k-th best).
FACTOR_DRIFT: Final = 0.01
# A float32 factor is within 2**-24 of the float64 one, and the sums of a score's terms within ~64·2**-53 of exact.
FACTOR_ROUNDING: Final = 1e-6
# While whole terms are scored, the k-th best sum is looked for among this many candidates, the first met (at 1M
# assets, in one process: p99 of lexical search 21-26 -> 16-19 ms against all of them, the results the same).
FLOOR_AMONG: Final = 65_536
# Past pruning, a term is scored over all its postings (not looked up) while the candidates number more than its
# postings divided by this: a lookup (a binary search, a gather) costs ~this many times a posting's multiply-add.
WHOLE_RATIO: Final = 16


def _weights(tf: np.ndarray, dl: np.ndarray, avgdl: float, idf: float) -> np.ndarray:
    """``idf·tf·(k1 + 1) / (tf + k1·(1 − b + b·dl/avgdl))`` per posting, operation by operation in that order (the
    same bits as the expression; ``idf`` 1.0 gives the factor alone, exactly), in place in two arrays rather than a
    temporary per operation. ``dl`` (float64) is used up: pass a copy, as an index into the lengths makes."""
    f = tf.astype(np.float64)
    dl *= B
    dl /= avgdl
    dl += 1.0 - B
    dl *= K1
    dl += f
    f *= idf
    f *= K1 + 1.0
    f /= dl
    return f


class _Term:
    """One term's postings in one partition: ordinals (ascending) and frequencies, appended to (a retired ordinal's
    stay, and the partition's live mask leaves them out); with what search keeps of them between calls (its live
    count, and the largest frequency and shortest document among them, for the term's score bound)."""

    __slots__ = ("_df", "_fac", "_peak", "docs", "more_docs", "more_tf", "tf")

    def __init__(self, docs: np.ndarray | None = None, tf: np.ndarray | None = None) -> None:
        self.docs = _NONE if docs is None else docs
        self.tf = _NONE if tf is None else tf
        # Postings added since the arrays were last made: C arrays of uint32, which the collector does not track (a
        # partition holds a term object per distinct term, so lists here made every full collection longer).
        self.more_docs = array("I")
        self.more_tf = array("I")
        self._df = (-1, 0, 0)  # (the partition's retirements, postings, live postings) when last counted
        self._peak = (0, 0, math.inf)  # (postings, largest tf, shortest document length) over the first ones
        # The BM25 factor of each of the first postings (float32), made at average lengths within [lowest, highest]:
        # (factors, postings, lowest avgdl, highest avgdl). Made on the term's first search, extended by later ones.
        self._fac: tuple[np.ndarray, int, float, float] = (_NO_FACTORS, 0, math.inf, 0.0)

    def add(self, ordinal: int, tf: int) -> None:
        self.more_docs.append(ordinal)
        self.more_tf.append(tf)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self.more_docs:
            self.docs = np.concatenate((self.docs, np.frombuffer(self.more_docs, np.uint32)))
            self.tf = np.concatenate((self.tf, np.frombuffer(self.more_tf, np.uint32)))
            self.more_docs, self.more_tf = array("I"), array("I")
        return self.docs, self.tf

    def sort(self) -> None:
        """Put the postings in ordinal order (an older snapshot's may not be in it); a document
        listed twice is refused."""
        docs, tf = self.arrays()
        order = np.argsort(docs, kind="stable")
        self.docs, self.tf = docs[order], tf[order]
        self._fac = (_NO_FACTORS, 0, math.inf, 0.0)  # made in the old order
        if len(docs) > 1 and (self.docs[1:] == self.docs[:-1]).any():
            raise ValueError("a term's postings hold a document twice")

    def df(self, mem: _Postings) -> int:
        """The live postings (the term's ``df``): counted again only after a retirement in the partition; postings
        added since the last count are live (a retirement since would have bumped the count)."""
        docs, _ = self.arrays()
        now = mem.retired  # read before counting: a retirement during the count makes the next call count again
        retired, seen, live = self._df
        if retired != now:
            seen, live = 0, 0
        if seen < len(docs):
            live += int(np.count_nonzero(mem.alive[docs[seen:]]))
            self._df = (now, len(docs), live)
        return self._df[2]

    def factors(self, mem: _Postings, avgdl: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
        """The term's postings (``docs``, ``tf``), the BM25 factor ``tf·(k1 + 1) / (tf + k1·(1 − b + b·dl/avgdl))``
        of each (float32), as kept between searches, and ``(low, high)``: each factor at ``avgdl`` itself is within
        ``[low, high]`` times the one returned (float32 rounding aside).

        A factor grows with ``avgdl``, and over a change of ``avgdl`` by a ratio ``r`` it changes by a ratio between
        1 and ``r`` (its denominator is ``x + y/avgdl``, with x, y ≥ 0). The factors of postings added since the last
        call are made at ``avgdl``; all are made again once the average lengths they were made at, and ``avgdl``,
        span more than :data:`FACTOR_DRIFT`. ``_fac`` keeps the span they were made at (not the ``avgdl`` of every
        call: a call that makes none leaves it)."""
        docs, tf = self.arrays()
        fac, n, lo, hi = self._fac
        if n > len(docs):  # another thread's call extended them after this one read the arrays: a prefix of those
            fac, n = fac[: len(docs)], len(docs)
        lo, hi = min(lo, avgdl), max(hi, avgdl)
        if hi > lo * (1.0 + FACTOR_DRIFT):
            n, lo, hi = 0, avgdl, avgdl
        if n < len(docs):
            more = _weights(tf[n:], mem.length[docs[n:]], avgdl, 1.0)
            fac = np.concatenate((fac[:n], more.astype(np.float32)))
            self._fac = (fac, len(docs), lo, hi)
        return docs, tf, fac, min(1.0, avgdl / hi), max(1.0, avgdl / lo)

    def bound(self, mem: _Postings, avgdl: float) -> float:
        """An upper bound of the term's BM25 factor ``tf·(k1 + 1) / (tf + k1·(1 − b + b·dl/avgdl))`` over its
        postings (retired ones included): the factor grows with ``tf`` and shrinks with ``dl``."""
        docs, tf = self.arrays()
        seen, top, short = self._peak
        if seen < len(docs):
            top = max(top, int(tf[seen:].max()))
            short = min(short, float(mem.length[docs[seen:]].min()))
            self._peak = (len(docs), top, short)
        return top * (K1 + 1.0) / (top + K1 * (1.0 - B + B * short / avgdl)) * (1.0 + 1e-9)


class _Postings:
    """One partition's postings in memory (the module docstring's "Postings in memory")."""

    def __init__(self) -> None:
        self.terms: dict[bytes, _Term] = {}
        self.ordinal: dict[bytes, int] = {}  # sid -> its current ordinal
        self.by_id: dict[str, int] = {}  # id -> the same
        self.sids: list[bytes] = []  # by ordinal (retired ones included)
        self.ids: list[str] = []
        self.length = np.zeros(1024, np.float64)  # document length, by ordinal
        self.alive = np.zeros(1024, np.bool_)
        self.count = 0  # ordinals handed out
        self.retired = 0  # ordinals retired (a term's cached df is counted again after one)
        self.total = 0  # the live documents' lengths, added up

    @classmethod
    def of(cls, sids: list[bytes], ids: list[str], lengths: np.ndarray) -> _Postings:
        """Documents ``sids`` (``ids``, ``lengths``) at ordinals 0, 1, …, with no postings yet: what :meth:`_new` of
        each in turn makes, built at once (a snapshot's million documents in a fraction of the time)."""
        mem = cls()
        n = mem.count = len(sids)
        mem.sids, mem.ids = sids, ids
        mem.ordinal = dict(zip(sids, range(n), strict=True))
        mem.by_id = dict(zip(ids, range(n), strict=True))
        room = max(len(mem.length), 1 << max(0, n - 1).bit_length())
        mem.length, mem.alive = np.zeros(room, np.float64), np.zeros(room, np.bool_)
        mem.length[:n] = lengths
        mem.alive[:n] = True
        mem.total = int(np.asarray(lengths, np.int64).sum())
        return mem

    def _new(self, sid: bytes, id_: str, length: int) -> int:
        o = self.count
        if o == len(self.length):
            self.length = np.concatenate((self.length, np.zeros(o, np.float64)))
            self.alive = np.concatenate((self.alive, np.zeros(o, np.bool_)))
        self.length[o] = length
        self.alive[o] = True
        self.total += length
        self.sids.append(sid)
        self.ids.append(id_)
        self.ordinal[sid] = self.by_id[id_] = o
        self.count += 1
        return o

    def term(self, b: bytes) -> _Term:
        """The postings of term ``b`` (its blinded key), made empty if it has none yet."""
        t = self.terms.get(b)
        if t is None:
            t = self.terms[b] = _Term()
        return t

    def change(self, sid: bytes, id_: str, new: dict[bytes, int], length: int) -> None:
        """Document ``sid`` (``id_``) now has the terms ``new`` (term -> frequency; empty: none) and ``length``."""
        o = self.ordinal.pop(sid, None)
        if o is not None:
            self.alive[o] = False
            self.retired += 1
            self.total -= int(self.length[o])
            self.by_id.pop(self.ids[o], None)
        if new:
            o = self._new(sid, id_, length)
            for b, tf in new.items():
                self.term(b).add(o, tf)

    @property
    def stale(self) -> bool:
        """Retired ordinals outnumber live ones (and there are enough to matter): compact the partition."""
        return self.count > 4096 and self.count > 2 * len(self.ordinal)


class _Eligible:
    """Which documents of a partition a search may select: live ones, and (``allowed`` given) only those it names.
    Called on each batch of documents a search meets: each id is looked up in ``allowed`` until the ids looked up
    would outnumber ``allowed``; then a mask over ``allowed`` is built, once, and used for the rest."""

    def __init__(self, mem: _Postings, allowed: AbstractSet[str] | None) -> None:
        self._mem = mem
        self._allowed = allowed
        self._mask: np.ndarray | None = None
        self._looked_up = 0

    def __call__(self, docs: np.ndarray) -> np.ndarray:
        mem, allowed = self._mem, self._allowed
        docs = docs[mem.alive[docs]]
        if allowed is None or not len(docs):
            return docs
        if self._mask is None and self._looked_up + len(docs) <= len(allowed):
            self._looked_up += len(docs)
            ids = mem.ids
            return docs[np.fromiter((ids[o] in allowed for o in docs.tolist()), np.bool_, len(docs))]
        if self._mask is None:
            self._mask = np.zeros(mem.count, np.bool_)
            self._mask[np.fromiter((o for o in map(mem.by_id.get, allowed) if o is not None), np.int64)] = True
        return docs[self._mask[docs]]


class LexicalIndex:
    """Per-partition BM25 postings in memory (module docstring: what the store keeps of them, the formula, the
    pruning). ``blind(term)`` must return 16 bytes, and be keyed; ``id_of(sid)`` gives the asset id a search answers
    with (the store's; the sid in hex by default); ``documents(pid)`` gives the ``(sid, text)`` a partition's postings
    are made from where the index holds none of them, or a snapshot's do not parse (the store's records; by default
    none: such a partition starts empty)."""

    def __init__(
        self,
        blind: Callable[[str], bytes],
        id_of: Callable[[bytes], str] = bytes.hex,
        documents: Callable[[bytes], Iterable[tuple[bytes, str | None]]] | None = None,
    ) -> None:
        self._blind = blind
        self._term_keys: dict[str, bytes] = {}  # term -> blind(term), for the terms met last (TERM_KEYS_MAX at most)
        self._id_of = id_of
        self._documents = documents or (lambda pid: ())
        self.remade = 0  # partitions made from their documents because their snapshot's postings did not parse
        # What the writes since the last commit_staged / discard_staged make of documents, in call order:
        # (pid, sid, terms, length).
        self._staged: list[tuple[bytes, bytes, dict[bytes, int], int]] = []
        self._memory: dict[bytes, _Postings] = {}
        self._sealed: dict[bytes, bytes] = {}  # a snapshot's postings, parsed on first use (:meth:`load`)
        self.looked_up = 0  # query terms that searches only looked up for the documents met (pruned), in all
        self.scored_whole = 0  # query terms past that point scored over every posting (fewer than the documents met)

    def stats(self, pid: bytes) -> tuple[int, int]:
        """``(document count, total length in tokens)`` of the partition (staged changes excluded)."""
        _check_id(pid, "partition id")
        mem = self._postings(pid)
        return len(mem.ordinal), mem.total

    # -- updates ---------------------------------------------------------------------------------------------------

    def has_staged(self) -> bool:
        """Whether documents were staged since the last ``commit_staged`` / ``discard_staged``."""
        return bool(self._staged)

    def stage(self, pid: bytes, sid: bytes, text: str | None) -> None:
        """Document ``sid`` of partition ``pid`` is to be ``text`` (None: absent) once the commit being made lands:
        call ``commit_staged`` after it succeeded, ``discard_staged`` if it failed. Nothing changes before."""
        _check_id(pid, "partition id")
        _check_id(sid, "sid")
        terms, length = self._terms(text)
        self._staged.append((pid, sid, terms, length))

    def commit_staged(self) -> None:
        """The commit of what was staged succeeded: the postings follow it, in call order (a partition the index held
        nothing of is made from its documents first, which may hold the commit already: taking a document's text
        again changes nothing). What was staged is let go first, whatever happens."""
        staged, self._staged = self._staged, []
        for pid, sid, terms, length in staged:
            self._postings(pid).change(sid, self._id_of(sid), terms, length)
        for pid in {d[0] for d in staged}:
            mem = self._memory[pid]
            if mem.stale:  # compacted in memory
                self._memory[pid] = self._parse(self._dump(mem))

    def discard_staged(self) -> None:
        """That commit failed or was abandoned: what was staged is dropped (the postings never took it)."""
        self._staged.clear()

    def replace(self, pid: bytes, sid: bytes, text: str | None) -> None:
        """Document ``sid`` of partition ``pid`` is now ``text`` (None: absent), on disk already (the store's replay
        of its journal after a snapshot)."""
        _check_id(pid, "partition id")
        _check_id(sid, "sid")
        terms, length = self._terms(text)
        self._postings(pid).change(sid, self._id_of(sid), terms, length)

    def build(self, pid: bytes, docs: Iterable[tuple[bytes, str | None]]) -> int:
        """Make the partition's postings from its documents ``(sid, text)`` (what it held before is dropped): where
        no snapshot's can be used. Returns the documents indexed (those with a token)."""
        _check_id(pid, "partition id")
        if any(d[0] == pid for d in self._staged):
            raise RuntimeError("a partition is built between commits, not with documents staged")
        mem = self._made(docs)
        self._sealed.pop(pid, None)
        self._memory[pid] = mem
        return len(mem.ordinal)

    def _made(self, docs: Iterable[tuple[bytes, str | None]]) -> _Postings:
        mem = _Postings()
        with collector_paused():  # a term object per distinct term, all kept
            for sid, text in docs:
                _check_id(sid, "sid")
                terms, length = self._terms(text)
                mem.change(sid, self._id_of(sid), terms, length)
        return mem

    # -- terms -----------------------------------------------------------------------------------------------------

    def _terms(self, text: str | None) -> tuple[dict[bytes, int], int]:
        """``{blind(term): frequency}`` and the length of ``text`` in tokens (empty and 0 for ``None``)."""
        if text is None:
            return {}, 0
        tokens = tokenize(text)
        length = len(tokens)
        if length > UINT32_MAX:
            raise ValueError(f"a document has {length} tokens; the index holds at most {UINT32_MAX}")
        return {self._key(term): tf for term, tf in Counter(tokens).items()}, length

    def _key(self, term: str) -> bytes:
        """``blind(term)``, checked, and remembered for the terms met last (the only cache of them: the store's
        ``blind`` for terms is uncached). Writes and searches share it; a race of two threads at most sets a key twice
        or clears it once more."""
        b = self._term_keys.get(term)
        if b is None:
            b = self._blind(term)
            if type(b) is not bytes or len(b) != ID_BYTES:
                raise ValueError(f"blind(term) must return {ID_BYTES} bytes")
            if len(self._term_keys) >= TERM_KEYS_MAX:
                self._term_keys.clear()
            self._term_keys[term] = b
        return b

    # -- search ----------------------------------------------------------------------------------------------------

    def _postings(self, pid: bytes) -> _Postings:
        """The partition's postings in memory: its snapshot's, parsed on first use; made from its documents when they
        do not parse, or when the index holds nothing of the partition (the store loads or builds every partition it
        opens, so a new one): never taken for empty."""
        mem = self._memory.get(pid)
        if mem is not None:
            return mem
        sealed = self._sealed.get(pid)
        if sealed is None:
            mem = self._made(self._documents(pid))
        else:
            try:
                mem = self._parse(sealed)
            except StoreCorrupt:  # damaged inside (its head was whole): the documents are the truth
                mem = self._made(self._documents(pid))
                self.remade += 1
        self._memory[pid] = mem
        self._sealed.pop(pid, None)
        return mem

    # -- the postings in a snapshot --------------------------------------------------------------------------------

    def dump(self, pid: bytes) -> bytes:
        """The partition's postings, compacted (live documents only), as bytes for the store's sealed index snapshot
        (:meth:`load` reads them back)."""
        _check_id(pid, "partition id")
        sealed = self._sealed.get(pid)
        if sealed is not None:
            return sealed  # as loaded, and not changed since (a change parses it first)
        return self._dump(self._memory.get(pid) or _Postings())

    @staticmethod
    def _dump(mem: _Postings) -> bytes:
        live = np.flatnonzero(mem.alive[: mem.count])
        remap = np.full(mem.count, -1, np.int64)
        remap[live] = np.arange(len(live))
        ids = [mem.ids[o] for o in live]
        if any(len(i) != 2 * ID_BYTES or not i.isascii() for i in ids):
            raise ValueError("an id in the lexical index is not 32 hex characters")
        blinds: list[bytes] = []
        counts: list[int] = []
        docs_out: list[np.ndarray] = []
        tf_out: list[np.ndarray] = []
        for b in sorted(mem.terms):
            docs, tf = mem.terms[b].arrays()
            keep = mem.alive[docs]
            if not keep.any():
                continue
            blinds.append(b)
            counts.append(int(keep.sum()))
            docs_out.append(remap[docs[keep]].astype("<u4"))
            tf_out.append(tf[keep].astype("<u4"))
        return b"".join(
            [
                SNAPSHOT_MAGIC,
                struct.pack("<QQ", len(live), len(blinds)),
                b"".join(mem.sids[o] for o in live),
                "".join(ids).encode("ascii"),
                mem.length[live].astype("<u4").tobytes(),
                b"".join(blinds),
                np.asarray(counts, "<u8").tobytes(),
                *(d.tobytes() for d in docs_out),
                *(t.tobytes() for t in tf_out),
            ]
        )

    def load(self, pid: bytes, data: bytes) -> None:
        """Hold the partition's postings as :meth:`dump` wrote them (its snapshot's, parsed on first use; the store
        replays the journal after it with :meth:`replace`). Raises ``ValueError`` on a blob that is not one, or one of
        another analyzer (the store then builds them from its records); one malformed inside is found when parsed,
        and raises :class:`StoreCorrupt`."""
        _check_id(pid, "partition id")
        if data[: len(SNAPSHOT_MAGIC)] != SNAPSHOT_MAGIC or len(data) < len(SNAPSHOT_MAGIC) + 16:
            raise ValueError("not a lexical snapshot")
        self._memory.pop(pid, None)
        self._sealed[pid] = data

    @staticmethod
    def _parse(data: bytes) -> _Postings:
        try:
            with collector_paused():  # a term object per term, all kept
                return LexicalIndex._parse_blob(data)
        except (ValueError, struct.error) as e:
            raise StoreCorrupt(f"the lexical postings of an index snapshot do not parse: {e}") from None

    @staticmethod
    def _parse_blob(data: bytes) -> _Postings:
        at = len(SNAPSHOT_MAGIC)
        n, m = struct.unpack_from("<QQ", data, at)
        at += 16

        def take(size: int) -> bytes:
            nonlocal at
            if at + size > len(data):
                raise ValueError("a lexical snapshot ends early")
            out = data[at : at + size]
            at += size
            return out

        sids = take(ID_BYTES * n)
        ids = take(2 * ID_BYTES * n).decode("ascii")
        lengths = np.frombuffer(take(4 * n), "<u4")
        blinds = take(ID_BYTES * m)
        counts = np.frombuffer(take(8 * m), "<u8").astype(np.int64)
        total = int(counts.sum())
        docs = np.frombuffer(take(4 * total), "<u4")  # views on the snapshot, not copies
        tfs = np.frombuffer(take(4 * total), "<u4")
        if at != len(data) or (total and (int(docs.max()) >= n or int(tfs.min()) == 0)):
            raise ValueError("a lexical snapshot does not add up")
        ends = np.cumsum(counts)
        # A term's ordinals ascend; only the next term starts lower. Snapshots written before search relied on that
        # (from postings an earlier GAML read off disk, in sid order) may not: those terms are sorted here.
        falls = np.flatnonzero(docs[1:] <= docs[:-1]) + 1
        unsorted = set(np.searchsorted(ends, falls[~np.isin(falls, ends[:-1])], side="right").tolist())
        mem = _Postings.of(
            [sids[at : at + ID_BYTES] for at in range(0, ID_BYTES * n, ID_BYTES)],
            [ids[at : at + 2 * ID_BYTES] for at in range(0, 2 * ID_BYTES * n, 2 * ID_BYTES)],
            lengths,
        )
        if len(mem.ordinal) != n or len(mem.by_id) != n:
            raise ValueError("a lexical snapshot holds a document twice")
        for j in range(m):
            lo, hi = int(ends[j] - counts[j]), int(ends[j])
            t = mem.terms[blinds[ID_BYTES * j : ID_BYTES * (j + 1)]] = _Term(docs[lo:hi], tfs[lo:hi])
            if j in unsorted:
                t.sort()
        return mem

    def search(
        self, pid: bytes, query: str, k: int, allowed: AbstractSet[str] | None = None
    ) -> list[tuple[str, float]]:
        """Up to ``k`` ``(id, score)`` of partition ``pid`` by BM25 for ``query``, best first, ties by sid.

        ``allowed``: the ids the caller may use (None: every document of the partition). Documents outside it are
        never selected or returned; ``idf`` counts every posting of a term in the partition (module docstring).

        Pruned as MaxScore does, with the same result as scoring every posting: the terms are taken in decreasing
        order of their score bound (``idf`` times :meth:`_Term.bound`), each scored over all its postings, until the
        bounds of the terms left add up to less than the ``k``-th best score among the eligible documents seen so
        far; no document outside those can then reach the ``k`` best, so the terms left are only looked up for them
        (binary search of the candidates, in ascending order, in the term's ascending ordinals; or, where the
        candidates outnumber the term's postings, every posting scored, which costs less), and a document is dropped
        once its score and the bounds left cannot reach that ``k``-th score. The few that can are scored again in
        the query's term order, so a score is the same number however the search was pruned (and whatever
        ``allowed`` left out)."""
        _check_id(pid, "partition id")
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        terms = list(dict.fromkeys(tokenize(query)))[:QUERY_TERMS_MAX]
        n_docs, total = self.stats(pid)
        if k == 0 or not terms or n_docs == 0 or (allowed is not None and not allowed):
            return []
        mem = self._postings(pid)
        avgdl = total / n_docs
        # docs, tf, idf, bound, factors (:meth:`_Term.factors`); in query order
        found: list[tuple[np.ndarray, np.ndarray, float, float, np.ndarray]] = []
        low, high = 1.0, 1.0  # a term's weight is within [low, high] times idf·factor (:meth:`_Term.factors`)
        for term in terms:
            t = mem.terms.get(self._key(term))
            if t is None:
                continue
            df = t.df(mem)
            if df == 0:
                continue
            idf = bm25_idf(n_docs, df)
            docs, tf, fac, lo, hi = t.factors(mem, avgdl)
            low, high = min(low, lo), max(high, hi)
            found.append((docs, tf, idf, idf * t.bound(mem, avgdl), fac))
        if not found:
            return []
        low *= 1.0 - FACTOR_ROUNDING
        high *= 1.0 + FACTOR_ROUNDING

        def lookup(docs: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """Which of ``cand`` have a posting in ``docs`` (a mask over ``cand``), and where."""
            at = np.searchsorted(docs, cand)
            at[at == len(docs)] = 0
            return docs[at] == cand, at

        # Pruning reads ``score``: each document's sum of idf·factor over the terms scored so far, the kept factors
        # standing for the weights (within [low, high] times them). ``floor`` is a lower bound of the k-th best
        # final score (low times the k-th best such sum among eligible documents), and a document is let go only
        # when high times its sum, with the bounds of the terms left, falls below it: whatever the factors' drift,
        # every document of the k best is kept, and the few kept are scored again with the exact weights.
        eligible = _Eligible(mem, allowed)
        order = sorted(range(len(found)), key=lambda j: -found[j][3])
        left = [sum(found[j][3] for j in order[i:]) for i in range(len(order) + 1)]  # bounds of the terms from i on
        score = np.zeros(mem.count, np.float64)  # calloc: only the pages touched cost anything
        seen = np.zeros(mem.count, np.bool_)
        cand = np.empty(0, np.uint32)  # the eligible documents met so far
        floor = -math.inf  # a lower bound of the final k-th best score among them, once there are k

        def margin() -> float:  # sums in another order may differ in their last bits
            return 1e-9 * max(abs(floor), 1.0)

        def rise(among: np.ndarray) -> float:
            """The floor raised to ``low`` times the k-th best sum among ``among`` (eligible documents met): any of
            them is a lower bound."""
            if len(among) < k:
                return floor
            return max(floor, low * float(np.partition(score[among], len(among) - k)[len(among) - k]))

        i = 0
        while i < len(order) and left[i] >= floor - margin():  # a document not met yet may still reach the k best
            docs, _, idf, _, fac = found[order[i]]
            np.add.at(score, docs, fac * np.float64(idf))  # a float64 product: float32 factors, float64 sums
            new = docs[~seen[docs]]
            seen[new] = True
            cand = np.concatenate((cand, eligible(new)))
            i += 1
            # The k-th best score is at most the bounds of the terms scored so far added up: while that is below what
            # the terms left could add, the loop goes on whatever it is, so it is not looked for. It is looked for
            # among the first candidates met (the documents of the terms of highest bound, where the best are), not
            # all: a partition of every candidate's score cost more, each time, than the terms it stopped early.
            if left[0] - left[i] >= left[i]:
                floor = rise(cand[:FLOOR_AMONG])
        cand.sort()  # looked up in ascending order, each search starts where the one before ended
        while i < len(order):  # the rest only for the documents met, while they can still reach the k best
            cand = cand[score[cand] >= (floor - margin() - left[i]) / high]
            docs, _, idf, _, fac = found[order[i]]
            if len(cand) * WHOLE_RATIO > len(docs):  # many candidates: scoring every posting costs less
                np.add.at(score, docs, fac * np.float64(idf))  # a non-candidate's score is no longer read
                self.scored_whole += 1
            else:
                hit, at = lookup(docs, cand)
                score[cand[hit]] += fac[at[hit]] * np.float64(idf)
                self.looked_up += 1
            floor = rise(cand)
            i += 1
        if len(cand) > k:
            cand = cand[high * score[cand] >= floor - margin()]  # the k best, and those within the factors' drift
        exact = np.zeros(len(cand), np.float64)  # scored again in the query's term order (module docstring)
        for docs, tf, idf, _, _ in found:
            hit, at = lookup(docs, cand)
            exact[hit] += _weights(tf[at[hit]], mem.length[docs[at[hit]]], avgdl, idf)
        best = sorted(
            ((float(exact[j]), mem.sids[o], o) for j, o in enumerate(cand.tolist())), key=lambda x: (-x[0], x[1])
        )
        return [(mem.ids[o], s) for s, _, o in best[:k]]


__all__ = ["QUERY_TERMS_MAX", "STOPWORDS", "TOKEN_CHARS_MAX", "LexicalIndex", "bm25_idf", "tokenize"]
