"""The commands of replication (pairing devices, subnets, peers) and of the node's TLS certificates."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from gaml.node.cli._common import keychain, now_us, open_store
from gaml.node.core.node import Node
from gaml.node.home import (
    local_principal,
)
from gaml.node.shells import certs
from gaml.policy.errors import (
    InvalidInput,
    StoreError,
)


def _replica(node: Node) -> Any:
    from gaml.node.core.replica import Replica

    return Replica(node)


def _own_addresses(args: argparse.Namespace, node_id: str) -> list[str]:
    """Where this node listens, for an invitation: the configured addresses with a fixed port."""
    from gaml.crdt.p2p import peer_id_of
    from gaml.node.pairing import p2p_config
    from gaml.node.shells.mdns import expand_unspecified

    fixed = [a for a in p2p_config(args.home)["listen"] if not a.rstrip("/").endswith("/tcp/0")]
    return [f"{a.rstrip('/')}/p2p/{peer_id_of(node_id)}" for a in expand_unspecified(fixed)]


def _invite(args: argparse.Namespace, kind: str, name: str, label: str | None, create: bool) -> None:
    from gaml.node.pairing import write_invitation

    role = "relay" if args.relay else "member"
    with open_store(args) as node:
        rep = _replica(node)
        now = now_us()
        bid = rep.boundary_for(kind, label) if label is not None else rep.find(name)
        if bid is None:
            if not create:
                raise InvalidInput(f"no {kind} boundary {name!r} here")
            bid = rep.create(kind, name, label, now).id
        current = rep.bound(bid).roster
        # Invited already (its invitation was lost?): the same roster again, nothing changes.
        roster = current if current.role(args.node_id) == role else rep.invite(bid, args.node_id, role, now)
        addresses = _own_addresses(args, node.node_id)
    write_invitation(args.out, roster.encode(), addresses)
    out: dict[str, Any] = {
        "boundary": roster.boundary.name,
        "kind": kind,
        "invited": args.node_id,
        "role": role,
        "version": roster.version,
        "invitation": str(args.out),
        "peers": addresses,
    }
    if not addresses:
        out["note"] = (
            "this node listens on no fixed address (config p2p.listen), so the invitation names none: start the "
            "new node with --peer <this node's address> (`gaml peers` shows it while the daemon runs)"
        )
    print(json.dumps(out))


def _join(args: argparse.Namespace, path: Path) -> None:
    from gaml.node.pairing import check_peers, read_invitation, update_p2p

    roster, peers = read_invitation(path)
    check_peers(peers, f"{path}: ")
    with open_store(args) as node:
        boundary = _replica(node).join(roster, now_us())
    update_p2p(args.home, add_peers=peers)
    print(json.dumps({"joined": boundary.name, "kind": boundary.kind, "label": boundary.label, "peers": peers}))


def _local_user(args: argparse.Namespace, node: Node) -> str:
    name = local_principal(args.home, node)
    if name is None:
        raise InvalidInput(
            "whose devices? this node has no local_principal and not exactly one user; name one with --owner"
        )
    return name


def _no_daemon(args: argparse.Namespace) -> None:
    from gaml.node.serve.runfiles import pid_alive, read_info

    info = read_info(args.home)
    if info and pid_alive(int(info.get("pid", 0))):
        raise InvalidInput(
            f"the daemon (pid {info['pid']}) holds this home's store: stop it, pair, and start it again "
            "(`systemctl --user restart gaml` afterwards, if it runs as a service)"
        )


def _lan_config(args: argparse.Namespace) -> dict[str, Any]:
    """After pairing by code: announce and discover on the LAN (p2p.mdns), listening on it (p2p.listen
    ``/ip4/0.0.0.0/tcp/0`` where nothing was set), so the devices find each other again after an address change."""
    from gaml.node.home import read_config, set_setting, write_config

    cfg = read_config(args.home, overrides=False)
    cfg = set_setting(cfg, ("p2p", "mdns"), True)
    if not (cfg.get("p2p") or {}).get("listen"):
        cfg = set_setting(cfg, ("p2p", "listen"), ["/ip4/0.0.0.0/tcp/0"])
    write_config(args.home, cfg)
    return dict(cfg["p2p"])


def _pair_by_code(args: argparse.Namespace) -> None:
    """The device that has the memory: a code, then wait for the new device on the LAN."""
    from gaml.node.pairing import new_code, offer_pairing

    _no_daemon(args)
    with open_store(args) as node:
        owner = args.owner or _local_user(args, node)
        rep = _replica(node)
        code = new_code(node.store.entropy)

        def invite(node_id: str) -> tuple[bytes, list[str]]:
            now = now_us()
            bid = rep.boundary_for("devices", owner)
            if bid is None:
                bid = rep.create("devices", f"{owner}-devices", owner, now).id
            current = rep.bound(bid).roster
            roster = current if current.role(node_id) == "member" else rep.invite(bid, node_id, "member", now)
            return roster.encode(), _own_addresses(args, node.node_id)

        print(
            json.dumps(
                {
                    "code": code,
                    "wait_seconds": args.wait,
                    "next": f"on the new device, on this network: gaml pair --join-code {code}",
                }
            ),
            flush=True,
        )
        result = offer_pairing(code, invite, args.wait)
    p2p = _lan_config(args)
    print(json.dumps({**result, "boundary": f"{owner}-devices", "mdns": True, "listen": p2p["listen"]}))


def _join_by_code(args: argparse.Namespace) -> None:
    from gaml.node.pairing import join_pairing, update_p2p

    _no_daemon(args)
    with open_store(args) as node:
        roster, peers = join_pairing(args.join_code, node.node_id, args.wait)
        boundary = _replica(node).join(roster, now_us())
    if peers:
        update_p2p(args.home, add_peers=peers)
    p2p = _lan_config(args)
    print(json.dumps({"joined": boundary.name, "kind": boundary.kind, "peers": peers, "listen": p2p["listen"]}))


def cmd_pair(args: argparse.Namespace) -> None:
    if args.code or args.join_code:
        if args.node_id or args.join or args.out:
            raise InvalidInput("--code and --join-code pair without an invitation file or a node id")
        if args.code and args.join_code:
            raise InvalidInput("--code on the device that has the memory, --join-code CODE on the new one")
        (_pair_by_code if args.code else _join_by_code)(args)
        return
    if args.join:
        if args.node_id:
            raise InvalidInput("give either a NODE_ID to invite or --join FILE, not both")
        _join(args, args.join)
        return
    if not args.node_id or not args.out:
        raise InvalidInput(
            "gaml pair NODE_ID --out FILE (on a device you have), or gaml pair --join FILE (on the new one)"
        )
    owner = args.owner
    if not owner:
        with open_store(args, checkpoint=False) as node:
            owner = _local_user(args, node)
    _invite(args, "devices", f"{owner}-devices", owner, create=True)


def cmd_subnet_create(args: argparse.Namespace) -> None:
    with open_store(args) as node:
        b = _replica(node).create(args.kind, args.name, args.tenant, now_us())
    print(json.dumps({"created": b.name, "kind": b.kind, "tenant": b.label, "id": b.id.hex()}))


def cmd_swarm_join(args: argparse.Namespace) -> None:
    with open_store(args) as node:
        b = _replica(node).join_swarm(args.name, now_us())
    print(json.dumps({"joined": b.name, "kind": b.kind, "id": b.id.hex()}))


def cmd_subnet_invite(args: argparse.Namespace) -> None:
    _invite(args, "subnet", args.name, None, create=False)


def cmd_subnet_join(args: argparse.Namespace) -> None:
    _join(args, args.file)


def cmd_subnet_remove(args: argparse.Namespace) -> None:
    with open_store(args) as node:
        rep = _replica(node)
        roster = rep.remove(rep.find(args.name), args.node_id, now_us())
    print(json.dumps({"boundary": roster.boundary.name, "removed": args.node_id, "epoch": roster.epoch}))


def cmd_peers(args: argparse.Namespace) -> None:
    from gaml.node.serve.replicator import read_status
    from gaml.node.serve.runfiles import pid_alive, read_info, replication_path

    info = read_info(args.home)
    if info and pid_alive(int(info.get("pid", 0))):
        try:
            out = read_status(replication_path(args.home), keychain(args))
        except OSError:
            raise StoreError(
                f"the daemon (pid {info['pid']}) runs without replication, or has not reported yet"
            ) from None
    else:
        with open_store(args, checkpoint=False) as node:
            from gaml.crdt.p2p import peer_id_of
            from gaml.node.pairing import p2p_config

            out = {
                "node_id": node.node_id,
                "peer_id": peer_id_of(node.node_id),
                "p2p": p2p_config(args.home),
                "boundaries": _replica(node).describe(),
            }
            out["running"] = False
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"this node  {out['node_id']}" + ("" if out.get("running", True) else "  (not running)"))
    for a in out.get("addresses", []):
        print(f"  listens  {a}")
    for b in out["boundaries"]:
        print(f"{b['kind']:8} {b['name']} ({b['label']})  role {b['role']}  epoch {b['epoch']}  v{b['version']}")
        for m in b["members"]:
            live = out.get("connected", {}).get(m["node"])
            print(f"    {m['role']:6} {m['node'][:16]}…" + ("  connected" if live else ""))
    listed = {m["node"] for b in out["boundaries"] for m in b["members"]}
    others = sorted(set(out.get("connected", {})) - listed)
    if others:
        print(f"connected, sharing no boundary (they learn nothing): {', '.join(n[:16] + '…' for n in others)}")


def cmd_certs_init(args: argparse.Namespace) -> None:
    hosts = tuple(args.host) or certs.DEFAULT_HOSTS
    info = certs.init_ca(args.home, keychain(args), int(time.time()), hosts=hosts)
    print(json.dumps({"ca": str(certs.tls_dir(args.home) / "ca.crt"), "serial": info.serial_hex, "hosts": hosts}))


def cmd_certs_issue(args: argparse.Namespace) -> None:
    info = certs.issue_client(args.home, keychain(args), args.principal, args.out, int(time.time()), days=args.days)
    key, cert, ca = certs.client_paths(args.out, args.principal)
    print(
        json.dumps(
            {
                "principal": info.principal,
                "serial": info.serial_hex,
                "key": str(key),
                "cert": str(cert),
                "ca": str(ca),
                "not_after": info.not_after_s,
            }
        )
    )


def cmd_certs_renew(args: argparse.Namespace) -> None:
    hosts = tuple(args.host) or certs.DEFAULT_HOSTS
    info = certs.renew_server(args.home, keychain(args), int(time.time()), hosts=hosts)
    print(json.dumps({"server": str(certs.tls_dir(args.home) / "server.crt"), "serial": info.serial_hex}))


def cmd_certs_revoke(args: argparse.Namespace) -> None:
    doc = certs.revoke(
        args.home, int(time.time()), keychain=keychain(args), serial=args.serial, principal=args.principal
    )
    print(json.dumps(doc))


def cmd_certs_list(args: argparse.Namespace) -> None:
    print(json.dumps(certs.list_issued(args.home, keychain(args)), indent=2))
