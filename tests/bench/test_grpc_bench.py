"""The gRPC benchmark (bench/grpc_bench.py) end to end at a tiny size: a real home, the daemon as a child process,
both transports; the result files have every measure, and the measures are sane."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from gaml.bench import grpc_bench

N, PUTS, BATCHES, BATCH, CLIENTS, GOALS, WARMUP, FLOOR, BUDGET = 40, 8, 2, 5, 2, 6, 2, 10, 600


def sane(m: dict[str, Any], calls: int, items_per_call: int) -> None:
    assert m["calls"] == calls and len(m["lat_ms"]) == calls
    assert m["items"] == calls * items_per_call
    assert m["wall_s"] > 0 and m["per_s"] > 0 and math.isfinite(m["per_s"])
    assert 0 < m["ms"]["p50"] <= m["ms"]["p99"]
    # lat_ms is recorded to 4 decimals (the summaries come from the unrounded values): each recorded value may be off
    # by half of the last decimal.
    half = 0.5e-4 + 1e-9
    assert m["ms"]["p99"] <= max(m["lat_ms"]) + half
    if "clients" not in m:  # sequential calls: the wall time covers every call
        assert m["wall_s"] * 1000 >= sum(m["lat_ms"]) - half * len(m["lat_ms"])


def test_grpc_bench_smoke(tmp_path: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="gt", dir="/tmp"))  # short: the home's socket path is limited
    try:
        rc = grpc_bench.main(
            [
                *("--n", str(N), "--seed", "3", "--out", str(tmp_path), "--transport", "both"),
                *("--puts", str(PUTS), "--batches", str(BATCHES), "--batch-size", str(BATCH)),
                *("--clients", str(CLIENTS), "--goals", str(GOALS), "--warmup", str(WARMUP)),
                *("--floor-calls", str(FLOOR), "--budget", str(BUDGET), "--fill-batch", "16", "--tmp", str(work)),
            ]
        )
        assert rc == 0
        assert list(work.iterdir()) == [], "the temporary home is removed"
    finally:
        shutil.rmtree(work, ignore_errors=True)

    R = json.loads((tmp_path / "grpc.json").read_text())
    md = (tmp_path / "grpc.md").read_text()
    keys = {"transports", "data", "fill", "in_process", "grpc", "ratios", "overhead_ms", "server_ms", "daemon"}
    assert keys | {"codec", "machine", "args", "code"} <= set(R)
    assert R["transports"] == ["unix", "mtls"]
    assert R["data"]["n"] == N and R["data"]["embedder"].startswith("hash")
    assert R["fill"]["s_per_1000"] > 0 and R["fill"]["checkpoint_s"] >= 0

    ip = R["in_process"]
    sane(ip["hydrate"], GOALS, 1)
    sane(ip["put_single"], PUTS, 1)
    sane(ip["put_batch"], BATCHES, BATCH)
    for t in ("unix", "mtls"):
        g = R["grpc"][t]
        sane(g["floor"], FLOOR, 1)
        sane(g["hydrate"], GOALS, 1)
        sane(g["put_single"], PUTS, 1)
        sane(g["put_batch"], BATCHES, BATCH)
        sane(g["put_concurrent"], PUTS // CLIENTS * CLIENTS, 1)
        assert g["put_concurrent"]["clients"] == CLIENTS
        # every hydration over gRPC did the work the in-process one did: a frame within the budget, on a path
        for frames in (g["hydrate"]["frames"], ip["hydrate"]["frames"]):
            assert 0 < frames["tokens_mean"] <= BUDGET
            assert sum(frames["paths"].values()) == GOALS
        ratios = R["ratios"][t]
        assert set(ratios) == {
            "hydrate_p50",
            "hydrate_p99",
            "put_single_per_s",
            "put_batch_per_s",
            "put_concurrent_per_s",
        }
        assert all(v > 0 and math.isfinite(v) for v in ratios.values())
        assert set(R["overhead_ms"][t]) == {"hydrate", "put_single", "put_batch"}
        # the daemon's log lines are attributed to the measures, every call ok
        for label, calls in (
            ("hydrate", GOALS),
            ("put_single", PUTS),
            ("put_batch", BATCHES),
            ("put_concurrent", PUTS // CLIENTS * CLIENTS),
        ):
            s = R["server_ms"][f"{t}/{label}"]
            assert s["calls"] == s["expected"] == calls
            assert s["outcomes"] == {"ok": calls}
            assert 0 < s["ms"]["p50"] <= s["ms"]["p99"]

    d = R["daemon"]
    assert d["status"]["assets"] == N and d["status"]["principal"] == "alice"
    per_transport = WARMUP + GOALS + PUTS + BATCHES + PUTS // CLIENTS * CLIENTS
    assert d["calls"] == 1 + 2 * per_transport  # + the Status call
    assert d["core_busy_s"] > 0
    C = R["codec"]
    assert C["hydrate_samples"] == GOALS and C["put_drafts"] == BATCHES * BATCH
    assert C["put_client_encode_us_per_draft"] > 0 and C["hydrate_response_bytes"] > 0
    assert "| measure | in-process | unix | mtls | unix / in-process | mtls / in-process |" in md
    assert "Hydrate p50 (ms)" in md and "hash-v1" in md


def test_grpc_bench_refuses_bad_arguments() -> None:
    with pytest.raises(SystemExit):
        grpc_bench.parse_args(["--puts", "2", "--clients", "4"])
    with pytest.raises(SystemExit):
        grpc_bench.parse_args(["--n", "5"])
