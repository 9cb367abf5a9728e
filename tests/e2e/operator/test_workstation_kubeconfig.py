"""The workstation route to the controllers (the API server's service proxy) honours the kubeconfig's `proxy-url`
and `tls-server-name`, as kubectl does: the server's name resolves nowhere and is not in the API server's
certificate, so the only way through is the CONNECT proxy the kubeconfig names, with the certificate checked
against the `tls-server-name`. The API server then answers the proxied call itself (no controller runs here: 404,
no such Service), which proves the route reached it."""

from __future__ import annotations

import asyncio
import select
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from brokergroup.operator.controller_link import ControllerLink, ControllerLinkError, api_server_proxy
from tests.e2e.kubeenv import ControlPlane

UNRESOLVABLE = "apiserver.brokergroup.invalid"
"""`.invalid` never resolves (RFC 2606), and the API server's certificate does not name it."""


class ConnectProxy:
    """An HTTP CONNECT proxy on loopback that sends every tunnel to one address (a bastion's view of the API
    server), recording what each CONNECT asked for."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.asked: list[str] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client: socket.socket) -> None:
        with client:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
            method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
            self.asked.append(f"{method} {target}")
            if method != "CONNECT":
                client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                return
            with socket.create_connection(self.upstream) as upstream:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                pipes = {client: upstream, upstream: client}
                while not self._stop.is_set():
                    ready, _, _ = select.select(list(pipes), [], [], 0.2)
                    for end in ready:
                        data = end.recv(65536)
                        if not data:
                            return
                        pipes[end].sendall(data)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[ConnectProxy]:
    port = int(control_plane.server.rsplit(":", 1)[1])
    running = ConnectProxy(("127.0.0.1", port))
    yield running
    running.close()


def kubeconfig(control_plane: ControlPlane, path: Path, **cluster: Any) -> kubernetes.client.Configuration:
    """The admin kubeconfig with the server renamed to one that resolves nowhere, plus `cluster` fields."""
    config = yaml.safe_load(control_plane.admin_kubeconfig.read_text())
    port = control_plane.server.rsplit(":", 1)[1]
    for entry in config["clusters"]:
        entry["cluster"]["server"] = f"https://{UNRESOLVABLE}:{port}"
        entry["cluster"].update(cluster)
    path.write_text(yaml.safe_dump(config))
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(path), client_configuration=configuration)  # type: ignore[no-untyped-call]
    return configuration


def views(configuration: kubernetes.client.Configuration, namespace: str) -> str:
    """What the controller route answers (always an error here: no controller runs), as the operator sees it."""
    link = ControllerLink(
        api_server_proxy(configuration).route(namespace, "bg-controller-api", 9878), token="t", timeout=10
    )
    with pytest.raises(ControllerLinkError) as refused:
        asyncio.run(link.views(["bg-broker-0"]))
    return str(refused.value)


def test_the_controller_route_goes_through_the_kubeconfigs_proxy_with_its_tls_server_name(
    control_plane: ControlPlane, namespace: str, proxy: ConnectProxy, tmp_path: Path
) -> None:
    port = control_plane.server.rsplit(":", 1)[1]
    both = kubeconfig(
        control_plane,
        tmp_path / "both",
        **{"proxy-url": f"http://127.0.0.1:{proxy.port}"},
        **{"tls-server-name": "kubernetes"},
    )
    answer = views(both, namespace)
    # The API server itself answered (no such Service here), so both settings were applied.
    assert 'HTTP 404 from the Kubernetes API server: services "bg-controller-api" not found' in answer, answer
    assert proxy.asked == [f"CONNECT {UNRESOLVABLE}:{port}"], proxy.asked

    # Each setting is needed: without the TLS name the certificate does not match; without the proxy the
    # name does not resolve. Neither reaches the API server.
    no_name = kubeconfig(control_plane, tmp_path / "no-name", **{"proxy-url": f"http://127.0.0.1:{proxy.port}"})
    answer = views(no_name, namespace)
    assert "from the Kubernetes API server" not in answer and "certificate" in answer.lower(), answer
    no_proxy = kubeconfig(control_plane, tmp_path / "no-proxy", **{"tls-server-name": "kubernetes"})
    answer = views(no_proxy, namespace)
    assert "from the Kubernetes API server" not in answer and UNRESOLVABLE in answer, answer
    assert len(proxy.asked) == 2, proxy.asked
