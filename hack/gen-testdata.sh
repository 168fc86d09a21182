#!/usr/bin/env bash
# Regenerates testdata/packages with the real zarf (make testdata).
#
# Packages zarf itself builds: signed (Sigstore bundle, key), unsigned,
# uncompressed .tar, split into parts, v1beta1. hack/gentestdata derives the
# rest from them: a legacy zarf.yaml.sig package, a keyless one signed by
# sigstore-go's test CA (with its trusted_root.json), and one tampered
# variant per failure class. The test key's password is "testpass"; it
# signs nothing but test packages.
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
zarf="${ZARF:-$root/bin/testbin/zarf}"
out="$root/testdata/packages"
keys="$root/testdata/keys"
src="$root/testdata/src"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

gen() { go run "$root/hack/gentestdata" "$@"; }
create() { # DIR OUTDIR [zarf flags...]
  local dir="$1" dest="$2"
  shift 2
  mkdir -p "$dest"
  "$zarf" package create "$dir" --confirm -a amd64 -o "$dest" --no-color --log-level warn \
    --cache "$work/cache" --tmpdir "$work" "$@"
}
sign=(--signing-key "$keys/cosign.key" --signing-key-pass testpass)

if [[ ! -f "$keys/cosign.key" ]]; then
  # zarf tools gen-key only asks for the password on a terminal.
  (cd "$keys" && tmux new-session -d -s gen-key "$zarf tools gen-key --no-color; sleep 2" &&
    sleep 2 && tmux send-keys -t gen-key testpass Enter && sleep 1 && tmux send-keys -t gen-key testpass Enter && sleep 3)
fi
if [[ ! -f "$keys/other.pub" ]]; then
  openssl ecparam -genkey -name prime256v1 -noout | openssl ec -pubout -out "$keys/other.pub" 2>/dev/null
fi

rm -rf "$out"
mkdir -p "$out"/{unsigned,legacy,keyless,uncompressed,split,v1beta1,tampered}

# The demo package: one component with a manifest, a file and an image
# (from an image archive: no registry here), so it has image and file SBOMs.
pkg="$work/demo"
mkdir -p "$pkg"
cp "$src/app.conf" "$src/configmap.yaml" "$pkg/"
gen oci-image "$pkg/demo-image.tar" docker.io/library/demo-app:1.0.0 amd64
cat >"$pkg/zarf.yaml" <<'YAML'
kind: ZarfPackageConfig
metadata:
  name: demo
  description: kubectl-bundle example package
  version: 1.0.0
components:
  - name: app
    required: true
    manifests:
      - name: demo
        namespace: demo
        files:
          - configmap.yaml
    files:
      - source: app.conf
        target: /etc/demo/app.conf
    imageArchives:
      - path: demo-image.tar
        images:
          - docker.io/library/demo-app:1.0.0
YAML
name="zarf-package-demo-amd64-1.0.0"
create "$pkg" "$out" "${sign[@]}"
create "$pkg" "$out/unsigned"

sed 's/^  version: 1.0.0$/  version: 1.0.0\n  uncompressed: true/' "$pkg/zarf.yaml" >"$work/zarf.yaml" && mv "$work/zarf.yaml" "$pkg/zarf.yaml"
create "$pkg" "$out/uncompressed" "${sign[@]}"

# A v1beta1 package: zarf writes the two-document zarf.yaml.
b1="$work/v1beta1"
mkdir -p "$b1"
cp "$src/app.conf" "$src/configmap.yaml" "$b1/"
cat >"$b1/zarf.yaml" <<'YAML'
apiVersion: zarf.dev/v1beta1
kind: ZarfPackageConfig
metadata:
  name: demo-beta
  description: kubectl-bundle example package (v1beta1 schema)
  version: 1.0.0
components:
  - name: app
    manifests:
      - name: demo
        namespace: demo
        files:
          - configmap.yaml
    files:
      - source: app.conf
        destination: /etc/demo/app.conf
YAML
create "$b1" "$out/v1beta1" "${sign[@]}"

# A split package: 1.5 MB of incompressible data, 1 MB parts.
big="$work/big"
mkdir -p "$big"
head -c 1500000 /dev/urandom >"$big/payload.bin"
cat >"$big/zarf.yaml" <<'YAML'
kind: ZarfPackageConfig
metadata:
  name: big
  description: kubectl-bundle split package example
  version: 1.0.0
components:
  - name: payload
    required: true
    files:
      - source: payload.bin
        target: /opt/payload.bin
YAML
create "$big" "$out/split" "${sign[@]}" --max-package-size 1

gen legacy-sign "$keys/cosign.key" testpass "$out/unsigned/$name.tar.zst" "$out/legacy/$name.tar.zst"
gen keyless "$out/$name.tar.zst" "$out/keyless/$name.tar.zst" "$keys/trusted_root.json" \
  release@example.com https://issuer.example.com

for kind in truncate corrupt-zstd not-an-archive duplicate-member symlink-member unclean-path \
  bad-zarf-yaml aggregate-mismatch member-modified member-missing member-unlisted zarf-yaml-modified; do
  gen tamper "$kind" "$out/$name.tar.zst" "$out/tampered/$kind.tar.zst"
done
gen tamper truncate-at-member "$out/$name.tar.zst" "$out/tampered/truncate-at-member.tar"
for kind in sbom-invalid sbom-missing-image sbom-absent; do
  gen tamper "$kind" "$out/unsigned/$name.tar.zst" "$out/tampered/$kind.tar.zst"
done

ZARF="$zarf" "$root/hack/gen-digest-testdata.sh"
ZARF="$zarf" "$root/hack/gen-krops-testdata.sh"

du -sh "$out"
