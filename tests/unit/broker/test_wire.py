"""The produce request formats of `broker.wire`: the binary batch (golden bytes, every malformed
input refused with a WireError naming the field, fuzzing, round trips) and the JSON body."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from brokergroup.broker import wire
from brokergroup.broker.errors import BrokerError
from brokergroup.broker.store.types import Message

NOW = 1_234_567
BORN = 1_700_000_000_000

# (what the decoder calls the field when it is cut short, hex bytes, comment)
GOLDEN_FIELDS: list[tuple[str, str, str]] = [
    ("version", "01", "version = 1"),
    ("topic length", "0006", "topic length = 6"),
    ("topic", "6f7264657273", 'topic "orders"'),
    ("queue id, producer id, count", "00000003", "queue id = 3"),
    ("queue id, producer id, count", "000000000000002a", "producer id = 42"),
    ("queue id, producer id, count", "00000002", "message count = 2"),
    ("message 0 header", "0000000000000000", "seq = 0"),
    ("message 0 header", "0000018bcfe56800", "born = 1700000000000 ms"),
    ("message 0 header", "00000009", "properties length = 9"),
    ("message 0 properties", "7b226b223a2276227d", '{"k":"v"}'),
    ("message 0 body length", "00000002", "body length = 2"),
    ("message 0 body", "6869", 'body "hi"'),
    ("message 1 header", "0000000000000001", "seq = 1"),
    ("message 1 header", "0000000000000005", "born = 5 ms"),
    ("message 1 header", "00000000", "properties length = 0 (none)"),
    ("message 1 body length", "00000003", "body length = 3"),
    ("message 1 body", "00ff7f", "body 00 ff 7f"),
]
GOLDEN = bytes.fromhex("".join(h for _, h, _ in GOLDEN_FIELDS))
GOLDEN_MESSAGES = [
    Message(
        topic="orders",
        queue_id=3,
        body=b"hi",
        born_timestamp_ms=BORN,
        properties={"k": "v"},
        producer_id=42,
        producer_seq=0,
    ),
    Message(
        topic="orders",
        queue_id=3,
        body=b"\x00\xff\x7f",
        born_timestamp_ms=5,
        properties={},
        producer_id=42,
        producer_seq=1,
    ),
]


def header(*, version: int = 1, topic: bytes = b"t", queue_id: int = 0, producer_id: int = -1, count: int = 1) -> bytes:
    return struct.pack(">BH", version, len(topic)) + topic + struct.pack(">iqI", queue_id, producer_id, count)


def message(*, seq: int = -1, born: int = BORN, props: bytes = b"", body: bytes = b"x") -> bytes:
    return struct.pack(">qqI", seq, born, len(props)) + props + struct.pack(">I", len(body)) + body


def refused(data: bytes) -> str:
    with pytest.raises(wire.WireError) as caught:
        wire.decode_batch(data, now_ms=NOW)
    return str(caught.value)


# ---- golden bytes --------------------------------------------------------------------------------


def test_golden_batch_decodes() -> None:
    assert wire.decode_batch(GOLDEN, now_ms=NOW) == GOLDEN_MESSAGES


def test_golden_batch_encodes() -> None:
    encoded = wire.encode_batch(
        topic="orders",
        queue_id=3,
        producer_id=42,
        messages=[(0, BORN, {"k": "v"}, b"hi"), (1, 5, {}, b"\x00\xff\x7f")],
    )
    assert encoded.hex() == GOLDEN.hex()


def test_born_timestamp_zero_means_now() -> None:
    [decoded] = wire.decode_batch(header() + message(born=0), now_ms=NOW)
    assert decoded.born_timestamp_ms == NOW


def test_sequence_is_dropped_without_a_producer_id() -> None:
    [decoded] = wire.decode_batch(header(producer_id=-1) + message(seq=17), now_ms=NOW)
    assert (decoded.producer_id, decoded.producer_seq) == (-1, -1)


def test_largest_header_values_decode() -> None:
    topic = b"A-z_0.9%|" * 14 + b"x"
    decoded = wire.decode_batch(
        header(topic=topic, queue_id=1023, producer_id=2**63 - 1, count=1024) + message(seq=2**63 - 1) * 1024,
        now_ms=NOW,
    )
    assert len(decoded) == 1024
    assert (decoded[0].topic, decoded[0].queue_id, decoded[0].producer_id) == (topic.decode(), 1023, 2**63 - 1)
    assert decoded[-1].producer_seq == 2**63 - 1


# ---- malformed batches ---------------------------------------------------------------------------


def cut_points() -> list[tuple[int, str]]:
    """Every proper prefix of the golden batch, with the field the decoder is reading there."""
    points = []
    start = 0
    for what, hexed, _ in GOLDEN_FIELDS:
        size = len(hexed) // 2
        points += [(cut, what) for cut in range(start, start + size)]
        start += size
    assert start == len(GOLDEN)
    return points


@pytest.mark.parametrize(("cut", "field"), cut_points(), ids=[f"{c}-{f}" for c, f in cut_points()])
def test_truncated_batch_names_the_field(cut: int, field: str) -> None:
    remark = refused(GOLDEN[:cut])
    assert f"batch truncated while reading {field} at byte" in remark


@pytest.mark.parametrize(
    ("data", "names"),
    [
        pytest.param(header(version=0) + message(), ("version", "0"), id="version-0"),
        pytest.param(header(version=2) + message(), ("version", "2"), id="version-2"),
        pytest.param(header(topic=b"") + message(), ("topic",), id="topic-empty"),
        pytest.param(header(topic=b"a b") + message(), ("topic", "pattern"), id="topic-space"),
        pytest.param(header(topic=b"a/b") + message(), ("topic", "pattern"), id="topic-slash"),
        pytest.param(header(topic="tópico".encode()) + message(), ("topic", "pattern"), id="topic-non-ascii"),
        pytest.param(header(topic=b"\xff\xfe") + message(), ("topic", "utf-8"), id="topic-not-utf8"),
        pytest.param(header(topic=b"t" * 128) + message(), ("topic", "127"), id="topic-too-long"),
        pytest.param(header(queue_id=-1) + message(), ("queueId", "0"), id="queue-id-negative"),
        pytest.param(header(queue_id=1024) + message(), ("queueId", "1023"), id="queue-id-1024"),
        pytest.param(header(queue_id=2**31 - 1) + message(), ("queueId",), id="queue-id-max"),
        pytest.param(header(producer_id=-2) + message(), ("producerId", "-1"), id="producer-id-minus-2"),
        pytest.param(header(producer_id=-(2**63)) + message(), ("producerId",), id="producer-id-min"),
        pytest.param(header(count=0), ("count", "0", "1024"), id="count-0"),
        pytest.param(header(count=1025) + message() * 1025, ("count", "1025"), id="count-1025"),
        pytest.param(header(count=2**32 - 1), ("count", str(2**32 - 1)), id="count-max"),
        pytest.param(header() + message(props=b"{not json"), ("messages[0].properties", "not JSON"), id="props-bad"),
        pytest.param(header() + message(props=b"\xff\xfe"), ("messages[0].properties", "not JSON"), id="props-bytes"),
        pytest.param(
            header() + message(props=b"[" * 100_000 + b"]" * 100_000),
            ("messages[0].properties", "not JSON"),
            id="props-too-deep",
        ),
        pytest.param(header() + message(props=b'["a"]'), ("messages[0].properties", "object"), id="props-array"),
        pytest.param(header() + message(props=b'"a"'), ("messages[0].properties", "object"), id="props-string"),
        pytest.param(header() + message(props=b"null"), ("messages[0].properties", "object"), id="props-null"),
        pytest.param(header() + message(props=b'{"a":1}'), ("messages[0].properties", "strings"), id="props-int"),
        pytest.param(
            header() + message(props=b'{"a":{"b":"c"}}'), ("messages[0].properties", "strings"), id="props-nested"
        ),
        pytest.param(header() + message(props=b'{"a":null}'), ("messages[0].properties",), id="props-null-value"),
        pytest.param(
            header(count=2) + message() + message(props=b"{"), ("messages[1].properties", "not JSON"), id="props-second"
        ),
        pytest.param(header() + message() + b"\x00", ("1 trailing bytes", "1 messages"), id="trailing-byte"),
        pytest.param(header() + message() + message(), ("trailing bytes",), id="trailing-message"),
        pytest.param(header(producer_id=7) + message(seq=-1), ("messages[0].seq", "producerId"), id="seq-missing"),
        pytest.param(header(producer_id=0) + message(seq=-5), ("messages[0].seq",), id="seq-negative"),
        pytest.param(
            header(producer_id=7, count=2) + message(seq=0) + message(seq=-1), ("messages[1].seq",), id="seq-second"
        ),
        pytest.param(header() + message(born=-1), ("messages[0].bornTimestamp", "negative"), id="born-negative"),
    ],
)
def test_malformed_batch_names_the_field(data: bytes, names: tuple[str, ...]) -> None:
    remark = refused(data)
    assert "\n" not in remark and "pydantic" not in remark, f"the remark is not one readable line: {remark!r}"
    for name in names:
        assert name in remark, f"remark does not name {name!r}: {remark!r}"


def test_length_prefixes_past_the_end_are_truncation() -> None:
    """A length that claims more bytes than the batch has is refused without reading past the end."""
    body_len = header() + struct.pack(">qqI", -1, BORN, 0) + struct.pack(">I", 2**32 - 1) + b"x"
    assert "message 0 body at byte" in refused(body_len)
    props_len = header() + struct.pack(">qqI", -1, BORN, 2**32 - 1) + b"{}"
    assert "message 0 properties" in refused(props_len)
    topic_len = struct.pack(">BH", 1, 0xFFFF) + b"t"
    assert "reading topic at byte 3" in refused(topic_len)


def test_wire_error_is_a_broker_error() -> None:
    """The API turns every BrokerError into a 400 with the message as remark."""
    assert issubclass(wire.WireError, BrokerError)


# ---- fuzzing -------------------------------------------------------------------------------------


@given(st.binary(max_size=512))
@settings(max_examples=2000)
def test_arbitrary_bytes_raise_only_wire_error(data: bytes) -> None:
    try:
        decoded = wire.decode_batch(data, now_ms=NOW)
    except wire.WireError:
        return
    assert 1 <= len(decoded) <= wire.MAX_BATCH


@given(
    st.binary(max_size=200),
    st.integers(0, 3) | st.integers(0, 2**32 - 1),
    st.sampled_from([-1, 0, 5]) | st.integers(-(2**63), 2**63 - 1),
)
@settings(max_examples=1000)
def test_valid_header_with_arbitrary_tail_raises_only_wire_error(tail: bytes, count: int, producer_id: int) -> None:
    data = header(producer_id=producer_id, count=count) + tail
    try:
        decoded = wire.decode_batch(data, now_ms=NOW)
    except wire.WireError:
        return
    assert len(decoded) == count


@given(st.data())
@settings(max_examples=1000)
def test_mutated_golden_batch_raises_only_wire_error(data: st.DataObject) -> None:
    mutated = bytearray(GOLDEN)
    for _ in range(data.draw(st.integers(1, 4))):
        mutated[data.draw(st.integers(0, len(GOLDEN) - 1))] = data.draw(st.integers(0, 255))
    try:
        decoded = wire.decode_batch(bytes(mutated), now_ms=NOW)
    except wire.WireError:
        return
    assert len(decoded) == 2


@given(
    props=st.one_of(
        st.binary(max_size=64),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
            max_leaves=8,
        ).map(lambda v: json.dumps(v).encode()),
    )
)
@settings(max_examples=500)
def test_any_properties_bytes_decode_to_a_string_map_or_wire_error(props: bytes) -> None:
    try:
        [decoded] = wire.decode_batch(header() + message(props=props), now_ms=NOW)
    except wire.WireError as exc:
        assert "messages[0].properties" in str(exc)
        return
    parsed = json.loads(props) if props else {}
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in parsed.items())
    assert decoded.properties == parsed


# ---- round trips ---------------------------------------------------------------------------------

topics = st.from_regex(r"[A-Za-z0-9_.%|-]{1,127}", fullmatch=True)
props = st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=4)
INT64 = 2**63 - 1


@st.composite
def batches(draw: st.DrawFn) -> dict[str, Any]:
    producer_id = draw(st.sampled_from([-1, 0, INT64]) | st.integers(-1, INT64))
    seqs = st.integers(0, INT64) if producer_id >= 0 else st.integers(-(2**63), INT64)
    messages = draw(
        st.lists(st.tuples(seqs, st.integers(1, INT64), props, st.binary(max_size=64)), min_size=1, max_size=20)
    )
    return {
        "topic": draw(topics),
        "queue_id": draw(st.integers(0, wire.MAX_QUEUE_ID)),
        "producer_id": producer_id,
        "messages": messages,
    }


@given(batches())
@settings(max_examples=300)
def test_encode_decode_round_trip(batch: dict[str, Any]) -> None:
    decoded = wire.decode_batch(wire.encode_batch(**batch), now_ms=NOW)
    idempotent = batch["producer_id"] >= 0
    assert decoded == [
        Message(
            topic=batch["topic"],
            queue_id=batch["queue_id"],
            body=body,
            born_timestamp_ms=born,
            properties=properties,
            producer_id=batch["producer_id"],
            producer_seq=seq if idempotent else -1,
        )
        for seq, born, properties, body in batch["messages"]
    ]


# ---- the JSON body -------------------------------------------------------------------------------


def produce(**fields: Any) -> wire.ProduceRequest:
    return wire.ProduceRequest.model_validate_json(json.dumps(fields), by_alias=True, by_name=False)


def test_json_messages() -> None:
    request = produce(
        topic="orders",
        queueId=3,
        producerId=42,
        messages=[
            {"body": base64.b64encode(b"hi").decode(), "seq": 0, "bornTimestamp": BORN, "properties": {"k": "v"}},
            {"body": "AP9/", "seq": 1},
        ],
    )
    decoded = wire.messages_from_json(request, now_ms=NOW)
    assert decoded == [GOLDEN_MESSAGES[0], GOLDEN_MESSAGES[1]._replace(born_timestamp_ms=NOW)]


def test_json_without_producer_id_drops_the_sequence() -> None:
    [decoded] = wire.messages_from_json(produce(topic="t", messages=[{"body": "", "seq": 9}]), now_ms=NOW)
    assert (decoded.producer_id, decoded.producer_seq, decoded.body, decoded.queue_id) == (-1, -1, b"", 0)


@pytest.mark.parametrize(
    "body",
    [
        "aGk",  # missing padding
        "a",
        "aGk=\n",
        "a b=",
        "aGk*",
        "=aGk",
        "aGk=aGk=",
        "héllo",
        "aGVsbG8-",  # base64url, not base64
    ],
)
def test_json_body_must_be_base64(body: str) -> None:
    request = produce(topic="t", messages=[{"body": "aGk="}, {"body": body}])
    with pytest.raises(wire.WireError, match=r"messages\[1\]\.body: not valid base64"):
        wire.messages_from_json(request, now_ms=NOW)


@pytest.mark.parametrize(
    "messages", [[{"body": ""}], [{"body": "", "seq": -1}], [{"body": "", "seq": 0}, {"body": ""}]]
)
def test_json_seq_is_required_with_a_producer_id(messages: list[dict[str, Any]]) -> None:
    request = produce(topic="t", producerId=0, messages=messages)
    index = len(messages) - 1
    with pytest.raises(wire.WireError, match=rf"messages\[{index}\]\.seq: required \(>= 0\) when producerId is set"):
        wire.messages_from_json(request, now_ms=NOW)


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"messages": [{"body": ""}]}, "topic"),
        ({"topic": "t", "messages": []}, "messages"),
        ({"topic": "t", "messages": [{"body": ""}] * 1025}, "messages"),
        ({"topic": "a b", "messages": [{"body": ""}]}, "topic"),
        ({"topic": "t", "queueId": "1", "messages": [{"body": ""}]}, "queueId"),
        ({"topic": "t", "queueId": 1024, "messages": [{"body": ""}]}, "queueId"),
        ({"topic": "t", "producerId": -2, "messages": [{"body": ""}]}, "producerId"),
        ({"topic": "t", "producerId": 2**63, "messages": [{"body": ""}]}, "producerId"),
        ({"topic": "t", "messages": [{"body": 5}]}, "messages.0.body"),
        ({"topic": "t", "messages": [{"body": "", "seq": -2}]}, "messages.0.seq"),
        ({"topic": "t", "messages": [{"body": "", "properties": {"k": 1}}]}, "messages.0.properties.k"),
        ({"topic": "t", "messages": [{"body": "", "bornTimestamp": -1}]}, "messages.0.bornTimestamp"),
        ({"topic": "t", "messages": [{"body": "", "extra": 1}]}, "messages.0.extra"),
        ({"topic": "t", "queue_id": 1, "messages": [{"body": ""}]}, "queue_id"),
    ],
)
def test_json_request_model_refuses_bad_fields(fields: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError) as caught:
        produce(**fields)
    locations = {".".join(str(p) for p in error["loc"]) for error in caught.value.errors()}
    assert any(loc.startswith(where) for loc in locations), locations


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"group": "", "topic": "t", "queueId": 0, "offset": 0}, "group"),
        ({"group": "g g", "topic": "t", "queueId": 0, "offset": 0}, "group"),
        ({"group": "g", "topic": "t", "queueId": 0, "offset": -1}, "offset"),
        ({"group": "g", "topic": "t", "queueId": 0}, "offset"),
        ({"group": "g", "topic": "t", "offset": 0}, "queueId"),
        ({"group": "g", "topic": "t", "queueId": 0, "offset": "1"}, "offset"),
    ],
)
def test_consumer_offset_request_refuses_bad_fields(fields: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError) as caught:
        wire.ConsumerOffsetRequest.model_validate_json(json.dumps(fields), by_alias=True, by_name=False)
    assert where in {str(error["loc"][0]) for error in caught.value.errors()}
