"""``FileKeychain``: the node's secrets in one sealed file (mode 0600). A shell over ``policy.keychain.Keychain``.

The file holds a JSON header and the sealed map of key references to secrets. The sealing key comes either from a
passphrase stretched by Argon2id (salt and limits in the header), or, for unattended nodes, from a raw 32-byte key
given in the environment (``GAML_KEYCHAIN_KEY``, hex). A wrong passphrase or key raises :class:`WrongPassphrase` and
changes nothing. Every ``put`` rewrites the file atomically and durably before it returns.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from gaml.node.shells.files import write_atomic
from gaml.policy import crypto
from gaml.policy.errors import DecryptionFailed, GamlError, KeychainError, WrongPassphrase

FORMAT = "gaml-keychain-1"


CREDENTIAL_NAME = "gaml-keychain-key"  # the systemd credential holding the keychain's raw key (deploy/systemd/)


class Unlock:
    """How to open a keychain: a passphrase, or a raw 32-byte key."""

    def __init__(self, *, passphrase: str | None = None, key: bytes | None = None) -> None:
        if (passphrase is None) == (key is None):
            raise KeychainError("give a passphrase or a key, not both")
        if key is not None and len(key) != crypto.KEY_BYTES:
            raise KeychainError("an unattended keychain key is 32 bytes (64 hex characters)")
        if passphrase is not None and not passphrase:
            raise KeychainError("the passphrase is empty")
        self.passphrase = passphrase
        self.key = key
        # The key a passphrase stretches to, per KDF setting: a process that opens the keychain again (waiting for
        # a busy home, re-reading after another process added a key) pays for Argon2id once.
        self._derived: dict[str, bytes] = {}

    @classmethod
    def from_env(cls, env: dict[str, str] | os._Environ[str] = os.environ) -> Unlock | None:
        """From the environment, first found: ``GAML_KEYCHAIN_KEY`` (64 hex characters), ``GAML_KEYCHAIN_KEY_FILE``
        (a file holding them: a container's secret), the systemd credential ``gaml-keychain-key``
        (``$CREDENTIALS_DIRECTORY``, ``LoadCredential=``), ``GAML_PASSPHRASE``."""
        path = env.get("GAML_KEYCHAIN_KEY_FILE") or ""
        if not path and env.get("CREDENTIALS_DIRECTORY"):
            cred = os.path.join(env["CREDENTIALS_DIRECTORY"], CREDENTIAL_NAME)
            path = cred if os.path.exists(cred) else ""
        if not env.get("GAML_KEYCHAIN_KEY") and path:
            try:
                with open(path) as f:
                    text = f.read(4096)
            except OSError as e:
                raise KeychainError(f"the keychain key file {path}: {e.strerror or e}") from None
            try:
                return cls(key=bytes.fromhex(text.strip()))
            except ValueError:
                raise KeychainError(f"the keychain key file {path} must hold 64 hex characters") from None
        if env.get("GAML_KEYCHAIN_KEY"):
            try:
                return cls(key=bytes.fromhex(env["GAML_KEYCHAIN_KEY"].strip()))
            except ValueError:
                raise KeychainError("GAML_KEYCHAIN_KEY must be 64 hex characters") from None
        if env.get("GAML_PASSPHRASE"):
            return cls(passphrase=env["GAML_PASSPHRASE"])
        return None

    def _kek(self, kdf: dict[str, Any]) -> bytes:
        if kdf["alg"] == "raw":
            if self.key is None:
                raise WrongPassphrase("this keychain is opened by a raw key (GAML_KEYCHAIN_KEY), not a passphrase")
            return self.key
        if kdf["alg"] == "argon2id":
            # Every setting is checked before the derivation: a tampered header must not crash or stall libsodium.
            crypto.check_argon2_limits(kdf.get("ops"), kdf.get("mem"))
            salt = kdf.get("salt")
            if not isinstance(salt, str) or len(salt) != 2 * crypto.ARGON2_SALT_BYTES:
                raise KeychainError(f"the keychain's Argon2id salt is not {crypto.ARGON2_SALT_BYTES} bytes in hex")
            if self.passphrase is None:
                raise WrongPassphrase("this keychain is opened by a passphrase (GAML_PASSPHRASE), not a raw key")
            memo = f"{salt}/{kdf['ops']}/{kdf['mem']}"
            if memo not in self._derived:
                self._derived[memo] = crypto.passphrase_key(
                    self.passphrase.encode(), bytes.fromhex(salt), kdf["ops"], kdf["mem"]
                )
            return self._derived[memo]
        raise KeychainError(f"unknown keychain KDF {kdf['alg']!r}")


class FileKeychain:
    def __init__(
        self, path: Path, header: dict[str, Any], kek: bytes, secrets: dict[str, bytes], entropy: crypto.Entropy
    ) -> None:
        self.path = path
        self._header = header
        self._kek = kek
        self._secrets = secrets
        self._entropy = entropy

    @classmethod
    def create(cls, path: Path, unlock: Unlock, entropy: crypto.Entropy) -> FileKeychain:
        if path.exists():
            raise KeychainError(f"a keychain already exists at {path}; refusing to overwrite it")
        if unlock.key is not None:
            kdf: dict[str, Any] = {"alg": "raw"}
        else:
            kdf = {
                "alg": "argon2id",
                "salt": entropy.random_bytes(crypto.ARGON2_SALT_BYTES).hex(),
                "ops": crypto.ARGON2_OPSLIMIT,
                "mem": crypto.ARGON2_MEMLIMIT,
            }
        header = {"format": FORMAT, "kdf": kdf}
        kc = cls(path, header, unlock._kek(kdf), {}, entropy)
        kc._save()
        return kc

    @classmethod
    def open(cls, path: Path, unlock: Unlock, entropy: crypto.Entropy) -> FileKeychain:
        try:
            doc = json.loads(path.read_bytes())
            header = {"format": doc["format"], "kdf": doc["kdf"]}
            sealed = base64.b64decode(doc["sealed"])
        except FileNotFoundError:
            raise KeychainError(f"no keychain at {path}; run `gaml init` first") from None
        except (ValueError, KeyError, TypeError) as e:
            raise KeychainError(f"the keychain at {path} is unreadable: {e}") from e
        if not isinstance(header["kdf"], dict) or not isinstance(header["kdf"].get("alg"), str):
            raise KeychainError(f"the keychain at {path} has a damaged header: no KDF")
        if header["format"] != FORMAT:
            raise KeychainError(f"unknown keychain format {header['format']!r}")
        try:
            kek = unlock._kek(header["kdf"])
        except (KeyError, TypeError, ValueError, GamlError) as e:
            if isinstance(e, KeychainError):
                raise
            raise KeychainError(f"the keychain at {path} has a damaged header: {e!r}") from e
        try:
            raw = crypto.open_sealed(kek, sealed, crypto.KEYCHAIN_AAD + json.dumps(header, sort_keys=True).encode())
        except DecryptionFailed:
            raise WrongPassphrase(f"the passphrase or key does not open the keychain at {path}") from None
        secrets = {k: bytes.fromhex(v) for k, v in json.loads(raw).items()}
        return cls(path, header, kek, secrets, entropy)

    def _save(self) -> None:
        raw = json.dumps({k: v.hex() for k, v in sorted(self._secrets.items())}).encode()
        aad = crypto.KEYCHAIN_AAD + json.dumps(self._header, sort_keys=True).encode()
        sealed = crypto.seal(self._kek, raw, aad, self._entropy)
        doc = dict(self._header, sealed=base64.b64encode(sealed).decode())
        write_atomic(self.path, json.dumps(doc, indent=1).encode(), mode=0o600)

    def get(self, ref: str) -> bytes:
        try:
            return self._secrets[ref]
        except KeyError:
            raise KeychainError(f"the keychain has no key {ref!r}") from None

    def put(self, ref: str, secret: bytes) -> None:
        if ref in self._secrets:
            raise KeychainError(f"the keychain already holds {ref!r}; keys are never overwritten")
        self._secrets[ref] = bytes(secret)
        try:
            self._save()
        except BaseException:
            del self._secrets[ref]
            raise

    def refs(self) -> list[str]:
        return sorted(self._secrets)
