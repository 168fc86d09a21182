#!/usr/bin/env bash
# blue-green.sh: strategy B. Build the update in a second slot next to the
# active one, gate it, switch, soak; the active slot is never touched
# before the switch. Re-running any command after a crash resumes it.
#
#   blue-green.sh apply PACKAGE [--key K | --certificate-identity ... ] [--gate FILE] [--gate-timeout 10m] [--offline-wait SECONDS] [--log FILE]
#   blue-green.sh accept [--yes] [--log FILE]  end the soak; retire the old slot
#   blue-green.sh revert [--yes] [--log FILE]  during the soak: switch back; destroy the candidate
#   (accept and revert list what the discarded slot holds first; with any,
#   a terminal asks, and without one they need --yes)
#   blue-green.sh status
set -o errexit -o nounset -o pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

usage() {
  sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

# rollback destroys the candidate (never the active slot) and closes the
# transaction; before anything was built there is nothing to destroy.
rollback() {
  local candidate
  candidate=$(txn slots.candidate)
  fail "$1"
  close_if_untouched "nothing was built; slot $(txn slots.active) untouched"
  if step DESTROYING "$SLOT" destroy "$candidate" && step ROLLED_BACK true && kb "$JOURNAL" end -q; then
    pass "candidate slot $candidate destroyed; the active slot was not touched"
    finish 1
  fi
  fail "destroying candidate slot $candidate"
  finish 3
}

# preflight CANDIDATE DIGEST: before the candidate is built, the machine
# can hold it and the package is fit for blue/green (S2: it declares the
# Zarf variable SLOT and no name on the shared Docker daemon or network is
# the same for both slots). Read-only, so it runs again on a resume; when
# it refuses before anything was built, the transaction is closed and the
# refusal's exit code (3, a precondition missing) is the script's.
preflight() {
  local rc=0
  "$SLOT" preflight "$1" --package "$2" --blue-green || rc=$?
  [ "$rc" -eq 0 ] && return 0
  fail "preflight of candidate slot $1 (the ✗ findings above say why and what else to use)"
  if [ "$(txn phase)" = "VERIFIED" ]; then
    kb "$JOURNAL" abort -q || true
    kb "$JOURNAL" end -q || { fail "closing the transaction"; finish 3 "the transaction could not be closed"; }
    echo "nothing was built; slot $(active_slot) untouched"
    finish "$rc" "preflight refused the package: nothing was built"
  fi
  rollback "preflight of candidate slot $1"
}

apply() {
  parse_args "$@"
  require_update
  check_open blue-green
  if [ -z "$(txn id)" ]; then
    local active candidate
    active=$(active_slot)
    candidate=$(other_slot "$active")
    # With no active slot listed, begin decides why (exit 3 either way): a
    # fresh site (blue-green builds next to an active slot, never from
    # none: it names the first install), or a pointer that is damaged or
    # names a slot with no record (it names the repair).
    kb "$JOURNAL" begin --strategy blue-green --package "$PACKAGE" ${active:+--active "$active"} --candidate "$candidate" "${BEGIN_ARGS[@]}" -q
  fi
  local candidate digest
  candidate=$(txn slots.candidate)
  digest=$(txn target)

  case "$(txn phase)" in
    DESTROYING | ROLLED_BACK | SWITCHED_BACK) rollback "resuming an interrupted rollback" ;;
    SWITCHED | SOAKING | ACCEPTED | RETIRED)
      # Past the point of no return: only finish the switch.
      kb "$SWITCH" to "$candidate"
      pass "slot $candidate is active and soaking"
      finish 0 ;;
  esac
  if [ "$(txn status)" = "failed" ]; then
    rollback "$(txn phase) failed before: $(txn lastError)"
  fi

  offline_check
  step VERIFIED "$VERIFY" --stage -q "${VERIFY_ARGS[@]}" "$PACKAGE" || rollback "verification of $PACKAGE"
  pass "package verified and staged ($digest)"
  done_phase PROVISIONING || preflight "$candidate" "$digest"
  step PROVISIONING "$SLOT" create "$candidate" --package "$digest" || rollback "creating candidate slot $candidate"
  pass "candidate slot $candidate created"
  step PROVISIONED "$SLOT" deploy "$candidate" "$digest" "${DEPLOY_ARGS[@]}" || rollback "deploying into slot $candidate"
  pass "package deployed into slot $candidate"
  step HEALTHY "$GATE" --slot "$candidate" --record "${GATE_ARGS[@]}" || rollback "gate of slot $candidate"
  pass "slot $candidate passed its gate"
  if ! kb "$SWITCH" to "$candidate"; then
    fail "switch to slot $candidate did not finish: re-run this command to complete it"
    finish 3
  fi
  pass "switched to slot $candidate; soaking (accept: $0 accept, revert: $0 revert)"
  finish 0
}

accept() {
  parse_args "$@"
  check_open blue-green
  local old
  old=$(txn slots.active)
  if [ -n "$old" ] && ! done_phase RETIRED; then
    confirm_losses "$old" "retiring slot $old"
  fi
  kb "$SWITCH" accept
  if [ -n "$(txn id)" ]; then
    old=$(txn slots.active)
    if [ -n "$old" ]; then
      step RETIRED "$SLOT" destroy "$old" || { fail "retiring slot $old"; finish 3; }
      pass "old slot $old retired"
    else
      step RETIRED true
    fi
    kb "$JOURNAL" end -q
  fi
  pass "update accepted"
  finish 0
}

revert() {
  parse_args "$@"
  check_open blue-green
  [ -n "$(txn id)" ] || refuse 4 "no blue-green transaction is open: nothing to revert (kubectl bundle-switch status)"
  local candidate
  candidate=$(txn slots.candidate)
  done_phase DESTROYING || confirm_losses "$candidate" "revert"
  if ! done_phase SWITCHED_BACK; then
    kb "$SWITCH" back || { fail "switching back: re-run this command"; finish 3; }
  fi
  pass "switched back to slot $(txn slots.active)"
  step DESTROYING "$SLOT" destroy "$candidate" || { fail "destroying slot $candidate"; finish 3; }
  step ROLLED_BACK true
  kb "$JOURNAL" end -q
  pass "candidate slot $candidate destroyed"
  finish 0
}

status() {
  "$JOURNAL" status
  "$SWITCH" status
  "$SLOT" list
}

command=${1:-}
[ $# -gt 0 ] && shift
case "$command" in
  apply) apply "$@" ;;
  accept) accept "$@" ;;
  revert) revert "$@" ;;
  status) status ;;
  -h | --help | help) usage ;;
  "") usage >&2; refuse 2 "a command is required: apply, accept, revert or status (see --help)" ;;
  *) refuse 2 "unknown command \"$command\" for \"blue-green.sh\" (see --help)" ;;
esac
