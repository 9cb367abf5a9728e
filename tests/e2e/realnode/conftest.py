"""Real-node e2e fixtures: the project's images built with buildah (scripts/realnode-images) and one real node
(tests/e2e/realnode/node.py) for this folder's tests, started on first use and stopped after its last test.

Without root, the binaries (scripts/realnode-bins, scripts/k8s-bins) or the tools the tests are skipped
locally and fail under CI=true (tests/needs.py)."""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
from kubernetes.dynamic import DynamicClient

from tests.e2e.realnode import node as realnode
from tests.needs import missing

ROOT = Path(__file__).resolve().parents[3]
SETUP_TIMEOUT = 1200
"""Seconds a test that starts the node may take: the image build (up to ~2.5 min under load) and the node's
start (~20 s, plus ~30 s for a first image import) are part of its setup."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SETUP_TIMEOUT))


def _require() -> None:
    lacking = realnode.missing_requirements()
    if lacking:
        missing(
            "the real-node tier needs " + ", ".join(lacking) + ": `bash scripts/k8s-bins`, `bash scripts/realnode-bins`"
            " and `bash scripts/realnode-images` build them"
        )


def build_images(*, spark: bool = False) -> float:
    """Run scripts/realnode-images (the runtime image is rebuilt from the checkout; its layers are cached);
    the seconds it took."""
    started = time.monotonic()
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "realnode-images"), *(["--spark"] if spark else [])],
        capture_output=True,
        text=True,
        check=False,
        timeout=SETUP_TIMEOUT,
    )
    if result.returncode != 0:
        raise AssertionError(f"scripts/realnode-images failed (exit {result.returncode}):\n{result.stderr[-4000:]}")
    return time.monotonic() - started


@pytest.fixture(scope="package")
def realnode_images() -> float:
    """The images built (pause, base, runtime); the seconds the build took."""
    lacking = realnode.image_requirements()
    if lacking:
        missing(
            "building the real node's images needs " + ", ".join(lacking) + " (scripts/realnode-bins installs them)"
        )
    return build_images()


@pytest.fixture(scope="package")
def real_node(realnode_images: float, tmp_path_factory: pytest.TempPathFactory) -> Iterator[realnode.RealNode]:
    """The running node with its control plane (admin kubeconfig: `real_node.kubeconfig()`)."""
    _require()
    logging.getLogger("tests.e2e.realnode").setLevel(logging.INFO)
    with realnode.RealNode(tmp_path_factory.mktemp("realnode")) as node:
        yield node


@pytest.fixture(scope="package")
def node_api(real_node: realnode.RealNode) -> Iterator[kubernetes.client.ApiClient]:
    with kubernetes.config.new_client_from_config(config_file=str(real_node.kubeconfig())) as api:
        yield api


@pytest.fixture(scope="package")
def node_dyn(node_api: kubernetes.client.ApiClient) -> DynamicClient:
    return DynamicClient(node_api)
