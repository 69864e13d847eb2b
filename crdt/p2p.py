"""The libp2p shell of replication: one authenticated stream of length-prefixed frames per peer.

This is the only GAML module that imports libp2p, multiaddr or the trio parts of libp2p (DESIGN.md §1). It carries
opaque frames between nodes and knows nothing of what they mean: the sync engine (crdt/sync.py) decides what to send.

Identity. A node id is the hex of the node's Ed25519 public key. The libp2p identity is made from the node's 32-byte
Ed25519 seed, so the libp2p public key *is* the node key and the peer id embeds it (identity multihash): ``peer_id_of``
and ``node_id_of`` convert both ways without a lookup. The noise handshake proves that the remote holds the private key
of the peer id it presents, so ``node_id`` in every callback is authenticated.

Transport. TCP, noise only (DEPENDENCIES.md P3: libp2p's default also accepts plaintext), yamux,
``max_connections_per_peer=1`` (P4: it removes a 250 ms happy-eyeballs wait from every connect).

One stream per peer pair. Only the peer with the lower node id opens the sync stream (``/gaml/sync/1.0.0``); the
higher one accepts it and refuses a stream from a higher id. Whoever dials, when a connection comes up (a dial, an
inbound connection, both at once) the lower side opens the stream on it, at most one at a time, and the higher side's
``dial`` waits until that stream arrives. Both sides therefore agree on the one stream without a tie-break round trip:
``on_connected`` fires once per peer, and each frame travels on exactly one stream, so it is delivered exactly once.
If a second stream arrives from the same lower peer (it restarted and the old connection is not yet seen as dead), the
newer stream replaces the older one: ``on_disconnected`` for the old, then ``on_connected`` for the new.
When a session ends for any reason (end of stream, reset, peer killed, an oversize frame, ``close``), the host closes
its libp2p connections to that peer too, so that a connection never outlives its stream; ``dial`` or the bootstrap
loop makes a fresh one.

Frames. ``u32`` big-endian length, then the bytes; at most ``max_frame_bytes`` (8 MiB). Sending a larger frame raises
:class:`FrameTooLarge`; receiving one (its header is enough) closes that peer's connection and is counted in
:meth:`P2PHost.statistics`. Reads reassemble frames from partial reads. ``send`` and ``send_nowait`` append whole
frames to the peer's queue (bounded in bytes; ``send`` waits for room), and one writer task per stream writes the
queue in order, joining small frames into writes of up to 256 KiB: concurrent senders never interleave, and the order
of a peer's frames is the order they were queued. (One writer per stream serializes writes as a lock would, and lets
small frames share a write: 1 KiB frames go ~25x faster than with one write each.)

Callbacks are plain (synchronous) functions, called on the trio thread in the host's tasks: ``on_connected(node)``,
then ``on_frame(node, frame)`` in stream order, then ``on_disconnected(node)`` exactly once. They must return quickly
and must not block (hand the work to a queue): a reader that stalls more than 5 s makes the sender's yamux write fail
(libp2p waits at most 5 s for a window update). A callback may call :meth:`P2PHost.send_nowait`; an exception raised by
a callback is logged and counted, and the stream goes on.

Threads. Everything runs on the trio thread (in the daemon, trio is a guest of the uvloop thread). The one method for
other threads is :meth:`P2PHost.send_threadsafe`.

Gossip (optional: ``P2PHost(..., gossip=GossipParams())``): libp2p gossipsub v1.1 on the same connections, for the
public swarm's objects (crdt/swarm.py says what a message holds). :meth:`P2PHost.subscribe` takes a *validator*
``validate(forwarder, publisher, data) -> bool`` that runs before a message is delivered or forwarded: False only for
a verifiably bad message (its signature, schema or size), which gossipsub counts against the forwarder (P4) and never
forwards; anything else (a duplicate, an object this node does not want) is valid for gossip and decided by the
caller. Peer scores also take an application score per node (``GossipParams.app_score``: the caller feeds claim
reputation), so a peer below ``graylist_threshold`` is ignored altogether and meshes prefer well-scored peers. The
publisher's own messages are not delivered back to it (DEPENDENCIES.md P11). Publishers are identified by their
signed ``from`` (strict signing), so ``publisher`` is authenticated like ``node_id`` is for frames.

Not here: mDNS. libp2p 0.8.1's mDNS runs zeroconf on its own thread and writes the peerstore from there (not
thread-safe with trio), uses a process-wide discovery event bus, and needs a multicast interface (loopback here has
none), so discovery is left to configured bootstrap addresses.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import socket
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

import multiaddr  # type: ignore[import-untyped]
import trio
from libp2p import ConnectionConfig, create_yamux_muxer_option, new_host
from libp2p.abc import IHost, INetConn, INetStream, INetwork, INotifee, ISubscriptionAPI
from libp2p.crypto.ed25519 import Ed25519PublicKey, create_new_key_pair
from libp2p.crypto.keys import KeyType
from libp2p.crypto.x25519 import create_new_key_pair as create_x25519_key_pair
from libp2p.custom_types import TProtocol
from libp2p.network.config import RetryConfig
from libp2p.network.stream.net_stream import NetStream
from libp2p.network.swarm import Swarm
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo, info_from_p2p_addr
from libp2p.pubsub.gossipsub import PROTOCOL_ID_V11, GossipSub
from libp2p.pubsub.pb import rpc_pb2
from libp2p.pubsub.pubsub import Pubsub
from libp2p.pubsub.score import PeerScorer, ScoreParams, TopicScoreParams
from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_ID
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.tools.anyio_service import background_trio_service

from gaml.crdt.errors import (
    BadAddress,
    BadIdentity,
    DialFailed,
    FrameTooLarge,
    NotConnected,
    P2PError,
    SendQueueFull,
)

if TYPE_CHECKING:
    from trio_typing import TaskStatus  # trio-typing (a libp2p dependency) shadows trio's own annotations

log = logging.getLogger("gaml.p2p")

PROTOCOL = "/gaml/sync/1.0.0"
MAX_FRAME_BYTES = 8 << 20
DEFAULT_LISTEN = "/ip4/127.0.0.1/tcp/0"
SEED_BYTES = 32

_PROTOCOL_ID = TProtocol(PROTOCOL)
_HEADER_BYTES = 4
_READ_BYTES = 1 << 20  # the most one read asks of the stream (it may return less)
_WRITE_BYTES = 256 << 10  # small frames queued together go out in one write of up to this much
_HEX = frozenset("0123456789abcdef")
_CLEANUP_S = 5.0  # the longest a teardown (closing a connection, waiting for sessions) may take
GOSSIP_MAX_BYTES = 512 << 10  # one gossip message's data: well inside pubsub's 1 MiB limit on an inbound RPC


# -- identities ----------------------------------------------------------------------------------------------------


def _check_node_id(node_id: str) -> bytes:
    if not isinstance(node_id, str) or len(node_id) != 2 * SEED_BYTES or not set(node_id) <= _HEX:
        raise BadIdentity(f"a node id is 64 lowercase hex characters (an Ed25519 public key), got {node_id!r}")
    return bytes.fromhex(node_id)


def _peer_of(node_id: str) -> ID:
    return ID.from_pubkey(Ed25519PublicKey.from_bytes(_check_node_id(node_id)))


def _node_of(peer: ID) -> str:
    key = peer.extract_public_key()
    if key is None or key.get_type() != KeyType.Ed25519:
        raise BadIdentity(f"peer {peer} has no embedded Ed25519 key: it is not a GAML node")
    node = key.to_bytes().hex()
    if _peer_of(node) != peer:  # a non-canonical encoding of the same key
        raise BadIdentity(f"peer id {peer} is not the canonical peer id of its key")
    return node


def peer_id_of(node_id: str) -> str:
    """The libp2p peer id (base58, ``12D3KooW…``) of a node id (hex Ed25519 public key). BadIdentity if malformed."""
    return _peer_of(node_id).to_base58()


def node_id_of(peer_id: str) -> str:
    """The node id (hex Ed25519 public key) embedded in a libp2p peer id. BadIdentity if it is not an Ed25519 one."""
    try:
        peer = ID.from_base58(peer_id)
    except Exception as e:  # base58 and multihash decoding raise assorted ValueErrors
        raise BadIdentity(f"not a peer id: {peer_id!r}") from e
    return _node_of(peer)


def _content_id(msg: rpc_pb2.Message) -> bytes:
    return hashlib.sha256(bytes(msg.data)).digest()


def _conn_of(stream: INetStream) -> INetConn:
    assert isinstance(stream, NetStream) and stream.swarm_conn is not None  # what the swarm makes
    return stream.swarm_conn


def _parse_addr(addr: str) -> PeerInfo:
    try:
        return info_from_p2p_addr(multiaddr.Multiaddr(addr))
    except Exception as e:  # multiaddr raises several unrelated exception types
        raise BadAddress(f"cannot dial {addr!r}: give a multiaddr ending in /p2p/<peer id> ({e})") from e


def _check_port_free(addr: multiaddr.Multiaddr) -> None:
    """Refuse a fixed TCP port that something already listens on.

    libp2p listens with SO_REUSEPORT, so a second node told to use a busy port would share it silently, each getting
    some of the other's connections; a plain bind (which SO_REUSEPORT listeners refuse) tells first.
    """
    protocols = {p.name for p in addr.protocols()}
    if "tcp" not in protocols or not protocols & {"ip4", "ip6"}:
        return
    port = int(addr.value_for_protocol("tcp"))
    if port == 0:
        return
    family, ip = (
        (socket.AF_INET, addr.value_for_protocol("ip4"))
        if "ip4" in protocols
        else (socket.AF_INET6, addr.value_for_protocol("ip6"))
    )
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed listener's TIME_WAIT is no conflict
        try:
            probe.bind((ip, port))
        except OSError as e:
            raise P2PError(f"cannot listen on {addr}: {e.strerror or e}") from e


# -- configuration and statistics ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff: ``initial_s``, then times ``multiplier`` after each failure, at most ``max_s``."""

    initial_s: float = 0.1
    max_s: float = 5.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if not (0 < self.initial_s <= self.max_s) or self.multiplier < 1:
            raise ValueError(f"need 0 < initial_s <= max_s and multiplier >= 1, got {self}")

    def delays(self) -> Iterator[float]:
        """The successive delays (an endless iterator)."""
        delay = self.initial_s
        while True:
            yield delay
            delay = min(delay * self.multiplier, self.max_s)


@dataclass(frozen=True)
class P2PStatistics:
    """Counters since the host was made (trio's ``statistics()`` convention)."""

    peers: int
    sessions_opened: int
    sessions_closed: int
    frames_sent: int
    frames_received: int
    bytes_sent: int
    bytes_received: int
    oversize_frames: int  # received frames over the limit (each closed its connection)
    refused_streams: int  # inbound sync streams refused (a higher id, a non-Ed25519 peer, or the host closing)
    dial_failures: int  # failed dial attempts (dial() retries and bootstrap attempts)
    frames_dropped: int  # send_threadsafe frames that found no stream or a full queue
    callback_errors: int  # exceptions raised by on_connected / on_frame / on_disconnected


@dataclass(frozen=True)
class GossipParams:
    """Gossipsub for a host: mesh degree, heartbeat, and peer scoring.

    A peer's score is ``app_weight * app_score(node)`` minus ``invalid_weight`` per invalid message it forwarded
    (decaying by ``invalid_decay`` a heartbeat, counted up to ``invalid_cap``). Below ``publish_threshold`` its
    messages are dropped unread, below ``gossip_threshold`` it gets no gossip, below ``graylist_threshold`` it is shut
    out (:meth:`P2PHost._police`). With these defaults the validator judges a peer's first three invalid messages (the
    public swarm strikes and bans it at three: crdt/swarm.py), drops the fourth on unread, and graylists it at five
    (until they decay: a count halves in about 70 heartbeats); an application score of -50 or less graylists at
    once. gossipsub also drops a forwarder's messages beyond ``max_per_second`` per topic, with a behaviour penalty,
    so a publisher should bundle.
    """

    app_score: Callable[[str], float] | None = None  # node id -> application score (called on the trio thread)
    app_weight: float = 1.0
    invalid_weight: float = 10.0
    invalid_cap: float = 100.0
    invalid_decay: float = 0.99
    publish_threshold: float = -35.0
    gossip_threshold: float = -10.0
    graylist_threshold: float = -50.0
    degree: int = 6
    degree_low: int = 4
    degree_high: int = 12
    heartbeat_s: int = 1
    max_per_second: float = 50.0  # per forwarder: it forwards every publisher's messages


@dataclass(frozen=True)
class GossipStatistics:
    """Gossip counters since the host was made."""

    topics: tuple[str, ...]
    published: int  # messages this node published
    delivered: int  # valid messages of other publishers handed to ``on_message``
    invalid: int  # messages the validator refused (each counted against its forwarder)
    callback_errors: int  # exceptions raised by a validator or ``on_message``


OnPeer = Callable[[str], None]
OnFrame = Callable[[str, bytes], None]
GossipValidator = Callable[[str, str, bytes], bool]  # (forwarder, publisher, data) -> valid
OnGossip = Callable[[str, bytes], None]  # (publisher, data)


def _ignore_peer(node_id: str) -> None:
    return None


def _ignore_frame(node_id: str, frame: bytes) -> None:
    return None


class _OpenFailed(P2PError):
    """Opening the sync stream failed (logged, the connection closed). Private: both callers of :meth:`P2PHost._open`
    suppress it, so it never leaves this module, and it stays here rather than in crdt/errors.py."""


class _Session:
    """One sync stream to one peer, with its queue of frames to write."""

    def __init__(self, node: str, stream: INetStream, outbox_bytes: int) -> None:
        self.node = node
        self.stream = stream
        self.outbox: deque[bytes] = deque()  # encoded frames (header + body), oldest first
        self.outbox_size = 0
        self.outbox_limit = outbox_bytes
        self.outbox_change = trio.Event()  # set (and replaced) whenever the queue grows or shrinks
        self.writing = False
        self.scope = trio.CancelScope()
        self.done = trio.Event()
        self.alive = True
        self.keep_conn: INetConn | None = None  # set when a newer stream replaces this one: its connection
        self.replaced = False
        self.reason = "closed"

    def retire(self, reason: str) -> None:
        if self.alive:
            self.reason = reason
        self.alive = False
        self.scope.cancel()
        self.poke()

    def poke(self) -> None:
        self.outbox_change.set()
        self.outbox_change = trio.Event()

    def has_room(self, size: int) -> bool:
        """A frame fits if the queue stays under its limit, or the queue is empty (so any legal frame can go)."""
        return not self.outbox or self.outbox_size + size <= self.outbox_limit

    def put(self, data: bytes) -> None:
        self.outbox.append(data)
        self.outbox_size += len(data)
        self.poke()

    def take(self, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` of whole queued frames (at least one), joined into one write."""
        parts = [self.outbox.popleft()]
        size = len(parts[0])
        while self.outbox and size + len(self.outbox[0]) <= max_bytes:
            parts.append(self.outbox.popleft())
            size += len(parts[-1])
        self.outbox_size -= size
        self.poke()
        return parts[0] if len(parts) == 1 else b"".join(parts)


class _Notifee(INotifee):
    """libp2p network events, forwarded to the host."""

    def __init__(self, owner: P2PHost) -> None:
        self.owner = owner

    async def connected(self, network: INetwork, conn: INetConn) -> None:
        self.owner._on_connection(conn)

    async def disconnected(self, network: INetwork, conn: INetConn) -> None:
        self.owner._changed()

    async def opened_stream(self, network: INetwork, stream: INetStream) -> None:
        return None

    async def closed_stream(self, network: INetwork, stream: INetStream) -> None:
        return None

    async def listen(self, network: INetwork, multiaddr: multiaddr.Multiaddr) -> None:
        return None

    async def listen_close(self, network: INetwork, multiaddr: multiaddr.Multiaddr) -> None:
        return None


def quiet_libp2p_logging(level: int = logging.CRITICAL) -> None:
    """Raise the ``libp2p`` and ``multiaddr`` loggers to ``level`` (unless ``LIBP2P_DEBUG`` asks for libp2p's logs).

    libp2p logs routine events (a refused stream, a peer going away, a dial to a peer that is down) at WARNING and
    ERROR, some as multi-line reports; this module reports what matters on ``gaml.p2p`` and as typed errors. Note that
    ``import libp2p`` itself sets its logger to WARNING with ``propagate = False`` and no handler, so without this its
    warnings bypass the application's handlers and reach stderr through logging's last resort. multiaddr logs every
    parse at DEBUG; it is raised only if its level was never set. (A few libp2p messages go to the root logger, at
    DEBUG; they cannot be singled out.)
    """
    if not os.environ.get("LIBP2P_DEBUG"):
        logging.getLogger("libp2p").setLevel(level)
    chatty = logging.getLogger("multiaddr")
    if chatty.level == logging.NOTSET:
        chatty.setLevel(level)


# -- the host ------------------------------------------------------------------------------------------------------


class P2PHost:
    """A libp2p host carrying GAML sync frames. Runs in trio (in the daemon: trio's guest run inside uvloop).

    Start it with ``async with P2PHost(seed) as host:`` (the block's task must stay inside it) or, for a long-lived
    host, ``await nursery.start(host.run)`` and later ``await host.close()``. See the module docstring for the rules.
    """

    def __init__(
        self,
        seed: bytes,
        *,
        listen: Sequence[str] = (DEFAULT_LISTEN,),
        on_connected: OnPeer | None = None,
        on_frame: OnFrame | None = None,
        on_disconnected: OnPeer | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        outbox_bytes: int = 16 << 20,
        open_timeout_s: float = 10.0,
        quiet: bool = True,
        gossip: GossipParams | None = None,
    ) -> None:
        if not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
            raise BadIdentity(f"the identity seed is {SEED_BYTES} bytes (the node's Ed25519 seed)")
        if not 0 < max_frame_bytes < 1 << 32:
            raise ValueError(f"max_frame_bytes must be in 1..2**32-1, got {max_frame_bytes}")
        if quiet:
            quiet_libp2p_logging()
        try:
            self._listen = [multiaddr.Multiaddr(a) for a in listen]
        except Exception as e:
            raise BadAddress(f"cannot listen on {list(listen)!r}: {e}") from e
        key_pair = create_new_key_pair(seed)
        self.node_id: str = key_pair.public_key.to_bytes().hex()
        self.peer_id: str = peer_id_of(self.node_id)
        self._on_connected = on_connected or _ignore_peer
        self._on_frame = on_frame or _ignore_frame
        self._on_disconnected = on_disconnected or _ignore_peer
        self._max_frame = max_frame_bytes
        self._outbox_bytes = outbox_bytes
        self._open_timeout_s = open_timeout_s
        self._host: IHost = new_host(
            key_pair=key_pair,
            sec_opt={NOISE_ID: NoiseTransport(key_pair, noise_privkey=create_x25519_key_pair().private_key)},
            muxer_opt=create_yamux_muxer_option(),
            listen_addrs=self._listen,
            connection_config=ConnectionConfig(max_connections_per_peer=1),
        )
        network = self._host.get_network()
        assert isinstance(network, Swarm), type(network)
        self._swarm = network
        # Our own dial loop retries with its backoff; libp2p's would add up to 0.7 s of hidden retries per attempt.
        self._swarm.retry_config = RetryConfig(max_retries=0)
        self._host.set_stream_handler(_PROTOCOL_ID, self._on_stream)
        self._swarm.register_notifee(_Notifee(self))
        self._gossip = gossip
        self._router: GossipSub | None = None
        self._pubsub: Pubsub | None = None
        self._topics: set[str] = set()
        self._shunned: set[ID] = set()  # peers on pubsub's blacklist for a score below the graylist threshold
        if gossip is not None:
            self._router = GossipSub(
                protocols=[PROTOCOL_ID_V11],
                degree=gossip.degree,
                degree_low=gossip.degree_low,
                degree_high=gossip.degree_high,
                heartbeat_interval=gossip.heartbeat_s,
                max_messages_per_topic_per_second=gossip.max_per_second,
                score_params=ScoreParams(
                    p4_invalid_messages=TopicScoreParams(
                        weight=gossip.invalid_weight, cap=gossip.invalid_cap, decay=gossip.invalid_decay
                    ),
                    p6_appl_slack_weight=gossip.app_weight,
                    publish_threshold=gossip.publish_threshold,
                    gossip_threshold=gossip.gossip_threshold,
                    graylist_threshold=gossip.graylist_threshold,
                    app_specific_score_fn=self._app_score if gossip.app_score is not None else None,
                ),
            )
            # Strict signing (the default) makes every message's ``from`` authenticated; a content-addressed id makes
            # the same bytes one message whoever publishes them.
            self._pubsub = Pubsub(self._host, self._router, msg_id_constructor=_content_id)

        self._sessions: dict[str, _Session] = {}
        self._opening: set[str] = set()
        self._bootstrapping: set[str] = set()
        self._change = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._closing = trio.Event()
        self._finished = trio.Event()
        self._started = False
        self._addrs: list[str] = []
        self._exit: contextlib.AsyncExitStack | None = None
        self._counts = dict.fromkeys(
            (
                "sessions_opened",
                "sessions_closed",
                "frames_sent",
                "frames_received",
                "bytes_sent",
                "bytes_received",
                "oversize_frames",
                "refused_streams",
                "dial_failures",
                "frames_dropped",
                "callback_errors",
                "gossip_published",
                "gossip_delivered",
                "gossip_invalid",
                "gossip_callback_errors",
            ),
            0,
        )

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until :meth:`close`. With ``nursery.start(host.run)``, returns once listening."""
        if self._started:
            raise P2PError("this host has already been started (make a new P2PHost)")
        self._started = True
        try:
            for addr in self._listen:
                _check_port_free(addr)
            async with self._host.run(listen_addrs=self._listen), trio.open_nursery() as nursery:
                # libp2p's auto-connector re-dials every peer in the peerstore to keep 50+ connections; peers are
                # ours to choose (dial, bootstrap), so it is stopped.
                await self._swarm.auto_connector.stop()
                self._nursery = nursery
                self._token = trio.lowlevel.current_trio_token()
                self._addrs = [str(a) for a in self._host.get_addrs()]
                if self._pubsub is not None and self._router is not None:
                    await nursery.start(self._run_gossip, self._pubsub, self._router)
                task_status.started()
                await self._closing.wait()
                for s in list(self._sessions.values()):
                    s.retire("host closing")
                with trio.move_on_after(_CLEANUP_S):
                    for s in list(self._sessions.values()):
                        await s.done.wait()
                nursery.cancel_scope.cancel()
                self._nursery = None
                with trio.move_on_after(_CLEANUP_S) as cs:
                    cs.shield = True
                    await self._host.close()
        finally:
            self._nursery = None
            self._token = None
            self._closing.set()
            self._finished.set()

    async def _run_gossip(
        self, pubsub: Pubsub, router: GossipSub, *, task_status: TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with background_trio_service(pubsub), background_trio_service(router):
            await pubsub.wait_until_ready()
            task_status.started()
            assert self._gossip is not None and router.scorer is not None
            scorer = router.scorer
            while True:  # gossipsub's heartbeat decays scores; this one acts on them
                await trio.sleep(self._gossip.heartbeat_s)
                self._police(pubsub, scorer)

    def _police(self, pubsub: Pubsub, scorer: PeerScorer) -> None:
        """Shut out the peers below the graylist threshold, and let back those above it again.

        py-libp2p 0.8.1 gates a peer's messages on its topic score only: an application score below the graylist
        threshold stops its GRAFTs and the gossip sent to it, not the messages it forwards. So a graylisted peer is
        put on pubsub's blacklist (its pubsub stream is reset, anything it sends or originates is dropped), and taken
        off when its score recovers (it is heard again from its next connection)."""
        topics = sorted(self._topics)
        if not topics:
            return
        for peer in list(pubsub.peers):
            if scorer.is_graylisted(peer, topics):
                self._shunned.add(peer)
                pubsub.add_to_blacklist(peer)
                log.info("gossip_shunned", extra={"fields": {"peer": str(peer)}})
        for peer in list(self._shunned):
            if not scorer.is_graylisted(peer, topics):
                self._shunned.discard(peer)
                pubsub.remove_from_blacklist(peer)

    async def close(self) -> None:
        """Close every session (``on_disconnected`` fires for each), stop listening, and wait until done."""
        self._closing.set()
        if self._started:
            await self._finished.wait()

    async def __aenter__(self) -> P2PHost:
        stack = contextlib.AsyncExitStack()
        nursery = await stack.enter_async_context(trio.open_nursery())
        try:
            await nursery.start(self.run)
        except BaseException:
            await stack.aclose()
            raise
        self._exit = stack
        return self

    async def __aexit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self.close()
        finally:
            if self._exit is not None:
                stack, self._exit = self._exit, None
                await stack.aclose()  # run() has returned: the nursery is empty (the block's own error passes as is)

    # -- queries -----------------------------------------------------------------------------------------------

    @property
    def addrs(self) -> list[str]:
        """The full multiaddrs to give a peer (``/ip4/…/tcp/PORT/p2p/<peer id>``); known once running."""
        return list(self._addrs)

    def peers(self) -> list[str]:
        """Node ids with a sync stream now, sorted (a peer is listed just before its ``on_connected`` runs)."""
        return sorted(self._sessions)

    def is_connected(self, node_id: str) -> bool:
        return node_id in self._sessions

    def statistics(self) -> P2PStatistics:
        return P2PStatistics(
            peers=len(self._sessions), **{k: v for k, v in self._counts.items() if not k.startswith("gossip_")}
        )

    # -- gossip ------------------------------------------------------------------------------------------------

    async def subscribe(self, topic: str, validate: GossipValidator, on_message: OnGossip) -> None:
        """Join gossip ``topic``: ``validate(forwarder, publisher, data)`` judges each new message before it is
        delivered or forwarded (False: verifiably bad, counted against the forwarder), then
        ``on_message(publisher, data)`` receives it (a plain function: it must return quickly). Messages this node
        published are not delivered to it. P2PError if the host has no gossip or is not running."""
        pubsub = self._running_pubsub()
        if topic in self._topics:
            raise P2PError(f"already subscribed to {topic}")
        pubsub.set_topic_validator(topic, functools.partial(self._validate, validate), False)
        sub = await pubsub.subscribe(topic)
        self._topics.add(topic)
        assert self._nursery is not None
        self._nursery.start_soon(self._deliver_gossip, sub, on_message)

    async def publish(self, topic: str, data: bytes) -> None:
        """Publish ``data`` (at most :data:`GOSSIP_MAX_BYTES`) on ``topic`` to the mesh. FrameTooLarge if larger."""
        pubsub = self._running_pubsub()
        if len(data) > GOSSIP_MAX_BYTES:
            raise FrameTooLarge(f"a gossip message is at most {GOSSIP_MAX_BYTES} bytes, got {len(data)}")
        await pubsub.publish(topic, data)
        self._counts["gossip_published"] += 1

    def gossip_statistics(self) -> GossipStatistics:
        c = self._counts
        return GossipStatistics(
            tuple(sorted(self._topics)),
            c["gossip_published"],
            c["gossip_delivered"],
            c["gossip_invalid"],
            c["gossip_callback_errors"],
        )

    def gossip_scores(self) -> dict[str, float]:
        """Each gossip peer's score now (node id -> score), over the topics this node is in."""
        router = self._router
        if router is None or router.scorer is None or self._pubsub is None:
            return {}
        topics = sorted(self._topics)
        out = {}
        for peer in [*self._pubsub.peers, *self._shunned]:
            try:
                out[_node_of(peer)] = round(router.scorer.score(peer, topics), 3)
            except BadIdentity:
                continue
        return dict(sorted(out.items()))

    def gossip_shunned(self) -> list[str]:
        """The nodes shut out of gossip now for a score below the graylist threshold."""
        nodes = []
        for peer in self._shunned:
            with contextlib.suppress(BadIdentity):
                nodes.append(_node_of(peer))
        return sorted(nodes)

    def gossip_peers(self, topic: str) -> list[str]:
        """The nodes in this node's mesh for ``topic`` (those it forwards every message to)."""
        router = self._router
        mesh = router.mesh.get(topic, set()) if router is not None else set()
        nodes = []
        for peer in mesh:
            with contextlib.suppress(BadIdentity):
                nodes.append(_node_of(peer))
        return sorted(nodes)

    def _running_pubsub(self) -> Pubsub:
        if self._pubsub is None:
            raise P2PError("this host was made without gossip (P2PHost(..., gossip=GossipParams()))")
        if self._nursery is None:
            raise P2PError("the host is not running")
        return self._pubsub

    def _app_score(self, peer: ID) -> float:
        assert self._gossip is not None and self._gossip.app_score is not None
        try:
            return float(self._gossip.app_score(_node_of(peer)))
        except BadIdentity:
            return self._gossip.graylist_threshold * 2  # not a GAML node: nothing it sends is read
        except Exception:
            self._counts["gossip_callback_errors"] += 1
            log.error("gossip_score_error", exc_info=True)
            return 0.0

    def _validate(self, validate: GossipValidator, forwarder: ID, msg: rpc_pb2.Message) -> bool:
        try:
            fwd, publisher = _node_of(forwarder), _node_of(ID(msg.from_id))
            ok = len(msg.data) <= GOSSIP_MAX_BYTES and bool(validate(fwd, publisher, bytes(msg.data)))
        except BadIdentity:
            ok = False
        except Exception:
            self._counts["gossip_callback_errors"] += 1
            log.error("gossip_validator_error", exc_info=True)
            ok = False
        if not ok:
            self._counts["gossip_invalid"] += 1
        return ok

    async def _deliver_gossip(self, sub: ISubscriptionAPI, on_message: OnGossip) -> None:
        async for msg in sub:
            try:
                publisher = _node_of(ID(msg.from_id))
            except BadIdentity:
                continue
            if publisher == self.node_id:
                continue  # our own message, delivered back by gossipsub (P11)
            self._counts["gossip_delivered"] += 1
            try:
                on_message(publisher, bytes(msg.data))
            except Exception:
                self._counts["gossip_callback_errors"] += 1
                log.error("gossip_callback_error", exc_info=True)

    async def wait_connected(self, node_id: str) -> None:
        """Wait until there is a sync stream to ``node_id`` (returns at once if there is one)."""
        while True:
            change = self._change
            if node_id in self._sessions:
                return
            await change.wait()

    async def wait_disconnected(self, node_id: str) -> None:
        """Wait until there is no sync stream to ``node_id`` (returns at once if there is none)."""
        while True:
            change = self._change
            if node_id not in self._sessions:
                return
            await change.wait()

    # -- connecting --------------------------------------------------------------------------------------------

    async def dial(
        self, addr: str, *, attempts: int = 3, backoff: Backoff | None = None, timeout_s: float = 10.0
    ) -> str:
        """Connect to ``addr`` (a multiaddr with ``/p2p/<peer id>``) until the sync stream is up; its node id.

        Each attempt has ``timeout_s``; between attempts it waits as ``backoff`` says. Returns at once if the peer is
        already connected. DialFailed after the last attempt, BadAddress for a malformed address.
        """
        info = _parse_addr(addr)
        node = _node_of(info.peer_id)
        if node == self.node_id:
            raise DialFailed(f"{addr} is this node")
        if self._nursery is None:
            raise P2PError("the host is not running")
        delays = (backoff or Backoff()).delays()
        last: Exception | None = None
        for attempt in range(max(1, attempts)):
            if attempt:
                await trio.sleep(next(delays))
            try:
                await self._connect_once(info, node, timeout_s)
                return node
            except Exception as e:  # libp2p raises many unrelated types; TooSlowError for the timeout
                last = e
        raise DialFailed(f"no sync stream to {addr} after {max(1, attempts)} attempts: {last!r}") from last

    async def connect_bootstrap(self, addrs: Sequence[str], backoff: Backoff | None = None) -> None:
        """Keep connections to ``addrs`` in the background: dial each until it is up, and again whenever it drops.

        Failed attempts back off (capped exponential); the delay resets once a session has lasted ``max_s``. A peer
        that starts later, or restarts, is therefore reached within about ``max_s`` of being back. Returns at once;
        the loops end with the host. Adding an address already being kept is a no-op.
        """
        if self._nursery is None:
            raise P2PError("the host is not running")
        plan = [(info, _node_of(info.peer_id)) for info in (_parse_addr(a) for a in addrs)]
        for info, node in plan:
            if node == self.node_id or node in self._bootstrapping:
                continue
            self._bootstrapping.add(node)
            self._nursery.start_soon(self._keep_connected, info, node, backoff or Backoff())

    async def disconnect(self, node_id: str) -> None:
        """End the session with ``node_id`` (``on_disconnected`` fires, its connections close); a no-op if none.

        For liveness decided above this layer: a peer whose machine vanished without closing TCP is not noticed here
        until a write to it fails (libp2p has no keepalive that closes a dead connection).
        """
        s = self._sessions.get(node_id)
        if s is not None:
            s.retire("disconnected by this node")
            await s.done.wait()

    async def _keep_connected(self, info: PeerInfo, node: str, backoff: Backoff) -> None:
        delays = backoff.delays()
        while True:
            await self.wait_disconnected(node)
            try:
                await self._connect_once(info, node, self._open_timeout_s)
            except Exception as e:
                log.debug("bootstrap: %s not reached: %r", node[:12], e)
                await trio.sleep(next(delays))
                continue
            up = trio.current_time()
            await self.wait_disconnected(node)
            if trio.current_time() - up >= backoff.max_s:
                delays = backoff.delays()
            await trio.sleep(next(delays))

    async def _connect_once(self, info: PeerInfo, node: str, timeout_s: float) -> None:
        if node in self._sessions:
            return
        if self._closing.is_set():
            raise P2PError("the host is closing")
        peer = info.peer_id
        try:
            with trio.fail_after(timeout_s):
                # A failed dial puts the peer in libp2p's negative cache for 60 s; our backoff decides instead.
                self._swarm.unblock_peer(peer)
                await self._host.connect(info)
                if self.node_id < node:
                    with contextlib.suppress(_OpenFailed):  # judged below, with an open already in flight
                        await self._open(peer, node)
                while True:
                    change = self._change
                    if node in self._sessions:
                        return
                    if self.node_id < node and node not in self._opening:
                        raise DialFailed(f"connected to {node[:12]} but could not open the sync stream")
                    if self.node_id > node and not self._live_conns(peer):
                        raise DialFailed(f"{node[:12]} closed the connection without opening the sync stream")
                    await change.wait()
        except BaseException as e:
            self._counts["dial_failures"] += 1
            if isinstance(e, trio.TooSlowError) and node not in self._sessions:
                # Connected, but the stream never came (a peer that is not a GAML node, or stuck): hang up.
                with trio.move_on_after(_CLEANUP_S) as cs:
                    cs.shield = True
                    with contextlib.suppress(Exception):
                        await self._host.disconnect(peer)
            raise

    def _live_conns(self, peer: ID) -> list[INetConn]:
        return [c for c in self._swarm.get_connections(peer) if not c.is_closed]

    def _on_connection(self, conn: INetConn) -> None:
        """A libp2p connection came up (either direction): the lower id opens the sync stream on it."""
        peer = conn.muxed_conn.peer_id
        nursery = self._nursery
        try:
            node = _node_of(peer)
        except BadIdentity as e:
            log.info("closing a connection from a non-GAML peer: %s", e)
            if nursery is not None:
                nursery.start_soon(self._close_conn, conn)
            return
        if nursery is not None and self.node_id < node and not self._closing.is_set():
            nursery.start_soon(self._open_quietly, peer, node)

    async def _open_quietly(self, peer: ID, node: str) -> None:
        with contextlib.suppress(_OpenFailed):
            await self._open(peer, node)

    async def _open(self, peer: ID, node: str) -> None:
        """Open the sync stream to ``peer`` (we are the lower id) unless one is open or being opened."""
        if node in self._sessions or node in self._opening or self._nursery is None:
            return
        self._opening.add(node)
        try:
            with trio.fail_after(self._open_timeout_s):
                stream = await self._host.new_stream(peer, [_PROTOCOL_ID])
        except Exception as e:
            log.debug("no sync stream to %s: %r", node[:12], e)
            # A connection we cannot use is closed, so that the peer's dial fails fast instead of waiting.
            with trio.move_on_after(_CLEANUP_S) as cs:
                cs.shield = True
                with contextlib.suppress(Exception):
                    await self._host.disconnect(peer)
            raise _OpenFailed(f"no sync stream to {node[:12]}: {e!r}") from e
        finally:
            self._opening.discard(node)
            self._changed()
        nursery = self._nursery
        if nursery is None or self._closing.is_set() or node in self._sessions:  # (a session: cannot happen)
            with contextlib.suppress(Exception):
                await stream.reset()
            return
        session = self._register(node, stream)
        nursery.start_soon(self._serve, session)

    async def _on_stream(self, stream: INetStream) -> None:
        """libp2p's handler for an inbound ``/gaml/sync/1.0.0`` stream; the session runs in this task."""
        peer = stream.muxed_conn.peer_id
        try:
            node = _node_of(peer)
        except BadIdentity:
            node = ""
        if not node or not node < self.node_id or self._closing.is_set():
            self._counts["refused_streams"] += 1
            log.debug("refused a sync stream from %s", peer)
            with contextlib.suppress(Exception):
                await stream.reset()
            return
        while (old := self._sessions.get(node)) is not None:
            old.keep_conn = _conn_of(stream)
            old.replaced = True
            old.retire("replaced by a newer stream")
            await old.done.wait()
        session = self._register(node, stream)
        await self._serve(session)

    # -- sessions ----------------------------------------------------------------------------------------------

    def _changed(self) -> None:
        self._change.set()
        self._change = trio.Event()

    def _register(self, node: str, stream: INetStream) -> _Session:
        session = _Session(node, stream, self._outbox_bytes)
        self._sessions[node] = session
        self._counts["sessions_opened"] += 1
        self._changed()
        return session

    def _call(self, fn: Callable[..., None], *args: object) -> None:
        try:
            fn(*args)
        except Exception:
            self._counts["callback_errors"] += 1
            log.exception("a p2p callback (%s) raised", getattr(fn, "__name__", fn))

    async def _serve(self, s: _Session) -> None:
        try:
            with s.scope:
                self._call(self._on_connected, s.node)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._write_frames, s)
                    await self._read_frames(s)
                    nursery.cancel_scope.cancel()
        finally:
            s.alive = False
            s.outbox.clear()  # dropped: the sync engine resends what the peer did not acknowledge
            s.poke()
            conns = [] if s.replaced else list(self._swarm.get_connections(s.stream.muxed_conn.peer_id))
            if self._sessions.get(s.node) is s:
                del self._sessions[s.node]
                self._changed()
            self._counts["sessions_closed"] += 1
            log.debug("session with %s ended: %s", s.node[:12], s.reason)
            with trio.move_on_after(_CLEANUP_S) as cs:
                cs.shield = True
                with contextlib.suppress(Exception):
                    await s.stream.reset()
                if s.replaced:
                    if s.keep_conn is not _conn_of(s.stream):
                        await self._close_conn(_conn_of(s.stream))
                else:
                    for conn in conns:
                        await self._close_conn(conn)
            self._call(self._on_disconnected, s.node)
            s.done.set()
            self._reopen_if_connected(s)

    def _reopen_if_connected(self, s: _Session) -> None:
        """A connection that came up while the old session was ending would otherwise never get a stream."""
        nursery = self._nursery
        if s.replaced or nursery is None or self._closing.is_set() or not self.node_id < s.node:
            return
        peer = s.stream.muxed_conn.peer_id
        if self._live_conns(peer):
            nursery.start_soon(self._open_quietly, peer, s.node)

    @staticmethod
    async def _close_conn(conn: INetConn) -> None:
        with trio.move_on_after(_CLEANUP_S) as cs:
            cs.shield = True
            with contextlib.suppress(Exception):
                await conn.close()

    async def _read_frames(self, s: _Session) -> None:
        buf = bytearray()
        limit = self._max_frame
        while True:
            try:
                chunk = await s.stream.read(_READ_BYTES)
            except Exception as e:  # StreamEOF, StreamReset, a dead connection: all end the session
                s.reason = f"read: {type(e).__name__}"
                return
            if not chunk:
                s.reason = "end of stream"
                return
            buf += chunk
            self._counts["bytes_received"] += len(chunk)
            pos = 0
            while len(buf) - pos >= _HEADER_BYTES and s.alive:
                size = int.from_bytes(buf[pos : pos + _HEADER_BYTES], "big")
                if size > limit:
                    self._counts["oversize_frames"] += 1
                    err = FrameTooLarge(f"{s.node[:12]} sent a frame of {size} bytes (limit {limit})")
                    log.warning("%s: closing the connection", err)
                    s.reason = str(err)
                    return
                end = pos + _HEADER_BYTES + size
                if len(buf) < end:
                    break
                frame = bytes(buf[pos + _HEADER_BYTES : end])
                pos = end
                self._counts["frames_received"] += 1
                self._call(self._on_frame, s.node, frame)
            if pos:
                del buf[:pos]

    async def _write_frames(self, s: _Session) -> None:
        """The stream's only writer: frames go out in queue order, whole, several per write when they are small."""
        while True:
            while not s.outbox:
                await s.outbox_change.wait()
            count = len(s.outbox)
            data = s.take(_WRITE_BYTES)
            count -= len(s.outbox)
            s.writing = True
            try:
                await s.stream.write(data)
            except Exception as e:  # StreamReset, StreamClosed, a dead connection
                s.retire(f"write: {type(e).__name__}")
                return
            finally:
                s.writing = False
                s.poke()
            self._counts["frames_sent"] += count
            self._counts["bytes_sent"] += len(data)

    def _session(self, node_id: str, frame: bytes) -> _Session:
        if len(frame) > self._max_frame:
            raise FrameTooLarge(f"a frame of {len(frame)} bytes is over the limit of {self._max_frame}")
        s = self._sessions.get(node_id)
        if s is None or not s.alive:
            raise NotConnected(f"no sync stream to {node_id[:12]}")
        return s

    async def send(self, node_id: str, frame: bytes) -> None:
        """Queue one frame for ``node_id``, waiting while its queue is full (``outbox_bytes``); frames go out in order.

        FrameTooLarge (nothing queued); NotConnected if there is no stream, or it closes while waiting. Returning
        means queued, not delivered: a frame still queued when the stream closes is dropped, and ``on_disconnected``
        says so (the sync engine resends what was not acknowledged).
        """
        s = self._session(node_id, frame)
        while not s.has_room(_HEADER_BYTES + len(frame)):
            await s.outbox_change.wait()
            if not s.alive:
                raise NotConnected(f"the stream to {node_id[:12]} closed")
        if not s.alive:
            raise NotConnected(f"the stream to {node_id[:12]} closed")
        s.put(len(frame).to_bytes(_HEADER_BYTES, "big") + frame)

    def send_nowait(self, node_id: str, frame: bytes) -> None:
        """:meth:`send` without waiting (usable from a callback): SendQueueFull if the queue has no room."""
        s = self._session(node_id, frame)
        if not s.has_room(_HEADER_BYTES + len(frame)):
            raise SendQueueFull(f"{s.outbox_size} bytes are already queued for {node_id[:12]}")
        s.put(len(frame).to_bytes(_HEADER_BYTES, "big") + frame)

    async def wait_sent(self, node_id: str) -> None:
        """Wait until the frames queued for ``node_id`` are handed to libp2p. NotConnected if the stream closes."""
        s = self._sessions.get(node_id)
        if s is None:
            raise NotConnected(f"no sync stream to {node_id[:12]}")
        while s.outbox or s.writing:
            await s.outbox_change.wait()
            if not s.alive:
                raise NotConnected(f"the stream to {node_id[:12]} closed with frames unsent")

    def send_threadsafe(self, node_id: str, frame: bytes) -> None:
        """Queue a frame from any thread (say, the sync engine's); frames from one thread keep their order.

        The frame is handed to :meth:`send_nowait` on the trio thread; if it cannot be queued then (no stream, queue
        full) it is dropped and counted in ``statistics().frames_dropped``, as the sync engine resends anyway.
        FrameTooLarge at once; P2PError if the host is not running.
        """
        if len(frame) > self._max_frame:
            raise FrameTooLarge(f"a frame of {len(frame)} bytes is over the limit of {self._max_frame}")
        token = self._token
        if token is None:
            raise P2PError("the host is not running")
        try:
            token.run_sync_soon(self._send_or_drop, node_id, frame)
        except trio.RunFinishedError as e:
            raise P2PError("the host's trio run has finished") from e

    def _send_or_drop(self, node_id: str, frame: bytes) -> None:
        try:
            self.send_nowait(node_id, frame)
        except P2PError:  # a run_sync_soon callback must not raise: that would crash the trio run
            self._counts["frames_dropped"] += 1
