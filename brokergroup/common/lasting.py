"""Tasks a process depends on for as long as it runs.

A background task that dies leaves the process up and looking healthy while what the task did stops: a
broker that never learns its role (fenced, saying nothing), a controller that no longer scans for dead
masters. So such a task is started with `lasting`, which tells its owner when it ends with an error; the
process's wiring passes a `Failures`, which logs the failure, stops the process and makes it exit with
`TaskFailedError` (the command prints it and exits 1; a supervisor such as the kubelet restarts it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

logger = logging.getLogger(__name__)

OnFailure = Callable[[str, BaseException], None]
"""Told (what the task was doing, its error)."""


class TaskFailedError(Exception):
    """A task the process depends on failed; raised once the process has stopped everything."""


def lasting(work: Coroutine[Any, Any, None], what: str, on_failure: OnFailure | None) -> asyncio.Task[None]:
    """`work` as a task named `what` that tells `on_failure` if it ends with an error (not if cancelled)."""
    task = asyncio.get_running_loop().create_task(work, name=what)

    def ended(task: asyncio.Task[None]) -> None:
        error = None if task.cancelled() else task.exception()
        if error is not None and on_failure is not None:
            on_failure(task.get_name(), error)

    task.add_done_callback(ended)
    return task


def failed_with_error(task: asyncio.Task[Any]) -> bool:
    """True for a task that ended with an error (awaiting it would raise it again)."""
    return task.done() and not task.cancelled() and task.exception() is not None


class Failures:
    """The `OnFailure` of a process: the first failure is logged and sets `stop`; `check` raises it."""

    def __init__(self, process: str, stop: asyncio.Event) -> None:
        self.process = process
        self.stop = stop
        self.first: tuple[str, BaseException] | None = None

    def __call__(self, what: str, error: BaseException) -> None:
        logger.error("the %s stops: its %s failed: %s", self.process, what, error)
        if self.first is None:
            self.first = (what, error)
        self.stop.set()

    def check(self) -> None:
        """Raise `TaskFailedError` naming the first failure, if there was one."""
        if self.first is not None:
            what, error = self.first
            raise TaskFailedError(f"the {self.process} stopped: its {what} failed: {error}") from error
