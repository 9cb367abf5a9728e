"""spark-submit of the audit in cluster mode against the e2e kube-apiserver (docs/audit.md, "On Kubernetes").

The command is read from docs/audit.md, the one place it is written, and run as it stands with only the
server, the namespace and the credentials substituted. It submits as a least-privilege identity: a service
account bound to the `brokergroup-audit-submitter` Role of spark/k8s/rbac.yaml, with a TokenRequest token
(fabric8, Spark's Kubernetes client, reads client keys as RSA and cannot use this control plane's ECDSA
client certificates).

What is checked is what spark-submit leaves in the apiserver: the driver pod (image, arguments, service
account, labels, the pod template's security settings and volumes), its spark.properties ConfigMap with
every setting the command passed, the executors' pod template, and the driver's Service. No kubelet runs
for the namespace, so the driver pod stays Pending: the driver, the entrypoint and the executors never run
here (the test kubelet ignores images and could not run the image's entrypoint anyway). What the driver
would do with its service account is checked with SubjectAccessReviews instead.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from tests.e2e.kubeenv import ControlPlane, Kubectl, eventually
from tests.needs import missing

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "audit.md"
K8S = ROOT / "spark" / "k8s"
SUBMITTER = "audit-submitter"
DRIVER_SA = "brokergroup-audit"
SERVER_PLACEHOLDER = "https://<apiserver-host>:<port>"
NAMESPACE_PLACEHOLDER = "<namespace>"
EXECUTOR_TEMPLATE_IN_POD = "/opt/spark/pod-template/pod-spec-template.yml"
SUBMIT_TIMEOUT = 180.0


# ------------------------------------------------------------------------------------- the command


def docs_command() -> list[str]:
    """The spark-submit command of docs/audit.md: the first ```bash block of "## On Kubernetes" that runs
    spark-submit, split as the shell would (placeholders still in)."""
    text = DOCS.read_text()
    start = text.index("\n## On Kubernetes\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else None]
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL):
        if "bin/spark-submit" in block:
            return shlex.split(block.replace("\\\n", " "))
    raise AssertionError(f"{DOCS}: no spark-submit block under '## On Kubernetes'")


def split_command(argv: list[str]) -> tuple[dict[str, str], dict[str, str], str, list[str]]:
    """(spark-submit options, --conf settings, primary resource, application arguments)."""
    options: dict[str, str] = {}
    confs: dict[str, str] = {}
    i = 1
    while not argv[i].startswith("local://"):
        flag, value = argv[i], argv[i + 1]
        if flag == "--conf":
            key, _, setting = value.partition("=")
            confs[key] = setting
        else:
            options[flag] = value
        i += 2
    return options, confs, argv[i], argv[i + 1 :]


def submit_argv(spark_home: Path, *, server: str, namespace: str, credentials: dict[str, str]) -> list[str]:
    """The docs' command for this control plane: server and namespace filled in, credentials added before
    the primary resource."""
    argv = docs_command()
    assert argv[0] == "$SPARK_HOME/bin/spark-submit", argv[0]
    filled = [str(spark_home / "bin" / "spark-submit")]
    for arg in argv[1:]:
        filled.append(arg.replace(SERVER_PLACEHOLDER, server).replace(NAMESPACE_PLACEHOLDER, namespace))
    left = [arg for arg in filled if "<" in arg]
    assert not left, f"placeholders the test does not fill: {left}"
    primary = next(i for i, arg in enumerate(filled) if arg.startswith("local://"))
    extra = [item for key, value in credentials.items() for item in ("--conf", f"{key}={value}")]
    return filled[:primary] + extra + filled[primary:]


def java_properties(text: str) -> dict[str, str]:
    """The key=value lines of a java.util.Properties file as Spark writes it (`\\:` and `\\=` escaped)."""
    result = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "!")):
            continue
        key, value = re.split(r"(?<!\\)=", line, maxsplit=1)
        result[unescape(key)] = unescape(value)
    return result


def unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


# -------------------------------------------------------------------------------------- tooling


@pytest.fixture(scope="module")
def spark_home() -> Path:
    """The installed pyspark package: bin/spark-submit and jars/ with Spark's Kubernetes backend."""
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        missing("spark-submit needs Java 17 or 21 (java on PATH or JAVA_HOME)")
    try:
        import pyspark
    except ImportError:
        missing("pyspark is not installed (pip install -e '.[audit]')")
    home = Path(pyspark.__file__).parent
    if not os.access(home / "bin" / "spark-submit", os.X_OK):
        missing(f"{home}/bin/spark-submit is missing")
    for pattern in ("spark-kubernetes_*.jar", "kubernetes-client-[0-9]*.jar", "kubernetes-model-core-*.jar"):
        if not list((home / "jars").glob(pattern)):
            missing(f"{home}/jars has no {pattern}: this pyspark cannot submit to Kubernetes")
    return home


def run_submit(argv: list[str], tmp_path: Path, spark_home: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    env = dict(os.environ)
    # fabric8 would otherwise merge in the user's kubeconfig: only the --conf credentials count here.
    env["KUBECONFIG"] = str(tmp_path / "no-kubeconfig")
    env["SPARK_HOME"] = str(spark_home)
    started = time.monotonic()
    result = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=SUBMIT_TIMEOUT, check=False
    )
    return result, time.monotonic() - started


@pytest.fixture
def rbac(kubectl: Kubectl, namespace: str) -> None:
    """spark/k8s/rbac.yaml and pvc.yaml applied to the namespace, as docs/audit.md says."""
    kubectl("-n", namespace, "apply", "-f", str(K8S / "rbac.yaml"), "-f", str(K8S / "pvc.yaml"))


@pytest.fixture
def submitter(
    rbac: None,
    control_plane: ControlPlane,
    kube_api: kubernetes.client.ApiClient,
    kubectl: Kubectl,
    namespace: str,
    tmp_path: Path,
) -> dict[str, str]:
    """A service account bound to the submitter Role of rbac.yaml, and the --conf credentials for it: the
    cluster CA and a TokenRequest token, in files."""
    core = kubernetes.client.CoreV1Api(kube_api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": SUBMITTER}})
    kubectl(
        "-n", namespace, "create", "rolebinding", SUBMITTER,
        "--role=brokergroup-audit-submitter", f"--serviceaccount={namespace}:{SUBMITTER}",
    )  # fmt: skip
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    token = core.create_namespaced_service_account_token(SUBMITTER, namespace, request).status.token
    token_file = tmp_path / "submitter.token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    return {
        "spark.kubernetes.authenticate.submission.caCertFile": str(control_plane.ca_cert),
        "spark.kubernetes.authenticate.submission.oauthTokenFile": str(token_file),
    }


# ---------------------------------------------------------------------------------------- tests


def test_docs_command_matches_the_spark_application() -> None:
    """The docs' command and spark/k8s/sparkapplication.yaml run the same thing (no cluster needed)."""
    options, confs, primary, arguments = split_command(docs_command())
    app = yaml.safe_load((K8S / "sparkapplication.yaml").read_text())
    spec = app["spec"]
    assert options["--deploy-mode"] == spec["mode"] == "cluster"
    assert options["--name"] == app["metadata"]["name"]
    assert primary == spec["mainApplicationFile"]
    assert arguments == spec["arguments"]
    assert confs["spark.kubernetes.container.image"] == spec["image"]
    assert confs["spark.kubernetes.authenticate.driver.serviceAccountName"] == spec["driver"]["serviceAccount"]
    for role in ("driver", "executor"):
        assert confs[f"spark.{role}.cores"] == str(spec[role]["cores"])
        assert confs[f"spark.{role}.memory"] == spec[role]["memory"]
        assert confs[f"spark.kubernetes.{role}.podTemplateFile"] == "spark/k8s/pod-template.yaml"
    assert confs["spark.executor.instances"] == str(spec["executor"]["instances"])


def test_spark_submit_creates_the_driver(
    control_plane: ControlPlane,
    kube_api: kubernetes.client.ApiClient,
    namespace: str,
    submitter: dict[str, str],
    spark_home: Path,
    tmp_path: Path,
) -> None:
    argv = submit_argv(spark_home, server=control_plane.server, namespace=namespace, credentials=submitter)
    result, seconds = run_submit(argv, tmp_path, spark_home)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"spark-submit exited {result.returncode} after {seconds:.1f} s:\n{output[-4000:]}"
    assert "Deployed Spark application brokergroup-audit" in output
    print(f"spark-submit took {seconds:.1f} s")

    core = kubernetes.client.CoreV1Api(kube_api)
    pod = eventually(
        "the driver pod exists",
        lambda: one(core.list_namespaced_pod(namespace, label_selector="spark-role=driver").items),
        timeout=30,
    )
    _, confs, primary, arguments = split_command(argv)
    check_driver_pod(pod, confs, primary, arguments)
    properties = driver_properties(core, namespace, pod)
    check_properties(properties, confs, server=control_plane.server, namespace=namespace)
    check_executor_template(core, namespace, pod)
    service = core.read_namespaced_service(f"{pod.metadata.name}-svc", namespace)
    assert service.spec.cluster_ip == "None"
    assert service.spec.selector["spark-app-selector"] == pod.metadata.labels["spark-app-selector"]
    assert pod.status.phase == "Pending"  # no kubelet: nothing runs it


def test_driver_service_account_may_do_what_spark_does(
    kube_api: kubernetes.client.ApiClient, rbac: None, namespace: str
) -> None:
    """The driver's Role, asked of the real RBAC authorizer with the calls Spark 4's driver makes."""
    allowed = [("pods", verb) for verb in ("get", "list", "watch", "create", "patch", "delete", "deletecollection")] + [
        ("configmaps", "create"),
        ("configmaps", "deletecollection"),
        ("services", "deletecollection"),
        ("persistentvolumeclaims", "list"),
        ("persistentvolumeclaims", "deletecollection"),
    ]
    denied = [("secrets", "get"), ("configmaps", "get"), ("persistentvolumeclaims", "create"), ("services", "create")]
    user = f"system:serviceaccount:{namespace}:{DRIVER_SA}"
    answers = {(resource, verb): may(kube_api, user, namespace, resource, verb) for resource, verb in allowed + denied}
    assert [key for key in allowed if not answers[key]] == []
    assert [key for key in denied if answers[key]] == []


def test_missing_service_account_fails_the_submission(
    control_plane: ControlPlane,
    kube_api: kubernetes.client.ApiClient,
    namespace: str,
    submitter: dict[str, str],
    spark_home: Path,
    tmp_path: Path,
) -> None:
    argv = submit_argv(spark_home, server=control_plane.server, namespace=namespace, credentials=submitter)
    argv = [
        "spark.kubernetes.authenticate.driver.serviceAccountName=nobody"
        if arg.startswith("spark.kubernetes.authenticate.driver.serviceAccountName=")
        else arg
        for arg in argv
    ]
    result, seconds = run_submit(argv, tmp_path, spark_home)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-4000:]
    assert f'error looking up service account {namespace}/nobody: serviceaccount "nobody" not found' in output
    print(f"failed spark-submit took {seconds:.1f} s")
    core = kubernetes.client.CoreV1Api(kube_api)
    assert core.list_namespaced_pod(namespace, label_selector="spark-role=driver").items == []
    left = [c.metadata.name for c in core.list_namespaced_config_map(namespace).items]
    assert left == ["kube-root-ca.crt"]


# ------------------------------------------------------------------------------------- helpers


def one(items: list[Any]) -> Any:
    assert len(items) <= 1, f"more than one: {[item.metadata.name for item in items]}"
    return items[0] if items else None


def check_driver_pod(pod: Any, confs: dict[str, str], primary: str, arguments: list[str]) -> None:
    spec = pod.spec
    assert spec.service_account_name == confs["spark.kubernetes.authenticate.driver.serviceAccountName"]
    assert spec.restart_policy == "Never"
    (container,) = spec.containers
    assert container.image == confs["spark.kubernetes.container.image"]
    assert container.args == [
        "driver",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "--class",
        "org.apache.spark.deploy.PythonRunner",
        primary,
        *arguments,
    ]
    labels = pod.metadata.labels
    assert labels["spark-role"] == "driver"
    assert labels["spark-app-name"] == "brokergroup-audit"
    assert labels["app.kubernetes.io/name"] == "brokergroup-audit"  # from the pod template
    # What spark/k8s/entrypoint.sh needs of a driver pod.
    env = {e.name: e for e in container.env}
    assert env["SPARK_DRIVER_BIND_ADDRESS"].value_from.field_ref.field_path == "status.podIP"
    assert env["SPARK_CONF_DIR"].value == "/opt/spark/conf"
    # The pod template: non-root, read-only root file system, the shared claim at /data, /tmp writable.
    assert (spec.security_context.run_as_user, spec.security_context.run_as_non_root) == (10001, True)
    assert container.security_context.read_only_root_filesystem is True
    mounts = {m.mount_path: m.name for m in container.volume_mounts}
    volumes = {v.name: v for v in spec.volumes}
    assert volumes[mounts["/data"]].persistent_volume_claim.claim_name == "brokergroup-audit"
    assert volumes[mounts["/tmp"]].empty_dir is not None
    assert any(name.startswith("spark-local-dir-") and volumes[name].empty_dir for name in volumes)
    # docs/audit.md asks for less CPU than the driver's cores (a 2-CPU node fits a driver and two
    # executors only that way); Spark's default request is spark.driver.cores.
    requests = container.resources.requests
    assert requests["cpu"] == confs.get("spark.kubernetes.driver.request.cores", confs["spark.driver.cores"])


def driver_properties(core: kubernetes.client.CoreV1Api, namespace: str, pod: Any) -> dict[str, str]:
    (volume,) = [v for v in pod.spec.volumes if v.name == "spark-conf-volume-driver"]
    config_map = core.read_namespaced_config_map(volume.config_map.name, namespace)
    return java_properties(config_map.data["spark.properties"])


def check_properties(properties: dict[str, str], confs: dict[str, str], *, server: str, namespace: str) -> None:
    assert properties["spark.master"] == f"k8s://{server}"
    assert properties["spark.submit.deployMode"] == "cluster"
    assert properties["spark.app.name"] == "brokergroup-audit"
    assert properties["spark.kubernetes.namespace"] == namespace
    expected = dict(confs, **{"spark.kubernetes.executor.podTemplateFile": EXECUTOR_TEMPLATE_IN_POD})
    wrong = {key: (value, properties.get(key)) for key, value in expected.items() if properties.get(key) != value}
    assert wrong == {}, "settings of the command that the driver does not get (expected, got)"


def check_executor_template(core: kubernetes.client.CoreV1Api, namespace: str, pod: Any) -> None:
    (volume,) = [v for v in pod.spec.volumes if v.name == "pod-template-volume"]
    config_map = core.read_namespaced_config_map(volume.config_map.name, namespace)
    (template,) = config_map.data.values()
    assert yaml.safe_load(template) == yaml.safe_load((K8S / "pod-template.yaml").read_text())


def may(api: kubernetes.client.ApiClient, user: str, namespace: str, resource: str, verb: str) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
            "resourceAttributes": {"namespace": namespace, "resource": resource, "verb": verb},
        },
    }
    answer = kubernetes.client.AuthorizationV1Api(api).create_subject_access_review(review)
    return bool(answer.status.allowed)
