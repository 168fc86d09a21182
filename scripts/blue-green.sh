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

# ROLLBACK_CODE and ROLLBACK_WHY are the exit code (and why) of a rollback
# that restored the previous deployment: 1, the update failed, unless a
# precondition found only at the switch (exit 3) decides it.
ROLLBACK_CODE=1
ROLLBACK_WHY=""

# rollback destroys the candidate (never the active slot) and closes the
# transaction; before anything was built there is nothing to destroy.
rollback() {
  local candidate
  candidate=$(txn slots.candidate)
  fail "$1"
  close_if_untouched "nothing was built; slot $(txn slots.active) untouched"
  recorded_gate
  local active
  active=$(txn slots.active)
  # --yes: the candidate holds only what this update built in it, which
  # its rollback discards (destroy would otherwise ask about its workload
  # clusters).
  if step DESTROYING "$SLOT" destroy "$candidate" --yes && step ROLLED_BACK true && kb "$JOURNAL" end -q; then
    pass "candidate slot $candidate destroyed; the active slot was not touched"
    # The previous deployment is said to be in place only once it passed
    # its gate.
    local rc=0
    gate_in_place "$active" || rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
      not_gated "$active" "$rc"
      finish "$rc" "the update was rolled back, but the active slot $active could not be gated"
    fi
    if [ "$rc" -eq 1 ]; then
      fail "gate of the active slot $active"
      echo "BROKEN: the update was rolled back (candidate slot $candidate destroyed), but the active slot $active fails its gate: the previous deployment is NOT confirmed in place" >&2
      echo "see what fails: kubectl bundle-gate --slot $active $GATE_ARGS" >&2
      finish 3 "the active slot $active fails its gate; see BROKEN above"
    fi
    pass "slot $active passed its gate"
    finish "$ROLLBACK_CODE" "$ROLLBACK_WHY"
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
  dry_run blue-green apply
  hold_run "$(self_command) apply $(q "$PACKAGE")${RERUN_ARGS:+ $RERUN_ARGS}"
  require_update
  check_gate_file apply "$PACKAGE"
  check_open blue-green
  if [ -z "$(txn id)" ]; then
    local active candidate
    active=$(active_slot)
    candidate=$(other_slot "$active") || exit
    # With no active slot listed, begin decides why (exit 3 either way): a
    # fresh site (blue-green builds next to an active slot, never from
    # none: it names the first install), or a pointer that is damaged or
    # names a slot with no record (it names the repair).
    x "$BEGIN_ARGS -q" kb "$JOURNAL" begin --strategy blue-green --package "$PACKAGE" ${active:+--active "$active"} --candidate "$candidate" ${SWITCH_MODE:+--switch-mode "$SWITCH_MODE"}
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
  x "$VERIFY_ARGS $(q "$PACKAGE")" step VERIFIED "$VERIFY" --stage -q || rollback "verification of $PACKAGE"
  pass "package verified and staged ($digest)"
  done_phase PROVISIONING || preflight "$candidate" "$digest"
  step PROVISIONING "$SLOT" create "$candidate" --package "$digest" || rollback "creating candidate slot $candidate"
  pass "candidate slot $candidate created"
  x "$DEPLOY_ARGS" step PROVISIONED "$SLOT" deploy "$candidate" "$digest" || rollback "deploying into slot $candidate"
  pass "package deployed into slot $candidate"
  # S1: the workload clusters stay with the old slot, so the candidate's
  # gate checks its management cluster only (its revert gate checks all).
  local scope=""
  [ "$(txn switchMode)" != repoint ] || scope=--management-only
  x "$scope $GATE_ARGS" step HEALTHY "$GATE" --slot "$candidate" --record || rollback "gate of slot $candidate"
  pass "slot $candidate passed its gate"
  local rc=0
  kb "$SWITCH" to "$candidate" || rc=$?
  if [ "$rc" -ne 0 ]; then
    if [ "$rc" -ne 4 ] && [ -z "$(phase_status SWITCHED)" ]; then
      # The switch refused before its first write (a precondition of its
      # mode, as a pivot's): nothing was switched, so the update is rolled
      # back like any failure before SWITCHED, and the refusal's exit code
      # is the script's.
      ROLLBACK_CODE=$rc
      ROLLBACK_WHY="the switch to slot $candidate refused (exit $rc, see above): the update was rolled back"
      rollback "switch to slot $candidate (refused before anything was switched)"
    fi
    fail "switch to slot $candidate did not finish: re-run it to complete it: $RERUN_CMD"
    finish 3
  fi
  pass "switched to slot $candidate; soaking (accept: $(self_command) accept, revert: $(self_command) revert)"
  finish 0
}

accept() {
  parse_args "$@"
  dry_run blue-green accept
  hold_run "$(self_command) accept${RERUN_ARGS:+ $RERUN_ARGS}"
  check_open blue-green
  local old owns confirmed=""
  old=$(txn slots.active)
  if [ -n "$old" ] && ! done_phase RETIRED && [ "$(txn switchMode)" != repoint ]; then
    confirm_losses "$old" "retiring slot $old"
    confirmed=1
  fi
  kb "$SWITCH" accept
  if [ -n "$(txn id)" ]; then
    old=$(txn slots.active)
    owns=""
    if [ -n "$old" ] && [ "$(txn switchMode)" = repoint ]; then
      owns=$("$SLOT" describe "$old" -o "jsonpath={.ownsWorkloads[*]}")
    fi
    if [ -n "$owns" ]; then
      # S1: the old slot runs the workload clusters; it is kept, not retired.
      step RETIRED true
      pass "old slot $old kept: it owns workload clusters $owns"
    elif [ -n "$old" ]; then
      # An S1 accept that kept no workload clusters retires the slot too:
      # what it holds is listed and confirmed first, as for any accept.
      if [ -z "$confirmed" ] && ! done_phase RETIRED; then
        confirm_losses "$old" "retiring slot $old"
      fi
      # Confirmed above (or the step is done): destroy does not ask again.
      step RETIRED "$SLOT" destroy "$old" --yes || { fail "retiring slot $old"; finish 3; }
      pass "old slot $old retired"
    else
      step RETIRED true
    fi
    kb "$JOURNAL" end -q
  fi
  pass "update accepted"
  finish 0
}

# revert: during the soak, return to the previous slot. Its gate (--gate,
# else the one the update was begun with, else the site's default) runs
# BEFORE the switch: when it fails nothing is switched or destroyed, the
# candidate keeps serving, and the run exits 3 naming what helps. After the
# switch the gate runs again; only then is the candidate retired and the
# previous deployment said to be in place. --force reverts anyway (said,
# and the run still exits 3 while the previous slot fails its gate).
revert() {
  local force="" args="" a
  for a in "$@"; do
    if [ "$a" = "--force" ]; then force=--force; else push args "$a"; fi
  done
  eval "parse_args $args"
  dry_run blue-green revert
  hold_run "$(self_command) revert${RERUN_ARGS:+ $RERUN_ARGS}${force:+ $force}"
  check_open blue-green
  if [ -z "$(txn id)" ] && [ "$("$SWITCH" status -o 'jsonpath={.mode}/{.phase}')" = repoint/ACCEPTED ]; then
    # An accepted S1 update kept the old slot for its workload clusters:
    # the switch's refusal names them and why it is no revert target.
    "$SWITCH" back || exit
  fi
  [ -n "$(txn id)" ] || refuse 4 "no blue-green transaction is open: nothing to revert (kubectl bundle-switch status)"
  local candidate previous broken="" rc
  candidate=$(txn slots.candidate)
  previous=$(txn slots.active)
  case "$(txn phase)" in
    ACCEPTED | RETIRED)
      # The soak is over (kubectl bundle-switch accept ends it too): the
      # revert target may already be destroyed, as accept advises.
      refuse 4 "transaction $(txn id) was accepted: slot $candidate stays active and slot $previous is no revert target any more, so there is nothing to revert; finish the update with: $(self_command) accept" ;;
  esac
  recorded_gate
  check_gate_file revert
  done_phase DESTROYING || confirm_losses "$candidate" "revert"
  if ! done_phase SWITCHED_BACK; then
    rc=0
    # A switch back that began (its gate passed then) and did not finish
    # has moved the pointer already: the re-run completes it, and the gate
    # after it says whether slot $previous is well. Gating first would
    # stop half-switched, saying nothing was switched.
    if [ -n "$(phase_status SWITCHED_BACK)" ]; then
      echo "the switch back to slot $previous began and did not finish: completing it" >&2
    else
      gate_in_place "$previous" || rc=$?
    fi
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
      not_gated "$previous" "$rc"
      if [ -z "$force" ]; then
        echo "nothing was switched or destroyed; slot $candidate stays active and keeps serving (transaction $(txn id) stays open)" >&2
        echo "once slot $previous can be gated, run: $(self_command) revert${RERUN_ARGS:+ $RERUN_ARGS}" >&2
        finish "$rc" "slot $previous could not be gated: nothing was switched"
      fi
      echo "reverting anyway (--force): switching back to slot $previous, which was not gated" >&2
    elif [ "$rc" -eq 1 ]; then
      fail "gate of the previous slot $previous"
      if [ -z "$force" ]; then
        echo "BROKEN: slot $previous, the previous deployment, fails its gate: nothing was switched or destroyed; slot $candidate stays active and keeps serving (transaction $(txn id) stays open, soaking)" >&2
        revert_help "$previous"
        echo "or keep the update: $(self_command) accept${RERUN_ARGS:+ $RERUN_ARGS}" >&2
        finish 3 "the previous slot $previous fails its gate: nothing was switched; see BROKEN above"
      fi
      echo "reverting anyway (--force): switching back to slot $previous, which fails its gate" >&2
    fi
    local switch_args=""
    [ -z "$GATE_FILE" ] || push switch_args --gate "$GATE_FILE"
    [ -z "$GATE_TIMEOUT" ] || push switch_args --gate-timeout "$GATE_TIMEOUT"
    x "$switch_args $force" kb "$SWITCH" back || { fail "switching back did not finish: re-run it to complete it: $RERUN_CMD"; finish 3; }
  fi
  pass "switched back to slot $previous"
  rc=0
  gate_in_place "$previous" || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ] && [ -z "$force" ]; then
    not_gated "$previous" "$rc"
    echo "candidate slot $candidate is kept, not destroyed (transaction $(txn id) stays open in SWITCHED_BACK); once slot $previous can be gated, run: $(self_command) revert${RERUN_ARGS:+ $RERUN_ARGS}" >&2
    finish "$rc" "slot $previous could not be gated after the switch back"
  fi
  if [ "$rc" -ne 0 ]; then
    fail "gate of slot $previous after the switch back"
    if [ -z "$force" ]; then
      echo "BROKEN: switched back to slot $previous, but it fails its gate: candidate slot $candidate is kept, not destroyed (transaction $(txn id) stays open in SWITCHED_BACK)" >&2
      revert_help "$previous"
      finish 3 "slot $previous fails its gate after the switch back; see BROKEN above"
    fi
    broken=1
  else
    pass "slot $previous passed its gate"
  fi
  # Confirmed by confirm_losses above (or the step is done).
  step DESTROYING "$SLOT" destroy "$candidate" --yes || { fail "destroying slot $candidate"; finish 3; }
  step ROLLED_BACK true
  kb "$JOURNAL" end -q
  pass "candidate slot $candidate destroyed"
  if [ -n "$broken" ]; then
    echo "BROKEN: reverted with --force: slot $previous is active but fails its gate; the previous deployment is NOT confirmed in place" >&2
    echo "see what fails: kubectl bundle-gate --slot $previous $GATE_ARGS" >&2
    finish 3 "slot $previous is active but fails its gate; see BROKEN above"
  fi
  echo "the previous deployment is in place: slot $previous is active and passed its gate"
  finish 0
}

# revert_help SLOT: what helps when the previous slot SLOT fails its gate.
revert_help() {
  echo "see what fails: kubectl bundle-gate --slot $1 $GATE_ARGS" >&2
  echo "once it passes, run: $(self_command) revert${RERUN_ARGS:+ $RERUN_ARGS}" >&2
  echo "to revert anyway: $(self_command) revert${RERUN_ARGS:+ $RERUN_ARGS} --force" >&2
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
