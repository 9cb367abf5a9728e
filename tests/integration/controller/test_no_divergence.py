"""Under a pipelined alter-sync-state-set load no follower truncates entries it already applied.

pysyncobj 0.3.17 rewound the leader's nextIndex on a late success reply and the follower then
truncated and re-appended entries it had ("truncating already-applied log entries ... may have
diverged", about 9 lines per 1,200 operations). With the fixes: none, and the states agree."""

from __future__ import annotations

import asyncio

from brokergroup.bench.controller import DIVERGENCE, divergence_warnings, prepare_set
from brokergroup.controller import protocol
from brokergroup.controller.agreement import wait_for_agreement
from brokergroup.controller.client import ControllerClient
from brokergroup.local.controllers import ControllerGroup

SETS = 6
OPS_PER_SET = 200


async def test_no_follower_truncates_applied_entries_under_load(controller_group: ControllerGroup) -> None:
    group = controller_group
    leader = group.nodes[await group.leader()].api
    # heartbeat tables are node-local: register and heartbeat at the leader, as the bench does
    async with ControllerClient([leader], token=group.admin_token, timeout=10.0) as client:
        for s in range(SETS):
            await prepare_set(client, f"set-{s}")

        async def alter_loop(name: str) -> int:
            done = 0
            for i in range(OPS_PER_SET):
                info = await client.replica_info(name)
                await client.alter_sync_state_set(
                    protocol.AlterSyncStateSetRequest(
                        broker_name=name,
                        master_broker_id=1,
                        master_epoch=info.master_epoch,
                        sync_state_set=[1, 2, 3] if i % 2 == 0 else [1],
                        sync_state_set_epoch=info.sync_state_set_epoch,
                    )
                )
                done += 1
            return done

        done = await asyncio.gather(*(alter_loop(f"set-{s}") for s in range(SETS)))
        assert sum(done) == SETS * OPS_PER_SET
        agreed = await wait_for_agreement(client, group.api_addresses, timeout=60)
    assert agreed.agreed, agreed.problem
    logs = "\n".join(n.log_path.read_text(errors="replace") for n in group.nodes)
    assert divergence_warnings(group) == 0, [line for line in logs.splitlines() if DIVERGENCE in line][:5]
