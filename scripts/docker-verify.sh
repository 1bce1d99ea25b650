#!/usr/bin/env bash
# Manual check of the Dockerfile with a real `docker build` and `docker run`, for a Debian 12
# machine (run as root) that can reach Debian's mirror and the Python package index but no
# image registry. Not part of CI (.ci/run does not call it). Safe to run again: every step
# reuses or replaces what an earlier run left.
#
#   1. installs Debian's docker.io (and debootstrap) and starts dockerd unless one answers;
#   2. builds a stand-in for python:3.11-slim-bookworm, since the official image cannot be
#      pulled: a minimal bookworm (debootstrap) with a CPython >= 3.11.4 copied into
#      /usr/local, imported as $BASE_TAG (kept between runs; REBUILD_BASE=1 makes it again);
#   3. builds the image from a copy of the work tree with --build-arg BASE_IMAGE=$BASE_TAG,
#      without cache, then again after a one-line change under sluice/ (in the copy, never in
#      the work tree), and prints both wall times, the image size and its layers;
#   4. runs it: /healthz, PID 1 is tini, an orphan is reaped, `java -version`, a Spark job,
#      and how long `docker stop` takes.
#
# Settings (environment):
#   WORK          scratch directory (default /var/tmp/sluice-docker-verify)
#   PYTHON_PREFIX an installed CPython >= 3.11.4 to copy (default: the newest 3.11 of pyenv)
#   MIRROR        Debian mirror for debootstrap (default http://deb.debian.org/debian)
#   CA_BUNDLE     CA bundle handed to pip as a build secret, for a TLS-re-signing proxy
#                 (default /etc/ssl/certs/ca-certificates.crt; CA_BUNDLE= to hand none)
#   HOST_PORT     host port for the service (default 8000)
set -euo pipefail
trap 'echo "docker-verify: stopped by a failed command at line $LINENO" >&2' ERR

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${WORK:-/var/tmp/sluice-docker-verify}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
CA_BUNDLE="${CA_BUNDLE-/etc/ssl/certs/ca-certificates.crt}"
HOST_PORT="${HOST_PORT:-8000}"
BASE_TAG="sluice-local/python:3.11-slim-bookworm"
IMAGE="sluice:verify"
NAME="sluice-verify"
mkdir -p "$WORK"

say() { printf '\n== %s\n' "$*"; }
# Remove an image this script made earlier once no tag points to it (by id, nothing else).
drop_image() {
    [[ -n "$1" ]] || return 0
    if [[ "$("${DOCKER[@]}" image inspect -f '{{len .RepoTags}}' "$1" 2>/dev/null)" == 0 ]]; then
        "${DOCKER[@]}" rmi "$1" >/dev/null 2>&1 || true
    fi
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
[[ "$(id -u)" -eq 0 ]] || { echo "run as root (apt-get, debootstrap, dockerd)" >&2; exit 1; }

# --- 1. Docker engine ----------------------------------------------------------------------
say "1. Docker engine"
export DEBIAN_FRONTEND=noninteractive
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v strip >/dev/null || missing+=(binutils)
if ((${#missing[@]})); then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# `docker build` must use BuildKit (the Dockerfile mounts a build secret). A client of
# Docker 23 or later does so only through the buildx plugin; Debian 12 packages no buildx,
# but its own 20.10 client (/usr/bin/docker) drives the daemon's built-in BuildKit.
if docker buildx version >/dev/null 2>&1; then
    DOCKER=(docker)
else
    DOCKER=(env DOCKER_BUILDKIT=1 /usr/bin/docker)
fi

# Start dockerd unless one answers: first with its defaults (overlay2, bridge network,
# iptables); if it does not come up, again without overlay, iptables and the bridge, and
# then builds and containers use the host's network. (Where this script was written the
# defaults worked, so that fallback has not been exercised.)
NET=()
start_dockerd() {
    echo "starting: dockerd $*"
    nohup dockerd "$@" >"$WORK/dockerd.log" 2>&1 &
    echo $! >"$WORK/dockerd.pid"
    for _ in $(seq 1 30); do
        "${DOCKER[@]}" info >/dev/null 2>&1 && return 0
        kill -0 "$(cat "$WORK/dockerd.pid")" 2>/dev/null || return 1
        sleep 1
    done
    return 1
}
if "${DOCKER[@]}" info >/dev/null 2>&1; then
    echo "a dockerd already answers"
elif ! start_dockerd; then
    echo "dockerd with its defaults failed (see $WORK/dockerd.log); trying vfs, no iptables, no bridge"
    kill "$(cat "$WORK/dockerd.pid")" 2>/dev/null || true
    sleep 2
    start_dockerd --storage-driver=vfs --iptables=false --bridge=none \
        || { echo "dockerd does not start: $WORK/dockerd.log" >&2; exit 1; }
fi
if [[ "$("${DOCKER[@]}" info --format '{{.Driver}}')" == vfs ]]; then
    NET=(--network host)
fi
"${DOCKER[@]}" version --format 'client {{.Client.Version}}, server {{.Server.Version}}'
"${DOCKER[@]}" info --format 'storage driver {{.Driver}}, cgroup {{.CgroupDriver}} v{{.CgroupVersion}}'

# --- 2. The stand-in base image --------------------------------------------------------------
say "2. Stand-in base image $BASE_TAG"
if [[ -z "${PYTHON_PREFIX:-}" ]]; then
    PYTHON_PREFIX="$(ls -d /root/.pyenv/versions/3.11.* 2>/dev/null | sort -V | tail -n 1 || true)"
fi
if [[ "${REBUILD_BASE:-0}" != 1 ]] && "${DOCKER[@]}" image inspect "$BASE_TAG" >/dev/null 2>&1; then
    echo "kept from an earlier run (REBUILD_BASE=1 to make it again)"
else
    PY="$PYTHON_PREFIX/bin/python3.11"
    [[ -x "$PY" ]] || { echo "no CPython 3.11 at PYTHON_PREFIX=$PYTHON_PREFIX" >&2; exit 1; }
    "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11, 4))' \
        || { echo "$PY is older than 3.11.4 (Sluice's floor)" >&2; exit 1; }
    PY_VERSION="$("$PY" -c 'import platform; print(platform.python_version())')"
    old_base=$("${DOCKER[@]}" image inspect -f '{{.Id}}' "$BASE_TAG" 2>/dev/null || true)
    R="$WORK/rootfs"
    rm -rf "$R"
    debootstrap --variant=minbase bookworm "$R" "$MIRROR" >"$WORK/debootstrap.log" 2>&1
    # The same suites as the official Debian images, security updates applied.
    rm -f "$R/etc/apt/sources.list"
    cat >"$R/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${MIRROR%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    cp /etc/resolv.conf "$R/etc/resolv.conf"
    # What the official slim image holds besides Python (ca-certificates, netbase, tzdata)
    # and the shared libraries CPython's own modules link to (ssl, ctypes, sqlite3, lzma...).
    {
        chroot "$R" apt-get update
        chroot "$R" apt-get -y upgrade
        chroot "$R" apt-get install -y --no-install-recommends \
            ca-certificates netbase tzdata libssl3 libffi8 libsqlite3-0 zlib1g libbz2-1.0 \
            liblzma5 libreadline8 libncursesw6 libexpat1 libuuid1 libcrypt1 libnsl2 libtirpc3
    } >"$WORK/chroot-apt.log" 2>&1
    # CPython into /usr/local: the interpreter, libpython and the standard library, without
    # the installation's site-packages (only pip, from ensurepip, goes in), tests, IDLE, Tk.
    install -D -m 755 "$PY" "$R/usr/local/bin/python3.11"
    cp -a "$PYTHON_PREFIX"/lib/libpython3*.so* "$R/usr/local/lib/"
    mkdir -p "$R/usr/local/include"
    cp -a "$PYTHON_PREFIX/include/python3.11" "$R/usr/local/include/"
    tar -C "$PYTHON_PREFIX/lib" -c \
        --exclude='python3.11/site-packages/*' --exclude='python3.11/test' \
        --exclude='python3.11/idlelib' --exclude='python3.11/tkinter' \
        --exclude='python3.11/turtledemo' --exclude='*/lib-dynload/_tkinter*' \
        --exclude='*/config-3.11-*/libpython3.11.a' --exclude='__pycache__' \
        python3.11 | tar -C "$R/usr/local/lib" -x
    strip --strip-unneeded "$R/usr/local/bin/python3.11" "$R"/usr/local/lib/libpython3.11.so.1.0 \
        "$R"/usr/local/lib/python3.11/lib-dynload/*.so
    chroot "$R" ldconfig
    ln -sf python3.11 "$R/usr/local/bin/python3"
    ln -sf python3 "$R/usr/local/bin/python"
    # env -i: none of this machine's pip settings (indexes, constraints) go into the image.
    chroot "$R" env -i PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
        python3 -m ensurepip --default-pip >/dev/null 2>&1
    chroot "$R" env -i PATH=/usr/local/bin:/usr/bin:/bin python3 -c \
        'import ssl, sqlite3, ctypes, lzma, bz2, zlib, uuid, readline, pip'
    chroot "$R" apt-get clean
    rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/*.bin "$R"/var/log/apt/* \
        "$R/var/log/dpkg.log" "$R/var/log/bootstrap.log" "$R/root/.cache"
    find "$R/usr/local" -depth \( -type d -name test -o -type d -name tests \
        -o -type f -name '*.pyc' \) -exec rm -rf '{}' +
    : >"$R/etc/resolv.conf"  # Docker mounts its own at run time
    tar --numeric-owner -C "$R" -c . | "${DOCKER[@]}" import \
        -c 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
        -c 'ENV LANG=C.UTF-8' -c "ENV PYTHON_VERSION=$PY_VERSION" -c 'CMD ["python3"]' \
        -m "stand-in for python:3.11-slim-bookworm: debootstrap minbase + CPython $PY_VERSION" \
        - "$BASE_TAG" >/dev/null
    drop_image "$old_base"
fi
"${DOCKER[@]}" run --rm "$BASE_TAG" python --version
"${DOCKER[@]}" image ls "$BASE_TAG" --format 'base size {{.Size}}'

# --- 3. Build, then rebuild after a one-line change ----------------------------------------
say "3. Build $IMAGE"
# A copy of the work tree (tracked and untracked files, not the ignored ones) as the build
# context, so the one-line change below never touches the work tree.
CTX="$WORK/context"
rm -rf "$CTX"
mkdir -p "$CTX"
git -C "$ROOT" ls-files -z --cached --others --exclude-standard \
    | (cd "$ROOT" && xargs -0 cp --parents -t "$CTX" 2>/dev/null || true)
BUILD=("${DOCKER[@]}" build --progress=plain "${NET[@]}" --build-arg "BASE_IMAGE=$BASE_TAG" -t "$IMAGE")
if [[ -n "$CA_BUNDLE" ]]; then
    BUILD+=(--secret "id=pip_cert,src=$CA_BUNDLE" --build-arg PIP_CERT=/run/secrets/pip_cert)
fi
before=$("${DOCKER[@]}" image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
t0=$(now)
"${BUILD[@]}" --no-cache "$CTX" >"$WORK/build-first.log" 2>&1 \
    || { tail -n 30 "$WORK/build-first.log"; exit 1; }
t1=$(now)
first=$(elapsed "$t0" "$t1")
echo "first build, no cache: ${first}s (log: $WORK/build-first.log)"
drop_image "$before"
before=$("${DOCKER[@]}" image inspect -f '{{.Id}}' "$IMAGE")

# A line no earlier run added, or the build cache would hold the result already.
echo "# one-line change to measure a rebuild: $(date +%s%N)" >>"$CTX/sluice/__init__.py"
t0=$(now)
"${BUILD[@]}" "$CTX" >"$WORK/build-rebuild.log" 2>&1 \
    || { tail -n 30 "$WORK/build-rebuild.log"; exit 1; }
t1=$(now)
rebuild=$(elapsed "$t0" "$t1")
echo "rebuild after a one-line change in sluice/: ${rebuild}s (log: $WORK/build-rebuild.log)"
drop_image "$before"
echo "steps taken from the cache in the rebuild: $(grep -cE '^#[0-9]+ CACHED' "$WORK/build-rebuild.log")"

size=$("${DOCKER[@]}" image ls "$IMAGE" --format '{{.Size}}')
echo "image size: $size"
"${DOCKER[@]}" history "$IMAGE" --format '{{.Size}}\t{{.CreatedBy}}' | cut -c 1-110

# --- 4. Run it ---------------------------------------------------------------------------
say "4. Run $IMAGE"
"${DOCKER[@]}" rm -f "$NAME" >/dev/null 2>&1 || true
if ((${#NET[@]})); then
    PORTS=("${NET[@]}")
    HOST_PORT=8000
else
    PORTS=(-p "127.0.0.1:$HOST_PORT:8000")
fi
"${DOCKER[@]}" run -d --name "$NAME" "${PORTS[@]}" \
    -e SLUICE_WEBHOOK_SECRET=verify -e SLUICE_GITHUB_TOKEN=verify "$IMAGE" >/dev/null
healthy=""
t0=$(now)
for _ in $(seq 1 60); do
    if body=$(curl -fsS "http://127.0.0.1:$HOST_PORT/healthz" 2>/dev/null); then
        healthy="$body"
        break
    fi
    sleep 1
done
t1=$(now)
if [[ -z "$healthy" ]]; then
    "${DOCKER[@]}" logs "$NAME" | tail -n 30
    echo "/healthz did not answer" >&2
    exit 1
fi
echo "/healthz after $(elapsed "$t0" "$t1")s: $healthy"
echo "processes (PID 1 should be tini):"
"${DOCKER[@]}" exec "$NAME" ps -o pid,ppid,user,comm
pid1=$("${DOCKER[@]}" exec "$NAME" ps -o comm= -p 1 | tr -d ' ')
[[ "$pid1" == tini ]] || { echo "PID 1 is $pid1, not tini" >&2; exit 1; }
"${DOCKER[@]}" exec "$NAME" java -version 2>&1 | sed -n 1p  # sed reads all: no SIGPIPE

# An orphaned grandchild is reaped by tini; with python itself as PID 1 it stays a zombie.
ORPHAN='import subprocess, time
subprocess.run(["sh", "-c", "sleep 1 & exit 0"])
time.sleep(3)
states = subprocess.run(["ps", "-o", "stat=,comm="], capture_output=True, text=True).stdout
print("zombies:", sum(line.split()[0].startswith("Z") for line in states.splitlines()))'
echo "orphan test, image entrypoint (tini):  $("${DOCKER[@]}" run --rm "$IMAGE" python -c "$ORPHAN")"
echo "orphan test, python as PID 1 (no tini): $("${DOCKER[@]}" run --rm --entrypoint python "$IMAGE" -c "$ORPHAN")"

echo "a local Spark job inside:"
"${DOCKER[@]}" exec "$NAME" python -c '
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").getOrCreate()
print("  spark", spark.version, "counted", spark.range(5).count(), "rows")
spark.stop()' 2>/dev/null

t0=$(now)
"${DOCKER[@]}" stop "$NAME" >/dev/null
t1=$(now)
stop=$(elapsed "$t0" "$t1")
echo "docker stop: ${stop}s, exit code $("${DOCKER[@]}" inspect -f '{{.State.ExitCode}}' "$NAME")"
"${DOCKER[@]}" logs "$NAME" 2>&1 | tail -n 2
"${DOCKER[@]}" rm "$NAME" >/dev/null

say "Figures"
echo "first build (no cache):              ${first}s"
echo "rebuild after one-line sluice change: ${rebuild}s"
echo "image size:                          $size"
echo "docker stop:                         ${stop}s"
if [[ -f "$WORK/dockerd.pid" ]] && kill -0 "$(cat "$WORK/dockerd.pid")" 2>/dev/null; then
    echo "dockerd started by this script still runs: kill $(cat "$WORK/dockerd.pid")"
fi
