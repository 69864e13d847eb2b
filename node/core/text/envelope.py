"""The memory envelope: how hydration marks memory it injects, and how ingestion strips it again. Pure core.

Hydration puts memory into an agent's context inside an envelope::

    <gaml-memory receipt="r_…" source="…">
    {body}
    </gaml-memory>

and ingestion calls :func:`strip` on every record before anything else, so memory that went out is never read back in
as if the agent had said it.

Tags (what :func:`strip` recognises)
    Tag names are matched case-insensitively, with whitespace allowed after ``<`` and around ``/``: ``< GAML-Memory
    receipt=…>`` and ``</ gaml-memory >`` are tags. The name must end there: ``<gaml-memory-escaped`` is *not* a tag
    (that is how :func:`wrap` neutralises tags inside a body). An opening tag runs to its ``>``, or, when it has none,
    up to the next ``<`` or the end of the text.

What :func:`strip` removes
    - each envelope, from its opening tag through its matching closing tag (nesting is counted, so an envelope inside
      an envelope goes with its outer one);
    - an opening tag without a closing one: everything from it to the end of the text (the end was truncated away);
    - a closing tag without an opening one: everything from the start of the text through it (the opening was
      truncated away, so what precedes it is injected memory, earlier envelopes included);
    - a tag cut off at the very end of the text (``…<gaml-mem``): that fragment only.

    Everything else is kept byte for byte: no whitespace is collapsed at the seams. ``removed`` counts the envelopes
    and fragments removed (after a stray closing tag, everything before it counts as one).

What :func:`wrap` guarantees
    Attribute values are HTML-escaped (``&``, ``<``, ``>``, ``"``, ``'``), so they cannot end the tag, and every
    opening or closing tag in the body (in any spelling :func:`strip` recognises) gets ``-escaped`` appended to its
    name, so the body cannot end the envelope early or open another one. Hence ``strip(a + wrap(body, …) + b).text ==
    a + b`` whenever ``a`` and ``b`` hold no tag of their own.
"""

from __future__ import annotations

import dataclasses
import html
import re
from typing import Final

OPEN_TAG: Final = "gaml-memory"
# A cheap prefilter: every complete tag holds this (lower-cased) string. A fragment cut before the end of the name
# (``…<gaml-mem``) does not; :func:`contains` is the exact test.
MARK: Final = OPEN_TAG
ESCAPED_SUFFIX: Final = "-escaped"  # appended to the name of a tag found inside a body

# `(?:/\s*)?` rather than `/?\s*`: two adjacent `\s*` would backtrack quadratically over a run of whitespace.
_TAG_START: Final = r"<\s*(?:/\s*)?gaml-memory"
_NAME_END: Final = r"(?![\w-])"
_CLOSE: Final = r"<\s*/\s*gaml-memory" + _NAME_END + r"(?:\s*>)?"
_OPEN: Final = r"<\s*gaml-memory" + _NAME_END + r"[^<>]*>?"
# A proper, non-empty prefix of the name (a full name is a tag already), cut off at the very end of the text.
_PARTIAL: Final = r"<\s*(?:/\s*)?g(?:a(?:m(?:l(?:-(?:m(?:e(?:m(?:o(?:r)?)?)?)?)?)?)?)?)?\Z"

_TOKEN_RE: Final = re.compile(f"(?P<close>{_CLOSE})|(?P<open>{_OPEN})|(?P<partial>{_PARTIAL})", re.IGNORECASE)
_OPEN_RE: Final = re.compile(r"<\s*gaml-memory" + _NAME_END + r"(?P<attributes>[^<>]*)>?", re.IGNORECASE)
_IN_BODY_RE: Final = re.compile(_TAG_START, re.IGNORECASE)
_ATTRIBUTE_RE: Final = re.compile(r"""([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+))""")


@dataclasses.dataclass(frozen=True, slots=True)
class Stripped:
    """The text with every envelope removed, and how many envelopes (or fragments of one) were removed."""

    text: str
    removed: int


def wrap(body: str, receipt: str, source: str) -> str:
    """Wrap ``body`` in an envelope carrying ``receipt`` and ``source``; the body's own tags are neutralised."""
    return f"{open_tag(receipt, source)}\n{neutralize(body)}\n{CLOSE_TAG}"


CLOSE_TAG: Final = f"</{OPEN_TAG}>"


def open_tag(receipt: str, source: str) -> str:
    """The opening tag :func:`wrap` writes (attribute values escaped)."""
    attributes = f'receipt="{html.escape(receipt, quote=True)}" source="{html.escape(source, quote=True)}"'
    return f"<{OPEN_TAG} {attributes}>"


def neutralize(body: str) -> str:
    """``body`` with every envelope tag (in any spelling :func:`strip` recognises) renamed ``…-escaped``, so it can
    neither end an envelope nor open one. Not idempotent: neutralise a text once (a caller that assembles the frame
    itself, to count its tokens line by line, neutralises each line and joins them between :func:`open_tag` and
    :data:`CLOSE_TAG` exactly as :func:`wrap` does)."""
    return _IN_BODY_RE.sub(lambda m: m.group(0) + ESCAPED_SUFFIX, body)


def spans(text: str) -> list[tuple[int, int]]:
    """The ``[start, end)`` ranges that :func:`strip` removes from ``text``: sorted, disjoint, one per envelope or
    fragment (for a caller that must map the cuts back onto pieces of the text, such as records)."""
    removed: list[tuple[int, int]] = []
    depth = 0  # envelopes open at the current point
    envelope_start = 0  # where the outermost open envelope starts
    for m in _TOKEN_RE.finditer(text):
        if m.lastgroup == "open":
            if depth == 0:
                envelope_start = m.start()
            depth += 1
        elif m.lastgroup == "close":
            if depth > 0:
                depth -= 1
                if depth == 0:
                    removed.append((envelope_start, m.end()))
            else:  # a stray closing tag: its opening, and everything up to here, was injected memory
                removed = [(0, m.end())]
        elif depth == 0:  # a tag cut off at the very end; inside an envelope it goes with the envelope anyway
            removed.append((m.start(), len(text)))
    if depth > 0:  # an envelope never closed: it runs to the end
        removed.append((envelope_start, len(text)))
    return removed


def strip(text: str) -> Stripped:
    """Remove every envelope and envelope fragment from ``text`` (see the module docstring for the exact rules)."""
    removed = spans(text)
    kept: list[str] = []
    keep_from = 0
    for start, end in removed:
        kept.append(text[keep_from:start])
        keep_from = end
    kept.append(text[keep_from:])
    return Stripped("".join(kept), len(removed))


def contains(text: str) -> bool:
    """Whether ``text`` holds an envelope or a fragment of one, that is, whether :func:`strip` would change it."""
    return _TOKEN_RE.search(text) is not None


def parse_attributes(open_tag: str) -> dict[str, str]:
    """The attributes of the first opening tag in ``open_tag`` (``receipt``, ``source``, …), unescaped.

    Names are lower-cased; the first of a repeated name wins. ``{}`` when there is no opening tag.
    """
    m = _OPEN_RE.search(open_tag)
    if m is None:
        return {}
    attributes: dict[str, str] = {}
    for a in _ATTRIBUTE_RE.finditer(m.group("attributes")):
        value = next((g for g in a.groups()[1:] if g is not None), "")
        attributes.setdefault(a.group(1).lower(), html.unescape(value))
    return attributes


__all__ = [
    "CLOSE_TAG",
    "ESCAPED_SUFFIX",
    "MARK",
    "OPEN_TAG",
    "Stripped",
    "contains",
    "neutralize",
    "open_tag",
    "parse_attributes",
    "spans",
    "strip",
    "wrap",
]
