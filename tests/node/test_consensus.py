"""Consensus (node/core/consensus.py): slots, independence, the ledger, determinism. Pure: no clock, seeded inputs."""

from __future__ import annotations

import dataclasses
import hashlib
import random

from gaml.crdt import membership
from gaml.node.core.consensus import (
    DAY_US,
    SCALE,
    Claim,
    Consensus,
    Evidence,
    Weights,
    claim_of,
    corroborated,
    decide,
    edge_counts,
    evidence_of,
    fold,
    near_duplicate,
    override_payload,
    record_asset_id,
    record_of,
    slots_of,
    tokens,
)
from gaml.policy import crypto
from gaml.policy.model import Asset, AssetType

W = Weights()
ADMIN = crypto.SigningKey(bytes(range(32)))


def node(i: int) -> str:
    return crypto.SigningKey(bytes([i + 1]) * 32).public_key.hex()


def roster(admitted: dict[int, int], kind: str = "tenant") -> membership.Roster:
    """Nodes ``i`` admitted at ``admitted[i]`` (microseconds), the first one creating the boundary."""
    ent = crypto.SeededEntropy(7)
    order = sorted(admitted.items(), key=lambda x: (x[1], x[0]))
    first, t0 = order[0]
    _, r, key = membership.create(kind, "b", "acme", ADMIN, node(first), t0, ent)
    for i, t in order[1:]:
        r = membership.add(r, node(i), "member", ADMIN, {1: key}, t, ent)
    return r


def fact(id_: str, text: str, at: int, **payload: object) -> Asset:
    return Asset(
        id=hashlib.blake2b(id_.encode(), digest_size=16).hexdigest(),
        asset_type=AssetType.FACT,
        payload={"text": text, **payload},
        owner_id="o",
        created_at=at,
    )


def claim(id_: str, writer: int, text: str, at: int, **payload: object) -> Claim:
    return claim_of(fact(id_, text, at, **payload), [node(writer)])


def history(honest: list[int], facts: int, start: int, rng: random.Random) -> list[Claim]:
    """Explicit facts, each asserted by three honest members in their own words."""
    out = []
    for k in range(facts):
        t = start + k * DAY_US
        for j, n in enumerate(rng.sample(honest, 3)):
            out.append(
                claim(
                    f"h{k}x{j}",
                    n,
                    f"node {n} saw item {k} state v{k % 7} ref {rng.randrange(10**6)}",
                    t + j,
                    subject=f"item-{k}",
                    attribute="state",
                    value=f"v{k % 7}",
                )
            )
    return out


def test_near_duplicates_are_texts_that_differ_in_a_short_span_only() -> None:
    a = tokens("Chicago Fire released its fourth season comprising a total of 24 episodes this season.")
    b = tokens("Chicago Fire released its fourth season comprising a total of 23 episodes this season.")
    assert near_duplicate(a, b, W) == [("24", "23")]
    assert near_duplicate(a, a, W) is None  # the same text is an echo, not a conflict
    other = tokens("The Houston Astros moved from the National League to the American League in 2013.")
    assert near_duplicate(a, other, W) is None


def test_ten_colluders_echoing_one_false_claim_weigh_no_more_than_one_of_them() -> None:
    admitted = {i: i * 10 * DAY_US for i in range(12)}
    r = roster(admitted)
    ledger = fold(r, [], W, 400 * DAY_US)
    for i in range(1, 12):  # everyone equal (none the founder, none decaying), so only the counting of sources matters
        ledger.reps[node(i)].rep, ledger.reps[node(i)].at = 600_000, ledger.now
    text = "the reactor in building 7 was shut down on 3 May after a coolant leak was found"
    echoes = [claim(f"e{i}", i, text, DAY_US * 300 + i) for i in range(1, 11)]
    honest = claim("h", 11, text.replace("3 May", "9 May"), DAY_US * 300 + 10)
    v = decide("s", [*echoes, honest], ledger)
    assert v.scores[echoes[0].value] <= v.scores[honest.value]
    one = decide("s", [echoes[-1], honest], ledger)  # the newest of them alone (recency is a claim's own)
    assert v.scores[echoes[0].value] == one.scores[echoes[0].value]  # ten echoes score what one does


def test_a_fresh_identity_starts_low_and_cannot_farm_its_way_up_quickly() -> None:
    rng = random.Random(3)
    honest = list(range(8))
    admitted = {i: i * DAY_US for i in honest} | {9: 300 * DAY_US}
    claims = history(honest, 60, 20 * DAY_US, rng)
    # The newcomer corroborates ten honest facts within its first ten days.
    for k in range(10):
        src = claims[3 * k]
        claims.append(
            claim(
                f"f{k}",
                9,
                f"newcomer saw item {k} state {src.value} ref {k}",
                301 * DAY_US + k,
                subject=f"item-{k}",
                attribute="state",
                value=src.value.strip('"'),
            )
        )
    ledger = fold(roster(admitted), claims, W, 310 * DAY_US)
    assert ledger.weight(node(9)) < W.admit
    assert all(ledger.weight(node(i)) >= W.admit for i in honest)


def test_a_defector_loses_its_admission_weight_within_three_contradicted_claims() -> None:
    rng = random.Random(5)
    honest = list(range(8))
    admitted = {i: i * DAY_US for i in honest} | {9: 10 * DAY_US}
    claims = history(honest, 120, 20 * DAY_US, rng)
    for k in range(0, 120, 4):  # the defector earns its weight honestly for months
        src = claims[3 * k]
        claims.append(
            claim(
                f"f{k}",
                9,
                f"defector saw item {k} state {src.value} ref {k}",
                src.created_at + 5,
                subject=f"item-{k}",
                attribute="state",
                value=src.value.strip('"'),
            )
        )
    before = fold(roster(admitted), claims, W, 200 * DAY_US)
    assert before.weight(node(9)) >= W.admit
    for k in range(5):  # then contradicts five honest facts
        claims.append(
            claim(
                f"d{k}",
                9,
                f"defector saw item {k} state WRONG ref {k}",
                201 * DAY_US + k,
                subject=f"item-{k}",
                attribute="state",
                value="wrong",
            )
        )
    after = fold(roster(admitted), claims, W, 210 * DAY_US)
    assert after.weight(node(9)) < W.admit
    assert 1 <= after.fell[node(9)] <= 3


def test_records_are_byte_identical_whatever_order_the_state_arrived_in() -> None:
    """1,000 seeded worlds: the ledger and each slot's record depend on the merged state only, not on the order in
    which a member received it."""
    for seed in range(1000):
        rng = random.Random(seed)
        n = rng.randint(3, 7)
        admitted = {i: rng.randrange(0, 50) * DAY_US for i in range(n)}
        claims = []
        for k in range(rng.randint(2, 12)):
            subject = f"s{rng.randrange(4)}"
            w_ = rng.randrange(n)
            claims.append(
                claim(
                    f"c{k}",
                    w_,
                    f"{w_} says {subject} is {rng.randrange(3)} #{k}",
                    rng.randrange(60, 90) * DAY_US,
                    subject=subject,
                    attribute="a",
                    value=rng.randrange(3),
                )
            )
        r = roster(admitted)
        shuffled = claims[:]
        rng.shuffle(shuffled)
        a, b = fold(r, claims, W, 100 * DAY_US), fold(r, shuffled, W, 100 * DAY_US)
        assert a.version() == b.version(), seed
        for key in sorted(a.slots):
            ga = sorted(a.slots[key], key=lambda c: c.id)
            gb = list(b.slots[key])
            rng.shuffle(gb)
            ra = record_of(b"\x01" * 16, key, decide(key, ga, a), ga, a)
            rb = record_of(b"\x01" * 16, key, decide(key, gb, b), gb, b)
            assert ra == rb, seed


def test_a_devices_boundary_weighs_every_device_fully() -> None:
    r = roster({0: 0, 1: 5 * DAY_US}, kind="devices")
    ledger = fold(r, [], W, 6 * DAY_US)
    assert ledger.weight(node(1)) == SCALE and ledger.weight(node(0)) == SCALE
    assert ledger.weight(node(5)) == 0  # not a member


def test_weights_are_checked() -> None:
    import pytest

    with pytest.raises(ValueError, match=r"consensus\.admit"):
        Weights(admit=2 * SCALE)
    with pytest.raises(ValueError, match="trust"):
        Weights(trust={"higher_trust": 1})


def test_the_founder_weighs_fully_and_a_new_member_must_earn_its_weight() -> None:
    r = roster({0: 0, 1: 2 * DAY_US, 2: 3 * DAY_US})
    ledger = fold(r, [], W, 4 * DAY_US)
    assert ledger.founder == node(0) and ledger.weight(node(0)) == SCALE
    assert ledger.weight(node(1)) == ledger.weight(node(2)) == W.start < W.admit
    # The founder contradicting a newcomer in a slot: the newcomer is struck, the founder is not.
    a = claim("a", 0, "the staging database listens on port 5432 since the migration", 3 * DAY_US + 1)
    b = claim("b", 2, "the staging database listens on port 6543 since the migration", 3 * DAY_US + 2)
    after = fold(r, [a, b], W, 4 * DAY_US)
    assert after.weight(node(0)) == SCALE and after.weight(node(2)) == W.start // 2
    v = decide("s", [a, b], after)
    assert v.winner == a.value


class _World:
    """Just enough of a store and a replica for Consensus: one boundary, assets by id, each written by one member."""

    def __init__(self, r: membership.Roster) -> None:
        self.r, self.assets, self.by, self.version = r, {}, {}, 0
        self.seq = 0

    def put(self, a: Asset, writer: int) -> None:
        self.assets[a.id], self.by[a.id] = a, node(writer)
        self.version += 1

    def get(self, id_: str) -> Asset:
        return self.assets[id_]

    def boundary_of(self, a: Asset) -> bytes | None:
        return b"\x02" * 16

    def writers(self, bid: bytes, id_: str) -> tuple[str, ...]:
        return (self.by[id_],)

    def roster_of(self, bid: bytes) -> membership.Roster:
        return self.r

    def asset_ids(self, bid: bytes) -> list[str]:
        return sorted(self.assets)

    def boundary_version(self, bid: bytes) -> tuple[int, int]:
        return (len(self.assets), self.version)


def test_an_edited_claim_is_weighed_again_not_answered_from_an_old_decision() -> None:
    import dataclasses

    from gaml.node.core.consensus import Consensus

    world = _World(roster({0: 0, 1: DAY_US}, kind="devices"))
    a = fact("a", "x", DAY_US, subject="door", attribute="code", value=1)
    b = fact("b", "y", 2 * DAY_US, subject="door", attribute="code", value=2)
    world.put(a, 0)
    world.put(b, 1)
    c = Consensus(world, world, node(0))
    first = c.resolve([a, b], 3 * DAY_US, lambda _: True)
    (rec,) = first.records.values()
    assert rec["winner"] == "2" and first.dropped == {a.id: "contradicted"}  # the newer claim, both full weight
    b2 = dataclasses.replace(b, payload={**b.payload, "value": 3}, signature=b"\x01" * 64)
    world.put(b2, 1)
    again = c.resolve([a, b2], 3 * DAY_US, lambda _: True)
    (rec2,) = again.records.values()
    assert rec2["winner"] == "3" and again.dropped == {a.id: "contradicted"}
    future = fact("f", "z", 30 * DAY_US, subject="door", attribute="code", value=9)
    world.put(future, 1)
    later = c.resolve([a, b2, future], 3 * DAY_US, lambda _: True)
    assert later.dropped[future.id] == "future" and "9" not in {r["winner"] for r in later.records.values()}


class _Store(_World):
    """A :class:`_World` that answers as the store does: a missing asset is ``NotFound``, and what is put is there."""

    def __init__(self, r: membership.Roster) -> None:
        super().__init__(r)
        self.bid = b"\x02" * 16

    def get(self, id_: str) -> Asset:
        from gaml.policy.errors import NotFound

        if id_ not in self.assets:
            raise NotFound(id_)
        return self.assets[id_]

    def boundary_ids(self) -> list[bytes]:
        return [self.bid]


def _contested(world: _Store) -> tuple[Asset, Asset]:
    """The founder (node 0) and a fresh member (node 2) disagree on the staging database's port."""
    a = fact("a", "the staging database listens on port 5432 since the migration", 3 * DAY_US + 1)
    b = fact("b", "the staging database listens on port 6543 since the migration", 3 * DAY_US + 2)
    world.put(a, 0)
    world.put(b, 2)
    return a, b


def _verdict(id_: str, at: int, **payload: object) -> Asset:
    return Asset(
        id=hashlib.blake2b(id_.encode(), digest_size=16).hexdigest(),
        asset_type=AssetType.VERIFICATION_RESULT,
        payload=payload,
        owner_id="o",
        created_at=at,
    )


def test_a_refutation_by_an_admitted_independent_judge_zeroes_the_claim_and_strikes_its_source() -> None:
    """Execution-integrity evidence: the founder (admitted) refutes a claim of member 1, which then scores nothing
    and loses weight; the same verdict written by an unadmitted member, or about its own claim, counts for nothing."""
    r = roster({0: 0, 1: DAY_US, 2: 2 * DAY_US})
    claim_1 = claim("c1", 1, "the build cache lives on volume nine since last week", 3 * DAY_US)
    rival = claim("c2", 2, "the build cache lives on volume four since last week", 3 * DAY_US + 1)
    base = fold(r, [claim_1, rival], W, 5 * DAY_US)
    assert claim_1.id not in base.refuted
    refute = [
        Evidence("e1", (node(0),), 4 * DAY_US, claim_1.id, "", "refuted"),
    ]
    judged = fold(r, [claim_1, rival], W, 5 * DAY_US, refute)
    assert judged.refuted == {claim_1.id: "e1"} and judged.weight(node(1)) < base.weight(node(1))
    v = decide("s", [claim_1, rival], judged)
    assert v.claim_scores[claim_1.id] == 0 and v.winner == rival.value
    cands = {x["id"]: x for x in record_of(b"\x01" * 16, "s", v, [claim_1, rival], judged)["candidates"]}
    assert cands[claim_1.id]["refuted"] == "e1" and "refuted" not in cands[rival.id]
    unadmitted = Evidence("e2", (node(2),), 4 * DAY_US, claim_1.id, "", "refuted")  # member 2 is not admitted
    own = Evidence("e3", (node(1),), 4 * DAY_US, claim_1.id, "", "refuted")
    ignored = fold(r, [claim_1, rival], W, 5 * DAY_US, [unadmitted, own])
    assert ignored.refuted == {} and sorted(ignored.ignored) == ["e2", "e3"]
    assert ignored.weight(node(1)) == base.weight(node(1))


def test_a_verification_corroborates_and_a_fraud_verdict_strikes_the_member() -> None:
    r = roster({0: 0, 1: 40 * DAY_US, 2: 41 * DAY_US})
    c1 = claim("c1", 1, "the nightly backup of the ledger database finishes at 02:40 utc", 50 * DAY_US)
    other = claim("c2", 2, "the nightly backup of the ledger database finishes at 03:40 utc", 50 * DAY_US + 1)
    ok = Evidence("v", (node(0),), 51 * DAY_US, c1.id, "", "verified")
    before = fold(r, [c1, other], W, 60 * DAY_US)
    after = fold(r, [c1, other], W, 60 * DAY_US, [ok])
    assert after.verified == {c1.id: "v"} and after.weight(node(1)) > before.weight(node(1))
    assert corroborated(c1, [c1, other], after, {c1.id: c1.id, other.id: other.id})
    fraud = Evidence("f", (node(0),), 52 * DAY_US, "", node(2), "fraud")
    struck = fold(r, [c1, other], W, 60 * DAY_US, [fraud])
    assert struck.weight(node(2)) < before.weight(node(2))
    # The evidence assets themselves: only a verdict this rule reads is evidence.
    asset = _verdict("x", 51 * DAY_US, about=c1.id, verdict="Pass")
    assert evidence_of(asset, [node(0)]) == Evidence(asset.id, (node(0),), 51 * DAY_US, c1.id, "", "verified")
    assert evidence_of(_verdict("y", 1, about=c1.id, verdict="maybe"), [node(0)]) is None
    assert evidence_of(fact("z", "a fact is no verdict", 1, about=c1.id, verdict="pass"), [node(0)]) is None


def test_stored_records_name_the_winner_and_the_loser_and_are_rewritten_only_on_a_new_decision() -> None:
    """record_assets: one consensus_record per contested slot, this node's, derived from the candidates (their
    policy), stable in id, and not written again while the decision stands."""
    world = _Store(roster({0: 0, 1: 2 * DAY_US, 2: 3 * DAY_US}))
    a, b = _contested(world)
    c = Consensus(world, world, node(0))
    (rec,) = c.record_assets(4 * DAY_US)
    body = rec.payload["consensus"]
    assert rec.asset_type is AssetType.CONSENSUS_RECORD and rec.id == record_asset_id(world.bid, body["slot"])
    assert list(body["won"]) == [a.id] and list(body["lost"]) == [b.id]
    assert rec.derived_from == tuple(sorted([a.id, b.id])) and not rec.contradicts  # no edge silences the loser
    assert rec.owner_id == "o" and body["winner"] == claim_of(a, []).value
    world.put(rec, 0)
    assert c.record_assets(4 * DAY_US) == []  # the same decision: nothing to write
    assert c.record_assets(9 * DAY_US) == []  # another day, another ledger version, the same decision
    # Another member that decides otherwise (its config lets only the newest claim score) leaves the record alone
    # (only the founder rewrites a decision: no two members writing it back and forth); the founder rewrites it for a
    # new candidate, under the same id (the found slot's key stays as claims join it).
    other = Consensus(world, world, node(1), Weights(recency=SCALE))
    (theirs,) = other.conflicts(9 * DAY_US, lambda _: True)
    assert theirs["winner"] == claim_of(b, []).value
    assert other.record_assets(9 * DAY_US) == []
    third = fact("c", "the staging database listens on port 7777 since the migration", 5 * DAY_US)
    world.put(third, 1)
    (again,) = c.record_assets(9 * DAY_US)
    assert again.id == rec.id and len(again.payload["consensus"]["candidates"]) == 3
    # Records are no claims: the record does not join the slot, and a frame never shows it.
    res = c.resolve([a, b, rec, again], 9 * DAY_US, lambda _: True)
    assert res.dropped == {b.id: "contradicted", third.id: "contradicted", rec.id: "record"}
    (shown,) = res.records.values()
    assert {x["id"] for x in shown["candidates"]} == {a.id, b.id, third.id}


def test_an_override_decides_where_it_was_written_and_where_the_founder_wrote_it_only() -> None:
    world = _Store(roster({0: 0, 1: 2 * DAY_US, 2: 3 * DAY_US}))
    a, b = _contested(world)
    on_0 = Consensus(world, world, node(0))
    (rec,) = on_0.conflicts(4 * DAY_US, lambda _: True)
    assert rec["winner"] == claim_of(a, []).value
    slot, loser = rec["slot"], claim_of(b, []).value
    mine = Asset(
        id=hashlib.blake2b(b"o2", digest_size=16).hexdigest(),
        asset_type=AssetType.CONSENSUS_RECORD,
        payload=override_payload(world.bid, slot, loser, "carol", 4 * DAY_US, "checked the config"),
        owner_id="o",
        created_at=4 * DAY_US,
    )
    world.put(mine, 2)  # written by member 2 (not the founder)
    on_2, on_1 = Consensus(world, world, node(2)), Consensus(world, world, node(1))
    (here,) = on_2.conflicts(5 * DAY_US, lambda _: True)
    assert here["winner"] == loser and here["override"] == {
        "id": mine.id,
        "by": "carol",
        "reason": "checked the config",
    }
    assert on_2.resolve([a, b], 5 * DAY_US, lambda _: True).dropped == {a.id: "contradicted"}
    (there,) = on_1.conflicts(5 * DAY_US, lambda _: True)  # another member's override decides nothing on node 1
    assert there["winner"] == claim_of(a, []).value and "override" not in there
    world.put(dataclasses.replace(mine, id=hashlib.blake2b(b"o0", digest_size=16).hexdigest()), 0)
    (now_1,) = Consensus(world, world, node(1)).conflicts(5 * DAY_US, lambda _: True)
    assert now_1["winner"] == loser  # the founder's override decides on every member
    founders = hashlib.blake2b(b"o0", digest_size=16).hexdigest()
    assert on_1.reputation(5 * DAY_US, lambda _: True, lambda _: True)[0]["overrides"] == [founders]
    # A caller who may not read the override (it names who chose and why) is not shown it, and is decided for by
    # the ledger alone.
    (hidden,) = on_1.conflicts(5 * DAY_US, lambda id_: id_ != founders)
    assert hidden["winner"] == claim_of(a, []).value and "override" not in hidden
    assert on_1.reputation(5 * DAY_US, lambda _: True, lambda id_: id_ != founders)[0]["overrides"] == []


def test_conflicts_weigh_only_what_the_caller_may_read() -> None:
    world = _Store(roster({0: 0, 1: 2 * DAY_US, 2: 3 * DAY_US}))
    a, _ = _contested(world)
    c = Consensus(world, world, node(0))
    assert len(c.conflicts(4 * DAY_US, lambda _: True)) == 1
    assert c.conflicts(4 * DAY_US, lambda id_: id_ == a.id) == []  # one candidate readable: nothing contested
    assert c.conflicts(4 * DAY_US, lambda _: True, slot="n:unknown") == []


def test_weights_come_from_the_config_by_name() -> None:
    import pytest

    w = Weights.from_json({"admit": 300_000, "trust": {"unverified": 700_000}})
    assert w.admit == 300_000 and w.trust["unverified"] == 700_000 and w.trust["higher_trust"] == SCALE
    with pytest.raises(ValueError, match="unknown consensus settings: admission"):
        Weights.from_json({"admission": 1})
    with pytest.raises(ValueError, match=r"consensus\.loss"):
        Weights.from_json({"loss": 1.5})
    with pytest.raises(ValueError, match="trust"):
        Weights.from_json({"trust": {"higher_trust": True}})


def test_a_member_naming_anothers_claim_as_superseded_makes_a_slot_not_a_supersession() -> None:
    """An edge (supersedes / contradicts) counts by itself only from the target's own sources (or in a devices
    boundary); from another member, the two claims are one slot, and the founder's claim beats a fresh member's."""
    r = roster({0: 0, 1: 2 * DAY_US})
    honest = fact("h", "the office wifi password rotates every monday morning", 3 * DAY_US)
    newer = dataclasses.replace(
        fact("p", "the office wifi password never rotates at all, use the old one", 4 * DAY_US),
        supersedes=(honest.id,),
    )
    ch, cp = claim_of(honest, [node(0)]), claim_of(newer, [node(1)])
    assert cp.edges == (honest.id,)
    assert not edge_counts(cp, ch, "tenant") and edge_counts(cp, ch, "devices")
    assert edge_counts(claim_of(newer, [node(0)]), ch, "tenant")  # the founder updating its own claim
    ledger = fold(r, [ch, cp], W, 5 * DAY_US)
    ((key, members),) = ledger.slots.items()
    assert key.startswith("e:") and {c.id for c in members} == {honest.id, newer.id}
    assert decide(key, members, ledger).winner == ch.value
    own = fold(r, [ch, claim_of(newer, [node(0)])], W, 5 * DAY_US)
    assert own.slots == {}  # a source superseding its own claim: temporal resolution's to apply, no conflict


def test_a_source_that_changed_its_claim_is_not_struck_for_the_old_value() -> None:
    """The same member asserting a new value of its own explicit slot updated it: the newer value wins by recency,
    and no strike halves the member (the founder keeps its full weight); another member's losing value is struck."""
    r = roster({0: 0, 1: DAY_US})
    old = claim("o", 0, "the staging db listens on port 5432", 2 * DAY_US, subject="db", attribute="port", value=5432)
    new = claim("n", 0, "the staging db listens on port 6543", 3 * DAY_US, subject="db", attribute="port", value=6543)
    ledger = fold(r, [old, new], W, 4 * DAY_US)
    assert ledger.weight(node(0)) == SCALE and decide("s", [old, new], ledger).winner == new.value
    rival = claim(
        "r", 1, "the staging db listens on port 1111", 3 * DAY_US + 1, subject="db", attribute="port", value=1
    )
    after = fold(r, [old, new, rival], W, 4 * DAY_US)
    assert after.weight(node(0)) == SCALE and after.weight(node(1)) == W.start // 2


def test_a_judge_strikes_once_and_never_a_source_heavier_than_itself() -> None:
    """Fraud verdicts: one judging group strikes a member once, however many verdicts it writes; a judge may not
    find fraud in, nor refute a claim of, a source that weighs more than it does (a farmed identity cannot silence
    the founder). Hedging (the winning value first, the losing one after) is struck; an update is not."""
    r = roster({0: 0, 1: 40 * DAY_US, 2: 41 * DAY_US + 2 * 3_600 * 1_000_000})
    base = fold(r, [], W, 60 * DAY_US)
    many = [Evidence(f"f{i}", (node(0),), 50 * DAY_US + i, "", node(2), "fraud") for i in range(4)]
    once = fold(r, [], W, 60 * DAY_US, many)
    assert once.weight(node(2)) == base.weight(node(2)) // 2 and sorted(once.ignored) == []
    # Member 1 admitted by hand (as a farmer would be) still weighs less than the founder.
    ledger = fold(r, [], W, 60 * DAY_US)
    ledger.reps[node(1)].rep, ledger.reps[node(1)].at = W.admit, ledger.now
    founder_claim = claim("fc", 0, "the release branch is cut every second tuesday", 55 * DAY_US)
    against = [
        Evidence("x", (node(1),), 56 * DAY_US, "", node(0), "fraud"),
        Evidence("y", (node(1),), 56 * DAY_US, founder_claim.id, "", "refuted"),
    ]
    from gaml.node.core.consensus import _judge

    for e in against:
        _judge(ledger, e, founder_claim if e.about else None, 56 * DAY_US)
    assert ledger.weight(node(0)) == SCALE and ledger.refuted == {} and ledger.ignored == ["x", "y"]
    hedge = [
        claim("w", 2, "the cache node runs on port 11211", 50 * DAY_US, subject="cache", attribute="port", value=1),
        claim("l", 2, "the cache node runs on port 11311", 51 * DAY_US, subject="cache", attribute="port", value=2),
        claim("f", 0, "the cache node runs on port 11211", 52 * DAY_US, subject="cache", attribute="port", value=1),
    ]
    hedged = fold(r, hedge, W, 60 * DAY_US)
    assert hedged.weight(node(2)) < fold(r, [hedge[0], hedge[2]], W, 60 * DAY_US).weight(node(2))


class _TwoBoundaries(_Store):
    """Assets in boundary A (a devices boundary) or B, by a ``where`` of their id."""

    def __init__(self) -> None:
        super().__init__(roster({0: 0, 1: DAY_US}, kind="devices"))
        self.where: dict[str, bytes | None] = {}

    def boundary_of(self, a: Asset) -> bytes | None:
        return self.where.get(a.id)


def test_an_edge_from_another_boundary_or_a_peer_never_resolves_a_claim_by_itself() -> None:
    world = _TwoBoundaries()
    mine = fact("t", "my private note about the garage code", DAY_US)
    peer = dataclasses.replace(fact("b", "the garage code changed", 2 * DAY_US), supersedes=(mine.id,))
    world.put(mine, 0)
    world.put(peer, 1)
    c = Consensus(world, world, node(0))
    world.where = {mine.id: None, peer.id: b"\x03" * 16}  # a peer's asset naming this node's private one
    assert not c.edge_counts(peer, mine)
    world.where = {mine.id: world.bid, peer.id: b"\x03" * 16}  # an asset of another boundary
    assert not c.edge_counts(peer, mine)
    world.where = {mine.id: world.bid, peer.id: world.bid}  # the same devices boundary: the owner's own devices
    assert c.edge_counts(peer, mine)
    own = Consensus(world, world, node(1))  # on the node that wrote it: its user's own decision
    world.where = {mine.id: None, peer.id: world.bid}
    assert own.edge_counts(peer, mine)


def test_a_record_erased_with_a_candidate_is_not_written_again() -> None:
    from gaml.policy.errors import Deleted

    world = _Store(roster({0: 0, 1: 2 * DAY_US, 2: 3 * DAY_US}))
    _contested(world)
    c = Consensus(world, world, node(0))
    (rec,) = c.record_assets(4 * DAY_US)
    erased = rec.id

    class _Erased(_Store):
        def get(self, id_: str) -> Asset:
            if id_ == erased:
                raise Deleted(id_)
            return super().get(id_)

    gone = _Erased(world.r)
    gone.assets, gone.by = world.assets, world.by
    assert Consensus(gone, gone, node(0)).record_assets(4 * DAY_US) == []


def test_editing_an_honest_claim_does_not_take_ones_rival_text_out_of_its_slot() -> None:
    """A member that edits an honest claim becomes one of its sources; its own near-duplicate rival still meets the
    honest claim in a slot (sources in common do not keep them apart), while one source's two texts do not."""
    text = "the nightly backup of the ledger database finishes at 02:40 utc every day"
    honest = claim_of(fact("h", text, DAY_US), [node(0), node(5)])  # edited by node 5
    rival = claim_of(fact("p", text.replace("02:40", "03:40"), 2 * DAY_US), [node(5)])
    ((_, members),) = slots_of([honest, rival], W).items()
    assert {c.id for c in members} == {honest.id, rival.id}
    own = claim_of(fact("q", text.replace("02:40", "04:40"), 2 * DAY_US), [node(0), node(5)])
    assert slots_of([honest, own], W) == {}


def test_clear_says_nothing_needs_weighing_only_when_resolve_would_leave_every_candidate() -> None:
    """The frame's fast path: on 300 seeded worlds (members admitted at random times, explicit and found slots,
    some contested), whenever ``clear`` answers for a set of candidates, ``resolve`` drops none of them and makes no
    record; and on worlds with a contested slot among the candidates it does not answer."""
    answered = refused = 0
    for seed in range(300):
        rng = random.Random(seed)
        world = _Store(roster({i: rng.randrange(0, 40) * DAY_US for i in range(4)}))
        assets = []
        for k in range(rng.randint(2, 8)):
            writer = rng.randrange(4)
            port = rng.choice([5432, 6543])
            if rng.random() < 0.5:
                a = fact(
                    f"{seed}x{k}",
                    f"member {writer} says db port {port}",
                    50 * DAY_US + k,
                    subject="db",
                    attribute="port",
                    value=port,
                )
            else:
                a = fact(f"{seed}y{k}", f"the staging database listens on port {port} today", 50 * DAY_US + k)
            world.put(a, writer)
            assets.append(a)
        c = Consensus(world, world, node(rng.randrange(4)))
        subset = rng.sample(assets, rng.randint(1, len(assets)))
        cleared = c.clear(subset, 60 * DAY_US)
        res = c.resolve(subset, 60 * DAY_US, lambda _: True)
        if cleared is not None:
            answered += 1
            assert res.dropped == {} and res.records == {}, seed
        else:
            refused += 1
    assert answered > 20 and refused > 20  # both paths were exercised
