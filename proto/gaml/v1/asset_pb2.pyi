from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AssetType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ASSET_TYPE_UNSPECIFIED: _ClassVar[AssetType]
    ASSET_TYPE_FACT: _ClassVar[AssetType]
    ASSET_TYPE_GOAL: _ClassVar[AssetType]
    ASSET_TYPE_CONSTRAINT: _ClassVar[AssetType]
    ASSET_TYPE_POLICY: _ClassVar[AssetType]
    ASSET_TYPE_BRIDGE_BLOCK: _ClassVar[AssetType]
    ASSET_TYPE_PROCEDURE: _ClassVar[AssetType]
    ASSET_TYPE_TOOL_RESULT: _ClassVar[AssetType]
    ASSET_TYPE_CAPABILITY: _ClassVar[AssetType]
    ASSET_TYPE_CONNECTOR: _ClassVar[AssetType]
    ASSET_TYPE_CAPABILITY_PROVIDER: _ClassVar[AssetType]
    ASSET_TYPE_PLAN: _ClassVar[AssetType]
    ASSET_TYPE_EXECUTION_CLAIM: _ClassVar[AssetType]
    ASSET_TYPE_CHECKPOINT_CALIBRATION: _ClassVar[AssetType]
    ASSET_TYPE_VERIFICATION_RESULT: _ClassVar[AssetType]
    ASSET_TYPE_EXECUTION_VERDICT: _ClassVar[AssetType]
    ASSET_TYPE_ARBITRATION_RESULT: _ClassVar[AssetType]
    ASSET_TYPE_CONSENSUS_RECORD: _ClassVar[AssetType]
    ASSET_TYPE_BENCHMARK_RESULT: _ClassVar[AssetType]
    ASSET_TYPE_DISTILLATION_SAMPLE: _ClassVar[AssetType]
    ASSET_TYPE_SPECIALIST_TRACE: _ClassVar[AssetType]
    ASSET_TYPE_EVENT: _ClassVar[AssetType]
    ASSET_TYPE_TENANT_OPERATIONAL: _ClassVar[AssetType]

class Creator(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CREATOR_UNSPECIFIED: _ClassVar[Creator]
    CREATOR_USER: _ClassVar[Creator]
    CREATOR_MODEL: _ClassVar[Creator]
    CREATOR_EXPERT: _ClassVar[Creator]
    CREATOR_TOOL: _ClassVar[Creator]
    CREATOR_SYSTEM: _ClassVar[Creator]
    CREATOR_SWARM: _ClassVar[Creator]

class TrustClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRUST_CLASS_UNSPECIFIED: _ClassVar[TrustClass]
    TRUST_CLASS_HIGHER_TRUST: _ClassVar[TrustClass]
    TRUST_CLASS_LOWER_TRUST: _ClassVar[TrustClass]
    TRUST_CLASS_UNVERIFIED: _ClassVar[TrustClass]

class PrivacyScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRIVACY_SCOPE_UNSPECIFIED: _ClassVar[PrivacyScope]
    PRIVACY_SCOPE_LOCAL_ONLY: _ClassVar[PrivacyScope]
    PRIVACY_SCOPE_USER_PRIVATE: _ClassVar[PrivacyScope]
    PRIVACY_SCOPE_TRUSTED_DEVICES: _ClassVar[PrivacyScope]
    PRIVACY_SCOPE_ENTERPRISE_PRIVATE: _ClassVar[PrivacyScope]
    PRIVACY_SCOPE_TENANT_PRIVATE: _ClassVar[PrivacyScope]
    PRIVACY_SCOPE_SHARED: _ClassVar[PrivacyScope]
    PRIVACY_SCOPE_PUBLIC: _ClassVar[PrivacyScope]

class ReplicationPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPLICATION_POLICY_UNSPECIFIED: _ClassVar[ReplicationPolicy]
    REPLICATION_POLICY_NONE: _ClassVar[ReplicationPolicy]
    REPLICATION_POLICY_TRUSTED_DEVICES: _ClassVar[ReplicationPolicy]
    REPLICATION_POLICY_PRIVATE_SUBNET: _ClassVar[ReplicationPolicy]
    REPLICATION_POLICY_TENANT_NODES: _ClassVar[ReplicationPolicy]
    REPLICATION_POLICY_PUBLIC_SWARM: _ClassVar[ReplicationPolicy]

class InferencePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INFERENCE_POLICY_UNSPECIFIED: _ClassVar[InferencePolicy]
    INFERENCE_POLICY_LOCAL_ONLY: _ClassVar[InferencePolicy]
    INFERENCE_POLICY_PRIVATE_NODES: _ClassVar[InferencePolicy]
    INFERENCE_POLICY_PUBLIC_WITH_REDACTION: _ClassVar[InferencePolicy]
    INFERENCE_POLICY_PUBLIC_ALLOWED: _ClassVar[InferencePolicy]

class TrainingPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRAINING_POLICY_UNSPECIFIED: _ClassVar[TrainingPolicy]
    TRAINING_POLICY_PROHIBITED: _ClassVar[TrainingPolicy]
    TRAINING_POLICY_LOCAL_ONLY: _ClassVar[TrainingPolicy]
    TRAINING_POLICY_TENANT_ONLY: _ClassVar[TrainingPolicy]
    TRAINING_POLICY_ANONYMIZED_OPT_IN: _ClassVar[TrainingPolicy]
    TRAINING_POLICY_ALLOWED: _ClassVar[TrainingPolicy]

class ExportPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXPORT_POLICY_UNSPECIFIED: _ClassVar[ExportPolicy]
    EXPORT_POLICY_PROHIBITED: _ClassVar[ExportPolicy]
    EXPORT_POLICY_APPROVAL_REQUIRED: _ClassVar[ExportPolicy]
    EXPORT_POLICY_ALLOWED: _ClassVar[ExportPolicy]

class Level(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEVEL_UNSPECIFIED: _ClassVar[Level]
    LEVEL_L0: _ClassVar[Level]
    LEVEL_L1: _ClassVar[Level]
    LEVEL_L2: _ClassVar[Level]
    LEVEL_L3: _ClassVar[Level]

class Tier(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TIER_UNSPECIFIED: _ClassVar[Tier]
    TIER_HOT: _ClassVar[Tier]
    TIER_WARM: _ClassVar[Tier]
    TIER_COLD: _ClassVar[Tier]
ASSET_TYPE_UNSPECIFIED: AssetType
ASSET_TYPE_FACT: AssetType
ASSET_TYPE_GOAL: AssetType
ASSET_TYPE_CONSTRAINT: AssetType
ASSET_TYPE_POLICY: AssetType
ASSET_TYPE_BRIDGE_BLOCK: AssetType
ASSET_TYPE_PROCEDURE: AssetType
ASSET_TYPE_TOOL_RESULT: AssetType
ASSET_TYPE_CAPABILITY: AssetType
ASSET_TYPE_CONNECTOR: AssetType
ASSET_TYPE_CAPABILITY_PROVIDER: AssetType
ASSET_TYPE_PLAN: AssetType
ASSET_TYPE_EXECUTION_CLAIM: AssetType
ASSET_TYPE_CHECKPOINT_CALIBRATION: AssetType
ASSET_TYPE_VERIFICATION_RESULT: AssetType
ASSET_TYPE_EXECUTION_VERDICT: AssetType
ASSET_TYPE_ARBITRATION_RESULT: AssetType
ASSET_TYPE_CONSENSUS_RECORD: AssetType
ASSET_TYPE_BENCHMARK_RESULT: AssetType
ASSET_TYPE_DISTILLATION_SAMPLE: AssetType
ASSET_TYPE_SPECIALIST_TRACE: AssetType
ASSET_TYPE_EVENT: AssetType
ASSET_TYPE_TENANT_OPERATIONAL: AssetType
CREATOR_UNSPECIFIED: Creator
CREATOR_USER: Creator
CREATOR_MODEL: Creator
CREATOR_EXPERT: Creator
CREATOR_TOOL: Creator
CREATOR_SYSTEM: Creator
CREATOR_SWARM: Creator
TRUST_CLASS_UNSPECIFIED: TrustClass
TRUST_CLASS_HIGHER_TRUST: TrustClass
TRUST_CLASS_LOWER_TRUST: TrustClass
TRUST_CLASS_UNVERIFIED: TrustClass
PRIVACY_SCOPE_UNSPECIFIED: PrivacyScope
PRIVACY_SCOPE_LOCAL_ONLY: PrivacyScope
PRIVACY_SCOPE_USER_PRIVATE: PrivacyScope
PRIVACY_SCOPE_TRUSTED_DEVICES: PrivacyScope
PRIVACY_SCOPE_ENTERPRISE_PRIVATE: PrivacyScope
PRIVACY_SCOPE_TENANT_PRIVATE: PrivacyScope
PRIVACY_SCOPE_SHARED: PrivacyScope
PRIVACY_SCOPE_PUBLIC: PrivacyScope
REPLICATION_POLICY_UNSPECIFIED: ReplicationPolicy
REPLICATION_POLICY_NONE: ReplicationPolicy
REPLICATION_POLICY_TRUSTED_DEVICES: ReplicationPolicy
REPLICATION_POLICY_PRIVATE_SUBNET: ReplicationPolicy
REPLICATION_POLICY_TENANT_NODES: ReplicationPolicy
REPLICATION_POLICY_PUBLIC_SWARM: ReplicationPolicy
INFERENCE_POLICY_UNSPECIFIED: InferencePolicy
INFERENCE_POLICY_LOCAL_ONLY: InferencePolicy
INFERENCE_POLICY_PRIVATE_NODES: InferencePolicy
INFERENCE_POLICY_PUBLIC_WITH_REDACTION: InferencePolicy
INFERENCE_POLICY_PUBLIC_ALLOWED: InferencePolicy
TRAINING_POLICY_UNSPECIFIED: TrainingPolicy
TRAINING_POLICY_PROHIBITED: TrainingPolicy
TRAINING_POLICY_LOCAL_ONLY: TrainingPolicy
TRAINING_POLICY_TENANT_ONLY: TrainingPolicy
TRAINING_POLICY_ANONYMIZED_OPT_IN: TrainingPolicy
TRAINING_POLICY_ALLOWED: TrainingPolicy
EXPORT_POLICY_UNSPECIFIED: ExportPolicy
EXPORT_POLICY_PROHIBITED: ExportPolicy
EXPORT_POLICY_APPROVAL_REQUIRED: ExportPolicy
EXPORT_POLICY_ALLOWED: ExportPolicy
LEVEL_UNSPECIFIED: Level
LEVEL_L0: Level
LEVEL_L1: Level
LEVEL_L2: Level
LEVEL_L3: Level
TIER_UNSPECIFIED: Tier
TIER_HOT: Tier
TIER_WARM: Tier
TIER_COLD: Tier

class SourcePointer(_message.Message):
    __slots__ = ("source_id", "start", "end")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    start: int
    end: int
    def __init__(self, source_id: _Optional[str] = ..., start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class Retention(_message.Message):
    __slots__ = ("delete_at", "ttl_seconds")
    DELETE_AT_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    delete_at: int
    ttl_seconds: int
    def __init__(self, delete_at: _Optional[int] = ..., ttl_seconds: _Optional[int] = ...) -> None: ...

class Heat(_message.Message):
    __slots__ = ("visits", "last_access", "score")
    VISITS_FIELD_NUMBER: _ClassVar[int]
    LAST_ACCESS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    visits: int
    last_access: int
    score: float
    def __init__(self, visits: _Optional[int] = ..., last_access: _Optional[int] = ..., score: _Optional[float] = ...) -> None: ...

class Asset(_message.Message):
    __slots__ = ("id", "asset_type", "payload", "owner_id", "created_at", "updated_at", "version", "source_node", "tenant_scope", "creator", "confidence_score", "provenance_score", "freshness_score", "trust_class", "privacy_scope", "allowed_principals", "allowed_roles", "replication_policy", "inference_policy", "training_policy", "export_policy", "encryption_key_ref", "retention_policy", "policy_tags", "references", "supports", "contradicts", "supersedes", "derived_from", "embedding_refs", "signature", "goal", "level", "segment", "source", "entities", "tags", "valid_from", "valid_to", "tier", "heat", "tombstone")
    ID_FIELD_NUMBER: _ClassVar[int]
    ASSET_TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    OWNER_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_NODE_FIELD_NUMBER: _ClassVar[int]
    TENANT_SCOPE_FIELD_NUMBER: _ClassVar[int]
    CREATOR_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_SCORE_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_SCORE_FIELD_NUMBER: _ClassVar[int]
    FRESHNESS_SCORE_FIELD_NUMBER: _ClassVar[int]
    TRUST_CLASS_FIELD_NUMBER: _ClassVar[int]
    PRIVACY_SCOPE_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_PRINCIPALS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_ROLES_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_POLICY_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_POLICY_FIELD_NUMBER: _ClassVar[int]
    TRAINING_POLICY_FIELD_NUMBER: _ClassVar[int]
    EXPORT_POLICY_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTION_KEY_REF_FIELD_NUMBER: _ClassVar[int]
    RETENTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    POLICY_TAGS_FIELD_NUMBER: _ClassVar[int]
    REFERENCES_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_FIELD_NUMBER: _ClassVar[int]
    CONTRADICTS_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDES_FIELD_NUMBER: _ClassVar[int]
    DERIVED_FROM_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_REFS_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    HEAT_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_FIELD_NUMBER: _ClassVar[int]
    id: str
    asset_type: AssetType
    payload: _struct_pb2.Struct
    owner_id: str
    created_at: int
    updated_at: int
    version: int
    source_node: str
    tenant_scope: str
    creator: Creator
    confidence_score: float
    provenance_score: float
    freshness_score: float
    trust_class: TrustClass
    privacy_scope: PrivacyScope
    allowed_principals: _containers.RepeatedScalarFieldContainer[str]
    allowed_roles: _containers.RepeatedScalarFieldContainer[str]
    replication_policy: ReplicationPolicy
    inference_policy: InferencePolicy
    training_policy: TrainingPolicy
    export_policy: ExportPolicy
    encryption_key_ref: str
    retention_policy: Retention
    policy_tags: _containers.RepeatedScalarFieldContainer[str]
    references: _containers.RepeatedScalarFieldContainer[str]
    supports: _containers.RepeatedScalarFieldContainer[str]
    contradicts: _containers.RepeatedScalarFieldContainer[str]
    supersedes: _containers.RepeatedScalarFieldContainer[str]
    derived_from: _containers.RepeatedScalarFieldContainer[str]
    embedding_refs: _containers.RepeatedScalarFieldContainer[str]
    signature: bytes
    goal: str
    level: Level
    segment: str
    source: SourcePointer
    entities: _containers.RepeatedScalarFieldContainer[str]
    tags: _containers.RepeatedScalarFieldContainer[str]
    valid_from: int
    valid_to: int
    tier: Tier
    heat: Heat
    tombstone: bool
    def __init__(self, id: _Optional[str] = ..., asset_type: _Optional[_Union[AssetType, str]] = ..., payload: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., owner_id: _Optional[str] = ..., created_at: _Optional[int] = ..., updated_at: _Optional[int] = ..., version: _Optional[int] = ..., source_node: _Optional[str] = ..., tenant_scope: _Optional[str] = ..., creator: _Optional[_Union[Creator, str]] = ..., confidence_score: _Optional[float] = ..., provenance_score: _Optional[float] = ..., freshness_score: _Optional[float] = ..., trust_class: _Optional[_Union[TrustClass, str]] = ..., privacy_scope: _Optional[_Union[PrivacyScope, str]] = ..., allowed_principals: _Optional[_Iterable[str]] = ..., allowed_roles: _Optional[_Iterable[str]] = ..., replication_policy: _Optional[_Union[ReplicationPolicy, str]] = ..., inference_policy: _Optional[_Union[InferencePolicy, str]] = ..., training_policy: _Optional[_Union[TrainingPolicy, str]] = ..., export_policy: _Optional[_Union[ExportPolicy, str]] = ..., encryption_key_ref: _Optional[str] = ..., retention_policy: _Optional[_Union[Retention, _Mapping]] = ..., policy_tags: _Optional[_Iterable[str]] = ..., references: _Optional[_Iterable[str]] = ..., supports: _Optional[_Iterable[str]] = ..., contradicts: _Optional[_Iterable[str]] = ..., supersedes: _Optional[_Iterable[str]] = ..., derived_from: _Optional[_Iterable[str]] = ..., embedding_refs: _Optional[_Iterable[str]] = ..., signature: _Optional[bytes] = ..., goal: _Optional[str] = ..., level: _Optional[_Union[Level, str]] = ..., segment: _Optional[str] = ..., source: _Optional[_Union[SourcePointer, _Mapping]] = ..., entities: _Optional[_Iterable[str]] = ..., tags: _Optional[_Iterable[str]] = ..., valid_from: _Optional[int] = ..., valid_to: _Optional[int] = ..., tier: _Optional[_Union[Tier, str]] = ..., heat: _Optional[_Union[Heat, _Mapping]] = ..., tombstone: _Optional[bool] = ...) -> None: ...

class AssetList(_message.Message):
    __slots__ = ("assets",)
    ASSETS_FIELD_NUMBER: _ClassVar[int]
    assets: _containers.RepeatedCompositeFieldContainer[Asset]
    def __init__(self, assets: _Optional[_Iterable[_Union[Asset, _Mapping]]] = ...) -> None: ...
