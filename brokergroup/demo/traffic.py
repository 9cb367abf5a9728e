"""The demo's clients: one idempotent producer per broker set, and a reader that consumes everything.

Both record what they did twice over: as plain rows with wall-clock times (for the timeline
and the charts; the controllers' event log uses the same clock) and as a Jepsen-style history
in the format of `brokergroup.chaos.history` (for the checker): `invoke`, then `ok` or `info`
(indeterminate: not acknowledged within the deadline, but an attempt may have been stored).
Sends carry the `body_digest` of the bytes sent, reads the digest of each body read, so the
checker compares bodies too.
"""

from __future__ import annotations

import asyncio
import time

from brokergroup.broker.binary_client import BinaryConsumer, BinaryProducer
from brokergroup.broker.client import Consumer, ProduceError, Producer
from brokergroup.chaos.history import body_digest
from brokergroup.demo.model import QUEUE_ID, TOPIC, Ack, History, queue_name, wall_ms


class SetProducer:
    """Sends `count` numbered messages to one set, one at a time, as fast as they are acknowledged."""

    def __init__(
        self,
        broker_set: str,
        producer: BinaryProducer | Producer,
        history: History,
        *,
        count: int,
        milestone: int,
    ) -> None:
        self.broker_set = broker_set
        self.producer = producer
        self.history = history
        self.count = count
        self.process = f"producer:{broker_set}"
        self.acks: list[Ack] = []
        self.indeterminate = 0
        self.reached = asyncio.Event()
        """Set once `milestone` messages are acknowledged (or all were sent)."""
        self._milestone = milestone

    @property
    def sent(self) -> int:
        return len(self.acks) + self.indeterminate

    async def run(self) -> None:
        try:
            for _ in range(self.count):
                await self.send_one()
                if len(self.acks) >= self._milestone:
                    self.reached.set()
        finally:
            self.reached.set()

    async def send_one(self) -> None:
        seq = self.producer.next_seq
        body = f"{self.broker_set}-{seq}".encode()
        value = {
            "queue": queue_name(self.broker_set),
            "producerId": self.producer.producer_id,
            "seq": seq,
            "digest": body_digest(body),
        }
        self.history.record(self.process, "invoke", "send", value)
        invoked = wall_ms()
        try:
            sent = await self.producer.send(TOPIC, [body], queue_id=QUEUE_ID)
        except ProduceError as exc:
            self.history.record(self.process, "info", "send", {**value, "error": str(exc)})
            self.indeterminate += 1
            return
        self.history.record(self.process, "ok", "send", value)
        self.acks.append(
            Ack(
                broker_set=self.broker_set,
                producer_id=self.producer.producer_id,
                seq=seq,
                invoked_ms=invoked,
                acked_ms=wall_ms(),
                master=sent.master,
                attempts=sent.attempts,
                queue_offset=sent.queue_offsets[0],
            )
        )


async def consume_all(
    broker_set: str, consumer: BinaryConsumer | Consumer, history: History, *, deadline_s: float = 60.0
) -> int:
    """Read the set's queue from offset 0 until a poll comes back empty; the number of messages read."""
    process = f"consumer:{broker_set}"
    queue = queue_name(broker_set)
    consumer.positions[(TOPIC, QUEUE_ID)] = 0
    read = 0
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        offset = consumer.positions[(TOPIC, QUEUE_ID)]
        history.record(process, "invoke", "poll", {"queue": queue, "offset": offset})
        try:
            batch = await consumer.poll(TOPIC, QUEUE_ID, max_count=512)
        except ProduceError as exc:
            history.record(process, "fail", "poll", {"queue": queue, "error": str(exc)})
            await asyncio.sleep(0.2)
            continue
        messages = [[m.queue_offset, m.producer_id, m.seq, body_digest(m.body)] for m in batch]
        history.record(process, "ok", "poll", {"queue": queue, "messages": messages})
        if not batch:
            return read
        read += len(batch)
    raise TimeoutError(f"reading {broker_set} back did not finish within {deadline_s:.0f} s ({read} messages read)")
