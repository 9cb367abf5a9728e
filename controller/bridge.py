"""The one bridge between pysyncobj's thread and asyncio.

pysyncobj runs its own tick thread (autoTick) and calls back from it. Nothing else in the
controller may touch asyncio objects from that thread: callbacks are turned into Futures
here, with `loop.call_soon_threadsafe`, and each pysyncobj FAIL_REASON is mapped to a
RocketMQ response code in `fail_reason_error`, the only such mapping.
"""

from __future__ import annotations

import asyncio
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


def fail_reason_error(reason: int) -> ControllerError:
    code, remark = _FAIL_REASONS.get(reason, (ResponseCode.SYSTEM_ERROR, f"Raft failure {reason}"))
    return ControllerError(code, remark)


class Bridge:
    """Calls from pysyncobj's thread to the event loop, coalesced: one loop wake-up runs every call
    made since the previous one ran (a tick's applied batches, commit answers and feed updates),
    in the order they were made."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._pending: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self.wakeups = 0
        """How many times the loop was woken to run calls (for tests and benchmarks)."""

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

    async def commit(self, node: RaftNode, batch: Batch, *, timeout: float) -> dict[str, Any]:
        """Submit a batch and wait until it is applied locally, or fail with a ControllerError."""
        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()

        def resolve(result: Any, err: int) -> None:
            if future.done():
                return
            if err == FAIL_REASON.SUCCESS:
                future.set_result(result)
            else:
                future.set_exception(fail_reason_error(err))

        node.submit(batch, lambda result, err: self.call_soon(resolve, result, err))
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError as exc:
            raise ControllerError(
                ResponseCode.SYSTEM_ERROR,
                f"{batch.request or 'request'}: not committed within {timeout:g} s; the outcome is unknown, "
                "read the state again before retrying",
            ) from exc
