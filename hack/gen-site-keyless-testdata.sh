#!/usr/bin/env bash
# Regenerates testdata/packages/site/keyless with the real zarf: the site's
# package as its CI signs it (keyless, GitHub's OIDC workflow identity),
# here by one test CA whose trusted root is testdata/keys/site_trusted_root.json
# (no one here can sign under the public-good root).
#   krops-airgap 0.1.0: fixed names, as offline-run.sh deploys the site today
#   krops-airgap 0.2.0: declares SLOT, fit for blue/green
# README's "Migrating a site from offline-run.sh" runs on these
# (e2e/testdata/script/migrate.txtar).
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
zarf="${ZARF:-$root/bin/testbin/zarf}"
out="$root/testdata/packages/site/keyless"
src="$root/testdata/src/site"
keys="$root/testdata/keys"
identity="https://github.com/polarsquad/krops/.github/workflows/air-gapped.yml@refs/heads/main"
issuer="https://token.actions.githubusercontent.com"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

rm -rf "$out"
mkdir -p "$out"
pairs=()
for v in 0.1.0:fixed 0.2.0:slot; do
  version="${v%%:*}" kind="${v#*:}"
  mkdir -p "$work/$version"
  sed -e "s/^  name: site-$kind$/  name: krops-airgap/" -e "s/^  version: 1.0.0$/  version: $version/" \
    "$src/zarf-$kind.yaml" > "$work/$version/zarf.yaml"
  grep -q '^  name: krops-airgap$' "$work/$version/zarf.yaml"
  cp "$src"/cluster*.yaml "$work/$version/"
  "$zarf" package create "$work/$version" --confirm -a arm64 -o "$work" --no-color --log-level warn \
    --cache "$work/cache" --tmpdir "$work" --skip-sbom
  pairs+=("$work/zarf-package-krops-airgap-arm64-$version.tar.zst" "$out/zarf-package-krops-airgap-arm64-$version.tar.zst")
done
(cd "$root" && go run ./hack/gentestdata keyless "${pairs[0]}" "${pairs[1]}" "$keys/site_trusted_root.json" \
  "$identity" "$issuer" "${pairs[@]:2}")
ls -l "$out"
