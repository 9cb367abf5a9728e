"""Opening a store costs the tail since the last index checkpoint, not the log's size (#18): mapped
consume-queue columns read correctly across their mapped end, through appends, checkpoints,
retention, reclaim and truncation; the commit log's recovery trusts only the checkpoint's fsynced
prefix (a torn tail after it is still cut, a damaged checkpoint means a full check, unflushed bytes
are never trusted); a checkpoint written in the background survives a crash at every step."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from brokergroup.bench import store_restart
from brokergroup.broker.errors import CorruptLogError
from brokergroup.broker.settings import FlushMode, StoreSettings
from brokergroup.broker.store import index_files, record, segments
from brokergroup.broker.store.flusher import GroupCommitFlusher
from brokergroup.broker.store.index_checkpoint import CheckpointDoc, decode_checkpoint_doc, encode_checkpoint_doc
from brokergroup.broker.store.index_files import (
    CHECKPOINT_FILE,
    STEP_INDEX_CHECKPOINT_WRITTEN,
    STEP_INDEX_OLD_FILES_DELETED,
    STEP_INDEX_QUEUES_WRITTEN,
)
from brokergroup.broker.store.indexes import HeadState, StoreIndexes
from brokergroup.broker.store.message_store import (
    COMMITLOG_DIR,
    INDEX_DIR,
    IndexCheckpointJob,
    MessageStore,
    scan_infos,
)
from brokergroup.broker.store.record import RecordInfo, RecordKind
from tests.unit.broker.store_factories import FakeClock, msg

SEGMENT = 4096
SETTINGS = StoreSettings(segment_size=SEGMENT, max_message_size=1024, retention_bytes=3 * SEGMENT)
BIG_SEGMENT = StoreSettings(segment_size=1 << 20, max_message_size=1024)


class Crash(Exception):
    """Stands for kill -9 at this step."""


def index_state(indexes: StoreIndexes) -> dict[str, object]:
    return {
        "queues": {k: (q.base, list(q.offsets), list(q.sizes)) for k, q in indexes._queues.items()},
        "groups": dict(indexes._group_offsets),
        "producers": [(i, p.last_seq, list(p.recent.items())) for i, p in indexes.producers._producers.items()],
        "dispatched": indexes.dispatched_offset,
    }


def rescanned(store: MessageStore) -> dict[str, object]:
    return index_state(
        StoreIndexes.rebuild(
            scan_infos(store._log, store.min_offset),
            dispatch_up_to=store.confirm_offset,
            head=store._head,
            history_bucket=store._log.segment_size,
        )
    )


def bodies(store: MessageStore, queue_id: int) -> list[tuple[int, bytes]]:
    """(queue offset, body) of every visible message of the queue, read 7 at a time (reads cross
    the mapped end of the columns at any point)."""
    found: list[tuple[int, bytes]] = []
    offset = store.queue_min_offset("orders", queue_id)
    while offset < store.queue_max_offset("orders", queue_id):
        batch = store.get_messages("orders", queue_id, offset, max_count=7, max_bytes=10**6)
        found += [(m.queue_offset, m.body) for m in batch]
        offset = batch[-1].queue_offset + 1
    return found


def put(store: MessageStore, start: int, count: int, *, confirm: bool = True) -> None:
    for i in range(start, start + count):
        store.put_messages([msg(b"%06d" % i + b"x" * 150, queue_id=i % 3, pid=7, seq=i)], now_ms=1)
    if confirm:
        store.set_confirm_offset(store.max_offset)
    store.flush()


def expected_bodies(numbers: range, queue_id: int) -> list[bytes]:
    return [b"%06d" % i + b"x" * 150 for i in numbers if i % 3 == queue_id]


@pytest.fixture
def mapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Map every column however short (the threshold keeps small queues in memory)."""
    monkeypatch.setattr(index_files, "MAP_MIN_ENTRIES", 1)


def open_store(directory: Path, settings: StoreSettings = SETTINGS, **kwargs: Any) -> MessageStore:
    return MessageStore.open(directory, settings, clock=FakeClock(), **kwargs)


# -- mapped consume queues ----------------------------------------------------------------------


@pytest.mark.usefixtures("mapped")
def test_mapped_queues_read_across_their_mapped_end_through_checkpoints_retention_and_truncation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_files, "RECLAIM_ENTRIES", 1)
    with closing(open_store(tmp_path)) as store:
        put(store, 0, 60)
    store = open_store(tmp_path)
    try:
        queue = store._indexes._queues[("orders", 0)]
        assert (queue.offsets.mapped, queue.sizes.mapped) == (20, 20)  # mapped, nothing copied
        put(store, 60, 30)  # appended after the mapped end
        assert [b for _, b in bodies(store, 0)] == expected_bodies(range(90), 0)
        assert [o for o, _ in bodies(store, 1)] == list(range(30))
        store.write_index_checkpoint()  # appends to the mapped files
        cut = store.max_offset
        put(store, 90, 9)
        assert store.apply_retention() >= 1  # drops entries of the mapped head; the files are rewritten
        low = store.queue_min_offset("orders", 0)
        assert low > 0
        assert [b for _, b in bodies(store, 0)] == expected_bodies(range(99), 0)[low:]
        assert index_state(store._indexes) == rescanned(store)
        store.truncate(cut)  # below the dispatch watermark and the checkpoint written by retention
        assert [b for _, b in bodies(store, 2)] == expected_bodies(range(90), 2)[store.queue_min_offset("orders", 2) :]
        assert index_state(store._indexes) == rescanned(store)
        put(store, 90, 12)
        store.write_index_checkpoint()  # the queue files are written from scratch (not cut while mapped)
        expected = {q: bodies(store, q) for q in range(3)}
    finally:
        store.close()
    with closing(open_store(tmp_path)) as reopened:
        assert reopened._indexes._queues[("orders", 1)].offsets.mapped > 0
        assert {q: bodies(reopened, q) for q in range(3)} == expected
        assert index_state(reopened._indexes) == rescanned(reopened)


@pytest.mark.usefixtures("mapped")
def test_a_queue_file_shorter_than_its_checkpoint_falls_back_to_a_rescan(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with closing(open_store(tmp_path)) as store:
        put(store, 0, 30)
    victim = next((tmp_path / INDEX_DIR / "cq").glob("*.offsets"))
    victim.write_bytes(victim.read_bytes()[:-8])
    with caplog.at_level(logging.WARNING), closing(open_store(tmp_path)) as reopened:
        assert index_state(reopened._indexes) == rescanned(reopened)
    assert any("the checkpoint needs" in r.getMessage() for r in caplog.records)


# -- the commit log trusts the checkpoint's fsynced prefix ----------------------------------------


@pytest.fixture
def scanned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many items the commit log's recovery verifies, per open."""
    counts: list[int] = []
    opening = [False]
    real = record.scan_record

    def counting(*args: Any, **kwargs: Any) -> Any:
        counts[-1] += opening[0]
        return real(*args, **kwargs)

    real_open = segments.CommitLog._open

    def recording_open(self: segments.CommitLog, **kwargs: Any) -> None:
        counts.append(0)
        opening[0] = True
        try:
            real_open(self, **kwargs)
        finally:
            opening[0] = False

    monkeypatch.setattr(segments, "scan_record", counting)
    monkeypatch.setattr(segments.CommitLog, "_open", recording_open)
    yield counts


def last_segment(directory: Path) -> Path:
    return sorted((directory / COMMITLOG_DIR).iterdir())[-1]


def test_the_log_recovery_verifies_only_what_follows_the_checkpoints_synced_offset(
    tmp_path: Path, scanned: list[int]
) -> None:
    with closing(open_store(tmp_path, BIG_SEGMENT)) as store:
        put(store, 0, 200)
    store = open_store(tmp_path, BIG_SEGMENT)
    assert scanned[-1] == 0  # closed cleanly: the checkpoint covers the whole log
    put(store, 200, 5)
    store._log.close()  # kill -9 after the flush: no checkpoint covers these 5
    with closing(open_store(tmp_path, BIG_SEGMENT)) as store:
        assert scanned[-1] == 5
        assert [b for _, b in bodies(store, 0)] == expected_bodies(range(205), 0)
    (tmp_path / INDEX_DIR / CHECKPOINT_FILE).unlink()
    with closing(open_store(tmp_path, BIG_SEGMENT)) as store:
        assert scanned[-1] == 205  # no checkpoint: the whole last segment


def test_a_torn_tail_after_the_checkpoint_is_cut(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with closing(open_store(tmp_path, BIG_SEGMENT)) as store:
        put(store, 0, 50)
        end = store.max_offset
    store = open_store(tmp_path, BIG_SEGMENT)
    put(store, 50, 3)
    whole = store.max_offset
    record = store.read_raw(end, 10**6)[: whole - end]
    store._log.close()  # kill -9 ...
    with last_segment(tmp_path).open("r+b") as file:  # ... while a fourth record was half written
        file.seek(whole)
        file.write(record[: len(record) // 6])
    with caplog.at_level(logging.WARNING), closing(open_store(tmp_path, BIG_SEGMENT)) as store:
        assert store.max_offset == whole
        assert [b for _, b in bodies(store, 2)] == expected_bodies(range(53), 2)
    assert any("damaged tail" in r.getMessage() for r in caplog.records)


def test_a_damaged_checkpoint_means_the_whole_last_segment_is_verified(tmp_path: Path) -> None:
    with closing(open_store(tmp_path, BIG_SEGMENT)) as store:
        put(store, 0, 50)
    segment = last_segment(tmp_path)
    data = bytearray(segment.read_bytes())
    data[2000] ^= 0xFF  # bit rot inside the fsynced prefix, followed by valid records
    segment.write_bytes(bytes(data))
    with closing(open_store(tmp_path, BIG_SEGMENT)):
        pass  # trusted: the prefix was validated when appended and fsynced (reads check each CRC)
    checkpoint = tmp_path / INDEX_DIR / CHECKPOINT_FILE
    damaged = bytearray(checkpoint.read_bytes())
    damaged[-5] ^= 0x01
    checkpoint.write_bytes(bytes(damaged))
    with pytest.raises(CorruptLogError, match="damaged item at offset"):
        open_store(tmp_path, BIG_SEGMENT)


def test_a_checkpoint_never_trusts_bytes_that_were_not_fsynced(tmp_path: Path) -> None:
    settings = StoreSettings(segment_size=1 << 20, max_message_size=1024, flush=FlushMode.ASYNC)
    store = MessageStore.open(tmp_path, settings, clock=FakeClock())
    put(store, 0, 20)  # flushed
    synced = store.flushed_offset
    for i in range(20, 30):
        store.put_messages([msg(b"%06d" % i, queue_id=i % 3)], now_ms=1)
    store.set_confirm_offset(store.max_offset)  # ASYNC: confirmed beyond the flushed offset
    assert store.flushed_offset == synced < store.confirm_offset
    store.write_index_checkpoint()
    doc = decode_checkpoint_doc((tmp_path / INDEX_DIR / CHECKPOINT_FILE).read_bytes())
    assert doc.offset == store.max_offset
    assert doc.synced == synced
    store.close()


# -- a background checkpoint write: kill -9 at every step ------------------------------------------


def crash_at(step: str) -> Callable[[str], None]:
    def hook(name: str) -> None:
        if name == step:
            raise Crash(step)

    return hook


def run_in_thread(job: IndexCheckpointJob) -> None:
    worker = threading.Thread(target=job.run, name="index-checkpoint-test")
    worker.start()
    worker.join()


@pytest.mark.parametrize(
    "step", [STEP_INDEX_QUEUES_WRITTEN, STEP_INDEX_CHECKPOINT_WRITTEN, STEP_INDEX_OLD_FILES_DELETED]
)
@pytest.mark.usefixtures("mapped")
def test_a_crash_at_any_step_of_a_background_checkpoint_opens_equal_to_a_rescan(tmp_path: Path, step: str) -> None:
    with closing(open_store(tmp_path)) as store:
        put(store, 0, 40)
    clock = FakeClock()
    store = MessageStore.open(tmp_path, SETTINGS, clock=clock, step_hook=crash_at(step))
    jobs: list[IndexCheckpointJob] = []
    store.set_index_checkpoint_runner(jobs.append)
    put(store, 40, 20, confirm=False)
    clock.now = 60.0
    store.set_confirm_offset(store.max_offset)  # hands the runner a job
    [job] = jobs
    put(store, 60, 10)  # the store goes on before the job runs
    run_in_thread(job)
    with pytest.raises(Crash):
        store.complete_index_checkpoint(job)
    store._log.close()  # kill -9: nothing more runs
    with closing(open_store(tmp_path)) as reopened:
        assert index_state(reopened._indexes) == rescanned(reopened)
        assert [b for _, b in bodies(reopened, 1)] == expected_bodies(range(70), 1)


@pytest.mark.usefixtures("mapped")
def test_a_truncation_overtaking_a_background_checkpoint_makes_its_write_fail_harmlessly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with closing(open_store(tmp_path)) as store:
        put(store, 0, 40)
    store = open_store(tmp_path)
    cut = store.max_offset
    put(store, 40, 20)
    job = store.start_index_checkpoint()
    assert job is not None and job.prepared.doc.dispatched > cut
    store.truncate(cut)  # below what the job covers: the index folder is renamed away first
    assert not (tmp_path / INDEX_DIR).exists()
    run_in_thread(job)  # the job's files cannot be written any more (no folder is created)
    assert isinstance(job.error, FileNotFoundError)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        store.complete_index_checkpoint(job)  # not counted, not worth a warning
    assert not caplog.records
    assert not (tmp_path / INDEX_DIR / CHECKPOINT_FILE).exists()
    put(store, 40, 5)
    store._log.close()  # kill -9
    with closing(open_store(tmp_path)) as reopened:
        assert index_state(reopened._indexes) == rescanned(reopened)
        assert [b for _, b in bodies(reopened, 0)] == expected_bodies(range(45), 0)


def test_the_flusher_writes_periodic_checkpoints_in_its_index_thread(tmp_path: Path) -> None:
    clock = FakeClock()
    store = MessageStore.open(tmp_path, SETTINGS, clock=clock, index_checkpoint_interval_s=5.0)
    threads: list[str] = []
    real_run = IndexCheckpointJob.run

    def recording_run(job: IndexCheckpointJob) -> None:
        threads.append(threading.current_thread().name)
        real_run(job)

    async def scenario() -> None:
        flusher = GroupCommitFlusher(store, FlushMode.SYNC, interval_ms=10, timeout_ms=10_000)
        flusher.start()
        try:
            put(store, 0, 30, confirm=False)
            clock.now = 10.0
            store.set_confirm_offset(store.max_offset)
            deadline = time.monotonic() + 30
            while store.index_checkpoint_running or not threads:
                assert time.monotonic() < deadline, "the background checkpoint did not complete"
                await asyncio.sleep(0.01)
        finally:
            await flusher.stop()

    with mock.patch.object(IndexCheckpointJob, "run", recording_run):
        asyncio.run(scenario())
    assert threads == ["index-checkpoint"]
    doc = decode_checkpoint_doc((tmp_path / INDEX_DIR / CHECKPOINT_FILE).read_bytes())
    assert doc.dispatched == store.confirm_offset
    store._log.close()  # kill -9: the background checkpoint is what opening uses
    with closing(open_store(tmp_path)) as reopened:
        assert index_state(reopened._indexes) == rescanned(reopened)


# -- the restart benchmark's fast fill builds the store its puts build ------------------------------


@pytest.mark.parametrize("count", [1, 25, 50, 333])
def test_the_benchmarks_segment_fill_builds_the_store_its_puts_build(tmp_path: Path, count: int) -> None:
    settings = StoreSettings(segment_size=4096, max_message_size=1024)  # a segment holds 25 records
    stores = {"puts": store_restart.fill, "segments": store_restart.fill_segments}
    for name, fill in stores.items():
        with closing(MessageStore.open(tmp_path / name, settings)) as store:
            fill(store, count)

    def files(name: str) -> dict[str, bytes]:
        root = tmp_path / name
        return {
            str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != CHECKPOINT_FILE
        }

    assert files("puts") == files("segments")
    docs = [decode_checkpoint_doc((tmp_path / n / INDEX_DIR / CHECKPOINT_FILE).read_bytes()) for n in stores]
    assert docs[0] == docs[1]
    states = []
    for name in stores:
        with closing(MessageStore.open(tmp_path / name, settings)) as reopened:
            states.append(index_state(reopened._indexes))
            assert index_state(reopened._indexes) == rescanned(reopened)
    assert states[0] == states[1]


def producer_record(seq: int) -> RecordInfo:
    """Producer 1's message `seq` in queue t/0, 10 bytes at offset 10 x seq."""
    return RecordInfo(
        offset=seq * 10,
        size=10,
        kind=RecordKind.MESSAGE,
        topic="t",
        queue_id=0,
        producer_id=1,
        producer_seq=seq,
    )


def test_a_producer_capture_never_changes_after_it_was_taken() -> None:
    indexes = StoreIndexes(seq_window=4)
    for seq in range(6):
        indexes.append(producer_record(seq))
    indexes.dispatch(60)
    _, capture = indexes.capture()
    before = capture.states()
    assert [s.recent for s in before] == [tuple((seq, seq * 10, 10, seq) for seq in range(2, 6))]
    for seq in range(6, 9):  # window 4: the table drops 2, 3, 4 from its own copy
        indexes.append(producer_record(seq))
    indexes.producers.forget_before(75)
    assert capture.states() == before  # copy on write: the capture's mappings are untouched
    assert list(indexes.producers._producers[1].recent) == [8]


def test_producer_rows_encode_exactly_the_snapshots_producers() -> None:
    head = HeadState(0, {}, {}, {41: 7, 42: 3})  # producers known only by their last sequence
    indexes = StoreIndexes(seq_window=3, head=head)
    for i in range(12):
        pid = 40 + i % 3
        info = RecordInfo(
            offset=i * 10, size=10, kind=RecordKind.MESSAGE, topic="t", queue_id=i % 2, producer_id=pid, producer_seq=i
        )
        indexes.append(info)
    indexes.dispatch(75)  # the snapshot's offset: records from 80 on are left out
    snapshot, capture = indexes.capture()
    doc = CheckpointDoc(
        offset=snapshot.offset,
        dispatched=snapshot.dispatched,
        history_bucket=1,
        queues={},
        group_offsets={},
        group_history={},
        producers=capture.states(),
    )
    assert encode_checkpoint_doc(replace(doc, producers=()), capture.rows()) == encode_checkpoint_doc(doc)
    assert decode_checkpoint_doc(encode_checkpoint_doc(replace(doc, producers=()), capture.rows())) == doc
