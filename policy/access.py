"""Who may do what with which memory: principals, permissions, grants, and the decisions over them. Pure functions.

Every decision is a value (:class:`Decision`) with the reason it was made, so that retrieval can record why an asset
was or was not a candidate, and tests can compare it with an independent statement of the rules.

The rules, in the order :func:`decide` applies them:

1. **Liveness**: a tombstone, or an asset past its retention (``delete_at``, or ``created_at`` + ``ttl_seconds``), is
   nobody's to use.
2. **Audience** (privacy scope and boundary): ``local_only`` is its owner's alone; ``user_private`` and
   ``trusted_devices`` are the owner's and any principal or role the asset names in ``allowed_principals`` /
   ``allowed_roles``; ``enterprise_private``, ``tenant_private`` and ``shared`` add the members of the asset's tenant;
   ``public`` is everyone's. A principal acting on behalf of a user (an agent, a device) is that user here.
3. **Grants** widen the audience of an owner's memory for one grantee (a principal or a team): a segment, tag and
   time filter, a ceiling on the level of detail (an L0 verbatim item is not released under an L2 ceiling), an expiry,
   and revocation that holds from its time on. Grants give ``read`` and ``context`` only, never ``local_only`` memory,
   and teams cannot hold teams (no transitive laundering: membership is one level deep).
4. **Location**: where the request executes must be inside the asset's boundary and its inference policy: local-only
   memory stays on this device, private memory on the owner's devices, tenant memory inside the private subnet;
   ``public_with_redaction`` memory reaches the public swarm only as a redacted packet.
5. **Purpose**: ``read`` and ``context`` need the audience; ``memorize`` (a durable write of derived memory) and
   ``replicate`` need ownership, since local availability grants neither; ``export`` needs an ``allowed`` export
   policy; ``train`` follows the training policy.

**Derived assets** (:func:`inherit`) take the most restrictive policy of their sources: readers intersect,
restrictions union, retention takes the earliest date, privacy the narrowest scope. :func:`declassify` is the one way
to widen a policy, and it returns the audit record that must be stored with the change.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Protocol

from gaml.policy import model
from gaml.policy.errors import InvalidAsset, PolicyError, UnknownEnumValue
from gaml.policy.model import (
    Asset,
    ExportPolicy,
    InferencePolicy,
    Level,
    PrivacyScope,
    ReplicationPolicy,
    Retention,
    TrainingPolicy,
    canonical_encode,
)
from gaml.policy.partitions import PartitionRef

GRANT_ID_TAG: Final = b"gaml-grant-id-v1"


class _Named(model._Named):
    """The model's named enums, refusing unknown names with a :class:`PolicyError`."""

    @classmethod
    def parse(cls, value: object) -> Any:
        try:
            return super().parse(value)
        except UnknownEnumValue as e:
            raise PolicyError(str(e)) from None


class PrincipalKind(_Named):
    USER = "user"
    AGENT = "agent"  # an ELM or agent; acts on behalf of a user
    NODE = "node"
    DEVICE = "device"
    WORKSPACE = "workspace"
    TEAM = "team"
    TENANT = "tenant"


class Permission(_Named):
    """Separate permissions: holding one never implies another."""

    READ = "read"  # show to the principal
    CONTEXT = "context"  # use as temporary context for a model
    MEMORIZE = "memorize"  # write something derived into durable memory
    REPLICATE = "replicate"
    EXPORT = "export"
    TRAIN = "train"


class Location(_Named):
    """Where a request executes (where the memory would go), from the closest to the widest."""

    THIS_DEVICE = "this_device"
    TRUSTED_DEVICE = "trusted_device"
    PRIVATE_SUBNET = "private_subnet"
    PUBLIC_SWARM = "public_swarm"


_LOCATION_RANK: Final = {loc: i for i, loc in enumerate(Location)}
# The widest location each scope's memory may reach.
SCOPE_REACH: Final[dict[PrivacyScope, Location]] = {
    PrivacyScope.LOCAL_ONLY: Location.THIS_DEVICE,
    PrivacyScope.USER_PRIVATE: Location.TRUSTED_DEVICE,
    PrivacyScope.TRUSTED_DEVICES: Location.TRUSTED_DEVICE,
    PrivacyScope.ENTERPRISE_PRIVATE: Location.PRIVATE_SUBNET,
    PrivacyScope.TENANT_PRIVATE: Location.PRIVATE_SUBNET,
    PrivacyScope.SHARED: Location.PRIVATE_SUBNET,
    PrivacyScope.PUBLIC: Location.PUBLIC_SWARM,
}
INFERENCE_REACH: Final[dict[InferencePolicy, Location]] = {
    InferencePolicy.LOCAL_ONLY: Location.THIS_DEVICE,
    InferencePolicy.PRIVATE_NODES: Location.PRIVATE_SUBNET,
    InferencePolicy.PUBLIC_WITH_REDACTION: Location.PRIVATE_SUBNET,  # beyond: only as a redacted packet
    InferencePolicy.PUBLIC_ALLOWED: Location.PUBLIC_SWARM,
}
SCOPE_ORDER: Final = tuple(PrivacyScope)  # narrowest first
LEVEL_ORDER: Final = tuple(Level)  # most detailed first


class Writable(Protocol):
    """What a write decision reads of an asset (or of what an ingest will write)."""

    @property
    def owner_id(self) -> str: ...
    @property
    def tenant_scope(self) -> str: ...
    @property
    def privacy_scope(self) -> PrivacyScope: ...
    @property
    def allowed_principals(self) -> tuple[str, ...]: ...
    @property
    def allowed_roles(self) -> tuple[str, ...]: ...


class Governed(Writable, Protocol):
    """What decisions read of an asset: an :class:`Asset`, or a payload-free view of one."""

    @property
    def id(self) -> str: ...
    @property
    def inference_policy(self) -> InferencePolicy: ...
    @property
    def training_policy(self) -> TrainingPolicy: ...
    @property
    def export_policy(self) -> ExportPolicy: ...
    @property
    def replication_policy(self) -> ReplicationPolicy: ...
    @property
    def retention_policy(self) -> Retention: ...
    @property
    def level(self) -> Level: ...
    @property
    def segment(self) -> str: ...
    @property
    def tags(self) -> tuple[str, ...]: ...
    @property
    def created_at(self) -> int: ...
    @property
    def tombstone(self) -> bool: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking. ``on_behalf_of`` names the user an agent or device acts for."""

    id: str
    kind: PrincipalKind = PrincipalKind.USER
    tenants: frozenset[str] = frozenset()
    roles: frozenset[str] = frozenset()
    teams: frozenset[str] = frozenset()
    on_behalf_of: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id or any(c.isspace() for c in self.id):
            raise PolicyError(f"a principal id is a non-empty word, got {self.id!r}")
        object.__setattr__(self, "kind", PrincipalKind.parse(self.kind))
        for name in ("tenants", "roles", "teams"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))
        if self.kind is PrincipalKind.TEAM and self.teams:
            raise PolicyError(f"team {self.id} cannot belong to another team (no pools inside pools)")

    @property
    def user(self) -> str:
        """The user whose memory this principal acts as (itself, unless it acts on behalf of someone)."""
        return self.on_behalf_of or self.id

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind.value,
            "tenants": sorted(self.tenants),
            "roles": sorted(self.roles),
            "teams": sorted(self.teams),
            "on_behalf_of": self.on_behalf_of,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Principal:
        return cls(
            d["id"],
            d["kind"],
            frozenset(d["tenants"]),
            frozenset(d["roles"]),
            frozenset(d["teams"]),
            d.get("on_behalf_of", ""),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Grant:
    """An owner's grant of part of their memory to a grantee, up to a ceiling of detail."""

    owner: str
    grantee: str
    max_level: Level
    created_at: int
    segments: frozenset[str] = frozenset()  # empty: every segment
    tags: frozenset[str] = frozenset()  # empty: any tags; else the asset must carry one of them
    time_from: int = 0  # on the asset's created_at, microseconds; 0: unbounded
    time_to: int = 0
    expires_at: int = 0  # 0: until revoked
    revoked_at: int = 0  # 0: not revoked

    def __post_init__(self) -> None:
        if not self.owner or not self.grantee:
            raise PolicyError("a grant names its owner and its grantee")
        if self.owner == self.grantee:
            raise PolicyError("an owner needs no grant to their own memory")
        try:
            object.__setattr__(self, "max_level", Level.parse(self.max_level))
        except InvalidAsset as e:
            raise PolicyError(f"grant ceiling: {e}") from None
        object.__setattr__(self, "segments", frozenset(self.segments))
        object.__setattr__(self, "tags", frozenset(self.tags))
        for name in ("created_at", "time_from", "time_to", "expires_at", "revoked_at"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise PolicyError(f"grant {name} must be a non-negative integer (microseconds), got {v!r}")
        if self.time_to and self.time_to < self.time_from:
            raise PolicyError("grant time_to is before time_from")

    @property
    def id(self) -> str:
        """Content-derived: the same grant made twice is the same grant."""
        body = canonical_encode(
            [
                self.owner,
                self.grantee,
                self.max_level.value,
                sorted(self.segments),
                sorted(self.tags),
                self.time_from,
                self.time_to,
                self.expires_at,
                self.created_at,
            ]
        )
        return hashlib.blake2b(body, digest_size=12, person=GRANT_ID_TAG).hexdigest()

    def active(self, now: int) -> bool:
        return (
            now >= self.created_at
            and not (self.revoked_at and now >= self.revoked_at)
            and not (self.expires_at and now >= self.expires_at)
        )

    def covers(self, asset: Governed) -> bool:
        """Whether the grant's filter selects the asset (owner, segment, tags, time); the ceiling is separate."""
        if asset.owner_id != self.owner or asset.privacy_scope is PrivacyScope.LOCAL_ONLY:
            return False
        if self.segments and asset.segment not in self.segments:
            return False
        if self.tags and not (self.tags & set(asset.tags)):
            return False
        if self.time_from and asset.created_at < self.time_from:
            return False
        return not (self.time_to and asset.created_at >= self.time_to)

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.update(max_level=self.max_level.value, segments=sorted(self.segments), tags=sorted(self.tags), id=self.id)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Grant:
        kw = {k: v for k, v in d.items() if k != "id"}
        kw["segments"], kw["tags"] = frozenset(kw["segments"]), frozenset(kw["tags"])
        return cls(**kw)


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str
    via: str = ""  # owner, audience, tenant, principal, role, public, grant:<id>
    redact_only: bool = False  # refused as it is, but a redacted packet may go


def expired(asset: Governed, now: int) -> bool:
    r = asset.retention_policy
    return bool(
        (r.delete_at and now >= r.delete_at) or (r.ttl_seconds and now >= asset.created_at + r.ttl_seconds * 1_000_000)
    )


def _audience(p: Principal, a: Governed) -> str:
    """How ``p`` belongs to the asset's audience ('' when it does not)."""
    if p.user == a.owner_id and a.owner_id:
        return "owner"
    scope = a.privacy_scope
    if scope is PrivacyScope.LOCAL_ONLY:
        return ""
    if scope is PrivacyScope.PUBLIC:
        return "public"
    if p.id in a.allowed_principals or (p.on_behalf_of and p.on_behalf_of in a.allowed_principals):
        return "principal"
    if p.roles & set(a.allowed_roles):
        return "role"
    tenant_scopes = (PrivacyScope.ENTERPRISE_PRIVATE, PrivacyScope.TENANT_PRIVATE, PrivacyScope.SHARED)
    if scope in tenant_scopes and a.tenant_scope and a.tenant_scope in p.tenants:
        return "tenant"
    return ""


def _grant_for(p: Principal, a: Governed, grants: Iterable[Grant], now: int) -> tuple[Grant | None, str]:
    """The grant that lets ``p`` read ``a`` (the most permissive ceiling), or None and why not."""
    best: Grant | None = None
    reason = "not in the asset's audience and no grant covers it"
    for g in grants:
        if g.grantee != p.user and g.grantee not in p.teams and g.grantee != p.id:
            continue
        if not g.active(now) or not g.covers(a):
            continue
        if LEVEL_ORDER.index(a.level) < LEVEL_ORDER.index(g.max_level):
            reason = f"a grant covers it only up to {g.max_level.value}; the item is {a.level.value}"
            continue
        if best is None or LEVEL_ORDER.index(g.max_level) < LEVEL_ORDER.index(best.max_level):
            best = g
    return best, reason


def reach(a: Governed) -> Location:
    """The widest location the asset may be used at as it is (scope and inference policy together)."""
    s, i = SCOPE_REACH[a.privacy_scope], INFERENCE_REACH[a.inference_policy]
    return s if _LOCATION_RANK[s] <= _LOCATION_RANK[i] else i


def decide(
    p: Principal, a: Governed, permission: Permission, location: Location, now: int, grants: Sequence[Grant] = ()
) -> Decision:
    """May ``p`` use ``a`` for ``permission`` at ``location`` at time ``now``? A decision with its reason."""
    if a.tombstone:
        return Decision(False, "deleted")
    if expired(a, now):
        return Decision(False, "past its retention")
    via = _audience(p, a)
    is_owner = via == "owner"
    if not via:
        if permission in (Permission.READ, Permission.CONTEXT):
            grant, why = _grant_for(p, a, grants, now)
            if grant is None:
                return Decision(False, why)
            via = f"grant:{grant.id}"
        else:
            return Decision(False, f"{permission.value} needs the asset's audience; grants give read and context only")
    widest = reach(a)
    if _LOCATION_RANK[location] > _LOCATION_RANK[widest]:
        if (
            a.inference_policy is InferencePolicy.PUBLIC_WITH_REDACTION
            and location is Location.PUBLIC_SWARM
            and a.privacy_scope is not PrivacyScope.LOCAL_ONLY
            and permission in (Permission.READ, Permission.CONTEXT)
        ):
            return Decision(False, f"reaches {location.value} only as a redacted packet", via, redact_only=True)
        return Decision(
            False,
            f"may not leave {widest.value} (scope {a.privacy_scope.value}, inference "
            f"{a.inference_policy.value}); the request runs at {location.value}",
            via,
        )
    if permission in (Permission.READ, Permission.CONTEXT):
        return Decision(True, f"{permission.value} as {via}", via)
    if permission is Permission.MEMORIZE:
        ok = is_owner or a.privacy_scope is PrivacyScope.PUBLIC
        return Decision(ok, "memorize: owner or public" if ok else "memorize needs ownership (or public memory)", via)
    if permission is Permission.REPLICATE:
        if not is_owner:
            return Decision(False, "only the owner's nodes replicate an asset", via)
        ok = a.replication_policy is not ReplicationPolicy.NONE and a.privacy_scope is not PrivacyScope.LOCAL_ONLY
        return Decision(ok, f"replication policy {a.replication_policy.value}", via)
    if permission is Permission.EXPORT:
        ok = a.export_policy is ExportPolicy.ALLOWED
        return Decision(ok, f"export policy {a.export_policy.value}", via)
    # TRAIN
    t = a.training_policy
    if t is TrainingPolicy.ALLOWED:
        return Decision(True, "training allowed", via)
    if t is TrainingPolicy.LOCAL_ONLY:
        ok = is_owner and location is Location.THIS_DEVICE
        return Decision(ok, "training only by the owner on this device", via)
    if t is TrainingPolicy.TENANT_ONLY:
        ok = (
            bool(a.tenant_scope)
            and (a.tenant_scope in p.tenants)
            and _LOCATION_RANK[location] <= _LOCATION_RANK[Location.PRIVATE_SUBNET]
        )
        return Decision(ok, "training only inside the tenant", via)
    if t is TrainingPolicy.ANONYMIZED_OPT_IN:
        return Decision(False, "training only on an anonymized, opted-in derivative", via, redact_only=True)
    return Decision(False, "training prohibited", via)


def in_audience(p: Principal, ref: PartitionRef) -> bool:
    """Whether ``p`` is in the audience of a partition: it is its owner's, one of its tenants', or public."""
    kind, _, who = ref.boundary.partition(":")
    return (kind == "owner" and who == p.user) or (kind == "tenant" and who in p.tenants) or kind == "public"


def may_know(p: Principal, a: Governed, now: int, grants: Sequence[Grant] = ()) -> bool:
    """Whether ``p`` may learn that ``a`` exists: it owns it, or may read it on this device now.

    Everyone else is answered as for an id that does not exist (ids are content hashes, so an answer that differed
    would confirm a guessed fact): the node's ``get``, ``forget``, ``delete`` and ``redact`` by id ask this first."""
    if a.owner_id and p.user == a.owner_id:
        return True
    return decide(p, a, Permission.READ, Location.THIS_DEVICE, now, grants).allowed


# -- writes -----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class WriteTarget:
    """The policy of memory about to be written, before its assets exist (an ingest's owner, tenant and scope)."""

    owner_id: str
    tenant_scope: str = ""
    privacy_scope: PrivacyScope = PrivacyScope.USER_PRIVATE
    allowed_principals: tuple[str, ...] = ()
    allowed_roles: tuple[str, ...] = ()


def authorize_write(writer: Principal, owner: Principal, a: Writable, registered: Callable[[str], bool]) -> Decision:
    """May ``writer`` write ``a`` into ``owner``'s memory? Decided before anything is written, like a read.

    ``owner`` is the registered principal ``a.owner_id`` names (a fresh user principal if it is not registered yet;
    for ownerless public memory, the writer itself). The rules, in order:

    1. a team is a group of readers: it writes no memory;
    2. the owner is the writer's user (an agent or device acting for a user writes that user's memory); only public
       memory may have no owner;
    3. a tenant scope names a tenant the owner belongs to;
    4. ``local_only`` memory is its owner's alone: it names no readers;
    5. a reader list names registered principals (as a grant names its grantee), and roles the owner holds itself.
    """
    if writer.kind is PrincipalKind.TEAM:
        return Decision(False, f"{writer.id} is a team: a team reads what is granted to it and writes no memory")
    if a.owner_id != writer.user and (a.owner_id or a.privacy_scope is not PrivacyScope.PUBLIC):
        whose = f"{a.owner_id}'s" if a.owner_id else "ownerless"
        return Decision(False, f"{writer.id} writes {writer.user}'s memory, not {whose}")
    if a.tenant_scope and a.tenant_scope not in owner.tenants:
        return Decision(
            False,
            f"{owner.id} is not a member of tenant {a.tenant_scope!r}, so memory of that tenant is not {owner.id}'s to "
            f"write (an administrator registers the membership: gaml principal add {owner.id} --tenant "
            f"{a.tenant_scope})",
        )
    if a.privacy_scope is PrivacyScope.LOCAL_ONLY and (a.allowed_principals or a.allowed_roles):
        return Decision(False, "local_only memory is its owner's alone: it names no readers or roles")
    for reader in a.allowed_principals:
        if not registered(reader):
            return Decision(False, f"reader {reader!r} is not a registered principal")
    foreign = sorted(set(a.allowed_roles) - owner.roles)
    if foreign:
        return Decision(
            False, f"{owner.id} does not hold role {foreign[0]!r}: a reader list names only roles its owner holds"
        )
    return Decision(True, "owner", "owner")


# -- derived assets ---------------------------------------------------------------------------------------------------

_REPLICATION_ORDER: Final = tuple(ReplicationPolicy)  # narrowest first
_INFERENCE_ORDER: Final = tuple(InferencePolicy)
_TRAINING_ORDER: Final = tuple(TrainingPolicy)
_EXPORT_ORDER: Final = tuple(ExportPolicy)


def _narrowest(values: Iterable[Any], order: Sequence[Any]) -> Any:
    return min(values, key=order.index)


def inherit(sources: Sequence[Asset], owner: str = "") -> dict[str, Any]:
    """The policy fields a derived asset must carry: never less restrictive than any of its sources.

    Readers intersect (an explicit reader list only survives where every source has one), restrictions (policy tags)
    union, retention takes the earliest date, and each policy takes its narrowest value. Sources of several owners
    need the derived asset's ``owner`` named and never mix private memory; tenant memory of several tenants is not
    combined.
    """
    if not sources:
        raise InvalidAsset("a derived asset needs at least one source")
    owners = {s.owner_id for s in sources}
    tenants = {s.tenant_scope for s in sources}
    scope = _narrowest((s.privacy_scope for s in sources), SCOPE_ORDER)
    if len(owners) > 1 and scope in (PrivacyScope.LOCAL_ONLY, PrivacyScope.USER_PRIVATE, PrivacyScope.TRUSTED_DEVICES):
        raise InvalidAsset(f"sources of {len(owners)} owners include {scope.value} memory; it cannot be combined")
    if len(tenants - {""}) > 1 and scope in (PrivacyScope.ENTERPRISE_PRIVATE, PrivacyScope.TENANT_PRIVATE):
        raise InvalidAsset(f"sources of several tenants include {scope.value} memory; it cannot be combined")
    derived_owner = owner or (sources[0].owner_id if len(owners) == 1 else "")
    if not derived_owner and scope is not PrivacyScope.PUBLIC:
        raise InvalidAsset("the sources have several owners: name the owner of the derived asset")
    principals = frozenset.intersection(*(frozenset(s.allowed_principals) for s in sources))
    roles = frozenset.intersection(*(frozenset(s.allowed_roles) for s in sources))
    deletes = [s.retention_policy.delete_at for s in sources if s.retention_policy.delete_at]
    deletes += [
        s.created_at + s.retention_policy.ttl_seconds * 1_000_000 for s in sources if s.retention_policy.ttl_seconds
    ]
    return {
        "owner_id": derived_owner,
        "tenant_scope": next(iter(tenants)) if len(tenants) == 1 else next(iter(sorted(tenants - {""})), ""),
        "privacy_scope": scope,
        "allowed_principals": tuple(sorted(principals)),
        "allowed_roles": tuple(sorted(roles)),
        "replication_policy": _narrowest((s.replication_policy for s in sources), _REPLICATION_ORDER),
        "inference_policy": _narrowest((s.inference_policy for s in sources), _INFERENCE_ORDER),
        "training_policy": _narrowest((s.training_policy for s in sources), _TRAINING_ORDER),
        "export_policy": _narrowest((s.export_policy for s in sources), _EXPORT_ORDER),
        "retention_policy": Retention(delete_at=min(deletes)) if deletes else Retention(),
        "policy_tags": tuple(sorted({t for s in sources for t in s.policy_tags})),
        "derived_from": tuple(sorted({s.id for s in sources})),
    }


def at_least_as_restrictive(derived: Asset, source: Asset) -> list[str]:
    """The ways ``derived`` is *less* restrictive than ``source`` (empty when it inherits correctly)."""
    problems = []
    if SCOPE_ORDER.index(derived.privacy_scope) > SCOPE_ORDER.index(source.privacy_scope):
        problems.append("privacy_scope")
    for field, order in (
        ("replication_policy", _REPLICATION_ORDER),
        ("inference_policy", _INFERENCE_ORDER),
        ("training_policy", _TRAINING_ORDER),
        ("export_policy", _EXPORT_ORDER),
    ):
        if order.index(getattr(derived, field)) > order.index(getattr(source, field)):
            problems.append(field)
    if not set(derived.allowed_principals) <= set(source.allowed_principals):
        problems.append("allowed_principals")
    if not set(derived.allowed_roles) <= set(source.allowed_roles):
        problems.append("allowed_roles")
    if not set(source.policy_tags) <= set(derived.policy_tags):
        problems.append("policy_tags")
    src_end = [
        x
        for x in (
            source.retention_policy.delete_at,
            source.created_at + source.retention_policy.ttl_seconds * 1_000_000
            if source.retention_policy.ttl_seconds
            else 0,
        )
        if x
    ]
    if src_end:
        d = derived.retention_policy
        d_end = [x for x in (d.delete_at, derived.created_at + d.ttl_seconds * 1_000_000 if d.ttl_seconds else 0) if x]
        if not d_end or min(d_end) > min(src_end):
            problems.append("retention_policy")
    return problems


@dataclasses.dataclass(frozen=True, slots=True)
class Declassification:
    """The audit record of an explicit widening of an asset's policy."""

    asset_id: str
    by: str
    at: int
    reason: str
    changes: dict[str, tuple[str, str]]  # field -> (before, after)


def declassify(asset: Asset, by: Principal, now: int, reason: str, **changes: Any) -> tuple[Asset, Declassification]:
    """Widen an asset's policy, explicitly: only its owner may, with a reason; returns the new asset and the audit."""
    if by.user != asset.owner_id:
        raise PolicyError(f"only the owner ({asset.owner_id}) may declassify asset {asset.id}")
    if not reason.strip():
        raise PolicyError("declassification needs a reason; it is audited")
    allowed = {
        "privacy_scope",
        "allowed_principals",
        "allowed_roles",
        "replication_policy",
        "inference_policy",
        "training_policy",
        "export_policy",
        "retention_policy",
        "policy_tags",
    }
    bad = set(changes) - allowed
    if bad:
        raise PolicyError(f"declassify changes policy fields only, not {', '.join(sorted(bad))}")
    new = asset.replace(**changes, version=asset.version + 1, updated_at=max(now, asset.updated_at))
    record = {k: (str(getattr(asset, k)), str(getattr(new, k))) for k in changes}
    return new, Declassification(asset.id, by.id, now, reason, record)
