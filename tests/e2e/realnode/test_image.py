"""The project's Dockerfile built by a real engine (buildah, runc) on a Debian bookworm base, and the runtime
image run: before `ENV PYTHONSAFEPATH=1`, the build stage's `python3 -m venv` in WORKDIR /src imported our
`operator/` package as the standard library's `operator` and the build failed."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.e2e.realnode import config
from tests.e2e.realnode.node import REALNODE_CACHE


def buildah(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_STORAGE_CONF": str(REALNODE_CACHE / "storage.conf")}
    result = subprocess.run(["buildah", *args], capture_output=True, text=True, env=env, check=False, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"buildah {' '.join(args)}: exit {result.returncode}: {result.stderr[-3000:]}")
    return result


@pytest.fixture
def runtime_container(realnode_images: float) -> Iterator[str]:
    container = buildah("from", "--pull=never", config.RUNTIME_IMAGE).stdout.strip()
    try:
        yield container
    finally:
        buildah("rm", container, check=False)


def test_the_runtime_image_builds_with_buildah_and_runs_as_10001(
    realnode_images: float, runtime_container: str
) -> None:
    print(f"scripts/realnode-images: {realnode_images:.1f} s")
    image = buildah(
        "inspect",
        "--type",
        "image",
        "--format",
        "{{.OCIv1.Config.User}} {{.OCIv1.Config.Entrypoint}}",
        config.RUNTIME_IMAGE,
    ).stdout.split(maxsplit=1)
    assert image == ["10001:10001", "[brokergroup]"]

    def run(*argv: str) -> str:
        # No network: buildah's default one is a CNI bridge with firewall chains and a masquerade rule.
        return buildah("run", "--runtime", "runc", "--network", "none", runtime_container, "--", *argv).stdout

    probe = (
        "import os, operator, brokergroup, brokergroup.operator as ours; "
        "print(os.getuid(), operator.eq(1, 1), brokergroup.__file__, ours.__name__)"
    )
    uid, eq, where, ours = run("python", "-c", probe).split()
    assert (uid, eq, ours) == ("10001", "True", "brokergroup.operator")
    assert where.startswith("/opt/brokergroup/venv/lib/python3.11/site-packages/brokergroup/")
    assert "operator" in run("brokergroup", "--help")
