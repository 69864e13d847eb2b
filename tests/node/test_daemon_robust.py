"""Robustness of the daemon's ``gaml.v1.Memory`` service over real gRPC: hostile input to every method, concurrent
load from many clients, and a SIGKILL in the middle of a stream of puts.

The fuzzing runs as the socket's local principal (alice), whose memory is empty, on a node holding bob's private
assets and a grant of bob's to carol: every read alice can make finds nothing (so it logs nothing and heats nothing),
and every write she sends is refused by construction or skipped by :func:`could_write`. So the store must be
byte-for-byte unchanged afterwards, whatever the daemon answered.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import random
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gaml.node.core.service import MAX_SESSION_CHARS, IngestFile, check_turns
from gaml.node.core.store.kv import SPACES
from gaml.node.serve.client import Client
from gaml.node.serve.daemon import Daemon
from gaml.node.serve.runfiles import read_info
from gaml.node.shells.rocks_kv import RocksKV
from gaml.policy.errors import GamlError, InvalidInput
from gaml.v1 import asset_pb2, memory_pb2
from tests.node.cli_util import edit_config
from tests.node.daemon_util import (
    Home,
    make_home,
    mtls_client,
    process_daemon,
    remove_home,
    store_digest,
    thread_daemon,
    unix_client,
)

SERVICE: Final = memory_pb2.DESCRIPTOR.services_by_name["Memory"]
METHODS: Final = {m.name: m for m in SERVICE.methods}
UNARY: Final = sorted(name for name, m in METHODS.items() if not m.client_streaming)
Code = grpc.StatusCode
ALLOWED: Final = frozenset(
    {
        Code.OK,
        Code.INVALID_ARGUMENT,
        Code.NOT_FOUND,
        Code.PERMISSION_DENIED,
        Code.RESOURCE_EXHAUSTED,
        Code.FAILED_PRECONDITION,
        Code.UNAUTHENTICATED,
        Code.DEADLINE_EXCEEDED,
    }
)
REGISTERED: Final = ("alice", "bob", "carol")  # every principal the fuzz node knows (no teams)
CALL_TIMEOUT_S: Final = 60.0

# The fuzz node's limits. The rate limit is lifted so that no call is answered RATE_LIMITED instead of being
# exercised. alice (the socket) has the default sizes; bob (mTLS) has much smaller ones, to test per-principal limits.
MAX_REQUEST: Final = 64 * 1024
MAX_INGEST: Final = 32 * 1024
BOB_MAX_REQUEST: Final = 2048
BOB_MAX_INGEST: Final = 1024
FUZZ_LIMITS: Final = {
    "calls_per_second": 1_000_000,
    "burst": 1_000_000,
    "max_request_bytes": MAX_REQUEST,
    "max_ingest_bytes": MAX_INGEST,
    "principals": {"bob": {"max_request_bytes": BOB_MAX_REQUEST, "max_ingest_bytes": BOB_MAX_INGEST}},
}

FUZZ: Final = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def set_limits(home: Home, limits: dict[str, Any]) -> None:
    """Write ``limits`` into HOME/config.toml (read when a daemon starts)."""
    edit_config(home.path, lambda c: c.update(limits=limits))


# -- raw calls ---------------------------------------------------------------------------------------------------------


def unix_channel(home: Home) -> grpc.Channel:
    """A channel to the node's socket, made as ``Client.unix`` makes it."""
    return grpc.secure_channel(f"unix:{home.socket}", grpc.local_channel_credentials(grpc.LocalConnectionType.UDS))


def mtls_channel(home: Home, daemon: Daemon, principal: str) -> grpc.Channel:
    key, cert, ca = home.principals[principal]
    creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
    return grpc.secure_channel(f"127.0.0.1:{daemon.tcp_port}", creds)


@dataclass
class Raw:
    """Calls of ``gaml.v1.Memory`` with request bytes as given (no client-side serialization)."""

    channel: grpc.Channel

    def call(self, method: str, payload: bytes | Sequence[bytes]) -> tuple[grpc.StatusCode, bytes]:
        """The call's status and, when OK, its response bytes (which must decode as the method's response)."""
        out = self._invoke(method, payload)
        if isinstance(out, grpc.Call):
            return out.code(), (out.details() or "").encode()
        return Code.OK, out

    def reason(self, method: str, payload: bytes | Sequence[bytes]) -> str:
        """The ``google.rpc.ErrorInfo`` reason of a failed call ("" if it has none)."""
        out = self._invoke(method, payload)
        assert isinstance(out, grpc.Call), f"{method} succeeded"
        st_ = rpc_status.from_call(out)
        for d in st_.details if st_ is not None else ():
            info = error_details_pb2.ErrorInfo()
            if d.Unpack(info):
                return str(info.reason)
        return ""

    def _invoke(self, method: str, payload: bytes | Sequence[bytes]) -> bytes | grpc.Call:
        path = f"/gaml.v1.Memory/{method}"
        try:
            if METHODS[method].client_streaming:
                assert not isinstance(payload, bytes)
                fn = self.channel.stream_unary(path, request_serializer=None, response_deserializer=None)
                out = fn(iter(list(payload)), timeout=CALL_TIMEOUT_S)
            else:
                assert isinstance(payload, bytes)
                fn1 = self.channel.unary_unary(path, request_serializer=None, response_deserializer=None)
                out = fn1(payload, timeout=CALL_TIMEOUT_S)
        except grpc.RpcError as e:
            assert isinstance(e, grpc.Call)
            return e
        response_type(method).FromString(out)  # a successful answer is a well-formed response
        return bytes(out)

    def check(self, method: str, payload: bytes | Sequence[bytes]) -> grpc.StatusCode:
        code, detail = self.call(method, payload)
        assert code in ALLOWED, f"{method} answered {code.name}: {detail.decode(errors='replace')}"
        return code


def request_type(method: str) -> Any:
    return getattr(memory_pb2, METHODS[method].input_type.name)


def response_type(method: str) -> Any:
    return getattr(memory_pb2, METHODS[method].output_type.name)


# -- which requests could write -------------------------------------------------------------------------------------


def could_write(method: str, payload: bytes | Sequence[bytes]) -> bool:
    """Whether alice's call could succeed *and* change the store, judged conservatively from the bytes alone.

    Reads cannot: alice may read nothing on the fuzz node. Forget and Revoke cannot: alice owns no asset and made no
    grant (so a success there is a bug the digest shows). Put, Ingest and Grant can, unless their bytes do not
    decode or the decoded request is refused before it reaches the node."""
    try:
        if method == "Put":
            assert isinstance(payload, bytes)
            return len(memory_pb2.PutRequest.FromString(payload).assets) > 0
        if method == "Grant":
            assert isinstance(payload, bytes)
            g = memory_pb2.GrantRequest.FromString(payload)
            return g.grantee in REGISTERED and g.max_level in asset_pb2.Level.values() and g.max_level != 0
        if method == "Ingest":
            assert not isinstance(payload, bytes)
            return _ingest_could_write([memory_pb2.IngestRequest.FromString(p) for p in payload])
        if method == "AddPrincipal":  # registers (or rewrites) a principal unless the id is refused
            assert isinstance(payload, bytes)
            return bool(memory_pb2.AddPrincipalRequest.FromString(payload).id)
        if method == "Curate":  # every pending source when none is named; a name never ingested is NotFound
            assert isinstance(payload, bytes)
            return not memory_pb2.CurateRequest.FromString(payload).sources
        if method == "Backup":  # writes a backup wherever an absolute path points (and index snapshots first)
            assert isinstance(payload, bytes)
            return memory_pb2.BackupRequest.FromString(payload).directory.startswith("/")
        if method == "Remember":  # remembers unless the node refuses the turns (check_turns) or the session name
            assert isinstance(payload, bytes)
            r = memory_pb2.RememberRequest.FromString(payload)
            check_turns([{"role": t.role or "user", "content": t.content} for t in r.turns])
            return len(r.session) <= MAX_SESSION_CHARS and not any(c in r.session for c in "\x00\n")
    except Exception:  # the bytes do not decode: the daemon answers INVALID_ARGUMENT
        return False
    return False


def _ingest_could_write(stream: Sequence[memory_pb2.IngestRequest]) -> bool:
    files: list[tuple[memory_pb2.IngestFile, int]] = []
    total = 0
    for req in stream:
        part = req.WhichOneof("part")
        if part == "file":
            files.append((req.file, 0))
        elif part == "chunk":
            if not files:
                return False  # a chunk before any header is refused
            total += len(req.chunk)
            files[-1] = (files[-1][0], files[-1][1] + len(req.chunk))
    if not files or total > MAX_INGEST:
        return False
    for f, _ in files:
        if f.scope != 0 and f.scope not in asset_pb2.PrivacyScope.values():
            return False
        try:
            IngestFile(f.name, b"", format=f.format, item_budget=f.item_budget or 5000)
        except InvalidInput:
            return False
    return any(size > 0 for _, size in files)  # a valid stream of empty files reads no records


# -- the fuzz node ----------------------------------------------------------------------------------------------------


@dataclass
class FuzzNode:
    home: Home
    bob_assets: list[str]
    bob_grant: str

    @property
    def known_ids(self) -> list[str]:
        """Ids worth aiming at: bob's assets and grant, and near misses."""
        return [*self.bob_assets, self.bob_grant, "", "0" * 32, self.bob_assets[0].upper(), self.bob_grant + "x"]


def space_digests(home: Path) -> dict[str, tuple[int, int]]:
    """Per column family: (number of keys, hash of its contents), to tell which space changed."""
    kv = RocksKV(home / "db", create=False)
    try:
        return {cf: (len(rows := list(kv.load_range(cf))), hash(tuple(rows))) for cf in SPACES}
    finally:
        kv.close()


@pytest.fixture(scope="module")
def fuzz_node() -> Iterator[FuzzNode]:
    """A node holding bob's private assets and a grant of bob's to carol; alice (the socket) holds nothing."""
    home = make_home(REGISTERED)
    set_limits(home, FUZZ_LIMITS)
    try:
        with thread_daemon(home) as d:
            with mtls_client(home, d, "carol") as carol:
                carol.status()  # registers carol
            with mtls_client(home, d, "bob") as bob:
                ids = bob.put(
                    [
                        {
                            "asset_type": "fact",
                            "payload": {"text": f"bob's secret number {i} is {i * 7}"},
                            "tags": ["s"],
                        }
                        for i in range(6)
                    ]
                )
                grant = bob.grant("carol", "l2", tags=["s"])["id"]
        with thread_daemon(home, listen=False):  # settle: the first stop built and flushed the indexes
            pass
        yield FuzzNode(home, ids, grant)
    finally:
        remove_home(home)


@contextlib.contextmanager
def fuzzing(node: FuzzNode, caplog: pytest.LogCaptureFixture, *, listen: bool = False) -> Iterator[tuple[Raw, Daemon]]:
    """A daemon on the fuzz node and a raw channel to its socket. Afterwards: it still answers Status, logged no
    error, and once stopped the store is exactly what it was."""
    before, digest = space_digests(node.home.path), store_digest(node.home.path)
    with caplog.at_level(logging.WARNING), thread_daemon(node.home, listen=listen) as daemon:
        channel = unix_channel(node.home)
        try:
            grpc.channel_ready_future(channel).result(timeout=30)
            raw = Raw(channel)
            yield raw, daemon
            code, out = raw.call("Status", b"")
            assert code is Code.OK, "the daemon stopped answering"
            assert memory_pb2.StatusResponse.FromString(out).principal == "alice"
        finally:
            channel.close()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]
    after = space_digests(node.home.path)
    changed = sorted(cf for cf in SPACES if before[cf] != after[cf])
    assert not changed, f"refused or empty calls changed the store: spaces {changed}"
    assert store_digest(node.home.path) == digest


# -- strategies: raw wire bytes ---------------------------------------------------------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def wire_field(number: int, wire_type: int, value: bytes | int) -> bytes:
    """One protobuf field, encoded by hand (so its value need not fit the schema)."""
    key = varint((number << 3) | wire_type)
    if wire_type == 0:
        assert isinstance(value, int)
        return key + varint(value)
    assert isinstance(value, bytes)
    if wire_type == 2:
        return key + varint(len(value)) + value
    return key + value  # fixed 64 (1) or fixed 32 (5): the caller gives 8 or 4 bytes


@st.composite
def mutated_fields(draw: st.DrawFn, method: str) -> bytes:
    """A few fields with the request type's field numbers (or unknown ones) and values of any wire type: invalid
    UTF-8 in strings, any 64-bit number in enums, counts and times (negative int64s included), wrong wire types."""
    numbers = [f.number for f in request_type(method).DESCRIPTOR.fields] or [1]
    out = b""
    for _ in range(draw(st.integers(1, 4))):
        number = draw(st.sampled_from(numbers) | st.integers(1, 2**29 - 1))
        wire_type = draw(st.sampled_from([0, 1, 2, 5]))
        value: bytes | int
        if wire_type == 0:
            value = draw(st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 2**31, 2**32 - 1, 2**63, 2**64 - 1]))
        elif wire_type == 1:
            value = draw(st.binary(min_size=8, max_size=8))
        elif wire_type == 5:
            value = draw(st.binary(min_size=4, max_size=4))
        else:
            value = draw(st.binary(max_size=64) | st.text(max_size=16).map(str.encode))
        out += wire_field(number, wire_type, value)
    return out


# -- strategies: messages ---------------------------------------------------------------------------------------------

INT64: Final = st.integers(-(2**63), 2**63 - 1) | st.sampled_from([0, -1, 1, -(2**63), 2**63 - 1])
UINT32: Final = st.integers(0, 2**32 - 1) | st.sampled_from([0, 1, 2**31, 2**32 - 1])


def mostly(usual: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``usual`` four times in five, else ``odd``."""
    return st.integers(0, 4).flatmap(lambda n: odd if n == 4 else usual)


def enum(values: int) -> st.SearchStrategy[int]:
    """An enum number: mostly one of the ``values`` the schema defines (so that calls get past the first check and
    reach the node), else any int32, or just past the end."""
    odd = st.integers(-(2**31), 2**31 - 1) | st.sampled_from([-1, values])
    return mostly(st.integers(0, values - 1), odd)


TEXT: Final = st.text(max_size=40)
TEXTS: Final = st.lists(TEXT, max_size=4)
FLOAT: Final = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([math.nan, math.inf, -math.inf, -0.0])
JSON: Final = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | FLOAT | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def intents() -> st.SearchStrategy[memory_pb2.Intent]:
    return st.builds(memory_pb2.Intent, purpose=enum(7), location=enum(5))


def count(plausible: int) -> st.SearchStrategy[int]:
    """A uint32: mostly in ``[0, plausible]`` (so that calls reach the node), else anything up to 2**32 - 1."""
    return mostly(st.integers(0, plausible), UINT32)


def walks() -> st.SearchStrategy[memory_pb2.Walk]:
    return st.builds(
        memory_pb2.Walk,
        neighbours=count(8),
        entity_hops=count(4),
        entity_fanout=count(64),
        decay=st.one_of(st.floats(0, 1), st.floats(0, 1), FLOAT),
    )


@st.composite
def plane_segments(draw: st.DrawFn) -> memory_pb2.PlaneSegment:
    seg = memory_pb2.PlaneSegment(
        name=draw(st.sampled_from(["", "*"]) | TEXT),
        budget=draw(count(1_000_000)),
        seeds=draw(count(100)),
        fact_cap=draw(count(1000)),
    )
    if draw(st.booleans()):
        seg.walk.CopyFrom(draw(walks()))
    return seg


@st.composite
def assets(draw: st.DrawFn) -> asset_pb2.Asset:
    """A draft with random values that may or may not be valid on their own."""
    a = asset_pb2.Asset(
        asset_type=draw(st.integers(1, 22)),
        owner_id=draw(st.sampled_from(["", "alice"])),
        tenant_scope=draw(st.sampled_from(["", "acme"]) | TEXT),
        creator=draw(st.integers(0, 6)),
        confidence_score=draw(st.floats(0, 1)),
        privacy_scope=draw(st.integers(0, 7)),
        level=draw(st.integers(0, 4)),
        segment=draw(TEXT),
        goal=draw(TEXT),
        tags=draw(TEXTS),
        entities=draw(TEXTS),
        policy_tags=draw(TEXTS),
        created_at=draw(st.integers(0, 2**62)),
    )
    a.payload.update(draw(st.dictionaries(st.text(max_size=8), JSON, max_size=4)))
    a.payload.SetInParent()
    return a


POISONS: Final = (
    "asset_type unspecified",
    "asset_type unknown",
    "privacy_scope unknown",
    "level unknown",
    "another owner",
    "confidence above 1",
    "confidence negative",
    "created_at negative",
    "valid_to before valid_from",
    "reference not an id",
    "version given",
    "signature given",
    "source_node given",
    "tombstone given",
    "heat given",
    "id not the content id",
    "tenant asset without tenant",
    "source without source_id",
)


def poison(a: asset_pb2.Asset, how: str, n: int) -> None:
    """Make draft ``a`` one the node must refuse, in the way ``how`` names (``n`` varies the bad value)."""
    match how:
        case "asset_type unspecified":
            a.asset_type = 0
        case "asset_type unknown":
            a.asset_type = 23 + n % 10_000
        case "privacy_scope unknown":
            a.privacy_scope = 8 + n % 1000
        case "level unknown":
            a.level = 5 + n % 1000
        case "another owner":
            a.owner_id = ["bob", "carol", "mallory"][n % 3]
        case "confidence above 1":
            a.confidence_score = 1.0 + (n % 1000 + 1) / 7
        case "confidence negative":
            a.confidence_score = -(n % 1000 + 1) / 7
        case "created_at negative":
            a.created_at = -(n % 2**63) - 1
        case "valid_to before valid_from":
            a.valid_from, a.valid_to = n % 2**40 + 2, 1
        case "reference not an id":
            a.references.append(f"not-an-id-{n}")
        case "version given":  # the node sets version, signature, source_node, tombstone and heat
            a.version = n % 1000 + 1
        case "signature given":
            a.signature = n.to_bytes(9, "big") + b"sig"
        case "source_node given":
            a.source_node = f"node-{n}"
        case "tombstone given":
            a.tombstone = True
        case "heat given":
            a.heat.visits = n % 1000 + 1
        case "id not the content id":
            a.id = f"{n % 16**31:031x}g"
        case "tenant asset without tenant":
            a.privacy_scope, a.tenant_scope = asset_pb2.PRIVACY_SCOPE_TENANT_PRIVATE, ""
        case "source without source_id":
            a.source.end = n % 1000
        case _:
            raise AssertionError(how)


@st.composite
def poisoned_puts(draw: st.DrawFn) -> bytes:
    """A PutRequest of random drafts, at least one of them invalid by construction."""
    drafts = draw(st.lists(assets(), min_size=1, max_size=3))
    bad = draw(st.integers(0, len(drafts) - 1))
    poison(drafts[bad], draw(st.sampled_from(POISONS)), draw(st.integers(0, 2**64)))
    return bytes(memory_pb2.PutRequest(assets=drafts).SerializeToString())


def serialized(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    return strategy.map(lambda m: bytes(m.SerializeToString()))


def hostile_requests(method: str, node: FuzzNode) -> st.SearchStrategy[bytes]:
    """Well-formed messages of ``method``'s request type with hostile values (unknown enums, huge numbers, empty and
    random ids, random unicode, negative times, random repeated fields), or hand-made fields (:func:`mutated_fields`).

    Put is not here: see :func:`poisoned_puts`, whose batches are refused by construction."""
    ids = st.sampled_from(node.known_ids) | TEXT | st.text("0123456789abcdef", min_size=32, max_size=32)
    strategies: dict[str, st.SearchStrategy[bytes]] = {
        "Put": mutated_fields("Put"),
        "Get": serialized(st.builds(memory_pb2.GetRequest, intent=intents(), id=ids)),
        "Forget": serialized(st.builds(memory_pb2.ForgetRequest, id=ids)),
        "Revoke": serialized(st.builds(memory_pb2.RevokeRequest, grant_id=ids)),
        "Search": serialized(
            st.builds(
                memory_pb2.SearchRequest,
                intent=intents(),
                text=TEXT | st.sampled_from(["bob's secret number", "secret", "s"]),
                k=count(1000),
                mode=enum(4),
                as_of=INT64,
                types=st.lists(enum(23), max_size=3),
                segments=TEXTS,
                tags=TEXTS | st.just(["s"]),
                entities=TEXTS,
            )
        ),
        "Hydrate": serialized(
            st.builds(
                memory_pb2.HydrateRequest,
                intent=intents(),
                goal=mostly(st.text(min_size=1, max_size=40) | st.just("bob's secret number"), TEXT),
                budget=count(1_000_000),
                plane=st.lists(plane_segments(), max_size=3),
                mode=enum(6),
                as_of=INT64,
                counter=mostly(st.sampled_from(["", "heuristic", "cl100k_base", "o200k_base"]), TEXT),
            )
        ),
        "Grant": serialized(
            st.builds(
                memory_pb2.GrantRequest,
                grantee=st.sampled_from([*REGISTERED, "", "mallory"]) | TEXT,
                max_level=enum(5),
                segments=TEXTS,
                tags=TEXTS,
                time_from=INT64,
                time_to=INT64,
                expires_at=INT64,
            )
        ),
        "AccessLog": serialized(st.builds(memory_pb2.AccessLogRequest, limit=count(10_000))),
        "ListGrants": st.just(b""),
        "Status": st.just(b""),
        "Conflicts": serialized(
            st.builds(memory_pb2.ConflictsRequest, intent=intents(), slot=TEXT | st.sampled_from(["n:0", "s:[]"]))
        ),
        "Reputation": st.just(b""),
        "Principals": st.just(b""),
        "Sources": st.just(b""),
        "Maintain": st.just(b""),
        # Never an absolute path: one would be a backup written there (could_write leaves those out anyway).
        "Backup": serialized(
            st.builds(
                memory_pb2.BackupRequest,
                directory=st.sampled_from(["", "relative/dir", "../up", "~/x"]) | TEXT.filter(lambda s: s[:1] != "/"),
            )
        ),
        "AddPrincipal": serialized(
            st.builds(
                memory_pb2.AddPrincipalRequest,
                id=st.sampled_from(["", " ", "a b"]),
                kind=TEXT,
                tenants=TEXTS,
                roles=TEXTS,
                teams=TEXTS,
                on_behalf_of=TEXT,
            )
        ),
        "Curate": serialized(st.builds(memory_pb2.CurateRequest, sources=st.lists(TEXT, min_size=1, max_size=3))),
        "List": serialized(
            st.builds(
                memory_pb2.ListRequest,
                types=st.lists(enum(40), max_size=3),
                since=INT64,
                limit=st.integers(0, 2**32 - 1),
            )
        ),
        "Remember": serialized(
            st.builds(
                memory_pb2.RememberRequest,
                turns=st.lists(
                    st.builds(memory_pb2.Turn, role=st.sampled_from(["", "user", "robot"]) | TEXT, content=TEXT),
                    max_size=3,
                ),
                session=TEXT,
                curate=st.booleans(),
            )
        ),
        # On the fuzz node (in no boundary) every override is refused: nothing to choose between.
        "Override": serialized(st.builds(memory_pb2.OverrideRequest, slot=TEXT, choose=TEXT | ids, reason=TEXT)),
    }
    return mostly(strategies[method], mutated_fields(method))


@st.composite
def hostile_ingests(draw: st.DrawFn) -> list[bytes]:
    """An ingest stream that must be refused (or reads nothing): random headers and chunks with one flaw."""
    flaw = draw(
        st.sampled_from(["name", "format", "budget", "scope", "chunk first", "too big", "malformed", "empty files"])
    )
    header = memory_pb2.IngestFile(
        name=draw(st.text(min_size=1, max_size=20).filter(lambda s: "\x00" not in s)),
        format=draw(st.sampled_from(["", "transcript", "chat", "locomo", "text"])),
        tenant=draw(TEXT),
        segment=draw(TEXT),
        scope=draw(st.integers(0, 7)),
        item_budget=draw(st.integers(0, 1_000_000)),
    )
    if flaw == "name":
        header.name = draw(st.sampled_from(["", "a\x00b", "x" * 4097]))
    elif flaw == "format":
        header.format = draw(TEXT.filter(lambda s: s not in ("", "transcript", "chat", "locomo", "text")))
    elif flaw == "budget":
        header.item_budget = draw(st.integers(1_000_001, 2**32 - 1))
    elif flaw == "scope":
        header.scope = draw(st.integers(8, 2**31 - 1) | st.integers(-(2**31), -1))
    chunks = draw(st.lists(st.binary(min_size=1, max_size=512), max_size=3))
    if flaw == "empty files":
        chunks = []
    if flaw == "too big":
        chunks += [bytes(16 * 1024)] * 3
    msgs = [memory_pb2.IngestRequest(chunk=c) for c in chunks]
    head = memory_pb2.IngestRequest(file=header, no_curate=draw(st.booleans()))
    stream = [*msgs, head] if flaw == "chunk first" else [head, *msgs]
    out = [bytes(m.SerializeToString()) for m in stream]
    if flaw == "malformed":
        out.insert(draw(st.integers(0, len(out))), draw(st.binary(min_size=1, max_size=64)))
    return out


@st.composite
def valid_requests(draw: st.DrawFn, method: str) -> bytes | list[bytes]:
    """A valid request of ``method`` (with, sometimes, an unknown field appended, which parsers must skip)."""
    text = st.text(min_size=1, max_size=30)
    msg: Any
    if method == "Ingest":
        head = memory_pb2.IngestRequest(file=memory_pb2.IngestFile(name="notes.txt", format="text"))
        body = [memory_pb2.IngestRequest(chunk=draw(text).encode()) for _ in range(draw(st.integers(0, 3)))]
        return [bytes(m.SerializeToString()) for m in (head, *body)]
    if method == "Put":
        msg = memory_pb2.PutRequest(
            assets=[
                asset_pb2.Asset(asset_type=asset_pb2.ASSET_TYPE_FACT, tags=draw(TEXTS))
                for _ in range(draw(st.integers(1, 3)))
            ]
        )
        for a in msg.assets:
            a.payload.update({"text": draw(text)})
    elif method in ("Get", "Forget", "Revoke"):
        msg = request_type(method)(**{"grant_id" if method == "Revoke" else "id": draw(text)})
        if method == "Get":
            msg.intent.purpose, msg.intent.location = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    elif method == "Search":
        msg = memory_pb2.SearchRequest(text=draw(text), k=draw(st.integers(1, 1000)), tags=draw(TEXTS))
    elif method == "Hydrate":
        msg = memory_pb2.HydrateRequest(
            goal=draw(text), budget=draw(st.integers(1, 5000)), mode=draw(st.integers(0, 5))
        )
    elif method == "Grant":
        msg = memory_pb2.GrantRequest(grantee="carol", max_level=draw(st.integers(1, 4)), tags=draw(TEXTS))
    elif method == "AccessLog":
        msg = memory_pb2.AccessLogRequest(limit=draw(st.integers(1, 10_000)))
    else:
        msg = request_type(method)()
    out = bytes(msg.SerializeToString())
    if draw(st.booleans()):
        out += wire_field(1000, 2, draw(st.binary(max_size=16)))
    return out


# -- 1. bad input ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", list(METHODS))
def test_random_bytes_get_a_clean_status_and_change_nothing(
    method: str, fuzz_node: FuzzNode, caplog: pytest.LogCaptureFixture
) -> None:
    """Random bytes as a request (for Ingest, as each message of the stream) are answered with an expected status,
    never INTERNAL or UNKNOWN; the daemon keeps serving and the store is unchanged."""
    with fuzzing(fuzz_node, caplog) as (raw, _):
        seen: set[grpc.StatusCode] = set()

        @settings(FUZZ, max_examples=120)
        @given(data=st.binary(max_size=512), chunks=st.lists(st.binary(max_size=256), max_size=4))
        def check(data: bytes, chunks: list[bytes]) -> None:
            payload: bytes | list[bytes] = chunks if METHODS[method].client_streaming else data
            assume(not could_write(method, payload))
            seen.add(raw.check(method, payload))

        check()
        assert seen, "every example was filtered out"


@pytest.mark.parametrize("method", list(METHODS))
def test_truncated_requests_get_a_clean_status_and_change_nothing(
    method: str, fuzz_node: FuzzNode, caplog: pytest.LogCaptureFixture
) -> None:
    """A valid request cut short (for Ingest, one message of the stream cut) is answered with an expected status;
    the daemon keeps serving and the store is unchanged."""
    with fuzzing(fuzz_node, caplog) as (raw, _):
        seen: set[grpc.StatusCode] = set()

        @settings(FUZZ, max_examples=60)
        @given(request=valid_requests(method), where=st.floats(0, 1, exclude_max=True), which=st.integers(0, 10))
        def check(request: bytes | list[bytes], where: float, which: int) -> None:
            if isinstance(request, bytes):
                payload: bytes | list[bytes] = request[: int(len(request) * where)]
            else:
                i = which % len(request)
                payload = [*request[:i], request[i][: int(len(request[i]) * where)], *request[i + 1 :]]
            assume(not could_write(method, payload))
            seen.add(raw.check(method, payload))

        check()
        assert seen, "every example was filtered out"


@pytest.mark.parametrize("method", list(METHODS))
def test_hostile_field_values_get_a_clean_status_and_change_nothing(
    method: str, fuzz_node: FuzzNode, caplog: pytest.LogCaptureFixture
) -> None:
    """Well-formed requests with hostile values (unknown enum numbers, huge budgets and counts, empty and foreign
    ids, random unicode, negative times, random repeated fields, hand-made fields of any wire type, a batch of
    drafts with one invalid) are answered with an expected status; nothing is written and the daemon keeps serving."""
    with fuzzing(fuzz_node, caplog) as (raw, _):
        seen: set[grpc.StatusCode] = set()
        requests: st.SearchStrategy[tuple[bool, bytes | list[bytes]]]
        if method == "Ingest":
            requests = st.tuples(st.just(False), hostile_ingests())
        elif method == "Put":  # a poisoned batch is refused by construction: decoding it says nothing
            requests = st.tuples(st.just(True), poisoned_puts()) | st.tuples(st.just(False), mutated_fields(method))
        else:
            requests = st.tuples(st.just(False), hostile_requests(method, fuzz_node))

        @settings(FUZZ, max_examples=150)
        @given(request=requests)
        def check(request: tuple[bool, bytes | list[bytes]]) -> None:
            refused_by_construction, payload = request
            assume(refused_by_construction or not could_write(method, payload))
            seen.add(raw.check(method, payload))

        check()
        assert seen, "every example was filtered out"
        if method in ("Search", "Hydrate", "AccessLog", "ListGrants", "Status", "Conflicts", "Reputation", "List"):
            assert Code.OK in seen, "no hostile request got past the checks: the fuzz did not reach the node"


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_a_payload_number_json_cannot_hold_is_invalid_argument(
    number: float, fuzz_node: FuzzNode, caplog: pytest.LogCaptureFixture
) -> None:
    """A draft whose payload holds NaN or an infinity (a Struct can carry them, JSON cannot) is refused
    INVALID_ARGUMENT, not INTERNAL, and nothing is written."""
    a = asset_pb2.Asset(asset_type=asset_pb2.ASSET_TYPE_FACT)
    a.payload.update({"text": "a reading", "value": number})
    with fuzzing(fuzz_node, caplog) as (raw, _):
        assert raw.call("Put", bytes(memory_pb2.PutRequest(assets=[a]).SerializeToString()))[0] is Code.INVALID_ARGUMENT


def test_messages_of_another_method_get_a_clean_status_and_change_nothing(
    fuzz_node: FuzzNode, caplog: pytest.LogCaptureFixture
) -> None:
    """A valid request of one method sent to another (its fields reread under another schema) is answered with an
    expected status; nothing is written."""
    with fuzzing(fuzz_node, caplog) as (raw, _):

        @settings(FUZZ, max_examples=200)
        @given(source=st.sampled_from(UNARY), target=st.sampled_from(list(METHODS)), data=st.data())
        def check(source: str, target: str, data: st.DataObject) -> None:
            others = poisoned_puts() if source == "Put" else hostile_requests(source, fuzz_node)
            request = data.draw(valid_requests(source) | others)
            assert isinstance(request, bytes)
            payload: bytes | list[bytes] = [request] if METHODS[target].client_streaming else request
            assume(not could_write(target, payload))
            raw.check(target, payload)

        check()


def oversized(method: str, size: int) -> bytes | list[bytes]:
    """A well-formed request of ``method`` of at least ``size`` bytes that the node must refuse whatever its size
    (a Put for another owner, a Grant to no one, an Ingest of an unknown format; the rest only read)."""
    blob = "x" * size
    msg: Any
    if method == "Ingest":
        head = memory_pb2.IngestRequest(file=memory_pb2.IngestFile(name="big.txt", format="bogus"))
        chunks = [memory_pb2.IngestRequest(chunk=bytes(16 * 1024)) for _ in range(size // (16 * 1024) + 1)]
        return [bytes(m.SerializeToString()) for m in (head, *chunks)]
    if method == "Put":
        msg = memory_pb2.PutRequest(assets=[asset_pb2.Asset(asset_type=1, owner_id="carol")])
        msg.assets[0].payload.update({"text": blob})
    elif method in ("Get", "Forget"):
        msg = request_type(method)(id=blob)
    elif method == "Revoke":
        msg = memory_pb2.RevokeRequest(grant_id=blob)
    elif method == "Search":
        msg = memory_pb2.SearchRequest(text=blob)
    elif method == "Hydrate":
        msg = memory_pb2.HydrateRequest(goal=blob, budget=100)
    elif method == "Grant":
        msg = memory_pb2.GrantRequest(grantee="mallory", max_level=2, tags=[blob])
    else:  # no fields: an unknown one, which the message keeps (and counts)
        return wire_field(1000, 2, blob.encode())
    out = bytes(msg.SerializeToString())
    assert len(out) >= size
    return out


@pytest.mark.parametrize("method", list(METHODS))
def test_oversized_requests_are_resource_exhausted(
    method: str, fuzz_node: FuzzNode, caplog: pytest.LogCaptureFixture
) -> None:
    """A request over the transport limit, and one over the caller's own size limit but under the transport's (for
    Ingest: a stream over the caller's ingest limit), are refused RESOURCE_EXHAUSTED; nothing is written."""
    with fuzzing(fuzz_node, caplog) as (raw, daemon):
        transport = daemon.limits.largest_request_bytes
        if METHODS[method].client_streaming:
            head = memory_pb2.IngestRequest(file=memory_pb2.IngestFile(name="a.txt", format="bogus"))
            over_transport = [bytes(head.SerializeToString()), wire_field(2, 2, bytes(4 * transport))]
            assert raw.check(method, over_transport) is Code.RESOURCE_EXHAUSTED
            over_own = oversized(method, MAX_INGEST + 1)
            assert raw.check(method, over_own) is Code.RESOURCE_EXHAUSTED
            assert raw.reason(method, over_own) == "TOO_LARGE"
        else:
            assert raw.check(method, wire_field(1000, 2, bytes(4 * transport))) is Code.RESOURCE_EXHAUSTED
            over_own = oversized(method, MAX_REQUEST + 1024)
            assert raw.check(method, over_own) is Code.RESOURCE_EXHAUSTED
            assert raw.reason(method, over_own) == "TOO_LARGE"  # refused by the node's check, not by the transport


@pytest.mark.parametrize("method", list(METHODS))
def test_per_principal_size_limits_hold_over_mtls(
    method: str, fuzz_node: FuzzNode, caplog: pytest.LogCaptureFixture
) -> None:
    """bob's own, smaller limits (``limits.principals`` in config.toml) refuse his request over mutual TLS with
    RESOURCE_EXHAUSTED, while the same bytes from alice, under her limit, are not refused for their size."""
    with fuzzing(fuzz_node, caplog, listen=True) as (raw, daemon):
        size = (BOB_MAX_INGEST if METHODS[method].client_streaming else BOB_MAX_REQUEST) + 512
        request = oversized(method, size)
        bob = mtls_channel(fuzz_node.home, daemon, "bob")
        try:
            assert Raw(bob).check(method, request) is Code.RESOURCE_EXHAUSTED
            assert Raw(bob).reason(method, request) == "TOO_LARGE"
        finally:
            bob.close()
        assert raw.check(method, request) is not Code.RESOURCE_EXHAUSTED


# -- 2. load --------------------------------------------------------------------------------------------------------

LOAD_CLIENTS: Final = 8
LOAD_CALLS: Final = 500
# All eight clients are the same local principal, so they share one token bucket; at the default 200 calls/s (burst
# 400) most of their calls would be answered RATE_LIMITED. This test is about correctness under concurrency, not the
# limiter, so the limit is lifted.
LOAD_LIMITS: Final = {"calls_per_second": 100_000, "burst": 100_000}


@dataclass
class LoadLog:
    """What the load's clients saw, shared under a lock."""

    lock: threading.Lock
    expected: dict[str, dict[str, Any]]  # id -> the payload put
    grants: set[str]
    hits: list[tuple[str, dict[str, Any]]]  # (id, payload) of every search hit
    errors: list[str]


def load_client(home: Home, i: int, log: LoadLog) -> None:
    """Client ``i``: LOAD_CALLS mixed calls, seeded, checking each answer against what it did before."""
    rnd = random.Random(i)
    mine: dict[str, dict[str, Any]] = {}
    my_grants: set[str] = set()
    # Weights per 100 calls. Status and grants are light: the node's Status decrypts every stored asset to count them,
    # and every read decrypts every grant, so each costs O(assets) or O(grants) on the single core thread.
    ops = ["put"] * 28 + ["get"] * 38 + ["search"] * 10 + ["hydrate"] * 6 + ["status"] * 3 + ["log"] * 8
    ops += ["grant"] * 2 + ["grants"] * 5
    with unix_client(home, timeout_s=CALL_TIMEOUT_S) as c:
        for n in range(LOAD_CALLS):
            op = "put" if not mine else rnd.choice(ops)
            if op == "put":
                payloads = [
                    {"text": f"client {i} note {n}.{j} about {rnd.choice(['tea', 'trains', 'tides'])}", "n": n}
                    for j in range(rnd.randint(1, 2))
                ]
                ids = c.put([{"asset_type": "fact", "payload": p, "tags": [f"c{i}"]} for p in payloads])
                assert len(ids) == len(payloads) == len(set(ids)), ids
                mine.update(zip(ids, payloads, strict=True))
                with log.lock:
                    log.expected.update(zip(ids, payloads, strict=True))
            elif op == "get":
                id_ = rnd.choice(sorted(mine))
                asset = c.get(id_)
                assert (asset["id"], asset["payload"]) == (id_, mine[id_])
                assert (asset["asset_type"], asset["owner_id"], asset["tags"]) == ("fact", "alice", [f"c{i}"])
            elif op == "search":
                id_ = rnd.choice(sorted(mine))
                hits = c.search(mine[id_]["text"], k=5)
                assert hits and all(h["asset"]["owner_id"] == "alice" for h in hits)
                with log.lock:
                    log.hits += [(h["id"], h["asset"]["payload"]) for h in hits]
            elif op == "hydrate":
                out = c.hydrate(rnd.choice(list(mine.values()))["text"], budget=300)
                assert out["frame"].startswith("<gaml-memory") and out["receipt"]["budget"]["spent"] <= 300
            elif op == "status":
                st_ = c.status()
                assert st_["principal"] == "alice" and st_["assets"] >= len(mine)
            elif op == "log":
                records = c.access_log(limit=20)
                assert len(records) <= 20 and all(r["who"] == "alice" for r in records)
            elif op == "grant":
                g = c.grant("bob", "l1", tags=[f"load-{i}-{n}"])
                assert (g["owner"], g["grantee"], g["max_level"], g["tags"]) == (
                    "alice",
                    "bob",
                    "l1",
                    [f"load-{i}-{n}"],
                )
                my_grants.add(g["id"])
                with log.lock:
                    log.grants.add(g["id"])
            else:
                made = {g["id"] for g in c.grants()["made"]}
                assert my_grants <= made


@pytest.mark.slow  # tens of seconds: `make test-slow` (make test keeps under 15 minutes)
def test_concurrent_clients_lose_no_write_and_see_consistent_answers() -> None:
    """Eight clients making 500 mixed calls each, concurrently: no call fails, every put is stored and read back
    exactly, the asset count is the number of distinct assets put, searches return only assets that were put (with
    their payloads), and every grant made is listed."""
    home = make_home(("bob",))
    set_limits(home, LOAD_LIMITS)
    log = LoadLog(threading.Lock(), {}, set(), [], [])
    try:
        with thread_daemon(home) as daemon:
            with mtls_client(home, daemon, "bob") as bob:
                bob.status()  # registers bob, the grantee

            def run(i: int) -> None:
                try:
                    load_client(home, i, log)
                except BaseException as e:  # reported by the test, with the client it happened in
                    with log.lock:
                        log.errors.append(f"client {i}: {type(e).__name__}: {e}")

            threads = [threading.Thread(target=run, args=(i,), name=f"load-{i}") for i in range(LOAD_CLIENTS)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join(600)
            wall = time.perf_counter() - t0
            assert not any(t.is_alive() for t in threads), "a client hung"
            assert log.errors == []
            with unix_client(home) as c:
                assert c.status()["assets"] == len(log.expected)
                for id_, payload in log.expected.items():
                    assert c.get(id_)["payload"] == payload
                assert {g["id"] for g in c.grants()["made"]} == log.grants
            for id_, payload in log.hits:
                assert log.expected[id_] == payload
            print(f"load: {LOAD_CLIENTS} clients x {LOAD_CALLS} calls in {wall:.1f} s")
    finally:
        remove_home(home)


# -- 3. SIGKILL under load ------------------------------------------------------------------------------------------

KILL_WRITERS: Final = 4
KILL_AFTER: Final = 300


def test_acknowledged_puts_survive_sigkill_of_the_daemon_and_it_restarts_over_stale_files() -> None:
    """Four clients put continuously; the daemon process is SIGKILLed once 300 puts are acknowledged. A new daemon
    starts on the same home despite the stale socket and run/daemon.json, and every acknowledged put is there with
    its payload (at most one unacknowledged put per client may also be there)."""
    home = make_home(tls=False)
    set_limits(home, LOAD_LIMITS)  # four writers as one principal: lift the rate limit (see LOAD_LIMITS)
    lock = threading.Lock()
    acked: dict[str, str] = {}
    enough, killed = threading.Event(), threading.Event()
    unexpected: list[str] = []

    def writer(i: int, client: Client) -> None:
        for n in itertools.count():
            text = f"writer {i} put {n}"
            try:
                (id_,) = client.put([{"asset_type": "fact", "payload": {"text": text}}])
            except BaseException as e:  # after the kill every call fails; before it, none may
                if not (killed.is_set() and isinstance(e, GamlError)):
                    unexpected.append(f"writer {i}: {type(e).__name__}: {e}")
                    enough.set()  # wake the test: it fails on `unexpected`
                return
            with lock:
                acked[id_] = text
                if len(acked) >= KILL_AFTER:
                    enough.set()

    try:
        with process_daemon(home) as proc:
            clients = [unix_client(home, timeout_s=CALL_TIMEOUT_S) for _ in range(KILL_WRITERS)]
            threads = [threading.Thread(target=writer, args=(i, c)) for i, c in enumerate(clients)]
            for t in threads:
                t.start()
            reached = enough.wait(300)
            killed.set()
            proc.process.kill()
            for t in threads:
                t.join(60)
            for c in clients:
                c.close()
            assert unexpected == []
            assert reached and len(acked) >= KILL_AFTER
            assert proc.process.wait(60) == -signal.SIGKILL
            assert not any(t.is_alive() for t in threads)
            killed_pid = proc.pid()
        assert home.socket.is_socket()  # stale: its daemon is dead
        info = read_info(home.path)
        assert info is not None and info["pid"] == killed_pid

        with process_daemon(home) as again:
            with unix_client(home) as c:
                status = c.status()
                assert len(acked) <= status["assets"] <= len(acked) + KILL_WRITERS
                for id_, text in acked.items():
                    assert c.get(id_)["payload"] == {"text": text}
            info = read_info(home.path)
            assert info is not None and info["pid"] == again.pid()
    finally:
        remove_home(home)
