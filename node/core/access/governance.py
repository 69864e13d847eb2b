"""The node's governance records: known principals, grants, and the owners' access logs. Pure core over the store.

- **Principals** are registered explicitly (``gaml principal add``); a request naming an unknown principal is refused
  before anything is read. Each record is sealed under the node's meta key.
- **Grants** are made by an owner for a grantee (a registered principal or team). Revocation is forward-only: it
  stamps ``revoked_at`` and keeps the grant, so what was read before stays explained.
- **Access log**: every governed read leaves a receipt (who, when, what at which level, by which path, for which
  purpose) in the log of each owner whose memory it returned; only that owner may list it. Receipts are sealed, and
  keyed by a blind of the owner and a sequence number. They are written without an fsync (the WAL still carries
  them across a process crash; a power cut may lose the last ones).
"""

from __future__ import annotations

import dataclasses
import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Final

from gaml.node.core.store.kv import Put, pack, prefix_end
from gaml.node.core.store.store import Store
from gaml.policy.access import Grant, Location, Permission, Principal, PrincipalKind
from gaml.policy.errors import InvalidInput, NotFound, PolicyError, UnknownPrincipal

PRINCIPAL_PREFIX: Final = b"principal/"
GRANT_PREFIX: Final = b"grant/"
LOG_CODE: Final = b"\x01log"


class Governance:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._log_seq: dict[bytes, int] = {}
        # Every read is authorized against its principal and grants, so both are kept opened. This object is their
        # only writer (a store is open in one process), so it keeps them current as it writes them.
        self._principals: dict[str, Principal] = {}
        self._grants: list[Grant] | None = None

    # -- principals -------------------------------------------------------------------------------------------------

    def _principal_key(self, id_: str) -> bytes:
        return PRINCIPAL_PREFIX + self.store.blind(b"P", id_)

    def add_principal(self, p: Principal) -> Principal:
        """Register (or update) a principal. Teams must exist before members name them."""
        for team in sorted(p.teams):
            if self.principal(team).kind is not PrincipalKind.TEAM:
                raise PolicyError(f"{team} is not a team")
        if p.on_behalf_of:
            self.principal(p.on_behalf_of)
        key = self._principal_key(p.id)
        self.store.kv.commit([Put("meta", key, self.store.seal_meta(key, json.dumps(p.to_json()).encode()))])
        self._principals[p.id] = p
        return p

    def principal(self, id_: str) -> Principal:
        cached = self._principals.get(id_)
        if cached is not None:
            return cached
        key = self._principal_key(id_)
        blob = self.store.kv.load("meta", key)
        if blob is None:
            raise UnknownPrincipal(f"unknown principal {id_!r}; register it with `gaml principal add {id_}`")
        p = Principal.from_json(json.loads(self.store.open_meta(key, blob)))
        self._principals[id_] = p
        return p

    def principals(self) -> list[Principal]:
        out = []
        for key, blob in self.store.kv.load_range("meta", PRINCIPAL_PREFIX, prefix_end(PRINCIPAL_PREFIX)):
            out.append(Principal.from_json(json.loads(self.store.open_meta(key, blob))))
        return sorted(out, key=lambda p: p.id)

    # -- grants -----------------------------------------------------------------------------------------------------

    def _grant_key(self, grant_id: str) -> bytes:
        return GRANT_PREFIX + bytes.fromhex(grant_id)

    def _save_grant(self, g: Grant) -> None:
        key = self._grant_key(g.id)
        self.store.kv.commit([Put("meta", key, self.store.seal_meta(key, json.dumps(g.to_json()).encode()))])
        self._grants = None

    def grant(self, g: Grant) -> Grant:
        """Record a grant; owner and grantee must be registered, and a team grantee must be a team."""
        if self.principal(g.owner).kind is PrincipalKind.TEAM:
            raise PolicyError("a team owns no memory to grant")
        self.principal(g.grantee)
        self._save_grant(g)
        return g

    def revoke(self, grant_id: str, by: Principal, now: int) -> Grant:
        """Revoke from ``now`` on; only the grant's owner may. Revoking twice keeps the first time.

        A principal that is neither the grant's owner nor its grantee is answered as for a grant that does not exist."""
        g = self.get_grant(grant_id)
        if by.user != g.owner:
            if g.grantee not in {by.id, by.user, *by.teams}:
                raise NotFound(f"no grant {grant_id}")
            raise PolicyError(f"only {g.owner} may revoke grant {grant_id}")
        if g.revoked_at:
            return g
        revoked = dataclasses.replace(g, revoked_at=now)  # same id: the id names what was granted, not its revocation
        self._save_grant(revoked)
        return revoked

    def get_grant(self, grant_id: str) -> Grant:
        try:
            key = self._grant_key(grant_id)
        except ValueError:
            raise InvalidInput(f"not a grant id: {grant_id!r}") from None
        blob = self.store.kv.load("meta", key)
        if blob is None:
            raise NotFound(f"no grant {grant_id}")
        return Grant.from_json(json.loads(self.store.open_meta(key, blob)))

    def grants(self, *, owner: str | None = None, grantee: str | None = None) -> list[Grant]:
        if self._grants is None:
            every = [
                Grant.from_json(json.loads(self.store.open_meta(key, blob)))
                for key, blob in self.store.kv.load_range("meta", GRANT_PREFIX, prefix_end(GRANT_PREFIX))
            ]
            self._grants = sorted(every, key=lambda g: (g.owner, g.created_at, g.id))
        return [
            g for g in self._grants if (owner is None or g.owner == owner) and (grantee is None or g.grantee == grantee)
        ]

    def grants_for(self, p: Principal) -> list[Grant]:
        """Grants whose grantee is ``p``, the user it acts for, or one of its teams."""
        names = {p.id, p.user, *p.teams}
        return [g for g in self.grants() if g.grantee in names]

    # -- access log -------------------------------------------------------------------------------------------------

    def log_read(
        self,
        p: Principal,
        purpose: Permission,
        location: Location,
        now: int,
        kind: str,
        items: Sequence[tuple[str, dict[str, Any]]],
        *,
        detail: Mapping[str, Any] | None = None,
        private: Mapping[str, Any] | None = None,
    ) -> None:
        """One receipt per owner for a read that returned ``items`` ((owner, item) pairs): one commit, no fsync.

        An owner learns who read which of her items, when, for what purpose, where, at which level and via which
        grant: ``detail`` (a hydration's receipt id and path) goes into every owner's receipt, and each owner sees only
        her own items. What the reader was thinking about — ``private``: a hydration's goal and budget — goes into
        the reader's own receipt only (when the read returned some of its own memory), never into another owner's.
        (A search's text is logged nowhere.) Public memory without an owner leaves no receipt.
        """
        by_owner: dict[str, list[dict[str, Any]]] = {}
        for owner, item in items:
            if owner:
                by_owner.setdefault(owner, []).append(item)
        ops = []
        for owner in sorted(by_owner):
            receipt = {
                "at": now,
                "who": p.id,
                "on_behalf_of": p.on_behalf_of,
                "purpose": purpose.value,
                "location": location.value,
                "kind": kind,
                "read": by_owner[owner],
                **(detail or {}),
                **((private or {}) if owner == p.user else {}),
            }
            prefix = LOG_CODE + self.store.blind(b"A", owner)
            key = prefix + pack(self._next_log_seq(prefix))
            ops.append(Put("access", key, self.store.seal_meta(key, json.dumps(receipt, sort_keys=True).encode())))
        if ops:
            self.store.kv.commit(ops, sync=False)

    def _next_log_seq(self, prefix: bytes) -> int:
        seq = self._log_seq.get(prefix)
        if seq is None:
            last = next(self.store.kv.load_range("access", prefix, prefix_end(prefix), reverse=True, limit=1), None)
            seq = struct.unpack(">Q", last[0][-8:])[0] if last else 0
        self._log_seq[prefix] = seq + 1
        return seq + 1

    def access_log(self, owner: str, by: Principal, *, limit: int | None = None) -> list[dict[str, Any]]:
        """The owner's receipts, newest first. Only the owner (or an agent acting for them) may read them."""
        if by.user != owner:
            raise PolicyError(f"only {owner} may read {owner}'s access log")
        prefix = LOG_CODE + self.store.blind(b"A", owner)
        out = []
        for key, blob in self.store.kv.load_range("access", prefix, prefix_end(prefix), reverse=True, limit=limit):
            out.append(json.loads(self.store.open_meta(key, blob)))
        return out
