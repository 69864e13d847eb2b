"""Doors benchmark: what each front door a user or an agent touches costs, against the raw call beneath it, in one run.

::

    .venv/bin/python -m gaml.bench.doors_bench [--notes 200] [--calls 50] [--cli-calls 5] [--embedder minilm]
                                               [--out bench/results]

Setup (untimed): a fresh home (``--embedder``), ``--notes`` seeded notes remembered through the daemon, a fake
OpenAI-compatible upstream on 127.0.0.1 (it answers at once: what is measured is the proxy's own cost).

Measured, each ``--calls`` times (``--cli-calls`` for whole processes), medians and p99 in milliseconds:

- ``gaml search`` as a process **without a daemon** (it opens the store and loads the model each time) and **with a
  daemon** (a client of its socket), against the SDK's ``search`` over the socket in this process (the floor);
- the MCP ``recall`` tool over streamable HTTP (a client session kept open) against the SDK's ``search``;
- a chat completion **through** ``gaml proxy`` (hydrate, forward, remember the turn) against the same request sent
  **straight** to the upstream.

Results: a Markdown table on stdout and in ``OUT/doors.md``, the raw numbers in ``OUT/doors.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

PASS = "bench passphrase"
WORDS = [
    "alpha",
    "bravo",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "juniper",
    "kestrel",
    "lumen",
    "meadow",
    "nectar",
    "onyx",
]


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "GAML_HOME": str(home), "GAML_PASSPHRASE": PASS}
    env.pop("GAML_KEYCHAIN_KEY", None)
    env.pop("GAML_AS", None)
    return env


def gaml(home: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``gaml ARGV`` on ``home`` (``env``: the environment, by default one that unlocks with :data:`PASS`)."""
    r = subprocess.run(
        [sys.executable, "-m", "gaml.node.cli", *argv],
        capture_output=True,
        text=True,
        env=_env(home) if env is None else env,
        check=False,
    )
    if r.returncode != 0:
        raise RuntimeError(f"gaml {' '.join(argv)}: {r.stderr}")
    return r


@contextlib.contextmanager
def serving(
    home: Path, *argv: str, ready: str = "", env: dict[str, str] | None = None, stop_s: float = 60
) -> Iterator[dict[str, Any]]:
    """``gaml ARGV`` in the background; with ``ready``, once it logs that event (its log then drained, so a chatty
    daemon never blocks on a full pipe); else its first JSON line. Stopped with SIGTERM, waited for ``stop_s``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gaml.node.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(home) if env is None else env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    info: dict[str, Any] = {}
    if ready:
        for line in proc.stderr:
            with contextlib.suppress(ValueError):
                if json.loads(line).get("event") == ready:
                    break
        else:
            raise RuntimeError(f"gaml {' '.join(argv)} exited before serving")
        for pipe in (proc.stdout, proc.stderr):
            threading.Thread(target=pipe.read, daemon=True).start()
    else:
        info = json.loads(proc.stdout.readline())
    try:
        yield info
    finally:
        proc.terminate()
        proc.wait(stop_s)


class Upstream:
    """An OpenAI-compatible model that answers at once."""

    def __init__(self) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["content-length"]))
                message = {"role": "assistant", "content": "Noted."}
                out = json.dumps({"object": "chat.completion", "choices": [{"index": 0, "message": message}]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def summary(ms: list[float], digits: int = 2) -> dict[str, float]:
    xs = sorted(ms)
    return {
        "n": len(xs),
        "median_ms": round(statistics.median(xs), digits),
        "p99_ms": round(xs[min(len(xs) - 1, int(0.99 * len(xs)))], digits),
    }


def chat(base: str, key: str, text: str) -> None:
    req = urllib.request.Request(
        base + "/chat/completions",
        data=json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        r.read()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--notes", type=int, default=200)
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--cli-calls", type=int, default=5)
    p.add_argument("--embedder", choices=("minilm", "hash"), default="minilm")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(max(args.calls, args.cli_calls))]
    results: dict[str, Any] = {"setup": vars(args) | {"out": str(args.out)}}

    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from gaml.node import connect

    with tempfile.TemporaryDirectory(prefix="gaml-doors-") as tmp:
        home = Path(tmp) / "home"
        gaml(home, "init", "--embedder", args.embedder)
        with serving(home, "run", ready="serving"), connect(home) as memory:
            for i in range(args.notes):
                memory.remember([{"role": "user", "content": f"note {i}: " + " ".join(rng.sample(WORDS, 6))}])
            results["cli_with_daemon"] = summary(timed(lambda: gaml(home, "search", queries[0]), args.cli_calls))
            results["sdk_search"] = summary(timed(lambda: memory.search(rng.choice(queries)), args.calls))
            token = gaml(home, "token").stdout.strip()
            with serving(home, "mcp", "--http", "--listen", "127.0.0.1:0") as info:

                async def recall_calls() -> list[float]:
                    async with (
                        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as h,
                        Client(streamable_http_client(info["mcp"], http_client=h)) as c,
                    ):
                        out = []
                        for q in queries[: args.calls]:
                            t0 = time.perf_counter()
                            r = await c.call_tool("recall", {"query": q})
                            assert not r.is_error
                            out.append((time.perf_counter() - t0) * 1000)
                        return out

                results["mcp_http_recall"] = summary(anyio.run(recall_calls))
            upstream = Upstream()
            with serving(home, "proxy", "--upstream", upstream.url, "--listen", "127.0.0.1:0") as info:
                base = info["proxy"]
                results["upstream_direct"] = summary(
                    timed(lambda: chat(upstream.url, "none", rng.choice(queries)), args.calls)
                )
                results["through_proxy"] = summary(timed(lambda: chat(base, token, rng.choice(queries)), args.calls))
            upstream.server.shutdown()
        results["cli_without_daemon"] = summary(timed(lambda: gaml(home, "search", queries[0]), args.cli_calls))

    r = results
    rows = [
        ("`gaml search` (a process), no daemon", "cli_without_daemon", "sdk_search"),
        ("`gaml search` (a process), through the daemon", "cli_with_daemon", "sdk_search"),
        ("SDK `search` over the socket (the floor)", "sdk_search", "sdk_search"),
        ("MCP `recall` over streamable HTTP", "mcp_http_recall", "sdk_search"),
        ("chat completion straight to the upstream", "upstream_direct", "upstream_direct"),
        ("chat completion through `gaml proxy`", "through_proxy", "upstream_direct"),
    ]
    lines = [
        f"# Doors ({args.embedder}, {args.notes} notes; {args.calls} calls, {args.cli_calls} for processes)",
        "",
        "| door | n | median ms | p99 ms | median vs its floor |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, key, floor in rows:
        ratio = r[key]["median_ms"] / r[floor]["median_ms"]
        lines.append(f"| {label} | {r[key]['n']} | {r[key]['median_ms']} | {r[key]['p99_ms']} | {ratio:.1f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "doors.md").write_text(text)
    (args.out / "doors.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
