#!/usr/bin/env bash
# Copies the Sigstore public-good trusted root that the pinned zarf embeds
# (make trusted-root) into internal/verify/trustedroot/, with a record of its
# zarf version, sha256 and date (the pinned zarf release's date: the root is
# no newer than that). verify uses it when --trusted-root is not given; a
# test fails when the copy differs from the pinned module's file.
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/internal/verify/trustedroot"
module=github.com/zarf-dev/zarf
inside=src/pkg/signing/embedded_trusted_root.json

cd "$root/hack/tools"
go mod download "$module"
read -r dir version date < <(go list -m -f '{{.Dir}} {{.Version}} {{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "$module")
src="$dir/$inside"
[ -f "$src" ] || { echo "error: $module $version has no $inside" >&2; exit 3; }

mkdir -p "$out"
install -m 0644 "$src" "$out/embedded_trusted_root.json"
sum=$(sha256sum "$out/embedded_trusted_root.json" | cut -d' ' -f1)
cat >"$out/source.json" <<JSON
{
  "module": "$module",
  "version": "$version",
  "path": "$inside",
  "sha256": "$sum",
  "date": "$date"
}
JSON
echo "copied $module $version $inside (sha256 $sum, $date) into $out"
