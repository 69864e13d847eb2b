"""Policy views: the fields of each live asset that retrieval decides on before anything is ranked.

A :class:`View` is the slim, payload-free part of an asset: owner, tenant, scope, readers, policies, retention, level,
segment, tags, entities, times, supersession, trust, and for hydration's walk the goal, the source pointer and the
``derived_from`` / ``contradicts`` edges. :class:`PartitionViews` keeps one partition's views in memory (the snapshot
that carries them is sealed) with the groupings that make authorization cheap:

- ``groups``: ids by *policy signature* (owner, tenant, scope, inference/training/export/replication policy). Every
  asset of a group gets the same decision for a principal in its audience, so one decision per group authorizes
  (or refuses) all of its members at once.
- ``readers``: ids that name a principal (``p:<id>``) or a role (``r:<role>``) in their reader lists, so an explicit
  share is found without looking at anything else.
- ``expiring``: the retention deadline of the assets that have one.
- the graph hydration walks (:mod:`node.hydrate`): items by source (with their offsets, for neighbouring turns),
  derivatives by what they derive from, ids by lower-cased entity and by goal, and what contradicts an asset. These
  hold ids only; whether the caller may use one is decided by the same authorized set as everything else.
- what may stand in a frame's profile, whatever the goal (:func:`standing`): ``standing`` (pinned or binding, by
  why), and the heat class in ``touched`` order: by when each was last created or visited, newest first. Its heat
  cannot exceed (its score + 1) halved for every half-life since then, so a frame reads only the head of it.

Beside the views, :class:`PartitionViews` keeps each asset's heat (local, unsigned state:
:meth:`node.core.store.store.Store.update_local` keeps it current), so that what is hot now can be told without opening
a record. It is kept apart from the views, as plain tuples, and only where it is not the zero heat: a frame's visit
changes the heat of every asset it shows, and a new view object (and heat object) per visit would be long-lived
objects that the collector walks again and again in a running node; a visit now changes one dict entry.

The views of a partition travel in its sealed index snapshot and are rebuilt from the records with it (a snapshot
written before a field was added fails to load and is rebuilt, like any stale one). There they are one row per line,
written and read a row at a time (:meth:`PartitionViews.dump`), and the strings that many views repeat (owner, tags,
entities, goal, source: ``_SHARED``) are interned. Measured on a 100k-asset memory, loading its views in a fresh
process: +245 MB of RSS when the rows were one JSON list parsed at once (its freed rows left the heap scattered),
+103 MB a row at a time, +72 MB with the strings interned.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import hashlib
import itertools
import sys
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Any, Final

import numpy as np
import orjson
from sortedcontainers import SortedList

from gaml.policy.model import (
    ZERO_HEAT,
    Asset,
    AssetType,
    ExportPolicy,
    Heat,
    InferencePolicy,
    Level,
    PrivacyScope,
    ReplicationPolicy,
    Retention,
    TrainingPolicy,
    TrustClass,
)

_ZERO_ROW: Final = [0, 0, 0.0]  # the zero heat in a snapshot's row
_NEWLINE: Final = ord("\n")  # ends each row of a snapshot's views (orjson escapes it inside strings)

Signature = tuple[str, str, PrivacyScope, InferencePolicy, TrainingPolicy, ExportPolicy, ReplicationPolicy]


@dataclasses.dataclass(frozen=True, slots=True)
class View:
    id: str
    asset_type: AssetType
    owner_id: str
    tenant_scope: str
    privacy_scope: PrivacyScope
    allowed_principals: tuple[str, ...]
    allowed_roles: tuple[str, ...]
    inference_policy: InferencePolicy
    training_policy: TrainingPolicy
    export_policy: ExportPolicy
    replication_policy: ReplicationPolicy
    retention_policy: Retention
    level: Level
    segment: str
    tags: tuple[str, ...]
    entities: tuple[str, ...]
    created_at: int
    valid_from: int
    valid_to: int
    supersedes: tuple[str, ...]
    trust_class: TrustClass
    provenance_score: float
    confidence_score: float
    # What hydration walks on: the goal an item served, where it came from, and its graph edges.
    goal: str = ""
    source_id: str = ""
    source_start: int = 0
    derived_from: tuple[str, ...] = ()
    contradicts: tuple[str, ...] = ()
    tombstone: bool = False

    @classmethod
    def of(cls, a: Asset) -> View:
        kw = {f: getattr(a, f) for f in _FIELDS if f not in _SOURCE_FIELDS}
        kw["source_id"], kw["source_start"] = (a.source.source_id, a.source.start) if a.source is not None else ("", 0)
        for f in _SHARED:
            kw[f] = sys.intern(kw[f])
        for f in _SHARED_TUPLES:
            kw[f] = _interned(kw[f])
        return cls(**kw)

    @property
    def is_item(self) -> bool:
        """An ingested journal item: verbatim (L0) with a pointer back to its source."""
        return self.level is Level.L0 and bool(self.source_id)

    @property
    def signature(self) -> Signature:
        return (
            self.owner_id,
            self.tenant_scope,
            self.privacy_scope,
            self.inference_policy,
            self.training_policy,
            self.export_policy,
            self.replication_policy,
        )

    @property
    def deadline(self) -> int:
        """When its retention ends (microseconds; 0: never)."""
        r = self.retention_policy
        ends = [x for x in (r.delete_at, self.created_at + r.ttl_seconds * 1_000_000 if r.ttl_seconds else 0) if x]
        return min(ends) if ends else 0

    def to_json(self) -> list[Any]:
        out: list[Any] = []
        for f in _FIELDS:
            v = getattr(self, f)
            if isinstance(v, Retention):
                v = [v.delete_at, v.ttl_seconds]
            elif hasattr(v, "value"):
                v = v.value
            out.append(v)
        return out

    @classmethod
    def from_json(cls, row: list[Any]) -> View:
        """The view :meth:`to_json` wrote. Raises ``ValueError`` (or ``TypeError``) for a row of another shape or an
        unknown enum value (a snapshot of another version: the store rebuilds it)."""
        values: list[Any] = [v if decode is None else decode(v) for decode, v in zip(_DECODERS, row, strict=True)]
        return cls(*values)


# What a profile holds (:func:`standing`): what the caller asked to keep, what binds whatever the goal, and the kinds
# of asset that stand while they are hot (heat or their own recency: the tiers decide, at the time of the frame).
STANDING_TAGS: Final = frozenset({"remember", "pinned"})
BINDING_TYPES: Final = frozenset({AssetType.CONSTRAINT, AssetType.POLICY})
HEAT_TYPES: Final = frozenset({AssetType.FACT, AssetType.GOAL, AssetType.PLAN, AssetType.PROCEDURE})
HEAT_KINDS: Final = frozenset({"kind:goal", "kind:constraint"})  # an ingested request or constraint


def standing(v: View) -> str:
    """Why an asset may stand in a frame's profile: ``pinned`` (tagged ``remember`` or ``pinned``), ``binding`` (a
    constraint or a policy), ``heat`` (a fact, goal, plan or procedure, or an ingested request or constraint: only
    while it is hot); "" when it may not. Only an asset in its own right (no ``derived_from``): a derivative speaks
    for its sources, which stand themselves. Never what ingestion gated (noise, contamination, a near-duplicate) or
    what is of lower trust: a text that asks to be remembered must not head every frame on its word alone."""
    if v.tombstone or v.derived_from or v.trust_class is TrustClass.LOWER_TRUST:
        return ""
    if any(t.startswith("gated:") or t == "contamination" for t in v.tags):
        return ""
    if STANDING_TAGS.intersection(v.tags):
        return "pinned"
    if v.is_item:
        return "heat" if HEAT_KINDS.intersection(v.tags) else ""
    if v.level is not Level.L0:
        return ""
    if v.asset_type in BINDING_TYPES:
        return "binding"
    return "heat" if v.asset_type in HEAT_TYPES else ""


_FIELDS: Final = tuple(f.name for f in dataclasses.fields(View) if f.name != "tombstone")
_SOURCE_FIELDS: Final = frozenset({"source_id", "source_start"})
_ENUMS: Final = {
    "asset_type": AssetType,
    "privacy_scope": PrivacyScope,
    "inference_policy": InferencePolicy,
    "training_policy": TrainingPolicy,
    "export_policy": ExportPolicy,
    "replication_policy": ReplicationPolicy,
    "level": Level,
    "trust_class": TrustClass,
}


def _enum_decoder(cls: type[Any]) -> Any:
    members = {m.value: m for m in cls}

    def decode(value: Any) -> Any:
        try:
            return members[value]
        except (KeyError, TypeError):
            raise ValueError(f"{value!r} is not a {cls.__name__}") from None

    return decode


def _memo_decoder(cls: type[Any]) -> Any:
    """A decoder of ``[a, b, …]`` into ``cls(a, b, …)`` that builds each distinct value once (most views share their
    retention, and every view never visited has the same heat)."""
    made = functools.lru_cache(maxsize=4096)(cls)

    def decode(value: list[Any]) -> Any:
        return made(*value)

    return decode


def _interned(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(map(sys.intern, values))


# The fields whose strings many views repeat (an owner, a tag, an entity, a goal): each view holds the one interned
# string, not a copy of its own (~300 bytes a view saved where each has a few tags and entities).
_SHARED: Final = ("owner_id", "tenant_scope", "segment", "goal", "source_id")
_SHARED_TUPLES: Final = ("allowed_principals", "allowed_roles", "tags", "entities")
_HEAT: Final = _memo_decoder(Heat)  # a snapshot's row is the view's fields, then its heat
# Per field of a row (:meth:`View.to_json`): how to read it (None: as it is).
_DECODERS: Final = tuple(
    _enum_decoder(_ENUMS[f])
    if f in _ENUMS
    else _memo_decoder(Retention)
    if f == "retention_policy"
    else sys.intern
    if f in _SHARED
    else _interned
    if f in _SHARED_TUPLES
    else tuple
    if f in ("supersedes", "derived_from", "contradicts")
    else None
    for f in _FIELDS
)


class PartitionViews:
    def __init__(self, key: bytes = b"") -> None:
        self.key = key  # keys the ids' hashes of the digest (the store's; none in a bare index)
        self.views: dict[str, View] = {}
        self.groups: dict[Signature, set[str]] = {}
        self.readers: dict[str, set[str]] = {}
        self.expiring: dict[str, int] = {}
        self.timed: set[str] = set()  # ids with a validity window
        self.latest_created = 0  # the newest created_at ever put (an upper bound after removals)
        # The graph hydration walks: items by source (id -> offset), derivatives by what they derive from, ids by
        # (lower-cased) entity and by goal, and what contradicts an asset.
        self.sources: dict[str, dict[str, int]] = {}
        self.derivatives: dict[str, set[str]] = {}
        self.entities: dict[str, set[str]] = {}
        self.goals: dict[str, set[str]] = {}
        self.contradicted: dict[str, set[str]] = {}
        self.standing: dict[str, str] = {}  # id -> "pinned" or "binding" (:func:`standing`)
        self.heats: dict[str, tuple[int, int, float]] = {}  # id -> (visits, last access, score), when not zero
        self.touched: SortedList = SortedList()  # (-last touched, id) of the heat class: newest first, ties by id
        self.peak = 0.0  # the highest heat score the heat class has had (a bound for what can still be hot)
        # A digest of a set of ids, in no order: each id's keyed hash, combined by XOR (the whole partition's kept as
        # it changes), so that a caller's set is told from another without sorting it (a receipt's id).
        self.hashes: dict[str, int] = {}
        self.digest = 0
        # Bumped whenever an id joins or leaves a policy group (a put of a new id or with another signature, a
        # removal): a decision made per group holds for as long as it is unchanged (node.access.retrieve caches them).
        self.epoch = 0

    def __len__(self) -> int:
        return len(self.views)

    def __iter__(self) -> Iterator[View]:
        return iter(self.views.values())

    def get(self, id_: str) -> View | None:
        return self.views.get(id_)

    def heat_of(self, id_: str) -> Heat:
        """The heat of the asset ``id_`` (the zero heat for one never visited, or not held)."""
        h = self.heats.get(id_)
        return ZERO_HEAT if h is None else Heat(*h)

    def _set_heat(self, id_: str, heat: Heat) -> None:
        if heat == ZERO_HEAT:
            self.heats.pop(id_, None)
        else:
            self.heats[id_] = (heat.visits, heat.last_access, heat.score)

    def put(self, v: View, heat: Heat = ZERO_HEAT) -> None:
        old = self._drop(v.id)
        if old is None or old.signature != v.signature:
            self.epoch += 1
        self._add(v, heat, None)

    def _add(self, v: View, heat: Heat, touched: list[tuple[int, str]] | None) -> None:
        """Index a view whose id is not held, with its asset's heat (``touched``: where the heat class's entries go,
        for one sort later; None: into :attr:`touched` now)."""
        self.views[v.id] = v
        self._set_heat(v.id, heat)
        h = self.hashes[v.id] = int.from_bytes(hashlib.blake2b(v.id.encode(), digest_size=16, key=self.key).digest())
        self.digest ^= h
        self.groups.setdefault(v.signature, set()).add(v.id)
        for key in _reader_keys(v):
            self.readers.setdefault(key, set()).add(v.id)
        if v.deadline:
            self.expiring[v.id] = v.deadline
        if v.valid_from or v.valid_to:
            self.timed.add(v.id)
        self.latest_created = max(self.latest_created, v.created_at)
        if v.is_item:
            self.sources.setdefault(v.source_id, {})[v.id] = v.source_start
            if v.goal:
                self.goals.setdefault(v.goal, set()).add(v.id)
        for target in v.derived_from:
            self.derivatives.setdefault(target, set()).add(v.id)
        for target in v.contradicts:
            self.contradicted.setdefault(target, set()).add(v.id)
        for e in {e.lower() for e in v.entities}:
            self.entities.setdefault(e, set()).add(v.id)
        why = standing(v)
        if why == "heat":
            if touched is None:
                self.touched.add((-_touched(v, heat), v.id))
            else:
                touched.append((-_touched(v, heat), v.id))
            self.peak = max(self.peak, heat.score)
        elif why:
            self.standing[v.id] = why

    def reheat(self, id_: str, heat: Heat) -> None:
        """Another heat for the asset ``id_``: :meth:`put` of its view with it, without the work that heat does not
        change (the view, its signature, readers, graph and standing stay; only the heat, the heat class's order and
        peak move)."""
        v = self.views[id_]
        old = self.heat_of(id_)
        if old == heat:
            return
        self._set_heat(id_, heat)
        if standing(v) == "heat":
            self.touched.discard((-_touched(v, old), id_))
            self.touched.add((-_touched(v, heat), id_))
            self.peak = max(self.peak, heat.score)

    def remove(self, id_: str) -> View | None:
        v = self._drop(id_)
        if v is not None:
            self.epoch += 1
        return v

    def _drop(self, id_: str) -> View | None:
        v = self.views.pop(id_, None)
        if v is None:
            return None
        self.digest ^= self.hashes.pop(id_)
        group = self.groups[v.signature]
        group.discard(id_)
        if not group:
            del self.groups[v.signature]
        for key in _reader_keys(v):
            ids = self.readers[key]
            ids.discard(id_)
            if not ids:
                del self.readers[key]
        self.expiring.pop(id_, None)
        self.timed.discard(id_)
        if v.is_item:
            _discard(self.sources, v.source_id, id_)
            if v.goal:
                _discard(self.goals, v.goal, id_)
        for target in v.derived_from:
            _discard(self.derivatives, target, id_)
        for target in v.contradicts:
            _discard(self.contradicted, target, id_)
        for e in {e.lower() for e in v.entities}:
            _discard(self.entities, e, id_)
        self.standing.pop(id_, None)
        self.touched.discard((-_touched(v, self.heat_of(id_)), id_))
        self.heats.pop(id_, None)
        return v

    def digest_of(self, ids: AbstractSet[str]) -> int:
        """The digest of ``ids`` (ids of this partition's views): the partition's own when they are all of it."""
        if len(ids) == len(self.views):
            return self.digest
        out = 0
        hashes = self.hashes
        for i in ids:
            out ^= hashes[i]
        return out

    def hot_candidates(self) -> Iterator[tuple[int, str]]:
        """The heat class as ``(last touched, id)``, the most recently created or visited first (ties by id): a
        reader stops where even :attr:`peak` + 1, decayed since then, is under the hot mark."""
        for minus, id_ in self.touched:
            yield -minus, id_

    def expired(self, now: int) -> set[str]:
        return {i for i, t in self.expiring.items() if now >= t}

    def dump(self) -> bytes:
        """A header line ``{"rows": n}``, then each view's row (:meth:`View.to_json`, its heat ``[visits, last access,
        score]`` last) on a line of its own, by id. One line at a time, so neither this nor :meth:`load` holds every
        row at once (at a million views, such a list left its freed parts scattered through the heap: the process kept
        twice the memory the views need)."""
        heats = self.heats
        out = bytearray(orjson.dumps({"rows": len(self.views)}))
        for i in sorted(self.views):
            out += b"\n"
            out += orjson.dumps([*self.views[i].to_json(), list(heats.get(i, _ZERO_ROW))])
        return bytes(out)

    @classmethod
    def load(cls, data: bytes | memoryview, key: bytes = b"") -> PartitionViews:
        """The views :meth:`dump` wrote, as putting each of them gives (a snapshot holds each id once); a dump of the
        format before (one JSON list of the rows) is read too. The collector waits meanwhile: what is made here lives
        as long as the partition, and a million views would otherwise be traversed again and again while they are
        made. Raises ``ValueError`` (or ``TypeError``) for anything else (the store rebuilds such a snapshot)."""
        pv = cls(key)
        touched: list[tuple[int, str]] = []
        with collector_paused():
            for row in _rows(memoryview(data)):
                if not isinstance(row, list) or not row:
                    raise ValueError("a snapshot's view is a row")
                v = View.from_json(row[:-1])
                if v.id in pv.views:
                    raise ValueError(f"view {v.id} is twice in the snapshot")
                pv._add(v, _HEAT(row[-1]), touched)
        pv.touched.update(touched)
        pv.epoch = len(pv.views)
        return pv


def _rows(data: memoryview) -> Iterator[Any]:
    """The rows of a dump, each parsed as it is reached (:meth:`PartitionViews.dump`), or all of a list (before)."""
    if data[:1] == b"[":  # the format before: the rows in one list
        rows = orjson.loads(data)
        if not isinstance(rows, list):
            raise ValueError("the views of a snapshot are a list of rows")
        yield from rows
        return
    # Where each line ends, found at once (an array, not a million small objects that would scatter the heap too).
    ends = np.append(np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == _NEWLINE), data.nbytes)
    head = orjson.loads(data[: ends[0]])
    if not isinstance(head, dict) or type(head.get("rows")) is not int:
        raise ValueError("the views of a snapshot start with their count")
    n = 0
    for start, end in itertools.pairwise(ends):  # every line after the header: one row
        n += 1
        yield orjson.loads(data[start + 1 : end])
    if n != head["rows"]:
        raise ValueError(f"the views of a snapshot are {n} rows, not the {head['rows']} it says")


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector waits meanwhile (``gc.disable``; enabled again after, if it was): for loads of what lives
    as long as a partition (views, postings, an index), whose objects a collection would otherwise walk again and
    again while they are made, along with all that was loaded before them. Nested, the outermost enables it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _touched(v: View, heat: Heat) -> int:
    return max(v.created_at, heat.last_access)


def _discard(table: dict[str, Any], key: str, id_: str) -> None:
    members = table.get(key)
    if members is None:
        return
    if isinstance(members, dict):
        members.pop(id_, None)
    else:
        members.discard(id_)
    if not members:
        del table[key]


def _reader_keys(v: View) -> list[str]:
    return [f"p:{p}" for p in v.allowed_principals] + [f"r:{r}" for r in v.allowed_roles]
