"""Retention (#18): whole head segments deleted by age or size, queue offsets and group offsets carried
forward, and a kill -9 at every step of a deletion leaves a store that opens and agrees with a replica."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from brokergroup.broker.errors import CorruptLogError, SeedRequiredError
from brokergroup.broker.settings import StoreSettings
from brokergroup.broker.store.epoch import OPEN, EpochEntry, find_consistent_point
from brokergroup.broker.store.head import HeadFile, decode_head, encode_head
from brokergroup.broker.store.indexes import HeadState
from brokergroup.broker.store.message_store import HEAD_FILE, STEP_EPOCHS_CUT, STEP_HEAD_WRITTEN, MessageStore
from brokergroup.broker.store.retention import RetentionPolicy, new_min_offset
from brokergroup.broker.store.segments import STEP_HEAD_SEGMENT_DELETED, STEP_HEAD_SYNCED
from tests.unit.broker.store_factories import FakeClock, msg, read_all_raw

SEGMENT = 4096
BY_SIZE = StoreSettings(segment_size=SEGMENT, max_message_size=1024, retention_bytes=3 * SEGMENT)


class Crash(Exception):
    """Stands for kill -9 at this step."""


def crash_at(step: str, nth: int = 1) -> Callable[[str], None]:
    seen = 0

    def hook(name: str) -> None:
        nonlocal seen
        if name == step:
            seen += 1
            if seen == nth:
                raise Crash(f"{step} #{nth}")

    return hook


def open_store(directory: Path, settings: StoreSettings = BY_SIZE, **kwargs: object) -> MessageStore:
    return MessageStore.open(directory, settings, clock=FakeClock(), **kwargs)  # type: ignore[arg-type]


def fill(store: MessageStore, count: int = 120, *, start: int = 0) -> None:
    """`count` messages of ~300 bytes over two queues (one producer, sequences from `start`), a
    consumer-offset commit every 20, epoch 1 from offset 0, all confirmed and flushed."""
    if store.epochs.last_entry() is None:
        store.append_epoch(EpochEntry(1, 0))
    for i in range(start, start + count):
        store.put_messages([msg(b"x" * 240 + b"%06d" % i, queue_id=i % 2, pid=7, seq=i)], now_ms=1)
        if i % 20 == 19:
            store.put_consumer_offset(group="g", topic="orders", queue_id=0, offset=i // 2 - 3, now_ms=1)
    store.set_confirm_offset(store.max_offset)
    store.flush()


def view(store: MessageStore) -> dict[str, object]:
    """What consumers and replication see: queue ranges, every message, group offsets, epochs."""
    queues = {}
    for queue_id in (0, 1):
        low, high = store.queue_min_offset("orders", queue_id), store.queue_max_offset("orders", queue_id)
        got = store.get_messages("orders", queue_id, low, max_count=10_000, max_bytes=10**8)
        queues[queue_id] = (low, high, [(m.queue_offset, m.commit_offset, m.body) for m in got])
    return {
        "min": store.min_offset,
        "max": store.max_offset,
        "queues": queues,
        "group": store.consumer_offset("g", "orders", 0),
        "epochs": store.epochs.entries(),
    }


# -- the policy -----------------------------------------------------------------------------------


def test_policy_deletes_expired_or_oversized_segments_but_never_the_last_nor_unconfirmed_ones() -> None:
    starts, mtimes = [0, 100, 200, 300], [10.0, 20.0, 30.0, 40.0]

    def run(policy: RetentionPolicy, safe_offset: int = 350, starts: list[int] = starts) -> int | None:
        times = mtimes[: len(starts)]
        return new_min_offset(
            starts, times, segment_size=100, max_offset=350, safe_offset=safe_offset, now=100.0, policy=policy
        )

    assert run(RetentionPolicy(max_age_s=75)) == 200
    assert run(RetentionPolicy(max_age_s=1)) == 300
    assert run(RetentionPolicy(max_age_s=1), safe_offset=199) == 100
    assert run(RetentionPolicy(max_bytes=160)) == 200
    assert run(RetentionPolicy(max_age_s=1000)) is None
    assert run(RetentionPolicy()) is None
    assert run(RetentionPolicy(max_age_s=1), starts=[0]) is None


def test_head_file_round_trips_and_refuses_damage(tmp_path: Path) -> None:
    head = HeadState(8192, {("orders", 0): 12, ("a b", 3): 0}, {("g", "orders", 0): 9}, {7: 41, 3: -1})
    assert decode_head(encode_head(head)) == head
    file = HeadFile(tmp_path / "head.state")
    assert file.read() is None
    file.write(head)
    assert file.read() == head
    data = (tmp_path / "head.state").read_bytes()
    (tmp_path / "head.state").write_bytes(data.replace(b"8192", b"8193"))
    with pytest.raises(CorruptLogError, match=r"head.state is damaged.*crc32 mismatch"):
        file.read()


# -- the store --------------------------------------------------------------------------------------


@pytest.mark.parametrize("memory", [False, True], ids=["file", "memory"])
def test_retention_by_size_keeps_queue_offsets_and_moves_group_offsets_up(tmp_path: Path, memory: bool) -> None:
    store = MessageStore.open(tmp_path, BY_SIZE, memory=memory, clock=FakeClock())
    fill(store)
    before = view(store)
    deleted = store.apply_retention()
    assert deleted > 0
    assert store.max_offset - store.min_offset <= 3 * SEGMENT + SEGMENT
    assert store.min_offset % SEGMENT == 0 and store.min_offset > 0
    low = store.queue_min_offset("orders", 0)
    assert low > 0
    assert store.queue_max_offset("orders", 0) == before["queues"][0][1]  # type: ignore[index]
    kept = [entry for entry in before["queues"][0][2] if entry[1] >= store.min_offset]  # type: ignore[index]
    assert view(store)["queues"][0][2] == kept  # type: ignore[index]
    assert kept[0][0] == low
    assert store.get_messages("orders", 0, low - 1, max_count=5, max_bytes=10**6) == []
    # the group committed 56 last, below the queue's new start: it reads as the start
    assert store.consumer_offset("g", "orders", 0) == max(56, low)
    assert store.consumer_offset("nobody", "orders", 0) is None
    # new messages continue the queues' numbering, duplicates of old sequences are still refused
    result = store.put_messages([msg(b"new", queue_id=0, pid=7, seq=200)], now_ms=1)
    assert result.appended[0].queue_offset == before["queues"][0][1]  # type: ignore[index]
    again = store.put_messages([msg(b"dup", queue_id=0, pid=7, seq=3)], now_ms=1)
    assert again.appended[0].duplicate
    store.close()


def test_reopen_after_retention_serves_the_same_view(tmp_path: Path) -> None:
    with closing(open_store(tmp_path)) as store:
        fill(store)
        store.apply_retention()
        expected = view(store)
    with closing(open_store(tmp_path)) as reopened:
        assert view(reopened) == expected
        assert reopened.put_messages([msg(b"x", pid=7, seq=5)], now_ms=1).appended[0].duplicate


def test_retention_by_age_uses_segment_mtimes_and_spares_unconfirmed_segments(tmp_path: Path) -> None:
    settings = StoreSettings(segment_size=SEGMENT, max_message_size=1024, retention_ms=60_000)
    with closing(open_store(tmp_path, settings)) as store:
        fill(store, 60)
        store.put_messages([msg(b"y" * 300) for _ in range(30)], now_ms=1)  # appended, never confirmed
        store.flush()
        assert store.apply_retention() == 0  # nothing is a minute old yet
        later = store.apply_retention(now=9e12)
        assert later > 0
        assert store.min_offset <= store.confirm_offset
        assert store.min_offset + SEGMENT > store.confirm_offset  # the segment holding the confirm offset stays


def test_epochs_ending_before_the_new_start_are_dropped_the_last_always_stays(tmp_path: Path) -> None:
    with closing(open_store(tmp_path)) as store:
        fill(store, 20)
        store.append_epoch(EpochEntry(2, store.max_offset))
        fill(store, 20, start=20)
        store.append_epoch(EpochEntry(3, store.max_offset))
        fill(store, 100, start=40)
        epoch3 = store.epochs.get_entry(3)
        assert epoch3 is not None
        store.apply_retention()
        assert store.min_offset > epoch3.start_offset
        assert [(e.epoch, e.start_offset, e.end_offset) for e in store.epochs.entries()] == [
            (3, epoch3.start_offset, OPEN)
        ]


# -- kill -9 at every step of a deletion -------------------------------------------------------------

STEPS = [
    (STEP_HEAD_WRITTEN, 1),
    (STEP_HEAD_SEGMENT_DELETED, 1),
    (STEP_HEAD_SEGMENT_DELETED, 2),
    (STEP_HEAD_SYNCED, 1),
    (STEP_EPOCHS_CUT, 1),
]


def replica_of(master_dir: Path, into: Path) -> MessageStore:
    """A slave that copied the master's whole log and its epochs."""
    slave = open_store(into)
    with closing(open_store(master_dir)) as master:
        slave.append_raw(0, read_all_raw(master))
        for entry in master.epochs.entries():
            slave.append_epoch(entry)
        slave.set_confirm_offset(master.confirm_offset)
    return slave


@pytest.mark.parametrize(("step", "nth"), STEPS, ids=[f"{s}#{n}" for s, n in STEPS])
def test_crash_at_any_step_of_a_deletion_opens_and_agrees_with_a_replica(tmp_path: Path, step: str, nth: int) -> None:
    reference_dir, crashed_dir = tmp_path / "reference", tmp_path / "crashed"
    for directory in (reference_dir, crashed_dir):
        with closing(open_store(directory)) as store:
            fill(store)
    replica = replica_of(reference_dir, tmp_path / "replica")  # before retention: it keeps the whole log
    with closing(open_store(reference_dir)) as reference:
        assert reference.apply_retention() >= 2
        expected = view(reference)
    store = open_store(crashed_dir, step_hook=crash_at(step, nth))
    with pytest.raises(Crash):
        store.apply_retention()
    # kill -9: nothing more runs; the files are what the steps so far left

    with closing(open_store(crashed_dir)) as reopened:
        assert view(reopened) == expected
        with closing(replica):
            # same bytes at the same offsets, same queue offsets for every message both hold
            assert read_all_raw(replica)[reopened.min_offset :] == read_all_raw(reopened)
            for queue_id in (0, 1):
                mine = view(reopened)["queues"][queue_id][2]  # type: ignore[index]
                theirs = {c: q for q, c, _ in view(replica)["queues"][queue_id][2]}  # type: ignore[index]
                assert all(theirs[c] == q for q, c, _ in mine)
            point = find_consistent_point(
                reopened.epochs.entries(), reopened.max_offset, replica.epochs.entries(), replica.max_offset
            )
            assert point == replica.max_offset == reopened.max_offset


def test_a_head_state_that_does_not_match_the_log_is_refused(tmp_path: Path) -> None:
    with closing(open_store(tmp_path)) as store:
        fill(store)
        store.apply_retention()
        start = store.min_offset
    HeadFile(tmp_path / HEAD_FILE).write(HeadState(start - SEGMENT, {}, {}, {}))
    with pytest.raises(CorruptLogError, match=r"head state starts at offset=.*segments are missing"):
        open_store(tmp_path)


def test_an_empty_replica_refuses_a_log_whose_head_was_deleted_and_writes_nothing(tmp_path: Path) -> None:
    """From a partial log it would number every queue from 0 where the master counts on: refused."""
    with closing(open_store(tmp_path / "master")) as master:
        fill(master)
        master.apply_retention()
        start, raw = master.min_offset, read_all_raw(master)
    assert start > 0
    slave_dir = tmp_path / "slave"
    with closing(open_store(slave_dir)) as slave:
        fill(slave, 10)
        slave.truncate(0)
        with pytest.raises(SeedRequiredError, match=f"master's log starts at offset {start}"):
            slave.append_raw(start, raw)
        assert (slave.min_offset, slave.max_offset) == (0, 0)
    with closing(open_store(slave_dir)) as reopened:
        assert (reopened.min_offset, reopened.max_offset) == (0, 0)
