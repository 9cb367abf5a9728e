"""The chart rendered with every documented values combination: `helm lint`, `helm template`, a server-side
dry-run of every object on the real apiserver, restricted pod security on every pod, refused bad values, and
the chart's defaults equal to the operator's."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from brokergroup import images
from brokergroup.operator import labels, names
from brokergroup.operator.builders.pods import container_security_context, pod_security_context
from brokergroup.operator.settings import IN_CLUSTER_CONTROLLER_URL, OperatorSettings
from tests.e2e import helmchart
from tests.e2e.helmchart import CHART, kinds, pod_specs, render, values_args
from tests.e2e.kubeenv import ControlPlane, Kubectl, KubectlError

RELEASE, NAMESPACE = "bg", "ops"
DIGEST = "sha256:" + "ab" * 32
FULL = f"{RELEASE}-brokergroup"

# Every combination docs/install.md documents, with what it must render.
COMBINATIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "namespaced": {"watch": {"scope": "Namespaced", "namespaces": ["team-a", "team-b"]}},
    "namespaced-release-namespace": {"watch": {"scope": "Namespaced"}},
    "service-monitor": {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}}},
    "no-metrics-service": {"metrics": {"service": {"enabled": False}}},
    "existing-service-account": {
        "serviceAccount": {"create": False, "name": "ops-operator"},
        "rbac": {"create": False},
    },
    "pinned-images": {"image": {"digest": DIGEST}, "brokerGroupImage": "registry.example/brokergroup:1.2.3"},
    "placement": {
        "priorityClassName": "system-cluster-critical",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ops", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["ops"]}]}]
                }
            }
        },
        "resources": {"requests": {"cpu": "50m", "memory": "96Mi"}, "limits": {"memory": "192Mi"}},
        "podAnnotations": {"example.org/team": "ops"},
        "podLabels": {"team": "ops"},
        "imagePullSecrets": [{"name": "regcred"}],
    },
    "operator-settings": {
        "operator": {
            "logLevel": "DEBUG",
            "resyncSeconds": 30,
            "retrySeconds": 2,
            "controllerUrl": "http://{cluster_ip}:9878",
            "controllerTimeoutSeconds": 3,
            "metricsPort": 9090,
            "livenessPort": 9091,
            "extraEnv": [{"name": "PYTHONFAULTHANDLER", "value": "1"}],
        }
    },
    "network-policy": {
        "networkPolicy": {
            "enabled": True,
            "apiServer": {"cidrs": ["10.96.0.1/32", "fd00::1/128"]},
            "metricsFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
            "extraEgress": [{"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}], "ports": [{"port": 3128}]}],
        },
        "operator": {"metricsPort": 9090, "livenessPort": 9091},
    },
    "network-policy-namespaced": {
        "networkPolicy": {"enabled": True, "apiServer": {"cidrs": ["192.168.1.10/32"], "ports": [6443]}},
        "watch": {"scope": "Namespaced", "namespaces": ["team-a", "team-b"]},
    },
    "audit-cronjob": {"audit": {"cronJob": {"enabled": True, "brokerGroup": "demo", "namespace": "apps"}}},
    "audit-cronjob-reports": {
        "audit": {
            "cronJob": {
                "enabled": True,
                "brokerGroup": "demo",
                "controllerReplicas": 5,
                "failOnViolations": False,
                "reportsClaim": "audit-reports",
                "extraArgs": ["--min-in-sync-replicas", "2"],
                "timeZone": "Etc/UTC",
            }
        }
    },
}

EXPECTED_KINDS = {
    "defaults": [
        ("ClusterRole", FULL),
        ("ClusterRoleBinding", FULL),
        ("Deployment", FULL),
        ("Service", f"{FULL}-metrics"),
        ("ServiceAccount", FULL),
    ],
    "namespaced": [
        ("Deployment", FULL),
        ("Role", FULL),
        ("Role", FULL),
        ("RoleBinding", FULL),
        ("RoleBinding", FULL),
        ("Service", f"{FULL}-metrics"),
        ("ServiceAccount", FULL),
    ],
    "no-metrics-service": [
        ("ClusterRole", FULL),
        ("ClusterRoleBinding", FULL),
        ("Deployment", FULL),
        ("ServiceAccount", FULL),
    ],
    "existing-service-account": [("Deployment", FULL), ("Service", f"{FULL}-metrics")],
}


@pytest.fixture(scope="module")
def namespaces(control_plane: ControlPlane) -> Iterator[None]:
    """The namespaces the combinations render into, and the ServiceMonitor CRD, for the dry-runs."""
    wanted = [NAMESPACE, "team-a", "team-b", "apps"]
    for ns in wanted:
        control_plane.kubectl("create", "namespace", ns)
    control_plane.kubectl("apply", "--server-side", "-f", str(helmchart.third_party_crd("servicemonitors")))
    control_plane.kubectl("wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com")
    yield
    for ns in wanted:
        control_plane.kubectl("delete", "namespace", ns, "--wait=false")


Rendered = Callable[[str], list[dict[str, Any]]]


@pytest.fixture(scope="module")
def rendered(control_plane: ControlPlane, helm: Kubectl, tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    """`rendered(combination)`: the objects `helm template` makes of COMBINATIONS[combination], rendered once
    per module (each call gets its own copy)."""
    work = tmp_path_factory.mktemp("values")

    @functools.cache
    def once(combination: str) -> list[dict[str, Any]]:
        return render(control_plane, COMBINATIONS[combination], release=RELEASE, namespace=NAMESPACE, work=work)

    return lambda combination: copy.deepcopy(once(combination))


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or [] if "valueFrom" not in e}


def operator_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    container: dict[str, Any] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return container


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, (kind, kinds(objects))
    return found[0]


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_combination_lints_renders_and_passes_a_server_side_dry_run(
    combination: str, control_plane: ControlPlane, helm: Kubectl, rendered: Rendered, namespaces: None, tmp_path: Path
) -> None:
    values = COMBINATIONS[combination]
    lint = helm("lint", "--strict", str(CHART), "--namespace", NAMESPACE, *values_args(values, tmp_path))
    assert "0 chart(s) failed" in lint.stdout
    objects = rendered(combination)
    if combination in EXPECTED_KINDS:
        assert kinds(objects) == EXPECTED_KINDS[combination]
    for o in objects:
        assert o["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE, o["metadata"]["name"]
    manifest = tmp_path / "rendered.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    result = control_plane.kubectl("apply", "--dry-run=server", "--server-side", "-f", str(manifest), check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("serverside-applied (server dry run)") == len(objects), result.stdout


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_every_pod_runs_restricted(combination: str, rendered: Rendered) -> None:
    objects = rendered(combination)
    specs = pod_specs(objects)
    assert specs, kinds(objects)
    for where, spec in specs:
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0, where
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, where
        for c in [*spec.get("initContainers", []), *spec["containers"]]:
            sc = c["securityContext"]
            assert sc["runAsNonRoot"] is True, (where, c["name"])
            assert sc["readOnlyRootFilesystem"] is True, (where, c["name"])
            assert sc["allowPrivilegeEscalation"] is False, (where, c["name"])
            assert sc["capabilities"] == {"drop": ["ALL"]}, (where, c["name"])
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, (where, c["name"])


def test_the_chart_pods_use_the_same_security_as_the_operators_pods(rendered: Rendered) -> None:
    objects = rendered("audit-cronjob")
    ours = {k: v for k, v in pod_security_context().items() if k != "fsGroupChangePolicy"}
    for where, spec in pod_specs(objects):
        assert spec["securityContext"] == ours, where
        for c in [*spec.get("initContainers", []), *spec["containers"]]:
            assert c["securityContext"] == container_security_context(), (where, c["name"])


# ---------------------------------------------------------------------------------- defaults agree


CHART_ONLY = {"namespaces", "kubeconfig", "metrics_host", "instance"}
"""Operator settings the chart leaves at the operator's default or fills per pod (instance: the pod name)."""


def test_the_charts_defaults_are_the_operators_defaults(rendered: Rendered) -> None:
    objects = rendered("defaults")
    container = operator_container(objects)
    env = env_of(container)
    defaults = OperatorSettings()
    set_by_chart = set()
    for key, value in env.items():
        assert key.startswith("BG_OPERATOR_"), key
        field = key.removeprefix("BG_OPERATOR_").lower()
        assert field in OperatorSettings.model_fields, key
        parsed = OperatorSettings.model_validate({field: value})
        expected = getattr(defaults, field)
        if field == "controller_url":  # unset means the Service's DNS name in a pod, where the chart runs it
            expected = IN_CLUSTER_CONTROLLER_URL
        assert getattr(parsed, field) == expected, (key, value)
        set_by_chart.add(field)
    # Every setting is either passed by the chart or deliberately left to the operator: a new setting
    # must be decided on here.
    assert set_by_chart | CHART_ONLY == set(OperatorSettings.model_fields)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": defaults.metrics_port, "healthz": defaults.liveness_port}
    assert container["command"] == ["brokergroup", "operator"]
    # One image for the operator and the groups it runs, the one the operator defaults to.
    assert container["image"] == images.runtime_image() == defaults.image
    instance = [e for e in container["env"] if e["name"] == "BG_OPERATOR_INSTANCE"]
    assert instance == [{"name": "BG_OPERATOR_INSTANCE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    service = one(objects, "Service")
    assert service["spec"]["ports"][0]["port"] == defaults.metrics_port


def test_the_audit_image_is_the_spark_image(rendered: Rendered) -> None:
    cron = one(rendered("audit-cronjob"), "CronJob")
    spec = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert {c["image"] for c in [*spec["initContainers"], *spec["containers"]]} == {images.spark_image()}


# ---------------------------------------------------------------------------------- what each combination does


def test_namespaced_scope_grants_a_role_per_namespace_and_watches_only_those(rendered: Rendered) -> None:
    objects = rendered("namespaced")
    assert sorted(o["metadata"]["namespace"] for o in objects if o["kind"] == "Role") == ["team-a", "team-b"]
    for binding in (o for o in objects if o["kind"] == "RoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULL, "namespace": NAMESPACE}]
    assert env_of(operator_container(objects))["BG_OPERATOR_NAMESPACES"] == "team-a,team-b"
    objects = rendered("namespaced-release-namespace")
    assert [o["metadata"]["namespace"] for o in objects if o["kind"] == "Role"] == [NAMESPACE]
    assert env_of(operator_container(objects))["BG_OPERATOR_NAMESPACES"] == NAMESPACE
    # Cluster scope watches everything: no namespaces setting at all.
    assert "BG_OPERATOR_NAMESPACES" not in env_of(operator_container(rendered("defaults")))


def test_the_cluster_role_grants_exactly_the_documented_rules(rendered: Rendered) -> None:
    role = one(rendered("defaults"), "ClusterRole")
    granted = {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    assert not any(v == "*" or r == "*" or g == "*" for g, r, v in granted)
    assert ("", "pods/exec", "create") not in granted
    assert not {r for _, r, _ in granted} & {"nodes", "namespaces", "customresourcedefinitions"}
    # Claims are grown when a storage size is raised, never made or removed by the operator.
    assert {v for g, r, v in granted if r == "persistentvolumeclaims"} == {"list", "patch"}
    # RBAC: only the per-group Role and RoleBinding the brokers label their own pods with (the
    # operator holds `patch` on pods itself, so it needs no escalate or bind); no cluster-wide roles.
    rbac = {(r, v) for g, r, v in granted if g == "rbac.authorization.k8s.io"}
    assert {r for r, _ in rbac} == {"roles", "rolebindings"}
    assert not {v for _, v in rbac} & {"escalate", "bind", "impersonate", "*"}
    assert {v for g, r, v in granted if r == "brokergroups"} == {"get", "list", "watch", "patch"}


def test_service_monitor_selects_the_metrics_service(rendered: Rendered) -> None:
    objects = rendered("service-monitor")
    monitor, service = one(objects, "ServiceMonitor"), one(objects, "Service")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"] == "metrics"


def test_existing_service_account_and_no_rbac(rendered: Rendered) -> None:
    objects = rendered("existing-service-account")
    assert one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "ops-operator"


def test_pinned_images_and_the_groups_image(rendered: Rendered) -> None:
    container = operator_container(rendered("pinned-images"))
    assert container["image"] == f"{images.RUNTIME_REPOSITORY}@{DIGEST}"
    assert env_of(container)["BG_OPERATOR_IMAGE"] == "registry.example/brokergroup:1.2.3"


def test_placement_values_reach_the_pod(rendered: Rendered) -> None:
    values = COMBINATIONS["placement"]
    deployment = one(rendered("placement"), "Deployment")
    pod = deployment["spec"]["template"]
    for key in ("priorityClassName", "nodeSelector", "tolerations", "affinity", "imagePullSecrets"):
        assert pod["spec"][key] == values[key], key
    assert pod["spec"]["containers"][0]["resources"] == values["resources"]
    assert pod["metadata"]["annotations"] == values["podAnnotations"]
    assert pod["metadata"]["labels"]["team"] == "ops"


def test_operator_settings_reach_the_environment(rendered: Rendered) -> None:
    container = operator_container(rendered("operator-settings"))
    env = env_of(container)
    settings = OperatorSettings.model_validate(
        {k.removeprefix("BG_OPERATOR_").lower(): v for k, v in env.items() if k.startswith("BG_OPERATOR_")}
    )
    assert (settings.log_level, settings.resync_seconds, settings.retry_seconds) == ("DEBUG", 30, 2)
    assert (settings.controller_url, settings.controller_timeout) == ("http://{cluster_ip}:9878", 3)
    assert (settings.metrics_port, settings.liveness_port) == (9090, 9091)
    assert {p["containerPort"] for p in container["ports"]} == {9090, 9091}
    assert env["PYTHONFAULTHANDLER"] == "1"


def test_audit_cronjob_fetches_every_controller_then_audits(rendered: Rendered) -> None:
    cron = one(rendered("audit-cronjob"), "CronJob")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    fetch, audit = pod["initContainers"][0], pod["containers"][0]
    assert fetch["command"][:3] == ["brokergroup", "audit", "fetch"]
    urls = [fetch["args"][i + 1] for i, a in enumerate(fetch["args"]) if a == "--controller"]
    assert urls == [f"http://demo-controller-{i}.demo-controller.apps.svc:9878" for i in range(3)]
    assert audit["command"] == ["brokergroup", "audit", "/work/events"]
    assert "--fail-on-violations" in audit["args"]
    assert pod["automountServiceAccountToken"] is False
    assert not [v for v in pod["volumes"] if "persistentVolumeClaim" in v]

    cron = one(rendered("audit-cronjob-reports"), "CronJob")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    fetch, audit = pod["initContainers"][0], pod["containers"][0]
    assert fetch["args"].count("--controller") == 5
    assert f"demo-controller-4.demo-controller.{NAMESPACE}.svc" in fetch["args"][-1]
    assert "--fail-on-violations" not in audit["args"]
    assert audit["args"][-2:] == ["--min-in-sync-replicas", "2"]
    assert audit["args"][:2] == ["--out", "/reports/$(POD_NAME)"]
    assert {"name": "reports", "persistentVolumeClaim": {"claimName": "audit-reports"}} in pod["volumes"]
    assert cron["spec"]["timeZone"] == "Etc/UTC"


def test_the_network_policy_admits_metrics_and_lets_the_operator_reach_only_what_it_uses(rendered: Rendered) -> None:
    assert "NetworkPolicy" not in {kind for kind, _ in kinds(rendered("defaults"))}, "off by default"
    objects = rendered("network-policy")
    policy = one(objects, "NetworkPolicy")["spec"]
    pod_labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items(), "selects the operator pod"
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    (ingress,) = policy["ingress"]
    metrics_port = next(p for p in operator_container(objects)["ports"] if p["name"] == "metrics")
    assert ingress["ports"] == [{"protocol": "TCP", "port": metrics_port["containerPort"]}]
    assert ingress["from"] == COMBINATIONS["network-policy"]["networkPolicy"]["metricsFrom"]
    dns, api, controllers, extra = policy["egress"]
    assert "to" not in dns and {(p["protocol"], p["port"]) for p in dns["ports"]} == {("UDP", 53), ("TCP", 53)}
    assert api["to"] == [{"ipBlock": {"cidr": "10.96.0.1/32"}}, {"ipBlock": {"cidr": "fd00::1/128"}}]
    assert [p["port"] for p in api["ports"]] == [443, 6443]
    (peer,) = controllers["to"]
    # The peer must select the controller pods the operator creates, of any group, and nothing else.
    controller_pod = labels.common("any-group", labels.COMPONENT_CONTROLLER)
    broker_pod = labels.common("any-group", labels.COMPONENT_BROKER)
    assert peer["podSelector"]["matchLabels"].items() <= controller_pod.items()
    assert not peer["podSelector"]["matchLabels"].items() <= broker_pod.items()
    assert peer["namespaceSelector"] == {}, "Cluster scope: every namespace"
    assert controllers["ports"] == [{"protocol": "TCP", "port": names.CONTROLLER_API_PORT}]
    assert extra == COMBINATIONS["network-policy"]["networkPolicy"]["extraEgress"][0]

    objects = rendered("network-policy-namespaced")
    _, api, controllers = one(objects, "NetworkPolicy")["spec"]["egress"]
    assert [p["port"] for p in api["ports"]] == [6443]
    assert controllers["to"][0]["namespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}]
    }


# ---------------------------------------------------------------------------------- bad values

BAD_VALUES = [
    ({"watch": {"scope": "cluster"}}, "/watch/scope"),
    ({"watch": {"scope": "Namespaced", "namespaces": ["Team_A"]}}, "/watch/namespaces/0"),
    ({"operator": {"metricPort": 1}}, "'metricPort' not allowed"),
    ({"operator": {"resyncSeconds": 0}}, "/operator/resyncSeconds"),
    ({"operator": {"logLevel": "LOUD"}}, "/operator/logLevel"),
    ({"operator": {"controllerUrl": "controller:9878"}}, "/operator/controllerUrl"),
    ({"operator": {"metricsPort": 8081}}, "operator.metricsPort and operator.livenessPort are both 8081"),
    ({"image": {"digest": "abc"}}, "/image/digest"),
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ({"resources": {"limits": {"memory": "lots"}}}, "/resources/limits/memory"),
    ({"serviceAccount": {"create": False}}, "serviceAccount.name is required"),
    ({"metrics": {"service": {"enabled": False}, "serviceMonitor": {"enabled": True}}}, "needs metrics.service"),
    ({"audit": {"cronJob": {"enabled": True}}}, "audit.cronJob.brokerGroup is required"),
    ({"audit": {"cronJob": {"brokerGroup": "Demo"}}}, "/audit/cronJob/brokerGroup"),
    ({"audit": {"cronJob": {"controllerReplicas": 2}}}, "/audit/cronJob/controllerReplicas"),
    ({"networkPolicy": {"enabled": True}}, "networkPolicy.apiServer.cidrs is required"),
    ({"networkPolicy": {"apiServer": {"cidrs": ["10.0.0.1"]}}}, "/networkPolicy/apiServer/cidrs/0"),
    ({"networkPolicy": {"apiServer": {"ports": [0]}}}, "/networkPolicy/apiServer/ports/0"),
    ({"networkPolicy": {"metricsFrom": ["monitoring"]}}, "/networkPolicy/metricsFrom/0"),
    ({"unknownTopLevel": True}, "'unknownTopLevel' not allowed"),
]


@pytest.mark.usefixtures("helm")
@pytest.mark.parametrize(("values", "message"), BAD_VALUES, ids=[m for _, m in BAD_VALUES])
def test_bad_values_are_refused_naming_the_value(
    values: dict[str, Any], message: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    with pytest.raises(KubectlError) as refused:
        render(control_plane, values, work=tmp_path)
    assert message in refused.value.stderr


def test_values_file_is_valid_and_fully_described_by_the_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.validate(values, schema)

    documented = (helmchart.ROOT / "docs" / "install.md").read_text()

    def leaves(node: dict[str, Any], sub: dict[str, Any], prefix: str) -> Iterator[str]:
        for key, value in node.items():
            assert key in sub.get("properties", {}), f"{prefix}{key} is not in values.schema.json"
            child = sub["properties"][key]
            documented_whole = f"`{prefix}{key}`" in documented  # e.g. `resources`: one row for the object
            if isinstance(value, dict) and child.get("properties") and not documented_whole:
                yield from leaves(value, child, f"{prefix}{key}.")
            else:
                yield f"{prefix}{key}"

    missing = [leaf for leaf in leaves(values, schema, "") if f"`{leaf}`" not in documented]
    assert not missing, f"values without a row in docs/install.md: {missing}"
