#!/usr/bin/env bash
# Make sure bubblewrap (bwrap) is installed: Sluice's sandbox (sluice/core/sandbox.py) starts
# every process that runs or renders a pull request's content through it. Idempotent: does
# nothing when `bwrap` is on PATH. Installs with apt-get only when running as root; then
# checks that a sandbox starts (user namespaces allowed).
set -euo pipefail

if ! command -v bwrap >/dev/null 2>&1; then
    if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        echo "ensure-bwrap: no bwrap on PATH; install bubblewrap (Debian: apt-get install bubblewrap)" >&2
        exit 1
    fi
    echo "ensure-bwrap: installing bubblewrap with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null; }
fi
if ! bwrap --unshare-all --unshare-user --ro-bind / / -- true 2>/dev/null; then
    echo "ensure-bwrap: bwrap cannot start a sandbox here (user namespaces disabled?);" \
        "see docs/security.md, 'The sandbox'" >&2
    exit 1
fi
