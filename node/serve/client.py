"""``Client``: the Python client of a node's ``gaml.v1.Memory`` service (what the CLI uses when a daemon runs).

::

    from gaml.node.serve.client import Client
    with Client.unix("~/.gaml/run/gaml.sock") as c:          # as your local principal
        c.put([{"asset_type": "fact", "payload": {"text": "Alice drinks oat-milk flat whites"}}])
        out = c.hydrate("what does Alice drink?", budget=500)
        print(out["frame"])

    with Client.mtls("127.0.0.1:7700", key, cert, ca) as c:   # as the principal of your certificate
        c.search("release date", k=5)

Errors come back as the GAML error types the node raised (``PolicyError``, ``NotFound``, ``InvalidAsset``, …, read
from the status's ``google.rpc.ErrorInfo``), so callers handle a remote node as they would a local one.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import Struct
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from gaml.node.core.api import GetOptions, GrantOptions, Hit, HydrateOptions, IntentOptions, SearchOptions, Status
from gaml.node.core.errors import DeadlineExceeded, RateLimited, TooLarge, Unauthenticated, Unavailable
from gaml.node.core.hydrate import Hydration, Segment
from gaml.node.core.memory.ladder import ErasureReceipt
from gaml.node.core.service import MAX_LOG_LIMIT, MAX_SEARCH_K, IngestFile, PeerRead
from gaml.node.serve.errors import TlsRefused
from gaml.policy.access import Grant, Location, Permission, Principal
from gaml.policy.errors import (
    BadSignature,
    DecryptionFailed,
    Deleted,
    GamlError,
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
from gaml.policy.model import Asset, Level, freeze_json, thaw_json
from gaml.proto.convert import asset_from_pb, asset_json_from_pb, draft_pb_from_json, int64s_as_ints, struct_json
from gaml.v1 import asset_pb2, memory_pb2, memory_pb2_grpc

if TYPE_CHECKING:
    from typing_extensions import Unpack

T = TypeVar("T")
CHUNK: Final = 1 << 20
DEFAULT_TIMEOUT_S: Final = 300.0

# Error classes by the name the node reports (ErrorInfo.metadata["type"]), then by reason.
_BY_TYPE: Final[dict[str, type[GamlError]]] = {
    c.__name__: c
    for c in (
        PolicyError,
        UnknownPrincipal,
        NotFound,
        Deleted,
        InvalidAsset,
        InvalidInput,
        KeychainError,
        StoreError,
        StoreClosed,
        StoreCorrupt,
        DecryptionFailed,
        BadSignature,
        TooLarge,
        DeadlineExceeded,
        Unauthenticated,
        Unavailable,
    )
}
_BY_CODE: Final[dict[grpc.StatusCode, type[GamlError]]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidInput,
    grpc.StatusCode.PERMISSION_DENIED: PolicyError,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.RESOURCE_EXHAUSTED: TooLarge,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DATA_LOSS: StoreCorrupt,
}


def error_of(e: grpc.RpcError) -> GamlError:
    """The GAML error a failed call stands for (its ErrorInfo names the class; the status code is the fallback)."""
    code = e.code() if isinstance(e, grpc.Call) else grpc.StatusCode.UNKNOWN
    message = (e.details() if isinstance(e, grpc.Call) else None) or str(code)
    info: error_details_pb2.ErrorInfo | None = None
    retry = 0.0
    st = rpc_status.from_call(e) if isinstance(e, grpc.Call) else None
    for d in st.details if st is not None else ():
        if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            d.Unpack(info)
        elif d.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            r = error_details_pb2.RetryInfo()
            d.Unpack(r)
            retry = r.retry_delay.seconds + r.retry_delay.nanos / 1e9
    if info is not None and info.reason == "RATE_LIMITED":
        return RateLimited(message, retry)
    cls = _BY_TYPE.get(info.metadata.get("type", "")) if info is not None else None
    if cls is None:
        cls = _BY_CODE.get(code, GamlError)
    if code is grpc.StatusCode.UNAVAILABLE and info is None:
        if any(mark in message.lower() for mark in _TLS_MARKS):
            return TlsRefused(
                "the TLS handshake with the node failed: the node refused this client's certificate (not issued by "
                "its CA, expired, or none given), or this client does not trust the node's certificate (another "
                f"ca.crt); nothing was sent ({message})"
            )
        message = f"the node does not answer ({message})"
    return cls(message)


def _listens(address: str, timeout_s: float = 2.0) -> bool:
    """Whether a TCP connection to ``host:port`` is accepted (nothing is sent on it)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


# What gRPC's connectivity errors say when the TLS handshake, not the network, failed.
_TLS_MARKS: Final = ("handshake", "ssl", "tls", "certificate")


class Client:
    """A connection to a node. Every call raises a :class:`GamlError` subclass on failure."""

    def __init__(
        self, channel: grpc.Channel, *, timeout_s: float = DEFAULT_TIMEOUT_S, tcp: str = "", token: str = ""
    ) -> None:
        self.channel = channel
        self.stub = memory_pb2_grpc.MemoryStub(channel)
        self.timeout_s = timeout_s
        self._tcp = tcp  # host:port of an mTLS node, to tell a refused handshake from a node that is not there
        # An access token (`gaml token`): over the socket, the call is the token's principal's, not the node's own user.
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None

    @classmethod
    def unix(cls, path: str | Path, **kw: Any) -> Client:
        """Over the node's Unix socket: you are the node's local principal (the kernel vouches for your uid), or the
        principal whose access token is given (``token=``: the node checks it on every call)."""
        target = f"unix:{Path(path).expanduser()}"
        creds = grpc.local_channel_credentials(grpc.LocalConnectionType.UDS)
        return cls(grpc.secure_channel(target, creds, options=_OPTIONS), **kw)

    @classmethod
    def mtls(cls, address: str, key_pem: bytes, cert_pem: bytes, ca_pem: bytes, **kw: Any) -> Client:
        """Over TCP with mutual TLS: you are the principal your certificate names (empty key and certificate: none is
        presented, and the node refuses the handshake)."""
        creds = grpc.ssl_channel_credentials(ca_pem, key_pem or None, cert_pem or None)
        return cls(grpc.secure_channel(address, creds, options=_OPTIONS), tcp=address, **kw)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: Callable[..., T], request: Any, timeout_s: float | None = None) -> T:
        try:
            if self._metadata is None:
                return method(request, timeout=timeout_s or self.timeout_s)
            return method(request, timeout=timeout_s or self.timeout_s, metadata=self._metadata)
        except grpc.RpcError as e:
            err = error_of(e)
            # No answer of the node's own, and no connection ever made (not a daemon gone mid-call, a GOAWAY, …).
            bare = isinstance(e, grpc.Call) and rpc_status.from_call(e) is None
            unconnected = isinstance(e, grpc.Call) and "failed to connect" in (e.details() or "")
            if type(err) is Unavailable and bare and unconnected and self._tcp and _listens(self._tcp):
                # The node takes TCP connections but gRPC saw the socket close: with mutual TLS that is the node
                # ending the handshake over this client's certificate (gRPC reports only "Socket closed").
                raise TlsRefused(
                    f"the node at {self._tcp} accepts connections but ended the TLS handshake: it refused this "
                    "client's certificate (not issued by its CA, expired, or none given); nothing was sent "
                    f"({e.details() if isinstance(e, grpc.Call) else e})"
                ) from None
            raise err from None

    # -- calls ------------------------------------------------------------------------------------------------------

    def status(self, **kw: Any) -> dict[str, Any]:
        r = self._call(self.stub.Status, memory_pb2.StatusRequest(), **kw)
        return _message_json(r)

    def health(self, service: str = "", timeout_s: float = 5.0) -> str:
        """The gRPC health service's answer for ``service`` (``""``: the server): ``SERVING``, ``NOT_SERVING``, …"""
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        stub = health_pb2_grpc.HealthStub(self.channel)
        r = self._call(stub.Check, health_pb2.HealthCheckRequest(service=service), timeout_s=timeout_s)
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(r.status))

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the node answers (gRPC's connection backoff, no polling loop here)."""
        try:
            grpc.channel_ready_future(self.channel).result(timeout=timeout_s)
        except grpc.FutureTimeoutError:
            raise Unavailable(f"the node did not answer within {timeout_s:g} s") from None

    def put(
        self, drafts: Sequence[Mapping[str, Any] | asset_pb2.Asset], *, check_only: bool = False, **kw: Any
    ) -> list[str]:
        """Store drafts (JSON-like dicts as `gaml put` reads them, or wire assets); returns their ids. ``check_only``:
        validate and authorize them as a put would, write nothing (the ids they would get)."""
        assets = [d if isinstance(d, asset_pb2.Asset) else draft_pb_from_json(d) for d in drafts]
        r = self._call(self.stub.Put, memory_pb2.PutRequest(assets=assets, check_only=check_only), **kw)
        return list(r.ids)

    def get(self, id_: str, *, purpose: str = "", location: str = "", **kw: Any) -> dict[str, Any]:
        req = _request(memory_pb2.GetRequest, id=id_, intent=_intent(purpose, location))
        r = self._call(self.stub.Get, req, **kw)
        return asset_json_from_pb(r.asset)

    def forget(self, id_: str, **kw: Any) -> dict[str, Any]:
        r = self._call(self.stub.Forget, memory_pb2.ForgetRequest(id=id_), **kw)
        return {"id": r.receipt_id, "at": r.at, "tombstoned": list(r.tombstoned), "rebuilt_sources": r.rebuilt_sources}

    def search(
        self, text: str, *, k: int = 10, purpose: str = "", location: str = "", **fields: Any
    ) -> list[dict[str, Any]]:
        """Hits as ``{id, score, path, partition, explain, asset}`` dicts. ``fields``: mode, as_of, types (wire
        numbers), segments, tags, entities, timeout_s."""
        timeout = fields.pop("timeout_s", None)
        req = _request(memory_pb2.SearchRequest, text=text, k=k, intent=_intent(purpose, location), **fields)
        r = self._call(self.stub.Search, req, timeout)
        return [
            {
                "id": h.asset.id,
                "score": h.score,
                "path": h.path,
                "partition": h.partition,
                "explain": _struct_json(h.explain),
                "asset": asset_json_from_pb(h.asset),
            }
            for h in r.hits
        ]

    def hydrate(
        self, goal: str, budget: int, *, purpose: str = "", location: str = "", **fields: Any
    ) -> dict[str, Any]:
        """``{frame, receipt}`` as `gaml hydrate --json` prints it. ``fields``: plane (PlaneSegment messages), mode,
        as_of, counter, profile (tokens; absent: the node's default), timeout_s."""
        timeout = fields.pop("timeout_s", None)
        req = _request(memory_pb2.HydrateRequest, goal=goal, budget=budget, intent=_intent(purpose, location), **fields)
        r = self._call(self.stub.Hydrate, req, timeout)
        return {"frame": r.frame, "receipt": _struct_json(r.receipt)}

    def ingest(
        self,
        files: Iterable[tuple[str, bytes] | Path],
        *,
        format: str = "",
        tenant: str = "",
        segment: str = "",
        scope: str = "",
        replication: str = "",
        item_budget: int = 0,
        curate: bool = True,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Stream files (paths, or (name, bytes) pairs) into the caller's journal; the node's report."""

        def requests() -> Iterator[memory_pb2.IngestRequest]:
            first = True
            for f in files:
                name = str(f.resolve()) if isinstance(f, Path) else f[0]
                header = memory_pb2.IngestFile(
                    name=name,
                    format=format,
                    tenant=tenant,
                    segment=segment,
                    scope=_wire(asset_pb2.PrivacyScope, "PRIVACY_SCOPE", scope),
                    replication=_wire(asset_pb2.ReplicationPolicy, "REPLICATION_POLICY", replication),
                    item_budget=item_budget,
                )
                yield memory_pb2.IngestRequest(file=header, no_curate=first and not curate)
                first = False
                if isinstance(f, Path):  # read as it is sent, a chunk at a time
                    with f.open("rb") as fh:
                        while chunk := fh.read(CHUNK):
                            yield memory_pb2.IngestRequest(chunk=chunk)
                    continue
                data = f[1]
                for i in range(0, len(data), CHUNK):
                    yield memory_pb2.IngestRequest(chunk=data[i : i + CHUNK])

        r = self._call(self.stub.Ingest, requests(), timeout_s)
        return dict(_struct_json(r.report))

    def grant(self, grantee: str, max_level: str, **fields: Any) -> dict[str, Any]:
        timeout = fields.pop("timeout_s", None)
        r = self._call(
            self.stub.Grant,
            memory_pb2.GrantRequest(grantee=grantee, max_level=_wire(asset_pb2.Level, "LEVEL", max_level), **fields),
            timeout,
        )
        return _grant(r.grant)

    def revoke(self, grant_id: str, **kw: Any) -> dict[str, Any]:
        return _grant(self._call(self.stub.Revoke, memory_pb2.RevokeRequest(grant_id=grant_id), **kw).grant)

    def grants(self, **kw: Any) -> dict[str, list[dict[str, Any]]]:
        r = self._call(self.stub.ListGrants, memory_pb2.ListGrantsRequest(), **kw)
        return {"made": [_grant(g) for g in r.made], "received": [_grant(g) for g in r.received]}

    def access_log(self, limit: int = 0, **kw: Any) -> list[dict[str, Any]]:
        r = self._call(self.stub.AccessLog, memory_pb2.AccessLogRequest(limit=limit), **kw)
        return [_struct_json(rec.entry) for rec in r.records]

    def conflicts(self, slot: str = "", *, purpose: Any = "", location: Any = "", **kw: Any) -> list[dict[str, Any]]:
        """The contested slots the caller's memory holds, each a consensus record (see the Conflicts call)."""
        req = _request(memory_pb2.ConflictsRequest, slot=slot, intent=_intent(purpose, location))
        return [_struct_json(r) for r in self._call(self.stub.Conflicts, req, **kw).records]

    def reputation(self, **kw: Any) -> list[dict[str, Any]]:
        """Per boundary, its reputation ledger (see the Reputation call)."""
        return [_struct_json(r) for r in self._call(self.stub.Reputation, memory_pb2.ReputationRequest(), **kw).ledgers]

    def override(self, slot: str, choose: str, reason: str = "", **kw: Any) -> dict[str, Any]:
        """Choose a contested slot's value: ``{override, record}``."""
        req = _request(memory_pb2.OverrideRequest, slot=slot, choose=choose, reason=reason)
        r = self._call(self.stub.Override, req, **kw)
        return {"override": r.override, "record": _struct_json(r.record)}


class RemoteMemory:
    """:class:`gaml.node.core.api.Memory` answered by a running daemon: each call one RPC of ``client`` (whose
    identity — the socket's uid, or the certificate — is the caller), each answer the domain type the in-process
    :class:`gaml.node.local.LocalMemory` returns."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._user: str | None = None  # from the last status: who the connection is does not change

    def user(self) -> str:
        return self.status().user if self._user is None else self._user

    def status(self) -> Status:
        c = self.client
        r = c._call(c.stub.Status, memory_pb2.StatusRequest())
        fields = {f.name: getattr(r, f.name) for f in dataclasses.fields(Status) if f.name != "partitions"}
        parts = {name: {f.name: getattr(p, f.name) for f in p.DESCRIPTOR.fields} for name, p in r.partitions.items()}
        status = Status(**fields, partitions=dict(sorted(parts.items())))
        self._user = status.user
        return status

    def put(self, drafts: Sequence[Mapping[str, Any]], *, check_only: bool = False) -> list[str]:
        return self.client.put(drafts, check_only=check_only)

    def get(self, id_: str, **options: Unpack[GetOptions]) -> Asset:
        o = options
        intent = _intent(o.get("purpose", Permission.READ), o.get("location", Location.THIS_DEVICE))
        req = _request(memory_pb2.GetRequest, id=id_, intent=intent, include_deleted=o.get("include_deleted", False))
        c = self.client
        return asset_from_pb(c._call(c.stub.Get, req).asset)

    def search(self, text: str, **options: Unpack[SearchOptions]) -> list[Hit]:
        o = options
        k = o.get("k", 10)
        if not 0 < k <= MAX_SEARCH_K:  # the wire reads k = 0 as "the default", the interface as a mistake
            raise InvalidInput(f"k must be in [1, {MAX_SEARCH_K}], got {k}")
        req = _request(
            memory_pb2.SearchRequest,
            text=text,
            k=k,
            intent=_intent(o.get("purpose", Permission.READ), o.get("location", Location.THIS_DEVICE)),
            mode=_wire(memory_pb2.SearchMode, "SEARCH_MODE", o.get("mode", "hybrid")),
            as_of=o.get("as_of", 0),
            types=[_wire(asset_pb2.AssetType, "ASSET_TYPE", t) for t in o.get("types", ())],
            segments=list(o.get("segments", ())),
            tags=list(o.get("tags", ())),
            entities=list(o.get("entities", ())),
            **({"peers": peer_read_to_pb(o["peers"])} if "peers" in o else {}),
        )
        c = self.client
        read = o.get("peers")  # a peer read adds its own deadline to the call's
        r = c._call(c.stub.Search, req, None if read is None else c.timeout_s + read.deadline_ms / 1000)
        return [Hit(asset_from_pb(h.asset), _struct_json(h.explain)) for h in r.hits]

    def hydrate(self, goal: str, budget: int, **options: Unpack[HydrateOptions]) -> Hydration:
        o = options
        req = _request(
            memory_pb2.HydrateRequest,
            goal=goal,
            budget=budget,
            intent=_intent(o.get("purpose", Permission.CONTEXT), o.get("location", Location.THIS_DEVICE)),
            plane=plane_to_pb(o.get("plane", ())),
            mode=_wire(memory_pb2.HydrationMode, "HYDRATION_MODE", o.get("mode", "auto")),
            as_of=o.get("as_of", 0),
            counter=o.get("counter", "heuristic"),
            **({"profile": o["profile"]} if "profile" in o else {}),
            **({"peers": peer_read_to_pb(o["peers"])} if "peers" in o else {}),
        )
        c = self.client
        read = o.get("peers")  # a peer read adds its own deadline to the call's
        r = c._call(c.stub.Hydrate, req, None if read is None else c.timeout_s + read.deadline_ms / 1000)
        return Hydration(r.frame, _struct_json(r.receipt))

    def ingest(self, files: Sequence[IngestFile], *, curate: bool = True) -> dict[str, Any]:
        def requests() -> Iterator[memory_pb2.IngestRequest]:
            for i, f in enumerate(files):
                header = memory_pb2.IngestFile(
                    name=f.name,
                    format=f.format,
                    tenant=f.tenant,
                    segment=f.segment,
                    scope=_wire(asset_pb2.PrivacyScope, "PRIVACY_SCOPE", f.scope),
                    replication=_wire(asset_pb2.ReplicationPolicy, "REPLICATION_POLICY", f.replication),
                    item_budget=f.item_budget,
                    origin=f.origin,
                )
                yield memory_pb2.IngestRequest(file=header, no_curate=i == 0 and not curate)
                pieces = [f.data] if isinstance(f.data, bytes) else f.data()
                for piece in pieces:  # read as they are sent, a piece at a time
                    for at in range(0, len(piece), CHUNK):
                        yield memory_pb2.IngestRequest(chunk=piece[at : at + CHUNK])

        c = self.client
        return dict(_struct_json(c._call(c.stub.Ingest, requests()).report))

    def principals(self) -> list[Principal]:
        c = self.client
        r = c._call(c.stub.Principals, memory_pb2.PrincipalsRequest())
        return [Principal.from_json(_struct_json(p)) for p in r.principals]

    def add_principal(self, principal: Principal) -> Principal:
        c = self.client
        req = memory_pb2.AddPrincipalRequest(
            id=principal.id,
            kind=principal.kind.value,
            tenants=sorted(principal.tenants),
            roles=sorted(principal.roles),
            teams=sorted(principal.teams),
            on_behalf_of=principal.on_behalf_of,
        )
        return Principal.from_json(_struct_json(c._call(c.stub.AddPrincipal, req).principal))

    def sources(self) -> list[dict[str, Any]]:
        c = self.client
        return [_ints(_struct_json(r)) for r in c._call(c.stub.Sources, memory_pb2.SourcesRequest()).sources]

    def curate(self, sources: Sequence[str] = ()) -> dict[str, Any]:
        c = self.client
        return _ints(_struct_json(c._call(c.stub.Curate, memory_pb2.CurateRequest(sources=list(sources))).report))

    def maintain(self) -> dict[str, Any]:
        c = self.client
        return _ints(_struct_json(c._call(c.stub.Maintain, memory_pb2.MaintainRequest()).report))

    def backup(self, directory: str) -> dict[str, Any]:
        """A consistent backup of the daemon's home into ``directory`` (absolute, on its machine)."""
        c = self.client
        req = memory_pb2.BackupRequest(directory=directory)
        return _ints(_struct_json(c._call(c.stub.Backup, req, timeout_s=3600).report))

    def list_own(self, *, types: Sequence[Any] = (), since: int = 0, limit: int = 0) -> list[Asset]:
        c = self.client
        req = memory_pb2.ListRequest(
            types=[_wire(asset_pb2.AssetType, "ASSET_TYPE", t) for t in types], since=since, limit=limit
        )
        return [asset_from_pb(a) for a in c._call(c.stub.List, req).assets]

    def remember(
        self, turns: Sequence[Mapping[str, Any]], *, session: str = "", curate: bool = False
    ) -> dict[str, Any]:
        c = self.client
        req = memory_pb2.RememberRequest(
            turns=[memory_pb2.Turn(role=t.get("role", "user"), content=t.get("content", "")) for t in turns],
            session=session,
            curate=curate,
        )
        r = c._call(c.stub.Remember, req)
        return {**_struct_json(r.report), "source": r.source, "ids": list(r.ids)}

    def forget(self, id_: str) -> ErasureReceipt:
        c = self.client
        r = c._call(c.stub.Forget, memory_pb2.ForgetRequest(id=id_))
        return ErasureReceipt(r.receipt_id, r.at, r.by, r.reason, tuple(r.tombstoned), r.rebuilt_sources)

    def grant(self, grantee: str, max_level: Level, **options: Unpack[GrantOptions]) -> Grant:
        o = options
        req = _request(
            memory_pb2.GrantRequest,
            grantee=grantee,
            max_level=_wire(asset_pb2.Level, "LEVEL", max_level),
            segments=list(o.get("segments", ())),
            tags=list(o.get("tags", ())),
            time_from=o.get("time_from", 0),
            time_to=o.get("time_to", 0),
            expires_at=o.get("expires_at", 0),
        )
        c = self.client
        return grant_from_pb(c._call(c.stub.Grant, req).grant)

    def revoke(self, grant_id: str) -> Grant:
        c = self.client
        return grant_from_pb(c._call(c.stub.Revoke, memory_pb2.RevokeRequest(grant_id=grant_id)).grant)

    def grants(self) -> tuple[list[Grant], list[Grant]]:
        c = self.client
        r = c._call(c.stub.ListGrants, memory_pb2.ListGrantsRequest())
        return [grant_from_pb(g) for g in r.made], [grant_from_pb(g) for g in r.received]

    def access_log(self, limit: int = 100) -> list[dict[str, Any]]:
        if not 0 < limit <= MAX_LOG_LIMIT:  # as the service says it (the wire reads 0 as "the default")
            raise InvalidInput(f"limit must be in [1, {MAX_LOG_LIMIT}], got {limit}")
        return self.client.access_log(limit)

    def conflicts(self, slot: str = "", **options: Unpack[IntentOptions]) -> list[dict[str, Any]]:
        o = options
        return self.client.conflicts(
            slot, purpose=o.get("purpose", Permission.READ), location=o.get("location", Location.THIS_DEVICE)
        )

    def reputation(self) -> list[dict[str, Any]]:
        return self.client.reputation()

    def override(self, slot: str, choose: str, *, reason: str = "") -> dict[str, Any]:
        return self.client.override(slot, choose, reason)


def _request(message: Callable[..., T], *args: Any, **fields: Any) -> T:
    """A request message; a value it cannot hold (a negative budget, a number too large) is :class:`InvalidInput`,
    as the node itself would answer it, not protobuf's ValueError or TypeError."""
    try:
        return message(*args, **fields)
    except (ValueError, TypeError) as e:
        raise InvalidInput(f"{message.__name__}: {e}") from None


def grant_from_pb(g: memory_pb2.Grant) -> Grant:
    """The domain grant of a wire one (its id is derived from its fields, so it is checked against the wire's)."""
    level = Level.parse(asset_pb2.Level.Name(g.max_level).removeprefix("LEVEL_").lower())
    grant = Grant(
        g.owner,
        g.grantee,
        level,
        g.created_at,
        frozenset(g.segments),
        frozenset(g.tags),
        g.time_from,
        g.time_to,
        g.expires_at,
        g.revoked_at,
    )
    if grant.id != g.id:
        raise InvalidInput(f"the node's grant {g.id} does not match its fields (they give {grant.id})")
    return grant


_OPTIONS: Final = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]


def peer_read_to_pb(read: PeerRead) -> memory_pb2.PeerRead:
    return memory_pb2.PeerRead(
        deadline_ms=read.deadline_ms, fan_out=read.fan_out, k=read.k, boundaries=list(read.boundaries)
    )


def plane_to_pb(plane: Sequence[Segment]) -> list[memory_pb2.PlaneSegment]:
    """Wire segments for a hydration plane (``node.hydrate.Segment`` objects)."""
    out = []
    for seg in plane:
        w = seg.walk
        walk = memory_pb2.Walk(
            neighbours=w.neighbours, entity_hops=w.entity_hops, entity_fanout=w.entity_fanout, decay=w.decay
        )
        out.append(
            memory_pb2.PlaneSegment(name=seg.name, budget=seg.budget, seeds=seg.seeds, fact_cap=seg.fact_cap, walk=walk)
        )
    return out


def _ints(value: Any) -> Any:
    """A report read back from a Struct, its whole numbers whole again (a Struct holds every number as a double)."""
    if isinstance(value, Mapping):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _wire(enum: Any, prefix: str, name: Any) -> Any:
    """The wire number of a domain enum member or its short name (``"user_private"``, ``"l2"``); 0 for none."""
    if not name:
        return 0
    value = getattr(name, "value", name)
    try:
        return enum.Value(f"{prefix}_{str(value).upper()}")
    except ValueError:
        raise InvalidInput(f"unknown {prefix.lower()} {value!r}") from None


def _intent(purpose: Any, location: Any) -> memory_pb2.Intent:
    return memory_pb2.Intent(
        purpose=_wire(memory_pb2.Purpose, "PURPOSE", purpose), location=_wire(memory_pb2.Location, "LOCATION", location)
    )


def _grant(g: memory_pb2.Grant) -> dict[str, Any]:
    d = _message_json(g)
    d["max_level"] = asset_pb2.Level.Name(g.max_level).removeprefix("LEVEL_").lower()
    return d


def _message_json(msg: Message) -> dict[str, Any]:
    """A message as JSON, its 64-bit integers as ints (the JSON mapping writes them as strings) and every string as
    it is (a principal named "1000" stays a string)."""
    d = json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    int64s_as_ints(d, msg.DESCRIPTOR)
    return d


def _struct_json(s: Struct) -> Any:
    """A Struct as JSON with its whole numbers as ints (a Struct carries every number as a double); strings — a goal
    "2024" — stay strings: ``thaw_json(freeze_json(...))`` of it, in one walk (``proto.convert.struct_json``; a frame's
    receipt is large). A value that walk refuses (a number that is not finite) takes that path, for its error."""
    try:
        return struct_json(s)
    except ValueError:
        return thaw_json(freeze_json(json_format.MessageToDict(s), "the node's answer", max_depth=None))


__all__ = ["Client", "RemoteMemory", "TlsRefused", "error_of", "grant_from_pb", "plane_to_pb"]
