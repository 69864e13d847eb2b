from google.protobuf import struct_pb2 as _struct_pb2
from gaml.v1 import asset_pb2 as _asset_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Purpose(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PURPOSE_UNSPECIFIED: _ClassVar[Purpose]
    PURPOSE_READ: _ClassVar[Purpose]
    PURPOSE_CONTEXT: _ClassVar[Purpose]
    PURPOSE_MEMORIZE: _ClassVar[Purpose]
    PURPOSE_REPLICATE: _ClassVar[Purpose]
    PURPOSE_EXPORT: _ClassVar[Purpose]
    PURPOSE_TRAIN: _ClassVar[Purpose]

class Location(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOCATION_UNSPECIFIED: _ClassVar[Location]
    LOCATION_THIS_DEVICE: _ClassVar[Location]
    LOCATION_TRUSTED_DEVICE: _ClassVar[Location]
    LOCATION_PRIVATE_SUBNET: _ClassVar[Location]
    LOCATION_PUBLIC_SWARM: _ClassVar[Location]

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_UNSPECIFIED: _ClassVar[SearchMode]
    SEARCH_MODE_HYBRID: _ClassVar[SearchMode]
    SEARCH_MODE_DENSE: _ClassVar[SearchMode]
    SEARCH_MODE_LEXICAL: _ClassVar[SearchMode]

class HydrationMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HYDRATION_MODE_UNSPECIFIED: _ClassVar[HydrationMode]
    HYDRATION_MODE_AUTO: _ClassVar[HydrationMode]
    HYDRATION_MODE_HYBRID: _ClassVar[HydrationMode]
    HYDRATION_MODE_SEMANTIC: _ClassVar[HydrationMode]
    HYDRATION_MODE_LEXICAL: _ClassVar[HydrationMode]
    HYDRATION_MODE_RECENCY: _ClassVar[HydrationMode]
PURPOSE_UNSPECIFIED: Purpose
PURPOSE_READ: Purpose
PURPOSE_CONTEXT: Purpose
PURPOSE_MEMORIZE: Purpose
PURPOSE_REPLICATE: Purpose
PURPOSE_EXPORT: Purpose
PURPOSE_TRAIN: Purpose
LOCATION_UNSPECIFIED: Location
LOCATION_THIS_DEVICE: Location
LOCATION_TRUSTED_DEVICE: Location
LOCATION_PRIVATE_SUBNET: Location
LOCATION_PUBLIC_SWARM: Location
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_HYBRID: SearchMode
SEARCH_MODE_DENSE: SearchMode
SEARCH_MODE_LEXICAL: SearchMode
HYDRATION_MODE_UNSPECIFIED: HydrationMode
HYDRATION_MODE_AUTO: HydrationMode
HYDRATION_MODE_HYBRID: HydrationMode
HYDRATION_MODE_SEMANTIC: HydrationMode
HYDRATION_MODE_LEXICAL: HydrationMode
HYDRATION_MODE_RECENCY: HydrationMode

class Intent(_message.Message):
    __slots__ = ("purpose", "location")
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    purpose: Purpose
    location: Location
    def __init__(self, purpose: _Optional[_Union[Purpose, str]] = ..., location: _Optional[_Union[Location, str]] = ...) -> None: ...

class IngestFile(_message.Message):
    __slots__ = ("name", "format", "tenant", "segment", "scope", "item_budget", "replication", "origin")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ITEM_BUDGET_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    name: str
    format: str
    tenant: str
    segment: str
    scope: _asset_pb2.PrivacyScope
    item_budget: int
    replication: _asset_pb2.ReplicationPolicy
    origin: str
    def __init__(self, name: _Optional[str] = ..., format: _Optional[str] = ..., tenant: _Optional[str] = ..., segment: _Optional[str] = ..., scope: _Optional[_Union[_asset_pb2.PrivacyScope, str]] = ..., item_budget: _Optional[int] = ..., replication: _Optional[_Union[_asset_pb2.ReplicationPolicy, str]] = ..., origin: _Optional[str] = ...) -> None: ...

class IngestRequest(_message.Message):
    __slots__ = ("file", "chunk", "no_curate")
    FILE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    NO_CURATE_FIELD_NUMBER: _ClassVar[int]
    file: IngestFile
    chunk: bytes
    no_curate: bool
    def __init__(self, file: _Optional[_Union[IngestFile, _Mapping]] = ..., chunk: _Optional[bytes] = ..., no_curate: _Optional[bool] = ...) -> None: ...

class IngestResponse(_message.Message):
    __slots__ = ("files", "records", "skipped", "items", "facts", "report")
    FILES_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    FACTS_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    files: int
    records: int
    skipped: int
    items: int
    facts: int
    report: _struct_pb2.Struct
    def __init__(self, files: _Optional[int] = ..., records: _Optional[int] = ..., skipped: _Optional[int] = ..., items: _Optional[int] = ..., facts: _Optional[int] = ..., report: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class PutRequest(_message.Message):
    __slots__ = ("assets", "check_only")
    ASSETS_FIELD_NUMBER: _ClassVar[int]
    CHECK_ONLY_FIELD_NUMBER: _ClassVar[int]
    assets: _containers.RepeatedCompositeFieldContainer[_asset_pb2.Asset]
    check_only: bool
    def __init__(self, assets: _Optional[_Iterable[_Union[_asset_pb2.Asset, _Mapping]]] = ..., check_only: _Optional[bool] = ...) -> None: ...

class PutResponse(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ids: _Optional[_Iterable[str]] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("intent", "id", "include_deleted")
    INTENT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DELETED_FIELD_NUMBER: _ClassVar[int]
    intent: Intent
    id: str
    include_deleted: bool
    def __init__(self, intent: _Optional[_Union[Intent, _Mapping]] = ..., id: _Optional[str] = ..., include_deleted: _Optional[bool] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("asset",)
    ASSET_FIELD_NUMBER: _ClassVar[int]
    asset: _asset_pb2.Asset
    def __init__(self, asset: _Optional[_Union[_asset_pb2.Asset, _Mapping]] = ...) -> None: ...

class Turn(_message.Message):
    __slots__ = ("role", "content")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class RememberRequest(_message.Message):
    __slots__ = ("turns", "session", "curate")
    TURNS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    CURATE_FIELD_NUMBER: _ClassVar[int]
    turns: _containers.RepeatedCompositeFieldContainer[Turn]
    session: str
    curate: bool
    def __init__(self, turns: _Optional[_Iterable[_Union[Turn, _Mapping]]] = ..., session: _Optional[str] = ..., curate: _Optional[bool] = ...) -> None: ...

class RememberResponse(_message.Message):
    __slots__ = ("source", "ids", "report")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    source: str
    ids: _containers.RepeatedScalarFieldContainer[str]
    report: _struct_pb2.Struct
    def __init__(self, source: _Optional[str] = ..., ids: _Optional[_Iterable[str]] = ..., report: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("types", "since", "limit")
    TYPES_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    types: _containers.RepeatedScalarFieldContainer[_asset_pb2.AssetType]
    since: int
    limit: int
    def __init__(self, types: _Optional[_Iterable[_Union[_asset_pb2.AssetType, str]]] = ..., since: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("assets",)
    ASSETS_FIELD_NUMBER: _ClassVar[int]
    assets: _containers.RepeatedCompositeFieldContainer[_asset_pb2.Asset]
    def __init__(self, assets: _Optional[_Iterable[_Union[_asset_pb2.Asset, _Mapping]]] = ...) -> None: ...

class PrincipalsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PrincipalsResponse(_message.Message):
    __slots__ = ("principals",)
    PRINCIPALS_FIELD_NUMBER: _ClassVar[int]
    principals: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    def __init__(self, principals: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ...) -> None: ...

class AddPrincipalRequest(_message.Message):
    __slots__ = ("id", "kind", "tenants", "roles", "teams", "on_behalf_of")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    TEAMS_FIELD_NUMBER: _ClassVar[int]
    ON_BEHALF_OF_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    tenants: _containers.RepeatedScalarFieldContainer[str]
    roles: _containers.RepeatedScalarFieldContainer[str]
    teams: _containers.RepeatedScalarFieldContainer[str]
    on_behalf_of: str
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., tenants: _Optional[_Iterable[str]] = ..., roles: _Optional[_Iterable[str]] = ..., teams: _Optional[_Iterable[str]] = ..., on_behalf_of: _Optional[str] = ...) -> None: ...

class AddPrincipalResponse(_message.Message):
    __slots__ = ("principal",)
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    principal: _struct_pb2.Struct
    def __init__(self, principal: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SourcesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SourcesResponse(_message.Message):
    __slots__ = ("sources",)
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    def __init__(self, sources: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ...) -> None: ...

class CurateRequest(_message.Message):
    __slots__ = ("sources",)
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, sources: _Optional[_Iterable[str]] = ...) -> None: ...

class MaintainRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BackupRequest(_message.Message):
    __slots__ = ("directory",)
    DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    directory: str
    def __init__(self, directory: _Optional[str] = ...) -> None: ...

class AdminReport(_message.Message):
    __slots__ = ("report",)
    REPORT_FIELD_NUMBER: _ClassVar[int]
    report: _struct_pb2.Struct
    def __init__(self, report: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ForgetRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ForgetResponse(_message.Message):
    __slots__ = ("receipt_id", "at", "tombstoned", "rebuilt_sources", "by", "reason")
    RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONED_FIELD_NUMBER: _ClassVar[int]
    REBUILT_SOURCES_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    receipt_id: str
    at: int
    tombstoned: _containers.RepeatedScalarFieldContainer[str]
    rebuilt_sources: int
    by: str
    reason: str
    def __init__(self, receipt_id: _Optional[str] = ..., at: _Optional[int] = ..., tombstoned: _Optional[_Iterable[str]] = ..., rebuilt_sources: _Optional[int] = ..., by: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("intent", "text", "k", "mode", "as_of", "types", "segments", "tags", "entities", "peers")
    INTENT_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    intent: Intent
    text: str
    k: int
    mode: SearchMode
    as_of: int
    types: _containers.RepeatedScalarFieldContainer[_asset_pb2.AssetType]
    segments: _containers.RepeatedScalarFieldContainer[str]
    tags: _containers.RepeatedScalarFieldContainer[str]
    entities: _containers.RepeatedScalarFieldContainer[str]
    peers: PeerRead
    def __init__(self, intent: _Optional[_Union[Intent, _Mapping]] = ..., text: _Optional[str] = ..., k: _Optional[int] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., as_of: _Optional[int] = ..., types: _Optional[_Iterable[_Union[_asset_pb2.AssetType, str]]] = ..., segments: _Optional[_Iterable[str]] = ..., tags: _Optional[_Iterable[str]] = ..., entities: _Optional[_Iterable[str]] = ..., peers: _Optional[_Union[PeerRead, _Mapping]] = ...) -> None: ...

class PeerRead(_message.Message):
    __slots__ = ("deadline_ms", "fan_out", "k", "boundaries")
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    FAN_OUT_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    BOUNDARIES_FIELD_NUMBER: _ClassVar[int]
    deadline_ms: int
    fan_out: int
    k: int
    boundaries: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, deadline_ms: _Optional[int] = ..., fan_out: _Optional[int] = ..., k: _Optional[int] = ..., boundaries: _Optional[_Iterable[str]] = ...) -> None: ...

class Hit(_message.Message):
    __slots__ = ("asset", "score", "path", "partition", "explain")
    ASSET_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    EXPLAIN_FIELD_NUMBER: _ClassVar[int]
    asset: _asset_pb2.Asset
    score: float
    path: str
    partition: str
    explain: _struct_pb2.Struct
    def __init__(self, asset: _Optional[_Union[_asset_pb2.Asset, _Mapping]] = ..., score: _Optional[float] = ..., path: _Optional[str] = ..., partition: _Optional[str] = ..., explain: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "peers")
    HITS_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[Hit]
    peers: _struct_pb2.Struct
    def __init__(self, hits: _Optional[_Iterable[_Union[Hit, _Mapping]]] = ..., peers: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Walk(_message.Message):
    __slots__ = ("neighbours", "entity_hops", "entity_fanout", "decay")
    NEIGHBOURS_FIELD_NUMBER: _ClassVar[int]
    ENTITY_HOPS_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FANOUT_FIELD_NUMBER: _ClassVar[int]
    DECAY_FIELD_NUMBER: _ClassVar[int]
    neighbours: int
    entity_hops: int
    entity_fanout: int
    decay: float
    def __init__(self, neighbours: _Optional[int] = ..., entity_hops: _Optional[int] = ..., entity_fanout: _Optional[int] = ..., decay: _Optional[float] = ...) -> None: ...

class PlaneSegment(_message.Message):
    __slots__ = ("name", "budget", "seeds", "fact_cap", "walk")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    SEEDS_FIELD_NUMBER: _ClassVar[int]
    FACT_CAP_FIELD_NUMBER: _ClassVar[int]
    WALK_FIELD_NUMBER: _ClassVar[int]
    name: str
    budget: int
    seeds: int
    fact_cap: int
    walk: Walk
    def __init__(self, name: _Optional[str] = ..., budget: _Optional[int] = ..., seeds: _Optional[int] = ..., fact_cap: _Optional[int] = ..., walk: _Optional[_Union[Walk, _Mapping]] = ...) -> None: ...

class HydrateRequest(_message.Message):
    __slots__ = ("intent", "goal", "budget", "plane", "mode", "as_of", "counter", "profile", "peers")
    INTENT_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    PLANE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    intent: Intent
    goal: str
    budget: int
    plane: _containers.RepeatedCompositeFieldContainer[PlaneSegment]
    mode: HydrationMode
    as_of: int
    counter: str
    profile: int
    peers: PeerRead
    def __init__(self, intent: _Optional[_Union[Intent, _Mapping]] = ..., goal: _Optional[str] = ..., budget: _Optional[int] = ..., plane: _Optional[_Iterable[_Union[PlaneSegment, _Mapping]]] = ..., mode: _Optional[_Union[HydrationMode, str]] = ..., as_of: _Optional[int] = ..., counter: _Optional[str] = ..., profile: _Optional[int] = ..., peers: _Optional[_Union[PeerRead, _Mapping]] = ...) -> None: ...

class HydrateResponse(_message.Message):
    __slots__ = ("frame", "receipt_id", "tokens", "path", "fallback", "receipt")
    FRAME_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    frame: str
    receipt_id: str
    tokens: int
    path: str
    fallback: str
    receipt: _struct_pb2.Struct
    def __init__(self, frame: _Optional[str] = ..., receipt_id: _Optional[str] = ..., tokens: _Optional[int] = ..., path: _Optional[str] = ..., fallback: _Optional[str] = ..., receipt: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ("id", "owner", "grantee", "max_level", "segments", "tags", "time_from", "time_to", "expires_at", "created_at", "revoked_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    GRANTEE_FIELD_NUMBER: _ClassVar[int]
    MAX_LEVEL_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    TIME_FROM_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    owner: str
    grantee: str
    max_level: _asset_pb2.Level
    segments: _containers.RepeatedScalarFieldContainer[str]
    tags: _containers.RepeatedScalarFieldContainer[str]
    time_from: int
    time_to: int
    expires_at: int
    created_at: int
    revoked_at: int
    def __init__(self, id: _Optional[str] = ..., owner: _Optional[str] = ..., grantee: _Optional[str] = ..., max_level: _Optional[_Union[_asset_pb2.Level, str]] = ..., segments: _Optional[_Iterable[str]] = ..., tags: _Optional[_Iterable[str]] = ..., time_from: _Optional[int] = ..., time_to: _Optional[int] = ..., expires_at: _Optional[int] = ..., created_at: _Optional[int] = ..., revoked_at: _Optional[int] = ...) -> None: ...

class GrantRequest(_message.Message):
    __slots__ = ("grantee", "max_level", "segments", "tags", "time_from", "time_to", "expires_at")
    GRANTEE_FIELD_NUMBER: _ClassVar[int]
    MAX_LEVEL_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    TIME_FROM_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    grantee: str
    max_level: _asset_pb2.Level
    segments: _containers.RepeatedScalarFieldContainer[str]
    tags: _containers.RepeatedScalarFieldContainer[str]
    time_from: int
    time_to: int
    expires_at: int
    def __init__(self, grantee: _Optional[str] = ..., max_level: _Optional[_Union[_asset_pb2.Level, str]] = ..., segments: _Optional[_Iterable[str]] = ..., tags: _Optional[_Iterable[str]] = ..., time_from: _Optional[int] = ..., time_to: _Optional[int] = ..., expires_at: _Optional[int] = ...) -> None: ...

class GrantResponse(_message.Message):
    __slots__ = ("grant",)
    GRANT_FIELD_NUMBER: _ClassVar[int]
    grant: Grant
    def __init__(self, grant: _Optional[_Union[Grant, _Mapping]] = ...) -> None: ...

class RevokeRequest(_message.Message):
    __slots__ = ("grant_id",)
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    grant_id: str
    def __init__(self, grant_id: _Optional[str] = ...) -> None: ...

class ListGrantsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListGrantsResponse(_message.Message):
    __slots__ = ("made", "received")
    MADE_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    made: _containers.RepeatedCompositeFieldContainer[Grant]
    received: _containers.RepeatedCompositeFieldContainer[Grant]
    def __init__(self, made: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., received: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class AccessLogRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class AccessRecord(_message.Message):
    __slots__ = ("at", "who", "on_behalf_of", "kind", "purpose", "location", "entry")
    AT_FIELD_NUMBER: _ClassVar[int]
    WHO_FIELD_NUMBER: _ClassVar[int]
    ON_BEHALF_OF_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    at: int
    who: str
    on_behalf_of: str
    kind: str
    purpose: Purpose
    location: Location
    entry: _struct_pb2.Struct
    def __init__(self, at: _Optional[int] = ..., who: _Optional[str] = ..., on_behalf_of: _Optional[str] = ..., kind: _Optional[str] = ..., purpose: _Optional[_Union[Purpose, str]] = ..., location: _Optional[_Union[Location, str]] = ..., entry: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class AccessLogResponse(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[AccessRecord]
    def __init__(self, records: _Optional[_Iterable[_Union[AccessRecord, _Mapping]]] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("node_id", "version", "principal", "user", "transport", "embedder", "assets", "tombstones", "journal_seq", "indexed", "pending", "uptime_seconds", "calls", "partitions", "rebuilt_indexes", "replayed_events")
    class PartitionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: PartitionStatus
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[PartitionStatus, _Mapping]] = ...) -> None: ...
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    ASSETS_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONES_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_SEQ_FIELD_NUMBER: _ClassVar[int]
    INDEXED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REBUILT_INDEXES_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_EVENTS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    version: str
    principal: str
    user: str
    transport: str
    embedder: str
    assets: int
    tombstones: int
    journal_seq: int
    indexed: int
    pending: int
    uptime_seconds: float
    calls: int
    partitions: _containers.MessageMap[str, PartitionStatus]
    rebuilt_indexes: int
    replayed_events: int
    def __init__(self, node_id: _Optional[str] = ..., version: _Optional[str] = ..., principal: _Optional[str] = ..., user: _Optional[str] = ..., transport: _Optional[str] = ..., embedder: _Optional[str] = ..., assets: _Optional[int] = ..., tombstones: _Optional[int] = ..., journal_seq: _Optional[int] = ..., indexed: _Optional[int] = ..., pending: _Optional[int] = ..., uptime_seconds: _Optional[float] = ..., calls: _Optional[int] = ..., partitions: _Optional[_Mapping[str, PartitionStatus]] = ..., rebuilt_indexes: _Optional[int] = ..., replayed_events: _Optional[int] = ...) -> None: ...

class PartitionStatus(_message.Message):
    __slots__ = ("indexed", "pending", "embedder", "epoch", "index")
    INDEXED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    indexed: int
    pending: int
    embedder: str
    epoch: int
    index: str
    def __init__(self, indexed: _Optional[int] = ..., pending: _Optional[int] = ..., embedder: _Optional[str] = ..., epoch: _Optional[int] = ..., index: _Optional[str] = ...) -> None: ...

class ConflictsRequest(_message.Message):
    __slots__ = ("intent", "slot")
    INTENT_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    intent: Intent
    slot: str
    def __init__(self, intent: _Optional[_Union[Intent, _Mapping]] = ..., slot: _Optional[str] = ...) -> None: ...

class ConflictsResponse(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    def __init__(self, records: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ...) -> None: ...

class ReputationRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReputationResponse(_message.Message):
    __slots__ = ("ledgers",)
    LEDGERS_FIELD_NUMBER: _ClassVar[int]
    ledgers: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    def __init__(self, ledgers: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ...) -> None: ...

class OverrideRequest(_message.Message):
    __slots__ = ("slot", "choose", "reason")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    CHOOSE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    slot: str
    choose: str
    reason: str
    def __init__(self, slot: _Optional[str] = ..., choose: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class OverrideResponse(_message.Message):
    __slots__ = ("override", "record")
    OVERRIDE_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    override: str
    record: _struct_pb2.Struct
    def __init__(self, override: _Optional[str] = ..., record: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
