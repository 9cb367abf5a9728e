"""A node that was away does not depose a healthy leader (PreVote with leader stickiness, issue 22).

Before the fix a SIGSTOPped follower, resumed, started an election with a higher term and the
healthy leader stepped down (term 1 -> 4, 0.7 s without a leader)."""

from __future__ import annotations

import asyncio
import signal
import time

from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import eventually


async def statuses(group: ControllerGroup) -> list[dict[str, object]]:
    async with group.client(timeout=2.0) as client:
        return [await client.status(address=n.api) for n in group.nodes]


async def test_a_resumed_follower_does_not_depose_the_leader(controller_group: ControllerGroup) -> None:
    group = controller_group
    leader = await group.leader()

    async def all_follow() -> bool:
        return all(s["leaderId"] == group.nodes[leader].node_id for s in await statuses(group))

    await eventually("every node follows the leader", all_follow)
    term = (await statuses(group))[leader]["term"]
    follower = (leader + 1) % 3
    group.signal(follower, signal.SIGSTOP)
    try:
        # far past its election timeout (1.4 s) and the leader's connection timeout (3.5 s)
        stopped_until = time.monotonic() + 5.0
        while time.monotonic() < stopped_until:
            s = (await statuses_of(group, exclude=follower))[0]
            assert s["leaderId"] == group.nodes[leader].node_id and s["term"] == term
            await asyncio.sleep(0.2)
    finally:
        group.signal(follower, signal.SIGCONT)

    async def rejoined() -> bool:
        s = await statuses(group)
        return s[follower]["leaderId"] == group.nodes[leader].node_id and s[follower]["term"] == term

    await eventually("the resumed follower rejoins in the same term", rejoined, timeout=30)
    watch_until = time.monotonic() + 5.0
    while time.monotonic() < watch_until:  # and stays there: no election follows
        for i, s in enumerate(await statuses(group)):
            assert s["term"] == term, f"term changed from {term}: {s}"
            # The resumed node may drop the leader for an election timeout while its stale connection is
            # replaced (it forgets a silent leader); it never follows another node, and the others never waver.
            allowed = {group.nodes[leader].node_id, None} if i == follower else {group.nodes[leader].node_id}
            assert s["leaderId"] in allowed, f"leader changed: {s}"
        await asyncio.sleep(0.2)
    await eventually("the resumed follower follows the leader again", rejoined, timeout=30)


async def statuses_of(group: ControllerGroup, *, exclude: int) -> list[dict[str, object]]:
    async with group.client(timeout=10.0) as client:
        return [await client.status(address=n.api) for i, n in enumerate(group.nodes) if i != exclude]
