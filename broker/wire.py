"""Request and response bodies of the broker's HTTP API, and the binary batch format.

JSON carries message bodies as base64. For throughput, `POST /v1/messages` also accepts a
binary batch (`Content-Type: application/x-brokergroup-batch`), big-endian:

    u8   version = 1
    u16  topic length, then the topic (utf-8)
    i32  queue id
    i64  producer id (-1 = not idempotent)
    u32  message count
    per message:
      i64  producer sequence (-1 = none)
      i64  born timestamp, ms
      u32  properties length, then the properties as a JSON object (0 = none)
      u32  body length, then the body

Every malformed input is refused with `WireError` naming the field.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
import struct
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from brokergroup.broker.errors import BrokerError
from brokergroup.broker.store.types import NO_PROPERTIES, Message

BATCH_CONTENT_TYPE = "application/x-brokergroup-batch"
MAX_BATCH = 1024
MAX_QUEUE_ID = 1023
TOPIC_PATTERN = re.compile(r"[A-Za-z0-9_.%|-]{1,127}")
Topic = Annotated[str, Field(min_length=1, max_length=127, pattern=r"^[A-Za-z0-9_.%|-]+$")]
QueueId = Annotated[int, Field(ge=0, le=MAX_QUEUE_ID)]


class WireError(BrokerError):
    """A request body that cannot be used; the message names the field."""


class Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True)


class MessageIn(Body):
    body: str
    """base64"""
    properties: dict[str, str] = Field(default_factory=dict)
    seq: Annotated[int, Field(ge=-1)] = -1
    born_timestamp: Annotated[int, Field(ge=0)] | None = None


class ProduceRequest(Body):
    topic: Topic
    queue_id: QueueId = 0
    producer_id: Annotated[int, Field(ge=-1, le=2**63 - 1)] = -1
    messages: Annotated[list[MessageIn], Field(min_length=1, max_length=MAX_BATCH)]


class ConsumerOffsetRequest(Body):
    group: Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9_.%|-]+$")]
    topic: Topic
    queue_id: QueueId
    offset: Annotated[int, Field(ge=0)]


class FenceRequest(Body):
    fenced: bool
    """true: refuse writes and stop replicating (kept across restarts); false: lift the fence."""


class WritePermissionRequest(Body):
    writable: bool
    """false: wipe the write permission, refuse produces (kept across restarts); true: restore it."""


def messages_from_json(req: ProduceRequest, *, now_ms: int) -> list[Message]:
    out = []
    for i, m in enumerate(req.messages):
        try:
            body = base64.b64decode(m.body, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise WireError(f"messages[{i}].body: not valid base64") from exc
        if req.producer_id >= 0 and m.seq < 0:
            raise WireError(f"messages[{i}].seq: required (>= 0) when producerId is set")
        out.append(
            Message(
                topic=req.topic,
                queue_id=req.queue_id,
                body=body,
                born_timestamp_ms=m.born_timestamp if m.born_timestamp is not None else now_ms,
                properties=m.properties,
                producer_id=req.producer_id,
                producer_seq=m.seq if req.producer_id >= 0 else -1,
            )
        )
    return out


def encode_batch(
    *, topic: str, queue_id: int, producer_id: int, messages: list[tuple[int, int, dict[str, str], bytes]]
) -> bytes:
    """messages: (seq, born_ms, properties, body) tuples."""
    t = topic.encode()
    parts = [struct.pack(">BH", 1, len(t)), t, struct.pack(">iqI", queue_id, producer_id, len(messages))]
    for seq, born, props, body in messages:
        p = json.dumps(props, separators=(",", ":"), sort_keys=True).encode() if props else b""
        parts += [struct.pack(">qqI", seq, born, len(p)), p, struct.pack(">I", len(body)), body]
    return b"".join(parts)


_MESSAGE_HEAD = struct.Struct(">qqI")
"""A message's producer sequence, born timestamp and properties length."""
_U32 = struct.Struct(">I")


def _truncated(what: str, pos: int) -> WireError:
    return WireError(f"batch truncated while reading {what} at byte {pos}")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise _truncated(what, self.pos)
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str, what: str) -> tuple[Any, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))


@functools.lru_cache(maxsize=4096)
def _header_problems(topic: str, queue_id: int, producer_id: int) -> str:
    """What the JSON API's validation finds wrong with a batch header ("" if nothing), remembered for
    the headers seen last: a producer sends the same one with every batch (issue 17: validating it
    again cost a pydantic model per request)."""
    try:
        ProduceRequest.model_validate(
            {"topic": topic, "queueId": queue_id, "producerId": producer_id, "messages": [{"body": ""}]}
        )
    except ValidationError as exc:
        return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
    return ""


def decode_batch(data: bytes, *, now_ms: int) -> list[Message]:
    r = _Reader(data)
    (version,) = r.unpack(">B", "version")
    if version != 1:
        raise WireError(f"version: unsupported batch version {version}")
    (topic_len,) = r.unpack(">H", "topic length")
    try:
        topic = r.take(topic_len, "topic").decode()
    except UnicodeDecodeError as exc:
        raise WireError("topic: not utf-8") from exc
    queue_id, producer_id, count = r.unpack(">iqI", "queue id, producer id, count")
    problems = _header_problems(topic, queue_id, producer_id)
    if problems:
        raise WireError(f"batch header: {problems}")
    if not 1 <= count <= MAX_BATCH:
        raise WireError(f"count: {count} messages; must be 1..{MAX_BATCH}")
    out = []
    pos, end = r.pos, len(data)
    for i in range(count):  # the hot loop of a batched put (issue 17): offsets, no reader calls
        if pos + _MESSAGE_HEAD.size > end:
            raise _truncated(f"message {i} header", pos)
        seq, born, props_len = _MESSAGE_HEAD.unpack_from(data, pos)
        pos += _MESSAGE_HEAD.size
        if pos + props_len > end:
            raise _truncated(f"message {i} properties", pos)
        props: Mapping[str, str] = NO_PROPERTIES
        if props_len:
            try:
                props = json.loads(data[pos : pos + props_len])
            except (ValueError, RecursionError) as exc:
                raise WireError(f"messages[{i}].properties: not JSON") from exc
            if not isinstance(props, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in props.items()
            ):
                raise WireError(f"messages[{i}].properties: must be an object of strings")
            pos += props_len
        if pos + _U32.size > end:
            raise _truncated(f"message {i} body length", pos)
        (body_len,) = _U32.unpack_from(data, pos)
        pos += _U32.size
        if pos + body_len > end:
            raise _truncated(f"message {i} body", pos)
        body = data[pos : pos + body_len]
        pos += body_len
        if producer_id >= 0 and seq < 0:
            raise WireError(f"messages[{i}].seq: required (>= 0) when producerId is set")
        if born < 0:
            raise WireError(f"messages[{i}].bornTimestamp: negative")
        out.append(Message(topic, queue_id, body, born or now_ms, props, producer_id, seq if producer_id >= 0 else -1))
    r.pos = pos
    if r.pos != len(data):
        raise WireError(f"{len(data) - r.pos} trailing bytes after {count} messages")
    return out
