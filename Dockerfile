# The webhook service (`sluice serve`) with Spark's Java runtime.
# Same install steps as CI (Makefile, scripts/ensure-java.sh): openjdk-17-jre-headless from
# apt, and the packages of requirements/runtime.lock. Not Alpine: PySpark and its wheels need glibc.
# bookworm: the Debian release that still ships openjdk-17 (trixie has 21 and later only).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DEBIAN_FRONTEND=noninteractive

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/sluice
# Dependencies first, from the hashed lock, in a layer of their own: a change to Sluice's
# source rebuilds only the last layer below, not pyspark.
COPY requirements/runtime.lock ./requirements/
RUN pip install --no-cache-dir --require-hashes -r requirements/runtime.lock
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

CMD ["sluice", "serve", "--host", "0.0.0.0", "--port", "8000"]
