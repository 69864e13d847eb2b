"""The scenario harness (simulations/harness.py): a small world with every fault and adversary kind, its checks
(which must fail, naming the seed and the step, when an invariant is broken behind the harness's back), its
determinism, the scenario schema, and the ``python -m simulations run`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gaml.policy.errors import InvalidInput
from gaml.simulations import harness
from gaml.simulations.__main__ import main
from gaml.simulations.scenario import Scenario, load, parse

SCENARIOS = Path(__file__).resolve().parents[2] / "simulations" / "scenarios"

SMALL: dict[str, Any] = {
    "name": "small",
    "seconds": 16,
    "strangers": 2,
    "network": {"drop": 0.03, "duplicate": 0.03, "reorder": 0.05, "delay_ms": [1, 40], "degree": 3},
    "boundaries": [
        {"name": "alice", "kind": "devices", "members": 4},
        {"name": "acme", "kind": "subnet", "members": 8, "relays": 1, "weight": 2},
    ],
    "workload": {
        "assets": 120,
        "local_only": 8,
        "edits": 16,
        "deletes": 8,
        "removals": 1,
        "hydrates": 12,
        "slots": 6,
        "history_days": 40,
    },
    "faults": [
        {"at": 2, "kind": "skew", "nodes": 2, "skew_seconds": 30},
        {"at": 4, "kind": "partition"},
        {"at": 5, "kind": "crash", "nodes": 2, "for_seconds": 4},
        {"at": 7, "kind": "flap", "links": 4, "for_seconds": 3},
        {"at": 9, "kind": "heal"},
    ],
    "adversaries": {"share": 0.3, "sybils": 3, "replayers": 1, "forgers": 1},
    "checks": {"step_seconds": 2, "converge_within_seconds": 300},
}


@pytest.fixture(scope="module")
def small() -> Scenario:
    return parse(SMALL)


@pytest.fixture(scope="module")
def report(small: Scenario) -> dict[str, Any]:
    return harness.run(small, 1)


def test_a_small_world_passes_every_check_under_every_fault_and_adversary(report: dict[str, Any]) -> None:
    r = report
    assert r["leaks"] == 0 and r["lost_acknowledged_writes"] == 0 and r["forgeries_accepted"] == 0
    assert r["converged"] and r["convergence_sim_seconds"] <= 300
    # Every fault and adversary acted: the checks above held under them, not in a quiet world.
    net, h, rep = r["net"], r["harness"], r["replicas"]
    assert net["dropped"] and net["duplicated"] and net["partitioned"]
    assert h["restarts"] == 2 and h["removals"] == 1 and h["replayed_frames"] > 0 and h["forged_objects"] > 0
    assert rep["rejected_forged"] > 0  # forged objects reached members and were refused for their signature
    assert rep["erased"] > 0 and rep["carried"] > 0  # tombstones travelled; the relay carried ciphertext
    assert r["roles"]["poisoner"] >= 2 and r["roles"]["sybil"] == 3
    # Consensus kept the poison out of honest frames; the same frames without it took it in.
    assert r["frames"] >= 12 and r["poisoned_frame_share"] == 0.0
    assert r["baseline_poisoned_frame_share"] > 0.5
    keys = {
        "seed",
        "nodes",
        "steps",
        "sim_seconds",
        "wall_seconds",
        "leaks",
        "lost_acknowledged_writes",
        "converged",
        "convergence_sim_seconds",
        "poisoned_frame_share",
        "trace_digest",
    }
    assert keys <= r.keys() and r["nodes"] == 18 and r["steps"] > 8


def test_the_same_seed_gives_the_same_trace(small: Scenario, report: dict[str, Any]) -> None:
    again = harness.run(small, 1)
    assert again["trace_digest"] == report["trace_digest"]
    assert again["timeline"] == report["timeline"] and again["net"] == report["net"]
    other = harness.run(small.model_copy(update={"seconds": 8.0, "faults": []}), 2)
    assert other["trace_digest"] != report["trace_digest"]


def _sabotaged(monkeypatch: pytest.MonkeyPatch, breach: str) -> None:
    """Break one invariant behind the harness's back, after the 40th workload event."""
    real = harness.World.apply
    done: list[int] = []

    def apply(self: harness.World, kind: str, detail: Any) -> None:
        real(self, kind, detail)
        done.append(1)
        if len(done) != 40:
            return
        if breach == "leak":  # a stranger comes to hold a subnet's asset, as if replication ignored the boundary
            id_ = next(i for i, w in sorted(self.writes.items()) if w.inst == "acme")
            stranger = next(h for h in self.hosts.values() if h.role == "stranger")
            stranger.replica.node.put([self.drafts[id_]], self.net.clock.now())
        else:  # a writer loses an acknowledged write (erased without any delete asked for)
            id_, w = next((i, w) for i, w in sorted(self.writes.items()) if self.hosts[w.writer].up)
            self.hosts[w.writer].replica.node.store.delete(id_, self.net.clock.now())

    monkeypatch.setattr(harness.World, "apply", apply)


@pytest.mark.parametrize(("breach", "message"), [("leak", "leaks"), ("lost", "lost_acknowledged_writes")])
def test_a_broken_invariant_fails_with_its_seed_and_step(
    small: Scenario, monkeypatch: pytest.MonkeyPatch, breach: str, message: str
) -> None:
    _sabotaged(monkeypatch, breach)
    with pytest.raises(harness.InvariantBroken, match=rf"seed=3 step=\d+ \(workload, t=.*{message}"):
        harness.run(small, 3)


def test_the_command_prints_the_seed_of_a_failure_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "small.toml"
    scenario.write_text((SCENARIOS / "trusted_devices.toml").read_text().replace("assets = 600", "assets = 100"))
    ok = main(["run", "--scenario", str(scenario), "--seed", "4", "--json", str(tmp_path / "r.json")])
    assert ok == 0
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["seed"] == 4 and r["leaks"] == 0 and r["converged"] is True and r["timeline"]
    _sabotaged(monkeypatch, "lost")
    assert main(["run", "--scenario", str(scenario), "--seed", "5", "--json", str(tmp_path / "f.json")]) == 1
    err = capsys.readouterr().err
    assert "FAILED: seed=5 step=" in err and f"--scenario {scenario} --seed 5" in err
    assert json.loads((tmp_path / "f.json").read_text())["failed"].startswith("seed=5 step=")


def test_the_shipped_scenarios_load_and_one_has_a_hundred_nodes() -> None:
    shipped = {p.stem: load(p) for p in sorted(SCENARIOS.glob("*.toml"))}
    assert {"trusted_devices", "enterprise_subnet", "tenants"} <= shipped.keys()
    big = shipped["enterprise_subnet"]
    assert big.nodes >= 100 and big.workload.assets >= 10_000 and big.faults
    assert big.adversaries.share and big.adversaries.sybils and big.adversaries.forgers and big.adversaries.replayers


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"colour": "red"}, "colour: Extra inputs are not permitted"),
        ({"network": {"drop": 1.5}}, r"network.drop: Input should be less than 1"),
        ({"network": {"delay_ms": [50, 10]}}, "low <= high"),
        ({"faults": [{"at": 99, "kind": "heal"}]}, "after the workload ends"),
        ({"faults": [{"at": 1, "kind": "crash"}]}, "crash fault needs nodes > 0"),
        ({"faults": [{"at": 1, "kind": "meteor"}]}, "faults.0.kind: Input should be"),
        ({"boundaries": [{"name": "x", "kind": "devices", "members": 3, "relays": 1}]}, "devices have no relays"),
        ({"boundaries": []}, "boundaries: List should have at least 1 item"),
        ({"adversaries": {"share": 0.9}}, "adversaries.share: Input should be less than or equal to 0.5"),
    ],
)
def test_a_bad_scenario_is_refused_naming_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse({**SMALL, **change})


def test_a_bad_scenario_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no scenario file"):
        load(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed\n")
    with pytest.raises(InvalidInput, match="not a readable TOML file"):
        load(bad)
    with pytest.raises(SystemExit) as exc:
        main(["run", "--scenario", str(bad)])
    assert exc.value.code == 2


@pytest.mark.slow  # tens of seconds: `make test-slow` (make test keeps under 15 minutes)
def test_the_public_swarm_scenario_keeps_private_memory_out_and_bans_forgers() -> None:
    """The shipped public swarm, scaled down: swarm-only nodes plus users' devices and a subnet that also join it.
    Public memory reaches every swarm member; private, tenant-only and redacted-only memory never leaves its
    boundary (the per-step checks, raw scans of strangers and relays included); forgers are banned."""
    sc = load(SCENARIOS / "public_swarm.toml")
    shapes = [
        b.model_copy(update={"members": 10} if b.kind == "public" else {"count": 1} if b.kind == "devices" else {})
        for b in sc.boundaries
    ]
    small = sc.model_copy(
        update={
            "boundaries": shapes,
            "seconds": 30.0,
            "faults": [f for f in sc.faults if f.at <= 30],
            "workload": sc.workload.model_copy(update={"assets": 150, "hydrates": 16, "slots": 6, "edits": 20}),
        }
    )
    r = harness.run(small, 2)
    assert r["leaks"] == 0 and r["lost_acknowledged_writes"] == 0 and r["converged"]
    rep = r["replicas"]
    assert rep["swarms_joined"] >= 10 and rep["swarm_met"] > 0 and rep["swarm_banned"] >= 1
    assert r["poisoned_frame_share"] == 0.0 and r["frames"] >= 16


@pytest.mark.slow  # tens of seconds: `make test-slow` (make test keeps under 15 minutes)
def test_a_seed_replays_in_another_process(tmp_path: Path) -> None:
    """A failure's seed must reproduce it in a new process, whose string hashing differs: the digest of a run with
    nodes in two boundaries (a swarm and a user's devices) is the same under four hash seeds."""
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(
        'name = "tiny"\nseconds = 6\n[network]\ndrop = 0.05\nreorder = 0.1\n'
        '[[boundaries]]\nname = "pub"\nkind = "public"\nmembers = 4\ninclude = ["dev"]\n'
        '[[boundaries]]\nname = "dev"\nkind = "devices"\nmembers = 3\n'
        "[workload]\nassets = 40\nedits = 6\ndeletes = 4\nhistory_days = 2\n"
    )
    digests = []
    for hash_seed in ("1", "2", "3", "4"):
        out = tmp_path / f"r{hash_seed}.json"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        cmd = [sys.executable, "-m", "gaml.simulations", "run", "--scenario", str(scenario), "--seed", "3"]
        subprocess.run([*cmd, "--json", str(out)], env=env, check=True, capture_output=True, timeout=300)
        digests.append(json.loads(out.read_text())["trace_digest"])
    assert len(set(digests)) == 1, digests


def test_a_fault_at_the_last_instant_of_the_workload_happens() -> None:
    sc = parse(
        {
            "name": "edge",
            "seconds": 4,
            "boundaries": [{"name": "d", "kind": "devices", "members": 3}],
            "workload": {"assets": 20},
            "faults": [{"at": 4, "kind": "crash", "nodes": 1, "for_seconds": 2}],
            "checks": {"step_seconds": 2},
        }
    )
    r = harness.run(sc, 1)
    assert r["harness"]["fault_crash"] == 1 and r["harness"]["restarts"] == 1 and r["converged"]
