"""Relative time, resolved against the moment a text was said. Pure core.

A turn of conversation says "yesterday", "last Friday" or "two weeks ago"; what it means depends on when the turn was
said, which a reader of the memory a year later no longer knows. :func:`resolve` finds those phrases in a text and
says what each one means at the time ``at`` (microseconds, UTC) the text was said: ingestion stores the result with
the item (``payload["when"]``), and hydration shows it next to the phrase (:func:`annotate`) when the goal is about
time.

What is resolved (case-insensitive, whole words):

- ``today``, ``tonight``, ``this morning`` / ``afternoon`` / ``evening`` → the day (``8 May 2023``);
  ``yesterday``, ``last night`` → the day before; ``the day before yesterday``; ``tomorrow``;
- ``last week`` / ``this past week`` → ``the week before 8 May 2023``; ``next week`` → ``the week after 8 May
  2023``; the same for ``weekend``;
- ``last`` / ``this past`` / ``next`` + a weekday (``Fri``, ``Tues`` …; not ``sat`` or ``sun``, which are words)
  → ``the Friday before 8 May 2023 (5 May 2023)``; a bare ``on Friday`` only where its sentence says which way (a
  past-tense verb, or a future cue such as ``will``, ``going to``, ``next``), else it is left alone;
- ``last`` / ``this`` / ``next month`` → ``April 2023``; ``last`` / ``this`` / ``next year`` → ``2022``;
- ``N days / weeks / months / years ago`` (N in digits, ``a``, ``an``, ``a couple of`` or a word up to twelve) →
  the day, ``the week of …``, the month, the year; ``for N years`` → ``since 2020``.

Nothing is guessed beyond that: a phrase whose meaning depends on more than the date (``recently``, ``the other day``)
stays as it was said.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Final

MONTHS: Final = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS: Final = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_DAY_NAMES: Final = {
    **{d.lower(): n for n, d in enumerate(WEEKDAYS)},
    # "sat" and "sun" are words too ("when I last sat down"): only the other days go by their short names.
    **{
        a: n
        for n, names in enumerate(("mon", "tue tues", "wed", "thu thur thurs", "fri", "", ""))
        for a in names.split()
    },
}
_NUMBERS: Final = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a couple": 2,
    "couple of": 2,
}
MAX_TIME_US: Final = 253_402_300_799_000_000 - 366 * 86_400 * 10**6  # a year before 9999-12-31: dates stay valid
MAX_COUNT: Final = 100  # "300 years ago" is history, not memory
MAX_RESOLVED: Final = 16  # phrases resolved per text
MAX_MATCHES: Final = 64  # phrases looked at per text (resolved or not): a crafted text cannot make ingest slow
SENTENCE_WINDOW: Final = 400  # characters on each side of a bare weekday searched for its sentence

_DAY: Final = r"(?P<day>" + "|".join(sorted(_DAY_NAMES, key=len, reverse=True)) + r")\.?"
_COUNT: Final = (
    r"(?P<n>\d{1,3}|a couple of|a couple|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
_PATTERNS: Final = (
    ("day_before_yesterday", r"the day before yesterday"),
    ("today", r"today|tonight|this (?:morning|afternoon|evening)"),
    ("yesterday", r"yesterday|last night"),
    ("tomorrow", r"tomorrow"),
    ("rel_day", r"(?P<dir>last|this past|next|this coming) " + _DAY),
    ("rel_span", r"(?P<dir>last|this past|the past|next) (?P<unit>week|weekend|month|year)"),
    ("this_span", r"this (?P<unit>month|year)"),
    ("ago", _COUNT + r" (?P<unit>day|week|month|year)s? ago"),
    ("span_for", r"for (?:the (?:past|last) )?" + _COUNT + r" (?P<unit>year)s?"),
    ("bare_day", r"on " + _DAY),
)
_INNER: Final = re.compile(r"\(\?P<(\w+)>")


def _alternative(n: int, name: str, body: str) -> str:
    """Pattern ``n`` as a group named ``name``, the groups inside renamed ``group__n`` (a name may not repeat)."""
    inner = _INNER.sub(lambda g: f"(?P<{g.group(1)}__{n}>", body)
    return f"(?P<{name}>\\b(?:{inner})\\b)"


_RE: Final = re.compile(
    "|".join(_alternative(n, name, body) for n, (name, body) in enumerate(_PATTERNS)), re.IGNORECASE
)
_PAST: Final = re.compile(
    r"\b(?:went|got|had|was|were|did|won|made|took|saw|met|ran|came|gave|found|began|bought|brought|caught|"
    r"started|finished|played|visited|watched|tried|moved|attended|celebrated|painted|cooked|baked|walked|talked|"
    r"felt|fell|left|lost|told|thought|wrote|read|heard|sat|spent|taught|threw|wore|flew|drove|ate|swam|sang|"
    r"joined|finished)\b",
    re.IGNORECASE,
)
_FUTURE: Final = re.compile(
    r"\b(?:will|'ll|going to|gonna|plan|planning|can't wait|next|upcoming|coming)\b", re.IGNORECASE
)
_SENTENCE_END: Final = re.compile(r"[.!?]\s")


def spoken(d: date) -> str:
    """A date as people write it (``8 May 2023``), the same in every locale."""
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def _month(d: date, shift: int) -> str:
    k = d.year * 12 + d.month - 1 + shift
    return f"{MONTHS[k % 12]} {k // 12}"


def _count(text: str) -> int | None:
    t = " ".join(text.lower().split())
    n = int(t) if t.isdigit() else _NUMBERS.get(t)
    return n if n is not None and 0 < n <= MAX_COUNT else None


def _group(m: re.Match[str], name: str) -> str | None:
    """The group ``name`` of the alternative that matched (compiled as ``name__N``)."""
    for key, value in m.groupdict().items():
        if value is not None and key.split("__")[0] == name:
            return value
    return None


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence of ``text`` around ``[start, end)``, looked for within :data:`SENTENCE_WINDOW` characters."""
    lo, hi = max(0, start - SENTENCE_WINDOW), min(len(text), end + SENTENCE_WINDOW)
    left = max((m.end() for m in _SENTENCE_END.finditer(text, lo, start)), default=lo)
    right = next((m.start() + 1 for m in _SENTENCE_END.finditer(text, end, hi)), hi)
    return text[left:right]


def _meaning(kind: str, m: re.Match[str], day: date, text: str) -> str | None:
    said = spoken(day)
    if kind == "today":
        return said
    if kind == "yesterday":
        return spoken(day - timedelta(days=1))
    if kind == "day_before_yesterday":
        return spoken(day - timedelta(days=2))
    if kind == "tomorrow":
        return spoken(day + timedelta(days=1))
    if kind in ("rel_day", "bare_day"):
        wanted = _DAY_NAMES[(_group(m, "day") or "").lower()]
        if kind == "rel_day":
            forward = (_group(m, "dir") or "").lower() in ("next", "this coming")
        else:
            sentence = _sentence(text, m.start(), m.end())
            future, past = bool(_FUTURE.search(sentence)), bool(_PAST.search(sentence))
            if future == past:
                return None  # the sentence does not say which way
            forward = future
        if forward:
            target = day + timedelta(days=(wanted - day.weekday() - 1) % 7 + 1)
            return f"the {WEEKDAYS[wanted]} after {said} ({spoken(target)})"
        target = day - timedelta(days=(day.weekday() - wanted - 1) % 7 + 1)
        return f"the {WEEKDAYS[wanted]} before {said} ({spoken(target)})"
    unit = (_group(m, "unit") or "").lower()
    if kind == "rel_span":
        forward = (_group(m, "dir") or "").lower() == "next"
        if unit in ("week", "weekend"):
            return f"the {unit} {'after' if forward else 'before'} {said}"
        if unit == "month":
            return _month(day, 1 if forward else -1)
        return str(day.year + (1 if forward else -1))
    if kind == "this_span":
        return _month(day, 0) if unit == "month" else str(day.year)
    n = _count(_group(m, "n") or "")
    if n is None:
        return None
    if kind == "span_for":
        return f"since {day.year - n}"
    if unit == "day":
        return spoken(day - timedelta(days=n))
    if unit == "week":
        return f"the week of {spoken(day - timedelta(weeks=n))}"
    if unit == "month":
        return _month(day, -n)
    return str(day.year - n)


def resolve(text: str, at: int) -> list[tuple[str, str]]:
    """The relative time phrases of ``text`` said at ``at`` (microseconds since the epoch, UTC), in order, each with
    what it means (``[("yesterday", "7 May 2023")]``); empty when ``at`` is 0 (no time known) or nothing is found."""
    if at <= 0 or at > MAX_TIME_US or not text:
        return []
    day = datetime.fromtimestamp(at / 1e6, tz=UTC).date()
    out: list[tuple[str, str]] = []
    for n, m in enumerate(_RE.finditer(text)):
        kind = m.lastgroup
        if n == MAX_MATCHES:
            break
        if kind is None:  # pragma: no cover - every alternative is a named group
            continue
        meaning = _meaning(kind, m, day, text)
        if meaning is not None:
            out.append((m.group(0), meaning))
            if len(out) == MAX_RESOLVED:
                break
    return out


def annotate(text: str, resolved: Sequence[tuple[str, str]]) -> str:
    """``text`` with each resolved phrase followed by its meaning in brackets (``yesterday [7 May 2023]``), each
    phrase once, in order of appearance."""
    out: list[str] = []
    at = 0
    for phrase, meaning in resolved:
        m = re.compile(r"\b" + re.escape(phrase) + r"\b").search(text, at)
        if m is None:
            continue
        end = m.end()
        out.append(text[at:end] + f" [{meaning}]")
        at = end
    return "".join(out) + text[at:]


@dataclasses.dataclass(frozen=True)
class Period:
    """A calendar month a text names (``in June``, ``October 13, 2023``), with its year and day when named."""

    month: int  # 1-12
    year: int = 0  # 0: any year
    day: int = 0  # 0: any day

    def holds(self, at: int) -> bool:
        """Whether ``at`` (microseconds since the epoch, UTC) falls in the period."""
        if at <= 0 or at > MAX_TIME_US:
            return False
        d = datetime.fromtimestamp(at / 1e6, tz=UTC).date()
        return d.month == self.month and self.year in (0, d.year) and self.day in (0, d.day)

    def covers(self, other: Period | None) -> bool:
        """Whether ``other`` (a period a resolved date names: ``April 2023``, ``5 May 2023``) lies in this period, as
        far as both say: a year or day that one of them leaves open matches any."""
        if other is None or other.month != self.month:
            return False
        same_year = 0 in (self.year, other.year) or self.year == other.year
        return same_year and (0 in (self.day, other.day) or self.day == other.day)


# A month by name (lower-case too, but "May", "March" and "August" only capitalised: they are words too), with a day
# before or after it and a year after it when given: "in June", "October 13, 2023", "13 October 2023", "July 2023".
_WORDS_TOO: Final = ("May", "March", "August")
_PERIOD_RE: Final = re.compile(
    r"(?:\b(?P<day1>[0-3]?\d)(?:st|nd|rd|th)?\s+(?:of\s+)?)?"
    r"\b(?P<month>(?i:" + "|".join(m for m in MONTHS if m not in _WORDS_TOO) + r")|" + "|".join(_WORDS_TOO) + r")\b"
    r"(?:\s+(?P<day2>[0-3]?\d)(?:st|nd|rd|th)?\b)?"
    r"(?:,?\s+(?P<year>(?:19|20)\d\d)\b)?"
)


def named_period(text: str) -> Period | None:
    """The first calendar month ``text`` names, with its day and year when it names them; None when it names none.
    Used by hydration to favour what was said in the month a goal asks about ("camping in June")."""
    m = _PERIOD_RE.search(text[:2000])
    if m is None:
        return None
    month = next(n for n, name in enumerate(MONTHS, 1) if name.lower() == m.group("month").lower())
    day = int(m.group("day1") or m.group("day2") or 0)
    return Period(month, int(m.group("year") or 0), day if 1 <= day <= 31 else 0)


# A goal that asks for a moment, at its start (after a "so", "hey" …): "When did …" (a "when" and then an auxiliary
# verb, or a name and one with no clause after it, so not a clause: "When the build fails, what …"), "What year
# did …", "On which day was …" (not "What date format does …"), "How long ago …", "How many years ago …", "Do you
# remember when …", "Tell me when …". Not "how long" alone (a duration).
_AUX: Final = r"(?:did|does|do|is|was|were|are|am|will|would|has|have|had|can|could|should|shall)"
_ASKS_WHEN_RE: Final = re.compile(
    r"\W*(?:(?:and|so|but|ok|okay|hey|hi|now)\W+)?"
    r"(?:when\s+" + _AUX + r"\b"
    r"|when\s+\w+\s+" + _AUX + r"\b[^,]*$"  # "When Jon has lost his job?", not "When it is late, what …"
    r"|(?:(?:in|on|during|at)\s+)?(?:what|which)\s+(?:year|month|day|date|week|weekend)\s+" + _AUX + r"\b"
    r"|how\s+(?:long|many\s+(?:days|weeks|months|years))\s+ago\b"
    r"|(?:(?:can|could)\s+you\s+)?(?:tell|remind)\s+me\s+when\b"
    r"|do\s+you\s+(?:know|remember|recall)\s+when\b)",
    re.IGNORECASE,
)


def asks_when(goal: str) -> bool:
    """Whether ``goal`` asks *when* something happened (:data:`_ASKS_WHEN_RE`). Used by hydration to favour the turns
    that say when (a relative date that ingestion resolved: "I went to a support group yesterday") over those that
    only mention the same thing."""
    return _ASKS_WHEN_RE.match(goal) is not None


__all__ = ["MONTHS", "WEEKDAYS", "Period", "annotate", "asks_when", "named_period", "resolve", "spoken"]
