"""The master side of one HA connection: start point, epoch boundaries, heartbeats, acks."""

from __future__ import annotations

import pytest
from ha_fakes import FakeLog, Pipe, record

from brokergroup.broker.errors import ProtocolError
from brokergroup.broker.ha import ReplicationError
from brokergroup.broker.ha.master_conn import Acked, Handshaked, MasterConnection
from brokergroup.broker.protocol.ha import (
    EpochStart,
    HAState,
    MasterFrame,
    MasterHandshake,
    MasterHead,
    MasterTransfer,
    SlaveHandshake,
    SlaveTransferAck,
    encode,
)
from brokergroup.broker.store.epoch import EpochEntry
from brokergroup.broker.store.indexes import HeadState


def master_log(*epochs: tuple[int, int], body_sizes: tuple[int, ...] = (10, 40, 3)) -> FakeLog:
    """A log with `count` records in each (epoch, count), record sizes cycling through body_sizes."""
    log = FakeLog(segment_size=1024)
    n = 0
    for epoch, count in epochs:
        log.new_epoch(epoch)
        for _ in range(count):
            log.put(record(body_sizes[n % len(body_sizes)]))
            n += 1
    return log


def data_frames(frames: list[object]) -> list[MasterTransfer]:
    return [f for f in frames if isinstance(f, MasterTransfer) and f.body]


def assert_frames_respect_epochs(master: FakeLog, frames: list[MasterTransfer], batch: int) -> None:
    entries = master.epochs.entries()
    position = frames[0].offset
    for frame in frames:
        assert frame.offset == position, "frames are contiguous"
        entry = master.epochs.get_entry(frame.epoch)
        assert entry is not None
        assert frame.epoch_start_offset == entry.start_offset
        assert entry.start_offset <= frame.offset
        assert frame.end_offset <= entry.end_offset, f"frame {frame.offset}-{frame.end_offset} crosses {entry}"
        assert len(frame.body) <= batch or len(master.read_raw(frame.offset, 1)) == len(frame.body)
        position = frame.end_offset
    assert position == master.max_offset
    assert {f.epoch for f in frames} == {e.epoch for e in entries}


# ---- handshake and start point --------------------------------------------------------------


def test_the_master_answers_a_handshake_with_its_epochs() -> None:
    master = master_log((1, 3), (4, 2))
    conn = MasterConnection(batch_size=100, heartbeat_interval_ms=1000, now_ms=0)
    events = conn.receive(encode(SlaveHandshake(slave_broker_id=7, is_async_learner=True)), master, 0)
    assert events == [Handshaked(7, True)]
    assert conn.state is HAState.HANDSHAKE
    frame = conn.next_transfer(master, 0)
    assert frame == MasterHandshake(
        master_max_phy_offset=master.max_offset,
        master_last_epoch=4,
        entries=(EpochStart(1, 0), EpochStart(4, master.epochs.entries()[1].start_offset)),
    )
    assert conn.next_transfer(master, 0) is None  # nothing until the slave's first ack


def test_the_handshake_holds_at_most_the_newest_entries() -> None:
    master = master_log((1, 1), (2, 1), (3, 1))
    conn = MasterConnection(batch_size=100, heartbeat_interval_ms=1000, now_ms=0, max_handshake_entries=2)
    conn.receive(encode(SlaveHandshake(slave_broker_id=2)), master, 0)
    frame = conn.next_transfer(master, 0)
    assert isinstance(frame, MasterHandshake)
    assert [e.epoch for e in frame.entries] == [2, 3]


def shaken(master: FakeLog, *, batch: int = 100, heartbeat: int = 1000) -> MasterConnection:
    conn = MasterConnection(batch_size=batch, heartbeat_interval_ms=heartbeat, now_ms=0)
    conn.receive(encode(SlaveHandshake(slave_broker_id=2)), master, 0)
    assert isinstance(conn.next_transfer(master, 0), MasterHandshake)
    return conn


def rebased_log(start: int) -> FakeLog:
    """A log whose first byte is at `start` (older segments deleted), epoch 1 from there."""
    log = FakeLog(segment_size=256)
    log.log.append_raw(start, record(10) + record(10))
    assert log.append_epoch(EpochEntry(1, start))
    return log


def test_a_first_ack_of_zero_gets_the_head_state_then_the_log_from_the_masters_min_offset() -> None:
    master = rebased_log(512)
    master.heads[512] = HeadState(512, {("t", 0): 7}, {("g", "t", 0): 5}, {3: 9})
    conn = shaken(master)
    assert conn.receive(encode(SlaveTransferAck(0)), master, 0) == [Acked(0, True, None)]
    assert conn.next_transfer(master, 0) == MasterHead(master.heads[512])
    frame = conn.next_transfer(master, 0)
    assert isinstance(frame, MasterTransfer)
    assert frame.offset == 512


def test_a_log_starting_at_zero_sends_no_head_state() -> None:
    master = master_log((1, 2))
    conn = shaken(master)
    conn.receive(encode(SlaveTransferAck(0)), master, 0)
    frame = conn.next_transfer(master, 0)
    assert isinstance(frame, MasterTransfer) and frame.offset == 0


def test_sync_from_last_file_starts_at_the_last_confirmed_segment_with_its_head_state() -> None:
    master = FakeLog(segment_size=256)
    master.append_epoch(EpochEntry(1, 0))
    while len(master.log.segment_starts) < 4:
        master.put_n(1)
    master.set_confirm_offset(master.log.segment_starts[2] + 1)  # the last segment's start is not confirmed
    conn = MasterConnection(batch_size=1 << 20, heartbeat_interval_ms=1000, now_ms=0)
    conn.receive(encode(SlaveHandshake(slave_broker_id=2, is_sync_from_last_file=True)), master, 0)
    assert isinstance(conn.next_transfer(master, 0), MasterHandshake)
    conn.receive(encode(SlaveTransferAck(0)), master, 0)
    start = master.log.segment_starts[2]
    assert conn.next_transfer(master, 0) == MasterHead(HeadState.empty(start))
    frame = conn.next_transfer(master, 0)
    assert isinstance(frame, MasterTransfer)
    assert (frame.offset, frame.epoch, frame.epoch_start_offset) == (start, 1, 0)


def test_a_slave_behind_the_masters_min_offset_starts_from_scratch() -> None:
    master = rebased_log(512)
    conn = shaken(master)
    assert conn.receive(encode(SlaveTransferAck(256)), master, 0) == [Acked(256, True, None)]
    assert conn.next_transfer(master, 0) == MasterHead(HeadState.empty(512))
    frame = conn.next_transfer(master, 0)
    assert isinstance(frame, MasterTransfer) and frame.offset == 512


def test_a_first_ack_sets_where_transfer_starts() -> None:
    master = master_log((1, 5))
    second = master.read_raw(0, 1)
    conn = shaken(master)
    conn.receive(encode(SlaveTransferAck(len(second))), master, 0)
    frame = conn.next_transfer(master, 0)
    assert isinstance(frame, MasterTransfer)
    assert frame.offset == len(second)


def test_a_slave_ahead_of_the_master_is_refused() -> None:
    master = master_log((1, 2))
    conn = shaken(master)
    with pytest.raises(ReplicationError, match="beyond the master's max offset"):
        conn.receive(encode(SlaveTransferAck(master.max_offset + 1)), master, 0)


def test_an_ack_before_the_handshake_is_a_protocol_error() -> None:
    master = master_log((1, 2))
    conn = MasterConnection(batch_size=100, heartbeat_interval_ms=1000, now_ms=0)
    with pytest.raises(ProtocolError, match="before the handshake"):
        conn.receive(encode(SlaveTransferAck(0)), master, 0)


def test_an_ack_beyond_what_was_sent_is_a_protocol_error() -> None:
    master = master_log((1, 4))
    conn = shaken(master, batch=1)
    conn.receive(encode(SlaveTransferAck(0)), master, 0)
    frame = conn.next_transfer(master, 0)
    assert isinstance(frame, MasterTransfer)
    conn.receive(encode(SlaveTransferAck(frame.end_offset)), master, 0)
    with pytest.raises(ProtocolError, match="beyond what was sent"):
        conn.receive(encode(SlaveTransferAck(frame.end_offset + 1)), master, 0)


def test_the_slave_id_cannot_change_on_a_connection() -> None:
    master = master_log((1, 1))
    conn = shaken(master)
    with pytest.raises(ProtocolError, match="changed"):
        conn.receive(encode(SlaveHandshake(slave_broker_id=3)), master, 0)


# ---- epoch boundaries ---------------------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 50, 97, 150, 10_000])
def test_frames_never_cross_an_epoch_boundary(batch: int) -> None:
    master = master_log((1, 7), (2, 1), (5, 9), (6, 4))
    pipe = Pipe(master, FakeLog(segment_size=1024), batch_size=batch)
    pipe.pump()
    assert_frames_respect_epochs(master, data_frames(pipe.frames), batch)
    assert pipe.slave.content() == master.content()
    assert pipe.slave.epoch_starts() == master.epoch_starts()


def test_a_new_epoch_while_streaming_the_last_one_starts_a_new_frame_9689() -> None:
    master = master_log((1, 10))
    pipe = Pipe(master, FakeLog(segment_size=1024), batch_size=60)
    pipe.pump(limit=4)  # handshake + 3 frames of epoch 1, still open-ended
    assert pipe.mc.next_offset is not None and pipe.mc.next_offset < master.max_offset
    boundary = master.max_offset
    master.new_epoch(2)  # re-elected in place: same role, new epoch, connection kept
    master.put(*(record(20) for _ in range(6)))
    pipe.pump()
    frames = data_frames(pipe.frames)
    assert_frames_respect_epochs(master, frames, 60)
    assert any(f.end_offset == boundary for f in frames)
    assert all(f.epoch == (1 if f.offset < boundary else 2) for f in frames)
    assert pipe.slave.epoch_starts() == [(1, 0), (2, boundary)]
    assert pipe.slave.content() == master.content()


def test_a_new_epoch_without_writes_replaces_the_empty_one_and_reaches_caught_up_slaves_9942() -> None:
    master = master_log((1, 3))
    pipe = Pipe(master, FakeLog(segment_size=1024), heartbeat_ms=10)
    pipe.pump()
    master.new_epoch(2)
    master.new_epoch(3)  # epoch 2 wrote nothing
    pipe.now = 10
    heartbeat = pipe.pump()
    assert [(f.epoch, f.epoch_start_offset, f.body) for f in heartbeat if isinstance(f, MasterTransfer)] == [
        (3, master.max_offset, b"")
    ]
    assert pipe.slave.epoch_starts() == master.epoch_starts() == [(1, 0), (3, master.max_offset)]


# ---- idle connection ------------------------------------------------------------------------------


def test_an_idle_master_sends_an_empty_frame_every_heartbeat_interval() -> None:
    master = master_log((1, 3))
    pipe = Pipe(master, FakeLog(segment_size=1024), heartbeat_ms=100)
    pipe.pump()
    assert pipe.mc.next_wakeup_ms() == 100
    pipe.now = 99
    assert pipe.pump() == []
    pipe.now = 100
    [frame] = pipe.pump()
    assert isinstance(frame, MasterTransfer)
    assert (frame.offset, frame.epoch, frame.body) == (master.max_offset, 1, b"")
    assert pipe.mc.next_wakeup_ms() == 200


def test_a_raised_confirm_offset_reaches_a_caught_up_slave_at_once() -> None:
    master = master_log((1, 3))
    pipe = Pipe(master, FakeLog(segment_size=1024))
    pipe.pump()
    master.set_confirm_offset(master.max_offset)
    [frame] = pipe.pump()
    assert isinstance(frame, MasterTransfer)
    assert (frame.body, frame.confirm_offset) == (b"", master.max_offset)
    assert pipe.slave.confirm_offset == master.max_offset


def confirm_frames(frames: list[MasterFrame]) -> list[MasterTransfer]:
    return [f for f in frames if isinstance(f, MasterTransfer) and not f.body]


def test_under_load_the_confirm_offset_rides_on_data_frames_and_no_frame_goes_for_it_alone() -> None:
    master = master_log((1, 3))
    pipe = Pipe(master, FakeLog(segment_size=1024), confirm_delay_ms=5)
    pipe.pump()
    for step in range(1, 20):  # a put every 4 ms, confirmed 3 ms after it was sent
        pipe.now = 4 * step
        master.put(record())
        pipe.pump()
        pipe.now += 3
        master.set_confirm_offset(master.max_offset)
        assert pipe.mc.confirm_wake_wanted  # the first move since the last frame starts the delay ...
        assert pipe.pump() == []
        assert not pipe.mc.confirm_wake_wanted  # ... later moves need no wake-up
        assert pipe.mc.next_wakeup_ms() == pipe.now + 5
    assert confirm_frames(pipe.frames) == []
    assert pipe.slave.confirm_offset == data_frames(pipe.frames)[-1].confirm_offset > 0


def test_an_idle_slave_gets_the_confirm_offset_alone_after_the_delay() -> None:
    master = master_log((1, 3))
    pipe = Pipe(master, FakeLog(segment_size=1024), confirm_delay_ms=5)
    pipe.pump()
    pipe.now = 10
    master.put(record())
    [data] = pipe.pump()
    assert isinstance(data, MasterTransfer) and data.body
    pipe.now = 30
    master.set_confirm_offset(master.max_offset)
    assert pipe.pump() == []  # held back for a data frame ...
    pipe.now = 34
    assert pipe.pump() == []
    pipe.now = 35  # ... until the delay ends
    [alone] = pipe.pump()
    assert isinstance(alone, MasterTransfer)
    assert (alone.body, alone.offset, alone.confirm_offset) == (b"", master.max_offset, master.max_offset)
    assert pipe.slave.confirm_offset == master.max_offset
    assert pipe.mc.confirm_wake_wanted
    assert pipe.mc.next_wakeup_ms() == 35 + 1000  # the heartbeat again


# ---- caught-up time for the shrink rule -------------------------------------------------------------


def test_caught_up_time_comes_from_acks() -> None:
    master = master_log((1, 4))
    conn = shaken(master, batch=1)
    conn.receive(encode(SlaveTransferAck(0)), master, 0)
    frame = conn.next_transfer(master, 5)
    assert isinstance(frame, MasterTransfer)
    [behind] = conn.receive(encode(SlaveTransferAck(frame.end_offset)), master, 6)
    assert behind == Acked(frame.end_offset, False, None)  # the master had more at the last transfer
    while (f := conn.next_transfer(master, 7)) is not None:
        last = f
    assert isinstance(last, MasterTransfer)
    master.put(record())  # arrives after the last transfer
    [covered] = conn.receive(encode(SlaveTransferAck(last.end_offset)), master, 9)
    assert covered.caught_up_ms == 7
    while conn.next_transfer(master, 10) is not None:
        pass
    [at_end] = conn.receive(encode(SlaveTransferAck(master.max_offset)), master, 11)
    assert at_end.caught_up_ms == 11
