"""The binary client protocol's frames: golden bytes written by hand from the grammar, the
framing limits, and hypothesis fuzzing (round trips; random bytes raise only ProtocolError)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokergroup.broker import wire
from brokergroup.broker.errors import ProtocolError
from brokergroup.broker.protocol import client_frames as cf

CONSUME_HEX = (
    "0000001c"  # length = 28: type + request id + 23 payload bytes
    "02"  # CONSUME
    "00000007"  # request id 7
    "0001" "74"  # topic "t"
    "00000003"  # queueId 3
    "0000000000000010"  # offset 16
    "00000020"  # maxCount 32
    "00001000"  # maxBytes 4096
)  # fmt: skip
COMMIT_HEX = (
    "00000017" "03" "00000008"
    "0001" "67"  # group "g"
    "0001" "74"  # topic "t"
    "00000000"  # queueId 0
    "0000000000000005"  # offset 5
)  # fmt: skip
GET_OFFSET_HEX = "0000000f" "04" "00000009" "0001" "67" "0001" "74" "00000001"  # fmt: skip
PRODUCE_HEX = "00000008" "01" "0000000a" "010203"  # fmt: skip  # payload: the batch bytes, as given
PUT_RESULT_HEX = (
    "0000003e" "81" "00000007"
    "06" "5055545f4f4b"  # status "PUT_OK"
    "0000"  # remark ""
    "0000"  # masterAddress none
    "0000000000000100"  # nextOffset 256
    "00000002"  # 2 messages
    "0000000000000000" "0000000000000000" "00"  # commitOffset 0, queueOffset 0, not a duplicate
    "0000000000000080" "ffffffffffffffff" "01"  # commitOffset 128, queueOffset none, duplicate
)  # fmt: skip
SNA_HEX = (
    "00000032" "81" "00000001"
    "15" "534552564943455f4e4f545f415641494c41424c45"  # "SERVICE_NOT_AVAILABLE" (21 bytes)
    "0001" "78"  # remark "x"
    "0006" "683a31323334"  # masterAddress "h:1234"
    "ffffffffffffffff"  # nextOffset none
    "00000000"
)  # fmt: skip
MESSAGES_HEX = (
    "00000064" "82" "00000002"
    "0000000000000002" "0000000000000000" "0000000000000002"  # next, min, max offsets
    "00000001"
    "0000000000000001" "0000000000000040" "0000000000000064" "00000000000000c8"  # queue, commit, born, store
    "0000000000000009" "0000000000000003"  # producerId 9, seq 3
    "00000009" "7b2261223a2262227d"  # properties {"a":"b"}
    "00000002" "6869"  # body "hi"
)  # fmt: skip
OFFSET_HEX = "0000000d" "83" "00000004" "ffffffffffffffff"  # fmt: skip
ERROR_HEX = (
    "00000018" "ff" "00000005"
    "0b" "4241445f52455155455354"  # "BAD_REQUEST"
    "0190"  # code 400
    "0003" "626164"  # remark "bad"
)  # fmt: skip

REQUESTS: list[tuple[int, cf.Request, str]] = [
    (7, cf.Consume(topic="t", queue_id=3, offset=16, max_count=32, max_bytes=4096), CONSUME_HEX),
    (8, cf.CommitOffset(group="g", topic="t", queue_id=0, offset=5), COMMIT_HEX),
    (9, cf.GetOffset(group="g", topic="t", queue_id=1), GET_OFFSET_HEX),
    (10, cf.Produce(b"\x01\x02\x03"), PRODUCE_HEX),
]
REPLIES: list[tuple[int, cf.Reply, str]] = [
    (
        7,
        cf.PutResult(
            status="PUT_OK", next_offset=256, appended=(cf.Appended(0, 0, False), cf.Appended(128, None, True))
        ),
        PUT_RESULT_HEX,
    ),
    (1, cf.PutResult(status="SERVICE_NOT_AVAILABLE", remark="x", master_address="h:1234"), SNA_HEX),
    (
        2,
        cf.Messages(
            next_offset=2,
            min_offset=0,
            max_offset=2,
            messages=(
                cf.ConsumedMessage(
                    queue_offset=1,
                    commit_offset=64,
                    born_timestamp_ms=100,
                    store_timestamp_ms=200,
                    producer_id=9,
                    seq=3,
                    properties={"a": "b"},
                    body=b"hi",
                ),
            ),
        ),
        MESSAGES_HEX,
    ),
    (4, cf.Offset(None), OFFSET_HEX),
    (5, cf.Error("BAD_REQUEST", 400, "bad"), ERROR_HEX),
]


def decode_one(data: bytes, *, max_frame: int = cf.DEFAULT_MAX_REPLY) -> cf.RawFrame:
    decoder = cf.FrameDecoder(max_frame=max_frame)
    decoder.feed(data)
    raw = decoder.next_frame()
    assert isinstance(raw, cf.RawFrame)
    assert decoder.buffered == 0
    return raw


@pytest.mark.parametrize(("rid", "request_", "golden"), REQUESTS)
def test_requests_match_golden_bytes(rid: int, request_: cf.Request, golden: str) -> None:
    assert cf.encode_request(rid, request_).hex() == golden
    raw = decode_one(bytes.fromhex(golden))
    assert raw.request_id == rid
    assert cf.parse_request(raw) == request_


@pytest.mark.parametrize(("rid", "reply", "golden"), REPLIES)
def test_replies_match_golden_bytes(rid: int, reply: cf.Reply, golden: str) -> None:
    assert cf.encode_reply(rid, reply).hex() == golden
    raw = decode_one(bytes.fromhex(golden))
    assert (raw.request_id, cf.parse_reply(raw)) == (rid, reply)


def test_frames_split_across_feeds_and_pipelined() -> None:
    stream = b"".join(bytes.fromhex(g) for _, _, g in REQUESTS)
    decoder = cf.FrameDecoder()
    got = []
    for i in range(len(stream)):  # one byte at a time
        decoder.feed(stream[i : i + 1])
        while (raw := decoder.next_frame()) is not cf.NEED_DATA:
            assert isinstance(raw, cf.RawFrame)
            got.append(cf.parse_request(raw))
    assert got == [r for _, r, _ in REQUESTS]
    assert decoder.buffered == 0


@pytest.mark.parametrize("length", [0, 4, 101])
def test_length_out_of_range_poisons_the_decoder(length: int) -> None:
    decoder = cf.FrameDecoder(max_frame=100)
    decoder.feed(length.to_bytes(4, "big"))  # the length alone is enough to refuse
    with pytest.raises(cf.FrameTooLarge, match=f"frame length {length} is out of range"):
        decoder.next_frame()
    with pytest.raises(cf.FrameTooLarge):
        decoder.feed(b"more")


def test_unknown_type_names_the_type_and_keeps_the_request_id() -> None:
    raw = decode_one(bytes.fromhex("000000057e0000002a"))
    with pytest.raises(cf.BadFrame, match="unknown request type 0x7e") as caught:
        cf.parse_request(raw)
    assert (caught.value.request_id, caught.value.reason) == (42, "unknown_type")


@pytest.mark.parametrize(
    ("hex_payload", "match"),
    [
        ("0001", "CONSUME: truncated while reading topic"),
        ("0000" + "0000000000000000000000000000000100000001", "CONSUME: topic is required"),
        ("0001740000040000000000000000000000000100000001", r"queueId must be within \[0, 1023\]"),
        ("0001740000000000000000000000000000000000000001", r"maxCount must be within \[1, 1024\]"),
        ("000174000000000000000000000000000000010000000100", "CONSUME: 1 trailing bytes"),
        ("0002ffff0000000000000000000000000000000100000001", "topic: not utf-8"),
    ],
)
def test_malformed_consume_names_the_field(hex_payload: str, match: str) -> None:
    raw = cf.RawFrame(cf.FrameType.CONSUME, 3, bytes.fromhex(hex_payload))
    with pytest.raises(cf.BadFrame, match=match) as caught:
        cf.parse_request(raw)
    assert caught.value.request_id == 3


def test_put_result_count_larger_than_the_payload_is_refused() -> None:
    payload = bytes.fromhex("0000000000ffffffffffffffffffffffff")
    with pytest.raises(cf.BadFrame, match="count=4294967295 is more than the payload holds"):
        cf.parse_reply(cf.RawFrame(cf.FrameType.PUT_RESULT, 1, payload))


names = st.text(alphabet="abcXYZ019_.-", min_size=1, max_size=40)
offsets = st.integers(min_value=0, max_value=2**62)
requests = st.one_of(
    st.builds(cf.Produce, st.binary(max_size=200)),
    st.builds(
        cf.Consume,
        topic=names,
        queue_id=st.integers(0, cf.MAX_QUEUE_ID),
        offset=offsets,
        max_count=st.integers(1, cf.MAX_COUNT),
        max_bytes=st.integers(1, cf.MAX_BYTES),
    ),
    st.builds(cf.CommitOffset, group=names, topic=names, queue_id=st.integers(0, 1023), offset=offsets),
    st.builds(cf.GetOffset, group=names, topic=names, queue_id=st.integers(0, cf.MAX_QUEUE_ID)),
)
props = st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3)
replies = st.one_of(
    st.builds(
        cf.PutResult,
        status=st.sampled_from(["PUT_OK", "FLUSH_SLAVE_TIMEOUT", "SERVICE_NOT_AVAILABLE"]),
        remark=st.text(max_size=50),
        master_address=st.one_of(st.none(), names),
        next_offset=st.one_of(st.none(), offsets),
        appended=st.lists(
            st.builds(cf.Appended, offsets, st.one_of(st.none(), offsets), st.booleans()), max_size=5
        ).map(tuple),
    ),
    st.builds(
        cf.Messages,
        next_offset=offsets,
        min_offset=offsets,
        max_offset=offsets,
        messages=st.lists(
            st.builds(
                cf.ConsumedMessage,
                queue_offset=offsets,
                commit_offset=offsets,
                born_timestamp_ms=offsets,
                store_timestamp_ms=offsets,
                producer_id=st.integers(-1, 2**62),
                seq=st.integers(-1, 2**62),
                properties=props,
                body=st.binary(max_size=50),
            ),
            max_size=4,
        ).map(tuple),
    ),
    st.builds(cf.Offset, st.one_of(st.none(), offsets)),
    st.builds(cf.Error, st.sampled_from(["BAD_REQUEST", "SYSTEM_ERROR"]), st.integers(0, 65535), st.text(max_size=40)),
)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.integers(0, cf.MAX_REQUEST_ID), requests), min_size=1, max_size=5), st.data())
def test_requests_round_trip_through_any_split(sent: list[tuple[int, cf.Request]], data: st.DataObject) -> None:
    stream = b"".join(cf.encode_request(rid, r) for rid, r in sent)
    cut = data.draw(st.integers(0, len(stream)))
    decoder = cf.FrameDecoder()
    got = []
    for part in (stream[:cut], stream[cut:]):
        decoder.feed(part)
        while (raw := decoder.next_frame()) is not cf.NEED_DATA:
            assert isinstance(raw, cf.RawFrame)
            got.append((raw.request_id, cf.parse_request(raw)))
    assert got == sent


@settings(max_examples=300)
@given(st.integers(0, cf.MAX_REQUEST_ID), replies)
def test_replies_round_trip(rid: int, reply: cf.Reply) -> None:
    raw = decode_one(cf.encode_reply(rid, reply))
    assert (raw.request_id, cf.parse_reply(raw)) == (rid, reply)


@settings(max_examples=1000)
@given(st.binary(max_size=300), st.integers(9, 200))
def test_random_bytes_raise_only_protocol_errors(data: bytes, max_frame: int) -> None:
    """Whatever arrives: frames, NEED_DATA, or ProtocolError (never another exception), and the
    decoder never holds more than one frame of bytes."""
    decoder = cf.FrameDecoder(max_frame=max_frame)
    try:
        decoder.feed(data)
        while (raw := decoder.next_frame()) is not cf.NEED_DATA:
            assert isinstance(raw, cf.RawFrame)
            for parse in (cf.parse_request, cf.parse_reply):
                try:
                    parse(raw)
                except cf.BadFrame as exc:
                    assert exc.request_id == raw.request_id and exc.remark
    except cf.FrameTooLarge:
        return
    assert decoder.buffered < 4 + max_frame


@settings(max_examples=300)
@given(requests, st.data())
def test_mutated_requests_raise_only_protocol_errors(request_: cf.Request, data: st.DataObject) -> None:
    frame = bytearray(cf.encode_request(1, request_))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(cf.HEADER_SIZE - 5, len(frame) - 1))  # the type byte onwards
        frame[i] = data.draw(st.integers(0, 255))
    raw = decode_one(bytes(frame))
    try:
        parsed = cf.parse_request(raw)
    except ProtocolError:
        return
    if isinstance(parsed, cf.Produce):  # the batch is checked by the broker's batch decoder
        with contextlib.suppress(wire.WireError):
            wire.decode_batch(parsed.batch, now_ms=1)
