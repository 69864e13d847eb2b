"""The public swarm: an open boundary for public memory, as this node sees it. Pure.

A signed boundary (:mod:`crdt.membership`) admits nodes by its admin's signature. The public swarm has no admin:
anyone may join, so membership cannot be what protects it, and nothing in it is secret. What does protect it:

- **What enters it.** Only an asset whose privacy scope is ``public`` *and* whose replication policy asks for the
  ``public_swarm`` reaches it (:func:`policy.replication.reach`); everything else stays in its signed boundary or on
  its node. The policy decides before a byte is sealed.
- **Who wrote what.** Every object is signed by its writer, as in any boundary; in the swarm an asset may be changed
  or erased only by the nodes that wrote it first here (:meth:`node.core.replica.Replica` refuses the others), so
  joining does not let anyone rewrite or delete another node's public memory.
- **What a newcomer's claims weigh.** Joining is free, but weight is not: each node keeps its own view of the swarm
  (:class:`Swarm`), listing the peers it has met with the time it first met them (``since``). Consensus
  (:mod:`node.core.consensus`) weighs a source from that view: this node fully (it is the view's founder), every
  other from 0.05, growing by at most 0.01 a day since it was first met and only through corroborated claims, and
  identities first met within an hour of each other count as one source. So the price of an identity is **age**:
  about twenty days of being known before its claims enter a frame on their own, paid per identity and per
  observer, and a burst of fresh identities buys one voice, not many.
- **Bad frames.** A peer whose objects fail their signature or seal is struck; after :data:`STRIKES_TO_BAN` strikes
  this node stops exchanging anything with it (it is no longer a member of this node's view).

**Gossip.** Besides the sync protocol every boundary uses between connected peers, the swarm's objects travel by
gossip (libp2p gossipsub on :func:`gossip_topic`): a node publishes the objects *it* wrote, bundled
(:func:`bundles`), and every node judges a message before gossipsub delivers or forwards it (:func:`check_gossip`):
each object must open under the swarm's key, bear its writer's signature and be written by the message's publisher
(whose signature libp2p checks), and the bundle must be well formed and within :data:`GOSSIP_MAX_BYTES`. Only such
verifiably bad messages are *invalid* (they cost their forwarder its gossip score and are never forwarded); whether a
good object is wanted (a duplicate, an edit of another writer's asset) is the replica's decision, as for sync. A
peer's application score in gossip is its claim reputation here (:func:`gossip_score`): a banned peer is shut out
of gossip, a newcomer starts near zero, a peer whose claims were corroborated over time ranks highest in the mesh.

**Rendezvous.** Nodes also announce where they can be dialled on a second topic (:func:`peers_topic`,
:func:`announcement`); a node that hears of a swarm node it is not connected to may dial it, so the swarm's nodes find
each other through the peers they know, beyond bootstrap addresses and mDNS. An announcement names only its
publisher's own addresses (:func:`check_announcement`: anything else is an invalid message).

The swarm's objects are sealed like any boundary's, under a key everyone derives from the swarm's name: public
memory is not secret (DESIGN.md: encryption is for every *non-public* payload), but the format stays one format and
the transport (libp2p, Noise) still encrypts every byte on the wire.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

import orjson

from gaml.crdt.errors import BadMessage, BadObject, BadRoster, RosterRefused
from gaml.crdt.membership import BOUNDARY_ID_BYTES, MEMBER, Boundary, Member, Roster, check_node
from gaml.crdt.objects import OVERHEAD_BYTES, Opened, open_object
from gaml.policy import crypto
from gaml.policy.model import canonical_encode
from gaml.policy.replication import PUBLIC, PUBLIC_LABEL

SWARM_FORMAT: Final = "gaml/swarm/1"
DEFAULT_SWARM: Final = "gaml-public"
NO_ADMIN: Final = b"\x00" * 32  # a swarm has no admin key
STRIKES_TO_BAN: Final = 3
PEERS_FORMAT: Final = "gaml/swarm-peers/1"
MAX_ANNOUNCED: Final = 8  # addresses in one announcement
MAX_ADDR_CHARS: Final = 256
GOSSIP_MAGIC: Final = b"GS1\n"
GOSSIP_MAX_BYTES: Final = 512 << 10  # a bundle: at most crdt.p2p.GOSSIP_MAX_BYTES (a test holds them equal)
GOSSIP_MAX_OBJECTS: Final = 64
GOSSIP_REPUTATION: Final = 10.0  # the gossip score of a full reputation (a newcomer's 0.05 gives 0.5)
GOSSIP_BANNED: Final = -100.0  # a banned peer's gossip score: below any graylist threshold
_GOSSIP_COUNT: Final = 2
_GOSSIP_LEN: Final = 4
_ID_TAG: Final = b"gaml/swarm-id/1\n"
_KEY_TAG: Final = b"gaml/swarm-key/1\n"


def swarm_boundary(name: str) -> Boundary:
    """The boundary of the swarm called ``name``: every node derives the same id from the name."""
    digest = hashlib.sha256(_ID_TAG + name.encode()).digest()
    return Boundary(digest[:BOUNDARY_ID_BYTES], PUBLIC, name, PUBLIC_LABEL, NO_ADMIN)


def swarm_key(name: str) -> bytes:
    """The swarm's sealing key, which anyone can derive: public memory is not secret."""
    return hashlib.sha256(_KEY_TAG + name.encode()).digest()


def descriptor(name: str) -> bytes:
    """What peers exchange in place of a roster: the swarm's name, in its one canonical encoding."""
    return canonical_encode({"format": SWARM_FORMAT, "name": name})


def is_descriptor(data: bytes) -> bool:
    """Whether ``data`` looks like a swarm descriptor rather than a signed roster (cheap: no full parse)."""
    return data.startswith(b'{"format":"' + SWARM_FORMAT.encode())


def check_descriptor(data: bytes, name: str) -> None:
    """:class:`BadRoster` unless ``data`` is the descriptor of the swarm ``name``."""
    if data != descriptor(name):
        try:
            got = orjson.loads(data).get("name")
        except (orjson.JSONDecodeError, AttributeError):
            got = None
        raise BadRoster(f"a descriptor of swarm {got!r} offered for swarm {name!r}")


@dataclasses.dataclass(frozen=True)
class Swarm(Roster):
    """This node's view of a swarm: the peers it has met (role ``member``, ``since`` = when it first met them, this
    node first of all) and those it banned. A :class:`Roster` by shape, so replication and consensus read it as one,
    but no admin signs it and it never travels: peers exchange :func:`descriptor` instead.

    ``role`` answers ``member`` for *any* well-formed node id not banned: membership is open; what a member's claims
    weigh is consensus's business (module docstring). ``version`` grows with every change of the view."""

    banned: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        nodes = [m.node for m in self.members]
        if not nodes or any(m.role != MEMBER for m in self.members) or nodes != sorted(set(nodes)):
            raise RosterRefused("a swarm view lists its members (at least this node) sorted, each once")

    def role(self, node: str) -> str | None:
        if node in self.banned:
            return None
        try:
            check_node(node)
        except RosterRefused:
            return None
        return MEMBER

    def met(self, node: str) -> bool:
        return any(m.node == node for m in self.members)

    def meet(self, node: str, now: int) -> Swarm:
        """The view with ``node`` met at ``now`` (itself if already met or banned)."""
        if self.met(node) or node in self.banned:
            return self
        members = tuple(sorted((*self.members, Member(check_node(node), MEMBER, now)), key=lambda m: m.node))
        return dataclasses.replace(self, members=members, version=self.version + 1)

    def ban(self, node: str) -> Swarm:
        if node in self.banned:
            return self
        members = tuple(m for m in self.members if m.node != node)
        return dataclasses.replace(self, members=members, banned=self.banned | {node}, version=self.version + 1)

    def newer_than(self, other: Roster) -> bool:
        return False  # a view is this node's own: nobody else's supersedes it

    def keys_for(self, identity: crypto.SigningKey) -> dict[int, bytes]:
        return {1: swarm_key(self.boundary.name)}

    def encode(self) -> bytes:
        return descriptor(self.boundary.name)

    def state(self) -> bytes:
        """The view as stored (this node's meta, sealed): members with their ``since``, and the banned."""
        return canonical_encode(
            {
                "format": SWARM_FORMAT,
                "name": self.boundary.name,
                "version": self.version,
                "members": {m.node: m.since for m in self.members},
                "banned": sorted(self.banned),
            }
        )

    @classmethod
    def restore(cls, data: bytes) -> Swarm:
        d = orjson.loads(data)
        members = tuple(Member(n, MEMBER, s) for n, s in sorted(d["members"].items()))
        return new_view(d["name"], members, int(d["version"]), frozenset(d["banned"]))


def new_view(name: str, members: tuple[Member, ...], version: int = 1, banned: frozenset[str] = frozenset()) -> Swarm:
    return Swarm(
        boundary=swarm_boundary(name),
        epoch=1,
        version=version,
        members=members,
        sealed={},
        issued_at=0,
        signature=b"",
        banned=banned,
    )


def join(name: str, node: str) -> Swarm:
    """A fresh view of swarm ``name`` held by ``node``: itself, met at time 0 (the founder of its own view)."""
    return new_view(name, (Member(check_node(node), MEMBER, 0),))


def gossip_topic(name: str) -> str:
    """The gossipsub topic of swarm ``name`` (its id, so the name itself is not announced)."""
    return f"/gaml/swarm/{swarm_boundary(name).id.hex()}/1"


def peers_topic(name: str) -> str:
    """The gossipsub topic on which the nodes of swarm ``name`` announce where they can be dialled: the swarm's
    rendezvous point (a node that hears an announcement dials the announcer, so nodes find each other through the
    peers they know, beyond their bootstrap addresses and their LAN)."""
    return f"/gaml/swarm/{swarm_boundary(name).id.hex()}/peers/1"


def announcement(addrs: Sequence[str]) -> bytes:
    """What a node publishes on :func:`peers_topic`: its dialable addresses (at most :data:`MAX_ANNOUNCED`, each
    ending in its own ``/p2p/<peer id>``), in one canonical encoding."""
    return canonical_encode({"format": PEERS_FORMAT, "addrs": sorted(set(addrs))[:MAX_ANNOUNCED]})


def check_announcement(data: bytes, peer_id: str) -> list[str]:
    """The addresses in an announcement published by ``peer_id`` (libp2p authenticated the publisher).
    :class:`BadMessage` unless it is one canonical announcement of 1..:data:`MAX_ANNOUNCED` addresses of at most
    :data:`MAX_ADDR_CHARS` characters, every one of them the publisher's own (ending in ``/p2p/<peer id>``)."""
    if not isinstance(data, bytes) or len(data) > MAX_ANNOUNCED * (MAX_ADDR_CHARS + 8) + 64:
        raise BadMessage("an announcement is a few addresses, not this")
    try:
        d = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise BadMessage("an announcement is JSON") from None
    if not isinstance(d, dict) or set(d) != {"format", "addrs"} or d["format"] != PEERS_FORMAT:
        raise BadMessage(f"an announcement is {{format: {PEERS_FORMAT}, addrs: [...]}}")
    addrs = d["addrs"]
    if not isinstance(addrs, list) or not 1 <= len(addrs) <= MAX_ANNOUNCED:
        raise BadMessage(f"an announcement lists 1..{MAX_ANNOUNCED} addresses")
    suffix = f"/p2p/{peer_id}"
    for a in addrs:
        if not isinstance(a, str) or len(a) > MAX_ADDR_CHARS or not a.startswith("/") or not a.endswith(suffix):
            raise BadMessage("an announced address is a multiaddr of its publisher's (ending in /p2p/<its id>)")
    if data != announcement(addrs):
        raise BadMessage("an announcement is in its canonical encoding (sorted, no duplicates)")
    return list(addrs)


def bundles(objs: Iterable[bytes]) -> list[bytes]:
    """The objects as gossip messages: each ``GS1\\n | count (u16) | (length (u32) | object) * count``, at most
    :data:`GOSSIP_MAX_BYTES` and :data:`GOSSIP_MAX_OBJECTS` objects, in the given order. An object too large for a
    bundle of its own is left out: sync carries it."""
    out: list[bytes] = []
    part: list[bytes] = []
    size = len(GOSSIP_MAGIC) + _GOSSIP_COUNT

    def flush() -> None:
        if part:
            out.append(GOSSIP_MAGIC + len(part).to_bytes(_GOSSIP_COUNT, "big") + b"".join(part))
            part.clear()

    for obj in objs:
        cost = _GOSSIP_LEN + len(obj)
        if len(GOSSIP_MAGIC) + _GOSSIP_COUNT + cost > GOSSIP_MAX_BYTES:
            continue
        if len(part) == GOSSIP_MAX_OBJECTS or size + cost > GOSSIP_MAX_BYTES:
            flush()
            size = len(GOSSIP_MAGIC) + _GOSSIP_COUNT
        part.append(len(obj).to_bytes(_GOSSIP_LEN, "big") + obj)
        size += cost
    flush()
    return out


def unbundle(data: bytes) -> list[bytes]:
    """The objects of a gossip message. :class:`BadObject` unless it is exactly one well-formed bundle."""
    if not isinstance(data, bytes) or len(data) > GOSSIP_MAX_BYTES or not data.startswith(GOSSIP_MAGIC):
        raise BadObject(f"a gossip message is a bundle of objects (GS1), at most {GOSSIP_MAX_BYTES} bytes")
    at = len(GOSSIP_MAGIC)
    count = int.from_bytes(data[at : at + _GOSSIP_COUNT], "big")
    at += _GOSSIP_COUNT
    if not 1 <= count <= GOSSIP_MAX_OBJECTS:
        raise BadObject(f"a bundle holds 1..{GOSSIP_MAX_OBJECTS} objects, not {count}")
    objs = []
    for _ in range(count):
        if at + _GOSSIP_LEN > len(data):
            raise BadObject("a bundle ends inside an object's length")
        n = int.from_bytes(data[at : at + _GOSSIP_LEN], "big")
        at += _GOSSIP_LEN
        if n < OVERHEAD_BYTES or at + n > len(data):
            raise BadObject("a bundle's object is shorter than any object, or runs past the end")
        objs.append(data[at : at + n])
        at += n
    if at != len(data):
        raise BadObject("bytes after a bundle's last object")
    return objs


def check_gossip(name: str, publisher: str, data: bytes) -> list[Opened]:
    """Judge a gossip message of swarm ``name`` published by ``publisher`` (a node id, authenticated by libp2p):
    every object opened. :class:`BadObject` if it is verifiably bad: malformed, too large, an object that does not
    open under the swarm's key or whose signature fails, or one written by anyone but its publisher (nobody
    forwards another's writing as its own message: that is what sync is for)."""
    key = swarm_key(name)
    route = swarm_boundary(name).route
    opened = []
    for obj in unbundle(data):
        o = open_object(obj, {1: key})
        if o.route != route:
            raise BadObject("an object of another swarm or boundary")
        if o.writer != publisher:
            raise BadObject("an object not written by the message's publisher")
        opened.append(o)
    return opened


def gossip_score(view: Swarm, node: str, reputation: Callable[[str], float]) -> float:
    """A peer's application score in gossip: :data:`GOSSIP_BANNED` if this view banned it, else its reputation
    (0..1, from consensus) times :data:`GOSSIP_REPUTATION`; 0 for a node not met yet."""
    if node in view.banned:
        return GOSSIP_BANNED
    if not view.met(node):
        return 0.0
    return GOSSIP_REPUTATION * min(1.0, max(0.0, reputation(node)))


def strikes(counts: Mapping[str, int], peer: str) -> bool:
    """Whether ``peer`` has earned a ban."""
    return counts.get(peer, 0) >= STRIKES_TO_BAN


__all__ = [
    "DEFAULT_SWARM",
    "GOSSIP_MAX_BYTES",
    "GOSSIP_MAX_OBJECTS",
    "STRIKES_TO_BAN",
    "Swarm",
    "announcement",
    "bundles",
    "check_announcement",
    "check_descriptor",
    "check_gossip",
    "descriptor",
    "gossip_score",
    "gossip_topic",
    "is_descriptor",
    "join",
    "peers_topic",
    "swarm_boundary",
    "swarm_key",
    "unbundle",
]
