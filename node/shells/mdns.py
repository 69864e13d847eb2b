"""LAN discovery of GAML nodes by mDNS (DNS-SD over multicast): python-zeroconf on the daemon's asyncio loop.

Only a daemon started with ``--mdns`` (or with ``"mdns": true`` in config.json's ``p2p``) takes part. It announces one
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

from zeroconf import IPVersion, ServiceStateChange
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

SERVICE_TYPE: Final = "_gaml._tcp.local."
RESOLVE_MS: Final = 3000
MAX_ADDRS: Final = 8

log = logging.getLogger("gaml.daemon")


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
        self.addrs = dialable(addrs)
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


__all__ = ["SERVICE_TYPE", "Discovery", "dialable"]
