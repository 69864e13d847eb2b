"""`gaml ingest / curate / forget / sources / maintain` on a real home (RocksDB, hnswlib, file keychain; hash
embedder), in-process like tests/node/test_cli.py, and as a subprocess where a terminal or a signal is needed."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import queue
import re
import selectors
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from gaml.policy.model import item_id
from tests.node.cli_util import edit_config
from tests.node.test_cli import run

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 120.0  # overall bound on a subprocess step; an event (a line, an exit) normally ends the wait far sooner
SECRET = "Zq8vTg3mPw1x"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    monkeypatch.setenv("GAML_PASSPHRASE", "test passphrase")
    monkeypatch.delenv("GAML_KEYCHAIN_KEY", raising=False)
    h = tmp_path / "home"
    code, _, err = run(capsys, "--home", str(h), "init", "--embedder", "hash", "--user", "alice")
    assert code == 0, err
    return h


def gaml(capsys: pytest.CaptureFixture[str], home: Path, *argv: str) -> tuple[int, str, str]:
    return run(capsys, "--home", str(home), *argv)


def ok(capsys: pytest.CaptureFixture[str], home: Path, *argv: str) -> Any:
    """Run a command that must succeed and print one JSON document; return it."""
    code, out, err = gaml(capsys, home, *argv)
    assert code == 0, err
    return json.loads(out)


def journal_seq(capsys: pytest.CaptureFixture[str], home: Path) -> int:
    return int(ok(capsys, home, "stats", "--json")["journal_seq"])


def sources(capsys: pytest.CaptureFixture[str], home: Path) -> dict[str, dict[str, Any]]:
    """The listed sources by id, without the hash of the file's location that id-less sources (notes, chats without
    an id) carry after an ``@`` (tests/node/test_parsers.py checks that part)."""
    rows = ok(capsys, home, "sources", "--json")
    for r in rows:
        if r["source"].startswith("notes:"):  # a note has no id of its own: its location's hash is appended
            assert re.fullmatch(r"notes:[^@]+@[0-9a-f]{16}", r["source"]), r["source"]
    return {row["source"].split("@")[0]: row for row in rows}


# -- inputs ---------------------------------------------------------------------------------------------------------


def jsonl(*lines: dict[str, Any]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


def cc(kind: str, content: Any, uuid: str, second: int, session: str = "s-1") -> dict[str, Any]:
    """A Claude Code session-log line."""
    return {
        "type": kind,
        "message": {"role": kind, "content": content},
        "timestamp": f"2025-06-01T10:00:{second:02d}Z",
        "sessionId": session,
        "uuid": uuid,
        "cwd": "/home/alice/project",
    }


TRANSCRIPT = jsonl(
    {"type": "summary", "summary": "Fixing a flaky test", "leafUuid": "u0"},
    cc("user", "Please fix the flaky login test in auth_test.py", "u1", 0),
    cc(
        "assistant",
        [
            {"type": "text", "text": "Let me look at the test first."},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "auth_test.py"}},
        ],
        "u2",
        1,
    ),
    cc(
        "user",
        [{"type": "tool_result", "tool_use_id": "t1", "content": "def test_login(): assert login('bob')"}],
        "u3",
        2,
    ),
    cc("assistant", [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "pytest -q"}}], "u4", 3),
    cc(
        "user",
        [{"type": "tool_result", "tool_use_id": "t2", "content": "1 failed: clock skew", "is_error": True}],
        "u5",
        4,
    ),
    cc("assistant", "The test read the quokka wall clock; I replaced it with a fixed clock and it passes.", "u6", 5),
)
TRANSCRIPT_RECORDS = 7  # text, Read, result, Bash, error and the conclusion, after the request
TRANSCRIPT_SOURCE = "transcript:s-1"
QUOKKA_POSITION = 6

CHAT = [
    {"role": "system", "content": "You are a helpful travel assistant."},
    {"role": "user", "content": "What will the weather be in Lisbon tomorrow?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24C, light wind"},
    {"role": "assistant", "content": "Tomorrow Lisbon will be sunny at 24C with a light wind."},
]

LOCOMO = {
    "sample_id": "conv-t",
    "qa": [{"question": "Where did Ann hike?", "answer": "Sintra", "evidence": ["D1:2"], "category": 4}],
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bob! How was your week?"},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Great, I hiked in Sintra with my sister on Saturday."},
            {"speaker": "Ann", "dia_id": "D1:3", "text": "Sintra is lovely. I started learning the cello."},
        ],
        "session_2_date_time": "9:05 am on 20 May, 2023",
        "session_2": [
            {"speaker": "Bob", "dia_id": "D2:1", "text": "How are the cello lessons going?"},
            {
                "speaker": "Ann",
                "dia_id": "D2:2",
                "text": "Slowly! My teacher is patient though.",
                "img_url": ["http://example.com/cello.jpg"],
                "blip_caption": "a photo of a cello in a living room",
            },
        ],
    },
}

NOTES = """# Garden

Tomatoes go in the raised bed in May, after the last frost.

Water the basil every second day.

## Tools

The pruning shears are in the blue shed.
"""

# name, content, expected sources (id -> format) or a count when the id is a content hash
INPUTS: dict[str, tuple[str, dict[str, str] | int]] = {
    "transcript": ("session.jsonl", {TRANSCRIPT_SOURCE: "transcript"}),
    "chat": ("chat.json", 1),
    "locomo": ("conv.json", {"locomo:conv-t:session_1": "locomo", "locomo:conv-t:session_2": "locomo"}),
    "text": ("garden.md", {"notes:garden.md": "text"}),
}


def write_input(directory: Path, fmt: str) -> Path:
    name = INPUTS[fmt][0]
    text = {
        "transcript": TRANSCRIPT,
        "chat": json.dumps(CHAT),
        "locomo": json.dumps(LOCOMO),
        "text": NOTES,
    }[fmt]
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- ingestion in every format ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(INPUTS))
def test_each_format_ingests_then_a_repeat_writes_nothing(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    """Each input format ingests through the CLI with a JSON report (items, curation); `sources` lists what was
    read; ingesting the same file again reports no new items and leaves the journal where it was."""
    path = write_input(tmp_path / "in", fmt)
    report = ok(capsys, home, "ingest", str(path), "--owner", "alice")
    assert report["files"] == 1 and report["items"] > 0 and report["written"] >= report["items"]
    assert report["skipped"] == 0 and report["dirty"]
    assert report["curation"]["sources"] == report["sources"] and report["curation"]["rungs"] > 0
    listed = sources(capsys, home)
    expected = INPUTS[fmt][1]
    if isinstance(expected, int):
        assert len(listed) == expected and all(s.startswith(f"{fmt}:") for s in listed)
    else:
        assert {s: row["format"] for s, row in listed.items()} == expected
    assert sum(row["records"] for row in listed.values()) == report["records"]
    assert not any(row["curation_pending"] for row in listed.values())
    seq = journal_seq(capsys, home)
    assert seq > 0

    again = ok(capsys, home, "ingest", str(path), "--owner", "alice")
    assert again["items"] == 0 and again["written"] == 0 and again["skipped"] == report["records"]
    assert "curation" not in again and again["dirty"] == []
    assert journal_seq(capsys, home) == seq
    assert sources(capsys, home) == listed


def test_transcript_items_are_typed_and_searchable(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A coding-agent transcript yields one item per record (request, text, file op, tool call, result, error,
    conclusion), owned by --owner, and a search finds the conclusion."""
    path = write_input(tmp_path, "transcript")
    report = ok(capsys, home, "ingest", str(path), "--owner", "alice")
    assert (report["records"], report["items"]) == (TRANSCRIPT_RECORDS, TRANSCRIPT_RECORDS)
    kinds = []
    for pos in range(TRANSCRIPT_RECORDS):
        asset = ok(capsys, home, "get", item_id(TRANSCRIPT_SOURCE, pos), "--as", "alice")
        assert asset["owner_id"] == "alice" and asset["level"] == "l0"
        kinds.append(asset["payload"]["kind"])
    assert kinds[0] == "goal" and {"file_op", "tool_call", "tool_result", "error", "conclusion"} <= set(kinds)
    hits = ok(capsys, home, "search", "quokka wall clock", "--as", "alice", "--json", "--mode", "lexical")
    assert item_id(TRANSCRIPT_SOURCE, QUOKKA_POSITION) in [h["id"] for h in hits]


def test_a_source_stays_with_its_first_owner(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Ingesting a source already ingested for alice as bob's memory is refused (exit 2) and writes nothing."""
    path = write_input(tmp_path, "text")
    ok(capsys, home, "ingest", str(path), "--owner", "alice")
    seq = journal_seq(capsys, home)
    code, _, err = gaml(capsys, home, "ingest", str(path), "--owner", "bob")
    assert code == 2 and "notes:garden.md" in err and "another owner" in err
    assert journal_seq(capsys, home) == seq


def test_a_directory_ingests_every_file_under_it(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory PATH ingests each (non-hidden) file under it, subdirectories included, in one report."""
    inbox = tmp_path / "inbox"
    for fmt in ("transcript", "chat"):
        write_input(inbox, fmt)
    for fmt in ("locomo", "text"):
        write_input(inbox / "more", fmt)
    (inbox / ".hidden.jsonl").write_text("not json at all\n")  # skipped: would fail to parse
    report = ok(capsys, home, "ingest", str(inbox), "--owner", "alice")
    assert report["files"] == 4 and report["sources"] == 5 and report["curation"]["sources"] == 5
    assert {row["format"] for row in sources(capsys, home).values()} == {"transcript", "chat", "locomo", "text"}
    seq = journal_seq(capsys, home)
    assert ok(capsys, home, "ingest", str(inbox), "--owner", "alice")["items"] == 0
    assert journal_seq(capsys, home) == seq


# -- --format and bad input -------------------------------------------------------------------------------------------


def test_format_option_forces_a_parser(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--format text reads a JSONL file as a notes file (one note per paragraph), whatever its extension says."""
    path = write_input(tmp_path, "transcript")
    report = ok(capsys, home, "ingest", str(path), "--owner", "alice", "--format", "text")
    assert report["sources"] == 1 and report["items"] > 0
    assert {s: row["format"] for s, row in sources(capsys, home).items()} == {"notes:session.jsonl": "text"}


@pytest.mark.parametrize(
    ("fmt", "forced", "message"), [("transcript", "chat", "not valid JSON"), ("text", "transcript", "line 1")]
)
def test_a_wrong_format_is_refused_clearly(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, forced: str, message: str
) -> None:
    """Forcing a format the file is not in exits 2 with a message naming the file, the problem and --format; nothing
    is written."""
    path = write_input(tmp_path, fmt)
    code, out, err = gaml(capsys, home, "ingest", str(path), "--owner", "alice", "--format", forced)
    assert code == 2 and out == ""
    assert err.startswith(f"gaml: error: {path}: ") and message in err and f"--format {forced}" in err
    assert journal_seq(capsys, home) == 0 and sources(capsys, home) == {}


def test_missing_path_and_malformed_line(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing path exits 1 naming it; a malformed middle line of a JSONL transcript exits 2 naming the line, and
    nothing of the batch is written, not even the files before it."""
    good = write_input(tmp_path, "text")
    code, _, err = gaml(capsys, home, "ingest", str(good), str(tmp_path / "nowhere.jsonl"), "--owner", "alice")
    assert code == 1 and "nowhere.jsonl: no such file or directory" in err
    lines = TRANSCRIPT.splitlines(keepends=True)
    bad = tmp_path / "zz-bad.jsonl"
    bad.write_text("".join(lines[:3]) + '{"type": "user", "message": {\n' + "".join(lines[3:]))
    code, out, err = gaml(capsys, home, "ingest", str(good), str(bad), "--owner", "alice")
    assert code == 2 and out == ""
    assert f"{bad}: line 4: not valid JSON" in err
    assert journal_seq(capsys, home) == 0 and sources(capsys, home) == {}


def test_bad_options_are_usage_errors(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A non-positive --interval or --item-budget, an unknown --format or a public scope are refused (exit 2)."""
    path = write_input(tmp_path, "text")
    for extra, message in (
        (["--watch", "--interval", "0"], "not a positive number of seconds"),
        (["--watch", "--interval", "-1"], "not a positive number of seconds"),
        (["--interval", "soon"], "not a number of seconds"),
        (["--item-budget", "0"], "not positive"),
        (["--format", "yaml"], "invalid choice"),
    ):
        code, _, err = gaml(capsys, home, "ingest", str(path), "--owner", "alice", *extra)
        assert code == 2 and message in err, (extra, err)
    code, _, err = gaml(capsys, home, "ingest", str(path), "--owner", "alice", "--scope", "public")
    assert code == 2 and "not ingested as public memory" in err
    assert journal_seq(capsys, home) == 0


# -- progress ---------------------------------------------------------------------------------------------------------


def test_no_progress_bar_when_stderr_is_not_a_terminal(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With stderr captured (not a TTY) the command works and draws no progress bar."""
    path = write_input(tmp_path, "locomo")
    code, out, err = gaml(capsys, home, "ingest", str(path), "--owner", "alice")
    assert code == 0 and json.loads(out)["items"] == 5
    assert err == ""


def cli(home: Path, *argv: str) -> list[str]:
    return [sys.executable, "-m", "gaml.node.cli", "--home", str(home), *argv]


def test_progress_bar_on_a_terminal(home: Path, tmp_path: Path) -> None:
    """With stderr on a terminal (a pseudo-terminal here) the ingest and curation progress bars are drawn there, and
    stdout (a pipe) still carries exactly the JSON report."""
    path = write_input(tmp_path, "locomo")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        proc = subprocess.Popen(
            cli(home, "ingest", str(path), "--owner", "alice"),
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=slave,
        )
    finally:
        os.close(slave)
    chunks: list[bytes] = []
    sel = selectors.DefaultSelector()
    sel.register(master, selectors.EVENT_READ)
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline:
            if not sel.select(timeout=deadline - time.monotonic()):
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the last holder of the terminal's other end is gone
                break
            if not chunk:
                break
            chunks.append(chunk)
        out, _ = proc.communicate(timeout=WAIT_S)
    finally:
        sel.close()
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    drawn = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, drawn
    assert json.loads(out)["items"] == 5
    assert "ingest: 100%" in drawn and "5/5" in drawn and "record" in drawn
    assert "curate: 100%" in drawn and "2/2" in drawn


# -- --watch ----------------------------------------------------------------------------------------------------------


class Lines:
    """The lines a subprocess writes to a pipe, read by a thread; ``next`` waits for one (bounded by a timeout)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.queue: queue.Queue[bytes] = queue.Queue()
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream: IO[bytes]) -> None:
        for line in stream:
            self.queue.put(line)
        self.queue.put(b"")

    def next(self, timeout: float = WAIT_S) -> bytes:
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line from the subprocess within {timeout} s") from None


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_watch_ingests_what_is_appended_until_interrupted(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], stop: signal.Signals
) -> None:
    """`ingest --watch` reports the first pass, then a pass with exactly the appended records (the earlier ones
    skipped); SIGINT (Ctrl-C) or SIGTERM (a service manager) stops it cleanly (exit 0), the store closed with a
    checkpoint (the next open replays nothing), and the source's watermark holds the new record count."""
    path = write_input(tmp_path, "transcript")
    errors = tmp_path / "watch.err"
    with errors.open("wb") as err:
        proc = subprocess.Popen(
            cli(home, "ingest", str(path), "--owner", "alice", "--watch", "--interval", "0.2"),
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    try:
        assert proc.stdout is not None
        lines = Lines(proc.stdout)
        first = json.loads(lines.next() or b"null")
        assert first is not None, errors.read_text()
        assert (first["records"], first["items"], first["skipped"]) == (TRANSCRIPT_RECORDS, TRANSCRIPT_RECORDS, 0)
        appended = jsonl(
            cc("user", "Now add a changelog entry for the clock fix", "u7", 6),
            cc("assistant", "Added the entry to CHANGELOG.md under Unreleased.", "u8", 7),
        )
        with path.open("a", encoding="utf-8") as f:
            f.write(appended)  # one write: the watcher sees both lines, or (rarely) the first, then the second
        reports = [json.loads(lines.next())]
        while sum(r["items"] for r in reports) < 2:
            reports.append(json.loads(lines.next()))
        assert reports[0]["skipped"] == TRANSCRIPT_RECORDS
        assert [r["items"] for r in reports] in ([2], [1, 1])
        assert reports[-1]["records"] == TRANSCRIPT_RECORDS + 2 and reports[-1]["curation"]["sources"] == 1
        proc.send_signal(stop)
        assert proc.wait(timeout=WAIT_S) == 0, errors.read_text()
        assert lines.next() == b""  # nothing more after the reports
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "stopped watching" in errors.read_text()
    assert ok(capsys, home, "stats", "--json")["replayed_events"] == 0
    row = sources(capsys, home)[TRANSCRIPT_SOURCE]
    assert (row["records"], row["items"], row["curation_pending"]) == (
        TRANSCRIPT_RECORDS + 2,
        TRANSCRIPT_RECORDS + 2,
        False,
    )


# -- curate, forget, maintain -----------------------------------------------------------------------------------------


def test_no_curate_then_curate(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--no-curate leaves the sources pending; `gaml curate` compiles them; with nothing pending it reports zero."""
    path = write_input(tmp_path, "locomo")
    report = ok(capsys, home, "ingest", str(path), "--owner", "alice", "--no-curate")
    assert "curation" not in report and len(report["dirty"]) == 2
    assert all(row["curation_pending"] for row in sources(capsys, home).values())
    done = ok(capsys, home, "curate")
    assert done["sources"] == 2 and done["items"] == 5 and done["rungs"] > 0 and done["written"] == done["rungs"]
    assert not any(row["curation_pending"] for row in sources(capsys, home).values())
    seq = journal_seq(capsys, home)
    assert ok(capsys, home, "curate") == {
        "sources": 0,
        "items": 0,
        "rungs": 0,
        "written": 0,
        "removed": 0,
        "frozen": 0,
        "clipped": 0,
    }
    again = ok(capsys, home, "curate", "--source", "locomo:conv-t:session_1")
    assert again["sources"] == 1 and again["written"] == 0  # curating again changes nothing
    assert journal_seq(capsys, home) == seq
    code, _, err = gaml(capsys, home, "curate", "--source", "locomo:nope")
    assert code == 1 and "locomo:nope" in err


def test_forget_erases_an_item_and_its_influence(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gaml forget` prints a receipt (ids and counts, no text); afterwards no search finds the forgotten word and the
    item reads as deleted; only its owner may forget it; ingesting again does not bring it back."""
    path = write_input(tmp_path, "transcript")
    ok(capsys, home, "ingest", str(path), "--owner", "alice")
    target = item_id(TRANSCRIPT_SOURCE, QUOKKA_POSITION)
    hits = ok(capsys, home, "search", "quokka", "--as", "alice", "--json", "--k", "50")
    assert target in [h["id"] for h in hits] and sum("quokka" in h["text"] for h in hits) >= 2  # item and rungs

    ok(capsys, home, "principal", "add", "bob")
    code, _, err = gaml(capsys, home, "forget", target, "--as", "bob")
    assert code == 1 and err == f"gaml: error: no asset {target}\n"  # bob may not even learn that it exists
    code, _, err = gaml(capsys, home, "forget", target, "--as", "mallory")
    assert code == 5 and "unknown principal" in err  # refused

    receipt = ok(capsys, home, "forget", target, "--as", "alice")
    assert receipt["id"] == target and receipt["by"] == "alice" and receipt["reason"] == "forget"
    assert receipt["rebuilt_sources"] == 1 and isinstance(receipt["tombstoned"], list)
    assert "quokka" not in json.dumps(receipt)
    for mode in ("hybrid", "lexical", "dense"):
        hits = ok(capsys, home, "search", "quokka", "--as", "alice", "--json", "--k", "50", "--mode", mode)
        assert not any("quokka" in json.dumps(h) for h in hits), mode
        assert target not in [h["id"] for h in hits]
    assert ok(capsys, home, "search", "quokka", "--as", "alice", "--json", "--mode", "lexical") == []
    code, _, err = gaml(capsys, home, "get", target, "--as", "alice")
    assert code == 1 and "deleted" in err
    for tomb in receipt["tombstoned"]:
        assert gaml(capsys, home, "get", tomb, "--as", "alice")[0] == 1
    code, _, err = gaml(capsys, home, "forget", target, "--as", "alice")
    assert code == 1 and "already forgotten" in err

    again = ok(capsys, home, "ingest", str(path), "--owner", "alice")
    assert again["items"] == 0
    path.write_text(TRANSCRIPT.replace("quokka", "wombat"))  # rewritten in place: processed again from the start
    rewritten = ok(capsys, home, "ingest", str(path), "--owner", "alice")
    assert rewritten["rewritten"] == [TRANSCRIPT_SOURCE] and rewritten["gated"] == {"forgotten": 1}
    assert gaml(capsys, home, "get", target, "--as", "alice")[0] == 1


def test_maintain_prints_its_counts(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gaml maintain` applies retention, finishes pending curation and recomputes tiers, printing the counts."""
    ok(capsys, home, "ingest", str(write_input(tmp_path, "chat")), "--owner", "alice", "--no-curate")
    out = ok(capsys, home, "maintain")
    assert set(out) == {"expired", "retired", "curation", "tiers"}
    assert out["expired"] == 0 and out["retired"] == 0 and out["curation"]["sources"] == 1
    assets = ok(capsys, home, "stats", "--json")["assets"]
    assert set(out["tiers"]) >= {"hot", "warm", "cold"} and sum(out["tiers"].values()) == assets
    again = ok(capsys, home, "maintain")
    assert again["curation"]["sources"] == 0 and sum(again["tiers"].values()) == assets


# -- privacy ----------------------------------------------------------------------------------------------------------


def secret_transcript(goal: str) -> str:
    return jsonl(
        cc("user", goal, "s1", 0, session="deploy"),
        cc(
            "assistant",
            [
                {"type": "text", "text": "Setting the database password and deploying."},
                {
                    "type": "tool_use",
                    "id": "d1",
                    "name": "Bash",
                    "input": {"command": f"export DB_PASSWORD={SECRET} && ./deploy.sh staging"},
                },
            ],
            "s2",
            1,
            session="deploy",
        ),
        cc(
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "d1",
                    "content": f"connected to postgres://deploy:{SECRET}@db.internal:5432/app; deployed",
                }
            ],
            "s3",
            2,
            session="deploy",
        ),
        cc("assistant", f"Deployed. For the record, the password is {SECRET} (rotate it).", "s4", 3, session="deploy"),
    )


def check_secret_is_gone(home: Path, capsys: pytest.CaptureFixture[str], path: Path, held: int) -> None:
    """Ingest ``path`` (``held`` of its records hold SECRET) as shared memory; no trace of SECRET may remain."""
    report = ok(capsys, home, "ingest", str(path), "--owner", "alice", "--scope", "shared")
    assert report["redactions"] >= 3 and report["items"] == 5
    (row,) = sources(capsys, home).values()
    assert row["records"] == 5
    listed: set[str] = set()
    for mode in ("hybrid", "lexical", "dense"):
        hits = ok(capsys, home, "search", SECRET, "--as", "alice", "--json", "--k", "50", "--mode", mode)
        assert not any(SECRET in json.dumps(h) for h in hits), mode
        listed.update(h["id"] for h in hits)
    assert ok(capsys, home, "search", SECRET, "--as", "alice", "--json", "--mode", "lexical") == []
    items = {item_id(row["source"], pos) for pos in range(row["records"])}
    assert len(listed - items) > 0  # the curated rungs and facts were searched too
    redacted = 0
    for id_ in sorted(listed | items):
        code, out, err = gaml(capsys, home, "get", id_, "--as", "alice")
        assert code == 0, err
        assert SECRET not in out, id_
        asset = json.loads(out)
        if id_ in items:
            redacted += "[REDACTED:" in asset["payload"]["text"]
            assert asset["privacy_scope"] == "shared"
    assert redacted == held


def test_secrets_are_redacted_before_anything_is_stored(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A transcript with a password in a tool call, a tool result and an answer, ingested with --scope shared: no
    search (dense, lexical, hybrid) finds the secret, and every item whose record held it shows the placeholder."""
    path = tmp_path / "deploy.jsonl"
    path.write_text(secret_transcript("Please deploy the billing service to staging"))
    check_secret_is_gone(home, capsys, path, held=3)  # the Bash call, the tool result and the conclusion


def test_a_secret_in_the_request_is_redacted_from_the_goal_too(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A secret in the user's request, which becomes the goal stamped on every later item and rung, is as gone as
    one anywhere else."""
    path = tmp_path / "deploy.jsonl"
    path.write_text(secret_transcript(f"Please deploy the billing service to staging with DB_PASSWORD={SECRET}"))
    check_secret_is_gone(home, capsys, path, held=4)


def test_a_placeholder_is_no_entity(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No item, fact or rung names the redaction placeholder as one of its entities."""
    path = tmp_path / "deploy.jsonl"
    path.write_text(secret_transcript("Please deploy the billing service to staging"))
    ok(capsys, home, "ingest", str(path), "--owner", "alice")
    hits = ok(capsys, home, "search", "database password deploy", "--as", "alice", "--json", "--k", "50")
    ids = {h["id"] for h in hits} | {item_id("transcript:deploy", pos) for pos in range(5)}
    named = [id_ for id_ in sorted(ids) if "REDACTED" in ok(capsys, home, "get", id_, "--as", "alice")["entities"]]
    assert named == []


def test_hydrate_prints_a_frame_and_its_receipt(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = REPO / "deploy" / "examples" / "session.jsonl"
    ok(capsys, home, "ingest", str(session), "--owner", "alice")
    monkeypatch.delenv("GAML_AS", raising=False)
    out = ok(capsys, home, "hydrate", "--goal", "why did the login test fail?", "--budget", "300", "--json")
    frame, receipt = out["frame"], out["receipt"]
    assert frame.startswith("<gaml-memory receipt=") and receipt["receipt"] in frame
    assert receipt["caller"]["principal"] == "alice" and receipt["budget"]["total"] == 300
    assert 0 < receipt["budget"]["spent"] <= 300 and receipt["facts"] and receipt["path"] in ("hybrid", "semantic")
    log = ok(capsys, home, "access-log", "--as", "alice", "--json")
    assert log[0]["kind"] == "hydrate" and log[0]["receipt"] == receipt["receipt"]
    plane = tmp_path / "plane.json"
    plane.write_text(json.dumps([{"name": "*", "budget": 150, "seeds": 3}]))
    out = ok(capsys, home, "hydrate", "--goal", "login test", "--budget", "300", "--plane", str(plane), "--json")
    assert out["receipt"]["segments"][0]["budget"] == 150 and out["receipt"]["segments"][0]["spent"] <= 150
    plane.write_text(json.dumps([{"name": "*", "budget": 500}]))  # more than the total: refused, exit 2
    code, _, err = gaml(capsys, home, "hydrate", "--goal", "login test", "--budget", "300", "--plane", str(plane))
    assert code == 2 and "300" in err
    code, _, err = gaml(capsys, home, "hydrate", "--goal", "x", "--budget", "300", "--as", "mallory")
    assert code != 0 and "mallory" in err
    # The profile at the head: what alice pinned stands in every frame of hers; --profile 0 leaves it out.
    pinned = tmp_path / "pinned.json"
    pinned.write_text(
        json.dumps({"asset_type": "fact", "payload": {"text": "CI runs on ARM runners"}, "tags": ["pinned"]})
    )
    code, _, err = gaml(capsys, home, "put", str(pinned), "--owner", "alice")
    assert code == 0, err
    out = ok(capsys, home, "hydrate", "--goal", "login test", "--budget", "600", "--json")
    assert out["frame"].split("\n")[1:3] == ["## profile", "p1 CI runs on ARM runners"]
    assert next(f["standing"] for f in out["receipt"]["facts"] if f["seeded_by"] == "profile") == "pinned"
    out = ok(capsys, home, "hydrate", "--goal", "login test", "--budget", "600", "--profile", "0", "--json")
    assert "## profile" not in out["frame"] and out["receipt"]["profile"]["budget"] == 0
    code, _, err = gaml(capsys, home, "hydrate", "--goal", "x", "--budget", "600", "--profile", "-3")
    assert code == 2 and "negative" in err


# -- the one interface keeps the store's rules (issue 15's review) ---------------------------------------------------


def test_ingest_owner_must_be_an_owner_not_an_agent(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--owner` says whose memory this is: an agent acting for alice is no owner, so its name is refused (its writes
    would be alice's) and nothing is written."""
    assert gaml(capsys, home, "principal", "add", "alice")[0] == 0
    code, _, err = gaml(capsys, home, "principal", "add", "agent1", "--kind", "agent", "--on-behalf-of", "alice")
    assert code == 0, err
    before = journal_seq(capsys, home)
    path = write_input(tmp_path, "text")
    code, out, err = gaml(capsys, home, "ingest", str(path), "--owner", "agent1")
    assert code == 5 and out == ""  # refused
    assert "agent1 writes alice's memory, not agent1's" in err
    assert journal_seq(capsys, home) == before


def test_a_symlinked_file_keeps_the_name_it_was_given(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file ingested through a link is detected and named by the link (its source id too), and located by where
    it lies; an error names it as given."""
    real = tmp_path / "real.txt"
    real.write_text("The owl box faces east.\n\nOwls nest in March.\n")
    link = tmp_path / "owls.md"
    link.symlink_to(real)
    report = ok(capsys, home, "ingest", str(link), "--owner", "alice")
    assert report["sources"] == 1
    assert set(sources(capsys, home)) == {"notes:owls.md"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    code, _, err = gaml(capsys, home, "ingest", str(bad), "--owner", "alice", "--format", "transcript")
    assert code == 2 and err.startswith(f"gaml: error: {bad}: ")


def test_store_commands_that_need_no_ingestion_need_none_of_its_settings(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the privacy rules file of the config missing, the commands that do not ingest or hydrate (stats, grants,
    search, access-log) still work on the store; ingest says what is missing."""
    edit_config(home, lambda c: c.update(privacy_rules="missing-rules.json"))
    cfg = home / "config.toml"
    assert ok(capsys, home, "stats", "--json")["assets"] == 0
    assert ok(capsys, home, "grants") == []
    assert gaml(capsys, home, "principal", "add", "alice")[0] == 0
    assert ok(capsys, home, "search", "anything", "--as", "alice", "--json") == []
    assert ok(capsys, home, "access-log", "--as", "alice", "--json") == []
    code, _, err = gaml(capsys, home, "ingest", str(cfg), "--owner", "alice", "--format", "text")
    assert code == 2 and "missing-rules.json" in err


def test_gaml_as_naming_nobody_says_so(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`$GAML_AS` naming no registered principal is refused as an unknown principal, as `--as` would be."""
    monkeypatch.setenv("GAML_AS", "zed")
    code, _, err = gaml(capsys, home, "hydrate", "--goal", "anything", "--budget", "300")
    assert code == 5 and "unknown principal 'zed'" in err  # refused


def test_one_bad_file_in_a_folder_is_skipped_with_a_warning_not_the_folder(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder with a file that does not parse: the others are ingested, the bad one is named on stderr and in the
    report's skipped_files; the same file named on the command line still stops the command (exit 2, nothing
    written)."""
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "notes.md").write_text("The release train leaves on Thursdays.\n")
    bad = folder / "broken.json"
    bad.write_text('{"messages": "not a list"}')
    code, out, err = gaml(capsys, home, "ingest", str(folder))
    assert code == 0, err
    report = json.loads(out)
    assert report["files"] == 1 and report["items"] == 1 and report["skipped_files"] == [str(bad)]
    assert f"gaml: warning: skipped {bad}: " in err
    before = journal_seq(capsys, home)
    code, out, err = gaml(capsys, home, "ingest", str(bad))
    assert code == 2 and out == "" and str(bad) in err
    assert journal_seq(capsys, home) == before


def test_list_and_export_show_your_own_memory(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gaml add` then `gaml list` (a line each) and `gaml export` (JSON lines, decrypted), filtered by type."""
    code, out, err = gaml(capsys, home, "add", "The cabin wifi is called Pinecone")
    assert code == 0, err
    (id_,) = out.split()
    code, out, _ = gaml(capsys, home, "list")
    line = next(row for row in out.splitlines() if row.startswith(id_))  # the note, beside what was derived from it
    assert code == 0 and line.endswith("The cabin wifi is called Pinecone")
    code, out, _ = gaml(capsys, home, "export")
    rows = [json.loads(line) for line in out.splitlines()]
    assert any(r["id"] == id_ and r["payload"]["text"] == "The cabin wifi is called Pinecone" for r in rows)
    code, out, _ = gaml(capsys, home, "export", "--type", "goal")
    assert code == 0 and all(json.loads(line)["asset_type"] == "goal" for line in out.splitlines())
    code, out, _ = gaml(capsys, home, "list", "--since", "2999-01-01")
    assert code == 0 and out.startswith("(no memory of yours")


@pytest.mark.slow  # tens of seconds: `make test-slow` (make test keeps under 15 minutes)
def test_commands_on_one_home_without_a_daemon_take_turns(home: Path) -> None:
    """Three `gaml add` started at once on a home no daemon serves all succeed (each waits its turn for the store),
    and all three notes are kept; a command that waits past GAML_LOCK_WAIT_S says the home is in use (exit 3)."""
    env = {**os.environ, "GAML_PASSPHRASE": "test passphrase", "PYTHONPATH": str(REPO)}
    env.pop("GAML_KEYCHAIN_KEY", None)
    cmd = [sys.executable, "-m", "gaml.node.cli", "--home", str(home)]
    procs = [
        subprocess.Popen([*cmd, "add", f"note number {i}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        for i in range(3)
    ]
    results = [(p.wait(120), p.stdout.read(), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
    assert [code for code, _, _ in results] == [0, 0, 0], results
    listed = subprocess.run([*cmd, "list"], capture_output=True, text=True, env=env, check=True).stdout
    assert all(f"note number {i}" in listed for i in range(3))
    holder = subprocess.Popen(
        [*cmd, "ingest", "--watch", "--interval", "0.2", str(write_input(home.parent, "text"))],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert holder.stdout is not None and json.loads(holder.stdout.readline())["sources"] == 1  # it holds the home
        r = subprocess.run(
            [*cmd, "add", "one more"], capture_output=True, text=True, env={**env, "GAML_LOCK_WAIT_S": "0.5"}
        )
        assert r.returncode == 3 and "in use by another gaml command" in r.stderr and "gaml run" in r.stderr
    finally:
        holder.terminate()
        holder.wait(60)
