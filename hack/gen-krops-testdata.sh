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
# slot_names_tree ALWAYS: the slot-names package's source in $work/pkg and
# its config tree in $work/config (ALWAYS: yes for slot-names, no for
# slot-names-withvariables, which keeps Flux's default strategy and leaves
# the root Kustomization as it is).
slot_names_tree() {
  local strategy='' roots=''
  if [ "$1" = yes ]; then
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
}

case ${1:-} in
slot-names | slot-names-withvariables)
  variant=$1 always=no
  [ "$variant" = slot-names-withvariables ] || always=yes
  slot_names_tree "$always"
  rm -rf "${out:?}/$variant"
  create "$out/$variant" --signing-key "$keys/cosign.key" --signing-key-pass testpass
  du -sh "$out/$variant"
  exit
  ;;
# bench DEST VERSION FLUX_ENV CRD...: the slot-names package as a site's
# carries Flux itself, for blue-green.sh on the bench (make e2e-kind-flux):
# the bench's source-controller and kustomize-controller (FLUX_ENV, from
# hack/flux/images.sh: their images from the Docker engine, their manifests
# without the Namespace, which zarf makes), Cluster API's CRDs (CRD...), and
# the root OCIRepository insecure (the site's FluxInstance patches every
# OCIRepository so, zarf's registry being plain HTTP) and labelled for zarf's
# agent to leave it as it is: it names zarf's registry by its in-cluster
# name, which the slot gives its registry (zarfRegistry slot), where the
# agent would point it at 127.0.0.1:PORT, the address zarf knows, which a
# pod cannot reach. Built when the e2e runs (the images' names carry their
# pins' hash), signed, into DEST.
bench)
  [ $# -ge 5 ] || { echo "usage: $0 bench DEST VERSION FLUX_ENV CRD..." >&2; exit 2; }
  dest=$2 version=$3
  # shellcheck disable=SC1090
  . "$4"
  shift 4
  slot_names_tree yes
  sed -i "s/^  version: .*/  version: $version/; s/^  name: krops-shaped$/  name: krops-bench/" "$work/pkg/zarf.yaml"
  sed -i 's/^\(  url: oci:.*\)$/\1\n  insecure: true/; /^kind: OCIRepository$/,/^  namespace:/ s/^\(  namespace: .*\)$/\1\n  labels:\n    zarf.dev\/agent: ignore/' "$work/pkg/flux-instance.yaml"
  grep -q '^  insecure: true$' "$work/pkg/flux-instance.yaml" || { echo "bench: flux-instance.yaml has no url: to follow" >&2; exit 1; }
  grep -q '^    zarf.dev/agent: ignore$' "$work/pkg/flux-instance.yaml" || { echo "bench: flux-instance.yaml has no OCIRepository to label" >&2; exit 1; }
  # The bench's Flux without its first document, the Namespace (labelled
  # for zarf's agent to ignore: what zarf deploys, the agent rewrites).
  awk 'n { print } /^---$/ && !n { n = 1 }' "$KB_FLUX_MANIFESTS" >"$work/pkg/flux.yaml"
  i=0 crds=''
  for f in "$@"; do
    i=$((i + 1))
    cp "$f" "$work/pkg/crd-$i.yaml"
    crds="$crds crd-$i.yaml,"
  done
  awk -v src="$KB_FLUX_SOURCE_IMAGE" -v kus="$KB_FLUX_KUSTOMIZE_IMAGE" -v crds="[${crds%,} ]" '
    /^  - name: flux-instance$/ {
      print "  - name: flux"
      print "    required: true"
      print "    description: the management cluster'"'"'s Flux (source-controller, kustomize-controller) and Cluster API'"'"'s CRDs"
      print "    images: [" src ", " kus "]"
      print "    manifests:"
      print "      - {name: flux, namespace: flux-system, files: [flux.yaml]}"
      print "      - {name: cluster-api-crds, files: " crds "}"
      print "    healthChecks:"
      print "      - {apiVersion: apps/v1, kind: Deployment, namespace: flux-system, name: source-controller}"
      print "      - {apiVersion: apps/v1, kind: Deployment, namespace: flux-system, name: kustomize-controller}"
    }
    { print }' "$work/pkg/zarf.yaml" >"$work/pkg/zarf.yaml.new"
  mv "$work/pkg/zarf.yaml.new" "$work/pkg/zarf.yaml"
  grep -q '^  - name: flux$' "$work/pkg/zarf.yaml" || { echo "bench: zarf.yaml has no flux-instance component to put Flux before" >&2; exit 1; }
  create "$dest" --signing-key "$keys/cosign.key" --signing-key-pass testpass
  ls "$dest/zarf-package-krops-bench-amd64-$version.tar.zst"
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
