"""A node's memory service over the pure core's fakes (MemoryKV, exact index, hash embedder), with alice (tenant acme,
role auditor), bob (tenant globex), claude (an agent for alice) and team-x registered; and a dump of its store."""

from __future__ import annotations

from gaml.node.core.memory.ingest import Ingestor
from gaml.node.core.memory.ladder import Ladder
from gaml.node.core.node import Node
from gaml.node.core.service import MemoryService
from gaml.node.core.store.kv import SPACES, MemoryKV
from gaml.node.core.text.privacy import Rules
from gaml.node.core.tokens import HeuristicCounter
from gaml.policy.access import Principal, PrincipalKind
from tests.node.conftest import memory_world


def service_node() -> tuple[Node, MemoryService]:
    node = memory_world().open_node()
    ingestor = Ingestor(node, Rules.load_default())
    service = MemoryService(node, ingestor, Ladder(node, ingestor), lambda _: HeuristicCounter())
    gov = node.governance
    gov.add_principal(Principal("alice", tenants=frozenset({"acme"}), roles=frozenset({"auditor"})))
    gov.add_principal(Principal("bob", tenants=frozenset({"globex"})))
    gov.add_principal(Principal("claude", PrincipalKind.AGENT, on_behalf_of="alice"))
    gov.add_principal(Principal("team-x", PrincipalKind.TEAM))
    return node, service


def dump(node: Node) -> dict[str, list[tuple[bytes, bytes]]]:
    kv = node.store.kv
    assert isinstance(kv, MemoryKV)
    return {s: list(kv.load_range(s, b"", b"\xff" * 64)) for s in SPACES}
