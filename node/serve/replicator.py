"""Replication in the daemon: the libp2p host, the sync engine and the node's replica, wired across two threads.

- The **libp2p host** (:class:`crdt.p2p.P2PHost`) runs in the daemon's trio guest (the loop thread). Its callbacks only
  queue events (connected, frame, disconnected) on one trio channel, in arrival order.
- One trio task drains that channel in batches and hands each batch to the **core thread** (the daemon's
  :class:`node.daemon.CoreLane`), where the sync engine (:class:`crdt.sync.Sync`) and the replica
  (:class:`node.replica.Replica`) live beside the store. The frames they return go back to the host's send queues.
  Every touch of the core happens on the core thread, one at a time, as for gRPC calls.
- A **tick** (every ``tick_s``, and right after a local write: :meth:`Replicator.poke`) runs ``settle`` (the node's
  consensus records whose decision changed are written), ``replica.pump`` (the journal's new writes become objects)
  and ``sync.tick`` (announcements, retries).
- **Peer reads** (:meth:`Replicator.ask`): a search or hydration that asks the members of the caller's boundaries for
  candidates. The core thread picks the boundaries and starts the read in the sync engine; the answers arrive as
  frames and are verified and stored like any other objects; the read ends when every peer asked has answered or at
  its deadline, whichever comes first, and says who answered, who did not, and which assets came back.
- **Gossip** (when this node is in the public swarm): the swarm's objects this node writes are also published on the
  swarm's gossipsub topic, bundled (:mod:`crdt.swarm`), at most :data:`GOSSIP_BYTES_PER_TICK` a tick; a message
  is judged on the trio thread before gossipsub delivers or forwards it (``check_gossip``: a verifiably bad one is
  refused, costs its forwarder gossip score and is a strike against it in the swarm); a good one is handed to the
  core thread and accepted like objects from sync. Each peer's application score in gossip is its claim reputation
  in the swarm (consensus), recomputed every :data:`STATUS_EVERY_S`; a banned peer is shut out of gossip.
- **Rendezvous** (in the public swarm, with gossip): every ``rendezvous_s`` this node announces its dialable
  addresses on the swarm's peers topic (:func:`crdt.swarm.peers_topic`); when it hears of a swarm node it is not
  connected to (never one it banned) and has fewer than :data:`SWARM_PEERS` connections, it dials it, at most
  :data:`RENDEZVOUS_DIALS` at a time: swarm nodes find each other through the peers they know, beyond their bootstrap
  addresses and the LAN.
- A **status file**, ``HOME/run/replication.json`` (0600), says what ``gaml peers`` shows while the daemon runs: this
  node's addresses, the boundaries and members (no key, no object id), the peers connected now and per-peer counters.

Time for the engine and the replica is wall-clock microseconds (the unit of asset times); the engine's retry delay is
in the same unit.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import trio

from gaml.crdt import wire
from gaml.crdt.errors import BadMessage, BadObject, NotConnected, P2PError, SendQueueFull
from gaml.crdt.membership import Boundary
from gaml.crdt.objects import object_id
from gaml.crdt.p2p import GossipParams, P2PHost, peer_id_of
from gaml.crdt.swarm import (
    GOSSIP_MAX_BYTES,
    GOSSIP_MAX_OBJECTS,
    Swarm,
    announcement,
    bundles,
    check_announcement,
    check_gossip,
    gossip_score,
    gossip_topic,
    peers_topic,
    unbundle,
)
from gaml.crdt.sync import AskReport, Sync
from gaml.node.core.replica import Replica
from gaml.node.shells.files import read_sealed_json, write_sealed_json
from gaml.policy import crypto
from gaml.policy.access import Principal
from gaml.policy.errors import InvalidInput, PolicyError
from gaml.policy.keychain import NODE_MASTER_REF, Keychain
from gaml.policy.replication import DEVICES, PUBLIC

T = TypeVar("T")
RETRY_US: Final = 2_000_000
STATUS_EVERY_S: Final = 1.0
SETTLE_EVERY_S: Final = 2.0  # consensus records are written at most this often (a changed boundary refolds its ledger)
BATCH: Final = 256  # events handed to the core thread at once …
# … and frame bytes: objects are accepted (decrypted, merged, embedded, written) in jobs of about this size, so a
# gRPC call waiting behind an initial sync waits for one job (~0.3 s), not for the whole Send queue.
BATCH_BYTES: Final = 128 << 10
# Gossip published per tick, at most (the rest waits for the next tick): a few messages a second, as gossipsub limits
# what each forwarder sends a second (crdt.p2p.GossipParams.max_per_second).
GOSSIP_OBJECTS_PER_TICK: Final = 2 * GOSSIP_MAX_OBJECTS
GOSSIP_BYTES_PER_TICK: Final = GOSSIP_MAX_BYTES
Reputation = Callable[[bytes, int], Callable[[str], float]]  # (boundary, now) -> node -> its reputation, 0..1
RENDEZVOUS_S: Final = 10.0  # between two announcements of this node's addresses (the first once a peer is connected)
RENDEZVOUS_DIALS: Final = 4  # swarm nodes heard of by rendezvous being dialled at once, at most …
SWARM_PEERS: Final = 16  # … and none while this many peers are connected

log = logging.getLogger("gaml.daemon")


def now_us() -> int:
    return time.time_ns() // 1000


STATUS_KEY_TAG: Final = b"gaml_run_status_key_v1"
STATUS_DOMAIN: Final = b"gaml-run"  # what the sealed status file is bound to (with its name)


class Replicator:
    """Replication for one daemon. Build it on the core thread (:meth:`build`), then :meth:`start` it in trio."""

    def __init__(
        self,
        replica: Replica,
        seed: bytes,
        submit: Callable[[Callable[[], Any]], concurrent.futures.Future[Any]],
        status_path: Path,
        status_key: bytes,
        *,
        listen: Sequence[str],
        peers: Sequence[str],
        tick_s: float = 0.25,
        settle: Callable[[int], object] | None = None,
        reputation: Reputation | None = None,
        gossip: bool = True,
        rendezvous: bool = True,
        rendezvous_s: float = RENDEZVOUS_S,
    ) -> None:
        """``settle(now)``: run on the core thread before the pump of a tick that comes with no frame from a peer
        (not while a sync is bringing objects in), at most every :data:`SETTLE_EVERY_S` (the node's consensus
        records: what it writes leaves in the same tick). A failure of it is logged and replication goes on.
        ``reputation``: claim reputation (consensus), which feeds each swarm peer's score in gossip; without it
        every peer met scores 0 (only bans and invalid messages count). ``gossip``: gossip in the public swarm when
        this node is in one (config ``p2p.gossip``); without it the swarm's objects travel by sync alone.
        ``rendezvous``: announce this node's addresses to the swarm every ``rendezvous_s`` and dial the swarm nodes
        it hears of (config ``p2p.rendezvous``; it needs gossip)."""
        self.replica = replica
        self._settle = settle
        self._settled_at = -math.inf
        self._reputation = reputation
        self._gossip_on = gossip
        self._rendezvous_on = rendezvous
        self._rendezvous_s = rendezvous_s
        self.rendezvous: dict[str, int] = dict.fromkeys(("announced", "heard", "dialled", "failed"), 0)
        self._dialling: set[str] = set()
        self._in_swarm: Boundary | None = None  # the public swarm this node is in (set at start) …
        self._swarm: Boundary | None = None  # … and gossips in
        self._scores: dict[str, float] = {}  # node -> application score in gossip (replaced whole, on the core thread)
        self.gossip: dict[str, int] = dict.fromkeys(("published", "received", "accepted", "rejected", "known"), 0)
        self.sync = Sync(replica, crypto.SystemEntropy(), retry_after=RETRY_US, max_send_bytes=BATCH_BYTES)
        self._seed = seed
        self._submit = submit
        self.status_path = status_path
        self._status_key = status_key
        self.listen = list(listen)
        self.peers = list(peers)
        self.tick_s = tick_s
        self.host: P2PHost | None = None
        self._send, self._recv = trio.open_memory_channel[tuple[str, str, bytes]](65536)
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._poked = False
        self._status_at = 0.0
        self._done = trio.Event()
        self._asking: dict[bytes, trio.Event] = {}  # peer reads in flight: set when every peer asked has answered
        self.events = 0
        self.errors = 0
        self.discoveries = 0  # peers found on the LAN and dialled

    # -- trio side -------------------------------------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> list[str]:
        """Listen, dial the bootstrap peers, and run the event loop in ``nursery``; returns the listen addresses."""
        self._token = trio.lowlevel.current_trio_token()
        self._nursery = nursery
        self._in_swarm = await self._core(self._gossip_swarm)
        self._swarm = swarm = self._in_swarm if self._gossip_on else None
        self.host = P2PHost(
            self._seed,
            listen=self.listen,
            on_connected=lambda node: self._queue("connected", node, b""),
            on_frame=lambda node, frame: self._queue("frame", node, frame),
            on_disconnected=lambda node: self._queue("disconnected", node, b""),
            gossip=None if swarm is None else GossipParams(app_score=lambda node: self._scores.get(node, 0.0)),
        )
        await nursery.start(self.host.run)
        if swarm is not None:
            await self.host.subscribe(
                gossip_topic(swarm.name),
                functools.partial(self._judge_gossip, swarm.name),
                lambda publisher, data: self._queue("gossip", publisher, data),
            )
            if self._rendezvous_on:
                await self.host.subscribe(peers_topic(swarm.name), self._judge_announcement, self._heard)
                nursery.start_soon(self._announce_loop, peers_topic(swarm.name))
        if self.peers:
            await self.host.connect_bootstrap(self.peers)
        nursery.start_soon(self._ticker)
        nursery.start_soon(self._loop)
        log.info("p2p", extra={"fields": {"addresses": self.host.addrs, "bootstrap": len(self.peers)}})
        return self.host.addrs

    async def stop(self) -> None:
        if self.host is not None:
            await self.host.close()
        self._send.close()
        await self._done.wait()

    def poke(self) -> None:
        """Ask for a tick now (after a local write); safe from the asyncio side of the loop thread."""
        token = self._token
        if token is None or self._poked:
            return
        self._poked = True
        try:
            token.run_sync_soon(self._queue, "tick", "", b"")
        except trio.RunFinishedError:
            pass

    def _queue(self, kind: str, node: str, frame: bytes) -> None:
        try:
            self._send.send_nowait((kind, node, frame))
        except trio.ClosedResourceError:
            pass  # stopping
        except trio.WouldBlock:
            if kind == "frame":  # dropped: the engine resends what was not acknowledged
                log.warning("p2p_inbox_full", extra={"fields": {"peer": node[:16]}})
            elif kind != "tick" and self._nursery is not None:
                # A session's start or end must not be lost (frames of a session the engine never started would be
                # ignored for good): it waits for room, in order behind what is queued.
                self._nursery.start_soon(self._send.send, (kind, node, frame))

    def _gossip_swarm(self) -> Boundary | None:
        """The swarm this node is in, if any (core thread); if it gossips there, its own swarm objects are kept for
        gossip from now on."""
        swarm = self.replica.swarm()
        self.replica.gossiping = swarm is not None and self._gossip_on
        return swarm

    def _judge_gossip(self, name: str, forwarder: str, publisher: str, data: bytes) -> bool:
        """gossipsub's validator (trio thread): only a verifiably bad message is refused, and counts against its
        forwarder in the swarm too."""
        try:
            check_gossip(name, publisher, data)
        except BadObject:
            if forwarder != self.replica.node_id:
                self._queue("gossip_bad", forwarder, b"")
            return False
        return True

    async def _ticker(self) -> None:
        while True:
            await trio.sleep(self.tick_s)
            self._queue("tick", "", b"")

    async def _loop(self) -> None:
        try:
            async with self._recv:
                async for first in self._recv:
                    batch = [first]
                    size = len(first[2])
                    while len(batch) < BATCH and size < BATCH_BYTES:
                        try:
                            batch.append(self._recv.receive_nowait())
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                        size += len(batch[-1][2])
                    if any(kind == "tick" for kind, _, _ in batch):
                        self._poked = False
                    want_status = time.monotonic() - self._status_at >= STATUS_EVERY_S
                    try:
                        outs, status, answered, gossip = await self._core(
                            functools.partial(self._handle, batch, want_status, list(self._asking))
                        )
                    except Exception:
                        # A failure of one batch (a store error, a bug) must not end replication: the engine's state
                        # is as before the failing call, and what went unacknowledged is sent again by the peers.
                        self.errors += 1
                        log.error("replication_error", exc_info=True, extra={"fields": {"events": len(batch)}})
                        continue
                    self.events += len(batch)
                    for qid in answered:
                        if (event := self._asking.get(qid)) is not None:
                            event.set()
                    await self._deliver(outs)
                    await self._publish(gossip)
                    if status is not None:
                        self._status_at = time.monotonic()
                        self._write_status(status)
        finally:
            self._done.set()

    async def _core(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the core thread and wait for it in trio (no thread of trio's own is used)."""
        fut = self._submit(fn)
        done = trio.Event()
        token = trio.lowlevel.current_trio_token()
        fut.add_done_callback(lambda _: token.run_sync_soon(done.set))
        await done.wait()
        return fut.result()

    async def _deliver(self, outs: Sequence[tuple[str, bytes]]) -> None:
        host = self.host
        assert host is not None
        for peer, frame in outs:
            try:
                host.send_nowait(peer, frame)
            except SendQueueFull:
                try:
                    await host.send(peer, frame)
                except P2PError:
                    pass
            except NotConnected:
                pass  # it left; the engine starts over when it is back

    async def _publish(self, messages: Sequence[bytes]) -> None:
        host, swarm = self.host, self._swarm
        if not messages or host is None or swarm is None:
            return
        for data in messages:
            try:
                await host.publish(gossip_topic(swarm.name), data)
            except P2PError as e:  # sync carries what gossip could not
                log.warning("gossip_unpublished", extra={"fields": {"error": str(e)}})
                continue
            self.gossip["published"] += 1

    @staticmethod
    def _judge_announcement(forwarder: str, publisher: str, data: bytes) -> bool:
        """gossipsub's validator for the peers topic (trio thread): an announcement of its publisher's own addresses."""
        try:
            check_announcement(data, peer_id_of(publisher))
        except BadMessage:
            return False
        return True

    def _heard(self, publisher: str, data: bytes) -> None:
        """A swarm node announced where it can be dialled (trio thread): dial it if this node wants another peer."""
        host, nursery = self.host, self._nursery
        if host is None or nursery is None:
            return
        self.rendezvous["heard"] += 1
        if (
            host.is_connected(publisher)
            or publisher in self._dialling
            or self._scores.get(publisher, 0.0) < 0  # banned, or fell below zero: not dialled
            or len(self._dialling) >= RENDEZVOUS_DIALS
            or len(host.peers()) + len(self._dialling) >= SWARM_PEERS
        ):
            return
        self._dialling.add(publisher)
        nursery.start_soon(self._dial_heard, publisher, check_announcement(data, peer_id_of(publisher)))

    async def _dial_heard(self, node: str, addrs: Sequence[str]) -> None:
        host = self.host
        assert host is not None
        try:
            for addr in addrs:
                try:
                    await host.dial(addr, attempts=1, timeout_s=5.0)
                except P2PError:
                    continue
                self.rendezvous["dialled"] += 1
                return
            self.rendezvous["failed"] += 1
        finally:
            self._dialling.discard(node)

    async def _announce_loop(self, topic: str) -> None:
        host = self.host
        assert host is not None
        addrs = [a for a in host.addrs if not a.startswith(("/ip4/0.0.0.0/", "/ip6/::/"))]
        if not addrs:
            return  # nothing dialable to announce
        data = announcement(addrs)
        while True:
            if not host.peers():  # nobody to tell yet
                await trio.sleep(min(1.0, self._rendezvous_s))
                continue
            try:
                await host.publish(topic, data)
                self.rendezvous["announced"] += 1
            except P2PError as e:
                log.warning("rendezvous_unannounced", extra={"fields": {"error": str(e)}})
            await trio.sleep(self._rendezvous_s)

    async def discovered(self, addrs: Sequence[str]) -> None:
        """A peer found on the LAN (trio): dial it and keep dialling, as a bootstrap peer. A bad address is logged."""
        host = self.host
        if host is None:
            return
        try:
            await host.connect_bootstrap(addrs)
        except P2PError as e:
            log.warning("discovered_unusable", extra={"fields": {"addresses": list(addrs), "error": str(e)}})
            return
        self.discoveries += 1

    async def ask(
        self, caller: Principal, text: str, *, k: int, boundaries: Sequence[str], fan_out: int, deadline_s: float
    ) -> dict[str, Any]:
        """A peer read for ``caller`` (trio): ask up to ``fan_out`` peers for the ``k`` objects of each boundary that
        best match ``text``, and wait for their answers until ``deadline_s``. Returns the report a receipt carries
        (:meth:`_report`). ``boundaries``: names; none: every boundary that holds the caller's memory (its devices,
        its tenants' subnets and tenant groups), never the public swarm unless named. A named boundary that does not
        hold the caller's memory is refused (PolicyError): its members would hear the caller's goal."""
        qid = crypto.SystemEntropy().random_bytes(wire.QID_BYTES)
        started = time.monotonic()
        outs, bids = await self._core(
            functools.partial(self._ask_start, qid, caller, text, k, tuple(boundaries), fan_out)
        )
        event = self._asking[qid] = trio.Event()
        try:
            await self._deliver(outs)
            if outs:
                with trio.move_on_after(max(0.0, deadline_s - (time.monotonic() - started))):
                    await event.wait()
        finally:
            del self._asking[qid]
            with trio.CancelScope(shield=True):  # a cancelled call still ends its read in the engine
                report = await self._core(functools.partial(self._ask_finish, qid, bids))
        report |= {"deadline_ms": round(deadline_s * 1000, 3), "fan_out": fan_out, "k": k}
        report["wall_ms"] = round((time.monotonic() - started) * 1000, 3)
        return report

    def _write_status(self, status: dict[str, Any]) -> None:
        host = self.host
        status["addresses"] = host.addrs if host else []
        status["connected"] = {n: True for n in (host.peers() if host else [])}
        status["transport"] = dataclasses.asdict(host.statistics()) if host else {}
        status["rendezvous"] = dict(self.rendezvous)
        if host is not None and self._swarm is not None:
            status["gossip"] = {
                "topic": gossip_topic(self._swarm.name),
                **self.gossip,
                **dataclasses.asdict(host.gossip_statistics()),
                "mesh": host.gossip_peers(gossip_topic(self._swarm.name)),
                "shunned": host.gossip_shunned(),
                "scores": host.gossip_scores(),
            }
        try:
            write_sealed_json(self.status_path, self._status_key, status, STATUS_DOMAIN)
        except OSError as e:
            log.warning("status_unwritten", extra={"fields": {"error": str(e)}})

    # -- core side -------------------------------------------------------------------------------------------------

    def _ask_start(
        self, qid: bytes, caller: Principal, text: str, k: int, names: tuple[str, ...], fan_out: int
    ) -> tuple[list[tuple[str, bytes]], list[bytes]]:
        if not 1 <= k <= wire.MAX_ASK_K:
            raise InvalidInput(f"a peer read asks each peer for 1..{wire.MAX_ASK_K} candidates, not {k}")
        if fan_out < 1:
            raise InvalidInput(f"a peer read asks at least one peer, not {fan_out}")
        if len(text.encode()) > wire.MAX_ASK_TEXT_BYTES:
            raise InvalidInput(f"a peer read's text is at most {wire.MAX_ASK_TEXT_BYTES} bytes")
        me = self.replica.node_id
        rosters = {bid: self.replica.bound(bid).roster for bid in self.replica.boundary_ids()}
        mine = {bid: ro.boundary for bid, ro in rosters.items() if ro.role(me) == "member"}
        if names:
            bids = [self.replica.find(n) for n in dict.fromkeys(names)]
            for bid in bids:
                b = mine.get(bid)
                if b is None or not _holds_memory_of(b, caller, public_ok=True):
                    name = b.name if b else bid.hex()[:16]
                    raise PolicyError(
                        f"{caller.id} may not ask the peers of boundary {name}: it holds none of its memory"
                    )
        else:
            bids = sorted(bid for bid, b in mine.items() if _holds_memory_of(b, caller, public_ok=False))

        def member(peer: str, bid: bytes) -> bool:  # a relay cannot open, so cannot rank, what it carries
            roster = self.replica.roster_of(bid)
            return roster is not None and roster.role(peer) == "member"

        outs, _ = self.sync.ask(qid, text, k, bids, fan_out, now_us(), who=member)
        return outs, bids

    def _ask_finish(self, qid: bytes, bids: Sequence[bytes]) -> dict[str, Any]:
        return self._report(self.sync.finish(qid), bids)

    def _report(self, r: AskReport, bids: Sequence[bytes]) -> dict[str, Any]:
        """A finished peer read as the receipt declares it: boundaries by name, nodes by id, the assets each answer
        brought (those the node keeps: a rejected object names none)."""
        names = {}
        for bid in {*bids, *(a.bid for a in r.answers)}:
            roster = self.replica.roster_of(bid)
            if roster is not None:
                names[bid] = roster.boundary.name
        connected = set(self.sync.peers())
        answered = []
        for a in r.answers:
            assets = [x for x in (self.replica.asset_of_object(o) for o in a.oids if self.replica.has(o)) if x]
            answered.append(
                {
                    "node": a.peer,
                    "boundary": names.get(a.bid, a.bid.hex()),
                    "ms": round((a.at - r.started) / 1000, 3),
                    "returned": len(a.oids),
                    "new": a.new,
                    "accepted": a.accepted,
                    "rejected": a.rejected,
                    "assets": list(dict.fromkeys(assets)),
                }
            )
        return {
            "boundaries": sorted(names.get(b, b.hex()) for b in bids),
            "asked": [{"node": p, "boundary": names.get(b, b.hex())} for p, b in r.asked],
            "answered": answered,
            "timed_out": [
                {"node": p, "boundary": names.get(b, b.hex()), "connected": p in connected} for p, b in r.unanswered
            ],
        }

    def _handle(
        self, batch: Sequence[tuple[str, str, bytes]], want_status: bool, asking: Sequence[bytes] = ()
    ) -> tuple[list[tuple[str, bytes]], dict[str, Any] | None, list[bytes], list[bytes]]:
        now = now_us()
        outs: list[tuple[str, bytes]] = []
        gossip: list[bytes] = []
        ticked = False
        syncing = any(kind == "frame" for kind, _, _ in batch)  # records wait until what peers send is in
        for kind, node, frame in batch:
            if kind == "frame":
                outs += self.sync.received(node, frame, now)
            elif kind == "connected":
                outs += self.sync.connected(node, now)
            elif kind == "disconnected":
                self.sync.disconnected(node)
            elif kind == "gossip":
                self._gossiped(node, frame, now)
            elif kind == "gossip_bad":
                self.replica.gossip_refused(node)
            elif kind == "tick" and not ticked:
                ticked = True
                if self._settle is not None and not syncing and time.monotonic() - self._settled_at >= SETTLE_EVERY_S:
                    self._settled_at = time.monotonic()
                    try:
                        self._settle(now)
                    except Exception:  # consensus bookkeeping must never stop replication
                        self.errors += 1
                        log.error("consensus_settle_error", exc_info=True)
                self.replica.pump(now)
                outs += self.sync.tick(now)
                if self._swarm is not None:
                    gossip = bundles(self.replica.gossip_out(GOSSIP_OBJECTS_PER_TICK, GOSSIP_BYTES_PER_TICK))
        answered = [qid for qid in asking if self.sync.pending(qid) == 0]
        if want_status:
            self._score(now)
        return outs, (self.status() if want_status else None), answered, gossip

    def _gossiped(self, publisher: str, data: bytes, now: int) -> None:
        """A judged gossip message: its objects this node lacks are accepted as from its publisher."""
        swarm = self._swarm
        if swarm is None:
            return
        self.gossip["received"] += 1
        objs = {object_id(o): o for o in unbundle(data)}  # judged already: it parses
        new = {oid: o for oid, o in objs.items() if not self.replica.has(oid)}
        self.gossip["known"] += len(objs) - len(new)
        if new:
            accepted, rejected = self.replica.accept(swarm.id, list(new.values()), publisher, now, oids=list(new))
            self.gossip["accepted"] += accepted
            self.gossip["rejected"] += rejected

    def _score(self, now: int) -> None:
        """Each peer's application score in gossip, from the swarm view and claim reputation (core thread)."""
        swarm = self._in_swarm
        view = None if swarm is None else self.replica.roster_of(swarm.id)
        if not isinstance(view, Swarm):
            return
        weigh = self._reputation(view.boundary.id, now) if self._reputation is not None else lambda node: 0.0
        nodes = {*self.sync.peers(), *view.banned}  # every gossip peer has a sync session (crdt/p2p.py)
        self._scores = {n: gossip_score(view, n, weigh) for n in sorted(nodes)}

    def status(self) -> dict[str, Any]:
        """What ``gaml peers`` prints (core thread)."""
        return {
            "node_id": self.replica.node_id,
            "running": True,
            "boundaries": self.replica.describe(),
            "peers": {p: dataclasses.asdict(s) for p, s in self.sync.stats().items()},
            "counters": dict(sorted(self.replica.counters.items())),
            "discovered": self.discoveries,
        }


def _holds_memory_of(b: Boundary, caller: Principal, *, public_ok: bool) -> bool:
    """Whether a boundary holds memory of the caller: its devices (for an agent or device, its user's), a subnet or
    tenant group of one of its tenants, or the public swarm where named."""
    if b.kind == PUBLIC:
        return public_ok
    if b.kind == DEVICES:
        return b.label in {caller.id, caller.on_behalf_of} - {""}
    return b.label in caller.tenants


def status_key(keychain: Keychain) -> bytes:
    """The key that seals the status file (boundary names and labels name owners and tenants): a subkey of the node's
    master key, so that `gaml peers` reads it with the keychain while the daemon holds the store."""
    return crypto.derive_key(keychain.get(NODE_MASTER_REF), STATUS_KEY_TAG)


def read_status(path: Path, keychain: Keychain) -> dict[str, Any]:
    """What a running daemon's replicator last wrote to ``path`` (``FileNotFoundError`` before it has)."""
    return dict(read_sealed_json(path, status_key(keychain), STATUS_DOMAIN))


__all__ = ["Replicator", "read_status", "status_key"]
