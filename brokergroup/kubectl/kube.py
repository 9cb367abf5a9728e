"""The plugin's I/O shell: the API server through the `kubernetes` client, and each controller node through the
API server's pod proxy (`/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/...`: the Service proxy would reach one
node at random, and `status` shows every node). Every API failure
becomes a `PluginError` with one line naming what was refused."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from brokergroup.kubectl.snapshot import ControllerNode, controller_node
from brokergroup.kubectl.targets import PluginError
from brokergroup.operator import labels, names

PROXY_TIMEOUT = 5.0


def api_message(exc: ApiException) -> str:
    """The API server's own message (its Status object), else the HTTP reason."""
    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        body = None
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return f"{exc.status} {exc.reason}".strip()


def refusal(what: str, exc: ApiException) -> PluginError:
    prefix = "forbidden (RBAC): " if exc.status == 403 else ""
    return PluginError(f"{what}: {prefix}{api_message(exc)}")


@contextmanager
def api_errors(what: str) -> Iterator[None]:
    """Turn the client's exceptions into one line: `<what>: <the API server's message>`."""
    try:
        yield
    except ApiException as exc:
        raise refusal(what, exc) from None
    except urllib3.exceptions.HTTPError as exc:
        raise PluginError(f"{what}: cannot reach the API server: {exc}") from None


class Kube:
    def __init__(self, kubeconfig: str | None, context: str | None) -> None:
        try:
            kubernetes.config.load_kube_config(config_file=kubeconfig, context=context)  # type: ignore[no-untyped-call]
            _, active = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
            if context is not None:
                contexts, _ = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
                active = next((c for c in contexts if c.get("name") == context), active)
        except (ConfigException, OSError) as exc:
            raise PluginError(f"cannot load the kubeconfig: {exc}") from None
        self.default_namespace = str((active or {}).get("context", {}).get("namespace") or "default")
        # The client's generated classes are typed loosely; the shell keeps them as Any.
        self.api: Any = kubernetes.client.ApiClient()
        self.core: Any = kubernetes.client.CoreV1Api(self.api)
        self.apps: Any = kubernetes.client.AppsV1Api(self.api)
        self.custom: Any = kubernetes.client.CustomObjectsApi(self.api)

    def close(self) -> None:
        self.api.close()

    # The BrokerGroup

    def group(self, namespace: str, bg: str) -> dict[str, Any]:
        try:
            obj = self.custom.get_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, bg)
        except ApiException as exc:
            if exc.status == 404:
                raise PluginError(f"brokergroup {bg} not found in namespace {namespace}") from None
            raise refusal(f"cannot read brokergroup {namespace}/{bg}", exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise PluginError(f"cannot reach the API server: {exc}") from None
        return dict(obj)

    def annotate(self, namespace: str, bg: str, annotations: dict[str, str | None]) -> None:
        body = {"metadata": {"annotations": annotations}}
        with api_errors(f"cannot annotate brokergroup {namespace}/{bg}"):
            self.custom.patch_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, bg, body)

    def patch_spec(self, namespace: str, bg: str, spec: dict[str, Any]) -> None:
        body = {"spec": spec}
        with api_errors(f"cannot change brokergroup {namespace}/{bg}"):
            self.custom.patch_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, bg, body)

    # Pods and children

    def stateful_set_exists(self, namespace: str, name: str) -> bool:
        try:
            self.apps.read_namespaced_stateful_set(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise refusal(f"cannot read statefulset {namespace}/{name}", exc) from None
        return True

    def claims(self, namespace: str, selector: dict[str, str]) -> list[str]:
        """Names of the PersistentVolumeClaims that `selector` matches."""
        text = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        with api_errors(f"cannot list persistentvolumeclaims in {namespace}"):
            listing = self.core.list_namespaced_persistent_volume_claim(namespace, label_selector=text)
        return sorted(str(c.metadata.name) for c in listing.items)

    def pod(self, namespace: str, pod: str) -> dict[str, Any] | None:
        try:
            return dict(self.api.sanitize_for_serialization(self.core.read_namespaced_pod(pod, namespace)))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise refusal(f"cannot read pod {namespace}/{pod}", exc) from None

    def pods(self, namespace: str, selector: dict[str, str]) -> list[dict[str, Any]]:
        text = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        with api_errors(f"cannot list pods in {namespace}"):
            listing = self.core.list_namespaced_pod(namespace, label_selector=text)
        return [dict(self.api.sanitize_for_serialization(p)) for p in listing.items]

    def master_service_selector(self, namespace: str, service: str) -> dict[str, str]:
        with api_errors(f"cannot read service {namespace}/{service}"):
            svc = self.core.read_namespaced_service(service, namespace)
        return dict(svc.spec.selector or {})

    def controller_replicas(self, namespace: str, bg: str) -> int:
        try:
            sts = self.apps.read_namespaced_stateful_set(names.controller(bg), namespace)
        except ApiException as exc:
            if exc.status == 404:
                return 0
            raise refusal(f"cannot read statefulset {namespace}/{names.controller(bg)}", exc) from None
        return int(sts.spec.replicas or 0)

    # The controllers, through the API server's pod proxy

    def pod_get(self, namespace: str, pod: str, port: int, path: str) -> bytes:
        """GET `path` of `pod`:`port` through the API server's pod proxy."""
        with api_errors(f"GET {path} of pod {pod}"):
            response = self.core.connect_get_namespaced_pod_proxy_with_path(
                f"{pod}:{port}", namespace, path.lstrip("/"), _preload_content=False, _request_timeout=PROXY_TIMEOUT
            )
            return bytes(response.data)

    def pod_get_json(self, namespace: str, pod: str, port: int, path: str) -> Any:
        """GET `path` of `pod`:`port` through the pod proxy, as JSON."""
        data = self.pod_get(namespace, pod, port, path)
        try:
            return json.loads(data)
        except ValueError:
            raise PluginError(f"GET {path} of pod {pod}: not JSON: {data[:200]!r}") from None

    def pod_put_json(
        self, namespace: str, pod: str, port: int, path: str, body: Mapping[str, Any], headers: Mapping[str, str]
    ) -> tuple[int, Any]:
        """PUT a JSON body to `path` of `pod`:`port` through the API server's pod proxy: (HTTP status, reply).
        The pod's own refusals (its JSON with a `remark`) come back as a status; the API server's as an error."""
        what = f"PUT {path} of pod {pod}"
        try:
            request = self.api.param_serialize(
                method="PUT",
                resource_path="/api/v1/namespaces/{namespace}/pods/{name}/proxy/{path}",
                path_params={"namespace": namespace, "name": f"{pod}:{port}", "path": path.lstrip("/")},
                header_params={"Content-Type": "application/json", "Accept": "application/json", **headers},
                body=dict(body),
                auth_settings=["BearerToken"],
            )
            response = self.api.call_api(*request, _request_timeout=PROXY_TIMEOUT)
            response.read()
        except ApiException as exc:
            raise refusal(what, exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise PluginError(f"{what}: cannot reach the API server: {exc}") from None
        status, data = int(response.status), response.data or b""
        try:
            reply = json.loads(data or b"null")
        except ValueError:
            reply = None
        if 200 <= status < 300 or (isinstance(reply, dict) and "remark" in reply):
            return status, reply
        message = reply.get("message") if isinstance(reply, dict) else bytes(data).decode(errors="replace")[:200]
        prefix = "forbidden (RBAC): " if status == 403 else ""
        raise PluginError(f"{what}: {prefix}{message or status}")

    def secret_value(self, namespace: str, secret: str, key: str, why: str) -> str:
        """One key of a Secret, for `why`; a user whose RBAC lacks Secrets gets one line saying so."""
        try:
            obj = self.core.read_namespaced_secret(secret, namespace)
        except ApiException as exc:
            if exc.status == 404:
                raise PluginError(f"secret {namespace}/{secret} not found: {why} needs it") from None
            raise refusal(f"cannot read secret {namespace}/{secret} ({why} needs its key {key})", exc) from None
        value = (obj.data or {}).get(key)
        if not value:
            raise PluginError(f"secret {namespace}/{secret} has no key {key}: {why} needs it")
        return base64.b64decode(value).decode()

    def delete_pod(self, namespace: str, pod: str) -> None:
        with api_errors(f"cannot delete pod {namespace}/{pod}"):
            self.core.delete_namespaced_pod(pod, namespace)

    def broker_statuses(self, namespace: str, pods: list[str]) -> dict[str, dict[str, Any] | str]:
        """Each broker's `GET /v1/status` through the pod proxy, or why it could not be asked."""
        out: dict[str, dict[str, Any] | str] = {}
        for pod in pods:
            try:
                reply = json.loads(self.pod_get(namespace, pod, names.BROKER_PORT, "/v1/status"))
            except PluginError as exc:
                out[pod] = str(exc).split(": ", 1)[-1]
                continue
            except ValueError:
                out[pod] = "not JSON: the proxy did not reach the broker"
                continue
            out[pod] = reply if isinstance(reply, dict) else "unexpected reply"
        return out

    def controller_nodes(self, namespace: str, bg: str) -> list[ControllerNode]:
        nodes = []
        for ordinal in range(self.controller_replicas(namespace, bg)):
            pod = names.controller_pod(bg, ordinal)
            try:
                reply = json.loads(self.pod_get(namespace, pod, names.CONTROLLER_API_PORT, "/v1/status"))
            except PluginError as exc:
                nodes.append(controller_node(pod, str(exc).split(": ", 1)[-1]))
                continue
            except ValueError:
                nodes.append(controller_node(pod, "not JSON: the proxy did not reach the controller"))
                continue
            nodes.append(controller_node(pod, reply if isinstance(reply, dict) else "unexpected reply"))
        return nodes


def group_selector(bg: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": labels.APP, "app.kubernetes.io/instance": bg}
