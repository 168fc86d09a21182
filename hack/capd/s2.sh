#!/usr/bin/env bash
# s2.sh: experiment (c) of issue 29 on real Cluster API and CAPD: the S2
# blue-green update, where the candidate slot provisions its own workload
# cluster while the active slot's serves.
#
# Slot a (kind slot of the plugins: management cluster kb-capd-a) runs
# workload cluster kb-capd-wl-a with the bench workload under a request
# loop that follows the switch (each request goes to the workload of the
# slot the switch points at). Then:
#
#   1. kubectl bundle-slot preflight b: its memory prediction for a
#      second slot (what slot a uses, measured by docker stats);
#   2. slot b is built beside it: management cluster kb-capd-b, the
#      providers, workload cluster kb-capd-wl-b and the workload; measured:
#      failed requests against slot a's workload meanwhile (goal 0), the
#      time until kb-capd-wl-b is Available, slot b's memory (peak, sampled
#      every 5 s, and at the end) against the prediction;
#   3. the switch, by the plugins: kubectl bundle-switch to b (slot b's
#      gate recorded first), the loop's target moved to slot b's workload;
#      failed requests across it (goal 0); the workload context
#      kind-kb-capd-wl, merged by kubectl bundle-slot workload-kubeconfig
#      while slot a served, must name kb-capd-wl-b's nodes after the
#      switch, kb-capd-wl-a's after kubectl bundle-switch back, and
#      kb-capd-wl-b's again after the switch to b and its accept;
#   4. the retire (accept): kubectl bundle-slot losses a, then
#      kubectl bundle-slot destroy a --yes; failed requests against slot b's
#      workload meanwhile.
#
#   hack/docker/ensure.sh run hack/capd/run.sh s2
set -o errexit -o nounset -o pipefail
# shellcheck source=hack/capd/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

a=kb-capd-a
b=kb-capd-b
capd_begin_site

# --- slot a serving ---
mgmt_create "$a"
wl_up "$a" kb-capd-wl-a
echo "$wl_url" >"$work/active-url"
loop_start "@$work/active-url" "$work/loop.txt"
loop_baseline "$work/loop.txt" "slot b is built"
export KUBECONFIG="$KB_CAPD_KUBECONFIG"
kind_slot_state a
# The switch's gate: the providers run (no registry here: the slots'
# records name none, so the switch moves the contexts only).
providers_gate
plugin kubectl-bundle-gate --slot a --record -f "$work/gate.yaml" --timeout 2m || die "slot a's gate"
plugin kubectl-bundle-switch to a || die "switch to a"
plugin kubectl-bundle-switch accept || die "accept a"
plugin kubectl-bundle-slot workload-kubeconfig --merge || die "slot workload-kubeconfig --merge (slot a)"
# wl_ctx_check WHEN SLOT: context kind-kb-capd-wl reaches the workload
# cluster of SLOT (its nodes are kb-capd-wl-SLOT-*).
wl_ctx_check() {
  local nodes server cl
  nodes=$(kubectl --context kind-kb-capd-wl get nodes -o name 2>"$work/wl-ctx.err" | sed 's|^node/||' | tr '\n' ' ')
  cl=$(kubectl config view -o jsonpath='{.contexts[?(@.name=="kind-kb-capd-wl")].context.cluster}')
  server=$(kubectl config view -o jsonpath="{.clusters[?(@.name==\"$cl\")].cluster.server}")
  result "context kind-kb-capd-wl $1: nodes / server" "${nodes:-none} / $server"
  case "$nodes" in
  *"kb-capd-wl-$2-"*) ;;
  *) die "context kind-kb-capd-wl $1 reaches ${nodes:-no node} ($(cat "$work/wl-ctx.err")), not slot $2's workload cluster kb-capd-wl-$2" ;;
  esac
}
wl_ctx_check "while slot a serves" a
mem_a=$(mem_of "^($a-|kb-capd-wl-a-)")
result "memory: slot a (management + workload cluster) (MiB)" "$mem_a"

# --- 1. the preflight's prediction ---
kubectl-bundle-slot preflight b >"$work/preflight.txt" 2>&1 || true
cat "$work/preflight.txt" >&2
result "preflight b: memory" "$(grep -i 'memory' "$work/preflight.txt" | grep -v 'Docker [0-9]' | head -1 | sed 's/^ *//')"

# --- 2. slot b built beside it ---
t_ms=$(now_ms)
t=$(now)
mem_sampler_start "^($b-|kb-capd-wl-b-)" "$work/mem-b.txt"
mgmt_create "$b"
wl_up "$b" kb-capd-wl-b
url_b=$wl_url
result "slot b: workload cluster Available after slot b's build began (s)" "$(secs "$t")"
sleep 10
mem_sampler_stop
result "memory: slot b peak while built (sampled every 5 s) / at the end (MiB)" "$(mem_peak "$work/mem-b.txt") / $(mem_of "^($b-|kb-capd-wl-b-)")"
result "memory: slot a at the end (MiB)" "$(mem_of "^($a-|kb-capd-wl-a-)")"
result "memory: both slots, all containers (MiB)" "$(mem_of '^kb-capd-')"
loop_report "$work/loop.txt" "against slot a while slot b was built" "$t_ms"

# --- 3. the switch: the plugins move the contexts, the workload's
# clients move to slot b's ---
kind_slot_state b
plugin kubectl-bundle-gate --slot b --record -f "$work/gate.yaml" --timeout 2m || die "slot b's gate"
t_ms=$(now_ms)
t=$(now)
rc=0
plugin kubectl-bundle-switch to b || rc=$?
result "switch to b: exit / duration (s)" "$rc / $(secs "$t")"
[ "$rc" = 0 ] || die "switch to b exited $rc"
echo "$url_b" >"$work/active-url.new"
mv "$work/active-url.new" "$work/active-url"
wl_ctx_check "after the switch to b" b
sleep 20
loop_report "$work/loop.txt" "across the switch (20 s)" "$t_ms"

# The revert during the soak, and the switch again.
t=$(now)
rc=0
plugin kubectl-bundle-switch back --gate "$work/gate.yaml" --gate-timeout 2m || rc=$?
result "switch back (b -> a): exit / duration (s)" "$rc / $(secs "$t")"
[ "$rc" = 0 ] || die "switch back exited $rc"
wl_ctx_check "after the switch back to a" a
plugin kubectl-bundle-switch to b || die "switch to b, again"
plugin kubectl-bundle-switch accept || die "accept b"
wl_ctx_check "after the switch to b again and its accept" b

# --- 4. the retire of slot a ---
kubectl-bundle-slot losses a >"$work/losses.txt" 2>&1 || true
cat "$work/losses.txt" >&2
result "slot losses a: workload clusters listed" "$(grep -oE 'kb-capd-wl-[a-z]+' "$work/losses.txt" | sort -u | tr '\n' ' ')"
t_ms=$(now_ms)
t=$(now)
rc=0
plugin kubectl-bundle-slot destroy a --yes || rc=$?
result "retire (slot destroy a): exit / duration (s)" "$rc / $(secs "$t")"
sleep 20
loop_stop "$work/loop.txt"
loop_report "$work/loop.txt" "against slot b during the retire and 20 s" "$t_ms"
result "containers left of slot a / of slot b" "$(docker ps -a --format '{{.Names}}' | grep -cE "^($a-|kb-capd-wl-a-)" || true) / $(docker ps --format '{{.Names}}' | grep -cE "^($b-|kb-capd-wl-b-)" || true)"
loop_report "$work/loop.txt" "in all"
result "load average at end" "$(load_line)"
say "s2: done"
