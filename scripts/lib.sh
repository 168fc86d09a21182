# shellcheck shell=sh disable=SC3043
# lib.sh: what the strategy scripts share. Sourced by in-place.sh,
# blue-green.sh and recreate.sh; holds no state (the journal does).
# POSIX sh (dash, bash 3.2 as macOS's /bin/sh, bash --posix): no arrays,
# no [[, no pipefail, no process substitution; `local` is used, as every
# one of them has it. A list of arguments is one string of words quoted
# for sh (push adds to one, x runs a command with one appended).

# Plugins are found on PATH, as kubectl finds them: kubectl-bundle-NAME, as
# make install and the release archives install them, or kubectl-bundle_NAME,
# the one link krew makes (docs/install.md).
plugin() {
  if ! command -v "kubectl-bundle-$1" >/dev/null 2>&1 && command -v "kubectl-bundle_$1" >/dev/null 2>&1; then
    echo "kubectl-bundle_$1"
  else
    echo "kubectl-bundle-$1"
  fi
}
# (Used by the scripts that source this file.)
# shellcheck disable=SC2034
VERIFY=$(plugin verify)
JOURNAL=$(plugin journal)
SLOT=$(plugin slot)
GATE=$(plugin gate)
SWITCH=$(plugin switch)

# require_plugins fails with exit 3 (environment) before any step when a
# plugin is not installed, rather than half-way through an update.
require_plugins() {
  local p missing=""
  for p in "$VERIFY" "$JOURNAL" "$SLOT" "$GATE" "$SWITCH"; do
    command -v "$p" >/dev/null 2>&1 || missing="${missing:+$missing }$p"
  done
  if [ -n "$missing" ]; then
    echo "error: not on PATH: $missing. Install all five plugins (docs/install.md: krew, the release archives, or make install) and re-run." >&2
    exit 3
  fi
}

# q WORD: WORD as one sh word, quoted only when it needs it (as the
# plugins quote the commands they print).
q() {
  case $1 in
    "" | *[!A-Za-z0-9_./:=@+,-]*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
    *) printf '%s' "$1" ;;
  esac
}

# push VAR WORD...: append each WORD, quoted, to the list in VAR.
push() {
  local _var="$1" _w _l
  shift
  eval "_l=\${$_var}"
  for _w in "$@"; do
    _l="${_l:+$_l }$(q "$_w")"
  done
  eval "$_var=\$_l"
}

# x LIST COMMAND [ARGS...]: run COMMAND ARGS with the words of LIST (a
# list push built) after them.
x() {
  local _l="$1"
  shift
  eval "set -- \"\$@\" $_l"
  "$@"
}
# STATE_PREFIX starts every command a script prints when the state dir is
# a relative KUBECTL_BUNDLE_STATE_DIR: the same variable, absolute, so that
# the command pasted in another directory opens this state dir, not a new
# empty one there ("" when the variable is unset or absolute).
STATE_PREFIX=""
case ${KUBECTL_BUNDLE_STATE_DIR:-} in
  "" | /*) ;;
  *)
    if [ -d "$KUBECTL_BUNDLE_STATE_DIR" ]; then
      STATE_PREFIX=$(cd "$KUBECTL_BUNDLE_STATE_DIR" && pwd)
    else
      STATE_PREFIX=$PWD/$KUBECTL_BUNDLE_STATE_DIR
    fi
    STATE_PREFIX="KUBECTL_BUNDLE_STATE_DIR=$(q "$STATE_PREFIX") " ;;
esac

# The scripts' own arguments: help needs no plugin.
case "${1:-}" in
  "" | -h | --help | help) ;;
  *) require_plugins ;;
esac

# The lists of arguments (push, x).
VERIFY_ARGS=""
# YES_ARGS is --yes when given: discard what a slot holds without asking.
YES_ARGS=""
# shellcheck disable=SC2034 # read by the scripts
DEPLOY_ARGS=""
GATE_ARGS=""
# BEGIN_ARGS record this run's gate and verification material in the
# transaction, so that the next command journal status prints gates and
# verifies the same way.
BEGIN_ARGS=""
# GATE_FILE and GATE_TIMEOUT are --gate (absolute) and --gate-timeout, ""
# when not given.
GATE_FILE=""
GATE_TIMEOUT=""
# RERUN_ARGS are this run's options with absolute paths, for the command
# printed to run next; SELF is this script, absolute.
RERUN_ARGS=""
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
# The plugins name the scripts in the commands they print by this
# directory, so that those name the scripts that run (absolute).
export KUBECTL_BUNDLE_SCRIPTS_DIR="${SELF%/*}"
# SUMMARY is the PASS and FAIL lines so far, one a line.
SUMMARY=""
PACKAGE=""
LOG=""
# OFFLINE_WAIT is --offline-wait SECONDS ("" when not given).
OFFLINE_WAIT=""
# SWITCH_MODE is blue-green.sh's --switch-mode ("" when not given).
SWITCH_MODE=""
# DRY_RUN is set by --dry-run: print the plan, change nothing (dry_run);
# PLAN_OUTPUT is its -o FORMAT.
DRY_RUN=""
PLAN_OUTPUT=""
# EVIDENCE is the open transaction's evidence directory, once this run
# tees its output there (evidence_start).
EVIDENCE=""

# abs PATH: PATH made absolute, so a printed command runs from anywhere
# ("-" and absolute paths stay as they are).
abs() {
  case "$1" in
    /* | -) echo "$1" ;;
    *) echo "$PWD/$1" ;;
  esac
}

# same_file A B: A and B name the same file, however each is spelled
# (relative, with .., through a symlinked directory).
same_file() {
  [ "$1" = "$2" ] && return 0
  [ -e "$1" ] && [ -e "$2" ] || return 1
  [ "$(realpath_of "$1")" = "$(realpath_of "$2")" ]
}

# same_package TXN_PACKAGE TXN_TARGET FILE: FILE is the transaction's
# package: the same file as the path it was begun with, or, begun with a
# digest, a file with that sha256 (its staged copy's sidecar says it).
same_package() {
  if [ -n "$1" ]; then
    same_file "$1" "$3"
    return
  fi
  local sum
  if [ -f "$3.sha256" ]; then
    sum=$(cut -d' ' -f1 "$3.sha256")
  else
    sum=$(sha256sum "$3" | cut -d' ' -f1)
  fi
  [ "$sum" = "${2#sha256:}" ]
}

realpath_of() {
  echo "$(cd "$(dirname "$1")" && pwd -P)/$(basename "$1")"
}

die() {
  refuse 2 "$@"
}

# refuse CODE MSG...: say MSG as kubectl says errors ("error: MSG") and
# exit with CODE of the table (docs/exit-codes.md): 2 usage, 3 a
# precondition missing, 4 a conflict.
refuse() {
  local code="$1"
  shift
  echo "error: $*" >&2
  exit "$code"
}

# The issuer of GitHub Actions' OIDC tokens, which sign the site's packages
# keyless.
GITHUB_ACTIONS_ISSUER=https://token.actions.githubusercontent.com

# airgap_identity prints the keyless signer the site's own variables name,
# as offline-run.sh composes it: $AIRGAP_VERIFY_WORKFLOW_REF (GitHub's
# workflow_ref, OWNER/REPO/.github/workflows/FILE@REF), else
# $AIRGAP_VERIFY_REPO (OWNER/REPO) with $AIRGAP_VERIFY_REF (default
# refs/heads/main) and the air-gapped.yml workflow; nothing when none is set.
airgap_identity() {
  if [ -n "${AIRGAP_VERIFY_WORKFLOW_REF:-}" ]; then
    echo "https://github.com/${AIRGAP_VERIFY_WORKFLOW_REF#https://github.com/}"
  elif [ -n "${AIRGAP_VERIFY_REPO:-}" ]; then
    echo "https://github.com/${AIRGAP_VERIFY_REPO}/.github/workflows/air-gapped.yml@${AIRGAP_VERIFY_REF:-refs/heads/main}"
  elif [ -n "${AIRGAP_VERIFY_REF:-}" ]; then
    die "AIRGAP_VERIFY_REF needs AIRGAP_VERIFY_REPO (OWNER/REPO), or set AIRGAP_VERIFY_WORKFLOW_REF"
  fi
}

# parse_args reads the verification material (as kubectl bundle-verify
# takes it; else $ZARF_VERIFY_KEY as offline-run.sh does; else the
# $AIRGAP_VERIFY_* signer; else none here, and verify takes the site's
# policy from the state dir's config.yaml), the gate options, --log, and
# one PACKAGE.
parse_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --key | --certificate-* | --trusted-root | --gate | --gate-timeout | --log | --offline-wait | --switch-mode | -o)
        [ $# -ge 2 ] || die "$1 needs a value (see --help)" ;;
    esac
    case "$1" in
      --key)
        push VERIFY_ARGS --key "$(abs "$2")"
        push DEPLOY_ARGS --key "$(abs "$2")"
        push RERUN_ARGS --key "$(abs "$2")"
        push BEGIN_ARGS --key "$(abs "$2")"
        shift 2 ;;
      --trusted-root)
        push VERIFY_ARGS "$1" "$(abs "$2")"
        push RERUN_ARGS "$1" "$(abs "$2")"
        push BEGIN_ARGS "$1" "$(abs "$2")"
        shift 2 ;;
      --certificate-identity | --certificate-oidc-issuer)
        push VERIFY_ARGS "$1" "$2"
        push RERUN_ARGS "$1" "$2"
        push BEGIN_ARGS "$1" "$2"
        shift 2 ;;
      --certificate-identity-regexp | --certificate-oidc-issuer-regexp)
        # (journal begin records no pattern: the staged record's signer
        # names it in the next command once the package is verified.)
        push VERIFY_ARGS "$1" "$2"
        push RERUN_ARGS "$1" "$2"
        shift 2 ;;
      --yes) YES_ARGS=--yes; push RERUN_ARGS --yes; shift ;;
      --gate) GATE_FILE=$(abs "$2"); push GATE_ARGS -f "$GATE_FILE"; push RERUN_ARGS --gate "$GATE_FILE"; push BEGIN_ARGS --gate "$GATE_FILE"; shift 2 ;;
      --gate-timeout) GATE_TIMEOUT=$2; push GATE_ARGS --timeout "$2"; push RERUN_ARGS --gate-timeout "$2"; push BEGIN_ARGS --gate-timeout "$2"; shift 2 ;;
      --log) LOG=$(abs "$2"); push RERUN_ARGS --log "$LOG"; shift 2 ;;
      --offline-wait) OFFLINE_WAIT=$2; push RERUN_ARGS --offline-wait "$2"; shift 2 ;;
      --switch-mode)
        # shellcheck disable=SC2034 # read by blue-green.sh
        SWITCH_MODE=$2
        push RERUN_ARGS --switch-mode "$2"; shift 2 ;;
      --dry-run) DRY_RUN=1; shift ;;
      -o) PLAN_OUTPUT=$2; shift 2 ;;
      -h | --help) usage; exit 0 ;;
      -*) die "unknown option $1 (see --help)" ;;
      *)
        [ -z "$PACKAGE" ] || die "one PACKAGE only (got $PACKAGE and $1)"
        [ -f "$1" ] || die "package $1 not found"
        # Absolute, so that a re-run from anywhere resumes the same transaction.
        PACKAGE="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
        shift ;;
    esac
  done
  if [ -z "$VERIFY_ARGS" ] && [ -n "${ZARF_VERIFY_KEY:-}" ]; then
    local key
    key=$(abs "$ZARF_VERIFY_KEY")
    push VERIFY_ARGS --key "$key"
    push DEPLOY_ARGS --key "$key"
    push BEGIN_ARGS --key "$key"
    # In the printed command too, so that it runs without the variable:
    # the command that verifies a PACKAGE (accept and revert take none and
    # verify nothing, so theirs names no key).
    # First, as journal status prints it (the material, then the gate).
    if [ -n "$PACKAGE" ]; then RERUN_ARGS="$(q --key) $(q "$key")${RERUN_ARGS:+ $RERUN_ARGS}"; fi
  fi
  local identity
  identity=$(airgap_identity) || exit
  if [ -z "$VERIFY_ARGS" ] && [ -n "$identity" ]; then
    # In the printed command too, so that it runs without the variables.
    push VERIFY_ARGS --certificate-identity "$identity" --certificate-oidc-issuer "$GITHUB_ACTIONS_ISSUER"
    push RERUN_ARGS --certificate-identity "$identity" --certificate-oidc-issuer "$GITHUB_ACTIONS_ISSUER"
    push BEGIN_ARGS --certificate-identity "$identity" --certificate-oidc-issuer "$GITHUB_ACTIONS_ISSUER"
  fi
  [ -n "$DRY_RUN" ] || [ -z "$PLAN_OUTPUT" ] || die "-o $PLAN_OUTPUT is the output of --dry-run (see --help)"
  if [ -n "$LOG" ] && [ -z "$DRY_RUN" ]; then
    # Everything also goes to the log, so an unattended run can be read later.
    tee_to "$LOG" 1 1
    exec 2>&1
    echo "===== $(basename "$0") $(date -u +%Y-%m-%dT%H:%M:%SZ) ====="
  fi
}

# dry_run STRATEGY OP: with --dry-run, the planner's plan of this command
# on this site (kubectl bundle-journal plan: the steps, the slot each
# changes, what each loses), and its exit code; nothing is changed.
dry_run() {
  [ -n "$DRY_RUN" ] || return 0
  local args=""
  push args --strategy "$1" --op "$2"
  [ -z "$PACKAGE" ] || push args --package "$PACKAGE"
  [ -z "$SWITCH_MODE" ] || push args --switch-mode "$SWITCH_MODE"
  [ -z "$PLAN_OUTPUT" ] || push args -o "$PLAN_OUTPUT"
  x "$args $BEGIN_ARGS" exec "$JOURNAL" plan
}

# tee_to FILE FD TO: from now on, what this script writes to descriptor FD
# (1 or 2) goes to descriptor TO as before and is appended to FILE too,
# through a tee reading a fifo (POSIX sh has no >(...)). The tee holds no
# run lock (9) and ends when the script and its children have closed FD;
# it is killed with them. Best effort: when no fifo can be made, FD stays
# as it is and 1 is returned.
tee_to() {
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/kubectl-bundle-tee.XXXXXX" 2>/dev/null) || return 1
  if ! mkfifo "$dir/fifo" 2>/dev/null; then
    rm -rf "$dir"
    return 1
  fi
  if [ "$3" = 2 ]; then
    tee -a "$1" <"$dir/fifo" >&2 9>&- &
  else
    tee -a "$1" <"$dir/fifo" 9>&- &
  fi
  if [ "$2" = 2 ]; then exec 2>"$dir/fifo"; else exec >"$dir/fifo"; fi
  # Both ends are open: the fifo needs no name any more.
  rm -rf "$dir"
}

# hold_run COMMAND: this run owns the state dir until it exits (docs/strategies.md,
# "The guard"). The lock is taken on a descriptor of this shell, which
# every plugin call inherits (so they are part of the run) and which the
# kernel closes when the script dies: a killed run's re-run takes over at
# once. While it lives, every other mutating command refuses (exit 4),
# naming this pid and COMMAND, the line that re-runs this script (kept in
# RERUN_CMD for the script's own advice).
RERUN_CMD=""
hold_run() {
  local path
  # shellcheck disable=SC2034 # read by blue-green.sh
  RERUN_CMD=$1
  path=$("$JOURNAL" lock-run --path) || exit
  # A fixed descriptor: POSIX sh has no {VAR} redirection (bash before 4.1,
  # macOS's /bin/sh, reads it as a command). Nothing else here uses 9.
  exec 9<>"$path"
  export KUBECTL_BUNDLE_RUN_FD=9
  "$JOURNAL" lock-run --fd 9 --command "$1" || exit
}

# drive STRATEGY OP ARGS...: the run, as a loop. Each call of the plugin
# makes the run's next step (it names it and prints what it runs; this
# script evaluates no command line) and exits 10 while more remain, else
# with the run's own code after its summary. It checks the arguments (and
# prints the plan of --dry-run) first, then this shell holds the run lock
# on descriptor 9 for the whole run, as hold_run does.
drive() {
  local a rc=0 path
  for a in "$@"; do
    case $a in -h | --help) usage; exit 0 ;; esac
  done
  "$JOURNAL" advance --script "$SELF" --check -- "$@" || rc=$?
  [ "$rc" -eq 10 ] || exit "$rc"
  path=$("$JOURNAL" lock-run --path) || exit
  exec 9<>"$path"
  export KUBECTL_BUNDLE_RUN_FD=9
  "$JOURNAL" advance --script "$SELF" --hold 9 -- "$@" || exit
  while :; do
    rc=0
    "$JOURNAL" advance --script "$SELF" -- "$@" || rc=$?
    [ "$rc" -eq 10 ] || exit "$rc"
  done
}

# kb runs one plugin call. Tests set KB_TEST_KILL_AFTER=N to have the
# script SIGKILL its own process group after its N-th plugin call, the way
# a power cut or a killed shell would stop it.
kb() {
  local rc=0
  "$@" || rc=$?
  if [ -n "${KB_TEST_KILL_AFTER:-}" ]; then
    local n=0
    [ -f "$KB_TEST_COUNTER" ] && n=$(cat "$KB_TEST_COUNTER")
    n=$((n + 1))
    echo "$n" >"$KB_TEST_COUNTER"
    if [ "$n" -eq "$KB_TEST_KILL_AFTER" ]; then
      kill -KILL 0
    fi
  fi
  return "$rc"
}

# step PHASE COMMAND...: run COMMAND as the journal step PHASE (skipped when
# already done, redone when it was interrupted).
step() {
  local phase="$1"
  shift
  evidence_start
  kb "$JOURNAL" run "$phase" -- "$@"
}

# evidence_start: once a transaction is open, the rest of this run's output
# also goes to its evidence (output.log; each stream still to its own
# place). Best effort: evidence that cannot be written never stops a run.
evidence_start() {
  [ -z "$EVIDENCE" ] || return 0
  local dir
  dir=$("$JOURNAL" evidence --path 2>/dev/null) || return 0
  [ -d "$dir" ] || return 0
  EVIDENCE=$dir
  { echo "===== $(basename "$0") $(date -u +%Y-%m-%dT%H:%M:%SZ) =====" >>"$EVIDENCE/output.log"; } 2>/dev/null || true
  tee_to "$EVIDENCE/output.log" 1 1 || return 0
  tee_to "$EVIDENCE/output.log" 2 2 || true
}

# txn FIELD: a field of the open transaction ("" when none is open).
txn() {
  "$JOURNAL" status -o "jsonpath={.transaction.$1}"
}

# done_phase PHASE: whether the open transaction has finished PHASE.
done_phase() {
  [ "$(phase_status "$1")" = "done" ]
}

# phase_status PHASE: the status of the transaction's PHASE step (started,
# failed, done), empty when it never began.
phase_status() {
  "$JOURNAL" status -o "jsonpath={.transaction.steps[?(@.phase==\"$1\")].status}"
}

pass() {
  SUMMARY="${SUMMARY}PASS: $*
"
  echo "PASS: $*"
}

fail() {
  SUMMARY="${SUMMARY}FAIL: $*
"
  echo "FAIL: $*" >&2
}

# finish CODE [WHY] prints the summary and exits with CODE: 0 applied, 1
# the update failed and the previous deployment was kept, or restored and
# its gate passed, 3 a rollback step failed or the restored slot fails its
# gate (WHY says which; kubectl bundle-journal status names the next command).
finish() {
  local code="$1" why="${2:-}" result
  case "$code" in
    0) result="RESULT: PASS" ;;
    1) result="RESULT: FAIL (the previous deployment is in place)" ;;
    *) result="RESULT: FAIL (${why:-rollback incomplete}: kubectl bundle-journal status says what to run next)" ;;
  esac
  evidence_start
  if [ -n "$EVIDENCE" ]; then
    # The summary of the transaction's last run, kept with its evidence.
    { printf '%s%s\n' "$SUMMARY" "$result" >"$EVIDENCE/summary.txt.tmp" &&
      mv -f "$EVIDENCE/summary.txt.tmp" "$EVIDENCE/summary.txt"; } 2>/dev/null || true
  fi
  echo ""
  echo "===== summary ====="
  if [ -n "$SUMMARY" ]; then printf '%s' "$SUMMARY"; else echo; fi
  echo "$result"
  exit "$code"
}

# close_if_untouched MSG: when the package was rejected before anything
# changed, close the transaction, say MSG and exit 1.
close_if_untouched() {
  if ! done_phase VERIFIED || [ "$(txn phase)" = "VERIFIED" ]; then
    kb "$JOURNAL" abort -q || true
    # Only a closed transaction is "the previous deployment is in place":
    # end refuses while the state is damaged (it printed the repair).
    if ! kb "$JOURNAL" end -q; then
      fail "closing the transaction"
      finish 3 "the transaction could not be closed"
    fi
    echo "$1"
    finish 1
  fi
}

# recover PHASE SLOT WHAT COMMAND...: run the recovery step COMMAND as
# PHASE, gate SLOT again, and only when that gate passes close the
# transaction as RESTORED and exit 1 (the previous deployment is in place).
# Exit 3 when the recovery step fails or the restored slot fails its gate:
# the transaction stays open in PHASE, and the next command is the gate
# that shows what fails (journal status names it too). A re-run gates the
# slot again (the recovery step is done: it is not redone) and closes the
# transaction once the gate passes; when it fails as the last run's did,
# with nothing changed since (the same package deployed, the same gate
# file, the same checks failing), it says so and names the gate again
# rather than repeating the same BROKEN.
recover() {
  local phase="$1" slot="$2" what="$3"
  shift 3
  if ! step "$phase" "$@"; then
    fail "$what: the recovery step failed"
    finish 3
  fi
  local rc=0 before
  before=$(gate_outcome "$slot")
  x "$GATE_ARGS" kb "$GATE" --slot "$slot" --record || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
    not_gated "$slot" "$rc"
    echo "the transaction $(txn id) stays open in $phase; once slot $slot can be gated, run: $(rerun_command)" >&2
    finish "$rc" "the restored slot $slot could not be gated"
  fi
  if [ "$rc" -eq 1 ]; then
    fail "$what, but its gate fails"
    if [ -n "$before" ] && [ "$before" = "$(gate_outcome "$slot")" ]; then
      echo "BROKEN: unchanged since the last run: slot $slot still holds the previous package $(txn fallback | cut -c1-12) and fails its gate as the last run found it (failing: $(gate_failing "$slot")), and nothing changed since: the same package is deployed and the gate file is the same. The restore is not redone, and running this again cannot help until what the gate reports is fixed (transaction $(txn id) stays open in $phase)" >&2
      echo "fix what the gate reports (the workload in slot $slot, or the gate file if it is wrong); once it passes, this closes the transaction: $(rerun_command)" >&2
      echo "see what fails, run: $(gate_command "$slot")" >&2
      finish 3 "the restored slot $slot still fails its gate, unchanged since the last run: see BROKEN above"
    fi
    echo "BROKEN: slot $slot holds the previous package $(txn fallback | cut -c1-12) but fails its gate: the previous deployment is NOT confirmed in place (transaction $(txn id) stays open in $phase)" >&2
    echo "once it passes, this closes the transaction: $(rerun_command)" >&2
    echo "see what fails, run: $(gate_command "$slot")" >&2
    finish 3 "the restored slot $slot fails its gate: see BROKEN above"
  fi
  pass "$what and its gate passes"
  step RESTORED true
  kb "$JOURNAL" end -q
  finish 1
}

# gate_outcome SLOT: the gate result recorded for SLOT as one line: what
# makes two results "the same failure" (passed, the package deployed and
# the one gated, the gate file and its digest, the failing checks), ""
# when none is recorded.
gate_outcome() {
  local out
  out=$("$SLOT" describe "$1" -o 'jsonpath={.gate.passed}|{.package.digest}|{.gate.package}|{.gate.file}|{.gate.digest}|{.gate.failed}' 2>/dev/null) || return 0
  case "$out" in
    "|"*) ;; # no gate recorded
    *) echo "$out" ;;
  esac
}

# gate_failing SLOT: the checks SLOT's recorded gate failed.
gate_failing() {
  "$SLOT" describe "$1" -o 'jsonpath={.gate.failed[*]}' 2>/dev/null | sed 's/ /, /g'
}

# gate_command SLOT: the gate of this run against SLOT, recording its
# result, as a line to paste (journal status names the same).
gate_command() {
  echo "kubectl bundle-gate --slot $1 --record${GATE_ARGS:+ $GATE_ARGS}"
}

# recorded_gate: without --gate and --gate-timeout, the gate the open
# transaction was begun with (journal begin --gate), so that a revert or a
# rollback gates as the update did.
recorded_gate() {
  local v
  if [ -z "$GATE_FILE" ]; then
    v=$(txn gate.file 2>/dev/null) || v=""
    if [ -n "$v" ]; then GATE_FILE=$v; push GATE_ARGS -f "$v"; fi
  fi
  if [ -z "$GATE_TIMEOUT" ]; then
    v=$(txn gate.timeout 2>/dev/null) || v=""
    if [ -n "$v" ]; then GATE_TIMEOUT=$v; push GATE_ARGS --timeout "$v"; fi
  fi
  return 0
}

# gate_in_place SLOT: the previous deployment in SLOT passes its gate
# (recorded in its slot record). Only then may a run say it is in place.
# The gate's exit code is returned as it is: only 1 says SLOT fails its
# gate; 2 (its file or flags), 3 (the cluster or the state unreachable or
# damaged) and 4 (a conflict) say it could not be gated (not_gated).
gate_in_place() {
  x "$GATE_ARGS" kb "$GATE" --slot "$1" --record
}

# not_gated SLOT RC: the gate of SLOT did not run to a verdict (exit RC):
# say so and how to gate it, and nothing about SLOT's health.
not_gated() {
  fail "slot $1 could not be gated (kubectl bundle-gate exited $2; the error above says why): its health is not known"
  echo "once that is fixed, gate it: kubectl bundle-gate --slot $1 $GATE_ARGS" >&2
}

# check_gate_file VERB [ARGS...]: the gate file (--gate, or the one the open
# transaction was begun with) can be read and parses as a gate, checked by
# the gate itself before any step: a missing or bad file is a usage error
# (exit 2) that changes nothing, never a slot that fails its gate.
check_gate_file() {
  [ -n "$GATE_FILE" ] || return 0
  local rc=0
  "$GATE" -f "$GATE_FILE" --parse-only -q || rc=$?
  [ "$rc" -eq 0 ] && return 0
  refuse "$rc" "the gate file $GATE_FILE cannot be used (above): nothing was changed; restore or fix it, then run: $(rerun_with_gate "$GATE_FILE" "$@"); or name another gate file in its place (--gate ABS_PATH)"
}

# rerun_with_gate FILE VERB...: this script with VERB (its subcommand and
# package) and this run's options, its gate file FILE (in place of the
# --gate it was given, else added) and its gate timeout (the one given, or
# the one the open transaction was begun with), as a line to paste.
rerun_with_gate() {
  local file="$1" a="" gate="" timeout=""
  shift
  eval "set -- \"\$@\" $RERUN_ARGS"
  while [ $# -gt 0 ]; do
    case "$1" in
      --gate) push a --gate "$file"; gate=1; shift 2 ;;
      --gate-timeout) push a "$1" "$2"; timeout=1; shift 2 ;;
      *) push a "$1"; shift ;;
    esac
  done
  [ -n "$gate" ] || push a --gate "$file"
  if [ -z "$timeout" ] && [ -n "$GATE_TIMEOUT" ]; then push a --gate-timeout "$GATE_TIMEOUT"; fi
  printf '%s\n' "$(self_command)${a:+ $a}"
}

# quoted ARGS...: ARGS as one line a shell reads back as the same words.
quoted() {
  local _out=""
  push _out "$@"
  printf '%s\n' "$_out"
}

# self_command: this script as a printed command starts: its absolute
# path, after the state dir when that was given as a relative
# KUBECTL_BUNDLE_STATE_DIR (pasted in another directory, the command then
# still names this run's state dir).
self_command() {
  printf '%s%s\n' "$STATE_PREFIX" "$(q "$SELF")"
}

# rerun_command: this script with this run's package and options, with
# absolute paths, as a line to paste.
rerun_command() {
  printf '%s\n' "$(self_command) $(q "$PACKAGE")${RERUN_ARGS:+ $RERUN_ARGS}"
}

# check_open STRATEGY: an open transaction must be this script's, for this
# PACKAGE; then the script resumes it.
check_open() {
  local strategy package
  strategy=$(txn strategy)
  [ -z "$strategy" ] && return 0
  package=$(txn package)
  if [ "$strategy" != "$1" ] || { [ -n "$PACKAGE" ] && ! same_package "$package" "$(txn target)" "$PACKAGE"; }; then
    echo "error: transaction $(txn id) ($strategy, package ${package:-$(txn target)}) is open; finish it first:" >&2
    "$JOURNAL" status >&2 || true
    exit 4
  fi
  echo "resuming transaction $(txn id) in phase $(txn phase) ($(txn status))"
}

# require_update: a PACKAGE and verification material were given, or the
# site's policy in the state dir's config.yaml supplies it (verify --policy
# says so, or exits 2 naming what to give).
require_update() {
  [ -n "$PACKAGE" ] || die "a PACKAGE is required (see --help)"
  if [ -z "$VERIFY_ARGS" ]; then
    local rc=0
    "$VERIFY" --policy -q || rc=$?
    [ "$rc" -eq 0 ] || refuse "$rc" "the scripts take the same flags, or ZARF_VERIFY_KEY, or AIRGAP_VERIFY_WORKFLOW_REF (or AIRGAP_VERIFY_REPO and AIRGAP_VERIFY_REF) for the site's keyless signer"
  fi
}

# begin_on_active STRATEGY VERB: resume the open transaction, or open one
# on the active slot (begin takes the package deployed there as the fallback).
begin_on_active() {
  check_open "$1"
  [ -z "$(txn id)" ] || return 0
  local active
  active=$(active_slot)
  [ -n "$active" ] || refuse 3 "no active slot: $1 $2 the active slot (kubectl bundle-slot list; kubectl bundle-switch to SLOT)"
  x "$BEGIN_ARGS -q" kb "$JOURNAL" begin --strategy "$1" --package "$PACKAGE" --active "$active"
}

# resume RECOVER RECOVERY_PHASE: what a previous run left decides what
# happens now: inside the recovery it is finished by the function RECOVER,
# a committed update is closed, a failed step is recovered.
resume() {
  local recover_fn="$1" recovery="$2"
  case "$(txn phase)" in
    "$recovery" | RESTORED)
      if done_phase "$recovery"; then
        "$recover_fn" "resuming after $recovery (done): the restored slot $(txn slots.active) is gated again"
      else
        "$recover_fn" "resuming an interrupted $recovery"
      fi ;;
    COMMITTED) kb "$JOURNAL" end -q; pass "update committed"; finish 0 ;;
  esac
  if [ "$(txn status)" = "failed" ]; then
    "$recover_fn" "$(txn phase) failed before: $(txn lastError)"
  fi
}

# offline_check: before the first step of an update, refuse (exit 3) while
# a public registry still answers, as offline-run.sh does. Off unless the
# site asks: SKIP_OFFLINE_CHECK=1 (the caller enforces isolation and
# monitors egress: recorded, nothing probed), else --offline-wait SECONDS,
# else $OFFLINE_WAIT_SECONDS, else config.yaml's offline.waitSeconds (the
# plugin reads it, and the probed endpoints). The plugin records the mode
# in the history of the open transaction. A refused update that changed
# nothing is closed; one resumed past its first step stays open, and
# re-running this script once offline resumes it.
offline_check() {
  local args="" rc=0
  if [ "${SKIP_OFFLINE_CHECK:-0}" = "1" ]; then
    push args --skip
  elif [ -n "$OFFLINE_WAIT" ]; then
    push args --wait "$OFFLINE_WAIT"
  elif [ -n "${OFFLINE_WAIT_SECONDS:-}" ]; then
    push args --wait "$OFFLINE_WAIT_SECONDS"
  fi
  local out
  out=$(x "$args" "$JOURNAL" offline-check) || rc=$?
  if [ "$rc" -eq 0 ]; then
    case "$out" in
      "offline: off"*) ;;
      *) pass "isolation ${out#offline: }" ;;
    esac
    return 0
  fi
  out=${out#offline: }
  fail "isolation ${out:-check failed (see above)}"
  if ! done_phase VERIFIED; then
    kb "$JOURNAL" abort -q || true
    kb "$JOURNAL" end -q || { fail "closing the transaction"; finish 3 "the transaction could not be closed"; }
    finish "$rc" "the offline check refused; nothing was changed and the transaction is closed: run again once the uplink is cut"
  fi
  echo "once offline, run: $(rerun_command)" >&2
  finish "$rc" "the offline check refused; the transaction stays open"
}

# active_slot prints the active slot from the slot records alone (no
# docker call: a rejected package must not touch the site at all).
active_slot() {
  "$SLOT" list -o 'jsonpath={[?(@.active==true)].name}'
}

# other_slot SLOT: the slot blue/green builds next to SLOT: the other one
# of config.yaml's slots: (a and b unless it names others).
other_slot() {
  "$SLOT" other "$1"
}

# confirm_losses SLOT WHAT: before WHAT discards SLOT, list what it holds
# (PersistentVolumeClaims, registry content), recorded in the journal; when
# there is any, a terminal asks, and without one it refuses unless --yes was
# given. A refusal changes nothing: exit with its code (2 names --yes).
confirm_losses() {
  local rc=0
  x "$YES_ARGS" "$SLOT" losses "$1" || rc=$?
  [ "$rc" -eq 0 ] && return 0
  if [ "$rc" -ne 1 ] && [ "$rc" -ne 2 ]; then
    # Not a question: the list could not be made or recorded (a full disk,
    # the state dir unwritable, a conflict), or the discard is refused (a
    # workload cluster the slot's destroy would leave running, unowned).
    # --yes would not help.
    fail "$2: what slot $1 holds could not be listed and recorded, or its discard is refused (kubectl bundle-slot losses exited $rc: the error above says why); nothing was changed"
    echo "once that is fixed (a full disk: free space in the state dir), run again: $RERUN_CMD" >&2
    finish "$rc" "the list of what slot $1 holds could not be written: nothing was changed"
  fi
  fail "$2 would discard what slot $1 holds (listed above); nothing was changed"
  finish "$rc" "not confirmed: run again with --yes to discard it"
}
