"""Pairing and subnet membership on disk: invitations, and the ``p2p`` section of ``config.json``.

An **invitation** is what an admin hands to a node it adds to a boundary (``gaml pair NODE --out F``, ``gaml subnet
invite NAME NODE --out F``): the new roster, signed by the boundary's admin and naming the node, and the addresses
where the inviter listens. It holds no key in the clear: the group keys in a roster are sealed to each member's own
X25519 key. It does hold the boundary's id, which lets its holder recognise the boundary's members (not read or
receive anything), so hand it over like a pairing code, not in public.

``config.json`` ``p2p``: ``listen`` (multiaddrs; default ``/ip4/127.0.0.1/tcp/0``, loopback only) and ``peers``
(multiaddrs ending in ``/p2p/<peer id>``, dialled at start and redialled with backoff).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from gaml.node.home import read_config, write_config
from gaml.node.shells.files import write_atomic
from gaml.policy.errors import InvalidInput
from gaml.policy.model import load_json

INVITATION_FORMAT: Final = "gaml-invitation-1"
DEFAULT_LISTEN: Final = ("/ip4/127.0.0.1/tcp/0",)


def write_invitation(path: Path, roster: bytes, peers: Sequence[str]) -> None:
    data = {"format": INVITATION_FORMAT, "roster": roster.hex(), "peers": list(peers)}
    write_atomic(path, json.dumps(data, indent=1).encode(), mode=0o600)


def read_invitation(path: Path) -> tuple[bytes, list[str]]:
    """The roster and the inviter's addresses of an invitation file (InvalidInput if it is not one)."""
    try:
        data = load_json(path.read_bytes())
        if data.get("format") != INVITATION_FORMAT:
            raise InvalidInput(f"{path}: not a GAML invitation (format {data.get('format')!r})")
        roster = bytes.fromhex(data["roster"])
        peers = [str(p) for p in data.get("peers", [])]
    except OSError as e:
        raise InvalidInput(f"{path}: {e.strerror or e}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise InvalidInput(f"{path}: a malformed invitation ({e})") from None
    return roster, peers


def check_peers(peers: Sequence[str], where: str = "") -> None:
    """InvalidInput unless every address names its peer (ends in ``/p2p/<peer id>``): peers are dialled by identity."""
    for p in peers:
        if "/p2p/" not in p:
            raise InvalidInput(f"{where}a peer address must end in /p2p/<peer id>: {p!r}")


def p2p_config(home: Path) -> dict[str, list[str]]:
    cfg = read_config(home).get("p2p") or {}
    listen = [str(a) for a in cfg.get("listen", DEFAULT_LISTEN)]
    peers = [str(a) for a in cfg.get("peers", [])]
    return {"listen": listen, "peers": peers}


def _p2p_flag(home: Path, key: str, default: bool) -> bool:
    value = (read_config(home).get("p2p") or {}).get(key, default)
    if not isinstance(value, bool):
        raise InvalidInput(f"config.json p2p.{key} is true or false, not {value!r}")
    return value


def mdns_enabled(home: Path) -> bool:
    """Whether config.json's ``p2p.mdns`` asks the daemon to announce and discover peers on the LAN (default no)."""
    return _p2p_flag(home, "mdns", False)


def gossip_enabled(home: Path) -> bool:
    """Whether config.json's ``p2p.gossip`` lets a node in the public swarm gossip its objects (default yes)."""
    return _p2p_flag(home, "gossip", True)


def rendezvous_enabled(home: Path) -> bool:
    """Whether config.json's ``p2p.rendezvous`` lets a node in the public swarm find swarm nodes in the DHT (default
    yes)."""
    return _p2p_flag(home, "rendezvous", True)


def update_p2p(home: Path, *, listen: Sequence[str] | None = None, add_peers: Sequence[str] = ()) -> dict[str, Any]:
    """Set the listen addresses and/or add peers in ``config.json`` (atomically); returns the new ``p2p`` section."""
    cfg = read_config(home, overrides=False)
    section = dict(cfg.get("p2p") or {})
    if listen is not None:
        section["listen"] = list(listen)
    peers = list(section.get("peers", []))
    check_peers(add_peers)
    peers += [p for p in dict.fromkeys(add_peers) if p not in peers]
    section["peers"] = peers
    cfg["p2p"] = section
    write_config(home, cfg)
    return section


__all__ = [
    "DEFAULT_LISTEN",
    "check_peers",
    "gossip_enabled",
    "mdns_enabled",
    "p2p_config",
    "read_invitation",
    "rendezvous_enabled",
    "update_p2p",
    "write_invitation",
]
