"""One parser registry for what can be ingested: agent transcripts, chat logs, LoCoMo conversations, notes. Pure core.

Every parser takes the file's bytes and its name (the basename: used for detection, titles and the ``text`` format's
source id, never opened) and returns one :class:`~node.records.Source` per session that has at least one record. It
is deterministic (the same bytes give equal sources), reads no clock and does no I/O. Malformed input raises
:class:`~policy.errors.InvalidInput` naming the file and the line or position.

Positions are 0-based and consecutive within each source, counting only the records emitted (empty ones are
skipped), and stable under appends: records are only ever added at the end. ``Source.meta["unit"]`` says what
``start``/``end`` mean: ``"byte"``, offsets into the given bytes (``data[start:end]`` is the verbatim line or
paragraph the record came from); ``"index"``, the index ``i`` of the message or turn in the JSON document (``start =
i``, ``end = i + 1``). Several records can share one span (a message with text and tool calls).

Formats (:data:`FORMATS`)

``transcript`` (JSONL)
    One JSON object per line, either ``{"role", "content", "timestamp"}`` or a coding-agent session log line
    (Claude Code: ``{"type", "message": {"role", "content"}, "timestamp", "sessionId", "uuid"}``). ``content`` is a
    string or a list of blocks: ``text`` → a message; ``tool_use`` → a tool call (a ``file_op`` when it reads, writes
    or edits a file); ``tool_result`` → a ``tool`` record (``error`` when ``is_error``); ``thinking``, images and
    unknown blocks are skipped. Lines without a message (summaries, snapshots, system meta) are skipped. Records are
    grouped by ``sessionId`` (one source per session, in order of first appearance; a line without one joins the
    session of the line before it), and the source id is ``transcript:<sessionId>``, or, when no line has carried one
    yet, ``transcript:<16 hex digits of BLAKE2b of the first non-empty line>`` (stable when the file is moved or grows).
    A malformed line raises, naming its line number, except an unterminated last line: that is a write in progress,
    ignored until it is complete.
``chat`` (``.json``)
    A list of chat-completion messages, or an object with a ``messages`` list (OpenAI shape: ``content`` a string,
    ``None`` or a list of parts; ``tool_calls``; ``tool`` messages with ``tool_call_id``). Source id
    ``chat:<id>`` when the object has an ``id``, else ``chat:<16 hex digits of BLAKE2b of the first message as canonical
    JSON>``.
``locomo`` (``.json``)
    A LoCoMo sample or a list of them: one source ``locomo:<sample_id>:session_<N>`` per non-empty session, one
    ``user`` record per turn (the speaker's name as ``speaker``, an image's caption appended to the text), all at the
    session's time (``"1:56 pm on 8 May, 2023"``, read as UTC). The questions are ignored.
``text`` (``.md``, ``.markdown``, ``.txt``, anything else that is UTF-8 text)
    One ``note`` record per paragraph (blank lines separate paragraphs; a fenced code block stays whole). A Markdown
    ATX heading (``# …``) is not a record: it names the section of the paragraphs after it (``meta["section"]``).
    Source id ``notes:<name>``.

Tool calls render compactly (``Bash: ls -la``, ``Edit src/app.py``, ``Grep TODO in src``; other tools as their main
argument or their arguments as JSON, at most :data:`TOOL_TEXT_CHARS_MAX` characters) with ``meta`` ``tool`` and
``call_id``, plus ``path`` and ``op`` (``read``, ``write``, ``edit``, ``search``, ``list`` or ``access``) for file
operations. Tool results carry ``call_id`` and, when the call was seen earlier in the same source, ``tool``.

Timestamps (ISO-8601 strings with ``Z``, an offset or none (UTC), or epoch seconds, milliseconds, microseconds or
nanoseconds as numbers, told apart by magnitude) become microseconds since the epoch; a missing, unreadable or
pre-1970 one is 0. One beyond :data:`TIME_US_MAX` (the year 2255: larger times cannot travel exactly as JSON numbers)
is refused, naming the file, the line (or message, or session) and the field.

An unterminated last line of a transcript that is not yet a JSON object is left out (a write in progress); the CLI
reports it (:func:`unterminated_last_line`) rather than dropping it silently.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from gaml.node.core.text.records import Record, Source
from gaml.policy.errors import InvalidInput

FORMATS: Final = ("transcript", "chat", "locomo", "text")
DATA_BYTES_MAX: Final = 256 * 1024 * 1024
TOOL_TEXT_CHARS_MAX: Final = 2000
ID_HASH_BYTES: Final = 8  # 16 hex digits
TIME_US_MAX: Final = (1 << 53) - 1  # microseconds: the year 2255

_JSONL_EXTENSIONS: Final = (".jsonl", ".ndjson")
_TEXT_EXTENSIONS: Final = (".md", ".markdown", ".txt")
_BOM: Final = b"\xef\xbb\xbf"
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_ONE_US: Final = dt.timedelta(microseconds=1)

Parser = Callable[[bytes, str], list[Source]]


# -- shared helpers ---------------------------------------------------------------------------------------------------


def _check_size(data: bytes, name: str) -> None:
    if len(data) > DATA_BYTES_MAX:
        raise InvalidInput(f"{name}: {len(data)} bytes is over the {DATA_BYTES_MAX}-byte limit; split the file")


def _extension(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    dot = base.rfind(".")
    return base[dot:].lower() if dot > 0 else ""


def _short_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=ID_HASH_BYTES).hexdigest()


def _decode(data: bytes, name: str, where: str = "") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidInput(f"{name}{where}: not valid UTF-8 (byte {e.start}: {e.reason})") from None


def _load_json(data: bytes, name: str) -> Any:
    body = data[len(_BOM) :] if data.startswith(_BOM) else data
    _decode(body, name)  # a precise message for bad UTF-8, which orjson reports vaguely
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise InvalidInput(f"{name}: not valid JSON ({e})") from None


def _str(value: Any) -> str:
    """``value`` when it is a string, else ``""``."""
    return value if isinstance(value, str) else ""


def _text_of(value: Any) -> str:
    """The text of a content value: a string, or the text parts of a list of blocks/parts joined by newlines."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for block in value:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    return ""


def _checked_time(us: int, value: Any, where: str) -> int:
    """``us``, or :class:`InvalidInput` naming ``where`` when it is beyond :data:`TIME_US_MAX`."""
    if us > TIME_US_MAX:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:39] + "…"
        raise InvalidInput(
            f"{where}: the time {shown} is beyond the latest GAML keeps (2**53 - 1 microseconds, the year 2255)"
        )
    return us


def unterminated_last_line(data: bytes) -> int | None:
    """The number of the last line of a transcript when it is unterminated and not yet a JSON object (a write in
    progress, which :func:`parse_transcript` leaves out until it is complete), else None."""
    if not data or data.endswith(b"\n"):
        return None
    start = data.rfind(b"\n") + 1
    raw = data[start:].removesuffix(b"\r")
    if start == 0 and raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    if not raw.strip():
        return None
    try:
        if isinstance(orjson.loads(raw), dict):
            return None
    except orjson.JSONDecodeError:
        pass
    return data.count(b"\n", 0, start) + 1


def timestamp_us(value: Any) -> int:
    """Microseconds since the epoch (UTC) of an ISO-8601 string or an epoch number; 0 when absent or unreadable."""
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"-?\d+(\.\d+)?", s):
            return timestamp_us(float(s) if "." in s else int(s))
        try:
            t = dt.datetime.fromisoformat(s)
        except ValueError:
            return 0
        if t.tzinfo is None:
            t = t.replace(tzinfo=dt.UTC)
        return max(0, (t - _EPOCH) // _ONE_US)
    if isinstance(value, int | float):
        if value != value or value <= 0 or value in (float("inf"), float("-inf")):
            return 0
        magnitude = abs(value)
        if magnitude < 1e11:  # seconds (until the year 5138)
            scale = 1_000_000
        elif magnitude < 1e14:
            scale = 1_000
        elif magnitude < 1e17:
            scale = 1
        else:
            return int(value) // 1_000 if isinstance(value, int) else round(value / 1_000)
        return value * scale if isinstance(value, int) else round(value * scale)
    return 0


# -- tool calls -------------------------------------------------------------------------------------------------------

_FILE_OPS: Final[Mapping[str, str]] = {
    "read": "read",
    "read_file": "read",
    "view": "read",
    "notebookread": "read",
    "cat": "read",
    "write": "write",
    "write_file": "write",
    "create_file": "write",
    "edit": "edit",
    "multiedit": "edit",
    "notebookedit": "edit",
    "edit_file": "edit",
    "str_replace": "edit",
    "apply_patch": "edit",
    "grep": "search",
    "glob": "search",
    "search": "search",
    "ls": "list",
    "list_dir": "list",
    "list_directory": "list",
}
# Tools whose `command` argument says what they do to the file (str_replace_based_edit_tool and its relatives).
_COMMAND_OPS: Final[Mapping[str, str]] = {
    "view": "read",
    "create": "write",
    "str_replace": "edit",
    "insert": "edit",
    "undo_edit": "edit",
}
_MAIN_ARGUMENTS: Final = ("command", "query", "url", "pattern", "prompt", "description")


def _clip(text: str) -> str:
    return text if len(text) <= TOOL_TEXT_CHARS_MAX else text[: TOOL_TEXT_CHARS_MAX - 1] + "…"


def _tool_call(name: str, arguments: Any, call_id: str) -> tuple[str, str, dict[str, Any]]:
    """The (text, hint, meta) of a tool call."""
    args: dict[str, Any] = arguments if isinstance(arguments, dict) else {}
    meta: dict[str, Any] = {"tool": name, "call_id": call_id}
    path = next((args[k] for k in ("file_path", "path", "notebook_path") if isinstance(args.get(k), str)), None)
    lowered = name.lower()
    command = args.get("command") if isinstance(args.get("command"), str) else None
    if lowered in _FILE_OPS or path is not None:
        op = _FILE_OPS.get(lowered)
        if command is not None and command in _COMMAND_OPS and path is not None:
            op = _COMMAND_OPS[command]
        meta["op"] = op or "access"
        if path is not None:
            meta["path"] = path
        pieces = [name]
        if command is not None and path is not None:
            pieces.append(command)
        if isinstance(args.get("pattern"), str):
            pieces.append(args["pattern"])
            if path is not None:
                pieces.append("in")
        if path is not None:
            pieces.append(path)
        return _clip(" ".join(pieces)), "file_op", meta
    main = next((args[k] for k in _MAIN_ARGUMENTS if isinstance(args.get(k), str)), None)
    if main is not None:
        return _clip(f"{name}: {main}"), "tool_call", meta
    if isinstance(arguments, str):
        return _clip(f"{name}: {arguments}" if arguments else name), "tool_call", meta
    if not args:
        return name, "tool_call", meta
    rendered = orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()
    return _clip(f"{name} {rendered}"), "tool_call", meta


def _looks_like_error(text: str) -> bool:
    return text.lstrip().lower().startswith("error") or "Traceback (most recent call last)" in text


# -- building sources -------------------------------------------------------------------------------------------------


class _SourceBuilder:
    """Collects one source's records, numbering them and remembering its tool calls."""

    def __init__(self, source_id: str) -> None:
        self.source_id = source_id
        self.records: list[Record] = []
        self.tools: dict[str, str] = {}  # call id -> tool name
        self.time = 0
        self.meta: dict[str, Any] = {}

    def add(
        self, role: str, text: str, start: int, end: int, time: int, hint: str, meta: Mapping[str, Any], speaker: str
    ) -> None:
        if not text.strip():
            return
        if hint in ("tool_call", "file_op") and meta.get("call_id"):
            self.tools[meta["call_id"]] = meta["tool"]
        self.records.append(Record(len(self.records), role, text, start, end, speaker, time, hint, dict(meta)))
        if self.time == 0:
            self.time = time

    def add_content(self, role: str, content: Any, start: int, end: int, time: int, meta: Mapping[str, Any]) -> None:
        """Records for a message's content: a string, or a list of text / tool_use / tool_result blocks."""
        if isinstance(content, str):
            if role == "tool":
                hint = "error" if meta.get("is_error") or _looks_like_error(content) else "tool_result"
                self.add_result(content, start, end, time, hint, meta)
            else:
                self.add(role, content, start, end, time, "message", meta, role)
            return
        if not isinstance(content, list):
            return
        for block in content:
            if isinstance(block, str):
                self.add_content(role, block, start, end, time, meta)
                continue
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind in ("text", "input_text", "output_text") and isinstance(block.get("text"), str):
                self.add_content(role, block["text"], start, end, time, meta)
            elif kind in ("tool_use", "server_tool_use") and isinstance(block.get("name"), str):
                call_id = _str(block.get("id"))
                text, hint, call_meta = _tool_call(block["name"], block.get("input"), call_id)
                self.add("assistant", text, start, end, time, hint, {**meta, **call_meta}, "assistant")
            elif kind == "tool_result":
                call_id = _str(block.get("tool_use_id"))
                hint = "error" if block.get("is_error") is True else "tool_result"
                self.add_result(_text_of(block.get("content")), start, end, time, hint, {**meta, "call_id": call_id})
            # thinking, redacted_thinking, image, document and unknown blocks carry nothing to remember verbatim

    def add_result(self, text: str, start: int, end: int, time: int, hint: str, meta: Mapping[str, Any]) -> None:
        result_meta = {k: v for k, v in meta.items() if k != "is_error"}
        call_id = result_meta.get("call_id")
        if isinstance(call_id, str) and call_id in self.tools and "tool" not in result_meta:
            result_meta["tool"] = self.tools[call_id]
        self.add("tool", text, start, end, time, hint, result_meta, "tool")

    def build(self, fmt: str, title: str, unit: str, participants: tuple[str, ...] = ()) -> Source:
        return Source(
            self.source_id,
            fmt,
            tuple(self.records),
            title=title,
            time=self.time,
            participants=participants,
            meta={"unit": unit, **self.meta},
        )


_ROLE_ALIASES: Final[Mapping[str, str]] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
    "ipython": "tool",
    "system": "system",
    "developer": "system",
}


# -- transcript (JSONL) -----------------------------------------------------------------------------------------------


def parse_transcript(data: bytes, name: str) -> list[Source]:
    """Sources of a JSONL transcript: simple role/content lines or a coding-agent session log."""
    _check_size(data, name)
    builders: dict[str, _SourceBuilder] = {}
    current: _SourceBuilder | None = None
    fallback_id = ""
    pos = 0
    line_number = 0
    while pos < len(data):
        line_number += 1
        newline = data.find(b"\n", pos)
        terminated = newline != -1
        line_end = newline if terminated else len(data)
        start, end = pos, line_end
        pos = line_end + 1
        if end > start and data[end - 1 : end] == b"\r":
            end -= 1
        if line_number == 1 and data.startswith(_BOM):
            start += len(_BOM)
        raw = data[start:end]
        if not raw.strip():
            continue
        if not fallback_id:
            fallback_id = "transcript:" + _short_hash(raw.strip())
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            if not terminated:
                break  # a write in progress: the next read sees the whole line
            _decode(raw, name, f": line {line_number}")
            raise InvalidInput(f"{name}: line {line_number}: not valid JSON ({e})") from None
        if not isinstance(obj, dict):
            if not terminated:
                break
            raise InvalidInput(f"{name}: line {line_number}: expected a JSON object, got {type(obj).__name__}")
        session = obj.get("sessionId", obj.get("session_id"))
        if isinstance(session, str | int) and not isinstance(session, bool) and str(session):
            source_id = f"transcript:{session}"
            if source_id not in builders:
                builders[source_id] = _SourceBuilder(source_id)
                builders[source_id].meta["session_id"] = str(session)
            current = builders[source_id]
        elif current is None:
            current = builders.setdefault(fallback_id, _SourceBuilder(fallback_id))
        _transcript_line(current, obj, start, end, f"{name}: line {line_number}")
        if isinstance(obj.get("cwd"), str) and "cwd" not in current.meta:
            current.meta["cwd"] = obj["cwd"]
    return [b.build("transcript", name, "byte") for b in builders.values() if b.records]


def _transcript_line(builder: _SourceBuilder, obj: dict[str, Any], start: int, end: int, where: str) -> None:
    message = obj.get("message")
    if isinstance(message, dict):
        role_value = message.get("role", obj.get("type"))
        content = message.get("content")
    elif "role" in obj:
        role_value = obj["role"]
        content = obj.get("content")
    else:
        return  # summaries, snapshots, system meta: nothing said
    role = _ROLE_ALIASES.get(role_value) if isinstance(role_value, str) else None
    if role is None:
        return
    meta: dict[str, Any] = {}
    if isinstance(obj.get("uuid"), str):
        meta["uuid"] = obj["uuid"]
    source = message if isinstance(message, dict) else obj
    if role == "tool":
        call_id = source.get("tool_call_id", source.get("tool_use_id"))
        if isinstance(call_id, str):
            meta["call_id"] = call_id
        if isinstance(source.get("name"), str):
            meta["tool"] = source["name"]
        if source.get("is_error") is True:
            meta["is_error"] = True
    field = next((k for k in ("timestamp", "time", "created_at") if k in obj), "timestamp")
    time = _checked_time(timestamp_us(obj.get(field)), obj.get(field), f"{where}: {field!r}")
    builder.add_content(role, content, start, end, time, meta)
    for call in _calls_of(source):
        text, hint, call_meta = call
        builder.add("assistant", text, start, end, time, hint, {**meta, **call_meta}, "assistant")


def _calls_of(message: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """The OpenAI-style tool calls of a message (``tool_calls``, or the legacy ``function_call``)."""
    calls: list[tuple[str, str, dict[str, Any]]] = []
    raw_calls = message.get("tool_calls")
    items = list(raw_calls) if isinstance(raw_calls, list) else []
    if isinstance(message.get("function_call"), dict):
        items.append({"function": message["function_call"]})
    for item in items:
        if not isinstance(item, dict):
            continue
        function = item.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        arguments: Any = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = orjson.loads(arguments) if arguments.strip() else {}
            except orjson.JSONDecodeError:
                pass  # rendered as the raw string
        call_id = _str(item.get("id"))
        calls.append(_tool_call(function["name"], arguments, call_id))
    return calls


# -- chat (a JSON list of chat-completion messages) -------------------------------------------------------------------


def parse_chat(data: bytes, name: str) -> list[Source]:
    """The source of a chat-completion message list (or an object with a ``messages`` list)."""
    _check_size(data, name)
    doc = _load_json(data, name)
    container: dict[str, Any] = {}
    if isinstance(doc, dict):
        if not isinstance(doc.get("messages"), list):
            raise InvalidInput(f"{name}: a chat object needs a 'messages' list")
        container, messages = doc, doc["messages"]
    elif isinstance(doc, list):
        messages = doc
    else:
        raise InvalidInput(f"{name}: a chat log is a JSON list of messages or an object with a 'messages' list")
    if not messages:
        return []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidInput(f"{name}: message {i} is not a JSON object")
    doc_id = container.get("id")
    own_id = isinstance(doc_id, str | int) and not isinstance(doc_id, bool) and bool(str(doc_id))
    if own_id:
        source_id = f"chat:{doc_id}"
    else:
        source_id = "chat:" + _short_hash(orjson.dumps(messages[0], option=orjson.OPT_SORT_KEYS))
    builder = _SourceBuilder(source_id)
    if not own_id:
        builder.meta["id_from"] = "opening"  # parse(origin=…) keys it by where the file lies as well
    field = "created" if "created" in container else "timestamp"
    source_time = _checked_time(timestamp_us(container.get(field)), container.get(field), f"{name}: {field!r}")
    for i, message in enumerate(messages):
        role_value = message.get("role")
        role = _ROLE_ALIASES.get(role_value) if isinstance(role_value, str) else None
        if role is None:
            continue
        field = "timestamp" if "timestamp" in message else "created_at"
        time = (
            _checked_time(timestamp_us(message.get(field)), message.get(field), f"{name}: message {i}: {field!r}")
            or source_time
        )
        meta: dict[str, Any] = {}
        if role == "tool":
            call_id = message.get("tool_call_id")
            meta["call_id"] = _str(call_id)
            if isinstance(message.get("name"), str):
                meta["tool"] = message["name"]
            content: Any = _text_of(message.get("content"))
        else:
            content = message.get("content")
            if isinstance(content, list):  # OpenAI parts: text parts are records, images and audio are skipped
                content = [p for p in content if isinstance(p, dict) and p.get("type") in ("text", "refusal")]
                content = [{"type": "text", "text": p.get("text", p.get("refusal"))} for p in content]
        builder.add_content(role, content, i, i + 1, time, meta)
        if isinstance(message.get("refusal"), str):
            builder.add(role, message["refusal"], i, i + 1, time, "message", meta, role)
        for text, hint, call_meta in _calls_of(message):
            builder.add("assistant", text, i, i + 1, time, hint, call_meta, "assistant")
    if builder.time == 0:
        builder.time = source_time
    title = _str(container.get("title")) or name
    return [builder.build("chat", title, "index")] if builder.records else []


# -- LoCoMo -----------------------------------------------------------------------------------------------------------

_MONTHS: Final[Mapping[str, int]] = {
    m: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for m in names
}
_LOCOMO_TIME_RE: Final = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{4})\s*", re.IGNORECASE
)
_SESSION_RE: Final = re.compile(r"session_(\d+)")


def locomo_time_us(value: Any) -> int:
    """Microseconds (UTC) of a LoCoMo session time such as ``"1:56 pm on 8 May, 2023"``; 0 when unreadable."""
    if not isinstance(value, str):
        return 0
    m = _LOCOMO_TIME_RE.fullmatch(value)
    if m is None:
        return timestamp_us(value)
    hour, minute, half, day, month_name, year = m.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None or not 1 <= int(hour) <= 12:
        return 0
    hour_24 = int(hour) % 12 + (12 if half.lower() == "p" else 0)
    try:
        t = dt.datetime(int(year), month, int(day), hour_24, int(minute), tzinfo=dt.UTC)
    except ValueError:
        return 0
    return max(0, (t - _EPOCH) // _ONE_US)


def parse_locomo(data: bytes, name: str) -> list[Source]:
    """One source per session of each LoCoMo sample; the QA part is ignored."""
    _check_size(data, name)
    doc = _load_json(data, name)
    samples = doc if isinstance(doc, list) else [doc]
    sources: list[Source] = []
    for k, sample in enumerate(samples):
        if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
            raise InvalidInput(f"{name}: sample {k} has no 'conversation' object")
        sample_id = sample.get("sample_id")
        if not isinstance(sample_id, str | int) or isinstance(sample_id, bool) or not str(sample_id):
            raise InvalidInput(f"{name}: sample {k} has no 'sample_id'")
        conversation = sample["conversation"]
        speaker_a = str(conversation.get("speaker_a", ""))
        speaker_b = str(conversation.get("speaker_b", ""))
        numbers = sorted(
            int(m.group(1)) for key in conversation if isinstance(key, str) and (m := _SESSION_RE.fullmatch(key))
        )
        for n in numbers:
            turns = conversation[f"session_{n}"]
            if not isinstance(turns, list) or not turns:
                continue
            key = f"session_{n}_date_time"
            time = _checked_time(locomo_time_us(conversation.get(key)), conversation.get(key), f"{name}: {key!r}")
            builder = _SourceBuilder(f"locomo:{sample_id}:session_{n}")
            for i, turn in enumerate(turns):
                if not isinstance(turn, dict):
                    raise InvalidInput(f"{name}: sample {sample_id}, session {n}, turn {i} is not a JSON object")
                text = _str(turn.get("text"))
                caption = turn.get("blip_caption")
                if isinstance(caption, str) and caption:
                    text = f"{text} [shares an image: {caption}]" if text else f"[shares an image: {caption}]"
                meta: dict[str, Any] = {"dia_id": str(turn.get("dia_id", ""))}
                img_url = turn.get("img_url")
                if isinstance(img_url, list):
                    meta["img_url"] = tuple(str(u) for u in img_url)
                elif isinstance(img_url, str):
                    meta["img_url"] = (img_url,)
                speaker = str(turn.get("speaker", ""))
                builder.add("user", text, i, i + 1, time, "message", meta, speaker)
            builder.time = time
            builder.meta.update({"sample_id": str(sample_id), "session": n})
            if builder.records:
                title = f"{speaker_a} & {speaker_b}, session {n}"
                sources.append(builder.build("locomo", title, "index", (speaker_a, speaker_b)))
    return sources


# -- text (paragraphs of Markdown or plain text) ----------------------------------------------------------------------

_FENCE_RE: Final = re.compile(r" {0,3}(`{3,}|~{3,})")
_HEADING_RE: Final = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")


def parse_text(data: bytes, name: str) -> list[Source]:
    """The paragraphs of a note as records, each with the section (the last Markdown heading) it falls under."""
    _check_size(data, name)
    _decode(data, name)
    nul = data.find(b"\x00")
    if nul != -1:
        raise InvalidInput(f"{name}: holds a NUL byte (at byte {nul}): binary, not text")
    builder = _SourceBuilder("notes:" + name)
    builder.meta["id_from"] = "name"
    section: str | None = None
    para_start = para_end = -1  # byte span of the paragraph being gathered
    fence: str | None = None  # the opening fence while inside a fenced code block
    pos = len(_BOM) if data.startswith(_BOM) else 0

    def flush() -> None:
        nonlocal para_start, para_end
        if para_start >= 0:
            meta = {"section": section} if section is not None else {}
            text = data[para_start:para_end].decode("utf-8")
            builder.add("note", text, para_start, para_end, 0, "note", meta, "note")
        para_start = para_end = -1

    while pos < len(data):
        newline = data.find(b"\n", pos)
        line_end = newline if newline != -1 else len(data)
        start, end = pos, line_end
        pos = line_end + 1
        if end > start and data[end - 1 : end] == b"\r":
            end -= 1
        line = data[start:end].decode("utf-8")
        if fence is not None:
            para_end = end
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
            continue
        fence_match = _FENCE_RE.match(line)
        if fence_match is not None and not (fence_match.group(1)[0] == "`" and "`" in line[fence_match.end() :]):
            fence = fence_match.group(1)
            if para_start < 0:
                para_start = start
            para_end = end
            continue
        if not line.strip():
            flush()
            continue
        heading = _HEADING_RE.fullmatch(line)
        if heading is not None:
            flush()
            section = (heading.group(2) or "").strip()
            continue
        if para_start < 0:
            para_start = start
        para_end = end
    flush()
    return [builder.build("text", name, "byte")] if builder.records else []


# -- the registry and detection ---------------------------------------------------------------------------------------

PARSERS: Final[dict[str, Parser]] = {
    "transcript": parse_transcript,
    "chat": parse_chat,
    "locomo": parse_locomo,
    "text": parse_text,
}
assert tuple(PARSERS) == FORMATS


def _json_shape(doc: Any) -> str | None:
    """``locomo`` or ``chat`` when a parsed JSON document has that shape, else ``None``."""
    if isinstance(doc, dict):
        if "conversation" in doc:
            return "locomo"
        if isinstance(doc.get("messages"), list):
            return "chat"
        return None
    if isinstance(doc, list):
        if not doc:
            return "chat"
        first = doc[0]
        if isinstance(first, dict) and "conversation" in first:
            return "locomo"
        if all(isinstance(m, dict) and "role" in m for m in doc):
            return "chat"
    return None


def _looks_like_jsonl(data: bytes) -> bool:
    for raw in data.split(b"\n", 64)[:64]:
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return False
        return isinstance(obj, dict) and any(k in obj for k in ("role", "type", "message"))
    return False


def detect(name: str, data: bytes) -> str:
    """The format of a file, by its extension and then by sniffing its content; :class:`InvalidInput` if unknown."""
    _check_size(data, name)
    extension = _extension(name)
    if extension in _JSONL_EXTENSIONS:
        return "transcript"
    if extension in _TEXT_EXTENSIONS:
        return "text"
    if extension == ".json":
        shape = _json_shape(_load_json(data, name))
        if shape is None:
            raise InvalidInput(
                f"{name}: JSON that is neither a LoCoMo sample (with 'conversation') nor a chat log "
                "(a list of messages with 'role', or an object with 'messages')"
            )
        return shape
    body = data[len(_BOM) :] if data.startswith(_BOM) else data
    try:
        shape = _json_shape(orjson.loads(body))
    except orjson.JSONDecodeError:
        shape = None
    if shape is not None:
        return shape
    if _looks_like_jsonl(body):
        return "transcript"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{name}: an unknown format (not JSON, JSONL or UTF-8 text)") from None
    if b"\x00" in data:
        raise InvalidInput(f"{name}: an unknown, binary format (it holds NUL bytes)")
    return "text"


def parse(data: bytes, name: str, fmt: str | None = None, *, origin: str = "") -> list[Source]:
    """The sources in ``data``, read as ``fmt`` (one of :data:`FORMATS`), or as the format :func:`detect` finds.

    ``origin`` names where the file lies (the CLI passes its absolute path). Sources that carry no id of their own —
    a note (``notes:<name>``) or a chat list without an ``id`` (``chat:<hash of its first message>``) — get a hash of
    it appended (``notes:todo.md@3f2a…``), so two ``todo.md`` in two folders, or two chats opening with the same
    system prompt, stay two sources. Sources with their own id (a session id, a LoCoMo sample) ignore it and survive
    a move.
    """
    _check_size(data, name)
    chosen = detect(name, data) if fmt is None else fmt
    parser = PARSERS.get(chosen)
    if parser is None:
        raise InvalidInput(f"unknown format {chosen!r}: use one of {', '.join(FORMATS)}")
    sources = parser(data, name)
    if not origin:
        return sources
    out = []
    for s in sources:
        if s.meta.get("id_from") in ("name", "opening"):  # kept readable: notes:todo.md@3f2a…, chat:<hash>@…
            s = dataclasses.replace(
                s, source_id=f"{s.source_id}@{_short_hash((origin + chr(10) + s.source_id).encode())}"
            )
        out.append(s)
    return out


__all__ = [
    "DATA_BYTES_MAX",
    "FORMATS",
    "PARSERS",
    "TOOL_TEXT_CHARS_MAX",
    "Parser",
    "detect",
    "locomo_time_us",
    "parse",
    "parse_chat",
    "parse_locomo",
    "parse_text",
    "parse_transcript",
    "timestamp_us",
    "unterminated_last_line",
]
