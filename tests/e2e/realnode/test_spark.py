"""Spark on Kubernetes for real (docs/audit.md, "On Kubernetes"), on the real node: the docs' fetch Job fills the
audit claim from a BrokerGroup's controllers over cluster DNS, the docs' spark-submit runs the audit with a
driver and two executors of the spark image, and the chart's audit CronJob runs once
(`kubectl create job --from=cronjob/…`). The spark image is built here, only for this module (1.4 GB)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.dynamic import DynamicClient

from tests.e2e.helmchart import CHART
from tests.e2e.kubeenv import ControlPlane, eventually
from tests.e2e.realnode import config
from tests.e2e.realnode.conftest import build_images
from tests.e2e.realnode.node import ROOT, RealNode
from tests.e2e.test_spark_submit import (
    DOCS,
    K8S,
    run_submit,
    spark_home,  # noqa: F401 (a fixture, the same as the control-plane test's)
    submit_argv,
)

NS = "audit"
BG = "demo"
RELEASE = "audited"
SUBMITTER = "audit-submitter"
SPARK_TIMEOUT = 1200


def plane(node: RealNode) -> ControlPlane:
    assert node.control_plane is not None
    return node.control_plane


@pytest.fixture(scope="module")
def spark_image(real_node: RealNode) -> float:
    """The spark target built and imported into the node's containerd: seconds for both."""
    started = time.monotonic()
    build_images(spark=True)
    real_node.import_images([config.SPARK_IMAGE])
    return time.monotonic() - started


@pytest.fixture(scope="module")
def audited_group(real_node: RealNode, node_dyn: DynamicClient) -> Iterator[None]:
    """The chart (with its audit CronJob for demo in namespace audit) and examples/minimal.yaml there, Ready."""
    cp = plane(real_node)
    cp.kubectl("create", "namespace", NS)
    cp.helm(
        "install", RELEASE, str(CHART), "--namespace", NS, "--wait", "--timeout", "300s",
        "--set", "audit.cronJob.enabled=true", "--set", f"audit.cronJob.brokerGroup={BG}",
        "--set", "audit.cronJob.resources.requests.cpu=300m", timeout=330,
    )  # fmt: skip
    cp.kubectl("apply", "-n", NS, "-f", str(ROOT / "examples" / "minimal.yaml"))
    eventually(
        "BrokerGroup demo Ready",
        lambda: ((cp.get(f"/apis/brokergroup.io/v1alpha1/namespaces/{NS}/brokergroups/{BG}").get("status") or {})
                 .get("phase")) == "Ready",
        timeout=300,
    )  # fmt: skip
    yield
    cp.kubectl("delete", "-n", NS, "bg", BG, "--wait=true", "--timeout=120s", check=False, timeout=150)
    cp.helm("uninstall", RELEASE, "--namespace", NS, "--wait", check=False)


def docs_fetch_job() -> dict[str, Any]:
    """The fetch Job of docs/audit.md (the yaml block after "Fill `/data/events`"), for demo in namespace audit."""
    text = DOCS.read_text()
    start = text.index("Fill `/data/events`")
    block = re.search(r"```yaml\n(.*?)```", text[start:], flags=re.DOTALL)
    assert block is not None, f"{DOCS}: no fetch Job after 'Fill `/data/events`'"
    job: dict[str, Any] = yaml.safe_load(block.group(1).replace("<bg>", BG).replace("<ns>", NS))
    return job


def job_done(cp: ControlPlane, name: str) -> dict[str, Any] | None:
    status: dict[str, Any] = cp.get(f"/apis/batch/v1/namespaces/{NS}/jobs/{name}").get("status") or {}
    if status.get("failed"):
        logs = cp.kubectl("logs", "-n", NS, f"job/{name}", "--all-containers", check=False).stdout
        raise AssertionError(f"Job {name} failed: {status}\n{logs[-3000:]}")
    return status if status.get("succeeded") else None


def claim_folder(real_node: RealNode, claim: str) -> Path:
    cp = plane(real_node)
    volume = cp.get(f"/api/v1/namespaces/{NS}/persistentvolumeclaims/{claim}")["spec"]["volumeName"]
    return Path(cp.get(f"/api/v1/persistentvolumes/{volume}")["spec"]["hostPath"]["path"])


def test_docs_spark_submit_runs_the_audit_with_a_driver_and_two_executors(
    real_node: RealNode,
    audited_group: None,
    spark_image: float,
    spark_home: Path,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    print(f"\nspark image built and imported: {spark_image:.1f} s")
    cp = plane(real_node)
    cp.kubectl("-n", NS, "apply", "-f", str(K8S / "rbac.yaml"), "-f", str(K8S / "pvc.yaml"))
    cp.kubectl("-n", NS, "apply", "-f", "-", input=json.dumps(docs_fetch_job()))
    eventually("the fetch Job succeeded", lambda: job_done(cp, "brokergroup-audit-fetch"), timeout=300)
    events = claim_folder(real_node, "brokergroup-audit") / "events"
    assert len([p for p in events.iterdir() if p.is_dir()]) == 3, list(events.iterdir())

    cp.kubectl("-n", NS, "create", "serviceaccount", SUBMITTER)
    cp.kubectl("-n", NS, "create", "rolebinding", SUBMITTER, "--role=brokergroup-audit-submitter",
               f"--serviceaccount={NS}:{SUBMITTER}")  # fmt: skip
    token = tmp_path / "submitter.token"
    token.write_text(cp.kubectl("-n", NS, "create", "token", SUBMITTER, "--duration=2h").stdout.strip())
    argv = submit_argv(
        spark_home,
        server=cp.server,
        namespace=NS,
        credentials={
            "spark.kubernetes.authenticate.submission.caCertFile": str(cp.ca_cert),
            "spark.kubernetes.authenticate.submission.oauthTokenFile": str(token),
        },
    )
    started = time.monotonic()
    result, _ = run_submit(argv, tmp_path, spark_home)
    assert result.returncode == 0, result.stderr[-4000:]

    executors: set[str] = set()  # the driver deletes them when the application ends: collect them on the way

    def driver() -> dict[str, Any] | None:
        selector = "spark-role%3Dexecutor"
        executors.update(
            p["metadata"]["name"] for p in cp.get(f"/api/v1/namespaces/{NS}/pods?labelSelector={selector}")["items"]
        )
        found = cp.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=spark-role%3Ddriver")["items"]
        return found[0] if found and found[0]["status"].get("phase") in ("Succeeded", "Failed") else None

    pod = eventually("the driver finished", driver, timeout=SPARK_TIMEOUT, interval=2)
    elapsed = time.monotonic() - started
    logs = cp.kubectl("logs", "-n", NS, pod["metadata"]["name"], check=False).stdout
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 0, logs[-4000:]
    print(f"spark-submit -> driver Succeeded: {elapsed:.1f} s")
    assert len(executors) == 2, executors  # spark.executor.instances=2 of the docs' command
    assert "Registered executor" in logs, logs[-4000:]
    reports = claim_folder(real_node, "brokergroup-audit") / "reports"
    (run,) = list(reports.iterdir())
    summary = json.loads((run / "summary.json").read_text())
    assert (run / "report.html").is_file() and summary, summary


def test_the_charts_audit_cronjob_runs_once(real_node: RealNode, audited_group: None, spark_image: float) -> None:
    cp = plane(real_node)
    (cronjob,) = cp.get(f"/apis/batch/v1/namespaces/{NS}/cronjobs")["items"]
    started = time.monotonic()
    cp.kubectl("create", "job", "-n", NS, "audit-once", f"--from=cronjob/{cronjob['metadata']['name']}")
    eventually("the audit Job succeeded", lambda: job_done(cp, "audit-once"), timeout=SPARK_TIMEOUT, interval=2)
    print(f"\nchart's audit CronJob, once: {time.monotonic() - started:.1f} s")
    logs = cp.kubectl("logs", "-n", NS, "job/audit-once", "-c", "audit").stdout
    assert "violations" in logs, logs[-3000:]
