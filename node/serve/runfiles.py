"""What a running daemon leaves in its home's ``run/`` directory, and how a client finds the daemon from it.

Light on purpose: the command line and the SDK look here for a daemon before every call, and importing the daemon's
own module (its server, replication over libp2p, ACME) took ~0.6 s of a command's start.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any, Final

RUN_DIR: Final = "run"
SOCKET_NAME: Final = "gaml.sock"
INFO_NAME: Final = "daemon.json"


def run_dir(home: Path) -> Path:
    return home / RUN_DIR


def info_path(home: Path) -> Path:
    return run_dir(home) / INFO_NAME


def replication_path(home: Path) -> Path:
    """What a running daemon reports of replication (``gaml peers``)."""
    return run_dir(home) / "replication.json"


def read_info(home: Path) -> dict[str, Any] | None:
    """What a running daemon wrote about itself (pid, socket, TCP address), or ``None``."""
    try:
        info: dict[str, Any] = json.loads(info_path(home).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def socket_listens(path: Path) -> bool:
    """Whether a process accepts connections on the Unix socket ``path`` (a refused or missing one: no)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def serves(info: dict[str, Any]) -> bool:
    """Whether the daemon that wrote ``info`` (:func:`read_info`) still runs and accepts connections on its socket. A
    daemon that was killed leaves its ``daemon.json`` and socket file behind: those do not count."""
    return pid_alive(int(info.get("pid", 0))) and socket_listens(Path(info["socket"]))


__all__ = [
    "INFO_NAME",
    "RUN_DIR",
    "SOCKET_NAME",
    "info_path",
    "pid_alive",
    "read_info",
    "replication_path",
    "run_dir",
    "serves",
    "socket_listens",
]
