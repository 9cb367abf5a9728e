"""GroupCommitFlusher: batched fsyncs (SYNC), timeouts, background flushes (ASYNC), failures."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from store_factories import SETTINGS, msg, open_store

from brokergroup.broker.settings import FlushMode
from brokergroup.broker.store.flusher import FlushWorker, GroupCommitFlusher
from brokergroup.broker.store.message_store import MessageStore
from brokergroup.broker.store.segments import FlushTicket


async def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
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


async def test_the_flusher_fsyncs_in_its_own_thread_and_ends_it_on_stop(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    threads: list[str] = []
    flusher = GroupCommitFlusher(store, FlushMode.SYNC, interval_ms=1, timeout_ms=5000)
    flusher.start()
    try:
        real_prepare = store.prepare_flush

        def prepare() -> tuple[FlushTicket, Callable[[], None]]:
            ticket, job = real_prepare()

            def traced() -> None:
                threads.append(threading.current_thread().name)
                job()

            return ticket, traced

        store.prepare_flush = prepare  # type: ignore[method-assign]
        for i in range(3):
            assert await flusher.wait_flushed(put(store, b"%d" % i))
        assert threads and set(threads) == {"flusher-SYNC"}, threads
        worker = next(t for t in threading.enumerate() if t.name == "flusher-SYNC")
    finally:
        await flusher.stop()
        store.close()
    worker.join(timeout=5)
    assert not worker.is_alive()


async def test_the_flush_worker_hands_an_fsync_error_to_the_flusher() -> None:
    worker = FlushWorker("test-flush-worker")

    def failing() -> None:
        raise OSError(5, "Input/output error")

    try:
        await worker(lambda: None)
        with pytest.raises(OSError, match="Input/output error"):
            await worker(failing)

        def broken() -> None:
            raise ValueError("not an fsync error")

        with pytest.raises(OSError, match="not an fsync error"):  # counted as a failed fsync, never as done
            await worker(broken)
    finally:
        worker.close()
    with pytest.raises(RuntimeError, match="closed"):
        await worker(lambda: None)


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


async def test_a_flush_loop_that_breaks_is_told_and_fails_the_waiting_puts_at_once(
    store: MessageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not an fsync error (kept, see above) but a bug: the broker is told (`on_failure`: it stops, exit 1)
    and the puts waiting for a flush that will never come fail now instead of at their timeout."""
    seam = GatedThread()
    flusher = GroupCommitFlusher(store, FlushMode.SYNC, interval_ms=1, timeout_ms=60_000, run_in_thread=seam)
    told: list[tuple[str, BaseException]] = []
    flusher.start(on_failure=lambda what, error: told.append((what, error)))
    try:
        waiting = asyncio.create_task(flusher.wait_flushed(put(store)))
        await wait_until(lambda: seam.calls == 1)  # the first flush is under way

        def broken(_ticket: FlushTicket) -> bool:
            raise RuntimeError("a bug")

        monkeypatch.setattr(store, "complete_flush", broken)
        seam.gate.set()
        assert await asyncio.wait_for(waiting, 5) is False  # long before the 60 s timeout
        await wait_until(lambda: bool(told))
        assert [(what, str(error)) for what, error in told] == [("commit-log flusher", "a bug")]
        assert not flusher.running
        assert await asyncio.wait_for(flusher.wait_flushed(put(store)), 5) is False  # and every later put
    finally:
        await flusher.stop()  # does not raise the loop's error again


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


def test_a_file_flush_covers_a_put_written_before_its_fsync_started(tmp_path: Path) -> None:
    """Issue 17: the job reads the log's end in its thread, so a put written during the hand-over
    to the flush thread is covered by this flush instead of waiting for the next one."""
    store = open_store(tmp_path / "s")
    try:
        first = put(store)
        ticket, job = store.prepare_flush()
        assert ticket.target == first
        second = put(store)  # after prepare_flush, before the job runs
        job()
        assert store.complete_flush(ticket)
        assert store.flushed_offset == second == store.max_offset
    finally:
        store.close()


def test_a_file_flush_never_counts_bytes_of_a_segment_it_does_not_fsync(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    try:
        put(store)
        ticket, job = store.prepare_flush()
        while store.max_offset < SETTINGS.segment_size + 1:  # a new segment, created after prepare_flush
            put(store, bytes(900))
        job()
        assert store.complete_flush(ticket)
        assert store.flushed_offset == SETTINGS.segment_size  # the job's last segment, blank included
        assert store.flushed_offset < store.max_offset
    finally:
        store.close()


def test_a_file_flush_never_counts_what_a_truncation_replaced(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    try:
        keep = put(store)
        ticket, job = store.prepare_flush()
        store.truncate(0)
        put(store, b"written after the cut")
        job()
        assert not store.complete_flush(ticket)
        assert store.flushed_offset == 0 < keep
    finally:
        store.close()


# ---- slaves: replicated appends, no put waiting (issue 21) -------------------------------------------


@pytest.fixture
def master() -> Iterator[MessageStore]:
    opened = open_store(Path("unused"), memory=True)
    yield opened
    opened.close()


def replicate(master: MessageStore, slave: MessageStore, count: int = 1) -> int:
    """`count` puts on the master, shipped to `slave` as one replicated frame; the slave's new end."""
    start = master.max_offset
    for i in range(count):
        put(master, b"replicated %d" % i)
    slave.append_raw(start, master.read_raw(start, master.max_offset - start))
    return slave.max_offset


async def test_a_sync_flusher_fsyncs_replicated_frames_with_no_put_waiting(
    store: MessageStore, master: MessageStore, make_flusher: Callable[..., GroupCommitFlusher]
) -> None:
    seam = GatedThread()
    seam.gate.set()
    make_flusher(seam=seam)
    end = replicate(master, store, 3)
    assert store.flushed_offset < end
    await wait_until(lambda: store.flushed_offset == end)
    assert seam.calls >= 1


async def test_one_fsync_covers_every_frame_received_during_the_previous_one(
    store: MessageStore, master: MessageStore, make_flusher: Callable[..., GroupCommitFlusher]
) -> None:
    seam = GatedThread()
    flusher = make_flusher(seam=seam)
    first = replicate(master, store)
    await wait_until(lambda: seam.calls == 1)  # flush 1 runs, covering the first frame only
    for _ in range(5):
        end = replicate(master, store)
    assert store.flushed_offset == 0
    seam.gate.set()
    await wait_until(lambda: store.flushed_offset == end)
    assert first < end
    assert seam.calls == flusher.flush_count == 2


async def test_an_async_flusher_flushes_replicated_frames_within_its_interval(
    tmp_path: Path, master: MessageStore
) -> None:
    slave = MessageStore.open(tmp_path, SETTINGS.model_copy(update={"flush": FlushMode.ASYNC}), memory=True)
    flusher = GroupCommitFlusher(slave, FlushMode.ASYNC, interval_ms=20, timeout_ms=1000)
    flusher.start()
    try:
        end = replicate(master, slave, 2)
        assert slave.ackable_offset == end  # ASYNC acknowledges what is written
        await wait_until(lambda: slave.flushed_offset == end)
    finally:
        await flusher.stop()


async def test_a_sync_slave_acknowledges_only_flushed_bytes_and_hears_of_each_flush(
    store: MessageStore, master: MessageStore, make_flusher: Callable[..., GroupCommitFlusher]
) -> None:
    heard: list[tuple[int, int]] = []
    store.add_flush_listener(lambda offset: heard.append((offset, store.ackable_offset)))
    seam = GatedThread()
    make_flusher(seam=seam)
    end = replicate(master, store, 2)
    await wait_until(lambda: seam.calls == 1)
    assert (store.max_offset, store.ackable_offset) == (end, 0)
    seam.gate.set()
    await wait_until(lambda: heard != [])
    assert heard == [(end, end)]


async def test_after_a_failed_fsync_a_sync_slave_acknowledges_nothing_more(
    store: MessageStore, master: MessageStore, make_flusher: Callable[..., GroupCommitFlusher]
) -> None:
    seam = GatedThread(fail=True)
    seam.gate.set()
    flusher = make_flusher(seam=seam)
    replicate(master, store)
    await wait_until(lambda: flusher.failure is not None)
    replicate(master, store)
    await flusher.stop()  # its last flush round would flush anything it still may
    assert (store.flushed_offset, store.ackable_offset, seam.calls) == (0, 0, 1)


async def test_an_answered_wait_cancels_its_timeout(
    store: MessageStore, make_flusher: Callable[..., GroupCommitFlusher]
) -> None:
    """Each waiting put arms a timer for its timeout; one answered in time leaves none behind (at thousands
    of puts a second and a 5 s timeout, they would pile up on the loop)."""
    seam = GatedThread()
    flusher = make_flusher(seam=seam, timeout_ms=60_000)
    pending = flusher.flushed_soon(put(store))
    assert isinstance(pending, asyncio.Future)
    [(_, _, timer)] = flusher._waiters
    seam.gate.set()
    assert await pending is True
    assert timer.cancelled()
