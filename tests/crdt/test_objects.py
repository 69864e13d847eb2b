"""crdt.objects: sealed, signed, content-addressed objects that relays can hold without reading."""

from __future__ import annotations

import hashlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gaml.crdt import membership, objects
from gaml.crdt.doc import AssetDoc
from gaml.crdt.errors import BadObject
from gaml.crdt.objects import SNAPSHOT, TOMBSTONE, Opened, object_id, open_object, peek, seal_object
from gaml.policy import crypto
from gaml.policy.errors import InvalidInput

NOW = 1_700_000_000
ADMIN, WRITER, MALLORY = (crypto.SigningKey(bytes([n]) * 32) for n in (1, 2, 3))
ASSET = "5a" * 16
SECRET_TEXT = "the launch code is 0451, and nobody outside the group may read it"
BOUNDARY, _ROSTER, KEY1 = membership.create(
    "devices", "d", "alice", ADMIN, WRITER.public_key.hex(), NOW, crypto.SeededEntropy(0)
)
KEY2 = crypto.SeededEntropy(1).random_bytes(32)
KEYS = {1: KEY1, 2: KEY2}


def snapshot_data() -> bytes:
    d = AssetDoc.new(b"\x01" * 16)
    d.update({"id": ASSET, "payload": {"text": SECRET_TEXT}, "tags": ["secret"], "version": 1})
    return d.save()


def sealed(kind: bytes = SNAPSHOT, data: bytes | None = None, epoch: int = 1, seed: int = 0) -> tuple[bytes, bytes]:
    data = snapshot_data() if data is None else data
    return seal_object(BOUNDARY, epoch, KEYS[epoch], WRITER, kind, ASSET, data, crypto.SeededEntropy(100 + seed))


def test_seal_open_round_trip() -> None:
    """open_object gives back the id, route, epoch, writer, kind, asset id and data that were sealed."""
    data = snapshot_data()
    for kind, payload, epoch in ((SNAPSHOT, data, 1), (SNAPSHOT, data, 2), (SNAPSHOT, b"", 1), (TOMBSTONE, b"", 2)):
        oid, obj = sealed(kind, payload, epoch)
        opened = open_object(obj, KEYS)
        assert opened == Opened(oid, BOUNDARY.route, epoch, WRITER.public_key.hex(), kind, ASSET, payload)
        assert len(obj) == len(payload) + objects.OVERHEAD_BYTES
    assert AssetDoc.load(open_object(sealed()[1], KEYS).data, b"\x02" * 16).record()["payload"]["text"] == SECRET_TEXT


def test_object_id_is_the_sha256_of_the_bytes() -> None:
    """The id is sha256(object bytes); the same seed gives the same object, another seed another object and id."""
    oid, obj = sealed()
    assert oid == object_id(obj) == hashlib.sha256(obj).digest() and len(oid) == 32
    assert sealed() == (oid, obj)
    other_id, other = sealed(seed=1)
    assert other != obj and other_id != oid
    assert open_object(other, KEYS).data == open_object(obj, KEYS).data


def test_peek_needs_no_key() -> None:
    """peek reads route and epoch; nothing else about the object is in the clear."""
    _, obj = sealed(epoch=2)
    assert peek(obj) == (BOUNDARY.route, 2)
    assert obj[:2] == b"G1" and obj[2:18] == BOUNDARY.route and obj[18:22] == (2).to_bytes(4, "big")


def test_nothing_readable_in_the_bytes() -> None:
    """Neither the asset text, the asset id, the writer nor the boundary id occurs in an object's bytes."""
    for kind, data in ((SNAPSHOT, None), (TOMBSTONE, b"")):
        _, obj = sealed(kind, data)
        for secret in (
            SECRET_TEXT.encode(),
            SECRET_TEXT.encode()[:12],
            b"launch code",
            bytes.fromhex(ASSET),
            ASSET.encode(),
            WRITER.public_key,
            WRITER.public_key.hex().encode(),
            BOUNDARY.id,
        ):
            assert secret not in obj


def test_every_flipped_byte_is_a_bad_object() -> None:
    """Flipping any bit of any byte (magic, route, epoch, nonce, ciphertext, tag) gives BadObject."""
    _, obj = sealed(data=b"small data")
    bit = random.Random(4)
    for i in range(len(obj)):
        flipped = bytearray(obj)
        flipped[i] ^= 1 << bit.randrange(8)
        with pytest.raises(BadObject):
            open_object(bytes(flipped), KEYS)


def test_truncated_or_extended_objects_are_bad() -> None:
    """Every prefix of an object, and an object with bytes appended, is a BadObject."""
    _, obj = sealed(data=b"small data")
    for n in range(len(obj)):
        with pytest.raises(BadObject):
            open_object(obj[:n], KEYS)
    with pytest.raises(BadObject):
        open_object(obj + b"\x00", KEYS)


def test_wrong_or_missing_epoch_key_is_a_bad_object() -> None:
    """An object opened with another epoch's key, another boundary's key, or without its epoch's key: BadObject."""
    _, obj = sealed(epoch=1)
    for keys in ({1: KEY2}, {2: KEY1, 1: crypto.SeededEntropy(9).random_bytes(32)}, {2: KEY2}, {}):
        with pytest.raises(BadObject):
            open_object(obj, keys)


def test_moved_header_is_a_bad_object() -> None:
    """An object relabelled to another epoch (same key) or another route does not open: the header is bound."""
    _, obj = sealed(epoch=1)
    relabelled = obj[:18] + (2).to_bytes(4, "big") + obj[22:]
    with pytest.raises(BadObject):
        open_object(relabelled, {1: KEY1, 2: KEY1})
    rerouted = obj[:2] + b"\x00" * 16 + obj[18:]
    with pytest.raises(BadObject):
        open_object(rerouted, KEYS)


def test_forged_writer_is_a_bad_object() -> None:
    """A group member (holding the key) who claims another writer, signing with its own key: BadObject."""
    header = b"G1" + BOUNDARY.route + (1).to_bytes(4, "big")
    body = SNAPSHOT + bytes.fromhex(ASSET) + b"forged"
    forged_sig = MALLORY.sign(objects.SIGN_TAG + header + body)
    forged = header + crypto.seal(KEY1, WRITER.public_key + forged_sig + body, header, crypto.SeededEntropy(5))
    with pytest.raises(BadObject, match="signature"):
        open_object(forged, KEYS)
    honest = header + crypto.seal(KEY1, MALLORY.public_key + forged_sig + body, header, crypto.SeededEntropy(5))
    assert open_object(honest, KEYS).writer == MALLORY.public_key.hex()  # the control: signed as itself, it opens
    # a signature made for another header (another epoch) does not verify under this one
    other_header = header[:18] + (2).to_bytes(4, "big")
    replayed_sig = WRITER.sign(objects.SIGN_TAG + other_header + body)
    replayed = header + crypto.seal(KEY1, WRITER.public_key + replayed_sig + body, header, crypto.SeededEntropy(6))
    with pytest.raises(BadObject, match="signature"):
        open_object(replayed, KEYS)


def test_malformed_plaintexts_are_bad_objects() -> None:
    """A well-sealed object whose body has an unknown kind, or a tombstone with data: BadObject."""
    header = b"G1" + BOUNDARY.route + (1).to_bytes(4, "big")
    for body in (b"X" + bytes(16) + b"data", TOMBSTONE + bytes(16) + b"data"):
        sig = WRITER.sign(objects.SIGN_TAG + header + body)
        obj = header + crypto.seal(KEY1, WRITER.public_key + sig + body, header, crypto.SeededEntropy(7))
        with pytest.raises(BadObject, match="body"):
            open_object(obj, KEYS)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_are_bad_objects(data: bytes) -> None:
    """Random bytes (with the magic prefixed or not) are BadObject for peek-then-open, never another exception."""
    for candidate in (data, b"G1" + data):
        with pytest.raises(BadObject):
            open_object(candidate, KEYS)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.data())
def test_mutated_objects_are_bad_objects(data: st.DataObject) -> None:
    """An object with bytes overwritten, inserted or cut is a BadObject (or, if unchanged, opens)."""
    _, obj = sealed(data=b"some snapshot bytes")
    start = data.draw(st.integers(0, len(obj)))
    cut = data.draw(st.integers(0, 8))
    patch = data.draw(st.binary(max_size=8))
    mutated = obj[:start] + patch + obj[start + cut :]
    if mutated == obj:
        assert open_object(mutated, KEYS).data == b"some snapshot bytes"
        return
    with pytest.raises(BadObject):
        open_object(mutated, KEYS)


def test_peek_refuses_malformed() -> None:
    """peek refuses short, over-long, wrongly-prefixed and non-bytes input with BadObject."""
    _, obj = sealed(data=b"x")
    for bad in (b"", obj[: objects.OVERHEAD_BYTES - 1], b"G2" + obj[2:], bytearray(obj), None, "G1"):
        with pytest.raises(BadObject):
            peek(bad)  # type: ignore[arg-type]
    with pytest.raises(BadObject):
        peek(b"G1" + bytes(objects.MAX_OBJECT_BYTES))


def test_seal_refusals() -> None:
    """Unknown kind, a bad asset id, a tombstone with data, a bad key or epoch, too much data: InvalidInput."""
    ent = crypto.SeededEntropy(0)
    cases: list[tuple[int, bytes, bytes, str, bytes]] = [
        (1, KEY1, b"X", ASSET, b""),
        (1, KEY1, b"s", ASSET, b""),
        (1, KEY1, SNAPSHOT, ASSET.upper(), b""),
        (1, KEY1, SNAPSHOT, ASSET[:30], b""),
        (1, KEY1, TOMBSTONE, ASSET, b"data"),
        (1, KEY1[:16], SNAPSHOT, ASSET, b""),
        (-1, KEY1, SNAPSHOT, ASSET, b""),
        (2**32, KEY1, SNAPSHOT, ASSET, b""),
        (1, KEY1, SNAPSHOT, ASSET, bytes(objects.MAX_DATA_BYTES + 1)),
    ]
    for epoch, key, kind, asset, data in cases:
        with pytest.raises(InvalidInput):
            seal_object(BOUNDARY, epoch, key, WRITER, kind, asset, data, ent)
    oid, biggest = seal_object(BOUNDARY, 1, KEY1, WRITER, SNAPSHOT, ASSET, bytes(objects.MAX_DATA_BYTES), ent)
    assert len(biggest) == objects.MAX_OBJECT_BYTES and open_object(biggest, KEYS).object_id == oid


def test_overhead() -> None:
    """An object is its data plus 176 bytes: header 22, seal 41, writer 32, signature 64, kind and asset id 17."""
    assert objects.OVERHEAD_BYTES == 22 + 41 + 32 + 64 + 17 == 176
    data = snapshot_data()
    assert len(sealed(data=data)[1]) - len(data) == 176
