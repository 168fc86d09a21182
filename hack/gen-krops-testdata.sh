#!/usr/bin/env bash
# Regenerates testdata/packages/krops with the real zarf: a package with the
# shape of the one krops builds (testdata/src/krops/zarf.yaml): a container
# image, the workload cluster's configuration (testdata/src/krops/config) as
# a Flux OCI artifact among its images, and a file applied by an onDeploy
# action. Both images come through imageArchives (no registry here);
# hack/gentestdata makes the artifact as `flux push artifact` does, byte for
# byte the same on every build. Signed with the test key (password
# "testpass"); an unsigned copy and tampered variants beside it.
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
zarf="${ZARF:-$root/bin/testbin/zarf}"
out="$root/testdata/packages/krops"
src="$root/testdata/src/krops"
keys="$root/testdata/keys"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

gen() { go run "$root/hack/gentestdata" "$@"; }
create() { # OUTDIR [zarf flags...]
  local dest="$1"
  shift
  mkdir -p "$dest"
  "$zarf" package create "$work/pkg" --confirm -a amd64 -o "$dest" --no-color --log-level warn \
    --cache "$work/cache" --tmpdir "$work" "$@"
}

# slot-names: only the variant whose workload cluster each slot names
# (docs/krops.md, "Two slots side by side"): the tree as the site's build
# renames it when given ${WORKLOAD_CLUSTER_NAME:=local-workload} as the
# name, and each Flux Kustomization substituting from the optional
# ConfigMap kubectl-bundle-slot with substituteStrategy: Always, the root
# Kustomization that applies the tree (the package's flux-instance.yaml)
# too: the tree's Kustomizations name the workload cluster in their
# healthChecks. Without Always, Flux substitutes nothing, not even the
# defaults, where no ConfigMap is (its default strategy, WithVariables,
# needs one variable set; found by Flux on the bench, docs/krops.md).
# slot-names-withvariables: the tree as the decision first had it (the
# tree's Kustomizations only, Flux's default strategy), which preflight
# warns of (flux-defaults). Signed; into $out/VARIANT.
case ${1:-} in
slot-names | slot-names-withvariables)
  variant=$1 strategy='' roots=''
  if [ "$variant" = slot-names ]; then
    strategy='    substituteStrategy: Always\n' roots="$work/pkg/flux-instance.yaml"
  fi
  mkdir -p "$work/pkg" "$work/config"
  cp "$src/zarf.yaml" "$src/flux-instance.yaml" "$work/pkg/"
  cp -R "$src/config/." "$work/config/"
  grep -rl local-workload "$work/config" | while read -r f; do
    # The ${...} is Flux's substitution, written literally into the tree.
    # shellcheck disable=SC2016
    sed -i 's/local-workload/${WORKLOAD_CLUSTER_NAME:=local-workload}/g' "$f"
  done
  for f in "$work/config/flux/clusters.yaml" "$work/config/flux/cni.yaml" $roots; do
    printf '  postBuild:\n%b    substituteFrom:\n      - kind: ConfigMap\n        name: kubectl-bundle-slot\n        optional: true\n' "$strategy" >>"$f"
  done
  gen oci-image "$work/pkg/demo-image.tar" docker.io/library/demo-app:1.0.0 amd64
  gen flux-artifact "$work/pkg/config-artifact.tar" localhost:5001/krops-config:latest "$work/config" \
    https://example.com/krops-config.git main@sha1:0000000000000000000000000000000000000000
  rm -rf "${out:?}/$variant"
  create "$out/$variant" --signing-key "$keys/cosign.key" --signing-key-pass testpass
  du -sh "$out/$variant"
  exit
  ;;
esac

rm -rf "$out"
mkdir -p "$out/unsigned" "$out/tampered" "$work/pkg"
cp "$src/zarf.yaml" "$src/flux-instance.yaml" "$work/pkg/"
gen oci-image "$work/pkg/demo-image.tar" docker.io/library/demo-app:1.0.0 amd64
artifact=$(gen flux-artifact "$work/pkg/config-artifact.tar" localhost:5001/krops-config:latest "$src/config" \
  https://example.com/krops-config.git main@sha1:0000000000000000000000000000000000000000)
create "$out" --signing-key "$keys/cosign.key" --signing-key-pass testpass
create "$out/unsigned"

name="zarf-package-krops-shaped-amd64-1.0.0.tar.zst"
# The Flux artifact's content changed after signing.
gen tamper flux-layer-modified "$out/$name" "$out/tampered/flux-layer-modified.tar.zst"
# The container image's SBOM removed (checksums made consistent again, so
# only the SBOM check fails; unsigned, as the signature would fail first).
gen tamper sbom-missing-image "$out/unsigned/$name" "$out/tampered/sbom-missing-image.tar.zst"
echo "config artifact $artifact" >"$out/README"
# The slot-names variants, which the rm above took too.
"$0" slot-names
"$0" slot-names-withvariables
du -sh "$out"
