"""Plain data of the controller: replicated state, events, liveness views, request results.

The replicated state is two maps keyed by broker name ("broker set"), as in RocketMQ's
`ReplicasInfoManager`: replica info (ids and addresses) and sync-state info (master and
epochs). It changes only by applying committed events (`core.apply_event`). Events are
JSON-safe: `to_dict()`/`event_from_dict()` round-trip through Raft and the event log, and
nothing here is pickled as data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel

from brokergroup.controller.codes import ResponseCode

FIRST_BROKER_CONTROLLER_ID = 1


@dataclasses.dataclass
class BrokerReplicaInfo:
    cluster_name: str
    broker_name: str
    next_assign_broker_id: int = FIRST_BROKER_CONTROLLER_ID
    broker_id_info: dict[int, tuple[str, str]] = dataclasses.field(default_factory=dict)
    """broker id -> (address, registerCheckCode)"""

    def address_of(self, broker_id: int | None) -> str | None:
        if broker_id is None or broker_id not in self.broker_id_info:
            return None
        return self.broker_id_info[broker_id][0]

    def broker_id_table(self) -> dict[int, str]:
        return {bid: info[0] for bid, info in sorted(self.broker_id_info.items())}


@dataclasses.dataclass
class SyncStateInfo:
    cluster_name: str
    broker_name: str
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    sync_state_set: set[int] = dataclasses.field(default_factory=set)
    master_broker_id: int | None = None

    @property
    def first_time_for_elect(self) -> bool:
        return self.master_epoch == 0

    @property
    def master_exists(self) -> bool:
        return self.master_broker_id is not None


@dataclasses.dataclass
class ControllerState:
    replica_info: dict[str, BrokerReplicaInfo] = dataclasses.field(default_factory=dict)
    sync_state_info: dict[str, SyncStateInfo] = dataclasses.field(default_factory=dict)

    def contains(self, broker_name: str) -> bool:
        """RocketMQ's `isContainsBroker`: both maps must know the set."""
        return broker_name in self.replica_info and broker_name in self.sync_state_info

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ControllerState:
        """Inverse of `to_dict`; used to restore a Raft snapshot."""
        state = cls()
        for name, r in data.get("replicaInfo", {}).items():
            state.replica_info[name] = BrokerReplicaInfo(
                cluster_name=r["clusterName"],
                broker_name=name,
                next_assign_broker_id=int(r["nextAssignBrokerId"]),
                broker_id_info={int(b): (v[0], v[1]) for b, v in r["brokers"].items()},
            )
        for name, s in data.get("syncStateInfo", {}).items():
            state.sync_state_info[name] = SyncStateInfo(
                cluster_name=s["clusterName"],
                broker_name=name,
                master_epoch=int(s["masterEpoch"]),
                sync_state_set_epoch=int(s["syncStateSetEpoch"]),
                sync_state_set={int(b) for b in s["syncStateSet"]},
                master_broker_id=s["masterBrokerId"],
            )
        return state

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dump: Raft snapshots, debugging endpoints, state comparisons in tests."""
        return {
            "replicaInfo": {
                name: {
                    "clusterName": r.cluster_name,
                    "nextAssignBrokerId": r.next_assign_broker_id,
                    "brokers": {str(b): list(v) for b, v in sorted(r.broker_id_info.items())},
                }
                for name, r in sorted(self.replica_info.items())
            },
            "syncStateInfo": {
                name: {
                    "clusterName": s.cluster_name,
                    "masterBrokerId": s.master_broker_id,
                    "masterEpoch": s.master_epoch,
                    "syncStateSet": sorted(s.sync_state_set),
                    "syncStateSetEpoch": s.sync_state_set_epoch,
                }
                for name, s in sorted(self.sync_state_info.items())
            },
        }


# ---- events -----------------------------------------------------------------------------------


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names, looked up once per class (`dataclasses.fields` is slow on a hot path)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


@dataclasses.dataclass(frozen=True)
class Event:
    """A replicated state change. `TYPE` is the event-log type name (DESIGN §2.3)."""

    TYPE: ClassVar[str] = ""
    broker_name: str

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-safe data (fields are plain values or tuples of them: no deep copy needed)."""
        body: dict[str, Any] = {"type": self.TYPE}
        for name in field_names(type(self)):
            value = getattr(self, name)
            body[name] = list(value) if isinstance(value, tuple) else value
        return body


@dataclasses.dataclass(frozen=True)
class ApplyBrokerIdEvent(Event):
    TYPE: ClassVar[str] = "APPLY_BROKER_ID"
    cluster_name: str
    broker_address: str
    new_broker_id: int
    register_check_code: str


@dataclasses.dataclass(frozen=True)
class UpdateBrokerAddressEvent(Event):
    TYPE: ClassVar[str] = "UPDATE_BROKER_ADDRESS"
    cluster_name: str
    broker_address: str
    broker_id: int


@dataclasses.dataclass(frozen=True)
class ElectMasterEvent(Event):
    TYPE: ClassVar[str] = "ELECT_MASTER"
    new_master_elected: bool
    new_master_broker_id: int | None = None


@dataclasses.dataclass(frozen=True)
class AlterSyncStateSetEvent(Event):
    TYPE: ClassVar[str] = "ALTER_SYNC_STATE_SET"
    new_sync_state_set: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class CleanBrokerDataEvent(Event):
    TYPE: ClassVar[str] = "CLEAN_BROKER_DATA"
    broker_id_set_to_clean: tuple[int, ...] | None = None


EVENT_TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls
    for cls in (
        ApplyBrokerIdEvent,
        UpdateBrokerAddressEvent,
        ElectMasterEvent,
        AlterSyncStateSetEvent,
        CleanBrokerDataEvent,
    )
}


def event_from_dict(data: Mapping[str, Any]) -> Event:
    """Inverse of `Event.to_dict`; raises ValueError naming the problem."""
    kind = data.get("type")
    cls = EVENT_TYPES.get(str(kind))
    if cls is None:
        raise ValueError(f"unknown event type {kind!r}")
    fields = set(field_names(cls))
    kwargs = {k: v for k, v in data.items() if k != "type"}
    if set(kwargs) != fields:
        raise ValueError(f"event {kind}: fields {sorted(kwargs)} do not match {sorted(fields)}")
    for key, value in kwargs.items():
        if isinstance(value, list):
            kwargs[key] = tuple(value)
    return cls(**kwargs)


# ---- liveness ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BrokerLiveInfo:
    """What the heartbeat table holds for one broker (RocketMQ `BrokerLiveInfo`)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    last_update_ms: int
    heartbeat_timeout_ms: int
    epoch: int
    max_offset: int
    confirm_offset: int
    election_priority: int

    def active_at(self, now_ms: int) -> bool:
        return self.last_update_ms + self.heartbeat_timeout_ms >= now_ms


@dataclasses.dataclass(frozen=True)
class LivenessView:
    """Which brokers are alive at one moment, `now_ms`, taken once per request.

    `brokers` maps (broker name, broker id) to what the heartbeat table holds for it. With
    `now_ms`, a broker counts as alive when its entry is active at `now_ms`; without (a view
    built by hand, as tests do), every broker listed is alive. The heartbeat table hands out
    its own mapping, not a copy: a view costs O(1) to make and to ask, whatever the size of the
    fleet, and is used within the one synchronous computation it was made for (nothing else
    changes the table meanwhile). The core never reads a clock: whoever builds the view decides
    what "now" is.
    """

    brokers: Mapping[tuple[str, int], BrokerLiveInfo] = dataclasses.field(default_factory=dict)
    now_ms: int | None = None

    def is_active(self, broker_name: str, broker_id: int) -> bool:
        return self.info(broker_name, broker_id) is not None

    def info(self, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        info = self.brokers.get((broker_name, broker_id))
        if info is None or (self.now_ms is not None and not info.active_at(self.now_ms)):
            return None
        return info

    def active(self) -> dict[tuple[str, int], BrokerLiveInfo]:
        """Every alive broker, sorted by key: O(n), for listings and tests, not for a request's path."""
        return {
            key: info
            for key, info in sorted(self.brokers.items())
            if self.now_ms is None or info.active_at(self.now_ms)
        }


# ---- results ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Result:
    """What a request computes: a response (or error code and remark) and the events to commit.

    `response` is sent on success, and also with some errors (MASTER_STILL_EXIST carries the
    current master). Computing never mutates state; only committed events do.
    """

    code: ResponseCode = ResponseCode.SUCCESS
    remark: str = ""
    response: BaseModel | None = None
    events: tuple[Event, ...] = ()

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS
