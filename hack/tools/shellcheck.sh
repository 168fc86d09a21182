#!/usr/bin/env bash
# Prints the path of a shellcheck binary, fetching Debian's
# package into bin/testbin when the machine has none. Nothing is installed
# system-wide: the .deb is downloaded and unpacked, not installed.
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dest="$root/bin/testbin/shellcheck"

if command -v shellcheck >/dev/null 2>&1; then
  command -v shellcheck
  exit 0
fi
if [ -x "$dest" ]; then
  echo "$dest"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
if ! "$root/hack/tools/apt.sh" download shellcheck >/dev/null 2>&1; then
  # A fresh machine has no package lists yet.
  "$root/hack/tools/apt.sh" update -qq >/dev/null 2>&1 || true
  if ! "$root/hack/tools/apt.sh" download shellcheck >/dev/null 2>&1; then
    echo "shellcheck.sh: could not download Debian's shellcheck package (apt-get download shellcheck)" >&2
    exit 3
  fi
fi
dpkg-deb -x shellcheck_*.deb unpacked
mkdir -p "$(dirname "$dest")"
install -m 0755 unpacked/usr/bin/shellcheck "$dest"
"$dest" --version >/dev/null
echo "$dest"
