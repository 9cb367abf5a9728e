"""`brokergroup operator`: run the BrokerGroup operator (in a pod, or from a kubeconfig)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from brokergroup.common.settings import deep_merge, load_settings, nested, parse_overrides


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "operator",
        help="run the BrokerGroup Kubernetes operator",
        description=(
            "Run the BrokerGroup operator. In a pod it uses the service account; elsewhere --kubeconfig, "
            "$KUBECONFIG or ~/.kube/config. Settings: --config file, then BG_OPERATOR_* env, then flags."
        ),
    )
    p.add_argument("--config", type=Path, help="TOML settings file")
    p.add_argument("--kubeconfig", type=Path, help="kubeconfig file (default: in-cluster, then $KUBECONFIG)")
    p.add_argument(
        "--namespace",
        dest="namespaces",
        help="namespaces to watch, ','-separated (default: every namespace)",
    )
    p.add_argument("--metrics-port", dest="metrics_port", type=int, help="/metrics port (0 = off; default 8080)")
    p.add_argument(
        "--metrics-host",
        dest="metrics_host",
        help="/metrics and /healthz interface (default: 0.0.0.0 in a pod, 127.0.0.1 elsewhere)",
    )
    p.add_argument("--liveness-port", dest="liveness_port", type=int, help="kopf /healthz port (0 = off)")
    p.add_argument("--resync-seconds", dest="resync_seconds", type=float, help="reconcile every group this often")
    p.add_argument(
        "--controller-url",
        dest="controller_url",
        metavar="URL",
        help=(
            "how to reach a group's controller API, a URL template: {name} is the BrokerGroup's name, {namespace} "
            "its namespace, {cluster_ip} the ClusterIP of its Service <name>-controller-api, e.g. "
            "'http://{cluster_ip}:9878' on a host that routes ClusterIPs. Default: in a pod "
            "'http://{name}-controller-api.{namespace}.svc:9878'; elsewhere the Kubernetes API server's service "
            "proxy (/api/v1/namespaces/{namespace}/services/http:{name}-controller-api:9878/proxy) with the "
            "kubeconfig's credentials, which need get on services/proxy"
        ),
    )
    p.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="any setting by name"
    )
    p.add_argument("--log-level", dest="log_level", help="DEBUG, INFO, WARNING")
    p.set_defaults(func=run)


def quiet_access_log() -> None:
    """One log line per decision: no INFO line for every Prometheus scrape of /metrics or kubelet probe of
    /healthz (aiohttp's access log, for our server and kopf's liveness endpoint); at DEBUG they show."""
    access = logging.getLogger("aiohttp.access")
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        access.setLevel(logging.WARNING)


def run(args: argparse.Namespace) -> int:
    import kopf

    from brokergroup.operator.handlers import Operator, build_registry
    from brokergroup.operator.settings import OperatorSettings

    flags = {k: v for k, v in vars(args).items() if k not in ("config", "func", "overrides", "command")}
    settings = load_settings(
        OperatorSettings, config_file=args.config, flags=deep_merge(nested(flags), parse_overrides(args.overrides))
    )
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_access_log()
    operator = Operator(settings)
    kopf.run(
        registry=build_registry(operator),
        standalone=True,
        clusterwide=not settings.namespaces,
        namespaces=settings.namespaces,
        liveness_endpoint=(
            f"http://{settings.metrics_host}:{settings.liveness_port}/healthz" if settings.liveness_port else None
        ),
    )
    return 0
