#!/usr/bin/env bash
# recreate.sh: experiment (e) of issue 29 on real Cluster API and CAPD:
# recreate's TEARDOWN and BUILDING with live workload clusters.
#
# Slot a is a kind slot of the plugins (clusterPrefix kb-capd, so its
# management cluster is kb-capd-a; workloadClusters [kb-capd-wl], so its
# workload cluster is kb-capd-wl-a). Its management cluster creates two
# CAPD workload clusters, each running the bench workload under a request
# loop (each machine of the cluster tried in turn):
#
#   kb-capd-wl-a   named by config.yaml's workloadClusters, as the slot
#                  derives it;
#   kb-capd-extra  a Cluster of the same package whose name config.yaml
#                  does not list.
#
# TEARDOWN: kubectl bundle-slot losses a, which recreate.sh runs first,
# and kubectl bundle-slot destroy a --yes, the operator's retire (both
# refuse while kb-capd-extra is unnamed), then the destroy as recreate.sh's
# TEARDOWN step runs it (--force --yes, the real plugin). BUILDING is
# what the rebuild's deploy applies: a new kb-capd-a with the same
# providers and the same two Clusters. Measured: what happens to each
# cluster's containers during TEARDOWN and BUILDING, whether the rebuilt
# management cluster adopts, duplicates or deletes them, and how long each
# workload is unreachable.
#
#   hack/docker/ensure.sh run hack/capd/run.sh recreate
set -o errexit -o nounset -o pipefail
# shellcheck source=hack/capd/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mgmt=kb-capd-a
named=kb-capd-wl-a
extra=kb-capd-extra
capd_begin_site

# --- slot a: the management cluster, its two workload clusters ---
mgmt_create "$mgmt"
wl_up "$mgmt" "$named"
wl_up "$mgmt" "$extra"
loop_start_cluster "$named" "$work/loop-named.txt"
loop_start_cluster "$extra" "$work/loop-extra.txt"
loop_baseline "$work/loop-named.txt" "the teardown ($named)"
loop_baseline "$work/loop-extra.txt" "the teardown ($extra)"
result "memory: management / $named / $extra (MiB)" "$(mem_of "^$mgmt-control-plane\$") / $(mem_of "^$named-") / $(mem_of "^$extra-")"
containers "$named" >"$work/named-before.txt"
containers "$extra" >"$work/extra-before.txt"

export KUBECONFIG="$KB_CAPD_KUBECONFIG"
kind_slot_state a

# --- TEARDOWN ---
# What recreate.sh asks first (slot losses), and the destroy as the
# operator's retire runs it: both refuse while the management cluster
# holds a Cluster that workloadClusters does not name.
rc=0
kubectl-bundle-slot losses a >"$work/losses.txt" 2>&1 || rc=$?
cat "$work/losses.txt" >&2
result "slot losses a: exit / workload clusters listed" "$rc / $(grep -oE 'workload cluster kb-capd-[a-z-]+' "$work/losses.txt" | sort -u | sed 's/workload cluster //' | tr '\n' ' ')"
rc=0
kubectl-bundle-slot destroy a --yes >"$work/destroy-refused.txt" 2>&1 || rc=$?
cat "$work/destroy-refused.txt" >&2
result "slot destroy a --yes: exit / kind cluster still there" "$rc / $(kind get clusters 2>/dev/null | grep -c "^$mgmt\$" || true)"
# The teardown as recreate.sh's TEARDOWN step runs it (--force: the
# active slot), which is what every teardown did before the refusal.
t=$(now)
t_ms=$(now_ms)
rc=0
plugin kubectl-bundle-slot destroy a --force --yes || rc=$?
result "TEARDOWN (slot destroy a --force --yes): exit / duration (s)" "$rc / $(secs "$t")"
sleep 20
containers "$named" >"$work/named-teardown.txt"
containers "$extra" >"$work/extra-teardown.txt"
result "after TEARDOWN: $named containers (running)" "$(wc -l <"$work/named-teardown.txt") ($(grep -c ' running ' "$work/named-teardown.txt" || true))"
result "after TEARDOWN: $extra containers (running)" "$(wc -l <"$work/extra-teardown.txt") ($(grep -c ' running ' "$work/extra-teardown.txt" || true))"
loop_report "$work/loop-named.txt" "$named, TEARDOWN and 20 s" "$t_ms"
loop_report "$work/loop-extra.txt" "$extra, TEARDOWN and 20 s" "$t_ms"

# --- BUILDING: a new management cluster, the same two Clusters ---
t_b=$(now)
t_b_ms=$(now_ms)
mgmt_create "$mgmt"
wl_apply "$mgmt" "$named"
wl_apply "$mgmt" "$extra"
for w in "$named" "$extra"; do
  if wl_wait_available "$mgmt" "$w" 600 2>"$work/$w-wait.txt"; then
    result "BUILDING: $w Available after the build began (s)" "$(secs "$t_b")"
  else
    result "BUILDING: $w Available after the build began (s)" "not in 600 s"
  fi
done
# The rebuild's deploy runs the workload again in the new named cluster.
node=$(wl_nodes "$named" | head -1)
if [ -n "$node" ] && wk "$node" wait --for=condition=Ready node --all --timeout=300s >/dev/null 2>&1; then
  workload_deploy "$node" >/dev/null
  result "BUILDING: $named workload answering again after the build began (s)" "$(secs "$t_b")"
fi
sleep 10
containers "$named" >"$work/named-after.txt"
containers "$extra" >"$work/extra-after.txt"
result "after BUILDING: Machines" "$(mk "$mgmt" get machines -o jsonpath='{range .items[*]}{.spec.clusterName}/{.metadata.name}={.status.phase} {end}' 2>/dev/null)"
result "after BUILDING: $named containers (kept from before)" "$(awk '{print $1}' "$work/named-after.txt" | tr '\n' ' ')($(same_lines "$work/named-before.txt" "$work/named-after.txt") of $(wc -l <"$work/named-before.txt"))"
result "after BUILDING: $extra containers (kept from before)" "$(awk '{print $1}' "$work/extra-after.txt" | tr '\n' ' ')($(same_lines "$work/extra-before.txt" "$work/extra-after.txt") of $(wc -l <"$work/extra-before.txt"))"
lb=$(docker ps --filter "label=io.x-k8s.kind.cluster=$extra" --filter label=io.x-k8s.kind.role=external-load-balancer --format '{{.Names}}')
[ -z "$lb" ] || result "after BUILDING: $lb backends" "$(docker exec "$lb" cat /usr/local/etc/haproxy/haproxy.cfg | awk '$1 == "server" {printf "%s ", $2}')"
loop_stop "$work/loop-named.txt"
loop_stop "$work/loop-extra.txt"
loop_report "$work/loop-named.txt" "$named, BUILDING" "$t_b_ms"
loop_report "$work/loop-extra.txt" "$extra, BUILDING" "$t_b_ms"
loop_report "$work/loop-named.txt" "$named, TEARDOWN to the end" "$t_ms"
echo "--- containers before, after TEARDOWN, after BUILDING" >&2
cat "$work/named-before.txt" "$work/extra-before.txt" "$work/named-teardown.txt" "$work/extra-teardown.txt" "$work/named-after.txt" "$work/extra-after.txt" >&2
result "load average at end" "$(load_line)"
say "recreate: done"
