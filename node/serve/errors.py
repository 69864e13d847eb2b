"""The transports' errors (node/serve/): what the gRPC client raises besides the errors the node reports."""

from __future__ import annotations

from gaml.node.core.errors import Unauthenticated, Unavailable


class TlsRefused(Unauthenticated, Unavailable):
    """The mutual-TLS handshake failed (a refused or untrusted certificate): the node answered, and said no."""
