"""Partitions: where an asset lives, decided by its privacy scope and boundary. Pure functions.

A partition is (privacy scope, boundary). The boundary is the group that may ever see the asset: its owner (for
``local_only``, ``user_private`` and ``trusted_devices``), its tenant or enterprise (``enterprise_private``,
``tenant_private``, ``shared``), or everyone (``public``). Each partition has its own key and its own vector index, so
that retrieval first decides which partitions a caller may read and then searches only those: privacy before ranking
by construction.
"""

from __future__ import annotations

import dataclasses

from gaml.policy.errors import GamlError
from gaml.policy.model import Asset, PrivacyScope

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
