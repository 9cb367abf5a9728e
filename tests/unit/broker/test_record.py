"""Commit-log record format: golden bytes, round trips, limits, torn versus corrupt."""

from __future__ import annotations

import zlib

import pytest

from brokergroup.broker.errors import InvalidRecordError
from brokergroup.broker.store.record import (
    RECORD_HEADER_SIZE,
    Blank,
    ConsumerOffset,
    Corrupt,
    DecodedRecord,
    RecordKind,
    Span,
    Torn,
    decode_record,
    encode_blank,
    encode_consumer_offset,
    encode_record,
    find_valid_item,
    peek_length,
    scan_record,
)

COVERED_HEX = (
    "01"  # kind = MESSAGE
    "00"  # flags
    "00000001"  # queue_id = 1
    "0000000000000007"  # producer_id = 7
    "0000000000000009"  # producer_seq = 9
    "0000000000000010"  # born_ts_ms = 16
    "0000000000000020"  # store_ts_ms = 32
    "01"  # topic_len = 1
    "0009"  # props_len = 9
    "00000002"  # body_len = 2
    "74"  # topic "t"
    "7b226b223a2276227d"  # properties {"k":"v"}
    "6869"  # body "hi"
)
GOLDEN_HEX = (
    "42474c31"  # magic "BGL1"
    "00000045"  # total_length = 69
    "632b25dd" + COVERED_HEX  # crc32 of bytes [12, 69)
)


def sample(**overrides: object) -> bytes:
    fields: dict[str, object] = {
        "topic": "t",
        "queue_id": 1,
        "body": b"hi",
        "born_timestamp_ms": 16,
        "store_timestamp_ms": 32,
        "properties": {"k": "v"},
        "producer_id": 7,
        "producer_seq": 9,
    }
    fields.update(overrides)
    return encode_record(**fields)  # type: ignore[arg-type]


def test_golden_record_bytes() -> None:
    assert sample().hex() == GOLDEN_HEX
    assert zlib.crc32(bytes.fromhex(COVERED_HEX)) == 0x632B25DD  # the CRC covers all after it


def test_golden_record_decodes() -> None:
    assert decode_record(bytes.fromhex(GOLDEN_HEX)) == DecodedRecord(
        offset=0,
        size=69,
        kind=RecordKind.MESSAGE,
        flags=0,
        topic="t",
        queue_id=1,
        producer_id=7,
        producer_seq=9,
        born_timestamp_ms=16,
        store_timestamp_ms=32,
        properties={"k": "v"},
        body=b"hi",
    )


def test_golden_blank_bytes() -> None:
    assert encode_blank(16).hex() == "42474c30000000102144df1c00000000"
    assert decode_record(encode_blank(16)) == Blank(0, 16)
    assert scan_record(encode_blank(12)) == Span(0, 12, blank=True)


def test_decode_at_an_offset_in_a_larger_buffer() -> None:
    first, second = sample(), sample(topic="other", properties=None, producer_id=-1, producer_seq=-1)
    buf = first + second + b"\0\0"
    record = decode_record(buf, len(first))
    assert isinstance(record, DecodedRecord)
    assert (record.offset, record.size, record.topic, record.properties) == (len(first), len(second), "other", {})
    assert (record.producer_id, record.producer_seq) == (-1, -1)
    assert decode_record(buf, len(buf) - 2) == Corrupt(len(buf) - 2, "bad magic 0x0000")


def test_consumer_offset_record() -> None:
    data = encode_consumer_offset(group="g1", topic="orders", queue_id=3, offset=12345, timestamp_ms=99)
    record = decode_record(data)
    assert isinstance(record, DecodedRecord)
    assert record.kind == RecordKind.CONSUMER_OFFSET
    assert record.consumer_offset() == ConsumerOffset(group="g1", topic="orders", queue_id=3, offset=12345)
    assert record.body.hex() == "00000000000030396731"  # offset:i64 then the group
    message = decode_record(sample())
    assert isinstance(message, DecodedRecord) and message.consumer_offset() is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"topic": ""}, "topic of 0 bytes"),
        ({"topic": "t" * 128}, "topic of 128 bytes"),
        ({"queue_id": -1}, "queue_id=-1"),
        ({"producer_id": 5, "producer_seq": -1}, "both -1 or both >= 0"),
        ({"born_timestamp_ms": -1}, "born_timestamp_ms=-1"),
        ({"properties": {"k": "v" * 32 * 1024}}, "properties of"),
        ({"body": b"x" * 11, "max_body": 10}, "max_body=10"),
    ],
)
def test_encode_refuses_values_beyond_the_limits(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRecordError, match=message):
        sample(**overrides)


def test_encode_consumer_offset_validates_group_and_offset() -> None:
    with pytest.raises(InvalidRecordError, match="group of 256 bytes"):
        encode_consumer_offset(group="g" * 256, topic="t", queue_id=0, offset=0, timestamp_ms=0)
    with pytest.raises(InvalidRecordError, match="offset=-1"):
        encode_consumer_offset(group="g", topic="t", queue_id=0, offset=-1, timestamp_ms=0)


@pytest.mark.parametrize("cut", [0, 1, 3, 4, 11, 12, 56, 68])
def test_every_prefix_of_a_record_is_torn(cut: int) -> None:
    result = decode_record(sample()[:cut])
    assert isinstance(result, Torn)
    assert result.size in (None, 69)


def test_torn_reports_the_declared_length_once_known() -> None:
    assert decode_record(sample()[:20]) == Torn(0, 69)
    assert decode_record(sample()[:7]) == Torn(0, None)


def patched(position: int, value: bytes) -> bytes:
    data = bytearray(sample())
    data[position : position + len(value)] = value
    return bytes(data)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (patched(0, b"XGL1"), "bad magic"),
        (b"BX", "bad magic"),
        (patched(4, (10).to_bytes(4, "big")), "total_length=10 outside"),
        (patched(4, (2**31 - 1).to_bytes(4, "big")), "total_length=2147483647 outside"),
        (patched(8, b"\0\0\0\0"), "crc32 mismatch"),
        (patched(60, b"X"), "crc32 mismatch"),
    ],
)
def test_damage_is_corrupt_not_torn(data: bytes, reason: str) -> None:
    result = decode_record(data)
    assert isinstance(result, Corrupt)
    assert reason in result.reason


def reframed(covered_hex: str) -> bytes:
    covered = bytes.fromhex(covered_hex)
    return (
        bytes.fromhex("42474c31")
        + (12 + len(covered)).to_bytes(4, "big")
        + zlib.crc32(covered).to_bytes(4, "big")
        + covered
    )


@pytest.mark.parametrize(
    ("covered_hex", "reason"),
    [
        ("03" + COVERED_HEX[2:], "kind=3"),
        (COVERED_HEX[:4] + "ffffffff" + COVERED_HEX[12:], "queue_id=-1"),
        (COVERED_HEX.replace("0009", "0008"), "disagree with total_length"),
        (COVERED_HEX.replace("7b226b223a2276227d", "5b2231222c2232225d"), "not a JSON object"),
        (COVERED_HEX[:90] + "ff" + COVERED_HEX[92:], "not utf-8"),  # the topic byte
    ],
)
def test_crc_valid_but_inconsistent_fields_are_corrupt(covered_hex: str, reason: str) -> None:
    result = decode_record(reframed(covered_hex))
    assert isinstance(result, Corrupt)
    assert reason in result.reason


def test_peek_length_checks_only_magic_and_length() -> None:
    assert peek_length(patched(60, b"X")) == 69
    assert peek_length(sample()[:5]) == Torn(0, None)
    assert isinstance(peek_length(b"JUNK0000"), Corrupt)


def test_find_valid_item_skips_false_magics() -> None:
    data = b"BGL1 not a record " + sample() + b"tail"
    assert find_valid_item(data, 0) == 18
    assert find_valid_item(data, 19) is None
    assert RECORD_HEADER_SIZE == 57
