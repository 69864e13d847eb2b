"""One asset's mutable record as an Automerge document: the only module that imports the CRDT binding.

Replicas edit an asset concurrently and exchange whole-document snapshots; merging them must give every replica the
same record whatever the order, field by field. Automerge does that for a map of scalars, so a record is stored as a
*flat* map: one root key per scalar field, per dict entry and per set element. Keys, by the first character:

- ``=field`` → the field's value as canonical JSON text (last writer wins per field). Bools, numbers and ``None`` go
  through the text too, so the binding's scalar types (rc1 stores ``True`` as an int in its high-level API, and
  ``Counter`` panics) never matter, and ``0.1`` and ``1.0`` come back as the same Python values.
- ``{field`` → a dict field (``payload``, ``retention_policy``, ``source`` when set): an empty marker, so that ``{}``
  survives, and ``{field\\x00key`` → that entry's value as canonical JSON text (last writer wins per key).
- ``[field`` → a set of strings (``tags``, ``entities``, ``allowed_principals``…): an empty marker, so that ``[]``
  survives, and ``[field\\x00element`` → ``true``. Concurrent additions both survive, a removal removes.

Why flat and not a nested map per field: two replicas that each *create* ``payload`` (two nodes that ingest the same
content, whose ids are equal because they are hashes of content) would create two map objects under one key, and
Automerge keeps only one of them, dropping the other's entries. Root keys never collide that way. A list of strings is a
set only if it is sorted and without duplicates (as the asset model normalizes them); any other list is one JSON value,
so that every record round-trips exactly. A field held under two kinds at once (after concurrent edits that changed
its kind) reads as the first of scalar, dict, set; the next :meth:`AssetDoc.update` removes the others.

Every Automerge call is made here, every failure of the binding becomes :class:`CorruptDoc`, and a document is checked
when it is loaded and after a merge, so an :class:`AssetDoc` always materializes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson
from automerge.core import ROOT, Document, ScalarType

from gaml.crdt.errors import CorruptDoc
from gaml.policy.errors import InvalidAsset
from gaml.policy.model import canonical_json

ACTOR_BYTES: Final = 16
SCALAR: Final = "="
DICT: Final = "{"
SET: Final = "["
SEP: Final = "\x00"  # between a field's name and an entry key or set element; field names may not contain it
_KIND_ORDER: Final = (SCALAR, DICT, SET)  # which kind a field reads as when it is held under several

_Flat = dict[str, str | bool]  # a record in the document's layout: root key -> Str text or Boolean true


def _binding_failed(e: BaseException) -> bool:
    """Whether ``e`` is a failure of the binding: a Rust error (``Exception``) or a Rust panic (``PanicException``).

    pyo3 raises panics as ``pyo3_runtime.PanicException``, a ``BaseException``, which cannot be imported by name.
    """
    return isinstance(e, Exception) or type(e).__name__ == "PanicException"


# -- the layout: record <-> flat map -------------------------------------------------------------------------------


def _check_json(value: Any, where: str) -> None:
    """Refuse what canonical JSON would change on the way back: non-finite floats, non-JSON types, non-str keys."""
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidAsset(f"{where}: {value!r} has no JSON form")
        return
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _check_json(v, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidAsset(f"{where}: the key {k!r} is not a string")
            _check_json(v, f"{where}.{k}")
        return
    raise InvalidAsset(f"{where}: a {type(value).__name__} is not a JSON value")


def _text(value: Any, where: str) -> str:
    text = canonical_json(value)  # InvalidAsset if not encodable (too deep, an int too large)
    _check_json(value, where)
    return text


def _is_set(value: Any) -> bool:
    """A list of strings, sorted and without duplicates: stored as a set. An empty list is one too."""
    return (
        isinstance(value, list | tuple)
        and all(isinstance(v, str) for v in value)
        and all(a < b for a, b in itertools.pairwise(value))
    )


def _flatten(record: Mapping[str, Any]) -> _Flat:
    """The flat layout of ``record`` (see the module docstring). :class:`InvalidAsset` if it has no exact JSON form."""
    if not isinstance(record, Mapping):
        raise InvalidAsset(f"a record is a mapping of field names to JSON values, got {type(record).__name__}")
    flat: _Flat = {}
    for field, value in record.items():
        if not isinstance(field, str) or SEP in field:
            raise InvalidAsset(f"a record's field name is a string without NUL characters, got {field!r}")
        if isinstance(value, dict):
            flat[DICT + field] = ""
            for key, entry in value.items():
                if not isinstance(key, str):
                    raise InvalidAsset(f"{field}: the key {key!r} is not a string")
                flat[DICT + field + SEP + key] = _text(entry, f"{field}.{key}")
        elif _is_set(value):
            flat[SET + field] = ""
            for element in value:
                flat[SET + field + SEP + element] = True
        else:
            flat[SCALAR + field] = _text(value, field)
    return flat


def _parse(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        raise CorruptDoc("a record value is not JSON text") from None


def _unflatten(flat: Mapping[str, str | bool]) -> dict[str, Any]:
    """The record held in a flat map. :class:`CorruptDoc` if a key or value does not follow the layout."""
    fields: dict[str, dict[str, Any]] = {}  # field -> kind -> its value (scalar) or entries (dict, set)
    for key, value in flat.items():
        kind, rest = key[:1], key[1:]
        field, sep, sub = rest.partition(SEP)
        if kind not in _KIND_ORDER or (kind == SCALAR and sep):
            raise CorruptDoc(f"the root key {key!r} does not follow the record layout")
        if sep and kind == SET:
            if value is not True:
                raise CorruptDoc(f"the set element {key!r} is not true")
        elif not isinstance(value, str) or (not sep and kind != SCALAR and value != ""):
            raise CorruptDoc(f"the root key {key!r} holds a value of the wrong type")
        kinds = fields.setdefault(field, {})
        if kind == SCALAR:
            kinds[SCALAR] = _parse(str(value))
        elif kind == DICT:
            entries = kinds.setdefault(DICT, {})
            if sep:
                entries[sub] = _parse(str(value))
        else:
            elements = kinds.setdefault(SET, {})
            if sep:
                elements[sub] = True
    record: dict[str, Any] = {}
    for field in sorted(fields):
        kinds = fields[field]
        kind = next(k for k in _KIND_ORDER if k in kinds)
        if kind == SCALAR:
            record[field] = kinds[SCALAR]
        elif kind == DICT:
            record[field] = dict(sorted(kinds[DICT].items()))
        else:
            record[field] = sorted(kinds[SET])
    return record


# -- the document --------------------------------------------------------------------------------------------------


def _read(doc: Document) -> _Flat:
    """The root map of ``doc`` as a flat map. :class:`CorruptDoc` if it holds anything but Str and Boolean values."""
    flat: _Flat = {}
    for key in doc.keys(ROOT):
        got = doc.get(ROOT, key)
        if got is None:  # pragma: no cover - keys() lists only keys that have a value
            continue
        value, _ = got
        if not isinstance(value, tuple):
            raise CorruptDoc(f"the root key {key!r} holds an object, not a value")
        scalar_type, scalar = value
        if scalar_type == ScalarType.Str and isinstance(scalar, str):
            flat[key] = scalar
        elif scalar_type == ScalarType.Boolean and scalar is True:
            flat[key] = True
        else:
            raise CorruptDoc(f"the root key {key!r} holds a {scalar_type} value")
    return flat


def _check_actor(actor: bytes) -> bytes:
    if not isinstance(actor, bytes) or len(actor) != ACTOR_BYTES:
        raise InvalidAsset(f"an actor id is {ACTOR_BYTES} bytes")
    return actor


class AssetDoc:
    """One asset's record as an Automerge document, edited by one actor (this node) and merged with others'.

    Keep one instance per asset per node, and never make a second document with the same actor for an asset whose
    changes by that actor exist elsewhere: Automerge numbers an actor's changes, and two different changes with one
    number cannot be merged (:meth:`merge` raises :class:`CorruptDoc`). Load the saved document instead.
    """

    __slots__ = ("_actor", "_doc")

    def __init__(self, doc: Document, actor: bytes) -> None:  # use new() or load()
        self._doc = doc
        self._actor = actor

    @classmethod
    def new(cls, actor: bytes) -> AssetDoc:
        """An empty document; ``actor`` (16 bytes) names this node's changes."""
        return cls(Document(actor_id=_check_actor(actor)), actor)

    @classmethod
    def load(cls, data: bytes, actor: bytes) -> AssetDoc:
        """The document saved in ``data``, to be edited as ``actor``. :class:`CorruptDoc` unless it is one."""
        _check_actor(actor)
        if not isinstance(data, bytes) or not data:
            raise CorruptDoc("a saved document is non-empty bytes")
        try:
            doc = Document.load(data)
            doc.set_actor(actor)
        except BaseException as e:
            if not _binding_failed(e):
                raise
            raise CorruptDoc(f"not a saved Automerge document: {e}") from None
        _unflatten(_read(doc))  # a document that loads always materializes
        return cls(doc, actor)

    def save(self) -> bytes:
        """The whole document (its history included), compressed: what a snapshot object carries."""
        return self._doc.save()

    def heads(self) -> tuple[bytes, ...]:
        """The hashes of the latest changes, sorted: equal heads mean equal history, hence equal records."""
        return tuple(sorted(self._doc.get_heads()))

    def record(self) -> dict[str, Any]:
        """The materialized record: plain JSON types, keys sorted."""
        return _unflatten(_read(self._doc))

    def update(self, record: Mapping[str, Any]) -> bool:
        """Make the document hold ``record``, in one change that writes only what differs; False (no change) if none.

        :class:`InvalidAsset` (and no change) if ``record`` is not a mapping of field names to exact JSON values.
        """
        want = _flatten(record)
        have = _read(self._doc)
        puts = [(k, v) for k, v in want.items() if k not in have or have[k] != v or type(have[k]) is not type(v)]
        deletes = [k for k in have if k not in want]
        if not puts and not deletes:
            return False
        with self._doc.transaction() as tx:
            for key in deletes:
                tx.delete(ROOT, key)
            for key, value in puts:
                if isinstance(value, bool):
                    tx.put(ROOT, key, ScalarType.Boolean, value)
                else:
                    tx.put(ROOT, key, ScalarType.Str, value)
        return True

    def merge(self, other: AssetDoc) -> bool:
        """Merge ``other``'s history into this one; True if our heads changed.

        Atomic: :class:`CorruptDoc` (and this document unchanged) if the binding refuses the merge (e.g. two different
        changes numbered alike by one actor) or the merged document would not hold a record.
        """
        if other is self:
            return False
        before = self.heads()
        try:
            merged = self._doc.fork()
            merged.set_actor(self._actor)
            merged.merge(other._doc)
        except BaseException as e:
            if not _binding_failed(e):
                raise
            raise CorruptDoc(f"the documents cannot be merged: {e}") from None
        if tuple(sorted(merged.get_heads())) == before:
            return False
        _unflatten(_read(merged))
        self._doc = merged
        return True

    def contains(self, heads: Sequence[bytes]) -> bool:
        """Whether every change in ``heads`` is in this document's history (then merging them changes nothing)."""
        wanted = set(heads)
        if not wanted:
            return True
        known = {change.hash for change in self._doc.get_changes([])}
        return wanted <= known

    def __repr__(self) -> str:
        return f"AssetDoc(actor={self._actor.hex()}, heads={len(self._doc.get_heads())})"
