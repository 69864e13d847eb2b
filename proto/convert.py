"""Conversions between the domain type :class:`policy.model.Asset` and its wire forms.

Two wire forms are covered:

- **protobuf** (``gaml.v1.Asset``): :func:`asset_to_pb` and :func:`asset_from_pb` round-trip every valid asset
  losslessly (compare domain objects: the domain normalizes on construction, e.g. whole payload floats become ints).
  On the wire an UNSPECIFIED enum means "the domain default", except ``asset_type``, which is required. Other fields
  follow proto3: :func:`asset_from_pb` expects a complete message, as :func:`asset_to_pb` writes it.
- **JSON** (the CLI's input and output): :func:`draft_pb_from_json` makes a draft's wire message of the protobuf JSON
  mapping, also accepting the domain's short lower-case enum names; :func:`draft_from_json` reads the same JSON into
  keyword arguments for ``Asset`` holding only the fields given; :func:`asset_to_json` renders an asset for display in
  a form that :func:`draft_from_json` reads back. A put reads a JSON draft as the wire carries it
  (:func:`draft_as_sent`, in-process as through a daemon): a field given at its protobuf default reads as not given
  there.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.struct_pb2 import ListValue, Struct

from gaml.policy.errors import InvalidAsset, PayloadTooDeep, UnknownEnumValue
from gaml.policy.model import (
    ASSET_FIELDS,
    ENUM_FIELDS,
    MAX_PAYLOAD_DEPTH,
    MAX_SAFE_INT,
    SET_FIELDS,
    Asset,
    Heat,
    Retention,
    SourcePointer,
    freeze_json,
    thaw_json,
)
from gaml.v1 import asset_pb2

__all__ = [
    "PreparedDraft",
    "asset_from_pb",
    "asset_json_from_pb",
    "asset_to_json",
    "asset_to_pb",
    "draft_as_sent",
    "draft_from_json",
    "draft_pb_from_json",
    "struct_json",
]

_ASSET_DESCRIPTOR: Final = asset_pb2.Asset.DESCRIPTOR
# Domain sub-objects and the proto messages they travel as.
_NESTED: Final[dict[str, tuple[type[Any], Any]]] = {
    "source": (SourcePointer, asset_pb2.SourcePointer),
    "retention_policy": (Retention, asset_pb2.Retention),
    "heat": (Heat, asset_pb2.Heat),
}
# Dataclass defaults: what an UNSPECIFIED enum on the wire stands for.
_DEFAULTS: Final[dict[str, Any]] = {f.name: f.default for f in ASSET_FIELDS if f.default is not dataclasses.MISSING}
# JSON key (original or lowerCamelCase name) -> the Asset field's descriptor.
_BY_JSON_KEY: Final[dict[str, Any]] = {
    **{fd.name: fd for fd in _ASSET_DESCRIPTOR.fields},
    **{fd.json_name: fd for fd in _ASSET_DESCRIPTOR.fields},
}
_INT64_TYPES: Final = (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64)
# Fields json_format.ParseDict fills from a JSON bool as from a number (true -> 1): a draft's number must be a number.
_NUMBER_CPP_TYPES: Final = frozenset(
    {
        FieldDescriptor.CPPTYPE_DOUBLE,
        FieldDescriptor.CPPTYPE_FLOAT,
        FieldDescriptor.CPPTYPE_INT32,
        FieldDescriptor.CPPTYPE_INT64,
        FieldDescriptor.CPPTYPE_UINT32,
        FieldDescriptor.CPPTYPE_UINT64,
        FieldDescriptor.CPPTYPE_ENUM,
    }
)
_MAY_HIDE_BOOLS: Final = (bool, dict, list)  # the values that may hold such a bool (a string or a number cannot)


def _plain_kind(fd: Any) -> str | None:
    """How :func:`_plain_message` takes a field's JSON value (None: only through the mapping)."""
    if fd.name == "payload":
        return "payload"
    if fd.name in ENUM_FIELDS:
        return "enum"
    repeated = fd.is_repeated
    if fd.type == FieldDescriptor.TYPE_STRING:
        return "strs" if repeated else "str"
    if repeated:
        return None
    if fd.type == FieldDescriptor.TYPE_DOUBLE:
        return "double"
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return "bool"
    if fd.type in _INT64_TYPES:
        return "int"
    return None


_PLAIN_KINDS: Final[dict[str, str]] = {
    fd.name: kind for fd in _ASSET_DESCRIPTOR.fields if (kind := _plain_kind(fd)) is not None
}


@functools.cache
def _enum_prefix(cls: type) -> str:
    """The buf-style value prefix of a domain enum class: its name in UPPER_SNAKE (``TrustClass`` → ``TRUST_CLASS``)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).upper()


def _pb_enum(field: str) -> Any:  # an EnumDescriptor (pure-Python or upb)
    enum_type = _ASSET_DESCRIPTOR.fields_by_name[field].enum_type
    assert enum_type is not None, field
    return enum_type


def _short_names(field: str) -> str:
    return ", ".join(m.value for m in ENUM_FIELDS[field])


def _enum_to_pb(field: str, member: Any) -> int:
    name = f"{_enum_prefix(ENUM_FIELDS[field])}_{member.name}"
    return _pb_enum(field).values_by_name[name].number


def _enum_from_pb(field: str, number: int) -> Any:
    """The domain member for a wire enum number; ``None`` for UNSPECIFIED (0)."""
    if number == 0:
        return None
    member = _MEMBERS_FROM_WIRE[field].get(number)
    if member is None:
        raise UnknownEnumValue(f"{field}: unknown enum number {number}; expected one of: {_short_names(field)}")
    return member


# Per enum field: domain member -> wire number, and wire number -> domain member or short name (UNSPECIFIED left out).
_TO_WIRE: Final[dict[str, dict[Any, int]]] = {
    name: {m: _enum_to_pb(name, m) for m in cls} for name, cls in ENUM_FIELDS.items()
}
_MEMBERS_FROM_WIRE: Final[dict[str, dict[int, Any]]] = {
    name: {n: m for m, n in members.items()} for name, members in _TO_WIRE.items()
}
_FROM_WIRE: Final[dict[str, dict[int, str]]] = {
    name: {n: m.value for m, n in members.items()} for name, members in _TO_WIRE.items()
}
_NESTED_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    name: tuple(f.name for f in dataclasses.fields(cls)) for name, (cls, _) in _NESTED.items()
}


def _wire_error(e: Exception) -> InvalidAsset:
    return InvalidAsset(f"asset does not fit the wire schema: {e}")


# -- protobuf --------------------------------------------------------------------------------------------------------


def asset_to_pb(asset: Asset) -> asset_pb2.Asset:
    """The ``gaml.v1.Asset`` message for a domain asset (every field set; ``source`` only when there is one).

    Raises :class:`InvalidAsset` if a value does not fit its wire type (an integer beyond 64 bits).
    """
    kw: dict[str, Any] = {}
    for f in ASSET_FIELDS:
        value = getattr(asset, f.name)
        if f.name in ENUM_FIELDS:
            kw[f.name] = _TO_WIRE[f.name][value]
        elif f.name == "payload":
            continue
        elif f.name in _NESTED:
            if value is not None:
                kw[f.name] = _NESTED[f.name][1](**{n: getattr(value, n) for n in _NESTED_FIELDS[f.name]})
        elif f.name in SET_FIELDS:
            kw[f.name] = list(value)
        else:
            kw[f.name] = value
    try:
        msg = asset_pb2.Asset(**kw)
        msg.payload.update(thaw_json(asset.payload))
    except (TypeError, ValueError) as e:
        raise _wire_error(e) from e
    msg.payload.SetInParent()  # an empty payload is still a payload
    return msg


def _payload_from_pb(struct: Struct) -> dict[str, Any]:
    payload = json_format.MessageToDict(struct)
    assert isinstance(payload, dict)
    return payload


def _field_from_pb(msg: asset_pb2.Asset, name: str) -> Any:
    """The domain value of one non-enum field of a message."""
    if name == "payload":
        return _payload_from_pb(msg.payload)
    if name in _NESTED:
        if name == "source" and not msg.HasField("source"):
            return None
        domain_cls, _ = _NESTED[name]
        sub = getattr(msg, name)
        return domain_cls(**{f.name: getattr(sub, f.name) for f in dataclasses.fields(domain_cls)})
    if name in SET_FIELDS:
        return tuple(getattr(msg, name))
    return getattr(msg, name)


def asset_from_pb(msg: asset_pb2.Asset) -> Asset:
    """The domain asset for a ``gaml.v1.Asset`` message.

    An UNSPECIFIED enum takes the domain default; an UNSPECIFIED ``asset_type`` raises :class:`InvalidAsset`, and an
    enum number the schema does not define raises :class:`UnknownEnumValue`. The asset validates itself as usual.
    """
    kw: dict[str, Any] = {}
    for f in ASSET_FIELDS:
        if f.name in ENUM_FIELDS:
            member = _enum_from_pb(f.name, getattr(msg, f.name))
            if member is None:
                if f.name == "asset_type":
                    raise InvalidAsset("asset_type is required (got ASSET_TYPE_UNSPECIFIED)")
                member = _DEFAULTS[f.name]
            kw[f.name] = member
        else:
            kw[f.name] = _field_from_pb(msg, f.name)
    return Asset(**kw)


def asset_json_from_pb(msg: asset_pb2.Asset) -> dict[str, Any]:
    """``asset_to_json(asset_from_pb(msg))`` for a message that :func:`asset_to_pb` wrote (what a node sends), without
    building the domain asset: a client renders every hit of a search this way. A message the domain would refuse
    is not checked here (a node sends only valid assets); an unknown or UNSPECIFIED ``asset_type`` is still refused.

    One walk over the message's fields (the JSON mapping's rendering, field by field); a value that walk does not
    render as the mapping would (a number that is not finite, a payload nested too deep) takes the mapping's path.
    """
    try:
        return _asset_json_walk(msg)
    except ValueError:
        return _asset_json_mapped(msg)


def _asset_json_walk(msg: asset_pb2.Asset) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fd in _ASSET_DESCRIPTOR.fields:
        name = fd.name
        if name in _FROM_WIRE:
            number = getattr(msg, name)
            value = _FROM_WIRE[name].get(number)
            out[name] = value if value is not None else _enum_json(name, number)
        elif name == "payload":
            out[name] = struct_json(msg.payload, MAX_PAYLOAD_DEPTH)
        elif name in _NESTED:
            if msg.HasField(name):
                sub = getattr(msg, name)
                out[name] = {n: _scalar_json(getattr(sub, n)) for n in _NESTED_FIELDS[name]}
        elif fd.is_repeated:
            out[name] = list(getattr(msg, name))
        else:
            out[name] = _scalar_json(getattr(msg, name))
    return out


def _enum_json(name: str, number: int) -> str:
    member = _enum_from_pb(name, number)  # an unknown number raises
    if member is None:
        if name == "asset_type":
            raise InvalidAsset("asset_type is required (got ASSET_TYPE_UNSPECIFIED)")
        member = _DEFAULTS[name]
    return str(member.value)


def _scalar_json(v: Any) -> Any:
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(v)  # the mapping writes "NaN" / "Infinity"
    return v


def _asset_json_mapped(msg: asset_pb2.Asset, payload: Any = None) -> dict[str, Any]:
    """The JSON mapping's rendering; ``payload``: the plain payload to show (None: the message's, validated)."""
    out = json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    int64s_as_ints(out, _ASSET_DESCRIPTOR)
    for name in ENUM_FIELDS:
        out[name] = _enum_json(name, getattr(msg, name))
    out["payload"] = thaw_json(freeze_json(_payload_from_pb(msg.payload))) if payload is None else payload
    return out


def struct_json(s: Struct, max_depth: int | None = None) -> dict[str, Any]:
    """A Struct as plain JSON with its whole numbers as ints (a Struct carries every number as a double):
    ``thaw_json(freeze_json(MessageToDict(s), max_depth=max_depth))`` in one walk. Raises ``ValueError`` where that
    path would raise (a number that is not finite, objects or lists nested deeper than ``max_depth``)."""
    return _fields_json(s, 1, -1 if max_depth is None else max_depth)


def _fields_json(s: Struct, depth: int, limit: int) -> dict[str, Any]:
    if 0 <= limit < depth:
        raise ValueError(depth)
    return {k: _value_json(v, depth + 1, limit) for k, v in s.fields.items()}


def _list_json(lv: ListValue, depth: int, limit: int) -> list[Any]:
    if 0 <= limit < depth:
        raise ValueError(depth)
    return [_value_json(v, depth + 1, limit) for v in lv.values]


def _value_json(v: Any, depth: int, limit: int) -> Any:
    kind = v.WhichOneof("kind")
    if kind == "string_value":
        return v.string_value
    if kind == "number_value":
        x = v.number_value
        if not math.isfinite(x):
            raise ValueError(x)
        return int(x) if x.is_integer() and abs(x) <= MAX_SAFE_INT else x
    if kind == "bool_value":
        return v.bool_value
    if kind == "struct_value":
        return _fields_json(v.struct_value, depth, limit)
    if kind == "list_value":
        return _list_json(v.list_value, depth, limit)
    return None  # null_value, or no kind set (the mapping reads both as null)


# -- JSON ------------------------------------------------------------------------------------------------------------


def _json_enum(field: str, value: Any) -> Any:
    """Map a JSON enum value (proto name, or domain short name, any case; or a number) to what ParseDict reads."""
    names = _pb_enum(field).values_by_name
    if isinstance(value, str):
        key = value.strip().upper()
        if key in names:
            return key
        prefixed = f"{_enum_prefix(ENUM_FIELDS[field])}_{key}"
        if not key.endswith("UNSPECIFIED") and prefixed in names:
            return prefixed
    elif isinstance(value, int) and not isinstance(value, bool):
        if value in _pb_enum(field).values_by_number:
            return value
    else:
        raise InvalidAsset(f"{field}: expected an enum name, got {type(value).__name__} {value!r}")
    raise UnknownEnumValue(f"{field}: unknown value {value!r}; expected one of: {_short_names(field)}")


def _draft_message(obj: Mapping[str, Any]) -> tuple[asset_pb2.Asset, dict[str, Any]]:
    """The wire message of a JSON draft, and the JSON as ParseDict read it (enum names normalized)."""
    if not isinstance(obj, Mapping):
        raise InvalidAsset(f"an asset must be a JSON object, got {type(obj).__name__}")
    prepared: dict[str, Any] = {}
    given: dict[str, str] = {}  # field name -> the key it was given under
    for key, value in obj.items():
        fd = _BY_JSON_KEY.get(key)
        if fd is None:
            prepared[key] = value  # ParseDict reports the unknown field
            continue
        if fd.name in given:
            raise InvalidAsset(f"field {fd.name} is given twice (as {given[fd.name]!r} and {key!r})")
        given[fd.name] = key
        if value is None:
            continue
        if type(value) in _MAY_HIDE_BOOLS:
            _no_bool_numbers(fd, value, fd.name)
        if fd.name in ENUM_FIELDS:
            value = _json_enum(fd.name, value)
        elif fd.name == "payload" and isinstance(value, Mapping):
            freeze_json(value)  # refuse numbers a double cannot hold exactly, before Struct rounds them
        prepared[key] = value
    msg = _plain_message(prepared)
    if msg is None:  # not plain: the mapping reads it (and says what is wrong, if anything)
        try:
            msg = json_format.ParseDict(prepared, asset_pb2.Asset())
        except (json_format.ParseError, TypeError, ValueError) as e:
            raise InvalidAsset(str(e)) from e
        except OverflowError as e:  # an int no double holds (2**1100), which ParseDict lets through
            raise InvalidAsset(f"a number is out of range: {e}") from e
    return msg, prepared


def _no_bool_numbers(fd: Any, value: Any, where: str) -> None:
    """Raise :class:`InvalidAsset` for a JSON bool given for a number or an enum (``where``: the field's path), in the
    draft's own fields and in its nested messages (not in the payload: any JSON). json_format.ParseDict would read
    ``true`` as 1, so ``"confidence_score": true`` became a confidence of 1.0."""
    if fd.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE:
        if fd.message_type.full_name.startswith("google.protobuf.") or not isinstance(value, Mapping):
            return  # the payload (a Struct) holds any JSON; a nested value that is no object, the mapping refuses
        nested = {**{f.name: f for f in fd.message_type.fields}, **{f.json_name: f for f in fd.message_type.fields}}
        for key, v in value.items():
            sub = nested.get(key)
            if sub is not None and v is not None:
                _no_bool_numbers(sub, v, f"{where}.{sub.name}")
        return
    if fd.cpp_type in _NUMBER_CPP_TYPES and (
        type(value) is bool or (type(value) is list and any(type(v) is bool for v in value))
    ):
        wanted = "an enum name" if fd.cpp_type == FieldDescriptor.CPPTYPE_ENUM else "a number"
        raise InvalidAsset(f"{where}: expected {wanted}, got {json.dumps(value)}")


def _plain_message(prepared: Mapping[str, Any]) -> asset_pb2.Asset | None:
    """The message ``json_format.ParseDict`` makes of a prepared draft, made directly, when every value is plain: a
    string for a string or enum field (enum names normalized), a list of strings for a repeated string, an int for an
    integer or enum field (within its range), a finite number for a double, a bool for a bool, an object for the
    payload (JSON already, :func:`freeze_json`). ``None`` when anything is not (a nested message, bytes, a number
    given as a string, an unknown key ...): the mapping then reads it, and says what is wrong. ParseDict walks the
    descriptors in pure Python (~25 µs a draft), and a bulk put's client spent most of its time there."""
    kw: dict[str, Any] = {}
    payload = None
    for key, value in prepared.items():
        fd = _BY_JSON_KEY.get(key)
        if fd is None or fd.name in kw or (fd.name == "payload" and payload is not None):
            return None
        kind = _PLAIN_KINDS.get(fd.name)
        t = type(value)
        if kind is None:
            return None
        if kind == "payload":
            if t is not dict:
                return None
            payload = value
            continue
        if kind == "str":
            plain = t is str
        elif kind == "enum":  # a name (normalized) or a number
            plain = t is str or t is int
        elif kind == "strs":
            plain = t is list and all(type(v) is str for v in value)
        elif kind == "double":  # NaN and ±Infinity: the mapping refuses them in its words
            plain = t is int or (t is float and math.isfinite(value))
        elif kind == "bool":
            plain = t is bool
        else:  # an integer field
            plain = t is int
        if not plain:
            return None
        kw[fd.name] = value
    try:
        msg = asset_pb2.Asset(**kw)
        if payload is not None:
            msg.payload.update(payload)
            msg.payload.SetInParent()  # {} is still a payload given
    except (TypeError, ValueError, OverflowError):  # out of range: the mapping says so, in its words
        return None
    return msg


class PreparedDraft(Mapping[str, Any]):
    """A JSON draft read once: a mapping of the object as given (a shallow copy), with its wire message made and
    checked by :func:`draft_pb_from_json` (which raises as it does). :func:`draft_pb_from_json` returns that message
    again instead of reading the JSON again, so a client that sends the same drafts twice (``gaml put``: a check-only
    pass, then the put) reads each once, and so does the in-process put (:func:`draft_as_sent`).
    :func:`draft_from_json` reads it as the JSON it holds."""

    __slots__ = ("_obj", "message")

    def __init__(self, obj: Mapping[str, Any]) -> None:
        self.message: Final = draft_pb_from_json(obj)
        self._obj: Final = dict(obj)

    def __getitem__(self, key: str) -> Any:
        return self._obj[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._obj)

    def __len__(self) -> int:
        return len(self._obj)


def draft_pb_from_json(obj: Mapping[str, Any]) -> asset_pb2.Asset:
    """The ``gaml.v1.Asset`` message of a JSON draft (what a client sends to ``Put``), validated as
    :func:`draft_from_json` validates it: the same errors, without making the draft's domain values (the node
    makes them from the message). A :class:`PreparedDraft`'s is the message it holds (not a copy: a request that
    takes it copies it)."""
    if isinstance(obj, PreparedDraft):
        return obj.message
    msg, prepared = _draft_message(obj)
    # What draft_from_json refuses past the message: an UNSPECIFIED asset_type, a nested value the domain refuses.
    _draft_fields(msg, [n for k in prepared if (n := _BY_JSON_KEY[k].name) == "asset_type" or n in _NESTED])
    return msg


def draft_from_json(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for :class:`policy.model.Asset` from an asset in the protobuf JSON mapping.

    Field names may be the original (``privacy_scope``) or lowerCamelCase (``privacyScope``) ones. Enum values may be
    proto names (``PRIVACY_SCOPE_USER_PRIVATE``) or the domain's short names (``user_private``), case-insensitively.
    Only the fields the JSON gives appear in the result (a ``null`` counts as absent, and so does an UNSPECIFIED enum
    other than ``asset_type``), so the caller fills the rest (``id``, ``signature``, ``source_node``, ``created_at``,
    ``version`` ...). Values are domain values: enum members, a plain payload dict (whole numbers as ints), ints for
    timestamps, tuples for lists, ``SourcePointer``/``Retention``/``Heat`` objects, bytes for the signature.

    Raises :class:`UnknownEnumValue` for an enum value the schema does not define (the message names the field and
    the accepted names), and :class:`InvalidAsset` for anything else malformed: not an object, an unknown field, a
    field given twice, or a value of the wrong type (with json_format's message; a bool for a number or an enum, which
    json_format would read as 1, by the field's name).
    """
    msg, prepared = _draft_message(obj)
    return _draft_fields(msg, [_BY_JSON_KEY[k].name for k in prepared if k in _BY_JSON_KEY])


def draft_as_sent(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The draft fields a node reads from the JSON draft ``obj`` sent over the wire: ``draft_from_pb`` of
    ``draft_pb_from_json``, so that a put in-process reads a draft as a put through a daemon does. They differ from
    :func:`draft_from_json`'s where a field is given at its protobuf default (``0``, ``""``, ``false``, ``[]``): the
    wire cannot tell that from a field not given, so neither does this. A :class:`PreparedDraft` is not read again."""
    return draft_from_pb(draft_pb_from_json(obj))


def draft_from_pb(msg: asset_pb2.Asset) -> dict[str, Any]:
    """The draft fields of a wire asset (what a node reads from ``Put``): what is set in it, as
    :func:`draft_from_json` reads the message's JSON mapping, without writing and reading that JSON (an unset or
    UNSPECIFIED field is absent from the draft, ``asset_type`` too: building the asset then refuses it). Raises
    :class:`UnknownEnumValue` for an enum number the schema does not define, and :class:`InvalidAsset` for a payload
    number JSON cannot hold (NaN, ±Infinity)."""
    return _draft_fields(msg, [fd.name for fd, _ in msg.ListFields()])


def _draft_fields(msg: asset_pb2.Asset, names: Sequence[str]) -> dict[str, Any]:
    """The domain values of the fields ``names`` of a draft's message (``draft_from_json``'s result)."""
    draft: dict[str, Any] = {}
    for name in names:
        if name in ENUM_FIELDS:
            member = _enum_from_pb(name, getattr(msg, name))
            if member is None:
                if name == "asset_type":
                    raise InvalidAsset("asset_type is required (got ASSET_TYPE_UNSPECIFIED)")
                continue
            draft[name] = member
        elif name == "payload":
            try:
                draft[name] = struct_json(msg.payload, MAX_PAYLOAD_DEPTH)
                continue
            except ValueError:  # not finite, or nested too deep: the mapping's path says which
                pass
            try:
                payload = _payload_from_pb(msg.payload)
            except (json_format.Error, ValueError) as e:  # a number JSON cannot hold (NaN, ±Infinity)
                raise InvalidAsset(f"the asset does not fit its JSON form: {e}") from None
            draft[name] = thaw_json(freeze_json(payload))
        else:
            draft[name] = _field_from_pb(msg, name)
    return draft


def int64s_as_ints(d: dict[str, Any], descriptor: Any) -> None:
    """Turn the proto JSON mapping's 64-bit integer strings back into ints, in place (recursing into messages)."""
    for fd in descriptor.fields:
        if fd.name not in d:
            continue
        if fd.type in _INT64_TYPES:
            d[fd.name] = int(d[fd.name])
        elif fd.message_type is not None and fd.message_type.full_name.startswith("gaml."):
            int64s_as_ints(d[fd.name], fd.message_type)


def asset_to_json(asset: Asset) -> dict[str, Any]:
    """A plain JSON-able dict for display: the protobuf JSON mapping with the original (snake_case) field names.

    It is ``json_format.MessageToDict(asset_to_pb(asset), preserving_proto_field_name=True)`` with every field
    printed (defaults included; ``source`` only when there is one) in the schema's order, and three changes for
    readability: enums are the domain's short lower-case names (``user_private``), the payload is the plain JSON object
    (whole numbers as ints), and 64-bit integers (timestamps, version, offsets) are JSON numbers rather than strings.
    ``signature`` stays base64, as in the protobuf JSON mapping. :func:`draft_from_json` reads the result back. The
    rendering is :func:`asset_json_from_pb`'s, so a hit reads the same through every door; an asset stored before
    payloads were limited in depth (which cannot travel) shows its payload as it is, as it always did.
    """
    msg = asset_to_pb(asset)
    try:
        return asset_json_from_pb(msg)
    except PayloadTooDeep:
        return _asset_json_mapped(msg, thaw_json(asset.payload))
