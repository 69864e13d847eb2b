"""The enterprise subnet of deploy/compose.yaml, without a container engine: the compose file's four services run as
real daemons, each in a network namespace of its own (simulations/lan.py), started by the same script the image runs
(deploy/docker/subnet-node.sh) with the compose file's settings; only paths, keys and addresses differ. Every link
from a member to the relay passes through a userspace proxy (simulations/proxy.py; this kernel has no ``netem``) that
adds 5–40 ms of delay per chunk and a retransmission's delay to 3 % of them.

The story: the nodes make their homes and join by invitations left in the exchange directory; each member writes,
and every member ends with what every member wrote; the admin removes member3, whose daemon keeps running: what is
written afterwards reaches member2 and never member3; the relay holds ciphertext only.

The namespaced run needs root (``ip netns``; skipped with the reason otherwise) and takes about a minute: it is in
``make test-slow``. The check that the compose file has this topology is in ``make test``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from gaml.node.serve.client import Client
from gaml.node.serve.replicator import read_status
from gaml.node.shells.file_keychain import FileKeychain, Unlock
from gaml.policy import crypto
from gaml.simulations.lan import Lan, lan_unavailable
from tests.node.daemon_util import ROOT
from tests.node.p2p_util import Daemon, Fleet, Peer, _collect, files_containing, get_or_none
from tests.node.test_replication import words

COMPOSE: Final = ROOT / "deploy" / "compose.yaml"
SCRIPT: Final = ROOT / "deploy" / "docker" / "subnet-node.sh"
PORT: Final = 4001
PROXY_BASE: Final = 15100


@pytest.fixture(scope="module")
def lan_ok() -> None:
    why = lan_unavailable()
    if why:
        pytest.skip(f"the namespaced subnet needs network namespaces: {why}")


def services() -> dict[str, dict[str, Any]]:
    return dict(yaml.safe_load(COMPOSE.read_text())["services"])


def test_the_compose_file_describes_three_members_and_a_relay_each_with_its_own_volume_and_key() -> None:
    svc = services()
    roles = {name: s["environment"]["GAML_ROLE"] for name, s in svc.items()}
    assert sorted(roles.values()) == ["admin", "member", "member", "relay"]
    (admin,) = [n for n, r in roles.items() if r == "admin"]
    (relay,) = [n for n, r in roles.items() if r == "relay"]
    env = svc[admin]["environment"]
    assert set(env["GAML_INVITE"].split()) == {n for n, r in roles.items() if r == "member"}
    assert env["GAML_INVITE_RELAYS"].split() == [relay]
    homes = [v.split(":")[0] for s in svc.values() for v in s["volumes"] if v.endswith(":/data")]
    assert len(set(homes)) == 4
    keys = [s["environment"]["GAML_KEYCHAIN_KEY_FILE"] for s in svc.values()]
    assert len(set(keys)) == 4 and all(len(s["secrets"]) == 1 for s in svc.values())
    assert all(s["environment"]["GAML_RELAY"].startswith(f"/dns4/{relay}/") for s in svc.values())
    assert all(s["entrypoint"] == ["/opt/gaml/bin/subnet-node.sh"] for s in svc.values())


class Subnet:
    """The compose file's services as processes in namespaces of one LAN, and the link proxy."""

    def __init__(self, fleet: Fleet, lan: Lan) -> None:
        self.fleet, self.lan = fleet, lan
        self.svc = services()
        self.names = sorted(self.svc, key=lambda n: (self.svc[n]["environment"]["GAML_ROLE"] != "relay", n))
        self.keys = {n: secrets.token_hex(32) for n in self.names}
        self.exchange = fleet.base / "exchange"
        self.daemons: dict[str, Daemon] = {}
        self.proxy: subprocess.Popen[bytes] | None = None
        self.control = fleet.base / "proxy.sock"
        self.members = [n for n in self.names if self.svc[n]["environment"]["GAML_ROLE"] != "relay"]

    def home(self, name: str) -> Path:
        return self.fleet.base / name / "home"

    def unlock(self, name: str) -> Unlock:
        return Unlock(key=bytes.fromhex(self.keys[name]))

    def start_proxy(self) -> None:
        relay = self.lan.ip(0)
        links = [
            {"id": k, "listen": [self.lan.bridge_ip, PROXY_BASE + k], "target": [relay, PORT]}
            for k in range(len(self.members))
        ]
        cfg = self.fleet.base / "proxy.json"
        cfg.write_text(json.dumps({"links": links, "delay_ms": [5, 40], "drop": 0.03, "seed": 21}))
        cmd = [*self.lan.exec(self.lan.bridge), sys.executable, "-m", "gaml.simulations.proxy"]
        self.proxy = subprocess.Popen(
            [*cmd, "--config", str(cfg), "--control", str(self.control)], stdout=subprocess.PIPE, cwd=ROOT
        )
        assert self.proxy.stdout is not None and self.proxy.stdout.readline().strip() == b"ready"

    def proxy_stats(self) -> dict[str, Any]:
        import socket

        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(self.control))
            s.sendall(b'{"stats": true}\n')
            out: dict[str, Any] = json.loads(s.makefile().readline())
            return out["links"]

    def env(self, name: str) -> dict[str, str]:
        """The service's compose environment, with this machine's paths, key file and addresses."""
        i = self.names.index(name)
        key_file = self.fleet.base / f"{name}.key"
        key_file.write_text(self.keys[name] + "\n")
        key_file.chmod(0o600)
        env = {k: str(v) for k, v in self.svc[name]["environment"].items()}
        env.update(
            GAML_HOME=str(self.home(name)),
            GAML_EXCHANGE=str(self.exchange),
            GAML_KEYCHAIN_KEY_FILE=str(key_file),
            GAML_LISTEN=f"/ip4/{self.lan.ip(i)}/tcp/{PORT}",
            GAML_EMBEDDER="hash",
            GAML_WAIT_S="300",
        )
        if name in self.members:  # the relay's address, through this member's link of the proxy
            env["GAML_RELAY"] = f"/ip4/{self.lan.bridge_ip}/tcp/{PROXY_BASE + self.members.index(name)}"
        base = {k: v for k, v in os.environ.items() if not k.startswith("GAML_")}
        base["PATH"] = f"{Path(sys.executable).parent}:{base.get('PATH', '/usr/bin:/bin')}"
        return {**base, **env}

    def start(self, name: str) -> Daemon:
        (self.fleet.base / name).mkdir(mode=0o700, exist_ok=True)
        ns = self.lan.hosts[self.names.index(name)]
        proc = subprocess.Popen(
            [*self.lan.exec(ns), "sh", str(SCRIPT), "--grace", "5"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env(name),
            cwd="/",
        )
        d = Daemon(Peer(name, self.home(name), ""), proc)
        assert proc.stderr is not None
        d.reader = threading.Thread(target=_collect, args=(proc.stderr, d.log), daemon=True)
        d.reader.start()
        self.daemons[name] = d
        self.fleet.daemons.append(d)
        return d

    def client(self, name: str) -> Client:
        c = Client.unix(self.home(name) / "run" / "gaml.sock", timeout_s=30)
        c.wait_ready(120)
        return c

    def status(self, name: str) -> dict[str, Any] | None:
        try:
            kc = FileKeychain.open(self.home(name) / "keychain.json", self.unlock(name), crypto.SystemEntropy())
            return read_status(self.home(name) / "run" / "replication.json", kc)
        except FileNotFoundError:
            return None

    def node_id(self, name: str) -> str:
        return (self.exchange / f"{name}.id").read_text().strip()

    def gaml(self, name: str, *args: str) -> Any:
        r = subprocess.run(["gaml", *args], capture_output=True, text=True, env=self.env(name), cwd="/", timeout=300)
        assert r.returncode == 0, f"{name}: gaml {' '.join(args)}: {r.stderr[-2000:]}"
        return json.loads(r.stdout.strip().splitlines()[-1])

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.send_signal(signal.SIGKILL)
            self.proxy.wait(30)


@pytest.fixture
def subnet(lan_ok: None) -> Iterator[Subnet]:
    with Lan(4) as lan, Fleet() as fleet:  # the fleet's processes end before the namespaces go
        s = Subnet(fleet, lan)
        try:
            yield s
        finally:
            for d in fleet.daemons:
                d.kill()
            s.close()


def asset(text: str) -> dict[str, Any]:
    return {
        "asset_type": "fact",
        "payload": {"text": text},
        "owner_id": "ops",
        "tenant_scope": "acme",
        "privacy_scope": "enterprise_private",
        "replication_policy": "private_subnet",
    }


def held(c: Client, ids: list[str]) -> list[dict[str, Any] | None]:
    return [get_or_none(c, i) for i in ids]


def boundary(status: dict[str, Any] | None, name: str = "acme") -> dict[str, Any]:
    return next((b for b in (status or {}).get("boundaries", []) if b["name"] == name), {})


@pytest.mark.slow  # about a minute: `make test-slow`
def test_the_compose_subnet_converges_over_lossy_links_in_namespaces_and_a_removed_member_gets_nothing_new(
    subnet: Subnet,
) -> None:
    fleet = subnet.fleet
    subnet.start_proxy()
    for name in subnet.names:
        subnet.start(name)
    relay_name = subnet.names[0]
    admin = next(n for n in subnet.members if subnet.svc[n]["environment"]["GAML_ROLE"] == "admin")
    others = [n for n in subnet.members if n != admin]
    removed, kept = others[-1], others[0]
    for name in subnet.names:
        d = subnet.daemons[name]
        fleet.wait(f"{name}'s daemon to serve", d.serving, timeout=300)
    texts = {n: f"acme runbook of {n}: {w}" for n, w in zip(subnet.members, words(31, 3), strict=True)}
    clients = {n: subnet.client(n) for n in subnet.members}
    try:
        ids = [clients[n].put([asset(t)])[0] for n, t in texts.items()]

        def everywhere() -> dict[str, list[dict[str, Any] | None]]:
            return {n: held(c, ids) for n, c in clients.items()}

        fleet.wait(
            "every member to hold every member's runbook",
            everywhere,
            lambda seen: all(all(x is not None for x in v) for v in seen.values()),
            timeout=180,
        )
        for n, c in clients.items():
            got = {a["payload"]["text"] for a in held(c, ids) if a is not None}
            assert got == set(texts.values()), n
        old = boundary(subnet.status(admin))
        assert old.get("epoch") == 1, old
    finally:
        for c in clients.values():
            c.close()

    # The admin removes a member (its daemon holds the store: stop it, remove, start it as its container restarts).
    subnet.daemons[admin].stop()
    out = subnet.gaml(admin, "subnet", "remove", "acme", subnet.node_id(removed))
    assert out["removed"] == subnet.node_id(removed) and out["epoch"] == 2
    subnet.start(admin)
    fleet.wait(f"{admin}'s daemon to serve again", subnet.daemons[admin].serving, timeout=300)

    def rotated(name: str) -> bool:
        b = boundary(subnet.status(name))
        return b.get("epoch") == 2

    for name in (admin, kept, relay_name):
        fleet.wait(f"{name} to adopt the roster without {removed}", partial(rotated, name), timeout=180)
    removed_peer = subnet.node_id(removed)
    r_status = fleet.wait(
        f"the relay to close the subnet to {removed}",
        partial(subnet.status, relay_name),
        lambda s: s is not None and s["peers"].get(removed_peer, {}).get("open_boundaries") == 0,
        timeout=180,
    )
    sent_before = r_status["peers"][removed_peer]["objects_sent"]

    (after_word,) = words(32, 1)
    with subnet.client(admin) as ca, subnet.client(kept) as ck:
        (after,) = ca.put([asset(f"after the removal: {after_word}")])
        fleet.wait(f"{kept} to receive the asset written after the removal", lambda: get_or_none(ck, after))
    with subnet.client(removed) as cr:
        assert get_or_none(cr, after) is None
    st = subnet.status(relay_name)
    assert st is not None
    assert st["peers"][removed_peer]["objects_sent"] == sent_before
    assert boundary(subnet.status(removed)).get("epoch") == 1  # it never got the new roster either

    # The links carried the traffic, delayed, with losses recovered.
    links = subnet.proxy_stats()
    assert all(v["bytes"] > 0 and v["connections"] >= 1 for v in links.values()), links
    assert sum(v["held"] for v in links.values()) > 0, links

    for name in (*subnet.members, relay_name):
        subnet.daemons[name].stop()
    # The relay: ciphertext only; the removed member: nothing written after its removal.
    secrets_ = {f"text {n}": t.encode() for n, t in texts.items()} | {"after": after_word.encode()}
    assert files_containing(subnet.home(relay_name), secrets_) == []
    assert files_containing(subnet.home(removed), {"after": after_word.encode()}) == []
    # The exchange directory holds node ids and invitations only.
    assert files_containing(subnet.exchange, secrets_) == []


@pytest.mark.slow  # a few `gaml` processes
def test_the_script_refuses_an_unknown_role(tmp_path: Path) -> None:
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "GAML_ROLE": "boss",
        "GAML_NAME": "x",
        "GAML_EXCHANGE": str(tmp_path / "ex"),
        "GAML_HOME": str(tmp_path / "home"),
        "GAML_KEYCHAIN_KEY": "ab" * 32,
        "GAML_EMBEDDER": "hash",
    }
    with contextlib.suppress(FileNotFoundError):
        (tmp_path / "home").rmdir()
    r = subprocess.run(["sh", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "unknown role boss" in r.stderr, r.stderr
