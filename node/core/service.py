"""``MemoryService``: what a node does for an authenticated caller. Pure: time comes in as ``now``.

The gRPC servicer (``node/serve/servicer.py``) only translates protobuf to these calls and back; the daemon
(``node/serve/daemon.py``) authenticates the caller and runs each call on the node's core thread. Identity is an
argument here, already established by the transport, never a field of the request:

- a caller writes, ingests, forgets, grants and reads the access log of **its own user's** memory only (an agent acting
  on behalf of a user acts as that user);
- every read states its purpose and location and goes through the governed paths (``Node.read``, the retriever's
  stages, the hydrator), which log it in the owners' access logs.

``Limits`` holds the per-principal rate and size limits, and ``RateLimiter`` a token bucket per principal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final, TypeVar

import orjson

from gaml.node.core.access.retrieve import Result, SearchRequest
from gaml.node.core.consensus import Consensus, override_payload
from gaml.node.core.errors import RateLimited
from gaml.node.core.hydrate import Hydration, HydrationRequest, Hydrator, Segment, with_peers
from gaml.node.core.memory.ingest import IngestOptions, Ingestor
from gaml.node.core.memory.ladder import ErasureReceipt, Ladder
from gaml.node.core.node import Node
from gaml.node.core.text.parsers import FORMATS, parse
from gaml.node.core.text.records import Source
from gaml.node.core.tokens import TokenCounter
from gaml.policy.access import Grant, Location, Permission, Principal, PrincipalKind, in_audience, inherit
from gaml.policy.errors import (
    Deleted,
    GamlError,
    InvalidInput,
    NotFound,
    PolicyError,
    StoreError,
    UnknownPrincipal,
)
from gaml.policy.model import (
    Asset,
    AssetType,
    Creator,
    Level,
    PrivacyScope,
    ReplicationPolicy,
    content_id,
    item_id,
)
from gaml.policy.partitions import PartitionRef

T = TypeVar("T")
MAX_SEARCH_K: Final = 1000
MAX_PEER_DEADLINE_MS: Final = 10_000
MAX_PEER_FAN_OUT: Final = 16
MAX_PEER_K: Final = 64  # crdt.wire.MAX_ASK_K
MAX_SESSION_CHARS: Final = 200
DEFAULT_LIST_LIMIT: Final = 1000
MAX_CURATE_SOURCES: Final = 10_000
MAX_LIST_LIMIT: Final = 100_000
MAX_TURNS: Final = 64
TURN_ROLES: Final = ("user", "assistant", "system", "tool")
NO_PEERS_HERE: Final = "no daemon runs on this store: only a running node (`gaml run`) has peers to ask"


@dataclasses.dataclass(frozen=True, slots=True)
class PeerRead:
    """Ask peers too (a peer read): the members of the boundaries that hold the caller's memory (or the named ones)
    are asked for their ``k`` best candidates, and answers that arrive within ``deadline_ms`` are verified and stored
    before the read runs. What they did is declared (a hydration's receipt, ``peers``)."""

    deadline_ms: int = 500
    fan_out: int = 3
    k: int = 16
    boundaries: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, top in (("deadline_ms", MAX_PEER_DEADLINE_MS), ("fan_out", MAX_PEER_FAN_OUT), ("k", MAX_PEER_K)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= top:
                raise InvalidInput(f"a peer read's {name} is in [1, {top}], got {v!r}")
        if not isinstance(self.boundaries, tuple) or not all(isinstance(b, str) and b for b in self.boundaries):
            raise InvalidInput("a peer read's boundaries are names")

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "boundaries": list(self.boundaries)}


def not_asked(why: str) -> dict[str, Any]:
    """The peer-read report of a read that could ask no peer, and why."""
    return {"boundaries": [], "asked": [], "answered": [], "timed_out": [], "why": why}


MAX_LOG_LIMIT: Final = 10_000
DEFAULT_LOG_LIMIT: Final = 100
MAX_SLOT_CHARS: Final = 512  # a slot key (explicit ones carry a subject and an attribute)
MAX_REASON_CHARS: Final = 2000  # an override's reason
RESERVED_TYPES: Final = frozenset({AssetType.CONSENSUS_RECORD})  # written by the node only (settle, override)


@dataclasses.dataclass(frozen=True, slots=True)
class Limit:
    """One principal's limits: a token bucket of calls, and the largest request and ingest stream in bytes."""

    calls_per_second: float = 200.0
    burst: int = 400
    max_request_bytes: int = 8 << 20
    max_ingest_bytes: int = 64 << 20

    def __post_init__(self) -> None:
        if not (self.calls_per_second > 0 and self.burst >= 1):
            raise InvalidInput("a rate limit needs calls_per_second > 0 and burst >= 1")
        if self.max_request_bytes < 1024 or self.max_ingest_bytes < 1024:
            raise InvalidInput("size limits are at least 1024 bytes")

    @classmethod
    def from_json(cls, d: Mapping[str, Any], base: Limit | None = None) -> Limit:
        if not isinstance(d, Mapping):
            raise InvalidInput(f"limits are an object of settings, got {type(d).__name__}")
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise InvalidInput(f"unknown limit settings: {', '.join(sorted(unknown))}")
        for key, value in d.items():
            whole = key != "calls_per_second"
            if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) or not value > 0:
                kind = "a positive whole number" if whole else "a positive number"
                raise InvalidInput(f"the limit {key!r} is {value!r}; it is {kind}")
        return dataclasses.replace(base or cls(), **d)


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """The default limit and per-principal overrides.

    ``config.toml``: ``{"limits": {"calls_per_second": …, "principals": {id: {…}}}}``.
    """

    default: Limit = Limit()
    principals: Mapping[str, Limit] = dataclasses.field(default_factory=dict)

    def of(self, principal: str) -> Limit:
        return self.principals.get(principal, self.default)

    @property
    def largest_request_bytes(self) -> int:
        """What the transport must accept before a per-principal check can refuse it."""
        return max([self.default.max_request_bytes, *(p.max_request_bytes for p in self.principals.values())])

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Limits:
        d = dict(d)
        per = d.pop("principals", {}) or {}
        if not isinstance(per, Mapping):
            raise InvalidInput("limits.principals is an object of principal id -> limits")
        default = Limit.from_json(d)
        return cls(default, {str(k): Limit.from_json(v, default) for k, v in per.items()})


class RateLimiter:
    """A token bucket per principal, refilled at its ``calls_per_second`` up to its ``burst``. Bounded: a bucket is
    dropped once it has been full for a while (a full bucket carries no state)."""

    MAX_BUCKETS: Final = 100_000

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._buckets: dict[str, tuple[float, float]] = {}  # principal -> (tokens, at seconds)

    def take(self, principal: str, now_s: float) -> None:
        """Spend one call of ``principal``'s bucket, or raise :class:`RateLimited`."""
        lim = self.limits.of(principal)
        tokens, at = self._buckets.get(principal, (float(lim.burst), now_s))
        tokens = min(float(lim.burst), tokens + max(0.0, now_s - at) * lim.calls_per_second)
        if tokens < 1.0:
            self._buckets[principal] = (tokens, now_s)
            wait = (1.0 - tokens) / lim.calls_per_second
            raise RateLimited(
                f"{principal} is over its rate limit ({lim.calls_per_second:g} calls/s, burst {lim.burst}); "
                f"retry in {wait:.3f} s",
                wait,
            )
        self._buckets[principal] = (tokens - 1.0, now_s)
        if len(self._buckets) > self.MAX_BUCKETS:
            self._buckets = {
                p: (t, a)
                for p, (t, a) in self._buckets.items()
                if t + (now_s - a) * self.limits.of(p).calls_per_second < self.limits.of(p).burst
            }


@dataclasses.dataclass(frozen=True, slots=True)
class IngestFile:
    """One file of an ingest call: its name, bytes and settings.

    ``name`` is what the caller calls it (an error names the file by it, and its extension helps detect the format);
    ``origin``, where it lies (an absolute path), from which its sources' ids derive ("" : the name). ``data`` is the
    bytes, or a function that yields them in pieces, read as they are used (a transport sends them a piece at a
    time)."""

    name: str
    data: bytes | Callable[[], Iterable[bytes]]
    format: str = ""
    tenant: str = ""
    segment: str = ""
    scope: PrivacyScope = PrivacyScope.USER_PRIVATE
    item_budget: int = 5000
    replication: ReplicationPolicy = ReplicationPolicy.NONE
    origin: str = ""

    def read(self) -> bytes:
        """The whole file."""
        return self.data if isinstance(self.data, bytes) else b"".join(self.data())

    def __post_init__(self) -> None:
        if not self.name or len(self.name) > 4096 or "\x00" in self.name:
            raise InvalidInput("an ingested file needs a name (at most 4096 characters, no NUL)")
        if self.format and self.format not in FORMATS:
            raise InvalidInput(f"unknown format {self.format!r}: use one of {', '.join(FORMATS)}")
        if not 0 < self.item_budget <= 1_000_000:
            raise InvalidInput(f"item_budget must be in [1, 1000000], got {self.item_budget}")


# ``progress(stage, total)``: a context around one stage of long work, yielding something told ``update(n)``.
Progress = Callable[[str, int], AbstractContextManager[Any]]


class _Quiet:
    def update(self, n: int) -> None:
        pass


@contextlib.contextmanager
def _no_progress(stage: str, total: int) -> Iterator[_Quiet]:
    yield _Quiet()


def numbered(fn: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
    """``fn`` of each item of a call, in order; an error names the item by its place (``asset #3: …``)."""
    out = []
    for i, item in enumerate(items):
        try:
            out.append(fn(item))
        except GamlError as e:
            raise type(e)(f"asset #{i + 1}: {e}") from None
    return out


def check_turns(turns: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The turns of a remember call as ``{"role", "content"}``; :class:`InvalidInput` naming the first bad one."""
    if isinstance(turns, str | bytes) or not isinstance(turns, Sequence) or not turns:
        raise InvalidInput("remember needs at least one turn: {role, content}")
    if len(turns) > MAX_TURNS:
        raise InvalidInput(f"remember takes at most {MAX_TURNS} turns per call, got {len(turns)}")
    out = []
    for i, t in enumerate(turns):
        if not isinstance(t, Mapping):
            raise InvalidInput(f"turn #{i + 1} is not an object with role and content")
        role, content = t.get("role", "user"), t.get("content")
        if role not in TURN_ROLES:
            raise InvalidInput(f"turn #{i + 1}: role {role!r} is not one of {', '.join(TURN_ROLES)}")
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput(f"turn #{i + 1}: content must be non-empty text")
        extra = set(t) - {"role", "content"}
        if extra:
            raise InvalidInput(f"turn #{i + 1}: unknown field(s) {', '.join(sorted(extra))} (a turn is role, content)")
        out.append({"role": role, "content": content})
    return out


def forced_format_note(fmt: str) -> str:
    """What a parse error adds when the caller named the format (a front door may say how it was named)."""
    return f" (read as {fmt}, the format given; without one the format is detected)"


def _parse(f: IngestFile) -> list[Source]:
    """The sources of one file; a parse error names the file as the caller named it, and a format it was told."""
    base = f.name.rsplit("/", 1)[-1]
    try:
        return parse(f.read(), base, f.format or None, origin=f.origin or f.name)
    except InvalidInput as e:
        msg = str(e).removeprefix(f"{base}: ")  # the parser names the file by its base name
        if f.format:
            msg += forced_format_note(f.format)
        raise InvalidInput(f"{f.name}: {msg}") from None


class MemoryService:
    """The node's calls for an authenticated principal. One instance per node; not thread-safe (one core thread)."""

    def __init__(
        self,
        node: Node,
        ingestor: Ingestor | None,
        ladder: Ladder | None,
        counter: Callable[[str], TokenCounter],
        *,
        layers: Callable[[], tuple[Ingestor, Ladder]] | None = None,
    ) -> None:
        """``layers``, instead of an ingestor and a ladder: builds them the first time a call needs them (ingest,
        hydrate, forget), so the calls that do not (get, search, grants, status) need nothing of their settings."""
        if (ingestor is None or ladder is None) and layers is None:
            raise ValueError("a MemoryService needs an ingestor and a ladder, or layers to build them")
        self.node = node
        self._layers = (ingestor, ladder) if ingestor is not None and ladder is not None else None
        self._make_layers = layers
        self._counter = counter
        self._hydrators: dict[str, Hydrator] = {}
        self._consensus: Consensus | None = None

    @property
    def consensus(self) -> Consensus | None:
        """Conflicts among what a boundary's members claim, resolved before search's selection and before hydration
        (node.core.consensus); set by whoever runs replication (the daemon, the CLI for a node in a boundary). None:
        all memory is this node's own."""
        return self._consensus

    @consensus.setter
    def consensus(self, c: Consensus | None) -> None:
        self._consensus = c
        self.node.retriever.consensus = c
        self._hydrators.clear()

    def _built(self) -> tuple[Ingestor, Ladder]:
        if self._layers is None:
            assert self._make_layers is not None
            self._layers = self._make_layers()
        return self._layers

    @property
    def ingestor(self) -> Ingestor:
        return self._built()[0]

    @property
    def ladder(self) -> Ladder:
        return self._built()[1]

    # -- identity ---------------------------------------------------------------------------------------------------

    def principal(self, id_: str) -> Principal:
        """The registered principal an authenticated identity names (``UnknownPrincipal`` if none)."""
        return self.node.governance.principal(id_)

    def ensure_user(self, id_: str) -> Principal:
        """The principal ``id_``, registered as a user first if the node does not know it.

        Only authenticated identities reach here: the node's local principal, or the principal of a client certificate
        the node's own CA issued (issuing it was the administrator's decision). A principal registered with a kind,
        roles or an ``on_behalf_of`` keeps them."""
        try:
            return self.principal(id_)
        except UnknownPrincipal:
            return self.node.governance.add_principal(Principal(id_, PrincipalKind.USER))

    # -- writes -----------------------------------------------------------------------------------------------------

    def put(
        self, caller: Principal, drafts: Sequence[Mapping[str, Any]], now: int, *, check_only: bool = False
    ) -> list[str]:
        """Store drafts of the caller's user's memory (the owner by default), as one atomic batch, each write
        authorized first (:meth:`Node.authorize_writes`): a refusal writes nothing. ``check_only``: build and
        authorize them, write nothing, and return the ids they would get."""
        built = self._build(drafts, now, caller.user)
        if check_only:
            self.node.authorize_writes(caller, built)
            return [a.id for a in built]
        return self.node.put(built, now, by=caller)

    def _build(self, drafts: Sequence[Mapping[str, Any]], now: int, owner: str = "") -> list[Asset]:
        """The assets of a put's drafts (``owner``: the owner of a draft that names none); a bad one is named by its
        place in the call."""
        if not drafts:
            raise InvalidInput("a put needs at least one asset")
        built = numbered(lambda d: self.node.build({**d, "owner_id": d.get("owner_id") or owner}, now), drafts)
        for i, a in enumerate(built):
            if a.asset_type in RESERVED_TYPES:
                raise PolicyError(
                    f"asset #{i + 1}: {a.asset_type.value} assets are the node's own (its consensus records); choose a "
                    "contested slot's value with `gaml conflicts --slot SLOT --choose VALUE` (the Override call)"
                )
        return built

    def put_as_owners(self, drafts: Sequence[Mapping[str, Any]], now: int, *, check_only: bool = False) -> list[str]:
        """:meth:`put` for the holder of the home's keys, in-process only (``gaml put`` on the store without
        ``--as``): each asset is authorized as written by its owner, so memory still goes only where its owner may
        put it; ownerless memory of no tenant is the holder's to publish. No transport reaches this."""
        built = self._build(drafts, now)
        for i, a in enumerate(built):
            if a.owner_id:
                writer = self.node.writer(a.owner_id)[0]
            elif a.tenant_scope:
                raise PolicyError(
                    f"asset #{i + 1} has no owner but tenant {a.tenant_scope}: name who writes it with --as"
                )
            else:
                continue
            try:
                self.node.authorize_writes(writer, [a])
            except PolicyError as e:
                raise PolicyError(f"asset #{i + 1}: {e}") from None
        if check_only:
            return [a.id for a in built]
        return self.node.put(built, now)

    def ingest(
        self,
        caller: Principal,
        files: Sequence[IngestFile],
        now: int,
        *,
        curate: bool = True,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Parse and ingest files into the caller's user's journal, then curate what changed (unless told not to).

        Files are parsed before anything is written, so a malformed one refuses the whole call and writes nothing.
        ``progress(stage, total)``, if given, is entered around each stage ("ingest" over records, "curate" over
        sources) and what it yields is told ``update(n)`` as the stage advances."""
        if not files:
            raise InvalidInput("an ingest needs at least one file")
        out: dict[str, Any] = {"files": len(files)}
        total: dict[str, Any] = {}
        parsed = [(f, _parse(f)) for f in files]
        options = [
            IngestOptions(
                owner=caller.user,
                tenant=f.tenant,
                segment=f.segment,
                scope=f.scope,
                replication=f.replication,
                item_budget=f.item_budget,
            )
            for f in files
        ]
        self.node.authorize_writes(caller, [o.target() for o in options])
        self.ingestor.check([(sources, opts) for (_, sources), opts in zip(parsed, options, strict=True)])
        stage = progress or _no_progress
        records = sum(len(s.records) for _, sources in parsed for s in sources)
        with stage("ingest", records) as bar:
            reports = [
                self.ingestor.ingest(sources, opts, now, progress=bar.update).to_json()
                for (_, sources), opts in zip(parsed, options, strict=True)
            ]
        for report in reports:
            for k, v in report.items():
                if isinstance(v, int):
                    total[k] = total.get(k, 0) + v
                elif isinstance(v, dict):
                    acc = total.setdefault(k, {})
                    for kk, vv in v.items():
                        acc[kk] = acc.get(kk, 0) + vv
                else:
                    total.setdefault(k, []).extend(x for x in v if x not in total.get(k, []))
        out.update(total)
        dirty = out.get("dirty", [])
        if curate and dirty:
            with stage("curate", len(dirty)) as bar:
                out["curation"] = self.ladder.curate(now, dirty, progress=bar.update).to_json()
        return out

    def remember(
        self,
        caller: Principal,
        turns: Sequence[Mapping[str, Any]],
        now: int,
        *,
        session: str = "",
        curate: bool = False,
    ) -> dict[str, Any]:
        """Ingest one exchange — a note, a chat turn, a user message with the reply it got — into the caller's
        journal, as a source of its own (``chat:remember:<session>:<hash>``), through the same path as a file:
        envelopes stripped, privacy rules, facts extracted, curation. ``turns``: ``{"role", "content"}`` objects
        (roles user, assistant, system, tool; ``content`` a string). Returns the source id, the ids of the items kept
        and the ingest report (counts)."""
        checked = check_turns(turns)
        if len(session) > MAX_SESSION_CHARS or any(c in session for c in "\x00\n"):
            raise InvalidInput(f"a session name is at most {MAX_SESSION_CHARS} characters on one line")
        body = orjson.dumps([caller.user, now, checked], option=orjson.OPT_SORT_KEYS)
        source = f"remember:{session or 'notes'}:{hashlib.blake2b(body, digest_size=8).hexdigest()}"
        doc = {
            "id": source,
            "title": session or "remembered",
            "messages": [{**t, "timestamp": now / 1e6} for t in checked],
        }
        report = self.ingest(caller, [IngestFile("remember", orjson.dumps(doc), format="chat")], now, curate=curate)
        source_id = f"chat:{source}"
        mark = self.ingestor.watermark(source_id) or {}
        report["source"] = source_id
        report["ids"] = [item_id(source_id, pos) for pos in mark.get("items", [])]
        return report

    def list_own(
        self,
        caller: Principal,
        now: int,
        *,
        types: Sequence[AssetType] = (),
        since: int = 0,
        limit: int = DEFAULT_LIST_LIMIT,
    ) -> list[Asset]:
        """The caller's user's own live memory, the newest ``limit`` oldest first: what it stored, remembered and
        ingested, and what was derived from it. Its own memory: no grant is needed, and nobody else's is listed."""
        if not 0 < limit <= MAX_LIST_LIMIT:
            raise InvalidInput(f"limit must be in [1, {MAX_LIST_LIMIT}], got {limit}")
        if since < 0:
            raise InvalidInput(f"since is a time in microseconds, not {since}")
        wanted = set(types)
        gone = set(self.node.store.expired(now))  # past retention: search and get refuse them, and so does a list
        ids = [i for i in self.node.store.list_ids("owner", caller.user) if i not in gone]
        out = []
        for a in self.node.store.get_many(ids) if ids else []:
            if a is not None and a.created_at >= since and (not wanted or a.asset_type in wanted):
                out.append(a)
        out.sort(key=lambda a: (a.created_at, a.id))
        return out[-limit:]

    # -- the node's administration (its own user on its socket, or the holder of its keys on the store) ------------

    def principals(self) -> list[Principal]:
        return self.node.governance.principals()

    def add_principal(self, principal: Principal) -> Principal:
        return self.node.governance.add_principal(principal)

    def sources(self) -> list[dict[str, Any]]:
        """The journal's sources with their watermarks: counts, never text."""
        return [
            {
                "source": w["source_id"],
                "format": w["format"],
                "title": w.get("title", ""),
                "records": w["records"],
                "items": len(w.get("items", [])),
                "gated": len(w.get("gated", [])),
                "curation_pending": bool(w.get("dirty")),
            }
            for w in self.ingestor.watermarks()
        ]

    def curate(self, now: int, sources: Sequence[str] = (), progress: Progress | None = None) -> dict[str, Any]:
        if len(sources) > MAX_CURATE_SOURCES:
            raise InvalidInput(f"curate takes at most {MAX_CURATE_SOURCES} sources per call, got {len(sources)}")
        for s in sources:  # every one named is checked before the first is curated: a refusal writes nothing
            if not isinstance(s, str) or not s or len(s) > 4096 or self.ingestor.watermark(s) is None:
                raise NotFound(f"no source {s!r} was ingested (`gaml sources` lists them)")
        todo = list(sources) or self.ladder.pending()
        with (progress or _no_progress)("curate", len(todo)) as bar:
            return self.ladder.curate(now, todo, progress=bar.update).to_json()

    def maintain(self, now: int) -> dict[str, Any]:
        """Retention expiry, L0 retirement, pending curation and tiers, as the daemon's upkeep does them."""
        expired = self.ladder.expire(now)
        retired = self.ladder.retire(now)
        curated = self.ladder.curate(now).to_json()
        tiers = self.ladder.retier(now)
        return {"expired": len(expired), "retired": retired, "curation": curated, "tiers": tiers}

    def forget(self, caller: Principal, id_: str, now: int) -> ErasureReceipt:
        return self.ladder.forget(id_, now, by=caller.id)

    def grant(
        self,
        caller: Principal,
        grantee: str,
        max_level: Level,
        now: int,
        *,
        segments: Sequence[str] = (),
        tags: Sequence[str] = (),
        time_from: int = 0,
        time_to: int = 0,
        expires_at: int = 0,
    ) -> Grant:
        g = Grant(
            caller.user, grantee, max_level, now, frozenset(segments), frozenset(tags), time_from, time_to, expires_at
        )
        return self.node.governance.grant(g)

    def revoke(self, caller: Principal, grant_id: str, now: int) -> Grant:
        return self.node.governance.revoke(grant_id, caller, now)

    # -- reads ------------------------------------------------------------------------------------------------------

    def get(
        self,
        caller: Principal,
        id_: str,
        purpose: Permission,
        location: Location,
        now: int,
        *,
        include_deleted: bool = False,
    ) -> Asset:
        """An asset the caller may read. ``include_deleted``: once one of the caller's own assets is deleted, its
        tombstone (no payload); anyone else's stays ``Deleted``."""
        try:
            return self.node.read(id_, caller.id, now, purpose=purpose, location=location)
        except Deleted:
            if not include_deleted:
                raise
            tomb = self.node.store.get(id_, include_deleted=True)
            if tomb.owner_id != caller.user:
                raise
            return tomb

    def search(
        self,
        caller: Principal,
        text: str,
        now: int,
        *,
        k: int = 10,
        purpose: Permission = Permission.READ,
        location: Location = Location.THIS_DEVICE,
        mode: str = "hybrid",
        as_of: int = 0,
        types: Sequence[AssetType] = (),
        segments: Sequence[str] = (),
        tags: Sequence[str] = (),
        entities: Sequence[str] = (),
    ) -> list[Result]:
        if not 0 < k <= MAX_SEARCH_K:
            raise InvalidInput(f"k must be in [1, {MAX_SEARCH_K}], got {k}")
        return self.node.search(
            text,
            caller.id,
            now,
            k=k,
            purpose=purpose,
            location=location,
            mode=mode,
            as_of=as_of,
            types=frozenset(AssetType.parse(x) for x in types),
            segments=frozenset(segments),
            tags=frozenset(tags),
            entities=frozenset(entities),
        )

    def hydrate(
        self,
        caller: Principal,
        goal: str,
        budget: int,
        now: int,
        *,
        plane: Sequence[Segment] = (),
        purpose: Permission = Permission.CONTEXT,
        location: Location = Location.THIS_DEVICE,
        mode: str = "auto",
        as_of: int = 0,
        counter: str = "heuristic",
        profile: int | None = None,
        peers: Mapping[str, Any] | None = None,
    ) -> Hydration:
        """``peers``: the report of the peer read that ran before this call (the daemon's), declared in the
        receipt."""
        req = HydrationRequest(
            goal,
            caller.id,
            now,
            budget,
            tuple(plane),
            purpose=purpose,
            location=location,
            mode=mode,
            as_of=as_of,
            profile=profile,
        )
        hydrator = self._hydrators.get(counter)
        if hydrator is None:
            hydrator = Hydrator(
                self.node,
                self._counter(counter),
                on_read=self.ladder.visit,
                tiers=self.ladder.policy,
                consensus=self.consensus,
            )
            self._hydrators[counter] = hydrator
        out = hydrator.hydrate(req)
        return out if peers is None else with_peers(out, peers)

    def grants(self, caller: Principal) -> tuple[list[Grant], list[Grant]]:
        """(grants of the caller's memory, grants the caller holds)."""
        gov = self.node.governance
        return gov.grants(owner=caller.user), gov.grants_for(caller)

    def all_grants(self) -> list[Grant]:
        """Every grant of the node: the view of the holder of its keys, in-process only (`gaml grants` on the store)."""
        return self.node.governance.grants()

    def access_log(self, caller: Principal, limit: int = DEFAULT_LOG_LIMIT) -> list[dict[str, Any]]:
        if not 0 < limit <= MAX_LOG_LIMIT:
            raise InvalidInput(f"limit must be in [1, {MAX_LOG_LIMIT}], got {limit}")
        return self.node.governance.access_log(caller.user, caller, limit=limit)

    # -- consensus (node.core.consensus) -----------------------------------------------------------------------------

    def _allowed(self, caller: Principal, now: int, purpose: Permission, location: Location) -> Callable[[str], bool]:
        """Whether the caller may use an asset for the intent now: the retriever's stages 1–6, decided once."""
        keep = self.node.retriever.authorize(SearchRequest("", caller.id, purpose, now, location=location)).keep
        return lambda id_: any(id_ in ids for ids in keep.values())

    def _readable(self, caller: Principal, now: int) -> Callable[[str], bool]:
        """Whether policy lets the caller read an asset (stage 3, before trust, filters and time narrow it)."""
        auth = self.node.retriever.authorize(SearchRequest("", caller.id, Permission.READ, now)).auth
        return lambda id_: any(id_ in ids for ids in auth.values())

    def conflicts(
        self,
        caller: Principal,
        now: int,
        *,
        slot: str = "",
        purpose: Permission = Permission.READ,
        location: Location = Location.THIS_DEVICE,
    ) -> list[dict[str, Any]]:
        """The contested slots among the memory the caller may use, each as the record a frame of the caller's would
        carry (candidates, their values, sources, weights and scores, the winner, an override the caller may read);
        ``slot``: that one only. Empty on a node in no boundary. Logged in the candidates' owners' access logs, as a
        search is."""
        if len(slot) > MAX_SLOT_CHARS:
            raise InvalidInput(f"a slot key is at most {MAX_SLOT_CHARS} characters")
        if self.consensus is None:
            return []
        records = self.consensus.conflicts(now, self._allowed(caller, now, purpose, location), slot)
        ids = sorted({c["id"] for r in records for c in r["candidates"]})
        items = []
        for a in self.node.store.get_many(ids):
            if a is not None:
                items.append((a.owner_id, {"id": a.id, "level": a.level.value, "via": "conflicts"}))
        self.node.governance.log_read(caller, purpose, location, now, "conflicts", items)
        return records

    def reputation(self, caller: Principal, now: int) -> list[dict[str, Any]]:
        """The ledger of each boundary of which the caller may read some memory: members, weights, admission (and
        the ids of overrides and ignored evidence the caller may read)."""
        c = self.consensus
        if c is None:
            return []
        allowed = self._allowed(caller, now, Permission.READ, Location.THIS_DEVICE)
        return c.reputation(now, lambda bid: any(allowed(i) for i in c.provenance.asset_ids(bid)), allowed)

    def override(self, caller: Principal, slot: str, choose: str, now: int, *, reason: str = "") -> dict[str, Any]:
        """A person's choice of a contested slot's value (``choose``: a value as the slot's record names it, or a
        candidate's id): written as a signed ``consensus_record`` naming who chose, when and why (derived from the
        candidates, so it inherits their most restrictive policy, and replicated inside their boundary), authorized
        as the caller's own write: the caller's user must own one of the candidates, and the caller must be allowed
        to read every one of them. It decides the slot on this node from now on (on every member when this node is
        the boundary's founder). Returns the override's id and the slot's record as the caller now sees it."""
        if not slot or len(slot) > MAX_SLOT_CHARS:
            raise InvalidInput(f"name the slot (`gaml conflicts` lists them), at most {MAX_SLOT_CHARS} characters")
        if not choose:
            raise InvalidInput("name the value to choose, or the id of a candidate that asserts it")
        if len(reason) > MAX_REASON_CHARS:
            raise InvalidInput(f"a reason is at most {MAX_REASON_CHARS} characters")
        if self.consensus is None:
            raise InvalidInput("this node is in no boundary: it has no contested slot to override")
        missing = NotFound(f"no contested slot {slot!r} on this node (`gaml conflicts` lists them)")
        readable = self._readable(caller, now)
        choices, readable_slot = [], False
        for bid, ledger in self.consensus.slot_boundaries(slot, now):
            group = ledger.slots[slot]
            if not all(readable(c.id) for c in group):
                continue  # naming what it holds would tell what the caller may not read: answered as missing
            readable_slot = True
            value = {c.id: c.value for c in group}.get(choose, choose)
            if value in {c.value for c in group}:
                choices.append((bid, group, value))
        if not choices:
            if readable_slot:
                raise InvalidInput(
                    f"no candidate of slot {slot!r} asserts {choose!r}; choose a value or an id it lists"
                )
            raise missing
        if len(choices) > 1:
            raise InvalidInput(f"slot {slot!r} is contested in several boundaries: choose by a candidate's id")
        ((bid, group, value),) = choices
        sources = [self.node.store.get(c.id) for c in group]
        if caller.user not in {a.owner_id for a in sources}:
            raise PolicyError(f"{caller.id} may choose only in a slot that holds its own user's memory")
        payload = override_payload(bid, slot, value, caller.id, now, reason)  # no contradicts edge (see record_assets)
        policy = inherit(sources, owner=caller.user)
        asset = Asset(
            id=content_id(AssetType.CONSENSUS_RECORD, policy["owner_id"], policy["tenant_scope"], payload),
            asset_type=AssetType.CONSENSUS_RECORD,
            payload=payload,
            created_at=now,
            updated_at=now,
            creator=Creator.USER,
            **policy,
        )
        self.node.put([asset], now, by=caller)
        self.consensus.wrote(now)
        records = self.consensus.conflicts(now, self._allowed(caller, now, Permission.READ, Location.THIS_DEVICE), slot)
        mine = [r for r in records if r["boundary"] == bid.hex()]
        return {"override": asset.id, "record": mine[0] if mine else {}}

    def settle_consensus(self, now: int) -> int:
        """Write the consensus records that are missing or whose decision changed (replication then carries them),
        each on its own (one that cannot be written keeps no other out); how many were written. The daemon runs it on
        its replication ticks."""
        if self.consensus is None:
            return 0
        written = 0
        for asset in self.consensus.record_assets(now):
            try:
                self.node.put([asset], now)
            except StoreError:
                raise
            except GamlError:
                continue  # an id erased or held by another asset meanwhile: this record is not written
            written += 1
        if written:
            self.consensus.wrote(now)
        return written

    def status(self, caller: Principal | None) -> dict[str, Any]:
        """The node's side of :class:`gaml.node.core.api.Status` (the transport adds the caller and its own).

        The partitions listed are the caller's own audience — its owner's, its tenants', the public ones — so that
        status names no other owner or tenant, nor how much they keep; ``None`` (the holder of the home's keys, on
        the store) sees every partition."""
        s = self.node.store.stats()

        visible = {
            name: part
            for name, part in s.partitions.items()
            if caller is None or in_audience(caller, PartitionRef.parse(name))
        }
        return {
            "node_id": self.node.node_id,
            "embedder": self.node.embedder.id,
            "assets": s.assets,
            "tombstones": s.tombstones,
            "journal_seq": s.journal_seq,
            "indexed": s.indexed,
            "pending": s.pending,
            "partitions": {name: dict(p) for name, p in sorted(visible.items())},
            "rebuilt_indexes": s.rebuilt_indexes,
            "replayed_events": s.replayed_events,
        }


__all__ = [
    "IngestFile",
    "Limit",
    "Limits",
    "MemoryService",
    "RateLimiter",
]
