"""A controller whose journal ends in a torn record starts, cuts it with one warning, and agrees with its peers.

pysyncobj's own journal stopped a node for good in this case (`struct.error` at every start)."""

from __future__ import annotations

import signal

from brokergroup.controller import journal
from brokergroup.controller.agreement import wait_for_agreement
from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import eventually
from tests.integration.controller.scenario import elect_and_grow, register_replicas


async def test_a_torn_tail_is_cut_and_the_node_catches_up(controller_group: ControllerGroup) -> None:
    group = controller_group
    leader = await group.leader()
    async with group.client() as client:
        await register_replicas(client, "set-t")
        await elect_and_grow(client, "set-t")
        assert (await wait_for_agreement(client, group.api_addresses)).agreed
    follower = (leader + 1) % 3
    group.signal(follower, signal.SIGKILL)
    log = group.nodes[follower].data_dir / "raft" / journal.LOG
    size = log.stat().st_size
    with log.open("ab") as f:  # a record header written back without its record, then garbage
        f.write(journal.RECORD.pack(4096, 0xDEADBEEF, 10**6, 1) + b"\x00\x17" * 7)
    group.start(follower)

    async def follows() -> bool:
        async with group.client(timeout=2.0) as client:
            return bool((await client.status(address=group.nodes[follower].api))["leaderId"])

    await eventually("the node with the torn journal starts and follows a leader", follows, timeout=30)
    async with group.client() as client:
        await register_replicas(client, "set-t2")  # new entries after the restart reach it too
        agreed = await wait_for_agreement(client, group.api_addresses, timeout=60)
    assert agreed.agreed, agreed.problem
    lines = [line for line in group.nodes[follower].log_path.read_text().splitlines() if "cut the torn tail" in line]
    assert len(lines) == 1, lines
    assert f"at byte {size}" in lines[0] and "longer than the file" in lines[0]
