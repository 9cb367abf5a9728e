"""`GET /v1/raft/state-digest`: every node reports the same digest at the same applied index."""

from __future__ import annotations

from brokergroup.controller.agreement import state_digest, wait_for_agreement
from brokergroup.local.controllers import ControllerGroup
from tests.integration.controller.scenario import elect_and_grow, register_replicas


async def test_nodes_agree_and_the_digest_follows_the_state(controller_group: ControllerGroup) -> None:
    group = controller_group
    await group.leader()
    async with group.client() as client:
        before = await wait_for_agreement(client, group.api_addresses)
        assert before.agreed, before.problem
        await register_replicas(client, "set-d")
        await elect_and_grow(client, "set-d")
        after = await wait_for_agreement(client, group.api_addresses)
        assert after.agreed, after.problem
        one = await state_digest(client, group.api_addresses[0])
    assert set(one) == {"node_id", "term", "last_applied", "digest"}
    assert one["node_id"] == group.nodes[0].node_id
    assert len(one["digest"]) == 64
    assert after.digests[0]["digest"] != before.digests[0]["digest"], "new state, same digest"
    assert after.digests[0]["last_applied"] > before.digests[0]["last_applied"]
