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
written before a field was added fails to load and is rebuilt, like any stale one). There they are one line each,
written and read a line at a time (:meth:`PartitionViews.dump`): first the *shapes*, the fields that many views share
(type, owner, tenant, scope, readers, policies, retention, level, segment, trust, goal, source), each once; then a row
per view, its own fields and the number of its shape. The strings that many views repeat (owner, tags, entities, goal,
source: ``_SHARED``) are interned. Measured on a 100k-asset memory, loading its views in a fresh process: +245 MB of
RSS when the rows were one JSON list parsed at once (its freed rows left the heap scattered), +103 MB a row at a time,
+72 MB with the strings interned. At a million views (one user's facts, hash embedder's bench memory), rows of all of
a view's fields into a frozen dataclass took 18.7-20.4 s to load; shapes, views as named tuples and a decoding
written out field by field take 9.1-9.5 s (same hour, alternating), and the dump is 155 MB instead of 279.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import operator
import sys
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from hashlib import blake2b
from typing import Any, Final, NamedTuple

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


class View(NamedTuple):
    """The fields of one live asset that retrieval decides on (see the module's doc). A named tuple: immutable, and
    made in one step (a frozen dataclass sets each of its 29 fields through ``object.__setattr__``: 3.6 µs a view
    against 0.4, measured, and a cold start makes a million of them)."""

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
        if not (r.delete_at or r.ttl_seconds):
            return 0
        ends = [x for x in (r.delete_at, self.created_at + r.ttl_seconds * 1_000_000 if r.ttl_seconds else 0) if x]
        return min(ends) if ends else 0

    def to_json(self) -> list[Any]:
        """The view as a row of JSON values, its fields in order (enums by value, the retention as ``[delete_at,
        ttl_seconds]``); :meth:`from_json` reads it back. Written out field by field, like that."""
        r = self.retention_policy
        return [
            self.id,
            self.asset_type._value_,
            self.owner_id,
            self.tenant_scope,
            self.privacy_scope._value_,
            self.allowed_principals,
            self.allowed_roles,
            self.inference_policy._value_,
            self.training_policy._value_,
            self.export_policy._value_,
            self.replication_policy._value_,
            [r.delete_at, r.ttl_seconds],
            self.level._value_,
            self.segment,
            self.tags,
            self.entities,
            self.created_at,
            self.valid_from,
            self.valid_to,
            self.supersedes,
            self.trust_class._value_,
            self.provenance_score,
            self.confidence_score,
            self.goal,
            self.source_id,
            self.source_start,
            self.derived_from,
            self.contradicts,
        ]

    @classmethod
    def from_json(cls, row: list[Any]) -> View:
        """The view :meth:`to_json` wrote. Raises ``ValueError`` (or ``TypeError``) for a row of another shape or an
        unknown enum value (a snapshot of another version: the store rebuilds it). Read as a snapshot's shape and row
        are (:func:`_shape_of`, :func:`_view_of`): the row holds both."""
        if len(row) != len(_FIELDS):
            raise ValueError(f"a view is a row of {len(_FIELDS)} fields, not {len(row)}")
        own = [row[0], 0, *_OWN_PART(row), None]  # a row of the one shape below, with no heat
        return _view_of(own, [_shape_of(list(_SHAPE_PART(row)))])


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
    for t in v.tags:  # a loop, not any() over a generator: a cold start asks this of every view
        if t.startswith("gated:") or t == "contamination":
            return ""
    if v.tags and not STANDING_TAGS.isdisjoint(v.tags):
        return "pinned"
    if v.is_item:
        return "heat" if HEAT_KINDS.intersection(v.tags) else ""
    if v.level is not Level.L0:
        return ""
    if v.asset_type in BINDING_TYPES:
        return "binding"
    return "heat" if v.asset_type in HEAT_TYPES else ""


_FIELDS: Final = tuple(f for f in View._fields if f != "tombstone")
_SOURCE_FIELDS: Final = frozenset({"source_id", "source_start"})


def _members(cls: type[Any]) -> dict[Any, Any]:
    """An enum's members by value (what a snapshot's row holds)."""
    return {m.value: m for m in cls}


_ASSET_TYPES: Final = _members(AssetType)
_SCOPES: Final = _members(PrivacyScope)
_INFERENCE: Final = _members(InferencePolicy)
_TRAINING: Final = _members(TrainingPolicy)
_EXPORT: Final = _members(ExportPolicy)
_REPLICATION: Final = _members(ReplicationPolicy)
_LEVELS: Final = _members(Level)
_TRUST: Final = _members(TrustClass)
_new: Final = tuple.__new__  # a view from its fields, counted already (View._make checks again)
# Each distinct value made once (most views share their retention, and every view never visited has the same heat).
_retention: Final = functools.lru_cache(maxsize=4096)(Retention)
_heat: Final = functools.lru_cache(maxsize=4096)(Heat)


def _interned(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(map(sys.intern, values))


# The fields whose strings many views repeat (an owner, a tag, an entity, a goal): each view holds the one interned
# string, not a copy of its own (~300 bytes a view saved where each has a few tags and entities).
_SHARED: Final = ("owner_id", "tenant_scope", "segment", "goal", "source_id")
_SHARED_TUPLES: Final = ("allowed_principals", "allowed_roles", "tags", "entities")


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
        id_ = v.id
        self.views[id_] = v
        if heat != ZERO_HEAT:
            self.heats[id_] = (heat.visits, heat.last_access, heat.score)
        h = self.hashes[id_] = int.from_bytes(blake2b(id_.encode(), digest_size=16, key=self.key).digest())
        self.digest ^= h
        sig = v.signature
        group = self.groups.get(sig)
        if group is None:
            self.groups[sig] = {id_}
        else:
            group.add(id_)
        if v.allowed_principals or v.allowed_roles:
            for key in _reader_keys(v):
                self.readers.setdefault(key, set()).add(id_)
        deadline = v.deadline
        if deadline:
            self.expiring[id_] = deadline
        if v.valid_from or v.valid_to:
            self.timed.add(id_)
        if v.created_at > self.latest_created:
            self.latest_created = v.created_at
        if v.source_id and v.level is Level.L0:  # an item (View.is_item)
            self.sources.setdefault(v.source_id, {})[id_] = v.source_start
            if v.goal:
                self.goals.setdefault(v.goal, set()).add(id_)
        for target in v.derived_from:
            self.derivatives.setdefault(target, set()).add(id_)
        for target in v.contradicts:
            self.contradicted.setdefault(target, set()).add(id_)
        if v.entities:
            entities = self.entities
            for e in {e.lower() for e in v.entities}:
                members = entities.get(e)
                if members is None:  # not setdefault(e, set()): that makes a set per call, kept or not
                    entities[e] = {id_}
                else:
                    members.add(id_)
        why = standing(v)
        if why == "heat":
            if touched is None:
                self.touched.add((-_touched(v, heat), id_))
            else:
                touched.append((-_touched(v, heat), id_))
            if heat.score > self.peak:
                self.peak = heat.score
        elif why:
            self.standing[id_] = why

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
        """A header line ``{"rows": n, "shapes": k}``, then the ``k`` *shapes* (the fields many views share: type,
        owner, tenant, scope, readers, policies, retention, level, segment, trust, goal, source; :func:`_shape`), then
        each view's row (:func:`_row`: its id, the number of its shape, the fields of its own, its heat ``[visits,
        last access, score]`` last), a line each: the heat class in its order, then the rest by id. One line at a
        time, so neither this nor :meth:`load` holds every row at once (at a million views, such a list left its freed
        parts scattered through the heap: the process kept twice the memory the views need). A shape is written once:
        a row is half as long as the whole view's, and is read in half the time."""
        views, heats = self.views, self.heats
        # The heat class first, in its order, then the rest by id: a load then finds the heat order already sorted
        # (sorting a million (time, id) pairs took a tenth of a cold start's views).
        hot = [i for _, i in self.touched]
        held = set(hot)
        order = hot + sorted(i for i in views if i not in held)
        shapes: dict[tuple[Any, ...], int] = {}
        numbers = [shapes.setdefault(_shape(views[i]), len(shapes)) for i in order]
        out = bytearray(orjson.dumps({"rows": len(order), "shapes": len(shapes)}))
        for shape in shapes:  # in the order they were numbered
            out += b"\n"
            out += orjson.dumps(shape)
        for i, number in zip(order, numbers, strict=True):
            out += b"\n"
            out += orjson.dumps(_row(views[i], number, heats.get(i, _ZERO_ROW)))
        return bytes(out)

    @classmethod
    def load(cls, data: bytes | memoryview, key: bytes = b"") -> PartitionViews:
        """The views :meth:`dump` wrote, as putting each of them gives (a snapshot holds each id once); dumps of the
        formats before (a row of all of a view's fields per line, or one JSON list of such rows) are read too. The
        collector waits meanwhile: what is made here lives as long as the partition, and a million views would
        otherwise be traversed again and again while they are made. Raises ``ValueError`` (or ``TypeError``) for
        anything else (the store rebuilds such a snapshot)."""
        pv = cls(key)
        touched: list[tuple[int, str]] = []
        views = pv.views
        with collector_paused():
            head, lines = _lines(memoryview(data))
            if "shapes" not in head:  # the format before: each row has all of its view's fields
                for row in lines:
                    if not isinstance(row, list) or not row:
                        raise ValueError("a snapshot's view is a row")
                    v = View.from_json(row[:-1])
                    if v.id in views:
                        raise ValueError(f"view {v.id} is twice in the snapshot")
                    pv._add(v, _heat(*row[-1]), touched)
            else:
                shapes = [_shape_of(next(lines)) for _ in range(head["shapes"])]
                for row in lines:
                    v = _view_of(row, shapes)
                    if v.id in views:
                        raise ValueError(f"view {v.id} is twice in the snapshot")
                    pv._add(v, _heat(*row[-1]), touched)
        pv.touched.update(touched)
        pv.epoch = len(views)
        return pv


# A view's shape: the fields that many views share, written once per snapshot (PartitionViews.dump). A row: the id,
# the number of its shape, the fields of its own, the heat.
_SHAPE_FIELDS: Final = (*View._fields[1:14], "trust_class", "goal", "source_id")
_ROW_FIELDS: Final = ("id", "shape", *(f for f in _FIELDS if f not in _SHAPE_FIELDS and f != "id"), "heat")
# Where a whole view's row (View.to_json) holds the fields of a shape, and those of a row after the id and shape.
_SHAPE_PART: Final = operator.itemgetter(*map(_FIELDS.index, _SHAPE_FIELDS))
_OWN_PART: Final = operator.itemgetter(*map(_FIELDS.index, _ROW_FIELDS[2:-1]))


def _shape(v: View) -> tuple[Any, ...]:
    """The shape of ``v`` as a snapshot writes it (:data:`_SHAPE_FIELDS`; enums by value, the retention as
    ``(delete_at, ttl_seconds)``): a key of the dump's table of shapes, and the line it writes."""
    r = v.retention_policy
    return (
        v.asset_type._value_,
        v.owner_id,
        v.tenant_scope,
        v.privacy_scope._value_,
        v.allowed_principals,
        v.allowed_roles,
        v.inference_policy._value_,
        v.training_policy._value_,
        v.export_policy._value_,
        v.replication_policy._value_,
        (r.delete_at, r.ttl_seconds),
        v.level._value_,
        v.segment,
        v.trust_class._value_,
        v.goal,
        v.source_id,
    )


def _row(v: View, shape: int, heat: Any) -> list[Any]:
    """The row of ``v`` as a snapshot writes it (:data:`_ROW_FIELDS`)."""
    return [
        v.id,
        shape,
        v.tags,
        v.entities,
        v.created_at,
        v.valid_from,
        v.valid_to,
        v.supersedes,
        v.provenance_score,
        v.confidence_score,
        v.source_start,
        v.derived_from,
        v.contradicts,
        heat,
    ]


class _Shape(NamedTuple):
    head: tuple[Any, ...]  # a view's fields from its type to its segment, decoded
    trust_class: TrustClass
    goal: str
    source_id: str


def _shape_of(line: Any) -> _Shape:
    """A shape read back (:func:`_shape`): its fields decoded, its strings interned. ``ValueError`` (or
    ``TypeError``) for one of another length, an unknown enum value or a field of another type."""
    if not isinstance(line, list) or len(line) != len(_SHAPE_FIELDS):
        raise ValueError(f"a snapshot's shape is a row of {len(_SHAPE_FIELDS)} fields")
    (
        asset_type,
        owner_id,
        tenant_scope,
        privacy_scope,
        allowed_principals,
        allowed_roles,
        inference_policy,
        training_policy,
        export_policy,
        replication_policy,
        retention_policy,
        level,
        segment,
        trust_class,
        goal,
        source_id,
    ) = line
    intern = sys.intern
    try:
        head = (
            _ASSET_TYPES[asset_type],
            intern(owner_id),
            intern(tenant_scope),
            _SCOPES[privacy_scope],
            _interned(allowed_principals) if allowed_principals else (),
            _interned(allowed_roles) if allowed_roles else (),
            _INFERENCE[inference_policy],
            _TRAINING[training_policy],
            _EXPORT[export_policy],
            _REPLICATION[replication_policy],
            _retention(*retention_policy),
            _LEVELS[level],
            intern(segment),
        )
        return _Shape(head, _TRUST[trust_class], intern(goal), intern(source_id))
    except (KeyError, TypeError) as e:
        raise ValueError(f"a snapshot's shape has a field this version does not read: {e!r}") from None


def _view_of(row: Any, shapes: list[_Shape]) -> View:
    """The view of a row (:func:`_row`) of one of ``shapes``. ``ValueError`` (or ``TypeError``) for a row of another
    shape."""
    if type(row) is not list or len(row) != len(_ROW_FIELDS):
        raise ValueError(f"a snapshot's view is a row of {len(_ROW_FIELDS)} fields")
    (
        id_,
        number,
        tags,
        entities,
        created_at,
        valid_from,
        valid_to,
        supersedes,
        provenance_score,
        confidence_score,
        source_start,
        derived_from,
        contradicts,
        _,
    ) = row
    if type(id_) is not str or type(number) is not int or not 0 <= number < len(shapes):
        raise ValueError(f"a snapshot's view {id_!r} names no shape of the snapshot's")
    s = shapes[number]
    return _new(
        View,
        (
            id_,
            *s.head,
            _interned(tags) if tags else (),
            _interned(entities) if entities else (),
            created_at,
            valid_from,
            valid_to,
            tuple(supersedes) if supersedes else (),
            s.trust_class,
            provenance_score,
            confidence_score,
            s.goal,
            s.source_id,
            source_start,
            tuple(derived_from) if derived_from else (),
            tuple(contradicts) if contradicts else (),
            False,
        ),
    )


def _lines(data: memoryview) -> tuple[dict[str, Any], Iterator[Any]]:
    """The header of a dump and its lines after it, each parsed as it is reached (:meth:`PartitionViews.dump`);
    for a dump of the first format (one JSON list of rows), ``{"rows": n}`` and its rows."""
    if data[:1] == b"[":  # the first format: the rows in one list
        rows = orjson.loads(data)
        if not isinstance(rows, list):
            raise ValueError("the views of a snapshot are a list of rows")
        return {"rows": len(rows)}, iter(rows)
    # Where each line ends, found at once (an array, not a million small objects that would scatter the heap too).
    ends = np.append(np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == _NEWLINE), data.nbytes)
    head = orjson.loads(data[: ends[0]])
    if not isinstance(head, dict) or type(head.get("rows")) is not int or type(head.get("shapes", 0)) is not int:
        raise ValueError("the views of a snapshot start with their count")
    if len(ends) - 1 != head["rows"] + head.get("shapes", 0) or head.get("shapes", 0) < 0:
        raise ValueError(f"the views of a snapshot are {len(ends) - 1} lines, not the {head} it says")
    return head, _parsed(data, ends)


def _parsed(data: memoryview, ends: np.ndarray) -> Iterator[Any]:
    """Each line of ``data`` after the first, parsed (``ends``: where each line ends)."""
    for first in range(0, len(ends) - 1, _BLOCK):  # a block of line ends at a time, as Python ints
        block = ends[first : first + _BLOCK + 1].tolist()
        for start, end in itertools.pairwise(block):
            yield orjson.loads(data[start + 1 : end])


_BLOCK: Final = 65_536  # line ends turned into Python ints at a time


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
