"""How the operator talks to a BrokerGroup's controllers: through the controller's published client
only (import-linter checks it). Reads the sync-state data; asks for designated elections.

A `Route` says where the controller API is: `host:port` (in a pod, or a `--controller-url`), or, for an
operator outside the cluster, the API server's service proxy (`ApiServerProxy`), with the kubeconfig's
credentials, TLS settings, `proxy-url` and `tls-server-name`. Through the proxy the admin token travels in
`X-Brokergroup-Token` only: the API server takes `Authorization` as the caller's own credential and does
not pass it on."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import kubernetes

from brokergroup.controller.client import ControllerClient, ControllerUnavailable
from brokergroup.controller.codes import ControllerError
from brokergroup.controller.protocol import ElectMasterRequest, ElectMasterResponse
from brokergroup.operator.roles import SetView, set_view

logger = logging.getLogger(__name__)


class ControllerLinkError(RuntimeError):
    """The controller could not be reached or refused; the message says which and why."""


class ControllerUnreachable(ControllerLinkError):
    """No controller answered: none could be reached, or none knew a leader (as while the Raft group elects one
    after a restart). Worth asking again; a controller's refusal is not."""


@dataclass(frozen=True)
class Route:
    """Where one group's controller API is, and what a request there carries besides the controller token."""

    address: str
    """`host:port` (plain HTTP) or a base URL that prefixes every request's path."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """The proxy's own credential (`Authorization`), if any."""
    ssl: ssl.SSLContext | None = None
    proxied: bool = False
    """Through the API server: the controller token goes in `X-Brokergroup-Token` only."""
    proxy: str | None = None
    """An HTTP(S) proxy in front of the API server (the kubeconfig's `proxy-url`)."""
    server_hostname: str | None = None
    """The name the API server's certificate is checked against (the kubeconfig's `tls-server-name`)."""

    @property
    def shown(self) -> str:
        """The address as messages name it (a proxy URL without the API server's name)."""
        return f"the API server's service proxy ({self.address})" if self.proxied else self.address


def service_proxy_path(namespace: str, service: str, port: int) -> str:
    """The API server's proxy path to `service`:`port` (plain HTTP)."""
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/services/http:{quote(service, safe='')}:{port}/proxy"


def tls_context(configuration: kubernetes.client.Configuration) -> ssl.SSLContext:
    """The TLS settings of a kubernetes client configuration (kubeconfig): its CA, its client certificate,
    and `insecure-skip-tls-verify`."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class ApiServerProxy:
    """Routes to controller API Services through the API server of a kubeconfig's configuration
    (`kubernetes.config.load_kube_config`): its server URL, TLS settings and credential. The credential is
    read per route, so a token the client refreshes (a token file, an exec plugin) stays current."""

    def __init__(self, configuration: kubernetes.client.Configuration) -> None:
        self.configuration = configuration
        self.server = str(configuration.host).rstrip("/")
        self._tls: ssl.SSLContext | None = None

    def route(self, namespace: str, service: str, port: int) -> Route:
        if self._tls is None and self.server.startswith("https://"):
            self._tls = tls_context(self.configuration)
        auth = self.configuration.auth_settings().get("BearerToken")
        headers = {"Authorization": str(auth["value"])} if auth and auth.get("value") else {}
        return Route(
            self.server + service_proxy_path(namespace, service, port),
            headers,
            self._tls,
            proxied=True,
            proxy=getattr(self.configuration, "proxy", None) or None,
            server_hostname=getattr(self.configuration, "tls_server_name", None) or None,
        )


class ControllerLink:
    def __init__(self, route: Route | str, *, token: str | None, timeout: float) -> None:
        self.route = route if isinstance(route, Route) else Route(route)
        self.address = self.route.shown
        self._token = token
        self._timeout = timeout

    def _client(self, timeout: float | None = None) -> ControllerClient:
        r = self.route
        return ControllerClient(
            [r.address],
            token=self._token,
            timeout=timeout or self._timeout,
            headers=r.headers,
            ssl=r.ssl,
            bearer=not r.proxied,
            proxy=r.proxy,
            server_hostname=r.server_hostname,
        )

    async def views(self, broker_sets: list[str]) -> dict[str, SetView]:
        """The controller's view of each named set; a set the controller does not know is absent."""
        try:
            async with self._client() as client:
                data = await client.sync_state_data(broker_sets)
        except (ControllerError, OSError) as exc:
            raise ControllerLinkError(f"controller {self.address}: {exc}") from exc
        return {name: set_view(name, info) for name, info in data.replicas_info_table.items() if name in broker_sets}

    async def snapshot(self, broker_sets: list[str]) -> tuple[dict[str, SetView], str | None]:
        """The controller's view of each named set (a set it does not know is absent) and the id of the
        Raft leader (its pod name on Kubernetes; None when there is none), over one connection."""
        try:
            async with self._client() as client:
                data = await client.sync_state_data(broker_sets)
                leader = (await client.metadata()).controller_leader_id
        except (ControllerError, OSError) as exc:
            raise ControllerLinkError(f"controller {self.address}: {exc}") from exc
        views = {name: set_view(name, info) for name, info in data.replicas_info_table.items() if name in broker_sets}
        return views, leader or None

    async def events(self, *, after: int, wait_seconds: int) -> dict[str, Any]:
        """Long-poll the controller's event feed (`/v1/events`) for records after Raft index `after`."""
        try:
            async with self._client(self._timeout + wait_seconds) as c:
                return await c.events(after=after, wait_seconds=wait_seconds)
        except (ControllerError, OSError) as exc:
            raise ControllerLinkError(f"controller {self.address} events: {exc}") from exc

    async def elect(self, broker_set: str, broker_id: int) -> ElectMasterResponse:
        """Designated election (`designateElect=true`, needs the admin token)."""
        request = ElectMasterRequest(broker_name=broker_set, broker_id=broker_id, designate_elect=True)
        try:
            async with self._client() as client:
                return await client.elect_master(request)
        except (ControllerUnavailable, OSError) as exc:
            raise ControllerUnreachable(f"elect {broker_set} broker {broker_id} via {self.address}: {exc}") from exc
        except ControllerError as exc:
            raise ControllerLinkError(f"elect {broker_set} broker {broker_id} via {self.address}: {exc}") from exc


_proxies: dict[int, ApiServerProxy] = {}


def api_server_proxy(configuration: kubernetes.client.Configuration) -> ApiServerProxy:
    """The `ApiServerProxy` of `configuration`, made once (it loads the TLS files once)."""
    proxy = _proxies.get(id(configuration))
    if proxy is None or proxy.configuration is not configuration:
        proxy = _proxies[id(configuration)] = ApiServerProxy(configuration)
    return proxy
