"""Curation's pure content: arcs, and the L1/L2/L3 rungs and session rollup compiled from them."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from gaml.node.core.memory.curate import (
    Arc,
    ExtractiveCurator,
    Item,
    Rung,
    clip,
    curate_source,
    form_arcs,
    split_speaker,
)

HOUR_US = 3600 * 10**6
T0 = 1_700_000_000_000_000
SRC = "transcript:s1"


def item(
    position: int,
    text: str,
    *,
    goal: str = "set up the database",
    kind: str = "message",
    speaker: str = "assistant",
    role: str = "assistant",
    time: int | None = None,
    source_id: str = SRC,
    entities: tuple[str, ...] = (),
    tags: tuple[str, ...] = (),
) -> Item:
    return Item(
        id=f"id{position:03d}",
        source_id=source_id,
        position=position,
        text=text,
        speaker=speaker,
        role=role,
        kind=kind,
        goal=goal,
        time=T0 + position * 60 * 10**6 if time is None else time,
        entities=entities,
        tags=tags,
        start=position * 100,
        end=position * 100 + len(text),
    )


def coding_session() -> list[Item]:
    db = "set up the database"
    ci = "fix the CI pipeline"
    return [
        item(
            0, "Please set up the database for the billing service.", goal=db, kind="goal", speaker="user", role="user"
        ),
        item(1, "We decided to use Postgres 16. It supports the JSON features the billing service needs.", goal=db),
        item(2, "ok", goal=db, kind="noise", speaker="user", role="user"),
        item(
            3,
            "Never commit secrets. Keep the database password in the environment.",
            goal=db,
            speaker="user",
            role="user",
        ),
        item(4, "All tests pass now.", goal=db, kind="conclusion"),
        item(
            5,
            "The CI pipeline fails on the lint step, please fix it.",
            goal=ci,
            kind="goal",
            speaker="user",
            role="user",
        ),
        item(
            6,
            "ruff check reported 3 errors in node/store.py.",
            goal=ci,
            kind="tool_result",
            speaker="tool",
            role="tool",
        ),
        item(7, "I fixed the imports in node/store.py and the lint step passes now.", goal=ci, kind="conclusion"),
    ]


def by_key(rungs: Sequence[Rung]) -> dict[str, Rung]:
    return {r.key: r for r in rungs}


# --- arcs -----------------------------------------------------------------------------------------------------------


def test_arcs_split_on_goal_change() -> None:
    """A new arc starts where the goal changes; each arc carries its goal and its key is source#first position."""
    arcs = form_arcs(coding_session())
    assert [a.goal for a in arcs] == ["set up the database", "fix the CI pipeline"]
    assert [[it.position for it in a.items] for a in arcs] == [[0, 1, 2, 3, 4], [5, 6, 7]]
    assert [a.key for a in arcs] == [f"{SRC}#0", f"{SRC}#5"]


def test_arcs_split_on_time_gap() -> None:
    """A gap between consecutive timed items longer than max_gap_us starts a new arc; untimed items bridge nothing."""
    items = [
        item(0, "first", time=T0),
        item(1, "second", time=T0 + HOUR_US),
        item(2, "untimed", time=0),
        item(3, "after the gap", time=T0 + 8 * HOUR_US),
        item(4, "right after", time=T0 + 8 * HOUR_US + 1),
    ]
    arcs = form_arcs(items, max_gap_us=6 * HOUR_US)
    assert [[it.position for it in a.items] for a in arcs] == [[0, 1, 2], [3, 4]]
    assert len(form_arcs(items, max_gap_us=10 * HOUR_US)) == 1


def test_arcs_split_at_max_items() -> None:
    """An arc never holds more than max_items items."""
    items = [item(i, f"step {i} of the migration") for i in range(7)]
    arcs = form_arcs(items, max_items=3)
    assert [len(a.items) for a in arcs] == [3, 3, 1]
    assert [a.key for a in arcs] == [f"{SRC}#0", f"{SRC}#3", f"{SRC}#6"]


def test_every_item_in_exactly_one_arc_in_order() -> None:
    """Arcs partition the items: each item once, in position order, whatever the input order."""
    items = coding_session()
    arcs = form_arcs(list(reversed(items)), max_items=2)
    flat_ids = [it.id for a in arcs for it in a.items]
    assert flat_ids == [it.id for it in items]
    # At most max_items items, except that trailing noise joins a full arc (up to twice as many) rather than
    # opening an arc of noise alone.
    assert all(len(a.items) <= 4 and sum(not it.is_noise for it in a.items) <= 2 for a in arcs)


def test_noise_joins_its_arc_without_breaking_it() -> None:
    """A noise item with another goal stays in the arc it falls in; the arc's goal is its first non-noise item's."""
    items = [
        item(0, "ok", kind="noise", goal=""),
        item(1, "We use Postgres 16."),
        item(2, "thanks", kind="noise", goal="something else"),
        item(3, "Migrations run on start."),
    ]
    arcs = form_arcs(items)
    assert len(arcs) == 1
    assert arcs[0].goal == "set up the database"
    assert [it.id for it in arcs[0].content] == ["id001", "id003"]


def test_form_arcs_rejects_mixed_sources_and_duplicate_positions() -> None:
    """form_arcs takes the items of one source, at distinct positions."""
    with pytest.raises(ValueError, match="one source"):
        form_arcs([item(0, "a"), item(1, "b", source_id="other")])
    with pytest.raises(ValueError, match="position"):
        form_arcs([item(0, "a"), item(0, "b")])
    assert form_arcs([]) == []


def test_item_validates_kind() -> None:
    """An item of an unknown kind is refused."""
    with pytest.raises(ValueError, match="kind"):
        item(0, "x", kind="chatter")


# --- rungs ----------------------------------------------------------------------------------------------------------


def test_each_arc_gets_l1_l2_l3_with_its_item_ids() -> None:
    """Every arc has an l1, l2 and l3 rung whose sources are exactly the arc's item ids, noise included."""
    items = coding_session()
    rungs = curate_source(items)
    keys = by_key(rungs)
    for arc in form_arcs(items):
        ids = tuple(it.id for it in arc.items)
        for level in ("l1", "l2", "l3"):
            rung = keys[f"{level}:arc:{arc.key}"]
            assert rung.sources == ids
            assert rung.goal == arc.goal
            assert rung.text and rung.payload["text"] == rung.text
    covered = {s for r in rungs if r.role == "arc" for s in r.sources}
    assert covered == {it.id for it in items}


def test_rung_order() -> None:
    """Rungs come per arc as l1, l2, l3 (then long items' l1), and the session rollup last."""
    rungs = curate_source(coding_session())
    assert [(r.level, r.role) for r in rungs] == [("l1", "arc"), ("l2", "arc"), ("l3", "arc")] * 2 + [("l2", "session")]


def test_l2_picks_decision_constraint_outcome() -> None:
    """The L2 distillation of a coding-agent arc lists its decision, constraint and outcome, and renders them."""
    rungs = by_key(curate_source(coding_session()))
    l2 = rungs[f"l2:arc:{SRC}#0"]
    p = l2.payload
    assert any("Postgres 16" in d for d in p["decisions"])
    assert any("Never commit secrets" in c for c in p["constraints"])
    assert any("All tests pass" in o for o in p["outcomes"])
    assert set(p) >= {"text", "goal", "entities", "decisions", "constraints", "outcomes", "errors", "speakers", "span"}
    assert p["goal"] == "set up the database"
    assert p["span"] == [T0, T0 + 4 * 60 * 10**6]
    assert p["speakers"] == ["user", "assistant"]
    assert l2.text.startswith("Goal: set up the database.")
    for part in ("Decisions:", "Postgres 16", "Constraints:", "Outcomes:"):
        assert part in l2.text
    assert len(l2.text) <= 600
    json.dumps(p)  # JSON-able


def test_l3_skeleton_points_at_the_items() -> None:
    """The L3 skeleton names the arc's span and points at each content item's verbatim bytes."""
    rungs = by_key(curate_source(coding_session()))
    l3 = rungs[f"l3:arc:{SRC}#5"]
    assert l3.text.startswith("[arc 1 items 5-7] goal: fix the CI pipeline")
    assert [p["id"] for p in l3.payload["pointers"]] == ["id005", "id006", "id007"]
    assert l3.payload["pointers"][1] == {"id": "id006", "source_id": SRC, "start": 600, "end": 646, "position": 6}
    assert l3.payload["tags"] == list(l3.tags)
    assert len(l3.text) <= 400


def test_item_l1_only_for_long_items() -> None:
    """Only non-noise items longer than item_summary_over get their own L1, derived from that item alone."""
    long_text = (
        "I looked at the failing migration in detail. The schema change drops the invoices index before the "
        "backfill finishes, so the backfill scans the whole table. We decided to keep the index until the backfill "
        "completes and to drop it in a follow-up migration. The staging run took four minutes after the change."
    )
    items = [
        item(0, "Why is the migration slow?", speaker="user", role="user"),
        item(1, long_text),
        item(2, "x " * 200, kind="noise"),
    ]
    assert len(long_text) > 280
    rungs = curate_source(items, item_summary_over=280)
    item_rungs = [r for r in rungs if r.role == "item"]
    assert [r.key for r in item_rungs] == ["l1:item:id001"]
    assert item_rungs[0].sources == ("id001",)
    assert item_rungs[0].level == "l1"
    assert 0 < len(item_rungs[0].text) <= 200
    assert [r for r in curate_source(items, item_summary_over=10_000) if r.role == "item"] == []


def test_session_rollup() -> None:
    """One l2 session rung joins the arcs' L1 sentences; its sources are the non-noise item ids."""
    items = coding_session()
    rungs = curate_source(items)
    session = rungs[-1]
    assert session.key == f"l2:session:{SRC}"
    assert (session.level, session.role) == ("l2", "session")
    l1s = [r.text for r in rungs if r.level == "l1" and r.role == "arc"]
    assert session.text == " ".join(l1s)
    assert session.sources == tuple(it.id for it in items if it.kind != "noise")
    assert session.payload["arcs"] == [f"{SRC}#0", f"{SRC}#5"]
    assert session.payload["goals"] == ["set up the database", "fix the CI pipeline"]
    assert len(session.text) <= 800


def test_session_rollup_is_bounded() -> None:
    """A long session's rollup keeps head and tail within 800 characters."""
    items = [
        item(i, f"Decision {i}: we decided to rename module number {i} to a clearer name.", goal=f"g{i}")
        for i in range(40)
    ]
    session = curate_source(items)[-1]
    assert len(session.text) <= 800
    assert "module number 0" in session.text


def test_all_noise_source() -> None:
    """An all-noise source still gets its arc's three rungs (saying it is small talk) and a rollup over all ids."""
    items = [item(0, "ok", kind="noise"), item(1, "thanks", kind="noise")]
    rungs = curate_source(items)
    assert [r.key for r in rungs] == [f"l1:arc:{SRC}#0", f"l2:arc:{SRC}#0", f"l3:arc:{SRC}#0", f"l2:session:{SRC}"]
    assert all(r.sources == ("id000", "id001") for r in rungs)
    assert rungs[0].text.startswith("Small talk:") and "thanks" in rungs[0].text
    assert all(r.text for r in rungs)
    assert curate_source([]) == []


def test_noise_contributes_no_text() -> None:
    """Noise items are in the arc's sources but their words reach no summary, distillation or skeleton."""
    items = [
        item(0, "We decided to use Postgres 16 for the billing service."),
        item(1, "zebraquux zebraquux zebraquux Zanzibar", kind="noise"),
        item(2, "All tests pass now."),
    ]
    rungs = curate_source(items)
    assert "id001" in rungs[0].sources
    for r in rungs:
        blob = json.dumps(r.payload) + " ".join(r.entities) + " ".join(r.tags)
        assert "zebraquux" not in blob.lower()
        assert "zanzibar" not in blob.lower()


def test_determinism() -> None:
    """The same items give equal rungs in the same order."""
    assert curate_source(coding_session()) == curate_source(coding_session())
    assert curate_source(coding_session(), max_items=2) == curate_source(list(reversed(coding_session())), max_items=2)


def test_every_item_is_in_some_rung_sources() -> None:
    """Every L0 item id appears in the sources of its arc's rungs, whatever the arc bounds."""
    items = coding_session()
    for max_items in (1, 2, 5, 12):
        rungs = curate_source(items, max_items=max_items)
        assert {s for r in rungs for s in r.sources} == {it.id for it in items}


def test_summaries_within_limit_and_non_empty() -> None:
    """Every L1 is non-empty and at most summary_chars long, even for one huge sentence."""
    huge = "word " * 500
    items = [*coding_session(), item(8, huge, goal="fix the CI pipeline")]
    for limit in (40, 120, 200):
        for r in curate_source(items, summary_chars=limit):
            if r.level == "l1":
                assert 0 < len(r.text) <= limit


# --- the extractive curator -----------------------------------------------------------------------------------------


def test_extractive_prefers_decisions_over_chatter() -> None:
    """The extractive curator picks the decision, not the greeting or the question."""
    cur = ExtractiveCurator()
    texts = [
        "Hi there! How are you doing today?",
        "Should we use MySQL or Postgres for the billing database?",
        "We decided to use Postgres 16 for the billing database.",
    ]
    out = cur.summarize(texts, goal="choose the billing database", limit=200)
    assert out == "We decided to use Postgres 16 for the billing database."


def test_extractive_keeps_speaker_name() -> None:
    """A 'Name: text' input keeps the name on the sentence picked from it."""
    cur = ExtractiveCurator()
    texts = [
        "Melanie: Hey Caroline! Good to see you.",
        "Caroline: I went to the LGBTQ support group yesterday and it was really powerful.",
    ]
    out = cur.summarize(texts, goal="", limit=200)
    assert out.startswith("Caroline: ")
    assert "support group" in out


def test_extractive_falls_back_on_noise_only() -> None:
    """When no sentence qualifies, the head of the first text is returned, within the limit."""
    cur = ExtractiveCurator()
    out = cur.summarize(["ok", "ok"], goal="", limit=50)
    assert out
    assert len(out) <= 50
    with pytest.raises(ValueError):
        cur.summarize(["", "  "], goal="x", limit=50)


def test_extractive_trims_at_word_boundary() -> None:
    """A long sentence is cut at a word boundary and marked with an ellipsis."""
    cur = ExtractiveCurator()
    sentence = (
        "We decided to migrate the billing database to Postgres 16 after comparing replication options carefully."
    )
    out = cur.summarize([sentence], goal="", limit=40)
    assert len(out) <= 40
    assert out.endswith("…")
    assert sentence.startswith(out[:-1])
    assert out[:-1].rstrip() == out[:-1]


def test_clip_and_split_speaker() -> None:
    """clip never exceeds its limit; split_speaker recognises names, not labels."""
    assert clip("a b c", 10) == "a b c"
    assert len(clip("abcdefghijklmnopqrstuvwxyz", 10)) == 10
    assert split_speaker("Caroline: hello") == ("Caroline", "hello")
    assert split_speaker("Error: disk full") == ("", "Error: disk full")
    assert split_speaker("plain text") == ("", "plain text")


def test_arc_requires_items() -> None:
    """An arc has at least one item, all of its source."""
    with pytest.raises(ValueError):
        Arc(SRC, "g", ())


class EchoCurator:
    """A fake curator that answers with a fixed text, to test how curate_source treats a curator's answer."""

    name = "echo-1"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.calls: list[tuple[list[str], str, int]] = []

    def summarize(self, texts: Sequence[str], *, goal: str, limit: int) -> str:
        self.calls.append((list(texts), goal, limit))
        return self.answer


def test_curator_answers_are_bounded_and_never_empty() -> None:
    """A curator's overlong answer is clipped to the limit; an empty one is replaced by the extractive summary."""
    long = EchoCurator("The team chose Postgres 16 " + "and then wrote a great many more words " * 20)
    rungs = curate_source(coding_session(), long, summary_chars=80)
    l1s = [r for r in rungs if r.level == "l1"]
    assert l1s and all(0 < len(r.text) <= 80 for r in l1s)
    assert all(r.payload["curator"] == "echo-1" for r in l1s)
    assert long.calls[0][1] == "set up the database"
    empty = curate_source(coding_session(), EchoCurator("   "))
    assert by_key(empty)[f"l1:arc:{SRC}#0"].text == by_key(curate_source(coding_session()))[f"l1:arc:{SRC}#0"].text


def test_curator_sees_speaker_names_not_roles() -> None:
    """Texts reach the curator as 'Name: text' when the speaker is a name, and bare when it is the role."""
    echo = EchoCurator("A summary.")
    items = [
        item(0, "I went to the support group.", speaker="Caroline", role="user", goal=""),
        item(1, "That sounds powerful.", speaker="assistant", role="assistant", goal=""),
    ]
    curate_source(items, echo)
    assert echo.calls[0][0] == ["Caroline: I went to the support group.", "That sounds powerful."]


def test_every_payload_is_json() -> None:
    """Every rung's payload serialises to JSON and carries its text."""
    for r in curate_source(coding_session(), item_summary_over=40):
        assert json.loads(json.dumps(r.payload))["text"] == r.text
