"""How far an asset may travel: the replication boundary its policy allows.

Two fields speak to it. ``privacy_scope`` caps the audience (a ``user_private`` asset never leaves its owner's own
devices, whatever else it says); ``replication_policy`` asks for a reach. The narrower of the two wins, the rule by
which derived assets inherit the most restrictive policy of their sources. ``local_only`` (either field) never leaves
the node.

The reach names a kind of boundary and the label that picks one boundary of that kind: a user's trusted devices are
labelled by the owner, an enterprise subnet and a tenant's nodes by the asset's tenant.

The **public swarm** (:mod:`crdt.swarm`) is an open boundary: an asset enters it only when both fields say so, its
scope ``public`` and its policy ``public_swarm`` (:func:`public`). A node that is in no swarm replicates such an asset
no further than its tenant, as :func:`reach` says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gaml.policy.model import Asset, PrivacyScope, ReplicationPolicy

DEVICES: Final = "devices"
SUBNET: Final = "subnet"
TENANT: Final = "tenant"
PUBLIC: Final = "public"  # the public swarm: no admin, open membership (crdt/swarm.py)
PUBLIC_LABEL: Final = "*"  # the one label of a public swarm
KINDS: Final = (DEVICES, SUBNET, TENANT, PUBLIC)
SIGNED_KINDS: Final = (DEVICES, SUBNET, TENANT)  # kinds whose membership an admin signs

# The widest reach each scope allows, and the reach each policy asks for (0 = this node only).
_CAP: Final = {
    PrivacyScope.LOCAL_ONLY: 0,
    PrivacyScope.USER_PRIVATE: 1,
    PrivacyScope.TRUSTED_DEVICES: 1,
    PrivacyScope.ENTERPRISE_PRIVATE: 2,
    PrivacyScope.TENANT_PRIVATE: 3,
    PrivacyScope.SHARED: 3,
    PrivacyScope.PUBLIC: 3,
}
_ASK: Final = {
    ReplicationPolicy.NONE: 0,
    ReplicationPolicy.TRUSTED_DEVICES: 1,
    ReplicationPolicy.PRIVATE_SUBNET: 2,
    ReplicationPolicy.TENANT_NODES: 3,
    ReplicationPolicy.PUBLIC_SWARM: 3,
}
_KIND_OF: Final = {1: DEVICES, 2: SUBNET, 3: TENANT}


@dataclass(frozen=True)
class Reach:
    kind: str  # devices, subnet or tenant
    label: str  # the owner (devices) or the tenant (subnet, tenant)


def public(asset: Asset) -> bool:
    """Whether the asset may enter the public swarm: public memory that asks for it (never anything narrower)."""
    return asset.privacy_scope is PrivacyScope.PUBLIC and asset.replication_policy is ReplicationPolicy.PUBLIC_SWARM


def reach(asset: Asset) -> Reach | None:
    """The boundary an asset replicates to, or None when it stays on this node."""
    level = min(_CAP[asset.privacy_scope], _ASK[asset.replication_policy])
    if level == 0:
        return None
    kind = _KIND_OF[level]
    label = asset.owner_id if kind == DEVICES else asset.tenant_scope
    if not label:  # a public asset without an owner has no devices; an asset without a tenant has no subnet
        return None
    return Reach(kind, label)


__all__ = [
    "DEVICES",
    "KINDS",
    "PUBLIC",
    "PUBLIC_LABEL",
    "SIGNED_KINDS",
    "SUBNET",
    "TENANT",
    "Reach",
    "public",
    "reach",
]
