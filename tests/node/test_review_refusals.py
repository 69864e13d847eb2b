"""Review finding 4: a refusal changes nothing. Every check (ids, owners, sizes, nesting, policy) runs before the
first write, on the command line as through the service; and a source that an old bug left pending is finished by
`gaml maintain`.

On b424be6: `gaml put` of an asset owned by ``"ali ce"`` exited 2 *after* storing it (the owner was checked as a
principal id only when it was registered, after the write); a put whose later batch was refused kept its earlier
batches; and a chat message with two giant words made every `gaml curate` and `gaml maintain` fail on its rungs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gaml.node.core.service import IngestFile
from gaml.policy.errors import InvalidInput
from tests.node.cli_util import cli_home, run_cli
from tests.node.daemon_util import gaml_process, make_home, remove_home, store_digest, thread_daemon, unix_client
from tests.node.service_util import dump, service_node


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    return cli_home(capsys, monkeypatch, tmp_path / "home", [["alice", "--tenant", "acme"]])


def fact(text: str, **kw: object) -> dict[str, object]:
    return {"asset_type": "fact", "owner_id": "alice", "payload": {"text": text}, **kw}


def test_an_owner_that_is_no_principal_id_is_refused_and_nothing_is_stored(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gaml put` of an asset owned by "ali ce" exits 2 naming the id, and the store and the principals are as
    before."""
    before = store_digest(home)
    code, out, err = run_cli(capsys, "--home", str(home), "put", stdin=json.dumps(fact("x", owner_id="ali ce")))
    assert (code, out) == (5, "") and "'ali ce'" in err  # refused
    assert store_digest(home) == before
    code, out, _ = run_cli(capsys, "--home", str(home), "principals")
    assert code == 0 and "ali ce" not in out


@pytest.mark.parametrize("batch", ["256", "1"])
def test_a_put_whose_last_asset_is_refused_writes_none_of_them(
    home: Path, capsys: pytest.CaptureFixture[str], batch: str
) -> None:
    """Three assets, the third for a tenant its owner is not a member of: refused whole, whatever the batch size,
    before the first batch is written."""
    drafts = [fact("one"), fact("two"), fact("three", tenant_scope="globex", privacy_scope="tenant_private")]
    before = store_digest(home)
    code, out, err = run_cli(
        capsys, "--home", str(home), "put", "--batch", batch, stdin="\n".join(json.dumps(d) for d in drafts)
    )
    assert (code, out) == (5, "") and "asset #3" in err and "not a member of tenant 'globex'" in err
    assert store_digest(home) == before


def test_an_ingest_whose_second_file_is_refused_writes_nothing_of_the_first(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two chat files, the second malformed: the ingest is refused before anything of the first is written."""
    good, bad = tmp_path / "a.json", tmp_path / "b.json"
    good.write_text(json.dumps([{"role": "user", "content": "the launch moved to friday"}]))
    bad.write_text('[{"role": "user", "content": "cut here')
    before = store_digest(home)
    code, _, err = run_cli(
        capsys, "--home", str(home), "ingest", str(good), str(bad), "--owner", "alice", "--format", "chat"
    )
    assert code == 2 and "b.json" in err
    assert store_digest(home) == before


def test_a_source_left_pending_by_the_rung_bug_is_finished_by_maintain(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The item the review's 20 MiB chat message left behind (its text clipped to two words of 419,348 and 629,022
    characters around " … ", just within the payload limit), ingested and left pending: its rungs carried those words
    as tags and outgrew the limit, so every `gaml curate` and `gaml maintain` failed. `gaml maintain` now curates it,
    and `gaml curate` then has nothing left to do."""
    chat = tmp_path / "big2.json"  # the review's file name: the title is part of each item's payload
    left = "x" * 419_348 + " … " + "x" * 629_022
    chat.write_text(json.dumps([{"role": "user", "content": "hello there friend, my goal is to test"},
                                {"role": "user", "content": left}]))  # fmt: skip
    code, out, err = run_cli(capsys, "--home", str(home), "ingest", str(chat), "--owner", "alice", "--no-curate")
    assert code == 0 and json.loads(out).get("clipped", []) == [], err  # stored whole, as the bug left it
    code, out, err = run_cli(capsys, "--home", str(home), "maintain")
    assert code == 0, err
    assert json.loads(out)["curation"]["sources"] == 1 and json.loads(out)["curation"]["rungs"] > 0
    code, out, err = run_cli(capsys, "--home", str(home), "curate")
    assert code == 0 and json.loads(out)["sources"] == 0, err


def test_a_service_ingest_is_checked_whole_before_its_first_file_is_written() -> None:
    """Through the service (gRPC Ingest, and `gaml ingest` with a daemon): a call whose second file is refused (its
    session was ingested for another owner), and a call of two files of one session, write nothing at all."""
    node, service = service_node()
    alice, bob = (node.governance.principal(n) for n in ("alice", "bob"))

    def session(sid: str, text: str) -> bytes:
        return json.dumps({"sessionId": sid, "role": "user", "content": text}).encode() + b"\n"

    service.ingest(
        alice, [IngestFile("alice.jsonl", session("S-alice", "alice's own session"), format="transcript")], 1
    )
    before = dump(node)
    mine = IngestFile("bob.jsonl", session("S-bob", "bob's session"), format="transcript")
    theirs = IngestFile("copy.jsonl", session("S-alice", "a copy of alice's session"), format="transcript")
    with pytest.raises(InvalidInput, match="ingested for another owner"):
        service.ingest(bob, [mine, theirs], 2)
    assert dump(node) == before
    again = IngestFile("bob2.jsonl", session("S-bob", "bob's session, again"), format="transcript")
    with pytest.raises(InvalidInput, match="the same source 'transcript:S-bob'"):
        service.ingest(bob, [mine, again], 3)
    assert dump(node) == before


def test_a_put_through_the_daemon_in_several_calls_is_checked_whole_first() -> None:
    """`gaml put --batch 1` of three assets through a running daemon, the third refused (a tenant its owner is not a
    member of): every batch is checked (PutRequest.check_only) before the first is written, so nothing is stored,
    and the error counts the asset in the whole input."""
    home = make_home(("alice",))
    try:
        with thread_daemon(home, listen=False), unix_client(home) as c:
            before = c.status()["assets"]
            drafts = [fact("one"), fact("two"), fact("three", tenant_scope="globex", privacy_scope="tenant_private")]
            r = gaml_process(home.path, "put", "--batch", "1", stdin="\n".join(json.dumps(d) for d in drafts))
            assert (r.returncode, r.stdout) == (5, ""), r.stderr  # refused
            assert "asset #3" in r.stderr and "not a member of tenant 'globex'" in r.stderr
            assert c.status()["assets"] == before
    finally:
        remove_home(home)
