"""The daemon's Prometheus endpoint (`gaml run --metrics`): two paired devices' real daemons in child processes, real
libp2p on 127.0.0.1; the endpoint is read over HTTP as `curl` would, and parsed with prometheus-client's own parser.

Every wait polls with a deadline (tests.node.p2p_util.Fleet.wait); nothing asserts a duration.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gaml.node.serve.runfiles import read_info
from gaml.policy.errors import NotFound
from tests.node.p2p_util import Fleet, Peer, _env, get_or_none

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.status == 200
        text = r.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def metrics_url(peer: Peer) -> str:
    info = read_info(peer.home)
    assert info and info.get("metrics"), info
    url = str(info["metrics"])
    assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics"), url
    return url


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    with Fleet() as f:
        yield f


def test_metrics_show_calls_frames_index_store_and_replication_and_move_under_load(fleet: Fleet) -> None:
    a, b = fleet.peer("a"), fleet.peer("b")
    invitation = fleet.base / "pair.json"
    a.gaml_json("pair", b.node_id, "--owner", "alice", "--out", str(invitation))
    b.gaml_json("pair", "--join", str(invitation))
    metrics = ["--metrics", "127.0.0.1:0"]
    da = fleet.start(a, principal="alice", extra=metrics)
    fleet.up(da)
    db = fleet.start(b, principal="alice", dial=[da.address], extra=metrics)
    fleet.up(db)
    url = metrics_url(a)

    def boundary_open(s: Samples) -> bool:
        return value(s, "gaml_replication_peers", boundary="alice-devices") == 1

    before = fleet.wait("A's metrics to show B on alice-devices", lambda: scrape(url), boundary_open)
    assert value(before, "gaml_build_info", version=str(read_info(a.home)["version"])) == 1  # type: ignore[index]
    assert value(before, "gaml_replication_peers_connected") == 1
    for name in ("gaml_store_assets", "gaml_journal_seq", "gaml_uptime_seconds", "gaml_store_partitions"):
        assert (name, ()) in before, name
    assert value(before, "gaml_index_vectors", state="pending") >= 0
    assert value(before, "gaml_store_bytes", part="db") > 0
    assert ("gaml_replication_backlog_objects", (("boundary", "alice-devices"), ("direction", "unacked"))) in before
    assert ("gaml_consensus_disputed_slots", (("boundary", "alice-devices"),)) in before

    # A load: puts, searches and frames through A's socket; one refused call.
    n = 20
    with da.client() as ca, db.client() as cb:
        ids = []
        for i in range(n):
            ids += ca.put(
                [
                    {
                        "asset_type": "fact",
                        "payload": {"text": f"alice's note {i}: the build server is ci-{i}.example"},
                        "owner_id": "alice",
                        "privacy_scope": "user_private",
                        "replication_policy": "trusted_devices",
                    }
                ]
            )
            ca.search(f"build server {i}", k=5)
        for i in range(5):
            ca.hydrate(f"which build server {i}", budget=300)
        with pytest.raises(NotFound):
            ca.get("0" * 32)
        fleet.wait("B to hold A's notes", lambda: [get_or_none(cb, i) for i in ids], lambda got: all(got))

    after = fleet.wait(
        "A's metrics to count the load",
        lambda: scrape(url),
        lambda s: value(s, "gaml_rpc_calls_total", method="Put", outcome="ok") >= n,
    )
    assert value(after, "gaml_rpc_calls_total", method="Search", outcome="ok") >= n
    assert value(after, "gaml_rpc_calls_total", method="Hydrate", outcome="ok") >= 5
    assert value(after, "gaml_rpc_calls_total", method="Get", outcome="NotFound") >= 1
    assert value(after, "gaml_rpc_duration_seconds_count", method="Put") >= n
    assert value(after, "gaml_rpc_duration_seconds_bucket", method="Put", le="+Inf") >= n
    assert value(after, "gaml_hydrate_budget_use_ratio_count") >= 5
    assert 0 < value(after, "gaml_hydrate_tokens_total") <= 5 * 300
    assert value(after, "gaml_store_assets") >= value(before, "gaml_store_assets") + n
    assert value(after, "gaml_journal_seq") > value(before, "gaml_journal_seq")
    assert value(after, "gaml_replication_objects", boundary="alice-devices") >= n
    assert value(after, "gaml_uptime_seconds") > value(before, "gaml_uptime_seconds")
    # B's metrics count what it received, though nothing was called on it but reads.
    got = scrape(metrics_url(b))
    assert value(got, "gaml_replication_objects", boundary="alice-devices") >= n
    assert value(got, "gaml_store_assets") >= n
    for d in (db, da):
        d.stop()


def test_metrics_are_off_unless_asked_and_a_bad_address_is_refused(fleet: Fleet) -> None:
    a = fleet.peer("a")
    d = fleet.start(a, principal="alice")
    fleet.up(d)
    info = read_info(a.home)
    assert info is not None and info["metrics"] is None
    d.stop()
    cmd = [sys.executable, "-m", "gaml.node.cli", "--home", str(a.home), "run", "--metrics", "localhost"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=120)
    assert r.returncode == 2 and "--metrics 'localhost' is not HOST:PORT" in r.stderr, (r.returncode, r.stderr)
