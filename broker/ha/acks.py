"""Puts waiting for replica acks (RocketMQ `GroupTransferService`), on one asyncio loop.

`wait(next_offset, timeout_s)` answers PUT_OK as soon as `is_acked(next_offset)` holds, else
FLUSH_SLAVE_TIMEOUT after `timeout_s` (the message stays in the master's log). The owner calls
`notify()` whenever acks or the sync-state-set change; waiters are not polled.

Invariant used for speed: `is_acked` is monotone in the offset (if a put ending at `o` is acked,
so is every put ending before `o`), so waiters sit in a heap by offset and `notify()` stops at the
first one that is not acked: O(released · log n) per call.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

from brokergroup.broker.store.types import PutStatus


class AckWaiters:
    def __init__(self, is_acked: Callable[[int], bool]) -> None:
        self._is_acked = is_acked
        self._heap: list[tuple[int, int, asyncio.Future[PutStatus]]] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        """Waiters still pending."""
        return sum(1 for _, _, future in self._heap if not future.done())

    async def wait(self, next_offset: int, timeout_s: float) -> PutStatus:
        """PUT_OK once a put ending at `next_offset` is acked enough; FLUSH_SLAVE_TIMEOUT after
        `timeout_s`, or the status given to `fail_all()`."""
        if self._is_acked(next_offset):
            return PutStatus.PUT_OK
        future: asyncio.Future[PutStatus] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (next_offset, next(self._order), future))
        try:
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError:
            if future.done() and not future.cancelled():
                return future.result()  # released in the same loop iteration as the deadline
            return PutStatus.FLUSH_SLAVE_TIMEOUT
        finally:
            if not future.done():
                future.cancel()  # the heap drops it lazily

    def notify(self) -> None:
        """Re-evaluate: release every waiter whose put is now acked enough."""
        heap = self._heap
        while heap:
            offset, _, future = heap[0]
            if future.done():
                heapq.heappop(heap)
            elif self._is_acked(offset):
                heapq.heappop(heap)
                future.set_result(PutStatus.PUT_OK)
            else:
                return

    def fail_all(self, status: PutStatus = PutStatus.FLUSH_SLAVE_TIMEOUT) -> None:
        """Answer every waiter now (this broker stopped being master)."""
        heap, self._heap = self._heap, []
        for _, _, future in heap:
            if not future.done():
                future.set_result(status)
