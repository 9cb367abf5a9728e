"""Plain-Python invariants: single-replica risk windows and flapping brokers."""

from __future__ import annotations

from audit_factories import T0, Scenario

from brokergroup.spark import invariants
from brokergroup.spark.params import AuditParams


def windows(s: Scenario, **params: object) -> list[tuple[object, ...]]:
    """(start s, duration s, open, smallest size) of every risk window."""
    events, _ = invariants.dedupe(s.records)
    found = invariants.risk_windows(events, AuditParams(**params))  # type: ignore[arg-type]
    return [((w["ts"] - T0) / 1000, w["durationMs"] / 1000, w["open"], w["minSize"]) for w in found]


def failover(s: Scenario, at_s: int, *, new: int, other: int, old: int, back_s: int) -> None:
    """The master dies at `at_s`; `new` is elected; `other` back in sync after 15 s, `old` after `back_s`."""
    s.at(at_s * 1000).lost("s", old)
    s.elect("s", new, reason="channel_closed")
    s.at((at_s + 15) * 1000).alter("s", [new, other])
    s.at((at_s + back_s) * 1000).alter("s", [1, 2, 3])


def test_a_master_alone_in_its_sync_state_set_is_a_risk_window() -> None:
    s = Scenario().running_set()  # broker 1 alone from 0 s to 1 s
    failover(s, 100, new=2, other=3, old=1, back_s=200)
    assert windows(s) == [(0.0, 1.0, False, 1), (100.0, 15.0, False, 1)]


def test_min_in_sync_replicas_raises_the_threshold() -> None:
    s = Scenario().running_set()
    failover(s, 100, new=2, other=3, old=1, back_s=200)
    assert windows(s, min_in_sync_replicas=3) == [(0.0, 1.0, False, 1), (100.0, 200.0, False, 1)]


def test_a_window_open_at_the_end_of_the_log_lasts_until_the_last_event() -> None:
    s = Scenario().running_set()
    s.at(50_000).alter("s", [1])
    s.at(80_000).lost("s", 3)  # a later local event: the log goes on until here
    assert windows(s)[-1] == (50.0, 30.0, True, 1)


def test_a_set_without_master_is_an_outage_not_a_risk_window() -> None:
    s = Scenario().running_set()
    s.at(50_000).alter("s", [1])
    s.at(60_000).no_master("s")
    s.at(90_000).elect("s", 1)
    s.at(95_000).alter("s", [1, 2])
    assert windows(s) == [(0.0, 1.0, False, 1), (50.0, 10.0, False, 1), (90.0, 5.0, False, 1)]


def test_long_risk_window_from_the_limit_on() -> None:
    s = Scenario().running_set()
    opened = s.at(10_000).alter("s", [1])
    closes = s.at(610_000).alter("s", [1, 2])  # exactly 600 s
    s.at(700_000).alter("s", [1])
    s.at(1_299_999).alter("s", [1, 2, 3])  # 1 ms short
    found = invariants.audit_findings(s.records, AuditParams())
    assert [(f["kind"], f["brokerId"], f["index"], f["ts"], f["value"]) for f in found] == [
        ("long_risk_window", 1, opened["index"], T0 + 10_000, 600_000)
    ]
    assert closes["index"] == opened["index"] + 1


def flaps(s: Scenario, broker: int, seconds: list[int], kinds: str) -> None:
    """Liveness records of one broker: L lost (channel closed), H lost (heartbeat), A active."""
    names = {"L": "CHANNEL_CLOSED", "H": "HEARTBEAT_LOST", "A": "BROKER_ACTIVE"}
    for second, kind in zip(seconds, kinds, strict=True):
        s.at(second * 1000)
        if kind == "A":
            s.active("s", broker)
        else:
            s.lost("s", broker, names[kind])


def test_six_transitions_within_ten_minutes_is_flapping_and_repeats_do_not_count() -> None:
    s = Scenario().running_set()
    flaps(s, 2, [100, 110, 200, 220, 300, 400, 700], "LHALALA")  # H repeats L: 6 transitions
    flaps(s, 3, [100, 200, 300, 400, 500, 701], "LALALA")  # the 6th is 601 s after the 1st
    found = invariants.audit_findings(s.records, AuditParams())
    assert [(f["kind"], f["brokerId"], f["ts"], f["value"]) for f in found] == [("flapping_broker", 2, T0 + 700_000, 6)]


def test_the_flapping_window_includes_both_ends() -> None:
    s = Scenario().running_set()
    flaps(s, 3, [100, 200, 300, 400, 500, 700], "LALALA")
    found = invariants.audit_findings(s.records, AuditParams())
    assert [(f["brokerId"], f["ts"], f["value"]) for f in found] == [(3, T0 + 700_000, 6)]
