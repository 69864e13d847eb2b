"""The replication simulation (simulations/replication.py): 20 real nodes, three boundaries, 1,000 assets, a seeded
faulty network. More seeds: ``make sim``; any failure names the seed (``python -m gaml.simulations --seed N``)."""

from __future__ import annotations

import pytest

from gaml.policy.errors import NotFound
from gaml.simulations.replication import Cluster, Spec, check, run


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    return run(1, Spec())


def test_members_converge_and_nothing_leaves_its_boundary(cluster: Cluster) -> None:
    summary = check(cluster)
    net = summary["net"]
    assert net["dropped"] and net["duplicated"] and net["partitioned"], f"seed=1: no faults happened: {net}"
    live = sum(summary[g.name]["live"] for g in cluster.groups)
    deleted = sum(summary[g.name]["deleted"] for g in cluster.groups)
    assert live + deleted + sum(len(v) for v in cluster.local.values()) == 1_000
    assert deleted > 0 and summary["replicas"]["erased"] > 0  # tombstones travelled and erased
    assert summary["replicas"]["carried"] > 0  # the relay carried the subnet's objects


def test_the_checks_fail_on_a_diverged_member_and_name_the_seed(cluster: Cluster) -> None:
    """The checks are not vacuous: one member losing one asset outside replication fails them, with the seed."""
    g = cluster.groups[0]
    victim = cluster.replicas[g.members[-1]].node.store
    id_ = next(i for i in sorted(cluster.written[g.name] - cluster.deleted[g.name]))
    victim.delete(id_, cluster.now())  # behind replication's back (no pump): the member diverges
    with pytest.raises(AssertionError, match=r"seed=1: .* still holds|seed=1: .*holds \d+ live assets"):
        check(cluster)
    with pytest.raises(NotFound):
        victim.get(id_)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_more_seeds(seed: int) -> None:
    check(run(seed, Spec()))


@pytest.mark.slow
def test_the_same_seed_gives_the_same_run() -> None:
    first, second = run(5, Spec(assets=200)), run(5, Spec(assets=200))
    assert first.net.digest() == second.net.digest()
    assert {n: r.state() for n, r in first.replicas.items()} == {n: r.state() for n, r in second.replicas.items()}
