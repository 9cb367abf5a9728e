"""`brokergroup bench rocketmq`'s pure part: reading both benchmarks' JSON, medians, ratios and issue 17's goals."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from brokergroup.bench import rocketmq
from brokergroup.bench.rocketmq import HarnessError, Side


def rmq_doc(single: float = 1000.0, batched: float = 10000.0, p99: float = 30.0) -> dict[str, Any]:
    """The shape `rmq_anchor.py produce` prints (fields it has; others omitted)."""

    def phase(rate: float, p99_ms: float) -> dict[str, Any]:
        pct = {"namesrv": 5.0, "controller-0": 10.0, "broker-0": 60.0, "client": 25.0, "otherProcesses": 12.5}
        return {"msgsPerS": rate, "p50Ms": 3.0, "p99Ms": p99_ms, "maxMs": 90.0, "cpuPctOfOneCore": pct}

    return {"benchmark": "rocketmq produce", "phases": {"single": phase(single, p99), "batched": phase(batched, 80.0)}}


def bg_doc(single: float = 2500.0, batched: float = 13000.0, p99: float = 20.0, cpu: float = 0.5) -> dict[str, Any]:
    def phase(rate: float, p99_ms: float, cpu_ms: float) -> dict[str, Any]:
        return {
            "msgs_per_s": rate,
            "p50_ms": 4.0,
            "p99_ms": p99_ms,
            "cpu_ms_per_message": cpu_ms,
            "cpu_percent_of_one_core": {"total": 150.0, "other processes": 3.0, "stolen by the hypervisor": 1.5},
        }

    return {"results": {"sync": {"single": phase(single, p99, cpu), "batched": phase(batched, 60.0, 0.1)}}}


def test_rocketmqs_cpu_per_message_sums_every_process_but_the_others() -> None:
    side = rocketmq.rocketmq_side(rmq_doc(single=1000.0))
    # 100 % of one core (5 + 10 + 60 + 25) at 1000 msgs/s: 1 ms per message; otherProcesses is not ours
    assert side.single_cpu_ms == 1.0
    assert side.batched_cpu_ms == 0.1
    assert (side.single_msgs_per_s, side.single_p99_ms, side.other_percent) == (1000.0, 30.0, 12.5)


def test_brokergroups_side_reads_the_sync_phases() -> None:
    side = rocketmq.brokergroup_side(bg_doc())
    assert side == Side(2500.0, 4.0, 20.0, 0.5, 13000.0, 0.1, 4.5)  # other processes + steal, as RocketMQ's side


def test_ratios_and_goals_are_judged_on_the_medians_of_the_rounds() -> None:
    rmq = [rocketmq.rocketmq_side(rmq_doc(single=s)) for s in (1000.0, 1200.0, 800.0)]
    ours = [rocketmq.brokergroup_side(bg_doc(single=s)) for s in (2500.0, 1500.0, 2000.0)]
    summary = rocketmq.compare(rmq, ours)
    assert summary["rocketmq"]["single_msgs_per_s"] == 1000.0
    assert summary["brokergroup"]["single_msgs_per_s"] == 2000.0
    assert summary["ratio_brokergroup_over_rocketmq"]["single_msgs_per_s"] == 2.0
    goals = summary["goals"]
    assert goals["single_msgs_per_s"]["met"] is True  # exactly 2x meets "at least 2x"
    assert goals["single_p99_ms"] == {"goal": "p99 below RocketMQ's", "ratio": 0.667, "met": True}
    assert goals["batched_msgs_per_s"]["ratio"] == 1.3 and goals["batched_msgs_per_s"]["met"] is True
    assert goals["single_cpu_ms"]["value"] == 0.5 and goals["single_cpu_ms"]["met"] is False
    text = rocketmq.markdown(summary)
    assert "| single_msgs_per_s | 1000.0 | 2000.0 | 2.0 |" in text
    assert "CPU per single sync message at most 0.4 ms (single_cpu_ms): NOT met" in text


def test_goals_not_met_below_the_thresholds() -> None:
    summary = rocketmq.compare(
        [rocketmq.rocketmq_side(rmq_doc())], [rocketmq.brokergroup_side(bg_doc(1999.0, 11999.0, 30.0))]
    )
    assert [summary["goals"][g]["met"] for g in ("single_msgs_per_s", "single_p99_ms", "batched_msgs_per_s")] == [
        False,
        False,
        False,
    ]


@pytest.mark.parametrize(
    ("doc", "reader", "words"),
    [
        ({}, rocketmq.rocketmq_side, "no 'phases'"),
        ({"phases": {"single": {}}}, rocketmq.rocketmq_side, "no 'phases'"),
        ({"phases": {"single": {"msgsPerS": "fast"}, "batched": {}}}, rocketmq.rocketmq_side, "'msgsPerS' is missing"),
        ({"results": {}}, rocketmq.brokergroup_side, "no 'results.sync'"),
        (
            {"results": {"sync": {"single": {"msgs_per_s": True}, "batched": {}}}},
            rocketmq.brokergroup_side,
            "'msgs_per_s'",
        ),
    ],
)
def test_a_result_without_its_fields_is_refused_naming_what_is_missing(doc: Any, reader: Any, words: str) -> None:
    with pytest.raises(HarnessError, match=words):
        reader(doc)


def test_nothing_to_compare_is_an_error() -> None:
    with pytest.raises(HarnessError, match="no complete round"):
        rocketmq.compare([], [])


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("rounds", 0, "--rounds"),
        ("messages", 10, "--messages"),
        ("size", 0, "--size"),
        ("batch", 5000, "--batch"),
        ("concurrency", 0, "--concurrency"),
    ],
)
def test_bad_flags_are_refused_by_name(flag: str, value: int, words: str) -> None:
    args = argparse.Namespace(rounds=2, messages=60000, size=1024, batch=32, concurrency=8)
    setattr(args, flag, value)
    problem = rocketmq.validate(args)
    assert problem is not None and problem.startswith(words)


def test_a_folder_that_is_not_the_harness_is_refused(tmp_path: Any) -> None:
    (tmp_path / "pom.xml").write_text("<project/>")
    with pytest.raises(HarnessError, match=r"missing rmq_anchor\.py, AnchorBench\.java"):
        rocketmq.check_harness(tmp_path)
