"""A simulation scenario: what the harness (simulations/harness.py) builds and runs, read from a TOML file.

Every field has a meaning in simulated time (seconds) or in counts; unknown keys, wrong types and impossible values
are refused with the field's path (pydantic, ``extra="forbid"``), so a typo in a scenario is an error, not a default.
The shipped scenarios are in ``simulations/scenarios/``; ``python -m simulations run --scenario FILE`` runs one.

A scenario in outline (every table but ``boundaries`` may be left out)::

    name = "enterprise_subnet"
    seconds = 120                 # simulated seconds of workload (after the history, if any)

    [network]                     # faults on every frame, and who is linked to whom
    drop = 0.02                   # probabilities, each in [0, 1)
    delay_ms = [1, 60]
    degree = 6                    # each node links to this many members of each of its boundaries
    stranger_links = 2            # and to this many nodes it shares no boundary with (they must get nothing)

    [[boundaries]]                # `count` boundaries of this shape (devices: one per user)
    name = "acme"
    kind = "subnet"               # devices, subnet or tenant
    members = 12                  # the first is the admin
    relays = 2                    # relays carry ciphertext only

    [workload]                    # counts, at uniformly random times within `seconds`
    assets = 2000

    [[faults]]
    at = 30.0                     # seconds into the workload
    kind = "partition"            # partition, heal, flap, crash, skew

    [adversaries]
    share = 0.3                   # of the members of subnets and tenants: poisoners
    mode = "fresh"

    [checks]
    step_seconds = 5.0            # the safety checks run after every step of this length
    converge_within_seconds = 300.0
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gaml.policy.errors import InvalidInput

Probability = Annotated[float, Field(ge=0.0, lt=1.0)]
Share = Annotated[float, Field(ge=0.0, le=0.5)]
Seconds = Annotated[float, Field(ge=0.0)]
Count = Annotated[int, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Network(_Strict):
    """Faults drawn per frame (simulations/net.py) and the links of the topology."""

    drop: Probability = 0.0
    duplicate: Probability = 0.0
    reorder: Probability = 0.0
    delay_ms: tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]] = (1, 20)
    degree: Annotated[int, Field(ge=1, le=64)] = 6
    stranger_links: Annotated[int, Field(ge=0, le=16)] = 2

    @model_validator(mode="after")
    def _delay_ordered(self) -> Network:
        if self.delay_ms[0] > self.delay_ms[1]:
            raise ValueError(f"delay_ms is [low, high] with low <= high, not {list(self.delay_ms)}")
        return self


class BoundaryShape(_Strict):
    """``count`` boundaries of one kind, each with ``members`` members (the first administers it) and ``relays``.

    ``kind = "public"`` is the public swarm (crdt/swarm.py): one, no admin and no relays; its ``members`` join it
    (each at its own time in the history), and so do all members of the shapes named in ``include``, which keep their
    private memory in their own boundaries (the checks prove it never reaches the swarm)."""

    name: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_-]*$")]
    kind: Literal["devices", "subnet", "tenant", "public"]
    count: Annotated[int, Field(ge=1, le=1000)] = 1
    members: Annotated[int, Field(ge=2, le=1000)]
    relays: Annotated[int, Field(ge=0, le=16)] = 0
    weight: Annotated[float, Field(gt=0.0)] = 1.0  # its share of the puts, relative to the other shapes
    include: list[str] = []  # (public only) shapes whose members join the swarm too

    @model_validator(mode="after")
    def _shape(self) -> BoundaryShape:
        if self.kind == "devices" and self.relays:
            raise ValueError("a user's devices have no relays (relays serve subnets and tenants)")
        if self.kind == "public" and (self.relays or self.count != 1):
            raise ValueError("the public swarm is one boundary, without relays")
        if self.include and self.kind != "public":
            raise ValueError("only the public swarm includes the members of other shapes")
        return self


class Workload(_Strict):
    """What the members do: counts, each event at a uniformly random time within the scenario's seconds."""

    assets: Count = 1000  # puts that replicate
    local_only: Count = 0  # puts that must never leave their writer
    edits: Count = 0  # edits of a live asset on one or two members at once (concurrent edits)
    deletes: Count = 0  # forgets: tombstones that must erase the asset everywhere in its boundary
    removals: Count = 0  # members removed by their admin (they keep trying to sync and write)
    hydrates: Count = 0  # frames hydrated by honest members of boundaries with contested slots
    slots: Annotated[int, Field(ge=1, le=10_000)] = 20  # contested facts (subject, attribute) poisoners target
    history_days: Annotated[int, Field(ge=0, le=3650)] = 0  # days of corroborated history before the workload


class Fault(_Strict):
    """One fault at ``at`` seconds into the workload.

    - ``partition``: the nodes split at random into ``groups`` groups until a ``heal``;
    - ``heal``: the partition ends;
    - ``flap``: ``links`` random links go down for ``for_seconds``, then come back;
    - ``crash``: ``nodes`` random nodes stop (their connections drop, their memory state is lost, their storage is
      kept) and restart after ``for_seconds``;
    - ``skew``: ``nodes`` random nodes' clocks move by up to ± ``skew_seconds`` (for the rest of the run).
    """

    at: Seconds
    kind: Literal["partition", "heal", "flap", "crash", "skew"]
    groups: Annotated[int, Field(ge=2, le=16)] = 2
    links: Count = 0
    nodes: Count = 0
    for_seconds: Seconds = 0.0
    skew_seconds: Seconds = 0.0

    @model_validator(mode="after")
    def _complete(self) -> Fault:
        need = {"flap": ("links", "for_seconds"), "crash": ("nodes", "for_seconds"), "skew": ("nodes", "skew_seconds")}
        for name in need.get(self.kind, ()):
            if not getattr(self, name):
                raise ValueError(f"a {self.kind} fault needs {name} > 0")
        return self


class Adversaries(_Strict):
    """Who attacks. Poisoners are members (admitted as any member, signing validly); the others are members too,
    misbehaving on the wire. Relays are always curious: the checks read every byte they hold."""

    share: Share = 0.0  # of the members of subnets and tenants (not their admins): poisoners
    mode: Literal["fresh", "farming"] = "fresh"  # fresh: admitted at the workload's start; farming: honest, then not
    sybils: Count = 0  # extra identities admitted within one hour of each other, all asserting the poison
    replayers: Count = 0  # members that re-send old frames they received, to anyone they are linked to
    forgers: Count = 0  # members that offer objects signed in another member's name


class Checks(_Strict):
    step_seconds: Annotated[float, Field(gt=0.0, le=3600.0)] = 5.0
    converge_within_seconds: Annotated[float, Field(gt=0.0)] = 600.0
    max_poisoned_frame_share: Annotated[float, Field(ge=0.0, le=1.0)] = 0.05


class Scenario(_Strict):
    name: Annotated[str, Field(min_length=1, max_length=64)]
    description: str = ""
    seconds: Annotated[float, Field(gt=0.0, le=86_400.0)] = 60.0
    strangers: Count = 0  # nodes in no boundary: they must get nothing
    network: Network = Network()
    boundaries: Annotated[list[BoundaryShape], Field(min_length=1)]
    workload: Workload = Workload()
    faults: list[Fault] = []
    adversaries: Adversaries = Adversaries()
    checks: Checks = Checks()

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        names = [b.name for b in self.boundaries]
        if len(set(names)) != len(names):
            raise ValueError(f"boundary names repeat: {names}")
        if sum(b.kind == "public" for b in self.boundaries) > 1:
            raise ValueError("a node is in one public swarm at most: one public shape")
        for b in self.boundaries:
            for inc in b.include:
                if inc not in names or inc == b.name:
                    raise ValueError(f"{b.name} includes {inc!r}, which is not another shape of this scenario")
        for f in self.faults:
            if f.at > self.seconds:
                raise ValueError(f"a {f.kind} fault at {f.at} s is after the workload ends ({self.seconds} s)")
        attacked = self.adversaries.share or self.adversaries.sybils or self.workload.hydrates
        if attacked and not any(b.kind != "devices" for b in self.boundaries):
            raise ValueError("poisoners, sybils and hydrates need a subnet, tenant or public boundary")
        return self

    @property
    def nodes(self) -> int:
        """Every node the scenario builds."""
        members = sum(b.count * (b.members + b.relays) for b in self.boundaries)
        return members + self.strangers + self.adversaries.sybils


def load(path: str | Path) -> Scenario:
    """Read and validate a scenario file; :class:`InvalidInput` names the file and every bad field."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInput(f"no scenario file at {p}") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise InvalidInput(f"{p}: not a readable TOML file: {e}") from None
    return parse(data, str(p))


def parse(data: dict[str, object], where: str = "scenario") -> Scenario:
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or '(top)'}: {err['msg']}" for err in e.errors())
        raise InvalidInput(f"{where}: {problems}") from None


__all__ = ["Adversaries", "BoundaryShape", "Checks", "Fault", "Network", "Scenario", "Workload", "load", "parse"]
