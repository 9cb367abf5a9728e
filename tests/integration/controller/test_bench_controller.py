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
        *("--baseline-tree", str(REPO), "--rounds", "1", "--ab-sets", "2", "--out", str(out)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [r["sets"] for r in result["by_sets"]] == [1, 3]
    for each in result["by_sets"]:
        assert each["agreement"]["agreed"], each["agreement"]
        assert each["alter_sync_state_set"]["ops"] == 40 and each["heartbeat"]["cpu_ms_per_op"] > 0
        assert each["snapshot"]["bytes"] > 0 and each["snapshot"]["serialize_ms"] > 0
    assert result["baseline"]["pysyncobj_replicated_counter"]["cpu_ms_per_op"] > 0
    assert result["ab"]["sets"] == 2
    table = done.stdout[done.stdout.index("| sets | operation") :]
    assert "| 3 | alter-sync-state-set | 40 |" in table and "**baseline**: raw pysyncobj counter" in table
    run = result["results"]
    assert run["agreement"]["agreed"], run["agreement"]
    assert {n["node_id"] for n in run["agreement"]["nodes"]} == {"n0", "n1", "n2"}
    assert len({n["digest"] for n in run["agreement"]["nodes"]}) == 1
    assert run["divergence_warnings"] == 0
    assert run["alter_sync_state_set"]["ops"] == 40 and run["alter_sync_state_set"]["cpu_ms_per_op"] > 0
    assert [r["side"] for r in result["ab"]["rounds"]] == ["baseline", "current"]
    assert all(r["agreement"]["agreed"] and r["ops"] == 40 for r in result["ab"]["rounds"])
    assert result["machine"]["fdatasync_4k"]["p50_ms"] > 0


def test_bench_controller_refuses_a_tree_without_brokergroup(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "brokergroup.cli", "bench", "controller", "--baseline-tree", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert f"--baseline-tree {tmp_path}: no brokergroup/cli.py there" in done.stderr


def test_bench_controller_refuses_bad_set_counts() -> None:
    for value, problem in (("8,x", "is not a ','-separated list of whole numbers"), ("8,0", "at least 1")):
        command = [sys.executable, "-m", "brokergroup.cli", "bench", "controller", "--sets", value]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2
        assert f"--sets: '{value}'" in done.stderr and problem in done.stderr, done.stderr
