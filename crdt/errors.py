"""The crdt layer's errors: documents, rosters, sealed objects, sync messages, the sync engine, the p2p transport.

Pure: the libp2p shell (crdt/p2p.py) raises its errors from here, so that callers catch them without importing it.
"""

from __future__ import annotations

from gaml.policy.errors import GamlError, InvalidInput

# -- documents (crdt/doc.py) ---------------------------------------------------------------------------------------


class CorruptDoc(GamlError):
    """Bytes that are not a document of an asset record, or a merge that would make one that is not."""


# -- rosters (crdt/membership.py) ----------------------------------------------------------------------------------


class BadRoster(GamlError):
    """Bytes that are not a roster signed by its boundary's admin: malformed, not canonical, or a bad signature."""


class RosterRefused(InvalidInput):
    """A roster or membership change the rules do not allow (unknown kind or role, a bad node id, a wrong admin…)."""


# -- sealed objects (crdt/objects.py) ------------------------------------------------------------------------------


class BadObject(GamlError):
    """Bytes that are not an object this node can accept: malformed, under an unknown epoch, altered, or forged."""


# -- sync messages and the sync engine (crdt/wire.py, crdt/sync.py) ------------------------------------------------


class BadMessage(GamlError, ValueError):
    """A frame is not a well-formed sync message (truncated, over a limit, unknown version or kind, trailing bytes)."""


class SyncError(GamlError):
    """The engine was misconfigured, or the replica broke its contract (e.g. a log that does not advance)."""


# -- the peer-to-peer transport (crdt/p2p.py) ----------------------------------------------------------------------


class P2PError(GamlError):
    """A failure of the peer-to-peer transport."""


class BadIdentity(P2PError, ValueError):
    """A seed, node id or peer id that is not a GAML (Ed25519) identity."""


class BadAddress(P2PError, ValueError):
    """A multiaddr that cannot be dialed: malformed, or without its ``/p2p/<peer id>`` part."""


class DialFailed(P2PError):
    """No sync stream to the peer came up after every attempt (each attempt's error is chained)."""


class NotConnected(P2PError):
    """There is no sync stream to that peer (never connected, disconnected, or it broke during the write)."""


class FrameTooLarge(P2PError, ValueError):
    """A frame is over the size limit (8 MiB unless configured otherwise)."""


class SendQueueFull(P2PError):
    """``send_nowait`` found that peer's outgoing queue full: the peer reads more slowly than frames are produced."""
