"""One reconcile of one BrokerGroup: read a snapshot, decide, apply step by step, report.

Every trigger (create, update, resume, the resync timer, a child's change) runs the same
`Reconciler.reconcile`, one at a time per BrokerGroup. It is level-based and idempotent: a second
run with nothing changed reads and writes nothing (children carry a spec hash; the status is
compared before it is written).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, ParamSpec, TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException

from brokergroup.operator import builders, conditions, elect, events, labels, names, release, resize, status
from brokergroup.operator.builders.meta import Owner
from brokergroup.operator.builders.secret import (
    admin_token,
    auth_secret_problems,
    missing_keys_patch,
    new_auth_secret,
)
from brokergroup.operator.conditions import Condition
from brokergroup.operator.controller_link import (
    ControllerLink,
    ControllerLinkError,
    ControllerUnreachable,
    api_server_proxy,
)
from brokergroup.operator.kube import Kube, api_message, describe
from brokergroup.operator.metrics import OperatorMetrics
from brokergroup.operator.roles import Blocked, ElectAway, guard_scale_down
from brokergroup.operator.settings import OperatorSettings
from brokergroup.operator.spec import BrokerGroupSpec, SpecError, parse_spec

logger = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Outcome:
    """What a reconcile did, in one sentence, and whether it must be retried."""

    result: str
    """ok, no_change, paused, invalid_spec, blocked, retry, gone."""
    summary: str
    retry: bool = False


@dataclass
class Cycle:
    """What one reconcile decided and did: the notes become one Event; conditions go to status."""

    bg: dict[str, Any]
    actions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the cycle decided that is not a change to children (an election answered): logged, no ChildrenApplied."""
    conditions: list[Condition] = field(default_factory=list)
    events: list[events.Event] = field(default_factory=list)
    retry_reason: str | None = None


def utc_now() -> datetime:
    return datetime.now(UTC)


class Reconciler:
    def __init__(
        self,
        kube: Kube,
        settings: OperatorSettings,
        metrics: OperatorMetrics,
        *,
        clock: Callable[[], datetime] = utc_now,
        token: Callable[[int], str] = secrets.token_urlsafe,
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.metrics = metrics
        self._clock = clock
        self._token = token
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._seen: set[tuple[str, str]] = set()

    async def io(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run one blocking Kubernetes call off the event loop."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    def lock(self, namespace: str, name: str) -> asyncio.Lock:
        """One reconcile or follower cycle at a time per BrokerGroup: both write its status."""
        return self._locks.setdefault((namespace, name), asyncio.Lock())

    async def link(self, namespace: str, bg: str, token: str | None) -> ControllerLink:
        """The controller link of `bg`: outside the cluster without a `controller_url`, the API server's
        service proxy to `<bg>-controller-api`; else `controller_url` with `{name}`, `{namespace}` and
        `{cluster_ip}` (the ClusterIP of `<bg>-controller-api`) filled in."""
        if self.settings.through_api_server:
            route = api_server_proxy(self.kube.api_client.configuration).route(
                namespace, names.controller_api(bg), names.CONTROLLER_API_PORT
            )
            return ControllerLink(route, token=token, timeout=self.settings.controller_timeout)
        cluster_ip = ""
        if "{cluster_ip}" in self.settings.controller_template:
            service = await self.io(self.kube.get, "v1", "Service", namespace, names.controller_api(bg))
            cluster_ip = str(((service or {}).get("spec") or {}).get("clusterIP") or "unknown-cluster-ip")
        address = self.settings.controller_address(bg, namespace, cluster_ip=cluster_ip)
        return ControllerLink(address, token=token, timeout=self.settings.controller_timeout)

    def now(self) -> str:
        return self._clock().strftime("%Y-%m-%dT%H:%M:%SZ")

    # -- entry -------------------------------------------------------------------------------

    async def reconcile(self, namespace: str, name: str, *, trigger: str) -> Outcome:
        key = (namespace, name)
        async with self.lock(namespace, name):
            started = asyncio.get_running_loop().time()
            try:
                bg = await self.io(self.kube.get_brokergroup, namespace, name)
                if bg is None or bg["metadata"].get("deletionTimestamp"):
                    self._forget(key)
                    outcome = Outcome("gone", f"{namespace}/{name} is gone or being deleted: nothing to do")
                else:
                    if key not in self._seen:
                        self._seen.add(key)
                        self.metrics.brokergroups.set(len(self._seen))
                    outcome = await self._reconcile(bg)
            except Exception:
                self.metrics.reconciles.labels(trigger, "error").inc()
                raise
            finally:
                self.metrics.reconcile_seconds.observe(asyncio.get_running_loop().time() - started)
            self.metrics.reconciles.labels(trigger, outcome.result).inc()
            logger.info("reconcile %s/%s (%s): %s", namespace, name, trigger, outcome.summary)
            return outcome

    def _forget(self, key: tuple[str, str]) -> None:
        self._seen.discard(key)
        self._locks.pop(key, None)
        self.metrics.brokergroups.set(len(self._seen))
        self.metrics.forget(*key)

    # -- the cycle ---------------------------------------------------------------------------

    async def _reconcile(self, bg: dict[str, Any]) -> Outcome:
        meta = bg["metadata"]
        name, namespace, generation = meta["name"], meta["namespace"], int(meta.get("generation") or 1)
        previous: dict[str, Any] = dict(bg.get("status") or {})
        stored = previous  # what the API holds: the status write is a diff against this
        cycle = Cycle(bg=bg)

        annotations = meta.get("annotations") or {}
        pause = annotations.get(labels.PAUSE_ANNOTATION)
        # Any value but "false" pauses: a typo ("yes", "ture") must not un-pause a group someone meant to hold.
        paused = pause is not None and pause.strip().lower() != "false"
        self.metrics.paused.labels(namespace, name).set(1 if paused else 0)
        if paused:
            assert pause is not None
            if pause.strip().lower() == "true":
                cond = Condition(
                    conditions.RECONCILIATION_PAUSED,
                    "True",
                    "PausedByAnnotation",
                    f"{labels.PAUSE_ANNOTATION}=true: children and status are left as they are",
                )
            else:
                cond = Condition(
                    conditions.RECONCILIATION_PAUSED,
                    "True",
                    "InvalidAnnotation",
                    f"{labels.PAUSE_ANNOTATION}={pause!r} is neither 'true' nor 'false': the group stays paused "
                    "until it is 'false' or removed (kubectl brokergroup resume)",
                )
            extra = self._defer_election(cycle, previous, annotations.get(labels.ELECT_MASTER_ANNOTATION))
            await self._finish_conditions_only(
                cycle, previous, [cond], generation, transition_event="Paused", extra=extra
            )
            return Outcome("paused", f"paused by {labels.PAUSE_ANNOTATION}={pause}")
        if conditions.find(previous.get("conditions"), conditions.RECONCILIATION_PAUSED) is not None:
            cycle.conditions.append(
                Condition(conditions.RECONCILIATION_PAUSED, "False", "Resumed", "reconciliation is running")
            )

        try:
            spec = parse_spec(bg.get("spec") or {}, default_image=self.settings.image)
        except SpecError as exc:
            cond = Condition(conditions.READY, "False", "InvalidSpec", str(exc))
            await self._finish_conditions_only(cycle, previous, [cond], generation, transition_event="InvalidSpec")
            return Outcome("invalid_spec", f"spec refused: {exc}")

        owner = Owner(name=name, namespace=namespace, uid=meta["uid"])
        token = await self._ensure_secret(cycle, owner)
        if token is None:
            await self._finish_conditions_only(
                cycle, previous, cycle.conditions, generation, transition_event="InvalidSecret"
            )
            return Outcome("blocked", cycle.conditions[-1].message, retry=True)

        desired = builders.desired_children(owner, spec)
        # One listing of what exists serves the scale-down guard, the writes and the pruning.
        existing = await self.io(self.kube.owned, namespace, name)
        live = {(o["kind"], o["metadata"]["name"]): o for o in existing}
        release_request = (meta.get("annotations") or {}).get(labels.RELEASE_SET_ANNOTATION)
        if release_request is not None:
            previous = await self._release_set(cycle, spec, previous, release_request)
        await self._guard_scale_downs(cycle, desired, live, token)
        desired, waiting = await self._resize_volumes(cycle, desired, live, previous)
        applied = {**waiting, **await self._apply(cycle, desired, live)}
        await self._prune(cycle, desired, existing, previous)
        request = (meta.get("annotations") or {}).get(labels.ELECT_MASTER_ANNOTATION)
        if request is not None:
            previous = await self._forced_election(cycle, spec, token, previous, request)

        observed = status.Observed(
            controller=status.workload(
                applied.get(names.controller(name)), names.controller(name), spec.controller.replicas
            ),
            brokers=tuple(
                status.workload(
                    applied.get(names.broker_set(name, i)),
                    names.broker_set(name, i),
                    self._replicas(desired, names.broker_set(name, i), spec),
                )
                for i in range(spec.brokers.sets)
            ),
        )
        new_status = status.build(
            bg=name,
            spec=spec,
            generation=generation,
            observed=observed,
            previous=previous,
            extra_conditions=cycle.conditions,
            now=self.now(),
        )
        storage = resize.applied_sizes(
            applied.get(names.controller(name)),
            (applied.get(names.broker_set(name, i)) for i in range(spec.brokers.sets)),
        )
        if storage:
            new_status["storage"] = storage
        await self._write_status(cycle, stored, new_status)
        self.metrics.ready.labels(namespace, name).set(
            1 if (conditions.find(new_status["conditions"], conditions.READY) or {}).get("status") == "True" else 0
        )
        if cycle.actions:
            cycle.events.insert(0, events.Event("ChildrenApplied", "; ".join(cycle.actions), "Apply"))
        await self.post_events(cycle.bg, cycle.events)
        if cycle.retry_reason:
            return Outcome("retry", cycle.retry_reason, retry=True)
        if cycle.actions or cycle.notes:
            return Outcome("ok", "; ".join(cycle.actions + cycle.notes))
        return Outcome("no_change", f"no change: {new_status['phase']}")

    @staticmethod
    def _replicas(desired: list[dict[str, Any]], sts_name: str, spec: BrokerGroupSpec) -> int:
        for obj in desired:
            if obj["kind"] == "StatefulSet" and obj["metadata"]["name"] == sts_name:
                return int(obj["spec"]["replicas"])
        return spec.brokers.replicas

    # -- steps -------------------------------------------------------------------------------

    async def _ensure_secret(self, cycle: Cycle, owner: Owner) -> str | None:
        """The admin token from `<bg>-controller-auth`, creating the Secret once if it is missing.

        An existing Secret is never regenerated: changing the Raft password under running
        controllers would split them. A key added by a later release (the broker token) is added;
        any other missing key is reported, not repaired."""
        secret_name = names.controller_auth(owner.name)
        live = await self.io(self.kube.get, "v1", "Secret", owner.namespace, secret_name)
        if live is None:
            created = new_auth_secret(owner, self._token)
            await self.io(self.kube.create, created)
            cycle.actions.append(f"created Secret {secret_name} (random Raft password, admin and broker tokens)")
            live = created
        patch = missing_keys_patch(live, self._token)
        # A key added by a later release (the broker token): adding it changes no existing value.
        if patch is not None and await self.io(
            self.kube.merge_patch, "v1", "Secret", owner.namespace, secret_name, patch
        ):
            cycle.actions.append(f"added {', '.join(sorted(patch['data']))} to Secret {secret_name}")
            live = {**live, "data": {**(live.get("data") or {}), **patch["data"]}}
        problems = auth_secret_problems(live)
        if problems:
            message = "; ".join(problems) + ". The operator never regenerates it."
            cycle.conditions.append(Condition(conditions.READY, "False", "InvalidSecret", message))
            return None
        return admin_token(live)

    async def _guard_scale_downs(
        self, cycle: Cycle, desired: list[dict[str, Any]], live: dict[tuple[str, str], dict[str, Any]], token: str
    ) -> None:
        """Shrinking a broker set never removes its master by accident: ask the controller to elect a
        replica that stays first; until the master is safe, keep the StatefulSet's current size."""
        bg = cycle.bg["metadata"]["name"]
        namespace = cycle.bg["metadata"]["namespace"]
        shrinking: dict[str, tuple[dict[str, Any], int]] = {}
        for obj in desired:
            if obj["kind"] != "StatefulSet" or names.set_index(bg, obj["metadata"]["name"]) is None:
                continue
            current = live.get(("StatefulSet", obj["metadata"]["name"]))
            live_replicas = int(((current or {}).get("spec") or {}).get("replicas") or 0)
            if current is not None and live_replicas > obj["spec"]["replicas"]:
                shrinking[obj["metadata"]["name"]] = (obj, live_replicas)
        if not shrinking:
            return
        link = await self.link(namespace, bg, token)
        try:
            views = await link.views(sorted(shrinking))
        except ControllerLinkError as exc:
            logger.warning("scale-down of %s waits: %s", ", ".join(sorted(shrinking)), exc)
            views = {}
        for sts_name, (obj, live_replicas) in sorted(shrinking.items()):
            decision = guard_scale_down(sts_name, live_replicas, obj["spec"]["replicas"], views.get(sts_name))
            if isinstance(decision, ElectAway):
                try:
                    result = await link.elect(sts_name, decision.target_broker_id)
                except ControllerLinkError as exc:
                    self.metrics.elections_requested.labels("scale_down", "failed").inc()
                    decision = Blocked(f"{sts_name}: election away from {decision.master_pod} failed: {exc}")
                else:
                    self.metrics.elections_requested.labels("scale_down", "ok").inc()
                    cycle.events.append(
                        events.Event(
                            "ElectedAwayFromRemovedPod",
                            f"{sts_name}: master {decision.master_pod} is being removed by the scale-down to "
                            f"{obj['spec']['replicas']}; the controller elected {decision.target_pod} "
                            f"(broker {result.master_broker_id}, master epoch {result.master_epoch})",
                            "ElectMaster",
                        )
                    )
                    if result.master_broker_id != decision.target_broker_id:
                        decision = Blocked(
                            f"{sts_name}: asked for broker {decision.target_broker_id}, controller answered "
                            f"master {result.master_broker_id}; checking again"
                        )
            if isinstance(decision, Blocked):
                obj["spec"]["replicas"] = live_replicas
                obj["metadata"]["annotations"].pop(labels.SPEC_HASH_ANNOTATION, None)
                builders.with_spec_hash(obj)
                cycle.conditions.append(Condition(conditions.READY, "False", "ScaleDownWaiting", decision.reason))
                cycle.retry_reason = decision.reason

    def _defer_election(self, cycle: Cycle, previous: dict[str, Any], request: str | None) -> dict[str, Any]:
        """An elect-master request made while paused: answered at once (`Deferred`, one Event), recorded in
        `status.lastElectionRequest`; it runs, and its outcome replaces this record, when the group resumes."""
        if request is None:
            return {}
        last = previous.get("lastElectionRequest") or {}
        if last.get("request") == request and last.get("result") == "Deferred":
            return {}
        message = f"{labels.PAUSE_ANNOTATION} is set: the election of {request!r} waits until reconciliation resumes"
        record = elect.record(
            request=request, target=None, result="Deferred", epoch=None, now=self.now(), reason="Paused",
            message=message,
        )  # fmt: skip
        cycle.events.append(events.Event("ElectMasterDeferred", f"elect-master={request}: {message}", "ElectMaster"))
        return {"lastElectionRequest": record}

    def _keep_election(self, cycle: Cycle, previous: dict[str, Any], request: str) -> dict[str, Any] | None:
        """The controller could not be reached for an elect-master request: keep it `Pending` (see
        `elect.keep_pending`) with one `ElectMasterPending` Event and a retry. Returns the status to
        write, or None once `elect_wait_seconds` are over (the request is then refused)."""
        kept = elect.keep_pending(
            previous.get("lastElectionRequest"),
            request,
            now=self._clock(),
            wait_seconds=self.settings.elect_wait_seconds,
        )
        if kept is None:
            return None
        record, first = kept
        if first:
            cycle.events.append(
                events.Event("ElectMasterPending", f"elect-master={request}: {record['message']}", "ElectMaster")
            )
        cycle.retry_reason = f"elect-master={request}: {record['message']}"
        return {**previous, "lastElectionRequest": record}

    async def _forced_election(
        self, cycle: Cycle, spec: BrokerGroupSpec, token: str, previous: dict[str, Any], request: str
    ) -> dict[str, Any]:
        """Handle `brokergroup.io/elect-master=<pod>`: validate, ask the controller (designateElect),
        record `lastElection`, post an Event, remove the annotation. Returns the previous status with
        the record in place, for the status this cycle writes."""
        meta = cycle.bg["metadata"]
        bg, namespace = meta["name"], meta["namespace"]
        target = elect.parse(bg, request, spec)
        decision: elect.Elect | elect.AlreadyMaster | elect.Refused
        elected, error = None, None
        if isinstance(target, elect.Refused):
            decision = target
        else:
            link = await self.link(namespace, bg, token)
            reachable = True
            try:
                views = await link.views([target.broker_set])
            except ControllerLinkError as exc:
                logger.warning("elect-master %s: %s", request, exc)
                views, reachable = {}, False
                kept = self._keep_election(cycle, previous, request)
                if kept is not None:
                    return kept
            decision = elect.decide(
                target,
                views.get(target.broker_set),
                unclean_allowed=spec.controller.elect_unclean_master,
                reachable=reachable,
            )
            if isinstance(decision, elect.Elect):
                try:
                    elected = await link.elect(decision.target.broker_set, decision.broker_id)
                except ControllerUnreachable as exc:
                    # No controller answered (none knew a leader: a Raft election after the controllers restarted,
                    # say): kept and asked again, as when the view could not be read. The request is idempotent:
                    # had it been applied, the next try finds the target master (AlreadyMaster).
                    logger.warning("elect-master %s: %s", request, exc)
                    kept = self._keep_election(cycle, previous, request)
                    if kept is not None:
                        return kept
                    error = str(exc)
                except ControllerLinkError as exc:
                    error = str(exc)
                self.metrics.elections_requested.labels("annotation", "ok" if elected else "failed").inc()
        if isinstance(decision, elect.Refused):
            self.metrics.elections_requested.labels("annotation", "refused").inc()
        broker_set, record = elect.answer(request, decision, now=self.now(), elected=elected, error=error)
        severity: Literal["Normal", "Warning"] = (
            "Normal" if record["result"] in ("Elected", "AlreadyMaster") else "Warning"
        )
        cycle.events.append(
            events.Event(
                f"ElectMaster{record['result']}",
                f"elect-master={request}: {record['message']}",
                "ElectMaster",
                severity,
            )
        )
        # The request is answered: remove the annotation (a second identical request is harmless).
        await self.io(
            self.kube.merge_patch,
            f"{names.GROUP}/{names.VERSION}",
            names.KIND,
            namespace,
            bg,
            {"metadata": {"annotations": {labels.ELECT_MASTER_ANNOTATION: None}}},
        )
        # Said by its own Event and status, not in ChildrenApplied (a refusal is not a change to children).
        cycle.notes.append(f"answered elect-master={request}: {record['result']}")
        previous = {**previous, "lastElectionRequest": record}
        if not broker_set:
            return previous
        entries = [dict(e) for e in previous.get("brokerSets") or []]
        for entry in entries:
            if entry.get("name") == broker_set:
                entry["lastElection"] = record
                break
        else:
            entries.append({"name": broker_set, "lastElection": record})
        return {**previous, "brokerSets": entries}

    async def _release_set(
        self, cycle: Cycle, spec: BrokerGroupSpec, previous: dict[str, Any], request: str
    ) -> dict[str, Any]:
        """Handle `brokergroup.io/release-set=<set>` (`release`): mark the set released or refuse, post an
        Event, remove the annotation. Returns the previous status with the release in place."""
        meta = cycle.bg["metadata"]
        decision = release.decide(meta["name"], spec.brokers.sets, request)
        if isinstance(decision, release.Released):
            cycle.events.append(events.Event("SetReleased", decision.message, "ReleaseSet"))
            previous = release.apply(previous, decision.broker_set)
        else:
            cycle.events.append(events.Event("ReleaseSetRefused", decision.message, "ReleaseSet", "Warning"))
        await self.io(
            self.kube.merge_patch,
            f"{names.GROUP}/{names.VERSION}",
            names.KIND,
            meta["namespace"],
            meta["name"],
            {"metadata": {"annotations": {labels.RELEASE_SET_ANNOTATION: None}}},
        )
        cycle.notes.append(f"answered release-set={request}: {decision.message}")
        return previous

    async def _resize_volumes(
        self,
        cycle: Cycle,
        desired: list[dict[str, Any]],
        live: dict[tuple[str, str], dict[str, Any]],
        previous: dict[str, Any],
    ) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
        """A raised storage size: grow the claims, then re-create the StatefulSet (`resize`). Returns the
        children to apply this pass and the StatefulSets left out of it (being re-created), by name."""
        namespace, bg = cycle.bg["metadata"]["namespace"], cycle.bg["metadata"]["name"]
        out: list[dict[str, Any]] = []
        waiting: dict[str, dict[str, Any]] = {}
        claims: list[resize.Claim] | None = None
        # Once a size was raised, `StorageResized` is checked again while False and once per new generation
        # (so `kubectl wait --for=condition=StorageResized` never reads an older generation's True).
        last = conditions.find(previous.get("conditions"), resize.STORAGE_RESIZED)
        generation = int(cycle.bg["metadata"].get("generation") or 1)
        checking = last is not None and (last.get("status") != "True" or last.get("observedGeneration") != generation)
        for obj in desired:
            current = live.get((obj["kind"], obj["metadata"]["name"]))
            if obj["kind"] != "StatefulSet" or current is None:
                out.append(obj)
                continue
            name, size = obj["metadata"]["name"], resize.template_size(obj) or ""
            if current["metadata"].get("deletionTimestamp"):  # orphaned last pass: create it once it is gone
                waiting[name] = current
                cycle.retry_reason = f"waiting for StatefulSet {name} to be deleted (its pods are kept)"
                continue
            step = resize.step(obj, current)
            if step == "none":
                out.append(obj)
                continue
            out.append(resize.with_template_of(obj, current))  # the rest of the spec still applies
            if step == "shrink":
                cycle.conditions.append(resize.shrink_refused(name, size, resize.template_size(current)))
                continue
            if claims is None:
                claims = [resize.Claim.of(c) for c in await self.io(self.kube.claims, namespace, bg)]
            replicas = int((current.get("spec") or {}).get("replicas") or 0)
            try:
                for claim in resize.to_raise(size, resize.claims_of(name, replicas, claims)):
                    patch = {"spec": {"resources": {"requests": {"storage": size}}}}
                    if await self.io(self.kube.merge_patch, "v1", "PersistentVolumeClaim", namespace, claim, patch):
                        cycle.actions.append(f"raised PersistentVolumeClaim {claim} to {size}")
            except ApiException as exc:
                cond = resize.refused(name, size, api_message(exc))
                old = conditions.find(previous.get("conditions"), resize.STORAGE_RESIZED) or {}
                if (old.get("reason"), old.get("message")) != (cond.reason, cond.message):  # one Event per refusal
                    cycle.events.append(events.Event(cond.reason, cond.message, "Resize", "Warning"))
                cycle.conditions.append(cond)
                continue
            out.pop()
            await self.io(self.kube.delete, current, orphan=True)
            waiting[name] = current
            cycle.actions.append(f"deleted StatefulSet {name} keeping its pods, to re-create it with {size} claims")
            cycle.retry_reason = f"re-creating StatefulSet {name} with {size} claims"
            checking = True
        if checking:
            found = await self.io(self.kube.claims, namespace, bg)
            wanted = {
                o["metadata"]["name"]: (resize.template_size(o) or "", int(o["spec"]["replicas"]))
                for o in desired
                if o["kind"] == "StatefulSet"
            }
            cond = resize.progress(wanted, [resize.Claim.of(c) for c in found], recreating=sorted(waiting))
            if not any(c.type == resize.STORAGE_RESIZED for c in cycle.conditions):
                cycle.conditions.append(cond)
            if cond.status == "False" and cycle.retry_reason is None:
                cycle.retry_reason = f"waiting for volumes to grow: {cond.message}"
        return out, waiting

    async def _apply(
        self, cycle: Cycle, desired: list[dict[str, Any]], live: dict[tuple[str, str], dict[str, Any]]
    ) -> dict[str, dict[str, Any]]:
        """Apply every child in order; return the live StatefulSets by name."""
        live_sets: dict[str, dict[str, Any]] = {}
        for obj in desired:
            result = await self.io(self.kube.apply, obj, live.get((obj["kind"], obj["metadata"]["name"])))
            if result.wrote:
                cycle.actions.append(f"{result.action} {describe(obj)}")
            if obj["kind"] == "StatefulSet":
                live_sets[obj["metadata"]["name"]] = result.obj
        return live_sets

    async def _prune(
        self, cycle: Cycle, desired: list[dict[str, Any]], existing: list[dict[str, Any]], previous: dict[str, Any]
    ) -> None:
        """Delete children the spec no longer asks for (a disabled PDB, a removed broker set). A
        removed set that may hold data is kept, whatever the spec says."""
        meta = cycle.bg["metadata"]
        wanted = {(o["kind"], o["metadata"]["name"]) for o in desired}
        holding = {e.get("name") for e in previous.get("brokerSets") or [] if e.get("holdsData")}
        for obj in existing:
            key = (obj["kind"], obj["metadata"]["name"])
            if key in wanted or not _owned_by(obj, meta["uid"]):
                continue
            set_name = (obj["metadata"].get("labels") or {}).get(labels.BROKER_SET_LABEL)
            if obj["kind"] == "StatefulSet" and set_name in holding:
                reason = f"{set_name} holds data; not deleting its StatefulSet"
                cycle.conditions.append(Condition(conditions.READY, "False", "SetHoldsData", reason))
                continue
            if await self.io(self.kube.delete, obj):
                cycle.actions.append(f"deleted {describe(obj)}")

    async def _write_status(self, cycle: Cycle, previous: dict[str, Any], new: dict[str, Any]) -> None:
        if new == previous:
            return
        meta = cycle.bg["metadata"]
        patch = {k: v for k, v in new.items() if previous.get(k) != v}
        patch.update({k: None for k in previous if k not in new})
        await self.io(self.kube.merge_patch_status, meta["namespace"], meta["name"], patch)
        before, after = previous.get("conditions"), new.get("conditions") or []
        for cond in after:
            if cond["type"] == conditions.READY and conditions.transitioned(before, after, conditions.READY):
                kind: Literal["Normal", "Warning"] = "Warning"
                if cond["status"] == "True" or cond["reason"] == "ReplicasNotReady":
                    kind = "Normal"
                cycle.events.append(events.Event(cond["reason"], cond["message"], "Status", kind))

    async def _finish_conditions_only(
        self,
        cycle: Cycle,
        previous: dict[str, Any],
        updates: list[Condition],
        generation: int,
        *,
        transition_event: str,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Write only the conditions (and phase), plus `extra` status fields (a deferred election's record)."""
        new = {**status.with_conditions(previous, updates, now=self.now(), generation=generation), **(extra or {})}
        if new != previous:
            meta = cycle.bg["metadata"]
            await self.io(
                self.kube.merge_patch_status,
                meta["namespace"],
                meta["name"],
                {"conditions": new["conditions"], "phase": new["phase"], **(extra or {})},
            )
            changed = [
                c for c in updates if conditions.transitioned(previous.get("conditions"), new["conditions"], c.type)
            ]
            reasons_changed = [
                c
                for c in updates
                if (conditions.find(previous.get("conditions"), c.type) or {}).get("message") != c.message
            ]
            for cond in changed or reasons_changed:
                severity: Literal["Normal", "Warning"] = "Normal" if transition_event == "Paused" else "Warning"
                cycle.events.append(events.Event(cond.reason, cond.message, transition_event, severity))
        if cycle.actions:
            cycle.events.insert(0, events.Event("ChildrenApplied", "; ".join(cycle.actions), "Apply"))
        await self.post_events(cycle.bg, cycle.events)

    async def post_events(self, bg: dict[str, Any], notes: list[events.Event]) -> None:
        """Post `notes` as Events regarding BrokerGroup `bg` (as read this cycle)."""
        now = self._clock().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for event in notes:
            suffix = f"{time.time_ns():x}{secrets.token_hex(2)}"
            body = events.build(event, bg=bg, now=now, instance=self.settings.instance, suffix=suffix)
            try:
                await self.io(self.kube.post_event, body)
            except (
                ApiException,
                urllib3.exceptions.HTTPError,
                OSError,
            ) as exc:  # an Event is a report, not a step: never fail a reconcile over it
                logger.warning("could not post Event %s: %s", event.reason, exc)


def _owned_by(obj: dict[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])
