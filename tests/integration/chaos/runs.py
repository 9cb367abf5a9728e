"""Running a chaos run from a test: its printed lines shown, its verdict and a dump for assertion messages."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from brokergroup.chaos.runner import ChaosRun, RunOptions


def run_chaos(options: RunOptions) -> tuple[dict[str, Any], dict[str, Any], str]:
    """`(result, verdict, shown)`: the run's result, its verdict, and the verdict's findings as JSON."""
    lines: list[str] = []
    result = asyncio.run(ChaosRun(options, lines.append).run())
    print("\n".join(lines))
    verdict: dict[str, Any] = result["verdict"]
    keys = ("anomalies", "examples", "failing", "incomplete")
    shown = json.dumps({k: verdict[k] for k in keys if k in verdict}, indent=1)
    return result, verdict, shown
