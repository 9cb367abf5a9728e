"""The whole job through `brokergroup audit`: generated logs with every plant, audited with
`--fail-on-violations`. The audit finds exactly the planted anomalies, Spark and the plain-Python
cross-check agree, every output is written, and the run leaves no blocks in the session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from audit_factories import persistent_rdds
from pyspark.sql import SparkSession

from brokergroup import cli
from brokergroup.spark import contract, invariants, simulate, transform
from brokergroup.spark.generate import GenerateConfig, generate

Audited = tuple[Path, int, list[dict[str, object]], int]
"""The output folder, the exit code, the planted anomalies, and how many more persistent RDDs the
session holds after the run than before it."""


@pytest.fixture(scope="module")
def audited(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Audited:
    base = tmp_path_factory.mktemp("audit-job")
    planted = generate(GenerateConfig(out=base / "logs", sets=4, days=2.0, seed=7, plants=simulate.PLANTS)).planted
    before = persistent_rdds(spark)
    code = cli.main(["audit", str(base / "logs"), "--out", str(base / "out"), "--fail-on-violations"])
    return base / "out", code, planted, persistent_rdds(spark) - before


def test_exactly_the_planted_anomalies_are_found(spark: SparkSession, audited: Audited) -> None:
    out, code, planted, _ = audited
    found = [r.asDict() for r in spark.read.parquet(str(out / "tables" / "findings")).collect()]
    assert sorted(invariants.finding_key(f) for f in found) == sorted(invariants.finding_key(p) for p in planted)
    assert {f["kind"]: f["severity"] for f in found} == {
        "unclean_election": "violation",
        "split_brain": "violation",
        "index_gap": "warning",
        "long_risk_window": "warning",
    }
    assert code == 1  # violations, and --fail-on-violations


def test_the_summary_and_the_cross_check(audited: Audited) -> None:
    out, _, _, _ = audited
    summary = json.loads((out / "summary.json").read_text())
    assert summary["crossCheck"]["status"] == "agree"
    assert summary["crossCheck"]["findings"] == 4
    assert summary["findings"] == {
        "violations": 2,
        "warnings": 2,
        "byKind": {"index_gap": 1, "long_risk_window": 1, "split_brain": 1, "unclean_election": 1},
    }
    inputs = summary["input"]
    assert (inputs["corrupt"], inputs["invalid"], inputs["conflicting"], inputs["sets"]) == (0, 0, 0, 4)
    assert inputs["lines"] > inputs["events"] > 0
    assert summary["elections"]["unclean"] == {"controller": 1, "derived": 1, "unknown": 0, "mismatches": 0}
    assert summary["riskWindows"]["long"] == 1
    assert summary["incidents"]["recovered"] == summary["incidents"]["total"] > 0
    assert set(summary["incidents"]["perCause"]) == {"channel_closed", "heartbeat_timeout"}
    assert summary["controller"]["leaderChanges"] > 0
    assert summary["completeness"]["indexGaps"] == {"gaps": 1, "missing": 1}


def test_every_table_and_the_report_are_written(spark: SparkSession, audited: Audited) -> None:
    out, _, _, _ = audited
    assert sorted(p.name for p in (out / "tables").iterdir()) == sorted(transform.TABLES)
    findings = spark.read.parquet(str(out / "tables" / "findings"))
    assert findings.columns == list(contract.FINDING_COLUMNS)
    page = (out / "report.html").read_text()
    assert all(
        f'src="{png}"' in page and (out / png).stat().st_size > 1000
        for png in ("mttr.png", "elections.png", "risk-windows.png")
    )
    assert "split_brain" in page


def test_the_run_releases_every_frame_it_kept(audited: Audited) -> None:
    # The lines, the timeline and the eleven tables are kept (checkpoint.keep) during the run; none after it.
    *_, left = audited
    assert left == 0
