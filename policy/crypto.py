"""All of GAML's cryptography, in the one module allowed to import the crypto libraries.

- Signatures: Ed25519 (PyNaCl) over canonical encodings.
- Sealing: XChaCha20-Poly1305 (IETF AEAD, 24-byte random nonce) with associated data that binds what the bytes are
  (asset id, partition, key epoch), so a sealed blob moved under another id or partition fails to open.
- Sealed streams (large blobs: index snapshots): ChaCha20-Poly1305 over 4 MiB chunks under a key of the stream's
  own (the STREAM construction), sealed and opened a chunk at a time, so a blob of gigabytes is never copied whole.
- Boxes (sealing to a node): X25519 (the recipient's Ed25519 node key, converted) with an ephemeral key, HKDF-SHA256,
  then the same AEAD. A node needs no second key pair to receive a group key: its node identity is enough.
- Digests: SHA-256, for content addresses (replicated objects are named by the digest of their bytes).
- Key derivation: HKDF-SHA256 (cryptography) under named, versioned tags; keyed BLAKE2b for blind identifiers.
- Passphrases: Argon2id (libsodium via PyNaCl).
- Certificates for the daemon's mutual TLS: ECDSA P-256 keys and X.509 certificates (cryptography), signed
  deterministically (RFC 6979); the node CA issues server and client certificates, and a client's principal id rides
  in a ``gaml:principal:<id>`` SAN URI.

Nonces and keys come from an :class:`Entropy` passed in by the caller, so that the core stays deterministic in the
simulator; :class:`SystemEntropy` (``os.urandom``) is the production source.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import io
import ipaddress
import os
import random
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Final, Protocol

import nacl.bindings as _sodium
import nacl.exceptions
import nacl.pwhash
import nacl.signing
from cryptography import x509
from cryptography.exceptions import InvalidSignature, InvalidTag, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gaml.policy.errors import BadSignature, DecryptionFailed, GamlError, InvalidInput, KeychainError

if TYPE_CHECKING:
    from typing_extensions import Buffer

SEAL_FORMAT: Final = b"\x01"  # format byte of a sealed blob: 0x01 = XChaCha20-Poly1305, 24-byte nonce
NONCE_BYTES: Final = 24
KEY_BYTES: Final = 32
TAG_BYTES: Final = 16
SEAL_OVERHEAD: Final = 1 + NONCE_BYTES + TAG_BYTES
STREAM_MAGIC: Final = b"GSS1"  # a sealed stream: chunks of ChaCha20-Poly1305 under a key of the stream's own (STREAM)
STREAM_HEAD_BYTES: Final = len(STREAM_MAGIC) + NONCE_BYTES + 4  # magic, salt, chunk size
STREAM_CHUNK: Final = 1 << 22  # plaintext bytes a chunk: 4 MiB
STREAM_CHUNK_MAX: Final = 1 << 26
BOX_FORMAT: Final = b"\x02"  # format byte of a box: 0x02 = ephemeral X25519 + HKDF-SHA256 + XChaCha20-Poly1305
X25519_BYTES: Final = 32
BOX_OVERHEAD: Final = 1 + X25519_BYTES + NONCE_BYTES + TAG_BYTES
DIGEST_BYTES: Final = 32

# Named, versioned derivation tags (never reuse a tag for another purpose).
META_KEY_TAG: Final = b"gaml_meta_key_v1"
BLIND_INDEX_TAG: Final = b"gaml_blind_index_v1"
PARTITION_ID_TAG: Final = b"gaml_partition_id_v1"
STORAGE_ID_TAG: Final = b"gaml_storage_id_v1"
KEYCHAIN_AAD: Final = b"gaml_keychain_v1"
STREAM_KEY_TAG: Final = b"gaml_sealed_stream_v1"
# HKDF salt of a box's key (the info is eph_pub | recipient X25519 public key). Not named *_TAG: the tags are pinned in
# tests/vectors/crypto.json; this one is pinned by test_crypto.py's box vector until the vectors are regenerated.
BOX_KDF_SALT: Final = b"gaml/box/1"

ARGON2_OPSLIMIT: Final = nacl.pwhash.argon2id.OPSLIMIT_INTERACTIVE
ARGON2_MEMLIMIT: Final = nacl.pwhash.argon2id.MEMLIMIT_INTERACTIVE
ARGON2_SALT_BYTES: Final = nacl.pwhash.argon2id.SALTBYTES
# The Argon2id settings a keychain header may ask for (checked before any derivation): libsodium's floor, and at most
# its "moderate" level (about a second and 256 MiB), so a tampered header can neither crash nor stall a command.
ARGON2_OPSLIMIT_MIN: Final = nacl.pwhash.argon2id.OPSLIMIT_MIN
ARGON2_OPSLIMIT_MAX: Final = nacl.pwhash.argon2id.OPSLIMIT_MODERATE
ARGON2_MEMLIMIT_MIN: Final = nacl.pwhash.argon2id.MEMLIMIT_MIN
ARGON2_MEMLIMIT_MAX: Final = nacl.pwhash.argon2id.MEMLIMIT_MODERATE


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

    def _x25519_secret(self) -> bytes:
        """The X25519 secret of this identity (RFC 7748 form of the Ed25519 seed), for :func:`box_open` only."""
        return bytes(self._key.to_curve25519_private_key())

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


# -- sealed streams: large blobs sealed and opened a chunk at a time ----------------------------------------------


def seal_stream(
    key: bytes, parts: Iterable[Buffer], aad: bytes, entropy: Entropy, chunk: int = STREAM_CHUNK
) -> Iterator[memoryview]:
    """Seal the concatenation of ``parts`` as a stream of chunks, yielded for the caller to write in turn.

    The STREAM construction (Hoang et al., as in age): a header (:data:`STREAM_MAGIC`, a random 24-byte salt, the
    chunk size) and chunks of ``chunk`` plaintext bytes, each sealed with ChaCha20-Poly1305 under a key of this
    stream's own (HKDF of ``key`` under :data:`STREAM_KEY_TAG` and the salt), its nonce the chunk's number with a
    flag on the last, its associated data the header and ``aad``: chunks cannot be dropped, reordered, moved to
    another stream or cut off at a chunk's end. A part is read in place, never joined with the others, so a
    snapshot of gigabytes needs one chunk of memory beside it. Each yielded view is reused for the next chunk: write
    it (or copy it) before asking for the next."""
    if len(key) != KEY_BYTES:
        raise GamlError("a sealing key is 32 bytes")
    if not 0 < chunk <= STREAM_CHUNK_MAX:
        raise GamlError(f"a stream's chunk is 1 to {STREAM_CHUNK_MAX} bytes")
    salt = entropy.random_bytes(NONCE_BYTES)
    head = STREAM_MAGIC + salt + struct.pack(">I", chunk)
    yield memoryview(head)
    aead = ChaCha20Poly1305(derive_key(key, STREAM_KEY_TAG, salt))
    bound = head + aad
    out = bytearray(chunk + TAG_BYTES)
    scratch = bytearray(chunk)
    fill = 0
    held: memoryview | None = None  # a whole chunk not yet sealed: whether it is the last is known once more comes
    n = 0
    for part in parts:
        mv = memoryview(part).cast("B")
        while mv:
            if held is not None:
                yield _seal_chunk(aead, n, False, held, bound, out)
                n, held = n + 1, None
            if fill == 0 and len(mv) >= chunk:
                held, mv = mv[:chunk], mv[chunk:]  # in place: no copy of a part's whole chunks
                continue
            take = min(chunk - fill, len(mv))
            scratch[fill : fill + take] = mv[:take]
            fill, mv = fill + take, mv[take:]
            if fill == chunk:
                held, fill = memoryview(scratch), 0
    if held is not None:
        yield _seal_chunk(aead, n, True, held, bound, out)
    else:
        yield _seal_chunk(aead, n, True, memoryview(scratch)[:fill], bound, out)


def _stream_nonce(n: int, last: bool) -> bytes:
    return n.to_bytes(11, "big") + (b"\x01" if last else b"\x00")


def _seal_chunk(aead: ChaCha20Poly1305, n: int, last: bool, data: memoryview, aad: bytes, out: bytearray) -> memoryview:
    view = memoryview(out)[: len(data) + TAG_BYTES]
    aead.encrypt_into(_stream_nonce(n, last), data, aad, view)
    return view


class StreamReader:
    """A sealed stream (:func:`seal_stream`) opened a chunk at a time from a binary file: :meth:`readinto` fills
    buffers in order, :meth:`end` checks that the stream ended there. Raises :class:`DecryptionFailed` on a wrong key,
    wrong ``aad``, altered, reordered, truncated or extended bytes; nothing read before such an error can be trusted
    (the caller drops it)."""

    def __init__(self, key: bytes, f: io.BufferedIOBase, aad: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise GamlError("a sealing key is 32 bytes")
        head = f.read(STREAM_HEAD_BYTES)
        if len(head) != STREAM_HEAD_BYTES or head[: len(STREAM_MAGIC)] != STREAM_MAGIC:
            raise DecryptionFailed("not a sealed GAML stream (bad magic or too short)")
        salt = head[len(STREAM_MAGIC) : len(STREAM_MAGIC) + NONCE_BYTES]
        (self._chunk,) = struct.unpack(">I", head[-4:])
        if not 0 < self._chunk <= STREAM_CHUNK_MAX:
            raise DecryptionFailed(f"a sealed stream's chunk size is out of range ({self._chunk})")
        self._f = f
        self._aead = ChaCha20Poly1305(derive_key(key, STREAM_KEY_TAG, salt))
        self._aad = head + aad
        self._ct = bytearray(self._chunk + TAG_BYTES)
        self._pt = bytearray(self._chunk)
        self._at = self._have = 0  # the unread plaintext of the current chunk: self._pt[at:have]
        self._n = 0
        self._ended = False  # the last chunk has been opened

    def _next_chunk(self, into: memoryview | None) -> int:
        """Open the next chunk into ``into`` (when it is at least a whole chunk) or the reader's own buffer."""
        if self._ended:
            raise DecryptionFailed("the sealed stream ends here: fewer bytes than its reader asked for")
        got = 0
        while got < len(self._ct):  # a file may give fewer bytes than asked before its end
            n = self._f.readinto(memoryview(self._ct)[got:])
            if not n:
                break
            got += n
        if got < TAG_BYTES:
            raise DecryptionFailed("the sealed stream is truncated")
        size = got - TAG_BYTES
        dest = into[:size] if into is not None and len(into) >= size else memoryview(self._pt)[:size]
        ct = memoryview(self._ct)[:got]
        # A chunk shorter than the chunk size can only be the last; a whole one is the last if its tag says so.
        for last in (False, True) if got == len(self._ct) else (True,):
            try:
                self._aead.decrypt_into(_stream_nonce(self._n, last), ct, self._aad, dest)
            except InvalidTag:
                continue
            self._n += 1
            self._ended = last
            return size
        raise DecryptionFailed("a chunk of the sealed stream does not open: wrong key, wrong context, or altered bytes")

    def readinto(self, buf: Buffer) -> None:
        """Fill ``buf`` with the stream's next plaintext bytes (all of them, or :class:`DecryptionFailed`)."""
        out = memoryview(buf).cast("B")
        while out:
            if self._at < self._have:
                take = min(len(out), self._have - self._at)
                out[:take] = memoryview(self._pt)[self._at : self._at + take]
                self._at += take
                out = out[take:]
            elif len(out) >= self._chunk:  # room for a whole chunk: opened in place, not through the reader's buffer
                out = out[self._next_chunk(out) :]
            else:
                self._have, self._at = self._next_chunk(None), 0

    def read(self, n: int) -> bytes:
        """The stream's next ``n`` plaintext bytes."""
        buf = bytearray(n)
        self.readinto(buf)
        return bytes(buf)

    def rest(self) -> bytes:
        """The stream's plaintext from here to its end (then :meth:`end` holds)."""
        parts = [bytes(memoryview(self._pt)[self._at : self._have])]
        while not self._ended:
            parts.append(bytes(memoryview(self._pt)[: self._next_chunk(None)]))
        self._at = self._have = 0
        return b"".join(parts)

    def end(self) -> None:
        """Check that the stream ends where the reader stopped: its last chunk opened, all its bytes read, nothing
        after it in the file."""
        if self._at == self._have and not self._ended:  # a stream of whole chunks read to its end, or an empty one
            self._have, self._at = self._next_chunk(None), 0
        if self._at < self._have or not self._ended:
            raise DecryptionFailed("the sealed stream holds more bytes than its reader expected")
        if self._f.read(1):
            raise DecryptionFailed("bytes follow the sealed stream's last chunk")


def open_stream(key: bytes, blob: bytes, aad: bytes) -> bytes:
    """The whole plaintext of a sealed stream held in memory (:func:`seal_stream`'s chunks joined)."""
    reader = StreamReader(key, io.BytesIO(blob), aad)
    plaintext = reader.rest()
    reader.end()
    return plaintext


# -- boxes: sealing to a node's identity -----------------------------------------------------------------------------


def x25519_public(ed25519_public: bytes) -> bytes:
    """The X25519 public key of an Ed25519 public key (the birational map of RFC 7748 §4.1).

    :class:`InvalidInput` if ``ed25519_public`` is not 32 bytes or not a point of the curve.
    """
    if not isinstance(ed25519_public, bytes) or len(ed25519_public) != 32:
        raise InvalidInput("an Ed25519 public key is 32 bytes")
    try:
        return bytes(_sodium.crypto_sign_ed25519_pk_to_curve25519(ed25519_public))
    except nacl.exceptions.CryptoError:
        raise InvalidInput("not an Ed25519 public key (not a point of the curve)") from None


def _box_key(shared: bytes, eph_public: bytes, recipient: bytes) -> bytes:
    return derive_key(shared, BOX_KDF_SALT, eph_public + recipient)


def box_seal(recipient_ed25519_public: bytes, plaintext: bytes, aad: bytes, entropy: Entropy) -> bytes:
    """Seal ``plaintext`` so that only the holder of ``recipient_ed25519_public``'s seed can open it, binding ``aad``.

    An ephemeral X25519 key (from ``entropy``) agrees a secret with the recipient's X25519 key; HKDF-SHA256 under
    :data:`BOX_KDF_SALT`, with both public keys as info, makes the AEAD key. Anonymous (the sender is not
    authenticated): bind who may have sent it with a signature over the whole. Format: :data:`BOX_FORMAT` |
    eph_pub (32) | nonce (24) | ciphertext+tag; :data:`BOX_OVERHEAD` bytes over the plaintext.
    :class:`InvalidInput` if the recipient key is not a usable Ed25519 public key.
    """
    recipient = x25519_public(recipient_ed25519_public)
    eph_secret = entropy.random_bytes(X25519_BYTES)
    eph_public = bytes(_sodium.crypto_scalarmult_base(eph_secret))
    try:
        shared = bytes(_sodium.crypto_scalarmult(eph_secret, recipient))
    except nacl.exceptions.CryptoError:  # a low-order point: the "shared" secret would be all zeros
        raise InvalidInput("the recipient key is a point of small order; it cannot receive a box") from None
    nonce = entropy.random_bytes(NONCE_BYTES)
    key = _box_key(shared, eph_public, recipient)
    ct = _sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, aad, nonce, key)
    return BOX_FORMAT + eph_public + nonce + ct


def box_open(identity: SigningKey, blob: bytes, aad: bytes) -> bytes:
    """Inverse of :func:`box_seal` for the recipient ``identity``.

    :class:`DecryptionFailed` on anything wrong: another recipient, other ``aad``, altered or truncated bytes.
    """
    if not isinstance(blob, bytes) or len(blob) < BOX_OVERHEAD or blob[:1] != BOX_FORMAT:
        raise DecryptionFailed("not a GAML box (bad format byte or too short)")
    eph_public = blob[1 : 1 + X25519_BYTES]
    nonce = blob[1 + X25519_BYTES : 1 + X25519_BYTES + NONCE_BYTES]
    ct = blob[1 + X25519_BYTES + NONCE_BYTES :]
    secret = identity._x25519_secret()
    try:
        shared = bytes(_sodium.crypto_scalarmult(secret, eph_public))
        key = _box_key(shared, eph_public, bytes(_sodium.crypto_scalarmult_base(secret)))
        return bytes(_sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(ct, aad, nonce, key))
    except nacl.exceptions.CryptoError as e:
        raise DecryptionFailed("the box does not open: another recipient, another context, or altered bytes") from e


# -- digests -------------------------------------------------------------------------------------------------------


def digest(data: bytes) -> bytes:
    """SHA-256 of ``data`` (32 bytes): a content address, not a secret (anyone can compute it from the bytes)."""
    return hashlib.sha256(data).digest()


# -- derivation ----------------------------------------------------------------------------------------------------


def derive_key(secret: bytes, tag: bytes, context: bytes = b"") -> bytes:
    """A 32-byte subkey of ``secret`` for one purpose (``tag``) and context, by HKDF-SHA256."""
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=tag, info=context).derive(secret)


def keyed_hash(key: bytes, data: bytes, size: int = 16) -> bytes:
    """A keyed BLAKE2b digest: an identifier that reveals nothing about ``data`` without ``key``."""
    return hashlib.blake2b(data, digest_size=size, key=key).digest()


def check_argon2_limits(opslimit: object, memlimit: object) -> None:
    """:class:`KeychainError` unless both are whole numbers within the bounds above (no derivation is attempted)."""
    for name, value, low, high in (
        ("ops", opslimit, ARGON2_OPSLIMIT_MIN, ARGON2_OPSLIMIT_MAX),
        ("mem", memlimit, ARGON2_MEMLIMIT_MIN, ARGON2_MEMLIMIT_MAX),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise KeychainError(
                f"the keychain's Argon2id setting {name!r} is {value!r}, outside {low}..{high}: the header was damaged "
                "or tampered with; restore keychain.json from a copy"
            )


def passphrase_key(
    passphrase: bytes, salt: bytes, opslimit: int = ARGON2_OPSLIMIT, memlimit: int = ARGON2_MEMLIMIT
) -> bytes:
    """A 32-byte key stretched from a passphrase by Argon2id."""
    if len(salt) != ARGON2_SALT_BYTES:
        raise GamlError(f"an Argon2id salt is {ARGON2_SALT_BYTES} bytes")
    check_argon2_limits(opslimit, memlimit)
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


# -- certificates (mutual TLS of the daemon) ------------------------------------------------------------------------

PRINCIPAL_URI_PREFIX: Final = "gaml:principal:"  # SAN URI of a client certificate: gaml:principal:<principal id>
CA_CN_PREFIX: Final = "GAML node CA "
CERT_SKEW_S: Final = 300  # certificates start this long before "now", for clocks that lag the issuer's
SERIAL_BYTES: Final = 16  # 16 random bytes, top bit cleared (127 bits): a positive DER integer of at most 16 bytes
DAY_S: Final = 86_400
_CN_CHARS_MAX: Final = 64  # X.520 ub-common-name
_P256_ORDER: Final = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


@dataclasses.dataclass(frozen=True)
class CertInfo:
    """What a certificate says, as plain values (never key material).

    ``principal`` is the id in the ``gaml:principal:`` SAN URI, or the subject CN when there is none (server and CA
    certificates). ``serial_hex`` is the serial number in lowercase hex without leading zeros.
    """

    principal: str
    serial_hex: str
    not_before_s: int
    not_after_s: int
    issuer_cn: str
    is_ca: bool


def check_principal_id(principal: object) -> str:
    """Return ``principal`` if it can name a certificate's holder; raise :class:`InvalidInput` otherwise.

    As in ``policy.access.Principal``: a non-empty word without whitespace. X.509 adds: printable ASCII (the id rides in
    a URI) and at most 64 characters (the length limit of a common name).
    """
    if not isinstance(principal, str) or not principal or any(c.isspace() for c in principal):
        raise InvalidInput(f"a principal id is a non-empty word without whitespace, got {principal!r}")
    if not principal.isascii() or not principal.isprintable():
        raise InvalidInput(f"a principal id in a certificate is printable ASCII, got {principal!r}")
    if len(principal) > _CN_CHARS_MAX:
        raise InvalidInput(f"a principal id in a certificate is at most {_CN_CHARS_MAX} characters, got {principal!r}")
    return principal


def _check_period(now_s: int, days: int) -> None:
    if not isinstance(now_s, int) or isinstance(now_s, bool) or now_s < CERT_SKEW_S:
        raise InvalidInput(f"now_s is a Unix time in whole seconds, got {now_s!r}")
    if not isinstance(days, int) or isinstance(days, bool) or days < 1:
        raise InvalidInput(f"a certificate is valid for a whole number of days, at least 1, got {days!r}")


def _utc(s: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(s, tz=datetime.UTC)


def _new_key(entropy: Entropy) -> ec.EllipticCurvePrivateKey:
    # 320 random bits reduced modulo the group order: a scalar whose bias is below 2**-64.
    scalar = int.from_bytes(entropy.random_bytes(40), "big") % (_P256_ORDER - 1) + 1
    return ec.derive_private_key(scalar, ec.SECP256R1())


def _new_serial(entropy: Entropy) -> int:
    serial = int.from_bytes(entropy.random_bytes(SERIAL_BYTES), "big") >> 1
    return serial or 1  # a serial is positive (RFC 5280 §4.1.2.2)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _load_key(key_pem: bytes, what: str) -> ec.EllipticCurvePrivateKey:
    """The P-256 private key in ``key_pem``. Errors name ``what``, never the bytes."""
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise InvalidInput(f"{what} is not an unencrypted PEM private key") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        raise InvalidInput(f"{what} is not an ECDSA P-256 key")
    return key


def _load_cert(cert_pem: bytes, what: str = "the certificate") -> x509.Certificate:
    if not isinstance(cert_pem, bytes | bytearray | memoryview):
        raise InvalidInput(f"{what} must be PEM bytes, got {type(cert_pem).__name__}")
    try:
        return x509.load_pem_x509_certificate(bytes(cert_pem))
    except ValueError:
        raise InvalidInput(f"{what} is not a PEM X.509 certificate") from None


def _cn(name: x509.Name) -> str:
    attrs = name.get_attributes_for_oid(NameOID.COMMON_NAME)
    value = attrs[0].value if attrs else ""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def _extension(cert: x509.Certificate, cls: type[x509.ExtensionType]) -> x509.ExtensionType | None:
    try:
        return cert.extensions.get_extension_for_class(cls).value
    except x509.ExtensionNotFound:
        return None


def _sign(builder: x509.CertificateBuilder, key: ec.EllipticCurvePrivateKey) -> bytes:
    cert = builder.sign(key, hashes.SHA256(), ecdsa_deterministic=True)
    return cert.public_bytes(serialization.Encoding.PEM)


def make_ca(
    name: str, now_s: int, days: int = 3650, *, entropy: Entropy | None = None, key_pem: bytes | None = None
) -> tuple[bytes, bytes]:
    """A self-signed node CA: ``(key_pem, cert_pem)``, the key as unencrypted PKCS#8 PEM.

    The subject is ``CN=GAML node CA <name>``. It may sign end-entity certificates only (path length 0), from
    ``now_s - CERT_SKEW_S`` to ``now_s + days`` days. ``key_pem`` re-certifies an existing CA key instead of making a
    new one (a node whose ``init`` stopped after storing the key). Keys and serials come from ``entropy``
    (:class:`SystemEntropy` by default); the signature is deterministic, so the same entropy gives the same bytes.
    """
    _check_period(now_s, days)
    if not isinstance(name, str) or not name.strip() or not name.isprintable():
        raise InvalidInput(f"a CA name is a non-empty printable string, got {name!r}")
    if len(CA_CN_PREFIX + name) > _CN_CHARS_MAX:
        raise InvalidInput(f"a CA name is at most {_CN_CHARS_MAX - len(CA_CN_PREFIX)} characters, got {name!r}")
    entropy = entropy or SystemEntropy()
    key = _new_key(entropy) if key_pem is None else _load_key(key_pem, "the CA key")
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_CN_PREFIX + name)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(_new_serial(entropy))
        .not_valid_before(_utc(now_s - CERT_SKEW_S))
        .not_valid_after(_utc(now_s + days * DAY_S))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    return (key_pem if key_pem is not None else _key_pem(key)), _sign(builder, key)


def _host_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    if isinstance(hosts, str):
        raise InvalidInput(f"hosts is a list of host names and addresses, got the string {hosts!r}")
    names: list[x509.GeneralName] = []
    for host in hosts:
        if not isinstance(host, str) or not host or any(c.isspace() for c in host) or not host.isascii():
            raise InvalidInput(f"a host is an IP address or an ASCII DNS name, got {host!r}")
        try:
            general: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            general = x509.DNSName(host.lower().rstrip("."))
        if general not in names:
            names.append(general)
    if not names:
        raise InvalidInput("a server certificate names at least one host (an IP address or a DNS name)")
    return names


def issue_cert(
    ca_key_pem: bytes,
    ca_cert_pem: bytes,
    principal: str,
    now_s: int,
    *,
    server: bool = False,
    hosts: Sequence[str] = (),
    days: int = 365,
    entropy: Entropy | None = None,
) -> tuple[bytes, bytes, str]:
    """A new key and a certificate for it, signed by the CA: ``(key_pem, cert_pem, serial_hex)``.

    A client certificate (the default) has ``CN=<principal>``, the SAN URI ``gaml:principal:<principal>`` and the
    ``clientAuth`` usage. A server certificate (``server=True``) has ``CN=<principal>``, the IP addresses and DNS names
    of ``hosts`` as SANs, and the ``serverAuth`` usage. Either is valid from ``now_s - CERT_SKEW_S`` to ``now_s + days``
    days, but never past the CA's own end. :class:`InvalidInput` if the CA key does not match the CA certificate, or
    the CA has expired.
    """
    _check_period(now_s, days)
    check_principal_id(principal)
    ca_key = _load_key(ca_key_pem, "the CA key")
    ca = _load_cert(ca_cert_pem, "the CA certificate")
    if ca.public_key() != ca_key.public_key():
        raise InvalidInput("the CA key does not belong to the CA certificate")
    ca_end_s = int(ca.not_valid_after_utc.timestamp())
    if now_s >= ca_end_s:
        raise InvalidInput(f"the CA {_cn(ca.subject)!r} expired at Unix time {ca_end_s}; make a new CA")
    ca_ski = _extension(ca, x509.SubjectKeyIdentifier)
    aki = (
        x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski)
        if isinstance(ca_ski, x509.SubjectKeyIdentifier)
        else x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    )
    if server:
        san: list[x509.GeneralName] = _host_names(hosts)
        usage = ExtendedKeyUsageOID.SERVER_AUTH
    else:
        if hosts:
            raise InvalidInput("a client certificate names no hosts; give hosts for a server certificate only")
        san = [x509.UniformResourceIdentifier(PRINCIPAL_URI_PREFIX + principal)]
        usage = ExtendedKeyUsageOID.CLIENT_AUTH
    entropy = entropy or SystemEntropy()
    key = _new_key(entropy)
    serial = _new_serial(entropy)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, principal)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(serial)
        .not_valid_before(_utc(now_s - CERT_SKEW_S))
        .not_valid_after(_utc(min(now_s + days * DAY_S, ca_end_s)))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(aki, critical=False)
    )
    return _key_pem(key), _sign(builder, ca_key), f"{serial:x}"


def cert_info(cert_pem: bytes) -> CertInfo:
    """Read a PEM certificate (the first one, if there are several). :class:`InvalidInput` if it is not one."""
    cert = _load_cert(cert_pem)
    principal = ""
    san = _extension(cert, x509.SubjectAlternativeName)
    if isinstance(san, x509.SubjectAlternativeName):
        for uri in san.get_values_for_type(x509.UniformResourceIdentifier):
            if uri.startswith(PRINCIPAL_URI_PREFIX):
                principal = uri[len(PRINCIPAL_URI_PREFIX) :]
                break
    basic = _extension(cert, x509.BasicConstraints)
    return CertInfo(
        principal=principal or _cn(cert.subject),
        serial_hex=f"{cert.serial_number:x}",
        not_before_s=int(cert.not_valid_before_utc.timestamp()),
        not_after_s=int(cert.not_valid_after_utc.timestamp()),
        issuer_cn=_cn(cert.issuer),
        is_ca=isinstance(basic, x509.BasicConstraints) and basic.ca,
    )


def verify_issued(ca_cert_pem: bytes, cert_pem: bytes) -> None:
    """Raise :class:`BadSignature` unless the CA signed ``cert_pem`` (issuer name and signature; not the dates)."""
    ca = _load_cert(ca_cert_pem, "the CA certificate")
    cert = _load_cert(cert_pem)
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as e:
        raise BadSignature(f"the certificate was not issued by the CA {_cn(ca.subject)!r}") from e


def check_key_pair(key_pem: bytes, cert_pem: bytes) -> None:
    """Raise :class:`InvalidInput` unless ``key_pem`` is the P-256 private key of ``cert_pem``'s public key."""
    key = _load_key(key_pem, "the private key")
    if _load_cert(cert_pem).public_key() != key.public_key():
        raise InvalidInput("the private key does not belong to the certificate")
