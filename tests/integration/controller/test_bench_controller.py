"""`brokergroup bench controller` compares the nodes' states and counts divergence warnings.

Runs the command the benchmarks doc records (smaller), with the A/B against a source tree: here
the repository itself, so both sides run the same code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parents[3]


def test_bench_controller_checks_agreement_and_divergence(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    command = [
        *(sys.executable, "-m", "brokergroup.cli", "bench", "controller"),
        *("--ops", "40", "--concurrency", "2", "--sets", "1,3", "--failovers", "1"),
        *("--baseline-tree", str(REPO), "--rounds", "1", "--ab-sets", "2", "--counter-rounds", "2"),
        *("--out", str(out)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [r["sets"] for r in result["by_sets"]] == [1, 3]
    for each in result["by_sets"]:
        assert each["agreement"]["agreed"], each["agreement"]
        assert each["alter_sync_state_set"]["ops"] == 40 and each["heartbeat"]["ops"] == 40
        # 40 heartbeats take about 16 ms on a fast machine, under one 10 ms clock tick: the CPU is read in nanoseconds
        assert each["heartbeat"]["cpu_ms_per_op"] > 0
        assert each["replica_info"]["ops"] == 40 and each["replica_info"]["cpu_ms_per_op"] > 0
        assert each["replica_info_then_alter"]["ops"] == 40 and each["alter_sync_state_set"]["refusals"] == 0
        assert each["snapshot"]["bytes"] > 0 and each["snapshot"]["serialize_ms"] > 0
        assert set(each["snapshot"]["tick_stall_ms"]) == {"tick_thread", "background"}
    assert result["baseline"]["pysyncobj_replicated_counter"]["cpu_ms_per_op"] > 0
    durable = result["baseline"]["pysyncobj_replicated_counter_durable_journal"]
    assert durable["ops"] == 40 and durable["cpu_ms_per_op"] > 0, durable
    assert result["ab"]["sets"] == 2
    table = done.stdout[done.stdout.index("| sets | operation") :]
    assert "| 3 | alter-sync-state-set (write alone, epochs of the last answer) | 40 |" in table
    assert "| 3 | replica-info (read alone) | 40 |" in table
    assert "| 3 | replica-info then alter (read before every write) | 40 |" in table
    assert "**baseline**: raw pysyncobj counter" in table
    assert "**baseline**: the same counter, log in the controller's durable journal (fsync per entry) | 40 |" in table
    run = result["results"]
    assert run["agreement"]["agreed"], run["agreement"]
    assert {n["node_id"] for n in run["agreement"]["nodes"]} == {"n0", "n1", "n2"}
    assert len({n["digest"] for n in run["agreement"]["nodes"]}) == 1
    assert run["divergence_warnings"] == 0
    assert run["alter_sync_state_set"]["ops"] == 40 and run["alter_sync_state_set"]["cpu_ms_per_op"] > 0
    assert [r["side"] for r in result["ab"]["rounds"]] == ["baseline", "current"]
    assert all(r["agreement"]["agreed"] and r["ops"] == 40 for r in result["ab"]["rounds"])
    assert result["machine"]["fdatasync_4k"]["p50_ms"] > 0
    versus = result["versus_counter"]
    assert versus["sets"] == 2 and len(versus["rounds"]) == 2 and versus["divergence_warnings"] == 0
    for pair in versus["rounds"]:
        assert pair["alter"]["ops"] == 40 and pair["alter"]["agreement"]["agreed"], pair["alter"]
        assert pair["counter"]["ops"] == 40 and pair["counter"]["ops_per_s"] > 0, pair["counter"]
        assert pair["alter_over_counter"] == round(pair["alter"]["ops_per_s"] / pair["counter"]["ops_per_s"], 3)
    ratios = sorted(pair["alter_over_counter"] for pair in versus["rounds"])
    assert versus["alter_over_counter_median"] == round(sum(ratios) / 2, 3)
    assert versus["alter_over_counter_range"] == ratios
    assert f"median {versus['alter_over_counter_median']}x" in done.stdout


def test_bench_controller_refuses_a_tree_without_brokergroup(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "brokergroup.cli", "bench", "controller", "--baseline-tree", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert f"--baseline-tree {tmp_path}: no brokergroup/cli.py there" in done.stderr


def test_bench_controller_refuses_negative_counter_rounds() -> None:
    command = [sys.executable, "-m", "brokergroup.cli", "bench", "controller", "--counter-rounds", "-1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--counter-rounds must be at least 0" in done.stderr


def test_bench_controller_refuses_bad_set_counts() -> None:
    for value, problem in (("8,x", "is not a ','-separated list of whole numbers"), ("8,0", "at least 1")):
        command = [sys.executable, "-m", "brokergroup.cli", "bench", "controller", "--sets", value]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2
        assert f"--sets: '{value}'" in done.stderr and problem in done.stderr, done.stderr


def test_bench_controller_snapshot_only_measures_the_tick_threads_pause(tmp_path: Path) -> None:
    out = tmp_path / "snap.json"
    command = [
        *(sys.executable, "-m", "brokergroup.cli", "bench", "controller"),
        *("--snapshot-only", "--sets", "8,2000", "--out", str(out)),  # docs/benchmarks.md, issue 19
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [r["sets"] for r in result["snapshot"]] == [8, 2000]
    small, large = result["snapshot"]
    assert large["bytes"] > 20 * small["bytes"]
    for each in (small, large):
        assert each["tick_stall_ms"]["tick_thread"] >= 0 and each["tick_stall_ms"]["background"] >= 0
        assert each["background_done_ms"] > 0 and each["start_call_ms"] > 0


def test_bench_controller_heartbeat_load_holds_the_interval_and_times_a_failover(tmp_path: Path) -> None:
    """Every broker heartbeats every node at the default 1 s interval from one generator process; the
    master of the first set stops and another is elected within heartbeat timeout + expiry scan."""
    out = tmp_path / "hb.json"
    command = [
        *(sys.executable, "-m", "brokergroup.cli", "bench", "controller"),
        *("--ops", "20", "--concurrency", "2", "--sets", "4", "--failovers", "1"),
        *("--heartbeat-load-s", "30", "--heartbeat-streams", "4", "--out", str(out)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    load = json.loads(out.read_text())["by_sets"][0]["heartbeat_load"]
    assert load["target_per_s"] == 4 * 3 * 3
    assert load["generator"]["streams"] == 3 * 4 and load["generator"]["refusals"] == 0
    assert load["generator"]["streams_closed_by_controller"] == 0
    # every heartbeat sent was counted by a controller (the farewell round and set-up beats come on top)
    assert load["received"] >= load["generator"]["sent"] > 0.8 * load["target_per_s"] * 30
    assert load["controllers_cpu_s"] > 0
    for scans in load["expiry_scan_lateness"].values():
        assert scans["scans"] >= 4, scans
    failover = load["failover"]
    assert failover["from_last_heartbeat_s"] is not None, failover
    assert 10.0 <= failover["from_last_heartbeat_s"] <= failover["bound_s"] + 10.0, failover
