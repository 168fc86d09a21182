#!/bin/sh
# recreate.sh: strategy C. Tear the active slot down and build it again
# with the update; on failure build it again with the previous package.
# Needs a maintenance window, not room for two clusters. Re-running after a
# crash resumes.
#
#   recreate.sh PACKAGE [--key K | --certificate-identity ...] [--gate FILE] [--gate-timeout 10m] [--offline-wait SECONDS] [--yes] [--log FILE] [--dry-run [-o json]]
#   (the teardown lists what the slot holds first; with any, a terminal
#   asks, and without one it needs --yes)
# shellcheck disable=SC3043 # local: dash, bash 3.2 and bash --posix have it
set -o errexit -o nounset
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

usage() {
  sed -n '2,9p' "$here/recreate.sh" | sed 's/^# \{0,1\}//'
}

# build SLOT DIGEST [DEPLOY ARGS...]: a fresh slot with DIGEST deployed.
# One journal step, so it runs as its own process (the journal runs it).
# What the destroy discards is what this update built after its confirmed
# teardown (--yes: it does not ask again).
build() {
  "$SLOT" destroy "$1" --force --yes -q && "$SLOT" create "$1" --package "$2" && "$SLOT" deploy "$@"
}

if [ "${1:-}" = "--build" ]; then
  shift
  build "$@"
  exit
fi
drive recreate apply "$@"
