"""The binary client protocol (produce, consume, consumer offsets), sans-I/O.

One TCP connection carries length-prefixed frames both ways. Every request carries a request id
chosen by the client; the reply to it carries the same id, so a client may pipeline many requests
on one connection and the broker may answer them out of order. All integers are big-endian.

Grammar (sizes in bytes)::

    Frame        := length:u32 (bytes after this field, 5..max_frame)  type:u8  requestId:u32  payload
    str8         := len:u8 utf-8{len}
    str16        := len:u16 utf-8{len}

    client -> broker
      PRODUCE       0x01  payload = the binary batch of `POST /v1/messages` (broker/wire.py), one message or many,
                          with the idempotent producer id and sequences
      CONSUME       0x02  topic:str16  queueId:i32  offset:i64  maxCount:u32  maxBytes:u32
      COMMIT_OFFSET 0x03  group:str16  topic:str16  queueId:i32  offset:i64
      GET_OFFSET    0x04  group:str16  topic:str16  queueId:i32

    broker -> client
      PUT_RESULT    0x81  status:str8  remark:str16  masterAddress:str16 (empty = none)  nextOffset:i64 (-1 = none)
                          count:u32  { commitOffset:i64  queueOffset:i64 (-1 = none)  duplicate:u8 }{count}
      MESSAGES      0x82  nextOffset:i64  minOffset:i64  maxOffset:i64  count:u32
                          { queueOffset:i64  commitOffset:i64  bornTimestamp:i64  storeTimestamp:i64
                            producerId:i64  seq:i64  properties:u32+JSON object (0 = none)  body:u32+bytes }{count}
      OFFSET        0x83  offset:i64 (-1 = none committed)
      ERROR         0xFF  status:str8  code:u16  remark:str16

Request ids run from 1 to 2^32-1; id 0 is the connection's: an ERROR under it (an oversized frame, too many
connections) is about the connection, which the broker closes next.

Status names are the HTTP API's (`PUT_OK`, `FLUSH_SLAVE_TIMEOUT`, ..., `BAD_REQUEST`, `SYSTEM_ERROR`) and
an ERROR's `code` is the HTTP status the same failure gets from the HTTP API (400, 413, 503, 500), so
both protocols mean the same thing by the same words. A PUT_RESULT answers PRODUCE and COMMIT_OFFSET.

`FrameDecoder` only splits frames; it raises `FrameTooLarge` for a length outside the limits (the
stream is then unusable: the decoder is poisoned). `parse_request` / `parse_reply` read one frame's
payload and raise `BadFrame` (with the request id) for an unknown type or a malformed payload: the
frame's boundaries are intact, so the connection can answer with an ERROR and go on.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import struct
from collections.abc import Sequence
from typing import Final, NamedTuple, Protocol

from brokergroup.broker.errors import ProtocolError

HEADER: Final = struct.Struct(">IBI")  # length, type, request id
HEADER_SIZE: Final = HEADER.size  # 9
MIN_LENGTH: Final = 5  # type + request id
DEFAULT_MAX_REQUEST: Final = 8 * 1024 * 1024 + 64
"""The HTTP API's body limit (8 MiB) plus the frame header."""
DEFAULT_MAX_REPLY: Final = 64 * 1024 * 1024 + 1024 * 1024
"""The largest consume reply (maxBytes up to 64 MiB) plus per-message headers."""
MAX_REQUEST_ID: Final = 2**32 - 1
CONNECTION_REQUEST_ID: Final = 0
"""The id of the broker's ERROR about the connection itself (an oversized frame, too many connections),
after which it closes the connection; clients number their requests from 1."""
INT64_MAX: Final = 2**63 - 1
MAX_QUEUE_ID: Final = 1023  # broker/wire.py MAX_QUEUE_ID
MAX_COUNT: Final = 1024
MAX_BYTES: Final = 64 * 1024 * 1024

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_CONSUME_TAIL = struct.Struct(">iqII")  # queueId, offset, maxCount, maxBytes
_QUEUE_OFFSET = struct.Struct(">iq")  # queueId, offset
_APPENDED = struct.Struct(">qqB")  # commitOffset, queueOffset, duplicate
_MESSAGES_HEAD = struct.Struct(">qqqI")  # nextOffset, minOffset, maxOffset, count
_MESSAGE_HEAD = struct.Struct(">qqqqqq")  # queueOffset, commitOffset, born, store, producerId, seq


class FrameType(enum.IntEnum):
    PRODUCE = 0x01
    CONSUME = 0x02
    COMMIT_OFFSET = 0x03
    GET_OFFSET = 0x04
    PUT_RESULT = 0x81
    MESSAGES = 0x82
    OFFSET = 0x83
    ERROR = 0xFF


REQUEST_TYPES: Final = frozenset({FrameType.PRODUCE, FrameType.CONSUME, FrameType.COMMIT_OFFSET, FrameType.GET_OFFSET})
REPLY_TYPES: Final = frozenset({FrameType.PUT_RESULT, FrameType.MESSAGES, FrameType.OFFSET, FrameType.ERROR})


class FrameTooLarge(ProtocolError):
    """A frame length outside 5..max_frame: the stream cannot be resynchronised."""


class BadFrame(ProtocolError):
    """A frame with intact boundaries but an unknown type or a malformed payload."""

    def __init__(self, request_id: int, remark: str, *, reason: str = "malformed") -> None:
        super().__init__(remark)
        self.request_id = request_id
        self.remark = remark
        self.reason = reason


class RawFrame(NamedTuple):
    """One frame as the stream carries it. The types built per message on the produce path (this one,
    `Appended`, `PutResult`) are named tuples: a third of a frozen dataclass's build cost (issue 17)."""

    type: int
    request_id: int
    payload: bytes


# ---- requests ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Produce:
    batch: bytes
    """The binary batch of broker/wire.py, decoded (and validated) by the broker as for HTTP."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Consume:
    topic: str
    queue_id: int = 0
    offset: int = 0
    max_count: int = 32
    max_bytes: int = 4 * 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CommitOffset:
    group: str
    topic: str
    queue_id: int
    offset: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GetOffset:
    group: str
    topic: str
    queue_id: int = 0


Request = Produce | Consume | CommitOffset | GetOffset


# ---- replies -----------------------------------------------------------------------------------------


class Appended(NamedTuple):
    commit_offset: int
    queue_offset: int | None
    duplicate: bool


class PutResult(NamedTuple):
    status: str
    remark: str = ""
    master_address: str | None = None
    next_offset: int | None = None
    appended: tuple[Appended, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ConsumedMessage:
    queue_offset: int
    commit_offset: int
    born_timestamp_ms: int
    store_timestamp_ms: int
    producer_id: int
    seq: int
    properties: dict[str, str]
    body: bytes

    @property
    def producer_seq(self) -> int:
        return self.seq


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Messages:
    next_offset: int
    min_offset: int
    max_offset: int
    messages: tuple[ConsumedMessage, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Offset:
    offset: int | None


@dataclasses.dataclass(frozen=True, slots=True)
class Error:
    status: str
    code: int
    remark: str


Reply = PutResult | Messages | Offset | Error


class StoredLike(Protocol):
    """What a consume reply is encoded from (the store's `StoredMessage`)."""

    @property
    def queue_offset(self) -> int: ...
    @property
    def commit_offset(self) -> int: ...
    @property
    def born_timestamp_ms(self) -> int: ...
    @property
    def store_timestamp_ms(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_seq(self) -> int: ...
    @property
    def properties(self) -> dict[str, str]: ...
    @property
    def body(self) -> bytes: ...


# ---- encoding ----------------------------------------------------------------------------------------


def frame(kind: FrameType, request_id: int, payload: bytes) -> bytes:
    if not 0 <= request_id <= MAX_REQUEST_ID:
        raise ValueError(f"requestId={request_id} is out of range [0, {MAX_REQUEST_ID}]")
    return HEADER.pack(MIN_LENGTH + len(payload), kind, request_id) + payload


def _str(value: str, width: struct.Struct, what: str) -> bytes:
    raw = value.encode()
    limit = 2 ** (8 * width.size) - 1
    if len(raw) > limit:
        raise ValueError(f"{what}: {len(raw)} bytes, at most {limit}")
    return width.pack(len(raw)) + raw


def _props(props: dict[str, str]) -> bytes:
    return json.dumps(props, separators=(",", ":"), sort_keys=True).encode() if props else b""


def encode_request(request_id: int, request: Request) -> bytes:
    if isinstance(request, Produce):
        return frame(FrameType.PRODUCE, request_id, request.batch)
    if isinstance(request, Consume):
        body = _str(request.topic, _U16, "topic") + _CONSUME_TAIL.pack(
            request.queue_id, request.offset, request.max_count, request.max_bytes
        )
        return frame(FrameType.CONSUME, request_id, body)
    if isinstance(request, CommitOffset):
        body = (
            _str(request.group, _U16, "group")
            + _str(request.topic, _U16, "topic")
            + _QUEUE_OFFSET.pack(request.queue_id, request.offset)
        )
        return frame(FrameType.COMMIT_OFFSET, request_id, body)
    body = _str(request.group, _U16, "group") + _str(request.topic, _U16, "topic") + _I32.pack(request.queue_id)
    return frame(FrameType.GET_OFFSET, request_id, body)


def encode_put_result(request_id: int, result: PutResult) -> bytes:
    parts = [
        _str(result.status, _U8, "status"),
        _str(result.remark, _U16, "remark"),
        _str(result.master_address or "", _U16, "masterAddress"),
        _I64.pack(-1 if result.next_offset is None else result.next_offset),
        _U32.pack(len(result.appended)),
    ]
    parts += [
        _APPENDED.pack(a.commit_offset, -1 if a.queue_offset is None else a.queue_offset, int(a.duplicate))
        for a in result.appended
    ]
    return frame(FrameType.PUT_RESULT, request_id, b"".join(parts))


def encode_messages(
    request_id: int, *, next_offset: int, min_offset: int, max_offset: int, messages: Sequence[StoredLike]
) -> bytes:
    parts = [_MESSAGES_HEAD.pack(next_offset, min_offset, max_offset, len(messages))]
    for m in messages:
        p = _props(dict(m.properties))
        parts += [
            _MESSAGE_HEAD.pack(
                m.queue_offset,
                m.commit_offset,
                m.born_timestamp_ms,
                m.store_timestamp_ms,
                m.producer_id,
                m.producer_seq,
            ),
            _U32.pack(len(p)),
            p,
            _U32.pack(len(m.body)),
            m.body,
        ]
    return frame(FrameType.MESSAGES, request_id, b"".join(parts))


def encode_offset(request_id: int, offset: int | None) -> bytes:
    return frame(FrameType.OFFSET, request_id, _I64.pack(-1 if offset is None else offset))


def encode_error(request_id: int, error: Error) -> bytes:
    remark = error.remark.encode()[:65535].decode(errors="ignore")
    body = _str(error.status, _U8, "status") + _U16.pack(error.code) + _str(remark, _U16, "remark")
    return frame(FrameType.ERROR, request_id, body)


def encode_reply(request_id: int, reply: PutResult | Offset | Error | Messages) -> bytes:
    """Any reply (the broker encodes consume replies from stored messages with `encode_messages`)."""
    if isinstance(reply, PutResult):
        return encode_put_result(request_id, reply)
    if isinstance(reply, Offset):
        return encode_offset(request_id, reply.offset)
    if isinstance(reply, Error):
        return encode_error(request_id, reply)
    return encode_messages(
        request_id,
        next_offset=reply.next_offset,
        min_offset=reply.min_offset,
        max_offset=reply.max_offset,
        messages=reply.messages,
    )


# ---- framing -----------------------------------------------------------------------------------------


class _NeedData(enum.Enum):
    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = _NeedData.NEED_DATA


class FrameDecoder:
    """Splits a byte stream into frames; holds at most one frame (max_frame + header) of bytes."""

    def __init__(self, *, max_frame: int = DEFAULT_MAX_REQUEST) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self._pos = 0
        self._error: FrameTooLarge | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames (a partial frame)."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes) -> None:
        if self._error is not None:
            raise self._error
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    def next_frame(self) -> RawFrame | _NeedData:
        if self._error is not None:
            raise self._error
        buf, pos = self._buf, self._pos
        if len(buf) - pos < HEADER_SIZE:
            if len(buf) - pos >= 4:
                self._check_length(_U32.unpack_from(buf, pos)[0])
            return NEED_DATA
        length, kind, request_id = HEADER.unpack_from(buf, pos)
        self._check_length(length)
        end = pos + 4 + length
        if len(buf) < end:
            return NEED_DATA
        self._pos = end
        return RawFrame(kind, request_id, bytes(buf[pos + HEADER_SIZE : end]))

    def _check_length(self, length: int) -> None:
        if not MIN_LENGTH <= length <= self.max_frame:
            self._error = FrameTooLarge(
                f"frame length {length} is out of range [{MIN_LENGTH}, {self.max_frame}]"
                + (": larger than the broker accepts" if length > self.max_frame else "")
            )
            raise self._error


# ---- parsing -----------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, raw: RawFrame, what: str) -> None:
        self.data = raw.payload
        self.pos = 0
        self.request_id = raw.request_id
        self.what = what

    def fail(self, remark: str) -> BadFrame:
        return BadFrame(self.request_id, f"{self.what}: {remark}")

    def take(self, n: int, field: str) -> bytes:
        if self.pos + n > len(self.data):
            raise self.fail(f"truncated while reading {field} at byte {self.pos}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: struct.Struct, field: str) -> tuple[int, ...]:
        return fmt.unpack(self.take(fmt.size, field))

    def text(self, width: struct.Struct, field: str) -> str:
        (n,) = self.unpack(width, f"{field} length")
        try:
            return self.take(n, field).decode()
        except UnicodeDecodeError as exc:
            raise self.fail(f"{field}: not utf-8") from exc

    def props(self, field: str) -> dict[str, str]:
        (n,) = self.unpack(_U32, f"{field} length")
        raw = self.take(n, field)
        if not raw:
            return {}
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise self.fail(f"{field}: not JSON") from exc
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise self.fail(f"{field}: must be an object of strings")
        return value

    def end(self) -> None:
        if self.pos != len(self.data):
            raise self.fail(f"{len(self.data) - self.pos} trailing bytes")


def _range(r: _Reader, name: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise r.fail(f"{name} must be within [{low}, {high}] (got {value})")
    return value


def _name(r: _Reader, name: str, value: str) -> str:
    if not value:
        raise r.fail(f"{name} is required")
    return value


def parse_request(raw: RawFrame) -> Request:
    """A request frame's payload; `BadFrame` names what was wrong. A PRODUCE batch is checked by
    the broker's batch decoder (broker/wire.py), as for HTTP."""
    if raw.type == FrameType.PRODUCE:
        return Produce(raw.payload)
    if raw.type == FrameType.CONSUME:
        r = _Reader(raw, "CONSUME")
        topic = _name(r, "topic", r.text(_U16, "topic"))
        queue_id, offset, max_count, max_bytes = r.unpack(_CONSUME_TAIL, "queueId, offset, maxCount, maxBytes")
        r.end()
        return Consume(
            topic=topic,
            queue_id=_range(r, "queueId", queue_id, 0, MAX_QUEUE_ID),
            offset=_range(r, "offset", offset, 0, 2**62),
            max_count=_range(r, "maxCount", max_count, 1, MAX_COUNT),
            max_bytes=_range(r, "maxBytes", max_bytes, 1, MAX_BYTES),
        )
    if raw.type == FrameType.COMMIT_OFFSET:
        r = _Reader(raw, "COMMIT_OFFSET")
        group, topic = r.text(_U16, "group"), r.text(_U16, "topic")
        queue_id, offset = r.unpack(_QUEUE_OFFSET, "queueId, offset")
        r.end()
        return CommitOffset(group=group, topic=topic, queue_id=queue_id, offset=offset)
    if raw.type == FrameType.GET_OFFSET:
        r = _Reader(raw, "GET_OFFSET")
        group = _name(r, "group", r.text(_U16, "group"))
        topic = _name(r, "topic", r.text(_U16, "topic"))
        (queue_id,) = r.unpack(_I32, "queueId")
        r.end()
        return GetOffset(group=group, topic=topic, queue_id=_range(r, "queueId", queue_id, 0, MAX_QUEUE_ID))
    raise BadFrame(
        raw.request_id,
        f"unknown request type 0x{raw.type:02x}; known: "
        + ", ".join(f"{t.name} 0x{t.value:02x}" for t in sorted(REQUEST_TYPES)),
        reason="unknown_type",
    )


def parse_reply(raw: RawFrame) -> Reply:
    if raw.type == FrameType.PUT_RESULT:
        r = _Reader(raw, "PUT_RESULT")
        status, remark, master = r.text(_U8, "status"), r.text(_U16, "remark"), r.text(_U16, "masterAddress")
        (next_offset,) = r.unpack(_I64, "nextOffset")
        (count,) = r.unpack(_U32, "count")
        if count * _APPENDED.size > len(r.data) - r.pos:
            raise r.fail(f"count={count} is more than the payload holds")
        appended = []
        for _ in range(count):
            commit, queue, dup = r.unpack(_APPENDED, "message")
            appended.append(Appended(commit, None if queue < 0 else queue, bool(dup)))
        r.end()
        return PutResult(
            status=status,
            remark=remark,
            master_address=master or None,
            next_offset=None if next_offset < 0 else next_offset,
            appended=tuple(appended),
        )
    if raw.type == FrameType.MESSAGES:
        r = _Reader(raw, "MESSAGES")
        next_offset, min_offset, max_offset, count = r.unpack(_MESSAGES_HEAD, "header")
        messages = []
        for i in range(count):
            q, c, born, stored, pid, seq = r.unpack(_MESSAGE_HEAD, f"message {i} header")
            props = r.props(f"message {i} properties")
            (n,) = r.unpack(_U32, f"message {i} body length")
            body = r.take(n, f"message {i} body")
            messages.append(
                ConsumedMessage(
                    queue_offset=q,
                    commit_offset=c,
                    born_timestamp_ms=born,
                    store_timestamp_ms=stored,
                    producer_id=pid,
                    seq=seq,
                    properties=props,
                    body=body,
                )
            )
        r.end()
        return Messages(next_offset=next_offset, min_offset=min_offset, max_offset=max_offset, messages=tuple(messages))
    if raw.type == FrameType.OFFSET:
        r = _Reader(raw, "OFFSET")
        (offset,) = r.unpack(_I64, "offset")
        r.end()
        return Offset(None if offset < 0 else offset)
    if raw.type == FrameType.ERROR:
        r = _Reader(raw, "ERROR")
        status = r.text(_U8, "status")
        (code,) = r.unpack(_U16, "code")
        remark = r.text(_U16, "remark")
        r.end()
        return Error(status, code, remark)
    raise BadFrame(raw.request_id, f"unknown reply type 0x{raw.type:02x}", reason="unknown_type")
