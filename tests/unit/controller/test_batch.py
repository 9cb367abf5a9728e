"""Batch: the one value pysyncobj replicates, as JSON text; and event_from_dict, its event decoder."""

from __future__ import annotations

import json

import pytest

from brokergroup.controller.model import (
    EVENT_TYPES,
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    Event,
    UpdateBrokerAddressEvent,
    event_from_dict,
)
from brokergroup.controller.replicated import Batch

EVERY_EVENT: tuple[Event, ...] = (
    ApplyBrokerIdEvent(
        broker_name="broker-a",
        cluster_name="c1",
        broker_address="10.0.0.1:10911",
        new_broker_id=1,
        register_check_code="10.0.0.1:10911;1700000000000",
    ),
    UpdateBrokerAddressEvent(broker_name="broker-a", cluster_name="c1", broker_address="10.0.0.9:10911", broker_id=1),
    ElectMasterEvent(broker_name="broker-a", new_master_elected=True, new_master_broker_id=1),
    ElectMasterEvent(broker_name="broker-a", new_master_elected=False),
    AlterSyncStateSetEvent(broker_name="broker-a", new_sync_state_set=(1, 2, 3)),
    AlterSyncStateSetEvent(broker_name="broker-a", new_sync_state_set=()),
    CleanBrokerDataEvent(broker_name="broker-a", broker_id_set_to_clean=(2, 3)),
    CleanBrokerDataEvent(broker_name="broker-ü"),
)


def batch(events: tuple[Event, ...] = EVERY_EVENT, **changes: object) -> Batch:
    fields: dict[str, object] = {
        "batch_id": "5f0c6f2e-8d1a-4b8e-9c55-0d2f3b7a9e41",
        "term": 7,
        "ts_ms": 1_700_000_000_123,
        "leader": "n2",
        "expect_version": 41,
        "events": events,
        "request": "elect-master",
        "reason": "inactive_master_scan",
        "broker_name": "broker-a",
    }
    return Batch(**{**fields, **changes})  # type: ignore[arg-type]


# ---- Batch -------------------------------------------------------------------------------------------------


def test_every_event_type_is_covered() -> None:
    assert {e.TYPE for e in EVERY_EVENT} == set(EVENT_TYPES)


def test_round_trip_with_every_event_type() -> None:
    original = batch()
    text = original.to_json()
    back = Batch.from_json(text)
    assert back == original
    assert [type(e) for e in back.events] == [type(e) for e in EVERY_EVENT]
    assert back.to_json() == text


def test_round_trip_of_a_barrier() -> None:
    barrier = batch(events=(), expect_version=None, request="barrier", reason=None, broker_name=None)
    assert Batch.from_json(barrier.to_json()) == barrier


def test_json_is_compact_plain_data() -> None:
    body = json.loads(batch(events=EVERY_EVENT[4:5]).to_json())
    assert body == {
        "batch_id": "5f0c6f2e-8d1a-4b8e-9c55-0d2f3b7a9e41",
        "term": 7,
        "ts_ms": 1_700_000_000_123,
        "leader": "n2",
        "expect_version": 41,
        "events": [{"type": "ALTER_SYNC_STATE_SET", "broker_name": "broker-a", "new_sync_state_set": [1, 2, 3]}],
        "request": "elect-master",
        "reason": "inactive_master_scan",
        "broker_name": "broker-a",
    }
    assert ", " not in batch().to_json() and ": " not in batch().to_json()


def test_same_batch_same_text() -> None:
    """Every node decodes the same string; equal batches must encode identically."""
    assert batch().to_json() == batch().to_json()
    assert batch().to_json() != batch(term=8).to_json()


def test_from_json_reports_a_bad_event() -> None:
    body = json.loads(batch().to_json())
    body["events"][2]["type"] = "ELECT_MASTR"
    with pytest.raises(ValueError, match="unknown event type 'ELECT_MASTR'"):
        Batch.from_json(json.dumps(body))


# ---- event_from_dict --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: e.TYPE)
def test_event_round_trip(event: Event) -> None:
    data = event.to_dict()
    assert data["type"] == event.TYPE
    assert json.loads(json.dumps(data)) == data
    assert event_from_dict(data) == event


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"type": "REGISTER", "broker_name": "a"}, "unknown event type 'REGISTER'"),
        ({"type": "HEARTBEAT_LOST", "broker_name": "a"}, "unknown event type 'HEARTBEAT_LOST'"),
        ({"type": "elect_master", "broker_name": "a"}, "unknown event type 'elect_master'"),
        ({"broker_name": "a"}, "unknown event type None"),
    ],
)
def test_unknown_type_is_named(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as info:
        event_from_dict(data)
    assert str(info.value) == message


def test_missing_field_is_named() -> None:
    data = {"type": "ELECT_MASTER", "broker_name": "a", "new_master_broker_id": 1}
    with pytest.raises(ValueError) as info:
        event_from_dict(data)
    assert str(info.value) == (
        "event ELECT_MASTER: fields ['broker_name', 'new_master_broker_id'] do not match "
        "['broker_name', 'new_master_broker_id', 'new_master_elected']"
    )


def test_extra_field_is_named() -> None:
    data = {**EVERY_EVENT[4].to_dict(), "sync_state_set_epoch": 3}
    with pytest.raises(ValueError) as info:
        event_from_dict(data)
    assert str(info.value) == (
        "event ALTER_SYNC_STATE_SET: fields ['broker_name', 'new_sync_state_set', 'sync_state_set_epoch'] "
        "do not match ['broker_name', 'new_sync_state_set']"
    )


def test_camel_case_fields_are_not_accepted() -> None:
    data = {"type": "CLEAN_BROKER_DATA", "brokerName": "a", "broker_id_set_to_clean": None}
    with pytest.raises(ValueError, match=r"fields \['brokerName', 'broker_id_set_to_clean'\] do not match"):
        event_from_dict(data)


def test_lists_come_back_as_tuples() -> None:
    event = event_from_dict({"type": "CLEAN_BROKER_DATA", "broker_name": "a", "broker_id_set_to_clean": [3, 1]})
    assert isinstance(event, CleanBrokerDataEvent)
    assert event.broker_id_set_to_clean == (3, 1)
    assert hash(event) == hash(CleanBrokerDataEvent(broker_name="a", broker_id_set_to_clean=(3, 1)))
