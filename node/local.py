"""``LocalMemory``: :class:`gaml.node.core.api.Memory` answered in-process, by the node's service on its store.

What the command line uses when no daemon serves the home (the daemon holds the store while it runs, and then
:class:`gaml.node.serve.client.RemoteMemory` answers instead). It is bound to a caller, the principal ``--as`` names,
and reads its clock for each call. One caller is special, and exists only here: ``None``, the holder of the home's
keys: it puts each asset *as its owner* (``gaml put`` without ``--as``) and lists every grant (``gaml grants``),
and may do nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gaml.node.core.api import (
    VERSION,
    GetOptions,
    GrantOptions,
    Hit,
    HydrateOptions,
    IntentOptions,
    SearchOptions,
    Status,
)
from gaml.node.core.hydrate import Hydration
from gaml.node.core.memory.ladder import ErasureReceipt
from gaml.node.core.service import (
    DEFAULT_LIST_LIMIT,
    NO_PEERS_HERE,
    IngestFile,
    MemoryService,
    Progress,
    not_asked,
    numbered,
)
from gaml.policy.access import Grant, Location, Permission, Principal
from gaml.policy.errors import PolicyError
from gaml.policy.model import Asset, AssetType, Level
from gaml.proto.convert import draft_as_sent

if TYPE_CHECKING:
    from typing_extensions import Unpack


class LocalMemory:
    def __init__(
        self,
        service: MemoryService,
        caller: Principal | None,
        clock_us: Callable[[], int],
        *,
        progress: Progress | None = None,
    ) -> None:
        self.service = service
        self._caller = caller
        self._clock_us = clock_us
        self._progress = progress

    @property
    def caller(self) -> Principal:
        if self._caller is None:
            raise PolicyError("name who acts with --as (a registered principal)")
        return self._caller

    def status(self) -> Status:
        who = self._caller
        st = self.service.status(who)
        return Status(
            version=VERSION,
            principal=who.id if who else "",
            user=who.user if who else "",
            transport="store",
            uptime_seconds=None,
            calls=None,
            **st,
        )

    def user(self) -> str:
        return self._caller.user if self._caller is not None else ""

    def put(self, drafts: Sequence[Mapping[str, Any]], *, check_only: bool = False) -> list[str]:
        fields = numbered(draft_as_sent, drafts)  # as a daemon reads them off the wire
        now = self._clock_us()
        if self._caller is not None:
            return self.service.put(self._caller, fields, now, check_only=check_only)
        return self.service.put_as_owners(fields, now, check_only=check_only)

    def get(self, id_: str, **options: Unpack[GetOptions]) -> Asset:
        o = options
        purpose, location = o.get("purpose", Permission.READ), o.get("location", Location.THIS_DEVICE)
        return self.service.get(
            self.caller, id_, purpose, location, self._clock_us(), include_deleted=o.get("include_deleted", False)
        )

    def search(self, text: str, **options: Unpack[SearchOptions]) -> list[Hit]:
        o = dict(options)
        o.pop("peers", None)  # no daemon, no peers: no hit came from one (nothing to name in its explain)
        results = self.service.search(self.caller, text, self._clock_us(), **o)  # type: ignore[arg-type]
        return [Hit(r.asset, r.explain()) for r in results]

    def hydrate(self, goal: str, budget: int, **options: Unpack[HydrateOptions]) -> Hydration:
        o = dict(options)
        report = None if o.pop("peers", None) is None else not_asked(NO_PEERS_HERE)
        return self.service.hydrate(self.caller, goal, budget, self._clock_us(), **o, peers=report)  # type: ignore[arg-type]

    def ingest(self, files: Sequence[IngestFile], *, curate: bool = True) -> dict[str, Any]:
        return self.service.ingest(self.caller, files, self._clock_us(), curate=curate, progress=self._progress)

    def principals(self) -> list[Principal]:
        return self.service.principals()

    def add_principal(self, principal: Principal) -> Principal:
        return self.service.add_principal(principal)

    def sources(self) -> list[dict[str, Any]]:
        return self.service.sources()

    def curate(self, sources: Sequence[str] = ()) -> dict[str, Any]:
        return self.service.curate(self._clock_us(), sources, progress=self._progress)

    def maintain(self) -> dict[str, Any]:
        return self.service.maintain(self._clock_us())

    def list_own(self, *, types: Sequence[Any] = (), since: int = 0, limit: int = 0) -> list[Asset]:
        kinds = [t if isinstance(t, AssetType) else AssetType.parse(t) for t in types]
        return self.service.list_own(
            self.caller, self._clock_us(), types=kinds, since=since, limit=limit or DEFAULT_LIST_LIMIT
        )

    def remember(
        self, turns: Sequence[Mapping[str, Any]], *, session: str = "", curate: bool = False
    ) -> dict[str, Any]:
        return self.service.remember(self.caller, turns, self._clock_us(), session=session, curate=curate)

    def forget(self, id_: str) -> ErasureReceipt:
        return self.service.forget(self.caller, id_, self._clock_us())

    def grant(self, grantee: str, max_level: Level, **options: Unpack[GrantOptions]) -> Grant:
        return self.service.grant(self.caller, grantee, max_level, self._clock_us(), **options)

    def revoke(self, grant_id: str) -> Grant:
        return self.service.revoke(self.caller, grant_id, self._clock_us())

    def grants(self) -> tuple[list[Grant], list[Grant]]:
        """The caller's (made, held); for the holder of the home's keys (no caller), every grant, as made."""
        if self._caller is None:
            return self.service.all_grants(), []
        return self.service.grants(self._caller)

    def access_log(self, limit: int = 100) -> list[dict[str, Any]]:
        return self.service.access_log(self.caller, limit)

    def conflicts(self, slot: str = "", **options: Unpack[IntentOptions]) -> list[dict[str, Any]]:
        return self.service.conflicts(self.caller, self._clock_us(), slot=slot, **options)

    def reputation(self) -> list[dict[str, Any]]:
        return self.service.reputation(self.caller, self._clock_us())

    def override(self, slot: str, choose: str, *, reason: str = "") -> dict[str, Any]:
        return self.service.override(self.caller, slot, choose, self._clock_us(), reason=reason)


__all__ = ["LocalMemory"]
