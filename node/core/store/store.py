"""The Cognitive Asset store: one node's durable, encrypted memory. Pure core over ``KV``, ``BlobStore``,
``Keychain``, ``VectorIndex`` and ``Entropy``.

Layout (spaces are RocksDB column families). Asset ids are content hashes, so nothing on disk is keyed by them:
``sid`` is the id under a keyed 16-byte permutation (:class:`policy.crypto.IdCipher`), and partition ids ``pid`` are
keyed hashes of the partition's name.

===========  ==========================================  ===========================================================
space        key                                         value
===========  ==========================================  ===========================================================
assets       sid                                         ``R1`` pid epoch(4) sealed(canonical asset)
index        field(1) blind(value)(16) sid               empty; ``blind`` is a keyed hash, so values stay secret
index        ``T`` created_at(8) sid                     empty (time range)
edges        src rel(1) dst / dst rel|0x80 src (sids)    empty
journal      seq(8)                                      op(1) sid pid version(8); op: put, tombstone, moved out
vectors      pid sid                                     sealed(float32 unit vector)
meta         name                                        sealed descriptors, the key canary
===========  ==========================================  ===========================================================

Every operation is one atomic, synced commit. The vector index of each partition is caught up *behind* the journal
(``catch_up``); until then a search scans the not-yet-indexed tail exactly, so a caller always reads its own writes.
The BM25 postings (``lexical``) and the views are kept in memory, in step with each commit, and are not written per
commit. Snapshots of the indexes (views, postings, vector index) are sealed with their partition's key and record the
journal sequence they cover; on open the store replays the journal past it, and rebuilds an index that is missing or
corrupt from the partition's records and the ``vectors`` space.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Final, NamedTuple

import numpy as np

from gaml.node.core.store.blobs import BlobStore
from gaml.node.core.store.kv import KV, Delete, Op, Put, pack, prefix_end
from gaml.node.core.store.lexical import ANALYZER, LexicalIndex
from gaml.node.core.store.vectors import IndexFactory, VectorIndex, top_k
from gaml.node.core.store.views import PartitionViews, View, collector_paused
from gaml.policy import crypto
from gaml.policy.errors import (
    BadSignature,
    DecryptionFailed,
    Deleted,
    GamlError,
    IndexMismatch,
    InvalidAsset,
    InvalidInput,
    KeychainError,
    NotFound,
    PayloadTooLarge,
    StoreCorrupt,
    WrongKey,
)
from gaml.policy.keychain import NODE_MASTER_REF, Keychain
from gaml.policy.model import EDGE_FIELDS, ID_RE, Asset, Heat, PrivacyScope, Tier, canonical_json
from gaml.policy.partitions import PartitionRef, partition_of

SCHEMA_VERSION: Final = 3  # 3: no BM25 postings in the index space (they live in the snapshots)
SCHEMAS_READ: Final = (2, 3)  # a store of schema 2 is upgraded when it opens (Store._drop_disk_postings)
RECORD_MAGIC: Final = b"R1"
CANARY: Final = b"gaml-canary-v1"
DEFAULT_MAX_PAYLOAD_BYTES: Final = 1 << 20
BLIND_CACHE_MAX: Final = 1 << 16

OP_PUT: Final = b"P"
OP_TOMBSTONE: Final = b"T"
OP_MOVED_OUT: Final = b"M"  # an edit moved the asset to another partition: it leaves this one

# Index field codes (one byte each) and the asset attribute they index.
INDEX_FIELDS: Final[dict[str, bytes]] = {
    "type": b"y",
    "scope": b"s",
    "owner": b"o",
    "tenant": b"n",
    "entity": b"e",
    "goal": b"g",
    "segment": b"m",
    "tag": b"t",
}
TIME_FIELD: Final = b"T"
LOCAL_LOG: Final = b"local/"  # local/ sid -> n: the last local commit that changed the record's heat or tier …
ANALYZER_KEY: Final = b"analyzer"  # the lexical analyzer the postings were made with (:meth:`Store._reanalyze`)
# The BM25 postings and statistics a store of schema 2 kept in the index space, per posting (``L`` pid term sid) and
# per partition (``l`` pid): deleted when it opens (:meth:`Store._drop_disk_postings`), so many per commit.
DISK_POSTINGS: Final = (b"L", b"l")
DISK_POSTINGS_DELETES: Final = 100_000
LOCAL_SEQ: Final = b"localseq"  # … and the number of local commits so far
TOMBSTONES_KEY: Final = b"tombstones"  # how many records are tombstones: written with each one (Store.stats reads it)
USER_META: Final = b"u:"  # meta records of the layers above the store (ingestion watermarks, curation state)
MEMBER_FIELD: Final = b"p"  # p pid sid: the live assets of a partition (an index rebuild starts from them)
SNAPSHOT_FORMAT: Final = 2  # an index snapshot as a sealed stream of parts (1: one sealed blob, still read)
SNAPSHOT_HEAD_MAX: Final = 1 << 20
EDGE_CODES: Final[dict[str, int]] = {name: i for i, name in enumerate(EDGE_FIELDS)}


@dataclasses.dataclass(frozen=True, slots=True)
class Partition:
    pid: bytes
    ref: PartitionRef
    epoch: int
    embedder: str
    dim: int

    @property
    def key_ref(self) -> str:
        return f"partition/{self.pid.hex()}/{self.epoch}"

    def to_json(self) -> bytes:
        return canonical_json(
            {
                "pid": self.pid.hex(),
                "name": self.ref.name,
                "epoch": self.epoch,
                "embedder": self.embedder,
                "dim": self.dim,
            }
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Partition:
        d = json.loads(data)
        return cls(bytes.fromhex(d["pid"]), PartitionRef.parse(d["name"]), d["epoch"], d["embedder"], d["dim"])


class Nearest(NamedTuple):
    """One hit of :meth:`Store.dense_search`: an asset id, its cosine similarity, and what answered."""

    id: str
    score: float
    path: str  # "index" (answered by the partition's vector index) or "tail" (exact scan of not-yet-indexed writes)


@dataclasses.dataclass(frozen=True, slots=True)
class StoreStats:
    assets: int
    tombstones: int
    partitions: dict[str, dict[str, int | str]]
    journal_seq: int
    indexed: int
    pending: int
    rebuilt_indexes: int
    replayed_events: int


@dataclasses.dataclass(slots=True)
class _Live:
    """The in-memory side of one partition: its key, index and the not-yet-indexed tail."""

    part: Partition
    key: bytes = dataclasses.field(repr=False)
    index: VectorIndex = dataclasses.field(repr=False)
    pending: dict[str, np.ndarray] = dataclasses.field(repr=False)
    covered_seq: int = 0
    covered_local: int = 0  # the local-state commits (Store.local_writes) its views hold
    dirty: bool = False
    views: PartitionViews = dataclasses.field(default_factory=PartitionViews, repr=False)
    # A frozen set of ids found to hold every live id of the partition, and the views and epoch it was checked at
    # (see Store._covers): the same set, the views unchanged, needs no second pass over the partition.
    covering: tuple[frozenset[str], PartitionViews, int] | None = dataclasses.field(default=None, repr=False)


class Records:
    """Records opened from one store, kept for what reads them next so that each is opened once: the batch the
    replication accept path checks and then writes (:meth:`Store.put_many`), the frames of a hydrator and the visits
    that record them (:meth:`Store.update_local`).

    It holds records as stored (a tombstone too; None for an id that has no record) at one :attr:`Store.state`. The
    store empties it whenever it meets it at another state, so nothing stale is ever used, and keeps it current through
    the local-state writes made through it. With a ``limit``, it is emptied before a read once it holds more
    records. Like the views, it never decides what a caller may see: only ids already chosen are looked up in it.
    """

    __slots__ = ("assets", "limit", "state")

    def __init__(self, limit: int = 0) -> None:
        self.limit = limit  # 0: no limit
        self.state: tuple[int, int] | None = None
        self.assets: dict[str, Asset | None] = {}

    def __len__(self) -> int:
        return len(self.assets)


# A snapshot read back: its head, then its views, lexical postings and the vector index's parts.
_SnapshotParts = tuple[dict[str, Any], memoryview, bytes, list[memoryview]]


def _buffer(n: int) -> memoryview:
    """A buffer of ``n`` bytes to read a snapshot's part into. A bytearray, not a NumPy array: NumPy asks for huge
    pages for a large array, and once such buffers were freed (hnswlib copies the index out of them), the allocations
    that followed were slow: after a cold start at 1M assets, the first search parsed its postings in 5.0 s instead of
    0.8 (the start itself took as long either way). A negative ``n`` raises ``ValueError`` (bytearray's own)."""
    return memoryview(bytearray(n))


def _legacy_snapshot(raw: bytes) -> _SnapshotParts:
    """A snapshot of the format before (one sealed blob, read whole): the same parts, found by the lengths written
    between them, the vector index as one part."""
    (hl,) = struct.unpack(">I", raw[:4])
    head = json.loads(raw[4 : 4 + hl])
    body = memoryview(raw)[4 + hl :]  # read in place: a copy of a part is a copy of up to gigabytes
    (vl,) = struct.unpack(">Q", body[:8])
    (ll,) = struct.unpack(">Q", body[8 + vl : 16 + vl])
    if ll != head["lexical"]:
        raise ValueError("the lexical part's length is not the head's")
    return head, body[8 : 8 + vl], bytes(body[16 + vl : 16 + vl + ll]), [body[16 + vl + ll :]]


def _check_id(id_: str) -> str:
    if not isinstance(id_, str) or not ID_RE.match(id_):
        raise InvalidAsset(f"not an asset id: {id_!r}")
    return id_


class Store:
    """One node's asset store. Build it with :meth:`open`."""

    def __init__(
        self,
        kv: KV,
        blobs: BlobStore,
        keychain: Keychain,
        identity: crypto.SigningKey,
        index_factory: IndexFactory,
        entropy: crypto.Entropy,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        self.kv = kv
        self.blobs = blobs
        self.keychain = keychain
        self.identity = identity
        self.node_id = identity.public_key.hex()
        self.index_factory = index_factory
        self.entropy = entropy
        if isinstance(max_payload_bytes, bool) or not isinstance(max_payload_bytes, int) or max_payload_bytes <= 0:
            raise InvalidInput(f"max_payload_bytes is {max_payload_bytes!r}; it is a positive whole number of bytes")
        self.max_payload_bytes = max_payload_bytes
        try:
            master = keychain.get(NODE_MASTER_REF)
        except KeychainError as e:
            raise WrongKey(f"the keychain has no node master key: {e}") from e
        self._meta_key = crypto.derive_key(master, crypto.META_KEY_TAG)
        self._blind_key = crypto.derive_key(master, crypto.BLIND_INDEX_TAG)
        self._digest_key = crypto.keyed_hash(self._blind_key, b"views:digest")  # the views' id hashes
        self._pid_key = crypto.derive_key(master, crypto.PARTITION_ID_TAG)
        self._ids = crypto.IdCipher(crypto.derive_key(master, crypto.STORAGE_ID_TAG))
        self._live: dict[bytes, _Live] = {}
        self._by_name: dict[str, bytes] = {}
        self._pid_cache: dict[str, bytes] = {}
        self._blind_cache: dict[bytes, bytes] = {}  # bounded: cleared when it reaches BLIND_CACHE_MAX
        # blind(b"L", term), computed as mac does (the index keeps the one cache of its terms)
        self.lexical = LexicalIndex(
            lambda term: self.mac(b"L", term.encode()), self.id_of, lambda pid: self._texts(pid, self._members(pid))
        )
        self.superseded: dict[str, set[str]] = {}  # id -> the live assets that supersede it
        self.seq = 0
        self.tombstones = 0  # records that are tombstones (TOMBSTONES_KEY): it moves with every erasure
        self.local_writes = 0  # commits of local state (update_local), logged in LOCAL_LOG until a checkpoint
        self.rebuilt_indexes = 0
        self.replayed_events = 0
        self._reanalyzed: set[bytes] = set()  # partitions whose postings are made again for another analyzer …
        self.reanalyzed_assets = 0  # … and the assets whose postings were (those with a word)

    # -- opening ---------------------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        kv: KV,
        blobs: BlobStore,
        keychain: Keychain,
        identity: crypto.SigningKey,
        index_factory: IndexFactory,
        entropy: crypto.Entropy,
        **kw: int,
    ) -> Store:
        store = cls(kv, blobs, keychain, identity, index_factory, entropy, **kw)
        schema = store._check_canary()
        store._load_partitions()
        renamed = store._reanalyze()
        if schema < SCHEMA_VERSION:
            store._drop_disk_postings()
        last = next(kv.load_range("journal", reverse=True, limit=1), None)
        store.seq = struct.unpack(">Q", last[0])[0] if last else 0
        local = kv.load("meta", LOCAL_SEQ)
        store.local_writes = struct.unpack(">Q", local)[0] if local else 0
        store._recover_indexes()
        if renamed:  # every partition's postings are this analyzer's now
            kv.commit([Put("meta", ANALYZER_KEY, ANALYZER.encode())])
        if store.reanalyzed_assets and not store.pending():
            # Sealed now, so that no later open (a command that only reads) makes them again; where vectors wait to be
            # indexed (a rebuild, a crash), a checkpoint would index them all first: the next one seals them.
            store.checkpoint()
        store.tombstones = store._count_tombstones()
        return store

    def _count_tombstones(self) -> int:
        """The tombstones, as the store keeps their count; a store made before it kept one counts its records once
        (every record less the live assets) and keeps the count from then on."""
        kept = self.kv.load("meta", TOMBSTONES_KEY)
        if kept is not None:
            return int(struct.unpack(">Q", kept)[0])
        n = sum(1 for _ in self.kv.load_range("assets")) - sum(len(lv.views) for lv in self._live.values())
        self.kv.commit([Put("meta", TOMBSTONES_KEY, pack(n))])
        return n

    def seal_meta(self, name: bytes, data: bytes) -> bytes:
        return crypto.seal(self._meta_key, data, b"meta:" + name, self.entropy)

    def open_meta(self, name: bytes, blob: bytes) -> bytes:
        return crypto.open_sealed(self._meta_key, blob, b"meta:" + name)

    def _check_canary(self) -> int:
        """Refuse a store this keychain did not make, or of a schema this GAML does not read; returns its schema (a
        new store is made, of this GAML's)."""
        blob = self.kv.load("meta", b"canary")
        if blob is None:
            if next(self.kv.load_range("assets", limit=1), None) is not None:
                raise StoreCorrupt("the store holds assets but no key canary; refusing to guess its keys")
            self.kv.commit(
                [
                    Put("meta", b"canary", self.seal_meta(b"canary", CANARY)),
                    Put("meta", b"schema", str(SCHEMA_VERSION).encode()),
                    Put("meta", ANALYZER_KEY, ANALYZER.encode()),
                    Put("meta", TOMBSTONES_KEY, pack(0)),
                ]
            )
            return SCHEMA_VERSION
        try:
            ok = self.open_meta(b"canary", blob) == CANARY
        except DecryptionFailed:
            ok = False
        if not ok:
            raise WrongKey("this keychain did not create this store (the key canary does not open); use the right home")
        schema = self.kv.load("meta", b"schema")
        if schema not in {str(v).encode() for v in SCHEMAS_READ}:
            raise StoreCorrupt(
                f"unsupported store schema {schema!r}; this node reads schemas {', '.join(map(str, SCHEMAS_READ))}"
            )
        return int(schema)

    def _load_partitions(self) -> None:
        for key, blob in self.kv.load_range("meta", b"partition/", prefix_end(b"partition/")):
            try:
                part = Partition.from_json(self.open_meta(key, blob))
            except DecryptionFailed as e:
                raise StoreCorrupt(f"partition descriptor {key!r} does not open") from e
            pkey = self.keychain.get(part.key_ref)
            self._live[part.pid] = _Live(
                part, pkey, self.index_factory.new(part.dim), {}, 0, views=PartitionViews(self._digest_key)
            )
            self._by_name[part.ref.name] = part.pid

    def _reanalyze(self) -> bool:
        """When the store was made with another lexical analyzer than this GAML's
        (:data:`node.core.store.lexical.ANALYZER`; a store of an earlier GAML may have none named), every partition's
        postings are made again from its records as the store opens (:meth:`_recover_indexes`), not loaded from its
        snapshot. Counted in ``reanalyzed_assets`` (not in ``rebuilt_indexes``, which reports damage or a crash).
        The name is written once they are made. A snapshot names its postings' analyzer too
        (:data:`node.core.store.lexical.SNAPSHOT_MAGIC`), so a crash before the next checkpoint loses nothing: the old
        snapshot's postings are not loaded then either, only made again. Returns whether the name is to be written."""
        if self.kv.load("meta", ANALYZER_KEY) == ANALYZER.encode():
            return False
        self._reanalyzed = set(self._live)
        return True

    def _drop_disk_postings(self) -> None:
        """Upgrade a store of schema 2: delete the postings it wrote with each commit (:data:`DISK_POSTINGS`), now
        that the snapshots and the journal hold them, then name schema 3 (which an older GAML refuses: it would read
        no postings). Nothing reads those keys, so an interrupted run leaves the rest to the next open; once the store
        is of schema 3 no open looks again (a scan of those ranges would walk their tombstones until a compaction)."""
        for prefix in DISK_POSTINGS:
            batch: list[Op] = []
            for key, _ in self.kv.load_range("index", prefix, prefix_end(prefix)):
                batch.append(Delete("index", key))
                if len(batch) == DISK_POSTINGS_DELETES:
                    self.kv.commit(batch)
                    batch = []
            if batch:
                self.kv.commit(batch)
        self.kv.commit([Put("meta", b"schema", str(SCHEMA_VERSION).encode())])

    def _texts(self, pid: bytes, members: Iterable[tuple[bytes, Asset]]) -> Iterator[tuple[bytes, str | None]]:
        """What partition ``pid``'s postings are made from, for its records ``members``: each live asset's text
        (tombstones and assets that moved out have none there)."""
        for sid, a in members:
            yield sid, None if a.tombstone or self.pid_of(partition_of(a)) != pid else a.text()

    def _build_postings(self, pid: bytes, members: Iterable[tuple[bytes, Asset]]) -> None:
        """Make partition ``pid``'s postings from its records ``members``."""
        n = self.lexical.build(pid, self._texts(pid, members))
        if pid in self._reanalyzed:
            self.reanalyzed_assets += n

    def _members(self, pid: bytes) -> Iterator[tuple[bytes, Asset]]:
        """The records a partition lists as its members (tombstones too), each with its storage key."""
        prefix = MEMBER_FIELD + pid
        for key, _ in self.kv.load_range("index", prefix, prefix_end(prefix)):
            sid = key[len(prefix) :]
            blob = self.kv.load("assets", sid)
            if blob is None:
                raise StoreCorrupt(f"partition {self._live[pid].part.ref.name} lists an asset that has no record")
            yield sid, self._open_record(sid, blob)

    def _snapshot_name(self, pid: bytes) -> str:
        return f"index-{pid.hex()}.snap"

    def sid(self, id_: str) -> bytes:
        """The storage key of an asset id."""
        return self._ids.encrypt(bytes.fromhex(id_))

    def id_of(self, sid: bytes) -> str:
        return self._ids.decrypt(sid).hex()

    def _journal_digest(self, seq: int) -> str:
        """A digest of the journal entry at ``seq``, so a snapshot can tell its own journal from a restored one."""
        if seq == 0:
            return ""
        event = self.kv.load("journal", pack(seq))
        return "" if event is None else crypto.keyed_hash(self._meta_key, pack(seq) + event).hex()

    def _load_snapshot(self, live: _Live) -> bool:
        with collector_paused():  # collections walked the views just loaded: 1.2 s for the index at 100k, 0.26 without
            return self._read_snapshot(live)

    def _read_snapshot(self, live: _Live) -> bool:
        pid = live.part.pid
        f = self.blobs.open(self._snapshot_name(pid))
        if f is None:
            return False
        aad = b"index:" + pid + struct.pack(">I", live.part.epoch)
        read: _SnapshotParts | None
        try:
            with f:
                if f.read(len(crypto.STREAM_MAGIC)) == crypto.STREAM_MAGIC:
                    f.seek(0)
                    read = self._stream_snapshot(live, crypto.StreamReader(live.key, f, aad))  # None: stale
                else:  # the format before: one sealed blob
                    f.seek(0)
                    read = _legacy_snapshot(crypto.open_sealed(live.key, f.read(), aad))
                    if not self._snapshot_current(live, read[0]):
                        return False
            if read is None:
                return False
            head, views_part, lexical, index_parts = read
            views = PartitionViews.load(views_part, self._digest_key)
            live.index = self.index_factory.load(index_parts)
            try:
                if pid in self._reanalyzed:  # the snapshot's postings are the earlier analyzer's
                    raise ValueError("postings of another analyzer")
                self.lexical.load(pid, lexical)
            except ValueError:  # postings of another analyzer (or not postings): made from the records
                self._reanalyzed.add(pid)
                self._build_postings(pid, self._members(pid))
                live.dirty = True
            live.views = views
            live.covered_seq = int(head["seq"])
            live.covered_local = int(head["local"])
            return True
        except (GamlError, ValueError, KeyError, TypeError, struct.error, OSError):
            return False

    def _snapshot_current(self, live: _Live, head: dict[str, Any]) -> bool:
        """Whether a snapshot's head fits this partition and this journal. A snapshot newer than the journal, or made
        over another journal (a database restored from a copy), would hide writes from search: such a snapshot is
        stale, and the index is rebuilt."""
        seq = int(head["seq"])
        if head["embedder"] != live.part.embedder or head["dim"] != live.part.dim:
            return False
        return seq <= self.seq and head["journal"] == self._journal_digest(seq)

    def _stream_snapshot(self, live: _Live, reader: crypto.StreamReader) -> _SnapshotParts | None:
        """A snapshot's parts read from its sealed stream, each into a buffer of its own (the index's arrays are not
        copied on the way: hnswlib copies them once, out of these buffers). A stale head stops the read there."""
        (hl,) = struct.unpack(">I", reader.read(4))
        if hl > SNAPSHOT_HEAD_MAX:
            raise ValueError("a snapshot head is too long")
        head = json.loads(reader.read(hl))
        if head.get("format") != SNAPSHOT_FORMAT or not self._snapshot_current(live, head):
            return None
        views = _buffer(int(head["views"]))
        reader.readinto(views)
        lexical = reader.read(int(head["lexical"]))  # kept as it is until a search parses it: bytes of its own
        index_parts = [_buffer(int(n)) for n in head["index"]]
        for part in index_parts:
            reader.readinto(part)
        reader.end()  # every byte authenticated, and nothing cut off, before any part is parsed
        return head, views, lexical, index_parts

    def _recover_indexes(self) -> None:
        """Load sealed snapshots; rebuild missing, corrupt or stale ones; replay the journal past them."""
        for live in self._live.values():
            if not self._load_snapshot(live):
                self._rebuild(live)
        start = min((lv.covered_seq for lv in self._live.values()), default=self.seq)
        for key, event in self.kv.load_range("journal", pack(start + 1)):
            seq = struct.unpack(">Q", key)[0]
            op, sid, pid = event[:1], event[1:17], event[17:33]
            owner = self._live.get(pid)
            if owner is None or seq <= owner.covered_seq:
                continue
            self.replayed_events += 1
            id_ = self.id_of(sid)
            owner.index.remove(id_)
            owner.pending.pop(id_, None)
            owner.views.remove(id_)
            owner.dirty = True
            text = None  # what the partition's postings hold for it now (the journal's last word, on disk)
            if op == OP_PUT:
                vec = self._load_vector(owner, sid)
                if vec is not None:
                    owner.pending[id_] = vec
                blob = self.kv.load("assets", sid)
                current = None if blob is None else self._open_record(sid, blob)
                if current is not None and not current.tombstone and self.pid_of(partition_of(current)) == pid:
                    owner.views.put(View.of(current), current.heat)
                    text = current.text()
            self.lexical.replace(pid, sid, text)
        self._replay_local()
        for live in self._live.values():
            for view in live.views:
                for target in view.supersedes:
                    self.superseded.setdefault(target, set()).add(view.id)

    def _replay_local(self) -> None:
        """Bring the views' local state (heat) up to the records for the local commits after each snapshot: a store
        closed without a checkpoint (a command line that only read) or a crash must not leave a profile stale."""
        for key, value in self.kv.load_range("meta", LOCAL_LOG, prefix_end(LOCAL_LOG)):
            sid, (n,) = key[len(LOCAL_LOG) :], struct.unpack(">Q", value)
            record = self.kv.load("assets", sid)
            if record is None:
                continue
            asset = self._open_record(sid, record)
            live = self._live.get(self.pid_of(partition_of(asset)))
            if live is None or n <= live.covered_local or live.views.get(asset.id) is None:
                continue  # already in its snapshot, or gone since (the journal's replay decided)
            live.views.put(View.of(asset), asset.heat)
            live.dirty = True
        for live in self._live.values():
            live.covered_local = self.local_writes

    def _rebuild(self, live: _Live) -> None:
        """Rebuild a partition's index and views from its records and vectors (the database is the truth)."""
        pid = live.part.pid
        live.index = self.index_factory.new(live.part.dim)
        live.views = PartitionViews(self._digest_key)
        live.pending = {}

        def members() -> Iterator[tuple[bytes, Asset]]:
            for sid, asset in self._members(pid):
                live.views.put(View.of(asset), asset.heat)
                vec = self._load_vector(live, sid)
                if vec is not None:
                    live.pending[asset.id] = vec
                yield sid, asset

        self._build_postings(pid, members())  # the records read once, for the views, vectors and postings
        live.covered_seq = self.seq
        live.covered_local = self.local_writes
        live.dirty = True
        self.rebuilt_indexes += 1

    def _load_vector(self, live: _Live, sid: bytes) -> np.ndarray | None:
        blob = self.kv.load("vectors", live.part.pid + sid)
        if blob is None:
            return None
        id_ = self.id_of(sid)
        try:
            raw = crypto.open_sealed(live.key, blob, self._vector_aad(live.part, bytes.fromhex(id_)))
        except DecryptionFailed as e:
            raise StoreCorrupt(f"the vector of asset {id_} does not open (altered bytes or wrong key)") from e
        return np.frombuffer(raw, dtype=np.float32).copy()

    # -- partitions ------------------------------------------------------------------------------------------------

    def pid_of(self, ref: PartitionRef) -> bytes:
        pid = self._pid_cache.get(ref.name)
        if pid is None:
            pid = self._pid_cache[ref.name] = crypto.keyed_hash(self._pid_key, ref.name.encode())
        return pid

    def planned_partition(self, ref: PartitionRef, embedder: str, dim: int) -> Partition:
        """The partition an asset of ``ref`` goes to: the existing one, or the one a write would create. No effects.

        Raises :class:`IndexMismatch` for vectors another embedder made, or a dimension that is not positive.
        """
        if dim <= 0:
            raise IndexMismatch(f"a vector dimension must be positive, got {dim}")
        pid = self.pid_of(ref)
        live = self._live.get(pid)
        if live is None:
            return Partition(pid, ref, 1, embedder, dim)
        if (live.part.embedder, live.part.dim) != (embedder, dim):
            raise IndexMismatch(
                f"partition {ref.name} is indexed with {live.part.embedder} ({live.part.dim} dims); "
                f"got vectors from {embedder} ({dim} dims). Open the node with its own embedder."
            )
        return live.part

    def ensure_partition(self, ref: PartitionRef, embedder: str, dim: int) -> Partition:
        """The partition for ``ref``, created if it is new: its key goes to the keychain before anything uses it."""
        part = self.planned_partition(ref, embedder, dim)
        if part.pid in self._live:
            return part
        index = self.index_factory.new(dim)  # fails before any effect if the factory refuses the dimension
        try:
            key = self.keychain.get(part.key_ref)  # left by a creation that failed after storing its key: reuse it
        except KeychainError:
            key = self.entropy.random_bytes(crypto.KEY_BYTES)
            self.keychain.put(part.key_ref, key)  # durable before anything is sealed under it
        name = b"partition/" + part.pid
        self.kv.commit([Put("meta", name, self.seal_meta(name, part.to_json()))])
        self._live[part.pid] = _Live(part, key, index, {}, self.seq, views=PartitionViews(self._digest_key))
        self._by_name[ref.name] = part.pid
        self.lexical.build(part.pid, ())  # a new partition's postings start empty: there are no records to read
        return part

    def partitions(self) -> list[Partition]:
        return sorted((lv.part for lv in self._live.values()), key=lambda p: p.ref.name)

    def partition_name(self, pid: bytes) -> str:
        """The name of partition ``pid`` (``scope|boundary``)."""
        return self._live[pid].part.ref.name

    # -- the read side: policy views -------------------------------------------------------------------------------

    def views(self, pid: bytes) -> PartitionViews:
        """The policy views of partition ``pid``'s live assets (what retrieval and hydration decide on before
        anything is ranked or opened). The store's own, kept current by its writes: read them, never change them."""
        return self._live[pid].views

    def view(self, id_: str) -> View | None:
        """The policy view of a live asset, in whichever partition holds it (None: not a live asset). No record is
        read."""
        for live in self._live.values():
            v = live.views.get(id_)
            if v is not None:
                return v
        return None

    def heat(self, id_: str) -> Heat | None:
        """The heat of a live asset as its partition's views keep it (None: not a live asset). No record is read."""
        for live in self._live.values():
            if id_ in live.views.views:
                return live.views.heat_of(id_)
        return None

    @property
    def state(self) -> tuple[int, int]:
        """Where the records stand: the journal position and the local-state commits since the store opened. While
        it is the same, so is every record (what :class:`Records` relies on)."""
        return self.seq, self.local_writes

    # -- records ---------------------------------------------------------------------------------------------------

    @staticmethod
    def _asset_aad(idb: bytes, pid: bytes, epoch: int) -> bytes:
        return b"asset:" + idb + pid + struct.pack(">I", epoch)

    @staticmethod
    def _vector_aad(part: Partition, idb: bytes) -> bytes:
        return b"vector:" + part.pid + idb + struct.pack(">I", part.epoch) + part.embedder.encode()

    def _seal_record(self, asset: Asset, live: _Live) -> bytes:
        idb = bytes.fromhex(asset.id)  # the AAD binds the id itself; the storage key is its permutation
        epoch = struct.pack(">I", live.part.epoch)
        sealed = crypto.seal(
            live.key, asset.canonical_bytes(), self._asset_aad(idb, live.part.pid, live.part.epoch), self.entropy
        )
        return RECORD_MAGIC + live.part.pid + epoch + sealed

    def _open_record(self, sid: bytes, blob: bytes) -> Asset:
        idb = self._ids.decrypt(sid)
        if blob[:2] != RECORD_MAGIC or len(blob) < 22:
            raise StoreCorrupt(f"asset {idb.hex()}: unknown record format")
        pid, (epoch,) = blob[2:18], struct.unpack(">I", blob[18:22])
        live = self._live.get(pid)
        if live is None:
            raise StoreCorrupt(f"asset {idb.hex()}: its partition is unknown to this store")
        key = live.key if epoch == live.part.epoch else self.keychain.get(f"partition/{pid.hex()}/{epoch}")
        try:
            raw = crypto.open_sealed(key, blob[22:], self._asset_aad(idb, pid, epoch))
        except DecryptionFailed as e:
            raise StoreCorrupt(f"asset {idb.hex()}: the record does not open (altered bytes or wrong key)") from e
        asset = Asset.from_canonical(raw, trusted=True)  # validated before it was sealed; authenticated just now
        if asset.id != idb.hex():
            raise StoreCorrupt(f"asset {idb.hex()}: the record holds another id")
        return asset

    def mac(self, code: bytes, data: bytes) -> bytes:
        """A keyed hash of ``data`` for the purpose ``code`` (uncached; :meth:`blind` caches lookups): an identifier
        that nobody without this node's keys can recompute from a guess of what it digests."""
        return crypto.keyed_hash(self._blind_key, code + b"\x00" + data)

    def blind(self, code: bytes, value: str) -> bytes:
        key = code + b"\x00" + value.encode()
        blind = self._blind_cache.get(key)
        if blind is None:
            if len(self._blind_cache) >= BLIND_CACHE_MAX:
                self._blind_cache.clear()
            blind = self._blind_cache[key] = crypto.keyed_hash(self._blind_key, key)
        return blind

    def _index_keys(self, asset: Asset) -> set[bytes]:
        if asset.tombstone:
            return set()
        sid = self.sid(asset.id)
        values: list[tuple[str, str]] = [
            ("type", asset.asset_type.value),
            ("scope", asset.privacy_scope.value),
            ("owner", asset.owner_id),
            ("tenant", asset.tenant_scope),
            ("goal", asset.goal),
            ("segment", asset.segment),
            *(("entity", e) for e in asset.entities),
            *(("tag", t) for t in asset.tags),
        ]
        keys = {INDEX_FIELDS[f] + self.blind(INDEX_FIELDS[f], v) + sid for f, v in values if v}
        keys.add(TIME_FIELD + pack(asset.created_at) + sid)
        keys.add(MEMBER_FIELD + self.pid_of(partition_of(asset)) + sid)
        return keys

    def _edge_keys(self, asset: Asset) -> set[bytes]:
        if asset.tombstone:
            return set()
        src = self.sid(asset.id)
        keys = set()
        for name, code in EDGE_CODES.items():
            for target in getattr(asset, name):
                dst = self.sid(target)
                keys.add(src + bytes([code]) + dst)
                keys.add(dst + bytes([code | 0x80]) + src)
        return keys

    # -- writes ----------------------------------------------------------------------------------------------------

    def sign(self, asset: Asset) -> Asset:
        """The asset signed by this node (``source_node`` set to this node's id)."""
        return asset.signed_by(self.node_id, self.identity.sign)

    def verify(self, asset: Asset) -> None:
        """Raise :class:`BadSignature` unless the asset is signed by the node it names."""
        try:
            pub = bytes.fromhex(asset.source_node)
        except ValueError:
            raise BadSignature(f"asset {asset.id}: source_node is not a node id") from None
        if not asset.signature:
            raise BadSignature(f"asset {asset.id} is not signed")
        try:
            crypto.verify(pub, asset.signing_bytes(), asset.signature)
        except BadSignature as e:
            raise BadSignature(f"asset {asset.id}: bad signature from {asset.source_node[:16]}…") from e

    def check_payload(self, asset: Asset) -> None:
        size = asset.payload_size()
        if size > self.max_payload_bytes:
            raise PayloadTooLarge(f"asset {asset.id}: payload is {size} bytes; the limit is {self.max_payload_bytes}")

    def put_many(
        self,
        assets: Sequence[Asset],
        vectors: Sequence[np.ndarray | None],
        embedder: str,
        dim: int,
        *,
        sign: bool = False,
        meta: Mapping[bytes, bytes | None] | None = None,
        records: Records | None = None,
    ) -> list[bool]:
        """Store assets and their vectors in one atomic, durable commit. All or nothing.

        Assets from elsewhere arrive signed and are verified here, at the store's entry. With ``sign=True`` the
        assets are this node's own writes: the store signs them (as this node) instead, and there is nothing to
        verify. Vectors must be finite; they are stored normalized (a zero vector means "no vector").
        Everything is checked before anything is written (a new partition included).
        Returns, per asset, whether anything changed (a repeated put of the same content is a no-op).
        ``meta`` records (name → plaintext, or None to delete; see :meth:`meta_name`) are sealed and committed in the
        same batch, so a caller's bookkeeping (an ingestion watermark) is atomic with the assets it describes.
        ``records``: what the caller already opened of these ids (the replication accept path): the stored records are
        read through it, not opened again.
        """
        if len(assets) != len(vectors):
            raise InvalidAsset("one vector (or None) per asset")
        for a in assets:
            if not isinstance(a, Asset):
                raise InvalidAsset(f"not an Asset: {type(a).__name__}")
        ids = [a.id for a in assets]
        if len(set(ids)) != len(ids):
            raise InvalidAsset("the same asset id appears twice in one batch")
        if sign:
            assets = [self.sign(a) for a in assets]
        units = [self._unit(a, v, dim) for a, v in zip(assets, vectors, strict=True)]
        for a in assets:
            if a.tombstone:
                raise InvalidAsset(f"asset {a.id}: tombstones are written by delete, not put")
            self.check_payload(a)
            if not sign:
                self.verify(a)
        sids = [self.sid(i) for i in ids]
        olds = self._load_existing(sids) if records is None else self._open_many(ids, records)
        for a, old in zip(assets, olds, strict=True):
            if old is not None:
                self._check_edit(old, a)
        parts = [self.planned_partition(partition_of(a), embedder, dim) for a in assets]
        # Everything is valid: now (and only now) create the partitions this batch needs.
        parts = [self.ensure_partition(p.ref, embedder, dim) for p in parts]

        ops: list[Op] = []
        changed: list[bool] = []
        after: list[tuple[_Live, Asset, np.ndarray | None, _Live | None, Asset | None]] = []
        seq = self.seq
        try:
            for a, sid, vec, old, part in zip(assets, sids, units, olds, parts, strict=True):
                seq = self._put_ops(ops, changed, after, seq, a, sid, vec, old, part)
            if ops or meta:
                self.kv.commit(ops + self._meta_ops(meta or {}))
        except BaseException:
            self.lexical.discard_staged()
            raise
        self.seq = seq  # the journal holds these entries now, whatever follows
        self.lexical.commit_staged()
        if not ops:
            return changed
        for live, asset, vec, old_live, old in after:
            id_ = asset.id
            if old is not None:
                self._forget_view(old_live or live, old)
            if old_live is not None:
                old_live.index.remove(id_)
                old_live.pending.pop(id_, None)
                old_live.dirty = True
            live.index.remove(id_)
            live.pending.pop(id_, None)
            if vec is not None:
                live.pending[id_] = vec
            self._remember_view(live, asset)
            live.dirty = True
        return changed

    def update_local(
        self, changes: Sequence[tuple[str, Tier, Heat]], *, records: Records | None = None, sync: bool = True
    ) -> int:
        """Set the local, unsigned state (tier and heat) of live assets in one commit; returns how many changed.

        Local state is not content: no version, no signature, no journal entry (it does not replicate). The views
        follow (a view carries the heat, for what is hot now). The commit notes which records it changed
        (:data:`LOCAL_LOG`: one entry per record, however often it changes), so that a store reopened before the next
        checkpoint rewrote the snapshots (a crash, or a command that only read) brings those views up to the records;
        a checkpoint clears the notes.
        ``records``: what the caller already opened (a hydrator's frames): the records are read through it, and it
        holds the rewritten ones afterwards, so it stays current.
        ``sync=False``: the commit returns before the disk has it (``KV.commit``), for what a reader's visit records
        (a frame's heat): a process that dies loses nothing, a machine that loses power forgets at most the last
        visits' heat, and the records and their notes stay one atomic batch either way.
        """
        if not changes:
            return 0
        ids = [_check_id(i) for i, _, _ in changes]
        sids = [self.sid(i) for i in ids]
        olds = self._load_existing(sids) if records is None else self._open_many(ids, records)
        ops: list[Op] = []
        written: dict[str, Asset] = {}
        for sid, old, (id_, tier, heat) in zip(sids, olds, changes, strict=True):
            if old is None:
                raise NotFound(f"no asset {id_}")
            if old.tombstone or (old.tier is tier and old.heat == heat):
                continue
            new = old.evolve(tier=tier, heat=heat)  # a stored record is not validated again: its local state changes
            live = self._live[self.pid_of(partition_of(old))]
            ops.append(Put("assets", sid, self._seal_record(new, live)))
            written[id_] = new
        if ops:
            n = self.local_writes + 1
            ops += [Put("meta", LOCAL_LOG + self.sid(i), pack(n)) for i in written]  # one entry per record, at most
            ops.append(Put("meta", LOCAL_SEQ, pack(n)))
            self.kv.commit(ops, sync=sync)
            self.local_writes = n
            for new in written.values():
                live = self._live[self.pid_of(partition_of(new))]
                live.views.reheat(new.id, new.heat)  # only local state changed: the view's heat
                live.dirty = True
            if records is not None:  # it was at the state before this commit (read through just now): move it on
                records.assets.update(written)
                records.state = self.state
        return len(written)

    # -- sealed bookkeeping records (meta space) -------------------------------------------------------------------

    def meta_name(self, kind: str, key: str) -> bytes:
        """The meta-space name of a caller's record: ``kind`` in the clear, ``key`` blinded (no source id on disk)."""
        if not kind.isalnum() or not kind.isascii():
            raise InvalidAsset(f"meta kind {kind!r} must be ASCII letters and digits")
        return USER_META + kind.encode() + b":" + self.blind(b"u" + kind.encode(), key)

    def read_meta(self, name: bytes) -> bytes | None:
        blob = self.kv.load("meta", name)
        return None if blob is None else self.open_meta(name, blob)

    def write_meta(self, entries: Mapping[bytes, bytes | None]) -> None:
        """Seal and write (or, for None, delete) meta records in one commit."""
        if entries:
            self.kv.commit(self._meta_ops(entries))

    def scan_meta(self, kind: str) -> Iterator[tuple[bytes, bytes]]:
        """Every record of one kind: (name, plaintext)."""
        prefix = USER_META + kind.encode() + b":"
        for name, blob in self.kv.load_range("meta", prefix, prefix_end(prefix)):
            yield name, self.open_meta(name, blob)

    def _meta_ops(self, entries: Mapping[bytes, bytes | None]) -> list[Op]:
        ops: list[Op] = []
        for name, data in sorted(entries.items()):
            if not name.startswith(USER_META):
                raise InvalidAsset("meta records are named by Store.meta_name")
            ops.append(Delete("meta", name) if data is None else Put("meta", name, self.seal_meta(name, data)))
        return ops

    def _remember_view(self, live: _Live, asset: Asset) -> None:
        live.views.put(View.of(asset), asset.heat)
        for target in asset.supersedes:
            self.superseded.setdefault(target, set()).add(asset.id)

    def _forget_view(self, live: _Live, asset: Asset) -> None:
        live.views.remove(asset.id)
        for target in asset.supersedes:
            by = self.superseded.get(target)
            if by is not None:
                by.discard(asset.id)
                if not by:
                    del self.superseded[target]

    def _put_ops(
        self,
        ops: list[Op],
        changed: list[bool],
        after: list[tuple[_Live, Asset, np.ndarray | None, _Live | None, Asset | None]],
        seq: int,
        a: Asset,
        sid: bytes,
        vec: np.ndarray | None,
        old: Asset | None,
        part: Partition,
    ) -> int:
        """Append the ops of one asset's write; returns the journal sequence it reached."""
        if old is not None and old.signing_bytes() == a.signing_bytes():
            changed.append(False)
            return seq
        changed.append(True)
        live = self._live[part.pid]
        old_live = None
        if old is not None:
            old_pid = self.pid_of(partition_of(old))
            if old_pid != part.pid:  # the edit moves the asset: it leaves the old partition, in the journal too
                old_live = self._live[old_pid]
                seq += 1
                ops.append(Delete("vectors", old_pid + sid))
                ops.append(Put("journal", pack(seq), OP_MOVED_OUT + sid + old_pid + pack(a.version)))
                self.lexical.stage(old_pid, sid, None)
                self.lexical.stage(part.pid, sid, a.text())
            elif (text := a.text()) != old.text():
                self.lexical.stage(part.pid, sid, text)
        else:
            self.lexical.stage(part.pid, sid, a.text())
        ops.extend(self._diff_ops(old, a))
        ops.append(Put("assets", sid, self._seal_record(a, live)))
        if vec is not None:
            aad = self._vector_aad(part, bytes.fromhex(a.id))
            ops.append(Put("vectors", part.pid + sid, crypto.seal(live.key, vec.tobytes(), aad, self.entropy)))
        elif old is not None:
            ops.append(Delete("vectors", part.pid + sid))
        seq += 1
        ops.append(Put("journal", pack(seq), OP_PUT + sid + part.pid + pack(a.version)))
        after.append((live, a, vec, old_live, old))
        return seq

    @staticmethod
    def _unit(asset: Asset, vector: np.ndarray | None, dim: int) -> np.ndarray | None:
        """The asset's vector as a finite float32 unit vector (None when there is none or it is zero)."""
        if vector is None:
            return None
        v = np.asarray(vector, dtype=np.float32)
        if v.shape != (dim,):
            raise IndexMismatch(f"asset {asset.id}: vector of shape {v.shape}, expected ({dim},)")
        if not np.all(np.isfinite(v)):
            raise IndexMismatch(f"asset {asset.id}: the vector has non-finite values")
        norm = float(np.linalg.norm(v))
        if norm == 0.0:
            return None
        return v if abs(norm - 1.0) < 1e-4 else (v / norm).astype(np.float32)

    @staticmethod
    def check_identity(old: Asset, new: Asset) -> None:
        """InvalidAsset unless ``new`` keeps ``old``'s owner, tenant and type (what no edit may change)."""
        if (old.owner_id, old.tenant_scope, old.asset_type) != (new.owner_id, new.tenant_scope, new.asset_type):
            raise InvalidAsset(
                f"asset {new.id} belongs to owner {old.owner_id!r} (tenant {old.tenant_scope!r}, type "
                f"{old.asset_type.value}); an edit cannot change its owner, tenant or type"
            )

    @staticmethod
    def _check_edit(old: Asset, new: Asset) -> None:
        """An asset stored under an existing id must be an edit of it: same owner and tenant, a newer version."""
        if old.tombstone:
            raise Deleted(f"asset {new.id} was deleted; a deleted id is not reused")
        if old.signing_bytes() == new.signing_bytes():
            return
        Store.check_identity(old, new)
        if new.version <= old.version:
            raise InvalidAsset(
                f"asset {new.id}: an edit must advance the version (stored {old.version}, got {new.version})"
            )

    def _diff_ops(self, old: Asset | None, new: Asset) -> list[Op]:
        ops: list[Op] = []
        for space, keys in (("index", self._index_keys), ("edges", self._edge_keys)):
            now = keys(new)
            if old is None:
                ops += [Put(space, k, b"") for k in sorted(now)]
                continue
            before = keys(old)
            ops += [Delete(space, k) for k in sorted(before - now)]
            ops += [Put(space, k, b"") for k in sorted(now - before)]  # sorted: the same ops on every run
        return ops

    def _load_existing(self, sids: Sequence[bytes]) -> list[Asset | None]:
        blobs = self.kv.load_many("assets", sids)
        return [None if b is None else self._open_record(i, b) for i, b in zip(sids, blobs, strict=True)]

    def delete(self, id_: str, now: int) -> Asset:
        """Tombstone an asset: its payload, vector, index entries and edges go; a signed tombstone stays."""
        sid = self.sid(_check_id(id_))
        (old,) = self._load_existing([sid])
        if old is None:
            raise NotFound(f"no asset {id_}")
        if old.tombstone:
            return old
        tomb = self.sign(
            old.replace(
                payload={},
                entities=(),
                tags=(),
                goal="",
                segment="",
                references=(),
                supports=(),
                contradicts=(),
                supersedes=(),
                derived_from=(),
                embedding_refs=(),
                source=None,
                tombstone=True,
                version=old.version + 1,
                updated_at=max(now, old.updated_at),
            )
        )
        pid = self.pid_of(partition_of(old))
        live = self._live[pid]
        seq = self.seq + 1
        try:
            self.lexical.stage(pid, sid, None)
            ops = self._diff_ops(old, tomb)
            ops += [
                Put("assets", sid, self._seal_record(tomb, live)),
                Delete("vectors", pid + sid),
                Put("journal", pack(seq), OP_TOMBSTONE + sid + pid + pack(tomb.version)),
                Put("meta", TOMBSTONES_KEY, pack(self.tombstones + 1)),
            ]
            self.kv.commit(ops)
        except BaseException:
            self.lexical.discard_staged()
            raise
        self.seq = seq  # the journal holds this entry now, whatever follows
        self.tombstones += 1
        self.lexical.commit_staged()
        live.index.remove(id_)
        live.pending.pop(id_, None)
        self._forget_view(live, old)
        live.dirty = True
        return tomb

    # -- reads -----------------------------------------------------------------------------------------------------

    def get(self, id_: str, *, include_deleted: bool = False, records: Records | None = None) -> Asset:
        """One asset (NotFound, or Deleted unless ``include_deleted``); read through ``records`` when given."""
        if records is not None:
            (asset,) = self._open_many([id_], records)
        else:
            sid = self.sid(_check_id(id_))
            blob = self.kv.load("assets", sid)
            asset = None if blob is None else self._open_record(sid, blob)
        if asset is None:
            raise NotFound(f"no asset {id_}")
        if asset.tombstone and not include_deleted:
            raise Deleted(f"asset {id_} was deleted")
        return asset

    def get_many(self, ids: Sequence[str], *, records: Records | None = None) -> list[Asset | None]:
        """The live assets for ``ids`` in order (None for missing or deleted ones); read through ``records`` when
        given."""
        found = self._open_many(ids, records)
        return [a if a is not None and not a.tombstone else None for a in found]

    def _open_many(self, ids: Sequence[str], records: Records | None) -> list[Asset | None]:
        """The records of ``ids`` as stored (tombstones too; None: no record), each opened at most once per state
        of the store when ``records`` keeps them."""
        if records is None:
            return self._load_existing([self.sid(_check_id(i)) for i in ids])
        if records.state != self.state or (records.limit and len(records.assets) > records.limit):
            records.assets.clear()
            records.state = self.state
        held = records.assets
        todo = [i for i in dict.fromkeys(ids) if i not in held]
        if todo:
            held.update(zip(todo, self._load_existing([self.sid(_check_id(i)) for i in todo]), strict=True))
        return [held[i] for i in ids]

    def list_ids(self, field: str, value: str, *, limit: int | None = None) -> list[str]:
        """Ids of live assets whose ``field`` (type, scope, owner, tenant, entity, goal, segment, tag) is ``value``."""
        code = INDEX_FIELDS.get(field)
        if code is None:
            raise InvalidAsset(f"cannot list by {field!r}; fields are {', '.join(INDEX_FIELDS)} and time")
        prefix = code + self.blind(code, value)
        return [self.id_of(k[17:]) for k, _ in self.kv.load_range("index", prefix, prefix_end(prefix), limit=limit)]

    def list_time(self, start: int, end: int, *, limit: int | None = None) -> list[str]:
        """Ids of live assets created in ``[start, end)`` (microseconds), oldest first."""
        lo, hi = TIME_FIELD + pack(start), TIME_FIELD + pack(end)
        return [self.id_of(k[9:]) for k, _ in self.kv.load_range("index", lo, hi, limit=limit)]

    def edges(self, id_: str, *, reverse: bool = False) -> list[tuple[str, str]]:
        """(relation, other id) pairs: outgoing edges, or with ``reverse`` the incoming ones."""
        sid = self.sid(_check_id(id_))
        names = {code: name for name, code in EDGE_CODES.items()}
        out = []
        for k, _ in self.kv.load_range("edges", sid, prefix_end(sid)):
            code = k[16]
            if bool(code & 0x80) == reverse:
                out.append((names[code & 0x7F], self.id_of(k[17:])))
        return sorted(out)

    def dense_search(self, pid: bytes, q: np.ndarray, k: int, allowed: AbstractSet[str] | None = None) -> list[Nearest]:
        """The ``k`` nearest live assets of one partition to ``q``, best first (ties by id): its vector index and the
        exact scan of its not-yet-indexed tail, so a caller always reads its own writes. The one dense search.

        With ``allowed``, only those ids are ever scored: authorization happened before this call (retrieval passes
        the ids a caller may use), and no other partition's index or tail is touched. None: every live asset.
        """
        if k <= 0:
            return []
        live = self._live[pid]
        q = np.asarray(q, dtype=np.float32)
        if q.shape != (live.part.dim,):
            raise IndexMismatch(f"query of shape {q.shape} against {live.part.ref.name} ({live.part.dim} dims)")
        everything = allowed is None or self._covers(live, allowed)
        hits = [Nearest(i, s, "index") for i, s in live.index.search(q, k, None if everything else allowed)]
        tail = list(live.pending) if allowed is None else [i for i in live.pending if i in allowed]
        if tail:
            scores = np.dot(np.stack([live.pending[i] for i in tail]), q)
            hits += [Nearest(i, s, "tail") for i, s in top_k(tail, scores, k)]
        hits.sort(key=lambda h: (-h.score, h.id))
        return hits[:k]

    def vectors_of(self, pid: bytes, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors of those of ``ids`` that are live in partition ``pid`` and have one, by id (indexed or still in
        the pending tail). Read from memory only: the caller authorized ``ids`` (nothing else is looked up)."""
        live = self._live[pid]
        out = {i: live.pending[i].copy() for i in ids if i in live.pending}
        rest = [i for i in ids if i not in out]
        if rest:
            out.update(live.index.vectors(rest))
        return out

    @staticmethod
    def _covers(live: _Live, allowed: AbstractSet[str]) -> bool:
        """Whether ``allowed`` holds every live id of the partition. A frozen set that did is remembered with the
        views' epoch (bumped by every id that joins or leaves): retrieval passes the same cached set call after call,
        and checking it again would cost a pass over the partition each time."""
        views = live.views
        if len(allowed) < len(views):
            return False
        memo = live.covering
        if memo is not None and memo[0] is allowed and memo[1] is views and memo[2] == views.epoch:
            return True
        ok = allowed >= views.views.keys()
        if ok and isinstance(allowed, frozenset):
            live.covering = (allowed, views, views.epoch)
        return ok

    # -- index maintenance -----------------------------------------------------------------------------------------

    def purge(self, ids: Iterable[str]) -> None:
        """Drop every earlier version of these assets' records, vectors, index entries and edges from storage (see
        ``KV.purge``): an erased item must not linger, even sealed or blinded, in a log or a table file until some
        later compaction. (Its postings are in memory and the snapshots, which the caller's checkpoint rewrites.)"""
        sids = [self.sid(_check_id(i)) for i in ids]
        if not sids:
            return
        # Their index entries and edges are keyed by blinded values spread over the whole space.
        self.kv.purge(
            {
                "assets": sids,
                "vectors": [pid + sid for pid in self._live for sid in sids],
                "index": None,
                "edges": None,
            }
        )

    def journal_after(self, seq: int, limit: int = 4096) -> list[tuple[int, bytes, str]]:
        """Journal entries after ``seq`` in order: (sequence, op, asset id), op one of ``OP_PUT``, ``OP_TOMBSTONE``,
        ``OP_MOVED_OUT``. Replication follows the journal to turn every write, whatever its path, into objects."""
        out = []
        for key, event in self.kv.load_range("journal", pack(seq + 1), limit=limit):
            out.append((struct.unpack(">Q", key)[0], event[:1], self.id_of(event[1:17])))
        return out

    def live_ids(self) -> list[str]:
        """Ids of every live asset (from the in-memory views; no record is read)."""
        return sorted(i for live in self._live.values() for i in live.views.views)

    def expired(self, now: int) -> list[str]:
        """Ids of live assets whose retention policy has run out at ``now``."""
        return sorted({i for live in self._live.values() for i in live.views.expired(now)})

    def pending(self) -> int:
        return sum(len(lv.pending) for lv in self._live.values())

    def catch_up(self, max_items: int | None = None, progress: Callable[[int], None] | None = None) -> int:
        """Move not-yet-indexed vectors into their partition indexes; returns how many moved."""
        moved = 0
        for live in self._live.values():
            while live.pending and (max_items is None or moved < max_items):
                room = len(live.pending) if max_items is None else min(len(live.pending), max_items - moved)
                batch = list(itertools.islice(live.pending.items(), min(room, 4096)))
                live.index.add([i for i, _ in batch], np.stack([v for _, v in batch]))
                for i, _ in batch:
                    del live.pending[i]
                moved += len(batch)
                live.dirty = True
                if progress:
                    progress(len(batch))
            if not live.pending:
                # A dict keeps the room of every entry it ever held: one emptied after a million pending vectors
                # costs ~1 ms to walk, and every dense search walked it (measured in the daemon that did the puts).
                live.pending = {}
        return moved

    def checkpoint(self) -> int:
        """Index every pending vector and write sealed snapshots of changed indexes. Returns snapshots written."""
        self.catch_up()
        written = 0
        for pid, live in self._live.items():
            if not live.dirty:
                continue
            lexical = self.lexical.dump(pid)
            views = live.views.dump()
            index_parts = live.index.dump()
            head = json.dumps(
                {
                    "format": SNAPSHOT_FORMAT,
                    "seq": self.seq,
                    "journal": self._journal_digest(self.seq),
                    "local": self.local_writes,
                    "embedder": live.part.embedder,
                    "dim": live.part.dim,
                    "count": len(live.index),
                    "views": len(views),
                    "lexical": len(lexical),
                    "index": [part.nbytes for part in index_parts],
                }
            ).encode()
            parts: list[bytes | memoryview] = [struct.pack(">I", len(head)), head, views, lexical, *index_parts]
            aad = b"index:" + pid + struct.pack(">I", live.part.epoch)
            # Sealed and written a chunk at a time: the parts are never joined (at 1M assets, ~1.7 GB).
            self.blobs.write(self._snapshot_name(pid), crypto.seal_stream(live.key, parts, aad, self.entropy))
            live.covered_seq = self.seq
            live.dirty = False
            written += 1
        # Every partition's views now hold every local commit (one that was changed by one is dirty, and was written).
        logged = [Delete("meta", k) for k, _ in self.kv.load_range("meta", LOCAL_LOG, prefix_end(LOCAL_LOG))]
        if logged:
            self.kv.commit(logged)
        for live in self._live.values():
            live.covered_local = self.local_writes
        return written

    def gauges(self) -> dict[str, int]:
        """The store's sizes without a scan (for metrics, read often): live assets, vectors indexed and pending,
        partitions open, the journal's position."""
        return {
            "assets": sum(len(lv.views) for lv in self._live.values()),
            "indexed": sum(len(lv.index) for lv in self._live.values()),
            "pending": self.pending(),
            "partitions": len(self._live),
            "journal_seq": self.seq,
        }

    def stats(self) -> StoreStats:
        per: dict[str, dict[str, int | str]] = {}
        for lv in self._live.values():
            per[lv.part.ref.name] = {
                "index": str(getattr(lv.index, "kind", type(lv.index).__name__)),
                "indexed": len(lv.index),
                "pending": len(lv.pending),
                "embedder": lv.part.embedder,
                "epoch": lv.part.epoch,
            }
        # Without opening a record: the live assets are the partitions' views; the tombstones are counted as written.
        assets = sum(len(lv.views) for lv in self._live.values())
        return StoreStats(
            assets=assets,
            tombstones=self.tombstones,
            partitions=per,
            journal_seq=self.seq,
            indexed=sum(len(lv.index) for lv in self._live.values()),
            pending=self.pending(),
            rebuilt_indexes=self.rebuilt_indexes,
            replayed_events=self.replayed_events,
        )

    def close(self) -> None:
        self.kv.close()


__all__ = ["Nearest", "Partition", "PrivacyScope", "Records", "Store", "StoreStats"]
