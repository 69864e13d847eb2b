"""The servicer's translation, without a network: every RPC has a handler, the wire enums cover the domain's, every
error class has its status and typed details, and malformed bytes are recognised before any core code runs."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2

from gaml.node.core.errors import DeadlineExceeded, RateLimited, TooLarge, Unauthenticated, Unavailable
from gaml.node.serve import servicer
from gaml.policy.access import Location, Permission
from gaml.policy.errors import (
    BadSignature,
    Deleted,
    InvalidAsset,
    InvalidInput,
    KeychainError,
    NotFound,
    PolicyError,
    StoreClosed,
    StoreCorrupt,
    UnknownEnumValue,
    UnknownPrincipal,
)
from gaml.policy.model import AssetType, Level, PrivacyScope
from gaml.proto.convert import draft_from_json, draft_pb_from_json
from gaml.v1 import memory_pb2

METHODS = [m.name for m in memory_pb2.DESCRIPTOR.services_by_name["Memory"].methods]


def test_every_rpc_has_a_handler() -> None:
    """Each method of gaml.v1.Memory is implemented by the servicer (the generic handler is built from the schema)."""
    assert sorted(METHODS) == sorted(
        [
            *("Ingest", "Put", "Get", "Forget", "Search", "Hydrate", "Grant", "Revoke", "ListGrants", "AccessLog"),
            *("Status", "Conflicts", "Reputation", "Override", "Remember", "List"),
            *("Principals", "AddPrincipal", "Sources", "Curate", "Maintain", "Backup"),
        ]
    )
    for name in METHODS:
        assert callable(getattr(servicer.MemoryServicer, name)), name


def test_wire_enums_cover_the_domain() -> None:
    """Every Permission, Location, Level, PrivacyScope and AssetType has exactly one wire value, and back."""
    assert set(servicer._PURPOSES.values()) == set(Permission)
    assert set(servicer._LOCATIONS.values()) == set(Location)
    assert set(servicer._LEVELS.values()) == set(Level)
    assert set(servicer._SCOPES.values()) == set(PrivacyScope)
    assert set(servicer._TYPES.values()) == set(AssetType)
    assert len(servicer._PURPOSES) == len(memory_pb2.Purpose.values()) - 1  # all but UNSPECIFIED
    assert len(servicer._LOCATIONS) == len(memory_pb2.Location.values())  # UNSPECIFIED means this device


@pytest.mark.parametrize(
    ("error", "code", "reason"),
    [
        (PolicyError("no"), grpc.StatusCode.PERMISSION_DENIED, "POLICY_DENIED"),
        (UnknownPrincipal("who"), grpc.StatusCode.PERMISSION_DENIED, "UNKNOWN_PRINCIPAL"),
        (NotFound("x"), grpc.StatusCode.NOT_FOUND, "NOT_FOUND"),
        (Deleted("x"), grpc.StatusCode.NOT_FOUND, "NOT_FOUND"),
        (InvalidAsset("bad"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ASSET"),
        (UnknownEnumValue("bad"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ASSET"),
        (InvalidInput("bad"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_INPUT"),
        (TooLarge("big"), grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_LARGE"),
        (RateLimited("fast", 0.25), grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED"),
        (DeadlineExceeded("late"), grpc.StatusCode.DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"),
        (Unauthenticated("who"), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"),
        (Unavailable("bye"), grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN"),
        (StoreClosed("closed"), grpc.StatusCode.UNAVAILABLE, "STORE_CLOSED"),
        (StoreCorrupt("rot"), grpc.StatusCode.DATA_LOSS, "STORE_CORRUPT"),
        (BadSignature("forged"), grpc.StatusCode.DATA_LOSS, "BAD_SIGNATURE"),
        (KeychainError("locked"), grpc.StatusCode.FAILED_PRECONDITION, "KEYCHAIN"),
        (ValueError("a bug"), grpc.StatusCode.INTERNAL, "INTERNAL"),
    ],
)
def test_each_error_has_its_status_and_details(error: Exception, code: grpc.StatusCode, reason: str) -> None:
    """The status code, the message, and an ErrorInfo (domain gaml.dev, reason, class name) in the status details;
    an unexpected error's message is not sent."""
    st = servicer.status_of(error)
    assert st.code == code
    [(key, blob)] = [(k, v) for k, v in st.trailing_metadata if k == "grpc-status-details-bin"]
    assert key == "grpc-status-details-bin"
    status = status_pb2.Status.FromString(blob)
    assert status.code == getattr(code_pb2, code.name)
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert (info.domain, info.reason, info.metadata["type"]) == ("gaml.dev", reason, type(error).__name__)
    if code is grpc.StatusCode.INTERNAL:
        assert "a bug" not in st.details
    else:
        assert str(error) in st.details
    if isinstance(error, RateLimited):
        retry = error_details_pb2.RetryInfo()
        assert status.details[1].Unpack(retry)
        assert retry.retry_delay.nanos == 250_000_000


@pytest.mark.parametrize("data", [b"\xff", b"\x0a\x05ab", b"\x12\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"])
def test_malformed_bytes_are_recognised(data: bytes) -> None:
    """Bytes that do not decode become a Malformed value (answered INVALID_ARGUMENT), not an exception in gRPC."""
    decoded = servicer._decoder(memory_pb2.GetRequest)(data)
    assert isinstance(decoded, servicer.Malformed)
    with pytest.raises(InvalidInput, match=r"not a valid gaml\.v1\.GetRequest"):
        servicer._check(decoded)


def test_unknown_enum_numbers_are_invalid_input() -> None:
    """An enum number the schema does not define (proto3 keeps it) is refused with the field's name."""
    req = memory_pb2.GetRequest(id="x")
    req.intent.purpose = 99  # type: ignore[assignment]
    with pytest.raises(InvalidInput, match=r"intent\.purpose"):
        servicer._intent(req, Permission.READ)
    assert servicer._intent(memory_pb2.GetRequest(), Permission.READ) == (Permission.READ, Location.THIS_DEVICE)


def test_a_client_draft_reads_back_as_the_same_draft() -> None:
    """What the client sends for a JSON draft is read by the servicer as the same draft the CLI would build."""
    draft = {
        "asset_type": "fact",
        "payload": {"text": "Alice prefers green tea", "n": 3},
        "privacy_scope": "trusted_devices",
        "entities": ["Alice"],
        "created_at": 1_700_000_000_000_000,
    }
    assert servicer.draft_from_pb(draft_pb_from_json(draft)) == draft_from_json(draft)
