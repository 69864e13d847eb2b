"""Privacy classification by deterministic rules read from a config file (``node/core/text/privacy_rules.json``).

Rules are authoritative. A model may only *propose* (:meth:`Rules.apply_proposal`), and a proposal can make an item
more restrictive, never less. Everything here is pure: no clock, no randomness; the only I/O is the read of the shipped
rules file in :meth:`Rules.load_default`.

The rules file::

    {"version": 1, "rules": [
      {"name": "email", "kind": "personal", "action": "local_only", "pattern": "...", "description": "..."},
      {"name": "credit_card", "kind": "financial", "action": "redact", "check": "luhn", "pattern": "..."},
      ...
    ]}

* ``name``: lower-case ``[a-z][a-z0-9_]*``, unique; it names the placeholder ``[REDACTED:<name>]``.
* ``kind``: one of :data:`KINDS`; ``action``: one of :data:`ACTIONS`:

  - ``redact``: the match, or its named group ``value`` when the pattern has one, becomes ``[REDACTED:<name>]``;
  - ``local_only``: the item must stay on this node (scope ``local_only``);
  - ``flag``: the item is only tagged.

* ``check`` (optional): a test in code that a match must also pass (:data:`CHECKS`): ``luhn`` (card numbers),
  ``iban`` (the ISO 13616 mod-97 check), ``phone`` (9 to 15 digits).
* ``description`` (optional) is documentation. Any other key is an error (a typo must not silently disable a rule).

How a text is classified (:meth:`Rules.classify`):

1. Every rule proposes its matches (zero-width matches and matches failing the rule's check are dropped).
2. Overlapping matches: the **earliest-starting**, then the **longest**, then the rule listed first wins; the winners
   do not overlap. A losing match is dropped when a winner at least as strict (``flag`` < ``local_only`` <
   ``redact``) redacts a span containing it, or when it starts inside the match of a *stricter* winner (the
   ``pw@db.example.com`` in ``postgres://user:pw@db.example.com`` is part of a connection string, not an e-mail
   address); otherwise it is kept as a finding too. So a secret that a longer match hides is still redacted, and a
   finding that demands ``local_only`` is never lost to a mere ``flag``.
3. Redactions are applied right to left, so offsets stay valid; overlapping redacted spans are merged under the
   placeholder of the first. Findings carry rule names and spans in the *original* text, never the secret itself,
   and nothing here puts matched text in an exception or a repr.

Placeholders already in a text are not redacted again: classifying the redacted text yields the same text.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

import orjson

from gaml.policy.errors import InvalidInput
from gaml.policy.redact import luhn_ok

RULES_VERSION: Final = 1
DEFAULT_RULES_FILE: Final = "privacy_rules.json"
KINDS: Final = ("credential", "personal", "financial")
ACTIONS: Final = ("flag", "local_only", "redact")  # from the least to the most strict
PROPOSALS: Final = ("none", "local_only", "redact")
REDACTED_TAG: Final = "redacted"
PROPOSED_TAG: Final = "privacy:proposed"
VALUE_GROUP: Final = "value"
PHONE_DIGITS_MIN: Final = 9
PHONE_DIGITS_MAX: Final = 15  # E.164
IBAN_CHARS_MIN: Final = 15
IBAN_CHARS_MAX: Final = 34
_RULE_KEYS: Final = frozenset({"name", "kind", "action", "pattern", "check", "description"})
_NAME_RE: Final = re.compile(r"[a-z][a-z0-9_]*")
_STRICTNESS: Final = {action: i for i, action in enumerate(ACTIONS)}


def _substitute(text: str, spans: Sequence[tuple[int, int, str]]) -> str:
    """``text`` with each span (start, end, rule name; sorted by start) replaced by ``[REDACTED:<rule>]``;
    overlapping spans merge, and a merged span takes the placeholder of its first rule."""
    groups: list[tuple[int, int, str]] = []
    for start, end, name in spans:
        if groups and start < groups[-1][1]:
            first, last, kept = groups[-1]
            groups[-1] = (first, max(last, end), kept)
        else:
            groups.append((start, end, name))
    for start, end, name in reversed(groups):
        text = f"{text[:start]}[REDACTED:{name}]{text[end:]}"
    return text


def masked(text: str, c: Classification) -> str:
    """``text`` (the one ``c`` classified) with what is redacted *and* what must stay local-only replaced by
    placeholders: for text that leaves its record, and so its scope (a goal label, a title, metadata)."""
    spans = [(f.start, f.end, f.rule) for f in c.findings if f.action != "flag"]
    return _substitute(text, sorted(spans, key=lambda s: (s[0], -s[1])))


def iban_ok(candidate: str) -> bool:
    """Whether ``candidate`` (spaces allowed) is an IBAN that passes the ISO 13616 mod-97 check."""
    s = candidate.replace(" ", "").upper()
    if not (IBAN_CHARS_MIN <= len(s) <= IBAN_CHARS_MAX and s.isascii() and s.isalnum()):
        return False
    digits = "".join(str(int(ch, 36)) for ch in s[4:] + s[:4])
    return int(digits) % 97 == 1


def _luhn_check(s: str) -> bool:
    digits = "".join(c for c in s if c.isdigit())
    return len(digits) >= 2 and luhn_ok(digits)


def _phone_check(s: str) -> bool:
    return PHONE_DIGITS_MIN <= sum(c.isdigit() for c in s) <= PHONE_DIGITS_MAX


CHECKS: Final[dict[str, Callable[[str], bool]]] = {"luhn": _luhn_check, "iban": iban_ok, "phone": _phone_check}


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """Rule ``rule`` (of ``kind``, with ``action``) matched ``[start, end)`` of the original text (for a redaction:
    exactly the span that was replaced)."""

    rule: str
    kind: str
    action: str
    start: int
    end: int


@dataclasses.dataclass(frozen=True, slots=True)
class Classification:
    """The outcome of :meth:`Rules.classify`.

    ``text`` is the text after redactions (the input itself when nothing was redacted); ``findings`` are in order of
    ``start``, with spans in the original text; ``local_only`` says that some finding (or an accepted proposal)
    demands that the item stay on this node; ``tags`` are ``privacy:<kind>`` for each kind found (in :data:`KINDS`
    order), then ``redacted`` if anything was, then ``privacy:proposed`` if a proposal tightened the result.
    """

    text: str
    findings: tuple[Finding, ...]
    local_only: bool
    tags: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Rule:
    name: str
    kind: str
    action: str
    regex: re.Pattern[str]
    check: Callable[[str], bool] | None
    has_value: bool


@dataclasses.dataclass(frozen=True, slots=True)
class _Match:
    start: int  # the whole match
    end: int
    order: int  # the rule's position in the file
    span_start: int  # what a redaction replaces: the value group, else the whole match
    span_end: int
    rule: _Rule

    def finding(self) -> Finding:
        return Finding(self.rule.name, self.rule.kind, self.rule.action, self.span_start, self.span_end)


def _strictness(m: _Match) -> int:
    return _STRICTNESS[m.rule.action]


def _parse_rule(index: int, raw: Any, seen: set[str]) -> _Rule:
    if not isinstance(raw, dict):
        raise InvalidInput(f"privacy rules: rule #{index} is not an object")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidInput(f"privacy rules: rule #{index} needs a name matching [a-z][a-z0-9_]*, got {name!r}")
    where = f"privacy rules: rule {name!r}"
    if name in seen:
        raise InvalidInput(f"{where}: the name is used twice")
    seen.add(name)
    unknown = sorted(set(raw) - _RULE_KEYS)
    if unknown:
        raise InvalidInput(f"{where}: unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(_RULE_KEYS))}")
    kind, action, pattern, check = raw.get("kind"), raw.get("action"), raw.get("pattern"), raw.get("check")
    if kind not in KINDS:
        raise InvalidInput(f"{where}: unknown kind {kind!r}; expected one of: {', '.join(KINDS)}")
    if action not in ACTIONS:
        raise InvalidInput(f"{where}: unknown action {action!r}; expected one of: {', '.join(ACTIONS)}")
    if check is not None and check not in CHECKS:
        raise InvalidInput(f"{where}: unknown check {check!r}; expected one of: {', '.join(CHECKS)}")
    if not isinstance(raw.get("description", ""), str):
        raise InvalidInput(f"{where}: description must be a string")
    if not isinstance(pattern, str) or not pattern:
        raise InvalidInput(f"{where}: pattern must be a non-empty string")
    try:
        regex = re.compile(pattern)
    except re.error as e:
        raise InvalidInput(f"{where}: pattern does not compile: {e.msg} (at position {e.pos})") from None
    return _Rule(name, kind, action, regex, CHECKS[check] if check else None, VALUE_GROUP in regex.groupindex)


class Rules:
    """An ordered, validated set of privacy rules (immutable once loaded)."""

    __slots__ = ("_rules",)

    def __init__(self, rules: Sequence[_Rule]) -> None:
        self._rules: tuple[_Rule, ...] = tuple(rules)

    def __repr__(self) -> str:
        return f"Rules({len(self._rules)} rules)"

    @property
    def names(self) -> tuple[str, ...]:
        """The rule names, in file order (the tie-break order)."""
        return tuple(r.name for r in self._rules)

    @classmethod
    def load(cls, data: bytes) -> Rules:
        """Parse and validate a rules file; :class:`InvalidInput` names the rule at fault."""
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise InvalidInput(f"privacy rules: not valid JSON: {e}") from None
        if not isinstance(doc, dict):
            raise InvalidInput("privacy rules: the top level must be an object with 'version' and 'rules'")
        if doc.get("version") != RULES_VERSION:
            raise InvalidInput(f"privacy rules: unsupported version {doc.get('version')!r}; expected {RULES_VERSION}")
        raw_rules = doc.get("rules")
        if not isinstance(raw_rules, list):
            raise InvalidInput("privacy rules: 'rules' must be a list")
        seen: set[str] = set()
        return cls([_parse_rule(i, raw, seen) for i, raw in enumerate(raw_rules)])

    @classmethod
    def load_default(cls) -> Rules:
        """The rules shipped with GAML (``node/core/text/privacy_rules.json``, package data)."""
        data = importlib.resources.files("gaml.node.core.text").joinpath(DEFAULT_RULES_FILE).read_bytes()
        return cls.load(data)

    def _matches(self, text: str) -> list[_Match]:
        found: list[_Match] = []
        for order, rule in enumerate(self._rules):
            for m in rule.regex.finditer(text):
                start, end = m.span()
                s, e = m.span(VALUE_GROUP) if rule.has_value else (start, end)
                if e <= s:
                    continue  # zero-width, or a value group that did not take part
                if rule.check is not None and not rule.check(text[s:e]):
                    continue
                found.append(_Match(start, end, order, s, e, rule))
        found.sort(key=lambda c: (c.start, c.start - c.end, c.order))
        return found

    def classify(self, text: str) -> Classification:
        """Classify ``text``: redact what the rules say to, and report findings, ``local_only`` and tags."""
        if not isinstance(text, str):
            raise TypeError(f"classify takes a str, got {type(text).__name__}")
        candidates = self._matches(text)
        winners: list[_Match] = []
        for c in candidates:  # sorted by start, then longest, then rule order
            if not winners or c.start >= winners[-1].end:
                winners.append(c)
        chosen = list(winners)
        winner_ids = {id(w) for w in winners}
        for c in candidates:
            if id(c) in winner_ids:
                continue
            covered = any(
                (w.span_start <= c.span_start and c.span_end <= w.span_end and _strictness(w) >= _strictness(c))
                or (w.start <= c.start < w.end and _strictness(w) > _strictness(c))
                for w in winners
            )
            if not covered:
                chosen.append(c)
        chosen.sort(key=lambda c: (c.span_start, c.span_start - c.span_end, c.order))

        redacted = [(c.span_start, c.span_end, c.rule.name) for c in chosen if c.rule.action == "redact"]
        kinds = {c.rule.kind for c in chosen}
        tags = tuple(f"privacy:{k}" for k in KINDS if k in kinds) + ((REDACTED_TAG,) if redacted else ())
        return Classification(
            text=_substitute(text, redacted),
            findings=tuple(c.finding() for c in chosen),
            local_only=any(c.rule.action == "local_only" for c in chosen),
            tags=tags,
        )

    def apply_proposal(self, c: Classification, proposal: str) -> Classification:
        """``c`` after a model's ``proposal`` (``"local_only"``, ``"redact"`` or ``"none"``): it may only tighten.

        ``local_only`` and ``redact`` make the item local_only (a proposal names no span, so there is nothing to
        redact by; keeping the item on this node is the tightening available) and add ``privacy:proposed``; ``none``
        changes nothing, and nothing ever clears ``local_only`` or undoes a redaction. Raises :class:`InvalidInput`
        for any other proposal.
        """
        key = proposal.strip().lower().replace("-", "_").replace(" ", "_") if isinstance(proposal, str) else None
        if key not in PROPOSALS:
            shown = proposal[:40] if isinstance(proposal, str) else type(proposal).__name__
            raise InvalidInput(f"privacy proposal must be one of: {', '.join(PROPOSALS)}; got {shown!r}")
        if key == "none" or c.local_only:
            return c
        return dataclasses.replace(c, local_only=True, tags=(*c.tags, PROPOSED_TAG))
