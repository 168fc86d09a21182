#!/usr/bin/env bash
# gen-crds.sh copies the real CustomResourceDefinitions the gate tests need
# from the published Go modules of the projects that own them into
# testdata/crds/. The versions are named here; change one and re-run.
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/testdata/crds"

# module@version  path-inside-the-module
crds=(
  "github.com/fluxcd/source-controller@v1.9.6 config/crd/bases/source.toolkit.fluxcd.io_ocirepositories.yaml"
  "github.com/fluxcd/kustomize-controller@v1.9.6 config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml"
  "github.com/controlplaneio-fluxcd/flux-operator@v0.58.0 config/crd/bases/fluxcd.controlplane.io_fluxinstances.yaml"
  "sigs.k8s.io/cluster-api@v1.14.2 core/config/crd/bases/cluster.x-k8s.io_clusters.yaml"
)

# go mod download outside any module, so this repository's go.mod is untouched.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
rm -f "$out"/*.yaml
for entry in "${crds[@]}"; do
  read -r modver path <<<"$entry"
  dir=$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "$modver" | tee "$tmp/dl.json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ -z "$dir" ] || [ ! -f "$dir/$path" ]; then
    echo "gen-crds: $path not found in $modver" >&2
    grep '"Error"' "$tmp/dl.json" >&2 || true
    exit 1
  fi
  dest="$out/$(basename "$path")"
  { echo "# Copied by hack/gen-crds.sh from $modver $path"; cat "$dir/$path"; } >"$dest"
  echo "wrote ${dest#"$root"/} ($modver)"
done
