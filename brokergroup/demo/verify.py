"""Was anything acknowledged lost or duplicated? The demo's verdict on its history.

The history (sends and the final read-back of every set) and the controllers' event log go to
the chaos harness's checker (`brokergroup.chaos.checker`), which also looks for inconsistent
offsets and split brain. Should that module be missing, a minimal check of lost and duplicated
messages stands in. Pure.
"""

from __future__ import annotations

import collections
import importlib
from collections.abc import Iterable, Sequence
from typing import Any

Op = dict[str, Any]
SHOWN = ("lost", "duplicated", "unexpected", "inconsistentOffsets", "splitBrain", "epochRegressions")


def verdict(ops: Sequence[Op], events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """`{valid, anomalies: {lost, duplicated, ...}, examples, stats, checker}`."""
    try:
        checker = importlib.import_module("brokergroup.chaos.checker")
    except ImportError:
        return {**minimal_check(ops), "checker": "minimal (brokergroup.chaos.checker not installed)"}
    result: dict[str, Any] = checker.check(ops, list(events))
    return {**result, "checker": "brokergroup.chaos.checker"}


def minimal_check(ops: Sequence[Op]) -> dict[str, Any]:
    """Acknowledged sends never read are lost; a message read at two offsets is duplicated."""
    acked = {_key(op["value"]) for op in ops if op["f"] == "send" and op["type"] == "ok"}
    offsets: dict[tuple[str, int, int], set[int]] = collections.defaultdict(set)
    for op in ops:
        if op["f"] == "poll" and op["type"] == "ok":
            queue = str(op["value"]["queue"])
            for offset, producer_id, seq in op["value"]["messages"]:
                offsets[(queue, int(producer_id), int(seq))].add(int(offset))
    lost = sorted(acked - set(offsets))
    duplicated = sorted(m for m, at in offsets.items() if len(at) > 1)
    anomalies = {"lost": len(lost), "duplicated": len(duplicated)}
    return {
        "valid": not lost and not duplicated,
        "anomalies": anomalies,
        "examples": {"lost": [list(m) for m in lost[:10]], "duplicated": [list(m) for m in duplicated[:10]]},
        "stats": {"sendsOk": len(acked), "distinctMessagesRead": len(offsets)},
    }


def _key(value: dict[str, Any]) -> tuple[str, int, int]:
    return (str(value["queue"]), int(value["producerId"]), int(value["seq"]))


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
