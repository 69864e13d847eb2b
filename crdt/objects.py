"""What travels between peers: sealed, signed, content-addressed objects.

An object carries one snapshot (the Automerge save of an asset's record) or one tombstone, for one boundary::

    object    = "G1" | route (16) | epoch (u32 BE) | seal(group_key[epoch], plaintext, aad = header)
    header    = the 22 bytes before the sealed part
    plaintext = writer (32, Ed25519 public key) | signature (64) | body
    signature = the writer's signature of "gaml/object/1" | header | body
    body      = kind (1: S snapshot, T tombstone) | asset id (16 raw bytes) | data (empty for a tombstone)

Its id is the SHA-256 of its bytes. What a holder without the group key learns: the route (an opaque, stable name of
the boundary, :attr:`crdt.membership.Boundary.route`), the epoch, the size and the id. Everything else, the asset id
and the writer included, is inside the seal, so a relay stores and forwards objects it cannot read, and cannot tell
which asset an object is about. The AEAD binds the header (an object moved to another route or epoch does not open);
the signature binds the writer to the header and the body (a member cannot pass its own writing off as another's).
Whether the writer may write is the caller's question: a current ``member`` of the roster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final

from gaml.crdt.errors import BadObject
from gaml.crdt.membership import Boundary
from gaml.policy import crypto
from gaml.policy.errors import BadSignature, DecryptionFailed, InvalidInput
from gaml.policy.model import ID_RE

SNAPSHOT: Final = b"S"
TOMBSTONE: Final = b"T"
KINDS: Final = (SNAPSHOT, TOMBSTONE)

MAGIC: Final = b"G1"
SIGN_TAG: Final = b"gaml/object/1"
ROUTE_BYTES: Final = 16
HEADER_BYTES: Final = len(MAGIC) + ROUTE_BYTES + 4
WRITER_BYTES: Final = 32
SIGNATURE_BYTES: Final = 64
ASSET_ID_BYTES: Final = 16
BODY_MIN_BYTES: Final = 1 + ASSET_ID_BYTES
OVERHEAD_BYTES: Final = HEADER_BYTES + crypto.SEAL_OVERHEAD + WRITER_BYTES + SIGNATURE_BYTES + BODY_MIN_BYTES
MAX_OBJECT_BYTES: Final = 4 << 20
MAX_DATA_BYTES: Final = MAX_OBJECT_BYTES - OVERHEAD_BYTES
MAX_EPOCH: Final = 2**32 - 1


@dataclasses.dataclass(frozen=True)
class Opened:
    """An object opened and verified: its id, where it belongs, who wrote it, and what it says."""

    object_id: bytes
    route: bytes
    epoch: int
    writer: str  # hex Ed25519 public key (a node id)
    kind: bytes
    asset_id: str  # 32 lower-case hex
    data: bytes


def object_id(obj: bytes) -> bytes:
    """An object's id: the SHA-256 of its bytes (32 bytes). Anyone can compute it; it names, it does not authorize."""
    return crypto.digest(obj)


def _header(route: bytes, epoch: int) -> bytes:
    return MAGIC + route + epoch.to_bytes(4, "big")


def seal_object(
    boundary: Boundary,
    epoch: int,
    key: bytes,
    writer: crypto.SigningKey,
    kind: bytes,
    asset_id: str,
    data: bytes,
    entropy: crypto.Entropy,
) -> tuple[bytes, bytes]:
    """Seal and sign ``data`` about ``asset_id`` for a boundary: (object id, object bytes).

    ``key`` is the boundary's group key of ``epoch``. :class:`InvalidInput` on an unknown kind, a bad asset id, a
    tombstone with data, a key that is not 32 bytes, or an object over :data:`MAX_OBJECT_BYTES`.
    """
    route = boundary.route
    if not isinstance(epoch, int) or isinstance(epoch, bool) or not 0 <= epoch <= MAX_EPOCH:
        raise InvalidInput(f"an epoch is an integer from 0 to {MAX_EPOCH}, got {epoch!r}")
    if kind not in KINDS:
        raise InvalidInput(f"an object's kind is S (snapshot) or T (tombstone), got {kind!r}")
    if not isinstance(asset_id, str) or not ID_RE.match(asset_id):
        raise InvalidInput(f"an asset id is 32 lower-case hex characters, got {asset_id!r}")
    if not isinstance(data, bytes) or (kind == TOMBSTONE and data):
        raise InvalidInput("an object's data is bytes, and a tombstone's is empty")
    if len(data) > MAX_DATA_BYTES:
        raise InvalidInput(f"an object carries at most {MAX_DATA_BYTES} bytes of data, got {len(data)}")
    if not isinstance(key, bytes) or len(key) != crypto.KEY_BYTES:
        raise InvalidInput(f"a group key is {crypto.KEY_BYTES} bytes")
    header = _header(route, epoch)
    body = kind + bytes.fromhex(asset_id) + data
    signature = writer.sign(SIGN_TAG + header + body)
    obj = header + crypto.seal(key, writer.public_key + signature + body, header, entropy)
    return object_id(obj), obj


def peek(obj: bytes) -> tuple[bytes, int]:
    """(route, epoch) of an object, without a key. :class:`BadObject` if ``obj`` cannot be an object."""
    if not isinstance(obj, bytes) or not OVERHEAD_BYTES <= len(obj) <= MAX_OBJECT_BYTES:
        raise BadObject(f"an object is bytes, {OVERHEAD_BYTES} to {MAX_OBJECT_BYTES} long")
    if obj[: len(MAGIC)] != MAGIC:
        raise BadObject("not a GAML object (bad magic)")
    route = obj[len(MAGIC) : len(MAGIC) + ROUTE_BYTES]
    return route, int.from_bytes(obj[len(MAGIC) + ROUTE_BYTES : HEADER_BYTES], "big")


def open_object(obj: bytes, keys: Mapping[int, bytes], *, oid: bytes | None = None) -> Opened:
    """Open and verify an object with the group keys of its boundary (epoch -> key).

    :class:`BadObject` if it is malformed, its epoch has no key here, it was altered (the AEAD fails), or its signature
    is not its writer's. The caller then checks that the writer is a current member of the boundary. ``oid``: the
    object's id when the caller has computed it already (:func:`object_id` of these bytes): it is not hashed again.
    """
    route, epoch = peek(obj)
    key = keys.get(epoch)
    if key is None:
        raise BadObject(f"no group key for epoch {epoch}")
    header = obj[:HEADER_BYTES]
    try:
        plain = crypto.open_sealed(key, obj[HEADER_BYTES:], header)
    except DecryptionFailed:
        raise BadObject("the object does not open: another boundary's or epoch's key, or altered bytes") from None
    writer = plain[:WRITER_BYTES]
    signature = plain[WRITER_BYTES : WRITER_BYTES + SIGNATURE_BYTES]
    body = plain[WRITER_BYTES + SIGNATURE_BYTES :]
    kind, asset, data = body[:1], body[1:BODY_MIN_BYTES], body[BODY_MIN_BYTES:]
    if len(body) < BODY_MIN_BYTES or kind not in KINDS or (kind == TOMBSTONE and data):
        raise BadObject("the object's body is malformed")
    try:
        crypto.verify(writer, SIGN_TAG + header + body, signature)
    except BadSignature:
        raise BadObject("the object's signature is not its writer's") from None
    return Opened(object_id(obj) if oid is None else oid, route, epoch, writer.hex(), kind, asset.hex(), data)
