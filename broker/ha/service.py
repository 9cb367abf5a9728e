"""`HAService`: the replication facade the broker's role manager drives (RocketMQ
`AutoSwitchHAService`).

Roles: "none" until the first role change, "master" (the HA server accepts slaves, acks and
the confirm offset are tracked), "slave" (an `HASlave` follows the master's HA address). The HA
port is bound by `start()` in every role; connections are refused unless master.

Invariants:

- the master's epoch is the store's last epoch: `become_master(epoch)` records it at the end of
  the log before accepting slaves, even when nothing was written since the last epoch (#9942,
  the epoch cache replaces an empty last entry). An epoch older than the store's last one is
  refused (`ReplicationError`; RocketMQ ignores the failure and takes the role anyway). The same
  epoch as the store's last one means this broker already was master of that epoch (the
  controller never reuses an epoch): the entry is kept as it is. RocketMQ moves its start offset
  to the end of the log, which relabels that epoch's data and makes followers re-fetch it;
- a new epoch while already master keeps the connections: every frame looks its epoch up in the
  current epoch cache, so none crosses the new boundary (#9689);
- the confirm offset is recomputed on every ack, every append, every flush, every sync-state-set
  change and every connection change, and only ever raised (`syncset` has the rules). Under SYNC
  flush it never passes the master's own fsynced offset (`store.ackable_offset`), nor a slave's
  (slaves ack only fsynced bytes), so what consumers read survives a power loss of every machine;
- a put's acks are re-evaluated on every ack, sync-state-set change and connection change; puts
  still waiting when this broker stops being master answer FLUSH_SLAVE_TIMEOUT at once;
- shrink and expand proposals go to `on_sync_state_set_change(proposed)` (always containing this
  broker), to be sent with the current `sync_state_set_epoch`; while one is pending the union rule
  applies; it ends when `set_sync_state_set` brings a newer epoch (the controller's answer, or a
  read) or `refuse_proposal` reports a definitive refusal. A read at the same epoch ends nothing.
  The callback runs on the event loop and must not block; an exception from it is logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Literal

from brokergroup.broker.ha import ReplicationError
from brokergroup.broker.ha.acks import AckWaiters
from brokergroup.broker.ha.master import HAServer, LinkEvents, MasterLink
from brokergroup.broker.ha.master_conn import Acked, Handshaked
from brokergroup.broker.ha.slave import HASlave
from brokergroup.broker.ha.syncset import ALL_ACK, SyncStateSetManager, merge_acks
from brokergroup.broker.protocol.ha import HAState
from brokergroup.broker.settings import HASettings
from brokergroup.broker.store.epoch import EpochEntry
from brokergroup.broker.store.types import PutStatus, ReplicatedLog

logger = logging.getLogger(__name__)

RoleName = Literal["none", "master", "slave"]


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class HAService:
    def __init__(
        self,
        store: ReplicatedLog,
        *,
        broker_id: int,
        settings: HASettings,
        on_sync_state_set_change: Callable[[frozenset[int]], None],
        clock_ms: Callable[[], int] = monotonic_ms,
    ) -> None:
        self._store = store
        self._id = broker_id
        self._settings = settings
        self._on_change = on_sync_state_set_change
        self._clock = clock_ms
        self._role: RoleName = "none"
        self._master_epoch = -1
        self._syncset = SyncStateSetManager(
            broker_id,
            max_time_slave_not_catchup_ms=settings.max_time_slave_not_catchup_ms,
            all_ack=settings.all_ack_in_sync_state_set,
        )
        self._ack_nums = ALL_ACK if settings.all_ack_in_sync_state_set else settings.in_sync_replicas
        self._waiters = AckWaiters(self._acked_up_to)
        self._server = HAServer(store, settings=settings, clock_ms=clock_ms, events=_Events(self))
        self._slave: HASlave | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        store.add_append_listener(self._on_append)
        store.add_flush_listener(self._on_flushed)  # the confirm offset waits for this replica's fsync too

    # ---- lifecycle and roles ----------------------------------------------------------------------
    async def start(self) -> None:
        """Bind the HA port (in every role; slaves are refused unless master)."""
        self._loop = asyncio.get_running_loop()
        await self._server.start()

    @property
    def address(self) -> str:
        """The "host:port" the HA port is bound to (`settings.host`, so bind a reachable host)."""
        return self._server.address

    @property
    def role(self) -> RoleName:
        return self._role

    async def become_master(self, *, epoch: int, sync_state_set: frozenset[int], sync_state_set_epoch: int) -> None:
        """Reference §4.2 changeToMaster (and changeToMasterWhenLastRoleIsMaster)."""
        self._check_epoch(epoch, "become master")
        if not self._server.started:
            await self.start()
        slave, self._slave = self._slave, None
        if slave is not None:
            await slave.stop()  # it appends to the store: stopped before the epoch is recorded
        self._check_epoch(epoch, "become master")
        was_master = self._role == "master"
        if epoch > self._store.epochs.last_epoch():
            entry = EpochEntry(epoch, self._store.max_offset)
            if not self._store.append_epoch(entry):
                raise ReplicationError(f"the store refused epoch entry {entry}")
        if was_master:
            self._syncset.confirm(sync_state_set, sync_state_set_epoch)
        else:
            self._syncset.reset(sync_state_set, sync_state_set_epoch, now_ms=self._clock())
        self._role = "master"
        self._master_epoch = epoch
        logger.info(
            "HA master at epoch %d from offset %d, sync-state-set %s (epoch %d)",
            epoch,
            self._store.max_offset,
            sorted(self._syncset.local),
            self._syncset.local_epoch,
        )
        self._changed()
        self._server.wake_all()

    async def become_slave(self, *, master_ha_address: str, epoch: int) -> None:
        """Reference §4.2 changeToSlave: follow `master_ha_address`, refusing masters older than `epoch`."""
        self._check_epoch(epoch, "follow a master")
        was_master = self._role == "master"
        self._role = "slave"
        self._master_epoch = epoch
        self._waiters.fail_all()
        current, self._slave = self._slave, None
        if current is not None and current.master_address == master_ha_address:
            current.expected_epoch = epoch
            self._slave = current
        else:
            if current is not None:
                await current.stop()
            self._slave = HASlave(
                self._store,
                broker_id=self._id,
                settings=self._settings,
                clock_ms=self._clock,
                master_address=master_ha_address,
                expected_epoch=epoch,
            )
            self._slave.start()
        if was_master:
            await self._server.drop_all()
        logger.info("HA slave of %s at epoch %d", master_ha_address, epoch)

    def _check_epoch(self, epoch: int, action: str) -> None:
        last = self._store.epochs.last_epoch()
        if epoch < last:
            raise ReplicationError(f"cannot {action} at epoch {epoch}: the log already has epoch {last}")

    async def stop(self) -> None:
        """Stop replicating and close the HA port (puts still waiting answer FLUSH_SLAVE_TIMEOUT)."""
        self._role = "none"
        self._waiters.fail_all()
        slave, self._slave = self._slave, None
        if slave is not None:
            await slave.stop()
        await self._server.close()

    # ---- sync-state-set ---------------------------------------------------------------------------
    def set_sync_state_set(self, members: frozenset[int], epoch: int) -> None:
        """The controller's set. Older epochs are ignored, a newer one settles every pending
        proposal, the same one settles nothing (call it with every controller read while master)."""
        if self._syncset.confirm(members, epoch):
            self._changed()

    def refuse_proposal(self, members: frozenset[int], epoch: int) -> None:
        """The controller refused the proposal `members` made at sync-state `epoch` for good (a
        member unknown, dead or behind): it stops counting."""
        if self._syncset.refused(members, epoch):
            self._changed()

    @property
    def sync_state_set(self) -> frozenset[int]:
        return self._syncset.local

    @property
    def sync_state_set_epoch(self) -> int:
        return self._syncset.local_epoch

    def check_shrink(self) -> None:
        """The periodic check: propose dropping members behind or disconnected (and retry a
        pending proposal)."""
        if self._role != "master":
            return
        proposal = self._syncset.maybe_shrink(self._clock(), self._connected())
        self._changed()
        if proposal is not None:
            self._propose(proposal)

    # ---- puts ---------------------------------------------------------------------------------------
    def check_put(self) -> PutStatus | None:
        """Before a write: None to go ahead; SERVICE_NOT_AVAILABLE when not master;
        IN_SYNC_REPLICAS_NOT_ENOUGH below `min_in_sync_replicas` (nothing must be written)."""
        if self._role != "master":
            return PutStatus.SERVICE_NOT_AVAILABLE
        if self._syncset.in_sync_replicas_nums() < self._settings.min_in_sync_replicas:
            return PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH
        return None

    async def wait_replicated(self, next_offset: int) -> PutStatus:
        """After a write ending at `next_offset`: PUT_OK once acked as configured (all-ack or
        `in_sync_replicas`), FLUSH_SLAVE_TIMEOUT after `slave_timeout_ms` or a role loss.

        The after-append check (Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND): a put admitted with
        enough in-sync replicas is acked by the set as it is when the acks come; if that set shrank
        below `min_in_sync_replicas` meanwhile, the put has fewer copies than asked and is answered
        NOT_ENOUGH_REPLICAS_AFTER_APPEND, not PUT_OK."""
        pending = self.replicated_soon(next_offset)
        return pending if isinstance(pending, PutStatus) else self.after_acks(await pending)

    def replicated_soon(self, next_offset: int) -> PutStatus | asyncio.Future[PutStatus]:
        """`wait_replicated` without a coroutine (the binary port answers puts from callbacks): its
        answer now, or a future of the acks' status, to be passed through `after_acks`."""
        if self._ack_nums in (0, 1):
            return PutStatus.PUT_OK
        if self._role != "master":
            return PutStatus.FLUSH_SLAVE_TIMEOUT
        pending = self._waiters.enqueue(next_offset, self._settings.slave_timeout_ms / 1000)
        return self.after_acks(PutStatus.PUT_OK) if pending is None else pending

    def after_acks(self, status: PutStatus) -> PutStatus:
        """The after-append check of `wait_replicated` on the status its acks gave."""
        if status is PutStatus.PUT_OK and self._syncset.in_sync_replicas_nums() < self._settings.min_in_sync_replicas:
            return PutStatus.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return status

    def _acked_up_to(self) -> int:
        """How far puts are acked as configured (-1, none, unless master)."""
        return self._syncset.acked_up_to(self._acks(), self._ack_nums) if self._role == "master" else -1

    # ---- what the links report --------------------------------------------------------------------------
    def _live(self) -> list[MasterLink]:
        return [link for link in self._server.links if link.slave_id is not None]

    def _connected(self) -> frozenset[int]:
        return frozenset(link.slave_id for link in self._live() if link.slave_id is not None)

    def _acks(self) -> dict[int, int]:
        return merge_acks(
            (link.slave_id, link.conn.ack_offset)
            for link in self._live()
            if link.slave_id is not None and link.conn.state is HAState.TRANSFER
        )

    def _handshake(self, link: MasterLink, event: Handshaked) -> bool:
        if event.slave_id == self._id:
            logger.warning("HA connection from %s claims this broker's own id %d", link.address, self._id)
            return False
        for other in self._server.links:
            if other is not link and other.slave_id == event.slave_id:
                logger.info("slave %d reconnected from %s; closing its older connection", event.slave_id, link.address)
                other.close()
        return True

    def _ack(self, link: MasterLink, event: Acked) -> None:
        slave_id = link.slave_id
        if self._role != "master" or slave_id is None:
            return
        proposal = None
        if event.caught_up_ms is not None:
            self._syncset.update_caught_up(slave_id, event.caught_up_ms)
            last = self._store.epochs.last_entry()
            proposal = self._syncset.maybe_expand(
                slave_id,
                event.offset,
                confirm_offset=self._store.confirm_offset,
                last_epoch_start=last.start_offset if last is not None else 0,
                is_learner=link.conn.is_learner,
            )
        self._changed()
        if proposal is not None:
            self._propose(proposal)

    def _closed(self, link: MasterLink) -> None:
        if self._role != "master" or link.slave_id is None:
            return
        proposal = self._syncset.maybe_shrink(self._clock(), self._connected())
        self._changed()
        if proposal is not None:
            self._propose(proposal)

    def _propose(self, proposal: frozenset[int]) -> None:
        logger.info(
            "proposing sync-state-set %s (confirmed %s, epoch %d)",
            sorted(proposal),
            sorted(self._syncset.local),
            self._syncset.local_epoch,
        )
        try:
            self._on_change(proposal)
        except Exception:
            logger.exception("the sync-state-set callback failed")

    def _changed(self) -> None:
        """Acks, connections or the set changed: new confirm offset, re-check waiting puts."""
        if self._role != "master":
            return
        self._update_confirm()
        self._waiters.notify()

    def _update_confirm(self) -> None:
        store = self._store
        ackable = store.ackable_offset
        if ackable <= store.confirm_offset:
            return  # it never passes this replica's own ackable offset (SYNC: an append alone moves nothing)
        confirm = self._syncset.compute_confirm_offset(ackable, self._acks(), self._connected(), store.confirm_offset)
        if confirm > store.confirm_offset:
            store.set_confirm_offset(confirm)
            self._server.wake_for_confirm()  # caught-up slaves get it with the next frame, or alone soon

    def _on_append(self, _max_offset: int) -> None:
        """Store append listener: may run on any thread, must not raise."""
        self._on_loop(self._appended)

    def _on_flushed(self, _flushed_offset: int) -> None:
        """Store flush listener, must not raise: the confirm offset may rise (`_update_confirm`
        wakes the senders when it does)."""
        self._on_loop(self._flushed)

    def _on_loop(self, callback: Callable[[], None]) -> None:
        """Run `callback` on this service's loop: now when called there, else handed over to it."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            callback()
        else:
            loop.call_soon_threadsafe(callback)

    def _appended(self) -> None:
        if self._role != "master":
            return
        try:
            self._update_confirm()
        except Exception:
            logger.exception("updating the confirm offset after an append failed")
        self._server.wake_all()

    def _flushed(self) -> None:
        if self._role != "master":
            return
        try:
            self._update_confirm()
        except Exception:
            logger.exception("updating the confirm offset after a flush failed")

    # ---- status -------------------------------------------------------------------------------------------
    def runtime_info(self) -> dict[str, Any]:
        store, syncset = self._store, self._syncset
        local = syncset.local
        proposal = syncset.latest_proposal
        master = self._role == "master"
        return {
            "role": self._role,
            "address": self._server.address if self._server.started else None,
            "masterAddress": (self.address if master else self._slave.master_address if self._slave else None),
            "masterEpoch": self._master_epoch,
            "epoch": store.epochs.last_epoch(),
            "syncStateSet": sorted(local),
            "syncStateSetEpoch": syncset.local_epoch,
            "synchronizing": syncset.synchronizing,
            "proposedSyncStateSet": sorted(proposal) if proposal is not None else None,
            "inSyncReplicasNums": syncset.in_sync_replicas_nums(),
            "confirmOffset": store.confirm_offset,
            "maxOffset": store.max_offset,
            "connections": [
                {
                    "slaveId": link.slave_id,
                    "address": link.address,
                    "ackOffset": link.conn.ack_offset,
                    "lagBytes": max(store.max_offset - link.conn.ack_offset, 0) if link.conn.ack_offset >= 0 else None,
                    "inSync": link.slave_id in local,
                    "learner": link.conn.is_learner,
                }
                for link in sorted(self._live(), key=lambda lk: (lk.slave_id or 0, lk.address))
            ],
            "slave": self._slave.status() if self._slave is not None else None,
        }


class _Events(LinkEvents):
    """What the HA server reports, forwarded to the service's private handlers."""

    def __init__(self, service: HAService) -> None:
        self._service = service

    def accepting(self) -> bool:
        return self._service.role == "master"

    def on_handshake(self, link: MasterLink, event: Handshaked) -> bool:
        return self._service._handshake(link, event)

    def on_ack(self, link: MasterLink, event: Acked) -> None:
        self._service._ack(link, event)

    def on_closed(self, link: MasterLink) -> None:
        self._service._closed(link)
