"""`brokergroup audit fetch` against a real 3-node controller group, then `brokergroup audit` on
what it fetched: what a Kubernetes CronJob runs in one pod. Also the two endpoints it uses,
`GET /v1/eventlog` and `GET /v1/eventlog/{name}`, on bad names and on a half-written line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yarl
from pyspark.sql import SparkSession

from brokergroup import cli
from brokergroup.local.controllers import ControllerGroup, running_group
from brokergroup.local.ports import free_ports
from tests.integration.conftest import ADMIN_TOKEN, eventually
from tests.integration.controller.scenario import elect_and_grow, register_replicas
from tests.integration.controller.test_event_log import raft_of, read_log
from tests.integration.local.processes import brokergroup

SETS = ("set-a", "set-b")


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerGroup]:
    """Two broker sets registered, elected and grown; every node has logged the same raft events."""
    with running_group(tmp_path_factory.mktemp("fetch") / "controllers", admin_token=ADMIN_TOKEN) as group:
        asyncio.run(seed(group))
        yield group


async def seed(group: ControllerGroup) -> None:
    async with group.client() as client:
        for name in SETS:
            await register_replicas(client, name)
            await elect_and_grow(client, name)

    async def logged_everywhere() -> bool:
        ids = [{r["eventId"] for r in raft_of(read_log(group, i))} for i in range(len(group.nodes))]
        return all(len(i) == 2 * 5 for i in ids)  # per set: 3 APPLY_BROKER_ID, ELECT_MASTER, ALTER_SYNC_STATE_SET

    await eventually("every node logged both sets' raft events", logged_everywhere)


def on_disk(group: ControllerGroup, i: int) -> dict[str, bytes]:
    """Node i's event-log files as the controller wrote them, each cut after its last newline."""
    files = sorted((group.nodes[i].data_dir / "events").glob("events-*.jsonl"))
    return {p.name: complete_lines(p.read_bytes()) for p in files}


def complete_lines(data: bytes) -> bytes:
    return data[: data.rfind(b"\n") + 1]


def urls(group: ControllerGroup) -> list[str]:
    return [f"http://{node.api}" for node in group.nodes]


def fetch(*args: str) -> subprocess.CompletedProcess[str]:
    return brokergroup("audit", "fetch", *args, timeout=120)


def controller_flags(addresses: list[str]) -> list[str]:
    return [flag for url in addresses for flag in ("--controller", url)]


def fetched(out: Path, node: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / node).iterdir())}


# ---- the CronJob's two commands ---------------------------------------------------------------


def test_fetch_gets_every_nodes_log_resumes_and_the_audit_reads_it(
    group: ControllerGroup, spark: SparkSession, tmp_path: Path
) -> None:
    out = tmp_path / "events"
    started = time.monotonic()
    first = fetch(*controller_flags(urls(group)), "--out", str(out), "--json")
    seconds = time.monotonic() - started
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["ok"] is True
    assert [c["nodeId"] for c in summary["controllers"]] == [n.node_id for n in group.nodes]
    for i, node in enumerate(group.nodes):
        # byte for byte what the controller wrote, up to its last newline; nothing else in the folder
        assert fetched(out, node.node_id) == on_disk(group, i), node.node_id
        report = summary["controllers"][i]
        assert report["error"] is None
        assert report["downloaded"] == report["files"] == len(on_disk(group, i)) > 0
        assert report["bytes"] == report["downloadedBytes"] == sum(map(len, on_disk(group, i).values()))
    assert sorted(p.name for p in out.iterdir()) == sorted(n.node_id for n in group.nodes)
    print(f"fetched {summary['files']} files, {summary['bytes']} bytes from 3 controllers in {seconds:.2f} s")

    again = fetch(*controller_flags(urls(group)), "--out", str(out))
    assert again.returncode == 0, again.stderr
    lines = again.stdout.splitlines()
    assert len(lines) == 3
    for line, node in zip(lines, group.nodes, strict=True):
        assert line.startswith(f"http://{node.api} {node.node_id}: "), line
        assert "(0 downloaded, 0 bytes; " in line, line

    report = tmp_path / "report"
    started = time.monotonic()
    code = cli.main(["audit", str(out), "--out", str(report), "--fail-on-violations", "--no-report"])
    print(f"audit of the fetched logs: {time.monotonic() - started:.1f} s")
    assert code == 0
    audited = json.loads((report / "summary.json").read_text())
    assert audited["input"]["events"] >= 2 * 5
    assert audited["input"]["duplicates"] > 0  # every node's copy of the raft events was read
    assert audited["input"]["corrupt"] == audited["input"]["invalid"] == 0
    assert audited["findings"]["violations"] == 0
    assert audited["crossCheck"]["status"] == "agree"
    elections = spark.read.parquet(str(report / "tables" / "elections")).collect()
    assert sorted(r["brokerName"] for r in elections) == sorted(SETS)


def test_a_local_copy_is_fetched_again_when_smaller_and_kept_when_larger(
    group: ControllerGroup, tmp_path: Path
) -> None:
    out = tmp_path / "events"
    assert fetch(*controller_flags(urls(group)), "--out", str(out)).returncode == 0
    node = group.nodes[0].node_id
    shrunk, grown = sorted((out / node).iterdir())[0], sorted((out / group.nodes[1].node_id).iterdir())[0]
    original = shrunk.read_bytes()
    shrunk.write_bytes(original[: len(original) // 2])
    grown.write_bytes(grown.read_bytes() + b'{"extra": true}\n')
    kept = grown.read_bytes()

    result = fetch(*controller_flags(urls(group)), "--out", str(out), "--json")
    assert result.returncode == 1
    summary = json.loads(result.stdout)
    first, second, third = summary["controllers"]
    assert (first["downloaded"], first["error"]) == (1, None)
    assert shrunk.read_bytes() == original
    assert f"{grown}: the local copy ({len(kept)} bytes) is larger than the controller's file" in second["error"]
    assert grown.read_bytes() == kept  # never overwritten
    assert (third["error"], third["downloaded"]) == (None, 0)
    assert f"brokergroup audit fetch: {second['url']}: {grown}: the local copy" in result.stderr
    assert not list(out.rglob(".*.part"))


# ---- controllers that do not answer -----------------------------------------------------------


def test_an_unreachable_controller_fails_the_fetch_unless_partial_is_allowed(
    group: ControllerGroup, tmp_path: Path
) -> None:
    (port,) = free_ports(1, "127.0.0.1")
    dead = f"http://127.0.0.1:{port}"
    addresses = [urls(group)[0], dead, urls(group)[2]]
    out = tmp_path / "events"

    strict = fetch(*controller_flags(addresses), "--out", str(out), "--timeout", "5")
    assert strict.returncode == 1
    assert f"brokergroup audit fetch: {dead}: cannot reach the controller" in strict.stderr
    assert "1 of 3 controllers failed (--allow-partial accepts that" in strict.stderr
    kept = {n.node_id for i, n in enumerate(group.nodes) if i != 1}
    assert {p.name for p in out.iterdir()} == kept  # what the others gave is left in place
    for i in (0, 2):
        assert fetched(out, group.nodes[i].node_id) == on_disk(group, i)

    partial = fetch(*controller_flags(addresses), "--out", str(out), "--allow-partial")
    assert partial.returncode == 0, partial.stderr
    assert f"brokergroup audit fetch: warning: {dead}: cannot reach the controller" in partial.stderr
    assert f"{dead} ?: 0 files" in partial.stdout

    nobody = fetch("--controller", dead, "--out", str(tmp_path / "none"), "--allow-partial")
    assert nobody.returncode == 1
    assert dead in nobody.stderr


# ---- the endpoints ----------------------------------------------------------------------------


async def get(http: aiohttp.ClientSession, address: str, path: str) -> tuple[int, str, bytes]:
    url = yarl.URL(f"http://{address}{path}", encoded=True)  # as given: no normalising of `..` or `%2F`
    async with http.get(url) as response:
        return response.status, response.content_type, await response.read()


async def test_the_listing_and_a_file_serve_complete_lines_only(group: ControllerGroup) -> None:
    node = group.nodes[1]
    extra = node.data_dir / "events" / f"events-{node.node_id}-999999.jsonl"  # after the writer's own files
    first_line = next(iter(on_disk(group, 1).values())).splitlines(keepends=True)[0]
    extra.write_bytes(first_line + b'{"schemaVersion":1,"eventId":"half-writ')
    try:
        async with aiohttp.ClientSession() as http:
            status, content_type, body = await get(http, node.api, "/v1/eventlog")
            assert (status, content_type) == (200, "application/json")
            listing: dict[str, Any] = json.loads(body)
            expected = [{"name": n, "size": len(d)} for n, d in on_disk(group, 1).items()]
            assert listing == {"nodeId": node.node_id, "files": expected}
            assert listing["files"][-1] == {"name": extra.name, "size": len(first_line)}

            status, content_type, body = await get(http, node.api, f"/v1/eventlog/{extra.name}")
            assert (status, content_type, body) == (200, "application/x-ndjson", first_line)
            name, data = next(iter(on_disk(group, 1).items()))
            assert await get(http, node.api, f"/v1/eventlog/{name}") == (200, "application/x-ndjson", data)
    finally:
        extra.unlink()


@pytest.mark.parametrize(
    ("path", "status", "remark"),
    [
        ("/v1/eventlog/events-n1-000042.jsonl", 404, "no event-log file 'events-n1-000042.jsonl' on node n1"),
        ("/v1/eventlog/events-n0-000000.jsonl", 404, "no event-log file 'events-n0-000000.jsonl' on node n1"),
        ("/v1/eventlog/node.json", 404, "GET /v1/eventlog lists them"),
        ("/v1/eventlog/..%2F..%2Fraft.journal", 400, "path parameter name must be a file name"),
        ("/v1/eventlog/..%2Fn0%2Fevents%2Fevents-n0-000000.jsonl", 400, "(got '../n0/events/events-n0-000000.jsonl')"),
        ("/v1/eventlog/%2e%2e", 400, "(got '..')"),
        ("/v1/eventlog/.events-n1-000000.jsonl", 400, "path parameter name"),
        ("/v1/eventlog/events%20n1.jsonl", 400, "path parameter name"),
        ("/v1/eventlog/../../etc/passwd", 404, "Not Found"),  # not this route at all
    ],
)
async def test_bad_file_names_are_refused(group: ControllerGroup, path: str, status: int, remark: str) -> None:
    node = group.nodes[1]
    assert node.node_id == "n1"
    async with aiohttp.ClientSession() as http:
        answer = await get(http, node.api, path)
    assert answer[:2] == (status, "application/json"), answer
    body = json.loads(answer[2])
    assert body["code"] == (2005 if status == 400 else 3)
    assert remark in body["remark"]
