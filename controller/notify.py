"""Push role changes to brokers: `POST /v1/role-change` on each alive member's address.

As RocketMQ's NotifyService: fire and forget with a 3 s timeout, and a newer notification to
the same broker (higher master epoch) cancels an unfinished older one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import aiohttp

from brokergroup.controller.metrics import ControllerMetrics

logger = logging.getLogger(__name__)

NOTIFY_TIMEOUT_S = 3.0


class RoleChangeNotifier:
    def __init__(
        self,
        *,
        metrics: ControllerMetrics,
        on_sent: Callable[[str, dict[str, Any]], None],
        headers: dict[str, str] | None = None,
    ) -> None:
        self._metrics = metrics
        self._on_sent = on_sent
        self._headers = headers or {}
        self._pending: dict[str, tuple[int, asyncio.Task[None]]] = {}
        self._session: aiohttp.ClientSession | None = None

    def push(self, address: str, body: dict[str, Any]) -> None:
        epoch = int(body.get("masterEpoch") or 0)
        previous = self._pending.get(address)
        if previous is not None:
            old_epoch, task = previous
            if old_epoch > epoch and not task.done():
                return
            task.cancel()
        task = asyncio.get_running_loop().create_task(self._send(address, body))
        self._pending[address] = (epoch, task)
        task.add_done_callback(lambda t: self._forget(address, t))

    def _forget(self, address: str, task: asyncio.Task[None]) -> None:
        current = self._pending.get(address)
        if current is not None and current[1] is task:
            del self._pending[address]

    async def _send(self, address: str, body: dict[str, Any]) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=NOTIFY_TIMEOUT_S))
        try:
            async with self._session.post(f"http://{address}/v1/role-change", json=body, headers=self._headers) as r:
                outcome = "ok" if r.status < 300 else f"http_{r.status}"
        except (aiohttp.ClientError, TimeoutError) as exc:
            outcome = "unreachable"
            logger.info("role-change push to %s failed: %s", address, exc)
        self._metrics.role_notifications.labels(outcome).inc()
        self._on_sent(address, {**body, "outcome": outcome})

    async def close(self) -> None:
        for _, task in list(self._pending.values()):
            task.cancel()
        for _, task in list(self._pending.values()):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._session is not None:
            await self._session.close()
