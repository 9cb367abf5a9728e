"""The write lease is renewed only while the controller leader hears this broker's heartbeats (issue 22, item 3).

Replica-info and heartbeats travel separately: a master whose replica-info calls reach the leader
while its heartbeats do not would otherwise keep acknowledging after the leader declared it dead
and elected another. The controller's answer says how long ago it heard the broker
(`heartbeatAgeMs`); the lease is renewed only when that is within the settings' margin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from brokergroup.broker.role import Role, RoleManager
from brokergroup.broker.settings import BrokerSettings
from brokergroup.broker.store.types import PutStatus
from brokergroup.controller import protocol

EPOCH = 3


class AnsweringController:
    """The controller seam: replica-info answers what the test says; records what was asked."""

    def __init__(self) -> None:
        self.heartbeat_age_ms: int | None = None
        self.asked: list[dict[str, Any]] = []

    async def replica_info(
        self, broker_name: str, *, broker_id: int | None = None, timeout: float | None = None
    ) -> protocol.ReplicaInfoResponse:
        self.asked.append({"brokerName": broker_name, "brokerId": broker_id, "timeout": timeout})
        return protocol.ReplicaInfoResponse(
            master_broker_id=1,
            master_address="127.0.0.1:1",
            master_epoch=EPOCH,
            sync_state_set=[1, 2],
            sync_state_set_epoch=1,
            heartbeat_age_ms=self.heartbeat_age_ms,
        )


class QuietReplication:
    """Replication as far as a master's replica-info read touches it: every call does nothing."""

    sync_state_set_epoch = 1
    sync_state_set = frozenset({1, 2})

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


@pytest.fixture
def master(tmp_path: Path) -> tuple[RoleManager, AnsweringController]:
    controller = AnsweringController()
    role = RoleManager(
        settings=BrokerSettings(data_dir=tmp_path),
        store=None,  # type: ignore[arg-type]  # not read by sync_once
        make_ha=lambda _id: QuietReplication(),  # type: ignore[arg-type,return-value]
        controller=controller,  # type: ignore[arg-type]
        session=None,  # type: ignore[arg-type]  # the heartbeat streams are never started here
        address="127.0.0.1:1",
    )
    role.broker_id, role.role, role.master_epoch, role.fenced = 1, Role.MASTER, EPOCH, False
    role.ha = QuietReplication()  # type: ignore[assignment]
    return role, controller


async def test_a_leader_that_never_heard_the_heartbeats_renews_no_lease(
    master: tuple[RoleManager, AnsweringController],
) -> None:
    role, controller = master
    controller.heartbeat_age_ms = None
    await role.sync_once()
    assert controller.asked[-1]["brokerId"] == 1  # the read names this broker, so the answer can say
    assert role.lease_remaining_ms() == 0
    refused = role.check_write()
    assert refused is not None and refused[0] is PutStatus.SERVICE_NOT_AVAILABLE


async def test_a_heartbeat_older_than_the_margin_renews_no_lease(
    master: tuple[RoleManager, AnsweringController],
) -> None:
    role, controller = master
    margin = role.settings.controller.max_heartbeat_age_ms
    assert margin == 10_000 - 5000 - 3000  # heartbeat timeout - lease - the deposed leader's fallback
    controller.heartbeat_age_ms = margin + 1
    await role.sync_once()
    assert role.lease_remaining_ms() == 0


async def test_a_recent_heartbeat_renews_the_lease(master: tuple[RoleManager, AnsweringController]) -> None:
    role, controller = master
    controller.heartbeat_age_ms = role.settings.controller.max_heartbeat_age_ms
    await role.sync_once()
    assert 0 < role.lease_remaining_ms() <= role.settings.controller.write_lease_ms
    assert role.check_write() is None
    # A read stuck behind a hung node gives up after half the lease, so the next one can renew it.
    assert controller.asked[-1]["timeout"] == role.settings.controller.write_lease_ms / 2000
