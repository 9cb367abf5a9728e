"""`kubectl annotate bg … brokergroup.io/elect-master=<pod>` with bad values: each is refused with an
Event (and, when it names a set, `lastElection` in status), the annotation is removed, and the
controller's master does not move. Real controllers on 127.0.0.1 stand in for the controller pods;
the set's replicas register under their pod DNS names."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kubernetes.dynamic import DynamicClient

from brokergroup.controller import protocol
from brokergroup.controller.client import ControllerClient
from brokergroup.local.controllers import ControllerGroup
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.operator.conftest import ControlledGroup
from tests.e2e.operator.helpers import brokergroup, condition, event_reasons, master_id, roles, set_status

ANNOTATION = "brokergroup.io/elect-master"


def last_election(dyn: DynamicClient, namespace: str, bg: str, sts: str) -> dict[str, Any]:
    return dict(set_status(dyn, namespace, bg, sts).get("lastElection") or {})


def answered(dyn: DynamicClient, namespace: str, bg: str) -> bool:
    return ANNOTATION not in (brokergroup(dyn, namespace, bg)["metadata"].get("annotations") or {})


async def shrink_sync_state_set(group: ControllerGroup, sts: str, master: int, members: list[int]) -> None:
    async with ControllerClient(group.api_addresses) as client:
        info = await client.replica_info(sts)
        await client.alter_sync_state_set(
            protocol.AlterSyncStateSetRequest(
                broker_name=sts,
                master_broker_id=master,
                master_epoch=info.master_epoch,
                sync_state_set=members,
                sync_state_set_epoch=info.sync_state_set_epoch,
            )
        )


def test_bad_elect_master_values_are_refused_recorded_and_change_nothing(
    control_plane: ControlPlane,
    namespace: str,
    dyn: DynamicClient,
    controllers: ControllerGroup,
    controlled_group: Callable[..., ControlledGroup],
) -> None:
    group = controlled_group("pick", master_ordinal=0)
    bg, ids = group.name, group.ids
    sts = f"{bg}-broker-0"
    asyncio.run(shrink_sync_state_set(controllers, sts, ids[0], [ids[0], ids[1]]))  # pod 2 falls out of sync

    cases = [
        (f"{bg}-broker-0-7", "UnknownPod"),  # an ordinal beyond replicas
        (f"{bg}-broker-0-2", "NotInSyncStateSet"),  # registered and alive, but not in sync; unclean is off
    ]
    for value, reason in cases:
        control_plane.kubectl("annotate", "-n", namespace, "bg", bg, f"{ANNOTATION}={value}", "--overwrite")
        eventually(f"{value} answered", lambda: answered(dyn, namespace, bg), timeout=30)
        record = eventually(
            f"{value} recorded",
            lambda v=value: (r := last_election(dyn, namespace, bg, sts)).get("request") == v and r,
            timeout=30,
        )
        assert record["result"] == "Refused" and record["reason"] == reason, record
        assert master_id(controllers, sts) == ids[0], f"{value} moved the master"

    # A value naming no set of this group: an Event, the annotation removed, nothing else.
    control_plane.kubectl("annotate", "-n", namespace, "bg", bg, f"{ANNOTATION}=other-broker-0-1", "--overwrite")
    eventually("garbage answered", lambda: answered(dyn, namespace, bg), timeout=30)
    # The Event may land just after the annotation is removed.
    eventually(
        "three refusals as Events",
        lambda: event_reasons(dyn, namespace, bg).count("ElectMasterRefused") == 3,
        timeout=30,
    )
    assert event_reasons(dyn, namespace, bg).count("ElectMasterRefused") == 3
    assert master_id(controllers, sts) == ids[0]
    # Recorded in status too, at the group's level, though it names no set; the set's own record is untouched.
    request = brokergroup(dyn, namespace, bg)["status"]["lastElectionRequest"]
    assert (request["request"], request["result"], request["reason"]) == ("other-broker-0-1", "Refused", "UnknownPod")
    assert last_election(dyn, namespace, bg, sts)["request"] == f"{bg}-broker-0-2"

    # A good value is obeyed, and asking again is harmless.
    target = f"{bg}-broker-0-1"
    for expected in ("Elected", "AlreadyMaster"):
        control_plane.kubectl("annotate", "-n", namespace, "bg", bg, f"{ANNOTATION}={target}", "--overwrite")
        record = eventually(
            f"{expected} recorded",
            lambda e=expected: (r := last_election(dyn, namespace, bg, sts)).get("result") == e and r,
            timeout=30,
        )
        assert record["target"] == target
        assert master_id(controllers, sts) == ids[1]


def test_without_a_controller_quorum_labels_stay_and_forced_elections_are_refused(
    control_plane: ControlPlane,
    namespace: str,
    dyn: DynamicClient,
    controllers: ControllerGroup,
    controlled_group: Callable[..., ControlledGroup],
) -> None:
    bg = controlled_group("dark", master_ordinal=1).name
    sts = f"{bg}-broker-0"
    want = {f"{sts}-0": "slave", f"{sts}-1": "master", f"{sts}-2": "slave"}
    eventually("labels follow the controller", lambda: roles(dyn, namespace, sts) == want, timeout=30)

    controllers.stop_all()

    eventually(
        "ControllerQuorumAvailable=False",
        lambda: condition(dyn, namespace, bg, "ControllerQuorumAvailable").get("status") == "False",
        timeout=30,
    )
    assert roles(dyn, namespace, sts) == want, "labels changed without the controller"
    control_plane.kubectl("annotate", "-n", namespace, "bg", bg, f"{ANNOTATION}={sts}-0")
    # Kept first (the controllers may only be restarting): Pending, the annotation still there, retried...
    pending = eventually(
        "the request kept as Pending",
        lambda: (
            (r := brokergroup(dyn, namespace, bg)["status"].get("lastElectionRequest") or {}).get("result") == "Pending"
            and r
        ),
        timeout=30,
    )
    assert pending["reason"] == "ControllerUnavailable" and pending["request"] == f"{sts}-0", pending
    assert not answered(dyn, namespace, bg) and not last_election(dyn, namespace, bg, sts).get("result")
    eventually("an ElectMasterPending Event", lambda: "ElectMasterPending" in event_reasons(dyn, namespace, bg))
    # ...then refused once the operator's elect wait (30 s by default) is over.
    record = eventually(
        "the request answered", lambda: (r := last_election(dyn, namespace, bg, sts)).get("result") and r, timeout=60
    )
    assert record["result"] == "Refused" and record["reason"] == "ControllerUnavailable", record
    assert answered(dyn, namespace, bg)
    # The operator posts its Events after it writes the condition waited on above.
    eventually("a ControllerUnreachable Event", lambda: "ControllerUnreachable" in event_reasons(dyn, namespace, bg))
    assert roles(dyn, namespace, sts) == want
