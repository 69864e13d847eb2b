"""Tiers: hot, warm and cold, from heat. A storage and access signal, kept apart from relevance scoring.

Heat is a number that decays with a half-life and rises with each visit by the visit's *depth* (reading an item
verbatim counts more than meeting its skeleton). An item's effective heat adds its own recency (a new item starts at
1.0 and cools like a visit would), so fresh memory is hot without having been read.

- **Promotion by heat**: effective heat ≥ ``hot_at`` → hot, ≥ ``warm_at`` → warm, else cold.
- **Promotion by consolidation**: a rare but critical item rises without being visited: constraints, policies, goals,
  anything tagged ``remember`` or ``pinned``, and every L3 skeleton (the cheapest rung, kept at hand) are at least
  warm, and hot while their recency lasts.
- **Demotion** by decay (above) and by ``forget_after`` (per level: after that long without a visit an item is cold
  whatever its type; 0 = never).
- **Retention** per level (``retention_days``): L0 verbatim is kept long by default, L1–L3 indefinitely (0). An L0 item
  past its retention is *retired* (its verbatim text goes, its derivatives stay); see :mod:`node.ladder`.

Pure: ``now`` comes in; no clock, no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Final

from gaml.node.core.store.views import HEAT_KINDS, STANDING_TAGS
from gaml.policy.errors import InvalidInput, UnknownEnumValue
from gaml.policy.model import Asset, AssetType, Heat, Level, Tier

US_PER_DAY: Final = 86_400 * 1_000_000
# How much one visit at a level adds to heat: reading verbatim is the deepest interaction.
DEPTH: Final[Mapping[Level, float]] = {Level.L0: 1.0, Level.L1: 0.6, Level.L2: 0.4, Level.L3: 0.2}
CRITICAL_TYPES: Final = frozenset({AssetType.CONSTRAINT, AssetType.POLICY, AssetType.GOAL})
CRITICAL_TAGS: Final = STANDING_TAGS  # what a user asked to keep; views' HEAT_KINDS: ingested requests, constraints


@dataclasses.dataclass(frozen=True, slots=True)
class TierPolicy:
    half_life_days: float = 7.0
    hot_at: float = 0.75
    warm_at: float = 0.2
    # Per level, days without a visit after which the item is cold whatever its heat (0: never).
    forget_after_days: Mapping[str, float] = dataclasses.field(
        default_factory=lambda: {"l0": 0.0, "l1": 0.0, "l2": 0.0, "l3": 0.0}
    )
    # Per level, days after creation at which the item is retired (0: kept indefinitely). L0: ten years by default.
    retention_days: Mapping[str, float] = dataclasses.field(
        default_factory=lambda: {"l0": 3650.0, "l1": 0.0, "l2": 0.0, "l3": 0.0}
    )

    def __post_init__(self) -> None:
        for name in ("half_life_days", "hot_at", "warm_at"):
            if not _is_number(getattr(self, name)):
                raise InvalidInput(f"tiers: {name} must be a number")
        if not self.half_life_days > 0:
            raise InvalidInput("tiers: half_life_days must be positive")
        if not 0 < self.warm_at <= self.hot_at:
            raise InvalidInput("tiers: need 0 < warm_at <= hot_at")
        for name in ("forget_after_days", "retention_days"):
            object.__setattr__(self, name, _days_table(name, getattr(self, name)))

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TierPolicy:
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise InvalidInput(f"tiers: unknown setting(s) {', '.join(sorted(unknown))}")
        kw = dict(d)
        for name in ("forget_after_days", "retention_days"):
            if name in kw:
                kw[name] = {**getattr(cls(), name), **_days_table(name, kw[name])}
        try:
            return cls(**kw)
        except TypeError as e:
            raise InvalidInput(f"tiers: {e}") from e

    def to_json(self) -> dict[str, Any]:
        return {
            "half_life_days": self.half_life_days,
            "hot_at": self.hot_at,
            "warm_at": self.warm_at,
            "forget_after_days": dict(self.forget_after_days),
            "retention_days": dict(self.retention_days),
        }

    def decay(self, dt_us: int) -> float:
        """The factor heat keeps after ``dt_us`` microseconds."""
        return 0.5 ** (max(0, dt_us) / (self.half_life_days * US_PER_DAY))

    def retention_us(self, level: Level) -> int:
        return int(self.retention_days.get(level.value, 0.0) * US_PER_DAY)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _days_table(name: str, table: object) -> dict[str, float]:
    """A per-level table of days, keyed by level value (``l0`` … ``l3``, however the caller spelled them)."""
    if not isinstance(table, Mapping):
        raise InvalidInput(f"tiers: {name} must map levels (l0 … l3) to days")
    out: dict[str, float] = {}
    for level, days in table.items():
        try:
            key = Level.parse(level).value
        except UnknownEnumValue:
            raise InvalidInput(f"tiers: {name} names an unknown level {level!r}; levels are l0 … l3") from None
        if not _is_number(days) or days < 0 or not math.isfinite(days):
            raise InvalidInput(f"tiers: {name}.{key} must be a non-negative number of days")
        out[key] = float(days)
    return out


def visit(heat: Heat, level: Level, now: int, policy: TierPolicy) -> Heat:
    """The heat after one visit at ``level`` (the depth of the interaction) at ``now``."""
    score = heat.score * policy.decay(now - heat.last_access) if heat.last_access else heat.score
    return Heat(visits=heat.visits + 1, last_access=max(now, heat.last_access), score=score + DEPTH[level])


def effective_heat(asset: Asset, now: int, policy: TierPolicy) -> float:
    """Visits' heat decayed to ``now``, plus the item's own recency (1.0 when new)."""
    return heat_at(asset.heat, asset.created_at, now, policy)


def heat_at(heat: Heat, created_at: int, now: int, policy: TierPolicy) -> float:
    """:func:`effective_heat` from the parts it reads (a view carries them: no record is opened)."""
    visits = heat.score * policy.decay(now - heat.last_access) if heat.last_access else 0.0
    return visits + policy.decay(now - created_at)


def is_critical(asset: Asset) -> bool:
    """Consolidation: an item that must be able to rise without being visited often."""
    return (
        asset.asset_type in CRITICAL_TYPES
        or bool(CRITICAL_TAGS & set(asset.tags))
        or asset.level is Level.L3
        or bool(HEAT_KINDS.intersection(asset.tags))
    )


def tier_of(asset: Asset, now: int, policy: TierPolicy) -> Tier:
    """The tier an asset belongs in at ``now``."""
    return tier_at(asset.heat, asset.created_at, asset.level, is_critical(asset), now, policy)


def tier_at(heat: Heat, created_at: int, level: Level, critical: bool, now: int, policy: TierPolicy) -> Tier:
    """:func:`tier_of` from the parts it reads (``critical``: :func:`is_critical`)."""
    last_seen = max(heat.last_access, created_at)
    forget_after = policy.forget_after_days.get(level.value, 0.0)
    if forget_after and now - last_seen >= forget_after * US_PER_DAY:
        return Tier.COLD
    h = heat_at(heat, created_at, now, policy)
    tier = Tier.HOT if h >= policy.hot_at else Tier.WARM if h >= policy.warm_at else Tier.COLD
    if tier is Tier.COLD and critical:
        return Tier.WARM
    return tier


def retired(asset: Asset, now: int, policy: TierPolicy) -> bool:
    """Whether the asset is past its level's retention."""
    keep = policy.retention_us(asset.level)
    return bool(keep) and now - asset.created_at >= keep


__all__ = ["DEPTH", "TierPolicy", "effective_heat", "heat_at", "is_critical", "retired", "tier_at", "tier_of", "visit"]
