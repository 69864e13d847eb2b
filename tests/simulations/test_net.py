"""The simulated network and clock: seeded faults, partitions, connections, ticks, determinism."""

from __future__ import annotations

import pytest

from gaml.simulations.net import US_PER_MS, US_PER_S, SimClock, SimNetwork


class Echo:
    """An endpoint that records what it gets and answers a frame starting with b"ping" with b"pong" + the rest."""

    def __init__(self) -> None:
        self.got: list[tuple[int, str, bytes]] = []
        self.events: list[str] = []
        self.ticks: list[int] = []

    def connected(self, peer: str, now: int) -> list[tuple[str, bytes]]:
        self.events.append(f"up {peer}")
        return [(peer, b"hi")]

    def received(self, peer: str, frame: bytes, now: int) -> list[tuple[str, bytes]]:
        self.got.append((now, peer, frame))
        return [(peer, b"pong" + frame[4:])] if frame.startswith(b"ping") else []

    def disconnected(self, peer: str) -> None:
        self.events.append(f"down {peer}")

    def tick(self, now: int) -> list[tuple[str, bytes]]:
        self.ticks.append(now)
        return []


def pair(seed: int = 0, **kwargs: object) -> tuple[SimNetwork, Echo, Echo]:
    net = SimNetwork(seed, **kwargs)  # type: ignore[arg-type]
    a, b = Echo(), Echo()
    net.add("a", a)
    net.add("b", b)
    net.connect("a", "b")
    return net, a, b


def frames(e: Echo) -> list[bytes]:
    return [f for _, _, f in e.got]


def test_clock_moves_forward_only() -> None:
    """SimClock advances by a delta or to a time, never backwards."""
    clock = SimClock(10)
    assert clock.advance(5) == 15 and clock.advance_to(12) == 15 and clock.advance_to(40) == 40
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_connect_greets_both_ends_and_frames_arrive_in_order_without_faults() -> None:
    """connect calls connected on both ends; with a fixed delay and no faults, frames arrive in order."""
    net, a, b = pair(delay_us=(3 * US_PER_MS, 3 * US_PER_MS))
    for i in range(5):
        net.send("a", "b", b"ping%d" % i)
    net.run_until_quiet(US_PER_S, quiet_for_us=50 * US_PER_MS)
    assert a.events == ["up b"] and b.events == ["up a"]
    assert frames(b) == [b"hi"] + [b"ping%d" % i for i in range(5)]
    assert frames(a) == [b"hi"] + [b"pong%d" % i for i in range(5)]
    assert all(t % (3 * US_PER_MS) == 0 for t, _, _ in b.got)


def run_faulty(seed: int) -> tuple[SimNetwork, Echo, Echo]:
    net, a, b = pair(seed, drop=0.2, duplicate=0.2, reorder=0.3, delay_us=(1 * US_PER_MS, 30 * US_PER_MS))
    for i in range(300):
        net.send("a", "b", b"ping%03d" % i)
        net.run_for(2 * US_PER_MS)
    net.run_until_quiet(100 * US_PER_S, quiet_for_us=200 * US_PER_MS)
    return net, a, b


def test_the_same_seed_gives_the_same_run_and_another_seed_another() -> None:
    """Drops, duplicates, reordering and delays are drawn from the seed: equal seeds, equal runs."""
    first, a1, b1 = run_faulty(11)
    second, a2, b2 = run_faulty(11)
    third, _, _ = run_faulty(12)
    assert first.digest() == second.digest() and b1.got == b2.got and a1.got == a2.got
    assert first.stats() == second.stats()
    assert third.digest() != first.digest()


def test_faults_happen_at_about_their_rates() -> None:
    """With drop=0.2, duplicate=0.2 and reorder=0.3, frames are lost, doubled and overtaken."""
    net, a, b = run_faulty(5)
    s = net.stats()
    assert 0.12 < s.dropped / s.sent < 0.28 and 0.12 < s.duplicated / s.sent < 0.28
    pings = [f for f in frames(b) if f.startswith(b"ping")]
    assert len(set(pings)) < 300 < len(pings) + s.dropped
    assert len(pings) != len(set(pings))  # duplicates arrived
    assert pings != sorted(pings)  # reordered
    assert s.delivered == len(a.got) + len(b.got)
    assert s.sent == s.delivered + s.dropped - s.duplicated  # nothing else lost: no partition, no disconnect


def test_partition_blocks_and_heal_delivers() -> None:
    """Across a partition nothing arrives (not even frames already in flight); within a group all does; after heal,
    frames go through again."""
    net = SimNetwork(0, delay_us=(5 * US_PER_MS, 5 * US_PER_MS))
    ends = {n: Echo() for n in "abc"}
    for n, e in ends.items():
        net.add(n, e)
    net.connect("a", "b")
    net.connect("a", "c")
    net.run_for(10 * US_PER_MS)
    net.send("a", "b", b"in flight")
    net.partition([["a", "c"], ["b"]])
    net.send("a", "b", b"blocked")
    net.send("a", "c", b"same side")
    net.run_for(100 * US_PER_MS)
    assert frames(ends["b"]) == [b"hi"] and frames(ends["c"])[-1] == b"same side"
    assert net.stats().partitioned == 2
    net.heal()
    net.send("a", "b", b"healed")
    net.run_for(100 * US_PER_MS)
    assert frames(ends["b"]) == [b"hi", b"healed"]


def test_an_endpoint_in_no_group_is_cut_off() -> None:
    """partition() isolates endpoints it does not name."""
    net, a, b = pair()
    net.run_for(50 * US_PER_MS)
    net.partition([["a"]])
    net.send("a", "b", b"x")
    net.send("b", "a", b"y")
    net.run_for(50 * US_PER_MS)
    assert frames(a) == frames(b) == [b"hi"]


def test_disconnect_loses_frames_in_flight_and_never_delivers_them_into_a_new_connection() -> None:
    """Frames sent on a connection die with it; a reconnection starts clean; unconnected sends are counted."""
    net, a, b = pair(delay_us=(10 * US_PER_MS, 10 * US_PER_MS))
    net.run_for(20 * US_PER_MS)
    net.send("a", "b", b"old")
    net.disconnect("a", "b")
    net.connect("a", "b")
    net.send("a", "b", b"new")
    net.run_for(50 * US_PER_MS)
    assert frames(b) == [b"hi", b"hi", b"new"]
    assert a.events == ["up b", "down b", "up b"]
    net.disconnect("a", "b")
    net.send("a", "b", b"nowhere")
    assert net.stats().unconnected == 2
    assert not net.is_connected("a", "b")


def test_ticks_run_on_schedule_in_name_order() -> None:
    """Every tick_us, each endpoint's tick runs, at that exact time (in microseconds)."""
    net, a, b = pair(tick_us=25 * US_PER_MS)
    net.run_until(100 * US_PER_MS)
    assert a.ticks == b.ticks == [25_000, 50_000, 75_000, 100_000]
    assert net.clock.now() == 100 * US_PER_MS


def test_run_until_quiet_reports_quiet_or_timeout() -> None:
    """run_until_quiet is True once nothing moved for quiet_for_us, False if max_time_us comes first."""

    class Chatty(Echo):
        def tick(self, now: int) -> list[tuple[str, bytes]]:
            return [("a", b"chat")]

    net, _, _ = pair()
    assert net.run_until_quiet(10 * US_PER_S, quiet_for_us=500 * US_PER_MS)
    net2 = SimNetwork(0)
    net2.add("a", Echo())
    net2.add("b", Chatty())
    net2.connect("a", "b")
    assert not net2.run_until_quiet(2 * US_PER_S, quiet_for_us=500 * US_PER_MS)
    assert net2.clock.now() >= 2 * US_PER_S


def test_bad_arguments_are_refused() -> None:
    """Probabilities outside [0, 1), inverted delays and unknown endpoints raise ValueError."""
    for kwargs in ({"drop": 1.0}, {"duplicate": -0.1}, {"delay_us": (5_000, 1_000)}, {"tick_us": 0}):
        with pytest.raises(ValueError):
            SimNetwork(0, **kwargs)
    net, _, _ = pair()
    with pytest.raises(ValueError):
        net.connect("a", "zz")
    with pytest.raises(ValueError):
        net.add("a", Echo())
