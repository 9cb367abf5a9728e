"""The slave side of one HA connection: truncation point, frame checks, acks."""

from __future__ import annotations

import pytest
from ha_fakes import FakeLog, Pipe, record

from brokergroup.broker.errors import ProtocolError
from brokergroup.broker.ha import ReplicationError
from brokergroup.broker.ha.slave_conn import SlaveConnection
from brokergroup.broker.protocol.ha import (
    EpochStart,
    HAState,
    MasterHandshake,
    MasterTransfer,
    SlaveHandshake,
    SlaveTransferAck,
    encode,
)
from brokergroup.broker.store.epoch import EpochEntry


def log_with(*epochs: tuple[int, list[bytes]], segment_size: int = 1024) -> FakeLog:
    log = FakeLog(segment_size=segment_size)
    for epoch, records in epochs:
        log.new_epoch(epoch)
        if records:
            log.put(*records)
    return log


def records(n: int, size: int = 10) -> list[bytes]:
    return [record(size) for _ in range(n)]


def connection(*, expected_epoch: int = 0, heartbeat: int = 1000) -> SlaveConnection:
    conn = SlaveConnection(
        broker_id=2, is_learner=False, expected_epoch=expected_epoch, heartbeat_interval_ms=heartbeat, now_ms=0
    )
    assert conn.handshake(0) == SlaveHandshake(slave_broker_id=2)
    return conn


def handshake_of(master: FakeLog) -> bytes:
    entries = master.epochs.entries()
    return encode(
        MasterHandshake(
            master_max_phy_offset=master.max_offset,
            master_last_epoch=entries[-1].epoch,
            entries=tuple(EpochStart(e.epoch, e.start_offset) for e in entries),
        )
    )


# ---- where to start -------------------------------------------------------------------------------


def test_a_new_replica_asks_for_offset_zero_and_truncates_nothing() -> None:
    master = log_with((1, records(3)))
    slave = FakeLog()
    conn = connection()
    assert conn.receive(handshake_of(master), slave, 0) == [SlaveTransferAck(0)]
    assert conn.state is HAState.TRANSFER
    assert slave.truncations == []


def test_a_new_replica_follows_a_master_whose_log_starts_later() -> None:
    master = FakeLog(segment_size=256)
    master.log.append_raw(512, record(10) + record(10))
    assert master.append_epoch(EpochEntry(1, 300))  # epoch 1 began in a deleted segment
    master.put(record(30))
    pipe = Pipe(master, FakeLog(segment_size=256))
    pipe.pump()
    assert (pipe.slave.min_offset, pipe.slave.max_offset) == (512, master.max_offset)
    assert pipe.slave.content() == master.content()
    assert pipe.slave.epoch_starts() == [(1, 300)]
    assert pipe.acks[0] == SlaveTransferAck(0)


def test_a_log_with_bytes_but_no_epoch_is_cut_back_to_its_start() -> None:
    master = log_with((1, records(2)))
    slave = FakeLog()
    slave.put(*records(2))
    connection().receive(handshake_of(master), slave, 0)
    assert slave.truncations == [0]
    assert slave.max_offset == 0


def test_a_divergent_tail_is_truncated_to_the_consistent_point() -> None:
    shared = records(4)
    old_master = log_with((1, shared + records(3)))  # its last 3 records never reached anyone
    boundary = len(b"".join(shared))
    new_master = log_with((1, shared))
    new_master.new_epoch(2)
    new_master.put(*records(5, 25))
    pipe = Pipe(new_master, old_master, expected_epoch=2)
    pipe.pump()
    assert old_master.truncations == [boundary]
    assert pipe.acks[0] == SlaveTransferAck(boundary)
    assert old_master.content() == new_master.content()
    assert old_master.epoch_starts() == [(1, 0), (2, boundary)]


def test_a_slave_with_a_consistent_prefix_keeps_it() -> None:
    master = log_with((1, records(5)), (2, records(5)))
    slave = FakeLog()
    slave.new_epoch(1)
    slave.put(*[master.read_raw(o, 1) for o in _offsets(master, 3)])
    pipe = Pipe(master, slave, expected_epoch=2)
    pipe.pump()
    assert slave.truncations == []
    assert slave.content() == master.content()
    assert slave.epoch_starts() == master.epoch_starts()


def _offsets(log: FakeLog, n: int) -> list[int]:
    offsets, offset = [], 0
    for _ in range(n):
        offsets.append(offset)
        offset += len(log.read_raw(offset, 1))
    return offsets


def test_an_empty_epoch_the_master_never_had_is_dropped_without_cutting_the_log() -> None:
    master = log_with((1, records(3)), (3, records(2)))
    slave = FakeLog()
    slave.new_epoch(1)
    slave.put(*[master.read_raw(o, 1) for o in _offsets(master, 3)])
    slave.new_epoch(2)  # a master of epoch 2 that never wrote
    pipe = Pipe(master, slave, expected_epoch=3)
    pipe.pump()
    assert slave.epoch_starts() == master.epoch_starts()
    assert slave.content() == master.content()


def test_an_empty_log_follows_a_new_master_whose_epoch_starts_at_the_same_offset() -> None:
    # Found by the operator's e2e roll: a set that never took a message elects another master; the
    # new master's epoch 2 begins at 0 like the slaves' epoch 1, and no epoch is common.
    master = FakeLog()
    master.new_epoch(2)
    slave = FakeLog()
    slave.new_epoch(1)
    pipe = Pipe(master, slave, expected_epoch=2)
    pipe.pump()
    master.put(*records(2))
    pipe.pump()
    assert slave.epoch_starts() == master.epoch_starts()
    assert slave.content() == master.content()


def test_no_consistent_point_is_an_error_and_changes_nothing() -> None:
    master = log_with((1, records(2)), (3, records(2)))
    slave = log_with((2, records(4)))
    before = slave.content()
    with pytest.raises(ReplicationError, match="no consistent point"):
        connection(expected_epoch=3).receive(handshake_of(master), slave, 0)
    assert slave.truncations == []
    assert slave.content() == before


@pytest.mark.parametrize(("expected", "local_epoch"), [(4, 1), (0, 5)])
def test_a_stale_master_cannot_truncate_anything(expected: int, local_epoch: int) -> None:
    master = log_with((1, records(2)), (3, records(1)))
    slave = log_with((1, records(2)))
    if local_epoch > 1:
        slave.new_epoch(local_epoch)
        slave.put(*records(2))
    with pytest.raises(ReplicationError, match="stale master"):
        connection(expected_epoch=expected).receive(handshake_of(master), slave, 0)
    assert slave.truncations == []


# ---- transfer frames ----------------------------------------------------------------------------------


def transferring(slave: FakeLog, master: FakeLog, *, heartbeat: int = 1000) -> SlaveConnection:
    conn = connection(heartbeat=heartbeat)
    conn.receive(handshake_of(master), slave, 0)
    return conn


def frame(offset: int, *, epoch: int = 1, start: int = 0, confirm: int = 0, body: bytes = b"") -> bytes:
    return encode(
        MasterTransfer(offset=offset, epoch=epoch, epoch_start_offset=start, confirm_offset=confirm, body=body)
    )


def test_a_frame_at_another_offset_drops_the_connection() -> None:
    master = log_with((1, records(2)))
    slave = log_with((1, []))
    slave.put(record())
    conn = transferring(slave, master)
    with pytest.raises(ReplicationError, match="this log ends at"):
        conn.receive(frame(slave.max_offset + 1), slave, 0)


def test_a_transfer_before_the_handshake_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="TRANSFER in state HANDSHAKE"):
        connection().receive(frame(0), FakeLog(), 0)


def test_epochs_are_recorded_checked_and_never_go_back() -> None:
    master = log_with((1, []))
    slave = FakeLog()
    conn = transferring(slave, master)
    one = record()
    conn.receive(frame(0, epoch=1, start=0, body=one), slave, 0)
    conn.receive(frame(len(one), epoch=3, start=len(one)), slave, 0)
    assert slave.epoch_starts() == [(1, 0), (3, len(one))]
    with pytest.raises(ReplicationError, match="disagrees"):
        conn.receive(frame(len(one), epoch=3, start=0), slave, 0)
    conn = transferring(slave, slave)  # a master with exactly these epochs
    with pytest.raises(ReplicationError, match="disagrees"):
        conn.receive(frame(len(one), epoch=2, start=len(one)), slave, 0)


def test_the_confirm_offset_never_exceeds_what_the_slave_has() -> None:
    master = log_with((1, []))
    slave = FakeLog()
    conn = transferring(slave, master)
    body = record()
    acks = conn.receive(frame(0, confirm=10_000, body=body), slave, 0)
    assert acks == [SlaveTransferAck(len(body))]
    assert slave.confirm_offset == len(body)


# ---- acks ------------------------------------------------------------------------------------------------


def test_an_idle_slave_re_acks_every_heartbeat_interval() -> None:
    master = log_with((1, records(2)))
    slave = FakeLog()
    conn = transferring(slave, master, heartbeat=100)
    assert conn.next_wakeup_ms() == 100
    assert conn.tick(99) == []
    assert conn.tick(100) == [SlaveTransferAck(0)]  # the requested offset, nothing appended yet
    assert conn.next_wakeup_ms() == 200


def test_a_heartbeat_frame_does_not_trigger_an_ack() -> None:
    master = log_with((1, []))
    slave = FakeLog()
    conn = transferring(slave, master)
    assert conn.receive(frame(0), slave, 5) == []
