"""The Cognitive Asset domain type: validation, normalization, canonical encoding and content ids."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gaml.policy.errors import InvalidAsset, InvalidInput, PayloadTooDeep, UnknownEnumValue
from gaml.policy.model import (
    MAX_PAYLOAD_DEPTH,
    Asset,
    AssetType,
    Heat,
    Level,
    PrivacyScope,
    Retention,
    SourcePointer,
    Tier,
    content_id,
    item_id,
    load_json,
)
from gaml.policy.partitions import PartitionRef, partition_for

NOW = 1_700_000_000_000_000


def make(**kw: Any) -> Asset:
    base: dict[str, Any] = {"asset_type": "fact", "payload": {"text": "t"}, "owner_id": "alice", "created_at": NOW}
    base.update(kw)
    base.setdefault(
        "id", content_id(base["asset_type"], base["owner_id"], base.get("tenant_scope", ""), base["payload"])
    )
    return Asset(**base)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"id": "XYZ"}, InvalidAsset, "32 lower-case hex"),
        ({"asset_type": "fcat"}, UnknownEnumValue, "unknown value 'fcat'"),
        ({"privacy_scope": "secret"}, UnknownEnumValue, "PrivacyScope"),
        ({"owner_id": ""}, InvalidAsset, "owner_id is required"),
        ({"privacy_scope": "tenant_private"}, InvalidAsset, "tenant_scope is required"),
        ({"confidence_score": 1.5}, InvalidAsset, "confidence_score"),
        ({"freshness_score": True}, InvalidAsset, "freshness_score"),
        ({"created_at": -1}, InvalidAsset, "created_at"),
        ({"version": 0}, InvalidAsset, "version"),
        ({"tags": "just-a-string"}, InvalidAsset, "tags"),
        ({"entities": ["ok", ""]}, InvalidAsset, "entities"),
        ({"supports": ["not-an-id"]}, InvalidAsset, "supports"),
        ({"payload": ["not", "an", "object"]}, InvalidAsset, "payload must be a JSON object"),
        ({"payload": {"x": math.nan}}, InvalidAsset, "finite"),
        ({"payload": {"x": 2**60}}, InvalidAsset, "2**53"),
        ({"payload": {"x": {1, 2}}}, InvalidAsset, "not a JSON value"),
        ({"valid_from": 10, "valid_to": 5}, InvalidAsset, "valid_to"),
        ({"source": SourcePointer("s", 5, 10)}, None, None),
    ],
)
def test_validation(changes: dict[str, Any], error: type[Exception] | None, message: str | None) -> None:
    """Each invalid field raises a typed error that names it; valid ones construct."""
    if error is None:
        make(**changes)
        return
    with pytest.raises(error, match=re.escape(message or "")):
        make(**{"id": "0" * 32, **changes})


def test_public_assets_need_no_owner() -> None:
    """Only a public asset may omit its owner."""
    assert make(owner_id="", privacy_scope="public").owner_id == ""


def test_normalization() -> None:
    """Sets are sorted and deduplicated, whole floats become ints, enums parse from names, the payload is frozen."""
    a = make(tags=["b", "a", "b"], payload={"n": 2.0, "f": 0.5, "l": [1.0, {"k": 3.0}]}, level="L2", tier="cold")
    assert a.tags == ("a", "b")
    assert a.payload == {"n": 2, "f": 0.5, "l": (1, {"k": 3})} and isinstance(a.payload["n"], int)
    assert a.level is Level.L2 and a.tier is Tier.COLD
    with pytest.raises(TypeError):
        a.payload["n"] = 3  # type: ignore[index]
    with pytest.raises(AttributeError):
        a.owner_id = "mallory"  # type: ignore[misc]


def test_signing_bytes_ignore_local_state() -> None:
    """Tier, heat and the signature are local state: they change canonical bytes but not what is signed."""
    a = make()
    b = a.replace(tier=Tier.COLD, heat=Heat(visits=3, last_access=NOW), signature=b"\x01" * 64)
    assert a.signing_bytes() == b.signing_bytes()
    assert a.canonical_bytes() != b.canonical_bytes()
    assert a.replace(goal="other").signing_bytes() != a.signing_bytes()


def test_content_ids() -> None:
    """Ids derive from type, owner, tenant and canonical payload (key order does not matter); item ids from source."""
    assert content_id("fact", "a", "", {"x": 1, "y": 2}) == content_id(AssetType.FACT, "a", "", {"y": 2, "x": 1.0})
    assert content_id("fact", "a", "", {"x": 1}) != content_id("goal", "a", "", {"x": 1})
    assert content_id("fact", "a", "", {"x": 1}) != content_id("fact", "b", "", {"x": 1})
    assert content_id("fact", "a", "", {"x": 1}) != content_id("fact", "a", "t", {"x": 1})
    assert item_id("session-1", 4) == item_id("session-1", 4) != item_id("session-1", 5)
    assert item_id("s", 1) != content_id("fact", "s", "", {"position": 1})


def test_from_dict_refuses_unknown_fields() -> None:
    """Decoding never drops a field silently."""
    d = make().to_dict()
    d["colour"] = "red"
    with pytest.raises(InvalidAsset, match="colour"):
        Asset.from_dict(d)
    with pytest.raises(InvalidAsset):
        Asset.from_canonical(b"not canonical")


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.text(max_size=20),
    st.floats(allow_nan=False, allow_infinity=False),
)
json_value = st.recursive(
    json_leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=12
)
words = st.lists(st.text(min_size=1, max_size=12), max_size=5)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    payload=st.dictionaries(st.text(max_size=10), json_value, max_size=5),
    asset_type=st.sampled_from(list(AssetType)),
    scope=st.sampled_from(list(PrivacyScope)),
    tags=words,
    entities=words,
    score=st.floats(0, 1),
    times=st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)),
    level=st.sampled_from(list(Level)),
    source=st.one_of(st.none(), st.builds(SourcePointer, st.text(min_size=1, max_size=10), st.just(1), st.just(9))),
)
def test_canonical_round_trip(
    payload: dict[str, Any],
    asset_type: AssetType,
    scope: PrivacyScope,
    tags: list[str],
    entities: list[str],
    score: float,
    times: tuple[int, int],
    level: Level,
    source: SourcePointer | None,
) -> None:
    """Any valid asset survives canonical encoding and dict conversion unchanged, byte for byte."""
    a = make(
        payload=payload,
        asset_type=asset_type,
        privacy_scope=scope,
        tenant_scope="t",
        tags=tags,
        entities=entities,
        confidence_score=score,
        created_at=times[0],
        updated_at=times[1],
        level=level,
        source=source,
        retention_policy=Retention(delete_at=times[1]),
        signature=b"\x02" * 64,
    )
    b = Asset.from_canonical(a.canonical_bytes())
    assert b == a
    assert b.canonical_bytes() == a.canonical_bytes()
    assert Asset.from_dict(a.to_dict()) == a


def test_partitions_follow_scope_and_boundary() -> None:
    """Owner scopes partition by owner, tenant scopes by tenant, public is one partition; names parse back."""
    alice_private = partition_for(PrivacyScope.USER_PRIVATE, "alice", "acme")
    acme = partition_for(PrivacyScope.TENANT_PRIVATE, "alice", "acme")
    public = partition_for(PrivacyScope.PUBLIC, "", "")
    assert alice_private.boundary == "owner:alice" and acme.boundary == "tenant:acme" and public.boundary == "public"
    assert partition_for(PrivacyScope.SHARED, "alice", "").boundary == "owner:alice"
    for ref in (alice_private, acme, public):
        assert PartitionRef.parse(ref.name) == ref


def nested(depth: int, kind: str = "object") -> dict[str, Any]:
    """A payload ``depth`` objects (or a payload holding lists) deep, the payload itself being level 1."""
    value: Any = "leaf"
    for _ in range(depth - 1):
        value = {"a": value} if kind == "object" else [value]
    return {"x": value}


@pytest.mark.parametrize("kind", ["object", "list"])
def test_payload_depth_limit(kind: str) -> None:
    """A payload may nest MAX_PAYLOAD_DEPTH levels; one more is refused with PayloadTooDeep naming limit and path."""
    assert make(payload=nested(MAX_PAYLOAD_DEPTH, kind)).payload["x"]
    with pytest.raises(
        PayloadTooDeep, match=rf"^payload\.x.*: nested {MAX_PAYLOAD_DEPTH + 1} .*at most {MAX_PAYLOAD_DEPTH}"
    ):
        make(payload=nested(MAX_PAYLOAD_DEPTH + 1, kind))
    with pytest.raises(PayloadTooDeep):
        content_id("fact", "alice", "", nested(MAX_PAYLOAD_DEPTH + 1, kind))


def test_payload_depth_limit_never_exhausts_the_stack() -> None:
    """A payload nested far past the interpreter's recursion limit is refused as too deep, not a RecursionError."""
    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(PayloadTooDeep, match=f"at most {MAX_PAYLOAD_DEPTH}"):
        make(payload={"x": deep})


def test_stored_payload_over_the_depth_limit_stays_readable() -> None:
    """Bytes this node sealed before the limit existed decode (trusted), so such an asset can still be forgotten."""
    raw = make(payload=nested(MAX_PAYLOAD_DEPTH)).canonical_bytes()
    # Wrap the value of "x" in a list: from after '"x":' to after the braces that close the objects under it.
    start = raw.index(b'{"x":') + len(b'{"x":')
    end = raw.index(b'"leaf"') + len(b'"leaf"') + MAX_PAYLOAD_DEPTH - 1
    deeper = raw[:start] + b"[" + raw[start:end] + b"]" + raw[end:]
    asset = Asset.from_canonical(deeper, trusted=True)
    assert asset.payload["x"][0]["a"]
    with pytest.raises(PayloadTooDeep):
        Asset.from_canonical(deeper)


def test_load_json_refuses_a_document_too_deep_to_decode() -> None:
    """load_json reads JSON as json.loads does, and a document nested 100,000 deep is InvalidInput, a ValueError."""
    assert load_json('{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}
    with pytest.raises(InvalidInput, match=r"^plane\.json: JSON nested too deep") as caught:
        load_json("[" * 100_000 + "]" * 100_000, "plane.json")
    assert isinstance(caught.value, ValueError)


def test_records_opened_share_their_equal_retention_and_the_zero_heat() -> None:
    """A stored record opened (trusted) reads as it was written, and records with the same retention, or never
    visited, share those parts: a node's record cache holds fewer objects for the collector to walk."""
    plain = [make(payload={"text": f"t{i}"}) for i in range(3)]
    timed = make(payload={"text": "t"}, retention_policy=Retention(ttl_seconds=60))
    hot = make(payload={"text": "h"}, heat=Heat(visits=2, last_access=5, score=1.5))
    opened = [Asset.from_canonical(a.canonical_bytes(), trusted=True) for a in [*plain, timed, hot]]
    assert opened == [*plain, timed, hot]
    assert opened[0].retention_policy is opened[1].retention_policy is opened[2].retention_policy
    assert opened[3].retention_policy == Retention(ttl_seconds=60) != opened[0].retention_policy
    assert opened[0].heat is opened[1].heat and opened[0].heat == Heat()
    assert opened[4].heat == Heat(visits=2, last_access=5, score=1.5)
