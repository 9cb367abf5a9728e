"""Reading and changing BrokerGroups and their children in the operator's e2e tests."""

from __future__ import annotations

import asyncio
from typing import Any

import yaml
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from brokergroup.controller import protocol
from brokergroup.controller.client import ControllerClient
from brokergroup.local.controllers import ControllerGroup
from tests.e2e.kubeenv import ControlPlane, eventually

API_VERSION = "brokergroup.io/v1alpha1"
ROLE = "brokergroup.io/role"
SET = "brokergroup.io/broker-set"


def get(dyn: DynamicClient, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = (
            dyn.resources.get(api_version=api_version, kind=kind).get(name=name, namespace=namespace).to_dict()
        )
    except NotFoundError:
        return None
    return found


def brokergroup(dyn: DynamicClient, namespace: str, name: str) -> dict[str, Any]:
    found = get(dyn, API_VERSION, "BrokerGroup", namespace, name)
    assert found is not None, f"BrokerGroup {namespace}/{name} is gone"
    return found


def condition(dyn: DynamicClient, namespace: str, name: str, type_: str) -> dict[str, Any]:
    """Condition `type_` of the BrokerGroup's status ({} while it has none)."""
    conds = (brokergroup(dyn, namespace, name).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == type_), {})


def set_status(dyn: DynamicClient, namespace: str, name: str, broker_set: str) -> dict[str, Any]:
    """The `status.brokerSets[]` entry of `broker_set` ({} while there is none)."""
    entries = (brokergroup(dyn, namespace, name).get("status") or {}).get("brokerSets") or []
    return next((e for e in entries if e.get("name") == broker_set), {})


def patch_spec(dyn: DynamicClient, namespace: str, name: str, spec: dict[str, Any]) -> None:
    dyn.resources.get(api_version=API_VERSION, kind="BrokerGroup").patch(
        name=name, namespace=namespace, body={"spec": spec}, content_type="application/merge-patch+json"
    )


def observed(dyn: DynamicClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The BrokerGroup once status.observedGeneration caught up with its generation."""
    bg = brokergroup(dyn, namespace, name)
    status = bg.get("status") or {}
    return bg if status.get("observedGeneration") == bg["metadata"]["generation"] else None


def event_reasons(dyn: DynamicClient, namespace: str, name: str) -> list[str]:
    """Reasons of the events.k8s.io Events regarding BrokerGroup `name`, oldest first."""
    found = dyn.resources.get(api_version="events.k8s.io/v1", kind="Event").get(namespace=namespace).to_dict()
    mine = [e for e in found["items"] if (e.get("regarding") or {}).get("name") == name]
    return [e["reason"] for e in sorted(mine, key=lambda e: e.get("eventTime") or "")]


def roles(dyn: DynamicClient, namespace: str, broker_set: str) -> dict[str, str | None]:
    """Pod name -> its role label (None without one), for every pod of `broker_set`."""
    pods = dyn.resources.get(api_version="v1", kind="Pod")
    found = pods.get(namespace=namespace, label_selector=f"{SET}={broker_set}")
    return {p.metadata.name: (p.metadata.labels or {}).get(ROLE) for p in found.items}


def wait_granted(
    control_plane: ControlPlane, user: str, verb: str, resource: str, namespace: str, subresource: str | None = None
) -> None:
    """Wait until the API server lets `user` do `verb` on `resource` in `namespace`. RBAC takes effect once the
    authorizer's cache (a watch) has the new Role and binding, a moment after `kubectl apply` returned:
    `kubectl auth can-i --as` asks that same authorizer."""
    argv = ["auth", "can-i", verb, resource, "-n", namespace, f"--as={user}"]
    if subresource is not None:
        argv.append(f"--subresource={subresource}")
    eventually(
        f"RBAC lets {user} {verb} {resource}{'/' + subresource if subresource else ''}",
        lambda: control_plane.kubectl(*argv, check=False).stdout.strip() == "yes",
        timeout=30,
        interval=0.5,
    )


def manifest(name: str, spec: dict[str, Any]) -> str:
    return yaml.safe_dump({"apiVersion": API_VERSION, "kind": "BrokerGroup", "metadata": {"name": name}, "spec": spec})


def apply(control_plane: ControlPlane, namespace: str, document: str | dict[str, Any]) -> None:
    """`kubectl apply` of one YAML document (or an object) in `namespace`."""
    text = document if isinstance(document, str) else yaml.safe_dump(document)
    control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=text)


def master_id(group: ControllerGroup, broker_set: str) -> int | None:
    """The controller's master broker id of `broker_set`."""

    async def ask() -> int | None:
        async with ControllerClient(group.api_addresses) as client:
            return (await client.replica_info(broker_set)).master_broker_id

    return asyncio.run(ask())


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
