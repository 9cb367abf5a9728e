"""`kubectl annotate bg <bg> brokergroup.io/elect-master=<pod>` (pure part).

The operator validates the value against the spec and the controller's view, asks the controller
for a designated election only when it can succeed, records the answer in
`status.brokerSets[].lastElection` and removes the annotation. Asking twice is harmless: a target
that is already master is answered `AlreadyMaster` without a new election.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from brokergroup.controller.protocol import ElectMasterResponse
from brokergroup.operator import names
from brokergroup.operator.roles import SetView
from brokergroup.operator.spec import BrokerGroupSpec


@dataclass(frozen=True)
class Target:
    broker_set: str
    pod: str


@dataclass(frozen=True)
class Refused:
    reason: str
    """CamelCase: UnknownPod, NotABrokerPod, NotRegistered, NotAlive, NotInSyncStateSet, ControllerUnavailable,
    UnknownBrokerSet."""
    message: str
    broker_set: str | None = None


@dataclass(frozen=True)
class Elect:
    target: Target
    broker_id: int


@dataclass(frozen=True)
class AlreadyMaster:
    target: Target
    epoch: int


def parse(bg: str, value: str, spec: BrokerGroupSpec) -> Target | Refused:
    """The pod an annotation value names, if it is a broker pod of this BrokerGroup's spec."""
    pod = value.strip()
    for index in range(spec.brokers.sets):
        sts = names.broker_set(bg, index)
        ordinal = names.pod_ordinal(sts, pod)
        if ordinal is None:
            continue
        if ordinal >= spec.brokers.replicas:
            return Refused("UnknownPod", f"{pod!r}: {sts} has {spec.brokers.replicas} replicas", sts)
        return Target(broker_set=sts, pod=pod)
    if pod.startswith(f"{bg}-controller-"):
        return Refused("NotABrokerPod", f"{pod!r} is a controller pod; name a broker pod such as {bg}-broker-0-1")
    return Refused(
        "UnknownPod",
        f"{pod!r} is not a broker pod of {bg} (pods are {bg}-broker-<set 0..{spec.brokers.sets - 1}>-"
        f"<replica 0..{spec.brokers.replicas - 1}>)",
    )


def decide(
    target: Target, view: SetView | None, *, unclean_allowed: bool, reachable: bool = False
) -> Elect | AlreadyMaster | Refused:
    """`view` None: the controller could not be reached (`reachable` False) or knows no such set."""
    if view is None and reachable:
        return Refused(
            "UnknownBrokerSet",
            f"the controller knows no broker set {target.broker_set} (none of its brokers has registered); "
            "no election was requested",
            target.broker_set,
        )
    if view is None:
        return Refused(
            "ControllerUnavailable",
            f"the controller's view of {target.broker_set} is unavailable; no election was requested",
            target.broker_set,
        )
    if view.master_pod == target.pod:
        return AlreadyMaster(target, view.master_epoch)
    member = view.member(target.pod)
    if member is None:
        return Refused("NotRegistered", f"{target.pod} is not registered with the controller", target.broker_set)
    if not member.alive:
        return Refused("NotAlive", f"{target.pod} (broker {member.broker_id}) is not alive", target.broker_set)
    if not member.in_sync and not unclean_allowed:
        return Refused(
            "NotInSyncStateSet",
            f"{target.pod} (broker {member.broker_id}) is not in the sync-state-set of {target.broker_set} "
            "and controller.electUncleanMaster is false: electing it could lose acknowledged messages",
            target.broker_set,
        )
    return Elect(target, member.broker_id)


PENDING = "Pending"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def keep_pending(
    last: dict[str, Any] | None, request: str, *, now: datetime, wait_seconds: float
) -> tuple[dict[str, Any], bool] | None:
    """The controller could not be reached for `request`: keep it (the annotation stays, the operator
    retries) as a `Pending` `lastElectionRequest`, until `wait_seconds` after the first try. Returns
    (the record, whether this is the first try), or None once the wait is over: refuse it then.

    The record's `time` is the first try, so retries rewrite nothing."""
    since = None
    if last and last.get("request") == request and last.get("result") == PENDING:
        try:
            since = datetime.strptime(str(last.get("time")), TIME_FORMAT).replace(tzinfo=UTC)
        except ValueError:
            since = None
    if (now - (since or now)).total_seconds() >= wait_seconds:
        return None
    entry = record(
        request=request,
        target=None,
        result=PENDING,
        epoch=None,
        now=(since or now).strftime(TIME_FORMAT),
        reason="ControllerUnavailable",
        message=f"the controller cannot be reached; retrying for up to {wait_seconds:g} s before refusing",
    )
    return entry, since is None


def record(
    *, request: str, target: str | None, result: str, epoch: int | None, now: str, reason: str, message: str
) -> dict[str, Any]:
    """A `lastElection` entry (absent keys rather than nulls)."""
    entry: dict[str, Any] = {
        "request": request,
        "target": target,
        "result": result,
        "masterEpoch": epoch,
        "time": now,
        "reason": reason,
        "message": message,
    }
    return {k: v for k, v in entry.items() if v is not None}


def answer(
    request: str,
    decision: Elect | AlreadyMaster | Refused,
    *,
    now: str,
    elected: ElectMasterResponse | None = None,
    error: str | None = None,
) -> tuple[str | None, dict[str, Any]]:
    """The broker set to record under (None when the request named none) and its `lastElection`.

    For an `Elect`, pass the controller's answer (`elected`) or why it could not be asked (`error`)."""
    if isinstance(decision, Refused):
        entry = record(
            request=request,
            target=None,
            result="Refused",
            epoch=None,
            now=now,
            reason=decision.reason,
            message=decision.message,
        )
        return decision.broker_set, entry
    target = decision.target
    if isinstance(decision, AlreadyMaster):
        entry = record(
            request=request,
            target=target.pod,
            result="AlreadyMaster",
            epoch=decision.epoch,
            now=now,
            reason="AlreadyMaster",
            message=f"{target.pod} is already master; nothing to do",
        )
    elif elected is None:
        entry = record(
            request=request,
            target=target.pod,
            result="Failed",
            epoch=None,
            now=now,
            reason="ControllerRefused",
            message=error or "the controller did not answer",
        )
    else:
        won = elected.master_broker_id == decision.broker_id
        entry = record(
            request=request,
            target=target.pod,
            result="Elected" if won else "NotElected",
            epoch=elected.master_epoch,
            now=now,
            reason="Elected" if won else "ControllerChoseAnother",
            message=f"controller elected broker {elected.master_broker_id}, master epoch {elected.master_epoch}",
        )
    return target.broker_set, entry
