"""The peer-read benchmark (bench/peer_read_bench.py) end to end at a tiny size: three real homes, three daemons as
child processes over libp2p; the result files have every measure. No timing is asserted."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from gaml.bench import peer_read_bench


@pytest.mark.slow
def test_peer_read_bench_smoke(tmp_path: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="pr", dir="/tmp"))  # short: the homes' socket paths are limited
    try:
        rc = peer_read_bench.main(
            ["--n", "40", "--goals", "4", "--rtt-rounds", "20", "--out", str(tmp_path), "--tmp", str(work)]
        )
        assert rc == 0
        assert list(work.iterdir()) == [], "the temporary homes are removed"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    R = json.loads((tmp_path / "peer_reads.json").read_text())
    for key in ("local_ms", "peers_ms", "answer_arrival_ms", "silent_peer_ms", "reference", "machine", "args"):
        assert R[key], key
    assert R["silent_reads"] == 1 and R["silent_c_timed_out"] == 1  # C stopped: declared timed out
    assert 0 <= R["all_answered_share"] <= 1
    assert "hydration asking B and C" in (tmp_path / "peer_reads.md").read_text()
