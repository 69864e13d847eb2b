"""Partitions: where an asset lives, decided by its privacy scope and boundary. Pure functions.

A partition is (privacy scope, boundary). The boundary is the group that may ever see the asset: its owner (for
``local_only``, ``user_private`` and ``trusted_devices``), its tenant or enterprise (``enterprise_private``,
``tenant_private``, ``shared``), or everyone (``public``). Each partition has its own key and its own vector index, so
that retrieval first decides which partitions a caller may read and then searches only those: privacy before ranking
by construction.
"""

from __future__ import annotations

import dataclasses

from policy.errors import GamlError
from policy.model import Asset, PrivacyScope

OWNER_SCOPES = frozenset({PrivacyScope.LOCAL_ONLY, PrivacyScope.USER_PRIVATE, PrivacyScope.TRUSTED_DEVICES})
TENANT_SCOPES = frozenset({PrivacyScope.ENTERPRISE_PRIVATE, PrivacyScope.TENANT_PRIVATE, PrivacyScope.SHARED})


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionRef:
    scope: PrivacyScope
    boundary: str  # "owner:<id>", "tenant:<id>" or "public"

    @property
    def name(self) -> str:
        return f"{self.scope.value}|{self.boundary}"

    @classmethod
    def parse(cls, name: str) -> PartitionRef:
        scope, sep, boundary = name.partition("|")
        if not sep:
            raise GamlError(f"not a partition name: {name!r}")
        return cls(PrivacyScope.parse(scope), boundary)


def partition_for(scope: PrivacyScope, owner_id: str, tenant_scope: str) -> PartitionRef:
    if scope in OWNER_SCOPES:
        return PartitionRef(scope, f"owner:{owner_id}")
    if scope in TENANT_SCOPES:
        # `shared` without a tenant is shared by its owner's circle; keep it inside the owner's boundary.
        return PartitionRef(scope, f"tenant:{tenant_scope}" if tenant_scope else f"owner:{owner_id}")
    return PartitionRef(scope, "public")


def partition_of(asset: Asset) -> PartitionRef:
    return partition_for(asset.privacy_scope, asset.owner_id, asset.tenant_scope)


@dataclasses.dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking. The full principal model (roles, purposes, grants) arrives with the policy engine."""

    id: str
    tenants: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str) -> Principal:
        """``alice`` or ``alice@acme,globex`` (a principal and the tenants it belongs to)."""
        ident, _, tenants = text.partition("@")
        if not ident:
            raise GamlError(f"not a principal: {text!r}")
        return cls(ident, frozenset(t for t in tenants.split(",") if t))


def may_search(principal: Principal, ref: PartitionRef) -> bool:
    """Whether ``principal`` may search the partition: its own, its tenants', and public ones."""
    kind, _, who = ref.boundary.partition(":")
    if kind == "owner":
        return who == principal.id
    if kind == "tenant":
        return who in principal.tenants
    return ref.boundary == "public"
