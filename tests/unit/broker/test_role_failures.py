"""The role manager tells `on_failure` when a task it depends on ends with an error, so that the broker
process stops and says why (`node`), instead of staying up fenced or stale and silent. Here: a slave
whose replication cannot start from its master's log (a damaged log, CorruptLogError) is told; one whose
log is newer than the master's epoch (ReplicationError) is not, it stays fenced as a master would. The
master's status is served by a real aiohttp server on loopback; the replication side is faked at our own
seam. tests/integration/broker/test_start_failures.py stops real broker processes at start."""

from __future__ import annotations

from pathlib import Path

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer
from ha_fakes import until

from brokergroup.broker.errors import CorruptLogError
from brokergroup.broker.ha import ReplicationError
from brokergroup.broker.role import Decision, Role, RoleManager
from brokergroup.broker.settings import BrokerSettings


class Replication:
    def __init__(self, error: Exception | None) -> None:
        self.error = error
        self.following: list[tuple[str, int]] = []

    async def become_slave(self, *, master_ha_address: str, epoch: int) -> None:
        if self.error is not None:
            raise self.error
        self.following.append((master_ha_address, epoch))

    async def stop(self) -> None:
        pass


async def follow(tmp_path: Path, replication: Replication) -> tuple[RoleManager, list[tuple[str, BaseException]]]:
    """A role (broker 2) told by the controller to follow broker 1, whose status a real server answers."""

    async def status(_: web.Request) -> web.Response:
        return web.json_response({"haAddress": "127.0.0.1:10912"})

    app = web.Application()
    app.router.add_get("/v1/status", status)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    session = aiohttp.ClientSession()
    role = RoleManager(
        settings=BrokerSettings(data_dir=tmp_path),
        store=None,  # type: ignore[arg-type]
        make_ha=lambda _: replication,  # type: ignore[arg-type,return-value]
        controller=None,  # type: ignore[arg-type]
        session=session,
        address="127.0.0.1:10921",
    )
    role.ha, role.broker_id = replication, 2  # type: ignore[assignment]
    told: list[tuple[str, BaseException]] = []
    role.on_failure = lambda what, error: told.append((what, error))
    master = f"127.0.0.1:{server.port}"
    try:
        await role.apply(Decision(1, master, 3, 1, frozenset({1, 2})))
        assert (role.role, role.master_address) == (Role.SLAVE, master)
        await until(
            lambda: bool(told or replication.following or role.fenced), "the slave to follow, fail or fence", 10
        )
        await role.close()  # a failure already told is not raised again; a cancelled task is no failure
    finally:
        await session.close()
        await server.close()
    return role, told


async def test_a_slave_whose_replication_cannot_start_tells_on_failure(tmp_path: Path) -> None:
    damaged = CorruptLogError("commit log: crc32 mismatch at offset 4096, valid records follow")
    _, told = await follow(tmp_path, Replication(damaged))
    assert told == [("following the master", damaged)]


async def test_a_slave_that_follows_its_master_tells_nothing(tmp_path: Path) -> None:
    replication = Replication(None)
    _, told = await follow(tmp_path, replication)
    assert replication.following == [("127.0.0.1:10912", 3)]
    assert told == []


async def test_a_slave_whose_log_is_newer_than_the_master_s_epoch_stays_fenced(tmp_path: Path) -> None:
    """Not a failure that stops the broker: the controller's state went back in time (as for the master role,
    `change_to_master`), and a restart would find the same."""
    newer = ReplicationError("cannot follow a master at epoch 3: the log already has epoch 5")
    role, told = await follow(tmp_path, Replication(newer))
    assert told == []
    assert (role.role, role.fenced) == (Role.NONE, True)
