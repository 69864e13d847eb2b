"""The ingestion pipeline (``node.ingest``): parsed sources become items, facts and watermarks, on RocksDB + hnswlib for
the main cases and on the pure core with fakes for the small ones."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json
import random
import string
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from gaml.node.core.embed import HashEmbedder, Prefetched
from gaml.node.core.memory import ingest as ingest_mod
from gaml.node.core.memory.ingest import (
    DEFAULT_SHARES,
    KINDS,
    WATERMARK,
    IngestOptions,
    Ingestor,
    Report,
    fact_id,
    parse_shares,
    slot_tag,
)
from gaml.node.core.memory.ladder import Ladder
from gaml.node.core.node import Node
from gaml.node.core.text import envelope, extract, parsers
from gaml.node.core.text.privacy import Rules
from gaml.node.core.text.records import Record, Source
from gaml.policy.errors import InvalidInput
from gaml.policy.model import Asset, AssetType, Level, PrivacyScope, item_id
from tests.node.conftest import NOW, memory_world, new_keychain, rocks_world
from tests.node.test_embed import Counting

MINUTE_US = 60 * 10**6
DAY_US = 24 * 60 * MINUTE_US
T0 = NOW  # 2023-11-14T22:13:20Z


# -- building inputs --------------------------------------------------------------------------------------------------


def iso(t_us: int) -> str:
    """An ISO-8601 timestamp (UTC) for ``t_us`` microseconds since the epoch."""
    return (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=t_us)).isoformat()


def line(role: str, content: Any, minute: int, session: str = "s1", t0: int = T0) -> dict[str, Any]:
    """A coding-agent session log line (Claude Code shape)."""
    return {
        "type": role,
        "sessionId": session,
        "timestamp": iso(t0 + minute * MINUTE_US),
        "message": {"role": role, "content": content},
    }


def tool_use(call_id: str, name: str, arguments: dict[str, Any], minute: int, session: str = "s1") -> dict[str, Any]:
    return line("assistant", [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}], minute, session)


def tool_result(call_id: str, output: str, minute: int, session: str = "s1", error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": output, "is_error": error}
    return line("user", [block], minute, session)


def jsonl(lines: Sequence[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


def transcript(lines: Sequence[dict[str, Any]], name: str = "session.jsonl") -> Source:
    (source,) = parsers.parse(jsonl(lines), name, "transcript")
    return source


def locomo(sessions: Sequence[Sequence[tuple[str, str]]], sample_id: str = "c1") -> list[Source]:
    """LoCoMo bytes (speakers Caroline and Melanie, one day between sessions), parsed."""
    conversation: dict[str, Any] = {"speaker_a": "Caroline", "speaker_b": "Melanie"}
    for n, turns in enumerate(sessions, start=1):
        conversation[f"session_{n}_date_time"] = f"1:56 pm on {n} May, 2023"
        conversation[f"session_{n}"] = [
            {"speaker": who, "dia_id": f"D{n}:{i + 1}", "text": text} for i, (who, text) in enumerate(turns)
        ]
    data = json.dumps([{"sample_id": sample_id, "conversation": conversation, "qa": []}]).encode()
    return parsers.parse(data, "locomo.json", "locomo")


# -- looking at the store ---------------------------------------------------------------------------------------------


def ingestor(node: Node) -> Ingestor:
    return Ingestor(node, Rules.load_default())


def all_assets(node: Node) -> list[Asset]:
    """Every asset record in the store (tombstones included), decrypted."""
    store = node.store
    return [store._open_record(k, blob) for k, blob in store.kv.load_range("assets")]


def item(node: Node, source: Source, position: int) -> Asset:
    return node.store.get(item_id(source.source_id, position))


def facts_of(node: Node, owner: str = "alice") -> list[Asset]:
    found = node.store.get_many(node.store.list_ids("type", AssetType.FACT.value))
    return sorted((a for a in found if a is not None and a.owner_id == owner), key=lambda a: (a.valid_from, a.id))


def drop_watermarks(node: Node) -> None:
    store = node.store
    store.write_meta({name: None for name, _ in store.scan_meta(WATERMARK)})
    assert not list(store.scan_meta(WATERMARK))


def watermark(ing: Ingestor, source: Source) -> dict[str, Any]:
    wm = ing.watermark(source.source_id)
    assert wm is not None
    return wm


def gated(ing: Ingestor, source: Source) -> dict[int, str]:
    return {pos: reason for pos, reason in watermark(ing, source)["gated"]}


@pytest.fixture
def rocks(tmp_path: Path) -> Iterator[Node]:
    """A node on RocksDB + hnswlib (HashEmbedder(64))."""
    node = rocks_world(tmp_path).open_node()
    yield node
    node.close()


def memory_node() -> Node:
    return memory_world().open_node()


ALICE = IngestOptions(owner="alice")


# -- LoCoMo ------------------------------------------------------------------------------------------------------------


def test_locomo_one_item_per_turn_with_context_and_idempotent(rocks: Node, locomo_path: Path) -> None:
    """Every LoCoMo turn becomes one L0 item with its speaker, session time, a goal, a source pointer and its dia_id;
    ingesting again writes nothing, even once every watermark is gone (ids derive from source and position)."""
    data = locomo_path.read_bytes()
    sources = parsers.parse(data, locomo_path.name)
    raw = {s["sample_id"]: s["conversation"] for s in json.loads(data)}
    turns = sum(len(s.records) for s in sources)
    assert turns == 3435
    ing = ingestor(rocks)
    ticks: list[int] = []
    report = ing.ingest(sources, ALICE, NOW, progress=ticks.append)
    assert report.items == turns and report.records == turns and sum(ticks) == turns
    assert report.gated == {} and report.skipped == 0

    l0 = [a for a in all_assets(rocks) if a.level is Level.L0]
    assert len(l0) == turns
    assert {a.id for a in l0} == {item_id(s.source_id, r.position) for s in sources for r in s.records}
    for source in sources:
        assert source.time > 0
        sample, session = source.meta["sample_id"], source.meta["session"]
        for r in source.records:
            a = item(rocks, source, r.position)
            turn = raw[sample][f"session_{session}"][r.start]
            assert a.payload["speaker"] == r.speaker == turn["speaker"]
            assert a.payload["dia_id"] == turn["dia_id"]
            assert a.created_at == source.time
            assert a.goal == f"session: {source.title}"  # a conversation between people: the session is the goal
            assert a.source is not None and a.source.source_id == source.source_id
            assert a.source.start == r.start and a.source.end == r.start + 1
            assert a.owner_id == "alice" and a.privacy_scope is PrivacyScope.USER_PRIVATE
    for fact in facts_of(rocks):
        assert fact.level is Level.L2 and len(fact.derived_from) == 1
        assert rocks.store.get(fact.derived_from[0]).level is Level.L0

    seq = rocks.store.seq
    ticks.clear()
    again = ing.ingest(sources, ALICE, NOW + DAY_US, progress=ticks.append)
    assert (again.items, again.skipped, again.written, again.dirty) == (0, turns, 0, [])
    assert rocks.store.seq == seq and sum(ticks) == turns

    drop_watermarks(rocks)
    rebuilt = ing.ingest(sources, ALICE, NOW + 2 * DAY_US)
    assert rebuilt.written == 0 and rebuilt.skipped == 0
    assert rocks.store.seq == seq
    assert len(ing.watermarks()) == len(sources)


# -- envelopes ---------------------------------------------------------------------------------------------------------


def coding_session() -> list[dict[str, Any]]:
    return [
        line("user", "Please fix the failing login test.", 0),
        line("assistant", "The login test fails because the session token fixture expired.", 1),
        line("assistant", "I refreshed the token fixture in tests/conftest.py and the login test passes.", 2),
    ]


def hydration(node: Node, source: Source) -> str:
    """What hydration would inject: an envelope quoting the source's items, with blank lines in its body."""
    quoted = "\n\n".join(f"[{item(node, source, r.position).id[:8]}] {r.text}" for r in source.records)
    return envelope.wrap(f"Relevant memory:\n\n{quoted}\n\nEnd of memory.", "r_1", "node:x")


def test_envelopes_fed_back_add_nothing(rocks: Node) -> None:
    """Hydration output fed back (as a user or assistant message, as a notes file, nested, truncated, or as the stray
    tail of one) adds no item: nothing is written and each record is gated as "envelope" in the watermark."""
    ing = ingestor(rocks)
    lines = coding_session()
    first = transcript(lines)
    ing.ingest([first], ALICE, NOW)
    frame = hydration(rocks, first)
    nested = "<gaml-memory receipt='r_2'>outer <gaml-memory receipt='r_3'>inner memory</gaml-memory> more</gaml-memory>"
    fed_back = [
        frame,  # as a user message
        frame,  # as an assistant message (below)
        envelope.wrap(frame, "r_4", "node:x"),  # an envelope in an envelope (its tags escaped)
        nested,  # nested, counted
        frame[: len(frame) // 2],  # truncated: never closed
        frame[len(frame) // 2 :],  # the tail of one: a stray closing tag
        "  " + frame + "\n",
    ]
    seq = rocks.store.seq
    for k, text in enumerate(fed_back):
        role = "assistant" if k == 1 else "user"
        lines.append(line(role, text, 10 + k))
        grown = transcript(lines)
        report = ing.ingest([grown], ALICE, NOW + k)
        position = len(grown.records) - 1
        assert (report.items, report.written, report.gated) == (0, 0, {"envelope": 1}), k
        assert report.envelopes == 1 and report.skipped == position
        assert gated(ing, grown)[position] == "envelope"
        assert rocks.store.seq == seq

    notes = parsers.parse(f"{frame}\n".encode(), "memory.md", "text")
    assert len(notes[0].records) > 3  # the frame's body is split into paragraphs
    report = ing.ingest(notes, ALICE, NOW)
    assert report.items == 0 and report.gated == {"envelope": len(notes[0].records)}
    assert set(gated(ing, notes[0]).values()) == {"envelope"}
    assert rocks.store.seq == seq


def test_envelope_inside_a_message_is_cut_out(rocks: Node) -> None:
    """A message holding the user's own words around an envelope becomes an item with only the user's words; a notes
    file keeps its own paragraphs around a pasted frame."""
    ing = ingestor(rocks)
    lines = coding_session()
    first = transcript(lines)
    ing.ingest([first], ALICE, NOW)
    frame = hydration(rocks, first)
    lines.append(line("user", f"Before you start: {frame} Also rename the helper to login_user.", 10))
    report = ing.ingest([transcript(lines)], ALICE, NOW)
    assert report.items == 1 and report.envelopes == 1
    text = item(rocks, first, len(lines) - 1).payload["text"]
    assert text == "Before you start:  Also rename the helper to login_user."
    body_lines = [ln for ln in frame.splitlines() if ln.strip()]
    assert not any(ln in text for ln in body_lines)

    notes = parsers.parse(f"My own note on the login flow.\n\n{frame}\n\nA second note of mine.\n".encode(), "n.md")
    report = ing.ingest(notes, ALICE, NOW)
    assert report.items == 2
    kept = [item(rocks, notes[0], p).payload["text"] for p in watermark(ing, notes[0])["items"]]
    assert kept == ["My own note on the login flow.", "A second note of mine."]


def test_malformed_envelope_stays_inside_its_message() -> None:
    """A truncated envelope does not swallow the messages after it, nor a stray closing tag the messages before it,
    and ingesting the session at once or line by line gives the same items."""
    frame = envelope.wrap("Earlier memory: the token fixture expired.", "r_1", "node:x")
    lines = [
        line("user", "Please fix the failing login test.", 0),
        line("user", "Context: " + frame[:30], 1),  # cut off: never closed
        line("user", "The token fixture lives in tests/conftest.py.", 2),
        line("user", frame[20:] + " and check the CI config too", 3),  # the tail of one: a stray close
        line("assistant", "I found the bug in the token refresh.", 4),
    ]
    source = transcript(lines)
    at_once = memory_node()
    report = ingestor(at_once).ingest([source], ALICE, NOW)
    assert report.items == 5 and report.envelopes == 2 and report.gated == {}
    texts = [item(at_once, source, p).payload["text"] for p in range(5)]
    assert texts[1] == "Context: " and texts[2] == "The token fixture lives in tests/conftest.py."
    assert texts[3] == " and check the CI config too" and texts[0] == "Please fix the failing login test."

    growing = memory_node()
    ing = ingestor(growing)
    for n in range(1, len(lines) + 1):
        ing.ingest([transcript(lines[:n])], ALICE, NOW)
    assert [item(growing, source, p).payload for p in range(5)] == [item(at_once, source, p).payload for p in range(5)]


def test_a_note_that_mentions_the_tag_keeps_its_other_paragraphs() -> None:
    """In a notes file, a bare mention of the tag (no receipt: not a frame hydration wrote) cuts at most its own
    paragraph; a pasted frame, even cut off before its end, still takes every paragraph it spans."""
    node = memory_node()
    ing = ingestor(node)
    mention = (
        b"# Design\n\nThe node wraps injected memory in a <gaml-memory> element.\n\n"
        b"Ingestion strips it first.\n\nA stray </gaml-memory> in prose.\n\nThe journal is durable.\n"
    )
    (src,) = parsers.parse(mention, "design.md", "text")
    report = ing.ingest([src], ALICE, NOW)
    texts = [item(node, src, p).payload["text"] for p in range(4)]
    assert report.items == 4 and texts[1] == "Ingestion strips it first." and texts[3] == "The journal is durable."
    assert texts[0] == "The node wraps injected memory in a " and texts[2] == " in prose."
    frame = envelope.wrap("Remembered: the deploy key rotates monthly.\n\nSecond remembered paragraph.", "r_9", "n")
    pasted = ("Before the frame.\n\n" + frame[: len(frame) - 20]).encode()  # cut off: never closed
    (src2,) = parsers.parse(pasted, "pasted.md", "text")
    ing.ingest([src2], ALICE, NOW)
    kept = [a.payload["text"] for a in node.store.get_many([item_id(src2.source_id, p) for p in range(3)]) if a]
    assert kept == ["Before the frame."]


# -- secrets -----------------------------------------------------------------------------------------------------------


def clipped_through(secret: str, into: int) -> str:
    """Minified JSON (no whitespace) longer than the tool-output limit, whose clipped tail starts ``into`` characters
    into ``secret``."""
    budget = ALICE.tool_chars - len(extract.ELLIPSIS_JOIN)
    tail_chars = budget - int(budget * extract.HEAD_SHARE)
    rest = tail_chars - (len(secret) - into) - len('","rest":""}')
    return '{"data":"' + "x" * ALICE.tool_chars + f'","api_key":"{secret}","rest":"' + "y" * rest + '"}'


def secrets_sources(rng: random.Random) -> tuple[list[Source], dict[str, str]]:
    """A coding session and a notes file full of credentials and an e-mail address; and the secrets."""
    alnum = string.ascii_letters + string.digits
    openai = "sk-proj-" + "".join(rng.choice(alnum) for _ in range(38)) + "7Q"
    other = "sk-proj-" + "".join(rng.choice(alnum) for _ in range(38)) + "3Z"
    github = "ghp_" + "".join(rng.choice(alnum) for _ in range(36))
    aws = "AKIA" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(16))
    pem_body = "\n".join("".join(rng.choice(alnum + "+/") for _ in range(64)) for _ in range(6))
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----"
    email = "bob.smith@example.com"
    lines = [
        line("user", f"Please rotate the key {openai} and mail {email} the result.", 0, "sec"),
        tool_use("t1", "Bash", {"command": f"export AWS_ACCESS_KEY_ID={aws} && aws s3 ls"}, 1, "sec"),
        tool_result("t1", "2024-01-01 bucket-a\n2024-01-02 bucket-b", 2, "sec"),
        line("user", "password: hunter2-Xy!9", 3, "sec"),
        tool_use("t2", "Read", {"file_path": "deploy/id_rsa"}, 4, "sec"),
        tool_result("t2", f"{pem}\n", 5, "sec"),
        line("user", f"My email is {email}.", 6, "sec"),
        line("assistant", f"I will send the deploy report to {email} when it is done.", 7, "sec"),
        tool_use("t3", "Bash", {"command": "curl -s https://api.example.com/v1/config"}, 8, "sec"),
        tool_result("t3", clipped_through(other, 20), 9, "sec"),
        line("assistant", "The key is rotated and the config endpoint answers.", 10, "sec"),
    ]
    notes = f"# Deploy with {github} (ask {email})\n\nThe deploy runs every Friday at noon.\n".encode()
    sources = [transcript(lines), *parsers.parse(notes, "deploy.md")]
    secrets = {"openai": openai, "other": other, "github": github, "aws": aws, "pem": pem_body}
    return sources, {**secrets, "password": "hunter2-Xy!9", "email": email}


def pieces(secret: str, width: int = 12) -> set[str]:
    """Every ``width``-character piece of a secret (its PEM lines taken one by one)."""
    out: set[str] = set()
    for part in secret.splitlines():
        out.update(part[i : i + width] for i in range(max(1, len(part) - width + 1)))
    return out


def test_secrets_never_stored_and_personal_data_stays_local(rocks: Node) -> None:
    """Credentials are redacted before anything is stored: in items, facts, goal labels and parser meta, and where a
    long output is clipped through a key. The e-mail address keeps its items and the facts derived from them
    local-only and appears in no shared asset. Neither the watermark nor the report holds a secret."""
    sources, secrets = secrets_sources(random.Random(0))
    ing = ingestor(rocks)
    report = ing.ingest(sources, IngestOptions(owner="alice", scope=PrivacyScope.SHARED), NOW)
    assert report.redactions == 5 and report.local_only == 3
    email = secrets.pop("email")
    forbidden = {p for s in secrets.values() for p in pieces(s)}
    assets = all_assets(rocks)
    assert len(assets) == report.items + report.facts
    for a in assets:
        blob = json.dumps(a.to_dict(), default=str)
        assert not [p for p in forbidden if p in blob], (a.id, a.payload)
        if email in blob:
            assert a.privacy_scope is PrivacyScope.LOCAL_ONLY, a.payload
    with_email = [a for a in assets if a.level is Level.L0 and email in a.payload["text"]]
    assert len(with_email) == 3 and all(a.privacy_scope is PrivacyScope.LOCAL_ONLY for a in with_email)
    email_facts = [f for f in facts_of(rocks) if set(f.derived_from) & {a.id for a in with_email}]
    assert [f.payload["value"] for f in email_facts] == [email]
    assert all(f.privacy_scope is PrivacyScope.LOCAL_ONLY for f in email_facts)
    others = [a for a in assets if a.level is Level.L0 and a not in with_email]
    assert len(others) == 9 and all(a.privacy_scope is PrivacyScope.SHARED for a in others)
    goal = "Please rotate the key [REDACTED:openai_key] and mail [REDACTED:email] the result."
    assert {a.goal for a in assets if a.payload.get("session") == "transcript:sec"} == {goal}
    (note,) = [a for a in others if a.payload["session"] == "notes:deploy.md"]
    assert note.payload["section"] == "Deploy with [REDACTED:github_token] (ask [REDACTED:email])"

    records = json.dumps([d.decode() for _, d in rocks.store.scan_meta(WATERMARK)])
    records += json.dumps(report.to_json())
    assert not [p for p in forbidden | {email} if p in records]


# -- temporal tracking -------------------------------------------------------------------------------------------------


def said(text: str, minute: int, session: str) -> Source:
    return transcript([line("user", text, minute, session)], f"{session}.jsonl")


def test_new_value_supersedes_and_negation_contradicts(rocks: Node) -> None:
    """A new value for a slot supersedes the old fact (its validity closes at the new fact's time), a negation of the
    current value contradicts it; within one source as across ingests; and re-deriving writes nothing."""
    ing = ingestor(rocks)
    ing.ingest([said("My favorite color is blue.", 0, "a")], ALICE, NOW)
    (blue,) = facts_of(rocks)
    assert blue.payload["value"] == "blue" and slot_tag("user", "favorite color") in blue.tags
    lines = [line("user", "My favorite color is green.", 60, "b")]
    report = ing.ingest([transcript(lines, "b.jsonl")], ALICE, NOW)
    assert report.superseded == 1
    blue, green = facts_of(rocks)
    assert green.payload["value"] == "green" and blue.version == 2
    assert rocks.store.edges(green.id) == [("derived_from", item_id("transcript:b", 0)), ("supersedes", blue.id)]
    assert ("supersedes", green.id) in rocks.store.edges(blue.id, reverse=True)
    assert blue.valid_to == green.valid_from == green.created_at == T0 + 60 * MINUTE_US
    assert rocks.store.superseded == {blue.id: {green.id}}

    lines.append(line("user", "My favorite color is not green.", 120, "b"))
    report = ing.ingest([transcript(lines, "b.jsonl")], ALICE, NOW)
    assert (report.contradicted, report.superseded, report.skipped) == (1, 0, 1)
    negation = rocks.store.get(fact_id("transcript:b", 1, 0))
    assert negation.payload["negated"] and ("contradicts", green.id) in rocks.store.edges(negation.id)
    assert green.id not in rocks.store.superseded and rocks.store.get(green.id).valid_to == 0

    lines.append(line("user", "My favorite color is yellow.", 180, "b"))
    report = ing.ingest([transcript(lines, "b.jsonl")], ALICE, NOW)
    yellow = rocks.store.get(fact_id("transcript:b", 2, 0))
    assert yellow.supersedes == (green.id,), "a contradiction never holds the slot"

    one = transcript([line("user", f"My favorite drink is {d}.", m, "c") for m, d in ((0, "tea"), (1, "coffee"))])
    ing.ingest([one], ALICE, NOW)
    tea, coffee = (rocks.store.get(fact_id("transcript:c", p, 0)) for p in (0, 1))
    assert coffee.supersedes == (tea.id,) and tea.valid_to == coffee.valid_from and tea.version == 1

    seq = rocks.store.seq
    drop_watermarks(rocks)
    everything = [said("My favorite color is blue.", 0, "a"), transcript(lines, "b.jsonl"), one]
    assert ing.ingest(everything, ALICE, NOW + DAY_US).written == 0
    assert rocks.store.seq == seq


def test_a_rewritten_record_takes_back_the_facts_it_no_longer_states() -> None:
    """A record rewritten in place so that it no longer states a fact retracts that fact (tombstoned, the slot free
    again); its other facts, and other records' facts, stay."""
    node = memory_node()
    ing = ingestor(node)
    first = [line("user", "My favorite color is blue.", 0), line("user", "My editor is vim.", 1)]
    ing.ingest([transcript(first)], ALICE, NOW)
    blue, vim = facts_of(node)
    assert (blue.payload["value"], vim.payload["value"]) == ("blue", "vim")
    rewritten = [line("user", "I went hiking on Sunday.", 0), first[1]]
    report = ing.ingest([transcript(rewritten)], ALICE, NOW)
    assert report.rewritten == [transcript(first).source_id] and report.retracted == 1
    assert node.store.get(blue.id, include_deleted=True).tombstone
    assert [f.id for f in facts_of(node)] == [vim.id]
    # the slot is free again: a new statement holds it without superseding anything
    ing.ingest([said("My favorite color is green.", 5, "b")], ALICE, NOW)
    (green,) = [f for f in facts_of(node) if f.payload["value"] == "green"]
    assert green.supersedes == ()


def test_a_source_rewritten_shorter_takes_back_its_lost_items() -> None:
    """A transcript truncated in place (or whose record now yields no item) leaves no orphan item behind: the items
    it no longer has, and their facts, are tombstoned, and the source is marked for curation again."""
    node = memory_node()
    ing = ingestor(node)
    lines = [line("user", "Please fix the login test.", 0), line("user", "My editor is vim.", 1)]
    lines += [line("assistant", f"Step {i} is done.", 2 + i) for i in range(3)]
    ing.ingest([transcript(lines)], ALICE, NOW)
    src = transcript(lines)
    assert len([f for f in facts_of(node) if f.payload["value"] == "vim"]) == 1
    Ladder(node, ing).curate(NOW)
    report = ing.ingest([transcript(lines[:1] + lines[2:3])], ALICE, NOW)
    assert report.rewritten == [src.source_id] and report.retracted >= 3  # vim's fact, the last two steps
    live = {i for i in range(5) if node.store.get_many([item_id(src.source_id, i)])[0] is not None}
    assert live == {0, 1}
    assert [f for f in facts_of(node) if f.payload["value"] == "vim"] == []  # its record now says something else
    for f in facts_of(node):  # no fact of a lost item
        assert all(node.store.get_many([i])[0] is not None for i in f.derived_from)
    assert watermark(ing, src)["dirty"] and watermark(ing, src)["items"] == [0, 1]


def test_duplicate_sources_and_secret_titles() -> None:
    """Two inputs that are the same source are refused before anything is written; a secret or an email in a
    source's title (a chat's title, a file name) is masked wherever the title goes."""
    node = memory_node()
    ing = ingestor(node)
    src = transcript([line("user", "Please fix the login test.", 0)])
    with pytest.raises(InvalidInput, match="same source"):
        ing.ingest([src, src], ALICE, NOW)
    assert all_assets(node) == []
    secret = "sk-proj-" + "Ab3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5"
    titled = dataclasses.replace(src, title=f"deploy with {secret} for bob@example.com")
    ing.ingest([titled], dataclasses.replace(ALICE, scope=PrivacyScope.SHARED), NOW)
    blob = json.dumps([a.to_dict() for a in all_assets(node)]) + json.dumps(ing.watermarks())
    assert secret[:16] not in blob and "bob@example.com" not in blob and "REDACTED" in blob


def test_a_restated_value_leaves_one_fact_holding_the_slot() -> None:
    """Restating the current value supersedes the earlier statement too, so after a change no stale statement of the
    old value stays open."""
    node = memory_node()
    ing = ingestor(node)
    for minute, color in ((0, "blue"), (1, "blue"), (2, "green")):
        ing.ingest([said(f"My favorite color is {color}.", minute, f"s{minute}")], ALICE, NOW)
    first, again, green = facts_of(node)
    assert again.supersedes == (first.id,) and green.supersedes == (again.id,)
    assert (first.valid_to, again.valid_to, green.valid_to) == (again.valid_from, green.valid_from, 0)
    assert set(node.store.superseded) == {first.id, again.id}


def test_facts_of_different_speakers_or_owners_do_not_supersede() -> None:
    """In a conversation, two speakers' claims about the same attribute are two slots; and one owner's facts never
    supersede another owner's."""
    node = memory_node()
    ing = ingestor(node)
    (conversation,) = locomo(
        [[("Caroline", "My favorite color is blue."), ("Melanie", "My favorite color is green.")]],
    )
    report = ing.ingest([conversation], ALICE, NOW)
    assert (report.facts, report.superseded) == (2, 0)
    caroline, melanie = (node.store.get(fact_id(conversation.source_id, p, 0)) for p in (0, 1))
    assert (caroline.payload["entity"], melanie.payload["entity"]) == ("caroline", "melanie")
    assert caroline.supersedes == melanie.supersedes == () and caroline.valid_to == melanie.valid_to == 0

    ing.ingest([said("My favorite color is blue.", 0, "a")], ALICE, NOW)
    report = ing.ingest([said("My favorite color is green.", 60, "b")], IngestOptions(owner="bob"), NOW)
    assert report.superseded == 0 and node.store.superseded == {}
    (alice_blue,) = [f for f in facts_of(node) if f.payload["entity"] == "user"]
    assert alice_blue.valid_to == 0 and alice_blue.version == 1


def test_an_older_session_ingested_later_does_not_override() -> None:
    """A session ingested after a later one does not supersede the later fact; its own fact closes where the later
    one begins."""
    node = memory_node()
    ing = ingestor(node)
    ing.ingest([said("My favorite color is green.", 60, "late")], ALICE, NOW)
    ing.ingest([said("My favorite color is blue.", 0, "early")], ALICE, NOW)
    blue, green = facts_of(node)
    assert blue.supersedes == () and node.store.superseded == {}
    assert blue.valid_to == green.valid_from and green.valid_to == 0 and green.version == 1


def test_a_stored_fact_between_two_new_ones_takes_its_turn() -> None:
    """A session ingested later whose two statements straddle a stored one of another session (blue at 0, green
    stored at 30, red at 60): blue closes where green begins, red supersedes green; one fact holds the slot at a
    time."""
    node = memory_node()
    ing = ingestor(node)
    ing.ingest([said("My favorite color is green.", 30, "middle")], ALICE, NOW)
    lines = [
        line("user", "My favorite color is blue.", 0, "straddle"),
        line("user", "My favorite color is red.", 60, "straddle"),
    ]
    ing.ingest([transcript(lines, "straddle.jsonl")], ALICE, NOW)
    blue, green, red = facts_of(node)
    assert [f.payload["value"] for f in (blue, green, red)] == ["blue", "green", "red"]
    assert blue.valid_to == green.valid_from and green.valid_to == red.valid_from and red.valid_to == 0
    assert red.supersedes == (green.id,) and blue.supersedes == ()
    windows = sorted((f.valid_from, f.valid_to or 2**62) for f in (blue, green, red))
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(windows))  # no two open at once


# -- goals, kinds, clipping --------------------------------------------------------------------------------------------


def agent_session(long_text: str) -> list[dict[str, Any]]:
    return [
        line("user", "Please fix the failing login test", 0),
        line("assistant", "The login test fails because the session token fixture expired.", 1),
        tool_use("t1", "Bash", {"command": "pytest tests/test_login.py"}, 2),
        tool_result("t1", "FAILED tests/test_login.py::test_login - AssertionError: 401 != 200", 3),
        tool_use("t2", "Edit", {"file_path": "tests/conftest.py", "old_string": "a", "new_string": "b"}, 4),
        line("user", "Never commit secrets to the repo.", 5),
        line("user", "thanks!", 6),
        line("assistant", long_text, 7),
        line("user", "Please update the README with the new login flow.", 8),
        line("assistant", "Updated README.md with the new login flow.", 9),
        tool_use("t3", "Bash", {"command": "git diff --stat"}, 10),
    ]


def test_goals_constraints_noise_and_long_output(rocks: Node) -> None:
    """The active user goal is stamped on every following item until the next goal; a constraint is kind and type
    constraint; noise is kept at L0 tagged gated:noise; long assistant text keeps its head and its last sentence,
    with the full text reachable through the source pointer."""
    sentences = [f"Step {i}: I checked module_{i} and its fixtures were fine." for i in range(120)]
    long_text = " ".join([*sentences, "In the end the login test passes now."])
    assert len(long_text) > ALICE.conclusion_chars
    data = jsonl(agent_session(long_text))
    (source,) = parsers.parse(data, "agent.jsonl")
    ing = ingestor(rocks)
    report = ing.ingest([source], ALICE, NOW)
    assert report.items == len(source.records) == 11
    got = [item(rocks, source, p) for p in range(11)]
    kinds = [a.payload["kind"] for a in got]
    assert kinds == [
        "goal",
        "conclusion",
        "tool_call",
        "tool_result",
        "file_op",
        "constraint",
        "noise",
        "conclusion",
        "goal",
        "conclusion",
        "tool_call",
    ]
    first, second = "Please fix the failing login test", "Please update the README with the new login flow."
    assert [a.goal for a in got] == [first] * 8 + [second] * 3
    assert got[0].asset_type is AssetType.GOAL and got[3].asset_type is AssetType.TOOL_RESULT
    assert got[5].asset_type is AssetType.CONSTRAINT and "kind:constraint" in got[5].tags
    assert got[6].level is Level.L0 and "gated:noise" in got[6].tags and report.flagged["noise"] == 1
    assert got[6].payload["eval"]["utility"] < got[1].payload["eval"]["utility"]
    assert got[3].payload["tool"] == "Bash" and got[4].payload["path"] == "tests/conftest.py"

    clipped = got[7].payload["text"]
    assert len(clipped) <= ALICE.conclusion_chars and " … " in clipped
    assert clipped.startswith(sentences[0]) and clipped.endswith("In the end the login test passes now.")
    assert got[7].source is not None
    verbatim = json.loads(data[got[7].source.start : got[7].source.end])
    assert verbatim["message"]["content"] == long_text


def test_record_over_the_payload_limit_is_clipped_to_fit() -> None:
    """A record too large for the store's payload limit (4096 bytes here) is kept head and tail, not refused: its
    source's ingestion does not fail, and ingesting it again writes nothing."""
    node = memory_node()
    pasted = " ".join(f"Log line {i}: the worker ünit {i} restarted cleanly." for i in range(250))
    text = f"Please look at this log. {pasted} The last line says the queue drained."
    source = transcript([line("user", text, 0), line("assistant", "The queue drained after the restart.", 1)])
    ing = ingestor(node)
    assert ing.ingest([source], ALICE, NOW).items == 2
    kept = item(node, source, 0)
    assert kept.payload_size() <= node.store.max_payload_bytes < len(text)
    assert kept.payload["text"].startswith("Please look at this log.")
    assert kept.payload["text"].endswith("The last line says the queue drained.")
    seq = node.store.seq
    drop_watermarks(node)
    assert ing.ingest([source], ALICE, NOW).written == 0 and node.store.seq == seq


def test_a_huge_record_is_read_only_as_far_as_an_item_can_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the privacy rules (which read it whole), every rule, extractor and the embedder read a record bounded to
    the payload limit in characters: a 200 KB paragraph costs what a 4 KB one does, not 50 times more."""
    node = memory_node()
    limit = node.store.max_payload_bytes
    seen: list[int] = []
    for name in ("simhash", "entities", "facts", "contamination", "is_noise", "sentences", "is_goal", "is_remember"):
        real = getattr(extract, name)
        monkeypatch.setattr(
            extract, name, lambda text, *a, _real=real, **k: (seen.append(len(text)), _real(text, *a, **k))[1]
        )
    embed = node.embedder.embed
    monkeypatch.setattr(node.embedder, "embed", lambda texts: (seen.extend(map(len, texts)), embed(texts))[1])
    text = "Please keep this. " + "lorem ipsum dolor " * (200_000 // 18)
    source = transcript([line("user", text, 0), line("assistant", "Kept.", 1)])
    report = ingestor(node).ingest([source], ALICE, NOW)
    assert seen and max(seen) <= limit < len(text)
    assert report.clipped == [
        {
            "source": source.source_id,
            "position": 0,
            "field": "text",
            "chars": len(text),
            "kept": len(item(node, source, 0).payload["text"]),
        }
    ]


def test_a_record_of_multibyte_characters_over_the_limit_keeps_as_much_as_fits() -> None:
    """A record of 3-byte characters over the payload limit keeps close to the limit's worth of bytes (it was cut
    to nothing when a character was counted as one byte), and the cut is reported."""
    node = memory_node()
    limit = node.store.max_payload_bytes
    text = "漢字" * limit
    (source,) = parsers.parse(text.encode(), "notes.md", "text")
    report = ingestor(node).ingest([source], ALICE, NOW)
    kept = item(node, source, 0)
    assert limit // 2 < kept.payload_size() <= limit
    assert len(kept.payload["text"]) * 3 > limit // 2
    assert [(c["field"], c["chars"], c["kept"]) for c in report.clipped] == [
        ("text", len(text), len(kept.payload["text"]))
    ]


def test_a_huge_title_is_cut_and_reported() -> None:
    """A chat's title, stamped on every item and goal label, is kept head and tail past 1000 characters, reported
    as cut, and the items and their rungs fit."""
    node = memory_node()
    doc = {"title": "T" * 20_000, "messages": [{"role": "user", "content": "Please fix the login test."}]}
    (source,) = parsers.parse(json.dumps(doc).encode(), "chat.json", "chat")
    report = ingestor(node).ingest([source], ALICE, NOW)
    assert report.clipped == [{"source": source.source_id, "field": "title", "chars": 20_000, "kept": 1000}]
    assert len(item(node, source, 0).payload["title"]) == 1000


def test_first_request_of_a_growing_session_is_its_goal() -> None:
    """A transcript is a session with an agent from its first line: the opening request is a goal even before the
    agent has replied (as a live watch first sees it)."""
    node = memory_node()
    ing = ingestor(node)
    opening = [line("user", "Please fix the failing login test.", 0)]
    ing.ingest([transcript(opening)], ALICE, NOW)
    first = item(node, transcript(opening), 0)
    assert first.payload["kind"] == "goal" and first.asset_type is AssetType.GOAL
    assert first.goal == "Please fix the failing login test."


def test_a_request_after_a_statement_sets_the_goal() -> None:
    """A user message whose request comes second ("The export times out. Can you profile it?") sets a new goal for
    the items after it; a plain statement from the user does not."""
    node = memory_node()
    ing = ingestor(node)
    lines = [
        line("user", "Please fix the failing login test.", 0),
        line("assistant", "Fixed: the SSO key was missing from the test settings.", 1),
        line("user", "The staging host runs Ubuntu 22.04 today.", 2),
        line("user", "Next, the invoice export times out for large accounts. Can you profile it?", 3),
        line("assistant", "The currency conversion makes one request per line item.", 4),
    ]
    src = transcript(lines)
    ing.ingest([src], ALICE, NOW)
    kinds = [item(node, src, i).payload["kind"] for i in range(5)]
    assert kinds == ["goal", "conclusion", "message", "goal", "conclusion"]
    assert item(node, src, 2).goal == "Please fix the failing login test."
    assert item(node, src, 4).goal == "The invoice export times out for large accounts."


# -- budget ------------------------------------------------------------------------------------------------------------

KIND_TEXTS: dict[str, list[str]] = {
    "goal": [f"Please {v} the {n} module." for v, n in zip(["fix", "refactor", "document"] * 2, "abcdef", strict=True)],
    "constraint": [f"Never push to the {b} branch directly." for b in ("main", "release", "prod", "dev", "qa", "ops")],
    "conclusion": [f"The {n} service now answers within {i + 2} seconds." for i, n in enumerate("uvwxyz")],
    "message": [f"The staging host {n} runs Ubuntu {20 + i}.04 today." for i, n in enumerate("ghijkl")],
    "tool_call": [f"Bash: ls src/pkg_{n}" for n in "mnopqr"],
    "file_op": [f"Edit src/file_{n}.py" for n in "stuvwx"],
    "tool_result": [f"{i + 3} files listed in src/pkg_{n}" for i, n in enumerate("mnopqr")],
    "error": [f"Error: permission denied on src/file_{n}.py" for n in "stuvwx"],
    "note": [f"Release notes draft {n}: mention the new cache layer." for n in "abcdef"],
    "noise": ["thanks!", "ok", "got it", "cool", "sounds good", "great, thanks"],
}
ROLE_HINT: dict[str, tuple[str, str]] = {
    "goal": ("user", "message"),
    "constraint": ("user", "message"),
    "conclusion": ("assistant", "message"),
    "message": ("user", "message"),
    "tool_call": ("assistant", "tool_call"),
    "file_op": ("assistant", "file_op"),
    "tool_result": ("tool", "tool_result"),
    "error": ("tool", "error"),
    "note": ("note", "note"),
    "noise": ("user", "message"),
}


def mixed_session(rng: random.Random) -> tuple[Source, list[str]]:
    """60 records, six of each kind, in a seeded random order."""
    kinds = [k for k in KINDS for _ in range(6)]
    rng.shuffle(kinds)
    texts = {k: list(v) for k, v in KIND_TEXTS.items()}
    records = []
    for pos, kind in enumerate(kinds):
        role, hint = ROLE_HINT[kind]
        records.append(Record(pos, role, texts[kind].pop(0), pos, pos + 1, role, T0 + pos * MINUTE_US, hint))
    return Source("transcript:mixed", "transcript", tuple(records), title="mixed"), kinds


def test_budget_keeps_each_kinds_share_most_recent_first(rocks: Node) -> None:
    """Over its item budget a session keeps each kind's share, most recent first; every other record is gated as
    "budget" in the watermark, none silently dropped."""
    source, kinds = mixed_session(random.Random(0))
    unbudgeted = memory_node()
    ingestor(unbudgeted).ingest([source], ALICE, NOW)
    assert [item(unbudgeted, source, p).payload["kind"] for p in range(60)] == kinds

    ing = ingestor(rocks)
    report = ing.ingest([source], IngestOptions(owner="alice", item_budget=20), NOW)
    assert report.items == 20 and report.gated == {"budget": 40}
    quotas = {k: int(20 * DEFAULT_SHARES[k]) for k in KINDS}
    assert sum(quotas.values()) == 20
    expected = {p for k in KINDS for p in [i for i, kk in enumerate(kinds) if kk == k][-quotas[k] :]}
    wm = watermark(ing, source)
    assert set(wm["items"]) == expected
    assert gated(ing, source) == {p: "budget" for p in range(60) if p not in expected}
    assert len(wm["items"]) + len(wm["gated"]) == wm["records"] == 60
    stored = [a for a in all_assets(rocks) if a.level is Level.L0]
    assert {a.payload["position"] for a in stored} == expected


def test_budget_holds_when_a_session_grows_one_record_at_a_time() -> None:
    """A live watch equals a backfill: fed one record at a time, the session ends with the same items as ingested
    at once, each older item the budget no longer holds taken back and gated as "budget"."""
    source, _ = mixed_session(random.Random(0))
    opts = IngestOptions(owner="alice", item_budget=20)
    backfill = memory_node()
    ingestor(backfill).ingest([source], opts, NOW)
    watched = memory_node()
    ing = ingestor(watched)
    for n in range(1, 61):
        ing.ingest([dataclasses.replace(source, records=source.records[:n])], opts, NOW)

    def live(node: Node) -> set[int]:
        return {
            a.payload["position"]
            for a in node.store.get_many(node.store.list_ids("owner", "alice"))
            if a and a.level is Level.L0
        }

    assert live(watched) == live(backfill) and len(live(watched)) == 20
    wm = watermark(ing, source)
    assert set(wm["items"]) == live(watched) and len(wm["items"]) + len(wm["gated"]) == 60
    assert set(gated(ing, source).values()) == {"budget"}


def test_budget_gives_unused_room_to_the_most_recent() -> None:
    """Room a kind does not use goes to the most recent records of the rest."""
    records = tuple(
        Record(p, "user", f"The staging host h{p} runs Ubuntu {p}.04 today.", p, p + 1, "user", T0) for p in range(40)
    )
    node = memory_node()
    ing = ingestor(node)
    source = Source("chat:plain", "chat", records)
    report = ing.ingest([source], IngestOptions(owner="alice", item_budget=20), NOW)
    assert report.items == 20 and report.gated == {"budget": 20}
    assert watermark(ing, source)["items"] == list(range(20, 40))


# -- incremental -------------------------------------------------------------------------------------------------------


def test_appended_records_only_are_processed_and_rewrites_become_edits(tmp_path: Path) -> None:
    """Appending lines (an unterminated one is a write in progress) processes only the new records, across a reopen;
    a line changed in the middle marks the source rewritten, and only the changed record becomes an edit."""
    world = rocks_world(tmp_path)
    node = world.open_node()
    ing = ingestor(node)
    lines = [
        line("user", "Please fix the failing login test.", 0),
        line("assistant", "The token fixture in tests/conftest.py expired last week.", 1),
        line("user", "I would rather keep the old runner for a while.", 2),
    ]
    source = transcript(lines)
    ing.ingest([source], ALICE, NOW)
    node.close()

    node = world.open_node()
    ing = ingestor(node)
    lines += [line("assistant", "I regenerated the fixture and the suite is green again.", 3)]
    partial = jsonl(lines) + json.dumps(line("user", "Also bump the", 4)).encode()[:40]
    (grown,) = parsers.parse(partial, "session.jsonl", "transcript")
    seq = node.store.seq
    report = ing.ingest([grown], ALICE, NOW + DAY_US)
    assert (report.skipped, report.items, report.written, report.rewritten) == (3, 1, 1, [])
    assert node.store.seq == seq + 1 and len(grown.records) == 4
    assert all(item(node, grown, p).version == 1 for p in range(4))

    lines[2] = line("user", "I would rather keep the new runner for a while.", 2)  # the same length: no offset moves
    rewritten = transcript(lines)
    seq = node.store.seq
    report = ing.ingest([rewritten], ALICE, NOW + 2 * DAY_US)
    assert report.rewritten == [rewritten.source_id] and report.skipped == 0 and report.written == 1
    assert node.store.seq == seq + 1
    assert [item(node, rewritten, p).version for p in range(4)] == [1, 1, 2, 1]
    assert item(node, rewritten, 2).payload["text"] == "I would rather keep the new runner for a while."

    lines[2] = line("user", "Please also add a regression test for the expiry.", 2)  # now reads as a goal
    data = jsonl(lines)
    report = ing.ingest(parsers.parse(data, "session.jsonl"), ALICE, NOW + 3 * DAY_US)
    assert report.written == 2  # the edited record, and the next one: its goal and its offsets moved
    edited, after = item(node, rewritten, 2), item(node, rewritten, 3)
    assert edited.version == 3 and edited.payload["kind"] == "goal" and edited.asset_type is AssetType.EVENT
    assert after.version == 2 and after.goal == "Please also add a regression test for the expiry."
    assert after.source is not None
    assert json.loads(data[after.source.start : after.source.end])["message"]["content"] == after.payload["text"]
    node.close()


def test_progress_counts_records_not_writes() -> None:
    """``progress`` is told records handled, batch by batch: in all, the source's records, facts and edits aside."""
    node = memory_node()
    lines = [line("user", f"My favorite color is {c}.", m) for m, c in enumerate(["red", "blue", "green", "teal"])]
    ticks: list[int] = []
    report = ingestor(node).ingest([transcript(lines)], IngestOptions(owner="alice", batch=3), NOW, ticks.append)
    assert report.written > report.records == 4
    assert sum(ticks) == 4 and len(ticks) > 1


# -- forgetting --------------------------------------------------------------------------------------------------------


def test_forgotten_items_and_facts_are_not_resurrected(rocks: Node) -> None:
    """A deleted item or fact stays deleted when its source is ingested again (the record is gated "forgotten")."""
    ing = ingestor(rocks)
    lines = [
        line("user", "My favorite color is blue.", 0),
        line("user", "The staging database is Postgres 16.", 1),
        line("user", "My favorite editor is Helix.", 2),
    ]
    source = transcript(lines)
    ing.ingest([source], ALICE, NOW)
    rocks.delete(item_id(source.source_id, 0), NOW, by="alice")
    rocks.store.delete(fact_id(source.source_id, 2, 0), NOW)
    seq = rocks.store.seq

    drop_watermarks(rocks)
    report = ing.ingest([source], ALICE, NOW + DAY_US)
    assert report.gated == {"forgotten": 1} and report.written == 0 and rocks.store.seq == seq
    assert gated(ing, source) == {0: "forgotten"}
    assert rocks.store.get(item_id(source.source_id, 0), include_deleted=True).tombstone
    assert rocks.store.get(fact_id(source.source_id, 2, 0), include_deleted=True).tombstone

    lines[1] = line("user", "The staging database is Postgres 17.", 1)
    report = ing.ingest([transcript(lines)], ALICE, NOW + 2 * DAY_US)
    assert report.rewritten == [source.source_id] and report.gated == {"forgotten": 1}
    assert rocks.store.get(item_id(source.source_id, 0), include_deleted=True).tombstone


def test_erased_item_and_its_facts_stay_erased() -> None:
    """After ``Ladder.forget`` of an item (its facts go with it), ingesting its source again brings back neither."""
    node = memory_node()
    ing = ingestor(node)
    source = transcript([line("user", "My favorite color is blue.", 0), line("user", "The CI runs on Buildkite.", 1)])
    ing.ingest([source], ALICE, NOW)
    blue = fact_id(source.source_id, 0, 0)
    receipt = Ladder(node, ing).forget(item_id(source.source_id, 0), NOW, by="alice")
    assert blue in receipt.tombstoned
    seq = node.store.seq
    drop_watermarks(node)
    report = ing.ingest([source], ALICE, NOW + DAY_US)
    assert report.gated == {"forgotten": 1} and report.written == 0 and node.store.seq == seq
    assert node.store.get(blue, include_deleted=True).tombstone


# -- bad input ---------------------------------------------------------------------------------------------------------


def test_malformed_line_raises_before_anything_is_written() -> None:
    """A malformed line in the middle of a transcript is an InvalidInput naming the line; nothing is ingested."""
    node = memory_node()
    data = jsonl(coding_session()[:1]) + b'{"type": "user", "message": \n' + jsonl(coding_session()[1:])
    with pytest.raises(InvalidInput, match="line 2"):
        ingestor(node).ingest(parsers.parse(data, "broken.jsonl"), ALICE, NOW)
    assert node.store.seq == 0 and ingestor(node).watermarks() == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"owner": ""}, "owner"),
        ({"scope": PrivacyScope.PUBLIC}, "public"),
        ({"shares": {"goal": 0.5, "gossip": 0.5}}, "gossip"),
        ({"item_budget": 0}, "budget"),
    ],
)
def test_options_are_validated(fields: dict[str, Any], message: str) -> None:
    """IngestOptions refuses an empty owner, public scope, unknown share kinds and an empty budget."""
    with pytest.raises(InvalidInput, match=message):
        IngestOptions(**{"owner": "alice", **fields})


def test_parse_shares() -> None:
    """``kind=share,…`` overrides the defaults; a part that is not kind=number is refused."""
    assert parse_shares("goal=0.5, note=0") == {**DEFAULT_SHARES, "goal": 0.5, "note": 0.0}
    with pytest.raises(InvalidInput, match="kind=number"):
        parse_shares("goal=lots")


def test_a_source_belongs_to_its_first_owner() -> None:
    """Item ids derive from the source alone: ingesting it for another owner is refused before anything is written,
    rather than silently skipped."""
    node = memory_node()
    ing = ingestor(node)
    source = transcript(coding_session())
    ing.ingest([source], ALICE, NOW)
    seq = node.store.seq
    fresh = dataclasses.replace(source, source_id="transcript:fresh")
    with pytest.raises(InvalidInput, match="another owner"):
        ing.ingest([fresh, source], IngestOptions(owner="bob"), NOW)
    assert node.store.seq == seq and ing.watermark("transcript:fresh") is None


# -- determinism -------------------------------------------------------------------------------------------------------


def test_same_sources_give_same_items_on_two_nodes() -> None:
    """Two fresh nodes (different keys) ingesting the same sources store the same ids with the same content."""
    rng = random.Random(0)
    sources = [
        transcript(agent_session("A short conclusion. The login test passes now.")),
        *locomo(
            [
                [("Caroline", "My favorite color is blue."), ("Melanie", "I moved to Lisbon last year.")],
                [("Caroline", "My favorite color is green now."), ("Melanie", "thanks!")],
            ]
        ),
        *secrets_sources(rng)[0],
    ]

    def run(seed: int) -> tuple[dict[str, dict[str, Any]], Report]:
        world = memory_world()
        world.keychain = new_keychain(seed)
        node = world.open_node()
        report = ingestor(node).ingest(sources, ALICE, NOW)
        volatile = ("source_node", "signature", "encryption_key_ref")
        return {a.id: {k: v for k, v in a.to_dict().items() if k not in volatile} for a in all_assets(node)}, report

    one, report_one = run(1)
    two, report_two = run(2)
    assert one.keys() == two.keys() and len(one) == report_one.items + report_one.facts
    assert one == two
    assert report_one.to_json() == report_two.to_json()


@pytest.mark.parametrize("window", [1, 3, 10**6])
def test_windows_embedded_ahead_store_what_one_source_at_a_time_stores(
    window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ingestion prepares sources in windows and embeds their items' and facts' passages ahead, on a worker: the
    assets, their vectors and the report are those of the sources prepared and written one at a time, each write
    embedding its own (the ingest before windows), and no write embeds a text itself but to store an earlier
    fact again (the slot it held closed by a later one, in a window whose texts no longer hold it)."""
    sessions = [
        [("Caroline", "Wow! I went camping by the lake. The kids roasted marshmallows."), ("Melanie", "thanks!")],
        [("Caroline", "My favorite color is blue."), ("Melanie", "I moved to Lisbon last year. It rains a lot.")],
        [("Caroline", "My favorite color is green now."), ("Melanie", "Hey! The api_key=sk-live-0123456789abcdef.")],
    ]
    sources = [transcript(agent_session("A short conclusion. The login test passes now.")), *locomo(sessions)]

    def stored(node: Node) -> tuple[dict[str, Any], dict[str, list[float]]]:
        volatile = ("signature", "source_node", "encryption_key_ref")
        assets = {a.id: {k: v for k, v in a.to_dict().items() if k not in volatile} for a in all_assets(node)}
        vectors = {}
        for part in node.store.partitions():
            ids = sorted(node.store.views(part.pid).views)
            vectors.update({i: v.tolist() for i, v in node.store.vectors_of(part.pid, ids).items()})
        return assets, vectors

    monkeypatch.setattr(ingest_mod, "EMBED_AHEAD", window)
    node = memory_world().open_node()
    counting = Counting(node.embedder)
    node.embedder = counting
    report = ingestor(node).ingest(sources, ALICE, NOW)
    one = memory_world().open_node()
    ing, alone = ingestor(one), Report()
    for source in sources:
        ing._ingest_source(ing._prepare(source, ALICE), ALICE, NOW, alone, None)
    assets, vectors = stored(node)
    assert (assets, vectors) == stored(one) and len(vectors) == report.items + report.facts > 0
    assert report.to_json() == alone.to_json()
    assert counting.asked and len(counting.here) <= report.superseded
    assert all(t.endswith(" fact") for t in counting.here)
    assert not any("sk-live" in str(a) for a in assets.values())


def test_a_write_refuses_an_embedder_other_than_the_nodes() -> None:
    """Node.put embeds with what it is given only when that is the node's embedder (same id and dimension)."""
    node = memory_world().open_node()
    other = HashEmbedder(node.embedder.dim * 2)
    draft = {"asset_type": "fact", "payload": {"text": "The staging DB runs on port 6543"}, "owner_id": "alice"}
    with pytest.raises(ValueError, match="embeds with"):
        node.put([draft], NOW, embedder=other)
    assert all_assets(node) == []
    assert node.put([draft], NOW, embedder=Prefetched(node.embedder))
