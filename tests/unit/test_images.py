"""The image names in brokergroup.images agree with pyproject.toml, the Dockerfile and the chart."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

import brokergroup
from brokergroup import images

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
BASE_IMAGE = re.compile(r"python:(3\.\d+)\.\d+-slim-bookworm(?:@sha256:[0-9a-f]{64})?")
"""The one image the Dockerfile starts from: pinned to a patch release and a Debian release (and a digest)."""
IMAGE_REFERENCE = re.compile(r"\b([a-z0-9-]+(?:\.[a-z][a-z0-9-]*)+(?::\d+)?/[a-z0-9._/-]+)(?::([\w.-]+))?")
"""registry.host/repository[:tag], e.g. ghcr.io/x/y:1 or docker.io/library/python:3 (not python3.11/...)."""


def pyproject_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def test_the_version_is_the_projects() -> None:
    assert images.VERSION == pyproject_version() == brokergroup.__version__


def test_image_names_are_the_two_repositories_at_that_version() -> None:
    assert images.runtime_image() == f"ghcr.io/brokergroup/brokergroup:{pyproject_version()}"
    assert images.spark_image() == f"ghcr.io/brokergroup/brokergroup-spark:{pyproject_version()}"


def test_the_charts_versions_are_the_projects() -> None:
    # appVersion is also the chart's default tag of both images.
    chart = yaml.safe_load((ROOT / "charts" / "brokergroup" / "Chart.yaml").read_text())
    assert chart["appVersion"] == pyproject_version() == chart["version"]


def test_the_dockerfile_starts_from_one_pinned_base_image_and_otherwise_from_its_own_stages() -> None:
    froms = re.findall(r"^FROM\s+(\S+)\s+AS\s+(\S+)\s*$", DOCKERFILE, flags=re.MULTILINE | re.IGNORECASE)
    assert len(froms) == len(re.findall(r"^FROM\b", DOCKERFILE, flags=re.MULTILINE)), "every FROM names its stage"
    stages = [name for _parent, name in froms]
    external = {parent for parent, _name in froms if parent not in stages}
    assert len(external) == 1 and BASE_IMAGE.fullmatch(external.pop()), froms
    for source in re.findall(r"--from=(\S+)", DOCKERFILE):
        assert source in stages, f"COPY --from={source}: copies from a stage of this Dockerfile only"


def test_the_dockerfile_names_no_other_image_repository() -> None:
    found = IMAGE_REFERENCE.findall(DOCKERFILE)
    assert found, "the Dockerfile's header shows how to build both images"
    assert {repository for repository, _tag in found} == {images.RUNTIME_REPOSITORY, images.SPARK_REPOSITORY}
    assert {tag for _repository, tag in found if tag} == {images.VERSION}


def test_the_dockerfile_labels_the_version_and_matches_its_python() -> None:
    assert re.search(rf"^ARG VERSION={re.escape(images.VERSION)}$", DOCKERFILE, flags=re.MULTILINE)
    match = BASE_IMAGE.search(DOCKERFILE)
    assert match is not None
    # SPARK_HOME is the pyspark package inside the venv, whose path names the base image's Python.
    homes = re.findall(r"SPARK_HOME=\$\{VENV\}/lib/python(3\.\d+)/site-packages/pyspark", DOCKERFILE)
    assert homes == [match.group(1)]
