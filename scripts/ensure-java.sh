#!/usr/bin/env bash
# Make sure a Java runtime (17) is installed: Spark runs on it. Idempotent: does nothing
# when `java` is already on PATH. Installs with apt-get only when running as root.
set -euo pipefail

if command -v java >/dev/null 2>&1; then
    exit 0
fi
if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-java: no java on PATH; install a Java 17 runtime (e.g. openjdk-17-jre-headless)" >&2
    exit 1
fi
echo "ensure-java: installing openjdk-17-jre-headless with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless procps >/dev/null
command -v java >/dev/null 2>&1
