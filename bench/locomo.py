"""LoCoMo: what a hydrated frame holds, against plain BM25, dense and fused turn retrieval and an oracle, at the same
token budgets, on the same conversations, in one run.

::

    .venv/bin/python -m gaml.bench.locomo --data ../shared/data/locomo/locomo-dev.json --budgets 500,1000,2000,4000
                                     --json bench/results/locomo.json [--md OUT.md] [--png OUT.png]
                                     [--embedder minilm|hash] [--conversations N] [--questions-per-conversation N]
                                     [--methods hydration,bm25,dense,hybrid,oracle]
                                     [--counter heuristic|cl100k_base|o200k_base]

For each conversation (sample) of the file, every question but the adversarial ones (category 5, which have no
answer in the conversation) is asked of each method at each budget, with the question as the query:

- ``hydration``: the conversation is parsed (``node.parsers.parse``, one source per session), ingested and curated
  into a fresh node home the way ``gaml ingest`` does it, then ``Hydrator.hydrate`` builds a frame for the question
  within the budget.
- ``bm25``, ``dense``, ``hybrid``: every turn of the conversation, rendered as ``"{speaker}: {text}\\n"``, ranked by a
  stdlib BM25 (k1 = 1.2, b = 0.75), by cosine of embeddings (the node's embedder), or by reciprocal-rank fusion of
  those two rankings (score = Σ 1 / (60 + rank)); then the budget is filled greedily in rank order (a turn whose line
  does not fit what is left is skipped, the next one tried). A turn's cost is its line counted by the same token
  counter the hydration uses.
- ``oracle``: the question's evidence turns first, then the BM25 ranking, filled the same way: the ceiling of each
  measure for a frame made of the turns' own words.

The measures (defined in ``bench/README.md``): **answer held** (every content word of the gold answer in the frame;
and the mean share of them), **evidence held** (an evidence turn at least 80 % of whose content words are in the
frame), and **coverage by provenance** (lenient: an evidence turn shown, or a derivative whose provenance includes
it). Each is reported per budget and per category. Ids listed as evidence that name no turn of the conversation are
left out and counted (``missing_evidence``). Latency is per question and budget: for hydration the ``hydrate`` call,
for a baseline its ranking (with the question's embedding) plus its fill. Each hydration embeds its question
(the retriever's vectors of recent goals are cleared before each call, so a question asked again at the next budget
is not served from them), and the frames are made as ``gaml serve`` makes them: once a conversation is ingested the
heap is settled (``gc.collect``, then ``gc.freeze``, as the daemon does once its memory is open and caught up), and
what frames leave is too, every ``FREEZE_CALLS`` frames (``settle_heap("young")``, as the daemon's lane does
before every ``FREEZE_CALLS``-th call, timed with that call), so a full collection walks neither the whole process
(the benchmark's own imports included) nor what earlier frames cached.
The token counter is ``node.tokens.HeuristicCounter``, or with ``--counter`` an exact BPE count
(``node.bpe.BpeCounter``, which needs ``bpe-openai``).

Results: JSON (``--json``), a Markdown table to paste into the README (``--md``, default: next to the JSON), and a
plot of answer held and evidence held against budget (``--png``, default: next to the JSON; skipped if matplotlib is
missing).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gc
import json
import math
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
from tqdm import tqdm

from gaml.bench.ingest_bench import OWNER
from gaml.bench.store_bench import T0_MICROS, Secrets, fs_type, log, machine, open_home, pct
from gaml.node.core.embed import Embedder
from gaml.node.core.hydrate import HydrationRequest, Hydrator
from gaml.node.core.memory.curate import ExtractiveCurator
from gaml.node.core.memory.ingest import IngestOptions, Ingestor
from gaml.node.core.memory.ladder import Ladder
from gaml.node.core.memory.tiers import TierPolicy
from gaml.node.core.node import Node
from gaml.node.core.store.store import Store
from gaml.node.core.text.parsers import parse
from gaml.node.core.text.privacy import Rules
from gaml.node.core.tokens import HeuristicCounter, TokenCounter
from gaml.node.home import make_embedder
from gaml.node.serve.daemon import FREEZE_CALLS, settle_heap
from gaml.policy.errors import GamlError
from gaml.policy.model import item_id

CATEGORIES: Final[Mapping[int, str]] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ADVERSARIAL: Final = 5  # no answer in the conversation: left out of recall
METHODS: Final = ("hydration", "bm25", "dense", "hybrid", "oracle")
BASELINES: Final = ("bm25", "dense", "hybrid", "oracle")
RRF_K: Final = 60
BM25_K1: Final = 1.2
BM25_B: Final = 0.75
SECRETS_SEED: Final = 0
_WORD: Final = re.compile(r"[a-z0-9]+")
_EVIDENCE_SEP: Final = re.compile(r"[;,\s]+")
_STOPWORD_TEXT: Final = (
    "a an the and or but if of at by for with about to from in on into over under up down out off is am are was were "
    "be been being have has had do does did i me my we our you your he him his she her it its they them their this "
    "that these those what which who whom whose when where why how as so than too very can will would should could "
    "just not no nor only own same s t don"
)
STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())  # a small English list
COUNTERS: Final = ("heuristic", "cl100k_base", "o200k_base")


# -- the data --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Turn:
    """One dialogue turn as parsed: its dia_id, speaker, text (image captions included) and item id in the node."""

    dia_id: str
    speaker: str
    text: str
    item_id: str

    @property
    def line(self) -> str:
        """The turn as a baseline puts it in a frame (and as its cost is counted)."""
        return f"{self.speaker}: {self.text}\n"


@dataclasses.dataclass(frozen=True, slots=True)
class Question:
    """One scored question: its text, category and the dia_ids of its evidence turns that exist (deduplicated)."""

    text: str
    category: int
    evidence: tuple[str, ...]
    answer: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    data: bytes  # the sample as a one-element LoCoMo JSON list, as a file holding only it would be
    sessions: int
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    missing_evidence: int  # evidence ids of the included questions that name no turn


def split_evidence(entries: Iterable[str]) -> list[str]:
    """The dia_ids in a QA item's ``evidence`` list, in order and without repeats; an entry may hold several
    (``"D8:6; D9:17"``)."""
    out: list[str] = []
    for entry in entries:
        for part in _EVIDENCE_SEP.split(str(entry)):
            if part and part not in out:
                out.append(part)
    return out


def load(path: Path) -> list[dict[str, Any]]:
    """The samples of a LoCoMo file (a JSON list, or one sample)."""
    doc = json.loads(path.read_bytes())
    samples = doc if isinstance(doc, list) else [doc]
    if not all(isinstance(s, dict) and "conversation" in s for s in samples):
        raise SystemExit(f"{path}: not a LoCoMo file (a list of samples with 'conversation' and 'qa')")
    return samples


def conversation_of(sample: Mapping[str, Any], questions_max: int | None = None) -> Conversation:
    """A sample parsed by the node's LoCoMo parser (the turns in order), with its scored questions: categories 1–4,
    at most ``questions_max`` of them, each with the evidence ids that exist."""
    sample_id = str(sample.get("sample_id", ""))
    data = json.dumps([sample]).encode()
    sources = parse(data, f"{sample_id}.json", "locomo")
    turns = tuple(
        Turn(str(r.meta.get("dia_id", "")), r.speaker, r.text, item_id(s.source_id, r.position))
        for s in sources
        for r in s.records
    )
    known = {t.dia_id for t in turns}
    questions: list[Question] = []
    missing = 0
    for qa in sample.get("qa", []):
        category = qa.get("category")
        if category not in CATEGORIES:
            continue
        if questions_max is not None and len(questions) >= questions_max:
            break
        ids = split_evidence(qa.get("evidence", []))
        missing += sum(1 for i in ids if i not in known)
        kept = tuple(i for i in ids if i in known)
        questions.append(Question(str(qa["question"]), int(category), kept, str(qa.get("answer", ""))))
    return Conversation(sample_id, data, len(sources), turns, tuple(questions), missing)


# -- the baselines ---------------------------------------------------------------------------------------------------


def words(text: str) -> list[str]:
    """BM25's terms: lowercase runs of letters and digits, stopwords left out."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


class BM25:
    """Okapi BM25 over a fixed list of documents (stdlib only), with the non-negative idf
    ``ln(1 + (N - df + 0.5) / (df + 0.5))``."""

    def __init__(self, docs: Sequence[str], k1: float = BM25_K1, b: float = BM25_B) -> None:
        self.k1, self.b = k1, b
        self.tfs = [Counter(words(d)) for d in docs]
        self.lengths = [sum(tf.values()) for tf in self.tfs]
        self.avg_length = sum(self.lengths) / len(docs) if docs else 0.0
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {w: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}

    def scores(self, query: str) -> list[float]:
        terms = [w for w in dict.fromkeys(words(query)) if w in self.idf]
        out = []
        for tf, length in zip(self.tfs, self.lengths, strict=True):
            norm = self.k1 * (1.0 - self.b + self.b * length / self.avg_length) if self.avg_length else self.k1
            s = 0.0
            for w in terms:
                f = tf.get(w, 0)
                if f:
                    s += self.idf[w] * f * (self.k1 + 1.0) / (f + norm)
            out.append(s)
        return out

    def rank(self, query: str) -> list[int]:
        """Every document, best first; ties in document order."""
        s = self.scores(query)
        return sorted(range(len(s)), key=lambda i: (-s[i], i))


def unit_rows(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return np.asarray(m / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def dense_rank(query_vec: np.ndarray, doc_vecs: np.ndarray) -> list[int]:
    """Every document by cosine to the query, best first; ties in document order. ``doc_vecs`` are unit rows."""
    q = unit_rows(np.asarray(query_vec, dtype=np.float32).reshape(1, -1))[0]
    cos = doc_vecs @ q
    return [int(i) for i in np.argsort(-cos, kind="stable")]


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal-rank fusion of full rankings: score = Σ 1 / (k + rank), rank 1-based; ties in document order."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            score[doc] = score.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(score, key=lambda d: (-score[d], d))


def fill(ranking: Sequence[int], costs: Sequence[int], budget: int) -> tuple[list[int], int]:
    """Greedy fill in rank order: a document is taken if its cost fits what is left, else skipped; the documents
    taken (in rank order) and the tokens they spend."""
    taken: list[int] = []
    left = budget
    for doc in ranking:
        c = costs[doc]
        if c <= left:
            taken.append(doc)
            left -= c
    return taken, budget - left


# -- what a frame holds -----------------------------------------------------------------------------------------------

# The measures' words: lower-case, split on non-alphanumerics, the stopwords above left out, then a light suffix
# stemming (plural and verb endings), so that "cats" holds "cat" and "painted" holds "paint". Written down in
# bench/README.md; the same for every method.
EVIDENCE_SHARE: Final = 0.8  # an evidence turn is held when at least this share of its content words are in the frame
_SIBILANT_ES: Final = ("sses", "xes", "zzes", "ches", "shes")


def stem(word: str) -> str:
    """A light suffix stemming, the same for every text: ``-ies`` → ``-y``; ``-es`` off a sibilant (``boxes``,
    ``classes``, ``watches``); else one of ``-ing``, ``-ed``, ``-s`` (not ``-ss``), each only where at least three
    letters stay."""
    if word.endswith("ies") and len(word) >= 6:
        return word[:-3] + "y"
    if word.endswith(_SIBILANT_ES) and len(word) >= 5:
        return word[:-2]
    for suffix in ("ing", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> frozenset[str]:
    """The measures' content words of a text (see :func:`stem`)."""
    return frozenset(stem(w) for w in words(text))


def answer_share(answer_words: frozenset[str], frame_words: frozenset[str]) -> float | None:
    """The share of the gold answer's content words the frame holds; None when the answer has none."""
    if not answer_words:
        return None
    return len(answer_words & frame_words) / len(answer_words)


def evidence_held(turn_words: Sequence[frozenset[str]], frame_words: frozenset[str]) -> int:
    """How many evidence turns the frame holds: at least :data:`EVIDENCE_SHARE` of each one's content words appear in
    it. A turn with no content words is held only by a frame that holds every word (vacuously): it counts."""
    return sum(1 for w in turn_words if len(w & frame_words) >= EVIDENCE_SHARE * len(w))


def frame_body(frame: str) -> str:
    """A hydrated frame without its envelope's opening and closing tag lines (the measures read what memory it holds,
    not the wrapper's attributes)."""
    lines = frame.split("\n")
    if lines and lines[0].lstrip().lower().startswith("<gaml-memory"):
        lines = lines[1:]
    if lines and lines[-1].lstrip().lower().startswith("</gaml-memory"):
        lines = lines[:-1]
    return "\n".join(lines)


# -- hydration -------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Ingested:
    """A conversation ingested and curated in a fresh home: its store, node and the dia_id of each L0 item."""

    store: Store
    node: Node
    dia_of_item: dict[str, str]
    seconds: float


def ingest(conv: Conversation, home: Path, emb: Embedder) -> Ingested:
    """Parse, ingest, curate and checkpoint one conversation in a fresh home, as ``bench.ingest_bench.run_gaml`` (and
    ``gaml ingest``) does; the store stays open for hydration (the caller closes it)."""
    t0 = time.perf_counter()
    sources = parse(conv.data, f"{conv.sample_id}.json", "locomo")
    store = open_home(home, Secrets(SECRETS_SEED))
    try:
        node = Node(store, emb)
        ingestor = Ingestor(node, Rules.load_default())
        ladder = Ladder(node, ingestor, ExtractiveCurator(), TierPolicy())
        ingestor.ingest(sources, IngestOptions(owner=OWNER), T0_MICROS)
        ladder.curate(T0_MICROS)
        store.checkpoint()
        dia_of_item: dict[str, str] = {}
        for asset in store.get_many(store.live_ids()):
            if asset is not None and "dia_id" in asset.payload:
                dia_of_item[asset.id] = str(asset.payload["dia_id"])
    except BaseException:
        store.close()
        raise
    lost = [t.dia_id for t in conv.turns if dia_of_item.get(t.item_id) != t.dia_id]
    if lost:
        store.close()
        raise RuntimeError(f"{conv.sample_id}: {len(lost)} turns have no L0 item with their dia_id (first: {lost[0]})")
    return Ingested(store, node, dia_of_item, time.perf_counter() - t0)


def covered(facts: Sequence[Mapping[str, Any]], dia_of_item: Mapping[str, str]) -> set[str]:
    """The dia_ids a receipt's facts stand for by provenance: every fact's ``covers``, whatever its level."""
    return {dia_of_item[i] for f in facts for i in f.get("covers", ()) if i in dia_of_item}


def unmapped(facts: Sequence[Mapping[str, Any]], dia_of_item: Mapping[str, str]) -> int:
    """How many ``covers`` entries of a receipt name no L0 item of the conversation (should be none)."""
    return sum(1 for f in facts for i in f.get("covers", ()) if i not in dia_of_item)


# -- one conversation ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """One question answered by one method at one budget: what its frame holds."""

    method: str
    budget: int
    category: int
    evidence: int  # the question's evidence turns
    covered: int  # coverage by provenance: evidence turns the frame shows, or shows a derivative of
    held: int  # evidence held: evidence turns at least 80 % of whose content words the frame holds
    answer: float | None  # the share of the gold answer's content words the frame holds; None: it has none
    tokens: int
    latency_ms: float


def recalled(evidence: Sequence[str], got: set[str]) -> int:
    return sum(1 for e in evidence if e in got)


def outcome(
    method: str,
    budget: int,
    q: Question,
    frame_text: str,
    got: set[str],
    words_of: Mapping[str, frozenset[str]],
    tokens: int,
    latency_ms: float,
) -> Outcome:
    """The three measures of one frame (its text, and the dia_ids it covers by provenance) for one question."""
    frame_words = content_words(frame_text)
    held = evidence_held([words_of[e] for e in q.evidence], frame_words)
    share = answer_share(content_words(q.answer), frame_words)
    return Outcome(
        method, budget, q.category, len(q.evidence), recalled(q.evidence, got), held, share, tokens, latency_ms
    )


def run_baselines(
    conv: Conversation,
    methods: Sequence[str],
    budgets: Sequence[int],
    emb: Embedder,
    counter: TokenCounter,
    progress: bool,
) -> list[Outcome]:
    """Rank every turn for every question with each baseline (and the oracle: the evidence turns first, then BM25),
    fill each budget; the outcomes."""
    lines = [t.line for t in conv.turns]
    costs = [counter.count(line) for line in lines]
    dias = [t.dia_id for t in conv.turns]
    index_of = {d: n for n, d in enumerate(dias)}
    words_of = {t.dia_id: content_words(t.text) for t in conv.turns}
    need_bm25 = any(m in ("bm25", "hybrid", "oracle") for m in methods)
    need_dense = any(m in ("dense", "hybrid") for m in methods)
    bm25 = BM25(lines) if need_bm25 else None
    doc_vecs = unit_rows(emb.embed([line.rstrip("\n") for line in lines])) if need_dense else None
    out: list[Outcome] = []
    for q in tqdm(conv.questions, desc=f"{conv.sample_id} baselines", file=sys.stderr, disable=not progress):
        rankings: dict[str, tuple[list[int], float]] = {}
        if bm25 is not None:
            t0 = time.perf_counter()
            r = bm25.rank(q.text)
            rankings["bm25"] = (r, time.perf_counter() - t0)
        if doc_vecs is not None:
            t0 = time.perf_counter()
            r = dense_rank(emb.embed([q.text])[0], doc_vecs)
            rankings["dense"] = (r, time.perf_counter() - t0)
        if "hybrid" in methods:
            t0 = time.perf_counter()
            r = rrf([rankings["bm25"][0], rankings["dense"][0]])
            seconds = time.perf_counter() - t0 + rankings["bm25"][1] + rankings["dense"][1]
            rankings["hybrid"] = (r, seconds)
        if "oracle" in methods:
            first = [index_of[e] for e in q.evidence]
            rankings["oracle"] = (first + [i for i in rankings["bm25"][0] if i not in set(first)], 0.0)
        for m in methods:
            ranking, rank_s = rankings[m]
            for b in budgets:
                t0 = time.perf_counter()
                taken, spent = fill(ranking, costs, b)
                latency_ms = (rank_s + time.perf_counter() - t0) * 1e3
                text = "".join(lines[i] for i in taken)
                out.append(outcome(m, b, q, text, {dias[i] for i in taken}, words_of, spent, latency_ms))
    return out


def run_hydration(
    conv: Conversation,
    ingested: Ingested,
    budgets: Sequence[int],
    counter: TokenCounter,
    progress: bool,
) -> tuple[list[Outcome], int]:
    """Hydrate a frame for every question at every budget; the outcomes and the unmapped ``covers`` entries."""
    hydrator = Hydrator(ingested.node, counter)
    words_of = {t.dia_id: content_words(t.text) for t in conv.turns}
    out: list[Outcome] = []
    stray = calls = 0
    for q in tqdm(conv.questions, desc=f"{conv.sample_id} hydration", file=sys.stderr, disable=not progress):
        for b in budgets:
            request = HydrationRequest(goal=q.text, principal=OWNER, now=T0_MICROS + 1, budget=b)
            ingested.node.retriever.vectors.clear()  # the question's embedding is part of each call's time
            calls += 1
            t0 = time.perf_counter()
            if calls % FREEZE_CALLS == 0:
                settle_heap("young")  # as the daemon's core lane does before every FREEZE_CALLS-th call
            h = hydrator.hydrate(request)
            latency_ms = (time.perf_counter() - t0) * 1e3
            receipt = h.receipt
            spent = int(receipt["budget"]["spent"])
            if receipt["budget"]["total"] != b or spent > b:
                raise RuntimeError(
                    f"{conv.sample_id}: hydration overspent its budget: {receipt['budget']} for budget {b} "
                    f"(question {q.text!r})"
                )
            facts = receipt["facts"]
            stray += unmapped(facts, ingested.dia_of_item)
            got = covered(facts, ingested.dia_of_item)
            out.append(outcome("hydration", b, q, frame_body(h.frame), got, words_of, spent, latency_ms))
    return out, stray


# -- aggregation and rendering ---------------------------------------------------------------------------------------

MEASURES: Final = ("answer_held", "answer_share", "evidence_held", "coverage")
MICRO: Final = ("evidence_held_micro", "coverage_micro")
LABELS: Final[Mapping[str, str]] = {
    "answer_held": "answer held",
    "answer_share": "answer words held (mean share)",
    "evidence_held": "evidence held",
    "coverage": "coverage by provenance (lenient)",
}


def ratio(hits: int, total: int) -> float | None:
    """A pooled share rounded to 4 places; None where there is nothing to count."""
    return round(hits / total, 4) if total else None


def mean_of(values: Iterable[float]) -> float | None:
    """A mean rounded to 4 places; None without values."""
    v = list(values)
    return round(float(np.mean(v)), 4) if v else None


def measures(outcomes: Sequence[Outcome]) -> dict[str, float | None]:
    """The measures of a set of frames. ``answer_held``: the share of questions (whose answer has content words)
    with every answer word in the frame; ``answer_share``: the mean share of answer words held; ``evidence_held`` and
    ``coverage``: the mean over questions (with evidence) of the share of evidence turns held, or covered by
    provenance; ``*_micro``: the same pooled over every (question, evidence turn) pair."""
    answered = [o.answer for o in outcomes if o.answer is not None]
    ev = [o for o in outcomes if o.evidence]
    total = sum(o.evidence for o in ev)
    return {
        "answer_held": mean_of(1.0 if a >= 1.0 else 0.0 for a in answered),
        "answer_share": mean_of(answered),
        "evidence_held": mean_of(o.held / o.evidence for o in ev),
        "coverage": mean_of(o.covered / o.evidence for o in ev),
        "evidence_held_micro": ratio(sum(o.held for o in ev), total),
        "coverage_micro": ratio(sum(o.covered for o in ev), total),
    }


def summarize(outcomes: Sequence[Outcome], methods: Sequence[str], budgets: Sequence[int]) -> dict[str, Any]:
    """The per-method block of the results: each measure per budget (``block[measure][budget]``) and per category
    (``block[measure + "_by_category"][category][budget]``); latency and tokens."""
    out: dict[str, Any] = {}
    for m in methods:
        mine = [o for o in outcomes if o.method == m]
        block: dict[str, Any] = {k: {} for k in (*MEASURES, *MICRO)}
        for k in MEASURES:
            block[f"{k}_by_category"] = {str(c): {} for c in CATEGORIES}
        for b in budgets:
            at = [o for o in mine if o.budget == b]
            for k, v in measures(at).items():
                block[k][str(b)] = v
            for c in CATEGORIES:
                got = measures([o for o in at if o.category == c])
                for k in MEASURES:
                    block[f"{k}_by_category"][str(c)][str(b)] = got[k]
        lat = [o.latency_ms for o in mine]
        block["latency_ms"] = {"p50": round(pct(lat, 50), 3), "p99": round(pct(lat, 99), 3)} if lat else {}
        block["latency_ms_by_budget"] = {
            str(b): {"p50": round(pct(x, 50), 3), "p99": round(pct(x, 99), 3)}
            for b in budgets
            if (x := [o.latency_ms for o in mine if o.budget == b])
        }
        block["tokens_used"] = {
            str(b): round(float(np.mean([o.tokens for o in mine if o.budget == b])), 1)
            for b in budgets
            if any(o.budget == b for o in mine)
        }
        out[m] = block
    return out


def cell(r: float | None) -> str:
    return "–" if r is None else f"{r:.3f}"


MEASURES_NOTE: Final = (
    "answer held: a question counts when every content word of its gold answer is in the frame (answer words held: "
    "the mean share of them); evidence held: an evidence turn counts when at least 80 % of its content words are in "
    "the frame; coverage by provenance: an evidence turn counts when the frame shows it or any derivative whose "
    "provenance includes it (lenient: a breadcrumb or an arc title covers turns without carrying what they said). "
    "Content words: lower-case, split on non-alphanumerics, stopwords out, light suffix stemming (bench/README.md). "
    "oracle: the evidence turns first, then BM25 turns, filled the same way: the ceiling of each measure for frames "
    "made of the turns' own words."
)


def render_md(R: Mapping[str, Any]) -> str:
    """The results as Markdown to paste into the README: each measure per method and budget (with tokens spent and
    latency per budget), the pooled figures, and the measures per category at each budget."""
    budgets: list[int] = R["budgets"]
    M: Mapping[str, Any] = R["methods"]
    m = R["machine"]
    lines = [
        "### LoCoMo: what the frame holds",
        "",
        f"{R['questions']:,} questions ({R['evidence_turns']:,} evidence turns) of {R['conversations']} conversations "
        f"(categories 1–4; {R['missing_evidence']} evidence ids that name no turn left out; "
        f"{R['answers_without_words']} answers with no content word left out of the answer measures), at each token "
        "budget.",
        "",
    ]
    for k in MEASURES:
        lines += [
            f"**{LABELS[k]}**",
            "",
            "| method | " + " | ".join(f"@{b:,}" for b in budgets) + " |",
            "|---|" + "---:|" * len(budgets),
        ]
        for name, block in M.items():
            lines.append(f"| {name} | " + " | ".join(cell(block[k][str(b)]) for b in budgets) + " |")
        lines.append("")
    lines += [
        "**tokens spent (mean per frame) and latency (ms, p50 / p99 per budget)**",
        "",
        "| method | "
        + " | ".join(f"tokens@{b:,}" for b in budgets)
        + " | "
        + " | ".join(f"ms@{b:,}" for b in budgets)
        + " |",
        "|---|" + "---:|" * (2 * len(budgets)),
    ]
    for name, block in M.items():
        tokens = " | ".join(f"{block['tokens_used'][str(b)]:,.0f}" for b in budgets)
        lat = block["latency_ms_by_budget"]
        ms = " | ".join(
            "–" if name == "oracle" else f"{lat[str(b)]['p50']:.1f} / {lat[str(b)]['p99']:.1f}" for b in budgets
        )
        lines.append(f"| {name} | {tokens} | {ms} |")
    lines += [
        "",
        MEASURES_NOTE,
        "",
        "Pooled over evidence turns (every (question, evidence turn) pair weighs the same), evidence held / coverage:",
        "",
        "| method | " + " | ".join(f"@{b:,}" for b in budgets) + " |",
        "|---|" + "---:|" * len(budgets),
    ]
    for name, block in M.items():
        pooled = (
            f"{cell(block['evidence_held_micro'][str(b)])} / {cell(block['coverage_micro'][str(b)])}" for b in budgets
        )
        lines.append(f"| {name} | " + " | ".join(pooled) + " |")
    for b in budgets:
        lines += [
            "",
            f"By category at {b:,} tokens: answer held / evidence held / coverage (over the category's questions):",
            "",
            "| method | " + " | ".join(f"{c} {n}" for c, n in CATEGORIES.items()) + " |",
            "|---|" + "---:|" * len(CATEGORIES),
        ]
        for name, block in M.items():
            row = (
                " / ".join(
                    cell(block[f"{k}_by_category"][str(c)][str(b)])
                    for k in ("answer_held", "evidence_held", "coverage")
                )
                for c in CATEGORIES
            )
            lines.append(f"| {name} | " + " | ".join(row) + " |")
    lines += [
        "",
        f"Data: {R['data']} · counter {R['counter']} · embedder {R['embedder']} · {m['date']} · {m['nproc']} cores · "
        f"Python {m['python']} · {m['platform']}.",
        "",
    ]
    return "\n".join(lines)


def nan_if_none(r: float | None) -> float:
    return math.nan if r is None else r


def plot(R: Mapping[str, Any], path: Path) -> bool:
    """Answer held and evidence held against budget, one line per method (the oracle dashed); False if matplotlib is
    missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FixedLocator, NullLocator
    except ImportError:
        log("matplotlib is not installed: no plot (pip install matplotlib, or `make install`)")
        return False
    budgets: list[int] = R["budgets"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, k in zip(axes, ("answer_held", "evidence_held"), strict=True):
        for name, block in R["methods"].items():
            style = {"linestyle": "--", "color": "0.5"} if name == "oracle" else {}
            ax.plot(budgets, [nan_if_none(block[k][str(b)]) for b in budgets], marker="o", label=name, **style)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(budgets))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([f"{b:,}" for b in budgets])
        ax.set_ylim(0.0, 1.0)
        ax.set_xlabel("token budget")
        ax.set_ylabel(
            LABELS[k] + " (share of questions)" if k == "answer_held" else LABELS[k] + " (mean over questions)"
        )
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(f"LoCoMo: what the frame holds ({R['questions']:,} questions, {R['conversations']} conversations)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return True


# -- main ------------------------------------------------------------------------------------------------------------


def make_counter(name: str) -> TokenCounter:
    """The token counter ``--counter`` names: the node's heuristic, or an exact BPE count (``node.bpe``, imported only
    then; GamlError if ``bpe-openai`` is not installed)."""
    if name == "heuristic":
        return HeuristicCounter()
    from gaml.node.shells.bpe import BpeCounter

    try:
        return BpeCounter(name)
    except GamlError as e:
        raise GamlError(f"--counter {name}: {e}") from e


def _positive_ints(text: str) -> list[int]:
    try:
        values = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not values or values[0] <= 0:
        raise argparse.ArgumentTypeError(f"budgets must be positive integers: {text!r}")
    return values


def _methods(text: str) -> list[str]:
    asked = {x.strip() for x in text.split(",") if x.strip()}
    unknown = asked - set(METHODS)
    if unknown or not asked:
        raise argparse.ArgumentTypeError(f"methods are a comma-separated subset of {','.join(METHODS)}: {text!r}")
    return [m for m in METHODS if m in asked]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gaml.bench.locomo", description=(__doc__ or "").split("\n\n")[0])
    p.add_argument(
        "--data", type=Path, required=True, help="the LoCoMo file (e.g. ../shared/data/locomo/locomo-dev.json)"
    )
    p.add_argument(
        "--budgets", type=_positive_ints, default=[500, 1000, 2000, 4000], help="token budgets, e.g. 500,1000"
    )
    p.add_argument("--json", type=Path, required=True, help="where the results go (JSON)")
    p.add_argument("--md", type=Path, default=None, help="the Markdown table (default: the JSON's path, .md)")
    p.add_argument("--png", type=Path, default=None, help="the plot (default: the JSON's path, .png)")
    p.add_argument("--embedder", choices=("minilm", "hash"), default="minilm")
    p.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    p.add_argument("--questions-per-conversation", type=int, default=None, help="only the first N scored questions")
    p.add_argument("--methods", type=_methods, default=list(METHODS), help="a subset of " + ",".join(METHODS))
    p.add_argument("--counter", choices=COUNTERS, default="heuristic")
    args = p.parse_args(argv)
    for opt in ("conversations", "questions_per_conversation"):
        value = getattr(args, opt)
        if value is not None and value <= 0:
            p.error(f"--{opt.replace('_', '-')} must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.data.is_file():
        print(f"LoCoMo data not found at {args.data}; pass --data PATH", file=sys.stderr)
        return 0
    started = dt.datetime.now(dt.UTC)
    t_start = time.perf_counter()
    methods: list[str] = list(args.methods)
    hydrate = "hydration" in methods
    budgets: list[int] = args.budgets
    counter = make_counter(args.counter)
    emb = make_embedder(args.embedder)
    samples = load(args.data)[: args.conversations]
    progress = sys.stderr.isatty()
    outcomes: list[Outcome] = []
    per_conversation: list[dict[str, Any]] = []
    totals: Counter[str] = Counter()
    work = Path(tempfile.mkdtemp(prefix="gaml-locomo-"))
    tmp_fs = fs_type(work)
    try:
        for k, sample in enumerate(samples, start=1):
            conv = conversation_of(sample, args.questions_per_conversation)
            t0 = time.perf_counter()
            found = run_baselines(conv, [m for m in methods if m in BASELINES], budgets, emb, counter, progress)
            baseline_s = time.perf_counter() - t0
            ingest_s = hydrate_s = 0.0
            if hydrate:
                ingested = ingest(conv, work / f"home-{k}", emb)
                ingest_s = ingested.seconds
                settle_heap("unfrozen")  # as the daemon settles it once its memory is open and caught up
                try:
                    t0 = time.perf_counter()
                    hydrated, stray = run_hydration(conv, ingested, budgets, counter, progress)
                    hydrate_s = time.perf_counter() - t0
                finally:
                    gc.unfreeze()
                    ingested.store.close()
                    shutil.rmtree(work / f"home-{k}", ignore_errors=True)
                found += hydrated
                totals["unmapped_covers"] += stray
            outcomes += found
            evidence = sum(len(q.evidence) for q in conv.questions)
            totals["questions"] += len(conv.questions)
            totals["evidence_turns"] += evidence
            totals["missing_evidence"] += conv.missing_evidence
            totals["turns"] += len(conv.turns)
            totals["answers_without_words"] += sum(1 for q in conv.questions if not content_words(q.answer))
            per_conversation.append(
                {
                    "sample_id": conv.sample_id,
                    "sessions": conv.sessions,
                    "turns": len(conv.turns),
                    "questions": len(conv.questions),
                    "evidence_turns": evidence,
                    "missing_evidence": conv.missing_evidence,
                    "baselines_s": round(baseline_s, 3),
                    "ingest_s": round(ingest_s, 3),
                    "hydration_s": round(hydrate_s, 3),
                }
            )
            log(
                f"[{k}/{len(samples)}] {conv.sample_id}: {len(conv.turns)} turns in {conv.sessions} sessions, "
                f"{len(conv.questions)} questions; baselines {baseline_s:.1f} s"
                + (f", ingest {ingest_s:.1f} s, hydration {hydrate_s:.1f} s" if hydrate else "")
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    R: dict[str, Any] = {
        "methods": summarize(outcomes, methods, budgets),
        "questions": totals["questions"],
        "evidence_turns": totals["evidence_turns"],
        "missing_evidence": totals["missing_evidence"],
        "answers_without_words": totals["answers_without_words"],
        "conversations": len(samples),
        "counter": counter.name,
        "embedder": emb.id,
        "machine": machine(started, tmp_fs),
        "budgets": budgets,
        "categories": {str(c): n for c, n in CATEGORIES.items()},
        "turns": totals["turns"],
        "data": str(args.data),
        "unmapped_covers": totals["unmapped_covers"],
        "per_conversation": per_conversation,
        "run_s": round(time.perf_counter() - t_start, 1),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
    }
    md_path = args.md or args.json.with_suffix(".md")
    png_path = args.png or args.json.with_suffix(".png")
    for path in (args.json, md_path):
        path.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(R, indent=1) + "\n")
    md = render_md(R)
    md_path.write_text(md)
    wrote = [args.json, md_path]
    if plot(R, png_path):
        wrote.append(png_path)
    print(md)
    log(f"wrote {', '.join(str(p) for p in wrote)} in {R['run_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
