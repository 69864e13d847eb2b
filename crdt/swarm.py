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

The swarm's objects are sealed like any boundary's, under a key everyone derives from the swarm's name: public
memory is not secret (DESIGN.md: encryption is for every *non-public* payload), but the format stays one format and
the transport (libp2p, Noise) still encrypts every byte on the wire.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Final

import orjson

from gaml.crdt.errors import BadRoster, RosterRefused
from gaml.crdt.membership import BOUNDARY_ID_BYTES, MEMBER, Boundary, Member, Roster, check_node
from gaml.policy import crypto
from gaml.policy.model import canonical_encode
from gaml.policy.replication import PUBLIC, PUBLIC_LABEL

SWARM_FORMAT: Final = "gaml/swarm/1"
DEFAULT_SWARM: Final = "gaml-public"
NO_ADMIN: Final = b"\x00" * 32  # a swarm has no admin key
STRIKES_TO_BAN: Final = 3
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


def strikes(counts: Mapping[str, int], peer: str) -> bool:
    """Whether ``peer`` has earned a ban."""
    return counts.get(peer, 0) >= STRIKES_TO_BAN


__all__ = [
    "DEFAULT_SWARM",
    "STRIKES_TO_BAN",
    "Swarm",
    "check_descriptor",
    "descriptor",
    "is_descriptor",
    "join",
    "swarm_boundary",
    "swarm_key",
]
