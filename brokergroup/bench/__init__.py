"""`brokergroup bench`: benchmarks that print JSON, each with a baseline measured in the same run."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    from brokergroup.bench import controller, failover, produce, rocketmq

    bench: argparse.ArgumentParser = sub.add_parser("bench", help="benchmarks (JSON output)")
    kinds = bench.add_subparsers(dest="bench_command", metavar="BENCHMARK", required=True)
    controller.add_parser(kinds)
    produce.add_parser(kinds)
    failover.add_parser(kinds)
    rocketmq.add_parser(kinds)
    from brokergroup.spark import cli as audit_cli

    audit_cli.add_bench_parser(kinds)
