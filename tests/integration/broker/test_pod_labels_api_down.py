"""A broker whose Kubernetes API patch is refused or times out keeps serving its role (issue 15, bad input).

Three controllers and a sync broker set of three replicas, real processes, each broker with `kubernetes.enabled`
and a kubeconfig naming a stand-in for the Kubernetes API (an HTTP server of this test: the API server is
outside the system under test). The stand-in first refuses every pod patch (403, as RBAC would), then lets
every patch hang past the broker's request timeout, then accepts. Throughout:

- a master is elected and every put to it is acknowledged by the sync-state-set (replication and acks never
  wait for the Kubernetes API), each within a bound far below a patch's timeout plus back-off;
- each broker says so once in its log, counts every failure by result in
  `brokergroup_broker_pod_label_patches_total{result}` and reports `brokergroup_broker_pod_label_in_sync 0`;
- `/readyz` stays 503 until the first patch landed (a restarted old master must not turn Ready while its pod
  may still carry `role=master`), then turns 200, and the labels catch up with each replica's role.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from brokergroup.local.brokers import BrokerProcess, BrokerSet
from brokergroup.local.controllers import ControllerGroup
from tests.integration.broker.conftest import FAST, SYNC
from tests.integration.conftest import eventually

NAMESPACE = "apps"
REQUEST_TIMEOUT_MS = 300
PUT_BOUND_S = 2.0
"""A put must be acknowledged well within this; a patch attempt alone may take REQUEST_TIMEOUT_MS and the
back-off grows to 5 s, so a put that waited for the API would exceed it."""


@dataclass
class FakeApi:
    """The Kubernetes API's pod PATCH, as far as the broker uses it: `mode` is refuse, hang or accept."""

    mode: str = "refuse"
    patches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """(pod, merge patch) of every accepted patch."""
    lock: threading.Lock = field(default_factory=threading.Lock)


def serve(api: FakeApi) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_PATCH(self) -> None:
            parts = self.path.split("?")[0].strip("/").split("/")
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if parts[:3] != ["api", "v1", "namespaces"] or len(parts) != 6 or parts[4] != "pods":
                self._answer(404, {"kind": "Status", "status": "Failure", "code": 404, "reason": "NotFound"})
                return
            mode = api.mode
            if mode == "refuse":
                status = {"kind": "Status", "status": "Failure", "code": 403, "reason": "Forbidden"}
                self._answer(403, status)
            elif mode == "hang":
                time.sleep(REQUEST_TIMEOUT_MS / 1000 * 3)
                self._answer(504, {"kind": "Status", "status": "Failure", "code": 504, "reason": "Timeout"})
            else:
                with api.lock:
                    api.patches.append((parts[5], body))
                self._answer(200, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": parts[5]}})

        def _answer(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the broker gave up waiting (the hang mode's point)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="fake-kube-api", daemon=True).start()
    return server


def kubeconfig(path: Path, port: int) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "broker", "user": {"token": "broker-token"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "broker"}}],
                "current-context": "fake",
            }
        )
    )
    return path


class PodBrokerSet(BrokerSet):
    """A broker set whose replicas label pods `<set>-<i>` in NAMESPACE through the kubeconfig's API."""

    def __init__(self, *args: Any, config: Path, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.config = config

    def command(self, node: BrokerProcess) -> list[str]:
        return [
            *super().command(node),
            *("--set", "kubernetes.enabled=true", "--pod-name", node.name, "--pod-namespace", NAMESPACE),
            *("--set", f"kubernetes.kubeconfig={self.config}"),
            *("--set", f"kubernetes.request_timeout_ms={REQUEST_TIMEOUT_MS}"),
        ]


@pytest.fixture
def api() -> Iterator[tuple[FakeApi, int]]:
    fake = FakeApi()
    server = serve(fake)
    yield fake, server.server_address[1]
    server.shutdown()
    server.server_close()


def metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        key, _, value = line.rpartition(" ")
        if key == name or (key.startswith(name + "{") and all(f'{k}="{v}"' in key for k, v in labels.items())):
            return float(value)
    return 0.0


async def scrape(session: aiohttp.ClientSession, node: BrokerProcess) -> str:
    async with session.get(f"http://{node.api}/metrics", timeout=aiohttp.ClientTimeout(total=5)) as r:
        return await r.text()


async def ready(session: aiohttp.ClientSession, node: BrokerProcess) -> int:
    async with session.get(f"http://{node.api}/readyz", timeout=aiohttp.ClientTimeout(total=5)) as r:
        return r.status


async def put(session: aiohttp.ClientSession, node: BrokerProcess, body: bytes) -> tuple[str, float]:
    started = time.monotonic()
    payload = {"topic": "labels", "messages": [{"body": base64.b64encode(body).decode()}]}
    async with session.post(
        f"http://{node.api}/v1/messages", json=payload, timeout=aiohttp.ClientTimeout(total=10)
    ) as r:
        return str((await r.json())["status"]), time.monotonic() - started


def log_count(node: BrokerProcess, text: str) -> int:
    return node.log_path.read_text(errors="replace").count(text)


async def puts_acknowledged(session: aiohttp.ClientSession, master: BrokerProcess, tag: str, count: int) -> None:
    for i in range(count):
        status, took = await put(session, master, f"{tag}-{i}".encode())
        assert status == "PUT_OK", f"{tag}: put {i} answered {status}"
        assert took < PUT_BOUND_S, f"{tag}: put {i} took {took:.2f} s: it waited for the Kubernetes API"


async def test_a_refused_or_hanging_kubernetes_api_never_holds_up_roles_replication_or_acks(
    controller_group: ControllerGroup, tmp_path: Path, api: tuple[FakeApi, int]
) -> None:
    fake, port = api
    brokers = PodBrokerSet(
        tmp_path / "brokers",
        controllers=controller_group.api_addresses,
        broker_name="bs",
        cluster_name="it",
        extra_args=[*FAST, *SYNC],
        config=kubeconfig(tmp_path / "kubeconfig", port),
    )
    brokers.start_all()
    try:
        async with aiohttp.ClientSession() as session:
            # -- refused (403) from the start ---------------------------------------------------------
            master = brokers.nodes[await brokers.master(timeout=120)]

            async def all_in_sync() -> bool:
                status = await brokers.status(brokers.nodes.index(master), session)
                return status is not None and status["replication"]["inSyncReplicasNums"] == 3

            await eventually("every replica in the sync-state-set", all_in_sync, timeout=30)
            await puts_acknowledged(session, master, "refused", 20)

            async def refused_thrice() -> bool:
                texts = [await scrape(session, n) for n in brokers.nodes]
                return all(
                    metric(t, "brokergroup_broker_pod_label_patches_total", result="refused") >= 3 for t in texts
                )

            await eventually("every broker retried the refused patch", refused_thrice, timeout=30)
            for node in brokers.nodes:
                text = await scrape(session, node)
                assert metric(text, "brokergroup_broker_pod_label_in_sync") == 0, node.name
                assert metric(text, "brokergroup_broker_pod_label_patches_total", result="ok") == 0, node.name
                assert await ready(session, node) == 503, f"{node.name}: Ready before its stale label was cleared"
                assert log_count(node, "cannot set role label") == 1, node.log_path.read_text()[-3000:]

            # -- every patch hangs past the request timeout ----------------------------------------------
            fake.mode = "hang"

            async def timed_out() -> bool:
                texts = [await scrape(session, n) for n in brokers.nodes]
                return all(
                    metric(t, "brokergroup_broker_pod_label_patches_total", result="timeout") >= 2 for t in texts
                )

            hang = asyncio.create_task(eventually("every broker timed out twice", timed_out, timeout=40))
            while not hang.done():
                await puts_acknowledged(session, master, "hanging", 5)
            await hang
            for node in brokers.nodes:
                assert log_count(node, "cannot set role label") == 1, f"{node.name}: logged more than once"
            assert await brokers.master(timeout=60) == brokers.nodes.index(master), "the master lost its role"

            # -- accepted: the labels catch up, readiness follows ---------------------------------------
            fake.mode = "accept"
            for node in brokers.nodes:
                await eventually(f"{node.name} Ready", lambda n=node: _is_200(session, n), timeout=30)
                text = await scrape(session, node)
                assert metric(text, "brokergroup_broker_pod_label_in_sync") == 1, node.name
                assert log_count(node, "role label patched again") == 1, node.name
            with fake.lock:
                last = {pod: patch["metadata"]["labels"].get("brokergroup.io/role") for pod, patch in fake.patches}
            assert last == {n.name: "master" if n is master else "slave" for n in brokers.nodes}, last
            await puts_acknowledged(session, master, "accepted", 5)
    finally:
        brokers.stop_all()


async def _is_200(session: aiohttp.ClientSession, node: BrokerProcess) -> bool:
    return await ready(session, node) == 200
