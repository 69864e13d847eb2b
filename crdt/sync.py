"""The sync engine: which objects to offer, request, send and acknowledge, per peer and boundary. Pure core.

A sans-I/O state machine (h11's shape): the transport tells it that a peer connected, sent a frame, or went away,
and calls :meth:`Sync.tick` now and then; each call returns the frames to send as ``(peer, frame)`` pairs. It reads
no clock (``now`` is a parameter, microseconds, as everywhere in the core), draws nonces only from the
:class:`~policy.crypto.Entropy` it is given, and reaches the node only through the :class:`ObjectStore` protocol below.

One session per connected peer::

    Hello(nonce) both ways
    Tags: keyed_hash(boundary_id, nonce_lo | nonce_hi) for each of my boundaries (fresh per session, so only shared
          boundaries match and an outsider learns nothing about my boundary ids, not even across sessions)
    Roster(tag, ack, roster)  for each shared boundary whose roster names the peer; ``ack`` is a digest of the peer's
          roster I hold. Every roster is answered: with mine if the ack shows the peer lacks it, else with an
          ack-only Roster (empty roster). So each side learns that the other holds its current roster, and resends
          (backing off) until it does
    Have(tag, ids, upto) -> Need(tag, ids I lack) -> Send(tag, objects, missing)... -> Ack(tag, upto)

Why these rules:

- **Nothing naming an object before authorization.** A boundary is *open* for a peer only when my replica says the
  peer is in my current roster (``replica.authorized``) *and* the peer's roster arrived and was accepted in this
  session. Have, Need, Send and Ack are sent only on open boundaries and ignored (and counted) on others, and
  authorization is asked again for every one of them, in and out: a roster that drops the peer closes the boundary
  at once.
- **Resumable, and idempotent under loss, duplication and reordering.** The per-(peer, boundary) cursor is
  persisted by the replica and advances only on the Ack of the outstanding Have (matched by ``upto``). Anything lost
  is recovered by a retry after ``retry_after``: a Have from the cursor again (the peer asks only for what it still
  lacks), a roster the peer has not acked, or a whole handshake with a fresh nonce. Have and roster retries that go
  unanswered back off (up to ``retry_after * 2**BACKOFF_MAX``), so a peer that refuses us (say, one whose newer
  roster has removed us) costs a frame now and then, not a stream. Stale frames (another session's
  tags, another batch's ``upto``, objects nobody asked for) are ignored. Objects are matched to requests by their id
  (sha256 of the bytes, as in crdt/objects.py), so a peer cannot push anything that was not asked for.
- **Bounded.** One outstanding Have batch per (peer, boundary) of at most ``batch`` ids; a Need is capped at that
  Have's ids; Send frames are at most ``max_send_bytes`` (or one object, when it alone is larger), and one call
  emits at most :data:`SEND_FRAMES_PER_STEP` of them per link, the rest on later ticks.

**Peer reads** (``Ask`` → ``Answer``): :meth:`Sync.ask` asks up to ``fan_out`` peers, on every listed boundary that
is open for them, for the objects that best match a text (the replica ranks them: ``ObjectStore.answer``). They are
asked only on open boundaries (so only members that may hold those objects hear the text), the answer is matched to
the ask by its id, peer and boundary, and its objects go through ``ObjectStore.accept`` like any Send: verified before
they count, and stored (a peer read also replicates what it brings). An answer that nobody asked for, or that comes
after :meth:`Sync.finish`, is dropped and counted. A peer may have at most :data:`ASKS_PER_WINDOW` asks answered per
``retry_after``; beyond that it gets an empty answer (counted as refused), so a member cannot make another rank for
it without end.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from gaml.crdt import wire
from gaml.crdt.errors import BadMessage, SyncError
from gaml.crdt.objects import object_id
from gaml.crdt.wire import Ack, Answer, Ask, Have, Hello, Message, Need, Roster, Send, Tags
from gaml.policy.crypto import Entropy, keyed_hash
from gaml.policy.errors import GamlError, StoreError

Effect = tuple[str, bytes]  # (peer node id, frame to send it)

DEFAULT_RETRY_AFTER: Final = 5_000_000  # microseconds, the unit of ``now``
SEND_FRAMES_PER_STEP: Final = 8  # Send frames one link may emit per call; the rest go out on later ticks
FETCH_IDS: Final = 32  # ids per replica.objects call while sending
ANNOUNCE_SKIPS_MAX: Final = 64  # log stretches without current objects skipped per announcement (a bounded loop)
BACKOFF_MAX: Final = 3  # the n-th resend of an unanswered roster or Have waits retry_after * 2**min(n, this)
MIN_SEND_BYTES: Final = wire.SEND_BASE_BYTES + FETCH_IDS * wire.ID_BYTES  # room for one fetch's missing ids
ASKS_PER_WINDOW: Final = 32  # asks one peer may have answered per retry_after; the rest get an empty answer


class ObjectStore(Protocol):
    """What the engine needs from a node (node/core/replica.py; in-memory fakes in the tests)."""

    node_id: str

    @property
    def lineage(self) -> bytes:
        """8 bytes naming this store's history: new when it was restored from a backup."""
        ...

    def met(self, peer: str, lineage: bytes) -> bool:
        """The lineage the peer's Hello gave. When it differs from the one last seen of that peer, the peer's store
        was restored from a backup (or replaced) and may lack what I sent it: forget its cursors, so that my whole
        log is offered again (it asks only for what it lacks). True if they were forgotten."""
        ...

    def boundary_ids(self) -> list[bytes]:
        """The boundaries this node replicates."""
        ...

    def authorized(self, bid: bytes, peer: str) -> bool:
        """The peer is in my current roster of ``bid`` (member or relay)."""
        ...

    def roster(self, bid: bytes) -> bytes:
        """My current roster of ``bid``, encoded."""
        ...

    def offer_roster(self, bid: bytes, data: bytes, peer: str, now: int) -> None:
        """Verify a roster a peer sent; adopt it if newer. Raises a GamlError (BadRoster) if it does not verify."""
        ...

    def log_after(self, bid: bytes, cursor: int, limit: int) -> tuple[list[bytes], int]:
        """Up to ``limit`` current object ids after ``cursor`` in log order, and the log position reached."""
        ...

    def has(self, oid: bytes) -> bool: ...

    def objects(self, bid: bytes, oids: Sequence[bytes]) -> list[bytes]:
        """The bytes of those of ``oids`` it holds (any order)."""
        ...

    def accept(
        self, bid: bytes, objs: Sequence[bytes], peer: str, now: int, oids: Sequence[bytes] | None = None
    ) -> tuple[int, int]:
        """Verify and store objects a peer sent: (accepted, rejected). ``oids``: their ids (``object_id`` of each, in
        order), when the caller has them: the engine matched every object to a request by its id."""
        ...

    def deferred(self, oids: Sequence[bytes]) -> set[bytes]:
        """Which of these objects, just given to :meth:`accept`, the node could not open *yet* (sealed under an
        epoch whose key has not reached it: the roster that carries it is still on its way) and wants sent again."""
        ...

    def cursor(self, bid: bytes, peer: str) -> int:
        """How far in my log of ``bid`` the peer has acknowledged (persisted)."""
        ...

    def answer(self, bid: bytes, text: str, k: int, now: int) -> list[bytes]:
        """A peer read: the bytes of up to ``k`` current objects of ``bid`` whose assets best match ``text``, best
        first, this node's latest writes included (none where it cannot open the boundary's objects: a relay)."""
        ...

    def set_cursor(self, bid: bytes, peer: str, upto: int) -> None: ...


@dataclasses.dataclass(frozen=True, slots=True)
class PeerStats:
    """Counters of one peer since this engine started (all sessions), and its boundaries open now."""

    frames_in: int = 0
    frames_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    bad_frames: int = 0  # did not decode
    stale_frames: int = 0  # another session's or batch's frames, or frames without a session: ignored
    refused_frames: int = 0  # about a boundary not open for this peer: ignored
    bad_rosters: int = 0  # rosters the replica refused
    sessions: int = 0  # connections
    restarts: int = 0  # stalled handshakes restarted with a fresh nonce
    retries: int = 0  # Have batches resent after retry_after without an Ack
    cursor_resets: int = 0  # the peer came back with a restored store: my log offered again from the start
    ids_heard: int = 0  # object ids received in Have frames
    objects_sent: int = 0
    objects_received: int = 0  # in Send frames, requested or not
    objects_accepted: int = 0
    objects_rejected: int = 0
    objects_deferred: int = 0  # could not be opened yet (a key on its way): asked for again, not acknowledged
    objects_unrequested: int = 0  # received without being needed (duplicates, stale batches): dropped
    asks_sent: int = 0  # peer reads sent to this peer (one per boundary)
    answers_received: int = 0  # answers to them that arrived in time
    asks_answered: int = 0  # the peer's reads this node answered
    asks_refused: int = 0  # … and answered empty: over ASKS_PER_WINDOW
    open_boundaries: int = 0


_COUNTERS: Final = tuple(f.name for f in dataclasses.fields(PeerStats) if f.name != "open_boundaries")


def roster_digest(roster: bytes) -> bytes:
    """What a Roster frame's ``ack`` holds: a short digest of the roster the sender holds of the receiver."""
    return hashlib.blake2b(roster, digest_size=wire.ACK_BYTES).digest()


def boundary_tag(bid: bytes, nonce_a: bytes, nonce_b: bytes) -> bytes:
    """The tag of boundary ``bid`` in the session of these two nonces (in either order)."""
    lo, hi = sorted((nonce_a, nonce_b))
    return keyed_hash(bid, lo + hi, wire.TAG_BYTES)


@dataclasses.dataclass(slots=True)
class _Outgoing:
    """The one Have batch I have offered a peer on one boundary and not yet seen acknowledged."""

    upto: int
    ids: frozenset[bytes]
    last: int  # when I last sent for this batch or heard a Need for it
    queue: collections.deque[bytes] = dataclasses.field(default_factory=collections.deque)  # needed, not fetched
    ready: collections.deque[tuple[bytes, bytes]] = dataclasses.field(default_factory=collections.deque)  # fetched
    queued: set[bytes] = dataclasses.field(default_factory=set)  # ids in queue or ready


@dataclasses.dataclass(slots=True)
class _Incoming:
    """The peer's last Have on one boundary while I wait for the objects I needed from it."""

    upto: int
    pending: set[bytes]


@dataclasses.dataclass(slots=True)
class _Link:
    """One of my boundaries within one session."""

    bid: bytes
    tag: bytes
    common: bool = False  # the peer has it too (its Tags or Roster named it)
    have_theirs: bool = False  # the peer's roster arrived and was accepted in this session
    their_digest: bytes = wire.NO_ACK  # digest of the peer's roster I hold: my ack
    acked: bytes = wire.NO_ACK  # digest of my roster the peer holds: its ack
    sent_digest: bytes = wire.NO_ACK  # digest of my roster as I last sent it
    roster_at: int = 0
    roster_tries: int = 0
    have_tries: int = 0  # Have retries since the peer last sent anything on this link
    out: _Outgoing | None = None
    inc: _Incoming | None = None

    def close(self) -> None:
        self.out = None
        self.inc = None


@dataclasses.dataclass(frozen=True, slots=True)
class Answered:
    """One peer's answer to a peer read on one boundary."""

    peer: str
    bid: bytes
    at: int  # when it arrived (``now`` of the call that received it)
    oids: tuple[bytes, ...]  # the objects it returned, in its order (at most the ask's k)
    new: int  # of them not held here before: given to the replica
    accepted: int
    rejected: int  # did not verify (a forged signature, another boundary's object, …): they count for nothing


@dataclasses.dataclass(frozen=True, slots=True)
class AskReport:
    """What became of a peer read when it was finished: who was asked, who answered, who did not in time."""

    qid: bytes
    started: int
    asked: tuple[tuple[str, bytes], ...]  # (peer, boundary), in the order asked
    answers: tuple[Answered, ...]  # in arrival order
    unanswered: tuple[tuple[str, bytes], ...]  # asked, no answer by the finish


@dataclasses.dataclass(slots=True)
class _Ask:
    started: int
    k: int
    asked: dict[tuple[str, bytes], None]
    answers: dict[tuple[str, bytes], Answered] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(slots=True)
class _Session:
    nonce: bytes
    started: int
    boundaries: frozenset[bytes]
    their_nonce: bytes | None = None
    tags_seen: bool = False
    links: dict[bytes, _Link] = dataclasses.field(default_factory=dict)  # by tag
    by_bid: dict[bytes, _Link] = dataclasses.field(default_factory=dict)


class Sync:
    """The sync engine of one node. Not thread-safe; the transport calls it from one task."""

    def __init__(
        self,
        replica: ObjectStore,
        entropy: Entropy,
        *,
        batch: int = 256,
        max_send_bytes: int = 1 << 20,
        retry_after: int = DEFAULT_RETRY_AFTER,
    ) -> None:
        if not 1 <= batch <= wire.MAX_IDS:
            raise SyncError(f"batch is 1..{wire.MAX_IDS} ids, not {batch}")
        if not MIN_SEND_BYTES <= max_send_bytes <= wire.MAX_FRAME_BYTES:
            raise SyncError(f"max_send_bytes is {MIN_SEND_BYTES}..{wire.MAX_FRAME_BYTES}, not {max_send_bytes}")
        if retry_after <= 0:
            raise SyncError("retry_after is positive")
        self._replica = replica
        self._entropy = entropy
        self._batch = batch
        self._max_send_bytes = max_send_bytes
        self._retry_after = retry_after
        self._sessions: dict[str, _Session] = {}
        self._counts: dict[str, dict[str, int]] = {}
        self._asks: dict[bytes, _Ask] = {}  # peer reads this node started and has not finished, by qid
        self._asked_of_me: dict[str, tuple[int, int]] = {}  # peer -> (its window's start, asks answered in it)

    # -- events ----------------------------------------------------------------------------------------------------

    def connected(self, peer: str, now: int) -> list[Effect]:
        """A connection to ``peer`` is up: start a session (replacing any previous one)."""
        self._count(peer)["sessions"] += 1
        out: list[Effect] = []
        self._start(peer, now, out)
        return out

    def disconnected(self, peer: str) -> None:
        """The connection is gone: forget the session (the cursors stay with the replica)."""
        self._sessions.pop(peer, None)

    def received(self, peer: str, frame: bytes, now: int) -> list[Effect]:
        """A frame from ``peer``. Malformed, stale or unauthorized frames are counted and dropped; never raises."""
        c = self._count(peer)
        c["frames_in"] += 1
        c["bytes_in"] += len(frame)
        s = self._sessions.get(peer)
        if s is None:
            c["stale_frames"] += 1
            return []
        try:
            msg = wire.decode(frame)
        except BadMessage:
            c["bad_frames"] += 1
            return []
        out: list[Effect] = []
        if isinstance(msg, Hello):
            if msg.lineage and msg.nonce != s.their_nonce and self._replica.met(peer, msg.lineage):
                self._count(peer)["cursor_resets"] += 1
            self._on_hello(peer, s, msg.nonce, now, out)
        elif isinstance(msg, Tags):
            self._on_tags(peer, s, msg, now, out)
        elif isinstance(msg, Roster):
            self._on_roster(peer, s, msg, now, out)
        else:
            link = self._data_link(peer, s, msg.tag)
            if link is not None:
                if isinstance(msg, Have):
                    self._on_have(peer, link, msg, out)
                elif isinstance(msg, Need):
                    self._on_need(peer, link, msg, now, out)
                elif isinstance(msg, Send):
                    self._on_send(peer, link, msg, now, out)
                elif isinstance(msg, Ack):
                    self._on_ack(peer, link, msg, now, out)
                elif isinstance(msg, Ask):
                    self._on_ask(peer, link, msg, now, out)
                else:
                    self._on_answer(peer, link, msg, now)
        return out

    def tick(self, now: int) -> list[Effect]:
        """Announce new log entries, send queued objects, resend what went unanswered, restart stalled handshakes."""
        out: list[Effect] = []
        mine = frozenset(self._replica.boundary_ids())
        for peer in sorted(self._sessions):
            s = self._sessions[peer]
            if s.boundaries != mine:  # I joined or left a boundary: tags must be recomputed
                self._count(peer)["restarts"] += 1
                self._start(peer, now, out)
                continue
            if s.their_nonce is None or not s.tags_seen:
                if now - s.started >= self._retry_after:
                    self._count(peer)["restarts"] += 1
                    self._start(peer, now, out)
                continue
            for link in s.links.values():
                if link.common:
                    self._tick_link(peer, link, now, out)
        return out

    # -- peer reads --------------------------------------------------------------------------------------------------

    def ask(
        self,
        qid: bytes,
        text: str,
        k: int,
        bids: Sequence[bytes],
        fan_out: int,
        now: int,
        *,
        who: Callable[[str, bytes], bool] | None = None,
    ) -> tuple[list[Effect], list[tuple[str, bytes]]]:
        """Start peer read ``qid``: ask up to ``fan_out`` peers for ``k`` objects matching ``text`` on each of
        ``bids`` open for them now (and, if given, for which ``who(peer, bid)`` holds: the node asks members, not
        relays). The peers are taken in an order drawn from ``qid`` (repeated reads spread over a boundary's
        members). Returns the frames and the (peer, boundary) pairs asked; none when no peer is open on any of
        ``bids``. Finish it with :meth:`finish`."""
        if len(qid) != wire.QID_BYTES or qid in self._asks:
            raise SyncError(f"a peer read needs a fresh {wire.QID_BYTES}-byte id")
        if not 1 <= k <= wire.MAX_ASK_K or fan_out < 1:
            raise SyncError(f"a peer read asks for 1..{wire.MAX_ASK_K} objects of at least one peer")
        wanted = sorted(set(bids))
        order = sorted(self._sessions, key=lambda p: (keyed_hash(qid, p.encode(), 8), p))
        asked: dict[tuple[str, bytes], None] = {}
        out: list[Effect] = []
        peers = 0
        for peer in order:
            s = self._sessions[peer]
            links = [
                s.by_bid[b]
                for b in wanted
                if b in s.by_bid and self._is_open(peer, s.by_bid[b]) and (who is None or who(peer, b))
            ]
            if not links:
                continue
            for link in links:
                asked[(peer, link.bid)] = None
                self._count(peer)["asks_sent"] += 1
                self._emit(peer, Ask(link.tag, qid, k, text), out)
            peers += 1
            if peers == fan_out:
                break
        self._asks[qid] = _Ask(now, k, asked)
        return out, list(asked)

    def pending(self, qid: bytes) -> int:
        """How many of the read's (peer, boundary) asks have no answer yet (0 for a read not started)."""
        a = self._asks.get(qid)
        return 0 if a is None else len(a.asked) - len(a.answers)

    def finish(self, qid: bytes) -> AskReport:
        """End a peer read (an answer after this is dropped) and say what became of it."""
        a = self._asks.pop(qid, None)
        if a is None:
            raise SyncError("no such peer read")
        unanswered = tuple(key for key in a.asked if key not in a.answers)
        return AskReport(qid, a.started, tuple(a.asked), tuple(a.answers.values()), unanswered)

    def _on_ask(self, peer: str, link: _Link, msg: Ask, now: int, out: list[Effect]) -> None:
        c = self._count(peer)
        start, n = self._asked_of_me.get(peer, (now, 0))
        if now - start >= self._retry_after:
            start, n = now, 0
        self._asked_of_me[peer] = (start, n + 1)
        if n >= ASKS_PER_WINDOW:
            c["asks_refused"] += 1
            self._emit(peer, Answer(link.tag, msg.qid, ()), out)
            return
        objs: list[bytes] = []
        size = wire.SEND_BASE_BYTES + wire.QID_BYTES
        for obj in self._replica.answer(link.bid, msg.text, msg.k, now)[: msg.k]:
            cost = wire.send_object_cost(len(obj))
            if len(obj) > wire.MAX_OBJECT_BYTES or (objs and size + cost > self._max_send_bytes):
                break
            objs.append(obj)
            size += cost
        c["asks_answered"] += 1
        c["objects_sent"] += len(objs)
        self._emit(peer, Answer(link.tag, msg.qid, tuple(objs)), out)

    def _on_answer(self, peer: str, link: _Link, msg: Answer, now: int) -> None:
        c = self._count(peer)
        c["objects_received"] += len(msg.objects)
        a = self._asks.get(msg.qid)
        key = (peer, link.bid)
        if a is None or key not in a.asked or key in a.answers:
            c["stale_frames"] += 1
            c["objects_unrequested"] += len(msg.objects)
            return
        c["answers_received"] += 1
        objs = msg.objects[: a.k]
        c["objects_unrequested"] += len(msg.objects) - len(objs)
        got: dict[bytes, bytes] = {}
        for obj in objs:
            got.setdefault(object_id(obj), obj)
        new = {oid: obj for oid, obj in got.items() if not self._replica.has(oid)}
        accepted = rejected = 0
        if new:
            accepted, rejected = self._replica.accept(link.bid, list(new.values()), peer, now, oids=list(new))
            c["objects_accepted"] += accepted
            c["objects_rejected"] += rejected
            c["objects_deferred"] += len(self._replica.deferred(list(new)))
        a.answers[key] = Answered(peer, link.bid, now, tuple(got), len(new), accepted, rejected)

    def peers(self) -> list[str]:
        """The peers with a session now (connected), sorted."""
        return sorted(self._sessions)

    def boundary_stats(self) -> dict[bytes, dict[str, int]]:
        """Per boundary open with some peer now: ``peers`` (sessions where it is open), ``unacked`` (objects I
        offered that are not acknowledged yet) and ``awaited`` (objects I need from peers and have not received):
        the replication still to do, as far as this node can see it."""
        out: dict[bytes, dict[str, int]] = {}
        for peer, s in self._sessions.items():
            for link in s.links.values():
                if not self._is_open(peer, link):
                    continue
                b = out.setdefault(link.bid, {"peers": 0, "unacked": 0, "awaited": 0})
                b["peers"] += 1
                b["unacked"] += len(link.out.ids) if link.out is not None else 0
                b["awaited"] += len(link.inc.pending) if link.inc is not None else 0
        return out

    def stats(self) -> dict[str, PeerStats]:
        """Per peer: counters since start, and how many boundaries are open for it now."""
        result = {}
        for peer in sorted(self._counts):
            s = self._sessions.get(peer)
            opened = sum(1 for link in s.links.values() if self._is_open(peer, link)) if s else 0
            result[peer] = PeerStats(**self._counts[peer], open_boundaries=opened)
        return result

    # -- handshake -------------------------------------------------------------------------------------------------

    def _start(self, peer: str, now: int, out: list[Effect]) -> None:
        nonce = self._entropy.random_bytes(wire.NONCE_BYTES)
        self._sessions[peer] = _Session(nonce, now, frozenset(self._replica.boundary_ids()))
        self._emit(peer, Hello(nonce, self._replica.lineage), out)

    def _on_hello(self, peer: str, s: _Session, nonce: bytes, now: int, out: list[Effect]) -> _Session:
        if nonce == s.their_nonce:
            return s  # a duplicate
        if s.their_nonce is not None:  # the peer restarted its side: so do I, keeping my nonce
            s = _Session(s.nonce, now, frozenset(self._replica.boundary_ids()))
            self._sessions[peer] = s
        s.their_nonce = nonce
        for bid in sorted(s.boundaries):  # fixed order: a simulated run must not depend on hashing
            link = _Link(bid, boundary_tag(bid, s.nonce, nonce))
            s.links[link.tag] = link
            s.by_bid[bid] = link
        self._emit(peer, Hello(s.nonce, self._replica.lineage), out)  # the peer may not have mine (lost, restarted)
        self._emit(peer, Tags(s.nonce, nonce, tuple(sorted(s.links))), out)
        return s

    def _on_tags(self, peer: str, s: _Session, msg: Tags, now: int, out: list[Effect]) -> None:
        if msg.echo != s.nonce:
            self._count(peer)["stale_frames"] += 1
            return
        if s.their_nonce is None:  # its Hello was lost or is late; the Tags carry its nonce too
            s = self._on_hello(peer, s, msg.nonce, now, out)
        elif msg.nonce != s.their_nonce:
            self._count(peer)["stale_frames"] += 1
            return
        s.tags_seen = True
        for tag in msg.tags:
            link = s.links.get(tag)
            if link is not None and not link.common:
                link.common = True
                if self._replica.authorized(link.bid, peer):
                    self._send_roster(peer, link, now, out)

    def _on_roster(self, peer: str, s: _Session, msg: Roster, now: int, out: list[Effect]) -> None:
        link = s.links.get(msg.tag)
        if link is None:
            self._count(peer)["stale_frames"] += 1
            return
        if not msg.roster:  # ack only
            link.acked = msg.ack
            return
        try:
            self._replica.offer_roster(link.bid, msg.roster, peer, now)
        except StoreError:
            raise
        except GamlError:
            self._count(peer)["bad_rosters"] += 1
            return
        link.common = link.have_theirs = True
        link.their_digest = roster_digest(msg.roster)
        link.acked = msg.ack
        if not self._replica.authorized(link.bid, peer):
            link.close()
            return
        if msg.ack != roster_digest(self._replica.roster(link.bid)):
            self._send_roster(peer, link, now, out)  # it lacks my current roster: the reply carries my ack
        else:
            self._emit(peer, Roster(link.tag, link.their_digest, b""), out)
        self._announce(peer, link, now, out)

    def _send_roster(self, peer: str, link: _Link, now: int, out: list[Effect]) -> None:
        data = self._replica.roster(link.bid)
        if not data:
            raise SyncError("replica.roster returned no bytes")  # an empty roster means "ack only" on the wire
        digest = roster_digest(data)
        link.roster_tries = link.roster_tries + 1 if digest == link.sent_digest else 0
        link.sent_digest = digest
        link.roster_at = now
        self._emit(peer, Roster(link.tag, link.their_digest, data), out)

    # -- data ------------------------------------------------------------------------------------------------------

    def _is_open(self, peer: str, link: _Link) -> bool:
        return link.have_theirs and self._replica.authorized(link.bid, peer)

    def _data_link(self, peer: str, s: _Session, tag: bytes) -> _Link | None:
        link = s.links.get(tag)
        if link is None:
            self._count(peer)["stale_frames"] += 1
            return None
        if not self._is_open(peer, link):
            self._count(peer)["refused_frames"] += 1
            link.close()
            return None
        link.have_tries = 0  # the peer is there: retry at the base interval
        return link

    def _on_have(self, peer: str, link: _Link, msg: Have, out: list[Effect]) -> None:
        self._count(peer)["ids_heard"] += len(msg.ids)
        need = tuple(dict.fromkeys(i for i in msg.ids if not self._replica.has(i)))
        if need:
            link.inc = _Incoming(msg.upto, set(need))
            self._emit(peer, Need(link.tag, need), out)
        else:
            link.inc = None
            self._emit(peer, Ack(link.tag, msg.upto), out)

    def _on_need(self, peer: str, link: _Link, msg: Need, now: int, out: list[Effect]) -> None:
        o = link.out
        if o is None:
            self._count(peer)["stale_frames"] += 1
            return
        for oid in msg.ids:
            if oid in o.ids and oid not in o.queued:  # capped at the Have's ids
                o.queue.append(oid)
                o.queued.add(oid)
        o.last = now
        self._drain(peer, link, now, out)

    def _on_send(self, peer: str, link: _Link, msg: Send, now: int, out: list[Effect]) -> None:
        c = self._count(peer)
        c["objects_received"] += len(msg.objects)
        inc = link.inc
        if inc is None:
            c["stale_frames"] += 1
            c["objects_unrequested"] += len(msg.objects)
            return
        wanted: list[bytes] = []
        got: dict[bytes, None] = {}  # the ids of ``wanted``, in order
        for obj in msg.objects:
            oid = object_id(obj)
            if oid in inc.pending and oid not in got:
                got[oid] = None
                wanted.append(obj)
        c["objects_unrequested"] += len(msg.objects) - len(wanted)
        again: set[bytes] = set()
        if wanted:
            accepted, rejected = self._replica.accept(link.bid, wanted, peer, now, oids=list(got))
            c["objects_accepted"] += accepted
            c["objects_rejected"] += rejected
            again = self._replica.deferred(list(got))
            c["objects_deferred"] += len(again)
        # An object the node cannot open yet stays pending: no Ack, so the peer offers it again (its Have retry)
        # once the roster with the key has arrived, instead of its cursor passing it for good.
        inc.pending.difference_update(o for o in got if o not in again)
        inc.pending.difference_update(msg.missing)
        if not inc.pending:
            link.inc = None
            self._emit(peer, Ack(link.tag, inc.upto), out)
        if wanted:  # pass them on at once to the other peers of this boundary that are idle
            for other in sorted(self._sessions):
                other_link = self._sessions[other].by_bid.get(link.bid)
                if other != peer and other_link is not None and other_link.out is None:
                    self._announce(other, other_link, now, out)

    def _on_ack(self, peer: str, link: _Link, msg: Ack, now: int, out: list[Effect]) -> None:
        o = link.out
        if o is None or o.upto != msg.upto:
            self._count(peer)["stale_frames"] += 1
            return
        self._replica.set_cursor(link.bid, peer, msg.upto)
        link.out = None
        self._announce(peer, link, now, out)

    def _tick_link(self, peer: str, link: _Link, now: int, out: list[Effect]) -> None:
        if not self._replica.authorized(link.bid, peer):
            link.close()
            return
        mine = roster_digest(self._replica.roster(link.bid))
        if link.acked != mine:
            wait = self._retry_after << min(link.roster_tries, BACKOFF_MAX)
            if link.sent_digest != mine or now - link.roster_at >= wait:
                self._send_roster(peer, link, now, out)
        if not link.have_theirs:
            return
        o = link.out
        if o is None:
            self._announce(peer, link, now, out)
        elif o.queue or o.ready:
            self._drain(peer, link, now, out)
        elif now - o.last >= self._retry_after << min(link.have_tries, BACKOFF_MAX):
            self._count(peer)["retries"] += 1
            link.have_tries += 1
            link.out = None
            self._announce(peer, link, now, out)

    def _announce(self, peer: str, link: _Link, now: int, out: list[Effect]) -> None:
        """Offer the next batch of my log after the peer's cursor, if nothing is outstanding and there is one."""
        if link.out is not None or not self._is_open(peer, link):
            return
        cursor = self._replica.cursor(link.bid, peer)
        for _ in range(ANNOUNCE_SKIPS_MAX):
            ids, upto = self._replica.log_after(link.bid, cursor, self._batch)
            if ids:
                break
            if upto <= cursor:
                return
            self._replica.set_cursor(link.bid, peer, upto)  # a stretch with nothing current: nothing to offer
            cursor = upto
        else:
            return
        if upto <= cursor or len(ids) > self._batch:
            raise SyncError(f"replica.log_after broke its contract: {len(ids)} ids, cursor {cursor} -> {upto}")
        link.out = _Outgoing(upto, frozenset(ids), now)
        self._emit(peer, Have(link.tag, tuple(ids), upto), out)

    def _drain(self, peer: str, link: _Link, now: int, out: list[Effect]) -> None:
        """Send needed objects of the outstanding batch: frames of at most max_send_bytes, a few per call."""
        o = link.out
        assert o is not None
        frames = 0
        objs: list[bytes] = []
        missing: list[bytes] = []
        size = wire.SEND_BASE_BYTES
        while frames < SEND_FRAMES_PER_STEP:
            if not o.ready:
                if not o.queue:
                    break
                if (objs or missing) and size + FETCH_IDS * wire.ID_BYTES > self._max_send_bytes:
                    self._send_objects(peer, link, objs, missing, out)  # no room left for this fetch's missing ids
                    frames += 1
                    objs, missing, size = [], [], wire.SEND_BASE_BYTES
                    continue
                ids = [o.queue.popleft() for _ in range(min(FETCH_IDS, len(o.queue)))]
                held: dict[bytes, bytes] = {}
                for obj in self._replica.objects(link.bid, ids):
                    if len(obj) <= wire.MAX_OBJECT_BYTES:
                        held[object_id(obj)] = obj
                for oid in ids:
                    if oid in held:
                        o.ready.append((oid, held[oid]))
                    else:  # gone since the Have (superseded, or never held): tell the peer not to wait for it
                        missing.append(oid)
                        o.queued.discard(oid)
                        size += wire.ID_BYTES
                continue
            oid, obj = o.ready[0]
            cost = wire.send_object_cost(len(obj))
            if (objs or missing) and size + cost > self._max_send_bytes:
                self._send_objects(peer, link, objs, missing, out)
                frames += 1
                objs, missing, size = [], [], wire.SEND_BASE_BYTES
                continue
            o.ready.popleft()
            o.queued.discard(oid)
            objs.append(obj)
            size += cost
        if objs or missing:
            self._send_objects(peer, link, objs, missing, out)
            frames += 1
        if frames:
            o.last = now

    def _send_objects(self, peer: str, link: _Link, objs: list[bytes], missing: list[bytes], out: list[Effect]) -> None:
        self._count(peer)["objects_sent"] += len(objs)
        self._emit(peer, Send(link.tag, tuple(objs), tuple(missing)), out)

    # -- plumbing --------------------------------------------------------------------------------------------------

    def _count(self, peer: str) -> dict[str, int]:
        c = self._counts.get(peer)
        if c is None:
            c = self._counts[peer] = dict.fromkeys(_COUNTERS, 0)
        return c

    def _emit(self, peer: str, msg: Message, out: list[Effect]) -> None:
        frame = wire.encode(msg)
        c = self._count(peer)
        c["frames_out"] += 1
        c["bytes_out"] += len(frame)
        out.append((peer, frame))
