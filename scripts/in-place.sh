#!/bin/sh
# in-place.sh: strategy A. Deploy the update into the active slot, gate it,
# commit. On a failed deploy or gate, redeploy the previous package into the
# same slot: best effort, the slot was changed in place. Re-running after a
# crash resumes: a deploy interrupted once is done again, twice restores.
#
#   in-place.sh PACKAGE [--key K | --certificate-identity ...] [--gate FILE] [--gate-timeout 10m] [--offline-wait SECONDS] [--log FILE] [--dry-run [-o json]]
# shellcheck disable=SC3043 # local: dash, bash 3.2 and bash --posix have it
set -o errexit -o nounset
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

usage() {
  sed -n '2,7p' "$here/in-place.sh" | sed 's/^# \{0,1\}//'
}

drive in-place apply "$@"
