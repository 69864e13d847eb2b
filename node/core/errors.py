"""The node core's errors: what a call to a node can fail with besides the policy and crdt layers' errors.

The daemon and the gRPC client raise them too (node/serve/), and the servicer maps each to its gRPC status.
"""

from __future__ import annotations

from gaml.policy.errors import GamlError


class RateLimited(GamlError):
    """The caller made more calls than its rate limit allows; ``retry_after_s`` says when the next one fits."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TooLarge(GamlError):
    """A request (or an ingest stream) is over the caller's size limit."""


class DeadlineExceeded(GamlError):
    """The call's deadline passed before the node started its work (nothing was done)."""


class Unauthenticated(GamlError):
    """The caller presented no identity this node accepts (or a revoked one)."""


class Unavailable(GamlError):
    """The node is shutting down, or no daemon answers."""
