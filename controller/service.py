"""The controller's request scheduler and leader-side liveness (RocketMQ ControllerManager).

Requests that change state run one at a time on the serving leader, as in RocketMQ's
DLedger EventScheduler: compute the result and events from the current state and a frozen
liveness view (`core`), commit the events through Raft, answer with the precomputed
response. Reads are answered from the leader's memory.

A node serves as leader only after a barrier entry of its own term has been applied, so its
state holds every earlier commit (DLedger appends an empty entry for the same reason).

Liveness is node-local: brokers heartbeat every node (POST or a WebSocket stream). On the
leader, a closed stream or an expired heartbeat of a master triggers an election with
RocketMQ's retries; a periodic scan re-elects sets whose master is inactive.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Hashable
from typing import Any

import aiohttp
from pydantic import BaseModel, ValidationError

from brokergroup.common import lasting
from brokergroup.controller import core, heartbeat, peerformat, protocol, records
from brokergroup.controller.bridge import Bridge
from brokergroup.controller.codes import ControllerError, ResponseCode
from brokergroup.controller.eventlog import EventFeed, EventLogWriter
from brokergroup.controller.metrics import ControllerMetrics
from brokergroup.controller.model import BrokerLiveInfo, ControllerState, LivenessView, Result
from brokergroup.controller.notify import RoleChangeNotifier
from brokergroup.controller.replicated import Batch, RaftNode
from brokergroup.controller.settings import ControllerSettings, RocketMQConfig

logger = logging.getLogger(__name__)

BATCH_COUNTER_MASK = (1 << 64) - 1
GROUP_CHECK_INTERVAL_S = 10.0
"""How often the serving leader asks the other nodes whether they apply group entries, once all do."""
GROUP_RECHECK_S = 1.0
"""How often it asks while some node is not known to (starting, slow, or an older version)."""
MAX_GROUP = 64
"""Batches in one group-commit entry at most."""

Compute = Callable[[ControllerState, LivenessView], Result]


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ControllerService:
    def __init__(
        self,
        *,
        settings: ControllerSettings,
        node: RaftNode,
        bridge: Bridge,
        event_log: EventLogWriter,
        feed: EventFeed,
        metrics: ControllerMetrics,
    ) -> None:
        self.settings = settings
        self.config = settings.rocketmq.model_copy()
        self.node = node
        self.machine = node.machine
        self.bridge = bridge
        self.event_log = event_log
        self.feed = feed
        self.metrics = metrics
        self.heartbeats = heartbeat.HeartbeatTable()
        self.notifier = RoleChangeNotifier(metrics=metrics, on_sent=self._notified)
        self._set_locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._ready_term: int | None = None
        self._leader_since_ms = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._elections: dict[str, asyncio.Task[None]] = {}
        self._ready = asyncio.Event()
        self._closing = False
        """Set by `close`: the node is stopping and no longer serves (the heartbeat streams its API server
        then closes are its own doing, not lost brokers; an election would commit on its way out)."""
        self._batch_id_base = uuid.uuid4().int & ~BATCH_COUNTER_MASK
        self._batch_counter = itertools.count()
        self._group_checked_at = -GROUP_CHECK_INTERVAL_S
        self._group_check: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._peer_formats: dict[str, int] = {}
        """Other nodes' API address -> the Raft entry format they last said they apply."""

    def _next_batch_id(self) -> str:
        """A batch id unique without a uuid4 per batch: this process's random upper 64 bits and a counter."""
        h = f"{self._batch_id_base | (next(self._batch_counter) & BATCH_COUNTER_MASK):032x}"  # str(UUID(int=...))
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    # ---- lifecycle -------------------------------------------------------------------------------
    def start(self, on_failure: lasting.OnFailure | None = None) -> None:
        """The leader loop and the two scans; `on_failure` is told if one of them ends with an error."""
        for work, what in (
            (self._leader_loop(), "leader loop"),
            (self._scan_not_active_loop(), "heartbeat expiry scan"),
            (self._scan_inactive_master_loop(), "inactive-master scan"),
        ):
            self._tasks.append(lasting.lasting(work, what, on_failure))

    async def close(self) -> None:
        self._closing = True  # before the API server closes the brokers' streams
        tasks = [*self._tasks, *self._elections.values(), *([self._group_check] if self._group_check else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            if task in self._tasks and lasting.failed_with_error(task):
                continue  # told to `on_failure`
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.notifier.close()
        if self._session is not None:
            await self._session.close()

    # ---- group commit ------------------------------------------------------------------------------
    def _maybe_check_group_commit(self) -> None:
        """While serving, every GROUP_CHECK_INTERVAL_S (every GROUP_RECHECK_S while off): group batches
        only if every other node applies group entries (a rolling upgrade may still run older nodes,
        which apply one batch per entry; a node still starting has not answered yet)."""
        now = time.monotonic()
        interval = GROUP_CHECK_INTERVAL_S if self.bridge.max_group > 1 else GROUP_RECHECK_S
        if now - self._group_checked_at < interval:
            return
        if self._group_check is not None and not self._group_check.done():
            return
        self._group_checked_at = now
        self._group_check = asyncio.get_running_loop().create_task(self._check_group_commit())

    async def _check_group_commit(self) -> None:
        others = [p.api for p in self.settings.others]
        if self._session is None:
            self._session = aiohttp.ClientSession()
        ok = await peerformat.refresh(self._session, self._peer_formats, others) if others else True
        wanted = MAX_GROUP if ok else 1
        if self.bridge.max_group != wanted:
            why = "every node applies group entries" if ok else "a node applies one batch per entry (or never answered)"
            logger.info("group commit %s: %s", "on" if ok else "off", why)
            self.bridge.max_group = wanted

    # ---- leadership ------------------------------------------------------------------------------
    @property
    def serving(self) -> bool:
        return (
            not self._closing
            and self._ready_term is not None
            and self.node.is_leader()
            and self.node.term() == self._ready_term
        )

    async def _leader_loop(self) -> None:
        while True:
            term = self.node.term()
            if self.node.is_leader() and self._ready_term != term:
                await self._become_ready(term)
            elif not self.node.is_leader() and self._ready_term is not None:
                logger.info("no longer leader (term %s)", term)
                self._ready_term = None
                self._ready.clear()
            if self.serving:
                self._maybe_check_group_commit()
            self.metrics.is_leader.set(1 if self.serving else 0)
            self.metrics.term.set(term)
            self.metrics.last_applied.set(self.node.last_applied())
            self.metrics.active_brokers.set(self.heartbeats.active_count(monotonic_ms()))
            await asyncio.sleep(0.05)

    async def _become_ready(self, term: int) -> None:
        barrier = Batch(str(uuid.uuid4()), term, wall_ms(), self.settings.node_id, None, (), "barrier")
        try:
            await self.bridge.commit(self.node, barrier, timeout=self.settings.raft.commit_timeout)
        except ControllerError as exc:
            logger.info("leader barrier for term %s failed: %s", term, exc.remark)
            return
        if self.node.is_leader() and self.node.term() == term:
            self._ready_term = term
            self._leader_since_ms = monotonic_ms()
            self._ready.set()
            logger.info("serving as controller leader, term %s", term)
            self.log_local("CONTROLLER_LEADER_CHANGED", reason=f"{self.settings.node_id} leads term {term}")

    async def wait_serving(self, timeout: float) -> bool:
        """True once this node serves as leader; False if it is not the leader or time runs out."""
        if self.serving:
            return True
        if not self.node.is_leader():
            return False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), timeout)
        return self.serving

    def require_serving(self) -> None:
        if not self.serving:
            raise ControllerError(ResponseCode.CONTROLLER_NOT_LEADER, "The controller is not in leader state")

    # ---- liveness ---------------------------------------------------------------------------------
    def liveness(self) -> LivenessView:
        return self.heartbeats.view(monotonic_ms())

    def on_heartbeat(self, req: protocol.HeartbeatRequest, channel: Hashable | None = None) -> None:
        self.metrics.heartbeats_received += 1
        became_active = self.heartbeats.on_heartbeat(req, monotonic_ms(), channel)  # validates it first
        if became_active and self.serving:
            self.log_local("BROKER_ACTIVE", cluster=req.cluster_name, broker=req.broker_name, broker_id=req.broker_id)

    def on_channel_closed(self, channel: Hashable) -> None:
        for info in self.heartbeats.on_channel_close(channel):
            self._broker_inactive(info, "channel_closed", "CHANNEL_CLOSED")

    def _broker_inactive(self, info: BrokerLiveInfo, reason: str, kind: str) -> None:
        if not self.serving:
            return
        self.log_local(
            kind, cluster=info.cluster_name, broker=info.broker_name, broker_id=info.broker_id, reason=reason
        )
        master = self.machine.read(
            lambda s, _v: (
                s.sync_state_info[info.broker_name].master_broker_id if info.broker_name in s.sync_state_info else None
            )
        )
        if master == info.broker_id:
            self.trigger_elect(info.broker_name, reason)

    async def _scan_not_active_loop(self) -> None:
        await asyncio.sleep(min(2.0, self.config.scan_not_active_broker_interval / 1000))
        lateness = self.metrics.scan_lateness.labels("expiry")
        while True:
            for info in self.heartbeats.scan_expired(monotonic_ms()):
                self._broker_inactive(info, "heartbeat_timeout", "HEARTBEAT_LOST")
            due = time.monotonic() + self.config.scan_not_active_broker_interval / 1000
            await asyncio.sleep(self.config.scan_not_active_broker_interval / 1000)
            lateness.observe(max(0.0, time.monotonic() - due))

    async def _scan_inactive_master_loop(self) -> None:
        lateness = self.metrics.scan_lateness.labels("inactive_master")
        while True:
            due = time.monotonic() + self.config.scan_inactive_master_interval / 1000
            await asyncio.sleep(self.config.scan_inactive_master_interval / 1000)
            lateness.observe(max(0.0, time.monotonic() - due))
            if not self.serving or monotonic_ms() - self._leader_since_ms < self.config.scan_warmup_interval:
                continue
            view = self.liveness()

            def scan(state: ControllerState, _version: int, live: LivenessView = view) -> list[str]:
                return core.scan_need_reelect_broker_sets(state, live)

            for name in self.machine.read(scan):
                self.trigger_elect(name, "inactive_master_scan")

    # ---- the scheduler ----------------------------------------------------------------------------
    async def read(self, compute: Compute) -> Result:
        self.require_serving()
        live = self.liveness()
        return self.machine.read(lambda s, _v: compute(s, live))

    async def write(self, kind: str, compute: Compute, *, broker_name: str, reason: str | None = None) -> Result:
        """Compute, commit and answer one state-changing request.

        Requests of one broker set run one at a time, like RocketMQ's single scheduler; requests
        of different sets are independent and share Raft entries (the bridge's group commit). The
        batch carries the set's version, so a computation that raced with another commit is
        rejected and redone.
        """
        async with self._set_lock(broker_name):
            for _ in range(3):
                self.require_serving()
                view = self.liveness()

                def run(state: ControllerState, live: LivenessView = view) -> Result:
                    return compute(state, live)

                result, version = self.machine.read_for_set(broker_name, run)
                if not result.events:
                    return result
                batch = Batch(
                    batch_id=self._next_batch_id(),
                    term=self.node.term(),
                    ts_ms=wall_ms(),
                    leader=self.settings.node_id,
                    expect_version=version,
                    events=result.events,
                    request=kind,
                    reason=reason,
                    broker_name=broker_name,
                )
                outcome = await self.bridge.commit(self.node, batch, timeout=self.settings.raft.commit_timeout)
                if outcome["applied"]:
                    return result
            raise ControllerError(ResponseCode.SYSTEM_ERROR, f"{kind}: the state kept changing during commit; retry")

    @contextlib.asynccontextmanager
    async def _set_lock(self, broker_name: str) -> AsyncIterator[None]:
        lock, users = self._set_locks.get(broker_name, (asyncio.Lock(), 0))
        self._set_locks[broker_name] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._set_locks[broker_name]
            if users <= 1:
                del self._set_locks[broker_name]
            else:
                self._set_locks[broker_name] = (lock, users - 1)

    # ---- elections ---------------------------------------------------------------------------------
    def trigger_elect(self, broker_name: str, reason: str) -> None:
        """Start a controller-triggered election for a set unless one is already running."""
        running = self._elections.get(broker_name)
        if running is not None and not running.done():
            return
        self._elections[broker_name] = asyncio.get_running_loop().create_task(
            self._elect_with_retries(broker_name, reason)
        )

    async def _elect_with_retries(self, broker_name: str, reason: str) -> None:
        request = protocol.ElectMasterRequest(broker_name=broker_name)
        for attempt in range(1, self.config.elect_master_max_retry_count + 1):
            try:
                result = await self.elect(request, trigger="controller", reason=reason)
            except ControllerError as exc:
                logger.warning("election for %s, attempt %d: %s", broker_name, attempt, exc)
                if exc.code == ResponseCode.CONTROLLER_NOT_LEADER:
                    return
                continue
            if result.code in (
                ResponseCode.SUCCESS,
                ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
            ):
                return  # a definitive answer; RocketMQ retries these too, bumping masterEpoch for nothing

    async def elect(self, req: protocol.ElectMasterRequest, *, trigger: str, reason: str) -> Result:
        unclean = self.config.enable_elect_unclean_master
        try:
            result = await self.write(
                "elect-master",
                lambda s, live: core.elect_master(s, req, live, enable_elect_unclean_master=unclean),
                broker_name=req.broker_name,
                reason=reason,
            )
        except ControllerError:
            self.metrics.elections.labels("failed", trigger).inc()
            raise
        label = {
            ResponseCode.SUCCESS: "new_master_elected",
            ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE: "no_master_elected",
            ResponseCode.CONTROLLER_MASTER_STILL_EXIST: "master_still_exist",
        }.get(result.code, "failed")
        self.metrics.elections.labels(label, trigger).inc()
        logger.info(
            "election for %s (%s, %s): %s %s",
            req.broker_name,
            trigger,
            reason,
            result.code.name,
            result.remark,
        )
        if result.ok and self.config.notify_broker_role_changed:
            self._notify_role_change(req.broker_name, result)
        return result

    def _notify_role_change(self, broker_name: str, result: Result) -> None:
        response = result.response
        if not isinstance(response, protocol.ElectMasterResponse) or response.broker_member_group is None:
            return
        body = {
            "brokerName": broker_name,
            "masterBrokerId": response.master_broker_id,
            "masterAddress": response.master_address,
            "masterEpoch": response.master_epoch,
            "syncStateSetEpoch": response.sync_state_set_epoch,
            "syncStateSet": response.sync_state_set,
        }
        live = self.liveness()
        for broker_id, address in response.broker_member_group.broker_addrs.items():
            if live.is_active(broker_name, int(broker_id)):
                self.notifier.push(address, body)

    def _notified(self, address: str, body: dict[str, Any]) -> None:
        self.log_local(
            "ROLE_CHANGE_NOTIFIED",
            broker=body.get("brokerName"),
            reason=f"{address}: epoch {body.get('masterEpoch')} {body.get('outcome')}",
        )

    # ---- node-local config --------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        return self.config.model_dump(by_alias=True)

    def update_config(self, changes: dict[str, Any]) -> dict[str, Any]:
        known = set(RocketMQConfig.model_fields) | {f.alias for f in RocketMQConfig.model_fields.values() if f.alias}
        for key in changes:
            if key not in known:
                raise ControllerError(ResponseCode.CONTROLLER_INVALID_REQUEST, f"unknown config key {key!r}")
        if any(key in self.config.black_list() for key in changes):
            refused = sorted(key for key in changes if key in self.config.black_list())
            raise ControllerError(
                ResponseCode.NO_PERMISSION, f"Can not update config in black list. ({', '.join(refused)})"
            )
        try:
            updated = RocketMQConfig.model_validate({**self.config.model_dump(by_alias=True), **changes})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ControllerError(ResponseCode.CONTROLLER_INVALID_REQUEST, f"invalid config: {problems}") from exc
        self.config = updated
        logger.info("config updated: %s", changes)
        return self.get_config()

    # ---- the event log --------------------------------------------------------------------------------
    def log_local(
        self,
        kind: str,
        *,
        cluster: str | None = None,
        broker: str | None = None,
        broker_id: int | None = None,
        reason: str | None = None,
    ) -> None:
        def build(state: ControllerState | None) -> dict[str, Any]:
            return records.local_record(
                kind=kind,
                event_uuid=str(uuid.uuid4()),
                ts_ms=wall_ms(),
                term=self.node.term(),
                cluster_name=cluster,
                broker_name=broker,
                broker_id=broker_id,
                reason=reason,
                state=state,
            )

        record = self.machine.read(lambda s, _v: build(s)) if broker else build(None)
        self.event_log.append([record])


def result_or_raise(result: Result) -> BaseModel:
    """The response of a successful result; a ControllerError (with any data) otherwise."""
    if not result.ok:
        data = result.response.model_dump(mode="json", by_alias=True) if result.response is not None else None
        raise ControllerError(result.code, result.remark, data)
    if result.response is None:
        return protocol.EmptyResponse()
    return result.response
