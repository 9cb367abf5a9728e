"""`brokergroup bench produce`: produce throughput and latency on a local broker set (1 master, 2
slaves, 3 controllers, all real processes), in sync and async modes, single-message and batched,
with a bare asyncio-socket baseline (direct and replicated to two followers) in the same run.

Modes (broker flags on every replica):

- sync: `--flush SYNC --all-ack --min-in-sync-replicas 2`. A put is acknowledged once the
  master has fsynced it (group commit) AND every member of the sync-state-set (all 3 replicas
  here, as the benchmark waits for the full set) has acknowledged it. Slaves acknowledge only
  what they have fsynced (group commit too; RocketMQ's SYNC_MASTER slaves acknowledge from the
  page cache). Puts are refused when fewer than 2 replicas are in sync.
- async: `--flush ASYNC --in-sync-replicas 1 --min-in-sync-replicas 1`. A put is acknowledged
  once the master has written it to its log (page cache); fsync runs every 500 ms in the
  background and slaves replicate in the background (RocketMQ's ASYNC_MASTER + ASYNC_FLUSH).

Phases, per mode, each with its own topic (queue 0):

- single: `--messages` sends of one message each as JSON (`Producer.send`, base64 body,
  idempotent producer id + sequence), `--concurrency` producers, each waiting for its ack before
  its next send;
- batched: `--messages` messages in binary batch bodies (`application/x-brokergroup-batch`) of
  `--batch` messages each, `--concurrency` producers, same discipline.

Protocols (`--protocol`): `binary` (default) sends both phases over the broker's binary client port
(`brokergroup.broker.binary_client`: length-prefixed frames, pipelined on one connection, the same batch
encoding for one message or many); `http` sends single messages as JSON and batches as binary batch
bodies over the HTTP API; `both` runs every phase over each protocol in turn on the same broker set
(binary, http, binary, http, ...), so the two are compared under the same load. Each phase reports
`cpu_ms_per_message`: the CPU seconds of every process of the group (3 brokers, 3 controllers) and of
the client, summed, per message, and `flushes_per_message`: each broker's flushes (fsync rounds, from
`brokergroup_broker_flushes_total` on its /metrics) per message of the phase, by role.

Retention (issue 18, `--retention-ms` and/or `--retention-bytes`, with `--segment-bytes` small enough that
segments fill and are deleted while a phase runs): each mode then runs an A/B comparison instead, two broker
sets up at once with the same flags and segment size, `off` without retention and `on` with it, the phases
alternated (`--rounds` rounds of single and batched; off then on, then on then off); each phase reports the
segments the `on` master deleted meanwhile (its commit-log min offset, `GET /v1/status`), and `summary`
the medians per variant and the ratio on/off. CPU per message is summed over every process (both sets,
controllers, client).

Latency is per request, as the client sees it (encoding, HTTP, put, flush, replica acks,
decoding). MB/s counts message bodies only (10^6 bytes). The client runs in this process on the
same machine, so it competes for the same cores; CPU use of every process is reported per phase.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import functools
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from brokergroup.bench import cpu, socket_baseline
from brokergroup.bench.stats import machine, summarize
from brokergroup.broker import wire
from brokergroup.broker.binary_client import BinaryLinks, BinaryProducer
from brokergroup.broker.client import MasterFinder, ProduceError, Producer
from brokergroup.common import eventloop
from brokergroup.controller.client import ControllerClient
from brokergroup.controller.codes import ControllerError
from brokergroup.local.brokers import BrokerSet
from brokergroup.local.controllers import ControllerGroup, settled

CLUSTER = "bench"
MAX_BODY = 8 * 1024 * 1024
"""The broker API's request size limit (broker/api.py MAX_BODY)."""
MAX_MESSAGE = 4 * 1024 * 1024
"""The broker's default store.max_message_size."""

BROKER_TIMING = [
    "--set", "controller.heartbeat_interval_ms=500",
    "--set", "controller.sync_broker_metadata_period_ms=500",
    "--set", "controller.check_sync_state_set_period_ms=1000",
    "--log-level", "WARNING",
]  # fmt: skip
"""Faster start-up only (role learned, set expanded within ~1 s); puts do not depend on these."""


@dataclasses.dataclass(frozen=True)
class Mode:
    flags: list[str]
    meaning: str


MODES: dict[str, Mode] = {
    "sync": Mode(
        flags=["--flush", "SYNC", "--all-ack", "--min-in-sync-replicas", "2"],
        meaning="acknowledged after the master's fsync (group commit) and the fsync acks of every sync-state-set "
        "member (3 of 3 here; slaves ack only what they have fsynced); refused below 2 in-sync replicas",
    ),
    "async": Mode(
        flags=["--flush", "ASYNC", "--in-sync-replicas", "1", "--min-in-sync-replicas", "1"],
        meaning="acknowledged after the master's write to its log (page cache); fsync every 500 ms and "
        "replication to the slaves in the background",
    ),
}


@dataclasses.dataclass(frozen=True)
class Params:
    messages: int
    size: int
    batch: int
    concurrency: int
    modes: list[str]
    warmup: int
    baseline_seconds: float
    profile_dir: Path | None
    protocols: list[str] = dataclasses.field(default_factory=lambda: ["binary"])
    retention: Retention | None = None
    baseline: bool = True

    def as_json(self) -> dict[str, Any]:
        return {
            "retention": dataclasses.asdict(self.retention) if self.retention is not None else None,
            "baseline": self.baseline,
            "messages_per_phase": self.messages,
            "message_size": self.size,
            "batch": self.batch,
            "concurrency": self.concurrency,
            "modes": self.modes,
            "warmup_requests": self.warmup,
            "baseline_seconds_per_phase": self.baseline_seconds,
            "replicas": 3,
            "controllers": 3,
            "profiled": self.profile_dir is not None,
            "protocols": self.protocols,
        }


@dataclasses.dataclass(frozen=True)
class Retention:
    """The `on` variant's retention in an A/B run (both variants get `segment_bytes`)."""

    retention_ms: int | None
    retention_bytes: int | None
    segment_bytes: int
    check_interval_ms: int
    rounds: int

    def segment_flags(self) -> list[str]:
        return ["--set", f"store.segment_size={self.segment_bytes}"]

    def flags(self) -> list[str]:
        out = ["--set", f"store.retention_check_interval_ms={self.check_interval_ms}"]
        if self.retention_ms is not None:
            out += ["--set", f"store.retention_ms={self.retention_ms}"]
        if self.retention_bytes is not None:
            out += ["--set", f"store.retention_bytes={self.retention_bytes}"]
        return out


class BenchError(Exception):
    pass


def add_parser(kinds: Any) -> None:
    p: argparse.ArgumentParser = kinds.add_parser(
        "produce",
        help="produce msgs/s, MB/s and latency on 1 master + 2 slaves vs raw asyncio sockets",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--messages", type=int, default=20000, help="messages per phase (single and batched, per mode)")
    p.add_argument("--size", type=int, default=1024, help="message body size in bytes")
    p.add_argument("--batch", type=int, default=32, help="messages per request in the batched phase")
    p.add_argument("--concurrency", type=int, default=8, help="producers, each with one request in flight")
    p.add_argument("--modes", default="sync,async", help="comma-separated: sync, async")
    p.add_argument(
        "--protocol",
        choices=["binary", "http", "both"],
        default="binary",
        help="the brokers' binary client port (default), the HTTP API, or both alternately in one run",
    )
    p.add_argument("--warmup", type=int, default=200, help="unmeasured requests before each phase")
    p.add_argument("--baseline-seconds", type=float, default=3.0, help="duration of each socket-baseline phase")
    p.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="record the master and one slave with py-spy during every phase into DIR (collapsed stacks + a top-frames "
        "summary in the JSON); sampling slows the master, so do not publish throughput from a profiled run",
    )
    p.add_argument("--out", type=Path, help="also write the JSON here")
    p.add_argument("--no-baseline", action="store_true", help="skip the socket baselines")
    r = p.add_argument_group("retention A/B (issue 18): each mode compares sets without and with retention")
    r.add_argument("--retention-ms", type=int, help="store.retention_ms of the `on` set")
    r.add_argument("--retention-bytes", type=int, help="store.retention_bytes of the `on` set")
    r.add_argument(
        "--segment-bytes",
        type=int,
        default=1024 * 1024,
        help="store.segment_size of both sets in an A/B run (default 1 MiB, so that segments are deleted in a phase)",
    )
    r.add_argument("--retention-check-ms", type=int, default=200, help="store.retention_check_interval_ms (200)")
    r.add_argument("--rounds", type=int, default=3, help="A/B rounds per mode (default 3)")
    p.set_defaults(func=run)


def validate(args: argparse.Namespace) -> Params | str:
    modes = [m.strip() for m in str(args.modes).split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if not modes:
        return f"--modes: no mode given; choose from {', '.join(MODES)}"
    if unknown:
        return f"--modes: unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}"
    if len(set(modes)) != len(modes):
        return f"--modes: a mode is repeated in {args.modes!r}"
    if args.messages < 1:
        return "--messages must be at least 1"
    if not 1 <= args.size <= MAX_MESSAGE:
        return f"--size must be within 1..{MAX_MESSAGE} bytes (the broker's max message size)"
    if not 1 <= args.batch <= wire.MAX_BATCH:
        return f"--batch must be within 1..{wire.MAX_BATCH} (the broker's batch limit)"
    if args.batch * (args.size + 24) + 256 > MAX_BODY:
        return f"--batch x --size must fit in one request of {MAX_BODY} bytes"
    if not 1 <= args.concurrency <= 256:
        return "--concurrency must be within 1..256"
    if args.warmup < 0:
        return "--warmup must be at least 0"
    if not 0.1 <= args.baseline_seconds <= 600:
        return "--baseline-seconds must be within 0.1..600"
    if args.profile is not None and shutil.which("py-spy") is None:
        return "--profile needs py-spy on PATH (pip install py-spy)"
    retention = None
    if args.retention_ms is not None or args.retention_bytes is not None:
        if args.retention_ms is not None and args.retention_ms < 1000:
            return "--retention-ms must be at least 1000 (the broker's minimum)"
        if args.retention_bytes is not None and args.retention_bytes < 4096:
            return "--retention-bytes must be at least 4096 (the broker's minimum)"
        if not 4096 <= args.segment_bytes <= 2**31:
            return "--segment-bytes must be within 4096..2^31 (the broker's store.segment_size bounds)"
        if args.segment_bytes < args.size + 256:
            return f"--segment-bytes ({args.segment_bytes}) must hold a message of --size {args.size} bytes"
        if not 100 <= args.retention_check_ms <= 3_600_000:
            return "--retention-check-ms must be within 100..3600000"
        if not 1 <= args.rounds <= 20:
            return "--rounds must be within 1..20"
        if args.profile is not None:
            return "--profile is not supported with a retention A/B run"
        retention = Retention(
            retention_ms=args.retention_ms,
            retention_bytes=args.retention_bytes,
            segment_bytes=args.segment_bytes,
            check_interval_ms=args.retention_check_ms,
            rounds=args.rounds,
        )
    elif args.rounds != 3 or args.segment_bytes != 1024 * 1024:
        return "--rounds and --segment-bytes are for a retention A/B run: give --retention-ms or --retention-bytes"
    return Params(
        messages=args.messages,
        size=args.size,
        batch=args.batch,
        concurrency=args.concurrency,
        modes=modes,
        warmup=args.warmup,
        baseline_seconds=args.baseline_seconds,
        profile_dir=args.profile,
        protocols=["binary", "http"] if args.protocol == "both" else [args.protocol],
        retention=retention,
        baseline=not args.no_baseline,
    )


def run(args: argparse.Namespace) -> int:
    params = validate(args)
    if isinstance(params, str):
        print(f"brokergroup bench produce: {params}", file=sys.stderr)
        return 2
    if params.profile_dir is not None:
        params.profile_dir.mkdir(parents=True, exist_ok=True)
    console = Console(stderr=True)
    try:
        result = eventloop.run(bench(params, console))
    except (BenchError, TimeoutError, ProduceError) as exc:
        print(f"brokergroup bench produce: {exc}", file=sys.stderr)
        return 1
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


# ---- measuring -------------------------------------------------------------------------------------


MACHINE = "__machine__"
STEAL = "__steal__"
KERNEL = "kernel:"


class CpuMeter:
    """CPU seconds of named processes (from /proc) and of this process, between two points."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def _read(self, pid: int) -> tuple[float, float] | None:
        """(total, kernel) CPU seconds of a process: the total from its CPU-time clock (nanoseconds), the
        kernel share from /proc/<pid>/stat (clock ticks)."""
        total = cpu.process_cpu_seconds(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        if total is None:
            return None
        fields = stat.rpartition(")")[2].split()
        return total, int(fields[12]) / self.tick

    def machine_busy(self) -> tuple[float, float] | None:
        """CPU seconds spent busy on all cores (from /proc/stat), whoever spent them, and of those the
        seconds the hypervisor gave to other machines (steal: this machine's cores were not running)."""
        try:
            fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        except (OSError, IndexError):
            return None
        values = [int(v) for v in fields[:8]]
        idle = values[3] + values[4]  # idle + iowait
        return (sum(values) - idle) / self.tick, values[7] / self.tick

    def snapshot(self) -> dict[str, float | None]:
        snap: dict[str, float | None] = {}
        for name, pid in self.pids.items():
            times = self._read(pid)
            snap[name] = times[0] if times is not None else None
            snap[KERNEL + name] = times[1] if times is not None else None
        snap["client (this process)"] = time.process_time()
        busy = self.machine_busy()
        snap[MACHINE], snap[STEAL] = busy if busy is not None else (None, None)
        return snap

    @staticmethod
    def percent(before: dict[str, float | None], after: dict[str, float | None], elapsed: float) -> dict[str, Any]:
        """Per process: % of one core over the phase; `total` is ours, `other processes` is the
        rest of the machine's busy time (other work on the box skews the numbers), `stolen by the
        hypervisor` the time a virtual machine's cores waited for the host (the same); `kernel` is
        the part of each broker's and baseline process's time spent in the kernel."""
        out: dict[str, Any] = {}
        kernel: dict[str, float] = {}
        for name, start in before.items():
            end = after.get(name)
            if name in (MACHINE, STEAL) or start is None or end is None or elapsed <= 0:
                continue
            value = round(100 * (end - start) / elapsed, 1)
            if name.startswith(KERNEL):
                kernel[name.removeprefix(KERNEL)] = value
            else:
                out[name] = value
        out["total"] = round(sum(out.values()), 1)
        start, end = before.get(MACHINE), after.get(MACHINE)
        steal_start, steal_end = before.get(STEAL), after.get(STEAL)
        steal = 0.0
        if steal_start is not None and steal_end is not None and elapsed > 0:
            steal = 100 * (steal_end - steal_start) / elapsed
            out["stolen by the hypervisor"] = round(steal, 1)
        if start is not None and end is not None and elapsed > 0:
            out["other processes"] = round(max(0.0, 100 * (end - start) / elapsed - out["total"] - steal), 1)
        out["kernel"] = kernel
        return out


class PySpy:
    """`py-spy record` of one process, collapsed stacks, stopped with SIGINT."""

    def __init__(self, pid: int, out: Path) -> None:
        self.out = out
        exe = shutil.which("py-spy") or "py-spy"
        self.proc = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(pid),
                "--format",
                "raw",
                "--nolineno",
                "--threads",
                "--rate",
                "100",
                "-o",
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def stop(self) -> dict[str, Any]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        if not self.out.exists():
            return {"error": f"py-spy wrote no profile: {err.decode(errors='replace').strip()[-500:]}"}
        return top_frames(self.out)


def top_frames(path: Path, top: int = 15) -> dict[str, Any]:
    """From py-spy's collapsed stacks (with `--threads`): each thread's share of the samples, and
    for the event-loop thread (MainThread) the self and inclusive share of each function, as a
    percentage of that thread's active samples. Frames present in nearly every sample (the
    `asyncio.run` scaffolding) are left out of the inclusive list."""
    threads: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    main = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        first, *frames = stack.split(";")
        name = first.partition(": ")[2] or first
        threads[name] += count
        if name != "MainThread" or not frames:
            continue
        main += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    total = sum(threads.values())

    def share(counter: collections.Counter[str], limit: float) -> list[dict[str, Any]]:
        rows = [(f, n) for f, n in counter.most_common() if n <= limit * main]
        return [{"frame": f, "percent": round(100 * n / main, 1)} for f, n in rows[:top]]

    return {
        "file": str(path),
        "samples": total,
        "threads_percent": {t: round(100 * n / total, 1) for t, n in threads.most_common()} if total else {},
        "main_thread_samples": main,
        "main_thread_self": share(own, 1.0) if main else [],
        "main_thread_inclusive": share(inclusive, 0.97) if main else [],
    }


PROGRESS_EVERY = 100
"""Requests between two progress updates: rich's `advance` per request cost the client process about 4 % of
its CPU, which the bench counts as the system's (issue 17)."""


def _advancer(progress: Progress, task: TaskID, per_request: int) -> Callable[[int], None]:
    """`drive`'s `on_done` moving a progress bar by messages, not requests."""
    return lambda done: progress.advance(task, done * per_request)


async def drive(
    requests: int,
    workers: Sequence[Callable[[int], Awaitable[int]]],
    on_done: Callable[[int], None],
) -> tuple[list[float], float, int]:
    """Run requests 0..n-1 over the workers (one in flight each). A worker returns its attempts.
    `on_done(n)` hears of the requests finished since it last did, every `PROGRESS_EVERY` and at the end.
    Returns latencies, elapsed seconds and retries."""
    latencies: list[float] = []
    counter = iter(range(requests))
    retries = 0
    unreported = 0

    async def loop(op: Callable[[int], Awaitable[int]]) -> None:
        nonlocal retries, unreported
        for i in counter:
            started = time.perf_counter()
            attempts = await op(i)
            latencies.append(time.perf_counter() - started)
            retries += attempts - 1
            unreported += 1
            if unreported >= PROGRESS_EVERY:
                on_done(unreported)
                unreported = 0

    begin = time.perf_counter()
    await asyncio.gather(*(loop(w) for w in workers))
    elapsed = time.perf_counter() - begin
    if unreported:
        on_done(unreported)
    return latencies, elapsed, retries


def phase_result(
    latencies: list[float], elapsed: float, *, messages: int, size: int, retries: int, cpu: dict[str, Any]
) -> dict[str, Any]:
    out = summarize(latencies, elapsed)
    out["requests"] = out.pop("ops")
    out["requests_per_s"] = out.pop("ops_per_s")
    cpu_seconds = float(cpu.get("total", 0.0)) / 100 * elapsed
    return {
        "messages": messages,
        "msgs_per_s": round(messages / elapsed, 1),
        "cpu_ms_per_message": round(1000 * cpu_seconds / messages, 4) if messages else None,
        "mb_per_s": round(messages * size / elapsed / 1e6, 2),
        **out,
        "retries": retries,
        "cpu_percent_of_one_core": cpu,
    }


class BatchProducer:
    """Binary batch sends with the idempotent producer id + sequence, retried like `Producer`."""

    def __init__(self, finder: MasterFinder, session: aiohttp.ClientSession, *, deadline_s: float = 30.0) -> None:
        self.finder = finder
        self.session = session
        self.producer_id = secrets.randbits(62)
        self.next_seq = 0
        self.deadline_s = deadline_s
        self.timeout = aiohttp.ClientTimeout(total=10)

    async def send(self, topic: str, bodies: Sequence[bytes]) -> int:
        now = int(time.time() * 1000)
        data = wire.encode_batch(
            topic=topic,
            queue_id=0,
            producer_id=self.producer_id,
            messages=[(self.next_seq + i, now, {}, b) for i, b in enumerate(bodies)],
        )
        self.next_seq += len(bodies)
        deadline = time.monotonic() + self.deadline_s
        attempts, refresh, last = 0, False, "no master known"
        headers = {"Content-Type": wire.BATCH_CONTENT_TYPE}
        while time.monotonic() < deadline:
            master = await self.finder.find(refresh=refresh)
            if master is not None:
                attempts += 1
                try:
                    async with self.session.post(
                        f"http://{master}/v1/messages", data=data, headers=headers, timeout=self.timeout
                    ) as r:
                        reply = await r.json()
                except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                    last, refresh = f"{master}: {str(exc) or type(exc).__name__}", True
                else:
                    if r.status == 200 and reply.get("status") == "PUT_OK":
                        return attempts
                    last = f"{reply.get('status')}: {reply.get('remark')}"
                    if r.status in (400, 413):
                        raise ProduceError(str(reply.get("status")), str(reply.get("remark")))
                    refresh = True
            await asyncio.sleep(0.02)
        raise ProduceError("TIMEOUT", f"batch not acknowledged within {self.deadline_s} s: {last}")


@contextlib.contextmanager
def step(progress: Progress, text: str) -> Iterator[None]:
    task = progress.add_task(text, total=1)
    started = time.monotonic()
    yield
    progress.update(task, completed=1, description=f"{text} ({time.monotonic() - started:.1f} s)")


# ---- the broker set --------------------------------------------------------------------------------


async def full_sync_state_set(
    brokers: BrokerSet, controller: ControllerClient, session: aiohttp.ClientSession, timeout: float = 60.0
) -> int:
    """Wait until the controller and the master both hold all 3 replicas in the sync-state-set."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        master = await brokers.master(timeout=max(1.0, deadline - time.monotonic()))
        try:
            info = await controller.replica_info(brokers.broker_name)
        except ControllerError:
            info = None
        status = await brokers.status(master, session)
        local = ((status or {}).get("replication") or {}).get("syncStateSet") or []
        if info is not None and len(info.sync_state_set) == len(brokers.nodes) and len(local) == len(brokers.nodes):
            return master
        await asyncio.sleep(0.1)
    raise BenchError(f"{brokers.broker_name}: the sync-state-set did not reach {len(brokers.nodes)} within {timeout} s")


async def queue_max_offset(session: aiohttp.ClientSession, api: str, topic: str) -> int | None:
    async with session.get(f"http://{api}/v1/topics") as r:
        body = await r.json()
    for queue in body.get("topics", {}).get(topic, []):
        if queue.get("queueId") == 0:
            return int(queue["maxOffset"])
    return None


async def check_stored(
    brokers: BrokerSet, master: int, session: aiohttp.ClientSession, expected: dict[str, int]
) -> dict[str, Any]:
    """Every topic holds exactly the messages sent; time for the slaves to reach the master's end."""
    api = brokers.nodes[master].api
    counts = {topic: await queue_max_offset(session, api, topic) for topic in expected}
    ended = time.monotonic()
    status = await brokers.status(master, session)
    end = int(((status or {}).get("store") or {}).get("maxOffset", -1))
    lag: dict[str, int | None] = {}
    while time.monotonic() - ended < 30:
        for i in range(len(brokers.nodes)):
            if i != master:
                s = await brokers.status(i, session)
                lag[brokers.nodes[i].name] = end - int(s["store"]["maxOffset"]) if s else None
        if all(v is not None and v <= 0 for v in lag.values()):
            break
        await asyncio.sleep(0.01)
    return {
        "queue_max_offsets": counts,
        "expected": expected,
        "ok": counts == expected,
        "master_max_offset": end,
        "slave_lag_bytes_after_wait": lag,
        "slaves_caught_up_ms": round((time.monotonic() - ended) * 1000, 1),
    }


def broker_roles(brokers: BrokerSet, master: int) -> dict[str, int]:
    """Each running broker's index in `brokers.nodes` by role: master, slave1, slave2, ..."""
    roles: dict[str, int] = {}
    slaves = 0
    for i, broker in enumerate(brokers.nodes):
        if broker.proc is None:
            continue
        if i == master:
            roles["master"] = i
        else:
            slaves += 1
            roles[f"slave{slaves}"] = i
    return roles


async def flush_counts(brokers: BrokerSet, master: int, session: aiohttp.ClientSession) -> dict[str, float]:
    """Each broker's flushes so far (`brokergroup_broker_flushes_total` on its /metrics), by role."""
    counts: dict[str, float] = {}
    for role, i in broker_roles(brokers, master).items():
        async with session.get(f"http://{brokers.nodes[i].api}/metrics") as response:
            response.raise_for_status()
            text = await response.text()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "brokergroup_broker_flushes_total":
                    counts[role] = sample.value
    return counts


def process_ids(brokers: BrokerSet, master: int, group: ControllerGroup) -> dict[str, int]:
    pids: dict[str, int] = {}
    for role, i in broker_roles(brokers, master).items():
        proc = brokers.nodes[i].proc
        assert proc is not None, "broker_roles lists running brokers only"
        pids[role] = proc.pid
    for i, controller in enumerate(group.nodes):
        if controller.proc is not None:
            pids[f"controller{i}"] = controller.proc.pid
    return pids


async def bench_mode(
    mode: str, params: Params, group: ControllerGroup, base: Path, progress: Progress
) -> dict[str, Any]:
    name = f"bench-{mode}"
    brokers = BrokerSet(
        base / name,
        controllers=group.api_addresses,
        broker_name=name,
        cluster_name=CLUSTER,
        extra_args=BROKER_TIMING + MODES[mode].flags,
    )
    body = secrets.token_bytes(params.size)
    results: dict[str, Any] = {"meaning": MODES[mode].meaning, "broker_flags": MODES[mode].flags + BROKER_TIMING}
    started = time.monotonic()
    brokers.start_all()
    try:
        connector = aiohttp.TCPConnector(limit=params.concurrency + 4)
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            ControllerClient(group.api_addresses, timeout=5.0) as controller,
        ):
            with step(progress, f"{mode}: 3 brokers up, master elected, sync-state-set of 3"):
                master = await full_sync_state_set(brokers, controller, session)
            results["setup_s"] = round(time.monotonic() - started, 1)
            pids = process_ids(brokers, master, group)
            meter = CpuMeter(pids)

            def finder() -> MasterFinder:
                return MasterFinder(broker_name=name, controller=controller)

            links = BinaryLinks(session)
            singles = [Producer(finder(), session=session) for _ in range(params.concurrency)]
            batchers = [BatchProducer(finder(), session) for _ in range(params.concurrency)]
            binaries = [BinaryProducer(finder(), links=links) for _ in range(params.concurrency)]

            def single_ops(topic: str, protocol: str) -> list[Callable[[int], Awaitable[int]]]:
                def op(producer: Producer | BinaryProducer) -> Callable[[int], Awaitable[int]]:
                    async def send(_i: int) -> int:
                        return (await producer.send(topic, [body])).attempts

                    return send

                return [op(p) for p in (binaries if protocol == "binary" else singles)]

            def batch_ops(topic: str, total: int, protocol: str) -> list[Callable[[int], Awaitable[int]]]:
                def op(sender: BatchProducer) -> Callable[[int], Awaitable[int]]:
                    async def send(i: int) -> int:
                        return await sender.send(topic, [body] * min(params.batch, total - i * params.batch))

                    return send

                def binary_op(sender: BinaryProducer) -> Callable[[int], Awaitable[int]]:
                    async def send(i: int) -> int:
                        bodies = [body] * min(params.batch, total - i * params.batch)
                        return (await sender.send(topic, bodies)).attempts

                    return send

                if protocol == "binary":
                    return [binary_op(s) for s in binaries]
                return [op(s) for s in batchers]

            def key(phase: str, protocol: str) -> str:
                return phase if params.protocols == [protocol] else f"{phase}_{protocol}"

            phases = [
                (key("single", p), params.messages, 1, single_ops(f"bench-{key('single', p)}", p), p)
                for p in params.protocols
            ] + [
                (
                    key("batched", p),
                    -(-params.messages // params.batch),
                    params.batch,
                    batch_ops(f"bench-{key('batched', p)}", params.messages, p),
                    p,
                )
                for p in params.protocols
            ]
            profiles: dict[str, Any] = {}
            for phase, requests, per_request, workers, protocol in phases:
                if params.warmup:
                    with step(progress, f"{mode} {phase}: {params.warmup} warm-up requests"):
                        warm = (
                            single_ops("bench-warmup", protocol)
                            if phase.startswith("single")
                            else batch_ops("bench-warmup", 2**62, protocol)
                        )
                        await drive(params.warmup, warm, lambda _: None)
                spies: dict[str, PySpy] = {}
                if params.profile_dir is not None:
                    for role in ("master", "slave1"):
                        spies[role] = PySpy(pids[role], params.profile_dir / f"produce-{mode}-{phase}-{role}.txt")
                    await asyncio.sleep(1.0)  # attached before the phase starts
                task = progress.add_task(f"{mode} {phase} ({params.concurrency} producers)", total=params.messages)
                flushes = await flush_counts(brokers, master, session)
                before = meter.snapshot()
                latencies, elapsed, retries = await drive(requests, workers, _advancer(progress, task, per_request))
                cpu = CpuMeter.percent(before, meter.snapshot(), elapsed)
                flushed = await flush_counts(brokers, master, session)
                progress.update(task, completed=params.messages)
                results[phase] = phase_result(
                    latencies, elapsed, messages=params.messages, size=params.size, retries=retries, cpu=cpu
                )
                results[phase]["flushes_per_message"] = {
                    role: round((flushed[role] - flushes.get(role, 0.0)) / params.messages, 3) for role in flushed
                }
                results[phase]["protocol"] = protocol
                if spies:
                    profiles[phase] = {role: await asyncio.to_thread(spy.stop) for role, spy in spies.items()}
            links.close()
            expected = {f"bench-{phase}": params.messages for phase, *_ in phases}
            results["check"] = await check_stored(brokers, master, session, expected)
            if profiles:
                results["profile"] = profiles
    finally:
        with step(progress, f"{mode}: brokers stopped"):
            await asyncio.to_thread(brokers.stop_all)
    if not results["check"]["ok"]:
        raise BenchError(f"{mode}: stored counts differ from what was sent: {results['check']}")
    return results


# ---- retention A/B ----------------------------------------------------------------------------------


VARIANTS = ("off", "on")


async def min_offset(brokers: BrokerSet, index: int, session: aiohttp.ClientSession) -> int:
    status = await brokers.status(index, session)
    return int(((status or {}).get("store") or {}).get("minOffset", 0))


async def min_offset_after(
    brokers: BrokerSet, index: int, session: aiohttp.ClientSession, low: int, check_interval_ms: int
) -> int:
    """The master's min offset once its retention check has run after a phase: at once if it rose above `low`,
    else polled for two check intervals. A phase shorter than one interval (a fast batched phase) may end before
    any check ran; its writes are deleted by the next one, and counted here."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 2 * check_interval_ms / 1000
    while (high := await min_offset(brokers, index, session)) <= low and loop.time() < deadline:  # noqa: ASYNC110 - read over HTTP, no event to await
        await asyncio.sleep(min(0.05, check_interval_ms / 4000))
    return high


async def retention_ab(
    mode: str, params: Params, retention: Retention, group: ControllerGroup, base: Path, progress: Progress
) -> dict[str, Any]:
    """Two broker sets of the mode, without (`off`) and with (`on`) retention, the same segment size; single and
    batched phases alternated between them for `rounds` rounds (binary protocol)."""
    flags = {
        "off": BROKER_TIMING + MODES[mode].flags + retention.segment_flags(),
        "on": BROKER_TIMING + MODES[mode].flags + retention.segment_flags() + retention.flags(),
    }
    sets = {
        v: BrokerSet(
            base / f"bench-{mode}-{v}",
            controllers=group.api_addresses,
            broker_name=f"bench-{mode}-{v}",
            cluster_name=CLUSTER,
            extra_args=flags[v],
        )
        for v in VARIANTS
    }
    body = secrets.token_bytes(params.size)
    results: dict[str, Any] = {
        "meaning": MODES[mode].meaning,
        "broker_flags": flags,
        "protocol": "binary",
        "phases": [],
    }
    for brokers in sets.values():
        brokers.start_all()
    try:
        async with (
            aiohttp.ClientSession() as session,
            ControllerClient(group.api_addresses, timeout=5.0) as controller,
        ):
            with step(progress, f"{mode}: 2 sets of 3 brokers up, masters elected, sync-state-sets of 3"):
                masters = {v: await full_sync_state_set(sets[v], controller, session) for v in VARIANTS}
            pids = {  # every broker of both sets, and each controller once
                (k if k.startswith("controller") else f"{v}.{k}"): pid
                for v in VARIANTS
                for k, pid in process_ids(sets[v], masters[v], group).items()
            }
            meter = CpuMeter(pids)
            links = BinaryLinks(session)
            producers = {
                v: [
                    BinaryProducer(MasterFinder(broker_name=f"bench-{mode}-{v}", controller=controller), links=links)
                    for _ in range(params.concurrency)
                ]
                for v in VARIANTS
            }

            def ops(
                variant: str, topic: str, per_request: int, total: int = params.messages
            ) -> list[Callable[[int], Awaitable[int]]]:
                def op(producer: BinaryProducer) -> Callable[[int], Awaitable[int]]:
                    async def send(i: int) -> int:
                        bodies = [body] * min(per_request, total - i * per_request)
                        return (await producer.send(topic, bodies)).attempts

                    return send

                return [op(p) for p in producers[variant]]

            sent: dict[str, dict[str, int]] = {v: {} for v in VARIANTS}
            for number in range(1, retention.rounds + 1):
                order = VARIANTS if number % 2 else tuple(reversed(VARIANTS))
                for phase, per_request in (("single", 1), ("batched", params.batch)):
                    for variant in order:
                        brokers, master = sets[variant], masters[variant]
                        topic = f"bench-{phase}-{number}"
                        if params.warmup:
                            await drive(params.warmup, ops(variant, "bench-warmup", per_request, 2**62), lambda _: None)
                        requests = -(-params.messages // per_request)
                        label = f"{mode} round {number} {phase} retention {variant}"
                        task = progress.add_task(label, total=params.messages)
                        low = await min_offset(brokers, master, session)
                        before = meter.snapshot()
                        latencies, elapsed, retries = await drive(
                            requests,
                            ops(variant, topic, per_request),
                            _advancer(progress, task, per_request),
                        )
                        cpu = CpuMeter.percent(before, meter.snapshot(), elapsed)
                        high = await min_offset_after(brokers, master, session, low, retention.check_interval_ms)
                        out = phase_result(
                            latencies, elapsed, messages=params.messages, size=params.size, retries=retries, cpu=cpu
                        )
                        sent[variant][topic] = sent[variant].get(topic, 0) + params.messages
                        results["phases"].append(
                            {
                                "round": number,
                                "phase": phase,
                                "retention": variant,
                                "segments_deleted_on_master": (high - low) // retention.segment_bytes,
                                "loadavg_1m": round(os.getloadavg()[0], 2),
                                **out,
                            }
                        )
            links.close()
            results["check"] = {v: await check_stored(sets[v], masters[v], session, sent[v]) for v in VARIANTS}
    finally:
        with step(progress, f"{mode}: brokers stopped"):
            for brokers in sets.values():
                await asyncio.to_thread(brokers.stop_all)
    bad = {v: c for v, c in results["check"].items() if not c["ok"]}
    if bad:
        raise BenchError(f"{mode}: stored counts differ from what was sent: {bad}")
    results["summary"] = summarize_ab(results["phases"])
    return results


def summarize_ab(phases: list[dict[str, Any]]) -> dict[str, Any]:
    """Per phase kind: the median msgs/s and CPU ms per message of each variant, and the ratios on/off."""
    out: dict[str, Any] = {}
    for kind in ("single", "batched"):
        medians: dict[str, dict[str, float]] = {}
        for variant in VARIANTS:
            rows = [p for p in phases if p["phase"] == kind and p["retention"] == variant]
            medians[variant] = {
                "msgs_per_s": statistics.median(p["msgs_per_s"] for p in rows),
                "cpu_ms_per_message": statistics.median(p["cpu_ms_per_message"] for p in rows),
                "segments_deleted_on_master": sum(p["segments_deleted_on_master"] for p in rows),
            }
        pairs = list(
            zip(
                [p for p in phases if p["phase"] == kind and p["retention"] == "on"],
                [p for p in phases if p["phase"] == kind and p["retention"] == "off"],
                strict=True,
            )
        )  # the two variants of one round ran back to back: their ratio is the least disturbed by other load
        ratios = [on["msgs_per_s"] / off["msgs_per_s"] for on, off in pairs]
        cpu_ratios = [on["cpu_ms_per_message"] / off["cpu_ms_per_message"] for on, off in pairs]
        out[kind] = {
            **medians,
            "msgs_per_s_ratio_on_off": round(medians["on"]["msgs_per_s"] / medians["off"]["msgs_per_s"], 3),
            "cpu_per_message_ratio_on_off": round(
                medians["on"]["cpu_ms_per_message"] / medians["off"]["cpu_ms_per_message"], 3
            ),
            "msgs_per_s_ratio_per_round": [round(r, 3) for r in ratios],
            "msgs_per_s_ratio_median_of_rounds": round(statistics.median(ratios), 3),
            "cpu_per_message_ratio_per_round": [round(r, 3) for r in cpu_ratios],
            "cpu_per_message_ratio_median_of_rounds": round(statistics.median(cpu_ratios), 3),
        }
    return out


# ---- the socket baseline ---------------------------------------------------------------------------


def spawn_baseline(*argv: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "brokergroup.bench.socket_baseline", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        proc.wait()
        raise BenchError(f"socket baseline {' '.join(argv)} did not start")
    return proc, int(line.split()[1])


async def baseline(params: Params, progress: Progress, *, replicated: bool) -> dict[str, Any]:
    label = "socket_replicated" if replicated else "socket"
    procs: list[subprocess.Popen[str]] = []
    try:
        pids: dict[str, int] = {}
        follower_args: list[str] = []
        if replicated:
            for n in (1, 2):
                proc, port = await asyncio.to_thread(spawn_baseline, "follow")
                procs.append(proc)
                pids[f"follower{n}"] = proc.pid
                follower_args += ["--follower", f"127.0.0.1:{port}"]
        proc, port = await asyncio.to_thread(spawn_baseline, "serve", *follower_args)
        procs.append(proc)
        pids["server"] = proc.pid
        meter = CpuMeter(pids)
        out: dict[str, Any] = {}
        for phase, per_request in (("single", 1), ("batched", params.batch)):
            payload = params.size * per_request
            if params.warmup:
                await socket_baseline.run_clients(
                    port, concurrency=params.concurrency, requests=params.warmup, payload_size=payload
                )
            task = progress.add_task(f"baseline {label} {phase} ({params.baseline_seconds:g} s)", total=None)
            before = meter.snapshot()
            latencies, elapsed = await socket_baseline.run_clients(
                port,
                concurrency=params.concurrency,
                seconds=params.baseline_seconds,
                payload_size=payload,
                on_done=functools.partial(progress.advance, task, per_request),
            )
            cpu = CpuMeter.percent(before, meter.snapshot(), elapsed)
            progress.update(task, total=len(latencies) * per_request)
            out[phase] = phase_result(
                latencies, elapsed, messages=len(latencies) * per_request, size=params.size, retries=0, cpu=cpu
            )
            out[phase]["frame_payload_bytes"] = payload
        return out
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


# ---- the whole run ---------------------------------------------------------------------------------


async def bench(params: Params, console: Console) -> dict[str, Any]:
    started = time.monotonic()
    load_before = os.getloadavg()
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    results: dict[str, Any] = {}
    with progress:
        base_line = (
            {
                "socket": await baseline(params, progress, replicated=False),
                "socket_replicated": await baseline(params, progress, replicated=True),
            }
            if params.baseline
            else {}
        )
        with tempfile.TemporaryDirectory(prefix="bg-bench-produce-") as tmp:
            base = Path(tmp)
            group = ControllerGroup(base / "controllers", extra_args=["--log-level", "WARNING"])
            group.start_all()
            try:
                with step(progress, "3 controllers up, leader settled"):
                    await settled(group)
                for mode in params.modes:
                    if params.retention is not None:
                        results[mode] = await retention_ab(mode, params, params.retention, group, base, progress)
                    else:
                        results[mode] = await bench_mode(mode, params, group, base, progress)
            finally:
                with step(progress, "controllers stopped"):
                    await asyncio.to_thread(group.stop_all)
    others = [
        phase["cpu_percent_of_one_core"].get("other processes", 0.0)
        for group_results in (results, base_line)
        for mode_results in group_results.values()
        for phase in mode_results.values()
        if isinstance(phase, dict) and "cpu_percent_of_one_core" in phase
    ]
    return {
        "benchmark": "produce",
        "machine": {**machine(), "loadavg_at_start": load_before, "loadavg_at_end": os.getloadavg()},
        "params": params.as_json(),
        "modes": {m: {"meaning": MODES[m].meaning, "flags": MODES[m].flags} for m in params.modes},
        "results": results,
        "baseline": base_line,
        "seconds": round(time.monotonic() - started, 1),
        "other_processes_max_percent": max(others, default=0.0),
        "notes": "latency is per request as the client sees it; msgs/s and MB/s count message bodies; the client "
        "(this process) shares the machine with 3 controllers and 3 brokers; binary = the binary client port "
        "(one message or a batch per frame, pipelined on one connection); http: single = one JSON message per "
        "request (base64), batched = binary batch bodies; cpu_ms_per_message = CPU of every process (brokers, "
        "controllers, client) per message; baseline = bare asyncio TCP, length-prefixed frames of "
        "the same payload size answered by an 8-byte ack, direct and replicated (the server forwards each frame to "
        "2 follower processes and answers after both acks), no HTTP, no store, no fsync",
    }
