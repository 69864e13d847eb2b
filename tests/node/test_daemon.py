"""The daemon over real gRPC: every ``gaml.v1.Memory`` RPC over the Unix socket and over TCP with mutual TLS, health
and reflection, the refusals of authentication (no or a foreign client certificate, revoked certificates, another
local user), typed error statuses, limits, deadlines, malformed bytes, the CLI through a running daemon, the trio
guest, and a graceful SIGTERM shutdown.

Every wait is on an event (the daemon's readiness, a log record, a call's completion), never on a sleep; no assertion
is on elapsed time."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import trio
from google.protobuf.descriptor_pool import DescriptorPool
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from grpc_status import rpc_status

from gaml.node.core.embed import HashEmbedder
from gaml.node.core.errors import DeadlineExceeded, RateLimited, TooLarge, Unauthenticated, Unavailable
from gaml.node.core.store.vectors import AdaptiveFactory
from gaml.node.core.text.parsers import parse
from gaml.node.serve import daemon as daemon_mod
from gaml.node.serve.client import Client
from gaml.node.serve.daemon import INDEX_CHUNK, Daemon, settle_heap
from gaml.node.serve.runfiles import info_path
from gaml.node.shells import certs
from gaml.node.shells.file_keychain import FileKeychain
from gaml.node.shells.hnsw_index import HnswFactory, Inserter
from gaml.policy import crypto
from gaml.policy.errors import GamlError, InvalidAsset, InvalidInput, NotFound, PolicyError, UnknownPrincipal
from gaml.v1 import asset_pb2, memory_pb2
from tests.node.cli_util import edit_config
from tests.node.daemon_util import (
    LOCAL,
    ROOT,
    UNLOCK,
    Home,
    gaml_process,
    make_home,
    mtls_client,
    process_daemon,
    remove_home,
    thread_daemon,
    unix_client,
)

SESSION = ROOT / "deploy" / "examples" / "session.jsonl"
SERVICE = "gaml.v1.Memory"
METHODS = {
    "Ingest",
    "Put",
    "Get",
    "Forget",
    "Search",
    "Hydrate",
    "Grant",
    "Revoke",
    "ListGrants",
    "AccessLog",
    "Status",
    "Conflicts",
    "Reputation",
    "Override",
    "Remember",
    "List",
    "Principals",
    "AddPrincipal",
    "Sources",
    "Curate",
    "Maintain",
    "Backup",
}
TRANSPORTS = ("unix", "mtls")
NOBODY = 65534
WAIT_S = 30.0  # an upper bound for events that come at once; reaching it fails the test


# -- helpers -----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Served:
    """A home and the daemon serving it (socket, and TCP with mutual TLS on 127.0.0.1)."""

    home: Home
    daemon: Daemon

    def connect(self, transport: str, principal: str = LOCAL) -> Client:
        """A client: over the socket (as the local principal) or over mTLS with ``principal``'s certificate."""
        if transport == "unix":
            assert principal == LOCAL, "over the socket the caller is the local principal"
            return unix_client(self.home)
        return mtls_client(self.home, self.daemon, principal)


@contextlib.contextmanager
def served(limits: dict[str, Any] | None = None, **options: Any) -> Iterator[Served]:
    """A fresh home (with ``limits`` in its config.toml) served by a daemon on a thread; removed afterwards."""
    home = make_home()
    try:
        if limits is not None:
            edit_config(home.path, lambda c: c.update(limits=limits))
        with thread_daemon(home, **options) as daemon:
            yield Served(home, daemon)
    finally:
        remove_home(home)


@pytest.fixture(scope="module")
def node() -> Iterator[Served]:
    """One daemon for the checks that only read, or write assets of their own."""
    with served() as s:
        yield s


@pytest.fixture(params=TRANSPORTS)
def alice(request: pytest.FixtureRequest) -> Iterator[tuple[Served, Client, str]]:
    """A fresh node, and alice's client over the transport of the parameter."""
    with served() as s, s.connect(request.param) as client:
        yield s, client, request.param


class DaemonLog(logging.Handler):
    """The daemon's log events (``{"event": …, **fields}``) as they are emitted, with a wait for one."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self._cond:
            self.events.append({"event": record.getMessage(), **getattr(record, "fields", {})})
            self._cond.notify_all()

    def wait_for(self, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        with self._cond:
            found = self._cond.wait_for(lambda: any(match(e) for e in self.events), WAIT_S)
            assert found, f"no such log event; the last ones: {self.events[-5:]}"
            return next(e for e in self.events if match(e))


@contextlib.contextmanager
def daemon_log() -> Iterator[DaemonLog]:
    """Record the ``gaml.daemon`` logger's events (INFO and up) for the duration."""
    logger = logging.getLogger("gaml.daemon")
    handler, level = DaemonLog(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@dataclasses.dataclass(frozen=True)
class Failure:
    """A failed call as the wire carries it: the status code, and the ErrorInfo / RetryInfo details."""

    code: grpc.StatusCode
    message: str
    has_details: bool
    domain: str = ""
    reason: str = ""
    type: str = ""
    retry_s: float = 0.0


def failure(call: Callable[..., Any], request: Any, **kw: Any) -> Failure:
    """Call a raw stub method (or multi-callable), expect a grpc.RpcError, and read its status and details."""
    with pytest.raises(grpc.RpcError) as caught:
        call(request, timeout=kw.pop("timeout", WAIT_S), **kw)
    e = caught.value
    assert isinstance(e, grpc.Call)
    st = rpc_status.from_call(e)
    out = Failure(e.code(), e.details() or "", st is not None)
    for d in st.details if st is not None else ():
        if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            d.Unpack(info)
            out = dataclasses.replace(out, domain=info.domain, reason=info.reason, type=info.metadata["type"])
        elif d.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            r = error_details_pb2.RetryInfo()
            d.Unpack(r)
            out = dataclasses.replace(out, retry_s=r.retry_delay.seconds + r.retry_delay.nanos / 1e9)
    return out


def fact(text: str, **kw: Any) -> dict[str, Any]:
    return {"asset_type": "fact", "payload": {"text": text}, **kw}


def wire_fact(text: str, **kw: Any) -> asset_pb2.Asset:
    a = asset_pb2.Asset(asset_type=asset_pb2.ASSET_TYPE_FACT, **kw)
    a.payload.update({"text": text})
    return a


def session_records() -> int:
    """How many records the example session holds, by the parser itself (the oracle of an ingest report)."""
    return sum(len(s.records) for s in parse(SESSION.read_bytes(), SESSION.name, None, origin=str(SESSION)))


# -- 1. every RPC, over both transports --------------------------------------------------------------------------------


def test_ingest_streams_a_session_and_forget_erases_an_ingested_item(alice: tuple[Served, Client, str]) -> None:
    """Ingest streams a transcript into the caller's journal (every record read, items written, curated; a second
    stream of it is skipped by the watermark); Forget erases one ingested item, which Get then reports not found."""
    _, client, _ = alice
    records = session_records()
    report = client.ingest([SESSION])
    assert report["files"] == 1
    assert report["records"] == records > 0
    assert 0 < report["items"] <= records
    assert report["curation"]["rungs"] > 0

    again = client.ingest([SESSION])
    assert again["records"] == again["skipped"] == records
    assert again["items"] == 0

    hits = client.search("fix the failing login test in the billing service", k=50)
    items = [h for h in hits if h["asset"]["level"] == "l0" and "format:transcript" in h["asset"]["tags"]]
    assert items, "the search finds no ingested item"
    victim = items[0]["id"]
    assert client.get(victim)["owner_id"] == "alice"

    receipt = client.forget(victim)
    assert receipt["id"] and receipt["at"] > 0
    assert receipt["rebuilt_sources"] >= 1  # the session's rungs were recompiled without it
    with pytest.raises(NotFound):
        client.get(victim)
    assert victim not in {h["id"] for h in client.search("fix the failing login test in the billing service", k=50)}


def test_put_get_search_hydrate_and_the_access_log(alice: tuple[Served, Client, str]) -> None:
    """Put stores drafts; Get returns the decrypted payload; Search finds the asset; Hydrate returns a frame in its
    envelope within the budget, with a receipt; the access log holds the get, the search and the hydration."""
    _, client, transport = alice
    text = f"Alice drinks oat-milk flat whites (over {transport})"
    ids = client.put([fact(text), fact("The release ships on Friday after the freeze")])
    assert len(ids) == 2 and len(set(ids)) == 2
    drink = ids[0]

    got = client.get(drink)
    assert got["id"] == drink
    assert got["payload"] == {"text": text}
    assert got["owner_id"] == "alice"

    hits = client.search("oat-milk flat whites")
    assert hits[0]["id"] == drink
    assert hits[0]["asset"]["payload"]["text"] == text

    out = client.hydrate("what does Alice drink?", budget=300)
    frame, receipt = out["frame"], out["receipt"]
    assert frame.startswith("<gaml-memory")
    assert receipt["budget"]["total"] == 300
    assert 0 < receipt["budget"]["spent"] <= receipt["budget"]["total"]
    assert receipt["receipt"].startswith("r_")
    assert f'receipt="{receipt["receipt"]}"' in frame
    assert "oat-milk flat whites" in frame

    log = client.access_log()
    assert {r["who"] for r in log} == {"alice"}
    by_kind = {r["kind"]: r for r in log}
    assert set(by_kind) == {"get", "search", "hydrate"}
    assert drink in {i["id"] for i in by_kind["get"]["read"]}
    assert drink in {i["id"] for i in by_kind["search"]["read"]}
    assert by_kind["hydrate"]["receipt"] == receipt["receipt"]
    assert drink in {i["id"] for i in by_kind["hydrate"]["read"]}


def test_grant_list_and_revoke(alice: tuple[Served, Client, str]) -> None:
    """A grant names a principal the node knows; Grant gives bob part of alice's memory, ListGrants shows it to both
    sides (bob over mTLS sees it as received), and Revoke ends it (revoked_at set)."""
    s, client, _ = alice
    with pytest.raises(UnknownPrincipal):
        client.grant("bob", "l2")  # bob has not authenticated yet: the node does not know him

    with s.connect("mtls", "bob") as bob:
        assert bob.status()["principal"] == "bob"
        g = client.grant("bob", "l2", segments=["work"])
        assert (g["owner"], g["grantee"], g["max_level"], g["segments"]) == ("alice", "bob", "l2", ["work"])
        assert g["created_at"] > 0 and g["revoked_at"] == 0

        assert g["id"] in {x["id"] for x in client.grants()["made"]}
        assert g["id"] in {x["id"] for x in bob.grants()["received"]}

        revoked = client.revoke(g["id"])
        assert revoked["id"] == g["id"]
        assert revoked["revoked_at"] >= g["created_at"] > 0
        made = {x["id"]: x for x in client.grants()["made"]}
        assert made[g["id"]]["revoked_at"] == revoked["revoked_at"]
        received = {x["id"]: x for x in bob.grants()["received"]}
        assert received[g["id"]]["revoked_at"] == revoked["revoked_at"]  # bob sees that it ended, and when


def test_status_names_the_caller_and_its_transport(alice: tuple[Served, Client, str]) -> None:
    """Status says who the caller is to the node (alice, from the socket or her certificate) and how it came in."""
    s, client, transport = alice
    st = client.status()
    assert st["principal"] == st["user"] == "alice"
    assert st["transport"] == transport
    assert s.daemon.service is not None
    assert st["node_id"] == s.daemon.service.node.node_id
    assert st["embedder"] == "hash-v1-256"
    assert st["version"] == "0.1.0"
    assert st["calls"] >= 1


# -- 2. health and reflection ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_health_reports_serving(node: Served, transport: str) -> None:
    """The standard health service answers SERVING for the server ("") and for gaml.v1.Memory."""
    with node.connect(transport) as c:
        health = health_pb2_grpc.HealthStub(c.channel)
        for service in ("", SERVICE):
            r = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=WAIT_S)
            assert r.status == health_pb2.HealthCheckResponse.SERVING, service


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_reflection_describes_the_service(node: Served, transport: str) -> None:
    """Server reflection lists gaml.v1.Memory with its eleven methods (Ingest client-streaming) and its messages."""
    with node.connect(transport) as c:
        db = ProtoReflectionDescriptorDatabase(c.channel)
        assert SERVICE in db.get_services()
        pool = DescriptorPool(db)
        svc = pool.FindServiceByName(SERVICE)
        assert {m.name for m in svc.methods} == METHODS
        assert svc.methods_by_name["Ingest"].client_streaming
        assert not svc.methods_by_name["Put"].client_streaming
        hydrate = pool.FindMessageTypeByName("gaml.v1.HydrateRequest")
        assert {"intent", "goal", "budget", "plane"} <= set(hydrate.fields_by_name)


# -- 3. authentication -------------------------------------------------------------------------------------------------


def _tcp(node: Served, creds: grpc.ChannelCredentials) -> Client:
    return Client(grpc.secure_channel(f"127.0.0.1:{node.daemon.tcp_port}", creds), timeout_s=WAIT_S)


def test_tcp_without_a_client_certificate_gets_no_service(node: Served) -> None:
    """A TLS client that trusts the node's CA but presents no certificate fails the handshake: no call reaches the
    node (UNAVAILABLE on the client, the daemon's call count unchanged)."""
    ca = node.home.principals["alice"][2]
    calls = node.daemon.calls
    with _tcp(node, grpc.ssl_channel_credentials(root_certificates=ca)) as c:
        assert failure(c.stub.Status, memory_pb2.StatusRequest()).code is grpc.StatusCode.UNAVAILABLE
        with pytest.raises(Unavailable):
            c.status()
    assert node.daemon.calls == calls


def test_tcp_with_a_certificate_of_another_ca_gets_no_service(node: Served) -> None:
    """A client certificate naming alice but signed by another CA fails the handshake: no call reaches the node."""
    now = int(time.time())
    other_key, other_cert = crypto.make_ca("elsewhere", now)
    key, cert, _ = crypto.issue_cert(other_key, other_cert, "alice", now)
    ca = node.home.principals["alice"][2]
    calls = node.daemon.calls
    with Client.mtls(f"127.0.0.1:{node.daemon.tcp_port}", key, cert, ca, timeout_s=WAIT_S) as c:
        assert failure(c.stub.Status, memory_pb2.StatusRequest()).code is grpc.StatusCode.UNAVAILABLE
        with pytest.raises(Unavailable):
            c.status()
    assert node.daemon.calls == calls


def _keychain(home: Home) -> FileKeychain:
    return FileKeychain.open(home.path / "keychain.json", UNLOCK, crypto.SystemEntropy())


def test_revoked_certificates_and_principals_are_refused_on_the_next_call() -> None:
    """Revoking a certificate serial while the daemon runs refuses its next call (UNAUTHENTICATED, typed details),
    even on a connection already open; another certificate of the same principal still works. Revoking a principal
    refuses every certificate of it. The socket's local principal is unaffected."""
    home = make_home()
    try:
        kc = FileKeychain.open(home.path / "keychain.json", UNLOCK, crypto.SystemEntropy())
        spare_dir = home.path.parent / "spare"
        spare_dir.mkdir()
        certs.issue_client(home.path, kc, "alice", spare_dir, int(time.time()))
        spare = certs.load_client(*certs.client_paths(spare_dir, "alice"))
        with thread_daemon(home) as daemon:
            s = Served(home, daemon)
            address = f"127.0.0.1:{daemon.tcp_port}"
            with (
                s.connect("mtls", "alice") as first,
                Client.mtls(address, *spare, timeout_s=WAIT_S) as second,
                s.connect("mtls", "bob") as bob,
                s.connect("unix") as local,
            ):
                assert first.status()["principal"] == second.status()["principal"] == "alice"
                assert bob.status()["principal"] == "bob"

                serial = crypto.cert_info(home.principals["alice"][1]).serial_hex
                assert serial != crypto.cert_info(spare[1]).serial_hex
                certs.revoke(home.path, int(time.time()), keychain=_keychain(home), serial=serial)
                with pytest.raises(Unauthenticated):
                    first.status()
                f = failure(first.stub.Put, memory_pb2.PutRequest(assets=[wire_fact("after revocation")]))
                assert (f.code, f.domain, f.reason, f.type) == (
                    grpc.StatusCode.UNAUTHENTICATED,
                    "gaml.dev",
                    "UNAUTHENTICATED",
                    "Unauthenticated",
                )
                assert serial in f.message
                assert second.status()["principal"] == "alice"  # revocation is per certificate

                certs.revoke(home.path, int(time.time()), keychain=_keychain(home), principal="bob")
                with pytest.raises(Unauthenticated):
                    bob.status()
                assert failure(bob.stub.Status, memory_pb2.StatusRequest()).code is grpc.StatusCode.UNAUTHENTICATED
                assert second.status()["principal"] == "alice"
                assert local.status()["transport"] == "unix"
                assert local.search("after revocation", mode=3) == []  # the refused put wrote nothing
    finally:
        remove_home(home)


# The child that tries the socket as another user: stdlib only (it may run on an interpreter without the venv). It
# connects, then reads what the server says first (an HTTP/2 SETTINGS frame when served; b"" when the gate closes the
# connection); if it can import the GAML client, it also calls Status.
PROBE = r"""
import errno, json, socket, sys
out = {}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
try:
    s.connect(sys.argv[1])
except OSError as e:
    out["connect"] = errno.errorcode.get(e.errno, str(e.errno))
else:
    out["connect"] = "ok"
    try:
        out["received"] = len(s.recv(4096))
    except OSError as e:
        out["recv_error"] = errno.errorcode.get(e.errno, str(e.errno))
s.close()
try:
    sys.path.insert(0, sys.argv[2])
    from gaml.node.serve.client import Client
except ImportError:
    pass
else:
    try:
        Client.unix(sys.argv[1], timeout_s=30).status()
        out["status"] = "ok"
    except Exception as e:
        out["status"] = type(e).__name__
print(json.dumps(out))
"""


def _run_probe(python: str, sock: Path, uid: int | None) -> dict[str, Any]:
    as_user: dict[str, Any] = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
    r = subprocess.run(
        [python, "-c", PROBE, str(sock), str(ROOT)],
        capture_output=True,
        text=True,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
        timeout=120,
        check=False,
        **as_user,
    )
    assert r.returncode == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def _runs_as(python: str, uid: int) -> bool:
    try:
        r = subprocess.run(
            [python, "-c", "pass"], user=uid, group=uid, extra_groups=[], cwd="/", capture_output=True, check=False
        )
    except OSError:
        return False
    return r.returncode == 0


@pytest.fixture(scope="module")
def nobody_python() -> str:
    """An interpreter uid 65534 can run: the test's own if it can (then the child also tries a gRPC call), else the
    system's (then the child checks at the socket level only)."""
    if os.getuid() != 0:
        pytest.skip("running a child as another user (uid 65534) needs root")
    candidates = [sys.executable, shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")]
    for python in candidates:
        if python and _runs_as(python, NOBODY):
            return python
    pytest.skip(f"no Python interpreter that uid {NOBODY} may run among {candidates}")


def _open_path_to_socket(home: Home) -> None:
    """Make every directory down to the socket traversable by others, so that only the socket's own mode (and then
    the gate) stands between another user and the daemon."""
    for d in (home.path.parent, home.path, home.socket.parent):
        os.chmod(d, 0o711)


def test_another_local_user_cannot_open_the_socket(nobody_python: str) -> None:
    """The socket is created 0600: another user (uid 65534), even with every directory on the way open to it, gets
    EACCES from connect(); the daemon's own user connects and is served."""
    with served() as s:
        _open_path_to_socket(s.home)
        assert stat.S_IMODE(s.home.socket.stat().st_mode) == 0o600
        calls = s.daemon.calls
        other = _run_probe(nobody_python, s.home.socket, NOBODY)
        assert other["connect"] == "EACCES", other
        assert other.get("status", "Unavailable") == "Unavailable"
        assert s.daemon.calls == calls
        me = _run_probe(nobody_python, s.home.socket, None)
        assert me["connect"] == "ok" and me["received"] > 0, me  # the server's HTTP/2 SETTINGS
        with s.connect("unix") as c:
            assert c.status()["principal"] == "alice"


def test_the_gate_refuses_another_uid_by_peer_credentials(nobody_python: str) -> None:
    """With the socket opened to everyone (0666), another user's connection is accepted by the kernel but closed at
    once by the gate (SO_PEERCRED uid check): it reads nothing, no call reaches the node, and the daemon logs a
    "refused" event with uid 65534. The daemon's own user is still served."""
    with served() as s, daemon_log() as log:
        _open_path_to_socket(s.home)
        os.chmod(s.home.socket, 0o666)
        calls = s.daemon.calls
        other = _run_probe(nobody_python, s.home.socket, NOBODY)
        assert other["connect"] == "ok", other
        assert other.get("received", 0) == 0 and "recv_error" not in other, other
        assert other.get("status", "Unavailable") == "Unavailable"
        refused = log.wait_for(lambda e: e["event"] == "refused" and e.get("uid") == NOBODY)
        assert refused["transport"] == "unix" and refused["reason"] == "uid"
        assert s.daemon.calls == calls
        assert not any(e["event"] == "call" for e in log.events)
        me = _run_probe(nobody_python, s.home.socket, None)
        assert me["connect"] == "ok" and me["received"] > 0, me
        with s.connect("unix") as c:
            assert c.status()["principal"] == "alice"


# -- 4. errors: status codes with typed details ------------------------------------------------------------------------


def test_put_for_another_owner_is_permission_denied(node: Served) -> None:
    """A put naming another owner is refused PERMISSION_DENIED (POLICY_DENIED, PolicyError); the client raises
    PolicyError."""
    with node.connect("unix") as c:
        f = failure(c.stub.Put, memory_pb2.PutRequest(assets=[wire_fact("bob's secret", owner_id="bob")]))
        assert (f.code, f.domain, f.reason, f.type) == (
            grpc.StatusCode.PERMISSION_DENIED,
            "gaml.dev",
            "POLICY_DENIED",
            "PolicyError",
        )
        with pytest.raises(PolicyError):
            c.put([fact("bob's secret", owner_id="bob")])


def test_reading_another_users_private_asset_is_answered_as_a_missing_id(node: Served) -> None:
    """bob (over mTLS) may not read alice's private asset: answered exactly as an id that does not exist (NOT_FOUND,
    the same details and message shape), so a guessed id confirms nothing; alice may read it."""
    with node.connect("unix") as a, node.connect("mtls", "bob") as bob:
        (id_,) = a.put([fact("alice's private diary entry")])
        f = failure(bob.stub.Get, memory_pb2.GetRequest(id=id_))
        none = failure(bob.stub.Get, memory_pb2.GetRequest(id="0" * 32))
        assert (f.code, f.domain, f.reason, f.type) == (grpc.StatusCode.NOT_FOUND, "gaml.dev", "NOT_FOUND", "NotFound")
        assert dataclasses.replace(f, message=f.message.replace(id_, "0" * 32)) == none
        with pytest.raises(NotFound):
            bob.get(id_)
        assert a.get(id_)["payload"]["text"] == "alice's private diary entry"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_get_of_an_unknown_id_is_not_found(node: Served, transport: str) -> None:
    """Get of an id the node never stored is NOT_FOUND (NotFound); the client raises NotFound."""
    with node.connect(transport) as c:
        f = failure(c.stub.Get, memory_pb2.GetRequest(id="0" * 32))
        assert (f.code, f.domain, f.reason, f.type) == (grpc.StatusCode.NOT_FOUND, "gaml.dev", "NOT_FOUND", "NotFound")
        with pytest.raises(NotFound):
            c.get("0" * 32)


INVALID = {
    "unknown asset_type": (
        "Put",
        memory_pb2.PutRequest(assets=[asset_pb2.Asset(asset_type=999)]),
        "INVALID_ASSET",
        InvalidAsset,
    ),
    "hydrate budget 0": (
        "Hydrate",
        memory_pb2.HydrateRequest(goal="anything", budget=0),
        "INVALID_INPUT",
        InvalidInput,
    ),
    "unknown intent.purpose": (
        "Get",
        memory_pb2.GetRequest(id="0" * 32, intent=memory_pb2.Intent(purpose=99)),
        "INVALID_INPUT",
        InvalidInput,
    ),
}


@pytest.mark.parametrize("case", INVALID, ids=list(INVALID))
def test_invalid_requests_are_invalid_argument(node: Served, case: str) -> None:
    """Requests the node cannot accept (an asset_type or a purpose number the schema does not define, a budget of
    0) are INVALID_ARGUMENT with an ErrorInfo whose type is an InvalidInput (or InvalidAsset) class."""
    method, request, reason, cls = INVALID[case]
    with node.connect("unix") as c:
        f = failure(getattr(c.stub, method), request)
    assert (f.code, f.domain, f.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "gaml.dev", reason)
    assert issubclass(_error_class(f.type), cls)


def _error_class(name: str) -> type[BaseException]:
    """The GAML error class an ErrorInfo type names (searched among the subclasses of GamlError)."""
    todo: list[type[BaseException]] = [GamlError]
    while todo:
        cls = todo.pop()
        if cls.__name__ == name:
            return cls
        todo += cls.__subclasses__()
    raise AssertionError(f"{name} is not a GAML error class")


class OutageEmbedder(HashEmbedder):
    """The hash embedder, except that it fails (as a model server that is down would) on texts saying OUTAGE."""

    def embed(self, texts: Any) -> Any:
        if any("OUTAGE" in t for t in texts):
            raise GamlError("the embedding model is unavailable")
        return super().embed(texts)


def test_a_dense_search_when_the_embedder_fails_is_failed_precondition() -> None:
    """A search that states the dense path cannot be answered when the embedder fails on its text:
    FAILED_PRECONDITION (GAML_ERROR) rather than a silently weaker answer; a hydration degrades instead and declares
    its fallback."""
    with served(embedder=OutageEmbedder()) as s, s.connect("unix") as c:
        c.put([fact("Fire drills happen every Tuesday")])
        request = memory_pb2.SearchRequest(text="OUTAGE fire drills", mode=memory_pb2.SEARCH_MODE_DENSE)
        f = failure(c.stub.Search, request)
        assert (f.code, f.domain, f.reason, f.type) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "gaml.dev",
            "GAML_ERROR",
            "GamlError",
        )
        assert "embedding model is unavailable" in f.message
        assert c.search("fire drills", mode=2)[0]["asset"]["payload"]["text"] == "Fire drills happen every Tuesday"
        out = c.hydrate("OUTAGE fire drills", budget=200)
        assert "embedding model is unavailable" in out["receipt"]["fallback"]
        assert "Fire drills happen every Tuesday" in out["frame"]


def test_requests_over_the_size_limits_are_resource_exhausted() -> None:
    """Per principal: a request over max_request_bytes is RESOURCE_EXHAUSTED (TOO_LARGE, TooLarge), an ingest
    stream over max_ingest_bytes too, while a principal with a larger limit is served; a message over the transport's
    limit (the largest per-principal limit plus a margin) is refused by gRPC itself. Nothing refused is stored."""
    limits = {"max_request_bytes": 4096, "max_ingest_bytes": 2048, "principals": {"bob": {"max_request_bytes": 65536}}}
    with served(limits) as s, s.connect("unix") as c, s.connect("mtls", "bob") as bob:
        (small,) = c.put([fact("x" * 3000)])
        big = memory_pb2.PutRequest(assets=[wire_fact("y" * 5000)])
        assert big.ByteSize() > 4096
        f = failure(c.stub.Put, big)
        assert (f.code, f.domain, f.reason, f.type) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "gaml.dev",
            "TOO_LARGE",
            "TooLarge",
        )
        with pytest.raises(TooLarge):
            c.put([fact("y" * 5000)])
        assert SESSION.stat().st_size > 2048
        with pytest.raises(TooLarge):
            c.ingest([SESSION])

        (bobs,) = bob.put([fact("y" * 5000)])  # bob's own limit is larger

        huge = memory_pb2.PutRequest(assets=[wire_fact("z" * 200_000)])
        f = failure(c.stub.Put, huge)
        assert f.code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert not f.has_details  # gRPC refused the message before any GAML code saw it
        assert failure(bob.stub.Put, huge).code is grpc.StatusCode.RESOURCE_EXHAUSTED

        st = c.status()
        assert st["assets"] == 2
        assert c.get(small)["payload"]["text"] == "x" * 3000
        assert bob.get(bobs)["payload"]["text"] == "y" * 5000


def test_a_principal_over_its_rate_limit_is_resource_exhausted_with_a_retry_delay() -> None:
    """With a burst of 3 calls (refilled at 0.001 call/s, so no refill happens during the test), alice's 4th call is
    refused RESOURCE_EXHAUSTED (RATE_LIMITED) with a RetryInfo delay; the client raises RateLimited with
    retry_after_s > 0. bob's bucket is his own."""
    with served({"calls_per_second": 0.001, "burst": 3}) as s, s.connect("unix") as c:
        for _ in range(3):
            assert c.status()["principal"] == "alice"
        with pytest.raises(RateLimited) as limited:
            c.status()
        assert limited.value.retry_after_s > 0
        f = failure(c.stub.Status, memory_pb2.StatusRequest())
        assert (f.code, f.domain, f.reason, f.type) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "gaml.dev",
            "RATE_LIMITED",
            "RateLimited",
        )
        assert f.retry_s > 0
        with s.connect("mtls", "bob") as bob:
            assert bob.status()["principal"] == "bob"


def test_a_call_past_its_deadline_is_deadline_exceeded_and_atomic(node: Served) -> None:
    """A put with a 1 µs deadline fails DEADLINE_EXCEEDED (the client raises DeadlineExceeded) — unless it was
    answered first: gRPC checks deadlines on its own timer, and a call it completes before that timer fires succeeds
    (even a 0 s deadline does, measured: 149 of 200 Status calls on a loaded machine) — and its batch either fully
    happened or did not happen at all: never one of its two assets without the other. (A deadline that passes while
    the call waits is tested deterministically below.)"""
    token = "quagga7341"
    batch = [fact(f"{token} first of a batch"), fact(f"{token} second of a batch")]
    with node.connect("unix") as c:
        with contextlib.suppress(DeadlineExceeded):
            c.put(batch, timeout_s=0.000001)
        wire = memory_pb2.PutRequest(assets=[wire_fact(f"{token} raw first"), wire_fact(f"{token} raw second")])
        try:
            c.stub.Put(wire, timeout=0.000001)
        except grpc.RpcError as e:
            assert isinstance(e, grpc.Call) and e.code() is grpc.StatusCode.DEADLINE_EXCEEDED, e
        found = {h["asset"]["payload"]["text"] for h in c.search(token, k=10, mode=3)}
    for pair in ({d["payload"]["text"] for d in batch}, {f"{token} raw first", f"{token} raw second"}):
        assert pair <= found or not (pair & found), found


def test_a_call_whose_deadline_passes_while_it_waits_for_the_core_does_nothing(node: Served) -> None:
    """While the core thread is busy, a put whose deadline passes is given up (DEADLINE_EXCEEDED on the client,
    the call logged as cancelled or DeadlineExceeded) and, once the core is free, it is not run: nothing is stored."""
    token = "okapi2718"
    d = node.daemon
    with node.connect("unix") as c, daemon_log() as log:
        before = c.status()["assets"]
        release = threading.Event()
        busy = asyncio.run_coroutine_threadsafe(d.lane.run(lambda: release.wait(WAIT_S)), d._loop)
        try:
            with pytest.raises(DeadlineExceeded):
                c.put([fact(f"{token} never stored")], timeout_s=2.0)  # ample time to reach the node
            given_up = log.wait_for(lambda e: e["event"] == "call" and e.get("method") == "Put")
        finally:
            release.set()
        assert busy.result(WAIT_S) is True
        assert given_up["outcome"] in ("cancelled", "DeadlineExceeded")
        assert c.status()["assets"] == before
        assert c.search(token, mode=3) == []


# -- 5. malformed bytes ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_malformed_request_bytes_are_invalid_argument(node: Served, transport: str) -> None:
    """Bytes that are not a protobuf message, sent raw to Put (unary) and to Ingest (client stream), are answered
    INVALID_ARGUMENT with typed details, not INTERNAL; the daemon goes on serving."""
    with node.connect(transport) as c:
        put = c.channel.unary_unary(f"/{SERVICE}/Put", request_serializer=None, response_deserializer=None)
        f = failure(put, b"\xff\xff\xff")
        assert (f.code, f.domain, f.reason, f.type) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "gaml.dev",
            "INVALID_INPUT",
            "InvalidInput",
        )
        ingest = c.channel.stream_unary(f"/{SERVICE}/Ingest", request_serializer=None, response_deserializer=None)
        f = failure(ingest, iter([b"\xff\xff\xff"]))
        assert (f.code, f.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_INPUT")
        assert c.status()["principal"] == "alice"


# -- 6. the CLI through a running daemon -------------------------------------------------------------------------------


def _gaml(home: Home, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return gaml_process(home.path, *argv, stdin=stdin, timeout_s=120)


# What a client must not import: the daemon's module, replication, libp2p and trio (its top-level packages, any part).
_HEAVY = ("gaml.node.serve.daemon", "gaml.node.serve.replicator", "libp2p", "trio")
_REPORT_IMPORTS = (
    "import json, sys\n"
    f"heavy = {_HEAVY!r}\n"
    "print(json.dumps(sorted(m for m in sys.modules if m in heavy or m.split('.')[0] in heavy)))"
)


def _light_child(code: str, stdin: str | None = None) -> tuple[list[str], list[str]]:
    """Run ``code`` in a fresh interpreter: the lines it printed, and which of :data:`_HEAVY` it had imported."""
    r = subprocess.run(
        [sys.executable, "-c", f"{code}\n{_REPORT_IMPORTS}\n"],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    *printed, imported = r.stdout.strip().splitlines()
    return printed, json.loads(imported)


def test_a_command_and_the_sdk_reach_the_daemon_without_importing_the_server() -> None:
    """`gaml put` and a search through the SDK's ``connect`` find the daemon from its run files and talk to it over
    the socket without importing the daemon's own module (its server, replication over libp2p, trio): importing that
    took ~0.6 s of every command's start. That they went through the daemon shows in what they write and read: the
    daemon holds the store, so nothing else could have answered."""
    home = make_home(("alice",), tls=False)
    try:
        with thread_daemon(home, listen=False), unix_client(home) as c:
            argv = ["--home", str(home.path), "put", "-"]
            put = (
                "import runpy, sys\n"
                f"sys.argv = ['gaml', *{argv!r}]\n"
                "try:\n    runpy.run_module('gaml.node.cli', run_name='__main__')\nexcept SystemExit as e:\n"
                "    assert not e.code, e.code"
            )
            (new_id,), imported = _light_child(put, json.dumps(fact("the light client wrote this")))
            assert imported == []
            assert c.get(new_id)["payload"]["text"] == "the light client wrote this"
            search = (
                "from gaml.node import connect\n"
                f"with connect({str(home.path)!r}) as m:\n"
                "    print(m.search('light client', k=1)[0].asset.payload['text'])"
            )
            assert _light_child(search) == (["the light client wrote this"], [])
    finally:
        remove_home(home)


def test_strings_of_digits_come_back_through_the_daemon_as_strings() -> None:
    """A goal "2024" comes back in the receipt and the access log as the string "2024", and a principal named "1000"
    as "1000" (the client turned every digit-only string of an answer into an int); whole numbers stay ints."""
    home = make_home(("alice", "1000"))
    try:
        with thread_daemon(home) as d, unix_client(home) as a, mtls_client(home, d, "1000") as other:
            a.put([fact("the 2024 budget review is on friday")])
            r = _gaml(home, "hydrate", "--goal", "2024", "--budget", "300", "--json")
            assert r.returncode == 0, r.stderr
            receipt = json.loads(r.stdout)["receipt"]
            assert receipt["goal"] == "2024" and isinstance(receipt["budget"]["total"], int)
            (entry,) = [e for e in a.access_log() if e["kind"] == "hydrate"]
            assert entry["goal"] == "2024" and entry["budget"]["total"] == 300
            assert other.status()["principal"] == "1000"
            assert isinstance(a.status()["assets"], int)
    finally:
        remove_home(home)


def test_stats_has_the_same_fields_with_and_without_a_daemon() -> None:
    """`gaml stats --json` prints the same fields whether the store answers or a running daemon does, with the same
    counts; only a daemon has an uptime and a call count (null on the store)."""
    home = make_home(("alice",), tls=False)
    try:
        assert _gaml(home, "principal", "add", "alice").returncode == 0
        r = _gaml(home, "put", "--as", "alice", "-", stdin=json.dumps(fact("Alice drinks oat-milk flat whites")))
        assert r.returncode == 0, r.stderr
        r = _gaml(home, "stats", "--json")
        assert r.returncode == 0, r.stderr
        on_store = json.loads(r.stdout)
        with thread_daemon(home, listen=False):
            r = _gaml(home, "stats", "--json")
            assert r.returncode == 0, r.stderr
            through_daemon = json.loads(r.stdout)
    finally:
        remove_home(home)
    assert set(on_store) == set(through_daemon)
    assert (on_store["transport"], through_daemon["transport"]) == ("store", "unix")
    assert on_store["uptime_seconds"] is None and through_daemon["uptime_seconds"] >= 0
    for k in ("node_id", "embedder", "assets", "tombstones", "journal_seq", "principal", "user", "version"):
        assert on_store[k] == through_daemon[k], k
    assert on_store["assets"] == 1 and on_store["principal"] == "alice"
    assert set(on_store["partitions"]) == set(through_daemon["partitions"]) and on_store["partitions"]


@pytest.mark.slow  # tens of seconds: `make test-slow` (make test keeps under 15 minutes)
def test_the_cli_goes_through_a_running_daemon() -> None:
    """With a daemon serving the home, `gaml stats/put/search/hydrate/access-log/ingest` run through it as its local
    principal; `--as` another principal is refused (exit 5); principals, sources, curate and maintain run through
    it; a command that needs the store says the daemon holds
    the database, naming its pid (exit 3)."""
    with served() as s:
        r = _gaml(s.home, "stats", "--json")
        assert r.returncode == 0, r.stderr
        st = json.loads(r.stdout)
        assert (st["principal"], st["transport"]) == ("alice", "unix")

        r = _gaml(s.home, "put", "-", stdin=json.dumps(fact("Alice drinks oat-milk flat whites")))
        assert r.returncode == 0, r.stderr
        (id_,) = r.stdout.split()

        r = _gaml(s.home, "search", "oat-milk flat whites", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)[0]["id"] == id_

        r = _gaml(s.home, "hydrate", "--goal", "what does Alice drink?", "--budget", "300", "--json")
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["frame"].startswith("<gaml-memory") and "oat-milk flat whites" in out["frame"]

        r = _gaml(s.home, "access-log", "--json")
        assert r.returncode == 0, r.stderr
        log = json.loads(r.stdout)
        assert [x["kind"] for x in log] == ["hydrate", "search"]  # newest first
        assert all(id_ in {i["id"] for i in x["read"]} for x in log)

        r = _gaml(s.home, "ingest", str(SESSION), "--owner", "alice")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["records"] == session_records()

        r = _gaml(s.home, "search", "oat-milk", "--as", "bob")
        assert r.returncode == 5, r.stderr  # refused
        assert "over its socket you are alice" in r.stderr and "bob" in r.stderr

        # The node's administration goes through the daemon too, as its own user on the socket.
        r = _gaml(s.home, "principal", "add", "dora", "--tenant", "acme")
        assert r.returncode == 0, r.stderr
        r = _gaml(s.home, "principals")
        assert r.returncode == 0 and "dora" in {p["id"] for p in json.loads(r.stdout)}, r.stderr
        r = _gaml(s.home, "sources", "--json")
        assert r.returncode == 0 and json.loads(r.stdout)[0]["records"] == session_records(), r.stderr
        for command in ("curate", "maintain"):
            r = _gaml(s.home, command)
            assert r.returncode == 0 and isinstance(json.loads(r.stdout), dict), r.stderr

        r = _gaml(s.home, "redact", "0" * 32)  # it needs the store itself, which the daemon holds
        assert r.returncode == 3, r.stderr
        assert f"the daemon (pid {os.getpid()}) holds the database" in r.stderr

        with s.connect("unix") as c:
            assert c.status()["assets"] > 1  # the ingest went to the daemon's store


# -- 7. the trio guest -------------------------------------------------------------------------------------------------


def test_trio_runs_as_a_guest_on_the_daemons_loop(node: Served) -> None:
    """trio runs in guest mode while the daemon serves: TrioGuest.call runs a trio function from asyncio and hands
    back its result, or its error."""
    d = node.daemon
    assert d.trio.running

    async def in_trio() -> bool:
        await trio.sleep(0)
        return trio.lowlevel.current_trio_token() is not None

    async def fails() -> None:
        await trio.sleep(0)
        raise ValueError("raised in trio")

    assert asyncio.run_coroutine_threadsafe(d.trio.call(in_trio), d._loop).result(WAIT_S) is True
    with pytest.raises(ValueError, match="raised in trio"):
        asyncio.run_coroutine_threadsafe(d.trio.call(fails), d._loop).result(WAIT_S)
    assert d.trio.running


def test_vectors_put_through_the_daemon_are_indexed_in_the_background_without_a_restart() -> None:
    """Vectors written since the last checkpoint move into their HNSW index while the daemon is idle, in several
    steps (more vectors than one step takes), logged once as ``indexed``; search finds them as before."""
    n = 2 * INDEX_CHUNK + 7
    with daemon_log() as log, served() as s, unix_client(s.home) as c:
        ids = c.put([fact(f"background indexing fact {i}: the kettle {i} boils") for i in range(n)])
        event = log.wait_for(lambda e: e["event"] == "indexed")
        assert event["vectors"] == n and event["s"] >= 0
        st = c.status()
        assert st["pending"] == 0 and st["indexed"] >= n
        assert s.daemon.indexed_in_background == n
        hits = c.search(f"background indexing fact {n - 1}: the kettle {n - 1} boils", mode=2)
        assert hits and hits[0]["id"] == ids[-1]


def test_a_backlog_over_its_bound_is_indexed_between_calls_without_an_idle_moment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the lane never idle long enough (INDEX_IDLE_S an hour), vectors still move into their index once more
    than INDEX_BACKLOG wait: the indexer counts the backlog after calls ran (it did not before it had once stepped,
    so a bulk write with no pause was never indexed while it lasted), then steps between calls."""
    monkeypatch.setattr(daemon_mod, "INDEX_IDLE_S", 3600.0)
    monkeypatch.setattr(daemon_mod, "INDEX_BACKLOG", 64)
    n = 200
    with daemon_log() as log, served() as s, unix_client(s.home) as c:
        c.put([fact(f"bulk fact {i}: the lamp {i} hums") for i in range(n)])
        event = log.wait_for(lambda e: e["event"] == "indexed")
        assert event["vectors"] == n
        assert s.daemon.indexed_in_background == n and c.status()["pending"] == 0


def test_the_indexer_waits_for_an_insert_off_the_lane_so_calls_are_served_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While an HNSW insert is still going in on the inserter's thread, the background indexer waits for it on the
    event loop, not on the lane: a step on the lane would wait there for it (an add settles the insert before it), and
    every call queued behind. Here every insert is held until released: a put and a status call are still served, no
    second step is taken meanwhile, and once let go every vector goes in and search finds them."""
    monkeypatch.setattr(
        "gaml.node.home._index_factory",
        lambda inserter=None: AdaptiveFactory(HnswFactory(inserter=inserter), threshold=16),  # HNSW from the 17th
    )
    release = threading.Event()
    submit = Inserter.submit

    def held(self: Inserter, fn: Callable[[], Any]) -> Any:
        return submit(self, lambda: (release.wait(WAIT_S), fn())[1])

    monkeypatch.setattr(Inserter, "submit", held)
    n = INDEX_CHUNK + 100  # more than one step: the indexer wants a second while the first's insert waits
    with daemon_log() as log, served() as s, unix_client(s.home) as c:
        inserter = s.daemon.inserter
        try:
            c.put([fact(f"held insert fact {i}: the clock {i} ticks") for i in range(n)])
            deadline = time.monotonic() + WAIT_S
            while inserter.last is None:  # the first step ran on the lane and handed its insert over
                assert time.monotonic() < deadline, "the indexer never stepped"
                time.sleep(0.01)
            queued = inserter.last
            more = c.put([fact(f"a fact put while the insert waits {i}") for i in range(3)], timeout_s=WAIT_S / 3)
            st = c.status(timeout_s=WAIT_S / 3)
            assert len(more) == 3 and st["pending"] >= 3 and inserter.last is queued and not queued.done()
        finally:
            release.set()
        event = log.wait_for(lambda e: e["event"] == "indexed")
        assert event["vectors"] == n + 3 and c.status()["pending"] == 0
        text = f"held insert fact {n - 1}: the clock {n - 1} ticks"
        hits = c.search(text, mode=2)
        assert hits and hits[0]["asset"]["payload"]["text"] == text


class _Cell:
    """A collectable object that can hold itself (a cycle) and be weakly referenced."""

    def __init__(self) -> None:
        self.me: _Cell | None = None


def _cycle() -> tuple[_Cell, weakref.ref[_Cell]]:
    c = _Cell()
    c.me = c
    return c, weakref.ref(c)


def test_settle_heap_freezes_what_survives_and_only_collecting_all_frees_a_cycle_frozen_alive() -> None:
    """``young``: the young cyclic garbage is collected and what survives is frozen, out of every generation a
    collection walks; a frozen object that becomes cyclic garbage later stays until ``all`` is collected."""
    try:
        gc.collect()
        kept, kept_ref = _cycle()
        dropped, dropped_ref = _cycle()
        del dropped
        assert dropped_ref() is not None  # cyclic: reference counting cannot free it
        settle_heap("young")
        assert dropped_ref() is None
        assert gc.get_freeze_count() > 0 and not any(o is kept for o in gc.get_objects())
        del kept
        gc.collect()
        assert kept_ref() is not None  # frozen when alive: no collection looks at it …
        settle_heap("all")
        assert kept_ref() is None  # … until the heap is collected whole
    finally:
        gc.unfreeze()


def test_the_daemon_opens_with_the_collector_waiting_and_freezes_what_it_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No collection runs while the daemon opens its node (a young one would walk all that the open loaded: at a
    million assets, its views and their tables), and once open what it loaded is frozen and the collector is back."""
    opening = threading.Event()
    during: list[int] = []
    open_node = Daemon._open_node

    def watched(self: Daemon) -> Any:
        opening.set()
        try:
            return open_node(self)
        finally:
            opening.clear()

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and opening.is_set():
            during.append(info["generation"])

    monkeypatch.setattr(Daemon, "_open_node", watched)
    home = make_home()
    gc.callbacks.append(record)
    try:
        with thread_daemon(home) as daemon, unix_client(home) as c:
            assert daemon.service is not None
            assert gc.isenabled() and gc.get_freeze_count() > 0
            for start in range(0, 2000, 500):
                c.put([fact(f"the opener's fact number {i}", tags=[f"t{i % 7}"]) for i in range(start, start + 500)])
        assert during == []
        # Again, on a node with a snapshot to load: its 2,000 views alone are more objects than a young collection
        # waits for.
        with thread_daemon(home), unix_client(home) as c:
            assert c.search("opener")
        assert during == []
    finally:
        gc.callbacks.remove(record)
        gc.unfreeze()
        remove_home(home)


def test_the_daemon_freezes_what_calls_leave_and_collects_the_whole_heap_once_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every ``FREEZE_CALLS`` calls what they left is frozen, and once no call has run for ``HEAP_IDLE_S`` the whole
    heap is collected, frozen objects included, logged once as ``heap_settled``; with no freeze since, none is."""
    monkeypatch.setattr(daemon_mod, "HEAP_IDLE_S", 0.2)
    monkeypatch.setattr(daemon_mod, "FREEZE_CALLS", 2)
    try:
        with daemon_log() as log, served() as s, unix_client(s.home) as c:
            lane = s.daemon.lane
            before = lane.calls  # the client's own readiness call, if any
            c.put([fact("the heap keeper's fact: the kettle boils")])
            c.search("kettle")
            assert lane.calls == before + 2 and lane.freezes == lane.calls // 2 >= 1
            frozen = lane.freezes
            event = log.wait_for(lambda e: e["event"] == "heap_settled")
            assert event["freezes"] == frozen and event["collected"] >= 0 and event["objects"] > 0 and event["ms"] >= 0
            assert lane.freezes == 0
            c.search("kettle")
            if lane.calls % 2:
                assert lane.freezes == 0  # nothing frozen since: no walk of the whole heap is due
                c.search("kettle")
            assert lane.freezes == 1
    finally:
        gc.unfreeze()


# -- 8. graceful shutdown ----------------------------------------------------------------------------------------------


def test_sigterm_stops_the_daemon_gracefully_and_a_restart_keeps_every_asset() -> None:
    """SIGTERM: the daemon logs "stopping" then "stopped", exits 0, and removes its socket and run/daemon.json; a
    daemon started again on the home finds every asset put before."""
    home = make_home()
    try:
        texts = [f"asset {i} before the restart" for i in range(3)]
        with process_daemon(home) as proc:
            info = json.loads(info_path(home.path).read_text())
            assert info["pid"] == proc.pid()
            with unix_client(home) as c:
                ids = [c.put([fact(t)])[0] for t in texts]
                os.kill(proc.pid(), signal.SIGTERM)
                assert proc.process.wait(60) == 0
        events = [e["event"] for e in proc.log]
        assert events.index("serving") < events.index("stopping") < events.index("stopped")
        stopped = next(e for e in proc.log if e["event"] == "stopped")
        assert stopped["calls"] >= len(texts)
        assert not home.socket.exists()
        assert not info_path(home.path).exists()

        with thread_daemon(home, listen=False) as daemon, unix_client(home) as c:
            assert daemon.local_principal == LOCAL
            assert [c.get(i)["payload"]["text"] for i in ids] == texts
    finally:
        remove_home(home)
