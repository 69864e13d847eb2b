"""Pairing by code over the LAN (`gaml pair --code` / `--join-code`): two devices in two network namespaces of one
LAN (simulations/lan.py), no address typed anywhere: the new device finds the offer by mDNS, gets its invitation,
and both daemons (started with no --p2p and no --peer: the pairing set p2p.mdns and a LAN listen address) find each
other by mDNS and replicate; after the new device's address changes (its daemon stopped, the address swapped, the
daemon started again), they find each other again and replication resumes. A wrong code gets nothing.

The namespaced part needs root (skipped with the reason otherwise) and is in `make test-slow`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from gaml.node.pairing import _code_bytes, _pair_keys, new_code
from gaml.policy import crypto
from gaml.policy.errors import InvalidInput
from gaml.simulations.lan import Lan, lan_unavailable
from tests.node.daemon_util import ROOT
from tests.node.p2p_util import Fleet, Peer, _env, get_or_none
from tests.node.test_replica import private


def test_a_code_is_sixteen_letters_read_back_whatever_its_case_and_spacing() -> None:
    code = new_code(crypto.SystemEntropy())
    assert len(code) == 19 and code.count("-") == 3
    assert _code_bytes(code) == _code_bytes(code.lower().replace("-", " "))
    assert _pair_keys(code) == _pair_keys(code.lower())
    assert _pair_keys(code)[1] != _pair_keys(new_code(crypto.SystemEntropy()))[1]
    for bad in ("", "ABCD-EFGH", code + "A", code[:-1] + "1"):
        with pytest.raises(InvalidInput, match="not a pairing code"):
            _code_bytes(bad)


@pytest.fixture
def lan() -> Iterator[tuple[Lan, Fleet]]:
    why = lan_unavailable()
    if why:
        pytest.skip(f"pairing over a LAN needs network namespaces: {why}")
    with Lan(2) as lan, Fleet() as fleet:  # the fleet's processes end before the namespaces go
        yield lan, fleet


def gaml_in(lan: Lan, i: int, peer: Peer, *args: str) -> subprocess.Popen[str]:
    cmd = [*lan.exec(lan.hosts[i]), sys.executable, "-m", "gaml.node.cli", "--home", str(peer.home), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


@pytest.mark.slow  # tens of seconds: `make test-slow`
def test_two_devices_pair_by_code_find_each_other_by_mdns_and_again_after_an_address_change(
    lan: tuple[Lan, Fleet],
) -> None:
    net, fleet = lan
    a, b = fleet.peer("a"), fleet.peer("b")
    a.gaml("principal", "add", "alice")

    # A wrong code first: the offer stays open for the right one.
    offer = gaml_in(net, 0, a, "pair", "--code", "--owner", "alice", "--wait", "120")
    assert offer.stdout is not None
    shown = json.loads(offer.stdout.readline())
    code = shown["code"]
    assert shown["next"] == f"on the new device, on this network: gaml pair --join-code {code}"
    wrong = new_code(crypto.SystemEntropy())
    rc, _, err = finish(gaml_in(net, 1, b, "pair", "--join-code", wrong, "--wait", "5"))
    assert rc != 0 and "no pairing offer for this code" in err, err

    rc, out, err = finish(gaml_in(net, 1, b, "pair", "--join-code", code.lower(), "--wait", "60"))
    assert rc == 0, err
    joined = json.loads(out.strip().splitlines()[-1])
    assert joined["joined"] == "alice-devices" and joined["listen"] == ["/ip4/0.0.0.0/tcp/0"]
    rc, out, err = finish(offer)
    assert rc == 0, err
    paired = json.loads(out.strip().splitlines()[-1])
    assert paired["paired"] == b.node_id and paired["address"] == net.ip(1)

    # Daemons with no address given: each finds the other by mDNS.
    da = fleet.start(a, principal="alice", listen=None, netns=net.hosts[0])
    db = fleet.start(b, principal="alice", listen=None, netns=net.hosts[1])
    fleet.up(da, db)
    with da.client() as ca, db.client() as cb:
        (first,) = ca.put([private("alice's bike lock code is 2207")])
        fleet.wait("B to receive A's note through a peer it found by mDNS", lambda: get_or_none(cb, first))
    assert any(e.get("event") == "mdns_found" for e in db.log), db.tail()

    # B's address changes (another network): stopped, moved, started again; nothing is typed; they meet again.
    db.stop()
    eth = ["ip", "-n", net.hosts[1]]
    new_ip = net.ip(1).rsplit(".", 1)[0] + ".77"
    subprocess.run([*eth, "addr", "del", f"{net.ip(1)}/24", "dev", "eth0"], check=True)
    subprocess.run([*eth, "addr", "add", f"{new_ip}/24", "dev", "eth0"], check=True)
    db = fleet.start(b, principal="alice", listen=None, netns=net.hosts[1])
    fleet.up(db)
    with da.client() as ca, db.client() as cb:
        (second,) = ca.put([private("alice's train leaves at 07:42")])
        fleet.wait("B, at its new address, to receive A's next note", lambda: get_or_none(cb, second))
    assert any(new_ip in str(e.get("addresses", "")) for e in da.log if e.get("event") == "mdns_found"), da.tail(20)
    for d in (db, da):
        d.stop()
