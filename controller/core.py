"""The controller's state machine: compute, then apply (RocketMQ `ReplicasInfoManager`).

Every request is handled in two steps, as in RocketMQ:

1. **compute** (`next_broker_id`, `apply_broker_id`, `register_broker`, `elect_master`,
   `alter_sync_state_set`, `clean_broker_data`, and the reads in `queries`): a pure function of
   the replicated `ControllerState`, the request and a frozen `LivenessView`. It returns a
   `Result`: the response (or a RocketMQ code and remark) and the events to commit. It never
   mutates the state, reads no clock and does no I/O.
2. **apply** (`apply_event`): when Raft has committed an event, every controller node applies it
   to its copy of the state. Apply is deterministic: the same events in the same order give the
   same state on every node. Events for a broker set that no longer exists are no-ops.

The response is computed before the events are applied, so it announces what apply will
produce: e.g. an election answers `masterEpoch = old + 1`, and applying its `ElectMasterEvent`
makes the state's masterEpoch exactly that. Remarks are RocketMQ's, word for word, so that
operators who know mqadmin recognise them.

Invariants kept by apply (given committed events computed by this module):
- a broker set exists for the controller when both maps know its name (`state.contains`);
- masterEpoch and syncStateSetEpoch never decrease while a set exists;
- `next_assign_broker_id` only grows.
Some RocketMQ quirks are reproduced on purpose (see `clean_broker_data` and `_apply_clean`):
cleaning the master's id leaves `master_broker_id` dangling, and cleaning ids until the
sync-state-set is empty drops only the sync-state entry, so the set becomes "unknown". Two
brokergroup guards sit in front of that quirk: such a clean is refused unless forced, and the
apply-id that recreates a half-removed set also commits a failed election, so the recreated set's
first election is not a "first-time" one that any broker wins unchecked.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from brokergroup.controller import election
from brokergroup.controller.codes import ResponseCode
from brokergroup.controller.model import (
    FIRST_BROKER_CONTROLLER_ID,
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    BrokerReplicaInfo,
    CleanBrokerDataEvent,
    ControllerState,
    ElectMasterEvent,
    Event,
    LivenessView,
    Result,
    SyncStateInfo,
    UpdateBrokerAddressEvent,
)
from brokergroup.controller.protocol import (
    AlterSyncStateSetRequest,
    AlterSyncStateSetResponse,
    ApplyIdRequest,
    ApplyIdResponse,
    BrokerMemberGroup,
    CleanBrokerDataRequest,
    ElectMasterRequest,
    ElectMasterResponse,
    NextIdRequest,
    NextIdResponse,
    RegisterRequest,
    RegisterResponse,
)
from brokergroup.controller.queries import get_replica_info, get_sync_state_data

__all__ = [
    "CONTROLLER_TRIGGER_BROKER_ID",
    "alter_sync_state_set",
    "apply_broker_id",
    "apply_event",
    "apply_events",
    "clean_broker_data",
    "elect_master",
    "get_replica_info",
    "get_sync_state_data",
    "next_broker_id",
    "parse_broker_ids",
    "register_broker",
    "scan_need_reelect_broker_sets",
]

logger = logging.getLogger(__name__)

CONTROLLER_TRIGGER_BROKER_ID = -1
"""`ElectMasterRequest.broker_id` of an election the controller triggers itself."""


def _java_str(value: int | None) -> str:
    """How Java's `String.format("%s", Long)` prints a nullable id."""
    return "null" if value is None else str(value)


# ---- registration -------------------------------------------------------------------------------


def next_broker_id(state: ControllerState, req: NextIdRequest) -> Result:
    """The id a new broker of the set should apply for: 1 for an unknown set. Always SUCCESS."""
    replica = state.replica_info.get(req.broker_name)
    next_id = FIRST_BROKER_CONTROLLER_ID if replica is None else replica.next_assign_broker_id
    response = NextIdResponse(cluster_name=req.cluster_name, broker_name=req.broker_name, next_broker_id=next_id)
    return Result(response=response)


def apply_broker_id(state: ControllerState, req: ApplyIdRequest) -> Result:
    """Claim a broker id: the first id of an unknown set must be 1; any unused id, or a retry
    with the same register check code, is accepted in a known set."""
    name, broker_id = req.broker_name, req.applied_broker_id
    replica = state.replica_info.get(name)
    event = ApplyBrokerIdEvent(
        broker_name=name,
        cluster_name=req.cluster_name,
        broker_address=req.register_check_code.split(";")[0],
        new_broker_id=broker_id,
        register_check_code=req.register_check_code,
    )
    response = ApplyIdResponse(cluster_name=req.cluster_name, broker_name=name)
    if replica is None:
        if broker_id == FIRST_BROKER_CONTROLLER_ID:
            return Result(response=response, events=(event,))
        remark = (
            f"Broker-set: {name} hasn't been registered in controller, but broker try to apply brokerId: {broker_id}"
        )
        return Result(code=ResponseCode.CONTROLLER_BROKER_ID_INVALID, remark=remark)
    stored = replica.broker_id_info.get(broker_id)
    if stored is None or stored[1] == req.register_check_code:
        if name not in state.sync_state_info:
            return Result(response=response, events=(event, *_restart_half_removed(name)))
        return Result(response=response, events=(event,))
    remark = f"Fail to apply brokerId: {broker_id} in broker-set: {name}"
    return Result(code=ResponseCode.CONTROLLER_BROKER_ID_INVALID, remark=remark)


def _restart_half_removed(name: str) -> tuple[Event, ...]:
    """brokergroup: the events that follow the apply-id recreating a half-removed set.

    A forced clean of a set's whole sync-state-set drops the sync-state entry while replica ids
    remain (`_apply_clean`); the next apply-id then starts both maps afresh at masterEpoch 0, and in
    RocketMQ the first broker to ask would win that "first-time" election with no liveness,
    sync-state or offset check, a broker whose log may be far behind the lost in-sync master. A
    failed election committed right after the recreation (masterEpoch 1, no master, empty
    sync-state-set) sends the next election through the election policy, which with an empty
    sync-state-set can only pick a replica when `enableElectUncleanMaster` is on: an unclean
    election by this door needs the unclean flag, as by any other.
    """
    return (ElectMasterEvent(broker_name=name, new_master_elected=False),)


def register_broker(state: ControllerState, req: RegisterRequest, live: LivenessView) -> Result:
    """Confirm a broker with an applied id; tell it the master if that master is alive.

    Never elects. Emits `UpdateBrokerAddressEvent` when the broker's address changed.
    """
    name, broker_id = req.broker_name, req.broker_id
    if not state.contains(name):
        remark = f"Broker-set: {name} hasn't been registered in controller"
        return Result(code=ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, remark=remark)
    replica, sync = state.replica_info[name], state.sync_state_info[name]
    if broker_id not in replica.broker_id_info:
        remark = f"BrokerId: {broker_id} hasn't been registered in broker-set: {name}"
        return Result(code=ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, remark=remark)
    master = sync.master_broker_id
    master_alive = master is not None and live.is_active(name, master)
    response = RegisterResponse(
        master_broker_id=master if master_alive else None,
        master_address=replica.address_of(master) if master_alive else None,
        master_epoch=sync.master_epoch if master_alive else None,
        sync_state_set_epoch=sync.sync_state_set_epoch,
        sync_state_set=sorted(sync.sync_state_set),
    )
    events: tuple[Event, ...] = ()
    if replica.address_of(broker_id) != req.broker_address:
        events = (
            UpdateBrokerAddressEvent(
                broker_name=name,
                cluster_name=req.cluster_name,
                broker_address=req.broker_address,
                broker_id=broker_id,
            ),
        )
    return Result(response=response, events=events)


# ---- election -----------------------------------------------------------------------------------


def elect_master(
    state: ControllerState,
    req: ElectMasterRequest,
    live: LivenessView,
    *,
    enable_elect_unclean_master: bool,
) -> Result:
    """Elect a master for a broker set (RocketMQ `electMaster`, reference §1.3.3).

    - masterEpoch 0 (never elected) and a real broker id: that broker wins outright, with no
      liveness or membership check;
    - otherwise the election policy picks (designated broker if `designate_elect`);
    - the current master picked again -> MASTER_STILL_EXIST, with the current data;
    - nobody picked: a controller-triggered election (`broker_id == -1`) still commits
      `ElectMasterEvent(False)` (master := none, masterEpoch + 1) and answers
      MASTER_NOT_AVAILABLE; a broker or admin election fails with ELECT_MASTER_FAILED, no event.
    """
    name = req.broker_name
    if not state.contains(name):
        return Result(code=ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, remark="Broker hasn't been registered")
    replica, sync = state.replica_info[name], state.sync_state_info[name]
    old_master = sync.master_broker_id
    new_master: int | None = None
    if sync.first_time_for_elect and req.broker_id != CONTROLLER_TRIGGER_BROKER_ID:
        new_master = req.broker_id
    if new_master is None:
        new_master = election.elect(
            broker_name=name,
            sync_state_brokers=frozenset(sync.sync_state_set),
            all_replica_brokers=frozenset(replica.broker_id_info) if enable_elect_unclean_master else None,
            old_master=old_master,
            prefer_broker_id=req.broker_id if req.designate_elect else None,
            live=live,
        )
    if new_master is not None and new_master == old_master:
        return _master_still_exists(replica, sync)
    if new_master is not None:
        return _new_master_elected(replica, sync, new_master)
    if req.broker_id == CONTROLLER_TRIGGER_BROKER_ID:
        return Result(
            code=ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
            remark="Old master has down and failed to elect a new broker master",
            events=(ElectMasterEvent(broker_name=name, new_master_elected=False),),
        )
    return Result(code=ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, remark="Failed to elect a new master")


def _master_still_exists(replica: BrokerReplicaInfo, sync: SyncStateInfo) -> Result:
    master = sync.master_broker_id
    response = ElectMasterResponse(
        master_broker_id=master,
        master_address=replica.address_of(master),
        master_epoch=sync.master_epoch,
        sync_state_set_epoch=sync.sync_state_set_epoch,
        sync_state_set=sorted(sync.sync_state_set),
    )
    remark = (
        f"The old master {_java_str(master)} is still alive, "
        f"not need to elect new master for broker {replica.broker_name}"
    )
    return Result(code=ResponseCode.CONTROLLER_MASTER_STILL_EXIST, remark=remark, response=response)


def _new_master_elected(replica: BrokerReplicaInfo, sync: SyncStateInfo, new_master: int) -> Result:
    group = BrokerMemberGroup(
        cluster=replica.cluster_name,
        broker_name=replica.broker_name,
        broker_addrs={str(bid): addr for bid, addr in replica.broker_id_table().items()},
    )
    response = ElectMasterResponse(
        master_broker_id=new_master,
        master_address=replica.address_of(new_master),
        master_epoch=sync.master_epoch + 1,
        sync_state_set_epoch=sync.sync_state_set_epoch + 1,
        sync_state_set=[new_master],
        broker_member_group=group,
    )
    event = ElectMasterEvent(broker_name=replica.broker_name, new_master_elected=True, new_master_broker_id=new_master)
    return Result(response=response, events=(event,))


def scan_need_reelect_broker_sets(state: ControllerState, live: LivenessView) -> list[str]:
    """Broker sets with a recorded master that is not alive while some registered replica is.

    The controller leader re-elects these periodically; this repairs an election whose event
    failed to commit (RocketMQ #6382). Sorted by name.
    """
    needing: list[str] = []
    for name, sync in sorted(state.sync_state_info.items()):
        master = sync.master_broker_id
        replica = state.replica_info.get(name)
        if master is None or replica is None or live.is_active(name, master):
            continue
        if any(live.is_active(name, broker_id) for broker_id in replica.broker_id_info):
            needing.append(name)
    return needing


# ---- sync-state-set -----------------------------------------------------------------------------


def alter_sync_state_set(state: ControllerState, req: AlterSyncStateSetRequest, live: LivenessView) -> Result:
    """Shrink or expand a sync-state-set on the master's request; checks run in RocketMQ's order."""
    name = req.broker_name
    if not state.contains(name):
        return Result(code=ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, remark="Broker metadata is not existed")
    replica, sync = state.replica_info[name], state.sync_state_info[name]
    new_set = set(req.sync_state_set)
    master = sync.master_broker_id
    rejected = "Rejecting alter syncStateSet request because"
    failure: tuple[ResponseCode, str] | None = None
    if new_set == sync.sync_state_set:
        failure = (
            ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
            "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet",
        )
    elif master is None or master != req.master_broker_id:
        failure = (
            ResponseCode.CONTROLLER_INVALID_MASTER,
            f"{rejected} the current leader is:{{{_java_str(master)}}}, not {{{req.master_broker_id}}}",
        )
    elif req.master_epoch != sync.master_epoch:
        failure = (
            ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
            f"{rejected} the current master epoch is:{{{sync.master_epoch}}}, not {{{req.master_epoch}}}",
        )
    elif req.sync_state_set_epoch != sync.sync_state_set_epoch:
        failure = (
            ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
            f"{rejected} the current syncStateSet epoch is:{{{sync.sync_state_set_epoch}}}, "
            f"not {{{req.sync_state_set_epoch}}}",
        )
    else:
        failure = _check_new_members(replica, new_set, master, live) or _check_caught_up(
            replica.broker_name, new_set - sync.sync_state_set, req.confirm_offset, live
        )
    if failure is not None:
        return Result(code=failure[0], remark=failure[1])
    epoch = sync.sync_state_set_epoch + 1
    ordered = sorted(new_set)
    response = AlterSyncStateSetResponse(sync_state_set=ordered, sync_state_set_epoch=epoch)
    event = AlterSyncStateSetEvent(broker_name=name, new_sync_state_set=tuple(ordered))
    return Result(response=response, events=(event,))


def _check_new_members(
    replica: BrokerReplicaInfo, new_set: set[int], master: int, live: LivenessView
) -> tuple[ResponseCode, str] | None:
    """Checks 6 and 7: every member registered and alive (in id order), master kept."""
    rejected = "Rejecting alter syncStateSet request because"
    for broker_id in sorted(new_set):
        if broker_id not in replica.broker_id_info:
            return (
                ResponseCode.CONTROLLER_INVALID_REPLICAS,
                f"{rejected} the replicas {{{broker_id}}} don't exist",
            )
        if not live.is_active(replica.broker_name, broker_id):
            return (
                ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
                f"{rejected} the replicas {{{broker_id}}} don't alive",
            )
    if master not in new_set:
        return (
            ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
            f"{rejected} the newSyncStateSet don't contains origin leader {{{master}}}",
        )
    return None


def _check_caught_up(
    broker_name: str, added: set[int], confirm_offset: int, live: LivenessView
) -> tuple[ResponseCode, str] | None:
    """brokergroup: every member being added holds everything the master had confirmed when it
    proposed, by the max offset of its last heartbeat (what an election would rank it by). A
    member elected without that data would lose acknowledged, maybe consumed, messages."""
    for broker_id in sorted(added):
        info = live.info(broker_name, broker_id)
        reported = -1 if info is None else info.max_offset
        if reported < confirm_offset:
            return (
                ResponseCode.CONTROLLER_INVALID_REPLICAS,
                f"Rejecting alter syncStateSet request because the replica {{{broker_id}}} is behind the "
                f"master's confirm offset {confirm_offset}: its last heartbeat reports max offset {reported}",
            )
    return None


# ---- admin: clean broker data -------------------------------------------------------------------


class _NumberFormatError(ValueError):
    """Java's `NumberFormatException`, with Java's message, for RocketMQ's remark."""

    def __init__(self, text: str) -> None:
        super().__init__(f'java.lang.NumberFormatException: For input string: "{text}"')


_JAVA_LONG = re.compile(r"[+-]?[0-9]+")
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def _parse_java_long(text: str) -> int:
    """Java's `Long.valueOf(String)` for ASCII input: optional sign, digits, 64-bit range."""
    if not _JAVA_LONG.fullmatch(text):
        raise _NumberFormatError(text)
    value = int(text)
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise _NumberFormatError(text)
    return value


def parse_broker_ids(text: str) -> set[int]:
    """Parse mqadmin's `"1;2;3"` exactly as RocketMQ does (`String.split(";")` + `Long.valueOf`).

    Java's split drops trailing empty strings, so `"1;2;"` is {1, 2} and `";"` is the empty set
    (which then cleans the whole broker set, as in RocketMQ). Raises `ValueError` with Java's
    exception text on a malformed id.
    """
    parts = text.split(";")
    while parts and parts[-1] == "":
        parts.pop()
    return {_parse_java_long(part) for part in parts}


def _is_blank(text: str | None) -> bool:
    """Commons-lang `StringUtils.isBlank`."""
    return text is None or not text.strip()


def clean_broker_data(state: ControllerState, req: CleanBrokerDataRequest, live: LivenessView) -> Result:
    """Remove a broker set, or some of its ids, from the controller (RocketMQ `cleanBrokerData`).

    Without `is_clean_living_broker`: no ids and a recorded master -> refused; ids that do not
    parse or that are alive -> refused. With it: no checks, and the id list is ignored, so the
    whole broker set is wiped (RocketMQ's behaviour, kept).

    brokergroup: ids whose removal would leave other replicas of the set but nobody in its
    sync-state-set are refused unless `force` (see `_strands_replicas`).
    """
    name = req.broker_name
    invalid = ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    ids: set[int] | None = None
    if not req.is_clean_living_broker:
        text = req.broker_controller_ids_to_clean
        sync = state.sync_state_info.get(name)
        if _is_blank(text) and sync is not None and sync.master_broker_id is not None:
            return Result(code=invalid, remark=f"Broker {name} is still alive, clean up failure")
        if text is not None and not _is_blank(text):
            try:
                ids = parse_broker_ids(text)
            except ValueError as exc:
                remark = f"Please set the option <brokerControllerIdsToClean> according to the format, exception: {exc}"
                return Result(code=invalid, remark=remark)
            for broker_id in sorted(ids):
                if live.is_active(name, broker_id):
                    return Result(
                        code=invalid, remark=f"Broker [{name},  {broker_id}] is still alive, clean up failure"
                    )
    if not state.contains(name):
        return Result(code=invalid, remark=f"Broker {name} is not existed,clean broker data failure.")
    if ids and not req.force:
        stranded = _strands_replicas(state, name, ids, live)
        if stranded is not None:
            return Result(code=invalid, remark=stranded)
    event = CleanBrokerDataEvent(broker_name=name, broker_id_set_to_clean=None if ids is None else tuple(sorted(ids)))
    return Result(events=(event,))


def _strands_replicas(state: ControllerState, name: str, ids: set[int], live: LivenessView) -> str | None:
    """brokergroup: why cleaning `ids` would strand the set's other replicas, or None.

    Cleaning every member of the sync-state-set (typically the dead master, its only member) while
    other ids remain drops the set's sync-state entry: the set becomes unknown, its live replicas
    get BROKER_NEED_TO_BE_REGISTERED on register and never elect, and the next apply-id recreates
    the set without them. RocketMQ does this silently; we refuse unless forced.
    """
    replica, sync = state.replica_info[name], state.sync_state_info[name]
    remaining = sorted(set(replica.broker_id_info) - ids)
    if not remaining or sync.sync_state_set - ids:
        return None
    alive = [bid for bid in remaining if live.is_active(name, bid)]
    dead = [bid for bid in remaining if bid not in alive]

    def listed(bids: list[int]) -> str:
        return ", ".join(f"{bid} ({replica.address_of(bid)})" for bid in bids) or "none"

    return (
        f"Broker {name}: cleaning {sorted(ids)} would empty the sync-state-set {sorted(sync.sync_state_set)} "
        f"while other replicas remain (alive: {listed(alive)}; not alive: {listed(dead)}). The set would become "
        "unknown to the controller: its replicas could not register or elect, and the next apply-id would "
        "recreate it without them. Bring an in-sync replica back instead, or clean with force to do it anyway "
        "(the recreated set then elects a master only with enableElectUncleanMaster)"
    )


# ---- apply --------------------------------------------------------------------------------------


def apply_events(state: ControllerState, events: Iterable[Event]) -> None:
    """Apply committed events in order."""
    for event in events:
        apply_event(state, event)


def apply_event(state: ControllerState, event: Event) -> None:
    """Apply one committed event to `state` (RocketMQ `applyEvent`, reference §1.2)."""
    match event:
        case ApplyBrokerIdEvent():
            _apply_broker_id(state, event)
        case UpdateBrokerAddressEvent():
            _apply_update_address(state, event)
        case ElectMasterEvent():
            _apply_elect(state, event)
        case AlterSyncStateSetEvent():
            if state.contains(event.broker_name):
                _set_sync_state_set(state.sync_state_info[event.broker_name], event.new_sync_state_set)
        case CleanBrokerDataEvent():
            _apply_clean(state, event)
        case _:
            raise TypeError(f"unknown event type {type(event).__name__}")


def _add_broker(replica: BrokerReplicaInfo, broker_id: int, address: str, check_code: str) -> None:
    replica.broker_id_info[broker_id] = (address, check_code)
    replica.next_assign_broker_id += 1


def _set_sync_state_set(sync: SyncStateInfo, members: Iterable[int]) -> None:
    sync.sync_state_set = set(members)
    sync.sync_state_set_epoch += 1


def _apply_broker_id(state: ControllerState, event: ApplyBrokerIdEvent) -> None:
    name = event.broker_name
    if state.contains(name):
        replica = state.replica_info[name]
        if event.new_broker_id not in replica.broker_id_info:
            _add_broker(replica, event.new_broker_id, event.broker_address, event.register_check_code)
        return
    # First broker of the set, or the set was half-removed by a clean: start both maps afresh.
    replica = BrokerReplicaInfo(cluster_name=event.cluster_name, broker_name=name)
    _add_broker(replica, event.new_broker_id, event.broker_address, event.register_check_code)
    state.replica_info[name] = replica
    state.sync_state_info[name] = SyncStateInfo(cluster_name=event.cluster_name, broker_name=name)


def _apply_update_address(state: ControllerState, event: UpdateBrokerAddressEvent) -> None:
    replica = state.replica_info.get(event.broker_name)
    if replica is None or event.broker_id not in replica.broker_id_info:
        return
    check_code = replica.broker_id_info[event.broker_id][1]
    replica.broker_id_info[event.broker_id] = (event.broker_address, check_code)


def _apply_elect(state: ControllerState, event: ElectMasterEvent) -> None:
    if not state.contains(event.broker_name):
        logger.warning("elect-master event for unknown broker set %s ignored", event.broker_name)
        return
    sync = state.sync_state_info[event.broker_name]
    sync.master_epoch += 1
    if event.new_master_elected and event.new_master_broker_id is not None:
        sync.master_broker_id = event.new_master_broker_id
        _set_sync_state_set(sync, (event.new_master_broker_id,))
    else:
        # Nobody elected: the old master is gone, the sync-state-set is kept.
        sync.master_broker_id = None


def _apply_clean(state: ControllerState, event: CleanBrokerDataEvent) -> None:
    name, ids = event.broker_name, event.broker_id_set_to_clean
    if not ids:
        state.replica_info.pop(name, None)
        state.sync_state_info.pop(name, None)
        return
    if not state.contains(name):
        return
    replica, sync = state.replica_info[name], state.sync_state_info[name]
    for broker_id in ids:
        replica.broker_id_info.pop(broker_id, None)
        sync.sync_state_set.discard(broker_id)
    # RocketMQ quirks, kept: master_broker_id is not cleared even if the master's id was
    # removed, and an emptied sync-state-set drops the sync-state entry even when ids remain.
    if not replica.broker_id_info:
        del state.replica_info[name]
    if not sync.sync_state_set:
        del state.sync_state_info[name]
