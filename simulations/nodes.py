"""Nodes for the simulator and the replication tests: the real core over the in-memory fakes, seeded."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gaml.crdt.sync import Sync
from gaml.node.core.embed import HashEmbedder
from gaml.node.core.node import Node
from gaml.node.core.replica import Replica
from gaml.node.core.store.blobs import MemoryBlobs
from gaml.node.core.store.kv import KV, MemoryKV
from gaml.node.core.store.store import Store
from gaml.node.core.store.vectors import ExactFactory
from gaml.policy import crypto
from gaml.policy.keychain import NODE_IDENTITY_REF, NODE_MASTER_REF, MemoryKeychain


def make_node(
    seed: int, *, dim: int = 32, kv: KV | None = None, keychain: MemoryKeychain | None = None, incarnation: int = 0
) -> Node:
    """A node whose keys, nonces and ids all come from ``seed``: the same seed builds the same node. ``kv``: its
    storage (a fresh ``MemoryKV`` by default). A restart passes the node's storage and keychain again (its keys, and
    the group keys it was given), and the next ``incarnation``, from which its nonces are drawn afresh: a restarted
    node never repeats a nonce of an earlier life."""
    entropy = crypto.SeededEntropy(seed)
    if keychain is None:
        keychain = MemoryKeychain()
        keychain.put(NODE_IDENTITY_REF, entropy.random_bytes(32))
        keychain.put(NODE_MASTER_REF, entropy.random_bytes(32))
    if incarnation:
        entropy = crypto.SeededEntropy(seed * 1_000_003 + incarnation)
    identity = crypto.SigningKey(keychain.get(NODE_IDENTITY_REF))
    store = Store.open(MemoryKV() if kv is None else kv, MemoryBlobs(), keychain, identity, ExactFactory(), entropy)
    return Node(store, HashEmbedder(dim))


def draft(kind: str, label: str, payload: Mapping[str, Any], owner: str = "") -> dict[str, Any]:
    """A fact whose policy reaches a boundary of ``kind``: a user's ``devices`` (labelled by the owner), a ``subnet``
    or a ``tenant`` (labelled by the tenant; ``owner`` owns it), or the ``public`` swarm."""
    if kind == "public":
        head = {"owner_id": owner or "commons", "privacy_scope": "public", "replication_policy": "public_swarm"}
    elif kind == "devices":
        head = {"owner_id": label, "privacy_scope": "user_private", "replication_policy": "trusted_devices"}
    else:
        scope, policy = (
            ("enterprise_private", "private_subnet") if kind == "subnet" else ("tenant_private", "tenant_nodes")
        )
        head = {"owner_id": owner, "tenant_scope": label, "privacy_scope": scope, "replication_policy": policy}
    return {**head, "asset_type": "fact", "payload": dict(payload)}


class SyncEndpoint:
    """A node's sync engine on the simulated network, which speaks of names where the engine speaks of node ids.
    ``name_of``: node id -> name; ``replicas``: name -> replica (both the world's, filled before the network runs)."""

    def __init__(
        self, name_of: Mapping[str, str], replicas: Mapping[str, Replica], replica: Replica, sync: Sync
    ) -> None:
        self.name_of, self.replicas, self.replica, self.sync = name_of, replicas, replica, sync

    def _out(self, effects: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
        return [(self.name_of[peer], frame) for peer, frame in effects]

    def connected(self, peer: str, now: int) -> list[tuple[str, bytes]]:
        return self._out(self.sync.connected(self.replicas[peer].node_id, now))

    def received(self, peer: str, frame: bytes, now: int) -> list[tuple[str, bytes]]:
        return self._out(self.sync.received(self.replicas[peer].node_id, frame, now))

    def disconnected(self, peer: str) -> None:
        self.sync.disconnected(self.replicas[peer].node_id)

    def tick(self, now: int) -> list[tuple[str, bytes]]:
        self.replica.pump(now)
        return self._out(self.sync.tick(now))


__all__ = ["SyncEndpoint", "draft", "make_node"]
