"""Issue 14, finding 6 (files): what the adversarial review found in a node's files, each case tried as an attacker or
an unlucky user would. Each test failed on b424be6. Real RocksDB, real daemons (threads and child processes)."""

from __future__ import annotations

import json
import os
import signal
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gaml.node.serve.daemon import Daemon, Options
from gaml.node.shells import certs
from gaml.node.shells.file_keychain import FileKeychain
from gaml.node.shells.rocks_kv import RocksKV
from gaml.policy import crypto
from gaml.policy.errors import InvalidInput, UnsafeFile
from tests.node.cli_util import run_cli
from tests.node.daemon_util import (
    KEY_HEX,
    UNLOCK,
    Home,
    make_home,
    process_daemon,
    remove_home,
    store_digest,
    thread_daemon,
)


@pytest.fixture
def home() -> Iterator[Home]:
    h = make_home(("alice", "principal-zebulon"))
    try:
        yield h
    finally:
        remove_home(h)


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GAML_KEYCHAIN_KEY", KEY_HEX)
    monkeypatch.delenv("GAML_PASSPHRASE", raising=False)


def test_socket_option_refuses_an_existing_regular_file(home: Home) -> None:
    """`gaml run --socket FILE` on an existing regular file is refused, and the file is neither replaced nor
    deleted."""
    victim = home.path.parent / "notes.txt"
    victim.write_bytes(b"keep me")
    with pytest.raises(InvalidInput, match="not a stale socket"):
        with thread_daemon(home, listen=False, socket_path=victim):
            pass
    assert victim.read_bytes() == b"keep me" and stat.S_ISREG(os.lstat(victim).st_mode)


def test_a_symlinked_keychain_temp_file_is_not_written_through(
    home: Home, capsys: pytest.CaptureFixture[str], key_env: None
) -> None:
    """A symlink planted at HOME/.keychain.json.tmp does not make a keychain write go through it: the target keeps
    its bytes and its 0644 mode, and the keychain still opens."""
    os.rename(home.path / "tls", home.path.parent / "old-tls")  # certs init again, on a home without a CA
    target = home.path.parent / "target.txt"
    target.write_bytes(b"not a keychain")
    os.chmod(target, 0o644)
    (home.path / ".keychain.json.tmp").symlink_to(target)
    code, _, err = run_cli(capsys, "--home", str(home.path), "certs", "init")
    assert code == 0, err
    assert target.read_bytes() == b"not a keychain" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert certs.CA_KEY_REF in FileKeychain.open(home.path / "keychain.json", UNLOCK, crypto.SystemEntropy()).refs()


def test_a_symlinked_run_directory_is_refused(home: Home) -> None:
    """A symlinked HOME/run is refused with the fix to apply, and nothing is written where it points."""
    elsewhere = home.path.parent / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (home.path / "run").symlink_to(elsewhere)
    with pytest.raises(UnsafeFile, match=r"run/ .* is a symlink.*rm "):
        Daemon(home.path, UNLOCK, Options(listen=None))
    assert list(elsewhere.iterdir()) == []


def test_a_home_or_run_open_to_others_is_refused_with_the_fix(
    home: Home, capsys: pytest.CaptureFixture[str], key_env: None
) -> None:
    """A home or run/ with group or other access, or run/ owned by another uid, is refused (exit 2) naming the
    command that fixes it, and the store is unchanged."""
    before = store_digest(home.path)
    os.chmod(home.path, 0o755)
    code, _, err = run_cli(capsys, "--home", str(home.path), "stats")
    assert code == 2 and f"chmod 700 {home.path}" in err and "Traceback" not in err
    os.chmod(home.path, 0o700)
    run = home.path / "run"
    run.mkdir(mode=0o777)
    os.chmod(run, 0o777)
    code, _, err = run_cli(capsys, "--home", str(home.path), "stats")
    assert code == 2 and f"chmod 700 {run}" in err
    if os.getuid() == 0:
        os.chmod(run, 0o700)
        os.chown(run, 65534, 65534)
        with pytest.raises(UnsafeFile, match="belongs to uid 65534"):
            Daemon(home.path, UNLOCK, Options(listen=None))
    assert store_digest(home.path) == before


def test_no_principal_name_is_in_the_clear_under_the_home(
    home: Home, capsys: pytest.CaptureFixture[str], key_env: None
) -> None:
    """With certificates issued and a principal revoked, and a daemon running, no file under the home holds a
    principal's name (issued.json, revoked.json and run/daemon.json included); `certs list` still names them."""
    code, out, err = run_cli(capsys, "--home", str(home.path), "certs", "revoke", "--principal", "principal-zebulon")
    assert code == 0 and json.loads(out)["principals"] == ["principal-zebulon"], err
    with thread_daemon(home, listen=True):
        info = json.loads((home.path / "run" / "daemon.json").read_text())
        assert info["socket"] and info["pid"] == os.getpid()
        for path in home.path.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                for name in (b"alice", b"principal-zebulon"):
                    assert name not in data, (path, name)
    kc = FileKeychain.open(home.path / "keychain.json", UNLOCK, crypto.SystemEntropy())
    assert [r["principal"] for r in certs.list_issued(home.path, kc)] == ["alice", "principal-zebulon"]
    revocations = certs.Revocations(home.path, kc)
    assert revocations.is_revoked("1234", "principal-zebulon") and not revocations.is_revoked("1234", "alice")


def test_lists_an_older_gaml_wrote_in_the_clear_are_sealed_when_the_home_is_opened(
    home: Home, capsys: pytest.CaptureFixture[str], key_env: None
) -> None:
    """A home whose tls/issued.json and tls/revoked.json name principals in the clear (as b424be6 wrote them) is
    sealed at its next open: afterwards no file names them, and `certs list` and revocation still do."""
    tls = home.path / "tls"
    kc = FileKeychain.open(home.path / "keychain.json", UNLOCK, crypto.SystemEntropy())
    issued = certs.list_issued(home.path, kc)
    (tls / "issued.json").write_text(json.dumps(issued))  # the old format: a list in the clear
    (tls / "revoked.json").write_text(json.dumps({"serials": [], "principals": ["principal-zebulon"], "updated_s": 1}))
    assert run_cli(capsys, "--home", str(home.path), "stats")[0] == 0  # any command that opens the node
    for name in ("issued.json", "revoked.json"):
        data = (tls / name).read_bytes()
        assert b"alice" not in data and b"principal-zebulon" not in data, name
    assert [r["principal"] for r in certs.list_issued(home.path, kc)] == [r["principal"] for r in issued]
    assert certs.Revocations(home.path, kc).is_revoked("1234", "principal-zebulon")


def test_the_replication_status_file_names_no_boundary_or_tenant(
    home: Home, capsys: pytest.CaptureFixture[str], key_env: None
) -> None:
    """A daemon in a subnet writes run/replication.json sealed: no file under the home holds the subnet's name or its
    tenant's, and `gaml peers --json` still names both."""
    code, _, err = run_cli(
        capsys, "--home", str(home.path), "subnet", "create", "subnet-quagga", "--tenant", "tenant-yak"
    )
    assert code == 0, err
    status = home.path / "run" / "replication.json"
    with thread_daemon(home, listen=False):
        deadline = time.monotonic() + 60
        while not status.exists():  # the replicator writes it once its host listens
            assert time.monotonic() < deadline, "no replication status was written"
            time.sleep(0.05)
        for path in home.path.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                for name in (b"subnet-quagga", b"tenant-yak"):
                    assert name not in data, (path, name)
        code, out, err = run_cli(capsys, "--home", str(home.path), "peers", "--json")
    assert code == 0, err
    (boundary,) = json.loads(out)["boundaries"]
    assert boundary["name"] == "subnet-quagga" and "tenant-yak" in json.dumps(boundary)


def test_rocksdb_info_logs_stay_bounded_over_many_opens(tmp_path: Path) -> None:
    """Opening the store 40 times (40 CLI calls) keeps at most two RocksDB info logs, not one per open."""
    for _ in range(40):
        RocksKV(tmp_path / "db").close()
    logs = [p for p in (tmp_path / "db").iterdir() if p.name.startswith("LOG")]
    assert 1 <= len(logs) <= 2, sorted(p.name for p in logs)


def _private_dirs(root: Path) -> set[Path]:
    return {p for p in root.iterdir() if p.name.startswith("gaml-") and p.is_dir()}


def test_a_killed_daemons_private_directory_is_removed_at_the_next_start(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The private directory of a SIGKILLed daemon is removed when the next daemon starts; a look-alike directory
    that holds anything else, and one of a live process, are left alone."""
    tmp = home.path.parent / "tmp"  # this test's own TMPDIR, for the child daemon and the one in this process
    tmp.mkdir(mode=0o700)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    decoy = Path(tempfile.mkdtemp(prefix="gaml-999999999-"))
    (decoy / "mine.txt").write_bytes(b"not a daemon's")
    live = Path(tempfile.mkdtemp(prefix=f"gaml-{os.getpid()}-"))
    try:
        before = _private_dirs(tmp)
        with process_daemon(home) as proc:
            left = _private_dirs(tmp) - before
            assert len(left) == 1, left
            os.kill(proc.pid(), signal.SIGKILL)
            proc.process.wait(60)
        (stale,) = left
        assert stale.exists()  # what SIGKILL leaves
        with thread_daemon(home, listen=False):
            assert not stale.exists()
        assert (decoy / "mine.txt").exists() and live.exists()
    finally:
        for d in (decoy, live):
            for p in d.iterdir():
                p.unlink()
            d.rmdir()
