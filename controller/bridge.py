"""The one bridge between pysyncobj's thread and asyncio.

pysyncobj runs its own tick thread (autoTick) and calls back from it. Nothing else in the
controller may touch asyncio objects from that thread: callbacks are turned into Futures
here, with `loop.call_soon_threadsafe`, and each pysyncobj FAIL_REASON is mapped to a
RocketMQ response code in `fail_reason_error`, the only such mapping.

Group commit: `Bridge.commit` queues a batch; the queue goes to Raft as one entry when fewer
than `max_in_flight` entries of this bridge await their commit, so batches of different broker
sets that arrive while an entry is on its way share the next one (RocketMQ's DLedger batches
appends the same way). Each batch keeps its own version check and answer. A batch alone is
submitted in the single-batch format of before.

When a slot frees, the next entry waits for the requests whose answers just went out (at most
`linger` seconds, and only while fewer batches are queued than the entry answered plus those that
were waiting): a broker set answered usually sends its next request at once, and without the wait
each entry would carry only the sets that arrived while the previous one was on its way (the
answered ones always one entry behind), half of them. A Raft entry costs every node the same CPU
whatever it carries, so fuller entries cost less per request. A lone request never waits: its
entry answered one batch, and it is that one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Any

from pysyncobj import FAIL_REASON

from brokergroup.controller.codes import ControllerError, ResponseCode
from brokergroup.controller.replicated import Batch, RaftNode

logger = logging.getLogger(__name__)

_FAIL_REASONS: dict[int, tuple[ResponseCode, str]] = {
    FAIL_REASON.QUEUE_FULL: (ResponseCode.SYSTEM_ERROR, "the Raft command queue is full"),
    FAIL_REASON.MISSING_LEADER: (ResponseCode.CONTROLLER_NOT_LEADER, "no Raft leader is known"),
    FAIL_REASON.DISCARDED: (
        ResponseCode.CONTROLLER_NOT_LEADER,
        "the entry was discarded by a new Raft leader",
    ),
    FAIL_REASON.NOT_LEADER: (ResponseCode.CONTROLLER_NOT_LEADER, "The controller is not in leader state"),
    FAIL_REASON.LEADER_CHANGED: (ResponseCode.CONTROLLER_NOT_LEADER, "the Raft leader changed before commit"),
    FAIL_REASON.REQUEST_DENIED: (ResponseCode.SYSTEM_ERROR, "the Raft leader denied the request"),
}


LINGER_S = 0.005
"""How long the next entry waits at most for the broker sets the previous one answered (module doc)."""


def fail_reason_error(reason: int) -> ControllerError:
    code, remark = _FAIL_REASONS.get(reason, (ResponseCode.SYSTEM_ERROR, f"Raft failure {reason}"))
    return ControllerError(code, remark)


@dataclasses.dataclass
class _Entry:
    """One submitted Raft entry: its batches' futures, and whether its in-flight slot was given back."""

    futures: list[asyncio.Future[dict[str, Any]]]
    done: bool = False


class Bridge:
    """Calls from pysyncobj's thread to the event loop, coalesced: one loop wake-up runs every call
    made since the previous one ran (a tick's applied batches, commit answers and feed updates),
    in the order they were made. And group commit of batches (see the module doc)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        max_in_flight: int = 1,
        max_group: int = 64,
        linger: float = LINGER_S,
    ) -> None:
        if max_in_flight < 1 or max_group < 1:
            raise ValueError(f"max_in_flight ({max_in_flight}) and max_group ({max_group}) must be at least 1")
        if linger < 0:
            raise ValueError(f"linger ({linger}) must not be negative")
        self._loop = loop
        self._lock = threading.Lock()
        self._pending: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self.wakeups = 0
        """How many times the loop was woken to run calls (for tests and benchmarks)."""
        self.max_in_flight = max_in_flight
        self.max_group = max_group
        self._queue: list[tuple[Batch, asyncio.Future[dict[str, Any]]]] = []
        self._node: RaftNode | None = None
        self._flush_scheduled = False
        self._in_flight = 0
        self.linger = linger
        self._expected = 0
        """Batches the next entry waits for (see the module doc); 0: submit at once."""
        self._linger_until = 0.0
        self._linger_timer: asyncio.TimerHandle | None = None
        self.entries = 0
        self.batches = 0
        """Raft entries submitted and the batches they carried (batches / entries: the grouping achieved)."""

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Schedule `fn(*args)` on the event loop; safe from any thread, even after close."""
        with self._lock:
            self._pending.append((fn, args))
            if len(self._pending) > 1:
                return  # a wake-up is on its way and will run this call too
            self.wakeups += 1
        if self._loop.is_closed():
            return
        try:
            self._loop.call_soon_threadsafe(self._run_pending)
        except RuntimeError:
            logger.debug("event loop closed; dropped %s", fn)

    def _run_pending(self) -> None:
        with self._lock:
            calls, self._pending = self._pending, []
        for fn, args in calls:
            try:
                fn(*args)
            except Exception:
                logger.exception("bridged call %s failed", fn)

    # ---- group commit (loop-only) ------------------------------------------------------------------
    async def commit(self, node: RaftNode, batch: Batch, *, timeout: float) -> dict[str, Any]:
        """Submit a batch and wait until it is applied locally, or fail with a ControllerError.

        The answer is the batch's own: `{"applied", "version", "index"}` (applied False: its version
        check failed, nothing of it was applied)."""
        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        self._node = node
        self._queue.append((batch, future))
        self._schedule_flush()
        try:
            async with asyncio.timeout(timeout):  # cheaper than wait_for (no wrapper); cancels the future the same
                return await future
        except TimeoutError as exc:
            raise ControllerError(
                ResponseCode.SYSTEM_ERROR,
                f"{batch.request or 'request'}: not committed within {timeout:g} s; the outcome is unknown, "
                "read the state again before retrying",
            ) from exc

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled and self._queue:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Submit queued batches, as many entries as free slots allow; the rest wait for a slot."""
        self._flush_scheduled = False
        self._queue = [(b, f) for b, f in self._queue if not f.done()]  # a waiter that gave up: not submitted
        if self._lingering():
            return
        while self._queue and self._in_flight < self.max_in_flight and self._node is not None:
            term = self._queue[0][0].term
            take = 0
            while take < min(len(self._queue), self.max_group) and self._queue[take][0].term == term:
                take += 1  # one term per entry: the records of an entry share it
            group, self._queue = self._queue[:take], self._queue[take:]
            self._submit(self._node, group)

    def _lingering(self) -> bool:
        """Whether the next entry still waits for answered sets to come back (and a timer will flush)."""
        if self._expected <= len(self._queue) or not self._queue or self._in_flight >= self.max_in_flight:
            return False
        left = self._linger_until - self._loop.time()
        if left <= 0:
            return False
        if self._linger_timer is None:
            self._linger_timer = self._loop.call_later(left, self._linger_over)
        return True

    def _linger_over(self) -> None:
        self._linger_timer = None
        self._expected = 0
        self._schedule_flush()

    def _submit(self, node: RaftNode, group: list[tuple[Batch, asyncio.Future[dict[str, Any]]]]) -> None:
        self._expected = 0
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None
        entry = _Entry([f for _, f in group])
        self._in_flight += 1
        self.entries += 1
        self.batches += len(group)

        def abandoned(_future: asyncio.Future[dict[str, Any]]) -> None:
            self._abandoned(entry)

        for future in entry.futures:
            future.add_done_callback(abandoned)
        if len(group) == 1:
            node.submit(group[0][0], lambda result, err: self.call_soon(self._resolve, entry, [result], err))
        else:
            node.submit_group(
                tuple(b for b, _ in group),
                lambda result, err: self.call_soon(self._resolve, entry, result and result["results"], err),
            )

    def _release(self, entry: _Entry) -> None:
        if not entry.done:
            entry.done = True
            self._in_flight -= 1
            self._schedule_flush()

    def _abandoned(self, entry: _Entry) -> None:
        """Every waiter of an entry is answered or gave up (timed out): its slot is free even if
        pysyncobj never answers (an entry lost with a leader change)."""
        if all(f.done() for f in entry.futures):
            self._release(entry)

    def _resolve(self, entry: _Entry, results: list[Any] | None, err: int) -> None:
        answered = 0
        for i, future in enumerate(entry.futures):
            if future.done():
                continue
            if err == FAIL_REASON.SUCCESS and results is not None:
                future.set_result(results[i])
                answered += 1
            else:
                future.set_exception(fail_reason_error(err))
        if answered and not entry.done and self.linger > 0:  # wait for them to come back (module doc)
            self._expected = min(self.max_group, len(self._queue) + answered)
            self._linger_until = self._loop.time() + self.linger
        self._release(entry)
