"""One frozen view of a local cluster: every controller's and every broker's own status, and the
controller's sync-state data, read at once. `take` does the reading; everything else is pure.

`readiness` decides from a snapshot how far a cluster has come up, for `local up`'s progress
display and for `LocalCluster.wait_ready`; `status` renders the same snapshot as tables.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

import aiohttp

from brokergroup.controller import protocol
from brokergroup.controller.client import ControllerClient
from brokergroup.controller.codes import ControllerError
from brokergroup.local.state import ClusterState, ProcessRecord

STATUS_TIMEOUT = aiohttp.ClientTimeout(total=2.0)


def _field(status: dict[str, Any] | None, key: str) -> Any | None:
    """One field of a process's /v1/status; None when it did not answer."""
    return None if status is None else status.get(key)


@dataclasses.dataclass(frozen=True)
class ControllerView:
    name: str
    api: str
    status: dict[str, Any] | None
    """The node's GET /v1/status; None when it did not answer."""

    @property
    def serving(self) -> bool:
        return bool(self.status and self.status.get("serving"))

    @property
    def leader_id(self) -> str | None:
        return _field(self.status, "leaderId")

    @property
    def term(self) -> int | None:
        return _field(self.status, "term")


@dataclasses.dataclass(frozen=True)
class ReplicaView:
    name: str
    api: str
    status: dict[str, Any] | None
    """The broker's GET /v1/status; None when it did not answer."""
    process_alive: bool | None = None
    """Whether its pid is alive, when known."""

    @property
    def role(self) -> str:
        if self.status is None:
            return "down" if self.process_alive is False else "unreachable"
        return str(self.status.get("role", "none"))

    @property
    def broker_id(self) -> int | None:
        return _field(self.status, "brokerId")

    @property
    def master_epoch(self) -> int | None:
        return _field(self.status, "masterEpoch")

    @property
    def lease_ms(self) -> int:
        return int(_field(self.status, "writeLeaseRemainingMs") or 0)

    def store(self, key: str) -> int | None:
        value = (_field(self.status, "store") or {}).get(key)
        return None if value is None else int(value)


@dataclasses.dataclass(frozen=True)
class SetView:
    name: str
    info: protocol.ReplicasInfo | None
    """The controller's view of the set; None when the controller did not answer or knows no such set."""
    replicas: tuple[ReplicaView, ...]

    def master(self) -> ReplicaView | None:
        """The replica the controller names master, if it agrees that it is master and holds a write lease."""
        if self.info is None or self.info.master_broker_id is None:
            return None
        for replica in self.replicas:
            if replica.broker_id == self.info.master_broker_id and replica.role == "master" and replica.lease_ms > 0:
                return replica
        return None

    def in_sync_alive(self) -> int:
        return 0 if self.info is None else sum(1 for r in self.info.in_sync_replicas if r.alive)

    def lag(self, replica: ReplicaView) -> int | None:
        """Commit-log bytes the replica is behind the master."""
        master = self.master()
        ours, theirs = replica.store("maxOffset"), master.store("maxOffset") if master else None
        return None if ours is None or theirs is None else max(theirs - ours, 0)


@dataclasses.dataclass(frozen=True)
class ClusterSnapshot:
    controllers: tuple[ControllerView, ...]
    sets: tuple[SetView, ...]

    def leader(self) -> ControllerView | None:
        """The serving controller leader, once every node that answers agrees which node it is."""
        serving = [c for c in self.controllers if c.serving]
        answering = [c for c in self.controllers if c.status is not None]
        if len(serving) != 1 or {c.leader_id for c in answering} != {serving[0].name}:
            return None
        return serving[0]


@dataclasses.dataclass(frozen=True)
class Readiness:
    steps: tuple[tuple[str, bool], ...]
    """(what, done) in the order a cluster comes up."""

    @property
    def done(self) -> bool:
        return all(ok for _, ok in self.steps)

    @property
    def completed(self) -> int:
        return sum(1 for _, ok in self.steps if ok)

    @property
    def total(self) -> int:
        return len(self.steps)

    def waiting_for(self) -> str:
        return next((what for what, ok in self.steps if not ok), "ready")


def readiness(snapshot: ClusterSnapshot, replicas: int) -> Readiness:
    """Up means: one controller leader everybody knows; per set a master with a write lease and
    every replica in the sync-state-set."""
    steps = [("controller leader elected", snapshot.leader() is not None)]
    for s in snapshot.sets:
        steps.append((f"{s.name}: master elected", s.master() is not None))
        steps.append((f"{s.name}: {replicas} of {replicas} replicas in sync", s.in_sync_alive() >= replicas))
    return Readiness(tuple(steps))


async def take(
    state: ClusterState,
    *,
    session: aiohttp.ClientSession,
    alive: Callable[[ProcessRecord], bool] | None = None,
) -> ClusterSnapshot:
    """Read every process's status and the controller's sync-state data, concurrently."""
    controller_statuses = asyncio.gather(*(get_json(session, f"http://{c.api}/v1/status") for c in state.controllers))
    replicas = [r for s in state.sets for r in s.replicas]
    broker_statuses = asyncio.gather(*(get_json(session, f"http://{r.api}/v1/status") for r in replicas))
    table, cs, bs = await asyncio.gather(sync_state(state, session), controller_statuses, broker_statuses)
    by_name = dict(zip((r.name for r in replicas), bs, strict=True))
    return ClusterSnapshot(
        controllers=tuple(ControllerView(c.name, c.api, st) for c, st in zip(state.controllers, cs, strict=True)),
        sets=tuple(
            SetView(
                name=s.name,
                info=table.get(s.name),
                replicas=tuple(
                    ReplicaView(r.name, r.api, by_name[r.name], alive(r) if alive is not None else None)
                    for r in s.replicas
                ),
            )
            for s in state.sets
        ),
    )


async def sync_state(state: ClusterState, session: aiohttp.ClientSession) -> dict[str, protocol.ReplicasInfo]:
    client = ControllerClient(state.controller_addresses, timeout=2.0, session=session)
    try:
        return (await client.sync_state_data(state.set_names)).replicas_info_table
    except ControllerError:
        return {}


async def get_json(session: aiohttp.ClientSession, url: str) -> dict[str, Any] | None:
    try:
        async with session.get(url, timeout=STATUS_TIMEOUT) as r:
            return dict(await r.json()) if r.status == 200 else None
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
