"""Hydration: the slice of memory a goal needs, under a token budget, at the right detail, with a receipt. Pure core.

A request names a goal, a total budget and a **plane**: segments (a segment of memory, or ``*`` for every segment the
plane does not name), each with its own budget, seed count, fact cap and walk settings.

0. **Profile.** The frame opens with what stands whatever the goal (``## profile``, handles ``p1`` …), within its own
   budget: :data:`PROFILE_SHARE` of what the envelope leaves, at most :data:`PROFILE_TOKENS`, and none when that is
   under :data:`PROFILE_FROM`, unless the request gives one (at most half). In order: what the caller tagged
   ``remember`` or ``pinned``, then the constraints and policies it may use, then its own facts, goals, plans and
   procedures (and ingested requests and constraints) while the tiers hold them hot (their heat or their own recency
   at the frame's time: tiers decide what *stands*, never how relevant anything is). Each is shown verbatim, else by
   its sentence for the goal, else passed over; what the profile does not spend goes to the segments, and what it
   shows is not shown again. Being shown there is not a visit (no heat), so the profile does not keep itself hot.
   Never what ingestion gated or what is of lower trust (:func:`node.core.store.views.standing`); with ``as_of``,
   only what is pinned or binds (heat is today's). The receipt declares it (``profile``; its facts have no segment,
   are ``seeded_by`` ``profile`` and say why they are ``standing``).

Then, for each segment:

1. **Jump.** The governed retrieval (:mod:`node.retrieve`, stages 1–6: identity, partitions, policy, trust, prefilter,
   temporal) decides what the caller may use *before anything is ranked*; relevance (dense + BM25) ranks only that.
   Each hit stands for a *unit*: an ingested item (a hit on one of its facts or on its own summary counts for the
   item), an arc (its L1/L2/L3 rungs are one unit at three levels), or a standalone asset. A hit scores by its dense
   and lexical ranks (each path's best :data:`DEPTH_PER_FACT` per unit of the fact cap, at least :data:`DEPTH_MIN`)
   fused with k = :data:`RRF_K` (20: the first ranks of each path weigh more than in plain RRF's 60), or
   :data:`RRF_K_PER_FACT` of the fact cap when that is larger (a frame of more units reaches deeper ranks); a unit
   by its best hit plus :data:`SECOND_HITS` of the others. A third path reads each turn *in its context*: the best
   ranked items and assets (:data:`CONTEXT_UNITS` per unit of the fact cap), and the turn after each of those turns,
   ordered by the goal's cosine with the turn's vector plus the vector of the turn before it (an answer says what it
   answers only after its question), each adding :data:`CONTEXT_PATH` / (k + rank) to its unit. An item then
   gains :data:`CONTEXT_SHARE` of the score of the turn before it (an answer often shares no word with the goal; the
   question it answers does), one said by someone the goal names weighs :data:`SPEAKER_BOOST` more, one said in the
   calendar month the goal names (``camping in June``), or whose relative dates ingestion resolved into it (``last
   month``, said in July), :data:`PERIOD_BOOST` more, one that says when (a relative date resolved at ingest)
   :data:`WHEN_BOOST` more for a goal that asks when (:func:`when.asks_when`), and one that only asks (no sentence
   but questions and fillers), or an agent's turn that only announces its next step ("I'll start by running the
   tests": the records of the step follow it), :data:`ASKING_SHARE` of its score. Content-free items (greetings,
   acknowledgements: no word but fillers, stopwords and names) are never seeded, and are shown only when no unit
   with content matched. The best ``seeds`` units are the **focus**; items whose goal annotation matches the
   request's goal join it as goal matches. When no embeddings can be used, lexical ranking stands in; when that
   finds nothing either, the most recent items are the seeds, and the receipt declares the ``recency`` path and why.
2. **Walk.** From each focus item: its neighbouring turns in the same arc (same source, same goal), and items
   sharing one of its distinctive entities (an entity on more than :data:`COMMON_ENTITY_SHARE` of the partition's
   assets, such as a conversation's speakers, leads nowhere). They score a decayed share of the unit they were
   reached from. The best ``fact_cap`` units of all are the segment's candidates; the rest lie beyond.
3. **Detail by relevance.** The budget goes first to what answers: the candidates in rank order, each verbatim (L0)
   when its line (and its source's header) fits what is left, else its sentence for the goal (L1), else it is passed
   over and the next one tried. Arcs wait. Only with budget left after that pass do the periphery's rungs come in:
   arcs at their richest level that fits, and the candidates passed over as their distillation (L2) or breadcrumb
   (L3), while they fit, keeping room for the closing line, which counts what is left out (how many relevant items,
   and in which sources), when it fits.
4. **Resolution.** Superseded, expired and not-yet-valid assets never reach the candidates (stage 6); a fact
   contradicted by a later authorized fact is left out of the frame and listed in the receipt. For a goal about time
   (:data:`TIME_WORDS`), an item's relative dates show what they meant when said (``yesterday [7 May 2023]``), as
   ingestion resolved them (:mod:`node.core.text.when`).

The levels of an item: L0 its verbatim text; L1 one sentence (the sentence that best matches the goal, else its
stored summary; none when that says nothing, as "Wow, Melanie!" does); L2 its extracted facts (``entity attribute
value``), absent when it has none; L3 a breadcrumb (its distinctive entities or keywords). A level that saves no
tokens over the one above it is skipped.

The frame is the rendered lines inside the memory envelope (:mod:`node.envelope`), grouped by source under a header
with the source's date (``8 May 2023``) and title, each line starting with its handle (``m3``, or ``m3~L2`` below
L0). The **receipt** accounts for every token: per fact its handle, ids, segment, level, why it is there
(``seeded_by``), score and tokens; per segment its header and closing-line overhead; and the envelope's. Token
counts come from a :class:`node.tokens.TokenCounter` whose count is additive across newlines, so the receipt's total
is the frame's count. Each owner whose memory the frame holds gets the receipt (their part of it) in their access log.

Deterministic: the same state and request give the same frame and receipt (ties break on ids).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime
from typing import Any, Final

import numpy as np

from gaml.node.core.access.retrieve import Authorized, Query, Relevance, SearchRequest
from gaml.node.core.consensus import Consensus, Resolution
from gaml.node.core.memory.tiers import TierPolicy, tier_at
from gaml.node.core.node import Node, display_text, whose
from gaml.node.core.store.store import Records
from gaml.node.core.store.views import View
from gaml.node.core.text import envelope, extract, when
from gaml.node.core.tokens import HeuristicCounter, TokenCounter
from gaml.policy.access import Location, Permission
from gaml.policy.errors import InvalidInput
from gaml.policy.model import Asset, AssetType, Level, Tier, canonical_json

HYDRATION_MODES: Final = ("auto", "hybrid", "semantic", "lexical", "recency")
SEEDED_BY: Final = ("relevance", "goal_match", "entity_expansion", "arc_neighbour", "recency", "profile")
LEVEL_NAMES: Final = ("L0", "L1", "L2", "L3")
COMMON_ENTITY_SHARE: Final = 0.05
GOAL_MATCH: Final = 0.5  # word overlap (Jaccard) at which an item's goal matches the request's
GOAL_WEIGHT: Final = 0.6  # a goal match scores this share of the best seed
SECOND_HITS: Final = 0.3  # a unit hit through several assets (an item and its facts) adds this share of the others
RRF_K: Final = 20  # hydration fuses the dense and lexical ranks with this k: the first ranks of each path weigh more
RRF_K_PER_FACT: Final = 0.5  # … or with this share of the fact cap, when larger (a larger frame reaches deeper ranks)
CONTEXT_SHARE: Final = 0.5  # an item gains this share of the score of the turn before it (what it answers)
CONTEXT_PATH: Final = 0.5  # the weight of the third path (a turn read with the turn before it) beside dense and BM25
CONTEXT_UNITS: Final = 4  # … over the best units, this many per unit of the fact cap (and the turns after them)
SPEAKER_BOOST: Final = 1.3  # an item said by someone the goal names scores this much more
# An item that only asks ("Wow, did you make that? What inspired it?": no sentence but questions and fillers) scores
# this share: it states nothing a frame could hold as an answer (on LoCoMo dev, 3 % of such turns are evidence,
# against 25 % of the turns that state something); the turn after it still gains from it (:data:`CONTEXT_SHARE`).
ASKING_SHARE: Final = 0.2
# An agent's turn that only announces its next step (:func:`extract.announces_step`) scores the same share: the
# records of the step (the call, its output) follow it and say what it did. Only an assistant's (a person's "I'll
# start a painting class next month" is a plan worth holding).
# An item said in the calendar month the goal names ("camping in June"; its day and year too, when named) scores this
# much more: on LoCoMo dev, 102 of 885 questions name a month, and 101 of their 111 evidence turns were said in it.
PERIOD_BOOST: Final = 2.5
# An item that says when (a relative date ingestion resolved: "I went to a support group yesterday") scores this much
# more for a goal that asks when (:func:`when.asks_when`): the turn that dates the event answers it, a later mention of
# the same thing does not. On LoCoMo dev, 154 of 885 questions ask when; evidence held at 500 tokens 0.741 → 0.751
# (temporal questions 0.810 → 0.865); 1.3, 2.0 and 2.5 gave 0.746, 0.748 and 0.745 (docs/benchmarks.md).
WHEN_BOOST: Final = 1.5
STATES_FROM: Final = 2  # words of content (not fillers, stopwords or names) that make a sentence a statement
# A goal with one of these words is about time: an item's relative dates ("yesterday") show what they meant.
TIME_WORDS: Final = frozenset(
    {"when", "date", "day", "days", "week", "weeks", "weekend", "month", "months", "year", "years", "time", "long"}
    | {"ago", "since", "until", "before", "after", "first", "last", "recently", "often", "age", "old", "yesterday"}
)
DEPTH_PER_FACT: Final = 3  # each relevance path ranks this many hits per unit of the fact cap …
DEPTH_MIN: Final = 120  # … and at least this many …
DEPTH_MAX: Final = 1000  # … at most this many
RERANK: Final = 2  # the units read for the speaker and content checks: this many times the fact cap
MAX_BUDGET: Final = 1_000_000
MAX_GOAL_CHARS: Final = 8_000
MAX_SEGMENTS: Final = 32
FACT_TOKENS: Final = 24  # the default fact cap: one unit per this many tokens (a LoCoMo turn is about 30 at L0)
RECORD_CACHE: Final = 50_000  # decrypted records kept between frames (dropped whenever the store changes)
BEYOND_RESERVE: Final = 24  # tokens kept for a segment's closing line while it is fitted
L1_CHARS: Final = 240
L2_FACTS: Final = 4
L3_TERMS: Final = 3
SOURCE_LABEL: Final = "gaml"
PROFILE_SHARE: Final = 0.1  # the profile's default budget: this share of what the envelope leaves …
PROFILE_TOKENS: Final = 200  # … and at most this many tokens …
PROFILE_FROM: Final = 500  # … in a frame with at least this many tokens after the envelope (a smaller one is all goal)
PROFILE_UNITS: Final = 32  # the standing assets a profile tries, in order
PROFILE_ORDER: Final = ("pinned", "binding", "heat")  # why an asset stands (views.standing), in the order shown
PROFILE_HEADER: Final = "## profile"
LOOSE_HEADER: Final = "## memory"  # after a profile, the assets of no source start under this
NODE_ID_CHARS: Final = 12  # the node named in the envelope (enough to tell a user's nodes apart)
_WORD_RE: Final = re.compile(r"[a-z0-9]+")
# Each source's turns that the caller may use, in order, and each one's place: read once per segment.
_Turns = dict[tuple[bytes, str], tuple[list[str], dict[str, int]]]


# -- the request -------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Walk:
    """How far the walk goes from each focus item."""

    neighbours: int = 1  # turns on each side, within the item's arc
    entity_hops: int = 1  # 0: no entity expansion
    entity_fanout: int = 3  # items reached per entity
    decay: float = 0.5  # a walked unit scores this share of the unit it was reached from

    def __post_init__(self) -> None:
        for name, hi in (("neighbours", 8), ("entity_hops", 3), ("entity_fanout", 32)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= hi:
                raise InvalidInput(f"walk.{name} must be an integer in [0, {hi}], got {v!r}")
        if not isinstance(self.decay, (int, float)) or not 0.0 < self.decay <= 1.0:
            raise InvalidInput(f"walk.decay must be in (0, 1], got {self.decay!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class Segment:
    """One segment of the plane: which memory, and what it may spend."""

    name: str = "*"  # an asset segment, or * for every segment the plane does not name
    budget: int = 0  # tokens; 0: whatever the total leaves (one segment at most)
    seeds: int = 10
    fact_cap: int = 0  # most units in the segment; 0: budget // FACT_TOKENS (at least seeds)
    walk: Walk = Walk()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or len(self.name) > 200:
            raise InvalidInput("a segment has a name (an asset segment, or *) of at most 200 characters")
        for name, lo, hi in (("budget", 0, MAX_BUDGET), ("seeds", 1, 1000), ("fact_cap", 0, 5000)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise InvalidInput(f"segment {self.name}: {name} must be an integer in [{lo}, {hi}], got {v!r}")

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Segment:
        if not isinstance(d, Mapping):
            raise InvalidInput("a plane segment is a JSON object")
        unknown = set(d) - {"name", "budget", "seeds", "fact_cap", "walk"}
        if unknown:
            raise InvalidInput(f"unknown plane segment field(s): {', '.join(sorted(unknown))}")
        walk = d.get("walk", {})
        if not isinstance(walk, Mapping):
            raise InvalidInput("segment walk is a JSON object")
        unknown = set(walk) - {f.name for f in dataclasses.fields(Walk)}
        if unknown:
            raise InvalidInput(f"unknown walk field(s): {', '.join(sorted(unknown))}")
        fields = {k: v for k, v in d.items() if k != "walk"}
        return cls(**fields, walk=Walk(**walk))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # the walk nests as its own object


def parse_plane(data: Any) -> tuple[Segment, ...]:
    """A plane from JSON: a list of segments, or ``{"segments": [...]}``."""
    if isinstance(data, Mapping):
        data = data.get("segments")
    if not isinstance(data, list) or not data:
        raise InvalidInput('a plane is a non-empty list of segments (or {"segments": [...]})')
    return tuple(Segment.from_json(d) for d in data)


@dataclasses.dataclass(frozen=True, slots=True)
class HydrationRequest:
    goal: str
    principal: str
    now: int
    budget: int  # total tokens, envelope included
    plane: tuple[Segment, ...] = ()  # empty: one * segment with the whole budget
    purpose: Permission = Permission.CONTEXT
    location: Location = Location.THIS_DEVICE
    mode: str = "auto"  # auto (hybrid, degrading as needed), hybrid, semantic, lexical or recency
    as_of: int = 0  # 0: now
    profile: int | None = None  # tokens for the profile at the head; None: PROFILE_SHARE, at most PROFILE_TOKENS

    def __post_init__(self) -> None:
        if not isinstance(self.goal, str) or not self.goal.strip():
            raise InvalidInput("hydration needs a goal (non-empty text)")
        if len(self.goal) > MAX_GOAL_CHARS:
            raise InvalidInput(f"the goal is {len(self.goal)} characters; at most {MAX_GOAL_CHARS}")
        if not isinstance(self.budget, int) or isinstance(self.budget, bool) or not 0 < self.budget <= MAX_BUDGET:
            raise InvalidInput(f"budget must be an integer in [1, {MAX_BUDGET}], got {self.budget!r}")
        if not isinstance(self.purpose, Permission):
            raise InvalidInput("a hydration states its purpose (context, read, …)")
        if not isinstance(self.location, Location):
            raise InvalidInput("a hydration states where it executes")
        if self.mode not in HYDRATION_MODES:
            raise InvalidInput(f"mode is one of {', '.join(HYDRATION_MODES)}, not {self.mode!r}")
        if len(self.plane) > MAX_SEGMENTS:
            raise InvalidInput(f"a plane has at most {MAX_SEGMENTS} segments")
        names = [s.name for s in self.plane]
        if len(set(names)) != len(names):
            raise InvalidInput("plane segment names repeat")
        if sum(1 for s in self.plane if s.budget == 0) > 1:
            raise InvalidInput("at most one plane segment may leave its budget to the remainder (budget 0)")
        if self.profile is not None and (
            not isinstance(self.profile, int) or isinstance(self.profile, bool) or not 0 <= self.profile <= MAX_BUDGET
        ):
            raise InvalidInput(f"profile must be a number of tokens in [0, {MAX_BUDGET}], got {self.profile!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class Hydration:
    frame: str
    receipt: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"frame": self.frame, "receipt": self.receipt}


def peers_by_asset(report: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per asset, the peers whose answers in a peer read's report returned it (sorted)."""
    out: dict[str, set[str]] = {}
    for a in report.get("answered", ()):
        for id_ in a.get("assets", ()):
            out.setdefault(id_, set()).add(a["node"])
    return {id_: sorted(nodes) for id_, nodes in out.items()}


def with_peers(h: Hydration, report: Mapping[str, Any]) -> Hydration:
    """The hydration with the peer read that preceded it declared: the report as the receipt's ``peers``, and on
    each fact the peers whose answers returned its asset or one it covers (``peers``)."""
    by_asset = peers_by_asset(report)
    receipt = dict(h.receipt)
    receipt["peers"] = dict(report)
    facts = []
    for f in receipt.get("facts", ()):
        nodes = sorted({n for i in (f["id"], *f["covers"]) for n in by_asset.get(i, ())})
        facts.append({**f, "peers": nodes} if nodes else f)
    receipt["facts"] = facts
    return Hydration(h.frame, receipt)


# -- units -------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class _Rep:
    """One level of a unit: the asset it shows, the line, its tokens and the items it stands for."""

    asset_id: str
    line: str
    tokens: int
    covers: tuple[str, ...]


@dataclasses.dataclass(slots=True)
class _Unit:
    key: str
    kind: str  # item, arc or asset
    pid: bytes
    view: View  # the item, the arc's first rung, or the asset
    score: float
    seeded_by: str
    distance: int  # 0 focus, 1 one hop, 2 periphery
    members: tuple[str, ...] = ()  # an arc's rung ids (L1, L2, L3 where present)
    covers: tuple[str, ...] = ()  # an arc's items that the caller may use (what it stands for in the receipt)
    handle: str = ""
    reps: list[_Rep | None] = dataclasses.field(default_factory=lambda: [None, None, None, None])
    level: int = -1  # the level shown; -1: not in the frame
    group: str = ""  # the source it is shown under
    empty: bool = False  # says nothing (a greeting, an acknowledgement): shown only when nothing else matches
    checked: bool = False  # its text was read for the content check


@dataclasses.dataclass(slots=True)
class _Group:
    header: str
    tokens: int
    order: tuple[int, str, int]  # (time, source id, first offset) for rendering
    title: str = ""
    present: int = 0


# -- the hydrator ------------------------------------------------------------------------------------------------------


class Hydrator:
    def __init__(
        self,
        node: Node,
        counter: TokenCounter | None = None,
        *,
        on_read: Callable[[Sequence[tuple[str, Level]], int, Records], None] | None = None,
        tiers: TierPolicy | None = None,
        consensus: Consensus | None = None,
    ) -> None:
        self.node = node
        # Conflicts among what peers of a boundary claim, resolved before anything is ranked into the frame (None: a
        # node without replication, whose memory is all its own).
        self.consensus = consensus
        self.tiers = tiers or TierPolicy()  # what is hot, for the profile (the ladder's policy on a node)
        self.store = node.store
        self.retriever = node.retriever
        self.counter = counter or HeuristicCounter()
        # Told what the frame holds, with the records the frame opened (Ladder.visit keeps the tiers' heat, reading
        # them through it and leaving it current).
        self.on_read = on_read
        # Records read for earlier frames, while the store has not changed (Store.state): a running node serves many
        # frames over the same memory, and opening a record (decrypt, verify the encoding, build the asset) is most of
        # a frame's cost. Only ids already authorized for the current caller are looked up here; the cache never
        # decides what a caller sees.
        self._records = Records(RECORD_CACHE)
        # What this module and the text functions remember of texts (sentences, content words: pure functions, kept
        # for the texts read most recently) is dropped whenever the store erased something, so that a forgotten text
        # does not outlive its erasure in them (every erasure adds a tombstone).
        self._tombstones = self.store.tombstones

    def count(self, line: str) -> int:
        return self.counter.count(line + "\n")

    def hydrate(self, req: HydrationRequest) -> Hydration:
        if self.store.tombstones != self._tombstones:
            clear_text_caches()
            self._tombstones = self.store.tombstones
        sreq = SearchRequest(
            req.goal,
            req.principal,
            req.purpose,
            req.now,
            req.location,
            k=1,
            as_of=req.as_of,
            mode={"semantic": "dense", "lexical": "lexical"}.get(req.mode, "hybrid"),
        )
        auth = self.retriever.authorize(sreq)
        rid = self._receipt_id(req, auth)
        source = f"{SOURCE_LABEL}:{self.store.node_id[:NODE_ID_CHARS]}"
        head = envelope.open_tag(rid, source)
        overhead = self.count(head) + self.counter.count(envelope.CLOSE_TAG)
        self._plane(req, overhead)  # the plane fits before anything is read
        contradicted = self._contradicted(auth)
        res = Resolution()
        profile = self._profile(req, auth, contradicted, self._profile_budget(req, overhead), res)
        plane = self._plane(req, overhead + profile["spent"])  # what the profile did not spend goes to the goal
        named = {s.name for s in plane if s.name != "*"}
        paths: list[tuple[str, str]] = []
        lines: list[str] = list(profile["lines"])
        facts: list[dict[str, Any]] = list(profile["facts"])
        segments: list[dict[str, Any]] = []
        beyond_total = 0
        beyond_where: dict[str, int] = {}
        shown: list[_Unit] = list(profile["units"])
        handed = 0  # handles given so far (a unit passed over keeps its number unused: no two lines share one)
        query = self.retriever.query(sreq.text, sreq.principal)  # the goal, embedded once for every segment
        for seg in plane:
            keep = {
                pid: _minus(self._in_segment(pid, ids, seg.name, named), contradicted) for pid, ids in auth.keep.items()
            }
            titled = len(plane) > 1 or seg.name != "*"
            out = self._segment(req, sreq, query, seg, auth, keep, handed, titled, res, profile["ids"])
            handed += out["handed"]
            paths.append((out["path"], out["fallback"]))
            lines += out["lines"]
            facts += out["facts"]
            shown += out["units"]
            beyond_total += out["beyond"]
            for where, n in out["where"].items():
                beyond_where[where] = beyond_where.get(where, 0) + n
            segments.append(
                {
                    "name": seg.name,
                    "budget": out["budget"],
                    "spent": out["spent"],
                    "overhead": out["overhead"],
                    "facts": len(out["facts"]),
                    "beyond": out["beyond"],
                }
            )
        frame = head + "\n" + "".join(line + "\n" for line in lines) + envelope.CLOSE_TAG
        spent = overhead + profile["spent"] + sum(s["spent"] for s in segments)
        path, fallback = _path(paths)
        receipt: dict[str, Any] = {
            "receipt": rid,
            "at": req.now,
            "caller": {"principal": req.principal, "purpose": req.purpose.value, "location": req.location.value},
            "goal": req.goal,
            "budget": {"total": req.budget, "spent": spent},
            "counter": self.counter.name,
            "path": path,
            "fallback": fallback,
            "partitions": sorted(self.store.partition_name(pid) for pid, _ in auth.partitions),
            "overhead": overhead,
            "profile": {k: profile[k] for k in ("budget", "spent", "overhead", "considered")}
            | {"facts": len(profile["facts"])},
            "segments": segments,
            "facts": facts,
            "beyond": {
                "relevant": beyond_total,
                "where": [
                    {"source": w, "items": n} for w, n in sorted(beyond_where.items(), key=lambda x: (-x[1], x[0]))
                ],
            },
            "resolved": {"temporal": auth.resolved, "contradicted": sorted(contradicted)},
        }
        if self.consensus is not None and (res.records or res.dropped):
            receipt["consensus"] = res.json()
            for f in receipt["facts"]:
                by = res.resolved_by.get(f["unit"])
                if by is not None:
                    f["consensus"] = {"record": by, "candidates": len(res.records[by]["candidates"])}
        self._log(req, auth, receipt, shown)
        return Hydration(frame, receipt)

    # -- request checks --------------------------------------------------------------------------------------------

    def _receipt_id(self, req: HydrationRequest, auth: Authorized) -> str:
        """Derived from the node, its journal position, what the caller may use (a grant changes it without a write
        to the journal), the embedder and the request: the same state and request, the same id. Keyed with the node's
        keys: the id goes into every owner's log, and an owner must not be able to test guesses of the goal on it."""
        usable = 0  # the set's digest: its members' keyed hashes combined, in no order (PartitionViews.digest_of)
        for pid, ids in sorted(auth.keep.items()):
            usable ^= self.store.views(pid).digest_of(ids)
        body = canonical_json(
            {
                "usable": f"{usable:032x}",
                "usable_count": sum(len(ids) for ids in auth.keep.values()),
                "embedder": self.node.embedder.id,
                "node": self.store.node_id,
                "seq": self.store.seq,
                "local": self.store.local_writes,  # heat decides what a profile holds
                "goal": req.goal,
                "principal": req.principal,
                "now": req.now,
                "budget": req.budget,
                "plane": [s.to_json() for s in req.plane],
                "purpose": req.purpose.value,
                "location": req.location.value,
                "mode": req.mode,
                "as_of": req.as_of,
                "profile": req.profile,
                "counter": self.counter.name,
            }
        )
        return "r_" + self.store.mac(b"receipt", body.encode())[:10].hex()

    def _in_segment(self, pid: bytes, ids: AbstractSet[str], name: str, named: set[str]) -> AbstractSet[str]:
        """Those of a partition's ``ids`` that belong to segment ``name`` (``*``: to no segment the plane names)."""
        views = self.store.views(pid).views
        if name == "*":
            return ids if not named else {i for i in ids if views[i].segment not in named}  # (read only from here)
        return {i for i in ids if views[i].segment == name} if name in named else set()

    def _plane(self, req: HydrationRequest, overhead: int) -> tuple[Segment, ...]:
        room = req.budget - overhead
        if room <= 0:
            raise InvalidInput(f"a budget of {req.budget} tokens is too small: the envelope alone takes {overhead}")
        plane = req.plane or (Segment("*", room),)
        fixed = sum(s.budget for s in plane)
        if fixed > room:
            raise InvalidInput(
                f"the plane's segment budgets add up to {fixed} tokens, but the total of {req.budget} leaves {room} "
                f"after the envelope ({overhead})"
            )
        return tuple(dataclasses.replace(s, budget=room - fixed) if s.budget == 0 else s for s in plane)

    def _contradicted(self, auth: Authorized) -> set[str]:
        """Authorized assets that a later authorized asset of the same owner contradicts: they are resolved out of the
        frame (another principal's claim never silences an owner's memory, nor, within a boundary, another member's
        claim: consensus weighs the two as one slot, ``Consensus.edge_counts``)."""
        keeps = list(auth.keep.values())
        out = set()
        for pid, ids in auth.keep.items():
            views = self.store.views(pid)
            for target, by in views.contradicted.items():
                v = views.views.get(target)
                if target not in ids or v is None:
                    continue
                for other in by:
                    w = self.store.view(other)
                    if (
                        any(other in k for k in keeps)
                        and w is not None
                        and w.owner_id == v.owner_id
                        and (w.created_at, w.id) >= (v.created_at, v.id)
                        and (self.consensus is None or self.consensus.edge_counts(w, v))
                    ):
                        out.add(target)
                        break
        return out

    # -- the profile -----------------------------------------------------------------------------------------------

    def _profile_budget(self, req: HydrationRequest, overhead: int) -> int:
        """The profile's budget: the request's, else :data:`PROFILE_SHARE` of the room, at most
        :data:`PROFILE_TOKENS`, and none in a room under :data:`PROFILE_FROM` (there, a profile line would displace
        one of a handful of lines for the goal); never more than half the room, nor more than half of what the plane's
        fixed segment budgets leave to a remainder segment (all of it when none takes the remainder)."""
        room = req.budget - overhead
        if req.profile is None:
            want = min(PROFILE_TOKENS, int(room * PROFILE_SHARE)) if room >= PROFILE_FROM else 0
        elif req.profile > room // 2:
            raise InvalidInput(
                f"a profile of {req.profile} tokens would take more than half of the {room} tokens the frame has for "
                "memory; the goal's evidence comes first"
            )
        else:
            want = req.profile
        free = room - sum(s.budget for s in req.plane)  # what no fixed segment claims
        if not req.plane or any(s.budget == 0 for s in req.plane):
            free //= 2  # a segment takes the remainder: the profile never takes most of it
        return max(0, min(want, free))

    def _profile(
        self, req: HydrationRequest, auth: Authorized, contradicted: set[str], budget: int, res: Resolution
    ) -> dict[str, Any]:
        """The head of the frame: what stands whatever the goal (:func:`node.core.store.views.standing`): the caller's
        own assets tagged ``remember`` or ``pinned``, then the constraints and policies the caller may use (each class
        newest first), then the caller's own facts, goals, plans and procedures (and ingested requests and
        constraints) while the tiers hold them hot (heat or their own recency, at the time of the frame), the most
        recently created or visited first. Each is shown verbatim when it fits, else as its sentence for the goal,
        else passed over; what the profile does not spend goes to the goal. Only what the caller may use is
        considered (privacy before anything), and a profile's lines are not visits: being shown there does not keep
        an asset hot. The heat class is read from its head only (:meth:`PartitionViews.hot_candidates`)."""
        out: dict[str, Any] = {
            "budget": budget,
            "spent": 0,
            "overhead": 0,
            "considered": 0,
            "lines": [],
            "facts": [],
            "units": [],
            "ids": set(),
        }
        header_tokens = self.count(PROFILE_HEADER)
        if budget <= header_tokens:
            return out
        me = auth.principal.user
        found: list[tuple[int, int, str, View, bytes, str]] = []
        for pid, ids in auth.keep.items():
            views = self.store.views(pid)
            for id_, why in views.standing.items():
                v = views.views[id_]
                if (why == "binding" or v.owner_id == me) and id_ in ids and id_ not in contradicted:
                    found.append((PROFILE_ORDER.index(why), -v.created_at, id_, v, pid, why))
            if req.as_of:  # the heat is today's: a frame as of another time shows only what is pinned or binds
                continue
            hot = 0
            for touched, id_ in views.hot_candidates():  # the most recently created or visited first
                if (views.peak + 1.0) * self.tiers.decay(req.now - touched) < self.tiers.hot_at:
                    break  # neither this one nor any after it can still be hot
                v = views.views[id_]
                if v.owner_id != me or id_ not in ids or id_ in contradicted:  # another's hot memory is theirs
                    continue
                if tier_at(views.heat_of(id_), v.created_at, v.level, False, req.now, self.tiers) is not Tier.HOT:
                    continue
                found.append((PROFILE_ORDER.index("heat"), -touched, id_, v, pid, "heat"))
                hot += 1
                if hot == PROFILE_UNITS:
                    break  # in the order the profile shows them: it tries no more
        found.sort(key=lambda f: f[:3])
        out["considered"] = len(found)
        # Handles in that order (a line passed over leaves its number unused, as in the segments).
        units = [
            _Unit(id_, "item" if v.is_item else "asset", pid, v, 0.0, "profile", 0, handle=f"p{n + 1}")
            for n, (_, _, id_, v, pid, _) in enumerate(found[:PROFILE_UNITS])
        ]
        why_of = {f[2]: f[5] for f in found[:PROFILE_UNITS]}
        if self.consensus is not None and units:
            by_key = {u.key: u for u in units}
            self._resolve(by_key, auth.keep, req.now, len(units), res)
            units = [u for u in units if u.key in by_key]
        self._represent(req.goal, units, auth.keep, me)
        used = self._place(units, {}, header_tokens, budget, _focus_levels)  # one list, no source headers
        for u in units:
            if u.level < 0:
                continue
            out["units"].append(u)
            out["ids"].add(u.key)
            out["lines"].append(_rep(u).line)
            out["facts"].append({**_fact(u, ""), "standing": why_of[u.key]})
        if out["units"]:
            out["lines"].insert(0, PROFILE_HEADER)
            out["spent"] = used
            out["overhead"] = header_tokens
        return out

    # -- one segment -----------------------------------------------------------------------------------------------

    def _segment(
        self,
        req: HydrationRequest,
        sreq: SearchRequest,
        query: Query,
        seg: Segment,
        auth: Authorized,
        keep: dict[bytes, AbstractSet[str]],
        handles_from: int,
        titled: bool,
        res: Resolution,
        shown: AbstractSet[str] = frozenset(),
    ) -> dict[str, Any]:
        """One segment's part of the frame; ``shown``: what the frame shows already (the profile), not shown again
        (it may still seed the walk and stand in an arc's coverage)."""
        fact_cap = max(seg.fact_cap or seg.budget // FACT_TOKENS, seg.seeds)
        depth = min(DEPTH_MAX, max(DEPTH_PER_FACT * fact_cap, DEPTH_MIN))
        rel: Relevance | None = None
        fallback = ""
        path = "recency"
        if req.mode != "recency":
            rel = self.retriever.relevance(sreq, keep, depth, query)
            path = _relevance_path(rel)
            if rel.dense_error or (rel.dense_empty and sreq.mode != "lexical"):
                fallback = rel.dense_error or rel.dense_empty
            if not rel.ranked:
                fallback = "; ".join(x for x in (fallback, "no relevance path found anything for the goal") if x)
                rel, path = None, "recency"
        else:
            fallback = "recency was asked for"
        units: dict[str, _Unit] = {}
        if rel is not None:
            k = max(RRF_K, RRF_K_PER_FACT * fact_cap)
            self._jump(rel, keep, units, k)
            turns: _Turns = {}
            q = query.dense()[0] if rel.dense else None
            if q is not None:
                self._in_context(q, units, keep, k, turns, CONTEXT_UNITS * fact_cap, rel.dense)
            self._context(units, keep, turns)
            _dated(req.goal, units)
        else:
            self._recent(keep, units, fact_cap)
        self._check(req.goal, units, RERANK * fact_cap)
        if self.consensus is not None:
            self._resolve(units, auth.keep, req.now, RERANK * fact_cap, res)  # a slot is weighed whole
        ordered = sorted(units.values(), key=_priority)
        focus = ([u for u in ordered if not u.empty] or ordered)[: seg.seeds]
        for u in units.values():
            u.distance = 2
        for u in focus:
            u.distance = 0
        self._goal_matches(req.goal, keep, units, seg.seeds)
        self._walk(seg.walk, keep, units)
        if self.consensus is not None:
            self._resolve(units, auth.keep, req.now, RERANK * fact_cap, res)
        self._check_empty(units.values())  # what the goal matches and the walk brought in
        for key in shown & units.keys():
            del units[key]
        ranked = sorted(units.values(), key=_priority)
        chosen = ranked[:fact_cap]
        left_out = ranked[fact_cap:]
        for n, u in enumerate(chosen):
            u.handle = f"m{handles_from + n + 1}"
        handed = len(chosen)
        groups = self._represent(req.goal, chosen, keep, auth.principal.user)
        loose = groups.get("")
        if shown and loose is not None and not loose.header:  # after the profile, what has no source says it starts
            groups[""] = _Group(LOOSE_HEADER, self.count(LOOSE_HEADER), loose.order)
        header = (
            envelope.neutralize(f"# segment {seg.name}") if titled else ""
        )  # a plane of one * segment needs no title
        fixed = self.count(header) if header else 0
        if fixed > seg.budget:  # not even the title fits: the segment stays empty, and all of it lies beyond
            left_out, chosen, fixed, header = chosen + left_out, [], 0, ""
        room = seg.budget - fixed
        # Empty units are shown only when no unit with content matched the goal (then they are what there is).
        matched = any(not u.empty and u.seeded_by in ("relevance", "goal_match") for u in chosen)
        quiet = [u for u in chosen if not u.empty] if matched else chosen
        used = self._place(quiet, groups, 0, room, _focus_levels)
        reserve = min(BEYOND_RESERVE, room - used)
        used = self._place(quiet, groups, used, room - reserve, _periphery_levels)
        dropped = [u for u in chosen if u.level < 0] + left_out
        kept = [u for u in chosen if u.level >= 0]
        where: dict[str, int] = {}
        for u in dropped:
            g = groups.get(u.group)
            label = g.title if g is not None and g.title else _source_label(u)
            where[label] = where.get(label, 0) + 1
        closing = self._closing(dropped, where, room - used)
        body_tokens = sum(_tok(u) for u in kept)
        overhead = fixed + sum(g.tokens for g in groups.values() if g.present) + (self.count(closing) if closing else 0)
        lines = [header] if header else []
        for key, g in sorted(groups.items(), key=lambda kv: kv[1].order):
            members = sorted((u for u in kept if u.group == key), key=_reading_order)
            if not members:
                continue
            if g.header:
                lines.append(g.header)
            lines += [_rep(u).line for u in members]
        if closing:
            lines.append(closing)
        facts = [_fact(u, seg.name) for u in sorted(kept, key=lambda u: int(u.handle[1:]))]
        return {
            "path": path,
            "fallback": fallback,
            "lines": lines if (kept or closing) else [],
            "facts": facts,
            "units": kept,
            "budget": seg.budget,
            "spent": (body_tokens + overhead) if (kept or closing) else 0,
            "overhead": overhead if (kept or closing) else 0,
            "beyond": len(dropped),
            "where": where,
            "handed": handed,
        }

    # -- consensus -------------------------------------------------------------------------------------------------

    def _resolve(
        self,
        units: dict[str, _Unit],
        keep: Mapping[bytes, AbstractSet[str]],
        now: int,
        limit: int,
        res: Resolution,
    ) -> None:
        """Leave out of ``units`` what consensus rules out among the best ``limit`` (and again among the next best
        while it rules anything out, so nothing unchecked moves up into the frame). Arcs are this node's own
        curation, not a peer's claim."""
        assert self.consensus is not None
        checked: set[str] = set()
        while True:
            ranked = [u for u in sorted(units.values(), key=_priority) if u.kind != "arc"][:limit]
            if all(u.key in checked for u in ranked):
                return
            if all(u.view.id == u.key for u in ranked):
                # Nothing among them needs weighing (by what the views and the ledger say): nothing to open.
                clear = self.consensus.clear([u.view for u in ranked if u.key not in checked], now)
                if clear is not None:
                    res.ledgers.update(clear)
                    checked.update(u.key for u in ranked)
                    continue
            found = self._get_many([u.key for u in ranked])
            assets = [a for u in ranked if (a := found.get(u.key)) is not None]
            r = self.consensus.resolve(assets, now, lambda id_: any(id_ in ids for ids in keep.values()))
            checked.update(u.key for u in ranked)
            for id_, why in r.dropped.items():
                units.pop(id_, None)
                res.dropped[id_] = why
            res.records.update(r.records)
            res.resolved_by.update(r.resolved_by)
            res.ledgers.update(r.ledgers)
            if not r.dropped:
                return

    # -- jump ------------------------------------------------------------------------------------------------------

    def _jump(
        self, rel: Relevance, keep: dict[bytes, AbstractSet[str]], units: dict[str, _Unit], k: float = RRF_K
    ) -> None:
        """Each ranked hit joins the unit it stands for; a unit's score is its best hit plus a share of the others. A
        hit scores by its dense and lexical ranks fused with ``k`` (1 / (k + rank) per path)."""
        fused: dict[str, float] = {}
        for table in (rel.dense, rel.lexical):
            for id_, (rank, _) in table.items():
                fused[id_] = fused.get(id_, 0.0) + 1.0 / (k + rank)
        hits: dict[str, list[float]] = {}
        for id_, _, pid in rel.ranked:
            unit = self._unit_of(id_, pid, keep)
            if unit is None:
                continue
            if unit.key not in units:
                units[unit.key] = unit
            hits.setdefault(unit.key, []).append(fused.get(id_, 0.0))
        for key, scores in hits.items():
            scores.sort(reverse=True)
            units[key].score = scores[0] + SECOND_HITS * sum(scores[1:])

    def _turns(
        self, pid: bytes, v: View, keep: Mapping[bytes, AbstractSet[str]], turns: _Turns
    ) -> tuple[list[str], int]:
        """The turns of ``v``'s source that the caller may use, in order, and ``v``'s place among them (-1: none). Only
        what the caller may use: a hidden turn must not change a score."""
        where = (pid, v.source_id)
        known = turns.get(where)
        if known is None:
            members = self.store.views(pid).sources.get(v.source_id, {})
            usable = keep.get(pid, set())
            ordered = [i for i, _ in sorted(members.items(), key=lambda x: (x[1], x[0])) if i in usable]
            known = turns[where] = (ordered, {i: n for n, i in enumerate(ordered)})
        return known[0], known[1].get(v.id, -1)

    def _beside(self, v: View, pid: bytes, other: str) -> View | None:
        """The view of turn ``other`` when it serves the same goal as ``v``, said to the same owner's memory."""
        w = self.store.views(pid).views.get(other)
        return w if w is not None and w.goal == v.goal and w.owner_id == v.owner_id else None

    def _in_context(
        self,
        q: np.ndarray,
        units: dict[str, _Unit],
        keep: Mapping[bytes, AbstractSet[str]],
        k: float,
        turns: _Turns,
        limit: int,
        dense: Mapping[str, tuple[int, float]],
    ) -> None:
        """The third relevance path: the candidates (the ``limit`` best items and standalone assets the two paths
        ranked, and the turn after each of those turns) ranked by the cosine of the goal with each one's vector *plus
        the vector of the turn before it* (a turn read in its context: "We explored nature and roasted marshmallows"
        says what it answers only after "What did you do while camping?"), each adding :data:`CONTEXT_PATH` / (k +
        rank) to its unit's score, as a ranked hit does. Vectors come from memory (:meth:`Store.vectors_of`), only for
        ids the caller may use."""
        found: dict[str, tuple[bytes, str]] = {}  # candidate -> (partition, the turn before it, or "")
        added: list[str] = []  # the turns after ranked ones, made units here
        for u in sorted(units.values(), key=_priority)[:limit]:
            if u.kind == "arc":
                continue
            if u.kind != "item" or not u.view.source_id:
                found.setdefault(u.key, (u.pid, ""))
                continue
            order, at = self._turns(u.pid, u.view, keep, turns)
            if at < 0:
                continue
            before = order[at - 1] if at > 0 and self._beside(u.view, u.pid, order[at - 1]) is not None else ""
            found[u.key] = (u.pid, before)
            if at + 1 < len(order) and order[at + 1] not in units:
                after = self._beside(u.view, u.pid, order[at + 1])
                if after is not None:
                    found[after.id] = (u.pid, u.key)
                    units[after.id] = _Unit(after.id, "item", u.pid, after, 0.0, "relevance", 0)
                    added.append(after.id)
        # Alone, a candidate reads as itself: its cosine is the dense path's, when that path ranked it. Only the rest
        # need their vectors (read from the index: ~6 us each from hnswlib).
        scored = [(-dense[id_][1], id_) for id_, (_, before) in found.items() if not before and id_ in dense]
        todo = {id_: (pid, before) for id_, (pid, before) in found.items() if before or id_ not in dense}
        by_pid: dict[bytes, list[str]] = {}
        for id_, (pid, before) in todo.items():
            by_pid.setdefault(pid, []).extend((id_, before) if before else (id_,))
        vecs: dict[str, np.ndarray] = {}
        for pid, ids in by_pid.items():
            vecs.update(self.store.vectors_of(pid, ids))
        ids = [id_ for id_ in todo if id_ in vecs]
        if ids:
            zero = np.zeros_like(q)
            summed = np.stack([vecs[i] for i in ids]) + np.stack([vecs.get(todo[i][1], zero) for i in ids])
            norms = np.linalg.norm(summed, axis=1)
            cosines = (summed @ q) / np.where(norms > 0, norms, 1.0)
            scored += [(-float(c), id_) for c, n, id_ in zip(cosines, norms, ids, strict=True) if n > 0]
        scored.sort()
        for rank, (_, id_) in enumerate(scored, start=1):
            units[id_].score += CONTEXT_PATH / (k + rank)
        for id_ in added:
            if units[id_].score == 0.0:
                del units[id_]  # a turn after a ranked one that had no vector: nothing ranked it

    def _context(
        self,
        units: dict[str, _Unit],
        keep: Mapping[bytes, AbstractSet[str]],
        turns: _Turns,
    ) -> None:
        """An item gains :data:`CONTEXT_SHARE` of the score of the item before it in its source (the same goal): an
        answer often shares no word with the goal, while the question it answers does."""
        base = {key: u.score for key, u in units.items()}
        for u in sorted(units.values(), key=lambda u: u.key):
            if u.kind != "item" or not u.view.source_id:
                continue
            order, at = self._turns(u.pid, u.view, keep, turns)
            if at <= 0:
                continue
            before = order[at - 1]
            if before in units and self._beside(u.view, u.pid, before) is not None:
                u.score += CONTEXT_SHARE * base[before]

    def _check(self, goal: str, units: dict[str, _Unit], n: int) -> None:
        """Read the ``n`` best units' items: one said by someone the goal names scores :data:`SPEAKER_BOOST` more, one
        that only asks scores :data:`ASKING_SHARE` of its score, one not said in the month the goal names but whose
        resolved relative dates fall in it (:func:`when.resolve`) :data:`PERIOD_BOOST` more (as :func:`_dated` does for
        what was said in it), one with resolved relative dates :data:`WHEN_BOOST` more when the goal asks when
        (:func:`when.asks_when`), and one that says nothing is marked ``empty`` (:meth:`_check_empty`)."""
        named = _content_words(goal)
        period = when.named_period(goal)
        asks_when = when.asks_when(goal)
        best = [u for u in sorted(units.values(), key=_priority)[:n] if u.kind == "item"]
        found = self._get_many([u.key for u in best])
        for u in best:
            asset = found.get(u.key)
            who = _speaker(asset) if asset is not None else ""
            if who and _content_words(who) & named:
                u.score *= SPEAKER_BOOST
            if asset is not None:
                text = display_text(asset)
                if _only_asks(text) or _only_announces(asset, text):
                    u.score *= ASKING_SHARE
            resolved = _resolved(asset) if asset is not None and (period is not None or asks_when) else []
            if (
                period is not None
                and not period.holds(u.view.created_at)
                and any(period.covers(when.named_period(meaning)) for _, meaning in resolved)
            ):
                u.score *= PERIOD_BOOST  # "last month", said in April, is the March the goal names
            if asks_when and resolved:
                u.score *= WHEN_BOOST  # "yesterday" dates the event the goal asks about
        self._check_empty(best, found)

    def _check_empty(self, units: Iterable[_Unit], found: Mapping[str, Asset | None] | None = None) -> None:
        """Mark the content-free (no word but fillers, stopwords and names) among the items not checked yet, reading
        them unless ``found`` holds them."""
        todo = sorted((u for u in units if u.kind == "item" and not u.checked), key=lambda u: u.key)
        if found is None:
            found = self._get_many([u.key for u in todo])
        for u in todo:
            asset = found.get(u.key)
            if asset is not None:
                u.empty = extract.says_nothing(display_text(asset))
            u.checked = True

    def _unit_of(self, id_: str, pid: bytes, keep: dict[bytes, AbstractSet[str]]) -> _Unit | None:
        views = self.store.views(pid)
        v = views.views[id_]
        if v.is_item:
            return _Unit(v.id, "item", pid, v, 0.0, "relevance", 0)
        if len(v.derived_from) == 1:  # a fact of an item, or its own summary: the item is the unit
            item = views.views.get(v.derived_from[0])
            if item is not None and item.is_item and item.id in keep.get(pid, ()):
                return _Unit(item.id, "item", pid, item, 0.0, "relevance", 0)
        if v.asset_type is AssetType.BRIDGE_BLOCK and len(v.derived_from) > 1:
            # An arc (or session) rung: its siblings over the same items are the same unit at other levels.
            siblings = sorted(
                (
                    w
                    for w in (views.views.get(i) for i in views.derivatives.get(v.derived_from[0], ()))
                    if w is not None
                    and w.asset_type is AssetType.BRIDGE_BLOCK
                    and w.derived_from == v.derived_from
                    and w.id in keep.get(pid, ())
                ),
                key=lambda w: (w.level.value, w.id),
            )
            first = siblings[0] if siblings else v
            key = "arc:" + hashlib.blake2b("\x00".join(v.derived_from).encode(), digest_size=8).hexdigest()
            return _Unit(key, "arc", pid, first, 0.0, "relevance", 0, tuple(w.id for w in siblings) or (v.id,))
        if v.level is Level.L0 or not v.derived_from:
            return _Unit(v.id, "asset", pid, v, 0.0, "relevance", 0)
        return None  # a derivative whose sources this caller may not see, or of several items but no rung

    def _recent(self, keep: dict[bytes, AbstractSet[str]], units: dict[str, _Unit], n: int) -> None:
        """Recency seeding: the newest items (and standalone assets), newest first."""
        every = []
        for pid, ids in keep.items():
            views = self.store.views(pid).views
            every += [(views[i], pid) for i in ids if views[i].is_item or not views[i].derived_from]
        every.sort(key=lambda x: (-x[0].created_at, -x[0].source_start, x[0].id))
        for rank, (v, pid) in enumerate(every[:n]):
            kind = "item" if v.is_item else "asset"
            units[v.id] = _Unit(v.id, kind, pid, v, 1.0 / (60 + rank + 1), "recency", 0)

    def _goal_matches(self, goal: str, keep: dict[bytes, AbstractSet[str]], units: dict[str, _Unit], n: int) -> None:
        words = _content_words(goal)
        if not words:
            return
        top = max((u.score for u in units.values()), default=1.0 / 61)
        found: list[tuple[float, View, bytes, float]] = []
        for pid, ids in keep.items():
            views = self.store.views(pid)
            for g, members in views.goals.items():
                other = _content_words(g)
                sim = len(words & other) / len(words | other) if other else 0.0
                if sim < GOAL_MATCH:
                    continue
                for i in members:
                    if i in ids:
                        v = views.views[i]
                        found.append((sim, v, pid, -v.created_at))
        found.sort(key=lambda f: (-f[0], f[3], -f[1].source_start, f[1].id))
        for sim, v, pid, _ in found[:n]:
            score = top * GOAL_WEIGHT * sim
            u = units.get(v.id)
            if u is None:
                units[v.id] = _Unit(v.id, "item", pid, v, score, "goal_match", 0)
            elif u.distance > 0 or u.score < score:
                u.distance = 0
                if u.score < score:
                    u.score, u.seeded_by = score, "goal_match"

    def _walk(self, walk: Walk, keep: dict[bytes, AbstractSet[str]], units: dict[str, _Unit]) -> None:
        frontier = sorted((u for u in units.values() if u.distance == 0 and u.kind == "item"), key=_priority)
        for u in frontier:
            if walk.neighbours:
                self._neighbours(u, walk, keep, units)
        for hop in range(1, walk.entity_hops + 1):
            reached: list[_Unit] = []
            for u in frontier:
                reached += self._entity_walk(u, walk, keep, units, hop)
            frontier = sorted(reached, key=_priority)

    def _join(
        self, units: dict[str, _Unit], v: View, pid: bytes, score: float, how: str, distance: int
    ) -> _Unit | None:
        u = units.get(v.id)
        if u is None:
            u = units[v.id] = _Unit(v.id, "item", pid, v, score, how, distance)
            return u
        if distance < u.distance:  # reached closer than it was ranked: it moves in, keeping the better score
            u.distance = distance
            if score > u.score:
                u.score, u.seeded_by = score, how
            return u
        return None

    def _neighbours(self, u: _Unit, walk: Walk, keep: dict[bytes, AbstractSet[str]], units: dict[str, _Unit]) -> None:
        views = self.store.views(u.pid)
        ids = keep.get(u.pid, set())
        order = sorted(views.sources.get(u.view.source_id, {}).items(), key=lambda x: (x[1], x[0]))
        at = next((n for n, (i, _) in enumerate(order) if i == u.key), None)
        if at is None:
            return
        for step in range(1, walk.neighbours + 1):
            for n in (at - step, at + step):
                if 0 <= n < len(order) and order[n][0] in ids:
                    v = views.views[order[n][0]]
                    if v.goal == u.view.goal:
                        self._join(units, v, u.pid, u.score * walk.decay**step, "arc_neighbour", 1)

    def _entity_walk(
        self, u: _Unit, walk: Walk, keep: dict[bytes, AbstractSet[str]], units: dict[str, _Unit], hop: int
    ) -> list[_Unit]:
        views = self.store.views(u.pid)
        ids = keep.get(u.pid, set())
        total = max(1, len(views))
        reached = []
        for e in sorted({e.lower() for e in u.view.entities}):
            members = views.entities.get(e, set())
            if len(members) > COMMON_ENTITY_SHARE * total:
                continue
            # The members' items (a fact names an entity its item may not), nearest in time to the focus first.
            items = set()
            for i in members:
                if i not in ids:
                    continue
                v = views.views[i]
                if v.is_item:
                    items.add(i)
                elif len(v.derived_from) == 1 and v.derived_from[0] in ids and views.views[v.derived_from[0]].is_item:
                    items.add(v.derived_from[0])
            items.discard(u.key)
            near = sorted(
                (views.views[i] for i in items),
                key=lambda v: (abs(v.created_at - u.view.created_at), v.source_id, v.source_start, v.id),
            )
            taken = 0
            for v in near:
                if taken == walk.entity_fanout:
                    break
                if v.id in units and units[v.id].distance <= hop:
                    continue
                joined = self._join(units, v, u.pid, u.score * walk.decay**hop, "entity_expansion", hop)
                if joined is not None:
                    reached.append(joined)
                    taken += 1
        return reached

    # -- levels ----------------------------------------------------------------------------------------------------

    def _represent(
        self, goal: str, units: Sequence[_Unit], keep: Mapping[bytes, AbstractSet[str]], reader: str
    ) -> dict[str, _Group]:
        """Fill each unit's levels (lines and tokens); the source groups they render under.
        A line of memory that is not ``reader``'s own says whose it is (:func:`whose`).

        An item's facts and summary are used only when they are in ``keep`` themselves (authorized for the caller,
        and neither superseded, expired nor contradicted)."""
        need: list[str] = []
        keeps = list(keep.values())  # an arc's items may lie in other partitions

        def allowed(id_: str) -> bool:
            return any(id_ in k for k in keeps)

        facts_of: dict[str, list[str]] = {}
        summary_of: dict[str, str] = {}
        for u in units:
            if u.kind == "arc":
                u.covers = tuple(i for i in u.view.derived_from if allowed(i))  # only items the caller may use
                need += [*u.members, *u.covers[:1]]  # the first of them: its source's title
                continue
            need.append(u.key)
            if u.kind != "item":
                continue
            views = self.store.views(u.pid)
            for d in sorted(views.derivatives.get(u.key, ())):
                w = views.views.get(d)
                if w is None or w.derived_from != (u.key,) or not allowed(d) or w.owner_id != u.view.owner_id:
                    continue  # another principal's "summary" of an item never speaks for it
                if w.asset_type is AssetType.FACT:
                    facts_of.setdefault(u.key, []).append(d)
                elif w.asset_type is AssetType.BRIDGE_BLOCK and w.level is Level.L1:
                    summary_of[u.key] = d
            need += facts_of.get(u.key, [])[:L2_FACTS] + ([summary_of[u.key]] if u.key in summary_of else [])
        found = self._get_many(need)
        goal_words = _content_words(goal)
        timely = not TIME_WORDS.isdisjoint(
            _WORD_RE.findall(goal.lower())
        )  # the goal is about time: relative dates show what they meant
        groups: dict[str, _Group] = {}
        for u in units:
            if u.kind == "arc":
                self._arc_reps(u, found, reader)
            else:
                self._item_reps(u, found, facts_of.get(u.key, []), summary_of.get(u.key), goal_words, reader, timely)
            if not any(u.reps):
                continue
            u.group = u.view.source_id
            if u.group not in groups:
                groups[u.group] = self._group(u, found)
        return groups

    def _get_many(self, ids: Sequence[str]) -> dict[str, Asset | None]:
        return dict(zip(ids, self.store.get_many(ids, records=self._records), strict=True))

    def _group(self, u: _Unit, found: Mapping[str, Asset | None]) -> _Group:
        if not u.group:
            return _Group("", 0, (0, "", 0))
        asset = found.get(u.key) if u.kind != "arc" else (found.get(u.covers[0]) if u.covers else None)
        title = str(asset.payload.get("title", "")) if asset is not None else ""
        day = when.spoken(datetime.fromtimestamp(u.view.created_at / 1e6, tz=UTC).date())
        title = envelope.neutralize(_one_line(title) or u.group)
        header = f"## {day} {title}"
        return _Group(header, self.count(header), (u.view.created_at, u.group, u.view.source_start), title)

    def _item_reps(
        self,
        u: _Unit,
        found: Mapping[str, Asset | None],
        fact_ids: Sequence[str],
        summary_id: str | None,
        goal_words: frozenset[str],
        reader: str,
        timely: bool,
    ) -> None:
        asset = found.get(u.key)
        if asset is None:  # pragma: no cover - the views follow the records
            return
        resolved = _resolved(asset) if timely else []
        text = when.annotate(display_text(asset), resolved) if resolved else display_text(asset)
        who = _speaker(asset)
        prefix = whose(asset.owner_id, reader) + (f"{who}: " if who else "")
        covers = (u.key,)
        u.reps[0] = self._line(u.handle, 0, prefix + text, asset.id, covers)
        summary = found.get(summary_id) if summary_id else None
        said = _unprefixed(str(summary.payload.get("text", "")), who) if summary is not None else ""
        sentence = _best_sentence(text, goal_words, said, who)
        if sentence and sentence != text:
            rid = summary.id if summary is not None and sentence == said else asset.id
            u.reps[1] = self._line(u.handle, 1, prefix + sentence, rid, covers)
        facts = [f for f in (found.get(i) for i in fact_ids[:L2_FACTS]) if f is not None]
        if facts:  # an item without extracted facts has no L2: a list of its words would say nothing
            distilled = "; ".join(_one_line(str(f.payload.get("text", ""))) for f in facts)
            u.reps[2] = self._line(u.handle, 2, prefix + distilled, facts[0].id, covers)
        crumbs = _terms(u.view, text, who, L3_TERMS)
        u.reps[3] = self._line(u.handle, 3, prefix + (", ".join(crumbs) or asset.asset_type.value), asset.id, covers)
        _monotone(u.reps)

    def _arc_reps(self, u: _Unit, found: Mapping[str, Asset | None], reader: str) -> None:
        """An arc's L1 summary and L2 distillation as stored; its L3 a breadcrumb of its skeleton's entities."""
        for rid in u.members:
            a = found.get(rid)
            if a is None:  # pragma: no cover
                continue
            lv = LEVEL_NAMES.index(a.level.value.upper())
            text = display_text(a) if lv < 3 else ", ".join(a.entities[:L3_TERMS]) or "skeleton"
            label = f"{whose(a.owner_id, reader)}({len(a.derived_from)} turns) "
            u.reps[lv] = self._line(u.handle, lv, label + text, a.id, u.covers)
        _monotone(u.reps)

    def _line(self, handle: str, level: int, text: str, asset_id: str, covers: tuple[str, ...]) -> _Rep:
        tag = handle if level == 0 else f"{handle}~{LEVEL_NAMES[level]}"
        line = envelope.neutralize(f"{tag} {_one_line(text) if level else _indented(text)}")
        return _Rep(asset_id, line, self.count(line), covers)

    # -- fitting ---------------------------------------------------------------------------------------------------

    def _place(
        self,
        order: Sequence[_Unit],
        groups: dict[str, _Group],
        used: int,
        limit: int,
        levels: Callable[[_Unit], Sequence[int]],
    ) -> int:
        """Show each unit not yet shown, in ``order``, at the first of its ``levels`` whose line (and its source's
        header, when the unit is the first of its source) fits within ``limit``; the tokens used after."""
        for u in order:
            if u.level >= 0:
                continue
            g = groups.get(u.group)
            header = g.tokens if g is not None and not g.present else 0
            for lv in levels(u):
                r = u.reps[lv]
                if r is not None and used + header + r.tokens <= limit:
                    u.level = lv
                    used += header + r.tokens
                    if g is not None:
                        g.present += 1
                    break
        return used

    def _closing(self, dropped: Sequence[_Unit], where: Mapping[str, int], room: int) -> str:
        """The breadcrumb of what lies beyond the frame, as long as fits in ``room`` tokens ("" when nothing)."""
        if not dropped:
            return ""
        places = sorted(where.items(), key=lambda kv: (-kv[1], kv[0]))
        for k in range(len(places), -1, -1):
            listed = ", ".join(f"{w} ({n})" for w, n in places[:k])
            more = "" if k == len(places) else (f" and {len(places) - k} more" if k else "")
            line = f"… {len(dropped)} more relevant items beyond this frame" + (f": {listed}{more}" if k else "")
            line = envelope.neutralize(line)
            if self.count(line) <= room:
                return line
        return ""

    # -- the access log --------------------------------------------------------------------------------------------

    def _log(self, req: HydrationRequest, auth: Authorized, receipt: Mapping[str, Any], shown: Sequence[_Unit]) -> None:
        def via(id_: str) -> str | None:  # how the caller was authorized for an id (no copy of the whole set)
            return next((a[id_] for a in auth.auth.values() if id_ in a), None)

        items = []
        reads = []
        for u in shown:
            r = _rep(u)
            v = self.store.view(r.asset_id)
            owner = v.owner_id if v is not None else u.view.owner_id
            items.append(
                (
                    owner,
                    {
                        "id": r.asset_id,
                        "level": LEVEL_NAMES[u.level].lower(),
                        "path": u.seeded_by,
                        "via": via(r.asset_id) or via(u.key) or "",
                        "handle": u.handle,
                        "tokens": r.tokens,
                    },
                )
            )
            if u.seeded_by != "profile":  # shown because it stands, not read for the goal: no heat
                reads.append((r.asset_id, Level(LEVEL_NAMES[u.level].lower())))
        detail = {"receipt": receipt["receipt"], "path": receipt["path"]}
        private = {"goal": receipt["goal"], "budget": receipt["budget"]}  # the reader's own log only
        self.node.governance.log_read(
            auth.principal, req.purpose, req.location, req.now, "hydrate", items, detail=detail, private=private
        )
        if self.on_read is not None and reads:
            self.on_read(reads, req.now, self._records)


# -- helpers -----------------------------------------------------------------------------------------------------------


def _fact(u: _Unit, segment: str) -> dict[str, Any]:
    """A shown unit's entry in the receipt."""
    r = _rep(u)
    return {
        "handle": u.handle,
        "id": r.asset_id,
        "unit": u.key,
        "kind": u.kind,
        "segment": segment,
        "level": LEVEL_NAMES[u.level],
        "seeded_by": u.seeded_by,
        "distance": u.distance,
        "score": round(u.score, 6),
        "tokens": r.tokens,
        "covers": list(r.covers),
    }


def _minus(ids: AbstractSet[str], gone: set[str]) -> AbstractSet[str]:
    return ids - gone if gone and not gone.isdisjoint(ids) else ids


def _dated(goal: str, units: Mapping[str, _Unit]) -> None:
    """Units said in the calendar month the goal names (:func:`node.core.text.when.named_period`) score
    :data:`PERIOD_BOOST` more."""
    period = when.named_period(goal)
    if period is None:
        return
    for u in units.values():
        if period.holds(u.view.created_at):
            u.score *= PERIOD_BOOST


def _priority(u: _Unit) -> tuple[bool, float, int, str]:
    return (u.empty, -u.score, u.distance, u.key)


def _focus_levels(u: _Unit) -> tuple[int, ...]:
    """First, every ranked item (or standalone asset) verbatim, else its sentence for the goal; arcs wait."""
    return () if u.kind == "arc" else (0, 1)


def _periphery_levels(u: _Unit) -> tuple[int, ...]:
    """With room left after the focus: arcs at their richest level that fits, items at their distillation or
    breadcrumb."""
    return (1, 2, 3) if u.kind == "arc" else (2, 3)


def _reading_order(u: _Unit) -> tuple[int, int, str]:
    return (u.view.created_at, u.view.source_start, u.key)


def _rep(u: _Unit) -> _Rep:
    return _rep_at(u, u.level)


def _rep_at(u: _Unit, level: int) -> _Rep:
    r = u.reps[level]
    assert r is not None
    return r


def _tok(u: _Unit) -> int:
    return _rep(u).tokens


def _monotone(reps: list[_Rep | None]) -> None:
    """Keep only levels that cost fewer tokens than every level above them (a lower rung must save something)."""
    best = None
    for lv, r in enumerate(reps):
        if r is None:
            continue
        if best is not None and r.tokens >= best:
            reps[lv] = None
        else:
            best = r.tokens


def _relevance_path(rel: Relevance) -> str:
    if rel.dense and rel.lexical:
        return "hybrid"
    if rel.dense:
        return "semantic"
    if rel.lexical:
        return "lexical"
    return "recency"


def _path(paths: Sequence[tuple[str, str]]) -> tuple[str, str | None]:
    """The receipt's path: the weakest any segment took (a degraded path is always declared), and why."""
    order = ("hybrid", "semantic", "lexical", "recency")
    if not paths:
        return "recency", "the plane has no segment"
    worst = max(paths, key=lambda p: order.index(p[0]))
    reasons = sorted({r for _, r in paths if r})
    return worst[0], "; ".join(reasons) or None


def _source_label(u: _Unit) -> str:
    return u.view.source_id or u.view.asset_type.value


def _speaker(asset: Asset) -> str:
    for k in ("speaker", "role"):
        v = asset.payload.get(k)
        if isinstance(v, str) and v:
            return _one_line(v)[:60]
    return ""


def _resolved(asset: Asset) -> list[tuple[str, str]]:
    """The relative dates ingestion resolved for an item (``payload["when"]``: pairs of phrase and meaning)."""
    raw = asset.payload.get("when")
    if not isinstance(raw, (list, tuple)):
        return []
    return [
        (pair[0], pair[1])
        for pair in raw
        if isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(x, str) and x for x in pair)
    ]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _indented(text: str) -> str:
    """A verbatim text whose every line but the first is indented: no line it holds can pass for a line of the frame
    (a handle's line, a source header, another principal's unlabelled words)."""
    return "\n  ".join(text.splitlines())


def clear_text_caches() -> None:
    """Forget what the frame's text functions remember (:class:`Hydrator` calls it after an erasure)."""
    _only_asks.cache_clear()
    _content_words.cache_clear()
    extract.clear_caches()


@extract.TextMemo
def _only_asks(text: str) -> bool:
    """A turn with a question and no statement: every sentence a question, or fewer than :data:`STATES_FROM` words
    of content ("Wow, that looks amazing! What inspired it?")."""
    if "?" not in text:
        return False
    return all(s.endswith("?") or extract.content_count(s, STATES_FROM) < STATES_FROM for s in extract.sentences(text))


def _only_announces(asset: Asset, text: str) -> bool:
    """An assistant's turn (``text``: its :func:`display_text`) whose every sentence that says something announces
    what it will do next."""
    if asset.payload.get("role") != "assistant":
        return False
    said = [s for s in extract.sentences(text) if not extract.says_nothing(s)]
    return bool(said) and all(map(extract.announces_step, said))


@extract.TextMemo
def _content_words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD_RE.findall(text.lower()) if w not in extract.STOPWORDS)


def _best_sentence(text: str, goal_words: frozenset[str], summary: str, speaker: str) -> str:
    """The item's L1: the sentence sharing most words with the goal (the speaker's name aside; the longer of equals),
    else its stored summary, else its longest sentence; "" when the item is a single sentence with no summary, or when
    what it would be says nothing ("Wow, Melanie!": fillers and names; such a sentence is never chosen for the words
    it shares either)."""
    parts = extract.sentences(text)
    if len(parts) <= 1 and not summary:
        return ""
    words = goal_words - _content_words(speaker)
    best, best_key = "", (0, 0)
    for s in parts:
        key = (len(words & _content_words(s)), len(s))
        if key[0] and key > best_key and not extract.says_nothing(s):
            best, best_key = s, key
    chosen = best or summary or max(parts, key=len, default="")
    if len(chosen) > L1_CHARS:
        chosen = extract.head_tail(chosen, L1_CHARS)
    return "" if extract.says_nothing(chosen) else chosen


def _unprefixed(summary: str, speaker: str) -> str:
    """A stored summary without the speaker's name it starts with (the line's prefix says who)."""
    return summary[len(speaker) + 2 :] if speaker and summary.startswith(f"{speaker}: ") else summary


def _terms(v: View, text: str, speaker: str, k: int) -> list[str]:
    """Distinctive terms: the item's entities (not the speaker), then its longer content words in order."""
    out: list[str] = []
    seen = {speaker.lower()}
    for t in [*v.entities, *_WORD_RE.findall(text.lower())]:
        low = t.lower()
        if low in seen or "redacted" in low or (t.islower() and (len(t) < 4 or low in extract.STOPWORDS)):
            continue
        seen.add(low)
        out.append(t)
        if len(out) == k:
            break
    return out


__all__ = [
    "HYDRATION_MODES",
    "SEEDED_BY",
    "Hydration",
    "HydrationRequest",
    "Hydrator",
    "Segment",
    "Walk",
    "clear_text_caches",
    "parse_plane",
]
