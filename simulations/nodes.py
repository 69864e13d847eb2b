"""Nodes for the simulator and the replication tests: the real core over the in-memory fakes, seeded."""

from __future__ import annotations

from node.blobs import MemoryBlobs
from node.core import Node
from node.embed import HashEmbedder
from node.kv import MemoryKV
from node.store import Store
from node.vectors import ExactFactory
from policy import crypto
from policy.keychain import NODE_IDENTITY_REF, NODE_MASTER_REF, MemoryKeychain


def make_node(seed: int, *, dim: int = 32) -> Node:
    """A node whose keys, nonces and ids all come from ``seed``: the same seed builds the same node."""
    entropy = crypto.SeededEntropy(seed)
    keychain = MemoryKeychain()
    keychain.put(NODE_IDENTITY_REF, entropy.random_bytes(32))
    keychain.put(NODE_MASTER_REF, entropy.random_bytes(32))
    identity = crypto.SigningKey(keychain.get(NODE_IDENTITY_REF))
    store = Store.open(MemoryKV(), MemoryBlobs(), keychain, identity, ExactFactory(), entropy)
    return Node(store, HashEmbedder(dim))


__all__ = ["make_node"]
