"""The container images brokergroup ships, by name (docs/images.md, the root `Dockerfile`).

- the runtime image: one image for the operator, the controllers and the brokers, each started as
  `brokergroup <subcommand>` (the Dockerfile's `runtime` target, without the audit extra);
- the Spark image: Java, pyspark and the audit, for `spark-submit` on Kubernetes (target `spark`).

Both are tagged with the package version: `brokergroup.__version__`, a literal rather than the
installed distribution's metadata, so it is the same in a source tree and in an image. A unit
test keeps it equal to pyproject.toml's version and to the Dockerfile's.
"""

from __future__ import annotations

from typing import Final

from brokergroup import __version__

RUNTIME_REPOSITORY: Final = "ghcr.io/brokergroup/brokergroup"
SPARK_REPOSITORY: Final = "ghcr.io/brokergroup/brokergroup-spark"
VERSION: Final = __version__


def runtime_image() -> str:
    """The operator's, controllers' and brokers' image: ghcr.io/brokergroup/brokergroup:<VERSION>."""
    return f"{RUNTIME_REPOSITORY}:{VERSION}"


def spark_image() -> str:
    """The Spark audit's driver and executor image: ghcr.io/brokergroup/brokergroup-spark:<VERSION>."""
    return f"{SPARK_REPOSITORY}:{VERSION}"
