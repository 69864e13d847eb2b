"""The gRPC ``gaml.v1.Memory`` servicer: protobuf in, a call to :class:`node.service.MemoryService`, protobuf out.

It only translates. Authentication, limits, deadlines and the core thread belong to the runtime the daemon passes in
(:class:`Runtime`); errors become gRPC statuses here (:func:`status_of`), each with a ``google.rpc.Status`` detail
holding a ``google.rpc.ErrorInfo`` (domain ``gaml.dev``, a reason, and the GAML error class in its metadata).

Requests are decoded by this module, not by gRPC: bytes that are not a valid message, and enum numbers the schema does
not define, are answered INVALID_ARGUMENT (gRPC's own decoder would answer INTERNAL) and reach no core code.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final, Protocol, TypeVar

import grpc
from google.protobuf.any_pb2 import Any as AnyPb
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import DecodeError, Message
from google.protobuf.struct_pb2 import Struct
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from gaml.node.core.errors import DeadlineExceeded, RateLimited, TooLarge, Unauthenticated, Unavailable
from gaml.node.core.hydrate import Segment, Walk, peers_by_asset
from gaml.node.core.service import (
    DEFAULT_LIST_LIMIT,
    IngestFile,
    MemoryService,
    PeerRead,
)
from gaml.policy.access import Grant, Location, Permission, Principal, PrincipalKind
from gaml.policy.errors import (
    BadSignature,
    DecryptionFailed,
    GamlError,
    IndexMismatch,
    InvalidAsset,
    InvalidInput,
    KeychainError,
    NotFound,
    PolicyError,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    UnknownPrincipal,
)
from gaml.policy.model import MAX_PAYLOAD_DEPTH, AssetType, Level, PrivacyScope, ReplicationPolicy, nests_deeper
from gaml.proto.convert import asset_to_pb, draft_from_pb
from gaml.v1 import asset_pb2, memory_pb2

T = TypeVar("T")
log = logging.getLogger("gaml.daemon")
ERROR_DOMAIN: Final = "gaml.dev"
SERVICE: Final = "gaml.v1.Memory"


class Runtime(Protocol):
    """What the daemon provides: authenticate, limit, and run ``fn(caller, now)`` on the core thread."""

    async def call(
        self,
        context: grpc.aio.ServicerContext,
        method: str,
        fn: Callable[[Principal, int], T],
        *,
        size: int,
        caller: Principal | None = None,
    ) -> T: ...

    async def authenticate(self, context: grpc.aio.ServicerContext, method: str, size: int = 0) -> Principal: ...

    async def ask_peers(
        self, context: grpc.aio.ServicerContext, caller: Principal, text: str, read: PeerRead
    ) -> dict[str, Any]:
        """A peer read before the call's own work (node.serve.replicator.Replicator.ask): its report."""
        ...

    def ingest_limit(self, principal: Principal) -> int: ...

    def backup(self, directory: str, now: int) -> dict[str, Any]:
        """Back the home up into ``directory`` (on the core thread, between calls: node/backup.py)."""
        ...

    def observe_frame(self, spent: int, budget: int) -> None:
        """A frame was rendered: ``spent`` of ``budget`` tokens (for metrics)."""
        ...

    def describe(self, context: grpc.aio.ServicerContext) -> dict[str, Any]: ...


# -- errors ------------------------------------------------------------------------------------------------------------

# Most specific first: the first class an error is an instance of decides its code and reason.
_CODES: Final[list[tuple[type[BaseException], grpc.StatusCode, str]]] = [
    (DeadlineExceeded, grpc.StatusCode.DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"),
    (Unauthenticated, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"),
    (Unavailable, grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN"),
    (RateLimited, grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED"),
    (TooLarge, grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_LARGE"),
    (UnknownPrincipal, grpc.StatusCode.PERMISSION_DENIED, "UNKNOWN_PRINCIPAL"),
    (PolicyError, grpc.StatusCode.PERMISSION_DENIED, "POLICY_DENIED"),
    (NotFound, grpc.StatusCode.NOT_FOUND, "NOT_FOUND"),
    (InvalidAsset, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ASSET"),
    (InvalidInput, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_INPUT"),
    (IndexMismatch, grpc.StatusCode.FAILED_PRECONDITION, "INDEX_MISMATCH"),
    (StoreClosed, grpc.StatusCode.UNAVAILABLE, "STORE_CLOSED"),
    (StoreCorrupt, grpc.StatusCode.DATA_LOSS, "STORE_CORRUPT"),
    (DecryptionFailed, grpc.StatusCode.DATA_LOSS, "DECRYPTION_FAILED"),
    (BadSignature, grpc.StatusCode.DATA_LOSS, "BAD_SIGNATURE"),
    (KeychainError, grpc.StatusCode.FAILED_PRECONDITION, "KEYCHAIN"),
    (StoreError, grpc.StatusCode.FAILED_PRECONDITION, "STORE"),
    (GamlError, grpc.StatusCode.FAILED_PRECONDITION, "GAML_ERROR"),
]


def status_of(exc: BaseException) -> grpc.Status:
    """The gRPC status for an error, with its typed details; an unexpected error is INTERNAL without its message."""
    code, reason, message = grpc.StatusCode.INTERNAL, "INTERNAL", "internal error (see the node's log)"
    for cls, c, r in _CODES:
        if isinstance(exc, cls):
            code, reason, message = c, r, str(exc) or r.lower()
            break
    info = error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN, metadata={"type": type(exc).__name__})
    details = [_pack(info)]
    if isinstance(exc, RateLimited):
        secs = max(exc.retry_after_s, 0.001)
        delay = Duration(seconds=int(secs), nanos=int((secs % 1) * 1e9))
        details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    st = status_pb2.Status(code=getattr(code_pb2, code.name), message=message[:2000], details=details)
    return rpc_status.to_status(st)


def _pack(msg: Message) -> AnyPb:
    a = AnyPb()
    a.Pack(msg)
    return a


# -- decoding ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Malformed:
    """Request bytes that did not decode; the handler answers INVALID_ARGUMENT."""

    type_name: str
    reason: str


def _decoder(cls: type[Message]) -> Callable[[bytes], Message | Malformed]:
    def decode(data: bytes) -> Message | Malformed:
        try:
            return cls.FromString(data)
        except (DecodeError, RuntimeError, ValueError) as e:  # upb raises DecodeError; be generous with the rest
            return Malformed(cls.DESCRIPTOR.full_name, str(e) or "truncated or malformed")

    return decode


def _check(req: Any) -> None:
    if isinstance(req, Malformed):
        raise InvalidInput(f"the request is not a valid {req.type_name}: {req.reason}")


_PURPOSES: Final = {
    memory_pb2.PURPOSE_READ: Permission.READ,
    memory_pb2.PURPOSE_CONTEXT: Permission.CONTEXT,
    memory_pb2.PURPOSE_MEMORIZE: Permission.MEMORIZE,
    memory_pb2.PURPOSE_REPLICATE: Permission.REPLICATE,
    memory_pb2.PURPOSE_EXPORT: Permission.EXPORT,
    memory_pb2.PURPOSE_TRAIN: Permission.TRAIN,
}
_PURPOSE_PB: Final = {v: k for k, v in _PURPOSES.items()}
_LOCATIONS: Final = {
    memory_pb2.LOCATION_UNSPECIFIED: Location.THIS_DEVICE,
    memory_pb2.LOCATION_THIS_DEVICE: Location.THIS_DEVICE,
    memory_pb2.LOCATION_TRUSTED_DEVICE: Location.TRUSTED_DEVICE,
    memory_pb2.LOCATION_PRIVATE_SUBNET: Location.PRIVATE_SUBNET,
    memory_pb2.LOCATION_PUBLIC_SWARM: Location.PUBLIC_SWARM,
}
_LOCATION_PB: Final = {v: k for k, v in _LOCATIONS.items() if k != memory_pb2.LOCATION_UNSPECIFIED}
_SEARCH_MODES: Final = {0: "hybrid", 1: "hybrid", 2: "dense", 3: "lexical"}
_HYDRATION_MODES: Final = {0: "auto", 1: "auto", 2: "hybrid", 3: "semantic", 4: "lexical", 5: "recency"}


def _by_number(pb_enum: Any, prefix: str, domain: Any) -> dict[int, Any]:
    """Wire number -> domain member for an enum whose values are ``<PREFIX>_<MEMBER>`` (UNSPECIFIED left out)."""
    return {n: domain[name.removeprefix(prefix)] for name, n in pb_enum.items() if n != 0}


_LEVELS: Final = _by_number(asset_pb2.Level, "LEVEL_", Level)
_LEVEL_PB: Final[dict[Level, Any]] = {v: k for k, v in _LEVELS.items()}
_SCOPES: Final = _by_number(asset_pb2.PrivacyScope, "PRIVACY_SCOPE_", PrivacyScope)
_TYPES: Final = _by_number(asset_pb2.AssetType, "ASSET_TYPE_", AssetType)
_REPLICATION: Final = _by_number(asset_pb2.ReplicationPolicy, "REPLICATION_POLICY_", ReplicationPolicy)


def _enum(table: Mapping[Any, T], number: int, field: str, default: T | None = None) -> T:
    if number == 0 and default is not None:
        return default
    try:
        return table[number]
    except KeyError:
        raise InvalidInput(f"{field}: {number} is not a value this node knows") from None


def _intent(req: Any, default: Permission) -> tuple[Permission, Location]:
    it = req.intent
    return (
        _enum(_PURPOSES, it.purpose, "intent.purpose", default),
        _enum(_LOCATIONS, it.location, "intent.location"),
    )


def _struct(d: Mapping[str, Any]) -> Struct:
    s = Struct()
    s.update(d)  # the JSON mapping's reading of a JSON object, in half ParseDict's time (a receipt is large)
    return s


def grant_to_pb(g: Grant) -> memory_pb2.Grant:
    return memory_pb2.Grant(
        id=g.id,
        owner=g.owner,
        grantee=g.grantee,
        max_level=_LEVEL_PB[g.max_level],
        segments=sorted(g.segments),
        tags=sorted(g.tags),
        time_from=g.time_from,
        time_to=g.time_to,
        expires_at=g.expires_at,
        created_at=g.created_at,
        revoked_at=g.revoked_at,
    )


def _peer_read(r: memory_pb2.PeerRead) -> PeerRead:
    """A PeerRead message with its defaults filled in (0 = the default)."""
    d = PeerRead()
    return PeerRead(r.deadline_ms or d.deadline_ms, r.fan_out or d.fan_out, r.k or d.k, tuple(r.boundaries))


def _plane(segments: Any) -> tuple[Segment, ...]:
    out = []
    for s in segments:
        kw: dict[str, Any] = {"name": s.name or "*", "budget": s.budget}
        if s.seeds:
            kw["seeds"] = s.seeds
        if s.fact_cap:
            kw["fact_cap"] = s.fact_cap
        if s.HasField("walk"):
            w = s.walk
            kw["walk"] = Walk(w.neighbours, w.entity_hops, w.entity_fanout, w.decay)
        out.append(Segment(**kw))
    return tuple(out)


# -- the servicer ------------------------------------------------------------------------------------------------------


class MemoryServicer:
    """``gaml.v1.Memory`` over a :class:`MemoryService`, run by a :class:`Runtime`."""

    def __init__(self, service: MemoryService, runtime: Runtime) -> None:
        self.svc = service
        self.rt = runtime

    async def Put(self, req: memory_pb2.PutRequest, ctx: grpc.aio.ServicerContext) -> memory_pb2.PutResponse:
        _check(req)
        drafts = [draft_from_pb(a) for a in req.assets]
        ids = await self.rt.call(
            ctx, "Put", lambda c, now: self.svc.put(c, drafts, now, check_only=req.check_only), size=req.ByteSize()
        )
        return memory_pb2.PutResponse(ids=ids)

    async def Get(self, req: memory_pb2.GetRequest, ctx: grpc.aio.ServicerContext) -> memory_pb2.GetResponse:
        _check(req)
        purpose, location = _intent(req, Permission.READ)
        asset = await self.rt.call(
            ctx,
            "Get",
            lambda c, now: self.svc.get(c, req.id, purpose, location, now, include_deleted=req.include_deleted),
            size=req.ByteSize(),
        )
        if nests_deeper(asset.payload):
            raise StoreError(
                f"asset {asset.id} was stored before payloads were limited to {MAX_PAYLOAD_DEPTH} levels and nests "
                "deeper than a gRPC message carries: read it on the store (`gaml get` with the daemon stopped), or "
                "forget it"
            )
        return memory_pb2.GetResponse(asset=asset_to_pb(asset))

    async def List(self, req: memory_pb2.ListRequest, ctx: grpc.aio.ServicerContext) -> memory_pb2.ListResponse:
        _check(req)
        types = [_enum(_TYPES, t, "types") for t in req.types]
        assets = await self.rt.call(
            ctx,
            "List",
            lambda c, now: self.svc.list_own(
                c, now, types=types, since=req.since, limit=req.limit or DEFAULT_LIST_LIMIT
            ),
            size=req.ByteSize(),
        )
        return memory_pb2.ListResponse(assets=[asset_to_pb(a) for a in assets])

    async def Principals(
        self, req: memory_pb2.PrincipalsRequest, ctx: grpc.aio.ServicerContext
    ) -> memory_pb2.PrincipalsResponse:
        _check(req)
        ps = await self.rt.call(ctx, "Principals", lambda c, now: self.svc.principals(), size=req.ByteSize())
        return memory_pb2.PrincipalsResponse(principals=[_struct(p.to_json()) for p in ps])

    async def AddPrincipal(
        self, req: memory_pb2.AddPrincipalRequest, ctx: grpc.aio.ServicerContext
    ) -> memory_pb2.AddPrincipalResponse:
        _check(req)

        def add(c: Principal, now: int) -> Principal:  # the request is judged after the caller and its size
            kind = PrincipalKind.parse(req.kind or "user")
            tenants, roles, teams = frozenset(req.tenants), frozenset(req.roles), frozenset(req.teams)
            return self.svc.add_principal(Principal(req.id, kind, tenants, roles, teams, req.on_behalf_of))

        p = await self.rt.call(ctx, "AddPrincipal", add, size=req.ByteSize())
        return memory_pb2.AddPrincipalResponse(principal=_struct(p.to_json()))

    async def Sources(
        self, req: memory_pb2.SourcesRequest, ctx: grpc.aio.ServicerContext
    ) -> memory_pb2.SourcesResponse:
        _check(req)
        rows = await self.rt.call(ctx, "Sources", lambda c, now: self.svc.sources(), size=req.ByteSize())
        return memory_pb2.SourcesResponse(sources=[_struct(r) for r in rows])

    async def Curate(self, req: memory_pb2.CurateRequest, ctx: grpc.aio.ServicerContext) -> memory_pb2.AdminReport:
        _check(req)
        todo = list(req.sources)
        report = await self.rt.call(ctx, "Curate", lambda c, now: self.svc.curate(now, todo), size=req.ByteSize())
        return memory_pb2.AdminReport(report=_struct(report))

    async def Maintain(self, req: memory_pb2.MaintainRequest, ctx: grpc.aio.ServicerContext) -> memory_pb2.AdminReport:
        _check(req)
        report = await self.rt.call(ctx, "Maintain", lambda c, now: self.svc.maintain(now), size=req.ByteSize())
        return memory_pb2.AdminReport(report=_struct(report))

    async def Backup(self, req: memory_pb2.BackupRequest, ctx: grpc.aio.ServicerContext) -> memory_pb2.AdminReport:
        _check(req)
        dest = req.directory

        def backup(c: Principal, now: int) -> dict[str, Any]:
            if not dest.startswith("/"):
                raise InvalidInput(f"the backup directory must be an absolute path, not {dest[:200]!r}")
            return self.rt.backup(dest, now)

        report = await self.rt.call(ctx, "Backup", backup, size=req.ByteSize())
        return memory_pb2.AdminReport(report=_struct(report))

    async def Remember(
        self, req: memory_pb2.RememberRequest, ctx: grpc.aio.ServicerContext
    ) -> memory_pb2.RememberResponse:
        _check(req)
        turns = [{"role": t.role or "user", "content": t.content} for t in req.turns]
        report = await self.rt.call(
            ctx,
            "Remember",
            lambda c, now: self.svc.remember(c, turns, now, session=req.session, curate=req.curate),
            size=req.ByteSize(),
        )
        return memory_pb2.RememberResponse(source=report.pop("source"), ids=report.pop("ids"), report=_struct(report))

    async def Forget(self, req: memory_pb2.ForgetRequest, ctx: grpc.aio.ServicerContext) -> memory_pb2.ForgetResponse:
        _check(req)
        r = await self.rt.call(ctx, "Forget", lambda c, now: self.svc.forget(c, req.id, now), size=req.ByteSize())
        return memory_pb2.ForgetResponse(
            receipt_id=r.id,
            at=r.at,
            tombstoned=list(r.tombstoned),
            rebuilt_sources=r.rebuilt_sources,
            by=r.by,
            reason=r.reason,
        )

    async def _ask_peers(
        self, req: Any, ctx: grpc.aio.ServicerContext, method: str, text: str
    ) -> tuple[Principal | None, dict[str, Any] | None]:
        """A request with ``peers`` set: who calls (admitted once, here) and the report of the peer read that runs
        before the call's own work; (None, None) without."""
        if not req.HasField("peers"):
            return None, None
        read = _peer_read(req.peers)
        caller = await self.rt.authenticate(ctx, method, req.ByteSize())
        return caller, await self.rt.ask_peers(ctx, caller, text, read)

    async def Search(self, req: memory_pb2.SearchRequest, ctx: grpc.aio.ServicerContext) -> memory_pb2.SearchResponse:
        _check(req)
        purpose, location = _intent(req, Permission.READ)
        mode = _enum(_SEARCH_MODES, req.mode, "mode")
        types = [_enum(_TYPES, t, "types") for t in req.types]
        caller, peers = await self._ask_peers(req, ctx, "Search", req.text)
        hits = await self.rt.call(
            ctx,
            "Search",
            lambda c, now: self.svc.search(
                c,
                req.text,
                now,
                k=req.k or 10,
                purpose=purpose,
                location=location,
                mode=mode,
                as_of=req.as_of,
                types=types,
                segments=list(req.segments),
                tags=list(req.tags),
                entities=list(req.entities),
            ),
            size=req.ByteSize(),
            caller=caller,
        )
        by_asset = peers_by_asset(peers) if peers is not None else {}
        return memory_pb2.SearchResponse(
            hits=[
                memory_pb2.Hit(
                    asset=asset_to_pb(h.asset),
                    score=h.score,
                    path=h.path,
                    partition=h.partition,
                    explain=_struct(h.explain() | ({"peers": by_asset[h.asset.id]} if h.asset.id in by_asset else {})),
                )
                for h in hits
                if not nests_deeper(h.asset.payload)  # stored before the limit: it cannot travel (see Get)
            ],
            **({"peers": _struct(peers)} if peers is not None else {}),
        )

    async def Hydrate(
        self, req: memory_pb2.HydrateRequest, ctx: grpc.aio.ServicerContext
    ) -> memory_pb2.HydrateResponse:
        _check(req)
        purpose, location = _intent(req, Permission.CONTEXT)
        mode = _enum(_HYDRATION_MODES, req.mode, "mode")
        plane = _plane(req.plane)
        counter = req.counter or "heuristic"
        caller, peers = await self._ask_peers(req, ctx, "Hydrate", req.goal)
        out = await self.rt.call(
            ctx,
            "Hydrate",
            lambda c, now: self.svc.hydrate(
                c,
                req.goal,
                req.budget,
                now,
                plane=plane,
                purpose=purpose,
                location=location,
                mode=mode,
                as_of=req.as_of,
                counter=counter,
                profile=req.profile if req.HasField("profile") else None,
                peers=peers,
            ),
            size=req.ByteSize(),
            caller=caller,
        )
        r = out.receipt
        self.rt.observe_frame(int(r["budget"]["spent"]), int(req.budget))
        return memory_pb2.HydrateResponse(
            frame=out.frame,
            receipt_id=r["receipt"],
            tokens=r["budget"]["spent"],
            path=r["path"],
            fallback=r["fallback"] or "",
            receipt=_struct(r),
        )

    async def Ingest(
        self, requests: AsyncIterator[memory_pb2.IngestRequest], ctx: grpc.aio.ServicerContext
    ) -> memory_pb2.IngestResponse:
        caller = await self.rt.authenticate(ctx, "Ingest")
        limit = self.rt.ingest_limit(caller)
        files: list[tuple[memory_pb2.IngestFile, bytearray]] = []
        total = 0
        curate = True
        first = True
        stream = aiter(requests)
        try:
            async for req in stream:
                _check(req)
                # Every message counts, headers too, and the stream is refused as soon as it is over: a refused
                # stream holds at most the limit and one message, dropped with this frame.
                total += req.ByteSize()
                if total > limit:
                    raise TooLarge(f"the ingest stream is over {caller.id}'s limit of {limit} bytes")
                if first:
                    curate, first = not req.no_curate, False
                part = req.WhichOneof("part")
                if part == "file":
                    files.append((req.file, bytearray()))
                elif part == "chunk":
                    if not files:
                        raise InvalidInput("an ingest stream starts with a file header, before any chunk")
                    files[-1][1].extend(req.chunk)
        finally:
            # gRPC's receiver is an async generator in a reference cycle: left suspended by a stream refused part-read,
            # it would keep the last message it yielded until the cyclic collector runs. Closing it frees it now.
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        built = [
            IngestFile(
                f.name,
                bytes(data),
                format=f.format,
                tenant=f.tenant,
                segment=f.segment,
                scope=_enum(_SCOPES, f.scope, "scope", PrivacyScope.USER_PRIVATE),
                replication=_enum(_REPLICATION, f.replication, "replication", ReplicationPolicy.NONE),
                item_budget=f.item_budget or 5000,
                origin=f.origin,
            )
            for f, data in files
        ]
        files.clear()
        report = await self.rt.call(
            ctx, "Ingest", lambda c, now: self.svc.ingest(c, built, now, curate=curate), size=0, caller=caller
        )
        return memory_pb2.IngestResponse(
            files=report["files"],
            records=report.get("records", 0),
            skipped=report.get("skipped", 0),
            items=report.get("items", 0),
            facts=report.get("facts", 0),
            report=_struct(report),
        )

    async def Grant(self, req: memory_pb2.GrantRequest, ctx: grpc.aio.ServicerContext) -> memory_pb2.GrantResponse:
        _check(req)
        level = _enum(_LEVELS, req.max_level, "max_level")
        g = await self.rt.call(
            ctx,
            "Grant",
            lambda c, now: self.svc.grant(
                c,
                req.grantee,
                level,
                now,
                segments=list(req.segments),
                tags=list(req.tags),
                time_from=req.time_from,
                time_to=req.time_to,
                expires_at=req.expires_at,
            ),
            size=req.ByteSize(),
        )
        return memory_pb2.GrantResponse(grant=grant_to_pb(g))

    async def Revoke(self, req: memory_pb2.RevokeRequest, ctx: grpc.aio.ServicerContext) -> memory_pb2.GrantResponse:
        _check(req)
        g = await self.rt.call(ctx, "Revoke", lambda c, now: self.svc.revoke(c, req.grant_id, now), size=req.ByteSize())
        return memory_pb2.GrantResponse(grant=grant_to_pb(g))

    async def ListGrants(
        self, req: memory_pb2.ListGrantsRequest, ctx: grpc.aio.ServicerContext
    ) -> memory_pb2.ListGrantsResponse:
        _check(req)
        made, received = await self.rt.call(ctx, "ListGrants", lambda c, now: self.svc.grants(c), size=req.ByteSize())
        return memory_pb2.ListGrantsResponse(
            made=[grant_to_pb(g) for g in made], received=[grant_to_pb(g) for g in received]
        )

    async def AccessLog(
        self, req: memory_pb2.AccessLogRequest, ctx: grpc.aio.ServicerContext
    ) -> memory_pb2.AccessLogResponse:
        _check(req)
        limit = req.limit or 100
        log = await self.rt.call(ctx, "AccessLog", lambda c, now: self.svc.access_log(c, limit), size=req.ByteSize())
        return memory_pb2.AccessLogResponse(
            records=[
                memory_pb2.AccessRecord(
                    at=r["at"],
                    who=r["who"],
                    on_behalf_of=r.get("on_behalf_of", ""),
                    kind=r["kind"],
                    purpose=_PURPOSE_PB[Permission.parse(r["purpose"])],
                    location=_LOCATION_PB[Location.parse(r["location"])],
                    entry=_struct(r),
                )
                for r in log
            ]
        )

    async def Status(self, req: memory_pb2.StatusRequest, ctx: grpc.aio.ServicerContext) -> memory_pb2.StatusResponse:
        _check(req)
        caller, st = await self.rt.call(ctx, "Status", lambda c, now: (c, self.svc.status(c)), size=req.ByteSize())
        extra = self.rt.describe(ctx)
        partitions = {name: memory_pb2.PartitionStatus(**p) for name, p in st.pop("partitions").items()}
        return memory_pb2.StatusResponse(
            principal=caller.id,
            user=caller.user,
            partitions=partitions,
            **st,
            **extra,
        )

    async def Conflicts(
        self, req: memory_pb2.ConflictsRequest, ctx: grpc.aio.ServicerContext
    ) -> memory_pb2.ConflictsResponse:
        _check(req)
        purpose, location = _intent(req, Permission.READ)
        records = await self.rt.call(
            ctx,
            "Conflicts",
            lambda c, now: self.svc.conflicts(c, now, slot=req.slot, purpose=purpose, location=location),
            size=req.ByteSize(),
        )
        return memory_pb2.ConflictsResponse(records=[_struct(r) for r in records])

    async def Reputation(
        self, req: memory_pb2.ReputationRequest, ctx: grpc.aio.ServicerContext
    ) -> memory_pb2.ReputationResponse:
        _check(req)
        ledgers = await self.rt.call(ctx, "Reputation", lambda c, now: self.svc.reputation(c, now), size=req.ByteSize())
        return memory_pb2.ReputationResponse(ledgers=[_struct(r) for r in ledgers])

    async def Override(
        self, req: memory_pb2.OverrideRequest, ctx: grpc.aio.ServicerContext
    ) -> memory_pb2.OverrideResponse:
        _check(req)
        out = await self.rt.call(
            ctx,
            "Override",
            lambda c, now: self.svc.override(c, req.slot, req.choose, now, reason=req.reason),
            size=req.ByteSize(),
        )
        return memory_pb2.OverrideResponse(override=out["override"], record=_struct(out["record"]))


# -- registration ------------------------------------------------------------------------------------------------------


def _guard(method: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn every exception of a handler into its status (with typed details) and abort the call with it."""

    async def handler(req: Any, ctx: grpc.aio.ServicerContext) -> Any:
        try:
            return await fn(req, ctx)
        except grpc.aio.AbortError:
            raise
        except Exception as e:  # every error becomes a status
            if not isinstance(e, GamlError):
                log.exception("call failed", extra={"fields": {"method": method}})
            st = status_of(e)
        # Aborted outside the except clause, so that the AbortError does not chain the error: gRPC keeps the
        # AbortError after the call, and the error's traceback holds the failed handler's frames and all they held
        # (the buffers of a refused ingest stream: 100 headers of 8 MiB left ~70 MB per refused call).
        await ctx.abort(st.code, st.details, trailing_metadata=st.trailing_metadata)

    handler.__name__ = method
    return handler


def handlers(servicer: MemoryServicer) -> grpc.GenericRpcHandler:
    """The service's method handlers, decoding requests with :func:`_decoder` (malformed bytes → INVALID_ARGUMENT)."""
    service = memory_pb2.DESCRIPTOR.services_by_name["Memory"]
    table = {}
    for m in service.methods:
        req_cls = getattr(memory_pb2, m.input_type.name)
        resp_cls = getattr(memory_pb2, m.output_type.name)
        fn = _guard(m.name, getattr(servicer, m.name))
        make = grpc.stream_unary_rpc_method_handler if m.client_streaming else grpc.unary_unary_rpc_method_handler
        table[m.name] = make(fn, request_deserializer=_decoder(req_cls), response_serializer=resp_cls.SerializeToString)
    return grpc.method_handlers_generic_handler(SERVICE, table)


__all__ = ["SERVICE", "MemoryServicer", "Runtime", "handlers", "status_of"]
