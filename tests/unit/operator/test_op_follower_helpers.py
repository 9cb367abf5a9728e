"""operator/follower.py: the pure helpers (FeedCursor.take, merged_entries, transitions)."""

from __future__ import annotations

from typing import Any

from brokergroup.operator import follow
from brokergroup.operator.events import Event
from brokergroup.operator.follower import OWNED, FeedCursor, merged_entries, transitions
from brokergroup.operator.roles import Member, SetView

S0 = "bg-broker-0"
S1 = "bg-broker-1"
SETS = {S0, S1}


def elect_event(index: int, *, sts: str = S0, epoch: Any = 2, ts: int = 1_700_000_000_500, reason: Any = "x") -> dict:
    return {
        "index": index,
        "type": "ELECT_MASTER",
        "brokerName": sts,
        "masterEpoch": epoch,
        "ts": ts,
        "reason": reason,
        "source": "raft",
    }


def feed(events: list[dict[str, Any]], last_index: int, *, truncated: bool = False) -> dict[str, Any]:
    return {"events": events, "lastIndex": last_index, "truncated": truncated}


def primed(after: int = 10) -> FeedCursor:
    cursor = FeedCursor()
    assert cursor.take(feed([], after), SETS) is False
    assert cursor.primed and cursor.after == after
    return cursor


# ---- FeedCursor.take ----------------------------------------------------------------------------


def test_first_read_primes_and_records_nothing() -> None:
    cursor = FeedCursor()
    assert (cursor.after, cursor.primed, cursor.commits) == (0, False, {})
    gap = cursor.take(feed([elect_event(3), elect_event(5, sts=S1, epoch=4)], 5), SETS)
    assert gap is False
    assert cursor.primed is True
    assert cursor.after == 5
    assert cursor.commits == {}


def test_elections_after_priming_are_recorded() -> None:
    cursor = primed(10)
    gap = cursor.take(
        feed(
            [
                elect_event(11, epoch=3, ts=1_700_000_001_250, reason="heartbeat lost"),
                elect_event(12, sts=S1, epoch=7, ts=2000, reason="designated"),
            ],
            12,
        ),
        SETS,
    )
    assert gap is False
    assert cursor.after == 12
    assert cursor.commits == {
        (S0, 3): (1_700_000_001.25, "heartbeat lost"),
        (S1, 7): (2.0, "designated"),
    }


def test_only_the_given_sets_are_recorded() -> None:
    cursor = primed(10)
    cursor.take(feed([elect_event(11, sts="bg-broker-2"), elect_event(12, sts="other-broker-0")], 12), SETS)
    assert cursor.commits == {}
    cursor.take(feed([elect_event(13, sts=S1, epoch=9)], 13), {S1})
    assert set(cursor.commits) == {(S1, 9)}
    cursor.take(feed([elect_event(14, sts=S0, epoch=9)], 14), {S1})
    assert set(cursor.commits) == {(S1, 9)}


def test_only_elect_master_events_with_an_int_epoch_are_recorded() -> None:
    cursor = primed(10)
    others = [
        {**elect_event(11), "type": "ALTER_SYNC_STATE_SET"},
        {**elect_event(12), "type": "REGISTER_BROKER"},
        elect_event(13, epoch=None),
        elect_event(14, epoch="5"),
        {k: v for k, v in elect_event(15).items() if k != "masterEpoch"},
    ]
    cursor.take(feed(others, 15), SETS)
    assert cursor.commits == {}
    assert cursor.after == 15


def test_missing_reason_is_recorded_as_empty() -> None:
    cursor = primed(10)
    cursor.take(feed([elect_event(11, reason=None), elect_event(12, sts=S1, reason="")], 12), SETS)
    event_without = {k: v for k, v in elect_event(13, epoch=8).items() if k != "reason"}
    cursor.take(feed([event_without], 13), SETS)
    assert cursor.commits[(S0, 2)][1] == ""
    assert cursor.commits[(S1, 2)][1] == ""
    assert cursor.commits[(S0, 8)][1] == ""


def test_a_later_commit_of_the_same_epoch_overwrites() -> None:
    cursor = primed(10)
    cursor.take(feed([elect_event(11, ts=1000, reason="a"), elect_event(12, ts=3000, reason="b")], 12), SETS)
    assert cursor.commits == {(S0, 2): (3.0, "b")}


def test_empty_or_missing_events() -> None:
    cursor = primed(10)
    assert cursor.take({"lastIndex": 10}, SETS) is False
    assert cursor.take({"events": None, "lastIndex": 11, "truncated": False}, SETS) is False
    assert cursor.after == 11
    assert cursor.commits == {}


def test_truncated_is_a_gap() -> None:
    cursor = primed(10)
    assert cursor.take(feed([elect_event(50)], 50, truncated=True), SETS) is True
    assert cursor.after == 50
    # the events that did arrive are still recorded
    assert (S0, 2) in cursor.commits


def test_truncated_priming_read_is_a_gap() -> None:
    cursor = FeedCursor()
    assert cursor.take(feed([], 30, truncated=True), SETS) is True
    assert cursor.primed and cursor.after == 30


def test_last_index_going_backwards_is_a_gap() -> None:
    cursor = primed(100)
    assert cursor.take(feed([], 40), SETS) is True
    assert cursor.after == 40
    assert cursor.take(feed([], 40), SETS) is False  # steady again


def test_same_or_higher_last_index_is_no_gap() -> None:
    cursor = primed(100)
    assert cursor.take(feed([], 100), SETS) is False
    assert cursor.take(feed([elect_event(101)], 101), SETS) is False
    assert cursor.after == 101


def test_missing_last_index_keeps_the_cursor() -> None:
    cursor = primed(100)
    # lastIndex absent reads as 0 < 100: reported as a gap, but the cursor does not move back to 0
    assert cursor.take({"events": []}, SETS) is True
    assert cursor.after == 100


def test_a_full_page_does_not_skip_the_rest_of_the_feed() -> None:
    cursor = primed(0)
    page = [{"index": i, "type": "ALTER_SYNC_STATE_SET", "brokerName": S0} for i in range(1, 1001)]
    gap = cursor.take(feed(page, 1500), SETS)
    # either the next poll continues after index 1000, or the skipped range is reported as a gap
    assert gap or cursor.after == 1000


# ---- merged_entries -----------------------------------------------------------------------------


def view(sts: str, master: int | None, *, epoch: int = 4) -> SetView:
    members = tuple(Member(f"{sts}-{i}", i + 1, True, i != 2) for i in range(3))
    return SetView(
        name=sts,
        master_pod=None if master is None else f"{sts}-{master}",
        master_broker_id=None if master is None else master + 1,
        master_epoch=epoch,
        sync_state_set_epoch=6,
        members=members,
    )


OLD_S0: dict[str, Any] = {
    "name": S0,
    "masterPod": f"{S0}-2",
    "masterBrokerId": 3,
    "masterEpoch": 3,
    "syncStateSet": [f"{S0}-2"],
    "syncStateSetEpoch": 5,
    "replicas": [{"pod": f"{S0}-2"}],
    "desiredReplicas": 3,
    "holdsData": True,
    "lastElection": {"request": f"{S0}-2", "result": "Elected"},
}


def test_merged_entries_replaces_owned_fields_and_keeps_the_others() -> None:
    v = view(S0, 1)
    (entry,) = merged_entries({"brokerSets": [OLD_S0]}, [S0], {S0: v})
    assert entry == {
        "name": S0,
        "desiredReplicas": 3,
        "holdsData": True,
        "lastElection": {"request": f"{S0}-2", "result": "Elected"},
        **follow.set_status(v),
    }


def test_merged_entries_drops_owned_fields_the_view_no_longer_has() -> None:
    (entry,) = merged_entries({"brokerSets": [OLD_S0]}, [S0], {S0: view(S0, None)})
    assert "masterPod" not in entry and "masterBrokerId" not in entry
    assert entry["masterEpoch"] == 4
    assert entry["desiredReplicas"] == 3


def test_merged_entries_set_without_view_keeps_old_fields() -> None:
    entries = merged_entries({"brokerSets": [OLD_S0]}, [S0], {})
    assert entries == [OLD_S0]
    assert entries[0] is not OLD_S0  # a copy: the previous status is not mutated


def test_merged_entries_new_set_without_view_or_entry() -> None:
    assert merged_entries({}, [S0, S1], {}) == [{"name": S0}, {"name": S1}]
    assert merged_entries({"brokerSets": None}, [S0], {}) == [{"name": S0}]


def test_merged_entries_new_set_with_view() -> None:
    v = view(S1, 0)
    assert merged_entries({}, [S1], {S1: v}) == [{"name": S1, **follow.set_status(v)}]


def test_merged_entries_keeps_sets_outside_the_spec_after_the_spec_sets() -> None:
    removed = {"name": "bg-broker-2", "masterPod": "bg-broker-2-0", "holdsData": True}
    previous = {"brokerSets": [removed, OLD_S0]}
    v0, v1 = view(S0, 0), view(S1, 1)
    entries = merged_entries(previous, [S0, S1], {S0: v0, S1: v1, "bg-broker-2": view("bg-broker-2", 1)})
    assert [e["name"] for e in entries] == [S0, S1, "bg-broker-2"]
    assert entries[2] == removed  # untouched even though a view for it was passed
    assert entries[1] == {"name": S1, **follow.set_status(v1)}


def test_merged_entries_does_not_mutate_previous() -> None:
    previous = {"brokerSets": [dict(OLD_S0)]}
    merged_entries(previous, [S0], {S0: view(S0, 0)})
    assert previous == {"brokerSets": [OLD_S0]}


def test_owned_fields_are_exactly_what_set_status_writes() -> None:
    assert set(follow.set_status(view(S0, 0))) == set(OWNED)


# ---- transitions --------------------------------------------------------------------------------


def entry(master: str | None, epoch: int = 1, *, sss: list[str] | None = None, broker_id: int = 1) -> dict[str, Any]:
    out: dict[str, Any] = {"masterEpoch": epoch, "masterBrokerId": broker_id, "syncStateSetEpoch": 2}
    if master is not None:
        out["masterPod"] = master
    if sss is not None:
        out["syncStateSet"] = sss
    return out


def reasons(events: list[Event]) -> list[str]:
    return [e.reason for e in events]


def test_first_election_is_master_elected() -> None:
    (event,) = transitions(S0, {}, entry("p0", 1, sss=["p0"]))
    assert event.reason == "MasterElected"
    assert event.type == "Normal"
    assert event.action == "FollowController"
    assert event.note == f"{S0}: p0 is master (broker 1, epoch 1)"


def test_new_master_is_master_elected_naming_the_old_one() -> None:
    events = transitions(S0, entry("p0", 1), entry("p1", 2, broker_id=2))
    assert reasons(events) == ["MasterElected"]
    assert events[0].note == f"{S0}: p1 is master (broker 2, epoch 2), was p0"


def test_same_master_is_quiet_even_at_a_new_epoch() -> None:
    assert transitions(S0, entry("p0", 1), entry("p0", 1)) == []
    assert transitions(S0, entry("p0", 1), entry("p0", 2)) == []


def test_master_lost() -> None:
    events = transitions(S0, entry("p0", 1), entry(None, 2))
    assert reasons(events) == ["MasterLost"]
    assert events[0].type == "Warning"
    assert "p0" in events[0].note


def test_no_master_before_and_after_is_quiet() -> None:
    assert transitions(S0, {}, entry(None)) == []
    assert transitions(S0, entry(None), entry(None, 3)) == []


def test_sync_state_set_changed_only_when_the_previous_entry_had_one() -> None:
    assert transitions(S0, entry("p0"), entry("p0", sss=["p0", "p1"])) == []
    assert reasons(transitions(S0, {}, entry("p0", sss=["p0"]))) == ["MasterElected"]
    events = transitions(S0, entry("p0", sss=["p0"]), entry("p0", sss=["p0", "p1"]))
    assert reasons(events) == ["SyncStateSetChanged"]
    assert events[0].note == f"{S0}: sync-state-set ['p0'] -> ['p0', 'p1'] (epoch 2)"
    assert events[0].type == "Normal"


def test_empty_previous_sync_state_set_counts_as_present() -> None:
    events = transitions(S0, entry("p0", sss=[]), entry("p0", sss=["p0"]))
    assert reasons(events) == ["SyncStateSetChanged"]


def test_unchanged_sync_state_set_is_quiet() -> None:
    assert transitions(S0, entry("p0", sss=["p0", "p1"]), entry("p0", 2, sss=["p0", "p1"])) == []


def test_master_change_and_sync_state_set_change_together() -> None:
    events = transitions(S0, entry("p0", 1, sss=["p0", "p1"]), entry("p1", 2, sss=["p1"]))
    assert reasons(events) == ["MasterElected", "SyncStateSetChanged"]


def test_master_lost_and_sync_state_set_change_together() -> None:
    events = transitions(S0, entry("p0", 1, sss=["p0", "p1"]), entry(None, 2, sss=[]))
    assert reasons(events) == ["MasterLost", "SyncStateSetChanged"]


def test_transitions_from_set_status_entries() -> None:
    old = follow.set_status(view(S0, 0, epoch=1))
    new = follow.set_status(view(S0, 1, epoch=2))
    events = transitions(S0, old, new)
    assert reasons(events) == ["MasterElected"]  # same sync-state-set members
    assert events[0].note == f"{S0}: {S0}-1 is master (broker 2, epoch 2), was {S0}-0"


def test_forget_drops_the_projected_commits_of_one_set_only() -> None:
    cursor = primed()
    cursor.take(
        feed([elect_event(11, epoch=2), elect_event(12, epoch=3), elect_event(13, sts="bg-broker-1")], 13),
        {S0, "bg-broker-1"},
    )
    cursor.forget(S0, through_epoch=2)
    assert sorted(cursor.commits) == [(S0, 3), ("bg-broker-1", 2)]
    cursor.forget(S0, through_epoch=3)
    assert sorted(cursor.commits) == [("bg-broker-1", 2)]


def test_commits_caught_up_on_are_marked_until_seen_live_or_forgotten() -> None:
    cursor = primed(10)
    cursor.take(feed([elect_event(11, epoch=3), elect_event(12, sts=S1, epoch=4)], 12), SETS, live=False)
    assert cursor.caught_up == {(S0, 3), (S1, 4)}
    cursor.take(feed([elect_event(13, epoch=3)], 13), SETS)  # the same commit seen live
    assert cursor.caught_up == {(S1, 4)}
    cursor.forget(S1, through_epoch=4)
    assert cursor.caught_up == set() and set(cursor.commits) == {(S0, 3)}
