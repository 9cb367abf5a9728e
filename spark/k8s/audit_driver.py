"""The spark-submit primary resource of the audit on Kubernetes: `local:///opt/brokergroup/audit.py` in
the brokergroup-spark image (the Dockerfile copies this file there).

    spark-submit --master k8s://https://<apiserver> --deploy-mode cluster ... \\
        local:///opt/brokergroup/audit.py /data/events --out '/data/reports/{run}' --fail-on-violations

It takes the arguments of `brokergroup audit DIR` and runs the same job (`brokergroup.spark.job.main`)
on the SparkSession spark-submit configured: its master (k8s://…) and executors win over the
`local[*]` of a plain `brokergroup audit` (`brokergroup.spark.session.submitted_master`).

`{run}` in any argument becomes the run's UTC start time (`20261122T031700Z`), so a scheduled audit
writes every run to its own folder with one fixed argument list. Exit codes are the audit's: 0 done,
1 a violation (with --fail-on-violations), 2 bad input or a bad option, 3 the cross-check disagrees.
"""

from __future__ import annotations

import datetime
import sys

from brokergroup.common.settings import SettingsError
from brokergroup.spark import job, session

RUN_PLACEHOLDER = "{run}"


def run_name(now: datetime.datetime) -> str:
    """The folder name of a run started at `now` (an aware datetime): UTC, sortable, no colons."""
    return now.astimezone(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")


def expand(argv: list[str], now: datetime.datetime) -> list[str]:
    """`argv` with every `{run}` replaced by `run_name(now)`."""
    name = run_name(now)
    return [arg.replace(RUN_PLACEHOLDER, name) for arg in argv]


def main(argv: list[str]) -> int:
    args = expand(argv, datetime.datetime.now(datetime.UTC))
    print(f"brokergroup audit (spark-submit, master {session.submitted_master()}): {' '.join(args)}", file=sys.stderr)
    try:
        return job.main(args)
    except SettingsError as exc:
        print(f"brokergroup audit: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
