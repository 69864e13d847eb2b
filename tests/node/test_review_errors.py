"""Issue 14, finding 7 (errors that were tracebacks or lies): each case gets a typed message and a documented exit
code, and bad input changes nothing. Each test failed on b424be6. Real RocksDB and gRPC, the CLI in-process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from gaml.node.core.errors import Unauthenticated
from gaml.node.serve.client import Client
from gaml.node.shells.rocks_kv import RocksKV
from gaml.policy import crypto
from gaml.policy.errors import StoreError
from tests.node.cli_util import edit_config, run_cli
from tests.node.daemon_util import KEY_HEX, ROOT, Home, make_home, remove_home, store_digest, thread_daemon

FACT = {"asset_type": "fact", "payload": {"text": "Alice prefers green tea"}, "owner_id": "alice"}


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Home]:
    monkeypatch.setenv("GAML_KEYCHAIN_KEY", KEY_HEX)
    monkeypatch.delenv("GAML_PASSPHRASE", raising=False)
    h = make_home(("alice",))
    try:
        yield h
    finally:
        remove_home(h)


def test_a_port_in_use_is_a_clear_error_with_exit_code_2(home: Home) -> None:
    """`gaml run --listen` on a port another process holds exits 2 with a message naming the address, no
    traceback."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**os.environ, "GAML_KEYCHAIN_KEY": KEY_HEX, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run(
            [sys.executable, "-m", "gaml.node.cli", "--home", str(home.path), "run", "--listen", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=300,
        )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda c: c.pop("embedder"), "embedder"),
        (lambda c: c.update(max_payload_bytes=-1), "max_payload_bytes"),
        (lambda c: c.update(max_payload_bytes="1 MiB"), "max_payload_bytes"),
        (lambda c: c.update(max_payload_bytes=True), "max_payload_bytes"),
        (lambda c: c.pop("max_payload_bytes"), "max_payload_bytes"),
        (lambda c: c.update(limits={"burst": -1}), "limits"),
        (lambda c: c.update(limits={"max_request_bytes": "big"}), "limits"),
        (lambda c: c.update(p2p={"peers": "not a list"}), "p2p.peers"),
        (lambda c: c.update(consensus={"admit": 2_000_000}), "consensus"),
        (lambda c: c.update(consensus={"admission": 1}), "consensus.admission"),
        (lambda c: c.update(consensus=[1]), "consensus"),
    ],
)
def test_a_bad_config_is_refused_at_open_naming_the_key(
    home: Home, capsys: pytest.CaptureFixture[str], change: object, key: str
) -> None:
    """A config.toml with a missing, negative or wrongly typed setting is refused when the home is opened (exit 2,
    naming the key), for a read and a write alike, and the store is unchanged."""
    edit_config(home.path, change)  # type: ignore[arg-type]
    before = store_digest(home.path)
    (home.path.parent / "a.json").write_text(json.dumps(FACT))
    for argv in (("stats",), ("put", str(home.path.parent / "a.json"))):
        code, _, err = run_cli(capsys, "--home", str(home.path), *argv)
        assert code == 2 and repr(key) in err and "Traceback" not in err, err
    assert store_digest(home.path) == before


@pytest.mark.parametrize(
    ("field", "value"), [("ops", 2**31), ("mem", 1 << 40), ("mem", 1), ("ops", 0), ("ops", "2"), ("mem", None)]
)
def test_a_tampered_kdf_setting_is_refused_before_any_derivation(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    field: str,
    value: object,
) -> None:
    """A keychain header whose Argon2id ops or mem is out of bounds (or not a number) is a KeychainError (exit 3)
    naming the setting, and libsodium is never asked to derive with it."""
    monkeypatch.setenv("GAML_PASSPHRASE", "a passphrase")
    monkeypatch.delenv("GAML_KEYCHAIN_KEY", raising=False)
    h = tmp_path / "h"
    assert run_cli(capsys, "--home", str(h), "init", "--embedder", "hash")[0] == 0
    doc = json.loads((h / "keychain.json").read_text())
    doc["kdf"][field] = value
    (h / "keychain.json").write_text(json.dumps(doc))
    derived: list[object] = []

    def no_derivation(*args: object, **kw: object) -> bytes:
        derived.append(kw)
        raise AssertionError("Argon2id ran on a tampered setting")

    monkeypatch.setattr("nacl.pwhash.argon2id.kdf", no_derivation)
    code, _, err = run_cli(capsys, "--home", str(h), "stats")
    assert code == 3 and f"Argon2id setting {field!r}" in err and derived == [], err


def test_an_overflowing_timestamp_names_the_file_the_line_and_the_field(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ingested transcript line whose timestamp overflows is refused (exit 2) naming the file, the line and the
    field; nothing is written."""
    before = store_digest(home.path)
    for n, stamp in enumerate(("1e30", '"9999-12-31T23:59:59"')):
        f = home.path.parent / f"ts{n}.jsonl"
        f.write_text(
            f'{{"role": "user", "content": "ok"}}\n{{"role": "user", "content": "hi", "timestamp": {stamp}}}\n'
        )
        code, _, err = run_cli(capsys, "--home", str(home.path), "ingest", str(f), "--owner", "alice")
        assert code == 2 and f"ts{n}.jsonl: line 2: 'timestamp'" in err, err
    assert store_digest(home.path) == before


def test_a_truncated_last_jsonl_line_is_reported_not_dropped_silently(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    """A transcript whose last line is cut off: the complete lines are ingested, and the cut line is named (its file
    and line) on stderr and in the report's held_back; `gaml put` refuses a cut JSON Lines input naming the line."""
    f = home.path.parent / "cut.jsonl"
    f.write_text('{"role": "user", "content": "hello there"}\n{"role": "user", "content": "hel')
    code, out, err = run_cli(capsys, "--home", str(home.path), "ingest", str(f), "--owner", "alice")
    assert code == 0 and f"{f}:2: the last line is unterminated" in err, err
    report = json.loads(out)
    assert report["held_back"] == [{"file": str(f), "line": 2}] and report["records"] == 1
    p = home.path.parent / "cut-put.jsonl"
    p.write_text(json.dumps(FACT) + "\n" + json.dumps(FACT)[:20])
    code, out, err = run_cli(capsys, "--home", str(home.path), "put", str(p))
    assert code == 2 and "cut-put.jsonl:2: not JSON" in err and out == ""


def test_a_fifo_is_refused_as_not_a_regular_file(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    """`gaml ingest` and `gaml put` on a FIFO say it is a FIFO (exit 2), not that it does not exist, and never block
    on it; the store is unchanged."""
    before = store_digest(home.path)
    fifo = home.path.parent / "pipe"
    os.mkfifo(fifo)

    def feed() -> None:  # a writer, so that a put that did open the FIFO would read an asset rather than block
        try:
            with open(fifo, "w") as w:
                w.write(json.dumps(FACT))
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    code, _, err = run_cli(capsys, "--home", str(home.path), "ingest", str(fifo), "--owner", "alice")
    assert code == 2 and "is a FIFO" in err and "no such file" not in err, err
    code, out, err = run_cli(capsys, "--home", str(home.path), "put", str(fifo))
    assert code == 2 and "is a FIFO" in err and out == "", err
    os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # let the writer's open return
    writer.join(30)
    assert store_digest(home.path) == before


def test_a_failed_mtls_handshake_is_reported_as_such(home: Home) -> None:
    """A client that does not trust the node's certificate (another CA's ca.crt) is told the TLS handshake failed
    (TlsRefused, an Unauthenticated), not that the node does not answer."""
    now = int(time.time())
    _, other_ca = crypto.make_ca("elsewhere", now)
    key, cert, _ = home.principals["alice"]
    with thread_daemon(home) as daemon, Client.mtls(f"127.0.0.1:{daemon.tcp_port}", key, cert, other_ca) as c:
        with pytest.raises(Unauthenticated, match="TLS handshake") as e:
            c.status()
    assert "does not answer" not in str(e.value)


class FullDiskKV(RocksKV):
    """RocksDB on a disk that fills up: once ``asset_batches`` batches of assets were committed, a commit that
    writes an asset fails as RocksDB reports ENOSPC, writing nothing."""

    asset_batches = 1

    def commit(self, ops: object, *, sync: bool = True) -> None:
        if any(getattr(op, "space", None) == "assets" for op in ops):  # type: ignore[attr-defined]
            if FullDiskKV.asset_batches <= 0:
                raise StoreError(f"the database at {self.path} could not be used: IO error: No space left on device")
            FullDiskKV.asset_batches -= 1
        super().commit(ops, sync=sync)  # type: ignore[arg-type]


def test_a_put_whose_later_batch_fills_the_disk_tells_what_was_committed(
    home: Home, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A put whose second batch hits a full disk prints the ids of the first (committed) batch and exits 4 saying
    how many were committed; a put whose batch committed but whose index snapshot hit a full disk exits 0 with a
    warning. In both cases what was printed is what the store holds. (A KV that fails at commit stands for a full
    disk: a tmpfs cannot be mounted safely here.)"""
    drafts = home.path.parent / "two.jsonl"
    drafts.write_text("\n".join(json.dumps({**FACT, "payload": {"text": f"fact {i}"}}) for i in range(2)))
    monkeypatch.setattr("gaml.node.home.RocksKV", FullDiskKV)
    monkeypatch.setattr(FullDiskKV, "asset_batches", 1)
    code, out, err = run_cli(capsys, "--home", str(home.path), "put", str(drafts), "--batch", "1")
    assert code == 4 and "#1-#1 of 2 were committed" in err, err
    (committed,) = out.split()
    monkeypatch.setattr(FullDiskKV, "asset_batches", 10)
    code, out, err = run_cli(capsys, "--home", str(home.path), "get", committed, "--as", "alice")
    assert code == 0 and json.loads(out)["payload"] == {"text": "fact 0"}

    def full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("gaml.node.shells.files.FileBlobs.write", full)
    one = home.path.parent / "one.json"
    one.write_text(json.dumps({**FACT, "payload": {"text": "fact 9"}}))
    code, out, err = run_cli(capsys, "--home", str(home.path), "put", str(one))
    assert code == 0 and "done and committed" in err and len(out.split()) == 1, err
    monkeypatch.undo()
    os.environ["GAML_KEYCHAIN_KEY"] = KEY_HEX
    code, got, _ = run_cli(capsys, "--home", str(home.path), "get", out.split()[0], "--as", "alice")
    assert code == 0 and json.loads(got)["payload"] == {"text": "fact 9"}


def test_duplicate_json_keys_are_refused_naming_the_key(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    """A key given twice in put's input (object and JSON Lines), a hydration plane or an invitation is refused naming
    the key (exit 2), and nothing is written; in config.toml, TOML itself refuses it (naming the line)."""
    before = store_digest(home.path)
    twice = json.dumps(FACT)[:-1] + ', "owner_id": "bob"}'
    for name, text in (("one.json", twice), ("lines.jsonl", json.dumps(FACT) + "\n" + twice)):
        f = home.path.parent / name
        f.write_text(text)
        code, out, err = run_cli(capsys, "--home", str(home.path), "put", str(f))
        assert code == 2 and "'owner_id' is given twice" in err and out == "", err
    plane = home.path.parent / "plane.json"
    plane.write_text('[{"name": "a", "budget": 100, "budget": 9000}]')
    code, _, err = run_cli(capsys, "--home", str(home.path), "hydrate", "--goal", "g", "--budget", "500", "--plane",
                        str(plane), "--as", "alice")  # fmt: skip
    assert code == 2 and "'budget' is given twice" in err, err
    invitation = home.path.parent / "invite.json"
    invitation.write_text('{"format": "gaml-invitation-1", "roster": "00", "roster": "01", "peers": []}')
    code, _, err = run_cli(capsys, "--home", str(home.path), "pair", "--join", str(invitation))
    assert code == 2 and "'roster' is given twice" in err, err
    assert store_digest(home.path) == before
    cfg = home.path / "config.toml"
    cfg.write_text(cfg.read_text() + 'embedder = "minilm"\n')
    code, _, err = run_cli(capsys, "--home", str(home.path), "stats")
    assert code == 2 and "config.toml is not valid TOML: Cannot overwrite a value" in err, err


@pytest.mark.parametrize("whose", ["another CA's", "none"])
def test_a_client_certificate_the_node_refuses_is_reported_as_such(home: Home, whose: str) -> None:
    """A client presenting a certificate of another CA (or none) is told that the node refused its certificate
    during the TLS handshake (TlsRefused), not that the node does not answer."""
    now = int(time.time())
    _, _, ca = home.principals["alice"]
    if whose == "none":
        key, cert = b"", b""
    else:
        other_key, other_ca = crypto.make_ca("elsewhere", now)
        key, cert, _ = crypto.issue_cert(other_key, other_ca, "alice", now)
    with thread_daemon(home) as daemon:
        address = f"127.0.0.1:{daemon.tcp_port}"
        creds = grpc.ssl_channel_credentials(ca, key or None, cert or None)
        with Client(grpc.secure_channel(address, creds), tcp=address) as c:
            with pytest.raises(Unauthenticated, match="refused this client's certificate") as e:
                c.status()
    assert "does not answer" not in str(e.value)
