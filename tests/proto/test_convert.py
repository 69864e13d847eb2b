"""Conversions between the domain Asset and its protobuf and JSON forms."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest

from gaml.policy.errors import InvalidAsset, PayloadTooDeep, UnknownEnumValue
from gaml.policy.model import (
    ENUM_FIELDS,
    MAX_PAYLOAD_DEPTH,
    Asset,
    AssetType,
    Creator,
    ExportPolicy,
    Heat,
    InferencePolicy,
    Level,
    PrivacyScope,
    ReplicationPolicy,
    Retention,
    SourcePointer,
    Tier,
    TrainingPolicy,
    TrustClass,
    content_id,
    freeze_json,
    thaw_json,
)
from gaml.proto.convert import (
    PreparedDraft,
    asset_from_pb,
    asset_json_from_pb,
    asset_to_json,
    asset_to_pb,
    draft_as_sent,
    draft_from_json,
    draft_from_pb,
    draft_pb_from_json,
    int64s_as_ints,
)
from gaml.v1 import asset_pb2

T0 = 1_700_000_000_000_000  # microseconds since the Unix epoch


def minimal(asset_type: str = "fact", payload: dict[str, Any] | None = None, **kw: Any) -> Asset:
    payload = {"text": "the sky is blue"} if payload is None else payload
    owner = kw.pop("owner_id", "alice")
    tenant = kw.get("tenant_scope", "")
    return Asset(
        id=content_id(asset_type, owner, tenant, payload),
        asset_type=AssetType.parse(asset_type),
        payload=payload,
        owner_id=owner,
        created_at=T0,
        **kw,
    )


def ref(n: int) -> str:
    return content_id("fact", "alice", "", {"n": n})


def full() -> Asset:
    """An asset with every field away from its default."""
    payload = {"text": "ship it", "n": 3, "ratio": 0.25, "ok": True, "none": None, "list": [1, "two", {"x": -1.5}]}
    return Asset(
        id=content_id("plan", "alice", "acme", payload),
        asset_type=AssetType.PLAN,
        payload=payload,
        owner_id="alice",
        created_at=T0,
        updated_at=T0 + 5,
        version=7,
        source_node="node-1",
        tenant_scope="acme",
        creator=Creator.SWARM,
        confidence_score=0.9,
        provenance_score=0.125,
        freshness_score=0.0,
        trust_class=TrustClass.HIGHER_TRUST,
        privacy_scope=PrivacyScope.TENANT_PRIVATE,
        allowed_principals=("bob", "alice", "bob"),
        allowed_roles=("admin",),
        replication_policy=ReplicationPolicy.TENANT_NODES,
        inference_policy=InferencePolicy.PUBLIC_WITH_REDACTION,
        training_policy=TrainingPolicy.ANONYMIZED_OPT_IN,
        export_policy=ExportPolicy.ALLOWED,
        encryption_key_ref="key-1",
        retention_policy=Retention(delete_at=T0 + 10**9, ttl_seconds=3600),
        policy_tags=("pii", "gdpr"),
        references=(ref(1),),
        supports=(ref(2), ref(3)),
        contradicts=(ref(4),),
        supersedes=(ref(5),),
        derived_from=(ref(6),),
        embedding_refs=("emb:minilm:1",),
        signature=bytes(range(64)),
        goal="launch",
        level=Level.L2,
        segment="work",
        source=SourcePointer("chat-42", 10, 20),
        entities=("acme", "bob"),
        tags=("q3",),
        valid_from=T0 - 100,
        valid_to=T0 + 100,
        tier=Tier.COLD,
        heat=Heat(visits=12, last_access=T0 + 7),
        tombstone=True,
    )


def random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(7 if depth < 3 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.randint(-(2**53), 2**53)
    if kind == 3:
        return rng.uniform(-1e6, 1e6)
    if kind == 4:
        return "".join(rng.choice("abcé€😀 ") for _ in range(rng.randrange(6)))
    if kind == 5:
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"k{i}": random_json(rng, depth + 1) for i in range(rng.randrange(4))}


def random_asset(rng: random.Random) -> Asset:
    payload = {f"f{i}": random_json(rng) for i in range(rng.randrange(5))}
    asset_type = rng.choice(list(AssetType))
    scope = rng.choice(list(PrivacyScope))
    tenant = "acme" if rng.random() < 0.5 else ""
    if scope in (PrivacyScope.ENTERPRISE_PRIVATE, PrivacyScope.TENANT_PRIVATE):
        tenant = "acme"
    owner = "" if scope is PrivacyScope.PUBLIC and rng.random() < 0.5 else "alice"
    words = ["a", "b", "c", "d"]
    return Asset(
        id=content_id(asset_type, owner, tenant, payload),
        asset_type=asset_type,
        payload=payload,
        owner_id=owner,
        created_at=rng.randrange(2**62),
        updated_at=rng.randrange(2**62),
        version=rng.randrange(1, 2**63),
        tenant_scope=tenant,
        creator=rng.choice(list(Creator)),
        confidence_score=rng.random(),
        trust_class=rng.choice(list(TrustClass)),
        privacy_scope=scope,
        allowed_principals=tuple(rng.sample(words, rng.randrange(3))),
        replication_policy=rng.choice(list(ReplicationPolicy)),
        inference_policy=rng.choice(list(InferencePolicy)),
        training_policy=rng.choice(list(TrainingPolicy)),
        export_policy=rng.choice(list(ExportPolicy)),
        retention_policy=Retention(rng.randrange(2**62), rng.randrange(2**63)),
        supports=tuple(ref(rng.randrange(10)) for _ in range(rng.randrange(3))),
        signature=rng.randbytes(rng.choice([0, 64])),
        level=rng.choice(list(Level)),
        source=SourcePointer("s", 1, 2) if rng.random() < 0.5 else None,
        tags=tuple(rng.sample(words, rng.randrange(3))),
        tier=rng.choice(list(Tier)),
        heat=Heat(rng.randrange(100), rng.randrange(2**62)),
        tombstone=rng.random() < 0.5,
    )


def through_bytes(asset: Asset) -> Asset:
    data = asset_to_pb(asset).SerializeToString(deterministic=True)
    return asset_from_pb(asset_pb2.Asset.FromString(data))


# -- protobuf --------------------------------------------------------------------------------------------------------


def test_full_asset_round_trips_through_bytes() -> None:
    """A fully populated asset survives domain → pb → bytes → pb → domain unchanged."""
    asset = full()
    assert through_bytes(asset) == asset
    assert through_bytes(asset).canonical_bytes() == asset.canonical_bytes()


@pytest.mark.parametrize("asset_type", [t.value for t in AssetType])
def test_minimal_assets_round_trip(asset_type: str) -> None:
    """A minimal asset of every type round-trips, keeping every default (including source=None)."""
    asset = minimal(asset_type)
    back = through_bytes(asset)
    assert back == asset
    assert back.source is None


def test_edge_case_assets_round_trip() -> None:
    """An empty payload, a public asset without owner, and unicode/empty-string payload keys round-trip."""
    cases = [
        minimal(payload={}),
        minimal(owner_id="", privacy_scope=PrivacyScope.PUBLIC),
        minimal(payload={"": "", "ключ": ["😀", {}, []], "big": 2**53, "neg": -(2**53), "tiny": 5e-324}),
    ]
    for asset in cases:
        assert through_bytes(asset) == asset


def test_random_assets_round_trip() -> None:
    """Two hundred seeded random assets round-trip through bytes unchanged."""
    rng = random.Random(0)
    for _ in range(200):
        asset = random_asset(rng)
        assert through_bytes(asset) == asset


def json_mapping(msg: asset_pb2.Asset) -> dict[str, Any]:
    """What asset_to_json documents, spelled out through protobuf's own JSON mapping: every field (``source``,
    ``retention_policy`` and ``heat`` when set), 64-bit integers as ints, enums by the domain's short names (the
    default for UNSPECIFIED), the payload as plain JSON with its whole numbers as ints."""
    from google.protobuf import json_format

    out = json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    int64s_as_ints(out, asset_pb2.Asset.DESCRIPTOR)
    domain = asset_from_pb(msg)
    for name in ENUM_FIELDS:
        out[name] = getattr(domain, name).value
    out["payload"] = thaw_json(freeze_json(json_format.MessageToDict(msg.payload)))
    return out


def test_a_message_renders_as_json_as_the_mapping_says() -> None:
    """asset_json_from_pb (what a client renders each hit with) and asset_to_json (what the CLI prints without a
    daemon) both give the JSON mapping, fields in the schema's order, for full, minimal, edge-case and two hundred
    random assets, through bytes."""
    rng = random.Random(1)
    cases = [full(), *(minimal(t.value) for t in AssetType), minimal(payload={"n": 2.0, "x": [1.5, {"y": 3}]})]
    cases += [minimal(payload={"big": 2**53, "huge": 1e300, "tiny": 5e-324, "deep": [[[{"a": None}]]], "t": True})]
    cases += [random_asset(rng) for _ in range(200)]
    order = [fd.name for fd in asset_pb2.Asset.DESCRIPTOR.fields]
    for asset in cases:
        msg = asset_pb2.Asset.FromString(asset_to_pb(asset).SerializeToString(deterministic=True))
        expected = json_mapping(msg)
        got = asset_json_from_pb(msg)
        assert got == expected
        assert list(got) == [name for name in order if name in expected]
        assert asset_to_json(asset) == got
        assert list(asset_to_json(asset)) == list(got)
        assert type(got["payload"].get("n", 0)) is int
    with pytest.raises(InvalidAsset):
        asset_json_from_pb(asset_pb2.Asset())


def test_a_message_the_walk_cannot_render_takes_the_mappings_path() -> None:
    """A score that is not finite renders as the JSON mapping writes it ("NaN"); an unknown enum number is refused as
    by the domain; a payload nested deeper than the model allows is refused as the domain refuses it."""
    msg = asset_to_pb(full())
    msg.confidence_score = float("nan")
    assert asset_json_from_pb(msg)["confidence_score"] == "NaN"
    msg = asset_to_pb(full())
    msg.trust_class = 999
    with pytest.raises(UnknownEnumValue):
        asset_json_from_pb(msg)
    msg = asset_to_pb(full())
    deep: dict[str, Any] = {}
    for _ in range(MAX_PAYLOAD_DEPTH + 1):
        deep = {"d": deep}
    msg.payload.Clear()
    msg.payload.update(deep)
    with pytest.raises(PayloadTooDeep):
        asset_json_from_pb(msg)


def test_an_asset_stored_before_payloads_were_limited_still_renders() -> None:
    """asset_to_json shows a payload nested deeper than the model now allows (an asset stored before the limit, which
    stays readable so that it can be forgotten) as it is, with every other field as the mapping renders it."""
    deep: dict[str, Any] = {"leaf": 1}
    for _ in range(MAX_PAYLOAD_DEPTH + 2):
        deep = {"d": deep}
    old = minimal()
    object.__setattr__(old, "payload", freeze_json(deep, max_depth=None))  # as read back from such a record
    out = asset_to_json(old)
    assert out["payload"] == deep
    assert {k: v for k, v in out.items() if k != "payload"} == {
        k: v for k, v in asset_to_json(minimal()).items() if k != "payload"
    }


def test_a_struct_answer_reads_as_through_freeze_and_thaw() -> None:
    """The client's reading of a Struct (a receipt, an explanation) in one walk equals thaw_json(freeze_json(...)):
    whole numbers become ints up to 2**53, other numbers, strings of digits, booleans and nulls stay as they are."""
    from google.protobuf import json_format
    from google.protobuf.struct_pb2 import Struct

    from gaml.node.serve.client import _struct_json

    rng = random.Random(2)
    for _ in range(100):
        value = {
            "goal": rng.choice(["2024", "tea", ""]),
            "n": rng.choice([0, 3, 2**53, 2.0**60, -7.5, 1e-9]),
            "facts": [{"score": rng.random(), "tokens": rng.randrange(99), "ok": rng.random() < 0.5} for _ in range(3)],
            "nested": {"none": None, "list": [1, [2.0, "3"], {"x": 4.25}]},
        }
        s = Struct()
        s.update(value)
        expected = thaw_json(freeze_json(json_format.MessageToDict(s), "answer", max_depth=None))
        assert _struct_json(s) == expected
        assert type(_struct_json(s)["facts"][0]["tokens"]) is int


def test_whole_float_payload_numbers_come_back_as_ints() -> None:
    """Struct carries numbers as doubles; the domain turns whole ones back into ints, so the payload is unchanged."""
    back = through_bytes(minimal(payload={"n": 3, "xs": [1, 2.5]}))
    assert back.payload == {"n": 3, "xs": (1, 2.5)}
    assert type(back.payload["n"]) is int


def test_unspecified_enums_take_domain_defaults() -> None:
    """An UNSPECIFIED enum (other than asset_type) on the wire becomes the dataclass default."""
    msg = asset_to_pb(full())
    for name in ("creator", "trust_class", "privacy_scope", "level", "tier"):
        msg.ClearField(name)
    msg.tenant_scope = "acme"
    back = asset_from_pb(msg)
    assert back.creator is Creator.USER
    assert back.trust_class is TrustClass.UNVERIFIED
    assert back.privacy_scope is PrivacyScope.USER_PRIVATE
    assert back.level is Level.L0
    assert back.tier is Tier.HOT


def test_missing_asset_type_is_invalid() -> None:
    """A message without asset_type (ASSET_TYPE_UNSPECIFIED) raises InvalidAsset: the type is required."""
    msg = asset_to_pb(minimal())
    msg.ClearField("asset_type")
    with pytest.raises(InvalidAsset, match="asset_type is required"):
        asset_from_pb(msg)


@pytest.mark.parametrize("field", ["asset_type", "privacy_scope", "tier"])
def test_unknown_enum_number_raises(field: str) -> None:
    """An enum number the schema does not define (an open proto3 enum keeps it) raises UnknownEnumValue."""
    msg = asset_to_pb(minimal())
    setattr(msg, field, 999)
    with pytest.raises(UnknownEnumValue, match=f"{field}: unknown enum number 999"):
        asset_from_pb(msg)


def test_values_beyond_the_wire_types_are_invalid() -> None:
    """A domain integer that does not fit its 64-bit wire field raises InvalidAsset, not a bare ValueError."""
    with pytest.raises(InvalidAsset, match="wire schema"):
        asset_to_pb(minimal().replace(created_at=2**63))


def test_invalid_wire_content_is_rejected_by_the_domain() -> None:
    """A message that decodes but breaks a domain rule (bad id) raises InvalidAsset."""
    msg = asset_to_pb(minimal())
    msg.id = "not-an-id"
    with pytest.raises(InvalidAsset, match="id must be"):
        asset_from_pb(msg)


# -- JSON ------------------------------------------------------------------------------------------------------------


def test_draft_accepts_short_enum_names_case_insensitively() -> None:
    """Short domain names (any case) become enum members; only the given fields are returned."""
    draft = draft_from_json(
        {"asset_type": "Fact", "privacy_scope": "user_private", "level": "L2", "tier": " cold ", "payload": {"a": 1}}
    )
    assert draft == {
        "asset_type": AssetType.FACT,
        "privacy_scope": PrivacyScope.USER_PRIVATE,
        "level": Level.L2,
        "tier": Tier.COLD,
        "payload": {"a": 1},
    }


def test_draft_accepts_proto_enum_names_and_numbers() -> None:
    """Proto enum names (and, as the protobuf JSON mapping allows, enum numbers) are accepted."""
    draft = draft_from_json({"asset_type": "ASSET_TYPE_GOAL", "privacy_scope": "privacy_scope_shared", "creator": 2})
    assert draft == {"asset_type": AssetType.GOAL, "privacy_scope": PrivacyScope.SHARED, "creator": Creator.MODEL}


def test_draft_accepts_camel_case_field_names() -> None:
    """lowerCamelCase field names work as in ParseDict, including nested messages and int64 strings."""
    draft = draft_from_json(
        {
            "assetType": "tool_result",
            "ownerId": "alice",
            "privacyScope": "PRIVACY_SCOPE_LOCAL_ONLY",
            "validFrom": "5",
            "retentionPolicy": {"ttlSeconds": 60},
            "source": {"sourceId": "chat", "start": 1, "end": "3"},
            "allowedPrincipals": ["bob", "alice"],
        }
    )
    assert draft == {
        "asset_type": AssetType.TOOL_RESULT,
        "owner_id": "alice",
        "privacy_scope": PrivacyScope.LOCAL_ONLY,
        "valid_from": 5,
        "retention_policy": Retention(ttl_seconds=60),
        "source": SourcePointer("chat", 1, 3),
        "allowed_principals": ("bob", "alice"),
    }


def test_draft_builds_an_asset_once_the_node_fills_the_rest() -> None:
    """The draft, plus id and created_at from the node, constructs the same Asset as direct construction."""
    payload = {"text": "hi", "n": 2.0}
    draft = draft_from_json({"assetType": "fact", "ownerId": "alice", "payload": payload, "tags": ["b", "a", "b"]})
    assert draft["payload"] == {"text": "hi", "n": 2}
    assert type(draft["payload"]["n"]) is int
    asset = Asset(id=content_id("fact", "alice", "", payload), created_at=T0, **draft)
    assert asset == minimal(payload=payload, tags=("a", "b"))


def test_draft_treats_null_as_absent() -> None:
    """A null value is the same as leaving the field out."""
    assert draft_from_json({"asset_type": "fact", "source": None, "goal": None}) == {"asset_type": AssetType.FACT}


def test_draft_unknown_enum_value_names_field_and_choices() -> None:
    """An unknown enum name raises UnknownEnumValue naming the field and listing the accepted short names."""
    with pytest.raises(UnknownEnumValue) as info:
        draft_from_json({"privacyScope": "secret"})
    message = str(info.value)
    assert "privacy_scope" in message
    assert "'secret'" in message
    assert "local_only, user_private, trusted_devices" in message


def test_draft_unknown_enum_number_raises() -> None:
    """An enum number the schema does not define raises UnknownEnumValue."""
    with pytest.raises(UnknownEnumValue, match="tier"):
        draft_from_json({"tier": 42})


def test_draft_unknown_field_is_invalid() -> None:
    """An unknown field raises InvalidAsset (not UnknownEnumValue) with json_format's message."""
    with pytest.raises(InvalidAsset, match="colour") as info:
        draft_from_json({"asset_type": "fact", "colour": "blue"})
    assert not isinstance(info.value, UnknownEnumValue)


@pytest.mark.parametrize(
    "obj",
    [
        {"created_at": "yesterday"},
        {"payload": "text"},
        {"tags": "a"},
        {"tombstone": "yes"},
        {"level": ["l0"]},
        {"level": True},
        {"source": {"sourceId": ""}},
        {"payload": {"n": 2**60}},
        {"asset_type": "ASSET_TYPE_UNSPECIFIED"},
        {"asset_type": "fact", "assetType": "goal"},
    ],
)
def test_draft_malformed_values_are_invalid(obj: dict[str, Any]) -> None:
    """Wrong types, an unsafe payload integer, an UNSPECIFIED asset_type or a field given twice raise InvalidAsset."""
    with pytest.raises(InvalidAsset):
        draft_from_json(obj)


@pytest.mark.parametrize(
    ("obj", "where", "wanted"),
    [
        ({"confidence_score": True}, "confidence_score", "a number"),
        ({"freshnessScore": False}, "freshness_score", "a number"),
        ({"created_at": True}, "created_at", "a number"),
        ({"heat": {"visits": True}}, "heat.visits", "a number"),
        ({"heat": {"score": False}}, "heat.score", "a number"),
        ({"retention_policy": {"ttlSeconds": True}}, "retention_policy.ttl_seconds", "a number"),
        ({"source": {"source_id": "r", "end": True}}, "source.end", "a number"),
        ({"privacy_scope": True}, "privacy_scope", "an enum name"),
    ],
)
def test_a_bool_for_a_number_is_refused_by_name(obj: dict[str, Any], where: str, wanted: str) -> None:
    """json_format.ParseDict reads a JSON ``true`` given for a number as 1 (``"confidence_score": true`` was a
    confidence of 1.0). A draft's number must be a number, in its own fields and its nested ones, on both the node's
    reading and the client's (the message a client sends); a bool in the payload is plain JSON and stays."""
    from gaml.proto.convert import draft_pb_from_json

    draft = {"asset_type": "fact", "payload": {"text": "x", "ok": True}, **obj}
    for read in (draft_from_json, draft_pb_from_json):
        with pytest.raises(InvalidAsset, match=rf"^{re.escape(where)}: expected {wanted}, got (true|false)$"):
            read(draft)
    assert draft_from_json({"asset_type": "fact", "payload": {"ok": True}, "tombstone": True})["tombstone"] is True


@pytest.mark.parametrize("obj", [[], "fact", None, 3])
def test_draft_requires_an_object(obj: Any) -> None:
    """Anything but a JSON object raises InvalidAsset."""
    with pytest.raises(InvalidAsset, match="JSON object"):
        draft_from_json(obj)


def test_asset_to_json_is_readable_and_reads_back() -> None:
    """asset_to_json shows short enum names, plain payload and int timestamps; draft_from_json reads it back."""
    asset = full()
    out = asset_to_json(asset)
    json.dumps(out)  # plain JSON
    assert (out["asset_type"], out["level"], out["privacy_scope"]) == ("plan", "l2", "tenant_private")
    assert out["payload"] == {
        "text": "ship it",
        "n": 3,
        "ratio": 0.25,
        "ok": True,
        "none": None,
        "list": [1, "two", {"x": -1.5}],
    }
    assert (out["created_at"], out["version"]) == (T0, 7)
    assert out["retention_policy"] == {"delete_at": T0 + 10**9, "ttl_seconds": 3600}
    assert out["source"] == {"source_id": "chat-42", "start": 10, "end": 20}
    assert Asset(**draft_from_json(out)) == asset


def test_asset_to_json_prints_defaults_and_omits_missing_source() -> None:
    """Every field is shown, defaults included; source is left out when the asset has none."""
    asset = minimal()
    out = asset_to_json(asset)
    assert "source" not in out
    assert (out["tags"], out["updated_at"], out["tier"]) == ([], 0, "hot")
    assert Asset(**draft_from_json(out)) == asset


def _draft_through_json(msg: asset_pb2.Asset) -> dict[str, Any]:
    """What a node read from a wire draft before it walked the message: its JSON mapping, then that JSON as a draft."""
    from google.protobuf import json_format

    try:
        fields = json_format.MessageToDict(msg, preserving_proto_field_name=True)
    except json_format.Error as e:
        raise InvalidAsset(f"the asset does not fit its JSON form: {e}") from None
    return draft_from_json(fields)


def _same_draft(a: dict[str, Any], b: dict[str, Any]) -> bool:
    nan = [k for k, v in a.items() if isinstance(v, float) and v != v]
    return (
        list(a) == list(b)
        and all(isinstance(b[k], float) and b[k] != b[k] for k in nan)
        and {k: v for k, v in a.items() if k not in nan} == {k: v for k, v in b.items() if k not in nan}
    )


def test_a_wire_draft_reads_as_its_json_mapping_reads() -> None:
    """draft_from_pb (what a node reads from Put) gives the draft that the message's JSON mapping read as JSON gives,
    the same fields in the same order, for full, minimal, edge-case and two hundred random assets with random fields
    left unset (as drafts leave them), and refuses what that path refuses, with the same error types: an unknown enum
    number, a payload number JSON cannot hold. A JSON draft's message (what a client sends) reads back as that
    draft."""
    rng = random.Random(2)
    cases = [full(), *(minimal(t.value) for t in AssetType), minimal(payload={"n": 2.0, "x": [1.5, {"y": 3}]})]
    cases += [minimal(payload={"big": 2**53, "huge": 1e300, "tiny": 5e-324, "deep": [[[{"a": None}]]], "t": True})]
    cases += [random_asset(rng) for _ in range(200)]
    names = [fd.name for fd in asset_pb2.Asset.DESCRIPTOR.fields]
    checked = 0
    for asset in cases:
        for cleared in ((), rng.sample(names, rng.randint(1, len(names)))):
            msg = asset_pb2.Asset.FromString(asset_to_pb(asset).SerializeToString(deterministic=True))
            for name in cleared:
                msg.ClearField(name)
            assert _same_draft(draft_from_pb(msg), _draft_through_json(msg))
            checked += 1
    assert checked == 2 * len(cases)
    nan = asset_to_pb(full())
    nan.confidence_score = float("nan")
    assert _same_draft(draft_from_pb(nan), _draft_through_json(nan))
    assert draft_from_pb(asset_pb2.Asset()) == _draft_through_json(asset_pb2.Asset()) == {}
    for field in ENUM_FIELDS:
        msg = asset_to_pb(full())
        setattr(msg, field, 999)
        for read in (draft_from_pb, _draft_through_json):
            with pytest.raises(UnknownEnumValue, match=field):
                read(msg)
    for number in (float("inf"), float("-inf"), float("nan")):
        msg = asset_to_pb(full())
        msg.payload.update({"x": number})
        with pytest.raises(InvalidAsset, match="does not fit its JSON form"):
            draft_from_pb(msg)
        with pytest.raises(ValueError):  # the JSON path raised protobuf's bare ValueError: a typed error now
            _draft_through_json(msg)
    for asset in cases[:20]:  # a client's message of a JSON draft: the draft, less what proto3 cannot carry
        obj = asset_to_json(asset)
        msg = draft_pb_from_json(obj)
        assert msg == asset_to_pb(asset)
        got, given = draft_from_pb(msg), draft_from_json(obj)
        assert got == {k: v for k, v in given.items() if k in got}
        assert all(getattr(msg, k) == getattr(asset_pb2.Asset(), k) for k in given.keys() - got.keys())
    bad: list[Any] = [{"asset_type": "fact", "privacy_scope": "secret"}, {"asset_type": "fact", "colour": 1}]
    bad += [{"asset_type": "fact", "tags": "x"}, {"asset_type": "fact", "payload": {"n": 2**60}}, ["fact"]]
    for obj in bad:  # the client refuses what draft_from_json refuses, with the same error
        with pytest.raises(InvalidAsset) as from_json:
            draft_from_json(obj)
        with pytest.raises(InvalidAsset) as to_pb:
            draft_pb_from_json(obj)
        assert type(to_pb.value) is type(from_json.value) and str(to_pb.value) == str(from_json.value)


def test_a_json_draft_makes_the_message_the_mapping_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client makes a draft's message directly when every value is plain (strings, lists of strings, numbers,
    bools, enum names or numbers, a JSON object for the payload) and through json_format.ParseDict otherwise. Either
    way the outcome is the mapping's alone: the same message, or the same error. Checked for random drafts of random
    fields under either name (original or lowerCamelCase), enums as short names, proto names or numbers, and values
    the direct path must leave to the mapping (int64s as strings, floats for integers, bools for numbers, bytes,
    nested messages, numbers out of range, a tuple for a list)."""
    from google.protobuf import json_format

    from gaml.proto import convert

    rng = random.Random(5)
    fields = {fd.name: fd for fd in asset_pb2.Asset.DESCRIPTOR.fields}
    objs: list[dict[str, Any]] = []
    for asset in [full(), *(random_asset(rng) for _ in range(300))]:
        whole = asset_to_json(asset)
        obj: dict[str, Any] = {}
        for name in rng.sample(sorted(whole), rng.randint(1, len(whole))):
            value = whole[name]
            if name in ENUM_FIELDS and rng.random() < 0.5:
                number = getattr(asset_to_pb(asset), name)
                value = rng.choice([number, f"{name.upper()}_{value}".upper(), value.upper()])
            obj[fields[name].json_name if rng.random() < 0.3 else name] = value
        objs.append(obj)
    odd: list[dict[str, Any]] = [
        {"created_at": "123"},
        {"created_at": 5.0},
        {"created_at": 5.5},
        {"version": -1},
        {"created_at": 2**63},
        {"confidence_score": True},
        {"confidence_score": "0.5"},
        {"confidence_score": 2**1100},
        {"confidence_score": float("nan")},
        {"confidence_score": float("inf")},
        {"confidence_score": float("-inf")},
        {"tombstone": 1},
        {"tags": ["a", 1]},
        {"tags": ("a",)},
        {"owner_id": 7},
        {"payload": {}},
        {"payload": {"a": [None, True, {"b": [1, 2.5]}], "c": ""}},
        {"signature": "AAEC"},
        {"retention_policy": {"delete_at": 5}},
        {"heat": {"reads": 2}},
        {"created_at": True},
        {"heat": {"visits": False}},
        {"retention_policy": {"ttlSeconds": True}},
        {"privacy_scope": True},
    ]
    objs += [{"asset_type": "fact", **o} for o in odd]

    def outcome(obj: dict[str, Any]) -> tuple[str, Any]:
        try:
            return "message", convert._draft_message(obj)
        except InvalidAsset as e:
            return type(e).__name__, str(e)

    not_plain = {"signature", "source", "retention_policy", "heat"}
    direct: list[bool] = []
    for i, obj in enumerate(objs):
        got = outcome(obj)
        if got[0] == "message" and i < 301:  # a random asset's draft: direct unless it gives bytes or a nested message
            given = {convert._BY_JSON_KEY[k].name for k in got[1][1]}
            assert (convert._plain_message(got[1][1]) is not None) == given.isdisjoint(not_plain), obj
            direct.append(given.isdisjoint(not_plain))
        with monkeypatch.context() as m:
            m.setattr(convert, "_plain_message", lambda prepared: None)
            mapped = outcome(obj)
        assert got == mapped, obj
        if got[0] == "message":
            assert got[1][0] == json_format.ParseDict(got[1][1], asset_pb2.Asset())
            assert got[1][0].HasField("payload") == ("payload" in got[1][1])
    assert len(direct) == 301 and sum(direct) >= 50
    refused = [i for i, o in enumerate(odd) if outcome({"asset_type": "fact", **o})[0] != "message"]
    # 5.5 for an integer, -1 for a uint64, 2**63 for an int64, a bool for a double, 2**1100 for a double, NaN and
    # ±Infinity unquoted, 1 for a bool, an int in a list of strings, an int for a string, a field the nested message
    # lacks, a bool for an int64, for nested integers and for an enum
    assert refused == [2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 14, 19, 20, 21, 22, 23]


def test_a_prepared_draft_is_read_once_and_reads_as_its_json() -> None:
    """``gaml put`` reads each draft once (:class:`PreparedDraft`) and sends it twice (a check-only pass, then the
    put): its message is the one :func:`draft_pb_from_json` makes of the JSON, returned again without reading the JSON
    again (by the in-process put too, :func:`draft_as_sent`); it is a mapping equal to the JSON, which
    :func:`draft_from_json` reads as it reads the JSON; a bad draft raises on preparing, as it raises on reading;
    changing the object later changes neither."""
    obj: dict[str, Any] = {
        "asset_type": "FACT",
        "payload": {"text": "The staging DB runs on port 6543", "n": 3},
        "privacyScope": "user_private",
        "tags": ["db", "staging"],
        "confidence_score": 0.75,
        "source": {"source_id": "notes.md", "start": 3, "end": 4},
    }
    prepared = PreparedDraft(obj)
    assert prepared == obj and dict(prepared) == obj and len(prepared) == len(obj)
    assert prepared.message == draft_pb_from_json(obj)
    assert draft_pb_from_json(prepared) is prepared.message  # not read again
    assert draft_from_json(prepared) == draft_from_json(obj)
    assert draft_from_pb(prepared.message) == draft_from_json(obj)
    assert draft_as_sent(prepared) == draft_from_pb(prepared.message)
    obj["tags"] = ["changed"]  # a shallow copy: the mapping and its message stay as read
    assert prepared["tags"] == ["db", "staging"] and list(prepared.message.tags) == ["db", "staging"]
    for bad in ({"asset_type": "fact", "nope": 1}, {"asset_type": "fact", "confidence_score": True}, [], "fact"):
        with pytest.raises((InvalidAsset, UnknownEnumValue)) as read:
            draft_from_json(bad)  # type: ignore[arg-type]
        with pytest.raises(type(read.value), match=re.escape(str(read.value))):
            PreparedDraft(bad)  # type: ignore[arg-type]
