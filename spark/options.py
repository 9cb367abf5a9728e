"""The audit's command-line flags, shared by `brokergroup audit DIR` (`cli`) and the spark-submit
entry (`job.main`).

No Spark import here: `brokergroup --help` and `brokergroup audit generate` build this parser
without the `audit` extra installed (docs/images.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
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
    a.add_argument(
        "--explain", action="store_true", help="print the run's Spark jobs, stages and shuffle bytes (also in summary)"
    )


def pick(value: Any, default: Any) -> Any:
    return default if value is None else value
