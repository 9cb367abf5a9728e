"""Scaling a broker set down never removes its master by accident.

The controllers are real processes on 127.0.0.1 (the operator reaches them through
`--controller-url`); the three replicas of the set register with them under their pod DNS names,
as brokers in those pods would, so that the controller's view maps onto the StatefulSet's pods."""

from __future__ import annotations

from collections.abc import Callable

from kubernetes.dynamic import DynamicClient

from brokergroup.local.controllers import ControllerGroup
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.operator.conftest import ControlledGroup, OperatorProcess
from tests.e2e.operator.helpers import apply, condition, get, manifest, master_id, observed, patch_spec


def test_scale_down_first_elects_away_from_a_master_on_a_removed_ordinal(
    namespace: str,
    dyn: DynamicClient,
    controllers: ControllerGroup,
    controlled_group: Callable[..., ControlledGroup],
) -> None:
    group = controlled_group("shrink", master_ordinal=2)
    sts = f"{group.name}-broker-0"
    assert master_id(controllers, sts) == group.ids[2]

    patch_spec(dyn, namespace, group.name, {"brokers": {"replicas": 2}})

    def shrunk() -> bool:
        live = get(dyn, "apps/v1", "StatefulSet", namespace, sts) or {}
        return bool(live and live["spec"]["replicas"] == 2)

    eventually("StatefulSet shrunk to 2", shrunk, timeout=60)
    new_master = master_id(controllers, sts)
    assert new_master in (group.ids[0], group.ids[1]), f"master is broker {new_master}, which is on the removed pod"
    metric = group.operator.metric("brokergroup_operator_elections_requested_total", reason="scale_down", result="ok")
    assert metric >= 1


def test_scale_down_waits_while_the_controller_cannot_say_who_is_master(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess, dyn: DynamicClient
) -> None:
    # `operator` points at a controller URL where nothing listens.
    bg = "blind"
    apply(control_plane, namespace, manifest(bg, {"brokers": {"replicas": 3}}))
    eventually("first reconcile", lambda: observed(dyn, namespace, bg), timeout=60)
    patch_spec(dyn, namespace, bg, {"brokers": {"replicas": 2}})

    waiting = eventually(
        "Ready=False ScaleDownWaiting",
        lambda: (c := condition(dyn, namespace, bg, "Ready")).get("reason") == "ScaleDownWaiting" and c,
        timeout=30,
    )
    assert f"{bg}-broker-0" in waiting["message"]
    live = get(dyn, "apps/v1", "StatefulSet", namespace, f"{bg}-broker-0")
    assert live is not None and live["spec"]["replicas"] == 3, "pods were removed without knowing the master"
    # Growing back is not blocked.
    patch_spec(dyn, namespace, bg, {"brokers": {"replicas": 3}})
    eventually(
        "Ready no longer waiting",
        lambda: condition(dyn, namespace, bg, "Ready").get("reason") == "ReplicasNotReady",
        timeout=30,
    )
