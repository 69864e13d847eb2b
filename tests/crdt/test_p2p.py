"""crdt/p2p.py over real libp2p on 127.0.0.1: identities, frames, refusal, limits, disconnects, reconnects, races.

Every test runs trio inside ``trio.run`` under ``trio.fail_after``, so a hang fails; tests wait on events, never sleep.
"""

from __future__ import annotations

import random
import signal
import socket
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import multiaddr  # type: ignore[import-untyped]
import nacl.signing
import pytest
import trio
from libp2p import ConnectionConfig, create_yamux_muxer_option, new_host
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.crypto.secp256k1 import create_new_key_pair as create_secp256k1_key_pair
from libp2p.crypto.x25519 import create_new_key_pair as create_x25519_key_pair
from libp2p.custom_types import TProtocol
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import info_from_p2p_addr
from libp2p.security.insecure.transport import PLAINTEXT_PROTOCOL_ID, InsecureTransport
from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_ID
from libp2p.security.noise.transport import Transport as NoiseTransport

from gaml.crdt.errors import BadAddress, BadIdentity, DialFailed, FrameTooLarge, NotConnected, P2PError, SendQueueFull
from gaml.crdt.p2p import (
    MAX_FRAME_BYTES,
    PROTOCOL,
    Backoff,
    P2PHost,
    node_id_of,
    peer_id_of,
)
from gaml.policy import crypto

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = "/ip4/127.0.0.1/tcp/0"


def seed(n: int) -> bytes:
    return random.Random(n).randbytes(32)


def ordered_seeds(base: int) -> tuple[bytes, bytes]:
    """Two seeds whose node ids sort (low, high): the low one opens the sync stream."""
    a, b = seed(base), seed(base + 1)
    return (a, b) if node(a) < node(b) else (b, a)


def node(s: bytes) -> str:
    return bytes(nacl.signing.SigningKey(s).verify_key).hex()


def run(fn: Callable[[], Awaitable[None]], timeout_s: float = 20.0) -> None:
    async def main() -> None:
        with trio.fail_after(timeout_s):
            await fn()

    trio.run(main)


class Peer:
    """One host's callbacks, recorded; ``until`` waits for a condition on them (no sleeping)."""

    def __init__(self, echo: bool = False) -> None:
        self.connected: list[str] = []
        self.disconnected: list[str] = []
        self.frames: dict[str, list[bytes]] = defaultdict(list)
        self.echo = echo
        self.host: P2PHost | None = None
        self._change = trio.Event()

    def _poke(self) -> None:
        self._change.set()
        self._change = trio.Event()

    def on_connected(self, node_id: str) -> None:
        self.connected.append(node_id)
        self._poke()

    def on_frame(self, node_id: str, frame: bytes) -> None:
        if frame == b"boom":
            raise RuntimeError("a callback bug")
        self.frames[node_id].append(frame)
        if self.echo and self.host is not None:
            self.host.send_nowait(node_id, frame)
        self._poke()

    def on_disconnected(self, node_id: str) -> None:
        self.disconnected.append(node_id)
        self._poke()

    def make(self, s: bytes, **kw: Any) -> P2PHost:
        self.host = P2PHost(
            s, on_connected=self.on_connected, on_frame=self.on_frame, on_disconnected=self.on_disconnected, **kw
        )
        return self.host

    async def until(self, condition: Callable[[], bool]) -> None:
        while True:
            change = self._change
            if condition():
                return
            await change.wait()


# -- identities ----------------------------------------------------------------------------------------------------


def test_node_id_and_peer_id_map_both_ways() -> None:
    """peer_id_of and node_id_of are inverse; anything that is not a GAML Ed25519 identity is BadIdentity."""
    for i in range(20):
        nid = node(seed(i))
        pid = peer_id_of(nid)
        assert pid.startswith("12D3KooW")
        assert node_id_of(pid) == nid
        assert ID.from_base58(pid).to_base58() == pid
    for bad in ("", "ab" * 31, "AB" * 32, "zz" * 32, 42):
        with pytest.raises(BadIdentity):
            peer_id_of(bad)  # type: ignore[arg-type]
    secp = ID.from_pubkey(create_secp256k1_key_pair(seed(99)).public_key).to_base58()
    for bad in ("", "not-a-peer-id", "Qm" + "1" * 44, secp):
        with pytest.raises(BadIdentity):
            node_id_of(bad)


def test_libp2p_identity_is_the_node_key() -> None:
    """The libp2p key made from a seed is the node's Ed25519 key: same public key, signatures verify with nacl."""
    for i in range(5):
        s = seed(i)
        kp = create_new_key_pair(s)
        assert kp.public_key.to_bytes() == bytes(nacl.signing.SigningKey(s).verify_key)
        assert kp.public_key.to_bytes() == crypto.SigningKey(s).public_key
        sig = kp.private_key.sign(b"gaml")
        crypto.verify(crypto.SigningKey(s).public_key, b"gaml", sig)
        assert crypto.SigningKey(s).sign(b"gaml") == sig  # Ed25519 is deterministic
        assert P2PHost(s).node_id == crypto.SigningKey(s).public_key.hex()
        assert P2PHost(s).peer_id == peer_id_of(crypto.SigningKey(s).public_key.hex())
    with pytest.raises(BadIdentity):
        P2PHost(b"short")
    with pytest.raises(BadAddress):
        P2PHost(seed(0), listen=["not a multiaddr"])


# -- two hosts -----------------------------------------------------------------------------------------------------


def test_two_hosts_exchange_frames_in_order_without_interleaving() -> None:
    """Dial; on_connected once on each side; frames both ways: 5 MiB, 1,000 small in order, concurrent senders."""
    low, high = ordered_seeds(10)
    a, b = Peer(), Peer()

    async def body() -> None:
        async with a.make(high) as ha, b.make(low) as hb:
            assert ha.addrs and all(x.endswith("/p2p/" + ha.peer_id) for x in ha.addrs)
            with pytest.raises(NotConnected):
                await ha.send(hb.node_id, b"too early")
            assert await ha.dial(hb.addrs[0]) == hb.node_id  # the higher id dials; the lower opens the stream
            await a.until(lambda: a.connected == [hb.node_id])
            await b.until(lambda: b.connected == [ha.node_id])
            assert ha.peers() == [hb.node_id] and hb.peers() == [ha.node_id]
            assert await ha.dial(hb.addrs[0]) == hb.node_id  # already connected: a no-op
            assert a.connected == [hb.node_id] and b.connected == [ha.node_id]

            big = random.Random(1).randbytes(5 << 20)
            await ha.send(hb.node_id, big)
            await hb.send(ha.node_id, big[::-1])
            await b.until(lambda: len(b.frames[ha.node_id]) == 1)
            await a.until(lambda: len(a.frames[hb.node_id]) == 1)
            assert b.frames[ha.node_id][0] == big and a.frames[hb.node_id][0] == big[::-1]

            small = [i.to_bytes(4, "big") * (1 + i % 7) for i in range(1000)]
            for f in small:
                await ha.send(hb.node_id, f)
            for f in small:
                hb.send_nowait(ha.node_id, f)  # the queued path keeps order too
            await ha.send(hb.node_id, b"")  # an empty frame is a frame
            await b.until(lambda: len(b.frames[ha.node_id]) == 1002)
            await a.until(lambda: len(a.frames[hb.node_id]) == 1001)
            assert b.frames[ha.node_id][1:] == [*small, b""]
            assert a.frames[hb.node_id][1:] == small

            # 20 concurrent senders, each 30 frames of its own byte and size (some over a yamux window).
            def frame(task: int, i: int) -> bytes:
                return bytes([task]) * (1 + task * 9_000 + i) + i.to_bytes(4, "big")

            async def sender(task: int) -> None:
                for i in range(30):
                    await ha.send(hb.node_id, frame(task, i))

            b.frames[ha.node_id].clear()
            async with trio.open_nursery() as nursery:
                for task in range(20):
                    nursery.start_soon(sender, task)
            await b.until(lambda: len(b.frames[ha.node_id]) == 600)
            per_task: dict[int, list[bytes]] = defaultdict(list)
            for f in b.frames[ha.node_id]:
                assert len(set(f[:-4])) == 1, "a frame holds bytes of two senders"
                per_task[f[0]].append(f)
            assert per_task == {t: [frame(t, i) for i in range(30)] for t in range(20)}

            # A callback that raises is counted; the stream goes on.
            await ha.send(hb.node_id, b"boom")
            await ha.send(hb.node_id, b"after")
            await b.until(lambda: b.frames[ha.node_id][-1:] == [b"after"])
            assert hb.statistics().callback_errors == 1
            assert b.connected == [ha.node_id] and a.connected == [hb.node_id]
            assert a.disconnected == [] and b.disconnected == []
        assert a.disconnected == [hb.node_id] and b.disconnected == [ha.node_id]  # close reports each peer once
        with pytest.raises(NotConnected):
            await ha.send(hb.node_id, b"after close")

    run(body, 30)


def test_a_plaintext_dialer_is_refused() -> None:
    """A libp2p host offering only plaintext cannot connect to a GAML host, nor a GAML host to it."""
    gaml = Peer()

    async def body() -> None:
        kp = create_new_key_pair(seed(20))
        plain = new_host(
            key_pair=kp,
            sec_opt={TProtocol(PLAINTEXT_PROTOCOL_ID): InsecureTransport(kp)},
            muxer_opt=create_yamux_muxer_option(),
            listen_addrs=[multiaddr.Multiaddr(LOOPBACK)],
            connection_config=ConnectionConfig(max_connections_per_peer=1),
        )
        async with gaml.make(seed(21)) as hg, plain.run(listen_addrs=[multiaddr.Multiaddr(LOOPBACK)]):
            with pytest.raises(Exception):  # noqa: B017 - libp2p raises its own assorted types here
                await plain.connect(info_from_p2p_addr(multiaddr.Multiaddr(hg.addrs[0])))
            assert plain.get_connected_peers() == []
            with pytest.raises(Exception):  # noqa: B017
                stream = await plain.new_stream(ID.from_base58(hg.peer_id), [TProtocol(PROTOCOL)])
                await stream.write(b"\x00\x00\x00\x02hi")
            with pytest.raises(DialFailed):
                await hg.dial(str(plain.get_addrs()[0]), attempts=2, backoff=Backoff(0.01, 0.01))
            assert hg.peers() == [] and gaml.connected == [] and gaml.frames == {}
            assert hg.statistics().dial_failures == 2

    run(body)


def test_a_higher_id_may_not_open_the_sync_stream() -> None:
    """Only the lower node id opens /gaml/sync/1.0.0: a noise peer with a higher id that tries is reset."""
    low, high = ordered_seeds(30)
    gaml = Peer()

    async def body() -> None:
        kp = create_new_key_pair(high)
        raw = new_host(
            key_pair=kp,
            sec_opt={NOISE_ID: NoiseTransport(kp, noise_privkey=create_x25519_key_pair().private_key)},
            muxer_opt=create_yamux_muxer_option(),
            listen_addrs=[multiaddr.Multiaddr(LOOPBACK)],
            connection_config=ConnectionConfig(max_connections_per_peer=1),
        )
        async with gaml.make(low) as hg, raw.run(listen_addrs=[multiaddr.Multiaddr(LOOPBACK)]):
            await raw.connect(info_from_p2p_addr(multiaddr.Multiaddr(hg.addrs[0])))
            with pytest.raises(Exception):  # noqa: B017 - reset during or right after negotiation
                stream = await raw.new_stream(ID.from_base58(hg.peer_id), [TProtocol(PROTOCOL)])
                await stream.write(b"\x00\x00\x00\x02hi")
                await stream.read(1)
            assert gaml.connected == [] and gaml.frames == {}

    run(body)


def test_a_busy_port_is_refused() -> None:
    """libp2p listens with SO_REUSEPORT and would share a busy port silently; P2PHost refuses it instead."""

    async def body() -> None:
        async with P2PHost(seed(35)) as first:
            listen = first.addrs[0].split("/p2p/")[0]
            with pytest.raises(P2PError, match="cannot listen"):
                async with P2PHost(seed(36), listen=[listen]):
                    pass
            with socket.socket() as other:  # nor a port held by another program
                other.bind(("127.0.0.1", 0))
                other.listen()
                with pytest.raises(P2PError, match="cannot listen"):
                    async with P2PHost(seed(37), listen=[f"/ip4/127.0.0.1/tcp/{other.getsockname()[1]}"]):
                        pass

    run(body)


def test_an_oversize_frame_closes_the_connection_and_the_host_serves_on() -> None:
    """Over 8 MiB: the sender gets FrameTooLarge; a received one closes that connection, and new peers still work."""
    low, high = ordered_seeds(40)
    a, b, c = Peer(), Peer(), Peer()

    async def body() -> None:
        async with a.make(low, max_frame_bytes=16 << 20) as ha, b.make(high) as hb:
            await hb.dial(ha.addrs[0])
            await b.until(lambda: b.connected == [ha.node_id])
            with pytest.raises(FrameTooLarge):
                await hb.send(ha.node_id, bytes(MAX_FRAME_BYTES + 1))  # refused locally: nothing sent
            with pytest.raises(FrameTooLarge):
                hb.send_nowait(ha.node_id, bytes(MAX_FRAME_BYTES + 1))
            await hb.send(ha.node_id, bytes(MAX_FRAME_BYTES))  # the limit itself is allowed
            await a.until(lambda: len(a.frames[hb.node_id]) == 1)

            await ha.send(hb.node_id, b"ok")
            await ha.send(hb.node_id, bytes(MAX_FRAME_BYTES + 1))  # a's limit is 16 MiB: queued
            await ha.send(hb.node_id, b"never")
            # b reads the header, counts it and hangs up; a's writer then hits a closed stream.
            await b.until(lambda: b.disconnected == [ha.node_id])
            await a.until(lambda: a.disconnected == [hb.node_id])
            assert b.frames[ha.node_id] == [b"ok"]
            assert hb.statistics().oversize_frames == 1 and hb.peers() == [] and ha.peers() == []
            with pytest.raises(NotConnected):
                await ha.send(hb.node_id, b"more")
            with pytest.raises(NotConnected):
                ha.send_nowait(hb.node_id, b"more")

            async with c.make(seed(42)) as hc:
                await hc.dial(hb.addrs[0])
                await hc.send(hb.node_id, b"still serving")
                await b.until(lambda: b.frames[hc.node_id] == [b"still serving"])
            await hb.dial(ha.addrs[0])  # and the same pair can reconnect
            await hb.send(ha.node_id, b"again")
            await a.until(lambda: a.frames[hb.node_id][-1:] == [b"again"])
            assert a.connected == [hb.node_id, hb.node_id]

    run(body, 30)


def test_the_send_queue_is_bounded_and_keeps_order_from_any_thread() -> None:
    """SendQueueFull past outbox_bytes; send waits for room; wait_sent; send_threadsafe; disconnect, then redial."""
    low, high = ordered_seeds(45)
    a, b = Peer(), Peer()

    async def body() -> None:
        async with a.make(low, outbox_bytes=10_000) as ha, b.make(high) as hb:
            await ha.dial(hb.addrs[0])
            frames = [bytes([i]) * 1000 for i in range(12)]
            for f in frames[:9]:  # 9 x 1,004 bytes queued without yielding: the writer has not run yet
                ha.send_nowait(hb.node_id, f)
            with pytest.raises(SendQueueFull):
                ha.send_nowait(hb.node_id, frames[9])
            for f in frames[9:]:
                await ha.send(hb.node_id, f)  # waits for the writer to make room
            await ha.wait_sent(hb.node_id)
            await b.until(lambda: len(b.frames[ha.node_id]) == 12)
            assert b.frames[ha.node_id] == frames
            ha.send_nowait(hb.node_id, bytes(50_000))  # a frame bigger than the queue still goes when it is empty
            await b.until(lambda: len(b.frames[ha.node_id]) == 13)

            def from_a_thread() -> None:  # the sync engine's thread
                for i in range(100):
                    ha.send_threadsafe(hb.node_id, i.to_bytes(2, "big"))
                ha.send_threadsafe(seed(0).hex(), b"to nobody")
                with pytest.raises(FrameTooLarge):
                    ha.send_threadsafe(hb.node_id, bytes(MAX_FRAME_BYTES + 1))

            await trio.to_thread.run_sync(from_a_thread)
            await b.until(lambda: len(b.frames[ha.node_id]) == 113)
            assert b.frames[ha.node_id][13:] == [i.to_bytes(2, "big") for i in range(100)]
            assert ha.statistics().frames_dropped == 1

            await ha.disconnect(hb.node_id)
            assert a.disconnected == [hb.node_id] and ha.peers() == []
            await b.until(lambda: b.disconnected == [ha.node_id])
            await ha.disconnect(hb.node_id)  # no session: a no-op
            await hb.dial(ha.addrs[0])
            await a.until(lambda: a.connected == [hb.node_id] * 2)
            await b.until(lambda: b.connected == [ha.node_id] * 2)
            with pytest.raises(NotConnected):
                await ha.wait_sent(seed(0).hex())

    run(body)


def test_a_newer_stream_from_the_same_lower_peer_replaces_the_old_one() -> None:
    """A lower peer that comes back (same key) while its old stream looks alive: the newer stream wins."""
    low, high = ordered_seeds(47)
    old, h = Peer(), Peer()

    async def body() -> None:
        async with old.make(low) as hl, h.make(high) as hh:
            await hh.dial(hl.addrs[0])
            await h.until(lambda: h.connected == [hl.node_id])
            # The "restarted" node: a bare libp2p host with the same key, which opens a sync stream itself.
            kp = create_new_key_pair(low)
            again = new_host(
                key_pair=kp,
                sec_opt={NOISE_ID: NoiseTransport(kp, noise_privkey=create_x25519_key_pair().private_key)},
                muxer_opt=create_yamux_muxer_option(),
                listen_addrs=[multiaddr.Multiaddr(LOOPBACK)],
                connection_config=ConnectionConfig(max_connections_per_peer=1),
            )
            async with again.run(listen_addrs=[multiaddr.Multiaddr(LOOPBACK)]):
                await again.connect(info_from_p2p_addr(multiaddr.Multiaddr(hh.addrs[0])))
                stream = await again.new_stream(ID.from_base58(hh.peer_id), [TProtocol(PROTOCOL)])
                await stream.write(b"\x00\x00\x00\x03new")
                await h.until(lambda: h.frames[hl.node_id] == [b"new"])
                assert h.connected == [hl.node_id, hl.node_id] and h.disconnected == [hl.node_id]
                assert hh.peers() == [hl.node_id]
                await old.until(lambda: old.disconnected == [hh.node_id])  # its connection was closed
                await hh.send(hl.node_id, b"to the new one")
                want = b"\x00\x00\x00\x0eto the new one"
                got = b""
                while len(got) < len(want):
                    got += await stream.read(len(want) - len(got))
                assert got == want

    run(body)


def test_simultaneous_dials_make_one_connection_and_deliver_once() -> None:
    """Both sides dial each other at once: one logical connection, on_connected once, no frame lost or doubled."""

    async def body() -> None:
        for rnd in range(5):
            a, b = Peer(), Peer()
            async with a.make(seed(100 + 2 * rnd)) as ha, b.make(seed(101 + 2 * rnd)) as hb:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(ha.dial, hb.addrs[0])
                    nursery.start_soon(hb.dial, ha.addrs[0])
                assert ha.peers() == [hb.node_id] and hb.peers() == [ha.node_id]
                await a.until(lambda: a.connected == [hb.node_id])  # noqa: B023
                await b.until(lambda: b.connected == [ha.node_id])  # noqa: B023

                async def pump(src: P2PHost, dst: str) -> None:
                    for i in range(100):
                        await src.send(dst, i.to_bytes(2, "big"))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(pump, ha, hb.node_id)
                    nursery.start_soon(pump, hb, ha.node_id)
                await b.until(lambda: len(b.frames[ha.node_id]) >= 100)  # noqa: B023
                await a.until(lambda: len(a.frames[hb.node_id]) >= 100)  # noqa: B023
                want = [i.to_bytes(2, "big") for i in range(100)]
                assert b.frames[ha.node_id] == want and a.frames[hb.node_id] == want
                assert a.connected == [hb.node_id] and b.connected == [ha.node_id]
                assert a.disconnected == [] and b.disconnected == []
                assert ha.statistics().sessions_opened == 1 and hb.statistics().sessions_opened == 1

    run(body, 30)


# -- disconnects and bootstrap -------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("bootstrapper_is_low", [True, False])
def test_bootstrap_connects_late_and_reconnects_after_a_restart(bootstrapper_is_low: bool) -> None:
    """A node bootstrapping to a peer not yet started connects when it starts, and again after it restarts."""
    low, high = ordered_seeds(50)
    mine, theirs = (low, high) if bootstrapper_is_low else (high, low)
    port = free_port()
    listen = [f"/ip4/127.0.0.1/tcp/{port}"]
    me = Peer()

    async def body() -> None:
        async with me.make(mine) as host:
            addr = f"{listen[0]}/p2p/{peer_id_of(node(theirs))}"
            await host.connect_bootstrap([addr], Backoff(initial_s=0.02, max_s=0.2))
            await host.connect_bootstrap([addr])  # a second call for the same peer is a no-op
            for life in (1, 2):
                peer = Peer()
                async with peer.make(theirs, listen=listen) as other:
                    await me.until(lambda: len(me.connected) == life)  # noqa: B023
                    await peer.until(lambda: peer.connected == [host.node_id])  # noqa: B023
                    await other.send(host.node_id, b"life %d" % life)
                    await me.until(lambda: me.frames[other.node_id][-1:] == [b"life %d" % life])  # noqa: B023
                await me.until(lambda: len(me.disconnected) == life)  # noqa: B023
                assert host.peers() == []
            assert me.connected == me.disconnected == [node(theirs)] * 2

    run(body, 30)


PEER_SCRIPT = """
import sys, trio
sys.path.insert(0, sys.argv[1])
from gaml.crdt.p2p import P2PHost

async def main() -> None:
    host: P2PHost
    def echo(node_id: str, frame: bytes) -> None:
        host.send_nowait(node_id, frame)
    host = P2PHost(bytes.fromhex(sys.argv[2]), listen=[sys.argv[3]], on_frame=echo)
    async with host:
        print("ADDR", host.addrs[0], flush=True)
        await trio.sleep_forever()

trio.run(main)
"""


async def start_peer(s: bytes, listen: str) -> tuple[trio.Process, str]:
    proc = await trio.lowlevel.open_process([sys.executable, "-c", PEER_SCRIPT, str(ROOT), s.hex(), listen], stdout=-1)
    assert proc.stdout is not None
    out = b""
    while b"\n" not in out:
        chunk = await proc.stdout.receive_some()
        assert chunk, "the peer process exited before listening"
        out += chunk
    line = out.split(b"\n")[0].decode()
    assert line.startswith("ADDR "), line
    return proc, line.split()[1]


def test_a_killed_peer_process_is_reported_once_and_reached_again() -> None:
    """SIGKILL a peer: on_disconnected fires once; bootstrap reconnects when it comes back on the same port."""
    low, high = ordered_seeds(60)
    me = Peer()

    async def body() -> None:
        procs: list[trio.Process] = []
        try:
            async with me.make(low) as host:
                proc, addr = await start_peer(high, LOOPBACK)
                procs.append(proc)
                await host.connect_bootstrap([addr], Backoff(initial_s=0.05, max_s=0.5))
                await me.until(lambda: len(me.connected) == 1)
                await host.send(node(high), b"ping 1")
                await me.until(lambda: me.frames[node(high)] == [b"ping 1"])

                proc.send_signal(signal.SIGKILL)
                await proc.wait()
                await me.until(lambda: me.disconnected == [node(high)])
                assert host.peers() == []

                listen = addr.split("/p2p/")[0]
                proc, addr2 = await start_peer(high, listen)
                procs.append(proc)
                assert addr2 == addr
                await me.until(lambda: len(me.connected) == 2)
                await host.send(node(high), b"ping 2")
                await me.until(lambda: me.frames[node(high)] == [b"ping 1", b"ping 2"])
                assert me.disconnected == [node(high)]
        finally:
            for p in procs:
                if p.returncode is None:
                    p.kill()
                    await p.wait()

    run(body, 30)


# -- measurements (informative; printed with -s, never asserted) ---------------------------------------------------


def test_measure_connect_round_trip_and_throughput() -> None:
    """Connect time, 1 KiB round trip (median of 200) and 10,000 x 1 KiB throughput; checks only that all arrived."""
    low, high = ordered_seeds(70)
    a, b = Peer(), Peer(echo=True)

    async def body() -> None:
        async with a.make(high) as ha, b.make(low) as hb:
            t0 = time.perf_counter()
            await ha.dial(hb.addrs[0])
            connect_ms = (time.perf_counter() - t0) * 1e3
            await b.until(lambda: b.connected == [ha.node_id])
            frame = bytes(1024)
            rtts = []
            for i in range(200):
                t0 = time.perf_counter()
                await ha.send(hb.node_id, frame)
                await a.until(lambda: len(a.frames[hb.node_id]) == i + 1)  # noqa: B023
                rtts.append((time.perf_counter() - t0) * 1e3)
            b.echo = False
            t0 = time.perf_counter()
            for _ in range(10_000):
                await ha.send(hb.node_id, frame)
            await b.until(lambda: len(b.frames[ha.node_id]) == 10_200)
            elapsed = time.perf_counter() - t0
            print(
                f"\np2p: connect {connect_ms:.1f} ms; 1 KiB round trip median {statistics.median(rtts):.2f} ms "
                f"(p90 {sorted(rtts)[179]:.2f}); 10,000 x 1 KiB in {elapsed:.2f} s = {10_000 / elapsed:,.0f} frames/s"
                f" ({10_000 * 1024 / elapsed / 1e6:.1f} MB/s)"
            )

    run(body, 60)
