"""`brokergroup audit DIR`, `brokergroup audit generate --out DIR` and
`brokergroup audit fetch --controller URL ... --out DIR`.

One subcommand with three forms: the first positional is the folder to audit, or the word
`generate` or `fetch`. Options of another form are refused with a message, not ignored.

This module imports no Spark: the parsers build, and `generate` and `fetch` run, without the
`audit` extra. `audit DIR` and `bench audit` (`add_bench_parser`) check for it first and import
the job only then, so a runtime-only install says what to install in one line (docs/images.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)

from brokergroup.common import extras
from brokergroup.common.settings import SettingsError
from brokergroup.spark import contract, fetch, generate, options, simulate

USAGE = """\
brokergroup audit DIR [--out DIR] [--fail-on-violations] [--min-in-sync-replicas N] [--master local[*]] ...
       brokergroup audit generate --out DIR [--sets N] [--days D] [--fault-rate R] [--seed S] [--plant LIST] ...
       brokergroup audit fetch --controller URL [--controller URL ...] --out DIR [--timeout S] [--allow-partial] ..."""

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
    "explain",
)
GENERATE_ONLY = ("sets", "days", "fault_rate", "seed", "plant", "nodes", "controller_failovers", "max_lines")
FETCH_ONLY = ("controller", "timeout", "allow_partial", "json")


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "audit",
        help="Spark audit of controller event logs; `audit generate` writes synthetic ones",
        description=__doc__,
        usage=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    options.add_arguments(p)
    g = p.add_argument_group("generate (brokergroup audit generate --out DIR ...)")
    g.add_argument("--sets", type=int, help="broker sets (default 3)")
    g.add_argument("--days", type=float, help="simulated days (default 1)")
    g.add_argument("--fault-rate", type=float, metavar="R", help="faults per set per day (default 24)")
    g.add_argument("--seed", type=int, help="random seed (default 1); the same seed writes the same files")
    g.add_argument("--plant", help=f"comma-separated anomalies to plant: {','.join(simulate.PLANTS)}")
    g.add_argument("--nodes", type=int, help="controller nodes (default 3)")
    g.add_argument("--controller-failovers", type=float, metavar="R", help="controller failovers per day (4)")
    g.add_argument("--max-lines", type=int, help="stop after this many lines")
    f = p.add_argument_group("fetch (brokergroup audit fetch --controller URL ... --out DIR)")
    f.add_argument(
        "--controller",
        action="append",
        metavar="URL",
        help="a controller node's API base URL, e.g. http://demo-controller-0.demo-controller.ns.svc:9878; "
        "once per node",
    )
    f.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help=f"fail a request with no answer for this long (default {fetch.DEFAULT_TIMEOUT:g})",
    )
    f.add_argument("--allow-partial", action="store_true", help="exit 0 when at least one controller answered in full")
    f.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def given(args: argparse.Namespace, names: tuple[str, ...]) -> list[str]:
    return ["--" + n.replace("_", "-") for n in names if getattr(args, n, None) not in (None, False)]


def run(args: argparse.Namespace) -> int:
    if args.target == "generate":
        wrong = given(args, AUDIT_ONLY + FETCH_ONLY)
        if wrong:
            raise SettingsError(f"{', '.join(wrong)}: not an option of `audit generate`")
        return run_generate(args)
    if args.target == "fetch":
        wrong = given(args, AUDIT_ONLY + GENERATE_ONLY)
        if wrong:
            raise SettingsError(f"{', '.join(wrong)}: not an option of `audit fetch`")
        return run_fetch(args)
    wrong = given(args, GENERATE_ONLY)
    if wrong:
        raise SettingsError(f"{', '.join(wrong)}: options of `audit generate`, not of `audit DIR`")
    wrong = given(args, FETCH_ONLY)
    if wrong:
        raise SettingsError(f"{', '.join(wrong)}: options of `audit fetch`, not of `audit DIR`")
    extras.require(extras.AUDIT, "the Spark audit")
    from brokergroup.spark import job

    return job.run_from_args(args, default_master="local[*]")


def add_bench_parser(kinds: Any) -> None:
    """`brokergroup bench audit` (the benchmark itself is `bench.run`)."""
    p: argparse.ArgumentParser = kinds.add_parser(
        "audit", help="Spark audit events/s and peak memory vs a bare Spark read-and-count"
    )
    p.add_argument(
        "--lines",
        "--sizes",
        dest="sizes",
        default="1M,10M",
        help="comma-separated line counts, with k or M for thousands or millions, e.g. 10k,1M,10M (default 1M,10M)",
    )
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--driver-memory", default="4g", help="driver JVM heap (default 4g)")
    p.add_argument(
        "--shuffle-partitions",
        type=int,
        default=8,
        help="spark.sql.shuffle.partitions for inputs of 64 MiB or more (default 8; below, 1 as in brokergroup audit)",
    )
    p.add_argument("--work", type=Path, help="folder for generated logs and outputs (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the generated logs and outputs")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    p.set_defaults(func=run_bench)


def run_bench(args: argparse.Namespace) -> int:
    extras.require(extras.AUDIT, "the audit benchmark")
    from brokergroup.spark import bench

    return bench.run(args)


def run_generate(args: argparse.Namespace) -> int:
    if args.out is None:
        raise SettingsError("audit generate: --out DIR is required")
    defaults = generate.GenerateConfig(out=args.out)
    config = generate.GenerateConfig(
        out=args.out,
        sets=options.pick(args.sets, defaults.sets),
        days=options.pick(args.days, defaults.days),
        fault_rate=options.pick(args.fault_rate, defaults.fault_rate),
        seed=options.pick(args.seed, defaults.seed),
        plants=tuple(p.strip() for p in args.plant.split(",") if p.strip()) if args.plant else (),
        nodes=options.pick(args.nodes, defaults.nodes),
        controller_failovers=options.pick(args.controller_failovers, defaults.controller_failovers),
        max_lines=args.max_lines,
    ).validate()
    columns = (TextColumn("generating"), BarColumn(), TextColumn("{task.percentage:>3.0f}% of simulated time"))
    with Progress(*columns, TimeElapsedColumn(), console=Console(stderr=True)) as progress:
        task = progress.add_task("generate", total=1.0)
        result = generate.generate(config, lambda fraction: progress.update(task, completed=fraction))
        progress.update(task, completed=1.0)
    span = f"{contract.iso(result.first_ts)} .. {contract.iso(result.last_ts)}"
    print(f"{result.lines} lines, {result.events} events in {len(result.files)} files under {args.out}; {span}")
    print(f"planted: {len(result.planted)} expected findings in {args.out / 'planted.json'}")
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    config = fetch.config_from_flags(args.controller, args.out, args.timeout, allow_partial=args.allow_partial)
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        tasks: dict[str, Any] = {}

        def on_progress(url: str, done: int, total: int) -> None:
            if url not in tasks:
                tasks[url] = progress.add_task(url, total=total)
            progress.update(tasks[url], completed=done, total=total)

        results = fetch.fetch_all(config, on_progress)
    code = fetch.exit_code(results, allow_partial=config.allow_partial)
    failed = [r for r in results if not r.ok]
    for r in failed:
        warning = "warning: " if code == fetch.OK else ""
        print(f"brokergroup audit fetch: {warning}{r.url}: {r.error}", file=sys.stderr)
    if args.json:
        print(json.dumps(fetch.summary_json(config, results), indent=2))
    else:
        for r in results:
            print(fetch.summary_line(r))
    if failed:
        partial = code == fetch.OK or config.allow_partial
        hint = "" if partial else " (--allow-partial accepts that when at least one answered)"
        print(
            f"brokergroup audit fetch: {len(failed)} of {len(results)} controllers failed{hint}; "
            f"the files fetched are in {config.out}",
            file=sys.stderr,
        )
    return code
