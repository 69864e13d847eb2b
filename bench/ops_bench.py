"""Operations benchmark: what running a node for real costs, through the daemon, in one run.

::

    .venv/bin/python -m gaml.bench.ops_bench [--assets 20000] [--calls 300] [--embedder hash] [--out bench/results]

Setup (untimed): a fresh home (``--embedder``), ``--assets`` notes of one user over a seeded vocabulary, put through
the daemon in batches.

Measured (medians and p99 in milliseconds, ``--calls`` each):

- **metrics overhead**: the SDK's ``search`` and ``status`` over the socket with the daemon started without
  ``--metrics``, then with it (same home, same queries); a scrape of ``/metrics`` (what Prometheus pays, the gauges
  read on the core);
- **backup**: ``Backup`` through the running daemon (the SDK's ``backup``: the daemon does it between two calls; the
  core is busy meanwhile), its size against the home's, and the search latency of a client running *during* it;
- **restore** into a fresh home (``gaml restore``, in this process), and whether the restored home answers the same
  queries with the same ids (``search`` on both, no daemon).

Results: a Markdown table on stdout and in ``OUT/ops.md``, the raw numbers in ``OUT/ops.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gaml.bench.doors_bench import gaml as doors_gaml
from gaml.bench.doors_bench import serving, timed
from gaml.bench.doors_bench import summary as doors_summary
from gaml.node.shells.files import bytes_under

KEY = "6b" * 32


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "GAML_HOME": str(home), "GAML_KEYCHAIN_KEY": KEY}
    for var in ("GAML_PASSPHRASE", "GAML_AS", "GAML_KEYCHAIN_KEY_FILE"):
        env.pop(var, None)
    return env


def gaml(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return doors_gaml(home, *argv, env=_env(home))


@contextlib.contextmanager
def daemon(home: Path, *extra: str) -> Iterator[dict[str, Any]]:
    """``gaml run`` in the background until it logs that it serves; its run/daemon.json."""
    with serving(home, "run", *extra, ready="serving", env=_env(home), stop_s=120):
        yield json.loads((home / "run" / "daemon.json").read_text())


def summary(ms: list[float]) -> dict[str, float]:
    return doors_summary(ms, digits=3)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--assets", type=int, default=20_000)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--embedder", choices=("minilm", "hash"), default="hash")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    vocab = [f"w{i:04d}" for i in range(2000)]
    queries = [" ".join(rng.sample(vocab, 3)) for _ in range(args.calls)]
    R: dict[str, Any] = {"setup": vars(args) | {"out": str(args.out)}}

    from gaml.node import connect

    with tempfile.TemporaryDirectory(prefix="gaml-ops-") as tmp:
        home = Path(tmp) / "home"
        gaml(home, "init", "--embedder", args.embedder, "--user", "alice")
        with daemon(home), connect(home, timeout_s=600) as m:
            t0 = time.perf_counter()
            for start in range(0, args.assets, 500):
                drafts = [
                    {
                        "asset_type": "fact",
                        "payload": {"text": f"note {i}: " + " ".join(rng.choices(vocab, k=12))},
                        "owner_id": "alice",
                        "privacy_scope": "user_private",
                    }
                    for i in range(start, min(args.assets, start + 500))
                ]
                m.put(drafts)
            R["put_seconds"] = round(time.perf_counter() - t0, 1)
            while m.status().pending:  # the background indexer's backlog: not what either phase should pay
                time.sleep(0.5)
            R["index_caught_up_seconds"] = round(time.perf_counter() - t0, 1)
        # Both phases start the same way: a fresh daemon on an indexed home, and a few calls of warm-up.
        with daemon(home), connect(home, timeout_s=600) as m:
            timed(lambda: m.search(rng.choice(queries)), 20)
            R["search_plain"] = summary(timed(lambda: m.search(rng.choice(queries)), args.calls))
            R["status_plain"] = summary(timed(m.status, args.calls))
        with daemon(home, "--metrics", "127.0.0.1:0") as info, connect(home, timeout_s=600) as m:
            timed(lambda: m.search(rng.choice(queries)), 20)
            R["search_metrics"] = summary(timed(lambda: m.search(rng.choice(queries)), args.calls))
            R["status_metrics"] = summary(timed(m.status, args.calls))

            def scrape() -> None:
                with urllib.request.urlopen(info["metrics"], timeout=60) as r:
                    r.read()

            R["scrape"] = summary(timed(scrape, min(args.calls, 100)))
            # A backup while a client searches: the daemon makes it between two calls, so searches wait for it.
            during: list[float] = []
            stop = threading.Event()

            def searcher() -> None:
                with connect(home, timeout_s=600) as c:
                    while not stop.is_set():
                        t = time.perf_counter()
                        c.search(rng.choice(queries))
                        during.append((time.perf_counter() - t) * 1000)

            th = threading.Thread(target=searcher)
            th.start()
            backup_dir = Path(tmp) / "backup"
            t0 = time.perf_counter()
            made = m.backup(str(backup_dir))
            R["backup_seconds"] = round(time.perf_counter() - t0, 3)
            stop.set()
            th.join(600)
            R["search_during_backup"] = summary(during) if during else {}
            R["backup_assets"] = made["assets"]
            probes = queries[:20]
            expected = [[h.id for h in m.search(q)] for q in probes]
        R["home_bytes"] = bytes_under(home)
        R["backup_bytes"] = bytes_under(backup_dir)
        restored = Path(tmp) / "restored"
        t0 = time.perf_counter()
        gaml(restored, "restore", str(backup_dir))
        R["restore_seconds_process"] = round(time.perf_counter() - t0, 3)
        with daemon(restored), connect(restored, timeout_s=600) as m:
            R["restored_same_answers"] = [[h.id for h in m.search(q)] for q in probes] == expected

    r = R
    rows = [
        ("SDK `search`, daemon without `--metrics`", "search_plain", "search_plain"),
        ("SDK `search`, daemon with `--metrics`", "search_metrics", "search_plain"),
        ("SDK `status`, daemon without `--metrics`", "status_plain", "status_plain"),
        ("SDK `status`, daemon with `--metrics`", "status_metrics", "status_plain"),
        ("a scrape of `/metrics`", "scrape", "status_plain"),
    ]
    if r["search_during_backup"].get("n", 0) >= 5:
        rows.append(("SDK `search` while a backup runs", "search_during_backup", "search_metrics"))
    lines = [
        f"# Operations ({args.embedder}, {args.assets:,} assets of one user; {args.calls} calls each)",
        "",
        "| call | n | median ms | p99 ms | median vs its reference |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, key, ref in rows:
        ratio = r[key]["median_ms"] / r[ref]["median_ms"]
        lines.append(f"| {label} | {r[key]['n']} | {r[key]['median_ms']} | {r[key]['p99_ms']} | {ratio:.2f}x |")
    lines += [
        "",
        f"- put {args.assets:,} assets through the daemon: {r['put_seconds']} s (indexed by "
        f"{r['index_caught_up_seconds']} s)",
        f"- searches that ran while the backup was made: {r['search_during_backup'].get('n', 0)} "
        f"(median {r['search_during_backup'].get('median_ms', '-')} ms)",
        f"- backup through the running daemon: {r['backup_seconds']} s for {r['backup_assets']:,} assets; "
        f"{r['backup_bytes'] / 1e6:.1f} MB against a home of {r['home_bytes'] / 1e6:.1f} MB "
        "(the database's files are hard links where the backup is on the same file system: the MB are its size, "
        "not new disk)",
        f"- restore into a fresh home (`gaml restore`, a process): {r['restore_seconds_process']} s; the restored "
        f"home gives the same ids to the same 20 queries: {r['restored_same_answers']}",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ops.md").write_text(text)
    (args.out / "ops.json").write_text(json.dumps(R, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
