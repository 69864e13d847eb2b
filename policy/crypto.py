"""All of GAML's cryptography, in the one module allowed to import the crypto libraries.

- Signatures: Ed25519 (PyNaCl) over canonical encodings.
- Sealing: XChaCha20-Poly1305 (IETF AEAD, 24-byte random nonce) with associated data that binds what the bytes are
  (asset id, partition, key epoch), so a sealed blob moved under another id or partition fails to open.
- Key derivation: HKDF-SHA256 (cryptography) under named, versioned tags; keyed BLAKE2b for blind identifiers.
- Passphrases: Argon2id (libsodium via PyNaCl).

Nonces and keys come from an :class:`Entropy` passed in by the caller, so that the core stays deterministic in the
simulator; :class:`SystemEntropy` (``os.urandom``) is the production source.
"""

from __future__ import annotations

import hashlib
import os
import random
from typing import Final, Protocol

import nacl.bindings as _sodium
import nacl.exceptions
import nacl.pwhash
import nacl.signing
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from policy.errors import BadSignature, DecryptionFailed, GamlError

SEAL_FORMAT: Final = b"\x01"  # format byte of a sealed blob: 0x01 = XChaCha20-Poly1305, 24-byte nonce
NONCE_BYTES: Final = 24
KEY_BYTES: Final = 32
TAG_BYTES: Final = 16
SEAL_OVERHEAD: Final = 1 + NONCE_BYTES + TAG_BYTES

# Named, versioned derivation tags (never reuse a tag for another purpose).
META_KEY_TAG: Final = b"gaml_meta_key_v1"
BLIND_INDEX_TAG: Final = b"gaml_blind_index_v1"
PARTITION_ID_TAG: Final = b"gaml_partition_id_v1"
STORAGE_ID_TAG: Final = b"gaml_storage_id_v1"
KEYCHAIN_AAD: Final = b"gaml_keychain_v1"

ARGON2_OPSLIMIT: Final = nacl.pwhash.argon2id.OPSLIMIT_INTERACTIVE
ARGON2_MEMLIMIT: Final = nacl.pwhash.argon2id.MEMLIMIT_INTERACTIVE
ARGON2_SALT_BYTES: Final = nacl.pwhash.argon2id.SALTBYTES


class Entropy(Protocol):
    """Where keys and nonces come from."""

    def random_bytes(self, n: int) -> bytes: ...


class SystemEntropy:
    """The operating system's CSPRNG. The only production source of randomness."""

    def random_bytes(self, n: int) -> bytes:
        return os.urandom(n)


class SeededEntropy:
    """Deterministic bytes from a seed, for the simulator and tests. Never use it for real keys."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def random_bytes(self, n: int) -> bytes:
        return self._rng.randbytes(n)


# -- signatures ----------------------------------------------------------------------------------------------------


class SigningKey:
    """An Ed25519 key pair, made from a 32-byte seed (kept in the keychain, never in assets or logs)."""

    __slots__ = ("_key", "public_key")

    def __init__(self, seed: bytes) -> None:
        if len(seed) != 32:
            raise GamlError("an Ed25519 seed is 32 bytes")
        self._key = nacl.signing.SigningKey(seed)
        self.public_key: bytes = bytes(self._key.verify_key)

    @classmethod
    def generate(cls, entropy: Entropy) -> SigningKey:
        return cls(entropy.random_bytes(32))

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message).signature

    def __repr__(self) -> str:  # never print key material
        return f"SigningKey(public={self.public_key.hex()[:16]}…)"


def verify(public_key: bytes, message: bytes, signature: bytes) -> None:
    """Raise :class:`BadSignature` unless ``signature`` is ``public_key``'s signature of ``message``."""
    if len(public_key) != 32 or len(signature) != 64:
        raise BadSignature("malformed Ed25519 key or signature")
    try:
        nacl.signing.VerifyKey(public_key).verify(message, signature)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, ValueError) as e:
        raise BadSignature("signature does not verify") from e


# -- sealing -------------------------------------------------------------------------------------------------------


def seal(key: bytes, plaintext: bytes, aad: bytes, entropy: Entropy) -> bytes:
    """Encrypt and authenticate ``plaintext`` under ``key``, binding ``aad``: format byte, nonce, ciphertext+tag."""
    if len(key) != KEY_BYTES:
        raise GamlError("a sealing key is 32 bytes")
    nonce = entropy.random_bytes(NONCE_BYTES)
    ct = _sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, aad, nonce, key)
    return SEAL_FORMAT + nonce + ct


def open_sealed(key: bytes, blob: bytes, aad: bytes) -> bytes:
    """Inverse of :func:`seal`. Raises :class:`DecryptionFailed` on a wrong key, wrong ``aad`` or altered bytes."""
    if len(blob) < SEAL_OVERHEAD or blob[:1] != SEAL_FORMAT:
        raise DecryptionFailed("not a sealed GAML blob (bad format byte or too short)")
    nonce, ct = blob[1 : 1 + NONCE_BYTES], blob[1 + NONCE_BYTES :]
    try:
        return bytes(_sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(ct, aad, nonce, key))
    except nacl.exceptions.CryptoError as e:
        raise DecryptionFailed("authentication failed: wrong key, wrong context, or altered bytes") from e


# -- derivation ----------------------------------------------------------------------------------------------------


def derive_key(secret: bytes, tag: bytes, context: bytes = b"") -> bytes:
    """A 32-byte subkey of ``secret`` for one purpose (``tag``) and context, by HKDF-SHA256."""
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=tag, info=context).derive(secret)


def keyed_hash(key: bytes, data: bytes, size: int = 16) -> bytes:
    """A keyed BLAKE2b digest: an identifier that reveals nothing about ``data`` without ``key``."""
    return hashlib.blake2b(data, digest_size=size, key=key).digest()


def passphrase_key(
    passphrase: bytes, salt: bytes, opslimit: int = ARGON2_OPSLIMIT, memlimit: int = ARGON2_MEMLIMIT
) -> bytes:
    """A 32-byte key stretched from a passphrase by Argon2id."""
    if len(salt) != ARGON2_SALT_BYTES:
        raise GamlError(f"an Argon2id salt is {ARGON2_SALT_BYTES} bytes")
    return bytes(nacl.pwhash.argon2id.kdf(KEY_BYTES, passphrase, salt, opslimit=opslimit, memlimit=memlimit))


class IdCipher:
    """A keyed permutation of 16-byte ids (AES-256 on exactly one block), for storage keys.

    Asset ids are hashes of content, so a store keyed by them would let anyone holding its files confirm a guess
    ("is the fact X stored here?"). Storage keys are these permuted ids instead: without the key they are random
    16-byte strings; with it they map back to the id, so indexes need not store the id in the clear.
    """

    __slots__ = ("_dec", "_enc")

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise GamlError("an id cipher key is 32 bytes")
        cipher = Cipher(algorithms.AES(key), modes.ECB())  # one block per call: a pseudorandom permutation
        self._enc = cipher.encryptor()
        self._dec = cipher.decryptor()

    def encrypt(self, block: bytes) -> bytes:
        if len(block) != 16:
            raise GamlError("ids are 16 bytes")
        return self._enc.update(block)

    def decrypt(self, block: bytes) -> bytes:
        if len(block) != 16:
            raise GamlError("storage ids are 16 bytes")
        return self._dec.update(block)

    def __repr__(self) -> str:
        return "IdCipher(…)"
