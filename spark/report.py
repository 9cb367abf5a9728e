"""The HTML report: the summary's numbers, the findings, and three PNG charts.

- `mttr.png`: how long recovered incidents took (log-spaced histogram);
- `elections.png`: elections per UTC day, stacked by result;
- `risk-windows.png`: every risk window as (start, duration), with the `long` limit drawn.

Charts are drawn with matplotlib's object API (no pyplot, no global state). Large inputs are
sampled down to `MAX_POINTS` rows before they leave Spark; the page says so. The elections per
day come with the summary's query (`load.summary_values`); the risk windows are collected once,
for the chart and the table of the longest, when they fit.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

MAX_POINTS = 200_000
RESULT_COLORS = {"new_master_elected": "#4c72b0", "no_master_elected": "#c44e52", "keep_current_master": "#8c8c8c"}


def sample(df: DataFrame, total: int) -> tuple[DataFrame, bool]:
    if total <= MAX_POINTS:
        return df, False
    return df.sample(fraction=MAX_POINTS / total, seed=1), True


def mttr_chart(incidents: DataFrame, path: Path, total: int) -> str:
    df, sampled = sample(incidents.where(F.col("recovered")).select("durationMs"), total)
    values = [max(1, int(r[0])) for r in df.collect()]
    fig = Figure(figsize=(8, 3.2))
    ax = fig.subplots()
    if values:
        top = math.log10(max(values)) + 0.1
        bins = [10 ** (i * top / 40) for i in range(41)]
        ax.hist(values, bins=bins, color="#4c72b0")
        ax.set_xscale("log")
    ax.set_xlabel("time to recover (ms, log scale)")
    ax.set_ylabel("incidents")
    ax.set_title("Time to recover: first logged master loss to the next master")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return "sampled" if sampled else ""


def elections_chart(rows: list[dict[str, Any]], path: Path) -> None:
    """`rows`: (day, electionResult, n), elections per UTC day and result."""
    days = sorted({r["day"] for r in rows})
    fig = Figure(figsize=(8, 3.2))
    ax = fig.subplots()
    bottom = [0] * len(days)
    for result, color in RESULT_COLORS.items():
        counts = {r["day"]: r["n"] for r in rows if r["electionResult"] == result}
        heights = [counts.get(d, 0) for d in days]
        if any(heights):
            ax.bar([str(d) for d in days], heights, bottom=bottom, color=color, label=result)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    if days:
        ax.legend(fontsize=8)
    ax.set_ylabel("elections")
    ax.set_title("Elections per UTC day, by result")
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


RISK_COLUMNS = ["brokerName", "startMs", "durationMs", "open", "minSize", "masterBrokerId", "term", "index"]


def risk_rows(windows: DataFrame, total: int) -> tuple[list[tuple[int, int]], list[dict[str, Any]], str]:
    """(start and duration of every window, or a sample; the 20 longest; the chart's note)."""
    if total <= MAX_POINTS:
        rows = [r.asDict() for r in windows.select(*RISK_COLUMNS).collect()]
        longest = sorted(rows, key=lambda r: -r["durationMs"])[:20]
        return [(r["startMs"], r["durationMs"]) for r in rows], longest, ""
    df, _ = sample(windows.select("startMs", "durationMs"), total)
    points = [(r[0], r[1]) for r in df.collect()]
    longest = [r.asDict() for r in windows.select(*RISK_COLUMNS).orderBy(F.desc("durationMs")).limit(20).collect()]
    return points, longest, "sampled"


def risk_chart(rows: list[tuple[int, int]], path: Path, long_s: float) -> None:
    fig = Figure(figsize=(8, 3.2))
    ax = fig.subplots()
    if rows:
        starts = [r[0] / 86_400_000 for r in rows]  # matplotlib date numbers: days since 1970-01-01 UTC
        ax.scatter(starts, [max(r[1], 1) / 1000 for r in rows], s=6, color="#dd8452")
        ax.xaxis_date()
        ax.set_yscale("log")
    ax.axhline(long_s, color="#c44e52", linestyle="--", linewidth=1, label=f"long ({long_s:g} s)")
    ax.legend(fontsize=8)
    ax.set_ylabel("duration (s, log scale)")
    ax.set_title("Risk windows: sync-state-set below the threshold, by start time")
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape('' if r.get(c) is None else str(r.get(c)))}</td>" for c in columns)
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def write(
    out: Path,
    summary: dict[str, Any],
    tables: dict[str, DataFrame],
    elections_by_day: list[dict[str, Any]],
    *,
    long_s: float,
) -> Path:
    """Write report.html and its charts into `out`; returns the page's path."""
    points, longest, risk_note = risk_rows(tables["risk_windows"], summary["riskWindows"]["count"])
    risk_chart(points, out / "risk-windows.png", long_s)
    notes = {
        "mttr": mttr_chart(tables["incidents"], out / "mttr.png", summary["incidents"]["total"]),
        "risk": risk_note,
    }
    elections_chart(elections_by_day, out / "elections.png")
    findings = [
        r.asDict()
        for r in tables["findings"].orderBy(F.desc("severity"), "kind", "brokerName", "ts").limit(200).collect()
    ]
    mttr_rows = [{"scope": "all", "key": "all", **(summary["incidents"]["mttrMs"] or {})}] + [
        {"scope": "cause", "key": k, **v} for k, v in summary["incidents"]["perCause"].items()
    ]
    inp, f = summary["input"], summary["findings"]
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>brokergroup audit</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:70em}} table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:left}} .v{{color:#c44e52}}</style></head><body>
<h1>brokergroup controller event-log audit</h1>
<p>{inp["lines"]} lines, {inp["events"]} events ({inp["duplicates"]} duplicate copies, {inp["corrupt"]} corrupt and
{inp["invalid"]} invalid lines) from {html.escape(str(inp["from"]))} to {html.escape(str(inp["to"]))},
{inp["sets"]} broker sets.</p>
<h2>Findings: <span class="v">{f["violations"]} violations</span>, {f["warnings"]} warnings</h2>
{table(findings, ["severity", "kind", "brokerName", "brokerId", "node", "term", "index", "ts", "value", "detail"])}
<h2>Time to recover</h2>
<p>{summary["incidents"]["total"]} incidents, {summary["incidents"]["open"]} still open when the log ends.
{notes["mttr"]}</p>
<img src="mttr.png" alt="MTTR distribution">
{table(mttr_rows, ["scope", "key", "incidents", "open", "p50Ms", "p90Ms", "p99Ms", "maxMs"])}
<h2>Elections</h2>
<img src="elections.png" alt="elections per day">
<pre>{html.escape(str(summary["elections"]))}</pre>
<h2>Risk windows</h2>
<p>{html.escape(str(summary["riskWindows"]))} {notes["risk"]}</p>
<img src="risk-windows.png" alt="risk windows">
{table(longest, ["brokerName", "startMs", "durationMs", "open", "minSize", "masterBrokerId", "term", "index"])}
<h2>Controller</h2>
<pre>{html.escape(str(summary["controller"]))}</pre>
</body></html>
"""
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
