"""Relative time resolved against the moment a text was said (node.core.text.when), stored by ingestion with the item
and shown by hydration when the goal is about time."""

from __future__ import annotations

import json

import pytest

from gaml.node.core.hydrate import WHEN_BOOST, HydrationRequest, Hydrator
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


@pytest.mark.parametrize(
    ("text", "period"),
    [
        ("When did Melanie go camping in June?", when.Period(6)),
        ("when did she go camping in june", when.Period(6)),
        ("What setback did Melanie face in October 2023?", when.Period(10, 2023)),
        ("What did she show on October 13, 2023?", when.Period(10, 2023, 13)),
        ("the talk on 3rd of September", when.Period(9, 0, 3)),
        ("In May she moved", when.Period(5)),
        ("In March and in August", when.Period(3)),
        ("what may she do if they march on an august day", None),
        ("nothing dated here, 2023 aside", None),
        ("on 45 July", when.Period(7)),  # no such day: the month only
    ],
)
def test_the_month_a_goal_names(text: str, period: when.Period | None) -> None:
    """A calendar month by name, its day and year when named; "may", "march" and "august" count only capitalised."""
    assert when.named_period(text) == period


def test_a_period_holds_the_moments_inside_it() -> None:
    june_27 = locomo_time_us("10:37 am on 27 June, 2023")
    assert when.Period(6).holds(june_27) and when.Period(6, 2023).holds(june_27)
    assert when.Period(6, 2023, 27).holds(june_27)
    assert not when.Period(6, 2022).holds(june_27) and not when.Period(6, 2023, 28).holds(june_27)
    assert not when.Period(7).holds(june_27) and not when.Period(6).holds(0)


def test_a_goal_naming_a_month_favours_what_was_said_in_it() -> None:
    """The same turn in two sessions, in May and in June: a goal naming June seeds June's first, one naming May
    May's (the month decides, not the order or the ids)."""
    node = memory_world().open_node()
    node.governance.add_principal(Principal("alice"))
    same = "We went camping by the lake with the kids."
    conversation = {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Melanie", "dia_id": "D1:1", "text": same}],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [{"speaker": "Melanie", "dia_id": "D2:1", "text": same}],
    }
    sample = {"sample_id": "conv-months", "conversation": conversation, "qa": []}
    Ingestor(node, Rules.load_default()).ingest(
        parsers.parse(json.dumps([sample]).encode(), "c.json", "locomo"), IngestOptions("alice"), NOW
    )
    hydrator = Hydrator(node)
    for month, dia in (("June", "D2:1"), ("May", "D1:1")):
        h = hydrator.hydrate(HydrationRequest(f"When did Melanie go camping in {month}?", "alice", NOW + 1, 400))
        first = max(h.receipt["facts"], key=lambda f: f["score"])
        assert node.store.get(first["unit"]).payload["dia_id"] == dia, month


def test_a_period_covers_the_periods_inside_it_as_far_as_both_say() -> None:
    march = when.Period(3, 2023)
    assert march.covers(when.named_period("March 2023")) and march.covers(when.named_period("13 March 2023"))
    assert march.covers(when.Period(3)) and when.Period(3).covers(march)
    assert not march.covers(when.named_period("April 2023")) and not march.covers(when.Period(3, 2022))
    assert not march.covers(None) and not when.Period(3, 2023, 13).covers(when.Period(3, 2023, 14))


def test_a_goal_naming_a_month_favours_what_a_turn_said_of_it_later() -> None:
    """Two turns said in April: one went to a convention "last month" (ingestion resolved it: March 2023), the other
    goes to one "next month" (May). A goal asking about March seeds the first; one asking about May, the second."""
    node = conversation_node(
        [
            ("Caroline", "My colleagues and I went to a convention last month."),
            ("Caroline", "My colleagues and I go to a convention next month."),
        ],
        date="1:56 pm on 10 April, 2023",
    )
    hydrator = Hydrator(node)
    for month, dia in (("March", "D1:1"), ("May", "D1:2")):
        h = hydrator.hydrate(
            HydrationRequest(f"What convention did Caroline attend in {month} 2023?", "alice", NOW + 1, 400)
        )
        first = max(h.receipt["facts"], key=lambda f: f["score"])
        assert node.store.get(first["unit"]).payload["dia_id"] == dia, month


@pytest.mark.parametrize(
    ("goal", "asks"),
    [
        ("When did Caroline go to the LGBTQ support group?", True),
        ("when was the last deploy of the billing service", True),
        ("  So when is Melanie's charity race?", True),
        ("What year did Jon start his dance studio?", True),
        ("In which month did Gina open her store?", True),
        ("On what date did we rotate the API keys?", True),
        ("How long ago was Caroline's 18th birthday?", True),
        ("Hey, when will the movers come?", True),
        ("When Jon has lost his job as a banker?", True),
        ("When it is late, what should we skip?", False),
        ("How many years ago did Caroline move from Sweden?", True),
        ("Do you remember when we rotated the keys?", True),
        ("Can you tell me when the staging DB moved?", True),
        ("How long has Caroline had her friends?", False),  # a duration, not a moment
        ("What did Melanie say when Caroline called?", False),  # "when" inside a clause
        ("When the build fails, what should I check?", False),  # a clause first, then the question
        ("When deploying, which config applies?", False),
        ("Whenever the build fails, what do we check?", False),
        ("What date format does the API expect?", False),
        ("Which day-care did Melanie pick?", False),
        ("What is Caroline's identity?", False),
        ("", False),
    ],
)
def test_a_goal_that_asks_when(goal: str, asks: bool) -> None:
    assert when.asks_when(goal) is asks


def test_a_goal_that_asks_when_favours_the_turn_that_says_when(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two turns about the same support group (apart); only the first dates it ("yesterday", resolved at ingest). A goal
    asking when scores that turn :data:`WHEN_BOOST` more and seeds it first; the other keeps its score, and a goal
    that does not ask when scores both as before."""
    node = conversation_node(
        [
            ("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
            ("Melanie", "That's lovely! I painted a lake sunrise with the kids."),
            ("Caroline", "The support group is great and the people in the group are so kind."),
        ]
    )
    hydrator = Hydrator(node)
    dia = {a.id: a.payload["dia_id"] for a in node.store.get_many(node.store.live_ids()) if a and "dia_id" in a.payload}

    def scores(goal: str) -> dict[str, float]:
        h = hydrator.hydrate(HydrationRequest(goal, "alice", NOW + 1, 400))
        return {dia[f["unit"]]: f["score"] for f in h.receipt["facts"] if f["unit"] in dia}

    asking, other = "When did Caroline go to the support group?", "Did Caroline go to the support group?"
    boosted, plain = scores(asking), scores(other)
    monkeypatch.setattr("gaml.node.core.hydrate.WHEN_BOOST", 1.0)
    unboosted = scores(asking)
    assert boosted["D1:1"] == pytest.approx(WHEN_BOOST * unboosted["D1:1"], rel=1e-4)  # scores are rounded
    assert boosted["D1:3"] == pytest.approx(unboosted["D1:3"], rel=1e-4)
    assert max(unboosted, key=unboosted.__getitem__) == "D1:3", unboosted  # without the boost, the other leads
    assert max(boosted, key=boosted.__getitem__) == "D1:1", boosted
    assert plain == scores(other)  # not asking when: WHEN_BOOST changes nothing
