#!/usr/bin/env bash
# survival.sh: experiment (a) of issue 29 on real Cluster API and CAPD.
#
# Management cluster kb-capd-a (kind, the bench's Cluster API) creates CAPD
# workload cluster kb-capd-wl (one control-plane machine, its haproxy load
# balancer); the bench workload runs there (two replicas behind NodePort
# 30080) under a request loop from the host over the Docker network. Then:
#
#   1. kind delete cluster kb-capd-a: do the workload's containers keep
#      running (same container IDs, same start times) and serving (failed
#      requests of the loop while and after the management cluster goes)?
#   2. a new kb-capd-a, the same providers, the same Cluster manifest
#      (same names): does it adopt the running containers, conflict with
#      them, or delete them? Counted from Docker (the kb-capd-wl containers
#      before and after) and from Cluster API (its Machines).
#
# Prints its numbers (NAME VALUE lines, also in $KB_CAPD_WORK/results.txt)
# and exits 0 when every step ran; the answers are in the numbers, and the
# checks that fail are those the bench itself must meet (the workload
# cluster becomes Available; the loop works before the deletion).
#
#   hack/docker/ensure.sh run hack/capd/survival.sh
#
# KB_IMAGES_ENV / KB_CAPI_ENV name an images.env / capi.env to use instead
# of running hack/images/build.sh / hack/images/capi.sh; KB_CAPD_AFTER_S
# is how long each phase watches (default 60).
set -o errexit -o nounset -o pipefail
# shellcheck source=hack/capd/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mgmt=kb-capd-a
wl=kb-capd-wl
watch_s=${KB_CAPD_AFTER_S:-60}
capd_begin

# --- the management cluster and its workload cluster ---
mgmt_create "$mgmt"
wl_up "$mgmt" "$wl"
node=$wl_node
url=$wl_url
[ "$(wl_nodes "$wl" | wc -l)" = 1 ] || die "want 1 control-plane container of $wl, found: $(wl_nodes "$wl" | tr '\n' ' ')"
loop_start "$url" "$work/loop.txt"
loop_baseline "$work/loop.txt" "the deletion"
containers "$wl" >"$work/containers-before.txt"
result "$wl containers before" "$(wc -l <"$work/containers-before.txt")"
result "memory: $mgmt node / $wl node (MiB)" "$(docker stats --no-stream --format '{{.Name}} {{.MemUsage}}' "$mgmt-control-plane" "$node" | awk '{printf "%s=%s ", $1, $2}')"
mk "$mgmt" get machines -o custom-columns=NAME:.metadata.name,NODE:.status.nodeRef.name,PHASE:.status.phase --no-headers >"$work/machines-before.txt"

# --- 1. delete the management cluster ---
t=$(now)
t_del_ms=$(($(now) / 1000000))
kind delete cluster --name "$mgmt" --kubeconfig "$work/$mgmt.kubeconfig" >/dev/null 2>&1 || die "kind delete cluster $mgmt"
result "$mgmt: kind delete (s)" "$(secs "$t")"
sleep "$watch_s"
read -r ok fail < <(loop_count "$work/loop.txt" "$t_del_ms")
result "loop from deletion on, ${watch_s} s (ok failed)" "$ok $fail"
containers "$wl" >"$work/containers-after-delete.txt"
same=$(same_lines "$work/containers-before.txt" "$work/containers-after-delete.txt")
result "$wl containers after deletion (running, same id and start)" "$(grep -c ' running ' "$work/containers-after-delete.txt" || true) ($same of $(wc -l <"$work/containers-before.txt") unchanged)"
wk "$node" get nodes --no-headers >"$work/nodes-after-delete.txt" 2>&1 || true
result "$wl node after deletion" "$(awk '{print $1, $2}' "$work/nodes-after-delete.txt" | tr '\n' ' ')"
result "$wl workload pods ready after deletion" "$(wk "$node" get deployment workload -o jsonpath='{.status.readyReplicas}/{.spec.replicas}' 2>/dev/null || echo '?')"

# --- 2. a new management cluster with the same names ---
t_new_ms=$(($(now) / 1000000))
mgmt_create "$mgmt"
t=$(now)
wl_apply "$mgmt" "$wl"
# What the providers do with the containers already there: watch for as
# long as a first creation took at most, or until Available.
if wl_wait_available "$mgmt" "$wl" 600 2>"$work/recreate-wait.txt"; then
  result "second $wl: Cluster Available after apply (s)" "$(secs "$t")"
else
  result "second $wl: Cluster Available after apply (s)" "not in 600 s"
fi
containers "$wl" >"$work/containers-after-recreate.txt"
mk "$mgmt" get machines -o custom-columns=NAME:.metadata.name,NODE:.status.nodeRef.name,PHASE:.status.phase --no-headers >"$work/machines-after.txt" 2>&1 || true
read -r ok fail < <(loop_count "$work/loop.txt" "$t_new_ms")
result "loop during the new management cluster (ok failed)" "$ok $fail"
result "$wl containers after the new cluster" "$(wc -l <"$work/containers-after-recreate.txt") ($(grep -c ' running ' "$work/containers-after-recreate.txt" || true) running)"
result "first control-plane container $node" "$(awk -v n="$node" '$1 == n {print $3, "started", $4}' "$work/containers-after-recreate.txt")"
result "Machines of the first / the second cluster" "$(awk '{print $1}' "$work/machines-before.txt" | tr '\n' ' ')/ $(awk '{print $1, $3}' "$work/machines-after.txt" | tr '\n' ' ')"
# The old machine's own admin kubeconfig names the load balancer: count
# how often it still reaches an API server that trusts it.
okk=0
err=
for _ in 1 2 3 4 5 6; do
  if out=$(wk "$node" get --raw /readyz 2>&1); then okk=$((okk + 1)); else err=$(echo "$out" | head -1 | cut -c1-160); fi
done
result "kubectl on $node through the load balancer (ok of 6)" "$okk${err:+ (last error: $err)}"
lb=$(docker ps --filter "label=io.x-k8s.kind.cluster=$wl" --filter label=io.x-k8s.kind.role=external-load-balancer --format '{{.Names}}')
if [ -n "$lb" ]; then
  result "load balancer $lb backends" "$(docker exec "$lb" cat /usr/local/etc/haproxy/haproxy.cfg | awk '$1 == "server" {printf "%s ", $2}')"
fi
loop_stop "$work/loop.txt"
read -r ok fail < <(loop_count "$work/loop.txt")
result "loop in all (ok failed)" "$ok $fail"
echo "--- containers before, after the deletion, after the new management cluster" >&2
cat "$work/containers-before.txt" "$work/containers-after-delete.txt" "$work/containers-after-recreate.txt" >&2
result "load average at end" "$(load_line)"
say "survival: done"
