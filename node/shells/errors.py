"""The shells' errors (node/shells/): failures of the I/O adapters that they do not turn into another layer's error.

A module of plain classes, not a shell: any shell may import it without importing another shell's library.
"""

from __future__ import annotations


class CurationError(Exception):
    """The endpoint's answer is unusable (wrong shape or empty)."""
