#!/usr/bin/env bash
# hack/mutations/run.sh [NAME...]: does the in-process model find real bugs?
#
# Each NAME.patch here reverts one fix (docs/invariant.md lists them). For
# each (default: all, after a run on the unmutated tree), the committed tree
# is copied to a scratch directory (git archive HEAD: nothing of the
# working copy), the patch applied, and TestModel run there with a fixed
# seed and budget and the kept regressions off, so that only new random
# sequences can find it. Each run's outcome goes to results/NAME.txt, and
# the table between the markers in docs/invariant.md is regenerated from
# table.txt (what each patch reverts) and the results.
#
#   KB_MODEL_SEED (default 1), KB_MODEL_OPS (default 60000) and
#   KB_MODEL_BUDGET (default 170s) are passed to TestModel, as make test
#   runs it. TABLE_ONLY=1 regenerates the table from the kept results.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
seed=${KB_MODEL_SEED:-1}
ops=${KB_MODEL_OPS:-60000}
budget=${KB_MODEL_BUDGET:-170s}
mkdir -p "$here/results"

run_one() {
  local name=$1 scratch log
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/kb-mutation-XXXXXX")
  log="$here/results/$name.log"
  git -C "$repo" archive HEAD | tar -x -C "$scratch"
  if [ "$name" != none ]; then
    patch -s -p1 -d "$scratch" <"$here/$name.patch"
  fi
  if [ "$name" != none ] && ! grep -q '^+++ b/internal/' "$here/$name.patch"; then
    # A script's rule: the model runs the plugins, not the scripts.
    rm -rf "$scratch"
    printf 'found=\nviolation=\nsummary=\nrc=\nscripts=yes\n' >"$here/results/$name.txt"
    echo "$name: a script's rule: not run in-process" >&2
    return 0
  fi
  echo "$name: TestModel seed $seed, $ops operations or $budget" >&2
  local rc=0
  (cd "$scratch" && KB_MODEL_SEED=$seed KB_MODEL_OPS=$ops KB_MODEL_BUDGET=$budget KB_MODEL_REPLAY=0 KB_MODEL_SHRINK=0 \
    CGO_ENABLED=0 go test -trimpath -count=1 -timeout 30m -run '^TestModel$' -v ./internal/model) >"$log" 2>&1 || rc=$?
  rm -rf "$scratch"
  local found violation summary
  found=$(grep -m1 -o 'FOUND: .*' "$log" || true)
  violation=$(grep -m1 -o 'VIOLATION: .*' "$log" | sed 's/^VIOLATION: seed [0-9]* (KB_MODEL_SEED=[0-9]*), sequence seed [0-9]*: //' | cut -c1-220 || true)
  summary=$(grep -m1 -o 'TestModel: [0-9]* sequences, [0-9]* operations in [^ ]* ([0-9]* ops/s' "$log" || true)
  {
    echo "found=$found"
    echo "violation=$violation"
    echo "summary=$summary"
    echo "rc=$rc"
    echo "load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
  } >"$here/results/$name.txt"
  echo "$name: ${found:-not caught} ($summary)" >&2
}

if [ -z "${TABLE_ONLY:-}" ]; then
  if [ $# -eq 0 ]; then
    set -- none
    for p in "$here"/*.patch; do
      p=${p##*/}
      set -- "$@" "${p%.patch}"
    done
  fi
  for name in "$@"; do run_one "$name"; done
fi

# The table: one row per line of table.txt (NAME|fix reverted|mutation),
# with what results/NAME.txt says.
field() { sed -n "s/^$2=//p" "$here/results/$1.txt" 2>/dev/null; }
{
  echo "| fix reverted | mutation (hack/mutations/NAME.patch) | caught | first violation | operations (sequences) | time |"
  echo "|---|---|---|---|---|---|"
  while IFS='|' read -r name fix what; do
    case "$name" in ''|'#'*) continue ;; esac
    if [ ! -f "$here/results/$name.txt" ]; then
      echo "| $fix | $what (\`$name\`) | not measured | | | |"
      continue
    fi
    found=$(field "$name" found) violation=$(field "$name" violation) summary=$(field "$name" summary)
    if [ "$(field "$name" scripts)" = yes ]; then
      echo "| $fix | $what (\`$name\`) | not in reach | the model runs the plugins, not the scripts: TestInvariant's (process-level) to find (below: caught, 12 sequences) | | |"
    elif [ "$name" != none ] && [ -n "$found" ] && [ "$violation" = "$(field none violation)" ] && [ "${found%, *}" = "$(field none found | sed 's/, [^,]*$//')" ]; then
      # The unmutated tree's own first violation, at the same operation:
      # the mutation changed nothing the sequences reached.
      nops=$(echo "$found" | sed -n 's/.* \([0-9]*\) operations.*/\1/p')
      echo "| $fix | $what (\`$name\`) | no | the unmutated tree's own first violation, at the same operation (not reached) | $nops | |"
    elif [ -n "$found" ]; then
      # FOUND: I1 after 12 sequences, 345 operations, 2.1s
      seqs=$(echo "$found" | sed -n 's/.* after \([0-9]*\) sequences.*/\1/p')
      nops=$(echo "$found" | sed -n 's/.* \([0-9]*\) operations.*/\1/p')
      took=$(echo "$found" | sed -n 's/.* operations, \(.*\)$/\1/p')
      echo "| $fix | $what (\`$name\`) | **yes** | ${violation//|/\\|} | $nops ($seqs) | $took |"
    else
      nops=$(echo "$summary" | sed -n 's/.* sequences, \([0-9]*\) operations.*/\1/p')
      took=$(echo "$summary" | sed -n 's/.* operations in \([^ ]*\) .*/\1/p')
      echo "| $fix | $what (\`$name\`) | no | none within the budget | $nops | $took |"
    fi
  done <"$here/table.txt"
} >"$here/results/table.md"
doc="$repo/docs/invariant.md"
awk -v table="$here/results/table.md" '
  /<!-- mutations:begin -->/ { print; while ((getline l < table) > 0) print l; skip = 1; next }
  /<!-- mutations:end -->/ { skip = 0 }
  !skip' "$doc" >"$doc.tmp" && mv "$doc.tmp" "$doc"
echo "table regenerated in docs/invariant.md (seed $seed, $ops operations or $budget)" >&2
