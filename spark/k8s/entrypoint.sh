#!/bin/bash
#
# ENTRYPOINT of the brokergroup-spark image (/opt/brokergroup/entrypoint.sh): the driver and executor
# commands Spark's Kubernetes backend expects, for an image whose SPARK_HOME is the pyspark package.
#
# Adapted from Apache Spark's
# resource-managers/kubernetes/docker/src/main/dockerfiles/spark/entrypoint.sh, which is
# Licensed to the Apache Software Foundation (ASF) under one or more contributor license agreements
# and licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0),
# as this project is. Changes: nothing is written to the file system (the pods' root file system is
# read-only), so there is no /etc/passwd entry for an unknown uid (the image has user 10001) and the
# SPARK_JAVA_OPT_<n> variables are read without /tmp/java_opts.txt; tini is used only when installed;
# no Hadoop classpath and no K8S_SPARK_LOG_PATH tee.
#
#   driver ARGS...   spark-submit in client mode inside the driver pod. Spark starts the pod with
#                    `driver --properties-file /opt/spark/conf/spark.properties --class ... local:///... ARGS`.
#   executor         the executor JVM (KubernetesExecutorBackend), from the SPARK_* variables Spark sets
#                    on executor pods.
#   anything else    run as given, e.g. `brokergroup audit /data/events --out /data/reports/x`.
set -euo pipefail

spark_home() {
  : "${SPARK_HOME:?must be the pyspark package folder (the image sets it)}"
}

case "${1:-}" in
  driver)
    shift
    spark_home
    cmd=(
      "$SPARK_HOME/bin/spark-submit"
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?set by Spark on driver pods (the pod IP)}"
      --deploy-mode client
      "$@"
    )
    ;;
  executor)
    shift
    spark_home
    classpath="${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}$SPARK_HOME/jars/*"
    if [ -n "${SPARK_EXTRA_CLASSPATH:-}" ]; then
      classpath="$classpath:$SPARK_EXTRA_CLASSPATH"
    fi
    if [ -n "${HADOOP_CONF_DIR:-}" ]; then
      classpath="$HADOOP_CONF_DIR:$classpath"
    fi
    classpath="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:$classpath"
    # SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ...: one JVM option each, in numeric order.
    java_opts=()
    for name in $(compgen -v SPARK_JAVA_OPT_ | sort -t_ -k4 -n); do
      java_opts+=("${!name}")
    done
    cmd=(
      "${JAVA_HOME:+$JAVA_HOME/bin/}java"
      "${java_opts[@]}"
      "-Xms$SPARK_EXECUTOR_MEMORY"
      "-Xmx$SPARK_EXECUTOR_MEMORY"
      -cp "$classpath${SPARK_DIST_CLASSPATH:+:$SPARK_DIST_CLASSPATH}"
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
      --driver-url "$SPARK_DRIVER_URL"
      --executor-id "$SPARK_EXECUTOR_ID"
      --cores "$SPARK_EXECUTOR_CORES"
      --app-id "$SPARK_APPLICATION_ID"
      --hostname "$SPARK_EXECUTOR_POD_IP"
      --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID"
      --podName "$SPARK_EXECUTOR_POD_NAME"
    )
    ;;
  "")
    echo "usage: entrypoint.sh driver ARGS... | executor | COMMAND [ARGS...]" >&2
    exit 2
    ;;
  *)
    cmd=("$@")
    ;;
esac

# tini reaps the Python workers' orphans when it is there; otherwise the command is PID 1 itself.
if command -v tini >/dev/null 2>&1; then
  exec tini -s -- "${cmd[@]}"
fi
exec "${cmd[@]}"
