"""GroupCommitFlusher: batched fsyncs (SYNC), timeouts, background flushes (ASYNC), failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from store_factories import msg, open_store

from brokergroup.broker.settings import FlushMode
from brokergroup.broker.store.flusher import GroupCommitFlusher
from brokergroup.broker.store.message_store import MessageStore


async def wait_until(predicate: Callable[[], bool], timeout: float = 2.0) -> None:
    """Poll `predicate` with a deadline (the flusher's task runs in between)."""
    async with asyncio.timeout(timeout):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.001)


class GatedThread:
    """The flusher's thread seam: counts flush jobs and holds each one until the gate opens."""

    def __init__(self, *, fail: bool = False) -> None:
        self.gate = asyncio.Event()
        self.calls = 0
        self.fail = fail

    async def __call__(self, job: Callable[[], None]) -> None:
        self.calls += 1
        await self.gate.wait()
        if self.fail:
            raise OSError(5, "Input/output error")
        job()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    opened = open_store(tmp_path, memory=True)
    yield opened
    opened.close()


@pytest.fixture
async def make_flusher(store: MessageStore) -> AsyncIterator[Callable[..., GroupCommitFlusher]]:
    made: list[tuple[GroupCommitFlusher, GatedThread | None]] = []

    def make(mode: FlushMode = FlushMode.SYNC, *, seam: GatedThread | None = None, **kwargs: int) -> GroupCommitFlusher:
        options = {"interval_ms": 1, "timeout_ms": 2000, **kwargs}
        extra = {"run_in_thread": seam} if seam is not None else {}
        flusher = GroupCommitFlusher(store, mode, **options, **extra)
        flusher.start()
        made.append((flusher, seam))
        return flusher

    yield make
    for flusher, seam in made:
        if seam is not None:
            seam.gate.set()
        await flusher.stop()


def put(store: MessageStore, body: bytes = b"x") -> int:
    return store.put_messages([msg(body)], now_ms=1).next_offset


async def test_waiters_that_arrive_during_a_flush_share_the_next_one(
    store: MessageStore, make_flusher: Callable[..., GroupCommitFlusher]
) -> None:
    seam = GatedThread()
    flusher = make_flusher(seam=seam)
    first = asyncio.create_task(flusher.wait_flushed(put(store)))
    await wait_until(lambda: seam.calls == 1)  # flush 1 is running, covering only the first put
    later = [asyncio.create_task(flusher.wait_flushed(put(store))) for _ in range(5)]
    await asyncio.sleep(0)
    seam.gate.set()
    assert await asyncio.gather(first, *later) == [True] * 6
    assert seam.calls == flusher.flush_count == 2
    assert flusher.flushed_offset == store.max_offset


async def test_a_real_flush_runs_in_a_worker_thread(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    flusher = GroupCommitFlusher(store, FlushMode.SYNC, interval_ms=1, timeout_ms=5000)
    flusher.start()
    try:
        offsets = [put(store, b"%d" % i) for i in range(3)]
        assert store.flushed_offset < offsets[-1]
        assert await asyncio.gather(*(flusher.wait_flushed(o) for o in offsets)) == [True] * 3
        assert store.flushed_offset == store.max_offset
        assert flusher.flush_count == 1
    finally:
        await flusher.stop()
        store.close()


async def test_an_offset_already_flushed_needs_no_flush(
    store: MessageStore, make_flusher: Callable[..., GroupCommitFlusher]
) -> None:
    seam = GatedThread()
    flusher = make_flusher(seam=seam)
    offset = put(store)
    store.flush()
    assert await flusher.wait_flushed(offset)
    assert seam.calls == 0


async def test_a_slow_flush_times_out(store: MessageStore, make_flusher: Callable[..., GroupCommitFlusher]) -> None:
    seam = GatedThread()
    flusher = make_flusher(seam=seam, timeout_ms=20)
    assert not await flusher.wait_flushed(put(store))
    assert store.flushed_offset == 0
    seam.gate.set()
    await wait_until(lambda: flusher.flushed_offset == store.max_offset)
    assert await flusher.wait_flushed(store.max_offset)


async def test_a_failed_fsync_fails_every_later_wait(
    store: MessageStore, make_flusher: Callable[..., GroupCommitFlusher]
) -> None:
    seam = GatedThread(fail=True)
    seam.gate.set()
    flusher = make_flusher(seam=seam)
    assert not await flusher.wait_flushed(put(store))
    assert isinstance(flusher.failure, OSError)
    assert not await flusher.wait_flushed(put(store))
    assert seam.calls == 1


async def test_async_mode_answers_at_once_and_flushes_in_the_background(
    store: MessageStore, make_flusher: Callable[..., GroupCommitFlusher]
) -> None:
    seam = GatedThread()
    flusher = make_flusher(FlushMode.ASYNC, seam=seam, interval_ms=1)
    offset = put(store)
    assert await flusher.wait_flushed(offset)
    assert store.flushed_offset < offset
    seam.gate.set()
    await wait_until(lambda: store.flushed_offset == offset)


async def test_stop_flushes_what_is_left(store: MessageStore) -> None:
    flusher = GroupCommitFlusher(store, FlushMode.ASYNC, interval_ms=60_000, timeout_ms=1000)
    flusher.start()
    put(store)
    await flusher.stop()
    assert store.flushed_offset == store.max_offset
    assert not flusher.running


async def test_waiting_on_a_stopped_flusher_fails_unless_flushed(store: MessageStore) -> None:
    flusher = GroupCommitFlusher(store, FlushMode.SYNC, interval_ms=1, timeout_ms=1000)
    offset = put(store)
    assert not await flusher.wait_flushed(offset)
    store.flush()
    assert await flusher.wait_flushed(offset)


def test_a_flush_that_raced_with_a_truncation_counts_for_nothing(store: MessageStore) -> None:
    keep = put(store)
    put(store)
    ticket, job = store.prepare_flush()
    store.truncate(keep)
    put(store, b"a different tail")
    job()
    assert not store.complete_flush(ticket)
    assert store.flushed_offset == 0
    ticket, job = store.prepare_flush()
    job()
    assert store.complete_flush(ticket)
    assert store.flushed_offset == store.max_offset


def test_a_file_flush_job_survives_the_segment_being_cut(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    try:
        put(store)
        ticket, job = store.prepare_flush()
        store.truncate(0)  # closes and shrinks the segment the job holds a duplicate of
        job()
        assert not store.complete_flush(ticket)
        assert (store.max_offset, store.flushed_offset) == (0, 0)
    finally:
        store.close()
