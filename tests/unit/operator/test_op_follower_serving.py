"""operator/follower.py: whether a set's master Service selects its elected master (`unserved_reason`), and
the follower's wake-up racing the controller's long-poll (`first_of`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brokergroup.operator.follower import first_of, newly_projected, unserved_reason
from brokergroup.operator.roles import Member, SetView

STS = "bg-broker-0"


def view(master: str | None = f"{STS}-0") -> SetView:
    members = tuple(Member(f"{STS}-{i}", i + 1, True, True) for i in range(3))
    return SetView(STS, master, 1 if master else None, 4, 5, members)


def pod(name: str, *, ready: bool = True, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


PODS = [pod(f"{STS}-{i}") for i in range(3)]


def test_a_ready_labelled_master_is_served() -> None:
    assert unserved_reason(STS, view(), PODS, failed=0) == []


@pytest.mark.parametrize(
    ("v", "pods", "failed", "reason"),
    [
        (None, PODS, 0, "NoMaster"),
        (view(None), PODS, 0, "NoMaster"),
        (view(), PODS, 1, "LabelsNotConverged"),
        (view(), [pod(f"{STS}-0", ready=False), *PODS[1:]], 0, "MasterNotReady"),
        (view(), [pod(f"{STS}-0", deleting=True), *PODS[1:]], 0, "MasterNotReady"),
        (view(), PODS[1:], 0, "MasterNotReady"),
    ],
    ids=["unknown-set", "no-master", "patch-failed", "not-ready", "terminating", "no-pod"],
)
def test_why_a_master_service_selects_no_master(
    v: SetView | None, pods: list[dict[str, Any]], failed: int, reason: str
) -> None:
    (why,) = unserved_reason(STS, v, pods, failed)
    assert why.split(":", 1)[0] == reason
    assert STS in why


async def test_the_long_poll_answer_wins_when_nothing_wakes() -> None:
    async def poll() -> dict[str, Any]:
        return {"events": [], "lastIndex": 7}

    assert await first_of(poll(), asyncio.Event()) == {"events": [], "lastIndex": 7}


async def test_a_wake_up_cancels_the_long_poll() -> None:
    cancelled = asyncio.Event()

    async def poll() -> dict[str, Any]:
        try:
            await asyncio.Event().wait()  # a long-poll that would wait for the resync
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {}

    woken = asyncio.Event()
    asyncio.get_running_loop().call_soon(woken.set)
    assert await asyncio.wait_for(first_of(poll(), woken), 5) is None
    assert cancelled.is_set()


async def test_a_failed_long_poll_raises() -> None:
    async def poll() -> dict[str, Any]:
        raise OSError("controller down")

    with pytest.raises(OSError, match="controller down"):
        await first_of(poll(), asyncio.Event())


def test_a_label_patch_carries_the_resource_version_it_was_planned_from() -> None:
    from brokergroup.operator import follow

    meta = {"metadata": {"name": f"{STS}-1", "resourceVersion": "812", "labels": {"brokergroup.io/role": "master"}}}
    (step,) = follow.plan_set(view(), [follow.PodMeta.of(meta)])
    # A broker that relabelled itself in between changed the version: the API server refuses (409) and the
    # follower plans again from what the pod now says, instead of overwriting a newer label with an older view.
    assert step.patch()["metadata"]["resourceVersion"] == "812"
    assert step.patch()["metadata"]["labels"]["brokergroup.io/role"] == "slave"


@pytest.mark.parametrize(
    ("old", "failed", "counted"),
    [
        ({"masterPod": f"{STS}-1"}, 0, True),  # the labels agree (whoever patched them): counted and dated
        ({}, 0, True),  # the first master
        ({"masterPod": f"{STS}-0"}, 0, False),  # no change
        ({"masterPod": f"{STS}-1"}, 1, False),  # a label patch failed: not converged yet
    ],
    ids=["new-master", "first-master", "same-master", "patch-failed"],
)
def test_an_election_is_counted_once_the_labels_agree_whoever_patched_them(
    old: dict[str, Any], failed: int, counted: bool
) -> None:
    assert newly_projected(view(), old, failed) is counted
    assert newly_projected(view(None), old, failed) is False


def test_an_election_is_counted_once_by_namespace_set_and_the_controllers_reason() -> None:
    from types import SimpleNamespace

    from prometheus_client import CollectorRegistry

    from brokergroup.operator.follower import FeedCursor, Follower
    from brokergroup.operator.metrics import OperatorMetrics

    registry = CollectorRegistry()
    reconciler = SimpleNamespace(kube=None, metrics=OperatorMetrics(registry), settings=None)
    follower = Follower(reconciler)  # type: ignore[arg-type]
    cursor = FeedCursor(primed=True, commits={("bg-broker-0", 3): (0.0, "heartbeat_timeout")})
    view = SimpleNamespace(master_epoch=3)
    follower._converged("mq", "bg-broker-0", view, cursor)  # type: ignore[arg-type]
    follower._converged("mq", "bg-broker-0", SimpleNamespace(master_epoch=4), cursor)  # type: ignore[arg-type]

    def count(reason: str) -> float | None:
        labels = {"namespace": "mq", "set": "bg-broker-0", "reason": reason}
        return registry.get_sample_value("brokergroup_elections_total", labels)

    assert (count("heartbeat_timeout"), count("observed")) == (1.0, 1.0)


async def test_elections_made_while_paused_are_counted_with_their_reason_and_not_timed() -> None:
    """After a pause the follower reads the feed before projecting: the elections made meanwhile count with
    the controller's reason (not `observed`), and no convergence time is measured for them."""
    from types import SimpleNamespace

    from prometheus_client import CollectorRegistry

    from brokergroup.operator.follower import FeedCursor, Follower
    from brokergroup.operator.metrics import OperatorMetrics

    registry = CollectorRegistry()
    reconciler = SimpleNamespace(kube=None, metrics=OperatorMetrics(registry), settings=None)
    follower = Follower(reconciler)  # type: ignore[arg-type]
    cursor = FeedCursor(after=10, primed=True, behind=True)
    pages = [
        {"events": [{"index": 11, "type": "ELECT_MASTER", "brokerName": STS, "masterEpoch": 5, "ts": 1000,
                     "reason": "heartbeat_timeout"}], "lastIndex": 12},
        {"events": [], "lastIndex": 12},
    ]  # fmt: skip
    asked: list[tuple[int, int]] = []

    class Link:
        async def events(self, *, after: int, wait_seconds: int) -> dict[str, Any]:
            asked.append((after, wait_seconds))
            return pages.pop(0)

    await follower._catch_up(Link(), cursor, {STS})  # type: ignore[arg-type]
    assert asked == [(10, 0), (11, 0)] and not cursor.behind
    assert cursor.caught_up == {(STS, 5)}
    follower._converged("mq", STS, SimpleNamespace(master_epoch=5), cursor)  # type: ignore[arg-type]
    labels = {"namespace": "mq", "set": STS, "reason": "heartbeat_timeout"}
    assert registry.get_sample_value("brokergroup_elections_total", labels) == 1.0
    assert registry.get_sample_value("brokergroup_role_label_convergence_seconds_count") == 0.0
    assert cursor.caught_up == set() and cursor.commits == {}


async def test_catching_up_on_an_unreachable_controller_retries_next_cycle() -> None:
    from types import SimpleNamespace

    from prometheus_client import CollectorRegistry

    from brokergroup.operator.controller_link import ControllerLinkError
    from brokergroup.operator.follower import FeedCursor, Follower
    from brokergroup.operator.metrics import OperatorMetrics

    follower = Follower(SimpleNamespace(kube=None, metrics=OperatorMetrics(CollectorRegistry()), settings=None))  # type: ignore[arg-type]

    class Link:
        async def events(self, *, after: int, wait_seconds: int) -> dict[str, Any]:
            raise ControllerLinkError("controller down")

    cursor = FeedCursor(after=10, primed=True, behind=True)
    await follower._catch_up(Link(), cursor, {STS})  # type: ignore[arg-type]
    assert cursor.behind and cursor.after == 10
