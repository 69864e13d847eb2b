"""The daemon's Prometheus endpoint (``gaml run --metrics HOST:PORT``; opt-in, 127.0.0.1 unless told otherwise).

Served by ``prometheus-client`` on a thread of its own, from a registry of this daemon's own (not the process-global
one). Every name is prefixed ``gaml_``:

- ``gaml_rpc_calls_total{method, outcome}`` and ``gaml_rpc_duration_seconds{method}`` (histogram): each call through
  any door of the daemon (gRPC on the socket or TCP; MCP and the proxy reach it as gRPC), ``outcome`` ``ok`` or the
  error class;
- ``gaml_hydrate_budget_use_ratio`` (histogram of tokens spent / budget per frame), ``gaml_hydrate_tokens_total``;
- ``gaml_store_assets``, ``gaml_store_partitions``, ``gaml_journal_seq``, ``gaml_index_vectors{state="indexed"|
  "pending"}`` (pending: the index lag), ``gaml_store_bytes{part="db"|"index"}`` (on disk);
- ``gaml_replication_peers_connected``, and per boundary (label ``boundary``: its name) ``gaml_replication_peers``
  (sessions where it is open), ``gaml_replication_backlog_objects{direction="unacked"|"awaited"}`` (objects offered and
  not acknowledged, needed and not received: the replication lag as this node sees it), ``gaml_replication_objects``,
  ``gaml_consensus_disputed_slots``;
- ``gaml_build_info{version}``, ``gaml_uptime_seconds``, ``gaml_scrape_core_timeouts_total``.

The gauges are read on the core thread at each scrape (cheap reads: no scan of the store); if the core is busy for
longer than :data:`CORE_WAIT_S`, that scrape has the counters only and ``gaml_scrape_core_timeouts_total`` grows.
What it tells whoever can reach it: call volumes, sizes and the names of this node's boundaries, no content; hence
loopback by default.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gaml.node.shells.files import bytes_under

CORE_WAIT_S: Final = 5.0
RPC_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
RATIO_BUCKETS: Final = (0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0)

Gauges = dict[str, Any]


class _Gauges(Collector):
    def __init__(self, metrics: Metrics) -> None:
        self.m = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.m
        info = GaugeMetricFamily("gaml_build_info", "the daemon's version", labels=["version"])
        info.add_metric([m.version], 1)
        yield info
        yield GaugeMetricFamily("gaml_uptime_seconds", "seconds since the daemon started", value=m.uptime())
        size = GaugeMetricFamily("gaml_store_bytes", "bytes on disk (sealed)", labels=["part"])
        for part in ("db", "index"):
            size.add_metric([part], bytes_under(m.home / part))
        yield size
        try:
            g = m.read_core().result(timeout=CORE_WAIT_S)
        except concurrent.futures.TimeoutError:
            m.core_timeouts.inc()
            return
        except Exception:  # the daemon is shutting down: counters only
            return
        s = g["store"]
        yield GaugeMetricFamily("gaml_store_assets", "live assets held", value=s["assets"])
        yield GaugeMetricFamily("gaml_store_partitions", "partitions open", value=s["partitions"])
        yield GaugeMetricFamily("gaml_journal_seq", "the journal's position", value=s["journal_seq"])
        vectors = GaugeMetricFamily("gaml_index_vectors", "vectors in the HNSW indexes, and waiting", labels=["state"])
        vectors.add_metric(["indexed"], s["indexed"])
        vectors.add_metric(["pending"], s["pending"])
        yield vectors
        rep = g.get("replication")
        if rep is None:
            return
        yield GaugeMetricFamily("gaml_replication_peers_connected", "libp2p peers with a session", value=rep["peers"])
        peers = GaugeMetricFamily("gaml_replication_peers", "peers the boundary is open with", labels=["boundary"])
        backlog = GaugeMetricFamily(
            "gaml_replication_backlog_objects",
            "objects offered and not acknowledged (unacked), needed and not received (awaited)",
            labels=["boundary", "direction"],
        )
        objects = GaugeMetricFamily("gaml_replication_objects", "objects held per boundary", labels=["boundary"])
        disputed = GaugeMetricFamily(
            "gaml_consensus_disputed_slots", "slots whose claims disagree, per boundary", labels=["boundary"]
        )
        for b in rep["boundaries"]:
            name = b["name"]
            peers.add_metric([name], b["peers"])
            backlog.add_metric([name, "unacked"], b["unacked"])
            backlog.add_metric([name, "awaited"], b["awaited"])
            objects.add_metric([name], b["objects"])
            disputed.add_metric([name], b["disputed"])
        yield from (peers, backlog, objects, disputed)


class Metrics:
    """The daemon's metrics. ``read_core()`` submits the gauges' read to the core thread (a future of
    ``{"store": …, "replication": … | None}``)."""

    def __init__(self, home: Path, version: str, read_core: Callable[[], concurrent.futures.Future[Gauges]]) -> None:
        self.home = home
        self.version = version
        self.read_core = read_core
        self.started = time.monotonic()
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.calls = Counter("gaml_rpc_calls", "calls by method and outcome", ["method", "outcome"], registry=r)
        self.seconds = Histogram(
            "gaml_rpc_duration_seconds", "call latency by method", ["method"], buckets=RPC_BUCKETS, registry=r
        )
        self.budget_use = Histogram(
            "gaml_hydrate_budget_use_ratio", "tokens spent / budget per frame", buckets=RATIO_BUCKETS, registry=r
        )
        self.tokens = Counter("gaml_hydrate_tokens", "tokens of the frames rendered", registry=r)
        self.core_timeouts = Counter(
            "gaml_scrape_core_timeouts", "scrapes that found the core busy (gauges left out)", registry=r
        )
        r.register(_Gauges(self))
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    def uptime(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def call(self, method: str, outcome: str, seconds: float) -> None:
        self.calls.labels(method, outcome).inc()
        self.seconds.labels(method).observe(seconds)

    def hydrated(self, spent: int, budget: int) -> None:
        self.tokens.inc(max(spent, 0))
        if budget > 0:
            self.budget_use.observe(spent / budget)

    def start(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on ``host:port`` (port 0: any); returns the port bound."""
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self.port = int(self._server.server_port)
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)


__all__ = ["Metrics"]
