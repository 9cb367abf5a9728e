"""Growing the data volumes: what the operator decides from the spec, the live StatefulSet and the claims."""

from __future__ import annotations

from typing import Any

import pytest

from brokergroup.operator import resize


def sts(name: str, size: str, replicas: int = 3) -> dict[str, Any]:
    return {
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "broker"}]}},
            "volumeClaimTemplates": [
                {"metadata": {"name": "data"}, "spec": {"resources": {"requests": {"storage": size}}}}
            ],
        },
    }


def claim(name: str, request: str | None, capacity: str | None, *waiting: str) -> resize.Claim:
    return resize.Claim(name, request, capacity, waiting)


@pytest.mark.parametrize(
    ("want", "have", "expected"),
    [
        ("10Gi", "10Gi", "none"),
        ("10240Mi", "10Gi", "none"),  # the same quantity spelled differently is no change
        ("20Gi", "10Gi", "grow"),
        ("10.5Gi", "10Gi", "grow"),
        ("9Gi", "10Gi", "shrink"),
        ("10G", "10Gi", "shrink"),  # decimal G is smaller than binary Gi
    ],
)
def test_step_compares_quantities_not_strings(want: str, have: str, expected: str) -> None:
    assert resize.step(sts("bg-broker-0", want), sts("bg-broker-0", have)) == expected


def test_the_rest_of_the_spec_applies_with_the_live_claim_template() -> None:
    desired, live = sts("bg-broker-0", "20Gi", replicas=5), sts("bg-broker-0", "10Gi")
    kept = resize.with_template_of(desired, live)
    assert resize.template_size(kept) == "10Gi"
    assert kept["spec"]["replicas"] == 5
    assert resize.template_size(desired) == "20Gi"  # the input is not changed


def test_only_the_sets_own_claims_below_the_size_are_raised() -> None:
    claims = [
        claim("data-bg-broker-0-0", "10Gi", "10Gi"),
        claim("data-bg-broker-0-1", "20Gi", "10Gi"),  # raised already (a pass that stopped half-way)
        claim("data-bg-broker-0-2", "10Gi", "10Gi"),
        claim("data-bg-broker-0-3", "10Gi", "10Gi"),  # an ordinal beyond the replicas: left alone
        claim("data-bg-broker-1-0", "10Gi", "10Gi"),  # another set
        claim("data-bg-broker-0-10", "10Gi", "10Gi"),  # a prefix match only
    ]
    mine = resize.claims_of("bg-broker-0", 3, claims)
    assert [c.name for c in mine] == ["data-bg-broker-0-0", "data-bg-broker-0-1", "data-bg-broker-0-2"]
    assert resize.to_raise("20Gi", mine) == ["data-bg-broker-0-0", "data-bg-broker-0-2"]


def test_progress_names_every_claim_still_behind_and_why() -> None:
    wanted = {"bg-broker-0": ("20Gi", 2), "bg-controller": ("1Gi", 1)}
    claims = [
        claim("data-bg-broker-0-0", "20Gi", "20Gi"),
        claim("data-bg-broker-0-1", "20Gi", "10Gi", "FileSystemResizePending"),
        claim("data-bg-controller-0", "1Gi", None),
    ]
    cond = resize.progress(wanted, claims)
    assert (cond.type, cond.status, cond.reason) == ("StorageResized", "False", "Resizing")
    assert cond.message == (
        "data-bg-broker-0-1 has 10Gi of 20Gi (FileSystemResizePending); data-bg-controller-0 has no capacity of 1Gi"
    )


def test_progress_is_done_when_every_capacity_holds_its_size() -> None:
    wanted = {"bg-broker-0": ("20Gi", 2)}
    claims = [claim("data-bg-broker-0-0", "20Gi", "20Gi"), claim("data-bg-broker-0-1", "20Gi", "21474836480")]
    cond = resize.progress(wanted, claims)
    assert (cond.status, cond.reason) == ("True", "Resized")


def test_a_request_not_yet_raised_is_reported_as_such() -> None:
    cond = resize.progress({"bg-broker-0": ("20Gi", 1)}, [claim("data-bg-broker-0-0", "10Gi", "10Gi")])
    assert cond.message == "data-bg-broker-0-0 requests 10Gi, not yet 20Gi"


def test_a_claim_is_read_from_the_api_object() -> None:
    pvc = {
        "metadata": {"name": "data-bg-broker-0-0"},
        "spec": {"resources": {"requests": {"storage": "20Gi"}}},
        "status": {
            "capacity": {"storage": "10Gi"},
            "conditions": [
                {"type": "Resizing", "status": "True"},
                {"type": "FileSystemResizePending", "status": "False"},
            ],
        },
    }
    assert resize.Claim.of(pvc) == claim("data-bg-broker-0-0", "20Gi", "10Gi", "Resizing")
    assert resize.Claim.of({"metadata": {"name": "x"}}) == claim("x", None, None)


def test_the_applied_sizes_are_the_live_templates_the_brokers_largest() -> None:
    sizes = resize.applied_sizes(
        sts("bg-controller", "1Gi"), [sts("bg-broker-0", "10Gi"), sts("bg-broker-1", "20Gi"), None]
    )
    assert sizes == {"controller": "1Gi", "brokers": "20Gi"}
    assert resize.applied_sizes(None, [None]) == {}


def test_progress_waits_for_the_statefulset_to_be_re_created() -> None:
    claims = [claim("data-bg-broker-0-0", "20Gi", "20Gi")]
    cond = resize.progress({"bg-broker-0": ("20Gi", 1)}, claims, recreating=["bg-broker-0"])
    assert (cond.status, cond.message) == (
        "False",
        "StatefulSet bg-broker-0 is being re-created with the new claim template",
    )
