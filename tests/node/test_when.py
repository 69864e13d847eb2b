"""Relative time resolved against the moment a text was said (node.core.text.when), stored by ingestion with the item
and shown by hydration when the goal is about time."""

from __future__ import annotations

import pytest

from gaml.node.core.hydrate import HydrationRequest, Hydrator
from gaml.node.core.memory.ingest import IngestOptions, Ingestor
from gaml.node.core.text import parsers, when
from gaml.node.core.text.parsers import locomo_time_us
from gaml.node.core.text.privacy import Rules
from gaml.policy.access import Principal
from tests.node.conftest import NOW, conversation_node, memory_world

MONDAY = locomo_time_us("1:56 pm on 8 May, 2023")  # a Monday


@pytest.mark.parametrize(
    ("text", "meant"),
    [
        ("I went to a support group yesterday.", [("yesterday", "7 May 2023")]),
        ("We talked last night and today.", [("last night", "7 May 2023"), ("today", "8 May 2023")]),
        ("See you tomorrow!", [("tomorrow", "9 May 2023")]),
        ("the day before yesterday it rained", [("the day before yesterday", "6 May 2023")]),
        ("Last week I started a job.", [("Last week", "the week before 8 May 2023")]),
        ("this past weekend we went camping", [("this past weekend", "the weekend before 8 May 2023")]),
        ("next week is busy", [("next week", "the week after 8 May 2023")]),
        ("Last Sunday was awesome", [("Last Sunday", "the Sunday before 8 May 2023 (7 May 2023)")]),
        ("last Tues I joined", [("last Tues", "the Tuesday before 8 May 2023 (2 May 2023)")]),
        ("next Monday we start", [("next Monday", "the Monday after 8 May 2023 (15 May 2023)")]),
        ("I won a tournament on Friday!", [("on Friday", "the Friday before 8 May 2023 (5 May 2023)")]),
        ("I will race on Friday.", [("on Friday", "the Friday after 8 May 2023 (12 May 2023)")]),
        ("last month and next month", [("last month", "April 2023"), ("next month", "June 2023")]),
        ("this year, not last year", [("this year", "2023"), ("last year", "2022")]),
        ("two weeks ago", [("two weeks ago", "the week of 24 April 2023")]),
        ("3 days ago", [("3 days ago", "5 May 2023")]),
        ("a couple of months ago", [("a couple of months ago", "March 2023")]),
        ("I've had them for 3 years now", [("for 3 years", "since 2020")]),
        ("ten years ago", [("ten years ago", "2013")]),
    ],
)
def test_phrases_resolve_against_the_time_they_were_said(text: str, meant: list[tuple[str, str]]) -> None:
    assert when.resolve(text, MONDAY) == meant


@pytest.mark.parametrize(
    "text",
    [
        "See you on Friday",  # which Friday: the sentence does not say
        "I did it recently, the other day",
        "300 years ago",
        "Yesterdays are gone; lastweek is a typo",
        "",
    ],
)
def test_what_the_date_alone_does_not_settle_is_left_alone(text: str) -> None:
    assert when.resolve(text, MONDAY) == []


def test_no_time_no_resolution_and_annotation_keeps_the_text() -> None:
    """Without a time (0) nothing is resolved; annotating puts each meaning after its phrase, text otherwise kept."""
    assert when.resolve("yesterday", 0) == []
    text = "Yesterday was fun; last week too."
    out = when.annotate(text, when.resolve(text, MONDAY))
    assert out == "Yesterday [7 May 2023] was fun; last week [the week before 8 May 2023] too."
    assert when.annotate(text, []) == text
    assert when.annotate(text, [("nowhere", "x")]) == text


def test_ingestion_stores_what_relative_dates_meant_and_hydration_shows_it_for_time_goals() -> None:
    node = conversation_node(
        [
            ("Caroline", "I went to the LGBTQ support group yesterday."),
            ("Melanie", "I took my kids to the pottery museum."),
        ]
    )
    items = {a.payload["dia_id"]: a for a in node.store.get_many(node.store.live_ids()) if a is not None}
    assert [list(p) for p in items["D1:1"].payload["when"]] == [["yesterday", "7 May 2023"]]
    assert "when" not in items["D1:2"].payload
    hydrator = Hydrator(node)
    timely = hydrator.hydrate(HydrationRequest("When did Caroline go to the support group?", "alice", NOW, 300))
    assert "yesterday [7 May 2023]" in timely.frame
    assert "## 8 May 2023 " in timely.frame  # the session's date, as people write it
    plain = hydrator.hydrate(HydrationRequest("What did Caroline think of the support group?", "alice", NOW, 300))
    assert "support group yesterday." in plain.frame and "[7 May 2023]" not in plain.frame


def test_a_transcript_without_times_resolves_nothing() -> None:
    """A record without a time of its own (and no source time) is not resolved against the ingest time."""
    node = memory_world().open_node()
    node.governance.add_principal(Principal("alice"))
    ing = Ingestor(node, Rules.load_default())
    ing.ingest(
        parsers.parse(b"I went to the pottery class yesterday.\n", "notes.txt", "text"), IngestOptions("alice"), NOW
    )
    assert all("when" not in a.payload for a in node.store.get_many(node.store.live_ids()) if a is not None)


def test_crafted_and_ambiguous_texts_stay_cheap_and_unresolved() -> None:
    """Words that look like days or past tenses do not resolve ("sat down", "on sun loungers", "excited ... on
    Friday"); a phrase is annotated only as a whole word; a text of many unresolvable phrases is looked at a bounded
    number of times; a time too far ahead for the calendar resolves nothing."""
    assert when.resolve("when I last sat down on sun loungers", MONDAY) == []
    assert when.resolve("I'm excited to see you on Friday", MONDAY) == []
    assert when.annotate("todays news, today", [("today", "8 May 2023")]) == "todays news, today [8 May 2023]"
    crafted = "see you on Fri and " * 20_000
    assert when.resolve(crafted, MONDAY) == []
    assert when.resolve("tomorrow", 253_402_300_799_000_000) == []
