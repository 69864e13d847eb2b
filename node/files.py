"""On-disk shells for the core's small file interfaces: ``FileBlobs`` (index snapshots) and atomic file writes."""

from __future__ import annotations

import os
import re
from pathlib import Path

_NAME = re.compile(r"^[0-9A-Za-z_.-]+$")


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` so that a crash leaves either the old file or the new one, never a torn one."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class FileBlobs:
    def __init__(self, root: Path) -> None:
        self.root = root
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

    def write(self, name: str, data: bytes) -> None:
        write_atomic(self._path(name), data)

    def remove(self, name: str) -> None:
        self._path(name).unlink(missing_ok=True)

    def names(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if not p.name.startswith("."))
