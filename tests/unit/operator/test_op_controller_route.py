"""How the operator reaches a group's controllers (issue 16 item 2): the default out of the cluster is the API
server's service proxy, built from the kubeconfig (operator/settings.py, operator/controller_link.py); the
controller client's URLs and headers (controller/client.py)."""

from __future__ import annotations

import base64
import json
import os
import ssl
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from brokergroup.cli import build_parser
from brokergroup.controller import protocol
from brokergroup.controller.client import ControllerClient, error_from_body, request_headers, url
from brokergroup.operator import names
from brokergroup.operator.controller_link import ApiServerProxy, ControllerLink, Route, service_proxy_path
from brokergroup.operator.settings import OperatorSettings
from tests.e2e.kubepki import Pki

SERVICE = "demo-controller-api"
PROXY_PATH = f"/api/v1/namespaces/mq/services/http:{SERVICE}:9878/proxy"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("BG_OPERATOR_") or name.startswith("KUBERNETES_SERVICE_"):
            monkeypatch.delenv(name)


def settings(**values: Any) -> OperatorSettings:
    return OperatorSettings(instance="test", **values)


# ---- settings: where the default goes ------------------------------------------------------------


def test_outside_the_cluster_the_default_is_the_api_servers_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    s = settings()
    assert s.controller_url is None and s.through_api_server
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert not s.through_api_server  # in a pod: the Service's DNS name
    assert s.controller_address("demo", "mq") == f"demo-controller-api.mq.svc:{names.CONTROLLER_API_PORT}"


@pytest.mark.parametrize("url_", ["http://{cluster_ip}:9878", "http://{name}-controller-api.{namespace}.svc:9878"])
def test_a_given_controller_url_is_used_everywhere(url_: str, monkeypatch: pytest.MonkeyPatch) -> None:
    s = settings(controller_url=url_)
    assert not s.through_api_server
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert not s.through_api_server
    assert s.controller_address("demo", "mq", cluster_ip="10.0.0.9") == url_.format(
        name="demo", namespace="mq", cluster_ip="10.0.0.9"
    ).removeprefix("http://")


def test_an_empty_controller_url_in_the_environment_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BG_OPERATOR_CONTROLLER_URL", " ")
    assert OperatorSettings(instance="t").controller_url is None


@pytest.mark.parametrize("bad", ["ftp://{cluster_ip}:21", "{cluster_ip}:9878", "http://"])
def test_a_controller_url_that_is_no_http_url_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match=r"controller_url .* must be a URL like http://host:port"):
        settings(controller_url=bad)


def test_help_names_every_placeholder_and_the_proxy_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["operator", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    text = text.replace("/ api", "/api").replace("- controller", "-controller")  # argparse's line breaks
    for word in ("{name}", "{namespace}", "{cluster_ip}", "'http://{name}-controller-api.{namespace}.svc:9878'"):
        assert word in text, word
    assert "service proxy" in text and "services/proxy" in text


# ---- the proxy route -------------------------------------------------------------------------------


def test_service_proxy_path_names_plain_http_and_the_port() -> None:
    assert service_proxy_path("mq", SERVICE, 9878) == PROXY_PATH


def kubeconfig(tmp_path: Path, server: str, user: dict[str, Any], **cluster: Any) -> kubernetes.client.Configuration:
    path = tmp_path / "config"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(path), client_configuration=configuration)  # type: ignore[no-untyped-call]
    return configuration


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_a_token_login_is_sent_as_authorization_with_the_kubeconfigs_ca(tmp_path: Path) -> None:
    pki = Pki()
    config = kubeconfig(
        tmp_path,
        "https://api.example:6443/",
        {"token": "kube-token"},
        **{"certificate-authority-data": b64(pki.ca.cert_pem)},
    )
    route = ApiServerProxy(config).route("mq", SERVICE, 9878)
    assert route.address == "https://api.example:6443" + PROXY_PATH
    assert route.headers == {"Authorization": "Bearer kube-token"}
    assert route.proxied and route.ssl is not None
    assert route.ssl.verify_mode == ssl.CERT_REQUIRED and route.ssl.check_hostname
    assert [c["subject"] for c in route.ssl.get_ca_certs()] == [((("commonName", "brokergroup-e2e-ca"),),)]


def test_a_certificate_login_sends_no_authorization(tmp_path: Path) -> None:
    pki = Pki()
    me = pki.issue("me")
    config = kubeconfig(
        tmp_path,
        "https://api.example:6443",
        {"client-certificate-data": b64(me.cert_pem), "client-key-data": b64(me.key_pem)},
        **{"certificate-authority-data": b64(pki.ca.cert_pem)},
    )
    route = ApiServerProxy(config).route("mq", SERVICE, 9878)
    assert route.headers == {}
    assert route.ssl is not None and route.ssl.verify_mode == ssl.CERT_REQUIRED


def test_insecure_skip_tls_verify_is_honoured(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path, "https://api.example:6443", {"token": "t"}, **{"insecure-skip-tls-verify": True})
    route = ApiServerProxy(config).route("mq", SERVICE, 9878)
    assert route.ssl is not None and route.ssl.verify_mode == ssl.CERT_NONE and not route.ssl.check_hostname


def test_a_link_through_the_proxy_keeps_the_admin_token_out_of_authorization() -> None:
    route = Route("https://api.example" + PROXY_PATH, {"Authorization": "Bearer kube-token"}, None, proxied=True)
    link = ControllerLink(route, token="admin", timeout=1)
    client = link._client()
    assert client._headers == {"Authorization": "Bearer kube-token", protocol.TOKEN_HEADER: "admin"}
    assert "service proxy" in link.address  # messages say which way the operator went
    direct = ControllerLink("10.0.0.9:9878", token="admin", timeout=1)._client()
    assert direct._headers == {"Authorization": "Bearer admin", protocol.TOKEN_HEADER: "admin"}


# ---- the client's URLs and headers ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:9878", "http://127.0.0.1:9878/v1/metadata"),
        ("https://api:6443" + PROXY_PATH, "https://api:6443" + PROXY_PATH + "/v1/metadata"),
    ],
)
def test_urls(address: str, expected: str) -> None:
    assert url(address, "/v1/metadata") == expected


def test_a_plain_http_base_url_keeps_its_prefix() -> None:
    client = ControllerClient(["http://127.0.0.1:1/prefix/"])
    assert client.addresses == ["127.0.0.1:1/prefix"]
    assert url(client.addresses[0], "/v1/x") == "http://127.0.0.1:1/prefix/v1/x"


def test_request_headers() -> None:
    assert request_headers(None) == {}
    assert request_headers("t") == {"Authorization": "Bearer t", protocol.TOKEN_HEADER: "t"}
    assert request_headers("t", bearer=False) == {protocol.TOKEN_HEADER: "t"}
    proxy = {"Authorization": "Bearer kube"}
    assert request_headers("t", proxy, bearer=False) == {"Authorization": "Bearer kube", protocol.TOKEN_HEADER: "t"}
    with pytest.raises(ValueError, match="Authorization of their own"):
        request_headers("t", {"authorization": "Bearer kube"})


def test_an_api_server_refusal_reads_as_one_line() -> None:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": 'services "demo-controller-api" is forbidden: User "me" cannot create resource "services/proxy"',
        "reason": "Forbidden",
        "code": 403,
    }
    error = error_from_body(403, json.dumps(status).encode())
    assert error.remark == (
        'HTTP 403 from the Kubernetes API server: services "demo-controller-api" is forbidden: '
        'User "me" cannot create resource "services/proxy"'
    )
