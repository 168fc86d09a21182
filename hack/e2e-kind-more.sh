# e2e-kind-more.sh: the part of hack/e2e-kind.sh that only `make e2e-kind`
# runs (sourced by it with slot b active on 2.0.0): in-place.sh and
# recreate.sh once each on a real slot, and a SIGKILL inside a real deploy
# step (zarf deploying) with a re-run that converges; then an S1 repoint
# update into slot a that keeps slot b as the owner of its workload cluster.
# shellcheck shell=bash disable=SC2154

# in-place: 2.0.0 -> 1.0.0 in slot b.
t=$(now)
"$root/scripts/in-place.sh" "$pkg1" --key "$key" --gate "$gate" --gate-timeout 5m
m "in-place.sh (b, 1.0.0)" "$t"
expect_active b 1.0.0

# A SIGKILL inside a real step: in-place 1.0.0 -> 2.0.0, killed while zarf
# deploys; the re-run converges on 2.0.0.
setsid "$root/scripts/in-place.sh" "$pkg2" --key "$key" --gate "$gate" --gate-timeout 5m >"$work/killed.log" 2>&1 &
victim=$!
for _ in $(seq 600); do
  pgrep -f 'zarf package deploy' >/dev/null && break
  sleep 0.1
done
pgrep -f 'zarf package deploy' >/dev/null || fail "zarf package deploy never started: $(tail -5 "$work/killed.log")"
sleep 1
kill -KILL -- "-$victim"
wait "$victim" 2>/dev/null || true
echo "e2e-kind: killed in-place.sh inside zarf package deploy"
kubectl-bundle-journal status | head -3
t=$(now)
"$root/scripts/in-place.sh" "$pkg2" --key "$key" --gate "$gate" --gate-timeout 5m
m "in-place.sh re-run after kill" "$t"
expect_active b 2.0.0
kubectl-bundle-journal status -o json | grep -q '"open": *false' ||
  kubectl-bundle-journal status | grep -qi 'no open transaction\|no transaction' ||
  fail "a transaction is left open after the re-run: $(kubectl-bundle-journal status)"

# recreate: tear slot b down and build it again with 1.0.0.
t=$(now)
"$root/scripts/recreate.sh" "$pkg1" --key "$key" --gate "$gate" --gate-timeout 5m --yes
m "recreate.sh (b, 1.0.0)" "$t"
expect_active b 1.0.0

# S1 repoint on real clusters: a management-only update from slot b into
# slot a, while slot b's CAPD runs a workload cluster (a stand-in container
# named as CAPD names its node: <workload>-b-control-plane, since Cluster
# API is not built here). The candidate passes the management-only gate,
# the aliases move to slot a; accept keeps slot b running as the owner of
# its workload cluster, and slot destroy and revert refuse it (exit 4).
docker run -d --name kb-e2e-wl-b-control-plane --network kind --label dev.kubectl-bundle.e2e=1 \
  --entrypoint sleep "$probe_image" 3600 >/dev/null
t=$(now)
"$root/scripts/blue-green.sh" apply "$pkg2" --key "$key" --gate "$gate" --gate-timeout 5m --switch-mode repoint >"$work/s1-apply.log" 2>&1 ||
  fail "blue-green.sh apply --switch-mode repoint: $(tail -5 "$work/s1-apply.log")"
m "blue-green apply repoint (a)" "$t"
grep -q '^==> HEALTHY: .*--management-only' "$work/s1-apply.log" || fail "the repoint candidate was not gated management-only: $(grep '^==> HEALTHY' "$work/s1-apply.log")"
expect_active a 2.0.0
t=$(now)
"$root/scripts/blue-green.sh" accept --yes >"$work/s1-accept.log" 2>&1 || fail "accept of the repoint update: $(tail -5 "$work/s1-accept.log")"
m "blue-green accept repoint" "$t"
grep -qx 'PASS: old slot b kept: it owns workload clusters kb-e2e-wl-b' "$work/s1-accept.log" ||
  fail "accept did not keep slot b for its workload cluster: $(tail -5 "$work/s1-accept.log")"
expect_active a 2.0.0
for c in kb-e2e-b-control-plane kb-e2e-registry-b kb-e2e-wl-b-control-plane; do
  [ "$(docker inspect -f '{{.State.Running}}' "$c" 2>/dev/null)" = true ] || fail "$c is not running after the repoint accept"
done
kubectl --context kind-kb-e2e-b get nodes >/dev/null || fail "slot b's cluster does not answer after the repoint accept"
kubectl-bundle-switch status | grep -qx 'slot b owns workload clusters: kb-e2e-wl-b' || fail "switch status does not list slot b's workload cluster"
rc=0
kubectl-bundle-slot destroy b >"$work/s1-destroy.log" 2>&1 || rc=$?
[ "$rc" = 4 ] || fail "slot destroy of the owner slot b exited $rc, want 4: $(tail -3 "$work/s1-destroy.log")"
grep -q 'it owns workload clusters kb-e2e-wl-b' "$work/s1-destroy.log" || fail "destroy's refusal does not list the workload cluster: $(cat "$work/s1-destroy.log")"
rc=0
"$root/scripts/blue-green.sh" revert >"$work/s1-revert.log" 2>&1 || rc=$?
[ "$rc" = 4 ] || fail "revert after a repoint accept exited $rc, want 4: $(tail -3 "$work/s1-revert.log")"
[ "$(docker inspect -f '{{.State.Running}}' kb-e2e-b-control-plane)" = true ] || fail "slot b was touched by the refused destroy or revert"
expect_active a 2.0.0
echo "e2e-kind: S1 repoint: slot a active, slot b kept as the owner of kb-e2e-wl-b; destroy and revert refuse (exit 4)"
kubectl-bundle-slot destroy b --force --yes >/dev/null 2>&1 || fail "slot destroy b --force --yes"
if docker inspect kb-e2e-wl-b-control-plane >/dev/null 2>&1; then
  fail "the forced destroy of the owner left its workload cluster's container"
fi
