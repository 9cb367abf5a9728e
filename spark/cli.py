"""`brokergroup audit DIR` and `brokergroup audit generate --out DIR`.

One subcommand with two forms: the first positional is the folder to audit, or the word
`generate`. Options of the other form are refused with a message, not ignored.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from brokergroup.common.settings import SettingsError
from brokergroup.spark import generate, job, load, simulate

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


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "audit",
        help="Spark audit of controller event logs; `audit generate` writes synthetic ones",
        description=__doc__,
        usage=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    job.add_arguments(p)
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
    return job.run_from_args(args, default_master="local[*]")


def run_generate(args: argparse.Namespace) -> int:
    if args.out is None:
        raise SettingsError("audit generate: --out DIR is required")
    defaults = generate.GenerateConfig(out=args.out)
    config = generate.GenerateConfig(
        out=args.out,
        sets=job.pick(args.sets, defaults.sets),
        days=job.pick(args.days, defaults.days),
        fault_rate=job.pick(args.fault_rate, defaults.fault_rate),
        seed=job.pick(args.seed, defaults.seed),
        plants=tuple(p.strip() for p in args.plant.split(",") if p.strip()) if args.plant else (),
        nodes=job.pick(args.nodes, defaults.nodes),
        controller_failovers=job.pick(args.controller_failovers, defaults.controller_failovers),
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
