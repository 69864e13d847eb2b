"""Curation's content: arcs of L0 items, and the L1 summaries, L2 distillations and L3 skeletons compiled from them.

Pure core: no I/O, no clock, no randomness, no storage, no ids, no policy. The input is what curation sees of the L0
items of one source (:class:`Item`); the output is a list of :class:`Rung` values, each a derivative to store, with the
ids of the items it was derived from (``sources``). The orchestrator turns rungs into signed assets, with
``derived_from`` and inherited policies. The same items always give equal rungs, in the same order.

Arcs (:func:`form_arcs`)
    Consecutive items of one source, in position order. A new arc starts when an item's goal differs from its arc's
    goal, when the time gap to the previous timed item (``time > 0``) exceeds ``max_gap_us``, or when the arc already
    holds ``max_items`` items — except that noise (a farewell after a full arc) still joins it, up to twice as many,
    rather than open an arc of noise alone. Items of kind ``noise`` belong to the arc they fall in (so every item is in
    exactly one arc) but never start one by a goal change, and contribute no content. An arc's goal is that of its first
    non-noise item (of its first item when all are noise). An arc's key, ``f"{source_id}#{first position}"``, is
    stable under appends: new items only extend the last arc or open new ones.

Rungs (:func:`curate_source`), in this order: for each arc, its ``l1``, ``l2`` and ``l3`` rungs (role ``arc``), then
the ``l1`` rungs (role ``item``) of its long items; last, one ``l2`` rung of role ``session``.

- ``l1:arc``: one sentence, at most ``summary_chars`` characters, from the curator over the arc's non-noise texts.
- ``l2:arc``: goal, entities, decisions, constraints, outcomes, errors, speakers and time span; its text is a compact
  rendering (``Goal: …. Decisions: …. …``) of at most :data:`L2_CHARS` characters.
- ``l3:arc``: tags, entities and pointers (id, source id, byte offsets, position) back to the verbatim items; its text
  is a short skeleton (``[arc 3 items 12-23] goal: …; entities: …; tags: …``).
- ``l1:item``: a one-sentence summary of each non-noise item longer than ``item_summary_over`` characters.
- ``l2:session``: the arcs' L1 sentences joined (at most :data:`SESSION_CHARS` characters, head and tail kept).

The sources of an arc's rungs are all of the arc's item ids, noise included, so forgetting any item invalidates the
rungs of its arc. An arc made only of noise items (a session of greetings, or noise after a long gap) still gets its
three rungs: its L1 and L2 say ``Small talk: …`` with the texts themselves, clipped. The session
rung's sources are the non-noise item ids (all ids when every item is noise).

Speakers reach the curator inside the texts: an item whose speaker is a name (not its role) is passed as
``"Caroline: text"``; :class:`ExtractiveCurator` recognises that prefix and keeps it on the sentence it picks.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Final, Protocol

from gaml.node.core.text import extract

KINDS: Final = (
    "goal",
    "constraint",
    "message",
    "conclusion",
    "tool_call",
    "tool_result",
    "error",
    "file_op",
    "note",
    "noise",
)
MACHINE_KINDS: Final = frozenset({"tool_call", "tool_result", "error", "file_op"})  # tool traffic, not speech
LEVELS: Final = ("l1", "l2", "l3")
ROLES: Final = ("item", "arc", "session")
SPEAKER_ROLES: Final = ("user", "assistant", "tool", "system", "note")  # a speaker equal to one of these is no name

MAX_GAP_US: Final = 6 * 3600 * 10**6
L2_CHARS: Final = 600
L3_CHARS: Final = 400
SESSION_CHARS: Final = 800
CUE_CHARS: Final = 160  # one decision, constraint, outcome or error, at most
CUES_MAX: Final = 4  # of each kind, per arc
ENTITIES_MAX: Final = 12
TAGS_MAX: Final = 12
KEYWORDS_K: Final = 8
CONTENT_WORDS_MAX: Final = 1024
SUMMARY_CHARS_MIN: Final = 16
ELLIPSIS: Final = "…"


@dataclasses.dataclass(frozen=True, slots=True)
class Item:
    """What curation sees of one L0 item."""

    id: str
    source_id: str
    position: int  # 0-based, within its source
    text: str  # verbatim
    speaker: str  # a name (LoCoMo), else the role
    role: str
    kind: str  # one of KINDS
    goal: str  # the goal active when the item was recorded ("" when none)
    time: int  # microseconds since the epoch (UTC); 0 when unknown
    entities: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    start: int = 0  # byte offsets of the verbatim text in its file ([start, end))
    end: int = 0

    def __post_init__(self) -> None:
        if not self.id or not self.source_id:
            raise ValueError(f"item at position {self.position}: empty id or source id")
        if self.kind not in KINDS:
            raise ValueError(f"item {self.id}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.position < 0 or self.time < 0 or self.start < 0 or self.end < self.start:
            raise ValueError(f"item {self.id}: bad position, time or offsets")

    @property
    def is_noise(self) -> bool:
        return self.kind == "noise"


@dataclasses.dataclass(frozen=True, slots=True)
class Arc:
    """Consecutive items of one source under one goal."""

    source_id: str
    goal: str
    items: tuple[Item, ...]

    def __post_init__(self) -> None:
        if not self.items:
            raise ValueError("an arc has at least one item")
        if any(it.source_id != self.source_id for it in self.items):
            raise ValueError(f"arc of {self.source_id}: an item of another source")

    @property
    def key(self) -> str:
        return f"{self.source_id}#{self.items[0].position}"

    @property
    def content(self) -> tuple[Item, ...]:
        """The items that contribute content: the non-noise ones."""
        return tuple(it for it in self.items if not it.is_noise)


@dataclasses.dataclass(frozen=True, slots=True)
class Rung:
    """One derivative to store."""

    level: str  # one of LEVELS
    role: str  # one of ROLES
    key: str  # stable: f"{level}:{role}:{arc key, item id or source id}"
    text: str  # what is embedded and rendered at this level
    payload: dict[str, Any]  # structured content, JSON-able, with "text"
    sources: tuple[str, ...]  # ids of the L0 items it was derived from; never empty
    entities: tuple[str, ...]
    tags: tuple[str, ...]
    goal: str

    def __post_init__(self) -> None:
        if self.level not in LEVELS or self.role not in ROLES:
            raise ValueError(f"rung {self.key}: bad level {self.level!r} or role {self.role!r}")
        if not self.key.startswith(f"{self.level}:{self.role}:"):
            raise ValueError(f"rung {self.key}: key does not start with its level and role")
        if not self.sources:
            raise ValueError(f"rung {self.key}: no sources")
        if not self.text.strip() or self.payload.get("text") != self.text:
            raise ValueError(f"rung {self.key}: empty text, or payload text differs from text")


class Curator(Protocol):
    """Writes one sentence about some texts. ``name`` identifies the curator (and its version) in provenance."""

    name: str

    def summarize(self, texts: Sequence[str], *, goal: str, limit: int) -> str:
        """One sentence of at most ``limit`` characters about ``texts`` (which may start with ``"Speaker: "``)."""
        ...


# --- text helpers ---------------------------------------------------------------------------------------------------

_SPEAKER_RE: Final = re.compile(r"^([A-Z][\w'’.-]{0,30}(?: [A-Z][\w'’.-]{0,30}){0,2}): (?=\S)")
_NOT_SPEAKERS: Final = frozenset(
    {
        *("error", "warning", "note", "goal", "summary", "decision", "decisions", "constraint", "constraints"),
        *("outcome", "outcomes", "question", "answer", "q", "a", "todo", "info", "debug", "traceback", "fix"),
        *("update", "edit", "step", "result", "output", "input", "user", "assistant", "system", "tool", "file"),
        *("path", "exception", "hint", "tip", "important", "nb", "ps", "re", "subject"),
    }
)
_WORD_RE: Final = re.compile(r"[\w']+")
_GREETING_RE: Final = re.compile(
    r"^(hi|hello|hey|hiya|yo|thanks|thank you|thx|ok|okay|sure|great|cool|nice|wow|awesome|bye|goodbye|see you|"
    r"good (morning|afternoon|evening|night)|sounds good|no problem|you're welcome|of course)\b[\s!,.]*",
    re.IGNORECASE,
)


def flat(text: str) -> str:
    """Whitespace collapsed to single spaces, ends stripped."""
    return " ".join(text.split())


def clip(text: str, limit: int) -> str:
    """``text`` flattened and cut to at most ``limit`` characters at a word boundary, marked with an ellipsis."""
    text = flat(text)
    if len(text) <= limit:
        return text
    if limit <= len(ELLIPSIS):
        return text[:limit]
    cut = text[: limit - len(ELLIPSIS) + 1]
    space = cut.rfind(" ")
    head = cut[:space] if space > 0 else cut[: limit - len(ELLIPSIS)]
    return head.rstrip(" ,;:-–—") + ELLIPSIS


def bound(text: str, limit: int) -> str:
    """``text`` flattened and, when longer than ``limit``, cut to its head and tail."""
    text = flat(text)
    if len(text) <= limit:
        return text
    out = flat(extract.head_tail(text, limit))
    return out if len(out) <= limit else clip(out, limit)


def split_speaker(text: str) -> tuple[str, str]:
    """``("Caroline", "rest")`` for ``"Caroline: rest"``; ``("", text)`` when the text starts with no name."""
    m = _SPEAKER_RE.match(text)
    if m is None or m.group(1).lower() in _NOT_SPEAKERS:
        return "", text
    return m.group(1), text[m.end() :]


def _content_words(text: str) -> set[str]:
    """The distinct content words of ``text`` (lower-case, stopwords dropped), as :func:`extract.keywords` sees them."""
    return set(extract.keywords(text, k=CONTENT_WORDS_MAX)) if text.strip() else set()


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD_RE.findall(text)}


def _ranked(groups: Iterable[Iterable[str]], limit: int) -> list[str]:
    """Distinct strings (case-insensitively), most frequent first, then in order of first appearance."""
    count: Counter[str] = Counter()
    first: dict[str, str] = {}
    order: dict[str, int] = {}
    for group in groups:
        for raw in group:
            value = flat(raw)
            norm = value.lower()
            if not norm:
                continue
            count[norm] += 1
            if norm not in first:
                first[norm] = value
                order[norm] = len(order)
    keys = sorted(count, key=lambda k: (-count[k], order[k]))
    return [first[k] for k in keys[:limit]]


def _distinct(values: Iterable[str], limit: int) -> list[str]:
    """Distinct strings (case-insensitively), in order of first appearance."""
    seen: set[str] = set()
    out: list[str] = []
    for raw in values:
        value = flat(raw)
        norm = value.lower()
        if norm and norm not in seen:
            seen.add(norm)
            out.append(value)
            if len(out) == limit:
                break
    return out


def _speaker_text(item: Item) -> str:
    """The item's text as the curator sees it: prefixed with its speaker when that is a name."""
    name = flat(item.speaker)
    if name and name.lower() != item.role and name.lower() not in SPEAKER_ROLES:
        return f"{name}: {item.text}"
    return item.text


# --- the default curator --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Candidate:
    score: float
    order: int
    speaker: str
    sentence: str


class ExtractiveCurator:
    """The default curator: deterministic and offline; it picks the most informative sentence of the texts.

    Each sentence is scored by its centrality (for each of its content words, ``log2(1 + number of texts using it)``,
    summed, over the square root of its word count, times 1.5), its overlap with the goal's content words (+0.75
    each, at most 3), its entities (+0.5 each, at most 3) and its cues (a decision or outcome +3 unless it is a
    request, a constraint +2, an error +0.5); a question loses 3, a greeting 2, a request (which restates the goal)
    1.5 and a fragment of fewer than four words 1. Noise sentences are never picked.
    The best sentence (the earliest on ties) is returned with its speaker's name, cut to ``limit`` at a word boundary.
    When no sentence qualifies, the result is the head and tail of the first non-blank text.
    """

    name: str = "extractive-1"

    def summarize(self, texts: Sequence[str], *, goal: str, limit: int) -> str:
        if limit < SUMMARY_CHARS_MIN:
            raise ValueError(f"summary limit {limit} is below {SUMMARY_CHARS_MIN} characters")
        turns = [split_speaker(flat(t)) for t in texts if t.strip()]
        if not turns:
            raise ValueError("nothing to summarize: no non-blank text")
        # The candidate sentences, per turn, noise dropped; a word's weight is the number of turns that use it.
        candidates: list[tuple[str, list[str]]] = []
        for speaker, body in turns:
            if extract.is_noise(body) is None:
                kept = [flat(s) for s in extract.sentences(body)]
                candidates.append((speaker, [s for s in kept if s and extract.is_noise(s) is None]))
        spread: Counter[str] = Counter()
        for _, kept in candidates:
            spread.update(_content_words(" ".join(kept)))
        goal_words = _content_words(goal)
        best: _Candidate | None = None
        order = 0
        for speaker, kept in candidates:
            for sentence in kept:
                order += 1
                cand = _Candidate(self._score(sentence, spread, goal_words), order, speaker, sentence)
                if best is None or cand.score > best.score:
                    best = cand
        if best is None:
            speaker, body = turns[0]
            return self._render(speaker, flat(extract.head_tail(body, limit)), limit)
        return self._render(best.speaker, best.sentence, limit)

    @staticmethod
    def _score(sentence: str, spread: Counter[str], goal_words: set[str]) -> float:
        words = _words(sentence)
        content = _content_words(sentence)
        centrality = sum(math.log2(1 + spread[w]) for w in content) / math.sqrt(max(len(words), 4))
        score = 1.5 * centrality + 0.75 * min(len(content & goal_words), 3)
        score += 0.5 * min(len(extract.entities(sentence)), 3)
        found = extract.cues(sentence)
        question = sentence.endswith("?") or bool(found.questions)
        request = extract.is_goal(sentence)
        if (found.decisions or found.outcomes) and not question and not request:
            score += 3.0
        if found.constraints and not question:
            score += 2.0
        if found.errors:
            score += 0.5
        if question:
            score -= 3.0
        if _GREETING_RE.match(sentence):
            score -= 2.0
        if request:
            score -= 1.5  # a request restates the goal (its "fails" is the problem, not an outcome)
        if len(words) < 4:
            score -= 1.0
        return score

    @staticmethod
    def _render(speaker: str, sentence: str, limit: int) -> str:
        if speaker and not sentence.startswith(speaker) and len(speaker) + 2 + 12 <= limit:
            sentence = f"{speaker}: {sentence}"
        out = clip(sentence, limit)
        return out if out else clip(speaker or ELLIPSIS, limit)


# --- arcs -----------------------------------------------------------------------------------------------------------


def form_arcs(items: Sequence[Item], *, max_items: int = 12, max_gap_us: int = MAX_GAP_US) -> list[Arc]:
    """The arcs of the items of one source (sorted here by position; positions must be distinct)."""
    if max_items < 1 or max_gap_us < 0:
        raise ValueError(f"bad arc bounds: max_items={max_items}, max_gap_us={max_gap_us}")
    if not items:
        return []
    ordered = sorted(items, key=lambda it: it.position)
    source_id = ordered[0].source_id
    for prev, it in itertools.pairwise(ordered):
        if it.position == prev.position:
            raise ValueError(f"source {source_id}: two items at position {it.position}")
    if any(it.source_id != source_id for it in ordered):
        raise ValueError(f"form_arcs takes the items of one source; got {source_id} and others")

    arcs: list[Arc] = []
    current: list[Item] = []
    goal: str | None = None  # the current arc's goal, once it has a non-noise item
    last_time = 0

    def close() -> None:
        if current:
            arc_goal = goal if goal is not None else current[0].goal
            arcs.append(Arc(source_id, arc_goal, tuple(current)))
            current.clear()

    for it in ordered:
        gap = it.time > 0 and last_time > 0 and it.time - last_time > max_gap_us
        changed = not it.is_noise and goal is not None and it.goal != goal
        # A full arc closes before the next item, but trailing noise (a farewell) still joins it, up to twice as many.
        full = len(current) >= (2 * max_items if it.is_noise else max_items)
        if current and (gap or changed or full):
            close()
            goal = None
        current.append(it)
        if goal is None and not it.is_noise:
            goal = it.goal
        if it.time > 0:
            last_time = it.time
    close()
    assert sum(len(a.items) for a in arcs) == len(ordered)
    return arcs


# --- rungs ----------------------------------------------------------------------------------------------------------


def _cue_line(values: list[str]) -> str:
    return "; ".join(v.rstrip(" .;") for v in values)


def _end(text: str) -> str:
    """``text`` ending with sentence punctuation (a period added when it has none)."""
    text = text.rstrip(" ;,:")
    return text if text.endswith((".", "!", "?", "…")) else text + "."


def _content_text(items: Sequence[Item]) -> str:
    """The items' texts without their noise sentences (greetings, acknowledgements)."""
    kept = (flat(s) for it in items for s in extract.sentences(it.text))
    return " ".join(s for s in kept if s and extract.is_noise(s) is None)


def _span(items: Sequence[Item]) -> list[int]:
    times = [it.time for it in items if it.time > 0]
    return [min(times), max(times)] if times else [0, 0]


def _item_entities(items: Sequence[Item]) -> list[str]:
    return _ranked(([*it.entities, *extract.entities(it.text)] for it in items), ENTITIES_MAX)


def _tags(items: Sequence[Item]) -> list[str]:
    text = _content_text(items)
    item_tags = [t for it in items for t in it.tags]
    return _distinct([*item_tags, *extract.keywords(text, k=KEYWORDS_K)], TAGS_MAX)


def _distill(arc: Arc, summary: str) -> dict[str, Any]:
    decisions: list[str] = []
    constraints: list[str] = []
    outcomes: list[str] = []
    errors: list[str] = []
    for it in arc.content:
        found = extract.cues(it.text)
        decisions.extend(s for s in found.decisions if not s.endswith("?"))
        constraints.extend(s for s in found.constraints if not s.endswith("?"))
        if it.kind != "goal":  # a request's "fails" or "fixed" states the problem, not an outcome
            outcomes.extend(s for s in found.outcomes if not s.endswith("?"))
        errors.extend(found.errors)
        if it.kind == "error" and not found.errors:
            errors.extend(extract.sentences(it.text)[:1] or [it.text])
    picked = {
        name: [clip(v, CUE_CHARS) for v in _distinct(values, CUES_MAX)]
        for name, values in (
            ("decisions", decisions),
            ("constraints", constraints),
            ("outcomes", outcomes),
            ("errors", errors),
        )
    }
    entities = _item_entities(arc.content)
    parts = [f"Goal: {flat(arc.goal)}"] if arc.goal.strip() else []
    for name in ("decisions", "constraints", "outcomes", "errors"):
        if picked[name]:
            parts.append(f"{name.capitalize()}: {_cue_line(picked[name])}")
    if not any(picked.values()):
        parts.append(f"Summary: {summary}")
    if entities:
        parts.append(f"Entities: {', '.join(entities)}")
    text = bound(" ".join(_end(p) for p in parts), L2_CHARS)
    return {
        "text": text,
        "goal": arc.goal,
        "entities": entities,
        **picked,
        "speakers": _distinct((it.speaker for it in arc.content), ENTITIES_MAX),
        "span": _span(arc.items),
    }


def _pointer(it: Item) -> dict[str, Any]:
    return {"id": it.id, "source_id": it.source_id, "start": it.start, "end": it.end, "position": it.position}


def _skeleton(arc: Arc, ordinal: int) -> dict[str, Any]:
    shown = arc.content or arc.items
    entities = _item_entities(shown) if arc.content else []
    tags = _tags(arc.content) if arc.content else _distinct((t for it in arc.items for t in it.tags), TAGS_MAX)
    first, last = arc.items[0].position, arc.items[-1].position
    parts: list[str] = []
    if arc.goal.strip():
        parts.append(f"goal: {clip(arc.goal, 120)}")
    if entities:
        parts.append(f"entities: {', '.join(entities)}")
    if tags:
        parts.append(f"tags: {', '.join(tags)}")
    if not arc.content:
        parts.append("noise only")
    text = clip(f"[arc {ordinal} items {first}-{last}] " + "; ".join(parts), L3_CHARS)
    return {"text": text, "tags": tags, "entities": entities, "pointers": [_pointer(it) for it in shown]}


def curate_source(
    items: Sequence[Item],
    curator: Curator | None = None,
    *,
    summary_chars: int = 200,
    item_summary_over: int = 280,
    max_items: int = 12,
    max_gap_us: int = MAX_GAP_US,
) -> list[Rung]:
    """The rungs of one source's items: per arc l1, l2, l3 and the long items' l1; then the session rollup."""
    if summary_chars < SUMMARY_CHARS_MIN or item_summary_over < 0:
        raise ValueError(f"bad curation bounds: summary_chars={summary_chars}, item_summary_over={item_summary_over}")
    cur: Curator = curator if curator is not None else ExtractiveCurator()
    arcs = form_arcs(items, max_items=max_items, max_gap_us=max_gap_us)
    if not arcs:
        return []
    rungs: list[Rung] = []
    summaries: list[str] = []
    for ordinal, arc in enumerate(arcs):
        ids = tuple(it.id for it in arc.items)
        skeleton = _skeleton(arc, ordinal)
        if arc.content:
            # The summary speaks from what people and the agent said; tool traffic only when there is nothing else.
            said = [it for it in arc.content if it.kind not in MACHINE_KINDS] or list(arc.content)
            summary = clip(
                cur.summarize([_speaker_text(it) for it in said], goal=arc.goal, limit=summary_chars),
                summary_chars,
            )
            if not summary:
                summary = ExtractiveCurator().summarize(
                    [it.text for it in arc.content], goal=arc.goal, limit=summary_chars
                )
        else:  # only noise (greetings, thanks): its rungs say so, verbatim and short, and are never promoted further
            summary = clip("Small talk: " + " ".join(flat(_speaker_text(it)) for it in arc.items), summary_chars)
        if summary:
            summaries.append(summary)
            distilled = _distill(arc, summary)
            ents, tags = tuple(distilled["entities"]), tuple(skeleton["tags"])
            payload = {"text": summary, "goal": arc.goal, "arc": arc.key, "curator": cur.name}
            rungs.append(Rung("l1", "arc", f"l1:arc:{arc.key}", summary, payload, ids, ents, tags, arc.goal))
            rungs.append(
                Rung("l2", "arc", f"l2:arc:{arc.key}", distilled["text"], distilled, ids, ents, tags, arc.goal)
            )
        rungs.append(
            Rung(
                "l3",
                "arc",
                f"l3:arc:{arc.key}",
                skeleton["text"],
                skeleton,
                ids,
                tuple(skeleton["entities"]),
                tuple(skeleton["tags"]),
                arc.goal,
            )
        )
        for it in arc.content:
            if len(it.text) > item_summary_over:
                rungs.append(_item_rung(it, cur, summary_chars))
    rungs.append(_session_rung(arcs, summaries, cur.name))
    return rungs


def _item_rung(it: Item, cur: Curator, limit: int) -> Rung:
    text = clip(cur.summarize([_speaker_text(it)], goal=it.goal, limit=limit), limit)
    if not text:
        text = ExtractiveCurator().summarize([it.text], goal=it.goal, limit=limit)
    payload = {
        "text": text,
        "goal": it.goal,
        "speaker": it.speaker,
        "kind": it.kind,
        "position": it.position,
        "curator": cur.name,
    }
    ents = tuple(_item_entities([it]))
    return Rung(
        "l1", "item", f"l1:item:{it.id}", text, payload, (it.id,), ents, tuple(_distinct(it.tags, TAGS_MAX)), it.goal
    )


def _session_rung(arcs: Sequence[Arc], summaries: Sequence[str], curator_name: str) -> Rung:
    source_id = arcs[0].source_id
    every = [it for arc in arcs for it in arc.items]
    content = [it for it in every if not it.is_noise]
    shown = content or every
    goals = _distinct((arc.goal for arc in arcs if arc.content), ENTITIES_MAX)
    if summaries:
        text = bound(" ".join(summaries), SESSION_CHARS)
    else:
        text = f"[session {source_id}: {len(every)} items, noise only]"
    entities = _item_entities(content)
    tags = _tags(content) if content else _distinct((t for it in every for t in it.tags), TAGS_MAX)
    payload = {
        "text": text,
        "goals": goals,
        "arcs": [arc.key for arc in arcs],
        "entities": entities,
        "speakers": _distinct((it.speaker for it in content), ENTITIES_MAX),
        "span": _span(every),
        "items": len(every),
        "curator": curator_name,
    }
    goal = bound(" | ".join(goals), 200)
    return Rung(
        "l2",
        "session",
        f"l2:session:{source_id}",
        text,
        payload,
        tuple(it.id for it in shown),
        tuple(entities),
        tuple(tags),
        goal,
    )


__all__ = [
    "KINDS",
    "LEVELS",
    "MAX_GAP_US",
    "ROLES",
    "Arc",
    "Curator",
    "ExtractiveCurator",
    "Item",
    "Rung",
    "bound",
    "clip",
    "curate_source",
    "flat",
    "form_arcs",
    "split_speaker",
]
