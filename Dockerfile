# syntax=docker/dockerfile:1
#
# brokergroup's two images (docs/images.md):
#
#   docker build --target runtime -t ghcr.io/brokergroup/brokergroup:0.1.0 .        operator, controller, broker
#   docker build --target spark -t ghcr.io/brokergroup/brokergroup-spark:0.1.0 .    Java + pyspark + the audit
#
# Every RUN is a plain shell command and every path goes through ENV (APP, VENV, SRC), so that
# tests/integration/test_image_install.py can replay the `build` and `spark` stages in a temporary
# folder without an engine. Keep it that way: no RUN --mount, no heredocs, no paths spelt out twice.

FROM python:3.11.14-slim-bookworm AS base
ARG VERSION=0.1.0
LABEL org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="brokergroup"
ENV APP=/opt/brokergroup \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONFAULTHANDLER=1
ENV VENV=${APP}/venv
# The one unprivileged user of both images (the operator's pods run as 10001:10001 too): no home,
# no login shell. Files under ${APP} stay root's, so the process cannot change its own code.
RUN groupadd --system --gid 10001 brokergroup \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin brokergroup


# -- build: a virtualenv with brokergroup and its runtime dependencies (no audit extra) --------------
FROM base AS build
ENV SRC=/src \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR ${SRC}
# `python3 -m` puts the working folder first on sys.path, and ${SRC} holds our `operator/` package:
# without this the standard library's `operator` resolves to ours and `-m venv` fails
# (ImportError: cannot import name 'eq' from 'operator'). Python >= 3.11 leaves the folder out.
ENV PYTHONSAFEPATH=1
COPY pyproject.toml README.md ${SRC}/
# brokergroup/{controller,broker,operator,spark} are symlinks to the folders beside it (pyproject.toml).
COPY brokergroup/ ${SRC}/brokergroup/
COPY controller/ ${SRC}/controller/
COPY broker/ ${SRC}/broker/
COPY operator/ ${SRC}/operator/
COPY spark/ ${SRC}/spark/
# No pip inside the venv: the base image's pip installs into it (pip --python), non-editable.
RUN python3 -m venv --without-pip "${VENV}" \
 && python3 -m pip --python "${VENV}/bin/python" install "${SRC}"
# kubernetes also ships a second, asyncio client (kubernetes/aio: a third of the venv with its
# bytecode) that nothing here imports: the operator uses the synchronous dynamic client.
RUN rm -rf "${VENV}"/lib/python3.*/site-packages/kubernetes/aio


# -- build-spark: the same venv plus the audit extra (pyspark, matplotlib) ---------------------------
FROM build AS build-spark
RUN python3 -m pip --python "${VENV}/bin/python" install "${SRC}[audit]"


# -- runtime: ghcr.io/brokergroup/brokergroup -------------------------------------------------------
FROM base AS runtime
LABEL org.opencontainers.image.title="brokergroup" \
      org.opencontainers.image.description="RocketMQ-style broker replica sets: operator, Raft controller and broker"
COPY --from=build ${VENV} ${VENV}
# HOME is the pod's writable /tmp (an emptyDir): the root file system is read-only there.
ENV PATH=${VENV}/bin:${PATH} \
    HOME=/tmp
USER 10001:10001
ENTRYPOINT ["brokergroup"]
CMD ["--help"]


# -- spark: ghcr.io/brokergroup/brokergroup-spark: driver and executors of the audit on Kubernetes ---
FROM base AS spark
# Set by BuildKit: amd64 or arm64, which is also how Debian names the JVM's folder.
ARG TARGETARCH
LABEL org.opencontainers.image.title="brokergroup-spark" \
      org.opencontainers.image.description="The brokergroup event-log audit on Spark: Java 17, pyspark, brokergroup[audit]"
# man1 must exist for the JRE's update-alternatives on slim images (the slim base drops /usr/share/man).
# tini: entrypoint.sh runs the JVM under it, so Python workers' orphans are reaped.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openjdk-17-jre-headless tini \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build-spark ${VENV} ${VENV}
COPY --chmod=0755 spark/k8s/entrypoint.sh ${APP}/entrypoint.sh
COPY spark/k8s/audit_driver.py ${APP}/audit.py
# SPARK_HOME is the pyspark package: its bin/spark-submit and jars/ (spark-kubernetes included).
ENV PATH=${VENV}/bin:${PATH} \
    HOME=/tmp \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-${TARGETARCH} \
    SPARK_HOME=${VENV}/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=${VENV}/bin/python \
    PYSPARK_DRIVER_PYTHON=${VENV}/bin/python
USER 10001:10001
ENTRYPOINT ["/opt/brokergroup/entrypoint.sh"]
