"""Puts waiting for replica acks (RocketMQ `GroupTransferService`), on one asyncio loop.

`enqueue(next_offset, timeout_s)` answers PUT_OK as soon as `next_offset <= acked_up_to()`, else
FLUSH_SLAVE_TIMEOUT after `timeout_s` (the message stays in the master's log). The owner calls
`notify()` whenever acks or the sync-state-set change; waiters are not polled.

Invariant used for speed: being acked is monotone in the offset (if a put ending at `o` is acked,
so is every put ending before `o`), so the owner answers with one offset (`acked_up_to`, read once
per `notify()`, not once per waiter), waiters sit in a heap by offset and `notify()` stops at the
first one past it: O(released · log n) per call. A new put past the offset the last `notify()` read
is not acked (the offset only rises through acks and set changes, which call `notify()`; a put is
written before its bytes can be acked), so it waits without reading the acks again; any other put
reads them afresh, so a stale offset never acks a put.

Timeouts share one timer (issue 17: an `asyncio.timeout` per put armed and cancelled a loop timer
for every put, about 4 % of a master's event loop under single sends). Deadlines sit in a second
heap; the timer is armed for the earliest deadline of a waiter still pending, and when it fires it
answers FLUSH_SLAVE_TIMEOUT to every pending waiter whose deadline passed, drops the answered
ones it meets, and re-arms. So a put is answered at most one timer tick after its deadline, and
with puts acked well within the timeout the timer fires about once per timeout, not once per put.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

from brokergroup.broker.store.types import PutStatus


class AckWaiters:
    def __init__(self, acked_up_to: Callable[[], int]) -> None:
        """`acked_up_to()`: the highest offset a put may end at and be acked now."""
        self._acked_up_to = acked_up_to
        self._heap: list[tuple[int, int, asyncio.Future[PutStatus]]] = []
        self._deadlines: list[tuple[float, int, asyncio.Future[PutStatus]]] = []
        self._order = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._known: int | None = None
        """`acked_up_to()` as the last `notify()` read it (None: not read since a `fail_all()`)."""

    def __len__(self) -> int:
        """Waiters still pending."""
        return sum(1 for _, _, future in self._heap if not future.done())

    def enqueue(self, next_offset: int, timeout_s: float) -> asyncio.Future[PutStatus] | None:
        """None if a put ending at `next_offset` is acked enough now, else a future of PUT_OK once it
        is, FLUSH_SLAVE_TIMEOUT after `timeout_s`, or the status given to `fail_all()` (cancel it to give
        up; both heaps drop it lazily)."""
        known = self._known
        if (known is None or next_offset <= known) and next_offset <= self._acked_up_to():
            return None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[PutStatus] = loop.create_future()
        order = next(self._order)
        heapq.heappush(self._heap, (next_offset, order, future))
        deadline = loop.time() + timeout_s
        deadlines = self._deadlines
        while deadlines and deadlines[0][2].done():  # answered: dropped as it reaches the top, not in one burst
            heapq.heappop(deadlines)  # when the earliest deadline fires (rate x timeout entries by then)
        heapq.heappush(deadlines, (deadline, order, future))
        if self._timer is None or deadline < self._timer_at:
            self._arm(loop, deadline)
        return future

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = loop.call_at(when, self._expire, loop), when

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now, deadlines = loop.time(), self._deadlines
        while deadlines and (deadlines[0][2].done() or deadlines[0][0] <= now):
            _, _, future = heapq.heappop(deadlines)
            if not future.done():
                future.set_result(PutStatus.FLUSH_SLAVE_TIMEOUT)
        if deadlines:
            self._arm(loop, deadlines[0][0])

    def notify(self) -> None:
        """Re-evaluate: release every waiter whose put is now acked enough."""
        heap = self._heap
        acked = self._known = self._acked_up_to()
        while heap:
            offset, _, future = heap[0]
            if future.done():
                heapq.heappop(heap)
            elif offset <= acked:
                heapq.heappop(heap)
                future.set_result(PutStatus.PUT_OK)
            else:
                return

    def fail_all(self, status: PutStatus = PutStatus.FLUSH_SLAVE_TIMEOUT) -> None:
        """Answer every waiter now (this broker stopped being master)."""
        heap, self._heap, self._deadlines = self._heap, [], []
        self._known = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for _, _, future in heap:
            if not future.done():
                future.set_result(status)
