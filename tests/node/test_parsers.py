"""The parser registry: four formats, detection, verbatim offsets, stable positions and ids, determinism."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from gaml.node.core.text.parsers import (
    DATA_BYTES_MAX,
    FORMATS,
    PARSERS,
    detect,
    locomo_time_us,
    parse,
    timestamp_us,
)
from gaml.node.core.text.records import Source
from gaml.policy.errors import InvalidInput

T0 = 1_748_772_000_000_000  # 2025-06-01T10:00:00Z in microseconds


def jsonl(*lines: Any) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def cc(kind: str, content: Any, *, session: str = "s-1", uuid: str = "u", ts: str = "2025-06-01T10:00:00Z") -> dict:
    """A Claude Code session-log line."""
    return {
        "type": kind,
        "message": {"role": kind, "content": content},
        "timestamp": ts,
        "sessionId": session,
        "uuid": uuid,
        "cwd": "/home/me/project",
    }


def only(sources: list[Source]) -> Source:
    assert len(sources) == 1
    return sources[0]


# -- transcript -------------------------------------------------------------------------------------------------------


def test_transcript_simple_shape() -> None:
    """role/content lines become records with roles, times, consecutive positions and byte offsets of their line."""
    data = jsonl(
        {"role": "system", "content": "be brief", "timestamp": 1_748_772_000},
        {"role": "user", "content": "hello", "timestamp": 1_748_772_000_000},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "hi there"}],
            "timestamp": "2025-06-01T12:00:00+02:00",
        },
        {"role": "tool", "content": "Error: no such file", "tool_call_id": "c1"},
    )
    source = only(parse(data, "chat.jsonl"))
    assert source.format == "transcript" and source.meta["unit"] == "byte"
    assert [(r.position, r.role, r.text, r.hint) for r in source.records] == [
        (0, "system", "be brief", "message"),
        (1, "user", "hello", "message"),
        (2, "assistant", "hi there", "message"),
        (3, "tool", "Error: no such file", "error"),
    ]
    assert [r.time for r in source.records] == [T0, T0, T0, 0]
    assert source.records[3].meta["call_id"] == "c1"
    first_line = data.split(b"\n", 1)[0]
    assert source.source_id == "transcript:" + hashlib.blake2b(first_line, digest_size=8).hexdigest()
    for r in source.records:
        assert orjson.loads(data[r.start : r.end])  # the verbatim line
        assert data[r.start : r.end].decode() == data.decode().splitlines()[r.position]


def test_transcript_claude_code_blocks() -> None:
    """Text, tool_use (file op and plain call), tool_result (error) blocks; thinking and images are skipped."""
    data = jsonl(
        {"type": "summary", "summary": "A session", "leafUuid": "x"},
        cc("user", "fix the bug in app.py", uuid="u1"),
        cc(
            "assistant",
            [
                {"type": "thinking", "thinking": "secret reasoning", "signature": "sig"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "src/app.py"}},
                {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls -la"}},
            ],
            uuid="u2",
        ),
        cc(
            "user",
            [
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "print(1)"}]},
                {"type": "tool_result", "tool_use_id": "t2", "content": "ls: denied", "is_error": True},
                {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
            ],
            uuid="u3",
        ),
        cc(
            "assistant",
            [{"type": "tool_use", "id": "t3", "name": "Edit", "input": {"file_path": "src/app.py", "old_string": "1"}}],
            uuid="u4",
        ),
        {"type": "system", "subtype": "info", "sessionId": "s-1", "level": "info"},
    )
    source = only(parse(data, "session.jsonl"))
    assert source.source_id == "transcript:s-1"
    assert source.meta == {"unit": "byte", "session_id": "s-1", "cwd": "/home/me/project"}
    assert source.time == T0
    rows = [(r.role, r.hint, r.text) for r in source.records]
    assert rows == [
        ("user", "message", "fix the bug in app.py"),
        ("assistant", "message", "Let me look."),
        ("assistant", "file_op", "Read src/app.py"),
        ("assistant", "tool_call", "Bash: ls -la"),
        ("tool", "tool_result", "print(1)"),
        ("tool", "error", "ls: denied"),
        ("assistant", "file_op", "Edit src/app.py"),
    ]
    assert [r.position for r in source.records] == list(range(7))
    read, bash, result, error, edit = (source.records[i] for i in (2, 3, 4, 5, 6))
    assert read.meta == {"uuid": "u2", "tool": "Read", "call_id": "t1", "op": "read", "path": "src/app.py"}
    assert bash.meta == {"uuid": "u2", "tool": "Bash", "call_id": "t2"}
    assert result.meta == {"uuid": "u3", "call_id": "t1", "tool": "Read"}
    assert error.meta["tool"] == "Bash"
    assert edit.meta["op"] == "edit"
    assert all("secret reasoning" not in r.text for r in source.records)
    assert data[read.start : read.end] == data.split(b"\n")[2]


@pytest.mark.parametrize(
    ("name", "args", "text", "op"),
    [
        ("Write", {"file_path": "a.txt", "content": "x" * 10_000}, "Write a.txt", "write"),
        ("MultiEdit", {"file_path": "b.py", "edits": []}, "MultiEdit b.py", "edit"),
        ("NotebookEdit", {"notebook_path": "n.ipynb", "new_source": ""}, "NotebookEdit n.ipynb", "edit"),
        (
            "str_replace_based_edit_tool",
            {"command": "view", "path": "c.py"},
            "str_replace_based_edit_tool view c.py",
            "read",
        ),
        (
            "str_replace_based_edit_tool",
            {"command": "create", "path": "d.py"},
            "str_replace_based_edit_tool create d.py",
            "write",
        ),
        ("create_file", {"path": "e.md"}, "create_file e.md", "write"),
        ("Grep", {"pattern": "TODO", "path": "src"}, "Grep TODO in src", "search"),
        ("custom_tool", {"path": "f.txt"}, "custom_tool f.txt", "access"),
    ],
)
def test_file_operations(name: str, args: dict[str, Any], text: str, op: str) -> None:
    """Tools that touch a file are file_op records naming the tool, the path and the operation."""
    data = jsonl(cc("assistant", [{"type": "tool_use", "id": "t", "name": name, "input": args}]))
    record = only(parse(data, "s.jsonl")).records[0]
    assert (record.hint, record.text, record.meta["op"], record.meta["tool"]) == ("file_op", text, op, name)


def test_other_tool_calls_render_compactly() -> None:
    """Calls without a file render as their main argument, else as sorted JSON, clipped."""
    data = jsonl(
        cc(
            "assistant",
            [
                {"type": "tool_use", "id": "a", "name": "WebSearch", "input": {"query": "trio nursery"}},
                {"type": "tool_use", "id": "b", "name": "TodoWrite", "input": {"todos": [{"b": 1, "a": 2}]}},
                {"type": "tool_use", "id": "c", "name": "Big", "input": {"x": "y" * 5000}},
            ],
        )
    )
    texts = [r.text for r in only(parse(data, "s.jsonl")).records]
    assert texts[:2] == ["WebSearch: trio nursery", 'TodoWrite {"todos":[{"a":2,"b":1}]}']
    assert len(texts[2]) == 2000 and texts[2].endswith("…")


def test_multiple_sessions_group_in_first_appearance_order() -> None:
    """One source per sessionId, in order of first appearance, positions counted per session."""
    data = jsonl(
        cc("user", "b1", session="B"),
        cc("user", "a1", session="A"),
        cc("assistant", "b2", session="B"),
        cc("assistant", "a2", session="A"),
    )
    sources = parse(data, "mixed.jsonl")
    assert [s.source_id for s in sources] == ["transcript:B", "transcript:A"]
    assert [[(r.position, r.text) for r in s.records] for s in sources] == [
        [(0, "b1"), (1, "b2")],
        [(0, "a1"), (1, "a2")],
    ]


def test_partial_trailing_line_is_ignored() -> None:
    """An unterminated last line that does not parse is a write in progress, not an error."""
    data = jsonl(cc("user", "one"), cc("assistant", "two")) + b'{"type": "user", "message": {"ro'
    assert [r.text for r in only(parse(data, "s.jsonl")).records] == ["one", "two"]
    cut_mid_character = jsonl(cc("user", "one")) + '{"text": "é'.encode()[:-1]
    assert len(only(parse(cut_mid_character, "s.jsonl")).records) == 1


def test_complete_unterminated_last_line_is_read() -> None:
    """An unterminated last line that parses is a whole record."""
    data = jsonl(cc("user", "one")) + orjson.dumps(cc("assistant", "two"))
    assert [r.text for r in only(parse(data, "s.jsonl")).records] == ["one", "two"]


def test_malformed_middle_line_names_its_line_number() -> None:
    """A terminated line that is not JSON (or not an object, or not UTF-8) raises InvalidInput with its number."""
    data = jsonl(cc("user", "one")) + b"\n" + b"{not json\n" + jsonl(cc("user", "two"))
    with pytest.raises(InvalidInput, match=r"s\.jsonl: line 3: not valid JSON"):
        parse(data, "s.jsonl")
    with pytest.raises(InvalidInput, match="line 2: expected a JSON object"):
        parse(jsonl(cc("user", "one"), [1, 2]), "s.jsonl")
    with pytest.raises(InvalidInput, match="line 1: not valid UTF-8"):
        parse(b'{"role": "user", "content": "\xff"}\n', "s.jsonl")


def test_appending_keeps_positions_offsets_and_source_id() -> None:
    """Appended lines never renumber earlier records nor change the source id (with or without sessionId)."""
    for make in (lambda t: cc("user", t), lambda t: {"role": "user", "content": t}):
        before = jsonl(make("one"), make("two"))
        after = before + jsonl(make("three"), make("four"))
        a, b = only(parse(before, "s.jsonl")), only(parse(after, "s.jsonl"))
        assert a.source_id == b.source_id
        assert b.records[: len(a.records)] == a.records
        assert [r.position for r in b.records] == [0, 1, 2, 3]


def test_source_id_does_not_depend_on_the_file_name() -> None:
    """Moving or renaming a transcript keeps its source id."""
    data = jsonl({"role": "user", "content": "hi"})
    assert only(parse(data, "a.jsonl")).source_id == only(parse(data, "b.jsonl")).source_id


def test_empty_records_are_skipped_and_positions_stay_consecutive() -> None:
    """Empty text, unknown roles and lines without a message make no record and leave no gap."""
    data = jsonl(
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "   "},
        {"role": "narrator", "content": "ignored"},
        {"role": "assistant", "content": None},
        {"type": "file-history-snapshot", "snapshot": {}},
        {"role": "user", "content": "two"},
    )
    source = only(parse(data, "s.jsonl"))
    assert [(r.position, r.text) for r in source.records] == [(0, "one"), (1, "two")]
    assert parse(jsonl({"type": "summary", "summary": "x"}), "s.jsonl") == []
    assert parse(b"", "s.jsonl") == []


def test_crlf_and_bom() -> None:
    """CRLF line ends and a leading BOM are not part of a record's span."""
    data = b"\xef\xbb\xbf" + b'{"role": "user", "content": "a"}\r\n{"role": "user", "content": "b"}\r\n'
    records = only(parse(data, "s.jsonl")).records
    assert [orjson.loads(data[r.start : r.end])["content"] for r in records] == ["a", "b"]


def test_timestamps() -> None:
    """ISO-8601 strings and epoch seconds, milliseconds or microseconds become microseconds UTC; else 0."""
    assert timestamp_us("2025-06-01T10:00:00.123Z") == T0 + 123_000
    assert timestamp_us("2025-06-01T12:00:00+02:00") == T0
    assert timestamp_us("2025-06-01T10:00:00") == T0
    assert timestamp_us(1_748_772_000) == T0
    assert timestamp_us(1_748_772_000.5) == T0 + 500_000
    assert timestamp_us(1_748_772_000_000) == T0
    assert timestamp_us(T0) == T0
    assert timestamp_us("1748772000") == T0
    for bad in (None, "", "yesterday", True, -5, float("nan"), {"x": 1}, "1900-01-01T00:00:00Z"):
        assert timestamp_us(bad) == 0


# -- chat -------------------------------------------------------------------------------------------------------------

CHAT = [
    {"role": "system", "content": "You are helpful."},
    {
        "role": "user",
        "content": [{"type": "text", "text": "Open it"}, {"type": "image_url", "image_url": {"url": "x"}}],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "notes.md"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "run", "arguments": '{"command": "make test"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "# Notes"},
    {"role": "tool", "tool_call_id": "call_2", "content": "Traceback (most recent call last):\n  boom"},
    {"role": "assistant", "content": "Done."},
]


def test_chat_messages() -> None:
    """Chat-completion messages become records; tool calls and tool results as in transcripts; unit is the index."""
    data = orjson.dumps(CHAT)
    source = only(parse(data, "log.json"))
    assert source.format == "chat" and source.meta["unit"] == "index"
    rows = [(r.position, r.role, r.hint, r.text, r.start, r.end) for r in source.records]
    assert rows == [
        (0, "system", "message", "You are helpful.", 0, 1),
        (1, "user", "message", "Open it", 1, 2),
        (2, "assistant", "file_op", "read_file notes.md", 2, 3),
        (3, "assistant", "tool_call", "run: make test", 2, 3),
        (4, "tool", "tool_result", "# Notes", 3, 4),
        (5, "tool", "error", "Traceback (most recent call last):\n  boom", 4, 5),
        (6, "assistant", "message", "Done.", 5, 6),
    ]
    assert source.records[2].meta == {"tool": "read_file", "call_id": "call_1", "op": "read", "path": "notes.md"}
    assert source.records[4].meta == {"call_id": "call_1", "tool": "read_file"}
    canonical = orjson.dumps(CHAT[0], option=orjson.OPT_SORT_KEYS)
    assert source.source_id == "chat:" + hashlib.blake2b(canonical, digest_size=8).hexdigest()


def test_chat_object_with_id_and_messages() -> None:
    """An object with "messages" is a chat log; its "id" is the source id; an appended message changes nothing."""
    doc = {"id": "conv-7", "title": "Planning", "created": 1_748_772_000, "messages": CHAT[:2]}
    source = only(parse(orjson.dumps(doc), "x.json"))
    assert (source.source_id, source.title, source.time) == ("chat:conv-7", "Planning", T0)
    longer = only(parse(orjson.dumps(CHAT), "x.json"))
    shorter = only(parse(orjson.dumps(CHAT[:3]), "x.json"))
    assert shorter.source_id == longer.source_id and longer.records[: len(shorter.records)] == shorter.records


def test_chat_errors() -> None:
    """Non-object messages and invalid JSON raise InvalidInput naming the file."""
    with pytest.raises(InvalidInput, match="message 1 is not a JSON object"):
        parse(b'[{"role": "user", "content": "a"}, 3]', "c.json", "chat")
    with pytest.raises(InvalidInput, match=r"c\.json: not valid JSON"):
        parse(b'[{"role": "user",', "c.json")
    with pytest.raises(InvalidInput, match="not valid UTF-8"):
        parse(b'[{"role": "user", "content": "\xc3"}]', "c.json")


# -- LoCoMo -----------------------------------------------------------------------------------------------------------

LOCOMO_SAMPLE = {
    "sample_id": "conv-x",
    "qa": [{"question": "q", "answer": "a", "evidence": ["D1:1"], "category": 1}],
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_10": [{"speaker": "Bob", "dia_id": "D10:1", "text": "later"}],
        "session_10_date_time": "9:05 am on 1 January, 2024",
        "session_2": [
            {
                "speaker": "Ann",
                "dia_id": "D2:1",
                "text": "look",
                "img_url": ["http://i/x.jpg"],
                "blip_caption": "a cat",
            },
            {"speaker": "Bob", "dia_id": "D2:2", "text": "nice"},
        ],
        "session_2_date_time": "1:56 pm on 8 May, 2023",
        "session_3": [],
        "session_3_date_time": "2:00 pm on 9 May, 2023",
    },
}


def test_locomo_sessions_and_turns() -> None:
    """One source per non-empty session, in numeric order; one user record per turn with speaker, time, dia_id."""
    sources = parse(orjson.dumps(LOCOMO_SAMPLE), "one.json")
    assert [s.source_id for s in sources] == ["locomo:conv-x:session_2", "locomo:conv-x:session_10"]
    first = sources[0]
    assert (first.title, first.participants, first.format, first.meta["unit"]) == (
        "Ann & Bob, session 2",
        ("Ann", "Bob"),
        "locomo",
        "index",
    )
    assert first.time == locomo_time_us("1:56 pm on 8 May, 2023") == 1_683_554_160_000_000
    look, nice = first.records
    assert (look.role, look.speaker, look.text) == ("user", "Ann", "look [shares an image: a cat]")
    assert look.meta == {"dia_id": "D2:1", "img_url": ("http://i/x.jpg",)}
    assert (nice.position, nice.start, nice.end, nice.meta) == (1, 1, 2, {"dia_id": "D2:2"})
    assert sources[1].records[0].time == 1_704_099_900_000_000  # 2024-01-01 09:05 UTC


def test_locomo_times() -> None:
    """12-hour clock times: 12 am is midnight, 12 pm is noon; unreadable is 0."""
    assert locomo_time_us("12:00 am on 1 January, 2024") == 1_704_067_200_000_000
    assert locomo_time_us("12:30 pm on 1 January, 2024") == 1_704_067_200_000_000 + 12 * 3600_000_000 + 1800_000_000
    assert locomo_time_us("sometime") == 0


def test_locomo_without_sample_id_is_invalid() -> None:
    """A sample must have a sample_id."""
    with pytest.raises(InvalidInput, match="sample_id"):
        parse(orjson.dumps({"conversation": {}}), "x.json", "locomo")


def test_locomo_dev_set(locomo_path: Path) -> None:
    """The LoCoMo development set yields 3,435 turns in the sessions of its 6 samples, each fully annotated."""
    data = locomo_path.read_bytes()
    assert detect(locomo_path.name, data) == "locomo"
    sources = parse(data, locomo_path.name)
    assert sum(len(s.records) for s in sources) == 3435
    assert {s.source_id.split(":")[1] for s in sources} == {
        "conv-26",
        "conv-30",
        "conv-41",
        "conv-42",
        "conv-43",
        "conv-44",
    }
    assert len(sources) == 156
    assert len({s.source_id for s in sources}) == len(sources)
    for s in sources:
        assert s.time > 0 and len(s.participants) == 2
        assert [r.position for r in s.records] == list(range(len(s.records)))
        for r in s.records:
            assert r.speaker in s.participants and r.time == s.time > 0 and r.meta["dia_id"] and r.text
    assert parse(data, locomo_path.name) == sources


# -- text -------------------------------------------------------------------------------------------------------------

NOTES = """# Project

First paragraph
continues here.

## Setup
Install it:

```sh
make install

# not a heading
```

Last words.
"""


def test_text_paragraphs_sections_and_fences() -> None:
    """Paragraphs are records; headings name the section; a fenced block stays whole; offsets are verbatim."""
    data = NOTES.encode()
    source = only(parse(data, "README.md"))
    assert (source.source_id, source.format, source.title, source.meta["unit"]) == (
        "notes:README.md",
        "text",
        "README.md",
        "byte",
    )
    rows = [(r.position, r.text, dict(r.meta)) for r in source.records]
    assert rows == [
        (0, "First paragraph\ncontinues here.", {"section": "Project"}),
        (1, "Install it:", {"section": "Setup"}),
        (2, "```sh\nmake install\n\n# not a heading\n```", {"section": "Setup"}),
        (3, "Last words.", {"section": "Setup"}),
    ]
    for r in source.records:
        assert (r.role, r.hint, r.speaker) == ("note", "note", "note")
        assert data[r.start : r.end].decode() == r.text


def test_text_without_headings_and_unicode_offsets() -> None:
    """Plain text has no section; byte offsets count UTF-8 bytes."""
    data = "héllo wörld\n\n\n  \nsecond ✓\r\nline\r\n".encode()
    records = only(parse(data, "n.txt")).records
    assert [r.text for r in records] == ["héllo wörld", "second ✓\r\nline"]
    assert all(data[r.start : r.end].decode() == r.text for r in records)
    assert "section" not in records[0].meta


def test_text_unclosed_fence_runs_to_the_end() -> None:
    """A fence never closed keeps the rest of the file in one paragraph."""
    records = only(parse(b"intro\n\n```\na\n\nb\n", "n.md")).records
    assert [r.text for r in records] == ["intro", "```\na\n\nb"]


def test_text_rejects_invalid_utf8_and_binary() -> None:
    """Text must be UTF-8 without NUL bytes."""
    with pytest.raises(InvalidInput, match=r"n\.txt: not valid UTF-8 \(byte 2"):
        parse(b"ab\xffcd", "n.txt")
    with pytest.raises(InvalidInput, match="NUL"):
        parse(b"a\x00b", "n.txt")


# -- detection, registry, limits, determinism -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data", "fmt"),
    [
        ("s.jsonl", b"", "transcript"),
        ("S.JSONL", b"whatever", "transcript"),
        ("notes.md", b"# hi", "text"),
        ("notes.markdown", b"x", "text"),
        ("a.txt", b"[1]", "text"),
        ("c.json", orjson.dumps(CHAT), "chat"),
        ("c.json", b'{"messages": []}', "chat"),
        ("l.json", orjson.dumps(LOCOMO_SAMPLE), "locomo"),
        ("l.json", orjson.dumps([LOCOMO_SAMPLE]), "locomo"),
        ("export", orjson.dumps(CHAT), "chat"),
        ("export.data", orjson.dumps([LOCOMO_SAMPLE]), "locomo"),
        ("session.log", jsonl(cc("user", "x"), cc("assistant", "y")), "transcript"),
        ("one-line", b'{"role": "user", "content": "x"}', "transcript"),
        ("README", b"just some words\n", "text"),
        ("weird.json5", b'{"a": 1}', "text"),
    ],
)
def test_detect(name: str, data: bytes, fmt: str) -> None:
    """Detection goes by extension, then by sniffing the content."""
    assert detect(name, data) == fmt


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("x.json", b'{"a": 1}', "neither a LoCoMo sample"),
        ("x.json", b"{oops", r"x\.json: not valid JSON"),
        ("blob.bin", b"\xff\xfe\x00\x01", "unknown format"),
        ("blob.bin", b"ab\x00cd", "binary"),
    ],
)
def test_detect_unknown(name: str, data: bytes, message: str) -> None:
    """What no format accepts raises InvalidInput saying why."""
    with pytest.raises(InvalidInput, match=message):
        detect(name, data)


def test_registry() -> None:
    """The registry holds exactly the four formats; an unknown format is refused."""
    assert tuple(PARSERS) == FORMATS == ("transcript", "chat", "locomo", "text")
    with pytest.raises(InvalidInput, match="unknown format 'yaml'"):
        parse(b"", "x", "yaml")


def test_explicit_format_overrides_detection() -> None:
    """parse(fmt=...) reads the bytes as that format whatever the name."""
    data = jsonl({"role": "user", "content": "hi"})
    assert only(parse(data, "odd.md", "transcript")).format == "transcript"
    assert only(parse(data, "odd.md")).format == "text"


def test_size_limit() -> None:
    """Data over 256 MiB is refused before it is read."""

    class Huge(bytes):
        def __len__(self) -> int:
            return DATA_BYTES_MAX + 1

    with pytest.raises(InvalidInput, match="over the"):
        parse(Huge(b"x"), "big.txt")
    with pytest.raises(InvalidInput, match="over the"):
        detect("big.txt", Huge(b"x"))


@pytest.mark.parametrize(
    ("name", "data"),
    [
        (
            "s.jsonl",
            jsonl(cc("user", "a"), cc("assistant", [{"type": "tool_use", "id": "1", "name": "Read", "input": {}}])),
        ),
        ("c.json", orjson.dumps(CHAT)),
        ("l.json", orjson.dumps(LOCOMO_SAMPLE)),
        ("n.md", NOTES.encode()),
    ],
)
def test_deterministic(name: str, data: bytes) -> None:
    """The same bytes give equal sources, every time, from a copy of the bytes too."""
    assert parse(data, name) == parse(bytes(bytearray(data)), name) != []


def test_origin_keys_sources_without_an_id_of_their_own() -> None:
    """Two notes of the same name in two folders, or two id-less chats opening alike, are two sources when their
    origins differ; the same origin gives the same id again; a session id or a LoCoMo sample ignores the origin."""
    note = b"# Plan\n\nShip the cache layer on Friday.\n"
    a = parse(note, "todo.md", origin="/home/ann/a/todo.md")[0].source_id
    b = parse(note, "todo.md", origin="/home/ann/b/todo.md")[0].source_id
    assert a != b and a.startswith("notes:") and a == parse(note, "todo.md", origin="/home/ann/a/todo.md")[0].source_id
    chat = b'[{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Plan a trip."}]'
    c1 = parse(chat, "c.json", origin="/x/c.json")[0].source_id
    c2 = parse(chat, "c.json", origin="/y/c.json")[0].source_id
    assert c1 != c2 and c1.startswith("chat:")
    with_id = b'{"id": "conv-7", "messages": [{"role": "user", "content": "Plan a trip."}]}'
    assert parse(with_id, "c.json", origin="/x/c.json")[0].source_id == "chat:conv-7"
    line = b'{"type": "user", "sessionId": "s-1", "message": {"role": "user", "content": "Fix the test."}}\n'
    assert parse(line, "s.jsonl", origin="/x/s.jsonl")[0].source_id == "transcript:s-1"
