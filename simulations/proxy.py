"""The link proxy of the simulation's real mode: every libp2p link between two daemons passes through it, so the
scenario's faults reach real TCP connections (this kernel has no ``netem`` qdisc).

``python -m gaml.simulations.proxy --config FILE --control SOCKET`` runs in the bridge namespace of a
:class:`~simulations.lan.Lan`. The config (JSON) lists the links (``{"id", "listen": [ip, port], "target": [ip,
port]}``), ``delay_ms`` [low, high], ``drop`` and ``seed``. Each link listens on its own port and forwards each
connection to its target, one thread per direction:

- **delay**: every chunk read is held for a time drawn from ``delay_ms`` before it is written on;
- **loss**: with probability ``drop`` a chunk is held 200 ms more, as TCP's retransmission would after a lost segment
  (a byte stream cannot lose bytes and stay a stream; duplicates and reordering do not exist on TCP either);
- **down**: a link taken down (``{"down": [ids]}`` on the control socket) closes its connections and refuses new ones
  until ``{"up": [ids]}``: a partition or a flap.

The control socket (a Unix socket, reachable from any namespace) takes one JSON command per line and answers one JSON
line: ``{"down": […]}``, ``{"up": […]}``, ``{"stats": true}`` (bytes and connections per link). Draws are seeded per
link and direction; the timing of real sockets is not, so a real run is repeatable in its plan, not in its trace.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import socket
import socketserver
import threading
import time
from pathlib import Path
from typing import Any

RTO_S = 0.2
CHUNK = 64 << 10


class Link:
    def __init__(self, spec: dict[str, Any], delay_ms: tuple[float, float], drop: float, seed: int) -> None:
        self.id = int(spec["id"])
        self.listen = (str(spec["listen"][0]), int(spec["listen"][1]))
        self.target = (str(spec["target"][0]), int(spec["target"][1]))
        self.delay_s = (delay_ms[0] / 1000, delay_ms[1] / 1000)
        self.drop = drop
        self.seed = seed
        self.down = False
        self.conns: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.stats = {"connections": 0, "refused": 0, "bytes": 0, "held": 0}
        self.server = socket.create_server(self.listen)

    def serve(self) -> None:
        n = 0
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            n += 1
            if self.down:
                self.stats["refused"] += 1
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.conns |= {client, upstream}
                self.stats["connections"] += 1
            for d, (src, dst) in enumerate(((client, upstream), (upstream, client))):
                rng = random.Random(f"{self.seed}/{self.id}/{n}/{d}")
                threading.Thread(target=self._pump, args=(src, dst, rng), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, rng: random.Random) -> None:
        try:
            while not self.down:
                data = src.recv(CHUNK)
                if not data:
                    break
                hold = rng.uniform(*self.delay_s)
                if rng.random() < self.drop:
                    hold += RTO_S
                    self.stats["held"] += 1
                if hold:
                    time.sleep(hold)
                if self.down:
                    break
                dst.sendall(data)
                self.stats["bytes"] += len(data)
        except OSError:
            pass
        finally:
            self._close(src, dst)

    def _close(self, *socks: socket.socket) -> None:
        with self.lock:
            for s in socks:
                self.conns.discard(s)
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    s.close()

    def set_down(self, down: bool) -> None:
        self.down = down
        if down:
            with self.lock:
                conns = list(self.conns)
            self._close(*conns)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gaml.simulations.proxy", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, required=True)
    p.add_argument("--control", type=Path, required=True)
    args = p.parse_args(argv)
    cfg = json.loads(args.config.read_text())
    delay = (float(cfg["delay_ms"][0]), float(cfg["delay_ms"][1]))
    links = {int(s["id"]): Link(s, delay, float(cfg["drop"]), int(cfg["seed"])) for s in cfg["links"]}
    for link in links.values():
        threading.Thread(target=link.serve, daemon=True).start()

    class Control(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            for line in self.rfile:
                cmd = json.loads(line)
                for key, down in (("down", True), ("up", False)):
                    for i in cmd.get(key, ()):
                        links[int(i)].set_down(down)
                out: dict[str, Any] = {"ok": True}
                if cmd.get("stats"):
                    out["links"] = {str(i): dict(link.stats, down=link.down) for i, link in links.items()}
                self.wfile.write((json.dumps(out) + "\n").encode())
                self.wfile.flush()

    args.control.unlink(missing_ok=True)
    with socketserver.ThreadingUnixStreamServer(str(args.control), Control) as server:
        print("ready", flush=True)
        server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
