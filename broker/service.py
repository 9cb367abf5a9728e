"""The put and consume paths of one broker: role and lease checks, write, flush, replica acks.

RocketMQ's put path (reference §4.6) with brokergroup's write lease: refuse when not master,
fenced or without a lease (SERVICE_NOT_AVAILABLE) or when too few replicas are in sync
(IN_SYNC_REPLICAS_NOT_ENOUGH, nothing written) or when the disk is (nearly) full
(SERVICE_NOT_AVAILABLE with a "disk full" remark, nothing written); otherwise append, then wait for the flush and
the replica acks together. A replica failure overrides a flush failure. The in-sync count is
checked again once the acks are in (Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND): a put acked by a
set that shrank below `min_in_sync_replicas` while it waited is not PUT_OK. If the lease ran out
while waiting, the outcome is reported as unknown (SERVICE_NOT_AVAILABLE): the message may or
may not survive, and an idempotent producer's retry settles it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from prometheus_client import Counter

from brokergroup.broker.errors import DiskFullError
from brokergroup.broker.metrics import BrokerMetrics
from brokergroup.broker.role import RoleManager
from brokergroup.broker.store.types import Message, PutResult, PutStatus


class Flusher(Protocol):
    async def wait_flushed(self, offset: int) -> bool: ...


class Store(Protocol):
    def put_messages(self, messages: Sequence[Message], *, now_ms: int) -> PutResult: ...

    def put_consumer_offset(self, *, group: str, topic: str, queue_id: int, offset: int, now_ms: int) -> PutResult: ...


@dataclasses.dataclass(frozen=True)
class PutOutcome:
    status: PutStatus
    remark: str = ""
    result: PutResult | None = None


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class PutPath:
    def __init__(self, *, store: Store, flusher: Flusher, role: RoleManager, metrics: BrokerMetrics) -> None:
        self.store = store
        self.flusher = flusher
        self.role = role
        self.metrics = metrics
        self._put_counters: dict[PutStatus, Counter] = {}

    async def put(self, messages: Sequence[Message]) -> PutOutcome:
        started = time.perf_counter()
        outcome = await self._put(lambda: self.store.put_messages(messages, now_ms=wall_ms()))
        counter = self._put_counters.get(outcome.status)
        if counter is None:
            counter = self._put_counters[outcome.status] = self.metrics.puts.labels(outcome.status.value)
        counter.inc()
        self.metrics.put_seconds.observe(time.perf_counter() - started)
        if outcome.result is not None:
            dups = sum(1 for a in outcome.result.appended if a.duplicate)
            if dups:
                self.metrics.duplicates.inc(dups)
            self.metrics.put_messages.inc(len(outcome.result.appended) - dups)
        return outcome

    async def put_consumer_offset(self, *, group: str, topic: str, queue_id: int, offset: int) -> PutOutcome:
        return await self._put(
            lambda: self.store.put_consumer_offset(
                group=group, topic=topic, queue_id=queue_id, offset=offset, now_ms=wall_ms()
            )
        )

    async def _put(self, write: Callable[[], PutResult]) -> PutOutcome:
        refused = self.role.check_write()
        if refused is not None:
            return PutOutcome(refused[0], refused[1])
        ha = self.role.replication()
        short = ha.check_put()
        if short is not None:
            return PutOutcome(short, "in-sync replicas fewer than minInSyncReplicas; nothing was written")
        try:
            result = write()
        except DiskFullError as error:  # nothing was written (refused, or a failed write undone)
            return PutOutcome(PutStatus.SERVICE_NOT_AVAILABLE, str(error))
        # One after the other, not gathered (two tasks per put): both fsyncs run meanwhile anyway, and
        # the master's own is usually done by the time the slowest replica has acknowledged.
        replicated = await ha.wait_replicated(result.next_offset)
        flushed = await self.flusher.wait_flushed(result.next_offset)
        if replicated is PutStatus.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
            remark = "the sync-state-set shrank below minInSyncReplicas while the put waited; fewer copies than asked"
            return PutOutcome(replicated, remark, result)
        if replicated is not PutStatus.PUT_OK:
            return PutOutcome(replicated, "replicas did not acknowledge in time; the master keeps the message", result)
        if not flushed:
            return PutOutcome(PutStatus.FLUSH_DISK_TIMEOUT, "the flush did not finish in time", result)
        after = self.role.check_write()
        if after is not None:
            return PutOutcome(after[0], f"outcome unknown: {after[1]} while waiting for acks", result)
        return PutOutcome(PutStatus.PUT_OK, "", result)
