"""Latency summaries and machine facts for benchmark JSON."""

from __future__ import annotations

import os
import platform
import statistics
from collections.abc import Sequence
from typing import Any


def summarize(latencies_s: Sequence[float], elapsed_s: float) -> dict[str, Any]:
    if not latencies_s:
        return {"ops": 0}
    ordered = sorted(latencies_s)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000, 3)

    return {
        "ops": len(ordered),
        "seconds": round(elapsed_s, 3),
        "ops_per_s": round(len(ordered) / elapsed_s, 1),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "max_ms": round(ordered[-1] * 1000, 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
    }


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
