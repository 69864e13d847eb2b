"""The replication benchmark (bench/replication_bench.py) end to end at a tiny size: two real homes, two daemons as
child processes paired over libp2p through the benchmark's proxy; the result files have every measure, and every
asset arrived. No timing is asserted."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path

import pytest

from gaml.bench import replication_bench

N, CHANGES, EDITS, UNPOLLED, RTT = 50, 4, 2, 2, 20


@pytest.mark.slow  # tens of seconds: `make test-slow` (make test keeps under 15 minutes)
def test_replication_bench_smoke(tmp_path: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # short: the homes' socket paths are limited
    try:
        rc = replication_bench.main(
            [
                *("--n", str(N), "--seed", "5", "--out", str(tmp_path), "--tmp", str(work)),
                *("--changes", str(CHANGES), "--edits", str(EDITS), "--unpolled", str(UNPOLLED)),
                *("--rtt-rounds", str(RTT), "--poll-ms", "20"),
            ]
        )
        assert rc == 0
        assert list(work.iterdir()) == [], "the temporary homes are removed"
    finally:
        shutil.rmtree(work, ignore_errors=True)

    R = json.loads((tmp_path / "replication.json").read_text())
    md = (tmp_path / "replication.md").read_text()
    keys = {"data", "fill", "sync", "latency", "bytes", "ratios", "reference", "verify", "daemon_a", "daemon_b"}
    assert keys | {"loadavg_start", "loadavg_end", "machine", "args", "code"} <= set(R)
    assert len(R["loadavg_start"]) == len(R["loadavg_end"]) == 3
    D, F = R["data"], R["fill"]
    assert D["n"] == N and D["embedder"] == "hash"
    assert 200 <= D["text_chars_min"] <= D["text_chars_mean"] <= D["text_chars_max"] <= 400
    assert F["objects"] == N and F["object_bytes"] > N * F["object_bytes_min"] / 2 > 0

    # every asset arrived: the sync counted them, and after the run B held each with A's payload and the same objects
    S = R["sync"]
    assert S["n"] == N and S["b_status"]["assets"] == N
    assert S["connections"] == 1
    peer = S["b_status_repl"]["peer"]
    assert peer["objects_accepted"] == N and peer["objects_rejected"] == 0
    assert S["b_status_repl"]["counters"]["materialized"] == N
    assert S["b_connected_s"] > 0 and S["sync_s"] > 0 and S["per_s"] > 0
    assert 0 < S["last_send_s"] <= S["last_ack_s"] <= S["last_byte_s"]
    V = R["verify"]
    assert V["missing_on_b"] == 0 and V["differing_on_b"] == 0 and V["states_equal"]
    assert V["assets_on_b"] == N + CHANGES + UNPOLLED  # an edit adds no asset
    assert V["current_objects"] == {"alice-devices": N + CHANGES + UNPOLLED}
    assert R["errors_a"] == [] and R["errors_b"] == []

    # bytes: the objects crossed once; every layer adds to the one below it
    B = R["bytes"]
    assert B["ciphertext"] == F["object_bytes"]
    assert B["ciphertext"] < B["protocol_a_to_b"] <= B["wire_a_to_b"]
    assert B["ciphertext"] < B["protocol_frames"] <= B["transport_frames"] <= B["wire"]
    assert B["wire"] == B["wire_a_to_b"] + B["wire_b_to_a"]
    assert S["a_status"]["peer"]["objects_sent"] == N

    # latency: every change was timed, each unpolled one by B's Ack, and B acknowledged only what it had committed
    L = R["latency"]
    assert L["unreadable_at_ack"] == 0
    assert sorted(L["order"]) == sorted(["new"] * CHANGES + ["edit"] * EDITS + ["unpolled"] * UNPOLLED)
    for kind, count in (("new", CHANGES), ("edit", EDITS), ("unpolled", UNPOLLED)):
        x = L[kind]
        assert x["changes"] == len(x["trials"]) == count
        assert 0 < x["visible_ms"]["p50"] <= x["visible_ms"]["p99"]
        assert 0 <= x["split"] <= count
    assert L["unpolled"]["split"] == UNPOLLED  # each waited for its Ack
    assert all(t["polls"] == 0 for t in L["unpolled"]["trials"])
    assert L["server_ms"]["b_get"] and L["server_ms"]["a_put"]

    ref = R["reference"]
    assert ref["accept"]["accepted"] == N and ref["raw_tcp"]["bytes"] == B["ciphertext"] + 4 * N
    for k in ("tcp_rtt_ms", "proxy_tcp_rtt_ms", "p2p_rtt_ms"):
        assert ref[k]["p50"] > 0
    one = ref["single"]
    assert one["objects"] == CHANGES + EDITS + UNPOLLED and one["kinds_matched"]
    assert one["b_accept_new_ms"] and one["b_accept_edit_ms"] and one["a_put_pump_ms"]
    assert all(v > 0 and math.isfinite(v) for v in R["ratios"].values())
    assert {"sync_vs_accept", "sync_vs_local_put", "sync_vs_raw_tcp", "ack_vs_two_p2p_rtt"} == set(R["ratios"])
    assert f"N = {N}" in md and "| measure | value | reference (same run) | ratio |" in md
    assert "bytes on the wire / ciphertext bytes" in md


def test_replication_bench_refuses_bad_arguments() -> None:
    with pytest.raises(SystemExit):
        replication_bench.parse_args(["--n", "0"])
    with pytest.raises(SystemExit):
        replication_bench.parse_args(["--n", "10", "--edits", "11"])
    args = replication_bench.parse_args(["--quick"])
    assert (args.n, args.changes, args.edits, args.unpolled) == (500, 40, 20, 20)
    args = replication_bench.parse_args([])
    assert (args.n, args.changes, args.edits, args.unpolled) == (10_000, 200, 100, 100)
