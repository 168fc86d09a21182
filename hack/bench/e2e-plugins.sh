#!/usr/bin/env bash
# Benchmarks what a plugin process costs the e2e suite: a fixed set of its
# scripts (a strategy each way, the run lock, a kind slot), run with the
# plugins as binaries of their own (as the suite runs them, Cluster API
# linked into the switch plugin only) and as copies of the test binary
# (the baseline: every plugin and the harness linked in), alternating, in
# one run. The programs are built once for each way before the runs
# (KB_E2E_PROGS), so a run measures the scripts, not the links (about 50
# CPU-seconds, once per suite). Prints the CPU time (user + system, the
# whole process tree) of each run and the ratio of the medians; plus what
# one `journal --help` costs each way (perf stat: page faults, task clock).
#
#   BENCH_RUNS     runs each way (default 2)
#   BENCH_SCRIPTS  the scripts, a -run pattern's alternatives (default below)
#   KUBEBUILDER_ASSETS, ZARF as for the suite (default bin/testbin)
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
runs="${BENCH_RUNS:-2}"
scripts="${BENCH_SCRIPTS:-strategy_in_place|strategy_blue_green|guard_run_lock|slot_kind}"
export KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$root/bin/testbin}" ZARF="${ZARF:-$root/bin/testbin/zarf}" CGO_ENABLED=0
[[ -x "$KUBEBUILDER_ASSETS/kube-apiserver" && -x "$ZARF" ]] || { echo "kube-apiserver or zarf missing under $KUBEBUILDER_ASSETS: run make testbin" >&2; exit 3; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$root/e2e"
go test -trimpath -vet=off -c -o "$work/e2e.test" .

cpu() { # MODE -> CPU seconds of one run of the scripts (fails the bench if a script fails)
  /usr/bin/time -o "$work/time" -f '%U %S' env KB_E2E_PLUGINS="$1" KB_E2E_PROGS="$work/progs-$1" "$work/e2e.test" -test.count=1 -test.timeout=30m \
    -test.run "TestScripts/($scripts)\$" >"$work/log" 2>&1 ||
    { cat "$work/log" >&2; echo "the scripts failed ($1)" >&2; exit 1; }
  grep -q '^PASS' "$work/log" || { cat "$work/log" >&2; echo "no PASS ($1)" >&2; exit 1; }
  awk '{printf "%.1f", $1 + $2}' "$work/time"
}
median() { sort -n | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

for mode in testbinary own; do # build each way's programs (and warm the caches)
  mkdir -p "$work/progs-$mode"
  KB_E2E_PLUGINS="$mode" KB_E2E_PROGS="$work/progs-$mode" "$work/e2e.test" -test.run '^$' >/dev/null
done
own=() base=()
for i in $(seq "$runs"); do
  base+=("$(cpu testbinary)"); own+=("$(cpu own)")
  echo "run $i: test-binary plugins ${base[-1]} CPU-s, own plugin binaries ${own[-1]} CPU-s" >&2
done
b="$(printf '%s\n' "${base[@]}" | median)" o="$(printf '%s\n' "${own[@]}" | median)"
echo "scripts ($scripts), median of $runs: test-binary plugins $b CPU-s, own plugin binaries $o CPU-s, ratio $(awk -v o="$o" -v b="$b" 'BEGIN{printf "%.2f", o/b}')"

if command -v perf >/dev/null; then
  mkdir -p "$work/own" && go build -trimpath -o "$work/own/" "$root/cmd/kubectl-bundle-journal"
  mkdir -p "$work/tb" && ln -s "$work/e2e.test" "$work/tb/kubectl-bundle-journal"
  for b in "$work/tb/kubectl-bundle-journal" "$work/own/kubectl-bundle-journal"; do
    GOGC=400 perf stat -r 20 -x, -e task-clock,page-faults "$b" --help 2>&1 >/dev/null |
      awk -F, -v b="${b#"$work"/}" 'BEGIN{printf "journal --help (%s):", b} {printf " %s %s", $3, $1} END{print ""}'
  done
fi
