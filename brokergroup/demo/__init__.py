"""`brokergroup demo`: the main job, the README's first command.

1. local up: 3 controllers and 2 broker sets x 3 replicas, sync replication, fast timing;
2. a stream of messages to both sets with the idempotent producer, every acknowledgement recorded;
3. SIGKILL of the master of set 0 while it is under load;
4. the failover timeline: fault → detected → elected → clients switched, from the controllers'
   event log and the clients' own clocks;
5. everything consumed back and checked: nothing acknowledged lost or duplicated;
6. the Spark audit of the event logs, when it is installed;
7. report.html, PNG charts and summary.json in the output folder, and a short summary here.

Exit codes: 0 the run was correct, 1 it was not (or could not finish), 2 bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from brokergroup.common.settings import SettingsError
from brokergroup.demo import flow, verify
from brokergroup.demo.report import DemoResult
from brokergroup.local import profiles

MIN_MESSAGES = 20


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="the main job: a local cluster, traffic, kill -9 of a master, failover timeline, verification, report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--out", type=Path, default=Path("brokergroup-demo"), help="output folder (default ./brokergroup-demo)"
    )
    p.add_argument("--profile", choices=sorted(profiles.PROFILES), default="fast", help="timing profile (default fast)")
    p.add_argument("--messages", type=int, default=4000, help="messages to produce, over all sets (default 4000)")
    p.add_argument("--skip-audit", action="store_true", help="do not run the Spark audit (step 6)")
    p.set_defaults(func=run)


def options(args: argparse.Namespace) -> flow.DemoOptions:
    if args.messages < MIN_MESSAGES:
        raise SettingsError(
            f"--messages {args.messages}: at least {MIN_MESSAGES}, so that there are writes before and after the kill"
        )
    return flow.DemoOptions(
        out=args.out, profile=profiles.profile(args.profile), messages=args.messages, run_audit=not args.skip_audit
    )


def run(args: argparse.Namespace) -> int:
    opts = options(args)
    console = Console(soft_wrap=True)
    if not console.is_terminal:
        console.width = 120  # a pipe or a file: do not wrap tables at 80 columns
    console.rule("brokergroup demo: kill -9 a master under load")
    try:
        result = asyncio.run(flow.run_demo(opts, console))
    except (flow.DemoError, TimeoutError, RuntimeError) as exc:
        console.print(f"[bold red]demo failed:[/] {exc}")
        console.print(f"data and logs: {opts.out / 'cluster'}")
        return 1
    print_summary(console, result, opts.out)
    return 0 if result.ok else 1


def print_summary(console: Console, result: DemoResult, out: Path) -> None:
    console.rule("summary")
    line = result.timeline
    if line is not None:
        steps = ", ".join(f"{s.title} +{s.at_ms - line.fault.at_ms:.0f} ms" for s in line.steps if s.key != "fault")
        gap = f"{line.data_plane_ms:.0f} ms" if line.data_plane_ms is not None else "n/a"
        console.print(f"failover of {line.fault.broker_set} after SIGKILL of {line.fault.replica}: {steps}")
        console.print(f"writes to {line.fault.broker_set} paused for {gap} (last acknowledgement before → first after)")
        if not line.complete or not line.ordered:
            console.print("[bold red]the timeline is incomplete or out of order[/]")
    style = "green" if result.verdict["valid"] else "bold red"
    console.print(f"[{style}]{verify.headline(result.verdict)}[/]")
    console.print(escape(result.audit.line))
    chart_names = ", ".join(result.charts.values()) or "none"
    console.print(f"report: {out / 'report.html'} (charts: {chart_names}; data: summary.json, history.jsonl)")
    verdict = "[bold green]OK[/]" if result.ok else "[bold red]FAILED[/]"
    console.print(f"result: {verdict} in {result.durations.get('total', 0):.0f} s")
