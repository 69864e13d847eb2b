"""Resource probe: the memory a node spends on hostile or oversized input (review finding 5 of issue 14).

::

    .venv/bin/python -m gaml.bench.resources_probe [--headers 100] [--header-mib 8] [--note-mb 50] [--embedder hash]

1. **Ingest headers.** A daemon (``gaml run``, a child process, on a fresh home) gets one ``Ingest`` stream of
   ``--headers`` file headers of ``--header-mib`` MiB each (an ``IngestFile`` whose ``name`` fills the message). Its
   resident set (``VmRSS`` of ``/proc/PID/status``) is read before the first call and after each of 10 identical
   calls: the node must refuse the stream (RESOURCE_EXHAUSTED) and give the memory back.
2. **A big note.** ``gaml ingest note.md --owner alice`` (no daemon) of one ``--note-mb`` MB paragraph, under
   ``/usr/bin/time -f %M`` (peak resident set, KiB); then ``gaml curate``. The report's ``clipped`` entries say what
   was cut to fit the payload limit.

Numbers go to stdout as one JSON document. Nothing here is a test: timings and memory vary with the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from gaml.node.serve.client import Client
from gaml.v1 import memory_pb2

KEY_HEX = "5a" * 32
ROOT = Path(__file__).resolve().parents[1]
ATTEMPTS = tuple(f"call{i}" for i in range(1, 11))


def _env() -> dict[str, str]:
    env = {**os.environ, "GAML_KEYCHAIN_KEY": KEY_HEX, "PYTHONPATH": str(ROOT)}
    env.pop("GAML_PASSPHRASE", None)
    return env


def _gaml(home: Path, *argv: str, time_it: bool = False) -> tuple[subprocess.CompletedProcess[str], int]:
    cmd = [sys.executable, "-m", "gaml.node.cli", "--home", str(home), *argv]
    if time_it:
        cmd = ["/usr/bin/time", "-f", "%M", *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT, check=False)
    peak_kib = int(r.stderr.strip().splitlines()[-1]) if time_it else 0
    return r, peak_kib


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def probe_headers(base: Path, headers: int, header_mib: int) -> dict[str, Any]:
    home = base / "h1"
    r, _ = _gaml(home, "init", "--embedder", "hash")
    assert r.returncode == 0, r.stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "gaml.node.cli", "--home", str(home), "run", "--principal", "alice"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the daemon logs JSON lines; it serves once it says so
            if '"serving"' in line:
                break
        filler = "x" * (header_mib * (1 << 20) - 64)  # a field no header check bounds
        out: dict[str, Any] = {"headers": headers, "header_mib": header_mib}
        with Client.unix(home / "run" / "gaml.sock") as c:
            c.wait_ready(30)
            c.status()
            out["rss_before_mb"] = round(rss_mb(proc.pid), 1)
            for attempt in ATTEMPTS:
                reqs = (
                    memory_pb2.IngestRequest(file=memory_pb2.IngestFile(name="n.md", segment=filler))
                    for _ in range(headers)
                )
                t = time.perf_counter()
                try:
                    c.stub.Ingest(reqs, timeout=300)
                    out[f"{attempt}_status"] = "OK"
                except grpc.RpcError as e:
                    out[f"{attempt}_status"] = e.code().name  # type: ignore[attr-defined]
                out[f"{attempt}_s"] = round(time.perf_counter() - t, 2)
                c.status()  # the daemon still answers
                out[f"rss_after_{attempt}_mb"] = round(rss_mb(proc.pid), 1)
        return out
    finally:
        proc.terminate()
        proc.wait(60)


def probe_note(base: Path, note_mb: int, embedder: str) -> dict[str, Any]:
    home = base / "h2"
    r, _ = _gaml(home, "init", "--embedder", embedder)
    assert r.returncode == 0, r.stderr
    note = base / "note.md"
    word = "lorem "
    note.write_text((word * (note_mb * 1_000_000 // len(word) + 1))[: note_mb * 1_000_000].rstrip() + "\n")
    r, peak = _gaml(home, "ingest", str(note), "--owner", "alice", "--no-curate", time_it=True)
    out: dict[str, Any] = {"note_bytes": note.stat().st_size, "ingest_rc": r.returncode, "ingest_peak_mb": peak // 1024}
    lines = r.stderr.strip().splitlines()[:-1]
    out["ingest_stderr"] = [line[:300] for line in lines if not line.startswith(("ingest", "curate"))][:5]
    if r.returncode == 0:
        report = json.loads(r.stdout)
        out["clipped"] = report.get("clipped")
    r, peak = _gaml(home, "curate", time_it=True)
    out.update(curate_rc=r.returncode, curate_peak_mb=peak // 1024)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--headers", type=int, default=100)
    p.add_argument("--header-mib", type=int, default=8)
    p.add_argument("--note-mb", type=int, default=50)
    p.add_argument("--embedder", default="hash", choices=("hash", "minilm"))
    p.add_argument("--skip", choices=("headers", "note"), action="append", default=[])
    args = p.parse_args()
    base = Path(tempfile.mkdtemp(prefix="grp", dir="/tmp"))  # a short path: a Unix socket's is at most 107 bytes
    try:
        out: dict[str, Any] = {}
        if "headers" not in args.skip:
            out["ingest_headers"] = probe_headers(base, args.headers, args.header_mib)
        if "note" not in args.skip:
            out["big_note"] = probe_note(base, args.note_mb, args.embedder)
        print(json.dumps(out, indent=1))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
