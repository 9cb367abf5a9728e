"""operator/names.py: object names, and parsing them back (set_index, pod_ordinal)."""

from __future__ import annotations

import pytest

from brokergroup.operator import names


def test_child_names() -> None:
    assert names.controller("bg") == "bg-controller"
    assert names.controller_api("bg") == "bg-controller-api"
    assert names.controller_auth("bg") == "bg-controller-auth"
    assert names.config("bg") == "bg-config"
    assert names.network_policy("bg") == "bg-controller-raft"
    assert names.controller_pdb("bg") == "bg-controller"
    assert names.broker_set("bg", 2) == "bg-broker-2"
    assert names.broker_master_service("bg", 2) == "bg-broker-2-master"
    assert names.broker_pod("bg", 2, 1) == "bg-broker-2-1"
    assert names.controller_pod("bg", 0) == "bg-controller-0"


def test_hosts_and_urls() -> None:
    assert names.pod_host("p-0", "svc", "ns") == "p-0.svc.ns.svc"
    assert names.controller_peer_host("bg", 1, "mq") == "bg-controller-1.bg-controller.mq.svc"
    assert names.broker_pod_host("bg", 0, 2, "mq") == "bg-broker-0-2.bg-broker-0.mq.svc"
    assert names.controller_api_url("bg", "mq") == f"http://bg-controller-api.mq.svc:{names.CONTROLLER_API_PORT}"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("bg-broker-0", 0),
        ("bg-broker-7", 7),
        ("bg-broker-10", 10),
        ("bg-broker-63", 63),
        ("bg-broker-00", None),  # leading zeros: not a name the operator makes
        ("bg-broker-01", None),
        ("bg-broker-", None),
        ("bg-broker--1", None),
        ("bg-broker-+1", None),
        ("bg-broker- 1", None),
        ("bg-broker-1a", None),
        ("bg-broker-0-1", None),  # a pod, not a set
        ("bg-broker-0-master", None),  # the master Service
        ("bg-controller", None),
        ("other-broker-0", None),  # another group
        ("bg2-broker-0", None),  # a group whose name starts with ours
        ("xbg-broker-0", None),
        ("bg-broker-1-broker-0", None),  # a set of group "bg-broker-1"
        ("", None),
    ],
)
def test_set_index(name: str, expected: int | None) -> None:
    assert names.set_index("bg", name) == expected


def test_set_index_round_trips() -> None:
    for i in (0, 1, 9, 10, 64, 123):
        assert names.set_index("demo", names.broker_set("demo", i)) == i


def test_set_index_of_a_group_whose_name_looks_like_a_set() -> None:
    assert names.set_index("bg-broker-1", "bg-broker-1-broker-3") == 3
    assert names.set_index("bg-broker-1", "bg-broker-1") is None


@pytest.mark.parametrize(
    ("statefulset", "pod", "expected"),
    [
        ("bg-broker-1", "bg-broker-1-0", 0),
        ("bg-broker-1", "bg-broker-1-2", 2),
        ("bg-broker-1", "bg-broker-1-15", 15),
        ("bg-broker-1", "bg-broker-10-0", None),  # pod of bg-broker-10, same prefix
        ("bg-broker-10", "bg-broker-1-0", None),
        ("bg-broker-1", "bg-broker-1-00", None),  # leading zeros
        ("bg-broker-1", "bg-broker-1-02", None),
        ("bg-broker-1", "bg-broker-1-", None),
        ("bg-broker-1", "bg-broker-1", None),  # the StatefulSet itself
        ("bg-broker-1", "bg-broker-1-master", None),
        ("bg-broker-1", "bg-broker-1-0-0", None),
        ("bg-broker-1", "bg-broker-1--1", None),
        ("bg-broker-1", "bg-broker-2-0", None),
        ("bg-controller", "bg-controller-2", 2),
        ("bg-controller", "bg-controller-api-0", None),
        ("bg-controller", "xbg-controller-0", None),
    ],
)
def test_pod_ordinal(statefulset: str, pod: str, expected: int | None) -> None:
    assert names.pod_ordinal(statefulset, pod) == expected


@pytest.mark.parametrize("suffix", ["\u00b2", "\u0661", "\uff11"])
def test_non_ascii_digits_are_not_ordinals(suffix: str) -> None:
    assert names.pod_ordinal("bg-broker-0", f"bg-broker-0-{suffix}") is None
    assert names.set_index("bg", f"bg-broker-{suffix}") is None
