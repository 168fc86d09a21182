#!/usr/bin/env bash
# Regenerates testdata/packages/digests/ with the real zarf: packages for the
# digest-pin policy (verify --require-digests), built through imageArchives
# from zarf's own OCI-layout fixture (src/pkg/images/testdata/oras-oci-layout
# in the pinned module), so no registry or Docker daemon is needed.
# hack/gentestdata pinned-layout adds an image index and the pinned names
# (true pins, a false pin, the same tag pinned twice). Each package is a few
# KB and signed with the test key (password "testpass").
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
zarf="${ZARF:-$root/bin/testbin/zarf}"
out="$root/testdata/packages/digests"
keys="$root/testdata/keys"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fixture=$(cd "$root/hack/tools" && go mod download github.com/zarf-dev/zarf &&
  go list -m -f '{{.Dir}}' github.com/zarf-dev/zarf)/src/pkg/images/testdata/oras-oci-layout/images
index=$(go run "$root/hack/gentestdata" pinned-layout "$fixture" "$work/layout.tar")
manifest=sha256:6a88822e787d1df28b83ebd72eb348569fc44351b84bba25c0bc566f6083965b
hello=sha256:03b62250a3cb1abd125271d393fc08bf0cc713391eda6b57c02d1ef85efcc25c

# package NAME API IMAGES...: one package whose components take IMAGES
# (one component each, "|" separates components) from the layout.
package() {
  local name=$1 api=$2 dir="$work/$1"
  shift 2
  mkdir -p "$dir"
  cp "$work/layout.tar" "$dir/"
  {
    [ "$api" = v1beta1 ] && echo "apiVersion: zarf.dev/v1beta1"
    echo "kind: ZarfPackageConfig"
    echo "metadata:"
    echo "  name: $name"
    echo "  version: 1.0.0"
    echo "components:"
    local n=0 img
    echo "  - name: c$n"
    [ "$api" = v1alpha1 ] && echo "    required: true"
    echo "    imageArchives:"
    echo "      - path: layout.tar"
    echo "        images:"
    for img in "$@"; do
      if [ "$img" = "|" ]; then
        n=$((n + 1))
        echo "  - name: c$n"
        [ "$api" = v1alpha1 ] && echo "    required: true"
        echo "    imageArchives:"
        echo "      - path: layout.tar"
        echo "        images:"
        continue
      fi
      echo "          - $img"
    done
  } >"$dir/zarf.yaml"
  "$zarf" package create "$dir" --confirm -a amd64 -o "$out" --no-color --log-level warn \
    --cache "$work/cache" --tmpdir "$work" --signing-key "$keys/cosign.key" --signing-key-pass testpass
}

rm -rf "$out"
mkdir -p "$out"
# Every image pinned repo:tag@sha256, to a manifest and to an index, and the
# same pin in two components.
package pinned v1alpha1 "docker.io/library/local-test:1.0.0@$manifest" "localhost:9999/local-test:1.0.0@$index" \
  "|" "docker.io/library/local-test:1.0.0@$manifest"
package pinned-beta v1beta1 "docker.io/library/local-test:1.0.0@$manifest" "localhost:9999/local-test:1.0.0@$index"
package tag-only v1alpha1 "docker.io/library/local-test:1.0.0"
package digest-only v1alpha1 "docker.io/library/hello-world@$hello"
# The pin names hello-world's manifest; the package holds local-test's.
package mismatched v1alpha1 "docker.io/library/local-test:1.0.0@$hello"
# One tag, two digests (both stored as pinned).
package two-pins v1beta1 "docker.io/library/local-test:1.0.0@$manifest" "|" "docker.io/library/local-test:1.0.0@$index"
echo "index $index" >"$out/README"
du -sh "$out"
ls -l "$out"
