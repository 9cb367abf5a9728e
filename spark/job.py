"""The audit job: extract, transform, load, and the exit code.

`run(spark, settings)` is the whole job on a session; `execute` adds finding the files and
making (and stopping) the session; `main` is the `spark-submit` entry point, called by the Spark
image's `/opt/brokergroup/audit.py` (spark/k8s/audit_driver.py; the command is in docs/audit.md).

Exit codes: 0 done; 1 `--fail-on-violations` and an invariant is broken; 2 bad input
(the message names the path); 3 the plain-Python cross-check disagrees with Spark.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from brokergroup.spark import checkpoint, contract, explain, extract, invariants, load, report, session, transform
from brokergroup.spark.options import add_arguments, pick
from brokergroup.spark.params import AuditParams
from brokergroup.spark.transform import completeness, prepare

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
    explain: bool = False
    """Count the run's Spark jobs, stages and shuffle bytes (`explain.RunStats`)."""


@dataclasses.dataclass(frozen=True)
class AuditResult:
    summary: dict[str, Any]
    exit_code: int
    tables: dict[str, Path]
    """Where each output table was written (Parquet)."""
    spark_stats: explain.RunStats | None = None
    """What the run cost Spark (`JobSettings.explain`)."""


def input_files(settings: JobSettings) -> list[Path] | None:
    """The local files to read (checked), or None for a URI; AuditInputError for bad input."""
    return None if extract.is_uri(settings.input) else extract.discover(Path(settings.input))


@contextlib.contextmanager
def progress_steps(console: Console | None, total: int) -> Iterator[Callable[[str], None]]:
    """A progress bar over `total` named steps; `step(name)` starts the next one. Off without a console."""
    columns = (SpinnerColumn(), TextColumn("{task.description:<36}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console, disable=console is None) as progress:
        task = progress.add_task("starting", total=total)
        first = True

        def step(name: str) -> None:
            nonlocal first
            progress.update(task, advance=0 if first else 1, description=name)
            first = False

        yield step
        progress.update(task, completed=total, description="done")


def run(
    spark: SparkSession, settings: JobSettings, files: list[Path] | None, console: Console | None = None
) -> AuditResult:
    started = time.monotonic()
    size = None if files is None else sum(p.stat().st_size for p in files)
    with session.sized_for(spark, size) as small, explain.tracked(spark.sparkContext) as group:
        summary, code = audit(spark, settings, files, console, small_input=small)
    stats = explain.RunStats.of(spark.sparkContext, group) if settings.explain else None
    if stats is not None:
        summary["spark"] = stats.as_json()
    summary["elapsedSeconds"] = round(time.monotonic() - started, 3)
    summary["outputs"] = {
        "tables": str(settings.out / "tables"),
        "report": str(settings.out / "report.html") if settings.report else None,
    }
    load.write_summary(settings.out / "summary.json", summary)
    return AuditResult(summary, code, {name: settings.out / "tables" / name for name in transform.TABLES}, stats)


def audit(
    spark: SparkSession,
    settings: JobSettings,
    files: list[Path] | None,
    console: Console | None,
    *,
    small_input: bool,
) -> tuple[dict[str, Any], int]:
    """The Spark part of `run`: (summary, exit code).

    The flat deduplicated lines and the sets' raft timeline are kept (`checkpoint.keep`: in memory
    for a small input, else on disk) until the last table that reads them is written; every table is
    kept as it is written (`load.write_tables`) until the summary, the report and the cross-check
    have used it."""
    out = settings.out
    out.mkdir(parents=True, exist_ok=True)
    total = 3 + len(transform.TABLES) + settings.report + settings.fail_on_violations
    written: dict[str, DataFrame] = {}
    with progress_steps(console, total) as step:
        try:
            step("reading and deduplicating")
            raw = extract.read(spark, settings.input, files)
            grouped = checkpoint.keep(prepare.group_lines(raw), small_input=small_input)
            try:
                stats = load.first(prepare.line_stats(grouped))
                if stats["events"] == 0:
                    raise extract.AuditInputError(
                        f"{settings.input}: no valid event-log records in {stats['lines']} lines"
                    )
                step("locating corrupt lines")
                corrupt_files = extract.corrupt_lines_by_file(raw) if stats["corrupt"] else []
                events = prepare.events_of(grouped)
                timeline = checkpoint.keep(prepare.raft_timeline(events), partitioned=True, small_input=small_input)
                positions = checkpoint.keep(completeness.positions(events), small_input=small_input)

                def writing(name: str) -> None:
                    step(f"table {name}")

                try:
                    base = transform.base_tables(events, timeline, settings.params, positions)
                    written |= load.write_tables(base, out / "tables", writing, small_input=small_input)
                    checkpoint.release([positions])  # the gap tables, which read it, are written
                    derived = transform.derived_tables(events, timeline, written, settings.params)
                    written |= load.write_tables(derived, out / "tables", writing, small_input=small_input)
                finally:
                    checkpoint.release([timeline, positions])
            finally:
                checkpoint.release([grouped])
            step("summary")
            values = load.summary_values(written)
            summary = load.summarize(spark, values, stats=stats, params=settings.params, corrupt_files=corrupt_files)
            if settings.report:
                step("report")
                report.write(
                    out,
                    summary,
                    written,
                    values["electionsByDay"]["rows"],
                    long_s=settings.params.long_risk_window_s,
                )
            code = VIOLATIONS if settings.fail_on_violations and summary["findings"]["violations"] else OK
            if settings.fail_on_violations:
                step("cross-check with plain Python")
                summary["crossCheck"] = cross_check(written["findings"], files, stats["lines"], settings)
                if summary["crossCheck"]["status"] == "disagree":
                    code = CROSS_CHECK_FAILED
        finally:
            checkpoint.release(written.values())
    return summary, code


def cross_check(findings: DataFrame, files: list[Path] | None, lines: int, settings: JobSettings) -> dict[str, Any]:
    """Recompute the findings with `invariants` from the files and compare the keys with Spark's."""
    if files is None:
        return {"status": "skipped", "why": "input is a URI"}
    if lines > settings.cross_check_limit:
        return {"status": "skipped", "why": f"{lines} lines > cross-check limit {settings.cross_check_limit}"}
    records, _ = extract.read_records(files)
    python = invariants.audit_findings(records, settings.params)
    rows = [r.asDict() for r in findings.collect()]

    def only(mine: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The findings of `mine` that `theirs` lacks, counted: one reported twice in `mine` and once in
        `theirs` is listed once."""
        key = invariants.finding_key
        surplus = Counter(map(key, mine)) - Counter(map(key, theirs))
        out = []
        for f in sorted(mine, key=key):
            if surplus[key(f)] > 0:
                surplus[key(f)] -= 1
                out.append({c: f[c] for c in contract.FINDING_KEY})
        return out[:10]

    only_spark, only_python = only(rows, python), only(python, rows)
    status = "disagree" if only_spark or only_python else "agree"
    return {"status": status, "findings": len(rows), "onlySpark": only_spark, "onlyPython": only_python}


def execute(
    settings: JobSettings, *, master: str | None, driver_memory: str | None, console: Console
) -> tuple[int, dict[str, Any] | None]:
    """Check the input, start (or reuse) a session, run, stop what was started."""
    try:
        files = input_files(settings)
    except extract.AuditInputError as exc:
        print(f"brokergroup audit: {exc}", file=sys.stderr)
        return BAD_INPUT, None
    size = None if files is None else sum(p.stat().st_size for p in files)
    spark, created = session.build(
        master=master, driver_memory=driver_memory, small_input=session.is_small(size), class_data_sharing=True
    )
    try:
        result = run(spark, settings, files, console)
    except extract.AuditInputError as exc:
        print(f"brokergroup audit: {exc}", file=sys.stderr)
        return BAD_INPUT, None
    finally:
        if created:
            session.stop(spark)
    return result.exit_code, result.summary


# -- the command line: `brokergroup audit DIR` (via `cli`) and `spark-submit job.py DIR` ---------------


def parser() -> argparse.ArgumentParser:
    """The arguments of `spark/job.py` under spark-submit: the audit form only."""
    p = argparse.ArgumentParser(prog="job.py", description="brokergroup event-log audit (spark-submit entry)")
    add_arguments(p)
    return p


def run_from_args(args: argparse.Namespace, *, default_master: str | None) -> int:
    defaults = AuditParams()
    params = AuditParams(
        min_in_sync_replicas=pick(args.min_in_sync_replicas, defaults.min_in_sync_replicas),
        long_risk_window_s=pick(args.long_risk_window, defaults.long_risk_window_s),
        flap_window_s=pick(args.flap_window, defaults.flap_window_s),
        flap_threshold=pick(args.flap_threshold, defaults.flap_threshold),
    ).validate()
    settings = JobSettings(
        input=args.target,
        out=args.out or Path("brokergroup-audit"),
        params=params,
        fail_on_violations=args.fail_on_violations,
        cross_check_limit=pick(args.cross_check_limit, JobSettings.cross_check_limit),
        report=not args.no_report,
        explain=args.explain,
    )
    err = Console(stderr=True)
    code, summary = execute(
        settings, master=args.master or default_master, driver_memory=pick(args.driver_memory, "2g"), console=err
    )
    if summary is not None:
        print_summary(Console(), summary, settings)
    return code


def print_summary(console: Console, summary: dict[str, Any], settings: JobSettings) -> None:
    inp, found, inc = summary["input"], summary["findings"], summary["incidents"]
    console.print(
        f"{inp['events']} events from {inp['lines']} lines ({inp['corrupt']} corrupt, {inp['invalid']} invalid); "
        f"{inc['total']} incidents, MTTR {inc['mttrMs']}"
    )
    style = "red" if found["violations"] else "green"
    console.print(f"[{style}]{found['violations']} violations[/], {found['warnings']} warnings: {found['byKind']}")
    if "crossCheck" in summary:
        console.print(f"cross-check with plain Python: {summary['crossCheck']['status']}")
    if "spark" in summary:
        console.print(explain.line(summary["spark"]), soft_wrap=True, highlight=False)
    console.print(f"summary: {settings.out / 'summary.json'}  tables: {settings.out / 'tables'}")


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry: the same arguments as `brokergroup audit DIR`, master from spark-submit."""
    return run_from_args(parser().parse_args(argv), default_master=None)


if __name__ == "__main__":
    sys.exit(main())
