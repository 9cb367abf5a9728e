"""The demo report's PNG charts (matplotlib's object API: no pyplot state, no display needed).

- `latency.png`: each write's latency over time, one colour per set, the fault marked and the
  failover window shaded;
- `throughput.png`: acknowledged writes per second per set;
- `timeline.png`: the failover steps on a millisecond scale from the fault.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from brokergroup.demo.model import Ack
from brokergroup.demo.timeline import Timeline

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")
FAULT = "#d62728"
BIN_S = 0.5


def write_all(out: Path, acks: Sequence[Ack], timeline: Timeline | None) -> dict[str, str]:
    """Write every chart; returns {chart: file name}."""
    start = min((a.invoked_ms for a in acks), default=0.0)
    files = {
        "latency": _save(latency(acks, timeline, start), out / "latency.png"),
        "throughput": _save(throughput(acks, timeline, start), out / "throughput.png"),
    }
    if timeline is not None:
        files["timeline"] = _save(failover(timeline), out / "timeline.png")
    return files


def _save(fig: Figure, path: Path) -> str:
    fig.savefig(path, dpi=110)
    return path.name


def _sets(acks: Sequence[Ack]) -> dict[str, list[Ack]]:
    by_set: dict[str, list[Ack]] = collections.defaultdict(list)
    for a in sorted(acks, key=lambda a: a.acked_ms):
        by_set[a.broker_set].append(a)
    return dict(sorted(by_set.items()))


def _mark_fault(ax: Axes, timeline: Timeline | None, start: float) -> None:
    if timeline is None:
        return
    fault_s = (timeline.fault.at_ms - start) / 1000
    ax.axvline(fault_s, color=FAULT, linestyle="--", linewidth=1.2, label=f"SIGKILL {timeline.fault.replica}")
    switched = timeline.step("switched")
    if switched is not None and timeline.last_ack_before_ms is not None:
        ax.axvspan(
            (timeline.last_ack_before_ms - start) / 1000,
            (switched.at_ms - start) / 1000,
            color=FAULT,
            alpha=0.15,
            label=f"no writes acknowledged on {timeline.fault.broker_set}",
        )


def latency(acks: Sequence[Ack], timeline: Timeline | None, start: float) -> Figure:
    fig = Figure(figsize=(9, 4.2))
    ax = fig.subplots()
    for colour, (name, rows) in zip(COLOURS, _sets(acks).items(), strict=False):
        ax.scatter(
            [(a.acked_ms - start) / 1000 for a in rows],
            [max(a.latency_ms, 0.01) for a in rows],
            s=4,
            color=colour,
            alpha=0.6,
            label=name,
        )
    _mark_fault(ax, timeline, start)
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the first write")
    ax.set_ylabel("produce latency (ms, log scale)")
    ax.set_title("Produce latency of every acknowledged write")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper right", fontsize=8, markerscale=3)
    fig.tight_layout()
    return fig


def throughput(acks: Sequence[Ack], timeline: Timeline | None, start: float) -> Figure:
    fig = Figure(figsize=(9, 3.8))
    ax = fig.subplots()
    end = max((a.acked_ms for a in acks), default=start)
    bins = max(int((end - start) / 1000 / BIN_S), 1)  # whole bins only: a partial last bin would read low or high
    for colour, (name, rows) in zip(COLOURS, _sets(acks).items(), strict=False):
        counts = [0] * bins
        for a in rows:
            index = int((a.acked_ms - start) / 1000 / BIN_S)
            if index < bins:
                counts[index] += 1
        ax.step(
            [i * BIN_S for i in range(bins + 1)],
            [c / BIN_S for c in [*counts, counts[-1]]],
            where="post",
            color=colour,
            label=name,
        )
    _mark_fault(ax, timeline, start)
    ax.set_xlabel("seconds since the first write")
    ax.set_ylabel(f"acknowledged writes / s ({int(BIN_S * 1000)} ms bins)")
    ax.set_title("Throughput per broker set")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def failover(timeline: Timeline) -> Figure:
    fig = Figure(figsize=(9, 0.9 + 0.55 * len(timeline.steps)))
    ax = fig.subplots()
    t0 = timeline.fault.at_ms
    steps = list(timeline.steps)
    ys = list(range(len(steps)))[::-1]
    xs = [s.at_ms - t0 for s in steps]
    ax.hlines(ys, 0, xs, color="#999999", linewidth=1)
    ax.scatter(xs, ys, s=60, color=[FAULT if s.key == "fault" else COLOURS[0] for s in steps], zorder=3)
    for x, y, s in zip(xs, ys, steps, strict=True):
        ax.annotate(f"  {s.title}: +{x:.0f} ms", (x, y), va="center", fontsize=9)
    switched = timeline.step("switched")
    if timeline.last_ack_before_ms is not None and switched is not None:
        before = timeline.last_ack_before_ms - t0
        ax.axvspan(before, switched.at_ms - t0, color=FAULT, alpha=0.08)
        ax.annotate(
            f"no writes acknowledged on {timeline.fault.broker_set}: {timeline.data_plane_ms:.0f} ms",
            (before, -0.55),
            fontsize=8,
            color=FAULT,
        )
    right = max([*xs, 1.0])
    ax.set_xlim(min(0.0, (timeline.last_ack_before_ms or t0) - t0) - right * 0.05, right * 1.6)
    ax.set_ylim(-0.7, len(steps) - 0.2)
    ax.set_yticks([])
    ax.set_xlabel("milliseconds since the fault")
    ax.set_title(f"Failover of {timeline.fault.broker_set}")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
