"""The broker's retention task: every `store.retention_check_interval_ms`, delete the head segments
the store's retention settings allow (`MessageStore.apply_retention`, RocketMQ CleanCommitLogService).

It runs on the event loop, like every other call into the store (one owner): a deletion is a few
unlinks and one folder fsync, and the head state it writes first is small. A failure is logged and
retried at the next tick; the store is left consistent (each step is finished on the next open).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

logger = logging.getLogger(__name__)


class Retains(Protocol):
    def apply_retention(self, now: float | None = None) -> int: ...


class RetentionTask:
    """`start()` inside a running loop, `await stop()` before closing the store."""

    def __init__(self, store: Retains, *, interval_ms: int) -> None:
        self.store = store
        self.interval_s = interval_ms / 1000
        self.deleted = 0
        """Segments deleted so far."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="retention")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def run_once(self) -> int:
        try:
            deleted = self.store.apply_retention()
        except Exception:
            logger.exception("retention failed; retrying in %.1f s", self.interval_s)
            return 0
        self.deleted += deleted
        return deleted

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self.run_once()
