"""The chart ships the CRDs of the top-level crds/ (the single source), byte for byte, and nothing else."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "crds"
CHART = ROOT / "charts" / "brokergroup" / "crds"


def test_chart_crds_are_the_top_level_crds() -> None:
    source = {p.name: p.read_bytes() for p in SOURCE.glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in CHART.iterdir()}
    assert source, SOURCE
    assert sorted(chart) == sorted(source), "run: cp crds/*.yaml charts/brokergroup/crds/"
    for name, text in source.items():
        assert chart[name] == text, (
            f"charts/brokergroup/crds/{name} differs from crds/{name}: cp crds/*.yaml charts/brokergroup/crds/"
        )
