#!/usr/bin/env bash
# Regenerates testdata/packages/site with the real zarf: two site-like
# packages, one fit for blue/green (declares the Zarf variable SLOT and uses
# it for the workload cluster, its load balancer and the registry host its
# Flux pulls from) and one with fixed names (no SLOT), signed with the test
# key. kubectl bundle-slot preflight --blue-green accepts the first and
# refuses the second.
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
zarf="${ZARF:-$root/bin/testbin/zarf}"
out="$root/testdata/packages/site"
src="$root/testdata/src/site"
keys="$root/testdata/keys"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

rm -rf "$out"
mkdir -p "$out"
for kind in slot fixed; do
  mkdir -p "$work/$kind"
  cp "$src/zarf-$kind.yaml" "$work/$kind/zarf.yaml"
  cp "$src"/cluster*.yaml "$work/$kind/"
  "$zarf" package create "$work/$kind" --confirm -a amd64 -o "$out" --no-color --log-level warn \
    --cache "$work/cache" --tmpdir "$work" --signing-key "$keys/cosign.key" --signing-key-pass testpass
done
"$root/hack/gen-site-keyless-testdata.sh"
