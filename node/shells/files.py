"""On-disk shells for the core's small file interfaces: ``FileBlobs`` (index snapshots), atomic file writes, and the
checks that keep a node's home private (no symlink written through, no directory others may enter)."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import re
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from gaml.policy import crypto
from gaml.policy.errors import DecryptionFailed, StoreCorrupt, UnsafeFile

if TYPE_CHECKING:
    from typing_extensions import Buffer

SEALED_FORMAT: Final = "gaml-sealed-1"

_NAME = re.compile(r"^[0-9A-Za-z_.-]+$")


def bytes_under(root: Path) -> int:
    """The size of the files under ``root`` (0 if it is gone); one that vanishes while it is counted (a daemon
    compacting, a snapshot replaced) counts nothing."""
    total = 0
    for p in root.rglob("*"):
        with contextlib.suppress(FileNotFoundError):
            if p.is_file():
                total += p.stat().st_size
    return total


def write_atomic(path: Path, data: bytes | Iterable[Buffer], mode: int = 0o600) -> None:
    """Write ``data`` (bytes, or parts written in turn) to ``path`` so that a crash leaves either the old file or the
    new one, never a torn one.

    The temporary file is new (``O_CREAT | O_EXCL | O_NOFOLLOW``, under a random name beside ``path``), so nothing is
    ever written through a symlink or into a file someone else prepared; ``os.replace`` then swaps the name (a symlink
    at ``path`` itself is replaced, not followed)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            for part in [data] if isinstance(data, bytes) else data:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            tmp.unlink()
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def seal_json(key: bytes, doc: Any, domain: bytes, path: Path) -> str:
    """``doc`` as JSON sealed under ``key`` (base64), bound to its file's name in ``domain``: a small file of the home
    that would otherwise hold names in the clear."""
    raw = json.dumps(doc, sort_keys=True).encode()
    return base64.b64encode(crypto.seal(key, raw, domain + b":" + path.name.encode(), crypto.SystemEntropy())).decode()


def open_json(key: bytes, sealed: Any, domain: bytes, path: Path) -> Any:
    """What :func:`seal_json` sealed; :class:`StoreCorrupt` when it does not open (another keychain, altered bytes)."""
    try:
        blob = base64.b64decode(sealed, validate=True)
        return json.loads(crypto.open_sealed(key, blob, domain + b":" + path.name.encode()))
    except (TypeError, ValueError, DecryptionFailed) as e:
        raise StoreCorrupt(f"{path} does not open with this keychain ({e}); restore it from a copy") from None


def write_sealed_json(path: Path, key: bytes, doc: Any, domain: bytes, mode: int = 0o600) -> None:
    """Write ``{"format": SEALED_FORMAT, "sealed": …}`` atomically (:func:`write_atomic`)."""
    sealed = seal_json(key, doc, domain, path)
    write_atomic(path, (json.dumps({"format": SEALED_FORMAT, "sealed": sealed}) + "\n").encode(), mode)


def read_sealed_json(path: Path, key: bytes, domain: bytes) -> Any:
    """What :func:`write_sealed_json` wrote (``FileNotFoundError`` when there is no such file)."""
    try:
        doc = json.loads(path.read_bytes())
    except ValueError as e:
        raise StoreCorrupt(f"{path} is not valid JSON ({e}); restore it from a copy or investigate") from e
    if not isinstance(doc, dict) or doc.get("format") != SEALED_FORMAT:
        raise StoreCorrupt(f"{path} is not a sealed GAML file")
    return open_json(key, doc.get("sealed"), domain, path)


def check_private_dir(path: Path, what: str, *, create: bool = False) -> None:
    """Raise :class:`UnsafeFile` (with the fix to apply) unless ``path`` is a real directory (not a symlink) owned by
    this process's user with no access for group or others. ``create``: make it (mode 0700) when it is missing."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            raise UnsafeFile(f"{what} {path} does not exist") from None
        os.mkdir(path, 0o700)
        st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeFile(
            f"{what} {path} is a symlink; GAML writes nothing through a symlink in its home: remove it "
            f"(rm {path}) and let GAML create the directory"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeFile(f"{what} {path} is not a directory; move it away")
    uid = os.getuid()
    if st.st_uid != uid:
        raise UnsafeFile(f"{what} {path} belongs to uid {st.st_uid}, not to you (uid {uid}): chown {uid} {path}")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise UnsafeFile(f"{what} {path} is open to others (mode {stat.S_IMODE(st.st_mode):04o}): chmod 700 {path}")


def check_no_symlink(path: Path, what: str) -> None:
    """Raise :class:`UnsafeFile` if ``path`` is a symlink (a missing path is fine)."""
    if path.is_symlink():
        raise UnsafeFile(f"{what} {path} is a symlink; GAML writes nothing through a symlink in its home: remove it")


class FileBlobs:
    def __init__(self, root: Path) -> None:
        self.root = root
        check_no_symlink(root, "the index directory")
        root.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _path(self, name: str) -> Path:
        if not _NAME.match(name):
            raise ValueError(f"bad blob name {name!r}")
        return self.root / name

    def read(self, name: str) -> bytes | None:
        try:
            return self._path(name).read_bytes()
        except FileNotFoundError:
            return None

    def open(self, name: str) -> io.BufferedIOBase | None:
        try:
            return self._path(name).open("rb")
        except FileNotFoundError:
            return None

    def write(self, name: str, data: bytes | Iterable[Buffer]) -> None:
        write_atomic(self._path(name), data)

    def remove(self, name: str) -> None:
        self._path(name).unlink(missing_ok=True)

    def names(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if not p.name.startswith("."))
