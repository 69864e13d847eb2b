"""The commands that need the store itself (the daemon holds it while it runs): init, delete, redact, principals,
curation, sources, upkeep; and ``run``, which starts the daemon."""

from __future__ import annotations

import argparse
import getpass
import json

from gaml.node.cli._common import now_us, open_store, unlock
from gaml.node.cli.memory import _memory, acting_as, own_user
from gaml.node.home import (
    init_home,
)
from gaml.policy.access import Principal


def cmd_init(args: argparse.Namespace) -> None:
    user = args.user or getpass.getuser()
    node_id = init_home(
        args.home, unlock(confirm=True), embedder=args.embedder, max_payload_bytes=args.max_payload, user=user
    )
    print(json.dumps({"home": str(args.home), "node_id": node_id, "embedder": args.embedder, "user": user}))


def cmd_delete(args: argparse.Namespace) -> None:
    with open_store(args) as node:
        tomb = node.delete(args.id, now_us(), by=acting_as(args, args.as_) or own_user(args.home, node))
    print(json.dumps({"id": tomb.id, "tombstone": True, "version": tomb.version}))


def cmd_redact(args: argparse.Namespace) -> None:
    with open_store(args) as node:
        packet = node.redact(args.id, acting_as(args, args.as_) or own_user(args.home, node), now_us())
    print(packet)


def cmd_principal_add(args: argparse.Namespace) -> None:
    principal = Principal(
        args.id,
        args.kind,
        frozenset(args.tenant),
        frozenset(args.role),
        frozenset(args.team),
        args.on_behalf_of or "",
    )
    with _memory(args, None, holder=True, checkpoint=False, env=False) as mem:
        p = mem.add_principal(principal)
    print(json.dumps(p.to_json()))


def cmd_principals(args: argparse.Namespace) -> None:
    with _memory(args, None, holder=True, checkpoint=False, env=False) as mem:
        ps = mem.principals()
    print(json.dumps([p.to_json() for p in ps], indent=2))


def cmd_curate(args: argparse.Namespace) -> None:
    with _memory(args, None, holder=True, env=False) as mem:
        report = mem.curate(args.source)
    print(json.dumps(report))


def cmd_sources(args: argparse.Namespace) -> None:
    with _memory(args, None, holder=True, checkpoint=False, env=False) as mem:
        rows = mem.sources()
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        flag = " (curation pending)" if r["curation_pending"] else ""
        print(f"{r['source']:<40} {r['format']:<10} records={r['records']} items={r['items']} gated={r['gated']}{flag}")


def cmd_maintain(args: argparse.Namespace) -> None:
    with _memory(args, None, holder=True, env=False) as mem:
        report = mem.maintain()
    print(json.dumps(report))


def cmd_backup(args: argparse.Namespace) -> None:
    """A consistent, sealed backup of the home: by its daemon when one serves it (between two calls), else here."""
    from gaml.node.backup import backup_home
    from gaml.node.cli.memory import _daemon
    from gaml.node.serve.client import RemoteMemory

    dest = args.directory.expanduser().absolute()
    client = _daemon(args)
    if client is not None:
        with client:
            report = RemoteMemory(client).backup(str(dest))
    else:
        report = backup_home(args.home, unlock(), dest)
    print(json.dumps(report))


def cmd_restore(args: argparse.Namespace) -> None:
    """A backup into a new home (the home's passphrase or key opens it, as it opened the one backed up)."""
    from gaml.node.backup import restore

    print(json.dumps(restore(args.directory.expanduser(), args.home, unlock(), now_us())))


def cmd_run(args: argparse.Namespace) -> None:
    from gaml.node.cli.agents import listen_address
    from gaml.node.serve.daemon import Options, run

    opts = Options(
        socket_path=args.socket,
        listen=args.listen,
        local_principal=args.principal,
        grace_s=args.grace,
        p2p=args.p2p or None,
        peers=args.peer,
        mdns=True if args.mdns else None,
        metrics=listen_address(args.metrics, "--metrics") if args.metrics else None,
    )
    run(args.home, unlock(), opts, log_level=args.log_level)
