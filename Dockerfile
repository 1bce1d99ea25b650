# The webhook service (`sluice serve`) with Spark's Java runtime.
# Same install steps as CI (Makefile, scripts/ensure-java.sh): openjdk-17-jre-headless from
# apt, and the packages of requirements/runtime.lock. Not Alpine: PySpark and its wheels need glibc.
# bookworm: the Debian release that still ships openjdk-17 (trixie has 21 and later only).
#
# Build with BuildKit (the default builder of Docker Engine 23 and later; DOCKER_BUILDKIT=1 on 20.10):
#   docker build -t sluice .
# Behind a proxy that re-signs TLS, hand pip the proxy's CA bundle for the build only (it is
# mounted while the dependencies install and is not written to any layer):
#   docker build --secret id=pip_cert,src=/etc/ssl/certs/ca-certificates.crt \
#     --build-arg PIP_CERT=/run/secrets/pip_cert -t sluice .
# scripts/docker-verify.sh builds and runs it end to end on a machine without registry access.

# The official image, pinned by the digest of its multi-platform index (python:3.11.14 on
# Debian 12): a rebuild gets the same base until this line changes. Another base with
# Python >= 3.11.4 in /usr/local can stand in: --build-arg BASE_IMAGE=...
ARG BASE_IMAGE=python:3.11-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# tini runs as PID 1: it forwards `docker stop`'s SIGTERM to sluice and reaps the exited
# children (spark-submit and its JVMs) that would otherwise stay zombies.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        openjdk-17-jre-headless procps tini bubblewrap \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/sluice
# Dependencies first, from the hashed lock, in a layer of their own: a change to Sluice's
# source rebuilds only the last layers below, not pyspark. PIP_CERT is unset unless given.
ARG PIP_CERT
COPY requirements/runtime.lock ./requirements/
RUN --mount=type=secret,id=pip_cert \
    pip install --no-cache-dir --require-hashes -r requirements/runtime.lock
# Sluice itself: no dependencies, and the build backend the lock installed (no download).
COPY pyproject.toml README.md LICENSE ./
COPY sluice ./sluice
RUN pip install --no-cache-dir --no-deps --no-build-isolation . \
    && rm -rf /opt/sluice/build

RUN useradd --create-home --uid 10001 --user-group sluice \
    && mkdir -p /var/lib/sluice \
    && chown sluice:sluice /var/lib/sluice
USER sluice
WORKDIR /home/sluice

# Job checkouts, Spark's embedded metastore and warehouse, and the SQLite state when
# SLUICE_DATABASE_URL is not set (use PostgreSQL in production). Needs SLUICE_WEBHOOK_SECRET
# and SLUICE_GITHUB_TOKEN (or SLUICE_GITHUB_APP_ID + SLUICE_GITHUB_PRIVATE_KEY) at run time.
ENV SLUICE_WORKDIR=/var/lib/sluice \
    SPARK_LOCAL_IP=127.0.0.1
VOLUME ["/var/lib/sluice"]

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]

# The sandbox (bubblewrap, docs/security.md 'The sandbox') needs user namespaces: run with
#   docker run --security-opt seccomp=unconfined --security-opt apparmor=unconfined ...
# (or a seccomp profile that allows clone/unshare of namespaces). Without them the service
# says so at start-up and refuses a pull request's Python (SLUICE_SANDBOX).
ENTRYPOINT ["tini", "--"]
CMD ["sluice", "serve", "--host", "0.0.0.0", "--port", "8000"]
