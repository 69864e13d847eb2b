"""One interface for a node's memory, in domain types: what a person or an agent asks of a node.

Two implementations answer the same calls with the same types: :class:`gaml.node.local.LocalMemory` (the in-process
:class:`~gaml.node.core.service.MemoryService` on the store, for one principal) and
:class:`gaml.node.serve.client.RemoteMemory` (a running daemon, over gRPC). The command line writes each command once
against :class:`Memory` and picks the implementation; ``tests/contracts/memory.py`` runs one story suite over both,
as Tahoe-LAFS runs one storage contract over every adapter.

The caller is not an argument: each implementation is bound to who is asking (the principal of the socket or the
certificate for a daemon; ``--as`` on the store). Time is the implementation's clock, in microseconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, TypedDict

from gaml.node.core.hydrate import Hydration, Segment
from gaml.node.core.memory.ladder import ErasureReceipt
from gaml.node.core.node import display_text
from gaml.node.core.service import IngestFile, PeerRead
from gaml.policy.access import Grant, Location, Permission, Principal
from gaml.policy.model import Asset, AssetType, Level

if TYPE_CHECKING:
    from typing_extensions import Unpack

VERSION: Final = "0.1.0"  # the node's version, as a daemon reports it (pyproject.toml's; a test pins them equal)


@dataclasses.dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the asset, and how it was found (``explain``: score, path, ranks, boosts, stages)."""

    asset: Asset
    explain: Mapping[str, Any]

    @property
    def id(self) -> str:
        return self.asset.id

    @property
    def score(self) -> float:
        return float(self.explain["score"])

    def row(self) -> dict[str, Any]:
        """The hit as `gaml search --json` prints it: the explanation, whose it is, its type, level and text."""
        return {
            **self.explain,
            "owner": self.asset.owner_id,
            "type": self.asset.asset_type.value,
            "level": self.asset.level.value,
            "text": display_text(self.asset),
        }


@dataclasses.dataclass(frozen=True, slots=True)
class Status:
    """What a node says of itself and of the caller. The same fields whether a daemon answers or the store does;
    ``uptime_seconds`` and ``calls`` are a daemon's (``None`` on the store, where no daemon runs)."""

    node_id: str
    version: str
    principal: str  # who the caller is to this node
    user: str  # whose memory the caller acts for
    transport: str  # store, unix or mtls
    embedder: str
    assets: int
    tombstones: int
    journal_seq: int
    indexed: int
    pending: int
    partitions: Mapping[str, Mapping[str, Any]]  # name -> {index, indexed, pending, embedder, epoch}
    rebuilt_indexes: int  # indexes rebuilt from the journal when the store opened
    replayed_events: int  # journal events replayed into the indexes when the store opened
    uptime_seconds: float | None
    calls: int | None

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["partitions"] = {k: dict(v) for k, v in sorted(self.partitions.items())}
        return d


class GetOptions(TypedDict, total=False):
    purpose: Permission  # default read
    location: Location  # default this_device
    include_deleted: bool  # the tombstone of one of the caller's own assets, once deleted


class SearchOptions(TypedDict, total=False):
    k: int  # default 10, at most 1000
    purpose: Permission  # default read
    location: Location  # default this_device
    mode: str  # hybrid (default), dense or lexical
    as_of: int  # microseconds; 0: now
    types: Sequence[AssetType]
    segments: Sequence[str]
    tags: Sequence[str]
    entities: Sequence[str]
    peers: PeerRead  # ask peers too (a running node's); each hit's explain names the peers that returned it


class HydrateOptions(TypedDict, total=False):
    plane: Sequence[Segment]  # default: one segment over the whole budget
    purpose: Permission  # default context
    location: Location  # default this_device
    mode: str  # auto (default), hybrid, semantic, lexical or recency
    as_of: int
    counter: str  # heuristic (default), cl100k_base or o200k_base
    profile: int  # tokens for the profile at the head of the frame; absent: a tenth of the room, at most 200; 0: none
    peers: PeerRead  # ask peers too (a running node's); the receipt's "peers" declares what they did


class IntentOptions(TypedDict, total=False):
    purpose: Permission  # default read
    location: Location  # default this_device


class GrantOptions(TypedDict, total=False):
    segments: Sequence[str]  # empty: every segment
    tags: Sequence[str]  # empty: any tags
    time_from: int  # on the asset's created_at, microseconds; 0: unbounded
    time_to: int
    expires_at: int  # 0: until revoked


class Memory(Protocol):
    """A node's memory as one principal sees it. Errors are the GAML error classes, the same through every door.
    The options of each call are those of :class:`~gaml.node.core.service.MemoryService`, by the same names."""

    def status(self) -> Status: ...

    def user(self) -> str:
        """Whose memory the caller acts for (its own user; "" for the holder of a home's keys, on the store)."""
        ...

    def put(self, drafts: Sequence[Mapping[str, Any]], *, check_only: bool = False) -> list[str]:
        """Store drafts (JSON objects, as `gaml put` reads them) as one atomic batch; their ids. ``check_only``:
        validate and authorize them, write nothing."""
        ...

    def get(self, id_: str, **options: Unpack[GetOptions]) -> Asset:
        """An asset the caller may read; an unreadable one answers as missing (``NotFound``)."""
        ...

    def search(self, text: str, **options: Unpack[SearchOptions]) -> list[Hit]: ...

    def hydrate(self, goal: str, budget: int, **options: Unpack[HydrateOptions]) -> Hydration: ...

    def ingest(self, files: Sequence[IngestFile], *, curate: bool = True) -> dict[str, Any]:
        """Parse and ingest files into the caller's journal (all parsed before anything is written), then curate
        what changed; the report (counts and ids, never text)."""
        ...

    # The node's administration: its own user (on its daemon's socket) or the holder of its keys (on the store).

    def principals(self) -> list[Principal]: ...

    def add_principal(self, principal: Principal) -> Principal:
        """Register (or update) a principal."""
        ...

    def sources(self) -> list[dict[str, Any]]:
        """The journal's sources with their watermarks (counts, no text)."""
        ...

    def curate(self, sources: Sequence[str] = ()) -> dict[str, Any]:
        """Compile the sources named (default: every one pending) into L1-L3 rungs; the curation report."""
        ...

    def maintain(self) -> dict[str, Any]:
        """Retention expiry, L0 retirement, pending curation, tiers; the upkeep report."""
        ...

    def list_own(self, *, types: Sequence[Any] = (), since: int = 0, limit: int = 0) -> list[Asset]:
        """The caller's own memory (``types``: asset types or their names; ``since``: created from then, in
        microseconds), the newest ``limit`` (0: 1000) oldest first."""
        ...

    def remember(
        self, turns: Sequence[Mapping[str, Any]], *, session: str = "", curate: bool = False
    ) -> dict[str, Any]:
        """Remember one exchange (``{"role", "content"}`` turns: a note, a chat turn, a question and its answer) in
        the caller's journal, as a source of its own: ``{source, ids, …the ingest report}``; ``ids`` are the items
        kept (what :meth:`forget` erases). ``curate``: compile its ladder rungs now rather than at the next upkeep."""
        ...

    def forget(self, id_: str) -> ErasureReceipt: ...

    def grant(self, grantee: str, max_level: Level, **options: Unpack[GrantOptions]) -> Grant: ...

    def revoke(self, grant_id: str) -> Grant: ...

    def grants(self) -> tuple[list[Grant], list[Grant]]:
        """(grants of the caller's memory, grants the caller holds)."""
        ...

    def access_log(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest reads of the caller's memory, newest first."""
        ...

    def conflicts(self, slot: str = "", **options: Unpack[IntentOptions]) -> list[dict[str, Any]]:
        """The contested slots among the memory the caller may use, each as a consensus record (node.core.consensus):
        candidates with their values, sources, weights and scores, and the winner. Empty in no boundary."""
        ...

    def reputation(self) -> list[dict[str, Any]]:
        """Per boundary of which the caller may read some memory, its reputation ledger."""
        ...

    def override(self, slot: str, choose: str, *, reason: str = "") -> dict[str, Any]:
        """Choose a contested slot's value (a value or a candidate's id): ``{override: id, record: …}``."""
        ...


__all__ = [
    "VERSION",
    "GetOptions",
    "GrantOptions",
    "Hit",
    "HydrateOptions",
    "IntentOptions",
    "Memory",
    "PeerRead",
    "SearchOptions",
    "Status",
]
