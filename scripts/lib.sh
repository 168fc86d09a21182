# shellcheck shell=sh disable=SC3043
# lib.sh: what the strategy scripts share. Sourced by in-place.sh,
# blue-green.sh and recreate.sh; holds no state (the journal does) and no
# rule: each run is a loop over `kubectl bundle-journal advance`, which
# asks the planner for the run's next step, runs it and says what it did.
# POSIX sh (dash, bash 3.2 as macOS's /bin/sh, bash --posix): no arrays,
# no [[, no pipefail, no process substitution, no {fd} redirection;
# `local` is used, as every one of them has it.

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

# refuse CODE MSG...: say MSG as kubectl says errors ("error: MSG") and
# exit with CODE of the table (docs/exit-codes.md): 2 usage, 3 a
# precondition missing, 4 a conflict.
refuse() {
  local code="$1"
  shift
  echo "error: $*" >&2
  exit "$code"
}

# The scripts' own arguments: help needs no plugin.
case "${1:-}" in
  "" | -h | --help | help) ;;
  *) require_plugins ;;
esac

# SELF is this script, absolute: the commands the run prints name it. The
# plugins name the scripts in the commands they print by this directory.
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
export KUBECTL_BUNDLE_SCRIPTS_DIR="${SELF%/*}"

# drive STRATEGY OP ARGS...: the run, as a loop. Each call of the plugin
# makes the run's next step (it names the step and prints what it runs;
# this script evaluates no command line) and exits 10 while more remain,
# else with the run's own code after its summary. It checks the arguments
# (and prints the plan of --dry-run: nothing changes) first. Then this
# shell holds the run lock on descriptor 9 for the whole run: every plugin
# call inherits it (so they are part of the run), the kernel closes it when
# the script dies (a killed run's re-run takes over at once), and while it
# lives every other mutating command refuses (exit 4) naming this pid and
# the line that re-runs the script. A fixed descriptor: POSIX sh has no
# {VAR} redirection (bash before 4.1, macOS's /bin/sh, reads it as a command).
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
