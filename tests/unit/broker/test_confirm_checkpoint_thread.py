"""The confirm checkpoint's periodic writes in another thread (issue 17): never a stale value after a `write`."""

from __future__ import annotations

import asyncio
import queue
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

from store_factories import FakeClock, msg, open_store

from brokergroup.broker.store.checkpoint import ConfirmCheckpoint, decode_checkpoint
from brokergroup.broker.store.flusher import FlushMode, GroupCommitFlusher
from brokergroup.broker.store.message_store import CONFIRM_FILE


class Recording(ConfirmCheckpoint):
    """Records each file write; `gate(offset)` runs before writing it (a slow disk)."""

    def __init__(self, path: Path, gate: Callable[[int], None] = lambda _o: None) -> None:
        super().__init__(path)
        self.use_lock(threading.Lock())
        self.written: list[int] = []
        self.gate = gate

    def _write_file(self, data: bytes) -> None:
        offset = decode_checkpoint(data)
        assert offset is not None
        self.gate(offset)
        super()._write_file(data)
        self.written.append(offset)


def on_disk(path: Path) -> int | None:
    return ConfirmCheckpoint(path).read()


def test_a_job_writes_its_value_when_run(tmp_path: Path) -> None:
    checkpoint = Recording(tmp_path / "confirm")
    job = checkpoint.job(10)
    assert checkpoint.in_flight and checkpoint.written == []
    job()
    assert not checkpoint.in_flight and checkpoint.written == [10] and checkpoint.background_writes == 1
    assert on_disk(tmp_path / "confirm") == 10
    checkpoint.job(10)()  # the value on disk: not written again
    assert checkpoint.written == [10]


def test_in_memory_a_job_is_written_at_once() -> None:
    checkpoint = ConfirmCheckpoint(None)  # in memory: written at once, the job does nothing
    checkpoint.job(7)()
    assert checkpoint.read() == 7


def test_a_job_made_before_a_write_does_nothing_after_it(tmp_path: Path) -> None:
    checkpoint = Recording(tmp_path / "confirm")
    stale = checkpoint.job(100)  # handed to the thread, not run yet
    checkpoint.write(50)  # a truncation lowers the value
    stale()
    assert checkpoint.written == [50] and on_disk(tmp_path / "confirm") == 50 and not checkpoint.in_flight


def test_a_write_waits_for_a_job_writing_and_wins(tmp_path: Path) -> None:
    release, entered = threading.Event(), threading.Event()

    def gate(offset: int) -> None:
        if offset == 100:  # the stale, higher value blocks in the middle of its write
            entered.set()
            assert release.wait(20)

    checkpoint = Recording(tmp_path / "confirm", gate)
    running = threading.Thread(target=checkpoint.job(100))
    running.start()
    try:
        assert entered.wait(20)
        lowered = threading.Thread(target=checkpoint.write, args=(50,))  # a truncation lowering it
        lowered.start()
        lowered.join(0.05)  # give it a chance to overtake (it must not)
        assert lowered.is_alive(), "the write did not wait for the job writing"
        release.set()
        lowered.join(20)
        running.join(20)
        assert checkpoint.written == [100, 50] and on_disk(tmp_path / "confirm") == 50
    finally:
        release.set()


def test_jobs_in_a_thread_never_write_a_value_made_before_the_last_write(tmp_path: Path) -> None:
    rng = random.Random(17)

    def gate(_offset: int) -> None:
        time.sleep(rng.choice((0, 0, 0.001, 0.003)))

    checkpoint = Recording(tmp_path / "confirm", gate)
    jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
    worker = threading.Thread(target=lambda: [job() for job in iter(jobs.get, None)])
    worker.start()
    fence, since = 0, set[int]()
    offset = 1_000
    try:
        for _ in range(300):
            if rng.random() < 0.2:
                offset -= rng.randrange(1, 50)  # a truncation: written now, in this thread
                checkpoint.write(offset)
                assert on_disk(tmp_path / "confirm") == offset
                fence, since = len(checkpoint.written), set()
            else:
                offset += rng.randrange(1, 50)
                since.add(offset)
                jobs.put(checkpoint.job(offset))
            time.sleep(rng.choice((0, 0, 0.001)))
            later = checkpoint.written[fence:]  # the thread's writes since the last `write`
            assert set(later) <= since, (later, since)
    finally:
        jobs.put(None)
        worker.join(20)
    assert set(checkpoint.written[fence:]) <= since


def test_the_flusher_writes_periodic_checkpoints_in_its_thread_and_a_truncation_wins(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path / "s", clock=clock)
    path = tmp_path / "s" / CONFIRM_FILE

    async def scenario() -> None:
        flusher = GroupCommitFlusher(store, FlushMode.SYNC, interval_ms=10, timeout_ms=5_000)
        flusher.start()
        try:
            ends = [store.put_messages([msg(b"m%d" % i)], now_ms=1).next_offset for i in range(4)]
            clock.now = 1.0
            store.set_confirm_offset(ends[3])  # handed to the flusher's thread
            store.truncate(ends[1])  # lowers it, in this thread
            assert on_disk(path) == ends[1]
            store.put_messages([msg(b"again")], now_ms=1)
            end = store.max_offset
            clock.now = 2.0
            store.set_confirm_offset(end)
            deadline = time.monotonic() + 20
            while on_disk(path) != end:
                assert time.monotonic() < deadline, "the periodic checkpoint was not written"
                await asyncio.sleep(0.01)
        finally:
            await flusher.stop()

    asyncio.run(scenario())
    end = store.max_offset
    store.close()
    reopened = open_store(tmp_path / "s")
    try:
        assert reopened.confirm_offset == end
    finally:
        reopened.close()
