"""The role manager's alter-sync-state-set reports (issue 22): sent with the sync-state epoch the
proposal was made at, dropped once a newer epoch settled it, and settled by a definitive refusal.

The controller client is faked at our own seam; the replication side is the real
`SyncStateSetManager` behind the `Replication` methods the reports use."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from brokergroup.broker.ha.syncset import SyncStateSetManager
from brokergroup.broker.role import Role, RoleManager
from brokergroup.broker.settings import BrokerSettings
from brokergroup.controller import protocol
from brokergroup.controller.codes import ControllerError, ResponseCode


class Replication:
    def __init__(self) -> None:
        self.manager = SyncStateSetManager(1, max_time_slave_not_catchup_ms=1000, all_ack=True)
        self.manager.reset(frozenset({1}), 1, now_ms=0)

    def set_sync_state_set(self, members: frozenset[int], epoch: int) -> None:
        self.manager.confirm(members, epoch)

    def refuse_proposal(self, members: frozenset[int], epoch: int) -> None:
        self.manager.refused(members, epoch)

    @property
    def sync_state_set_epoch(self) -> int:
        return self.manager.local_epoch

    def propose(self, role: RoleManager, members: set[int]) -> None:
        """What `HAService._propose` does: record the proposal, then call the role back."""
        self.manager.mark_synchronizing(frozenset(members))
        role.on_sync_state_set_change(frozenset(members))


class Store:
    confirm_offset = 700


class Controller:
    def __init__(
        self, answer: Callable[[protocol.AlterSyncStateSetRequest], protocol.AlterSyncStateSetResponse]
    ) -> None:
        self.requests: list[protocol.AlterSyncStateSetRequest] = []
        self._answer = answer

    async def alter_sync_state_set(self, req: protocol.AlterSyncStateSetRequest) -> protocol.AlterSyncStateSetResponse:
        self.requests.append(req)
        await asyncio.sleep(0)
        return self._answer(req)


def commit(req: protocol.AlterSyncStateSetRequest) -> protocol.AlterSyncStateSetResponse:
    return protocol.AlterSyncStateSetResponse(
        sync_state_set=req.sync_state_set, sync_state_set_epoch=req.sync_state_set_epoch + 1
    )


def role_with(tmp_path: Path, controller: Controller) -> tuple[RoleManager, Replication]:
    settings = BrokerSettings(data_dir=tmp_path, controller={"heartbeat_interval_ms": 100})
    replication = Replication()
    role = RoleManager(
        settings=settings,
        store=Store(),  # type: ignore[arg-type]
        make_ha=lambda _: replication,  # type: ignore[arg-type,return-value]
        controller=controller,  # type: ignore[arg-type]
        session=None,  # type: ignore[arg-type]
        address="127.0.0.1:10911",
    )
    role.ha = replication  # type: ignore[assignment]
    role.broker_id, role.role, role.master_epoch = 1, Role.MASTER, 1
    return role, replication


async def until(predicate: Callable[[], Any], what: str, timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def test_a_proposal_made_before_a_confirmation_is_not_sent_after_it(tmp_path: Path) -> None:
    """P1 = {1, 2} and P2 = {1, 2, 3}, both made at epoch 1. P1 commits at epoch 2: P2 can never
    commit at its epoch, and must not be sent with epoch 2 (it would commit while the master,
    whose window P1's answer closed, acks without broker 3)."""
    controller = Controller(commit)
    role, replication = role_with(tmp_path, controller)
    replication.propose(role, {1, 2})
    replication.propose(role, {1, 2, 3})
    await until(lambda: not replication.manager.synchronizing, "the first answer")
    await until(lambda: all(t.done() for t in asyncio.all_tasks() if t is not asyncio.current_task()), "the reports")
    assert [(r.sync_state_set, r.sync_state_set_epoch, r.confirm_offset) for r in controller.requests] == [
        ([1, 2], 1, 700)
    ]
    assert (replication.manager.local, replication.manager.local_epoch) == ({1, 2}, 2)


async def test_a_definitive_refusal_is_retried_once_then_settles_the_proposal(tmp_path: Path) -> None:
    def refuse(req: protocol.AlterSyncStateSetRequest) -> protocol.AlterSyncStateSetResponse:
        raise ControllerError(ResponseCode.CONTROLLER_INVALID_REPLICAS, "the replica {2} is behind")

    controller = Controller(refuse)
    role, replication = role_with(tmp_path, controller)
    replication.propose(role, {1, 2})
    assert replication.manager.effective() == {1, 2}
    await until(lambda: not replication.manager.synchronizing, "the refusal to settle the proposal")
    assert [(r.sync_state_set, r.sync_state_set_epoch) for r in controller.requests] == [([1, 2], 1), ([1, 2], 1)]
    assert replication.manager.effective() == {1}


@pytest.mark.parametrize("code", [ResponseCode.SYSTEM_ERROR, ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH])
async def test_an_unknown_outcome_keeps_the_proposal_and_rereads(tmp_path: Path, code: ResponseCode) -> None:
    def fail(req: protocol.AlterSyncStateSetRequest) -> protocol.AlterSyncStateSetResponse:
        raise ControllerError(code, "lost")

    controller = Controller(fail)
    role, replication = role_with(tmp_path, controller)
    replication.propose(role, {1, 2})
    await until(lambda: role._sync_now.is_set(), "a re-read of the controller")
    assert len(controller.requests) == 1
    assert replication.manager.pending == ({1, 2},)  # a lost reply may hide a commit


async def test_a_report_that_breaks_is_told_like_the_role_s_other_tasks_and_not_kept(tmp_path: Path) -> None:
    """Not a controller's refusal but a bug: the broker hears of it (`on_failure` stops it, exit 1) instead of
    the proposal staying pending with nothing logged until the task is garbage-collected."""

    def broken(req: protocol.AlterSyncStateSetRequest) -> protocol.AlterSyncStateSetResponse:
        raise RuntimeError("a bug")

    role, replication = role_with(tmp_path, Controller(broken))
    told: list[tuple[str, str]] = []
    role.on_failure = lambda what, error: told.append((what, str(error)))
    replication.propose(role, {1, 2})
    await until(lambda: told, "the failure to be told")
    assert told == [("sync-state-set report", "a bug")]
    await until(lambda: not role._reports, "the ended report to be dropped")
