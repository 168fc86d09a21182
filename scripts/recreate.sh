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

# rebuild builds the slot again with the fallback package.
rebuild() {
  local active fallback
  active=$(txn slots.active)
  fallback=$(txn fallback)
  fail "$1"
  close_if_untouched "nothing was torn down; slot $active untouched"
  if [ -z "$fallback" ]; then
    fail "no previous package is recorded for slot $active: nothing to rebuild with"
    finish 3
  fi
  done_phase BUILDING_FALLBACK || echo "rebuilding slot $active with the previous package $(printf '%s' "$fallback" | cut -c1-12)"
  x "$DEPLOY_ARGS" recover BUILDING_FALLBACK "$active" "slot $active rebuilt with the previous package" \
    "$here/recreate.sh" --build "$active" "$fallback"
}

main() {
  parse_args "$@"
  dry_run recreate apply
  hold_run "$(rerun_command)"
  require_update
  check_gate_file "$PACKAGE"
  begin_on_active recreate rebuilds
  local active digest
  active=$(txn slots.active)
  digest=$(txn target)
  resume rebuild BUILDING_FALLBACK

  offline_check
  x "$VERIFY_ARGS $(q "$PACKAGE")" step VERIFIED "$VERIFY" --stage -q || rebuild "verification of $PACKAGE"
  pass "package verified and staged ($digest)"
  done_phase TEARDOWN || confirm_losses "$active" "the teardown"
  # Confirmed by confirm_losses above (or the step is done).
  step TEARDOWN "$SLOT" destroy "$active" --force --yes || rebuild "tearing down slot $active"
  pass "slot $active torn down"
  x "$DEPLOY_ARGS" step BUILDING "$here/recreate.sh" --build "$active" "$digest" || rebuild "building slot $active"
  pass "slot $active built with the package"
  x "$GATE_ARGS" step HEALTHY "$GATE" --slot "$active" --record || rebuild "gate of slot $active"
  pass "slot $active passed its gate"
  step COMMITTED true
  kb "$JOURNAL" end -q
  pass "update committed"
  finish 0
}

if [ "${1:-}" = "--build" ]; then
  shift
  build "$@"
  exit
fi
main "$@"
