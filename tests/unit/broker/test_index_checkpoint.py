"""Persisted indexes (#18 item 2): the checkpoint's encoding, recovery from a checkpoint equal to a full
rescan (random puts, consumer offsets, truncations, retention cuts, crashes and reopens), a kill -9 at
every step of a checkpoint write, and a damaged checkpoint falling back to the rescan."""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokergroup.broker.settings import StoreSettings
from brokergroup.broker.store import index_files, message_store
from brokergroup.broker.store.index_checkpoint import (
    CheckpointDoc,
    QueueFileState,
    decode_checkpoint_doc,
    encode_checkpoint_doc,
)
from brokergroup.broker.store.index_files import (
    CHECKPOINT_FILE,
    STEP_INDEX_CHECKPOINT_WRITTEN,
    STEP_INDEX_OLD_FILES_DELETED,
    STEP_INDEX_QUEUES_WRITTEN,
)
from brokergroup.broker.store.indexes import ProducerState, StoreIndexes
from brokergroup.broker.store.message_store import INDEX_DIR, MessageStore, scan_infos
from tests.unit.broker.store_factories import FakeClock, msg

SEGMENT = 4096
SETTINGS = StoreSettings(segment_size=SEGMENT, max_message_size=1024)


class Crash(Exception):
    """Stands for kill -9 at this step."""


def crash_at(step: str) -> Callable[[str], None]:
    def hook(name: str) -> None:
        if name == step:
            raise Crash(step)

    return hook


def open_store(directory: Path, **kwargs: Any) -> MessageStore:
    return MessageStore.open(directory, SETTINGS, clock=FakeClock(), **kwargs)


def index_state(indexes: StoreIndexes) -> dict[str, object]:
    """Everything the indexes hold, comparable."""
    return {
        "queues": {k: (q.base, list(q.offsets), list(q.sizes)) for k, q in indexes._queues.items()},
        "next": {k: v for k, v in indexes._next_queue_offset.items() if v},
        "groups": dict(indexes._group_offsets),
        "history": {k: list(v) for k, v in indexes._group_history.items() if v},
        "producers": [(i, p.last_seq, list(p.recent.items())) for i, p in indexes.producers._producers.items()],
        "dispatched": indexes.dispatched_offset,
        "pending": [(info.offset, queue_offset) for info, queue_offset in indexes._pending],
    }


def rescanned(store: MessageStore) -> dict[str, object]:
    """The indexes a full rescan of the store's log builds."""
    return index_state(
        StoreIndexes.rebuild(
            scan_infos(store._log, store.min_offset),
            dispatch_up_to=store.confirm_offset,
            head=store._head,
            history_bucket=SEGMENT,
        )
    )


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The offsets the store's log scans start from."""
    starts: list[int] = []
    real = message_store.scan_infos

    def recording(log: Any, start: int) -> Any:
        starts.append(start)
        return real(log, start)

    monkeypatch.setattr(message_store, "scan_infos", recording)
    yield starts


def fill(store: MessageStore, count: int, *, start: int = 0, confirm: bool = True) -> None:
    for i in range(start, start + count):
        store.put_messages([msg(b"x" * 200 + b"%06d" % i, queue_id=i % 3, pid=7 + i % 2, seq=i)], now_ms=1)
        if i % 10 == 9:
            store.put_consumer_offset(group="g1", topic="orders", queue_id=i % 3, offset=i // 3, now_ms=1)
    if confirm:
        store.set_confirm_offset(store.max_offset)
    store.flush()


# -- encoding ---------------------------------------------------------------------------------------


def sample_doc() -> CheckpointDoc:
    return CheckpointDoc(
        offset=4096,
        dispatched=4100,
        history_bucket=SEGMENT,
        queues={("orders", 0): QueueFileState(3, 1, 10), ("t\u00e9", 2): QueueFileState(0, 0, 0)},
        group_offsets={("g", "orders", 0): 5},
        group_history={("g", "orders", 0): [(-1, 2), (4000, 5)]},
        producers=(ProducerState(7, 12, ((11, 100, 50, 3), (12, 150, 50, -1))), ProducerState(9, 4, ())),
    )


def test_a_checkpoint_round_trips() -> None:
    assert decode_checkpoint_doc(encode_checkpoint_doc(sample_doc())) == sample_doc()


def _resign(line: bytes) -> bytes:
    import zlib

    return b"%d\n" % zlib.crc32(line) + line


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (lambda d: d[:-1], "expected two lines"),
        (lambda d: d.replace(b'"offset":4096', b'"offset":4097'), "crc32 mismatch"),
        (lambda d: _resign(b"[1]\n"), "not an object"),
        (lambda d: _resign(b"{nope\n"), "does not parse"),
        (lambda d: _resign(d.split(b"\n")[1].replace(b'"version":1', b'"version":2') + b"\n"), "version 2 is not 1"),
        (lambda d: _resign(d.split(b"\n")[1].replace(b'"dispatched":4100', b'"dispatched":1') + b"\n"), "below offset"),
        (lambda d: _resign(d.split(b"\n")[1].replace(b',"groups"', b',"x"') + b"\n"), "has no 'groups'"),
        (
            lambda d: _resign(d.split(b"\n")[1].replace(b'["orders",0,3,1,10]', b'["orders",0,30,1,10]') + b"\n"),
            "base=30 is outside",
        ),
        (
            lambda d: _resign(d.split(b"\n")[1].replace(b'["orders",0,3,1,10]', b'["orders",0,3,1]') + b"\n"),
            "queues\\[0\\] must be a list of 5",
        ),
        (
            lambda d: _resign(d.split(b"\n")[1].replace(b'["orders",0,3,1,10]', b"[1,0,3,1,10]") + b"\n"),
            "queue topic must be a string",
        ),
        (
            lambda d: _resign(d.split(b"\n")[1].replace(b"[11,100,50,3]", b"[11,-100,50,3]") + b"\n"),
            "commitOffset must be",
        ),
        (
            lambda d: _resign(d.split(b"\n")[1].replace(b'"historyBucket":4096', b'"historyBucket":true') + b"\n"),
            "historyBucket must be",
        ),
    ],
)
def test_bad_checkpoints_are_refused_naming_the_problem(mutate: Callable[[bytes], bytes], error: str) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        decode_checkpoint_doc(mutate(encode_checkpoint_doc(sample_doc())))


# -- open replays only the tail ---------------------------------------------------------------------


def test_a_reopened_store_replays_only_the_log_after_its_checkpoint(tmp_path: Path, scans: list[int]) -> None:
    store = open_store(tmp_path)
    fill(store, 60)
    store.write_index_checkpoint()
    checkpointed = store.max_offset
    fill(store, 25, start=60)
    expected = index_state(store._indexes)
    # no close: a kill -9 after the checkpoint; the 25 later messages are replayed from the log
    scans.clear()
    with closing(open_store(tmp_path)) as reopened:
        assert scans == [checkpointed]
        assert index_state(reopened._indexes) == expected == rescanned(reopened)
        end = reopened.max_offset
    scans.clear()
    with closing(open_store(tmp_path)) as again:  # a clean close wrote a checkpoint at the end
        assert scans == [end]
        assert index_state(again._indexes) == expected


def test_a_truncation_of_an_unconfirmed_tail_replays_only_that_tail(tmp_path: Path, scans: list[int]) -> None:
    with closing(open_store(tmp_path)) as store:
        fill(store, 60)
        cut = store.max_offset
        fill(store, 20, start=60, confirm=False)
        scans.clear()
        store.truncate(cut)
        assert scans == [cut]
        assert store.max_offset == cut
        assert index_state(store._indexes) == rescanned(store)
        fill(store, 5, start=200)  # the next queue offsets reuse the cut ones
        assert store.get_messages("orders", 0, 20, max_count=1, max_bytes=10**6)[0].body.endswith(b"000201")


def test_a_truncation_below_the_checkpoint_deletes_it_before_cutting_the_log(tmp_path: Path) -> None:
    with closing(open_store(tmp_path)) as store:
        fill(store, 30)
        cut = store.max_offset
        fill(store, 30, start=30)
        store.write_index_checkpoint()
        store.truncate(cut)
        assert not (tmp_path / INDEX_DIR / CHECKPOINT_FILE).exists()
        assert index_state(store._indexes) == rescanned(store)
        fill(store, 10, start=500)
        expected = index_state(store._indexes)
    with closing(open_store(tmp_path)) as reopened:
        assert index_state(reopened._indexes) == expected == rescanned(reopened)


# -- damaged or missing: one log line and a full rescan ----------------------------------------------


def damage_checkpoint(directory: Path) -> None:
    path = directory / INDEX_DIR / CHECKPOINT_FILE
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x01
    path.write_bytes(bytes(data))


def drop_a_queue_file(directory: Path) -> None:
    next(iter(sorted((directory / INDEX_DIR / "cq").iterdir()))).unlink()


def delete_checkpoint(directory: Path) -> None:
    (directory / INDEX_DIR / CHECKPOINT_FILE).unlink()


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (damage_checkpoint, "crc32 mismatch"),
        (drop_a_queue_file, "damaged or incomplete"),
        (delete_checkpoint, "does not exist"),
    ],
)
def test_a_damaged_or_missing_checkpoint_falls_back_to_a_rescan_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: Callable[[Path], None], why: str
) -> None:
    with closing(open_store(tmp_path)) as store:
        fill(store, 50)
        expected = index_state(store._indexes)
    damage(tmp_path)
    with caplog.at_level(logging.WARNING, logger=message_store.__name__), closing(open_store(tmp_path)) as reopened:
        assert index_state(reopened._indexes) == expected
    lines = [r.getMessage() for r in caplog.records if r.name == message_store.__name__]
    assert len(lines) == 1 and why in lines[0] and "rescanning the log" in lines[0], lines
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=message_store.__name__), closing(open_store(tmp_path)) as healed:
        assert index_state(healed._indexes) == expected  # the close wrote a good checkpoint again
    assert not [r for r in caplog.records if r.name == message_store.__name__]


def test_a_checkpoint_beyond_the_log_is_not_used(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """As after a power loss that dropped the log's unflushed tail but not the checkpoint."""
    short, long = tmp_path / "short", tmp_path / "long"
    for directory, count in ((short, 30), (long, 50)):
        with closing(open_store(directory)) as store:
            fill(store, count)
    with closing(open_store(short)) as store:
        expected = index_state(store._indexes)
    shutil.rmtree(short / INDEX_DIR)
    shutil.copytree(long / INDEX_DIR, short / INDEX_DIR)
    with caplog.at_level(logging.WARNING, logger=message_store.__name__), closing(open_store(short)) as reopened:
        assert index_state(reopened._indexes) == expected
    assert any("is outside the log" in r.getMessage() for r in caplog.records)


# -- kill -9 at every step of a checkpoint write -------------------------------------------------------


@pytest.mark.parametrize(
    "step", [STEP_INDEX_QUEUES_WRITTEN, STEP_INDEX_CHECKPOINT_WRITTEN, STEP_INDEX_OLD_FILES_DELETED]
)
@pytest.mark.parametrize("reclaim", [False, True], ids=["append", "rewrite-after-retention"])
def test_a_crash_at_any_step_of_a_checkpoint_write_opens_equal_to_a_rescan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, reclaim: bool
) -> None:
    monkeypatch.setattr(index_files, "RECLAIM_ENTRIES", 1)
    settings = StoreSettings(segment_size=SEGMENT, max_message_size=1024, retention_bytes=3 * SEGMENT)
    with closing(MessageStore.open(tmp_path, settings, clock=FakeClock())) as store:
        fill(store, 60)
    store = MessageStore.open(tmp_path, settings, clock=FakeClock(), step_hook=crash_at(step))
    fill(store, 40, start=60)
    with pytest.raises(Crash):
        if reclaim:
            assert store.apply_retention() == 0  # the checkpoint before the deletion crashes
        else:
            store.write_index_checkpoint()
    # kill -9: nothing more runs
    with closing(MessageStore.open(tmp_path, settings, clock=FakeClock())) as reopened:
        assert index_state(reopened._indexes) == rescanned(reopened)
        if reclaim:
            assert reopened.apply_retention() >= 1
            assert index_state(reopened._indexes) == rescanned(reopened)
        expected = index_state(reopened._indexes)
    with closing(MessageStore.open(tmp_path, settings, clock=FakeClock())) as again:
        assert index_state(again._indexes) == expected
    if reclaim:  # the queue files were rewritten from their new bases: the old ones are gone
        assert all(not name.endswith(".0") for name in {p.name for p in (tmp_path / INDEX_DIR / "cq").iterdir()})


# -- property: recovery from a checkpoint equals recovery from a full rescan ---------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 3), st.integers(1, 4)),
        st.tuples(st.just("offset"), st.integers(0, 3), st.integers(0, 50)),
        st.tuples(st.just("confirm"), st.integers(0, 100), st.just(0)),
        st.tuples(st.just("checkpoint"), st.just(0), st.just(0)),
        st.tuples(st.just("truncate"), st.integers(0, 100), st.just(0)),
        st.tuples(st.just("retention"), st.just(0), st.just(0)),
        st.tuples(st.just("reopen"), st.booleans(), st.just(0)),
    ),
    min_size=5,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(OPS, st.booleans())
def test_recovery_from_a_checkpoint_equals_a_full_rescan(ops: list[tuple[str, Any, int]], mapped: bool) -> None:
    # mapped: every queue column is mapped on load, however short (else only long ones are)
    with (
        tempfile.TemporaryDirectory() as name,
        mock.patch.object(index_files, "MAP_MIN_ENTRIES", 1 if mapped else 10**9),
    ):
        directory = Path(name)
        store = open_store(directory)
        boundaries = [0]
        seq = {7: 0, 8: 0}
        try:
            for op, a, b in ops:
                if op == "put":
                    pid = 7 + a % 2
                    batch = []
                    for _ in range(b):
                        seq[pid] += 1
                        batch.append(msg(b"y" * (50 + 40 * a), queue_id=a, pid=pid, seq=seq[pid]))
                    store.put_messages(batch, now_ms=1)
                    boundaries.append(store.max_offset)  # batch ends (inner boundaries are not needed)
                elif op == "offset":
                    store.put_consumer_offset(group="g1", topic="orders", queue_id=a, offset=b, now_ms=1)
                    boundaries.append(store.max_offset)
                elif op == "confirm":
                    above = [x for x in boundaries if store.confirm_offset <= x <= store.max_offset]
                    store.set_confirm_offset(above[a * (len(above) - 1) // 100])  # a record boundary
                elif op == "checkpoint":
                    store.write_index_checkpoint()
                elif op == "truncate":
                    candidates = [x for x in boundaries if store.min_offset <= x <= store.max_offset]
                    cut = candidates[a * (len(candidates) - 1) // 100]
                    store.truncate(cut)
                    boundaries = [x for x in boundaries if x <= cut]
                elif op == "retention":
                    store.flush()
                    safe = min(store.confirm_offset, store.flushed_offset)
                    starts = [s for s in range(store.min_offset + SEGMENT, safe + 1, SEGMENT) if s <= safe]
                    if starts and starts[-1] < store.max_offset:
                        store.delete_head(starts[-1])
                        boundaries = [starts[-1], *(x for x in boundaries if x > starts[-1])]
                elif op == "reopen":
                    if a:
                        store.close()
                    store = open_store(directory)  # a == False: kill -9, the old object is dropped
                assert index_state(store._indexes) == rescanned(store), op
        finally:
            store.close()


def test_a_checkpoint_write_failing_for_lack_of_space_keeps_the_store_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(tmp_path)
    fill(store, 40)
    store.write_index_checkpoint()
    fill(store, 20, start=40)
    expected = index_state(store._indexes)

    def no_space(*_args: object, **_kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(index_files, "_write_all", no_space)
    with caplog.at_level(logging.WARNING, logger=message_store.__name__):
        store.write_index_checkpoint()
    assert any("index checkpoint not written" in r.getMessage() for r in caplog.records)
    fill(store, 5, start=60)  # puts go on
    monkeypatch.undo()
    # kill -9: the older checkpoint is still good
    with closing(open_store(tmp_path)) as reopened:
        assert index_state(reopened._indexes) == rescanned(reopened)
        assert reopened.queue_max_offset("orders", 0) == (expected["next"][("orders", 0)] + 2)  # type: ignore[index]


def test_queues_of_the_longest_topics_persist(tmp_path: Path, scans: list[int]) -> None:
    topics = ["t" * 127, "\u00e9" * 63, "x"]  # 127 bytes (the limit), 126 bytes of utf-8, 1 byte
    with closing(open_store(tmp_path)) as store:
        for i in range(30):
            store.put_messages([msg(b"b%d" % i, topic=topics[i % 3], queue_id=i % 2)], now_ms=1)
        store.set_confirm_offset(store.max_offset)
        expected = index_state(store._indexes)
    scans.clear()
    with closing(open_store(tmp_path)) as reopened:
        assert scans == [reopened.max_offset]  # loaded, not rescanned
        assert index_state(reopened._indexes) == expected
        assert reopened.get_messages(topics[0], 1, 0, max_count=10, max_bytes=10**6)[-1].body == b"b27"


def test_periodic_checkpoints_follow_the_confirm_offset_in_a_thread_and_back_off_when_a_write_is_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    store = MessageStore.open(tmp_path, SETTINGS, clock=clock, index_checkpoint_interval_s=5.0)
    written: list[tuple[int, str]] = []
    real_run = index_files.IndexFiles.run

    def recording_run(self: index_files.IndexFiles, prepared: index_files.PreparedWrite) -> None:
        written.append((prepared.doc.offset, threading.current_thread().name))
        real_run(self, prepared)

    monkeypatch.setattr(index_files.IndexFiles, "run", recording_run)
    jobs: list[message_store.IndexCheckpointJob] = []
    store.set_index_checkpoint_runner(jobs.append)  # as the flusher does, with a thread per job here

    def run_jobs() -> None:
        while jobs:
            job = jobs.pop()
            assert store.index_checkpoint_running
            assert store.apply_retention() == 0  # waits for the checkpoint
            worker = threading.Thread(target=job.run, name="index-checkpoint-test")
            worker.start()
            worker.join()
            store.complete_index_checkpoint(job)

    fill(store, 10)
    run_jobs()
    assert written == []  # not before 5 s
    clock.now = 5.0
    fill(store, 10, start=10)
    run_jobs()
    assert written == [(store.max_offset, "index-checkpoint-test")]
    with monkeypatch.context() as slow:
        ticks = iter([0.0, 1.0])  # the next write seems to take 1 s: the one after waits 20 s
        slow.setattr("brokergroup.broker.store.message_store.time.perf_counter", lambda: next(ticks))
        clock.now = 10.0
        fill(store, 10, start=20)
        run_jobs()
    assert len(written) == 2
    clock.now = 25.0
    fill(store, 10, start=30)
    run_jobs()
    assert len(written) == 2
    clock.now = 30.0
    fill(store, 10, start=40)
    run_jobs()
    assert len(written) == 3 and written[-1][0] == store.max_offset
    store.close()
    with closing(open_store(tmp_path)) as reopened:
        assert index_state(reopened._indexes) == rescanned(reopened)
