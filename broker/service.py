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

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from prometheus_client import Counter

from brokergroup.broker.errors import DiskFullError
from brokergroup.broker.metrics import BrokerMetrics
from brokergroup.broker.role import Replication, RoleManager
from brokergroup.broker.store.types import Message, PutResult, PutStatus


class Flusher(Protocol):
    def flushed_soon(self, offset: int) -> bool | asyncio.Future[bool]: ...


class Store(Protocol):
    def put_messages(self, messages: Sequence[Message], *, now_ms: int) -> PutResult: ...

    def put_consumer_offset(self, *, group: str, topic: str, queue_id: int, offset: int, now_ms: int) -> PutResult: ...


class PutOutcome(NamedTuple):
    status: PutStatus
    remark: str = ""
    result: PutResult | None = None


Then = Callable[[PutOutcome | Exception], None]
"""Where `PutPath.put_then` sends a put's outcome; an exception is a bug met after the write (the
HTTP API and the binary port answer it as an internal error)."""


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
        return await _awaited(functools.partial(self.put_then, messages))

    def put_then(self, messages: Sequence[Message], then: Then) -> None:
        """`put` without a coroutine: `then(outcome)` now, or from a callback once the acks and the
        flush are in (the binary port answers a put so, without a task and a chain of coroutines per
        request). What the checks and the write raise (bad input, nothing written) is raised here, and then
        `then` is never called; a bug met after the write goes to `then`."""
        started = time.perf_counter()

        def counted(outcome: PutOutcome | Exception) -> None:
            if isinstance(outcome, PutOutcome):
                self._count(outcome, started)
            then(outcome)

        self._put(lambda: self.store.put_messages(messages, now_ms=wall_ms()), counted)

    def _count(self, outcome: PutOutcome, started: float) -> None:
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

    async def put_consumer_offset(self, *, group: str, topic: str, queue_id: int, offset: int) -> PutOutcome:
        def write() -> PutResult:
            return self.store.put_consumer_offset(
                group=group, topic=topic, queue_id=queue_id, offset=offset, now_ms=wall_ms()
            )

        return await _awaited(functools.partial(self._put, write))

    def _put(self, write: Callable[[], PutResult], then: Then) -> None:
        refused = self.role.check_write()
        if refused is not None:
            return then(PutOutcome(refused[0], refused[1]))
        ha = self.role.replication()
        short = ha.check_put()
        if short is not None:
            return then(PutOutcome(short, "in-sync replicas fewer than minInSyncReplicas; nothing was written"))
        try:
            result = write()
        except DiskFullError as error:  # nothing was written (refused, or a failed write undone)
            return then(PutOutcome(PutStatus.SERVICE_NOT_AVAILABLE, str(error)))
        # The acks, then the flush, not both waited for at once: both fsyncs run meanwhile anyway, and
        # the master's own is usually done by the time the slowest replica has acknowledged.
        replicated = ha.replicated_soon(result.next_offset)
        if isinstance(replicated, PutStatus):
            return self._acked(result, replicated, then)
        replicated.add_done_callback(functools.partial(self._acks_in, ha, result, then))
        return None

    def _acks_in(self, ha: Replication, result: PutResult, then: Then, acks: asyncio.Future[PutStatus]) -> None:
        try:
            status = ha.after_acks(PutStatus.FLUSH_SLAVE_TIMEOUT if acks.cancelled() else acks.result())
        except Exception as error:  # noqa: BLE001 - a bug: `then` answers it as an internal error, logged
            return then(error)
        self._acked(result, status, then)

    def _acked(self, result: PutResult, replicated: PutStatus, then: Then) -> None:
        """The acks are in: `then` gets the outcome now, or once the flush is in. Never raises (written:
        a bug met from here on goes to `then`)."""
        try:
            flushed = self.flusher.flushed_soon(result.next_offset)
            if not isinstance(flushed, bool):
                flushed.add_done_callback(functools.partial(self._flush_in, result, replicated, then))
                return
            outcome = self._outcome(result, replicated, flushed)
        except Exception as error:  # noqa: BLE001 - a bug: `then` answers it as an internal error, logged
            return then(error)
        then(outcome)

    def _flush_in(self, result: PutResult, replicated: PutStatus, then: Then, flushed: asyncio.Future[bool]) -> None:
        try:
            outcome = self._outcome(result, replicated, not flushed.cancelled() and flushed.result())
        except Exception as error:  # noqa: BLE001 - a bug: `then` answers it as an internal error, logged
            return then(error)
        then(outcome)

    def _outcome(self, result: PutResult, replicated: PutStatus, flushed: bool) -> PutOutcome:
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


async def _awaited(start: Callable[[Then], None]) -> PutOutcome:
    """`start(then)`'s outcome, awaited."""
    future: asyncio.Future[PutOutcome] = asyncio.get_running_loop().create_future()
    start(functools.partial(_settle, future))
    return await future


def _settle(future: asyncio.Future[PutOutcome], outcome: PutOutcome | Exception) -> None:
    if future.done():  # the awaiting request was cancelled
        return
    if isinstance(outcome, Exception):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
