"""The real mode of the scenario harness (simulations/real.py): a shipped scenario drives real daemons in network
namespaces, every link through the fault-injecting proxy; the same report, and its checks held. Slow (a minute and a
half): `make test-slow`. Skipped, saying why, where network namespaces cannot be made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gaml.simulations.__main__ import main
from gaml.simulations.lan import lan_unavailable
from gaml.simulations.real import plan_nodes
from gaml.simulations.scenario import load

WHY = lan_unavailable()
SCENARIOS = Path(__file__).resolve().parents[2] / "simulations" / "scenarios"


def test_the_real_mode_keeps_every_shape_within_the_node_budget() -> None:
    """Each shipped scenario scales to at most 8 daemons with every shape present (two members at least, a relay
    where the shape has relays) and its public swarm's members taken from the shapes it includes."""
    for path in sorted(SCENARIOS.glob("*.toml")):
        sc = load(path)
        nodes, layout = plan_nodes(sc, 8)
        assert 4 <= len(nodes) <= 8, path.name
        for b in sc.boundaries:
            shape = layout[b.name]
            assert len(shape["members"]) >= 2 and len(shape["relays"]) == (1 if b.relays else 0), (path.name, b.name)
        assert sum(n.role == "stranger" for n in nodes) == (1 if sc.strangers else 0)


@pytest.mark.slow
@pytest.mark.skipif(bool(WHY), reason=f"no network namespaces here: {WHY}")
def test_a_shipped_scenario_runs_on_real_daemons_in_namespaces(tmp_path: Path) -> None:
    out = tmp_path / "real.json"
    rc = main(
        ["run", "--scenario", str(SCENARIOS / "trusted_devices.toml"), "--seed", "3", "--real", "--json", str(out)]
    )
    r = json.loads(out.read_text())
    assert rc == 0, r
    assert r["mode"] == "real" and r["nodes"] == 8 and r["steps"] >= 10
    assert (r["leaks"], r["lost_acknowledged_writes"], r["converged"]) == (0, 0, True)
    assert r["written"] > 50 and r["deleted"] > 0
    assert any(link["connections"] >= 2 for link in r["proxy"].values())  # the partition cut links; they came back
    assert "fault skew" in r["skipped"]
