"""Staged, governed retrieval: the one path by which assets are read for a principal. Pure core.

The stages run in this order, and each narrows the set the next one sees:

1. **identity**: the principal is a registered one, and the request states its purpose (a permission) and where it
   executes;
2. **partitions**: only partitions that can hold something the principal may read are considered: its own, its
   tenants', the public one, and those holding memory granted or explicitly shared with it;
3. **policy** (purpose, policy, tenant, retention): each asset is authorized *before anything is ranked*, using the
   partitions' policy views: one decision per policy group where the principal is in the audience, one per asset
   where only a grant or a reader list lets it in; expired assets drop out;
4. **trust**: trust class, provenance and confidence thresholds;
5. **prefilter**: asset types, entities, segments, tags, creation time;
6. **temporal**: as of a time (now by default): what was not yet known, not yet or no longer valid, or superseded by
   then drops out;
7. **relevance**: dense (the partition's vector index, scoring only the authorized ids) and lexical (BM25 over the
   partition's postings, with the same authorization applied to every posting before it is scored), fused by
   reciprocal rank (k = 60), with optional recency and trust boosts;
8. **governor**: deduplication, a per-segment cap and the final cut to ``k``.

Every result says why it is there (path, ranks and scores, boosts, how it was authorized, the stages it passed), and
every read leaves a receipt in the access log of each owner whose memory it returned. With ``trace=True`` the
pipeline also returns the candidate set after every stage, which is how the tests prove that no unauthorized id
ever enters one.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Final

import numpy as np

from gaml.node.core.access.governance import Governance
from gaml.node.core.embed import Embedder
from gaml.node.core.store.store import Nearest, Store
from gaml.node.core.store.views import PartitionViews, View
from gaml.policy.access import Grant, Location, Permission, Principal, decide, in_audience
from gaml.policy.errors import GamlError, InvalidInput
from gaml.policy.model import Asset, AssetType, Level, Retention, TrustClass

RRF_K: Final = 60
QUERY_VECTORS: Final = 256  # query texts whose vectors are kept (QueryVectors)
DECIDED_MAX: Final = 1024  # cached audience decisions (partition x principal x purpose x location) before a reset
STAGES: Final = ("identity", "partitions", "policy", "trust", "prefilter", "temporal", "relevance", "governor")
TRUST_RANK: Final = {TrustClass.UNVERIFIED: 0, TrustClass.LOWER_TRUST: 1, TrustClass.HIGHER_TRUST: 2}
SEARCH_MODES: Final = ("hybrid", "dense", "lexical")


@dataclasses.dataclass(frozen=True, slots=True)
class SearchRequest:
    text: str
    principal: str
    purpose: Permission
    now: int
    location: Location = Location.THIS_DEVICE
    k: int = 10
    as_of: int = 0  # 0: now
    types: frozenset[AssetType] = frozenset()
    entities: frozenset[str] = frozenset()
    segments: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()
    created_from: int = 0
    created_to: int = 0
    min_trust: TrustClass = TrustClass.UNVERIFIED
    min_provenance: float = 0.0
    min_confidence: float = 0.0
    mode: str = "hybrid"
    recency_half_life_s: float = 0.0  # 0: no recency boost
    trust_boost: float = 0.0
    per_segment_cap: int = 0  # 0: no cap
    levels: frozenset[Level] = frozenset()

    def __post_init__(self) -> None:
        if not isinstance(self.purpose, Permission):
            raise InvalidInput("a read states its purpose (read, context, memorize, replicate, export or train)")
        if not isinstance(self.location, Location):
            raise InvalidInput("a read states where it executes")
        if self.mode not in SEARCH_MODES:
            raise InvalidInput(f"mode is one of {', '.join(SEARCH_MODES)}, not {self.mode!r}")
        if self.k <= 0 or self.k > 1000:
            raise InvalidInput(f"k must be between 1 and 1000, got {self.k}")
        if self.created_to and self.created_to < self.created_from:
            raise InvalidInput("created_to is before created_from")
        for name in ("min_provenance", "min_confidence"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise InvalidInput(f"{name} must be in [0, 1]")
        if self.recency_half_life_s < 0 or self.trust_boost < 0 or self.per_segment_cap < 0:
            raise InvalidInput("boosts and caps are not negative")


@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    asset: Asset
    score: float
    path: str  # dense, lexical or both
    dense: tuple[int, float] | None  # (rank, cosine similarity)
    lexical: tuple[int, float] | None  # (rank, BM25 score)
    boosts: dict[str, float]
    via: str  # how the principal was authorized: owner, tenant, public, principal, role, grant:<id>
    partition: str
    stages: tuple[str, ...] = STAGES

    def explain(self) -> dict[str, Any]:
        return {
            "id": self.asset.id,
            "score": round(self.score, 6),
            "path": self.path,
            "dense": None if self.dense is None else {"rank": self.dense[0], "score": round(self.dense[1], 6)},
            "lexical": None if self.lexical is None else {"rank": self.lexical[0], "score": round(self.lexical[1], 6)},
            "boosts": {k: round(v, 6) for k, v in self.boosts.items()},
            "via": self.via,
            "partition": self.partition,
            "stages": list(self.stages),
        }


@dataclasses.dataclass
class Trace:
    """The candidate ids after each stage (and the raw candidates of each relevance path)."""

    partitions: list[str] = dataclasses.field(default_factory=list)
    stages: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    dense: set[str] = dataclasses.field(default_factory=set)
    lexical: set[str] = dataclasses.field(default_factory=set)


@dataclasses.dataclass(frozen=True, slots=True)
class Response:
    results: list[Result]
    path: str  # what relevance ran: hybrid, dense, lexical
    partitions: int
    authorized: int
    trace: Trace | None


@dataclasses.dataclass(frozen=True, slots=True)
class Authorized:
    """What stages 1–6 leave for a request: per partition, the ids it may use (``keep``) and how each was
    authorized (``auth``, before trust, prefilter and time narrowed it)."""

    principal: Principal
    partitions: list[tuple[bytes, str]]
    auth: dict[bytes, dict[str, str]]  # read-only: shared between calls
    keep: dict[bytes, AbstractSet[str]]  # read-only: shared between calls
    resolved: int  # dropped by temporal resolution (superseded, expired or not yet valid)


@dataclasses.dataclass(frozen=True, slots=True)
class Relevance:
    """Stage 7: ``ranked`` (id, fused score, partition), best first, and each path's (rank, score) by id."""

    ranked: list[tuple[str, float, bytes]]
    dense: dict[str, tuple[int, float]]
    lexical: dict[str, tuple[int, float]]
    dense_error: str = ""  # the embedder failed: why (the dense path was asked for and could not run)
    dense_empty: str = ""  # the embedder gave no vector for the text (nothing to rank by; not an error)


class QueryVectors:
    """The vectors of the last :data:`QUERY_VECTORS` query texts, by (who asked, embedder, text), least recently used
    out first: an agent asks for the same goal again and again (each turn, each budget), and embedding it is most of a
    small frame's time with a model. Kept per asker, so that how fast a call answers never tells one principal what
    another asked. Only vectors are kept (read-only), never a failure: a failed embedding is tried again on the next
    call. In memory only, as the request's text already is; thread-safe."""

    def __init__(self, size: int = QUERY_VECTORS) -> None:
        self.size = size
        self._got: dict[tuple[str, str, str], np.ndarray] = {}
        self._lock = threading.Lock()
        self.hits = 0

    def get(self, who: str, embedder: str, text: str) -> np.ndarray | None:
        with self._lock:
            q = self._got.pop((who, embedder, text), None)
            if q is not None:
                self._got[(who, embedder, text)] = q  # now the most recent
                self.hits += 1
            return q

    def clear(self) -> None:
        with self._lock:
            self._got.clear()

    def put(self, who: str, embedder: str, text: str, q: np.ndarray) -> np.ndarray:
        q = np.array(q, copy=True)
        q.flags.writeable = False
        with self._lock:
            self._got.pop((who, embedder, text), None)
            self._got[(who, embedder, text)] = q
            while len(self._got) > self.size:
                del self._got[next(iter(self._got))]
        return q


class Query:
    """A request's text as the dense path needs it, embedded at most once, on first use, however many relevance
    calls share it (the plane segments of one hydration): the vector, or why there is none. With ``vectors``, a text
    that ``who`` had embedded by an earlier request is not embedded again."""

    __slots__ = ("_dense", "embedder", "text", "vectors", "who")

    def __init__(self, text: str, embedder: Embedder, vectors: QueryVectors | None = None, who: str = "") -> None:
        self.text = text
        self.embedder = embedder
        self.vectors = vectors
        self.who = who
        self._dense: tuple[np.ndarray | None, str, str] | None = None

    def dense(self) -> tuple[np.ndarray | None, str, str]:
        """(the unit vector or None, why the embedder failed, why it gave no vector for the text)."""
        if self._dense is None:
            q: np.ndarray | None = None
            error = empty = ""
            known = self.vectors.get(self.who, self.embedder.id, self.text) if self.vectors is not None else None
            if known is not None:
                self._dense = (known, "", "")
                return self._dense
            try:
                (q,) = self.embedder.embed([self.text])
            except GamlError as e:
                q, error = None, f"the embedder {self.embedder.id} failed: {e}"
            if q is not None and float(np.linalg.norm(q)) == 0:
                q, empty = None, f"the embedder {self.embedder.id} gives no vector for this text"
            if q is not None and self.vectors is not None:
                q = self.vectors.put(self.who, self.embedder.id, self.text, q)
            self._dense = (q, error, empty)
        return self._dense


@dataclasses.dataclass(frozen=True, slots=True)
class _Decided:
    """One partition's audience decisions for one (principal, purpose, location), as of a views epoch: how each id
    of an allowed group is authorized, and those ids (expired ones still in: retention is applied per call)."""

    views: PartitionViews
    epoch: int
    allowed: dict[str, str]
    ids: frozenset[str]


class Retriever:
    def __init__(self, store: Store, governance: Governance, embedder: Embedder) -> None:
        self.store = store
        self.governance = governance
        self.embedder = embedder
        # Conflicts among what a boundary's members claim, resolved before the governor's selection
        # (node.core.consensus.Consensus, set by whoever runs replication; None: all memory is this node's).
        self.consensus: Any = None
        # Audience decisions per (partition, principal, purpose, location), reused while the partition's policy
        # groups are unchanged (PartitionViews.epoch; a new views object is a new partition state): a call then
        # costs no pass over the partition's ids. Read-only once made; the retention check runs every call.
        self._decided: dict[tuple[bytes, Principal, Permission, Location], _Decided] = {}
        self.vectors = QueryVectors()  # the recent query texts' vectors (a repeated goal is not embedded again)
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None  # the dense path's helper, made on first use
        self._pool_lock = threading.Lock()

    def _helper(self) -> concurrent.futures.ThreadPoolExecutor:
        """One thread that runs a hybrid call's dense path beside its lexical one (:meth:`relevance`)."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="gaml-dense")
            return self._pool

    def close(self) -> None:
        """Let the helper thread go (a call after this makes another)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    # -- stage 1 and 2 -------------------------------------------------------------------------------------------

    def _partitions(self, p: Principal, grants: Sequence[Grant]) -> list[tuple[bytes, str]]:
        """(pid, access) for every partition that may hold something for ``p``: 'audience' or 'partial'."""
        owners, reader_keys = _reach(p, grants)
        out = []
        for part in self.store.partitions():
            views = self.store.views(part.pid)
            if in_audience(p, part.ref):
                out.append((part.pid, "audience"))
            elif any(key in views.readers for key in reader_keys) or any(sig[0] in owners for sig in views.groups):
                out.append((part.pid, "partial"))
        return out

    # -- stage 3 ---------------------------------------------------------------------------------------------------

    def _authorize(
        self, p: Principal, req: SearchRequest, pid: bytes, access: str, grants: Sequence[Grant]
    ) -> tuple[dict[str, str], AbstractSet[str]]:
        """The ids of one partition ``p`` may use for the request, with how (decided on views, before ranking), and
        those ids as a set. Both are read-only: in a partition of ``p``'s audience they are shared between calls."""
        views: PartitionViews = self.store.views(pid)
        allowed: dict[str, str] = {}
        if access == "audience":
            decided = self._audience(p, req, pid, views)
            expired = views.expired(req.now) & decided.ids if views.expiring else set()
            if not expired:
                return decided.allowed, decided.ids
            allowed = {i: via for i, via in decided.allowed.items() if i not in expired}
            return allowed, decided.ids - expired
        else:
            owners, reader_keys = _reach(p, grants)
            reader_ids: set[str] = set()
            for key in reader_keys:
                reader_ids |= views.readers.get(key, set())
            candidates = [views.views[i] for i in sorted(reader_ids)]
            candidates += [v for v in views if v.owner_id in owners and v.id not in reader_ids]
            for v in candidates:
                d = decide(p, v, req.purpose, req.location, req.now, grants)
                if d.allowed:
                    allowed[v.id] = d.via
        return allowed, allowed.keys()

    def _audience(self, p: Principal, req: SearchRequest, pid: bytes, views: PartitionViews) -> _Decided:
        """One decision per policy group of a partition in ``p``'s audience (without retention, which
        :meth:`_authorize` applies per asset), made once per views epoch."""
        key = (pid, p, req.purpose, req.location)
        hit = self._decided.get(key)
        if hit is not None and hit.views is views and hit.epoch == views.epoch:
            return hit
        allowed: dict[str, str] = {}
        for ids in views.groups.values():
            rep = views.views[next(iter(ids))]
            d = decide(p, _timeless(rep), req.purpose, req.location, req.now, ())
            if d.allowed:
                allowed.update(dict.fromkeys(ids, d.via))
        if len(self._decided) >= DECIDED_MAX:
            self._decided.clear()
        made = self._decided[key] = _Decided(views, views.epoch, allowed, frozenset(allowed))
        return made

    # -- the pipeline --------------------------------------------------------------------------------------------

    def authorize(self, req: SearchRequest, t: Trace | None = None) -> Authorized:
        """Stages 1–6: who asks, which partitions, what they may use (before anything is ranked), and what survives
        trust, the metadata prefilter and temporal resolution."""
        # 1. identity
        p = self.governance.principal(req.principal)
        grants = [g for g in self.governance.grants_for(p) if g.active(req.now)]
        # 2. partitions
        parts = self._partitions(p, grants)
        if t is not None:
            t.partitions = [self.store.partition_name(pid) for pid, _ in parts]
        # 3. policy: per partition, the authorized ids and how each was authorized
        decided = {pid: self._authorize(p, req, pid, access, grants) for pid, access in parts}
        auth = {pid: a for pid, (a, _) in decided.items()}
        keep: dict[bytes, AbstractSet[str]] = {pid: ids for pid, (_, ids) in decided.items()}
        self._record(t, "policy", keep)
        # 4. trust
        if req.min_trust is not TrustClass.UNVERIFIED or req.min_provenance or req.min_confidence:
            keep = self._filter(
                keep,
                lambda v: (
                    TRUST_RANK[v.trust_class] >= TRUST_RANK[req.min_trust]
                    and v.provenance_score >= req.min_provenance
                    and v.confidence_score >= req.min_confidence
                ),
            )
        self._record(t, "trust", keep)
        # 5. metadata prefilter
        if req.types or req.entities or req.segments or req.tags or req.levels or req.created_from or req.created_to:
            keep = self._filter(
                keep,
                lambda v: (
                    (not req.types or v.asset_type in req.types)
                    and (not req.entities or bool(req.entities & set(v.entities)))
                    and (not req.segments or v.segment in req.segments)
                    and (not req.tags or bool(req.tags & set(v.tags)))
                    and (not req.levels or v.level in req.levels)
                    and v.created_at >= req.created_from
                    and (not req.created_to or v.created_at < req.created_to)
                ),
            )
        self._record(t, "prefilter", keep)
        # 6. temporal resolution
        before = sum(len(ids) for ids in keep.values())
        keep = self._temporal(keep, req.as_of or req.now)
        self._record(t, "temporal", keep)
        resolved = before - sum(len(ids) for ids in keep.values())
        return Authorized(p, parts, auth, keep, resolved)

    def search(self, req: SearchRequest, *, trace: bool = False, log: bool = True) -> Response:
        t = Trace() if trace else None
        a = self.authorize(req, t)
        # 7. relevance
        rel = self.relevance(req, a.keep, max(4 * req.k, 50))
        if rel.dense_error:  # a search states its mode: it fails rather than silently answer with less
            raise GamlError(rel.dense_error)
        ranked, dense, lexical = rel.ranked, rel.dense, rel.lexical
        if t is not None:
            t.dense, t.lexical = set(dense), set(lexical)
            t.stages["relevance"] = {i for i, _, _ in ranked}
        # 8. governor
        results = self._govern(req, ranked, dense, lexical, a.auth)
        if t is not None:
            t.stages["governor"] = {r.asset.id for r in results}
        if log and results:
            self._log(a.principal, req, results)
        return Response(results, req.mode, len(a.partitions), sum(len(x) for x in a.auth.values()), t)

    def _record(self, t: Trace | None, stage: str, keep: dict[bytes, AbstractSet[str]]) -> None:
        if t is not None:
            t.stages[stage] = set().union(*keep.values())

    def _filter(self, keep: dict[bytes, AbstractSet[str]], ok: Callable[[View], bool]) -> dict[bytes, AbstractSet[str]]:
        out: dict[bytes, AbstractSet[str]] = {}
        for pid, ids in keep.items():
            views = self.store.views(pid).views
            out[pid] = {i for i in ids if ok(views[i])}
        return out

    def _temporal(self, keep: dict[bytes, AbstractSet[str]], at: int) -> dict[bytes, AbstractSet[str]]:
        """``keep`` without what was not yet known at ``at``, not (or no longer) valid then, or superseded by then:
        a partition's set is copied only when something drops out of it (the sets may be shared).

        Only the assets that can fail are looked at: the superseded ones, those with a validity window, and (for a
        time before a partition's newest asset) those created after ``at``.
        """
        gone = {i for i, by in self.store.superseded.items() if self._superseded(i, by, at)}
        out: dict[bytes, AbstractSet[str]] = {}
        for pid, ids in keep.items():
            views = self.store.views(pid)
            candidates = views.views.keys() if at < views.latest_created else views.timed
            drop = {i for i in gone if i in ids}
            for id_ in [i for i in candidates if i in ids]:
                v = views.views[id_]
                if v.created_at > at or v.valid_from > at or (v.valid_to and v.valid_to <= at):
                    drop.add(id_)
            out[pid] = ids - drop if drop else ids
        return out

    def _superseded(self, target: str, by: set[str], at: int) -> bool:
        """Whether a live asset of the target's own owner, known by ``at``, supersedes it: another principal's
        memory never silences an owner's (a claim against it is a conflict to resolve, not a supersession), and
        within a boundary neither does another member's (consensus weighs the two as one slot:
        ``Consensus.edge_counts``)."""
        t = self.store.view(target)
        if t is None:
            return False  # not a live asset: there is nothing to drop
        for other in by:
            v = self.store.view(other)
            if (
                v is not None
                and v.created_at <= at
                and v.owner_id == t.owner_id
                and (self.consensus is None or self.consensus.edge_counts(v, t))
            ):
                return True
        return False

    def query(self, text: str, who: str) -> Query:
        """The dense query of ``text`` asked by principal ``who``, for relevance calls that share it (embedded once,
        when first needed; not again while ``who``'s recent texts hold it)."""
        return Query(text, self.embedder, self.vectors, who)

    def relevance(
        self, req: SearchRequest, keep: Mapping[bytes, AbstractSet[str]], depth: int, query: Query | None = None
    ) -> Relevance:
        """Stage 7 over the ids in ``keep`` (already authorized): the ``depth`` best of each path, fused by RRF.

        A dense path that cannot run (the embedder fails, or gives a zero vector for the text) is reported in
        ``dense_error`` rather than raised, so that a caller can declare the degraded path. ``query``: the request
        text's :meth:`query`, when several calls rank for the same text (else it is embedded here).
        """
        by_pid = {pid: ids for pid, ids in keep.items() if ids}
        if not by_pid:
            return Relevance([], {}, {})
        where: dict[str, bytes] = {}
        dense: dict[str, tuple[int, float]] = {}
        lexical: dict[str, tuple[int, float]] = {}
        dense_error = dense_empty = ""
        run_dense = req.mode in ("hybrid", "dense") and bool(req.text.strip())
        run_lexical = req.mode in ("hybrid", "lexical") and bool(req.text.strip())
        if run_dense:
            if query is None:
                query = self.query(req.text, req.principal)
            elif query.text != req.text or query.who != req.principal:
                raise InvalidInput("a shared query is the request's own text, asked by its own principal")
        shared = query

        def dense_path() -> tuple[dict[str, tuple[int, float]], dict[str, bytes], str, str]:
            assert shared is not None
            q, error, empty = shared.dense()
            if q is None:
                return {}, {}, error, empty
            hits: list[Nearest] = []
            found_in: dict[str, bytes] = {}
            for pid, ids in by_pid.items():
                near = self.store.dense_search(pid, q, depth, ids)
                found_in.update(dict.fromkeys((h.id for h in near), pid))
                hits += near
            hits.sort(key=lambda h: (-h.score, h.id))
            return {h.id: (r + 1, h.score) for r, h in enumerate(hits[:depth])}, found_in, error, empty

        def lexical_path() -> tuple[dict[str, tuple[int, float]], dict[str, bytes]]:
            lex: list[tuple[str, float]] = []
            found_in: dict[str, bytes] = {}
            for pid, ids in by_pid.items():
                # Only the authorized ids are candidates, unless they are the whole partition (nothing to exclude).
                whole = len(ids) == len(self.store.views(pid))
                found = self.store.lexical.search(pid, req.text, depth, None if whole else ids)
                found_in.update(dict.fromkeys((i for i, _ in found), pid))
                lex += found
            lex.sort(key=lambda h: (-h[1], h[0]))
            return {i: (r + 1, s) for r, (i, s) in enumerate(lex[:depth])}, found_in

        if run_dense and run_lexical:
            # The two paths read disjoint parts of the store (the vector index, the postings) and write nothing the
            # other reads: the dense one runs on the helper thread (the embedder and hnswlib let go of the GIL, and
            # so does NumPy's scoring on this one) while this thread scores the postings. Its error, if any, is the
            # one raised, as when the paths ran one after the other; this call returns only once both have ended.
            pending = self._helper().submit(dense_path)
            try:
                lexical, lexical_where = lexical_path()
            except Exception:
                pending.result()  # waited for, and raised instead if the dense path failed
                raise
            dense, where, dense_error, dense_empty = pending.result()
            where.update(lexical_where)
        elif run_dense:
            dense, where, dense_error, dense_empty = dense_path()
        elif run_lexical:
            lexical, where = lexical_path()
        fused: dict[str, float] = {}
        for table in (dense, lexical):
            for id_, (rank, _) in table.items():
                fused[id_] = fused.get(id_, 0.0) + 1.0 / (RRF_K + rank)
        ranked = sorted(((i, s, where[i]) for i, s in fused.items()), key=lambda r: (-r[1], r[0]))
        return Relevance(ranked, dense, lexical, dense_error, dense_empty)

    def _govern(
        self,
        req: SearchRequest,
        ranked: list[tuple[str, float, bytes]],
        dense: dict[str, tuple[int, float]],
        lexical: dict[str, tuple[int, float]],
        auth: dict[bytes, dict[str, str]],
    ) -> list[Result]:
        boosted = []
        for id_, base, pid in ranked:
            v = self.store.views(pid).views[id_]
            boosts: dict[str, float] = {}
            score = base
            if req.recency_half_life_s:
                age_s = max(0.0, (req.now - v.created_at) / 1e6)
                boosts["recency"] = math.pow(0.5, age_s / req.recency_half_life_s)
                score *= 1.0 + boosts["recency"]
            if req.trust_boost:
                boosts["trust"] = req.trust_boost * TRUST_RANK[v.trust_class] / 2
                score *= 1.0 + boosts["trust"]
            boosted.append((score, id_, boosts, v, pid))
        boosted.sort(key=lambda b: (-b[0], b[1]))
        ruled_out: set[str] = set()  # what consensus leaves out (a contested slot's losers, unadmitted claims)
        while True:
            chosen: list[tuple[float, str, dict[str, float], View, bytes]] = []
            per_segment: dict[str, int] = {}
            for b in boosted:
                seg = b[3].segment
                if b[1] in ruled_out or (req.per_segment_cap and per_segment.get(seg, 0) >= req.per_segment_cap):
                    continue
                per_segment[seg] = per_segment.get(seg, 0) + 1
                chosen.append(b)
                if len(chosen) == req.k:
                    break
            assets = self.store.get_many([c[1] for c in chosen])
            if self.consensus is None:
                break
            res = self.consensus.resolve(
                [a for a in assets if a is not None],
                req.now,
                lambda id_: any(id_ in m for m in auth.values()),
                gate=False,  # a search shows a new member's memory; only a contested slot's losers leave it
            )
            new = set(res.dropped) - ruled_out
            if not new:
                break
            ruled_out |= new
        out = []
        for (score, id_, boosts, _, pid), asset in zip(chosen, assets, strict=True):
            if asset is None:  # pragma: no cover - views follow the records; a race would be a bug
                raise GamlError(f"asset {id_} vanished between authorization and reading")
            d, lx = dense.get(id_), lexical.get(id_)
            path = "both" if d and lx else "dense" if d else "lexical"
            out.append(Result(asset, score, path, d, lx, boosts, auth[pid][id_], self.store.partition_name(pid)))
        return out

    def _log(self, p: Principal, req: SearchRequest, results: Sequence[Result]) -> None:
        items = [
            (r.asset.owner_id, {"id": r.asset.id, "level": r.asset.level.value, "path": r.path, "via": r.via})
            for r in results
        ]
        self.governance.log_read(p, req.purpose, req.location, req.now, "search", items)


def _reach(p: Principal, grants: Sequence[Grant]) -> tuple[set[str], set[str]]:
    """Whose memory ``p`` may reach beyond its audience partitions (grantors, and its own memory in partitions of
    other boundaries), and the reader-list keys that name it (``p:<id>``, ``r:<role>``, as in node.views)."""
    return {g.owner for g in grants} | {p.user}, {f"p:{p.id}", f"p:{p.user}", *(f"r:{r}" for r in p.roles)}


def _timeless(v: View) -> View:
    """A view without retention: retention is applied per asset, separately from the group's decision."""
    return v._replace(retention_policy=Retention())
