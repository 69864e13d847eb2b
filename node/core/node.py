"""``Node``: the core object the daemon, the CLI and the simulator build. Pure: time comes in as ``now``.

It turns drafts into signed assets (content-derived id, owner, timestamps, key reference), embeds them, writes them
through the store, and answers searches within the partitions a principal may read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gaml.node.core.access.governance import Governance
from gaml.node.core.access.retrieve import Result, Retriever, SearchRequest
from gaml.node.core.embed import Embedder, embed_assets
from gaml.node.core.store.store import Records, Store
from gaml.policy.access import (
    Location,
    Permission,
    Principal,
    Writable,
    authorize_write,
    decide,
    may_know,
)
from gaml.policy.errors import Deleted, InvalidAsset, NotFound, PolicyError, UnknownPrincipal
from gaml.policy.model import Asset, canonical_json, content_id
from gaml.policy.partitions import partition_of
from gaml.policy.redact import redacted_packet

# Fields a draft may not set: the node decides them.
NODE_FIELDS = frozenset({"source_node", "signature", "version", "tombstone", "encryption_key_ref", "heat"})
# Fields that do not make two puts different (a repeated put of the same content is an upsert, not an edit).
VOLATILE_FIELDS = frozenset(
    {"created_at", "updated_at", "source_node", "signature", "version", "tier", "heat", "encryption_key_ref"}
)


def _content(asset: Asset) -> dict[str, Any]:
    d = asset.to_dict()
    for f in VOLATILE_FIELDS:
        d.pop(f, None)
    return d


class Node:
    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self.governance = Governance(store)
        self.retriever = Retriever(store, self.governance, embedder)

    @property
    def node_id(self) -> str:
        return self.store.node_id

    def build(self, draft: Mapping[str, Any], now: int) -> Asset:
        """A validated, unsigned asset from a draft: fills id, created_at and updated_at."""
        fields = dict(draft)
        given = NODE_FIELDS & fields.keys()
        if given:
            raise InvalidAsset(f"the node sets {', '.join(sorted(given))}; leave them out of the draft")
        if "asset_type" not in fields or "payload" not in fields:
            raise InvalidAsset("a draft needs at least asset_type and payload")
        fields.setdefault("owner_id", "")
        fields.setdefault("created_at", now)
        fields.setdefault("updated_at", fields["created_at"])
        derived = content_id(
            fields["asset_type"], fields["owner_id"], fields.get("tenant_scope", ""), fields["payload"]
        )
        if fields.setdefault("id", derived) != derived:
            raise InvalidAsset(
                f"id {fields['id']!r} is not this asset's content id ({derived}); ids are derived, leave it out"
            )
        asset = Asset(**fields)
        self.store.check_payload(asset)
        return asset

    def prepare(self, asset: Asset, *, exact_times: bool = False, records: Records | None = None) -> Asset:
        """The asset as it will be written: against a stored one with the same id, kept (same content) or advanced.

        An edit keeps the stored ``created_at`` and takes the later ``updated_at``, and a put that changes nothing but
        the times is no edit: right for a caller's put. With ``exact_times`` the asset's own times are written, and a
        change of the times alone is an edit: replication writes merged records so, or a member's copy would differ
        from the document every member merged (and from the other members' copies).
        Signing happens in the store's write (``put_many(sign=True)``). ``records``: what the caller already opened
        (see :meth:`put`).
        """
        try:
            old = self.store.get(asset.id, records=records)
        except Deleted:
            raise
        except NotFound:
            old = None
        if old is not None:
            same_times = (old.created_at, old.updated_at) == (asset.created_at, asset.updated_at)
            if _content(old) == _content(asset) and (same_times or not exact_times):
                return old
            if exact_times:
                asset = asset.evolve(version=old.version + 1)
            else:
                asset = asset.evolve(
                    version=old.version + 1,
                    created_at=old.created_at,
                    updated_at=max(asset.updated_at, old.updated_at),
                )
        part = self.store.planned_partition(partition_of(asset), self.embedder.id, self.embedder.dim)
        # A signature of other content (an edit of a stored asset keeps the old one) is void: the write signs anew.
        return asset.evolve(encryption_key_ref=part.key_ref, signature=b"")

    def put(
        self,
        drafts: Sequence[Mapping[str, Any] | Asset],
        now: int,
        *,
        meta: Mapping[bytes, bytes | None] | None = None,
        exact_times: bool = False,
        by: Principal | None = None,
        records: Records | None = None,
        embedder: Embedder | None = None,
    ) -> list[str]:
        """Store drafts (or unsigned assets) as one atomic, durable batch, signed by this node; returns their ids.

        ``by`` is the caller who writes (the service's and the CLI's puts name one, and its write is authorized first:
        :meth:`authorize_writes`); the node's own writes (curation, replication, erasure) name none. An owner this
        node has not seen before is registered as a user principal. ``meta`` records (see :meth:`Store.put_many`)
        commit in the same batch. ``exact_times``: see :meth:`prepare`. ``records``: the stored records the caller
        already opened (the replication accept path checked them): read through, not opened again (:class:`Records`).
        ``embedder``: what embeds the new vectors in place of the node's own, with its id (ingestion's
        :class:`~node.core.embed.Prefetched`, which answers from rows embedded ahead).
        """
        assets = [d if isinstance(d, Asset) else self.build(d, now) for d in drafts]
        owners = self._owners(assets)  # every check before the first write: a refused batch writes nothing
        if by is not None:
            self.authorize_writes(by, assets, owners)
        if records is None:  # the stored records of these ids, read in one call, for prepare and the write alike
            records = Records()
            self.store.get_many([a.id for a in assets], records=records)
        prepared = [self.prepare(a, exact_times=exact_times, records=records) for a in assets]
        todo = [a for a in prepared if not a.signature]  # only an unchanged stored asset comes back signed
        using = self.embedder if embedder is None else embedder
        if using.id != self.embedder.id or using.dim != self.embedder.dim:
            raise ValueError(f"a write embeds with {using.id!r}, not this node's {self.embedder.id!r}")
        vectors = embed_assets(using, todo) if todo else []
        self.store.put_many(todo, vectors, self.embedder.id, self.embedder.dim, sign=True, meta=meta, records=records)
        for p, known in owners.values():  # after the write: a refused batch registers none
            if not known:
                self.governance.add_principal(p)
        return [a.id for a in prepared]

    def _owners(self, assets: Sequence[Writable]) -> dict[str, tuple[Principal, bool]]:
        """The principal of each owner the assets name, and whether it is registered (an unknown owner is checked as
        a principal id now, and registered as a user once the write is done)."""
        return {owner: self.writer(owner) for owner in sorted({a.owner_id for a in assets if a.owner_id})}

    def writer(self, id_: str) -> tuple[Principal, bool]:
        """The registered principal ``id_`` and True, or a new user principal of that id (its id checked) and False:
        who writes when the command line writes as an owner the node has not registered yet."""
        try:
            return self.governance.principal(id_), True
        except UnknownPrincipal:
            return Principal(id_), False

    def authorize_writes(
        self,
        by: Principal,
        targets: Sequence[Writable],
        owners: Mapping[str, tuple[Principal, bool]] | None = None,
    ) -> None:
        """Raise :class:`PolicyError` unless ``by`` may write every target (:func:`policy.access.authorize_write`).

        Nothing is read or written but the governance records, so a refusal changes nothing."""
        owners = self._owners(targets) if owners is None else owners
        for i, a in enumerate(targets):
            owner = owners[a.owner_id][0] if a.owner_id else by
            d = authorize_write(by, owner, a, lambda reader: self.writer(reader)[1])
            if not d.allowed:
                where = f"asset #{i + 1}: " if len(targets) > 1 else ""
                raise PolicyError(f"{where}{d.reason}")

    def put_stream(
        self,
        drafts: Sequence[Mapping[str, Any] | Asset],
        now: int,
        batch: int = 256,
        progress: Callable[[int], None] | None = None,
    ) -> list[str]:
        """Bulk put in batches (each batch atomic); ``progress`` is told how many were stored after each batch."""
        ids: list[str] = []
        for i in range(0, len(drafts), batch):
            chunk = drafts[i : i + batch]
            ids += self.put(chunk, now)
            if progress:
                progress(len(chunk))
        return ids

    def delete(self, id_: str, now: int, *, by: str | None = None) -> Asset:
        """Tombstone an asset. With ``by``, only its owner (or an agent acting for them) may."""
        if by is not None:
            self.require_owner(by, self.store.get(id_, include_deleted=True), "delete", now)
        return self.store.delete(id_, now)

    def require_owner(self, by: str, asset: Asset, action: str, now: int) -> None:
        """Raise unless the registered principal ``by`` is (or acts for) the asset's owner: :class:`NotFound`, as for
        an id that does not exist, when ``by`` may not even know the asset exists (:func:`policy.access.may_know`)."""
        p = self.governance.principal(by)
        if p.user == asset.owner_id:
            return
        if not may_know(p, asset, now, self.governance.grants_for(p)):
            raise NotFound(f"no asset {asset.id}")
        raise PolicyError(f"only {asset.owner_id or 'its owner'} may {action} asset {asset.id}")

    def redact(self, id_: str, by: str, now: int) -> str:
        """Store the redacted packet of an asset (policy.redact), a separately governed derived asset. Owner only."""
        source = self.store.get(id_, include_deleted=True)
        self.require_owner(by, source, "make a redacted packet of", now)
        if source.tombstone:
            raise Deleted(f"asset {id_} was deleted")
        (packet_id,) = self.put([redacted_packet(source, now)], now)
        return packet_id

    def search(
        self,
        text: str,
        principal: str,
        now: int,
        *,
        k: int = 10,
        purpose: Permission = Permission.READ,
        location: Location = Location.THIS_DEVICE,
        trace: bool = False,
        **filters: Any,
    ) -> list[Result]:
        """The governed search: see :mod:`node.retrieve` for its stages. ``filters`` are SearchRequest fields."""
        req = SearchRequest(text, principal, purpose, now, location, k, **filters)
        return self.retriever.search(req, trace=trace).results

    def read(
        self,
        id_: str,
        principal: str,
        now: int,
        *,
        purpose: Permission = Permission.READ,
        location: Location = Location.THIS_DEVICE,
    ) -> Asset:
        """One asset, for a principal: authorized like a search result, and logged in its owner's access log."""
        p = self.governance.principal(principal)
        grants = self.governance.grants_for(p)
        asset = self.store.get(id_, include_deleted=True)
        if not may_know(p, asset, now, grants):
            raise NotFound(f"no asset {id_}")  # exactly as for an id that does not exist: no existence oracle
        if asset.tombstone:
            raise Deleted(f"asset {id_} was deleted")
        d = decide(p, asset, purpose, location, now, grants)
        if not d.allowed:
            raise PolicyError(f"{principal} may not {purpose.value} asset {id_} at {location.value}: {d.reason}")
        item = {"id": asset.id, "level": asset.level.value, "via": d.via}
        self.governance.log_read(p, purpose, location, now, "get", [(asset.owner_id, item)])
        return asset

    def checkpoint(self) -> int:
        return self.store.checkpoint()

    def close(self, *, checkpoint: bool = True) -> None:
        self.retriever.close()
        if checkpoint:
            self.store.checkpoint()
        self.store.close()


def display_text(asset: Asset) -> str:
    """What a person reads for an asset: its payload's ``text``, or the payload as compact JSON."""
    text = asset.payload.get("text")
    return text if isinstance(text, str) else canonical_json(asset.payload)


def whose(owner: str, reader: str) -> str:
    """The label of a line of memory that is not the reader's own: ``[from bob] `` (``[public] `` without an owner),
    so that a frame or a result list never passes another principal's words off as the reader's."""
    if owner == reader:
        return ""
    return f"[from {' '.join(owner.split())[:60]}] " if owner else "[public] "


def hit_json(hit: Result) -> dict[str, Any]:
    return {
        **hit.explain(),
        "owner": hit.asset.owner_id,
        "type": hit.asset.asset_type.value,
        "level": hit.asset.level.value,
        "text": display_text(hit.asset),
    }


__all__ = ["Node", "display_text", "hit_json", "whose"]
