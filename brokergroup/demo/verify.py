"""Was anything acknowledged lost or duplicated? The demo's verdict on its history.

The history (sends and the final read-back of every set) and the controllers' event log go to
the chaos harness's checker (`brokergroup.chaos.checker`), which also looks for inconsistent
offsets and split brain. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from brokergroup.chaos import checker

Op = dict[str, Any]
SHOWN = ("lost", "duplicated", "unexpected", "inconsistentOffsets", "splitBrain", "epochRegressions")


def verdict(ops: Sequence[Op], events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """`{valid, anomalies: {lost, duplicated, ...}, examples, stats, checker}`."""
    return {**checker.check(ops, list(events)), "checker": "brokergroup.chaos.checker"}


def headline(result: dict[str, Any]) -> str:
    """One line: `4000 acknowledged, 4000 read back: 0 lost, 0 duplicated, ...`."""
    stats, anomalies = result.get("stats", {}), result["anomalies"]
    counts = ", ".join(f"{anomalies[k]} {_words(k)}" for k in SHOWN if k in anomalies)
    return f"{stats.get('sendsOk', '?')} acknowledged, {stats.get('distinctMessagesRead', '?')} read back: {counts}"


def _words(key: str) -> str:
    return {
        "inconsistentOffsets": "inconsistent offsets",
        "splitBrain": "split brain",
        "epochRegressions": "epoch regressions",
    }.get(key, key)
