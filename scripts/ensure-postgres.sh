#!/usr/bin/env bash
# Make sure PostgreSQL server binaries (initdb, pg_ctl) are installed, for the state tests,
# and PostgreSQL's JDBC driver (/usr/share/java/postgresql.jar), for the shared Hive
# metastore test (tests/core/spark/test_shared_catalog.py).
#
# The tests start their own throwaway server from these binaries (see tests/conftest.py);
# this script never starts a server. Safe to run repeatedly: when the binaries are already
# there it does nothing. It installs only when running as root with apt-get available;
# otherwise it only notes what is missing (the tests then skip, or fail under CI=true).
set -euo pipefail

have_server_binaries() {
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        return 0
    fi
    local bindir
    for bindir in /usr/lib/postgresql/*/bin; do
        if [[ -x "$bindir/initdb" && -x "$bindir/pg_ctl" ]]; then
            return 0
        fi
    done
    return 1
}

JDBC_JAR=/usr/share/java/postgresql.jar
packages=()
have_server_binaries || packages+=(postgresql)
[[ -f "$JDBC_JAR" ]] || packages+=(libpostgresql-jdbc-java)
if [[ ${#packages[@]} -eq 0 ]]; then
    exit 0
fi

if [[ "$(id -u)" -ne 0 ]]; then
    echo "ensure-postgres: ${packages[*]} not installed and not running as root;" >&2
    echo "  install them (sudo apt-get install ${packages[*]}); the server may instead be" >&2
    echo "  given as SLUICE_TEST_POSTGRES_URL" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-postgres: ${packages[*]} not installed and apt-get is unavailable;" >&2
    echo "  install PostgreSQL with this system's package manager" >&2
    exit 0
fi

echo "ensure-postgres: installing ${packages[*]} with apt-get" >&2
# Debian's package would otherwise create and start a "main" cluster on port 5432; the
# tests need only the binaries. A drop-in (not the package's own conffile) says so.
mkdir -p /etc/postgresql-common/createcluster.d
echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/sluice-tests.conf
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null

if ! have_server_binaries || [[ ! -f "$JDBC_JAR" ]]; then
    echo "ensure-postgres: apt-get finished but initdb/pg_ctl or $JDBC_JAR are still missing" >&2
    exit 1
fi
