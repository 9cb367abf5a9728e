"""`brokergroup bench produce`'s retention A/B (issue 18): its arguments, the `on` set's broker flags, and the
summary of alternated phases (the run itself needs real processes: docs/benchmarks.md has its command)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from brokergroup.bench import produce
from brokergroup.broker.cmd import add_parsers
from brokergroup.broker.settings import BrokerSettings
from brokergroup.common.settings import deep_merge, load_settings, nested, parse_overrides


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    produce.add_parser(parser.add_subparsers())
    return parser.parse_args(["produce", *argv])


def test_retention_options_make_an_ab_run() -> None:
    params = produce.validate(parse("--retention-bytes", "2097152", "--segment-bytes", "1048576", "--rounds", "2"))
    assert isinstance(params, produce.Params)
    assert params.retention == produce.Retention(
        retention_ms=None, retention_bytes=2097152, segment_bytes=1048576, check_interval_ms=200, rounds=2
    )
    assert params.as_json()["retention"]["retention_bytes"] == 2097152
    plain = produce.validate(parse())
    assert isinstance(plain, produce.Params) and plain.retention is None and plain.baseline


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--retention-ms", "999"), "--retention-ms must be at least 1000"),
        (("--retention-bytes", "100"), "--retention-bytes must be at least 4096"),
        (("--retention-ms", "5000", "--segment-bytes", "1000"), "--segment-bytes must be within 4096..2^31"),
        (("--retention-ms", "5000", "--segment-bytes", "4096", "--size", "8000"), "must hold a message of --size"),
        (("--retention-ms", "5000", "--rounds", "0"), "--rounds must be within 1..20"),
        (
            (
                "--rounds",
                "2",
            ),
            "--rounds and --segment-bytes are for a retention A/B run",
        ),
    ],
)
def test_bad_retention_options_are_refused(argv: tuple[str, ...], message: str) -> None:
    refused = produce.validate(parse(*argv))
    assert isinstance(refused, str) and message in refused, refused


def test_the_on_set_gets_retention_and_both_the_segment_size() -> None:
    """The flags as the broker's own command line parses them: only retention differs between the sets."""
    retention = produce.Retention(
        retention_ms=60_000, retention_bytes=4 << 20, segment_bytes=1 << 20, check_interval_ms=200, rounds=3
    )

    def settings(flags: list[str]) -> BrokerSettings:
        parser = argparse.ArgumentParser()
        add_parsers(parser.add_subparsers(dest="command"))
        args = parser.parse_args(["broker", *flags])
        given = {k: v for k, v in vars(args).items() if k not in ("config", "func", "overrides", "command")}
        loaded = load_settings(BrokerSettings, flags=deep_merge(nested(given), parse_overrides(args.overrides)))
        assert isinstance(loaded, BrokerSettings)
        return loaded

    off = settings(retention.segment_flags())
    on = settings(retention.segment_flags() + retention.flags())
    assert off.store.segment_size == on.store.segment_size == 1 << 20
    assert (off.store.retention_ms, off.store.retention_bytes) == (None, None)
    assert (on.store.retention_ms, on.store.retention_bytes, on.store.retention_check_interval_ms) == (
        60_000,
        4 << 20,
        200,
    )


def phase(round_: int, kind: str, variant: str, msgs: float, cpu: float, deleted: int) -> dict[str, Any]:
    return {
        "round": round_,
        "phase": kind,
        "retention": variant,
        "msgs_per_s": msgs,
        "cpu_ms_per_message": cpu,
        "segments_deleted_on_master": deleted,
    }


def test_summary_takes_medians_and_ratios_on_over_off() -> None:
    phases = [
        phase(1, "single", "off", 1000, 2.0, 0),
        phase(1, "single", "on", 950, 2.2, 3),
        phase(2, "single", "on", 1010, 2.0, 4),
        phase(2, "single", "off", 1000, 2.0, 0),
        phase(3, "single", "off", 1100, 1.8, 0),
        phase(3, "single", "on", 1045, 2.1, 4),
        *(phase(n, "batched", v, 5000, 0.5, 6 if v == "on" else 0) for n in (1, 2, 3) for v in ("off", "on")),
    ]
    summary = produce.summarize_ab(phases)
    single = summary["single"]
    assert single["off"] == {"msgs_per_s": 1000, "cpu_ms_per_message": 2.0, "segments_deleted_on_master": 0}
    assert single["on"] == {"msgs_per_s": 1010, "cpu_ms_per_message": 2.1, "segments_deleted_on_master": 11}
    assert single["msgs_per_s_ratio_on_off"] == 1.01
    assert single["cpu_per_message_ratio_on_off"] == 1.05
    assert single["msgs_per_s_ratio_per_round"] == [0.95, 1.01, 0.95]
    assert single["msgs_per_s_ratio_median_of_rounds"] == 0.95
    assert single["cpu_per_message_ratio_per_round"] == [1.1, 1.0, 1.167]
    assert single["cpu_per_message_ratio_median_of_rounds"] == 1.1
    assert summary["batched"]["msgs_per_s_ratio_on_off"] == 1.0
