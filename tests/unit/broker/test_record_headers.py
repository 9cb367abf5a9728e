"""`check_item`: what a slave validates and indexes of a replicated item in one pass agrees with the
full decode, for messages, consumer offsets and blanks alike, and refuses exactly what it refuses."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokergroup.broker.store.record import (
    Blank,
    Corrupt,
    DecodedRecord,
    RecordInfo,
    Torn,
    check_item,
    decode_record,
    encode_blank,
    encode_consumer_offset,
    encode_record,
)

topics = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)
ids = st.integers(0, 2**63 - 1)
messages = st.builds(
    lambda topic, queue, body, props, producer: encode_record(
        topic=topic,
        queue_id=queue,
        body=body,
        born_timestamp_ms=7,
        store_timestamp_ms=9,
        properties=props,
        producer_id=producer[0],
        producer_seq=producer[1],
    ),
    topics,
    st.integers(0, 1023),
    st.binary(max_size=300),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
    st.one_of(st.just((-1, -1)), st.tuples(ids, ids)),
)
offsets = st.builds(
    lambda group, topic, queue, offset: encode_consumer_offset(
        group=group, topic=topic, queue_id=queue, offset=offset, timestamp_ms=5
    ),
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30),
    topics,
    st.integers(0, 1023),
    ids,
)
items = st.lists(st.one_of(messages, offsets, st.integers(12, 100).map(encode_blank)), max_size=12)


def full_decode(data: bytes, base: int) -> list[RecordInfo]:
    headers, position = [], 0
    while position < len(data):
        item = decode_record(data, position)
        assert isinstance(item, DecodedRecord | Blank)
        if isinstance(item, DecodedRecord):
            headers.append(
                RecordInfo(
                    offset=base + position,
                    size=item.size,
                    kind=item.kind,
                    topic=item.topic,
                    queue_id=item.queue_id,
                    producer_id=item.producer_id,
                    producer_seq=item.producer_seq,
                    consumer_offset=item.consumer_offset(),
                )
            )
        position += item.size
    return headers


def check_all(data: bytes, base: int) -> list[RecordInfo]:
    headers, position = [], 0
    while position < len(data):
        item = check_item(data, position, base=base)
        assert isinstance(item, RecordInfo | Blank)
        if isinstance(item, RecordInfo):
            headers.append(item)
        else:
            assert item.offset == base + position
        position += item.size
    return headers


@given(items, st.integers(0, 2**40))
def test_headers_agree_with_the_full_decode(encoded: list[bytes], base: int) -> None:
    data = b"".join(encoded)
    assert check_all(data, base) == full_decode(data, base)


@given(items, st.data())
def test_a_damaged_item_gets_the_verdict_of_the_full_decode(encoded: list[bytes], data: st.DataObject) -> None:
    """Flip, cut or overwrite bytes: check_item and decode_record find the same torn or corrupt item."""
    raw = bytearray(b"".join(encoded) or b"\x00")
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = bytes(raw[: data.draw(st.integers(0, len(raw)))])
    position = 0
    while position < len(cut):
        full, checked = decode_record(cut, position), check_item(cut, position)
        if isinstance(full, Torn | Corrupt):
            assert checked == full
            return
        assert isinstance(checked, RecordInfo | Blank)
        assert checked.size == full.size
        position += full.size


def test_a_corrupt_item_is_named() -> None:
    record = bytearray(encode_record(topic="t", queue_id=0, body=b"x", born_timestamp_ms=1, store_timestamp_ms=1))
    record[-1] ^= 1
    assert check_item(bytes(record)) == Corrupt(0, "crc32 mismatch")


def resealed(
    record: bytes,
    field: str,
    value: int,
    *,
    body: bytes | None = None,
    topic: bytes | None = None,
    total_from_fields: bool = False,
) -> bytes:
    """`record` with one header field set to `value` (its topic, or its properties and body, replaced), and its
    total length and CRC made consistent again: only the field checks can refuse it. `total_from_fields`: the total
    length is the fields' sum (57 + topic + properties + body lengths) and the CRC covers the bytes up to it."""
    names = ("kind", "flags", "queue_id", "producer_id", "producer_seq", "born", "stored", "topic_len", "props_len")
    fields = list(struct.unpack_from(">BBiqqqqBHi", record, 12))
    head_end = 57
    topic_bytes = record[head_end : head_end + fields[7]]
    rest = record[head_end + fields[7] :]
    if topic is not None:
        topic_bytes, fields[7] = topic, len(topic)
    if field != "body_len":
        fields[names.index(field)] = value
    if body is not None:  # the properties and the body
        rest, fields[9] = body, len(body) - fields[8]
    if field == "body_len":
        fields[9] = value
    covered = struct.pack(">BBiqqqqBHi", *fields) + topic_bytes + rest
    total = 57 + fields[7] + fields[8] + fields[9] if total_from_fields else 12 + len(covered)
    return struct.pack(">IiI", 0x42474C31, total, zlib.crc32(covered[: total - 12])) + covered


LONG_PROPS = b'{"a":"' + b"p" * 40_000 + b'"}'
"""Properties longer than the 32 KiB a record may carry, valid JSON."""
GOOD = encode_record(topic="t", queue_id=3, body=b"x" * 40, born_timestamp_ms=1, store_timestamp_ms=2)


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(resealed(GOOD, "kind", 3), id="kind"),
        pytest.param(resealed(GOOD, "queue_id", -1), id="queue-id"),
        pytest.param(resealed(GOOD, "producer_seq", 5), id="seq-without-producer"),
        pytest.param(resealed(GOOD, "producer_id", -7), id="producer-id"),
        pytest.param(resealed(GOOD, "born", -1), id="born"),
        pytest.param(resealed(GOOD, "stored", -1), id="stored"),
        pytest.param(
            resealed(GOOD, "props_len", len(LONG_PROPS), body=LONG_PROPS + b"x" * 40, total_from_fields=True),
            id="props-too-long",
        ),
        pytest.param(resealed(GOOD, "body_len", -3, body=b"", total_from_fields=True), id="body-len-negative"),
        pytest.param(resealed(GOOD, "body_len", 20), id="lengths-disagree"),
        pytest.param(resealed(GOOD, "topic_len", 0, topic=b""), id="topic-empty"),
        pytest.param(resealed(GOOD, "flags", 0, topic=b"\xff\xfe"), id="topic-not-utf8"),
        pytest.param(resealed(GOOD, "props_len", 3, body=b"[1]" + b"x" * 40), id="props-not-an-object"),
    ],
)
def test_a_record_with_a_valid_crc_and_a_bad_field_is_refused_as_the_full_decode_refuses_it(bad: bytes) -> None:
    """The fast path (`_message_info`) accepts nothing that the full path refuses: each bad field, sealed with a
    correct length and CRC, gets the full decode's Corrupt verdict."""
    full = decode_record(bad)
    assert isinstance(full, Corrupt), full
    assert check_item(bad) == full
    assert check_item(bad, base=100) == full, "a refusal names the item's position in the buffer, not shifted"
