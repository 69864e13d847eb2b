"""``gaml doctor``: check a home and say what to do about what is wrong.

Each check prints one line, ``ok``, ``warn`` or ``FAIL``, what it found and, when something is wrong, the command or
setting that mends it. Checks, in order: the home (exists, owned by you, private, no symlinks), its configuration, the
keychain (unlocked by what the environment gives), the daemon (its gRPC health service over the socket) or the
database's lock (when no daemon runs), the indexes (vectors waiting, snapshots rebuilt), replication (peers per
boundary, from the running daemon), free disk space. Exit status 0 unless a check failed (1).

``gaml doctor --daemon`` asks the daemon's health service only (exit 0 when it serves): a container's HEALTHCHECK.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from gaml.policy.errors import GamlError

if TYPE_CHECKING:
    from gaml.node.shells.file_keychain import FileKeychain

FREE_BYTES_MIN: Final = 1 << 30
PENDING_WARN: Final = 10_000


@dataclasses.dataclass
class Check:
    name: str
    status: str  # ok, warn, fail
    found: str
    fix: str = ""


def _daemon_check(home: Path) -> tuple[Check, Any]:
    """The daemon's health (and a client of it when it serves)."""
    from gaml.node.serve.client import Client
    from gaml.node.serve.runfiles import read_info, serves

    info = read_info(home)
    if not info:
        return Check("daemon", "ok", "not running (commands open the store themselves)"), None
    if not serves(info):
        return (
            Check(
                "daemon",
                "warn",
                f"not running; it left run/daemon.json behind (pid {info.get('pid')}: killed, or the machine stopped)",
                "nothing to do: the next `gaml run` replaces it; `gaml run` to serve again",
            ),
            None,
        )
    client = Client.unix(info["socket"], timeout_s=10)
    try:
        status = client.health()
    except GamlError as e:
        client.close()
        return (
            Check("daemon", "fail", f"pid {info['pid']} does not answer on {info['socket']} ({e})", "restart it"),
            None,
        )
    if status != "SERVING":
        client.close()
        return Check("daemon", "fail", f"pid {info['pid']} answers {status}", "wait for it to start, or restart"), None
    return Check("daemon", "ok", f"serving: pid {info['pid']}, version {info.get('version')}"), client


def run_checks(home: Path) -> list[Check]:
    from gaml.node.home import check_home, is_home, read_config
    from gaml.node.shells.file_keychain import FileKeychain, Unlock
    from gaml.policy import crypto

    out: list[Check] = []
    if not is_home(home):
        return [Check("home", "fail", f"{home} is not a GAML home", f"gaml --home {home} init (or gaml restore)")]
    try:
        check_home(home)
        out.append(Check("home", "ok", f"{home}: yours, private (0700), no symlinks"))
    except GamlError as e:
        out.append(Check("home", "fail", str(e)))
    try:
        cfg = read_config(home)
        out.append(Check("config", "ok", f"valid; embedder {cfg['embedder']}"))
    except GamlError as e:
        out.append(Check("config", "fail", str(e), "gaml config check; docs/configuration.md"))
        return out
    unlock = None
    kc: FileKeychain | None = None
    try:
        unlock = Unlock.from_env()
        if unlock is None:
            out.append(
                Check(
                    "keychain",
                    "warn",
                    "locked: nothing in the environment opens it (the checks below that need it are skipped)",
                    "set GAML_PASSPHRASE, GAML_KEYCHAIN_KEY or GAML_KEYCHAIN_KEY_FILE",
                )
            )
        else:
            kc = FileKeychain.open(home / "keychain.json", unlock, crypto.SystemEntropy())
            out.append(Check("keychain", "ok", "opens with the key the environment gives"))
    except GamlError as e:
        out.append(Check("keychain", "fail", str(e), "the passphrase or key this home was made with"))
        unlock = None
    daemon, client = _daemon_check(home)
    out.append(daemon)
    status: dict[str, Any] | None = None
    if client is not None:
        with client:
            try:
                status = client.status()
            except GamlError as e:
                out.append(Check("index", "warn", f"the daemon's status failed: {e}"))
    elif unlock is not None:
        from gaml.node.home import open_node

        try:
            node = open_node(home, unlock)
        except GamlError as e:
            out.append(Check("lock", "fail", str(e), "stop the process that holds the database, or wait for it"))
        else:
            try:
                s = node.store.stats()
                status = {"pending": s.pending, "rebuilt_indexes": s.rebuilt_indexes, "assets": s.assets}
            finally:
                node.close(checkpoint=False)
            out.append(Check("lock", "ok", "the database opens (no other process holds it)"))
    if status is not None:
        pending, rebuilt = int(status.get("pending", 0)), int(status.get("rebuilt_indexes", 0))
        if pending > PENDING_WARN:
            out.append(
                Check(
                    "index",
                    "warn",
                    f"{pending} vectors wait for their index (searches read them exactly meanwhile)",
                    "a running daemon indexes them in the background; or `gaml maintain`",
                )
            )
        else:
            out.append(Check("index", "ok", f"{status.get('assets')} assets; {pending} vectors waiting"))
        if rebuilt:
            out.append(
                Check("index", "warn", f"{rebuilt} index snapshots were rebuilt at open (a crash, or a damaged file)")
            )
    if client is not None and kc is not None:
        out += _replication_checks(home, kc)
    free = shutil.disk_usage(home).free
    if free < FREE_BYTES_MIN:
        out.append(Check("disk", "warn", f"{free >> 20} MiB free where the home is", "free some space"))
    else:
        out.append(Check("disk", "ok", f"{free >> 30} GiB free"))
    return out


def _replication_checks(home: Path, kc: FileKeychain) -> list[Check]:
    """Peers per boundary, from the running daemon's replication status (sealed with a key of ``kc``)."""
    from gaml.node.serve.replicator import read_status
    from gaml.node.serve.runfiles import replication_path

    try:
        st = read_status(replication_path(home), kc)
    except FileNotFoundError:
        return [Check("peers", "ok", "this daemon does not replicate (in no boundary)")]
    except GamlError as e:
        return [Check("peers", "warn", f"the replication status is unreadable: {e}")]
    out = []
    connected = set(st.get("connected", []))
    for b in st.get("boundaries", []):
        others = {m["node"] for m in b["members"]} - {st.get("node_id")}
        live = len(others & connected)
        if b.get("role") == "removed":
            out.append(Check("peers", "warn", f"{b['name']}: this node was removed from it", "ask its admin"))
        elif others and not live:
            out.append(
                Check(
                    "peers",
                    "warn",
                    f"{b['name']}: none of its {len(others)} other nodes is connected",
                    "check they run; give an address (config p2p.peers, `gaml run --peer`) or turn on --mdns",
                )
            )
        else:
            out.append(Check("peers", "ok", f"{b['name']}: {live} of {len(others)} other nodes connected"))
    return out


def cmd_doctor(args: argparse.Namespace) -> None:
    if args.daemon:
        check, client = _daemon_check(args.home)
        if client is not None:
            client.close()
        ok = client is not None
        print(json.dumps(dataclasses.asdict(check)) if args.json else f"{'ok' if ok else 'FAIL'}  {check.found}")
        raise SystemExit(0 if ok else 1)
    checks = run_checks(args.home)
    if args.json:
        print(json.dumps([dataclasses.asdict(c) for c in checks], indent=1))
    else:
        for c in checks:
            mark = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}[c.status]
            print(f"{mark}  {c.name:<9} {c.found}" + (f"\n      {'':<9} → {c.fix}" if c.fix else ""))
    raise SystemExit(1 if any(c.status == "fail" for c in checks) else 0)


__all__ = ["Check", "cmd_doctor", "run_checks"]
