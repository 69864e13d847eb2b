"""Ingestion: parsed sources become durable journal items, deterministically and without inference.

For each source (one session), in order:

1. **Envelope strip** — memory that hydration injected (``node.envelope``) is cut out first, across record boundaries,
   so it never becomes a new item.
2. **Parsing rules** — each record gets a *kind*: ``goal`` (a user request: it becomes the active goal, stamped on
   every following item), ``constraint``, ``conclusion`` (assistant text, kept head-and-tail so endings survive),
   ``message``, ``tool_call``, ``file_op``, ``tool_result``, ``error``, ``note``, or ``noise`` (acknowledgements,
   boilerplate). Sessions without an agent (a conversation between people, a notes file) take the session itself as
   their goal.
3. **Fact extraction** — entities on every item, and atomic slot facts (entity, attribute, value) as their own
   ``fact`` assets (level L2, ``derived_from`` the item).
4. **Context mapping** — session, task (goal), source pointer, speaker, owner, tenant, segment.
5. **Privacy classification** — the deterministic rules (``node/core/text/privacy_rules.json`` or the home's own) are
   authoritative: credentials are redacted before anything is stored; personal data keeps the item local-only.
6. **Temporal tracking** — a new fact for the same (entity, attribute), a new value or the same one restated,
   supersedes the fact that held the slot (whose validity window closes); a negation of the current value gets a
   ``contradicts`` edge instead.
7. **Write evaluation** — near-duplicates (SimHash over shingles, confirmed by embedding similarity), novelty,
   expected utility, contamination risk, policy. Nothing is silently dropped: a record that yields no item
   (an envelope, an empty text, a forgotten item, one past the session's item budget) is *gated* and recorded with
   its reason in the source's watermark; an item kept verbatim but not worth promoting (noise, a near-duplicate,
   suspected contamination) is stored at L0 with a ``gated:<reason>`` tag, and curation does not draw on it.

Item ids derive from (source id, position), so ingesting a source again is an upsert, and a per-source **watermark**
(sealed in the store's meta space, committed atomically with the items) lets a re-ingest or a live watch process
only records it has not seen. The watermark also holds a digest of what was processed: a source rewritten in place is
processed again from the start (changed records become edits).

Pure core: ``now`` is passed in; the caller reads files and hands over bytes or parsed sources.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import itertools
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Final

import numpy as np

from gaml.node.core.embed import Embedder, embedded_ahead, text_passages
from gaml.node.core.node import Node
from gaml.node.core.text import envelope, extract, when
from gaml.node.core.text.privacy import Rules, masked
from gaml.node.core.text.records import Record, Source
from gaml.policy.access import WriteTarget, inherit
from gaml.policy.errors import InvalidInput, NotFound
from gaml.policy.model import (
    Asset,
    AssetType,
    Creator,
    Level,
    PrivacyScope,
    ReplicationPolicy,
    SourcePointer,
    TrustClass,
    canonical_encode,
    item_id,
)

KINDS: Final = (
    "goal",
    "constraint",
    "conclusion",
    "message",
    "tool_call",
    "file_op",
    "tool_result",
    "error",
    "note",
    "noise",
)
# Each kind's fixed share of a session's item budget (most recent first); unused room goes to the most recent rest.
DEFAULT_SHARES: Final[Mapping[str, float]] = {
    "goal": 0.10,
    "constraint": 0.05,
    "conclusion": 0.20,
    "message": 0.15,
    "tool_call": 0.10,
    "file_op": 0.10,
    "tool_result": 0.10,
    "error": 0.10,
    "note": 0.05,
    "noise": 0.05,
}
# Expected utility of an item by kind (a prior, before novelty and risk).
UTILITY: Final[Mapping[str, float]] = {
    "goal": 0.9,
    "constraint": 0.95,
    "conclusion": 0.8,
    "message": 0.6,
    "tool_call": 0.4,
    "file_op": 0.6,
    "tool_result": 0.5,
    "error": 0.7,
    "note": 0.7,
    "noise": 0.05,
}
TYPES: Final[Mapping[str, AssetType]] = {
    "goal": AssetType.GOAL,
    "constraint": AssetType.CONSTRAINT,
    "conclusion": AssetType.EVENT,
    "message": AssetType.EVENT,
    "tool_call": AssetType.EVENT,
    "file_op": AssetType.EVENT,
    "tool_result": AssetType.TOOL_RESULT,
    "error": AssetType.TOOL_RESULT,
    "note": AssetType.FACT,
    "noise": AssetType.EVENT,
}
CREATORS: Final[Mapping[str, Creator]] = {
    "user": Creator.USER,
    "assistant": Creator.MODEL,
    "tool": Creator.TOOL,
    "system": Creator.SYSTEM,
    "note": Creator.USER,
}
ROLE_NAMES: Final = frozenset({"user", "assistant", "tool", "system", "note"})  # a speaker that is no name
# Formats whose sessions are with an agent from their first record on (a growing session has no reply yet).
AGENT_FORMATS: Final = frozenset({"transcript", "chat"})
FIT_MARGIN_CHARS: Final = 16  # room for the ellipsis when a text is clipped to fit the payload limit
TITLE_CHARS_MAX: Final = 1000  # a source's title is on every item and in the goal labels: kept head and tail past this
FACT_SALT: Final = "#fact"
FACT_TAG: Final = "fact"  # a slot fact's plain tag (beside its slot's)
WATERMARK: Final = "src"  # meta kind of the per-source watermarks
WATERMARK_FORMAT: Final = 1
# Ingestion prepares sources in windows of at least this many records, and embeds what their items and facts will be
# embedded by (at most AHEAD_TEXTS texts) in one call, on a worker, while it writes the window before
# (embed.embedded_ahead); the rest are embedded as they are written.
EMBED_AHEAD: Final = 1024
AHEAD_TEXTS: Final = 8192


@dataclasses.dataclass(frozen=True, slots=True)
class IngestOptions:
    owner: str
    tenant: str = ""
    segment: str = ""
    scope: PrivacyScope = PrivacyScope.USER_PRIVATE
    # How far the items may replicate (policy.replication: the scope caps it); none by default.
    replication: ReplicationPolicy = ReplicationPolicy.NONE
    item_budget: int = 5000  # items per session
    shares: Mapping[str, float] = dataclasses.field(default_factory=lambda: dict(DEFAULT_SHARES))
    conclusion_chars: int = 4000  # assistant text longer than this keeps its head and tail
    tool_chars: int = 2000  # tool output and errors likewise
    near_dup_bits: int = 3  # SimHash distance at or under which two items may be near-duplicates …
    near_dup_cosine: float = 0.9  # … confirmed by embedding similarity at or over this
    batch: int = 256

    def __post_init__(self) -> None:
        if not self.owner:
            raise InvalidInput("ingestion needs an owner")
        if self.item_budget < 1:
            raise InvalidInput("the item budget must be at least 1")
        unknown = set(self.shares) - set(KINDS)
        if unknown:
            raise InvalidInput(f"unknown item kind(s) in shares: {', '.join(sorted(unknown))}")
        if self.scope is PrivacyScope.PUBLIC:
            raise InvalidInput("transcripts are not ingested as public memory; publish an asset explicitly instead")

    def target(self) -> WriteTarget:
        """What the ingest writes, for its authorization (:meth:`Node.authorize_writes`) before anything is written."""
        return WriteTarget(self.owner, self.tenant, self.scope)


@dataclasses.dataclass(frozen=True, slots=True)
class Gate:
    """A record that yields no item, and why."""

    position: int
    reason: str  # envelope, empty, forgotten, budget

    def to_json(self) -> list[Any]:
        return [self.position, self.reason]


@dataclasses.dataclass
class Report:
    """What one ingestion did, source by source (counts only: no text)."""

    sources: int = 0
    records: int = 0
    skipped: int = 0  # records below the watermark (already ingested)
    written: int = 0  # items and facts whose write changed something
    items: int = 0  # L0 items planned from new records
    facts: int = 0
    gated: Counter[str] = dataclasses.field(default_factory=Counter)  # hard gates, by reason
    flagged: Counter[str] = dataclasses.field(default_factory=Counter)  # soft gates (kept at L0), by reason
    envelopes: int = 0
    redactions: int = 0
    local_only: int = 0
    superseded: int = 0
    contradicted: int = 0
    retracted: int = 0  # facts and items a rewritten source no longer states
    rewritten: list[str] = dataclasses.field(default_factory=list)  # sources whose processed prefix had changed
    dirty: list[str] = dataclasses.field(default_factory=list)  # sources with new items (curation pending)
    # What was cut (head and tail kept) to fit the payload limit: {"source", "position", "field", "chars", "kept"}, in
    # characters (a source's title, on every item of it, has no position). The file keeps the verbatim record.
    clipped: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["gated"] = dict(sorted(self.gated.items()))
        out["flagged"] = dict(sorted(self.flagged.items()))
        return out


@dataclasses.dataclass
class _Planned:
    record: Record
    text: str
    kind: str
    goal: str
    tags: set[str]
    local_only: bool
    redactions: int
    simhash: int
    gate: str | None = None  # soft gate
    duplicate_of: int | None = None
    chars: int = 0  # the text's length before it was bounded to what an item can hold (0: it was not)
    _facts: tuple[str, list[extract.Fact]] | None = dataclasses.field(default=None, repr=False, compare=False)

    def facts(self) -> list[extract.Fact]:
        """The slot facts of the text (:func:`extract.facts`), read once for as long as the text stays the same:
        what is embedded ahead of the write and what the write stores are the same facts."""
        if self._facts is None or self._facts[0] != self.text:
            self._facts = (self.text, extract.facts(self.text, self.record.speaker))
        return self._facts[1]


@dataclasses.dataclass(frozen=True, slots=True)
class _Prepared:
    """A source as :meth:`Ingestor._prepare` read it: retitled (its title masked and bounded; ``title_chars``: the
    masked title's length before), its texts without envelopes, its watermark, the position its ingest starts from
    (``rewritten``: the watermark's digest no longer matches), and the plan of its records."""

    source: Source
    title_chars: int
    texts: list[str]
    wm: dict[str, Any] | None
    start: int
    rewritten: bool
    planned: list[_Planned]
    gates: list[Gate]

    @property
    def new(self) -> list[_Planned]:
        """The planned records not ingested before."""
        return [p for p in self.planned if p.record.position >= self.start]


def _passages(p: _Planned) -> Iterator[str]:
    """What will be embedded for a planned record: its item's passages, then its facts' (as :meth:`Ingestor._facts`
    will make them; a gate it will get makes it yield none, and those are only not used)."""
    yield from text_passages(p.text, p.record.speaker, sorted(p.tags))  # as the item will hold them
    for f in p.facts():
        yield from text_passages(f.text, "", (FACT_TAG,))


def _windows(sources: Sequence[Source], records: int) -> Iterator[Sequence[Source]]:
    """``sources`` in runs of consecutive ones, each closed once it holds at least ``records`` records."""
    at, held = 0, 0
    for n, source in enumerate(sources):
        held += len(source.records)
        if held >= records:
            yield sources[at : n + 1]
            at, held = n + 1, 0
    if at < len(sources):
        yield sources[at:]


def _encoded(value: Any) -> int:
    """Bytes of a JSON value's canonical encoding."""
    return len(canonical_encode(value))


def _digest(records: Iterable[tuple[int, str]]) -> str:
    h = hashlib.blake2b(digest_size=16, person=b"gaml-watermark-1")
    for pos, text in records:
        h.update(json.dumps([pos, text]).encode())
    return h.hexdigest()


def fact_id(source_id: str, position: int, k: int) -> str:
    return item_id(f"{source_id}{FACT_SALT}{k}", position)


def slot_tag(entity: str, attribute: str) -> str:
    return f"slot:{entity}|{attribute}"


class Ingestor:
    """Turns parsed sources into items in a node. One instance per node; ``rules`` are the privacy rules."""

    def __init__(self, node: Node, rules: Rules) -> None:
        self.node = node
        self.store = node.store
        self.rules = rules

    # -- watermarks ------------------------------------------------------------------------------------------------

    def watermark(self, source_id: str) -> dict[str, Any] | None:
        data = self.store.read_meta(self.store.meta_name(WATERMARK, source_id))
        return None if data is None else dict(json.loads(data))

    def watermarks(self) -> list[dict[str, Any]]:
        return sorted((json.loads(d) for _, d in self.store.scan_meta(WATERMARK)), key=lambda w: w["source_id"])

    def mark(self, source_id: str, **changes: Any) -> None:
        """Update fields of a source's watermark (curation uses it to record what it has compiled)."""
        wm = self.watermark(source_id)
        if wm is None:
            raise NotFound(f"no source {source_id!r} was ingested")
        wm.update(changes)
        self.store.write_meta({self.store.meta_name(WATERMARK, source_id): json.dumps(wm).encode()})

    # -- ingestion -------------------------------------------------------------------------------------------------

    def ingest(
        self,
        sources: Sequence[Source],
        opts: IngestOptions,
        now: int,
        progress: Callable[[int], None] | None = None,
    ) -> Report:
        """Ingest sources; ``progress`` is told how many records were handled after each batch.

        Item ids derive from the source alone, so a source belongs to the owner (and tenant) that first ingested it:
        naming another raises :class:`InvalidInput` before anything is written.
        """
        self.check([(sources, opts)])
        report = Report()

        # A window's passages are embedded on a worker while the window before is written.
        def write(ready: list[_Prepared], embedder: Embedder) -> None:
            for r in ready:
                self._ingest_source(r, opts, now, report, progress, embedder)

        embedded_ahead(
            self.node.embedder,
            ([self._prepare(source, opts) for source in w] for w in _windows(sources, EMBED_AHEAD)),
            lambda ready: (t for r in ready for p in r.new for t in _passages(p)),
            write,
            AHEAD_TEXTS,
        )
        return report

    def check(self, batches: Sequence[tuple[Sequence[Source], IngestOptions]]) -> None:
        """Raise :class:`InvalidInput` unless every batch of one call may be ingested, before anything of any is
        written: no source twice in the call, and none ingested before for another owner or tenant."""
        seen: set[str] = set()
        for sources, opts in batches:
            owned = (opts.owner, opts.tenant)
            for source in sources:
                if source.source_id in seen:
                    raise InvalidInput(f"two inputs are the same source {source.source_id!r}; ingest each session once")
                seen.add(source.source_id)
                wm = self.watermark(source.source_id)
                if wm is not None and (wm.get("owner", opts.owner), wm.get("tenant", opts.tenant)) != owned:
                    raise InvalidInput(f"source {source.source_id!r} was ingested for another owner or tenant")

    def _prepare(self, source: Source, opts: IngestOptions) -> _Prepared:
        """What a source's ingest reads before it writes: its title masked, its texts, its watermark and its plan.
        Nothing here reads what another source's ingest writes, so the sources of a window are prepared together
        (and their items' passages embedded in one call) before the first of them is written."""
        # A title (a chat's, a file name) is stamped on every item and goal label: it is classified like the text.
        title = masked(source.title, self.rules.classify(source.title))
        source = dataclasses.replace(source, title=extract.head_tail(title, TITLE_CHARS_MAX))
        texts = _strip_envelopes(source.records)
        wm = self.watermark(source.source_id)
        start = 0
        rewritten = False
        if wm is not None and wm.get("format_version") == WATERMARK_FORMAT:
            seen = int(wm["records"])
            if seen <= len(source.records) and _digest((r.position, r.text) for r in source.records[:seen]) == wm.get(
                "digest"
            ):
                start = seen
            else:
                rewritten = True
        planned, gates = self._plan(source, texts, opts, frozenset((wm or {}).get("forgotten", [])))
        return _Prepared(source, len(title), texts, wm, start, rewritten, planned, gates)

    def _ingest_source(
        self,
        ready: _Prepared,
        opts: IngestOptions,
        now: int,
        report: Report,
        progress: Callable[[int], None] | None,
        embedder: Embedder | None = None,
    ) -> None:
        source, texts, wm, start, planned = ready.source, ready.texts, ready.wm, ready.start, ready.planned
        report.sources += 1
        report.records += len(source.records)
        if len(source.title) < ready.title_chars:
            report.clipped.append(
                {"source": source.source_id, "field": "title", "chars": ready.title_chars, "kept": len(source.title)}
            )
        if ready.rewritten:
            report.rewritten.append(source.source_id)
        report.skipped += start
        report.envelopes += sum(
            1 for r, t in zip(source.records, texts, strict=True) if r.position >= start and t != r.text
        )
        new = ready.new
        gates = [g for g in ready.gates if g.position >= start]
        # An id that was forgotten stays forgotten: re-ingesting its source does not bring it back. A stored item
        # keeps its type: a changed record is an edit of it, whatever kind it reads as now.
        kept: list[_Planned] = []
        types: dict[int, AssetType] = {}
        for p in new:
            old = self._stored(item_id(source.source_id, p.record.position))
            if old is not None and old.tombstone:
                gates.append(Gate(p.record.position, "forgotten"))
                continue
            kept.append(p)
            if old is not None:
                types[p.record.position] = old.asset_type
        self._evaluate(planned, kept, opts)
        items = []
        for p in kept:
            item, cuts = self._item(source, p, opts, now, types.get(p.record.position))
            items.append(item)
            text_cut = [n for f, n, _ in cuts if f == "text"]
            cuts = [c for c in cuts if c[0] != "text"]
            if p.chars or text_cut:  # the text's cut, from what the record said to what the item keeps
                cuts.insert(0, ("text", p.chars or text_cut[0], len(item.payload["text"])))
            report.clipped.extend(
                {"source": source.source_id, "position": p.record.position, "field": f, "chars": n, "kept": k}
                for f, n, k in cuts
            )
        facts, superseded_edits, stats = self._facts(source, kept, items, opts, start)
        report.items += len(items)
        report.facts += len(facts)
        report.superseded += stats["superseded"]
        report.contradicted += stats["contradicted"]
        report.redactions += sum(p.redactions for p in kept)
        report.local_only += sum(1 for p in kept if p.local_only)
        for g in gates:
            report.gated[g.reason] += 1
        for p in kept:
            if p.gate:
                report.flagged[p.gate] += 1

        old_gates = [Gate(*g) for g in (wm or {}).get("gated", []) if start and g[0] < start]
        mark = {
            "format_version": WATERMARK_FORMAT,
            "source_id": source.source_id,
            "owner": opts.owner,
            "tenant": opts.tenant,
            "format": source.format,
            "title": source.title,
            "records": len(source.records),
            "digest": _digest((r.position, r.text) for r in source.records),
            "items": sorted(
                (set((wm or {}).get("items", [])) & {p.record.position for p in planned} if start else set())
                | {p.record.position for p in kept}
            ),
            "gated": [g.to_json() for g in sorted({*old_gates, *gates}, key=lambda g: g.position)],
            "ingested_at": now,
            "dirty": bool(kept) or bool((wm or {}).get("dirty")),
            "curated_at": (wm or {}).get("curated_at", 0),
            "forgotten": (wm or {}).get("forgotten", []),  # positions erased (node.ladder): they set no goal
        }
        # A rewritten record that no longer states a fact it stated before takes that fact back, and a source
        # rewritten shorter (or whose record now yields no item) takes back the items it no longer has. First: a
        # crash before the watermark moves makes the next run do all of this again.
        for fid in self._stale_facts(source, kept, {f.id for f in facts}):
            self.store.delete(fid, now)
            report.retracted += 1
        # Gone: on a rewrite, what the source no longer yields; on an append, what the session's budget now gives to
        # newer items (most recent first, as a backfill of the whole session would keep).
        if wm is not None:
            gone = set(wm.get("items", [])) - set(mark["items"])
            for pos in sorted(gone):
                if start and not any(g.position == pos for g in gates):
                    gates.append(Gate(pos, "budget"))
                    mark["gated"] = [g.to_json() for g in sorted({*old_gates, *gates}, key=lambda g: g.position)]
                old = self._stored(item_id(source.source_id, pos))
                if old is not None and not old.tombstone:
                    for fid in self._stale_facts_at(source.source_id, pos, set()):
                        self.store.delete(fid, now)
                    self.store.delete(old.id, now)
                    report.retracted += 1
                    mark["dirty"] = True
        writes: list[Asset] = [*items, *facts, *superseded_edits]
        name = self.store.meta_name(WATERMARK, source.source_id)
        batches = [writes[i : i + opts.batch] for i in range(0, len(writes), opts.batch)] or [[]]
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            before = self.store.seq
            self.node.put(batch, now, meta={name: json.dumps(mark).encode()} if last else None, embedder=embedder)
            report.written += self.store.seq - before
            if progress:  # records, not writes: the items come first in ``writes``, then facts and edits
                done = max(0, min(len(batch), len(items) - i * opts.batch))
                progress(done + (len(source.records) - len(items) if last else 0))
        if kept:
            report.dirty.append(source.source_id)

    def _stale_facts(self, source: Source, kept: Sequence[_Planned], fresh: set[str]) -> list[str]:
        """Live facts of these records that their current text no longer yields (a record rewritten in place)."""
        return [fid for p in kept for fid in self._stale_facts_at(source.source_id, p.record.position, fresh)]

    def _stale_facts_at(self, source_id: str, position: int, fresh: set[str]) -> list[str]:
        stale = []
        for k in itertools.count():
            fid = fact_id(source_id, position, k)
            old = self._stored(fid)
            if old is None:
                break
            if not old.tombstone and fid not in fresh:
                stale.append(fid)
        return stale

    def _stored(self, id_: str) -> Asset | None:
        """The stored asset (a tombstone included) under ``id_``, or None."""
        try:
            return self.store.get(id_, include_deleted=True)
        except NotFound:
            return None

    # -- the parsing rules -----------------------------------------------------------------------------------------

    def _plan(
        self, source: Source, texts: Sequence[str], opts: IngestOptions, forgotten: AbstractSet[int] = frozenset()
    ) -> tuple[list[_Planned], list[Gate]]:
        """Kinds, goals, classification and budget for every record. A forgotten request sets no goal: the items
        after it keep the goal before it, as erasure relabelled them."""
        agentic = source.format in AGENT_FORMATS or any(r.role in ("assistant", "tool") for r in source.records)
        session_goal = f"session: {source.title or source.source_id}"
        goal = session_goal
        planned: list[_Planned] = []
        gates: list[Gate] = []
        for record, raw in zip(source.records, texts, strict=True):
            if not raw.strip():
                gates.append(Gate(record.position, "envelope" if record.text.strip() else "empty"))
                continue
            # Classify the whole text, then clip: a cut through a secret would leave pieces no rule recognises.
            # Everything after the classification reads the text bounded to what an item can hold.
            c = self.rules.classify(raw)
            kind = self._kind(record, self._bounded(raw), agentic)
            if kind == "goal" and record.position not in forgotten:  # the label travels to the items that follow:
                goal = extract.goal_text(self._bounded(masked(raw, c)))  # nothing private goes with it
            limit = opts.conclusion_chars if record.role == "assistant" else opts.tool_chars
            text = extract.head_tail(c.text, limit) if record.role in ("assistant", "tool") else c.text
            bounded = self._bounded(text)
            tags = {f"kind:{kind}", f"role:{record.role}", f"format:{source.format}", *c.tags}
            # A request to remember is one made to the memory: a user's to an agent, or a note to oneself. In a
            # conversation between people, "don't forget to call her" is said to the other one.
            if (kind == "note" or (agentic and record.role == "user")) and extract.is_remember(bounded):
                tags.add("remember")
            planned.append(
                _Planned(
                    record=record,
                    text=bounded,
                    kind=kind,
                    goal=goal,
                    tags=tags,
                    local_only=c.local_only,
                    redactions=sum(1 for f in c.findings if f.action == "redact"),
                    simhash=extract.simhash(self._bounded(c.text)),
                    chars=len(text) if len(bounded) < len(text) else 0,
                )
            )
        kept = _budget(planned, opts)
        for p in planned:
            if id(p) not in kept:
                gates.append(Gate(p.record.position, "budget"))
        return [p for p in planned if id(p) in kept], gates

    @staticmethod
    def _kind(record: Record, text: str, agentic: bool) -> str:
        if record.hint in ("tool_call", "file_op", "tool_result", "error"):
            return record.hint
        if record.hint == "note" or record.role == "note":
            return "note"
        if extract.is_noise(text):
            return "noise"
        if record.role == "user" and agentic:
            first = (extract.sentences(text) or [text])[0]
            if extract.cues(first).constraints and not extract.is_goal(first):
                return "constraint"
            # A request anywhere in the message sets the goal ("The export times out. Can you profile it?").
            if extract.is_goal(text) or any(extract.is_goal(s) for s in extract.sentences(text)[1:]):
                return "goal"
        if record.role == "assistant":
            return "conclusion"
        return "message"

    # -- write evaluation ------------------------------------------------------------------------------------------

    def _evaluate(self, planned: Sequence[_Planned], new: Sequence[_Planned], opts: IngestOptions) -> None:
        """Soft gates and scores for the new items: noise, contamination, near-duplicates of earlier items."""
        for p in new:
            if p.kind == "noise":
                p.gate = "noise"
            risks = extract.contamination(p.text)
            if risks:
                p.tags.add("contamination")
                p.gate = p.gate or "contamination"
        # Near-duplicates: SimHash candidates among earlier items of the session, confirmed by embeddings.
        candidates: list[tuple[_Planned, _Planned]] = []
        earlier: list[_Planned] = []
        new_ids = {id(p) for p in new}
        for p in planned:
            if id(p) in new_ids and p.kind not in ("noise", "tool_call", "file_op"):
                for q in earlier:
                    if extract.hamming(p.simhash, q.simhash) <= opts.near_dup_bits:
                        candidates.append((p, q))
                        break
            if p.kind not in ("noise",):
                earlier.append(p)
        if not candidates:
            return
        vecs = self.node.embedder.embed([t for p, q in candidates for t in (p.text, q.text)])
        for i, (p, q) in enumerate(candidates):
            a, b = vecs[2 * i], vecs[2 * i + 1]
            if float(np.dot(a, b)) >= opts.near_dup_cosine:
                p.gate = p.gate or "near_duplicate"
                p.duplicate_of = q.record.position

    def _item(
        self, source: Source, p: _Planned, opts: IngestOptions, now: int, asset_type: AssetType | None = None
    ) -> tuple[Asset, list[tuple[str, int, int]]]:
        """The L0 item of a planned record, fitted to the payload limit, and what fitting it cut (see :meth:`_fit`)."""
        r = p.record
        time = r.time or source.time or now
        entities = [e for e in extract.entities(p.text) if "REDACTED" not in e]  # not the placeholders' names
        if r.speaker and r.speaker not in ROLE_NAMES:
            entities = [r.speaker, *entities]
        tags = set(p.tags)
        if p.gate:
            tags.add(f"gated:{p.gate}")
        risk = 1.0 if "contamination" in tags else 0.0
        novelty = 0.0 if p.duplicate_of is not None else 1.0
        utility = UTILITY[p.kind] * (0.3 if p.gate else 1.0)
        payload: dict[str, Any] = {
            "text": p.text,
            "kind": p.kind,
            "role": r.role,
            "position": r.position,
            "session": source.source_id,
            "eval": {"utility": round(utility, 3), "novelty": novelty, "risk": risk},
        }
        if r.speaker:
            payload["speaker"] = r.speaker
        said = r.time or source.time  # relative dates are resolved against the source's own time, never the ingest's
        if said and (resolved := when.resolve(p.text, said)):
            payload["when"] = [list(pair) for pair in resolved]
        if source.title:
            payload["title"] = source.title
        if p.duplicate_of is not None:
            payload["eval"]["duplicate_of"] = item_id(source.source_id, p.duplicate_of)
        for k, v in r.meta.items():
            if k not in payload and isinstance(v, (str, int, float, bool)):
                # A parser's meta (a notes section heading, a path) is text no rule has seen yet.
                payload[k] = masked(v, self.rules.classify(v)) if isinstance(v, str) else v
        asset = Asset(
            id=item_id(source.source_id, r.position),
            asset_type=asset_type or TYPES[p.kind],
            payload=payload,
            owner_id=opts.owner,
            tenant_scope=opts.tenant,
            created_at=time,
            updated_at=time,
            creator=CREATORS[r.role],
            confidence_score=1.0,
            provenance_score=1.0,
            trust_class=TrustClass.LOWER_TRUST if risk else TrustClass.UNVERIFIED,
            privacy_scope=PrivacyScope.LOCAL_ONLY if p.local_only else opts.scope,
            replication_policy=opts.replication,
            goal=p.goal,
            level=Level.L0,
            segment=opts.segment,
            source=SourcePointer(source.source_id, r.start, r.end),
            entities=tuple(e for e in entities if e),
            tags=tuple(sorted(tags)),
        )
        return self.fit(asset)

    def fit(self, asset: Asset) -> tuple[Asset, list[tuple[str, int, int]]]:
        """``asset`` with its longest payload strings clipped (head and tail) until the payload fits the store's
        limit, and the cuts made as ``(field, chars before, chars after)``: a record too large to store must not fail
        its source's ingestion (nor a rung its curation). The verbatim record stays behind the source pointer."""
        cuts: list[tuple[str, int, int]] = []
        while (over := asset.payload_size() - self.store.max_payload_bytes) > 0:
            strings = {k: v for k, v in asset.payload.items() if isinstance(v, str) and v}
            lists = {k: _encoded(v) for k, v in asset.payload.items() if isinstance(v, tuple) and v}
            heaviest = max(lists, key=lists.__getitem__, default="")
            if heaviest and (not strings or lists[heaviest] > over + FIT_MARGIN_CHARS * 4):
                # A list (a rung's entities, tags, decisions) holds most of the weight: its tail goes first.
                field, whole = heaviest, asset.payload[heaviest]
                kept = whole[: len(whole) // 2]
                asset = asset.replace(payload={**asset.payload, field: kept})
                cuts.append((field, len(whole), len(kept)))
                continue
            if not strings:
                raise InvalidInput(f"item {asset.id}: its payload is over the limit with no text left to clip")
            field = max(strings, key=lambda k: (len(strings[k]), k == "text"))
            value = strings[field]
            # Characters kept in proportion to the bytes that must go (a character takes 1 to 6 bytes in the JSON);
            # a cut that keeps denser characters than the average is cut again.
            size = _encoded(value)
            limit = min(len(value) - 1, len(value) * max(0, size - over - FIT_MARGIN_CHARS) // size)
            asset = asset.replace(payload={**asset.payload, field: extract.head_tail(value, max(0, limit))})
            cuts.append((field, len(value), len(asset.payload[field])))
        return asset, cuts

    def _bounded(self, text: str) -> str:
        """``text``, or its head and tail when it is longer than any item can hold (a character takes at least one
        byte): what the rules, the extractors and the embedder read is bounded, whatever the size of the input."""
        room = self.store.max_payload_bytes
        return text if len(text) <= room else extract.head_tail(text, max(0, room - FIT_MARGIN_CHARS))

    # -- facts and temporal tracking -------------------------------------------------------------------------------

    def _facts(
        self, source: Source, planned: Sequence[_Planned], items: Sequence[Asset], opts: IngestOptions, start: int
    ) -> tuple[list[Asset], list[Asset], dict[str, int]]:
        """Slot facts of the new items, each superseding (or contradicting) the fact that held its slot before it.

        Slots are the owner's (within the tenant): another owner's facts are never touched. What held a slot before
        is decided in time order, so ingesting a source again (its watermark lost, or its records rewritten) derives
        the same facts, and a session ingested after a later one neither overrides the later facts nor stays open.
        """
        stats = {"superseded": 0, "contradicted": 0}
        facts: list[Asset] = []
        current: dict[str, Asset | None] = {}  # slot -> the fact that holds it now
        edits: dict[str, Asset] = {}
        pending = [
            (p, item, k, f)
            for p, item in zip(planned, items, strict=True)
            if not p.gate
            for k, f in enumerate(p.facts())
        ]
        fresh_ids = {fact_id(source.source_id, p.record.position, k) for p, _, k, _ in pending}
        stored: dict[str, list[Asset]] = {}  # slot -> the owner's other stored facts that can hold it
        for p, item, k, f in pending:
            fid = fact_id(source.source_id, p.record.position, k)
            old = self._stored(fid)
            if old is not None and old.tombstone:
                continue  # a forgotten fact stays forgotten
            speaker = p.record.speaker if p.record.speaker not in ROLE_NAMES else ""
            if not f.entity and speaker:  # in a conversation, an unowned claim is the speaker's
                f = dataclasses.replace(f, entity=speaker.lower())
            slot = slot_tag(f.entity, f.attribute)
            if slot not in stored:
                stored[slot] = self._slot_facts(slot, opts, fresh_ids)
                current[slot] = None
            # What holds the slot just before this fact: this batch's last fact of the slot, unless a stored fact of
            # another session came between them (then that one, and this batch's last fact closes where it began).
            held = _held(stored[slot], source.source_id, item.created_at, start)
            mine = current[slot]
            if held is not None and (mine is None or (held.valid_from, held.id) > (mine.valid_from, mine.id)):
                if mine is not None:
                    closed = edits.get(mine.id, mine)
                    if not closed.valid_to:
                        edits[mine.id] = closed.replace(valid_to=held.valid_from, signature=b"")
                current[slot] = held
            payload = {
                "text": f.text,
                "entity": f.entity,
                "attribute": f.attribute,
                "value": f.value,
                "negated": f.negated,
                "session": source.source_id,
            }
            fields = inherit([item])
            supersedes: tuple[str, ...] = ()
            contradicts: tuple[str, ...] = ()
            prev = current[slot]
            if prev is not None:
                if f.negated and _same_value(prev, f.value) and not prev.payload.get("negated"):
                    contradicts = (prev.id,)
                    stats["contradicted"] += 1
                else:  # a new value, or the same one restated: either way the slot's holder changes
                    supersedes = (prev.id,)
                    stats["superseded"] += 1
                    closed = edits.get(prev.id, prev)
                    if not closed.valid_to and closed.valid_from <= item.created_at:
                        edits[prev.id] = closed.replace(valid_to=item.created_at, signature=b"")
            fact = Asset(
                id=fid,
                asset_type=AssetType.FACT,
                payload=payload,
                created_at=item.created_at,
                updated_at=item.created_at,
                creator=item.creator,
                confidence_score=0.8,
                provenance_score=1.0,
                trust_class=item.trust_class,
                goal=item.goal,
                level=Level.L2,
                segment=item.segment,
                source=item.source,
                entities=tuple({f.entity, *item.entities} - {""}),
                tags=(FACT_TAG, slot),
                valid_from=item.created_at,
                supersedes=supersedes,
                contradicts=contradicts,
                **fields,
            )
            facts.append(self.fit(fact)[0])  # its text is a sentence of the item's: it fits when the item does
            if not contradicts:
                current[slot] = fact
        # Edits of facts written in this same batch fold into the new fact itself.
        fresh = {f.id: i for i, f in enumerate(facts)}
        out_edits = []
        for fid, edited in edits.items():
            if fid in fresh:
                facts[fresh[fid]] = edited
            else:
                out_edits.append(edited)
        # A slot's last new fact closes where a later stored fact (a session ingested earlier) replaced it.
        for slot, last in current.items():
            i = fresh.get(last.id) if last is not None else None
            if i is None or facts[i].valid_to:
                continue
            after = _following(stored[slot], source.source_id, facts[i].valid_from)
            if after is not None:
                facts[i] = facts[i].replace(valid_to=after.valid_from)
        return facts, out_edits, stats

    def _slot_facts(self, slot: str, opts: IngestOptions, exclude: AbstractSet[str]) -> list[Asset]:
        """The stored facts of ``slot`` that can hold it: the owner's (in the tenant), live, not contradictions, and
        not about to be derived again (``exclude``)."""
        return [
            a
            for a in self.store.get_many(self.store.list_ids("tag", slot))
            if a is not None
            and a.owner_id == opts.owner
            and a.tenant_scope == opts.tenant
            and not a.contradicts
            and a.id not in exclude
        ]


def _same_value(fact: Asset, value: str) -> bool:
    return str(fact.payload.get("value", "")).lower() == value.lower()


def _before(fact: Asset, source_id: str, time: int, start: int) -> bool:
    """Whether stored ``fact`` precedes a new fact of ``source_id`` at ``time``: the source's own facts do when they
    come from records below the watermark (``start`` > 0: at 0 they are all being derived again); other sources' facts
    by time, ties broken by source id."""
    session = str(fact.payload.get("session", ""))
    if session == source_id:
        return start > 0
    return (fact.valid_from, session) < (time, source_id)


def _held(stored: Sequence[Asset], source_id: str, time: int, start: int) -> Asset | None:
    """The stored fact that holds a slot just before a new fact of ``source_id`` at ``time``: the latest of those
    before it that none of those before it supersedes."""
    before = [a for a in stored if _before(a, source_id, time, start)]
    replaced = {t for a in before for t in a.supersedes}
    return max((a for a in before if a.id not in replaced), key=lambda a: (a.valid_from, a.id), default=None)


def _following(stored: Sequence[Asset], source_id: str, time: int) -> Asset | None:
    """The earliest stored fact of another source that comes after a new fact of ``source_id`` at ``time``."""
    after = [a for a in stored if str(a.payload.get("session", "")) != source_id and not _before(a, source_id, time, 0)]
    return min(after, key=lambda a: (a.valid_from, str(a.payload.get("session", "")), a.id), default=None)


def _budget(planned: Sequence[_Planned], opts: IngestOptions) -> set[int]:
    """The items a session keeps under its budget: each kind its fixed share, most recent first; unused room then
    goes to the most recent of the rest. Returns ``id()``s of the kept items."""
    if len(planned) <= opts.item_budget:
        return {id(p) for p in planned}
    kept: set[int] = set()
    for kind in KINDS:
        quota = int(opts.item_budget * opts.shares.get(kind, 0.0))
        of_kind = [p for p in planned if p.kind == kind]
        kept.update(id(p) for p in of_kind[len(of_kind) - quota :] if quota)
    for p in reversed(planned):
        if len(kept) >= opts.item_budget:
            break
        kept.add(id(p))
    return kept


def _strip_envelopes(records: Sequence[Record]) -> list[str]:
    """Record texts with every memory envelope cut out.

    The envelope rules apply to one text at a time: a message is a text of its own (an envelope never spans two, and a
    malformed one must not swallow the messages around it), while a run of note records is one text split into
    paragraphs (a pasted frame with blank lines in its body spans several).
    """
    out: list[str] = []
    i = 0
    while i < len(records):
        j = i + 1
        if records[i].role == "note":
            while j < len(records) and records[j].role == "note":
                j += 1
        out.extend(_strip_text([r.text for r in records[i:j]]))
        i = j
    return out


def _strip_text(pieces: Sequence[str]) -> list[str]:
    """The pieces of one text (joined by newlines) with the envelopes cut out, piece by piece."""
    sep = "\n"
    joined = sep.join(pieces)
    if not envelope.contains(joined):
        return list(pieces)
    starts, pos = [], 0
    for piece in pieces:
        starts.append(pos)
        pos += len(piece) + len(sep)
    spans = [span for a, b in envelope.spans(joined) for span in _confine(a, b, joined, starts)]
    out = []
    pos = 0
    for piece in pieces:
        lo, hi = pos, pos + len(piece)
        keep = []
        cursor = lo
        for a, b in spans:
            if b <= cursor or a >= hi:
                continue
            keep.append(joined[cursor : max(cursor, a)])
            cursor = max(cursor, min(b, hi))
        keep.append(joined[cursor:hi])
        out.append("".join(keep))
        pos = hi + len(sep)
    return out


_OPEN: Final = re.compile(r"<\s*gaml-memory\b", re.IGNORECASE)
_STAMPED_OPEN: Final = re.compile(r"<\s*gaml-memory\b[^>]*\breceipt\s*=", re.IGNORECASE)


def _confine(a: int, b: int, joined: str, starts: Sequence[int]) -> list[tuple[int, int]]:
    """A span of the envelope rules that crosses paragraphs is kept whole only when it opens with a receipt, as every
    envelope hydration writes does (a pasted frame, even cut off). Otherwise — a note that merely mentions the tags,
    an opening tag left open, a closing tag left alone — each end stays within its own paragraph: the opening one cut
    to the end of its paragraph, the closing one from the start of its paragraph, and the paragraphs between kept."""
    first = bisect.bisect_right(starts, a) - 1
    last = bisect.bisect_right(starts, max(a, b - 1)) - 1
    if first == last or _STAMPED_OPEN.match(joined, a):
        return [(a, b)]
    out = []
    if _OPEN.match(joined, a):
        out.append((a, starts[first + 1] - 1))
    if b < len(joined) or not _OPEN.match(joined, a):  # it ends with a closing tag
        out.append((starts[last], b))
    return out


def parse_shares(text: str) -> dict[str, float]:
    """``kind=share,…`` (for the CLI) → a shares table."""
    out = dict(DEFAULT_SHARES)
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, _, value = part.partition("=")
        try:
            out[kind.strip()] = float(value)
        except ValueError:
            raise InvalidInput(f"shares: {part!r} is not kind=number") from None
    return out


__all__ = ["KINDS", "Gate", "IngestOptions", "Ingestor", "Report", "fact_id", "slot_tag"]
