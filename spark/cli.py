"""`brokergroup audit DIR` and `brokergroup audit generate --out DIR`.

One subcommand with two forms: the first positional is the folder to audit, or the word
`generate`. Options of the other form are refused with a message, not ignored.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from brokergroup.common.settings import SettingsError
from brokergroup.spark import generate, job, load, simulate
from brokergroup.spark.params import AuditParams

USAGE = """\
brokergroup audit DIR [--out DIR] [--fail-on-violations] [--min-in-sync-replicas N] [--master local[*]] ...
       brokergroup audit generate --out DIR [--sets N] [--days D] [--fault-rate R] [--seed S] [--plant LIST] ..."""

AUDIT_ONLY = (
    "fail_on_violations",
    "min_in_sync_replicas",
    "long_risk_window",
    "flap_window",
    "flap_threshold",
    "master",
    "driver_memory",
    "cross_check_limit",
    "no_report",
)
GENERATE_ONLY = ("sets", "days", "fault_rate", "seed", "plant", "nodes", "controller_failovers", "max_lines")


def audit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="DIR", help="folder of controller event logs (every *.jsonl below it)")
    p.add_argument("--out", type=Path, help="output folder (audit default: ./brokergroup-audit)")
    a = p.add_argument_group("audit")
    a.add_argument("--fail-on-violations", action="store_true", help="exit 1 when an invariant is broken")
    a.add_argument("--min-in-sync-replicas", type=int, help="risk: sync-state-set below max(2, N) (default 1)")
    a.add_argument("--long-risk-window", type=float, metavar="SECONDS", help="warn at risk windows this long (600)")
    a.add_argument("--flap-window", type=float, metavar="SECONDS", help="flapping: sliding window (600)")
    a.add_argument("--flap-threshold", type=int, metavar="N", help="flapping: transitions within the window (6)")
    a.add_argument("--master", help="Spark master (default local[*])")
    a.add_argument("--driver-memory", help="driver JVM heap for local masters (default 2g)")
    a.add_argument("--cross-check-limit", type=int, metavar="LINES", help="cross-check inputs up to this size")
    a.add_argument("--no-report", action="store_true", help="skip the HTML report")


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "audit",
        help="Spark audit of controller event logs; `audit generate` writes synthetic ones",
        description=__doc__,
        usage=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    audit_arguments(p)
    g = p.add_argument_group("generate (brokergroup audit generate --out DIR ...)")
    g.add_argument("--sets", type=int, help="broker sets (default 3)")
    g.add_argument("--days", type=float, help="simulated days (default 1)")
    g.add_argument("--fault-rate", type=float, metavar="R", help="faults per set per day (default 24)")
    g.add_argument("--seed", type=int, help="random seed (default 1); the same seed writes the same files")
    g.add_argument("--plant", help=f"comma-separated anomalies to plant: {','.join(simulate.PLANTS)}")
    g.add_argument("--nodes", type=int, help="controller nodes (default 3)")
    g.add_argument("--controller-failovers", type=float, metavar="R", help="controller failovers per day (4)")
    g.add_argument("--max-lines", type=int, help="stop after this many lines")
    p.set_defaults(func=run)


def standalone_parser() -> argparse.ArgumentParser:
    """The arguments of `spark/job.py` under spark-submit: the audit form only."""
    p = argparse.ArgumentParser(prog="job.py", description="brokergroup event-log audit (spark-submit entry)")
    audit_arguments(p)
    return p


def given(args: argparse.Namespace, names: tuple[str, ...]) -> list[str]:
    return ["--" + n.replace("_", "-") for n in names if getattr(args, n, None) not in (None, False)]


def run(args: argparse.Namespace) -> int:
    if args.target == "generate":
        wrong = given(args, AUDIT_ONLY)
        if wrong:
            raise SettingsError(f"{', '.join(wrong)}: not an option of `audit generate`")
        return run_generate(args)
    wrong = given(args, GENERATE_ONLY)
    if wrong:
        raise SettingsError(f"{', '.join(wrong)}: options of `audit generate`, not of `audit DIR`")
    return run_audit(args, default_master="local[*]")


def run_audit(args: argparse.Namespace, *, default_master: str | None) -> int:
    defaults = AuditParams()
    params = AuditParams(
        min_in_sync_replicas=pick(args.min_in_sync_replicas, defaults.min_in_sync_replicas),
        long_risk_window_s=pick(args.long_risk_window, defaults.long_risk_window_s),
        flap_window_s=pick(args.flap_window, defaults.flap_window_s),
        flap_threshold=pick(args.flap_threshold, defaults.flap_threshold),
    ).validate()
    settings = job.JobSettings(
        input=args.target,
        out=args.out or Path("brokergroup-audit"),
        params=params,
        fail_on_violations=args.fail_on_violations,
        cross_check_limit=pick(args.cross_check_limit, job.JobSettings.cross_check_limit),
        report=not args.no_report,
    )
    err = Console(stderr=True)
    code, summary = job.execute(
        settings, master=args.master or default_master, driver_memory=pick(args.driver_memory, "2g"), console=err
    )
    if summary is not None:
        print_summary(Console(), summary, settings)
    return code


def pick(value: Any, default: Any) -> Any:
    return default if value is None else value


def print_summary(console: Console, summary: dict[str, Any], settings: job.JobSettings) -> None:
    inp, found, inc = summary["input"], summary["findings"], summary["incidents"]
    console.print(
        f"{inp['events']} events from {inp['lines']} lines ({inp['corrupt']} corrupt, {inp['invalid']} invalid); "
        f"{inc['total']} incidents, MTTR {inc['mttrMs']}"
    )
    style = "red" if found["violations"] else "green"
    console.print(f"[{style}]{found['violations']} violations[/], {found['warnings']} warnings: {found['byKind']}")
    if "crossCheck" in summary:
        console.print(f"cross-check with plain Python: {summary['crossCheck']['status']}")
    console.print(f"summary: {settings.out / 'summary.json'}  tables: {settings.out / 'tables'}")


def run_generate(args: argparse.Namespace) -> int:
    if args.out is None:
        raise SettingsError("audit generate: --out DIR is required")
    defaults = generate.GenerateConfig(out=args.out)
    config = generate.GenerateConfig(
        out=args.out,
        sets=pick(args.sets, defaults.sets),
        days=pick(args.days, defaults.days),
        fault_rate=pick(args.fault_rate, defaults.fault_rate),
        seed=pick(args.seed, defaults.seed),
        plants=tuple(p.strip() for p in args.plant.split(",") if p.strip()) if args.plant else (),
        nodes=pick(args.nodes, defaults.nodes),
        controller_failovers=pick(args.controller_failovers, defaults.controller_failovers),
        max_lines=args.max_lines,
    ).validate()
    columns = (TextColumn("generating"), BarColumn(), TextColumn("{task.percentage:>3.0f}% of simulated time"))
    with Progress(*columns, TimeElapsedColumn(), console=Console(stderr=True)) as progress:
        task = progress.add_task("generate", total=1.0)
        result = generate.generate(config, lambda fraction: progress.update(task, completed=fraction))
        progress.update(task, completed=1.0)
    span = f"{load.iso(result.first_ts)} .. {load.iso(result.last_ts)}"
    print(f"{result.lines} lines, {result.events} events in {len(result.files)} files under {args.out}; {span}")
    print(f"planted: {len(result.planted)} expected findings in {args.out / 'planted.json'}")
    return 0
