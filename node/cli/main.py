"""The parser of ``gaml`` and its entry point: each command's options, and what an error exits with."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import math
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gaml.crdt.swarm import DEFAULT_SWARM
from gaml.node.cli._common import fail
from gaml.node.cli.agents import add_parsers as add_agent_parsers
from gaml.node.cli.config import add_config_parser
from gaml.node.cli.doctor import cmd_doctor
from gaml.node.cli.errors import PartlyCommitted
from gaml.node.cli.memory import (
    cmd_access_log,
    cmd_add,
    cmd_conflicts,
    cmd_export,
    cmd_forget,
    cmd_get,
    cmd_grant,
    cmd_grants,
    cmd_hydrate,
    cmd_ingest,
    cmd_list,
    cmd_put,
    cmd_reputation,
    cmd_revoke,
    cmd_search,
    cmd_stats,
)
from gaml.node.cli.network import (
    cmd_certs_init,
    cmd_certs_issue,
    cmd_certs_list,
    cmd_certs_renew,
    cmd_certs_revoke,
    cmd_pair,
    cmd_peers,
    cmd_subnet_create,
    cmd_subnet_invite,
    cmd_subnet_join,
    cmd_subnet_remove,
    cmd_swarm_join,
)
from gaml.node.cli.store import (
    cmd_backup,
    cmd_curate,
    cmd_delete,
    cmd_init,
    cmd_maintain,
    cmd_principal_add,
    cmd_principals,
    cmd_redact,
    cmd_restore,
    cmd_run,
    cmd_sources,
)
from gaml.node.core.api import VERSION
from gaml.node.core.errors import Unauthenticated
from gaml.node.core.hydrate import HYDRATION_MODES
from gaml.node.core.text.parsers import FORMATS
from gaml.node.home import (
    EMBEDDERS,
    default_home,
    upgrade_home,
)
from gaml.policy.access import Location, Permission, PrincipalKind
from gaml.policy.errors import (
    GamlError,
    KeychainError,
    NotFound,
    PolicyError,
    StoreError,
    UnknownPrincipal,
)
from gaml.policy.model import AssetType, Level, PrivacyScope, ReplicationPolicy

EXIT_CODES = """\
who acts: you, the node's own user (`gaml init --user`, default your login name), unless --as or $GAML_AS names
another principal. Secrets come from the environment: GAML_PASSPHRASE (or GAML_KEYCHAIN_KEY), else a terminal asks.

exit codes:
  0  success
  1  not found (no such asset, file or home)
  2  usage or bad input (a malformed argument, file, JSON or asset)
  3  the store or the keychain failed (locked by another process, corrupt, wrong passphrase)
  4  failed after part of the work was committed (what was committed is printed)
  5  refused: the caller may not do this (policy, an unknown principal, a bad token)
  70 an internal error (a bug: please report it with the message)
"""


def _time(text: str) -> int:
    """A time: microseconds since the epoch, or an ISO 8601 date or date-time (UTC unless it says otherwise)."""
    if text.isdigit():
        if int(text) >= 1 << 63:
            raise argparse.ArgumentTypeError(f"{text} is beyond the largest time (2**63 - 1 microseconds)")
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither microseconds nor an ISO 8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1_000_000)


def _enum(cls: Any) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return cls.parse(text)
        except GamlError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = cls.__name__
    return parse


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{n} is not positive")
    return n


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n} is negative")
    return n


def _seconds(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (x > 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return x


def _peer_options(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--peers",
        action="store_true",
        help="ask the members of the boundaries holding your memory too (a running node's peers), and say who answered",
    )
    s.add_argument("--peer-deadline-ms", type=_positive, default=500, help="how long to wait for peers (default 500)")
    s.add_argument("--peer-fan-out", type=_positive, default=3, help="how many peers to ask (default 3)")
    s.add_argument("--peer-k", type=_positive, default=16, help="candidates asked of each peer (default 16)")
    s.add_argument(
        "--peer-boundary",
        action="append",
        default=[],
        metavar="NAME",
        help="ask this boundary's members (repeatable; default: every boundary holding your memory)",
    )


def _reader_options(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--as", dest="as_", metavar="PRINCIPAL", help="who reads (a registered principal; through a daemon: you)"
    )
    s.add_argument(
        "--purpose",
        type=_enum(Permission),
        default=Permission.READ,
        help="read (default), context, memorize, replicate, export or train",
    )
    s.add_argument(
        "--location",
        type=_enum(Location),
        default=Location.THIS_DEVICE,
        help="where the read executes: this_device (default), trusted_device, private_subnet, public_swarm",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gaml",
        description='GAML: an agentic memory node. Start with `gaml init`, then `gaml add "…"` and `gaml search`.',
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"gaml {VERSION}")
    p.add_argument("--home", type=Path, default=None, help="the node's directory (default: $GAML_HOME or ~/.gaml)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("init", help="create a node: identity, keychain and an empty store")
    s.add_argument(
        "--user",
        help="the node's own user: who every command acts as unless --as names another (default: your login name)",
    )
    s.add_argument("--embedder", choices=EMBEDDERS, default="minilm", help="minilm (default, offline) or hash (fast)")
    s.add_argument("--max-payload", type=_positive, default=1 << 20, help="largest payload in bytes (default 1 MiB)")
    s.set_defaults(func=cmd_init)

    s = sub.add_parser("add", help='remember a note or a chat turn: gaml add "Alice prefers green tea"')
    s.add_argument("text", help="what to remember ('-': read it from stdin)")
    s.add_argument("--role", choices=("user", "assistant", "system", "tool"), default="user", help="default user")
    s.add_argument("--reply", metavar="TEXT", help="the assistant's reply to it (the turn's other half)")
    s.add_argument("--session", help="the conversation it belongs to (default: notes)")
    s.add_argument("--curate", action="store_true", help="compile its summary rungs now (default: at upkeep)")
    s.add_argument("--as", dest="as_", metavar="PRINCIPAL", help="whose memory (default: you, the node's own user)")
    s.add_argument("--json", action="store_true", help="print the ingest report")
    s.set_defaults(func=cmd_add)

    for name, what in (
        ("list", "your own memory, oldest first (one line each; --json: JSON lines)"),
        ("export", "your own memory as JSON lines, decrypted (protect the output)"),
    ):
        s = sub.add_parser(name, help=what)
        s.add_argument("--type", type=_enum(AssetType), action="append", default=[], help="asset type (repeatable)")
        s.add_argument("--since", type=_time, help="created from then (microseconds or ISO 8601)")
        s.add_argument(
            "--limit", type=_positive, default=1000 if name == "list" else 10_000, help="the newest N (at most 100000)"
        )
        s.add_argument("--as", dest="as_", metavar="PRINCIPAL", help="whose memory (default: you)")
        if name == "list":
            s.add_argument("--json", action="store_true", help="JSON lines, as export prints them")
        s.set_defaults(func=cmd_list if name == "list" else cmd_export)

    s = sub.add_parser("put", help="store assets (JSON object, array or JSON Lines, proto JSON mapping)")
    s.add_argument("file", nargs="?", help="input file (default or '-': stdin)")
    s.add_argument("--owner", help="owner_id for assets that do not name one")
    s.add_argument(
        "--as", dest="as_", metavar="PRINCIPAL", help="who writes (a registered principal; default: each asset's owner)"
    )
    s.add_argument("--batch", type=_positive, default=256, help="assets per atomic batch (default 256)")
    s.set_defaults(func=cmd_put)

    s = sub.add_parser("get", help="print an asset as JSON (decrypted), if the principal may read it")
    s.add_argument("id")
    _reader_options(s)
    s.add_argument("--include-deleted", action="store_true", help="print the tombstone of a deleted asset")
    s.set_defaults(func=cmd_get)

    s = sub.add_parser("delete", help="delete an asset (a signed tombstone remains); only its owner may")
    s.add_argument("id")
    s.add_argument("--as", dest="as_", metavar="OWNER", help="the owner (default: you)")
    s.set_defaults(func=cmd_delete)

    s = sub.add_parser("search", help="governed hybrid search (dense + BM25) within what the principal may read")
    s.add_argument("text")
    _reader_options(s)
    s.add_argument("--k", type=_positive, default=10, help="how many results (default 10)")
    s.add_argument("--as-of", type=_time, help="answer with what held then (microseconds or ISO 8601)")
    s.add_argument("--mode", choices=("hybrid", "dense", "lexical"), default="hybrid")
    s.add_argument("--type", type=_enum(AssetType), action="append", default=[], help="asset type (repeatable)")
    s.add_argument("--segment", action="append", default=[], help="segment (repeatable)")
    s.add_argument("--tag", action="append", default=[], help="tag (repeatable)")
    s.add_argument("--entity", action="append", default=[], help="entity (repeatable)")
    _peer_options(s)
    s.add_argument("--json", action="store_true", help="results with their explanations")
    s.set_defaults(func=cmd_search)

    s = sub.add_parser("redact", help="store a redacted packet of an asset (emails, phones, keys, names removed)")
    s.add_argument("id")
    s.add_argument("--as", dest="as_", metavar="OWNER", help="the owner (default: you)")
    s.set_defaults(func=cmd_redact)

    s = sub.add_parser("principal", help="register principals: gaml principal add ID [--tenant T] [--role R]")
    psub = s.add_subparsers(dest="principal_command", required=True, metavar="add")
    a = psub.add_parser("add", help="register (or update) a principal")
    a.add_argument("id")
    a.add_argument("--kind", type=_enum(PrincipalKind), default=PrincipalKind.USER)
    a.add_argument("--tenant", action="append", default=[], help="a tenant it belongs to (repeatable)")
    a.add_argument("--role", action="append", default=[], help="a role it holds (repeatable)")
    a.add_argument("--team", action="append", default=[], help="a team it is a member of (repeatable)")
    a.add_argument("--on-behalf-of", help="for agents and devices: the user they act for")
    a.set_defaults(func=cmd_principal_add)

    s = sub.add_parser("principals", help="list registered principals")
    s.set_defaults(func=cmd_principals)

    s = sub.add_parser("grant", help="grant part of your memory to a principal or team, up to a level of detail")
    s.add_argument("--as", dest="as_", metavar="OWNER", help="the owner granting")
    s.add_argument("--to", required=True, help="grantee: a principal or a team")
    s.add_argument("--max-level", type=_enum(Level), required=True, help="the finest detail released: l0..l3")
    s.add_argument("--segment", action="append", default=[], help="only this segment (repeatable)")
    s.add_argument("--tag", action="append", default=[], help="only assets with one of these tags (repeatable)")
    s.add_argument("--from", dest="time_from", type=_time, help="only assets created from then")
    s.add_argument("--to-time", dest="time_to", type=_time, help="only assets created before then")
    s.add_argument("--expires", type=_time, help="the grant ends then")
    s.set_defaults(func=cmd_grant)

    s = sub.add_parser("revoke", help="revoke a grant from now on (what was read before stays in the log)")
    s.add_argument("grant")
    s.add_argument("--as", dest="as_", metavar="OWNER")
    s.set_defaults(func=cmd_revoke)

    s = sub.add_parser("grants", help="list grants")
    s.add_argument("--owner")
    s.add_argument("--to")
    s.set_defaults(func=cmd_grants)

    s = sub.add_parser("access-log", help="your access log: who read what of your memory, when, how")
    s.add_argument("--as", dest="as_", metavar="OWNER")
    s.add_argument("--limit", type=_positive)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_access_log)

    s = sub.add_parser(
        "conflicts",
        help="where members of a boundary disagree: contested slots, candidates, winners; --choose to override one",
    )
    s.add_argument("--slot", help="only this slot (as listed)")
    s.add_argument(
        "--choose", metavar="VALUE_OR_ID", help="choose the slot's value: a value as listed, or a candidate id"
    )
    s.add_argument("--reason", help="why you chose it (kept in the audited record)")
    s.add_argument("--as", dest="as_", metavar="PRINCIPAL")
    s.add_argument("--purpose", type=_enum(Permission), default=Permission.READ)
    s.add_argument("--location", type=_enum(Location), default=Location.THIS_DEVICE)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_conflicts)

    s = sub.add_parser("reputation", help="each boundary's reputation ledger: members, weights, who is admitted")
    s.add_argument("--as", dest="as_", metavar="PRINCIPAL")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_reputation)

    s = sub.add_parser("ingest", help="ingest transcripts, chat logs, LoCoMo conversations or notes into the journal")
    s.add_argument("paths", nargs="+", metavar="PATH", help="files, or directories to ingest every file under")
    s.add_argument("--format", choices=FORMATS, help="the input format (default: detected per file)")
    s.add_argument("--owner", help="whose memory this is (a principal id; default: you, the node's own user)")
    s.add_argument("--tenant", help="tenant scope of the items")
    s.add_argument("--segment", help="the namespace the items go to")
    s.add_argument(
        "--scope",
        type=_enum(PrivacyScope),
        default=PrivacyScope.USER_PRIVATE,
        help="privacy scope of the items (default user_private; personal data stays local_only whatever this says)",
    )
    s.add_argument(
        "--replicate",
        type=_enum(ReplicationPolicy),
        default=ReplicationPolicy.NONE,
        help="how far the items replicate (trusted_devices, private_subnet, …; the scope caps it; default none)",
    )
    s.add_argument("--item-budget", type=_positive, default=5000, help="items kept per session (default 5000)")
    s.add_argument("--no-curate", action="store_true", help="leave curation for later (`gaml curate`)")
    s.add_argument("--watch", action="store_true", help="keep watching the files and ingest what is appended")
    s.add_argument("--interval", type=_seconds, default=1.0, help="seconds between checks with --watch (default 1)")
    s.add_argument("--json", action="store_true", help="each pass's report as JSON (the default when not a terminal)")
    s.set_defaults(func=cmd_ingest)

    s = sub.add_parser("curate", help="compile pending sources into L1-L3 rungs (summaries, distillations, skeletons)")
    s.add_argument("--source", action="append", default=[], help="only this source id (repeatable)")
    s.set_defaults(func=cmd_curate)

    s = sub.add_parser("hydrate", help="a context frame for a goal within a token budget, and its receipt")
    s.add_argument("--goal", required=True, help="what the memory is for (the request's goal)")
    s.add_argument("--budget", type=_positive, required=True, help="total tokens, envelope included")
    s.add_argument("--plane", metavar="FILE", help='JSON: [{"name", "budget", "seeds", "fact_cap", "walk"}, …]')
    s.add_argument("--as", dest="as_", metavar="PRINCIPAL", help="who hydrates (default: $GAML_AS, else you)")
    s.add_argument("--purpose", type=_enum(Permission), default=Permission.CONTEXT, help="context (default), read, …")
    s.add_argument("--location", type=_enum(Location), default=Location.THIS_DEVICE, help="where the frame is used")
    s.add_argument("--mode", choices=HYDRATION_MODES, default="auto", help="auto (default): hybrid, degrading")
    s.add_argument("--as-of", type=_time, help="hydrate with what held then (microseconds or ISO 8601)")
    s.add_argument(
        "--counter",
        default="heuristic",
        choices=("heuristic", "cl100k_base", "o200k_base"),
        help="token counter: the built-in estimate of cl100k (default) or a real BPE table",
    )
    s.add_argument(
        "--profile",
        type=_count,
        metavar="TOKENS",
        help="tokens for the profile at the head (what stands for any goal): default a tenth, at most 200; 0: none",
    )
    _peer_options(s)
    s.add_argument("--json", action="store_true", help="print {frame, receipt}")
    s.set_defaults(func=cmd_hydrate)

    s = sub.add_parser("forget", help="erase an item and its influence (derivatives rebuilt without it); owner only")
    s.add_argument("id")
    s.add_argument("--as", dest="as_", metavar="OWNER")
    s.set_defaults(func=cmd_forget)

    s = sub.add_parser("sources", help="ingested sources with their watermarks")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_sources)

    s = sub.add_parser(
        "backup", help="a consistent, sealed backup of the home into a new directory (while the daemon runs, too)"
    )
    s.add_argument("directory", type=Path, help="a new (or empty) directory; it holds no plaintext")
    s.set_defaults(func=cmd_backup)
    s = sub.add_parser("restore", help="restore a backup into a new home (needs the home's passphrase or key)")
    s.add_argument("directory", type=Path, help="a directory `gaml backup` made")
    s.add_argument("--home", type=Path, default=argparse.SUPPRESS, help="the new home (default: the global --home)")
    s.set_defaults(func=cmd_restore)

    add_config_parser(sub)

    s = sub.add_parser("doctor", help="check the home, keychain, daemon, indexes, peers and disk; say what to do")
    s.add_argument("--daemon", action="store_true", help="only the daemon's gRPC health (a container's HEALTHCHECK)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_doctor)

    s = sub.add_parser("maintain", help="apply retention (expiry, L0 retirement), finish curation, recompute tiers")
    s.set_defaults(func=cmd_maintain)

    s = sub.add_parser(
        "run", help="serve the node over gRPC (Unix socket; TCP with mutual TLS if --listen) until SIGTERM"
    )
    s.add_argument("--socket", type=Path, help="the Unix socket (default HOME/run/gaml.sock, mode 0600)")
    s.add_argument("--listen", metavar="HOST:PORT", help="also serve TCP, mutual TLS only (needs `gaml certs init`)")
    s.add_argument("--principal", help="who callers on the socket are (default: config local_principal, the only user)")
    s.add_argument("--grace", type=_seconds, default=10.0, help="seconds in-flight calls get at shutdown (default 10)")
    s.add_argument(
        "--p2p",
        action="append",
        metavar="MULTIADDR",
        help="replicate over libp2p, listening here (repeatable; default config p2p.listen, else "
        "/ip4/127.0.0.1/tcp/0 once the node is in a boundary)",
    )
    s.add_argument(
        "--peer",
        action="append",
        default=[],
        metavar="MULTIADDR",
        help="a peer to dial and keep dialling (…/p2p/<peer id>; repeatable; besides config p2p.peers)",
    )
    s.add_argument(
        "--mdns",
        action="store_true",
        help="announce this node on the LAN and dial the GAML nodes found there (mDNS; default config p2p.mdns, off)",
    )
    s.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (opt-in; give 127.0.0.1:9464 for loopback only)",
    )
    s.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="the least severe log lines written (JSON lines on stderr; default info)",
    )
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("certs", help="the node CA and client certificates for TCP with mutual TLS")
    csub = s.add_subparsers(dest="certs_command", required=True, metavar="init|renew-server|issue|revoke|list")
    a = csub.add_parser("init", help="make the node CA (key in the keychain) and the daemon's server certificate")
    a.add_argument(
        "--host",
        action="append",
        default=[],
        help="a name or address clients dial (repeatable; default 127.0.0.1, ::1, localhost)",
    )
    a.set_defaults(func=cmd_certs_init)
    a = csub.add_parser("renew-server", help="a new key and certificate for the daemon (restart it to use them)")
    a.add_argument("--host", action="append", default=[], help="a name or address clients dial (repeatable)")
    a.set_defaults(func=cmd_certs_renew)
    a = csub.add_parser("issue", help="issue a client certificate naming a principal (its key goes to --out only)")
    a.add_argument("principal")
    a.add_argument("--out", type=Path, required=True, help="directory for PRINCIPAL.key (0600), PRINCIPAL.crt, ca.crt")
    a.add_argument("--days", type=_positive, default=365)
    a.set_defaults(func=cmd_certs_issue)
    a = csub.add_parser("revoke", help="refuse a client certificate (by serial) or every certificate of a principal")
    g = a.add_mutually_exclusive_group(required=True)
    g.add_argument("--serial")
    g.add_argument("--principal")
    a.set_defaults(func=cmd_certs_revoke)
    a = csub.add_parser("list", help="the client certificates issued (no keys)")
    a.set_defaults(func=cmd_certs_list)

    s = sub.add_parser("pair", help="add a device to your trusted devices (prints an invitation), or --join one")
    s.add_argument("node_id", nargs="?", help="the new device's node id (`gaml peers` on it shows it)")
    s.add_argument("--out", type=Path, help="where to write the invitation for the new device")
    s.add_argument("--owner", help="whose devices (default: config local_principal, or the node's only user)")
    s.add_argument("--relay", action="store_true", help="a relay: it carries the devices' ciphertext, reads nothing")
    s.add_argument("--join", type=Path, metavar="FILE", help="on the new device: join with the invitation FILE")
    s.add_argument(
        "--code",
        action="store_true",
        help="no file, no address: show a pairing code and wait for the new device on the LAN (mDNS)",
    )
    s.add_argument("--join-code", metavar="CODE", help="on the new device: the code the other device shows")
    s.add_argument("--wait", type=_seconds, default=300.0, help="how long to wait for the other device (default 300)")
    s.set_defaults(func=cmd_pair)

    s = sub.add_parser("subnet", help="enterprise subnets and tenant boundaries: create, invite, join, remove")
    nsub = s.add_subparsers(dest="subnet_command", required=True, metavar="create|invite|join|remove")
    a = nsub.add_parser("create", help="a new boundary administered by this node (its admin key stays here)")
    a.add_argument("name")
    a.add_argument("--tenant", required=True, help="the tenant whose assets replicate inside it")
    a.add_argument("--kind", choices=("subnet", "tenant"), default="subnet")
    a.set_defaults(func=cmd_subnet_create)
    a = nsub.add_parser("invite", help="add a member node (or a relay) and write its invitation")
    a.add_argument("name")
    a.add_argument("node_id")
    a.add_argument("--out", type=Path, required=True)
    a.add_argument("--relay", action="store_true", help="a relay: it carries ciphertext, reads nothing")
    a.set_defaults(func=cmd_subnet_invite)
    a = nsub.add_parser("join", help="join with an invitation file")
    a.add_argument("file", type=Path)
    a.set_defaults(func=cmd_subnet_join)
    a = nsub.add_parser("remove", help="remove a node: the group key rotates, the node receives nothing new")
    a.add_argument("name")
    a.add_argument("node_id")
    a.set_defaults(func=cmd_subnet_remove)

    s = sub.add_parser("swarm", help="the public swarm: join one (public memory that asks for it replicates there)")
    wsub = s.add_subparsers(dest="swarm_command", required=True, metavar="join")
    a = wsub.add_parser(
        "join", help="join a public swarm by name (one per node; anyone may join: nothing in it is secret)"
    )
    a.add_argument("name", nargs="?", default=DEFAULT_SWARM, help=f"the swarm's name (default {DEFAULT_SWARM})")
    a.set_defaults(func=cmd_swarm_join)

    add_agent_parsers(sub, _positive)

    s = sub.add_parser("peers", help="this node's id, its boundaries, their members and the live connections")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_peers)

    s = sub.add_parser("stats", help="counts, partitions and index state")
    s.add_argument("--as", dest="as_", metavar="PRINCIPAL", help="whose view of the partitions (default: you)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_stats)
    return p


class _Notes(logging.Handler):
    """What the node logs while a command runs, said as the command's notes (``gaml run`` logs JSON lines instead)."""

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "fields", {})
        note = fields.get("note") if isinstance(fields, dict) else None
        print(f"gaml: note: {note}" if note else f"gaml: {record.getMessage()} {fields}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.home = (args.home or default_home()).expanduser()
    notes = _Notes(logging.WARNING)
    logging.getLogger("gaml.daemon").addHandler(notes)  # for this command only (gaml run sets its own)
    try:
        _dispatch(args)
    finally:
        logging.getLogger("gaml.daemon").removeHandler(notes)


def _dispatch(args: argparse.Namespace) -> None:
    try:
        if args.func not in (cmd_init, cmd_restore) and args.home.is_dir():
            note = upgrade_home(args.home)  # an older home, first opened by this release
            if note:
                print(f"gaml: note: {note}", file=sys.stderr)
        args.func(args)
    except PartlyCommitted as e:
        fail(str(e), 4)
    except NotFound as e:
        fail(str(e), 1)
    except (StoreError, KeychainError) as e:
        fail(str(e), 3)
    except (PolicyError, Unauthenticated, UnknownPrincipal) as e:
        fail(str(e), 5)
    except GamlError as e:
        fail(str(e), 2)
    except OSError as e:
        fail(f"{e.strerror or e}: {e.filename or ''}".rstrip(": "), 3)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Exception as e:  # a bug: one clear line (the traceback with GAML_DEBUG=1), and its own exit code
        if os.environ.get("GAML_DEBUG"):
            traceback.print_exc()
        fail(f"internal error: {type(e).__name__}: {e} (a bug: please report it; GAML_DEBUG=1 shows where)", 70)
