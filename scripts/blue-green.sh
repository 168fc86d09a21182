#!/bin/sh
# blue-green.sh: strategy B. Build the update in a second slot next to the
# active one, gate it, switch, soak; the active slot is never touched
# before the switch. Re-running any command after a crash resumes it.
#
#   blue-green.sh apply PACKAGE [--key K | --certificate-identity ... ] [--gate FILE] [--gate-timeout 10m] [--offline-wait SECONDS] [--switch-mode s2|repoint|pivot] [--log FILE] [--dry-run [-o json]]
#   blue-green.sh accept [--yes] [--log FILE] [--dry-run]  end the soak; retire the old slot
#   blue-green.sh revert [--yes] [--force] [--gate FILE] [--gate-timeout D] [--log FILE] [--dry-run]
#                     during the soak: gate the previous slot, switch back, gate
#                     it again, destroy the candidate (--force: even when it fails)
#   (accept and revert list what the discarded slot holds first; with any,
#   a terminal asks, and without one they need --yes)
#   --switch-mode repoint (S1, management-only packages): the workload clusters
#   stay with the old slot; accept keeps it as their owner instead of retiring it
#   --switch-mode pivot (S3): their Cluster API objects move to the candidate at
#   the switch and back at a revert
#   blue-green.sh status
# shellcheck disable=SC3043 # local: dash, bash 3.2 and bash --posix have it
set -o errexit -o nounset
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

usage() {
  sed -n '2,16p' "$here/blue-green.sh" | sed 's/^# \{0,1\}//'
}

status() {
  "$JOURNAL" status
  "$SWITCH" status
  "$SLOT" list
}

command=${1:-}
[ $# -gt 0 ] && shift
case "$command" in
  apply | accept | revert) drive blue-green "$command" "$@" ;;
  status) status ;;
  -h | --help | help) usage ;;
  "") usage >&2; refuse 2 "a command is required: apply, accept, revert or status (see --help)" ;;
  *) refuse 2 "unknown command \"$command\" for \"blue-green.sh\" (see --help)" ;;
esac
