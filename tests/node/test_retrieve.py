"""Governed retrieval (node/core/access/retrieve.py): privacy before ranking, grants, temporal resolution,
explanations."""

from __future__ import annotations

import functools
import random
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gaml.node.core.access.retrieve import Query, QueryVectors, SearchRequest
from gaml.node.core.embed import HashEmbedder
from gaml.node.core.node import Node
from gaml.policy.access import Grant, Location, Permission, Principal
from gaml.policy.errors import GamlError, IndexMismatch, InvalidInput, PolicyError, StoreCorrupt, UnknownPrincipal
from gaml.policy.model import Asset, AssetType, Level, Retention
from tests.node.conftest import NOW, memory_world
from tests.policy.test_access import oracle

HOUR = 3_600_000_000
PEOPLE = ("alice", "bob", "carol", "dave")
WORDS = ("tea", "coffee", "release", "budget", "marathon", "lisbon", "incident", "payments", "garden", "piano")
SCOPES = ("local_only", "user_private", "trusted_devices", "enterprise_private", "tenant_private", "shared", "public")
WORLDS = 12


def node_for_tests() -> Node:
    w = memory_world()
    return Node(w.open_store(), HashEmbedder(32))


@functools.cache
def world(seed: int) -> tuple[Node, list[Principal], list[Grant], dict[str, Asset]]:
    """A seeded node: ~60 assets over every scope, owners, tenants, readers, policies; principals, teams, grants."""
    rng = random.Random(seed)
    node = node_for_tests()
    drafts = []
    for i in range(60):
        scope = rng.choice(SCOPES)
        tenant = (
            rng.choice(["acme", "globex"])
            if scope in ("enterprise_private", "tenant_private")
            else rng.choice(["", "", "acme"])
        )
        drafts.append(
            {
                "asset_type": rng.choice(["fact", "event", "plan", "goal"]),
                "payload": {"text": f"{' '.join(rng.sample(WORDS, 3))} note {seed}-{i}"},
                "owner_id": rng.choice(PEOPLE),
                "privacy_scope": scope,
                "tenant_scope": tenant,
                "allowed_principals": rng.sample([*PEOPLE, "agent1"], rng.choice([0, 0, 1])),
                "allowed_roles": rng.sample(["auditor"], rng.choice([0, 0, 1])),
                "inference_policy": rng.choice(
                    ["local_only", "private_nodes", "public_with_redaction", "public_allowed"]
                ),
                "training_policy": rng.choice(["prohibited", "local_only", "tenant_only", "allowed"]),
                "export_policy": rng.choice(["prohibited", "approval_required", "allowed"]),
                "replication_policy": rng.choice(["none", "trusted_devices", "tenant_nodes"]),
                "level": rng.choice(["l0", "l1", "l2", "l3"]),
                "segment": rng.choice(["work", "home", ""]),
                "tags": rng.sample(["proj", "x"], rng.choice([0, 1])),
                "trust_class": rng.choice(["unverified", "lower_trust", "higher_trust"]),
                "created_at": NOW - rng.randrange(0, 20) * HOUR,
                "retention_policy": rng.choice([Retention(), Retention(), Retention(ttl_seconds=3600 * 5)]),
            }
        )
    node.put(drafts, NOW)
    gov = node.governance
    gov.add_principal(Principal("team-x", kind="team"))
    principals = [
        gov.add_principal(Principal("alice", tenants=frozenset({"acme"}))),
        gov.add_principal(Principal("bob", tenants=frozenset({"globex"}), roles=frozenset({"auditor"}))),
        gov.add_principal(Principal("carol", teams=frozenset({"team-x"}))),
        gov.add_principal(Principal("dave")),
        gov.add_principal(Principal("agent1", kind="agent", on_behalf_of="alice")),
        gov.add_principal(Principal("erin", tenants=frozenset({"acme", "globex"}))),
    ]
    grants = []
    for _ in range(4):
        owner = rng.choice(PEOPLE)
        grantee = rng.choice([g for g in ("bob", "carol", "dave", "team-x", "erin") if g != owner])
        grants.append(
            gov.grant(
                Grant(
                    owner,
                    grantee,
                    rng.choice(list(Level)),
                    NOW - 2 * HOUR,
                    segments=frozenset(rng.sample(["work", "home"], rng.choice([0, 1]))),
                    tags=frozenset(rng.sample(["proj"], rng.choice([0, 1]))),
                    expires_at=rng.choice([0, NOW + HOUR, NOW - HOUR]),
                )
            )
        )
    revoked = gov.revoke(grants[0].id, gov.principal(grants[0].owner), NOW - HOUR)
    grants[0] = revoked
    assets = {a.id: a for a in (node.store.get(i) for i in node.store.list_time(0, 2**62))}
    return node, principals, grants, assets


def matches(req: SearchRequest, a: Asset) -> bool:
    """The request's filters and temporal rules, stated plainly."""
    return (
        (not req.types or a.asset_type in req.types)
        and (not req.segments or a.segment in req.segments)
        and (not req.tags or bool(req.tags & set(a.tags)))
        and a.created_at <= (req.as_of or req.now)
    )


@settings(max_examples=2000, derandomize=True, deadline=None)
@given(
    seed=st.integers(0, WORLDS - 1),
    who=st.integers(0, 5),
    purpose=st.sampled_from(list(Permission)),
    location=st.sampled_from(list(Location)),
    text=st.sampled_from([*WORDS, "note", "tea release", ""]),
    mode=st.sampled_from(["hybrid", "dense", "lexical"]),
    types=st.frozensets(st.sampled_from([AssetType.FACT, AssetType.PLAN]), max_size=1),
    segments=st.frozensets(st.sampled_from(["work", "home"]), max_size=1),
    later=st.integers(0, 6),
)
def test_no_unauthorized_asset_enters_any_candidate_set(
    seed: int,
    who: int,
    purpose: Permission,
    location: Location,
    text: str,
    mode: str,
    types: frozenset[AssetType],
    segments: frozenset[str],
    later: int,
) -> None:
    """For generated worlds and requests: every id in every stage's candidate set (policy, trust, prefilter,
    temporal, dense, lexical, results) passes the independent oracle, and the policy stage admits exactly what the
    oracle admits (nothing authorized is lost either)."""
    node, principals, grants, assets = world(seed)
    p = principals[who]
    now = NOW + later * HOUR
    req = SearchRequest(text, p.id, purpose, now, location, k=8, mode=mode, types=types, segments=segments)
    resp = node.retriever.search(req, trace=True, log=False)
    assert resp.trace is not None
    mine = [g for g in grants if g.grantee in (p.id, p.user, *p.teams)]
    authorized = {i for i, a in assets.items() if oracle(p, a, purpose, location, now, mine)}
    t = resp.trace
    assert t.stages["policy"] == authorized
    for stage in ("trust", "prefilter", "temporal", "relevance", "governor"):
        assert t.stages[stage] <= authorized, stage
    assert t.dense <= authorized and t.lexical <= authorized
    assert t.stages["temporal"] == {i for i in authorized if matches(req, assets[i])}
    for r in resp.results:
        assert oracle(p, r.asset, purpose, location, now, mine) and matches(req, r.asset)


def test_grant_ceiling_and_revocation() -> None:
    """A grant releases nothing finer than its ceiling, and nothing at all once revoked."""
    node = node_for_tests()
    ids = node.put(
        [
            {
                "asset_type": "fact",
                "payload": {"text": f"alice secret plan {lvl}"},
                "owner_id": "alice",
                "level": lvl,
                "segment": "work",
                "inference_policy": "private_nodes",
            }
            for lvl in ("l0", "l1", "l2", "l3")
        ],
        NOW,
    )
    node.governance.add_principal(Principal("bob"))
    g = node.governance.grant(Grant("alice", "bob", Level.L2, NOW, segments=frozenset({"work"})))
    seen = {h.asset.id for h in node.search("secret plan", "bob", NOW + 1)}
    assert seen == set(ids[2:])
    node.governance.revoke(g.id, node.governance.principal("alice"), NOW + 2)
    assert node.search("secret plan", "bob", NOW + 3) == []
    assert {h.asset.id for h in node.search("secret plan", "bob", NOW + 1)} == set(ids[2:])  # before revocation


def test_supersession_and_as_of() -> None:
    """A superseded fact drops out of search; an as-of query before the new fact brings the old one back."""
    node = node_for_tests()
    (old,) = node.put([{"asset_type": "fact", "payload": {"text": "alice lives in porto"}, "owner_id": "alice"}], NOW)
    (new,) = node.put(
        [
            {
                "asset_type": "fact",
                "payload": {"text": "alice lives in lisbon"},
                "owner_id": "alice",
                "supersedes": [old],
                "created_at": NOW + HOUR,
            }
        ],
        NOW + HOUR,
    )
    now = NOW + 2 * HOUR
    assert [h.asset.id for h in node.search("where does alice live", "alice", now)] == [new]
    assert [h.asset.id for h in node.search("where does alice live", "alice", now, as_of=NOW + 1)] == [old]
    valid = node.put(
        [
            {
                "asset_type": "fact",
                "payload": {"text": "alice visits porto in may"},
                "owner_id": "alice",
                "valid_from": NOW,
                "valid_to": NOW + HOUR,
            }
        ],
        NOW,
    )
    assert valid[0] not in {h.asset.id for h in node.search("porto", "alice", now)}
    assert valid[0] in {h.asset.id for h in node.search("porto", "alice", now, as_of=NOW + 1)}


def test_cached_audience_decisions_follow_every_change_of_the_partition() -> None:
    """Audience decisions are made once per policy group and reused (node.access.retrieve caches them per
    partition, principal, purpose and location): a put into a new policy group, a put into an allowed one, a
    delete, and retention running out are each seen by the very next search, for the reader and the refused alike."""
    node = node_for_tests()
    gov = node.governance
    alice = gov.add_principal(Principal("alice", tenants=frozenset({"acme"})))
    dave = gov.add_principal(Principal("dave"))

    def fact(text: str, **kw: Any) -> dict[str, Any]:
        return {
            "asset_type": "fact",
            "payload": {"text": text},
            "owner_id": "bob",
            "privacy_scope": "tenant_private",
            "tenant_scope": "acme",
            **kw,
        }

    def found(p: Principal, purpose: Permission = Permission.READ, now: int = NOW) -> set[str]:
        req = SearchRequest("tea budget", p.id, purpose, now, k=50, mode="lexical")
        return {r.asset.id for r in node.retriever.search(req, log=False).results}

    (one,) = node.put([fact("tea budget one")], NOW)
    assert found(alice) == {one} and found(dave) == set()
    cached = len(node.retriever._decided)
    assert cached >= 1
    (two,) = node.put([fact("tea budget two")], NOW)  # the same policy group
    (three,) = node.put([fact("tea budget three", export_policy="allowed")], NOW)  # a new group
    assert found(alice) == {one, two, three} and found(dave) == set()
    assert found(alice, Permission.EXPORT) == {three}  # another purpose, decided on its own
    node.delete(two, NOW, by="bob")
    assert found(alice) == {one, three}
    (brief,) = node.put([fact("tea budget brief", retention_policy=Retention(ttl_seconds=3600))], NOW)
    assert found(alice) == {one, three, brief}
    assert found(alice, now=NOW + 2 * HOUR) == {one, three}  # past its retention, with the decision cached
    assert found(alice) == {one, three, brief}
    assert found(dave, now=NOW + 2 * HOUR) == set()


def test_results_explain_themselves() -> None:
    """Each result names its path (dense, lexical or both), ranks, scores, authorization and stages."""
    node = node_for_tests()
    node.put(
        [
            {
                "asset_type": "fact",
                "payload": {"text": "the payments incident was fixed with idempotency keys"},
                "owner_id": "alice",
            }
        ],
        NOW,
    )
    (hit,) = node.search("payments incident", "alice", NOW + 1)
    e = hit.explain()
    assert e["path"] == "both" and e["dense"]["rank"] == 1 and e["lexical"]["rank"] == 1 and e["via"] == "owner"
    assert e["stages"] == [
        "identity",
        "partitions",
        "policy",
        "trust",
        "prefilter",
        "temporal",
        "relevance",
        "governor",
    ]
    (lex,) = node.search("payments incident", "alice", NOW + 1, mode="lexical")
    assert lex.path == "lexical" and lex.dense is None


def test_a_hybrid_search_runs_its_dense_path_beside_the_lexical_one_and_raises_either_error() -> None:
    """A hybrid call runs the dense path on a helper thread while the lexical one scores on the caller's: the hits
    are those of the paths run one after the other (each hit's ranks are those of a dense-only and a lexical-only
    search), a failing path's error is raised (the dense one's if both fail, as when they ran in turn, the lexical one
    then never ran), and the helper thread ends when the node closes."""
    node = node_for_tests()
    texts = [f"{a} {b} {c}" for a, b, c in zip(WORDS, WORDS[3:] + WORDS[:3], WORDS[7:] + WORDS[:7], strict=True)]
    node.put([{"asset_type": "fact", "payload": {"text": t}, "owner_id": "alice"} for t in texts], NOW)
    threads: dict[str, set[str]] = {"dense": set(), "lexical": set()}
    helpers: set[threading.Thread] = set()
    caller = threading.current_thread()
    dense_search, lexical_search = node.store.dense_search, node.store.lexical.search

    def watched_dense(*args: Any, **kwargs: Any) -> Any:
        threads["dense"].add(threading.current_thread().name)
        if threading.current_thread() is not caller:
            helpers.add(threading.current_thread())  # a dense-only call runs on the caller's thread
        return dense_search(*args, **kwargs)

    def watched_lexical(*args: Any, **kwargs: Any) -> Any:
        threads["lexical"].add(threading.current_thread().name)
        return lexical_search(*args, **kwargs)

    node.store.dense_search = watched_dense  # type: ignore[method-assign]
    node.store.lexical.search = watched_lexical  # type: ignore[method-assign]
    hits = node.search("budget garden piano tea", "alice", NOW + 1, k=10)
    assert threads == {"dense": {"gaml-dense_0"}, "lexical": {caller.name}}
    dense_rank = {
        h.asset.id: r
        for r, h in enumerate(node.search("budget garden piano tea", "alice", NOW + 1, k=10, mode="dense"), 1)
    }
    lexical_rank = {
        h.asset.id: r
        for r, h in enumerate(node.search("budget garden piano tea", "alice", NOW + 1, k=10, mode="lexical"), 1)
    }
    assert len(hits) == 10 and lexical_rank
    for h in hits:
        e = h.explain()
        assert (e["dense"] or {}).get("rank") == dense_rank.get(h.asset.id)
        assert (e["lexical"] or {}).get("rank") == lexical_rank.get(h.asset.id)

    def broken(error: GamlError) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise error

        return fail

    node.store.lexical.search = broken(StoreCorrupt("the postings"))  # type: ignore[method-assign]
    with pytest.raises(StoreCorrupt, match="the postings"):
        node.search("budget garden", "alice", NOW + 1)
    node.store.dense_search = broken(IndexMismatch("the vectors"))  # type: ignore[method-assign]
    with pytest.raises(IndexMismatch, match="the vectors"):
        node.search("budget garden", "alice", NOW + 1)
    node.store.lexical.search = watched_lexical  # type: ignore[method-assign]
    with pytest.raises(IndexMismatch, match="the vectors"):
        node.search("budget garden", "alice", NOW + 1)
    (helper,) = helpers
    assert helper.is_alive()
    node.close()
    assert not helper.is_alive()


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"principal": "mallory"}, UnknownPrincipal),
        ({"purpose": "read"}, InvalidInput),  # a string, not a Permission: the purpose must be stated as one
        ({"mode": "psychic"}, InvalidInput),
        ({"k": 0}, InvalidInput),
        ({"created_from": 10, "created_to": 5}, InvalidInput),
        ({"min_provenance": 2.0}, InvalidInput),
    ],
)
def test_bad_requests_are_refused_and_read_nothing(kwargs: dict[str, Any], error: type[Exception]) -> None:
    """Unknown principals, missing purposes and malformed filters raise typed errors; nothing is read or logged."""
    node = node_for_tests()
    node.put([{"asset_type": "fact", "payload": {"text": "x"}, "owner_id": "alice"}], NOW)
    base: dict[str, Any] = {"text": "x", "principal": "alice", "purpose": Permission.READ, "now": NOW + 1}
    with pytest.raises(error):
        node.retriever.search(SearchRequest(**{**base, **kwargs}))
    assert node.governance.access_log("alice", node.governance.principal("alice")) == []


def test_reads_are_logged_for_the_owner_only() -> None:
    """A search leaves a receipt in the owner's log; only the owner may read that log."""
    node = node_for_tests()
    node.put([{"asset_type": "fact", "payload": {"text": "tea"}, "owner_id": "alice", "privacy_scope": "public"}], NOW)
    node.governance.add_principal(Principal("bob"))
    node.search("tea", "bob", NOW + 1, purpose=Permission.CONTEXT)
    (receipt,) = node.governance.access_log("alice", node.governance.principal("alice"))
    assert receipt["who"] == "bob" and receipt["purpose"] == "context" and receipt["read"][0]["via"] == "public"
    with pytest.raises(PolicyError):
        node.governance.access_log("alice", node.governance.principal("bob"))


class _Flaky(HashEmbedder):
    """An embedder that fails its first ``failures`` calls, then embeds as HashEmbedder; it counts the texts."""

    def __init__(self, dim: int, failures: int) -> None:
        super().__init__(dim)
        self.failures = failures
        self.texts: list[str] = []

    def embed(self, texts: Any) -> Any:
        self.texts += texts
        if self.failures:
            self.failures -= 1
            raise GamlError("the model is not loaded yet")
        return super().embed(texts)


def test_query_vectors_are_kept_least_recently_used_per_asker_and_never_a_failure() -> None:
    """A query text's vector is kept after its first embedding (equal to the embedder's, read-only), the least
    recently used is the one dropped when full, and a failed embedding is not kept: the next call tries again. Kept
    per asker: another principal's same text is embedded again (a faster answer must not tell bob what alice asked)."""
    emb = _Flaky(32, failures=1)
    vectors = QueryVectors(size=2)
    failed = Query("alpha", emb, vectors).dense()
    assert failed[0] is None and "not loaded" in failed[1] and emb.texts == ["alpha"]
    q, error, empty = Query("alpha", emb, vectors).dense()  # tried again, and kept this time
    assert q is not None and not error and not empty and emb.texts == ["alpha", "alpha"]
    assert np.array_equal(q, HashEmbedder(32).embed(["alpha"])[0]) and not q.flags.writeable
    Query("beta", emb, vectors).dense()
    assert Query("alpha", emb, vectors).dense()[0] is q  # alpha is now the most recent …
    Query("gamma", emb, vectors).dense()  # … so beta is the one dropped
    assert emb.texts == ["alpha", "alpha", "beta", "gamma"]
    Query("alpha", emb, vectors).dense()
    Query("beta", emb, vectors).dense()
    assert emb.texts == ["alpha", "alpha", "beta", "gamma", "beta"] and vectors.hits == 2
    other = HashEmbedder(16)  # another embedder's space: its own entry, whatever the text
    assert Query("alpha", other, vectors).dense()[0].shape == (16,)  # type: ignore[union-attr]
    asked = QueryVectors()
    Query("divorce lawyer", emb, asked, who="alice").dense()
    Query("divorce lawyer", emb, asked, who="alice").dense()
    Query("divorce lawyer", emb, asked, who="bob").dense()
    assert emb.texts[-2:] == ["divorce lawyer", "divorce lawyer"] and asked.hits == 1
