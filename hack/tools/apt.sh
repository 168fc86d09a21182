#!/usr/bin/env bash
# apt.sh ARG...: apt-get ARG..., one at a time. make test fetches shellcheck,
# installs docker.io and debootstrap from parallel jobs; apt-get fails at once
# when another apt-get holds its lock, so every apt-get of the project waits
# here for the others (and up to 5 minutes for dpkg's lock held by anyone).
set -o errexit -o nounset -o pipefail
exec flock -w 1800 "${TMPDIR:-/tmp}/kubectl-bundle-apt.lock" \
  env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 "$@"
