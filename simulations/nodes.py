"""Nodes for the simulator and the replication tests: the real core over the in-memory fakes, seeded."""

from __future__ import annotations

from gaml.node.core.embed import HashEmbedder
from gaml.node.core.node import Node
from gaml.node.core.store.blobs import MemoryBlobs
from gaml.node.core.store.kv import KV, MemoryKV
from gaml.node.core.store.store import Store
from gaml.node.core.store.vectors import ExactFactory
from gaml.policy import crypto
from gaml.policy.keychain import NODE_IDENTITY_REF, NODE_MASTER_REF, MemoryKeychain


def make_node(seed: int, *, dim: int = 32, kv: KV | None = None) -> Node:
    """A node whose keys, nonces and ids all come from ``seed``: the same seed builds the same node. ``kv``: its
    storage (a fresh ``MemoryKV`` by default)."""
    entropy = crypto.SeededEntropy(seed)
    keychain = MemoryKeychain()
    keychain.put(NODE_IDENTITY_REF, entropy.random_bytes(32))
    keychain.put(NODE_MASTER_REF, entropy.random_bytes(32))
    identity = crypto.SigningKey(keychain.get(NODE_IDENTITY_REF))
    store = Store.open(MemoryKV() if kv is None else kv, MemoryBlobs(), keychain, identity, ExactFactory(), entropy)
    return Node(store, HashEmbedder(dim))


__all__ = ["make_node"]
