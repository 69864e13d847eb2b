"""Pairing and subnet membership on disk: invitations, and the ``p2p`` section of ``config.toml``.

An **invitation** is what an admin hands to a node it adds to a boundary (``gaml pair NODE --out F``, ``gaml subnet
invite NAME NODE --out F``): the new roster, signed by the boundary's admin and naming the node, and the addresses
where the inviter listens. It holds no key in the clear: the group keys in a roster are sealed to each member's own
X25519 key. It does hold the boundary's id, which lets its holder recognise the boundary's members (not read or
receive anything), so hand it over like a pairing code, not in public.

``config.toml`` ``p2p``: ``listen`` (multiaddrs; default ``/ip4/127.0.0.1/tcp/0``, loopback only) and ``peers``
(multiaddrs ending in ``/p2p/<peer id>``, dialled at start and redialled with backoff).
"""

from __future__ import annotations

import base64
import json
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from gaml.node.core.errors import Unavailable
from gaml.node.home import read_config, write_config
from gaml.node.shells.files import write_atomic
from gaml.policy import crypto
from gaml.policy.errors import DecryptionFailed, InvalidInput, PolicyError
from gaml.policy.model import load_json

INVITATION_FORMAT: Final = "gaml-invitation-1"
DEFAULT_LISTEN: Final = ("/ip4/127.0.0.1/tcp/0",)


# -- pairing by a code (gaml pair --code / --join-code) ----------------------------------------------------------------
#
# The device that has the memory (the inviter) makes a code of CODE_BYTES random bytes, shown as 16 base32 letters in
# groups of four, and waits; the new device's user types it. Both derive one key from the code. The inviter listens on
# a TCP port of its own and announces it by mDNS as ``gaml-pair-<tag>`` (the tag is keyed by the code, so the code is
# never on the air and only its holder can recognise the offer). The new device finds that name, connects and sends
# its node id and a fresh nonce sealed with the key; the inviter, if they open (the code is right), answers with the
# invitation (the roster naming that node, and its own addresses) sealed with the key and bound to the nonce. One
# offer pairs one device; MAX_PAIR_TRIES wrong attempts close it. 80 bits of code against a few tries leave a guesser
# nothing; a listener on the LAN sees ciphertext.

CODE_BYTES: Final = 10
MAX_PAIR_TRIES: Final = 3
PAIR_LINE_MAX: Final = 1 << 20
_B32: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def new_code(entropy: crypto.Entropy) -> str:
    raw = base64.b32encode(entropy.random_bytes(CODE_BYTES)).decode()
    return "-".join(raw[i : i + 4] for i in range(0, len(raw), 4))


def _code_bytes(code: str) -> bytes:
    text = code.upper().replace("-", "").replace(" ", "")
    if len(text) != CODE_BYTES * 8 // 5 or any(c not in _B32 for c in text):
        raise InvalidInput(
            f"{code!r} is not a pairing code (16 letters A-Z and digits 2-7, as `gaml pair --code` shows)"
        )
    return base64.b32decode(text)


def _pair_keys(code: str) -> tuple[bytes, str]:
    key = crypto.derive_key(_code_bytes(code), b"gaml-pair-v1")
    return key, crypto.keyed_hash(key, b"mdns-tag", 8).hex()


def _send(conn: socket.socket, key: bytes, what: bytes, obj: dict[str, Any]) -> None:
    blob = crypto.seal(key, json.dumps(obj).encode(), b"gaml-pair/" + what, crypto.SystemEntropy())
    conn.sendall(blob.hex().encode() + b"\n")


def _receive(conn: socket.socket, key: bytes, what: bytes) -> dict[str, Any]:
    """One sealed message; :class:`DecryptionFailed` if it was not sealed with the code's key."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("the other device closed the connection")
        data += chunk
        if len(data) > PAIR_LINE_MAX:
            raise InvalidInput("a pairing message over 1 MiB")
    try:
        blob = bytes.fromhex(data.strip().decode())
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("a malformed pairing message") from None
    out = load_json(crypto.open_sealed(key, blob, b"gaml-pair/" + what))
    if not isinstance(out, dict):
        raise InvalidInput("a malformed pairing message")
    return out


def offer_pairing(code: str, invite: Callable[[str], tuple[bytes, list[str]]], wait_s: float) -> dict[str, Any]:
    """Wait up to ``wait_s`` for a device holding ``code`` and give it ``invite(its node id)``: (roster, addresses).
    Returns ``{"paired": node id, "address": where it came from}``."""
    from gaml.node.shells.mdns import PairingOffer

    key, tag = _pair_keys(code)
    deadline = time.monotonic() + wait_s
    tries = 0
    with socket.create_server(("0.0.0.0", 0)) as server, PairingOffer(tag, server.getsockname()[1]):
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Unavailable(f"no device came with the code within {wait_s:g} s; run `gaml pair --code` again")
            server.settimeout(left)
            try:
                conn, addr = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(30)
                try:
                    hello = _receive(conn, key, b"join")
                    node_id, nonce = str(hello["node_id"]), str(hello["nonce"])
                    if len(bytes.fromhex(node_id)) != 32:
                        raise InvalidInput("a node id is 64 hex characters")
                    roster, peers = invite(node_id)
                    _send(conn, key, b"invite", {"roster": roster.hex(), "peers": peers, "nonce": nonce})
                    done = _receive(conn, key, b"joined")
                    if done.get("nonce") != nonce:
                        raise InvalidInput("the device's answer is not about this offer")
                except DecryptionFailed:
                    tries += 1
                    if tries >= MAX_PAIR_TRIES:
                        raise PolicyError(
                            f"{tries} attempts with a wrong code: the offer is closed (run `gaml pair --code` again)"
                        ) from None
                    continue
                except (OSError, KeyError, TypeError, ValueError, InvalidInput):
                    continue  # a connection that broke off, or not a GAML device: keep waiting
                return {"paired": node_id, "address": addr[0]}


def join_pairing(code: str, node_id: str, wait_s: float) -> tuple[bytes, list[str]]:
    """Find the offer of ``code`` on the LAN (mDNS) within ``wait_s`` and fetch the invitation for ``node_id``:
    (roster, the inviter's addresses)."""
    from gaml.node.shells.mdns import find_pairing

    key, tag = _pair_keys(code)
    found = find_pairing(tag, time.monotonic() + wait_s)
    if not found:
        raise Unavailable(
            f"no pairing offer for this code on the LAN within {wait_s:g} s: is `gaml pair --code` running on the "
            "other device, on this network (mDNS does not cross routers)?"
        )
    nonce = crypto.SystemEntropy().random_bytes(16).hex()
    last: Exception | None = None
    for host, port in found:
        try:
            with socket.create_connection((host, port), timeout=30) as conn:
                _send(conn, key, b"join", {"node_id": node_id, "nonce": nonce})
                msg = _receive(conn, key, b"invite")
                if msg.get("nonce") != nonce:
                    raise InvalidInput("the invitation is not an answer to this request")
                roster, peers = bytes.fromhex(msg["roster"]), [str(p) for p in msg.get("peers", [])]
                check_peers(peers, "the invitation: ")
                _send(conn, key, b"joined", {"nonce": nonce})
                return roster, peers
        except DecryptionFailed:
            raise PolicyError("the other device's answer did not open with this code (a mistyped code?)") from None
        except (OSError, KeyError, ValueError, TypeError) as e:
            last = e
    raise Unavailable(f"the pairing offer did not answer: {last}")


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
        raise InvalidInput(f"config.toml p2p.{key} is true or false, not {value!r}")
    return value


def mdns_enabled(home: Path) -> bool:
    """Whether config.toml's ``p2p.mdns`` asks the daemon to announce and discover peers on the LAN (default no)."""
    return _p2p_flag(home, "mdns", False)


def gossip_enabled(home: Path) -> bool:
    """Whether config.toml's ``p2p.gossip`` lets a node in the public swarm gossip its objects (default yes)."""
    return _p2p_flag(home, "gossip", True)


def rendezvous_enabled(home: Path) -> bool:
    """Whether config.toml's ``p2p.rendezvous`` lets a node in the public swarm find swarm nodes in the DHT (default
    yes)."""
    return _p2p_flag(home, "rendezvous", True)


def update_p2p(home: Path, *, listen: Sequence[str] | None = None, add_peers: Sequence[str] = ()) -> dict[str, Any]:
    """Set the listen addresses and/or add peers in ``config.toml`` (atomically); returns the new ``p2p`` section."""
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
    "join_pairing",
    "mdns_enabled",
    "new_code",
    "offer_pairing",
    "p2p_config",
    "read_invitation",
    "rendezvous_enabled",
    "update_p2p",
    "write_invitation",
]
