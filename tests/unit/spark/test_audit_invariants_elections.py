"""Plain-Python invariants: unclean elections re-derived, epoch gaps and regressions, split brain."""

from __future__ import annotations

from audit_factories import T0, Scenario

from brokergroup.spark import invariants
from brokergroup.spark.params import AuditParams


def findings(s: Scenario) -> list[tuple[object, ...]]:
    """(kind, set, brokerId, term, index, ts, value) of every finding."""
    found = invariants.audit_findings(s.records, AuditParams())
    return [(f["kind"], f["brokerName"], f["brokerId"], f["term"], f["index"], f["ts"], f["value"]) for f in found]


def test_clean_failover_has_no_finding_and_is_derived_clean() -> None:
    s = Scenario().running_set()
    s.at(10_000).lost("s", 1)
    s.elect("s", 2, reason="channel_closed")
    s.at(12_000).alter("s", [2, 3])
    events, _ = invariants.dedupe(s.records)
    verdicts = [(e["masterEpoch"], e["derivedUnclean"]) for e in invariants.elections(events)]
    assert verdicts == [(1, False), (2, False)]
    assert findings(s) == []


def test_master_outside_the_previous_sync_state_set_is_unclean_and_agrees_with_the_flag() -> None:
    s = Scenario().running_set()
    s.at(5_000).alter("s", [1])
    s.at(9_000).lost("s", 1)
    elected = s.elect("s", 2, reason="channel_closed", unclean=True)
    s.at(11_000).alter("s", [2, 3])
    assert findings(s) == [("unclean_election", "s", 2, 1, elected["index"], T0 + 9_000, 2)]


def test_a_wrong_controller_flag_is_a_mismatch_either_way() -> None:
    s = Scenario().running_set()
    flagged_clean = s.at(5_000).elect("s", 2, unclean=True)  # 2 was in [1, 2, 3]
    s.at(6_000).alter("s", [2])
    silent = s.at(7_000).elect("s", 3)  # 3 was not in [2]
    assert sorted(findings(s)) == [
        ("unclean_election", "s", 2, 1, flagged_clean["index"], T0 + 5_000, 2),
        ("unclean_election", "s", 3, 1, silent["index"], T0 + 7_000, 3),
        ("unclean_flag_mismatch", "s", 2, 1, flagged_clean["index"], T0 + 5_000, 2),
        ("unclean_flag_mismatch", "s", 3, 1, silent["index"], T0 + 7_000, 3),
    ]


def test_first_election_is_clean_and_a_log_starting_mid_history_is_unknown() -> None:
    s = Scenario().running_set()
    s.at(5_000).elect("s", 3)
    mid = [r for r in s.records if r["masterEpoch"] == 2]  # the log lost everything before
    events, _ = invariants.dedupe(mid)
    assert [e["derivedUnclean"] for e in invariants.elections(events)] == [None]
    first = [r for r in s.records if r["masterEpoch"] == 1 and r["type"] == "ELECT_MASTER"]
    events, _ = invariants.dedupe(first)
    assert [e["derivedUnclean"] for e in invariants.elections(events)] == [False]


def test_no_master_elected_is_never_unclean() -> None:
    s = Scenario().running_set()
    s.at(5_000).alter("s", [1])
    s.lost("s", 1)
    s.no_master("s")
    events, _ = invariants.dedupe(s.records)
    assert [e["derivedUnclean"] for e in invariants.elections(events)] == [False, False]
    assert findings(s) == []


def test_epoch_gap_at_an_election_and_at_a_record_after_a_missing_election() -> None:
    s = Scenario().running_set()
    jumped = s.at(5_000).elect("s", 2, epoch=4)
    s.at(6_000).alter("s", [2, 3])
    s.sets["s"]["epoch"] = 5  # an election the log lost
    after_missing = s.at(7_000).alter("s", [1, 2, 3])
    assert findings(s) == [
        ("epoch_gap", "s", None, 1, jumped["index"], T0 + 5_000, 4),
        ("epoch_gap", "s", None, 1, after_missing["index"], T0 + 7_000, 5),
    ]


def test_epoch_regression_at_an_election_and_at_another_record() -> None:
    s = Scenario().running_set()
    s.at(5_000).elect("s", 2)  # epoch 2
    s.at(6_000).alter("s", [2, 3])
    s.sets["s"].update(master=1, epoch=1)  # a stale record: broker 1's epoch again
    lower = s.at(7_000).alter("s", [1, 2, 3])
    repeated = s.at(8_000).elect("s", 1, epoch=1)  # the same master without a higher epoch
    assert findings(s) == [
        ("epoch_regression", "s", None, 1, lower["index"], T0 + 7_000, 1),
        ("epoch_regression", "s", None, 1, repeated["index"], T0 + 8_000, 1),
    ]


def test_two_masters_in_one_epoch_is_one_split_brain_and_not_also_a_regression() -> None:
    s = Scenario().running_set()  # broker 1 master in epoch 1
    second = s.at(5_000).elect("s", 2, epoch=1, reason="admin")
    s.at(6_000).alter("s", [1, 2, 3])
    s.at(7_000).elect("s", 3)  # epoch 2: fine again
    assert findings(s) == [("split_brain", "s", 2, 1, second["index"], T0 + 5_000, 1)]


def test_a_set_removed_and_registered_again_starts_its_epochs_afresh() -> None:
    s = Scenario().running_set()
    s.at(5_000).elect("s", 2)
    s.at(6_000).clean("s")
    s.at(7_000).register("s")
    s.elect("s", 3)  # epoch 1 again, another master: not a regression, not a split brain
    s.at(8_000).alter("s", [1, 2, 3])
    assert findings(s) == []
