"""Typed errors: the policy layer's, and :class:`GamlError`, the base of every layer's.

Every failure that a caller can cause (bad input, wrong key, a locked or closed store) raises a subclass of
:class:`GamlError` with a message that says what was wrong and what to do; nothing is written when one is raised.

Each layer defines its error classes in one module of its own, named ``errors.py`` (tests/test_errors.py checks it):
this one, ``crdt/errors.py``, ``node/core/errors.py``, ``node/shells/errors.py``, ``node/serve/errors.py`` and
``node/cli/errors.py``. A layer raises its own errors and those of the layers below it.
"""

from __future__ import annotations


class GamlError(Exception):
    """Base of every error GAML raises on purpose."""


class InvalidAsset(GamlError, ValueError):
    """An asset (or a field of one) does not satisfy the model's rules."""


class InvalidInput(GamlError, ValueError):
    """Input to ingest (a transcript, a chat log, a conversation file, a rules file) is malformed."""


class UnknownEnumValue(InvalidAsset):
    """A field names an enum value that does not exist."""


class PayloadTooLarge(InvalidAsset):
    """The asset's payload is over the configured size limit."""


class PayloadTooDeep(InvalidAsset):
    """The asset's payload nests objects or lists deeper than the model allows (``policy.model.MAX_PAYLOAD_DEPTH``)."""


class BadSignature(GamlError):
    """A signature does not verify against the claimed signer's key."""


class DecryptionFailed(GamlError):
    """A sealed object did not open: a wrong key, or the bytes were altered."""


class WrongKey(DecryptionFailed):
    """The keychain does not hold the keys this store was written with."""


class KeychainError(GamlError):
    """The keychain is missing, locked, unreadable, or has no such key."""


class WrongPassphrase(KeychainError):
    """The passphrase (or unattended key) does not open the keychain."""


class UnsafeFile(GamlError):
    """A file or directory of a node's home is not safe to use (a symlink, another owner, open to others)."""


class StoreError(GamlError):
    """A storage-level failure."""


class StoreClosed(StoreError):
    """An operation was attempted on a closed store."""


class StoreLocked(StoreError):
    """Another process (or another open handle) holds the database lock."""


class StoreCorrupt(StoreError):
    """Stored bytes fail their integrity checks. Never silently reset: restore from a copy or investigate."""


class NotFound(GamlError, KeyError):
    """No asset with that id exists."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable.
        return str(self.args[0]) if self.args else "not found"


class Deleted(NotFound):
    """The asset was deleted: only its tombstone remains."""


class IndexMismatch(GamlError, ValueError):
    """A vector does not fit its partition (another embedder or another dimension)."""


class UnknownPrincipal(GamlError, LookupError):
    """The request names a principal this node does not know."""


class PolicyError(GamlError, ValueError):
    """A request or a grant that is malformed (a missing purpose, a bad filter, a team inside a team …)."""


class RedactionRefused(GamlError, ValueError):
    """The asset may not be turned into a public redacted packet (its policy forbids it, or it is gone)."""
