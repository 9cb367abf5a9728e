"""`kubectl-brokergroup`: status, switchover, pause, resume, fence, unfence, restart, remove-set and report for one
BrokerGroup.

Every refusal is one line on stderr and exit status 1 (2 for bad usage), with nothing changed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from brokergroup.kubectl import removeset, render, snapshot, targets
from brokergroup.kubectl.kube import Kube, group_selector
from brokergroup.kubectl.targets import PluginError
from brokergroup.kubectl.waiting import now as _now
from brokergroup.kubectl.waiting import wait as _wait
from brokergroup.operator import labels, names
from brokergroup.operator.builders.secret import BROKER_TOKEN_KEY

PROG = "kubectl brokergroup"


def status(kube: Kube, args: argparse.Namespace) -> int:
    bg = kube.group(args.namespace, args.brokergroup)
    nodes = kube.controller_nodes(args.namespace, args.brokergroup)
    pods = [
        str(r.get("pod"))
        for entry in (bg.get("status") or {}).get("brokerSets") or []
        for r in entry.get("replicas") or []
        if r.get("pod")
    ]
    snap = snapshot.group(bg, nodes, _broker_replies(kube, args.namespace, args.brokergroup, pods))
    if args.output == "json":
        sys.stdout.write(render.as_json(snap))
    else:
        colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
        sys.stdout.write(render.text(snap, colour=colour))
    return 0


def _broker_replies(kube: Kube, ns: str, name: str, pods: list[str]) -> dict[str, dict[str, Any] | str]:
    """Each broker's `GET /v1/status`, asked only of pods that run (a Pending pod has nothing to proxy to)."""
    running = {
        p["metadata"]["name"]
        for p in kube.pods(ns, group_selector(name))
        if (p.get("status") or {}).get("phase") == "Running" and (p.get("status") or {}).get("podIP")
    }
    asked = kube.broker_statuses(ns, [pod for pod in pods if pod in running])
    return {pod: asked.get(pod, "pod is not running") for pod in pods}


def switchover(kube: Kube, args: argparse.Namespace) -> int:
    ns, name, pod = args.namespace, args.brokergroup, args.pod
    bg = kube.group(ns, name)
    set_name = targets.set_of_pod(bg, pod)
    if kube.pod(ns, pod) is None:
        raise PluginError(f"pod {pod} not found in namespace {ns}")
    problem = targets.switchover_problem(bg, pod, set_name)
    if problem:
        raise PluginError(problem)
    elect(kube, ns, name, pod, set_name, time.monotonic() + args.timeout)
    return 0


def elect(kube: Kube, ns: str, name: str, pod: str, set_name: str, deadline: float) -> None:
    """Request a forced election of `pod`, wait for the operator's answer and the master Service; print each step."""

    def last_election() -> dict[str, Any] | None:
        group = kube.group(ns, name)
        for entry in (group.get("status") or {}).get("brokerSets") or []:
            if entry.get("name") == set_name and isinstance(entry.get("lastElection"), dict):
                return dict(entry["lastElection"])
        return None

    before = last_election()

    pending_said = False

    def answered(after: dict[str, Any] | None) -> dict[str, Any] | None:
        nonlocal pending_said
        if targets.election_answer(before, after, pod):
            return after
        request = (kube.group(ns, name).get("status") or {}).get("lastElectionRequest") or {}
        if not pending_said and request.get("request") == pod and request.get("result") == "Pending":
            pending_said = True
            print(f"{_now()}  operator: Pending {request.get('reason')} {request.get('message')}", flush=True)
        return None

    kube.annotate(ns, name, {labels.ELECT_MASTER_ANNOTATION: pod})
    print(f"{_now()}  requested: {labels.ELECT_MASTER_ANNOTATION}={pod} on brokergroup {name}", flush=True)
    answer = _wait(
        f"the operator answers the election request for {pod}",
        deadline,
        lambda: answered(last_election()),
        lambda: f"lastElection {last_election()}",
    )
    epoch = answer.get("masterEpoch")
    reason = answer.get("reason") or ""
    message = answer.get("message") or ""
    print(f"{_now()}  operator answered: {answer.get('result')} epoch {epoch} {reason} {message}".rstrip(), flush=True)
    if answer.get("result") != "Elected":
        raise PluginError(f"the operator refused the switchover to {pod}: {reason}: {message}")
    index = names.set_index(name, set_name)
    service = names.broker_master_service(name, index if index is not None else 0)
    selector = kube.master_service_selector(ns, service)

    def selected() -> list[str]:
        return sorted(p["metadata"]["name"] for p in kube.pods(ns, selector))

    _wait(f"service {service} selects only {pod}", deadline, lambda: selected() == [pod], lambda: str(selected()))
    print(f"{_now()}  service {service} selects {pod}: switchover done", flush=True)


def _broker(kube: Kube, ns: str, name: str, pod: str) -> tuple[dict[str, Any], str]:
    """The group and the set of broker pod `pod`, which must exist: (BrokerGroup, set name)."""
    bg = kube.group(ns, name)
    set_name = targets.set_of_pod(bg, pod)
    if kube.pod(ns, pod) is None:
        raise PluginError(f"pod {pod} not found in namespace {ns}")
    return bg, set_name


def _in_masters_set(kube: Kube, ns: str, bg: dict[str, Any], set_name: str, pod: str) -> bool | None:
    """Is `pod` in its master's own sync-state-set (the master broker's view: no operator needed)? None: unknown."""
    master = targets.set_entry(bg, set_name).get("masterPod")
    if not master:
        return None
    replies = kube.broker_statuses(ns, [str(master), pod])
    mine, theirs = replies.get(pod), replies.get(str(master))
    if not isinstance(mine, dict) or not isinstance(theirs, dict) or mine.get("brokerId") is None:
        return None
    members = (theirs.get("replication") or {}).get("syncStateSet") or []
    return mine["brokerId"] in members


def fence(kube: Kube, args: argparse.Namespace, fenced: bool = True) -> int:
    ns, name, pod = args.namespace, args.brokergroup, args.pod
    verb = "fence" if fenced else "unfence"
    bg, set_name = _broker(kube, ns, name, pod)
    token = kube.secret_value(ns, names.controller_auth(name), BROKER_TOKEN_KEY, f"kubectl brokergroup {verb}")
    status, reply = kube.pod_put_json(
        ns, pod, names.BROKER_PORT, "/v1/admin/fence", {"fenced": fenced}, {"X-Brokergroup-Token": token}
    )
    if status != 200 or not isinstance(reply, dict):
        remark = reply.get("remark") if isinstance(reply, dict) else reply
        raise PluginError(f"broker {pod} refused to {verb}: HTTP {status}: {remark}")
    role = reply.get("role")
    print(f"{_now()}  {pod} ({role}) {'fenced: it refuses writes and is not Ready' if fenced else 'unfenced'}")
    if targets.set_entry(bg, set_name).get("masterPod") == pod:
        if fenced:
            print(f"{_now()}  {pod} is the master of {set_name}: the set takes no writes until it is unfenced")
        return 0
    if not args.wait:
        return 0
    deadline = time.monotonic() + args.timeout
    want = not fenced
    where = "back in" if want else "out of"
    _wait(
        f"{pod} is {where} its master's sync-state-set",
        deadline,
        lambda: _in_masters_set(kube, ns, bg, set_name, pod) is want,
        lambda: f"in the sync-state-set: {_in_masters_set(kube, ns, bg, set_name, pod)}",
    )
    print(f"{_now()}  {pod} is {where} the sync-state-set of {set_name}")
    return 0


def unfence(kube: Kube, args: argparse.Namespace) -> int:
    return fence(kube, args, fenced=False)


def _pod_ready(pod: dict[str, Any] | None) -> bool:
    conditions = ((pod or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def restart(kube: Kube, args: argparse.Namespace) -> int:
    ns, name, pod = args.namespace, args.brokergroup, args.pod
    deadline = time.monotonic() + args.timeout
    bg = kube.group(ns, name)
    fenced = False
    if targets.controller_pod_ordinal(bg, pod) is None:
        bg, set_name = _broker(kube, ns, name, pod)
        ready = _pod_ready(kube.pod(ns, pod))
        handover = targets.restart_handover(bg, pod, set_name, pod_ready=ready, force=args.force)
        reply = kube.broker_statuses(ns, [pod]).get(pod)
        fenced = isinstance(reply, dict) and reply.get("adminFenced") is True
        if handover is not None:
            print(f"{_now()}  {pod} is the master of {set_name}: switching over to {handover} first", flush=True)
            elect(kube, ns, name, handover, set_name, deadline)
    before = kube.pod(ns, pod)
    if before is None:
        raise PluginError(f"pod {pod} not found in namespace {ns}")
    uid = before["metadata"]["uid"]
    kube.delete_pod(ns, pod)
    print(f"{_now()}  deleted pod {pod}; its StatefulSet makes it again", flush=True)

    def back() -> bool:
        now = kube.pod(ns, pod)
        if now is None or now["metadata"]["uid"] == uid:
            return False
        if fenced:  # a fenced broker is never Ready: running is as far as it goes
            return ((now.get("status") or {}).get("phase")) == "Running"
        return _pod_ready(now)

    what = "running again (fenced: not Ready until unfenced)" if fenced else "Ready again"
    _wait(f"pod {pod} is {what}", deadline, back, lambda: "not yet")
    print(f"{_now()}  pod {pod} is {what}: restart done", flush=True)
    return 0


def pause(kube: Kube, args: argparse.Namespace) -> int:
    kube.group(args.namespace, args.brokergroup)
    kube.annotate(args.namespace, args.brokergroup, {labels.PAUSE_ANNOTATION: "true"})
    print(f"brokergroup {args.brokergroup} paused: the operator stops touching its children")
    return 0


def resume(kube: Kube, args: argparse.Namespace) -> int:
    kube.group(args.namespace, args.brokergroup)
    kube.annotate(args.namespace, args.brokergroup, {labels.PAUSE_ANNOTATION: None})
    print(f"brokergroup {args.brokergroup} resumed")
    return 0


def report(kube: Kube, args: argparse.Namespace) -> int:
    from brokergroup.kubectl import report as bundle

    kube.group(args.namespace, args.brokergroup)
    out = Path(args.file or f"{args.brokergroup}-report-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.tar.gz")
    problems = bundle.write(kube, args.namespace, args.brokergroup, args.operator_namespace, out)
    print(f"wrote {out} ({len(problems)} parts could not be collected; see errors.txt in the bundle)")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=PROG, description="Show and drive a BrokerGroup through the API server.")
    top.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    top.add_argument("--context", help="kubeconfig context (default: the current one)")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    common.add_argument("brokergroup", help="the BrokerGroup's name")
    sub = top.add_subparsers(dest="command", required=True)
    p = sub.add_parser("status", parents=[common], help="masters, sync-state sets, elections, rolls, controllers")
    p.add_argument("-o", "--output", choices=["table", "json"], default="table")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    p.set_defaults(run=status)
    p = sub.add_parser("switchover", parents=[common], help="elect <pod> master and wait for its master Service")
    p.add_argument("pod", help="a broker pod of the group, e.g. <bg>-broker-0-1")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the Service (default 120)")
    p.set_defaults(run=switchover)
    for command, run, text in (
        ("fence", fence, "fence <pod>: it refuses writes, is not Ready and leaves the sync-state-set"),
        ("unfence", unfence, "lift the fence on <pod>: it follows its master and rejoins the sync-state-set"),
    ):
        p = sub.add_parser(command, parents=[common], help=text)
        p.add_argument("pod", help="a broker pod of the group, e.g. <bg>-broker-0-1")
        p.add_argument("--no-wait", dest="wait", action="store_false", help="do not wait for the sync-state-set")
        p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait (default 120)")
        p.set_defaults(run=run)
    p = sub.add_parser("restart", parents=[common], help="restart one pod (the master is switched over first)")
    p.add_argument("pod", help="a broker or controller pod of the group")
    p.add_argument("--force", action="store_true", help="restart even when another replica of the set is not ready")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the pod (default 300)")
    p.set_defaults(run=restart)
    sub.add_parser("pause", parents=[common], help="stop reconciling the group").set_defaults(run=pause)
    sub.add_parser("resume", parents=[common], help="reconcile the group again").set_defaults(run=resume)
    p = sub.add_parser(
        "remove-set", parents=[common], help="stop the last set's writes, check it is drained, release and remove it"
    )
    p.add_argument("--force", action="store_true", help="skip the write stop and the drain check: drop what is left")
    p.add_argument("--cancel", action="store_true", help="give the last set its writes back (after a refused try)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the operator (default 300)")
    p.set_defaults(run=removeset.remove_set)
    p = sub.add_parser("report", parents=[common], help="write a support bundle (tar.gz)")
    p.add_argument("-f", "--file", help="bundle path (default: <bg>-report-<time>.tar.gz)")
    p.add_argument("--operator-namespace", default="brokergroup-system", help="where the operator runs")
    p.set_defaults(run=report)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        kube = Kube(args.kubeconfig, args.context)
        try:
            args.namespace = args.namespace or kube.default_namespace
            return int(args.run(kube, args))
        finally:
            kube.close()
    except PluginError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
