"""The bridge from pysyncobj's thread to the event loop: one loop wake-up for every call made
since the previous one ran, in order; nothing is lost after the loop closes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from brokergroup.controller.bridge import Bridge


def collector(wanted: int) -> tuple[list[object], asyncio.Event, Callable[[object], None]]:
    seen: list[object] = []
    done = asyncio.Event()

    def add(item: object) -> None:
        seen.append(item)
        if len(seen) == wanted:
            done.set()

    return seen, done, add


async def test_calls_from_another_thread_run_in_order_with_fewer_wakeups() -> None:
    bridge = Bridge(asyncio.get_running_loop())
    seen, done, add = collector(200)

    def burst() -> None:  # what one pysyncobj tick does: several applies and answers at once
        for i in range(200):
            bridge.call_soon(add, i)

    thread = threading.Thread(target=burst)
    thread.start()
    await asyncio.wait_for(done.wait(), 30)
    thread.join()
    assert seen == list(range(200))
    assert 1 <= bridge.wakeups < 200


async def test_a_failing_call_does_not_stop_the_others() -> None:
    bridge = Bridge(asyncio.get_running_loop())
    seen, done, add = collector(2)

    def fail() -> None:
        raise RuntimeError("boom")

    bridge.call_soon(add, "before")
    bridge.call_soon(fail)
    bridge.call_soon(add, "after")
    await asyncio.wait_for(done.wait(), 30)
    assert seen == ["before", "after"]


def test_a_call_after_the_loop_closed_is_dropped() -> None:
    loop = asyncio.new_event_loop()
    bridge = Bridge(loop)
    loop.close()
    bridge.call_soon(print, "never")  # no exception
