"""Backup and restore (`gaml backup`, `gaml restore`): a real daemon in a child process under a write load, the CLI as
a user types it, real RocksDB; the restored home opened and searched like the original.

Waits poll with deadlines (tests.node.p2p_util.Fleet.wait); nothing sleeps to synchronise or asserts a duration.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from gaml.node.backup import MANIFEST
from gaml.node.cli.main import main
from tests.node.daemon_util import KEY_HEX
from tests.node.p2p_util import Fleet, Peer, files_containing, get_or_none, live_records
from tests.node.test_replication import words

QUERIES = ("standup notes", "deploy window", "the build server", "quarterly plan")


def gaml(home: Path, *args: str, key: str = KEY_HEX) -> subprocess.CompletedProcess[str]:
    """``gaml --home HOME ARGS`` as typed, run in this process (the CLI's own main; a process start costs seconds)."""
    out, err = io.StringIO(), io.StringIO()
    rc = 0
    with mock.patch.dict(os.environ, {"GAML_KEYCHAIN_KEY": key}), redirect_stdout(out), redirect_stderr(err):
        os.environ.pop("GAML_PASSPHRASE", None)
        try:
            main(["--home", str(home), *args])
        except SystemExit as e:
            rc = int(e.code or 0)
    return subprocess.CompletedProcess(args, rc, out.getvalue(), err.getvalue())


def note(i: int, word: str) -> dict[str, Any]:
    topic = QUERIES[i % len(QUERIES)]
    return {
        "asset_type": "fact",
        "payload": {"text": f"alice's {topic} #{i}: {word}"},
        "owner_id": "alice",
        "privacy_scope": "user_private",
    }


def answers(home: Path) -> list[list[str]]:
    """The ids each query finds (the CLI's search on a home no daemon serves)."""
    out = []
    for q in QUERIES:
        r = gaml(home, "search", q, "--k", "10", "--json")
        assert r.returncode == 0, r.stderr
        out.append([h["id"] for h in json.loads(r.stdout)])
    return out


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    with Fleet() as f:
        yield f


def test_a_backup_under_a_write_load_restores_every_acknowledged_write_and_holds_no_plaintext(fleet: Fleet) -> None:
    vocab = words(21, 400)
    a = fleet.peer("a")
    d = fleet.start(a, principal="alice")
    fleet.up(d)
    acked: dict[str, dict[str, Any]] = {}  # id -> the draft, once the daemon acknowledged it
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with d.client() as c:
                for i, w in enumerate(vocab):
                    if stop.is_set():
                        return
                    draft = note(i, w)
                    (id_,) = c.put([draft])
                    acked[id_] = draft
        except BaseException as e:  # reported by the test
            errors.append(e)

    t = threading.Thread(target=writer)
    t.start()
    try:
        fleet.wait("the load to write 50 notes", lambda: len(acked), lambda n: n >= 50 or not t.is_alive())
        before = dict(acked)  # acknowledged before the backup began
        during = fleet.base / "during"
        r = gaml(a.home, "backup", str(during))
        assert r.returncode == 0, r.stderr
        made = json.loads(r.stdout)
        fleet.wait("more notes after the backup", lambda: len(acked), lambda n: n >= len(before) + 20)
    finally:
        stop.set()
        t.join(120)
    assert not errors, errors
    assert made["node_id"] == a.node_id and made["assets"] >= len(before)

    # Restored into a fresh home: every write acknowledged before the backup, as written; what came during it,
    # whole or absent; nothing the load wrote after the backup's end.
    restored = fleet.base / "restored"
    r = gaml(restored, "restore", str(during))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["assets"] == made["assets"]
    held = restored_notes(restored)
    assert set(before) <= set(held)
    for id_, payload in held.items():
        assert payload == acked[id_]["payload"], id_
    assert len(held) == made["assets"]

    # No private word in the clear, anywhere in the backup (a raw scan of every file).
    needles = {f"word {i}": w.encode() for i, w in enumerate(vocab[: len(acked)])}
    assert files_containing(during, needles) == []
    assert (during / MANIFEST).exists() and not (during / "run").exists()

    # A backup of the quiet home (daemon stopped after the load), restored: the same answers to the same queries.
    d.stop()
    quiet = fleet.base / "quiet"
    assert gaml(a.home, "backup", str(quiet)).returncode == 0
    again = fleet.base / "again"
    assert gaml(again, "restore", str(quiet)).returncode == 0
    original = answers(a.home)
    assert all(original) and answers(again) == original
    assert restored_notes(again).keys() == acked.keys()


def restored_notes(home: Path) -> dict[str, dict[str, Any]]:
    r = gaml(home, "export")
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        a = json.loads(line)
        if a["asset_type"] == "fact":
            out[a["id"]] = a["payload"]
    return out


def test_restore_refuses_a_wrong_key_a_used_home_and_what_is_not_a_backup(fleet: Fleet) -> None:
    a = fleet.peer("a")
    assert gaml(a.home, "add", "alice's locker code is 4711").returncode == 0
    bk = fleet.base / "bk"
    assert gaml(a.home, "backup", str(bk)).returncode == 0
    r = gaml(a.home, "backup", str(bk))  # not over an existing backup
    assert r.returncode == 2 and "exists and is not empty" in r.stderr, r.stderr
    r = gaml(a.home, "backup", str(a.home / "backups"))  # not inside the home it copies
    assert r.returncode == 2 and "inside the home" in r.stderr and not (a.home / "backups").exists(), r.stderr
    r = gaml(a.home, "backup", str(fleet.base / "no" / "such" / "bk"))
    assert r.returncode == 2 and "make it first" in r.stderr, r.stderr
    target = fleet.base / "new"
    r = gaml(target, "restore", str(bk), key="11" * 32)
    assert r.returncode != 0 and not target.exists(), r.stderr
    assert not [p for p in fleet.base.iterdir() if p.name.startswith(".new.restore-")]
    r = gaml(a.home, "restore", str(bk))  # not over a home
    assert r.returncode == 2 and "exists and is not empty" in r.stderr, r.stderr
    r = gaml(target, "restore", str(a.home))
    assert r.returncode == 2 and "not a GAML backup" in r.stderr, r.stderr
    r = gaml(target, "restore", str(bk))
    assert r.returncode == 0, r.stderr
    s = gaml(target, "search", "locker code")
    assert "4711" in s.stdout, s


@pytest.mark.slow  # tens of seconds: `make test-slow` (make test keeps under 15 minutes)
def test_a_device_restored_from_an_older_backup_catches_up_from_its_peer_without_duplicates(fleet: Fleet) -> None:
    """B is backed up, then A writes more, which reaches B; B's disk is lost and B restored from the older backup:
    it comes back with a new lineage, A offers it its whole log again, and B ends with exactly what A has."""
    a, b = fleet.peer("a"), fleet.peer("b")
    invitation = fleet.base / "pair.json"
    a.gaml_json("pair", b.node_id, "--owner", "alice", "--out", str(invitation))
    b.gaml_json("pair", "--join", str(invitation))
    da = fleet.start(a, principal="alice")
    fleet.up(da)
    db = fleet.start(b, principal="alice", dial=[da.address])
    fleet.up(db)

    def shared(i: int, w: str) -> dict[str, Any]:
        return {**note(i, w), "replication_policy": "trusted_devices"}

    vocab = words(22, 12)
    with da.client() as ca, db.client() as cb:
        early = [ca.put([shared(i, w)])[0] for i, w in enumerate(vocab[:6])]
        fleet.wait("B to hold A's first notes", lambda: [get_or_none(cb, i) for i in early], lambda got: all(got))
        bk = fleet.base / "b-backup"
        r = gaml(b.home, "backup", str(bk))
        assert r.returncode == 0, r.stderr
        late = [ca.put([shared(i, w)])[0] for i, w in enumerate(vocab[6:], start=6)]
        fleet.wait("B to hold A's later notes", lambda: [get_or_none(cb, i) for i in late], lambda got: all(got))
    db.stop()

    restored = Peer("b", fleet.base / "b-restored", b.node_id)
    r = gaml(restored.home, "restore", str(bk))
    assert r.returncode == 0, r.stderr
    with restored.opened() as node:
        assert not [i for i in late if i in set(node.store.live_ids())]  # the backup is older than the late notes
    db = fleet.start(restored, principal="alice", dial=[da.address])
    fleet.up(db)
    with db.client() as cb:
        fleet.wait(
            "the restored B to catch up on the notes written after its backup",
            lambda: [get_or_none(cb, i) for i in late],
            lambda got: all(got),
        )
    for d in (db, da):
        d.stop()
    with a.opened() as na, restored.opened() as nb:
        on_a, on_b = live_records(na.store), live_records(nb.store)
    assert on_b == on_a and set(early + late) <= set(on_b)
