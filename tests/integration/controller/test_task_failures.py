"""A controller node whose leader loop or scans die stops, naming why, instead of staying up with no
leader loop (never ready) or no scan for dead masters (no failover). One real node in this process
(Raft, event log, HTTP API on loopback); the failure is injected into the scan it stands for."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from brokergroup.common.lasting import TaskFailedError
from brokergroup.controller import node as controller_node
from brokergroup.controller.service import ControllerService
from brokergroup.controller.settings import ControllerSettings
from brokergroup.local.ports import free_ports
from tests.integration.conftest import eventually


def one_node(tmp_path: Path) -> ControllerSettings:
    raft, api = free_ports(2)
    return ControllerSettings.model_validate(
        {
            "node_id": "n0",
            "peers": f"n0=127.0.0.1:{raft},127.0.0.1:{api}",
            "data_dir": tmp_path,
            "raft": {"password": "test-password"},
            "api": {"host": "127.0.0.1", "port": api},
        }
    )


async def test_a_controller_whose_scan_fails_stops_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = one_node(tmp_path)
    served: list[int] = []

    async def failing_scan(self: ControllerService) -> None:
        async with aiohttp.ClientSession() as session:  # the node serves before the scan fails

            async def healthy() -> bool:
                async with session.get(f"http://127.0.0.1:{settings.api.port}/healthz") as r:
                    served.append(r.status)
                    return r.status == 200

            await eventually("the node answers /healthz", healthy)
        raise RuntimeError("injected: the state machine refused a read")

    monkeypatch.setattr(ControllerService, "_scan_inactive_master_loop", failing_scan)
    with pytest.raises(TaskFailedError) as raised:
        await asyncio.wait_for(controller_node.run_node(settings), timeout=60)
    assert served[-1] == 200
    assert str(raised.value) == (
        "the controller stopped: its inactive-master scan failed: injected: the state machine refused a read"
    )
    # Everything was closed on the way out: the API port can be bound again.
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", settings.api.port)
    server.close()
    await server.wait_closed()
