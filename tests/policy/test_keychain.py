"""Keychains: the in-memory one, and FileKeychain (the node's sealed file) with its passphrase or raw-key unlock."""

from __future__ import annotations

import base64
import dataclasses
import json
import random
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gaml.node.shells.file_keychain import FileKeychain, Unlock
from gaml.policy import crypto
from gaml.policy.errors import KeychainError, WrongPassphrase
from gaml.policy.keychain import Keychain, MemoryKeychain

PASSPHRASE = "correct horse battery staple"
RAW_KEY = random.Random(0).randbytes(32)
OTHER_RAW_KEY = random.Random(1).randbytes(32)


def entropy() -> crypto.Entropy:
    return crypto.SeededEntropy(0)


def create(path: Path, unlock: Unlock) -> FileKeychain:
    return FileKeychain.create(path, unlock, entropy())


def reopen(path: Path, unlock: Unlock) -> FileKeychain:
    return FileKeychain.open(path, unlock, entropy())


@dataclasses.dataclass
class Subject:
    keychain: Keychain
    reopen: Callable[[], Keychain]  # what a restart sees (the same object for a MemoryKeychain)


@pytest.fixture(params=["memory", "file-passphrase", "file-raw-key"])
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Subject:
    """A new, empty keychain of each kind, and how to reopen it."""
    if request.param == "memory":
        kc = MemoryKeychain()
        return Subject(kc, lambda: kc)
    unlock = Unlock(passphrase=PASSPHRASE) if request.param == "file-passphrase" else Unlock(key=RAW_KEY)
    path = tmp_path / "keychain.json"
    return Subject(create(path, unlock), lambda: reopen(path, unlock))


# -- the Keychain interface --------------------------------------------------------------------------------------


def test_put_get_refs(subject: Subject) -> None:
    """put stores a secret under a ref; get returns it, also after a reopen; refs lists every ref, sorted."""
    keychain = subject.keychain
    assert keychain.refs() == []
    secrets = {"node/master": b"\x00" * 32, "node/identity": bytes(range(32)), "tenant/acme/1": b"", "z": b"\xff"}
    for ref, secret in secrets.items():
        keychain.put(ref, secret)
    for kc in (keychain, subject.reopen()):
        assert kc.refs() == sorted(secrets)
        for ref, secret in secrets.items():
            assert kc.get(ref) == secret


def test_get_missing_ref(subject: Subject) -> None:
    """get of a ref that was never put raises KeychainError naming it."""
    subject.keychain.put("present", b"x")
    with pytest.raises(KeychainError, match="absent"):
        subject.keychain.get("absent")


def test_put_never_overwrites(subject: Subject) -> None:
    """put of an existing ref raises KeychainError and keeps the old secret, in memory and on disk."""
    keychain = subject.keychain
    keychain.put("node/master", b"old" * 8)
    with pytest.raises(KeychainError, match="never overwritten"):
        keychain.put("node/master", b"new" * 8)
    with pytest.raises(KeychainError):
        keychain.put("node/master", b"old" * 8)  # not even with the same bytes
    for kc in (keychain, subject.reopen()):
        assert kc.get("node/master") == b"old" * 8
        assert kc.refs() == ["node/master"]


def test_memory_keychain_copies_its_input() -> None:
    """MemoryKeychain starts from a copy of the given map, so later changes to that map do not leak in."""
    given = {"a": b"1"}
    kc = MemoryKeychain(given)
    given["b"] = b"2"
    assert kc.refs() == ["a"]


# -- FileKeychain ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("unlock", [Unlock(passphrase=PASSPHRASE), Unlock(key=RAW_KEY)], ids=["passphrase", "raw-key"])
def test_file_mode_is_0600(tmp_path: Path, unlock: Unlock) -> None:
    """The keychain file is readable and writable by its owner only, after create and after every put."""
    path = tmp_path / "keychain.json"
    kc = create(path, unlock)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    kc.put("a", b"secret")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["keychain.json"]  # no temporary file left behind


@pytest.mark.parametrize("unlock", [Unlock(passphrase=PASSPHRASE), Unlock(key=RAW_KEY)], ids=["passphrase", "raw-key"])
def test_reopen_returns_secrets(tmp_path: Path, unlock: Unlock) -> None:
    """Every put is on disk when it returns: a reopen with the same unlock gives the same secrets."""
    path = tmp_path / "keychain.json"
    kc = create(path, unlock)
    assert reopen(path, unlock).refs() == []
    rng = random.Random(0)
    secrets = {f"ref/{i}": rng.randbytes(32) for i in range(4)}
    for ref, secret in secrets.items():
        kc.put(ref, secret)
        again = reopen(path, unlock)
        assert again.get(ref) == secret
    again = reopen(path, unlock)
    assert again.refs() == sorted(secrets)
    assert {r: again.get(r) for r in again.refs()} == secrets
    again.put("later", b"x")  # a reopened keychain can be written to, and keeps the old secrets
    assert reopen(path, unlock).get("later") == b"x"
    assert reopen(path, unlock).get("ref/0") == secrets["ref/0"]


def test_wrong_passphrase(tmp_path: Path) -> None:
    """A wrong passphrase raises WrongPassphrase and leaves the file byte for byte as it was."""
    path = tmp_path / "keychain.json"
    create(path, Unlock(passphrase=PASSPHRASE)).put("a", b"secret")
    before = path.read_bytes()
    for wrong in ("correct horse battery stapl", PASSPHRASE + " ", PASSPHRASE.upper()):
        with pytest.raises(WrongPassphrase):
            reopen(path, Unlock(passphrase=wrong))
        assert path.read_bytes() == before
    assert reopen(path, Unlock(passphrase=PASSPHRASE)).get("a") == b"secret"


def test_raw_key_keychain_opens_only_with_its_key(tmp_path: Path) -> None:
    """A raw-key keychain opens with its key; another key, or a passphrase, raises WrongPassphrase."""
    path = tmp_path / "keychain.json"
    create(path, Unlock(key=RAW_KEY)).put("a", b"secret")
    before = path.read_bytes()
    with pytest.raises(WrongPassphrase):
        reopen(path, Unlock(key=OTHER_RAW_KEY))
    with pytest.raises(WrongPassphrase, match="raw key"):
        reopen(path, Unlock(passphrase=PASSPHRASE))
    with pytest.raises(WrongPassphrase):
        reopen(path, Unlock(passphrase=RAW_KEY.hex()))
    assert path.read_bytes() == before
    assert reopen(path, Unlock(key=RAW_KEY)).get("a") == b"secret"


def test_passphrase_keychain_refuses_a_raw_key(tmp_path: Path) -> None:
    """A passphrase keychain given a raw key raises WrongPassphrase, even the key its passphrase stretches to."""
    path = tmp_path / "keychain.json"
    create(path, Unlock(passphrase=PASSPHRASE)).put("a", b"secret")
    kdf = json.loads(path.read_bytes())["kdf"]
    stretched = crypto.passphrase_key(PASSPHRASE.encode(), bytes.fromhex(kdf["salt"]), kdf["ops"], kdf["mem"])
    for key in (RAW_KEY, stretched):
        with pytest.raises(WrongPassphrase, match="passphrase"):
            reopen(path, Unlock(key=key))


def test_create_refuses_existing_file(tmp_path: Path) -> None:
    """create over an existing file (a keychain or anything else) raises KeychainError and leaves it alone."""
    path = tmp_path / "keychain.json"
    create(path, Unlock(passphrase=PASSPHRASE)).put("a", b"secret")
    before = path.read_bytes()
    for unlock in (Unlock(passphrase=PASSPHRASE), Unlock(key=RAW_KEY)):
        with pytest.raises(KeychainError, match="already exists"):
            create(path, unlock)
        assert path.read_bytes() == before
    other = tmp_path / "notes.txt"
    other.write_bytes(b"not a keychain")
    with pytest.raises(KeychainError):
        create(other, Unlock(key=RAW_KEY))
    assert other.read_bytes() == b"not a keychain"


def test_open_missing_file(tmp_path: Path) -> None:
    """Opening a path with no keychain raises KeychainError that says to run `gaml init`."""
    with pytest.raises(KeychainError, match="gaml init"):
        reopen(tmp_path / "absent.json", Unlock(key=RAW_KEY))


# -- corruption --------------------------------------------------------------------------------------------------


def make_file(tmp_path: Path, unlock: Unlock) -> Path:
    path = tmp_path / "keychain.json"
    kc = create(path, unlock)
    kc.put("node/master", random.Random(2).randbytes(32))
    kc.put("node/identity", random.Random(3).randbytes(32))
    return path


def open_corrupted(path: Path, unlock: Unlock, data: bytes) -> str:
    """Write ``data`` over the keychain and open it: 'refused' for a KeychainError, 'intact' for the same secrets."""
    good = reopen(path, unlock)
    secrets = {r: good.get(r) for r in good.refs()}
    original = path.read_bytes()
    path.write_bytes(data)
    try:
        kc = reopen(path, unlock)
    except KeychainError:
        return "refused"
    finally:
        path.write_bytes(original)
    assert {r: kc.get(r) for r in kc.refs()} == secrets, "a corrupted keychain opened with other secrets"
    return "intact"


@pytest.mark.parametrize("unlock", [Unlock(passphrase=PASSPHRASE), Unlock(key=RAW_KEY)], ids=["passphrase", "raw-key"])
def test_truncated_file_is_refused(tmp_path: Path, unlock: Unlock) -> None:
    """A keychain file cut short anywhere (here: empty, 1 byte, mid-header, mid-seal, last byte gone) is refused."""
    path = make_file(tmp_path, unlock)
    data = path.read_bytes()
    sealed_at = data.index(b'"sealed"')
    for n in (0, 1, len(data) // 3, sealed_at + 20, len(data) - 3, len(data) - 1):
        assert open_corrupted(path, unlock, data[:n]) == "refused", n


@pytest.mark.parametrize("unlock", [Unlock(passphrase=PASSPHRASE), Unlock(key=RAW_KEY)], ids=["passphrase", "raw-key"])
def test_altered_sealed_part_is_refused(tmp_path: Path, unlock: Unlock) -> None:
    """A changed character in the sealed part raises WrongPassphrase (or KeychainError if it is not base64)."""
    path = make_file(tmp_path, unlock)
    doc = json.loads(path.read_bytes())
    sealed = base64.b64decode(doc["sealed"])
    for i in (0, 1, 30, len(sealed) // 2, len(sealed) - 1):
        altered = bytearray(sealed)
        altered[i] ^= 0x01
        path_doc = dict(doc, sealed=base64.b64encode(bytes(altered)).decode())
        path.write_text(json.dumps(path_doc))
        with pytest.raises(WrongPassphrase):
            reopen(path, unlock)
    for bad in ("!!!!" + doc["sealed"][4:], doc["sealed"][:-1], ""):
        path.write_text(json.dumps(dict(doc, sealed=bad)))
        with pytest.raises(KeychainError):
            reopen(path, unlock)


def test_every_flipped_byte_of_a_raw_key_file(tmp_path: Path) -> None:
    """Flipping one bit anywhere in a keychain file either is refused with KeychainError or opens the same secrets."""
    unlock = Unlock(key=RAW_KEY)
    path = make_file(tmp_path, unlock)
    data = path.read_bytes()
    bit = random.Random(4)
    crashes = []
    for i in range(len(data)):
        altered = bytearray(data)
        altered[i] ^= 1 << bit.randrange(7)  # stay in ASCII: every byte of the file is ASCII
        try:
            open_corrupted(path, unlock, bytes(altered))
        except Exception as e:
            crashes.append(f"byte {i} {data[i : i + 1]!r}->{bytes(altered[i : i + 1])!r}: {type(e).__name__}: {e}")
    assert not crashes, f"{len(crashes)} flips crashed instead of raising KeychainError:\n" + "\n".join(crashes[:10])


HEADER_DAMAGE: dict[str, Callable[[dict[str, Any]], None]] = {
    "salt not hex": lambda d: d["kdf"].update(salt="zz" + d["kdf"]["salt"][2:]),
    "salt too short": lambda d: d["kdf"].update(salt=d["kdf"]["salt"][:-2]),
    "salt missing": lambda d: d["kdf"].pop("salt"),
    "ops missing": lambda d: d["kdf"].pop("ops"),
    "alg missing": lambda d: d["kdf"].pop("alg"),
    "alg unknown": lambda d: d["kdf"].update(alg="scrypt"),
    "kdf not an object": lambda d: d.update(kdf="argon2id"),
    "format unknown": lambda d: d.update(format="gaml-keychain-0"),
    "ops changed": lambda d: d["kdf"].update(ops=d["kdf"]["ops"] + 1),
    "not an object": lambda d: (d.clear(), d.update(x=1)),
}


@pytest.mark.parametrize("damage", list(HEADER_DAMAGE))
def test_damaged_header_is_refused(tmp_path: Path, damage: str) -> None:
    """A passphrase keychain whose header fields are damaged is refused with KeychainError, never another error."""
    unlock = Unlock(passphrase=PASSPHRASE)
    path = make_file(tmp_path, unlock)
    doc = json.loads(path.read_bytes())
    HEADER_DAMAGE[damage](doc)
    assert open_corrupted(path, unlock, json.dumps(doc).encode()) == "refused"


@pytest.mark.parametrize("data", [b"", b"null", b"[]", b'"text"', b"\xff\xfe", b"{", b'{"format": "gaml-keychain-1"}'])
def test_not_a_keychain_is_refused(tmp_path: Path, data: bytes) -> None:
    """A file that is not a keychain document at all raises KeychainError."""
    unlock = Unlock(key=RAW_KEY)
    path = make_file(tmp_path, unlock)
    assert open_corrupted(path, unlock, data) == "refused"


# -- unlocking ---------------------------------------------------------------------------------------------------


def test_unlock_arguments() -> None:
    """Unlock takes exactly one of a non-empty passphrase or a 32-byte key."""
    assert Unlock(passphrase="p").passphrase == "p"
    assert Unlock(key=RAW_KEY).key == RAW_KEY
    for kw in (
        {},
        {"passphrase": "p", "key": RAW_KEY},
        {"passphrase": ""},
        {"key": b""},
        {"key": RAW_KEY[:31]},
        {"key": RAW_KEY + b"\x00"},
    ):
        with pytest.raises(KeychainError):
            Unlock(**kw)


def test_unlock_from_env() -> None:
    """from_env reads GAML_KEYCHAIN_KEY (hex, preferred) or GAML_PASSPHRASE, and None when neither is set."""
    by_key = Unlock.from_env({"GAML_KEYCHAIN_KEY": RAW_KEY.hex()})
    assert by_key is not None and by_key.key == RAW_KEY and by_key.passphrase is None
    padded = Unlock.from_env({"GAML_KEYCHAIN_KEY": f"  {RAW_KEY.hex().upper()}\n"})
    assert padded is not None and padded.key == RAW_KEY
    by_pass = Unlock.from_env({"GAML_PASSPHRASE": PASSPHRASE})
    assert by_pass is not None and by_pass.passphrase == PASSPHRASE and by_pass.key is None
    both = Unlock.from_env({"GAML_KEYCHAIN_KEY": RAW_KEY.hex(), "GAML_PASSPHRASE": PASSPHRASE})
    assert both is not None and both.key == RAW_KEY
    empty_key = Unlock.from_env({"GAML_KEYCHAIN_KEY": "", "GAML_PASSPHRASE": PASSPHRASE})
    assert empty_key is not None and empty_key.passphrase == PASSPHRASE
    assert Unlock.from_env({}) is None
    assert Unlock.from_env({"GAML_KEYCHAIN_KEY": "", "GAML_PASSPHRASE": ""}) is None
    assert Unlock.from_env({"HOME": "/root"}) is None


@pytest.mark.parametrize(
    "value", ["zz" * 32, RAW_KEY.hex()[:-1], RAW_KEY.hex()[:-2], RAW_KEY.hex() + "00", "0x" + RAW_KEY.hex(), "é" * 64]
)
def test_unlock_from_env_bad_hex(value: str) -> None:
    """A GAML_KEYCHAIN_KEY that is not 64 hex characters raises KeychainError."""
    with pytest.raises(KeychainError):
        Unlock.from_env({"GAML_KEYCHAIN_KEY": value})


def test_env_unlock_opens_its_keychain(tmp_path: Path) -> None:
    """A keychain created with the key from GAML_KEYCHAIN_KEY reopens with the same environment."""
    env = {"GAML_KEYCHAIN_KEY": RAW_KEY.hex()}
    unlock = Unlock.from_env(env)
    assert unlock is not None
    create(tmp_path / "kc.json", unlock).put("a", b"secret")
    again = Unlock.from_env(env)
    assert again is not None
    assert reopen(tmp_path / "kc.json", again).get("a") == b"secret"


# -- what the file reveals ---------------------------------------------------------------------------------------


def encodings_of(secret: bytes) -> dict[str, bytes]:
    """Every way a secret could show up in a text file: raw, hex, and base64 at each byte alignment."""
    out = {"raw": secret, "hex": secret.hex().encode(), "HEX": secret.hex().upper().encode()}
    for name, data in (("bytes", secret), ("hex", secret.hex().encode())):
        for offset in range(3):
            padded = bytes(offset) + data
            for alphabet, encode in (("b64", base64.b64encode), ("urlsafe", base64.urlsafe_b64encode)):
                text = encode(padded)
                core = text[4 if offset else 0 : -4]  # the characters that depend on `data` alone
                out[f"{alphabet}({name}, offset {offset})"] = core
    return out


@pytest.mark.parametrize("unlock", [Unlock(passphrase=PASSPHRASE), Unlock(key=RAW_KEY)], ids=["passphrase", "raw-key"])
def test_file_never_contains_secrets(tmp_path: Path, unlock: Unlock) -> None:
    """The keychain file holds no secret (nor the passphrase or raw key) in raw, hex or base64 form."""
    path = tmp_path / "keychain.json"
    kc = create(path, unlock)
    rng = random.Random(5)
    secrets = [rng.randbytes(32) for _ in range(3)] + [b"a readable secret phrase, 32 b!!"]
    for i, secret in enumerate(secrets):
        kc.put(f"ref/{i}", secret)
    data = path.read_bytes()
    for secret in [*secrets, RAW_KEY, PASSPHRASE.encode()]:
        for name, needle in encodings_of(secret).items():
            assert needle not in data, f"the file contains {name} of a secret"
