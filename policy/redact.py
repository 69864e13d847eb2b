"""Deterministic redaction: what of a memory may reach a public model, as a separately governed, redacted packet.

An asset whose inference policy is ``public_with_redaction`` reaches the public swarm only through a *redacted packet*:
a derived asset (:func:`redacted_packet`) whose payload has had e-mail addresses, phone numbers, keys and tokens, IPv4
addresses, card numbers and the asset's named entities replaced by typed placeholders (``[EMAIL]``, ``[PHONE]``,
``[SECRET]``, ``[IP]``, ``[CARD]``, ``[NAME]``). Everything here is pure: no clock, no randomness, no I/O; the same
input always gives the same output, and redacting redacted output changes nothing.

How a text is redacted (:func:`redact_text`):

1. Every detector proposes candidate spans. Placeholders already in the text (``[EMAIL]`` …) are protected: a
   candidate never covers one (it is clipped around it), which is what makes redaction idempotent.
2. Overlapping candidates form a cluster. The **longest** candidate names the cluster's kind (the **earliest**, then
   the detector listed first in :data:`DETECTORS`, on ties), and the cluster's whole extent is replaced, so that no
   fragment of a losing candidate is left behind.
3. Removing a span can expose a match that its neighbour hid (``555-123-4567Bob`` → ``[PHONE]Bob``, where ``Bob`` is
   now a whole word), so the passes repeat until one finds nothing. Each pass removes original text, so this ends.

Findings give spans in the *original* text: ``text[f.start:f.end]`` is exactly what ``f``'s placeholder replaced.

Decisions, each pinned by a test:

* **Phone numbers** need a ``+`` country code, an area code in parentheses, or a national shape: ``555-123-4567``
  (3-3-4 with one separator, optional leading ``1``), ``555-1234`` (dash or dot), or a trunk ``0`` with groups of at
  least two digits (``020 7946 0958``, ``06 12 34 56 78``); 7 to 15 digits in all. A bare run of digits is *not* a phone
  number (it is as often a count, an id or a timestamp), and dates (``2024-01-15``, ``15.01.2024``), times, years and
  version strings are left alone. A number written right after a phone number with one space (``+1 555 123 4567 89``)
  may be read as part of it.
* **Cards**: 13 to 19 digits, whole or in groups split by one kind of separator (space or dash), first digit 2–6 (the
  major networks), passing the Luhn check.
* **High-entropy strings** (:data:`HIGH_ENTROPY_LEN_MIN` or more characters of the base64/base64url alphabet):
  hexadecimal ones (with a digit and a letter) at :data:`HEX_ENTROPY_MIN_BITS` bits of Shannon entropy per character
  or more; others with a digit at :data:`BASE64_ENTROPY_MIN_BITS` or more. Random 32-character hex and base64 score
  about 3.6 and 4.6 (fewer than 2 in 10,000 fall under the thresholds); English identifiers score 3.5–4.3, so long
  ones *with digits* may be redacted too: recall is preferred to precision. Undashed hex (hashes, 32-hex asset ids) is
  indistinguishable from a key and is redacted; canonical dashed UUIDs (``8-4-4-4-12``) are identifiers and are kept.
* **IPv4**: four octets 0–255 (a four-part version string such as ``1.2.3.4`` reads as an address).
* **Assignments** (``password=``, ``passwd:``, ``secret:``, ``api_key=``, ``token=`` and kin, also as a suffix:
  ``db_password=``; quoted or not): the value is redacted, the key kept. An ``Authorization:`` header value and a
  ``Bearer`` token (12+ characters with a digit or punctuation) are secrets.
* **Names** from ``entities``: case-insensitive, whole words (not inside a longer word), longest first, spaces inside a
  name match any whitespace; names are taken literally (regex-escaped).

Not covered: secrets in natural language ("my password is hunter2"), IPv6, names nobody listed.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from gaml.policy.errors import RedactionRefused
from gaml.policy.model import Asset, Creator, InferencePolicy, PrivacyScope, Retention

KINDS: Final = ("email", "phone", "secret", "name", "ip", "card")
PLACEHOLDERS: Final[Mapping[str, str]] = {kind: f"[{kind.upper()}]" for kind in KINDS}
REDACTED_TAG: Final = "redacted"
HIGH_ENTROPY_LEN_MIN: Final = 32
HEX_ENTROPY_MIN_BITS: Final = 3.0  # bits per character (the maximum for hex is 4)
BASE64_ENTROPY_MIN_BITS: Final = 4.0  # bits per character (the maximum for base64 is 6)
PHONE_DIGITS_MIN: Final = 7
PHONE_DIGITS_MAX: Final = 15  # E.164
CARD_DIGITS_MIN: Final = 13
CARD_DIGITS_MAX: Final = 19
_NUMBER_WINDOW_TOKENS_MAX: Final = 8  # digit groups a phone or card number may span (bounds the window search)

_PROTECTED_RE: Final = re.compile(r"\[(?:" + "|".join(k.upper() for k in KINDS) + r")\]")


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """One redacted span: ``kind`` (one of :data:`KINDS`) over ``[start, end)`` of the original text."""

    kind: str
    start: int
    end: int

    @property
    def placeholder(self) -> str:
        return PLACEHOLDERS[self.kind]


@dataclasses.dataclass(frozen=True, slots=True)
class JsonFinding:
    """A finding inside a JSON value: the RFC 6901 pointer of the string (in the *redacted* value), and its span.

    ``in_key`` marks a finding in an object key; ``path`` then points at that member.
    """

    path: str
    kind: str
    start: int
    end: int
    in_key: bool = False


# -- detectors ---------------------------------------------------------------------------------------------------------

Span = tuple[int, int]
Detect = Callable[[str], Iterator[Span]]


def _regex(pattern: str, group: int | None = None) -> Detect:
    """A detector from a regex: each match, or its ``group``, or (None) the first of its groups that took part."""
    rx = re.compile(pattern)

    def detect(text: str) -> Iterator[Span]:
        for m in rx.finditer(text):
            if group is not None:
                s, e = m.span(group)
            else:
                s, e = next((m.span(i) for i in range(1, rx.groups + 1) if m.start(i) >= 0), m.span())
            if e > s:
                yield s, e

    return detect


_PEM_LABEL = r"(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_PEM = rf"-----BEGIN {_PEM_LABEL}[\s\S]*?(?:-----END {_PEM_LABEL}|\Z)"  # an unterminated block runs to the end
_AUTH_HEADER = (
    r"(?i:\b(?:proxy-)?authorization\b)[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?i:bearer|basic|digest|token|bot)[ \t]+)?([^\s\"',;]+)"
)
_BEARER = r"\b[Bb]earer[ \t]+(?=[A-Za-z0-9\-._~+/]*[\d\-._~+/])([A-Za-z0-9\-._~+/]{12,}=*)"
_ASSIGNED_KEY = (
    r"(?:pass(?:word|wd|phrase)|pwd|secret|token|api[_\-]?key|apikey|access[_\-]?key|secret[_\-]?key"
    r"|private[_\-]?key|client[_\-]?secret|session[_\-]?id)"
)
_ASSIGNMENT = (
    r"(?i)(?<![A-Za-z0-9])" + _ASSIGNED_KEY + r"[\"']?[ \t]*[:=][ \t]*"
    r"(?:\"([^\"\n]+)\"|'([^'\n]+)'|([^\s\"'&,;]+))"
)
_URL_USERINFO = r"(?<=://)[^\s/@:]+:[^\s/@]+(?=@)"
_AWS_KEY_ID = r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z0-9]{16}\b"
_GITHUB = r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b"
_SK = r"(?<![\w\-])sk-(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{20,}"
_STRIPE = r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"
_SLACK = r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"
_GOOGLE = r"\bAIza[0-9A-Za-z_\-]{30,}"
_JWT = r"(?<![\w\-])eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"
_EMAIL = r"(?<![\w.%+\-])[\w.%+\-]+@(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,}(?![\w\-])"
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?!\w|\.\d)"

_HIGH_ENTROPY_RE: Final = re.compile(
    rf"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/_\-]{{{HIGH_ENTROPY_LEN_MIN},}}+={{0,2}}(?![A-Za-z0-9+/=_\-])"
)
_HEX_RE: Final = re.compile(r"[0-9a-f]+|[0-9A-F]+")
_UUID_RE: Final = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def shannon_bits(s: str) -> float:
    """Shannon entropy of ``s``'s characters, in bits per character (0 for the empty string)."""
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values()) if n else 0.0


def _high_entropy(text: str) -> Iterator[Span]:
    for m in _HIGH_ENTROPY_RE.finditer(text):
        s = m.group()
        if _UUID_RE.fullmatch(s):
            continue
        body = s.rstrip("=")
        has_digit = any(c.isdigit() for c in body)
        if _HEX_RE.fullmatch(body):
            ok = has_digit and any(c.isalpha() for c in body) and shannon_bits(body) >= HEX_ENTROPY_MIN_BITS
        else:
            ok = has_digit and shannon_bits(body) >= BASE64_ENTROPY_MIN_BITS
        if ok:
            yield m.span()


# Numbers (phones and cards): a region of digit groups, split into tokens, then every window of tokens is judged.
_NUMBER_REGION_RE: Final = re.compile(  # possessive: a failed end never backtracks into the groups (linear time)
    r"(?<![\w.@/+\-])\+?(?:\(\d++\)|\d++)(?:(?:[ .\-]|(?<=\))|(?=\())(?:\(\d++\)|\d++))*+(?![\d@])"
)
_NUMBER_TOKEN_RE: Final = re.compile(r"\(\d+\)|\d+")
_DATE_RE: Final = re.compile(r"\d{4}([ .\-])\d{1,2}\1\d{1,2}|\d{1,2}([ .\-])\d{1,2}\2\d{4}")
_PHONE_SHAPES: Final = tuple(
    re.compile(p)
    for p in (
        r"\(\d{2,5}\)[ .\-]?\d{2,5}(?:[ .\-]\d{2,5}){0,3}",  # (555) 123-4567
        r"(?:1[ .\-])?\d{3}([ .\-])\d{3}\1\d{4}",  # 555-123-4567, 1 555 123 4567
        r"\d{3}([.\-])\d{4}",  # 555-1234
        r"0\d{1,4}([ .\-])\d{2,8}(?:\1\d{2,8}){0,4}",  # 020 7946 0958, 06 12 34 56 78
    )
)


def _is_phone(s: str) -> bool:
    """Whether a window of 7 to 15 digits is written as a phone number."""
    if s.startswith("+"):
        return True
    if _DATE_RE.fullmatch(s):
        return False
    return any(p.fullmatch(s) for p in _PHONE_SHAPES)


def luhn_ok(digits: str) -> bool:
    """Whether a string of decimal digits passes the Luhn check."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _is_card(s: str, seps: Sequence[str]) -> bool:
    """Whether a window of 13 to 19 digits is written as a card number that passes the Luhn check."""
    if s[0] not in "23456" or len(set(seps)) > 1 or not set(seps) <= {" ", "-"}:
        return False
    return luhn_ok(s.replace(" ", "").replace("-", ""))


def _number_runs(text: str) -> Iterator[tuple[bool, list[Span], list[str]]]:
    """Runs of digit groups: (starts with '+', token spans, the separator before each token after the first)."""
    for region in _NUMBER_REGION_RE.finditer(text):
        base, body = region.start(), region.group()
        tokens = [(base + t.start(), base + t.end()) for t in _NUMBER_TOKEN_RE.finditer(body)]
        seps = [text[a[1] : b[0]] for a, b in itertools.pairwise(tokens)]
        yield body.startswith("+"), tokens, seps


def _greedy(spans: list[Span]) -> Iterator[Span]:
    """Non-overlapping spans, longest then earliest first."""
    starts: list[int] = []  # the taken spans, sorted (they do not overlap, so their ends are sorted too)
    ends: list[int] = []
    for s, e in sorted(set(spans), key=lambda p: (p[0] - p[1], p[0])):
        i = bisect.bisect_right(starts, s)
        if (i and ends[i - 1] > s) or (i < len(starts) and starts[i] < e):
            continue
        starts.insert(i, s)
        ends.insert(i, e)
        yield s, e


def _number_detector(judge: Callable[[str, Sequence[str]], bool], digits_min: int, digits_max: int) -> Detect:
    """Judge every window of up to :data:`_NUMBER_WINDOW_TOKENS_MAX` digit groups with a digit count in range."""

    def detect(text: str) -> Iterator[Span]:
        found: list[Span] = []
        for plus, tokens, seps in _number_runs(text):
            sizes = [e - s - (2 if text[s] == "(" else 0) for s, e in tokens]
            for i in range(len(tokens)):
                start = tokens[i][0] - (1 if i == 0 and plus else 0)
                digits = 0
                for j in range(i, min(len(tokens), i + _NUMBER_WINDOW_TOKENS_MAX)):
                    digits += sizes[j]
                    if digits > digits_max:
                        break
                    if digits >= digits_min and judge(text[start : tokens[j][1]], seps[i:j]):
                        found.append((start, tokens[j][1]))
        yield from _greedy(found)

    return detect


_phones = _number_detector(lambda s, seps: _is_phone(s), PHONE_DIGITS_MIN, PHONE_DIGITS_MAX)
_cards = _number_detector(_is_card, CARD_DIGITS_MIN, CARD_DIGITS_MAX)

# (name, kind, detector), in tie-break order: on equal length and start, the one listed first names the kind.
DETECTORS: Final[tuple[tuple[str, str, Detect], ...]] = (
    ("private_key_block", "secret", _regex(_PEM)),
    ("authorization_header", "secret", _regex(_AUTH_HEADER, group=1)),
    ("bearer_token", "secret", _regex(_BEARER, group=1)),
    ("assignment", "secret", _regex(_ASSIGNMENT)),
    ("url_credentials", "secret", _regex(_URL_USERINFO)),
    ("aws_access_key_id", "secret", _regex(_AWS_KEY_ID)),
    ("github_token", "secret", _regex(_GITHUB)),
    ("sk_key", "secret", _regex(_SK)),
    ("stripe_key", "secret", _regex(_STRIPE)),
    ("slack_token", "secret", _regex(_SLACK)),
    ("google_api_key", "secret", _regex(_GOOGLE)),
    ("jwt", "secret", _regex(_JWT)),
    ("email", "email", _regex(_EMAIL)),
    ("card", "card", _cards),
    ("ipv4", "ip", _regex(_IPV4)),
    ("phone", "phone", _phones),
    ("high_entropy", "secret", _high_entropy),
)
_ENTITY_RANK: Final = len(DETECTORS)


@functools.lru_cache(maxsize=256)
def _entity_pattern(names: tuple[str, ...]) -> re.Pattern[str] | None:
    """One alternation of the names: escaped, longest first, whole words, any whitespace inside a name."""
    unique: dict[str, str] = {}
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"entity names are strings, got {type(name).__name__}")
        parts = name.split()
        if parts:
            unique.setdefault(" ".join(parts).casefold(), r"\s+".join(re.escape(p) for p in parts))
    if not unique:
        return None
    ordered = sorted(unique.items(), key=lambda kv: (-len(kv[0]), kv[0]))
    return re.compile(r"(?<!\w)(?:" + "|".join(rx for _, rx in ordered) + r")(?!\w)", re.IGNORECASE)


# -- one text ----------------------------------------------------------------------------------------------------------


def _clip(s: int, e: int, protected: Sequence[Span]) -> Iterator[Span]:
    """The parts of [s, e) outside the protected spans."""
    for ps, pe in protected:
        if pe <= s:
            continue
        if ps >= e:
            break
        if ps > s:
            yield s, ps
        s = max(s, pe)
    if e > s:
        yield s, e


def _detect(text: str, entities: re.Pattern[str] | None) -> list[Finding]:
    """One pass: the resolved, disjoint findings in ``text``, in order (spans in ``text``)."""
    protected = [m.span() for m in _PROTECTED_RE.finditer(text)]
    cands: list[tuple[int, int, int, str]] = []  # start, end, rank, kind
    for rank, (_, kind, detect) in enumerate(DETECTORS):
        for s, e in detect(text):
            cands.extend((cs, ce, rank, kind) for cs, ce in _clip(s, e, protected))
    if entities is not None:
        for m in entities.finditer(text):
            cands.extend((cs, ce, _ENTITY_RANK, "name") for cs, ce in _clip(*m.span(), protected))
    cands.sort()
    out: list[Finding] = []
    i = 0
    while i < len(cands):
        cluster_end = cands[i][1]
        j = i + 1
        while j < len(cands) and cands[j][0] < cluster_end:
            cluster_end = max(cluster_end, cands[j][1])
            j += 1
        winner = min(cands[i:j], key=lambda c: (c[0] - c[1], c[0], c[2]))
        out.append(Finding(winner[3], cands[i][0], cluster_end))
        i = j
    return out


def _redact(text: str, entities: re.Pattern[str] | None) -> tuple[str, list[Finding]]:
    # The text as pieces: (string, its start in the original text, or -1 for a placeholder this call inserted).
    pieces: list[tuple[str, int]] = [(text, 0)]
    findings: list[Finding] = []
    for _ in range(len(text) + 1):  # each pass that finds something removes original text, so this is enough
        current = "".join(p for p, _ in pieces)
        found = _detect(current, entities)
        if not found:
            break
        new: list[tuple[str, int]] = []
        pos = 0  # start of the piece in ``current``
        k = 0
        for piece, orig in pieces:
            end = pos + len(piece)
            cut = 0  # how much of this piece is consumed
            while k < len(found) and found[k].start < end:
                f = found[k]
                assert orig >= 0 and f.start >= pos + cut and f.end <= end, "a finding left its piece of original text"
                if f.start > pos + cut:
                    new.append((piece[cut : f.start - pos], orig + cut))
                new.append((PLACEHOLDERS[f.kind], -1))
                findings.append(Finding(f.kind, orig + f.start - pos, orig + f.end - pos))
                cut = f.end - pos
                k += 1
            if cut < len(piece):
                new.append((piece[cut:], orig + cut if orig >= 0 else -1))
            pos = end
        pieces = new
    else:  # pragma: no cover - unreachable by the argument above
        raise AssertionError("redaction did not reach a fixed point")
    findings.sort(key=lambda f: f.start)
    return "".join(p for p, _ in pieces), findings


def redact_text(text: str, entities: Sequence[str] = ()) -> tuple[str, list[Finding]]:
    """``text`` with every detected span replaced by its placeholder, and the findings (spans in ``text``), in order.

    Deterministic and idempotent: ``redact_text(redact_text(t)[0])`` returns the same text and no findings.
    """
    if not isinstance(text, str):
        raise TypeError(f"redact_text takes a str, got {type(text).__name__}")
    if isinstance(entities, str):
        raise TypeError("entities is a sequence of names, not one string")
    return _redact(text, _entity_pattern(tuple(entities)))


# -- JSON values -------------------------------------------------------------------------------------------------------


def _pointer_part(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def redact_json(value: Any, entities: Sequence[str] = ()) -> tuple[Any, list[JsonFinding]]:
    """A new plain JSON value (dicts and lists) with every string redacted as by :func:`redact_text`.

    * **Object keys are redacted too**: keys are often data (a map keyed by e-mail address), and a packet that kept them
      would leak. A key left unchanged keeps its name; when redacted keys collide (two addresses both become
      ``[EMAIL]``), the later ones, in the order of the original keys, become ``[EMAIL]#2``, ``[EMAIL]#3`` ….
    * **Integers** are redacted as their decimal text (a card number stored as a number becomes the string
      ``"[CARD]"``); floats, booleans and null are kept.
    * Findings name the redacted value's RFC 6901 pointer, never the original text.
    """
    if isinstance(entities, str):
        raise TypeError("entities is a sequence of names, not one string")
    pattern = _entity_pattern(tuple(entities))
    findings: list[JsonFinding] = []

    def text(s: str, path: str, in_key: bool = False) -> str:
        out, found = _redact(s, pattern)
        findings.extend(JsonFinding(path, f.kind, f.start, f.end, in_key) for f in found)
        return out

    def walk(v: Any, path: str) -> Any:
        if isinstance(v, str):
            return text(v, path)
        if v is None or isinstance(v, (bool, float)):
            return v
        if isinstance(v, int):
            s = str(v)
            out, found = _redact(s, pattern)
            if not found:
                return v
            findings.extend(JsonFinding(path, f.kind, f.start, f.end) for f in found)
            return out
        if isinstance(v, Mapping):
            for k in v:
                if not isinstance(k, str):
                    raise TypeError(f"{path or '/'}: object keys must be strings, got {type(k).__name__}")
            keys = sorted(v)
            redacted = {k: _redact(k, pattern) for k in keys}
            names: dict[str, str] = {k: k for k in keys if not redacted[k][1]}  # unchanged keys keep their names
            used = set(names.values())
            for k in keys:
                if k in names:
                    continue
                name, n = redacted[k][0], 1
                while name in used:
                    n += 1
                    name = f"{redacted[k][0]}#{n}"
                names[k] = name
                used.add(name)
            out_map: dict[str, Any] = {}
            for k in keys:
                member = f"{path}/{_pointer_part(names[k])}"
                findings.extend(JsonFinding(member, f.kind, f.start, f.end, True) for f in redacted[k][1])
                out_map[names[k]] = walk(v[k], member)
            return out_map
        if isinstance(v, (list, tuple)):
            return [walk(x, f"{path}/{i}") for i, x in enumerate(v)]
        raise TypeError(f"{path or '/'}: {type(v).__name__} is not a JSON value")

    return walk(value, ""), findings


# -- the packet --------------------------------------------------------------------------------------------------------

_NEVER_PUBLIC: Final = (InferencePolicy.LOCAL_ONLY, InferencePolicy.PRIVATE_NODES)


def _deadline(asset: Asset) -> int:
    """The source's absolute end of retention in microseconds (0: none)."""
    r = asset.retention_policy
    ends = [x for x in (r.delete_at, asset.created_at + r.ttl_seconds * 1_000_000 if r.ttl_seconds else 0) if x]
    return min(ends) if ends else 0


def redacted_packet(asset: Asset, now: int, *, entities: Sequence[str] | None = None) -> dict[str, Any]:
    """The draft of the redacted packet derived from ``asset``: keyword arguments for :class:`~policy.model.Asset`
    without ``id`` (the caller takes ``content_id`` of it) and without signature or node-set fields.

    The packet is a separately governed asset:

    * ``payload`` is ``{"redacted": <the payload, redacted>, "findings": [{"kind", "path"}, …]}``: no original text,
      not even the lengths of what was removed. ``goal``, ``segment`` and ``tags`` are redacted the same way.
    * Names come from ``entities`` (default: the asset's own ``entities``; an explicit list replaces them). The packet's
      own ``entities`` is empty: the names are exactly what was removed.
    * ``inference_policy`` is ``public_allowed``: that is the packet's purpose. Nothing else widens: the privacy scope,
      the readers (``allowed_principals``/``allowed_roles``), replication, training and export are the source's, and
      retention ends when the source's does (a source ``ttl_seconds`` becomes the same absolute ``delete_at``, since the
      packet is created later). Declassifying the scope is a separate, explicit act.
    * ``derived_from`` is the source; ``tags`` and ``policy_tags`` gain ``"redacted"``; ``creator`` is ``system``.

    Raises :class:`RedactionRefused` for a tombstone, a source past its retention at ``now``, ``local_only`` memory,
    and a source whose inference policy keeps it off public models (``local_only``, ``private_nodes``): for those a
    public packet would itself be a declassification.
    """
    if not isinstance(now, int) or isinstance(now, bool) or now < 0:
        raise ValueError(f"now must be a non-negative integer (microseconds), got {now!r}")
    if asset.tombstone:
        raise RedactionRefused(f"asset {asset.id} is deleted; there is nothing to redact")
    if asset.privacy_scope is PrivacyScope.LOCAL_ONLY:
        raise RedactionRefused(f"asset {asset.id} is local_only memory; it leaves this device in no form")
    if asset.inference_policy in _NEVER_PUBLIC:
        raise RedactionRefused(
            f"asset {asset.id} has inference policy {asset.inference_policy.value}; a public packet of it would widen "
            "that policy (declassify it first)"
        )
    deadline = _deadline(asset)
    if deadline and now >= deadline:
        raise RedactionRefused(f"asset {asset.id} is past its retention")
    names = tuple(asset.entities if entities is None else entities)
    redacted, found = redact_json(asset.payload, names)

    def one(s: str) -> str:
        return redact_text(s, names)[0]

    return {
        "asset_type": asset.asset_type,
        "payload": {"redacted": redacted, "findings": [{"kind": f.kind, "path": f.path} for f in found]},
        "owner_id": asset.owner_id,
        "tenant_scope": asset.tenant_scope,
        "created_at": now,
        "updated_at": now,
        "creator": Creator.SYSTEM,
        "confidence_score": asset.confidence_score,
        "provenance_score": asset.provenance_score,
        "freshness_score": asset.freshness_score,
        "trust_class": asset.trust_class,
        "privacy_scope": asset.privacy_scope,
        "allowed_principals": asset.allowed_principals,
        "allowed_roles": asset.allowed_roles,
        "replication_policy": asset.replication_policy,
        "inference_policy": InferencePolicy.PUBLIC_ALLOWED,
        "training_policy": asset.training_policy,
        "export_policy": asset.export_policy,
        "retention_policy": Retention(delete_at=deadline),
        "policy_tags": (*asset.policy_tags, REDACTED_TAG),
        "derived_from": (asset.id,),
        "goal": one(asset.goal),
        "level": asset.level,
        "segment": one(asset.segment),
        "entities": (),
        "tags": (*(one(t) for t in asset.tags), REDACTED_TAG),
        "valid_from": asset.valid_from,
        "valid_to": asset.valid_to,
    }
