"""Consensus (node/core/consensus.py): slots, independence, the ledger, determinism. Pure: no clock, seeded inputs."""

from __future__ import annotations

import hashlib
import random

from gaml.crdt import membership
from gaml.node.core.consensus import (
    DAY_US,
    SCALE,
    Claim,
    Weights,
    claim_of,
    decide,
    fold,
    near_duplicate,
    record_of,
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
