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

# restore redeploys the fallback package into the same slot.
restore() {
  local active fallback
  active=$(txn slots.active)
  fallback=$(txn fallback)
  fail "$1"
  close_if_untouched "nothing was deployed; slot $active untouched"
  if [ -z "$fallback" ]; then
    fail "no previous package is recorded for slot $active: nothing to restore"
    finish 3
  fi
  if ! done_phase RESTORING; then
    echo "BEST EFFORT: redeploying the previous package $(printf '%s' "$fallback" | cut -c1-12) into slot $active (in-place cannot guarantee it comes back as it was)"
  fi
  x "$DEPLOY_ARGS" recover RESTORING "$active" "previous package redeployed into slot $active (best effort)" \
    "$SLOT" deploy "$active" "$fallback"
}

main() {
  parse_args "$@"
  dry_run in-place apply
  hold_run "$(rerun_command)"
  require_update
  check_gate_file "$PACKAGE"
  begin_on_active in-place updates
  local active digest
  active=$(txn slots.active)
  digest=$(txn target)
  resume restore RESTORING
  # U4: a deploy killed once is deployed again; killed twice, the journal
  # says restore (docs/strategies.md: in-place after a crash).
  if [ "$("$JOURNAL" status -o 'jsonpath={.next.restore}')" = "true" ]; then
    restore "$("$JOURNAL" status -o 'jsonpath={.next.why}')"
  fi

  offline_check
  x "$VERIFY_ARGS $(q "$PACKAGE")" step VERIFIED "$VERIFY" --stage -q || restore "verification of $PACKAGE"
  pass "package verified and staged ($digest)"
  x "$DEPLOY_ARGS" step DEPLOYING "$SLOT" deploy "$active" "$digest" || restore "deploying into slot $active"
  pass "package deployed into slot $active"
  x "$GATE_ARGS" step HEALTHY "$GATE" --slot "$active" --record || restore "gate of slot $active"
  pass "slot $active passed its gate"
  step COMMITTED true
  kb "$JOURNAL" end -q
  pass "update committed"
  finish 0
}

main "$@"
