"""Issue 23 items 2 and 4 against a real controller group: docs/operations.md's clean-broker-metadata
commands, run as written, refuse to strand a set's replicas unless forced; after a forced clean, the
set recreated by the next apply-id elects only with enableElectUncleanMaster, never "first time"."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from brokergroup.controller import protocol
from brokergroup.controller.codes import ControllerError, ResponseCode
from brokergroup.local.controllers import ControllerGroup
from tests.integration.conftest import ADMIN_TOKEN
from tests.integration.controller.scenario import CLUSTER, heartbeat_all, register_replicas
from tests.integration.controller.test_admin_cli import admin

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

DOC = Path(__file__).resolve().parents[3] / "docs" / "operations.md"
SET = "guarded"


def documented_lines() -> list[str]:
    section = DOC.read_text(encoding="utf-8").split("### Remove a decommissioned replica", 1)[1].split("\n### ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block is not None, "docs/operations.md lost its clean-broker-metadata example"
    return [line for line in block[1].splitlines() if line.strip()]


async def run_line(line: str, group: ControllerGroup) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "BG_ADMIN_TOKEN": ADMIN_TOKEN,
        "CONTROLLERS": ";".join(group.api_addresses),
        "BROKER_SET": SET,
        "BROKER_ID": "1",
        "CLUSTER": CLUSTER,
    }
    return await asyncio.to_thread(
        subprocess.run, line, shell=True, capture_output=True, text=True, timeout=60, env=env
    )


async def test_documented_clean_refuses_then_forces_and_the_recreated_set_needs_the_unclean_flag(
    controller_group: ControllerGroup,
) -> None:
    group = controller_group
    addrs = ";".join(group.api_addresses)
    async with group.client() as client:
        # Master 1 is dead (no heartbeat) and alone in the sync-state-set; replicas 2 and 3 are alive.
        await register_replicas(client, SET, (1,), heartbeat=False)
        await register_replicas(client, SET, (2, 3))
        elected = await client.elect_master(
            protocol.ElectMasterRequest(cluster_name=CLUSTER, broker_name=SET, broker_id=1)
        )
        assert elected.master_broker_id == 1 and elected.sync_state_set == [1]

        refuse, force = documented_lines()
        refused = await run_line(refuse, group)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "CONTROLLER_INVALID_CLEAN_BROKER_METADATA (2009)" in refused.stderr
        assert "would empty the sync-state-set [1]" in refused.stderr
        assert "alive: 2 (127.0.0.1:40002), 3 (127.0.0.1:40003); not alive: none" in refused.stderr
        kept = await admin("get-sync-state-set", "-a", addrs, "-b", SET, "--json")
        # (the controller may meanwhile have recorded that dead master 1 is gone: masterBrokerId null)
        kept_set = json.loads(kept.stdout)["replicasInfoTable"][SET]["inSyncReplicas"]
        assert [r["brokerId"] for r in kept_set] == [1]

        forced = await run_line(force, group)
        assert forced.returncode == 0, forced.stderr
        gone = await admin("get-sync-state-set", "-a", addrs, "-b", SET, "--json")
        assert json.loads(gone.stdout)["replicasInfoTable"] == {}

        off = await admin("update-controller-config", "-a", addrs, "-k", "enableElectUncleanMaster", "-v", "false")
        assert off.returncode == 0, off.stderr
        nxt = await client.next_id(protocol.NextIdRequest(cluster_name=CLUSTER, broker_name=SET))
        assert nxt.next_broker_id == 4
        await register_replicas(client, SET, (4,), heartbeat=False)
        # RocketMQ: broker 4, dead and with no data, would win this "first-time" election.
        with pytest.raises(ControllerError) as failed:
            await client.elect_master(protocol.ElectMasterRequest(cluster_name=CLUSTER, broker_name=SET, broker_id=4))
        assert failed.value.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED

        on = await admin("update-controller-config", "-a", addrs, "-k", "enableElectUncleanMaster", "-v", "true")
        assert on.returncode == 0, on.stderr
        await heartbeat_all(client, SET, (4,))
        won = await client.elect_master(protocol.ElectMasterRequest(cluster_name=CLUSTER, broker_name=SET, broker_id=4))
        assert (won.master_broker_id, won.master_epoch) == (4, 2)
