"""`gaml config show | check | set` and the environment's overrides (GAML_CONFIG__…), run in-process as typed."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from gaml.node.home import read_config
from tests.node.cli_util import cli_home, run_cli


@pytest.fixture
def home(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in [v for v in __import__("os").environ if v.startswith("GAML_CONFIG__")]:
        monkeypatch.delenv(var)
    return cli_home(capsys, monkeypatch, tmp_path / "h")


def test_set_changes_one_setting_and_a_typo_or_a_wrong_value_writes_nothing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (home / "config.toml").read_bytes()
    code, _, err = run_cli(capsys, "--home", str(home), "config", "set", "p2p.mdsn", "true")
    assert code == 2 and "unknown setting 'p2p.mdsn' (did you mean 'p2p.mdns'?" in err, err
    code, _, err = run_cli(capsys, "--home", str(home), "config", "set", "max_payload_bytes", "-5")
    assert code == 2 and "'max_payload_bytes'" in err and "positive" in err, err
    code, _, err = run_cli(capsys, "--home", str(home), "config", "set", "format", "2")
    assert code == 2 and "not set by hand" in err
    assert (home / "config.toml").read_bytes() == before

    code, out, _ = run_cli(capsys, "--home", str(home), "config", "set", "p2p.mdns", "true")
    assert code == 0 and json.loads(out) == {"set": "p2p.mdns", "value": True}
    code, out, _ = run_cli(capsys, "--home", str(home), "config", "set", "p2p.listen", '["/ip4/0.0.0.0/tcp/4001"]')
    assert code == 0
    code, out, _ = run_cli(capsys, "--home", str(home), "config", "set", "limits.principals.bob.burst", "7")
    assert code == 0
    cfg = read_config(home)
    assert cfg["p2p"] == {"mdns": True, "listen": ["/ip4/0.0.0.0/tcp/4001"]}
    assert cfg["limits"]["principals"]["bob"]["burst"] == 7
    code, out, _ = run_cli(capsys, "--home", str(home), "config", "set", "p2p.mdns", "--unset")
    assert code == 0 and "mdns" not in read_config(home)["p2p"]
    code, out, _ = run_cli(capsys, "--home", str(home), "config", "check")
    assert code == 0 and json.loads(out)["ok"] is True


def test_the_environment_overrides_a_setting_and_a_misspelt_override_is_refused_by_its_variable(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GAML_CONFIG__P2P__GOSSIP", "false")
    monkeypatch.setenv("GAML_CONFIG__LOCAL_PRINCIPAL", "carol")
    code, out, _ = run_cli(capsys, "--home", str(home), "config", "show")
    shown = json.loads(out)
    assert code == 0 and shown["p2p"]["gossip"] is False and shown["local_principal"] == "carol"
    code, out, _ = run_cli(capsys, "--home", str(home), "config", "show", "--file")
    assert "gossip" not in json.loads(out).get("p2p", {})
    code, out, _ = run_cli(capsys, "--home", str(home), "config", "check")
    assert code == 0 and json.loads(out)["overrides"] == ["GAML_CONFIG__LOCAL_PRINCIPAL", "GAML_CONFIG__P2P__GOSSIP"]
    # A setting written while an override is in force keeps the file's own values (the override is not persisted).
    assert run_cli(capsys, "--home", str(home), "config", "set", "p2p.mdns", "true")[0] == 0
    assert "gossip" not in tomllib.loads((home / "config.toml").read_text())["p2p"]

    monkeypatch.setenv("GAML_CONFIG__P2P__GOSIP", "false")
    code, _, err = run_cli(capsys, "--home", str(home), "config", "check")
    assert code == 2 and "GAML_CONFIG__P2P__GOSIP" in err and "did you mean 'p2p.gossip'?" in err, err
    code, _, err = run_cli(capsys, "--home", str(home), "search", "anything")
    assert code == 2 and "did you mean 'p2p.gossip'?" in err  # every command refuses it, not just check
