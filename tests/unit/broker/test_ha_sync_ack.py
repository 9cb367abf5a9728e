"""Under SYNC flush a slave acknowledges only what it has fsynced, and the master counts only that
(issue 21): puts wait for it, the confirm offset never passes it (nor the master's own fsync).

`FakeLog(sync=True)` stands in for a SYNC store; `flush()` is the seam where its flusher's fsync
completes, so each test decides exactly when a replica's bytes become durable."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from ha_fakes import FakeLog, Pipe
from ha_fakes import until as poll

from brokergroup.broker.ha.service import HAService
from brokergroup.broker.protocol.ha import HAState, SlaveTransferAck, encode
from brokergroup.broker.settings import HASettings
from brokergroup.broker.store.types import PutStatus

# ---- one connection, no sockets ------------------------------------------------------------------------


def synced_master(records: int = 20) -> FakeLog:
    master = FakeLog(segment_size=4096)
    master.new_epoch(1)
    master.put_n(records, 40)
    return master


def test_a_sync_slave_acks_no_more_than_it_has_flushed_and_one_flush_covers_every_frame() -> None:
    master, slave = synced_master(), FakeLog(segment_size=4096, sync=True)
    pipe = Pipe(master, slave, batch_size=256)
    pipe.pump()
    assert len(pipe.frames) > 3  # several data frames arrived ...
    assert slave.max_offset == master.max_offset
    assert pipe.acks == [SlaveTransferAck(0)]  # ... and only the start offset was acked
    assert pipe.mc.ack_offset == 0
    pipe.flush_slave()
    pipe.pump()
    assert pipe.acks == [SlaveTransferAck(0), SlaveTransferAck(master.max_offset)]
    assert pipe.mc.ack_offset == slave.flushed_offset == master.max_offset


def test_a_heartbeat_ack_repeats_the_last_flushed_offset() -> None:
    master, slave = synced_master(), FakeLog(segment_size=4096, sync=True)
    pipe = Pipe(master, slave, heartbeat_ms=100)
    pipe.pump()
    pipe.flush_slave()
    pipe.pump()
    flushed = slave.flushed_offset
    master.put_n(3)
    pipe.pump()
    assert slave.max_offset > flushed
    pipe.now = 1000
    pipe.tick()
    assert pipe.acks[-1] == SlaveTransferAck(flushed)


def test_the_start_offset_is_acked_only_once_the_log_is_durable_up_to_it() -> None:
    master, slave = synced_master(), FakeLog(segment_size=4096, sync=True)
    Pipe(master, slave).pump()  # a session that received everything, then broke before any flush
    assert slave.flushed_offset == 0 < slave.max_offset
    again = Pipe(master, slave)
    again.pump()
    assert again.acks == []  # its start offset (the whole log) is not on disk yet
    assert again.mc.state is HAState.HANDSHAKE and again.mc.ack_offset == -1
    again.flush_slave()
    again.pump()
    assert again.acks == [SlaveTransferAck(master.max_offset)]
    assert again.mc.state is HAState.TRANSFER


def test_a_slave_one_fsync_behind_under_load_still_counts_as_caught_up() -> None:
    master, slave = synced_master(2), FakeLog(segment_size=4096, sync=True)
    pipe = Pipe(master, slave)
    pipe.pump()  # t=0: the first data frame is delivered, not yet fsynced
    first_end = slave.max_offset
    master.put_n(2)
    assert pipe.mc.next_transfer(master, 10) is not None  # t=10: the next frame leaves before the ack
    slave.flush()
    [ack] = pipe.sc.flushed(slave, 20)
    assert ack == SlaveTransferAck(first_end)
    [acked] = pipe.mc.receive(encode(ack), master, 20)
    assert acked.caught_up_ms == 0  # it had everything the master had at t=0


def test_an_async_slave_acks_what_it_has_written() -> None:
    master, slave = synced_master(), FakeLog(segment_size=4096)
    pipe = Pipe(master, slave, batch_size=256)
    pipe.pump()
    assert slave.flushed_offset == 0
    assert pipe.mc.ack_offset == master.max_offset


# ---- a master and two slaves over 127.0.0.1 ------------------------------------------------------------

SETTINGS = HASettings(
    host="127.0.0.1",
    port=0,
    transfer_batch_size=1024,
    send_heartbeat_interval_ms=50,
    housekeeping_interval_ms=5000,
    max_time_slave_not_catchup_ms=5000,
    slave_timeout_ms=800,
    all_ack_in_sync_state_set=True,
)


async def until(predicate: Callable[[], bool], what: str) -> None:
    await poll(predicate, what, timeout_s=10.0)  # three processes' worth of work on one loop


@pytest.fixture
async def group() -> AsyncIterator[dict[int, tuple[FakeLog, HAService]]]:
    nodes: dict[int, tuple[FakeLog, HAService]] = {}

    def commit(proposed: frozenset[int]) -> None:  # the controller: every proposal is committed
        ha = nodes[1][1]
        asyncio.get_running_loop().call_soon(ha.set_sync_state_set, proposed, ha.sync_state_set_epoch + 1)

    for broker_id in (1, 2, 3):
        log = FakeLog(segment_size=4096, sync=True)
        ha = HAService(log, broker_id=broker_id, settings=SETTINGS, on_sync_state_set_change=commit)
        await ha.start()
        nodes[broker_id] = (log, ha)
    try:
        master = nodes[1][1]
        await master.become_master(epoch=1, sync_state_set=frozenset({1}), sync_state_set_epoch=1)
        for broker_id in (2, 3):
            await nodes[broker_id][1].become_slave(master_ha_address=master.address, epoch=1)
        yield nodes
    finally:
        for _, ha in nodes.values():
            await ha.stop()


def copied(nodes: dict[int, tuple[FakeLog, HAService]], end: int) -> Callable[[], bool]:
    return lambda: all(log.max_offset == end for log, _ in nodes.values())


async def test_puts_and_the_confirm_offset_wait_for_every_replicas_fsync(
    group: dict[int, tuple[FakeLog, HAService]],
) -> None:
    (master, ha), (slave2, _), (slave3, _) = group[1], group[2], group[3]
    end = master.put_n(5)
    master.flush()
    await until(copied(group, end), "slaves to receive the bytes")
    assert ha.sync_state_set == {1}  # holding unflushed bytes does not make a slave in sync
    slave2.flush()
    slave3.flush()
    await until(lambda: ha.sync_state_set == {1, 2, 3}, "both slaves to join once they fsynced")

    end = master.put_n(3)
    master.flush()
    await until(copied(group, end), "slaves to receive the next put")
    slave2.flush()
    assert await ha.wait_replicated(end) is PutStatus.FLUSH_SLAVE_TIMEOUT  # slave 3 holds it, unflushed
    assert master.confirm_offset <= slave3.flushed_offset < end
    waiting = asyncio.create_task(ha.wait_replicated(end))
    slave3.flush()
    assert await waiting is PutStatus.PUT_OK
    await until(lambda: master.confirm_offset == end, "the confirm offset to follow the slaves' fsyncs")

    end = master.put_n(2)  # the master itself has not fsynced this one
    await until(copied(group, end), "slaves to receive the last put")
    slave2.flush()
    slave3.flush()
    assert await ha.wait_replicated(end) is PutStatus.PUT_OK  # the master's own fsync is the flusher's wait
    assert master.confirm_offset <= master.flushed_offset < end  # consumers do not see it yet
    master.flush()
    assert master.confirm_offset == end
