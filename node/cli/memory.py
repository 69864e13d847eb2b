"""The commands on a node's memory — put, get, search, hydrate, ingest, forget, grants, the access log, stats —
each written once against :class:`gaml.node.core.api.Memory`: a running daemon answers them, else the store does."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import getpass
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gaml.node.cli._common import now_us, open_store, progress, regular_file
from gaml.node.cli.errors import PartlyCommitted
from gaml.node.core.api import HydrateOptions, Memory, SearchOptions
from gaml.node.core.hydrate import Segment, parse_plane
from gaml.node.core.node import Node, display_text, whose
from gaml.node.core.service import IngestFile, MemoryService, PeerRead, forced_format_note
from gaml.node.core.text.parsers import detect, unterminated_last_line
from gaml.node.home import (
    consensus_weights,
    local_principal,
    make_counter,
    memory_layers,
    read_config,
)
from gaml.node.local import LocalMemory
from gaml.node.shells.files import bytes_under
from gaml.policy.errors import (
    GamlError,
    InvalidAsset,
    InvalidInput,
    NotFound,
    PolicyError,
    StoreError,
)
from gaml.policy.model import load_json
from gaml.proto.convert import PreparedDraft, asset_to_json

if TYPE_CHECKING:
    from gaml.node.serve.client import RemoteMemory


def _daemon(args: argparse.Namespace) -> Any:
    """A client of the daemon serving ``--home`` (over its Unix socket), or ``None`` when none runs.

    A daemon that left its ``run/daemon.json`` but is gone (killed) does not count; one that runs but does not answer
    is an error that says so, rather than a silent fallback to a database it still holds."""
    from gaml.node.serve.client import Client
    from gaml.node.serve.runfiles import read_info, serves

    info = read_info(args.home)
    if not info or not serves(info):
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


def _as_daemon_caller(memory: RemoteMemory, given: str | None) -> None:
    """Over the socket you are your uid's principal: ``--as`` may only name that principal."""
    if not given:
        return
    me = memory.status().principal
    if given != me:
        raise PolicyError(
            f"a daemon serves this home, and over its socket you are {me}; acting as {given} needs {given}'s own "
            "client certificate (gaml certs issue) over TCP with mutual TLS"
        )


def acting_as(args: argparse.Namespace, given: str | None) -> str | None:
    """Who a command names as its caller: ``--as``, else ``$GAML_AS``; None: the node's own user (the one rule)."""
    return given or os.environ.get("GAML_AS") or None


def own_user(home: Path, node: Node) -> str:
    """The node's own user, as its daemon names callers on its socket: config ``local_principal`` (``gaml init``
    writes it), else the node's only user principal, else your login name."""
    return local_principal(home, node) or getpass.getuser()


@contextlib.contextmanager
def _memory(
    args: argparse.Namespace,
    as_: str | None,
    *,
    holder: bool = False,
    owner: bool = False,
    checkpoint: bool = True,
    env: bool = True,
) -> Iterator[Memory]:
    """The memory of ``--home`` as the caller sees it, one interface whichever door answers: the running daemon's
    (over its socket, where you are the node's own user and ``--as`` may only name you), else the store's.

    One rule names the caller of every command: ``--as`` (or ``$GAML_AS``), else the node's own user (config
    ``local_principal``, which `gaml init` writes), registered as a user principal the first time it acts, as the
    daemon registers it. ``holder``: without ``--as``, act as the holder of the home's keys instead (`gaml put` on the
    store: each asset is authorized as written by its owner). ``owner``: the name is whose memory this is, and an
    owner the node has not registered yet may write its own memory (a new user principal, as `gaml ingest --owner`
    creates); a principal that acts for another user is refused, as its writes would be that user's. ``env``: whether
    ``$GAML_AS`` counts (not for the node's administration, which names no caller)."""
    as_ = acting_as(args, as_) if env else as_
    client = _daemon(args)
    if client is not None:
        from gaml.node.serve.client import RemoteMemory

        with client:
            remote = RemoteMemory(client)
            _as_daemon_caller(remote, as_)
            yield remote
        return
    with open_store(args, checkpoint=checkpoint) as node:
        service = MemoryService(node, None, None, make_counter, layers=lambda: memory_layers(args.home, node))
        caller = None
        if as_ and owner:
            caller = node.writer(as_)[0]
            if caller.user != as_:
                raise PolicyError(f"{caller.id} writes {caller.user}'s memory, not {as_}'s")
        elif as_:
            caller = node.governance.principal(as_)
        elif not holder:
            caller = service.ensure_user(own_user(args.home, node))
        service.consensus = _consensus(node, args.home)
        yield LocalMemory(service, caller, now_us, progress=_stage)


def _consensus(node: Any, home: Path) -> Any:
    """Consensus over what replication brought this node, when it is in a boundary (else None: nothing to weigh).
    A node in no boundary is not even given a replica (which would record its CRDT actor)."""
    from gaml.node.core.consensus import Consensus
    from gaml.node.core.replica import Replica

    if next(iter(node.store.scan_meta("repbound")), None) is None:
        return None
    replica = Replica(node)
    if not replica.boundary_ids():
        return None
    # This node's writes since its daemon last ran are sealed into their boundaries before the first ledger is
    # folded, and an override written here at once, as the daemon does on its ticks: the same claims are weighed
    # with or without a daemon.
    return Consensus(node.store, replica, replica.node_id, consensus_weights(home), pump=replica.pump, catch_up=True)


@contextlib.contextmanager
def _stage(stage: str, total: int) -> Iterator[Any]:
    """Progress on stderr for one stage of long work on the store (a terminal only)."""
    with progress(total, stage, unit={"ingest": "record", "curate": "source"}.get(stage, "asset")) as bar:
        yield bar


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
                raise InvalidAsset(
                    f"{origin}:{n}: not JSON ({e.msg}); `gaml put` stores assets as JSON — to remember plain text, use "
                    '`gaml add "…"`'
                ) from None
            yield f"{origin}:{n}", obj
        return
    if isinstance(doc, list):
        for i, obj in enumerate(doc):
            yield f"{origin}[{i}]", obj
    else:
        yield origin, doc


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
        regular_file(Path(args.file), "gaml put reads a regular file, or stdin (gaml put - < FILE)")
    try:
        text = sys.stdin.read() if args.file in (None, "-") else Path(args.file).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InvalidAsset(f"{origin}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    objs: list[PreparedDraft] = []
    owner: str | None = None  # for the drafts that name none: the config read once, not once a draft
    for where, obj in _read_drafts(text, origin):  # read once, checked here to name a bad one by its place
        if owner is None:
            owner = args.owner or (None if acting_as(args, args.as_) else _config_user(args.home)) or ""
        if owner and isinstance(obj, dict) and obj.get("owner_id") is None and obj.get("ownerId") is None:
            obj = {**obj, "owner_id": owner}
        try:
            objs.append(PreparedDraft(obj))  # its wire message made once, for the check and the put
        except GamlError as e:
            raise type(e)(f"{where}: {e}") from None
    # Without --as on the store, each asset is written by its owner; through a daemon, by you.
    with _memory(args, args.as_, holder=True) as mem:
        if len(objs) > args.batch:  # several calls: all are checked before the first writes
            for i in range(0, len(objs), args.batch):
                chunk = objs[i : i + args.batch]
                try:
                    mem.put(chunk, check_only=True)
                except (PolicyError, InvalidAsset, InvalidInput) as e:  # about an asset: name it in the input
                    raise type(e)(_renumbered(str(e), i, len(chunk))) from None
        with progress(len(objs), "put") as bar:
            _put_batches(mem.put, objs, args.batch, bar)


def _config_user(home: Path) -> str | None:
    """The node's own user as its config names it (the owner of a drafted asset that names none), if it does."""
    try:
        name = read_config(home).get("local_principal")
    except GamlError:
        return None  # not a home: the command's own open says so
    return str(name) if name else None


def cmd_list(args: argparse.Namespace) -> None:
    """Your own memory, oldest first: one line each (id, created, type, level, text), or JSON lines with --json."""
    with _memory(args, args.as_, checkpoint=False) as mem:
        assets = mem.list_own(types=args.type, since=args.since or 0, limit=args.limit)
    if args.json:
        for a in assets:
            print(json.dumps(asset_to_json(a), ensure_ascii=False))
        return
    if not assets:
        print("(no memory of yours" + (" that matches" if args.type or args.since else "") + ")")
    for a in assets:
        when = dt.datetime.fromtimestamp(a.created_at / 1e6, dt.UTC).isoformat(timespec="seconds")
        text = " ".join(display_text(a).split())
        text = text if len(text) <= 80 else text[:79] + "…"
        print(f"{a.id}  {when}  {a.asset_type.value:<11} {a.level.value}  {text}")


def cmd_export(args: argparse.Namespace) -> None:
    """Your own memory as JSON lines (decrypted: protect the output), oldest first."""
    with _memory(args, args.as_, checkpoint=False) as mem:
        assets = mem.list_own(types=args.type, since=args.since or 0, limit=args.limit)
    for a in assets:
        print(json.dumps(asset_to_json(a), ensure_ascii=False))


def cmd_add(args: argparse.Namespace) -> None:
    """Remember a note or a chat turn: the text (or stdin with '-') as one turn of ``--role``, in ``--session``."""
    text = sys.stdin.read() if args.text == "-" else args.text
    turns = [{"role": args.role, "content": text}]
    if args.reply is not None:
        turns.append({"role": "assistant", "content": args.reply})
    with _memory(args, args.as_) as mem:
        report = mem.remember(turns, session=args.session or "", curate=args.curate)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for id_ in report["ids"]:
        print(id_)
    if not report["ids"]:
        why = ", ".join(f"{k} ({int(v)})" for k, v in sorted(report.get("gated", {}).items())) or "nothing to keep"
        print(f"gaml: warning: nothing was kept: {why}", file=sys.stderr)


def _renumbered(message: str, offset: int, size: int) -> str:
    """A batch's error with its "asset #N" counted in the whole input (the batch of ``size`` began at ``offset``; the
    error of a batch of one names no asset)."""
    if size == 1 and not re.match(r"asset #\d+", message):
        message = f"asset #1: {message}"
    return re.sub(r"asset #(\d+)", lambda m: f"asset #{int(m.group(1)) + offset}", message, count=1)


def cmd_get(args: argparse.Namespace) -> None:
    with _memory(args, args.as_, checkpoint=False) as mem:
        asset = mem.get(args.id, purpose=args.purpose, location=args.location, include_deleted=args.include_deleted)
    print(json.dumps(asset_to_json(asset), indent=2, ensure_ascii=False))


def _peer_read(args: argparse.Namespace) -> PeerRead | None:
    if not args.peers:
        return None
    return PeerRead(args.peer_deadline_ms, args.peer_fan_out, args.peer_k, tuple(args.peer_boundary))


def cmd_search(args: argparse.Namespace) -> None:
    options: SearchOptions = {
        "k": args.k,
        "purpose": args.purpose,
        "location": args.location,
        "mode": args.mode,
        "as_of": args.as_of or 0,
        "types": args.type,
        "segments": args.segment,
        "tags": args.tag,
        "entities": args.entity,
    }
    if (read := _peer_read(args)) is not None:
        options["peers"] = read
    with _memory(args, args.as_) as mem:
        hits = mem.search(args.text, **options)
        who = "" if args.json else mem.user()
    _print_hits([h.row() for h in hits], args, who)


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


def cmd_grant(args: argparse.Namespace) -> None:
    with _memory(args, args.as_, checkpoint=False) as mem:
        g = mem.grant(
            args.to,
            args.max_level,
            segments=args.segment,
            tags=args.tag,
            time_from=args.time_from or 0,
            time_to=args.time_to or 0,
            expires_at=args.expires or 0,
        )
    print(json.dumps(g.to_json()))


def cmd_revoke(args: argparse.Namespace) -> None:
    with _memory(args, args.as_, checkpoint=False) as mem:
        g = mem.revoke(args.grant)
    print(json.dumps(g.to_json()))


def cmd_grants(args: argparse.Namespace) -> None:
    """Your grants through a daemon (made and held); on the store, the holder of its keys sees every grant."""
    with _memory(args, None, holder=True, checkpoint=False) as mem:
        made, received = mem.grants()
    seen = {g.id: g for g in [*made, *received]}
    rows = [
        g.to_json()
        for g in seen.values()
        if (args.owner is None or g.owner == args.owner) and (args.to is None or g.grantee == args.to)
    ]
    print(json.dumps(rows, indent=2))


def cmd_access_log(args: argparse.Namespace) -> None:
    with _memory(args, args.as_, checkpoint=False) as mem:
        log = mem.access_log(args.limit or 100)
    if args.json:
        print(json.dumps(log, indent=2))
        return
    for r in log:
        items = ", ".join(f"{i['id'][:12]}…@{i['level']}" for i in r["read"][:6])
        if len(r["read"]) > 6:
            items += f" and {len(r['read']) - 6} more"
        when = dt.datetime.fromtimestamp(r["at"] / 1e6, dt.UTC).isoformat(timespec="seconds")
        print(f"{when}  {r['who']:<10} {r['kind']:<6} {r['purpose']:<8} {r['location']:<14} {items}")


def cmd_conflicts(args: argparse.Namespace) -> None:
    """Where members of a boundary disagree: each contested slot, its candidates and the winner; with ``--choose``,
    the caller's choice of a slot's value (an audited override)."""
    if args.choose is not None and not args.slot:
        raise InvalidInput("--choose needs --slot (the slot whose value you choose)")
    if args.reason and args.choose is None:
        raise InvalidInput("--reason goes with --choose")
    with _memory(args, args.as_, checkpoint=args.choose is not None) as mem:
        if args.choose is not None:
            print(json.dumps(mem.override(args.slot, args.choose, reason=args.reason or ""), indent=2))
            return
        records = mem.conflicts(args.slot or "", purpose=args.purpose, location=args.location)
    if args.json:
        print(json.dumps(records, indent=2))
        return
    if not records:
        print("no contested slot" + (f" {args.slot!r}" if args.slot else "") + " among the memory you may read")
        return
    for r in records:
        chosen = f", chosen by {r['override']['by']}" if r.get("override") else ""
        print(f"slot {r['slot']}  ({len(r['candidates'])} candidates, ledger {r['ledger']}{chosen})")
        for c in sorted(r["candidates"], key=lambda c: (not c["won"], -c["score"], c["id"])):
            mark = "won " if c["won"] else "lost"
            says = c["says"] or c["value"]
            sources = ", ".join(n[:12] + "…" for n in c["sources"])
            print(f"  {mark} {c['id'][:12]}…  score {c['score'] / 1e6:.3f}  weight {c['weight'] / 1e6:.3f}  ", end="")
            print(f"says {says!r}  from {sources}")


def cmd_reputation(args: argparse.Namespace) -> None:
    """Each boundary's reputation ledger as this node folds it: who weighs what, who is admitted."""
    with _memory(args, args.as_, checkpoint=False) as mem:
        ledgers = mem.reputation()
    if args.json:
        print(json.dumps(ledgers, indent=2))
        return
    if not ledgers:
        print("no boundary of which you may read some memory (reputation is kept per boundary)")
        return
    for led in ledgers:
        print(
            f"{led['kind']} {led['name']}  ledger {led['ledger']}  {led['slots']} contested slots, "
            f"admission at {led['admit'] / 1e6:.2f}"
        )
        for m in led["members"]:
            since = dt.datetime.fromtimestamp(m["since"] / 1e6, dt.UTC).date().isoformat() if m["since"] else "-"
            tags = ["founder"] if m["founder"] else []
            tags += ["admitted"] if m["admitted"] else ["not admitted"]
            if "fell_after" in m:
                tags.append(f"fell after {m['fell_after']} contradicted claims")
            print(f"  {m['node'][:16]}…  weight {m['weight'] / 1e6:.3f}  since {since}  {', '.join(tags)}")


def cmd_stats(args: argparse.Namespace) -> None:
    """The node's status, the same fields whether its daemon answers or the store does, and the home's size."""
    with _memory(args, args.as_) as mem:
        out = mem.status().to_json()
    out["bytes_on_disk"] = bytes_under(args.home)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for k, v in out.items():
        if k != "partitions":
            print(f"{k:>16}: {'' if v is None else v}")
    for name, part in out["partitions"].items():
        print(
            f"{'partition':>16}: {name}  indexed={part['indexed']} pending={part['pending']} "
            f"embedder={part['embedder']}"
        )


def _ingest_paths(paths: Sequence[str], warned: set[Path] | None = None) -> list[Path]:
    """The files to ingest: each file given, and the files under each directory given (sorted, hidden ones skipped).

    A file given by name must be readable (its error stops the command); a file found under a directory that cannot
    be read (permissions, gone) is skipped with a warning on stderr, once (``warned`` remembers it across passes)."""
    out: list[Path] = []
    seen = warned if warned is not None else set()
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
            for f in found:
                try:
                    with f.open("rb"):
                        pass
                except OSError as e:
                    if f not in seen:
                        seen.add(f)
                        print(f"gaml: warning: {f}: skipped ({e.strerror or e})", file=sys.stderr, flush=True)
                    continue
                out.append(f)
        else:
            regular_file(p, "gaml ingest reads regular files (it keeps a watermark per file)")
            out.append(p)
    return out


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


def _pieces(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while piece := f.read(1 << 20):
            yield piece


def _ingest_file(path: Path, args: argparse.Namespace) -> IngestFile:
    """One file of an ingest call: named as given, its sources' ids derived from where it lies (its absolute path),
    read when it is used (a piece at a time through a daemon)."""
    return IngestFile(
        str(path),
        lambda: _pieces(path),
        origin=str(path.resolve()),
        format=args.format or "",
        tenant=args.tenant or "",
        segment=args.segment or "",
        scope=args.scope,
        replication=args.replicate,
        item_budget=args.item_budget,
    )


def cmd_ingest(args: argparse.Namespace) -> None:
    """One pass over the paths; with --watch, another pass over the files that changed after each interval.

    Each pass prints one JSON line. Files are looked at (size, modification time) *before* they are read, so a write
    that lands while a pass reads them is seen as a change by the next check (and re-reading what was already
    ingested is skipped by the watermarks)."""
    warned: set[Path] = set()
    files = _ingest_paths(args.paths, warned)
    named = {Path(p) for p in args.paths if not Path(p).is_dir()}
    with _memory(args, args.owner, owner=True) as mem:

        def ingest(todo: Sequence[Path]) -> dict[str, Any]:
            try:
                return mem.ingest([_ingest_file(f, args) for f in todo], curate=not args.no_curate)
            except InvalidInput as e:
                if not args.format:
                    raise
                fmt = args.format
                said = f" (read as {fmt} because of --format {fmt}; without --format the format is detected)"
                raise InvalidInput(str(e).replace(forced_format_note(args.format), said)) from None

        def one_pass(todo: Sequence[Path]) -> dict[str, Any]:
            """The pass over ``todo``; a file found under a directory that cannot be parsed is left out with a
            warning and the pass goes on without it (one bad file does not stop a folder). Nothing is written
            before every file left in has been parsed."""
            todo = list(todo)
            skipped: list[str] = []
            while True:
                try:
                    out = ingest(todo)
                except InvalidInput as e:
                    bad = next((f for f in todo if f not in named and str(e).startswith(f"{f}: ")), None)
                    if bad is None or len(todo) == 1:
                        raise
                    todo.remove(bad)
                    skipped.append(str(bad))
                    print(f"gaml: warning: skipped {e}", file=sys.stderr, flush=True)
                    continue
                if skipped:
                    out["skipped_files"] = skipped
                return out

        _ingest_passes(one_pass, files, args, warned)


CLIPPED_SHOWN_MAX = 20


def _print_pass(report: dict[str, Any], as_json: bool = True) -> None:
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
    if not as_json and _human(report):
        return
    print(json.dumps(report), flush=True)


def _human(report: dict[str, Any]) -> bool:
    """Print a pass's report as a sentence when a person reads it (a terminal, without --json); False otherwise."""
    gated = sum(int(v) for v in (report.get("gated") or {}).values())
    cur = report.get("curation") or {}
    line = (
        f"ingested {int(report.get('files', 0))} file(s), {int(report.get('sources', 0))} source(s): "
        f"{int(report.get('records', 0)) - int(report.get('skipped', 0))} new record(s) -> "
        f"{int(report.get('items', 0))} item(s), {int(report.get('facts', 0))} fact(s)"
    )
    if report.get("skipped"):
        line += f"; {int(report['skipped'])} record(s) already ingested"
    if gated:
        line += f"; {gated} gated ({', '.join(f'{k} {int(v)}' for k, v in sorted(report['gated'].items()))})"
    if report.get("redactions"):
        line += f"; {int(report['redactions'])} secret(s) redacted"
    if cur:
        line += f"; curated {int(cur.get('sources', 0))} source(s) into {int(cur.get('rungs', 0))} rung(s)"
    if report.get("skipped_files"):
        line += f"; skipped {len(report['skipped_files'])} unreadable file(s)"
    print(line, flush=True)
    return True


def _ingest_passes(
    one_pass: Callable[[Sequence[Path]], dict[str, Any]],
    files: Sequence[Path],
    args: argparse.Namespace,
    warned: set[Path] | None = None,
) -> None:
    """A pass over every file; with --watch, a pass over the files that changed after each interval (each pass one
    JSON line), whether the passes run on the store or through the daemon."""
    seen = _snapshot(files)
    as_json = args.json or not sys.stdout.isatty()  # a terminal gets a sentence per pass
    _print_pass(_reporting_held_back(one_pass, files, args.format), as_json)
    if not args.watch:
        return
    print(f"gaml: watching {len(files)} file(s); Ctrl-C (or SIGTERM) stops", file=sys.stderr, flush=True)
    # SIGTERM (a service manager stopping it) and SIGINT end the watch between passes: a pass in progress finishes,
    # then the store is closed with a checkpoint, so the next open has no journal to replay.
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not stop.wait(args.interval):
            now_seen = _snapshot(_ingest_paths(args.paths, warned if warned is not None else set()))
            changed = [f for f, mark in now_seen.items() if seen.get(f) != mark]
            seen = now_seen
            if changed:
                try:
                    _print_pass(_reporting_held_back(one_pass, changed, args.format), as_json)
                except (InvalidInput, OSError) as e:  # a JSON file caught mid-write, a file gone: try again
                    print(f"gaml: skipped this pass: {e}", file=sys.stderr, flush=True)
                    seen = {f: m for f, m in seen.items() if f not in changed}
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
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


def cmd_hydrate(args: argparse.Namespace) -> None:
    plane: tuple[Segment, ...] = ()
    if args.plane:
        try:
            plane = parse_plane(load_json(Path(args.plane).read_text(encoding="utf-8"), f"--plane {args.plane}"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, InvalidInput) as e:
            raise InvalidInput(f"--plane {args.plane}: {e}") from None
    options: HydrateOptions = {
        "plane": plane,
        "purpose": args.purpose,
        "location": args.location,
        "mode": args.mode,
        "as_of": args.as_of or 0,
        "counter": args.counter,
    }
    if args.profile is not None:
        options["profile"] = args.profile
    if (read := _peer_read(args)) is not None:
        options["peers"] = read
    with _memory(args, args.as_, checkpoint=False) as mem:
        out = mem.hydrate(args.goal, args.budget, **options)
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
    if "peers" in r:
        p = r["peers"]
        print(
            f"peers: {len(p['asked'])} asked, {len(p['answered'])} answered, {len(p['timed_out'])} timed out"
            + (f" ({p['why']})" if p.get("why") else ""),
            file=sys.stderr,
        )


def cmd_forget(args: argparse.Namespace) -> None:
    with _memory(args, args.as_) as mem:
        receipt = mem.forget(args.id)
    print(json.dumps(receipt.to_json()))
