"""LoCoMo evidence-recall benchmark: hydrated frames against plain BM25, dense and fused turn retrieval, at the same
token budgets, on the same conversations, in one run.

::

    .venv/bin/python -m gaml.bench.locomo --data ../shared/data/locomo/locomo-dev.json --budgets 500,1000,2000,4000
                                     --json bench/results/locomo.json [--md OUT.md] [--png OUT.png]
                                     [--embedder minilm|hash] [--conversations N] [--questions-per-conversation N]
                                     [--methods hydration,bm25,dense,hybrid]
                                     [--counter heuristic|cl100k_base|o200k_base]

For each conversation (sample) of the file, every question but the adversarial ones (category 5, which have no
answer in the conversation) is asked of each method at each budget, with the question as the query:

- ``hydration``: the conversation is parsed (``node.parsers.parse``, one source per session), ingested and curated
  into a fresh node home the way ``gaml ingest`` does it (``bench.ingest_bench``'s pipeline), then
  ``node.hydrate.Hydrator.hydrate`` builds a frame for the question within the budget. An evidence turn counts as
  recalled when its item is among the ``covers`` of any fact of the receipt (at L0 or through a derivative whose
  provenance includes it); *strict* recall counts only item facts at L0–L2 (the turn's own text or its own
  distillation, not a breadcrumb or a multi-turn summary).
- ``bm25``, ``dense``, ``hybrid``: every turn of the conversation, rendered as ``"{speaker}: {text}\\n"``, ranked by a
  stdlib BM25 (k1 = 1.2, b = 0.75), by cosine of embeddings (the node's embedder), or by reciprocal-rank fusion of
  those two rankings (score = Σ 1 / (60 + rank)); then the budget is filled greedily in rank order (a turn whose line
  does not fit what is left is skipped, the next one tried). A turn's cost is its line counted by the same token
  counter the hydration uses. An evidence turn is recalled when its line is in the filled set.

Evidence recall (``recall``) is the mean over questions of each frame's share of that question's evidence turns, as
in the issue's reference figures; ``recall_strict`` and the per-category figures are averaged the same way, and
``recall_micro`` pools every (question, evidence turn) pair instead (questions with many evidence turns weigh more).
Ids listed as evidence that name no turn of the conversation are left out and counted (``missing_evidence``).
Latency is per question and budget: for hydration the ``hydrate`` call, for a baseline its ranking (with the
question's embedding) plus its fill. The token counter is ``node.tokens.HeuristicCounter``, or with ``--counter``
an exact BPE count (``node.bpe.BpeCounter``, which needs ``bpe-openai``).

Results: JSON (``--json``), a Markdown table to paste into the README (``--md``, default: next to the JSON), and a
plot of recall against budget (``--png``, default: next to the JSON; skipped if matplotlib is missing).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
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
from gaml.policy.errors import GamlError
from gaml.policy.model import item_id

CATEGORIES: Final[Mapping[int, str]] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ADVERSARIAL: Final = 5  # no answer in the conversation: left out of recall
METHODS: Final = ("hydration", "bm25", "dense", "hybrid")
BASELINES: Final = ("bm25", "dense", "hybrid")
STRICT_LEVELS: Final = frozenset({"L0", "L1", "L2"})
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
        questions.append(Question(str(qa["question"]), int(category), tuple(i for i in ids if i in known)))
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


def covered(facts: Sequence[Mapping[str, Any]], dia_of_item: Mapping[str, str], *, strict: bool) -> set[str]:
    """The dia_ids a receipt's facts stand for: every fact's ``covers``, or (``strict``) only those of item facts at
    L0–L2."""
    out: set[str] = set()
    for f in facts:
        if strict and (f.get("kind") != "item" or str(f.get("level", "")).upper() not in STRICT_LEVELS):
            continue
        out.update(dia_of_item[i] for i in f.get("covers", ()) if i in dia_of_item)
    return out


def unmapped(facts: Sequence[Mapping[str, Any]], dia_of_item: Mapping[str, str]) -> int:
    """How many ``covers`` entries of a receipt name no L0 item of the conversation (should be none)."""
    return sum(1 for f in facts for i in f.get("covers", ()) if i not in dia_of_item)


# -- one conversation ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """One question answered by one method at one budget."""

    method: str
    budget: int
    category: int
    evidence: int
    hits: int
    hits_strict: int
    tokens: int
    latency_ms: float


def recalled(evidence: Sequence[str], got: set[str]) -> int:
    return sum(1 for e in evidence if e in got)


def run_baselines(
    conv: Conversation,
    methods: Sequence[str],
    budgets: Sequence[int],
    emb: Embedder,
    counter: TokenCounter,
    progress: bool,
) -> list[Outcome]:
    """Rank every turn for every question with each baseline, fill each budget; the outcomes."""
    lines = [t.line for t in conv.turns]
    costs = [counter.count(line) for line in lines]
    dias = [t.dia_id for t in conv.turns]
    need_bm25 = any(m in ("bm25", "hybrid") for m in methods)
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
        for m in methods:
            ranking, rank_s = rankings[m]
            for b in budgets:
                t0 = time.perf_counter()
                taken, spent = fill(ranking, costs, b)
                latency_ms = (rank_s + time.perf_counter() - t0) * 1e3
                hits = recalled(q.evidence, {dias[i] for i in taken})
                out.append(Outcome(m, b, q.category, len(q.evidence), hits, hits, spent, latency_ms))
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
    out: list[Outcome] = []
    stray = 0
    for q in tqdm(conv.questions, desc=f"{conv.sample_id} hydration", file=sys.stderr, disable=not progress):
        for b in budgets:
            request = HydrationRequest(goal=q.text, principal=OWNER, now=T0_MICROS + 1, budget=b)
            t0 = time.perf_counter()
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
            hits = recalled(q.evidence, covered(facts, ingested.dia_of_item, strict=False))
            hits_strict = recalled(q.evidence, covered(facts, ingested.dia_of_item, strict=True))
            out.append(Outcome("hydration", b, q.category, len(q.evidence), hits, hits_strict, spent, latency_ms))
    return out, stray


# -- aggregation and rendering ---------------------------------------------------------------------------------------


def ratio(hits: int, total: int) -> float | None:
    """A pooled recall rounded to 4 places; None where there is no evidence to recall."""
    return round(hits / total, 4) if total else None


def mean_recall(outcomes: Sequence[Outcome], strict: bool = False) -> float | None:
    """The mean over questions of each frame's share of its evidence turns (None without questions)."""
    per_question = [(o.hits_strict if strict else o.hits) / o.evidence for o in outcomes if o.evidence]
    return round(float(np.mean(per_question)), 4) if per_question else None


def cell(r: float | None) -> str:
    return "–" if r is None else f"{r:.3f}"


def summarize(outcomes: Sequence[Outcome], methods: Sequence[str], budgets: Sequence[int]) -> dict[str, Any]:
    """The per-method block of the results, per budget: recall (the mean over questions of each frame's share of its
    evidence turns, as in the issue's reference figures), strict recall, and per category; the pooled (micro) recall
    over all evidence turns for comparison; latency and tokens."""
    out: dict[str, Any] = {}
    for m in methods:
        mine = [o for o in outcomes if o.method == m]
        block: dict[str, Any] = {
            "recall": {},
            "recall_strict": {},
            "recall_micro": {},  # pooled over every evidence turn: questions with many turns weigh more
            "recall_by_category": {str(c): {} for c in CATEGORIES},
            "recall_strict_by_category": {str(c): {} for c in CATEGORIES},
        }
        for b in budgets:
            at = [o for o in mine if o.budget == b]
            block["recall"][str(b)] = mean_recall(at)
            block["recall_strict"][str(b)] = mean_recall(at, strict=True)
            block["recall_micro"][str(b)] = ratio(sum(o.hits for o in at), sum(o.evidence for o in at))
            for c in CATEGORIES:
                cat = [o for o in at if o.category == c]
                block["recall_by_category"][str(c)][str(b)] = mean_recall(cat)
                block["recall_strict_by_category"][str(c)][str(b)] = mean_recall(cat, strict=True)
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


RECALL_NOTE: Final = (
    "recall: mean over questions of the share of evidence turns the frame holds, at L0 or through a derivative whose "
    "provenance includes the turn (the issue's definition); strict: only the turn's own text or its own distillation "
    "(L0–L2 of the item) counts, not breadcrumbs or multi-turn summaries."
)


def recall_rows(methods: Iterable[str]) -> list[tuple[str, str, str]]:
    """The rows of the recall tables: (label, method, recall key), hydration followed by its strict recall."""
    rows: list[tuple[str, str, str]] = []
    for name in methods:
        rows.append((name, name, "recall"))
        if name == "hydration":
            rows.append(("hydration (strict)", name, "recall_strict"))
    return rows


def render_md(R: Mapping[str, Any]) -> str:
    """The results as Markdown to paste into the README: recall (mean over questions) per method and budget with
    tokens spent and latency, the pooled recall over evidence turns, recall per category at each budget, and what was
    measured on what."""
    budgets: list[int] = R["budgets"]
    M: Mapping[str, Any] = R["methods"]
    m = R["machine"]
    rows = recall_rows(M)
    lines = [
        "### LoCoMo evidence recall",
        "",
        f"Evidence recall at each token budget over {R['questions']:,} questions ({R['evidence_turns']:,} evidence "
        f"turns) of {R['conversations']} conversations (categories 1–4; {R['missing_evidence']} evidence ids that "
        "name no turn left out). Tokens: mean spent per frame. Latency per question and budget, pooled over the "
        "budgets.",
        "",
        "| method | "
        + " | ".join(f"recall@{b:,}" for b in budgets)
        + " | "
        + " | ".join(f"tokens@{b:,}" for b in budgets)
        + " | p50 (ms) | p99 (ms) |",
        "|---|" + "---:|" * (2 * len(budgets) + 2),
    ]
    for label, name, key in rows:
        block = M[name]
        recall = " | ".join(cell(block[key][str(b)]) for b in budgets)
        tokens = " | ".join(f"{block['tokens_used'][str(b)]:,.0f}" for b in budgets)
        lat = block["latency_ms"]
        lines.append(f"| {label} | {recall} | {tokens} | {lat['p50']:.2f} | {lat['p99']:.2f} |")
    lines += [
        "",
        RECALL_NOTE,
        "",
        "Recall pooled over evidence turns (every (question, evidence turn) pair weighs the same):",
        "",
        "| method | " + " | ".join(f"recall@{b:,}" for b in budgets) + " |",
        "|---|" + "---:|" * len(budgets),
    ]
    for name, block in M.items():
        lines.append(f"| {name} | " + " | ".join(cell(block["recall_micro"][str(b)]) for b in budgets) + " |")
    for b in budgets:
        lines += [
            "",
            f"Recall by category at {b:,} tokens (mean over the category's questions):",
            "",
            "| method | " + " | ".join(f"{c} {n}" for c, n in CATEGORIES.items()) + " |",
            "|---|" + "---:|" * len(CATEGORIES),
        ]
        for label, name, key in rows:
            by = M[name][f"{key}_by_category"]
            lines.append(f"| {label} | " + " | ".join(cell(by[str(c)][str(b)]) for c in CATEGORIES) + " |")
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
    """Recall against budget, one line per method (strict hydration dashed); False if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FixedLocator, NullLocator
    except ImportError:
        log("matplotlib is not installed: no plot (pip install matplotlib, or `make install`)")
        return False
    budgets: list[int] = R["budgets"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, block in R["methods"].items():
        (line,) = ax.plot(budgets, [nan_if_none(block["recall"][str(b)]) for b in budgets], marker="o", label=name)
        if name == "hydration":
            ax.plot(
                budgets,
                [nan_if_none(block["recall_strict"][str(b)]) for b in budgets],
                marker="o",
                linestyle="--",
                color=line.get_color(),
                label="hydration (strict)",
            )
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(budgets))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{b:,}" for b in budgets])
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("token budget")
    ax.set_ylabel("evidence recall (mean over questions)")
    ax.set_title(f"LoCoMo evidence recall ({R['questions']:,} questions, {R['conversations']} conversations)")
    ax.grid(True, alpha=0.3)
    ax.legend()
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
                try:
                    t0 = time.perf_counter()
                    hydrated, stray = run_hydration(conv, ingested, budgets, counter, progress)
                    hydrate_s = time.perf_counter() - t0
                finally:
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
