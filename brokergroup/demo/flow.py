"""The demo, step by step: up → traffic → kill the master → timeline → verify → audit → report.

The history it checks is complete in the chaos checker's sense: a topology record (every queue's
replicas, the controllers) before any client starts, body digests on every send and read, and,
once the killed master is back as a slave and every replica holds the same log, a final read of
every replica of every set.

`run_demo` drives a `LocalCluster` held in this process and prints each step as it happens;
what it measured comes back as a `DemoResult` for `report.write`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from brokergroup.broker.binary_client import BinaryConsumer, BinaryLinks, BinaryProducer
from brokergroup.broker.client import MasterFinder
from brokergroup.chaos.history import final_read, record_topology
from brokergroup.common import extras
from brokergroup.controller.client import ControllerClient
from brokergroup.demo import audit, model, report, timeline, traffic, verify
from brokergroup.local import attach, profiles, snapshot
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.cluster import ClusterSpec, LocalCluster, purge
from brokergroup.local.cmd import wait_with_progress
from brokergroup.local.state import StateError, read_state

STEPS = 7


class DemoError(RuntimeError):
    """The demo cannot go on; the message says why."""


@dataclasses.dataclass(frozen=True)
class DemoOptions:
    out: Path
    profile: profiles.TimingProfile = profiles.FAST
    messages: int = 4000
    run_audit: bool = True
    kill_after: float = 0.4
    """Kill the master once this share of its set's messages is acknowledged."""

    def spec(self) -> ClusterSpec:
        return ClusterSpec(name="demo", controllers=3, sets=2, replicas=3, profile=self.profile, mode=profiles.SYNC)


class Clock:
    """Prints `[  12.3s] 3/7 what happened` lines and times the phases."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.started = time.monotonic()
        self.durations: dict[str, float] = {}

    def say(self, text: str, *, step: int | None = None) -> None:
        number = f"[bold]{step}/{STEPS}[/] " if step else "    "
        self.console.print(f"[cyan]{time.monotonic() - self.started:7.1f}s[/] {number}{text}")

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.durations[name] = time.monotonic() - began


def prepare(out: Path) -> Path:
    """The cluster's folder under `out`, emptied of an earlier run (refused while that one still runs)."""
    folder = out / "cluster"
    if (folder / "cluster.json").exists():
        try:
            alive = attach.running(read_state(folder))
        except StateError:
            alive = []
        if alive:
            raise DemoError(f"a demo cluster still runs in {folder}: brokergroup local down --dir {folder}")
        purge(folder)
    for name in ("event-logs", "audit"):
        shutil.rmtree(out / name, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    return folder


async def run_demo(opts: DemoOptions, console: Console) -> report.DemoResult:
    clock = Clock(console)
    spec = opts.spec()
    cluster = LocalCluster(prepare(opts.out), spec)
    info = {
        "controllers": spec.controllers,
        "sets": spec.sets,
        "replicas": spec.replicas,
        "profile": spec.profile.name,
        "mode": spec.mode.name,
        "startedAt": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    history = model.History()
    clock.say(
        f"local up: {spec.controllers} controllers, {spec.sets} broker sets x {spec.replicas} replicas, "
        f"{spec.mode.name} replication, {spec.profile.name} timing ({spec.profile.description})",
        step=1,
    )
    try:
        producers, line = await on_the_cluster(cluster, opts, history, clock)
    finally:
        clock.say("stopping the cluster (data and logs stay in cluster/)")
        with clock.phase("stop cluster"):
            cluster.stop()
    verdict = verify.verdict(history.ops, timeline.read_events(opts.out / "event-logs"))
    style = "green" if verdict["valid"] else "bold red"
    clock.say(f"[{style}]{verify.headline(verdict)}[/]")
    for why in verdict.get("incomplete", []):
        clock.say(f"[bold red]incomplete: {escape(why)}[/]")
    write_history(opts.out / "history.jsonl", history)
    with clock.phase("audit"):
        if opts.run_audit:
            clock.say("Spark audit of the controllers' event logs (a JVM starts; this takes a while)", step=6)
            with clock.console.status("      auditing (output in audit.log)"):
                outcome = audit.run(opts.out / "event-logs", opts.out, log=opts.out / "audit.log")
        else:
            outcome = model.AuditOutcome(ran=False, line="audit skipped: --skip-audit")
        clock.say(escape(outcome.line), step=None if opts.run_audit else 6)
    with clock.phase("report"):
        clock.say("writing the report and charts", step=7)
        acks = [a for p in producers for a in p.acks]
        drawn = write_charts(opts.out, acks, line, clock)
        result = report.DemoResult(
            cluster=info,
            acks=acks,
            indeterminate=sum(p.indeterminate for p in producers),
            timeline=line,
            verdict=verdict,
            audit=outcome,
            charts=drawn,
            durations=clock.durations,
        )
        clock.durations["total"] = time.monotonic() - clock.started
        report.write(opts.out, result)
    return result


def write_charts(out: Path, acks: list[model.Ack], line: timeline.Timeline | None, clock: Clock) -> dict[str, str]:
    """The PNG charts, or none and a line saying why when matplotlib (the `audit` extra) is missing."""
    why = extras.missing(extras.AUDIT, "matplotlib")
    if why is not None:
        clock.say(escape(f"charts skipped: {why}"))
        return {}
    from brokergroup.demo import charts

    return charts.write_all(out, acks, line)


async def on_the_cluster(
    cluster: LocalCluster, opts: DemoOptions, history: model.History, clock: Clock
) -> tuple[list[traffic.SetProducer], timeline.Timeline]:
    """Steps 1-5, while the cluster runs: up, traffic, the kill, the timeline, the read-back."""
    with clock.phase("start cluster"):
        cluster.start()
        await wait_with_progress(cluster, clock.console, timeout=240, indent="      ")
    masters = [f"{s.broker_name} master {await master_name(s)}" for s in cluster.sets]
    clock.say("cluster up: " + ", ".join(masters))
    queues = {model.queue_name(s.broker_name): [n.name for n in s.nodes] for s in cluster.sets}
    record_topology(history, queues, [n.name for n in cluster.controllers.nodes])
    with clock.phase("traffic and failover"):
        producers, fault = await traffic_and_kill(cluster, opts, history, clock)
    names = {n.api: n.name for s in cluster.sets for n in s.nodes}
    acks = [a for p in producers for a in p.acks]
    line = timeline.build(fault, timeline.read_events(cluster.event_log_dir), acks, names)
    clock.say(f"failover timeline of {fault.broker_set}, from the controllers' event log and the client", step=4)
    clock.console.print(timeline_table(line))
    with clock.phase("rejoin"):
        await rejoin(cluster, fault, clock)
    with clock.phase("read back"):
        clock.say("consuming every set from offset 0, reading every replica in full, checking the history", step=5)
        await read_back(cluster, history, clock)
    copy_event_logs(cluster, opts.out / "event-logs")
    return producers, line


async def master_name(brokers: BrokerSet) -> str:
    return brokers.nodes[await brokers.master()].name


async def traffic_and_kill(
    cluster: LocalCluster, opts: DemoOptions, history: model.History, clock: Clock
) -> tuple[list[traffic.SetProducer], timeline.Fault]:
    per_set = max(opts.messages // len(cluster.sets), 1)
    victim_set = cluster.sets[0]
    clock.say(
        f"producing {per_set * len(cluster.sets)} messages ({per_set} per set) with the idempotent producer "
        "over the binary port",
        step=2,
    )
    async with aiohttp.ClientSession() as session, ControllerClient(cluster.controllers.api_addresses) as controller:
        links = BinaryLinks(session)
        producers = [
            traffic.SetProducer(
                s.broker_name,
                BinaryProducer(
                    MasterFinder(broker_name=s.broker_name, controller=controller), links=links, deadline_s=30
                ),
                history,
                count=per_set,
                milestone=max(1, int(per_set * opts.kill_after)),
            )
            for s in cluster.sets
        ]
        columns = (TextColumn("      {task.description:<32}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=clock.console) as progress:
            tasks = {p.broker_set: progress.add_task(f"{p.broker_set} acknowledged", total=p.count) for p in producers}
            running = [asyncio.create_task(p.run()) for p in producers]

            async def show() -> None:
                while True:
                    for p in producers:
                        progress.update(tasks[p.broker_set], completed=p.sent)
                    await asyncio.sleep(0.1)

            shower = asyncio.create_task(show())
            try:
                await asyncio.wait_for(producers[0].reached.wait(), timeout=300)
                index = await victim_set.master()
                status = await victim_set.status(index, session) or {}
                node = victim_set.nodes[index]
                fault = timeline.Fault(
                    broker_set=victim_set.broker_name,
                    replica=node.name,
                    broker_id=int(status.get("brokerId") or 0),
                    address=node.api,
                    master_epoch=int(status.get("masterEpoch") or 0),
                    at_ms=model.wall_ms(),
                )
                victim_set.kill(index)
                clock.say(
                    f"[bold red]SIGKILL[/] {node.name}, master of {victim_set.broker_name} (masterEpoch "
                    f"{fault.master_epoch}), after {len(producers[0].acks)} acknowledged writes",
                    step=3,
                )
                await asyncio.gather(*running)
            finally:
                shower.cancel()
                links.close()
                for p in producers:
                    progress.update(tasks[p.broker_set], completed=p.sent)
    acked = sum(len(p.acks) for p in producers)
    clock.say(f"traffic done: {acked} acknowledged, {sum(p.indeterminate for p in producers)} indeterminate")
    return producers, fault


async def rejoin(cluster: LocalCluster, fault: timeline.Fault, clock: Clock, *, timeout: float = 120.0) -> None:
    """Restart the killed master and wait until it is back as a slave and every replica of every set
    holds the same log: the final reads must cover every replica."""
    brokers = next(s for s in cluster.sets if s.broker_name == fault.broker_set)
    index = next(i for i, n in enumerate(brokers.nodes) if n.name == fault.replica)
    brokers.start(index)
    cluster.save()  # its new pid, for `brokergroup local down`
    took = await until_in_sync(cluster, timeout=timeout)
    async with aiohttp.ClientSession(timeout=snapshot.STATUS_TIMEOUT) as session:
        status = await brokers.status(index, session) or {}
    clock.say(
        f"restarted {fault.replica}: back as {status.get('role', '?')} (masterEpoch {status.get('masterEpoch', '?')}), "
        f"every replica in sync after {took:.1f} s"
    )


async def until_in_sync(cluster: LocalCluster, *, timeout: float) -> float:
    """Seconds until every set has a master, every replica in its sync-state-set, and the same max and
    confirm offsets on every replica (writes have stopped). Raises DemoError naming what lagged."""
    started = time.monotonic()
    try:
        await cluster.wait_ready(timeout=timeout)
    except (TimeoutError, RuntimeError) as exc:
        raise DemoError(f"the cluster did not recover after the restart: {exc}") from exc
    async with aiohttp.ClientSession(timeout=snapshot.STATUS_TIMEOUT) as session:
        while True:
            lagging = out_of_sync(await snapshot.take(cluster.state(), session=session))
            if not lagging:
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise DemoError(f"replicas not in sync within {timeout:.0f} s: {'; '.join(lagging)}")
            await asyncio.sleep(0.1)


def out_of_sync(snap: snapshot.ClusterSnapshot) -> list[str]:
    """The sets whose replicas do not all report the same (maxOffset, confirmOffset), with what they report."""
    lagging = []
    for s in snap.sets:
        ends = {r.name: (r.store("maxOffset"), r.store("confirmOffset")) for r in s.replicas}
        if len(set(ends.values())) != 1 or any(None in end for end in ends.values()):
            lagging.append(f"{s.name} {ends}")
    return lagging


async def read_back(cluster: LocalCluster, history: model.History, clock: Clock) -> None:
    """Consume every set through its master, then read every replica of every set in full (`final:<replica>`)."""
    async with aiohttp.ClientSession() as session, ControllerClient(cluster.controllers.api_addresses) as controller:
        with contextlib.closing(BinaryLinks(session)) as links:
            for s in cluster.sets:
                finder = MasterFinder(broker_name=s.broker_name, controller=controller)
                consumer = BinaryConsumer(finder, group="demo-verify", links=links)
                await traffic.consume_all(s.broker_name, consumer, history)
        for s in cluster.sets:
            counts = [
                await final_read(history, session, n.name, n.api, model.TOPIC, model.queue_name(s.broker_name))
                for n in s.nodes
            ]
            shown = ", ".join(f"{n.name} {'FAILED' if c is None else c}" for n, c in zip(s.nodes, counts, strict=True))
            clock.say(f"final reads of {s.broker_name}: {shown}")


def copy_event_logs(cluster: LocalCluster, target: Path) -> None:
    """The controllers' event logs as they are now, before the shutdown adds its own events."""
    for node in cluster.controllers.nodes:
        source = node.data_dir / "events"
        if source.is_dir():
            shutil.copytree(source, target / node.name, dirs_exist_ok=True)


def write_history(path: Path, history: model.History) -> None:
    with path.open("w") as f:
        for op in history.ops:
            f.write(json.dumps(op, separators=(",", ":")) + "\n")


def timeline_table(line: timeline.Timeline) -> Table:
    table = Table(box=None, padding=(0, 2), show_header=True, header_style="bold")
    table.add_column("      +ms", justify="right")
    table.add_column("step")
    table.add_column("what")
    for s in line.steps:
        table.add_row(f"{s.at_ms - line.fault.at_ms:9.1f}", s.title, s.detail)
    return table
