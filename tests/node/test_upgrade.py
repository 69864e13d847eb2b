"""Upgrades of the on-disk format: a home made by an earlier release (tests/fixtures/home-format-1, format 1: its
settings in config.json) opens with this one, which upgrades it on first open (its settings to config.toml, the old
file kept) and answers as it did; a home of a newer format than this GAML reads is refused with what to do."""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

import pytest

from gaml.node.home import CONFIG_FORMAT, HOME_FORMAT
from tests.node.cli_util import run_cli

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "home-format-1"
KEY = "5a" * 32  # the fixture's unattended key (tests/fixtures/README.md)
NOTES = (
    "Alice prefers green tea in the morning",
    "The staging database moved to port 6543 in March",
    "Bob owns the release checklist",
)


def private_copy(dest: Path) -> Path:
    """The fixture copied as a restore would: the home's own modes (git keeps none)."""
    shutil.copytree(FIXTURE, dest)
    for root, _, files in os.walk(dest):
        os.chmod(root, 0o700)
        for f in files:
            os.chmod(os.path.join(root, f), 0o600)
    return dest


@pytest.fixture
def old_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GAML_KEYCHAIN_KEY", KEY)
    monkeypatch.delenv("GAML_PASSPHRASE", raising=False)
    for var in [v for v in os.environ if v.startswith("GAML_CONFIG__")]:
        monkeypatch.delenv(var)
    return private_copy(tmp_path / "home")


def test_a_home_of_the_previous_format_is_upgraded_on_first_open_and_answers_as_before(
    old_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert HOME_FORMAT == 2 and json.loads((old_home / "config.json").read_text())["format"] == "gaml-home-1"
    legacy = (old_home / "config.json").read_bytes()
    code, out, err = run_cli(capsys, "--home", str(old_home), "list", "--json")
    assert code == 0, err
    assert "upgraded the home" in err and "from format 1 to 2" in err
    assert "word index" in err and "made again" in err and "gaml-lexical-2" in err, err  # (below)
    listed = [json.loads(line) for line in out.splitlines()]
    assert sorted(a["payload"]["text"] for a in listed if a["asset_type"] == "event") == sorted(NOTES)
    # The settings moved, the same; the old file is kept as it was (the upgrade's backup).
    assert not (old_home / "config.json").exists()
    assert (old_home / "config.json.format-1").read_bytes() == legacy
    cfg = tomllib.loads((old_home / "config.toml").read_text())
    old = json.loads(legacy)
    assert cfg == {**old, "format": CONFIG_FORMAT}
    assert (old_home / "config.toml").stat().st_mode & 0o777 == 0o600
    # Searches answer as they did, and a second open upgrades nothing.
    code, out, err = run_cli(capsys, "--home", str(old_home), "search", "green tea", "--json")
    assert code == 0 and err == "", err
    assert json.loads(out)[0]["text"] == NOTES[0]
    code, out, _ = run_cli(capsys, "--home", str(old_home), "config", "show")
    assert json.loads(out)["p2p"] == {"mdns": True}
    # Its lexical postings were made with the earlier analyzer (plural stemming only) and were made again with this
    # one: another form of a word finds the note by its words alone.
    code, out, err = run_cli(capsys, "--home", str(old_home), "search", "moving", "--mode", "lexical", "--json")
    assert code == 0, err
    assert [r["text"] for r in json.loads(out)] == [NOTES[1]]


def test_an_invalid_old_config_is_refused_and_left_as_it_is(old_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = json.loads((old_home / "config.json").read_text())
    cfg["p2p"]["mdsn"] = True
    (old_home / "config.json").write_text(json.dumps(cfg))
    before = (old_home / "config.json").read_bytes()
    code, _, err = run_cli(capsys, "--home", str(old_home), "stats")
    assert code == 2 and "did you mean 'p2p.mdns'?" in err, err
    assert (old_home / "config.json").read_bytes() == before
    assert not (old_home / "config.toml").exists() and not (old_home / "config.json.format-1").exists()


def test_a_home_of_a_newer_format_is_refused_with_what_to_do(
    old_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(capsys, "--home", str(old_home), "stats")[0] == 0  # upgraded to this format
    path = old_home / "config.toml"
    path.write_text(path.read_text().replace(CONFIG_FORMAT, f"gaml-home-{HOME_FORMAT + 1}"))
    code, _, err = run_cli(capsys, "--home", str(old_home), "stats")
    assert code != 0 and "made by a newer GAML" in err and "upgrade GAML" in err, err
