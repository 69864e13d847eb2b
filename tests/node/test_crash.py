"""Crash safety with real processes, RocksDB and hnswlib: SIGKILL in the middle of a stream of puts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gaml.node.core.embed import HashEmbedder
from gaml.node.home import init_home, open_node
from gaml.node.shells.file_keychain import Unlock

KEY = "11" * 32
WRITER = Path(__file__).with_name("crash_writer.py")
ROOT = Path(__file__).resolve().parents[2]


def run_and_kill(home: Path, acks_before_kill: int, start: int, *mode: str) -> list[str]:
    """Start the writer, read acknowledgements, SIGKILL it after ``acks_before_kill`` lines; return what the lines
    acknowledged (ids; ``visited`` lines as ``visited:ID``)."""
    env = {**os.environ, "GAML_KEYCHAIN_KEY": KEY, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(home), "100000", str(start), *mode],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    for _ in range(acks_before_kill):
        line = proc.stdout.readline()
        assert line, "the writer stopped early"
        lines.append(line)
    proc.send_signal(signal.SIGKILL)  # it is busy writing the next batches now
    lines += proc.stdout.read().splitlines()  # acknowledgements printed before the kill landed are acknowledged too
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    acked: list[str] = []
    for line in lines:
        words = line.split()
        acked += [f"visited:{w}" for w in words[1:]] if words[:1] == ["visited"] else words
    return acked


@pytest.mark.parametrize("kills", [(57, 133)])
def test_every_acknowledged_put_survives_sigkill(tmp_path: Path, kills: tuple[int, ...]) -> None:
    """After SIGKILLs mid-stream, every acknowledged put is present, verifies, decrypts and is found by search."""
    home = tmp_path / "home"
    init_home(home, Unlock(key=bytes.fromhex(KEY)), embedder="hash")
    acked: list[str] = []
    for run, n in enumerate(kills):
        acked += run_and_kill(home, n, start=run * 1_000_000)
    assert len(set(acked)) == len(acked)
    node = open_node(home, Unlock(key=bytes.fromhex(KEY)), embedder=HashEmbedder())
    try:
        assert len(acked) >= 3 * sum(kills)
        for id_ in acked:
            asset = node.store.get(id_)  # present and decrypts
            node.store.verify(asset)  # signature still verifies
        for id_ in acked[::7]:
            text = node.store.get(id_).payload["text"]
            hits = node.search(text, "alice", 2_000_000_000_000_000, k=1)
            assert hits and hits[0].asset.id == id_, text
        assert node.store.stats().assets >= len(acked)
    finally:
        node.close()


def test_every_acknowledged_visit_survives_sigkill(tmp_path: Path) -> None:
    """A frame's visit commits its heat without an fsync (local state): a process killed right after still leaves
    every acknowledged visit's heat in the store (the write reached the operating system before the commit
    returned), and every acknowledged put with it."""
    home = tmp_path / "home"
    init_home(home, Unlock(key=bytes.fromhex(KEY)), embedder="hash")
    acked = run_and_kill(home, 91, 0, "visit")
    visited = [a.removeprefix("visited:") for a in acked if a.startswith("visited:")]
    put = [a for a in acked if not a.startswith("visited:")]
    assert len(visited) >= 3 * 45 and set(visited) <= set(put)
    node = open_node(home, Unlock(key=bytes.fromhex(KEY)), embedder=HashEmbedder())
    try:
        for n, id_ in enumerate(visited):
            a = node.store.get(id_)
            assert a.heat.visits == n // 3 + 1 and a.tier.value == "hot", (id_, a.heat)
            assert node.store.heat(id_) == a.heat  # the views hold what the record holds
        for id_ in put:
            node.store.verify(node.store.get(id_))
    finally:
        node.close()
