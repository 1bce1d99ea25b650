#!/usr/bin/env bash
# Make sure Mermaid's own CLI (npm @mermaid-js/mermaid-cli, `mmdc`) and a Chromium for it
# are installed: the PR comment's impact graph is checked by Mermaid itself in the tests.
# Idempotent. mmdc goes to .cache/mermaid/ in this checkout (not global); Chromium, Node.js
# and npm come from Debian's packages with apt-get, only when missing and running as root.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=11.17.0
PREFIX=.cache/mermaid
if [[ -x "$PREFIX/node_modules/.bin/mmdc" ]] && command -v chromium >/dev/null 2>&1; then
    exit 0
fi
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [[ ${#missing[@]} -gt 0 ]]; then
    if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        echo "ensure-mermaid: missing ${missing[*]}; install them (Debian: apt-get install ${missing[*]})" >&2
        exit 1
    fi
    echo "ensure-mermaid: installing ${missing[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "ensure-mermaid: installing @mermaid-js/mermaid-cli@$VERSION into $PREFIX" >&2
mkdir -p "$PREFIX"
PUPPETEER_SKIP_DOWNLOAD=1 npm install --silent --no-audit --no-fund --prefix "$PREFIX" \
    "@mermaid-js/mermaid-cli@$VERSION" >/dev/null
test -x "$PREFIX/node_modules/.bin/mmdc"
