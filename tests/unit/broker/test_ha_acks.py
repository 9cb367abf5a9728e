"""Put waiters: released on notify in offset order, timed out, failed on a role loss."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from brokergroup.broker.ha.acks import AckWaiters
from brokergroup.broker.store.types import PutStatus


async def wait(waiters: AckWaiters, next_offset: int, timeout_s: float) -> PutStatus:
    """A put's wait for its acks, as `HAService.wait_replicated` makes it."""
    future = waiters.enqueue(next_offset, timeout_s)
    return PutStatus.PUT_OK if future is None else await future


class Acks:
    def __init__(self) -> None:
        self.offset = 0
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.offset


async def test_an_already_acked_put_returns_at_once() -> None:
    acks = Acks()
    acks.offset = 100
    assert AckWaiters(acks).enqueue(100, 10) is None


async def test_waiters_are_released_as_acks_arrive() -> None:
    acks = Acks()
    waiters = AckWaiters(acks)
    tasks = [asyncio.create_task(wait(waiters, offset, 10)) for offset in (300, 100, 200)]
    await asyncio.sleep(0)
    assert len(waiters) == 3
    acks.offset = 200
    acks.calls = 0
    waiters.notify()
    await asyncio.sleep(0)
    assert [t.done() for t in tasks] == [False, True, True]
    assert acks.calls == 1  # the acks are read once for the three waiters, not once per waiter
    acks.offset = 300
    waiters.notify()
    assert await asyncio.gather(*tasks) == [PutStatus.PUT_OK] * 3
    assert len(waiters) == 0


async def test_a_waiter_times_out_with_flush_slave_timeout() -> None:
    waiters = AckWaiters(Acks())
    assert await wait(waiters, 100, 0.01) is PutStatus.FLUSH_SLAVE_TIMEOUT
    assert len(waiters) == 0
    waiters.notify()  # the timed-out entry is dropped lazily


async def test_fail_all_answers_every_waiter() -> None:
    waiters = AckWaiters(Acks())
    tasks = [asyncio.create_task(wait(waiters, offset, 10)) for offset in (1, 2)]
    await asyncio.sleep(0)
    waiters.fail_all()
    assert await asyncio.gather(*tasks) == [PutStatus.FLUSH_SLAVE_TIMEOUT] * 2


async def test_a_cancelled_put_leaves_no_waiter() -> None:
    waiters = AckWaiters(Acks())
    task = asyncio.create_task(wait(waiters, 5, 10))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.wait([task])
    assert len(waiters) == 0


async def test_a_shorter_timeout_after_a_longer_one_is_answered_first() -> None:
    waiters = AckWaiters(Acks())
    long = asyncio.create_task(wait(waiters, 1, 10))
    assert await wait(waiters, 2, 0.01) is PutStatus.FLUSH_SLAVE_TIMEOUT
    assert not long.done()
    assert len(waiters) == 1
    waiters.fail_all(PutStatus.SERVICE_NOT_AVAILABLE)
    assert await long is PutStatus.SERVICE_NOT_AVAILABLE


async def test_puts_acked_in_time_share_one_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 17: no loop timer armed and cancelled per put; the timer fires about once per timeout."""
    loop = asyncio.get_running_loop()
    armed: list[float] = []
    call_at = loop.call_at

    def counting_call_at(when: float, callback: Callable[..., object], *args: object) -> asyncio.TimerHandle:
        armed.append(when)
        return call_at(when, callback, *args)

    monkeypatch.setattr(loop, "call_at", counting_call_at)
    acks = Acks()
    waiters = AckWaiters(acks)
    for offset in range(1, 201):
        task = asyncio.create_task(wait(waiters, offset, 10))
        await asyncio.sleep(0)
        acks.offset = offset
        waiters.notify()
        assert await task is PutStatus.PUT_OK
    assert len(armed) == 1
    # each answered entry is dropped as the next wait comes, not all at once when the earliest deadline fires
    # (at 3,000 puts a second and a 3 s timeout, 9,000 entries popped in one go on the event loop)
    assert len(waiters._deadlines) <= 2
    timed_out = asyncio.create_task(wait(waiters, 1000, 0.01))
    assert await timed_out is PutStatus.FLUSH_SLAVE_TIMEOUT  # answered although earlier entries wait to be dropped


async def waits_until_acked(waiters: AckWaiters, acks: Acks, offset: int) -> None:
    """A put ending at `offset` waits, and is answered PUT_OK once the acks reach it."""
    task = asyncio.create_task(wait(waiters, offset, 10))
    await asyncio.sleep(0)
    assert not task.done()
    acks.offset = offset
    waiters.notify()
    assert await task is PutStatus.PUT_OK


async def test_a_put_past_what_the_last_notify_read_waits_without_reading_the_acks() -> None:
    acks = Acks()
    waiters = AckWaiters(acks)
    acks.offset = 100
    waiters.notify()
    calls = acks.calls
    await waits_until_acked(waiters, acks, 200)
    assert acks.calls == calls + 1  # the notify that released it: a new put past the offset read nothing


async def test_a_put_within_what_the_last_notify_read_is_checked_afresh() -> None:
    acks = Acks()
    waiters = AckWaiters(acks)
    acks.offset = 100
    waiters.notify()
    acks.offset = 1000
    waiters.notify()  # no waiter: what it read is kept all the same
    assert await wait(waiters, 500, 10) is PutStatus.PUT_OK
    acks.offset = 100  # the set grew (a proposal): the offset fell, and no notify came
    await waits_until_acked(waiters, acks, 500)  # never acked from the stale offset


async def test_after_fail_all_a_put_reads_the_acks_again() -> None:
    acks = Acks()
    waiters = AckWaiters(acks)
    waiters.notify()  # read 0
    waiters.fail_all()
    acks.offset = 300  # a new term's first ack, before any notify of it
    assert await wait(waiters, 300, 10) is PutStatus.PUT_OK
