"""A LAN on one machine: network namespaces joined by a bridge (``ip netns``, veth; needs root). For the real mode of
the simulation (simulations/real.py) and the tests that need a network (mDNS).

``Lan(n)`` makes a namespace holding a bridge (which has ``10.213.T.254`` itself, for the link proxies) and ``n`` host
namespaces, each with loopback up and one veth (``eth0``,
``10.213.T.i/24``, multicast on) plugged into the bridge, so processes in the hosts reach each other by unicast and by
link-local multicast (mDNS), and nothing outside. Names carry a random tag, so concurrent runs do not collide; closing
deletes the namespaces, and with them every interface made. :func:`lan_unavailable` says why a machine cannot (not
root, no ``ip``), for a skip with a clear message.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from types import TracebackType


def lan_unavailable() -> str:
    """Why network namespaces cannot be made here ("" when they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    probe = f"gaml-probe-{secrets.token_hex(3)}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return ""


def _ip(*args: str) -> None:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")


class Lan:
    """A bridge namespace and ``n`` hosts on 10.213.T.0/24 (T random per LAN)."""

    def __init__(self, n: int) -> None:
        self.tag = secrets.token_hex(2)
        self.subnet = int(self.tag, 16) % 250 + 1
        self.bridge = f"gaml-{self.tag}-br"
        self.hosts = [f"gaml-{self.tag}-h{i}" for i in range(1, n + 1)]
        self._made: list[str] = []
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    @property
    def bridge_ip(self) -> str:
        """The bridge namespace's own address (where the link proxies listen)."""
        return f"10.213.{self.subnet}.254"

    def exec(self, ns: str) -> list[str]:
        """The command prefix that runs a program in namespace ``ns``."""
        return ["ip", "netns", "exec", ns]

    def ip(self, i: int) -> str:
        """The address of host ``i`` (0-based)."""
        return f"10.213.{self.subnet}.{i + 1}"

    def _make(self) -> None:
        _ip("netns", "add", self.bridge)
        self._made.append(self.bridge)
        _ip("-n", self.bridge, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.bridge, "addr", "add", f"{self.bridge_ip}/24", "dev", "br0")
        _ip("-n", self.bridge, "link", "set", "br0", "up")
        _ip("-n", self.bridge, "link", "set", "lo", "up")
        for i, ns in enumerate(self.hosts):
            _ip("netns", "add", ns)
            self._made.append(ns)
            a, b = f"g{self.tag}{i}a", f"g{self.tag}{i}b"
            _ip("link", "add", a, "type", "veth", "peer", "name", b)
            _ip("link", "set", a, "netns", ns)
            _ip("link", "set", b, "netns", self.bridge)
            _ip("-n", self.bridge, "link", "set", b, "master", "br0", "up")
            _ip("-n", ns, "link", "set", a, "name", "eth0")
            _ip("-n", ns, "addr", "add", f"{self.ip(i)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def close(self) -> None:
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self._made.clear()

    def __enter__(self) -> Lan:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
