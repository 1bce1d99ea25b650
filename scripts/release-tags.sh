#!/usr/bin/env bash
# Tag a release of Sluice (the package and the GitHub Action) at the current commit:
#   vX.Y.Z  an immutable tag, the version sluice/__init__.py says (refused if it is taken);
#   vX      the major tag, moved to this commit, which `uses: OWNER/sluice@vX` follows.
# Usage: scripts/release-tags.sh [--push REMOTE]. Run on a clean work tree at the commit to release.
set -euo pipefail
cd "$(dirname "$0")/.."

remote=""
if [[ "${1:-}" == "--push" ]]; then
  remote="${2:?--push needs a remote name, e.g. origin}"
fi

version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' sluice/__init__.py)"
if [[ ! "$version" =~ ^([0-9]+)\.[0-9]+\.[0-9]+$ ]]; then
  echo "release-tags: sluice/__init__.py's __version__ '$version' is not X.Y.Z" >&2
  exit 2
fi
major="v${BASH_REMATCH[1]}"
tag="v$version"

if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
  echo "release-tags: the work tree has uncommitted changes; commit them or stash them first" >&2
  exit 2
fi
if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
  echo "release-tags: $tag already exists (at $(git rev-parse --short "$tag^{commit}")); a release tag never moves: raise __version__ in sluice/__init__.py" >&2
  exit 2
fi

git tag -a "$tag" -m "Sluice $version"
git tag -f -a "$major" -m "Sluice $major (now $version)" >/dev/null
echo "tagged $tag and moved $major to $(git rev-parse --short HEAD)"
if [[ -n "$remote" ]]; then
  git push "$remote" "refs/tags/$tag"
  git push --force "$remote" "refs/tags/$major"
fi
