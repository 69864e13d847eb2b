"""deploy/: the systemd units pass `systemd-analyze verify` (where systemd is installed), the image's recipe keeps its
promises (two stages, a non-root user, the model inside, the health check a real command), the subnet script is
valid shell; and `gaml doctor`, the health check's command, on a sound home, a damaged one and a running daemon.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.node.cli_util import run_cli
from tests.node.daemon_util import make_home, remove_home, thread_daemon

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
GAML = Path(sys.executable).parent / "gaml"


def verify(unit: Path, tmp: Path, *, user: bool) -> subprocess.CompletedProcess[str]:
    """`systemd-analyze verify` of ``unit``, its ExecStart pointed at this environment's gaml (the unit's own path
    is where an install puts it, which this machine may not have)."""
    text = unit.read_text().replace("%h/.local/bin/gaml", str(GAML)).replace("/opt/gaml/bin/gaml", str(GAML))
    copy = tmp / unit.name
    copy.write_text(text)
    env = {**os.environ}
    cmd = ["systemd-analyze"]
    if user:
        runtime = tmp / "xdg"
        runtime.mkdir(mode=0o700, exist_ok=True)
        env["XDG_RUNTIME_DIR"] = str(runtime)
        cmd.append("--user")
    return subprocess.run([*cmd, "verify", str(copy)], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
@pytest.mark.parametrize(("name", "user"), [("gaml.service", True), ("gaml-server.service", False)])
def test_the_systemd_units_verify_cleanly_and_a_typo_would_not(name: str, user: bool, tmp_path: Path) -> None:
    unit = DEPLOY / "systemd" / name
    r = verify(unit, tmp_path, user=user)
    assert r.returncode == 0 and r.stdout.strip() == "" and r.stderr.strip() == "", (r.stdout, r.stderr)
    text = unit.read_text()
    for setting in ("NoNewPrivileges=yes", "PrivateTmp=yes", "ProtectSystem=strict", "Restart=on-failure"):
        assert setting in text, setting
    assert "LoadCredential=gaml-keychain-key:" in text and "GAML_KEYCHAIN_KEY=" not in text
    # The check is a real one: a misspelt setting is reported.
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / name).write_text(text.replace("ProtectSystem=strict", "ProtectSystm=strict"))
    r = verify(bad / name, bad, user=user)
    assert "ProtectSystm" in r.stderr, r.stderr


def test_the_dockerfile_is_multi_stage_non_root_with_the_model_inside_and_a_real_health_check() -> None:
    text = (DEPLOY / "docker" / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.M)
    assert len(stages) == 2 and stages[0][1] == "build", stages
    final = text.split("\nFROM ")[-1]
    assert re.search(r"^USER gaml$", final, re.M) and "--uid 10001" in final
    assert "download.pytorch.org/whl/cpu" in text and "'.[minilm]'" in text
    assert "python -m gaml.node.shells.minilm" in final  # the ONNX export, made at build time
    (health,) = re.findall(r"^HEALTHCHECK .* CMD (\[.*\])$", final, re.M)
    assert health == '["gaml", "doctor", "--daemon"]'
    assert "COPY deploy/docker/subnet-node.sh" in final


def test_the_subnet_script_is_valid_posix_shell() -> None:
    for sh in ("sh", "dash", "bash"):
        if shutil.which(sh):
            r = subprocess.run([sh, "-n", str(DEPLOY / "docker" / "subnet-node.sh")], capture_output=True, text=True)
            assert r.returncode == 0, (sh, r.stderr)


# -- gaml doctor -------------------------------------------------------------------------------------------------------


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    h = make_home(tls=False)
    monkeypatch.setenv("GAML_KEYCHAIN_KEY", "5a" * 32)
    monkeypatch.delenv("GAML_PASSPHRASE", raising=False)
    monkeypatch.delenv("GAML_KEYCHAIN_KEY_FILE", raising=False)
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    try:
        yield h.path
    finally:
        remove_home(h)


def test_doctor_passes_a_sound_home_and_says_what_to_do_about_a_damaged_one(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run_cli(capsys, "--home", str(home), "doctor")
    assert code == 0, out
    assert [line.split()[1] for line in out.splitlines() if line[:4] in ("ok  ", "warn", "FAIL")] == [
        "home", "config", "keychain", "daemon", "lock", "index", "disk",
    ]  # fmt: skip
    code, out, _ = run_cli(capsys, "--home", str(home), "doctor", "--daemon")
    assert code == 1 and out.startswith("FAIL  not running")

    home.chmod(0o755)
    code, out, _ = run_cli(capsys, "--home", str(home), "doctor")
    assert code == 1 and f"chmod 700 {home}" in out, out
    home.chmod(0o700)

    monkeypatch.setenv("GAML_KEYCHAIN_KEY", "11" * 32)
    code, out, _ = run_cli(capsys, "--home", str(home), "doctor")
    assert code == 1 and re.search(r"FAIL  keychain .*\n.*the passphrase or key this home was made with", out), out

    monkeypatch.delenv("GAML_KEYCHAIN_KEY")
    code, out, _ = run_cli(capsys, "--home", str(home), "doctor")
    assert code == 0 and "warn  keychain  locked" in out and "GAML_KEYCHAIN_KEY_FILE" in out, out

    # The key from a file (a container's secret), as from a systemd credential.
    key = home.parent / "key"
    key.write_text("5a" * 32 + "\n")
    monkeypatch.setenv("GAML_KEYCHAIN_KEY_FILE", str(key))
    code, out, _ = run_cli(capsys, "--home", str(home), "doctor")
    assert code == 0 and "ok    keychain" in out, out
    monkeypatch.delenv("GAML_KEYCHAIN_KEY_FILE")
    creds = home.parent / "creds"
    creds.mkdir()
    (creds / "gaml-keychain-key").write_text("5a" * 32)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    code, out, _ = run_cli(capsys, "--home", str(home), "doctor")
    assert code == 0 and "ok    keychain" in out, out

    (home / "config.toml").write_text('format = "gaml-home-2"\nembeder = "hash"\nmax_payload_bytes = 1024\n')
    code, out, _ = run_cli(capsys, "--home", str(home), "doctor")
    assert code == 1 and "FAIL  config" in out and "did you mean 'embedder'?" in out, out
    assert "gaml config check" in out


def test_doctor_asks_a_running_daemon_and_its_health_check_passes(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.node.daemon_util import Home

    h = Home(home, home.parent / "certs")
    with thread_daemon(h, listen=False):
        code, out, _ = run_cli(capsys, "--home", str(home), "doctor", "--daemon")
        assert code == 0 and out.startswith("ok  serving: pid"), out
        code, out, _ = run_cli(capsys, "--home", str(home), "doctor")
        assert code == 0 and "ok    daemon    serving" in out and "lock" not in out, out
