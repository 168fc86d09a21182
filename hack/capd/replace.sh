#!/usr/bin/env bash
# replace.sh: experiment (b) of issue 29 on real Cluster API and CAPD:
# machine replacement by an in-place change of what the package gives the
# providers.
#
# Management cluster kb-capd-a creates CAPD workload cluster kb-capd-wl
# (one control-plane machine) and the bench workload runs there under a
# request loop. Then the change an in-place update of such a package
# applies: a new DockerMachineTemplate (templates are immutable, so a
# changed machine template is a new one) and the KubeadmControlPlane
# pointed at it. Measured: whether the machine is replaced (the Machines
# and containers before and after), how long the rollout takes, and how
# long the workload is unreachable for a client that tries each running
# machine in turn (loop_start_cluster in lib.sh).
#
#   hack/docker/ensure.sh run hack/capd/replace.sh
set -o errexit -o nounset -o pipefail
# shellcheck source=hack/capd/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mgmt=kb-capd-a
wl=kb-capd-wl
capd_begin

mgmt_create "$mgmt"
wl_up "$mgmt" "$wl"
node=$wl_node
loop_start_cluster "$wl" "$work/loop.txt"
loop_baseline "$work/loop.txt" "the change"
old_machine=$(mk "$mgmt" get machines -o jsonpath='{.items[0].metadata.name}')
containers "$wl" >"$work/containers-before.txt"

# --- the in-place change: a new machine template, KCP pointed at it ---
t=$(now)
t_ms=$(($(now) / 1000000))
wl_retemplate "$mgmt" "$wl"
# Done when the old Machine is gone and one Running Machine is left.
deadline=$(($(date +%s) + 900))
t_new=
while :; do
  machines=$(mk "$mgmt" get machines -o jsonpath='{range .items[*]}{.metadata.name}={.status.phase} {end}' 2>/dev/null || true)
  if [ -z "$t_new" ] && [ "$(echo "$machines" | wc -w)" -ge 2 ]; then
    t_new=$(secs "$t")
  fi
  if [ "$(echo "$machines" | wc -w)" = 1 ] && [[ $machines != "$old_machine="* ]] && [[ $machines == *=Running* ]]; then
    break
  fi
  [ "$(date +%s)" -lt "$deadline" ] || {
    mk "$mgmt" get machines,kcp -o wide >&2 || true
    die "the rollout did not end in 900 s (machines: $machines)"
  }
  sleep 2
done
result "second Machine created after (s)" "${t_new:-not seen}"
result "rollout: old Machine gone, new one Running after (s)" "$(secs "$t")"
sleep 20
node2=$(wl_nodes "$wl" | head -1)
wk "$node2" wait --for=condition=Available deployment/workload --timeout=300s >/dev/null 2>&1 || true
sleep 10
loop_stop "$work/loop.txt"
read -r ok fail < <(loop_count "$work/loop.txt" "$t_ms")
result "loop from the change on (ok failed)" "$ok $fail"
result "longest run of failed requests (s)" "$(loop_longest_outage "$work/loop.txt" "$t_ms")"
containers "$wl" >"$work/containers-after.txt"
result "Machines before / after" "$old_machine / $(mk "$mgmt" get machines -o jsonpath='{.items[*].metadata.name}')"
result "control-plane container before / after" "$node / $node2"
result "workload pods ready after" "$(wk "$node2" get deployment workload -o jsonpath='{.status.readyReplicas}/{.spec.replicas}' 2>/dev/null || echo '?')"
result "load average at end" "$(load_line)"
say "replace: done"
