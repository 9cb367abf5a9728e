"""`common.lasting`: a task the process depends on tells its owner when it ends with an error (not when it
is cancelled or returns), and `Failures` stops the process and names the first failure."""

from __future__ import annotations

import asyncio
import logging

import pytest

from brokergroup.common import lasting


async def ended(task: asyncio.Task[None]) -> None:
    await asyncio.wait([task], timeout=10)
    assert task.done(), task
    await asyncio.sleep(0)  # done callbacks run on the next turn of the loop


async def test_a_task_that_fails_is_told_with_its_name_and_error() -> None:
    told: list[tuple[str, BaseException]] = []
    error = OSError(98, "address already in use")

    async def fails() -> None:
        raise error

    task = lasting.lasting(fails(), "start", lambda what, exc: told.append((what, exc)))
    await ended(task)
    assert told == [("start", error)]
    assert lasting.failed_with_error(task)


async def test_a_task_that_returns_or_is_cancelled_is_not_told() -> None:
    told: list[tuple[str, BaseException]] = []

    async def returns() -> None:
        return None

    done = lasting.lasting(returns(), "done", lambda what, exc: told.append((what, exc)))
    cancelled = lasting.lasting(asyncio.sleep(60), "sleeping", lambda what, exc: told.append((what, exc)))
    await asyncio.sleep(0)
    cancelled.cancel()
    await ended(done)
    await ended(cancelled)
    assert told == []
    assert not lasting.failed_with_error(done) and not lasting.failed_with_error(cancelled)


async def test_failures_stop_the_process_and_name_the_first(caplog: pytest.LogCaptureFixture) -> None:
    stop = asyncio.Event()
    failures = lasting.Failures("controller", stop)
    failures.check()  # nothing failed: nothing raised
    first, second = RuntimeError("journal closed"), ValueError("bad state")
    with caplog.at_level(logging.ERROR, logger="brokergroup.common.lasting"):
        failures("leader loop", first)
        failures("inactive-master scan", second)
    assert stop.is_set()
    assert caplog.messages == [
        "the controller stops: its leader loop failed: journal closed",
        "the controller stops: its inactive-master scan failed: bad state",
    ]
    with pytest.raises(lasting.TaskFailedError) as raised:
        failures.check()
    assert str(raised.value) == "the controller stopped: its leader loop failed: journal closed"
    assert raised.value.__cause__ is first
