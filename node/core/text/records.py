"""What parsers produce and the ingestion pipeline consumes: sources (sessions) made of verbatim records.

A *source* is one transcript session: a LoCoMo session, one agent-session log, one chat-completion list, one note. Its
``source_id`` is stable (it does not depend on where the file lies or when it was read), so that ingesting the same
session again, or watching it grow, addresses the same items. A *record* is one message, tool call, tool result or
paragraph of a source, with its ``position`` (0-based, stable: records are only ever appended) and the byte offsets
of its verbatim text in the file it came from.

Pure data: no I/O here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

ROLES: Final = ("user", "assistant", "tool", "system", "note")
# What a parser saw (a hint; the ingestion rules classify the record's kind from it and its text).
HINTS: Final = ("message", "tool_call", "tool_result", "error", "file_op", "note")


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """One verbatim record of a source."""

    position: int  # 0-based index within its source, stable under appends
    role: str  # one of ROLES
    text: str  # the verbatim text (envelopes not yet stripped)
    start: int = 0  # byte offsets of the record in the file it came from ([start, end))
    end: int = 0
    speaker: str = ""  # who spoke: a name (LoCoMo), else the role
    time: int = 0  # microseconds since the epoch (UTC); 0 when the source gives none
    hint: str = "message"  # one of HINTS
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # e.g. dia_id, tool name, path, call id

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"record role {self.role!r} is not one of {', '.join(ROLES)}")
        if self.hint not in HINTS:
            raise ValueError(f"record hint {self.hint!r} is not one of {', '.join(HINTS)}")
        if self.position < 0 or self.start < 0 or self.end < self.start:
            raise ValueError(f"record {self.position}: bad position or offsets ({self.start}, {self.end})")


@dataclasses.dataclass(frozen=True, slots=True)
class Source:
    """One session: a stable id, its records in order, and what the parser learned about it."""

    source_id: str  # stable: e.g. "locomo:conv-26:session_3", "transcript:<session id>", "notes:<name>"
    format: str  # the parser that read it
    records: tuple[Record, ...]
    title: str = ""  # a human label (file name, "Caroline & Melanie, session 3")
    time: int = 0  # session time (microseconds) when the source gives one
    participants: tuple[str, ...] = ()
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)


__all__ = ["HINTS", "ROLES", "Record", "Source"]
