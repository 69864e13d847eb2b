"""Permissions, grants and derived-asset inheritance (policy/access.py), against examples and a reference oracle."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gaml.policy.access import (
    Decision,
    Grant,
    Location,
    Permission,
    Principal,
    at_least_as_restrictive,
    decide,
    declassify,
    inherit,
)
from gaml.policy.errors import InvalidAsset, PolicyError
from gaml.policy.model import (
    Asset,
    ExportPolicy,
    InferencePolicy,
    Level,
    PrivacyScope,
    ReplicationPolicy,
    Retention,
    TrainingPolicy,
    content_id,
)

NOW = 1_700_000_000_000_000
HOUR = 3_600_000_000


def asset(text: str = "t", owner: str = "alice", **kw: Any) -> Asset:
    base: dict[str, Any] = {"asset_type": "fact", "payload": {"text": text}, "owner_id": owner, "created_at": NOW}
    base.update(kw)
    base["id"] = content_id(base["asset_type"], base["owner_id"], base.get("tenant_scope", ""), base["payload"])
    return Asset(**base)


ALICE, BOB = Principal("alice"), Principal("bob")
AGENT = Principal("claude", kind="agent", on_behalf_of="alice")
BOB_ACME = Principal("bob", tenants=frozenset({"acme"}))


def ok(d: Decision) -> bool:
    return d.allowed


def test_owner_and_agents_acting_for_the_owner() -> None:
    """An owner reads their private memory on their devices; an agent acting for them does too; others do not."""
    a = asset(inference_policy="private_nodes")
    assert not ok(decide(ALICE, asset(), Permission.READ, Location.TRUSTED_DEVICE, NOW))  # default: local inference
    assert ok(decide(ALICE, a, Permission.READ, Location.THIS_DEVICE, NOW))
    assert ok(decide(AGENT, a, Permission.CONTEXT, Location.TRUSTED_DEVICE, NOW))
    assert not ok(decide(BOB, a, Permission.READ, Location.THIS_DEVICE, NOW))
    assert not ok(decide(ALICE, a, Permission.READ, Location.PRIVATE_SUBNET, NOW))  # user_private stays on devices


def test_local_only_never_leaves_this_device_and_is_never_granted() -> None:
    """local_only memory is its owner's, on this device, and no grant or reader list widens it."""
    a = asset(privacy_scope="local_only", allowed_principals=["bob"])
    g = Grant("alice", "bob", Level.L0, NOW - 1)
    assert ok(decide(ALICE, a, Permission.READ, Location.THIS_DEVICE, NOW))
    assert not ok(decide(ALICE, a, Permission.READ, Location.TRUSTED_DEVICE, NOW))
    assert not ok(decide(BOB, a, Permission.READ, Location.THIS_DEVICE, NOW, [g]))


def test_tenant_members_and_explicit_readers() -> None:
    """Tenant scopes admit the tenant's members; named principals and roles are readers of private scopes too."""
    t = asset(privacy_scope="tenant_private", tenant_scope="acme", inference_policy="private_nodes")
    assert ok(decide(BOB_ACME, t, Permission.READ, Location.PRIVATE_SUBNET, NOW))
    assert not ok(decide(BOB, t, Permission.READ, Location.THIS_DEVICE, NOW))
    assert not ok(decide(BOB_ACME, t, Permission.READ, Location.PUBLIC_SWARM, NOW))
    named = asset(allowed_principals=["bob"])
    assert decide(BOB, named, Permission.READ, Location.THIS_DEVICE, NOW).via == "principal"
    role = asset(allowed_roles=["auditor"])
    assert (
        decide(Principal("carol", roles=frozenset({"auditor"})), role, Permission.READ, Location.THIS_DEVICE, NOW).via
        == "role"
    )


def test_permissions_are_separate() -> None:
    """Reading grants neither memorize nor replicate; export and train follow their own policies."""
    pub = asset(privacy_scope="public", inference_policy="public_allowed")
    t = asset(privacy_scope="tenant_private", tenant_scope="acme", replication_policy="tenant_nodes")
    assert ok(decide(BOB_ACME, t, Permission.READ, Location.THIS_DEVICE, NOW))
    assert not ok(decide(BOB_ACME, t, Permission.MEMORIZE, Location.THIS_DEVICE, NOW))
    assert not ok(decide(BOB_ACME, t, Permission.REPLICATE, Location.THIS_DEVICE, NOW))
    assert ok(decide(ALICE, t, Permission.REPLICATE, Location.THIS_DEVICE, NOW))
    assert ok(decide(BOB, pub, Permission.MEMORIZE, Location.PUBLIC_SWARM, NOW))
    assert not ok(decide(ALICE, asset(), Permission.EXPORT, Location.THIS_DEVICE, NOW))  # approval_required
    assert ok(decide(ALICE, asset(export_policy="allowed"), Permission.EXPORT, Location.THIS_DEVICE, NOW))
    assert not ok(decide(ALICE, asset(), Permission.TRAIN, Location.THIS_DEVICE, NOW))  # prohibited
    assert ok(decide(ALICE, asset(training_policy="local_only"), Permission.TRAIN, Location.THIS_DEVICE, NOW))
    assert not ok(decide(ALICE, asset(training_policy="local_only"), Permission.TRAIN, Location.TRUSTED_DEVICE, NOW))


def test_public_with_redaction_reaches_the_swarm_only_redacted() -> None:
    """Private memory with public_with_redaction goes to a public model only as a redacted packet."""
    a = asset(inference_policy="public_with_redaction")
    d = decide(ALICE, a, Permission.CONTEXT, Location.PUBLIC_SWARM, NOW)
    assert not d.allowed and d.redact_only
    assert ok(decide(ALICE, a, Permission.CONTEXT, Location.THIS_DEVICE, NOW))
    assert not decide(ALICE, asset(), Permission.CONTEXT, Location.PUBLIC_SWARM, NOW).redact_only


def test_retention_and_tombstones() -> None:
    """Memory past its retention, or deleted, is nobody's."""
    a = asset(retention_policy=Retention(ttl_seconds=60))
    assert ok(decide(ALICE, a, Permission.READ, Location.THIS_DEVICE, NOW + 59_000_000))
    assert not ok(decide(ALICE, a, Permission.READ, Location.THIS_DEVICE, NOW + 60_000_000))
    assert not ok(
        decide(ALICE, asset(retention_policy=Retention(delete_at=NOW)), Permission.READ, Location.THIS_DEVICE, NOW)
    )
    assert not ok(decide(ALICE, asset(tombstone=True), Permission.READ, Location.THIS_DEVICE, NOW))


def test_grants_filter_ceiling_expiry_revocation_and_teams() -> None:
    """A grant opens a filtered slice of an owner's memory, never beyond its ceiling, expiry or revocation."""
    l0 = asset("verbatim", segment="work", tags=["proj"])
    l2 = asset("distilled", segment="work", tags=["proj"], level="l2")
    home = asset("home", segment="home", level="l2")
    g = Grant("alice", "bob", Level.L2, NOW - HOUR, segments=frozenset({"work"}), expires_at=NOW + HOUR)
    assert decide(BOB, l2, Permission.READ, Location.THIS_DEVICE, NOW, [g]).via == f"grant:{g.id}"
    ceiling = decide(BOB, l0, Permission.READ, Location.THIS_DEVICE, NOW, [g])
    assert not ceiling.allowed and "up to l2" in ceiling.reason
    assert not ok(decide(BOB, home, Permission.READ, Location.THIS_DEVICE, NOW, [g]))  # outside the filter
    assert not ok(decide(BOB, l2, Permission.READ, Location.THIS_DEVICE, NOW + HOUR, [g]))  # expired
    revoked = dataclasses.replace(g, revoked_at=NOW - 1)
    assert not ok(decide(BOB, l2, Permission.READ, Location.THIS_DEVICE, NOW, [revoked]))
    assert ok(decide(BOB, l2, Permission.READ, Location.THIS_DEVICE, NOW - 2, [revoked]))  # before revocation
    assert not ok(decide(BOB, l2, Permission.EXPORT, Location.THIS_DEVICE, NOW, [g]))  # grants give read/context
    team = Grant("alice", "team-x", Level.L3, NOW - HOUR)
    member = Principal("dave", teams=frozenset({"team-x"}))
    assert ok(decide(member, asset("skeleton", level="l3"), Permission.CONTEXT, Location.THIS_DEVICE, NOW, [team]))
    with pytest.raises(PolicyError, match="team"):
        Principal("team-y", kind="team", teams=frozenset({"team-x"}))


def test_grant_validation_and_identity() -> None:
    """Grants are validated on construction and identified by their content."""
    with pytest.raises(PolicyError):
        Grant("alice", "alice", Level.L0, NOW)
    with pytest.raises(PolicyError):
        Grant("alice", "bob", Level.L0, NOW, time_from=10, time_to=5)
    with pytest.raises(PolicyError):
        Grant("alice", "bob", "l9", NOW)  # type: ignore[arg-type]
    g = Grant("alice", "bob", Level.L1, NOW, tags=frozenset({"a"}))
    assert Grant.from_json(g.to_json()) == g and Grant.from_json(g.to_json()).id == g.id


# -- the oracle: the rules restated plainly, independently of policy/access.py's structure ------------------------

LOCAL = [Location.THIS_DEVICE]
DEVICES = [Location.THIS_DEVICE, Location.TRUSTED_DEVICE]
SUBNET = [*DEVICES, Location.PRIVATE_SUBNET]
ANYWHERE = [*SUBNET, Location.PUBLIC_SWARM]


def oracle(p: Principal, a: Asset, perm: Permission, loc: Location, now: int, grants: list[Grant]) -> bool:
    if a.tombstone:
        return False
    r = a.retention_policy
    if r.delete_at and now >= r.delete_at:
        return False
    if r.ttl_seconds and now >= a.created_at + r.ttl_seconds * 1_000_000:
        return False
    me = p.on_behalf_of or p.id
    owner = me == a.owner_id
    scope = a.privacy_scope.value
    reader = False
    if owner or scope == "public":
        reader = True
    elif scope != "local_only":
        if p.id in a.allowed_principals or (p.on_behalf_of != "" and p.on_behalf_of in a.allowed_principals):
            reader = True
        if set(p.roles) & set(a.allowed_roles):
            reader = True
        if (
            scope in ("enterprise_private", "tenant_private", "shared")
            and a.tenant_scope != ""
            and a.tenant_scope in p.tenants
        ):
            reader = True
    if not reader:
        if perm.value not in ("read", "context"):
            return False
        granted = False
        for g in grants:
            if g.grantee not in (me, p.id) and g.grantee not in p.teams:
                continue
            if now < g.created_at or (g.revoked_at and now >= g.revoked_at) or (g.expires_at and now >= g.expires_at):
                continue
            if a.owner_id != g.owner or scope == "local_only":
                continue
            if g.segments and a.segment not in g.segments:
                continue
            if g.tags and not set(a.tags) & g.tags:
                continue
            if (g.time_from and a.created_at < g.time_from) or (g.time_to and a.created_at >= g.time_to):
                continue
            if int(a.level.value[1]) < int(g.max_level.value[1]):
                continue
            granted = True
        if not granted:
            return False
    where = {"local_only": LOCAL, "user_private": DEVICES, "trusted_devices": DEVICES, "public": ANYWHERE}.get(
        scope, SUBNET
    )
    inference = {
        "local_only": LOCAL,
        "private_nodes": SUBNET,
        "public_with_redaction": SUBNET,
        "public_allowed": ANYWHERE,
    }[a.inference_policy.value]
    if loc not in where or loc not in inference:
        return False
    if perm.value in ("read", "context"):
        return True
    if perm.value == "memorize":
        return owner or scope == "public"
    if perm.value == "replicate":
        return owner and a.replication_policy.value != "none" and scope != "local_only"
    if perm.value == "export":
        return a.export_policy.value == "allowed"
    t = a.training_policy.value
    if t == "allowed":
        return True
    if t == "local_only":
        return owner and loc == Location.THIS_DEVICE
    if t == "tenant_only":
        return a.tenant_scope != "" and a.tenant_scope in p.tenants and loc in SUBNET
    return False


people = ["alice", "bob", "carol"]
principals = st.builds(
    Principal,
    id=st.sampled_from([*people, "agent1"]),
    tenants=st.frozensets(st.sampled_from(["acme", "globex"]), max_size=2),
    roles=st.frozensets(st.sampled_from(["auditor", "ops"]), max_size=1),
    teams=st.frozensets(st.sampled_from(["team-x"]), max_size=1),
    on_behalf_of=st.sampled_from(["", "", "alice", "bob"]),
)


@st.composite
def assets(draw: st.DrawFn) -> Asset:
    scope = draw(st.sampled_from(list(PrivacyScope)))
    return asset(
        draw(st.text(max_size=5)),
        owner=draw(st.sampled_from(people)),
        privacy_scope=scope,
        tenant_scope=draw(st.sampled_from(["acme", "globex"]))
        if scope in (PrivacyScope.ENTERPRISE_PRIVATE, PrivacyScope.TENANT_PRIVATE)
        else draw(st.sampled_from(["", "acme"])),
        allowed_principals=draw(st.lists(st.sampled_from([*people, "agent1"]), max_size=2)),
        allowed_roles=draw(st.lists(st.sampled_from(["auditor", "ops"]), max_size=1)),
        inference_policy=draw(st.sampled_from(list(InferencePolicy))),
        training_policy=draw(st.sampled_from(list(TrainingPolicy))),
        export_policy=draw(st.sampled_from(list(ExportPolicy))),
        replication_policy=draw(st.sampled_from(list(ReplicationPolicy))),
        level=draw(st.sampled_from(list(Level))),
        segment=draw(st.sampled_from(["", "work", "home"])),
        tags=draw(st.lists(st.sampled_from(["proj", "x"]), max_size=2)),
        created_at=NOW - draw(st.integers(0, 10)) * HOUR,
        retention_policy=draw(
            st.sampled_from([Retention(), Retention(ttl_seconds=3600 * 5), Retention(delete_at=NOW)])
        ),
        tombstone=draw(st.booleans()) and draw(st.booleans()),
    )


@st.composite
def one_grant(draw: st.DrawFn) -> Grant:
    owner = draw(st.sampled_from(people))
    return Grant(
        owner=owner,
        grantee=draw(st.sampled_from([g for g in ("bob", "carol", "team-x") if g != owner])),
        max_level=draw(st.sampled_from(list(Level))),
        created_at=draw(st.sampled_from([NOW - 2 * HOUR, NOW + HOUR])),
        segments=draw(st.frozensets(st.sampled_from(["work", "home"]), max_size=1)),
        tags=draw(st.frozensets(st.sampled_from(["proj"]), max_size=1)),
        expires_at=draw(st.sampled_from([0, NOW - HOUR, NOW + HOUR])),
        revoked_at=draw(st.sampled_from([0, 0, NOW - HOUR])),
    )


grants = st.lists(one_grant(), max_size=3)


def check_decision(p: Principal, a: Asset, perm: Permission, loc: Location, gs: list[Grant]) -> None:
    d = decide(p, a, perm, loc, NOW, gs)
    assert d.allowed == oracle(p, a, perm, loc, NOW, gs), d
    assert d.reason


@settings(max_examples=500, derandomize=True, deadline=None)
@given(p=principals, a=assets(), perm=st.sampled_from(list(Permission)), loc=st.sampled_from(list(Location)), gs=grants)
def test_decisions_match_the_oracle(p: Principal, a: Asset, perm: Permission, loc: Location, gs: list[Grant]) -> None:
    """For random principals, assets, permissions, locations and grants, decide() agrees with the plain oracle (500
    examples; 2,000 in `make test-slow`)."""
    check_decision(p, a, perm, loc, gs)


@pytest.mark.slow
@settings(max_examples=2000, derandomize=True, deadline=None)
@given(p=principals, a=assets(), perm=st.sampled_from(list(Permission)), loc=st.sampled_from(list(Location)), gs=grants)
def test_decisions_match_the_oracle_at_length(
    p: Principal, a: Asset, perm: Permission, loc: Location, gs: list[Grant]
) -> None:
    """The same oracle on 2,000 examples."""
    check_decision(p, a, perm, loc, gs)


# -- inheritance --------------------------------------------------------------------------------------------------


@settings(max_examples=500, derandomize=True, deadline=None)
@given(sources=st.lists(assets(), min_size=1, max_size=4))
def test_derived_assets_are_never_less_restrictive_than_a_source(sources: list[Asset]) -> None:
    """inherit() gives policies at least as restrictive as every source's (or refuses mixing private owners)."""
    several = len({s.owner_id for s in sources}) > 1
    try:
        fields = inherit(sources, owner="curator" if several else "")
    except InvalidAsset as e:
        assert "cannot be combined" in str(e)
        return
    derived = asset(
        "summary", **{k: v for k, v in fields.items() if k != "owner_id"}, owner=fields["owner_id"], level="l1"
    )
    for s in sources:
        assert at_least_as_restrictive(derived, s) == [], s
    assert set(derived.derived_from) == {s.id for s in sources}


def test_inherit_examples() -> None:
    """Readers intersect, tags union, retention takes the earliest, scope the narrowest."""
    a = asset(
        "a",
        privacy_scope="tenant_private",
        tenant_scope="acme",
        allowed_principals=["bob", "carol"],
        policy_tags=["pii"],
        retention_policy=Retention(delete_at=NOW + 10),
    )
    b = asset(
        "b",
        privacy_scope="user_private",
        allowed_principals=["carol"],
        policy_tags=["finance"],
        retention_policy=Retention(delete_at=NOW + 5),
    )
    f = inherit([a, b])
    assert f["privacy_scope"] is PrivacyScope.USER_PRIVATE
    assert f["allowed_principals"] == ("carol",)
    assert f["policy_tags"] == ("finance", "pii")
    assert f["retention_policy"].delete_at == NOW + 5
    with pytest.raises(Exception, match="cannot be combined"):
        inherit([asset("x"), asset("y", owner="bob")])


def test_declassify_is_explicit_owned_and_audited() -> None:
    """Only the owner widens a policy, with a reason; the audit names the change."""
    a = asset()
    new, audit = declassify(a, ALICE, NOW + 1, "publish the recipe", privacy_scope=PrivacyScope.PUBLIC)
    assert new.privacy_scope is PrivacyScope.PUBLIC and new.version == 2
    assert audit.changes == {"privacy_scope": ("PrivacyScope.USER_PRIVATE", "PrivacyScope.PUBLIC")}
    with pytest.raises(PolicyError, match="only the owner"):
        declassify(a, BOB, NOW, "why not", privacy_scope=PrivacyScope.PUBLIC)
    with pytest.raises(PolicyError, match="reason"):
        declassify(a, ALICE, NOW, " ", privacy_scope=PrivacyScope.PUBLIC)
    with pytest.raises(PolicyError, match="policy fields only"):
        declassify(a, ALICE, NOW, "r", payload={"text": "other"})
