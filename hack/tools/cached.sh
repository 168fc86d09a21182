#!/usr/bin/env bash
# cached.sh KEY DEST CMD [ARG...]: the tool binaries named by KEY, built once
# per pin and kept outside the clone, so that a fresh clone on the same
# machine reuses them.
#
# The cache is $KUBECTL_BUNDLE_CACHE/tools/KEY (default
# ${XDG_CACHE_HOME:-~/.cache}/kubectl-bundle/tools/KEY). KEY names the tool,
# its pinned version, a hash of its tools module (go.mod and go.sum) and the
# Go version. When that directory is complete the binaries are copied from it;
# otherwise CMD runs with OUT set to an empty directory it must put the
# binaries in, and that directory becomes the cache entry by rename (a build
# killed halfway leaves no entry that looks complete). Then every binary of the
# entry is copied into DEST.
set -o errexit -o nounset -o pipefail

if [ $# -lt 3 ]; then
  echo "usage: cached.sh KEY DEST CMD [ARG...]" >&2
  exit 2
fi
key=$1 dest=$2
shift 2
cache=${KUBECTL_BUNDLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-bundle}/tools
entry=$cache/$key
mkdir -p "$cache" "$dest"
# One build per key at a time: make test builds its tools in parallel jobs,
# and a second caller waits here and then finds the entry complete.
exec 9>"$cache/.$key.lock"
flock 9
if [ -f "$entry/.complete" ]; then
  echo "cached.sh: $key from $entry (built before for these pins)"
else
  tmp=$(mktemp -d "$cache/.$key.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  OUT=$tmp "$@"
  touch "$tmp/.complete"
  rm -rf "$entry"
  mv "$tmp" "$entry"
  trap - EXIT
fi
for f in "$entry"/*; do
  cp "$f" "$dest/"
done
