"""A frozen snapshot of one BrokerGroup's HA state, built from API objects and controller replies (pure).

Everything the `status` command shows is here; nothing is fetched or formatted here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from brokergroup.operator import labels


@dataclass(frozen=True)
class Replica:
    pod: str
    broker_id: int | None
    role: str
    in_sync: bool
    alive: bool
    lag: int | None
    """Commit-log bytes behind the master (its store's maxOffset minus this replica's), from both brokers'
    `GET /v1/status`; None when either could not be asked."""
    fenced: bool | None = None
    """Fenced by an administrator (`kubectl brokergroup fence`), from its `GET /v1/status`; None: not asked."""


@dataclass(frozen=True)
class Election:
    request: str
    target: str | None
    result: str
    reason: str | None
    message: str | None
    master_epoch: int | None
    time: str | None


@dataclass(frozen=True)
class Rollout:
    step: str
    pod: str | None
    message: str | None
    updated_replicas: int | None


@dataclass(frozen=True)
class BrokerSet:
    name: str
    desired: int
    ready: int
    master: str | None
    master_epoch: int | None
    sync_state_set_epoch: int | None
    sync_state_set: tuple[str, ...]
    replicas: tuple[Replica, ...]
    last_election: Election | None
    rollout: Rollout | None


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class ControllerNode:
    pod: str
    node_id: str | None
    raft_leader: bool
    leader_id: str | None
    term: int | None
    commit_index: int | None
    serving: bool | None
    error: str | None
    """Why the node could not be asked (its other fields are then empty)."""


@dataclass(frozen=True)
class GroupSnapshot:
    name: str
    namespace: str
    phase: str
    paused: bool
    pending_election: str | None
    """The elect-master annotation still waiting for the operator, if any."""
    sets: tuple[BrokerSet, ...]
    conditions: tuple[Condition, ...]
    controllers: tuple[ControllerNode, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def election(raw: Any) -> Election | None:
    if not isinstance(raw, Mapping):
        return None
    return Election(
        request=str(raw.get("request", "")),
        target=_str(raw.get("target")),
        result=str(raw.get("result", "")),
        reason=_str(raw.get("reason")),
        message=_str(raw.get("message")),
        master_epoch=_int(raw.get("masterEpoch")),
        time=_str(raw.get("time")),
    )


def rollout(raw: Any) -> Rollout | None:
    if not isinstance(raw, Mapping):
        return None
    return Rollout(
        step=str(raw.get("step", "")),
        pod=_str(raw.get("pod")),
        message=_str(raw.get("message")),
        updated_replicas=_int(raw.get("updatedReplicas")),
    )


def max_offset(reply: Mapping[str, Any] | str | None) -> int | None:
    """The store's maxOffset in a broker's `GET /v1/status` reply (None: no reply)."""
    if not isinstance(reply, Mapping) or not isinstance(reply.get("store"), Mapping):
        return None
    return _int(reply["store"].get("maxOffset"))


def lag(master: Mapping[str, Any] | str | None, replica: Mapping[str, Any] | str | None) -> int | None:
    """Commit-log bytes `replica` is behind `master` (0 for the master itself); None when either is unknown."""
    ahead, here = max_offset(master), max_offset(replica)
    return None if ahead is None or here is None else max(0, ahead - here)


def broker_set(raw: Mapping[str, Any], brokers: Mapping[str, Mapping[str, Any] | str] | None = None) -> BrokerSet:
    """One set from its `status.brokerSets[*]` entry, with each broker's own `GET /v1/status` when given."""
    brokers = brokers or {}
    in_sync = tuple(str(p) for p in raw.get("syncStateSet") or [])
    master = brokers.get(str(raw.get("masterPod") or ""))

    def fenced(pod: str) -> bool | None:
        reply = brokers.get(pod)
        return reply.get("adminFenced") is True if isinstance(reply, Mapping) else None

    replicas = tuple(
        Replica(
            pod=str(r.get("pod", "")),
            broker_id=_int(r.get("brokerId")),
            role=str(r.get("role") or "-"),
            in_sync=bool(r.get("inSync")),
            alive=bool(r.get("alive")),
            lag=lag(master, brokers.get(str(r.get("pod", "")))),
            fenced=fenced(str(r.get("pod", ""))),
        )
        for r in raw.get("replicas") or []
        if isinstance(r, Mapping)
    )
    return BrokerSet(
        name=str(raw.get("name", "")),
        desired=_int(raw.get("desiredReplicas")) or 0,
        ready=_int(raw.get("readyReplicas")) or 0,
        master=_str(raw.get("masterPod")),
        master_epoch=_int(raw.get("masterEpoch")),
        sync_state_set_epoch=_int(raw.get("syncStateSetEpoch")),
        sync_state_set=in_sync,
        replicas=replicas,
        last_election=election(raw.get("lastElection")),
        rollout=rollout(raw.get("rollout")),
    )


def controller_node(pod: str, reply: Mapping[str, Any] | str) -> ControllerNode:
    """One controller node from its `GET /v1/status` reply, or from the error text when it gave none."""
    if isinstance(reply, str):
        return ControllerNode(pod, None, False, None, None, None, None, error=reply)
    return ControllerNode(
        pod=pod,
        node_id=_str(reply.get("nodeId")),
        raft_leader=reply.get("raftLeader") is True,
        leader_id=_str(reply.get("leaderId")),
        term=_int(reply.get("term")),
        commit_index=_int(reply.get("commitIndex")),
        serving=reply.get("serving") if isinstance(reply.get("serving"), bool) else None,
        error=None,
    )


def group(
    bg: Mapping[str, Any],
    controllers: Sequence[ControllerNode] = (),
    brokers: Mapping[str, Mapping[str, Any] | str] | None = None,
) -> GroupSnapshot:
    """The snapshot of a BrokerGroup object (as the API server returns it), its controller nodes and its
    brokers' own status replies (pod name -> `GET /v1/status`, or why it could not be asked)."""
    meta = bg.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    status = bg.get("status") or {}
    conditions = tuple(
        Condition(
            type=str(c.get("type", "")),
            status=str(c.get("status", "")),
            reason=str(c.get("reason", "")),
            message=str(c.get("message", "")),
        )
        for c in status.get("conditions") or []
        if isinstance(c, Mapping)
    )
    paused = any(c.type == "ReconciliationPaused" and c.status == "True" for c in conditions)
    return GroupSnapshot(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        phase=str(status.get("phase") or "Unknown"),
        paused=paused,
        pending_election=_str(annotations.get(labels.ELECT_MASTER_ANNOTATION)),
        sets=tuple(broker_set(s, brokers) for s in status.get("brokerSets") or [] if isinstance(s, Mapping)),
        conditions=conditions,
        controllers=tuple(controllers),
    )
