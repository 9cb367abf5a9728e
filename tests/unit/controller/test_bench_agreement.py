"""`brokergroup bench controller` fails (exit 1, the difference named) when the nodes' states differ."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from brokergroup.bench import controller as bench_controller


def fake_result(*, agreed: bool) -> dict[str, Any]:
    nodes = [
        {"node_id": f"n{i}", "term": 1, "last_applied": 9, "digest": ("a" if agreed or i else "b") * 64}
        for i in range(3)
    ]
    problem = "" if agreed else "states differ at last_applied 9: n0=bbbbbbbbbbbb, n1=aaaaaaaaaaaa, n2=aaaaaaaaaaaa"
    return {"results": {"agreement": {"agreed": agreed, "problem": problem, "nodes": nodes}}}


@pytest.mark.parametrize("agreed", [True, False])
def test_exit_status_follows_the_agreement(
    agreed: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def fake_bench(**_kwargs: Any) -> dict[str, Any]:
        return fake_result(agreed=agreed)

    monkeypatch.setattr(bench_controller, "bench", fake_bench)
    args = argparse.Namespace(ops=1, concurrency=1, sets=1, failovers=1, rounds=1, baseline_tree=None, out=None)
    code = bench_controller.run(args)
    err = capsys.readouterr().err
    if agreed:
        assert code == 0 and not err
    else:
        assert code == 1
        assert "the controllers' Raft states differ" in err and "states differ at last_applied 9" in err
