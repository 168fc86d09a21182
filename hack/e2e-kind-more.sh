# e2e-kind-more.sh: the part of hack/e2e-kind.sh that only `make e2e-kind`
# runs (sourced by it with slot b active on 2.0.0): in-place.sh and
# recreate.sh once each on a real slot, and a SIGKILL inside a real deploy
# step (zarf deploying) with a re-run that converges.
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
