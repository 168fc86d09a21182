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
#   3. the switch: the loop's target moves to slot b's workload; failed
#      requests across it (goal 0);
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

# --- 3. the switch: the workload's clients move to slot b's ---
t_ms=$(now_ms)
echo "$url_b" >"$work/active-url.new"
mv "$work/active-url.new" "$work/active-url"
sleep 20
loop_report "$work/loop.txt" "across the switch (20 s)" "$t_ms"

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
