"""`kubectl brokergroup remove-set <bg>`: take the group's last broker set out of service, as RocketMQ operators
decommission a broker (wipe its write permission, let the consumers drain it, then remove it).

1. Every running replica of the set stops taking writes (`PUT /v1/admin/write-permission`, read-only);
   consumers keep reading from it through its master Service.
2. The set's master must report no unconsumed message for any consumer group (`GET /v1/consumer-lag`), and no
   topic with messages that no group ever read from (`GET /v1/topics`). Otherwise the command stops there and
   says which: run it again once the consumers caught up (`--cancel`
   gives the set its writes back; `--force` skips steps 1 and 2 and drops what is left).
3. The operator is asked to release the set (`brokergroup.io/release-set`), after which `spec.brokers.sets`
   may shrink; the command lowers it by one and waits until the set's StatefulSet is gone.

The set's PersistentVolumeClaims are kept (its messages stay on them) until deleted by hand.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from brokergroup.kubectl.kube import Kube
from brokergroup.kubectl.targets import PluginError, set_entry
from brokergroup.kubectl.waiting import now as _now
from brokergroup.kubectl.waiting import wait as _wait
from brokergroup.operator import labels, names, release
from brokergroup.operator.builders.secret import BROKER_TOKEN_KEY

WHY = "kubectl brokergroup remove-set"


def lag_summary(reply: Any, limit: int = 5) -> tuple[int, str]:
    """(total lag, the first queues still behind, in words) from a broker's `GET /v1/consumer-lag`."""
    if not isinstance(reply, dict) or not isinstance(reply.get("totalLag"), int):
        raise PluginError(f"unexpected consumer-lag reply: {str(reply)[:200]}")
    behind = [q for q in reply.get("queues") or [] if isinstance(q, dict) and int(q.get("lag") or 0) > 0]
    words = [f"group {q.get('group')} topic {q.get('topic')} queue {q.get('queueId')}: {q.get('lag')}" for q in behind]
    more = f", and {len(words) - limit} more" if len(words) > limit else ""
    return int(reply["totalLag"]), "; ".join(words[:limit]) + more


def unclaimed_topics(topics: Any, lag: Any) -> list[str]:
    """Topics of a broker's `GET /v1/topics` that hold messages no consumer group ever committed a read of
    (absent from its `GET /v1/consumer-lag`): the lag check cannot vouch for them."""
    if not isinstance(topics, dict) or not isinstance(topics.get("topics"), dict):
        raise PluginError(f"unexpected topics reply: {str(topics)[:200]}")
    read = {q.get("topic") for q in (lag or {}).get("queues") or [] if isinstance(q, dict)}
    return sorted(
        topic
        for topic, queues in topics["topics"].items()
        if topic not in read and any(int(q.get("maxOffset") or 0) > int(q.get("minOffset") or 0) for q in queues)
    )


def _running(kube: Kube, namespace: str, bg: str, index: int) -> list[str]:
    pods = kube.pods(namespace, labels.broker_set_selector(bg, index))
    return sorted(
        p["metadata"]["name"]
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    )


def _set_writable(kube: Kube, namespace: str, pods: list[str], token: str, writable: bool) -> None:
    for pod in pods:
        status, reply = kube.pod_put_json(
            namespace,
            pod,
            names.BROKER_PORT,
            "/v1/admin/write-permission",
            {"writable": writable},
            {"X-Brokergroup-Token": token},
        )
        if status != 200 or not isinstance(reply, dict):
            remark = reply.get("remark") if isinstance(reply, dict) else reply
            raise PluginError(f"broker {pod} refused the write permission change: HTTP {status}: {remark}")
        state = "takes writes again" if writable else "refuses writes now (read-only); consumers still read it"
        print(f"{_now()}  {pod} ({reply.get('role')}) {state}", flush=True)


def _master(kube: Kube, namespace: str, bg: dict[str, Any], set_name: str, running: list[str]) -> str:
    master = set_entry(bg, set_name).get("masterPod")
    if master in running:
        return str(master)
    replies = kube.broker_statuses(namespace, running)
    return next((p for p, r in replies.items() if isinstance(r, dict) and r.get("role") == "master"), running[0])


def remove_set(kube: Kube, args: argparse.Namespace) -> int:
    ns, name = args.namespace, args.brokergroup
    deadline = time.monotonic() + args.timeout
    bg = kube.group(ns, name)
    sets = int(((bg.get("spec") or {}).get("brokers") or {}).get("sets") or 1)
    decision = release.decide(name, sets, names.broker_set(name, sets - 1))
    if isinstance(decision, release.Refused):
        raise PluginError(decision.message.split(": ", 1)[-1])
    last, index = decision.broker_set, sets - 1
    running = _running(kube, ns, name, index)
    if args.cancel:
        if not running:
            raise PluginError(f"no pod of {last} runs: nothing to give writes back to")
        token = kube.secret_value(ns, names.controller_auth(name), BROKER_TOKEN_KEY, WHY)
        _set_writable(kube, ns, running, token, True)
        return 0
    if not args.force:
        if not running:
            raise PluginError(f"no pod of {last} runs, so its consumers' progress cannot be read; --force removes it")
        token = kube.secret_value(ns, names.controller_auth(name), BROKER_TOKEN_KEY, WHY)
        _set_writable(kube, ns, running, token, False)
        master = _master(kube, ns, bg, last, running)
        lag = kube.pod_get_json(ns, master, names.BROKER_PORT, "/v1/consumer-lag")
        total, behind = lag_summary(lag)
        unclaimed = unclaimed_topics(kube.pod_get_json(ns, master, names.BROKER_PORT, "/v1/topics"), lag)
        if unclaimed:
            raise PluginError(
                f"{last} holds messages of topics no consumer group has read from ({', '.join(unclaimed)}); its "
                "writes stay refused: --cancel gives them back, --force removes the set and drops those messages"
            )
        if total:
            raise PluginError(
                f"{last} still holds {total} unconsumed messages ({behind}); its writes stay refused: run remove-set "
                "again once the consumers caught up, --cancel to give it its writes back, or --force to drop them"
            )
        print(f"{_now()}  {last}: every consumer group has read everything ({master}'s view)", flush=True)
    kube.annotate(ns, name, {labels.RELEASE_SET_ANNOTATION: last})

    def released() -> bool:
        now = kube.group(ns, name)
        if (now["metadata"].get("annotations") or {}).get(labels.RELEASE_SET_ANNOTATION) is not None:
            return False  # not handled yet
        if not set_entry(now, last).get("released"):
            raise PluginError(f"the operator did not release {last}: see `kubectl describe brokergroup {name}`")
        return int((now.get("status") or {}).get("setsHoldingData") or 0) <= index

    _wait(f"the operator released {last}", deadline, released)
    print(f"{_now()}  {last} released by the operator", flush=True)
    kube.patch_spec(ns, name, {"brokers": {"sets": index}})
    print(f"{_now()}  spec.brokers.sets: {sets} -> {index}", flush=True)
    _wait(f"StatefulSet {last} is deleted", deadline, lambda: not kube.stateful_set_exists(ns, last))
    claims = kube.claims(ns, {labels.BROKER_SET_LABEL: last})
    kept = f"; its PersistentVolumeClaims are kept: {', '.join(claims)}" if claims else ""
    print(f"{_now()}  {last} removed{kept}", flush=True)
    return 0
