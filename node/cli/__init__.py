"""``gaml``: the command line for people. ``gaml --home DIR COMMAND …``; ``gaml COMMAND --help`` for details.

Secrets come from the environment, never from arguments: ``GAML_PASSPHRASE`` (a passphrase stretched by Argon2id), or
``GAML_KEYCHAIN_KEY`` (64 hex characters, for unattended nodes). Without either, an interactive terminal is asked.
Exit codes: 0 success, 1 not found, 2 bad input or refused, 3 store or keychain failure, 4 a failure after part of
the work was committed (``gaml put``: the ids of what was committed are printed, the message says what was not).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import getpass
import json
import math
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from gaml.node.cli.errors import PartlyCommitted
from gaml.node.core.hydrate import HYDRATION_MODES, HydrationRequest, Hydrator, Segment, parse_plane
from gaml.node.core.memory.ingest import IngestOptions, Ingestor
from gaml.node.core.memory.ladder import Ladder
from gaml.node.core.node import Node, hit_json, whose
from gaml.node.core.text.parsers import FORMATS, detect, parse, unterminated_last_line
from gaml.node.core.text.records import Source
from gaml.node.home import (
    EMBEDDERS,
    check_home,
    default_home,
    init_home,
    local_principal,
    make_counter,
    memory_layers,
    open_node,
    read_config,
)
from gaml.node.shells import certs
from gaml.node.shells.file_keychain import FileKeychain, Unlock
from gaml.policy import crypto
from gaml.policy.access import Grant, Location, Permission, Principal, PrincipalKind
from gaml.policy.errors import (
    Deleted,
    GamlError,
    InvalidAsset,
    InvalidInput,
    KeychainError,
    NotFound,
    PolicyError,
    StoreError,
    StoreLocked,
)
from gaml.policy.model import Asset, AssetType, Level, PrivacyScope, ReplicationPolicy, load_json
from gaml.proto.convert import asset_to_json, draft_from_json


def now_us() -> int:
    return time.time_ns() // 1000


def _fail(msg: str, code: int) -> NoReturn:
    print(f"gaml: error: {msg}", file=sys.stderr)
    raise SystemExit(code)


def _unlock(*, confirm: bool = False) -> Unlock:
    unlock = Unlock.from_env()
    if unlock is not None:
        return unlock
    if not sys.stdin.isatty():
        raise KeychainError("the keychain is locked: set GAML_PASSPHRASE (or GAML_KEYCHAIN_KEY, 64 hex characters)")
    pw = getpass.getpass("GAML passphrase: ")
    if confirm and getpass.getpass("again: ") != pw:
        raise KeychainError("the passphrases differ")
    return Unlock(passphrase=pw)


def _read_drafts(text: str, origin: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Assets from a JSON object, a JSON array of objects, or JSON Lines; each with where it came from."""
    stripped = text.strip()
    if not stripped:
        raise InvalidAsset(f"{origin}: no input")
    try:
        doc = load_json(stripped, origin)
    except json.JSONDecodeError:
        doc = None
        for n, line in enumerate(stripped.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = load_json(line, f"{origin}:{n}")
            except json.JSONDecodeError as e:
                raise InvalidAsset(f"{origin}:{n}: not JSON ({e.msg})") from None
            yield f"{origin}:{n}", obj
        return
    if isinstance(doc, list):
        for i, obj in enumerate(doc):
            yield f"{origin}[{i}]", obj
    else:
        yield origin, doc


def _progress(total: int, desc: str, unit: str = "asset") -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=total < 2 or not sys.stderr.isatty())


def cmd_init(args: argparse.Namespace) -> None:
    node_id = init_home(args.home, _unlock(confirm=True), embedder=args.embedder, max_payload_bytes=args.max_payload)
    print(json.dumps({"home": str(args.home), "node_id": node_id, "embedder": args.embedder}))


@contextlib.contextmanager
def _node(args: argparse.Namespace, *, checkpoint: bool = True) -> Iterator[Node]:
    """The node of ``--home``, closed afterwards (after a checkpoint of its indexes, unless ``checkpoint=False``)."""
    try:
        node = open_node(args.home, _unlock())
    except StoreLocked:
        from gaml.node.serve.daemon import pid_alive, read_info

        info = read_info(args.home)
        if info and pid_alive(int(info.get("pid", 0))):
            raise StoreLocked(
                f"the daemon (pid {info['pid']}) holds the database of {args.home}; `gaml {args.command}` works on the "
                f"store directly, so stop the daemon first (kill -TERM {info['pid']}), or use a command it serves "
                f"({', '.join(DAEMON_COMMANDS)})"
            ) from None
        raise
    try:
        yield node
    except BaseException:
        node.close(checkpoint=False)  # the journal has every acknowledged write; do not mask the error
        raise
    if checkpoint:
        try:
            node.store.checkpoint()
        except (OSError, StoreError) as e:
            # The command's writes are committed (the journal is the truth); only the index snapshots, a cache, are
            # missing: say so instead of failing a command that succeeded.
            print(
                f"gaml: warning: done and committed, but the index snapshots could not be saved "
                f"({getattr(e, 'strerror', None) or e}); they are rebuilt from the journal at the next open",
                file=sys.stderr,
            )
    node.close(checkpoint=False)


# -- through the daemon ------------------------------------------------------------------------------------------------

# The commands a running daemon serves (the others need the store itself, which the daemon holds).
DAEMON_COMMANDS = (
    "put",
    "get",
    "search",
    "hydrate",
    "ingest",
    "forget",
    "grant",
    "revoke",
    "grants",
    "access-log",
    "stats",
)


def _daemon(args: argparse.Namespace) -> Any:
    """A client of the daemon serving ``--home`` (over its Unix socket), or ``None`` when none runs.

    A daemon that left its ``run/daemon.json`` but is gone (killed) does not count; one that runs but does not answer
    is an error that says so, rather than a silent fallback to a database it still holds."""
    from gaml.node.serve.client import Client
    from gaml.node.serve.daemon import pid_alive, read_info, socket_listens

    info = read_info(args.home)
    if not info or not pid_alive(int(info.get("pid", 0))) or not socket_listens(Path(info["socket"])):
        return None  # none ever ran, or it was killed (its run/daemon.json and socket file stay behind)
    client = Client.unix(info["socket"])
    try:
        client.wait_ready(10)
    except GamlError:
        client.close()
        raise StoreError(
            f"the daemon (pid {info['pid']}) of {args.home} does not answer on {info['socket']}; it holds the "
            "database, so this command cannot open it either: wait for it to finish starting, or stop it"
        ) from None
    return client


def _as_daemon_caller(client: Any, given: str | None) -> str:
    """Over the socket you are your uid's principal: ``--as`` may only name that principal. Returns the user it acts
    as (whose memory is the caller's own)."""
    st = client.status()
    me = str(st["principal"])
    if given and given != me:
        raise PolicyError(
            f"a daemon serves this home, and over its socket you are {me}; acting as {given} needs {given}'s own "
            "client certificate (gaml certs issue) over TCP with mutual TLS"
        )
    return str(st.get("user") or me)


def _regular_file(path: Path, what: str) -> None:
    """InvalidInput unless ``path`` is a regular file (after symlinks); NotFound if there is nothing there."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise NotFound(f"{path}: no such file or directory") from None
    if not stat.S_ISREG(mode):
        kind = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}
        raise InvalidInput(f"{path} is {kind.get(stat.S_IFMT(mode), 'not a regular file')}: {what}")


def _put_batches(put: Callable[[list[Any]], list[str]], items: list[Any], batch: int, bar: Any) -> None:
    """Put ``items`` in batches, printing each batch's ids as soon as it is committed; a failure after the first
    batch is :class:`PartlyCommitted`, naming how many were committed (their ids are on stdout)."""
    done = 0
    for i in range(0, len(items), batch):
        chunk = items[i : i + batch]
        try:
            ids = put(chunk)
        except GamlError as e:
            if done == 0:
                raise
            raise PartlyCommitted(
                f"assets #1-#{done} of {len(items)} were committed (their ids are printed); #{done + 1}-#{len(items)} "
                f"were not: {e}"
            ) from None
        for id_ in ids:
            print(id_, flush=True)
        done += len(chunk)
        bar.update(len(chunk))


def cmd_put(args: argparse.Namespace) -> None:
    origin = "stdin" if args.file in (None, "-") else args.file
    if args.file not in (None, "-"):
        _regular_file(Path(args.file), "gaml put reads a regular file, or stdin (gaml put - < FILE)")
    try:
        text = sys.stdin.read() if args.file in (None, "-") else Path(args.file).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InvalidAsset(f"{origin}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    parsed = list(_read_drafts(text, origin))  # read once: checked here, sent as they are through a daemon
    drafts = []
    for where, obj in parsed:
        try:
            fields = draft_from_json(obj)
            if args.owner and "owner_id" not in fields:
                fields["owner_id"] = args.owner
            drafts.append(fields)
        except GamlError as e:
            raise type(e)(f"{where}: {e}") from None
    client = _daemon(args)
    if client is not None:
        with client:
            _as_daemon_caller(client, args.as_)
            objs = [obj for _, obj in parsed]
            for obj in objs:
                if args.owner and "owner_id" not in obj and "ownerId" not in obj:
                    obj["owner_id"] = args.owner
            if len(objs) > args.batch:  # several calls: all are checked before the first writes
                for i in range(0, len(objs), args.batch):
                    chunk = objs[i : i + args.batch]
                    try:
                        client.put(chunk, check_only=True)
                    except (PolicyError, InvalidAsset, InvalidInput) as e:  # about an asset: name it in the input
                        raise type(e)(_renumbered(str(e), i, len(chunk))) from None
            with _progress(len(objs), "put") as bar:
                _put_batches(client.put, objs, args.batch, bar)
        return
    with _node(args) as node:
        now = now_us()
        built = []
        if args.as_:  # as through the daemon: memory without an owner is the writer's user's
            user = node.governance.principal(args.as_).user
            drafts = [d if d.get("owner_id") else {**d, "owner_id": user} for d in drafts]
        for i, d in enumerate(drafts):
            try:
                built.append(node.build(d, now))
            except GamlError as e:
                raise type(e)(f"asset #{i + 1}: {e}") from None
        _authorize_put(node, built, args.as_)
        with _progress(len(built), "put") as bar:
            _put_batches(lambda chunk: node.put(chunk, now), built, args.batch, bar)


def _renumbered(message: str, offset: int, size: int) -> str:
    """A batch's error with its "asset #N" counted in the whole input (the batch of ``size`` began at ``offset``; the
    error of a batch of one names no asset)."""
    if size == 1 and not re.match(r"asset #\d+", message):
        message = f"asset #1: {message}"
    return re.sub(r"asset #(\d+)", lambda m: f"asset #{int(m.group(1)) + offset}", message, count=1)


def _authorize_put(node: Node, assets: Sequence[Asset], as_: str | None) -> None:
    """Authorize a put on the store before anything is written: as ``--as`` when given, else each asset as written
    by its owner (the command line holds the home's keys, but memory still goes only where its owner may put it)."""
    if as_:
        node.authorize_writes(node.governance.principal(as_), assets)
        return
    for i, a in enumerate(assets):
        if a.owner_id:
            writer = node.writer(a.owner_id)[0]
        elif a.tenant_scope:
            raise PolicyError(f"asset #{i + 1} has no owner but tenant {a.tenant_scope}: name who writes it with --as")
        else:
            continue  # ownerless public memory of no tenant: the home's holder publishes it
        try:
            node.authorize_writes(writer, [a])
        except PolicyError as e:
            raise PolicyError(f"asset #{i + 1}: {e}") from None


def cmd_get(args: argparse.Namespace) -> None:
    client = _daemon(args)
    if client is not None:
        with client:
            _as_daemon_caller(client, args.as_)
            out = client.get(args.id, purpose=args.purpose.value, location=args.location.value)
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return
    if not args.as_:
        raise PolicyError("name who reads with --as (a registered principal)")
    with _node(args, checkpoint=False) as node:
        try:
            asset = node.read(args.id, args.as_, now_us(), purpose=args.purpose, location=args.location)
        except Deleted:
            if not args.include_deleted:
                raise
            asset = node.store.get(args.id, include_deleted=True)  # a tombstone: no payload, shown to its owner only
            if node.governance.principal(args.as_).user != asset.owner_id:
                raise
    print(json.dumps(asset_to_json(asset), indent=2, ensure_ascii=False))


def cmd_delete(args: argparse.Namespace) -> None:
    with _node(args) as node:
        tomb = node.delete(args.id, now_us(), by=args.as_)
    print(json.dumps({"id": tomb.id, "tombstone": True, "version": tomb.version}))


def cmd_search(args: argparse.Namespace) -> None:
    client = _daemon(args)
    if client is not None:
        with client:
            who = _as_daemon_caller(client, args.as_)
            found = client.search(
                args.text,
                k=args.k,
                purpose=args.purpose.value,
                location=args.location.value,
                mode={"hybrid": 1, "dense": 2, "lexical": 3}[args.mode],
                as_of=args.as_of or 0,
                types=[_wire_type(t) for t in args.type],
                segments=args.segment,
                tags=args.tag,
                entities=args.entity,
            )
        rows = [
            {
                **h["explain"],
                "owner": h["asset"]["owner_id"],
                "type": h["asset"]["asset_type"],
                "level": h["asset"]["level"],
                "text": _payload_text(h["asset"]["payload"]),
            }
            for h in found
        ]
        _print_hits(rows, args, who)
        return
    if not args.as_:
        raise PolicyError("name who reads with --as (a registered principal)")
    with _node(args) as node:
        hits = node.search(
            args.text,
            args.as_,
            now_us(),
            k=args.k,
            purpose=args.purpose,
            location=args.location,
            as_of=args.as_of or 0,
            mode=args.mode,
            types=frozenset(args.type),
            segments=frozenset(args.segment),
            tags=frozenset(args.tag),
            entities=frozenset(args.entity),
        )
        reader = node.governance.principal(args.as_).user
    _print_hits([hit_json(h) for h in hits], args, reader)


def _print_hits(rows: list[dict[str, Any]], args: argparse.Namespace, who: str) -> None:
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    if not rows:
        print(f"(nothing that {who} may {args.purpose.value} matches)")
    for h in rows:
        text = whose(h["owner"], who) + " ".join(h["text"].split())  # one line: no text passes for another row
        text = text if len(text) <= 90 else text[:89] + "…"
        print(f"{h['score']:6.4f} {h['path']:<7} {h['id']}  {h['type']:<11} {h['partition']:<30} {text}")


def _payload_text(payload: dict[str, Any]) -> str:
    text = payload.get("text")
    return text if isinstance(text, str) else json.dumps(payload, sort_keys=True, separators=(",", ":"))


def _wire_type(t: AssetType) -> int:
    from gaml.proto.gaml.v1 import asset_pb2

    return int(asset_pb2.AssetType.Value(f"ASSET_TYPE_{t.name}"))


def cmd_redact(args: argparse.Namespace) -> None:
    with _node(args) as node:
        packet = node.redact(args.id, args.as_, now_us())
    print(packet)


def cmd_principal_add(args: argparse.Namespace) -> None:
    with _node(args, checkpoint=False) as node:
        p = node.governance.add_principal(
            Principal(
                args.id,
                args.kind,
                frozenset(args.tenant),
                frozenset(args.role),
                frozenset(args.team),
                args.on_behalf_of or "",
            )
        )
    print(json.dumps(p.to_json()))


def cmd_principals(args: argparse.Namespace) -> None:
    with _node(args, checkpoint=False) as node:
        ps = node.governance.principals()
    print(json.dumps([p.to_json() for p in ps], indent=2))


def cmd_grant(args: argparse.Namespace) -> None:
    client = _daemon(args)
    if client is not None:
        with client:
            _as_daemon_caller(client, args.as_)
            out = client.grant(
                args.to,
                args.max_level.value,
                segments=args.segment,
                tags=args.tag,
                time_from=args.time_from or 0,
                time_to=args.time_to or 0,
                expires_at=args.expires or 0,
            )
        print(json.dumps(out))
        return
    if not args.as_:
        raise PolicyError("name the granting owner with --as")
    with _node(args, checkpoint=False) as node:
        g = node.governance.grant(
            Grant(
                args.as_,
                args.to,
                args.max_level,
                now_us(),
                frozenset(args.segment),
                frozenset(args.tag),
                args.time_from or 0,
                args.time_to or 0,
                args.expires or 0,
            )
        )
    print(json.dumps(g.to_json()))


def cmd_revoke(args: argparse.Namespace) -> None:
    client = _daemon(args)
    if client is not None:
        with client:
            _as_daemon_caller(client, args.as_)
            print(json.dumps(client.revoke(args.grant)))
        return
    if not args.as_:
        raise PolicyError("name the owner with --as")
    with _node(args, checkpoint=False) as node:
        g = node.governance.revoke(args.grant, node.governance.principal(args.as_), now_us())
    print(json.dumps(g.to_json()))


def cmd_grants(args: argparse.Namespace) -> None:
    client = _daemon(args)
    if client is not None:
        with client:
            both = client.grants()
        seen = {g["id"]: g for g in both["made"] + both["received"]}
        rows = [
            g
            for g in seen.values()
            if (args.owner is None or g["owner"] == args.owner) and (args.to is None or g["grantee"] == args.to)
        ]
        print(json.dumps(rows, indent=2))
        return
    with _node(args, checkpoint=False) as node:
        gs = node.governance.grants(owner=args.owner, grantee=args.to)
    print(json.dumps([g.to_json() for g in gs], indent=2))


def cmd_access_log(args: argparse.Namespace) -> None:
    client = _daemon(args)
    if client is not None:
        with client:
            _as_daemon_caller(client, args.as_)
            log = client.access_log(args.limit or 100)
    else:
        if not args.as_:
            raise PolicyError("name the owner with --as")
        with _node(args, checkpoint=False) as node:
            p = node.governance.principal(args.as_)
            log = node.governance.access_log(p.user, p, limit=args.limit)
    if args.json:
        print(json.dumps(log, indent=2))
        return
    for r in log:
        items = ", ".join(f"{i['id'][:12]}…@{i['level']}" for i in r["read"][:6])
        if len(r["read"]) > 6:
            items += f" and {len(r['read']) - 6} more"
        when = dt.datetime.fromtimestamp(r["at"] / 1e6, dt.UTC).isoformat(timespec="seconds")
        print(f"{when}  {r['who']:<10} {r['kind']:<6} {r['purpose']:<8} {r['location']:<14} {items}")


def cmd_stats(args: argparse.Namespace) -> None:
    client = _daemon(args)
    if client is not None:
        with client:
            st = client.status()
        if args.json:
            print(json.dumps(st, indent=2))
        else:
            for k, v in st.items():
                print(f"{k:>16}: {v}")
        return
    with _node(args) as node:
        s = node.store.stats()
        files = sum(p.stat().st_size for p in args.home.rglob("*") if p.is_file())
        out = {
            "node_id": node.node_id,
            "embedder": node.embedder.id,
            "assets": s.assets,
            "tombstones": s.tombstones,
            "journal_seq": s.journal_seq,
            "indexed": s.indexed,
            "pending": s.pending,
            "partitions": s.partitions,
            "rebuilt_indexes": s.rebuilt_indexes,
            "replayed_events": s.replayed_events,
            "bytes_on_disk": files,
        }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for k, v in out.items():
        if k != "partitions":
            print(f"{k:>16}: {v}")
    for name, p in sorted(s.partitions.items()):
        print(f"{'partition':>16}: {name}  indexed={p['indexed']} pending={p['pending']} embedder={p['embedder']}")


def _ingest_paths(paths: Sequence[str]) -> list[Path]:
    """The files to ingest: each file given, and the files under each directory given (sorted, hidden ones skipped)."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            # Hidden below the directory given, that is; the directory itself may well be ~/.claude/projects.
            found = sorted(
                f
                for f in p.rglob("*")
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
            if not found:
                raise NotFound(f"{raw}: the directory holds no files to ingest (hidden ones are skipped)")
            out += found
        else:
            _regular_file(p, "gaml ingest reads regular files (it keeps a watermark per file)")
            out.append(p)
    return out


def _read_sources(path: Path, fmt: str | None) -> list[Source]:
    """The sources of one file; a parse error names the file by the path given (and says when --format forced it)."""
    data = path.read_bytes()
    try:
        return parse(data, path.name, fmt, origin=str(path.resolve()))
    except InvalidInput as e:
        msg = str(e)
        msg = msg.removeprefix(f"{path.name}: ")  # the parser names the file by its base name
        if fmt is not None:
            msg += f" (read as {fmt} because of --format {fmt}; without --format the format is detected)"
        raise InvalidInput(f"{path}: {msg}") from None


def _snapshot(files: Sequence[Path]) -> dict[Path, tuple[int, int]]:
    """Size and modification time of each file that still exists (what --watch compares between checks)."""
    out = {}
    for f in files:
        try:
            st = f.stat()
        except FileNotFoundError:
            continue  # gone between the listing and now: the next check no longer lists it
        out[f] = (st.st_size, st.st_mtime_ns)
    return out


def _ingest_pass(
    node: Node, ingestor: Ingestor, ladder: Ladder, files: Sequence[Path], args: argparse.Namespace
) -> dict[str, Any]:
    """Parse and ingest every file (records as progress), then curate what changed; a report without any text."""
    sources = [s for f in files for s in _read_sources(f, args.format)]
    opts = IngestOptions(
        owner=args.owner,
        tenant=args.tenant or "",
        segment=args.segment or "",
        scope=args.scope,
        replication=args.replicate,
        item_budget=args.item_budget,
    )
    node.authorize_writes(node.writer(args.owner)[0], [opts.target()])  # the command line writes as the owner
    now = now_us()
    with _progress(sum(len(s.records) for s in sources), "ingest", unit="record") as bar:
        report = ingestor.ingest(sources, opts, now, progress=bar.update)
    out: dict[str, Any] = {"files": len(files), **report.to_json()}
    if not args.no_curate and report.dirty:
        with _progress(len(report.dirty), "curate", unit="source") as bar:
            out["curation"] = ladder.curate(now, report.dirty, progress=bar.update).to_json()
    return out


def cmd_ingest(args: argparse.Namespace) -> None:
    """One pass over the paths; with --watch, another pass over the files that changed after each interval.

    Each pass prints one JSON line. Files are looked at (size, modification time) *before* they are read, so a write
    that lands while a pass reads them is seen as a change by the next check (and re-reading what was already
    ingested is skipped by the watermarks)."""
    files = _ingest_paths(args.paths)
    client = _daemon(args)
    if client is not None:
        with client:
            _as_daemon_caller(client, args.owner)

            def through_daemon(todo: Sequence[Path]) -> dict[str, Any]:
                return dict(
                    client.ingest(
                        list(todo),
                        format=args.format or "",
                        tenant=args.tenant or "",
                        segment=args.segment or "",
                        scope=args.scope.value,
                        replication=args.replicate.value,
                        item_budget=args.item_budget,
                        curate=not args.no_curate,
                    )
                )

            _ingest_passes(through_daemon, files, args)
        return
    with _node(args) as node:
        ingestor, ladder = memory_layers(args.home, node)
        _ingest_passes(lambda todo: _ingest_pass(node, ingestor, ladder, todo, args), files, args)


CLIPPED_SHOWN_MAX = 20


def _print_pass(report: dict[str, Any]) -> None:
    """A pass's report as one JSON line on stdout, and on stderr what it cut to fit the payload limit."""
    clipped = report.get("clipped") or []
    for c in clipped[:CLIPPED_SHOWN_MAX]:
        where = c["source"] if c.get("position") is None else f"{c['source']}, record {c['position']}"
        print(
            f"gaml: warning: {where}: its {c['field']} was cut from {c['chars']:,} to {c['kept']:,} characters "
            "(head and tail kept) to fit the payload limit; the file keeps it whole",
            file=sys.stderr,
        )
    if len(clipped) > CLIPPED_SHOWN_MAX:
        print(
            f"gaml: warning: … and {len(clipped) - CLIPPED_SHOWN_MAX} more cut (the report's clipped list)",
            file=sys.stderr,
        )
    print(json.dumps(report), flush=True)


def _ingest_passes(
    one_pass: Callable[[Sequence[Path]], dict[str, Any]], files: Sequence[Path], args: argparse.Namespace
) -> None:
    """A pass over every file; with --watch, a pass over the files that changed after each interval (each pass one
    JSON line), whether the passes run on the store or through the daemon."""
    seen = _snapshot(files)
    _print_pass(_reporting_held_back(one_pass, files, args.format))
    if not args.watch:
        return
    print(f"gaml: watching {len(files)} file(s); Ctrl-C stops", file=sys.stderr, flush=True)
    try:
        while True:
            time.sleep(args.interval)
            now_seen = _snapshot(_ingest_paths(args.paths))
            changed = [f for f, mark in now_seen.items() if seen.get(f) != mark]
            seen = now_seen
            if changed:
                try:
                    _print_pass(_reporting_held_back(one_pass, changed, args.format))
                except (InvalidInput, OSError) as e:  # a JSON file caught mid-write, a file gone: try again
                    print(f"gaml: skipped this pass: {e}", file=sys.stderr, flush=True)
                    seen = {f: m for f, m in seen.items() if f not in changed}
    except KeyboardInterrupt:
        print("gaml: stopped watching", file=sys.stderr)


def _reporting_held_back(
    one_pass: Callable[[Sequence[Path]], dict[str, Any]], files: Sequence[Path], fmt: str | None
) -> dict[str, Any]:
    """``one_pass(files)``, its report naming (in ``held_back``, and on stderr) every transcript whose unterminated
    last line was left out as a write in progress: it is ingested by the next pass that sees it complete."""
    out = one_pass(files)
    held = []
    for f in files:
        try:
            data = f.read_bytes()
            if (fmt or detect(f.name, data)) != "transcript":
                continue
        except (OSError, InvalidInput):
            continue  # gone, or not a format the pass read: nothing held back
        line = unterminated_last_line(data)
        if line is not None:
            held.append({"file": str(f), "line": line})
            print(
                f"gaml: warning: {f}:{line}: the last line is unterminated and not JSON yet (a write in progress?); it "
                "was not ingested, and will be once it is complete",
                file=sys.stderr,
                flush=True,
            )
    if held:
        out["held_back"] = held
    return out


def cmd_curate(args: argparse.Namespace) -> None:
    with _node(args) as node:
        _, ladder = memory_layers(args.home, node)
        todo = args.source or ladder.pending()
        with _progress(len(todo), "curate", unit="source") as bar:
            report = ladder.curate(now_us(), todo, progress=bar.update)
    print(json.dumps(report.to_json()))


def _hydration_principal(node: Node, given: str | None) -> str:
    """``--as``, else ``$GAML_AS``, else the node's only user principal."""
    if given:
        return given
    if os.environ.get("GAML_AS"):
        return os.environ["GAML_AS"]
    users = [p.id for p in node.governance.principals() if p.kind is PrincipalKind.USER]
    if len(users) != 1:
        raise PolicyError(
            f"the node has {len(users)} users ({', '.join(users[:5]) or 'none'}): name who hydrates with --as"
        )
    return users[0]


def cmd_hydrate(args: argparse.Namespace) -> None:
    plane: tuple[Segment, ...] = ()
    if args.plane:
        try:
            plane = parse_plane(load_json(Path(args.plane).read_text(encoding="utf-8"), f"--plane {args.plane}"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, InvalidInput) as e:
            raise InvalidInput(f"--plane {args.plane}: {e}") from None
    client = _daemon(args)
    if client is not None:
        from gaml.node.serve.client import plane_to_pb

        with client:
            _as_daemon_caller(client, args.as_)
            out_json = client.hydrate(
                args.goal,
                args.budget,
                purpose=args.purpose.value,
                location=args.location.value,
                plane=plane_to_pb(plane),
                mode=HYDRATION_MODES.index(args.mode) + 1,
                as_of=args.as_of or 0,
                counter=args.counter,
            )
        _print_hydration(out_json, args)
        return
    counter = make_counter(args.counter)
    with _node(args, checkpoint=False) as node:
        _, ladder = memory_layers(args.home, node)
        hydrator = Hydrator(node, counter, on_read=ladder.visit)
        req = HydrationRequest(
            args.goal,
            _hydration_principal(node, args.as_),
            now_us(),
            args.budget,
            plane,
            purpose=args.purpose,
            location=args.location,
            mode=args.mode,
            as_of=args.as_of or 0,
        )
        out = hydrator.hydrate(req)
    _print_hydration(out.to_json(), args)


def _print_hydration(out: dict[str, Any], args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return
    print(out["frame"])
    r = out["receipt"]
    print(
        f"receipt {r['receipt']}: {len(r['facts'])} facts, {r['budget']['spent']}/{r['budget']['total']} tokens "
        f"({r['counter']}), path {r['path']}"
        + (f" (fallback: {r['fallback']})" if r["fallback"] else "")
        + f", {r['beyond']['relevant']} relevant items beyond the frame",
        file=sys.stderr,
    )


def cmd_forget(args: argparse.Namespace) -> None:
    client = _daemon(args)
    if client is not None:
        with client:
            _as_daemon_caller(client, args.as_)
            print(json.dumps(client.forget(args.id)))
        return
    if not args.as_:
        raise PolicyError("name the owner with --as")
    with _node(args) as node:
        _, ladder = memory_layers(args.home, node)
        receipt = ladder.forget(args.id, now_us(), by=args.as_)
    print(json.dumps(receipt.to_json()))


def cmd_sources(args: argparse.Namespace) -> None:
    with _node(args, checkpoint=False) as node:
        ingestor, _ = memory_layers(args.home, node)
        marks = ingestor.watermarks()
    rows = [
        {
            "source": w["source_id"],
            "format": w["format"],
            "title": w.get("title", ""),
            "records": w["records"],
            "items": len(w.get("items", [])),
            "gated": len(w.get("gated", [])),
            "curation_pending": bool(w.get("dirty")),
        }
        for w in marks
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        flag = " (curation pending)" if r["curation_pending"] else ""
        print(f"{r['source']:<40} {r['format']:<10} records={r['records']} items={r['items']} gated={r['gated']}{flag}")


def cmd_maintain(args: argparse.Namespace) -> None:
    with _node(args) as node:
        _, ladder = memory_layers(args.home, node)
        now = now_us()
        expired = ladder.expire(now)
        retired = ladder.retire(now)
        curated = ladder.curate(now).to_json()
        tiers = ladder.retier(now)
    print(json.dumps({"expired": len(expired), "retired": retired, "curation": curated, "tiers": tiers}))


def cmd_run(args: argparse.Namespace) -> None:
    from gaml.node.serve.daemon import Options, run

    opts = Options(
        socket_path=args.socket,
        listen=args.listen,
        local_principal=args.principal,
        grace_s=args.grace,
        p2p=args.p2p or None,
        peers=args.peer,
    )
    run(args.home, _unlock(), opts)


# -- replication: pairing, subnets, peers ------------------------------------------------------------------------------


def _replica(node: Node) -> Any:
    from gaml.node.core.replica import Replica

    return Replica(node)


def _own_addresses(args: argparse.Namespace, node_id: str) -> list[str]:
    """Where this node listens, for an invitation: the configured addresses with a fixed port."""
    from gaml.crdt.p2p import peer_id_of
    from gaml.node.pairing import p2p_config

    fixed = [a for a in p2p_config(args.home)["listen"] if not a.rstrip("/").endswith("/tcp/0")]
    return [f"{a.rstrip('/')}/p2p/{peer_id_of(node_id)}" for a in fixed]


def _invite(args: argparse.Namespace, kind: str, name: str, label: str | None, create: bool) -> None:
    from gaml.node.pairing import write_invitation

    role = "relay" if args.relay else "member"
    with _node(args) as node:
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
    with _node(args) as node:
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


def cmd_pair(args: argparse.Namespace) -> None:
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
        with _node(args, checkpoint=False) as node:
            owner = _local_user(args, node)
    _invite(args, "devices", f"{owner}-devices", owner, create=True)


def cmd_subnet_create(args: argparse.Namespace) -> None:
    with _node(args) as node:
        b = _replica(node).create(args.kind, args.name, args.tenant, now_us())
    print(json.dumps({"created": b.name, "kind": b.kind, "tenant": b.label, "id": b.id.hex()}))


def cmd_subnet_invite(args: argparse.Namespace) -> None:
    _invite(args, "subnet", args.name, None, create=False)


def cmd_subnet_join(args: argparse.Namespace) -> None:
    _join(args, args.file)


def cmd_subnet_remove(args: argparse.Namespace) -> None:
    with _node(args) as node:
        rep = _replica(node)
        roster = rep.remove(rep.find(args.name), args.node_id, now_us())
    print(json.dumps({"boundary": roster.boundary.name, "removed": args.node_id, "epoch": roster.epoch}))


def cmd_peers(args: argparse.Namespace) -> None:
    from gaml.node.serve.daemon import pid_alive, read_info, replication_path
    from gaml.node.serve.replicator import read_status

    info = read_info(args.home)
    if info and pid_alive(int(info.get("pid", 0))):
        try:
            out = read_status(replication_path(args.home), _keychain(args))
        except OSError:
            raise StoreError(
                f"the daemon (pid {info['pid']}) runs without replication, or has not reported yet"
            ) from None
    else:
        with _node(args, checkpoint=False) as node:
            from gaml.node.pairing import p2p_config

            out = {"node_id": node.node_id, "p2p": p2p_config(args.home), "boundaries": _replica(node).describe()}
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


def _keychain(args: argparse.Namespace) -> FileKeychain:
    check_home(args.home)
    read_config(args.home)  # a clear error when --home is not a node
    return FileKeychain.open(args.home / "keychain.json", _unlock(), crypto.SystemEntropy())


def cmd_certs_init(args: argparse.Namespace) -> None:
    hosts = tuple(args.host) or certs.DEFAULT_HOSTS
    info = certs.init_ca(args.home, _keychain(args), int(time.time()), hosts=hosts)
    print(json.dumps({"ca": str(certs.tls_dir(args.home) / "ca.crt"), "serial": info.serial_hex, "hosts": hosts}))


def cmd_certs_issue(args: argparse.Namespace) -> None:
    info = certs.issue_client(args.home, _keychain(args), args.principal, args.out, int(time.time()), days=args.days)
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
    info = certs.renew_server(args.home, _keychain(args), int(time.time()), hosts=hosts)
    print(json.dumps({"server": str(certs.tls_dir(args.home) / "server.crt"), "serial": info.serial_hex}))


def cmd_certs_revoke(args: argparse.Namespace) -> None:
    doc = certs.revoke(
        args.home, int(time.time()), keychain=_keychain(args), serial=args.serial, principal=args.principal
    )
    print(json.dumps(doc))


def cmd_certs_list(args: argparse.Namespace) -> None:
    print(json.dumps(certs.list_issued(args.home, _keychain(args)), indent=2))


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


def _seconds(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (x > 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return x


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
    p = argparse.ArgumentParser(prog="gaml", description="GAML: an agentic memory node.")
    p.add_argument("--home", type=Path, default=None, help="the node's directory (default: $GAML_HOME or ~/.gaml)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("init", help="create a node: identity, keychain and an empty store")
    s.add_argument("--embedder", choices=EMBEDDERS, default="minilm", help="minilm (default, offline) or hash (fast)")
    s.add_argument("--max-payload", type=_positive, default=1 << 20, help="largest payload in bytes (default 1 MiB)")
    s.set_defaults(func=cmd_init)

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
    s.add_argument("--as", dest="as_", required=True, metavar="OWNER")
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
    s.add_argument("--json", action="store_true", help="results with their explanations")
    s.set_defaults(func=cmd_search)

    s = sub.add_parser("redact", help="store a redacted packet of an asset (emails, phones, keys, names removed)")
    s.add_argument("id")
    s.add_argument("--as", dest="as_", required=True, metavar="OWNER")
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

    s = sub.add_parser("ingest", help="ingest transcripts, chat logs, LoCoMo conversations or notes into the journal")
    s.add_argument("paths", nargs="+", metavar="PATH", help="files, or directories to ingest every file under")
    s.add_argument("--format", choices=FORMATS, help="the input format (default: detected per file)")
    s.add_argument("--owner", required=True, help="whose memory this is (a principal id)")
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
    s.set_defaults(func=cmd_ingest)

    s = sub.add_parser("curate", help="compile pending sources into L1-L3 rungs (summaries, distillations, skeletons)")
    s.add_argument("--source", action="append", default=[], help="only this source id (repeatable)")
    s.set_defaults(func=cmd_curate)

    s = sub.add_parser("hydrate", help="a context frame for a goal within a token budget, and its receipt")
    s.add_argument("--goal", required=True, help="what the memory is for (the request's goal)")
    s.add_argument("--budget", type=_positive, required=True, help="total tokens, envelope included")
    s.add_argument("--plane", metavar="FILE", help='JSON: [{"name", "budget", "seeds", "fact_cap", "walk"}, …]')
    s.add_argument("--as", dest="as_", metavar="PRINCIPAL", help="who hydrates (default: $GAML_AS, or the only user)")
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
    s.add_argument("--json", action="store_true", help="print {frame, receipt}")
    s.set_defaults(func=cmd_hydrate)

    s = sub.add_parser("forget", help="erase an item and its influence (derivatives rebuilt without it); owner only")
    s.add_argument("id")
    s.add_argument("--as", dest="as_", metavar="OWNER")
    s.set_defaults(func=cmd_forget)

    s = sub.add_parser("sources", help="ingested sources with their watermarks")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_sources)

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

    s = sub.add_parser("peers", help="this node's id, its boundaries, their members and the live connections")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_peers)

    s = sub.add_parser("stats", help="counts, partitions and index state")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_stats)
    return p


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.home = (args.home or default_home()).expanduser()
    try:
        args.func(args)
    except PartlyCommitted as e:
        _fail(str(e), 4)
    except NotFound as e:
        _fail(str(e), 1)
    except (StoreError, KeychainError) as e:
        _fail(str(e), 3)
    except GamlError as e:
        _fail(str(e), 2)
    except OSError as e:
        _fail(f"{e.strerror or e}: {e.filename or ''}".rstrip(": "), 3)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
