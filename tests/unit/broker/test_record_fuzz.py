"""Property tests of the record codec: any bytes decode to a documented result, never raise."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from brokergroup.broker.store.record import (
    Blank,
    Corrupt,
    DecodedRecord,
    Torn,
    decode_record,
    encode_blank,
    encode_record,
    scan_record,
)

text = st.text(max_size=20)
topics = st.text(min_size=1, max_size=30).filter(lambda t: len(t.encode()) <= 127)
producer = st.one_of(st.just((-1, -1)), st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1)))


@st.composite
def records(draw: st.DrawFn) -> tuple[dict[str, object], bytes]:
    pid, pseq = draw(producer)
    fields: dict[str, object] = {
        "topic": draw(topics),
        "queue_id": draw(st.integers(0, 2**31 - 1)),
        "body": draw(st.binary(max_size=200)),
        "born_timestamp_ms": draw(st.integers(0, 2**63 - 1)),
        "store_timestamp_ms": draw(st.integers(0, 2**63 - 1)),
        "properties": draw(st.dictionaries(text, text, max_size=4)),
        "producer_id": pid,
        "producer_seq": pseq,
    }
    return fields, encode_record(**fields)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(record=records())
def test_records_round_trip(record: tuple[dict[str, object], bytes]) -> None:
    fields, data = record
    decoded = decode_record(data)
    assert isinstance(decoded, DecodedRecord)
    assert decoded.size == len(data)
    assert {name: getattr(decoded, name) for name in ("topic", "queue_id", "body", "producer_id", "producer_seq")} == {
        name: fields[name] for name in ("topic", "queue_id", "body", "producer_id", "producer_seq")
    }
    assert (decoded.born_timestamp_ms, decoded.store_timestamp_ms) == (
        fields["born_timestamp_ms"],
        fields["store_timestamp_ms"],
    )
    assert decoded.properties == fields["properties"]


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=400), offset=st.integers(0, 400))
def test_any_bytes_decode_to_a_documented_result(data: bytes, offset: int) -> None:
    offset = min(offset, len(data))
    assert isinstance(decode_record(data, offset), DecodedRecord | Blank | Torn | Corrupt)


@settings(max_examples=300, deadline=None)
@given(record=records(), junk=st.binary(max_size=50), position=st.integers(0, 10**6), value=st.integers(0, 255))
def test_a_changed_byte_is_never_accepted(
    record: tuple[dict[str, object], bytes], junk: bytes, position: int, value: int
) -> None:
    data = bytearray(record[1])
    position %= len(data)
    assume(data[position] != value)
    data[position] = value
    result = decode_record(bytes(data) + junk)
    assert isinstance(result, Torn | Corrupt)


@settings(max_examples=200, deadline=None)
@given(record=records(), cut=st.integers(0, 10**6))
def test_every_strict_prefix_is_torn(record: tuple[dict[str, object], bytes], cut: int) -> None:
    data = record[1]
    assert isinstance(decode_record(data[: cut % len(data)]), Torn)


@settings(max_examples=50, deadline=None)
@given(size=st.integers(12, 5000))
def test_blanks_round_trip(size: int) -> None:
    assert decode_record(encode_blank(size)) == Blank(0, size)
    assert isinstance(scan_record(encode_blank(size)[:-1]), Torn)
