"""The `gaml` command line, in-process, on a real home (RocksDB, hnswlib, file keychain; hash embedder for speed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.node.cli_util import run_cli


def run(
    capsys: pytest.CaptureFixture[str],
    *argv: str,
    stdin: str | None = None,
    monkeypatch: pytest.MonkeyPatch | None = None,
) -> tuple[int, str, str]:
    return run_cli(capsys, *argv, stdin=stdin)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    monkeypatch.setenv("GAML_PASSPHRASE", "test passphrase")
    monkeypatch.delenv("GAML_KEYCHAIN_KEY", raising=False)
    h = tmp_path / "home"
    code, out, _ = run(capsys, "--home", str(h), "init", "--embedder", "hash", "--max-payload", "2048")
    assert code == 0 and json.loads(out)["embedder"] == "hash"
    return h


ASSETS = "\n".join(
    json.dumps(a)
    for a in [
        {
            "asset_type": "fact",
            "payload": {"text": "Alice prefers green tea"},
            "owner_id": "alice",
            "entities": ["Alice"],
        },
        {
            "assetType": "ASSET_TYPE_PLAN",
            "payload": {"text": "ship release 4.2 on friday"},
            "ownerId": "alice",
            "privacyScope": "PRIVACY_SCOPE_TENANT_PRIVATE",
            "tenantScope": "acme",
        },
        {"asset_type": "fact", "payload": {"text": "water boils at 100C"}, "privacy_scope": "public"},
    ]
)


def test_init_put_get_search_stats(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI stores JSON Lines (short and proto enum names), reads back decrypted, searches by principal, counts."""
    run(capsys, "--home", str(home), "principal", "add", "alice", "--tenant", "acme")  # acme memory is a member's
    code, out, err = run(capsys, "--home", str(home), "put", stdin=ASSETS, monkeypatch=monkeypatch)
    assert code == 0, err
    ids = out.split()
    assert len(ids) == 3
    code, out, _ = run(capsys, "--home", str(home), "get", ids[0], "--as", "alice")
    got = json.loads(out)
    assert got["payload"] == {"text": "Alice prefers green tea"} and got["privacy_scope"] == "user_private"
    code, _, err = run(capsys, "--home", str(home), "principal", "add", "bob")
    assert code == 0, err
    code, _, err = run(capsys, "--home", str(home), "get", ids[0], "--as", "bob")
    _, _, err_none = run(capsys, "--home", str(home), "get", "0" * 32, "--as", "bob")
    # Answered as an id that does not exist (no existence oracle): same exit code, same message shape.
    assert code == 1 and err == f"gaml: error: no asset {ids[0]}\n"
    assert err_none == f"gaml: error: no asset {'0' * 32}\n"
    code, out, _ = run(capsys, "--home", str(home), "search", "green tea", "--as", "alice", "--json")
    hits = json.loads(out)
    assert hits[0]["id"] == ids[0] and hits[0]["path"] == "both" and hits[0]["via"] == "owner"
    assert hits[0]["stages"][-1] == "governor" and hits[0]["lexical"]["rank"] == 1
    code, out, _ = run(capsys, "--home", str(home), "search", "release", "--as", "bob", "--json")
    assert [h["id"] for h in json.loads(out)] == [ids[2]]  # bob sees only the public fact
    run(capsys, "--home", str(home), "principal", "add", "bob", "--tenant", "acme")
    code, out, _ = run(capsys, "--home", str(home), "search", "release", "--as", "bob", "--json")
    assert ids[1] in [h["id"] for h in json.loads(out)]
    code, _, err = run(capsys, "--home", str(home), "search", "release", "--as", "mallory")
    assert code == 5 and "unknown principal" in err  # refused: nobody of that name may read
    code, out, _ = run(capsys, "--home", str(home), "access-log", "--as", "alice", "--json")
    log = json.loads(out)
    assert {e["who"] for e in log} == {"alice", "bob"} and all(e["read"] for e in log)
    code, _, err = run(capsys, "--home", str(home), "access-log", "--as", "bob")
    assert code == 0  # bob's own (empty) log; he cannot name alice's
    code, out, _ = run(capsys, "--home", str(home), "stats", "--json", "--as", "alice")
    stats = json.loads(out)
    assert stats["assets"] == 3 and len(stats["partitions"]) == 3 and stats["pending"] == 0
    code, out, _ = run(capsys, "--home", str(home), "stats", "--json")  # you, the node's own user: yours only
    assert code == 0 and json.loads(out)["user"] == json.loads(out)["principal"] != "alice"


def test_put_from_file_array_and_repeat_is_idempotent(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSON array from a file is stored; putting it again returns the same ids and changes nothing."""
    f = tmp_path / "a.json"
    f.write_text(json.dumps([json.loads(line) for line in ASSETS.splitlines()]))
    run(capsys, "--home", str(home), "principal", "add", "alice", "--tenant", "acme")
    _, first, _ = run(capsys, "--home", str(home), "put", str(f))
    _, second, _ = run(capsys, "--home", str(home), "put", str(f))
    assert first.split() == second.split()
    _, out, _ = run(capsys, "--home", str(home), "stats", "--json")
    assert json.loads(out)["journal_seq"] == 3


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"asset_type": "fcat", "payload": {}}', "asset_type: unknown value 'fcat'"),
        ('{"asset_type": "fact", "payload": {"x": 1}, "owner_id": ""}', "owner_id is required"),
        ('{"asset_type": "fact", "payload": {"t": "' + "x" * 3000 + '"}, "owner_id": "a"}', "limit is 2048"),
        ('{"asset_type": "fact", "payload": {}, "owner_id": "a", "colour": "red"}', "colour"),
        ('{"asset_type": "fact", "payload": "text", "owner_id": "a"}', "payload"),
        ("not json at all", "not JSON"),
        ('{"asset_type": "fact", "payload": {}, "owner_id": "a", "signature": "AAAA"}', "signature"),
    ],
)
def test_bad_input_is_a_clear_error_and_writes_nothing(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, line: str, message: str
) -> None:
    """A batch with one bad asset fails with exit code 2 and a message naming the problem; nothing is stored."""
    good = '{"asset_type": "fact", "payload": {"text": "fine"}, "owner_id": "a"}'
    code, out, err = run(capsys, "--home", str(home), "put", stdin=good + "\n" + line, monkeypatch=monkeypatch)
    assert code == 2, (out, err)
    assert message in err and err.startswith("gaml: error:")
    _, out, _ = run(capsys, "--home", str(home), "stats", "--json")
    assert json.loads(out)["journal_seq"] == 0


def test_errors_for_missing_home_wrong_passphrase_and_unknown_id(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Missing home, wrong passphrase, locked keychain and unknown ids each get their own clear error."""
    code, _, err = run(capsys, "--home", str(tmp_path / "nowhere"), "stats")
    assert code == 2 and "gaml --home" in err and "init" in err
    run(capsys, "--home", str(home), "principal", "add", "alice")
    code, _, err = run(capsys, "--home", str(home), "get", "0" * 32, "--as", "alice")
    assert code == 1 and "no asset" in err
    code, _, err = run(capsys, "--home", str(home), "get", "not-an-id", "--as", "alice")
    assert code == 2 and "not an asset id" in err
    monkeypatch.setenv("GAML_PASSPHRASE", "wrong")
    code, _, err = run(capsys, "--home", str(home), "stats")
    assert code == 3 and "does not open the keychain" in err
    monkeypatch.delenv("GAML_PASSPHRASE")
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO(""))
    code, _, err = run(capsys, "--home", str(home), "stats")
    assert code == 3 and "GAML_PASSPHRASE" in err
    monkeypatch.setenv("GAML_PASSPHRASE", "test passphrase")
    code, _, err = run(capsys, "--home", str(home), "init", "--embedder", "hash")
    assert code == 2 and "refusing to overwrite" in err


def test_delete_then_get(home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`gaml delete` leaves a tombstone: get says deleted, --include-deleted shows the tombstone."""
    run(capsys, "--home", str(home), "principal", "add", "alice", "--tenant", "acme")
    _, out, _ = run(capsys, "--home", str(home), "put", stdin=ASSETS, monkeypatch=monkeypatch)
    id_ = out.split()[0]
    run(capsys, "--home", str(home), "principal", "add", "bob")
    code, _, err = run(capsys, "--home", str(home), "delete", id_, "--as", "bob")
    assert code == 1 and err == f"gaml: error: no asset {id_}\n"  # bob may not know it exists
    code, out, _ = run(capsys, "--home", str(home), "delete", id_, "--as", "alice")
    assert code == 0 and json.loads(out)["tombstone"] is True
    code, _, err = run(capsys, "--home", str(home), "get", id_, "--as", "alice")
    assert code == 1 and "deleted" in err
    code, out, _ = run(capsys, "--home", str(home), "get", id_, "--include-deleted", "--as", "alice")
    assert code == 0 and json.loads(out)["tombstone"] is True


def test_bad_options_and_non_utf8_input_are_clear_errors(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A non-positive --batch or --k is a usage error; a non-UTF-8 file is refused by name; nothing is stored."""
    for argv in (["put", "--batch", "0"], ["put", "--batch", "-1"], ["search", "x", "--as", "a", "--k", "0"]):
        code, _, err = run(capsys, "--home", str(home), *argv)
        assert code == 2 and "not positive" in err
    f = tmp_path / "latin1.json"
    f.write_bytes('{"asset_type": "fact", "payload": {"text": "café"}, "owner_id": "a"}'.encode("latin-1"))
    code, _, err = run(capsys, "--home", str(home), "put", str(f))
    assert code == 2 and "not UTF-8" in err
    _, out, _ = run(capsys, "--home", str(home), "stats", "--json")
    assert json.loads(out)["journal_seq"] == 0


def test_init_is_all_or_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An init that fails midway leaves no home behind, so the same init can simply be run again."""
    monkeypatch.setenv("GAML_PASSPHRASE", "p")
    home = tmp_path / "h"

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("gaml.node.home.write_atomic", boom)
    code, _, err = run(capsys, "--home", str(home), "init", "--embedder", "hash")
    assert code == 3 and "No space left" in err
    assert not home.exists() and list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    monkeypatch.setenv("GAML_PASSPHRASE", "p")
    code, out, _ = run(capsys, "--home", str(home), "init", "--embedder", "hash")
    assert code == 0 and json.loads(out)["node_id"]


def test_grant_revoke_access_log_and_redact_from_the_cli(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Grants with a ceiling open a slice to a grantee; revocation closes it; the owner's log shows the reads; a
    redacted packet keeps no secret and points back to its source."""
    notes = "\n".join(
        json.dumps(
            {
                "asset_type": "fact",
                "payload": {"text": t},
                "owner_id": "alice",
                "segment": seg,
                "level": lvl,
                "inference_policy": "public_with_redaction",
                "entities": ["Maya"],
            }
        )
        for t, seg, lvl in [
            ("Maya mails maya@example.com about the garden", "home", "l0"),
            ("garden plan: tomatoes in May", "home", "l2"),
            ("garden budget at work", "work", "l2"),
        ]
    )
    _, out, _ = run(capsys, "--home", str(home), "put", stdin=notes, monkeypatch=monkeypatch)
    verbatim, plan, work = out.split()
    run(capsys, "--home", str(home), "principal", "add", "bob")
    code, out, err = run(
        capsys, "--home", str(home), "grant", "--as", "alice", "--to", "bob", "--segment", "home", "--max-level", "l2"
    )
    assert code == 0, err
    grant = json.loads(out)
    _, out, _ = run(capsys, "--home", str(home), "search", "garden", "--as", "bob", "--json")
    assert [h["id"] for h in json.loads(out)] == [plan]  # not the L0 note (ceiling), not the work note (segment)
    assert json.loads(out)[0]["via"] == f"grant:{grant['id']}"
    _, out, _ = run(capsys, "--home", str(home), "grants", "--to", "bob")
    assert [g["id"] for g in json.loads(out)] == [grant["id"]]
    code, _, err = run(capsys, "--home", str(home), "revoke", grant["id"], "--as", "bob")
    assert code == 5 and "only alice may revoke" in err  # refused
    run(capsys, "--home", str(home), "revoke", grant["id"], "--as", "alice")
    _, out, _ = run(capsys, "--home", str(home), "search", "garden", "--as", "bob", "--json")
    assert json.loads(out) == []
    _, out, _ = run(capsys, "--home", str(home), "access-log", "--as", "alice", "--json")
    (receipt,) = json.loads(out)
    assert receipt["who"] == "bob" and receipt["read"] == [
        {"id": plan, "level": "l2", "path": "both", "via": f"grant:{grant['id']}"}
    ]
    code, out, err = run(capsys, "--home", str(home), "redact", verbatim, "--as", "alice")
    assert code == 0, err
    _, out, _ = run(capsys, "--home", str(home), "get", out.strip(), "--as", "alice")
    packet = json.loads(out)
    assert packet["derived_from"] == [verbatim] and "maya@example.com" not in out and "Maya" not in out
    _, out, _ = run(capsys, "--home", str(home), "search", "garden budget", "--as", "alice", "--json")
    assert work in [h["id"] for h in json.loads(out)]


def test_conflicts_override_and_reputation_from_the_cli(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a node in a subnet, `gaml conflicts` lists a contested slot (two values of one subject and attribute),
    `--choose` overrides it for the caller's frames (an audited record naming who and why), and `gaml reputation`
    shows the node as the subnet's founder. Bad combinations of options are clear errors."""
    h = str(home)
    assert run(capsys, "--home", h, "subnet", "create", "ops", "--tenant", "acme")[0] == 0
    assert run(capsys, "--home", h, "principal", "add", "alice", "--tenant", "acme")[0] == 0
    policy = {"owner_id": "alice", "tenant_scope": "acme", "privacy_scope": "enterprise_private"}
    policy |= {"replication_policy": "private_subnet"}
    drafts = [
        {"subject": "staging db", "attribute": "port", "value": 5432, "text": "the staging db listens on port 5432"},
        {"subject": "staging db", "attribute": "port", "value": 6543, "text": "the staging db listens on port 6543"},
    ]
    old_id = None
    for d in drafts:  # one at a time: the second is the newer claim
        code, out, err = run(
            capsys, "--home", h, "put", stdin=json.dumps({"asset_type": "fact", "payload": d, **policy})
        )
        assert code == 0, err
        old_id = old_id or out.split()[0]
    code, out, err = run(capsys, "--home", h, "conflicts", "--as", "alice", "--json")
    assert code == 0, err
    (rec,) = json.loads(out)
    assert rec["winner"] == "6543" and {c["value"] for c in rec["candidates"]} == {"5432", "6543"}
    code, out, _ = run(capsys, "--home", h, "conflicts", "--as", "alice")
    assert f"slot {rec['slot']}" in out and "won " in out and "'6543'" in out
    code, out, err = run(
        capsys, "--home", h, "conflicts", "--as", "alice", "--slot", rec["slot"], "--choose", old_id, "--reason", "pg"
    )
    assert code == 0, err
    chosen = json.loads(out)
    assert chosen["record"]["winner"] == "5432" and chosen["record"]["override"]["by"] == "alice"
    code, out, err = run(
        capsys, "--home", h, "hydrate", "--goal", "staging db port", "--budget", "300", "--as", "alice"
    )
    assert code == 0, err
    assert "5432" in out and "6543" not in out
    code, out, err = run(capsys, "--home", h, "reputation", "--as", "alice", "--json")
    assert code == 0, err
    (ledger,) = json.loads(out)
    assert ledger["kind"] == "subnet" and ledger["overrides"] == [chosen["override"]] and ledger["slots"] == 1
    assert [(m["founder"], m["admitted"]) for m in ledger["members"]] == [(True, True)]
    for argv, why in (
        (("--choose", "x"), "--choose needs --slot"),
        (("--reason", "r"), "--reason goes with --choose"),
        (("--slot", "n:none", "--choose", "x"), "no contested slot"),
    ):
        code, _, err = run(capsys, "--home", h, "conflicts", "--as", "alice", *argv)
        assert code != 0 and why in err, (argv, err)


def test_put_drafts_that_name_no_owner_are_the_node_users(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every draft that names no owner is owned by the node's own user (its config, read once for the whole input),
    and one that names an owner keeps it, wherever it stands in the input."""
    drafts = [
        {"asset_type": "fact", "payload": {"text": "first note without an owner"}},
        {"asset_type": "fact", "payload": {"text": "alice's own note"}, "owner_id": "alice"},
        {"asset_type": "fact", "payload": {"text": "second note without an owner"}},
    ]
    run(capsys, "--home", str(home), "principal", "add", "alice")
    code, out, err = run(capsys, "--home", str(home), "put", stdin="\n".join(json.dumps(d) for d in drafts))
    assert code == 0, err
    ids = out.split()
    code, out, _ = run(capsys, "--home", str(home), "stats", "--json")
    user = json.loads(out)["user"]
    assert user and user != "alice"
    owners = []
    for id_, who in zip(ids, (user, "alice", user), strict=True):
        code, out, err = run(capsys, "--home", str(home), "get", id_, "--as", who)
        assert code == 0, err
        owners.append(json.loads(out)["owner_id"])
    assert owners == [user, "alice", user]
