"""The scale benchmark (bench/scale_bench.py) end to end at a tiny size: a real home, the daemon as a child process
(put, catch-up, search, hydrate, stop, cold start), the raw references; the result files hold every measure, sane."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from gaml.bench import scale_bench

N, GOALS, WARMUP, RECALL = 300, 8, 2, 4


def test_scale_bench_smoke(tmp_path: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="gs", dir="/tmp"))  # short: the home's socket path is limited
    try:
        rc = scale_bench.main(
            [
                *("--ns", str(N), "--seed", "3", "--out", str(tmp_path), "--name", "smoke", "--tmp", str(work)),
                *("--goals", str(GOALS), "--warmup", str(WARMUP), "--recall-goals", str(RECALL)),
            ]
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert rc == 0
    r = json.loads((tmp_path / "smoke.json").read_text())["runs"][str(N)]
    assert r["put"]["assets"] == N and r["put"]["per_s"] > 0
    for m in ("search", "search_dense", "hydrate"):
        assert 0 < r[m]["p50"] <= r[m]["p99"] and r[m]["n"] == (GOALS if m != "search_dense" else RECALL)
    assert r["search"]["empty"] < GOALS and r["hydrate"]["facts_mean"] > 0
    assert 0.0 <= r["raw"]["dense_recall_at_k"] <= 1.0 and 0.0 <= r["raw"]["raw_hnsw_recall_at_k"] <= 1.0
    assert r["cold_start_s"] > 0 and r["first_search_ms"] > 0 and r["disk"]["per_asset"] > 0
    log = r["daemon_log"]
    assert log["calls"] >= N // 1000 + WARMUP + GOALS and log["heap_settled"] >= 0
    md = (tmp_path / "smoke.md").read_text()
    for label in ("Search, hybrid governed", "Hydrate, 2,000 tokens", "cold start", "whole-heap collections when idle"):
        assert label in md
    assert (tmp_path / "smoke.png").stat().st_size > 0
