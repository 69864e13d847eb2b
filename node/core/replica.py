"""A node's side of replication: its boundaries, its objects, and the way between objects and the store.

The sync engine (:mod:`crdt.sync`) moves opaque objects between authorized peers; this module is what it talks to
(the ``crdt.sync.ObjectStore`` protocol), and it is pure: time comes in as ``now``, randomness from the store's entropy.

- **Boundaries.** A node holds, per boundary it belongs to, the newest roster it has seen (the admin-signed member
  list, :mod:`crdt.membership`) and, as a member, the group key of every epoch it was given (in the keychain, under
  ``boundary/<id>/epoch/<n>``; the admin key of a boundary this node created under ``boundary/<id>/admin``). A peer is
  authorized for a boundary while both it and this node are in that roster. A newer roster offered by a peer is
  adopted; one that drops this node ends its part in the boundary (the keys it had stay: revocation is forward-only).
- **From the store to objects.** Every write, whatever its path (a Put, an ingest, curation, an erasure, retention
  expiry), lands in the store's journal. :meth:`Replica.pump` follows the journal: an asset whose policy reaches a
  boundary (:func:`policy.replication.reach`) has its record written into its Automerge document
  (:class:`crdt.doc.AssetDoc`); if that changed the document, a snapshot of the document is sealed under the
  boundary's current group key and signed by this node (:mod:`crdt.objects`). A tombstone becomes a tombstone object.
  Nothing else leaves: a ``local_only`` asset, or one whose boundary this node is not a member of, makes no object.
- **From objects to the store.** :meth:`Replica.accept` checks each received object (its route, then, for a member,
  the AEAD and the writer's signature, and that the writer is a current member), merges the snapshot into the
  asset's document, checks that the merged record is a valid asset of that boundary, and writes what changed through
  the node's normal write path (signed by this node) in one batch, with the replication records in the same commit.
  A tombstone erases the asset here, its derivatives included (``erase``: the ladder's ``forget``), and no later
  snapshot brings it back. A relay stores objects it cannot open and forwards them.
- **Which objects are offered.** Per boundary, a log of *current* objects in the order they became current: for each
  asset the one snapshot whose heads equal the document's (a snapshot another one supersedes leaves the log), plus
  every tombstone. When a merge produces a state no received snapshot holds (concurrent edits), this node seals the
  merged document as a new snapshot, so the log converges to one snapshot per asset on every member.

Records live in the store's sealed meta space: ``repbound`` (roster per boundary), ``repobj`` (object bytes and their
place in the log), ``repdoc`` (the document per asset), ``repcur`` (sync cursors per peer), ``repgone`` (erased ids)
and ``repstate`` (the journal position followed).
"""

from __future__ import annotations

import itertools
import json
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sortedcontainers import SortedDict

from gaml.crdt.doc import AssetDoc
from gaml.crdt.errors import BadObject, BadRoster, CorruptDoc
from gaml.crdt.membership import Boundary, Roster
from gaml.crdt.membership import add as roster_add
from gaml.crdt.membership import create as roster_create
from gaml.crdt.membership import remove as roster_remove
from gaml.crdt.objects import SNAPSHOT, TOMBSTONE, object_id, open_object, peek, seal_object
from gaml.crdt.swarm import STRIKES_TO_BAN, Swarm, check_descriptor
from gaml.crdt.swarm import join as swarm_join
from gaml.node.core.access.retrieve import SearchRequest
from gaml.node.core.node import Node
from gaml.node.core.store.store import OP_PUT, OP_TOMBSTONE, Records, Store
from gaml.policy import crypto
from gaml.policy.access import Permission
from gaml.policy.errors import GamlError, InvalidAsset, InvalidInput, KeychainError, NotFound, StoreError
from gaml.policy.model import Asset
from gaml.policy.replication import PUBLIC, PUBLIC_LABEL, public, reach

# Fields that are this node's, not the asset's: never replicated, set again by the write path that materializes.
LOCAL_FIELDS: Final = ("version", "source_node", "encryption_key_ref")

GOSSIP_OUTBOX: Final = 4096  # own swarm objects waiting for gossip, at most (the oldest give way)
CURRENT: Final = b"C"  # in the log: offered to peers (an asset's current snapshot, or an object a relay carries)
TOMB: Final = b"T"  # a tombstone: in the log for good
SEEN: Final = b"S"  # kept (a peer may still ask for it) but superseded
DROPPED: Final = b"D"  # erased: only the id is kept, so it is not fetched again

_NO_ASSET: Final = b"\x00" * 16
_HEAD: Final = struct.Struct(">16sQc16s")  # boundary id, log position, flag, asset id


def record_of(asset: Asset) -> dict[str, Any]:
    """The replicated record of an asset: its signed content without the fields the writing node sets."""
    rec = asset.to_dict(signed_only=True)
    for name in LOCAL_FIELDS:
        rec.pop(name, None)
    return rec


def asset_of(record: Mapping[str, Any]) -> Asset:
    """A validated, unsigned asset from a replicated record (InvalidAsset if it is not one)."""
    if any(name in record for name in LOCAL_FIELDS) or not isinstance(record.get("id"), str):
        raise InvalidAsset("a replicated record carries node-local fields or no id")
    asset = Asset.from_dict(record)
    if asset.tombstone:
        raise InvalidAsset(f"asset {asset.id}: a snapshot cannot carry a tombstone (tombstones travel as their own)")
    return asset


@dataclass
class _Bound:
    roster: Roster
    keys: dict[int, bytes]
    admin: bool
    encoded: bytes | None = None  # the roster's encoding, made once (the sync engine asks for it on every tick)

    @property
    def boundary(self) -> Boundary:
        return self.roster.boundary


@dataclass
class _Obj:
    bid: bytes
    seq: int
    flag: bytes
    asset: str  # "" for a relay's objects (it cannot open them)


@dataclass
class _Txn:
    """Meta records to commit together, readable before they are."""

    meta: dict[bytes, bytes | None] = field(default_factory=dict)


class Replica:
    """The replication state of one node; implements ``crdt.sync.ObjectStore`` for the sync engine."""

    def __init__(self, node: Node, *, erase: Callable[[str, int], object] | None = None) -> None:
        self.node = node
        self.store = node.store
        self.identity = self.store.identity
        self.node_id: str = self.store.node_id
        self.keychain = self.store.keychain
        self.entropy = self.store.entropy
        self.actor = self._actor()
        self._erase = erase or (lambda id_, now: node.delete(id_, now))
        self.counters: Counter[str] = Counter()
        self.gossiping = False  # whether the swarm objects this node seals are kept for gossip_out (the daemon's)
        self._reset()

    # -- persistence --------------------------------------------------------------------------------------------------

    def _name(self, kind: str, key: str) -> bytes:
        return self.store.meta_name(kind, key)

    def _read(self, tx: _Txn | None, name: bytes) -> bytes | None:
        if tx is not None and name in tx.meta:
            return tx.meta[name]
        return self.store.read_meta(name)

    def _load(self) -> None:
        for _, data in self.store.scan_meta("repbound"):
            d = json.loads(data)
            if "swarm" in d:
                self._install(Swarm.restore(bytes.fromhex(d["swarm"])), admin=False)
                continue
            roster = Roster.decode(bytes.fromhex(d["roster"]))
            self._install(roster, admin=bool(d["admin"]))
        for _, data in self.store.scan_meta("repgone"):
            id_, bids = data[:32].decode(), data[32:]
            self._gone[id_] = {bids[i : i + 16] for i in range(0, len(bids), 16)}
        for _, data in self.store.scan_meta("repsrc"):
            bid, id_, nodes = data[:16], data[16:48].decode(), data[48:]
            self._writers[(bid, id_)] = {nodes[i : i + 32].hex() for i in range(0, len(nodes), 32)}
        for _, data in self.store.scan_meta("reperase"):
            self._erasing[data[:32].decode()] = data[32:]
        for _, data in self.store.scan_meta("repobj"):
            bid, seq, flag, asset = _HEAD.unpack_from(data)
            oid = object_id(data[_HEAD.size :]) if flag != DROPPED else data[_HEAD.size :]
            self._index(oid, _Obj(bid, seq, flag, "" if asset == _NO_ASSET else asset.hex()))
        state = self.store.read_meta(self._name("repstate", "journal"))
        self._jseq = struct.unpack(">Q", state)[0] if state else 0

    def _reset(self) -> None:
        """(Re)build the in-memory state from the store: at start, and after a failed commit, when memory must not be
        ahead of disk (an object it never stored would count as known, and never be fetched again)."""
        self._bounds: dict[bytes, _Bound] = {}
        self._by_reach: dict[tuple[str, str], bytes] = {}
        self._objs: dict[bytes, _Obj] = {}
        self._logs: dict[bytes, SortedDict] = {}
        self._current: dict[tuple[bytes, str], bytes] = {}  # (boundary, asset id) -> its current snapshot's id
        self._in_bound: dict[bytes, set[str]] = {}  # boundary -> the assets of ``_current`` in it (for peer reads)
        self._by_asset: dict[str, set[bytes]] = {}  # asset id -> every object of it this node keeps
        self._gone: dict[str, set[bytes]] = {}  # asset id -> the boundaries whose tombstone of it this node holds
        self._erasing: dict[str, bytes] = {}  # erasures a received tombstone asks of this node, not yet done
        # (boundary, asset id) -> the members whose verified snapshots changed the asset here (this node for its own
        # writes): the asset's sources, for consensus (node.core.consensus)
        self._writers: dict[tuple[bytes, str], set[str]] = {}
        self._cursors: dict[tuple[bytes, str], int] = {}  # (boundary, peer) -> its cursor, as stored
        self._strikes: dict[tuple[bytes, str], int] = {}  # (swarm, peer) -> objects it sent that failed to open
        self._writers_met: set[str] = set()  # writers of swarm objects accepted in this batch
        self._deferred: set[bytes] = set()  # objects of the last accept sealed under an epoch not known here yet
        # swarm objects this node sealed (its own writing), oldest first, not yet handed to gossip (gossip_out)
        self._outbox: dict[bytes, None] = {}
        self._seq = 0
        self._jseq = 0
        self._load()

    def _actor(self) -> bytes:
        """This store's Automerge actor: the node id's first 8 bytes and 8 random ones, kept in the store.

        A store that lost its documents (restored from an old copy) would otherwise reuse change numbers it already
        gave out under the same actor, and Automerge cannot merge two different changes with one number.
        """
        name = self._name("repstate", "actor")
        actor = self.store.read_meta(name)
        if actor is None:
            actor = bytes.fromhex(self.node_id)[:8] + self.entropy.random_bytes(8)
            self.store.write_meta({name: actor})
        return actor

    @property
    def lineage(self) -> bytes:
        """This store's history, for peers (crdt.sync.ObjectStore.lineage): the random half of its actor, which a
        restore renews."""
        return self.actor[8:]

    def met(self, peer: str, lineage: bytes) -> bool:
        """crdt.sync.ObjectStore.met: a peer whose lineage changed gets this node's whole log offered again."""
        if not any(self.authorized(bid, peer) for bid in self._bounds):
            return False  # a node this one shares nothing with: nothing to resend, and nothing of it is kept
        name = self._name("repcur", "lineage:" + peer)
        known = self.store.read_meta(name)
        if known == lineage:
            return False
        self.store.write_meta({name: lineage})
        if known is None:
            return False  # first met (or met before lineages existed): its cursors stand
        for bid in sorted(self._bounds):
            if self.cursor(bid, peer):
                self.set_cursor(bid, peer, 0)
        return True

    def renew_actor(self) -> bytes:
        """A new Automerge actor for this store (a restored backup: the old actor may have numbered changes after
        the backup was made, which peers hold)."""
        actor = bytes.fromhex(self.node_id)[:8] + self.entropy.random_bytes(8)
        self.store.write_meta({self._name("repstate", "actor"): actor})
        self.actor = actor
        return actor

    def _index(self, oid: bytes, o: _Obj) -> None:
        self._objs[oid] = o
        self._seq = max(self._seq, o.seq)
        if o.asset:
            self._by_asset.setdefault(o.asset, set()).add(oid)
        if o.flag in (CURRENT, TOMB):
            self._logs.setdefault(o.bid, SortedDict())[o.seq] = oid
        if o.flag == CURRENT and o.asset and o.bid not in self._gone.get(o.asset, ()):
            self._set_current(o.bid, o.asset, oid)

    def _set_current(self, bid: bytes, id_: str, oid: bytes) -> None:
        self._current[(bid, id_)] = oid
        self._in_bound.setdefault(bid, set()).add(id_)

    def _install(self, roster: Roster, *, admin: bool) -> _Bound:
        """Make ``roster`` this node's view of its boundary. A member's keys are the roster's (sealed to it: the
        truth), saved to the keychain where it lacks them; the keychain adds older epochs a roster no longer seals."""
        bid = roster.boundary.id
        keys = self._keys_of(bid)
        reach_key = (roster.boundary.kind, roster.boundary.label)
        if roster.role(self.node_id) == "member":
            sealed = roster.keys_for(self.identity)
            keys.update(sealed)
            self._save_keys(bid, sealed)
            self._by_reach[reach_key] = bid
        elif self._by_reach.get(reach_key) == bid:
            del self._by_reach[reach_key]
        b = _Bound(roster, keys, admin)
        self._bounds[bid] = b
        self._logs.setdefault(bid, SortedDict())
        return b

    def _keys_of(self, bid: bytes) -> dict[int, bytes]:
        prefix = f"boundary/{bid.hex()}/epoch/"
        return {
            int(ref[len(prefix) :]): self.keychain.get(ref) for ref in self.keychain.refs() if ref.startswith(prefix)
        }

    def _save_keys(self, bid: bytes, keys: Mapping[int, bytes]) -> dict[int, bytes]:
        have = self._keys_of(bid)
        for epoch, key in sorted(keys.items()):
            if epoch not in have:
                self.keychain.put(f"boundary/{bid.hex()}/epoch/{epoch}", key)
                have[epoch] = key
        return have

    def _save_bound(self, b: _Bound) -> None:
        if isinstance(b.roster, Swarm):
            data = json.dumps({"swarm": b.roster.state().hex()}).encode()
        else:
            data = json.dumps({"roster": b.roster.encode().hex(), "admin": b.admin}).encode()
        self.store.write_meta({self._name("repbound", b.boundary.id.hex()): data})

    def _put_obj(self, tx: _Txn, oid: bytes, o: _Obj, obj: bytes | None) -> None:
        """Record an object (or a change of its flag) in ``tx`` and in memory."""
        old = self._objs.get(oid)
        if old is not None and old.flag in (CURRENT, TOMB):
            self._logs[old.bid].pop(old.seq, None)
        head = _HEAD.pack(o.bid, o.seq, o.flag, bytes.fromhex(o.asset) if o.asset else _NO_ASSET)
        if o.flag == DROPPED:
            body = oid
        else:
            if obj is None:
                stored = self._read(tx, self._name("repobj", oid.hex()))
                if stored is None:
                    raise NotFound(f"object {oid.hex()[:16]}… is not stored")
                obj = stored[_HEAD.size :]
            body = obj
        tx.meta[self._name("repobj", oid.hex())] = head + body
        self._index(oid, o)

    # -- boundaries: the admin's and a member's operations ------------------------------------------------------------

    def create(self, kind: str, name: str, label: str, now: int) -> Boundary:
        """A new boundary administered by this node, with this node as its first member."""
        if (kind, label) in self._by_reach:
            raise InvalidInput(f"this node is already a member of a {kind} boundary for {label!r}")
        seed = self.entropy.random_bytes(32)
        admin = crypto.SigningKey(seed)
        boundary, roster, key = roster_create(kind, name, label, admin, self.node_id, now, self.entropy)
        self.keychain.put(f"boundary/{boundary.id.hex()}/admin", seed)
        del key  # the roster seals it to this node, its first member: _install takes it from there
        self._save_bound(self._install(roster, admin=True))
        self._replay()
        return boundary

    def join_swarm(self, name: str, now: int) -> Boundary:
        """Join the public swarm called ``name`` (crdt/swarm.py): public memory that asks for the swarm replicates
        there from now on, what was written before included. A node is in one swarm at most."""
        held = self.swarm()
        if held is not None:
            if held.name != name:
                raise InvalidInput(f"this node is already in the public swarm {held.name!r}")
            return held
        view = swarm_join(name, self.node_id)
        self._save_bound(self._install(view, admin=False))
        self._replay()
        self.counters["swarms_joined"] += 1
        return view.boundary

    def _meet(self, bid: bytes, nodes: Iterable[str], now: int) -> None:
        """Record peers and writers of a swarm as met (their reputation's age starts at their first meeting)."""
        b = self._bounds[bid]
        view = b.roster
        assert isinstance(view, Swarm)
        for node in sorted(set(nodes)):
            if node != self.node_id:
                view = view.meet(node, max(1, now))
        if view is not b.roster:
            self._save_bound(self._install(view, admin=False))
            self.counters["swarm_met"] += 1

    def _strike(self, bid: bytes, peer: str, n: int) -> None:
        """Count objects from ``peer`` that failed their seal or signature; ban it from the swarm at the limit."""
        self._strikes[(bid, peer)] = got = self._strikes.get((bid, peer), 0) + n
        b = self._bounds[bid]
        if got >= STRIKES_TO_BAN and isinstance(b.roster, Swarm) and b.roster.role(peer) is not None:
            self._save_bound(self._install(b.roster.ban(peer), admin=False))
            self.counters["swarm_banned"] += 1

    # -- gossip (the public swarm) ------------------------------------------------------------------------------------

    def swarm(self) -> Boundary | None:
        """The public swarm this node is in, if any."""
        bid = self._by_reach.get((PUBLIC, PUBLIC_LABEL))
        return None if bid is None else self._bounds[bid].boundary

    def _to_gossip(self, oid: bytes) -> None:
        if not self.gossiping:
            return
        self._outbox[oid] = None
        while len(self._outbox) > GOSSIP_OUTBOX:  # a burst beyond what gossip should carry: sync carries the rest
            del self._outbox[next(iter(self._outbox))]
            self.counters["gossip_outbox_dropped"] += 1

    def gossip_out(self, limit: int, max_bytes: int) -> list[bytes]:
        """The oldest of the swarm objects this node wrote since the last call, as stored, up to ``limit`` objects and
        ``max_bytes`` (at least one): what it publishes by gossip next. Those superseded or erased since are skipped
        (their successors follow); the rest wait for the next call."""
        swarm = self.swarm()
        if swarm is None:
            return []
        out: list[bytes] = []
        size = 0
        for oid in list(self._outbox):
            o = self._objs.get(oid)
            got = self.objects(swarm.id, [oid]) if o is not None and o.flag in (CURRENT, TOMB) else []
            if got and out and (len(out) == limit or size + len(got[0]) > max_bytes):
                break
            del self._outbox[oid]
            if got:
                out.append(got[0])
                size += len(got[0])
        return out

    def gossip_refused(self, peer: str) -> None:
        """``peer`` forwarded a verifiably bad gossip message of the swarm: a strike, as for a bad object by sync."""
        swarm = self.swarm()
        if swarm is not None:
            self.counters["gossip_invalid"] += 1
            self._strike(swarm.id, peer, 1)

    def _writer_of(self, b: _Bound, oid: bytes) -> str:
        """The writer of an object this node keeps ('' if it cannot be read)."""
        obj = self.objects(b.boundary.id, [oid])
        try:
            return open_object(obj[0], b.keys, oid=oid).writer if obj else ""
        except BadObject:
            return ""

    def _replay(self) -> None:
        """Follow the journal from its start again: assets written before this node entered a boundary reach it."""
        self._jseq = 0
        self.store.write_meta({self._name("repstate", "journal"): struct.pack(">Q", 0)})

    @staticmethod
    def _epoch_keys(b: _Bound) -> dict[int, bytes]:
        """The keys of the roster's epochs (a key saved for an epoch whose roster was never saved is not one)."""
        return {e: k for e, k in b.keys.items() if e <= b.roster.epoch}

    def _admin(self, bid: bytes) -> tuple[_Bound, crypto.SigningKey]:
        b = self.bound(bid)
        if not b.admin:
            raise InvalidInput(f"this node does not administer boundary {b.boundary.name!r}")
        try:
            seed = self.keychain.get(f"boundary/{bid.hex()}/admin")
        except KeychainError as e:
            raise InvalidInput(f"the admin key of boundary {b.boundary.name!r} is not in this keychain") from e
        return b, crypto.SigningKey(seed)

    def invite(self, bid: bytes, node: str, role: str, now: int) -> Roster:
        """Add a node (a ``member`` or a ``relay``) to a boundary this node administers; returns the new roster."""
        b, admin = self._admin(bid)
        roster = roster_add(b.roster, node, role, admin, self._epoch_keys(b), now, self.entropy)
        self._save_bound(self._install(roster, admin=True))
        return roster

    def remove(self, bid: bytes, node: str, now: int) -> Roster:
        """Remove a node from a boundary this node administers: the group key rotates; the node gets nothing new."""
        b, admin = self._admin(bid)
        roster, key = roster_remove(b.roster, node, admin, self._epoch_keys(b), now, self.entropy)
        del key  # sealed in the roster to every remaining member, this node included: _install takes it from there
        self._save_bound(self._install(roster, admin=True))
        self._reseal(bid, {node})  # the admin, too, may hold the removed node's last states that no one else has
        return roster

    def join(self, data: bytes, now: int) -> Boundary:
        """Join a boundary from a roster that names this node (an invitation); a newer roster of a known boundary
        is adopted."""
        roster = Roster.decode(data)
        if roster.role(self.node_id) is None:
            raise BadRoster(f"this roster of {roster.boundary.name!r} does not name this node ({self.node_id[:16]}…)")
        bid = roster.boundary.id
        if bid in self._bounds:
            self.offer_roster(bid, data, self.node_id, now)
            return self._bounds[bid].boundary
        taken = self._by_reach.get((roster.boundary.kind, roster.boundary.label))
        if taken is not None and roster.role(self.node_id) == "member":
            raise InvalidInput(
                f"this node is already a member of another {roster.boundary.kind} boundary "
                f"for {roster.boundary.label!r}"
            )
        self._adopt(roster, admin=False)
        return roster.boundary

    def _adopt(self, roster: Roster, *, admin: bool) -> None:
        old = self._bounds.get(roster.boundary.id)
        was_member = old is not None and old.roster.role(self.node_id) == "member"
        self._save_bound(self._install(roster, admin=admin))
        if roster.role(self.node_id) == "member" and not was_member:
            self._replay()  # (again) a member: what was written meanwhile reaches the boundary
        self.counters["rosters_adopted"] += 1
        if old is not None and was_member and roster.role(self.node_id) == "member":
            gone = {m.node for m in old.roster.members} - {m.node for m in roster.members}
            if gone:
                self._reseal(roster.boundary.id, gone)

    def _reseal(self, bid: bytes, gone: set[str]) -> None:
        """Seal again, as this node's, every current snapshot and tombstone of ``bid`` that a node just removed wrote.

        A member that adopted the removal refuses the removed node's objects; a member that had not yet adopted it
        may have taken one (the removed node's last writes, or a merge it sealed), and it would be the only one ever
        to hold that state. Sealed again by a current member, the state reaches the others and the boundary
        converges (the same for an erasure it asked for). Revocation stays forward-only: what the removed node wrote
        before every member knew of its removal can spread, nothing it writes to a member that knows can. Costs one
        object per such asset per member."""
        b = self._bounds[bid]
        tx = _Txn()
        for (cb, id_), oid in sorted(self._current.items()):
            doc = self._doc(tx, bid, id_) if cb == bid and self._writer_of(b, oid) in gone else None
            if doc is not None:
                self._seal_snapshot(tx, bid, id_, doc)
                self.counters["resealed"] += 1
        tombs = sorted((o.seq, oid) for oid, o in self._objs.items() if o.bid == bid and o.flag == TOMB)
        for _, oid in tombs:
            if self._writer_of(b, oid) in gone:
                id_ = self._objs[oid].asset
                new, obj = seal_object(
                    b.boundary, b.roster.epoch, b.keys[b.roster.epoch], self.identity, TOMBSTONE, id_, b"", self.entropy
                )
                self._seq += 1
                self._put_obj(tx, new, _Obj(bid, self._seq, TOMB, id_), obj)
                self.counters["resealed"] += 1
        if tx.meta:
            self.store.write_meta(tx.meta)

    def boundary_for(self, kind: str, label: str) -> bytes | None:
        """The boundary of that kind and label this node is a member of, if any."""
        return self._by_reach.get((kind, label))

    def bound(self, bid: bytes) -> _Bound:
        try:
            return self._bounds[bid]
        except KeyError:
            raise InvalidInput(f"this node knows no boundary {bid.hex()}") from None

    def find(self, name_or_id: str) -> bytes:
        """The id of a boundary by its name or (a prefix of) its hex id."""
        hits = [
            bid
            for bid, b in self._bounds.items()
            if b.boundary.name == name_or_id or (len(name_or_id) >= 8 and bid.hex().startswith(name_or_id))
        ]
        if len(hits) != 1:
            known = ", ".join(sorted(b.boundary.name for b in self._bounds.values())) or "none"
            raise InvalidInput(f"{'no' if not hits else 'more than one'} boundary {name_or_id!r} (known: {known})")
        return hits[0]

    def describe(self) -> list[dict[str, Any]]:
        """Each boundary as plain data (for ``gaml peers``): no key, no object id."""
        out = []
        for bid, b in sorted(self._bounds.items(), key=lambda kv: kv[1].boundary.name):
            r = b.roster
            out.append(
                {
                    "id": bid.hex(),
                    "name": r.boundary.name,
                    "kind": r.boundary.kind,
                    "label": r.boundary.label,
                    "admin": b.admin,
                    "role": r.role(self.node_id) or "removed",
                    "epoch": r.epoch,
                    "version": r.version,
                    "members": [{"node": m.node, "role": m.role} for m in r.members],
                    "objects": len(self._logs.get(bid, ())),
                }
            )
        return out

    # -- crdt.sync.ObjectStore -----------------------------------------------------------------------------------------

    def boundary_ids(self) -> list[bytes]:
        return sorted(bid for bid, b in self._bounds.items() if b.roster.role(self.node_id) is not None)

    def authorized(self, bid: bytes, peer: str) -> bool:
        b = self._bounds.get(bid)
        return (
            b is not None
            and peer != self.node_id
            and b.roster.role(self.node_id) is not None
            and b.roster.role(peer) is not None
        )

    def roster(self, bid: bytes) -> bytes:
        b = self.bound(bid)
        if b.encoded is None:
            b.encoded = b.roster.encode()
        return b.encoded

    def offer_roster(self, bid: bytes, data: bytes, peer: str, now: int) -> None:
        b = self._bounds.get(bid)
        if b is None:
            raise BadRoster("a roster of a boundary this node does not know")
        if isinstance(b.roster, Swarm):
            check_descriptor(data, b.boundary.name)
            if b.roster.role(peer) is not None:
                self._meet(bid, [peer], now)
            return
        roster = Roster.decode(data)
        if roster.boundary != b.boundary:
            raise BadRoster(f"a roster of another boundary offered for {b.boundary.name!r}")
        if roster.newer_than(b.roster):
            self._adopt(roster, admin=b.admin)

    def log_after(self, bid: bytes, cursor: int, limit: int) -> tuple[list[bytes], int]:
        log = self._logs.get(bid)
        if not log:
            return [], cursor
        keys = list(itertools.islice(log.irange(minimum=cursor + 1), limit))
        if not keys:
            return [], cursor
        return [log[k] for k in keys], keys[-1]

    def has(self, oid: bytes) -> bool:
        return oid in self._objs

    def objects(self, bid: bytes, oids: Sequence[bytes]) -> list[bytes]:
        out = []
        for oid in oids:
            o = self._objs.get(oid)
            if o is None or o.bid != bid or o.flag == DROPPED:
                continue
            data = self.store.read_meta(self._name("repobj", oid.hex()))
            if data is not None:
                out.append(data[_HEAD.size :])
        return out

    def deferred(self, oids: Sequence[bytes]) -> set[bytes]:
        """Of these objects (just given to :meth:`accept`), those sealed under an epoch this node has no key of yet:
        the engine leaves them unacknowledged, so the peer offers them again once the roster has arrived."""
        out = self._deferred.intersection(oids)
        self._deferred.clear()
        return out

    def answer(self, bid: bytes, text: str, k: int, now: int) -> list[bytes]:
        """A peer read (crdt.sync): the current snapshots of the ``k`` assets of boundary ``bid`` that best match
        ``text`` by the node's relevance stage (dense and lexical, fused), best first. Only that boundary's current
        snapshots are candidates, exactly what sync offers its members: never a tombstone, another boundary's asset
        or a local-only one. A relay, which cannot open them, answers nothing. This node's writes not yet sealed
        are sealed first (``pump``), so the answer holds them."""
        b = self._bounds.get(bid)
        if b is not None and b.roster.role(self.node_id) == "member":
            self.pump(now)
        members = self._in_bound.get(bid)
        if b is None or b.roster.role(self.node_id) != "member" or not members or not text.strip():
            return []
        keep: dict[bytes, set[str]] = {}
        for part in self.store.partitions():
            views = self.store.views(part.pid).views
            ids = {i for i in members if i in views}
            if ids:
                keep[part.pid] = ids
        req = SearchRequest(text, self.node_id, Permission.REPLICATE, 0, k=k)
        ranked = self.node.retriever.relevance(req, keep, k).ranked
        oids = [self._current[(bid, id_)] for id_, _, _ in ranked[:k] if (bid, id_) in self._current]
        self.counters["answered"] += 1
        return self.objects(bid, oids)

    def asset_of_object(self, oid: bytes) -> str:
        """The asset an object this node keeps is of ("" if it keeps none, or cannot open it: a relay)."""
        o = self._objs.get(oid)
        return "" if o is None else o.asset

    def cursor(self, bid: bytes, peer: str) -> int:
        """How far ``peer`` acknowledged this node's log of ``bid`` (kept in memory after the first read: the
        engine asks on every tick, and only :meth:`set_cursor` writes it)."""
        got = self._cursors.get((bid, peer))
        if got is None:
            data = self.store.read_meta(self._name("repcur", bid.hex() + peer))
            got = self._cursors[(bid, peer)] = struct.unpack(">Q", data)[0] if data else 0
        return got

    def set_cursor(self, bid: bytes, peer: str, upto: int) -> None:
        self._cursors.pop((bid, peer), None)  # a failed write leaves the next read to the store
        self.store.write_meta({self._name("repcur", bid.hex() + peer): struct.pack(">Q", upto)})
        self._cursors[(bid, peer)] = upto

    # -- from the store to objects ------------------------------------------------------------------------------------

    def _reach_bid(self, asset: Asset) -> bytes | None:
        if public(asset):
            swarm = self._by_reach.get((PUBLIC, PUBLIC_LABEL))
            if swarm is not None:
                return swarm
        r = reach(asset)
        return None if r is None else self._by_reach.get((r.kind, r.label))

    def pump(self, now: int) -> int:
        """Turn the writes journaled since the last pump into objects; returns how many objects were made.

        It first finishes the erasures received tombstones asked for (one a crash interrupted included)."""
        try:
            self._run_erasures(now)
            made = 0
            while True:
                entries = self.store.journal_after(self._jseq, 1024)
                if not entries:
                    return made
                tx = _Txn()
                for seq, op, id_ in entries:
                    if op == OP_PUT:
                        made += self._local_put(id_, tx)
                    elif op == OP_TOMBSTONE:
                        made += self._local_tombstone(id_, tx)
                    self._jseq = seq
                tx.meta[self._name("repstate", "journal")] = struct.pack(">Q", self._jseq)
                self.store.write_meta(tx.meta)
        except BaseException:
            self._reset()
            raise

    def _doc_name(self, bid: bytes, id_: str) -> bytes:
        """An asset's document in one boundary: an asset that moved to another boundary starts a document there,
        so no history of one boundary is ever sealed into another."""
        return self._name("repdoc", bid.hex() + id_)

    def _doc(self, tx: _Txn | None, bid: bytes, id_: str) -> AssetDoc | None:
        data = self._read(tx, self._doc_name(bid, id_))
        return None if data is None else AssetDoc.load(data, self.actor)

    def _local_put(self, id_: str, tx: _Txn) -> int:
        try:
            asset = self.store.get(id_)
        except NotFound:  # deleted later in the journal: its tombstone entry follows
            return 0
        bid = self._reach_bid(asset)
        if bid is None or bid in self._gone.get(id_, ()):
            return 0
        doc = self._doc(tx, bid, id_) or AssetDoc.new(self.actor)
        if not doc.update(record_of(asset)):
            return 0
        self._seal_snapshot(tx, bid, id_, doc)
        self._add_writer(tx, bid, id_, self.node_id)
        return 1

    def _add_writer(self, tx: _Txn, bid: bytes, id_: str, node: str) -> None:
        nodes = self._writers.setdefault((bid, id_), set())
        if node not in nodes:
            nodes.add(node)
            tx.meta[self._name("repsrc", bid.hex() + id_)] = (
                bid + id_.encode() + b"".join(bytes.fromhex(n) for n in sorted(nodes))
            )

    def _seal_snapshot(self, tx: _Txn, bid: bytes, id_: str, doc: AssetDoc) -> None:
        b = self._bounds[bid]
        data = doc.save()
        oid, obj = seal_object(
            b.boundary, b.roster.epoch, b.keys[b.roster.epoch], self.identity, SNAPSHOT, id_, data, self.entropy
        )
        self._make_current(tx, bid, id_, oid, obj)
        tx.meta[self._doc_name(bid, id_)] = data
        self.counters["snapshots_sealed"] += 1
        if isinstance(b.roster, Swarm):
            self._to_gossip(oid)

    def _make_current(self, tx: _Txn, bid: bytes, id_: str, oid: bytes, obj: bytes | None) -> None:
        old = self._current.get((bid, id_))
        if old is not None and old != oid:
            o = self._objs[old]
            self._put_obj(tx, old, _Obj(o.bid, o.seq, SEEN, o.asset), None)
        self._seq += 1
        self._put_obj(tx, oid, _Obj(bid, self._seq, CURRENT, id_), obj)
        self._set_current(bid, id_, oid)

    def _local_tombstone(self, id_: str, tx: _Txn) -> int:
        """A deletion here travels to every boundary the asset reached from this node, and to its boundary now."""
        bids = {self._objs[oid].bid for oid in self._by_asset.get(id_, ())}
        try:
            here = self._reach_bid(self.store.get(id_, include_deleted=True))  # a tombstone keeps its policy
        except NotFound:
            here = None
        if here is not None:
            bids.add(here)
        made = 0
        for bid in sorted(bids):
            b = self._bounds.get(bid)
            if b is None or bid in self._gone.get(id_, ()) or b.roster.role(self.node_id) != "member":
                continue
            oid, obj = seal_object(
                b.boundary, b.roster.epoch, b.keys[b.roster.epoch], self.identity, TOMBSTONE, id_, b"", self.entropy
            )
            self._forget(tx, id_, bid)
            self._seq += 1
            self._put_obj(tx, oid, _Obj(bid, self._seq, TOMB, id_), obj)
            self.counters["tombstones_sealed"] += 1
            if isinstance(b.roster, Swarm):
                self._to_gossip(oid)
            made += 1
        return made

    def _forget(self, tx: _Txn, id_: str, bid: bytes) -> None:
        """Drop what this node keeps of an asset erased in a boundary: its document and snapshots there (only their
        ids stay, so they are not fetched again); no later snapshot of it in that boundary is taken."""
        gone = self._gone.setdefault(id_, set())
        gone.add(bid)
        tx.meta[self._name("repgone", id_)] = id_.encode() + b"".join(sorted(gone))
        tx.meta[self._doc_name(bid, id_)] = None
        self._current.pop((bid, id_), None)
        self._in_bound.get(bid, set()).discard(id_)
        if self._writers.pop((bid, id_), None) is not None:
            tx.meta[self._name("repsrc", bid.hex() + id_)] = None
        for oid in sorted(self._by_asset.get(id_, ())):
            o = self._objs[oid]
            if o.bid == bid and o.flag in (CURRENT, SEEN):
                self._put_obj(tx, oid, _Obj(o.bid, o.seq, DROPPED, o.asset), None)

    def _run_erasures(self, now: int) -> None:
        """Carry out the erasures received tombstones asked for, each recorded (``reperase``) in the same commit as
        the tombstone, and cleared once done: a crash in between leaves it to do, not undone."""
        for id_ in sorted(self._erasing):
            try:
                asset = self.store.get(id_)
            except NotFound:
                asset = None
            if asset is not None and self._reach_bid(asset) == self._erasing[id_]:
                try:
                    self._erase(id_, now)
                    self.counters["erased"] += 1
                except StoreError:
                    raise  # the store is failing: the erasure stays to do
                except GamlError:  # refused for good (say, the ladder's own checks): replication goes on
                    self.counters["erase_failed"] += 1
            del self._erasing[id_]
            self.store.write_meta({self._name("reperase", id_): None})

    # -- from objects to the store ------------------------------------------------------------------------------------

    def accept(
        self, bid: bytes, objs: Sequence[bytes], peer: str, now: int, oids: Sequence[bytes] | None = None
    ) -> tuple[int, int]:
        """Take objects a peer sent for a boundary: (accepted, rejected). See the module docstring. ``oids``: the
        objects' ids, when the caller has hashed them (the sync engine): they are not hashed again."""
        if oids is not None and len(oids) != len(objs):
            raise InvalidInput(f"{len(oids)} object ids for {len(objs)} objects")
        if not self.authorized(bid, peer):
            self.counters["rejected_unauthorized"] += len(objs)
            return 0, len(objs)
        self.pump(now)  # this node's own writes become objects before anything is merged over them
        b = self._bounds[bid]
        given: Sequence[bytes | None] = [None] * len(objs) if oids is None else oids
        if b.roster.role(self.node_id) == "relay":
            return self._carry(b, objs, given)
        forged = self.counters["rejected_forged"]
        self._deferred.clear()
        try:
            accepted, rejected = self._accept(b, objs, given, now)
        except BaseException:
            self._reset()
            raise
        if isinstance(b.roster, Swarm):
            if self.counters["rejected_forged"] > forged:
                self._strike(bid, peer, self.counters["rejected_forged"] - forged)
            met, self._writers_met = self._writers_met, set()
            self._meet(bid, met, now)
        self.pump(now)  # erasures asked for, and the derivatives this node erased with them, travel on
        self.counters["accepted"] += accepted
        return accepted, rejected

    def _accept(self, b: _Bound, objs: Sequence[bytes], oids: Sequence[bytes | None], now: int) -> tuple[int, int]:
        bid = b.boundary.id
        tx = _Txn()
        accepted = rejected = 0
        docs: dict[str, AssetDoc] = {}
        fresh: dict[str, bytes] = {}  # documents as received (not merged with anything): their bytes, unsaved
        changed: dict[str, Asset] = {}
        remerge: set[str] = set()
        # The stored records, each opened once for the batch: checked here, then written against by the node's put.
        records = Records()
        for obj, oid in zip(objs, oids, strict=True):
            reason = self._take(tx, b, obj, oid, records, docs, fresh, changed, remerge)
            if reason:
                rejected += 1
                self.counters[f"rejected_{reason}"] += 1
            else:
                accepted += 1
        for id_ in sorted(remerge):
            self._seal_snapshot(tx, bid, id_, docs[id_])
        for id_, doc in docs.items():
            if id_ not in remerge:  # a remerged one was saved as it was sealed
                tx.meta[self._doc_name(bid, id_)] = fresh[id_] if id_ in fresh else doc.save()
        self._materialize(tx, [a for _, a in sorted(changed.items())], now, records)
        self._jseq = self.store.seq  # those writes were these objects: nothing to pump back
        self.store.write_meta({self._name("repstate", "journal"): struct.pack(">Q", self._jseq)})
        return accepted, rejected

    def _take(
        self,
        tx: _Txn,
        b: _Bound,
        obj: bytes,
        oid: bytes | None,
        records: Records,
        docs: dict[str, AssetDoc],
        fresh: dict[str, bytes],
        changed: dict[str, Asset],
        remerge: set[str],
    ) -> str:
        """Check and merge one object (``oid``: its id, if known); returns why it was rejected, or ''."""
        bid = b.boundary.id
        try:
            route, epoch = peek(obj)
        except BadObject:
            return "malformed"
        if route != b.boundary.route:
            return "route"
        if oid is None:
            oid = object_id(obj)
        if (
            b.keys
            and epoch > max(b.keys)
            and b.roster.role(self.node_id) == "member"
            and not isinstance(b.roster, Swarm)
        ):
            # Sealed under an epoch this node has no key of yet: the roster that brings it is on its way (it is
            # sent beside the objects, and may arrive after them). Not a forgery; the engine asks for it again. (A
            # swarm has one epoch, ever: there such an object is forged, and counts against its sender.)
            self._deferred.add(oid)
            return "early"
        if oid in self._objs:
            self.counters["duplicates"] += 1
            return ""
        try:
            o = open_object(obj, b.keys, oid=oid)
        except BadObject:
            return "forged"
        if b.roster.role(o.writer) != "member":
            return "writer"
        id_ = o.asset_id
        if isinstance(b.roster, Swarm):
            # Open membership: only the nodes that wrote an asset here may change or erase it.
            authors = self.writers(b.boundary.id, id_)
            if authors and o.writer not in authors:
                return "not_author"
            self._writers_met.add(o.writer)
        try:
            stored: Asset | None = self.store.get(id_, include_deleted=True, records=records)
        except NotFound:
            stored = None
        local = None if stored is None or stored.tombstone else stored  # the live copy here, if any
        if o.kind == TOMBSTONE:
            # A tombstone speaks for its boundary only: it erases the asset here if the asset belongs to that
            # boundary here (a member of one boundary cannot erase what another, or this node alone, holds).
            mine = local is not None and self._reach_bid(local) == bid
            came = any(self._objs[x].bid == bid for x in self._by_asset.get(id_, ()))
            if local is not None and not mine and not came:
                return "boundary"
            self._forget(tx, id_, bid)
            for pending in (changed, docs, fresh):
                pending.pop(id_, None)
            remerge.discard(id_)
            self._seq += 1
            self._put_obj(tx, oid, _Obj(bid, self._seq, TOMB, id_), obj)
            if mine:
                self._erasing[id_] = bid
                tx.meta[self._name("reperase", id_)] = id_.encode() + bid
            return ""
        if bid in self._gone.get(id_, ()):
            self._put_obj(tx, oid, _Obj(bid, 0, DROPPED, id_), None)
            return ""
        try:
            incoming = AssetDoc.load(o.data, self.actor)
            theirs = asset_of(incoming.record())
        except (CorruptDoc, GamlError):
            return "record"
        if theirs.id != id_ or self._reach_bid(theirs) != bid:
            return "boundary"
        doc = docs.get(id_) or self._doc(tx, bid, id_)
        if doc is None:  # the first snapshot of this asset here: its record is the one just checked
            merged, before, settled, asset = incoming, None, False, theirs
            fresh[id_] = o.data  # stored as received: no second save
        else:
            before, heads_before = doc.save(), doc.heads()
            try:
                doc.merge(incoming)  # atomic: on failure the document is as it was
            except CorruptDoc:
                return "merge"
            merged = doc
            settled = heads_before == merged.heads()
            fresh.pop(id_, None)
        try:
            if before is not None:
                asset = asset_of(merged.record())
            self._check_edit(asset, stored, bid)
        except GamlError:
            if before is not None:
                docs[id_] = AssetDoc.load(before, self.actor)
            else:
                fresh.pop(id_, None)
            return "merge"
        docs[id_] = merged
        if not settled:
            changed[id_] = asset
            self._add_writer(tx, bid, id_, o.writer)
        if merged.heads() == incoming.heads():
            # Two snapshots of one state (two members sealed the same merge): every member keeps the lower id.
            held = self._current.get((bid, id_))
            if settled and held is not None and held < oid:
                self._put_obj(tx, oid, _Obj(bid, 0, SEEN, id_), obj)
            else:
                self._make_current(tx, bid, id_, oid, obj)
            remerge.discard(id_)
        else:
            self._put_obj(tx, oid, _Obj(bid, 0, SEEN, id_), obj)
            if not settled:  # a state no snapshot holds yet: this node seals it
                remerge.add(id_)
        self.counters["received"] += 1
        return ""

    def _check_edit(self, asset: Asset, stored: Asset | None, bid: bytes) -> None:
        """The merged record must still belong to this boundary (a concurrent edit may have narrowed its policy: it is
        then not sealed back where it came from), the copy here too (no member may overwrite what belongs to another
        boundary, or to this node alone); and the checks the store makes of an edit, made before the batch, so one bad
        object spoils no other."""
        if self._reach_bid(asset) != bid:
            raise InvalidAsset(f"asset {asset.id}: the merged record does not belong to this boundary")
        if stored is None:
            return
        if stored.tombstone:
            raise InvalidAsset(f"asset {asset.id} was deleted here")
        if self._reach_bid(stored) != bid:
            raise InvalidAsset(f"asset {asset.id} belongs to another boundary here")
        Store.check_identity(stored, asset)

    def _materialize(self, tx: _Txn, assets: Sequence[Asset], now: int, records: Records) -> None:
        try:
            self.node.put(assets, now, meta=tx.meta, exact_times=True, records=records)
        except StoreError:
            raise  # the store is failing, not the assets: nothing is recorded, the peer sends them again
        except GamlError:
            # One asset the store refuses must not keep the others out: write them one by one, then the records.
            for a in assets:
                try:
                    self.node.put([a], now, exact_times=True, records=records)  # stale after a write: read again
                except StoreError:
                    raise
                except GamlError:
                    self.counters["rejected_store"] += 1
            self.store.write_meta(tx.meta)
        self.counters["materialized"] += len(assets)

    def _carry(self, b: _Bound, objs: Sequence[bytes], oids: Sequence[bytes | None]) -> tuple[int, int]:
        """A relay keeps what it is given for a boundary it cannot read, and offers it on."""
        tx = _Txn()
        accepted = rejected = 0
        for obj, given in zip(objs, oids, strict=True):
            try:
                route, _ = peek(obj)
            except BadObject:
                rejected += 1
                continue
            if route != b.boundary.route:
                rejected += 1
                continue
            oid = object_id(obj) if given is None else given
            if oid not in self._objs:
                self._seq += 1
                self._put_obj(tx, oid, _Obj(b.boundary.id, self._seq, CURRENT, ""), obj)
            accepted += 1
        self.store.write_meta(tx.meta)
        self.counters["carried"] += accepted
        self.counters["rejected_malformed"] += rejected
        return accepted, rejected

    # -- what a test or `gaml peers` asks -----------------------------------------------------------------------------

    def state(self) -> dict[str, list[str]]:
        """Per boundary name, the sorted ids of the current objects: equal on members that converged."""
        return {
            b.boundary.name: sorted(o.hex() for o in self._logs.get(bid, {}).values())
            for bid, b in self._bounds.items()
        }

    def objects_of(self, bid: bytes) -> list[bytes]:
        """The ids of every object this node keeps (or kept) for a boundary."""
        return sorted(oid for oid, o in self._objs.items() if o.bid == bid)

    # -- provenance, for consensus (node.core.consensus.Provenance) -------------------------------------------------

    def boundary_of(self, asset: Asset) -> bytes | None:
        """The boundary this node holds the asset in: the one its policy reaches, if this node is a member there."""
        bid = self._reach_bid(asset)
        return bid if bid is not None and bid in self._bounds else None

    def writers(self, bid: bytes, asset_id: str) -> tuple[str, ...]:
        """The members whose verified snapshots changed the asset in that boundary here, sorted (this node for its
        own writes); () for an asset this node holds no document of there."""
        got = self._writers.get((bid, asset_id))
        if got is None:
            got = self._writers_from_objects(bid, asset_id)
        return tuple(sorted(got))

    def _writers_from_objects(self, bid: bytes, asset_id: str) -> set[str]:
        """The writers of the snapshots of an asset this node keeps, for a store replicated before writers were
        recorded (kept in memory: a read path writes nothing). Empty for a local write not sealed yet."""
        b = self._bounds.get(bid)
        if b is None:
            return set()
        oids = (
            o
            for o in self._by_asset.get(asset_id, ())
            if self._objs[o].bid == bid and self._objs[o].flag in (CURRENT, SEEN)
        )
        out = {self._writer_of(b, oid) for oid in oids} - {""}  # "": its bytes are gone, or it does not open
        if out:
            self._writers[(bid, asset_id)] = out
        return out

    def roster_of(self, bid: bytes) -> Roster | None:
        b = self._bounds.get(bid)
        return None if b is None else b.roster

    def boundary_version(self, bid: bytes) -> tuple[int, int]:
        """Changes whenever the boundary's current objects do (a write sealed or received, an erasure): how many are
        in its log, and the log's last position."""
        log = self._logs.get(bid)
        return (0, 0) if not log else (len(log), log.peekitem(-1)[0])

    def asset_ids(self, bid: bytes) -> list[str]:
        """The assets this node holds current snapshots of in a boundary."""
        return sorted(id_ for (b, id_) in self._current if b == bid)

    def doc_heads(self, ids: Iterable[str]) -> dict[str, tuple[bytes, ...]]:
        """The heads of the documents this node keeps of these assets (in any boundary)."""
        out = {}
        for id_ in ids:
            for bid in sorted(self._bounds):
                doc = self._doc(None, bid, id_)
                if doc is not None:
                    out[id_] = doc.heads()
        return out


__all__ = ["LOCAL_FIELDS", "Replica", "asset_of", "record_of"]
