"""A node's home on disk: encryption at rest, locked, closed and corrupt stores (real RocksDB, hnswlib, files)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from gaml.node.core.embed import HashEmbedder
from gaml.node.home import init_home, memory_layers, open_node
from gaml.node.shells.file_keychain import Unlock
from gaml.policy.errors import GamlError, StoreClosed, StoreCorrupt, StoreLocked, WrongPassphrase
from tests.node.cli_util import edit_config

UNLOCK = Unlock(passphrase="correct horse battery staple")
NOW = 1_700_000_000_000_000
SECRETS = [b"Xylophone-Quasar-7731", b"Marmalade-Nebula-0042", b"Zeppelin-Okapi-9918", b"Quokka-Tundra-5150"]


def files_digest(home: Path) -> dict[str, str]:
    """Digests of every file that holds data (RocksDB's own diagnostic LOG files rotate on every open)."""
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file() and not p.name.startswith("LOG")
    }


def scan(home: Path, needles: list[bytes]) -> list[tuple[str, bytes]]:
    return [(str(p), n) for p in home.rglob("*") if p.is_file() for n in needles if n in p.read_bytes()]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    init_home(h, UNLOCK, embedder="hash")
    return h


def private_drafts() -> list[dict[str, object]]:
    scopes = ["local_only", "user_private", "trusted_devices", "tenant_private", "enterprise_private", "shared"]
    out: list[dict[str, object]] = []
    for i, scope in enumerate(scopes):
        secret = SECRETS[i % len(SECRETS)].decode()
        out.append(
            {
                "asset_type": "fact",
                "payload": {"text": f"the {scope} vault code is {secret}", "nested": {"s": secret}},
                "owner_id": "alice",
                "privacy_scope": scope,
                "tenant_scope": "acme",
                "entities": [f"{SECRETS[(i + 1) % len(SECRETS)].decode()}"],
                "goal": f"goal {secret}",
                "tags": [SECRETS[(i + 2) % len(SECRETS)].decode()],
            }
        )
    return out


@pytest.mark.parametrize("clean_stop", [True, False])
def test_private_strings_never_reach_the_disk(home: Path, clean_stop: bool) -> None:
    """After storing private assets (payload, entities, goal, tags), no file under the home holds those strings."""
    node = open_node(home, UNLOCK, embedder=HashEmbedder())
    ids = node.put(private_drafts(), NOW)
    node.put([{"asset_type": "fact", "payload": {"text": "a public fact"}, "privacy_scope": "public"}], NOW)
    assert node.search("vault code", "alice", NOW + 1, k=10)
    if clean_stop:
        node.close()  # checkpoint: sealed index snapshots are written too
    else:
        node.store.kv.close()  # no checkpoint, WAL only
    assert scan(home, SECRETS) == []
    node = open_node(home, UNLOCK, embedder=HashEmbedder())
    assert "vault code is" in node.store.get(ids[0]).payload["text"]  # …yet the owner's node reads them
    node.close()
    assert scan(home, SECRETS) == []


def test_keychain_file_is_private_and_sealed(home: Path) -> None:
    """The keychain is mode 0600 and holds no key material in the clear; a wrong passphrase opens nothing."""
    kc = home / "keychain.json"
    assert kc.stat().st_mode & 0o777 == 0o600
    before = files_digest(home)
    with pytest.raises(WrongPassphrase):
        open_node(home, Unlock(passphrase="wrong"))
    assert files_digest(home) == before


def test_second_open_is_refused_as_locked(home: Path) -> None:
    """While a node has its home open, another open (same process or another one) fails with StoreLocked."""
    node = open_node(home, UNLOCK, embedder=HashEmbedder())
    try:
        with pytest.raises(StoreLocked):
            open_node(home, UNLOCK, embedder=HashEmbedder())
        code = (
            "import sys\nfrom gaml.node.shells.file_keychain import Unlock\nfrom gaml.node.home import open_node\n"
            "from gaml.node.core.embed import HashEmbedder\nfrom gaml.policy.errors import StoreLocked\n"
            f"try:\n    open_node(__import__('pathlib').Path({str(home)!r}), Unlock(passphrase={UNLOCK.passphrase!r}),"
            " embedder=HashEmbedder())\nexcept StoreLocked as e:\n    print('locked:', e); sys.exit(7)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2]
        )
        assert out.returncode == 7, out.stderr
        assert "in use" in out.stdout
    finally:
        node.close()
    open_node(home, UNLOCK, embedder=HashEmbedder()).close()  # released on close


def test_closed_store_raises_store_closed(home: Path) -> None:
    """Operations on a closed store raise StoreClosed instead of touching a released database."""
    node = open_node(home, UNLOCK, embedder=HashEmbedder())
    (id_,) = node.put([{"asset_type": "fact", "payload": {"text": "x"}, "owner_id": "alice"}], NOW)
    node.close()
    with pytest.raises(StoreClosed):
        node.store.get(id_)
    with pytest.raises(StoreClosed):
        node.put([{"asset_type": "fact", "payload": {"text": "y"}, "owner_id": "alice"}], NOW)


@pytest.mark.parametrize("target", ["MANIFEST", "CURRENT", "sst"])
def test_corrupt_rocksdb_is_reported_and_left_untouched(home: Path, target: str) -> None:
    """A damaged database raises StoreCorrupt, is never reset or repaired, and says so again on the next open."""
    node = open_node(home, UNLOCK, embedder=HashEmbedder())
    node.put([{"asset_type": "fact", "payload": {"text": f"fact {i}"}, "owner_id": "alice"} for i in range(200)], NOW)
    node.store.kv._db.flush()  # type: ignore[attr-defined]  # force an SST file for the "sst" case
    node.close()
    db = home / "db"
    if target == "CURRENT":
        victim = db / "CURRENT"
        victim.write_bytes(b"MANIFEST-999999\n")
    else:
        pattern = "MANIFEST-*" if target == "MANIFEST" else "*.sst"
        victim = max(db.glob(pattern), key=lambda p: p.stat().st_size)
        data = bytearray(victim.read_bytes())
        for i in range(len(data) // 3, len(data) // 3 + 64):
            data[i] ^= 0x5A
        victim.write_bytes(bytes(data))

    def data_files() -> dict[str, str]:  # RocksDB rewrites CURRENT/MANIFEST and starts a new WAL on every open
        return {k: v for k, v in files_digest(home).items() if not k.startswith("db/") or k.endswith(".sst")}

    def open_and_read_everything() -> GamlError:
        with pytest.raises(GamlError) as info:
            n2 = open_node(home, UNLOCK, embedder=HashEmbedder())
            try:  # an SST is read lazily: reading every key of every space must surface the damage
                for space in ("assets", "index", "edges", "journal", "vectors", "meta"):
                    list(n2.store.kv.load_range(space))
                n2.store.stats()
            finally:
                n2.store.kv.close()
        return info.value

    before = data_files()
    err = open_and_read_everything()
    assert isinstance(err, StoreCorrupt), err
    assert data_files() == before  # nothing was reset or repaired behind the user's back
    assert type(open_and_read_everything()) is type(err)  # and it is still reported the next time


@pytest.mark.parametrize(
    ("curator", "error"),
    [
        (None, None),
        ({"kind": "extractive"}, None),
        ({"kind": "openai", "base_url": "http://127.0.0.1:8080", "model": "m"}, None),
        ({"kind": "openai", "base_url": "http://localhost:8080", "model": "m"}, None),
        ({"kind": "openai", "base_url": "https://api.example.com", "model": "m"}, "not on this machine"),
        ({"kind": "openai", "base_url": "http://10.0.0.5:8080", "model": "m"}, "not on this machine"),
        ({"kind": "openai", "model": "m"}, "needs 'base_url'"),
        ({"kind": "gpt"}, "unknown curator kind"),
    ],
)
def test_curator_config(home: Path, curator: dict[str, str] | None, error: str | None) -> None:
    """The home's curator setting: extractive by default; a model server only on this machine (curation reads
    local-only memory); a malformed setting is a clear error."""
    if curator is not None:
        edit_config(home, lambda c: c.update(curator=curator))
    node = open_node(home, UNLOCK, embedder=HashEmbedder(64))
    try:
        if error is None:
            _, ladder = memory_layers(home, node)
            expected = "extractive-1" if curator is None or curator["kind"] == "extractive" else "openai-compatible:m"
            assert ladder.curator.name == expected
        else:
            with pytest.raises(GamlError, match=error):
                memory_layers(home, node)
    finally:
        node.close()
