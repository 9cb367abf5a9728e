"""operator/elect.py: the `brokergroup.io/elect-master` annotation (pure part)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from brokergroup.controller.protocol import ElectMasterResponse
from brokergroup.operator import elect
from brokergroup.operator.elect import AlreadyMaster, Elect, Refused, Target
from brokergroup.operator.roles import Member, SetView
from brokergroup.operator.spec import BrokerGroupSpec, parse_spec

BG = "bg"


def spec(sets: int = 2, replicas: int = 3) -> BrokerGroupSpec:
    return parse_spec({"brokers": {"sets": sets, "replicas": replicas, "minInSyncReplicas": 1}})


def member(ordinal: int, *, alive: bool = True, in_sync: bool = True, sts: str = "bg-broker-1") -> Member:
    return Member(pod=f"{sts}-{ordinal}", broker_id=ordinal + 10, alive=alive, in_sync=in_sync)


def view(master: int | None, members: list[Member], *, epoch: int = 6, sts: str = "bg-broker-1") -> SetView:
    return SetView(
        name=sts,
        master_pod=None if master is None else f"{sts}-{master}",
        master_broker_id=None if master is None else master + 10,
        master_epoch=epoch,
        sync_state_set_epoch=2,
        members=tuple(members),
    )


TARGET = Target(broker_set="bg-broker-1", pod="bg-broker-1-2")


# ---- parse --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("bg-broker-0-0", Target("bg-broker-0", "bg-broker-0-0")),
        ("bg-broker-1-2", Target("bg-broker-1", "bg-broker-1-2")),
        ("  bg-broker-1-1\n", Target("bg-broker-1", "bg-broker-1-1")),
        ("\tbg-broker-0-2 ", Target("bg-broker-0", "bg-broker-0-2")),
    ],
)
def test_parse_good_pods(value: str, expected: Target) -> None:
    assert elect.parse(BG, value, spec()) == expected


def test_parse_set_index_beyond_spec() -> None:
    result = elect.parse(BG, "bg-broker-2-0", spec(sets=2))
    assert isinstance(result, Refused)
    assert result.reason == "UnknownPod"
    assert result.broker_set is None
    assert "'bg-broker-2-0'" in result.message
    assert "bg-broker-<set 0..1>-<replica 0..2>" in result.message


def test_parse_ordinal_at_or_beyond_replicas() -> None:
    for ordinal in (3, 4, 15):
        result = elect.parse(BG, f"bg-broker-1-{ordinal}", spec(replicas=3))
        assert result == Refused("UnknownPod", f"'bg-broker-1-{ordinal}': bg-broker-1 has 3 replicas", "bg-broker-1")


def test_parse_last_valid_ordinal_is_accepted() -> None:
    assert elect.parse(BG, "bg-broker-0-2", spec(replicas=3)) == Target("bg-broker-0", "bg-broker-0-2")
    assert isinstance(elect.parse(BG, "bg-broker-0-1", spec(replicas=1)), Refused)


@pytest.mark.parametrize("value", ["bg-controller-0", "bg-controller-2", " bg-controller-1 "])
def test_parse_controller_pod(value: str) -> None:
    result = elect.parse(BG, value, spec())
    assert isinstance(result, Refused)
    assert result.reason == "NotABrokerPod"
    assert result.broker_set is None
    assert "controller pod" in result.message and "bg-broker-0-1" in result.message


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "garbage",
        "bg-broker-0",  # the set, not a pod
        "bg-broker-0-",
        "bg-broker-0-01",  # leading zero
        "bg-broker-0--1",
        "bg-broker-0-x",
        "bg-broker-10-0",  # same prefix as set 1, another set
        "other-broker-0-0",  # another BrokerGroup
        "bg-broker-0-0.bg-broker-0.ns.svc",  # an address, not a pod name
        "BG-BROKER-0-0",
        "bg-broker-0-0 bg-broker-0-1",
    ],
)
def test_parse_garbage(value: str) -> None:
    result = elect.parse(BG, value, spec())
    assert isinstance(result, Refused)
    assert result.reason == "UnknownPod"
    assert result.broker_set is None


def test_parse_inner_whitespace_is_not_stripped() -> None:
    assert isinstance(elect.parse(BG, "bg-broker-0- 1", spec()), Refused)


# ---- decide -------------------------------------------------------------------------------------


@pytest.mark.parametrize("unclean", [False, True])
def test_decide_without_view(unclean: bool) -> None:
    result = elect.decide(TARGET, None, unclean_allowed=unclean)
    assert isinstance(result, Refused)
    assert result.reason == "ControllerUnavailable"
    assert result.broker_set == "bg-broker-1"


def test_decide_reachable_controller_without_the_set_is_not_unavailable() -> None:
    result = elect.decide(TARGET, None, unclean_allowed=False, reachable=True)
    assert isinstance(result, Refused)
    assert result.reason == "UnknownBrokerSet" and "bg-broker-1" in result.message


# ---- keep_pending ----------------------------------------------------------------------------------

T0 = datetime(2026, 11, 26, 5, 0, 0, tzinfo=UTC)


def test_keep_pending_first_try_records_pending_at_now() -> None:
    kept = elect.keep_pending(None, "bg-broker-1-2", now=T0, wait_seconds=30)
    assert kept is not None
    entry, first = kept
    assert first
    assert entry["result"] == "Pending" and entry["reason"] == "ControllerUnavailable"
    assert entry["time"] == "2026-11-26T05:00:00Z" and entry["request"] == "bg-broker-1-2"
    assert "30 s" in entry["message"]


def test_keep_pending_retry_keeps_the_first_time_until_the_wait_is_over() -> None:
    first, _ = elect.keep_pending(None, "bg-broker-1-2", now=T0, wait_seconds=30) or ({}, True)
    again = elect.keep_pending(first, "bg-broker-1-2", now=T0 + timedelta(seconds=29), wait_seconds=30)
    assert again == (first, False)  # identical record: a retry rewrites no status
    assert elect.keep_pending(first, "bg-broker-1-2", now=T0 + timedelta(seconds=30), wait_seconds=30) is None


def test_keep_pending_of_another_request_starts_its_own_wait() -> None:
    first, _ = elect.keep_pending(None, "bg-broker-1-2", now=T0, wait_seconds=30) or ({}, True)
    later = T0 + timedelta(seconds=100)
    kept = elect.keep_pending(first, "bg-broker-1-1", now=later, wait_seconds=30)
    assert kept is not None and kept[1] and kept[0]["time"] == "2026-11-26T05:01:40Z"


@pytest.mark.parametrize("result", ["Refused", "Elected", "Deferred"])
def test_keep_pending_after_an_answer_starts_again(result: str) -> None:
    last = {"request": "bg-broker-1-2", "result": result, "time": "2026-11-26T04:00:00Z"}
    kept = elect.keep_pending(last, "bg-broker-1-2", now=T0, wait_seconds=30)
    assert kept is not None and kept[1]


def test_keep_pending_with_a_garbled_time_starts_again() -> None:
    last = {"request": "bg-broker-1-2", "result": "Pending", "time": "yesterday"}
    kept = elect.keep_pending(last, "bg-broker-1-2", now=T0, wait_seconds=30)
    assert kept is not None and kept[1] and kept[0]["time"] == "2026-11-26T05:00:00Z"


def test_keep_pending_with_no_wait_refuses_at_once() -> None:
    assert elect.keep_pending(None, "bg-broker-1-2", now=T0, wait_seconds=0) is None


@pytest.mark.parametrize("unclean", [False, True])
def test_decide_already_master(unclean: bool) -> None:
    v = view(2, [member(0), member(1), member(2)], epoch=11)
    assert elect.decide(TARGET, v, unclean_allowed=unclean) == AlreadyMaster(TARGET, 11)


def test_decide_already_master_even_when_not_listed_as_member() -> None:
    assert elect.decide(TARGET, view(2, [member(0)], epoch=3), unclean_allowed=False) == AlreadyMaster(TARGET, 3)


@pytest.mark.parametrize("unclean", [False, True])
def test_decide_not_registered(unclean: bool) -> None:
    result = elect.decide(TARGET, view(0, [member(0), member(1)]), unclean_allowed=unclean)
    assert isinstance(result, Refused)
    assert result.reason == "NotRegistered"
    assert result.broker_set == "bg-broker-1"
    assert "bg-broker-1-2" in result.message


@pytest.mark.parametrize(("in_sync", "unclean"), [(True, False), (False, False), (False, True), (True, True)])
def test_decide_not_alive(in_sync: bool, unclean: bool) -> None:
    v = view(0, [member(0), member(2, alive=False, in_sync=in_sync)])
    result = elect.decide(TARGET, v, unclean_allowed=unclean)
    assert isinstance(result, Refused)
    assert result.reason == "NotAlive"
    assert "broker 12" in result.message


def test_decide_not_in_sync_with_unclean_off_is_refused() -> None:
    v = view(0, [member(0), member(2, in_sync=False)])
    result = elect.decide(TARGET, v, unclean_allowed=False)
    assert isinstance(result, Refused)
    assert result.reason == "NotInSyncStateSet"
    assert result.broker_set == "bg-broker-1"
    assert "electUncleanMaster" in result.message


def test_decide_not_in_sync_with_unclean_on_elects() -> None:
    v = view(0, [member(0), member(2, in_sync=False)])
    assert elect.decide(TARGET, v, unclean_allowed=True) == Elect(TARGET, 12)


@pytest.mark.parametrize("unclean", [False, True])
def test_decide_in_sync_elects_with_the_members_broker_id(unclean: bool) -> None:
    v = view(0, [member(0), member(1), Member("bg-broker-1-2", broker_id=77, alive=True, in_sync=True)])
    assert elect.decide(TARGET, v, unclean_allowed=unclean) == Elect(TARGET, 77)


def test_decide_with_no_master_elects() -> None:
    v = view(None, [member(0, alive=False), member(2)])
    assert elect.decide(TARGET, v, unclean_allowed=False) == Elect(TARGET, 12)


# ---- record -------------------------------------------------------------------------------------


def test_record_full() -> None:
    entry = elect.record(
        request="bg-broker-1-2",
        target="bg-broker-1-2",
        result="Elected",
        epoch=7,
        now="2026-01-01T00:00:00Z",
        reason="Elected",
        message="ok",
    )
    assert entry == {
        "request": "bg-broker-1-2",
        "target": "bg-broker-1-2",
        "result": "Elected",
        "masterEpoch": 7,
        "time": "2026-01-01T00:00:00Z",
        "reason": "Elected",
        "message": "ok",
    }


def test_record_drops_none() -> None:
    entry = elect.record(
        request="junk", target=None, result="Refused", epoch=None, now="t", reason="UnknownPod", message="m"
    )
    assert entry == {"request": "junk", "result": "Refused", "time": "t", "reason": "UnknownPod", "message": "m"}
    assert None not in entry.values()


def test_record_keeps_falsy_non_none_values() -> None:
    entry = elect.record(request="", target="", result="", epoch=0, now="", reason="", message="")
    assert entry["masterEpoch"] == 0
    assert len(entry) == 7


# ---- answer: the lastElection record of each outcome ---------------------------------------------


def test_answer_of_a_refusal_names_its_set_and_reason() -> None:
    refused = Refused("NotAlive", "bg-broker-1-2 (broker 12) is not alive", "bg-broker-1")
    assert elect.answer("bg-broker-1-2", refused, now="T") == (
        "bg-broker-1",
        {
            "request": "bg-broker-1-2",
            "result": "Refused",
            "time": "T",
            "reason": "NotAlive",
            "message": "bg-broker-1-2 (broker 12) is not alive",
        },
    )
    assert elect.answer("junk", Refused("UnknownPod", "no"), now="T")[0] is None


def test_answer_of_an_election_compares_the_winner_with_the_target() -> None:
    def response(winner: int) -> ElectMasterResponse:
        return ElectMasterResponse(
            master_broker_id=winner, master_address="a:1", master_epoch=7, sync_state_set_epoch=3, sync_state_set=[]
        )

    decision = Elect(TARGET, 12)
    _, won = elect.answer("bg-broker-1-2", decision, now="T", elected=response(12))
    assert (won["result"], won["reason"], won["masterEpoch"], won["target"]) == ("Elected", "Elected", 7, TARGET.pod)
    _, lost = elect.answer("bg-broker-1-2", decision, now="T", elected=response(11))
    assert (lost["result"], lost["reason"]) == ("NotElected", "ControllerChoseAnother")
    _, failed = elect.answer("bg-broker-1-2", decision, now="T", error="timeout")
    assert (failed["result"], failed["reason"], failed["message"]) == ("Failed", "ControllerRefused", "timeout")
    assert "masterEpoch" not in failed


def test_answer_of_an_already_master_target() -> None:
    assert elect.answer("bg-broker-1-2", AlreadyMaster(TARGET, 9), now="T") == (
        "bg-broker-1",
        {
            "request": "bg-broker-1-2",
            "target": TARGET.pod,
            "result": "AlreadyMaster",
            "masterEpoch": 9,
            "time": "T",
            "reason": "AlreadyMaster",
            "message": "bg-broker-1-2 is already master; nothing to do",
        },
    )
