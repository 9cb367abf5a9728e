"""The Kubernetes API as a pod on a real node sees it, for the test kubelet's pods.

A real kubelet gives every container `KUBERNETES_SERVICE_HOST`/`_PORT` (the `default/kubernetes` Service,
10.0.0.1:443 here), and kube-proxy routes that ClusterIP to the API server. The test kubelet does neither (a
documented gap, docs/k8s-test-env.md), and the test API server listens on 127.0.0.1 only. `PodApiRoute` closes
the gap for one test:

- it adds 10.0.0.1/32 to the kubelet's bridge, so pod traffic to it ends in the root namespace (INPUT, not the
  kubelet's forward rules), and relays 10.0.0.1:443 to the API server: the serving certificate names 10.0.0.1,
  so in-cluster TLS verification passes unchanged;
- it adds the two variables to every container the kubelet starts, as a real kubelet does.

The pods log in with the ServiceAccount token the kubelet mounts (the `kube-api-access-*` volume).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from brokergroup.chaos.netns import NetnsError, run
from tests.e2e.kubeenv import ControlPlane
from tests.e2e.kubelet import Kubelet, network, runner

API_IP = "10.0.0.1"
API_PORT = 443


class Relay:
    """A TCP relay from `listen` to `target`: one thread accepts, two threads pipe each connection."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self.target = target
        self.server = socket.create_server(listen)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="pod-api-relay", daemon=True)
        self.lock = threading.Lock()
        self.open: dict[tuple[socket.socket, socket.socket], int] = {}
        """Each relayed connection (client, upstream) and how many of its two pipes still run."""

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        self.thread.join(timeout=5)
        with self.lock:
            pairs, self.open = list(self.open), {}
        for pair in pairs:
            for sock in pair:
                sock.close()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            pair = (client, upstream)
            with self.lock:
                self.open[pair] = 2
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(pair, src, dst), daemon=True).start()

    def _pipe(self, pair: tuple[socket.socket, socket.socket], src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
            with self.lock:  # the second pipe to end closes both sockets
                left = self.open.get(pair, 0) - 1
                if left > 0:
                    self.open[pair] = left
                else:
                    self.open.pop(pair, None)
            if left <= 0:
                for sock in pair:
                    sock.close()


@pytest.fixture
def pod_api(control_plane: ControlPlane, kubelet: Kubelet, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Pods of the test kubelet reach the API server at https://10.0.0.1:443 with in-cluster credentials."""
    run(["ip", "addr", "add", f"{API_IP}/32", "dev", network.BRIDGE])
    relay = Relay((API_IP, API_PORT), ("127.0.0.1", control_plane.port))
    relay.start()
    resolve = runner.resolve_env

    def resolve_with_service_env(container: Mapping[str, Any], pod: Mapping[str, Any], **kwargs: Any) -> dict[str, str]:
        env = {"KUBERNETES_SERVICE_HOST": API_IP, "KUBERNETES_SERVICE_PORT": str(API_PORT)}
        return env | resolve(container, pod, **kwargs)

    monkeypatch.setattr(runner, "resolve_env", resolve_with_service_env)
    try:
        yield f"https://{API_IP}:{API_PORT}"
    finally:
        relay.stop()
        with contextlib.suppress(NetnsError):  # gone with the bridge already
            run(["ip", "addr", "del", f"{API_IP}/32", "dev", network.BRIDGE])
