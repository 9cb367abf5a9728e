"""The audit job: extract, transform, load, and the exit code.

`run(spark, settings)` is the whole job on a session; `execute` adds finding the files and
making (and stopping) the session; `main` is the `spark-submit` entry point:

    spark-submit --master k8s://https://<apiserver> --deploy-mode cluster ... \\
        local:///usr/local/lib/python3.11/site-packages/brokergroup/spark/job.py /data/events --out /data/audit

Exit codes: 0 done; 1 `--fail-on-violations` and an invariant is broken; 2 bad input
(the message names the path); 3 the plain-Python cross-check disagrees with Spark.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from brokergroup.spark import extract, invariants, load, report, session, transform
from brokergroup.spark.params import AuditParams
from brokergroup.spark.transform import prepare

OK, VIOLATIONS, BAD_INPUT, CROSS_CHECK_FAILED = 0, 1, 2, 3


@dataclasses.dataclass(frozen=True)
class JobSettings:
    input: str
    """A folder of event logs (every *.jsonl below it), or a URI Spark can list."""
    out: Path
    """Where tables/, summary.json and report.html go (a local or mounted folder)."""
    params: AuditParams = dataclasses.field(default_factory=AuditParams)
    fail_on_violations: bool = False
    """Exit 1 when an invariant is broken; also cross-check Spark with the plain-Python invariants."""
    cross_check_limit: int = 500_000
    """Cross-check only inputs of at most this many lines (the Python side holds them in memory)."""
    report: bool = True


@dataclasses.dataclass(frozen=True)
class AuditResult:
    summary: dict[str, Any]
    exit_code: int
    tables: dict[str, DataFrame]
    """The output tables, read back from Parquet."""


def input_files(settings: JobSettings) -> list[Path] | None:
    """The local files to read (checked), or None for a URI; AuditInputError for bad input."""
    return None if extract.is_uri(settings.input) else extract.discover(Path(settings.input))


def run(
    spark: SparkSession, settings: JobSettings, files: list[Path] | None, console: Console | None = None
) -> AuditResult:
    started = time.monotonic()
    out = settings.out
    out.mkdir(parents=True, exist_ok=True)
    steps = 3 + len(transform.TABLES) + int(settings.report) + int(settings.fail_on_violations)
    columns = (SpinnerColumn(), TextColumn("{task.description:<40}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console, disable=console is None) as progress:
        task = progress.add_task("reading and deduplicating", total=steps)

        def done(next_step: str) -> None:
            progress.update(task, advance=1, description=next_step)

        raw = extract.read(spark, settings.input, files)
        grouped = prepare.group_lines(raw).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            stats = load.first(prepare.line_stats(grouped))
            if stats["events"] == 0:
                raise extract.AuditInputError(f"{settings.input}: no valid event-log records in {stats['lines']} lines")
            done("locating corrupt lines")
            corrupt_files = extract.corrupt_lines_by_file(raw) if stats["corrupt"] else []
            done("writing tables")
            events = prepare.events_of(grouped)

            def wrote(name: str) -> None:
                done(f"writing tables: {name} done")

            base = load.write_tables(transform.base_tables(events, settings.params), out / "tables", wrote)
            derived = transform.derived_tables(events, base, settings.params)
            written = base | load.write_tables(derived, out / "tables", wrote)
        finally:
            grouped.unpersist()
        summary = load.summarize(spark, written, stats=stats, params=settings.params, corrupt_files=corrupt_files)
        done("writing the report")
        if settings.report:
            report.write(out, summary, written, long_s=settings.params.long_risk_window_s)
            done("cross-checking with plain Python")
        code = VIOLATIONS if settings.fail_on_violations and summary["findings"]["violations"] else OK
        if settings.fail_on_violations:
            summary["crossCheck"] = cross_check(written["findings"], files, stats["lines"], settings)
            if summary["crossCheck"]["status"] == "disagree":
                code = CROSS_CHECK_FAILED
            done("done")
    summary["elapsedSeconds"] = round(time.monotonic() - started, 3)
    summary["outputs"] = {
        "tables": str(out / "tables"),
        "report": str(out / "report.html") if settings.report else None,
    }
    load.write_summary(out / "summary.json", summary)
    return AuditResult(summary, code, written)


def cross_check(findings: DataFrame, files: list[Path] | None, lines: int, settings: JobSettings) -> dict[str, Any]:
    """Recompute the findings with `invariants` from the files and compare the keys with Spark's."""
    if files is None:
        return {"status": "skipped", "why": "input is a URI"}
    if lines > settings.cross_check_limit:
        return {"status": "skipped", "why": f"{lines} lines > cross-check limit {settings.cross_check_limit}"}
    records, _ = extract.read_records(files)
    python = [invariants.finding_key(f) for f in invariants.audit_findings(records, settings.params)]
    spark_side = sorted(invariants.finding_key(r.asDict()) for r in findings.collect())
    only_spark = sorted(set(spark_side) - set(python))
    only_python = sorted(set(python) - set(spark_side))
    status = "agree" if sorted(python) == spark_side else "disagree"
    return {"status": status, "findings": len(spark_side), "onlySpark": only_spark[:10], "onlyPython": only_python[:10]}


def execute(
    settings: JobSettings, *, master: str | None, driver_memory: str | None, console: Console
) -> tuple[int, dict[str, Any] | None]:
    """Check the input, start (or reuse) a session, run, stop what was started."""
    try:
        files = input_files(settings)
    except extract.AuditInputError as exc:
        console.print(f"[red]brokergroup audit:[/] {exc}")
        return BAD_INPUT, None
    spark, created = session.build(master=master, driver_memory=driver_memory)
    try:
        result = run(spark, settings, files, console)
    except extract.AuditInputError as exc:
        console.print(f"[red]brokergroup audit:[/] {exc}")
        return BAD_INPUT, None
    finally:
        if created:
            spark.stop()
    return result.exit_code, result.summary


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry: the same arguments as `brokergroup audit DIR`, master from spark-submit."""
    from brokergroup.spark import cli

    return cli.run_audit(cli.standalone_parser().parse_args(argv), default_master=None)


if __name__ == "__main__":
    sys.exit(main())
