"""A hung controller node (SIGSTOP) costs the admin CLI no more than its timeout (issue 22, item 3).

Reads are hedged across the nodes and node-local commands ask every node at once, so with the
first address stopped `get-controller-metadata` and `get-sync-state-set` answer about as fast as
with every node up, and `get-controller-config` reports the stopped node within `--timeout`.
"""

from __future__ import annotations

import json
import signal
import time

from brokergroup.local.controllers import ControllerGroup
from tests.integration.controller.scenario import elect_and_grow, register_replicas
from tests.integration.controller.test_admin_cli import admin


async def timed(*args: str) -> tuple[float, int, str, str]:
    started = time.monotonic()
    done = await admin(*args)
    return time.monotonic() - started, done.returncode, done.stdout, done.stderr


async def test_admin_skips_a_stopped_node_within_its_timeout(controller_group: ControllerGroup) -> None:
    group = controller_group
    leader = await group.leader()
    async with group.client() as client:
        await register_replicas(client, "hung")
        await elect_and_grow(client, "hung")
    victim = (leader + 1) % 3
    addrs = ";".join([group.nodes[victim].api, *(n.api for i, n in enumerate(group.nodes) if i != victim)])
    healthy, code, _, err = await timed("get-sync-state-set", "-a", addrs, "-b", "hung", "--json", "--timeout", "2")
    assert code == 0, err
    group.signal(victim, signal.SIGSTOP)
    try:
        took, code, out, err = await timed("get-sync-state-set", "-a", addrs, "-b", "hung", "--json", "--timeout", "2")
        assert code == 0, err
        assert json.loads(out)["replicasInfoTable"]["hung"]["masterBrokerId"] == 1
        assert took < healthy + 1.5, f"get-sync-state-set took {took:.1f} s ({healthy:.1f} s with every node up)"

        took, code, out, err = await timed("get-controller-metadata", "-a", addrs, "--json", "--timeout", "2")
        assert code == 0, err
        assert json.loads(out)["controllerLeaderAddress"] == group.nodes[leader].api
        assert took < healthy + 1.5

        took, code, out, err = await timed("get-controller-config", "-a", addrs, "--json", "--timeout", "2")
        assert code == 0, err
        configs = json.loads(out)
        assert "no answer within" in configs[group.nodes[victim].api]["error"]
        assert configs[group.nodes[leader].api]["enableElectUncleanMaster"] is False
        assert took < healthy + 2 + 1.5, f"get-controller-config took {took:.1f} s with --timeout 2"
        print(f"admin with the first node stopped: {took:.2f} s (every node up: {healthy:.2f} s)")
    finally:
        group.signal(victim, signal.SIGCONT)
