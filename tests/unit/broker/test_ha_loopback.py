"""One master and two slaves replicating over 127.0.0.1 in this process (fast, no sleeps:
every wait polls a predicate with a deadline)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from ha_fakes import FakeLog, until

from brokergroup.broker.ha.service import HAService
from brokergroup.broker.ha.slave import split_address
from brokergroup.broker.protocol.ha import SlaveHandshake, encode
from brokergroup.broker.settings import HASettings
from brokergroup.broker.store.types import PutStatus

SETTINGS = HASettings(
    host="127.0.0.1",
    port=0,
    transfer_batch_size=1024,
    send_heartbeat_interval_ms=50,
    housekeeping_interval_ms=3000,
    max_time_slave_not_catchup_ms=3000,
    slave_timeout_ms=800,
    all_ack_in_sync_state_set=True,
)


@dataclass
class Controller:
    """Stands in for alter-sync-state-set: records proposals, confirms them when `auto`."""

    auto: bool = True
    proposals: list[frozenset[int]] = field(default_factory=list)
    service: HAService | None = None

    def __call__(self, proposed: frozenset[int]) -> None:
        self.proposals.append(proposed)
        if self.auto:
            asyncio.get_running_loop().call_soon(self._commit, proposed)

    def _commit(self, proposed: frozenset[int]) -> None:
        assert self.service is not None
        self.service.set_sync_state_set(proposed, self.service.sync_state_set_epoch + 1)


@dataclass
class Node:
    broker_id: int
    log: FakeLog
    ha: HAService
    controller: Controller


@pytest.fixture
async def nodes() -> AsyncIterator[dict[int, Node]]:
    group: dict[int, Node] = {}
    for broker_id in (1, 2, 3):
        log, controller = FakeLog(segment_size=4096), Controller()
        ha = HAService(log, broker_id=broker_id, settings=SETTINGS, on_sync_state_set_change=controller)
        controller.service = ha
        await ha.start()
        group[broker_id] = Node(broker_id, log, ha, controller)
    try:
        yield group
    finally:
        for node in group.values():
            await node.ha.stop()


async def form_group(nodes: dict[int, Node], *, auto: bool = True) -> Node:
    master = nodes[1]
    master.controller.auto = auto
    await master.ha.become_master(epoch=1, sync_state_set=frozenset({1}), sync_state_set_epoch=1)
    for broker_id in (2, 3):
        await nodes[broker_id].ha.become_slave(master_ha_address=master.ha.address, epoch=1)
    return master


def in_step(*logs: FakeLog) -> bool:
    """Same bytes and same epochs everywhere."""
    return all(log.content() == logs[0].content() and log.epoch_starts() == logs[0].epoch_starts() for log in logs)


def all_logs(nodes: dict[int, Node]) -> list[FakeLog]:
    return [node.log for node in nodes.values()]


async def test_writes_replicate_byte_identically_and_all_acks_confirm(nodes: dict[int, Node]) -> None:
    master = await form_group(nodes)
    master.log.put_n(60, 40)  # several 1 KiB frames
    await until(lambda: in_step(*all_logs(nodes)), "slaves to copy the master's log")
    await until(lambda: master.ha.sync_state_set == {1, 2, 3}, "both slaves to join the sync-state-set")
    assert master.controller.proposals[-1] == {1, 2, 3}
    next_offset = master.log.put_n(3)
    assert await master.ha.wait_replicated(next_offset) is PutStatus.PUT_OK
    await until(lambda: master.log.confirm_offset == master.log.max_offset, "the confirm offset to reach the end")
    await until(lambda: all(n.log.confirm_offset == next_offset for n in nodes.values()), "slaves to learn it")
    info = master.ha.runtime_info()
    assert info["role"] == "master"
    assert [(c["slaveId"], c["inSync"], c["lagBytes"]) for c in info["connections"]] == [(2, True, 0), (3, True, 0)]


async def test_expansion_is_proposed_once_slaves_catch_up(nodes: dict[int, Node]) -> None:
    master = await form_group(nodes, auto=False)
    next_offset = master.log.put_n(20, 40)
    await until(lambda: master.controller.proposals[-1:] == [frozenset({1, 2, 3})], "an expansion to {1, 2, 3}")
    assert master.ha.sync_state_set == {1}
    assert master.ha.runtime_info()["synchronizing"]
    assert await master.ha.wait_replicated(next_offset) is PutStatus.PUT_OK  # waits for the proposed members
    master.ha.set_sync_state_set(frozenset({1, 2, 3}), 2)
    assert not master.ha.runtime_info()["synchronizing"]


async def test_a_stopped_slave_times_out_puts_until_the_controller_shrinks_the_set(nodes: dict[int, Node]) -> None:
    master = await form_group(nodes)
    master.log.put_n(5)
    await until(lambda: master.ha.sync_state_set == {1, 2, 3} and in_step(*all_logs(nodes)), "a formed group")
    master.controller.auto = False
    await nodes[3].ha.stop()
    await until(lambda: master.controller.proposals[-1:] == [frozenset({1, 2})], "a shrink when 3 disconnects")
    next_offset = master.log.put_n(2)
    assert await master.ha.wait_replicated(next_offset) is PutStatus.FLUSH_SLAVE_TIMEOUT
    assert master.log.confirm_offset < next_offset  # frozen: member 3 has no connection (#6662)
    assert master.ha.check_put() is None
    master.ha.set_sync_state_set(frozenset({1, 2}), master.ha.sync_state_set_epoch + 1)
    assert await master.ha.wait_replicated(next_offset) is PutStatus.PUT_OK
    await until(lambda: master.log.confirm_offset == next_offset, "the confirm offset to move on")


async def test_min_in_sync_replicas_refuses_puts_before_writing(nodes: dict[int, Node]) -> None:
    log = FakeLog()
    ha = HAService(
        log,
        broker_id=9,
        settings=SETTINGS.model_copy(update={"min_in_sync_replicas": 2}),
        on_sync_state_set_change=lambda _: None,
    )
    try:
        assert ha.check_put() is PutStatus.SERVICE_NOT_AVAILABLE
        await ha.become_master(epoch=1, sync_state_set=frozenset({9}), sync_state_set_epoch=1)
        assert ha.check_put() is PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH
        ha.set_sync_state_set(frozenset({9, 10}), 2)
        assert ha.check_put() is None
    finally:
        await ha.stop()


async def test_failover_truncates_the_old_masters_unreplicated_tail(nodes: dict[int, Node]) -> None:
    old = await form_group(nodes)
    old.log.put_n(10)
    await until(lambda: old.ha.sync_state_set == {1, 2, 3} and in_step(*all_logs(nodes)), "a formed group")
    new, other = nodes[2], nodes[3]
    boundary = new.log.max_offset
    await new.ha.become_master(epoch=2, sync_state_set=frozenset({2, 3}), sync_state_set_epoch=5)
    await other.ha.become_slave(master_ha_address=new.ha.address, epoch=2)
    tail_end = old.log.put_n(4)  # only the old master has these
    waiting = asyncio.create_task(old.ha.wait_replicated(tail_end))
    new.log.put_n(7, 25)
    await old.ha.become_slave(master_ha_address=new.ha.address, epoch=2)
    assert await waiting is PutStatus.FLUSH_SLAVE_TIMEOUT
    await until(lambda: in_step(*all_logs(nodes)), "the old master to follow the new one")
    assert old.log.truncations == [boundary]
    assert new.log.epoch_starts() == [(1, 0), (2, boundary)]
    assert new.ha.runtime_info()["epoch"] == 2


async def test_a_new_epoch_in_place_keeps_slaves_streaming(nodes: dict[int, Node]) -> None:
    master = await form_group(nodes)
    master.log.put_n(30, 40)
    await master.ha.become_master(epoch=2, sync_state_set=frozenset({1}), sync_state_set_epoch=1)
    master.log.put_n(30, 40)
    await until(lambda: in_step(*all_logs(nodes)), "slaves to copy both epochs")
    assert [epoch for epoch, _ in nodes[2].log.epoch_starts()] == [1, 2]
    assert nodes[2].ha.runtime_info()["slave"]["sessions"] == 1  # never reconnected


async def open_ha(address: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(*split_address(address))


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    async with asyncio.timeout(5):
        while await reader.read(65536):
            pass
    return True


async def test_only_a_master_accepts_slaves_and_never_one_with_its_own_id(nodes: dict[int, Node]) -> None:
    master = await form_group(nodes)
    reader, writer = await open_ha(nodes[2].ha.address)
    try:
        assert await closed_by_peer(reader)
    finally:
        writer.close()
        await writer.wait_closed()
    reader, writer = await open_ha(master.ha.address)
    try:
        writer.write(encode(SlaveHandshake(slave_broker_id=1)))
        assert await closed_by_peer(reader)
    finally:
        writer.close()
        await writer.wait_closed()


async def test_a_second_connection_of_one_slave_replaces_the_first(nodes: dict[int, Node]) -> None:
    master = await form_group(nodes)
    await until(lambda: len(master.ha.runtime_info()["connections"]) == 2, "both slaves connected")
    reader, writer = await open_ha(master.ha.address)
    try:
        writer.write(encode(SlaveHandshake(slave_broker_id=2)))
        await until(lambda: nodes[2].ha.runtime_info()["slave"]["sessions"] == 2, "slave 2's own client to reconnect")
        assert await closed_by_peer(reader)  # ... which in turn replaced this impostor
    finally:
        writer.close()
        await writer.wait_closed()
    ids = [c["slaveId"] for c in master.ha.runtime_info()["connections"]]
    assert ids == [2, 3]


async def test_a_learner_replicates_but_never_joins_nor_counts(nodes: dict[int, Node]) -> None:
    master = await form_group(nodes)
    log = FakeLog(segment_size=4096)
    learner = HAService(
        log,
        broker_id=4,
        settings=SETTINGS.model_copy(update={"async_learner": True}),
        on_sync_state_set_change=lambda _: None,
    )
    try:
        await learner.become_slave(master_ha_address=master.ha.address, epoch=1)
        master.log.put_n(10)
        await until(lambda: in_step(*all_logs(nodes), log), "a copy")
        await until(lambda: master.ha.sync_state_set == {1, 2, 3}, "the group to form")
        assert all(4 not in p for p in master.controller.proposals)
        [info] = [c for c in master.ha.runtime_info()["connections"] if c["slaveId"] == 4]
        assert (info["learner"], info["inSync"]) == (True, False)
    finally:
        await learner.stop()


async def test_an_append_on_another_thread_reaches_the_loop(nodes: dict[int, Node]) -> None:
    master = nodes[1]
    await master.ha.become_master(epoch=1, sync_state_set=frozenset({1}), sync_state_set_epoch=1)
    end = await asyncio.to_thread(master.log.put_n, 3)
    await until(lambda: master.log.confirm_offset == end, "a single-member set to confirm the append")


async def test_the_master_closes_a_silent_link_after_the_housekeeping_interval_and_keeps_talking_ones() -> None:
    settings = SETTINGS.model_copy(update={"housekeeping_interval_ms": 400})
    group: dict[int, Node] = {}
    for broker_id in (1, 2):
        log, controller = FakeLog(segment_size=4096), Controller()
        ha = HAService(log, broker_id=broker_id, settings=settings, on_sync_state_set_change=controller)
        controller.service = ha
        await ha.start()
        group[broker_id] = Node(broker_id, log, ha, controller)
    try:
        master = group[1]
        await master.ha.become_master(epoch=1, sync_state_set=frozenset({1}), sync_state_set_epoch=1)
        await group[2].ha.become_slave(master_ha_address=master.ha.address, epoch=1)
        reader, writer = await open_ha(master.ha.address)
        try:
            writer.write(encode(SlaveHandshake(slave_broker_id=3)))  # then never a frame again
            started = asyncio.get_running_loop().time()
            await until(lambda: len(master.ha.runtime_info()["connections"]) == 2, "both links up")
            assert await closed_by_peer(reader)
            assert asyncio.get_running_loop().time() - started >= 0.35
        finally:
            writer.close()
            await writer.wait_closed()
        await until(lambda: master.ha.sync_state_set == {1, 2}, "the slave to join the sync-state-set")
        for _ in range(4):  # the real slave answers every heartbeat: its link outlives several intervals
            assert await master.ha.wait_replicated(master.log.put_n(2)) is PutStatus.PUT_OK
            await asyncio.sleep(0.3)  # time passing is what this checks: nothing to poll for
        assert [c["slaveId"] for c in master.ha.runtime_info()["connections"]] == [2]
        assert group[2].ha.runtime_info()["slave"]["sessions"] == 1
    finally:
        for node in group.values():
            await node.ha.stop()


async def test_a_slave_ends_a_session_with_a_silent_master_after_the_housekeeping_interval() -> None:
    """The slave's follow loop keeps one watchdog timer (issue 17), not a timeout per read: a master that
    takes the handshake and then sends nothing still ends the session after the interval, and the slave
    connects again."""
    settings = SETTINGS.model_copy(update={"housekeeping_interval_ms": 400})
    accepted: list[float] = []
    loop = asyncio.get_running_loop()

    async def silent_master(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(loop.time())
        while await reader.read(65536):  # takes whatever the slave sends, answers nothing
            pass
        writer.close()

    server = await asyncio.start_server(silent_master, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    slave = HAService(FakeLog(segment_size=4096), broker_id=2, settings=settings, on_sync_state_set_change=Controller())
    await slave.start()
    try:
        await slave.become_slave(master_ha_address=f"127.0.0.1:{port}", epoch=1)
        await until(lambda: len(accepted) >= 2, "the slave to give up on the silent master and connect again")
        assert accepted[1] - accepted[0] >= 0.35
        error = slave.runtime_info()["slave"]["lastError"]
        assert error == "TimeoutError: no frame from the master for 400 ms", error
    finally:
        await slave.stop()
        server.close()
        await server.wait_closed()


async def test_a_slave_with_a_smaller_transfer_batch_setting_takes_the_master_s_larger_frames() -> None:
    """Mixed `ha.transfer_batch_size` during a rolling change (the default went from RocketMQ's 32 KiB to 256
    KiB, issue 17): a slave takes frames up to 32 MiB whatever its own setting, so it keeps replicating."""
    big = SETTINGS.model_copy(update={"transfer_batch_size": 256 * 1024})
    logs = {1: FakeLog(segment_size=1 << 20), 2: FakeLog(segment_size=1 << 20)}
    master = HAService(logs[1], broker_id=1, settings=big, on_sync_state_set_change=Controller(auto=False))
    slave = HAService(logs[2], broker_id=2, settings=SETTINGS, on_sync_state_set_change=Controller(auto=False))
    await master.start()
    await slave.start()
    try:
        await master.become_master(epoch=1, sync_state_set=frozenset({1}), sync_state_set_epoch=1)
        await slave.become_slave(master_ha_address=master.address, epoch=1)
        logs[1].put_n(200, 1000)  # about 200 KiB in one write: one frame at 256 KiB, 200 at the slave's 1 KiB
        await until(lambda: in_step(logs[1], logs[2]), "the slave to copy the master's log")
        assert slave.runtime_info()["role"] == "slave"
    finally:
        await slave.stop()
        await master.stop()
