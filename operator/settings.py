"""Settings of the operator process (`brokergroup operator`), and kopf's settings derived from them.

Loaded like every process's settings: TOML file < `BG_OPERATOR_*` environment < flags. kopf's own
knobs are set in exactly one place, `configure_kopf`.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Annotated

import kopf
from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from brokergroup.operator import names
from brokergroup.operator.spec import DEFAULT_IMAGE

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
IN_CLUSTER_CONTROLLER_URL = "http://{name}-controller-api.{namespace}.svc:" + str(names.CONTROLLER_API_PORT)
"""The default `controller_url` in a pod: the controller API Service's DNS name."""


class OperatorSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="BG_OPERATOR_", env_nested_delimiter="__", extra="forbid", use_attribute_docstrings=True
    )
    namespaces: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Namespaces to watch (`,`-separated in env and flags); empty means every namespace."""
    kubeconfig: Path | None = None
    """Kubeconfig file; unset means in-cluster credentials in a pod, else $KUBECONFIG or ~/.kube/config."""
    metrics_host: str = Field(default_factory=lambda: _default_metrics_host())
    """Interface of the `/metrics` and `/healthz` HTTP server: by default every interface in a pod
    (`KUBERNETES_SERVICE_HOST` set, so Prometheus can scrape it), 127.0.0.1 elsewhere (a workstation)."""
    metrics_port: Annotated[int, Field(ge=0, le=65535)] = 8080
    """Port of the `/metrics` server (0 turns it off)."""
    liveness_port: Annotated[int, Field(ge=0, le=65535)] = 8081
    """Port of kopf's liveness endpoint `/healthz` (0 turns it off)."""
    resync_seconds: Annotated[float, Field(ge=1, le=3600)] = 60.0
    """Every BrokerGroup is reconciled at least this often, to repair drift (a deleted Service, say)."""
    retry_seconds: Annotated[float, Field(ge=0.1, le=600)] = 5.0
    """Delay before retrying a reconcile that could not finish (API error, election pending)."""
    controller_url: str | None = None
    """How the operator reaches a BrokerGroup's controllers, a URL template: `{name}`, `{namespace}` and
    `{cluster_ip}` (the ClusterIP of `<name>-controller-api`) are filled in. Unset (or empty): in a pod
    `http://{name}-controller-api.{namespace}.svc:9878`; elsewhere (a workstation) the Kubernetes API server's
    service proxy, `<server>/api/v1/namespaces/{namespace}/services/{name}-controller-api:9878/proxy`, with the
    kubeconfig's credentials and TLS settings (needs `get` on `services/proxy`)."""
    image: Annotated[str, Field(min_length=1)] = DEFAULT_IMAGE
    """Image of the controllers and brokers of every BrokerGroup whose spec names none."""
    controller_timeout: Annotated[float, Field(gt=0, le=120)] = 5.0
    """Seconds one controller call may take."""
    elect_wait_seconds: Annotated[float, Field(ge=0, le=600)] = 30.0
    """How long an elect-master request is kept and retried (every `retry_seconds`) while the controller
    cannot be reached (a leader change, controllers restarting) before it is answered Refused
    (`ControllerUnavailable`); 0 refuses at once."""
    instance: str = Field(default_factory=lambda: _hostname())
    """This operator's name in Events' `reportingInstance` (the pod name in a cluster)."""
    log_level: str = "INFO"

    @field_validator("namespaces", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [n.strip() for n in value.split(",") if n.strip()]
        return value

    @field_validator("controller_url", mode="before")
    @classmethod
    def _unset_if_empty(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _valid(self) -> OperatorSettings:
        for namespace in self.namespaces:
            if not DNS_LABEL.fullmatch(namespace) or len(namespace) > 63:
                raise ValueError(f"namespaces: {namespace!r} is not a valid namespace name")
        if self.controller_url is not None:
            self._check_controller_url(self.controller_url)
        if self.metrics_port and self.metrics_port == self.liveness_port:
            raise ValueError(f"metrics_port and liveness_port are both {self.metrics_port}")
        return self

    @staticmethod
    def _check_controller_url(template: str) -> None:
        try:
            example = template.format(name="bg", namespace="ns", cluster_ip="10.0.0.1")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"controller_url {template!r}: only {{name}}, {{namespace}} and {{cluster_ip}} may be filled in ({exc})"
            ) from exc
        scheme, _, rest = example.partition("://")
        if scheme not in ("http", "https") or not rest.strip("/"):
            raise ValueError(f"controller_url {template!r} must be a URL like http://host:port")

    @property
    def through_api_server(self) -> bool:
        """The controllers are reached through the API server's service proxy: no `controller_url` and not
        in a pod (whose default is the Service's DNS name, which a workstation cannot resolve)."""
        return self.controller_url is None and not in_cluster()

    @property
    def controller_template(self) -> str:
        """The `controller_url` in effect when not going through the API server."""
        return self.controller_url or IN_CLUSTER_CONTROLLER_URL

    def controller_address(self, name: str, namespace: str, *, cluster_ip: str = "") -> str:
        """The controller API of BrokerGroup `name`: `host:port` for plain HTTP, else the base URL
        (`https://host:port[/prefix]`) that `ControllerClient` takes."""
        url = self.controller_template.format(name=name, namespace=namespace, cluster_ip=cluster_ip)
        return url.removeprefix("http://").rstrip("/")


def in_cluster() -> bool:
    """Running in a pod: the kubelet sets KUBERNETES_SERVICE_HOST."""
    import os

    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _default_metrics_host() -> str:
    return "0.0.0.0" if in_cluster() else "127.0.0.1"  # every interface only in a pod


def _hostname() -> str:
    import socket

    return socket.gethostname()


def configure_kopf(kopf_settings: kopf.OperatorSettings, ours: OperatorSettings) -> None:
    """kopf's settings, all here.

    - No peering: one operator replica (the chart uses a Recreate Deployment); peering objects
      would be written every minute, and an idle operator writes nothing.
    - kopf posts no Events of its own (it would post one per handler run, even on a no-op
      resume); the operator posts its own Events when it acts.
    - Progress and the last-handled spec live in annotations under `operator.brokergroup.io`, not
      in `status.kopf` (the CRD's status schema has no such field).
    - No finalizers: every child has an ownerReference, so the garbage collector deletes them, and
      the follower and resync loop are the operator's own tasks (`groups`), not kopf daemons or
      timers, which would put kopf's finalizer on every BrokerGroup: with the operator gone, a
      deletion would hang on it. kopf removes the finalizer an older operator left (the name
      stays configured for that).
    - `cancellation_polling` 1 s: kept from the timer days, harmless without timers.
    - No scanning: kopf would otherwise list and watch every CRD and Namespace in the cluster to
      notice resources appearing at runtime, which needs a cluster-wide grant the chart does not
      give. The BrokerGroup CRD is resolved once at startup (the chart installs it first).
    """
    kopf_settings.peering.standalone = True
    kopf_settings.scanning.disabled = True
    kopf_settings.posting.enabled = False
    kopf_settings.persistence.finalizer = f"operator.{names.GROUP}/finalizer"
    kopf_settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=f"operator.{names.GROUP}")
    kopf_settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=f"operator.{names.GROUP}", key="last-handled-configuration"
    )
    kopf_settings.background.cancellation_polling = 1.0
    kopf_settings.execution.max_workers = 8
    kopf_settings.watching.server_timeout = 300
    kopf_settings.watching.client_timeout = 330
    kopf_settings.networking.request_timeout = 60
    kopf_settings.queueing.error_delays = (1, 2, 5, 10, 30, 60)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    # kopf logs every successful handler run at INFO; the reconciler logs one line per cycle instead.
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
