"""The demo's results: `summary.json` (for machines) and `report.html` (for people). Pure builders
plus `write`, which puts both in the output folder."""

from __future__ import annotations

import dataclasses
import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from brokergroup.demo.model import Ack, AuditOutcome
from brokergroup.demo.timeline import Timeline
from brokergroup.demo.verify import headline


@dataclasses.dataclass(frozen=True)
class DemoResult:
    cluster: dict[str, Any]
    """Topology, profile and mode."""
    acks: Sequence[Ack]
    indeterminate: int
    timeline: Timeline | None
    verdict: dict[str, Any]
    audit: AuditOutcome
    charts: dict[str, str]
    durations: dict[str, float]
    """Seconds per phase."""

    @property
    def ok(self) -> bool:
        timeline_ok = self.timeline is not None and self.timeline.complete and self.timeline.ordered
        return bool(self.verdict["valid"]) and timeline_ok and self.audit.violations == 0


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def per_set(acks: Sequence[Ack]) -> list[dict[str, Any]]:
    rows = []
    for name in sorted({a.broker_set for a in acks}):
        mine = [a for a in acks if a.broker_set == name]
        span_s = max((max(a.acked_ms for a in mine) - min(a.invoked_ms for a in mine)) / 1000, 1e-3)
        latencies = [a.latency_ms for a in mine]
        rows.append(
            {
                "set": name,
                "acknowledged": len(mine),
                "perSecond": round(len(mine) / span_s, 1),
                "p50Ms": round(percentile(latencies, 0.5), 2),
                "p99Ms": round(percentile(latencies, 0.99), 2),
                "maxMs": round(max(latencies), 2),
                "retried": sum(1 for a in mine if a.attempts > 1),
            }
        )
    return rows


def summary(result: DemoResult) -> dict[str, Any]:
    anomalies = result.verdict["anomalies"]
    return {
        "ok": result.ok,
        "cluster": result.cluster,
        "acknowledged": len(result.acks),
        "indeterminate": result.indeterminate,
        "lost": anomalies.get("lost", 0),
        "duplicated": anomalies.get("duplicated", 0),
        "verification": result.verdict,
        "timeline": result.timeline.wire() if result.timeline else None,
        "sets": per_set(result.acks),
        "audit": result.audit.wire(),
        "charts": result.charts,
        "durationsSeconds": {k: round(v, 2) for k, v in result.durations.items()},
    }


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1000px; color: #222; }
h1 { margin-bottom: 0.2em; } .sub { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; } th, td { padding: 4px 10px; text-align: left; }
th { background: #f0f0f0; } tr:nth-child(even) td { background: #fafafa; } td.num { text-align: right; }
.ok { color: #2a7a2a; font-weight: bold; } .bad { color: #b00020; font-weight: bold; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0 1.5em; } code { background: #f4f4f4; padding: 1px 4px; }
"""


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{v}</td>' if isinstance(v, int | float) else f"<td>{html.escape(str(v))}</td>"
            for v in row
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(result: DemoResult) -> str:
    s = summary(result)
    cluster = result.cluster
    verdict_class = "ok" if result.verdict["valid"] else "bad"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>brokergroup demo report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>brokergroup demo: kill -9 a master under load</h1>",
        f"<p class='sub'>{cluster['controllers']} controllers, {cluster['sets']} broker sets &times; "
        f"{cluster['replicas']} replicas, {html.escape(cluster['mode'])} replication, "
        f"{html.escape(cluster['profile'])} timing profile &middot; {html.escape(cluster['startedAt'])}</p>",
        f"<h2>Verdict: <span class='{verdict_class}'>{html.escape(headline(result.verdict))}</span></h2>",
        f"<p>{s['indeterminate']} writes were never acknowledged (indeterminate). "
        f"Checked by <code>{html.escape(str(result.verdict.get('checker')))}</code>.</p>",
    ]
    if result.timeline is not None:
        t = result.timeline
        parts += [
            f"<h2>Failover timeline of {html.escape(t.fault.broker_set)}</h2>",
            f"<p>Control plane (fault &rarr; elected): <b>{_ms(t.control_plane_ms)}</b>; data plane (last "
            f"acknowledged write before &rarr; first after): <b>{_ms(t.data_plane_ms)}</b>.</p>",
            _table(
                ["step", "+ms since the fault", "what"],
                [(st.title, round(st.at_ms - t.fault.at_ms, 1), st.detail) for st in t.steps],
            ),
        ]
    parts += [_img(result.charts, "timeline", "failover timeline")]
    parts += ["<h2>Traffic</h2>", _img(result.charts, "latency", "latency"), _img(result.charts, "throughput", "tput")]
    parts.append(
        _table(
            ["set", "acknowledged", "writes/s", "p50 ms", "p99 ms", "max ms", "retried"],
            [
                (r["set"], r["acknowledged"], r["perSecond"], r["p50Ms"], r["p99Ms"], r["maxMs"], r["retried"])
                for r in s["sets"]
            ],
        )
    )
    parts += ["<h2>Verification</h2>", _table(["anomaly", "count"], sorted(result.verdict["anomalies"].items()))]
    audit_link = f" (<a href='{html.escape(result.audit.report)}'>audit report</a>)" if result.audit.report else ""
    parts += ["<h2>Event-log audit</h2>", f"<p>{html.escape(result.audit.line)}{audit_link}</p>"]
    parts += [
        "<h2>Files</h2><ul>",
        "<li><code>summary.json</code>: everything on this page as data</li>",
        "<li><code>history.jsonl</code>: every send and read (the chaos harness's history format)</li>",
        "<li><code>acks.jsonl</code>: every acknowledgement with its times and master</li>",
        "<li><code>event-logs/</code>: the controllers' event logs; <code>cluster/</code>: data and process logs</li>",
        "</ul>",
        "<h2>Phases</h2>",
        _table(["phase", "seconds"], [(k, round(v, 1)) for k, v in result.durations.items()]),
        "</body></html>",
    ]
    return "\n".join(parts)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} ms"


def _img(charts: dict[str, str], key: str, alt: str) -> str:
    return f"<img src='{html.escape(charts[key])}' alt='{alt}'>" if key in charts else ""


def write(out: Path, result: DemoResult) -> dict[str, Any]:
    data = summary(result)
    (out / "summary.json").write_text(json.dumps(data, indent=2) + "\n")
    (out / "report.html").write_text(render_html(result))
    with (out / "acks.jsonl").open("w") as f:
        for a in result.acks:
            f.write(json.dumps(a.wire(), separators=(",", ":")) + "\n")
    return data
