"""The broker's own Pod role label (`broker.podlabels`): the patch, retries, back-off, newest-wins, and that
the event loop's side never waits for the Kubernetes API. The patcher is our own seam (a callable)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from brokergroup.broker.metrics import BrokerMetrics
from brokergroup.broker.podlabels import Announcer, PatchFailed, PodLabeler, Wanted, demote_patch, peer_pod
from brokergroup.broker.role import Role


def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


class FakeApi:
    """Records every patch; fails the first `failures` with `result`; blocks while `gate` is clear."""

    def __init__(self, failures: int = 0, result: str = "refused", order: list[str] | None = None) -> None:
        self.patches: list[dict[str, Any]] = []
        self.attempts = 0
        self.failures = failures
        self.result = result
        self.gate = threading.Event()
        self.gate.set()
        self.order = order if order is not None else []
        """Every attempt of this fake and of a FakeDemoter sharing the list, in order."""

    def __call__(self, patch: dict[str, Any]) -> None:
        self.gate.wait()
        self.attempts += 1
        self.order.append(f"self:{patch['metadata']['labels']['brokergroup.io/role']}")
        if self.attempts <= self.failures:
            raise PatchFailed(self.result, "403 Forbidden")
        self.patches.append(patch)


class FakeDemoter:
    """Records demotions of other pods; refuses the first `failures`."""

    def __init__(self, order: list[str], failures: int = 0) -> None:
        self.order = order
        self.failures = failures
        self.demoted: list[str] = []

    def __call__(self, pod: str, epoch: int) -> None:
        self.order.append(f"demote:{pod}@{epoch}")
        if self.failures > 0:
            self.failures -= 1
            raise PatchFailed("refused", "403 Forbidden")
        self.demoted.append(pod)


@pytest.fixture
def metrics() -> BrokerMetrics:
    return BrokerMetrics(CollectorRegistry())


@pytest.fixture
def make(metrics: BrokerMetrics) -> Iterator[Callable[[FakeApi], PodLabeler]]:
    made: list[PodLabeler] = []

    def build(api: FakeApi) -> PodLabeler:
        labeler = PodLabeler(
            api, pod="bg-broker-0-1", patches=metrics.pod_label_patches, in_sync=metrics.pod_label_in_sync
        )
        labeler.start()
        made.append(labeler)
        return labeler

    yield build
    for labeler in made:
        labeler.stop()


@pytest.fixture
def make_with_demoter(metrics: BrokerMetrics) -> Iterator[Callable[[FakeApi, FakeDemoter], PodLabeler]]:
    made: list[PodLabeler] = []

    def build(api: FakeApi, demoter: FakeDemoter) -> PodLabeler:
        labeler = PodLabeler(api, pod="bg-broker-0-1", demoter=demoter, patches=metrics.pod_label_patches)
        labeler.start()
        made.append(labeler)
        return labeler

    yield build
    for labeler in made:
        labeler.stop()


def count(metrics: BrokerMetrics, result: str) -> float:
    value = metrics.registry.get_sample_value("brokergroup_broker_pod_label_patches_total", {"result": result})
    return value or 0.0


def test_the_patch_names_role_broker_id_and_epoch_and_removes_the_role_without_one() -> None:
    assert Wanted("master", broker_id=2, epoch=7).patch() == {
        "metadata": {
            "labels": {"brokergroup.io/role": "master", "brokergroup.io/broker-id": "2"},
            "annotations": {"brokergroup.io/master-epoch": "7"},
        }
    }
    assert Wanted(None).patch() == {"metadata": {"labels": {"brokergroup.io/role": None}}}


def test_the_first_patch_clears_a_stale_master_label_and_only_then_is_the_broker_ready(
    make: Callable[[FakeApi], PodLabeler], metrics: BrokerMetrics
) -> None:
    api = FakeApi()
    api.gate.clear()
    labeler = make(api)
    assert not labeler.cleared
    api.gate.set()
    until(lambda: labeler.cleared)
    assert api.patches[0] == {"metadata": {"labels": {"brokergroup.io/role": None}}}
    assert metrics.registry.get_sample_value("brokergroup_broker_pod_label_in_sync") == 1


def test_a_refused_patch_is_logged_once_counted_and_retried_until_it_lands(
    make: Callable[[FakeApi], PodLabeler], metrics: BrokerMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    api = FakeApi(failures=3)
    with caplog.at_level(logging.WARNING, logger="brokergroup.broker.podlabels"):
        labeler = make(api)
        labeler.publish(Wanted("slave", broker_id=1, epoch=3))
        until(lambda: labeler.in_sync and api.patches != [], timeout=15)
    assert count(metrics, "refused") == 3
    assert count(metrics, "ok") >= 1
    assert api.patches[-1]["metadata"]["labels"]["brokergroup.io/role"] == "slave"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum("cannot set role label" in w for w in warnings) == 1, warnings
    assert sum("patched again" in w for w in warnings) == 1, warnings


def test_publishing_never_waits_for_the_api_and_the_newest_role_wins(make: Callable[[FakeApi], PodLabeler]) -> None:
    api = FakeApi()
    api.gate.clear()  # the API hangs
    labeler = make(api)
    started = time.monotonic()
    for epoch in range(1, 50):
        labeler.publish(Wanted("slave" if epoch % 2 else "master", broker_id=1, epoch=epoch))
    assert time.monotonic() - started < 0.5, "publish blocked on the Kubernetes API"
    assert not labeler.in_sync
    api.gate.set()
    until(lambda: labeler.in_sync)
    # The first (start) patch was in flight; after it only the newest state is sent, not all 49.
    assert len(api.patches) <= 3, api.patches
    assert api.patches[-1]["metadata"]["annotations"] == {"brokergroup.io/master-epoch": "49"}
    assert api.patches[-1]["metadata"]["labels"]["brokergroup.io/role"] == "slave"


def test_a_timeout_is_counted_as_such_and_the_role_label_catches_up(
    make: Callable[[FakeApi], PodLabeler], metrics: BrokerMetrics
) -> None:
    api = FakeApi(failures=1, result="timeout")
    labeler = make(api)
    labeler.publish(Wanted("master", broker_id=2, epoch=4))
    until(lambda: labeler.in_sync and api.patches != [])
    assert count(metrics, "timeout") == 1
    assert api.patches[-1]["metadata"]["labels"]["brokergroup.io/role"] == "master"


def test_a_peer_pod_is_another_ordinal_of_the_same_statefulset() -> None:
    own = "bg-broker-0-1"
    assert peer_pod("bg-broker-0-0.bg-broker-0.apps.svc:10911", own) == "bg-broker-0-0"
    assert peer_pod("bg-broker-0-2.bg-broker-0.apps.svc.cluster.local:10911", own) == "bg-broker-0-2"
    assert peer_pod("bg-broker-0-1.bg-broker-0.apps.svc:10911", own) is None  # itself
    assert peer_pod("bg-broker-1-0.bg-broker-1.apps.svc:10911", own) is None  # another set
    assert peer_pod("10.88.0.7:10911", own) is None  # not a pod name
    assert peer_pod(None, own) is None


def test_a_new_master_takes_the_master_label_off_its_predecessor_before_it_labels_itself(
    make_with_demoter: Callable[[FakeApi, FakeDemoter], PodLabeler],
) -> None:
    order: list[str] = []
    api, demoter = FakeApi(order=order), FakeDemoter(order=order, failures=2)
    labeler = make_with_demoter(api, demoter)
    until(lambda: labeler.cleared)
    labeler.publish(Wanted("master", broker_id=2, epoch=5, demote=(("bg-broker-0-0", 4),)))
    until(lambda: labeler.in_sync, timeout=15)
    # The start patch; then the demotion, refused twice: the own label waits for it, then follows it.
    demote = "demote:bg-broker-0-0@4"
    assert order == ["self:None", demote, demote, demote, "self:master"]
    assert demoter.demoted == ["bg-broker-0-0"]


def test_only_a_promotion_demotes(make_with_demoter: Callable[[FakeApi, FakeDemoter], PodLabeler]) -> None:
    order: list[str] = []
    labeler = make_with_demoter(FakeApi(order=order), FakeDemoter(order=order))
    labeler.publish(Wanted("slave", broker_id=2, epoch=5, demote=(("bg-broker-0-0", 4),)))
    until(lambda: labeler.in_sync and order[-1:] == ["self:slave"])
    assert not any(step.startswith("demote") for step in order), order


def test_a_promotion_demotes_the_master_the_broker_followed_last() -> None:
    published: list[Wanted] = []

    class Recorder:
        pod = "bg-broker-0-1"

        def publish(self, wanted: Wanted) -> None:
            published.append(wanted)

    master = ["bg-broker-0-0.bg-broker-0.apps.svc:10911"]
    announce = Announcer(Recorder(), lambda: master[0])  # type: ignore[arg-type]
    announce(Role.NONE, 0, None)
    announce(Role.SLAVE, 3, 1)
    master[0] = "bg-broker-0-1.bg-broker-0.apps.svc:10911"  # itself, once master
    announce(Role.MASTER, 4, 1)
    assert published == [
        Wanted(None, broker_id=None, epoch=0),
        Wanted("slave", broker_id=1, epoch=3),
        Wanted("master", broker_id=1, epoch=4, demote=(("bg-broker-0-0", 3),)),
    ]


def test_the_demotion_tests_the_role_and_the_epoch_it_followed() -> None:
    # A predecessor elected again since (a newer epoch on its pod) keeps its label: the API answers 422.
    assert demote_patch(7) == [
        {"op": "test", "path": "/metadata/labels/brokergroup.io~1role", "value": "master"},
        {"op": "test", "path": "/metadata/annotations/brokergroup.io~1master-epoch", "value": "7"},
        {"op": "replace", "path": "/metadata/labels/brokergroup.io~1role", "value": "slave"},
    ]
