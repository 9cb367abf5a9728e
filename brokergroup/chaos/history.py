"""Jepsen-style operation histories, and the clients that record them.

A history is a JSONL file, one operation per line:

    {"process": "p0", "type": "invoke", "f": "send", "value": {...}, "time": 1234567}

- `process`: who did it: a producer (`p<i>`), a consumer (`c<i>`), a final reader
  (`final:<replica>`), the `nemesis`, or the `harness` (its `topology` record).
- `type`: `invoke` when an operation starts; then exactly one of `ok` (it happened), `fail` (it
  certainly did not happen) or `info` (indeterminate: it may or may not have happened).
- `f`: `send` or `poll` (the nemesis records its faults with its own `f`, type `info`; the
  harness records `topology` once, type `info`, before any client starts).
- `value`:
  - send: `{"queue": "<set>/<topic>/<queueId>", "producerId": P, "seq": S, "payload": "...",
    "digest": D}` (the idempotent producer's identity of the message, its body as text, and
    `body_digest` of the bytes sent); an `ok` adds `attempts` (how many puts it took) and
    `queueOffset` (where the master stored it, as its answer said; null when it no longer knew);
  - poll (ok): `{"queue": Q, "offset": O, "messages": [[queueOffset, producerId, seq, digest], ...]}`
    (where the read started, and the digest of each body read), plus `"skipped": [[from, to], ...]`
    when the broker answered that retention had deleted the queue below `to` (its min offset, the
    OFFSET_TOO_SMALL status of GET /v1/messages, the min offset of the binary reply): the offsets
    `[from, to)` were gone before this reader got to them;
  - poll (invoke): `{"queue": Q, "offset": where the read starts}`; (fail): `{"queue", "error"}`;
  - topology: `{"queues": {Q: [replica, ...]}, "controllers": [node, ...]}`: what the final
    reads and the event logs must cover for the checker to call a run complete.
- `time`: nanoseconds since the history started (monotonic clock).

The producer sends one message at a time through the idempotent `Producer`, which retries across
failovers; a send that is not acknowledged within its deadline is `info`, since one of its
attempts may have been stored. The consumer polls the master through `Consumer` and records the
(queueOffset, producerId, seq, body digest) it read.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Protocol

import aiohttp

from brokergroup.broker.binary_client import BinaryConsumer, BinaryProducer
from brokergroup.broker.client import Consumer, ProduceError, Producer
from brokergroup.common.jsonl import read_jsonl

Op = dict[str, Any]


class Recorder(Protocol):
    """Where operations go: a `HistoryWriter`, or a history kept in memory (the demo's)."""

    def record(self, process: str, type_: str, f: str, value: Any) -> object: ...


def queue_name(broker_set: str, topic: str, queue_id: int) -> str:
    return f"{broker_set}/{topic}/{queue_id}"


def body_digest(body: bytes) -> str:
    """What the history keeps of a message body: 16 hex digits of its BLAKE2b hash."""
    return hashlib.blake2b(body, digest_size=8).hexdigest()


class HistoryWriter:
    """Appends operations to a JSONL file, one flushed line each (a crashed run keeps its history)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file: IO[str] = path.open("a", encoding="utf-8")
        self._started = time.monotonic_ns()

    def record(self, process: str, type_: str, f: str, value: Any) -> Op:
        op: Op = {
            "process": process,
            "type": type_,
            "f": f,
            "value": value,
            "time": time.monotonic_ns() - self._started,
        }
        self._file.write(json.dumps(op, separators=(",", ":")) + "\n")
        self._file.flush()
        return op

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def read_history(path: Path) -> Iterator[Op]:
    """The operations of a history file; a torn last line (the writer was killed) is skipped."""
    return read_jsonl(path)


class ProducerClient:
    """Sends numbered messages to one queue, one at a time, at most `rate` per second."""

    def __init__(
        self,
        process: str,
        producer: Producer | BinaryProducer,
        history: HistoryWriter,
        *,
        broker_set: str,
        topic: str,
        rate: float,
    ) -> None:
        self.process = process
        self.producer = producer
        self.history = history
        self.queue = queue_name(broker_set, topic, 0)
        self.topic = topic
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.acked = 0
        self.last_ack: float | None = None
        self.ack_times: list[float] = []
        """When each acknowledgement arrived (monotonic), for outage measurements."""
        self.refused = 0
        """Puts that did not end in PUT_OK: retried attempts, and sends that failed or gave up."""

    async def run(self, stop: asyncio.Event) -> None:
        next_at = time.monotonic()
        while not stop.is_set():
            await self.send_one()
            next_at = max(next_at + self.interval, time.monotonic() - 1.0)
            delay = next_at - time.monotonic()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)

    async def send_one(self) -> str:
        seq = self.producer.next_seq
        payload = f"{self.process}-{seq}"
        body = payload.encode()
        value = {
            "queue": self.queue,
            "producerId": self.producer.producer_id,
            "seq": seq,
            "payload": payload,
            "digest": body_digest(body),
        }
        self.history.record(self.process, "invoke", "send", value)
        try:
            sent = await self.producer.send(self.topic, [body])
        except ProduceError as exc:
            # 400/413 are definite refusals; anything else gave up while an attempt may have landed.
            definite = exc.status == "BAD_REQUEST"
            self.history.record(self.process, "fail" if definite else "info", "send", {**value, "error": str(exc)})
            self.refused += 1
            return "fail" if definite else "info"
        except asyncio.CancelledError:
            self.history.record(self.process, "info", "send", {**value, "error": "cancelled"})
            raise
        stored = sent.queue_offsets[0] if sent.queue_offsets else None
        self.history.record(self.process, "ok", "send", {**value, "attempts": sent.attempts, "queueOffset": stored})
        self.acked += 1
        self.refused += sent.attempts - 1
        self.last_ack = time.monotonic()
        self.ack_times.append(self.last_ack)
        return "ok"


class ConsumerClient:
    """Polls one queue from the master and records what it read.

    A process does one operation at a time (the checker's model of a history): a poll started
    while another is open, as a drain beside the polling loop would, waits for it. Two polls open
    at once would both start at the same position, read the same messages, and record an earlier
    offset after a later one (`nonMonotonicPolls`, issue 17).

    It reads from the queue's offset 0 (never from a committed offset), so every offset it did not
    read is accounted for: a poll below the queue's min offset reads nothing, moves the position to
    the min offset and is recorded with the `skipped` range (retention deleted it first)."""

    def __init__(
        self, process: str, consumer: Consumer | BinaryConsumer, history: HistoryWriter, *, broker_set: str, topic: str
    ) -> None:
        self.process = process
        self.consumer = consumer
        self.history = history
        self.queue = queue_name(broker_set, topic, 0)
        self.topic = topic
        self.read = 0
        self.skipped = 0
        """Offsets the broker said retention had deleted before this consumer read them."""
        self._one_at_a_time = asyncio.Lock()
        consumer.positions.setdefault((topic, 0), 0)

    @property
    def position(self) -> int:
        return self.consumer.positions.get((self.topic, 0), 0)

    async def run(self, stop: asyncio.Event, *, idle_s: float = 0.05, every_s: float | None = None) -> None:
        """Poll until `stop`: again at once while polls find messages, after `idle_s` when one finds none;
        with `every_s`, one poll every `every_s` whatever it found (a consumer that lags behind)."""
        while not stop.is_set():
            found = await self.poll_one()
            pause = every_s if every_s is not None else (idle_s if found == 0 else 0.0)
            if pause > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), pause)

    async def poll_one(self) -> int:
        """Messages read by one poll (0 when the poll failed or found nothing)."""
        async with self._one_at_a_time:
            return await self._poll()

    async def _poll(self) -> int:
        start = self.position
        self.history.record(self.process, "invoke", "poll", {"queue": self.queue, "offset": start})
        try:
            received = await self.consumer.poll(self.topic, 0, max_count=256)
        except ProduceError as exc:
            self.history.record(self.process, "fail", "poll", {"queue": self.queue, "error": str(exc)})
            return 0
        except asyncio.CancelledError:
            self.history.record(self.process, "fail", "poll", {"queue": self.queue, "error": "cancelled"})
            raise
        messages = [[m.queue_offset, m.producer_id, m.seq, body_digest(m.body)] for m in received]
        value: dict[str, Any] = {"queue": self.queue, "offset": start, "messages": messages}
        low = self.consumer.min_offsets.get((self.topic, 0))
        if low is not None and start < low:  # retention deleted [start, low) before this consumer got there
            value["skipped"] = [[start, low]]
            self.skipped += low - start
        self.history.record(self.process, "ok", "poll", value)
        self.read += len(messages)
        return len(messages)


async def read_replica(
    session: aiohttp.ClientSession, address: str, topic: str, queue_id: int = 0, *, timeout_s: float = 10.0
) -> tuple[list[list[Any]], list[list[int]]]:
    """Every message of a queue on one replica, as [queueOffset, producerId, seq, body digest], from offset 0;
    and the ranges [from, to) that the replica answered OFFSET_TOO_SMALL for (retention deleted them; the
    read goes on at the `nextOffset` it named, the queue's min offset)."""
    out: list[list[Any]] = []
    skipped: list[list[int]] = []
    offset = 0
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    while True:
        params = {"topic": topic, "queueId": str(queue_id), "offset": str(offset), "maxCount": "1024"}
        async with session.get(f"http://{address}/v1/messages", params=params, timeout=timeout) as r:
            if r.status != 200:
                raise ProduceError(f"HTTP {r.status}", await r.text())
            body = await r.json()
        if body.get("status") == "OFFSET_TOO_SMALL":
            after = int(body["nextOffset"])
            if after <= offset:
                raise ProduceError("OFFSET_TOO_SMALL", f"at {offset} with nextOffset {after}: the read cannot go on")
            skipped.append([offset, after])
            offset = after
            continue
        if not body["messages"]:
            return out, skipped
        out += [
            [int(m["queueOffset"]), int(m["producerId"]), int(m["seq"]), body_digest(base64.b64decode(m["body"]))]
            for m in body["messages"]
        ]
        offset = int(body["nextOffset"])


async def final_read(
    history: Recorder, session: aiohttp.ClientSession, replica: str, address: str, topic: str, queue: str
) -> int | None:
    """A full read of one replica's queue, recorded as one poll of the process `final:<replica>`:
    the number of messages, or None when the read failed (recorded as `fail`, which the checker
    counts as a missing final read: INCOMPLETE)."""
    process = f"final:{replica}"
    history.record(process, "invoke", "poll", {"queue": queue, "offset": 0})
    try:
        messages, skipped = await read_replica(session, address, topic)
    except (ProduceError, aiohttp.ClientError, TimeoutError, ValueError, KeyError) as exc:
        history.record(
            process, "fail", "poll", {"queue": queue, "error": f"{address}: {str(exc) or type(exc).__name__}"}
        )
        return None
    value: dict[str, Any] = {"queue": queue, "offset": 0, "messages": messages}
    if skipped:
        value["skipped"] = skipped
    history.record(process, "ok", "poll", value)
    return len(messages)


def record_topology(history: Recorder, queues: dict[str, list[str]], controllers: list[str]) -> None:
    """What a complete run must cover: the replicas of each queue and the controller nodes."""
    history.record("harness", "info", "topology", {"queues": queues, "controllers": controllers})
