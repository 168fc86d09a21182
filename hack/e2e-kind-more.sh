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
# deploying: zarf package deploy runs; else in-place.sh's log so far.
deploying() { pgrep -f 'zarf package deploy' || { cat "$work/killed.log" && false; }; }
for _ in $(seq 600); do
  pgrep -f 'zarf package deploy' >/dev/null && break
  sleep 0.1
done
check "zarf package deploy never started (the output is in-place.sh's)" -- deploying
sleep 1
kill -KILL -- "-$victim"
wait "$victim" 2>/dev/null || true
echo "e2e-kind: killed in-place.sh inside zarf package deploy"
check "journal status fails after the kill" -- kubectl-bundle-journal status
head -3 <<<"$checked"
t=$(now)
"$root/scripts/in-place.sh" "$pkg2" --key "$key" --gate "$gate" --gate-timeout 5m
m "in-place.sh re-run after kill" "$t"
expect_active b 2.0.0
check "a transaction is left open after the re-run" --has '[Nn]o (open )?transaction' -- kubectl-bundle-journal status

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
check "blue-green.sh apply --switch-mode repoint failed, or did not gate the candidate management-only" --both \
  --has '^==> HEALTHY: .*--management-only' -- \
  "$root/scripts/blue-green.sh" apply "$pkg2" --key "$key" --gate "$gate" --gate-timeout 5m --switch-mode repoint
m "blue-green apply repoint (a)" "$t"
expect_active a 2.0.0
t=$(now)
check "accept of the repoint update failed, or did not keep slot b for its workload cluster" --both \
  --line 'PASS: old slot b kept: it owns workload clusters kb-e2e-wl-b' -- "$root/scripts/blue-green.sh" accept --yes
m "blue-green accept repoint" "$t"
expect_active a 2.0.0
for c in kb-e2e-b-control-plane kb-e2e-registry-b kb-e2e-wl-b-control-plane; do
  check "$c is not running after the repoint accept" --is true -- docker inspect -f '{{.State.Running}}' "$c"
done
check "slot b's cluster does not answer after the repoint accept" -- kubectl --context kind-kb-e2e-b get nodes
check "switch status does not list slot b's workload cluster" --line 'slot b owns workload clusters: kb-e2e-wl-b' -- kubectl-bundle-switch status
check "slot destroy of the owner slot b does not refuse (exit 4) listing the workload cluster" --rc 4 --both \
  --has 'it owns workload clusters kb-e2e-wl-b' -- kubectl-bundle-slot destroy b
check "revert after a repoint accept does not refuse (exit 4)" --rc 4 --both -- "$root/scripts/blue-green.sh" revert
check "slot b was touched by the refused destroy or revert" --is true -- docker inspect -f '{{.State.Running}}' kb-e2e-b-control-plane
expect_active a 2.0.0
echo "e2e-kind: S1 repoint: slot a active, slot b kept as the owner of kb-e2e-wl-b; destroy and revert refuse (exit 4)"
check "slot destroy b --force --yes" --both -- kubectl-bundle-slot destroy b --force --yes
check "the forced destroy of the owner left its workload cluster's container" --rc nonzero -- docker inspect kb-e2e-wl-b-control-plane

# A host reboot mid-update (issue 28, part 6), as far as the bench can make
# one: in-place.sh 2.0.0 -> 1.0.0 into slot a, its process group killed
# while zarf deploys (the power lost), then the Docker engine stopped and
# started under the slot (hack/docker/ensure.sh restart: the engine stops
# every container and starts again those its restart policies name: the
# kind node's, the registries' unless-stopped). Then the runbook's "host
# reboot" section, its commands taken from docs/airgap-rollback.md and run
# as printed there; after them slot a's registry serves and its gate passes.
case $("$root/hack/docker/ensure.sh" status) in
"own dockerd "*) ;;
*) fail "the reboot test restarts the Docker engine, and this one was not started by hack/docker/ensure.sh: run make e2e-kind with no engine running (it starts its own)" ;;
esac
setsid "$root/scripts/in-place.sh" "$pkg1" --key "$key" --gate "$gate" --gate-timeout 5m >"$work/reboot.log" 2>&1 &
victim=$!
for _ in $(seq 600); do
  pgrep -f 'zarf package deploy' >/dev/null && break
  sleep 0.1
done
check "zarf package deploy never started before the reboot (the output is in-place.sh's)" -- deploying
kill -KILL -- "-$victim"
wait "$victim" 2>/dev/null || true
t=$(now)
"$root/hack/docker/ensure.sh" restart >/dev/null
m "Docker engine restart under slot a" "$t"
for c in kb-e2e-a-control-plane kb-e2e-registry-a; do
  check "$c was not started again by the engine after its restart" --is true -- docker inspect -f '{{.State.Running}}' "$c"
done
t=$(now)
for _ in $(seq 150); do
  kubectl --context kind-kb-e2e-a get --raw /readyz >/dev/null 2>&1 && break
  sleep 2
done
check "slot a's API server is not ready 300 s after the engine restart" -- kubectl --context kind-kb-e2e-a get --raw /readyz
m "slot a's API server ready after the engine restart" "$t"
reboot_section=$(awk '/^## A host reboot/ { on = 1; next } /^## / { on = 0 } on && /^```sh/ { c = 1; next } on && /^```/ { c = 0; next } on && c' "$root/docs/airgap-rollback.md")
[ "$(printf '%s\n' "$reboot_section" | grep -c .)" = 3 ] || fail "the runbook's host reboot section no longer holds the three commands this test runs: $reboot_section"
t=$(now)
rc_next=
while IFS= read -r line; do
  echo "e2e-kind: runbook (host reboot): $line"
  rc=0
  sh -c "$line" || rc=$?
  case $line in
  *"journal next --run"*) rc_next=$rc ;;
  *"journal status"*) ;; # names the cut step; exits non-zero while the update is open
  *) [ "$rc" = 0 ] || fail "the runbook's $line exited $rc after the engine restart" ;;
  esac
done <<<"$reboot_section"
m "the runbook's host reboot section" "$t"
case $rc_next in
0) expect_active a 1.0.0 ;;
1) expect_active a 2.0.0 ;;
*) fail "the runbook's journal next --run exited ${rc_next:-(not run)} after the engine restart: 0 (the update finished) or 1 (rolled back, the previous deployment in place) expected" ;;
esac
check "a transaction is left open after the runbook's host reboot section" --has '[Nn]o (open )?transaction' -- kubectl-bundle-journal status
check "slot a's registry does not serve after the engine restart" --has '"repositories"' -- \
  curl -fsS "http://127.0.0.1:$(docker port kb-e2e-registry-a 5000/tcp | sed -n '1s/.*://p')/v2/_catalog"
check "slot a does not pass its gate after the engine restart" -- kubectl-bundle-gate --slot a -f "$gate" --timeout 5m
echo "e2e-kind: host reboot: the engine restarted under slot a mid-update; the runbook's section converged (journal next --run exit $rc_next), the registry serves, the gate passes"
