"""`check_item`: what a slave validates and indexes of a replicated item in one pass agrees with the
full decode, for messages, consumer offsets and blanks alike, and refuses exactly what it refuses."""

from __future__ import annotations

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
