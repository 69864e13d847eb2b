"""LAN discovery of GAML nodes by mDNS (DNS-SD over multicast): python-zeroconf on the daemon's asyncio loop.

Only a daemon started with ``--mdns`` (or with ``"mdns": true`` in config.toml's ``p2p``) takes part. It announces one
service of type ``_gaml._tcp.local.`` whose TXT record holds its libp2p peer id (``id``) and its dialable libp2p
addresses (``a0``, ``a1``, …: ``/ip4/…/tcp/…/p2p/<peer id>``) and nothing else: no boundary, owner or swarm name. It
browses for the others and hands each one's addresses to ``on_found``; the daemon dials them and keeps dialling, as it
does its bootstrap peers. Discovery grants nothing: what two nodes exchange is decided by the sync protocol after the
noise handshake has proven both peer ids (an outsider gets ``Hello`` and ``Tags`` only).

What it tells the LAN: that a GAML node with this peer id listens at these addresses. Addresses that no neighbour can
dial (unspecified ``0.0.0.0``, loopback) are not announced; a node listening only there announces nothing and says so
in its log. An announcement whose addresses do not all end in its announced peer id is ignored, and so is this node's
own. (Pointing this node at a third party's addresses gains nothing: the noise handshake proves who answers.)

Multicast needs an interface that carries it (loopback does not): on one machine, the tests run the daemons in network
namespaces joined by a bridge.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections.abc import Callable, Sequence
from typing import Any, Final

import ifaddr
from zeroconf import IPVersion, ServiceInfo, ServiceStateChange, Zeroconf
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

SERVICE_TYPE: Final = "_gaml._tcp.local."
PAIR_TYPE: Final = "_gaml-pair._tcp.local."  # a pairing offer (gaml pair --code), named by its code's tag
RESOLVE_MS: Final = 3000
MAX_ADDRS: Final = 8

log = logging.getLogger("gaml.daemon")


def lan_ipv4() -> list[str]:
    """This host's IPv4 addresses a neighbour could reach (not loopback, link-local or unspecified)."""
    out = set()
    for adapter in ifaddr.get_adapters():
        for ip in adapter.ips:
            if not isinstance(ip.ip, str):
                continue  # IPv6: a (address, flowinfo, scope) tuple
            a = ipaddress.IPv4Address(ip.ip)
            if not (a.is_loopback or a.is_link_local or a.is_unspecified):
                out.add(str(a))
    return sorted(out)


def expand_unspecified(addrs: Sequence[str]) -> list[str]:
    """``/ip4/0.0.0.0/…`` (listening on every interface) as one address per LAN address of this host."""
    out: list[str] = []
    for a in addrs:
        if a.startswith("/ip4/0.0.0.0/"):
            out += [a.replace("/ip4/0.0.0.0/", f"/ip4/{ip}/", 1) for ip in lan_ipv4()]
        else:
            out.append(a)
    return list(dict.fromkeys(out))


def dialable(addrs: Sequence[str]) -> list[tuple[str, int, str]]:
    """(ip, port, multiaddr) of each ``/ip4/A/tcp/P/p2p/ID`` address a neighbour could dial."""
    out = []
    for a in addrs:
        parts = a.strip("/").split("/")
        if len(parts) != 6 or parts[0] != "ip4" or parts[2] != "tcp" or parts[4] != "p2p":
            continue
        try:
            ip = ipaddress.IPv4Address(parts[1])
            port = int(parts[3])
        except ValueError:
            continue
        if ip.is_unspecified or ip.is_loopback or not 0 < port < 65536:
            continue
        out.append((str(ip), port, a))
    return out[:MAX_ADDRS]


class Discovery:
    """Announce this node and find the others on the LAN (start and close on the asyncio loop)."""

    def __init__(self, peer_id: str, addrs: Sequence[str], on_found: Callable[[list[str]], None]) -> None:
        self.peer_id = peer_id
        self.addrs = dialable(expand_unspecified(addrs))
        self.on_found = on_found
        self.found: dict[str, list[str]] = {}  # peer id -> its announced addresses
        self.ignored = 0  # announcements refused (addresses of another peer id, or none)
        self._zc: AsyncZeroconf | None = None
        self._browser: AsyncServiceBrowser | None = None
        self._info: AsyncServiceInfo | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._zc = AsyncZeroconf(ip_version=IPVersion.V4Only)
        if self.addrs:
            ips = sorted({ip for ip, _, _ in self.addrs})
            self._info = AsyncServiceInfo(
                SERVICE_TYPE,
                f"{self.peer_id}.{SERVICE_TYPE}",
                port=self.addrs[0][1],
                addresses=[socket.inet_aton(ip) for ip in ips],
                properties={"id": self.peer_id, **{f"a{i}": a for i, (_, _, a) in enumerate(self.addrs)}},
                server=f"{self.peer_id[-16:].lower()}.local.",
            )
            await self._zc.async_register_service(self._info)
        else:
            log.warning("mdns_nothing_to_announce", extra={"fields": {"why": "no LAN address (0.0.0.0, loopback)"}})
        self._browser = AsyncServiceBrowser(self._zc.zeroconf, SERVICE_TYPE, handlers=[self._changed])

    def _changed(self, **kw: Any) -> None:
        if kw["state_change"] in (ServiceStateChange.Added, ServiceStateChange.Updated):
            task = asyncio.ensure_future(self._resolve(kw["name"]))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _resolve(self, name: str) -> None:
        zc = self._zc
        if zc is None:
            return
        info = AsyncServiceInfo(SERVICE_TYPE, name)
        if not await info.async_request(zc.zeroconf, RESOLVE_MS):
            return
        props = info.decoded_properties
        peer = props.get("id") or ""
        if peer == self.peer_id:
            return
        addrs = [v for k, v in sorted(props.items()) if k.startswith("a") and isinstance(v, str)]
        good = [a for _, _, a in dialable(addrs) if a.rstrip("/").endswith("/p2p/" + peer)]
        if not peer or not good or len(good) != len(addrs):
            self.ignored += 1
            log.warning("mdns_ignored", extra={"fields": {"name": name[:80], "addresses": len(addrs)}})
            return
        if self.found.get(peer) == good:
            return
        self.found[peer] = good
        log.info("mdns_found", extra={"fields": {"peer": peer[-16:], "addresses": good}})
        self.on_found(good)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        zc, self._zc = self._zc, None
        if zc is None:
            return
        with contextlib.suppress(Exception):  # the LAN may be gone already; closing must not fail the shutdown
            if self._browser is not None:
                await self._browser.async_cancel()
            if self._info is not None:
                await zc.async_unregister_service(self._info)
        await zc.async_close()


# -- pairing offers (synchronous: the command line) ---------------------------------------------------------------


class PairingOffer:
    """Announce a pairing offer on the LAN while it is open (``with PairingOffer(tag, port):``): service
    ``gaml-pair-<tag>`` of type :data:`PAIR_TYPE` at this host's LAN addresses and ``port``. The tag is derived from
    the pairing code (node/pairing.py); the code itself is never announced."""

    def __init__(self, tag: str, port: int) -> None:
        self.tag, self.port = tag, port
        self.addresses = lan_ipv4()
        self._zc: Zeroconf | None = None
        self._info: ServiceInfo | None = None

    def __enter__(self) -> PairingOffer:
        if not self.addresses:
            raise OSError("this host has no LAN address (only loopback): pairing needs a network")
        self._zc = Zeroconf(ip_version=IPVersion.V4Only)
        self._info = ServiceInfo(
            PAIR_TYPE,
            f"gaml-pair-{self.tag}.{PAIR_TYPE}",
            port=self.port,
            addresses=[socket.inet_aton(ip) for ip in self.addresses],
            properties={"t": self.tag},
            server=f"gaml-pair-{self.tag}.local.",
        )
        self._zc.register_service(self._info)
        return self

    def __exit__(self, *exc: object) -> None:
        zc, self._zc = self._zc, None
        if zc is None:
            return
        with contextlib.suppress(Exception):
            if self._info is not None:
                zc.unregister_service(self._info)
        zc.close()


def find_pairing(tag: str, deadline: float) -> list[tuple[str, int]]:
    """The (address, port) of the pairing offer with ``tag`` on the LAN, asked for until ``deadline``
    (``time.monotonic()``); [] if none answered."""
    import time

    zc = Zeroconf(ip_version=IPVersion.V4Only)
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            info = zc.get_service_info(PAIR_TYPE, f"gaml-pair-{tag}.{PAIR_TYPE}", int(min(left, 3.0) * 1000))
            if info is not None and info.decoded_properties.get("t") == tag and info.port:
                return [(ip, int(info.port)) for ip in info.parsed_addresses(IPVersion.V4Only)]
    finally:
        zc.close()


__all__ = [
    "PAIR_TYPE",
    "SERVICE_TYPE",
    "Discovery",
    "PairingOffer",
    "dialable",
    "expand_unspecified",
    "find_pairing",
    "lan_ipv4",
]
