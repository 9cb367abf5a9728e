"""`kubectl brokergroup status` rendering: a pure function of the snapshot, checked against golden text
(stable columns), with colours only when asked and the same facts in `-o json`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from brokergroup.kubectl import render, snapshot

GOLDEN = Path(__file__).with_name("golden")

BG: dict[str, Any] = {
    "metadata": {"name": "bg", "namespace": "mq", "annotations": {}},
    "status": {
        "phase": "Running",
        "brokerSets": [
            {
                "name": "bg-broker-0",
                "desiredReplicas": 3,
                "readyReplicas": 3,
                "holdsData": True,
                "masterPod": "bg-broker-0-1",
                "masterBrokerId": 2,
                "masterEpoch": 4,
                "syncStateSet": ["bg-broker-0-0", "bg-broker-0-1"],
                "syncStateSetEpoch": 7,
                "replicas": [
                    {"pod": "bg-broker-0-0", "brokerId": 1, "role": "slave", "inSync": True, "alive": True},
                    {"pod": "bg-broker-0-1", "brokerId": 2, "role": "master", "inSync": True, "alive": True},
                    {"pod": "bg-broker-0-2", "brokerId": 3, "role": "slave", "inSync": False, "alive": False},
                ],
                "lastElection": {
                    "request": "bg-broker-0-1",
                    "target": "bg-broker-0-1",
                    "result": "Elected",
                    "masterEpoch": 4,
                    "time": "2026-11-25T22:00:00Z",
                    "reason": "Elected",
                    "message": "bg-broker-0-1 is master at epoch 4",
                },
            },
            {
                "name": "bg-broker-1",
                "desiredReplicas": 2,
                "readyReplicas": 1,
                "rollout": {
                    "step": "RestartingSlave",
                    "pod": "bg-broker-1-1",
                    "message": "waiting for Ready",
                    "updatedReplicas": 1,
                },
            },
        ],
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "BrokersNotReady", "message": "bg-broker-1: 1/2 ready"},
            {"type": "ReconciliationPaused", "status": "False", "reason": "NotPaused", "message": ""},
        ],
    },
}

NODES = (
    snapshot.controller_node(
        "bg-controller-0",
        {"nodeId": "n0", "raftLeader": True, "leaderId": "n0", "term": 3, "commitIndex": 41, "serving": True},
    ),
    snapshot.controller_node(
        "bg-controller-1",
        {"nodeId": "n1", "raftLeader": False, "leaderId": "n0", "term": 3, "commitIndex": 41, "serving": True},
    ),
    snapshot.controller_node("bg-controller-2", 'pods "bg-controller-2" not found'),
)

BROKERS: dict[str, dict[str, Any] | str] = {
    "bg-broker-0-0": {"store": {"maxOffset": 900}, "adminFenced": True},
    "bg-broker-0-1": {"store": {"maxOffset": 1000}, "adminFenced": False},
    "bg-broker-0-2": "error trying to reach service: dial tcp: connection refused",
}


def golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(actual)
    assert actual == path.read_text(), f"{name} changed; UPDATE_GOLDEN=1 rewrites it after a review"


def test_status_text_matches_the_golden_output() -> None:
    golden("status.txt", render.text(snapshot.group(BG, NODES, BROKERS)))


def test_lag_is_the_masters_max_offset_minus_the_replicas() -> None:
    replicas = snapshot.group(BG, NODES, BROKERS).sets[0].replicas
    assert [(r.pod, r.lag, r.fenced) for r in replicas] == [
        ("bg-broker-0-0", 100, True),
        ("bg-broker-0-1", 0, False),
        ("bg-broker-0-2", None, None),
    ]
    # Without the master's reply there is no lag to show; without any, nothing is guessed.
    no_master = {k: v for k, v in BROKERS.items() if k != "bg-broker-0-1"}
    assert [r.lag for r in snapshot.group(BG, NODES, no_master).sets[0].replicas] == [None, None, None]
    assert [r.fenced for r in snapshot.group(BG, NODES).sets[0].replicas] == [None, None, None]
    assert snapshot.lag({"store": {"maxOffset": 5}}, {"store": {"maxOffset": 9}}) == 0


def test_plain_text_has_no_escapes_and_colour_text_has_them() -> None:
    snap = snapshot.group(BG, NODES)
    assert "\x1b[" not in render.text(snap)
    coloured = render.text(snap, colour=True)
    assert "\x1b[" in coloured
    assert "bg-broker-0-1" in coloured


def test_the_same_snapshot_renders_the_same_text() -> None:
    assert render.text(snapshot.group(BG, NODES)) == render.text(snapshot.group(json.loads(json.dumps(BG)), NODES))


def test_json_has_every_fact_of_the_table() -> None:
    out = json.loads(render.as_json(snapshot.group(BG, NODES)))
    first = out["sets"][0]
    assert first["master"] == "bg-broker-0-1" and first["master_epoch"] == 4
    assert first["sync_state_set"] == ["bg-broker-0-0", "bg-broker-0-1"]
    assert [(r["pod"], r["in_sync"], r["alive"]) for r in first["replicas"]][2] == ("bg-broker-0-2", False, False)
    assert first["last_election"]["result"] == "Elected"
    assert out["sets"][1]["rollout"]["step"] == "RestartingSlave"
    assert [(n["pod"], n["raft_leader"]) for n in out["controllers"]][:2] == [
        ("bg-controller-0", True),
        ("bg-controller-1", False),
    ]
    assert out["controllers"][2]["error"] == 'pods "bg-controller-2" not found'


def test_a_group_not_reconciled_yet_says_so() -> None:
    text = render.text(snapshot.group({"metadata": {"name": "new", "namespace": "mq"}}))
    assert "No broker sets in status yet" in text
    assert "phase Unknown" in text


@pytest.mark.parametrize("value", ["true", "True"])
def test_paused_comes_from_the_condition_not_the_annotation(value: str) -> None:
    bg = {
        "metadata": {"name": "p", "namespace": "mq", "annotations": {"brokergroup.io/pause-reconciliation": value}},
        "status": {"conditions": [{"type": "ReconciliationPaused", "status": "True", "reason": "Paused"}]},
    }
    assert snapshot.group(bg).paused
    assert "paused yes" in render.text(snapshot.group(bg))
