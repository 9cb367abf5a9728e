"""The follower: one level-triggered loop per BrokerGroup that projects the controller's view onto
pods (role labels, broker ids, master epochs) and into `status.brokerSets[]`.

Each cycle reads one snapshot (the controller's sync-state data, the set's pods), plans with
`follow.plan_set` (demotions first) and applies one patch at a time; then it waits on the
controller's `/v1/events` long-poll, so an election is projected as soon as it commits, and
resyncs from sync-state data at least every `resync_seconds` and after any gap in the feed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

import urllib3
from kubernetes.client.exceptions import ApiException

from brokergroup.operator import conditions, events, follow, labels, names, rollout, status
from brokergroup.operator.builders.secret import admin_token
from brokergroup.operator.conditions import Condition
from brokergroup.operator.controller_link import ControllerLink, ControllerLinkError
from brokergroup.operator.reconcile import Reconciler
from brokergroup.operator.roles import SetView
from brokergroup.operator.spec import MasterUpdateStrategy, SpecError, parse_spec

logger = logging.getLogger(__name__)

CATCH_UP_PAGES = 20
"""At most this many pages of the event feed (1000 records each) are read to catch up after a pause."""

OWNED = ("masterPod", "masterBrokerId", "masterEpoch", "syncStateSet", "syncStateSetEpoch", "replicas")
"""The `status.brokerSets[]` fields the follower owns; `reconcile` owns the others."""


@dataclass
class FeedCursor:
    """Where the follower is in the controller's event feed, and when elections committed."""

    after: int = 0
    primed: bool = False
    commits: dict[tuple[str, int], tuple[float, str]] = field(default_factory=dict)
    """(set, master epoch) -> (commit time in seconds since the epoch, the election's reason)."""
    caught_up: set[tuple[str, int]] = field(default_factory=set)
    """Commits read after the fact (made while the group was paused): counted with their reason, but
    their label convergence is not measured (the operator was not following then)."""
    behind: bool = False
    """The follower skipped cycles (paused): read the feed before the next projection."""

    def take(self, feed: dict[str, Any], sets: set[str], *, live: bool = True) -> bool:
        """Note new ELECT_MASTER commits; True when the feed had a gap. Every cycle resyncs from
        sync-state data anyway: the feed only wakes the follower and dates commits, so a gap costs
        a convergence measurement, never a missed election. `live` False: commits caught up on."""
        for event in feed.get("events") or []:
            if event.get("type") == "ELECT_MASTER" and event.get("brokerName") in sets and self.primed:
                epoch = event.get("masterEpoch")
                if isinstance(epoch, int):
                    key = (str(event["brokerName"]), epoch)
                    self.commits[key] = (event["ts"] / 1000.0, str(event.get("reason") or ""))
                    if live:
                        self.caught_up.discard(key)
                    else:
                        self.caught_up.add(key)
        returned = [int(e["index"]) for e in feed.get("events") or [] if isinstance(e.get("index"), int)]
        gap = bool(feed.get("truncated")) or int(feed.get("lastIndex") or 0) < self.after
        # A page holds at most 1000 records: continue after the last one returned, not lastIndex.
        self.after = max(returned) if returned else int(feed.get("lastIndex") or self.after)
        self.primed = True
        return gap

    def forget(self, broker_set: str, *, through_epoch: int) -> None:
        """Drop the commits of `broker_set` up to `through_epoch`: projected (measured or not), so
        the table holds only elections still ahead of the labels."""
        for key in [k for k in self.commits if k[0] == broker_set and k[1] <= through_epoch]:
            del self.commits[key]
            self.caught_up.discard(key)


@dataclass
class Changed:
    served: bool = False
    """`MasterServicesReady` changed status this cycle."""


def pod_ready(pod: dict[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def unserved_reason(sts: str, view: SetView | None, pods: list[dict[str, Any]], failed: int) -> list[str]:
    """Why the master Service of `sts` does not select its elected master ("Reason: message"), or []."""
    if view is None:
        return [f"NoMaster: the controller does not know {sts}"]
    if view.master_pod is None:
        return [f"NoMaster: no master elected in {sts}"]
    if failed:
        return [f"LabelsNotConverged: {sts}: the role labels could not be patched yet"]
    pod = next((p for p in pods if p["metadata"]["name"] == view.master_pod), None)
    if pod is None or pod["metadata"].get("deletionTimestamp") or not pod_ready(pod):
        return [f"MasterNotReady: {sts}: master {view.master_pod} is not Ready"]
    return []


def newly_projected(view: SetView, old: dict[str, Any], failed: int) -> bool:
    """The controller's master changed since the last status (`old`) and the pods' labels now agree with it:
    an election to count and date. The labels may have needed no patch this cycle: the brokers label their
    own pods, and the new master's patch often lands before the follower reads the pods."""
    return not failed and view.master_pod is not None and view.master_pod != old.get("masterPod")


class Follower:
    def __init__(self, reconciler: Reconciler) -> None:
        self.r = reconciler
        self.kube = reconciler.kube
        self.metrics = reconciler.metrics
        self.settings = reconciler.settings

    async def run(
        self,
        namespace: str,
        name: str,
        stopped: Callable[[float], Awaitable[bool]],
        *,
        woken: asyncio.Event | None = None,
    ) -> None:
        """Follow until `stopped(timeout)` returns True. Setting `woken` runs the next cycle now (a broker
        pod's readiness or a StatefulSet changed) instead of after the controller's long-poll."""
        cursor = FeedCursor()
        woken = woken or asyncio.Event()
        while True:
            woken.clear()
            try:
                link_info = await self.cycle(namespace, name, cursor)
            except Exception:
                logger.exception("follower %s/%s: cycle failed", namespace, name)
                link_info = None
            if link_info is None:
                if await stopped(self.settings.retry_seconds):
                    return
                continue
            link, sets = link_info
            try:
                feed = await first_of(
                    link.events(after=cursor.after, wait_seconds=int(self.settings.resync_seconds)), woken
                )
                if feed is None:
                    # Woken (a pod changed: often a broker that labelled itself right after an election): read
                    # what the feed holds now, without waiting, so the election is dated before the next cycle
                    # projects it; otherwise it would count as `observed`, with no convergence measured.
                    feed = await link.events(after=cursor.after, wait_seconds=0)
                cursor.take(feed, sets)
            except ControllerLinkError as exc:
                logger.info("follower %s/%s: event feed: %s", namespace, name, exc)
                if await stopped(self.settings.retry_seconds):
                    return
            if await stopped(0):
                return

    async def cycle(self, namespace: str, name: str, cursor: FeedCursor) -> tuple[ControllerLink, set[str]] | None:
        """One projection; returns the link and the set names to long-poll, or None to retry later. When the
        masters' serving state changed, the reconcile runs next: it owns `Ready`, which depends on it."""
        changed = Changed()
        try:
            return await self._cycle(namespace, name, cursor, changed)
        finally:
            if changed.served:
                await self.r.reconcile(namespace, name, trigger="follower")

    async def _cycle(
        self, namespace: str, name: str, cursor: FeedCursor, changed: Changed
    ) -> tuple[ControllerLink, set[str]] | None:
        async with self.r.lock(namespace, name):
            bg = await self.r.io(self.kube.get_brokergroup, namespace, name)
            if bg is None or bg["metadata"].get("deletionTimestamp"):
                return None
            annotations = bg["metadata"].get("annotations") or {}
            if str(annotations.get(labels.PAUSE_ANNOTATION, "")).strip().lower() == "true":
                cursor.behind = cursor.primed
                return None
            try:
                spec = parse_spec(bg.get("spec") or {}, default_image=self.settings.image)
            except SpecError:
                return None
            secret = await self.r.io(self.kube.get, "v1", "Secret", namespace, names.controller_auth(name))
            token = admin_token(secret) if secret else None
            link = await self.r.link(namespace, name, token)
            sets = [names.broker_set(name, i) for i in range(spec.brokers.sets)]
            previous = dict(bg.get("status") or {})
            try:
                views, leader = await link.snapshot(sets)
            except ControllerLinkError as exc:
                changed.served = await self._no_quorum(bg, previous, str(exc))
                return None
            if cursor.behind:
                await self._catch_up(link, cursor, set(sets))
            supervised = spec.brokers.master_update_strategy is MasterUpdateStrategy.SUPERVISED
            changed.served = await self._project(bg, previous, sets, views, cursor, link, leader, supervised)
            return link, set(sets)

    @staticmethod
    async def _catch_up(link: ControllerLink, cursor: FeedCursor, sets: set[str]) -> None:
        """Read the feed up to now (no waiting) after a pause, so that the elections made meanwhile are
        counted with the controller's reason when the labels catch up (not as `observed`)."""
        for _ in range(CATCH_UP_PAGES):
            try:
                feed = await link.events(after=cursor.after, wait_seconds=0)
            except ControllerLinkError as exc:
                logger.info("catching up on the event feed: %s", exc)
                return
            before = cursor.after
            cursor.take(feed, sets, live=False)
            if not feed.get("events") or cursor.after == before:
                break
        cursor.behind = False

    async def _no_quorum(self, bg: dict[str, Any], previous: dict[str, Any], error: str) -> bool:
        """Keep the last known labels (the brokers keep theirs up to date themselves); say so in status, in
        the log and (on the transition) in an Event; `Ready` turns False. True when that is new."""
        # The error's text varies from one attempt to the next (refused, timed out, reset): it goes to the
        # log, not into status, so that an unchanged outage writes nothing.
        message = "the controller did not answer; role labels keep their last known values (the operator log has why)"
        conds = [
            Condition(conditions.CONTROLLER_QUORUM, "False", "ControllerUnreachable", message),
            Condition(conditions.MASTER_SERVICES_READY, "False", "ControllerUnreachable", message),
        ]
        if conditions.transitioned(
            previous.get("conditions"),
            conditions.merge(previous.get("conditions"), conds, now="", generation=0),
            conditions.CONTROLLER_QUORUM,
        ):
            meta = bg["metadata"]
            logger.warning("%s/%s: %s: %s", meta["namespace"], meta["name"], message, error)
        controller = {k: v for k, v in (previous.get("controller") or {}).items() if k != "leader"}
        fields = {"controller": controller} if controller != (previous.get("controller") or {}) else {}
        return await self._write(bg, previous, fields, conds, [])

    async def _project(
        self,
        bg: dict[str, Any],
        previous: dict[str, Any],
        sets: list[str],
        views: dict[str, SetView],
        cursor: FeedCursor,
        link: ControllerLink,
        leader: str | None,
        supervised: bool,
    ) -> bool:
        meta = bg["metadata"]
        approval = (meta.get("annotations") or {}).get(rollout.APPROVE_ANNOTATION)
        rollouts: dict[str, dict[str, Any] | None] = {}
        namespace, name = meta["namespace"], meta["name"]
        selector = f"app.kubernetes.io/instance={name},app.kubernetes.io/component={labels.COMPONENT_BROKER}"
        by_set: dict[str, list[dict[str, Any]]] = {}
        for pod in await self.r.io(self.kube.find, "v1", "Pod", namespace, selector):
            by_set.setdefault((pod["metadata"].get("labels") or {}).get(labels.BROKER_SET_LABEL, ""), []).append(pod)
        old_entries = {e.get("name"): e for e in previous.get("brokerSets") or []}
        notes: list[events.Event] = []
        stale = 0
        unserved: list[str] = []
        for sts in sets:
            view = views.get(sts)
            set_pods = by_set.get(sts, [])
            steps = follow.plan_set(view, [follow.PodMeta.of(p) for p in set_pods])
            failed = await self._apply(namespace, steps)
            stale += failed
            unserved.extend(unserved_reason(sts, view, set_pods, failed))
            if view is None:
                continue
            old = old_entries.get(sts) or {}
            if newly_projected(view, old, failed):
                self._converged(namespace, sts, view, cursor)
            cursor.forget(sts, through_epoch=view.master_epoch)
            notes.extend(transitions(sts, old, follow.set_status(view)))
            if not steps and not failed:
                roll_notes, rollouts[sts] = await self._roll(
                    namespace, sts, set_pods, view, link, supervised=supervised, approval=approval
                )
                notes.extend(roll_notes)
        self.metrics.stale_role_labels.labels(namespace, name).set(stale)
        if approval is not None and len(rollouts) == len(sets) and not any(rollouts.values()):
            # Every set is up to date: the approval is used up (a later roll asks again).
            await self.r.io(
                self.kube.merge_patch,
                f"{names.GROUP}/{names.VERSION}",
                names.KIND,
                namespace,
                name,
                {"metadata": {"annotations": {rollout.APPROVE_ANNOTATION: None}}},
            )
        entries = merged_entries(previous, sets, views)
        for entry in entries:
            if entry.get("name") in rollouts:
                progress = rollouts[entry["name"]]
                if progress is None:
                    entry.pop("rollout", None)
                else:
                    entry["rollout"] = progress
        without = [s for s in sets if not (views.get(s) and views[s].master_pod)]
        conds = [
            Condition(conditions.CONTROLLER_QUORUM, "True", "ControllerAnswered", "the controller answered"),
            Condition(
                conditions.MASTERS_ELECTED,
                "False" if without else "True",
                "NoMaster" if without else "AllSetsHaveAMaster",
                f"no master in {', '.join(without)}" if without else f"{len(sets)} of {len(sets)} sets have a master",
            ),
            Condition(
                conditions.ROLE_LABELS_CONVERGED,
                "False" if stale else "True",
                "PatchFailed" if stale else "LabelsMatchController",
                f"{stale} pod label patches failed; retrying" if stale else "pod role labels match the controller",
            ),
            Condition(
                conditions.MASTER_SERVICES_READY,
                "False" if unserved else "True",
                unserved[0].split(":", 1)[0] if unserved else "MastersSelected",
                "; ".join(u.split(":", 1)[1].strip() for u in unserved)
                if unserved
                else "every master Service selects its set's elected master",
            ),
        ]
        # The spec's sets come first in `entries`; removed sets that still hold data follow.
        fields: dict[str, Any] = {"brokerSets": entries, "masters": status.masters(entries[: len(sets)])}
        controller = {k: v for k, v in (previous.get("controller") or {}).items() if k != "leader"}
        if leader:
            controller["leader"] = leader
        if controller != (previous.get("controller") or {}):
            fields["controller"] = controller
        return await self._write(bg, previous, fields, conds, notes)

    async def _roll(
        self,
        namespace: str,
        sts: str,
        pods: list[dict[str, Any]],
        view: SetView,
        link: ControllerLink,
        *,
        supervised: bool,
        approval: str | None,
    ) -> tuple[list[events.Event], dict[str, Any] | None]:
        """One step of a master-last roll of `sts`, if its pods are out of date (see `rollout`), and the
        roll's progress for `status.brokerSets[].rollout` (None when the set is up to date)."""
        live = await self.r.io(self.kube.get, "apps/v1", "StatefulSet", namespace, sts)
        if live is None or (live.get("spec") or {}).get("updateStrategy", {}).get("type") != "OnDelete":
            return [], None
        states = [rollout.PodState.of(p) for p in pods]
        revision = (live.get("status") or {}).get("updateRevision")
        step = rollout.plan(
            sts,
            replicas=int((live.get("spec") or {}).get("replicas") or 0),
            update_revision=revision,
            pods=states,
            view=view,
            supervised=supervised,
            approved=rollout.is_approved(approval, sts),
        )
        progress = rollout.progress(step, states, revision)
        return await self._roll_step(namespace, sts, step, link), progress

    async def _roll_step(
        self, namespace: str, sts: str, step: rollout.Step, link: ControllerLink
    ) -> list[events.Event]:
        if isinstance(step, rollout.DeletePod):
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": step.pod, "namespace": namespace}}
            await self.r.io(self.kube.delete, pod)
            self.metrics.rollout_steps.labels("delete_pod").inc()
            return [events.Event("RollingPod", step.why, "Rollout")]
        if isinstance(step, rollout.ElectUpdated):
            try:
                answer = await link.elect(sts, step.target_broker_id)
            except ControllerLinkError as exc:
                self.metrics.elections_requested.labels("rollout", "failed").inc()
                return [events.Event("RolloutElectionFailed", f"{sts}: {exc}", "Rollout", "Warning")]
            self.metrics.elections_requested.labels("rollout", "ok").inc()
            self.metrics.rollout_steps.labels("elect").inc()
            return [
                events.Event(
                    "ElectedForRollout",
                    f"{sts}: master {step.master_pod} rolls last; the controller elected {step.target_pod} "
                    f"(broker {answer.master_broker_id}, epoch {answer.master_epoch})",
                    "Rollout",
                )
            ]
        if isinstance(step, rollout.Wait):
            logger.debug("%s", step.reason)
        if isinstance(step, rollout.AwaitApproval):
            logger.debug("%s", step.reason)  # status.brokerSets[].rollout says it
        return []

    async def _apply(self, namespace: str, steps: list[follow.LabelStep]) -> int:
        """Apply steps in order (demotions come first); stop at the first failure. Returns failures."""
        for index, step in enumerate(steps):
            try:
                await self.r.io(self.kube.merge_patch, "v1", "Pod", namespace, step.pod, step.patch())
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:  # re-planned next cycle
                logger.warning("label step failed (%s): %s", step.why, exc)
                return len(steps) - index
            logger.info("%s", step.why)
        return 0

    def _converged(self, namespace: str, sts: str, view: SetView, cursor: FeedCursor) -> None:
        key = (sts, view.master_epoch)
        committed = cursor.commits.pop(key, None)
        reason = "observed"
        if committed is not None:
            at, reason = committed
            if key not in cursor.caught_up:
                self.metrics.label_convergence.observe(max(0.0, time.time() - at))
            cursor.caught_up.discard(key)
        self.metrics.elections.labels(namespace, sts, reason or "observed").inc()

    async def _write(
        self,
        bg: dict[str, Any],
        previous: dict[str, Any],
        fields: dict[str, Any],
        conds: list[Condition],
        notes: list[events.Event],
    ) -> bool:
        """Write what changed; True when `MasterServicesReady` changed status (then `Ready` must follow)."""
        meta = bg["metadata"]
        generation = int(meta.get("generation") or 1)
        merged = conditions.merge(previous.get("conditions"), conds, now=self.r.now(), generation=generation)
        new = {**previous, **fields, "conditions": merged}
        patch = {k: v for k, v in new.items() if previous.get(k) != v}
        if "leader" in (previous.get("controller") or {}) and "leader" not in (new.get("controller") or {}):
            patch["controller"] = {**new["controller"], "leader": None}  # a merge patch removes a key with null
        if patch:
            await self.r.io(self.kube.merge_patch_status, meta["namespace"], meta["name"], patch)
        for cond in conds:
            if cond.type == conditions.CONTROLLER_QUORUM and conditions.transitioned(
                previous.get("conditions"), merged, cond.type
            ):
                kind: Literal["Normal", "Warning"] = "Normal" if cond.status == "True" else "Warning"
                notes.append(events.Event(cond.reason, cond.message, "FollowController", kind))
        await self.r.post_events(bg, notes)
        return conditions.transitioned(previous.get("conditions"), merged, conditions.MASTER_SERVICES_READY)


async def first_of(poll: Coroutine[Any, Any, dict[str, Any]], woken: asyncio.Event) -> dict[str, Any] | None:
    """The long-poll's answer, or None when `woken` was set first (the poll is then cancelled)."""
    polling = asyncio.ensure_future(poll)
    waking = asyncio.ensure_future(woken.wait())
    try:
        await asyncio.wait({polling, waking}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (polling, waking):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    return polling.result() if polling.done() and not polling.cancelled() else None


def merged_entries(previous: dict[str, Any], sets: list[str], views: dict[str, SetView]) -> list[dict[str, Any]]:
    """status.brokerSets with the follower's fields from `views`; a set without a view keeps its
    last known fields. Entries of sets outside the spec are kept as `reconcile` left them."""
    old = {e.get("name"): e for e in previous.get("brokerSets") or []}
    out: list[dict[str, Any]] = []
    for sts in sets:
        entry = dict(old.get(sts) or {"name": sts})
        view = views.get(sts)
        if view is not None:
            entry = {k: v for k, v in entry.items() if k not in OWNED} | follow.set_status(view)
        out.append(entry)
    out.extend(e for e in previous.get("brokerSets") or [] if e.get("name") not in sets)
    return out


def transitions(sts: str, old: dict[str, Any], new: dict[str, Any]) -> list[events.Event]:
    """MasterElected / MasterLost / SyncStateSetChanged between two status entries of a set."""
    out: list[events.Event] = []
    was, now = old.get("masterPod"), new.get("masterPod")
    if now and now != was:
        out.append(
            events.Event(
                "MasterElected",
                f"{sts}: {now} is master (broker {new.get('masterBrokerId')}, epoch {new.get('masterEpoch')})"
                + (f", was {was}" if was else ""),
                "FollowController",
            )
        )
    elif was and not now:
        out.append(events.Event("MasterLost", f"{sts}: no master (was {was})", "FollowController", "Warning"))
    if "syncStateSet" in old and old.get("syncStateSet") != new.get("syncStateSet"):
        out.append(
            events.Event(
                "SyncStateSetChanged",
                f"{sts}: sync-state-set {old.get('syncStateSet')} -> {new.get('syncStateSet')} "
                f"(epoch {new.get('syncStateSetEpoch')})",
                "FollowController",
            )
        )
    return out
