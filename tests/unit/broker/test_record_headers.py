"""`read_headers`: what a slave indexes from a replicated frame without decoding it a second time
agrees with the full decode, for messages, consumer offsets and blanks alike."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokergroup.broker.store.record import (
    Blank,
    DecodedRecord,
    RecordHeader,
    decode_record,
    encode_blank,
    encode_consumer_offset,
    encode_record,
    read_headers,
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


def full_decode(data: bytes, base: int) -> list[RecordHeader]:
    headers, position = [], 0
    while position < len(data):
        item = decode_record(data, position)
        assert isinstance(item, DecodedRecord | Blank)
        if isinstance(item, DecodedRecord):
            headers.append(
                RecordHeader(
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


@given(items, st.integers(0, 2**40))
def test_headers_agree_with_the_full_decode(encoded: list[bytes], base: int) -> None:
    data = b"".join(encoded)
    assert list(read_headers(data, base=base)) == full_decode(data, base)


def test_bytes_that_were_never_validated_cannot_loop_forever() -> None:
    with pytest.raises(ValueError, match="total_length=0"):
        list(read_headers(bytes(64), base=0))
