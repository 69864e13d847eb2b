"""The memory envelope: wrap marks injected memory, strip removes every envelope and fragment, nothing else."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gaml.node.core.text.envelope import (
    ESCAPED_SUFFIX,
    MARK,
    OPEN_TAG,
    Stripped,
    contains,
    parse_attributes,
    spans,
    strip,
    wrap,
)


def test_round_trip_keeps_the_surrounding_text_exactly() -> None:
    """Wrapping a body between two texts and stripping gives back the two texts, byte for byte."""
    wrapped = wrap("the user prefers tabs", "r_0123", "asset:abc")
    assert wrapped == '<gaml-memory receipt="r_0123" source="asset:abc">\nthe user prefers tabs\n</gaml-memory>'
    out = strip("Before:\n" + wrapped + "\n  after. ")
    assert out == Stripped("Before:\n\n  after. ", 1)


def test_text_without_envelopes_is_unchanged() -> None:
    """Angle brackets that are not envelope tags are plain text."""
    text = "a <b>bold</b> < gaml > <gaml-memoryless> </gaml-memo x> 3 < 4"
    assert strip(text) == Stripped(text, 0)
    assert not contains(text)


def test_attributes_are_escaped_and_parse_back() -> None:
    """Quotes and angle brackets in attribute values cannot break out of the tag."""
    wrapped = wrap("body", 'r_1" evil="x', "<script>&'")
    open_tag = wrapped.split("\n", 1)[0]
    assert open_tag.count('"') == 4 and "<script>" not in open_tag
    assert parse_attributes(open_tag) == {"receipt": 'r_1" evil="x', "source": "<script>&'"}
    assert strip("x" + wrapped + "y") == Stripped("xy", 1)


def test_parse_attributes_of_a_loose_tag() -> None:
    """Case, spacing and quoting variants of the opening tag parse; no tag gives no attributes."""
    assert parse_attributes("< GAML-Memory  Receipt='r_9' source=abc >") == {"receipt": "r_9", "source": "abc"}
    assert parse_attributes("no tag here") == {}


@pytest.mark.parametrize(
    "tag",
    [
        "</gaml-memory>",
        "</GAML-MEMORY>",
        "</ gaml-memory >",
        "< / Gaml-Memory>",
        "<gaml-memory>",
        '<gaml-memory receipt="r_x" source="y">',
        "< GAML-memory",
        "</gaml-memory",
    ],
)
def test_tags_inside_a_body_cannot_end_the_envelope(tag: str) -> None:
    """A body holding an envelope tag (in any spelling strip knows) is neutralised and stripped whole."""
    body = f"secret one {tag} secret two"
    wrapped = wrap(body, "r_1", "s")
    assert ESCAPED_SUFFIX in wrapped
    out = strip("keep " + wrapped + " end")
    assert out == Stripped("keep  end", 1)


def test_several_envelopes() -> None:
    """Each envelope goes; the text between them stays."""
    text = "a" + wrap("one", "r_1", "s") + "b" + wrap("two", "r_2", "s") + "c"
    assert strip(text) == Stripped("abc", 2)


def test_nested_envelopes_go_with_the_outer_one() -> None:
    """Depth is counted: the first closing tag ends the inner envelope, not the outer one."""
    text = "a<gaml-memory r='1'>x<gaml-memory r='2'>y</gaml-memory>z</gaml-memory>b"
    assert strip(text) == Stripped("ab", 1)


def test_case_and_whitespace_inside_tags() -> None:
    """Tags match case-insensitively with whitespace after '<' and around '/'."""
    text = 'keep < GAML-Memory  receipt="r_1">injected</ gaml-memory > keep'
    assert strip(text) == Stripped("keep  keep", 1)
    text = "keep <\n  gaml-MEMORY\n>injected<  /  GAML-memory\t> keep"
    assert strip(text) == Stripped("keep  keep", 1)


def test_unclosed_envelope_runs_to_the_end() -> None:
    """An opening tag whose closing tag was truncated away takes the rest of the text."""
    assert strip("user text <gaml-memory receipt='r'>memory that was cut") == Stripped("user text ", 1)
    assert strip("a <gaml-memory>1</gaml-memory> b <gaml-memory>2") == Stripped("a  b ", 2)


def test_unclosed_opening_tag_without_its_bracket() -> None:
    """An opening tag cut before its '>' is still an opening tag."""
    assert strip('text <gaml-memory receipt="r_12') == Stripped("text ", 1)
    assert strip("text <GAML-MEMORY") == Stripped("text ", 1)


def test_stray_closing_tag_removes_everything_before_it() -> None:
    """A closing tag whose opening was truncated away: the text before it was injected memory."""
    assert strip("memory tail\n</gaml-memory>\nthe user's words") == Stripped("\nthe user's words", 1)
    text = "x " + wrap("m", "r", "s") + " y </gaml-memory> z"
    assert strip(text) == Stripped(" z", 1)


@pytest.mark.parametrize("cut", ["<g", "<gaml", "<gaml-mem", "<GAML-MEMOR", "< gaml-m", "</gaml-me", "</ g"])
def test_tag_cut_off_at_the_very_end(cut: str) -> None:
    """A prefix of a tag at the very end of the text is a fragment and goes."""
    assert strip("hello " + cut) == Stripped("hello ", 1)
    assert contains("hello " + cut)


def test_a_prefix_of_a_tag_in_the_middle_is_text() -> None:
    """Only at the very end is a tag prefix a fragment."""
    text = "<gaml-mem is not at the end"
    assert strip(text) == Stripped(text, 0)


def test_contains() -> None:
    """contains() is true exactly when strip would remove something."""
    assert contains(wrap("x", "r", "s"))
    assert contains("</gaml-memory>")
    assert not contains("nothing to see <here>")
    assert OPEN_TAG == "gaml-memory"


def test_spans_are_the_removed_ranges() -> None:
    """spans() gives the sorted, disjoint ranges strip() cuts, one per envelope or fragment."""
    env = wrap("m", "r", "s")
    text = "ab" + env + "cd" + env + "e <gaml-mem"
    assert spans(text) == [(2, 2 + len(env)), (4 + len(env), 4 + 2 * len(env)), (6 + 2 * len(env), len(text))]
    assert spans("x </gaml-memory> y" + env) == [(0, 16), (18, 18 + len(env))]
    assert spans("plain") == []
    assert MARK in env.lower()


def test_no_quadratic_blowup_on_whitespace() -> None:
    """Long whitespace runs inside would-be tags are scanned in linear time."""
    text = ("<" + " " * 5000 + "/" + " " * 5000 + "x") * 20
    assert strip(text) == Stripped(text, 0)


MARKERS = [f"zqxmark{i}" for i in range(20)]
TAGLIKE = ["</gaml-memory>", "<gaml-memory>", "< / GAML-Memory >", "<gaml-memory a='b'", "</gaml-mem", "<", ">", "/"]


def _clean(t: str) -> bool:
    s = strip(t)
    return s.removed == 0 and s.text == t


@settings(derandomize=True, max_examples=300, deadline=None)
@given(
    t1=st.text(max_size=40),
    t2=st.text(max_size=40),
    words=st.lists(st.sampled_from(MARKERS + TAGLIKE) | st.text(max_size=6), max_size=12),
    receipt=st.text(max_size=12),
    source=st.text(max_size=12),
)
def test_property_strip_undoes_wrap(t1: str, t2: str, words: list[str], receipt: str, source: str) -> None:
    """For any clean surrounding text and any body, strip(t1 + wrap(body) + t2) is t1 + t2, and no marker survives."""
    assume(_clean(t1) and _clean(t2))
    assume(not any(m in t1 + t2 for m in MARKERS))
    body = " ".join(words)
    out = strip(t1 + wrap(body, receipt, source) + t2)
    assert out == Stripped(t1 + t2, 1)
    assert not any(m in out.text for m in MARKERS)
