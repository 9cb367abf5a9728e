"""Scaling a broker set down never removes its master by accident.

The controllers are real processes on 127.0.0.1 (the operator reaches them through
`--controller-url`); the three replicas of the set register with them under their pod DNS names,
as brokers in those pods would, so that the controller's view maps onto the StatefulSet's pods."""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes.dynamic import DynamicClient

from brokergroup.controller import protocol
from brokergroup.controller.client import ControllerClient
from brokergroup.local.controllers import ControllerGroup
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.operator.conftest import ADMIN_TOKEN, auth_secret
from tests.e2e.operator.test_children import get, manifest, observed, patch_spec

LONG_MS = 600_000


def address(bg: str, namespace: str, ordinal: int) -> str:
    return f"{bg}-broker-0-{ordinal}.{bg}-broker-0.{namespace}.svc:10911"


async def register_set(group: ControllerGroup, bg: str, namespace: str, master_ordinal: int) -> dict[int, int]:
    """Register replicas 0..2 of set 0, elect `master_ordinal`, put all three in sync; returns ordinal -> id."""
    name = f"{bg}-broker-0"
    ids = {}
    async with ControllerClient(group.api_addresses) as client:
        for ordinal in range(3):
            broker_id = ordinal + 1
            addr = address(bg, namespace, ordinal)
            await client.apply_id(
                protocol.ApplyIdRequest(
                    cluster_name=bg, broker_name=name, applied_broker_id=broker_id, register_check_code=f"{addr};1"
                )
            )
            await client.register(
                protocol.RegisterRequest(cluster_name=bg, broker_name=name, broker_id=broker_id, broker_address=addr)
            )
            for node in client.addresses:
                await client.heartbeat(
                    protocol.HeartbeatRequest(
                        cluster_name=bg,
                        broker_name=name,
                        broker_addr=addr,
                        broker_id=broker_id,
                        max_offset=100,
                        heartbeat_timeout_mills=LONG_MS,
                    ),
                    address=node,
                )
            ids[ordinal] = broker_id
        elected = await client.elect_master(
            protocol.ElectMasterRequest(cluster_name=bg, broker_name=name, broker_id=ids[master_ordinal])
        )
        assert elected.master_broker_id == ids[master_ordinal]
        await client.alter_sync_state_set(
            protocol.AlterSyncStateSetRequest(
                broker_name=name,
                master_broker_id=ids[master_ordinal],
                master_epoch=elected.master_epoch or 0,
                sync_state_set=sorted(ids.values()),
                sync_state_set_epoch=elected.sync_state_set_epoch or 0,
            )
        )
    return ids


def master_id(group: ControllerGroup, bg: str) -> int | None:
    async def ask() -> int | None:
        async with ControllerClient(group.api_addresses) as client:
            return (await client.replica_info(f"{bg}-broker-0")).master_broker_id

    return asyncio.run(ask())


def ready_condition(dyn: DynamicClient, namespace: str, bg: str) -> dict[str, Any]:
    obj = get(dyn, "brokergroup.io/v1alpha1", "BrokerGroup", namespace, bg) or {}
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})


def test_scale_down_first_elects_away_from_a_master_on_a_removed_ordinal(
    control_plane: ControlPlane, namespace: str, start_operator: Any, dyn: DynamicClient, controllers: ControllerGroup
) -> None:
    bg = "shrink"
    control_plane.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=_secret_yaml(bg, namespace, controllers.password),
    )
    operator = start_operator(f"http://{controllers.api_addresses[0]}")
    control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=manifest(bg, {"brokers": {"replicas": 3}}))
    eventually("first reconcile", lambda: observed(dyn, namespace, bg), timeout=60)
    ids = asyncio.run(register_set(controllers, bg, namespace, master_ordinal=2))
    assert master_id(controllers, bg) == ids[2]

    patch_spec(dyn, namespace, bg, {"brokers": {"replicas": 2}})

    def shrunk() -> bool:
        sts = get(dyn, "apps/v1", "StatefulSet", namespace, f"{bg}-broker-0") or {}
        return bool(sts and sts["spec"]["replicas"] == 2)

    eventually("StatefulSet shrunk to 2", shrunk, timeout=60)
    new_master = master_id(controllers, bg)
    assert new_master in (ids[0], ids[1]), f"master is broker {new_master}, which is on the removed pod"
    assert operator.metric("brokergroup_operator_elections_requested_total", reason="scale_down", result="ok") >= 1


def test_scale_down_waits_while_the_controller_cannot_say_who_is_master(
    control_plane: ControlPlane, namespace: str, operator: Any, dyn: DynamicClient
) -> None:
    # `operator` points at a controller URL where nothing listens.
    bg = "blind"
    control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=manifest(bg, {"brokers": {"replicas": 3}}))
    eventually("first reconcile", lambda: observed(dyn, namespace, bg), timeout=60)
    patch_spec(dyn, namespace, bg, {"brokers": {"replicas": 2}})

    condition = eventually(
        "Ready=False ScaleDownWaiting",
        lambda: (c := ready_condition(dyn, namespace, bg)).get("reason") == "ScaleDownWaiting" and c,
        timeout=30,
    )
    assert f"{bg}-broker-0" in condition["message"]
    sts = get(dyn, "apps/v1", "StatefulSet", namespace, f"{bg}-broker-0")
    assert sts is not None and sts["spec"]["replicas"] == 3, "pods were removed without knowing the master"
    # Growing back is not blocked.
    patch_spec(dyn, namespace, bg, {"brokers": {"replicas": 3}})
    eventually(
        "Ready no longer waiting",
        lambda: ready_condition(dyn, namespace, bg).get("reason") == "ReplicasNotReady",
        timeout=30,
    )


def _secret_yaml(bg: str, namespace: str, password: str) -> str:
    import yaml

    return yaml.safe_dump(auth_secret(bg, namespace, password, ADMIN_TOKEN))
