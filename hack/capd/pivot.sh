#!/usr/bin/env bash
# pivot.sh: experiment (d) of issue 29 on real Cluster API and CAPD: the
# S3 switch (kubectl bundle-switch to b --mode pivot, clusterctl's mover)
# and its undo (kubectl bundle-switch back), with a workload cluster
# serving under a request loop.
#
# Two management kind clusters, kb-capd-a and kb-capd-b, each with the
# bench's Cluster API and clusterctl's provider inventory as clusterctl
# init leaves it (mgmt_inventory in lib.sh): slot a the site's release
# (hack/tools/capi), slot b first an older one (hack/tools/capi-v1.13,
# built by hack/images/capi.sh too), then the site's, upgraded in place
# (mgmt_install over the older providers). Slot a creates workload
# cluster kb-capd-wl-a and the bench workload runs there; the request loop
# goes to the workload on its machine (NodePort), as the workload's users
# do. The site's slots are the plugins' existing provider on the two
# clusters' contexts (the switch moves the Cluster API objects; the kind
# provider would also move a registry alias, which this bench has no
# registry for). Measured:
#
#   1. preflight on real providers: slot b runs an older Cluster API
#      (core and kubeadm v1.13.6, CAPD v1.13.7): the switch must refuse,
#      exit 3, before anything is paused; then slot b's providers are
#      upgraded in place to the site's release (its time) and its gate
#      recorded again; and the load balancer template the DockerCluster
#      names is only on slot a (the mover would leave it behind): refused
#      too, then created on slot b as the refusal says;
#   2. the pivot a -> b: its duration, how long the Cluster stays paused on
#      each side (polled every ~0.5 s), failed workload requests, what
#      slot b's providers do with the machine (the same container, or a
#      new one), and how long until the Cluster is Available on b again
#      (its status is rebuilt, not moved);
#   3. the undo (switch back, b -> a): the same numbers;
#      (around 2 and 3: the workload cluster's context kind-<cluster>,
#      merged by kubectl bundle-slot workload-kubeconfig while slot a
#      serves, reaches the cluster after the pivot and after the undo);
#   4. what step 1b's refusal prevents: the load balancer template deleted
#      on the slot that manages the cluster, a control-plane machine
#      created (a rollout to a new machine template) and, once the
#      template is back and the new machine runs, the old one deleted
#      without it: the Machines, DockerMachines, load balancer backends,
#      CAPD's errors and the workload (KB_CAPD_TEMPLATE_S, default 180 s,
#      of each without the template).
#
#   hack/docker/ensure.sh run hack/capd/run.sh pivot
set -o errexit -o nounset -o pipefail
# shellcheck source=hack/capd/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

a=kb-capd-a
b=kb-capd-b
wl=kb-capd-wl-a
watch_s=${KB_CAPD_AFTER_S:-60}
capd_begin_site
# The older Cluster API for slot b is built (or taken from its cache)
# while slot a comes up.
capi_older >"$work/old-env.path" 2>"$work/old-env.log" &
old_pid=$!
# provider_images MGMT: the manager images MGMT's providers run.
provider_images() {
  mk "$1" get deployments -A -o jsonpath='{range .items[*]}{.spec.template.spec.containers[*].image}{"\n"}{end}' |
    grep -o 'kb-bench/[a-z-]*manager:[^ ]*' | sed 's#^kb-bench/##; s#-[0-9a-f]\{16\}$##' | sort | paste -sd ' ' -
}

mgmt_create "$a"
mgmt_inventory "$a"
wl_up "$a" "$wl"
t=$(now)
wait "$old_pid" || die "the older Cluster API: $(tail -5 "$work/old-env.log")"
result "older Cluster API ready, waited for it (s)" "$(secs "$t")"
old_env=$(cat "$work/old-env.path")
# shellcheck disable=SC1090
old=$(. "$old_env" && echo "core and kubeadm $KB_CAPI_VERSION, CAPD $KB_CAPD_VERSION")
with_capi "$old_env" mgmt_create "$b"
with_capi "$old_env" mgmt_inventory "$b"
result "slot a's providers (images)" "$(provider_images "$a")"
result "slot b's providers (images)" "$(provider_images "$b")"
loop_start "$wl_url" "$work/loop.txt"
loop_baseline "$work/loop.txt" "the pivot"
result "memory: management a / b / workload machine (MiB)" "$(mem_of "^$a-control-plane\$") / $(mem_of "^$b-control-plane\$") / $(mem_of "^$wl_node\$")"

# --- the site: slots a and b on the two management clusters, a active ---
export KUBECTL_BUNDLE_STATE_DIR="$work/state" KUBECTL_BUNDLE_PROVIDER=existing KUBECONFIG="$KB_CAPD_KUBECONFIG"
export KUBECTL_BUNDLE_ALIAS_CONTEXT=kb-capd-active NO_COLOR=1
providers_gate
for s in a b; do
  plugin kubectl-bundle-slot create "$s" --context "kind-kb-capd-$s" --kubeconfig "$KB_CAPD_KUBECONFIG" || die "slot create $s"
  plugin kubectl-bundle-gate --slot "$s" --record -f "$work/gate.yaml" --timeout 2m || die "slot $s's gate"
done
plugin kubectl-bundle-switch to a || die "switch to a"
plugin kubectl-bundle-switch accept || die "accept a"

# --- the workload cluster's context (issue 30, part 5): written from
# Cluster API's kubeconfig secret with the server at the load balancer's
# published port, merged into the site's kubeconfig; the pivot and the
# switch back below move the cluster between the slots, and the context
# must follow the slot that serves it ---
# wl_ctx_check WHEN: kubectl reaches the workload cluster through context
# kind-$wl; prints its nodes and the server the context names.
wl_ctx_check() {
  local n cl server
  n=$(kubectl --context "kind-$wl" get nodes -o name 2>"$work/wl-ctx.err" | grep -c . || true)
  cl=$(kubectl config view -o jsonpath="{.contexts[?(@.name==\"kind-$wl\")].context.cluster}")
  server=$(kubectl config view -o jsonpath="{.clusters[?(@.name==\"$cl\")].cluster.server}")
  result "workload context kind-$wl $1: nodes / server" "$n / $server"
  [ "$n" -gt 0 ] || die "kubectl --context kind-$wl reaches no node $1: $(cat "$work/wl-ctx.err")"
}
plugin kubectl-bundle-slot workload-kubeconfig "$wl" --slot a --merge || die "slot workload-kubeconfig $wl --slot a --merge"
wl_ctx_check "(slot a)"

# --- the pause watcher: every ~0.5 s, which Clusters each side holds and
# whether they are paused ("<ms> a|b name=true|false|(empty) ...") ---
: >"$work/paused.txt"
rm -f "$work/paused.stop"
(
  while [ ! -e "$work/paused.stop" ]; do
    for s in a b; do
      echo "$(now_ms) $s $(mk "kb-capd-$s" get clusters.cluster.x-k8s.io -A -o jsonpath='{range .items[*]}{.metadata.name}={.spec.paused}{" "}{end}' 2>/dev/null)" >>"$work/paused.txt"
    done
    sleep 0.3
  done
) &
watcher=$!
# paused_span SIDE FROM_MS: "<paused from> <paused until> <then>" on SIDE,
# seconds after FROM_MS; then: unpaused, gone, or still (paused at the end).
paused_span() {
  awk -v s="$1" -v t0="$2" -v w="$wl" '$1 >= t0 && $2 == s {
      line = $0 " "; p = index(line, " " w "=true ") > 0; present = index(line, " " w "=") > 0
      if (p && !start) start = $1
      if (start && !p && !end) {end = $1; then = present ? "unpaused" : "gone"}
    }
    END {
      if (!start) {print "never paused"; exit}
      if (!end) {printf "paused from %.1f s, still paused at the end\n", (start - t0) / 1000; exit}
      printf "paused from %.1f s to %.1f s (%.1f s), then %s\n", (start - t0) / 1000, (end - t0) / 1000, (end - start) / 1000, then
    }' "$work/paused.txt"
}
# available_after MGMT FROM: seconds from FROM until Cluster wl is
# Available in MGMT (its status as MGMT's providers rebuild it).
available_after() {
  local c=$1 from=$2 i
  for i in $(seq 1 180); do
    if [ "$(mk "$c" get cluster "$wl" -o jsonpath='{.status.conditions[?(@.type=="Available")].status}' 2>/dev/null)" = True ]; then
      secs "$from"
      return 0
    fi
    sleep 1
  done
  echo "not in 180 s"
}
machines_of() {
  mk "$1" get machines -o jsonpath='{range .items[*]}{.metadata.name}={.status.phase} {end}' 2>/dev/null || true
}

# --- 1. refused: slot b's providers are older than slot a's ---
machines_before=$(machines_of "$a")
t_ms=$(now_ms)
rc=0
kubectl-bundle-switch to b --mode pivot >"$work/refused.out" 2>&1 || rc=$?
cat "$work/refused.out" >&2
result "pivot to b with b's providers older ($old): exit" "$rc"
grep -o 'provider [a-z-]* is older[^;]*' "$work/refused.out" | sort -u >"$work/refused-providers.txt" || true
result "pivot to b with b's providers older: providers refused" "$(wc -l <"$work/refused-providers.txt")"
while read -r line; do result "  refused" "$line"; done <"$work/refused-providers.txt"
result "pivot to b refused: Cluster paused on a / objects on b" "$(paused_span a "$t_ms") / $(mk "$b" get clusters -A --no-headers 2>/dev/null | wc -l)"
result "pivot to b refused: Machines on a before / after" "$machines_before/ $(machines_of "$a")"
result "active slot after the refusal" "$(kubectl-bundle-switch status 2>/dev/null | awk '$1 == "active" {print $2}')"

# --- 1a. slot b's providers upgraded in place to the site's release, as
# the refusal says; its gate recorded again ---
t=$(now)
mgmt_install "$b"
mgmt_inventory "$b"
result "slot b's providers upgraded in place to $KB_CAPI_VERSION (s)" "$(secs "$t")"
result "slot b's providers after the upgrade (images)" "$(provider_images "$b")"
plugin kubectl-bundle-gate --slot b --record -f "$work/gate.yaml" --timeout 2m || die "slot b's gate after the upgrade"

# --- 1b. refused: the load balancer template would stay behind (the
# mover takes a ConfigMap only with an owner that moves; measured in the
# first run, before the preflight refused it) ---
rc=0
kubectl-bundle-switch to b --mode pivot >"$work/refused-template.out" 2>&1 || rc=$?
cat "$work/refused-template.out" >&2
result "pivot to b with the haproxy template only on a: exit" "$rc"
result "pivot to b with the haproxy template only on a: message" "$(grep -o 'ConfigMap [^,]*, the load balancer template[^;]*' "$work/refused-template.out" | head -1)"
# What the refusal names: the template on slot b too.
# (wl_apply's manifest starts with it.)
awk '/^---$/ {exit} {print}' "$work/$wl.yaml" | mk "$b" apply -f - >/dev/null || die "creating the haproxy template on $b"

# --- 2. the pivot a -> b ---
containers "$wl" >"$work/containers-before.txt"
machines_before=$(machines_of "$a")
t=$(now)
t_ms=$(now_ms)
rc=0
plugin kubectl-bundle-switch to b --mode pivot || rc=$?
result "pivot a -> b: exit / duration (s)" "$rc / $(secs "$t")"
[ "$rc" = 0 ] || die "the pivot to b failed (exit $rc)"
t_done=$(now)
result "pivot a -> b: Cluster Available on b after the switch (s)" "$(available_after "$b" "$t_done")"
sleep "$watch_s"
result "pivot a -> b: Cluster on a" "$(paused_span a "$t_ms")"
result "pivot a -> b: Cluster on b" "$(paused_span b "$t_ms")"
loop_report "$work/loop.txt" "during the pivot and ${watch_s} s after" "$t_ms"
containers "$wl" >"$work/containers-after-pivot.txt"
result "pivot a -> b: Machines on a before / on b after" "$machines_before/ $(machines_of "$b")"
result "pivot a -> b: Machines left on a" "$(machines_of "$a" | wc -w)"
same=$(same_lines "$work/containers-before.txt" "$work/containers-after-pivot.txt")
result "pivot a -> b: $wl containers (same id and start of before)" "$(wc -l <"$work/containers-after-pivot.txt") ($same of $(wc -l <"$work/containers-before.txt"))"
result "pivot a -> b: haproxy template ConfigMap on b" "$(mk "$b" get configmap kb-capd-haproxy -o name 2>/dev/null || echo 'not moved')"
result "pivot a -> b: DockerCluster Ready on b" "$(mk "$b" get dockercluster "$wl" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)"
result "pivot a -> b: Secrets of $wl on b" "$(mk "$b" get secrets -o name 2>/dev/null | grep -c "$wl" || true)"
mk "$b" -n capd-system logs deployment/capd-controller-manager --since=5m 2>/dev/null | grep -iE 'error|fail' | tail -20 >"$work/capd-b-errors.txt" || true
result "pivot a -> b: CAPD errors logged on b in 5 min" "$(wc -l <"$work/capd-b-errors.txt")"
plugin kubectl-bundle-switch status || true
wl_ctx_check "after the pivot to b"
plugin kubectl-bundle-slot workload-kubeconfig "$wl" --slot b --file "$work/wl-b.kubeconfig" || die "slot workload-kubeconfig $wl --slot b after the pivot"
result "slot workload-kubeconfig $wl --slot b after the pivot: nodes through the file" "$(kubectl --kubeconfig "$work/wl-b.kubeconfig" --context "kind-$wl" get nodes -o name | grep -c . || true)"

# --- 3. the undo: switch back during the soak (b -> a) ---
containers "$wl" >"$work/containers-before-back.txt"
t=$(now)
t_ms=$(now_ms)
rc=0
plugin kubectl-bundle-switch back --gate "$work/gate.yaml" --gate-timeout 2m || rc=$?
result "back b -> a: exit / duration (s)" "$rc / $(secs "$t")"
t_done=$(now)
[ "$rc" != 0 ] || result "back b -> a: Cluster Available on a after the switch (s)" "$(available_after "$a" "$t_done")"
sleep "$watch_s"
result "back b -> a: Cluster on b" "$(paused_span b "$t_ms")"
result "back b -> a: Cluster on a" "$(paused_span a "$t_ms")"
loop_report "$work/loop.txt" "during the undo and ${watch_s} s after" "$t_ms"
containers "$wl" >"$work/containers-after-back.txt"
same=$(same_lines "$work/containers-before.txt" "$work/containers-after-back.txt")
result "back b -> a: Machines on a / on b" "$(machines_of "$a")/ $(machines_of "$b" | wc -w)"
result "back b -> a: $wl containers (same id and start as before the pivot)" "$(wc -l <"$work/containers-after-back.txt") ($same of $(wc -l <"$work/containers-before.txt"))"
[ "$rc" != 0 ] || wl_ctx_check "after the switch back to a"
touch "$work/paused.stop"
wait "$watcher" 2>/dev/null || true
loop_stop "$work/loop.txt"
loop_report "$work/loop.txt" "in all"

# --- 4. the load balancer template missing where the cluster is managed:
# what a pivot that left the template behind (step 1b's refusal) would
# have given slot b. Here on slot a, which manages the cluster after the
# undo: its template deleted, then a control-plane machine created (a
# rollout to a new machine template, as in experiment (b)) and, once the
# template is back and the new machine runs, the old one deleted without
# it. A client that tries each running machine in turn measures the
# workload (loop_start_cluster). ---
template_get() { mk "$a" get configmap kb-capd-haproxy -o name 2>/dev/null || echo none; }
template_restore() { awk '/^---$/ {exit} {print}' "$work/$wl.yaml" | mk "$a" apply -f - >/dev/null || die "restoring the haproxy template on $a"; }
# lb_backends: the control-plane servers in the load balancer's configuration.
lb_backends() { docker exec "$wl-lb" cat /usr/local/etc/haproxy/haproxy.cfg 2>/dev/null | awk '$1 == "server" {print $2}' | sort | paste -sd ' ' -; }
# dockermachines: "<name>=<weight annotation>[,deleting]" of slot a's DockerMachines.
dockermachines() {
  mk "$a" get dockermachines -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.annotations.devmachine\.infrastructure\.cluster\.x-k8s\.io/weight}{.metadata.deletionTimestamp}{" "}{end}' 2>/dev/null |
    sed 's/=\([0-9]*\)20[0-9-]*T[0-9:]*Z/=\1,deleting/g' || true
}
template_errors() { # FROM (RFC 3339): CAPD's errors about the template on slot a since FROM
  mk "$a" -n capd-system logs deployment/capd-controller-manager --since-time="$1" 2>/dev/null | grep -c 'custom HAProxy configuration ConfigMap' || true
}
# template_state WHAT: what the cluster's objects and containers show
# after T (set by the caller) without the template, since SINCE.
template_state() {
  result "no template, $1: after (s)" "$(secs "$t")"
  result "no template, $1: Machines" "$(machines_of "$a")"
  result "no template, $1: DockerMachines (weight)" "$(dockermachines)"
  result "no template, $1: containers of $wl" "$(containers "$wl" | awk '{print $1 "=" $3}' | paste -sd ' ' -)"
  result "no template, $1: load balancer backends" "$(lb_backends)"
  result "no template, $1: CAPD template errors" "$(template_errors "$since")"
}
old_machine=$(mk "$a" get machines -o jsonpath='{.items[0].metadata.name}')
loop_start_cluster "$wl" "$work/loop-template.txt"
loop_baseline "$work/loop-template.txt" "the template step"
t_ms=$(now_ms)
since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
mk "$a" delete configmap kb-capd-haproxy >/dev/null || die "deleting the haproxy template on $a"
wl_retemplate "$a" "$wl"
t=$(now)
sleep "${KB_CAPD_TEMPLATE_S:-180}"
template_state "machine created"
loop_report "$work/loop-template.txt" "without the template (creation)" "$t_ms"
mk "$a" -n capd-system logs deployment/capd-controller-manager --since-time="$since" 2>/dev/null | grep 'custom HAProxy' | tail -3 >&2 || true

# The template back: the new machine should join; as soon as it runs,
# the template goes again and KCP deletes the old machine without it.
template_restore
t=$(now)
deadline=$(($(date +%s) + 900))
while :; do
  m=$(machines_of "$a")
  [ "$(echo "$m" | tr ' ' '\n' | grep -c '=Running$' || true)" -lt 2 ] || break
  if [ "$(echo "$m" | wc -w)" = 1 ] && [[ $m != "$old_machine="* ]]; then break; fi # the rollout already ended
  [ "$(date +%s)" -lt "$deadline" ] || die "the new machine did not run in 900 s after the template came back (machines: $m)"
  sleep 2
done
result "template back: new Machine Running after (s)" "$(secs "$t")"
since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
t_ms=$(now_ms)
mk "$a" delete configmap kb-capd-haproxy >/dev/null 2>&1 || true
t=$(now)
sleep "${KB_CAPD_TEMPLATE_S:-180}"
template_state "machine deleted"
loop_report "$work/loop-template.txt" "without the template (deletion)" "$t_ms"

# The template back: the rollout should end (one Running Machine, the new).
template_restore
t=$(now)
deadline=$(($(date +%s) + 900))
until [ "$(machines_of "$a" | wc -w)" = 1 ] && [[ $(machines_of "$a") != "$old_machine="* ]] && [[ $(machines_of "$a") == *=Running* ]]; do
  [ "$(date +%s)" -lt "$deadline" ] || die "the rollout did not end in 900 s after the template came back (machines: $(machines_of "$a"))"
  sleep 2
done
result "template back: rollout ended after (s)" "$(secs "$t")"
result "template back: Machines / load balancer backends" "$(machines_of "$a")/ $(lb_backends)"
sleep 20
loop_stop "$work/loop-template.txt"
loop_report "$work/loop-template.txt" "through the template step" 0
echo "--- containers before, after the pivot, after the undo" >&2
cat "$work/containers-before.txt" "$work/containers-after-pivot.txt" "$work/containers-after-back.txt" >&2
result "load average at end" "$(load_line)"
say "pivot: done"
