# e2e-check.sh: how the kind core checks (sourced by hack/e2e-kind.sh, and
# by e2e_check_test.go): one helper, so that every check that fails logs
# the command, its exit code and its whole output, and a red run names its
# cause.
#
#   check WHAT [EXPECT...] -- CMD [ARG...]
#
# CMD runs once, to its end, its stdout and stderr kept in files under
# $check_dir; then each EXPECT is tested on what it printed:
#
#   --rc N        it exits N: a number, nonzero, or any (default 0)
#   --has ERE     a line of its output matches ERE (grep -E)
#   --lacks ERE   no line of its output matches ERE
#   --all ERE     every line of its output matches ERE
#   --line TEXT   a line of its output is TEXT
#   --is TEXT     its output is TEXT (trailing newlines aside)
#   --both        the EXPECTs read stdout and stderr together (2>&1);
#                 without it, stdout
#
# A check that passes prints nothing and leaves what the EXPECTs read (its
# stdout; with --both, its stdout and stderr) in $checked.
# One that fails logs on stderr "e2e-kind: FAIL: WHAT", what was expected,
# the command, its exit code and its whole stdout and stderr, and exits 1.
#
# Never `CMD | grep -q ...` under pipefail: grep -q exits at its first
# match, and CMD, still writing the lines after it, dies of SIGPIPE (exit
# 141), which fails the check although the line was there. That is how
# `slot describe a | grep -Eq 'seeded +krops:latest ...'` failed on a
# loaded machine (issue 31): describe writes its table row by row.
# shellcheck shell=bash

# fail MESSAGE: the run is red, for MESSAGE.
fail() {
  echo "e2e-kind: FAIL: $*" >&2
  exit 1
}

# on_err CODE COMMAND LINE, the ERR trap: a command that fails outside a
# check is named with its exit code and line (its output is in the log).
on_err() {
  echo "e2e-kind: FAIL: exit code $1 from: $2 (line $3)" >&2
}

# in_dir DIR CMD [ARG...]: CMD run in DIR (check runs commands, not cd).
in_dir() (
  cd "$1" || exit
  shift
  "$@"
)

# quoted ARG...: the words as a shell reads them back, plain where they
# can be.
quoted() {
  local a q=() sq="'" plain='^[A-Za-z0-9_./:=@%+,-]+$'
  for a in "$@"; do
    if [[ $a =~ $plain ]]; then
      q+=("$a")
    else
      q+=("'${a//$sq/$sq\\$sq$sq}'")
    fi
  done
  echo "${q[*]}"
}

check_n=0
check() {
  local what=${1:?check WHAT [EXPECT...] -- CMD [ARG...]} rc_want=0 both='' out err rc=0 i
  local -a expect=() failed=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case $1 in
    --rc) rc_want=${2:?--rc N|nonzero|any} && shift 2 ;;
    --both) both=1 && shift ;;
    --has | --lacks | --all | --line | --is) expect+=("$1" "${2?$1 needs its argument}") && shift 2 ;;
    *)
      echo "check $what: unknown EXPECT $1" >&2
      exit 2
      ;;
    esac
  done
  if [ "${1:-}" != -- ] || [ $# -lt 2 ]; then
    echo "check $what: no -- CMD" >&2
    exit 2
  fi
  shift
  : "${check_dir:?check: set check_dir}"
  mkdir -p "$check_dir"
  check_n=$((check_n + 1))
  out="$check_dir/$BASHPID-$check_n.out" err="$check_dir/$BASHPID-$check_n.err"
  if [ -n "$both" ]; then
    "$@" >"$out" 2>&1 </dev/null || rc=$?
    : >"$err"
  else
    "$@" >"$out" 2>"$err" </dev/null || rc=$?
  fi
  case $rc_want in
  any) ;;
  nonzero) [ "$rc" != 0 ] || failed+=("exit code nonzero") ;;
  *) [ "$rc" = "$rc_want" ] || failed+=("exit code $rc_want") ;;
  esac
  for ((i = 0; i < ${#expect[@]}; i += 2)); do
    case ${expect[i]} in
    --has) grep -Eq -- "${expect[i + 1]}" "$out" || failed+=("a line matching: ${expect[i + 1]}") ;;
    --lacks) ! grep -Eq -- "${expect[i + 1]}" "$out" || failed+=("no line matching: ${expect[i + 1]}") ;;
    --all) ! grep -Evq -- "${expect[i + 1]}" "$out" || failed+=("every line matching: ${expect[i + 1]}") ;;
    --line) grep -Fxq -- "${expect[i + 1]}" "$out" || failed+=("the line: ${expect[i + 1]}") ;;
    --is) [ "$(<"$out")" = "${expect[i + 1]}" ] || failed+=("the output: ${expect[i + 1]}") ;;
    esac
  done
  if [ ${#failed[@]} = 0 ]; then
    # shellcheck disable=SC2034 # read by the callers
    checked=$(<"$out")
    return 0
  fi
  {
    echo "e2e-kind: FAIL: $what"
    for i in "${failed[@]}"; do echo "  expected $i"; done
    echo "  command: $(quoted "$@")"
    echo "  exit code: $rc"
    if [ -n "$both" ]; then
      echo "--- its output (stdout and stderr, $(wc -l <"$out") lines):"
      cat "$out"
    else
      echo "--- its stdout ($(wc -l <"$out") lines):"
      cat "$out"
      echo "--- its stderr ($(wc -l <"$err") lines):"
      cat "$err"
    fi
    echo "--- end of its output"
  } >&2
  exit 1
}
