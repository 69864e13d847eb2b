"""The command line's errors (node/cli/): failures only a command reports, each with its own exit code."""

from __future__ import annotations

from gaml.policy.errors import StoreError


class PartlyCommitted(StoreError):
    """A failure after part of the work was committed (exit code 4); the message says what was and what was not."""
