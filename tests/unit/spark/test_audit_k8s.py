"""spark/k8s/: the image's entrypoint (with a stand-in spark-submit and java), the spark-submit primary
resource's `{run}` expansion, and the manifests agreeing with each other (docs/audit.md, "On Kubernetes").

The spark-submit command itself is checked against sparkapplication.yaml in tests/e2e/test_spark_submit.py,
which reads it from the docs."""

from __future__ import annotations

import datetime
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pyspark
import pytest
import yaml

from brokergroup.spark import session

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "spark" / "k8s"
ENTRYPOINT = K8S / "entrypoint.sh"
ECHO_ARGS = '#!/bin/sh\nfor arg in "$@"; do printf "%s\\n" "$arg"; done\n'


def load(name: str) -> Any:
    return yaml.safe_load((K8S / name).read_text())


def load_all(name: str) -> list[Any]:
    return list(yaml.safe_load_all((K8S / name).read_text()))


# --------------------------------------------------------------------------------- entrypoint.sh


@pytest.fixture
def fake_spark(tmp_path: Path) -> dict[str, str]:
    """SPARK_HOME and JAVA_HOME whose bin/spark-submit and bin/java print their arguments, one a line."""
    for tool in ("spark/bin/spark-submit", "jdk/bin/java"):
        path = tmp_path / tool
        path.parent.mkdir(parents=True)
        path.write_text(ECHO_ARGS)
        path.chmod(0o755)
    return {"PATH": "/usr/bin:/bin", "SPARK_HOME": str(tmp_path / "spark"), "JAVA_HOME": str(tmp_path / "jdk")}


def entrypoint(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash")
    assert bash is not None, "the image's entrypoint is a bash script"
    return subprocess.run([bash, str(ENTRYPOINT), *args], env=env, capture_output=True, text=True, check=False)


def test_driver_runs_spark_submit_in_client_mode(fake_spark: dict[str, str]) -> None:
    spark_args = [
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "--class",
        "org.apache.spark.deploy.PythonRunner",
    ]
    app = ["local:///opt/brokergroup/audit.py", "/data/events", "--out", "/data/reports/{run}", "--fail-on-violations"]
    env = fake_spark | {"SPARK_DRIVER_BIND_ADDRESS": "10.88.0.12"}
    result = entrypoint("driver", *spark_args, *app, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "--conf",
        "spark.driver.bindAddress=10.88.0.12",
        "--deploy-mode",
        "client",
        *spark_args,
        *app,
    ]


def test_executor_runs_the_backend_with_the_pods_settings(fake_spark: dict[str, str]) -> None:
    env = fake_spark | {
        "SPARK_CONF_DIR": "/opt/spark/conf",
        "SPARK_JAVA_OPT_10": "-Dten=a b",
        "SPARK_JAVA_OPT_2": "-Dtwo",
        "SPARK_JAVA_OPT_0": "-Dzero",
        "SPARK_EXECUTOR_MEMORY": "2g",
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@driver-svc.ns.svc:7078",
        "SPARK_EXECUTOR_ID": "3",
        "SPARK_EXECUTOR_CORES": "1",
        "SPARK_APPLICATION_ID": "spark-0123",
        "SPARK_EXECUTOR_POD_IP": "10.88.0.13",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": "brokergroup-audit-exec-3",
    }
    result = entrypoint("executor", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "-Dzero",
        "-Dtwo",
        "-Dten=a b",  # numeric order, one option per variable even with a space in it
        "-Xms2g",
        "-Xmx2g",
        "-cp",
        f"/opt/spark/conf:{fake_spark['SPARK_HOME']}/jars/*",
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        "--driver-url",
        env["SPARK_DRIVER_URL"],
        "--executor-id",
        "3",
        "--cores",
        "1",
        "--app-id",
        "spark-0123",
        "--hostname",
        "10.88.0.13",
        "--resourceProfileId",
        "0",
        "--podName",
        "brokergroup-audit-exec-3",
    ]


def test_other_commands_run_as_given_without_spark() -> None:
    result = entrypoint("printf", "%s|", "brokergroup", "audit", env={"PATH": "/usr/bin:/bin"})
    assert (result.returncode, result.stdout) == (0, "brokergroup|audit|")


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["driver", "x"], {}, "SPARK_HOME: must be the pyspark package folder"),
        (["driver", "x"], {"SPARK_HOME": "/opt/x"}, "SPARK_DRIVER_BIND_ADDRESS: set by Spark on driver pods"),
        (["executor"], {"SPARK_HOME": "/opt/x"}, "SPARK_EXECUTOR_MEMORY: unbound variable"),
        ([], {}, "usage: entrypoint.sh driver ARGS... | executor | COMMAND [ARGS...]"),
    ],
)
def test_a_missing_setting_stops_with_its_name(args: list[str], env: dict[str, str], message: str) -> None:
    result = entrypoint(*args, env={"PATH": "/usr/bin:/bin"} | env)
    assert result.returncode != 0
    assert message in result.stderr


def test_entrypoint_is_executable() -> None:
    assert os.access(ENTRYPOINT, os.X_OK)


# -------------------------------------------------------------------------------- audit_driver.py


@pytest.fixture(scope="module")
def audit_driver() -> ModuleType:
    """spark/k8s/audit_driver.py, loaded from its file as the image runs it (it is no package module)."""
    spec = importlib.util.spec_from_file_location("audit_driver", K8S / "audit_driver.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_run_placeholder_becomes_the_utc_start_time(audit_driver: ModuleType) -> None:
    now = datetime.datetime(2026, 11, 22, 4, 17, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
    argv = ["/data/events", "--out", "/data/reports/{run}", "--fail-on-violations"]
    assert audit_driver.expand(argv, now) == [
        "/data/events",
        "--out",
        "/data/reports/20261122T031705Z",
        "--fail-on-violations",
    ]
    assert audit_driver.expand(["/data/events"], now) == ["/data/events"]


def test_a_plain_process_has_no_submitted_master(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(session.SUBMIT_GATEWAY_ENV, raising=False)
    assert session.submitted_master() is None


# ------------------------------------------------------------------------------------ manifests


def test_the_schedule_runs_the_spark_application_unchanged() -> None:
    app, scheduled = load("sparkapplication.yaml"), load("scheduledsparkapplication.yaml")
    assert (app["apiVersion"], app["kind"]) == ("sparkoperator.k8s.io/v1beta2", "SparkApplication")
    assert (scheduled["apiVersion"], scheduled["kind"]) == ("sparkoperator.k8s.io/v1beta2", "ScheduledSparkApplication")
    assert scheduled["spec"]["template"] == app["spec"]
    assert scheduled["spec"]["concurrencyPolicy"] == "Forbid"


def test_the_application_says_what_the_pod_template_says() -> None:
    spec = load("sparkapplication.yaml")["spec"]
    template = load("pod-template.yaml")["spec"]
    (container,) = template["containers"]
    assert spec["volumes"] == template["volumes"]
    for role in ("driver", "executor"):
        assert spec[role]["podSecurityContext"] == template["securityContext"], role
        assert spec[role]["securityContext"] == container["securityContext"], role
        assert spec[role]["volumeMounts"] == container["volumeMounts"], role
    assert {"/data", "/tmp"} == {m["mountPath"] for m in container["volumeMounts"]}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert template["securityContext"]["runAsUser"] == 10001


def test_the_application_uses_the_rbac_and_the_claim() -> None:
    spec = load("sparkapplication.yaml")["spec"]
    objects = {(o["kind"], o["metadata"]["name"]): o for o in load_all("rbac.yaml")}
    account = spec["driver"]["serviceAccount"]
    assert ("ServiceAccount", account) in objects
    binding = objects[("RoleBinding", "brokergroup-audit-driver")]
    assert binding["roleRef"]["name"] == "brokergroup-audit-driver"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account}]
    (claim,) = [v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v]
    pvc = load("pvc.yaml")
    assert pvc["metadata"]["name"] == claim
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]


def test_the_spark_version_is_the_installed_pysparks() -> None:
    """The operator is told the Spark of the image, which installs the same `pyspark` requirement."""
    version = load("sparkapplication.yaml")["spec"]["sparkVersion"]
    assert version.split(".")[:2] == pyspark.__version__.split(".")[:2]
