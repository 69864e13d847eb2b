"""crdt.membership: signed rosters, group keys boxed to members, forward-only revocation, typed refusals."""

from __future__ import annotations

import dataclasses
import functools
import json
import random
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gaml.crdt import membership
from gaml.crdt.errors import BadRoster, RosterRefused
from gaml.crdt.membership import Boundary, Member, Roster
from gaml.policy import crypto
from gaml.policy.errors import DecryptionFailed, GamlError, InvalidInput

NOW = 1_700_000_000


def identity(n: int) -> crypto.SigningKey:
    return crypto.SigningKey(bytes([n]) * 32)


ADMIN = identity(1)
N1, N2, N3, RELAY, OUTSIDER = identity(11), identity(12), identity(13), identity(14), identity(15)


def node(key: crypto.SigningKey) -> str:
    return key.public_key.hex()


def setup(seed: int = 0) -> tuple[Roster, dict[int, bytes], crypto.SeededEntropy]:
    """A devices boundary with N1, N2 and N3 as members and RELAY as a relay; its keys; the entropy used."""
    ent = crypto.SeededEntropy(seed)
    _, roster, key = membership.create("devices", "alice's devices", "alice", ADMIN, node(N1), NOW, ent)
    keys = {1: key}
    for k in (N2, N3):
        roster = membership.add(roster, node(k), "member", ADMIN, keys, NOW + 1, ent)
    roster = membership.add(roster, node(RELAY), "relay", ADMIN, keys, NOW + 2, ent)
    return roster, keys, ent


# -- create and add ------------------------------------------------------------------------------------------------


def test_create() -> None:
    """create makes a boundary (random id, the admin's key) and a roster v1 of epoch 1 that the first node can open."""
    boundary, roster, key = membership.create(
        "subnet", "acme lab", "acme", ADMIN, node(N1), NOW, crypto.SeededEntropy(0)
    )
    assert len(boundary.id) == 16 and boundary.admin == ADMIN.public_key
    assert (boundary.kind, boundary.name, boundary.label) == ("subnet", "acme lab", "acme")
    assert roster.boundary == boundary and (roster.epoch, roster.version, roster.issued_at) == (1, 1, NOW)
    assert roster.members == (Member(node(N1), "member", NOW),)
    assert len(key) == 32 and roster.keys_for(N1) == {1: key}
    assert roster.role(node(N1)) == "member" and roster.is_member(node(N1))
    assert roster.role(node(N2)) is None and not roster.is_member(node(N2))


def test_create_is_deterministic_for_an_entropy() -> None:
    """The same seed gives the same boundary, roster bytes and key; another seed, other ones."""
    runs = [
        membership.create("devices", "d", "alice", ADMIN, node(N1), NOW, crypto.SeededEntropy(s)) for s in (5, 5, 6)
    ]
    assert runs[0][0] == runs[1][0] and runs[0][1].encode() == runs[1][1].encode() and runs[0][2] == runs[1][2]
    assert runs[0][0].id != runs[2][0].id and runs[0][2] != runs[2][2]


def test_route_is_opaque_and_stable() -> None:
    """A boundary's route is a 16-byte keyed hash of its id: stable, different per boundary, not the id."""
    roster, _, _ = setup()
    b = roster.boundary
    assert b.route == crypto.keyed_hash(b.id, b"gaml/route") and len(b.route) == 16 and b.route != b.id
    other, _, _ = membership.create("devices", "d", "alice", ADMIN, node(N1), NOW, crypto.SeededEntropy(1))
    assert other.route != b.route


def test_add_members_and_relays() -> None:
    """add raises the version and keeps the epoch; members are sorted; relays are listed but get no key."""
    roster, keys, _ = setup()
    assert (roster.epoch, roster.version, roster.issued_at) == (1, 4, NOW + 2)
    assert [m.node for m in roster.members] == sorted(node(k) for k in (N1, N2, N3, RELAY))
    assert {n for n in roster.sealed} == {node(N1), node(N2), node(N3)}
    assert roster.role(node(RELAY)) == "relay" and not roster.is_member(node(RELAY))
    for k in (N1, N2, N3):
        assert roster.keys_for(k) == keys


def test_keys_for_fails_for_relays_and_outsiders() -> None:
    """A relay and a node outside the roster hold no box: DecryptionFailed."""
    roster, _, _ = setup()
    for k in (RELAY, OUTSIDER, ADMIN):
        with pytest.raises(DecryptionFailed):
            roster.keys_for(k)


def test_a_box_opens_only_for_its_own_node_and_epoch() -> None:
    """A member's box moved under another member's node id, or read under another epoch, does not open."""
    roster, _, _ = setup()
    swapped = {**roster.sealed, node(N2): roster.sealed[node(N1)]}
    moved = Roster(roster.boundary, roster.epoch, roster.version, roster.members, swapped, NOW, b"")
    with pytest.raises(DecryptionFailed):
        moved.keys_for(N2)
    later = Roster(roster.boundary, roster.epoch + 1, roster.version, roster.members, roster.sealed, NOW, b"")
    with pytest.raises(DecryptionFailed):
        later.keys_for(N1)


# -- remove: forward-only revocation -------------------------------------------------------------------------------


def test_remove_rotates_the_key_for_the_remaining_members_only() -> None:
    """After remove, the removed node opens nothing in the new roster; every remaining member gets every epoch's key."""
    roster, keys, ent = setup()
    removed, key2 = membership.remove(roster, node(N2), ADMIN, keys, NOW + 10, ent)
    assert (removed.epoch, removed.version) == (2, roster.version + 1)
    assert len(key2) == 32 and key2 != keys[1]
    assert removed.role(node(N2)) is None and node(N2) not in removed.sealed
    with pytest.raises(DecryptionFailed):
        removed.keys_for(N2)
    for k in (N1, N3):
        assert removed.keys_for(k) == {1: keys[1], 2: key2}
    # the removed node's old box, planted back in the new roster, is bound to epoch 1 and does not open there
    planted = Roster(
        removed.boundary,
        removed.epoch,
        removed.version,
        tuple(sorted((*removed.members, Member(node(N2), "member")), key=lambda m: m.node)),
        {**removed.sealed, node(N2): roster.sealed[node(N2)]},
        NOW,
        b"",
    )
    with pytest.raises(DecryptionFailed):
        planted.keys_for(N2)
    # a third epoch: every remaining member still gets all three keys
    keys2 = {1: keys[1], 2: key2}
    again, key3 = membership.remove(removed, node(RELAY), ADMIN, keys2, NOW + 20, ent)
    assert again.epoch == 3 and again.role(node(RELAY)) is None
    for k in (N1, N3):
        assert again.keys_for(k) == {1: keys[1], 2: key2, 3: key3}


def test_readding_a_removed_node_gives_it_every_key() -> None:
    """A removed node added back receives every epoch's key, the one made while it was out included."""
    roster, keys, ent = setup()
    removed, key2 = membership.remove(roster, node(N2), ADMIN, keys, NOW + 10, ent)
    back = membership.add(removed, node(N2), "member", ADMIN, {1: keys[1], 2: key2}, NOW + 11, ent)
    assert back.keys_for(N2) == {1: keys[1], 2: key2}
    assert back.epoch == 2 and back.version == removed.version + 1


# -- encoding and verification -------------------------------------------------------------------------------------


def test_encode_decode_round_trip() -> None:
    """decode(encode(r)) == r, for a fresh roster, one with members and relays, and one after a removal."""
    roster, keys, ent = setup()
    removed, _ = membership.remove(roster, node(N3), ADMIN, keys, NOW + 5, ent)
    for r in (roster, removed):
        data = r.encode()
        back = Roster.decode(data)
        assert back == r and back.encode() == data
        assert back.keys_for(N1) == r.keys_for(N1)
    assert b" " not in roster.encode().replace(b"alice's devices", b"")


def test_every_flipped_byte_is_a_bad_roster() -> None:
    """Flipping any bit of any byte of an encoded roster gives BadRoster (never another exception)."""
    data = setup()[0].encode()
    bit = random.Random(3)
    for i in range(len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 1 << bit.randrange(8)
        with pytest.raises(BadRoster):
            Roster.decode(bytes(flipped))


def test_truncated_or_garbage_rosters_are_bad() -> None:
    """Prefixes, appended bytes, non-JSON, non-object JSON and non-bytes: BadRoster."""
    data = setup()[0].encode()
    for n in range(0, len(data), 7):
        with pytest.raises(BadRoster):
            Roster.decode(data[:n])
    for bad in (data + b" ", b" " + data, b"\xff\xfe", b"null", b"[]", b"{}", b"1", "{}", None):
        with pytest.raises(BadRoster):
            Roster.decode(bad)  # type: ignore[arg-type]


def edited(data: bytes, change: Any) -> bytes:
    d = orjson.loads(data)
    change(d)
    return orjson.dumps(d, option=orjson.OPT_SORT_KEYS)


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["members"].append({"node": "ab" * 32, "role": "member"}),
        lambda d: d["members"].pop(),
        lambda d: d["members"][0].update(role="relay" if d["members"][0]["role"] == "member" else "member"),
        lambda d: d.update(version=d["version"] + 1),
        lambda d: d.update(epoch=d["epoch"] + 1),
        lambda d: d.update(issued_at=0),
        lambda d: d["boundary"].update(name="other"),
        lambda d: d["boundary"].update(label="mallory"),
        lambda d: d["boundary"].update(kind="tenant"),
        lambda d: d["sealed"].popitem(),
        lambda d: d.update(extra=1),
        lambda d: d.pop("issued_at"),
        lambda d: d.update(version=True),
        lambda d: d.update(version=1.0),
        lambda d: d.update(signature=d["signature"].upper()),
        lambda d: d.update(format="gaml/roster/2"),
    ],
)
def test_changed_rosters_are_bad(change: Any) -> None:
    """A member, role, version, epoch, name, label, kind or box changed (or a field added or removed): BadRoster."""
    data = setup()[0].encode()
    assert edited(data, lambda d: None) == data  # the edit helper alone changes nothing
    with pytest.raises(BadRoster):
        Roster.decode(edited(data, change))


def signed_by(key: crypto.SigningKey, roster: Roster) -> Roster:
    """``roster`` with its signature replaced by ``key``'s."""
    return dataclasses.replace(roster, signature=key.sign(roster.signed_bytes()))


def test_resigned_by_another_key_is_bad() -> None:
    """A roster changed and re-signed by another key is a BadRoster; naming that key as admin makes another boundary."""
    roster, _, _ = setup()
    mallory = identity(66)
    extra = tuple(sorted((*roster.members, Member(node(OUTSIDER), "relay")), key=lambda m: m.node))
    changed = dataclasses.replace(roster, version=roster.version + 1, members=extra)
    with pytest.raises(BadRoster, match="admin"):
        Roster.decode(signed_by(mallory, changed).encode())
    assert Roster.decode(signed_by(ADMIN, changed).encode()) == signed_by(ADMIN, changed)  # the control
    # with the admin field swapped, it decodes, but it is another boundary: it never supersedes the real one
    b = roster.boundary
    hijacked = dataclasses.replace(changed, boundary=Boundary(b.id, b.kind, b.name, b.label, mallory.public_key))
    hijack = Roster.decode(signed_by(mallory, hijacked).encode())
    assert not hijack.newer_than(roster) and not roster.newer_than(hijack)


def test_non_canonical_encodings_are_bad() -> None:
    """The same content spelled otherwise (spaces, key order, escapes) is refused: a roster has one encoding."""
    data = setup()[0].encode()
    d = orjson.loads(data)
    for variant in (
        json.dumps(d).encode(),
        json.dumps(d, sort_keys=True, indent=1).encode(),
        json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode(),
        orjson.dumps(dict(reversed(list(d.items())))),
    ):
        if variant == data:
            continue
        with pytest.raises(BadRoster):
            Roster.decode(variant)


@functools.cache
def encoded_roster() -> bytes:
    return setup()[0].encode()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=70),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=6,
)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.data())
def test_rosters_with_any_value_replaced_are_bad(data: st.DataObject) -> None:
    """Any one value of a roster's JSON (at any depth) replaced by random JSON: BadRoster, never another exception."""
    encoded = encoded_roster()
    d = orjson.loads(encoded)
    target: Any = d
    while True:
        keys = list(target) if isinstance(target, dict) else list(range(len(target)))
        if not keys:
            break
        key = data.draw(st.sampled_from(keys))
        if not isinstance(target[key], dict | list) or data.draw(st.booleans()):
            target[key] = data.draw(JSON)
            break
        target = target[key]
    variant = orjson.dumps(d, option=orjson.OPT_SORT_KEYS)
    if variant == encoded:
        assert Roster.decode(variant).encode() == encoded
        return
    with pytest.raises(BadRoster):
        Roster.decode(variant)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_are_bad_rosters(data: bytes) -> None:
    """Random bytes, alone or after a valid roster's first half, are a BadRoster."""
    encoded = encoded_roster()
    for candidate in (data, encoded[: len(encoded) // 2] + data):
        with pytest.raises(BadRoster):
            Roster.decode(candidate)


# -- ordering ------------------------------------------------------------------------------------------------------


def test_newer_than() -> None:
    """A later version of the same boundary is newer; an equal or earlier one, or another boundary's, is not."""
    ent = crypto.SeededEntropy(0)
    _, v1, key = membership.create("devices", "d", "alice", ADMIN, node(N1), NOW, ent)
    v2 = membership.add(v1, node(N2), "member", ADMIN, {1: key}, NOW, ent)
    v3, _ = membership.remove(v2, node(N2), ADMIN, {1: key}, NOW, ent)
    assert v2.newer_than(v1) and v3.newer_than(v2) and v3.newer_than(v1)
    assert not v1.newer_than(v2) and not v2.newer_than(v2) and not v1.newer_than(v3)
    _, other, _ = membership.create("devices", "d", "alice", ADMIN, node(N1), NOW, ent)
    other_v2 = membership.add(other, node(N2), "member", ADMIN, other.keys_for(N1), NOW, ent)
    assert not other_v2.newer_than(v1) and not v2.newer_than(other)


# -- refusals ------------------------------------------------------------------------------------------------------


def test_create_refusals() -> None:
    """Unknown kind, empty name, an over-long label, a bad node id: RosterRefused (an InvalidInput)."""
    ent = crypto.SeededEntropy(0)
    cases: list[tuple[str, str, str, str]] = [
        ("swarm", "n", "l", node(N1)),
        ("devices", "", "l", node(N1)),
        ("devices", "n", "x" * 300, node(N1)),
        ("devices", "n", "l", node(N1).upper()),
        ("devices", "n", "l", node(N1)[:-2]),
        ("devices", "n", "l", "zz" * 32),
    ]
    for kind, name, label, first in cases:
        with pytest.raises(RosterRefused):
            membership.create(kind, name, label, ADMIN, first, NOW, ent)
    assert issubclass(RosterRefused, InvalidInput) and issubclass(BadRoster, GamlError)


def test_add_refusals() -> None:
    """Unknown role, bad or non-point node ids, an existing node, a wrong admin, missing or bad keys: refused."""
    roster, keys, ent = setup()
    not_a_point = "02" * 32  # 64 hex characters that are not an Ed25519 public key
    with pytest.raises(InvalidInput):
        crypto.x25519_public(bytes.fromhex(not_a_point))
    bad: list[tuple[str, str, crypto.SigningKey, dict[int, bytes]]] = [
        (node(OUTSIDER), "owner", ADMIN, keys),
        (node(OUTSIDER), "member", OUTSIDER, keys),
        (node(N2), "member", ADMIN, keys),
        (node(RELAY), "relay", ADMIN, keys),
        (node(N2), "relay", ADMIN, keys),
        (node(OUTSIDER)[:10], "member", ADMIN, keys),
        (node(OUTSIDER), "member", ADMIN, {}),
        (node(OUTSIDER), "member", ADMIN, {1: keys[1], 2: keys[1]}),
        (node(OUTSIDER), "member", ADMIN, {1: keys[1][:16]}),
        (node(OUTSIDER), "member", ADMIN, {0: keys[1]}),
        (not_a_point, "member", ADMIN, keys),
        (not_a_point, "relay", ADMIN, keys),
    ]
    for n, role, admin, k in bad:
        with pytest.raises(RosterRefused):
            membership.add(roster, n, role, admin, k, NOW, ent)


def test_remove_refusals() -> None:
    """A non-listed node, the last member, a wrong admin or wrong keys: refused, and nothing is issued."""
    roster, keys, ent = setup()
    for n, admin, k in (
        (node(OUTSIDER), ADMIN, keys),
        (node(N2), N1, keys),
        (node(N2), ADMIN, {}),
        (node(N2), ADMIN, {2: keys[1]}),
        ("not a node", ADMIN, keys),
    ):
        with pytest.raises(RosterRefused):
            membership.remove(roster, n, admin, k, NOW, ent)
    _, solo, key = membership.create("devices", "d", "alice", ADMIN, node(N1), NOW, ent)
    with_relay = membership.add(solo, node(RELAY), "relay", ADMIN, {1: key}, NOW, ent)
    for r in (solo, with_relay):
        with pytest.raises(RosterRefused, match="last member"):
            membership.remove(r, node(N1), ADMIN, {1: key}, NOW, ent)
    rid, _ = membership.remove(with_relay, node(RELAY), ADMIN, {1: key}, NOW, ent)  # a relay can go
    assert rid.members == (Member(node(N1), "member", NOW),)


def test_roster_constructor_checks_structure() -> None:
    """A roster must list its members sorted, once each, box to exactly its members, and have one member at least."""
    roster, _, _ = setup()
    b, ms, sealed = roster.boundary, roster.members, dict(roster.sealed)
    relay_only = (Member(node(RELAY), "relay"),)
    for members, boxes in (
        (tuple(reversed(ms)), sealed),
        ((*ms, ms[0]), sealed),
        ((), {}),
        (relay_only, {}),
        (ms, {**sealed, node(RELAY): b"x"}),
        (ms, {k: v for k, v in sealed.items() if k != node(N1)}),
    ):
        with pytest.raises(RosterRefused):
            Roster(b, 1, 1, members, boxes, NOW, b"")
    for epoch, version, issued in ((0, 1, 0), (1, 0, 0), (1, 1, -1), (2**32, 1, 0), (True, 1, 0)):
        with pytest.raises(RosterRefused):
            Roster(b, epoch, version, ms, sealed, issued, b"")
    with pytest.raises(RosterRefused):
        Boundary(b"\x00" * 15, "devices", "n", "l", ADMIN.public_key)
    with pytest.raises(RosterRefused):
        Boundary(b"\x00" * 16, "devices", "n", "l", ADMIN.public_key[:31])


def test_roster_sizes() -> None:
    """A roster of 3 members and a relay is under 2 KiB; each added member costs well under 1 KiB (one epoch)."""
    roster, keys, ent = setup()
    size = len(roster.encode())
    bigger = membership.add(roster, node(OUTSIDER), "member", ADMIN, keys, NOW, ent)
    assert size < 2048 and len(bigger.encode()) - size < 512
