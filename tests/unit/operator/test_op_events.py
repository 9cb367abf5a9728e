"""operator/events.py: events.k8s.io/v1 Event objects regarding a BrokerGroup."""

from __future__ import annotations

from typing import Any

import pytest

from brokergroup.operator import events, names
from brokergroup.operator.events import Event

NOW = "2026-11-21T10:00:00.000000Z"
BG: dict[str, Any] = {
    "apiVersion": "brokergroup.io/v1alpha1",
    "kind": "BrokerGroup",
    "metadata": {"name": "demo", "namespace": "mq", "uid": "0b7f-uid", "resourceVersion": "4711", "generation": 3},
    "spec": {},
}


def build(event: Event, *, bg: dict[str, Any] = BG, instance: str = "operator-abc") -> dict[str, Any]:
    return events.build(event, bg=bg, now=NOW, instance=instance, suffix="18a2b3c4d5e6f7a8")


def test_event_shape() -> None:
    out = build(Event("ChildrenApplied", "created StatefulSet demo-broker-0", "Apply"))
    assert out == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "demo.18a2b3c4d5e6f7a8", "namespace": "mq"},
        "eventTime": NOW,
        "reportingController": "brokergroup.io/operator",
        "reportingInstance": "operator-abc",
        "action": "Apply",
        "reason": "ChildrenApplied",
        "type": "Normal",
        "note": "created StatefulSet demo-broker-0",
        "regarding": {
            "apiVersion": f"{names.GROUP}/{names.VERSION}",
            "kind": "BrokerGroup",
            "name": "demo",
            "namespace": "mq",
            "uid": "0b7f-uid",
            "resourceVersion": "4711",
        },
    }


def test_regarding_matches_the_broker_group() -> None:
    out = build(Event("InvalidSpec", "bad", "Validate", "Warning"))
    assert out["type"] == "Warning"
    regarding = out["regarding"]
    assert regarding["apiVersion"] == BG["apiVersion"]
    assert regarding["kind"] == BG["kind"]
    assert {k: regarding[k] for k in ("name", "namespace", "uid", "resourceVersion")} == {
        k: BG["metadata"][k] for k in ("name", "namespace", "uid", "resourceVersion")
    }
    assert out["metadata"]["namespace"] == regarding["namespace"]


def test_regarding_without_uid_or_resource_version() -> None:
    out = build(Event("R", "n", "A"), bg={"metadata": {"name": "demo", "namespace": "mq"}})
    assert out["regarding"]["uid"] is None
    assert out["regarding"]["resourceVersion"] is None


def test_named_like_kubectl_events_because_generate_name_cannot_end_in_a_dot() -> None:
    out = build(Event("R", "n", "A"))
    assert "generateName" not in out["metadata"]
    assert out["metadata"]["name"] == "demo.18a2b3c4d5e6f7a8"


@pytest.mark.parametrize("length", [0, 1, 1023, 1024])
def test_note_up_to_the_limit_is_kept(length: int) -> None:
    note = "x" * length
    assert build(Event("R", note, "A"))["note"] == note


@pytest.mark.parametrize("length", [1025, 5000])
def test_long_note_truncated_to_1024_chars_with_ellipsis(length: int) -> None:
    note = "".join(str(i % 10) for i in range(length))
    out = build(Event("R", note, "A"))["note"]
    assert len(out) == events.NOTE_LIMIT == 1024
    assert out == note[:1021] + "..."


def test_action_reason_and_instance_are_capped_at_128() -> None:
    out = build(Event("R" * 200, "n", "A" * 200), instance="i" * 300)
    assert out["reason"] == "R" * 128
    assert out["action"] == "A" * 128
    assert out["reportingInstance"] == "i" * 128
    assert len(out["reportingController"]) <= 128


def test_build_is_pure() -> None:
    event = Event("R", "n", "A")
    assert build(event) == build(event)
    assert build(event) is not build(event)


def test_non_ascii_note_fits_the_apiserver_byte_limit() -> None:
    out = build(Event("R", "\u00e9" * 2000, "A"))
    assert len(out["note"].encode("utf-8")) <= 1024
