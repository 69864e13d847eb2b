"""``gaml``: the command line for people. ``gaml --home DIR COMMAND …``; ``gaml COMMAND --help`` for details.

Secrets come from the environment, never from arguments: ``GAML_PASSPHRASE`` (a passphrase stretched by Argon2id), or
``GAML_KEYCHAIN_KEY`` (64 hex characters, for unattended nodes). Without either, an interactive terminal is asked.
Exit codes: 0 success, 1 not found, 2 bad input or refused, 3 store or keychain failure.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from node.core import Node, display_text, hit_json
from node.file_keychain import Unlock
from node.home import EMBEDDERS, default_home, init_home, open_node
from policy.errors import GamlError, InvalidAsset, KeychainError, NotFound, StoreError
from policy.partitions import Principal
from proto.convert import asset_to_json, draft_from_json


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
        doc = json.loads(stripped)
    except json.JSONDecodeError:
        doc = None
        for n, line in enumerate(stripped.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise InvalidAsset(f"{origin}:{n}: not JSON ({e.msg})") from None
            yield f"{origin}:{n}", obj
        return
    if isinstance(doc, list):
        for i, obj in enumerate(doc):
            yield f"{origin}[{i}]", obj
    else:
        yield origin, doc


def _progress(total: int, desc: str) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="asset", file=sys.stderr, disable=total < 2 or not sys.stderr.isatty())


def cmd_init(args: argparse.Namespace) -> None:
    node_id = init_home(args.home, _unlock(confirm=True), embedder=args.embedder, max_payload_bytes=args.max_payload)
    print(json.dumps({"home": str(args.home), "node_id": node_id, "embedder": args.embedder}))


def _open(args: argparse.Namespace) -> Node:
    return open_node(args.home, _unlock())


def cmd_put(args: argparse.Namespace) -> None:
    origin = "stdin" if args.file in (None, "-") else args.file
    try:
        text = sys.stdin.read() if args.file in (None, "-") else Path(args.file).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InvalidAsset(f"{origin}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    drafts = []
    for where, obj in _read_drafts(text, origin):
        try:
            fields = draft_from_json(obj)
            if args.owner and "owner_id" not in fields:
                fields["owner_id"] = args.owner
            drafts.append(fields)
        except GamlError as e:
            raise type(e)(f"{where}: {e}") from None
    node = _open(args)
    try:
        now = now_us()
        built = []
        for i, d in enumerate(drafts):
            try:
                built.append(node.build(d, now))
            except GamlError as e:
                raise type(e)(f"asset #{i + 1}: {e}") from None
        with _progress(len(built), "put") as bar:
            ids = node.put_stream(built, now, batch=args.batch, progress=bar.update)
    finally:
        node.close()
    for id_ in ids:
        print(id_)


def cmd_get(args: argparse.Namespace) -> None:
    node = _open(args)
    try:
        asset = node.store.get(args.id, include_deleted=args.include_deleted)
    finally:
        node.close(checkpoint=False)
    print(json.dumps(asset_to_json(asset), indent=2, ensure_ascii=False))


def cmd_delete(args: argparse.Namespace) -> None:
    node = _open(args)
    try:
        tomb = node.delete(args.id, now_us())
    finally:
        node.close()
    print(json.dumps({"id": tomb.id, "tombstone": True, "version": tomb.version}))


def cmd_search(args: argparse.Namespace) -> None:
    principal = Principal.parse(args.as_)
    node = _open(args)
    try:
        hits = node.search(args.text, principal, k=args.k)
    finally:
        node.close()
    if args.json:
        print(json.dumps([hit_json(h) for h in hits], indent=2, ensure_ascii=False))
        return
    if not hits:
        print(f"(nothing that {principal.id} may read matches)")
    for h in hits:
        text = display_text(h.asset)
        text = text if len(text) <= 100 else text[:99] + "…"
        print(f"{h.score:6.3f}  {h.asset.id}  {h.asset.asset_type.value:<12} {h.partition:<32} {text}")


def cmd_stats(args: argparse.Namespace) -> None:
    node = _open(args)
    try:
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
    finally:
        node.close()
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for k, v in out.items():
        if k != "partitions":
            print(f"{k:>16}: {v}")
    for name, p in sorted(s.partitions.items()):
        print(f"{'partition':>16}: {name}  indexed={p['indexed']} pending={p['pending']} embedder={p['embedder']}")


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{n} is not positive")
    return n


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
    s.add_argument("--batch", type=_positive, default=256, help="assets per atomic batch (default 256)")
    s.set_defaults(func=cmd_put)

    s = sub.add_parser("get", help="print an asset as JSON (decrypted)")
    s.add_argument("id")
    s.add_argument("--include-deleted", action="store_true", help="print the tombstone of a deleted asset")
    s.set_defaults(func=cmd_get)

    s = sub.add_parser("delete", help="delete an asset (a signed tombstone remains)")
    s.add_argument("id")
    s.set_defaults(func=cmd_delete)

    s = sub.add_parser("search", help="nearest assets to a text, within what the principal may read")
    s.add_argument("text")
    s.add_argument("--as", dest="as_", required=True, metavar="PRINCIPAL", help="who asks: alice or alice@tenant1,t2")
    s.add_argument("--k", type=_positive, default=10, help="how many results (default 10)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_search)

    s = sub.add_parser("stats", help="counts, partitions and index state")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_stats)
    return p


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.home = (args.home or default_home()).expanduser()
    try:
        args.func(args)
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


if __name__ == "__main__":
    main()
