"""Where secrets live: the ``Keychain`` interface and its in-memory implementation.

Assets and logs hold key *references* (``encryption_key_ref``), never keys. A keychain maps a reference to its secret
bytes. ``MemoryKeychain`` serves tests and the simulator; the node's file keychain
(``node/shells/file_keychain.py``) keeps the same map sealed on disk under a passphrase-derived or unattended key.
"""

from __future__ import annotations

from typing import Final, Protocol

from gaml.policy.errors import KeychainError

NODE_IDENTITY_REF: Final = "node/identity"  # Ed25519 seed of the node
NODE_MASTER_REF: Final = "node/master"  # root of the node's derived keys (meta sealing, blind indexes)


class Keychain(Protocol):
    def get(self, ref: str) -> bytes:
        """The secret under ``ref``; :class:`KeychainError` if there is none."""
        ...

    def put(self, ref: str, secret: bytes) -> None:
        """Store a new secret durably before returning. Refuses to overwrite an existing reference."""
        ...

    def refs(self) -> list[str]: ...


class MemoryKeychain:
    def __init__(self, secrets: dict[str, bytes] | None = None) -> None:
        self._secrets: dict[str, bytes] = dict(secrets or {})

    def get(self, ref: str) -> bytes:
        try:
            return self._secrets[ref]
        except KeyError:
            raise KeychainError(f"the keychain has no key {ref!r}") from None

    def put(self, ref: str, secret: bytes) -> None:
        if ref in self._secrets:
            raise KeychainError(f"the keychain already holds {ref!r}; keys are never overwritten")
        self._secrets[ref] = bytes(secret)

    def refs(self) -> list[str]:
        return sorted(self._secrets)
