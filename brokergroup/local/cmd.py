"""`brokergroup local up | status | down`: a whole group as local processes on 127.0.0.1.

`up` starts detached processes that outlive the command and records them in `<dir>/cluster.json`;
`status` and `down` re-attach through that file. Exit codes: 0 done, 1 the cluster is not in
the state the command needs (already up, not up, failed to start), 2 bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from brokergroup.local import attach, profiles, status
from brokergroup.local.cluster import ClusterSpec, LocalCluster, purge
from brokergroup.local.snapshot import ClusterSnapshot, Readiness
from brokergroup.local.state import AUTH_FILE, STATE_FILE, ClusterState, StateError, read_state

DEFAULT_DIR = Path("brokergroup-local")


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "local", help="a whole group as local processes: up, status, down", description=__doc__
    )
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)

    up = verbs.add_parser("up", help="start controllers and broker sets as detached local processes")
    _dir(up)
    up.add_argument("--name", default="local", help="cluster name; set i is <name>-broker-<i> (default local)")
    up.add_argument("--controllers", type=int, default=3, help="controller nodes (default 3)")
    up.add_argument("--sets", type=int, default=2, help="broker sets (default 2)")
    up.add_argument("--replicas", type=int, default=3, help="replicas per set (default 3)")
    up.add_argument("--mode", choices=sorted(profiles.MODES), default="sync", help="replication mode (default sync)")
    up.add_argument(
        "--profile", choices=sorted(profiles.PROFILES), default="default", help="timing profile (default: default)"
    )
    up.add_argument("--timeout", type=float, default=180.0, help="seconds to wait until it is up (default 180)")
    up.set_defaults(func=run_up)

    st = verbs.add_parser("status", help="masters, epochs, sync-state-sets and lag of a local cluster")
    _dir(st)
    st.add_argument("--watch", action="store_true", help="refresh every second until Ctrl-C")
    st.set_defaults(func=run_status)

    down = verbs.add_parser("down", help="stop a local cluster (SIGTERM, then SIGKILL); data and logs stay")
    _dir(down)
    down.add_argument("--purge", action="store_true", help="also delete its data and logs")
    down.add_argument("--timeout", type=float, default=15.0, help="seconds between SIGTERM and SIGKILL (default 15)")
    down.set_defaults(func=run_down)


def _dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"the cluster's folder (default ./{DEFAULT_DIR})")


def spec_from(args: argparse.Namespace) -> ClusterSpec:
    return ClusterSpec(
        name=args.name,
        controllers=args.controllers,
        sets=args.sets,
        replicas=args.replicas,
        profile=profiles.profile(args.profile),
        mode=profiles.mode(args.mode),
    ).validate()


def existing(directory: Path) -> ClusterState | None:
    """The state of a cluster started in `directory` before, if one was; StateError if unreadable."""
    return read_state(directory) if (directory / STATE_FILE).exists() else None


def run_up(args: argparse.Namespace) -> int:
    spec = spec_from(args)
    if args.timeout <= 0:
        raise profiles.ProfileError(f"--timeout {args.timeout}: must be positive")
    console, err = Console(), Console(stderr=True)
    try:
        previous = existing(args.dir)
    except StateError as exc:
        err.print(f"[red]brokergroup local up:[/] {exc}")
        return 1
    if previous is not None:
        alive = attach.running(previous)
        if alive:
            err.print(f"[red]brokergroup local up:[/] a cluster is already up in {args.dir} ({len(alive)} processes)")
            err.print(
                f"  see it: brokergroup local status --dir {args.dir}; stop it: brokergroup local down --dir {args.dir}"
            )
            return 1
        err.print(f"[red]brokergroup local up:[/] {args.dir} holds a stopped cluster's data and logs")
        err.print(f"  remove them with: brokergroup local down --dir {args.dir} --purge, or choose another --dir")
        return 1
    local = LocalCluster(args.dir, spec)
    err.print(
        f"starting {spec.controllers} controllers and {spec.sets} x {spec.replicas} brokers in {local.directory} "
        f"(profile {spec.profile.name}: {spec.profile.description}; mode {spec.mode.name})"
    )
    ok = False
    try:
        local.start(detached=True)
        snap = asyncio.run(wait_with_progress(local, err, args.timeout))
        ok = True
    except (TimeoutError, RuntimeError) as exc:
        err.print(f"[red]brokergroup local up: the cluster did not come up:[/] {exc}")
        err.print(f"logs: {local.directory}/controllers/*.log, {local.directory}/brokers/*.log")
        return 1
    finally:
        if not ok:
            local.stop()
    console.print(status.masters_table(snap))
    console.print(f"controllers: {';'.join(local.controllers.api_addresses)}")
    console.print(f"admin token and Raft password: {local.directory / AUTH_FILE} (mode 0600)")
    console.print(f"next: brokergroup local status --dir {args.dir} [--watch]; brokergroup local down --dir {args.dir}")
    return 0


async def wait_with_progress(
    cluster: LocalCluster, console: Console, timeout: float, *, indent: str = ""
) -> ClusterSnapshot:
    """`cluster.wait_ready` with a progress bar naming the step it waits for (`local up`, the demo)."""
    columns = (SpinnerColumn(), TextColumn(indent + "{task.description:<44}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=False) as progress:
        task = progress.add_task("starting processes", total=None)

        def update(ready: Readiness) -> None:
            progress.update(task, total=ready.total, completed=ready.completed, description=ready.waiting_for())

        return await cluster.wait_ready(timeout=timeout, on_progress=update)


def run_status(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    state = _state_or_none(args.dir, err, "status")
    if state is None:
        return 1
    if not attach.running(state):
        err.print(f"cluster {state.name} in {args.dir} is stopped; its data and logs are kept there")
        return 1
    status.show(state, Console(), watch=args.watch)
    return 0


def run_down(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    state = _state_or_none(args.dir, err, "down")
    if state is None:
        return 1
    brokers = [r for s in state.sets for r in s.replicas]
    columns = (SpinnerColumn(), TextColumn("{task.description:<24}"), BarColumn(), MofNCompleteColumn())
    results: list[attach.StopResult] = []
    with Progress(*columns, TimeElapsedColumn(), console=err) as progress:
        # Brokers first: they leave the controllers cleanly, and nothing waits on a dead controller.
        for what, records in (("stopping brokers", brokers), ("stopping controllers", list(state.controllers))):
            task = progress.add_task(what, total=len(records))

            def advance(done: int, _total: int, task: TaskID = task) -> None:
                progress.update(task, completed=done)

            results.append(attach.stop(records, timeout=args.timeout, on_progress=advance))
            progress.update(task, completed=len(records))
    killed = [n for r in results for n in r.killed]
    remaining = [n for r in results for n in r.remaining]
    stopped = sum(len(r.terminated) for r in results) + len(killed)
    if stopped == 0 and not remaining:
        print(f"cluster {state.name} in {args.dir} was not running")
    else:
        print(
            f"stopped {stopped} processes" + (f" ({len(killed)} needed SIGKILL: {', '.join(killed)})" if killed else "")
        )
    if remaining:
        err.print(f"[red]still running:[/] {', '.join(remaining)}")
        return 1
    if args.purge:
        purge(args.dir)
        print(f"removed {args.dir}")
    else:
        print(f"data and logs kept in {args.dir} (remove with --purge)")
    return 0


def _state_or_none(directory: Path, err: Console, verb: str) -> ClusterState | None:
    try:
        return read_state(directory)
    except StateError as exc:
        err.print(f"[red]brokergroup local {verb}:[/] {exc}")
        return None
