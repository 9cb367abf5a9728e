"""`brokergroup bench produce`'s arguments and per-phase numbers (the run itself needs real processes)."""

from __future__ import annotations

import argparse

import pytest

from brokergroup.bench import produce


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    produce.add_parser(parser.add_subparsers())
    return parser.parse_args(["produce", *argv])


@pytest.mark.parametrize(
    ("argv", "protocols"),
    [((), ["binary"]), (("--protocol", "http"), ["http"]), (("--protocol", "both"), ["binary", "http"])],
)
def test_protocol_defaults_to_binary_and_both_alternates(argv: tuple[str, ...], protocols: list[str]) -> None:
    params = produce.validate(parse(*argv))
    assert isinstance(params, produce.Params)
    assert params.protocols == protocols
    assert params.as_json()["protocols"] == protocols


def test_unknown_protocol_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--protocol", "grpc")
    assert "invalid choice: 'grpc'" in capsys.readouterr().err


def test_cpu_per_message_sums_every_process() -> None:
    cpu = {"master": 50.0, "slave1": 20.0, "client (this process)": 30.0, "total": 100.0, "kernel": {}}
    result = produce.phase_result([0.01] * 100, 2.0, messages=400, size=10, retries=0, cpu=cpu)
    assert result["msgs_per_s"] == 200.0
    assert result["cpu_ms_per_message"] == 5.0  # one core for 2 s over 400 messages
