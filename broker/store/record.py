"""Commit-log record format: one message, or one consumer-group offset, per record.

Every item in the commit log starts with the same 12-byte frame header; integers are big-endian::

    offset size  field
         0    4  magic          u32  0x42474C31 ("BGL1") record | 0x42474C30 ("BGL0") blank
         4    4  total_length   i32  bytes of the whole item, this header included
         8    4  crc32          u32  zlib CRC-32 of bytes [12, total_length): all after this field

A *record* (magic "BGL1") continues with CRC-covered fields; its length is exactly the sum::

        12    1  kind           u8   1 = MESSAGE, 2 = CONSUMER_OFFSET
        13    1  flags          u8   reserved, written 0, kept as read
        14    4  queue_id       i32  >= 0
        18    8  producer_id    i64  idempotent producer id, -1 = none
        26    8  producer_seq   i64  its sequence number, -1 = none (both -1 or both >= 0)
        34    8  born_ts_ms     i64  >= 0, producer's clock
        42    8  store_ts_ms    i64  >= 0, master's clock at append
        50    1  topic_len      u8   1..127
        51    2  props_len      u16  0..32768
        53    4  body_len       i32  0..max_body (default 4 MiB)
        57    t  topic          utf-8
      57+t    p  properties     utf-8 JSON object of string -> string, sorted keys; empty = none
    57+t+p    b  body           opaque bytes

CONSUMER_OFFSET records store consumer-group progress *through* the log, so it replicates and
truncates with the messages (DESIGN §4, #4771): topic and queue_id are the consumed queue, the
producer fields are -1, properties are empty, and the body is `offset:i64 (>=0) ‖ group utf-8
(1..255 bytes)`.

A *blank* (magic "BGL0") pads the rest of a segment so that records never span segments: its
bytes after the header are written as zeros and CRC-covered like a record's; it is at least 12
bytes long.

`decode_record` tells apart a tail that is merely incomplete (`Torn`: the bytes so far are a
plausible prefix) from damage (`Corrupt`: bad magic, impossible length, CRC mismatch, or fields
that contradict the layout); the commit log cuts the first and refuses to hide the second.
"""

from __future__ import annotations

import enum
import json
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple

from brokergroup.broker.errors import InvalidRecordError

MAGIC: Final = 0x42474C31
BLANK_MAGIC: Final = 0x42474C30
_MAGIC_BYTES: Final = MAGIC.to_bytes(4, "big")
_BLANK_MAGIC_BYTES: Final = BLANK_MAGIC.to_bytes(4, "big")
MAX_TOPIC_BYTES: Final = 127
MAX_PROPERTIES_BYTES: Final = 32 * 1024
MAX_GROUP_BYTES: Final = 255
DEFAULT_MAX_BODY: Final = 4 * 1024 * 1024
_INT32_MAX: Final = 2**31 - 1
_INT64_MAX: Final = 2**63 - 1

_FRAME = struct.Struct(
    ">I"  # magic
    "i"  # total_length
    "I"  # crc32 of bytes [12, total_length)
)
_FIELDS = struct.Struct(
    ">B"  # kind
    "B"  # flags
    "i"  # queue_id
    "q"  # producer_id
    "q"  # producer_seq
    "q"  # born_ts_ms
    "q"  # store_ts_ms
    "B"  # topic_len
    "H"  # props_len
    "i"  # body_len
)
_HEADER = struct.Struct(_FRAME.format + _FIELDS.format[1:])
"""A record's frame header and fields in one unpack (`check_item`'s fast path)."""
_LENGTH = struct.Struct(">i")  # total_length alone, at offset 4 of the frame header
_OFFSET = struct.Struct(">q")  # consumer offset at the start of a CONSUMER_OFFSET body
FRAME_HEADER_SIZE: Final = _FRAME.size  # 12
RECORD_HEADER_SIZE: Final = _FRAME.size + _FIELDS.size  # 57
BLANK_MIN_SIZE: Final = _FRAME.size


class RecordKind(enum.IntEnum):
    MESSAGE = 1
    CONSUMER_OFFSET = 2


def max_record_size(max_body: int = DEFAULT_MAX_BODY) -> int:
    return RECORD_HEADER_SIZE + MAX_TOPIC_BYTES + MAX_PROPERTIES_BYTES + max_body


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodedRecord:
    offset: int
    """Where the record starts in the buffer (or log) it was decoded from."""
    size: int
    kind: RecordKind
    flags: int
    topic: str
    queue_id: int
    producer_id: int
    producer_seq: int
    born_timestamp_ms: int
    store_timestamp_ms: int
    properties: Mapping[str, str]
    body: bytes

    def consumer_offset(self) -> ConsumerOffset | None:
        """The committed offset this record stores, for a CONSUMER_OFFSET record."""
        if self.kind != RecordKind.CONSUMER_OFFSET:
            return None
        (offset,) = _OFFSET.unpack_from(self.body)
        group = self.body[_OFFSET.size :].decode()
        return ConsumerOffset(group=group, topic=self.topic, queue_id=self.queue_id, offset=offset)


class RecordInfo(NamedTuple):
    """What the indexes need of a record (`check_item` reads it from the bytes, a put builds it): no
    properties, no body, so pending records stay small. A named tuple: one is built per record on the
    put and replication paths, and a tuple costs a third of a frozen dataclass to build (issue 17)."""

    offset: int
    size: int
    kind: RecordKind
    topic: str
    queue_id: int
    producer_id: int = -1
    producer_seq: int = -1
    consumer_offset: ConsumerOffset | None = None

    @property
    def end(self) -> int:
        return self.offset + self.size

    @classmethod
    def from_decoded(cls, record: DecodedRecord, *, offset: int | None = None) -> RecordInfo:
        """The record's info; `offset` overrides the record's own (decoded from a chunk of the log)."""
        return cls(
            record.offset if offset is None else offset,
            record.size,
            record.kind,
            record.topic,
            record.queue_id,
            record.producer_id,
            record.producer_seq,
            record.consumer_offset(),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerOffset:
    group: str
    topic: str
    queue_id: int
    offset: int


@dataclass(frozen=True, slots=True)
class Span:
    """A well-framed item whose CRC matches (`scan_record`): a record, or a blank if `blank`."""

    offset: int
    size: int
    blank: bool


@dataclass(frozen=True, slots=True)
class Blank:
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class Torn:
    """The bytes end inside a plausible item; `size` is its declared length when known."""

    offset: int
    size: int | None


@dataclass(frozen=True, slots=True)
class Corrupt:
    offset: int
    reason: str


# ---- encoding ---------------------------------------------------------------------------------


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise InvalidRecordError(message)


def _frame(magic: int, covered: bytes) -> bytes:
    return _FRAME.pack(magic, _FRAME.size + len(covered), zlib.crc32(covered)) + covered


def encode_record(
    *,
    topic: str,
    queue_id: int,
    body: bytes,
    born_timestamp_ms: int,
    store_timestamp_ms: int,
    properties: Mapping[str, str] | None = None,
    producer_id: int = -1,
    producer_seq: int = -1,
    kind: RecordKind = RecordKind.MESSAGE,
    max_body: int = DEFAULT_MAX_BODY,
) -> bytes:
    """One record's bytes. Raises `InvalidRecordError` naming the field that breaks a limit."""
    topic_bytes = topic.encode()
    props_bytes = b""
    if properties:
        props = json.dumps(dict(properties), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        props_bytes = props.encode()
    ids_ok = producer_id == producer_seq == -1 or (producer_id >= 0 and producer_seq >= 0)
    oks = (  # the tests once; a message is built only for the first that fails (this is the put path)
        1 <= len(topic_bytes) <= MAX_TOPIC_BYTES,
        0 <= queue_id <= _INT32_MAX,
        ids_ok,
        max(producer_id, producer_seq) <= _INT64_MAX,
        0 <= born_timestamp_ms <= _INT64_MAX,
        0 <= store_timestamp_ms <= _INT64_MAX,
        len(props_bytes) <= MAX_PROPERTIES_BYTES,
        len(body) <= max_body,
    )
    if not all(oks):
        problems = (
            lambda: f"topic of {len(topic_bytes)} bytes, need 1..127",
            lambda: f"queue_id={queue_id} out of range",
            lambda: f"producer_id={producer_id}, producer_seq={producer_seq}: both -1 or both >= 0",
            lambda: "producer_id/producer_seq out of range",
            lambda: f"born_timestamp_ms={born_timestamp_ms} out of range",
            lambda: f"store_timestamp_ms={store_timestamp_ms} out of range",
            lambda: f"properties of {len(props_bytes)} bytes > 32 KiB",
            lambda: f"body of {len(body)} bytes > max_body={max_body}",
        )
        raise InvalidRecordError(problems[oks.index(False)]())
    fields = _FIELDS.pack(
        kind,
        0,
        queue_id,
        producer_id,
        producer_seq,
        born_timestamp_ms,
        store_timestamp_ms,
        len(topic_bytes),
        len(props_bytes),
        len(body),
    )
    return _frame(MAGIC, fields + topic_bytes + props_bytes + body)


def encode_consumer_offset(*, group: str, topic: str, queue_id: int, offset: int, timestamp_ms: int) -> bytes:
    """A CONSUMER_OFFSET record: `group` has consumed `topic`/`queue_id` up to `offset`."""
    group_bytes = group.encode()
    _require(1 <= len(group_bytes) <= MAX_GROUP_BYTES, f"group of {len(group_bytes)} bytes, need 1..255")
    _require(0 <= offset <= _INT64_MAX, f"offset={offset} out of range")
    return encode_record(
        kind=RecordKind.CONSUMER_OFFSET,
        topic=topic,
        queue_id=queue_id,
        body=_OFFSET.pack(offset) + group_bytes,
        born_timestamp_ms=timestamp_ms,
        store_timestamp_ms=timestamp_ms,
    )


def encode_blank(size: int) -> bytes:
    """A blank of exactly `size` bytes (>= 12) that pads a segment to its end."""
    _require(BLANK_MIN_SIZE <= size <= _INT32_MAX, f"blank size={size} out of range")
    return _frame(BLANK_MAGIC, bytes(size - _FRAME.size))


# ---- decoding ---------------------------------------------------------------------------------

Buffer = bytes | bytearray | memoryview


def scan_record(buf: Buffer, offset: int = 0, *, max_body: int = DEFAULT_MAX_BODY) -> Span | Torn | Corrupt:
    """Check the frame at `offset`: magic, a possible length, the CRC. Fields are not parsed."""
    if not 0 <= offset <= len(buf):
        raise ValueError(f"offset={offset} outside a buffer of {len(buf)} bytes")
    view = memoryview(buf)[offset:]
    available = len(view)
    magic = bytes(view[:4])
    if not (_MAGIC_BYTES.startswith(magic) or _BLANK_MAGIC_BYTES.startswith(magic)):
        return Corrupt(offset, f"bad magic 0x{magic.hex()}")
    if available < _FRAME.size:
        return Torn(offset, None)
    _, length, crc = _FRAME.unpack_from(view)
    blank = magic == _BLANK_MAGIC_BYTES
    low = BLANK_MIN_SIZE if blank else RECORD_HEADER_SIZE + 1
    high = max_record_size(max_body) + (BLANK_MIN_SIZE if blank else 0)
    if not low <= length <= high:
        return Corrupt(offset, f"total_length={length} outside [{low}, {high}]")
    if available < length:
        return Torn(offset, length)
    if zlib.crc32(view[_FRAME.size : length]) != crc:
        return Corrupt(offset, "crc32 mismatch")
    return Span(offset, length, blank)


def peek_length(buf: Buffer, offset: int = 0) -> int | Torn | Corrupt:
    """The declared length of the item at `offset`, checking only its magic (no CRC, no bounds)."""
    magic = bytes(buf[offset : offset + 4])
    if not (_MAGIC_BYTES.startswith(magic) or _BLANK_MAGIC_BYTES.startswith(magic)):
        return Corrupt(offset, f"bad magic 0x{magic.hex()}")
    if len(buf) - offset < 8:
        return Torn(offset, None)
    (length,) = _LENGTH.unpack_from(buf, offset + 4)
    return int(length) if length >= BLANK_MIN_SIZE else Corrupt(offset, f"total_length={length}")


def decode_record(
    buf: Buffer, offset: int = 0, *, max_body: int = DEFAULT_MAX_BODY
) -> DecodedRecord | Blank | Torn | Corrupt:
    """Decode the item at `offset`; never raises for any bytes (only for an offset outside `buf`)."""
    checked = _check(buf, offset, max_body)
    if not isinstance(checked, _Checked):
        return checked
    f, view = checked.fields, checked.view
    return DecodedRecord(
        offset=offset,
        size=checked.size,
        kind=RecordKind(f.kind),
        flags=f.flags,
        topic=checked.topic,
        queue_id=f.queue_id,
        producer_id=f.producer_id,
        producer_seq=f.producer_seq,
        born_timestamp_ms=f.born_ts_ms,
        store_timestamp_ms=f.store_ts_ms,
        properties=checked.properties,
        body=bytes(view[checked.body_start :]),
    )


def check_item(buf: Buffer, offset: int = 0, *, base: int = 0, max_body: int = DEFAULT_MAX_BODY) -> ItemHeader:
    """Validate the item at `offset` exactly as `decode_record` does (CRC, fields, utf-8, properties,
    a consumer offset's body) and return what the indexes need of it, with its offset shifted by
    `base`: a slave's replicated item is validated and read in this one pass (issue 17), its body
    never copied. Never raises for any bytes (only for an offset outside `buf`).

    A MESSAGE record that passes every check is read in one unpack (`_message_info`); any other
    item, or any check failing, takes the full path, which names what is wrong."""
    if offset >= 0 and len(buf) - offset >= RECORD_HEADER_SIZE:
        info = _message_info(buf, offset, base, max_body)
        if info is not None:
            return info
    checked = _check(buf, offset, max_body)
    if not isinstance(checked, _Checked):
        return checked if not isinstance(checked, Blank) else Blank(base + offset, checked.size)
    f = checked.fields
    consumer = None
    if f.kind == RecordKind.CONSUMER_OFFSET:
        view = checked.view
        (committed,) = _OFFSET.unpack_from(view, checked.body_start)
        group = bytes(view[checked.body_start + _OFFSET.size :]).decode()
        consumer = ConsumerOffset(group=group, topic=checked.topic, queue_id=f.queue_id, offset=committed)
    topic, kind = checked.topic, RecordKind(f.kind)
    return RecordInfo(base + offset, checked.size, kind, topic, f.queue_id, f.producer_id, f.producer_seq, consumer)


def _message_info(buf: Buffer, offset: int, base: int, max_body: int) -> RecordInfo | None:
    """`check_item`'s fast path: the info of the MESSAGE record at `offset` if it passes every check
    of the full path (`_check`: magic, length, CRC, fields, utf-8 topic, properties), else None. The
    caller made sure a whole header is there."""
    (magic, length, crc, kind, _, queue_id, producer_id, producer_seq, born, stored, topic_len, props_len, body_len) = (
        _HEADER.unpack_from(buf, offset)
    )
    if not (
        magic == MAGIC
        and kind == RecordKind.MESSAGE
        and length == RECORD_HEADER_SIZE + topic_len + props_len + body_len
        and length <= len(buf) - offset
        and queue_id >= 0
        and (producer_id == producer_seq == -1 or (producer_id >= 0 and producer_seq >= 0))
        and born >= 0
        and stored >= 0
        and 1 <= topic_len <= MAX_TOPIC_BYTES
        and props_len <= MAX_PROPERTIES_BYTES
        and 0 <= body_len <= max_body
        and zlib.crc32(memoryview(buf)[offset + _FRAME.size : offset + length]) == crc
    ):
        return None
    start = offset + RECORD_HEADER_SIZE
    try:
        topic = bytes(buf[start : start + topic_len]).decode()
        if (
            props_len
            and _parse_properties(bytes(buf[start + topic_len : start + topic_len + props_len]).decode()) is None
        ):
            return None
    except UnicodeDecodeError:
        return None
    message = RecordKind.MESSAGE
    return RecordInfo(base + offset, length, message, topic, queue_id, producer_id, producer_seq, None)


ItemHeader = RecordInfo | Blank | Torn | Corrupt
"""What `check_item` finds at an offset."""


class _Checked(NamedTuple):
    size: int
    fields: _Fields
    view: memoryview
    """The record's bytes."""
    topic: str
    properties: dict[str, str]
    body_start: int
    """Where the body starts in `view`."""


def _check(buf: Buffer, offset: int, max_body: int) -> _Checked | Blank | Torn | Corrupt:
    """What `decode_record` and `check_item` share: every check, no body copied."""
    span = scan_record(buf, offset, max_body=max_body)
    if not isinstance(span, Span):
        return span
    if span.blank:
        return Blank(offset, span.size)
    view = memoryview(buf)[offset : offset + span.size]
    f = _Fields._make(_FIELDS.unpack_from(view, _FRAME.size))
    problem = _field_problem(f, max_body)
    if problem is None and RECORD_HEADER_SIZE + f.topic_len + f.props_len + f.body_len != span.size:
        problem = f"field lengths {f.topic_len}+{f.props_len}+{f.body_len} disagree with total_length={span.size}"
    if problem is not None:
        return Corrupt(offset, problem)
    props_start = RECORD_HEADER_SIZE + f.topic_len
    body_start = props_start + f.props_len
    try:
        topic = bytes(view[RECORD_HEADER_SIZE:props_start]).decode()
        properties = _parse_properties(bytes(view[props_start:body_start]).decode()) if f.props_len else {}
    except UnicodeDecodeError:
        return Corrupt(offset, "topic or properties are not utf-8")
    if properties is None:
        return Corrupt(offset, "properties are not a JSON object of strings")
    if f.kind == RecordKind.CONSUMER_OFFSET and not _valid_offset_body(bytes(view[body_start:])):
        return Corrupt(offset, "CONSUMER_OFFSET body is not offset:i64 (>=0) + group (1..255 utf-8 bytes)")
    return _Checked(span.size, f, view, topic, properties, body_start)


class _Fields(NamedTuple):
    kind: int
    flags: int
    queue_id: int
    producer_id: int
    producer_seq: int
    born_ts_ms: int
    store_ts_ms: int
    topic_len: int
    props_len: int
    body_len: int


def _field_problem(f: _Fields, max_body: int) -> str | None:
    oks = (  # the tests once; a message is built only for the first that fails (every replicated record)
        f.kind == RecordKind.MESSAGE or f.kind == RecordKind.CONSUMER_OFFSET,
        f.queue_id >= 0,
        f.producer_id == f.producer_seq == -1 or (f.producer_id >= 0 and f.producer_seq >= 0),
        f.born_ts_ms >= 0 and f.store_ts_ms >= 0,
        1 <= f.topic_len <= MAX_TOPIC_BYTES,
        f.props_len <= MAX_PROPERTIES_BYTES,
        0 <= f.body_len <= max_body,
    )
    if all(oks):
        return None
    whats = (
        f"kind={f.kind}",
        f"queue_id={f.queue_id}",
        f"producer_id={f.producer_id}, producer_seq={f.producer_seq}",
        f"timestamps {f.born_ts_ms}, {f.store_ts_ms}",
        f"topic_len={f.topic_len}",
        f"props_len={f.props_len}",
        f"body_len={f.body_len}",
    )
    return f"invalid field {whats[oks.index(False)]}"


def _parse_properties(text: str) -> dict[str, str] | None:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        return None
    return value


def _valid_offset_body(body: bytes) -> bool:
    if not _OFFSET.size < len(body) <= _OFFSET.size + MAX_GROUP_BYTES:
        return False
    try:
        body[_OFFSET.size :].decode()
    except UnicodeDecodeError:
        return False
    (offset,) = _OFFSET.unpack_from(body)
    return bool(offset >= 0)


def find_valid_item(buf: Buffer, start: int, *, max_body: int = DEFAULT_MAX_BODY) -> int | None:
    """Position of the first well-framed item (magic, length, CRC) at or after `start`, if any.

    Used after damage is found, to tell a damaged tail (nothing valid follows) from damage in the
    middle. A record whose body embeds another encoded record is a (rare) false positive.
    """
    data = bytes(buf)
    position = data.find(_MAGIC_BYTES[:3], start)  # "BGL": the prefix both magics share
    while position != -1:
        if isinstance(scan_record(data, position, max_body=max_body), Span):
            return position
        position = data.find(_MAGIC_BYTES[:3], position + 1)
    return None
