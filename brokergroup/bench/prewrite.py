"""`python3 -m brokergroup.bench.prewrite`: what a put's fdatasync costs appended at a file's end and
written into blocks written before (issue 21, docs/benchmarks.md).

Two levels, each run alternately with and without blocks written ahead, `--rounds` times:

- file: pwrite `--size` bytes at the end of the data, then time `os.fdatasync`; "append" grows the
  file, "ahead" writes into zeros written (and fsynced) before;
- log: a `CommitLog` (prewrite 0 against the default) appends one record of `--size` body bytes and
  runs its flush job (the fdatasync a SYNC replica runs per put when puts come one at a time).

Prints JSON: per level and variant, the medians over rounds of system and user CPU µs per put
(this process, so the kernel's fdatasync time counts) and the flush's p50 and p99 latency in ms.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from brokergroup.broker.store.record import encode_record
from brokergroup.broker.store.segments import DEFAULT_PREWRITE, CommitLog

Step = Callable[[], Callable[[], None]]
"""Writes one put and returns the flush to time."""


def _measure(puts: int, setup: Callable[[Path], tuple[Step, Callable[[], None]]], directory: Path) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(dir=directory))
    try:
        step, close = setup(work)
        latencies = []
        before = resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(puts):
            flush = step()
            started = time.perf_counter()
            flush()
            latencies.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_SELF)
        close()
    finally:
        shutil.rmtree(work)
    latencies.sort()
    return {
        "sys_us_per_put": 1e6 * (after.ru_stime - before.ru_stime) / puts,
        "user_us_per_put": 1e6 * (after.ru_utime - before.ru_utime) / puts,
        "flush_p50_ms": 1e3 * latencies[len(latencies) // 2],
        "flush_p99_ms": 1e3 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
    }


def file_setup(puts: int, size: int, *, ahead: bool) -> Callable[[Path], tuple[Step, Callable[[], None]]]:
    block = b"x" * size

    def setup(work: Path) -> tuple[Step, Callable[[], None]]:
        fd = os.open(work / "file", os.O_RDWR | os.O_CREAT, 0o644)
        if ahead:
            os.pwrite(fd, bytes(puts * size), 0)
            os.fsync(fd)
        position = [0]

        def step() -> Callable[[], None]:
            os.pwrite(fd, block, position[0])
            position[0] += size
            return lambda: os.fdatasync(fd)

        return step, lambda: os.close(fd)

    return setup


def log_setup(size: int, *, prewrite: int) -> Callable[[Path], tuple[Step, Callable[[], None]]]:
    record = encode_record(topic="t", queue_id=0, body=b"x" * size, born_timestamp_ms=1, store_timestamp_ms=2)

    def setup(work: Path) -> tuple[Step, Callable[[], None]]:
        log = CommitLog(work, prewrite=prewrite)

        def step() -> Callable[[], None]:
            log.append([record])
            ticket, job = log.prepare_flush()

            def flush() -> None:
                job()
                log.complete_flush(ticket)

            return flush

        return step, log.close

    return setup


def run(*, puts: int, size: int, rounds: int, directory: Path) -> dict[str, Any]:
    variants: dict[str, Callable[[Path], tuple[Step, Callable[[], None]]]] = {
        "file append": file_setup(puts, size, ahead=False),
        "file ahead": file_setup(puts, size, ahead=True),
        "log prewrite=0": log_setup(size, prewrite=0),
        f"log prewrite={DEFAULT_PREWRITE}": log_setup(size, prewrite=DEFAULT_PREWRITE),
    }
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, setup in variants.items():
            samples[name].append(_measure(puts, setup, directory))
    return {
        "puts": puts,
        "size": size,
        "rounds": rounds,
        "directory": str(directory),
        "medians": {
            name: {key: round(statistics.median(s[key] for s in runs), 3) for key in runs[0]}
            for name, runs in samples.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m brokergroup.bench.prewrite", description=__doc__.split("\n")[0])
    parser.add_argument("--puts", type=int, default=2000, help="puts per variant and round (default 2000)")
    parser.add_argument("--size", type=int, default=1024, help="bytes per put (default 1024)")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds (default 3)")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="where to write (default /tmp)")
    args = parser.parse_args(argv)
    for name in ("puts", "size", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}={getattr(args, name)} must be at least 1")
    print(json.dumps(run(puts=args.puts, size=args.size, rounds=args.rounds, directory=args.dir), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
