"""Role management: RocketMQ's ReplicasManager for one broker replica.

The broker starts fenced: no reads, no writes, until the controller says who is master.
`RoleManager` registers (next-id, apply-id, register, resumable through the identity files),
heartbeats every controller node over the persistent stream, asks for an election when there
is no master (`brokerElect`), follows the controller's view (periodic replica-info, plus the
controller's push to `POST /v1/role-change`), and turns each decision into a replication role
(`HAService.become_master` / `become_slave`).

Write lease (DESIGN §4, closes RocketMQ #7017): a master acknowledges writes only while it has
reached the controller leader within `controller.write_lease_ms`, that leader still names it
master at its epoch, and that leader heard its heartbeat recently (replica-info's
heartbeatAgeMs). An old master cut off from the controllers, or whose heartbeats no longer
arrive, stops acknowledging before the controllers can elect a new one (the margin is checked
by the settings: `ControllerLinkSettings`).

Heartbeats go to every controller node concurrently, one task per node, each send bounded by
`controller.heartbeat_send_timeout_ms`: one hung node never delays the heartbeats to the others.

A role-change push is only a hint: the broker re-reads replica-info from the controller before
acting, so a forged push cannot demote a master or poison its epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import aiohttp

from brokergroup.broker.fence import FenceFile
from brokergroup.broker.ha import ReplicationError
from brokergroup.broker.identity import Identity, IdentityFiles, check_matches
from brokergroup.broker.permission import READ_ONLY_REMARK, PermissionFile
from brokergroup.broker.settings import BrokerSettings
from brokergroup.broker.store.types import PutStatus, ReplicatedLog
from brokergroup.common import lasting
from brokergroup.controller import protocol
from brokergroup.controller.client import ControllerClient, HeartbeatStream
from brokergroup.controller.codes import ControllerError, ResponseCode

logger = logging.getLogger(__name__)


class Role(enum.Enum):
    NONE = "none"
    MASTER = "master"
    SLAVE = "slave"


class Replication(Protocol):
    """The part of `broker.ha.service.HAService` the role manager drives."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    @property
    def address(self) -> str: ...

    def check_put(self) -> PutStatus | None: ...

    def replicated_soon(self, next_offset: int) -> PutStatus | asyncio.Future[PutStatus]: ...

    def after_acks(self, status: PutStatus) -> PutStatus: ...

    def runtime_info(self) -> dict[str, Any]: ...

    async def become_master(self, *, epoch: int, sync_state_set: frozenset[int], sync_state_set_epoch: int) -> None: ...

    async def become_slave(self, *, master_ha_address: str, epoch: int) -> None: ...

    def set_sync_state_set(self, members: frozenset[int], epoch: int) -> None: ...

    def refuse_proposal(self, members: frozenset[int], epoch: int) -> None: ...

    @property
    def sync_state_set(self) -> frozenset[int]: ...

    @property
    def sync_state_set_epoch(self) -> int: ...

    def check_shrink(self) -> None: ...


REFUSALS = frozenset({ResponseCode.CONTROLLER_INVALID_REPLICAS, ResponseCode.CONTROLLER_BROKER_NOT_ALIVE})
"""alter-sync-state-set answers that mean "computed at the proposal's epoch and not committed"
(a member is unknown, dead or behind the master's confirm offset). Every other error, a lost
reply included, settles nothing: the master re-reads the controller."""


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclasses.dataclass(frozen=True)
class Decision:
    """What the controller says about this broker set, from any of its answers."""

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    sync_state_set: frozenset[int]

    @classmethod
    def of(cls, body: Any) -> Decision:
        get = body.get if isinstance(body, dict) else lambda k: getattr(body, _snake(k))
        return cls(
            master_broker_id=get("masterBrokerId"),
            master_address=get("masterAddress"),
            master_epoch=int(get("masterEpoch") or 0),
            sync_state_set_epoch=int(get("syncStateSetEpoch") or 0),
            sync_state_set=frozenset(int(b) for b in (get("syncStateSet") or ())),
        )


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


class RoleManager:
    def __init__(
        self,
        *,
        settings: BrokerSettings,
        store: ReplicatedLog,
        make_ha: Callable[[int], Replication],
        controller: ControllerClient,
        session: aiohttp.ClientSession,
        address: str,
    ) -> None:
        self.settings = settings
        self.store = store
        self._make_ha = make_ha
        self.ha: Replication | None = None
        """Replication, created once the controller has given this broker its id."""
        self.controller = controller
        self.session = session
        self.address = address
        self.files = IdentityFiles(settings.data_dir)
        self.broker_id: int | None = None
        self.role = Role.NONE
        self.fenced = True
        self.fence_file = FenceFile(settings.data_dir)
        self.admin_fenced = self.fence_file.load()
        """Fenced by an administrator (`broker.fence`): no writes, no replication, not Ready; survives restarts."""
        self.permission_file = PermissionFile(settings.data_dir)
        self.writable = self.permission_file.load()
        """The write permission (`broker.permission`): False refuses produces only; survives restarts."""
        self.master_broker_id: int | None = None
        self.master_address: str | None = None
        self.master_epoch = 0
        self._lease_until_ms = 0
        self._role_lock = asyncio.Lock()
        self._report_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._reports: set[asyncio.Task[None]] = set()
        """Alter-sync-state-set reports in flight: held here (the loop keeps only weak references to tasks),
        each dropped when it ends; a bug in one tells `on_failure` like the role's other tasks."""
        self._follow: asyncio.Task[None] | None = None
        self._sync_now = asyncio.Event()
        send_timeout = settings.controller.send_timeout_ms / 1000
        token = settings.controller.broker_token or settings.controller.admin_token

        def stream(address: str) -> HeartbeatStream:
            return HeartbeatStream(address, session=session, timeout=send_timeout, token=token)

        self._stream = stream
        self._streams = [self._stream(a) for a in settings.controller.addresses]
        self._beats: dict[str, asyncio.Task[None]] = {}
        """Heartbeat loop per controller node, by address; started after registration (`_beating`)."""
        self._beating = False
        self.on_role_change: Callable[[Role, int, int | None], None] | None = None
        """Told (role, master epoch, broker id) on every role change; `podlabels` relabels the pod. Must not block."""
        self.ready_gate: Callable[[], bool] = lambda: True
        """Readiness waits for this too (the pod label's first patch, which clears a stale `role=master`)."""
        self.on_failure: lasting.OnFailure | None = None
        """Told (what, error) when a task the role depends on ends with an error: the start (registration,
        replication), following the controller or a master, a heartbeat stream, the sync-state-set check.
        Such a broker would stay up fenced or stale and say nothing, so the process stops (`node`)."""

    # ---- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Register, start replication, follow the controller (`on_failure` if that fails)."""
        self._tasks.append(self._lasting(self._run(), "start"))

    def _lasting(self, work: Coroutine[Any, Any, None], what: str) -> asyncio.Task[None]:
        return lasting.lasting(work, what, self.on_failure)

    async def close(self) -> None:
        tasks = [*self._tasks, *self._reports, *self._beats.values(), *([self._follow] if self._follow else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            if lasting.failed_with_error(task):
                continue  # its failure was told (`on_failure`)
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for stream in self._streams:
            await stream.close()
        if self.ha is not None:
            await self.ha.stop()

    def replication(self) -> Replication:
        if self.ha is None:
            raise RuntimeError("replication starts after registration")
        return self.ha

    async def _run(self) -> None:
        registered = await self._register_until_done()
        assert self.broker_id is not None
        self.ha = self._make_ha(self.broker_id)
        await self.ha.start()
        await self._heartbeat_once()
        self._beating = True
        self._start_beats()
        decision = Decision.of(registered)
        if registered.master_broker_id is not None:
            await self.apply(decision)
        else:
            await self.broker_elect()
        self._tasks.append(self._lasting(self._sync_loop(), "following the controller"))
        self._tasks.append(self._lasting(self._check_loop(), "sync-state-set check"))

    # ---- registration -------------------------------------------------------------------------
    async def _register_until_done(self) -> protocol.RegisterResponse:
        while True:
            try:
                return await self._register_once()
            except ControllerError as exc:
                logger.warning("registration with the controller failed: %s; retrying", exc)
            await asyncio.sleep(1.0)

    async def _register_once(self) -> protocol.RegisterResponse:
        s = self.settings
        identity = self.files.load()
        if identity is not None:
            check_matches(identity, cluster_name=s.cluster_name, broker_name=s.broker_name, path=self.files.final)
        else:
            temp = self.files.load_temp()
            if temp is not None:
                check_matches(temp, cluster_name=s.cluster_name, broker_name=s.broker_name, path=self.files.temp)
            else:
                nxt = await self.controller.next_id(
                    protocol.NextIdRequest(cluster_name=s.cluster_name, broker_name=s.broker_name)
                )
                code = f"{self.address};{int(time.time() * 1000)}"
                temp = Identity(s.cluster_name, s.broker_name, nxt.next_broker_id, code)
                self.files.save_temp(temp)
            try:
                await self.controller.apply_id(
                    protocol.ApplyIdRequest(
                        cluster_name=s.cluster_name,
                        broker_name=s.broker_name,
                        applied_broker_id=temp.broker_id,
                        register_check_code=temp.register_check_code or "",
                    )
                )
            except ControllerError as exc:
                if exc.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID:
                    self.files.drop_temp()  # someone else took this id: start over with next-id
                raise
            identity = Identity(s.cluster_name, s.broker_name, temp.broker_id)
            self.files.save_final(identity)
        self.broker_id = identity.broker_id
        logger.info("broker %s/%s has controller id %s", s.broker_name, self.address, self.broker_id)
        response = await self.controller.register(
            protocol.RegisterRequest(
                cluster_name=s.cluster_name,
                broker_name=s.broker_name,
                broker_id=identity.broker_id,
                broker_address=self.address,
            )
        )
        self.poke()  # the write lease comes from replica-info, which says whether our heartbeats arrive
        return response

    # ---- heartbeats ---------------------------------------------------------------------------
    def heartbeat_request(self) -> protocol.HeartbeatRequest:
        s = self.settings
        assert self.broker_id is not None
        return protocol.HeartbeatRequest(
            cluster_name=s.cluster_name,
            broker_name=s.broker_name,
            broker_addr=self.address,
            broker_id=self.broker_id,
            epoch=self.store.epochs.last_epoch(),
            max_offset=self.store.max_offset,
            confirm_offset=max(self.store.confirm_offset, -1),
            heartbeat_timeout_mills=s.controller.heartbeat_timeout_ms,
            election_priority=s.controller.election_priority,
        )

    async def _heartbeat_once(self) -> None:
        """One heartbeat to every controller at once; each send is bounded by its timeout."""
        beat = self.heartbeat_request()
        await asyncio.gather(*(self._send_heartbeat(stream, beat) for stream in self._streams))

    async def _send_heartbeat(self, stream: HeartbeatStream, beat: protocol.HeartbeatRequest) -> None:
        try:
            await stream.send(beat)
        except aiohttp.WSServerHandshakeError as exc:
            level = logging.WARNING if exc.status in (401, 403) else logging.DEBUG  # a wrong controller.broker_token
            logger.log(level, "heartbeat stream to %s refused: HTTP %s %s", stream.address, exc.status, exc.message)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            logger.debug("heartbeat to %s failed: %s", stream.address, str(exc) or type(exc).__name__)

    def set_controller_addresses(self, addresses: list[str]) -> None:
        """The controller nodes changed (`controller_dns`): calls go to the new list, new nodes get a heartbeat
        stream (once registered), vanished nodes' streams close."""
        self.controller.set_addresses(addresses)
        old = {stream.address: stream for stream in self._streams}
        self._streams = [old.get(a) or self._stream(a) for a in self.controller.addresses]
        kept = {stream.address for stream in self._streams}
        loop = asyncio.get_running_loop()
        for address, stream in old.items():
            if address not in kept:
                self._tasks.append(loop.create_task(self._retire(self._beats.pop(address, None), stream)))
        if self._beating:
            self._start_beats()

    def controllers_unreachable(self) -> bool:
        """True while some controller node's heartbeat stream is down (or not yet up)."""
        return not all(stream.connected for stream in self._streams)

    def _start_beats(self) -> None:
        """A heartbeat loop for each stream that has none."""
        for stream in self._streams:
            if stream.address not in self._beats:
                self._beats[stream.address] = self._lasting(
                    self._heartbeat_loop(stream), f"heartbeats to {stream.address}"
                )

    @staticmethod
    async def _retire(beats: asyncio.Task[None] | None, stream: HeartbeatStream) -> None:
        if beats is not None:
            beats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beats
        await stream.close()

    async def _heartbeat_loop(self, stream: HeartbeatStream) -> None:
        """Heartbeats to one controller node, on a fixed period: a node that hangs delays only its
        own stream (RocketMQ sends them from a thread pool, fire-and-forget)."""
        period = self.settings.controller.heartbeat_interval_ms / 1000
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            next_at += period
            await asyncio.sleep(max(0.0, next_at - loop.time()))
            await self._send_heartbeat(stream, self.heartbeat_request())
            next_at = max(next_at, loop.time() - period)  # after a slow send, do not burst to catch up

    # ---- following the controller -------------------------------------------------------------
    async def _sync_loop(self) -> None:
        c = self.settings.controller
        period = min(c.sync_broker_metadata_period_ms, c.write_lease_ms // 3) / 1000
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._sync_now.wait(), period)
            self._sync_now.clear()
            await self.sync_once()

    async def sync_once(self) -> None:
        """RocketMQ schedulingSyncBrokerMetadata, plus the write lease."""
        started = monotonic_ms()
        try:
            # A read stuck on a node that forwards to a hung leader must not outlive the lease's use:
            # give up after half the lease and ask again (the next node may know the new leader).
            info = await self.controller.replica_info(
                self.settings.broker_name,
                broker_id=self.broker_id,
                timeout=self.settings.controller.write_lease_ms / 2000,
            )
        except ControllerError as exc:
            if exc.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
                logger.warning("the controller lost broker set %s; registering again", self.settings.broker_name)
                with contextlib.suppress(ControllerError):
                    await self._register_once()
            else:
                logger.info("replica-info failed: %s", exc)
            return
        decision = Decision.of(info)
        self._renew_lease(started, decision, info.heartbeat_age_ms)
        if decision.master_epoch > self.master_epoch:
            if decision.master_broker_id is not None and decision.master_address:
                await self.apply(decision)
            else:
                await self.broker_elect()
        elif decision.master_broker_id is None and self.role is Role.NONE:
            await self.broker_elect()
        elif self.role is Role.MASTER and decision.master_epoch == self.master_epoch:
            # Adopt the controller's view on every read. Only a newer epoch settles proposals: this
            # answer may have been computed before the controller committed one still in flight.
            self.replication().set_sync_state_set(decision.sync_state_set, decision.sync_state_set_epoch)

    def poke(self) -> None:
        """The controller pushed a role change: re-read replica-info now (the push is only a hint)."""
        self._sync_now.set()

    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.controller.check_sync_state_set_period_ms / 1000)
            if self.role is Role.MASTER:
                self.replication().check_shrink()

    async def broker_elect(self) -> bool:
        """RocketMQ brokerElect: ask the controller to elect; SUCCESS and MASTER_STILL_EXIST both answer."""
        s = self.settings
        assert self.broker_id is not None
        if self.admin_fenced:
            return False  # a fenced replica never asks to lead; an unfenced one will
        request = protocol.ElectMasterRequest(
            cluster_name=s.cluster_name, broker_name=s.broker_name, broker_id=self.broker_id
        )
        try:
            decision = Decision.of(await self.controller.elect_master(request))
        except ControllerError as exc:
            if exc.code != ResponseCode.CONTROLLER_MASTER_STILL_EXIST or not exc.data:
                logger.info("broker-triggered election: %s", exc)
                return False
            decision = Decision.of(exc.data)
        if decision.master_broker_id is None or not decision.master_address:
            return False
        await self.apply(decision)
        self.poke()  # the write lease comes from replica-info, which says whether our heartbeats arrive
        return True

    # ---- role changes ---------------------------------------------------------------------------
    async def apply(self, decision: Decision) -> None:
        if decision.master_broker_id == self.broker_id:
            await self.change_to_master(decision)
        elif decision.master_broker_id is not None and decision.master_address:
            await self.change_to_slave(decision)

    async def change_to_master(self, decision: Decision) -> None:
        async with self._role_lock:
            if decision.master_epoch <= self.master_epoch and self.role is Role.MASTER:
                return
            if decision.master_epoch < self.master_epoch:
                return
            if self._follow is not None:
                self._follow.cancel()
                self._follow = None
            try:
                await self.replication().become_master(
                    epoch=decision.master_epoch,
                    sync_state_set=decision.sync_state_set,
                    sync_state_set_epoch=decision.sync_state_set_epoch,
                )
            except ReplicationError as exc:
                # Our log holds a newer epoch than the controller's: its state went back in time.
                # Taking the role (as RocketMQ does) would relabel newer data; stay fenced instead.
                logger.error("refusing the master role at epoch %s: %s", decision.master_epoch, exc)  # noqa: TRY400
                self.role, self.fenced = Role.NONE, True
                self._announce()
                return
            self.master_epoch = decision.master_epoch
            self.role = Role.MASTER
            self.master_broker_id = self.broker_id
            self.master_address = self.address
            self.fenced = False
            self._announce()
            logger.info(
                "now MASTER of %s at epoch %s, sync-state-set %s",
                self.settings.broker_name,
                self.master_epoch,
                sorted(decision.sync_state_set),
            )
        self.replication().check_shrink()

    async def change_to_slave(self, decision: Decision) -> None:
        async with self._role_lock:
            if decision.master_epoch <= self.master_epoch:
                return
            self.master_epoch = decision.master_epoch
            self.role = Role.SLAVE
            self.master_broker_id = decision.master_broker_id
            self.master_address = decision.master_address
            self.fenced = False
            self._announce()  # demote first: the pod says slave before the slave starts following
            if self._follow is not None:
                self._follow.cancel()
                self._follow = None
            assert decision.master_address is not None
            if not self.admin_fenced:
                self._follow = self._lasting(
                    self._follow_master(decision.master_address, decision.master_epoch), "following the master"
                )
            logger.info(
                "now SLAVE of %s (master %s at %s, epoch %s)",
                self.settings.broker_name,
                decision.master_broker_id,
                decision.master_address,
                decision.master_epoch,
            )

    def _announce(self) -> None:
        if self.on_role_change is not None:
            self.on_role_change(self.role, self.master_epoch, self.broker_id)

    def ready(self) -> bool:
        """Ready for traffic (`/readyz`): not fenced, and `ready_gate` passed."""
        return not self.fenced and not self.admin_fenced and self.ready_gate()

    async def set_admin_fence(self, fenced: bool) -> None:
        """Fence (or unfence) this replica, durably. A fenced slave stops replicating, so the master drops it
        from the sync-state-set; an unfenced slave follows its master again and catches up."""
        async with self._role_lock:
            if fenced == self.admin_fenced:
                return
            self.fence_file.save(fenced)
            self.admin_fenced = fenced
            logger.warning("%s by an administrator", "FENCED" if fenced else "unfenced")
            if self.role is not Role.SLAVE or self.ha is None:
                return
            if fenced:
                if self._follow is not None:
                    self._follow.cancel()
                    self._follow = None
                await self.ha.stop()  # the master sees the link close and shrinks the sync-state-set
            elif self.master_address is not None:
                self._follow = self._lasting(
                    self._follow_master(self.master_address, self.master_epoch), "following the master"
                )

    def set_writable(self, writable: bool) -> None:
        """Wipe (False) or restore (True) this replica's write permission, durably, before it takes effect.
        Synchronous: a produce checked before this call has already written, none checked after it will."""
        if writable == self.writable:
            return
        self.permission_file.save(writable)
        self.writable = writable
        logger.warning("write permission %s by an administrator", "restored" if writable else "WIPED (read-only)")

    async def _follow_master(self, master_address: str, epoch: int) -> None:
        """Learn the master's HA address from its status, then replicate from it."""
        delay = 0.1
        while True:
            try:
                async with self.session.get(
                    f"http://{master_address}/v1/status", timeout=aiohttp.ClientTimeout(total=3)
                ) as r:
                    ha_address = (await r.json()).get("haAddress") if r.status == 200 else None
            except (aiohttp.ClientError, TimeoutError, ValueError):
                ha_address = None
            if ha_address:
                try:
                    await self.replication().become_slave(master_ha_address=ha_address, epoch=epoch)
                except ReplicationError as exc:
                    # As for the master role: our log holds a newer epoch than the controller's. Stay fenced.
                    logger.error("refusing to follow %s at epoch %s: %s", master_address, epoch, exc)  # noqa: TRY400
                    self.role, self.fenced = Role.NONE, True
                    self._announce()
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    # ---- sync-state-set reports ------------------------------------------------------------------
    def on_sync_state_set_change(self, proposed: frozenset[int]) -> None:
        """Callback from replication: report a shrink/expand to the controller.

        The request carries the sync-state epoch and the confirm offset of the moment the proposal
        was made (read now, not when it is sent): a proposal made before a confirmation must not be
        committed after it (issue 22), and each member it adds had everything confirmed then."""
        if self.role is Role.MASTER:
            epoch = self.replication().sync_state_set_epoch
            confirm = max(self.store.confirm_offset, -1)
            report = self._lasting(self._report(proposed, epoch, confirm), "sync-state-set report")
            self._reports.add(report)
            report.add_done_callback(self._reports.discard)

    async def _report(self, proposed: frozenset[int], epoch: int, confirm_offset: int) -> None:
        # The controller checks a new member against its last heartbeat, up to one heartbeat
        # interval old: a refusal is retried once after that, then the proposal stops counting.
        for attempt in range(2):
            if attempt:
                await asyncio.sleep(self.settings.controller.heartbeat_interval_ms * 1.5 / 1000)
            async with self._report_lock:
                if self.role is not Role.MASTER or self.broker_id is None:
                    return
                if epoch != self.replication().sync_state_set_epoch:
                    return  # settled: a newer epoch came in while it waited, the controller would fence it
                request = protocol.AlterSyncStateSetRequest(
                    broker_name=self.settings.broker_name,
                    master_broker_id=self.broker_id,
                    master_epoch=self.master_epoch,
                    sync_state_set=sorted(proposed | {self.broker_id}),
                    sync_state_set_epoch=epoch,
                    confirm_offset=confirm_offset,
                )
                try:
                    response = await self.controller.alter_sync_state_set(request)
                except ControllerError as exc:
                    logger.info("alter-sync-state-set %s: %s", sorted(proposed), exc)
                    if exc.code not in REFUSALS:
                        self.poke()  # re-read the controller's view: a newer epoch settles the proposal
                        return
                    continue
                members, new_epoch = frozenset(response.sync_state_set), response.sync_state_set_epoch
                self.replication().set_sync_state_set(members, new_epoch)
                logger.info("sync-state-set is now %s (epoch %s)", sorted(members), new_epoch)
                return
        if self.role is Role.MASTER:
            self.replication().refuse_proposal(proposed, epoch)

    # ---- writes ------------------------------------------------------------------------------------
    def _renew_lease(self, started_ms: int, decision: Decision, heartbeat_age_ms: int | None) -> None:
        """Renew the write lease from a leader's answer that still names this broker master, and
        only if that leader heard this broker's heartbeat recently: the leader then declares it dead
        no earlier than `started_ms - age + heartbeat_timeout`, which the settings keep at least the
        stale-leader fallback after the lease ends (`ControllerLinkSettings.max_heartbeat_age_ms`).
        Replica-info alone is not enough: it can reach the leader while the heartbeats do not."""
        c = self.settings.controller
        if decision.master_broker_id != self.broker_id or decision.master_epoch < self.master_epoch:
            return
        if heartbeat_age_ms is None or heartbeat_age_ms > c.max_heartbeat_age_ms:
            logger.warning(
                "write lease not renewed: the controller leader last heard this broker's heartbeat %s",
                "never (or too long ago)" if heartbeat_age_ms is None else f"{heartbeat_age_ms} ms ago",
            )
            return
        self._lease_until_ms = started_ms + c.write_lease_ms

    def lease_remaining_ms(self) -> int:
        return max(0, self._lease_until_ms - monotonic_ms())

    def check_write(self) -> tuple[PutStatus, str] | None:
        """None when this broker may acknowledge writes; else the status and why not."""
        if self.admin_fenced:
            return (
                PutStatus.SERVICE_NOT_AVAILABLE,
                "this broker is fenced by an administrator (kubectl brokergroup unfence)",
            )
        if self.fenced or self.role is not Role.MASTER:
            return PutStatus.SERVICE_NOT_AVAILABLE, f"this broker is not the master (role {self.role.value})"
        if self.lease_remaining_ms() <= 0:
            return PutStatus.SERVICE_NOT_AVAILABLE, "write lease expired: the controller leader is unreachable"
        return None

    def produce_refusal(self) -> str | None:
        """Why a produce is refused for the write permission alone (RocketMQ NO_PERMISSION), or None. Only
        when `check_write` passes: a slave, a fenced broker or a lapsed lease refuses as before (a slave names
        its master, which the producer then asks)."""
        if self.writable or self.check_write() is not None:
            return None
        return READ_ONLY_REMARK

    def view(self) -> dict[str, Any]:
        return {
            "role": self.role.value,
            "fenced": self.fenced,
            "adminFenced": self.admin_fenced,
            "writable": self.writable,
            "brokerId": self.broker_id,
            "masterBrokerId": self.master_broker_id,
            "masterAddress": self.master_address,
            "masterEpoch": self.master_epoch,
            "writeLeaseRemainingMs": self.lease_remaining_ms() if self.role is Role.MASTER else 0,
        }
