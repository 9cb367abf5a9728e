"""`brokergroup audit --explain`: the run's Spark jobs, stages and shuffle bytes, from the status store
(docs/audit.md, "Performance", whose two commands run here as written); and `bench audit --lines`."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from brokergroup import cli
from brokergroup.spark import bench, explain

DOC = Path(__file__).resolve().parents[3] / "docs" / "audit.md"


def documented_lines() -> list[str]:
    block = re.search(r"```bash\n(brokergroup audit generate --out /tmp/audit-explain/.*?)```", DOC.read_text(), re.S)
    assert block is not None, "docs/audit.md lost its --explain example"
    return [line for line in block[1].splitlines() if line.strip()]


def test_the_documented_explain_commands_print_what_the_run_cost(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    generate, audit = documented_lines()
    out = Path(shlex.split(audit)[shlex.split(audit).index("--out") + 1])
    shutil.rmtree(out.parent, ignore_errors=True)
    assert cli.main(shlex.split(generate)[1:]) == 0
    capsys.readouterr()
    assert cli.main(shlex.split(audit)[1:]) == 0
    printed = capsys.readouterr().out
    stats = json.loads((out / "summary.json").read_text())["spark"]
    assert explain.line(stats) in printed.splitlines()
    assert stats["jobs"] > 0 and stats["stages"] > 0 and stats["tasks"] >= stats["stages"]
    assert stats["shuffleWriteBytes"] > 0  # the deduplication shuffles
    assert stats["inputBytes"] >= sum(p.stat().st_size for p in out.parent.joinpath("logs").rglob("*.jsonl"))


def test_only_the_jobs_of_the_group_are_counted(spark: SparkSession) -> None:
    spark.range(100).selectExpr("id % 7 AS k").groupBy("k").count().collect()  # outside: not counted
    with explain.tracked(spark.sparkContext) as group:
        spark.range(0, 1000, 1, 4).selectExpr("id % 3 AS k").groupBy("k").count().collect()
    stats = explain.RunStats.of(spark.sparkContext, group)
    assert (stats.jobs, stats.stages) == (1, 2)  # map side (4 partitions) and reduce side of one aggregation
    assert stats.shuffle_write_bytes > 0
    assert stats.shuffle_read_bytes == stats.shuffle_write_bytes
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None


@pytest.mark.parametrize(
    ("text", "counts"),
    [("10k,1M,10M", [10_000, 1_000_000, 10_000_000]), ("1000000, 2500", [1_000_000, 2_500]), ("1.5k", [1_500])],
)
def test_bench_line_counts_take_k_and_m(text: str, counts: list[int]) -> None:
    assert bench.line_counts(text) == counts


def test_a_bad_bench_line_count_is_named() -> None:
    with pytest.raises(ValueError, match="'10x' is not a line count"):
        bench.line_counts("10k,10x")
