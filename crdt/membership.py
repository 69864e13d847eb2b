"""Who belongs to a replication boundary, and how its members get the group keys: the signed roster.

A **boundary** is a replication group (a user's ``devices``, an enterprise ``subnet``, a ``tenant``'s nodes) with an
admin Ed25519 key: the owner's for devices, the subnet or tenant admin's otherwise. Its **roster** is the certificate
of membership, signed by that key: the boundary's descriptor, an epoch, a version, the members (node id = the node's
Ed25519 public key in hex, role ``member`` or ``relay``), and, for each ``member``, the group key of every epoch so far,
boxed to that node's identity (:func:`policy.crypto.box_seal`, bound to the boundary, the epoch and the node). A relay
is listed, so peers will sync with it, but holds no key: it stores and forwards ciphertext.

- Adding a node: version + 1, same epoch (it receives every key so far, so it can read the history).
- Removing a node: version + 1, epoch + 1, a fresh group key boxed only to the remaining members. Revocation is
  forward-only: what the removed node already held stays readable to it, nothing written after is.

Peers exchange rosters and adopt the newer version of the same boundary (:meth:`Roster.newer_than`), so membership
spreads with the data, and no peer can forge one: :meth:`Roster.decode` checks the admin's signature over the canonical
encoding (canonical JSON; the decoder accepts only the one encoding a roster has). Everything here is pure: time is
``now``, every key and nonce comes from ``entropy``.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import types
from collections.abc import Mapping
from typing import Any, Final

import orjson

from gaml.crdt.errors import BadRoster, RosterRefused
from gaml.policy import crypto
from gaml.policy.errors import BadSignature, DecryptionFailed, InvalidInput
from gaml.policy.model import canonical_encode
from gaml.policy.replication import KINDS, SIGNED_KINDS

ROLES: Final = ("member", "relay")
MEMBER: Final = "member"
RELAY: Final = "relay"

ROSTER_FORMAT: Final = "gaml/roster/1"  # the "format" field of every roster
ROSTER_SIGN_TAG: Final = b"gaml/roster/1\n"  # the admin signs this tag followed by the canonical roster body
KEYS_AAD_TAG: Final = b"gaml/roster-keys/1"  # box aad: tag | boundary id | epoch (u32 BE) | node public key
ROUTE_TAG: Final = b"gaml/route"

BOUNDARY_ID_BYTES: Final = 16
GROUP_KEY_BYTES: Final = crypto.KEY_BYTES
FIRST_EPOCH: Final = 1
FIRST_VERSION: Final = 1
MAX_EPOCH: Final = 2**32 - 1  # an object carries its epoch as a u32
MAX_TEXT_CHARS: Final = 256  # a boundary's name or label
MAX_MEMBERS: Final = 4096
MAX_ROSTER_BYTES: Final = 4 << 20

_NODE_RE: Final = re.compile(r"^[0-9a-f]{64}$")
_HEX_RE: Final = re.compile(r"^(?:[0-9a-f]{2})*$")
_FIELDS: Final = frozenset({"format", "boundary", "epoch", "version", "issued_at", "members", "sealed", "signature"})
_BOUNDARY_FIELDS: Final = frozenset({"id", "kind", "name", "label", "admin"})
_MEMBER_FIELDS: Final = frozenset({"node", "role"})


def _check_int(value: object, what: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise RosterRefused(f"{what} is an integer from {low} to {high}, got {value!r}")
    return value


def _check_text(value: object, what: str, *, empty: bool) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT_CHARS or (not empty and not value):
        raise RosterRefused(f"{what} is a string of {0 if empty else 1} to {MAX_TEXT_CHARS} characters, got {value!r}")
    return value


def check_node(node: object) -> str:
    """Return ``node`` if it is a node id (64 lower-case hex characters: an Ed25519 public key); else refuse."""
    if not isinstance(node, str) or not _NODE_RE.match(node):
        raise RosterRefused(f"a node id is 64 lower-case hex characters (an Ed25519 public key), got {node!r}")
    return node


@dataclasses.dataclass(frozen=True)
class Boundary:
    """A replication group: its random id, kind, display name, label (owner or tenant) and admin public key."""

    id: bytes
    kind: str
    name: str
    label: str
    admin: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.id, bytes) or len(self.id) != BOUNDARY_ID_BYTES:
            raise RosterRefused(f"a boundary id is {BOUNDARY_ID_BYTES} bytes")
        if self.kind not in KINDS:
            raise RosterRefused(f"a boundary's kind is one of {', '.join(KINDS)}, got {self.kind!r}")
        _check_text(self.name, "a boundary's name", empty=False)
        _check_text(self.label, "a boundary's label", empty=True)
        if not isinstance(self.admin, bytes) or len(self.admin) != 32:
            raise RosterRefused("a boundary's admin key is a 32-byte Ed25519 public key")

    @property
    def route(self) -> bytes:
        """The boundary's name on the wire (16 bytes): opaque to anyone who does not know its id, and stable."""
        return crypto.keyed_hash(self.id, ROUTE_TAG)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id.hex(),
            "kind": self.kind,
            "name": self.name,
            "label": self.label,
            "admin": self.admin.hex(),
        }


@dataclasses.dataclass(frozen=True)
class Member:
    """A node listed in a roster: ``member`` (holds the group keys, may write) or ``relay`` (stores and forwards).

    ``since``: when the admin admitted it (the ``issued_at`` of the roster version that added it, microseconds; 0 in
    rosters issued before admission times were kept, and then not encoded). Consensus weighs a member by how long it
    has been admitted and which members were admitted together (:mod:`node.core.consensus`)."""

    node: str
    role: str
    since: int = 0

    def __post_init__(self) -> None:
        check_node(self.node)
        if self.role not in ROLES:
            raise RosterRefused(f"a role is one of {', '.join(ROLES)}, got {self.role!r}")
        _check_int(self.since, "a member's since", 0, 2**63 - 1)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node, "role": self.role}
        if self.since:
            out["since"] = self.since
        return out


@dataclasses.dataclass(frozen=True)
class Roster:
    """One signed version of a boundary's membership. Build it with :func:`create`, :func:`add`, :func:`remove`,
    or :meth:`decode` (which verifies the signature); the constructor checks the structure only.

    ``sealed`` maps each ``member`` (never a relay) to its box of the JSON ``{epoch: key hex}`` of every epoch.
    """

    boundary: Boundary
    epoch: int
    version: int
    members: tuple[Member, ...]
    sealed: Mapping[str, bytes]
    issued_at: int
    signature: bytes

    def __post_init__(self) -> None:
        _check_int(self.epoch, "an epoch", FIRST_EPOCH, MAX_EPOCH)
        _check_int(self.version, "a version", FIRST_VERSION, 2**63 - 1)
        _check_int(self.issued_at, "issued_at", 0, 2**63 - 1)
        if not isinstance(self.members, tuple) or not all(isinstance(m, Member) for m in self.members):
            raise RosterRefused("a roster's members are a tuple of Member")
        nodes = [m.node for m in self.members]
        if not 1 <= len(nodes) <= MAX_MEMBERS:
            raise RosterRefused(f"a roster lists 1 to {MAX_MEMBERS} nodes, got {len(nodes)}")
        if any(a >= b for a, b in itertools.pairwise(nodes)):
            raise RosterRefused("a roster's members are sorted by node id, each once")
        keyed = {m.node for m in self.members if m.role == MEMBER}
        if not keyed:
            raise RosterRefused("a roster has at least one member (a relay cannot hold the group keys)")
        if set(self.sealed) != keyed or not all(isinstance(b, bytes) for b in self.sealed.values()):
            raise RosterRefused("a roster seals the keys to every member and to no one else")
        if not isinstance(self.signature, bytes):
            raise RosterRefused("a roster's signature is bytes")
        if self.boundary.kind not in SIGNED_KINDS:
            raise RosterRefused(f"a {self.boundary.kind} boundary has no signed roster (crdt/swarm.py)")
        object.__setattr__(self, "sealed", types.MappingProxyType(dict(sorted(self.sealed.items()))))

    # -- reading ------------------------------------------------------------------------------------------------------

    def role(self, node: str) -> str | None:
        """``"member"``, ``"relay"``, or None if ``node`` is not in this roster."""
        for m in self.members:
            if m.node == node:
                return m.role
        return None

    def is_member(self, node: str) -> bool:
        """Whether ``node`` is listed with the role ``member`` (holds the keys, may write). A relay is not."""
        return self.role(node) == MEMBER

    def newer_than(self, other: Roster) -> bool:
        """Whether this roster supersedes ``other``: the same boundary (every field of it) and a higher version."""
        return self.boundary == other.boundary and self.version > other.version

    def keys_for(self, identity: crypto.SigningKey) -> dict[int, bytes]:
        """The group key of every epoch, opened with ``identity``.

        :class:`DecryptionFailed` unless ``identity`` is a ``member`` of this roster (a relay, a removed node or an
        outsider has no box that opens).
        """
        node = identity.public_key.hex()
        blob = self.sealed.get(node)
        if blob is None:
            raise DecryptionFailed(f"node {node[:16]}… holds no group key in this roster of {self.boundary.name!r}")
        data = crypto.box_open(identity, blob, _keys_aad(self.boundary, self.epoch, node))
        try:
            parsed = orjson.loads(data)
            keys = {int(e): bytes.fromhex(k) for e, k in parsed.items()}
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
            raise DecryptionFailed("the boxed group keys are malformed") from None
        if sorted(keys) != list(range(FIRST_EPOCH, self.epoch + 1)) or any(
            len(k) != GROUP_KEY_BYTES for k in keys.values()
        ):
            raise DecryptionFailed(f"the boxed group keys are not the {self.epoch} keys of epochs 1 to {self.epoch}")
        return dict(sorted(keys.items()))

    # -- encoding -----------------------------------------------------------------------------------------------------

    def _body(self) -> dict[str, Any]:
        return {
            "format": ROSTER_FORMAT,
            "boundary": self.boundary.as_json(),
            "epoch": self.epoch,
            "version": self.version,
            "issued_at": self.issued_at,
            "members": [m.as_json() for m in self.members],
            "sealed": {node: blob.hex() for node, blob in self.sealed.items()},
        }

    def signed_bytes(self) -> bytes:
        """What the admin signs: :data:`ROSTER_SIGN_TAG` and the canonical JSON of everything but the signature."""
        return ROSTER_SIGN_TAG + canonical_encode(self._body())

    def encode(self) -> bytes:
        """The roster as canonical JSON (UTF-8, sorted keys, bytes in lower-case hex), signature included."""
        return canonical_encode({**self._body(), "signature": self.signature.hex()})

    @classmethod
    def decode(cls, data: bytes) -> Roster:
        """The roster in ``data``, its admin signature verified. :class:`BadRoster` on anything wrong."""
        if not isinstance(data, bytes) or len(data) > MAX_ROSTER_BYTES:
            raise BadRoster(f"a roster is at most {MAX_ROSTER_BYTES} bytes")
        try:
            roster = _parse(orjson.loads(data))
        except orjson.JSONDecodeError:
            raise BadRoster("a roster is JSON text") from None
        except RosterRefused as e:
            raise BadRoster(f"malformed roster: {e}") from None
        if roster.encode() != data:
            raise BadRoster("the roster is not in its canonical encoding")
        try:
            crypto.verify(roster.boundary.admin, roster.signed_bytes(), roster.signature)
        except BadSignature:
            raise BadRoster(f"the roster of {roster.boundary.name!r} is not signed by its admin key") from None
        return roster


def _hex(value: object, what: str, size: int | None = None) -> bytes:
    if not isinstance(value, str) or not _HEX_RE.match(value) or (size is not None and len(value) != 2 * size):
        raise RosterRefused(f"{what} is {'' if size is None else f'{size} bytes in '}lower-case hex")
    return bytes.fromhex(value)


def _fields(value: object, names: frozenset[str], what: str) -> dict[str, Any]:
    if not isinstance(value, dict) or set(value) != names:
        raise RosterRefused(f"{what} is an object with the fields {', '.join(sorted(names))}")
    return value


def _parse(value: object) -> Roster:
    """A :class:`Roster` from parsed JSON; :class:`RosterRefused` if it does not have a roster's shape."""
    d = _fields(value, _FIELDS, "a roster")
    if d["format"] != ROSTER_FORMAT:
        raise RosterRefused(f"a roster's format is {ROSTER_FORMAT!r}, got {d['format']!r}")
    b = _fields(d["boundary"], _BOUNDARY_FIELDS, "a roster's boundary")
    boundary = Boundary(
        id=_hex(b["id"], "a boundary id", BOUNDARY_ID_BYTES),
        kind=b["kind"],
        name=b["name"],
        label=b["label"],
        admin=_hex(b["admin"], "an admin key", 32),
    )
    if not isinstance(d["members"], list) or len(d["members"]) > MAX_MEMBERS:
        raise RosterRefused(f"a roster's members are a list of at most {MAX_MEMBERS}")
    members = []
    for m in d["members"]:
        names = _MEMBER_FIELDS | {"since"} if isinstance(m, dict) and "since" in m else _MEMBER_FIELDS
        fields = _fields(m, names, "a member")
        since = fields.get("since", 0)
        if "since" in fields and (not isinstance(since, int) or isinstance(since, bool) or since < 1):
            raise RosterRefused("a member's since is a positive integer (absent when unknown)")
        members.append(Member(node=fields["node"], role=fields["role"], since=since))
    if not isinstance(d["sealed"], dict):
        raise RosterRefused("a roster's sealed keys are an object")
    sealed = {check_node(node): _hex(blob, "a sealed key") for node, blob in d["sealed"].items()}
    return Roster(
        boundary=boundary,
        epoch=d["epoch"],
        version=d["version"],
        members=tuple(members),
        sealed=sealed,
        issued_at=d["issued_at"],
        signature=_hex(d["signature"], "a signature", 64),
    )


# -- changes (by the admin) ----------------------------------------------------------------------------------------


def _keys_aad(boundary: Boundary, epoch: int, node: str) -> bytes:
    return KEYS_AAD_TAG + boundary.id + epoch.to_bytes(4, "big") + bytes.fromhex(node)


def _check_admin(boundary: Boundary, admin: crypto.SigningKey) -> None:
    if admin.public_key != boundary.admin:
        raise RosterRefused(f"this key is not the admin key of the boundary {boundary.name!r}")


def _check_new_node(node: str, role: str) -> None:
    check_node(node)
    if role not in ROLES:
        raise RosterRefused(f"a role is one of {', '.join(ROLES)}, got {role!r}")
    try:
        crypto.x25519_public(bytes.fromhex(node))
    except InvalidInput:
        raise RosterRefused(f"the node id {node[:16]}… is not an Ed25519 public key") from None


def _check_keys(keys: Mapping[int, bytes], epoch: int) -> dict[int, bytes]:
    if sorted(keys) != list(range(FIRST_EPOCH, epoch + 1)):
        raise RosterRefused(
            f"give the group key of every epoch from {FIRST_EPOCH} to {epoch}, got epochs {sorted(keys)}"
        )
    if not all(isinstance(k, bytes) and len(k) == GROUP_KEY_BYTES for k in keys.values()):
        raise RosterRefused(f"a group key is {GROUP_KEY_BYTES} bytes")
    return dict(sorted(keys.items()))


def _issue(
    boundary: Boundary,
    epoch: int,
    version: int,
    members: list[Member],
    keys: dict[int, bytes],
    admin: crypto.SigningKey,
    now: int,
    entropy: crypto.Entropy,
    reuse: Mapping[str, bytes] | None = None,
) -> Roster:
    """Box the keys to every member (reusing the boxes in ``reuse``: same epoch, same keys) and sign."""
    _check_int(now, "now", 0, 2**63 - 1)
    members = sorted(members, key=lambda m: m.node)
    plain = canonical_encode({str(e): k.hex() for e, k in keys.items()})
    sealed = {}
    for m in members:
        if m.role != MEMBER:
            continue
        old = None if reuse is None else reuse.get(m.node)
        aad = _keys_aad(boundary, epoch, m.node)
        sealed[m.node] = old if old is not None else crypto.box_seal(bytes.fromhex(m.node), plain, aad, entropy)
    unsigned = Roster(boundary, epoch, version, tuple(members), sealed, now, b"")
    return dataclasses.replace(unsigned, signature=admin.sign(unsigned.signed_bytes()))


def create(
    kind: str, name: str, label: str, admin: crypto.SigningKey, first_node: str, now: int, entropy: crypto.Entropy
) -> tuple[Boundary, Roster, bytes]:
    """A new boundary administered by ``admin``, with ``first_node`` as its one member: (boundary, roster, group key).

    The boundary id and the key of epoch 1 come from ``entropy``. :class:`RosterRefused` on an unknown kind, a bad
    name or label, or a node id that is not an Ed25519 public key.
    """
    _check_new_node(first_node, MEMBER)
    if kind not in SIGNED_KINDS:
        raise RosterRefused(f"a signed boundary's kind is one of {', '.join(SIGNED_KINDS)}, got {kind!r}")
    boundary = Boundary(entropy.random_bytes(BOUNDARY_ID_BYTES), kind, name, label, admin.public_key)
    key = entropy.random_bytes(GROUP_KEY_BYTES)
    first = [Member(first_node, MEMBER, now)]
    roster = _issue(boundary, FIRST_EPOCH, FIRST_VERSION, first, {FIRST_EPOCH: key}, admin, now, entropy)
    return boundary, roster, key


def add(
    roster: Roster,
    node: str,
    role: str,
    admin: crypto.SigningKey,
    keys: Mapping[int, bytes],
    now: int,
    entropy: crypto.Entropy,
) -> Roster:
    """The next version of ``roster`` with ``node`` added as ``role``; a ``member`` receives every epoch's key.

    ``keys`` is the group key of every epoch so far (the admin's copy). :class:`RosterRefused` if ``admin`` is not
    the boundary's admin, ``node`` is already listed or is not a node id, the role is unknown, or ``keys`` is not one
    32-byte key per epoch.
    """
    _check_admin(roster.boundary, admin)
    _check_new_node(node, role)
    if roster.role(node) is not None:
        raise RosterRefused(f"node {node[:16]}… is already in the roster of {roster.boundary.name!r}; remove it first")
    all_keys = _check_keys(keys, roster.epoch)
    members = [*roster.members, Member(node, role, now)]
    b, epoch, version = roster.boundary, roster.epoch, roster.version + 1
    return _issue(b, epoch, version, members, all_keys, admin, now, entropy, reuse=roster.sealed)


def remove(
    roster: Roster, node: str, admin: crypto.SigningKey, keys: Mapping[int, bytes], now: int, entropy: crypto.Entropy
) -> tuple[Roster, bytes]:
    """The next version of ``roster`` without ``node``, in a new epoch: (roster, the new epoch's group key).

    The new key comes from ``entropy`` and is boxed, with every earlier key, only to the remaining members.
    :class:`RosterRefused` if ``admin`` is not the boundary's admin, ``node`` is not listed, it is the last
    ``member``, or ``keys`` is not one 32-byte key per epoch so far.
    """
    _check_admin(roster.boundary, admin)
    check_node(node)
    if roster.role(node) is None:
        raise RosterRefused(f"node {node[:16]}… is not in the roster of {roster.boundary.name!r}")
    members = [m for m in roster.members if m.node != node]
    if not any(m.role == MEMBER for m in members):
        raise RosterRefused(f"node {node[:16]}… is the last member of {roster.boundary.name!r}; it cannot be removed")
    if roster.epoch >= MAX_EPOCH:
        raise RosterRefused("the boundary has used every epoch; make a new boundary")
    all_keys = _check_keys(keys, roster.epoch)
    new_key = entropy.random_bytes(GROUP_KEY_BYTES)
    all_keys[roster.epoch + 1] = new_key
    new = _issue(roster.boundary, roster.epoch + 1, roster.version + 1, members, all_keys, admin, now, entropy)
    return new, new_key
