"""The certificate layer of the daemon's mutual TLS: ``policy.crypto``'s certificates, ``node.certs``'s files, and a
real gRPC handshake over TCP on 127.0.0.1 with them."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from gaml.node.shells import certs
from gaml.node.shells.file_keychain import FileKeychain, Unlock
from gaml.policy import crypto
from gaml.policy.errors import BadSignature, InvalidInput, KeychainError, NotFound, StoreCorrupt
from gaml.policy.keychain import Keychain, MemoryKeychain

NOW = 1_800_000_000  # a fixed Unix time in seconds; the gRPC tests use the wall clock, as TLS does
DAY = 86_400
HOSTS = ("127.0.0.1", "::1", "localhost")


def _ca(seed: int = 0, name: str = "test") -> tuple[bytes, bytes]:
    return crypto.make_ca(name, NOW, entropy=crypto.SeededEntropy(seed))


def _client(ca: tuple[bytes, bytes], principal: str = "alice", seed: int = 1, **kw: Any) -> tuple[bytes, bytes, str]:
    return crypto.issue_cert(*ca, principal, kw.pop("now_s", NOW), entropy=crypto.SeededEntropy(seed), **kw)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- policy.crypto: certificates -----------------------------------------------------------------------------------


def test_ca_is_a_self_signed_ca_valid_from_the_skew_to_its_days() -> None:
    """A node CA names itself, is a CA, and is valid from now - 300 s to now + days."""
    key_pem, cert_pem = crypto.make_ca("n1", NOW, days=10, entropy=crypto.SeededEntropy(0))
    info = crypto.cert_info(cert_pem)
    assert info.is_ca
    assert info.principal == info.issuer_cn == "GAML node CA n1"
    assert (info.not_before_s, info.not_after_s) == (NOW - crypto.CERT_SKEW_S, NOW + 10 * DAY)
    assert key_pem.startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS#8, unencrypted
    crypto.verify_issued(cert_pem, cert_pem)
    cert = x509.load_pem_x509_certificate(cert_pem)
    basic = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert basic.critical and basic.value.ca and basic.value.path_length == 0
    assert usage.key_cert_sign and usage.crl_sign and not usage.digital_signature
    cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)


def test_client_cert_round_trips_its_principal_and_serial() -> None:
    """A client certificate carries its principal (SAN URI and CN) and serial, and verifies under its CA."""
    ca = _ca()
    key_pem, cert_pem, serial = _client(ca, "agent:claude@alice-laptop", days=30)
    info = crypto.cert_info(cert_pem)
    assert info == crypto.CertInfo(
        principal="agent:claude@alice-laptop",
        serial_hex=serial,
        not_before_s=NOW - crypto.CERT_SKEW_S,
        not_after_s=NOW + 30 * DAY,
        issuer_cn="GAML node CA test",
        is_ca=False,
    )
    crypto.verify_issued(ca[1], cert_pem)
    crypto.check_key_pair(key_pem, cert_pem)
    cert = x509.load_pem_x509_certificate(cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.UniformResourceIdentifier) == ["gaml:principal:agent:claude@alice-laptop"]
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH
    ]
    aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    ca_ski = x509.load_pem_x509_certificate(ca[1]).extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    assert aki.key_identifier == ca_ski.value.digest
    assert 0 < cert.serial_number < 2**127 and f"{cert.serial_number:x}" == serial


def test_server_cert_names_its_hosts_for_server_auth() -> None:
    """A server certificate lists its hosts as IP and DNS SANs (deduplicated) and is for server auth only."""
    _, cert_pem, _ = _client(_ca(), "gaml-node", server=True, hosts=[*HOSTS, "Node.Example.", "127.0.0.1"])
    cert = x509.load_pem_x509_certificate(cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    assert san.get_values_for_type(x509.DNSName) == ["localhost", "node.example"]
    assert san.get_values_for_type(x509.UniformResourceIdentifier) == []
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH
    ]
    assert crypto.cert_info(cert_pem).principal == "gaml-node"


@pytest.mark.parametrize("hosts", [(), ["a b"], "localhost", ["héllo"]])
def test_server_cert_needs_hosts(hosts: Any) -> None:
    """A server certificate needs at least one well-formed host; a client certificate takes none."""
    with pytest.raises(InvalidInput):
        _client(_ca(), "gaml-node", server=True, hosts=hosts)
    with pytest.raises(InvalidInput, match="client certificate names no hosts"):
        _client(_ca(), "alice", hosts=["localhost"])


def test_certs_from_the_same_entropy_are_the_same_bytes() -> None:
    """Keys, serials and (deterministic ECDSA) signatures come from the entropy passed in: same seed, same bytes."""
    assert _ca(7) == _ca(7)
    assert _client(_ca(7), seed=3) == _client(_ca(7), seed=3)
    assert _ca(7)[0] != _ca(8)[0]
    assert _client(_ca(7), seed=3)[2] != _client(_ca(7), seed=4)[2]


@pytest.mark.parametrize("name", ["test", "other"])
def test_a_cert_of_another_ca_is_a_bad_signature(name: str) -> None:
    """verify_issued refuses a certificate of another CA, even one with the same name."""
    _, cert_pem, _ = _client(_ca(1, name))
    with pytest.raises(BadSignature, match="not issued by the CA"):
        crypto.verify_issued(_ca(0, "test")[1], cert_pem)


@pytest.mark.parametrize(
    "bad", [b"", b"not a certificate", b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "text"]
)
def test_bad_pem_is_invalid_input(bad: Any) -> None:
    """Anything but a PEM certificate is refused as InvalidInput, wherever a certificate is expected."""
    ca = _ca()
    with pytest.raises(InvalidInput, match="certificate"):
        crypto.cert_info(bad)
    with pytest.raises(InvalidInput, match="certificate"):
        crypto.verify_issued(ca[1], bad)
    with pytest.raises(InvalidInput, match="certificate"):
        crypto.issue_cert(ca[0], bad, "alice", NOW)


def test_a_key_is_not_a_certificate_and_errors_never_show_key_bytes() -> None:
    """A key where a certificate is expected (and vice versa) is InvalidInput, and no message quotes the PEM."""
    ca_key, ca_cert = _ca()
    body = ca_key.split(b"\n")[1].decode()
    with pytest.raises(InvalidInput) as e1:
        crypto.cert_info(ca_key)
    with pytest.raises(InvalidInput) as e2:
        crypto.issue_cert(ca_cert, ca_cert, "alice", NOW)
    with pytest.raises(InvalidInput) as e3:
        crypto.issue_cert(ca_key[:-40], ca_cert, "alice", NOW)
    for e in (e1, e2, e3):
        assert body not in str(e.value) and body[:16] not in repr(e.value)
    assert "PRIVATE" not in repr(crypto.cert_info(ca_cert))


@pytest.mark.parametrize("principal", ["", "a b", "tab\there", "new\nline", "josé", "x" * 65, None, 42])
def test_bad_principal_is_invalid_input(principal: Any) -> None:
    """A principal id is a non-empty printable ASCII word of at most 64 characters."""
    with pytest.raises(InvalidInput, match="principal id"):
        _client(_ca(), principal)
    with pytest.raises(InvalidInput, match="principal id"):
        crypto.check_principal_id(principal)


def test_issuing_checks_the_ca_key_and_expiry_and_clamps_to_the_ca() -> None:
    """The CA key must match the CA certificate; an expired CA issues nothing; no certificate outlives its CA."""
    ca_key, ca_cert = crypto.make_ca("short", NOW, days=10, entropy=crypto.SeededEntropy(0))
    other_key, _ = _ca(1)
    with pytest.raises(InvalidInput, match="does not belong to the CA certificate"):
        crypto.issue_cert(other_key, ca_cert, "alice", NOW)
    with pytest.raises(InvalidInput, match="expired"):
        crypto.issue_cert(ca_key, ca_cert, "alice", NOW + 10 * DAY)
    _, cert_pem, _ = crypto.issue_cert(ca_key, ca_cert, "alice", NOW, days=365)
    assert crypto.cert_info(cert_pem).not_after_s == NOW + 10 * DAY
    with pytest.raises(InvalidInput, match="days"):
        crypto.issue_cert(ca_key, ca_cert, "alice", NOW, days=0)
    with pytest.raises(InvalidInput, match="now_s"):
        crypto.make_ca("x", 1.5)  # type: ignore[arg-type]


def test_make_ca_can_certify_an_existing_key() -> None:
    """make_ca(key_pem=...) certifies the given key instead of making one."""
    key_pem, _ = _ca(3)
    again_key, cert_pem = crypto.make_ca("again", NOW, key_pem=key_pem, entropy=crypto.SeededEntropy(9))
    assert again_key == key_pem
    crypto.check_key_pair(key_pem, cert_pem)
    with pytest.raises(InvalidInput, match="does not belong"):
        crypto.check_key_pair(_ca(4)[0], cert_pem)


# -- node.certs: the files of a home -------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "file"])
def make_keychain(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Keychain]:
    """A keychain factory: the in-memory one, or a real FileKeychain that each call reopens from disk."""
    if request.param == "memory":
        kc = MemoryKeychain()
        return lambda: kc
    path = tmp_path / "keychain.json"
    unlock = Unlock(passphrase="correct horse")
    FileKeychain.create(path, unlock, crypto.SystemEntropy())
    return lambda: FileKeychain.open(path, unlock, crypto.SystemEntropy())


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir(mode=0o700)
    return h


def _init(home: Path, keychain: Keychain, seed: int = 0, **kw: Any) -> crypto.CertInfo:
    return certs.init_ca(home, keychain, NOW, entropy=crypto.SeededEntropy(seed), **kw)


def test_init_ca_writes_public_files_and_keeps_keys_in_the_keychain(
    home: Path, make_keychain: Callable[[], Keychain]
) -> None:
    """init_ca writes the CA and server certificates and server.json; both private keys live only in the keychain."""
    assert not certs.has_tls(home)
    info = _init(home, make_keychain(), name="n1")
    tls = home / "tls"
    assert info.is_ca and info.principal == "GAML node CA n1"
    assert certs.has_tls(home)
    assert sorted(p.name for p in tls.iterdir()) == ["ca.crt", "server.crt", "server.json"]
    assert _mode(tls / "ca.crt") == 0o644 and _mode(tls / "server.crt") == 0o644 and _mode(tls) == 0o700
    server = json.loads((tls / "server.json").read_text())
    server_info = crypto.cert_info((tls / "server.crt").read_bytes())
    key_ref = f"tls/server/{server_info.serial_hex}"
    assert server == {"key_ref": key_ref, "serial": server_info.serial_hex, "hosts": list(HOSTS)}
    assert server_info.principal == certs.SERVER_PRINCIPAL and not server_info.is_ca
    kc = make_keychain()  # reopened from disk for the file keychain: the keys are durable
    assert kc.refs() == ["tls/ca", server["key_ref"]]
    key_pem, cert_pem, ca_pem = certs.server_material(home, kc, now_s=NOW)
    assert (cert_pem, ca_pem) == ((tls / "server.crt").read_bytes(), (tls / "ca.crt").read_bytes())
    crypto.check_key_pair(key_pem, cert_pem)
    crypto.check_key_pair(kc.get("tls/ca"), ca_pem)
    crypto.verify_issued(ca_pem, cert_pem)
    for path in home.rglob("*"):
        if path.is_file():
            assert b"PRIVATE KEY" not in path.read_bytes(), path


def test_second_init_is_refused_and_changes_nothing(home: Path, make_keychain: Callable[[], Keychain]) -> None:
    """A home that has a CA refuses another init, and its files and keychain stay as they were."""
    _init(home, make_keychain())
    before = {p.name: p.read_bytes() for p in (home / "tls").iterdir()}
    refs = make_keychain().refs()
    with pytest.raises(InvalidInput, match="already has a CA"):
        _init(home, make_keychain(), seed=1)
    assert {p.name: p.read_bytes() for p in (home / "tls").iterdir()} == before
    assert make_keychain().refs() == refs


def test_init_with_bad_hosts_stores_nothing(home: Path) -> None:
    """Bad hosts are refused before any key or file is stored, so init can simply be run again."""
    kc = MemoryKeychain()
    with pytest.raises(InvalidInput, match="host"):
        _init(home, kc, hosts=["two words"])
    assert kc.refs() == [] and not (home / "tls").exists()
    _init(home, kc)
    assert certs.has_tls(home)


def test_init_resumes_with_a_stored_ca_key(home: Path) -> None:
    """If an earlier init stored the CA key and stopped, the next init certifies that key instead of failing."""
    key_pem, _ = _ca(5)
    kc = MemoryKeychain({"tls/ca": key_pem})
    _init(home, kc)
    crypto.check_key_pair(key_pem, (home / "tls" / "ca.crt").read_bytes())


def test_renew_server_makes_a_new_key_under_a_new_ref(home: Path, make_keychain: Callable[[], Keychain]) -> None:
    """renew_server issues a new server key and certificate; the old key stays (keychains never overwrite)."""
    _init(home, make_keychain())
    old = json.loads((home / "tls" / "server.json").read_text())
    info = certs.renew_server(home, make_keychain(), NOW + DAY, hosts=["10.0.0.7"], entropy=crypto.SeededEntropy(2))
    new = json.loads((home / "tls" / "server.json").read_text())
    assert new == {"key_ref": f"tls/server/{info.serial_hex}", "serial": info.serial_hex, "hosts": ["10.0.0.7"]}
    assert new["serial"] != old["serial"] and info.not_before_s == NOW + DAY - crypto.CERT_SKEW_S
    assert make_keychain().refs() == sorted(["tls/ca", old["key_ref"], new["key_ref"]])
    key_pem, cert_pem, _ = certs.server_material(home, make_keychain())
    assert crypto.cert_info(cert_pem).serial_hex == info.serial_hex
    crypto.check_key_pair(key_pem, cert_pem)


def test_server_material_says_what_to_run(home: Path) -> None:
    """Without certificates, or after an interrupted renewal, or when expired, server_material says what to run."""
    kc = MemoryKeychain()
    assert not certs.has_tls(home)
    with pytest.raises(NotFound, match="gaml certs init"):
        certs.server_material(home, kc)
    with pytest.raises(NotFound, match="gaml certs init"):
        certs.renew_server(home, kc, NOW)
    _init(home, kc)
    server_json = (home / "tls" / "server.json").read_bytes()
    certs.renew_server(home, kc, NOW)
    (home / "tls" / "server.json").write_bytes(server_json)  # as if renewal stopped before its last write
    with pytest.raises(StoreCorrupt, match="renew-server"):
        certs.server_material(home, kc)
    certs.renew_server(home, kc, NOW)
    certs.server_material(home, kc, now_s=NOW)
    with pytest.raises(InvalidInput, match="renew-server"):
        certs.server_material(home, kc, now_s=NOW + 366 * DAY)
    (home / "tls" / "server.json").unlink()
    assert not certs.has_tls(home)
    with pytest.raises(NotFound, match="renew-server"):
        certs.server_material(home, kc)
    with pytest.raises(KeychainError, match="tls/ca"):
        certs.renew_server(home, MemoryKeychain(), NOW)


def test_issue_client_writes_a_private_key_once(home: Path, tmp_path: Path) -> None:
    """issue_client writes key (0600), certificate and CA into out_dir, records no key, and never overwrites."""
    kc = MemoryKeychain()
    _init(home, kc)
    refs = kc.refs()
    out = tmp_path / "alice-certs"
    info = certs.issue_client(home, kc, "alice", out, NOW, days=30, entropy=crypto.SeededEntropy(3))
    key_path, cert_path, ca_path = certs.client_paths(out, "alice")
    assert (key_path, cert_path, ca_path) == (out / "alice.key", out / "alice.crt", out / "ca.crt")
    assert _mode(key_path) == 0o600 and _mode(cert_path) == 0o644 and _mode(out) == 0o700
    assert ca_path.read_bytes() == (home / "tls" / "ca.crt").read_bytes()
    _, cert_pem, ca_pem = certs.load_client(key_path, cert_path, ca_path)
    assert crypto.cert_info(cert_pem) == info and info.principal == "alice" and info.not_after_s == NOW + 30 * DAY
    crypto.verify_issued(ca_pem, cert_pem)
    assert kc.refs() == refs  # the node keeps no client key
    assert certs.list_issued(home, kc) == [
        {"principal": "alice", "serial": info.serial_hex, "not_after": NOW + 30 * DAY}
    ]
    assert _mode(home / "tls" / "issued.json") == 0o600
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(InvalidInput, match="refusing to overwrite"):
        certs.issue_client(home, kc, "alice", out, NOW)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    bob = certs.issue_client(home, kc, "bob", out, NOW)  # the same CA's ca.crt is shared
    assert [r["principal"] for r in certs.list_issued(home, kc)] == [
        "alice",
        "bob",
    ] and bob.serial_hex != info.serial_hex
    for path in (home / "tls").iterdir():
        assert b"PRIVATE KEY" not in path.read_bytes(), path


def test_issue_client_refuses_unsafe_names_and_another_cas_directory(home: Path, tmp_path: Path) -> None:
    """A principal that cannot be a file name, or an out_dir holding another CA's ca.crt, is refused."""
    kc = MemoryKeychain()
    with pytest.raises(NotFound, match="gaml certs init"):
        certs.issue_client(home, kc, "alice", tmp_path / "out", NOW)
    _init(home, kc)
    for principal in ("../evil", "a/b", ".hidden", "a b"):
        with pytest.raises(InvalidInput, match="principal"):
            certs.issue_client(home, kc, principal, tmp_path / "out", NOW)
    other = tmp_path / "other"
    other.mkdir()
    (other / "ca.crt").write_bytes(_ca(9)[1])
    with pytest.raises(InvalidInput, match="another CA"):
        certs.issue_client(home, kc, "alice", other, NOW)
    assert certs.list_issued(home, kc) == []


def test_load_client_reports_missing_and_mismatched_files(home: Path, tmp_path: Path) -> None:
    """load_client names a missing file, a malformed one, and a key that belongs to another certificate."""
    kc = MemoryKeychain()
    _init(home, kc)
    certs.issue_client(home, kc, "alice", tmp_path / "a", NOW)
    certs.issue_client(home, kc, "bob", tmp_path / "b", NOW)
    a_key, a_crt, a_ca = certs.client_paths(tmp_path / "a", "alice")
    b_key, _, _ = certs.client_paths(tmp_path / "b", "bob")
    with pytest.raises(NotFound, match=r"missing\.key"):
        certs.load_client(tmp_path / "missing.key", a_crt, a_ca)
    with pytest.raises(InvalidInput, match="does not belong") as e:
        certs.load_client(b_key, a_crt, a_ca)
    assert b"PRIVATE" not in str(e.value).encode()
    with pytest.raises(InvalidInput, match="not a PEM certificate"):
        certs.load_client(a_key, a_key, a_ca)
    with pytest.raises(InvalidInput, match="cannot read"):
        certs.load_client(tmp_path / "a", a_crt, a_ca)  # a directory


def test_revoke_by_serial_and_principal_is_seen_without_waiting(home: Path, tmp_path: Path) -> None:
    """Revocations sees each revocation on its next check, even several within one mtime tick."""
    kc = MemoryKeychain()
    _init(home, kc)
    alice = certs.issue_client(home, kc, "alice", tmp_path / "a", NOW)
    bob = certs.issue_client(home, kc, "bob", tmp_path / "b", NOW)
    revocations = certs.Revocations(home, kc)
    assert not revocations.is_revoked(alice.serial_hex, "alice")  # no revoked.json: nothing revoked
    colons = ":".join(alice.serial_hex.upper().zfill(32)[i : i + 2] for i in range(0, 32, 2))
    doc = certs.revoke(home, NOW, keychain=kc, serial=colons)  # as a certificate viewer spells it
    assert doc == {"serials": [alice.serial_hex], "principals": [], "updated_s": NOW}
    assert revocations.is_revoked(alice.serial_hex, "alice")
    assert not revocations.is_revoked(bob.serial_hex, "bob")
    path = home / "tls" / "revoked.json"
    tick = path.stat().st_mtime_ns
    certs.revoke(home, NOW + 1, keychain=kc, principal="bob")
    os.utime(path, ns=(tick, tick))  # the same mtime as the previous version
    assert revocations.is_revoked(bob.serial_hex, "bob")
    assert revocations.is_revoked("ffff", "bob")  # every certificate of a revoked principal
    assert certs.revoke(home, NOW + 2, keychain=kc, principal="bob")["principals"] == [
        "bob"
    ]  # revoking twice is harmless
    assert json.loads(path.read_text())["serials"] == [alice.serial_hex]


def test_revoke_takes_exactly_one_well_formed_target(home: Path) -> None:
    """revoke needs a CA, exactly one of serial and principal, a hex serial and a valid principal."""
    kc = MemoryKeychain()
    with pytest.raises(NotFound, match="gaml certs init"):
        certs.revoke(home, NOW, keychain=kc, principal="alice")
    _init(home, kc)
    with pytest.raises(InvalidInput, match="exactly one"):
        certs.revoke(home, NOW, keychain=kc)
    with pytest.raises(InvalidInput, match="exactly one"):
        certs.revoke(home, NOW, keychain=kc, serial="ab", principal="alice")
    for serial in ("xyz", "0", ""):
        with pytest.raises(InvalidInput, match="serial"):
            certs.revoke(home, NOW, keychain=kc, serial=serial)
    with pytest.raises(InvalidInput, match="principal"):
        certs.revoke(home, NOW, keychain=kc, principal="two words")
    assert not (home / "tls" / "revoked.json").exists()


def test_a_corrupt_revocation_list_fails_closed_until_repaired(home: Path) -> None:
    """A corrupt revoked.json makes every check raise StoreCorrupt; a repaired one is read again."""
    kc = MemoryKeychain()
    _init(home, kc)
    revocations = certs.Revocations(home, kc)
    path = home / "tls" / "revoked.json"
    for bad in (b"{not json", b"[]", b'{"serials": "ab"}', b'{"serials": ["zz"]}'):
        path.write_bytes(bad)
        with pytest.raises(StoreCorrupt, match=r"revoked\.json"):
            revocations.is_revoked("ab", "alice")
        with pytest.raises(StoreCorrupt):
            revocations.is_revoked("ab", "alice")  # still, though the file has not changed since
        path.unlink()
    assert not revocations.is_revoked("ab", "alice")
    path.write_bytes(b'{"serials": ["AB"], "principals": []}')
    assert revocations.is_revoked("ab", "alice")
    path.write_bytes(b"[1]")
    with pytest.raises(StoreCorrupt, match="revocation list"):
        certs.revoke(home, NOW, keychain=kc, principal="carol")  # revoke never replaces a list it cannot read


def test_revocations_rereads_only_a_changed_file(home: Path) -> None:
    """An unchanged (inode, mtime, size) is not read again: each check costs a stat."""
    kc = MemoryKeychain()
    _init(home, kc)
    certs.revoke(home, NOW, keychain=kc, serial="ab")
    revocations = certs.Revocations(home, kc)
    assert revocations.is_revoked("ab", "alice")
    path = home / "tls" / "revoked.json"
    st = path.stat()
    path.write_bytes(path.read_bytes().replace(b'"ab"', b'"cd"'))  # in place: same inode and size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert revocations.is_revoked("ab", "alice")  # the cached list
    assert not certs.Revocations(home, kc).is_revoked("ab", "alice")  # a fresh reader sees the edit


# -- a real mutual-TLS handshake with gRPC -------------------------------------------------------------------------


@dataclasses.dataclass
class Seen:
    """What the server saw of its callers: their auth contexts, and the principal each one was served as."""

    auth: list[dict[str, list[bytes]]] = dataclasses.field(default_factory=list)
    identity_keys: list[str | None] = dataclasses.field(default_factory=list)
    principals: list[crypto.CertInfo] = dataclasses.field(default_factory=list)


class _AuthHealth(health.HealthServicer):
    """The health service behind the check the daemon makes per call: who is the peer, and is it revoked?"""

    def __init__(self, seen: Seen, revocations: certs.Revocations) -> None:
        super().__init__()
        self._seen = seen
        self._revocations = revocations

    def Check(self, request: Any, context: grpc.ServicerContext) -> Any:
        auth = {k: list(v) for k, v in context.auth_context().items()}
        self._seen.auth.append(auth)
        self._seen.identity_keys.append(context.peer_identity_key())
        info = crypto.cert_info(auth["x509_pem_cert"][0])
        if self._revocations.is_revoked(info.serial_hex, info.principal):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "certificate revoked")
        self._seen.principals.append(info)
        return super().Check(request, context)


@pytest.fixture
def tls_home(home: Path) -> tuple[Path, MemoryKeychain, int]:
    """A home whose certificates are valid now by the wall clock (TLS checks dates against it)."""
    kc = MemoryKeychain()
    now_s = int(time.time())
    certs.init_ca(home, kc, now_s, entropy=crypto.SeededEntropy(11))
    return home, kc, now_s


@contextmanager
def _serve(home: Path, kc: Keychain) -> Iterator[tuple[int, Seen]]:
    key_pem, cert_pem, ca_pem = certs.server_material(home, kc)
    creds = grpc.ssl_server_credentials([(key_pem, cert_pem)], root_certificates=ca_pem, require_client_auth=True)
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    seen = Seen()
    servicer = _AuthHealth(seen, certs.Revocations(home, kc))
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_secure_port("127.0.0.1:0", creds)
    assert port > 0
    server.start()
    try:
        yield port, seen
    finally:
        server.stop(None)


def _check(port: int, creds: grpc.ChannelCredentials) -> Any:
    with grpc.secure_channel(f"127.0.0.1:{port}", creds) as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)


def _refused(port: int, creds: grpc.ChannelCredentials) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as e:
        _check(port, creds)
    code: grpc.StatusCode = e.value.code()
    return code


def test_mtls_client_with_an_issued_cert_is_served_as_its_principal(
    tls_home: tuple[Path, MemoryKeychain, int], tmp_path: Path
) -> None:
    """Over TCP, a client holding an issued certificate is served, and the server reads its principal and serial."""
    home, kc, now_s = tls_home
    issued = certs.issue_client(home, kc, "agent:bob@laptop", tmp_path / "bob", now_s)
    key_pem, cert_pem, ca_pem = certs.load_client(*certs.client_paths(tmp_path / "bob", "agent:bob@laptop"))
    creds = grpc.ssl_channel_credentials(root_certificates=ca_pem, private_key=key_pem, certificate_chain=cert_pem)
    with _serve(home, kc) as (port, seen):
        assert _check(port, creds).status == health_pb2.HealthCheckResponse.SERVING
    [auth] = seen.auth
    assert auth["transport_security_type"] == [b"ssl"]
    assert auth["security_level"] == [b"TSI_PRIVACY_AND_INTEGRITY"]
    assert auth["x509_common_name"] == [b"agent:bob@laptop"]
    assert auth["x509_subject_alternative_name"] == [b"gaml:principal:agent:bob@laptop"]
    assert auth["peer_uri"] == [b"gaml:principal:agent:bob@laptop"]
    assert seen.identity_keys == ["x509_subject_alternative_name"]
    assert auth["x509_pem_cert"] == [cert_pem]
    assert seen.principals == [issued]


def test_mtls_refuses_a_revoked_client_on_its_next_call(
    tls_home: tuple[Path, MemoryKeychain, int], tmp_path: Path
) -> None:
    """TLS accepts a revoked certificate (it has no CRL); the per-call check refuses it as soon as it is revoked."""
    home, kc, now_s = tls_home
    info = certs.issue_client(home, kc, "carol", tmp_path / "c", now_s)
    key_pem, cert_pem, ca_pem = certs.load_client(*certs.client_paths(tmp_path / "c", "carol"))
    creds = grpc.ssl_channel_credentials(root_certificates=ca_pem, private_key=key_pem, certificate_chain=cert_pem)
    with _serve(home, kc) as (port, seen):
        _check(port, creds)
        certs.revoke(home, now_s, keychain=kc, serial=info.serial_hex)
        assert _refused(port, creds) == grpc.StatusCode.UNAUTHENTICATED
    assert seen.principals == [info]


def test_mtls_refuses_a_client_without_a_cert(tls_home: tuple[Path, MemoryKeychain, int]) -> None:
    """A client that trusts the CA but presents no certificate fails the handshake (UNAVAILABLE)."""
    home, kc, _ = tls_home
    ca_pem = (home / "tls" / "ca.crt").read_bytes()
    with _serve(home, kc) as (port, seen):
        assert _refused(port, grpc.ssl_channel_credentials(root_certificates=ca_pem)) == grpc.StatusCode.UNAVAILABLE
    assert seen.auth == []


def test_mtls_refuses_a_cert_of_another_ca(tls_home: tuple[Path, MemoryKeychain, int]) -> None:
    """A client certificate from another CA, even for the same principal, fails the handshake."""
    home, kc, now_s = tls_home
    ca_pem = (home / "tls" / "ca.crt").read_bytes()
    other_ca = crypto.make_ca("mallory", now_s, entropy=crypto.SeededEntropy(12))
    key_pem, cert_pem, _ = crypto.issue_cert(*other_ca, "alice", now_s, entropy=crypto.SeededEntropy(13))
    creds = grpc.ssl_channel_credentials(root_certificates=ca_pem, private_key=key_pem, certificate_chain=cert_pem)
    with _serve(home, kc) as (port, seen):
        assert _refused(port, creds) == grpc.StatusCode.UNAVAILABLE
    assert seen.auth == []


def test_mtls_refuses_an_expired_client_cert(tls_home: tuple[Path, MemoryKeychain, int], tmp_path: Path) -> None:
    """TLS checks dates: a certificate of the right CA that has expired fails the handshake."""
    home, kc, now_s = tls_home
    ca_key, ca_pem = kc.get("tls/ca"), (home / "tls" / "ca.crt").read_bytes()
    key_pem, cert_pem, _ = crypto.issue_cert(ca_key, ca_pem, "alice", now_s - 3 * DAY, days=1)
    creds = grpc.ssl_channel_credentials(root_certificates=ca_pem, private_key=key_pem, certificate_chain=cert_pem)
    with _serve(home, kc) as (port, seen):
        assert _refused(port, creds) == grpc.StatusCode.UNAVAILABLE
    assert seen.auth == []


def test_mtls_client_refuses_a_server_of_another_ca(tls_home: tuple[Path, MemoryKeychain, int], tmp_path: Path) -> None:
    """The client checks the server too: a client that trusts another CA refuses this node's server."""
    home, kc, now_s = tls_home
    certs.issue_client(home, kc, "alice", tmp_path / "a", now_s)
    key_pem, cert_pem, _ = certs.load_client(*certs.client_paths(tmp_path / "a", "alice"))
    other_ca_pem = crypto.make_ca("elsewhere", now_s, entropy=crypto.SeededEntropy(14))[1]
    creds = grpc.ssl_channel_credentials(
        root_certificates=other_ca_pem, private_key=key_pem, certificate_chain=cert_pem
    )
    with _serve(home, kc) as (port, seen):
        assert _refused(port, creds) == grpc.StatusCode.UNAVAILABLE
    assert seen.auth == []
