"""The Dockerfile's install steps, replayed without a container engine (docs/images.md).

The `runtime` and `spark` targets are replayed stage by stage in a temporary folder
(`image_replay`: APP, VENV, SRC and HOME remapped, pip's cache allowed, apt-get and user creation
checked instead of run), then the installed `brokergroup` of each venv is run.

What it proves: the build stages' commands work, against PyPI, from exactly the files the build
context sends; the runtime venv has every process's subcommand and no audit extra; the Spark venv
runs a real audit with the SPARK_HOME, JAVA_HOME and PYSPARK_PYTHON the image sets. What it does
not: the base image, the apt layer in the image, file ownership and modes in the layers, the
entrypoints as PID 1 in a container.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.image_replay import Replay, Stage, copy_args, exec_form, expand, need, read_stages

pytestmark = pytest.mark.integration

RUN_AS = "10001:10001"
RUNTIME_VENV_BUDGET_MB = 160
"""The runtime venv's size, measured (see docs/images.md) plus about 25%."""
SPARK_VENV_BUDGET_MB = 1010
INSTALL_TIMEOUT_S = 1800  # a cold pip cache downloads and builds pyspark (about 450 MB)


# -- helpers for the checks ----------------------------------------------------------------------------


def target_dirs(tmp: Path) -> dict[str, str | None]:
    """The remapped variables, as a test's --build-args; pip's cache is allowed so reruns are quick."""
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True)
    return {
        "APP": str(tmp / "app"),
        "VENV": str(tmp / "app" / "venv"),
        "SRC": str(tmp / "src"),
        "HOME": str(tmp / "home"),
        "TARGETARCH": arch.stdout.strip(),
        "PIP_NO_CACHE_DIR": None,
    }


def replayed(target: str, stages: dict[str, Stage], tmp: Path) -> dict[str, str]:
    """The environment `target` ends with, after replaying it and its parents under `tmp`."""
    need("bash")
    need("dpkg-query")
    replay = Replay(stages, tmp, target_dirs(tmp))
    started = time.monotonic()
    env, _workdir = replay.stage(target)
    print(f"\n{target}: replayed in {time.monotonic() - started:.1f} s")
    print("\n".join(f"  {line}" for line in replay.log))
    Path(env["HOME"]).mkdir(parents=True, exist_ok=True)
    return env


def size_mb(folder: Path) -> float:
    total = sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    return total / 1e6


def brokergroup(env: dict[str, str], *args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("brokergroup", path=env["PATH"])
    assert exe is not None and Path(exe).is_relative_to(env["VENV"]), f"brokergroup on the image's PATH: {exe}"
    return subprocess.run([exe, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


IMPORTABLE = """
import importlib, json, sys
found = {}
for module in sys.argv[1:]:
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        found[module] = False
    else:
        found[module] = True
print(json.dumps(found))
"""


def importable(env: dict[str, str], *modules: str, cwd: Path) -> dict[str, bool]:
    """Which of `modules` the venv's Python imports, in one interpreter; a module that is there but fails
    to import (a missing dependency of it included) fails the test."""
    python = Path(env["VENV"]) / "bin" / "python"
    done = subprocess.run(
        [python, "-c", IMPORTABLE, *modules], env=env, cwd=cwd, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, bool] = json.loads(done.stdout)
    return found


@pytest.fixture(scope="module")
def stages() -> dict[str, Stage]:
    return read_stages()


# -- the Dockerfile itself ------------------------------------------------------------------------------


def test_runtime_stage_is_non_root_runs_brokergroup_and_takes_only_the_venv(stages: dict[str, Stage]) -> None:
    runtime = stages["runtime"]
    assert runtime.parent == "base"
    assert [i.value for i in runtime.all("USER")] == [RUN_AS]
    assert [exec_form(i.value) for i in runtime.all("ENTRYPOINT")] == [["brokergroup"]]
    assert [copy_args(i) for i in runtime.all("COPY")] == [({"from": "build"}, ["${VENV}"], "${VENV}")]
    assert runtime.all("RUN") == [], "no package manager, compiler or build step in the runtime stage"
    assert [i.value for i in stages["base"].all("USER")] == [], "the build stages run as root"


def test_spark_stage_is_non_root_and_its_entrypoint_is_the_one_it_copies(stages: dict[str, Stage]) -> None:
    spark = stages["spark"]
    assert spark.parent == "base"
    assert [i.value for i in spark.all("USER")] == [RUN_AS]
    (entrypoint,) = [exec_form(i.value) for i in spark.all("ENTRYPOINT")]
    defaults = {"APP": "/opt/brokergroup"}
    copies = [(i, *copy_args(i)) for i in spark.all("COPY")]
    copied = {expand(dest, defaults, i): sources for i, flags, sources, dest in copies if "from" not in flags}
    assert copied.get(entrypoint[0]) == ["spark/k8s/entrypoint.sh"], copied
    assert ["spark/k8s/audit_driver.py"] in copied.values()
    assert [flags for _i, flags, _sources, _dest in copies if "from" in flags] == [{"from": "build-spark"}]


# -- the replays ---------------------------------------------------------------------------------------


@pytest.mark.timeout(INSTALL_TIMEOUT_S)
def test_runtime_venv_has_every_process_and_no_audit_extra(stages: dict[str, Stage], tmp_path: Path) -> None:
    env = replayed("runtime", stages, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    for args in (["--help"], ["operator", "--help"], ["controller", "--help"], ["broker", "--help"]):
        done = brokergroup(env, *args, cwd=work)
        assert done.returncode == 0, f"brokergroup {' '.join(args)}: {done.stderr}"
    wanted = {"pyspark": False, "matplotlib": False}
    wanted |= dict.fromkeys(("brokergroup.cli", "brokergroup.operator.kube", "brokergroup.operator.handlers"), True)
    assert importable(env, *wanted, cwd=work) == wanted

    # The audit extra is missing: one line naming it, exit 2, no traceback. Generating logs needs no Spark.
    logs = work / "logs"
    done = brokergroup(env, "audit", "generate", "--out", str(logs), "--sets", "1", "--days", "0.1", cwd=work)
    assert done.returncode == 0, done.stderr
    for args in (["audit", str(logs / "controllers")], ["bench", "audit", "--sizes", "1000"]):
        done = brokergroup(env, *args, cwd=work)
        assert done.returncode == 2, f"brokergroup {' '.join(args)}: exit {done.returncode}: {done.stderr}"
        assert "Traceback" not in done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert "pyspark" in line and "pip install 'brokergroup[audit]'" in line, line

    size = size_mb(Path(env["VENV"]))
    print(f"runtime venv: {size:.1f} MB (budget {RUNTIME_VENV_BUDGET_MB} MB)")
    assert size < RUNTIME_VENV_BUDGET_MB, f"the runtime venv grew to {size:.1f} MB"


@pytest.mark.timeout(INSTALL_TIMEOUT_S)
def test_spark_venv_runs_a_real_audit_with_the_images_spark_and_java_homes(
    stages: dict[str, Stage], tmp_path: Path
) -> None:
    env = replayed("spark", stages, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    assert importable(env, "pyspark", "matplotlib", cwd=work) == {"pyspark": True, "matplotlib": True}
    spark_home, java_home = Path(env["SPARK_HOME"]), Path(env["JAVA_HOME"])
    assert (spark_home / "bin" / "spark-submit").is_file()
    kubernetes_jars = sorted(p.name for p in (spark_home / "jars").glob("spark-kubernetes_*.jar"))
    print(f"SPARK_HOME {spark_home}: spark-kubernetes jars: {kubernetes_jars or 'none'}")
    assert kubernetes_jars, "pyspark's jars/ has no spark-kubernetes_*.jar: spark-submit cannot reach k8s://"
    assert (java_home / "bin" / "java").is_file(), f"JAVA_HOME {java_home} (the image's) has no bin/java"
    assert Path(env["PYSPARK_PYTHON"]).is_file()
    for copied in ("entrypoint.sh", "audit.py"):
        assert (Path(env["APP"]) / copied).is_file()
    assert os.access(Path(env["APP"]) / "entrypoint.sh", os.X_OK)

    logs, out = work / "logs", work / "audit"
    done = brokergroup(env, "audit", "generate", "--out", str(logs), "--sets", "1", "--days", "0.1", cwd=work)
    assert done.returncode == 0, done.stderr
    started = time.monotonic()
    args = ["audit", str(logs / "controllers"), "--out", str(out), "--master", "local[1]", "--driver-memory", "512m"]
    done = brokergroup(env, *args, cwd=work, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["input"]["events"] > 0
    print(f"audit in the spark venv: {time.monotonic() - started:.1f} s, {summary['input']['events']} events")

    size = size_mb(Path(env["VENV"]))
    print(f"spark venv: {size:.1f} MB (budget {SPARK_VENV_BUDGET_MB} MB)")
    assert size < SPARK_VENV_BUDGET_MB, f"the spark venv grew to {size:.1f} MB"
