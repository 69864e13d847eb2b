"""policy.crypto: sealing, signatures, derivation, passphrases; pinned test vectors in tests/vectors/crypto.json."""

from __future__ import annotations

import io
import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from gaml.policy import crypto, model
from gaml.policy.errors import BadSignature, DecryptionFailed, GamlError, InvalidInput
from gaml.policy.model import Asset

VECTORS_PATH = Path(__file__).resolve().parents[1] / "vectors" / "crypto.json"
REGENERATE = (
    "a pinned encoding changed. If the change is intentional (it breaks every stored key, sealed blob, signature "
    "or id made before it), regenerate with `.venv/bin/python tests/vectors/make_vectors.py` and say so in the change"
)

rng = random.Random(0)
KEY = rng.randbytes(32)
OTHER_KEY = rng.randbytes(32)
PLAINTEXT = b"the payload of an asset"
AAD = b"asset/abc|partition/p1|epoch/1"


@pytest.fixture(scope="module")
def vectors() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
    return result


# -- sealing -----------------------------------------------------------------------------------------------------


def test_seal_open_round_trip() -> None:
    """open_sealed(seal(x)) == x for empty, short and large plaintexts, with and without associated data."""
    ent = crypto.SeededEntropy(0)
    for plaintext in (b"", b"x", PLAINTEXT, random.Random(1).randbytes(100_000)):
        for aad in (b"", AAD):
            blob = crypto.seal(KEY, plaintext, aad, ent)
            assert len(blob) == len(plaintext) + crypto.SEAL_OVERHEAD
            assert blob[:1] == crypto.SEAL_FORMAT
            assert crypto.open_sealed(KEY, blob, aad) == plaintext


def test_open_with_wrong_key_or_aad_fails() -> None:
    """A sealed blob does not open under another key, other associated data, or a key of the wrong size."""
    blob = crypto.seal(KEY, PLAINTEXT, AAD, crypto.SeededEntropy(0))
    with pytest.raises(DecryptionFailed):
        crypto.open_sealed(OTHER_KEY, blob, AAD)
    for aad in (b"", AAD + b"x", AAD[:-1], b"asset/abd|partition/p1|epoch/1"):
        with pytest.raises(DecryptionFailed):
            crypto.open_sealed(KEY, blob, aad)
    with pytest.raises(DecryptionFailed):
        crypto.open_sealed(KEY[:31], blob, AAD)


def test_every_flipped_byte_fails() -> None:
    """Flipping any bit of any byte (format, nonce, ciphertext or tag) makes the blob fail to open."""
    blob = crypto.seal(KEY, PLAINTEXT, AAD, crypto.SeededEntropy(0))
    bit = random.Random(2)
    for i in range(len(blob)):
        altered = bytearray(blob)
        altered[i] ^= 1 << bit.randrange(8)
        with pytest.raises(DecryptionFailed):
            crypto.open_sealed(KEY, bytes(altered), AAD)


def test_truncated_or_extended_blob_fails() -> None:
    """Every truncation of a sealed blob, and a blob with bytes appended, fails to open."""
    blob = crypto.seal(KEY, PLAINTEXT, AAD, crypto.SeededEntropy(0))
    for n in range(len(blob)):
        with pytest.raises(DecryptionFailed):
            crypto.open_sealed(KEY, blob[:n], AAD)
    with pytest.raises(DecryptionFailed):
        crypto.open_sealed(KEY, blob + b"\x00", AAD)


def test_wrong_format_byte_fails() -> None:
    """A blob whose format byte is not SEAL_FORMAT is refused, even if the rest is a valid sealed blob."""
    blob = crypto.seal(KEY, PLAINTEXT, AAD, crypto.SeededEntropy(0))
    for fmt in (b"\x00", b"\x02", b"\xff"):
        with pytest.raises(DecryptionFailed, match="format"):
            crypto.open_sealed(KEY, fmt + blob[1:], AAD)


def stream(data: bytes, chunk: int, seed: int = 0, aad: bytes = AAD, cuts: tuple[int, ...] = (3, 3, 40)) -> bytes:
    """``data`` sealed as a stream, handed over in parts cut at ``cuts`` (an empty part among them)."""
    bounds = [0, *(min(c, len(data)) for c in cuts), len(data)]
    parts = [data[a:b] for a, b in itertools.pairwise(bounds)]
    return b"".join(bytes(c) for c in crypto.seal_stream(KEY, parts, aad, crypto.SeededEntropy(seed), chunk=chunk))


@pytest.mark.parametrize("chunk", [1, 16, 1000])
@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 48, 100])
def test_a_sealed_stream_opens_whole_or_read_in_pieces(size: int, chunk: int) -> None:
    """Any plaintext (empty, within a chunk, whole chunks, a partial last one), handed over in parts of any size,
    opens to the same bytes, whole or read into buffers of other sizes."""
    data = random.Random(size).randbytes(size)
    blob = stream(data, chunk)
    assert crypto.open_stream(KEY, blob, AAD) == data
    for cuts in ((0,), (size // 3, size // 2), (chunk, 2 * chunk + 1)):
        reader = crypto.StreamReader(KEY, io.BytesIO(blob), AAD)
        bounds = [0, *(min(c, size) for c in cuts), size]
        pieces = [bytearray(b - a) for a, b in itertools.pairwise(bounds)]
        for piece in pieces:
            reader.readinto(piece)
        reader.end()
        assert b"".join(pieces) == data


def test_a_sealed_stream_refuses_every_alteration() -> None:
    """A flipped bit anywhere (header, chunk, tag), any truncation, bytes appended, chunks dropped, swapped or taken
    from another stream, another key or another context: the stream does not open (DecryptionFailed)."""
    chunk, data = 16, random.Random(1).randbytes(50)  # three whole chunks and a partial last one
    blob = stream(data, chunk)
    head, size = crypto.STREAM_HEAD_BYTES, chunk + crypto.TAG_BYTES
    chunks = [blob[head + i * size : head + (i + 1) * size] for i in range(4)]
    assert b"".join(chunks) == blob[head:]
    other = stream(data, chunk, seed=1)
    bit = random.Random(2)
    altered: list[bytes] = []
    for i in range(len(blob)):
        b = bytearray(blob)
        b[i] ^= 1 << bit.randrange(8)
        altered.append(bytes(b))
    altered += [blob[:n] for n in range(len(blob))]
    altered += [
        blob + b"\x00",
        blob + chunks[3],
        blob[:head] + chunks[0] + chunks[1] + chunks[3],  # a chunk dropped
        blob[:head] + chunks[1] + chunks[0] + chunks[2] + chunks[3],  # two swapped
        blob[:head] + other[head : head + size] + b"".join(chunks[1:]),  # one of another stream
        other[:head] + blob[head:],  # another stream's header
    ]
    for bad in altered:
        with pytest.raises(DecryptionFailed):
            crypto.open_stream(KEY, bad, AAD)
    with pytest.raises(DecryptionFailed):
        crypto.open_stream(OTHER_KEY, blob, AAD)
    with pytest.raises(DecryptionFailed):
        crypto.open_stream(KEY, blob, AAD + b"x")
    with pytest.raises(DecryptionFailed):
        crypto.open_stream(KEY, crypto.seal(KEY, data, AAD, crypto.SeededEntropy(0)), AAD)  # a sealed blob


def test_a_sealed_stream_read_short_or_past_its_end_fails_at_end() -> None:
    """A reader that asks for more bytes than the stream holds fails; one that stops before the end fails at end()."""
    blob = stream(bytes(40), 16)
    reader = crypto.StreamReader(KEY, io.BytesIO(blob), AAD)
    with pytest.raises(DecryptionFailed, match="ends here"):
        reader.readinto(bytearray(41))
    for stop in (0, 16, 39):
        reader = crypto.StreamReader(KEY, io.BytesIO(blob), AAD)
        reader.readinto(bytearray(stop))
        with pytest.raises(DecryptionFailed, match="more bytes"):
            reader.end()
    with pytest.raises(GamlError):
        list(crypto.seal_stream(KEY, [b"x"], AAD, crypto.SeededEntropy(0), chunk=0))


def test_seal_refuses_bad_key_size() -> None:
    """seal refuses a key that is not 32 bytes."""
    for key in (b"", KEY[:16], KEY + b"\x00"):
        with pytest.raises(GamlError):
            crypto.seal(key, PLAINTEXT, AAD, crypto.SeededEntropy(0))


def test_seal_nonces() -> None:
    """With SystemEntropy every seal differs (fresh nonce); with SeededEntropy(0) the output is reproducible."""
    system = crypto.SystemEntropy()
    blobs = {crypto.seal(KEY, PLAINTEXT, AAD, system) for _ in range(20)}
    assert len(blobs) == 20
    assert len({b[1 : 1 + crypto.NONCE_BYTES] for b in blobs}) == 20
    first = crypto.seal(KEY, PLAINTEXT, AAD, crypto.SeededEntropy(0))
    assert crypto.seal(KEY, PLAINTEXT, AAD, crypto.SeededEntropy(0)) == first
    assert crypto.seal(KEY, PLAINTEXT, AAD, crypto.SeededEntropy(1)) != first


# -- signatures --------------------------------------------------------------------------------------------------


def test_signatures_verify() -> None:
    """A signature made by a key verifies under its public key; generate() makes distinct keys."""
    signer = crypto.SigningKey.generate(crypto.SeededEntropy(0))
    for message in (b"", b"m", PLAINTEXT):
        crypto.verify(signer.public_key, message, signer.sign(message))
    assert len(signer.public_key) == 32 and len(signer.sign(b"m")) == 64
    assert crypto.SigningKey.generate(crypto.SeededEntropy(1)).public_key != signer.public_key


def test_altered_signature_message_or_key_fails() -> None:
    """Changing one bit of the message, the signature or the public key gives BadSignature."""
    signer = crypto.SigningKey(KEY)
    sig = signer.sign(PLAINTEXT)
    bit = random.Random(3)
    for i in range(len(PLAINTEXT)):
        msg = bytearray(PLAINTEXT)
        msg[i] ^= 1 << bit.randrange(8)
        with pytest.raises(BadSignature):
            crypto.verify(signer.public_key, bytes(msg), sig)
    for i in range(len(sig)):
        bad = bytearray(sig)
        bad[i] ^= 1 << bit.randrange(8)
        with pytest.raises(BadSignature):
            crypto.verify(signer.public_key, PLAINTEXT, bytes(bad))
    for i in range(len(signer.public_key)):
        pk = bytearray(signer.public_key)
        pk[i] ^= 1 << bit.randrange(8)
        with pytest.raises(BadSignature):
            crypto.verify(bytes(pk), PLAINTEXT, sig)
    with pytest.raises(BadSignature):
        crypto.verify(crypto.SigningKey(OTHER_KEY).public_key, PLAINTEXT, sig)
    for pk, s in ((signer.public_key[:31], sig), (signer.public_key, sig[:63]), (b"", b"")):
        with pytest.raises(BadSignature):
            crypto.verify(pk, PLAINTEXT, s)


def test_signing_key_hides_its_seed() -> None:
    """A SigningKey's repr shows part of the public key and nothing of the seed; a bad seed size is refused."""
    seed = bytes(range(0x10, 0x30))
    signer = crypto.SigningKey(seed)
    text = repr(signer) + str(signer)
    assert seed.hex() not in text
    assert seed.hex()[:8] not in text and seed.hex()[-8:] not in text
    assert signer.public_key.hex()[:16] in text
    for bad in (b"", seed[:31], seed + b"\x00"):
        with pytest.raises(GamlError):
            crypto.SigningKey(bad)


# -- derivation --------------------------------------------------------------------------------------------------


def test_keyed_hash_depends_on_key_and_data() -> None:
    """keyed_hash is deterministic, changes with the key or the data, and has the requested size."""
    h = crypto.keyed_hash(KEY, b"alice")
    assert h == crypto.keyed_hash(KEY, b"alice")
    assert len(h) == 16 and len(crypto.keyed_hash(KEY, b"alice", 32)) == 32
    assert crypto.keyed_hash(OTHER_KEY, b"alice") != h
    assert crypto.keyed_hash(KEY, b"alicf") != h


def test_derive_key_separates_tags_and_contexts() -> None:
    """derive_key is deterministic and gives a different 32-byte key for each tag, context and secret."""
    tags = [crypto.META_KEY_TAG, crypto.BLIND_INDEX_TAG, crypto.PARTITION_ID_TAG]
    contexts = [b"", b"a", b"b", b"partition/1"]
    keys = {(t, c): crypto.derive_key(KEY, t, c) for t in tags for c in contexts}
    assert all(len(k) == crypto.KEY_BYTES for k in keys.values())
    assert len(set(keys.values())) == len(keys)
    assert crypto.derive_key(KEY, tags[0], b"a") == keys[(tags[0], b"a")]
    assert crypto.derive_key(OTHER_KEY, tags[0], b"a") != keys[(tags[0], b"a")]


def test_passphrase_key() -> None:
    """passphrase_key is deterministic for a salt, differs with the salt or passphrase, and refuses a bad salt size."""
    salt = bytes(crypto.ARGON2_SALT_BYTES)
    key = crypto.passphrase_key(b"hunter2", salt)
    assert len(key) == crypto.KEY_BYTES
    assert crypto.passphrase_key(b"hunter2", salt) == key
    assert crypto.passphrase_key(b"hunter2", b"\x01" * crypto.ARGON2_SALT_BYTES) != key
    assert crypto.passphrase_key(b"hunter3", salt) != key
    with pytest.raises(GamlError):
        crypto.passphrase_key(b"hunter2", salt[:-1])


def test_seeded_entropy_is_reproducible() -> None:
    """SeededEntropy gives the same byte stream for the same seed and another for another seed."""
    a, b, c = crypto.SeededEntropy(5), crypto.SeededEntropy(5), crypto.SeededEntropy(6)
    assert [a.random_bytes(n) for n in (0, 1, 24, 32)] == [b.random_bytes(n) for n in (0, 1, 24, 32)]
    assert crypto.SeededEntropy(5).random_bytes(32) != c.random_bytes(32)


# -- test vectors ------------------------------------------------------------------------------------------------


def test_vector_constants(vectors: dict[str, Any]) -> None:
    """The format constants and tags match the pinned values."""
    c = vectors["constants"]
    got = {
        "SEAL_FORMAT": crypto.SEAL_FORMAT.hex(),
        "NONCE_BYTES": crypto.NONCE_BYTES,
        "KEY_BYTES": crypto.KEY_BYTES,
        "TAG_BYTES": crypto.TAG_BYTES,
        "KEYCHAIN_AAD": crypto.KEYCHAIN_AAD.decode(),
        "ARGON2_OPSLIMIT": crypto.ARGON2_OPSLIMIT,
        "ARGON2_MEMLIMIT": crypto.ARGON2_MEMLIMIT,
        "ARGON2_SALT_BYTES": crypto.ARGON2_SALT_BYTES,
        "CANONICAL_TAG": model.CANONICAL_TAG.decode(),
        "ASSET_ID_TAG": model.ASSET_ID_TAG.hex(),
        "ITEM_ID_TAG": model.ITEM_ID_TAG.hex(),
    }
    assert got == c, REGENERATE


def test_vector_derive_key(vectors: dict[str, Any]) -> None:
    """derive_key reproduces the pinned keys, and every *_TAG constant of policy.crypto is pinned."""
    tags = {name: getattr(crypto, name) for name in vars(crypto) if name.endswith("_TAG")}
    assert {v["tag_name"] for v in vectors["derive_key"]} == set(tags), REGENERATE
    for v in vectors["derive_key"]:
        assert tags[v["tag_name"]] == v["tag"].encode(), REGENERATE
        key = crypto.derive_key(bytes.fromhex(v["secret"]), v["tag"].encode(), bytes.fromhex(v["context"]))
        assert key.hex() == v["key"], f"derive_key({v['tag_name']}, context={v['context']}): {REGENERATE}"


def test_vector_keyed_hash(vectors: dict[str, Any]) -> None:
    """keyed_hash reproduces the pinned digests."""
    for v in vectors["keyed_hash"]:
        digest = crypto.keyed_hash(bytes.fromhex(v["key"]), bytes.fromhex(v["data"]), v["size"])
        assert digest.hex() == v["digest"], REGENERATE


def test_vector_id_cipher(vectors: dict[str, Any]) -> None:
    """The storage-id permutation reproduces the pinned outputs and inverts them."""
    for v in vectors["id_cipher"]:
        cipher = crypto.IdCipher(bytes.fromhex(v["key"]))
        assert cipher.encrypt(bytes.fromhex(v["id"])).hex() == v["storage_id"], REGENERATE
        assert cipher.decrypt(bytes.fromhex(v["storage_id"])).hex() == v["id"]


def test_vector_seal(vectors: dict[str, Any]) -> None:
    """seal with SeededEntropy(7) reproduces the pinned XChaCha20-Poly1305 blob, and the pinned blob opens."""
    v = vectors["seal"]
    key, plaintext, aad = bytes.fromhex(v["key"]), bytes.fromhex(v["plaintext"]), bytes.fromhex(v["aad"])
    blob = crypto.seal(key, plaintext, aad, crypto.SeededEntropy(v["entropy_seed"]))
    assert blob.hex() == v["sealed"], REGENERATE
    assert crypto.open_sealed(key, bytes.fromhex(v["sealed"]), aad) == plaintext


def test_vector_seal_stream(vectors: dict[str, Any]) -> None:
    """seal_stream with SeededEntropy(7) and 16-byte chunks reproduces the pinned stream (header, ChaCha20-Poly1305
    chunks under the stream's HKDF key, the last flagged), and the pinned stream opens."""
    v = vectors["seal_stream"]
    key, plaintext, aad = bytes.fromhex(v["key"]), bytes.fromhex(v["plaintext"]), bytes.fromhex(v["aad"])
    parts = [plaintext[:5], plaintext[5:]]
    stream = crypto.seal_stream(key, parts, aad, crypto.SeededEntropy(v["entropy_seed"]), chunk=v["chunk"])
    assert b"".join(bytes(c) for c in stream).hex() == v["sealed"], REGENERATE
    assert crypto.open_stream(key, bytes.fromhex(v["sealed"]), aad) == plaintext


def test_vector_ed25519(vectors: dict[str, Any]) -> None:
    """A fixed seed gives the pinned Ed25519 public key and signature, and the pinned signature verifies."""
    v = vectors["ed25519"]
    signer = crypto.SigningKey(bytes.fromhex(v["seed"]))
    message = bytes.fromhex(v["message"])
    assert signer.public_key.hex() == v["public_key"], REGENERATE
    assert signer.sign(message).hex() == v["signature"], REGENERATE
    crypto.verify(bytes.fromhex(v["public_key"]), message, bytes.fromhex(v["signature"]))


def test_vector_passphrase_key(vectors: dict[str, Any]) -> None:
    """Argon2id with the module's default limits and a fixed salt gives the pinned key."""
    v = vectors["passphrase_key"]
    assert (v["opslimit"], v["memlimit"]) == (crypto.ARGON2_OPSLIMIT, crypto.ARGON2_MEMLIMIT), REGENERATE
    key = crypto.passphrase_key(v["passphrase"].encode(), bytes.fromhex(v["salt"]))
    assert key.hex() == v["key"], REGENERATE


def test_vector_ids(vectors: dict[str, Any]) -> None:
    """content_id and item_id reproduce the pinned ids."""
    for v in vectors["content_id"]:
        got = model.content_id(v["asset_type"], v["owner_id"], v["tenant_scope"], v["payload"])
        assert got == v["id"], f"content_id{v['asset_type'], v['owner_id'], v['tenant_scope']}: {REGENERATE}"
    for v in vectors["item_id"]:
        assert model.item_id(v["source_id"], v["position"]) == v["id"], REGENERATE


def test_vector_asset_encoding(vectors: dict[str, Any]) -> None:
    """A fully specified asset encodes to the pinned canonical and signing bytes, and decodes back to itself."""
    v = vectors["asset"]
    asset = Asset.from_dict(v["fields"])
    assert asset.canonical_bytes().decode() == v["canonical_bytes"], REGENERATE
    assert asset.signing_bytes().decode() == v["signing_bytes"], REGENERATE
    assert Asset.from_canonical(v["canonical_bytes"].encode()) == asset


# -- boxes: sealing to a node's identity ---------------------------------------------------------------------------

RECIPIENT = crypto.SigningKey(bytes(range(0x40, 0x60)))
BOX_AAD = b"gaml/roster-keys/1|boundary|epoch|node"
# box_seal(RECIPIENT.public_key, b"group key 32 bytes, in JSON.....", b"gaml/aad", SeededEntropy(7)); see REGENERATE
BOX_VECTOR = (
    "02ee9d5d095a5ddd828d3a0066ff0567518113e293c4b60abbdf83a9b2e0d64e032b902f8911e81818f8c99d5d5d9831957504d90e945de2"
    "e88046a946d547f8d54f8a6cea399cef4cedae820162e59f67b6f195b1bc1e8814e64597eea1e31b8c0bea56febd8d2d41"
)


def test_x25519_public_is_the_standard_conversion() -> None:
    """x25519_public agrees with libsodium's Ed25519 -> X25519 conversion, and with the secret the box opens with."""
    import nacl.bindings
    import nacl.signing

    for seed in (KEY, OTHER_KEY, bytes(range(32))):
        signer = crypto.SigningKey(seed)
        expected = bytes(nacl.signing.SigningKey(seed).verify_key.to_curve25519_public_key())
        assert crypto.x25519_public(signer.public_key) == expected
        assert bytes(nacl.bindings.crypto_scalarmult_base(signer._x25519_secret())) == expected


def test_x25519_public_refuses_non_keys() -> None:
    """A wrong size, a non-point and a small-order point are refused with InvalidInput."""
    for bad in (b"", RECIPIENT.public_key[:31], RECIPIENT.public_key + b"\x00", b"\x02" * 32, bytes(32), "ab" * 32):
        with pytest.raises(InvalidInput):
            crypto.x25519_public(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput):
            crypto.box_seal(bad, PLAINTEXT, BOX_AAD, crypto.SeededEntropy(0))  # type: ignore[arg-type]


def test_box_round_trip() -> None:
    """box_open(box_seal(x)) == x for empty, short and large plaintexts; the overhead is BOX_OVERHEAD bytes."""
    ent = crypto.SeededEntropy(0)
    for plaintext in (b"", b"k", PLAINTEXT, random.Random(1).randbytes(50_000)):
        for aad in (b"", BOX_AAD):
            blob = crypto.box_seal(RECIPIENT.public_key, plaintext, aad, ent)
            assert len(blob) == len(plaintext) + crypto.BOX_OVERHEAD == len(plaintext) + 73
            assert blob[:1] == crypto.BOX_FORMAT
            assert crypto.box_open(RECIPIENT, blob, aad) == plaintext


def test_box_is_the_specified_construction() -> None:
    """An independent implementation (cryptography's X25519 and HKDF, libsodium's AEAD) opens a box."""
    import nacl.bindings
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    blob = crypto.box_seal(RECIPIENT.public_key, PLAINTEXT, BOX_AAD, crypto.SeededEntropy(3))
    eph_pub, nonce, ct = blob[1:33], blob[33:57], blob[57:]
    secret = X25519PrivateKey.from_private_bytes(RECIPIENT._x25519_secret())
    shared = secret.exchange(X25519PublicKey.from_public_bytes(eph_pub))
    recipient_x = crypto.x25519_public(RECIPIENT.public_key)
    assert crypto.BOX_KDF_SALT == b"gaml/box/1"
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"gaml/box/1", info=eph_pub + recipient_x).derive(shared)
    assert nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(ct, BOX_AAD, nonce, key) == PLAINTEXT


def test_box_vector() -> None:
    """A pinned box: the format, the key derivation and the use of entropy must not change silently."""
    got = crypto.box_seal(
        RECIPIENT.public_key, b"group key 32 bytes, in JSON.....", b"gaml/aad", crypto.SeededEntropy(7)
    )
    assert got.hex() == BOX_VECTOR, REGENERATE
    assert crypto.box_open(RECIPIENT, bytes.fromhex(BOX_VECTOR), b"gaml/aad") == b"group key 32 bytes, in JSON....."


def test_box_is_deterministic_for_a_seed_and_fresh_otherwise() -> None:
    """The same seed gives the same box; another seed, or SystemEntropy, a different ephemeral key each time."""
    first = crypto.box_seal(RECIPIENT.public_key, PLAINTEXT, BOX_AAD, crypto.SeededEntropy(0))
    assert crypto.box_seal(RECIPIENT.public_key, PLAINTEXT, BOX_AAD, crypto.SeededEntropy(0)) == first
    assert crypto.box_seal(RECIPIENT.public_key, PLAINTEXT, BOX_AAD, crypto.SeededEntropy(1)) != first
    system = crypto.SystemEntropy()
    boxes = {crypto.box_seal(RECIPIENT.public_key, PLAINTEXT, BOX_AAD, system) for _ in range(10)}
    assert len({b[1:33] for b in boxes}) == 10


def test_box_opens_only_for_its_recipient_and_context() -> None:
    """Another identity, other associated data, or the sealing key's own seed do not open a box."""
    blob = crypto.box_seal(RECIPIENT.public_key, PLAINTEXT, BOX_AAD, crypto.SeededEntropy(0))
    for other in (crypto.SigningKey(KEY), crypto.SigningKey(OTHER_KEY)):
        with pytest.raises(DecryptionFailed):
            crypto.box_open(other, blob, BOX_AAD)
    for aad in (b"", BOX_AAD + b"x", BOX_AAD[:-1]):
        with pytest.raises(DecryptionFailed):
            crypto.box_open(RECIPIENT, blob, aad)


def test_every_flipped_byte_of_a_box_fails() -> None:
    """Flipping any bit of any byte (format, ephemeral key, nonce, ciphertext, tag) makes a box fail to open."""
    blob = crypto.box_seal(RECIPIENT.public_key, PLAINTEXT, BOX_AAD, crypto.SeededEntropy(0))
    bit = random.Random(5)
    for i in range(len(blob)):
        altered = bytearray(blob)
        altered[i] ^= 1 << bit.randrange(8)
        with pytest.raises(DecryptionFailed):
            crypto.box_open(RECIPIENT, bytes(altered), BOX_AAD)


def test_truncated_extended_or_malformed_boxes_fail() -> None:
    """Every prefix, an appended byte, a sealed (not boxed) blob, a small-order ephemeral key, non-bytes: refused."""
    blob = crypto.box_seal(RECIPIENT.public_key, PLAINTEXT, BOX_AAD, crypto.SeededEntropy(0))
    for n in range(len(blob)):
        with pytest.raises(DecryptionFailed):
            crypto.box_open(RECIPIENT, blob[:n], BOX_AAD)
    small_order = blob[:1] + bytes(32) + blob[33:]
    sealed = crypto.seal(KEY, PLAINTEXT + bytes(40), BOX_AAD, crypto.SeededEntropy(0))
    for bad in (blob + b"\x00", small_order, sealed, bytearray(blob), None):
        with pytest.raises(DecryptionFailed):
            crypto.box_open(RECIPIENT, bad, BOX_AAD)  # type: ignore[arg-type]


def test_digest_is_sha256() -> None:
    """digest is SHA-256: 32 bytes, the known value for b"abc"."""
    assert crypto.digest(b"abc").hex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert len(crypto.digest(b"")) == crypto.DIGEST_BYTES == 32
