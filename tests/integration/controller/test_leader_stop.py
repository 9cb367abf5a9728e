"""A controller leader stopped gracefully (SIGTERM: a rolling restart, a drained node) closes its
brokers' heartbeat streams on the way out. Those closes are its own doing, not the brokers': it must
not mark the brokers inactive for them, nor elect a set's master away (with every stream closed on
that node, such an election finds no live replica and leaves the set without a master)."""

from __future__ import annotations

from brokergroup.local.controllers import ControllerGroup
from tests.integration.controller.scenario import logged
from tests.integration.controller.test_heartbeat_stream import Brokers, setup_set
from tests.integration.controller.test_heartbeat_stream import brokers as brokers  # the fixture

SET = "set-roll"


async def test_a_stopping_leader_keeps_the_masters_whose_streams_it_closes(
    controller_group: ControllerGroup, brokers: Brokers
) -> None:
    group = controller_group
    leader = await group.leader()
    await setup_set(group, brokers, SET, timeout_ms=60_000)
    async with group.client() as client:
        before = await client.replica_info(SET)
    assert before.master_broker_id == 1

    group.nodes[leader].stop()  # SIGTERM, and wait for the process to end
    await group.leader(exclude={leader}, timeout=60)  # serving: it has applied everything committed before
    async with group.client() as client:
        after = await client.replica_info(SET)
    assert (after.master_broker_id, after.master_epoch) == (1, before.master_epoch), after
    for node in range(3):
        elections = logged(group, node, "ELECT_MASTER")
        assert [e["masterEpoch"] for e in elections] == [before.master_epoch], (node, elections)
    assert logged(group, leader, "CHANNEL_CLOSED") == []


async def test_stopping_every_node_at_once_logs_no_broker_as_lost(
    controller_group: ControllerGroup, brokers: Brokers
) -> None:
    """The whole group stopped while its brokers run (the audit test's shutdown): before the fix the
    leader logged a CHANNEL_CLOSED for every broker, and sometimes committed an election with no master."""
    group = controller_group
    leader = await group.leader()
    await setup_set(group, brokers, SET, timeout_ms=60_000)
    group.stop_all()
    for node in range(3):
        assert [e["masterEpoch"] for e in logged(group, node, "ELECT_MASTER")] == [1], node
        assert logged(group, node, "CHANNEL_CLOSED") == [], (node, node == leader)
