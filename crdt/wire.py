"""The binary messages of the sync protocol (``/gaml/sync/1.0.0``). Pure core: bytes in, typed messages out.

Why a hand-written binary format rather than JSON or protobuf: an initial sync of a boundary carries every object id
twice (in a Have and a Need) and every object once, so the framing is the overhead. Ids travel as 32 raw bytes, tags
as 16, counts, lengths and log positions as LEB128 varints; a Send of objects of about a kilobyte costs two bytes of
framing per object. The transport (crdt/p2p.py) adds its own u32 length prefix per frame.

Every frame is ``version(1) | kind(1) | body``:

=======  ====  =========================================================================================
kind     byte  body
=======  ====  =========================================================================================
Hello    0x01  nonce(16) [| lineage(8)]
Tags     0x02  nonce(16, the sender's) | echo(16, the receiver's nonce) | n | tag(16) * n
Roster   0x03  tag(16) | ack(8) | roster bytes (the rest of the frame; none: an ack only)
Have     0x04  tag(16) | upto | n | id(32) * n
Need     0x05  tag(16) | n | id(32) * n
Send     0x06  tag(16) | n | (len | object) * n | m | id(32) * m     (the m ids are ``missing``)
Ack      0x07  tag(16) | upto
Ask      0x08  tag(16) | qid(8) | k | len | text (UTF-8)
Answer   0x09  tag(16) | qid(8) | n | (len | object) * n
=======  ====  =========================================================================================

(``n``, ``m``, ``len`` and ``upto`` are varints.) :func:`decode` is strict and canonical: it accepts exactly the
bytes :func:`encode` writes (minimal varints, no trailing bytes, every limit below), so ``encode(decode(b)) == b``
for every frame it accepts, and it raises :class:`BadMessage`, never anything else, on all other input. The limits
bound what one frame can make a receiver allocate or do.

What the fields mean is the sync engine's business (crdt/sync.py); in short: a tag names one boundary within one
session (a keyed hash of the boundary id and both nonces), ``ack`` is a digest of the peer's roster that the sender
holds, ``upto`` is a position in the sender's log, and ``missing`` lists needed ids the sender no longer holds.
Ask and Answer are a peer read (a search or hydration that asks the boundary's members for candidates): ``qid``
matches an Answer to its Ask, ``k`` caps the objects asked for, ``text`` is the goal.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Final

from gaml.crdt.errors import BadMessage

VERSION: Final = 1

NONCE_BYTES: Final = 16
LINEAGE_BYTES: Final = 8
TAG_BYTES: Final = 16
ID_BYTES: Final = 32
ACK_BYTES: Final = 8  # a digest of a roster (an equality check between two peers, not a security boundary)

MAX_FRAME_BYTES: Final = 8 << 20  # the transport's frame limit (crdt/p2p.py)
MAX_TAGS: Final = 1024  # boundaries one node may share in one session
MAX_IDS: Final = 4096  # ids in one Have, Need, or Send's missing list
MAX_OBJECTS: Final = 4096  # objects in one Send
MAX_OBJECT_BYTES: Final = 4 << 20  # equals crdt.objects.MAX_OBJECT_BYTES
MAX_ROSTER_BYTES: Final = MAX_FRAME_BYTES - 2 - TAG_BYTES - ACK_BYTES  # a Roster fills at most one frame
MAX_UPTO: Final = (1 << 64) - 1  # log positions are unsigned 64-bit
QID_BYTES: Final = 8  # a peer read's id, drawn by the asker
MAX_ASK_K: Final = 64  # objects one Ask may ask for
MAX_ASK_TEXT_BYTES: Final = 16 << 10  # a goal, UTF-8 (a hydration goal is at most 8,000 characters)

# An upper bound of a Send frame's bytes besides its objects and missing ids (version, kind, tag, two counts).
SEND_BASE_BYTES: Final = 2 + TAG_BYTES + 3 + 3

HELLO: Final = 0x01
TAGS: Final = 0x02
ROSTER: Final = 0x03
HAVE: Final = 0x04
NEED: Final = 0x05
SEND: Final = 0x06
ACK: Final = 0x07
ASK: Final = 0x08
ANSWER: Final = 0x09

NO_ACK: Final = bytes(ACK_BYTES)  # the ack of a sender that holds no roster of the receiver yet


# -- messages ------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Hello:
    """Opens (or restarts) a session: the sender's fresh nonce, and the lineage of its store (8 bytes, new when the
    store was restored from a backup: the receiver then offers its whole log again; none from an older node)."""

    type: ClassVar[str] = "hello"
    nonce: bytes
    lineage: bytes = b""


@dataclasses.dataclass(frozen=True, slots=True)
class Tags:
    """The sender's boundaries, as tags bound to this session's two nonces (so only shared boundaries match)."""

    type: ClassVar[str] = "tags"
    nonce: bytes  # the sender's nonce
    echo: bytes  # the receiver's nonce, as the sender knows it
    tags: tuple[bytes, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Roster:
    """The sender's current roster of one boundary (or none: an ack only), and a digest of the receiver's roster
    that the sender holds (``ack``)."""

    type: ClassVar[str] = "roster"
    tag: bytes
    ack: bytes
    roster: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class Have:
    """Object ids of the sender's log after the receiver's cursor, up to log position ``upto``."""

    type: ClassVar[str] = "have"
    tag: bytes
    ids: tuple[bytes, ...]
    upto: int


@dataclasses.dataclass(frozen=True, slots=True)
class Need:
    """The ids of the last Have that the sender lacks."""

    type: ClassVar[str] = "need"
    tag: bytes
    ids: tuple[bytes, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Send:
    """Objects that were needed, and needed ids the sender no longer holds (``missing``)."""

    type: ClassVar[str] = "send"
    tag: bytes
    objects: tuple[bytes, ...]
    missing: tuple[bytes, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Ack:
    """The sender holds every object of the Have up to ``upto`` (or rejected it): advance the cursor."""

    type: ClassVar[str] = "ack"
    tag: bytes
    upto: int


@dataclasses.dataclass(frozen=True, slots=True)
class Ask:
    """A peer read: the sender asks for up to ``k`` objects of this boundary that best match ``text``."""

    type: ClassVar[str] = "ask"
    tag: bytes
    qid: bytes
    k: int
    text: str


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """The objects that answer the sender's Ask ``qid`` (possibly none)."""

    type: ClassVar[str] = "answer"
    tag: bytes
    qid: bytes
    objects: tuple[bytes, ...]


Message = Hello | Tags | Roster | Have | Need | Send | Ack | Ask | Answer


# -- encoding ------------------------------------------------------------------------------------------------------


def varint(n: int) -> bytes:
    """``n`` (0 ≤ n < 2**64) as an unsigned LEB128 varint."""
    if not 0 <= n <= MAX_UPTO:
        raise BadMessage(f"a varint holds 0..2**64-1, not {n}")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint_size(n: int) -> int:
    """How many bytes :func:`varint` writes for ``n``."""
    return max(1, (n.bit_length() + 6) // 7)


def send_object_cost(size: int) -> int:
    """The bytes one object of ``size`` bytes adds to a Send frame."""
    return varint_size(size) + size


def encode(msg: Message) -> bytes:
    """The frame of ``msg``. :class:`BadMessage` if a field is malformed or over a limit (a caller's bug)."""
    head = bytes((VERSION,))
    if isinstance(msg, Hello):
        _check_fixed(msg.nonce, NONCE_BYTES, "nonce")
        if msg.lineage:
            _check_fixed(msg.lineage, LINEAGE_BYTES, "lineage")
        return head + bytes((HELLO,)) + msg.nonce + msg.lineage
    if isinstance(msg, Tags):
        _check_fixed(msg.nonce, NONCE_BYTES, "nonce")
        _check_fixed(msg.echo, NONCE_BYTES, "echo")
        return head + bytes((TAGS,)) + msg.nonce + msg.echo + _fixed_list(msg.tags, TAG_BYTES, MAX_TAGS, "tags")
    if isinstance(msg, Roster):
        _check_fixed(msg.tag, TAG_BYTES, "tag")
        _check_fixed(msg.ack, ACK_BYTES, "ack")
        if not isinstance(msg.roster, bytes) or len(msg.roster) > MAX_ROSTER_BYTES:
            raise BadMessage(f"a roster is bytes of at most {MAX_ROSTER_BYTES}")
        return head + bytes((ROSTER,)) + msg.tag + msg.ack + msg.roster
    if isinstance(msg, Have):
        _check_fixed(msg.tag, TAG_BYTES, "tag")
        return head + bytes((HAVE,)) + msg.tag + varint(msg.upto) + _fixed_list(msg.ids, ID_BYTES, MAX_IDS, "ids")
    if isinstance(msg, Need):
        _check_fixed(msg.tag, TAG_BYTES, "tag")
        return head + bytes((NEED,)) + msg.tag + _fixed_list(msg.ids, ID_BYTES, MAX_IDS, "ids")
    if isinstance(msg, Send):
        _check_fixed(msg.tag, TAG_BYTES, "tag")
        parts = [head, bytes((SEND,)), msg.tag, _objects(msg.objects, MAX_OBJECTS)]
        parts.append(_fixed_list(msg.missing, ID_BYTES, MAX_IDS, "missing"))
        return _frame(parts)
    if isinstance(msg, Ack):
        _check_fixed(msg.tag, TAG_BYTES, "tag")
        return head + bytes((ACK,)) + msg.tag + varint(msg.upto)
    if isinstance(msg, Ask):
        _check_fixed(msg.tag, TAG_BYTES, "tag")
        _check_fixed(msg.qid, QID_BYTES, "qid")
        if not isinstance(msg.k, int) or not 1 <= msg.k <= MAX_ASK_K:
            raise BadMessage(f"an Ask asks for 1..{MAX_ASK_K} objects")
        try:
            text = msg.text.encode()
        except (AttributeError, UnicodeEncodeError):
            text = None
        if not isinstance(text, bytes) or len(text) > MAX_ASK_TEXT_BYTES:
            raise BadMessage(f"an Ask's text is a string of at most {MAX_ASK_TEXT_BYTES} UTF-8 bytes")
        return head + bytes((ASK,)) + msg.tag + msg.qid + varint(msg.k) + varint(len(text)) + text
    if isinstance(msg, Answer):
        _check_fixed(msg.tag, TAG_BYTES, "tag")
        _check_fixed(msg.qid, QID_BYTES, "qid")
        return _frame([head, bytes((ANSWER,)), msg.tag, msg.qid, _objects(msg.objects, MAX_ASK_K)])
    raise BadMessage(f"not a sync message: {type(msg).__name__}")


def _objects(objects: tuple[bytes, ...], limit: int) -> bytes:
    if len(objects) > limit:
        raise BadMessage(f"a frame holds at most {limit} objects")
    parts = [varint(len(objects))]
    for obj in objects:
        if not isinstance(obj, bytes) or len(obj) > MAX_OBJECT_BYTES:
            raise BadMessage(f"an object is bytes of at most {MAX_OBJECT_BYTES}")
        parts += (varint(len(obj)), obj)
    return b"".join(parts)


def _frame(parts: list[bytes]) -> bytes:
    frame = b"".join(parts)
    if len(frame) > MAX_FRAME_BYTES:
        raise BadMessage(f"a frame is at most {MAX_FRAME_BYTES} bytes")
    return frame


def _check_fixed(value: bytes, size: int, what: str) -> None:
    if not isinstance(value, bytes) or len(value) != size:
        raise BadMessage(f"{what} is {size} bytes")


def _fixed_list(items: tuple[bytes, ...], size: int, limit: int, what: str) -> bytes:
    if len(items) > limit:
        raise BadMessage(f"{what}: at most {limit}")
    for item in items:
        _check_fixed(item, size, what)
    return varint(len(items)) + b"".join(items)


# -- decoding ------------------------------------------------------------------------------------------------------


class _Reader:
    """A cursor over a frame; every read past the end or over a limit raises :class:`BadMessage`."""

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, n: int) -> bytes:
        end = self._pos + n
        if end > len(self._data):
            raise BadMessage("truncated frame")
        out = self._data[self._pos : end]
        self._pos = end
        return out

    def rest(self) -> bytes:
        out = self._data[self._pos :]
        self._pos = len(self._data)
        return out

    def varint(self, limit: int = MAX_UPTO) -> int:
        value = shift = 0
        for i in range(10):
            if self._pos >= len(self._data):
                raise BadMessage("truncated varint")
            byte = self._data[self._pos]
            self._pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if byte == 0 and i > 0:
                    raise BadMessage("overlong varint")
                if value > limit:
                    raise BadMessage(f"value {value} over its limit {limit}")
                return value
            shift += 7
        raise BadMessage("varint longer than 10 bytes")

    def fixed_list(self, size: int, limit: int) -> tuple[bytes, ...]:
        n = self.varint(limit)
        blob = self.take(n * size)
        return tuple(blob[i : i + size] for i in range(0, n * size, size))

    def objects(self, limit: int) -> tuple[bytes, ...]:
        return tuple(self.take(self.varint(MAX_OBJECT_BYTES)) for _ in range(self.varint(limit)))

    def left(self) -> int:
        return len(self._data) - self._pos

    def end(self) -> None:
        if self._pos != len(self._data):
            raise BadMessage("trailing bytes after the message")


def decode(frame: bytes | bytearray | memoryview) -> Message:
    """The message in ``frame``. Raises :class:`BadMessage`, and nothing else, on any malformed input."""
    if not isinstance(frame, bytes | bytearray | memoryview):
        raise BadMessage("a frame is bytes")
    data = bytes(frame)
    if len(data) > MAX_FRAME_BYTES:
        raise BadMessage(f"a frame is at most {MAX_FRAME_BYTES} bytes")
    if len(data) < 2:
        raise BadMessage("truncated frame")
    if data[0] != VERSION:
        raise BadMessage(f"unsupported sync message version {data[0]} (this node speaks {VERSION})")
    kind, r = data[1], _Reader(data)
    r.take(2)
    msg: Message
    if kind == HELLO:
        nonce = r.take(NONCE_BYTES)
        msg = Hello(nonce, r.take(LINEAGE_BYTES) if r.left() >= LINEAGE_BYTES else b"")
    elif kind == TAGS:
        msg = Tags(r.take(NONCE_BYTES), r.take(NONCE_BYTES), r.fixed_list(TAG_BYTES, MAX_TAGS))
    elif kind == ROSTER:
        tag, ack = r.take(TAG_BYTES), r.take(ACK_BYTES)
        msg = Roster(tag, ack, r.rest())  # the frame limit bounds it by MAX_ROSTER_BYTES
    elif kind == HAVE:
        tag, upto = r.take(TAG_BYTES), r.varint()
        msg = Have(tag, r.fixed_list(ID_BYTES, MAX_IDS), upto)
    elif kind == NEED:
        msg = Need(r.take(TAG_BYTES), r.fixed_list(ID_BYTES, MAX_IDS))
    elif kind == SEND:
        tag = r.take(TAG_BYTES)
        objects = r.objects(MAX_OBJECTS)
        msg = Send(tag, objects, r.fixed_list(ID_BYTES, MAX_IDS))
    elif kind == ACK:
        msg = Ack(r.take(TAG_BYTES), r.varint())
    elif kind == ASK:
        tag, qid = r.take(TAG_BYTES), r.take(QID_BYTES)
        k = r.varint(MAX_ASK_K)
        if k == 0:
            raise BadMessage("an Ask asks for at least one object")
        try:
            text = r.take(r.varint(MAX_ASK_TEXT_BYTES)).decode()
        except UnicodeDecodeError:
            raise BadMessage("an Ask's text is not UTF-8") from None
        msg = Ask(tag, qid, k, text)
    elif kind == ANSWER:
        tag, qid = r.take(TAG_BYTES), r.take(QID_BYTES)
        msg = Answer(tag, qid, r.objects(MAX_ASK_K))
    else:
        raise BadMessage(f"unknown sync message kind 0x{kind:02x}")
    r.end()
    return msg
