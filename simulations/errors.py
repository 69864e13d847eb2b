"""The simulations' errors."""

from __future__ import annotations


class InvariantBroken(AssertionError):
    """A safety or liveness check of the scenario harness failed; the message names the seed and the step, from which
    ``python -m simulations run --scenario FILE --seed N`` replays the run."""


__all__ = ["InvariantBroken"]
