"""The sync messages: exact layouts, round trips, limits, and a decoder that only ever raises BadMessage."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gaml.crdt import wire
from gaml.crdt.errors import BadMessage
from gaml.crdt.wire import Ack, Answer, Ask, Have, Hello, Need, Roster, Send, Tags
from gaml.policy.errors import GamlError

SETTINGS = settings(derandomize=True, max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TAG = bytes(range(16))
OID = bytes(range(32))


def fixed(n: int) -> st.SearchStrategy[bytes]:
    return st.binary(min_size=n, max_size=n)


messages: st.SearchStrategy[wire.Message] = st.one_of(
    st.builds(Hello, fixed(16)),
    st.builds(Hello, fixed(16), fixed(8)),
    st.builds(Tags, fixed(16), fixed(16), st.lists(fixed(16), max_size=8).map(tuple)),
    st.builds(Roster, fixed(16), fixed(8), st.binary(max_size=300)),
    st.builds(Have, fixed(16), st.lists(fixed(32), max_size=6).map(tuple), st.integers(0, wire.MAX_UPTO)),
    st.builds(Need, fixed(16), st.lists(fixed(32), max_size=6).map(tuple)),
    st.builds(
        Send,
        fixed(16),
        st.lists(st.binary(max_size=200), max_size=5).map(tuple),
        st.lists(fixed(32), max_size=3).map(tuple),
    ),
    st.builds(Ack, fixed(16), st.integers(0, wire.MAX_UPTO)),
    st.builds(Ask, fixed(16), fixed(8), st.integers(1, wire.MAX_ASK_K), st.text(max_size=80)),
    st.builds(Answer, fixed(16), fixed(8), st.lists(st.binary(max_size=200), max_size=5).map(tuple)),
)


def test_layouts_are_exact() -> None:
    """Each kind has the documented layout: version, kind, fixed-size fields, varints; nothing else."""
    assert wire.encode(Hello(b"n" * 16)) == b"\x01\x01" + b"n" * 16
    assert wire.encode(Hello(b"n" * 16, b"L" * 8)) == b"\x01\x01" + b"n" * 16 + b"L" * 8
    assert wire.encode(Tags(b"a" * 16, b"b" * 16, (TAG,))) == b"\x01\x02" + b"a" * 16 + b"b" * 16 + b"\x01" + TAG
    assert wire.encode(Roster(TAG, b"k" * 8, b"RR")) == b"\x01\x03" + TAG + b"k" * 8 + b"RR"
    assert wire.encode(Have(TAG, (OID, OID), 300)) == b"\x01\x04" + TAG + b"\xac\x02" + b"\x02" + OID + OID
    assert wire.encode(Need(TAG, (OID,))) == b"\x01\x05" + TAG + b"\x01" + OID
    assert wire.encode(Send(TAG, (b"xyz", b""), (OID,))) == b"\x01\x06" + TAG + b"\x02\x03xyz\x00" + b"\x01" + OID
    assert wire.encode(Ack(TAG, 0)) == b"\x01\x07" + TAG + b"\x00"
    qid = b"q" * 8
    assert wire.encode(Ask(TAG, qid, 16, "café")) == b"\x01\x08" + TAG + qid + b"\x10\x05caf\xc3\xa9"
    assert wire.encode(Answer(TAG, qid, (b"xyz",))) == b"\x01\x09" + TAG + qid + b"\x01\x03xyz"


def test_overhead_of_an_initial_sync_is_small() -> None:
    """Per object of ~1 KB: 32 B in a Have, 32 B in a Need, 2 B of framing in a Send; per frame at most ~24 B."""
    ids = tuple(bytes([i]) * 32 for i in range(256))
    objs = tuple(bytes([i]) * 1000 for i in range(256))
    have = wire.encode(Have(TAG, ids, 10_000))
    need = wire.encode(Need(TAG, ids))
    send = wire.encode(Send(TAG, objs))
    assert len(have) - 32 * 256 <= 2 + 16 + 3 + 2
    assert len(need) - 32 * 256 <= 2 + 16 + 2
    assert len(send) - 1000 * 256 == 2 + 16 + 2 + 256 * 2 + 1
    assert (len(have) + len(need) + len(send)) / (1000 * 256) < 1.07


@given(messages)
@SETTINGS
def test_round_trip(msg: wire.Message) -> None:
    """decode(encode(m)) == m for every message."""
    assert wire.decode(wire.encode(msg)) == msg


@given(st.binary(max_size=400))
@SETTINGS
def test_random_bytes_raise_only_bad_message(data: bytes) -> None:
    """Arbitrary bytes either decode to a message that re-encodes to exactly those bytes, or raise BadMessage."""
    try:
        msg = wire.decode(data)
    except BadMessage:
        return
    assert wire.encode(msg) == data


@given(messages, st.data())
@SETTINGS
def test_truncations_and_extensions_are_refused(msg: wire.Message, data: st.DataObject) -> None:
    """Every proper prefix of a frame, and a frame with bytes appended, raises BadMessage (except a Roster, whose
    roster runs to the end of the frame, so a prefix or extension is another roster: the replica verifies it; and a
    Hello, whose lineage is optional: a Hello without one and 8 more bytes is one with them, and the reverse)."""
    frame = wire.encode(msg)
    cut = data.draw(st.integers(0, len(frame) - 1))
    extra = data.draw(st.binary(min_size=1, max_size=8))
    if isinstance(msg, Hello):
        if not msg.lineage and len(extra) == wire.LINEAGE_BYTES:
            assert wire.decode(frame + extra) == Hello(msg.nonce, extra)
        else:
            with pytest.raises(BadMessage):
                wire.decode(frame + extra)
        if msg.lineage and cut == 2 + wire.NONCE_BYTES:
            assert wire.decode(frame[:cut]) == Hello(msg.nonce)
            return
    elif isinstance(msg, Roster):
        if cut >= 2 + 16 + 8:
            assert wire.decode(frame[:cut]) == Roster(msg.tag, msg.ack, msg.roster[: cut - 26])
            return
    else:
        with pytest.raises(BadMessage):
            wire.decode(frame + extra)
    with pytest.raises(BadMessage):
        wire.decode(frame[:cut])


def test_a_bad_message_is_a_gaml_error() -> None:
    """BadMessage is typed: a GamlError (and a ValueError)."""
    assert issubclass(BadMessage, GamlError) and issubclass(BadMessage, ValueError)


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        (b"", "truncated"),
        (b"\x01", "truncated"),
        (b"\x02\x01" + b"n" * 16, "version"),
        (b"\x01\x0a" + b"n" * 16, "kind"),
        (b"\x01\x08" + TAG + b"q" * 8 + b"\x00\x00", "at least one"),
        (b"\x01\x08" + TAG + b"q" * 8 + wire.varint(wire.MAX_ASK_K + 1) + b"\x00", "over its limit"),
        (b"\x01\x08" + TAG + b"q" * 8 + b"\x01" + wire.varint(wire.MAX_ASK_TEXT_BYTES + 1), "over its limit"),
        (b"\x01\x08" + TAG + b"q" * 8 + b"\x01\x02\xc3\x28", "not UTF-8"),
        (b"\x01\x09" + TAG + b"q" * 8 + wire.varint(wire.MAX_ASK_K + 1), "over its limit"),
        (b"\x01\x00", "kind"),
        (b"\x01\x07" + TAG + b"\x80\x00", "overlong"),  # a varint with a redundant zero byte
        (b"\x01\x07" + TAG + b"\xff" * 10 + b"\x01", "longer than 10"),
        (b"\x01\x07" + TAG + b"\xff" * 9 + b"\x7f", "over its limit"),  # > 2**64 - 1
        (b"\x01\x05" + TAG + wire.varint(wire.MAX_IDS + 1), "over its limit"),
        (b"\x01\x02" + b"n" * 32 + wire.varint(wire.MAX_TAGS + 1), "over its limit"),
        (b"\x01\x06" + TAG + wire.varint(wire.MAX_OBJECTS + 1), "over its limit"),
        (b"\x01\x06" + TAG + b"\x01" + wire.varint(wire.MAX_OBJECT_BYTES + 1), "over its limit"),
        (b"\x01\x05" + TAG + b"\x02" + OID, "truncated"),
        (b"\x01\x06" + TAG + b"\x01\x05abc", "truncated"),
        (b"\x01\x01" + b"n" * 17, "trailing"),
        (b"\x01\x07" + TAG + b"\x00\x00", "trailing"),
    ],
)
def test_malformed_frames_name_what_is_wrong(frame: bytes, why: str) -> None:
    """Truncations, unknown versions or kinds, non-canonical or oversized varints and counts are refused."""
    with pytest.raises(BadMessage, match=why):
        wire.decode(frame)


@pytest.mark.parametrize(
    ("msg", "why"),
    [
        (Ask(TAG, b"q" * 8, 0, "x"), "1..64"),
        (Ask(TAG, b"q" * 8, 65, "x"), "1..64"),
        (Ask(TAG, b"q" * 7, 1, "x"), "qid"),
        (Ask(TAG, b"q" * 8, 1, "\ud800"), "UTF-8"),
        (Ask(TAG, b"q" * 8, 1, "x" * (wire.MAX_ASK_TEXT_BYTES + 1)), "UTF-8"),
        (Answer(TAG, b"q" * 8, (b"",) * (wire.MAX_ASK_K + 1)), "at most 64"),
    ],
)
def test_bad_peer_reads_do_not_encode(msg: wire.Message, why: str) -> None:
    """An Ask or Answer over a limit is a caller's bug: BadMessage, never a frame the peer would refuse."""
    with pytest.raises(BadMessage, match=why):
        wire.encode(msg)


def test_frame_size_limit() -> None:
    """A frame over MAX_FRAME_BYTES is refused before parsing; a roster that fills a frame exactly is accepted."""
    with pytest.raises(BadMessage, match="at most"):
        wire.decode(b"\x01\x03" + bytes(wire.MAX_FRAME_BYTES - 1))
    biggest = Roster(TAG, wire.NO_ACK, bytes(wire.MAX_ROSTER_BYTES))
    assert len(wire.encode(biggest)) == wire.MAX_FRAME_BYTES
    with pytest.raises(BadMessage):
        wire.encode(Roster(TAG, wire.NO_ACK, bytes(wire.MAX_ROSTER_BYTES + 1)))


def test_non_bytes_are_refused() -> None:
    """decode takes bytes-like input only, and says so with BadMessage."""
    with pytest.raises(BadMessage):
        wire.decode("hello")  # type: ignore[arg-type]
    assert wire.decode(bytearray(wire.encode(Ack(TAG, 5)))) == Ack(TAG, 5)


@pytest.mark.parametrize(
    "msg",
    [
        Hello(b"short"),
        Hello(b"n" * 16, b"short"),
        Tags(b"n" * 16, b"n" * 15, ()),
        Tags(b"n" * 16, b"n" * 16, (b"x" * 15,)),
        Roster(TAG, b"k" * 7, b""),
        Have(TAG, (OID[:31],), 1),
        Have(TAG, (), -1),
        Have(TAG, (), 1 << 64),
        Need(TAG, (OID,) * (wire.MAX_IDS + 1)),
        Send(TAG, (bytes(wire.MAX_OBJECT_BYTES + 1),)),
        Send(TAG, (b"",) * (wire.MAX_OBJECTS + 1)),
        Send(TAG[:15], ()),
        Ack(TAG, -5),
    ],
)
def test_encode_refuses_what_decode_would(msg: wire.Message) -> None:
    """encode checks the same sizes and limits, so the engine can never put an undecodable frame on the wire."""
    with pytest.raises(BadMessage):
        wire.encode(msg)


def test_varint_sizes() -> None:
    """varint_size agrees with varint at every byte boundary."""
    for n in (0, 1, 127, 128, 16383, 16384, 2**63, wire.MAX_UPTO):
        assert wire.varint_size(n) == len(wire.varint(n))
    assert wire.send_object_cost(1000) == 1002
