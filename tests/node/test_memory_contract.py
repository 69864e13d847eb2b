"""The Memory story suite (tests/contracts/memory.py) through both implementations: ``LocalMemory`` on a real store
(RocksDB, hnswlib, the file keychain; hash embedder) and ``RemoteMemory`` over a real daemon (alice on its Unix socket,
bob over TCP with mutual TLS). Each story passes through both doors, and both tell it alike."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gaml.node.core.service import MemoryService
from gaml.node.home import make_counter, memory_layers, open_node
from gaml.node.local import LocalMemory
from gaml.node.serve.client import RemoteMemory
from gaml.policy.access import Principal
from tests.contracts.memory import STORIES, Doors, Story
from tests.node.daemon_util import UNLOCK, make_home, mtls_client, remove_home, thread_daemon, unix_client


def clock_us() -> int:
    return time.time_ns() // 1000


@contextlib.contextmanager
def store_doors() -> Iterator[Doors]:
    """alice and bob on the store of a fresh home, in-process, as `gaml … --as` reaches it without a daemon."""
    home = make_home(tls=False)
    node = open_node(home.path, UNLOCK)
    try:
        ingestor, ladder = memory_layers(home.path, node)
        service = MemoryService(node, ingestor, ladder, make_counter)
        alice, bob = service.ensure_user("alice"), service.ensure_user("bob")
        yield Doors(LocalMemory(service, alice, clock_us), LocalMemory(service, bob, clock_us))
    finally:
        node.close()
        remove_home(home)


@contextlib.contextmanager
def daemon_doors() -> Iterator[Doors]:
    """alice (the local principal, on the Unix socket) and bob (his client certificate) of a daemon on a fresh home."""
    home = make_home(("bob",))
    try:
        node = open_node(home.path, UNLOCK)  # a client certificate names a principal the node knows
        node.governance.add_principal(Principal("bob"))
        node.close()
        with thread_daemon(home) as daemon, unix_client(home) as a, mtls_client(home, daemon, "bob") as b:
            yield Doors(RemoteMemory(a), RemoteMemory(b))
    finally:
        remove_home(home)


@pytest.mark.parametrize("story", STORIES, ids=lambda s: s.__name__.removeprefix("story_"))
def test_story_through_both_doors(story: Story) -> None:
    """The story holds on the store and through a daemon, and the node answers it alike through both."""
    told = {}
    for name, doors in (("store", store_doors), ("daemon", daemon_doors)):
        with doors() as d:
            try:
                told[name] = story(d)
            except AssertionError as e:
                raise AssertionError(f"through the {name}: {e}") from e
    assert typed(told["store"]) == typed(told["daemon"])


def typed(value: Any) -> Any:
    """A transcript with each scalar tagged by its kind, so that a string "2024" differs from the number 2024 and
    True from 1 (a Struct carries every number as a double, so 1 and 1.0 are the same number)."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [typed(v) for v in value]
    if isinstance(value, bool) or value is None:
        return ("const", value)
    if isinstance(value, int | float):
        return ("number", float(value))
    return (type(value).__name__, value)


def test_the_transcripts_mask_only_what_varies_by_design() -> None:
    """The cross-door comparison means something: a transcript keeps ids, texts and counts, and hides only clock
    readings, node identity and grant ids."""
    from tests.contracts.memory import masked

    got = masked({"id": "a1", "at": 5, "via": "grant:abc", "n": [1, {"created_at": 2, "text": "x"}], "node_id": "n"})
    assert got == {
        "id": "a1",
        "at": "int",
        "via": "grant",
        "n": [1, {"created_at": "int", "text": "x"}],
        "node_id": "str",
    }
    assert typed({"goal": "2024"}) != typed({"goal": 2024}) and typed([True]) != typed([1])
    assert typed([1]) == typed([1.0])
