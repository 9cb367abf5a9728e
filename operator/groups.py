"""The operator's own per-BrokerGroup tasks: one follower and one resync loop per group.

kopf daemons and timers would do the same, but kopf puts a finalizer on every object that has one, and
removes it only while it runs: with the operator uninstalled (or stopped), deleting a BrokerGroup would hang
on it. These tasks are started and stopped from BrokerGroup watch events instead (`kopf.on.event`, which needs
no finalizer), so a BrokerGroup can always be deleted, operator or not, and the garbage collector removes its
children (ownerReferences). kopf removes the finalizer an older operator left on existing BrokerGroups.

`wake` makes a group's follower run a cycle now (a broker pod's readiness or a StatefulSet changed): a roll
moves on as soon as the pod it waits for is Ready, not at the next resync.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from brokergroup.operator.follower import Follower
from brokergroup.operator.reconcile import Reconciler

logger = logging.getLogger(__name__)


@dataclass
class GroupTasks:
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    woken: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class Groups:
    def __init__(self, follower: Follower, reconciler: Reconciler) -> None:
        self.follower = follower
        self.reconciler = reconciler
        self._groups: dict[tuple[str, str], GroupTasks] = {}

    def ensure(self, namespace: str, name: str) -> None:
        """Start the group's follower and resync loop unless they run."""
        key = (namespace, name)
        if key in self._groups:
            return
        group = GroupTasks()
        loop = asyncio.get_running_loop()
        group.tasks = [
            loop.create_task(self._follow(namespace, name, group), name=f"follow {namespace}/{name}"),
            loop.create_task(self._resync(namespace, name, group), name=f"resync {namespace}/{name}"),
        ]
        self._groups[key] = group
        logger.info("following %s/%s", namespace, name)

    def wake(self, namespace: str, name: str) -> None:
        group = self._groups.get((namespace, name))
        if group is not None:
            group.woken.set()

    async def forget(self, namespace: str, name: str) -> None:
        """Stop the group's tasks (the BrokerGroup is gone or being deleted)."""
        group = self._groups.pop((namespace, name), None)
        if group is None:
            return
        group.stop.set()
        for task in group.tasks:
            task.cancel()
        for task in group.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        logger.info("stopped following %s/%s", namespace, name)

    async def close(self) -> None:
        for namespace, name in list(self._groups):
            await self.forget(namespace, name)

    async def _follow(self, namespace: str, name: str, group: GroupTasks) -> None:
        async def stopped(timeout: float) -> bool:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(group.stop.wait(), timeout)
            return group.stop.is_set()

        await self.follower.run(namespace, name, stopped, woken=group.woken)

    async def _resync(self, namespace: str, name: str, group: GroupTasks) -> None:
        """Reconcile at least every `resync_seconds` (drift repair), as the kopf timer did."""
        period = self.reconciler.settings.resync_seconds
        while not group.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(group.stop.wait(), period)
            if group.stop.is_set():
                return
            try:
                await self.reconciler.reconcile(namespace, name, trigger="timer")
            except Exception:
                logger.exception("resync of %s/%s failed; next try in %s s", namespace, name, period)
