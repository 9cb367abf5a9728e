"""Event-log records (DESIGN §2.3): builders against the committed JSON Schema, ids, unclean elections."""

from __future__ import annotations

import copy
import json
import uuid
from importlib import resources
from typing import Any

import jsonschema
import pytest
from controller_factories import CLUSTER, SET_A, addr, check_code, led_state, make_state

from brokergroup.controller import core, records
from brokergroup.controller.model import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ControllerState,
    ElectMasterEvent,
    Event,
    UpdateBrokerAddressEvent,
)

BATCH = "5f0c6f2e-8d1a-4b8e-9c55-0d2f3b7a9e41"
OTHER_BATCH = "0b9a7c3e-1f2d-4e5a-8b6c-7d8e9f0a1b2c"
NODE = "n1"


def load_schema() -> dict[str, Any]:
    text = resources.files("brokergroup.controller").joinpath("event.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


SCHEMA = load_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def errors_of(line: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in VALIDATOR.iter_errors(line)]


def as_logged(record: dict[str, Any]) -> dict[str, Any]:
    """What `EventLogWriter` writes: the builder's record stamped with the node id."""
    return {**record, "node": NODE}


def applied(state: ControllerState, event: Event, *, position: int = 0, index: int = 7) -> dict[str, Any]:
    """Apply `event` to `state` and build its record the way `StateMachine._apply_batch` does."""
    unclean = records.is_unclean(state, event)
    core.apply_event(state, event)
    return records.raft_record(
        event=event,
        state_after=state,
        unclean=unclean,
        batch_id=BATCH,
        position=position,
        entry_position=position,
        ts_ms=1_700_000_000_123,
        term=3,
        index=index,
        reason="admin",
    )


def apply_id(broker_id: int) -> ApplyBrokerIdEvent:
    return ApplyBrokerIdEvent(
        broker_name=SET_A,
        cluster_name=CLUSTER,
        broker_address=addr(broker_id),
        new_broker_id=broker_id,
        register_check_code=check_code(broker_id),
    )


def every_raft_record() -> list[dict[str, Any]]:
    """One record of each event type, in an order that can happen (register, elect, grow, clean)."""
    state = ControllerState()
    events: list[Event] = [
        apply_id(1),
        apply_id(2),
        UpdateBrokerAddressEvent(broker_name=SET_A, cluster_name=CLUSTER, broker_address=addr(2, 20911), broker_id=2),
        ElectMasterEvent(broker_name=SET_A, new_master_elected=True, new_master_broker_id=1),
        AlterSyncStateSetEvent(broker_name=SET_A, new_sync_state_set=(1, 2)),
        ElectMasterEvent(broker_name=SET_A, new_master_elected=False),
        CleanBrokerDataEvent(broker_name=SET_A, broker_id_set_to_clean=(2,)),
        CleanBrokerDataEvent(broker_name=SET_A),
    ]
    return [applied(state, event, position=i, index=10 + i) for i, event in enumerate(events)]


def every_local_record() -> list[dict[str, Any]]:
    state = led_state()
    out = []
    for kind in records.LOCAL_TYPES:
        out.append(
            records.local_record(
                kind=kind,
                event_uuid=str(uuid.uuid4()),
                ts_ms=1_700_000_000_456,
                term=4,
                cluster_name=CLUSTER,
                broker_name=SET_A,
                broker_id=2,
                reason="heartbeat_timeout",
                state=state,
            )
        )
    out.append(records.local_record(kind="CONTROLLER_LEADER_CHANGED", event_uuid=str(uuid.uuid4()), ts_ms=1, term=5))
    return out


# ---- the schema ------------------------------------------------------------------------------------------


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_schema_fields_are_exactly_the_builders_fields() -> None:
    built = every_raft_record()[0]
    assert set(SCHEMA["properties"]) == set(built)
    assert set(SCHEMA["required"]) == set(built)
    assert SCHEMA["additionalProperties"] is False
    assert all(field.get("description") for field in SCHEMA["properties"].values())


def test_schema_types_and_version_follow_records_module() -> None:
    assert SCHEMA["properties"]["schemaVersion"]["const"] == records.SCHEMA_VERSION
    assert SCHEMA["properties"]["type"]["enum"] == [*records.RAFT_TYPES, *records.LOCAL_TYPES]
    assert SCHEMA["then"]["properties"]["type"]["enum"] == list(records.RAFT_TYPES)
    assert SCHEMA["else"]["properties"]["type"]["enum"] == list(records.LOCAL_TYPES)


def test_every_raft_record_validates() -> None:
    built = every_raft_record()
    assert {r["type"] for r in built} == {t for t in records.RAFT_TYPES if t != "REGISTER"}
    for record in built:
        assert errors_of(as_logged(record)) == [], record


def test_every_local_record_validates() -> None:
    built = every_local_record()
    assert {r["type"] for r in built} == set(records.LOCAL_TYPES)
    for record in built:
        assert errors_of(as_logged(record)) == [], record


def test_builders_leave_node_to_the_writer_and_schema_requires_it() -> None:
    record = every_raft_record()[0]
    assert record["node"] is None
    assert errors_of(record) == ["node: None is not of type 'string'"]


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"index": None}, "index"),
        ({"type": "HEARTBEAT_LOST"}, "type"),
        ({"schemaVersion": 2}, "schemaVersion"),
        ({"eventId": "not-a-uuid"}, "eventId"),
        ({"syncStateSet": [1, "2"]}, "syncStateSet/1"),
        ({"electionResult": "maybe"}, "electionResult"),
        ({"unclean": None}, "unclean"),
        ({"ts": 1.5}, "ts"),
        ({"extra": 1}, "(root)"),
    ],
)
def test_schema_rejects_malformed_raft_lines(change: dict[str, Any], where: str) -> None:
    line = {**as_logged(every_raft_record()[3]), **change}
    problems = errors_of(line)
    assert problems, line
    assert any(p.startswith(f"{where}:") for p in problems), problems


def test_schema_rejects_local_line_with_index_or_raft_type() -> None:
    local = as_logged(every_local_record()[0])
    assert errors_of({**local, "index": 5}) == ["index: 5 is not of type 'null'"]
    assert errors_of({**local, "type": "ELECT_MASTER"})[0].startswith("type:")


def test_missing_field_is_named() -> None:
    line = as_logged(every_raft_record()[0])
    del line["masterEpoch"]
    assert errors_of(line) == ["(root): 'masterEpoch' is a required property"]


# ---- raft_record contents ---------------------------------------------------------------------------------


def test_raft_record_carries_position_batch_context_and_state_after() -> None:
    state = make_state(ids=(1, 2, 3))
    record = applied(state, ElectMasterEvent(broker_name=SET_A, new_master_elected=True, new_master_broker_id=2))
    assert record == {
        "schemaVersion": 1,
        "eventId": records.event_id(BATCH, 0),
        "ts": 1_700_000_000_123,
        "node": None,
        "term": 3,
        "index": 7,
        "position": 0,
        "source": "raft",
        "clusterName": CLUSTER,
        "brokerName": SET_A,
        "type": "ELECT_MASTER",
        "brokerId": 2,
        "masterBrokerId": 2,
        "masterAddress": addr(2),
        "masterEpoch": 1,
        "syncStateSet": [2],
        "syncStateSetEpoch": 1,
        "electionResult": "new_master_elected",
        "unclean": False,
        "reason": "admin",
    }


def test_no_master_elected_record() -> None:
    record = applied(led_state(), ElectMasterEvent(broker_name=SET_A, new_master_elected=False))
    assert (record["electionResult"], record["brokerId"], record["masterBrokerId"]) == ("no_master_elected", None, None)
    assert (record["masterEpoch"], record["syncStateSet"], record["unclean"]) == (2, [1, 2, 3], False)


def test_record_of_a_removed_set_has_no_set_fields() -> None:
    record = applied(led_state(), CleanBrokerDataEvent(broker_name=SET_A))
    assert record["type"] == "CLEAN_BROKER_DATA"
    assert [record[k] for k in ("clusterName", "masterBrokerId", "masterEpoch", "syncStateSet")] == [None] * 4
    assert errors_of(as_logged(record)) == []


def test_sync_state_set_is_sorted() -> None:
    state = led_state(in_sync=(1,))
    record = applied(state, AlterSyncStateSetEvent(broker_name=SET_A, new_sync_state_set=(3, 1, 2)))
    assert (record["syncStateSet"], record["syncStateSetEpoch"]) == ([1, 2, 3], 3)


# ---- event ids ------------------------------------------------------------------------------------------------


def test_event_id_is_deterministic_per_batch_and_position() -> None:
    first = [r["eventId"] for r in every_raft_record()]
    again = [r["eventId"] for r in every_raft_record()]
    assert first == again
    assert len(set(first)) == len(first)
    assert first == [records.event_id(BATCH, i) for i in range(len(first))]


def test_event_id_is_a_version_5_uuid_that_differs_across_batches() -> None:
    ids = {records.event_id(b, p) for b in (BATCH, OTHER_BATCH) for p in (0, 1, 2)}
    assert len(ids) == 6
    assert {uuid.UUID(i).version for i in ids} == {5}


def test_event_id_does_not_depend_on_state_time_term_or_index() -> None:
    event = ElectMasterEvent(broker_name=SET_A, new_master_elected=True, new_master_broker_id=1)

    def build(state: ControllerState, ts_ms: int, term: int, index: int) -> dict[str, Any]:
        return records.raft_record(
            event=event,
            state_after=state,
            unclean=False,
            batch_id=BATCH,
            position=4,
            entry_position=4,
            ts_ms=ts_ms,
            term=term,
            index=index,
            reason=None,
        )

    one, two = build(ControllerState(), 1, 1, 1), build(led_state(), 2, 9, 99)
    assert one["eventId"] == two["eventId"] == records.event_id(BATCH, 4)


@pytest.mark.parametrize("position", [0, 1, 9, 10, 63, 1000])
def test_event_id_is_uuid5_of_the_batch_id_and_the_position(position: int) -> None:
    """The ids of the event logs written before the faster computation: the audit deduplicates on them."""
    for batch_id in (
        BATCH,
        OTHER_BATCH,
        *(str(uuid.UUID(int=i * 0x0123456789ABCDEF0123456789ABCDEF)) for i in range(50)),
    ):
        assert records.event_id(batch_id, position) == str(uuid.uuid5(uuid.UUID(batch_id), str(position)))


def test_event_id_rejects_a_batch_id_that_is_not_a_uuid() -> None:
    with pytest.raises(ValueError, match="badly formed hexadecimal UUID string"):
        records.event_id("batch-1", 0)


# ---- unclean detection ---------------------------------------------------------------------------------------


def elect(broker_id: int) -> ElectMasterEvent:
    return ElectMasterEvent(broker_name=SET_A, new_master_elected=True, new_master_broker_id=broker_id)


@pytest.mark.parametrize(
    ("state", "event", "unclean"),
    [
        (led_state(in_sync=(1, 2)), elect(3), True),
        (led_state(in_sync=(1, 2)), elect(2), False),
        (make_state(ids=(1, 2, 3)), elect(3), False),
        (led_state(in_sync=(1,)), ElectMasterEvent(broker_name=SET_A, new_master_elected=False), False),
        (ControllerState(), elect(3), False),
        (led_state(in_sync=(1,)), apply_id(4), False),
    ],
    ids=["outside-set", "inside-set", "first-election", "nobody-elected", "unknown-set", "not-an-election"],
)
def test_unclean_detection(state: ControllerState, event: Event, unclean: bool) -> None:
    before = copy.deepcopy(state)
    assert records.is_unclean(state, event) is unclean
    assert state == before


def test_unclean_is_judged_on_the_state_before_the_election() -> None:
    """After applying, the new master is always in its (fresh) set; the record must still say unclean."""
    record = applied(led_state(in_sync=(1, 2)), elect(3))
    assert (record["unclean"], record["masterBrokerId"], record["syncStateSet"]) == (True, 3, [3])
    assert errors_of(as_logged(record)) == []


# ---- local_record ------------------------------------------------------------------------------------------------


def test_local_record_rejects_unknown_kinds() -> None:
    for kind in ("ELECT_MASTER", "heartbeat_lost", ""):
        with pytest.raises(ValueError, match=f"unknown local event type {kind!r}"):
            records.local_record(kind=kind, event_uuid=str(uuid.uuid4()), ts_ms=1, term=1)


def test_local_record_with_state_copies_the_set() -> None:
    event_uuid = str(uuid.uuid4())
    record = records.local_record(
        kind="HEARTBEAT_LOST",
        event_uuid=event_uuid,
        ts_ms=5,
        term=2,
        cluster_name=CLUSTER,
        broker_name=SET_A,
        broker_id=3,
        reason="heartbeat_timeout",
        state=led_state(in_sync=(2, 1)),
    )
    assert (record["eventId"], record["index"], record["source"], record["brokerId"]) == (event_uuid, None, "local", 3)
    assert (record["masterBrokerId"], record["masterAddress"], record["syncStateSet"]) == (1, addr(1), [1, 2])
    assert (record["electionResult"], record["unclean"]) == (None, False)


def test_local_record_without_state_or_broker_has_no_set_fields() -> None:
    with_state_no_broker = records.local_record(
        kind="CONTROLLER_LEADER_CHANGED", event_uuid=str(uuid.uuid4()), ts_ms=5, term=2, state=led_state()
    )
    assert [with_state_no_broker[k] for k in ("brokerName", "masterBrokerId", "syncStateSet")] == [None, None, None]
