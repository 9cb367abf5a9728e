"""Group commit: when appends become durable (RocketMQ GroupCommitService /
FlushRealTimeService, reference §4.6).

- SYNC: every appended byte is fsynced as soon as possible, whoever appended it: a master's put
  or a slave's replicated frame (`append_raw`; the store's append listener wakes the flusher).
  One flush runs at a time, in a worker thread; it covers everything appended before its fsync
  started, and everything appended while it runs is covered by the next one, so N appends in
  flight cost about two fsyncs, not N. `wait_flushed(offset)` parks a put until a flush covers `offset`;
  after `timeout_ms` it answers False (the caller answers FLUSH_DISK_TIMEOUT; the message stays
  in the log). A slave acknowledges only flushed bytes (`MessageStore.ackable_offset`, the
  store's flush listeners tell it when to ack): RocketMQ's slaves flush every 10 ms but
  acknowledge from the page cache.
- ASYNC: `wait_flushed` answers True at once; a task flushes every `interval_ms` if anything is
  unflushed, on masters and slaves alike (RocketMQ's FlushRealTimeService, 500 ms by default).

Both modes flush once more on `stop()`. The flush itself is `store.prepare_flush()` on the event
loop, the returned job in a thread (it only fsyncs duplicated descriptors, so appends go on
meanwhile), then `store.complete_flush(ticket)` on the event loop; a flush that raced with a
truncation counts for nothing (segments.py) and the next one covers the bytes again. The thread
is the flusher's own (`FlushWorker`, one per flusher, started and stopped with it): a flush costs a
queue hand-over and one `call_soon_threadsafe`, not an executor round trip (`asyncio.to_thread`:
a context copy, an executor work item and two chained futures per flush, measured ~6 % of a
slave's CPU under sync load). Every completed flush answers every waiter it covers at once
(`_answer`). The job reads the log's end in its thread right before it fsyncs (`FlushTicket`), so
a put appended between `prepare_flush()` and the fsync's start (the hand-over to the thread) is
covered by this flush, not the next one; a put appended once the fsync runs waits for the next.

Index checkpoints (message_store.py): the flusher registers itself as the store's runner on
`start()`; each periodic checkpoint is copied on the event loop (cheap), its files written in the
flusher's second thread (`index-checkpoint`, so that a slow checkpoint never delays a flush), and
completed on the event loop. `stop()` waits for one in progress (up to `timeout_ms`). The store's
periodic confirm checkpoints (two fsyncs and a rename every 200 ms) run in that thread too between
`start()` and `stop()` (`FlushWorker.submit`; checkpoint.py says why a truncation stays safe).

A failed fsync (OSError) is sticky: Linux may drop the dirty pages and report a later fsync as
successful, so after one failure every `wait_flushed` answers False (in both modes) and nothing
more is flushed (so nothing more is acknowledged by a SYNC slave) until the process restarts
and recovers the log from disk.

Invariants: `wait_flushed(offset)` answers True only if `store.flushed_offset >= offset` held at
some point after the call (or the mode is ASYNC and no fsync has failed). In SYNC mode, while
the flusher runs and no fsync failed, every appended byte is flushed without anyone waiting for
it: bytes appended at time t are flushed by the end of the flush that starts after t.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from brokergroup.broker.settings import FlushMode
from brokergroup.broker.store.segments import FlushTicket
from brokergroup.common import lasting

if TYPE_CHECKING:
    from brokergroup.broker.store.message_store import IndexCheckpointJob

logger = logging.getLogger(__name__)

RunInThread = Callable[[Callable[[], None]], Awaitable[None]]
"""Runs a flush job away from the event loop; a seam for tests (slow or counted flushes)."""


class Flushable(Protocol):
    """What the flusher needs from the store (`MessageStore`)."""

    @property
    def max_offset(self) -> int: ...

    @property
    def flushed_offset(self) -> int: ...

    def prepare_flush(self) -> tuple[FlushTicket, Callable[[], None]]: ...

    def complete_flush(self, ticket: FlushTicket) -> bool: ...

    def add_append_listener(self, listener: Callable[[int], None]) -> None: ...


@runtime_checkable
class IndexCheckpointing(Protocol):
    """A store whose index checkpoints the flusher writes in a thread of its own (`MessageStore`)."""

    def set_index_checkpoint_runner(self, runner: Callable[[IndexCheckpointJob], None] | None) -> None: ...

    def complete_index_checkpoint(self, job: IndexCheckpointJob) -> None: ...


@runtime_checkable
class ConfirmCheckpointing(Protocol):
    """A store whose periodic confirm checkpoints the flusher writes in a thread (`MessageStore`)."""

    def set_confirm_checkpoint_runner(
        self,
        runner: Callable[[Callable[[], None]], None] | None,
        lock: contextlib.AbstractContextManager[object] | None = None,
    ) -> None: ...


async def run_in_worker_thread(job: Callable[[], None]) -> None:
    await asyncio.to_thread(job)


_Job = tuple[Callable[[], None], asyncio.AbstractEventLoop | None, asyncio.Future[None] | None]


def _settle(future: asyncio.Future[None], error: OSError | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


class FlushWorker:
    """One daemon thread that runs flush jobs in order; `await worker(job)` is a `RunInThread`.

    `close()` lets the thread finish the jobs queued so far and end; a job awaited after
    `close()` raises RuntimeError. A hung fsync leaves the (daemon) thread behind, nothing else."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    async def __call__(self, job: Callable[[], None]) -> None:
        if self._closed:
            raise RuntimeError("the flush worker is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._jobs.put((job, loop, future))
        await future

    def submit(self, job: Callable[[], None]) -> None:
        """Run `job` in the thread, nobody waiting for it (it must not raise); dropped if closed."""
        if not self._closed:
            self._jobs.put((job, None, None))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._jobs.put(None)

    def _work(self) -> None:
        while (item := self._jobs.get()) is not None:
            job, loop, future = item
            error: OSError | None = None
            try:
                job()
            except OSError as raised:
                error = raised
            except Exception as raised:  # a bug, not an fsync error: counted as a failed fsync, never as done
                logger.exception("flush job failed")
                error = OSError(f"flush job failed: {raised!r}")
            if loop is None or future is None:  # submitted: nobody waits
                continue
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                loop.call_soon_threadsafe(_settle, future, error)


class GroupCommitFlusher:
    """See the module docstring. `start()` inside a running event loop; `await stop()` before
    closing the store."""

    def __init__(
        self,
        store: Flushable,
        mode: FlushMode,
        *,
        interval_ms: int,
        timeout_ms: int,
        run_in_thread: RunInThread | None = None,
    ) -> None:
        """`run_in_thread` runs flush jobs (default: the flusher's own `FlushWorker`)."""
        if interval_ms < 1 or timeout_ms < 1:
            raise ValueError(f"interval_ms={interval_ms} and timeout_ms={timeout_ms} must be at least 1")
        self.store = store
        self.mode = mode
        self.interval_s = interval_ms / 1000
        self.timeout_s = timeout_ms / 1000
        self._run_in_thread = run_in_thread
        self._worker: FlushWorker | None = None
        self._index_worker: FlushWorker | None = None
        self._index_task: asyncio.Task[None] | None = None
        self._waiters: list[tuple[int, asyncio.Future[bool], asyncio.TimerHandle]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self.flush_count = 0
        """Flushes completed (or failed) so far."""
        self.failure: OSError | None = None
        """The fsync error that broke the flusher, if any (see the module docstring)."""

    @property
    def flushed_offset(self) -> int:
        return self.store.flushed_offset

    @property
    def running(self) -> bool:
        return self._task is not None and not self._stopping and not self._task.done()

    def start(self, on_failure: lasting.OnFailure | None = None) -> None:
        """Run the flush loop; `on_failure` hears if it ends with an error other than a failed fsync (which
        it keeps, failing every later wait): a bug that stopped it would otherwise leave every sync put
        waiting until its timeout while the broker looks healthy."""
        if self._task is not None:
            raise RuntimeError("the flusher was already started")
        self._loop = asyncio.get_running_loop()
        if self._run_in_thread is None:
            self._worker = FlushWorker(f"flusher-{self.mode.value}")
            self._run_in_thread = self._worker
        if self.mode is FlushMode.SYNC:
            self.store.add_append_listener(self._appended)
        if isinstance(self.store, IndexCheckpointing):
            self._index_worker = FlushWorker("index-checkpoint")
            self.store.set_index_checkpoint_runner(self._index_checkpoint_due)
        if isinstance(self.store, ConfirmCheckpointing):
            if self._index_worker is None:
                self._index_worker = FlushWorker("index-checkpoint")
            self.store.set_confirm_checkpoint_runner(self._index_worker.submit, threading.Lock())
        self._task = lasting.lasting(self._run(), "commit-log flusher", on_failure)

    async def stop(self) -> None:
        """Flush once more and stop; gives up (logged) after `timeout_ms` if a flush hangs."""
        if self._task is None or self._stopping:
            return
        self._stopping = True
        self._wake.set()
        if not lasting.failed_with_error(self._task):  # its failure was told (`on_failure`)
            try:
                await asyncio.wait_for(self._task, self.timeout_s)
            except TimeoutError:
                logger.warning("flusher did not finish its last flush within %.3f s; stopped anyway", self.timeout_s)
        if isinstance(self.store, IndexCheckpointing):
            self.store.set_index_checkpoint_runner(None)
        if isinstance(self.store, ConfirmCheckpointing):
            self.store.set_confirm_checkpoint_runner(None)  # a job queued still runs, checked (checkpoint.py)
        if self._index_task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._index_task), self.timeout_s)
        if self._index_worker is not None:
            self._index_worker.close()
        if self._worker is not None:
            self._worker.close()
        self._answer_all()

    def _index_checkpoint_due(self, job: IndexCheckpointJob) -> None:
        """The store's index checkpoint runner (on the event loop, from `set_confirm_offset`): the
        job runs in the flusher's index thread, not in the flush thread (a slow checkpoint must not
        delay flushes), and completes on the event loop."""
        assert self._loop is not None
        self._index_task = self._loop.create_task(self._index_checkpoint(job), name="index-checkpoint")

    async def _index_checkpoint(self, job: IndexCheckpointJob) -> None:
        try:
            if self._index_worker is not None:
                await self._index_worker(job.run)  # job.run never raises: its outcome stays in the job
        except RuntimeError:  # the worker closed first: the job did not run
            pass
        finally:
            self._index_task = None
            assert isinstance(self.store, IndexCheckpointing)
            try:
                self.store.complete_index_checkpoint(job)
            except Exception:
                logger.exception("index checkpoint failed")

    async def wait_flushed(self, offset: int) -> bool:
        """True once the log is durable up to `offset` (SYNC) or at once (ASYNC); False on
        timeout, after an fsync failure, or when the flusher is not running and `offset` is not
        flushed."""
        pending = self.flushed_soon(offset)
        return pending if isinstance(pending, bool) else await pending

    def flushed_soon(self, offset: int) -> bool | asyncio.Future[bool]:
        """`wait_flushed` without a coroutine (the binary port answers puts from callbacks): its
        answer now, or a future of it (cancel it to give up)."""
        if self.failure is not None:
            return False
        if self.mode is FlushMode.ASYNC or self.store.flushed_offset >= offset:
            return True
        loop = self._loop
        if not self.running or loop is None:
            return False
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiters.append((offset, waiter, loop.call_later(self.timeout_s, self._timed_out, offset, waiter)))
        self._wake.set()
        return waiter

    def _timed_out(self, offset: int, waiter: asyncio.Future[bool]) -> None:
        if not waiter.done():
            logger.warning("flush to offset=%d not done within %.3f s", offset, self.timeout_s)
            waiter.set_result(False)

    def _appended(self, _max_offset: int) -> None:
        """Store append listener (SYNC): flush the new bytes. May run on any thread."""
        loop = self._loop
        if loop is None or self._stopping or loop.is_closed():
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._wake.set()
        else:
            loop.call_soon_threadsafe(self._wake.set)

    async def _run(self) -> None:
        try:
            while not self._stopping:
                if self.mode is FlushMode.ASYNC:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), self.interval_s)
                else:
                    await self._wake.wait()
                self._wake.clear()
                await self._flush_while_needed()
            await self._flush_while_needed()
        except Exception:
            self._answer_all()  # no flush will come: the waiting puts fail now, not at their timeout
            raise

    def _wanted(self) -> bool:
        """Anything to flush now: any unflushed byte, unless an fsync failed (SYNC is woken by
        appends and waiters, ASYNC by its timer or `stop()`)."""
        return self.failure is None and self.store.max_offset > self.store.flushed_offset

    async def _flush_while_needed(self) -> None:
        while self._wanted():
            await self._flush_once()
            self._answer()

    async def _flush_once(self) -> None:
        ticket, job = self.store.prepare_flush()
        run = self._run_in_thread or run_in_worker_thread  # start() sets it; the fallback is never used
        try:
            await run(job)
        except OSError as error:
            logger.exception("fsync of the commit log failed; refusing to acknowledge further flushes")
            self.failure = error
        else:
            if not self.store.complete_flush(ticket):
                logger.info("flush to offset=%d raced with a truncation; not counted", ticket.target)
        self.flush_count += 1

    def _answer(self) -> None:
        """Resolve the waiters the log now covers (all of them, False, after a failure)."""
        flushed = self.store.flushed_offset
        keep = []
        for offset, waiter, timer in self._waiters:
            if not waiter.done() and self.failure is None and offset > flushed:
                keep.append((offset, waiter, timer))
                continue
            timer.cancel()
            if not waiter.done():
                waiter.set_result(self.failure is None)
        self._waiters = keep

    def _answer_all(self) -> None:
        self._answer()
        for _, waiter, timer in self._waiters:
            timer.cancel()
            if not waiter.done():
                waiter.set_result(False)
        self._waiters = []
