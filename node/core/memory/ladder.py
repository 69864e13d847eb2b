"""The ladder's upkeep: curation (L1–L3 rungs from L0 items), tiers, retention and erasure. Pure core (``now`` in).

**Curation** runs per ingested source, batched, idempotent and resumable. It reads the source's live L0 items, asks
:func:`node.curation.curate_source` for the rungs, and stores each as a ``bridge_block`` asset at its level whose
``derived_from`` lists its items and whose policy is inherited from them (never less restrictive than any source).
A rung's id derives from its stable key (arc = source + first position), so curating again writes nothing, a grown
arc is an *edit* of its rungs, and a rung no longer produced is tombstoned. The source's curation state (sealed in the
meta space) records the rungs it owns; before writing, curation records the union of old and new rungs, so a crash
at any point leaves nothing it cannot find again: the next run completes or removes it.

**Erasure** (``forget``): the item is tombstoned (payload, vectors, postings, index entries and edges go); every
derivative whose provenance includes it is invalidated: curation rungs are rebuilt without it at once, other
derivatives (facts, redacted packets) are tombstoned. A minimal audit receipt (ids, time, who, counts; no text) stays.
Retention expiry (``retention_policy``) goes through the same path.

**Retirement** (level retention, :class:`node.tiers.TierPolicy`): an L0 item past its level's retention loses its
verbatim text, but the arc and item rungs compiled from it stay: they are *frozen* (kept as they are, never rebuilt
from the remaining items; curation leaves the items they cover alone) until an erasure touches them, which erasure
wins. The session roll-up is not frozen: it is compiled again, at once, from the items no frozen rung covers.

**Tiers**: ``retier`` sets each asset's tier from its heat; ``visit`` records reads (hydration calls it).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final

from gaml.node.core.embed import Embedder, embedded_ahead, passages
from gaml.node.core.memory import curate as curation
from gaml.node.core.memory.ingest import AHEAD_TEXTS, EMBED_AHEAD, WATERMARK, Ingestor
from gaml.node.core.memory.tiers import TierPolicy, is_critical, retired, tier_at, tier_of, visit
from gaml.node.core.node import Node
from gaml.node.core.store.store import Records
from gaml.policy.access import expired, inherit
from gaml.policy.errors import Deleted, NotFound
from gaml.policy.model import Asset, AssetType, Creator, Level, SourcePointer, Tier, TrustClass, item_id

CURATION: Final = "cur"  # meta kind: per-source curation state
ERASURE: Final = "erase"  # meta kind: audit receipts of erasures
ERASING: Final = "erasing"  # meta kind: erasures begun and not finished (what they will touch)
RUNG_TAG: Final = "rung"
CURATED_KINDS: Final = frozenset(curation.KINDS)


@dataclasses.dataclass(frozen=True, slots=True)
class _Compiled:
    """A source's rungs as :meth:`Ladder._compile` made them: its items, its curation state, the rung assets by key,
    and how many of them were clipped to fit."""

    source_id: str
    items: list[Asset]
    state: dict[str, Any]
    assets: dict[str, Asset]
    clipped: int


@dataclasses.dataclass
class CurationReport:
    sources: int = 0
    items: int = 0
    rungs: int = 0
    written: int = 0  # rungs whose write changed something
    removed: int = 0  # rungs no longer produced (tombstoned)
    frozen: int = 0
    clipped: int = 0  # rungs whose text was clipped (head and tail kept) to fit the payload limit

    def to_json(self) -> dict[str, int]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ErasureReceipt:
    """What an erasure did: ids and counts, never content."""

    id: str
    at: int
    by: str
    reason: str  # forget, retention
    tombstoned: tuple[str, ...]  # derivatives removed with it
    rebuilt_sources: int  # sources whose rungs were recompiled without it

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "tombstoned": list(self.tombstoned)}


def rung_id(key: str, generation: int = 0) -> str:
    return item_id(f"curate:{key}", generation)


class Ladder:
    def __init__(
        self,
        node: Node,
        ingestor: Ingestor,
        curator: curation.Curator | None = None,
        policy: TierPolicy | None = None,
        *,
        max_arc_items: int = 12,
    ) -> None:
        self.node = node
        self.store = node.store
        self.ingestor = ingestor
        self.curator = curator or curation.ExtractiveCurator()
        self.policy = policy or TierPolicy()
        self.max_arc_items = max_arc_items

    # -- curation state --------------------------------------------------------------------------------------------

    def _state(self, source_id: str) -> dict[str, Any]:
        data = self.store.read_meta(self.store.meta_name(CURATION, source_id))
        state: dict[str, Any] = {"rungs": {}, "frozen": {}, "retired": []}
        if data is not None:
            state.update(json.loads(data))
        return state

    def _state_meta(self, source_id: str, state: dict[str, Any]) -> dict[bytes, bytes | None]:
        return {self.store.meta_name(CURATION, source_id): json.dumps(state, sort_keys=True).encode()}

    def pending(self) -> list[str]:
        """Sources with items curation has not compiled yet."""
        return [w["source_id"] for w in self.ingestor.watermarks() if w.get("dirty")]

    # -- curation --------------------------------------------------------------------------------------------------

    def curate(
        self,
        now: int,
        sources: Iterable[str] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> CurationReport:
        """Compile the rungs of ``sources`` (default: every pending source), after finishing any erasure that a
        crash interrupted (so no rung is compiled from an item being forgotten)."""
        self.resume()
        report = CurationReport()

        # The rungs of a window of sources are compiled, and their passages embedded on a worker while the window
        # before is written (as ingestion does).
        def write(window: list[_Compiled], embedder: Embedder) -> None:
            for c in window:
                self._commit(c, now, report, embedder)
                if progress:
                    progress(1)

        embedded_ahead(
            self.node.embedder,
            self._windows(list(self.pending() if sources is None else sources)),
            lambda window: (t for c in window for a in c.assets.values() for t in passages(a)),
            write,
            AHEAD_TEXTS,
        )
        return report

    def _items(self, source_id: str) -> list[Asset]:
        wm = self.ingestor.watermark(source_id)
        if wm is None:
            raise NotFound(f"no source {source_id!r} was ingested")
        ids = [item_id(source_id, pos) for pos in wm.get("items", [])]
        return [a for a in self.store.get_many(ids) if a is not None and a.level is Level.L0]

    def _windows(self, source_ids: Sequence[str]) -> Iterator[list[_Compiled]]:
        """The sources compiled, in runs holding at least :data:`EMBED_AHEAD` items (the last one, what is left)."""
        window: list[_Compiled] = []
        held = 0
        for source_id in source_ids:
            window.append(self._compile(source_id))
            held += len(window[-1].items)
            if held >= EMBED_AHEAD:
                yield window
                window, held = [], 0
        if window:
            yield window

    def _curate_source(self, source_id: str, now: int, report: CurationReport) -> None:
        self._commit(self._compile(source_id), now, report)

    def _compile(self, source_id: str) -> _Compiled:
        """A source's rungs as assets, compiled from its live items; nothing written (:meth:`_commit` writes them).
        What it reads, no other source's curation writes."""
        items = self._items(source_id)
        state = self._state(source_id)
        frozen: dict[str, str] = state["frozen"]
        covered: set[str] = set()
        for fid in frozen.values():
            try:
                covered.update(self.store.get(fid).derived_from)
            except NotFound:
                pass
        live = [a for a in items if a.id not in covered]
        rungs = curation.curate_source([_as_item(a) for a in live], self.curator, max_items=self.max_arc_items)
        by_id = {a.id: a for a in live}
        assets: dict[str, Asset] = {}
        clipped = 0
        for rung in rungs:
            asset = self._rung_asset(source_id, rung, [by_id[i] for i in rung.sources])
            if asset is not None:
                asset, cuts = self.ingestor.fit(asset)  # a rung too large to store must not fail its source
                clipped += bool(cuts)
                assets[rung.key] = asset
        return _Compiled(source_id, items, state, assets, clipped)

    def _commit(self, c: _Compiled, now: int, report: CurationReport, embedder: Embedder | None = None) -> None:
        """Write a source's compiled rungs (embedded by ``embedder`` when given), retire those it no longer has, and
        record its curation state."""
        source_id, items, state, assets = c.source_id, c.items, c.state, c.assets
        frozen: dict[str, str] = state["frozen"]
        old: dict[str, str] = state["rungs"]
        new = {key: a.id for key, a in assets.items()}
        # Intent first: the union of old and new rungs, so that a crash leaves no rung the next run cannot find.
        intent = {**old, **{f"{k}@new": v for k, v in new.items() if old.get(k) != v}}
        if intent != old:
            self.store.write_meta(self._state_meta(source_id, {**state, "rungs": intent}))
        batch = list(assets.values())
        before = self.store.seq
        for i in range(0, len(batch), 256):
            self.node.put(batch[i : i + 256], now, embedder=embedder)
        report.written += self.store.seq - before
        stale = set(intent.values()) - set(new.values())
        for rid in sorted(stale):
            if self._tombstone(rid, now):
                report.removed += 1
        state = {**state, "rungs": new}
        self.store.write_meta(self._state_meta(source_id, state))
        self.ingestor.mark(source_id, dirty=False, curated_at=now)
        report.sources += 1
        report.items += len(items)
        report.rungs += len(new)
        report.frozen += len(frozen)
        report.clipped += c.clipped

    def _tombstone(self, id_: str, now: int) -> bool:
        try:
            return not self.store.get(id_, include_deleted=True).tombstone and bool(self.store.delete(id_, now))
        except NotFound:
            return False

    def _rung_asset(self, source_id: str, rung: curation.Rung, sources: Sequence[Asset]) -> Asset | None:
        if not sources:
            return None
        fields = inherit(sources)
        gen = 0
        while True:  # a tombstoned id is never reused: a rung key that comes back takes the next generation
            rid = rung_id(rung.key, gen)
            try:
                if not self.store.get(rid, include_deleted=True).tombstone:
                    break
            except NotFound:
                break
            gen += 1
        created = max(a.created_at for a in sources)
        starts = [a.source.start for a in sources if a.source is not None]
        ends = [a.source.end for a in sources if a.source is not None]
        return Asset(
            id=rid,
            asset_type=AssetType.BRIDGE_BLOCK,
            payload={**rung.payload, "text": rung.text, "role": rung.role, "session": source_id},
            created_at=created,
            updated_at=created,
            creator=sources[0].creator if len({a.creator for a in sources}) == 1 else Creator.SYSTEM,
            confidence_score=min(a.confidence_score for a in sources),
            provenance_score=min(a.provenance_score for a in sources),
            trust_class=min((a.trust_class for a in sources), key=_TRUST_RANK.__getitem__),
            goal=rung.goal,
            level=Level.parse(rung.level),
            segment=sources[0].segment,
            source=SourcePointer(source_id, min(starts), max(ends)) if starts else None,
            entities=rung.entities,
            tags=tuple({*rung.tags, RUNG_TAG, f"rung:{rung.role}"}),
            **fields,
        )

    # -- erasure ---------------------------------------------------------------------------------------------------

    def forget(self, id_: str, now: int, *, by: str | None = None, reason: str = "forget") -> ErasureReceipt:
        """Erase an asset and its influence: see the module docstring. With ``by``, only its owner may.

        The erasure is first recorded as pending (with what it will touch), then carried out step by step, each step
        idempotent; an erasure a crash interrupted is finished by :meth:`resume` (``curate`` and ``maintain`` call it),
        or by calling ``forget`` again.
        """
        asset = self.store.get(id_, include_deleted=True)
        if by is not None:
            self.node.require_owner(by, asset, "forget", now)
        intent = self._pending(id_)
        if intent is None:
            if asset.tombstone:
                raise Deleted(f"asset {id_} was already forgotten")
            intent = self._intend(asset, now, by or "", reason)
        return self._erase(intent)

    def resume(self) -> list[ErasureReceipt]:
        """Finish every erasure that a crash interrupted."""
        return [self._erase(json.loads(data)) for _, data in sorted(self.store.scan_meta(ERASING))]

    def _pending(self, id_: str) -> dict[str, Any] | None:
        data = self.store.read_meta(self.store.meta_name(ERASING, id_))
        return None if data is None else dict(json.loads(data))

    def _intend(self, asset: Asset, now: int, by: str, reason: str) -> dict[str, Any]:
        """Record what an erasure will do before doing any of it; the sources it touches are marked for curation."""
        derived = self._derivatives(asset.id)
        sources = {str(d.payload["session"]) for d in derived if RUNG_TAG in d.tags and "session" in d.payload}
        position = -1
        if asset.source is not None and asset.level is Level.L0:
            sources.add(asset.source.source_id)
            pos = asset.payload.get("position")
            # Only an item the source really holds (its id is the source's item id there) forgets a position of it.
            if isinstance(pos, int) and asset.id == item_id(asset.source.source_id, pos):
                position = pos
        # Only sources ingested for the asset's owner and tenant are touched: an asset naming another's source (its
        # pointer or a payload "session" is the writer's to choose) must not mark, relabel or recompile it.
        sources = {sid for sid in sources if self._owned(sid, asset)}
        intent: dict[str, Any] = {
            "id": asset.id,
            "at": now,
            "by": by,
            "reason": reason,
            "derived": [d.id for d in derived],
            "sources": sorted(sources),
            "source": asset.source.source_id if asset.source is not None and asset.source.source_id in sources else "",
            "position": position,
            "goal": asset.goal if asset.payload.get("kind") == "goal" else "",
            # Facts that a fact going with it had closed: they hold their slot again unless something else closed them.
            "reopen": [[old, d.valid_from] for d in derived if "fact" in d.tags for old in d.supersedes],
            "owner": asset.owner_id,
        }
        entries: dict[bytes, bytes | None] = {self.store.meta_name(ERASING, asset.id): json.dumps(intent).encode()}
        for sid in intent["sources"]:
            wm = self.ingestor.watermark(sid)
            if wm is not None:
                wm["dirty"] = True
                if sid == intent["source"] and position >= 0:
                    wm["forgotten"] = sorted({*wm.get("forgotten", []), position})
                entries[self.store.meta_name(WATERMARK, sid)] = json.dumps(wm).encode()
        self.store.write_meta(entries)
        return intent

    def _owned(self, source_id: str, asset: Asset) -> bool:
        wm = self.ingestor.watermark(source_id)
        return wm is not None and (wm.get("owner"), wm.get("tenant", "")) == (asset.owner_id, asset.tenant_scope)

    def _erase(self, intent: dict[str, Any], *, purge: bool = True) -> ErasureReceipt:
        id_, now = intent["id"], int(intent["at"])
        self._relabel(intent, now)
        tombstoned: list[str] = []
        for d in self.store.get_many(intent["derived"]):
            if d is None:
                continue
            if RUNG_TAG in d.tags:
                sid = str(d.payload.get("session", ""))
                state = self._state(sid)
                if d.id in state["frozen"].values():  # erasure wins over a frozen rung
                    if self._tombstone(d.id, now):
                        tombstoned.append(d.id)
                    frozen = {k: v for k, v in state["frozen"].items() if v != d.id}
                    self.store.write_meta(self._state_meta(sid, {**state, "frozen": frozen}))
            elif self._tombstone(d.id, now):
                tombstoned.append(d.id)
        self._tombstone(id_, now)
        self._reopen(intent.get("reopen", []), now)
        rebuilt = 0
        for sid in intent["sources"]:
            if self.ingestor.watermark(sid) is not None:
                self._curate_source(sid, now, CurationReport())
                rebuilt += 1
        receipt = ErasureReceipt(id_, now, intent["by"], intent["reason"], tuple(sorted(tombstoned)), rebuilt)
        self.store.write_meta(
            {
                self.store.meta_name(ERASURE, f"{id_}:{now}"): json.dumps(receipt.to_json()).encode(),
                self.store.meta_name(ERASING, id_): None,
            }
        )
        self.store.checkpoint()  # index snapshots are rewritten without its vector
        # No earlier version of the item or of anything compiled from it may linger in a log or a table file.
        if purge:
            self.store.purge(self._touched(intent))
        return receipt

    def _touched(self, intent: dict[str, Any]) -> list[str]:
        """The assets whose earlier versions an erasure must purge: the item, its derivatives, its sources' rungs."""
        touched = {intent["id"], *intent["derived"]}
        for sid in intent["sources"]:
            touched.update(self._state(sid)["rungs"].values())
        return sorted(touched)

    def _reopen(self, closed: list[list[Any]], now: int) -> None:
        """Facts closed (``valid_to``) by an erased fact hold their slot again, if no live fact supersedes them."""
        edits = []
        for old_id, at in closed:
            old = self.store.get_many([old_id])[0]
            by = self.store.get_many(sorted(self.store.superseded.get(old_id, ())))
            if old is not None and old.valid_to == at and not any(b and b.owner_id == old.owner_id for b in by):
                edits.append(old.replace(valid_to=0, signature=b""))
        if edits:
            self.node.put(edits, now)

    def _relabel(self, intent: dict[str, Any], now: int) -> None:
        """A forgotten request was the goal label of the items after it: they take the goal before it instead."""
        label, sid, position = intent["goal"], intent["source"], intent["position"]
        if not label or not sid:
            return
        wm = self.ingestor.watermark(sid)
        previous = f"session: {(wm or {}).get('title') or sid}"
        earlier = sorted((p for p in (wm or {}).get("items", []) if p < position), reverse=True)
        for a in self.store.get_many([item_id(sid, p) for p in earlier]):
            if a is not None:
                previous = a.goal
                break
        edits = [
            a.replace(goal=previous, signature=b"")
            for a in self.store.get_many(self.store.list_ids("goal", label))
            if a is not None
            and a.id != intent["id"]
            and a.owner_id == intent["owner"]
            and a.payload.get("session") == sid
            and RUNG_TAG not in a.tags
        ]
        for i in range(0, len(edits), 256):
            self.node.put(edits[i : i + 256], now)

    def _derivatives(self, id_: str) -> list[Asset]:
        """Every live asset whose provenance includes ``id_``, transitively."""
        out: dict[str, Asset] = {}
        todo = [id_]
        while todo:
            cur = todo.pop()
            for rel, other in self.store.edges(cur, reverse=True):
                if rel != "derived_from" or other in out:
                    continue
                found = self.store.get_many([other])[0]
                if found is not None:
                    out[other] = found
                    todo.append(other)
        return [out[k] for k in sorted(out)]

    def erasures(self) -> list[dict[str, Any]]:
        return sorted((json.loads(d) for _, d in self.store.scan_meta(ERASURE)), key=lambda r: (r["at"], r["id"]))

    def expire(self, now: int) -> list[ErasureReceipt]:
        """Erase every asset whose retention policy has run out (the same path as ``forget``).

        Sources go before what was compiled from them (by level), and each asset is checked again when its turn
        comes: a derivative that only inherited the date was rebuilt without its source by then, and is no longer due.
        """
        found = [a for a in self.store.get_many(self.store.expired(now)) if a is not None]
        touched: set[str] = set()
        out = []
        for a in sorted(found, key=lambda a: (_LEVEL_RANK[a.level], a.id)):
            current = self.store.get_many([a.id])[0]
            if current is not None and expired(current, now):  # else gone, or rebuilt, with an earlier one
                intent = self._intend(current, now, "", "retention")
                out.append(self._erase(intent, purge=False))
                touched.update(self._touched(intent))
        if touched:  # one purge for them all: its cost is per space, not per asset
            self.store.purge(sorted(touched))
        return out

    # -- retirement and tiers --------------------------------------------------------------------------------------

    def retire(self, now: int) -> int:
        """Retire L0 items past their level's retention: the text goes, the rungs compiled from them stay frozen."""
        count = 0
        for wm in self.ingestor.watermarks():
            sid = wm["source_id"]
            items = self._items(sid)
            old = [a for a in items if retired(a, now, self.policy)]
            if not old:
                continue
            state = self._state(sid)
            gone = {a.id for a in old}
            frozen = dict(state["frozen"])
            for key, rid in state["rungs"].items():
                try:
                    rung = self.store.get(rid)
                except NotFound:
                    continue
                if gone & set(rung.derived_from) and rung.payload.get("role") != "session":
                    frozen[key] = rid
            rungs = {k: v for k, v in state["rungs"].items() if k not in frozen}
            retired_ids = sorted({*state["retired"], *gone})
            self.store.write_meta(
                self._state_meta(sid, {**state, "rungs": rungs, "frozen": frozen, "retired": retired_ids})
            )
            for a in old:
                self.store.delete(a.id, now)
                count += 1
            self._curate_source(sid, now, CurationReport())  # the roll-up, compiled again without them
        return count

    def retier(self, now: int) -> dict[str, int]:
        """Set every live asset's tier from its heat at ``now``; returns how many are in each tier."""
        counts = {t.value: 0 for t in Tier}
        changes = []
        ids = self.store.live_ids()
        for i in range(0, len(ids), 1024):
            for a in self.store.get_many(ids[i : i + 1024]):
                if a is None:
                    continue
                t = tier_of(a, now, self.policy)
                counts[t.value] += 1
                if t is not a.tier:
                    changes.append((a.id, t, a.heat))
        for i in range(0, len(changes), 1024):
            self.store.update_local(changes[i : i + 1024])
        return counts

    def visit(self, reads: Sequence[tuple[str, Level]], now: int, records: Records | None = None) -> None:
        """Record reads (id, the level it was read at): heat rises by the depth of the interaction.

        ``records``: those the reader opened (a hydrator's frames): what they hold is not opened again, and they hold
        the new heat afterwards. The heat is committed without waiting for the disk (``Store.update_local``'s
        ``sync=False``, as the access log's receipts are): a frame does not pay an fsync for what it was read at."""
        assets = self.store.get_many([i for i, _ in reads], records=records)
        changes = []
        for a, (_, level) in zip(assets, reads, strict=True):
            if a is not None:
                heat = visit(a.heat, level, now, self.policy)
                changes.append((a.id, tier_at(heat, a.created_at, a.level, is_critical(a), now, self.policy), heat))
        self.store.update_local(changes, records=records, sync=False)


# Sources before what is compiled from them: L0 first.
_LEVEL_RANK: Final = {level: rank for rank, level in enumerate(Level)}
# The least trusted first: a derivative is as trusted as its least trusted source.
_TRUST_RANK: Final = {TrustClass.LOWER_TRUST: 0, TrustClass.UNVERIFIED: 1, TrustClass.HIGHER_TRUST: 2}


def _as_item(a: Asset) -> curation.Item:
    kind = str(a.payload.get("kind", "message"))
    if any(t.startswith("gated:") for t in a.tags):
        kind = "noise"  # kept verbatim, never promoted
    elif kind not in CURATED_KINDS:
        kind = "message"
    text = a.payload.get("text")
    speaker = a.payload.get("speaker") or a.payload.get("role") or ""
    return curation.Item(
        id=a.id,
        source_id=a.source.source_id if a.source else "",
        position=_position(a),
        text=text if isinstance(text, str) else "",
        speaker=str(speaker),
        role=str(a.payload.get("role", "note")),
        kind=kind,
        goal=a.goal,
        time=a.created_at,
        entities=a.entities,
        tags=a.tags,
        start=a.source.start if a.source else 0,
        end=a.source.end if a.source else 0,
    )


def _position(a: Asset) -> int:
    pos = a.payload.get("position")
    return pos if isinstance(pos, int) else 0


__all__ = ["CURATION", "CurationReport", "ErasureReceipt", "Ladder", "rung_id"]
