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

drive recreate apply "$@"
