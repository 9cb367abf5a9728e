"""Read-only requests on the controller state (RocketMQ `getReplicaInfo`, `getSyncStateData`).

Pure functions of the replicated `ControllerState` and a frozen `LivenessView`; they return a
`Result` with no events and never mutate anything. `core` re-exports them, so callers can use
`core.get_replica_info` like every other request.
"""

from __future__ import annotations

from brokergroup.controller.codes import ResponseCode
from brokergroup.controller.model import (
    BrokerReplicaInfo,
    ControllerState,
    LivenessView,
    Result,
    SyncStateInfo,
)
from brokergroup.controller.protocol import (
    ReplicaIdentity,
    ReplicaInfoResponse,
    ReplicasInfo,
    SyncStateDataRequest,
    SyncStateDataResponse,
)


def get_replica_info(state: ControllerState, broker_name: str) -> Result:
    """Master, epochs and sync-state-set of one broker set; liveness is not considered."""
    if not state.contains(broker_name):
        return Result(code=ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, remark="Broker metadata is not existed")
    replica, sync = state.replica_info[broker_name], state.sync_state_info[broker_name]
    response = ReplicaInfoResponse(
        master_broker_id=sync.master_broker_id,
        master_address=replica.address_of(sync.master_broker_id),
        master_epoch=sync.master_epoch,
        sync_state_set=sorted(sync.sync_state_set),
        sync_state_set_epoch=sync.sync_state_set_epoch,
    )
    return Result(response=response)


def get_sync_state_data(state: ControllerState, req: SyncStateDataRequest, live: LivenessView) -> Result:
    """Per broker set: master, epochs, and every registered replica split into in-sync (member of
    the sync-state-set) and not-in-sync, each with its liveness; sorted by broker id.

    Unknown broker names are silently omitted. Always SUCCESS.
    """
    table: dict[str, ReplicasInfo] = {}
    for name in req.broker_names:
        if state.contains(name):
            table[name] = _replicas_info(state.replica_info[name], state.sync_state_info[name], live)
    return Result(response=SyncStateDataResponse(replicas_info_table=table))


def _replicas_info(replica: BrokerReplicaInfo, sync: SyncStateInfo, live: LivenessView) -> ReplicasInfo:
    in_sync: list[ReplicaIdentity] = []
    not_in_sync: list[ReplicaIdentity] = []
    for broker_id, address in replica.broker_id_table().items():
        identity = ReplicaIdentity(
            broker_name=replica.broker_name,
            broker_id=broker_id,
            broker_address=address,
            alive=live.is_active(replica.broker_name, broker_id),
        )
        (in_sync if broker_id in sync.sync_state_set else not_in_sync).append(identity)
    return ReplicasInfo(
        master_broker_id=sync.master_broker_id,
        master_address=replica.address_of(sync.master_broker_id),
        master_epoch=sync.master_epoch,
        sync_state_set_epoch=sync.sync_state_set_epoch,
        in_sync_replicas=in_sync,
        not_in_sync_replicas=not_in_sync,
    )
