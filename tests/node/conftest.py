"""Builders for stores and nodes: the pure core over fakes, and the same core over the real shells."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from gaml.node.core.embed import HashEmbedder
from gaml.node.core.memory.ingest import IngestOptions, Ingestor
from gaml.node.core.node import Node
from gaml.node.core.store.blobs import BlobStore, MemoryBlobs
from gaml.node.core.store.kv import KV, MemoryKV, Op
from gaml.node.core.store.lexical import LexicalIndex
from gaml.node.core.store.store import Store
from gaml.node.core.store.vectors import AdaptiveFactory, ExactFactory, IndexFactory
from gaml.node.core.text import parsers
from gaml.node.core.text.privacy import Rules
from gaml.node.shells.files import FileBlobs
from gaml.node.shells.hnsw_index import HnswFactory
from gaml.node.shells.rocks_kv import RocksKV
from gaml.policy import crypto
from gaml.policy.access import Principal
from gaml.policy.keychain import NODE_IDENTITY_REF, NODE_MASTER_REF, MemoryKeychain

NOW = 1_700_000_000_000_000


@dataclasses.dataclass
class World:
    """Everything a store is made of, so a test can reopen it, inspect it, or break it."""

    make_kv: Callable[[], KV]
    blobs: BlobStore
    keychain: MemoryKeychain
    factory: IndexFactory
    entropy: crypto.Entropy
    path: Path | None = None
    kv: KV | None = None

    def open_store(self) -> Store:
        self.kv = self.make_kv()
        identity = crypto.SigningKey(self.keychain.get(NODE_IDENTITY_REF))
        return Store.open(
            self.kv, self.blobs, self.keychain, identity, self.factory, self.entropy, max_payload_bytes=4096
        )

    def open_node(self) -> Node:
        return Node(self.open_store(), HashEmbedder(64))


class CountingKV(MemoryKV):
    """A MemoryKV that counts the keys it is asked to load, per space and key (a fake, not a mock). The store opens
    every record it loads (decrypts and decodes it), so loads of ``assets`` count record openings. It also notes each
    commit: the spaces it wrote and whether it asked to be durable on return (``sync``)."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: Counter[tuple[str, bytes]] = Counter()
        self.commit_log: list[tuple[frozenset[str], bool]] = []

    def commit(self, ops: Sequence[Op], *, sync: bool = True) -> None:
        super().commit(ops, sync=sync)
        self.commit_log.append((frozenset(op.space for op in ops), sync))

    def loaded(self, space: str, key: bytes | None = None) -> int:
        """How many loads of ``key`` (None: of any key) of ``space`` so far."""
        return sum(n for (s, k), n in self.loads.items() if s == space and (key is None or k == key))

    def load(self, space: str, key: bytes) -> bytes | None:
        self.loads[(space, key)] += 1
        return super().load(space, key)

    def load_many(self, space: str, keys: Sequence[bytes]) -> list[bytes | None]:
        self.loads.update((space, k) for k in keys)
        return super().load_many(space, keys)


def new_keychain(seed: int = 0) -> MemoryKeychain:
    ent = crypto.SeededEntropy(seed)
    kc = MemoryKeychain()
    kc.put(NODE_IDENTITY_REF, ent.random_bytes(32))
    kc.put(NODE_MASTER_REF, ent.random_bytes(32))
    return kc


def memory_world() -> World:
    holder = [MemoryKV()]

    def make() -> KV:
        holder.append(holder[-1].reopened())  # reopening sees the same data through a new handle
        return holder[-1]

    return World(make, MemoryBlobs(), new_keychain(), ExactFactory(), crypto.SeededEntropy(1))


def rocks_world(path: Path) -> World:
    return World(
        lambda: RocksKV(path / "db"),
        FileBlobs(path / "index"),
        new_keychain(),
        AdaptiveFactory(HnswFactory(), threshold=32),
        crypto.SeededEntropy(1),
        path=path,
    )


@pytest.fixture(params=["memory", "rocks"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    """The same tests run on the pure core with fakes and on RocksDB + hnswlib."""
    w = memory_world() if request.param == "memory" else rocks_world(tmp_path)
    yield w
    if w.kv is not None:
        w.kv.close()


def live_postings(index: LexicalIndex, pid: bytes) -> dict[tuple[bytes, str], tuple[int, int]]:
    """Every live posting of a partition in memory: (blinded term, id) -> (term frequency, document length)."""
    mem = index._postings(pid)
    out = {}
    for b, term in mem.terms.items():
        docs, tf = term.arrays()
        for o, f in zip(docs.tolist(), tf.tolist(), strict=True):
            if mem.alive[o]:
                out[(b, mem.ids[o])] = (f, int(mem.length[o]))
    return out


def fact(text: str, owner: str = "alice", **kw: Any) -> dict[str, Any]:
    return {"asset_type": "fact", "payload": {"text": text}, "owner_id": owner, **kw}


def conversation_node(turns: Sequence[tuple[str, str]], date: str = "1:56 pm on 8 May, 2023") -> Node:
    """A node in memory holding one LoCoMo-shaped session of ``(speaker, text)`` turns between Caroline and Melanie
    on ``date``, ingested as alice's memory."""
    node = memory_world().open_node()
    node.governance.add_principal(Principal("alice"))
    session = [{"speaker": who, "dia_id": f"D1:{n}", "text": text} for n, (who, text) in enumerate(turns, start=1)]
    conversation = {"speaker_a": "Caroline", "speaker_b": "Melanie", "session_1_date_time": date, "session_1": session}
    sample = {"sample_id": "conv-test", "conversation": conversation, "qa": []}
    Ingestor(node, Rules.load_default()).ingest(
        parsers.parse(json.dumps([sample]).encode(), "c.json", "locomo"), IngestOptions("alice"), NOW
    )
    return node
