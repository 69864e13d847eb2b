"""Certificates of a node home for the daemon's mutual TLS: a shell over ``policy.crypto``'s certificate functions.

::

    HOME/tls/
      ca.crt        the node CA certificate (public)
      server.crt    the daemon's server certificate (public)
      server.json   {"key_ref", "serial", "hosts"}: the keychain reference of the server key
      revoked.json  {"serials": [...], "principals": [], "sealed", "updated_s"}: client certificates the daemon
                    refuses; the revoked principals' names are sealed (``sealed``), never in the clear
      issued.json   {"format", "sealed"}: every client certificate issued, [{"principal", "serial", "not_after"}],
                    sealed (no keys)

The CA key lives in the node keychain under ``tls/ca``, and each server key under ``tls/server/<serial>`` (a new
reference per key: keychains never overwrite). A client key is handed to the client, written once (mode 0600) into the
directory it names, and never kept by the node. Every file is written atomically (``node.files.write_atomic``).
The home holds no principal's name in the clear: the lists that name principals are sealed under a subkey of the CA
key, so listing and revoking need the keychain too.

TLS checks a client certificate's chain and dates; revocation is the daemon's job, per call, through
:class:`Revocations` (gRPC's Python API takes no CRL).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from gaml.node.shells.files import SEALED_FORMAT, open_json, seal_json, write_atomic
from gaml.policy import crypto
from gaml.policy.crypto import CertInfo
from gaml.policy.errors import BadSignature, InvalidInput, KeychainError, NotFound, StoreCorrupt
from gaml.policy.keychain import Keychain

TLS_DIR: Final = "tls"
CA_KEY_REF: Final = "tls/ca"
TLS_NAMES_KEY_TAG: Final = b"gaml_tls_names_key_v1"
TLS_DOMAIN: Final = b"gaml-tls"  # what sealed tls/ files are bound to (with their name)
SERVER_KEY_REF_PREFIX: Final = "tls/server/"
SERVER_PRINCIPAL: Final = "gaml-node"  # CN of the daemon's server certificate
DEFAULT_HOSTS: Final = ("127.0.0.1", "::1", "localhost")
CA_DAYS: Final = 3650
SERVER_DAYS: Final = 365
CLIENT_DAYS: Final = 365

# The commands the error messages point to (the CLI's names for these functions).
INIT_HINT: Final = "run `gaml certs init`"
RENEW_HINT: Final = "run `gaml certs renew-server`"

_PUBLIC: Final = 0o644
_PRIVATE: Final = 0o600


def tls_dir(home: Path) -> Path:
    return home / TLS_DIR


def has_tls(home: Path) -> bool:
    """Whether the home has a CA and a server certificate (the daemon may then listen on TCP)."""
    d = tls_dir(home)
    return all((d / name).is_file() for name in ("ca.crt", "server.crt", "server.json"))


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        return default
    except ValueError as e:
        raise StoreCorrupt(f"{path} is not valid JSON ({e}); restore it from a copy or investigate") from e


def _write_json(path: Path, doc: Any, mode: int) -> None:
    write_atomic(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode(), mode=mode)


def _names_key(keychain: Keychain) -> bytes:
    """The key that seals principal names under ``tls/``: a subkey of the node CA's key (so whoever may issue and
    revoke certificates may read the lists, and no new secret is needed)."""
    return crypto.derive_key(_ca_key(keychain), TLS_NAMES_KEY_TAG)


def _read_issued(path: Path, keychain: Keychain) -> list[Any]:
    doc = _read_json(path, [])
    if isinstance(doc, dict) and doc.get("format") == SEALED_FORMAT:
        doc = open_json(_names_key(keychain), doc.get("sealed"), TLS_DOMAIN, path)
    if not isinstance(doc, list):  # a list in the clear is the format before names were sealed: still read
        raise StoreCorrupt(f"{path} is not a list of issued certificates; restore it from a copy")
    return doc


def _read_ca(home: Path) -> bytes:
    path = tls_dir(home) / "ca.crt"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise NotFound(f"{home} has no node CA ({path} is missing); {INIT_HINT}") from None


def _ca_key(keychain: Keychain) -> bytes:
    try:
        return keychain.get(CA_KEY_REF)
    except KeychainError as e:
        raise KeychainError(f"the keychain has no node CA key ({CA_KEY_REF!r}): {e}") from e


def _normalize_serial(serial: str) -> str:
    """A serial as ``CertInfo.serial_hex`` spells it: lowercase hex, no leading zeros (accepts ``0x`` and colons)."""
    text = serial.strip().lower().replace(":", "") if isinstance(serial, str) else ""
    text = text.removeprefix("0x")
    try:
        value = int(text, 16)
    except ValueError:
        raise InvalidInput(f"a certificate serial is a hexadecimal number, got {serial!r}") from None
    if value <= 0:
        raise InvalidInput(f"a certificate serial is positive, got {serial!r}")
    return f"{value:x}"


def _file_name(principal: str) -> str:
    """``principal`` as the stem of the client's file names (``<principal>.key``, ``<principal>.crt``)."""
    crypto.check_principal_id(principal)
    if "/" in principal or "\\" in principal or principal.startswith("."):
        raise InvalidInput(
            f"principal {principal!r} cannot name files: it may not contain '/' or '\\' nor start with '.'"
        )
    return principal


# -- the node CA and the server certificate ------------------------------------------------------------------------


def init_ca(
    home: Path,
    keychain: Keychain,
    now_s: int,
    *,
    hosts: Sequence[str] = DEFAULT_HOSTS,
    name: str | None = None,
    entropy: crypto.Entropy | None = None,
) -> CertInfo:
    """Make the node CA (key in the keychain, ``ca.crt``) and a first server certificate; return the CA's info.

    Refuses (:class:`InvalidInput`) if the home already has a CA. If an earlier ``init`` stored the CA key but
    stopped before writing ``ca.crt``, the stored key is certified again rather than replaced. ``name`` ends the CA's
    common name (``GAML node CA <name>``); by default it is 8 random hex digits, so that the CAs of two nodes differ.
    """
    ca_path = tls_dir(home) / "ca.crt"
    if ca_path.exists():
        raise InvalidInput(
            f"{home} already has a CA ({ca_path}); refusing to replace it. To change the server's hosts or key, "
            f"{RENEW_HINT}"
        )
    entropy = entropy or crypto.SystemEntropy()
    if name is None:
        name = entropy.random_bytes(4).hex()
    key_pem = keychain.get(CA_KEY_REF) if CA_KEY_REF in keychain.refs() else None
    new_key_pem, ca_pem = crypto.make_ca(name, now_s, CA_DAYS, entropy=entropy, key_pem=key_pem)
    server = crypto.issue_cert(
        new_key_pem, ca_pem, SERVER_PRINCIPAL, now_s, server=True, hosts=hosts, days=SERVER_DAYS, entropy=entropy
    )  # made before anything is stored, so that bad hosts leave the home as it was
    tls_dir(home).mkdir(mode=0o700, parents=True, exist_ok=True)
    if key_pem is None:
        keychain.put(CA_KEY_REF, new_key_pem)  # the key is durable before any certificate names it
    write_atomic(ca_path, ca_pem, mode=_PUBLIC)
    _install_server(home, keychain, *server, hosts)
    return crypto.cert_info(ca_pem)


def _install_server(
    home: Path, keychain: Keychain, key_pem: bytes, cert_pem: bytes, serial: str, hosts: Sequence[str]
) -> None:
    key_ref = SERVER_KEY_REF_PREFIX + serial
    keychain.put(key_ref, key_pem)
    d = tls_dir(home)
    write_atomic(d / "server.crt", cert_pem, mode=_PUBLIC)
    # server.json is written last: until then the old reference and the new certificate disagree, which
    # server_material detects (serials differ) rather than serving a key that does not match its certificate.
    _write_json(d / "server.json", {"key_ref": key_ref, "serial": serial, "hosts": list(hosts)}, _PUBLIC)


def renew_server(
    home: Path,
    keychain: Keychain,
    now_s: int,
    *,
    hosts: Sequence[str] = DEFAULT_HOSTS,
    days: int = SERVER_DAYS,
    entropy: crypto.Entropy | None = None,
) -> CertInfo:
    """A new server key (in the keychain) and certificate for ``hosts``, replacing the current ones; return its info.

    The daemon reads them when it starts (:func:`server_material`), so restart it afterwards.
    """
    ca_pem = _read_ca(home)
    key_pem, cert_pem, serial = crypto.issue_cert(
        _ca_key(keychain), ca_pem, SERVER_PRINCIPAL, now_s, server=True, hosts=hosts, days=days, entropy=entropy
    )
    _install_server(home, keychain, key_pem, cert_pem, serial, hosts)
    return crypto.cert_info(cert_pem)


def server_material(home: Path, keychain: Keychain, *, now_s: int | None = None) -> tuple[bytes, bytes, bytes]:
    """``(server_key_pem, server_cert_pem, ca_cert_pem)`` for ``grpc.ssl_server_credentials``.

    :class:`NotFound` if the home has no certificates, :class:`StoreCorrupt` if they do not fit together, and,
    when ``now_s`` is given, :class:`InvalidInput` if the server certificate is not valid at that time.
    """
    ca_pem = _read_ca(home)
    d = tls_dir(home)
    try:
        cert_pem = (d / "server.crt").read_bytes()
    except FileNotFoundError:
        raise NotFound(f"{home} has a CA but no server certificate; {RENEW_HINT}") from None
    doc = _read_json(d / "server.json", None)
    if doc is None:
        raise NotFound(f"{home} has no {d / 'server.json'}; {RENEW_HINT}")
    if not isinstance(doc, dict) or not isinstance(doc.get("key_ref"), str) or not isinstance(doc.get("serial"), str):
        raise StoreCorrupt(f"{d / 'server.json'} lacks key_ref or serial; {RENEW_HINT}")
    info = crypto.cert_info(cert_pem)
    if info.serial_hex != doc["serial"]:
        raise StoreCorrupt(
            f"server.crt (serial {info.serial_hex}) is not the certificate server.json names "
            f"(serial {doc['serial']}), as after an interrupted renewal; {RENEW_HINT}"
        )
    try:
        crypto.verify_issued(ca_pem, cert_pem)
    except BadSignature as e:
        raise StoreCorrupt(f"{d / 'server.crt'} was not issued by {d / 'ca.crt'}; {RENEW_HINT}") from e
    key_pem = keychain.get(doc["key_ref"])
    crypto.check_key_pair(key_pem, cert_pem)
    if now_s is not None and not info.not_before_s <= now_s < info.not_after_s:
        raise InvalidInput(
            f"the server certificate is valid from {info.not_before_s} to {info.not_after_s} (Unix time), "
            f"not at {now_s}; {RENEW_HINT}"
        )
    return key_pem, cert_pem, ca_pem


# -- client certificates -------------------------------------------------------------------------------------------


def client_paths(cert_dir: Path, principal: str) -> tuple[Path, Path, Path]:
    """Where :func:`issue_client` puts a principal's files: ``(key_path, cert_path, ca_path)``."""
    stem = _file_name(principal)
    return cert_dir / f"{stem}.key", cert_dir / f"{stem}.crt", cert_dir / "ca.crt"


def issue_client(
    home: Path,
    keychain: Keychain,
    principal: str,
    out_dir: Path,
    now_s: int,
    *,
    days: int = CLIENT_DAYS,
    entropy: crypto.Entropy | None = None,
) -> CertInfo:
    """Issue a client certificate for ``principal`` into ``out_dir``; return its info.

    Writes ``<principal>.key`` (0600), ``<principal>.crt`` and ``ca.crt``; the node keeps no copy of the key.
    Refuses (:class:`InvalidInput`) to overwrite a key or certificate, or a ``ca.crt`` of another CA. The certificate
    is recorded in ``issued.json`` before its files are written, so that every certificate that may exist can be
    found and revoked.
    """
    key_path, cert_path, ca_path = client_paths(out_dir, principal)
    ca_pem = _read_ca(home)
    for path in (key_path, cert_path):
        if path.exists():
            raise InvalidInput(f"{path} already exists; refusing to overwrite it (move it away, or choose another dir)")
    if ca_path.exists() and ca_path.read_bytes() != ca_pem:
        raise InvalidInput(f"{ca_path} is the certificate of another CA; choose another directory for this node's")
    key_pem, cert_pem, serial = crypto.issue_cert(
        _ca_key(keychain), ca_pem, principal, now_s, days=days, entropy=entropy
    )
    info = crypto.cert_info(cert_pem)
    issued_path = tls_dir(home) / "issued.json"
    issued = _read_issued(issued_path, keychain)
    issued.append({"principal": principal, "serial": serial, "not_after": info.not_after_s})
    sealed = seal_json(_names_key(keychain), issued, TLS_DOMAIN, issued_path)
    _write_json(issued_path, {"format": SEALED_FORMAT, "sealed": sealed}, _PRIVATE)
    out_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(key_path, key_pem, mode=_PRIVATE)
    write_atomic(cert_path, cert_pem, mode=_PUBLIC)
    if not ca_path.exists():
        write_atomic(ca_path, ca_pem, mode=_PUBLIC)
    return info


def seal_clear_lists(home: Path, keychain: Keychain) -> int:
    """Seal the names of lists written in the clear before names were sealed (a home from an older GAML): how many
    files were rewritten. Nothing to do without a CA."""
    tls = tls_dir(home)
    if not (tls / "ca.crt").exists():
        return 0
    done = 0
    issued_path = tls / "issued.json"
    if isinstance(_read_json(issued_path, None), list):
        issued = _read_issued(issued_path, keychain)
        sealed = seal_json(_names_key(keychain), issued, TLS_DOMAIN, issued_path)
        _write_json(issued_path, {"format": SEALED_FORMAT, "sealed": sealed}, _PRIVATE)
        done += 1
    revoked_path = tls / "revoked.json"
    doc = _read_json(revoked_path, {})
    if isinstance(doc, dict) and doc.get("principals"):
        serials, principals = _revoked_sets(doc, revoked_path, keychain)
        sealed = seal_json(_names_key(keychain), sorted(principals), TLS_DOMAIN, revoked_path)
        _write_json(revoked_path, {**doc, "serials": sorted(serials), "principals": [], "sealed": sealed}, _PUBLIC)
        done += 1
    return done


def list_issued(home: Path, keychain: Keychain) -> list[dict[str, Any]]:
    """The client certificates issued so far: ``[{"principal", "serial", "not_after"}]``, oldest first."""
    return _read_issued(tls_dir(home) / "issued.json", keychain)


def load_client(key_path: Path, cert_path: Path, ca_path: Path) -> tuple[bytes, bytes, bytes]:
    """``(key_pem, cert_pem, ca_cert_pem)`` of a client, for ``grpc.ssl_channel_credentials``, checked to fit.

    :class:`NotFound` for a missing file, :class:`InvalidInput` for an unreadable or malformed one, or a key that
    does not belong to the certificate. The messages name files, never their contents.
    """
    out: list[bytes] = []
    for what, path in (("client key", key_path), ("client certificate", cert_path), ("CA certificate", ca_path)):
        try:
            out.append(Path(path).read_bytes())
        except FileNotFoundError:
            raise NotFound(
                f"the {what} {path} does not exist; ask the node's owner for a client certificate "
                "(`gaml certs issue <principal> --out DIR`)"
            ) from None
        except OSError as e:
            raise InvalidInput(f"cannot read the {what} {path}: {e.strerror or e}") from None
    key_pem, cert_pem, ca_pem = out
    for what, path, pem in (("client certificate", cert_path, cert_pem), ("CA certificate", ca_path, ca_pem)):
        try:
            crypto.cert_info(pem)
        except InvalidInput:
            raise InvalidInput(f"the {what} {path} is not a PEM certificate") from None
    try:
        crypto.check_key_pair(key_pem, cert_pem)
    except InvalidInput as e:
        raise InvalidInput(f"{key_path} and {cert_path}: {e}") from None
    return key_pem, cert_pem, ca_pem


# -- revocation ----------------------------------------------------------------------------------------------------


def _revoked_sets(doc: Any, path: Path, keychain: Keychain) -> tuple[frozenset[str], frozenset[str]]:
    if not isinstance(doc, dict):
        raise StoreCorrupt(f"{path} is not a revocation list; restore it from a copy")
    serials, principals = doc.get("serials", []), doc.get("principals", [])  # principals: before names were sealed
    if "sealed" in doc:
        sealed = open_json(_names_key(keychain), doc["sealed"], TLS_DOMAIN, path)
        if not isinstance(principals, list) or not isinstance(sealed, list):
            raise StoreCorrupt(f"{path} holds principals that are not a list of strings; restore it from a copy")
        principals = principals + sealed
    if not (isinstance(serials, list) and isinstance(principals, list)) or not all(
        isinstance(x, str) for x in serials + principals
    ):
        raise StoreCorrupt(f"{path} holds serials or principals that are not lists of strings; restore it from a copy")
    try:
        return frozenset(_normalize_serial(x) for x in serials), frozenset(principals)
    except InvalidInput as e:
        raise StoreCorrupt(f"{path}: {e}; restore it from a copy") from None


def revoke(
    home: Path, now_s: int, *, keychain: Keychain, serial: str | None = None, principal: str | None = None
) -> dict[str, Any]:
    """Revoke one client certificate (by ``serial``) or all of a principal's (by ``principal``); return the list.

    Give exactly one. Revoking twice is harmless. A running daemon sees the change on its next call. The file keeps
    the serials in the clear and the principals' names sealed (the list returned names them).
    """
    if (serial is None) == (principal is None):
        raise InvalidInput("revoke a certificate serial or a principal, exactly one of them")
    _read_ca(home)
    path = tls_dir(home) / "revoked.json"
    doc = _read_json(path, {})
    serials, principals = _revoked_sets(doc, path, keychain)
    if serial is not None:
        serials |= {_normalize_serial(serial)}
    else:
        principals |= {crypto.check_principal_id(principal)}
    new = {"serials": sorted(serials), "principals": sorted(principals), "updated_s": now_s}
    _write_json(
        path,
        {**new, "principals": [], "sealed": seal_json(_names_key(keychain), new["principals"], TLS_DOMAIN, path)},
        _PUBLIC,
    )
    return new


class Revocations:
    """The revoked client certificates of a home, re-read only when ``revoked.json`` changes. Thread-safe.

    A change is a new (inode, mtime, size): :func:`revoke` replaces the file by rename, so even two revocations
    within one mtime tick give a new inode. A missing file means nothing is revoked. A corrupt file fails closed:
    every check raises :class:`StoreCorrupt` until it is repaired.
    """

    def __init__(self, home: Path, keychain: Keychain) -> None:
        self.path = tls_dir(home) / "revoked.json"
        self._keychain = keychain  # its CA key's subkey opens the sealed names
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int, int] | None = None
        self._serials: frozenset[str] = frozenset()
        self._principals: frozenset[str] = frozenset()
        self._error: StoreCorrupt | None = None

    def _refresh(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._stamp, self._serials, self._principals, self._error = None, frozenset(), frozenset(), None
            return
        if (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size) == self._stamp:
            return
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())  # the stamp of the file actually read
                raw = f.read()
        except FileNotFoundError:
            self._stamp, self._serials, self._principals, self._error = None, frozenset(), frozenset(), None
            return
        self._stamp = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        try:
            doc = json.loads(raw)
        except ValueError as e:
            self._error = StoreCorrupt(f"{self.path} is not valid JSON ({e}); refusing every client until it is fixed")
            return
        try:
            self._serials, self._principals = _revoked_sets(doc, self.path, self._keychain)
        except StoreCorrupt as e:
            self._error = e
            return
        self._error = None

    def is_revoked(self, serial_hex: str, principal: str) -> bool:
        """Whether the certificate with this serial, or every certificate of this principal, is revoked."""
        with self._lock:
            self._refresh()
            if self._error is not None:
                raise StoreCorrupt(str(self._error))
            return _normalize_serial(serial_hex) in self._serials or principal in self._principals
