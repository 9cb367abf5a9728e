"""The audit under a real `spark-submit` (local master): the master spark-submit gives wins over the
`local[*]` a plain `brokergroup audit` asks for, and spark/k8s/audit_driver.py, the primary resource of
the Kubernetes runs, audits a generated log with a planted violation into a `{run}` folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyspark

from brokergroup.spark import generate
from tests.unit.spark.conftest import require_java

ROOT = Path(__file__).resolve().parents[3]
SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"
TIMEOUT = 240

PROBE = """\
import json
from brokergroup.spark import session

spark, created = session.build(master="local[*]", app_name="not-this-name")
conf = spark.conf
print(json.dumps({
    "submitted": session.submitted_master(),
    "master": spark.sparkContext.master,
    "app": spark.sparkContext.appName,
    "timeZone": conf.get("spark.sql.session.timeZone"),
    "shufflePartitions": conf.get("spark.sql.shuffle.partitions"),
    "created": created,
}))
spark.stop()
"""


def spark_submit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    require_java()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.run(
        [str(SPARK_SUBMIT), "--master", "local[1]", "--conf", "spark.ui.enabled=false", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_the_submitted_master_wins(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    result = spark_submit("--name", "from-spark-submit", str(probe), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {
        "submitted": "local[1]",
        "master": "local[1]",
        "app": "from-spark-submit",
        "timeZone": "UTC",
        "shufflePartitions": "8",
        "created": True,
    }


def test_audit_driver_audits_into_a_run_folder(tmp_path: Path) -> None:
    logs = tmp_path / "events"
    config = generate.GenerateConfig(out=logs, sets=2, days=0.2, seed=3, plants=("unclean",))
    generate.generate(config)
    reports = tmp_path / "reports"
    driver = ROOT / "spark" / "k8s" / "audit_driver.py"
    result = spark_submit(str(driver), str(logs), "--out", f"{reports}/{{run}}", "--fail-on-violations", cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-4000:]  # the planted unclean election is a violation
    (run,) = reports.iterdir()
    assert re.fullmatch(r"\d{8}T\d{6}Z", run.name), run.name
    summary = json.loads((run / "summary.json").read_text())
    assert summary["findings"]["byKind"] == {"unclean_election": 1}
    assert summary["crossCheck"]["status"] == "agree"
    assert (run / "report.html").is_file()
    # PythonRunner merges the Python driver's stderr into spark-submit's stdout.
    assert f"brokergroup audit (spark-submit, master local[1]): {logs} --out {run}" in result.stdout
