"""A simulated clock and network for driving the real sync engines (crdt/sync.py) from one seed.

Why our own simulator rather than libp2p over loopback: libp2p and trio read the wall clock and schedule in an order
of their own, so a failure could not be replayed. Here every decision (delay, drop, duplicate, reorder) is drawn
from one ``random.Random(seed)`` in a fixed order, time is a counter, and endpoints are called one at a time in a
fixed order, so the same seed gives the same run, frame for frame (:meth:`SimNetwork.digest` pins it). Time is in
microseconds, the unit of ``now`` in the core and the daemon, so the nodes see the times they would see in a real run.

The model (TigerBeetle's packet simulator, FoundationDB's sim2, trio's ``test_dtls``):

- **Connections.** :meth:`SimNetwork.connect` brings a connection up and calls ``connected`` on both ends;
  :meth:`SimNetwork.disconnect` takes it down and calls ``disconnected``. Frames are delivered only over the
  connection they were sent on: one in flight when its connection goes down is lost, never delivered into a later
  connection (as with TCP).
- **Faults per frame**, drawn when it is sent: dropped with probability ``drop``; otherwise delivered after a delay
  drawn uniformly from ``delay_us``, plus (with probability ``reorder``) an extra delay of up to four times the
  longest (and a millisecond), so that later frames overtake it; and with probability ``duplicate`` a second copy with
  its own delay.
- **Partitions.** :meth:`SimNetwork.partition` splits the endpoints into groups; frames between groups are lost (at
  sending and at delivery) while connections stay up, as when a route fails silently. :meth:`SimNetwork.heal` ends
  it. Endpoints in no group are cut off from everyone.
- **Ticks.** Every ``tick_us`` each endpoint's ``tick(now)`` runs, in name order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import random
from collections.abc import Iterable
from typing import Final, Protocol

US_PER_MS: Final = 1_000
US_PER_S: Final = 1_000_000
DEFAULT_DELAY_US: Final = (1 * US_PER_MS, 20 * US_PER_MS)
DEFAULT_TICK_US: Final = 100 * US_PER_MS
_REORDER_EXTRA_US: Final = 1 * US_PER_MS  # a reordered frame waits up to 4 * the longest delay + this much more

Effect = tuple[str, bytes]


class Endpoint(Protocol):
    """What the network drives: the shape of :class:`crdt.sync.Sync` (``now`` in microseconds)."""

    def connected(self, peer: str, now: int) -> list[Effect]: ...

    def received(self, peer: str, frame: bytes, now: int) -> list[Effect]: ...

    def disconnected(self, peer: str) -> None: ...

    def tick(self, now: int) -> list[Effect]: ...


class SimClock:
    """Simulated time in microseconds: an integer that only moves forward when told to."""

    __slots__ = ("_now",)

    def __init__(self, start_us: int = 0) -> None:
        self._now = start_us

    def now(self) -> int:
        """The time, in microseconds."""
        return self._now

    def advance(self, delta_us: int) -> int:
        """Move ``delta_us`` (≥ 0) forward; returns the new time."""
        if delta_us < 0:
            raise ValueError("time does not go backwards")
        self._now += delta_us
        return self._now

    def advance_to(self, when_us: int) -> int:
        """Move forward to ``when_us`` (no-op if it is in the past); returns the new time."""
        self._now = max(self._now, when_us)
        return self._now


@dataclasses.dataclass(frozen=True, slots=True)
class NetStats:
    """What happened to the frames the endpoints sent."""

    sent: int = 0
    delivered: int = 0
    dropped: int = 0  # by the drop probability
    duplicated: int = 0
    partitioned: int = 0  # lost to a partition
    unconnected: int = 0  # sent without a connection, or whose connection went down in flight
    bytes_delivered: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class Delivery:
    """One delivered frame (recorded when ``record=True``)."""

    at: int  # microseconds
    src: str
    dst: str
    frame: bytes


class SimNetwork:
    """Delivers frames between named endpoints in simulated time, with seeded faults. See the module docstring."""

    def __init__(
        self,
        seed: int,
        *,
        drop: float = 0.0,
        duplicate: float = 0.0,
        reorder: float = 0.0,
        delay_us: tuple[int, int] = DEFAULT_DELAY_US,
        tick_us: int = DEFAULT_TICK_US,
        clock: SimClock | None = None,
        record: bool = False,
    ) -> None:
        for name, p in (("drop", drop), ("duplicate", duplicate), ("reorder", reorder)):
            if not 0.0 <= p < 1.0:
                raise ValueError(f"{name} is a probability in [0, 1), not {p}")
        if not 0 <= delay_us[0] <= delay_us[1]:
            raise ValueError(f"delay_us is (lo, hi) with 0 <= lo <= hi, not {delay_us}")
        if tick_us <= 0:
            raise ValueError("tick_us is positive")
        self.seed = seed
        self.clock = clock or SimClock()
        self._rng = random.Random(seed)
        self._drop, self._duplicate, self._reorder, self._delay_us = drop, duplicate, reorder, delay_us
        self._tick_us = tick_us
        self._next_tick = self.clock.now() + tick_us
        self._endpoints: dict[str, Endpoint] = {}
        self._links: dict[frozenset[str], int] = {}  # connection -> incarnation
        self._incarnations = 0
        self._groups: dict[str, int] | None = None
        self._queue: list[tuple[int, int, str, str, int, bytes]] = []  # (at, seq, src, dst, incarnation, frame)
        self._seq = 0
        self._last_activity = self.clock.now()
        self._stats = dict.fromkeys((f.name for f in dataclasses.fields(NetStats)), 0)
        self._digest = hashlib.sha256(f"seed={seed}".encode())
        self.trace: list[Delivery] | None = [] if record else None

    # -- topology --------------------------------------------------------------------------------------------------

    def add(self, name: str, endpoint: Endpoint) -> None:
        if name in self._endpoints:
            raise ValueError(f"endpoint {name!r} exists")
        self._endpoints[name] = endpoint

    def connect(self, a: str, b: str) -> None:
        """Bring up a connection between ``a`` and ``b`` (a new one if one was up) and tell both ends."""
        if a == b or a not in self._endpoints or b not in self._endpoints:
            raise ValueError(f"cannot connect {a!r} and {b!r}")
        self._incarnations += 1
        self._links[frozenset((a, b))] = self._incarnations
        now = self.clock.now()
        self._route(a, self._endpoints[a].connected(b, now))
        self._route(b, self._endpoints[b].connected(a, now))

    def disconnect(self, a: str, b: str) -> None:
        """Take the connection down (frames in flight on it are lost) and tell both ends."""
        if self._links.pop(frozenset((a, b)), None) is not None:
            self._endpoints[a].disconnected(b)
            self._endpoints[b].disconnected(a)

    def is_connected(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self._links

    def partition(self, groups: Iterable[Iterable[str]]) -> None:
        """Only endpoints in the same group reach each other until :meth:`heal`."""
        self._groups = {name: i for i, group in enumerate(groups) for name in group}

    def heal(self) -> None:
        self._groups = None

    def _reachable(self, a: str, b: str) -> bool:
        if self._groups is None:
            return True
        ga, gb = self._groups.get(a), self._groups.get(b)
        return ga is not None and ga == gb

    # -- frames ----------------------------------------------------------------------------------------------------

    def send(self, src: str, dst: str, frame: bytes) -> None:
        """Put a frame from ``src`` to ``dst`` on the wire, with this network's faults."""
        self._bump("sent")
        self._last_activity = self.clock.now()
        incarnation = self._links.get(frozenset((src, dst)))
        if incarnation is None:
            self._bump("unconnected")
            return
        if not self._reachable(src, dst):
            self._bump("partitioned")
            return
        if self._rng.random() < self._drop:
            self._bump("dropped")
            return
        copies = 1
        if self._rng.random() < self._duplicate:
            copies = 2
            self._bump("duplicated")
        for _ in range(copies):
            at = self.clock.now() + self._rng.randint(*self._delay_us)
            if self._rng.random() < self._reorder:
                at += self._rng.randint(0, 4 * self._delay_us[1] + _REORDER_EXTRA_US)
            self._seq += 1
            heapq.heappush(self._queue, (at, self._seq, src, dst, incarnation, frame))

    def _route(self, src: str, effects: list[Effect]) -> None:
        for dst, frame in effects:
            self.send(src, dst, frame)

    def _deliver_next(self) -> None:
        at, _, src, dst, incarnation, frame = heapq.heappop(self._queue)
        self.clock.advance_to(at)
        if self._links.get(frozenset((src, dst))) != incarnation:
            self._bump("unconnected")
            return
        if not self._reachable(src, dst):
            self._bump("partitioned")
            return
        self._bump("delivered")
        self._bump("bytes_delivered", len(frame))
        self._last_activity = at
        self._digest.update(f"{at} {src} {dst} {len(frame)} ".encode() + frame)
        if self.trace is not None:
            self.trace.append(Delivery(at, src, dst, frame))
        self._route(dst, self._endpoints[dst].received(src, frame, at))

    def _tick_all(self) -> None:
        now = self.clock.advance_to(self._next_tick)
        self._next_tick += self._tick_us
        for name in sorted(self._endpoints):
            self._route(name, self._endpoints[name].tick(now))

    # -- running ---------------------------------------------------------------------------------------------------

    def step(self) -> None:
        """Process the next event: the earliest frame, or the next tick (frames first on a tie)."""
        if self._queue and self._queue[0][0] <= self._next_tick:
            self._deliver_next()
        else:
            self._tick_all()

    def run_until(self, when_us: int) -> None:
        """Process every event up to time ``when_us``; the clock ends at ``when_us``."""
        while min(self._next_tick, self._queue[0][0] if self._queue else self._next_tick) <= when_us:
            self.step()
        self.clock.advance_to(when_us)

    def skip_to(self, when_us: int) -> None:
        """Jump an idle network's clock to ``when_us`` (nothing in flight; the ticks in between are not run), for
        worlds that live over months of simulated time and talk only now and then."""
        if self._queue:
            raise ValueError("frames are in flight: run the network before skipping time")
        self.clock.advance_to(when_us)
        self._next_tick = max(self._next_tick, self.clock.now() + self._tick_us)

    def run_for(self, duration_us: int) -> None:
        self.run_until(self.clock.now() + duration_us)

    def run_until_quiet(self, max_time_us: int, quiet_for_us: int = 10 * DEFAULT_TICK_US) -> bool:
        """Run until nothing is in flight and no endpoint has sent anything for ``quiet_for_us`` (counted from this
        call at the earliest): True; or until the clock passes ``max_time_us``: False. Choose ``quiet_for_us`` above
        the engines' retry interval, or a pause before a retry looks like quiet."""
        since = self.clock.now()
        while self.clock.now() <= max_time_us:
            if not self._queue and self.clock.now() - max(since, self._last_activity) >= quiet_for_us:
                return True
            self.step()
        return False

    # -- observation -----------------------------------------------------------------------------------------------

    def stats(self) -> NetStats:
        return NetStats(**self._stats)

    def digest(self) -> str:
        """A digest of every delivery so far (time, endpoints, bytes): equal for equal seeds and workloads."""
        return self._digest.copy().hexdigest()

    def _bump(self, counter: str, by: int = 1) -> None:
        self._stats[counter] += by
