"""JSON read strictly for what people hand to GAML (assets, planes, config, invitations): a key given twice is refused
with its name rather than silently taking the last value. Pure: no I/O."""

from __future__ import annotations

import json
from typing import Any

from policy.errors import InvalidInput


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InvalidInput(f"the key {key!r} is given twice in one object")
        out[key] = value
    return out


def loads(text: str | bytes) -> Any:
    """``json.loads`` that refuses duplicate keys (:class:`InvalidInput` naming the key); other errors as json's."""
    return json.loads(text, object_pairs_hook=_pairs)


__all__ = ["loads"]
