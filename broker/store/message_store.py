"""The message store: commit log + epochs + confirm checkpoint + in-memory indexes.

`MessageStore` implements `ReplicatedLog` (types.py) for replication, and the producer/consumer
API. Files under the store directory: `commitlog/` (segments.py), `epochFileCheckpoint` (+`.bak`,
epoch.py), `confirm.checkpoint` (checkpoint.py), `head.state` (head.py, once retention ran). Not
thread-safe: one owner calls it; only the job from `prepare_flush()` may run in another thread.

Invariants:

- consumers see exactly the records ending at or before `confirm_offset` (the dispatch
  watermark); consumer-group offsets come from those records only (DESIGN §4, #4771);
- `min_offset <= confirm_offset <= max_offset`; the confirm offset only grows, except that
  `truncate` lowers it to the cut;
- the persisted confirm offset never exceeds the log: it is lowered (and written at once) on
  open when the recovered log is shorter, and by `truncate`. So a restart dispatches only what was
  confirmed and never exposes, or hands out queue offsets of, bytes beyond it (#6609, #7689);
- queue offsets are assigned at append time from *all* appended records, confirmed or not, so an
  unconfirmed tail never has its queue offsets reused unless it is truncated away (#6344);
- the producer table is updated at append time, on a master's put and a slave's `append_raw`;
- `ackable_offset` is what this replica acknowledges (a slave's acks to the master, the master's
  own share of the confirm offset): under SYNC flush only fsynced bytes (`flushed_offset`), so
  an acknowledged byte survives a power loss of this machine. A log recovered on open counts as
  flushed: `CommitLog` fsyncs the tail it recovered (a kill -9 leaves unsynced bytes in the page
  cache, which a later power loss would drop).

Retention (`apply_retention`, `delete_head`; policy in retention.py): deleting head segments takes
four steps, each safe to interrupt (kill -9) because opening the store finishes it: (1) the confirm
checkpoint is written (it covers the new start) and the head state at the new start goes to
`head.state` (queue bases, group offsets and producer sequences of the records to delete);
(2) segments are unlinked, oldest first (segments.py); (3) the folder is fsynced; (4) the epoch
entries that end at or before the new start are dropped (RocketMQ's truncatePrefixByOffset; the
last entry always stays, so the election ranking, by max offset and epoch, is unchanged). Open:
a head state ahead of the log's start re-applies (2)-(4). Consumers then see each queue start at
its base (`queue_min_offset`); group offsets below it read as the base (they move up).

A replica copying from scratch a log whose head was deleted (`seed`; the HA HEAD frame): its master's
head state at the copy's start is written to `head.state` first, then the empty log restarts there
(a crash in between: open restarts it, as above), so queue offsets, group offsets and producer
sequences continue as the master's. `replica_start` and `head_state_at` are the master's side: its
min offset, or its last dispatched segment start (syncFromLastFile), where `head_state` can be
computed (a segment start: the group-offset history keeps one value per segment).

A full disk (diskspace.py): puts are refused with `DiskFullError` before anything is written
while free space is below `min_free_disk_bytes`; a write that fails anyway (ENOSPC) is undone
by the log and reported the same way. Replicated appends are not refused by the threshold.

Persisted indexes (index_files.py, `index/`): every `index_checkpoint_interval_s` (5 s, or 20 times
as long as the last write took, whichever is longer) while the confirm offset moves, before
retention deletes segments, and at `close()`, the indexes are checkpointed (after the confirm
checkpoint, so the index checkpoint never covers more than the persisted confirm offset). Opening
loads the latest checkpoint and replays the log after it; a missing, damaged or stale one (offset
outside the log, dispatched beyond the confirm offset, another segment size) is deleted and the
whole log rescanned, with one warning. `truncate` at or above the dispatch watermark rewinds the
in-memory indexes to it (`StoreIndexes.snapshot`) and replays the cut log's undispatched rest; below
it, the checkpoint is deleted first if it covers the cut, and the indexes come from the checkpoint
(or a rescan). `seed` and a slave's rebase delete it before the log restarts elsewhere.

Costs: opening and `truncate` replay the log after the index checkpoint (bounded by what 5 s of
writes add, or nothing after a clean close); the queue files are mapped, not read (index_files.py),
and the commit log verifies only what follows the checkpoint's `synced` offset, which is
`min(checkpoint offset, flushed_offset)` when written, so never beyond what was fsynced. A fallback
rescan is O(log size). Periodic checkpoints: with a runner (`set_index_checkpoint_runner`, the
flusher registers itself) `set_confirm_offset` only copies what the write needs (the queue entries
dispatched since the previous write, the producer table as dict copies) and hands an
`IndexCheckpointJob` to the runner, which runs it in its own thread and completes it here; while it
is outstanding retention waits, no other checkpoint starts, and a truncation below it invalidates
(renames the index folder away, so the job fails harmlessly). Without a runner they are written
inline on the caller's thread. `write_index_checkpoint` (retention, `close`) always writes inline.
The confirm checkpoint is written at most every 200 ms by `set_confirm_offset` (plus
`flush_checkpoint()`, `flush()`, `close()`); after a crash it may lag, which only delays visibility
until replication confirms again. The periodic write runs in another thread given a
runner (`set_confirm_checkpoint_runner`, the flusher); every other write runs in the caller's
thread and voids a periodic one handed over before it (checkpoint.py).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Final

from brokergroup.broker.errors import CorruptLogError, DiskFullError, SeedRequiredError, StoreError
from brokergroup.broker.settings import FlushMode, StoreSettings
from brokergroup.broker.store import put_plan, retention
from brokergroup.broker.store.checkpoint import ConfirmCheckpoint
from brokergroup.broker.store.diskspace import DiskSpace
from brokergroup.broker.store.epoch import EpochCache, EpochEntry
from brokergroup.broker.store.head import HeadFile
from brokergroup.broker.store.index_files import IndexFiles, PreparedWrite
from brokergroup.broker.store.indexes import DEFAULT_MAX_PRODUCERS, HeadState, StoreIndexes
from brokergroup.broker.store.record import (
    Blank,
    ConsumerOffset,
    DecodedRecord,
    RecordInfo,
    RecordKind,
    decode_record,
)
from brokergroup.broker.store.segments import CommitLog, FlushTicket, MemoryLog, SegmentedLog
from brokergroup.broker.store.types import Appended, Message, PutResult, StoredMessage

logger = logging.getLogger(__name__)

CHECKPOINT_INTERVAL_S: Final = 0.2
SCAN_CHUNK: Final = 1024 * 1024
COMMITLOG_DIR: Final = "commitlog"
EPOCH_FILE: Final = "epochFileCheckpoint"
CONFIRM_FILE: Final = "confirm.checkpoint"
HEAD_FILE: Final = "head.state"
INDEX_DIR: Final = "index"
INDEX_CHECKPOINT_INTERVAL_S: Final = 5.0
INDEX_CHECKPOINT_COST_FACTOR: Final = 20
"""A periodic index checkpoint waits at least this many times as long as the last one took."""
STEP_HEAD_WRITTEN: Final = "retention:head-written"
STEP_EPOCHS_CUT: Final = "retention:epochs-cut"
STEP_SEED_HEAD_WRITTEN: Final = "seed:head-written"
STEP_SEED_RESET: Final = "seed:log-reset"


def _no_step(_step: str) -> None:
    pass


class IndexCheckpointJob:
    """An index checkpoint write prepared by `MessageStore.start_index_checkpoint`: `run()` it
    exactly once, in any thread (it touches files and its own immutable data only), then hand it
    to `MessageStore.complete_index_checkpoint` on the store's thread."""

    def __init__(self, files: IndexFiles, prepared: PreparedWrite) -> None:
        self._files = files
        self.prepared = prepared
        self.took = 0.0
        """Seconds `run()` took."""
        self.error: BaseException | None = None
        self.ran = False

    def run(self) -> None:
        """Write the checkpoint; an error is kept for `complete_index_checkpoint`, never raised."""
        started = time.perf_counter()
        try:
            self._files.run(self.prepared)
        except BaseException as error:  # noqa: BLE001 - handed to the store's thread, raised there
            self.error = error
        finally:
            self.took = time.perf_counter() - started
            self.ran = True


def scan_records(log: SegmentedLog, start: int) -> Iterator[DecodedRecord]:
    """Every record of `log` from `start` (a record boundary) to its end; blanks skipped."""
    offset = start
    while offset < log.max_offset:
        chunk = log.read(offset, SCAN_CHUNK)
        yield from decode_all(chunk, base=offset, max_body=log.max_body)
        offset += len(chunk)


def scan_infos(log: SegmentedLog, start: int) -> Iterator[RecordInfo]:
    """What the indexes need of every record of `log` from `start` (as `scan_records`, cheaper)."""
    offset = start
    while offset < log.max_offset:
        chunk = log.read(offset, SCAN_CHUNK)
        position = 0
        while position < len(chunk):
            item = decode_record(chunk, position, max_body=log.max_body)
            if isinstance(item, DecodedRecord):
                yield RecordInfo.from_decoded(item, offset=offset + position)
            elif not isinstance(item, Blank):
                raise CorruptLogError(f"commit log item at offset={offset + position} is damaged: {item}")
            position += item.size
        offset += len(chunk)


def decode_all(data: bytes, *, base: int, max_body: int) -> Iterator[DecodedRecord]:
    """The records of whole items in `data`, their offsets shifted by `base`."""
    position = 0
    while position < len(data):
        item = decode_record(data, position, max_body=max_body)
        if isinstance(item, DecodedRecord):
            yield dataclasses.replace(item, offset=base + position)
        elif not isinstance(item, Blank):
            raise CorruptLogError(f"commit log item at offset={base + position} is damaged: {item}")
        position += item.size


class MessageStore:
    """See the module docstring. Build with `MessageStore.open`."""

    def __init__(
        self,
        *,
        log: SegmentedLog,
        epochs: EpochCache,
        checkpoint: ConfirmCheckpoint,
        settings: StoreSettings,
        clock: Callable[[], float] = time.monotonic,
        max_producers: int = DEFAULT_MAX_PRODUCERS,
        head_file: HeadFile | None = None,
        disk: DiskSpace | None = None,
        step_hook: Callable[[str], None] = _no_step,
        index_files: IndexFiles | None = None,
        index_checkpoint_interval_s: float = INDEX_CHECKPOINT_INTERVAL_S,
    ) -> None:
        self._log = log
        self._epochs = epochs
        self._checkpoint = checkpoint
        self.settings = settings
        self._clock = clock
        self._max_producers = max_producers
        self._head_file = head_file or HeadFile(None)
        self._disk = disk or DiskSpace(None, 0)
        self._step = step_hook
        self._listeners: list[Callable[[int], None]] = []
        self._flush_listeners: list[Callable[[int], None]] = []
        self._head = self._recover_head()
        self._epochs.truncate_suffix_by_offset(log.max_offset + 1)  # crash between log and epoch truncation
        self._epochs.truncate_prefix_by_offset(log.min_offset)  # crash between segment and epoch deletion
        persisted = checkpoint.read()
        confirm = min(max(persisted if persisted is not None else log.min_offset, log.min_offset), log.max_offset)
        if persisted is not None and persisted != confirm:
            logger.warning("confirm offset %d is outside the recovered log; now %d", persisted, confirm)
            checkpoint.write(confirm)
        self._confirm = confirm
        self._last_persist = clock()
        self._index_files = index_files or IndexFiles(None)
        self._index_interval = index_checkpoint_interval_s
        self._index_wait = index_checkpoint_interval_s
        self._last_index_write = clock()
        self._confirm_runner: Callable[[Callable[[], None]], None] | None = None
        self._index_runner: Callable[[IndexCheckpointJob], None] | None = None
        self._index_job: IndexCheckpointJob | None = None
        self._indexes = self._open_indexes()

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        settings: StoreSettings,
        *,
        memory: bool = False,
        clock: Callable[[], float] = time.monotonic,
        max_producers: int = DEFAULT_MAX_PRODUCERS,
        step_hook: Callable[[str], None] = _no_step,
        index_checkpoint_interval_s: float = INDEX_CHECKPOINT_INTERVAL_S,
    ) -> MessageStore:
        """Open (recovering) or create the store in `directory`; `memory=True` keeps it all in
        memory (MemoryLog, epochs and checkpoint without files) and ignores `directory`.
        `step_hook` is called after each step of a truncation or a retention deletion (tests)."""
        if memory:
            log: SegmentedLog = MemoryLog(segment_size=settings.segment_size, max_body=settings.max_message_size)
            return cls(
                log=log,
                epochs=EpochCache(),
                checkpoint=ConfirmCheckpoint(None),
                settings=settings,
                clock=clock,
                max_producers=max_producers,
            )
        root = Path(directory)
        index_files = IndexFiles(root / INDEX_DIR, step_hook=step_hook)
        log = CommitLog(
            root / COMMITLOG_DIR,
            segment_size=settings.segment_size,
            max_body=settings.max_message_size,
            step_hook=step_hook,
            synced_offset=index_files.peek_synced(),
        )
        try:
            return cls(
                log=log,
                epochs=EpochCache.open(root / EPOCH_FILE),
                checkpoint=ConfirmCheckpoint(root / CONFIRM_FILE),
                settings=settings,
                clock=clock,
                max_producers=max_producers,
                head_file=HeadFile(root / HEAD_FILE),
                disk=DiskSpace(root, settings.min_free_disk_bytes),
                step_hook=step_hook,
                index_files=index_files,
                index_checkpoint_interval_s=index_checkpoint_interval_s,
            )
        except BaseException:
            log.close()
            raise

    def _recover_head(self) -> HeadState:
        """The head state, after finishing a retention deletion or a slave's restart that a crash
        interrupted (the head state is always written first)."""
        head, log = self._head_file.read(), self._log
        if head is None:
            return HeadState.empty(log.min_offset)
        if head.min_offset == log.min_offset:
            return head
        if log.max_offset == log.min_offset:  # nothing to keep: the log restarts where the head is
            logger.warning("empty log at offset=%d restarted at its head offset=%d", log.min_offset, head.min_offset)
            log.reset(head.min_offset)
        elif head.min_offset > log.min_offset and head.min_offset in log.segment_starts:
            logger.warning("finishing the deletion of the segments before offset=%d", head.min_offset)
            log.delete_head(head.min_offset)
        else:
            raise CorruptLogError(
                f"the head state starts at offset={head.min_offset}, the commit log at {log.min_offset} and ends at "
                f"{log.max_offset}: segments are missing or the head state belongs to another log"
            )
        return head

    def _open_indexes(self) -> StoreIndexes:
        """The indexes from the index checkpoint and the log after it; a full rescan (one log
        line) when the checkpoint is missing, damaged or does not fit the log."""
        snapshot, why = self._index_files.load()
        log = self._log
        if snapshot is not None:
            why = ""
            if snapshot.history_bucket != log.segment_size:
                why = f"it was written with segment size {snapshot.history_bucket}, not {log.segment_size}"
            elif not max(log.min_offset, self._head.min_offset) <= snapshot.offset <= log.max_offset:
                why = f"its offset={snapshot.offset} is outside the log [{log.min_offset}, {log.max_offset}]"
            elif snapshot.dispatched > self._confirm:
                why = f"it dispatched up to {snapshot.dispatched}, beyond the confirm offset={self._confirm}"
            if not why:
                try:
                    indexes = StoreIndexes.from_snapshot(snapshot, max_producers=self._max_producers)
                    indexes.cut_head(self._head)
                    return indexes.replay(scan_infos(log, snapshot.offset), dispatch_up_to=self._confirm)
                except CorruptLogError as error:
                    why = f"the log after its offset={snapshot.offset} does not decode ({error})"
            self._index_files.invalidate()
        if log.max_offset > log.min_offset:
            logger.warning(
                "index checkpoint unusable: %s; rescanning the log [%d, %d)", why, log.min_offset, log.max_offset
            )
        return self._rebuild()

    def write_index_checkpoint(self) -> None:
        """Persist the indexes now, in this thread (index_files.py): the confirm offset first, so
        that the checkpoint never covers more than the persisted confirm offset. Refused while a
        background write (`start_index_checkpoint`) is outstanding."""
        job = self.start_index_checkpoint()
        if job is not None:
            job.run()
            self.complete_index_checkpoint(job)

    def set_index_checkpoint_runner(self, runner: Callable[[IndexCheckpointJob], None] | None) -> None:
        """Have periodic index checkpoints written by `runner` (None: inline, on the caller's
        thread): `set_confirm_offset` hands it each due job, which it must `run()` in another
        thread and then pass to `complete_index_checkpoint` on this one (the flusher does)."""
        self._index_runner = runner

    @property
    def index_checkpoint_running(self) -> bool:
        """A job from `start_index_checkpoint` is not completed yet."""
        return self._index_job is not None

    def start_index_checkpoint(self) -> IndexCheckpointJob | None:
        """An index checkpoint for another thread (None: the store is in memory). The cheap part
        runs here: the confirm checkpoint, and copying what the write needs (the entries
        dispatched since the last checkpoint; the producer table, captured copy on write). The job's
        `run()` writes the files and encodes the producers, touching no state of the store. Until
        `complete_index_checkpoint(job)`: no other checkpoint is written, retention waits, and
        an invalidation (a truncation below it, `seed`) makes the job's writes fail harmlessly."""
        if self._index_job is not None:
            raise StoreError("an index checkpoint is being written in the background: complete it first")
        self.flush_checkpoint()
        snapshot, producers = self._indexes.capture()
        self._last_index_write = self._clock()
        try:
            prepared = self._index_files.prepare(snapshot, producers, synced=self.flushed_offset)
        except OSError as error:  # its folders could not be made (a full disk): the next one retries
            logger.warning("index checkpoint not written (the previous one stays in use): %s", error)
            return None
        if prepared is None:
            return None
        self._index_job = IndexCheckpointJob(self._index_files, prepared)
        return self._index_job

    def complete_index_checkpoint(self, job: IndexCheckpointJob) -> None:
        """Account for a job that ran: counted unless an invalidation overtook it. A write that
        failed with OSError (a full disk) is logged, the previous checkpoint stays in use; any
        other error of the job is raised here."""
        if job is not self._index_job:
            raise StoreError("not the index checkpoint job in progress")
        self._index_job = None
        # the job's CPU is the broker's too: at most ~5 % of it, whatever a write costs
        self._index_wait = max(self._index_interval, INDEX_CHECKPOINT_COST_FACTOR * job.took)
        self._last_index_write = self._clock()
        if not job.ran:  # its runner stopped first
            return
        if isinstance(job.error, OSError):
            if self._index_files.current(job.prepared):
                logger.warning("index checkpoint not written (the previous one stays in use): %s", job.error)
            return
        if job.error is not None:
            raise job.error
        self._index_files.complete(job.prepared)

    def _rebuild(self) -> StoreIndexes:
        return StoreIndexes.rebuild(
            scan_infos(self._log, self._log.min_offset),
            dispatch_up_to=self._confirm,
            max_producers=self._max_producers,
            head=self._head,
            history_bucket=self._log.segment_size,
        )

    # -- ReplicatedLog: offsets, epochs, raw bytes
    @property
    def max_offset(self) -> int:
        return self._log.max_offset

    @property
    def min_offset(self) -> int:
        return self._log.min_offset

    @property
    def confirm_offset(self) -> int:
        return self._confirm

    @property
    def dispatched_offset(self) -> int:
        return self._indexes.dispatched_offset

    @property
    def flushed_offset(self) -> int:
        return self._log.max_offset - self._log.unflushed_bytes

    @property
    def ackable_offset(self) -> int:
        """The end of what this replica may acknowledge as stored, to a producer (master) or to
        the master (slave): `flushed_offset` under SYNC flush (on disk), `max_offset` under ASYNC
        (written to the page cache; the background flush follows)."""
        return self.flushed_offset if self.settings.flush is FlushMode.SYNC else self._log.max_offset

    @property
    def epochs(self) -> EpochCache:
        return self._epochs

    def append_epoch(self, entry: EpochEntry) -> bool:
        return self._epochs.append_entry(entry)

    def read_raw(self, offset: int, max_bytes: int) -> bytes:
        return self._log.read_recent(offset, max_bytes) or self._log.read(offset, max_bytes)

    def add_append_listener(self, listener: Callable[[int], None]) -> None:
        """`listener(max_offset)` after every append; it runs inline and must not raise."""
        self._listeners.append(listener)

    def _appended(self) -> None:
        for listener in self._listeners:
            listener(self._log.max_offset)

    def add_flush_listener(self, listener: Callable[[int], None]) -> None:
        """`listener(flushed_offset)` after every flush that made more of the log durable; it
        runs inline (on the thread completing the flush) and must not raise."""
        self._flush_listeners.append(listener)

    def remove_flush_listener(self, listener: Callable[[int], None]) -> None:
        """Forget a listener added by `add_flush_listener` (absent: nothing happens)."""
        if listener in self._flush_listeners:
            self._flush_listeners.remove(listener)

    def _notify_flushed(self, before: int) -> None:
        flushed = self.flushed_offset
        if flushed > before:
            for listener in tuple(self._flush_listeners):
                listener(flushed)

    # -- confirm offset
    def set_confirm_offset(self, offset: int) -> None:
        """Raise the commit point (clamped to [min_offset, max_offset]; a lower value is ignored,
        only `truncate` lowers it), dispatch what it newly covers, persist at most every 200 ms."""
        offset = min(max(offset, self._log.min_offset), self._log.max_offset)
        if offset <= self._confirm:
            return
        self._confirm = offset
        self._indexes.dispatch(offset)
        if self._clock() - self._last_persist >= CHECKPOINT_INTERVAL_S:
            if self._confirm_runner is None:
                self._checkpoint.write(offset)
            elif not self._checkpoint.in_flight:  # else the next one, 200 ms on
                self._confirm_runner(self._checkpoint.job(offset))
            self._last_persist = self._clock()
        if self._index_job is None and self._clock() - self._last_index_write >= self._index_wait:
            if self._index_runner is None:
                self.write_index_checkpoint()
            else:
                job = self.start_index_checkpoint()
                if job is not None:
                    self._index_runner(job)

    def flush_checkpoint(self) -> None:
        """Persist the confirm offset now, in this thread, if it is not the value on disk (waits for
        a background write in progress; voids the values handed to the thread before)."""
        self._checkpoint.write(self._confirm)
        self._last_persist = self._clock()

    def set_confirm_checkpoint_runner(
        self,
        runner: Callable[[Callable[[], None]], None] | None,
        lock: AbstractContextManager[object] | None = None,
    ) -> None:
        """Have the periodic confirm checkpoints (`set_confirm_offset`) written by `runner` in
        another thread, every file write holding `lock` (None: inline, on the caller's thread).
        The flusher sets this at `start()`; checkpoint.py says why a truncation stays safe."""
        self._confirm_runner = runner
        if lock is not None:
            self._checkpoint.use_lock(lock)

    # -- master: puts
    def put_messages(self, messages: Sequence[Message], *, now_ms: int) -> PutResult:
        """Append the new messages of a batch in one log append; duplicates of an idempotent
        producer's sequence are not stored again and answer with the original position."""
        records = put_plan.encode_messages(
            messages, now_ms=now_ms, max_body=self.settings.max_message_size, segment_size=self._log.segment_size
        )
        before = self._log.max_offset
        verdicts = put_plan.plan_duplicates(messages, self._indexes.producers)
        fresh = [i for i, verdict in enumerate(verdicts) if isinstance(verdict, put_plan.New)]
        placed = self._append([records[i] for i in fresh]) if fresh else []
        results: dict[int, Appended] = {}
        for index, (offset, size) in zip(fresh, placed, strict=True):
            m = messages[index]
            info = RecordInfo(offset, size, RecordKind.MESSAGE, m.topic, m.queue_id, m.producer_id, m.producer_seq)
            results[index] = self._indexes.append(info)
        appended: list[Appended] = []
        next_offset = self._log.max_offset if fresh or not messages else 0
        for index, verdict in enumerate(verdicts):
            if isinstance(verdict, put_plan.New):
                appended.append(results[index])
                continue
            original = results[verdict.index] if isinstance(verdict, put_plan.SameAs) else verdict
            appended.append(original._replace(duplicate=True))
            # an ack must cover the original too; a forgotten one is covered by everything so far
            end = original.commit_offset + original.size if original.commit_offset >= 0 else before
            next_offset = max(next_offset, end)
        if fresh:
            self._appended()
        return PutResult(tuple(appended), next_offset)

    def put_consumer_offset(self, *, group: str, topic: str, queue_id: int, offset: int, now_ms: int) -> PutResult:
        """Store a consumer group's progress in the log; visible once confirmed."""
        record = put_plan.encode_offset_commit(
            group=group, topic=topic, queue_id=queue_id, offset=offset, now_ms=now_ms
        )
        [(position, size)] = self._append([record])
        info = RecordInfo(
            offset=position,
            size=size,
            kind=RecordKind.CONSUMER_OFFSET,
            topic=topic,
            queue_id=queue_id,
            consumer_offset=ConsumerOffset(group=group, topic=topic, queue_id=queue_id, offset=offset),
        )
        appended = self._indexes.append(info)
        self._appended()
        return PutResult((appended,), position + size)

    def disk_full(self) -> str | None:
        """Why puts are refused for lack of disk space now, or None."""
        return self._disk.full()

    def _append(self, records: Sequence[bytes]) -> list[tuple[int, int]]:
        full = self._disk.refusal(sum(map(len, records)))
        if full is not None:
            raise DiskFullError(full)
        try:
            return self._log.append(records, encoded_here=True)  # put_plan encoded them just now
        except OSError as error:  # the log undid the partial write
            raise DiskFullError(f"disk full: the write failed and was undone: {error}") from error

    # -- slave: replicated appends and truncation
    def append_raw(self, offset: int, data: bytes) -> None:
        """Append whole records replicated from the master (see `SegmentedLog.append_raw`)."""
        rebase = bool(data) and self._log.max_offset == self._log.min_offset and offset != self._log.max_offset
        if rebase and offset > 0:
            # Queue offsets count from the log's start: from a partial log this replica would number
            # every queue differently from its master. A master sends its head state first (`seed`,
            # the HA HEAD frame); one that did not (an older version) gets this refusal.
            raise SeedRequiredError(
                f"this replica's log is empty and its master's log starts at offset {offset} (retention "
                "deleted its head) but no head state came first: queue offsets cannot be rebuilt from a "
                "partial log, so nothing was written; see 'A new replica after retention' in docs/broker.md"
            )
        if rebase:  # the head state first: a crash before the new data lands restarts the log there
            self._index_files.invalidate()
            previous, self._head = self._head, HeadState.empty(offset)
            self._head_file.write(self._head)
        try:
            infos = self._log.append_raw(offset, data)
        except OSError as error:
            raise DiskFullError(f"disk full: the replicated write failed and was undone: {error}") from error
        except BaseException:
            if rebase and self._log.min_offset != offset:
                self._head = previous
                self._head_file.write(previous)
            raise
        if not data:
            return
        if rebase:  # an empty log restarted at the master's first segment
            self._confirm = self._log.min_offset
            self._indexes = self._rebuild()
            self.flush_checkpoint()
        else:
            append = self._indexes.append
            for info in infos:  # what the log's validation read of each item: decoded once
                append(info)
        self._appended()

    def replica_start(self, *, from_last_segment: bool) -> int:
        """Where a replica starting from scratch copies from: the log's start, or with
        `from_last_segment` (RocketMQ's syncFromLastFile) the start of the last segment that is
        dispatched (a segment whose start the confirm offset has not reached yet is skipped)."""
        starts = [s for s in self._log.segment_starts if s <= self._indexes.dispatched_offset]
        return starts[-1] if from_last_segment and starts else self._log.min_offset

    def head_state_at(self, offset: int) -> HeadState:
        """The head state at `offset`: the log's start, or a later dispatched segment start."""
        if offset == self._head.min_offset:
            return self._head
        if offset not in self._log.segment_starts:
            raise ValueError(f"no head state at offset={offset}: not a segment start of this log")
        return self._indexes.head_state(offset)

    def seed(self, head: HeadState) -> None:
        """Restart this empty log at `head.min_offset` with its master's head state (a replica
        copying from scratch a log whose head was deleted): queue offsets, consumer offsets and
        producer sequences continue from it. Crash-safe: the head file is written first, and
        opening a store whose empty log starts elsewhere restarts the log at the head. The epoch
        entries are dropped (they describe none of the new log's bytes); the first frame brings
        the master's entry covering `head.min_offset`."""
        if self._log.max_offset != self._log.min_offset:
            raise StoreError(
                f"cannot seed a log holding [{self._log.min_offset}, {self._log.max_offset}): truncate it first"
            )
        if head.min_offset % self._log.segment_size:
            raise StoreError(
                f"the master's log starts at offset={head.min_offset}, not a multiple of this replica's "
                f"store.segment_size={self._log.segment_size}: every replica of a set needs the same segment size"
            )
        self._index_files.invalidate()
        self._head_file.write(head)
        self._step(STEP_SEED_HEAD_WRITTEN)
        self._log.reset(head.min_offset)
        self._step(STEP_SEED_RESET)
        self._head = head
        self._epochs.truncate_suffix_by_epoch(0)
        self._confirm = head.min_offset
        self.flush_checkpoint()
        self._indexes = self._rebuild()
        logger.info("log seeded at offset=%d with the master's head state", head.min_offset)

    def truncate(self, offset: int) -> None:
        """Cut the log crash-safely at `offset` (a record boundary), then the epochs; lower the
        confirm offset (persisted at once) and rebuild the indexes: from their own state at the
        dispatch watermark when the cut is at or above it (an unconfirmed tail: the cost is the
        undispatched tail), else from the index checkpoint if it is below the cut (deleted first
        when it is not), else by rescanning the log."""
        cut = offset < self._log.max_offset
        written = self._index_files.checkpoint_dispatched
        job = self._index_job
        if cut and (
            (written is not None and written > offset)
            # a background write may cover the cut, or race with loading the checkpoint below
            or (job is not None and (job.prepared.doc.dispatched > offset or offset < self.dispatched_offset))
        ):
            self._index_files.invalidate()
        self._log.truncate(offset)
        self._epochs.truncate_suffix_by_offset(offset)
        if self._confirm > offset:
            logger.warning("truncating at offset=%d below confirm offset=%d", offset, self._confirm)
            self._confirm = offset
            self.flush_checkpoint()
        if not cut:
            return
        if offset >= self._indexes.dispatched_offset:
            snapshot = self._indexes.snapshot()
            self._indexes = StoreIndexes.from_snapshot(snapshot, max_producers=self._max_producers).replay(
                scan_infos(self._log, snapshot.offset), dispatch_up_to=self._confirm
            )
        else:
            self._indexes = self._open_indexes()

    # -- consumers
    def get_messages(
        self, topic: str, queue_id: int, queue_offset: int, *, max_count: int, max_bytes: int
    ) -> list[StoredMessage]:
        """Visible messages of a queue from `queue_offset`: at most `max_count`, and at most
        `max_bytes` of records (but at least one message if any is visible)."""
        if max_count < 1 or max_bytes < 1:
            raise ValueError(f"max_count={max_count} and max_bytes={max_bytes} must be positive")
        found: list[StoredMessage] = []
        total = 0
        for entry in self._indexes.entries(topic, queue_id, queue_offset, max_count):
            if found and total + entry.size > max_bytes:
                break
            data = self._log.read(entry.commit_offset, entry.size)
            record = decode_record(data, 0, max_body=self._log.max_body)
            if not isinstance(record, DecodedRecord) or record.size != entry.size:
                raise CorruptLogError(f"commit log record at offset={entry.commit_offset} is damaged: {record}")
            total += entry.size
            found.append(
                StoredMessage(
                    topic=record.topic,
                    queue_id=record.queue_id,
                    queue_offset=entry.queue_offset,
                    commit_offset=entry.commit_offset,
                    size=entry.size,
                    body=record.body,
                    born_timestamp_ms=record.born_timestamp_ms,
                    store_timestamp_ms=record.store_timestamp_ms,
                    properties=record.properties,
                    producer_id=record.producer_id,
                    producer_seq=record.producer_seq,
                )
            )
        return found

    def queue_min_offset(self, topic: str, queue_id: int) -> int:
        return self._indexes.queue_min_offset(topic, queue_id)

    def queue_max_offset(self, topic: str, queue_id: int) -> int:
        """One past the last visible message's queue offset."""
        return self._indexes.queue_max_offset(topic, queue_id)

    def consumer_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The group's committed offset, moved up to the queue's min offset if retention deleted
        the messages below it (None: never committed)."""
        offset = self._indexes.consumer_offset(group, topic, queue_id)
        return None if offset is None else max(offset, self._indexes.queue_min_offset(topic, queue_id))

    def consumer_offsets(self) -> list[tuple[str, str, int, int]]:
        """Every committed group offset, `(group, topic, queue_id, offset)` sorted, each as `consumer_offset`
        answers it (moved up to the queue's min offset if retention deleted the messages below it)."""
        return [
            (group, topic, queue_id, max(offset, self._indexes.queue_min_offset(topic, queue_id)))
            for group, topic, queue_id, offset in self._indexes.consumer_offsets()
        ]

    # -- retention
    def apply_retention(self, now: float | None = None) -> int:
        """Delete the head segments the settings' retention allows (retention.py); returns how
        many. `now`: wall-clock seconds (time.time), compared with segment mtimes."""
        policy = retention.RetentionPolicy(
            max_age_s=self.settings.retention_ms / 1000 if self.settings.retention_ms is not None else None,
            max_bytes=self.settings.retention_bytes,
        )
        if not policy.enabled or self._index_job is not None:  # a checkpoint must precede the deletion
            return 0
        new_min = retention.new_min_offset(
            self._log.segment_starts,
            self._log.segment_mtimes(),
            segment_size=self._log.segment_size,
            max_offset=self._log.max_offset,
            safe_offset=min(self._confirm, self.flushed_offset, self._indexes.dispatched_offset),
            now=time.time() if now is None else now,
            policy=policy,
        )
        return self.delete_head(new_min) if new_min is not None else 0

    def delete_head(self, offset: int) -> int:
        """Delete the segments before `offset` (a segment start at or below the confirm offset),
        crash-safely (module docstring); returns how many."""
        if offset <= self._log.min_offset:
            return 0
        if offset > min(self._confirm, self.flushed_offset) or offset not in self._log.segment_starts:
            raise ValueError(
                f"cannot delete the log before offset={offset}: not a segment start at or below the confirm "
                f"offset={self._confirm} and the flushed offset={self.flushed_offset}"
            )
        self.write_index_checkpoint()  # at or after `offset`: opening never replays deleted segments
        head = self._indexes.head_state(offset)
        self._head_file.write(head)
        self._step(STEP_HEAD_WRITTEN)
        deleted = self._log.delete_head(offset)
        self._head = head
        self._indexes.cut_head(head)
        self._epochs.truncate_prefix_by_offset(offset)
        self._step(STEP_EPOCHS_CUT)
        logger.info("retention deleted %d segment(s); the log now starts at offset=%d", deleted, offset)
        return deleted

    def topics(self) -> dict[str, list[int]]:
        """Topic -> queue ids holding visible messages."""
        return self._indexes.topics()

    # -- durability and lifecycle
    def prepare_flush(self) -> tuple[FlushTicket, Callable[[], None]]:
        """A flush for a worker thread (group commit); see `SegmentedLog.prepare_flush`."""
        return self._log.prepare_flush()

    def complete_flush(self, ticket: FlushTicket) -> bool:
        """Count the ticket's bytes as flushed (unless the log was cut since); flush listeners
        run if the flushed offset moved."""
        before = self.flushed_offset
        done = self._log.complete_flush(ticket)
        self._notify_flushed(before)
        return done

    def flush(self) -> None:
        """fsync the log and persist the confirm offset, in this thread."""
        before = self.flushed_offset
        self._log.flush()
        self.flush_checkpoint()
        self._notify_flushed(before)

    def close(self) -> None:
        try:
            self.flush()
            if self._index_job is None:
                self.write_index_checkpoint()
            else:  # its runner did not finish it (a hung disk): the previous checkpoint stays in use
                logger.warning("closing with an index checkpoint still being written; not writing another")
        finally:
            self._log.close()

    def status(self) -> dict[str, Any]:
        return {
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
            "confirmOffset": self.confirm_offset,
            "dispatchedOffset": self.dispatched_offset,
            "flushedOffset": self.flushed_offset,
            "diskFull": self._disk.full(),
            "topics": len(self.topics()),
            "epochs": [
                {"epoch": e.epoch, "startOffset": e.start_offset, "endOffset": e.end_offset}
                for e in self._epochs.entries()
            ],
        }
